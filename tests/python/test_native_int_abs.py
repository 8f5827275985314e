"""abs() of ints in native loops: an int of the same kind (Python's int, NumPy's int64 and
int32), as Python and NumPy give it, the loop compiled (it was refused: "'abs' of a int
does not give a float"); past int64 the general path's OverflowError, NumPy's wrap-around."""

import numpy as np
import pytest
from jit_check import check, loop_log_lines, run_on_every_path

import tessera


def diffs(xs, c):
    total = 0
    for x in xs:
        total += abs(x - c) + abs(-x)
    return total


def diffs_np(a, b):
    s = 0
    for i in range(len(a)):
        s += abs(a[i] - b[i]) + np.abs(a[i])
    return s


def queens_ok(cols, row, c):
    ok = True
    for r, cc in enumerate(cols):
        if cc == c or abs(cc - c) == row - r:
            ok = False
            break
    return ok


CASES = [(diffs, ([3, -7, 12, 0, -2**60], 5)),
         (diffs_np, (np.array([3, -7, 2**40], np.int64), np.array([-1, 9, 4], np.int64))),
         (diffs_np, (np.array([3, -7, 2**30], np.int32), np.array([-1, 9, -2**30], np.int32))),
         (queens_ok, ([0, 4, 7, 5], 4, 2)), (queens_ok, ([0, 4, 7, 5], 4, 1))]


@pytest.mark.parametrize("f,args", CASES)
def test_abs_of_ints_is_pythons_and_numpys(f, args):
    with np.errstate(over="ignore"):
        check(f, *args, rtol=0, atol=0)


def test_abs_past_int64_is_an_overflow_error_and_numpys_wraps():
    def py(xs):
        t = 0
        for x in xs:
            t = abs(x)
        return t

    def npy(a):
        t = a[0]
        for i in range(len(a)):
            t = abs(a[i])
        return t

    with pytest.raises(OverflowError):
        tessera.jit(py)([1, -2**63])
    with np.errstate(over="ignore"):
        a = np.array([1, -2**63], np.int64)
        assert tessera.jit(npy)(a) == npy(a) == -2**63


_SCRIPT = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_int_abs as t
for threads in (1, 2):
    for f, args in t.CASES:
        print(f.__name__, threads, repr(tessera.jit(f, threads=threads)(*args)))
"""


def test_the_loops_are_native_and_every_path_prints_the_same():
    runs = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    assert runs["native"][0] == runs["interpreter"][0] == runs["general"][0]
    log = runs["native"][1]
    for f in (diffs, diffs_np, queens_ok):
        assert loop_log_lines(log, f, "native code compiled"), log
