"""A native loop's fixed cost per run (docs/runtime.md, "A run's fixed cost"):
the buffers of a run's state, its array table and signature reused from the
run before on the same thread, the code of the last signature found without
the lock, and the `<release x>` statements after a variable's last read
assigned without a future. Each case runs many times in a row in one process
(the reused buffers must hold nothing of the run before), with kinds that
change from call to call (the code found must be the one for these kinds),
errors in the middle of the runs followed by good ones, a bail after a
partial write (the roll-back), and recursion from Python into native code
and back; against Python, against the loop interpreter and the general
evaluation, at 1 and 2 threads, and the loops must have run native code."""

import os
import sys

import numpy as np
import pytest
from jit_check import assert_same, cases_script, check, loop_log_lines, run_on_every_path

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import ackermann, ackermann_table  # noqa: E402 - bench/, on the path above


def total(n, step):
    # int or float by the argument's kind: one signature each
    s = 0 * step
    for i in range(n):
        s += i * step
    return s


def squares(n):
    return [i * i for i in range(n)]


def halves(n):
    return [i / 2 for i in range(n)]


def floor_each(n, d):
    # ZeroDivisionError at this line when d == 0
    s = 0
    for i in range(n):
        s += i // d
    return s


def write_then_index_error(out, n):
    # writes out[0..len(out)-1], then IndexError: the writes before stay
    for i in range(n):
        out[i] = i * 2.5
    return out


def kind_changes(xs):
    # s is an int until an item is a float: the native code bails at that
    # turn, the interpreter goes on from there
    s = 0
    for i in range(len(xs)):
        s += xs[i]
    return s


def overflow_then_big(n):
    # Python's int past int64: the native code bails, the general path
    # raises tessera's OverflowError at this line (its ints are int64)
    p = 1
    for i in range(n):
        p *= 1000
    return p


def many_releases(a, b):
    c = a + b
    d = c * 2
    rows = [[c + j for j in range(b)] for _ in range(a)]
    e = d - 1
    return rows, e


def captured_not_released(n):
    k = n + 1

    def add_k(x):
        return x + k

    ys = [i for i in range(n)]
    return [add_k(y) for y in ys]


def grid(m_max, n_max):
    return [[m * 10 + n for n in range(n_max + 1)] for m in range(m_max + 1)]


# Calls in a row, in this order, on one jit function each.
RUNS = [
    (total, [(3, 1), (3, 1.5), (4, np.int64(2)), (5, 2), (2, np.float64(0.5)), (3, True), (6, 1)]),
    (squares, [(10,), (0,), (1,), (10,), (40,)]),
    (halves, [(5,), (0,), (3,)]),
    (floor_each, [(5, 2), (5, 0), (6, 3), (5, 0), (4, -1)]),
    (kind_changes, [([1, 2, 3],), ([1, 2.5, 3],), ([4, 5],), ([np.float64(1.0), 2],), ([7],)]),
    (overflow_then_big, [(3,), (7,), (2,), (30,), (1,)]),
    (many_releases, [(2, 3), (0, 1), (3, 0), (2, 3)]),
    (captured_not_released, [(4,), (0,), (5,)]),
    (ackermann_table, [(2, 6), (0, 0), (1, 3), (2, 6)]),
    (grid, [(2, 3), (0, 0), (3, 1)]),
]
CASES = [(f, args) for f, calls in RUNS for args in calls]


@pytest.mark.parametrize("f, calls", RUNS, ids=[f.__name__ for f, _ in RUNS])
def test_runs_in_a_row_same_as_python(f, calls, threads):
    # One jit function for all the calls (check() makes a new one per call).
    g = tessera.jit(f, threads=threads)
    for _ in range(3):
        for args in calls:
            try:
                expected = f(*args)
            except Exception as e:  # noqa: BLE001 - the same kind must come
                with pytest.raises(type(e)):
                    g(*args)
                continue
            if isinstance(expected, int) and not -(2**63) <= expected < 2**63:
                with pytest.raises(OverflowError, match=r"test_native_run_cost.py:\d+"):
                    g(*args)
                continue
            # Kinds as the jit gives them on every path (an np.float64 sum is
            # a float there); the exact reprs are compared across the paths
            # below.
            assert_same(g(*args), expected, rtol=0, atol=0, path=repr(args))


def test_error_names_its_line_then_good_runs():
    g = tessera.jit(floor_each)
    for _ in range(20):
        assert g(7, 2) == floor_each(7, 2)
        with pytest.raises(ZeroDivisionError, match=r"test_native_run_cost.py:\d+"):
            g(7, 0)
        assert g(9, 4) == floor_each(9, 4)


def test_partial_writes_kept_after_an_index_error():
    g = tessera.jit(write_then_index_error)
    for _ in range(5):
        out = np.zeros(4)
        with pytest.raises(IndexError, match=r"test_native_run_cost.py:\d+"):
            g(out, 6)
        np.testing.assert_array_equal(out, [0.0, 2.5, 5.0, 7.5])  # as in Python
        out = np.zeros(4)
        np.testing.assert_array_equal(g(out, 4), [0.0, 2.5, 5.0, 7.5])


def test_recursion_from_python_into_native_and_back(threads):
    table = tessera.jit(ackermann_table, threads=threads)
    ack = tessera.jit(ackermann, threads=threads)
    for m, n in [(2, 6), (1, 2), (2, 6), (0, 3), (2, 2)]:
        assert table(m, n) == ackermann_table(m, n)
        assert ack(m, n) == ackermann(m, n)
        assert type(table(m, n)[0][0]) is int
    check(ackermann_table, 2, 3)


_SCRIPT = cases_script("test_native_run_cost")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT)
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "ZeroDivisionError" in native and "IndexError" not in native
    for f in (total, squares, halves, floor_each, kind_changes, grid, many_releases):
        assert loop_log_lines(log, f, "native code returned 0"), (f.__name__, log)
    # The bails: a kind change, an overflow and a division by zero.
    for f in (kind_changes, overflow_then_big, floor_each):
        bails = loop_log_lines(log, f, "native code returned 2") + loop_log_lines(
            log, f, "native code returned 4")
        assert bails, (f.__name__, log)
