"""Published NumPy kernels nobody here wrote, second round (issue 31): what they
needed fixed, each compared with plain Python/NumPy at 1 and 2 threads (the
kernels are bench/published_kernels.py's MORE_PUBLISHED, raced by
bench_numpy_kernels.py as its "published" category and run at their quick sizes
by test_jit_published_kernels.py's test_published_kernel_agrees_with_numpy).

- ``for ... else`` and ``while ... else`` (Cython's tutorial's primes, trial
  division): refused; the else runs when the loop ends without its own break,
  in native loops too.
- A helper changing a list or dict passed to it (n-queens' backtracking:
  ``cols.append(c)``, a recursion, ``cols.pop()``): refused; the helper now gives
  the final values back and the caller's variable is rebound to them, as
  Python's caller sees its list changed.
"""

import copy
import os
import sys

import numpy as np
import pytest
from jit_check import check, run_json_on_every_path, same_as_python

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))

import published_kernels as suite_kernels  # noqa: E402


# ---------------------------------------------------------------- for ... else, while ... else


primes_list = suite_kernels.primes_list  # Cython's tutorial: for ... else over a list


def first_above(x, limits):
    out = np.empty(len(limits), dtype=np.int64)
    for j in range(len(limits)):
        for i in range(len(x)):
            if x[i] > limits[j]:
                out[j] = i
                break
        else:
            out[j] = -1
    return out


def count_primes_while(n):
    count = 0
    k = 2
    while k < n:
        d = 2
        while d * d <= k:
            if k % d == 0:
                break
            d += 1
        else:
            count += 1
        k += 1
    return count


def inner_break_only(x):
    # the inner loop's break is not the outer loop's: the outer else runs
    hits = 0
    for i in range(len(x)):
        for j in range(3):
            if x[i] + j > 2.5:
                hits += 1
                break
    else:
        hits += 100
    return hits


def else_breaks_outer(x):
    # a break in an inner loop's else belongs to the outer loop
    found = -1
    for i in range(len(x)):
        for j in range(i):
            if x[j] == x[i]:
                break
        else:
            if i > 0 and x[i] > 5:
                found = i
                break
    else:
        found = -2
    return found


def else_in_empty_loop(n):
    s = 0
    for i in range(n):
        s += i
    else:
        s += 1000
    while n > 100:
        n -= 1
    else:
        s += 1
    return s


def test_loop_else_matches_python(threads):
    same_as_python(primes_list, 60)
    same_as_python(primes_list, 0)
    r = np.random.default_rng(5)
    x = r.random(200)
    check(first_above, x, np.array([0.5, 0.99, 2.0, -1.0]))
    check(count_primes_while, 500)
    check(inner_break_only, np.array([0.5, 1.0, 0.1]))
    check(inner_break_only, np.array([0.5, 3.0, 0.1]))
    check(else_breaks_outer, np.array([3, 1, 3, 7, 9]))
    check(else_breaks_outer, np.array([3, 3, 2, 1]))
    check(else_breaks_outer, np.array([6, 6, 7]))
    check(else_in_empty_loop, 0)
    check(else_in_empty_loop, 5)
    check(else_in_empty_loop, 120)


# ---------------------------------------------------------------- helpers changing lists passed to them


n_queens = suite_kernels.n_queens  # Rosetta Code's backtracking over a list


def push_twice(xs, v):
    xs.append(v)
    xs.append(v + 1)
    return len(xs)


def grow_in_loop(n):
    out = []
    total = 0
    for i in range(n):
        total += push_twice(out, i)
    return out, total


def perms(n, prefix, used, acc):
    if len(prefix) == n:
        acc.append(list(prefix))
        return 1
    c = 0
    for v in range(n):
        if not used[v]:
            used[v] = True  # written by subscript beside prefix's appends: given back too
            prefix.append(v)
            c += perms(n, prefix, used, acc)
            prefix.pop()
            used[v] = False
    return c


def all_perms(n):
    acc = []
    c = perms(n, [], [False] * n, acc)
    return c, acc


def count_into(d, k):
    d.update({k: d.get(k, 0) + 1})


def count_all(xs):
    d = {}
    for x in xs:
        count_into(d, x)
    return d


def pass_along(xs):
    # the entry changes xs only through the helper: the caller's list is given back
    return push_twice(xs, 5) + push_twice(xs, 7)


def into_row(rows):
    for row in rows:  # row is an element of rows: Python changes rows' list
        push_twice(row, 1)
    return rows


def same_list_twice(xs):
    return merge_into(xs, xs)


def merge_into(a, b):
    a.append(len(b))
    return a


def test_helpers_changing_lists_match_python(threads):
    for n in (1, 4, 5, 6):
        same_as_python(n_queens, n)
    same_as_python(grow_in_loop, 6)
    same_as_python(all_perms, 3)
    same_as_python(count_all, [1, 2, 1, 3, 1])
    same_as_python(pass_along, [1.0])
    same_as_python(pass_along, [])


def test_helpers_changing_an_element_are_refused(threads):
    # Python would change the object the caller's variable came from: refused
    # at the call's line, not computed differently.
    for f, args, helper, line in ((into_row, ([[1], [2]],), "push_twice", 2),
                                  (same_list_twice, ([1],), "merge_into", 1)):
        with pytest.raises(tessera.UnsupportedError) as e:
            tessera.jit(f)(*copy.deepcopy(args))
        assert f"to '{helper}', which changes it in place" in str(e.value)
        where = f"test_jit_published_kernels2.py:{f.__code__.co_firstlineno + line}"
        assert where in str(e.value), str(e.value)


# ---------------------------------------------------------------- every path: native, interpreter, general


_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
import numpy as np
import tessera
import test_jit_published_kernels2 as t

r = np.random.default_rng(4)
out = {{}}
for threads in (1, 2):
    tessera._core.set_num_threads(threads)
    x = r.random(3000)
    out[f"first{{threads}}"] = tessera.jit(t.first_above)(x, np.array([0.5, 0.999, 2.0])).tolist()
    out[f"primes{{threads}}"] = int(tessera.jit(t.count_primes_while)(3000))
    out[f"inner{{threads}}"] = int(tessera.jit(t.inner_break_only)(x * 2.6))
    out[f"outer{{threads}}"] = int(tessera.jit(t.else_breaks_outer)(r.integers(0, 9, 50)))
    out[f"queens{{threads}}"] = tessera.jit(t.n_queens)(6)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs():
    return run_json_on_every_path(_SCRIPT)


def test_the_same_on_every_path(runs):
    native = runs["native"][0]
    for mode in ("interpreter", "general"):
        assert runs[mode][0] == native, mode
    # and Python's answers
    r = np.random.default_rng(4)
    x = r.random(3000)
    assert native["first1"] == first_above(x, np.array([0.5, 0.999, 2.0])).tolist()
    assert native["primes1"] == count_primes_while(3000)
    assert native["inner1"] == inner_break_only(x * 2.6)
    assert native["queens1"] == n_queens(6)


def test_loops_with_else_run_native(runs):
    err = runs["native"][1]
    for fn in (first_above, count_primes_while, inner_break_only):
        first = fn.__code__.co_firstlineno
        last = max(line for _, _, line in fn.__code__.co_lines() if line is not None)
        assert any(f"test_jit_published_kernels2.py:{n}: native code" in err
                   for n in range(first, last + 1)), (fn.__name__, err)
