"""evaluate and predict without batch_size run batches of 32 rows, as Keras
3 does for arrays: callbacks see as many on_test_batch_end /
on_predict_batch_end calls, with the same running logs; fit's validation
runs in batches of validation_batch_size, else fit's batch_size. Keras 3 on
JAX is the oracle."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402

RNG = np.random.default_rng(5)
X = RNG.normal(size=(150, 4)).astype(np.float32)
Y = (X @ RNG.normal(size=(4, 1))).astype(np.float32)


def _model(lib):
    m = lib.Sequential([lib.Input((4,)), lib.layers.Dense(5, activation="tanh"),
                        lib.layers.Dense(1)])
    m.compile(optimizer=lib.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    return m


def _both():
    t, k = _model(nn), _model(keras)
    t.set_weights([RNG.normal(size=w.shape).astype(np.float32) * 0.5 for w in t.get_weights()])
    k.set_weights(t.get_weights())
    return t, k


def _recorder(lib):
    class Record(lib.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.events = []

        def on_test_batch_end(self, batch, logs=None):
            self.events.append(("test", batch, dict(logs or {})))

        def on_predict_batch_end(self, batch, logs=None):
            self.events.append(("predict", batch, len(logs["outputs"])))

        def on_train_batch_end(self, batch, logs=None):
            self.events.append(("train", batch, None))

    return Record()


def _same_events(te, ke):
    assert [e[:2] for e in te] == [e[:2] for e in ke]
    for (kind, _, a), (_, _, b) in zip(te, ke):
        if kind == "test":
            assert sorted(a) == sorted(b)
            for name in a:
                np.testing.assert_allclose(a[name], float(b[name]), rtol=2e-5, atol=1e-6)
        elif kind == "predict":
            assert a == b


def test_evaluate_batches_of_32_as_keras():
    t, k = _both()
    rt, rk = _recorder(nn), _recorder(keras)
    got = t.evaluate(X, Y, verbose=0, callbacks=[rt])
    want = k.evaluate(X, Y, verbose=0, callbacks=[rk])
    assert len(rt.events) == 5  # 150 rows: 4 batches of 32 and one of 22
    _same_events(rt.events, rk.events)
    np.testing.assert_allclose(got, want, rtol=2e-5)


def test_predict_batches_of_32_as_keras():
    t, k = _both()
    rt, rk = _recorder(nn), _recorder(keras)
    got = t.predict(X, verbose=0, callbacks=[rt])
    want = k.predict(X, verbose=0, callbacks=[rk])
    assert [e[2] for e in rt.events] == [32, 32, 32, 32, 22]
    _same_events(rt.events, rk.events)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_size", [7, 64])
def test_an_explicit_batch_size_is_kept(batch_size):
    t, k = _both()
    rt, rk = _recorder(nn), _recorder(keras)
    t.evaluate(X, Y, batch_size=batch_size, verbose=0, callbacks=[rt])
    k.evaluate(X, Y, batch_size=batch_size, verbose=0, callbacks=[rk])
    assert len(rt.events) == -(-len(X) // batch_size)
    _same_events(rt.events, rk.events)


@pytest.mark.parametrize("batch_size, validation_batch_size", [(16, None), (None, None),
                                                               (16, 50)])
def test_fit_validation_batches_as_keras(batch_size, validation_batch_size):
    t, k = _both()
    rt, rk = _recorder(nn), _recorder(keras)
    kw = {"batch_size": batch_size, "validation_batch_size": validation_batch_size,
          "validation_data": (X[:70], Y[:70]), "epochs": 2, "verbose": 0, "shuffle": False}
    ht = t.fit(X[70:], Y[70:], callbacks=[rt], **kw)
    hk = k.fit(X[70:], Y[70:], callbacks=[rk], **kw)
    _same_events(rt.events, rk.events)
    for name in hk.history:
        np.testing.assert_allclose(ht.history[name], hk.history[name], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_a_bad_batch_size_is_an_error(bad):
    t, _ = _both()
    with pytest.raises(ValueError, match=r"\[evaluate\] batch_size"):
        t.evaluate(X, Y, batch_size=bad, verbose=0)
    with pytest.raises(ValueError, match=r"\[predict\] batch_size"):
        t.predict(X, batch_size=bad, verbose=0)


@pytest.mark.parametrize("seeded", ["generator", "int"])
def test_random_draws_in_call_per_batch_as_keras(seeded):
    """keras.random in a layer's call during predict and evaluate: with a
    SeedGenerator each batch (and each later call) draws anew, with an int seed
    every batch draws the same numbers, as Keras's."""
    def noisy(lib):
        class Noise(lib.layers.Layer):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.seed = lib.random.SeedGenerator(3) if seeded == "generator" else 4

            def call(self, x):
                return x + lib.random.normal(lib.ops.shape(x), seed=self.seed)

        inp = lib.Input((3,))
        m = lib.Model(inp, Noise()(inp))
        m.compile(loss="mse")
        return m

    x = np.zeros((96, 3), np.float32)
    seen = {}
    for name, lib in (("tessera", nn), ("keras", keras)):
        m = noisy(lib)
        a, b = m.predict(x, verbose=0), m.predict(x, verbose=0)
        seen[name] = (np.array_equal(a[:32], a[32:64]), np.array_equal(a, b))
    assert seen["tessera"] == seen["keras"], seen
