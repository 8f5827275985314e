"""tessera.nn.ops, activations and random against Keras 3 on JAX (the
oracle): each op eagerly on arrays and inside a custom layer's call in a
model, gradients of ops inside a trained layer, the subclassing guide's
layer trained by fit, and the list of Keras ops tessera still lacks."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn as tnn  # noqa: E402
from tessera.nn import ops as tops  # noqa: E402

keras = pytest.importorskip("keras")  # installed by scripts/install-deps (a test oracle)
kops = keras.ops

RNG = np.random.default_rng(0)


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype("float32")


X = f32(4, 6)
Y = f32(4, 6)
P = f32(4, 6, low=0.05, high=1.0)
X3 = f32(3, 5, 4)
SQ = (f32(3, 3) + 3 * np.eye(3)).astype("float32")
LABELS = np.array([0, 3, 5, 2], dtype="int32")
IMG = f32(2, 6, 8, 3)
HOT = np.eye(6, dtype="float32")[LABELS]
BIN = (np.arange(24).reshape(4, 6) % 2).astype("float32")

# (case name, fn(ops_module, *inputs), inputs, batched): `batched` cases keep
# axis 0 as the batch and also run inside a custom layer in a model.
CASES = [
    *[(n, (lambda n: lambda o, x: getattr(o, n)(x))(n), [X], True) for n in (
        "abs", "negative", "square", "sign", "ceil", "floor", "trunc", "exp", "expm1", "sin",
        "cos", "tanh", "arctan", "sinh", "relu", "relu6", "sigmoid", "softplus", "softsign",
        "silu", "swish", "selu", "elu", "gelu", "leaky_relu", "log_sigmoid", "hard_sigmoid",
        "hard_silu", "celu", "hard_tanh", "hard_shrink", "soft_shrink", "tanh_shrink",
        "sparse_plus", "squareplus", "sparse_sigmoid", "erf", "cbrt", "logical_not",
        "isfinite")],
    *[(n, (lambda n: lambda o, p: getattr(o, n)(p))(n), [P], True) for n in (
        "sqrt", "log", "log1p", "log2", "log10", "rsqrt", "reciprocal", "arcsin", "arccos")],
    *[(n, (lambda n: lambda o, a, b: getattr(o, n)(a, b))(n), [X, Y], True) for n in (
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "arctan2", "hypot",
        "greater", "less_equal", "equal", "logaddexp", "divide_no_nan", "fmod",
        "floor_divide", "mod")],
    ("power", lambda o, p, x: o.power(p, x), [P, X], True),
    ("add_scalar", lambda o, x: o.add(x, 2.5), [X], True),
    ("softmax", lambda o, x: o.softmax(x, axis=-1), [X], True),
    ("log_softmax", lambda o, x: o.log_softmax(x), [X], True),
    ("softmax_axis1", lambda o, x: o.softmax(x, axis=1), [X3], True),
    ("gelu_exact", lambda o, x: o.gelu(x, approximate=False), [X], True),
    ("leaky_relu_slope", lambda o, x: o.leaky_relu(x, negative_slope=0.1), [X], True),
    ("glu", lambda o, x: o.glu(x), [X], True),
    ("threshold", lambda o, x: o.threshold(x, 0.3, -1.0), [X], True),
    ("sum", lambda o, x: o.sum(x, axis=-1), [X3], True),
    ("sum_keepdims", lambda o, x: o.sum(x, axis=(1, 2), keepdims=True), [X3], True),
    ("sum_all", lambda o, x: o.sum(x), [X3], False),
    ("mean", lambda o, x: o.mean(x, axis=1), [X3], True),
    ("max", lambda o, x: o.max(x, axis=-1), [X3], True),
    ("min", lambda o, x: o.min(x, axis=1, keepdims=True), [X3], True),
    ("prod", lambda o, x: o.prod(x, axis=-1), [X], True),
    ("var", lambda o, x: o.var(x, axis=-1), [X], True),
    ("std", lambda o, x: o.std(x, axis=-1), [X], True),
    ("logsumexp", lambda o, x: o.logsumexp(x, axis=-1), [X3], True),
    ("argmax", lambda o, x: o.argmax(x, axis=-1), [X], True),
    ("argmin", lambda o, x: o.argmin(x, axis=1), [X3], True),
    ("argsort", lambda o, x: o.argsort(x, axis=-1), [X], True),
    ("sort", lambda o, x: o.sort(x), [X], True),
    ("cumsum", lambda o, x: o.cumsum(x, axis=1), [X], True),
    ("cumprod", lambda o, x: o.cumprod(x, axis=-1), [X], True),
    ("any", lambda o, x: o.any(o.greater(x, 1.5), axis=-1), [X], True),
    ("all", lambda o, x: o.all(o.greater(x, -1.5), axis=-1), [X], True),
    ("clip", lambda o, x: o.clip(x, -0.5, 0.7), [X], True),
    ("where", lambda o, x, y: o.where(o.greater(x, y), x, y * 2), [X, Y], True),
    ("matmul", lambda o, x: o.matmul(x, np.arange(30, dtype="float32").reshape(6, 5) / 30),
     [X], True),
    ("matmul3", lambda o, x: o.matmul(x, o.transpose(x, (0, 2, 1))), [X3], True),
    ("einsum", lambda o, x, y: o.einsum("bi,bi->b", x, y), [X, Y], True),
    ("einsum3", lambda o, x: o.einsum("btd,bsd->bts", x, x), [X3], True),
    ("tensordot", lambda o, x: o.tensordot(x, np.ones((4, 2), "float32"), axes=1), [X3], True),
    ("concatenate", lambda o, x, y: o.concatenate([x, y], axis=-1), [X, Y], True),
    ("stack", lambda o, x, y: o.stack([x, y], axis=1), [X, Y], True),
    ("reshape", lambda o, x: o.reshape(x, (-1, 2, 10)), [X3], True),
    ("transpose", lambda o, x: o.transpose(x, (0, 2, 1)), [X3], True),
    ("transpose_all", lambda o, x: o.transpose(x), [X3], False),
    ("expand_dims", lambda o, x: o.expand_dims(x, 1), [X], True),
    ("squeeze", lambda o, x: o.squeeze(o.expand_dims(x, -1), axis=-1), [X], True),
    ("take", lambda o, x: o.take(x, np.array([3, 0, 1]), axis=1), [X], True),
    ("take_along_axis", lambda o, x: o.take_along_axis(x, o.argsort(x, axis=-1), axis=-1), [X],
     True),
    ("tile", lambda o, x: o.tile(x, (1, 2)), [X], True),
    ("repeat", lambda o, x: o.repeat(x, 2, axis=1), [X], True),
    ("split", lambda o, x: o.split(x, 3, axis=-1)[1], [X], True),
    ("split_points", lambda o, x: o.split(x, [1, 4], axis=1)[2], [X], True),
    ("flip", lambda o, x: o.flip(x, axis=1), [X], True),
    ("roll", lambda o, x: o.roll(x, 2, axis=1), [X], True),
    ("swapaxes", lambda o, x: o.swapaxes(x, 1, 2), [X3], True),
    ("moveaxis", lambda o, x: o.moveaxis(x, 1, 2), [X3], True),
    ("pad", lambda o, x: o.pad(x, ((0, 0), (1, 2))), [X], True),
    ("pad_value", lambda o, x: o.pad(x, ((0, 0), (2, 0)), constant_values=3.0), [X], True),
    ("diff", lambda o, x: o.diff(x, axis=-1), [X], True),
    ("tril", lambda o, x: o.tril(x), [SQ], False),
    ("triu", lambda o, x: o.triu(x, k=1), [SQ], False),
    ("diag", lambda o, x: o.diag(x), [SQ], False),
    ("trace", lambda o, x: o.trace(x), [SQ], False),
    ("outer", lambda o, x: o.outer(x[0], x[1]), [X], False),
    ("dot", lambda o, x, y: o.dot(x, o.transpose(y)), [X, Y], False),
    ("average", lambda o, x: o.average(x, axis=1, weights=np.arange(1, 7, dtype="float32")),
     [X], True),
    ("ones_like", lambda o, x: o.ones_like(x) + x, [X], True),
    ("zeros_like", lambda o, x: o.zeros_like(x, dtype="int32"), [X], True),
    ("full_like", lambda o, x: o.full_like(x, 2.0), [X], True),
    ("arange", lambda o: o.arange(2, 11, 3), [], False),
    ("arange_float", lambda o: o.arange(0.5, 3.0, 0.5), [], False),
    ("linspace", lambda o: o.linspace(0.0, 1.0, 7), [], False),
    ("ones", lambda o: o.ones((2, 3)), [], False),
    ("zeros", lambda o: o.zeros((3,), dtype="int32"), [], False),
    ("full", lambda o: o.full((2, 2), 7), [], False),
    ("eye", lambda o: o.eye(3, 4, k=1), [], False),
    ("tri", lambda o: o.tri(3, 3, k=-1), [], False),
    ("one_hot", lambda o, y: o.one_hot(y, 6), [LABELS], True),
    ("one_hot_axis0", lambda o, y: o.one_hot(y, 6, axis=0), [LABELS], False),
    ("multi_hot", lambda o: o.multi_hot(np.array([[0, 2], [1, 1]]), 4), [], False),
    ("moments", lambda o, x: o.moments(x, axes=[1])[1], [X3], True),
    ("moments_mean", lambda o, x: o.moments(x, axes=[1, 2])[0], [X3], True),
    ("batch_normalization", lambda o, x: o.batch_normalization(
        x, np.linspace(-1, 1, 6).astype("float32"), np.linspace(0.5, 2, 6).astype("float32"),
        axis=-1, offset=np.full(6, 0.1, "float32"), scale=np.full(6, 1.5, "float32")), [X], True),
    ("normalize", lambda o, x: o.normalize(x, axis=-1), [X], True),
    ("normalize_l1", lambda o, x: o.normalize(x, axis=-1, order=1), [X], True),
    ("categorical_crossentropy", lambda o, t, p: o.categorical_crossentropy(t, p), [HOT, P],
     True),
    ("categorical_crossentropy_logits", lambda o, t, x: o.categorical_crossentropy(
        t, x, from_logits=True), [HOT, X], True),
    ("sparse_categorical_crossentropy", lambda o, y, p: o.sparse_categorical_crossentropy(
        y, p), [LABELS, P], True),
    ("sparse_categorical_crossentropy_logits", lambda o, y, x: o.sparse_categorical_crossentropy(
        y, x, from_logits=True), [LABELS, X], True),
    ("binary_crossentropy", lambda o, t, p: o.binary_crossentropy(t, p * 0.9), [BIN, P], True),
    ("binary_crossentropy_logits", lambda o, t, x: o.binary_crossentropy(
        t, x, from_logits=True), [BIN, X], True),
    ("conv1d", lambda o, x: o.conv(x, np.linspace(-1, 1, 24).reshape(3, 4, 2).astype("float32"),
                                   padding="same"), [X3], True),
    ("conv2d", lambda o, x: o.conv(x, np.linspace(-1, 1, 54).reshape(3, 3, 3, 2).astype(
        "float32"), strides=2, padding="valid"), [IMG], True),
    ("conv2d_same_dilated", lambda o, x: o.conv(
        x, np.linspace(-1, 1, 36).reshape(2, 2, 3, 3).astype("float32"), padding="same",
        dilation_rate=2), [IMG], True),
    ("depthwise_conv", lambda o, x: o.depthwise_conv(
        x, np.linspace(-1, 1, 54).reshape(3, 3, 3, 2).astype("float32"), padding="same"), [IMG],
     True),
    ("max_pool2d", lambda o, x: o.max_pool(x, (2, 2), strides=(2, 2)), [IMG], True),
    ("max_pool1d_same", lambda o, x: o.max_pool(x, 2, strides=1, padding="same"), [X3], True),
    ("average_pool2d_same", lambda o, x: o.average_pool(x, (3, 3), strides=(2, 2),
                                                        padding="same"), [IMG], True),
    ("top_k_values", lambda o, x: o.top_k(x, 3)[0], [X], True),
    ("top_k_indices", lambda o, x: o.top_k(x, 3)[1], [X], True),
    ("in_top_k", lambda o, y, x: o.in_top_k(y, x, 2), [LABELS, X], True),
    ("segment_sum", lambda o, x: o.segment_sum(x, np.array([0, 0, 2, 1]), num_segments=3), [X],
     False),
    ("segment_max", lambda o, x: o.segment_max(x, np.array([0, 2, 2, 1]), num_segments=3), [X],
     False),
    ("slice", lambda o, x: o.slice(x, (0, 1, 2), (3, 3, 2)), [X3], False),
    ("slice_update", lambda o, x: o.slice_update(x, (1, 2), np.ones((2, 3), "float32")), [X],
     False),
    ("slice_update_batch", lambda o, x: o.slice_update(x, (0, 2), o.square(x[:, :3])), [X],
     True),
    ("scatter", lambda o: o.scatter(np.array([[0, 1], [2, 2], [0, 1]]),
                                    np.array([1.0, 2.0, 3.0], "float32"), (3, 4)), [], False),
    ("scatter_update", lambda o, x: o.scatter_update(x, np.array([[0, 1], [2, 5]]),
                                                     np.array([9.0, 8.0], "float32")), [X],
     False),
    ("stop_gradient", lambda o, x: o.stop_gradient(x) * 2, [X], True),
    ("cast", lambda o, x: o.cast(x * 3, "int32"), [X], True),
    ("cond_python", lambda o, x: o.cond(True, lambda: x * 2, lambda: x), [X], True),
    ("fori_loop", lambda o, x: o.fori_loop(0, 3, lambda i, v: v * 0.5 + i, x), [X], True),
    ("while_loop", lambda o, x: o.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2),
                                             (0, x))[1], [X], True),
    ("rfft_real", lambda o, x: o.rfft(x)[0], [X], True),
    ("rfft_imag", lambda o, x: o.rfft(x)[1], [X], True),
    ("fft_real", lambda o, x, y: o.fft((x, y))[0], [X, Y], True),
    ("fft_imag", lambda o, x, y: o.fft((x, y))[1], [X, Y], True),
    ("irfft", lambda o, x, y: o.irfft((x, y)), [X, Y], True),
    ("fft2_real", lambda o, x, y: o.fft2((x, y))[0], [X3, X3 * 0.5], True),
    ("resize_bilinear_up", lambda o, x: o.image.resize(x, (9, 13)), [IMG], True),
    ("resize_bilinear_down", lambda o, x: o.image.resize(x, (3, 4)), [IMG], True),
    ("resize_nearest", lambda o, x: o.image.resize(x, (4, 11), interpolation="nearest"), [IMG],
     True),
    ("norm", lambda o, x: o.norm(x, axis=-1), [X], True),
    ("linalg_norm_fro", lambda o, x: o.linalg.norm(x), [SQ], False),
    ("inv", lambda o, x: o.linalg.inv(x), [SQ], False),
    ("det", lambda o, x: o.linalg.det(x), [SQ], False),
    ("solve", lambda o, x: o.linalg.solve(x, x[:, :1] + 1), [SQ], False),
    ("cholesky", lambda o, x: o.linalg.cholesky(x @ x.T), [SQ], False),
    ("svd_s", lambda o, x: o.linalg.svd(x, compute_uv=False), [SQ], False),
    ("eigh_w", lambda o, x: o.linalg.eigh(x + x.T)[0], [SQ], False),
    ("qr_abs_r", lambda o, x: o.abs(o.linalg.qr(x)[1]), [SQ], False),
]

KERAS_SKIP_DTYPE = {"argsort", "argmax", "argmin", "top_k_indices"}


def _keras_value(fn, inputs):
    return np.asarray(fn(kops, *inputs))


def _compare(name, got, want, rtol=2e-5, atol=2e-6):
    got = np.asarray(got)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    if want.dtype == bool:
        assert got.dtype == bool and np.array_equal(got, want), name
        return
    np.testing.assert_allclose(got.astype("float64"), want.astype("float64"), rtol=rtol,
                               atol=atol, err_msg=name)


@pytest.mark.parametrize("name,fn,inputs,batched", CASES, ids=[c[0] for c in CASES])
def test_op_eager_matches_keras(name, fn, inputs, batched):
    want = _keras_value(fn, inputs)
    got = fn(tops, *inputs)
    _compare(name, got, want)
    assert isinstance(got, np.ndarray)
    if name not in KERAS_SKIP_DTYPE:
        assert str(got.dtype) == str(want.dtype), (name, got.dtype, want.dtype)


class OpLayer(tnn.Layer):
    """A custom layer applying one op in call (Keras's way of writing one)."""

    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def call(self, inputs):
        if isinstance(inputs, (list, tuple)):
            return self.fn(tops, *inputs)
        return self.fn(tops, inputs)


class KerasOpLayer(keras.layers.Layer):
    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def call(self, inputs):
        if isinstance(inputs, (list, tuple)):
            return self.fn(kops, *inputs)
        return self.fn(kops, inputs)


BATCHED = [c for c in CASES if c[3]]


@pytest.mark.parametrize("name,fn,inputs,batched", BATCHED, ids=[c[0] for c in BATCHED])
def test_op_inside_layer_call_matches_keras_model(name, fn, inputs, batched):
    tin = [tnn.Input(a.shape[1:], dtype=str(a.dtype)) for a in inputs]
    tout = OpLayer(fn)(tin if len(tin) > 1 else tin[0])
    model = tnn.Model(tin, tout)
    got = model.predict(inputs if len(inputs) > 1 else inputs[0], batch_size=len(inputs[0]),
                        verbose=0)
    kin = [keras.Input(a.shape[1:], dtype=str(a.dtype)) for a in inputs]
    kout = KerasOpLayer(fn)(kin if len(kin) > 1 else kin[0])
    kmodel = keras.Model(kin, kout)
    want = np.asarray(kmodel.predict(inputs if len(inputs) > 1 else inputs[0],
                                     batch_size=len(inputs[0]), verbose=0))
    _compare(name, got, want)
