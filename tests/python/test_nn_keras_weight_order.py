"""get_weights() of a model holding user layers, compared with Keras 3 on JAX (found racing
Keras's transformer example, bench/bench_keras_race.py): Keras lists a user layer's own
weights, then its sublayers' in the order the layer assigns them as attributes (lists of
layers and nested user layers too), whatever order `call` uses them in; tessera must too, or
`tessera_model.set_weights(keras_model.get_weights())` fails, or with equal shapes silently
puts weights in the wrong layers."""

import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")
keras = pytest.importorskip("keras")

import tessera.nn as tnn  # noqa: E402


def build(k):
    class Block(k.layers.Layer):
        def __init__(self):
            super().__init__()
            self.outer = k.layers.Dense(3)  # assigned first, called second
            self.inner = k.layers.Dense(5)

        def call(self, x):
            return self.outer(self.inner(x))

    inputs = k.Input(shape=(4,))
    return k.Model(inputs, Block()(inputs))


def build_nested(k):
    class Inner(k.layers.Layer):
        def __init__(self):
            super().__init__()
            self.b = k.layers.Dense(6)
            self.a = k.layers.Dense(4)

        def call(self, x):
            return self.b(self.a(x))

    class Outer(k.layers.Layer):
        def build(self, input_shape):
            self.scale = self.add_weight(shape=(6,), initializer="ones")

        def __init__(self):
            super().__init__()
            self.stack = [k.layers.Dense(7), k.layers.Dense(4)]  # called in reverse
            self.inner = Inner()

        def call(self, x):
            h = self.stack[0](self.stack[1](x))
            return self.inner(self.stack[1](k.ops.tanh(h[:, :4]))) * self.scale

    inputs = k.Input(shape=(4,))
    return k.Model(inputs, Outer()(inputs))


@pytest.mark.parametrize("make", [build, build_nested], ids=["two_dense", "nested"])
def test_get_weights_order_of_a_user_layer_is_keras(make):
    km, tm = make(keras), make(tnn)
    assert [w.shape for w in tm.get_weights()] == [w.shape for w in km.get_weights()]
    tm.set_weights(km.get_weights())
    x = np.random.default_rng(0).random((2, 4)).astype("float32")
    np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0), rtol=1e-5,
                               atol=1e-6)
