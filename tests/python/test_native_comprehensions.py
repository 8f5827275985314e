"""Comprehensions and list concatenation in native loops (docs/runtime.md,
"Comprehensions and list concatenation in native code"): `[e for a, b in zip(xs, ys)]`,
`[e for x in xs]`, `[e for i in range(n)]` (with or without an `if`) inside a loop,
their numbers put into the list once when the comprehension's loop ends, `a + b` of
lists of numbers, and `for x in a + b` read from a and b where they are. Results (the
kinds of the items included), list arguments afterwards and errors are Python's, the
same with native code, the register interpreter and the general evaluation (node
counters too), at 1 and 2 threads; the loops must run as native code."""

import copy
import os
import sys

import pytest
from jit_check import assert_identical, cases_script, loop_log_lines, run_on_every_path

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import pascal_row  # noqa: E402 - bench/


def zip_sums(xs, ys, n):
    # zip stops at the shorter list, as Python's.
    out = []
    for _ in range(n):
        out = [a + b for a, b in zip(xs, ys)]
        xs = out
    return out


def squares_over(xs, n):
    total = 0.0
    for k in range(n):
        sq = [x * x + k for x in xs]
        total += sq[-1] if len(sq) > 0 else 0.0
    return total


def evens(n, m):
    rows = 0
    last = []
    for k in range(m):
        last = [i * k for i in range(n) if i % 2 == 0]
        rows += len(last)
    return rows, last


def filtered(xs, n):
    s = 0
    for k in range(n):
        big = [x - k for x in xs if x > k]
        s += len(big)
    return s, big


def joined(xs, ys, n):
    # a + b of lists (a new list each turn), the arguments unchanged.
    out = []
    for _ in range(n):
        out = xs + ys + [0]
    return out, len(out)


def mixed_kinds(xs, n):
    # ints and floats in one list: the items read as another kind bail.
    s = 0
    for _ in range(n):
        ys = [x * 2 for x in xs + [1.5]]
        s += ys[0]
    return s, ys


def int_float_view(xs, n):
    out = []
    for _ in range(n):
        out = [a + b for a, b in zip(xs + [0.0], [0.0] + xs)]
    return out


def empty_lists(n):
    out = [1]
    for _ in range(n):
        # (empty from the first turn: the filter drops every item)
        out = [x + 1 for x in out if x > 100] + [y for y in out if y > 5]
    return out


def nested_in_loop(n):
    # A comprehension in a comprehension's loop: rows of numbers.
    total = 0
    for k in range(n):
        row = [i * k for i in range(k)]
        other = [a - b for a, b in zip(row, [v + 1 for v in row])]
        total += len(other) + (other[-1] if len(other) > 0 else 0)
    return total


def overflows(n):
    # Python's ints do not overflow; the general path says so (OverflowError).
    row = [2 ** 60, 1]
    for _ in range(n):
        row = [x + x for x in row]
    return row


def overflow_in_zip(n):
    # pascal_row's, with ints past int64 from n = 67.
    row = [1]
    for _ in range(n):
        row = [left + right for left, right in zip(row + [0], [0] + row)]
    return row


def breaks_out(xs, n):
    # Not a comprehension: a loop appending to a list made just before it, left by a break.
    got = []
    for k in range(n):
        part = []
        for x in xs:
            if x > k:
                break
            part.append(x * 1.5)
        got = part
    return got


def str_item_late(xs, n):
    # A string among ints, met after the buffer holds items: the turn goes back to
    # its start and the general path raises Python's TypeError.
    s = 0
    for k in range(n):
        ys = [x + k for x in xs]
        s += ys[0]
    return s


def tuples_joined(t, u, n):
    # Tuples, not lists: `+` left to the interpreter.
    w = ()
    for k in range(n):
        w = t + u
        k += len(w)
    return w, k


CASES = [(pascal_row, (60,)),
         (pascal_row, (0,)),
         (zip_sums, ([1, 2, 3, 4], [10, 20], 3)),
         (zip_sums, ([1.5, 2.5], [1.0, 2.0, 3.0], 4)),
         (zip_sums, ([], [1, 2], 2)),
         (squares_over, ([1.0, 2.0, 3.5], 5)),
         (squares_over, ([], 3)),
         (evens, (9, 4)),
         (filtered, ([5, 1, 7, 3, 9], 6)),
         (joined, ([1, 2], [3.5], 3)),
         (joined, ([], [], 2)),
         (mixed_kinds, ([1, 2, 3], 4)),
         (int_float_view, ([1.0, 2.0, 3.0], 3)),
         (int_float_view, ([1, 2, 3], 3)),
         (empty_lists, (4,)),
         (nested_in_loop, (8,)),
         (overflows, (2,)),
         (overflows, (3,)),
         (overflow_in_zip, (70,)),
         (breaks_out, ([1, 2, 3, 4, 5], 4)),
         (str_item_late, ([1, 2, 3, "four"], 3)),
         (tuples_joined, ((1, 2), (3.5,), 3))]



@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_python(f, args, threads):
    theirs, mine = copy.deepcopy(args), copy.deepcopy(args)
    if f is str_item_late:
        with pytest.raises(TypeError):
            f(*theirs)
        with pytest.raises(TypeError, match=r"test_native_comprehensions.py:\d+"):
            tessera.jit(f, threads=threads)(*mine)
        assert mine == theirs
        return
    if (f, args[0]) in ((overflows, 3), (overflow_in_zip, 70)):
        # Python's ints go past int64; tessera's general path raises at the line.
        with pytest.raises(OverflowError, match=r"test_native_comprehensions.py:\d+"):
            tessera.jit(f, threads=threads)(*mine)
        return
    expected = f(*theirs)
    got = tessera.jit(f, threads=threads)(*mine)
    assert_identical(got, expected)
    assert mine == theirs


def test_pascal_row_70_is_the_general_paths_overflow():
    with pytest.raises(OverflowError, match="published_kernels.py:613"):
        tessera.jit(pascal_row)(70)


_SCRIPT = cases_script("test_native_comprehensions") + """
    for f, args in t.CASES:
        g = tessera.jit(f, threads=threads)
        try:
            g(*copy.deepcopy(args))
        except Exception:
            continue
        print("counters", f.__name__,
              [",".join(l.split(",")[:3]) for l in g.counters().splitlines()])
"""


def test_native_interpreter_and_general_print_theassert_identical():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    results = lambda s: [ln for ln in s.splitlines() if not ln.startswith("counters")]  # noqa: E731
    assert native == out["interpreter"][0]  # counters too
    assert results(native) == results(out["general"][0])
    assert "OverflowError" in native and "TypeError" in native
    for f in (pascal_row, zip_sums, squares_over, evens, filtered, joined, nested_in_loop,
              breaks_out, empty_lists):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
