"""Layers of issue 30 item 4 against Keras 3 on JAX (the same weights):
EinsumDense (equations with and without ellipses, bias_axes, activation, a
training step), RMSNormalization, layers.dot, layers.serialize/deserialize
and a user's Wrapper subclass."""

import numpy as np
import pytest

import tessera.nn as nn

RNG = np.random.default_rng(5)


def _same_weights(ours, theirs, x):
    """Builds both layers on x, gives Keras's weights tessera's random ones."""
    ours(x)
    theirs(x)
    ws = [RNG.normal(size=np.shape(w)).astype(np.float32) for w in ours.get_weights()]
    assert [w.shape for w in ws] == [tuple(np.shape(w)) for w in theirs.get_weights()]
    ours.set_weights(ws)
    theirs.set_weights(ws)


EINSUM = [
    ("ab,bc->ac", 5, None, None, (4, 3)),
    ("abc,cd->abd", (None, 6), "d", "relu", (2, 3, 4)),
    ("abc,cde->abde", (3, 2, 5), "de", None, (2, 3, 4)),  # multi-head projection
    ("abcd,cde->abe", (3, 6), "e", "tanh", (2, 3, 2, 4)),  # multi-head output
    ("...b,bc->...c", 5, "c", None, (2, 3, 4)),
    ("ab...,bc->ac...", 5, None, "relu", (2, 4, 3)),
]


@pytest.mark.parametrize("equation,output_shape,bias_axes,activation,shape", EINSUM)
def test_einsum_dense_matches_keras(keras, equation, output_shape, bias_axes, activation, shape):
    x = RNG.normal(size=shape).astype(np.float32)
    kw = dict(output_shape=output_shape, bias_axes=bias_axes, activation=activation)
    ours, theirs = nn.layers.EinsumDense(equation, **kw), keras.layers.EinsumDense(equation, **kw)
    _same_weights(ours, theirs, x)
    np.testing.assert_allclose(ours(x), np.asarray(theirs(x)), rtol=1e-5, atol=1e-5)
    assert ours.compute_output_shape(shape[1:]) == np.asarray(theirs(x)).shape[1:]
    cfg = ours.get_config()
    assert nn.layers.EinsumDense.from_config(cfg).get_config() == cfg


def test_einsum_dense_trains_like_keras(keras, tmp_path):
    x = RNG.normal(size=(16, 3, 4)).astype(np.float32)
    y = RNG.normal(size=(16, 3, 2, 5)).astype(np.float32)
    models = []
    for lib in (nn, keras):
        m = lib.Sequential([lib.Input((3, 4)),
                            lib.layers.EinsumDense("abc,cde->abde", (3, 2, 5), bias_axes="de",
                                                   activation="tanh",
                                                   kernel_constraint=lib.constraints.MaxNorm(1.0))])
        models.append(m)
    _same_weights(models[0].layers[0], models[1].layers[0], x)
    for m, lib in zip(models, (nn, keras)):
        m.compile(lib.optimizers.SGD(0.1), "mse")
        m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for u, v in zip(models[0].layers[0].get_weights(), models[1].layers[0].get_weights()):
        np.testing.assert_allclose(u, np.asarray(v), rtol=1e-4, atol=1e-5)
    path = str(tmp_path / "einsum.keras")
    models[0].save(path)
    back = nn.load_model(path)
    np.testing.assert_allclose(back.predict(x, verbose=0), models[0].predict(x, verbose=0),
                               rtol=1e-6)


def test_einsum_dense_errors():
    with pytest.raises(ValueError, match=r"\[EinsumDense\] invalid equation 'ab->b'"):
        nn.layers.EinsumDense("ab->b", 3)
    with pytest.raises(ValueError, match=r"\[EinsumDense\] bias_axes 'z' must be letters of the "
                                         r"output spec 'ac'"):
        nn.layers.EinsumDense("ab,bc->ac", 3, bias_axes="z")
    with pytest.raises(ValueError, match=r"\[EinsumDense\] the equation 'ab,bc->ac' needs inputs "
                                         r"of rank 2, got shape \(None, 3, 4\)"):
        nn.layers.EinsumDense("ab,bc->ac", 3)(np.ones((2, 3, 4), np.float32))


@pytest.mark.parametrize("axis,epsilon", [(-1, 1e-6), ([-2, -1], 1e-3), (2, 0.1)])
def test_rms_normalization_matches_keras(keras, axis, epsilon):
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    ours = nn.layers.RMSNormalization(axis=axis, epsilon=epsilon)
    theirs = keras.layers.RMSNormalization(axis=axis, epsilon=epsilon)
    _same_weights(ours, theirs, x)
    np.testing.assert_allclose(ours(x), np.asarray(theirs(x)), rtol=1e-5, atol=1e-6)
    assert ours.name == theirs.name.split("_1")[0] or ours.name.startswith("rms_normalization")
    with pytest.raises(ValueError, match=r"\[RMSNormalization\] axis 1 must be the last axes"):
        nn.layers.RMSNormalization(axis=1)(x)


def test_dot_serialize_and_wrapper(keras):
    a, b = RNG.normal(size=(3, 4)).astype(np.float32), RNG.normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_allclose(nn.layers.dot([a, b], axes=1),
                               np.asarray(keras.layers.dot([a, b], axes=1)), rtol=1e-5)
    np.testing.assert_allclose(nn.layers.dot([a, b], 1, normalize=True),
                               np.asarray(keras.layers.dot([a, b], 1, normalize=True)), rtol=1e-5)
    layer = nn.layers.Dense(3, activation="relu", name="d1")
    again = nn.layers.deserialize(nn.layers.serialize(layer))
    assert type(again) is nn.layers.Dense and again.get_config() == layer.get_config()
    theirs = keras.layers.serialize(keras.layers.Dense(3, activation="relu", name="d2"))
    assert set(nn.layers.serialize(layer)) == set(theirs)  # Keras's keys
    built = nn.layers.deserialize({"module": "keras.layers", "class_name": "Dense",
                                   "config": {"units": 3, "activation": "relu", "name": "d2"}})
    assert type(built) is nn.layers.Dense and built.units == 3 and built.name == "d2"
    with pytest.raises(ValueError, match=r"\[layers.deserialize\] unknown layer class 'Dens'"):
        nn.layers.deserialize({"class_name": "Dens", "config": {}})

    class Doubled(nn.layers.Wrapper):
        def call(self, x):
            return self.layer(x) * 2.0

    inner = nn.layers.Dense(2, use_bias=False)
    wrapper = Doubled(inner)
    assert isinstance(wrapper, nn.layers.Wrapper) and wrapper.layer is inner
    model = nn.Sequential([nn.Input((4,)), wrapper])
    w = inner.get_weights()[0]
    np.testing.assert_allclose(model.predict(a, verbose=0), 2 * a @ w, rtol=1e-5)
    with pytest.raises(TypeError, match=r"\[Doubled\] layer must be a Layer"):
        Doubled("dense")
