"""NumPy functions that @tessera.jit translates from their definitions here.

Each is written in the NumPy subset the jit translates, from NumPy's documented
semantics (the same defaults, result dtypes and errors), so a call
``np.convolve(a, v)`` in a jit function is this ``convolve`` translated into the
program like a helper of the user's own. The translator gives no line marks
inside these functions: an error raised here names the user's call.
LIBRARY maps NumPy's name to the function (python/tessera/_calls.py looks it
up before the primitives, so names that are also list primitives, append and
insert, get NumPy's meaning).
"""

from __future__ import annotations

import numpy as np

from ._numpy_apply_lib import (_extreme_by_key, _math_comb, _math_erf, _math_erfc,
                               _math_factorial, _math_gcd, _math_isclose, _math_isqrt,
                               _math_lcm, _math_perm,
                               _sorted_by_key, _vectorize1, _vectorize2, _vectorize3,
                               apply_along_axis, apply_over_axes, fromfunction, histogram2d,
                               histogramdd, piecewise, sliding_window_view)

# ---------------------------------------------------------------- convolution


def _convolve_valid(a, v, lo, out_n):
    """sum over k of v[m-1-k] * a_padded[...]: the convolution of a and v
    (len(v) <= len(a)) starting `lo` elements before a's first element."""
    m = v.shape[0]
    zeros = np.zeros(m - 1, a.dtype)
    padded = np.concatenate((zeros, a, zeros))
    start = m - 1 - lo
    out = padded[start:start + out_n] * v[m - 1]
    for k in range(1, m):
        out = out + padded[start + k:start + k + out_n] * v[m - 1 - k]
    return out


def convolve(a, v, mode="full"):
    a = np.ravel(np.asarray(a))
    v = np.ravel(np.asarray(v))
    if a.shape[0] == 0:
        raise ValueError("[np.convolve] a cannot be empty")
    if v.shape[0] == 0:
        raise ValueError("[np.convolve] v cannot be empty")
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    n = a.shape[0]
    m = v.shape[0]
    if mode == "full":
        return _convolve_valid(a, v, m - 1, n + m - 1)
    if mode == "same":
        return _convolve_valid(a, v, m // 2, n)
    if mode == "valid":
        return _convolve_valid(a, v, 0, n - m + 1)
    raise ValueError("[np.convolve] mode must be 'full', 'same' or 'valid', got " + str(mode))


def correlate(a, v, mode="valid"):
    a = np.ravel(np.asarray(a))
    v = np.ravel(np.asarray(v))
    if a.shape[0] == 0:
        raise ValueError("[np.correlate] a cannot be empty")
    if v.shape[0] == 0:
        raise ValueError("[np.correlate] v cannot be empty")
    # correlate(a, v)[k] = sum_n a[n + k] * conj(v[n]): the convolution with v reversed;
    # with v the longer, NumPy's result is the reverse of correlate(v, a)
    swapped = v.shape[0] > a.shape[0]
    if swapped:
        a, v = v, a
    n = a.shape[0]
    m = v.shape[0]
    w = np.conj(v[::-1]) if not swapped else v[::-1]
    if swapped:
        a = np.conj(a)
    if mode == "full":
        out = _convolve_valid(a, w, m - 1, n + m - 1)
    elif mode == "same":
        out = _convolve_valid(a, w, m // 2, n)
    elif mode == "valid":
        out = _convolve_valid(a, w, 0, n - m + 1)
    else:
        raise ValueError("[np.correlate] mode must be 'full', 'same' or 'valid', got " +
                         str(mode))
    if swapped:
        return out[::-1]
    return out


# ---------------------------------------------------------------- polynomials


def polyval(p, x):
    p = np.asarray(p)
    x = np.asarray(x)
    y = np.zeros_like(x)
    for k in range(p.shape[0]):
        y = y * x + p[k]
    return y


def vander(x, N=None, increasing=False):  # noqa: N803 - NumPy's name
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError("[np.vander] x must be a one-dimensional array or sequence, got " +
                         str(x.ndim) + " dimensions")
    n = x.shape[0] if N is None else N
    powers = np.arange(n)
    if not increasing:
        powers = powers[::-1]
    return np.power(np.reshape(x, (-1, 1)), powers)


# ---------------------------------------------------------------- histograms


def digitize(x, bins, right=False):
    x = np.asarray(x)
    bins = np.asarray(bins)
    if bins.ndim != 1:
        raise ValueError("[np.digitize] bins must be one-dimensional")
    side = "left" if right else "right"
    if bins.shape[0] > 1 and bins[-1] < bins[0]:
        return bins.shape[0] - np.searchsorted(bins[::-1], x, side=side)
    return np.searchsorted(bins, x, side=side)


def interp(x, xp, fp, left=None, right=None):
    x = np.asarray(x)
    xp = np.asarray(xp, dtype=np.float64)
    fp = np.asarray(fp)
    if xp.ndim != 1 or fp.ndim != 1:
        raise ValueError("[np.interp] xp and fp must be one-dimensional")
    if xp.shape[0] != fp.shape[0]:
        raise ValueError("[np.interp] fp and xp are not of the same length: " +
                         str(fp.shape[0]) + " and " + str(xp.shape[0]))
    if xp.shape[0] == 0:
        raise ValueError("[np.interp] array of sample points is empty")
    xf = np.asarray(x, dtype=np.float64)
    n = xp.shape[0]
    j = np.clip(np.searchsorted(xp, xf, side="right") - 1, 0, max(n - 2, 0))
    j1 = np.minimum(j + 1, n - 1)
    dx = xp[j1] - xp[j]
    slope = np.where(dx != 0, (fp[j1] - fp[j]) / np.where(dx != 0, dx, 1.0), 0.0)
    out = slope * (xf - xp[j]) + fp[j]
    # NumPy's exact values at the sample points (its slope * 0 + fp[j])
    out = np.where(xf == xp[j1], fp[j1], out)
    lo = fp[0] if left is None else left
    hi = fp[-1] if right is None else right
    out = np.where(xf < xp[0], lo, out)
    out = np.where(xf > xp[-1], hi, out)
    return out


# ---------------------------------------------------------------- sets


def setdiff1d(ar1, ar2, assume_unique=False):
    a = np.ravel(np.asarray(ar1)) if assume_unique else np.unique(ar1)
    return a[np.logical_not(np.isin(a, ar2))]


def union1d(ar1, ar2):
    return np.unique(np.concatenate((np.ravel(np.asarray(ar1)), np.ravel(np.asarray(ar2)))))


def intersect1d(ar1, ar2, assume_unique=False):
    a = np.ravel(np.asarray(ar1)) if assume_unique else np.unique(ar1)
    b = np.ravel(np.asarray(ar2)) if assume_unique else np.unique(ar2)
    aux = np.sort(np.concatenate((a, b)))
    return aux[:-1][aux[1:] == aux[:-1]]


def setxor1d(ar1, ar2, assume_unique=False):
    a = np.ravel(np.asarray(ar1)) if assume_unique else np.unique(ar1)
    b = np.ravel(np.asarray(ar2)) if assume_unique else np.unique(ar2)
    aux = np.sort(np.concatenate((a, b)))
    if aux.shape[0] == 0:
        return aux
    flag = np.concatenate((np.array([True]), aux[1:] != aux[:-1], np.array([True])))
    return aux[flag[1:] & flag[:-1]]


# ---------------------------------------------------------------- building arrays


def append(arr, values, axis=None):
    arr = np.asarray(arr)
    if axis is None:
        return np.concatenate((np.ravel(arr), np.ravel(np.asarray(values))))
    return np.concatenate((arr, values), axis=axis)


def insert(arr, obj, values, axis=None):
    arr = np.asarray(arr)
    if axis is None:
        arr = np.ravel(arr)
        axis = 0
    axis = axis % arr.ndim
    n = arr.shape[axis]
    idx = np.asarray(obj)
    if idx.ndim == 0:
        i = int(idx)
        if i < -n or i > n:
            raise IndexError("[np.insert] index " + str(i) + " is out of bounds for axis " +
                             str(axis) + " with size " + str(n))
        if i < 0:
            i = i + n
        v = np.asarray(values)
        while v.ndim < arr.ndim:
            v = np.expand_dims(v, 0)
        v = np.moveaxis(v, 0, axis)
        shape = list(arr.shape)
        shape[axis] = v.shape[axis]
        v = np.broadcast_to(v, tuple(shape)).astype(arr.dtype)
        return np.concatenate((np.take(arr, np.arange(i), axis=axis), v,
                               np.take(arr, np.arange(i, n), axis=axis)), axis=axis)
    if arr.ndim != 1:
        raise NotImplementedError("[np.insert] a sequence of indices is supported on "
                                  "one-dimensional arrays (or axis=None) only")
    idx = np.ravel(idx)
    if np.any(idx < -n) or np.any(idx > n):
        raise IndexError("[np.insert] an index is out of bounds for axis 0 with size " + str(n))
    idx = np.where(idx < 0, idx + n, idx)
    order = np.argsort(idx, kind="stable")
    k = idx.shape[0]
    pos = idx[order] + np.arange(k)
    v = np.broadcast_to(np.ravel(np.asarray(values)), (k,)).astype(arr.dtype)
    out = np.zeros(n + k, arr.dtype)
    keep = np.ones(n + k, dtype=bool)
    keep[pos] = False
    out[pos] = v[order]
    out[keep] = arr
    return out


def column_stack(tup):
    cols = []
    for a in tup:
        a = np.asarray(a)
        if a.ndim < 2:
            a = np.reshape(a, (-1, 1))
        cols.append(a)
    return np.concatenate(cols, axis=1)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None):
    y = np.linspace(start, stop, num=num, endpoint=endpoint)
    if dtype is None:
        return np.power(base, y)
    return np.power(base, y).astype(dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None):
    if start == 0 or stop == 0:
        raise ValueError("[np.geomspace] geometric sequence cannot include zero")
    sign = 1.0
    if start < 0 and stop < 0:
        sign = -1.0
        start = -start
        stop = -stop
    if start < 0 or stop < 0:
        raise ValueError("[np.geomspace] start and stop must have the same sign for a real "
                         "sequence")
    out = np.power(10.0, np.linspace(np.log10(start), np.log10(stop), num=num,
                                     endpoint=endpoint))
    if num > 0:
        out[0] = start
        if endpoint and num > 1:
            out[-1] = stop
    out = sign * out
    if dtype is None:
        return out
    return out.astype(dtype)


def tril_indices(n, k=0, m=None):
    return np.nonzero(np.tri(n, m, k, dtype=bool))


def triu_indices(n, k=0, m=None):
    return np.nonzero(np.logical_not(np.tri(n, m, k - 1, dtype=bool)))


def tril_indices_from(arr, k=0):
    if arr.ndim != 2:
        raise ValueError("[np.tril_indices_from] input array must be 2-d")
    return tril_indices(arr.shape[-2], k, arr.shape[-1])


def triu_indices_from(arr, k=0):
    if arr.ndim != 2:
        raise ValueError("[np.triu_indices_from] input array must be 2-d")
    return triu_indices(arr.shape[-2], k, arr.shape[-1])


def fliplr(m):
    m = np.asarray(m)
    if m.ndim < 2:
        raise ValueError("[np.fliplr] input must be >= 2-d")
    return np.flip(m, axis=1)


def flipud(m):
    m = np.asarray(m)
    if m.ndim < 1:
        raise ValueError("[np.flipud] input must be >= 1-d")
    return np.flip(m, axis=0)


def rot90(m, k=1, axes=(0, 1)):
    m = np.asarray(m)
    a0 = axes[0] % m.ndim
    a1 = axes[1] % m.ndim
    if a0 == a1:
        raise ValueError("[np.rot90] axes must be different")
    k = k % 4
    if k == 0:
        return m
    if k == 2:
        return np.flip(np.flip(m, a0), a1)
    if k == 1:
        return np.swapaxes(np.flip(m, a1), a0, a1)
    return np.flip(np.swapaxes(m, a0, a1), a1)


def resize(a, new_shape):
    a = np.ravel(np.asarray(a))
    if np.any(np.asarray(new_shape) < 0):
        raise ValueError("[np.resize] all elements of new_shape must be non-negative")
    total = int(np.prod(np.asarray(new_shape)))
    if a.shape[0] == 0 or total == 0:
        return np.zeros(new_shape, a.dtype)
    reps = -(-total // a.shape[0])
    return np.reshape(np.tile(a, reps)[:total], new_shape)


def compress(condition, a, axis=None):
    a = np.asarray(a)
    if axis is None:
        a = np.ravel(a)
        axis = 0
    cond = np.ravel(np.asarray(condition))
    if cond.shape[0] > a.shape[axis]:
        raise IndexError("[np.compress] condition has " + str(cond.shape[0]) +
                         " elements, more than axis " + str(axis) + "'s " +
                         str(a.shape[axis]))
    return np.take(a, np.nonzero(cond)[0], axis=axis)


def delete(arr, obj, axis=None):
    arr = np.asarray(arr)
    if axis is None:
        arr = np.ravel(arr)
        axis = 0
    keep = np.ones(arr.shape[axis], dtype=bool)
    keep[obj] = False
    return np.take(arr, np.nonzero(keep)[0], axis=axis)


def trim_zeros(filt, trim="fb"):
    filt = np.asarray(filt)
    nz = np.flatnonzero(filt)
    if nz.shape[0] == 0:
        return filt[:0]
    first = nz[0] if ("f" in trim or "F" in trim) else 0
    last = nz[-1] + 1 if ("b" in trim or "B" in trim) else filt.shape[0]
    return filt[first:last]


def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError("[np.select] list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("[np.select] select with an empty condition list is not possible")
    out = np.asarray(default)
    for k in range(len(condlist) - 1, -1, -1):
        out = np.where(condlist[k], choicelist[k], out)
    return out


# ---------------------------------------------------------------- elementwise


def logaddexp(x1, x2):
    x1 = np.asarray(x1)
    x2 = np.asarray(x2)
    big = np.maximum(x1, x2)
    small = np.minimum(x1, x2)
    out = big + np.log1p(np.exp(small - big))
    out = np.where(x1 == x2, x1 + np.log(2.0), out)  # also +inf + +inf
    return np.where(np.isnan(x1) | np.isnan(x2), x1 + x2, out)


def logaddexp2(x1, x2):
    x1 = np.asarray(x1)
    x2 = np.asarray(x2)
    big = np.maximum(x1, x2)
    small = np.minimum(x1, x2)
    out = big + np.log1p(np.exp2(small - big)) / np.log(2.0)
    out = np.where(x1 == x2, x1 + 1.0, out)
    return np.where(np.isnan(x1) | np.isnan(x2), x1 + x2, out)


def heaviside(x1, x2):
    x1 = np.asarray(x1)
    out = np.where(x1 < 0, 0.0, np.where(x1 > 0, 1.0, x2))
    return np.where(np.isnan(x1), x1, out)


def fmod(x1, x2):
    # C's fmod: the remainder with the dividend's sign, which NumPy's mod of the
    # magnitudes gives exactly (no adjustment is needed when both are positive)
    x1 = np.asarray(x1)
    x2 = np.asarray(x2)
    r = np.mod(np.abs(x1), np.abs(x2))
    return np.where(x1 < 0, -r, r)


def divmod(x1, x2):  # noqa: A001 - NumPy's name
    return np.floor_divide(x1, x2), np.mod(x1, x2)


def ldexp(x1, x2):
    return x1 * np.exp2(np.asarray(x2, dtype=np.float64))


def unwrap(p, discont=None, axis=-1, period=6.283185307179586):
    p = np.asarray(p)
    dd = np.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    high = period / 2
    ddmod = np.mod(dd + high, period) - high
    ddmod = np.where((ddmod == -high) & (dd > 0), high, ddmod)
    correction = np.where(np.abs(dd) < discont, 0.0, ddmod - dd)
    first = np.take(p, np.arange(1), axis=axis)
    return np.concatenate((first, np.take(p, np.arange(1, p.shape[axis]), axis=axis) +
                           np.cumsum(correction, axis=axis)), axis=axis)


# ---------------------------------------------------------------- statistics


def cov(m, y=None, rowvar=True, bias=False, ddof=None):
    x = np.asarray(m, dtype=np.float64)
    if x.ndim > 2:
        raise ValueError("[np.cov] m has more than 2 dimensions")
    if x.ndim < 2:
        x = np.reshape(x, (1, -1))
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        yy = np.asarray(y, dtype=np.float64)
        if yy.ndim < 2:
            yy = np.reshape(yy, (1, -1))
        if not rowvar and yy.shape[0] != 1:
            yy = yy.T
        x = np.concatenate((x, yy), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    fact = n - ddof
    avg = np.mean(x, axis=1)
    xc = x - avg[:, None]
    c = np.dot(xc, xc.T.conj()) / fact
    if c.shape[0] == 1:
        return c[0, 0]
    return c


def corrcoef(x, y=None, rowvar=True):
    c = cov(x, y, rowvar)
    if np.ndim(c) == 0:
        return c / c
    d = np.diag(c)
    stddev = np.sqrt(d)
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


# ---------------------------------------------------------------- histograms and sorting


def histogram(a, bins=10, range=None, density=None, weights=None):  # noqa: A002 - NumPy's name
    a = np.ravel(np.asarray(a))
    w = None if weights is None else np.ravel(np.asarray(weights))
    if w is not None and w.shape[0] != a.shape[0]:
        raise ValueError("[np.histogram] weights should have the same shape as a")
    if np.ndim(bins) == 1:
        edges = np.asarray(bins)
        if np.any(edges[1:] < edges[:-1]):
            raise ValueError("[np.histogram] bins must increase monotonically, when an array")
        order = np.argsort(a, kind="stable")
        sa = a[order]
        lo = np.searchsorted(sa, edges[:-1], side="left")
        hi = np.searchsorted(sa, edges[-1:], side="right")
        cut = np.concatenate((lo, hi))
        if w is None:
            n = np.diff(cut)
        else:
            cw = np.concatenate((np.zeros(1, w.dtype), np.cumsum(w[order])))
            n = np.diff(cw[cut])
    else:
        if bins < 1:
            raise ValueError("[np.histogram] bins must be a positive integer, got " + str(bins))
        if range is None:
            if a.shape[0] == 0:
                first = 0.0
                last = 1.0
            else:
                first = a.min() + 0.0
                last = a.max() + 0.0
        else:
            first = range[0] + 0.0
            last = range[1] + 0.0
            if first > last:
                raise ValueError("[np.histogram] max must be larger than min in range parameter")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError("[np.histogram] autodetected range of [" + str(first) + ", " +
                             str(last) + "] is not finite")
        if first == last:
            first = first - 0.5
            last = last + 0.5
        edges = np.linspace(first, last, bins + 1)
        keep = (a >= first) & (a <= last)
        t = a[keep]
        f = (t - first) * (bins / (last - first))
        idx = f.astype(np.intp)
        idx = np.where(idx == bins, bins - 1, idx)
        idx = np.where(t < edges[idx], idx - 1, idx)
        idx = np.where((t >= edges[idx + 1]) & (idx != bins - 1), idx + 1, idx)
        if w is None:
            n = np.bincount(idx, minlength=bins)
        else:
            n = np.bincount(idx, weights=w[keep], minlength=bins)
    if density:
        db = np.diff(edges).astype(np.float64)
        return n / db / n.sum(), edges
    return n, edges


def lexsort(keys, axis=-1):
    if axis != -1:
        raise NotImplementedError("[np.lexsort] axis other than -1 is not supported by "
                                  "tessera.jit")
    idx = np.argsort(keys[0], kind="stable")
    for k in range(1, len(keys)):
        idx = idx[np.argsort(keys[k][idx], kind="stable")]
    return idx


def _partition_args(a, kth, axis, name):
    """a (flattened for axis None) and its axis, kth checked against the axis's length."""
    a = np.asarray(a)
    if axis is None:
        a = np.ravel(a)
        axis = -1
    n = a.shape[axis]
    if np.any(np.asarray(kth) >= n) or np.any(np.asarray(kth) < -n):
        raise ValueError("[np." + name + "] kth(=" + str(kth) + ") out of bounds (" + str(n) +
                         ")")
    return a, axis


def partition(a, kth, axis=-1):
    # NumPy leaves the order within each side undefined: the sorted array is one such order
    a, axis = _partition_args(a, kth, axis, "partition")
    return np.sort(a, axis=axis)


def argpartition(a, kth, axis=-1):
    a, axis = _partition_args(a, kth, axis, "argpartition")
    return np.argsort(a, axis=axis)


# ---------------------------------------------------------------- calculus and fitting


def polyfit(x, y, deg, rcond=None):
    x = np.asarray(x) + 0.0
    y = np.asarray(y) + 0.0
    if deg < 0:
        raise ValueError("[np.polyfit] expected deg >= 0, got " + str(deg))
    if x.ndim != 1:
        raise TypeError("[np.polyfit] expected 1D vector for x")
    if x.shape[0] == 0:
        raise TypeError("[np.polyfit] expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("[np.polyfit] expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("[np.polyfit] expected x and y to have same length")
    if rcond is None:
        rcond = x.shape[0] * 2.220446049250313e-16
    lhs = vander(x, deg + 1)
    scale = np.sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale
    c = np.linalg.lstsq(lhs, y, rcond)[0]
    return (c.T / scale).T


def _gradient_axis(f, h, axis, edge_order):
    g = np.moveaxis(f, axis, 0)
    n = g.shape[0]
    if n < edge_order + 1:
        raise ValueError("[np.gradient] shape of the array too small to calculate a numerical "
                         "gradient, at least (edge_order + 1) elements are required")
    inner = (g[2:] - g[:-2]) / (2.0 * h)
    if edge_order == 1:
        first = (g[1:2] - g[0:1]) / h
        last = (g[n - 1:n] - g[n - 2:n - 1]) / h
    else:
        first = (-1.5 * g[0:1] + 2.0 * g[1:2] - 0.5 * g[2:3]) / h
        last = (0.5 * g[n - 3:n - 2] - 2.0 * g[n - 2:n - 1] + 1.5 * g[n - 1:n]) / h
    return np.moveaxis(np.concatenate((first, inner, last)), 0, axis)


def gradient(f, spacing=1.0, *, axis=None, edge_order=1):
    f = np.asarray(f)
    if edge_order != 1 and edge_order != 2:
        raise ValueError("[np.gradient] 'edge_order' greater than 2 not supported")
    if np.ndim(spacing) != 0:
        raise NotImplementedError("[np.gradient] coordinates given as an array are not "
                                  "supported by tessera.jit: give one scalar spacing")
    f = f * 1.0  # integers as float64, floats kept
    if axis is None:
        if f.ndim == 1:
            return _gradient_axis(f, spacing, 0, edge_order)
        return tuple([_gradient_axis(f, spacing, k, edge_order) for k in range(f.ndim)])
    return _gradient_axis(f, spacing, axis, edge_order)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = np.asarray(y)
    a = np.moveaxis(y, axis, -1)
    mid = (a[..., 1:] + a[..., :-1]) / 2.0
    if x is None:
        return (dx * mid).sum(axis=-1)
    d = np.diff(np.asarray(x))
    if d.ndim != 1:
        d = np.moveaxis(d, axis, -1)
    return (d * mid).sum(axis=-1)


# ---------------------------------------------------------------- splitting and indices


def array_split(ary, indices_or_sections, axis=0):
    ary = np.asarray(ary)
    if np.ndim(indices_or_sections) != 0:
        return np.split(ary, indices_or_sections, axis=axis)
    sections = int(indices_or_sections)
    if sections <= 0:
        raise ValueError("[np.array_split] number sections must be larger than 0.")
    n = ary.shape[axis]
    each = n // sections
    extras = n % sections
    points = []
    at = 0
    for k in range(sections - 1):
        at = at + each + (1 if k < extras else 0)
        points.append(at)
    return np.split(ary, points, axis=axis)


def hsplit(ary, indices_or_sections):
    ary = np.asarray(ary)
    if ary.ndim == 0:
        raise ValueError("[np.hsplit] only works on arrays of 1 or more dimensions")
    return np.split(ary, indices_or_sections, axis=1 if ary.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    ary = np.asarray(ary)
    if ary.ndim < 2:
        raise ValueError("[np.vsplit] only works on arrays of 2 or more dimensions")
    return np.split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    ary = np.asarray(ary)
    if ary.ndim < 3:
        raise ValueError("[np.dsplit] only works on arrays of 3 or more dimensions")
    return np.split(ary, indices_or_sections, axis=2)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    if mode != "raise" or order != "C":
        raise NotImplementedError("[np.ravel_multi_index] only mode='raise' and order='C' are "
                                  "supported by tessera.jit")
    if len(multi_index) != len(dims):
        raise ValueError("[np.ravel_multi_index] parameter multi_index must be a sequence of "
                         "length " + str(len(dims)))
    out = np.zeros(np.shape(multi_index[0]), np.intp)
    for k in range(len(dims)):
        i = np.asarray(multi_index[k])
        if np.any(i < 0) or np.any(i >= dims[k]):
            raise ValueError("[np.ravel_multi_index] invalid entry in coordinates array")
        out = out * dims[k] + i
    return out


def unravel_index(indices, shape, order="C"):
    if order != "C":
        raise NotImplementedError("[np.unravel_index] only order='C' is supported by "
                                  "tessera.jit")
    dims = np.atleast_1d(np.asarray(shape))
    size = int(np.prod(dims))
    idx = np.asarray(indices)
    if np.any(idx < 0) or np.any(idx >= size):
        raise ValueError("[np.unravel_index] index " + str(np.max(idx)) +
                         " is out of bounds for array with size " + str(size))
    out = []
    rest = idx.astype(np.intp)
    for k in range(dims.shape[0] - 1, -1, -1):
        out.append(rest % dims[k])
        rest = rest // dims[k]
    return tuple(out[::-1])


# ---------------------------------------------------------------- more elementwise


def cbrt(x):
    x = np.asarray(x)
    want = (x * 1.0).dtype  # integers as float64, floats kept
    a = np.abs(x.astype(np.float64))
    y = np.power(a, 1.0 / 3.0)
    # one Newton step in double rounds pow's cube root to the nearest (cbrt(27) is 3)
    y = np.where((y > 0) & np.isfinite(y), y - (y * y * y - a) / (3.0 * y * y), y)
    return np.copysign(y, x.astype(np.float64)).astype(want)


def _times_exp2(x, e):
    """x * 2**e for integer arrays e, in two exact halves (2**-1074 and 2**1024 overflow)."""
    h = e // 2
    return (x * np.exp2(h.astype(np.float64))) * np.exp2((e - h).astype(np.float64))


def frexp(x):
    x = np.asarray(x)
    x = x * 1.0  # integers as float64, floats kept
    a = np.abs(x)
    ok = (a > 0) & np.isfinite(a)
    safe = np.where(ok, a, 1.0).astype(np.float64)
    e = np.floor(np.log2(safe)).astype(np.int32) + 1
    m = _times_exp2(safe, -e)
    e = np.where(m >= 1.0, e + 1, np.where(m < 0.5, e - 1, e))
    m = _times_exp2(safe, -e)
    return np.where(ok, np.copysign(m, x), x).astype(x.dtype), np.where(ok, e, 0)

# ---------------------------------------------------------------- reductions with where= / initial=
# (np.sum(x, where=m), np.max(x, initial=0): the plain ones are primitives)


def _sum_where(a, axis=None, dtype=None, out=None, keepdims=False, initial=0, where=None):
    a = np.asarray(a)
    s = np.sum(a if where is None else np.where(where, a, 0), axis=axis, dtype=dtype, keepdims=keepdims)
    return s + initial if initial is not None else s


def _prod_where(a, axis=None, dtype=None, out=None, keepdims=False, initial=1, where=None):
    a = np.asarray(a)
    p = np.prod(a if where is None else np.where(where, a, 1), axis=axis, dtype=dtype, keepdims=keepdims)
    return p * initial if initial is not None else p


def _extreme_where(a, axis, keepdims, initial, where, biggest, name):
    a = np.asarray(a)
    if initial is None:
        if where is not None:
            raise ValueError("[np." + name + "] reduction operation '" +
                             ("maximum" if biggest else "minimum") + "' does not have an "
                             "identity, so to use a where mask one has to specify 'initial'")
        filled = a
    else:
        init = np.asarray(initial).astype(a.dtype)
        filled = a if where is None else np.where(where, a, init)
        if filled.size == 0:
            shape = list(np.shape(np.sum(filled, axis=axis, keepdims=keepdims)))
            return np.full(tuple(shape), init, a.dtype)
    if biggest:
        r = np.max(filled, axis=axis, keepdims=keepdims)
        return r if initial is None else np.maximum(r, init)
    r = np.min(filled, axis=axis, keepdims=keepdims)
    return r if initial is None else np.minimum(r, init)


def _max_where(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extreme_where(a, axis, keepdims, initial, where, True, "max")


def _min_where(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extreme_where(a, axis, keepdims, initial, where, False, "min")


def _mean_where(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    a = np.asarray(a)
    mask = np.broadcast_to(np.asarray(True if where is None else where), a.shape)
    s = np.sum(np.where(mask, a, 0), axis=axis, dtype=dtype, keepdims=keepdims)
    n = np.sum(mask, axis=axis, keepdims=keepdims)
    return s / n.astype((s * 1.0).dtype)  # float32 stays float32, integers give float64


def _any_where(a, axis=None, out=None, keepdims=False, where=None):
    return np.any(a if where is None else np.where(where, a, False), axis=axis,
                  keepdims=keepdims)


def _all_where(a, axis=None, out=None, keepdims=False, where=None):
    return np.all(a if where is None else np.where(where, a, True), axis=axis,
                  keepdims=keepdims)


# ---------------------------------------------------------------- pad modes beyond the primitive's

PAD_MODES = ("wrap", "symmetric", "maximum", "minimum", "mean")


def _pad_indices(n, before, after, mode):
    """The source index of each element of the padded axis (wrap, symmetric)."""
    i = np.arange(-before, n + after)
    if mode == "wrap":
        return np.mod(i, n)
    m = np.mod(i, 2 * n)
    return np.where(m < n, m, 2 * n - 1 - m)


def pad(array, pad_width, mode="constant", stat_length=None):
    a = np.asarray(array)
    widths = np.broadcast_to(np.asarray(pad_width), (a.ndim, 2))
    if np.any(widths < 0):
        raise ValueError("[np.pad] index can't contain negative values")
    if stat_length is not None:
        raise NotImplementedError("[np.pad] stat_length is not supported by tessera.jit")
    for ax in range(a.ndim):
        before = int(widths[ax, 0])
        after = int(widths[ax, 1])
        n = a.shape[ax]
        if before == 0 and after == 0:
            continue
        if n == 0:
            raise ValueError("[np.pad] can't extend empty axis " + str(ax) + " using modes "
                             "other than 'constant' or 'empty'")
        if mode == "wrap" or mode == "symmetric":
            a = np.take(a, _pad_indices(n, before, after, mode), axis=ax)
        else:
            if mode == "maximum":
                stat = np.max(a, axis=ax, keepdims=True)
            elif mode == "minimum":
                stat = np.min(a, axis=ax, keepdims=True)
            else:
                stat = np.mean(a, axis=ax, keepdims=True)
                if (a * 1.0).dtype != a.dtype:  # integers: the mean rounded, as NumPy's
                    stat = np.round(stat)
                stat = stat.astype(a.dtype)
            shape_b = list(a.shape)
            shape_b[ax] = before
            shape_a = list(a.shape)
            shape_a[ax] = after
            a = np.concatenate((np.broadcast_to(stat, tuple(shape_b)), a,
                                np.broadcast_to(stat, tuple(shape_a))), axis=ax)
    return a


LIBRARY = {f.__name__: f for f in (
    convolve, correlate, polyval, vander, digitize, interp, setdiff1d, union1d, intersect1d,
    setxor1d, append, insert, column_stack, logspace, geomspace, tril_indices, triu_indices,
    tril_indices_from, triu_indices_from, fliplr, flipud, rot90, resize, compress, delete,
    trim_zeros,
    select, logaddexp, logaddexp2, heaviside, fmod, divmod, ldexp, unwrap, cov, corrcoef,
    histogram, lexsort, partition, argpartition, polyfit, gradient, trapezoid, array_split,
    hsplit, vsplit, dsplit, ravel_multi_index, unravel_index, cbrt, frexp, piecewise,
    apply_along_axis, apply_over_axes, histogramdd, histogram2d, fromfunction)}
LIBRARY["trapz"] = trapezoid  # NumPy 1's name
# used by _calls.py only for the calls the primitives do not cover (where=, initial=, pad modes,
# np.vectorize, max/min/sorted with key=)
SPECIAL = {f.__name__: f for f in (
    _vectorize1, _vectorize2, _vectorize3, _extreme_by_key, _sorted_by_key, _math_isclose,
    _math_erf, _math_erfc, _math_factorial, _math_perm, _math_comb, _math_gcd, _math_lcm,
    _math_isqrt, sliding_window_view,
    _sum_where, _prod_where, _max_where, _min_where, _mean_where, _any_where, _all_where, pad)}
SPECIAL.update({"_amax_where": _max_where, "_amin_where": _min_where})
