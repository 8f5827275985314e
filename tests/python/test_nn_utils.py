"""tessera.nn.utils against Keras 3 on JAX where Keras runs without
TensorFlow (pad_sequences, normalize, Progbar's averages, serialization's
format), and against NumPy specifications of Keras's documented behaviour
where Keras needs tf.data (timeseries_dataset_from_array, split_dataset)."""

import os
import random

import numpy as np
import pytest

import tessera
import tessera.nn as nn
from tessera.nn import utils as U


SEQS = [[1, 2, 3], [4], [], [5, 6, 7, 8, 9]]


@pytest.mark.parametrize("kw", [{}, dict(maxlen=3),
                                dict(padding="post", truncating="post", maxlen=2, value=-1),
                                dict(dtype="float32", value=0.5), dict(truncating="post")])
def test_pad_sequences_matches_keras(keras, kw):
    a, b = U.pad_sequences(SEQS, **kw), keras.utils.pad_sequences(SEQS, **kw)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


def test_pad_sequences_vectors_and_errors(keras):
    seqs = [np.ones((2, 3)), np.zeros((4, 3))]
    np.testing.assert_array_equal(U.pad_sequences(seqs, maxlen=3, dtype="float32"),
                                  keras.utils.pad_sequences(seqs, maxlen=3, dtype="float32"))
    # (Keras's own crashes on maxlen=0: its x[-0:] is the whole sequence)
    assert U.pad_sequences(SEQS, maxlen=0).shape == (4, 0)
    with pytest.raises(ValueError, match=r"\[pad_sequences\] padding must be 'pre' or 'post'"):
        U.pad_sequences(SEQS, padding="left")
    with pytest.raises(ValueError, match="cannot hold the padding value"):
        U.pad_sequences([["a"]], value="x")
    with pytest.raises(ValueError, match=r"sequences\[1\] has samples of shape"):
        U.pad_sequences([np.ones((2, 3)), np.ones((2, 4))])


def test_normalize_matches_keras(keras):
    x = np.random.default_rng(0).normal(size=(4, 3))
    np.testing.assert_allclose(U.normalize(x), keras.utils.normalize(x))
    np.testing.assert_allclose(U.normalize(x, order=1), keras.utils.normalize(x, order=1))
    np.testing.assert_allclose(U.normalize(x, axis=0, order=1), x / np.abs(x).sum(0))
    z = np.zeros((2, 3))
    np.testing.assert_array_equal(U.normalize(z), keras.utils.normalize(z))


def _windows_spec(data, targets, length, stride, rate, start, end, seed):
    """Keras's documented windows, in NumPy."""
    end = len(data) if end is None else end
    n = min(end - start - (length - 1) * rate, len(targets))
    pos = np.arange(0, n, stride)
    if seed is not None:
        np.random.RandomState(seed).shuffle(pos)
    return (np.stack([data[start + p + np.arange(length) * rate] for p in pos]),
            targets[start + pos])


@pytest.mark.parametrize("args", [(5, 2, 2, 1, 18, 1), (3, 1, 1, None, None, None),
                                  (4, 3, 1, 2, None, 7)])
def test_timeseries_dataset_from_array(args):
    length, stride, rate, start, end, seed = args
    data = np.arange(40).reshape(20, 2)
    targets = np.arange(20) * 10
    ds = U.timeseries_dataset_from_array(data, targets, length, sequence_stride=stride,
                                         sampling_rate=rate, batch_size=3,
                                         shuffle=seed is not None, seed=seed,
                                         start_index=start, end_index=end)
    xs, ys = zip(*ds)
    assert all(len(x) <= 3 for x in xs)
    want_x, want_y = _windows_spec(data, targets, length, stride, rate, start or 0, end, seed)
    np.testing.assert_array_equal(np.concatenate(xs), want_x)
    np.testing.assert_array_equal(np.concatenate(ys), want_y)


def test_timeseries_feeds_fit_and_errors():
    data = np.random.default_rng(1).normal(size=(50, 2)).astype(np.float32)
    ds = U.timeseries_dataset_from_array(data, data[:, 0], 4, batch_size=8)
    model = nn.Sequential([nn.Input((4, 2)), nn.Flatten(), nn.Dense(1)])
    model.compile("sgd", "mse")
    assert len(model.fit(ds, epochs=1, verbose=0).history["loss"]) == 1
    only_x = U.timeseries_dataset_from_array(data, None, 4, batch_size=None)
    assert next(iter(only_x)).shape == (4, 2)
    with pytest.raises(ValueError, match="end_index must be lower than the length"):
        U.timeseries_dataset_from_array(data, None, 4, end_index=50)
    with pytest.raises(ValueError, match="same length"):
        U.timeseries_dataset_from_array(data, data[:3], 4)
    with pytest.raises(ValueError, match="no window"):
        U.timeseries_dataset_from_array(data[:3], None, 4)


def test_split_dataset_sizes_and_shuffle():
    x, y = np.arange(10), np.arange(10) * 2
    left, right = U.split_dataset((x, y), left_size=0.7, shuffle=True, seed=3)
    order = list(range(10))
    random.seed(3)
    random.shuffle(order)
    assert [int(a) for a, _ in left] == order[:7]
    assert [int(a) for a, _ in right] == order[7:]
    assert all(b == 2 * a for a, b in list(left) + list(right))
    left, right = U.split_dataset(x, right_size=3)
    assert [int(v) for v in left] == list(range(7)) and [int(v) for v in right] == [7, 8, 9]
    left, right = U.split_dataset(x, left_size=2, right_size=3)
    assert [int(v) for v in right] == [7, 8, 9]
    batched = tessera.data.Dataset.from_tensor_slices((x, y)).batch(4)
    left, right = U.split_dataset(batched, left_size=0.5)
    assert left.batch_size == 4 and [len(b[0]) for b in left] == [4, 1]
    with pytest.raises(ValueError, match="would be empty"):
        U.split_dataset(x, left_size=0.01)
    with pytest.raises(ValueError, match=r"more than 1"):
        U.split_dataset(x, left_size=0.6, right_size=0.6)
    with pytest.raises(ValueError, match="give left_size or right_size"):
        U.split_dataset(x)


class _Batches(U.PyDataset):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.begins = self.ends = 0

    def __len__(self):
        return 3

    def __getitem__(self, i):
        x = np.arange(i * 4, i * 4 + 4, dtype=np.float32)[:, None] / 10
        return x, 2 * x

    def on_epoch_begin(self):
        self.begins += 1

    def on_epoch_end(self):
        self.ends += 1


def test_py_dataset_in_fit_evaluate_predict():
    data = _Batches(workers=2, use_multiprocessing=False, max_queue_size=4)
    assert data.workers == 2 and data.num_batches == 3
    model = nn.Sequential([nn.Input((1,)), nn.Dense(1)])
    model.compile("sgd", "mse")
    seen = []
    cb = nn.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(b))
    hist = model.fit(data, epochs=2, verbose=0, callbacks=[cb])
    assert len(hist.history["loss"]) == 2 and seen == [0, 1, 2] * 2
    assert data.ends == 2 and data.begins == 2
    x = np.concatenate([data[i][0] for i in range(3)])
    np.testing.assert_allclose(model.evaluate(data, verbose=0),
                               model.evaluate(x, 2 * x, verbose=0), rtol=1e-5)
    np.testing.assert_allclose(model.predict(data, verbose=0), model.predict(x, verbose=0))

    class Bad(U.PyDataset):
        def __len__(self):
            return 1

    with pytest.raises(NotImplementedError, match="must define __getitem__"):
        model.fit(Bad(), verbose=0)
    with pytest.raises(ValueError, match="workers must be an int"):
        _Batches(workers=0)


def test_progbar_averages_as_keras(keras, capsys):
    for kw in ({}, {"stateful_metrics": ["acc"]}, {"stateless_metrics": ["loss"]}):
        ours = U.Progbar(5, **kw)
        theirs = keras.utils.Progbar(5, verbose=0, **kw)
        for i in (1, 3, 4, 5):
            vals = [("loss", float(i) * 1.5), ("acc", i / 4)]
            ours.update(i, vals)
            theirs.update(i, vals)
            for k in ("loss", "acc"):
                v = theirs._values[k]
                assert ours.value(k) == pytest.approx(float(v[0] / max(1, v[1]))), (kw, i, k)
    out = capsys.readouterr().out
    assert "5/5" in out and "loss: " in out
    with pytest.raises(ValueError, match="not both"):
        U.Progbar(3, stateful_metrics=["a"], stateless_metrics=["b"])


def test_get_file_local_only(tmp_path):
    src = tmp_path / "data.bin"
    src.write_bytes(b"abc" * 100)
    import hashlib

    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    path = U.get_file("copy.bin", origin=f"file://{src}", cache_dir=tmp_path / "cache",
                      file_hash=digest)
    assert open(path, "rb").read() == src.read_bytes()
    assert path == str(tmp_path / "cache" / "datasets" / "copy.bin")
    assert U.get_file(origin=str(src), cache_dir=tmp_path / "c2").endswith("data.bin")
    with pytest.raises(ValueError, match="does not download"):
        U.get_file("x", origin="https://example.com/x.npz", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="expected hash"):
        U.get_file("y.bin", origin=str(src), cache_dir=tmp_path, file_hash="0" * 64)
    assert not os.path.exists(tmp_path / "datasets" / "y.bin")
    assert not [f for f in os.listdir(tmp_path / "datasets") if f.startswith(".get_file")]
    with pytest.raises(ValueError, match="without folders"):
        U.get_file("../evil", origin=str(src), cache_dir=tmp_path)


def test_serialization_round_trip(keras):
    layer = nn.Dense(3, activation="relu", name="d1")
    cfg = U.serialize_keras_object(layer)
    kcfg = keras.saving.serialize_keras_object(keras.layers.Dense(3, name="d1"))
    assert set(cfg) == set(kcfg) and cfg["class_name"] == "Dense"
    back = U.deserialize_keras_object(cfg)
    assert isinstance(back, nn.Dense) and back.units == 3 and back.name == "d1"

    @U.register_keras_serializable(package="Tests")
    class Scale(nn.Layer):
        def __init__(self, k=2.0, **kw):
            super().__init__(**kw)
            self.k = k

        def call(self, x):
            return x * self.k

        def get_config(self):
            return {**super().get_config(), "k": self.k}

    cfg = U.serialize_keras_object(Scale(3.0))
    assert cfg["registered_name"] == "Tests>Scale"
    assert U.deserialize_keras_object(cfg).k == 3.0

    @U.register_keras_serializable(package="Tests")
    def my_fn(x):
        return x

    assert U.deserialize_keras_object(U.serialize_keras_object(my_fn)) is my_fn
    with pytest.raises(ValueError, match="neither one of tessera's"):
        U.deserialize_keras_object({"module": "os", "class_name": "system", "config": {}})
    assert U.get_custom_objects()["Tests>Scale"] is Scale


def test_plot_model(tmp_path):
    inp = nn.Input((3,))
    a, b = nn.Dense(2, name="a")(inp), nn.Dense(2, name="b")(inp)
    model = nn.Model(inp, nn.Add(name="sum")([a, b]))
    dot = U.model_to_dot(model).to_string()
    assert "a (Dense)" in dot and "sum (Add)" in dot and dot.count("->") == 2
    U.plot_model(model, to_file=tmp_path / "m.png", show_shapes=True)
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    seq = nn.Sequential([nn.Input((2,)), nn.Dense(2, name="x"), nn.Dense(1, name="y")])
    U.plot_model(seq, to_file=tmp_path / "s.dot")
    assert "->" in (tmp_path / "s.dot").read_text()


def _tree(root):
    """pos/ (3 files, one nested), neg/ (2), ignored: a hidden folder, a
    non-.txt file, links out of the folder."""
    files = {"neg/b.txt": "bad film", "neg/a.txt": "Awful, really awful",
             "pos/z.txt": "great", "pos/m.txt": "good movie", "pos/deep/x.txt": "fine",
             ".hidden/h.txt": "hidden", "pos/notes.md": "not text data"}
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    outside = root.parent / (root.name + "-outside")
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside / "secret.txt", root / "pos" / "link.txt")
    os.symlink(outside, root / "neg" / "out")
    return ["neg/a.txt", "neg/b.txt", "pos/m.txt", "pos/z.txt", "pos/deep/x.txt"]


def test_text_dataset_from_directory(tmp_path):
    root = tmp_path / "reviews"
    order = _tree(root)
    ds = U.text_dataset_from_directory(root, shuffle=False, batch_size=2, verbose=False)
    assert ds.class_names == ["neg", "pos"]
    texts, labels = map(np.concatenate, zip(*ds))
    want = [(root / r).read_text() for r in order]
    assert texts.tolist() == want and labels.tolist() == [0, 0, 1, 1, 1]
    shuffled = U.text_dataset_from_directory(root, seed=5, batch_size=None, verbose=False,
                                             label_mode="categorical", max_length=4)
    perm = list(range(5))
    np.random.RandomState(5).shuffle(perm)
    got = list(shuffled)
    assert [t for t, _ in got] == [want[i][:4] for i in perm]
    np.testing.assert_array_equal(np.stack([y for _, y in got]),
                                  np.eye(2)[[labels[i] for i in perm]])
    train, val = U.text_dataset_from_directory(root, seed=1, validation_split=0.4, subset="both",
                                               label_mode="binary", verbose=False)
    assert [len(t) for t, _ in train] == [3] and [len(t) for t, _ in val] == [2]
    assert sorted(train.file_paths + val.file_paths) == sorted(str(root / r) for r in order)
    with pytest.raises(ValueError, match="needs a seed"):
        U.text_dataset_from_directory(root, validation_split=0.2, subset="training")
    with pytest.raises(ValueError, match="2 labels for the 6 files"):
        U.text_dataset_from_directory(root, labels=[0, 1], verbose=False)


def test_text_dataset_follows_links_only_inside(tmp_path):
    root = tmp_path / "r"
    order = _tree(root)
    os.symlink(root / "pos" / "deep", root / "neg" / "inside")
    ds = U.text_dataset_from_directory(root, shuffle=False, batch_size=None, verbose=False)
    assert len(list(ds)) == len(order)  # no link followed
    ds = U.text_dataset_from_directory(root, shuffle=False, batch_size=None, verbose=False,
                                       follow_links=True)
    texts = [t for t, _ in ds]
    assert "secret" not in texts and texts.count("fine") == 2  # the inside link only


def test_image_dataset_from_directory(tmp_path):
    from PIL import Image  # noqa: PLC0415 - used by the test to write images

    rng = np.random.default_rng(0)
    arrays = {}
    for cls in ("cat", "dog"):
        (tmp_path / cls).mkdir()
        for k in range(2):
            a = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
            Image.fromarray(a).save(tmp_path / cls / f"{k}.png")
            arrays[f"{cls}/{k}.png"] = a
    ds = U.image_dataset_from_directory(tmp_path, image_size=(3, 4), shuffle=False,
                                        batch_size=4, verbose=False)
    (x, y), = list(ds)
    assert x.shape == (4, 3, 4, 3) and x.dtype == np.float32 and y.tolist() == [0, 0, 1, 1]
    want = nn.Resizing(3, 4)(np.stack([arrays[k].astype(np.float32) for k in sorted(arrays)]))
    np.testing.assert_allclose(x, want, atol=1e-3)
    gray = U.image_dataset_from_directory(tmp_path, image_size=(6, 8), color_mode="grayscale",
                                          shuffle=False, batch_size=None, verbose=False,
                                          label_mode=None)
    first = next(iter(gray))
    assert first.shape == (6, 8, 1)
    # a header claiming a huge image is refused before decoding
    png = bytearray((tmp_path / "cat" / "0.png").read_bytes())
    png[16:24] = (100000).to_bytes(4, "big") * 2  # width, height
    import zlib

    png[29:33] = zlib.crc32(bytes(png[12:29])).to_bytes(4, "big")
    (tmp_path / "cat" / "0.png").write_bytes(bytes(png))
    with pytest.raises(ValueError, match=r"0.png claims (100000x100000 pixels|more pixels)"):
        U.image_dataset_from_directory(tmp_path, verbose=False)


def test_image_pixel_cap_below_pillows(tmp_path, monkeypatch):
    from PIL import Image  # noqa: PLC0415

    from tessera.nn import _directory_datasets as D

    (tmp_path / "a").mkdir()
    Image.fromarray(np.zeros((4, 5, 3), np.uint8)).save(tmp_path / "a" / "i.png")
    monkeypatch.setattr(D, "_MAX_IMAGE_PIXELS", 19)
    with pytest.raises(ValueError, match=r"i.png claims 5x4 pixels, more than 19"):
        U.image_dataset_from_directory(tmp_path, verbose=False)
