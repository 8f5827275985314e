"""np.array of a list of numbers built in jit code (appends in a loop, displays): the
dtype NumPy gives (Python bools, ints, floats and NumPy scalars of several dtypes
promoted together) and the values, at 1 and 2 threads."""

import numpy as np
import pytest

import tessera


def appended(x, threshold):
    out = []
    for i in range(len(x)):
        if x[i] > threshold:
            out.append(x[i] * 2.0)
    return np.array(out)


def mixed(x, y, k):
    a = np.array([x[0], y[1]])          # float32 and int32 NumPy scalars
    b = np.array([k, True, 2])          # Python int and bool
    c = np.array([True, False])
    d = np.array([y[0], 2.5])           # int32 scalar and a Python float
    e = np.array([x[1], 3])             # float32 scalar and a Python int
    f = np.array([y[0], y[1]])          # int32 only
    g = np.array([x[0] > 0, y[0]])      # NumPy bool and int32
    h = np.array([float(k), k // 2, x[0] * 1.5])
    return a, b, c, d, e, f, g, h


@pytest.mark.parametrize("threads", [1, 2])
def test_a_list_appended_in_a_loop_becomes_numpys_array(threads):
    x = np.random.default_rng(3).random(5000)
    for src, args in ((x, 0.5), (x.astype(np.float32), 0.25), ((x * 100).astype(np.int64), 40)):
        got = tessera.jit(appended, threads=threads)(src, args)
        want = appended(src, args)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_lists_of_numbers_of_mixed_kinds_promote_as_numpy(threads):
    x = np.array([1.25, -2.5], dtype=np.float32)
    y = np.array([3, -4], dtype=np.int32)
    got = tessera.jit(mixed, threads=threads)(x, y, 7)
    want = mixed(x, y, 7)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, (k, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)


def test_an_empty_list_and_a_list_of_rows_are_unchanged():
    def f(x):
        rows = []
        for i in range(3):
            rows.append(x * i)
        return np.array([]), np.array(rows)
    x = np.arange(4.0)
    got, want = tessera.jit(f)(x), f(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
