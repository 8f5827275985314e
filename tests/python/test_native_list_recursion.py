"""Recursive jit functions that change a list argument in place (backtracking:
append, pop, extend, item assignment), with their loops on native code, the
loop interpreter and the general path (docs/runtime.md, "Native loops",
recursion with lists). A loop that meets what its code cannot do at depth (a
float appended to a list of ints, an index out of range) goes back to its
checkpoint and the general path finishes the call: the results, the kinds of
the items and the caller's lists afterwards must be Python's, at 1 and 2
threads."""

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


CASES = [(n_queens, (5,)), (n_queens, (6,)), (n_queens, (1,)), (queens_from, (6, [1])),
         (queens_from, (5, [0, 2])), (all_perms, ([3, 1, 2],)), (all_perms, ([],)),
         (subsets, ([1, 2, 4],)), (mixed, (5,)), (mixed, (2,))]


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


_SCRIPT = cases_script("test_native_list_recursion")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "queens_count 10 ()" not in native  # n_queens takes no list
    # The loops over the list at depth run native code.
    for f in (queens_count, float_at_depth, subset_sums):
        assert loop_log_lines(log, f, "native code"), (f.__name__, log)
    # The float at depth sends the loop's native code back to its call's
    # start (kNativeBailCall), where the interpreter redoes it.
    assert loop_log_lines(log, float_at_depth, "native code returned 4"), log
