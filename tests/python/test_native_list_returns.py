"""Recursive jit functions that make new lists of numbers and return them
(comprehensions with a filter, `a + b` of lists, `[p]`, `[]` then appends), as
native calls end to end (docs/runtime.md, "Native loops", lists made and
returned). Each result must be a new list equal to Python's, with items of
Python's kinds; the caller's list is not the result and does not change; what
native code cannot do at depth (a division by zero, an index out of range)
makes the general path run the call again on the lists as they were, raising
Python's error at its line; what it cannot do at all (lists of mixed kinds)
stays on the general path. Against plain Python, and with native code, the
loop interpreter and the general evaluation at 1 and 2 threads."""

import pytest
from jit_check import cases_script, run_on_every_path, same_as_python

import tessera


def quicksort(xs):
    # bench/published_kernels.py's, in this module so that it is translated
    if len(xs) <= 1:
        return xs
    pivot = xs[len(xs) // 2]
    less = [x for x in xs if x < pivot]
    equal = [x for x in xs if x == pivot]
    greater = [x for x in xs if x > pivot]
    return quicksort(less) + equal + quicksort(greater)


def qsort_pivot_list(xs):
    # the first item as pivot, `[p]` between the halves
    if len(xs) <= 1:
        return xs
    p = xs[0]
    rest = [xs[i] for i in range(1, len(xs))]
    return qsort_pivot_list([x for x in rest if x < p]) + [p] + \
        qsort_pivot_list([x for x in rest if x >= p])


def merge_sort(xs):
    if len(xs) <= 1:
        return xs
    mid = len(xs) // 2
    a = merge_sort([xs[i] for i in range(mid)])
    b = merge_sort([xs[i] for i in range(mid, len(xs))])
    out = []
    i = 0
    j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    while i < len(a):
        out.append(a[i])
        i += 1
    while j < len(b):
        out.append(b[j])
        j += 1
    return out


def halves(xs, k):
    # `[]` then appends of floats: a list of floats made from one of ints
    if k == 0:
        return xs
    out = []
    for x in xs:
        out.append(x / 2)
    return halves(out, k - 1)


def min_max(xs, i):
    # a display of two numbers returned
    if i == len(xs) - 1:
        return [xs[i], xs[i]]
    rest = min_max(xs, i + 1)
    return [min(xs[i], rest[0]), max(xs[i], rest[1])]


def inverses(xs):
    # 1 // x at depth: ZeroDivisionError at this line for a 0
    if len(xs) <= 1:
        return [1 // x for x in xs]
    return inverses([xs[0]]) + inverses([xs[i] for i in range(1, len(xs))])


def past_the_end(xs, k):
    if k == 0:
        return [xs[len(xs)]]  # IndexError here
    return past_the_end(xs + [k], k - 1)


def result_changed(xs):
    # the result is a list of its own: appending to it leaves xs as it was
    ys = quicksort(xs)
    ys.append(-1)
    return len(xs) * 100 + len(ys)


def sorted_lengths(xs, m):
    # a loop calling the recursion (the loop interpreter's call of it)
    t = 0
    for k in range(m):
        t += len(quicksort([x for x in xs if x > k])) * (k + 1)
    return t


_INTS = [5, 3, 8, 1, 9, 2, 7, 3, 3, 0, -4, 11, 8, 6, 2]
CASES = [(quicksort, (list(_INTS),)), (quicksort, ([],)), (quicksort, ([7],)),
         (quicksort, ([2.5, -1.0, 3.25, 0.0, 2.5, -7.5],)), (quicksort, ([True, False, True],)),
         (quicksort, ([3, 1.5, 2, 0.5],)), (quicksort, ([2**62, -2**62, 5],)),
         (qsort_pivot_list, (list(_INTS),)), (qsort_pivot_list, ([1.5, 0.5, 2.5],)),
         (merge_sort, (list(_INTS),)), (merge_sort, ([],)), (merge_sort, ([0.5, -0.5, 0.25],)),
         (halves, ([1, 2, 3, 4], 2)), (halves, ([], 3)), (min_max, (list(_INTS), 0)),
         (min_max, ([2.5, -1.5, 4.0], 0)), (inverses, ([1, 2, -1, 3],)),
         (result_changed, (list(_INTS),)), (sorted_lengths, (list(_INTS), 4))]
RAISING = [(inverses, ([1, 2, 0, 3],)), (past_the_end, ([1, 2], 3))]

# The functions whose calls run as native code (the log's names).
NATIVE_CALLS = ["quicksort", "qsort_pivot_list", "merge_sort", "halves", "min_max", "inverses",
                "past_the_end", "result_changed"]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_same_as_python(f, args, threads):
    got = same_as_python(f, *args)
    if isinstance(got, list) and got:
        assert [type(x) for x in got] == [type(x) for x in f(*args)]


def test_the_result_is_a_new_list(threads):
    xs = [3, 1, 2]
    ys = tessera.jit(quicksort)(xs)
    assert ys == [1, 2, 3] and ys is not xs
    one = [4]
    zs = tessera.jit(quicksort)(one)
    assert zs == [4]
    zs.append(5)  # the general path's copy: the argument is not changed
    assert one == [4] and xs == [3, 1, 2]


@pytest.mark.parametrize("f, args, kind", [(inverses, ([1, 2, 0, 3],), ZeroDivisionError),
                                           (past_the_end, ([1, 2], 3), IndexError)])
def test_errors_at_depth_name_their_line_and_keep_the_list(f, args, kind, threads):
    before = [list(a) if isinstance(a, list) else a for a in args]
    with pytest.raises(kind):
        f(*before)
    with pytest.raises(kind, match=r"test_native_list_returns.py:\d+"):
        tessera.jit(f)(*args)
    assert list(args) == before


_SCRIPT = cases_script("test_native_list_returns", "t.CASES + t.RAISING")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "ZeroDivisionError" in native and "IndexError" in native
    for name in NATIVE_CALLS:
        assert f"native code for the call of '{name}'" in log, (name, log)
    # Lists of mixed kinds are not lists of numbers of one kind: the general path's.
    assert "[3, 1.5, 2, 0.5]" in native
    for mode in ("interpreter", "general"):
        assert "native code for the call" not in out[mode][1]
