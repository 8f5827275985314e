"""Chained element accesses in native loops (docs/runtime.md, "Native loops"):
`A[i][j]`, `A[i][j] = v`, `A[i][j] += v` and deeper chains of an array of two
or more dims compile to one element access, as `A[i, j]` (NumPy's meaning
for integer indices: A[i] is a view of row i). Answers, arrays changed in
place and errors (IndexError at the line) are NumPy's, the same with native
code, the register interpreter and the general evaluation, at 1 and 2
threads; the loops must run as native code (the debug log). Lists of lists
indexed the same way keep Python's meaning."""

import numpy as np
import pytest
from jit_check import cases_script, check, loop_log_lines, run_on_every_path

import tessera


def add_one_chained(A):
    t = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            A[i][j] += 1.0
            t += A[i][j]
    return t


def matmul_chained(A, B, C):
    # The textbook triple loop as written for lists of lists.
    n, m = A.shape
    p = B.shape[1]
    for i in range(n):
        for j in range(p):
            s = 0.0
            for k in range(m):
                s += A[i][k] * B[k][j]
            C[i][j] = s
    return C


def floyd_warshall(d):
    n = d.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                if d[i][k] + d[k][j] < d[i][j]:
                    d[i][j] = d[i][k] + d[k][j]
    return d


def negative_and_mixed(A):
    # Negative indices in each place, and a chain mixing A[i][j, k] forms.
    t = 0
    for i in range(A.shape[0]):
        t += A[-1 - i][i % A.shape[1]][-1] + A[i][0, 1]
        A[i][-1][0] = t
    return t


def three_dims(V, n):
    for rep in range(n):
        for i in range(V.shape[0]):
            for j in range(V.shape[1]):
                for k in range(V.shape[2]):
                    V[i][j][k] = V[i][j][k] * 0.5 + i - j + k
    return V.sum()


def int_and_float32(a, b):
    s = 0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i][j] = a[i][j] * 3 + 1
            b[i][j] += 0.5
            s += a[i][j]
    return s


def index_past_the_end(A, n):
    t = 0.0
    for i in range(n):
        t += A[i][0]
    return t


def lists_of_lists(xs):
    t = 0
    for i in range(len(xs)):
        for j in range(len(xs[i])):
            xs[i][j] += i
            t += xs[i][j]
    return t, xs


def edit_distance_rows(a, b):
    d = np.zeros((len(a) + 1, len(b) + 1), dtype=np.int64)
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
    return d[len(a)][len(b)]


def rows_dot(A):
    t = 0.0
    for row in A:
        t += row[0] * row[1] - row[-1]
    return t, row  # the last row, as Python leaves it


def hyantes_like(t, nx, ny):
    # bench/published_kernels.py's hyantes: rows of a table read in the
    # innermost loop, a grid written by pt[i][j] +=.
    pt = np.zeros((nx, ny))
    for i in range(nx):
        for j in range(ny):
            for k in t:
                d = (k[0] - i) ** 2 + (k[1] - j) ** 2
                if d < 30.0:
                    pt[i][j] += k[2] / (1 + d)
    return pt


def row_by_index(A, idx):
    t = 0
    for n in range(len(idx)):
        r = A[idx[n]]
        t += r[1, 2] * n + r[0, 1]
    return t


def row_read_before_assigned(A, n):
    i = 0
    t = 0.0
    while i < n:
        if i > 0:
            t += r[1]  # noqa: F821 - assigned below on the turn before
        r = A[i]
        i += 1
    return t


def rows_of_ints_and_float32(a, b):
    s = 0
    for ra in a:
        for rb in b:
            s += ra[0] * rb[1] + ra[-1]
    return s


_rng = np.random.default_rng(7)
CASES = [(add_one_chained, (_rng.random((40, 30)),)),
         (matmul_chained, (_rng.random((12, 9)), _rng.random((9, 7)), np.zeros((12, 7)))),
         (floyd_warshall, (np.where(_rng.random((20, 20)) < 0.3, _rng.random((20, 20)), 50.0),)),
         (negative_and_mixed, (np.arange(60, dtype=np.int64).reshape(5, 4, 3),)),
         (three_dims, (_rng.random((4, 5, 6)), 3)),
         (int_and_float32, (np.arange(24, dtype=np.int64).reshape(4, 6),
                            np.ones((4, 6), dtype=np.float32))),
         (index_past_the_end, (np.ones((30, 2)), 31)),
         (lists_of_lists, ([[1, 2, 3], [4, 5], [6]],)),
         (edit_distance_rows, (np.array([1, 2, 3, 4, 5, 1]), np.array([2, 3, 9, 4, 1]))),
         (rows_dot, (_rng.random((500, 3)),)),
         (hyantes_like, (_rng.random((40, 3)) * [10, 12, 3], 10, 12)),
         (row_by_index, (np.arange(60).reshape(10, 2, 3), np.array([3, -1, 0, 9, -10]))),
         (row_by_index, (np.arange(60).reshape(10, 2, 3), np.array([3, 10]))),
         (row_read_before_assigned, (_rng.random((50, 2)), 50)),
         (rows_of_ints_and_float32, (np.arange(12, dtype=np.int32).reshape(4, 3),
                                     np.ones((5, 2), dtype=np.float32)))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_chained_indexing_agrees_with_numpy(f, args, threads):
    check(f, *args)


def test_index_error_of_a_chain_names_its_line():
    with pytest.raises(IndexError) as e:
        tessera.jit(index_past_the_end)(np.ones((30, 2)), 31)
    line = index_past_the_end.__code__.co_firstlineno + 3
    assert f"test_native_chains.py:{line}" in str(e.value)


_SCRIPT = cases_script("test_native_chains")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native
    # The chained loops compiled to native code (not refused by the generator).
    for f in (add_one_chained, matmul_chained, floyd_warshall, negative_and_mixed, three_dims,
              int_and_float32, edit_distance_rows, rows_dot, hyantes_like, row_by_index,
              row_read_before_assigned, rows_of_ints_and_float32):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
        refused = loop_log_lines(log, f, "no native code")
        assert not refused, (f.__name__, refused)
