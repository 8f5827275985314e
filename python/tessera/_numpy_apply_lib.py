"""Functions over arrays (np.piecewise, np.vectorize, np.apply_along_axis,
np.apply_over_axes, np.histogramdd, np.histogram2d, np.fromfunction), math.isclose
and Python's max/min/sorted with key=, written in the NumPy subset the jit
translates: tessera's NumPy library (_numpy_lib.py, which lists them in LIBRARY
and SPECIAL), one copy translated per call site (_translate.include_library)."""

from __future__ import annotations

import math

import numpy as np

import tessera

# ---------------------------------------------------------------- functions over arrays


def piecewise(x, condlist, funclist):
    x = np.asarray(x)
    n2 = len(funclist)
    # one condition (a bool, or an array of conditions for x's elements) is a list of one
    if isinstance(condlist, (bool, int, float)) or (
            not isinstance(condlist[0], (list, np.ndarray)) and x.ndim != 0):
        condlist = [condlist]
    conds = np.asarray(condlist, dtype=bool)
    n = len(conds)
    if n == n2 - 1:
        conds = np.concatenate((conds, ~np.any(conds, axis=0, keepdims=True)), axis=0)
        n = n + 1
    elif n != n2:
        raise ValueError("[np.piecewise] with " + str(n) + " condition(s), either " + str(n) +
                         " or " + str(n + 1) + " functions are expected")
    y = np.zeros_like(x)
    for k in range(n):
        cond = conds[k]
        func = funclist[k]
        if not callable(func):
            y[cond] = func
        else:
            vals = x[cond]
            if vals.size > 0:
                y[cond] = func(vals)
    return y


def _vectorize_out(first, otype, n):
    """The flat result of np.vectorize: dtype otype, or that of the first value."""
    if otype is None:
        return np.zeros(n, np.asarray(first).dtype)
    return np.zeros(n, otype)


def _vectorize_empty(shape, otype):
    if otype is None:
        raise ValueError("[np.vectorize] cannot call `vectorize` on size 0 inputs unless "
                         "`otypes` is set")
    return np.zeros(shape, otype)


def _vectorize1(pyfunc, otype, a):
    # As NumPy: the dtype is that of pyfunc of the first element (a NumPy scalar), the
    # values pyfunc of each element as a Python scalar (an object array's items)
    a = np.asarray(a)
    flat = np.ravel(a)
    n = flat.shape[0]
    if n == 0:
        return _vectorize_empty(a.shape, otype)
    out = _vectorize_out(pyfunc(flat[0]), otype, n)
    for i in range(n):
        out[i] = pyfunc(flat.item(i))
    return out.reshape(a.shape)


def _vectorize2(pyfunc, otype, a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    shape = (np.zeros(a.shape, np.bool_) | np.zeros(b.shape, np.bool_)).shape
    fa = np.ravel(np.broadcast_to(a, shape))
    fb = np.ravel(np.broadcast_to(b, shape))
    n = fa.shape[0]
    if n == 0:
        return _vectorize_empty(shape, otype)
    out = _vectorize_out(pyfunc(fa[0], fb[0]), otype, n)
    for i in range(n):
        out[i] = pyfunc(fa.item(i), fb.item(i))
    return out.reshape(shape)


def _vectorize3(pyfunc, otype, a, b, c):
    a = np.asarray(a)
    b = np.asarray(b)
    c = np.asarray(c)
    shape = (np.zeros(a.shape, np.bool_) | np.zeros(b.shape, np.bool_) |
             np.zeros(c.shape, np.bool_)).shape
    fa = np.ravel(np.broadcast_to(a, shape))
    fb = np.ravel(np.broadcast_to(b, shape))
    fc = np.ravel(np.broadcast_to(c, shape))
    n = fa.shape[0]
    if n == 0:
        return _vectorize_empty(shape, otype)
    out = _vectorize_out(pyfunc(fa[0], fb[0], fc[0]), otype, n)
    for i in range(n):
        out[i] = pyfunc(fa.item(i), fb.item(i), fc.item(i))
    return out.reshape(shape)


def apply_along_axis(func1d, axis, arr):
    arr = np.asarray(arr)
    nd = arr.ndim
    if axis < -nd or axis >= nd:
        raise IndexError("[np.apply_along_axis] axis " + str(axis) +
                         " is out of bounds for array of dimension " + str(nd))
    if axis < 0:
        axis = axis + nd
    view = np.moveaxis(arr, axis, -1)
    outer = view.shape[:-1]
    count = 1
    for d in outer:
        count = count * d
    if count == 0:
        raise ValueError("[np.apply_along_axis] Cannot apply_along_axis when any iteration "
                         "dimensions are 0")
    lanes = np.reshape(view, (count, view.shape[-1]))
    first = np.asarray(func1d(lanes[0]))
    buff = np.zeros((count,) + first.shape, first.dtype)
    buff[0] = first
    for i in range(1, count):
        buff[i] = func1d(lanes[i])
    buff = np.reshape(buff, outer + first.shape)
    # the result's axes take the place of `axis`
    rd = first.ndim
    order = list(range(axis)) + list(range(nd - 1, nd - 1 + rd)) + list(range(axis, nd - 1))
    return np.transpose(buff, order)


def apply_over_axes(func, a, axes):
    val = np.asarray(a)
    n = val.ndim
    if np.ndim(axes) == 0:
        axes = [axes]
    for axis in axes:
        if axis < 0:
            axis = n + axis
        res = func(val, axis)
        if np.ndim(res) == val.ndim:
            val = np.asarray(res)
        else:
            res = np.expand_dims(res, axis)
            if res.ndim == val.ndim:
                val = res
            else:
                raise ValueError("[np.apply_over_axes] function is not returning an array of "
                                 "the correct shape")
    return val


def _is_sequence(b) -> bool:
    return isinstance(b, (list, tuple)) or (isinstance(b, np.ndarray) and b.ndim > 0)


def _outer_edges(a, rng, i):
    """The first and last edge of dimension i's bins (histogramdd's rule)."""
    if rng is not None:
        first = rng[0] + 0.0
        last = rng[1] + 0.0
        if first > last:
            raise ValueError("[np.histogramdd] max must be larger than min in range parameter.")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError("[np.histogramdd] supplied range of [" + str(first) + ", " +
                             str(last) + "] is not finite")
    elif a.shape[0] == 0:
        first = 0.0
        last = 1.0
    else:
        first = a.min() + 0.0
        last = a.max() + 0.0
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError("[np.histogramdd] autodetected range of [" + str(first) + ", " +
                             str(last) + "] is not finite")
    if first == last:
        first = first - 0.5
        last = last + 0.5
    return first, last


def histogramdd(sample, bins=10, range=None, density=None, weights=None):  # noqa: A002
    if isinstance(sample, np.ndarray) and sample.ndim == 2:
        s = sample
    else:
        s = np.atleast_2d(np.asarray(sample)).T
    d = s.shape[1]
    if not _is_sequence(bins):
        bins = [bins] * d
    elif len(bins) != d:
        raise ValueError("[np.histogramdd] The dimension of bins must be equal to the "
                         "dimension of the sample x.")
    if range is None:
        range = [None] * d  # noqa: A001
    elif len(range) != d:
        raise ValueError("[np.histogramdd] range argument must have one entry per dimension")
    edges = []
    nbin = []
    for i in np.arange(d).tolist():
        b = bins[i]
        if np.ndim(b) == 0:
            if b < 1:
                raise ValueError("[np.histogramdd] `bins[" + str(i) +
                                 "]` must be positive, when an integer")
            first, last = _outer_edges(s[:, i], range[i], i)
            e = np.linspace(first, last, b + 1)
        elif np.ndim(b) == 1:
            e = np.asarray(b)
            if np.any(e[:-1] > e[1:]):
                raise ValueError("[np.histogramdd] `bins[" + str(i) +
                                 "]` must be monotonically increasing, when an array")
        else:
            raise ValueError("[np.histogramdd] `bins[" + str(i) +
                             "]` must be a scalar or 1d array")
        edges.append(e)
        nbin.append(e.shape[0] + 1)  # an outlier bin at each end
    flat = np.zeros(s.shape[0], np.intp)
    for i in np.arange(d).tolist():
        e = edges[i]
        c = np.searchsorted(e, s[:, i], side="right")
        # a value on the last edge belongs to the last bin, not to the outliers
        c = np.where(s[:, i] == e[-1], c - 1, c)
        flat = flat * nbin[i] + c
    total = 1
    for m in nbin:
        total = total * m
    if weights is None:
        hist = np.bincount(flat, minlength=total).astype(np.float64)
    else:
        hist = np.bincount(flat, weights=np.ravel(np.asarray(weights)), minlength=total)
        hist = hist.astype(np.float64)
    hist = np.reshape(hist, tuple(nbin))
    for i in np.arange(d).tolist():
        hist = np.take(hist, np.arange(1, nbin[i] - 1), axis=i)
    if density:
        total_count = hist.sum()
        for i in np.arange(d).tolist():
            shape = [1] * d
            shape[i] = nbin[i] - 2
            hist = hist / np.reshape(np.diff(edges[i]), tuple(shape))
        hist = hist / total_count
    return hist, edges


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):  # noqa: A002
    if _is_sequence(bins) and len(bins) != 2:
        bins = [bins, bins]  # one array of edges for both axes
    hist, edges = histogramdd(np.stack((np.ravel(np.asarray(x)), np.ravel(np.asarray(y))),
                                       axis=1), bins, range, density, weights)
    return hist, edges[0], edges[1]


def fromfunction(function, shape, dtype=float):
    n = len(shape)
    if n == 1:
        return function(np.arange(shape[0], dtype=dtype))
    if n == 2:
        g = np.meshgrid(np.arange(shape[0], dtype=dtype), np.arange(shape[1], dtype=dtype),
                        indexing="ij")
        return function(g[0], g[1])
    if n == 3:
        g = np.meshgrid(np.arange(shape[0], dtype=dtype), np.arange(shape[1], dtype=dtype),
                        np.arange(shape[2], dtype=dtype), indexing="ij")
        return function(g[0], g[1], g[2])
    raise NotImplementedError("[np.fromfunction] shapes of other than 1 to 3 dimensions are "
                              "not supported by tessera.jit, got " + str(n))


def _math_isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0):
    """Python's math.isclose."""
    if rel_tol < 0.0 or abs_tol < 0.0:
        raise ValueError("tolerances must be non-negative")
    if a == b:
        return True
    if np.isinf(a) or np.isinf(b):
        return False
    diff = abs(b - a)
    return bool(diff <= abs(rel_tol * b) or diff <= abs(rel_tol * a) or diff <= abs_tol)


def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """np.lib.stride_tricks.sliding_window_view: every window of ``window_shape``
    along ``axis`` (all axes when None), the window axes last. NumPy gives a
    read-only view, and so is this one (window_view: no copy; writeable=True,
    writing through the windows, is refused)."""
    if writeable:
        raise NotImplementedError("[sliding_window_view] writeable=True (writing through "
                                  "overlapping windows) is not supported by tessera.jit")
    x = np.asarray(x)
    shape = [window_shape] if isinstance(window_shape, int) else list(window_shape)
    if axis is None:
        axes = list(range(x.ndim))
        if len(shape) != x.ndim:
            raise ValueError("Since axis is `None`, must provide window_shape for all "
                             "dimensions of `x`; got " + str(len(shape)) +
                             " window_shape elements and `x.ndim` is " + str(x.ndim) + ".")
    else:
        axes = [axis] if isinstance(axis, int) else list(axis)
        if len(shape) != len(axes):
            raise ValueError("Must provide matching length window_shape and axis; got " +
                             str(len(shape)) + " window_shape elements and " +
                             str(len(axes)) + " axes elements.")
    out = x
    for k in range(len(axes)):
        w = shape[k]
        if w < 0:
            raise ValueError("`window_shape` cannot contain negative values")
        ax = axes[k]
        if ax < -x.ndim or ax >= x.ndim:
            raise IndexError("[sliding_window_view] axis " + str(ax) + " is out of bounds for "
                             "array of dimension " + str(x.ndim))
        if ax < 0:
            ax += x.ndim
        n = out.shape[ax]
        if w > n:
            raise ValueError("window shape cannot be larger than input array shape")
        out = tessera.window_view(out, ax, w)
    return out


def _exp_minus_square(x):
    """exp(-x * x) without the rounding of x * x (hi * hi is exact)."""
    hi = math.floor(x * 16.0) / 16.0
    return math.exp(-hi * hi) * math.exp(-(x - hi) * (x + hi))


def _erfc_fraction(x, terms):
    """erfc(x) for x >= 1 by its continued fraction, evaluated from the tail."""
    f = x
    k = terms
    while k > 0:  # (a range of a parameter is checked at run time, a while loop is not)
        f = x + 0.5 * k / f
        k -= 1
    return 0.5641895835477563 * _exp_minus_square(x) / f


def _erf_taylor_table(per_unit=8, terms=12, end=6.0):
    """Taylor coefficients of erf around c = i / per_unit for c in [0, end]:
    row i holds erf(c) and erf's k-th derivative at c over k! (k = 1 .. terms - 1),
    from exp(-x^2)'s coefficients a_n (a_(n+1) = -2 (c a_n + a_(n-1)) / (n + 1), as
    (exp(-x^2))' = -2x exp(-x^2)). Within 1/16 of a centre, 12 terms give erf to 2
    units in the last place (tests/python/test_jit_published_kernels.py)."""
    rows = int(end * per_unit) + 1
    table = np.zeros((rows, terms))
    for i in range(rows):
        c = i / per_unit
        a = [math.exp(-c * c), -2.0 * c * math.exp(-c * c)]
        for n in range(1, terms):
            a.append(-2.0 * (c * a[n] + a[n - 1]) / (n + 1))
        table[i, 0] = math.erf(c)
        for k in range(1, terms):
            table[i, k] = 1.1283791670955126 * a[k - 1] / k  # 2/sqrt(pi) a_(k-1) / k
    return table


_ERF_TAYLOR = _erf_taylor_table()


def _math_erf(x):
    """Python's math.erf: below 6, the Taylor polynomial (12 terms, Horner) around
    the nearest of the centres i/8 (_ERF_TAYLOR); from 6 on erf is 1 in float64.
    (One return, at the end: a loop calling it stays native code.)"""
    x = float(x)
    ax = abs(x)
    r = 1.0
    if ax < 6.0:
        i = int(ax * 8.0 + 0.5)
        t = ax - i * 0.125
        r = _ERF_TAYLOR[i, 11]
        for m in range(10, -1, -1):
            r = r * t + _ERF_TAYLOR[i, m]
        r = r.item()  # Python's float, as math.erf gives
    elif ax != ax:
        r = ax
    return r if x > 0.0 else (-r if x < 0.0 else x)  # erf(-0.0) is -0.0, erf(nan) nan


def _math_erfc(x):
    """Python's math.erfc: the continued fraction from 1 on (relative precision
    where erfc is small; it converges faster the larger x), 1 - erf(x) between
    -1 and 1, 2 - erfc(-x) below."""
    x = float(x)
    ax = abs(x)
    r = 0.0
    if ax < 1.0 or ax != ax:
        r = 1.0 - _math_erf(x)
    elif ax < 2.0:
        r = _erfc_fraction(ax, 250)
    elif ax < 3.0:
        r = _erfc_fraction(ax, 120)
    elif ax < 27.3:
        r = _erfc_fraction(ax, 60)
    if x <= -1.0:
        r = 2.0 - r
    return float(r)


def _math_int(x, fn):
    """x for math.fn's integer operand: a float is Python's TypeError."""
    if isinstance(x, float):
        raise TypeError("[math." + fn + "] 'float' object cannot be interpreted as an integer: "
                        "got " + str(x))
    return int(x)


def _math_factorial(n):
    """Python's math.factorial (an int beyond int64 is an OverflowError)."""
    n = _math_int(n, "factorial")
    if n < 0:
        raise ValueError("[math.factorial] factorial() not defined for negative values: got "
                         + str(n))
    r = 1
    for i in range(2, n + 1):
        r *= i
    return r


def _math_perm(n, k=None):
    """Python's math.perm: n! / (n - k)!, 0 when k > n."""
    n = _math_int(n, "perm")
    k = n if k is None else _math_int(k, "perm")
    if n < 0:
        raise ValueError("[math.perm] n must be a non-negative integer: got " + str(n))
    if k < 0:
        raise ValueError("[math.perm] k must be a non-negative integer: got " + str(k))
    r = 1 if k <= n else 0
    if k <= n:
        for i in range(n - k + 1, n + 1):
            r *= i
    return r


def _math_comb(n, k):
    """Python's math.comb: n choose k, 0 when k > n (each partial product is a
    binomial coefficient itself, so none exceeds the result's size by much)."""
    n = _math_int(n, "comb")
    k = _math_int(k, "comb")
    if n < 0:
        raise ValueError("[math.comb] n must be a non-negative integer: got " + str(n))
    if k < 0:
        raise ValueError("[math.comb] k must be a non-negative integer: got " + str(k))
    r = 1 if k <= n else 0
    if k <= n:
        k = min(k, n - k)
        for i in range(k):
            r = r * (n - i) // (i + 1)
    return r


def _math_gcd(a, b):
    """Python's math.gcd of two ints (never negative; gcd(0, 0) is 0)."""
    a = abs(_math_int(a, "gcd"))
    b = abs(_math_int(b, "gcd"))
    while b:
        a, b = b, a % b
    return a


def _math_lcm(a, b):
    """Python's math.lcm of two ints (never negative; 0 when either is)."""
    a = abs(_math_int(a, "lcm"))
    b = abs(_math_int(b, "lcm"))
    r = 0
    if a != 0 and b != 0:
        r = a // _math_gcd(a, b) * b
    return r


def _math_isqrt(n):
    """Python's math.isqrt: the largest int whose square is at most n."""
    n = _math_int(n, "isqrt")
    if n < 0:
        raise ValueError("[math.isqrt] isqrt() argument must be nonnegative: got " + str(n))
    x = int(math.sqrt(n))
    while x > 0 and x > n // x:
        x -= 1
    while x + 1 <= n // (x + 1):
        x += 1
    return x


# ---------------------------------------------------------------- Python builtins with key=


def _empty_message(f):
    try:
        f([])
    except ValueError as e:
        return str(e)
    return ""


# Python's own messages (they changed in 3.12)
_EMPTY_MAX = _empty_message(max)
_EMPTY_MIN = _empty_message(min)


def _extreme_by_key(items, key, largest, has_default, default):
    """max/min(items, key=key, default=default): the first item whose key is largest
    (smallest), as Python's."""
    found = False
    best = None
    best_key = None
    for v in items:
        k = v if key is None else key(v)
        if not found:
            found = True
            best = v
            best_key = k
        elif (largest and best_key < k) or (not largest and k < best_key):
            best = v
            best_key = k
    if not found:
        if has_default:
            return default
        if largest:
            raise ValueError(_EMPTY_MAX)
        raise ValueError(_EMPTY_MIN)
    return best


def _sorted_by_key(items, key, reverse):
    """sorted(items, key=key, reverse=reverse): a stable merge sort, equal keys in
    their first order (reverse too), as Python's."""
    values = list(items)
    # the test outside the comprehension: its loop then has native code
    keys = values if key is None else [key(v) for v in values]
    # the merge in C++ (primitive sort_order): the same comparisons, in order
    order = tessera.sort_order(keys, reverse)
    return [values[k] for k in order]
