"""ops.rearrange, ops.custom_gradient, ops.view_as_complex/real and
ops.linalg.lu_factor (issue 30) against Keras 3 on JAX (the oracle): eagerly,
rearrange inside a layer's call and its gradient vs jax.grad."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn as tnn  # noqa: E402
from tessera.nn import ops as tops  # noqa: E402

import keras  # noqa: E402 - the oracle, installed by scripts/install-deps
kops = keras.ops

RNG = np.random.default_rng(31)
IMG = RNG.normal(size=(2, 6, 8, 3)).astype("float32")

PATTERNS = [
    ("b h w c -> b c h w", {}),
    ("b h w c -> b (h w c)", {}),
    ("b h w c -> b (c h w)", {}),
    ("b (h p1) (w p2) c -> b (h w) (p1 p2 c)", {"p1": 2, "p2": 4}),
    ("b h (w two) c -> b two h w c", {"two": 2}),
    ("b h w c -> b w (h c)", {}),
]


@pytest.mark.parametrize("pattern,lengths", PATTERNS, ids=[p for p, _ in PATTERNS])
def test_rearrange_eager_and_in_a_layer_match_keras(pattern, lengths):
    want = np.asarray(kops.rearrange(IMG, pattern, **lengths))
    np.testing.assert_array_equal(tops.rearrange(IMG, pattern, **lengths), want)

    class Re(tnn.Layer):
        def call(self, x):
            return tops.rearrange(x, pattern, **lengths)

    inp = tnn.Input(IMG.shape[1:])
    got = tnn.Model(inp, Re()(inp)).predict(IMG, batch_size=2, verbose=0)
    np.testing.assert_array_equal(got, want)


def test_rearrange_gradient_in_a_trained_layer_matches_jax():
    import jax
    import jax.numpy as jnp

    pattern, lengths = "b (h p1) (w p2) c -> b (h w) (p1 p2 c)", {"p1": 3, "p2": 2}
    weights = RNG.normal(size=(18, 8)).astype("float32")
    target = RNG.normal(size=(2, 8, 8)).astype("float32")

    def keras_loss(s):
        y = kops.rearrange(jnp.asarray(IMG) * s, pattern, **lengths) @ weights
        return jnp.mean(jnp.square(y - target))

    want = np.asarray(jax.grad(keras_loss)(jnp.ones(IMG.shape[1:], "float32")))

    class Scaled(tnn.Layer):
        def build(self, input_shape):
            self.s = self.add_weight(shape=tuple(input_shape[1:]), initializer="ones")

        def call(self, x):
            return tops.matmul(tops.rearrange(x * self.s, pattern, **lengths), weights)

    inp = tnn.Input(IMG.shape[1:])
    model = tnn.Model(inp, Scaled()(inp))
    model.compile(tessera.optim.SGD(1.0), lambda t, p: tops.mean(tops.square(p - t)))
    model.fit(IMG, target, batch_size=2, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(1.0 - model.get_weights()[0], want, rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("pattern,lengths,words", [
    ("b h w c", {}, "'left -> right'"),
    ("b h w -> b h w", {}, "names 3 axes"),
    ("b h w c -> b h w", {}, "different axes"),
    ("b (h p) w c -> b h p w c", {}, "all axes but one"),
    ("b (h p) w c -> b h p w c", {"p": 4}, "does not split"),
    ("b h w c -> b h w c", {"q": 2}, "not in pattern"),
    ("b h ... -> b h ...", {}, "not an axis name"),
])
def test_rearrange_errors_name_the_pattern(pattern, lengths, words):
    with pytest.raises(ValueError) as e:
        tops.rearrange(IMG, pattern, **lengths)
    assert "[ops.rearrange]" in str(e.value) and words in str(e.value), str(e.value)


def test_custom_gradient_eager_value_and_refused_in_a_program():
    @tops.custom_gradient
    def log1pexp(x):
        e = tops.exp(x)
        return tops.log(1 + e), lambda upstream: upstream * (1 - 1 / (1 + e))

    @kops.custom_gradient
    def klog1pexp(x):
        e = kops.exp(x)

        def grad(*args, upstream=None):
            return (upstream if upstream is not None else args[0]) * (1 - 1 / (1 + e))
        return kops.log(1 + e), grad

    x = RNG.normal(size=(3, 4)).astype("float32")
    np.testing.assert_allclose(log1pexp(x), np.asarray(klog1pexp(x)), rtol=1e-6, atol=1e-7)

    class Uses(tnn.Layer):
        def call(self, x):
            return log1pexp(x)

    inp = tnn.Input((4,))
    with pytest.raises(TypeError) as e:
        Uses()(inp)
    assert "[ops.custom_gradient] 'log1pexp'" in str(e.value)
    assert "eagerly" in str(e.value) and "test_nn_ops_einops.py" in str(e.value)
    with pytest.raises(TypeError, match=r"must return \(value, grad_fn\)"):
        tops.custom_gradient(lambda x: x)(x)


def test_view_as_complex_and_real_match_keras():
    x = RNG.normal(size=(3, 4, 2)).astype("float32")
    z = np.asarray(kops.view_as_complex(x))
    got = tops.view_as_complex(x)
    assert np.asarray(got).dtype == z.dtype
    np.testing.assert_array_equal(got, z)
    back = tops.view_as_real(z)
    assert np.asarray(back).dtype == np.asarray(kops.view_as_real(z)).dtype
    np.testing.assert_array_equal(back, np.asarray(kops.view_as_real(z)))
    with pytest.raises(ValueError, match=r"\[ops.view_as_complex\].*\(3, 4, 3\)"):
        tops.view_as_complex(np.zeros((3, 4, 3), "float32"))
    with pytest.raises(ValueError, match=r"\[ops.view_as_real\].*float32"):
        tops.view_as_real(x)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (1, 1)])
def test_lu_factor_matches_keras(shape):
    a = RNG.normal(size=shape).astype("float32")
    lu, piv = tops.linalg.lu_factor(a)
    klu, kpiv = (np.asarray(v) for v in kops.linalg.lu_factor(a))
    assert lu.dtype == klu.dtype and piv.dtype == kpiv.dtype
    np.testing.assert_array_equal(piv, kpiv)
    np.testing.assert_allclose(lu, klu, rtol=1e-5, atol=1e-5)
    assert tops.lu_factor is tops.linalg.lu_factor
    with pytest.raises(ValueError, match=r"\[ops.linalg.lu_factor\] expects square.*\(2, 3\)"):
        tops.linalg.lu_factor(np.zeros((2, 3), "float32"))


SEQ = RNG.normal(size=(2, 5, 3)).astype("float32")
SCANS = [
    ("add", lambda o: (lambda a, b: a + b), SEQ, 0, False),
    ("add_axis1_reverse", lambda o: (lambda a, b: a + b), SEQ, 1, True),
    ("max", lambda o: o.maximum, SEQ, 1, False),
    ("affine_pairs", lambda o: (lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1])),
     (SEQ * 0.5, SEQ), 1, False),
]


@pytest.mark.parametrize("name,make_f,elems,axis,reverse", SCANS, ids=[s[0] for s in SCANS])
def test_associative_scan_eager_and_in_a_layer_match_keras(name, make_f, elems, axis, reverse):
    want = kops.associative_scan(make_f(kops), elems, reverse=reverse, axis=axis)
    got = tops.associative_scan(make_f(tops), elems, reverse=reverse, axis=axis)
    for g, w in zip(tnn.tree.flatten(got), tnn.tree.flatten(want)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-6)
    if axis == 0:
        return

    class Scan(tnn.Layer):
        def call(self, x):
            e = (x * 0.5, x) if isinstance(elems, tuple) else x
            return tnn.tree.flatten(tops.associative_scan(make_f(tops), e, reverse=reverse,
                                                          axis=axis))[-1]

    inp = tnn.Input(SEQ.shape[1:])
    out = tnn.Model(inp, Scan()(inp)).predict(SEQ, batch_size=2, verbose=0)
    np.testing.assert_allclose(out, np.asarray(tnn.tree.flatten(want)[-1]), rtol=1e-5,
                               atol=1e-6)


def test_associative_scan_errors():
    with pytest.raises(ValueError, match=r"\[ops.associative_scan\] every element.*\(2, 4\)"):
        tops.associative_scan(lambda a, b: a + b, (SEQ[:, 0], np.zeros((2, 4))), axis=1)
    with pytest.raises(ValueError, match=r"\[ops.associative_scan\] axis 3 is out of range"):
        tops.associative_scan(lambda a, b: a + b, SEQ, axis=3)


def test_associative_scan_gradient_in_a_trained_layer_matches_jax():
    import jax
    import jax.numpy as jnp

    target = RNG.normal(size=SEQ.shape).astype("float32")

    def f(p, q):  # associative: (p + 1)(q + 1) - 1
        return p * q + p + q

    want = np.asarray(jax.grad(lambda s: jnp.mean(jnp.square(
        kops.associative_scan(f, jnp.asarray(SEQ) * s, axis=1) - target)))(
        jnp.ones(SEQ.shape[1:], "float32")))

    class Scaled(tnn.Layer):
        def build(self, input_shape):
            self.s = self.add_weight(shape=tuple(input_shape[1:]), initializer="ones")

        def call(self, x):
            return tops.associative_scan(f, x * self.s, axis=1)

    inp = tnn.Input(SEQ.shape[1:])
    model = tnn.Model(inp, Scaled()(inp))
    model.compile(tessera.optim.SGD(1.0), lambda t, p: tops.mean(tops.square(p - t)))
    model.fit(SEQ, target, batch_size=2, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(1.0 - model.get_weights()[0], want, rtol=2e-4, atol=1e-6)
