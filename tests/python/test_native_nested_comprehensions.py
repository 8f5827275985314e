"""Comprehensions of comprehensions in native code (docs/runtime.md, "Comprehensions
of lists in native code"): a comprehension outside any loop runs as one loop of one
turn (the list made, its bounds and its loops in one native call), its rows are
appended in the code, and recursive jit functions are called there directly. Results
(the type of every item), rows aliased or changed after the call, empty ranges, ints
past int64 and errors with their lines are Python's (or the general path's), the same
with native code, the register interpreter and the general evaluation, at 1 and 2
threads; the loops must run as native code."""

import copy
import os
import sys

import numpy as np
import pytest
from jit_check import assert_identical, cases_script, loop_log_lines, run_on_every_path

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import ackermann_table  # noqa: E402 - bench/


def tri(k):
    if k == 0:
        return 0
    return k + tri(k - 1)


def square(x):
    return x * x


def products(m, n):
    return [[i * j for j in range(n)] for i in range(m)]


def filtered(m, n):
    return [[i * j for j in range(n) if j % 2 == 0] for i in range(m) if i != 1]


def over_lists(xs, ys):
    return [[x * y for y in ys] for x in xs]


def over_zip(xs, ys, m):
    return [[a + b * k for a, b in zip(xs, ys)] for k in range(m)]


def calls_helpers(m, n):
    # a helper inlined and a recursive one called in the code
    return [[square(i) + tri(j) for j in range(n)] for i in range(m)]


def floats(m, n):
    return [[i / (j + 1.0) for j in range(n)] for i in range(m)]


def zero_rows(m, n):
    return [[0] * n for _ in range(m)]


def mutated_after(m, n):
    t = [[i + j for j in range(n)] for i in range(m)]
    t[0][0] = 99
    t[m - 1].append(-1)
    return t


def three_deep(m):
    return [[[i + j + k for k in range(2)] for j in range(i)] for i in range(m)]


def numpy_items(a):
    return [[a[i, j] * 2 for j in range(a.shape[1])] for i in range(a.shape[0])]


def past_int64(m, n):
    # Python's ints grow past int64; the general path raises OverflowError at the line
    return [[2 ** 62 * (i + j) for j in range(n)] for i in range(m)]


def index_error(xs, m, n):
    return [[xs[i + j] for j in range(n)] for i in range(m)]


def depth(k):
    if k == 0:
        return 0
    return 1 + depth(k - 1)


def deep(ks):
    return [[depth(k) for _ in range(2)] for k in ks]


def too_deep(ks):
    # past 4,000 calls: RecursionError at depth's line
    return [[depth(k) for _ in range(2)] for k in ks]


def rebound_between(n):
    # ev's code calls od; between the comprehensions od is another function: the
    # second one's calls must see it (its guards are checked at the call)
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

    first = [[ev(i + j) for j in range(2)] for i in range(n)]
    od = od2
    second = [[ev(i + j) for j in range(2)] for i in range(n)]
    return first, second


_A = np.arange(12, dtype=np.int64).reshape(3, 4)
CASES = [(ackermann_table, (2, 6)), (ackermann_table, (0, 0)), (ackermann_table, (3, 3)),
         (ackermann_table, (-1, 4)), (ackermann_table, (2, -1)),
         (products, (4, 5)), (products, (0, 3)), (products, (3, 0)),
         (filtered, (5, 7)), (over_lists, ([1, 2, 3], [4.5, 5.5])), (over_lists, ([], [1])),
         (over_zip, ([1, 2, 3], [10, 20], 3)), (calls_helpers, (3, 4)), (floats, (3, 3)),
         (zero_rows, (3, 4)), (mutated_after, (3, 2)), (three_deep, (4,)), (numpy_items, (_A,)),
         (past_int64, (2, 2)), (index_error, ([1, 2, 3, 4], 3, 3)), (deep, ([3, 10],)),
         (too_deep, ([3, 10_000],)),
         (rebound_between, (4,))]
_RAISES = {past_int64: OverflowError, index_error: IndexError, too_deep: RecursionError}


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_python(f, args, threads):
    theirs, mine = copy.deepcopy(args), copy.deepcopy(args)
    if f in _RAISES:
        with pytest.raises(_RAISES[f], match=r"test_native_nested_comprehensions.py:\d+"):
            tessera.jit(f, threads=threads)(*mine)
        return
    expected = f(*theirs)
    got = tessera.jit(f, threads=threads)(*mine)
    assert_identical(got, expected)
    for a, b in zip(mine, theirs):
        assert_identical(a, b)


def test_rows_are_lists_of_their_own():
    t = tessera.jit(products)(3, 2)
    assert t == [[0, 0], [0, 1], [0, 2]]
    assert len({id(r) for r in t}) == 3
    t[0].append(5)
    t[1][0] = 7
    assert t == [[0, 0, 5], [7, 1], [0, 2]]
    assert tessera.jit(products)(3, 2) == [[0, 0], [0, 1], [0, 2]]  # the next call's own rows


def test_errors_name_their_lines():
    with pytest.raises(IndexError, match=r"test_native_nested_comprehensions.py:84"):
        tessera.jit(index_error)([1, 2, 3], 2, 3)
    with pytest.raises(RecursionError, match=r"test_native_nested_comprehensions.py:\d+"):
        tessera.jit(too_deep)([3, 10_000])
    with pytest.raises(OverflowError, match=r"test_native_nested_comprehensions.py:80"):
        tessera.jit(past_int64)(3, 3)


_SCRIPT = cases_script("test_native_nested_comprehensions")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "OverflowError" in native and "IndexError" in native and "RecursionError" in native
    # The whole comprehension is one native loop (no general-path statement
    # before it), rows appended and recursive functions called in the code.
    for f in (ackermann_table, products, filtered, over_lists, over_zip, calls_helpers, floats,
              mutated_after, three_deep, numpy_items, rebound_between):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
    # (over_lists's empty list argument has no kind of items to compile for.)
    for f in (ackermann_table, products, filtered, calls_helpers, three_deep, numpy_items):
        assert not loop_log_lines(log, f, "no native code"), (f.__name__, log)
        assert not loop_log_lines(log, f, "rolled back"), (f.__name__, log)
    # The second comprehension's calls see the helper rebound: its guards fail
    # and the general path computes it (as Python, the printed results above).
    assert loop_log_lines(log, rebound_between, "rolled back"), log
