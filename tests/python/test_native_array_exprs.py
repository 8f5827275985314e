"""Array expressions over 1-d views inside native loops (tessera/lang/
native_gen_arrexpr.cpp, docs/runtime.md "Array expressions in native code"):
an elementwise expression whose leaves are numbers and 1-d views (x, X[:, j],
X[i], x[a:b:s]), assigned to a local read only by the reductions after it, or
reduced directly (.sum(), np.sum, .mean(), .max(), .min()), is one scalar
loop with no array made. These must give NumPy's values, dtypes and bits
(pairwise summation), its errors at the user's line (a shape mismatch, an
index out of range), and the same as the loop interpreter and the general
evaluation, at 1 and 2 threads; a local that escapes the loop keeps the loop
off native code, with the same results."""

import numpy as np
import pytest
from jit_check import cases_script, check, loop_log_lines, run_on_every_path, run_script

import tessera


def wdist(A, B, W):
    k, m = A.shape
    _, n = B.shape
    D = np.zeros((m, n))
    for ii in range(m):
        for jj in range(n):
            wdiff = (A[:, ii] - B[:, jj]) / W[:, ii]
            D[ii, jj] = np.sqrt((wdiff ** 2).sum())
    return D


def row_stats(X, c):
    # X[i] of a 2-d array, mean/max/min and a comparison counted.
    n = X.shape[0]
    out = np.zeros((n, 4))
    for i in range(n):
        d = X[i] - c
        out[i, 0] = d.mean()
        out[i, 1] = np.abs(d).max()
        out[i, 2] = (d * d).min()
        out[i, 3] = (d > 0.0).sum()
    return out


def slices(x, k):
    # Constant slices with steps, negative steps and ends past the array.
    s = 0.0
    for i in range(k):
        s += (x[1:7] * i).sum()
        s += (x[::-2] + i).sum()
        s += (x[-5:100:2] - x[0:3]).max()
    return s


def ints(a, b):
    # int64 views: int64 results with NumPy's wrap-around, true division to
    # float64, a Python float promoting to float64.
    n = a.shape[0]
    out = []
    for i in range(n):
        out.append((a[i] * b[:, i] + 7).sum())
        out.append((a[i] // 3 - b[:, i]).min())
        out.append((a[i] / b[:, i]).sum())
        out.append((a[i] + 0.5 * b[:, i]).mean())
    return out


def chained(A, w):
    # A local read by another local's definition, then reduced twice.
    m = A.shape[1]
    out = np.zeros(m)
    for j in range(m):
        d = A[:, j] - w
        e = d * d + 1.0
        out[j] = e.sum() / e.max()
    return out


def sum_lengths(x, n):
    # Float sums of every length up to n: NumPy's pairwise order, its bits.
    out = np.zeros(n + 1)
    for k in range(n + 1):
        out[k] = np.sum(x[0:k] * 1.5 - 0.25 * x[0:k])
    return out


def long_sums(x, ks):
    # Longer runs: NumPy's recursion into halves (the first a multiple of 8).
    out = np.zeros(len(ks))
    for i in range(len(ks)):
        out[i] = (x[0:ks[i]] * 0.5).sum() + x[0:ks[i]].mean()
    return out


def nan_max(x, y):
    out = np.zeros(2)
    for i in range(1):
        out[0] = (x - y).max()
        out[1] = (x + y).min()
    return out


def broadcast(A, W):
    # A view of one element broadcasts; lengths that differ otherwise raise.
    s = 0.0
    for j in range(A.shape[1]):
        s += (A[:, j] * W[0:1, j]).sum()
    return s


def mismatch(A, B):
    s = 0.0
    for j in range(A.shape[1]):
        s += (A[:, j] - B[:, j]).sum()
    return s


def out_of_range(A, k):
    s = 0.0
    for j in range(k):
        s += (A[:, j] * 2.0).sum()
    return s


def unused_error(A, k):
    # The local's error is raised where it is assigned, even when the
    # consumer does not run.
    s = 0.0
    for j in range(k):
        w = A[:, j] * 2.0
        if j > 100:
            s += w.sum()
    return s


def escapes(A):
    # The local is read after the loop: no native code, same results.
    s = 0.0
    for j in range(A.shape[1]):
        w = A[:, j] * 2.0
        s += w.sum()
    return s, w


def scale_rows(X, c):
    # Written into a slice: a row of the result, from a row and a column.
    n, m = X.shape
    out = np.zeros((n, m))
    for i in range(n):
        out[i, :] = X[i, :] * c + X[i, 0]
        out[i, 0:m:2] = np.sqrt(out[i, ::2]) - 1.0
    return out


def int_slices(a, b):
    # int64 destination: int64 values; a number into a stepped slice.
    for i in range(b.shape[0]):
        a[i, :] = b[i, :] * 3 - a[i, :]
        a[i, 1::2] = 7
    return a


def shift(x, k):
    # The value reads what the write would change first: NumPy computes the
    # value first, so native code leaves this to the interpreter (a bail).
    for i in range(k):
        x[1:] = x[:-1] + 1.0
    return x


def in_place(X):
    # The same view read and written: element by element is NumPy's result.
    for i in range(X.shape[0]):
        X[i, :] = X[i, :] * 2.0 + 1.0
    return X


def write_mismatch(X, y):
    for i in range(X.shape[0]):
        X[i, :] = y[0:3] * 2.0
    return X


def written_between(A, out):
    # An element write between the local's assignment and its use, into an
    # array that may be a view of what the local reads.
    s = 0.0
    for j in range(A.shape[1]):
        w = A[:, j] * 2.0
        out[j] = j
        s += w.sum()
    return s


def wheres(X, t):
    # np.where: its dtype from its two values (Python numbers weak).
    n = X.shape[0]
    out = np.zeros((n, 3))
    for i in range(n):
        out[i, 0] = np.where(X[i] > t, X[i], 0.0).sum()
        out[i, 1] = np.where(X[i] > t, 1, 0).sum()
        out[i, 2] = np.where(X[i] < t, X[i] * 2.0, -X[i]).max()
    return out


def dots(A, B):
    # np.dot of two float64 expressions: the general path's order (four
    # partial sums), NumPy's BLAS to rounding.
    m = A.shape[1]
    out = np.zeros((m, 2))
    for j in range(m):
        out[j, 0] = np.dot(A[:, j], B[:, j])
        d = A[:, j] - B[:, m - 1 - j]
        out[j, 1] = np.dot(d, d * 0.5)
    return out


def dot_mismatch(A, B):
    s = 0.0
    for j in range(A.shape[1]):
        s += np.dot(A[:, j], B[:, j])
    return s


def _norm(v):
    return np.sqrt((v * v).sum())


def via_function(A):
    # A function called inline: its parameter holds the expression.
    out = np.zeros(A.shape[1])
    for j in range(A.shape[1]):
        out[j] = _norm(A[:, j] - 1.0)
    return out


def prange_rows(X):
    # A prange loop: each turn its own row, at 1 and 2 threads.
    out = np.zeros((X.shape[0], X.shape[1]))
    for i in tessera.prange(X.shape[0]):
        out[i, :] = X[i, :] * 2.0 - X[i].mean()
    return out


def _rng(seed=0):
    return np.random.default_rng(seed)


def _mat(layout, shape=(5, 12), seed=0):
    r = _rng(seed)
    if layout == "contiguous":
        return r.random(shape)
    if layout == "fortran":
        return np.asfortranarray(r.random(shape))
    if layout == "stepped":
        return r.random((shape[0] * 2, shape[1] * 3))[::2, ::3]
    if layout == "reversed":
        return r.random(shape)[::-1, ::-1]
    raise ValueError(layout)


LAYOUTS = ("contiguous", "fortran", "stepped", "reversed")


def cases():
    out = []
    for lay in LAYOUTS:
        out.append((wdist, (_mat(lay, seed=1), _mat(lay, (5, 9), seed=2),
                            _mat(lay, seed=3) + 0.5)))
        out.append((row_stats, (_mat(lay, (6, 11), seed=4), 0.5)))
        out.append((chained, (_mat(lay, (9, 7), seed=5), _rng(6).random(9))))
    x = _rng(7).random(20)
    out.append((slices, (x, 4)))
    out.append((slices, (x[::-1].copy()[3:], 3)))
    a = _rng(8).integers(-5, 6, size=6)
    b = _rng(9).integers(1, 9, size=(7, 6))
    out.append((ints, (a, b)))
    big = np.array([2 ** 62, 2 ** 62, -3], dtype=np.int64)
    out.append((ints, (big, np.full((4, 3), 3, dtype=np.int64))))
    out.append((sum_lengths, (_rng(10).standard_normal(300) * 1e3, 300)))
    out.append((long_sums, (_rng(24).standard_normal(3000), np.array([0, 7, 130, 999, 3000]))))
    out.append((nan_max, (np.array([1.0, np.nan, 3.0]), np.array([0.5, 0.5, 0.5]))))
    out.append((nan_max, (np.array([1.0, 2.0, -3.0]), np.array([0.5, -7.5, 0.5]))))
    out.append((broadcast, (_mat("contiguous", (5, 8)), _mat("fortran", (3, 8), seed=11))))
    out.append((mismatch, (_rng(12).random((5, 4)), _rng(13).random((4, 4)))))
    out.append((out_of_range, (_rng(14).random((5, 4)), 6)))
    out.append((escapes, (_rng(15).random((4, 6)),)))
    out.append((unused_error, (_rng(15).random((4, 6)), 6)))
    out.append((unused_error, (_rng(15).random((4, 6)), 5)))
    for lay in LAYOUTS:
        out.append((scale_rows, (_mat(lay, (5, 7), seed=16), 1.5)))
        out.append((in_place, (_mat(lay, (4, 6), seed=17),)))
    out.append((int_slices, (_rng(18).integers(-9, 9, size=(4, 6)), _rng(19).integers(-9, 9, size=(4, 6)))))
    out.append((shift, (np.arange(8.0), 3)))
    out.append((wheres, (_mat("stepped", (6, 9), seed=25), 0.4)))
    for k in (1, 3, 4, 9, 130):
        out.append((dots, (_mat("fortran", (k, 5), seed=27), _mat("stepped", (k, 5), seed=28))))
    out.append((via_function, (_mat("reversed", (6, 11), seed=31),)))
    out.append((dot_mismatch, (_rng(29).random((4, 3)), _rng(30).random((5, 3)))))
    out.append((prange_rows, (_rng(26).random((3000, 5)),)))
    out.append((write_mismatch, (_rng(20).random((3, 4)), _rng(21).random(5))))
    A = _rng(22).random((4, 6))
    out.append((written_between, (A, _rng(23).random(6))))
    out.append((written_between, (A, A[0])))  # writes what the local reads
    return out


CASES = cases()
NATIVE = (wdist, row_stats, chained, slices, ints, sum_lengths, long_sums, nan_max, broadcast,
          mismatch, out_of_range, wheres, dots, dot_mismatch, via_function, unused_error, prange_rows, scale_rows, int_slices, shift, in_place, write_mismatch,
          written_between)


@pytest.mark.parametrize("f, args", CASES, ids=[f"{f.__name__}-{i}" for i, (f, _) in
                                                enumerate(CASES)])
def test_agrees_with_numpy(f, args):
    check(f, *args, rtol=1e-13)


def test_sums_have_numpys_bits():
    # Pairwise summation as NumPy's: 8 partial sums from 8 elements, one
    # run up to 128, longer runs split in halves.
    x = _rng(16).standard_normal(300) * 1e3
    got = tessera.jit(sum_lengths)(x, 300)
    assert got.tobytes() == sum_lengths(x, 300).tobytes()
    ks = np.array([129, 255, 256, 257, 1000, 4097, 20001])
    y = _rng(17).standard_normal(20001)
    assert tessera.jit(long_sums)(y, ks).tobytes() == long_sums(y, ks).tobytes()
    A, B, W = _mat("contiguous", (9, 40), 1), _mat("stepped", (9, 30), 2), _mat("fortran", (9, 40), 3)
    assert tessera.jit(wdist)(A, B, W + 0.5).tobytes() == wdist(A, B, W + 0.5).tobytes()


def test_dtypes():
    a = _rng(8).integers(-5, 6, size=6)
    b = _rng(9).integers(1, 9, size=(7, 6))
    got, want = tessera.jit(ints)(a, b), ints(a, b)
    assert [type(g) for g in got] == [type(w) for w in want]
    assert got == want
    X = _mat("contiguous", (6, 11), 4)
    assert tessera.jit(row_stats)(X, 0.5).dtype == np.float64


@pytest.mark.parametrize("f, args, at", [
    (mismatch, (_rng(12).random((5, 4)), _rng(13).random((4, 4))), 3),
    (out_of_range, (_rng(14).random((5, 4)), 6), 3),
    (write_mismatch, (_rng(20).random((3, 4)), _rng(21).random(5)), 2),
    (unused_error, (_rng(15).random((4, 6)), 7), 5)])
def test_errors_at_the_users_line(f, args, at):
    with pytest.raises(Exception) as want:
        f(*args)
    with pytest.raises(type(want.value)) as got:
        tessera.jit(f)(*args)
    line = f.__code__.co_firstlineno + at  # the line of the array expression
    assert f"test_native_array_exprs.py:{line}" in str(got.value), str(got.value)


def test_every_path_prints_the_same_at_1_and_2_threads():
    outs = run_on_every_path(cases_script("test_native_array_exprs"), TESSERA_CACHE_DIR="0")
    native, log = outs["native"]
    assert native == outs["interpreter"][0] == outs["general"][0]
    for f in NATIVE:
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
        assert not loop_log_lines(log, f, "no native code"), (f.__name__, log)
    assert loop_log_lines(log, escapes, "no native code"), log


def test_native_code_makes_no_arrays():
    # The same script under TESSERA_FAST_LOOPS=0 (the general evaluation)
    # and native code: wdist's loop turns are native code's (no bail).
    script = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_array_exprs as t
A, B, W = t._mat("contiguous", (5, 150), 1), t._mat("contiguous", (5, 150), 2), t._mat("contiguous", (5, 150), 3) + 0.5
print(tessera.jit(t.wdist)(A, B, W).sum())
"""
    out, log = run_script(script, TESSERA_FAST_LOOPS="debug", TESSERA_CACHE_DIR="0")
    assert "native code compiled" in log and "bail" not in log, log
