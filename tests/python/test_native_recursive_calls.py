"""Loops calling recursive jit functions (docs/runtime.md, "Calls and
recursion"): a recursive function is not inlined into a loop; the loop
(native code or the register interpreter) calls its own native function
on the loop's numbers, and whatever that code cannot compute (an error, an
overflow, a function that is another one now) sends the turn to the general
path, which raises at the function's line. Also a list comprehension's list
appended to another in the loop interpreter (`[[f(m, n) for n ...] for m
...]`). Every case against Python, with native code, the loop interpreter
and the general path, at 1 and 2 threads."""

import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, check, loop_log_lines, run_on_every_path

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import ackermann_table  # noqa: E402 - bench/, on the path above


def ackermann(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def halve(x, k):
    # floats in and out
    if k == 0:
        return x
    return halve(x / 2.0, k - 1)


def even(n):
    if n == 0:
        return True
    return odd(n - 1)


def odd(n):
    if n == 0:
        return False
    return even(n - 1)


def bits(n):
    if n == 0:
        return 0
    return (n & 1) + bits(n >> 1)


def steps_down(a, b):
    # 10 // b: ZeroDivisionError when b == 0, at this line
    if a <= 0:
        return 0
    return steps_down(a - 1, b) + 10 // b


def table(m_max, n_max):
    return [[ackermann(m, n) for n in range(n_max + 1)] for m in range(m_max + 1)]


def fibs_into(out):
    # native code: element writes and a recursive call per turn
    for i in range(len(out)):
        out[i] = fib(i % 15)
    return out


def halves(xs, k):
    # NumPy scalars as arguments (np.float64): the result is np.float64
    s = 0.0
    for i in range(len(xs)):
        s += halve(xs[i], k)
    return s


def parities(n, out):
    # a bool result; mutual recursion (the array returned keeps the function
    # itself off native calls: its loop calls even())
    evens = 0
    for i in range(n):
        if even(i):
            evens += 1
    out[0] = evens
    return out


def bit_total(n, out):
    s = 0
    i = 0
    while i < n:
        s += bits(i)
        i += 1
    out[0] = s
    return out


def writes_then_zero_division(out, n):
    # the turn with b == 0 raises at steps_down's line; the writes of the
    # turns before stay, as in Python
    for i in range(n):
        out[i] = steps_down(i, 3 - i)
    return out


def function_changes(n):
    # the variable called holds another recursive function from turn 5 on
    f = fib
    s = 0
    for i in range(n):
        if i == 5:
            f = ackermann_one
        s += f(i % 6)
    return s


def ackermann_one(n):
    return ackermann(1, n)


def grid_of_products(n, m):
    # lists of lists from comprehensions, no call
    return [[i * j + 1 for j in range(m)] for i in range(n)]


def rows_appended(n):
    rows = []
    for i in range(n):
        rows.append([fib(j) for j in range(i)])
    return rows


def nested_helper_rows(n):
    # a recursive helper defined in the function (a closure its frame holds
    # weakly): the guard reads it at every call
    def tri(k):
        if k == 0:
            return 0
        return k + tri(k - 1)
    return [[tri(i + j) for j in range(3)] for i in range(n)]


def helper_rebound_between_loops(n):
    # ev's code calls od; between the loops od is another function, so the
    # guards of ev's native code no longer hold: the second loop's calls are
    # the general path's (as Python, ev then calls od2)
    def ev(k):
        if k == 0:
            return True
        return od(k - 1)

    def od(k):
        if k == 0:
            return False
        return ev(k - 1)

    def od2(k):
        if k == 0:
            return True
        return ev(k - 1) and k > 100

    first = [ev(i) for i in range(n)]
    od = od2
    second = [ev(i) for i in range(n)]
    return first, second


def helper_rebound_in_loop(n):
    def down(k):
        if k <= 0:
            return 0
        return step(k) + down(k - 1)

    def step(k):
        return 1

    def step3(k):
        return 3

    s = 0
    for i in range(n):
        if i == 4:
            step = step3
        s += down(i)
    return s


def depth(k):
    if k == 0:
        return 0
    return 1 + depth(k - 1)


def depths(ks):
    # the last one is deeper than 4,000 calls: RecursionError at depth's line
    return [depth(k) for k in ks]


_OUT = np.zeros(40)
CASES = [(ackermann_table, (2, 6)), (ackermann_table, (0, 0)), (ackermann_table, (3, 3)),
         (table, (1, 4)), (fibs_into, (_OUT.copy(),)),
         (halves, (np.linspace(1.0, 9.0, 30), 5)), (parities, (25, np.zeros(1))), (bit_total, (300, np.zeros(1))),
         (writes_then_zero_division, (np.zeros(6), 6)), (function_changes, (9,)),
         (grid_of_products, (4, 5)), (rows_appended, (7,)), (nested_helper_rows, (5,)),
         (helper_rebound_between_loops, (9,)), (helper_rebound_in_loop, (9,)), (depths, ([3, 10],))]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_same_as_python(f, args, threads):
    check(f, *args)


def test_zero_division_in_the_recursive_function_names_its_line():
    out = np.zeros(6)
    with pytest.raises(ZeroDivisionError, match=r"test_native_recursive_calls.py:\d+"):
        tessera.jit(writes_then_zero_division)(out, 6)
    np.testing.assert_array_equal(out[:3], [0.0, 5.0, 20.0])  # the turns before, as in Python


def test_recursion_too_deep_in_a_loop_is_a_recursion_error_at_its_line():
    with pytest.raises(RecursionError, match=r"test_native_recursive_calls.py:\d+"):
        tessera.jit(depths)([3, 10_000])


_SCRIPT = cases_script("test_native_recursive_calls")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "ZeroDivisionError" in native
    # The loops whose only call is recursive now run native code, calling it.
    for f in (fibs_into, halves, parities, bit_total):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
    assert "the function is recursive" not in log, log
    # The helpers the comprehensions call have native code (the guards read
    # a nested helper from its frame, and see a rebound one).
    for f in (nested_helper_rows, helper_rebound_between_loops, helper_rebound_in_loop, depth):
        # depths' comprehension makes a list: the call of depths is native code whole
        assert (loop_log_lines(log, f, "native code for the call of")
                or f is depth and loop_log_lines(log, depths, "native code for the call of")), (
                    f.__name__, log)
