"""Element writes no check before the loop covers (docs/runtime.md, "Native
loops"): the native code logs their old bytes until its log holds as many
bytes as the array, then copies the array once and logs no more of its
writes in that call (an insertion sort's millions of shifts cost one copy).
Whatever stops the native code after the copy — an index out of range, a
variable changing kind — must leave the arrays exactly as Python leaves
them: the copy puts the array back as it was at the call's start and the
interpreter redoes the turns since."""

import os
import sys

import numpy as np
import pytest
from jit_check import (assert_loops_end_natively, cases_script, check, loop_log_lines,
                       run_on_every_path, run_script)

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import insertion_sort  # noqa: E402 - bench/, on the path above


def shifts_then_index_error(arr, stop):
    for i in range(1, len(arr)):
        key = arr[i]
        j = i - 1
        while j >= 0 and arr[j] > key:
            arr[j + 1] = arr[j]
            j -= 1
        arr[j + 1] = key
        if i == stop:
            arr[len(arr) + i] = 0.0
    return arr


def shifts_then_kind_change(arr, stop):
    # `s` an int until turn `stop`, then a float: the native code (compiled
    # for an int) stops there; the interpreter goes on from the call's start.
    s = 0
    for i in range(1, len(arr)):
        key = arr[i]
        j = i - 1
        while j >= 0 and arr[j] > key:
            arr[j + 1] = arr[j]
            j -= 1
            s += 1
        arr[j + 1] = key
        if i == stop:
            s = s + 0.5
    return arr, s


def two_arrays(a, b):
    # Writes into two arrays, one large and written a few times (logged),
    # one small and written often (copied).
    n = len(a)
    for i in range(1, n):
        j = i - 1
        while j >= 0 and a[j] > a[i]:
            b[j % 7] += 1.0
            j -= 1
        a[i] = a[i] + 0.0 * b[i % 7]
    return a, b


# A while loop whose condition guards its index from below and whose body
# runs the index down (docs/runtime.md, "Loop nests"): its accesses are
# proven in range before the nest, so they are neither checked nor logged
# (the array copied once per call instead). Each case below must stay
# Python's, proven or not.


def shifts_by_two_strict(arr, lo):
    # j > lo, j -= 2, the bound a variable: j stays above lo - 2
    for i in range(lo + 2, len(arr)):
        key = arr[i]
        j = i - 2
        while j > lo and arr[j] > key:
            arr[j + 2] = arr[j]
            j -= 2
        arr[j + 2] = key
    return arr


def guard_that_lets_j_reach_minus_one(arr):
    # j >= -1: arr[j] at j == -1 is the last element, as in Python (no proof)
    count = 0
    for i in range(1, len(arr)):
        j = i - 1
        while j >= -1 and arr[j] > arr[i]:
            count += 1
            j -= 1
    return count


def read_after_the_decrement(arr):
    # after `j -= 1` the guard no longer holds: arr[j] at j == -1 is the last
    # element, as in Python
    total = 0.0
    for i in range(1, len(arr)):
        j = i - 1
        while j >= 0 and arr[j] > arr[i]:
            j -= 1
            total += arr[j]
    return total


def guard_of_numpy_ints(arr, starts):
    # j an np.int64 (an element of an int array): `j >= 0` is a NumPy bool
    count = 0
    for i in range(len(starts)):
        j = starts[i]
        while j >= 0 and arr[j] > 0.5:
            count += 1
            j -= 1
    return count


def sort_then_zero_division(arr, stop):
    # shifts proven, then 1 // 0 at turn `stop`: the native code stops there
    # with the array written since its start; Python's array is sorted up to
    # `stop` when the error comes.
    s = 0
    for i in range(1, len(arr)):
        key = arr[i]
        j = i - 1
        while j >= 0 and arr[j] > key:
            arr[j + 1] = arr[j]
            j -= 1
        arr[j + 1] = key
        s += 1 // (stop - i)
    return s


def sort_then_unproven_index_error(arr, stop):
    # arr[i * 3] is not an interval the nest knows: checked in the unchecked
    # version, whose bail there puts the copy back
    t = 0.0
    for i in range(1, len(arr)):
        key = arr[i]
        j = i - 1
        while j >= 0 and arr[j] > key:
            arr[j + 1] = arr[j]
            j -= 1
        arr[j + 1] = key
        if i >= stop:
            t += arr[i * 3]
    return t


GUARDED_CASES = [
    (insertion_sort, (np.random.default_rng(9).random(700),)),
    (insertion_sort, (np.random.default_rng(9).integers(-50, 50, 500),)),
    (shifts_by_two_strict, (np.random.default_rng(9).random(600), 3)),
    (shifts_by_two_strict, (np.random.default_rng(9).random(40), 0)),
    (guard_that_lets_j_reach_minus_one, (np.random.default_rng(9).random(300),)),
    (read_after_the_decrement, (np.random.default_rng(9).random(300),)),
    (guard_of_numpy_ints, (np.random.default_rng(9).random(50), np.arange(0, 50, 7))),
    (sort_then_zero_division, (np.random.default_rng(9).random(900), 600)),
    (sort_then_zero_division, (np.random.default_rng(9).random(900), 2)),
    (sort_then_unproven_index_error, (np.random.default_rng(9).random(900), 400)),
]


RNG = np.random.default_rng(5)


def _python_then(f, args):
    """f's result or exception and its arguments afterwards, under Python."""
    try:
        return ("ok", f(*args)), args
    except Exception as e:  # noqa: BLE001 - compared with tessera's below
        return ("raise", type(e)), args


@pytest.mark.parametrize("n", [2, 17, 300, 2500])
def test_insertion_sort_in_place(threads, n):
    a = RNG.random(n)
    check(insertion_sort, a)
    check(insertion_sort, np.arange(n, 0, -1).astype(np.int64))


@pytest.mark.parametrize("stop", [5, 900, 1999])
def test_arrays_after_a_late_index_error_are_pythons(threads, stop):
    a = RNG.random(2000)
    want, want_args = _python_then(shifts_then_index_error, (a.copy(), stop))
    assert want[0] == "raise" and want[1] is IndexError
    got = a.copy()
    with pytest.raises(IndexError):
        tessera.jit(shifts_then_index_error)(got, stop)
    np.testing.assert_array_equal(got, want_args[0])


@pytest.mark.parametrize("stop", [3, 1500])
def test_a_kind_change_after_the_copy_gives_pythons_answer(threads, stop):
    a = RNG.random(1800)
    check(shifts_then_kind_change, a, stop)


def test_a_large_array_written_rarely_and_a_small_one_often(threads):
    a = RNG.random(1500)
    b = np.zeros(7)
    check(two_arrays, a, b)


_SCRIPT = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_write_log as t
a = np.random.default_rng(3).random(1200)
for f, args in [(t.insertion_sort, (a.copy(),)), (t.shifts_then_kind_change, (a.copy(), 700)),
                (t.two_arrays, (a.copy(), np.zeros(7)))]:
    print(f.__name__, repr(tessera.jit(f)(*args)))
b = a.copy()
try:
    tessera.jit(t.shifts_then_index_error)(b, 1000)
except IndexError as e:
    print("IndexError", e, repr(b))
"""


def test_native_interpreter_and_general_agree():
    native, log = run_script(_SCRIPT, TESSERA_FAST_LOOPS="debug")
    interp, _ = run_script(_SCRIPT, TESSERA_NATIVE="0")
    general, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert native == interp == general
    assert "native code compiled" in log or "native code loaded" in log


@pytest.mark.parametrize("f, args", GUARDED_CASES,
                         ids=[f.__name__ + str(i) for i, (f, _) in enumerate(GUARDED_CASES)])
def test_guarded_while_loops_agree_with_python(f, args, threads):
    check(f, *args)


@pytest.mark.parametrize("stop", [2, 450, 899])
def test_arrays_after_an_error_in_a_proven_sort_are_pythons(threads, stop):
    a = RNG.random(900)
    for f, kind in [(sort_then_zero_division, ZeroDivisionError),
                    (sort_then_unproven_index_error, IndexError)]:
        want, want_args = _python_then(f, (a.copy(), stop))
        assert want == ("raise", kind)
        got = a.copy()
        with pytest.raises(kind):
            tessera.jit(f)(got, stop)
        np.testing.assert_array_equal(got, want_args[0])


_GUARDED_SCRIPT = cases_script("test_native_write_log", "t.GUARDED_CASES")


def test_guarded_while_loops_on_every_path():
    out = run_on_every_path(_GUARDED_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "ZeroDivisionError" in native and "IndexError" in native
    for f in (shifts_by_two_strict, guard_that_lets_j_reach_minus_one, read_after_the_decrement,
              guard_of_numpy_ints,
              sort_then_zero_division, sort_then_unproven_index_error):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)


def big_diagonal(n):
    # A table of n * n int64 made before the loop: 72 MB at n = 3000, past the
    # 64 MB the loop may allocate itself (kMaxNewBytes). It counted as the loop's
    # own once, was no register, and the loop ran general (lcs_loop at 3000 x
    # 3000: 35 s, Numba 54 ms).
    big = np.zeros((n, n), dtype=np.int64)
    for i in range(1, n):
        big[i, i] = big[i - 1, i - 1] + i
    return big[n - 1, n - 1], big.sum()


_BIG_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import tessera, test_native_write_log as t
print(tessera.jit(t.big_diagonal)(3000))
"""


def test_an_array_made_before_the_loop_is_no_share_of_the_loops_limit():
    out, log = run_script(_BIG_SCRIPT, TESSERA_FAST_LOOPS="debug", TESSERA_CACHE_DIR="0")
    assert out.strip() == repr(big_diagonal(3000))
    assert_loops_end_natively(log, [big_diagonal])
    assert "rolled back" not in log, log
