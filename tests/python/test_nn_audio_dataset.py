"""utils.audio_dataset_from_directory on WAV files written here. Keras's reads
them with TensorFlow (tf.audio.decode_wav), which the environment lacks, so the
expected values are computed from the samples written: PCM integers divided by
2^(bits - 1), cut or zero-padded as Keras's decode_wav(desired_samples) and
padded_batch do, labels and splits as Keras's index_directory gives them."""

import os
import struct
import wave

import numpy as np
import pytest

from tessera import nn as tnn

RNG = np.random.default_rng(3)
audio_dataset = tnn.utils.audio_dataset_from_directory


def write_wav(path, samples, width=2, rate=8000):
    """samples: ints of shape (frames, channels) in the width's range."""
    samples = np.asarray(samples)
    if samples.ndim == 1:
        samples = samples[:, None]
    if width == 1:
        raw = (samples + 128).astype(np.uint8).tobytes()
    elif width == 3:
        v = samples.astype("<i4").reshape(-1, 1).view(np.uint8)[:, :3]
        raw = v.tobytes()
    else:
        raw = samples.astype(f"<i{width}").tobytes()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(raw)


def pcm(frames, channels=1, width=2):
    half = 1 << (8 * width - 1)
    return RNG.integers(-half, half, size=(frames, channels))


def make_tree(root, lengths):
    """{class: [frames of each file]} -> {path: float32 samples (frames, 1)}."""
    written = {}
    for cls, frame_counts in lengths.items():
        os.makedirs(root / cls, exist_ok=True)
        for i, n in enumerate(frame_counts):
            s = pcm(n)
            write_wav(root / cls / f"clip{i}.wav", s)
            written[str(root / cls / f"clip{i}.wav")] = (s / 32768.0).astype(np.float32)
    return written


def fit(a, n):
    out = np.zeros((n, a.shape[1]), np.float32)
    out[:min(n, len(a))] = a[:n]
    return out


def test_fixed_length_samples_and_labels(tmp_path):
    written = make_tree(tmp_path, {"no": [50, 80, 64], "yes": [70, 30]})
    ds = audio_dataset(tmp_path, batch_size=2, output_sequence_length=64, seed=5, verbose=False)
    assert ds.class_names == ["no", "yes"]
    assert sorted(ds.file_paths) == sorted(written)
    xs, ys = zip(*ds)
    assert [len(x) for x in xs] == [2, 2, 1]
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert x.dtype == np.float32 and x.shape == (5, 64, 1) and y.dtype == np.int32
    for k, p in enumerate(ds.file_paths):
        np.testing.assert_array_equal(x[k], fit(written[p], 64))
        assert y[k] == ds.class_names.index(os.path.basename(os.path.dirname(p)))
    # the same seed, the same order; another seed, another
    again = audio_dataset(tmp_path, batch_size=2, output_sequence_length=64, seed=5,
                          verbose=False)
    assert again.file_paths == ds.file_paths


def test_batches_padded_to_their_longest_and_training(tmp_path):
    written = make_tree(tmp_path, {"a": [40, 90, 25], "b": [60, 33]})
    ds = audio_dataset(tmp_path, batch_size=2, shuffle=False, verbose=False)
    assert ds.file_paths == sorted(written)
    batches = list(ds)
    assert len(ds) == len(batches) == 3
    for i, (x, y) in enumerate(batches):
        paths = ds.file_paths[2 * i:2 * i + 2]
        longest = max(len(written[p]) for p in paths)
        assert x.shape == (len(paths), longest, 1)
        for row, p in zip(x, paths):
            np.testing.assert_array_equal(row, fit(written[p], longest))
        np.testing.assert_array_equal(y, [0 if "/a/" in p else 1 for p in paths])
    inp = tnn.Input((None, 1))
    out = tnn.layers.Dense(2)(tnn.layers.GlobalAveragePooling1D()(inp))
    model = tnn.Model(inp, out)
    model.compile("sgd", "sparse_categorical_crossentropy")
    history = model.fit(ds, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    # unbatched: each file's samples as they are
    single = audio_dataset(tmp_path, batch_size=None, shuffle=False, label_mode=None,
                           verbose=False)
    assert [s.shape for s in single] == [written[p].shape for p in sorted(written)]


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_sample_widths_and_channels(tmp_path, width):
    os.makedirs(tmp_path / "c")
    s = pcm(37, channels=2, width=width)
    write_wav(tmp_path / "c" / "x.wav", s, width=width)
    (x, y), = list(audio_dataset(tmp_path, verbose=False))
    want = (s / float(1 << (8 * width - 1))).astype(np.float32)
    assert x.shape == (1, 37, 2)
    np.testing.assert_allclose(x[0], want, rtol=0, atol=1e-7 if width < 4 else 1e-6)
    assert np.all(x >= -1.0) and np.all(x < 1.0)


def test_splits_label_modes_and_no_labels(tmp_path):
    make_tree(tmp_path, {"a": [20] * 6, "b": [20] * 4})
    train, val = audio_dataset(tmp_path, validation_split=0.3, subset="both", seed=9,
                               batch_size=4, verbose=False)
    assert len(train.file_paths) == 7 and len(val.file_paths) == 3
    assert not set(train.file_paths) & set(val.file_paths)
    only_val = audio_dataset(tmp_path, validation_split=0.3, subset="validation", seed=9,
                             verbose=False)
    assert only_val.file_paths == val.file_paths
    (x, y), = list(audio_dataset(tmp_path, label_mode="categorical", batch_size=10,
                                 verbose=False))
    assert y.shape == (10, 2) and y.dtype == np.float32 and np.all(y.sum(1) == 1)
    (x, y), = list(audio_dataset(tmp_path, label_mode="binary", batch_size=10, verbose=False))
    assert y.shape == (10, 1) and set(np.unique(y)) == {0.0, 1.0}
    (x,) = [b for b in audio_dataset(tmp_path, labels=None, batch_size=10, verbose=False)]
    assert np.asarray(x).shape == (10, 20, 1)


def test_given_labels_and_class_names(tmp_path):
    written = make_tree(tmp_path, {"a": [15, 15], "b": [15], "c": [15]})
    ds = audio_dataset(tmp_path, class_names=["c", "a"], shuffle=False, verbose=False)
    assert ds.class_names == ["c", "a"]
    (x, y), = list(ds)
    assert ds.file_paths == [str(tmp_path / "c" / "clip0.wav"),
                             str(tmp_path / "a" / "clip0.wav"), str(tmp_path / "a" / "clip1.wav")]
    np.testing.assert_array_equal(y, [0, 1, 1])
    np.testing.assert_array_equal(x[0], written[ds.file_paths[0]])
    # labels given for the files in Keras's order (sorted paths), shuffled with them
    ds = audio_dataset(tmp_path, labels=[3, 1, 4, 1], seed=2, verbose=False)
    (x, y), = list(ds)
    given = dict(zip(sorted(written), [3, 1, 4, 1]))
    assert [given[p] for p in ds.file_paths] == list(y)
    assert ds.class_names == ["1", "3", "4"]
    for row, p in zip(x, ds.file_paths):
        np.testing.assert_array_equal(row, written[p])


def test_links_out_of_the_tree_are_not_followed(tmp_path):
    outside = tmp_path / "outside"
    os.makedirs(outside)
    write_wav(outside / "secret.wav", pcm(10))
    root = tmp_path / "data"
    make_tree(root, {"a": [12], "b": [12]})
    os.symlink(outside / "secret.wav", root / "a" / "linked.wav")
    os.symlink(outside, root / "b" / "linked_dir")
    os.symlink(outside, root / "c")
    for follow in (False, True):
        ds = audio_dataset(root, follow_links=follow, verbose=False)
        assert ds.class_names == ["a", "b"]
        assert all("secret" not in p for p in ds.file_paths), ds.file_paths
        assert len(ds.file_paths) == 2


def test_corrupt_truncated_and_lying_wav_files_are_named(tmp_path):
    os.makedirs(tmp_path / "a")
    bad = tmp_path / "a" / "bad.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00not a wave file at all")
    with pytest.raises(ValueError, match=r"\[audio_dataset_from_directory\] .*bad.wav is not a "
                                         r"readable PCM WAV file"):
        audio_dataset(tmp_path, verbose=False)
    os.remove(bad)
    good = tmp_path / "a" / "cut.wav"
    write_wav(good, pcm(400))
    raw = good.read_bytes()
    good.write_bytes(raw[:len(raw) - 300])
    with pytest.raises(ValueError, match=r"cut.wav is truncated: its header claims 400 frames"):
        audio_dataset(tmp_path, verbose=False)
    # a header claiming 2^31 - 1 bytes of samples: refused from the file's size
    lying = bytearray(raw)
    at = lying.index(b"data") + 4
    lying[at:at + 4] = struct.pack("<I", 0x7FFFFFFF)
    good.write_bytes(bytes(lying))
    with pytest.raises(ValueError, match=r"cut.wav is truncated: its header claims 1073741823 "
                                         r"frames"):
        audio_dataset(tmp_path, verbose=False)


def test_argument_errors(tmp_path):
    make_tree(tmp_path, {"a": [10], "b": [12], "c": [14]})
    w = r"\[audio_dataset_from_directory\] "
    with pytest.raises(ValueError, match=w + "cannot set both ragged and output_sequence"):
        audio_dataset(tmp_path, ragged=True, output_sequence_length=5)
    with pytest.raises(ValueError, match=w + r"ragged=True is not supported"):
        audio_dataset(tmp_path, ragged=True)
    with pytest.raises(ValueError, match=w + "format must be 'tf' or 'grain'"):
        audio_dataset(tmp_path, format="torch")
    with pytest.raises(ValueError, match=w + "label_mode='binary' needs exactly 2 classes"):
        audio_dataset(tmp_path, label_mode="binary", verbose=False)
    with pytest.raises(ValueError, match=w + r".*sampled at 8000 Hz, not sampling_rate=16000"):
        audio_dataset(tmp_path, sampling_rate=16000, verbose=False)
    with pytest.raises(ValueError, match=w + "output_sequence_length must be a positive int"):
        audio_dataset(tmp_path, output_sequence_length=0)
    with pytest.raises(ValueError, match=w + "validation_split with shuffle needs a seed"):
        audio_dataset(tmp_path, validation_split=0.5, subset="training")
    os.makedirs(tmp_path / "empty" / "x")
    with pytest.raises(ValueError, match=w + "no audio files found in"):
        audio_dataset(tmp_path / "empty", verbose=False)
    write_wav(tmp_path / "b" / "stereo.wav", pcm(12, channels=2))
    with pytest.raises(ValueError, match=w + r".*stereo.wav has 2 channels"):
        audio_dataset(tmp_path, shuffle=False, verbose=False)
