"""`c[i][j] = v` of a list of lists (a dynamic-programming table written as
Python users write it), a dict of dicts or a dict of lists, in loops: the loop
interpreter changes the item in place in its container (docs/runtime.md,
"Items of items written in place") instead of leaving the loop to the general
path, which copied the row at every write. Answers and the containers given
back are Python's on every path (native code, the register interpreter, the
general evaluation) at 1 and 2 threads, errors at their line, and a roll-back
after many such writes takes back exactly the writes since its checkpoint."""

import inspect

import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path, same_as_python

import tessera


def levenshtein(a, b):
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
    return d[len(a)][len(b)], d[1]


def knapsack(weights, values, capacity):
    n = len(weights)
    best = [[0] * (capacity + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        w = weights[i - 1]
        for c in range(capacity + 1):
            best[i][c] = best[i - 1][c]
            if w <= c and best[i - 1][c - w] + values[i - 1] > best[i][c]:
                best[i][c] = best[i - 1][c - w] + values[i - 1]
    return best[n][capacity], best


def pair_counts(xs):
    counts = {}
    for k in range(len(xs) - 1):
        a = xs[k]
        b = xs[k + 1]
        if a not in counts:
            counts[a] = {}
        if b not in counts[a]:
            counts[a][b] = 0
        counts[a][b] += 1
    return counts


def buckets(xs, n):
    out = {}
    for i in range(n):
        out[i] = [0, 0]
    for x in xs:
        out[x % n][x % 2] += x
    return out


def table_given(t, n):
    # The caller's table: changed in place, given back; negative indices.
    for rep in range(n):
        for i in range(len(t)):
            t[i][-1] += t[i][0] * rep
            t[-1 - i][0] -= 1
    return t


def index_error_late(t, n):
    for i in range(n):
        t[i % 3][i % 4] += 1
        if i == n - 1:
            t[5][0] = 0
    return t


def kind_change_late(n):
    # A variable changing kind at turn 25,000 sends the loop back to its
    # checkpoint: the item writes since are taken back and redone once.
    grid = [[0] * 8 for _ in range(8)]
    s = 0
    for i in range(n):
        grid[i % 8][(i * 3) % 8] += i
        if i == 25000:
            s = 0.5
        s = s + 1
    return grid, s


def row_aliased(n):
    # `row = t[0]` holds the row too: tessera's values (docs/python.md) copy
    # it at the write; the answer below does not depend on it.
    t = [[1, 2], [3, 4]]
    total = 0
    for i in range(n):
        row = t[i % 2]
        total += row[0]
        t[i % 2][1] = i
    return total, t[0][1] + t[1][1]


def char_counts(text):
    # s[i] of ASCII and non-ASCII strings (an ASCII string's byte is its
    # character; others are split into characters as Python's).
    counts = {}
    for i in range(len(text)):
        c = text[i]
        counts[c] = counts.get(c, 0) + 1
    return counts, text[-1], text[len(text) // 2]


CASES = [(levenshtein, ("kitten sitting on the mat" * 6, "sitting kitten at the mall" * 6)),
         (char_counts, ("the quick brown fox " * 20,)),
         (char_counts, ("héllo wörld, ça va? ñ " * 5,)),
         (knapsack, ([3, 4, 5, 9, 4, 2, 7], [3, 4, 4, 10, 4, 1, 8], 40)),
         (pair_counts, ([1, 2, 1, 2, 3, 1, 2, 2, 2, 3, 3, 1] * 20,)),
         (buckets, (list(range(300)), 7)),
         (table_given, ([[1, 2, 3], [4, 5, 6], [7, 8, 9]], 50)),
         (index_error_late, ([[0] * 4 for _ in range(3)], 40000)),
         (kind_change_late, (40000,)),
         (row_aliased, (100,))]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ for f, _ in CASES])
def test_nested_writes_agree_with_python(f, args, threads):
    if f is index_error_late:
        with pytest.raises(IndexError) as e:
            tessera.jit(f)(*args)
        line = f.__code__.co_firstlineno + 4
        assert f"test_fast_loop_nested_writes.py:{line}" in str(e.value)
        return
    same_as_python(f, *args)


_SCRIPT = cases_script("test_fast_loop_nested_writes")


def test_every_path_prints_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native
    # The loops writing items of items stay on the loop interpreter: no
    # roll-back to the general path (the loops building the tables, whose
    # appends of lists are the general path's, may).
    for f in (levenshtein, knapsack, pair_counts, buckets, table_given, row_aliased, char_counts):
        rolled = [ln for ln in loop_log_lines(log, f, "rolled back")
                  if not any(f":{k}:" in ln for k in _table_builders(f))]
        assert not rolled, (f.__name__, rolled)


def _table_builders(f):
    """The lines of f that build a table by a comprehension (`for _ in`)."""
    body, first = inspect.getsourcelines(f)
    return [first + k for k, text in enumerate(body) if " for _ in " in text]
