"""Users' subclasses of built-in layers that override call and reach the
built-in's computation with super().call(...) (and super().build), against
Keras 3 on JAX (the oracle: same classes written for both, same weights via
set_weights, same data): predictions, a few fit losses, weights (the
built-in's and the subclass's own, one Variable each, in Keras's order),
eager calls on arrays and compute_output_shape."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402

RNG = np.random.default_rng(11)


def _classes(lib):
    layers, ops = lib.layers, lib.ops

    class ScaledDense(layers.Dense):
        """A weight of its own, made after the built-in's in build."""

        def build(self, input_shape):
            super().build(input_shape)
            self.scale = self.add_weight(shape=(), initializer="ones", name="scale")

        def call(self, x):
            return super().call(x) * self.scale

    class ReluConv(layers.Conv2D):
        """No build of its own: the built-in's weights, made by its build."""

        def call(self, x):
            return ops.relu(super().call(x)) - 0.5

    class LastLSTM(layers.LSTM):
        # (Keras asks for the built-in's arguments, as its build is the built-in's)
        def call(self, sequences, initial_state=None, mask=None, training=False):
            return ops.tanh(super().call(sequences, mask=mask, training=training)) * 2.0

    class ResidualMHA(layers.MultiHeadAttention):
        def call(self, query, value, key=None):
            return super().call(query, value) + query

    class ScaledEmbedding(layers.Embedding):
        def call(self, ids):
            return super().call(ids) * 3.0

    class ShiftedBN(layers.BatchNormalization):
        def build(self, input_shape):
            super().build(input_shape)
            self.shift = self.add_weight(shape=(input_shape[-1],), initializer="zeros",
                                         name="shift")

        def call(self, x, training=None):
            return super().call(x, training=training) + self.shift

    return dict(dense=ScaledDense, conv=ReluConv, lstm=LastLSTM, mha=ResidualMHA,
                emb=ScaledEmbedding, bn=ShiftedBN)


T, K = _classes(nn), _classes(keras)


def _model(lib, classes, case):
    c = classes[case]
    if case == "dense":
        i = lib.Input((5,))
        return lib.Model(i, c(3, activation="tanh")(i)), i
    if case == "conv":
        i = lib.Input((6, 6, 2))
        return lib.Model(i, lib.layers.Flatten()(c(3, 3)(i))), i
    if case == "lstm":
        i = lib.Input((4, 3))
        return lib.Model(i, c(5)(i)), i
    if case == "mha":
        q, v = lib.Input((3, 4)), lib.Input((5, 4))
        return lib.Model([q, v], c(num_heads=2, key_dim=3)(q, v)), (q, v)
    if case == "emb":
        i = lib.Input((4,), dtype="int32")
        return lib.Model(i, lib.layers.Flatten()(c(10, 3)(i))), i
    i = lib.Input((4,))
    return lib.Model(i, lib.layers.Dense(2)(c()(i))), i


def _data(case, n=12):
    if case == "dense":
        x = RNG.normal(size=(n, 5))
    elif case == "conv":
        x = RNG.normal(size=(n, 6, 6, 2))
    elif case == "lstm":
        x = RNG.normal(size=(n, 4, 3))
    elif case == "mha":
        x = [RNG.normal(size=(n, 3, 4)).astype("float32"),
             RNG.normal(size=(n, 5, 4)).astype("float32")]
    elif case == "emb":
        x = RNG.integers(0, 10, size=(n, 4)).astype("int32")
    else:
        x = RNG.normal(size=(n, 4)) * 2 + 1
    if not isinstance(x, list) and x.dtype == np.float64:
        x = x.astype("float32")
    return x


CASES = ["dense", "conv", "lstm", "mha", "emb", "bn"]


@pytest.mark.parametrize("case", CASES)
def test_subclass_matches_keras_predict_and_fit(case):
    tm, _ = _model(nn, T, case)
    km, _ = _model(keras, K, case)
    assert [w.shape for w in tm.get_weights()] == [tuple(w.shape) for w in km.get_weights()]
    # the subclass's weights: the built-in's and its own, each once
    assert len({id(v) for v in tm.weights}) == len(tm.weights)
    weights = [(RNG.normal(size=w.shape) * 0.4).astype("float32") for w in km.get_weights()]
    if case == "bn":  # moving variance must stay positive
        weights = [np.abs(w) + 0.5 if k == 3 else w for k, w in enumerate(weights)]
    km.set_weights(weights)
    tm.set_weights(weights)
    x = _data(case)
    np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0),
                               rtol=2e-4, atol=2e-5)
    n = len(x[0]) if isinstance(x, list) else len(x)
    y = RNG.normal(size=(n,) + tuple(km.output_shape[1:])).astype("float32")
    tm.compile(optimizer=nn.optimizers.SGD(0.05), loss="mse")
    km.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    th = tm.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
    kh = km.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(th, kh, rtol=2e-4, atol=1e-5)
    for a, b in zip(tm.get_weights(), km.get_weights()):  # trained: the same Variables
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-3, atol=2e-5)


def test_subclass_eager_call_and_compute_output_shape():
    t = T["dense"](3)
    x = _data("dense", 4)
    y = t(x)
    assert [v.path.split("/")[-1] for v in t.weights] == ["kernel", "bias", "scale"]
    k = K["dense"](3)
    k(x)
    k.set_weights(t.get_weights())
    np.testing.assert_allclose(np.asarray(y), np.asarray(k(x)), rtol=1e-5, atol=1e-6)
    assert t.compute_output_shape((None, 5)) == tuple(k.compute_output_shape((None, 5)))
    assert len(t.weights) == 3  # compute_output_shape made no weight
    conv = T["conv"](4, 3)
    assert conv.compute_output_shape((2, 6, 6, 2)) == \
        tuple(K["conv"](4, 3).compute_output_shape((2, 6, 6, 2)))


def test_subclass_weights_are_the_variables_the_program_trains():
    tm, _ = _model(nn, T, "dense")
    layer = tm.layers[-1]
    assert layer.kernel is layer.weights[0] and layer.scale is layer.weights[2]
    layer.scale.assign(np.float32(0.0))
    assert np.abs(tm.predict(_data("dense", 3), verbose=0)).max() == 0.0


def test_super_call_on_another_shape_is_a_named_error():
    class Twice(nn.layers.Dense):
        def call(self, x):  # the kernel was built for x's 5 features, not 10
            return super().call(nn.ops.concatenate([x, x], axis=-1))

    i = nn.Input((5,))
    with pytest.raises(ValueError, match=r"\[Dense\].*'kernel' of shape \(5, 3\).*\(10, 3\)"):
        nn.Model(i, Twice(3)(i))


def test_subclass_saves_and_loads(tmp_path):
    tm, _ = _model(nn, T, "dense")
    x = _data("dense", 3)
    path = str(tmp_path / "m.keras")
    tm.save(path)
    back = nn.models.load_model(path, custom_objects={"ScaledDense": T["dense"]})
    np.testing.assert_allclose(back.predict(x, verbose=0), tm.predict(x, verbose=0),
                               rtol=1e-6)
