"""NumPy's random distributions that @tessera.jit translates from their definitions here.

Each is written, like ``_numpy_lib.py``, in the NumPy subset the jit translates, from the
uniform and normal draws tessera has (its counter-based stream: the values differ from
NumPy's, the distributions are the same): inverse-CDF forms, Marsaglia and Tsang's gamma
(vectorised rejection: the rejected elements are drawn again), Hörmann's PTRS for Poisson
means of 10 and more, inversion for small Poisson means and for binomials. The functions
named as NumPy's serve ``np.random.NAME`` (the global stream ``np.random.seed`` seeds);
``rng_NAME`` serves ``rng.NAME(...)`` on a ``np.random.default_rng`` generator.
Signatures, defaults, result dtypes (int64 counts), results (a Python number for
``size=None`` and scalar parameters, an array otherwise) and ValueErrors for invalid
parameters are NumPy's; an error names the user's call (``_calls.py`` ``library_call``).
LEGACY and GENERATOR map NumPy's names to the functions.
"""

from __future__ import annotations

import math

import numpy as np

# NumPy's limit for a Poisson mean (a larger mean would overflow int64)
POISSON_LAM_MAX = 9.223372006484771e18

# ---------------------------------------------------------------- draws and shapes


def _uniform(gen, shape):
    """float64 draws in [0, 1) of `shape` (an array, 0-d for ())."""
    if gen is None:
        return np.asarray(np.random.random(shape))
    return np.asarray(gen.random(shape))


def _open_uniform(gen, shape):
    """float64 draws in (0, 1): the draw 0 (probability 2**-53) becomes 0.5."""
    u = _uniform(gen, shape)
    return np.where(u == 0.0, 0.5, u)


def _normal(gen, shape):
    if gen is None:
        return np.asarray(np.random.standard_normal(shape))
    return np.asarray(gen.standard_normal(shape))


def _exp1(gen, shape):
    """Standard exponential draws: -log(1 - U), U in [0, 1)."""
    return -np.log1p(-_uniform(gen, shape))


def _u1(gen):
    """One float64 draw in [0, 1) (a Python float)."""
    if gen is None:
        return np.random.random()
    return gen.random()


def _n1(gen):
    """One standard normal draw (a Python float)."""
    if gen is None:
        return np.random.standard_normal()
    return gen.standard_normal()


def _scalar(size, a=0.0, b=0.0, c=0.0):
    """Whether the call draws one number (size None, scalar parameters): the scalar forms
    below skip the arrays, so a loop drawing one value a turn runs a few operations."""
    return size is None and np.ndim(a) == 0 and np.ndim(b) == 0 and np.ndim(c) == 0


def _open1(gen):
    """One draw in (0, 1): the draw 0 becomes 0.5, as in _open_uniform."""
    u = _u1(gen)
    if u == 0.0:
        u = 0.5
    return u


def _gamma1(gen, a):
    """One standard gamma draw of shape a >= 0 (finite): Marsaglia and Tsang's loop."""
    boost = 1.0
    if a < 1.0:
        if a == 0.0:
            return 0.0
        boost = (1.0 - _u1(gen)) ** (1.0 / a)
        a = a + 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    value = -1.0
    while value < 0.0:
        x = _n1(gen)
        v = 1.0 + c * x
        if v > 0.0:
            v = v * v * v
            if math.log1p(-_u1(gen)) < 0.5 * x * x + d - d * v + d * math.log(v):
                value = d * v
    return value * boost


def _shape(label, size, a=0.0, b=0.0, c=0.0):
    """The result's shape: `size`, or the parameters' broadcast shape when it is None;
    NumPy's ValueError for a negative dimension or parameters that do not fit `size`."""
    pshape = np.shape(np.asarray(a) + np.asarray(b) + np.asarray(c))
    if size is None:
        return pshape
    if np.ndim(size) == 0:
        shape = (int(np.asarray(size).item()),)
    else:
        shape = tuple(size)
    for d in shape:
        if d < 0:
            raise ValueError("[" + label + "] negative dimensions are not allowed, got size " +
                             str(size))
    bad = len(pshape) > len(shape)
    if not bad:
        for i in range(1, len(pshape) + 1):
            if pshape[-i] != 1 and pshape[-i] != shape[-i]:
                bad = True
    if bad:
        raise ValueError("[" + label + "] shape mismatch: objects cannot be broadcast to a "
                         "single shape: the parameters' shape " + str(pshape) + " and size " +
                         str(shape))
    return shape


def _param(x, shape):
    """A parameter as a float64 array of the result's shape."""
    return np.broadcast_to(np.asarray(x, dtype=np.float64), shape)


def _finish(x, size):
    """A Python number for size=None and scalar parameters (NumPy's result), else the array."""
    if size is None and np.ndim(x) == 0:
        return np.asarray(x).item()
    return x


def _finish_int(x, size):
    return _finish(np.asarray(x).astype(np.int64), size)


def _check(bad, label, message):
    if np.any(bad):
        raise ValueError("[" + label + "] " + message)


def _nan_words(x):
    """NumPy's words for a NaN parameter: 'is NaN' for a scalar, 'contains NaNs' for an array."""
    return "is NaN" if np.ndim(x) == 0 else "contains NaNs"


def _check_01(p, label, name):
    """NumPy's check of a probability: 0 <= p <= 1 and not NaN."""
    p = np.asarray(p)
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("[" + label + "] " + name + " < 0, " + name + " > 1 or " + name +
                         " " + _nan_words(p))


def _counts(x, label):
    """An integer parameter (n, ngood, ...) as NumPy reads it: truncated to int64, an
    infinite value its OverflowError, NaN its ValueError."""
    a = np.asarray(x)
    if np.any(np.isnan(a)):
        raise ValueError("[" + label + "] cannot convert float NaN to integer")
    if np.any(np.isinf(a)):
        raise OverflowError("[" + label + "] cannot convert float infinity to integer")
    return a.astype(np.int64)


def _dtype_out(label, dtype, out):
    if out is not None:
        raise NotImplementedError("[" + label + "] out= is not supported by tessera.jit")
    if dtype is not None and np.dtype(dtype) != np.float64 and np.dtype(dtype) != np.float32:
        raise TypeError("[" + label + "] Unsupported dtype " + str(dtype) + " (float32 or "
                        "float64)")


def _as_dtype(x, dtype, size):
    if dtype is not None and np.dtype(dtype) == np.float32:
        return _finish(np.asarray(x).astype(np.float32), size)
    return _finish(x, size)


# ---------------------------------------------------------------- inverse-CDF forms


def _exponential(gen, label, scale, size):
    if _scalar(size, scale):
        if scale < 0:
            raise ValueError("[" + label + "] scale < 0")
        return _finish(scale * -math.log1p(-_u1(gen)), None)
    shape = _shape(label, size, scale)
    _check(np.asarray(scale) < 0, label, "scale < 0")
    return _finish(_param(scale, shape) * _exp1(gen, shape), size)


def _laplace(gen, label, loc, scale, size):
    if _scalar(size, loc, scale):
        if scale < 0:
            raise ValueError("[" + label + "] scale < 0")
        u = _u1(gen)
        if u >= 0.5:
            return _finish(loc - scale * math.log(2.0 - 2.0 * u), None)
        if u == 0.0:
            return _finish(loc + 0.0 * scale, None)
        return _finish(loc + scale * math.log(2.0 * u), None)
    shape = _shape(label, size, loc, scale)
    _check(np.asarray(scale) < 0, label, "scale < 0")
    u = _uniform(gen, shape)
    lo = _param(loc, shape)
    s = _param(scale, shape)
    # U = 0 (probability 2**-53) gives loc, as the draw 0.5
    x = np.where(u >= 0.5, lo - s * np.log(2.0 - 2.0 * u),
                 lo + s * np.log(2.0 * np.where(u == 0.0, 0.5, u)))
    return _finish(x, size)


def _logistic(gen, label, loc, scale, size):
    if _scalar(size, loc, scale):
        if scale < 0:
            raise ValueError("[" + label + "] scale < 0")
        u = _open1(gen)
        return _finish(loc + scale * math.log(u / (1.0 - u)), None)
    shape = _shape(label, size, loc, scale)
    _check(np.asarray(scale) < 0, label, "scale < 0")
    u = _open_uniform(gen, shape)
    return _finish(_param(loc, shape) + _param(scale, shape) * np.log(u / (1.0 - u)), size)


def _gumbel(gen, label, loc, scale, size):
    if _scalar(size, loc, scale):
        if scale < 0:
            raise ValueError("[" + label + "] scale < 0")
        return _finish(loc - scale * math.log(-math.log(_open1(gen))), None)
    shape = _shape(label, size, loc, scale)
    _check(np.asarray(scale) < 0, label, "scale < 0")
    u = _open_uniform(gen, shape)
    return _finish(_param(loc, shape) - _param(scale, shape) * np.log(-np.log(u)), size)


def _rayleigh(gen, label, scale, size):
    if _scalar(size, scale):
        if scale < 0:
            raise ValueError("[" + label + "] scale < 0")
        return _finish(scale * math.sqrt(-2.0 * math.log1p(-_u1(gen))), None)
    shape = _shape(label, size, scale)
    _check(np.asarray(scale) < 0, label, "scale < 0")
    return _finish(_param(scale, shape) * np.sqrt(2.0 * _exp1(gen, shape)), size)


def _weibull(gen, label, a, size):
    if _scalar(size, a):
        if a < 0:
            raise ValueError("[" + label + "] a < 0")
        e = -math.log1p(-_u1(gen))
        if a == 0:
            return 0.0
        return _finish(e ** (1.0 / a), None)
    shape = _shape(label, size, a)
    _check(np.asarray(a) < 0, label, "a < 0")
    aa = _param(a, shape)
    e = _exp1(gen, shape)
    return _finish(np.where(aa == 0, 0.0, np.power(e, 1.0 / np.where(aa == 0, 1.0, aa))), size)


def _pareto(gen, label, a, size):
    if _scalar(size, a):
        if a <= 0:
            raise ValueError("[" + label + "] a <= 0")
        return _finish(math.expm1(-math.log1p(-_u1(gen)) / a), None)
    shape = _shape(label, size, a)
    _check(np.asarray(a) <= 0, label, "a <= 0")
    return _finish(np.expm1(_exp1(gen, shape) / _param(a, shape)), size)


def _power(gen, label, a, size):
    if _scalar(size, a):
        if a <= 0:
            raise ValueError("[" + label + "] a <= 0")
        return _finish((-math.expm1(math.log1p(-_u1(gen)))) ** (1.0 / a), None)
    shape = _shape(label, size, a)
    _check(np.asarray(a) <= 0, label, "a <= 0")
    return _finish(np.power(-np.expm1(-_exp1(gen, shape)), 1.0 / _param(a, shape)), size)


def _triangular(gen, label, left, mode, right, size):
    shape = _shape(label, size, left, mode, right)
    _check(np.asarray(left) > np.asarray(mode), label, "left > mode")
    _check(np.asarray(mode) > np.asarray(right), label, "mode > right")
    _check(np.asarray(left) == np.asarray(right), label, "left == right")
    lo = _param(left, shape)
    m = _param(mode, shape)
    hi = _param(right, shape)
    u = _uniform(gen, shape)
    base = hi - lo
    left_base = m - lo
    right_base = hi - m
    ratio = left_base / base
    x = np.where(u <= ratio, lo + np.sqrt(u * base * left_base),
                 hi - np.sqrt((1.0 - u) * base * right_base))
    return _finish(x, size)


def _geometric(gen, label, p, size):
    if _scalar(size, p) and p > 0 and p <= 1:
        if p == 1.0:
            return 1
        k = math.ceil(math.log(_open1(gen)) / math.log1p(-p))
        if k < 1:
            k = 1
        return _finish(int(k), None)
    shape = _shape(label, size, p)
    pa = np.asarray(p)
    if not np.all((pa > 0) & (pa <= 1)):
        raise ValueError("[" + label + "] p <= 0, p > 1 or p contains NaNs")
    pp = _param(p, shape)
    u = _open_uniform(gen, shape)
    # the smallest k >= 1 with 1 - (1-p)^k > 1 - u
    k = np.ceil(np.log(u) / np.log1p(-np.where(pp == 1.0, 0.5, pp)))
    return _finish_int(np.where(pp == 1.0, 1.0, np.maximum(k, 1.0)), size)


def _standard_cauchy(gen, label, size):
    if size is None:
        return _finish(_n1(gen) / _n1(gen), None)
    shape = _shape(label, size)
    return _finish(_normal(gen, shape) / _normal(gen, shape), size)


def _lognormal(gen, label, mean, sigma, size):
    if _scalar(size, mean, sigma):
        if sigma < 0:
            raise ValueError("[" + label + "] sigma < 0")
        return _finish(math.exp(mean + sigma * _n1(gen)), None)
    shape = _shape(label, size, mean, sigma)
    _check(np.asarray(sigma) < 0, label, "sigma < 0")
    return _finish(np.exp(_param(mean, shape) + _param(sigma, shape) * _normal(gen, shape)),
                   size)


def _wald(gen, label, mean, scale, size):
    shape = _shape(label, size, mean, scale)
    _check(np.asarray(mean) <= 0, label, "mean <= 0")
    _check(np.asarray(scale) <= 0, label, "scale <= 0")
    mu = _param(mean, shape)
    lam = _param(scale, shape)
    # Michael, Schucany and Haas: a root of the chi-square(1) transform, chosen with one uniform
    y = _normal(gen, shape)
    y = mu * y * y
    x = mu + (mu / (2.0 * lam)) * (y - np.sqrt(4.0 * lam * y + y * y))
    u = _uniform(gen, shape)
    return _finish(np.where(u <= mu / (mu + x), x, mu * mu / x), size)


# ---------------------------------------------------------------- gamma and its family


def _marsaglia_tsang(gen, d, c):
    """One round of Marsaglia and Tsang's method for d = a - 1/3, c = 1/sqrt(9 d) (1-d
    arrays): the candidates d v**3 and whether each is accepted."""
    m = d.shape[0]
    x = _normal(gen, (m,))
    v = 1.0 + c * x
    v3 = v * v * v
    u = _uniform(gen, (m,))
    safe = np.where(v > 0.0, v3, 1.0)
    ok = (v > 0.0) & (np.log1p(-u) < 0.5 * x * x + d - d * safe + d * np.log(safe))
    return d * v3, ok


def _gamma_draws(gen, k, logs=False):
    """Standard gamma draws of shapes k (a float64 array, k >= 0): Marsaglia and Tsang's
    test on every element, then the rejected ones (a few percent) drawn again until all
    are accepted; a shape below 1 is a shape + 1 draw times U**(1/k). With `logs`, the
    draws' logarithms (a tiny shape's draws underflow to 0, their logs do not)."""
    flat = np.ravel(k)
    n = flat.shape[0]
    small = flat < 1.0
    finite = np.isfinite(flat)
    a = np.where(small, flat + 1.0, np.where(finite, flat, 1.0))
    d = a - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    value, ok = _marsaglia_tsang(gen, d, c)
    out = np.where(finite, np.where(ok, value, 0.0), np.inf)  # NumPy's draw of shape inf
    todo = np.nonzero(np.logical_not(ok) & finite)[0]
    while todo.shape[0] > 0:
        value, ok = _marsaglia_tsang(gen, d[todo], c[todo])
        out[todo[ok]] = value[ok]
        todo = todo[np.logical_not(ok)]
    log_boost = np.zeros(n)
    if np.any(small):
        log_boost = np.where(small, np.log1p(-_uniform(gen, (n,))) / np.where(small, flat, 1.0),
                             0.0)
    if logs:
        out = np.where(flat == 0.0, -np.inf, np.log(out) + log_boost)
    else:
        out = np.where(flat == 0.0, 0.0, out * np.exp(log_boost))
    return np.reshape(out, np.shape(k))


def _standard_gamma(gen, label, shape_p, size):
    if _scalar(size, shape_p) and math.isfinite(shape_p):
        if not shape_p >= 0:
            raise ValueError("[" + label + "] shape < 0")
        return _finish(_gamma1(gen, shape_p), None)
    shape = _shape(label, size, shape_p)
    _check(np.logical_not(np.asarray(shape_p) >= 0), label, "shape < 0")
    return _finish(_gamma_draws(gen, _param(shape_p, shape)), size)


def _gamma(gen, label, shape_p, scale, size):
    if _scalar(size, shape_p, scale) and math.isfinite(shape_p):
        if not shape_p >= 0:
            raise ValueError("[" + label + "] shape < 0")
        if scale < 0:
            raise ValueError("[" + label + "] scale < 0")
        return _finish(_gamma1(gen, shape_p) * scale, None)
    shape = _shape(label, size, shape_p, scale)
    _check(np.logical_not(np.asarray(shape_p) >= 0), label, "shape < 0")
    _check(np.asarray(scale) < 0, label, "scale < 0")
    return _finish(_gamma_draws(gen, _param(shape_p, shape)) * _param(scale, shape), size)


def _beta(gen, label, a, b, size):
    if _scalar(size, a, b) and math.isfinite(a) and math.isfinite(b):
        if not a > 0:
            raise ValueError("[" + label + "] a <= 0")
        if not b > 0:
            raise ValueError("[" + label + "] b <= 0")
        x = _gamma1(gen, a)
        return _finish(x / (x + _gamma1(gen, b)), None)
    shape = _shape(label, size, a, b)
    _check(np.logical_not(np.asarray(a) > 0), label, "a <= 0")
    _check(np.logical_not(np.asarray(b) > 0), label, "b <= 0")
    x = _gamma_draws(gen, _param(a, shape))
    y = _gamma_draws(gen, _param(b, shape))
    return _finish(x / (x + y), size)


def _chisquare(gen, label, df, size):
    if _scalar(size, df) and math.isfinite(df):
        if not df > 0:
            raise ValueError("[" + label + "] df <= 0")
        return _finish(2.0 * _gamma1(gen, df / 2.0), None)
    shape = _shape(label, size, df)
    _check(np.logical_not(np.asarray(df) > 0), label, "df <= 0")
    return _finish(2.0 * _gamma_draws(gen, _param(df, shape) / 2.0), size)


def _standard_t(gen, label, df, size):
    if _scalar(size, df) and math.isfinite(df):
        if not df > 0:
            raise ValueError("[" + label + "] df <= 0")
        z = _n1(gen)
        return _finish(math.sqrt(df / 2.0) * z / math.sqrt(_gamma1(gen, df / 2.0)), None)
    shape = _shape(label, size, df)
    _check(np.logical_not(np.asarray(df) > 0), label, "df <= 0")
    nu = _param(df, shape)
    z = _normal(gen, shape)
    g = _gamma_draws(gen, nu / 2.0)
    return _finish(np.sqrt(nu / 2.0) * z / np.sqrt(g), size)


def _f(gen, label, dfnum, dfden, size):
    shape = _shape(label, size, dfnum, dfden)
    _check(np.logical_not(np.asarray(dfnum) > 0), label, "dfnum <= 0")
    _check(np.logical_not(np.asarray(dfden) > 0), label, "dfden <= 0")
    m = _param(dfnum, shape)
    n = _param(dfden, shape)
    num = _gamma_draws(gen, m / 2.0) / m
    den = _gamma_draws(gen, n / 2.0) / n
    return _finish(num / den, size)


def _dirichlet(gen, label, alpha, size, zero_ok):
    al = np.asarray(alpha, dtype=np.float64)
    if al.ndim != 1:
        raise ValueError("[" + label + "] alpha must be a one-dimensional sequence, got " +
                         str(al.ndim) + " dimensions")
    if zero_ok:
        _check(np.logical_not(al >= 0), label, "alpha < 0")
    else:
        _check(np.logical_not(al > 0), label, "alpha <= 0")
    shape = _shape(label, size)
    full = shape + (al.shape[0],)
    # normalised from the logs: small alphas' gamma draws underflow to 0 (0 / 0)
    lg = _gamma_draws(gen, np.broadcast_to(al, full), True)
    w = np.exp(lg - np.max(lg, axis=-1, keepdims=True))
    return w / np.sum(w, axis=-1, keepdims=True)


# ---------------------------------------------------------------- counts


def _loggam(x):
    """log Gamma(x) for x >= 1 (float64 arrays): Stirling's series at x + n >= 7,
    shifted back by the logs of the n factors in between."""
    shift = np.where(x < 7.0, np.floor(7.0 - x), 0.0)
    x0 = x + shift
    x2 = 1.0 / (x0 * x0)
    coef = (-1.39243221690590e+00, 1.796443723688307e-01, -2.955065359477124e-02,
            6.410256410256410e-03, -1.917526917526918e-03, 8.417508417508418e-04,
            -5.952380952380952e-04, 7.936507936507937e-04, -2.777777777777778e-03,
            8.333333333333333e-02)
    s = np.zeros_like(x0)
    for ck in coef:
        s = s * x2 + ck
    gl = s / x0 + 0.5 * np.log(2.0 * np.pi) + (x0 - 0.5) * np.log(x0) - x0
    for j in range(1, 8):
        gl = gl - np.where(shift >= j, np.log(x0 - j), 0.0)
    return gl


def _poisson_inversion(gen, lam):
    """Poisson draws for means lam < 10 (any shape): the smallest k with F(k) > U."""
    u = _uniform(gen, np.shape(lam))
    pk = np.exp(-lam)
    cdf = pk
    x = np.zeros(np.shape(lam))
    active = u >= cdf
    k = 0
    while np.any(active):
        k += 1
        pk = pk * lam / k
        cdf = cdf + pk
        x = np.where(active, float(k), x)
        active = active & (u >= cdf) & (pk > 0.0)
    return x


def _poisson_ptrs(gen, lam):
    """Poisson draws for means lam >= 10: Hörmann's transformed rejection with squeeze
    (PTRS), the rejected elements drawn again."""
    flat = np.ravel(lam)
    n = flat.shape[0]
    out = np.zeros(n)
    todo = np.arange(n)
    while todo.shape[0] > 0:
        m = todo.shape[0]
        lm = flat[todo]
        slam = np.sqrt(lm)
        loglam = np.log(lm)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2.0)
        u = _uniform(gen, (m,)) - 0.5
        v = _uniform(gen, (m,))
        us = 0.5 - np.abs(u)
        k = np.floor((2.0 * a / us + b) * u + lm + 0.43)
        quick = (us >= 0.07) & (v <= vr)
        kk = np.maximum(k, 0.0)
        log_ratio = np.log(np.where(v > 0.0, v, 1e-300)) + np.log(invalpha) - np.log(
            a / (us * us) + b)
        slow = (k >= 0.0) & np.logical_not((us < 0.013) & (v > us)) & (
            log_ratio <= -lm + kk * loglam - _loggam(kk + 1.0))
        ok = quick | slow
        out[todo[ok]] = k[ok]
        todo = todo[np.logical_not(ok)]
    return np.reshape(out, np.shape(lam))


def _poisson_draws(gen, lam):
    small = lam < 10.0
    x = _poisson_inversion(gen, np.where(small, lam, 0.0))
    if np.any(np.logical_not(small)):
        x = np.where(small, x, _poisson_ptrs(gen, np.where(small, 10.0, lam)))
    return x


def _poisson1(gen, lam):
    """One Poisson draw (a Python int) of a finite mean lam >= 0."""
    if lam < 10.0:
        u = _u1(gen)
        pk = math.exp(-lam)
        cdf = pk
        k = 0
        while u >= cdf and pk > 0.0:
            k += 1
            pk = pk * lam / k
            cdf = cdf + pk
        return k
    return int(_poisson_ptrs(gen, np.full(1, float(lam)))[0].item())


def _poisson(gen, label, lam, size):
    if _scalar(size, lam) and lam >= 0 and lam <= POISSON_LAM_MAX:
        return _finish(_poisson1(gen, lam), None)
    shape = _shape(label, size, lam)
    la = np.asarray(lam)
    _check(np.logical_not(la >= 0), label, "lam < 0 or lam " + _nan_words(lam))
    _check(la > POISSON_LAM_MAX, label, "lam value too large")
    return _finish_int(_poisson_draws(gen, _param(lam, shape)), size)


def _table_draws(gen, shape, k, logw):
    """Draws of the values k (ascending) with weights exp(logw), normalised here: one
    uniform each, found in the cumulative table."""
    w = np.exp(logw - np.max(logw))
    cdf = np.cumsum(w)
    u = _uniform(gen, shape) * cdf[-1]
    i = np.minimum(np.searchsorted(cdf, u, side="right"), k.shape[0] - 1)
    return k[i]


def _same(x):
    """Whether every element of x is its first (a parameter the draws share)."""
    return x.size > 0 and bool(np.all(x == np.ravel(x)[0]))


def _binomial_table(gen, shape, n, q):
    """Binomial(n, q) draws for one n and q (0 < q <= 1/2) from the pmf over mean +- (10
    standard deviations + 40) (Bernstein's bound leaves less than exp(-60) outside), built
    by its ratios p(k+1)/p(k) = (n-k)/(k+1) * q/(1-q)."""
    mu = n * q
    sd = np.sqrt(mu * (1.0 - q))
    k0 = max(0.0, np.floor(mu - 10.0 * sd - 40.0))
    k1 = min(n, np.ceil(mu + 10.0 * sd + 40.0))
    k = np.arange(k0, k1 + 1.0)
    steps = np.log((n - k[:-1]) / (k[:-1] + 1.0)) + np.log(q) - np.log1p(-q)
    logw = np.concatenate((np.zeros(1), np.cumsum(steps)))
    return _table_draws(gen, shape, k, logw)


def _binomial_split(gen, n, q):
    """Binomial draws for parameters that differ by element (0 < q <= 1/2): inversion where
    n q is small, one table per element elsewhere (the inversion's turns grow with n q)."""
    big = n * q > 50.0
    x = _binomial_inversion(gen, np.where(big, 0.0, n), q)
    if np.any(big):
        flat_n = np.ravel(n)
        flat_q = np.ravel(q)
        flat_x = np.ravel(x).copy()
        for i in np.nonzero(np.ravel(big))[0]:
            flat_x[i] = _binomial_table(gen, (1,), flat_n[i], flat_q[i])[0]
        x = np.reshape(flat_x, np.shape(n))
    return x


def _binomial_draws(gen, n, p):
    """Binomial draws (float64 arrays n, p of one shape) on q = min(p, 1-p), then n - x for
    p > 1/2: one table for shared parameters, else inversion with the pmf carried in logs
    (so a large n does not underflow its first term)."""
    flip = p > 0.5
    q = np.where(flip, 1.0 - p, p)
    zero = (q == 0.0) | (n == 0.0)
    if _same(n) and _same(q) and not np.any(zero):
        x = _binomial_table(gen, np.shape(n), np.ravel(n)[0], np.ravel(q)[0])
    else:
        x = _binomial_split(gen, np.where(zero, 0.0, n), np.where(zero, 0.5, q))
    return np.where(flip, n - x, x)


def _binomial_inversion(gen, n, qs):
    """Inversion: the smallest k with F(k) > U, the pmf carried in logs (a large n does
    not underflow its first term); n = 0 gives 0."""
    zero = n == 0.0
    u = _uniform(gen, np.shape(n))
    logpmf = n * np.log1p(-qs)
    ratio = np.log(qs) - np.log1p(-qs)
    cdf = np.exp(logpmf)
    x = np.zeros(np.shape(n))
    active = (u >= cdf) & np.logical_not(zero)
    k = 0
    while np.any(active):
        k += 1
        logpmf = logpmf + np.log(np.maximum(n - k + 1.0, 1.0) / k) + ratio
        cdf = cdf + np.exp(logpmf)
        x = np.where(active, float(k), x)
        active = active & (u >= cdf) & (n > k)
    return x


def _binomial(gen, label, n, p, size):
    shape = _shape(label, size, n, p)
    n = _counts(n, label)
    _check(np.asarray(n) < 0, label, "n < 0")
    _check_01(p, label, "p")
    return _finish_int(_binomial_draws(gen, _param(n, shape), _param(p, shape)), size)


def _negative_binomial(gen, label, n, p, size):
    shape = _shape(label, size, n, p)
    _check(np.logical_not(np.asarray(n) > 0), label, "n <= 0")
    pa = np.asarray(p)
    if not np.all((pa > 0) & (pa <= 1)):
        raise ValueError("[" + label + "] p < 0, p > 1 or p is NaN")
    pp = _param(p, shape)
    lam = _gamma_draws(gen, _param(n, shape)) * (1.0 - pp) / pp
    return _finish_int(_poisson_draws(gen, lam), size)


def _multinomial(gen, label, n, pvals, size):
    pv = np.asarray(pvals, dtype=np.float64)
    if pv.ndim != 1:
        raise ValueError("[" + label + "] pvals must be a one-dimensional sequence, got " +
                         str(pv.ndim) + " dimensions")
    n = _counts(n, label)
    _check(n < 0, label, "n < 0")
    if not np.all((pv >= 0) & (pv <= 1)):
        raise ValueError("[" + label + "] pvals < 0, pvals > 1 or pvals contains NaNs")
    kk = pv.shape[0]
    if kk > 1 and np.sum(pv[:-1]) > 1.0 + 1e-12:
        raise ValueError("[" + label + "] sum(pvals[:-1]) > 1.0")
    shape = _shape(label, size, n)
    left = _param(n, shape)
    mass = np.ones(shape)
    cols = []
    for j in range(kk - 1):
        pj = np.clip(pv[j] / np.where(mass > 0, mass, 1.0), 0.0, 1.0)
        xj = _binomial_draws(gen, left, np.where(mass > 0, pj, 0.0) + np.zeros(shape))
        cols.append(xj)
        left = left - xj
        mass = mass - pv[j]
    cols.append(left)
    return np.stack(cols, axis=-1).astype(np.int64)


def _hypergeometric(gen, label, ngood, nbad, nsample, size, least):
    shape = _shape(label, size, ngood, nbad, nsample)
    ngood = _counts(ngood, label)
    nbad = _counts(nbad, label)
    nsample = _counts(nsample, label)
    g = np.asarray(ngood)
    b = np.asarray(nbad)
    s = np.asarray(nsample)
    _check(g < 0, label, "ngood < 0")
    _check(b < 0, label, "nbad < 0")
    _check(np.logical_not(s >= least), label, "nsample < " + str(least) + " or nsample is NaN")
    _check(g + b < s, label, "ngood + nbad < nsample")
    good = _param(ngood, shape)
    total = good + _param(nbad, shape)
    take = _param(nsample, shape)
    if _same(good) and _same(total) and _same(take):
        # one table of the pmf over max(0, m - bad) .. min(m, good), built by its ratios
        gd = np.ravel(good)[0]
        bd = np.ravel(total)[0] - gd
        m = np.ravel(take)[0]
        # mean +- (10 standard deviations + 40): sampling without replacement is at least
        # as concentrated as with (Hoeffding), so less than exp(-60) lies outside
        mu = m * gd / (gd + bd)
        sd = np.sqrt(mu * (bd / (gd + bd)) * max(gd + bd - m, 0.0) / max(gd + bd - 1.0, 1.0))
        k = np.arange(max(0.0, m - bd, np.floor(mu - 10.0 * sd - 40.0)),
                      min(m, gd, np.ceil(mu + 10.0 * sd + 40.0)) + 1.0)
        kk = k[:-1]
        steps = np.log((gd - kk) * (m - kk)) - np.log((kk + 1.0) * (bd - m + kk + 1.0))
        logw = np.concatenate((np.zeros(1), np.cumsum(steps)))
        return _finish_int(_table_draws(gen, shape, k, logw), size)
    # draw the smaller of the sample and its complement, one ball per turn from the urn
    flip = take > total / 2.0
    m = np.where(flip, total - take, take)
    good_left = good
    left = total
    got = np.zeros(shape)
    steps = int(np.max(m)) if m.size > 0 else 0
    for i in range(steps):
        on = m > i
        u = _uniform(gen, shape)
        hit = on & (u * left < good_left)
        got = got + hit
        good_left = good_left - hit
        left = left - on
    return _finish_int(np.where(flip, good - got, got), size)


def _multivariate_normal(gen, label, mean, cov, size, check_valid, tol):
    mu = np.asarray(mean, dtype=np.float64)
    cv = np.asarray(cov, dtype=np.float64)
    if mu.ndim != 1:
        raise ValueError("[" + label + "] mean must be 1 dimensional, got " + str(mu.ndim) +
                         " dimensions")
    if cv.ndim != 2 or cv.shape[0] != cv.shape[1]:
        raise ValueError("[" + label + "] cov must be 2 dimensional and square, got shape " +
                         str(cv.shape))
    if mu.shape[0] != cv.shape[0]:
        raise ValueError("[" + label + "] mean and cov must have same length, got " +
                         str(mu.shape[0]) + " and " + str(cv.shape[0]))
    if check_valid != "warn" and check_valid != "raise" and check_valid != "ignore":
        raise ValueError("[" + label + "] check_valid must equal 'warn', 'raise', or "
                         "'ignore', got " + str(check_valid))
    shape = _shape(label, size)
    w, v = np.linalg.eigh(cv)
    if check_valid != "ignore":
        psd = np.all(w >= -tol * np.max(np.abs(w))) and np.allclose(cv, cv.T, rtol=tol,
                                                                     atol=tol)
        if not psd:
            if check_valid == "raise":
                raise ValueError("[" + label + "] covariance is not symmetric "
                                 "positive-semidefinite.")
            print("RuntimeWarning: [" + label + "] covariance is not symmetric "
                  "positive-semidefinite.")
    factor = v * np.sqrt(np.maximum(w, 0.0))
    k = mu.shape[0]
    z = _normal(gen, shape + (k,))
    return mu + z @ factor.T


# ---------------------------------------------------------------- choice


def _choice(gen, label, a, size, replace, p):
    pop = np.asarray(a)
    if pop.ndim == 0:
        n = int(pop.item())
        if n <= 0 and (size is None or np.prod(np.asarray(size)) != 0):
            raise ValueError("[" + label + "] a must be greater than 0 unless no samples are "
                             "taken, got " + str(n))
    else:
        if pop.ndim != 1:
            raise ValueError("[" + label + "] a must be 1-dimensional, got " +
                             str(pop.ndim) + " dimensions")
        n = pop.shape[0]
        if n == 0 and (size is None or np.prod(np.asarray(size)) != 0):
            raise ValueError("[" + label + "] 'a' cannot be empty unless no samples are taken")
    shape = _shape(label, size)
    count = int(np.prod(np.asarray(shape)))
    if p is not None:
        pp = np.asarray(p, dtype=np.float64)
        if pp.ndim != 1:
            raise ValueError("[" + label + "] p must be 1-dimensional, got " +
                             str(pp.ndim) + " dimensions")
        if pp.shape[0] != n:
            raise ValueError("[" + label + "] a and p must have same size, got " + str(n) +
                             " and " + str(pp.shape[0]))
        if np.any(np.logical_not(pp >= 0)):
            raise ValueError("[" + label + "] probabilities are not non-negative")
        if abs(np.sum(pp) - 1.0) > np.sqrt(np.finfo(np.float64).eps):
            raise ValueError("[" + label + "] probabilities do not sum to 1, got " +
                             str(np.sum(pp)))
    if replace:
        u = _uniform(gen, (count,))
        if p is None:
            idx = np.minimum(np.floor(u * n), n - 1.0).astype(np.int64)
        else:
            cdf = np.cumsum(pp)
            cdf = cdf / cdf[-1]
            idx = np.minimum(np.searchsorted(cdf, u, side="right"), n - 1)
    else:
        if count > n:
            raise ValueError("[" + label + "] Cannot take a larger sample than population "
                             "when 'replace=False', got " + str(count) + " from " + str(n))
        if p is None:
            if gen is None:
                idx = np.random.permutation(n)[:count]
            else:
                idx = gen.permutation(n)[:count]
        else:
            if np.count_nonzero(pp > 0) < count:
                raise ValueError("[" + label + "] Fewer non-zero entries in p than size")
            # one draw at a time among the elements not taken yet
            weights = pp.copy()
            idx = np.zeros(count, dtype=np.int64)
            for i in range(count):
                cdf = np.cumsum(weights)
                u = _uniform(gen, ()) * cdf[-1]
                j = int(np.minimum(np.searchsorted(cdf, u, side="right"), n - 1))
                while weights[j] == 0:
                    j = j - 1
                idx[i] = j
                weights[j] = 0.0
    if size is None:
        if pop.ndim == 0:
            return idx[0].item()
        return pop[idx[0].item()]
    idx = np.reshape(idx, shape)
    if pop.ndim == 0:
        return idx
    return pop[idx]


# ---------------------------------------------------------------- one draw, literal parameters
# np.random.NAME(literals) without size (np.random.exponential(2.0) in a loop): the
# translator checks the parameters and calls these, written in the scalar-loop subset
# (one return, global-stream draws np.random.random(), no arrays), so a loop drawing them
# runs as native code. Normals are Box-Muller pairs of uniforms (one of the pair kept).


def _fast_open():
    """One draw in (0, 1]."""
    return 1.0 - np.random.random()


def _fast_normal():
    return math.sqrt(-2.0 * math.log(_fast_open())) * math.cos(2.0 * math.pi *
                                                               np.random.random())


def _fast_gamma(a):
    """One standard gamma draw of a finite shape a > 0: Marsaglia and Tsang."""
    boost = 1.0
    if a < 1.0:
        boost = _fast_open() ** (1.0 / a)
        a = a + 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    value = -1.0
    while value < 0.0:
        x = _fast_normal()
        v = 1.0 + c * x
        if v > 0.0:
            v = v * v * v
            if math.log(_fast_open()) < 0.5 * x * x + d - d * v + d * math.log(v):
                value = d * v
    return value * boost


def fast_exponential(scale):
    return scale * (0.0 - math.log(_fast_open()))


def fast_standard_exponential():
    return 0.0 - math.log(_fast_open())


def fast_laplace(loc, scale):
    u = _fast_open()  # (0, 1]: log(2u) below 1/2, log(2 - 2u) above
    x = loc + scale * math.log(2.0 * u)
    if u > 0.5:
        x = loc - scale * math.log(2.0 - 2.0 * u)
    return x


def fast_logistic(loc, scale):
    u = _fast_open()
    if u == 1.0:
        u = 0.5
    return loc + scale * math.log(u / (1.0 - u))


def fast_gumbel(loc, scale):
    u = _fast_open()
    if u == 1.0:
        u = 0.5
    return loc - scale * math.log(0.0 - math.log(u))


def fast_rayleigh(scale):
    return scale * math.sqrt(-2.0 * math.log(_fast_open()))


def fast_weibull(a):
    return (0.0 - math.log(_fast_open())) ** (1.0 / a)


def fast_pareto(a):
    return math.exp((0.0 - math.log(_fast_open())) / a) - 1.0


def fast_power(a):
    return np.random.random() ** (1.0 / a)


def fast_lognormal(mean, sigma):
    return math.exp(mean + sigma * _fast_normal())


def fast_standard_cauchy():
    return _fast_normal() / _fast_normal()


def fast_poisson(lam):
    """0 <= lam < 10: inversion."""
    u = np.random.random()
    pk = math.exp(0.0 - lam)
    cdf = pk
    k = 0
    while u >= cdf and pk > 0.0:
        k += 1
        pk = pk * lam / k
        cdf = cdf + pk
    return k


def fast_standard_gamma(shape):
    return _fast_gamma(shape)


def fast_gamma(shape, scale):
    return _fast_gamma(shape) * scale


def fast_beta(a, b):
    x = _fast_gamma(a)
    return x / (x + _fast_gamma(b))


def fast_chisquare(df):
    return 2.0 * _fast_gamma(df / 2.0)


def fast_standard_t(df):
    z = _fast_normal()
    return z / math.sqrt(_fast_gamma(df / 2.0) / (df / 2.0))


def fast_normal(loc, scale):
    return loc + scale * _fast_normal()


def fast_standard_normal():
    return _fast_normal()


def fast_uniform(low, high):
    return low + (high - low) * np.random.random()


def _finite(*xs):
    return all(math.isfinite(x) for x in xs)


# NumPy's signatures of the one-draw forms whose general form is a primitive
# (normal, uniform, standard_normal), for binding a call's arguments.
def _normal_signature(loc=0.0, scale=1.0, size=None):
    """Binds np.random.normal's arguments."""


def _uniform_signature(low=0.0, high=1.0, size=None):
    """Binds np.random.uniform's arguments."""


def _standard_normal_signature(size=None):
    """Binds np.random.standard_normal's arguments."""


# name -> (function, when the literal parameters may take it: NumPy's valid values it covers)
FAST = {
    "exponential": (fast_exponential, lambda scale=1.0: scale >= 0),
    "standard_exponential": (fast_standard_exponential, lambda: True),
    "laplace": (fast_laplace, lambda loc=0.0, scale=1.0: scale >= 0),
    "logistic": (fast_logistic, lambda loc=0.0, scale=1.0: scale >= 0),
    "gumbel": (fast_gumbel, lambda loc=0.0, scale=1.0: scale >= 0),
    "rayleigh": (fast_rayleigh, lambda scale=1.0: scale >= 0),
    "weibull": (fast_weibull, lambda a: a > 0),
    "pareto": (fast_pareto, lambda a: a > 0),
    "power": (fast_power, lambda a: a > 0),
    "lognormal": (fast_lognormal, lambda mean=0.0, sigma=1.0: sigma >= 0),
    "standard_cauchy": (fast_standard_cauchy, lambda: True),
    "poisson": (fast_poisson, lambda lam=1.0: 0 <= lam < 10),
    "standard_gamma": (fast_standard_gamma, lambda shape: _finite(shape) and shape > 0),
    "gamma": (fast_gamma, lambda shape, scale=1.0: _finite(shape) and shape > 0 and scale >= 0),
    "beta": (fast_beta, lambda a, b: _finite(a, b) and a > 0 and b > 0),
    "chisquare": (fast_chisquare, lambda df: _finite(df) and df > 0),
    "standard_t": (fast_standard_t, lambda df: _finite(df) and df > 0),
    "normal": (fast_normal, lambda loc=0.0, scale=1.0: scale >= 0),
    "standard_normal": (fast_standard_normal, lambda: True),
    "uniform": (fast_uniform, lambda low=0.0, high=1.0: _finite(high - low)),
}
# The same checks as FAST's, as program text over the parameters ({scale}, ...), for
# parameters known only at run time; each parameter is also checked to be a number.
FAST_CHECKS = {
    "exponential": "{scale} >= 0", "laplace": "{scale} >= 0", "logistic": "{scale} >= 0",
    "gumbel": "{scale} >= 0", "rayleigh": "{scale} >= 0", "weibull": "{a} > 0",
    "pareto": "{a} > 0", "power": "{a} > 0", "lognormal": "{sigma} >= 0",
    "poisson": "{lam} >= 0 && {lam} < 10",
    "standard_gamma": "{shape} > 0 && {shape} < inf",
    "gamma": "{shape} > 0 && {shape} < inf && {scale} >= 0",
    "beta": "{a} > 0 && {a} < inf && {b} > 0 && {b} < inf",
    "chisquare": "{df} > 0 && {df} < inf", "standard_t": "{df} > 0 && {df} < inf",
    "normal": "{scale} >= 0", "uniform": "abs({high} - {low}) < inf",
}


# ---------------------------------------------------------------- np.random.NAME (global stream)

_L = "np.random."


def exponential(scale=1.0, size=None):
    return _exponential(None, _L + "exponential", scale, size)


def standard_exponential(size=None):
    return _exponential(None, _L + "standard_exponential", 1.0, size)


def laplace(loc=0.0, scale=1.0, size=None):
    return _laplace(None, _L + "laplace", loc, scale, size)


def logistic(loc=0.0, scale=1.0, size=None):
    return _logistic(None, _L + "logistic", loc, scale, size)


def gumbel(loc=0.0, scale=1.0, size=None):
    return _gumbel(None, _L + "gumbel", loc, scale, size)


def rayleigh(scale=1.0, size=None):
    return _rayleigh(None, _L + "rayleigh", scale, size)


def weibull(a, size=None):
    return _weibull(None, _L + "weibull", a, size)


def pareto(a, size=None):
    return _pareto(None, _L + "pareto", a, size)


def power(a, size=None):
    return _power(None, _L + "power", a, size)


def triangular(left, mode, right, size=None):
    return _triangular(None, _L + "triangular", left, mode, right, size)


def geometric(p, size=None):
    return _geometric(None, _L + "geometric", p, size)


def standard_cauchy(size=None):
    return _standard_cauchy(None, _L + "standard_cauchy", size)


def lognormal(mean=0.0, sigma=1.0, size=None):
    return _lognormal(None, _L + "lognormal", mean, sigma, size)


def wald(mean, scale, size=None):
    return _wald(None, _L + "wald", mean, scale, size)


def standard_gamma(shape, size=None):
    return _standard_gamma(None, _L + "standard_gamma", shape, size)


def gamma(shape, scale=1.0, size=None):
    return _gamma(None, _L + "gamma", shape, scale, size)


def beta(a, b, size=None):
    return _beta(None, _L + "beta", a, b, size)


def chisquare(df, size=None):
    return _chisquare(None, _L + "chisquare", df, size)


def standard_t(df, size=None):
    return _standard_t(None, _L + "standard_t", df, size)


def f(dfnum, dfden, size=None):
    return _f(None, _L + "f", dfnum, dfden, size)


def dirichlet(alpha, size=None):
    return _dirichlet(None, _L + "dirichlet", alpha, size, False)


def poisson(lam=1.0, size=None):
    return _poisson(None, _L + "poisson", lam, size)


def binomial(n, p, size=None):
    return _binomial(None, _L + "binomial", n, p, size)


def negative_binomial(n, p, size=None):
    return _negative_binomial(None, _L + "negative_binomial", n, p, size)


def multinomial(n, pvals, size=None):
    return _multinomial(None, _L + "multinomial", n, pvals, size)


def hypergeometric(ngood, nbad, nsample, size=None):
    return _hypergeometric(None, _L + "hypergeometric", ngood, nbad, nsample, size, 1)


def multivariate_normal(mean, cov, size=None, check_valid="warn", tol=1e-8):
    return _multivariate_normal(None, _L + "multivariate_normal", mean, cov, size,
                                check_valid, tol)


def choice(a, size=None, replace=True, p=None):
    return _choice(None, _L + "choice", a, size, replace, p)


# ---------------------------------------------------------------- rng.NAME(...) on a generator

_G = "Generator."


def rng_exponential(rng, scale=1.0, size=None):
    return _exponential(rng, _G + "exponential", scale, size)


def rng_standard_exponential(rng, size=None, dtype=None, method="zig", out=None):
    _dtype_out(_G + "standard_exponential", dtype, out)
    return _as_dtype(_exponential(rng, _G + "standard_exponential", 1.0, size), dtype, size)


def rng_laplace(rng, loc=0.0, scale=1.0, size=None):
    return _laplace(rng, _G + "laplace", loc, scale, size)


def rng_logistic(rng, loc=0.0, scale=1.0, size=None):
    return _logistic(rng, _G + "logistic", loc, scale, size)


def rng_gumbel(rng, loc=0.0, scale=1.0, size=None):
    return _gumbel(rng, _G + "gumbel", loc, scale, size)


def rng_rayleigh(rng, scale=1.0, size=None):
    return _rayleigh(rng, _G + "rayleigh", scale, size)


def rng_weibull(rng, a, size=None):
    return _weibull(rng, _G + "weibull", a, size)


def rng_pareto(rng, a, size=None):
    return _pareto(rng, _G + "pareto", a, size)


def rng_power(rng, a, size=None):
    return _power(rng, _G + "power", a, size)


def rng_triangular(rng, left, mode, right, size=None):
    return _triangular(rng, _G + "triangular", left, mode, right, size)


def rng_geometric(rng, p, size=None):
    return _geometric(rng, _G + "geometric", p, size)


def rng_standard_cauchy(rng, size=None):
    return _standard_cauchy(rng, _G + "standard_cauchy", size)


def rng_lognormal(rng, mean=0.0, sigma=1.0, size=None):
    return _lognormal(rng, _G + "lognormal", mean, sigma, size)


def rng_wald(rng, mean, scale, size=None):
    return _wald(rng, _G + "wald", mean, scale, size)


def rng_standard_gamma(rng, shape, size=None, dtype=None, out=None):
    _dtype_out(_G + "standard_gamma", dtype, out)
    return _as_dtype(_standard_gamma(rng, _G + "standard_gamma", shape, size), dtype, size)


def rng_gamma(rng, shape, scale=1.0, size=None):
    return _gamma(rng, _G + "gamma", shape, scale, size)


def rng_beta(rng, a, b, size=None):
    return _beta(rng, _G + "beta", a, b, size)


def rng_chisquare(rng, df, size=None):
    return _chisquare(rng, _G + "chisquare", df, size)


def rng_standard_t(rng, df, size=None):
    return _standard_t(rng, _G + "standard_t", df, size)


def rng_f(rng, dfnum, dfden, size=None):
    return _f(rng, _G + "f", dfnum, dfden, size)


def rng_dirichlet(rng, alpha, size=None):
    return _dirichlet(rng, _G + "dirichlet", alpha, size, True)


def rng_poisson(rng, lam=1.0, size=None):
    return _poisson(rng, _G + "poisson", lam, size)


def rng_binomial(rng, n, p, size=None):
    return _binomial(rng, _G + "binomial", n, p, size)


def rng_negative_binomial(rng, n, p, size=None):
    return _negative_binomial(rng, _G + "negative_binomial", n, p, size)


def rng_multinomial(rng, n, pvals, size=None):
    return _multinomial(rng, _G + "multinomial", n, pvals, size)


def rng_hypergeometric(rng, ngood, nbad, nsample, size=None):
    return _hypergeometric(rng, _G + "hypergeometric", ngood, nbad, nsample, size, 0)


def rng_multivariate_normal(rng, mean, cov, size=None, check_valid="warn", tol=1e-8,
                            method="svd"):
    return _multivariate_normal(rng, _G + "multivariate_normal", mean, cov, size,
                                check_valid, tol)


def rng_shuffled(rng, x, axis=0):
    """rng.shuffle(x, axis)'s new contents of the array x (the translator writes them in)."""
    a = np.asarray(x)
    if a.ndim == 0:
        raise TypeError("[Generator.shuffle] x must be an array or a mutable sequence, got a "
                        "scalar")
    if axis < -a.ndim or axis >= a.ndim:
        raise IndexError("[Generator.shuffle] axis " + str(axis) + " is out of bounds for "
                         "array of dimension " + str(a.ndim))
    return np.take(a, rng.permutation(a.shape[axis]), axis=axis)


def rng_shuffled_list(rng, x, axis=0):
    """rng.shuffle(xs)'s new list: the items in a new order."""
    if axis != 0:
        raise NotImplementedError("[Generator.shuffle] Axis argument is only supported on "
                                  "ndarray objects")
    p = rng.permutation(len(x)).tolist()
    return [x[i] for i in p]


_NAMES = ("exponential", "standard_exponential", "laplace", "logistic", "gumbel", "rayleigh",
          "weibull", "pareto", "power", "triangular", "geometric", "standard_cauchy",
          "lognormal", "wald", "standard_gamma", "gamma", "beta", "chisquare", "standard_t",
          "f", "dirichlet", "poisson", "binomial", "negative_binomial", "multinomial",
          "hypergeometric", "multivariate_normal")
LEGACY = {name: globals()[name] for name in _NAMES + ("choice",)}
GENERATOR = {name: globals()["rng_" + name] for name in _NAMES}
# What binds the arguments of a call of a FAST name: NumPy's signature.
SIGNATURES = {**{name: LEGACY[name] for name in FAST if name in LEGACY},
              "normal": _normal_signature, "uniform": _uniform_signature,
              "standard_normal": _standard_normal_signature}
# NumPy's distributions not translated: an UnsupportedError naming them
REFUSED = ("zipf", "logseries", "vonmises", "noncentral_chisquare", "noncentral_f",
           "multivariate_hypergeometric", "permuted", "bytes", "random_raw", "tomaxint")
