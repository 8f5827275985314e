"""The numeric preprocessing layers inside a compiled model (issue 30): CategoryEncoding
and Discretization against the same layers inside a Keras 3 model on JAX (the oracle),
IntegerLookup against a NumPy lookup written here from Keras's documented index layout
(Keras computes it with TensorFlow, which the oracle environment lacks) and against its
own eager path; a small structured-data model trained under both with the same weights
gives the same losses; no gradient flows through them; save/load keeps vocabularies and
boundaries; bad uses are errors naming the layer."""

import os

import numpy as np
import pytest

import tessera.nn as nn

RNG = np.random.default_rng(30)


def _model(layer, shape, dtype="int64", lib=nn, **call):
    inp = lib.Input(shape, dtype=dtype)
    return lib.Model(inp, layer(inp, **call))


def _predict(model, x):
    if not isinstance(model, nn.Model):  # Keras's: called directly, quicker than its predict
        return np.asarray(model(x, training=False))
    return np.asarray(model.predict(x, verbose=0))


def _same(t, k, dtype=None):
    t, k = np.asarray(t), np.asarray(k)
    assert t.shape == k.shape, (t.shape, k.shape)
    if dtype is not None:
        assert t.dtype == np.dtype(dtype), (t.dtype, dtype)
    np.testing.assert_allclose(t, k, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------ CategoryEncoding

@pytest.mark.parametrize("mode,shape", [("one_hot", (1,)), ("one_hot", ()), ("one_hot", (3,)),
                                        ("multi_hot", (4,)), ("count", (4,)),
                                        ("multi_hot", (1,))])
def test_category_encoding_in_a_model_matches_keras(keras, mode, shape):
    x = RNG.integers(0, 6, (5,) + shape).astype("int32")
    x.reshape(-1)[:2] = [7, -1]  # outside [0, num_tokens): Keras on JAX counts them nowhere
    t = _model(nn.CategoryEncoding(6, mode), shape, "int32")
    k = _model(keras.layers.CategoryEncoding(6, mode), shape, "int32", lib=keras)
    assert t.output.shape == tuple(k.output.shape)
    _same(_predict(t, x), _predict(k, x), "float32")


def test_category_encoding_count_weights_as_a_second_input(keras):
    x = RNG.integers(0, 5, (4, 3)).astype("int32")
    w = RNG.uniform(0, 2, (4, 3)).astype("float32")

    def build(lib):
        i, wi = lib.Input((3,), dtype="int32"), lib.Input((3,))
        return lib.Model([i, wi], lib.layers.CategoryEncoding(5, "count")(i, count_weights=wi))

    _same(_predict(build(nn), [x, w]), _predict(build(keras), [x, w]), "float32")


# ------------------------------------------------------------ Discretization

@pytest.mark.parametrize("mode,shape", [("int", (4,)), ("int", (2, 3)), ("one_hot", (1,)),
                                        ("one_hot", (4,)), ("multi_hot", (4,)),
                                        ("count", (4,))])
def test_discretization_in_a_model_matches_keras(keras, mode, shape):
    bounds = [-1.0, 0.0, 0.5, 2.0]
    x = RNG.normal(0, 1.5, (6,) + shape).astype("float32")
    x.reshape(-1)[:3] = [0.0, 0.5, -1.0]  # on a boundary: the bin above, as np.digitize
    t = _model(nn.Discretization(bounds, output_mode=mode), shape, "float32")
    k = _model(keras.layers.Discretization(bounds, output_mode=mode), shape, "float32",
               lib=keras)
    assert t.output.shape == tuple(k.output.shape)
    assert t.output.dtype == k.output.dtype
    _same(_predict(t, x), _predict(k, x), "int32" if mode == "int" else "float32")


def test_adapted_discretization_in_a_model_matches_keras(keras):
    data = RNG.gamma(2.0, 3.0, (200, 1)).astype("float32")
    t, k = nn.Discretization(num_bins=5), keras.layers.Discretization(num_bins=5)
    t.adapt(data)
    k.update_state(data)  # Keras's adapt without tf.data: the same computation
    k.finalize_state()
    np.testing.assert_allclose(t.bin_boundaries, k.bin_boundaries, rtol=1e-6)
    _same(_predict(_model(t, (1,), "float32"), data),
          _predict(_model(k, (1,), "float32", lib=keras), data), "int32")
    assert t(data).dtype == np.int32  # eagerly too, as Keras's


# ------------------------------------------------------------ IntegerLookup

def _reference_lookup(x, vocab, num_oov=1, mask=None, mode="int", idf=None):
    """Keras's IntegerLookup written out: indices [mask] [OOV x num_oov] [terms]; an
    OOV value goes to its floormod bucket; one_hot / multi_hot / count / tf_idf over
    the vocabulary (the mask counts nowhere)."""
    lead = 1 if mask is not None and mode == "int" else 0
    table = {v: i + lead + num_oov for i, v in enumerate(vocab)}
    depth = lead + num_oov + len(vocab)
    idx = np.empty(x.shape, np.int64)
    for pos, v in np.ndenumerate(x):
        if v in table:
            idx[pos] = table[v]
        elif mask is not None and v == mask:
            idx[pos] = 0 if mode == "int" else -1
        else:
            idx[pos] = lead + (v % num_oov if num_oov > 1 else 0)
    if mode == "int":
        return idx
    hot = (idx[..., None] == np.arange(depth)).astype(np.float32)
    if mode == "one_hot":
        return hot[:, 0]
    out = hot.max(1) if mode == "multi_hot" else hot.sum(1)
    return out * np.asarray(idf, np.float32) if mode == "tf_idf" else out


VOCAB = [12, 5, 40, 7, 3]


@pytest.mark.parametrize("kw", [dict(), dict(num_oov_indices=3), dict(mask_token=0),
                                dict(mask_token=0, num_oov_indices=2),
                                dict(output_mode="multi_hot"), dict(output_mode="count"),
                                dict(output_mode="count", mask_token=0),
                                dict(output_mode="one_hot")])
def test_integer_lookup_in_a_model_matches_keras_layout_and_eager(kw):
    shape = (1,) if kw.get("output_mode") == "one_hot" else (6,)
    x = RNG.choice(VOCAB + [0, 8, -4, 99], (7,) + shape).astype("int64")
    layer = nn.IntegerLookup(vocabulary=VOCAB, **kw)
    got = _predict(_model(layer, shape), x)
    ref = _reference_lookup(x, VOCAB, kw.get("num_oov_indices", 1), kw.get("mask_token"),
                            kw.get("output_mode", "int"))
    _same(got, ref, "int64" if kw.get("output_mode", "int") == "int" else "float32")
    _same(got, layer(x))


def test_integer_lookup_tf_idf_and_invert_in_a_model():
    x = RNG.choice(VOCAB + [99], (4, 5)).astype("int64")
    idf = [0.5, 1.0, 1.5, 2.0, 2.5]
    layer = nn.IntegerLookup(vocabulary=VOCAB, output_mode="tf_idf", idf_weights=idf)
    ref = _reference_lookup(x, VOCAB, mode="tf_idf", idf=[np.mean(idf)] + idf)
    _same(_predict(_model(layer, (5,)), x), ref, "float32")
    inv = nn.IntegerLookup(vocabulary=VOCAB, invert=True)
    ids = np.array([[0, 1, 2, 5, 6, -3]], "int64")
    # index 0 is the OOV token (-1); indices past the vocabulary give it too
    _same(_predict(_model(inv, (6,)), ids), [[-1, 12, 5, 3, -1, -1]], "int64")


def test_integer_lookup_without_oov_index_fails_at_run_time_naming_the_layer():
    layer = nn.IntegerLookup(vocabulary=VOCAB, num_oov_indices=0, name="strict_ids")
    model = _model(layer, (3,))
    _same(_predict(model, np.array([[12, 3, 7]])), [[0, 4, 3]])
    with pytest.raises(RuntimeError, match=r"strict_ids.*num_oov_indices=0.*"
                                           r"test_nn_preprocessing_in_model.py:\d+"):
        model.predict(np.array([[12, 8, 7]]), verbose=0)
    # in fit too, with a vector output
    hot = nn.IntegerLookup(vocabulary=VOCAB, num_oov_indices=0, output_mode="one_hot")
    i = nn.Input((1,), dtype="int64")
    model = nn.Model(i, nn.Dense(1)(hot(i)))
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.array([[12], [3]]), np.zeros((2, 1)), verbose=0)
    with pytest.raises(RuntimeError, match=r"num_oov_indices=0"):
        model.fit(np.array([[12], [8]]), np.zeros((2, 1)), verbose=0)


# ------------------------------------------------------------ Hashing, HashedCrossing

def test_fingerprint_of_integers_text_in_a_model_equals_farmhash():
    """FarmHash Fingerprint64 of the decimal text, written with int64 primitives, for
    every text length an int64 has (1 to 20 bytes, the sign included)."""
    from tessera.nn import _hashes

    vals = [0, 7, -1, 42, -42, 999, -999, 1234, 12345678, -1234567, 10 ** 15,
            123456789012345678, -123456789012345678, 2 ** 63 - 1, -(2 ** 63 - 1)]
    vals += [int(v) for v in RNG.integers(-2 ** 62, 2 ** 62, 20)]
    vals += [int(v) * 10 ** k for k in range(19) for v in RNG.integers(1, 10, 1)]
    x = np.array(vals, "int64").reshape(-1, 1)
    got = _predict(_model(nn.Hashing(2 ** 31 - 1), (1,)), x)[:, 0]
    ref = [_hashes.fingerprint64(str(v).encode()) % (2 ** 31 - 1) for v in vals]
    _same(got, np.array(ref), "int64")


@pytest.mark.parametrize("kw,shape", [(dict(num_bins=7), (4,)),
                                      (dict(num_bins=5, mask_value=0), (4,)),
                                      (dict(num_bins=9, output_mode="multi_hot"), (4,)),
                                      (dict(num_bins=9, output_mode="count"), (4,)),
                                      (dict(num_bins=3, output_mode="one_hot"), (1,))])
def test_hashing_of_numbers_in_a_model_equals_its_eager_bins(kw, shape):
    """The eager bins are Keras's (test_nn_preprocessing.py: Keras's own test vectors)."""
    x = RNG.integers(-10 ** 12, 10 ** 12, (6,) + shape).astype("int64")
    x.reshape(-1)[:2] = [0, -1]
    layer = nn.Hashing(**kw)
    _same(_predict(_model(layer, shape), x), layer(x),
          "int64" if kw.get("output_mode", "int") == "int" else "float32")
    floats = RNG.uniform(-50, 50, (4,) + shape).astype("float32")  # cast to int64 first
    _same(_predict(_model(layer, shape, "float32"), floats), layer(floats))


@pytest.mark.parametrize("mode,shape", [("int", (1,)), ("one_hot", (1,)), ("int", ())])
def test_hashed_crossing_of_integers_in_a_model_equals_its_eager_bins(mode, shape):
    feats = [RNG.integers(-10 ** 15, 10 ** 15, (8,) + shape).astype("int64"),
             RNG.integers(0, 50, (8,) + shape).astype("int64"),
             RNG.integers(-5, 5, (8,) + shape).astype("int64")]
    layer = nn.HashedCrossing(13, output_mode=mode)
    ins = [nn.Input(shape, dtype="int64") for _ in feats]
    got = _predict(nn.Model(ins, layer(ins)), feats)
    _same(got, layer(feats), "int64" if mode == "int" else "float32")


# ------------------------------------------------------------ training

def _structured(lib, age_bins, cat_in_model):
    """keras-io's structured-data model, small: a bucketized number and a categorical
    feature one-hot encoded inside the model, then two Dense layers."""
    age = lib.Input((1,), name="age")
    cat = lib.Input((1,), dtype="int64", name="cat")
    a = lib.layers.CategoryEncoding(len(age_bins) + 1, "one_hot")(
        lib.layers.Discretization(age_bins)(age))
    c = cat_in_model(cat) if cat_in_model is not None else cat
    c = lib.layers.CategoryEncoding(len(VOCAB) + 1, "one_hot")(c)
    h = lib.layers.Dense(6, activation="relu")(lib.layers.Concatenate()([a, c]))
    return lib.Model([age, cat], lib.layers.Dense(1, activation="sigmoid")(h))


def test_structured_data_model_trains_as_keras_with_the_same_weights(keras):
    n = 32
    age = RNG.uniform(18, 80, (n, 1)).astype("float32")
    cat = RNG.choice(VOCAB + [99], (n, 1)).astype("int64")
    y = RNG.integers(0, 2, (n, 1)).astype("float32")
    bins = [30.0, 45.0, 60.0]
    # Keras's IntegerLookup needs TensorFlow: its model takes the indices, looked up here
    k = _structured(keras, bins, None)
    t = _structured(nn, bins, nn.IntegerLookup(vocabulary=VOCAB))
    t.set_weights(k.get_weights())
    for m in (k, t):
        m.compile(optimizer=m is k and keras.optimizers.SGD(0.1) or nn.optimizers.SGD(0.1),
                  loss="binary_crossentropy")
    kh = k.fit([age, _reference_lookup(cat, VOCAB)], y, batch_size=16, epochs=2,
               shuffle=False, verbose=0)
    th = t.fit([age, cat], y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(th.history["loss"], kh.history["loss"], rtol=2e-5)
    for a, b in zip(t.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_no_gradient_flows_through_the_layers(keras):
    """A Dense before Discretization gets no gradient (digitize is flat), as in Keras."""
    x = RNG.normal(size=(16, 2)).astype("float32")
    y = RNG.normal(size=(16, 1)).astype("float32")

    def build(lib):
        i = lib.Input((2,))
        d = lib.layers.Dense(1)(i)
        e = lib.layers.CategoryEncoding(4, "one_hot")(lib.layers.Discretization([-1., 0., 1.])(d))
        return lib.Model(i, lib.layers.Dense(1)(e))

    k, t = build(keras), build(nn)
    t.set_weights(k.get_weights())
    before = [w.copy() for w in t.get_weights()]
    for m in (k, t):
        m.compile(optimizer=m is k and keras.optimizers.SGD(0.1) or nn.optimizers.SGD(0.1),
                  loss="mse")
        m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    after = t.get_weights()
    np.testing.assert_array_equal(after[0], before[0])  # the first Dense did not move
    assert not np.array_equal(after[2], before[2])  # the last did
    for a, b in zip(after, k.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ saving

def test_saved_model_keeps_vocabulary_and_boundaries(tmp_path):
    data = RNG.uniform(0, 10, (50, 1)).astype("float32")
    ids = RNG.choice(VOCAB, (50, 1)).astype("int64")
    disc = nn.Discretization(num_bins=4)
    disc.adapt(data)
    look = nn.IntegerLookup()
    look.adapt(ids)
    model = _structured(nn, disc.bin_boundaries, look)
    path = os.path.join(tmp_path, "m.keras")
    model.save(path)
    back = nn.models.load_model(path)
    assert back.get_layer(look.name).get_vocabulary() == look.get_vocabulary()
    _same(_predict(back, [data, ids]), _predict(model, [data, ids]))


def test_adapt_after_the_model_is_built_but_not_after_it_compiled():
    """As Keras asks: adapt before use. Adapting between building the model and its
    first predict is read by the program; afterwards it is an error, not a stale table."""
    look, disc = nn.IntegerLookup(), nn.Discretization(num_bins=3)
    i, f = nn.Input((2,), dtype="int64"), nn.Input((2,))
    model = nn.Model([i, f], [look(i), disc(f)])
    look.adapt(np.array([5, 5, 7]))
    disc.adapt(np.arange(9.0))
    ids, bins = model.predict([np.array([[5, 9]]), np.array([[1.0, 7.0]])], verbose=0)
    _same(ids, [[1, 0]], "int64")
    _same(bins, disc(np.array([[1.0, 7.0]])), "int32")
    with pytest.raises(RuntimeError, match=r"\[IntegerLookup\].*already compiled.*"
                                           r"test_nn_preprocessing_in_model.py:\d+\)$"):
        look.adapt(np.array([1, 2]))
    with pytest.raises(RuntimeError, match=r"\[Discretization\].*already compiled"):
        disc.adapt(np.arange(3.0))
    wide = nn.IntegerLookup(vocabulary=[1, 2], output_mode="multi_hot")
    model = _model(wide, (2,))
    wide.set_vocabulary([1, 2, 3])
    with pytest.raises(ValueError, match=r"\[IntegerLookup\].*changed size.*3 wide, now 4"):
        model.predict(np.array([[1, 2]]), verbose=0)


# ------------------------------------------------------------ bad uses

def test_bad_uses_in_a_model_name_the_layer_and_line():
    with pytest.raises(ValueError, match=r"\[CategoryEncoding\].*'ce'.*shape \(n,\).*Input"
                                         r"\(shape=\(1,\)\)"):
        _model(nn.CategoryEncoding(3, "multi_hot", name="ce"), ())
    unadapted = _model(nn.Discretization(num_bins=3), (1,), "float32")
    with pytest.raises(ValueError, match=r"\[Discretization\].*test_nn_preprocessing_in_model"
                                         r".py:\d+\) has no bin_boundaries yet: call adapt"):
        unadapted.predict(np.ones((2, 1)), verbose=0)
    with pytest.raises(RuntimeError, match=r"\[IntegerLookup\].*vocabulary.*"
                                           r"test_nn_preprocessing_in_model.py:\d+"):
        _model(nn.IntegerLookup(output_mode="multi_hot"), (2,))
    i = nn.Input((3,), dtype="int32")
    with pytest.raises(TypeError, match=r"\[CategoryEncoding\].*count_weights as a symbolic"):
        nn.CategoryEncoding(4, "count")(i, count_weights=np.ones((1, 3)))
    with pytest.raises(ValueError, match=r"\[CategoryEncoding\] count_weights is only for"):
        nn.CategoryEncoding(4, "one_hot")(i, count_weights=nn.Input((3,)))
    with pytest.raises(TypeError, match=r"\[Hashing\].*test_nn_preprocessing_in_model.py:\d+: "
                                        r"with a salt \(SipHash\) it runs on arrays only"):
        nn.Hashing(4, salt=3)(i)
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] in a model every input must have "
                                         r"an integer dtype.*test_nn_preprocessing_in_model"):
        nn.HashedCrossing(4)([i, nn.Input((3,))])


# ------------------------------------------------------------ image layers

IMG = RNG.uniform(0, 255, (3, 6, 7, 3)).astype("float32")


def _train_and_predict(layer, x, shape):
    """The layer in a model: its training-mode output, and predict's (the identity)."""
    model = _model(layer, shape, "float32")
    return np.asarray(model(x, training=True)), _predict(model, x)


def test_random_crop_in_a_model_as_keras(keras):
    inner, layer = nn.RandomCrop(4, 5, seed=2), keras.layers.RandomCrop(4, 5, seed=2)
    t_train, t_pred = _train_and_predict(inner, IMG, IMG.shape[1:])
    # a window of the batch (one offset for all images, as Keras's)
    windows = [IMG[:, i:i + 4, j:j + 5] for i in range(3) for j in range(3)]
    assert any(np.array_equal(t_train, w) for w in windows)
    # Keras 3's RandomCrop is the identity at inference, uncropped: so is tessera's
    _same(t_pred, _predict(_model(layer, IMG.shape[1:], "float32", lib=keras), IMG))
    # an image not larger than the window: Keras's window from where the aspect-ratio
    # crop starts, resized (eagerly too)
    for hw in [(8, 9), (6, 5), (3, 9), (7, 2)]:
        t_train, _ = _train_and_predict(nn.RandomCrop(*hw), IMG, IMG.shape[1:])
        k = keras.layers.RandomCrop(*hw)(IMG, training=True)
        np.testing.assert_allclose(t_train, k, atol=2e-3)
        np.testing.assert_allclose(nn.RandomCrop(*hw)(IMG), k, atol=2e-3)
    # followed by layers that take any size, the model trains and predicts as Keras's
    i = nn.Input(IMG.shape[1:])
    m = nn.Model(i, nn.Dense(1)(nn.GlobalAveragePooling2D()(nn.RandomCrop(4, 5)(i))))
    m.compile(optimizer="sgd", loss="mse")
    m.fit(IMG, np.zeros((3, 1)), epochs=1, verbose=0)
    assert m.predict(IMG, verbose=0).shape == (3, 1)


def _either(got, candidates, atol):
    """Each image of got equals that image in one of the candidate outputs."""
    for k in range(got.shape[0]):
        assert min(np.abs(got[k] - c[k]).max() for c in candidates) <= atol, k


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_colour_layers_compile_with_their_eager_transform(data_format):
    """A fixed factor fixes the draw: the compiled training output is the eager
    transform (_apply, itself compared with Keras's in test_nn_augmentation_more.py)."""
    cf = data_format == "channels_first"
    x = np.moveaxis(IMG, -1, 1) if cf else IMG
    back = (lambda a: np.moveaxis(a, 1, -1)) if cf else (lambda a: a)
    cases = [
        (nn.RandomSharpness((0.8, 0.8), data_format=data_format), [np.full(3, 0.8, "float32")]),
        (nn.RandomSaturation((0.3, 0.3), data_format=data_format),
         [np.full(3, 0.3 / (0.7 + 1e-7), "float32")]),
        (nn.RandomHue((0.4, 0.4), data_format=data_format),  # a random sign
         [np.full(3, 0.2, "float32"), np.full(3, -0.2, "float32")]),
    ]
    for layer, draws in cases:
        train, pred = _train_and_predict(layer, x, x.shape[1:])
        _same(pred, x)
        _either(back(train), [layer._apply(IMG, d) for d in draws], atol=3e-3)


def test_color_jitter_compiles_as_its_parts():
    layer = nn.RandomColorJitter(brightness_factor=(0.1, 0.1), saturation_factor=(0.6, 0.6),
                                 hue_factor=(0.0, 0.0))
    train, pred = _train_and_predict(layer, IMG, IMG.shape[1:])
    _same(pred, IMG)
    np.testing.assert_allclose(train, layer._augment(IMG), atol=3e-3)
    # with a contrast factor the draws differ per image: the values stay in value_range
    layer = nn.RandomColorJitter(contrast_factor=0.5, hue_factor=0.3)
    train, _ = _train_and_predict(layer, IMG, IMG.shape[1:])
    assert train.shape == IMG.shape and train.min() >= 0 and train.max() <= 255
    assert not np.allclose(train, IMG)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_blur_erasing_and_equalization_compile_with_their_eager_transform(data_format):
    cf = data_format == "channels_first"
    to, back = ((lambda a: np.moveaxis(a, -1, 1)), (lambda a: np.moveaxis(a, 1, -1))) if cf \
        else ((lambda a: a), (lambda a: a))
    x = to(IMG)
    blur = nn.RandomGaussianBlur(factor=(1.0, 1.0), kernel_size=(3, 5), sigma=(0.7, 0.7),
                                 data_format=data_format)
    train, pred = _train_and_predict(blur, x, x.shape[1:])
    _same(pred, x)
    expect = blur._apply(IMG, (np.ones(3, bool), np.full(2, 0.7 + 1e-6, np.float32)))
    np.testing.assert_allclose(back(train), expect, atol=2e-3)
    # Keras's draw of the probability: factor 0 never blurs
    train, _ = _train_and_predict(nn.RandomGaussianBlur(factor=0.0, data_format=data_format),
                                  x, x.shape[1:])
    _same(train, x)

    erase = nn.RandomErasing(factor=(1.0, 1.0), scale=(0.3, 0.3), fill_value=(1.0, 2.0, 3.0),
                             data_format=data_format)
    train = back(_train_and_predict(erase, x, x.shape[1:])[0])
    side_w, side_h = np.sqrt(0.3) * 7, np.sqrt(0.3) * 6
    for k in range(3):
        box = np.all(train[k] == [1.0, 2.0, 3.0], axis=-1)
        rows, cols = np.nonzero(box)
        # one rectangle of Keras's sides, filled; the rest untouched
        assert box[rows.min():rows.max() + 1, cols.min():cols.max() + 1].all()
        assert np.ptp(cols) + 1 in (int(side_w), int(side_w) + 1)
        assert np.ptp(rows) + 1 in (int(side_h), int(side_h) + 1)
        _same(train[k][~box], IMG[k][~box])
    noise = nn.RandomErasing(factor=(1.0, 1.0), data_format=data_format)
    train, _ = _train_and_predict(noise, x, x.shape[1:])
    changed = train != x
    assert changed.any() and train.min() >= 0 and train.max() <= 255

    for vr, img in (((0, 255), IMG), ((0, 1), IMG / 255), ((0, 255), np.round(IMG / 40) * 40),
                    ((0, 255), np.full_like(IMG, 9.0))):
        eq = nn.Equalization(value_range=vr, data_format=data_format)
        img = to(img.astype("float32"))
        train, pred = _train_and_predict(eq, img, img.shape[1:])
        _same(pred, img)
        _same(train, eq(img))


@pytest.mark.parametrize("module", ["tessera.nn.layers.preprocessing", "tessera.nn.preprocessing"])
def test_files_saved_before_the_categorical_family_still_load(module):
    """CategoryEncoding and Discretization lived in layers/preprocessing.py: a file
    saved then names that module."""
    from tessera.nn import saving

    ctx = saving._Load("<test>", {})
    for name in ("CategoryEncoding", "Discretization"):
        assert saving._resolve(name, module, ("layer",), ctx, "a layer") is getattr(nn, name)
    with pytest.raises(ValueError, match="CategoryEncoding"):
        saving._resolve("CategoryEncoding", "tessera.nn.layers.core", ("layer",), ctx, "a layer")


def _compiled(layer, x, seed=5, stride=1000):
    """The layer's compiled training-mode expression run as a program, its draws
    keyed by seed * stride (the call's index 0), so a test can draw them again."""
    import tessera
    from tessera.nn.layers import Context

    layer._in_shape = x.shape[1:]
    stmts = []
    names = iter(range(10 ** 6))
    ctx = Context("true", str(seed), 0, emit=stmts.append,
                  fresh=lambda tag: f"{tag}_{next(names)}")
    ctx.seed_stride = stride
    out = layer.forward("x", {}, ctx)
    program = tessera.Program("lambda(x, block(" + ", ".join(stmts + [out]) + "))")
    draw = tessera.Program(f"random_uniform(list({x.shape[0]}, {layer._graph_draws}), 0.0, "
                           f"1.0, {seed * stride}, \"float32\")")
    return np.asarray(program.run([x])), np.asarray(draw.run([]))


@pytest.mark.parametrize("kw", [dict(factor=(1.0, 1.0), scale=0.6, fill_value=5.0),
                                dict(factor=0.7, scale=1.0),
                                dict(factor=(1.0, 1.0), scale=0.4, interpolation="nearest")])
def test_random_perspective_compiles_as_its_eager_warp(kw):
    """The homography solved in the program from the same draw warps as the eager
    one (itself compared with Keras's in test_nn_augmentation_more.py)."""
    layer = nn.RandomPerspective(**kw)
    got, u = _compiled(layer, IMG)
    lo, hi = layer.factor
    applied = u[:, 1] < lo + (hi - lo) * u[:, 0]
    move = (-0.5 * layer.scale + layer.scale * u[:, 2:10]).astype(np.float64).reshape(3, 4, 2)
    start = np.repeat(np.array([[[0.0, 0.0], [6.0, 0.0], [0.0, 5.0], [6.0, 5.0]]]), 3, 0)
    expect = layer._apply(IMG, (applied, start.astype(np.float32),
                                (start + start * move).astype(np.float32)))
    np.testing.assert_allclose(got, expect, atol=2e-3)
    train, pred = _train_and_predict(nn.RandomPerspective(**kw), IMG, IMG.shape[1:])
    _same(pred, IMG)
    assert train.shape == IMG.shape


@pytest.mark.parametrize("kw", [dict(factor=(1.0, 1.0), scale=(0.5, 1.0)),
                                dict(factor=(1.0, 1.0), scale=0.8, fill_mode="constant",
                                     fill_value=3.0),
                                dict(factor=(1.0, 1.0), scale=(1.0, 1.0), fill_mode="mirror"),
                                dict(factor=(1.0, 1.0), scale=0.6, fill_mode="wrap",
                                     interpolation="nearest")])
def test_random_elastic_transform_compiles_as_its_eager_warp(kw):
    import tessera

    layer = nn.RandomElasticTransform(**kw)
    got, u = _compiled(layer, IMG)
    noise = tessera.Program(f"random_normal(list(3, 6, 7), 0.0, 1.0, "
                            f"{5000 + layer.NOISE_SEED}, \"float32\")").run([])
    lo, hi = layer.factor
    scale = layer.scale[0] + (layer.scale[1] - layer.scale[0]) * float(u[0, 2])
    expect = layer._apply(IMG, (u[:, 1] < lo + (hi - lo) * u[:, 0], scale, np.asarray(noise)))
    np.testing.assert_allclose(got, expect, atol=2e-3)
    train, pred = _train_and_predict(nn.RandomElasticTransform(**kw), IMG, IMG.shape[1:])
    _same(pred, IMG)
    assert train.shape == IMG.shape and train.min() >= 0 and train.max() <= 255
