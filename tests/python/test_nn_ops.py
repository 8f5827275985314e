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

import keras  # noqa: E402 - installed by scripts/install-deps (a test oracle): missing is a failure
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
SIG = f32(3, 40)
CTC_OUT = f32(4, 8, 5)
CTC_T = np.array([[1, 2, 2], [3, 1, 0], [4, 0, 0], [1, 1, 3]], "int32")
CTC_TL = np.array([[3], [2], [1], [3]], "int32")
CTC_OL = np.array([[8], [6], [8], [7]], "int32")
XNAN = np.where(X > 1.2, np.nan, X).astype("float32")
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
    ("where_scalars", lambda o, x: o.where(x > 0, 1.0, -0.5), [X], True),
    ("where_ints", lambda o, x: o.where(x > 0, 3, 1), [X], True),
    ("add_python_numbers", lambda o: o.add(1.0, 2.5), [], False),
    ("matmul", lambda o, x: o.matmul(x, np.arange(30, dtype="float32").reshape(6, 5) / 30),
     [X], True),
    ("matmul3", lambda o, x: o.matmul(x, o.transpose(x, (0, 2, 1))), [X3], True),
    ("einsum", lambda o, x, y: o.einsum("bi,bi->b", x, y), [X, Y], True),
    ("einsum3", lambda o, x: o.einsum("btd,bsd->bts", x, x), [X3], True),
    ("tensordot", lambda o, x: o.tensordot(x, np.ones((4, 2), "float32"), axes=1), [X3], True),
    ("tensordot_pairs", lambda o, x: o.tensordot(x, np.linspace(0, 1, 20).reshape(5, 4).astype(
        "float32"), axes=([1, 2], [0, 1])), [X3], True),
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
    *[(n, (lambda n: lambda o, x: getattr(o, n)(x, axis=-1))(n), [XNAN], True) for n in (
        "nansum", "nanmean", "nanmax", "nanmin", "nanstd", "nanvar", "nanprod", "nanargmax",
        "nanargmin")],
    ("nancumsum", lambda o, x: o.nancumsum(x, axis=1), [XNAN], True),
    ("isposinf", lambda o, x: o.isposinf(x / o.abs(x - 0.5) * 0.0 + 1.0 / x), [X], True),
    ("signbit", lambda o, x: o.signbit(x), [X], True),
    ("heaviside", lambda o, x: o.heaviside(o.round(x), 0.5), [X], True),
    ("sinc", lambda o, x: o.sinc(x), [X], True),
    ("logaddexp2", lambda o, x, y: o.logaddexp2(x, y), [X, Y], True),
    ("trapezoid", lambda o, x: o.trapezoid(x, axis=-1), [X], True),
    ("cdist", lambda o, x: o.cdist(x, x[:2] * 0.5), [X], False),
    ("sparsemax", lambda o, x: o.sparsemax(x * 2), [X], True),
    ("separable_conv", lambda o, x: o.separable_conv(
        x, np.linspace(-1, 1, 27).reshape(3, 3, 3, 1).astype("float32"),
        np.linspace(-1, 1, 12).reshape(1, 1, 3, 4).astype("float32"), padding="same"), [IMG],
     True),
    ("depth_to_space", lambda o, x: o.depth_to_space(o.tile(x, (1, 1, 1, 4)), 2), [IMG], True),
    ("space_to_depth", lambda o, x: o.space_to_depth(x, 2), [IMG], True),
    ("psnr", lambda o, x, y: o.psnr(x, y, 4.0), [X, Y], False),
    ("segment_prod", lambda o, x: o.segment_prod(x, np.array([0, 0, 2, 1]), num_segments=3), [X],
     False),
    ("diagflat", lambda o, x: o.diagflat(x[0]), [X], False),
    ("vander", lambda o, x: o.vander(x[0], 3), [X], False),
    ("select", lambda o, x: o.select([x > 1, x < -1], [x, x * 2], 0.5), [X], True),
    ("hamming", lambda o: o.hamming(7), [], False),
    ("bincount", lambda o: o.bincount(np.array([0, 2, 2, 5])), [], False),
    ("gcd", lambda o: o.gcd(np.array([12, 18], "int32"), np.array([8, 27], "int32")), [], False),
    ("rgb_to_grayscale", lambda o, x: o.image.rgb_to_grayscale(x), [IMG], True),
    ("pad_images", lambda o, x: o.image.pad_images(x, 1, 2, target_height=9, target_width=11),
     [IMG], True),
    ("crop_images", lambda o, x: o.image.crop_images(x, 1, 2, bottom_cropping=2,
                                                     target_width=5), [IMG], True),
    ("extract_sequences", lambda o, x: o.extract_sequences(x, 3, 2), [X3], True),
    ("stft_real", lambda o, x: o.stft(x, 8, 4, 8)[0], [SIG], True),
    ("stft_imag_hamming", lambda o, x: o.stft(x, 6, 3, 8, window="hamming")[1], [SIG], True),
    ("stft_uncentred", lambda o, x: o.stft(x, 8, 5, 16, window=None, center=False)[0], [SIG],
     True),
    ("ctc_loss", lambda o, t, x, tl, ol: o.ctc_loss(t, x, o.squeeze(tl, -1), o.squeeze(ol, -1)),
     [CTC_T, CTC_OUT, CTC_TL, CTC_OL], True),
    ("ctc_loss_blank_last", lambda o, t, x, tl, ol: o.ctc_loss(
        t, x, o.squeeze(tl, -1), o.squeeze(ol, -1), mask_index=0) * 0 + o.ctc_loss(
        t, x[..., ::-1], o.squeeze(tl, -1), o.squeeze(ol, -1), mask_index=4),
     [CTC_T, CTC_OUT, CTC_TL, CTC_OL], True),
    ("ctc_decode_labels", lambda o: o.ctc_decode(CTC_OUT, np.array([8, 5, 8, 3]))[0], [],
     False),
    ("ctc_decode_scores", lambda o: o.ctc_decode(CTC_OUT, np.array([8, 5, 8, 3]))[1], [],
     False),
    ("ctc_decode_unmerged", lambda o: o.ctc_decode(
        np.repeat(CTC_OUT, 2, axis=1), np.array([16, 9, 12, 3]), merge_repeated=False,
        mask_index=2)[0], [], False),
    ("conv_transpose2d", lambda o, x: o.conv_transpose(
        x, np.linspace(-1, 1, 54).reshape(3, 3, 2, 3).astype("float32"), strides=2), [IMG],
     True),
    ("conv_transpose2d_same", lambda o, x: o.conv_transpose(
        x, np.linspace(-1, 1, 48).reshape(2, 2, 4, 3).astype("float32"), strides=(2, 1),
        padding="same"), [IMG], True),
    ("conv_transpose1d", lambda o, x: o.conv_transpose(
        x, np.linspace(-1, 1, 24).reshape(3, 2, 4).astype("float32"), strides=2), [X3], True),
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
def test_op_inside_layer_call_matches_keras(name, fn, inputs, batched):
    """The op recorded in a model's program gives Keras's value. Keras's model
    on one whole batch computes its op eagerly on the batch, so its eager
    value is the reference (a Keras model per case, compiled by XLA, cost
    most of this file's time; KerasOpLayer's model is compared once below)."""
    tin = [tnn.Input(a.shape[1:], dtype=str(a.dtype)) for a in inputs]
    tout = OpLayer(fn)(tin if len(tin) > 1 else tin[0])
    model = tnn.Model(tin, tout)
    got = model.predict(inputs if len(inputs) > 1 else inputs[0], batch_size=len(inputs[0]),
                        verbose=0)
    _compare(name, got, _keras_value(fn, inputs))


def test_keras_model_of_an_op_layer_is_its_eager_value():
    """What the test above relies on: a Keras model of KerasOpLayer, run on the
    whole batch, gives the op's eager value (a few ops of each kind)."""
    picked = [c for c in BATCHED if c[0] in ("matmul", "softmax", "mean", "one_hot", "where",
                                              "conv", "max_pool", "cumsum")]
    assert picked
    for name, fn, inputs, _ in picked:
        kin = [keras.Input(a.shape[1:], dtype=str(a.dtype)) for a in inputs]
        kmodel = keras.Model(kin, KerasOpLayer(fn)(kin if len(kin) > 1 else kin[0]))
        want = np.asarray(kmodel.predict(inputs if len(inputs) > 1 else inputs[0],
                                         batch_size=len(inputs[0]), verbose=0))
        _compare(name, want, _keras_value(fn, inputs))


# ------------------------------------------------------------ activations
ACTS = ["relu", "relu6", "sigmoid", "tanh", "softmax", "log_softmax", "elu", "selu", "gelu",
        "silu", "swish", "leaky_relu", "softplus", "softsign", "hard_sigmoid", "hard_silu",
        "hard_swish", "mish", "exponential", "linear", "log_sigmoid", "celu", "glu",
        "hard_tanh", "hard_shrink", "soft_shrink", "tanh_shrink", "sparse_plus", "squareplus",
        "sparse_sigmoid"]


@pytest.mark.parametrize("name", ACTS)
def test_activation_eager_get_serialize_and_as_layer_activation(name):
    fn = getattr(tnn.activations, name)
    _compare(name, fn(X), np.asarray(getattr(keras.activations, name)(X)))
    assert tnn.activations.get(name) is fn
    assert tnn.activations.serialize(fn) == keras.activations.serialize(
        getattr(keras.activations, name))
    assert tnn.activations.deserialize(tnn.activations.serialize(fn)) is fn
    kernel = np.linspace(-1, 1, 36).reshape(6, 6).astype("float32")
    inp = tnn.Input((6,))
    dense = tnn.Dense(6, activation=fn)
    model = tnn.Model(inp, dense(inp))
    dense.set_weights([kernel, np.zeros(6, "float32")])
    kin = keras.Input((6,))
    kdense = keras.layers.Dense(6, activation=name)
    kmodel = keras.Model(kin, kdense(kin))
    kdense.set_weights([kernel, np.zeros(6, "float32")])
    _compare(name, model.predict(X, verbose=0), np.asarray(kmodel.predict(X, verbose=0)))


def test_relu_options_match_keras():
    for kw in ({"negative_slope": 0.1}, {"max_value": 1.0}, {"threshold": 0.5},
               {"negative_slope": 0.1, "max_value": 2.0, "threshold": 0.5}, {"max_value": 6}):
        _compare(str(kw), tnn.activations.relu(X, **kw),
                 np.asarray(keras.activations.relu(X, **kw)))


def test_activation_errors_name_the_closest():
    with pytest.raises(ValueError, match="did you mean 'relu'"):
        tnn.activations.get("reluu")
    with pytest.raises(AttributeError, match="closest supported"):
        tnn.activations.sparsemaxx  # noqa: B018


# ------------------------------------------------------------ random
def test_random_seeds_shapes_and_statistics():
    rnd = tnn.random
    a, b = rnd.normal((2000,), seed=7), rnd.normal((2000,), seed=7)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert not np.array_equal(a, rnd.normal((2000,), seed=8))
    assert abs(a.mean()) < 0.1 and abs(a.std() - 1) < 0.1
    gen = tnn.random.SeedGenerator(3)
    first, second = rnd.uniform((5,), seed=gen), rnd.uniform((5,), seed=gen)
    assert not np.array_equal(first, second)
    gen2 = tnn.random.SeedGenerator(3)
    assert np.array_equal(rnd.uniform((5,), seed=gen2), first)
    u = rnd.uniform((3000,), minval=2.0, maxval=4.0, seed=1)
    assert u.min() >= 2.0 and u.max() < 4.0 and abs(u.mean() - 3.0) < 0.05
    t = rnd.truncated_normal((3000,), mean=1.0, stddev=0.5, seed=2)
    assert t.min() >= 0.0 and t.max() <= 2.0 and abs(t.mean() - 1.0) < 0.05
    r = rnd.randint((4000,), 0, 5, seed=3)
    assert r.dtype == np.int32 and set(np.unique(r)) == {0, 1, 2, 3, 4}
    s = rnd.shuffle(np.arange(20).reshape(10, 2), seed=4)
    # Keras 3's shuffle permutes each slice on its own (JAX's independent=True)
    assert sorted(s[:, 0].tolist()) == list(range(0, 20, 2)) and \
        sorted(s[:, 1].tolist()) == list(range(1, 20, 2)) and not np.all(s[:, 1] == s[:, 0] + 1)
    d = rnd.dropout(np.ones((4000,), "float32"), 0.25, seed=5)
    assert set(np.unique(d)) <= {0.0, np.float32(1.0 / 0.75)} and abs((d == 0).mean() - 0.25) < 0.03
    c = rnd.categorical(np.log(np.array([[0.2, 0.8], [0.9, 0.1]])), 3000, seed=6)
    assert c.shape == (2, 3000) and abs(c[0].mean() - 0.8) < 0.03 and abs(c[1].mean() - 0.1) < 0.03


@pytest.mark.parametrize("seeded", ["generator", "int"])
def test_random_inside_a_model_draws_with_the_step_seed(seeded):
    """keras.random in a layer's call (a VAE's sampling): recorded into the
    program, N(0, 1) draws; with a SeedGenerator new ones at each training
    step, with an int seed the same ones at every call, as Keras's."""
    class Noise(tnn.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.seed = tnn.random.SeedGenerator(7) if seeded == "generator" else 1

        def call(self, x):
            return x + tnn.random.normal(tops.shape(x), seed=self.seed)

    inp = tnn.Input((3,))
    model = tnn.Model(inp, Noise()(inp))
    z = model.predict(np.zeros((4000, 3), np.float32), verbose=0)
    # predict's batches of 32: new draws at each batch with a SeedGenerator, the
    # same ones with an int seed, as Keras's (its generator's state advances)
    assert np.array_equal(z[:32], z[32:64]) == (seeded == "int")
    draws = z if seeded == "generator" else z[:32]
    assert abs(draws.mean()) < 0.05 * np.sqrt(z.size / draws.size)
    assert abs(draws.std() - 1.0) < 0.05 * np.sqrt(z.size / draws.size)
    assert np.abs(z[0] - z[1]).max() > 0  # each sample its own draws
    model.compile("sgd", "mse")
    h = model.fit(np.zeros((64, 3), np.float32), np.zeros((64, 3), np.float32), epochs=3,
                  batch_size=64, verbose=0).history["loss"]
    assert all(0.6 < v < 1.4 for v in h)  # E[noise^2] = 1
    # new draws at each step, or the same ones (no weights: the loss is the draws')
    assert len(set(h)) == (3 if seeded == "generator" else 1), h
    with pytest.raises(ValueError, match=r"random.uniform.*maxval must exceed minval"):
        tnn.random.uniform((2,), 1.0, 0.0)


# ------------------------------------------------------------ gradients inside a trained layer
class OpsBlock(tnn.Layer):
    """A layer written with ops only: every op here is differentiated in fit."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="ones",
                                 name="w")
        self.g = self.add_weight(shape=(self.units,), initializer="ones", name="g")

    def call(self, x):
        h = tops.matmul(x, self.w)
        h = tops.gelu(h) + tops.erf(h) * 0.1 + tops.logsumexp(h, axis=-1, keepdims=True) * 0.1
        mean, var = tops.moments(h, axes=[-1], keepdims=True)
        h = (h - mean) * tops.rsqrt(var + 1e-3) * self.g
        h = h + tops.stop_gradient(h) * 0.5
        return tops.concatenate([tops.softmax(h), tops.sum(tops.square(h), axis=-1,
                                                           keepdims=True) * 0.01], axis=-1)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_gradients_of_ops_inside_a_layer_match_finite_differences(seed):
    rng = np.random.default_rng(seed)  # its own data, whichever tests ran before
    x = rng.uniform(-2, 2, size=(8, 3)).astype("float32")
    y = rng.uniform(0, 1, size=(8, 5)).astype("float32")
    inp = tnn.Input((3,))
    block = OpsBlock(4)
    model = tnn.Model(inp, block(inp))
    w0 = [rng.normal(size=(3, 4)).astype("float32").astype("float64") * 0.5,
          (1 + rng.normal(size=4) * 0.1).astype("float32").astype("float64")]

    def forward(w, g):
        # the same arithmetic in float64 NumPy (the reference)
        from math import erf as merf
        h = x.astype("float64") @ w
        gel = h * 0.5 * (1 + np.vectorize(merf)(h / np.sqrt(2)))
        lse = np.log(np.exp(h).sum(-1, keepdims=True))
        h = gel + np.vectorize(merf)(h) * 0.1 + lse * 0.1
        m, v = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
        h = (h - m) / np.sqrt(v + 1e-3) * g
        return h

    def loss(w, g):
        h = forward(w, g)
        hs = h * 1.5  # stop_gradient's half counts in value only
        e = np.exp(hs - hs.max(-1, keepdims=True))
        out = np.concatenate([e / e.sum(-1, keepdims=True),
                              (hs ** 2).sum(-1, keepdims=True) * 0.01], -1)
        return ((out - y) ** 2).mean()

    model.compile(tessera.optim.SGD(1.0), "mse")
    model.set_weights([w.astype("float32") for w in w0])
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    w1 = model.get_weights()
    # the SGD step is -grad; the reference gradient differentiates through h
    # only where stop_gradient does not stop it: d/dθ of out(h + sg(h)*0.5)
    eps = 1e-6
    num = []
    for k, base in enumerate(w0):
        gk = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            def lossk(delta):
                ws = [v.copy() for v in w0]
                ws[k][idx] += delta
                h = forward(*ws)
                hfix = forward(*w0)
                hs = h + hfix * 0.5  # stop_gradient: the second term is a constant
                e = np.exp(hs - hs.max(-1, keepdims=True))
                out = np.concatenate([e / e.sum(-1, keepdims=True),
                                      (hs ** 2).sum(-1, keepdims=True) * 0.01], -1)
                return ((out - y) ** 2).mean()
            gk[idx] = (lossk(eps) - lossk(-eps)) / (2 * eps)
        num.append(gk)
    assert loss(*w0) > 0
    for k in range(2):
        np.testing.assert_allclose(w0[k] - w1[k], num[k], rtol=2e-3, atol=2e-5)


# ------------------------------------------------------------ keras-io's subclassing guide
class Linear(tnn.Layer):
    """As keras-io's "Making new layers and models via subclassing" writes it."""

    def __init__(self, units=32):
        super().__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                 initializer="random_normal", trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer="random_normal",
                                 trainable=True)

    def call(self, inputs):
        return tops.matmul(inputs, self.w) + self.b


class KLinear(keras.layers.Layer):
    def __init__(self, units=32):
        super().__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                 initializer="random_normal", trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer="random_normal",
                                 trainable=True)

    def call(self, inputs):
        return kops.matmul(inputs, self.w) + self.b


def test_subclassing_guide_layer_trained_by_fit_matches_keras():
    x = f32(64, 4)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.3).astype("float32")
    inp = tnn.Input((4,))
    model = tnn.Model(inp, Linear(1)(tnn.ops.relu(inp) + inp))
    kin = keras.Input((4,))
    kmodel = keras.Model(kin, KLinear(1)(kops.relu(kin) + kin))
    kmodel.set_weights(model.get_weights())
    np.testing.assert_allclose(model.predict(x, verbose=0), kmodel.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)
    model.compile(tessera.optim.SGD(0.05), "mse")
    kmodel.compile(keras.optimizers.SGD(0.05), "mse")
    h = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    kh = kmodel.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    np.testing.assert_allclose(h.history["loss"], kh.history["loss"], rtol=1e-4)
    for a, b in zip(model.get_weights(), kmodel.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_ops_in_a_custom_loss_match_keras():
    def loss(y_true, y_pred):
        return tops.mean(tops.square(y_pred - y_true) + 0.1 * tops.abs(y_pred), axis=-1)

    x, y = f32(32, 3), f32(32, 2)
    inp = tnn.Input((3,))
    model = tnn.Model(inp, tnn.Dense(2)(inp))
    model.compile(tessera.optim.SGD(0.0), loss)
    got = model.evaluate(x, y, verbose=0)
    p = model.predict(x, verbose=0)
    want = float(np.mean(np.asarray(kops.mean(kops.square(p - y) + 0.1 * kops.abs(p), -1))))
    assert abs(got - want) < 1e-5 * max(1, abs(want))


# ------------------------------------------------------------ errors and the missing list
def test_unknown_op_names_the_closest_supported():
    with pytest.raises(AttributeError, match=r"'logsumexpp'.*closest supported: \['logsumexp'"):
        tops.logsumexpp  # noqa: B018
    with pytest.raises(AttributeError, match=r"'istf' is not supported.*'istft', 'stft'"):
        tops.istf  # noqa: B018
    with pytest.raises(AttributeError, match=r"'segment_mean'.*segment_"):
        tops.segment_mean  # noqa: B018
    with pytest.raises(AttributeError, match="'jvp' is not supported"):
        tops.linalg.jvp  # noqa: B018


def test_op_errors_name_the_op_and_values():
    with pytest.raises(ValueError, match=r"\[ops.split\] 6 elements along axis 1 do not split "
                                         r"into 4"):
        tops.split(X, 4, axis=1)
    with pytest.raises(ValueError, match=r"\[ops.conv\] kernel of shape \(3, 5, 2\)"):
        tops.conv(X3, np.ones((3, 5, 2), "float32"))
    with pytest.raises(ValueError, match=r"\[ops.normalize\] order must be an int >= 1"):
        tops.normalize(X, order=0)

    class Loop(tnn.Layer):
        def call(self, x):
            return tops.while_loop(lambda v: tops.sum(v) < 10.0, lambda v: v * 2, x)

    with pytest.raises(TypeError, match=r"\[ops.while_loop\].*condition is a symbolic"):
        Loop()(tnn.Input((3,)))


def test_print_keras_ops_tessera_lacks():
    """The list docs/nn.md quotes: Keras's ops, activations and random names
    tessera lacks (printed; the test fails if a name tessera lists is missing)."""
    def public(mod):
        return {n for n in dir(mod) if not n.startswith("_")}

    lacking = {}
    for label, kmod, tmod in (("ops", kops, tops), ("ops.linalg", kops.linalg, tops.linalg),
                              ("ops.image", kops.image, tops.image),
                              ("activations", keras.activations, tnn.activations),
                              ("random", keras.random, tnn.random)):
        names = public(kmod)
        have = {n for n in names if n in tmod.__all__}
        for n in have:
            getattr(tmod, n)  # every listed name exists
        lacking[label] = sorted(names - have)
    for label, names in lacking.items():
        print(f"Keras {label} names tessera lacks ({len(names)}): {' '.join(names)}")
    assert len(lacking["ops"]) < 60


@pytest.mark.parametrize("batched", [False, True])
def test_layer_called_on_arrays_inside_call_trains_as_keras(batched):
    """keras-io's TokenAndPositionEmbedding calls an Embedding on ops.arange(...):
    the array is a constant of the program whose first axis the layer takes for
    the batch, as Keras does, and the position table trains as Keras's; the
    positions given the inputs' batch axis do the same."""
    class PosEmb(tnn.Layer):
        def __init__(self, batched, **kwargs):
            super().__init__(**kwargs)
            self.batched = batched
            self.tok = tnn.Embedding(input_dim=20, output_dim=4)
            self.pos = tnn.Embedding(input_dim=6, output_dim=4)

        def call(self, x):
            positions = tops.arange(start=0, stop=tops.shape(x)[-1], step=1)
            if self.batched:
                positions = tops.zeros_like(x) + positions
            return self.tok(x) + self.pos(positions)

    class KPosEmb(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.tok = keras.layers.Embedding(input_dim=20, output_dim=4)
            self.pos = keras.layers.Embedding(input_dim=6, output_dim=4)

        def call(self, x):
            return self.tok(x) + self.pos(kops.arange(start=0, stop=kops.shape(x)[-1], step=1))

    tokens = RNG.integers(0, 20, size=(16, 6)).astype("int32")
    target = f32(16, 6, 4)
    inp = tnn.Input((6,), dtype="int32")
    model = tnn.Model(inp, PosEmb(batched)(inp))
    kin = keras.Input((6,), dtype="int32")
    kmodel = keras.Model(kin, KPosEmb()(kin))
    assert [w.shape for w in model.get_weights()] == [(20, 4), (6, 4)]
    kmodel.set_weights(model.get_weights())
    model.compile(tessera.optim.SGD(0.5), "mse")
    kmodel.compile(keras.optimizers.SGD(0.5), "mse")
    model.fit(tokens, target, batch_size=16, epochs=2, shuffle=False, verbose=0)
    kmodel.fit(tokens, target, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), kmodel.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------ gradients against Keras's (JAX's)
GRAD_NAMES = ["exp", "sin", "tanh", "relu", "sigmoid", "softplus", "silu", "selu", "elu", "gelu",
              "leaky_relu", "log_sigmoid", "hard_sigmoid", "celu", "sparse_plus", "squareplus",
              "erf", "softsign", "softmax", "log_softmax", "softmax_axis1", "gelu_exact", "glu",
              "sum", "sum_keepdims", "mean", "max", "min", "prod", "var", "std", "logsumexp",
              "cumsum", "cumprod", "clip", "matmul", "matmul3", "einsum3", "tensordot",
              "tensordot_pairs",
              "reshape", "transpose", "swapaxes", "moveaxis", "expand_dims", "squeeze", "take",
              "take_along_axis", "tile", "repeat", "split", "split_points", "flip", "roll", "pad",
              "pad_value", "diff", "sort", "average", "normalize", "normalize_l1", "moments",
              "moments_mean", "batch_normalization", "conv1d", "conv2d", "conv2d_same_dilated",
              "depthwise_conv", "max_pool2d", "max_pool1d_same", "average_pool2d_same",
              "top_k_values", "slice_update_batch", "rfft_real", "rfft_imag",
              "resize_bilinear_up", "resize_bilinear_down", "resize_nearest", "norm",
              "sparsemax", "separable_conv", "depth_to_space", "space_to_depth",
              "stop_gradient", "fori_loop", "cond_python", "sinc", "trapezoid",
              "select", "ones_like", "rgb_to_grayscale", "pad_images", "crop_images",
              "extract_sequences", "conv_transpose2d", "conv_transpose1d", "stft_real",
              "stft_imag_hamming", "full_like", "threshold", "hard_shrink", "soft_shrink",
              "tanh_shrink", "hard_tanh", "abs", "square", "add_scalar", "log_softmax",
              "ones_like"]
GRAD_CASES = [c for c in CASES if c[0] in set(GRAD_NAMES)]


class Scaled(tnn.Layer):
    """x * s (a weight of one sample's shape, ones at first), then the op."""

    def __init__(self, fn, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def build(self, input_shape):
        self.s = self.add_weight(shape=tuple(input_shape[1:]), initializer="ones", name="s")

    def call(self, x):
        return self.fn(tops, x * self.s)


@pytest.mark.parametrize("name,fn,inputs,batched", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_op_gradient_in_a_trained_layer_matches_keras(name, fn, inputs, batched):
    """One SGD step (rate 1) of a layer using the op moves its weight by minus
    the gradient; Keras's op differentiated by JAX gives the reference."""
    import jax  # the oracle's own autodiff (installed with keras by install-deps)
    import jax.numpy as jnp

    (x,) = inputs
    out_shape = np.asarray(fn(kops, x)).shape
    target = RNG.normal(size=out_shape).astype("float32")

    def kloss(s):
        y = fn(kops, jnp.asarray(x) * s)
        return jnp.mean(jnp.square(y - target))

    # jax.jit: one XLA compilation of the oracle, not one per primitive run eagerly
    want = np.asarray(jax.jit(jax.grad(kloss))(jnp.ones(x.shape[1:], "float32")))

    def loss(y_true, y_pred):
        return tops.mean(tops.square(y_pred - y_true))

    inp = tnn.Input(x.shape[1:])
    model = tnn.Model(inp, Scaled(fn)(inp))
    model.compile(tessera.optim.SGD(1.0), loss)
    model.fit(x, target, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    got = 1.0 - model.get_weights()[0]
    scale = max(1e-3, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5 * scale, err_msg=name)


def test_ops_in_a_metric_function_match_keras():
    def hit_rate(y_true, y_pred):
        hits = tops.equal(tops.cast(y_true, "int32"), tops.argmax(y_pred, axis=-1))
        return tops.mean(tops.cast(hits, "float32"))

    x = f32(40, 3)
    y = RNG.integers(0, 4, size=(40,)).astype("int32")
    inp = tnn.Input((3,))
    model = tnn.Model(inp, tnn.Dense(4)(inp))
    model.compile(tessera.optim.SGD(0.0), "sparse_categorical_crossentropy",
                  metrics=[hit_rate])
    _, got = model.evaluate(x, y, batch_size=40, verbose=0)
    p = model.predict(x, verbose=0)
    want = float(np.mean(np.asarray(kops.equal(y, kops.argmax(p, axis=-1)))))
    assert abs(got - want) < 1e-6


def test_ctc_loss_gradient_in_training_matches_keras():
    """keras-io's OCR/ASR models train with ctc_loss as their loss: one SGD
    step through it moves the weight by JAX's gradient of Keras's ctc_loss."""
    import jax
    import jax.numpy as jnp

    x = CTC_OUT
    target = np.array([[1, 2, 2], [3, 1, 4], [4, 2, 1], [1, 1, 3]], "int32")  # no blank (0)

    def kloss(s):
        out = jnp.asarray(x) * s
        lengths_t = jnp.full((4,), 3, "int32")
        lengths_o = jnp.full((4,), 8, "int32")
        return jnp.mean(kops.ctc_loss(target, out, lengths_t, lengths_o))

    # jax.jit: one XLA compilation of the oracle, not one per primitive run eagerly
    want = np.asarray(jax.jit(jax.grad(kloss))(jnp.ones(x.shape[1:], "float32")))

    def loss(y_true, y_pred):
        tl = tops.cast(tops.sum(tops.ones_like(y_true), axis=-1), "int32")
        ol = tops.cast(tops.sum(tops.ones_like(y_pred[:, :, 0]), axis=-1), "int32")
        return tops.mean(tops.ctc_loss(y_true, y_pred, tl, ol))

    inp = tnn.Input(x.shape[1:])
    model = tnn.Model(inp, Scaled(lambda o, h: h)(inp))
    model.compile(tessera.optim.SGD(1.0), loss)
    model.fit(x, target, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(1.0 - model.get_weights()[0], want, rtol=2e-4, atol=2e-6)
