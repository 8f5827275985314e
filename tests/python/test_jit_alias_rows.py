"""Rows of tables in jit functions against CPython running the same code: a name
bound to a row (`cur = t[i]`) follows writes through the table, a table holding one
list twice written through a row is refused naming both lines, and the errors of
the translator's expansions name the user's line (python/tessera/_aliases.py,
_statements.py; the pairs of names for one list or dict: test_jit_aliases.py)."""

import copy
import inspect

import numpy as np
import pytest

import tessera


# ---------------------------------------------------------------- rows of a table


def lcs_row_names(a, b):
    # the DP pattern: rows read through names while the table is written
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        prev = d[i - 1]
        cur = d[i]
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                d[i][j] = prev[j - 1] + 1
            else:
                d[i][j] = max(prev[j], cur[j - 1])
    return d[len(a)][len(b)], d


def rows_by_tuple(n):
    d = [[0] * 4 for _ in range(n)]
    for i in range(1, n):
        prev, cur = d[i - 1], d[i]
        for j in range(4):
            d[i][j] = prev[j] + j + (cur[j - 1] if j else 0)
    return d


def row_by_negative_index(n):
    t = [[0] * 3 for _ in range(3)]
    last = t[-1]
    t[2][0] = n
    t[-1][1] = n + 1
    t[0][2] = 9
    return last, t


def row_grown_through_the_table(n):
    t = [[1], [2]]
    r = t[0]
    for i in range(n):
        t[0].append(i)
        t[1].append(-i)
    t[0] += [7]
    return r, t


def row_replaced_then_written(n):
    t = [[0, 0], [0, 0]]
    r = t[0]
    t[0] = [5, 5]
    t[0][1] = n
    return r, t


def dict_of_rows(n):
    d = {"a": [0, 0], "b": [1, 1]}
    r = d["a"]
    d["a"][0] = n
    d["b"][1] = n
    return r, d


def row_after_table_grew(n):
    t = [[0]]
    r = t[0]
    t.append([1])
    t[0][0] = n
    return r


def row_ahead_written_next_turn(n):
    # nxt = d[i + 1] is the row d[i] the next turn writes before nxt is rebound
    d = [[0] * 2 for _ in range(n + 1)]
    out = 0
    for i in range(n):
        d[i][0] += i + 1
        if i > 0:
            out += nxt[0]  # noqa: F821 -- bound the turn before
        nxt = d[i + 1]
    return out


def row_behind_with_index_moved(n):
    d = [[1] * 3 for _ in range(n + 1)]
    i = 1
    while i < n:
        prev = d[i - 1]
        i += 1
        d[i - 2][1] = i
        d[i][0] = prev[1]
    return d


ROW_CASES = [(row_ahead_written_next_turn, (4,)), (row_behind_with_index_moved, (5,)),
             (lcs_row_names, ("abcbdab", "bdcaba")), (lcs_row_names, ("kitten", "sitting")),
             (rows_by_tuple, (5,)), (row_by_negative_index, (4,)),
             (row_grown_through_the_table, (3,)), (row_replaced_then_written, (3,)),
             (dict_of_rows, (6,)), (row_after_table_grew, (2,))]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f,args", ROW_CASES, ids=[f"{f.__name__}-{a[0]}" for f, a in ROW_CASES])
def test_a_row_under_a_name_sees_the_tables_writes_as_python(f, args, threads):
    assert tessera.jit(f, threads=threads)(*args) == f(*args)


def row_then_table_reordered(n):
    t = [[0], [1], [2]]
    r = t[0]
    t.insert(0, [9])
    t[1][0] = n
    return r


def row_of_a_computed_index(xs):
    t = [[0, 0], [0, 0]]
    r = t[xs.index(1)]
    t[1][0] = 5
    return r


@pytest.mark.parametrize("f,args", [(row_then_table_reordered, (3,)),
                                    (row_of_a_computed_index, ([0, 1],))])
def test_a_row_tessera_cannot_follow_is_refused(f, args):
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.jit(f)(*args)
    msg = str(e.value)
    assert "is an item of 't' (line " in msg and "read later" in msg, msg
    assert "test_jit_alias_rows.py:" in msg, msg


def same_row_twice(n):
    row = [0] * 3
    t = [row, row]
    t[0][1] = n
    return t


def repeated_row(n):
    t = [[0] * 3] * 2
    t[0][1] = n
    return t


def repeated_rows_of_sizes(n, m):
    t = [[0] * n] * m
    t[0][0] = 5
    return t


def repeated_by_comprehension(n):
    row = [0, 0]
    t = [row for _ in range(n)]
    t[0][0] = 1
    return t


def slot_copied(n):
    t = [[0, 0], [1, 1]]
    t[1] = t[0]
    t[1][0] = n
    return t


def appended_twice(n):
    rows = []
    row = [0, 0]
    for i in range(n):
        rows.append(row)
    rows[0][1] = 7
    return rows


def stored_row_read_later(n):
    row = [0, 0]
    t = [row, [1, 1]]
    t[0][0] = n
    return row


def twice_then_rebound(n):
    row = [0, 0]
    t = [row, row]
    row = [9]
    t[0][0] = n
    return t, row


def grown_through_the_table(n):
    t = [[0]] * 2
    t[0].append(n)
    return t


# (function, arguments, the line making the table, the line writing through it)
SHARED = [(same_row_twice, (3,), 2, 3), (repeated_row, (3,), 1, 2),
          (repeated_rows_of_sizes, (3, 2), 1, 2), (repeated_by_comprehension, (3,), 2, 3),
          (slot_copied, (4,), 2, 3), (appended_twice, (3,), 4, 5),
          (stored_row_read_later, (5,), 2, 3), (twice_then_rebound, (5,), 2, 4),
          (grown_through_the_table, (5,), 1, 2)]


@pytest.mark.parametrize("f,args,made,written", SHARED, ids=[c[0].__name__ for c in SHARED])
def test_one_list_held_twice_and_written_through_is_refused(f, args, made, written):
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.jit(f)(*args)
    msg = str(e.value)
    first = f.__code__.co_firstlineno
    assert f"here and is changed in place through an item later (line {first + written})" \
        in msg, msg
    assert f"test_jit_alias_rows.py:{first + made}" in msg, msg


def rows_made_apart(n, m):
    t = [[0] * n for _ in range(m)]
    t[0][0] = 5
    return t


def one_repeated_row(n):
    t = [[0] * n] * 1  # one row: nothing shared
    t[0][0] = 5
    return t


def repeated_numbers(n):
    t = [0] * n
    t[0] += 1
    return t


def a_number_twice(n):
    x = n * 2
    t = [x, x]
    t[0] += 1
    return t


def repeated_rows_replaced(n):
    t = [[0] * 2] * n
    for i in range(n):
        t[i] = [i, i]
    return t


def rows_appended_fresh(n):
    rows = []
    for i in range(n):
        row = [i, i]
        rows.append(row)
    rows[0][0] = 9
    return rows


LOOK_ALIKE_TABLES = [(rows_made_apart, (3, 2)), (one_repeated_row, (3,)), (repeated_numbers, (4,)),
                     (a_number_twice, (3,)),
                     (repeated_rows_replaced, (3,)), (rows_appended_fresh, (3,))]


@pytest.mark.parametrize("f,args", LOOK_ALIKE_TABLES, ids=[f.__name__ for f, _ in LOOK_ALIKE_TABLES])
def test_tables_of_separate_rows_keep_pythons_answer(f, args):
    assert tessera.jit(f)(*args) == f(*args)


# ---------------------------------------------------------------- errors of the translator's expansions


def set_min_empty(n):
    s = set(range(n))
    return min(s)


def set_max_empty(n):
    s = set(range(n))
    return max(s)


def set_sum_floats(n):
    s = {0.5 * i for i in range(n)}
    return sum(s)


def append_to_a_number(n):
    d = {0: n}
    d[0].append(n)
    return d


def extend_a_number(n):
    d = {0: n}
    d.setdefault(0, []).extend([n])
    return d


def digits(s):
    return [int(c) for c in str(s)]


def sum_of_mixed(xs):
    return sum(xs)


def sum_of_a_display(x):
    return sum([x, "a"])


def index_tuples(x):
    s = 0.0
    for idx in np.ndindex(3):
        s += x[idx]
    return s


def rounded(x):
    return round(x)


def columns(a, b):
    return np.c_[a, b]


def item_of(x):
    return x.item()


def to_list_of(x):
    return x.tolist()


# (function, arguments, Python's exception, the error's line in the function);
# None: the error is tessera's own (its message is checked by its own tests).
EXPANSION_ERRORS = [
    (set_min_empty, (0,), ValueError, 2), (set_max_empty, (0,), ValueError, 2),
    (set_sum_floats, (3,), None, 2), (append_to_a_number, (1,), AttributeError, 2),
    (extend_a_number, (1,), AttributeError, 2), (digits, ("1a",), ValueError, 1),
    (sum_of_mixed, ([1, "a"],), TypeError, 1), (sum_of_a_display, (1,), TypeError, 1),
    (index_tuples, (np.zeros(2),), IndexError, 3), (rounded, ("s",), None, 1),
    (columns, (np.zeros(2), "s"), None, 1), (item_of, (np.zeros(2),), ValueError, 1),
    (to_list_of, ("s",), AttributeError, 1), (to_list_of, ([1, 2],), AttributeError, 1),
    (to_list_of, ({1: 2},), AttributeError, 1), (to_list_of, (None,), AttributeError, 1),
]


@pytest.mark.parametrize("f,args,exc,line", EXPANSION_ERRORS,
                         ids=[f"{c[0].__name__}-{type(c[1][0]).__name__}"
                              for c in EXPANSION_ERRORS])
def test_an_expansions_error_names_the_users_line(f, args, exc, line):
    # sum(), min(), max() of a set, d[k].append(), int(str), x[idx], round(),
    # np.c_, x.item(), x.tolist(): the translator's text for them used to name
    # the program's text (<jit f>:line:col) instead of the user's line.
    if exc is not None:
        with pytest.raises(exc) as want:
            f(*copy.deepcopy(args))
    with pytest.raises(Exception) as got:
        tessera.jit(f)(*copy.deepcopy(args))
    msg = str(got.value)
    assert f"(at test_jit_alias_rows.py:{f.__code__.co_firstlineno + line})" in msg, msg
    assert "<jit" not in msg, msg
    if exc is not None:
        assert isinstance(got.value, exc), msg
        assert str(want.value) in msg, (str(want.value), msg)


def loop_row_read_after_table_written(n):
    t = [[0, 0], [0, 0]]
    out = []
    for row in t:
        t[0][0] = n
        out.append(row[0])
    return out


def enumerated_row_read_after(n):
    t = [[0, 0], [0, 0]]
    out = []
    for i, row in enumerate(t):
        t[i][1] = n
        out.append(row[1])
    return out


def loop_row_read_before_table_written(n):
    t = [[1, 2], [3, 4]]
    s = 0
    for row in t:
        s += row[0]
        t[0][1] = n
    return s, t


def test_a_loops_row_read_after_the_table_is_written_is_refused():
    for f in (loop_row_read_after_table_written, enumerated_row_read_after):
        assert f(5) != [0, 0]  # Python: the row shows the write
        with pytest.raises(tessera.UnsupportedError, match=r"'row' is an item of 't' \(line \d+\)"):
            tessera.jit(f)(5)
    f = loop_row_read_before_table_written
    assert tessera.jit(f)(7) == f(7)


def got_row_read_after(n):
    d = {"a": [0, 0]}
    r = d.get("a")
    d["a"][0] = n
    return r


def longest_row_read_after(n):
    rows = [[0], [0, 0]]
    m = max(rows, key=len)
    rows[1][0] = n
    return m


def row_bound_two_ways(n):
    t = [[0, 0], [1, 1]]
    r = t[0]
    if n > 2:
        r = t[len(t[0]) - 1]
    t[1][0] = n
    return r


@pytest.mark.parametrize("f,arg", [(got_row_read_after, 5), (longest_row_read_after, 5),
                                   (row_bound_two_ways, 5)])
def test_a_row_a_call_or_a_computed_index_gave_is_refused_when_written(f, arg):
    assert f(arg) != f(0)  # Python: the name shows the table's write
    with pytest.raises(tessera.UnsupportedError, match=r"is an item of '\w+' \(line \d+\)"):
        tessera.jit(f)(arg)


def list_to_list(n):
    xs = [1, 2, n]
    return xs.tolist()


def test_tolist_of_a_list_is_pythons_attribute_error():
    with pytest.raises(AttributeError) as want:
        list_to_list(3)
    with pytest.raises(AttributeError) as got:
        tessera.jit(list_to_list)(3)
    line = list_to_list.__code__.co_firstlineno + 2
    assert str(want.value) in str(got.value), str(got.value)
    assert f"(at test_jit_alias_rows.py:{line})" in str(got.value), str(got.value)
    assert tessera.jit(to_list_of)(np.arange(3.0)) == to_list_of(np.arange(3.0))


def int_of(s):
    return int(s)


def int_of_each(text):
    return [int(x) for x in text.split(",")]


INT_STRINGS = [" 7 ", "1_000", "0x1", "abc", "", "   ", "-", "+", "+5", "-0", "1__0", "_1", "1_",
               "+_1", "-_1", "007", "\t-42\n", "1 2", "1.5", "1e3", "9223372036854775807",
               "-9223372036854775808", "12_34_5", "٣", "\u3000١٢\x85", "\x1c5", "5\u00b2"]


@pytest.mark.parametrize("s", INT_STRINGS, ids=[repr(s) for s in INT_STRINGS])
def test_int_of_a_string_parameter_as_python(s):
    # a parameter the translator cannot see is a string: Python's int() of it
    try:
        want = int_of(s)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            tessera.jit(int_of)(s)
        assert str(e) in str(got.value), str(got.value)
        line = int_of.__code__.co_firstlineno + 1
        assert f"(at test_jit_alias_rows.py:{line})" in str(got.value), str(got.value)
        return
    got = tessera.jit(int_of)(s)  # digits of other scripts and Unicode's blanks too
    assert got == want and type(got) is int, (got, want)


def test_int_of_strings_in_a_list_and_of_numbers_as_python():
    text = "1, -2,3_0"
    assert tessera.jit(int_of_each)(text) == int_of_each(text)
    for x in (7, -2.9, 3.5, True):
        assert tessera.jit(int_of)(x) == int_of(x)


def test_int_of_a_string_past_int64_is_an_overflow_error():
    # Python's ints have no bound; a jit function's are int64: refused, never wrapped
    for s in ("9223372036854775808", "-9223372036854775809", "1" * 30):
        assert int_of(s) == int(s)
        with pytest.raises(OverflowError, match=r"int\('\d*'\)|int\('-\d*'\)"):
            tessera.jit(int_of)(s)


def two_levels_down_written(n):
    g = [[[0] * 3 for _ in range(3)] for _ in range(2)]
    c = g[1][2]
    for k in range(3):
        g[1][2][k] = n + k
    return c


def two_levels_down_grown(n):
    g = [[[0] * 2 for _ in range(2)] for _ in range(2)]
    c = g[1][0]
    g[1][0].append(n)
    return c


def loop_over_an_item_written(n):
    g = [[[0] * 2 for _ in range(2)] for _ in range(2)]
    out = []
    for c in g[1]:
        g[1][1][0] = n
        out.append(c[0])
    return out


def three_levels_down_written(n):
    g = [[[[0, 0]] for _ in range(2)] for _ in range(2)]
    c = g[0][0][0]
    g[0][0][0][1] = n
    return c


def two_levels_down_changed_then_table_read(n):
    g = [[[0] * 3 for _ in range(3)] for _ in range(2)]
    c = g[1][2]
    c[1] = n
    return g


@pytest.mark.parametrize("f", [two_levels_down_written, two_levels_down_grown,
                               loop_over_an_item_written, three_levels_down_written])
def test_a_name_several_levels_down_read_after_a_write_is_refused(f):
    assert f(5) != f(0)  # Python: the name shows the write
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.jit(f)(5)
    msg = str(e.value)
    first = f.__code__.co_firstlineno
    bound = next(i for i, line in enumerate(inspect.getsource(f).splitlines())
                 if " c = " in line or "for c in" in line)
    assert f"'c' is an item of 'g' (line {first + bound})" in msg, msg
    assert "test_jit_alias_rows.py:" in msg, msg


def test_a_name_several_levels_down_changed_in_place_is_refused():
    f = two_levels_down_changed_then_table_read
    with pytest.raises(tessera.UnsupportedError, match=r"'c' in place.*test_jit_alias_rows.py:"):
        tessera.jit(f)(5)


def numbers_two_levels_down(n):
    d = [[[0] * 3 for _ in range(3)] for _ in range(n)]
    s = 0
    for i in range(1, n):
        for j in range(3):
            best = d[i - 1][j]
            for k in range(3):
                d[i][j][k] = best[k] + i * j + k
            s += d[i][j][0]
    c = d[n - 1][2][1]
    d[n - 1][2][1] = -1
    return s, c, d


def items_two_levels_down_replaced(n):
    g = [[[0], [1]], [[2], [3]]]
    c = g[1][0]
    g[1][0] = [n]
    g[1][1] = [n, n]
    return c, g


@pytest.mark.parametrize("f", [numbers_two_levels_down, items_two_levels_down_replaced])
def test_names_several_levels_down_that_keep_pythons_answer_run(f):
    assert tessera.jit(f)(4) == f(4)


def row_changed_table_unread(n):
    t = [[0] * 3 for _ in range(n)]
    r = t[n - 1]
    r[1] = n
    r[2] += 4
    r.append(5)
    return r


def loop_rows_changed_table_unread(n):
    t = [[0] * 3 for _ in range(n)]
    s = 0
    for row in t:
        row[0] = n
        s += sum(row)
    return s


def dict_row_changed_table_unread(n):
    d = {k: [k] for k in range(n)}
    r = d[1]
    r.append(n)
    del r[0]
    return r


def enumerated_rows_written(n):
    t = [[0] * 3 for _ in range(n)]
    for i, row in enumerate(t):
        row[1] = i
        row[2] += n
    return t


def enumerated_rows_grown(n):
    t = [[i] for i in range(n)]
    for i, row in enumerate(t):
        row.append(i * n)
        if i % 2:
            del row[0]
    return t, len(t[0])


def enumerated_rows_written_then_read(n):
    t = [[1] * 4 for _ in range(n)]
    for i, row in enumerate(t):
        for j in range(1, 4):
            row[j] = row[j - 1] + i
    total = 0
    for row in t:
        total += row[3]
    return t, total


ROW_CHANGES = [row_changed_table_unread, loop_rows_changed_table_unread,
               dict_row_changed_table_unread, enumerated_rows_written, enumerated_rows_grown,
               enumerated_rows_written_then_read]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f", ROW_CHANGES, ids=[f.__name__ for f in ROW_CHANGES])
def test_a_row_changed_through_its_name_keeps_pythons_answer(f, threads):
    # the table is never read after the change (the change is the row's own), or the
    # row of for i, row in enumerate(t) is written back to t[i]
    assert tessera.jit(f, threads=threads)(4) == f(4)


def enumerated_rows_of_a_parameter(t):
    for i, row in enumerate(t):
        row[0] = i
    return t


def enumerated_rows_of_a_table_under_two_names(n):
    t = [[0] * 3 for _ in range(n)]
    u = t
    for i, row in enumerate(t):
        row[1] = i
    return u


def row_changed_with_another_name_read(n):
    t = [[0] * 3 for _ in range(n)]
    a = t[0]
    r = t[0]
    r[1] = n
    return a


def row_changed_table_read_next_turn(n):
    t = [[0] * 3 for _ in range(n)]
    s = 0
    for _ in range(n):
        r = t[0]
        r[1] += 1
        s += r[1]
    return s


def row_of_repeated_rows_changed(n):
    t = [[0] * 3] * n
    for i, row in enumerate(t):
        row[0] = i
    return t


def table_reordered_in_the_loop(n):
    t = [[k] for k in range(n)]
    for i, row in enumerate(t):
        row.append(i)
        t.reverse()
    return t


def row_item_extended_in_place(n):
    t = [[[1], [2]] for _ in range(n)]
    for i, row in enumerate(t):
        row[0] += [n]
    return t


@pytest.mark.parametrize("f,arg", [
    (enumerated_rows_of_a_parameter, [[5, 5], [6, 6]]),
    (enumerated_rows_of_a_table_under_two_names, 3), (row_changed_with_another_name_read, 3),
    (row_changed_table_read_next_turn, 3), (row_of_repeated_rows_changed, 3),
    (table_reordered_in_the_loop, 3), (row_item_extended_in_place, 2)])
def test_a_row_changed_where_python_shares_it_is_refused(f, arg):
    with pytest.raises(tessera.UnsupportedError, match=r"in place.*test_jit_alias_rows.py:\d+"):
        tessera.jit(f)(copy.deepcopy(arg))


def table_rebound_in_the_loop(n):
    t = [[0] * 2 for _ in range(n)]
    for i, row in enumerate(t):
        row[0] = i + 1
        t = [[9] * 2 for _ in range(n)]
    return t


def row_stored_then_changed(n):
    t = [[0] * 2 for _ in range(n)]
    out = []
    r = t[0]
    out.append(r)
    r[1] = n
    return out


def nested_function_changes_its_own_row(n):
    t = [[0] * 2 for _ in range(n)]
    r = t[0]

    def g(u):
        r = u[1]
        r[0] = n
        return u

    r[1] = n
    return r, g([[1, 1], [2, 2]])


def test_row_changes_python_shares_otherwise_are_refused_or_kept():
    for f in (table_rebound_in_the_loop, row_stored_then_changed):
        with pytest.raises(tessera.UnsupportedError, match=r"test_jit_alias_rows.py:\d+"):
            tessera.jit(f)(3)
    f = nested_function_changes_its_own_row
    with pytest.raises(tessera.UnsupportedError, match=r"'r' in place"):
        tessera.jit(f)(3)  # g's r is an item of its parameter, which the caller holds


def enumerated_rows_read_through_the_table(n):
    t = [[1] * 3 for _ in range(n)]
    seen = []
    for i, row in enumerate(t):
        row[0] = i + 1
        if t[i][0] > 1:
            seen.append(t[i][0] + t[max(i - 1, 0)][1])
        row.append(n)
        for j in range(len(t[i])):
            row[j] += j
            seen.append(t[i][j])
        if i == n - 2:
            row[1] = -1
            break
        if i % 2:
            row[2] = 7
            continue
        row[2] = 9
    return t, seen


def test_an_enumerated_row_is_seen_through_the_table_wherever_it_is_read():
    f = enumerated_rows_read_through_the_table
    for n in (1, 3, 5):
        assert tessera.jit(f)(n) == f(n)
