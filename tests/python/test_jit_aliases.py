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
