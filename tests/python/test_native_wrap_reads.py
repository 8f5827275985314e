"""Reads checked once before a loop though their indices wrap (docs/runtime.md, "Native
loops"): `cells[i - 1]` at i = 0 of a periodic stencil (Python's negative index) and
`cells[(i + 1) % n]` (in [0, n) for an n > 0 the loop does not change). A loop whose check
failed on a negative index of such a form is compiled again with a check admitting
[-extent, extent) before any per-access version; a loop that never wraps keeps its plain
check (no select at each access). Also here, the other changes of the same stop: a float
that is Python's at a loop's first turn and np.float32 after (`s = 0.0; s += img[i, k]`,
the first turn run on its own), len() of a list asked again only when a helper may have
changed it, lists the loop only reads (a caller's list of Values, a tuple, `for c in coins`)
read in place, a for loop over a list it changes in place iterating as Python's does, and a
whole-array copy raising the turns between two checkpoints. Each case agrees with
NumPy/Python, the loop interpreter and the general evaluation at 1 and 2 threads, and the
loops that should end natively do."""

import copy
import os
import sys

import numpy as np
import pytest
from jit_check import (assert_loops_end_natively, check, every_path_prints_the_same,
                       loop_log_lines, same_as_python)

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from unseen_kernels import coin_change_min, elementary_ca, separable_blur  # noqa: E402


def left_right(x):
    # x[i - 1] wraps at i = 0, x[(i + 1) % n] at i = n - 1.
    n = len(x)
    out = np.empty_like(x)
    for i in range(n):
        out[i] = x[i - 1] - 2 * x[i] + x[(i + 1) % n]
    return out


def torus(g):
    # 2-d: both indices wrap, at the first row and the first column.
    h, w = g.shape
    out = np.zeros_like(g)
    for i in range(h):
        for j in range(w):
            out[i, j] = g[i - 1, j - 1] + g[i - 1, (j + 1) % w] + g[(i + 1) % h, j]
    return out


def back_two(x):
    # x[i - 2] of a 1-element array: -2 is out of range (IndexError at its line).
    s = 0.0
    for i in range(len(x)):
        s += x[i - 2]
    return s


def by_shorter(x, m):
    # (i + 1) % m with m < len(x): in range; m > len(x): IndexError; m == 0:
    # ZeroDivisionError; m < 0: Python's non-positive remainder, a negative index.
    s = 0
    for i in range(len(x)):
        s += x[(i + 1) % m]
    return s


def last_of_each(x):
    # A constant negative index, and i - n (always negative).
    n = len(x)
    s = x[0] * 0
    for i in range(n):
        s += x[-1] * x[i - n]
    return s


def interior(x):
    # range(1, n - 1): x[i - 1] never wraps; the plain check holds.
    n = len(x)
    out = np.zeros_like(x)
    for i in range(1, n - 1):
        out[i] = x[i - 1] + x[i + 1]
    return out


def f32_sums(img, r):
    # s: Python's float at each inner loop's first turn, np.float32 after;
    # with r == 0 the inner loops do not turn and s stays 0.0.
    h, w = img.shape
    out = np.empty((h, w), dtype=np.float32)
    kinds = []
    for i in range(h):
        for j in range(w):
            s = 0.0
            for k in range(r):
                if k == 1 and j == 2:
                    continue
                s += img[i, min(j + k, w - 1)]
            out[i, j] = s * 0.5
            if i == 0 and j < 2:
                kinds.append(s)
    return out, kinds


def grow_while_iterating(xs, n):
    # `for c in xs` sees the items appended meanwhile (len asked again after
    # an append); len(ys) read in the outer loop after each append.
    total = 0
    ys = []
    for t in range(n):
        for c in xs:
            total += c
            if c < 5 and len(xs) < 40:
                xs.append(c + 3)
        ys.append(t)
        total += len(ys)
    return total, xs, ys


def shrink_while_iterating(xs):
    # Python's iterator stops at the shortened list's end.
    seen = []
    for c in xs:
        seen.append(c)
        xs.pop()
    return seen, xs


def replace_ahead(xs):
    # xs[i] = v ahead of the iterator: Python's loop reads the new item.
    out = 0
    for c in xs:
        out = out * 10 + c
        if len(xs) > 3:
            xs[3] = 9
    return out, xs


def rebound_while_iterating(xs, ts):
    # Binding the name to a new list (or growing a tuple, which makes a new one):
    # Python goes on with the object it started with.
    n = 0
    for c in xs:
        n += c
        xs = xs + [c]
    for c in ts:
        n += c
        ts += (c,)
    return n, xs, ts


def sum_by_index(xs, reps):
    # A caller's list (of Values) the loop only reads by index: its items'
    # address asked once per loop entry (kept while no helper may move it),
    # each item's kind checked at its read.
    s = 0
    for r in range(reps):
        for i in range(len(xs)):
            s += xs[i] * r
    return s


def read_one_grow_other(xs, n):
    # xs read by index while another list grows (helper calls between the
    # entries of the inner loop: the kept address asked again).
    out = []
    s = 0.0
    for r in range(n):
        for i in range(len(xs)):
            s += xs[i]
        out.append(s)
    return s, out


def primes_upto(n):
    # `for i in p` inside a loop that appends to p: the inner loop's reads of
    # p must not keep the items' address across the append (it moves them).
    p = []
    for k in range(2, n):
        for i in p:
            if k % i == 0:
                break
        else:
            p.append(k)
    return p


def tuple_then_write(t, n):
    # A tuple's items read in place in a loop, then written: Python's TypeError.
    s = 0
    for k in range(n):
        for c in t:
            s += c * k
        if k == n - 1:
            t[0] = s
    return s


def fill_then_fail(n, stop, t):
    # A nest writing the caller's 40,000-element table (copied whole before
    # the loop), failing at turn `stop`, past 16,384 turns: the table must be
    # as Python leaves it when the exception comes.
    for x in range(1, n):
        for c in range(3):
            if x >= c and t[x - c] + 1.0 > t[x]:
                t[x] = t[x - c] + 1.0
        if x == stop:
            t[x] = 1.0 / (x - stop)
    return t


rng = np.random.default_rng(7)
CASES = [
    (left_right, (rng.random(50),)),
    (left_right, (rng.integers(-9, 9, 33),)),
    (torus, (rng.random((7, 9)),)),
    (back_two, (np.ones(1),)),
    (back_two, (np.arange(5.0),)),
    (by_shorter, (np.arange(10), 10)),
    (by_shorter, (np.arange(10), 4)),
    (by_shorter, (np.arange(10), 11)),
    (by_shorter, (np.arange(10), 0)),
    (by_shorter, (np.arange(10), -3)),
    (last_of_each, (np.arange(1.0, 8.0),)),
    (interior, (rng.random(40),)),
    (f32_sums, (rng.random((4, 6)).astype(np.float32), 3)),
    (f32_sums, (rng.random((3, 5)).astype(np.float32), 0)),
    (grow_while_iterating, ([1, 6, 2], 4)),
    (shrink_while_iterating, ([1, 2, 3, 4, 5],)),
    (replace_ahead, ([1, 2, 3, 4, 5],)),
    (rebound_while_iterating, ([1, 2], (3, 4))),
    (elementary_ca, (41, 12, 110)),
    (coin_change_min, ([3, 7, 11], 200)),
    (coin_change_min, ((3, 7, 11), 200)),  # a tuple's items read in place too
    (tuple_then_write, ((1, 2, 3), 50)),
    (sum_by_index, (list(range(300)), 7)),
    (sum_by_index, ([1, 2, 3.5, 4], 3)),  # a float among ints: the kind checked per read
    (sum_by_index, ([1.0, 2.0, True], 3)),
    (sum_by_index, ([], 3)),
    (read_one_grow_other, ([0.5, 1.5, 2.0], 20)),
    (primes_upto, (3000,)),
    (separable_blur, (rng.random((9, 8)).astype(np.float32), 2)),
]


@pytest.mark.parametrize("f,args", CASES, ids=[f"{f.__name__}-{k}" for k, (f, _) in
                                               enumerate(CASES)])
def test_agrees_with_numpy(f, args):
    if f in (grow_while_iterating, shrink_while_iterating, replace_ahead,
             rebound_while_iterating, sum_by_index, read_one_grow_other, primes_upto):
        same_as_python(f, *args)
    elif f is f32_sums:
        got, kinds = tessera.jit(f)(*copy.deepcopy(args))
        want, want_kinds = f(*copy.deepcopy(args))
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert [type(v) for v in kinds] == [type(v) for v in want_kinds], (kinds, want_kinds)
        assert kinds == want_kinds
    else:
        check(f, *args, rtol=0, atol=0)


def test_every_path_prints_the_same():
    out, log = every_path_prints_the_same("test_native_wrap_reads")
    assert "IndexError" in out and "ZeroDivisionError" in out
    # The wrapping reads end natively: their loops' first code returns 5 (its
    # check failed), the one admitting negative indices then 0.
    assert_loops_end_natively(log, [left_right, torus, elementary_ca, interior, coin_change_min,
                                    separable_blur, f32_sums, read_one_grow_other],
                              some=[sum_by_index])
    assert loop_log_lines(log, left_right, "admitting negative indices"), log
    # A loop that never wraps is not compiled again for it.
    assert not loop_log_lines(log, interior, "admitting negative indices"), log


def test_table_after_a_late_failure():
    want = np.zeros(40_000)
    got = np.zeros(40_000)
    with pytest.raises(ZeroDivisionError):
        fill_then_fail(30_000, 25_000, want)
    with pytest.raises(ZeroDivisionError) as e:
        tessera.jit(fill_then_fail)(30_000, 25_000, got)
    assert np.array_equal(got, want)
    assert "test_native_wrap_reads.py:" in str(e.value), str(e.value)
