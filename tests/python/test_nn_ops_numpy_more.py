"""keras.ops.numpy's remaining names in tessera.nn.ops (issue 30, item 1) against
Keras 3 on JAX (the oracle): each eagerly on arrays, the batched ones inside a
custom layer's call in a model, gradients through a trained layer against JAX's,
and every name present under both ops and ops.numpy."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn as tnn  # noqa: E402
from tessera.nn import ops as tops  # noqa: E402

import keras  # noqa: E402 - the oracle, installed by scripts/install-deps
kops = keras.ops

RNG = np.random.default_rng(7)
X = RNG.uniform(-2, 2, (4, 6)).astype("float32")
Y = RNG.uniform(-2, 2, (4, 6)).astype("float32")
XNAN = np.where(X > 1.0, np.nan, X).astype("float32")
XINF = np.array([[1.0, np.inf, -np.inf, -0.0, 0.0, -2.0]] * 4, "float32")
INTS = RNG.integers(-30, 30, (4, 6)).astype("int32")
INTS2 = RNG.integers(-12, 12, (4, 6)).astype("int32")
SMALL = RNG.integers(0, 4, (4, 6)).astype("int32")
V1 = RNG.uniform(-1, 1, 7).astype("float32")
V2 = RNG.uniform(-1, 1, 3).astype("float32")
SQ = (RNG.uniform(-1, 1, (3, 3)) + 3 * np.eye(3)).astype("float32")

# (name, fn(ops module, *inputs), inputs, batched: also inside a layer in a model)
CASES = [
    *[(n, (lambda n: lambda o, x: getattr(o.numpy, n)(x, axis=-1))(n), [XNAN], True)
      for n in ("nansum", "nanmean", "nanmax", "nanmin", "nanprod", "nanstd", "nanvar",
                "nanmedian", "nanargmax", "nanargmin", "nancumsum", "nancumprod")],
    ("nansum_all", lambda o, x: o.numpy.nansum(x), [XNAN], False),
    ("nanpercentile", lambda o, x: o.numpy.nanpercentile(x, 30.0, axis=-1), [XNAN], True),
    ("nanquantile", lambda o, x: o.numpy.nanquantile(x, 0.7, axis=1), [XNAN], True),
    ("gcd", lambda o, a, b: o.numpy.gcd(a, b), [INTS, INTS2], True),
    ("lcm", lambda o, a, b: o.numpy.lcm(a, b), [INTS, INTS2], True),
    ("ldexp", lambda o, x, e: o.numpy.ldexp(x, e), [X, SMALL], True),
    ("logaddexp2", lambda o, a, b: o.numpy.logaddexp2(a, b), [X, Y], True),
    ("signbit", lambda o, x: o.numpy.signbit(x), [XINF], True),
    ("isposinf", lambda o, x: o.numpy.isposinf(x), [XINF], True),
    ("isneginf", lambda o, x: o.numpy.isneginf(x), [XINF], True),
    ("isreal", lambda o, x: o.numpy.isreal(x), [X], True),
    ("angle", lambda o, x: o.numpy.angle(x), [X], True),
    ("sinc", lambda o, x: o.numpy.sinc(x), [X], True),
    ("i0", lambda o, x: o.numpy.i0(x * 3), [X], True),
    ("heaviside", lambda o, x: o.numpy.heaviside(x * (np.abs(x) > 0.5), 0.5), [X], True),
    ("trapezoid", lambda o, x: o.numpy.trapezoid(x, dx=0.5), [X], True),
    ("select", lambda o, x: o.numpy.select([x < -1, x > 1], [x * 2, x * 3], 0.5), [X], True),
    ("corrcoef", lambda o, x: o.numpy.corrcoef(x), [X], False),
    ("corrcoef_1d", lambda o, x: o.numpy.corrcoef(x), [V1], False),
    *[(f"correlate_{m}_{i}", (lambda m, i: lambda o, a, b: o.numpy.correlate(
        a, b, m) if i == 0 else o.numpy.correlate(b, a, m))(m, i), [V1, V2], False)
      for m in ("valid", "same", "full") for i in (0, 1)],
    ("diagflat", lambda o, x: o.numpy.diagflat(x, 1), [V2], False),
    ("vander", lambda o, x: o.numpy.vander(x, 4), [V1], False),
    ("vander_inc", lambda o, x: o.numpy.vander(x, increasing=True), [V2], False),
    ("unravel_index", lambda o, i: o.numpy.unravel_index(i, (3, 2, 5))[1], [SMALL * 7], True),
    ("unique_size", lambda o, x: o.numpy.unique(x, size=6), [SMALL], False),
    ("unique_size_all", lambda o, x: o.numpy.unique(x, size=3, return_index=True,
                                                    return_inverse=True,
                                                    return_counts=True, fill_value=9),
     [SMALL], False),
    ("unique_pad_min", lambda o, x: o.numpy.unique(x, size=8, return_index=True,
                                                   return_counts=True), [INTS2[:2]], False),
    ("unique", lambda o, x: o.numpy.unique(x, return_counts=True), [INTS], False),
    ("histogram", lambda o, x: o.numpy.histogram(x, bins=5), [V1], False),
    ("histogram_range", lambda o, x: o.numpy.histogram(x, bins=3, range=(-0.5, 0.5)), [V1],
     False),
    ("bincount", lambda o, x: o.numpy.bincount(x), [SMALL[0]], False),
    ("bincount_weights", lambda o, x, w: o.numpy.bincount(x, w, minlength=6),
     [SMALL[0], X[0]], False),
    ("slogdet", lambda o, x: o.numpy.slogdet(x), [SQ], False),
    ("nextafter", lambda o, a, b: o.numpy.nextafter(a, b), [X, Y], False),
    ("geomspace", lambda o: o.numpy.geomspace(1.0, 1000.0, 4), [], False),
    *[(w, (lambda w: lambda o: getattr(o.numpy, w)(7))(w), [], False)
      for w in ("bartlett", "blackman", "hamming", "hanning")],
    ("kaiser", lambda o: o.numpy.kaiser(6, 3.0), [], False),
    ("vectorize", lambda o, a, b: o.numpy.vectorize(lambda u, v: o.maximum(u, v) * 2)(a, b),
     [X, Y], True),
    ("vectorize_signature", lambda o, a: o.numpy.vectorize(
        lambda r: o.sum(r * r), signature="(n)->()")(a), [X], False),
    ("view", lambda o, x: o.numpy.view(x, "int32"), [X], False),
]

# dtypes Keras on JAX gives that tessera leaves as NumPy does (documented)
DTYPE_EXEMPT = {"unique", "slogdet"}


def _values(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _compare(name, got, want, rtol=2e-5, atol=2e-6, dtype=True):
    got, want = _values(got), _values(want)
    assert len(got) == len(want), (name, len(got), len(want))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (name, g.shape, w.shape)
        if dtype and name not in DTYPE_EXEMPT:
            assert str(g.dtype) == str(w.dtype), (name, g.dtype, w.dtype)
        if w.dtype == bool:
            assert np.array_equal(g, w), name
        else:
            np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=rtol,
                                       atol=atol, err_msg=name, equal_nan=True)


@pytest.mark.parametrize("name,fn,inputs,batched", CASES, ids=[c[0] for c in CASES])
def test_eager_matches_keras(name, fn, inputs, batched):
    _compare(name, fn(tops, *inputs), fn(kops, *inputs))


class OpLayer(tnn.Layer):
    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def call(self, inputs):
        return self.fn(tops, *inputs) if isinstance(inputs, (list, tuple)) else \
            self.fn(tops, inputs)


BATCHED = [c for c in CASES if c[3]]


@pytest.mark.parametrize("name,fn,inputs,batched", BATCHED, ids=[c[0] for c in BATCHED])
def test_inside_a_layer_call_matches_keras(name, fn, inputs, batched):
    tin = [tnn.Input(a.shape[1:], dtype=str(a.dtype)) for a in inputs]
    model = tnn.Model(tin, OpLayer(fn)(tin if len(tin) > 1 else tin[0]))
    got = model.predict(inputs if len(inputs) > 1 else inputs[0], batch_size=len(inputs[0]),
                        verbose=0)
    _compare(name, got, fn(kops, *inputs), dtype=False)


def test_static_size_unique_histogram_and_correlate_inside_a_model():
    """The unbatched ops traced into a program: a layer applying them per sample."""
    def fn(o, x):
        v, c = o.numpy.unique(x[0], size=5, return_counts=True)
        h, e = o.numpy.histogram(o.cast(x[1], "float32"), bins=3)
        r = o.numpy.correlate(o.cast(x[0], "float32"), o.cast(x[1], "float32"), "same")
        return o.concatenate([o.cast(v, "float32"), o.cast(c, "float32"), h, e, r])

    inp = tnn.Input((6,), dtype="int32", batch_size=2)
    model = tnn.Model(inp, OpLayer(fn)(inp))
    got = model.predict(SMALL[:2], batch_size=2, verbose=0)
    _compare("static_size", got, fn(kops, SMALL[:2]), dtype=False)


def _nans(o, x):
    """XNAN's NaNs, made inside the layer (fit refuses NaN data)."""
    return o.where(o.greater(x, 1.0), np.float32(np.nan), x)


GRAD_CASES = [
    *[(n, (lambda n: lambda o, x: getattr(o.numpy, n)(_nans(o, x), axis=-1))(n), [X], True)
      for n in ("nansum", "nanmean", "nanmax", "nanstd", "nanvar", "nanprod", "nancumsum",
                "nanmedian")],
    ("logaddexp2", lambda o, x: o.numpy.logaddexp2(x, Y[0]), [X], True),
    ("vectorize", lambda o, x: o.numpy.vectorize(lambda u, v: o.sin(u) * v)(x, Y[0]), [X],
     True),
    *[c for c in CASES if c[0] in ("sinc", "i0", "trapezoid", "select")],
]


class Scaled(tnn.Layer):
    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def build(self, input_shape):
        self.s = self.add_weight(shape=tuple(input_shape[1:]), initializer="ones", name="s")

    def call(self, x):
        return self.fn(tops, x * self.s)


@pytest.mark.parametrize("name,fn,inputs,batched", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradient_in_a_trained_layer_matches_jax(name, fn, inputs, batched):
    """One SGD step (rate 1) moves the layer's weight by minus the gradient;
    Keras's op differentiated by JAX is the reference."""
    import jax
    import jax.numpy as jnp

    (x,), f = inputs, fn
    out_shape = np.asarray(f(kops, x)).shape
    target = RNG.normal(size=out_shape).astype("float32")

    def kloss(s):
        y = f(kops, jnp.asarray(x) * s)
        return jnp.mean(jnp.square(jnp.where(jnp.isnan(y), 0.0, y) - target))

    # jax.jit: one XLA compilation of the oracle, not one per primitive run eagerly
    want = np.asarray(jax.jit(jax.grad(kloss))(jnp.ones(x.shape[1:], "float32")))

    def loss(y_true, y_pred):
        return tops.mean(tops.square(tops.where(tops.isnan(y_pred), 0.0, y_pred) - y_true))

    inp = tnn.Input(x.shape[1:])
    model = tnn.Model(inp, Scaled(f)(inp))
    model.compile(tessera.optim.SGD(1.0), loss)
    model.fit(x, target, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    got = 1.0 - model.get_weights()[0]
    scale = max(1e-3, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale, err_msg=name)


def test_every_keras_numpy_name_is_in_ops_and_ops_numpy():
    for name in sorted(set(dir(keras.ops.numpy)) - {n for n in dir(keras.ops.numpy)
                                                    if n.startswith("_")}):
        assert hasattr(tops.numpy, name), name
        assert hasattr(tops, name), name


def test_errors_name_the_op_and_the_values():
    with pytest.raises(TypeError, match=r"\[ops.gcd\].*float32"):
        tops.numpy.gcd(X, 2)
    with pytest.raises(ValueError, match=r"\[ops.correlate\] mode.*'middle'"):
        tops.numpy.correlate(V1, V2, "middle")
    with pytest.raises(ValueError, match=r"\[ops.histogram\] x must be 1-d.*\(4, 6\)"):
        tops.numpy.histogram(X)
    with pytest.raises(ValueError, match=r"\[ops.unique\] size must be a positive int.*0"):
        tops.numpy.unique(SMALL, size=0)
    with pytest.raises(ValueError, match=r"\[ops.argpartition\] kth 9 .* axis of 6"):
        tops.numpy.argpartition(X, 9)
    inp = tnn.Input((6,), dtype="int32")
    with pytest.raises(TypeError, match=r"\[ops.unique without size\].*test_nn_ops_numpy"):
        tops.numpy.unique(inp)
    with pytest.raises(TypeError, match=r"\[ops.view\]"):
        tops.numpy.view(inp, "float32")


def test_argpartition_partitions_as_keras_does():
    for kth in (0, 2, 5):
        idx = np.asarray(tops.numpy.argpartition(X, kth, axis=-1))
        assert idx.dtype == np.int32
        part = np.take_along_axis(X, idx, axis=-1)
        want = np.take_along_axis(X, np.asarray(kops.argpartition(X, kth, axis=-1)), axis=-1)
        np.testing.assert_array_equal(part[:, kth], want[:, kth])
        assert (part[:, :kth] <= part[:, kth:kth + 1]).all()
        assert (part[:, kth + 1:] >= part[:, kth:kth + 1]).all()
        assert sorted(map(tuple, np.sort(idx, -1))) == [tuple(range(6))] * 4


X3NAN = np.where(RNG.uniform(size=(3, 4, 5)) > 0.7, np.nan,
                 RNG.uniform(-1, 1, (3, 4, 5))).astype("float32")
X3NAN[1, 2, :] = np.nan  # a row of NaNs only


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanmax", "nanmin", "nanprod", "nanstd",
                                  "nanvar", "nanmedian"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (-1, False), ((0, 2), True),
                                           (1, True)])
def test_nan_reductions_axes_match_keras(name, axis, keepdims):
    got = getattr(tops.numpy, name)(X3NAN, axis=axis, keepdims=keepdims)
    want = getattr(kops.numpy, name)(X3NAN, axis=axis, keepdims=keepdims)
    _compare(name, got, want)


def test_nanquantile_lists_match_keras():
    _compare("nanq", tops.numpy.nanquantile(X3NAN, [0.1, 0.5, 1.0], axis=-1),
             kops.numpy.nanquantile(X3NAN, [0.1, 0.5, 1.0], axis=-1))
    _compare("nanp", tops.numpy.nanpercentile(X3NAN, 25, axis=(0, 1), keepdims=True),
             kops.numpy.nanpercentile(X3NAN, 25, axis=(0, 1), keepdims=True))
