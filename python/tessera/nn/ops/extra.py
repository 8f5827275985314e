"""More of Keras 3's ops: NaN-ignoring reductions, number tests, window
functions and other NumPy names, sparsemax, separable convolution, pixel
shuffles, psnr and segment_prod. Those written over primitives work inside
a model; those marked eager run on arrays only (NumPy's results)."""

from __future__ import annotations

import builtins

import numpy as np

from ..symbolic import user_location
from . import nn as knn
from . import numpy as knp
from ._base import (FLOATX, cast, check_axis, dtype_of, eager_only, floating, prim, shape_of,
                    tensor)

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


# ------------------------------------------------------------ NaN-ignoring reductions
def _nan_reduction(name, to_float):
    def op(x, axis=None, keepdims=False):
        x = floating(x) if to_float else tensor(x)
        return prim(name, x, axis=_axis(axis), keepdims=keepdims)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Like keras.ops.{name}: {name[3:]} ignoring NaNs."
    return op


for _n, _f in (("nansum", False), ("nanmean", True), ("nanmax", False), ("nanmin", False),
               ("nanstd", True), ("nanvar", True), ("nanprod", False), ("nanmedian", True)):
    globals()[_n] = _export(_nan_reduction(_n, _f))


@_export
def nanargmax(x, axis=None, keepdims=False):
    return cast(prim("nanargmax", tensor(x), axis=axis, keepdims=keepdims), "int32")


@_export
def nanargmin(x, axis=None, keepdims=False):
    return cast(prim("nanargmin", tensor(x), axis=axis, keepdims=keepdims), "int32")


@_export
def nancumsum(x, axis=None, dtype=None):
    r = prim("nancumsum", tensor(x), axis=axis)
    return r if dtype is None else cast(r, dtype)


@_export
def nancumprod(x, axis=None, dtype=None):
    x = floating(x)
    r = knp.cumprod(knp.where(knp.isnan(x), 1.0, x), axis=axis)
    return r if dtype is None else cast(r, dtype)


@_export
def nanquantile(x, q, axis=None, method="linear", keepdims=False):
    return prim("nanquantile", floating(x), q, axis=_axis(axis), method=method,
                keepdims=keepdims)


@_export
def nanpercentile(x, q, axis=None, method="linear", keepdims=False):
    return prim("nanpercentile", floating(x), q, axis=_axis(axis), method=method,
                keepdims=keepdims)


# ------------------------------------------------------------ elementwise extras
@_export
def isposinf(x):
    x = tensor(x)
    return knp.logical_and(knp.isinf(x), knp.greater(x, 0))


@_export
def isneginf(x):
    x = tensor(x)
    return knp.logical_and(knp.isinf(x), knp.less(x, 0))


@_export
def isreal(x):
    x = tensor(x)
    if dtype_of(x).startswith("complex"):
        return knp.equal(knp.imag(x), 0)
    return knp.ones_like(x, dtype="bool")


@_export
def angle(x):
    x = tensor(x)
    if dtype_of(x).startswith("complex"):
        return prim("angle", x)
    x = floating(x)
    return knp.where(knp.less(x, 0), float(np.pi), knp.multiply(x, 0.0))


@_export
def signbit(x):
    x = tensor(x)
    if dtype_of(x).startswith(("float", "bfloat")):
        return knp.less(knp.copysign(1.0, x), 0)
    return knp.less(x, 0)


@_export
def heaviside(x1, x2):
    a = floating(x1)
    r = knp.where(knp.less(a, 0), 0.0, knp.where(knp.greater(a, 0), 1.0, x2))
    return cast(r, dtype_of(a))


@_export
def sinc(x):
    x = floating(x)
    zero = knp.equal(x, 0)
    px = knp.multiply(knp.where(zero, 1.0, x), float(np.pi))
    return knp.where(zero, 1.0, knp.divide(knp.sin(px), px))


@_export
def ldexp(x1, x2):
    return knp.multiply(floating(x1), knp.power(2.0, cast(tensor(x2), FLOATX)))


@_export
def logaddexp2(x1, x2):
    ln2 = float(np.log(2.0))
    return knp.divide(knp.logaddexp(knp.multiply(floating(x1), ln2),
                                    knp.multiply(floating(x2), ln2)), ln2)


@_export
def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = floating(y)
    ax = check_axis("trapezoid", axis, len(shape_of(y)))
    n = shape_of(y)[ax]
    lo = [slice(None)] * ax + [slice(0, n - 1)]
    hi = [slice(None)] * ax + [slice(1, n)]
    avg = knp.multiply(knp.add(y[tuple(lo)], y[tuple(hi)]), 0.5)
    if x is None:
        return knp.multiply(knp.sum(avg, axis=ax), dx)
    return knp.sum(knp.multiply(avg, knp.diff(floating(x), axis=-1 if len(shape_of(x)) == 1
                                              else ax)), axis=ax)


@_export
def diagflat(x, k=0):
    return knp.diag(knp.ravel(x), k)


@_export
def vander(x, N=None, increasing=False):  # noqa: N803 - NumPy's name
    x = tensor(x)
    n = shape_of(x)[0] if N is None else int(N)
    powers = np.arange(n)
    if not increasing:
        powers = powers[::-1].copy()
    return knp.power(knp.expand_dims(x, -1), cast(np.asarray(powers), dtype_of(x)))


@_export
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError(f"[ops.select] condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}")
    out = default
    for c, v in zip(reversed(condlist), reversed(choicelist)):
        out = knp.where(c, v, out)
    return out


@_export
def cdist(x, y):
    """Euclidean distances between the rows of x and of y (last axis: features)."""
    x, y = floating(x), floating(y)
    d = knp.subtract(knp.expand_dims(x, -2), knp.expand_dims(y, -3))
    return knp.sqrt(knp.sum(knp.square(d), axis=-1))


@_export
def bincount(x, weights=None, minlength=0, sparse=False):
    eager_only("bincount", x, weights)
    if sparse:
        raise ValueError("[ops.bincount] sparse=True is not supported")
    a = np.asarray(x)
    w = None if weights is None else np.asarray(weights)
    if a.ndim == 2:
        n = builtins.max(int(a.max()) + 1 if a.size else 0, minlength)
        rows = [np.bincount(r, None if w is None else wr, n) for r, wr in
                zip(a, w if w is not None else [None] * len(a))]
        r = np.stack(rows)
    else:
        r = np.bincount(a, w, minlength)
    return r.astype(w.dtype if w is not None else "int32")


def _eager_numpy(name, fn, doc):
    def op(*args, **kwargs):
        eager_only(name, args, kwargs)
        return fn(*[np.asarray(a) if hasattr(a, "__array__") else a for a in args], **kwargs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Like keras.ops.{name} ({doc}); eager: arrays only."
    globals()[name] = op
    return _export(op)


def _f32(a):
    a = np.asarray(a)
    return a.astype(FLOATX) if a.dtype == np.float64 else a


_eager_numpy("gcd", lambda a, b: np.gcd(a, b), "greatest common divisor")
_eager_numpy("lcm", lambda a, b: np.lcm(a, b), "least common multiple")
_eager_numpy("nextafter", lambda a, b: np.nextafter(a, b), "next float towards x2")
_eager_numpy("i0", lambda a: _f32(np.i0(a)), "modified Bessel function of order 0")
_eager_numpy("hamming", lambda n: np.hamming(n).astype(FLOATX), "Hamming window")
_eager_numpy("hanning", lambda n: np.hanning(n).astype(FLOATX), "Hann window")
_eager_numpy("blackman", lambda n: np.blackman(n).astype(FLOATX), "Blackman window")
_eager_numpy("bartlett", lambda n: np.bartlett(n).astype(FLOATX), "Bartlett window")
_eager_numpy("kaiser", lambda n, beta: np.kaiser(n, beta).astype(FLOATX), "Kaiser window")
_eager_numpy("corrcoef", lambda x: _f32(np.corrcoef(x)), "correlation coefficients")
_eager_numpy("correlate", lambda a, b, mode="valid": _f32(np.correlate(a, b, mode)),
             "1-d cross-correlation")
_eager_numpy("argpartition", lambda x, kth, axis=-1: np.argpartition(x, kth, axis).astype(
    "int32"), "indices partitioning x around its kth element")
_eager_numpy("unravel_index", lambda indices, shape: tuple(
    v.astype("int32") for v in np.unravel_index(indices, shape)), "flat indices as coordinates")
_eager_numpy("geomspace", lambda start, stop, num=50, endpoint=True, dtype=None, axis=0:
             np.geomspace(start, stop, num, endpoint, axis=axis).astype(dtype or FLOATX),
             "numbers spaced evenly on a log scale")


@_export
def unique(x, sorted=True, return_inverse=False, return_counts=False,  # noqa: A002
           axis=None, size=None, fill_value=None):
    eager_only("unique", x)
    if axis is not None or size is not None:
        raise ValueError("[ops.unique] axis and size are not supported")
    r = np.unique(np.asarray(x), return_inverse=return_inverse, return_counts=return_counts)
    if not isinstance(r, tuple):
        return r
    out = [r[0]] + [v.astype("int32") for v in r[1:]]
    return tuple(out)


@_export
def histogram(x, bins=10, range=None):  # noqa: A002
    eager_only("histogram", x)
    h, edges = np.histogram(np.asarray(x), bins=bins, range=range)
    return h.astype("int32"), edges.astype(np.asarray(x).dtype)


# ------------------------------------------------------------ nn extras
@_export
def sparsemax(x, axis=-1):
    """Euclidean projection of x onto the simplex (Martins & Astudillo)."""
    x = floating(x)
    nd = len(shape_of(x))
    ax = check_axis("sparsemax", axis, nd)
    n = shape_of(x)[ax]
    srt = knp.negative(knp.sort(knp.negative(x), axis=ax))
    cs = knp.cumsum(srt, axis=ax)
    shape = [1] * nd
    shape[ax] = n
    r = np.arange(1, n + 1, dtype=dtype_of(x)).reshape(shape)
    support = knp.greater(knp.subtract(srt, knp.divide(knp.subtract(cs, 1.0), r)), 0.0)
    k = knp.sum(cast(support, dtype_of(x)), axis=ax, keepdims=True)
    tau = knp.divide(knp.subtract(knp.sum(knp.where(support, cs, 0.0), axis=ax, keepdims=True),
                                  1.0), k)
    return knp.maximum(knp.subtract(x, tau), 0.0)


@_export
def separable_conv(inputs, depthwise_kernel, pointwise_kernel, strides=1, padding="valid",
                   data_format=None, dilation_rate=1):
    y = knn.depthwise_conv(inputs, depthwise_kernel, strides, padding, data_format,
                           dilation_rate)
    return knn.conv(y, pointwise_kernel, 1, "valid", data_format, 1)


def _nhwc(op, x, data_format):
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"[ops.{op}] data_format must be 'channels_last' or 'channels_first', "
                         f"got {data_format!r}")
    if len(shape_of(x)) != 4:
        raise ValueError(f"[ops.{op}] x must be 4-d, got shape {shape_of(x)}")
    if data_format == "channels_first":
        return knp.transpose(x, (0, 2, 3, 1)), True
    return x, False


@_export
def depth_to_space(x, block_size, data_format="channels_last"):
    x, first = _nhwc("depth_to_space", tensor(x), data_format)
    _, h, w, c = shape_of(x)
    b = int(block_size)
    if c % (b * b):
        raise ValueError(f"[ops.depth_to_space] channels {c} are not a multiple of "
                         f"block_size² = {b * b}")
    y = knp.reshape(x, (-1, h, w, b, b, c // (b * b)))
    y = knp.reshape(knp.transpose(y, (0, 1, 3, 2, 4, 5)), (-1, h * b, w * b, c // (b * b)))
    return knp.transpose(y, (0, 3, 1, 2)) if first else y


@_export
def space_to_depth(x, block_size, data_format="channels_last"):
    x, first = _nhwc("space_to_depth", tensor(x), data_format)
    _, h, w, c = shape_of(x)
    b = int(block_size)
    if h % b or w % b:
        raise ValueError(f"[ops.space_to_depth] height {h} and width {w} must be multiples of "
                         f"block_size {b}")
    y = knp.reshape(x, (-1, h // b, b, w // b, b, c))
    y = knp.reshape(knp.transpose(y, (0, 1, 3, 2, 4, 5)), (-1, h // b, w // b, c * b * b))
    return knp.transpose(y, (0, 3, 1, 2)) if first else y


@_export
def psnr(x1, x2, max_val):
    a, b = floating(x1), floating(x2)
    if shape_of(a) != shape_of(b):
        raise ValueError(f"[ops.psnr] x1 and x2 must have the same shape, got {shape_of(a)} and "
                         f"{shape_of(b)} (at {user_location()})")
    mse = knp.mean(knp.square(knp.subtract(a, b)))
    return knp.subtract(20.0 * float(np.log10(max_val)), knp.multiply(knp.log10(mse), 10.0))


@_export
def segment_prod(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    data = tensor(data)
    ids = tensor(segment_ids)
    if num_segments is None:
        eager_only("segment_prod without num_segments", ids)
        num_segments = int(np.max(ids)) + 1 if np.size(ids) else 0
    hot = knp.equal(knp.expand_dims(ids, -1), knp.arange(int(num_segments), dtype=dtype_of(ids)))
    extra = len(shape_of(data)) - 1
    mask = knp.reshape(hot, (-1, int(num_segments)) + (1,) * extra)
    return knp.prod(knp.where(mask, knp.expand_dims(data, 1), 1), axis=0)


@_export
def extract_sequences(x, sequence_length, sequence_stride):
    """Frames of the last axis: (..., n) gives (..., 1 + (n - length) // stride, length)."""
    x = tensor(x)
    n = shape_of(x)[-1]
    if n is None or sequence_length > n:
        raise ValueError(f"[ops.extract_sequences] sequence_length {sequence_length} does not "
                         f"fit a last axis of {n}")
    count = 1 + (n - sequence_length) // sequence_stride
    idx = (np.arange(count)[:, None] * sequence_stride + np.arange(sequence_length)[None, :])
    return knp.take(x, idx.astype("int64"), axis=-1)
