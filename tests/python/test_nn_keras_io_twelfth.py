"""Keras features met by the keras-io scripts of issue 30's twelfth pass (tests/keras_io:
classification_with_grn_and_vsn, deep_neural_decision_forests, ...), against Keras 3 on JAX
with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)


# ------------------------------- classification_with_grn_and_vsn: `build(self)` with no shape
def _selection_model(lib):
    """A layer called on a dict of Inputs whose `build(self)` takes no shape (the VSN's), as
    Keras calls it: with no argument."""

    class Select(lib.layers.Layer):
        def __init__(self):
            super().__init__()
            self.proj = {"a": lib.layers.Dense(3), "b": lib.layers.Dense(3)}
            self.weights_of = lib.layers.Dense(2, activation="softmax")

        def call(self, inputs):
            parts = [self.proj[k](lib.ops.expand_dims(inputs[k], -1)) for k in inputs]
            v = lib.ops.expand_dims(self.weights_of(lib.layers.concatenate(parts)), -1)
            return lib.ops.sum(v * lib.ops.stack(parts, axis=1), axis=1)

        def build(self):
            self.built = True

    inputs = {k: lib.layers.Input(name=k, shape=(), dtype="float32") for k in ("a", "b")}
    return lib.Model(inputs, lib.layers.Dense(1)(Select()(inputs)))


def test_build_without_a_shape_argument(keras):
    tm, km = _selection_model(tn), _selection_model(keras)
    _same_weights(tm, km)
    x = {k: RNG.normal(size=(5,)).astype("float32") for k in ("a", "b")}
    np.testing.assert_allclose(tm.predict(x, verbose=0), np.asarray(km.predict(x, verbose=0)),
                               rtol=1e-5, atol=1e-6)


def test_build_without_a_shape_argument_on_arrays(keras):
    """The same layer called eagerly on arrays is built by its no-argument build."""
    for lib in (tn, keras):
        class Scale(lib.layers.Layer):
            def build(self):
                self.w = self.add_weight(shape=(), initializer="ones")

            def call(self, x):
                return x * self.w

        layer = Scale()
        out = np.asarray(layer(np.ones((2, 3), "float32")))
        assert layer.built and out.shape == (2, 3)
        np.testing.assert_allclose(out, 1.0)
