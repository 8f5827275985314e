"""Lists of lists and string characters in native loops (docs/runtime.md, "Lists of
lists and characters in native code"): `t[i][j]` reads, `t[i][j] = v` and
`t[i][j] += v` writes of a list of lists of numbers, `xs[i] = v` of a flat list,
and `s1[i] == s2[j]` / `s[i] != "a"` of ASCII strings. Results, the list
arguments afterwards and errors (IndexError at its line) are Python's, the same
with native code, the register interpreter and the general evaluation, at 1 and
2 threads; the loops must run as native code (the debug log)."""

import copy
import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path, run_script, same_as_python

import tessera
from tessera._list_args import write_back

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import knapsack01 as knapsack, levenshtein  # noqa: E402 - bench/


def add_in_place(t, v):
    # The caller's list of lists changed in place: t[i][j] += v, negative indices.
    s = 0
    for i in range(len(t)):
        for j in range(len(t[i])):
            t[i][j] += v
            t[-1 - i][-1] = t[-1 - i][-1] * 2
            s += t[i][j]
    return s


def floats_and_bools(f, b):
    s = 0.0
    for i in range(len(f)):
        for j in range(len(f[0])):
            f[i][j] = f[i][j] * 0.5 + j
            b[i][j] = f[i][j] > 1.0
            if b[i][j]:
                s += f[i][j]
    return s


def flat_writes(xs, n):
    for k in range(n):
        xs[k % len(xs)] = xs[k % len(xs)] * 3 + k
        xs[-1] += 1
    return xs[0]


def mixed_item(t):
    # An item of another kind than the first (a float in a table of ints): the
    # code compiled for ints bails there and the interpreter goes on.
    s = 0
    for i in range(len(t)):
        for j in range(len(t[i])):
            s += t[i][j]
    return s


def row_too_short(t, n):
    s = 0
    for i in range(len(t)):
        for j in range(n):
            s += t[i][j]
    return s


def write_past_the_end(t, n):
    for i in range(n):
        t[0][i] = i
    return t[0][0]


def count_chars(s, t):
    same = 0
    other = 0
    for i in range(len(s)):
        if s[i] != "a":
            other += 1
        for j in range(len(t)):
            if s[i] == t[j]:
                same += 1
            if "g" == t[-1 - j]:
                same += 2
    return same, other


def char_past_the_end(s, n):
    c = 0
    for i in range(n):
        if s[i] == "c":
            c += 1
    return c


def fails_late(t, n):
    # Many writes, then ZeroDivisionError at i == n - 3 (t has 3 rows).
    for i in range(n):
        for j in range(len(t[0])):
            t[i % 3][j] += 1
        x = 1 // (n - 3 - i)
    return x


def bails_late(t, n):
    # Many writes, then a float item where ints were compiled for: the native
    # call stops late and the interpreter redoes its turns from the call's
    # start, which must find the writes taken back (else each counts twice).
    for i in range(n):
        for j in range(len(t[0])):
            t[i % 3][j] += 1
        if i == n - 3:
            t[1][2] = t[1][2] + 0.5
    return t[1][2]


def tuple_rows(t):
    s = 0
    for i in range(len(t)):
        s += t[i][0] * t[i][-1]
    t[0][0] = s  # a tuple's item: Python's TypeError
    return s


def prefix_sums(t):
    # Reads of the row just written (t[i][j - 1]) and of the row before, in place.
    for i in range(1, len(t)):
        for j in range(1, len(t[i])):
            t[i][j] = t[i][j - 1] + t[i - 1][j] - t[i - 1][j - 1] + t[i][j]
        t[i][-1] = t[i][-1] % 1000
    return t[-1][-1]


def row_replaced(t, n):
    # A row read in place, then replaced by a number (t[1] = 7.5), then
    # t[1][j] read again: not the row kept, but the interpreter's TypeError.
    s = 0
    for i in range(n):
        for j in range(3):
            if i < n - 1:
                s += t[1][j]
            else:
                s += t[1][j]
            t[0][j] = s
        if i == n - 2:
            t[1] = 7.5
    return s


def row_replaced_late(t, n):
    # The same without the error: the replaced row is not read again.
    s = 0
    for i in range(n):
        for j in range(3):
            if i < n - 1:
                s += t[1][j]
            t[0][j] = s
        if i == n - 2:
            t[1] = 7.5
    return s, t[1]


def floats_into_ints(t, n):
    # Floats written into a table of ints (no longer written in place: the
    # item's kind changes), then read back as the ints compiled for: a bail.
    s = 0
    for i in range(n):
        for j in range(len(t[0])):
            t[i % 2][j] = t[i % 2][j] + 1
            if i == n - 4 and j == 1:
                t[0][1] = t[0][1] * 0.5
            s += t[0][1]
    return s


def read_only_lists(weights, values, n):
    # Lists the loop only reads (weights[i - 1]: read once per index in a call).
    s = 0
    for i in range(1, n):
        for w in range(len(weights)):
            if weights[i - 1] <= w:
                s += values[i - 1] + weights[-1]
            else:
                s -= values[w]
    return s


def made_then_bails(n, m):
    # A table the function makes (its rows written in place, their old bytes
    # logged), then a float where ints were compiled for, late: the call's
    # writes are taken back before the interpreter redoes its turns.
    t = [[j for j in range(m)] for _ in range(3)]
    for i in range(n):
        for j in range(m):
            t[i % 3][j] = t[i % 3][j] + 1
        if i == n - 3:
            t[1][2] = t[1][2] + 0.5
    return t


def made_then_fails(n, m):
    t = [[0] * m for _ in range(3)]
    s = 0
    for i in range(n):
        for j in range(m):
            t[i % 3][j] = t[i % 3][j] + i
        s += 1 // (n - 3 - i)
    return t, s


def closures_in_a_table(n):
    # A table holding a closure, numbers written into it by native code (its
    # write-back skips the scan for closures: the slot's value had them
    # already), then the closure called.
    k = 3

    def add(x):
        return x + k

    t = [[0, 0, add], [1, 1, add]]
    for i in range(n):
        for j in range(2):
            t[i % 2][j] = t[i % 2][j] + j
    return t[0][1] + t[1][1] + t[0][2](10)


# Lists held twice in the function: lists are values in a jit function
# (docs/python.md, "Lists are values"), so `u = t` then writes into t leave u
# as it was; native code writing rows in place must not change what another
# variable, list or row holds. Each returns what the other holders see.
def table_also_in_a_variable(n):
    t = [[0] * 4 for _ in range(3)]
    u = t
    for i in range(n):
        for j in range(4):
            t[i % 3][j] = t[i % 3][j] + j
    return t, u


def row_also_in_a_variable(n):
    t = [[0] * 4 for _ in range(3)]
    r = t[1]
    for i in range(n):
        for j in range(4):
            t[i % 3][j] = t[i % 3][j] + j
    return t, r


def table_also_in_a_list(n):
    t = [[0] * 4 for _ in range(3)]
    box = [t]
    for i in range(n):
        for j in range(4):
            t[i % 3][j] = t[i % 3][j] + j
    return t, box


def rows_shared_in_the_table(n):
    row = [0] * 4
    t = [row, row, [1] * 4]
    for i in range(n):
        for j in range(4):
            t[i % 3][j] = t[i % 3][j] + j
    return t, row


def argument_also_in_a_variable(t, n):
    u = t
    for i in range(n):
        for j in range(len(t[0])):
            t[i % len(t)][j] = t[i % len(t)][j] * 2 + 1
    return u


# Where Python's answer would differ, tessera refuses (_aliases.py: `u = t`, `box = [t]`
# changed later, `[row, row]` written through the table); `r = t[1]` read after the
# table's row is written gets the write as Python's (the row kept up to date).
ALIAS_CASES = [(row_also_in_a_variable, (50,))]
REFUSED_ALIASES = [(table_also_in_a_variable, (50,)), (table_also_in_a_list, (50,)),
                   (argument_also_in_a_variable, ([[1, 2], [3, 4]], 7)),
                   (rows_shared_in_the_table, (50,))]


@pytest.mark.parametrize("f, args", REFUSED_ALIASES, ids=[f.__name__ for f, _ in REFUSED_ALIASES])
def test_two_names_of_a_table_written_are_refused(f, args):
    with pytest.raises(tessera.UnsupportedError, match="changed in place(?: through an item)? later"):
        tessera.jit(f)(*copy.deepcopy(args))


def _table(m, n, f=lambda i, j: (i * 7 + j * 3) % 11):
    return [[f(i, j) for j in range(n)] for i in range(m)]


CASES = [(levenshtein, ("kitten", "sitting")),
         (levenshtein, ("acgtacgtgg" * 4, "cagtagctgt" * 3)),
         (knapsack, ([6, 10, 12, 7, 3], [1, 2, 3, 2, 1], 6)),
         (add_in_place, (_table(6, 5), 3)),
         (floats_and_bools, (_table(4, 5, lambda i, j: 0.5 * i + j), _table(4, 5, lambda i, j: False))),
         (flat_writes, ([1, 2, 3, 4, 5], 23)),
         (mixed_item, ([[1, 2, 3], [4, 5.5, 6], [7, 8, 9]],)),
         (row_too_short, ([[1, 2, 3], [4, 5, 6], [7, 8]], 3)),
         (write_past_the_end, ([[0] * 5], 6)),
         (count_chars, ("abcabcgg", "gca")),
         (count_chars, ("héllo", "olé")),
         (char_past_the_end, ("abc", 4)),
         (fails_late, (_table(3, 4), 200)),
         (bails_late, (_table(3, 4), 3000)),
         (tuple_rows, ([(1, 2), (3, 4)],)),
         (prefix_sums, (_table(7, 9),)),
         (row_replaced_late, (_table(2, 3), 40)),
         (floats_into_ints, (_table(2, 3), 300)),
         (read_only_lists, ([3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, 8, 1, 8], 8)),
         (made_then_bails, (3000, 5)),
         (made_then_fails, (3000, 5)),
         (closures_in_a_table, (50,))]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_python(f, args, threads):
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    try:
        expected = f(*theirs)
    except Exception as e:  # noqa: BLE001 - the same exception is expected of the jit
        with pytest.raises(type(e)):
            tessera.jit(f)(*mine)
        # A call that raises gives nothing back: the caller's lists stay as they were
        # (docs/python.md, "Lists are values").
        assert mine == args
        return
    same_as_python(f, *args)


@pytest.mark.parametrize("f, args, line", [(row_too_short, ([[1, 2], [3]], 2), 4),
                                           (write_past_the_end, ([[0] * 5], 6), 2),
                                           (char_past_the_end, ("abc", 4), 3)])
def test_index_error_names_its_line(f, args, line):
    with pytest.raises(IndexError) as e:
        tessera.jit(f)(*args)
    assert f"test_native_list_tables.py:{f.__code__.co_firstlineno + line}" in str(e.value)


def test_a_replaced_row_is_not_read_from_where_it_was():
    # Python raises TypeError there; the general evaluation's IndexError names
    # the line: on every path the error of the row replaced, not its old items.
    for env in ({}, {"TESSERA_NATIVE": "0"}):
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            with pytest.raises((TypeError, IndexError)) as e:
                tessera.jit(row_replaced)(_table(2, 3), 40)
        assert f"test_native_list_tables.py:{row_replaced.__code__.co_firstlineno + 9}" in str(
            e.value)


def test_rollback_late_in_a_loop_keeps_the_callers_lists():
    t = _table(3, 4)
    before = copy.deepcopy(t)
    with pytest.raises(ZeroDivisionError):
        tessera.jit(fails_late)(t, 20_000)
    assert t == before


_SCRIPT = cases_script("test_native_list_tables")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native and "TypeError" in native
    # The loops compiled to native code; the only loops refused are the
    # comprehensions building the tables (a list of lists made: the interpreter's).
    for f in (levenshtein, knapsack, add_in_place, floats_and_bools, flat_writes, mixed_item,
              count_chars, fails_late, bails_late, prefix_sums, row_replaced_late, floats_into_ints,
              read_only_lists, made_then_bails, made_then_fails, closures_in_a_table):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
        comp = (f.__code__.co_firstlineno + 2 if f in (levenshtein, knapsack) else
                f.__code__.co_firstlineno + 4 if f is made_then_bails else
                f.__code__.co_firstlineno + 1 if f is made_then_fails else -1)
        refused = [ln for ln in loop_log_lines(log, f, "no native code") if f":{comp}:" not in ln]
        assert not refused, (f.__name__, refused)


# Calls whose native code runs to the end (no bail): the node counters the
# native code keeps must be the interpreter's.
COUNTED = [CASES[k] for k in (0, 1, 2, 3, 4, 5, 9, 15, 18)]

_COUNTERS = """
import copy, sys, tessera
sys.path.insert(0, {here!r})
import test_native_list_tables as t
for f, args in t.COUNTED:
    g = tessera.jit(f)
    print(f.__name__, repr(g(*copy.deepcopy(args))))
    print([",".join(l.split(",")[:3]) for l in g.counters().splitlines()])
"""


def test_native_code_counts_nodes_as_the_interpreter():
    native, log = run_script(_COUNTERS, TESSERA_FAST_LOOPS="debug", TESSERA_CACHE_DIR="0")
    interp, _ = run_script(_COUNTERS, TESSERA_NATIVE="0")
    assert native == interp
    assert "native code returned 0" in log and "returned 4" not in log


_ALIAS_SCRIPT = cases_script("test_native_list_tables", "t.ALIAS_CASES")


def test_a_row_held_by_a_variable_is_the_same_on_every_path():
    out = run_on_every_path(_ALIAS_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    # The tables the functions make are written by native code (the
    # parameter's, an element of the caller's, goes the general way).
    for f, _ in ALIAS_CASES:
        assert loop_log_lines(log, f, "native code returned 0"), (f.__name__, log)


@pytest.mark.parametrize("f, args", ALIAS_CASES, ids=[f.__name__ for f, _ in ALIAS_CASES])
def test_the_other_holder_sees_the_rows_writes(f, args):
    # What the other variable holds is the row as the loop left it, as Python's.
    got = tessera.jit(f)(*copy.deepcopy(args))
    assert got == f(*copy.deepcopy(args))
    assert got[1] != [0] * 4


def test_a_late_bail_takes_back_rows_written_in_place():
    # The jit's answer is Python's (the interpreter redid the turns after the
    # bail on rows as they were at the call's start), and the rows were
    # written in place by native code (its debug log: a bail, then the result).
    out, log = run_script("""
import sys, tessera
sys.path.insert(0, {here!r})
import test_native_list_tables as t
print(tessera.jit(t.made_then_bails)(3000, 5) == t.made_then_bails(3000, 5))
""", TESSERA_FAST_LOOPS="debug", TESSERA_CACHE_DIR="0")
    assert out.strip() == "True"
    assert loop_log_lines(log, made_then_bails, "native code returned 4"), log


def grow_and_write(t, n):
    # Rows of numbers rewritten, two rows grown in place; the last row
    # (a list in it) left alone.
    for i in range(len(t) - 1):
        for j in range(len(t[i])):
            t[i][j] = t[i][j] * n + 0.5 * (i == 1)
    t[0].append(n)
    t[2] += [n, n]
    return len(t)


def test_written_back_rows_keep_their_identity():
    # The caller's rows are the same list objects after the call, changed in
    # place as Python changes them; an inner list of a row too.
    inner = [7, 8]
    t = [[1, 2, 3], [4, 5, 6], [7, 8, 9, 10], [1, inner, 2]]
    rows = list(t)
    theirs = copy.deepcopy(t)
    their_rows = list(theirs)
    expected = grow_and_write(theirs, 3)
    got = tessera.jit(grow_and_write)(t, 3)
    assert got == expected and t == theirs
    assert [a is b for a, b in zip(t, rows)] == [a is b for a, b in zip(theirs, their_rows)]
    assert all(a is b for a, b in zip(t, rows)) and t[3][1] is inner


@pytest.mark.parametrize("target, value", [
    ([[1, 2], [3, 4]], [[5, 6.5], [7, 8]]),                 # rows of numbers: slice assignment
    ([[1, 2], [3, 4]], [[5], [6, 7, 8], [9]]),               # lengths change, a row added
    ([[1, [2, 3]], [4, 5]], [[6, [7]], [8, 9]]),             # a list in a row: kept, updated
    ([[1, (2, [3])], [4]], [[5, (6, [7])], [8]]),            # a tuple holding a list
    ([[1, 2], [True, None]], [[1.0, "a"], [False, 2]]),      # items of other kinds replaced
    ([[np.zeros(2), 1]], [[np.ones(2), 2]]),                 # an array: replaced
])
def test_write_back_is_an_update_in_place(target, value):
    # write_back leaves the caller's lists equal to the program's values, each
    # list (and the lists inside) the same object as before.
    def lists(x, out):
        if isinstance(x, (list, tuple)):
            if isinstance(x, list):
                out.append(x)
            for y in x:
                lists(y, out)
        return out
    before = lists(target, [])
    write_back(target, value)
    assert repr(target) == repr(value)
    after = lists(target, [])
    assert all(any(a is b for b in after) for a in before[:len(after)] if a is not target)
    assert target[0] is before[1]
