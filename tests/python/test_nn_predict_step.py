"""A subclassed Model's predict_step override traced into predict's program
(Keras 3's hook, as its TensorFlow/PyTorch trainers call it: predict_step(self,
data)), against Keras 3 on JAX with the same weights (whose JAX trainer calls the
stateless form predict_step(self, state, data): the oracle writes that form with
the same computation): dict, tuple and list results concatenated over the
batches as Keras's, sub-model calls, PyDataset and generator data, the callbacks'
logs; and what cannot be traced, refused by name."""

import numpy as np
import pytest

import tessera.nn as tn


def _x(n=10, d=4, seed=0):
    return np.random.RandomState(seed).randn(n, d).astype("float32")


def _post(lib, p, head):
    """What both predict_steps compute from the model's output p and a sub-model's."""
    ops = lib.ops
    return {"probs": ops.softmax(p, axis=-1), "cls": ops.argmax(p, axis=-1),
            "extra": (p * 2.0 + 1.0, [ops.max(head, axis=-1, keepdims=True)])}


def _models(keras):
    """(tessera model, Keras model) of the same weights, each with its predict_step."""
    def make(lib, stateless):
        class Classifier(lib.Model):
            def __init__(self):
                super().__init__()
                self.body = lib.layers.Dense(3)
                self.head = lib.Sequential([lib.Input(shape=(4,)), lib.layers.Dense(2)])

            def call(self, x):
                return self.body(x)

            if stateless:  # Keras's JAX trainer: predict_step(self, state, data)
                def predict_step(self, state, data):
                    x = data[0] if isinstance(data, tuple) else data
                    p, nt = self.stateless_call(*state, x)
                    w, b = self.head_weights  # (a stateful layer call is refused in here)
                    return _post(lib, p, lib.ops.matmul(x, w) + b), nt
            else:
                def predict_step(self, data):
                    x = data[0] if isinstance(data, tuple) else data
                    return _post(lib, self(x, training=False), self.head(x))

        m = Classifier()
        m(np.zeros((1, 4), "float32"))
        m.head(np.zeros((1, 4), "float32"))
        return m

    t, k = make(tn, False), make(keras, True)
    w = [np.random.RandomState(i).randn(*np.shape(v)).astype("float32")
         for i, v in enumerate(k.body.get_weights())]
    k.body.set_weights(w)
    t.body.set_weights(w)
    t.head.set_weights(k.head.get_weights())
    k.head_weights = k.head.get_weights()
    return t, k


def _close(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _close(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _close(u, v)
    else:
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class _Logs:
    def __init__(self, lib):
        class Cb(lib.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.seen = []

            def on_predict_batch_end(self, batch, logs=None):
                self.seen.append((batch, {k: (np.asarray(v).shape if not isinstance(
                    v, (list, tuple)) else len(v)) for k, v in logs.items()}))

        self.cb = Cb()


def test_predict_step_structure_and_values_match_keras(keras):
    t, k = _models(keras)
    x = _x()
    lt, lk = _Logs(tn), _Logs(keras)
    got = t.predict(x, batch_size=4, verbose=0, callbacks=[lt.cb])
    want = k.predict(x, batch_size=4, verbose=0, callbacks=[lk.cb])
    _close(got, {key: want[key] for key in want})
    assert list(got) == list(want)  # the keys in Keras's order (sorted)
    assert lt.cb.seen == lk.cb.seen  # a dict's outputs flattened into the logs, as Keras's


def test_predict_step_on_pydataset_and_generator(keras):
    t, k = _models(keras)
    x = _x(11)

    def seq(lib):
        class Batches(lib.utils.PyDataset):
            def __len__(self):
                return 3

            def __getitem__(self, i):
                rows = x[i * 4:(i + 1) * 4]
                return rows, np.zeros((len(rows), 3), "float32")
        return Batches()

    _close(t.predict(seq(tn), verbose=0), k.predict(seq(keras), verbose=0))

    def gen():
        yield (x[:5],)
        yield (x[5:],)

    _close(t.predict(gen(), verbose=0), k.predict(gen(), verbose=0))


def test_predict_step_returning_a_tensor_or_a_tuple(keras):
    class One(tn.Model):
        def __init__(self):
            super().__init__()
            self.d = tn.layers.Dense(3)

        def call(self, x):
            return self.d(x)

        def predict_step(self, data):
            p = self(data)
            return tn.ops.sigmoid(p) * 10.0

    m = One()
    x = _x(7)
    plain = tn.Model.predict(m, x, verbose=0)  # (the same model without the step: as below)
    got = m.predict(x, batch_size=3, verbose=0)
    np.testing.assert_allclose(got, 10.0 / (1.0 + np.exp(-np.asarray(m(x)))), rtol=1e-5)
    assert plain.shape == got.shape == (7, 3)

    class Pair(One):
        def predict_step(self, data):
            p = self(data)
            return p, -p

    m2 = Pair()
    a, b = m2.predict(x, batch_size=2, verbose=0)
    np.testing.assert_allclose(a, -b)
    assert isinstance(m2.predict(x, verbose=0), tuple)


def test_predict_step_after_training_reads_the_new_weights():
    class M(tn.Model):
        def __init__(self):
            super().__init__()
            self.d = tn.layers.Dense(1)

        def call(self, x):
            return self.d(x)

        def predict_step(self, data):
            return self(data) + 100.0

    m = M()
    x = _x(8)
    m.compile(optimizer="sgd", loss="mse")
    before = m.predict(x, verbose=0)
    m.fit(x, np.ones((8, 1), "float32"), epochs=2, verbose=0)
    after = m.predict(x, verbose=0)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, np.asarray(m(x)) + 100.0, rtol=1e-5)


def _with_step(step):
    class M(tn.Model):
        def __init__(self):
            super().__init__()
            self.d = tn.layers.Dense(2)

        def call(self, x):
            return self.d(x)

    M.predict_step = step
    return M()


def test_predict_step_refusals_name_the_hook():
    x = _x(4)
    with pytest.raises(TypeError, match=r"\[predict\] M\.predict_step returns its result\[1\] "
                                        r"of type ndarray"):
        _with_step(lambda self, data: (self(data), np.zeros(3))).predict(x, verbose=0)
    with pytest.raises(ValueError, match=r"\[predict\] M\.predict_step returns its result, a "
                                         r"scalar .*test_nn_predict_step\.py:\d+"):
        _with_step(lambda self, data: tn.ops.mean(self(data))).predict(x, verbose=0)
    with pytest.raises(NotImplementedError, match=r"\[predict\] M\.predict_step takes \['state', "
                                                  r"'data'\].*stateless"):
        _with_step(lambda self, state, data: None).predict(x, verbose=0)
    with pytest.raises(TypeError, match=r"\[predict\] M\.predict_step returns its result of "
                                        r"type NoneType"):
        _with_step(lambda self, data: None).predict(x, verbose=0)


def test_predict_step_with_labels_it_cannot_compute():
    x = _x(4)

    def batches():
        yield x, np.ones((4, 2), "float32")

    m = _with_step(lambda self, data: self(data[0]) - data[1])
    with pytest.raises(ValueError, match=r"\[predict\] M\.predict_step's result cannot be "
                                         r"computed from x alone"):
        m.predict(batches(), verbose=0)
