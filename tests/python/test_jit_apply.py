"""np.piecewise, np.vectorize, np.apply_along_axis, np.apply_over_axes,
np.histogram2d and np.histogramdd inside @tessera.jit, against NumPy."""

import numpy as np
import pytest
from jit_check import check

import tessera
from tessera.jit import UnsupportedError

X = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
RNG = np.random.default_rng(5)
S = RNG.normal(size=(60, 3))


def _square_plus_one(v):
    return v * v + 1.0


def _larger(a, b):
    return a if a > b else b * 2


def _three(a, b, c):
    return a * b - c


def _sign_code(v):
    if v > 0:
        return 1
    if v < 0:
        return -1
    return 0


@np.vectorize
def _clipped(v, hi):
    if v > hi:
        return hi
    return v


_as_float = np.vectorize(_sign_code, otypes=[np.float32])


# ---------------------------------------------------------------- piecewise

def _piecewise_funcs(x):
    return np.piecewise(x, [x < 0, x >= 0], [lambda t: -t, lambda t: t * 2.0])


def _piecewise_otherwise(x):
    # one function more than conditions: the last one where none holds; constants too
    return np.piecewise(x, [x < -0.5, x > 0.5], [0.0, lambda t: t ** 2, 1.0])


def _piecewise_one_condition(x):
    return np.piecewise(x, x > 0, [lambda t: t + 10, lambda t: t - 10])


def _piecewise_wrong_count(x):
    return np.piecewise(x, [x < 0, x > 0, x == 0], [1.0])


@pytest.mark.parametrize("f", [_piecewise_funcs, _piecewise_otherwise, _piecewise_one_condition,
                               _piecewise_wrong_count])
@pytest.mark.parametrize("x", [X, np.arange(-3, 4), np.array([0.5])])
def test_piecewise(f, x):
    check(f, x)


# ---------------------------------------------------------------- vectorize

def _vectorize_named(x):
    g = np.vectorize(_square_plus_one)
    return g(x)


def _vectorize_lambda(x):
    g = np.vectorize(lambda a, b: a if a > b else b * 2, otypes=[np.float64])
    return g(x, 0.25)


def _vectorize_nested(x, y):
    def hyp(a, b):
        return (a * a + b * b) ** 0.5
    return np.vectorize(hyp)(x, y)


def _vectorize_three(x):
    return np.vectorize(_three)(x, x[0], 2)


def _vectorize_int_result(x):
    # the dtype is the first result's (a Python int: int64), as NumPy's
    return np.vectorize(_sign_code)(x)


def _vectorize_otypes_string(x):
    return np.vectorize(_sign_code, otypes="d")(x)


def _decorated(x):
    return _clipped(x, 0.5), _as_float(x)


def _vectorize_empty(x):
    return np.vectorize(_square_plus_one)(x[:0])


def _vectorize_empty_otypes(x):
    return np.vectorize(_square_plus_one, otypes=[np.float64])(x[:0])


@pytest.mark.parametrize("f", [_vectorize_named, _vectorize_lambda, _vectorize_three,
                               _vectorize_int_result, _vectorize_otypes_string, _decorated,
                               _vectorize_empty, _vectorize_empty_otypes])
@pytest.mark.parametrize("x", [X, np.arange(-3, 4), np.linspace(-1, 1, 5, dtype=np.float32)])
def test_vectorize(f, x):
    # float32 elements reach the function as Python floats (NumPy's object items)
    check(f, x)


def test_vectorize_broadcasts():
    check(_vectorize_nested, X, np.array([1.0, 2.0, 3.0, 4.0]))
    check(_vectorize_nested, 3.0, 4.0)


def _vectorize_unknown(f, x):
    return np.vectorize(f)(x)


def test_vectorize_of_a_value_is_refused_by_name():
    with pytest.raises(UnsupportedError, match=r"np.vectorize of a function not known.*"
                                               r"test_jit_apply.py:\d+"):
        tessera.jit(_vectorize_unknown)(_square_plus_one, X)


# ---------------------------------------------------------------- apply_along_axis / over_axes

def _along_reduce(x):
    return np.apply_along_axis(np.sum, 1, x), np.apply_along_axis(np.max, 0, x)


def _along_vector(x):
    return np.apply_along_axis(lambda r: r[::-1] * 2, 0, x)


def _along_matrix(x):
    # a 2-d result per lane takes the place of the axis
    return np.apply_along_axis(np.diag, -1, x)


def _along_bad_axis(x):
    return np.apply_along_axis(np.sum, 5, x)


def _over_axes(x):
    return np.apply_over_axes(np.sum, x, [0, 2]), np.apply_over_axes(np.mean, x, 1)


@pytest.mark.parametrize("f", [_along_reduce, _along_vector, _along_matrix, _along_bad_axis])
@pytest.mark.parametrize("x", [X, np.arange(24).reshape(2, 3, 4)])
def test_apply_along_axis(f, x):
    check(f, x)


def test_apply_over_axes():
    check(_over_axes, np.arange(24.0).reshape(2, 3, 4))


# ---------------------------------------------------------------- histogram2d / histogramdd

def _hist2d(x, y):
    return np.histogram2d(x, y)


def _hist2d_options(x, y):
    h1 = np.histogram2d(x, y, bins=[3, 5], range=[[-1, 1], [0, 1]], density=True)
    h2 = np.histogram2d(x, y, bins=np.array([-1.0, 0.0, 0.5, 2.0]), weights=x * x)
    return h1, h2


def _histdd(s):
    h, edges = np.histogramdd(s, bins=(2, 3, 4))
    return h, edges


def _histdd_list(s):
    return np.histogramdd([s[:, 0], s[:, 1]], bins=[np.linspace(-2, 2, 5), 3], density=True)


def _histdd_bad_bins(s):
    return np.histogramdd(s, bins=(2, 3))


@pytest.mark.parametrize("f", [_hist2d, _hist2d_options])
def test_histogram2d(f):
    check(f, S[:, 0], S[:, 1])
    check(f, np.arange(10), np.arange(10) % 3)


@pytest.mark.parametrize("f", [_histdd, _histdd_list, _histdd_bad_bins])
def test_histogramdd(f):
    check(f, S)
