"""Recursive jit functions that change a list argument in place (backtracking:
append, pop, extend, item assignment), as native calls (the lists passed by
reference through the recursion), with the loop interpreter and with the
general path (docs/runtime.md, "Native loops", recursion with lists). What
native code cannot do at depth (an index out of range, a None returned, a
division by zero) makes it bail, and the general path runs the call again from
the lists as they were; what it cannot do at all (a float appended to a list of
ints) keeps the function off native calls, and its loops go back to their
checkpoints as before. The results, the kinds of the items and the caller's
lists afterwards must be Python's, at 1 and 2 threads."""

import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path, same_as_python

import tessera


def queens_count(n, row, cols):
    # bench/published_kernels.py's, in this module so that it is translated
    if row == n:
        return 1
    count = 0
    for c in range(n):
        ok = True
        for r, cc in enumerate(cols):
            if cc == c or abs(cc - c) == row - r:
                ok = False
                break
        if ok:
            cols.append(c)
            count += queens_count(n, row + 1, cols)
            cols.pop()
    return count


def n_queens(n):
    return queens_count(n, 0, [])


def queens_from(n, cols):
    # the caller's partial placement: the same list back after the search
    return queens_count(n, len(cols), cols)


def perms(items, cur, used, out):
    if len(cur) == len(items):
        out.append(list(cur))
        return 1
    count = 0
    for i in range(len(items)):
        if used[i]:
            continue
        used[i] = True
        cur.append(items[i])
        count += perms(items, cur, used, out)
        cur.pop()
        used[i] = False
    return count


def all_perms(items):
    out = []
    n = perms(items, [], [False] * len(items), out)
    return n, out


def subset_sums(xs, i, chosen, sums):
    if i == len(xs):
        s = 0
        for v in chosen:
            s += v
        sums.append(s)
        return len(chosen)
    total = subset_sums(xs, i + 1, chosen, sums)
    chosen.extend([xs[i]])
    total += subset_sums(xs, i + 1, chosen, sums)
    chosen.pop()
    return total


def subsets(xs):
    sums = []
    chosen = []
    t = subset_sums(xs, 0, chosen, sums)
    return t, sums, chosen


def float_at_depth(k, acc):
    # at depth 3 a float joins a list of ints: the loop's code was made for
    # ints and gives the turn back to the general path
    if k == 0:
        return 0
    acc.append(0.5 if k == 3 else k)
    s = 0
    for v in acc:
        s += v
    r = s + float_at_depth(k - 1, acc)
    acc[len(acc) - 1] = r
    return r


def mixed(k):
    acc = [1, 2]
    r = float_at_depth(k, acc)
    return r, acc


def index_error_at_depth(k, xs):
    if k == 0:
        return xs[len(xs) + 1]  # IndexError here, four calls down
    total = 0
    for v in xs:
        total += v
    xs.append(k)
    return total + index_error_at_depth(k - 1, xs)


def walk(depth, path, seen):
    # an item store into one list (bools), appends and pops of another
    if depth == 0:
        return 1
    total = 0
    for v in range(len(seen)):
        if seen[v]:
            continue
        seen[v] = True
        path.append(v)
        total += walk(depth - 1, path, seen)
        path.pop()
        seen[v] = False
    return total


def walks(n, depth):
    path = [7]
    seen = [False] * n
    t = walk(depth, path, seen)
    return t, path, seen


def push_twice(xs, v):
    xs.append(v)
    xs.append(v * 2)
    return len(xs)


def drop_one(xs):
    return xs.pop()


def two_helpers(k, xs):
    # one list passed on to two other functions that change it, and down
    if k == 0:
        return 0
    push_twice(xs, k)
    d = drop_one(xs)
    return d + two_helpers(k - 1, xs)


def dot_rec(a, b, i):
    # two parameters that may be one list, only read
    if i == len(a):
        return 0.0
    return a[i] * b[-1 - i] + dot_rec(a, b, i + 1)


def dot_same(xs):
    return dot_rec(xs, xs, 0), xs


def stop_at_three(k, path):
    # None at depth when k reaches 3: native code bails there, the general
    # path returns None through every level
    path.append(k)
    if k == 3:
        return None
    if k == 0:
        return len(path)
    return stop_at_three(k - 1, path)


def divide_at_depth(k, xs):
    xs.append(k)
    if k == 0:
        return 100 // (len(xs) - 4)  # ZeroDivisionError when four items are in
    return divide_at_depth(k - 1, xs) + 1


def queens_table(m):
    # a loop calling the recursion with a list: the loop interpreter's call
    out = []
    for n in range(1, m):
        out.append(queens_count(n, 0, []))
    return out


def dots(xs, k):
    t = 0.0
    for i in range(k):
        t += dot_rec(xs, xs, 0) * i
    return t


CASES = [(n_queens, (5,)), (n_queens, (6,)), (n_queens, (1,)), (queens_from, (6, [1])),
         (queens_from, (5, [0, 2])), (all_perms, ([3, 1, 2],)), (all_perms, ([],)),
         (subsets, ([1, 2, 4],)), (mixed, (5,)), (mixed, (2,)), (walks, (4, 3)),
         (two_helpers, (4, [1])), (dot_same, ([1.5, -2.0, 0.25],)), (stop_at_three, (2, [])),
         (stop_at_three, (6, [9])), (queens_from, (6, [True])), (divide_at_depth, (5, [1, 2])),
         (queens_table, (7,)), (dots, ([1.5, 2.0, -0.5], 4))]
# Cases that raise at depth: the same error and the caller's list on every path.
RAISING = [(divide_at_depth, (1, [1, 2])), (index_error_at_depth, (4, [1, 2]))]


# The functions each case compiles as a native call (its _out variant's, or
# the entry's when called with the caller's list).
NATIVE_CALLS = ["queens_count_out", "subset_sums_out", "walk_out", "two_helpers_entry",
                "dot_rec", "stop_at_three_entry", "divide_at_depth_entry",
                "index_error_at_depth_entry", "dots"]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_same_as_python(f, args, threads):
    same_as_python(f, *args)


def test_index_error_at_depth_names_its_line(threads):
    xs = [1, 2]
    with pytest.raises(IndexError):
        index_error_at_depth(4, list(xs))
    with pytest.raises(IndexError, match=r"test_native_list_recursion.py:\d+"):
        tessera.jit(index_error_at_depth)(4, xs)
    # A call that raises gives nothing back (docs/python.md, "Lists are
    # values"): the caller's list is the one it passed.
    assert xs == [1, 2]


_SCRIPT = cases_script("test_native_list_recursion", "t.CASES + t.RAISING")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "queens_count 10 ()" not in native  # n_queens takes no list
    # The loops over the list at depth run native code.
    for f in (queens_count, float_at_depth, subset_sums):
        assert loop_log_lines(log, f, "native code"), (f.__name__, log)
    # The float at depth sends the loop's native code back to its call's
    # start (kNativeBailCall), where the interpreter redoes it: a float
    # appended to a list of ints keeps the function off native calls.
    assert loop_log_lines(log, float_at_depth, "native code returned 4"), log
    assert "'float_at_depth_out' stays on the general path: a value of another kind" in log, log
    # The recursion with lists runs as native calls (docs/runtime.md).
    for name in NATIVE_CALLS:
        assert f"native code for the call of '{name}'" in log, (name, log)
    # queens_table's loop runs on the interpreter, whose calls of the
    # recursion take the list (before: a bail and a roll-back at each).
    assert loop_log_lines(log, queens_table, "the interpreter runs the loop"), log
    assert not loop_log_lines(log, queens_table, "rolled back"), log
    for mode in ("interpreter", "general"):
        assert "native code for the call" not in out[mode][1]


def test_divide_at_depth_names_its_line_and_keeps_the_list(threads):
    xs = [1, 2]
    with pytest.raises(ZeroDivisionError, match=r"test_native_list_recursion.py:\d+"):
        tessera.jit(divide_at_depth)(1, xs)  # the fourth item is appended two calls down
    assert xs == [1, 2]  # a call that raises gives nothing back (as index_error_at_depth)
    # Deeper, the division does not fail: Python's result and list.
    assert same_as_python(divide_at_depth, 5, [1, 2]) == 30


def test_a_list_passed_twice_to_a_changing_function_is_refused():
    # Python's one list seen through two parameters: the translator refuses it
    # (the general path would not give Python's answer), native code or not.
    def merge_into(a, b, k):
        if k == 0:
            return len(a) + len(b)
        a.append(k)
        b.append(-k)
        return merge_into(a, b, k - 1)

    def twice(k):
        xs = [0]
        return merge_into(xs, xs, k), xs

    with pytest.raises(tessera.UnsupportedError if hasattr(tessera, "UnsupportedError")
                       else Exception, match="passed twice"):
        tessera.jit(twice)(3)
