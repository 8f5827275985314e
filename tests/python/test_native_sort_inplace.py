"""`x.sort()` of a 1-d array inside a loop in native code
(tessera/lang/native_gen_arrays.cpp Gen::sort_in_place, the helper native_sort_1d;
docs/runtime.md "Native loops"): the array sorted in place as the sort primitive
sorts (NumPy's order: NaNs last, stable), logged whole once so that a loop that
bails rolls back. Compared exactly with Python/NumPy (results, arrays written in
place, exceptions), the three paths print the same, and the loops end natively."""

import os
import sys

import numpy as np
import pytest
from jit_check import assert_loops_end_natively, cases_script, run_on_every_path

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from unseen_kernels import median_filter3  # noqa: E402 - bench/, on the path above (a 3x3
# median filter by loops: nine neighbours into a window, window.sort(), its middle)


def windows(x, w):
    # Each window of w items sorted in a scratch array, its smallest, middle
    # and largest kept; the scratch array is returned as the last sort left it.
    n = len(x) - w + 1
    buf = np.empty(w, dtype=x.dtype)
    lo = np.empty(n, dtype=x.dtype)
    mid = np.empty(n, dtype=x.dtype)
    hi = np.empty(n, dtype=x.dtype)
    for i in range(n):
        for k in range(w):
            buf[k] = x[i + k]
        buf.sort()
        lo[i] = buf[0]
        mid[i] = buf[w // 2]
        hi[i] = buf[w - 1]
    return lo, mid, hi, buf


def sort_argument(a, rows):
    # Sorting an argument (and a strided view of it) in place: the caller sees it.
    v = a[::2]
    for r in range(rows):
        v.sort()
        a[r] = a[r] + 1
    a.sort()
    return a[0]


def sort_then_fail(a, at):
    # The loop sorts, then meets an index out of range: NumPy's array is left
    # sorted as far as Python got, and the IndexError is the same.
    s = 0
    for i in range(len(a) + 1):
        a.sort()
        s += a[at + i]
    return s


def long_window(x):
    # More than 32 items: the helper's stable sort of a copy.
    w = np.empty(len(x), dtype=x.dtype)
    t = 0.0
    for r in range(3):
        for k in range(len(x)):
            w[k] = x[(k * 7 + r) % len(x)]
        w.sort()
        t += w[len(w) // 3]
    return t, w


_RNG = np.random.default_rng(7)
_F = _RNG.standard_normal(40)
_F[[3, 17]] = np.nan
_F[[5, 6]] = [0.0, -0.0]

CASES = [
    (windows, (_F, 9)),
    (windows, (_F.astype(np.float32), 5)),
    (windows, (_RNG.integers(-50, 50, 30), 7)),
    (windows, (_RNG.integers(0, 256, 30).astype(np.uint8), 9)),
    (windows, (_RNG.integers(-100, 100, 30).astype(np.int16), 4)),
    (windows, (_RNG.integers(0, 2, 20).astype(bool), 5)),
    (sort_argument, (_RNG.standard_normal(12), 4)),
    (sort_argument, (_RNG.integers(-9, 9, 11).astype(np.int32), 3)),
    (sort_then_fail, (np.array([5.0, 1.0, 3.0, 2.0]), 0)),
    (sort_then_fail, (np.array([5, 1, 3, 2]), 1)),
    (long_window, (_RNG.standard_normal(50),)),
    (long_window, (_RNG.integers(0, 9, 45).astype(np.uint16),)),
    (median_filter3, (_RNG.random((9, 11)),)),
    (median_filter3, (_RNG.integers(0, 256, (7, 8)).astype(np.uint8),)),
]
IDS = [f.__name__ + str(i) for i, (f, _) in enumerate(CASES)]

# Loops that must run natively to their end (status 0 or 5), on every call.
NATIVE = (windows, long_window, median_filter3)


def _same(got, want, path="result"):
    # NumPy's: types at every level, arrays' dtypes, values with NaN equal to
    # NaN. Not the sign of zeros: where -0.0 and 0.0 tie, NumPy's SIMD sort
    # (not stable) places them as it happens to, tessera's stably (the three
    # paths are compared with their signs below).
    assert type(got) is type(want), (path, got, want)
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want), (path, got, want)
        for k, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{path}[{k}]")
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True), (path, got, want)


def _copy(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f, args", CASES, ids=IDS)
def test_sort_in_place_as_numpy(f, args, threads):
    theirs, mine = _copy(args), _copy(args)
    try:
        want = f(*theirs)
    except IndexError:
        with pytest.raises(IndexError, match="out of bounds"):
            tessera.jit(f, threads=threads)(*mine)
    else:
        _same(tessera.jit(f, threads=threads)(*mine), want)
    for m, t in zip(mine, theirs):  # arrays sorted in place, as Python left them
        if isinstance(t, np.ndarray):
            _same(m, t, "argument")


def test_every_path_prints_the_same_and_the_loops_run_natively():
    runs = run_on_every_path(cases_script("test_native_sort_inplace"), TESSERA_CACHE_DIR="0")
    native, log = runs["native"]
    assert native == runs["interpreter"][0] == runs["general"][0]
    assert "IndexError" in native
    assert_loops_end_natively(log, NATIVE)
