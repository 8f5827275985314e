"""Keras features met by the keras-io scripts of issue 30's fourth pass (tests/keras_io:
vision transformer, ConvMixer, Oxford Pets U-Net, miniature GPT, NER), against Keras 3 on
JAX with the same weights and data: a Sequential holding an eager-only layer (RandomCrop)
called on arrays; conv and pooling configs' window sizes as tuples; keras.backend's getters
and clear_session; fit of a model of several outputs given the labels of the outputs that
have a loss (loss=[fn, None]); built-in losses' reduction= (None inside a Loss subclass's
call); a subclassed model predicting on a sequence length it was not built for."""

import numpy as np
import pytest

import tessera.nn as tn


def test_sequential_with_random_crop_runs_on_arrays_and_in_a_model(keras):
    x = np.random.default_rng(0).uniform(0, 255, size=(3, 8, 8, 3)).astype("float32")
    ours = tn.Sequential([tn.layers.RandomCrop(8, 8), tn.layers.RandomFlip("horizontal")])
    theirs = keras.Sequential([keras.layers.RandomCrop(8, 8),
                               keras.layers.RandomFlip("horizontal")])
    for training in (True, False):
        got = np.asarray(ours(x, training=training))
        want = np.asarray(theirs(x, training=training))
        assert got.shape == want.shape == x.shape
        # each image is itself or its mirror (a crop of its own size moves nothing)
        for g, a in zip(got, x):
            assert np.allclose(g, a) or np.allclose(g, a[:, ::-1])
    np.testing.assert_allclose(np.asarray(ours(x, training=False)), x)
    # symbolic: RandomCrop now compiles into a model too (the identity in predict)
    inputs = tn.Input((8, 8, 3))
    model = tn.Model(inputs, ours(inputs))
    np.testing.assert_allclose(model.predict(x, verbose=0), x)


WINDOWS = [("Conv2D", (4, 5), {}), ("Conv2D", (4, (3, 2)), dict(strides=2)),
           ("Conv1D", (2, 3), dict(dilation_rate=2)), ("Conv2DTranspose", (2, 3), {}),
           ("SeparableConv2D", (4, 3), {}), ("DepthwiseConv2D", (3,), {}),
           ("MaxPooling2D", (), {}), ("MaxPooling2D", (3,), dict(strides=2)),
           ("AveragePooling1D", (3,), {})]


@pytest.mark.parametrize("name,args,kw", WINDOWS)
def test_window_sizes_in_configs_are_tuples_as_keras(keras, name, args, kw):
    ours = getattr(tn.layers, name)(*args, **kw).get_config()
    theirs = getattr(keras.layers, name)(*args, **kw).get_config()
    for key in ("kernel_size", "strides", "dilation_rate", "pool_size"):
        if key in theirs:
            assert ours[key] == tuple(theirs[key]), key
    again = getattr(tn.layers, name).from_config(ours).get_config()
    assert {k: again[k] for k in ours if k != "name"} == \
        {k: ours[k] for k in ours if k != "name"}


def test_backend_getters_and_clear_session(keras):
    for name in ("floatx", "epsilon", "image_data_format"):
        assert getattr(tn.backend, name)() == getattr(keras.backend, name)()
    for dtype in ("float64", "int32", "uint8", "bool", "float32"):
        assert tn.backend.is_float_dtype(dtype) == keras.backend.is_float_dtype(dtype)
        assert tn.backend.is_int_dtype(dtype) == keras.backend.is_int_dtype(dtype)
        assert tn.backend.standardize_dtype(dtype) == keras.backend.standardize_dtype(dtype)
    tn.layers.Dense(2)
    tn.backend.clear_session()
    keras.backend.clear_session()
    assert tn.layers.Dense(2).name == keras.layers.Dense(2).name == "dense"
    with pytest.raises(ValueError, match="float16"):
        tn.backend.set_floatx("float16")  # no half-precision kernels: refused by name


def _two_outputs(lib, w):
    i = lib.Input((4,))
    h = lib.layers.Dense(3)(i)
    o = lib.layers.Dense(5)(h)
    m = lib.Model(i, [o, h])
    m.set_weights(w)
    return m


def test_fit_with_labels_for_the_outputs_that_have_a_loss(keras):
    rng = np.random.default_rng(2)
    w = [rng.normal(size=(4, 3)), np.zeros(3), rng.normal(size=(3, 5)), np.zeros(5)]
    w = [a.astype("float32") for a in w]
    x = rng.normal(size=(32, 4)).astype("float32")
    y = rng.integers(0, 5, size=32)
    runs = []
    for lib in (tn, keras):
        m = _two_outputs(lib, w)
        m.compile(lib.optimizers.SGD(0.1),
                  loss=[lib.losses.SparseCategoricalCrossentropy(from_logits=True), None])
        h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        runs.append((h.history, m.evaluate(x, y, verbose=0),
                     [np.asarray(a) for a in m.get_weights()]))
    (h1, e1, w1), (h2, e2, w2) = runs
    assert sorted(h1) == sorted(h2) == ["loss"]  # one loss: no per-output entries
    np.testing.assert_allclose(h1["loss"], h2["loss"], rtol=1e-5)
    np.testing.assert_allclose(e1, e2, rtol=1e-5)
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # a list of those labels is the same; a count that fits nothing still fails
    m = _two_outputs(tn, w)
    m.compile("sgd", loss=[None, "mse"])
    m.fit(x, [np.zeros((32, 3))], epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"2 outputs, got 3 label arrays"):
        m.fit(x, [np.zeros((32, 3))] * 3, epochs=1, verbose=0)


@pytest.mark.parametrize("reduction", [None, "none", "sum", "sum_over_batch_size",
                                       "mean_with_sample_weight"])
def test_builtin_losses_take_keras_reductions(keras, reduction):
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 1, size=(6, 4, 3)).astype("float32")
    p /= p.sum(-1, keepdims=True)
    y = rng.integers(0, 3, size=(6, 4))
    sw = rng.uniform(0.5, 2, size=(6, 4)).astype("float32")
    cases = [("SparseCategoricalCrossentropy", {}, y),
             ("CategoricalCrossentropy", dict(label_smoothing=0.1), np.eye(3)[y]),
             ("Huber", dict(delta=0.5), np.eye(3)[y]), ("MeanSquaredError", {}, np.eye(3)[y])]
    for name, kw, labels in cases:
        ours = getattr(tn.losses, name)(reduction=reduction, **kw)
        theirs = getattr(keras.losses, name)(reduction=reduction, **kw)
        for weights in (None, sw):
            np.testing.assert_allclose(ours(labels, p, sample_weight=weights),
                                       np.asarray(theirs(labels, p, sample_weight=weights)),
                                       rtol=1e-5, err_msg=f"{name} {weights is None}")


def test_loss_subclass_with_an_unreduced_builtin_trains_as_keras(keras):
    """The NER example's loss: the crossentropy per token (reduction=None) averaged
    over the tokens that are not padding."""

    def make(lib):
        class NonPadding(lib.losses.Loss):
            def call(self, y_true, y_pred):
                fn = lib.losses.SparseCategoricalCrossentropy(reduction=None)
                loss = fn(y_true, y_pred)
                mask = lib.ops.cast(y_true > 0, dtype="float32")
                return lib.ops.sum(loss * mask) / lib.ops.sum(mask)
        return NonPadding(name="non_padding")

    rng = np.random.default_rng(4)
    x = rng.integers(1, 9, size=(16, 5))
    x[:, 3:] = 0
    y = np.where(x > 0, x % 3 + 1, 0)
    w = [rng.normal(size=(9, 4)).astype("float32"), rng.normal(size=(4, 4)).astype("float32"),
         np.zeros(4, "float32")]
    losses = []
    for lib in (tn, keras):
        i = lib.Input((5,), dtype="int32")
        o = lib.layers.Dense(4, activation="softmax")(lib.layers.Embedding(9, 4)(i))
        m = lib.Model(i, o)
        m.set_weights(w)
        m.compile(lib.optimizers.SGD(0.5), loss=make(lib))
        losses.append(m.fit(x, y, batch_size=8, epochs=2, shuffle=False,
                            verbose=0).history["loss"])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


def test_ignore_class_refused():
    # (compile's loss reductions against Keras: test_nn_losses_keras.py)
    with pytest.raises(ValueError, match=r"ignore_class=0 is not supported"):
        tn.losses.SparseCategoricalCrossentropy(ignore_class=0)


def test_subclassed_model_predicts_on_other_lengths_as_keras(keras):
    def make(lib):
        class Tagger(lib.Model):
            def __init__(self):
                super().__init__()
                self.emb = lib.layers.Embedding(10, 4)
                self.pos = lib.layers.Embedding(12, 4)
                self.out = lib.layers.Dense(3, activation="softmax")

            def call(self, inputs):
                n = lib.ops.shape(inputs)[-1]
                return self.out(self.emb(inputs) + self.pos(lib.ops.arange(0, n, 1)))
        return Tagger()

    rng = np.random.default_rng(5)
    x = rng.integers(0, 10, size=(8, 7))
    y = rng.integers(0, 3, size=(8, 7))
    short, long = rng.integers(0, 10, size=(2, 4)), rng.integers(0, 10, size=(3, 11))
    results = []
    weights = None
    for lib in (keras, tn):
        m = make(lib)
        m.compile(lib.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
        m(x[:1])  # built at length 7
        if weights is None:
            weights = [np.asarray(a) for a in m.get_weights()]
        m.set_weights(weights)
        m.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        results.append([m.predict(short, verbose=0), m.predict(long, verbose=0),
                        m.evaluate(x, y, verbose=0), m.predict(x, verbose=0)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # a functional model keeps its declared shape
    i = tn.Input((7,), dtype="int32")
    f = tn.Model(i, tn.layers.Embedding(10, 2)(i))
    with pytest.raises(ValueError, match=r"samples of shape \(4,\), but the model expects"):
        f.predict(short, verbose=0)


def _ragged_batches(seed=0):
    """keras-io's text batches padded per batch: lengths and sizes vary (a smaller
    last batch), zeros pad some sequences' ends."""
    rng = np.random.default_rng(seed)
    out = []
    for i, length in enumerate([5, 3, 7, 4]):
        b = 3 if i < 3 else 2
        x = rng.integers(1, 20, size=(b, length)).astype("int32")
        x[:, length - 1:] *= (rng.uniform(size=(b, 1)) > 0.5).astype("int32")
        out.append((x, rng.integers(0, 2, size=(b,)).astype("float32")))
    return out


def _ragged_run(lib, batches):
    class Ragged(lib.utils.PyDataset):
        def __len__(self):
            return len(batches)

        def __getitem__(self, i):
            return batches[i]

    def gen():
        yield from batches

    m = lib.Sequential([lib.Input((None,), dtype="int32"),
                        lib.layers.Embedding(20, 4, mask_zero=True),
                        lib.layers.GlobalAveragePooling1D(), lib.layers.Dense(1)])
    m.set_weights([np.random.default_rng(k).normal(size=np.shape(w)).astype("float32") * 0.5
                   for k, w in enumerate(m.get_weights())])
    m.compile(optimizer=lib.optimizers.SGD(0.1),
              loss=lib.losses.BinaryCrossentropy(from_logits=True), metrics=["accuracy"])
    h = m.fit(Ragged(), epochs=2, shuffle=False, verbose=0).history
    e = m.evaluate(Ragged(), verbose=0)
    p = m.predict(Ragged(), verbose=0)
    h2 = m.fit(gen(), steps_per_epoch=len(batches), verbose=0).history
    return h, e, p, h2, m.get_weights()


def test_py_dataset_and_generator_of_varying_shapes_as_keras(keras):
    batches = _ragged_batches()
    ours, theirs = _ragged_run(tn, batches), _ragged_run(keras, batches)
    for k in ("loss", "accuracy"):
        np.testing.assert_allclose(ours[0][k], theirs[0][k], rtol=1e-5)
        np.testing.assert_allclose(ours[3][k], theirs[3][k], rtol=1e-5)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    for a, b in zip(ours[4], theirs[4]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _subclassed_ragged_run(lib, batches):
    class Pooled(lib.Model):
        def __init__(self):
            super().__init__()
            self.d = lib.layers.Dense(1)

        def call(self, x):
            return self.d(lib.ops.mean(x, axis=1))

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            return lib.ops.mean(lib.ops.square(y_pred - y)) * 2.0

    class Batches(lib.utils.PyDataset):
        def __len__(self):
            return len(batches)

        def __getitem__(self, i):
            return batches[i]

    m = Pooled()
    m(batches[0][0])  # built for the first batch's shape, which comes back each epoch
    m.set_weights([np.ones((2, 1), "float32"), np.zeros(1, "float32")])
    m.compile(optimizer=lib.optimizers.SGD(0.1))
    return m.fit(Batches(), epochs=2, shuffle=False, verbose=0).history["loss"], m.get_weights()


def test_subclassed_model_with_compute_loss_on_varying_shapes_as_keras(keras):
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(3, n, 2)).astype("float32"),
                rng.normal(size=(3, 1)).astype("float32")) for n in (4, 2, 5)]
    ours, theirs = _subclassed_ragged_run(tn, batches), _subclassed_ragged_run(keras, batches)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_py_dataset_batch_order_shuffled_by_fit():
    # Keras's PyDataset adapter shuffles the batches' order each epoch when
    # fit(shuffle=True) (its default): each batch as given, in an order drawn per epoch
    seen = []

    class Tagged(tn.utils.PyDataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            seen.append(i)
            return np.full((2, 3), i, "float32"), np.zeros((2, 1), "float32")

    m = tn.Sequential([tn.Input((3,)), tn.layers.Dense(1)])
    m.compile("sgd", "mse")
    m.fit(Tagged(), epochs=2, verbose=0)
    first, second = seen[-12:-6], seen[-6:]
    assert sorted(first) == sorted(second) == list(range(6))
    assert first != list(range(6)) or second != list(range(6))
    seen.clear()
    m.fit(Tagged(), epochs=1, shuffle=False, verbose=0)
    assert seen[-6:] == list(range(6))


def test_fixed_shape_model_names_the_batch_of_another_shape():
    class Ragged(tn.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            n = 5 + i
            return np.zeros((4, n), "int64"), np.zeros((4, n), "int64")

    i = tn.Input((5,), dtype="int32")
    m = tn.Model(i, tn.layers.Dense(3)(tn.layers.Embedding(4, 2)(i)))
    m.compile("sgd", "sparse_categorical_crossentropy")
    for call in (lambda: m.fit(Ragged(), epochs=1, verbose=0),
                 lambda: m.evaluate(Ragged(), verbose=0),
                 lambda: m.predict(Ragged(), verbose=0)):
        with pytest.raises(ValueError, match=r"batch 1 of the data has .* per-sample shape "
                                             r"\(6,\); the model expects \(5,\).*"
                                             r"test_nn_keras_io_vision_nlp\.py:\d+"):
            call()


def test_callback_predicts_on_another_shape_inside_fit_as_keras(keras):
    """super_resolution_sub_pixel's callback: predict on a whole image at the end of
    each epoch of a fit on small crops, through a DepthToSpace written with ops."""

    def make(lib):
        class DepthToSpace(lib.layers.Layer):
            def call(self, x):
                b, h, w, d = lib.ops.shape(x)
                x = lib.ops.reshape(x, [b, h, w, 2, 2, d // 4])
                x = lib.ops.transpose(x, [0, 1, 3, 2, 4, 5])
                return lib.ops.reshape(x, [b, h * 2, w * 2, d // 4])

        i = lib.Input((None, None, 1))
        return lib.Model(i, DepthToSpace()(lib.layers.Conv2D(4, 3, padding="same")(i)))

    rng = np.random.default_rng(6)
    x = rng.uniform(size=(8, 4, 4, 1)).astype("float32")
    y = rng.uniform(size=(8, 8, 8, 1)).astype("float32")
    whole = rng.uniform(size=(1, 6, 5, 1)).astype("float32")
    seen = {}
    w = None
    for lib in (keras, tn):
        class Probe(lib.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                seen.setdefault(lib.__name__, []).append(self.model.predict(whole, verbose=0))

        m = make(lib)
        if w is None:
            w = [np.asarray(a) for a in m.get_weights()]
        m.set_weights(w)
        m.compile(lib.optimizers.SGD(0.1), "mse")
        m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[Probe()])
    ours, theirs = seen["tessera.nn"], seen["keras"]
    assert ours[0].shape == (1, 12, 10, 1)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_end_to_end_model_called_on_strings():
    """pretrained_word_embeddings' end_to_end_model(strings): the string Input's
    TextVectorization runs on them first, as predict does (Keras's layer needs
    TensorFlow: the oracle is the inner model on the vectorized text)."""
    texts = np.array(["the cat sat", "a dog ran far away", "the dog sat"])
    vectorizer = tn.layers.TextVectorization(max_tokens=20, output_sequence_length=6)
    vectorizer.adapt(texts)
    i = tn.Input((None,), dtype="int32")
    inner = tn.Model(i, tn.layers.Dense(2)(tn.layers.GlobalAveragePooling1D()(
        tn.layers.Embedding(20, 3)(i))))
    s = tn.Input((1,), dtype="string")
    end_to_end = tn.Model(s, inner(vectorizer(s)))
    strings = tn.ops.convert_to_tensor([["the dog ran"], ["a cat"]])
    want = inner.predict(np.asarray(vectorizer(np.array([["the dog ran"], ["a cat"]]))),
                         verbose=0)
    np.testing.assert_allclose(np.asarray(end_to_end(strings)), want, rtol=1e-6)
    np.testing.assert_allclose(end_to_end.predict(np.array([["the dog ran"], ["a cat"]]),
                                                  verbose=0), want, rtol=1e-6)
