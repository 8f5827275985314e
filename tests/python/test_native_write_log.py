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
from jit_check import check, run_script

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
