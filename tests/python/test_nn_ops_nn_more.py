"""ops.nn's remaining names (issue 30, item 2): adaptive pooling, unfold/fold,
erfinv, polar and the ops.nn aliases, against Keras 3 on JAX (the oracle):
eagerly, inside a custom layer's call, and gradients through a trained layer
against JAX's."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn as tnn  # noqa: E402
from tessera.nn import ops as tops  # noqa: E402

import keras  # noqa: E402 - the oracle, installed by scripts/install-deps
kops = keras.ops

RNG = np.random.default_rng(11)
IMG = RNG.uniform(-1, 1, (2, 7, 5, 3)).astype("float32")
SEQ = RNG.uniform(-1, 1, (2, 9, 4)).astype("float32")
VOL = RNG.uniform(-1, 1, (2, 5, 4, 6, 2)).astype("float32")
NCHW = RNG.uniform(-1, 1, (2, 3, 6, 5)).astype("float32")
U = RNG.uniform(-0.999, 0.999, (4, 6)).astype("float32")
UNF = dict(kernel_size=(2, 3), stride=2, padding=1, dilation=(1, 2))

CASES = [
    ("aap2d", lambda o, x: o.nn.adaptive_average_pool(x, (3, 2)), [IMG], True),
    ("aap2d_first", lambda o, x: o.adaptive_average_pool(x, 2, "channels_first"), [IMG], True),
    ("amp2d", lambda o, x: o.nn.adaptive_max_pool(x, (4, 3)), [IMG], True),
    ("aap1d", lambda o, x: o.adaptive_average_pool(x, 4), [SEQ], True),
    ("amp1d", lambda o, x: o.nn.adaptive_max_pool(x, 5), [SEQ], True),
    ("aap3d", lambda o, x: o.nn.adaptive_average_pool(x, (2, 3, 4)), [VOL], True),
    ("unfold", lambda o, x: o.nn.unfold(x, 2), [NCHW], True),
    ("unfold_geometry", lambda o, x: o.unfold(x, **UNF), [NCHW], True),
    ("fold", lambda o, x: o.nn.fold(o.unfold(x, **UNF), (6, 5), **UNF), [NCHW], True),
    ("erfinv", lambda o, x: o.erfinv(x), [U], True),
    ("polar", lambda o, x: o.nn.polar(o.abs(x), x * 3), [U], False),
    ("depth_to_space", lambda o, x: o.nn.depth_to_space(o.tile(x, (1, 1, 1, 4)), 2), [IMG],
     True),
    ("space_to_depth", lambda o, x: o.nn.space_to_depth(x[:, :6, :4], 2), [IMG], True),
    ("sparsemax", lambda o, x: o.nn.sparsemax(x), [U], True),
    ("psnr", lambda o, x: o.nn.psnr(x, x * 0.9, 1.0), [U], False),
    ("separable_conv", lambda o, x: o.nn.separable_conv(
        x, np.ones((3, 3, 3, 2), "float32") * 0.1, np.ones((1, 1, 6, 4), "float32") * 0.2),
     [IMG], True),
]


def _compare(name, got, want, rtol=2e-5, atol=3e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("name,fn,inputs,batched", CASES, ids=[c[0] for c in CASES])
def test_eager_matches_keras(name, fn, inputs, batched):
    got, want = fn(tops, *inputs), fn(kops, *inputs)
    _compare(name, got, want)
    assert str(np.asarray(got).dtype) == str(np.asarray(want).dtype), name


class OpLayer(tnn.Layer):
    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def call(self, x):
        return self.fn(tops, x)


BATCHED = [c for c in CASES if c[3]]


@pytest.mark.parametrize("name,fn,inputs,batched", BATCHED, ids=[c[0] for c in BATCHED])
def test_inside_a_layer_call_matches_keras(name, fn, inputs, batched):
    (x,) = inputs
    inp = tnn.Input(x.shape[1:])
    model = tnn.Model(inp, OpLayer(fn)(inp))
    _compare(name, model.predict(x, batch_size=len(x), verbose=0), fn(kops, x))


class Scaled(tnn.Layer):
    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def build(self, input_shape):
        self.s = self.add_weight(shape=tuple(input_shape[1:]), initializer="ones", name="s")

    def call(self, x):
        return self.fn(tops, x * self.s)


GRAD = [c for c in BATCHED if c[0] in ("aap2d", "amp2d", "aap1d", "unfold_geometry", "fold",
                                       "erfinv", "aap3d")]


@pytest.mark.parametrize("name,fn,inputs,batched", GRAD, ids=[c[0] for c in GRAD])
def test_gradient_in_a_trained_layer_matches_jax(name, fn, inputs, batched):
    import jax
    import jax.numpy as jnp

    (x,) = inputs
    target = RNG.normal(size=np.asarray(fn(kops, x)).shape).astype("float32")
    def kloss(s):
        return jnp.mean(jnp.square(fn(kops, jnp.asarray(x) * s) - target))

    # jax.jit: one XLA compilation of the oracle, not one per primitive run eagerly
    want = np.asarray(jax.jit(jax.grad(kloss))(jnp.ones(x.shape[1:], "float32")))
    inp = tnn.Input(x.shape[1:])
    model = tnn.Model(inp, Scaled(fn)(inp))
    model.compile(tessera.optim.SGD(1.0), lambda t, p: tops.mean(tops.square(p - t)))
    model.fit(x, target, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    got = 1.0 - model.get_weights()[0]
    scale = max(1e-3, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale, err_msg=name)


def test_erfinv_edges_match_keras():
    v = np.array([-1.0, 1.0, 1.5, 0.0, 0.999999, -1e-6], "float32")
    np.testing.assert_allclose(tops.erfinv(v), np.asarray(kops.erfinv(v)), rtol=2e-5)


def test_errors_name_the_op_and_the_values():
    with pytest.raises(ValueError, match=r"\[ops.adaptive_average_pool\] inputs must be .*\(4, 6\)"):
        tops.adaptive_average_pool(U, 2)
    with pytest.raises(ValueError, match=r"\[ops.adaptive_max_pool\] output_size .*\(1, 2, 3\)"):
        tops.adaptive_max_pool(IMG, (1, 2, 3))
    with pytest.raises(ValueError, match=r"\[ops.unfold\] x must be 4-d.*\(4, 6\)"):
        tops.unfold(U, 2)
    with pytest.raises(ValueError, match=r"\[ops.fold\] x's shape \(2, 3, 6, 5\)|x must be 3-d"):
        tops.fold(NCHW, (6, 5), 2)
    with pytest.raises(ValueError, match=r"\[ops.fold\] x's shape .* 4 channels"):
        tops.fold(np.zeros((1, 6, 30), "float32"), (6, 5), 2)
