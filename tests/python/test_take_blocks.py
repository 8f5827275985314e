"""take and take_grad along one axis with an integer index array (an
embedding's lookup and its gradient): the whole-block path against NumPy
(np.take, np.add.at) for every axis, index dtype, negative and repeated
indices; the cases left to the general selection (uint64, lists, out of range)
give NumPy's values or its error; bits independent of the thread count."""

import os

import numpy as np
import pytest

import tessera

RNG = np.random.default_rng(53)


def _take(x, idx, axis):
    return tessera.call_primitive("take", [x, idx], {"axis": axis})


def _take_grad(g, x, idx, axis):
    return tessera.call_primitive("take_grad", [g, x, idx], {"axis": axis})


def _add_at(x, idx, g, axis):
    """NumPy: g added at the taken positions along axis (repeats accumulate)."""
    out = np.zeros_like(x)
    ax = axis % x.ndim
    np.add.at(out, (slice(None),) * ax + (idx,), g)
    return out


INDICES = [np.array([1, -1, 2, 2, 0]), np.array([[0, 3], [-2, 1]], np.int32),
           np.array(2, np.int16), np.array([], np.int64), np.array([3, 1], np.uint8)]


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.complex64, np.bool_])
def test_take_matches_numpy(axis, dtype):
    x = (RNG.normal(size=(5, 4, 6)) * 10).astype(dtype)
    for idx in INDICES:
        got = _take(x, idx, axis)
        want = np.take(x, idx, axis=axis)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want), (axis, idx)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_take_grad_matches_add_at(axis, dtype):
    x = RNG.normal(size=(6, 5, 4)).astype(dtype)
    for idx in INDICES[:4]:
        g = RNG.normal(size=np.take(x, idx, axis=axis).shape).astype(dtype)
        got = _take_grad(g, x, idx, axis)
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_allclose(got, _add_at(x, idx, g, axis), rtol=1e-6, atol=1e-6)


def test_other_indices_keep_numpys_values_and_errors():
    x = RNG.normal(size=(6, 3)).astype(np.float32)
    assert np.array_equal(_take(x, np.array([5, 0], np.uint64), 0), x[[5, 0]])
    assert np.array_equal(_take(x, [4, -6], 0), x[[4, -6]])
    with pytest.raises(IndexError, match=r"\[take\] index 6 is out of bounds for axis 0 with "
                                         r"size 6"):
        _take(x, np.array([1, 6]), 0)
    with pytest.raises(IndexError, match=r"\[take\] index -7 is out of bounds"):
        _take(x, np.array([-7]), 0)
    # a gradient of another dtype than x's, or a float16 x (computed in
    # float32, as before): the general path
    idx = np.array([2, 2, 5])
    g = RNG.normal(size=(3, 3))
    np.testing.assert_allclose(_take_grad(g, x, idx, 0), _add_at(x, idx, g, 0).astype(np.float32),
                               rtol=1e-6)
    x16 = x.astype(np.float16)
    got = _take_grad(g.astype(np.float16), x16, idx, 0)
    np.testing.assert_allclose(got.astype(np.float64),
                               _add_at(x16, idx, g.astype(np.float16), 0), rtol=1e-3)


def test_embedding_lookup_and_gradient_bits_do_not_depend_on_the_thread_count():
    table = RNG.normal(size=(500, 16)).astype(np.float32)
    idx = RNG.integers(0, 500, size=(64, 40))
    g = RNG.normal(size=(64, 40, 16)).astype(np.float32)
    results = []
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            results.append((_take(table, idx, 0), _take_grad(g, table, idx, 0)))
    finally:
        tessera.set_num_threads(os.cpu_count())
    for out, grad in results[1:]:
        assert np.array_equal(out, results[0][0]) and np.array_equal(grad, results[0][1])
    np.testing.assert_allclose(results[0][1], _add_at(table, idx, g, 0), rtol=1e-5, atol=1e-5)


def _rows(x, idx):
    return x[idx]


@pytest.mark.parametrize("xdtype", [np.float64, np.float32, np.int64, np.int32, np.int8,
                                    np.bool_, np.complex128])
@pytest.mark.parametrize("idtype", [np.int64, np.int32, np.uint8, np.uint64])
def test_rows_by_an_integer_array_match_numpy(xdtype, idtype):
    # x[idx]: whole rows of x (1-d: elements; 2-d: a lookup table's rows of 2, 3, 4, 8
    # words; 3-d), repeated and (for signed indices) negative indices, a 2-d index
    # array; a view x takes the general selection. The value and dtype of NumPy's.
    f = tessera.jit(_rows)
    for shape in ((9,), (9, 2), (9, 3), (9, 4), (9, 8), (9, 2, 5)):
        # (a contiguous view of 9 rows starting one row into its buffer)
        x = (RNG.normal(size=(10,) + shape[1:]) * 10).astype(xdtype)[1:]
        idx = RNG.integers(-9 if np.issubdtype(idtype, np.signedinteger) else 0, 9,
                           size=(4, 50)).astype(idtype)
        idx[0, :5] = 3
        for xs in (x, x[::-1], np.asfortranarray(x)):
            got, want = f(xs, idx), xs[idx]
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_rows_by_an_out_of_range_index_are_numpys_index_error_at_the_users_line():
    x = np.arange(12.0).reshape(6, 2)
    for bad in (np.array([0, 6]), np.array([-7, 1])):
        with pytest.raises(IndexError):
            x[bad]
        with pytest.raises(IndexError, match=r"test_take_blocks.py:\d+"):
            tessera.jit(_rows)(x, bad)


def test_a_numpy_integer_index_is_a_view_of_the_row_not_rows_by_an_array():
    # np.argmax gives NumPy's int64 scalar (a 0-d array here): x[i] is then basic
    # indexing, a view, and a write through it reaches x; x[np.array([i])] is a copy.
    def f(x, y):
        i = np.argmax(y)
        v = x[i]
        v[0] = 7.0
        w = x[np.array([i])]
        w[0, 1] = 9.0
        return v, w

    for threads in (1, 2):
        x, want_x = np.zeros((3, 2)), np.zeros((3, 2))
        got = tessera.jit(f, threads=threads)(x, np.array([0, 5, 1]))
        want = f(want_x, np.array([0, 5, 1]))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(x, want_x)  # the write through the view reached x
