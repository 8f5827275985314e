"""Two names for one list or dict (python/tessera/_aliases.py), the builtin dict()
and the del statement in jit functions, against CPython running the same code.

A pair of names for one list or dict that is changed in place while both hold
it would give an answer different from Python's in a jit function (its lists and
dicts are values): refused at run time with UnsupportedError naming both lines.
The patterns that look alike but keep Python's answer run as Python."""

import copy
import inspect

import numpy as np
import pytest

import tessera


def alias_then_change_dict(n):
    d = {}
    e = d
    for i in range(n):
        d[i] = i
    return len(e)


def alias_then_append(n):
    xs = []
    ys = xs
    for i in range(n):
        xs.append(i)
    return len(ys)


def alias_changed_through_new_name(n):
    d = {0: 0}
    e = d
    e[1] = n
    return d


def stored_then_changed(n):
    rows = []
    row = []
    for i in range(n):
        rows.append(row)
        row.append(i)
    return rows


def stored_by_setitem_then_changed(n):
    table = {}
    acc = [0]
    table["a"] = acc
    acc.append(n)
    return table


def stored_in_display_then_changed(n):
    xs = [1]
    pair = [xs, 2]
    xs.append(n)
    return pair


def chained_display(n):
    a = b = []
    a.append(n)
    return b


def alias_chain(n):
    d = {}
    e = d
    f = e
    f[1] = n
    return d


REFUSED = [(alias_then_change_dict, 5), (alias_then_append, 5),
           (alias_changed_through_new_name, 5), (stored_then_changed, 3),
           (stored_by_setitem_then_changed, 3), (stored_in_display_then_changed, 3),
           (alias_chain, 4)]


def rolling_rows(n):
    prev = [0] * 4
    for i in range(n):
        cur = [0] * 4
        for j in range(4):
            cur[j] = prev[j] + i + j
        prev = cur
    return prev


def swap_rows(n):
    a, b = [0] * 3, [1] * 3
    for i in range(n):
        a, b = b, a
        a[i % 3] += i
    return a, b


def arrays_share(n):
    a = np.zeros(n)
    b = a
    b[0] = 1.0
    return a


def numbers_copy(n):
    best = 0
    cur = best
    cur += n
    return best, cur


def stored_then_rebound(n):
    rows = []
    for i in range(n):
        row = []
        for j in range(3):
            row.append(i * j)
        rows.append(row)
    return rows


def stored_copy_then_changed(n):
    rows = []
    row = [0, 0]
    for i in range(n):
        rows.append(list(row))
        row[0] += i
    return rows


def alias_rebound_before_change(n):
    d = {1: 1}
    e = d
    d = {}
    d[2] = n
    return d, e


def alias_read_only(n):
    xs = list(range(n))
    ys = xs
    return sum(ys) + len(xs)


def alias_in_branch_not_changed(n):
    xs = [1, 2]
    if n > 2:
        ys = xs
    else:
        ys = [0]
    return ys


ALLOWED = [(rolling_rows, 5), (swap_rows, 5), (arrays_share, 4), (numbers_copy, 3),
           (stored_then_rebound, 4), (stored_copy_then_changed, 4),
           (alias_rebound_before_change, 3), (alias_read_only, 6),
           (alias_in_branch_not_changed, 3), (alias_in_branch_not_changed, 1)]


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f,arg", REFUSED, ids=[f.__name__ for f, _ in REFUSED])
def test_two_names_changed_in_place_are_refused(f, arg, threads):
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.jit(f, threads=threads)(arg)
    msg = str(e.value)
    assert "test_jit_aliases.py:" in msg, msg
    assert "changed in place later (line " in msg or "name one object" in msg, msg


def test_chained_display_is_refused_when_translated():
    with pytest.raises(tessera.UnsupportedError, match=r"a = b = \.\.\..*line \d+"):
        tessera.jit(chained_display)(2)


def test_the_refusal_names_both_lines():
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.jit(alias_then_append)(3)
    lines = alias_then_append.__code__.co_firstlineno
    msg = str(e.value)
    assert f"test_jit_aliases.py:{lines + 2}" in msg, msg  # ys = xs
    assert f"(line {lines + 4})" in msg, msg  # xs.append(i)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f,arg", ALLOWED, ids=[f"{f.__name__}-{a}" for f, a in ALLOWED])
def test_look_alikes_keep_pythons_answer(f, arg, threads):
    want = f(arg)
    got = tessera.jit(f, threads=threads)(arg)
    assert _same(want, got), (want, got)


# ---------------------------------------------------------------- dict()


def dict_forms(a, b):
    d = dict(zip(a, b))
    e = dict(d, z=9)
    e[a[0]] = 100
    g = dict(enumerate(b))
    h = dict((x, x * x) for x in a)
    i = dict(one=1, two=2.5)
    j = dict()
    k = dict(d.items())
    m = dict([[1, "x"], (2, "y")])
    return d, e, g, h, i, j, k, m


def dict_of(p):
    return dict(p)


def test_dict_forms_as_python():
    a, b = [1, 2, 3], [4.5, 5.5, 6.5]
    assert tessera.jit(dict_forms)(a, b) == dict_forms(a, b)


@pytest.mark.parametrize("p", [[(1, 2), (3, 4)], ["ab", "cd"], {1: 2, 3: 4}, [],
                               [(1, 2), (1, 3)]])
def test_dict_of_pairs_as_python(p):
    assert tessera.jit(dict_of)(copy.deepcopy(p)) == dict_of(p)


@pytest.mark.parametrize("p,exc,text", [
    ([(1, 2, 3)], ValueError, "dictionary update sequence element #0 has length 3; 2 is required"),
    ([(1, 2), [3]], ValueError, "dictionary update sequence element #1 has length 1; 2 is required"),
    ([1, 2], TypeError, "cannot convert dictionary update sequence element #0 to a sequence"),
])
def test_dict_of_bad_pairs_is_pythons_error(p, exc, text):
    with pytest.raises(exc) as want:
        dict_of(p)
    assert text in str(want.value)
    with pytest.raises(exc) as got:
        tessera.jit(dict_of)(p)
    assert text in str(got.value)
    assert f"test_jit_aliases.py:{dict_of.__code__.co_firstlineno + 1}" in str(got.value)


def dict_of_two(a, b):
    return dict(a, b)


def test_dict_with_two_positional_arguments_is_refused():
    with pytest.raises(tessera.UnsupportedError, match=r"dict\(\) with 2 positional"):
        tessera.jit(dict_of_two)({}, {})


# ---------------------------------------------------------------- del


def del_forms(n):
    d = {i: i * i for i in range(n)}
    del d[2]
    xs = list(range(n))
    del xs[1]
    del xs[-1]
    ys = list(range(10))
    del ys[2:5]
    del ys[:1], d[0]
    tmp = np.ones(3)
    s = float(tmp.sum())
    del tmp
    return d, xs, ys, s


def del_missing_key(k):
    d = {1: 2}
    del d[k]
    return d


def del_out_of_range(i):
    xs = [1]
    del xs[i]
    return xs


def del_then_read(n):
    x = n
    del x
    return x


def del_in_loop_read_next_turn(n):
    t = 0
    for i in range(n):
        if i > 0:
            t += x  # noqa: F821 -- read before the del of the turn
        x = i
        del x
    return t


def del_with_step(xs, a, b, k):
    xs = list(xs)
    del xs[a:b:k]
    return xs


def del_steps_in_place(xs):
    del xs[::2]
    del xs[::-3]
    return len(xs)


@pytest.mark.parametrize("threads", [1, 2])
def test_del_forms_as_python(threads):
    assert tessera.jit(del_forms, threads=threads)(6) == del_forms(6)


def test_del_missing_key_and_index_are_pythons_errors():
    with pytest.raises(KeyError):
        tessera.jit(del_missing_key)(5)
    with pytest.raises(IndexError):
        tessera.jit(del_out_of_range)(3)
    assert tessera.jit(del_missing_key)(1) == del_missing_key(1)


@pytest.mark.parametrize("n", [0, 1, 5, 8])
@pytest.mark.parametrize("a,b,k", [(None, None, 2), (None, None, -1), (1, None, 3),
                                   (None, -2, -2), (-7, 9, 2), (4, 0, -3), (0, 5, 1)])
def test_del_of_a_step_slice_as_python(n, a, b, k):
    assert tessera.jit(del_with_step)(list(range(n)), a, b, k) == del_with_step(range(n), a, b, k)


def test_del_of_a_step_slice_changes_the_callers_list():
    want, got = list(range(11)), list(range(11))
    assert tessera.jit(del_steps_in_place)(got) == del_steps_in_place(want)
    assert got == want


def test_del_of_a_step_slice_errors_are_pythons():
    with pytest.raises(ValueError, match="slice step cannot be zero") as e:
        tessera.jit(del_with_step)([1, 2], None, None, 0)
    assert f"test_jit_aliases.py:{del_with_step.__code__.co_firstlineno + 2}" in str(e.value)
    with pytest.raises(TypeError) as want:
        del_steps_in_place((1, 2))
    with pytest.raises(TypeError) as got:
        tessera.jit(del_steps_in_place)((1, 2))
    assert str(want.value) in str(got.value)


@pytest.mark.parametrize("f", [del_then_read, del_in_loop_read_next_turn])
def test_del_that_cannot_keep_pythons_meaning_is_refused(f):
    with pytest.raises(tessera.UnsupportedError, match=r"del .*test_jit_aliases.py:\d+"):
        tessera.jit(f)(4)


# ---------------------------------------------------------------- objects calls give


def grouped_by_setdefault_variable(pairs):
    d = {}
    for k, v in pairs:
        lst = d.setdefault(k, [])
        lst.append(v)
    return d


def got_then_changed(k):
    d = {"a": [1]}
    lst = d.get(k)
    lst.append(2)
    return d


def longest_then_changed(xs):
    m = max(xs, key=len)
    m.append(0)
    return xs


def grouped_by_setdefault_call(pairs):
    d = {}
    for k, v in pairs:
        d.setdefault(k, []).append(v)
    return d


def biggest_number(xs):
    m = max(xs)
    m += 1
    return m


@pytest.mark.parametrize("f,arg", [(grouped_by_setdefault_variable, [(1, 2), (1, 3), (2, 4)]),
                                   (got_then_changed, "a"),
                                   (longest_then_changed, [[1], [1, 2]])])
def test_changing_an_object_a_call_gave_is_refused(f, arg):
    # d.setdefault / d.get / max give the container's own object in Python
    with pytest.raises(tessera.UnsupportedError, match=r"changing the list or dict '\w+' in place"):
        tessera.jit(f)(copy.deepcopy(arg))


@pytest.mark.parametrize("f,arg", [(grouped_by_setdefault_call, [(1, 2), (1, 3), (2, 4)]),
                                   (biggest_number, [3, 9, 4])])
def test_calls_changing_through_the_holder_keep_pythons_answer(f, arg):
    assert tessera.jit(f)(copy.deepcopy(arg)) == f(copy.deepcopy(arg))


# ---------------------------------------------------------------- arguments sharing an object


def write_table_read_row(t, xs):
    t[0][0] = 9
    return xs[0]


def write_table(t):
    t[0][1] = 5
    return t


def read_only(t, xs):
    return t[0][0] + xs[0]


def test_arguments_sharing_a_list_that_is_changed_are_refused():
    row = [1, 2]
    with pytest.raises(tessera.UnsupportedError, match=r"'xs' and 't\[0\]' are the same list"):
        tessera.jit(write_table_read_row)([row], row)
    assert row == [1, 2]  # nothing ran
    with pytest.raises(tessera.UnsupportedError, match=r"'t\[1\]' and 't\[0\]' are the same"):
        tessera.jit(write_table)([row, row])


def test_separate_or_unchanged_arguments_keep_pythons_answer():
    row = [1, 2]
    t = [[1, 2]]
    assert tessera.jit(write_table_read_row)(t, [1, 2]) == 1 and t == [[9, 2]]
    assert tessera.jit(read_only)([row], row) == read_only([row], row)
    t2 = [[1, 2], [1, 2]]
    assert tessera.jit(write_table)(t2) == [[1, 5], [1, 2]]


def stored_in_a_display_then_appended(n):
    row = [0] * 2
    t = [row, 5]
    row.append(n)
    return t


def test_a_row_stored_in_a_display_is_named_with_its_holder():
    with pytest.raises(tessera.UnsupportedError, match=r"'row' is put into 't' here"):
        tessera.jit(stored_in_a_display_then_appended)(3)


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
    assert "test_jit_aliases.py:" in msg, msg


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
    assert f"test_jit_aliases.py:{first + made}" in msg, msg


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
    assert f"(at test_jit_aliases.py:{f.__code__.co_firstlineno + line})" in msg, msg
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
    assert f"(at test_jit_aliases.py:{line})" in str(got.value), str(got.value)
    assert tessera.jit(to_list_of)(np.arange(3.0)) == to_list_of(np.arange(3.0))


def int_of(s):
    return int(s)


def int_of_each(text):
    return [int(x) for x in text.split(",")]


INT_STRINGS = [" 7 ", "1_000", "0x1", "abc", "", "   ", "-", "+", "+5", "-0", "1__0", "_1", "1_",
               "+_1", "-_1", "007", "\t-42\n", "1 2", "1.5", "1e3", "9223372036854775807",
               "-9223372036854775808", "12_34_5", "٣"]


@pytest.mark.parametrize("s", INT_STRINGS, ids=[repr(s) for s in INT_STRINGS])
def test_int_of_a_string_parameter_as_python(s):
    # a parameter the translator cannot see is a string: Python's int() of it
    try:
        want = int_of(s)
    except ValueError as e:
        if s == "٣":
            pytest.skip("non-ASCII digits: a documented difference (ValueError in jit)")
        with pytest.raises(ValueError) as got:
            tessera.jit(int_of)(s)
        assert str(e) in str(got.value), str(got.value)
        line = int_of.__code__.co_firstlineno + 1
        assert f"(at test_jit_aliases.py:{line})" in str(got.value), str(got.value)
        return
    if s == "٣":
        with pytest.raises(ValueError):
            tessera.jit(int_of)(s)
        return
    got = tessera.jit(int_of)(s)
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
    assert "test_jit_aliases.py:" in msg, msg


def test_a_name_several_levels_down_changed_in_place_is_refused():
    f = two_levels_down_changed_then_table_read
    with pytest.raises(tessera.UnsupportedError, match=r"'c' in place.*test_jit_aliases.py:"):
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
    with pytest.raises(tessera.UnsupportedError, match=r"in place.*test_jit_aliases.py:\d+"):
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
        with pytest.raises(tessera.UnsupportedError, match=r"test_jit_aliases.py:\d+"):
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
