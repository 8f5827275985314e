"""tessera.nn's preprocessing layers against Keras 3 on JAX where Keras runs
without TensorFlow (CategoryEncoding, Discretization, the image layers, with
degenerate random ranges so Keras's draw is known), and against Keras's
documented behaviour (its test vectors and index layout) for the layers
Keras computes with TensorFlow (TextVectorization, StringLookup,
IntegerLookup, Hashing)."""


import numpy as np
import pytest

import tessera
import tessera.nn as nn
from tessera.nn import _hashes

RNG = np.random.default_rng(3)
IMG = RNG.uniform(0, 255, (2, 7, 9, 3)).astype(np.float32)


def _same(t, k, atol=3e-4):
    t, k = np.asarray(t), np.asarray(k)
    assert t.shape == k.shape
    np.testing.assert_allclose(t, k, atol=atol, rtol=1e-5)


# ----------------------------------------------------------------- images

@pytest.mark.parametrize("kw", [dict(height=4, width=5), dict(height=10, width=12),
                                dict(height=4, width=5, interpolation="nearest"),
                                dict(height=14, width=3, interpolation="nearest"),
                                dict(height=4, width=4, crop_to_aspect_ratio=True),
                                dict(height=4, width=4, pad_to_aspect_ratio=True)])
def test_resizing_matches_keras(keras, kw):
    _same(nn.Resizing(**kw)(IMG), keras.layers.Resizing(**kw)(IMG))


def test_resizing_channels_first_and_single_image(keras):
    x = np.moveaxis(IMG, -1, 1)
    _same(nn.Resizing(3, 4, data_format="channels_first")(x),
          keras.layers.Resizing(3, 4, data_format="channels_first")(x))
    _same(nn.Resizing(3, 4)(IMG[0]), keras.layers.Resizing(3, 4)(IMG[0]))


@pytest.mark.parametrize("hw", [(4, 5), (7, 9), (10, 12), (3, 3)])
def test_center_crop_matches_keras(keras, hw):
    _same(nn.CenterCrop(*hw)(IMG), keras.layers.CenterCrop(*hw)(IMG))


@pytest.mark.parametrize("fill", ["reflect", "constant", "nearest", "wrap"])
@pytest.mark.parametrize("f", [0.25, 0.1, -0.05])
def test_random_rotation_fixed_angle_matches_keras(keras, fill, f):
    t = nn.RandomRotation((f, f), fill_mode=fill, fill_value=7.0)(IMG)
    k = keras.layers.RandomRotation((f, f), fill_mode=fill, fill_value=7.0)(IMG)
    _same(t, k)


@pytest.mark.parametrize("f", [0.3, -0.3])
def test_random_zoom_and_translation_fixed_matches_keras(keras, f):
    L = keras.layers
    _same(nn.RandomZoom((f, f))(IMG), L.RandomZoom((f, f))(IMG))
    _same(nn.RandomZoom((f, f), (0.1, 0.1))(IMG), L.RandomZoom((f, f), (0.1, 0.1))(IMG))
    _same(nn.RandomTranslation((f, f), (0.2, 0.2))(IMG),
          L.RandomTranslation((f, f), (0.2, 0.2))(IMG))
    _same(nn.RandomTranslation((f, f), (0.2, 0.2), interpolation="nearest",
                               fill_mode="constant")(IMG),
          L.RandomTranslation((f, f), (0.2, 0.2), interpolation="nearest",
                              fill_mode="constant")(IMG))


def test_random_layers_identity_at_inference(keras):
    for layer in (nn.RandomFlip(), nn.RandomRotation(0.2), nn.RandomZoom(0.2),
                  nn.RandomTranslation(0.2, 0.2), nn.RandomContrast(0.5),
                  nn.RandomCrop(4, 5)):
        np.testing.assert_array_equal(layer(IMG, training=False), IMG)
    # Keras agrees on RandomCrop (identity at inference, not a centre crop)
    _same(nn.RandomCrop(4, 4)(IMG, training=False),
          keras.layers.RandomCrop(4, 4)(IMG, training=False))


def test_random_flip_statistics():
    x = np.arange(2 * 3 * 1, dtype=np.float32).reshape(1, 2, 3, 1).repeat(400, axis=0)
    out = nn.RandomFlip("horizontal", seed=1)(x)
    flipped = np.all(out == x[:, :, ::-1], axis=(1, 2, 3))
    kept = np.all(out == x, axis=(1, 2, 3))
    assert np.all(flipped | kept) and 150 < flipped.sum() < 250
    # as Keras's: one draw per image flips it along both axes or along neither
    out = nn.RandomFlip(seed=2)(x)
    kinds = {tuple(o.ravel()) for o in out}
    assert kinds == {tuple(v.ravel()) for v in (x[0], x[0, ::-1, ::-1])}


def test_random_crop_windows_and_contrast_range():
    out = nn.RandomCrop(4, 5, seed=0)(IMG)
    assert out.shape == (2, 4, 5, 3)
    windows = [(t, l) for t in range(4) for l in range(5)
               if np.array_equal(IMG[:, t:t + 4, l:l + 5], out)]
    assert len(windows) == 1
    layer = nn.RandomContrast((0.4, 0.4), seed=0)
    x = RNG.uniform(50, 200, (300, 4, 4, 1)).astype(np.float32)
    out = layer(x)
    dev_in = x - x.mean(axis=(1, 2), keepdims=True)
    dev_out = out - x.mean(axis=(1, 2), keepdims=True)
    f = (dev_out * dev_in).sum(axis=(1, 2, 3)) / (dev_in ** 2).sum(axis=(1, 2, 3))
    assert f.min() >= 0.6 - 1e-4 and f.max() <= 1.4 + 1e-4 and f.std() > 0.15
    assert out.min() >= 0 and out.max() <= 255


def test_random_rotation_statistics_and_seed():
    a = nn.RandomRotation(0.1, seed=5)(IMG)
    b = nn.RandomRotation(0.1, seed=5)(IMG)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, IMG)


# ----------------------------------------------------------------- categorical

@pytest.mark.parametrize("mode", ["one_hot", "multi_hot", "count"])
def test_category_encoding_matches_keras(keras, mode):
    for x in (np.array([[1, 2, 2], [0, 4, 4]]), np.array([1, 2, 2])):
        _same(nn.CategoryEncoding(5, output_mode=mode)(x),
              keras.layers.CategoryEncoding(5, output_mode=mode)(x))
    x, w = np.array([[1, 2, 2]]), np.array([[0.5, 1.0, 2.0]])
    _same(nn.CategoryEncoding(5, output_mode="count")(x, count_weights=w),
          keras.layers.CategoryEncoding(5, output_mode="count")(x, count_weights=w))


def test_category_encoding_errors():
    with pytest.raises(ValueError, match=r"\[CategoryEncoding\] input value 7 is out of range"):
        nn.CategoryEncoding(5)(np.array([1, 7]))
    with pytest.raises(ValueError, match="num_tokens"):
        nn.CategoryEncoding(0)
    with pytest.raises(ValueError, match="sparse"):
        nn.CategoryEncoding(3, sparse=True)


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
def test_discretization_boundaries_match_keras(keras, mode):
    x = RNG.normal(size=(6, 2)).astype(np.float32)
    _same(nn.Discretization([-0.5, 0.0, 1.0], output_mode=mode)(x),
          keras.layers.Discretization([-0.5, 0.0, 1.0], output_mode=mode)(x))


def test_discretization_adapt_matches_keras(keras):
    # Keras's adapt goes through tf.data; its update_state/finalize_state
    # (NumPy) are the same computation without TensorFlow.
    batches = [RNG.normal(size=(300,)).astype(np.float32) for _ in range(3)]
    for data in (batches, batches[0]):
        t = nn.Discretization(num_bins=5, epsilon=0.05)
        t.adapt(data)
        k = keras.layers.Discretization(num_bins=5, epsilon=0.05)
        k.reset_state()
        for b in (data if isinstance(data, list) else [data]):
            k.update_state(b)
        k.finalize_state()
        np.testing.assert_allclose(t.bin_boundaries, k.bin_boundaries, rtol=1e-6)
    t = nn.Discretization(num_bins=4)
    t.adapt(tessera.data.Dataset.from_tensor_slices(batches[0]).batch(300))
    t2 = nn.Discretization(num_bins=4)
    t2.adapt(batches[0])
    assert t.bin_boundaries == t2.bin_boundaries
    with pytest.raises(ValueError, match="exactly one of bin_boundaries and num_bins"):
        nn.Discretization()
    with pytest.raises(ValueError, match="adapt"):
        nn.Discretization(num_bins=3)(np.ones(2))


# ----------------------------------------------------------------- hashing

def test_hashes_reference_vectors():
    # SipHash-2-4 paper's vectors (key 00..0f; messages 00, 00 01, ...)
    k0 = int.from_bytes(bytes(range(8)), "little")
    k1 = int.from_bytes(bytes(range(8, 16)), "little")
    assert _hashes.siphash24(k0, k1, b"") == 0x726FDB47DD0E0E31
    assert _hashes.siphash24(k0, k1, bytes(range(15))) == 0xA129CA6149BE45E5
    # every length branch of Fingerprint64 runs and differs on one byte
    for n in (0, 3, 7, 12, 20, 40, 64, 65, 200):
        s = bytes(RNG.integers(0, 256, n, dtype=np.uint8))
        h = _hashes.fingerprint64(s)
        assert 0 <= h < 2 ** 64
        if n:
            assert _hashes.fingerprint64(s[:-1] + bytes([(s[-1] + 1) % 256])) != h


def test_hashing_matches_keras_test_vectors():
    # The bins Keras's own tests expect (computed there with TensorFlow).
    x = np.array([["A"], ["B"], ["C"], ["D"], ["E"]])
    np.testing.assert_array_equal(nn.Hashing(3)(x).ravel(), [1, 0, 1, 1, 2])
    np.testing.assert_array_equal(nn.Hashing(3)(np.arange(5)), [1, 0, 1, 0, 2])
    np.testing.assert_array_equal(nn.Hashing(3, salt=[133, 137])(x).ravel(), [1, 2, 1, 0, 2])
    np.testing.assert_array_equal(nn.Hashing(3, salt=133)(x).ravel(), [0, 0, 2, 1, 0])
    np.testing.assert_array_equal(
        nn.Hashing(3, mask_value="")(np.array([["A"], ["B"], [""], ["C"], ["D"]])).ravel(),
        [1, 1, 0, 2, 2])
    np.testing.assert_array_equal(nn.Hashing(3)(np.arange(5.0)), [1, 0, 1, 0, 2])
    out = nn.Hashing(3, output_mode="multi_hot")(np.array([[0, 1, 2, 3, 4]]))
    np.testing.assert_array_equal(out, [[1.0, 1.0, 1.0]])
    with pytest.raises(ValueError, match="salt"):
        nn.Hashing(2, salt="x")


# ----------------------------------------------------------------- lookups

def test_string_lookup_adapt_layout_and_ties():
    layer = nn.StringLookup()
    layer.adapt(np.array(["b", "a", "b", "c", "c", "d"]))
    # by count, ties by decreasing term (Keras: lexsort then reversed)
    assert layer.get_vocabulary() == ["[UNK]", "c", "b", "d", "a"]
    assert layer.get_vocabulary(include_special_tokens=False) == ["c", "b", "d", "a"]
    np.testing.assert_array_equal(layer(np.array([["a", "zz"], ["b", "c"]])), [[4, 0], [2, 1]])
    masked = nn.StringLookup(vocabulary=["a", "b"], mask_token="")
    assert masked.get_vocabulary() == ["", "[UNK]", "a", "b"]
    np.testing.assert_array_equal(masked(np.array(["", "b", "q"])), [0, 3, 1])
    inv = nn.StringLookup(vocabulary=["a", "b"], mask_token="", invert=True)
    assert inv(np.array([0, 1, 2, 3, 9])).tolist() == ["", "[UNK]", "a", "b", "[UNK]"]
    limited = nn.StringLookup(max_tokens=3)
    limited.adapt(np.array(["x", "y", "y", "z", "z", "z"]))
    assert limited.get_vocabulary() == ["[UNK]", "z", "y"]


def test_string_lookup_output_modes_and_oov_hash():
    voc = ["a", "b", "c"]
    np.testing.assert_array_equal(
        nn.StringLookup(vocabulary=voc, output_mode="multi_hot")(np.array([["a", "a", "z"]])),
        [[1, 1, 0, 0]])
    np.testing.assert_array_equal(
        nn.StringLookup(vocabulary=voc, output_mode="count")(np.array([["a", "a", "z"]])),
        [[1, 2, 0, 0]])
    np.testing.assert_array_equal(
        nn.StringLookup(vocabulary=voc, output_mode="one_hot")(np.array(["c", "q"])),
        [[0, 0, 0, 1], [1, 0, 0, 0]])
    two = nn.StringLookup(vocabulary=voc, num_oov_indices=2)
    assert two(np.array(["A"]))[0] == _hashes.fingerprint64(b"A") % 2
    with pytest.raises(ValueError, match="num_oov_indices=0"):
        nn.StringLookup(vocabulary=voc, num_oov_indices=0)(np.array(["q"]))
    with pytest.raises(TypeError, match="takes strings"):
        nn.StringLookup(vocabulary=voc)(np.array([1, 2]))
    with pytest.raises(ValueError, match="repeats the term 'a'"):
        nn.StringLookup(vocabulary=["a", "b", "a"])


def test_tf_idf_weights_as_keras_defines_them():
    layer = nn.StringLookup(output_mode="tf_idf")
    docs = np.array([["a", "b"], ["b", "c"]])
    layer.adapt(docs)
    assert layer.get_vocabulary() == ["[UNK]", "b", "c", "a"]
    idf = np.log(1 + 2 / (1 + np.array([2, 1, 1.0])))
    np.testing.assert_allclose(layer.idf_weights, np.r_[idf.mean(), idf], rtol=1e-6)
    np.testing.assert_allclose(layer(np.array([["a", "b", "b"]])),
                               [[0, 2 * idf[0], 0, idf[2]]], rtol=1e-6)


def test_integer_lookup():
    layer = nn.IntegerLookup(num_oov_indices=2, vocabulary=[12, 36])
    assert layer.get_vocabulary() == [-1, -1, 12, 36]
    np.testing.assert_array_equal(layer(np.array([12, 36, 5, 8])), [2, 3, 1, 0])
    layer = nn.IntegerLookup(mask_token=0)
    layer.adapt(np.array([[7, 7, 3], [3, 3, 0]]))
    assert layer.get_vocabulary() == [0, -1, 3, 7]
    np.testing.assert_array_equal(layer(np.array([[7, 0, 99]])), [[3, 0, 1]])
    inv = nn.IntegerLookup(vocabulary=[12, 36], invert=True)
    np.testing.assert_array_equal(inv(np.array([0, 1, 2, 5])), [-1, 12, 36, -1])
    np.testing.assert_array_equal(
        nn.IntegerLookup(vocabulary=[12, 36], output_mode="multi_hot")(np.array([[36, 1]])),
        [[1, 0, 1]])
    with pytest.raises(TypeError, match="takes integers"):
        layer(np.array(["a"]))


def test_text_vectorization_int_and_sequence_length():
    tv = nn.TextVectorization(max_tokens=6, output_sequence_length=4)
    tv.adapt(["The cat sat.", "The dog, the CAT!", "a b c d e"])
    assert tv.get_vocabulary() == ["", "[UNK]", "the", "cat", "sat", "e"]
    np.testing.assert_array_equal(tv(["the cat", "dog sat on the mat today"]),
                                  [[2, 3, 0, 0], [1, 4, 1, 2]])
    free = nn.TextVectorization(vocabulary=["x", "y"])
    np.testing.assert_array_equal(free(np.array([["x y y"], ["  y  "]])), [[2, 3, 3], [3, 0, 0]])
    assert free(["x"]).dtype == np.int64


def test_text_vectorization_ngrams_modes_and_dataset():
    tv = nn.TextVectorization(ngrams=2, output_mode="count")
    tv.adapt(["a b a", "b c"])
    assert tv.get_vocabulary() == ["[UNK]", "b", "a", "c", "b c", "b a", "a b"]
    # z, "c c" and "c z" are OOV
    np.testing.assert_array_equal(tv(["a b", "c c z"]),
                                  [[0, 1, 1, 0, 0, 0, 1], [3, 0, 0, 2, 0, 0, 0]])
    mh = nn.TextVectorization(output_mode="multi_hot", max_tokens=4, pad_to_max_tokens=True,
                              vocabulary=["p", "q"])
    np.testing.assert_array_equal(mh(["p p r"]), [[1, 1, 0, 0]])
    texts = np.array(["one two", "two three", "Two!"])
    ds = tessera.data.Dataset.from_tensor_slices(texts).batch(2)
    a, b = nn.TextVectorization(), nn.TextVectorization()
    a.adapt(ds)
    b.adapt(texts)
    assert a.get_vocabulary() == b.get_vocabulary() == ["", "[UNK]", "two", "three", "one"]
    chars = nn.TextVectorization(split="character", standardize=None, vocabulary=["a", "b"])
    np.testing.assert_array_equal(chars(["abz"]), [[2, 3, 1]])


def test_text_vectorization_feeds_a_model():
    texts = ["good movie", "bad movie", "good good", "bad bad film"] * 4
    y = np.array([1, 0, 1, 0] * 4, dtype=np.float32)
    tv = nn.TextVectorization(output_mode="multi_hot")
    tv.adapt(texts)
    x = tv(texts)
    model = nn.Sequential([nn.Input((x.shape[1],)), nn.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy")
    hist = model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert len(hist.history["loss"]) == 2


def test_preprocessing_in_a_model_is_a_clear_error():
    inp = nn.Input((3,))
    with pytest.raises(TypeError, match=r"\[StringLookup\].*test_nn_preprocessing.py:\d+: "
                                        r"strings cannot flow"):
        nn.StringLookup()(inp)
    with pytest.raises(TypeError, match=r"\[Hashing\].*salt \(SipHash\).*dataset.map"):
        nn.Hashing(3, salt=7)(inp)


def test_registered_in_layers_namespace():
    from tessera.nn import layers

    for name in ("TextVectorization", "StringLookup", "IntegerLookup", "CategoryEncoding",
                 "Hashing", "Discretization", "Resizing", "CenterCrop", "RandomFlip",
                 "RandomRotation", "RandomZoom", "RandomCrop", "RandomTranslation",
                 "RandomContrast"):
        assert getattr(layers, name) is getattr(nn, name)
        assert name in dir(layers)


def test_configs_round_trip():
    from tessera.nn import utils

    tv = nn.TextVectorization(max_tokens=10, output_sequence_length=3)
    tv.adapt(["a b b c"])
    back = utils.deserialize_keras_object(utils.serialize_keras_object(tv))
    assert back.get_vocabulary() == tv.get_vocabulary()
    np.testing.assert_array_equal(back(["b c z"]), tv(["b c z"]))
    d = nn.Discretization(num_bins=3)
    d.adapt(np.arange(10.0))
    back = utils.deserialize_keras_object(utils.serialize_keras_object(d))
    assert back.bin_boundaries == d.bin_boundaries
    idf = nn.StringLookup(output_mode="tf_idf")
    idf.adapt(np.array([["a", "b"], ["b", "c"]]))
    back = utils.deserialize_keras_object(utils.serialize_keras_object(idf))
    np.testing.assert_allclose(back(np.array([["a", "b"]])), idf(np.array([["a", "b"]])))


@pytest.mark.parametrize("make", [lambda: nn.Resizing(4, 5), lambda: nn.Resizing(10, 3),
                                  lambda: nn.Resizing(4, 4, crop_to_aspect_ratio=True),
                                  lambda: nn.Resizing(3, 4, interpolation="nearest"),
                                  lambda: nn.CenterCrop(4, 5), lambda: nn.CenterCrop(10, 12)])
def test_image_layers_compile_into_a_model(keras, make):
    layer = make()
    inp = nn.Input((7, 9, 3))
    model = nn.Model(inp, layer(inp))
    out = model.predict(IMG, verbose=0)
    kind = type(layer).__name__
    k = getattr(keras.layers, kind)(**{a: getattr(layer, a) for a in ("height", "width")},
                                     **({"interpolation": layer.interpolation,
                                         "crop_to_aspect_ratio": layer.crop_to_aspect_ratio}
                                        if kind == "Resizing" else {}))
    _same(out, k(IMG))


def test_random_layers_in_a_model_random_in_fit_identity_in_predict(tmp_path):
    # One pixel lit at the left: the loss is 1 unflipped, 16 flipped.
    x = np.zeros((40, 1, 4, 1), np.float32)
    x[:, 0, 0, 0] = 1
    inp = nn.Input((1, 4, 1))
    dense = nn.Dense(1, use_bias=False)
    out = dense(nn.Flatten()(nn.RandomContrast(0.0)(nn.RandomFlip("horizontal")(inp))))
    model = nn.Model(inp, out)
    model.compile(nn.optimizers.SGD(learning_rate=0.0), "mse")
    dense.set_weights([np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)])
    running = []
    model.fit(x, np.zeros((40, 1), np.float32), batch_size=1, shuffle=False, verbose=0,
              callbacks=[nn.callbacks.LambdaCallback(
                  on_train_batch_end=lambda b, logs: running.append(logs["loss"]))])
    per_batch = np.diff(np.r_[0.0, np.array(running) * np.arange(1, 41)])
    flipped = np.isclose(per_batch, 16.0, atol=1e-3)
    assert np.all(flipped | np.isclose(per_batch, 1.0, atol=1e-3)) and 8 <= flipped.sum() <= 32
    np.testing.assert_allclose(model.predict(x[:4], verbose=0), 1.0)
    model.save(tmp_path / "m.tsm")
    again = nn.load_model(tmp_path / "m.tsm")
    np.testing.assert_allclose(again.predict(x[:4], verbose=0), 1.0)


def test_augmentation_sequential_inside_a_model():
    aug = nn.Sequential([nn.RandomFlip("horizontal"), nn.RandomContrast(0.1)])
    inp = nn.Input((8, 8, 3))
    out = nn.Dense(2)(nn.Flatten()(nn.Resizing(4, 4)(aug(inp))))
    model = nn.Model(inp, out)
    model.compile("adam", "mse")
    x = RNG.uniform(0, 255, (16, 8, 8, 3)).astype(np.float32)
    hist = model.fit(x, np.zeros((16, 2), np.float32), epochs=1, verbose=0)
    assert np.isfinite(hist.history["loss"][0])
    with pytest.raises(TypeError, match="channels_last images only"):
        nn.RandomZoom(0.1, data_format="channels_first")(inp)
    with pytest.raises(TypeError, match="pad_to_aspect_ratio=True runs on arrays only"):
        nn.Resizing(4, 4, pad_to_aspect_ratio=True)(inp)


def _graph_output(layer, x):
    """The layer's compiled training-mode expression run as a program."""
    from tessera.nn.layers import Context

    layer._in_shape = x.shape[1:]
    stmts, count = [], [0]

    def fresh(tag):
        count[0] += 1
        return f"{tag}_{count[0]}"

    ctx = Context("true", "5", 0, emit=stmts.append, fresh=fresh)
    ctx.seed_stride = 1000
    out = layer.forward("x", {}, ctx)
    return np.asarray(tessera.Program("lambda(x, block(" + ", ".join(stmts + [out]) + "))")
                      .run([x]))


@pytest.mark.parametrize("make", [
    lambda m: m.RandomRotation((0.1, 0.1)),
    lambda m: m.RandomRotation((-0.05, -0.05), fill_mode="constant", fill_value=7.0),
    lambda m: m.RandomRotation((0.25, 0.25), fill_mode="wrap"),
    lambda m: m.RandomRotation((0.2, 0.2), fill_mode="nearest", interpolation="nearest"),
    lambda m: m.RandomZoom((0.3, 0.3)),
    lambda m: m.RandomZoom((-0.3, -0.3), (0.1, 0.1), fill_mode="constant"),
    lambda m: m.RandomTranslation((0.2, 0.2), (-0.3, -0.3)),
    lambda m: m.RandomTranslation((0.2, 0.2), (-0.3, -0.3), interpolation="nearest",
                                  fill_mode="constant")])
def test_affine_layers_compiled_path_matches_keras(keras, make):
    _same(_graph_output(make(nn), IMG), make(keras.layers)(IMG))


def test_affine_layers_train_in_a_model():
    inp = nn.Input((8, 8, 3))
    z = nn.RandomTranslation(0.1, 0.1)(nn.RandomZoom(0.1)(nn.RandomRotation(0.1)(inp)))
    model = nn.Model(inp, nn.Dense(2)(nn.Flatten()(nn.Conv2D(2, 3)(z))))
    model.compile("adam", "mse")
    x = RNG.uniform(0, 1, (16, 8, 8, 3)).astype(np.float32)
    hist = model.fit(x, np.zeros((16, 2), np.float32), epochs=2, batch_size=8, verbose=0)
    assert np.all(np.isfinite(hist.history["loss"]))
    plain = nn.Model(inp, model.layers[-1](model.layers[-2](model.layers[-3](inp))))
    np.testing.assert_allclose(model.predict(x, verbose=0), plain.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)  # the identity at inference
