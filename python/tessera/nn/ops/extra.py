"""More of Keras 3's ops: NaN-ignoring reductions, number tests, window
functions and other NumPy names, sparsemax, separable convolution, pixel
shuffles, psnr and segment_prod. Those written over primitives work inside
a model; those marked eager run on arrays only (NumPy's results)."""

from __future__ import annotations

import builtins

import numpy as np

from ..symbolic import _dtype_name, user_location
from . import nn as knn
from . import numpy as knp
from ._base import (FLOATX, cast, check_axis, dtype_of, eager_only, eager_value, floating,
                    is_symbolic, prim, shape_of, static_or_symbolic_shape, tensor)

__all__: list = []

# The names here that Keras files under keras.ops.numpy too (ops/__init__.py puts them there).
NUMPY_NAMES = (
    "angle", "argpartition", "bartlett", "bincount", "blackman", "corrcoef", "correlate",
    "diagflat", "gcd", "geomspace", "hamming", "hanning", "heaviside", "histogram", "i0",
    "isneginf", "isposinf", "isreal", "kaiser", "lcm", "ldexp", "logaddexp2", "nanargmax",
    "nanargmin", "nancumprod", "nancumsum", "nanmax", "nanmean", "nanmedian", "nanmin",
    "nanpercentile", "nanprod", "nanquantile", "nanstd", "nansum", "nanvar", "nextafter",
    "select", "signbit", "sinc", "trapezoid", "unique", "unravel_index", "vander", "vectorize",
    "view")


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


# ------------------------------------------------------------ NaN-ignoring reductions
# Written over differentiable ops (where, sum, sort, take_along_axis), so gradients
# flow inside a model: a NaN element gets none. Integer tensors hold no NaNs.
def _is_float(x):
    return dtype_of(x).startswith(("float", "bfloat"))


def _reduced_last(op, x, axis):
    """x with the axes to reduce moved last and flattened into one, and the shape
    of the result with keepdims (None: the unknown batch)."""
    shape = shape_of(x)
    nd = len(shape)
    axes = list(builtins.range(nd)) if axis is None else [
        check_axis(op, a, nd) for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
    kept = [i for i in builtins.range(nd) if i not in axes]
    size = 1
    for a in axes:
        if shape[a] is None:
            raise ValueError(f"[ops.{op}] cannot reduce the unknown batch axis {a} of shape "
                             f"{shape} (at {user_location()})")
        size *= shape[a]
    xt = knp.transpose(x, kept + axes) if kept + axes != list(builtins.range(nd)) else x
    flat = knp.reshape(xt, tuple(-1 if shape[i] is None else shape[i] for i in kept) + (size,))
    keep_shape = tuple(1 if i in axes else (-1 if shape[i] is None else shape[i])
                       for i in builtins.range(nd))
    return flat, keep_shape


def _finish(r, keep_shape, keepdims):
    return knp.reshape(r, keep_shape) if keepdims else r


def _masked_reduction(name, fill, reduce, to_float):
    def op(x, axis=None, keepdims=False):
        x = floating(x) if to_float else tensor(x)
        if not _is_float(x):
            return getattr(knp, reduce)(x, axis=axis, keepdims=keepdims)
        nan = knp.isnan(x)
        r = getattr(knp, reduce)(knp.where(nan, fill, x), axis=axis, keepdims=keepdims)
        if name in ("nanmax", "nanmin"):  # all NaN gives NaN
            r = knp.where(knp.all(nan, axis=axis, keepdims=keepdims), float("nan"), r)
        return r

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Like keras.ops.{name}: {name[3:]} ignoring NaNs."
    return op


nansum = _export(_masked_reduction("nansum", 0.0, "sum", False))
nanprod = _export(_masked_reduction("nanprod", 1.0, "prod", False))
nanmax = _export(_masked_reduction("nanmax", float("-inf"), "max", False))
nanmin = _export(_masked_reduction("nanmin", float("inf"), "min", False))


def _count(x, axis, keepdims):
    return knp.sum(cast(knp.logical_not(knp.isnan(x)), dtype_of(x)), axis=axis,
                   keepdims=keepdims)


@_export
def nanmean(x, axis=None, keepdims=False):
    """Like keras.ops.nanmean: the mean ignoring NaNs (NaN where all are NaN)."""
    x = floating(x)
    return knp.divide(nansum(x, axis, keepdims), _count(x, axis, keepdims))


@_export
def nanvar(x, axis=None, keepdims=False):
    """Like keras.ops.nanvar: the variance ignoring NaNs."""
    x = floating(x)
    nan = knp.isnan(x)
    # NaNs replaced before squaring, so no NaN reaches the gradient through `where`
    dev = knp.subtract(knp.where(nan, 0.0, x), nanmean(x, axis, keepdims=True))
    sq = knp.where(nan, 0.0, knp.square(dev))
    return knp.divide(knp.sum(sq, axis=axis, keepdims=keepdims), _count(x, axis, keepdims))


@_export
def nanstd(x, axis=None, keepdims=False):
    """Like keras.ops.nanstd: the standard deviation ignoring NaNs."""
    return knp.sqrt(nanvar(x, axis, keepdims))


def _nanquantile_one(op, x, q, axis, keepdims):
    flat, keep_shape = _reduced_last(op, x, axis)
    srt = knp.sort(flat, axis=-1)  # NaNs sort last
    n = knp.sum(cast(knp.logical_not(knp.isnan(flat)), "int32"), axis=-1, keepdims=True)
    pos = knp.multiply(cast(knp.maximum(knp.subtract(n, 1), 0), dtype_of(x)), float(q))
    lo = knp.floor(pos)
    frac = knp.subtract(pos, lo)
    lo_i = cast(lo, "int32")
    hi_i = knp.minimum(knp.add(lo_i, 1), knp.maximum(knp.subtract(n, 1), 0))
    a = knp.take_along_axis(srt, lo_i, axis=-1)
    b = knp.take_along_axis(srt, hi_i, axis=-1)
    r = knp.add(a, knp.multiply(knp.subtract(b, a), frac))
    r = knp.where(knp.equal(n, 0), float("nan"), r)
    return _finish(knp.squeeze(r, axis=-1), keep_shape, keepdims)


def _nanquantile(op, x, q, axis, method, keepdims):
    _linear_only(op, method)
    x = floating(x)
    qs = np.asarray(q, dtype="float64")
    if qs.ndim > 1 or ((qs < 0) | (qs > 1)).any():
        raise ValueError(f"[ops.{op}] q must be a number or a 1-d list in "
                         f"[0, {'100' if op == 'nanpercentile' else '1'}], got {q!r} "
                         f"(at {user_location()})")
    if qs.ndim == 0:
        return _nanquantile_one(op, x, float(qs), axis, keepdims)
    return knp.stack([_nanquantile_one(op, x, float(v), axis, keepdims) for v in qs])


def _linear_only(op, method):
    if method != "linear":
        raise ValueError(f"[ops.{op}] method {method!r} is not supported: only 'linear' "
                         f"(at {user_location()})")


@_export
def nanmedian(x, axis=None, keepdims=False):
    """Like keras.ops.nanmedian: the median ignoring NaNs."""
    return _nanquantile("nanmedian", x, 0.5, axis, "linear", keepdims)


@_export
def nanquantile(x, q, axis=None, method="linear", keepdims=False):
    """Like keras.ops.nanquantile: the q-th quantile ignoring NaNs ('linear')."""
    return _nanquantile("nanquantile", x, q, axis, method, keepdims)


@_export
def nanpercentile(x, q, axis=None, method="linear", keepdims=False):
    """Like keras.ops.nanpercentile: the q-th percentile ignoring NaNs ('linear')."""
    return _nanquantile("nanpercentile", x, np.asarray(q, "float64") / 100.0, axis, method,
                        keepdims)


@_export
def nanargmax(x, axis=None, keepdims=False):
    return cast(prim("nanargmax", tensor(x), axis=axis, keepdims=keepdims), "int32")


@_export
def nanargmin(x, axis=None, keepdims=False):
    return cast(prim("nanargmin", tensor(x), axis=axis, keepdims=keepdims), "int32")


@_export
def nancumsum(x, axis=None, dtype=None):
    x = tensor(x)
    r = knp.cumsum(knp.where(knp.isnan(x), 0, x) if _is_float(x) else x, axis=axis)
    return r if dtype is None else cast(r, dtype)


@_export
def nancumprod(x, axis=None, dtype=None):
    x = tensor(x)
    r = knp.cumprod(knp.where(knp.isnan(x), 1, x) if _is_float(x) else x, axis=axis)
    return r if dtype is None else cast(r, dtype)


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


_eager_numpy("nextafter", lambda a, b: np.nextafter(a, b), "next float towards x2")
_eager_numpy("hamming", lambda n: np.hamming(n).astype(FLOATX), "Hamming window")
_eager_numpy("hanning", lambda n: np.hanning(n).astype(FLOATX), "Hann window")
_eager_numpy("blackman", lambda n: np.blackman(n).astype(FLOATX), "Blackman window")
_eager_numpy("bartlett", lambda n: np.bartlett(n).astype(FLOATX), "Bartlett window")
_eager_numpy("kaiser", lambda n, beta: np.kaiser(n, beta).astype(FLOATX), "Kaiser window")
_eager_numpy("geomspace", lambda start, stop, num=50, endpoint=True, dtype=None, axis=0:
             np.geomspace(start, stop, num, endpoint, axis=axis).astype(dtype or FLOATX),
             "numbers spaced evenly on a log scale")


def _ints(op, *xs):
    xs = [tensor(x) for x in xs]
    for x in xs:
        if not dtype_of(x).startswith(("int", "uint")):
            raise TypeError(f"[ops.{op}] expects integer tensors, got dtype {dtype_of(x)} "
                            f"(at {user_location()})")
    return xs


@_export
def gcd(x1, x2):
    """Like keras.ops.gcd: the greatest common divisor, elementwise (Euclid's steps; on
    symbolic tensors as many as the dtype can need, 48 for 32 bits, 93 for 64)."""
    a, b = _ints("gcd", x1, x2)
    a, b = knp.abs(knp.add(a, knp.zeros_like(b))), knp.abs(knp.add(b, knp.zeros_like(a)))
    steps = 93 if dtype_of(a).endswith("64") else 48
    for _ in builtins.range(steps):
        if not is_symbolic(b) and not np.any(np.asarray(b)):
            break
        nz = knp.not_equal(b, 0)
        safe = knp.where(nz, b, 1)
        a, b = knp.where(nz, b, a), knp.where(nz, knp.mod(a, safe), 0)
    return a


@_export
def lcm(x1, x2):
    """Like keras.ops.lcm: |x1 * x2| / gcd(x1, x2), 0 when either is 0."""
    a, b = _ints("lcm", x1, x2)
    g = gcd(a, b)
    zero = knp.equal(g, 0)
    return knp.where(zero, 0, knp.abs(knp.multiply(knp.floor_divide(a, knp.where(zero, 1, g)),
                                                    b)))


# Abramowitz & Stegun 9.8.1 and 9.8.2 (relative error below 2e-7)
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706,
             0.02635537, -0.01647633, 0.00392377)


def _poly(t, coefs):
    r = coefs[-1]
    for c in reversed(coefs[:-1]):
        r = knp.add(knp.multiply(r, t), c)
    return r


@_export
def i0(x):
    """Like keras.ops.i0: the modified Bessel function of the first kind, order 0."""
    x = floating(x)
    ax = knp.abs(x)
    small = knp.less_equal(ax, 3.75)
    t = knp.square(knp.divide(knp.minimum(ax, 3.75), 3.75))
    big = knp.maximum(ax, 3.75)
    large = knp.multiply(knp.divide(knp.exp(big), knp.sqrt(big)), _poly(knp.divide(3.75, big),
                                                                         _I0_LARGE))
    return knp.where(small, _poly(t, _I0_SMALL), large)


@_export
def corrcoef(x):
    """Like keras.ops.corrcoef: Pearson correlation coefficients of the rows of x
    (a 1-d x is one variable: 1.0)."""
    x = floating(x)
    nd = len(shape_of(x))
    if nd not in (1, 2):
        raise ValueError(f"[ops.corrcoef] x must be 1-d or 2-d, got shape {shape_of(x)} "
                         f"(at {user_location()})")
    rows = knp.expand_dims(x, 0) if nd == 1 else x
    xm = knp.subtract(rows, knp.mean(rows, axis=-1, keepdims=True))
    c = knp.matmul(xm, knp.transpose(xm))
    d = knp.sqrt(knp.diagonal(c))
    r = knp.clip(knp.divide(c, knp.outer(d, d)), -1.0, 1.0)
    return r[0, 0] if nd == 1 else r


@_export
def correlate(x1, x2, mode="valid"):
    """Like keras.ops.correlate: the cross-correlation of two 1-d tensors,
    c[k] = sum_j x1[k + j] * x2[j], in NumPy's modes 'valid', 'same', 'full'."""
    if mode not in ("valid", "same", "full"):
        raise ValueError(f"[ops.correlate] mode must be 'valid', 'same' or 'full', got "
                         f"{mode!r} (at {user_location()})")
    a, v = tensor(x1), tensor(x2)
    if len(shape_of(a)) != 1 or len(shape_of(v)) != 1:
        raise ValueError(f"[ops.correlate] x1 and x2 must be 1-d, got shapes {shape_of(a)} and "
                         f"{shape_of(v)} (at {user_location()})")
    if not dtype_of(a).startswith(("float", "complex")):
        a = floating(a)
    n, m = shape_of(a)[0], shape_of(v)[0]
    padded = knp.pad(a, [(m - 1, m - 1)])
    idx = np.arange(n + m - 1)[:, None] + np.arange(m)[None, :]
    full = knp.matmul(knp.take(padded, idx.astype("int64")), cast(knp.conj(v), dtype_of(a)))
    if mode == "full":
        return full
    if mode == "valid":
        start, length = builtins.min(n, m) - 1, builtins.max(n, m) - builtins.min(n, m) + 1
    else:
        start, length = ((m - 1) // 2 if n >= m else n // 2), builtins.max(n, m)
    return full[start:start + length]


@_export
def argpartition(x, kth, axis=-1):
    """Like keras.ops.argpartition: indices that put x's kth element in its sorted
    place, smaller ones before and larger after (here: a full stable argsort, a valid
    partition; which indices tie-breaking picks may differ from NumPy's)."""
    x = tensor(x)
    n = shape_of(x)[check_axis("argpartition", axis, len(shape_of(x)))]
    if n is not None and not -n <= int(kth) < n:
        raise ValueError(f"[ops.argpartition] kth {kth} is out of range for an axis of {n} "
                         f"(at {user_location()})")
    return cast(knp.argsort(x, axis=axis), "int32")


@_export
def unravel_index(indices, shape):
    """Like keras.ops.unravel_index: flat indices as a tuple of coordinate tensors."""
    idx = cast(tensor(indices), "int32")
    out = []
    for d in reversed([int(s) for s in shape]):
        out.append(knp.mod(idx, d))
        idx = knp.floor_divide(idx, d)
    return tuple(reversed(out))


@_export
def histogram(x, bins=10, range=None):  # noqa: A002
    """Like keras.ops.histogram on JAX: (counts, edges) of a 1-d x over `bins` equal bins
    of range (x's min and max when None); the last bin includes its right edge;
    counts are floats, as Keras's."""
    x = floating(x)
    if len(shape_of(x)) != 1:
        raise ValueError(f"[ops.histogram] x must be 1-d, got shape {shape_of(x)} "
                         f"(at {user_location()})")
    if not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"[ops.histogram] bins must be a positive int, got {bins!r} "
                         f"(at {user_location()})")
    if range is not None:
        lo, hi = float(range[0]), float(range[1])
        if lo > hi:
            raise ValueError(f"[ops.histogram] range must be (min, max) with min <= max, got "
                             f"{range!r} (at {user_location()})")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = cast(np.linspace(lo, hi, bins + 1), dtype_of(x))
    else:
        lo, hi = knp.min(x), knp.max(x)
        same = knp.equal(lo, hi)
        lo, hi = knp.where(same, knp.subtract(lo, 0.5), lo), knp.where(same, knp.add(hi, 0.5), hi)
        frac = cast(np.linspace(0.0, 1.0, bins + 1), dtype_of(x))
        edges = knp.add(lo, knp.multiply(knp.subtract(hi, lo), frac))
    col = knp.expand_dims(x, -1)
    left = knp.greater_equal(col, edges[:-1])
    last = np.arange(bins) == bins - 1
    right = knp.where(last, knp.less_equal(col, edges[1:]), knp.less(col, edges[1:]))
    counts = knp.sum(cast(knp.logical_and(left, right), dtype_of(x)), axis=0)
    return counts, edges


@_export
def unique(x, sorted=True, return_index=False, return_inverse=False,  # noqa: A002
           return_counts=False, axis=None, size=None, fill_value=None):
    """Like keras.ops.unique: the distinct elements of the flattened x, sorted. With
    `size` (Keras's static-size form, needed inside a model) the result has that many,
    padded with fill_value (None: the smallest element; its first index for
    return_index, 0 counts) or cut. return_index, return_inverse and return_counts add
    those tensors, in that order."""
    if size is None:
        eager_only("unique without size", x)
        a = np.asarray(x)
        r = np.unique(a, return_index=return_index, return_inverse=return_inverse,
                      return_counts=return_counts, axis=axis)
        if not isinstance(r, tuple):
            return r
        out = [r[0]] + [np.asarray(v).reshape(-1).astype("int32") for v in r[1:]]
        if return_inverse and axis is None:  # shaped as x, as Keras on JAX gives it
            out[1 + bool(return_index)] = out[1 + bool(return_index)].reshape(a.shape)
        return tuple(out)
    if axis is not None:
        raise ValueError(f"[ops.unique] axis={axis!r} with size is not supported (at "
                         f"{user_location()})")
    if not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"[ops.unique] size must be a positive int, got {size!r} (at "
                         f"{user_location()})")
    flat = knp.reshape(tensor(x), (-1,))
    perm = knp.argsort(flat)
    srt = knp.take(flat, perm)
    first = knp.concatenate([knp.ones((1,), "bool"),
                             knp.not_equal(srt[1:], srt[:-1])])
    rank = knp.subtract(knp.cumsum(cast(first, "int32")), 1)
    slot = knp.equal(knp.expand_dims(np.arange(size, dtype="int32"), -1), rank)  # (size, n)
    pick = knp.logical_and(slot, first)
    found = knp.any(pick, axis=-1)
    dt = dtype_of(flat)
    fill = srt[0] if fill_value is None else cast(fill_value, dt)
    values = knp.where(found, knp.sum(knp.where(pick, srt, knp.zeros_like(srt)), axis=-1), fill)
    out = [cast(values, dt)]
    if return_index:
        firsts = knp.sum(knp.where(pick, cast(perm, "int32"), 0), axis=-1)
        out.append(cast(knp.where(found, firsts, cast(perm[0], "int32")), "int32"))
    if return_inverse:
        shape = tuple(-1 if d is None else d for d in shape_of(x))
        out.append(knp.reshape(cast(knp.take(rank, knp.argsort(perm)), "int32"), shape))
    if return_counts:
        out.append(cast(knp.sum(cast(slot, "int32"), axis=-1), "int32"))
    return out[0] if len(out) == 1 else tuple(out)


@_export
def vectorize(pyfunc, *, excluded=None, signature=None):
    """Like keras.ops.vectorize: pyfunc applied to every element (with signature,
    every core block) of its inputs. On arrays it loops as numpy.vectorize does;
    on symbolic tensors pyfunc is called once on the whole tensors, so it must be
    written with broadcasting ops (elementwise ones, or ones on the trailing core axes)."""
    if not callable(pyfunc):
        raise ValueError(f"[ops.vectorize] pyfunc must be callable, got {pyfunc!r}")
    excluded = set(excluded or ())

    def run(*args, **kwargs):
        if is_symbolic(args, kwargs):
            return pyfunc(*args, **kwargs)
        vf = np.vectorize(lambda *a, **k: np.asarray(pyfunc(*a, **k)), excluded=excluded,
                          signature=signature, otypes=None)
        return _f32(vf(*[eager_value(a) for a in args], **kwargs))

    run.__name__ = getattr(pyfunc, "__name__", "vectorized")
    run.__doc__ = pyfunc.__doc__
    return run


@_export
def view(x, dtype=None):
    """Like keras.ops.view: x's bytes read as another dtype (eager: arrays only)."""
    eager_only("view", x)
    a = np.asarray(x)
    return a if dtype is None else a.view(_dtype_name(dtype))


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
    # (height and width symbolic ints when unknown: edsr's Input((None, None, 3)))
    _, h, w, c = static_or_symbolic_shape(x)
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
    sa, sb = shape_of(a), shape_of(b)
    # (an axis unknown while a model is built, the batch, matches any size: nerf's labels of
    # the PyDataset's batch against the rendering's fixed batch)
    if len(sa) != len(sb) or any(p is not None and q is not None and p != q
                                 for p, q in zip(sa, sb)):
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
