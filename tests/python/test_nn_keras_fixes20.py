"""Issue 30's silent differences fixed in its twentieth pass, against Keras 3 on JAX with the
same weights and data: a subclassed model's built-in layers called without training= in
fit/evaluate/predict (the image augmentation layers default to training=True: patch_convnet's
regression), the batch axis read by ops.shape(x)[0] under batches of several sizes, a
functional graph's node recorded with training=True, noise layers' own seeds in an eager
call, AlphaDropout's noise_shape, and temporal sample weights."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(20)


def _close(a, b, tol=2e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _close_weights(tm, km, tol=2e-4):
    for a, b in zip(tm.get_weights(), km.get_weights()):
        _close(a, b, tol)


# ------------------------------------------------ the batch axis read with ops.shape(x)[0]
def _token_model(lib):
    """patch_convnet's class token: a variable repeated ops.shape(x)[0] times in a layer's
    call, put before the patches."""
    ops, layers = lib.ops, lib.layers

    class Pool(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.cls = lib.Variable(ops.ones((1, 1, 4)))

        def build(self, input_shape):
            self.dense = layers.Dense(3)

        def call(self, x):
            token = ops.repeat(self.cls, repeats=ops.shape(x)[0], axis=0)
            x = ops.concatenate([token, x], axis=1)
            return self.dense(ops.mean(x, axis=1))

    class Net(lib.Model):
        def __init__(self):
            super().__init__()
            self.embed = layers.Dense(8)
            self.pool = Pool()

        def call(self, x, training=False):
            return self.pool(ops.reshape(self.embed(x), (-1, 2, 4)))

    return Net()


def test_batch_axis_read_by_shape_follows_every_batch(keras):
    """fit, evaluate and predict with batches of 16 over 50 rows (a last batch of 2), after
    an eager call on 7 rows: every step repeats the token by its own batch's rows."""
    x = RNG.normal(size=(50, 6)).astype("float32")
    y = RNG.integers(0, 3, (50, 1))
    tm, km = _token_model(tn), _token_model(keras)
    tm(x[:7]), km(x[:7])
    _same_weights(tm, km)
    _close(tm(x[:7]), km(x[:7]))
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True))
    ht = tm.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]
    hk = km.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]
    _close(ht, hk, 1e-4)
    _close_weights(tm, km)
    _close(tm.evaluate(x, y, batch_size=16, verbose=0), km.evaluate(x, y, batch_size=16,
                                                                      verbose=0), 1e-4)
    pt, pk = tm.predict(x, batch_size=16, verbose=0), km.predict(x, batch_size=16, verbose=0)
    assert pt.shape == pk.shape == (50, 3)
    _close(pt, pk, 1e-4)


# ------------------------------ built-in layers called without training= by a model's call
def _brightened_model(lib):
    """A subclassed model whose call uses an image augmentation layer without training=:
    Keras's JAX trainer calls `call` itself (no call context), so the layer takes its own
    default, training=True, in fit, evaluate and predict alike. RandomBrightness over a
    one-point factor range is deterministic."""
    layers = lib.layers

    class Net(lib.Model):
        def __init__(self):
            super().__init__()
            self.bright = layers.RandomBrightness(factor=(0.25, 0.25), value_range=(0, 1))
            self.flat = layers.Flatten()
            self.out = layers.Dense(2)

        def call(self, images, training=False):
            return self.out(self.flat(self.bright(images)))

    return Net()


def test_augmentation_in_a_subclassed_call_defaults_to_training(keras):
    x = RNG.uniform(0, 1, (12, 3, 3, 1)).astype("float32")
    y = RNG.integers(0, 2, 12)
    tm, km = _brightened_model(tn), _brightened_model(keras)
    tm(x[:2]), km(x[:2])
    _same_weights(tm, km)
    pk = km.predict(x, batch_size=5, verbose=0)
    _close(tm.predict(x, batch_size=5, verbose=0), pk)
    # (a test that can fail: inference would differ)
    assert not np.allclose(pk, np.asarray(km.out(km.flat(x))), atol=1e-3)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True))
    _close(tm.evaluate(x, y, batch_size=5, verbose=0), km.evaluate(x, y, batch_size=5,
                                                                     verbose=0), 1e-5)
    tm.fit(x, y, batch_size=5, epochs=1, shuffle=False, verbose=0)
    km.fit(x, y, batch_size=5, epochs=1, shuffle=False, verbose=0)
    _close_weights(tm, km)


# ------------------------------------- a functional graph's node recorded with training=True
def _dropped_graph(lib, nested=False):
    """Dropout(0.5)(x, training=True) recorded in a functional graph (optionally a model
    nested in another)."""
    layers = lib.layers
    inp = lib.Input((400,))
    out = layers.Dropout(0.5)(inp, training=True)
    model = lib.Model(inp, out)
    if nested:
        outer_in = lib.Input((400,))
        model = lib.Model(outer_in, layers.Identity()(model(outer_in)))
    return model


@pytest.mark.parametrize("nested", [False, True])
def test_graph_node_recorded_with_training_applies_in_an_eager_call(keras, nested):
    """Keras: an eager model(x) opens a call context with training=None, so the node keeps
    its training=True (operation_fn passes on only a training that is not None); predict
    and model(x, training=False) pass False over it."""
    x = np.ones((5, 400), "float32")
    for lib in (tn, keras):
        m = _dropped_graph(lib, nested)
        eager = np.asarray(m(x))
        assert set(np.unique(eager)) == {0.0, 2.0}, lib.__name__
        assert 0.35 < (eager == 0).mean() < 0.65
        _close(m.predict(x, verbose=0), x)
        _close(m(x, training=False), x)
    tm = _dropped_graph(tn, nested)
    assert not np.array_equal(np.asarray(tm(x)), np.asarray(tm(x)))  # a fresh draw each call
    tn.utils.set_random_seed(3)
    first = np.asarray(tm(x))
    tn.utils.set_random_seed(3)
    np.testing.assert_array_equal(np.asarray(tm(x)), first)


# ---------------------------------------- an eager training call draws from a layer's own seed
def _seeded_call(lib, make, seed, calls=1):
    """A fresh one-layer functional model's eager training-mode outputs, `calls` times."""
    inp = lib.Input((64,))
    model = lib.Model(inp, make(lib.layers, seed)(inp))
    x = np.ones((3, 64), "float32")
    return [np.asarray(model(x, training=True)) for _ in range(calls)]


SEEDED = {
    "GaussianNoise": lambda L, s: L.GaussianNoise(1.0, seed=s),
    "GaussianDropout": lambda L, s: L.GaussianDropout(0.4, seed=s),
    "AlphaDropout": lambda L, s: L.AlphaDropout(0.4, seed=s),
    "Dropout": lambda L, s: L.Dropout(0.4, seed=s),
}


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_eager_training_call_draws_from_the_layers_own_seed(keras, name):
    """As Keras's SeedGenerator(seed): a fresh layer of the same seed repeats its draws
    whatever was drawn from the global stream in between; another seed, or the same
    layer's next call, draws others."""
    for lib in (tn, keras):
        first, again = _seeded_call(lib, SEEDED[name], 1, calls=2)
        lib.random.normal((4,))  # (a global draw between)
        lib.utils.set_random_seed(7)
        (same,) = _seeded_call(lib, SEEDED[name], 1)
        (other,) = _seeded_call(lib, SEEDED[name], 2)
        np.testing.assert_array_equal(first, same, err_msg=lib.__name__)
        assert not np.allclose(first, other), lib.__name__
        assert not np.allclose(first, again), lib.__name__


# ----------------------------------------------------------------- AlphaDropout's noise_shape
def _alpha_parts(lib, noise_shape, x):
    """(which positions were dropped, the kept values' error from Keras's a * x + b) of
    AlphaDropout(0.5, noise_shape) in an eager training-mode call on x."""
    inp = lib.Input(x.shape[1:])
    layer = lib.layers.AlphaDropout(0.5, noise_shape=noise_shape, seed=3)
    y = np.asarray(lib.Model(inp, layer(inp))(x, training=True))
    alpha_p = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946
    a = ((1 - 0.5) * (1 + 0.5 * alpha_p ** 2)) ** -0.5
    b = -a * alpha_p * 0.5
    dropped = np.isclose(y, a * alpha_p + b, atol=1e-6)
    kept_error = np.abs(np.where(dropped, 0.0, y - (a * x + b))).max()
    return dropped, kept_error, layer.get_config()["noise_shape"]


@pytest.mark.parametrize("noise_shape", [None, (None, 1, None), (1, None, None),
                                         (None, 1, 1), (6, 5, 1)])
def test_alpha_dropout_noise_shape_as_keras(keras, noise_shape):
    """Keras honours noise_shape (None: the input's size), one draw per position of it,
    broadcast over its size-1 axes."""
    x = RNG.normal(size=(6, 5, 4)).astype("float32") + 3.0
    for lib in (tn, keras):
        dropped, kept_error, config = _alpha_parts(lib, noise_shape, x)
        assert kept_error < 1e-5, lib.__name__
        assert config == noise_shape
        assert 0.0 < dropped.mean() < 1.0
        for axis, d in enumerate(noise_shape or ()):
            if d == 1:  # the same mask along a broadcast axis
                first = np.take(dropped, [0], axis=axis)
                assert (dropped == first).all(), (lib.__name__, axis)
            else:
                assert not (dropped == np.take(dropped, [0], axis=axis)).all()


def test_alpha_dropout_noise_shape_that_does_not_broadcast():
    with pytest.raises(ValueError, match=r"\[AlphaDropout\] noise_shape \(None, 3, None\) does "
                                         r"not broadcast to the input's shape \(None, 5, 4\)"):
        tn.layers.AlphaDropout(0.5, noise_shape=(None, 3, None))(tn.Input((5, 4)))
    with pytest.raises(ValueError, match=r"\[AlphaDropout\] noise_shape must be a tuple"):
        tn.layers.AlphaDropout(0.5, noise_shape=(0, None))


# --------------------------------------------------------------- temporal sample weights
def _sequence_model(lib):
    inp = lib.Input((5, 3))
    model = lib.Model(inp, lib.layers.Dense(4)(lib.layers.GRU(6, return_sequences=True)(inp)))
    model.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], weighted_metrics=["accuracy"])
    return model


@pytest.mark.parametrize("trailing_one", [False, True])
def test_temporal_sample_weights_in_fit_and_evaluate(keras, trailing_one):
    """sample_weight (n, steps) for a (n, steps, classes) output: the per-step losses
    weighted and reduced over the steps as Keras's (also as (n, steps, 1)); the weighted
    metric weighted per step, the plain one not; batches of 4 over 10 rows."""
    x = RNG.normal(size=(10, 5, 3)).astype("float32")
    y = RNG.integers(0, 4, (10, 5))
    w = RNG.uniform(0, 2, (10, 5)).astype("float32")
    w[:, 3:] = 0.0  # (the padded steps of a sequence, as transformer_asr's)
    if trailing_one:
        w = w[..., None]
    tm, km = _sequence_model(tn), _sequence_model(keras)
    _same_weights(tm, km)
    te = tm.evaluate(x, y, sample_weight=w, batch_size=4, verbose=0, return_dict=True)
    ke = km.evaluate(x, y, sample_weight=w, batch_size=4, verbose=0, return_dict=True)
    assert sorted(te) == sorted(ke)
    for k in ke:
        _close(te[k], ke[k], 1e-5)
    ht = tm.fit(x, y, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    hk = km.fit(x, y, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    for k in hk.history:
        _close(ht.history[k], hk.history[k], 1e-4)
    _close_weights(tm, km)
    # (a test that can fail: unweighted, the loss differs)
    assert not np.isclose(km.evaluate(x, y, verbose=0)[0],
                          km.evaluate(x, y, sample_weight=w, verbose=0)[0])


def test_sample_weight_that_does_not_broadcast_names_the_shapes():
    tm = _sequence_model(tn)
    x, y = np.zeros((6, 5, 3), "float32"), np.zeros((6, 5), "int64")
    for where, call in (("fit", lambda w: tm.fit(x, y, sample_weight=w, verbose=0)),
                        ("evaluate", lambda w: tm.evaluate(x, y, sample_weight=w, verbose=0))):
        with pytest.raises(ValueError, match=rf"\[{where}\] sample_weight of shape \(6, 3\) "
                                             r"does not broadcast to the losses: output 0's "
                                             r".* shape \(6, 5\); give one weight per "
                                             r"sample, shape \(6, 1\) .* shape \(6, 5\) \(at "):
            call(np.ones((6, 3)))
    with pytest.raises(ValueError, match=r"\[fit\] sample_weight\[\(1, 2\)\] is -1.0"):
        w = np.ones((6, 5))
        w[1, 2] = -1.0
        tm.fit(x, y, sample_weight=w, verbose=0)
