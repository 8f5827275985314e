"""Published kernels nobody here wrote, fourth round (issue 31): what they
needed, each compared with plain Python/NumPy at 1 and 2 threads (the kernels
are bench/published_kernels.py's FOURTH_PUBLISHED, raced by
bench_numpy_kernels.py in its "published" category).

- Python sets (Rosetta's sieve and happy numbers, Project Euler's distinct
  powers, two-sum): refused; now held as dicts of their elements (_sets.py),
  with Python's results, a Python set when returned, and an error suggesting
  ``sorted(s)`` wherever a result would depend on Python's set order.
- ``int(c)`` of a string (``sum(int(c) ** 2 for c in str(n))``): an unclear
  error from ``ndim``; now Python's base-10 parse and its ValueError where the
  argument may be a string (seen in the function: str(...), a string method, a
  loop over one), and int(x) elsewhere stays native code.
- ``np.int64`` scalar arguments: were Python ints (``a * b`` raised where NumPy
  wraps); now NumPy scalars with NumPy's integer semantics, as every other
  NumPy integer scalar already was.
"""

import os
import sys

import numpy as np
import pytest
from jit_check import check, run_script, same_as_python

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))

import published_kernels as suite_kernels  # noqa: E402

# ---------------------------------------------------------------- sets


def set_basics(xs, ys):
    s = set()
    for x in xs:
        s.add(x)
    t = set(ys)
    s.discard(99)
    s.discard(xs[0])
    u = {x * x for x in xs if x > 1}
    w = {1, 2, 3}
    w |= t
    return (len(s), 4 in s, 4 not in t, sorted(s), min(t), max(t), sum(s), s | t, s & t,
            s - t, s ^ t, u, w, s == t, sorted(s, reverse=True), len(set(xs)))


def set_methods(xs, ys):
    s = set(xs)
    t = set(ys)
    v = s.copy()
    v.update(ys)
    v.difference_update([xs[0]])
    i = s.intersection(t)
    w = s.union(t).difference(i)
    e = set()
    e.add(1)
    e.clear()
    return (v, i, w, e, s.issubset(v | s), t.issuperset(i), s.isdisjoint({-1, -2}),
            s.symmetric_difference(t), bool(e), not s)


def set_in_conditions(xs):
    todo = set(xs)
    done = []
    while todo:
        x = min(todo)
        todo.remove(x)
        if x % 3 and x + 3 not in todo:
            done.append(x)
    return done, todo if not todo else {0}


def set_of_strings_and_tuples(words):
    seen = {w.lower() for w in words}
    pairs = set()
    for i in range(len(words) - 1):
        pairs.add((words[i], words[i + 1]))
    return sorted(seen), len(pairs), ("a", "b") in pairs, seen


def set_of_floats(xs):
    s = {0.5, 1.5}
    for x in xs:
        s.add(x * 0.25)
    return s, sorted(s), max(s), min(s), len(s)


def set_returned(n):
    return {i % 7 for i in range(n)}


def set_in_tuple_returned(n):
    s = set(range(n))
    return n, s, [1, 2]


def remove_missing(xs):
    s = set(xs)
    s.remove(1000)
    return s


def sum_of_float_set(xs):
    return sum(set(xs))


def min_of_empty(xs):
    return min(set(xs))


def iterate_a_set(xs):
    total = 0
    for x in set(xs):
        total = total * 3 + x
    return total


def list_of_a_set(xs):
    return list(set(xs))


def set_then_list(xs):
    s = set(xs)
    s = list(xs)
    return s


def set_pop(xs):
    s = set(xs)
    return s.pop()


def test_set_operations_match_python(threads):
    same_as_python(set_basics, [5, 3, 1, 2, 9, 5], [2, 7, 9, 11])
    same_as_python(set_basics, [4, 4, 4], [4])
    same_as_python(set_methods, [5, 3, 1, 2, 9, 5], [2, 7, 9, 11, -4])
    same_as_python(set_in_conditions, [9, 1, 4, 7, 12, 6, 2, 5])
    same_as_python(set_of_strings_and_tuples, ["a", "b", "A", "a", "b", "c"])
    same_as_python(set_of_floats, [1.0, 2.0, 6.0, 2.0])
    for n in (0, 3, 50):
        same_as_python(set_returned, n)
        same_as_python(set_in_tuple_returned, n)


def test_set_results_are_python_sets():
    got = tessera.jit(set_returned)(40)
    assert type(got) is set and got == set_returned(40)
    got = tessera.jit(set_in_tuple_returned)(4)
    assert type(got[1]) is set and type(got[2]) is list and got == set_in_tuple_returned(4)


def test_set_errors_mirror_python(threads):
    with pytest.raises(KeyError):
        remove_missing([1, 2])
    with pytest.raises(KeyError, match="1000"):
        tessera.jit(remove_missing)([1, 2])
    with pytest.raises(ValueError):
        min_of_empty([])
    with pytest.raises(ValueError, match="empty"):
        tessera.jit(min_of_empty)([])
    assert tessera.jit(sum_of_float_set)([3, 1, 3]) == sum_of_float_set([3, 1, 3])


def test_results_that_depend_on_set_order_are_refused():
    # Python's order for a set is its hash table's: never a silently different answer.
    for f in (iterate_a_set, list_of_a_set, set_pop):
        with pytest.raises(NotImplementedError, match=r"sorted\(s\)|sorted\(.*\).*test_jit_pub"):
            tessera.jit(f)([3, 1, 2])
    with pytest.raises(ValueError, match=r"sum\(sorted\(s\)\)"):
        tessera.jit(sum_of_float_set)([0.1, 0.2, 0.3])
    with pytest.raises(NotImplementedError, match="holds a set and, here, something else"):
        tessera.jit(set_then_list)([1])


# ---------------------------------------------------------------- int() of a string


def int_of(s):
    # str(s): the translator parses strings where the argument may be one (a
    # string's method, str(...), a loop over one); a bare parameter is a number
    return int(str(s))


def digit_square_sum(n):
    return sum(int(c) ** 2 for c in str(n))


def test_int_of_a_string_matches_python(threads):
    for s in ("12", " -7 ", "+3", "0", "x1", "", "-", "1.5", "1 2"):
        check(int_of, s)
        try:
            expected = int_of(s)
        except ValueError:
            with pytest.raises(ValueError, match="invalid literal for int"):
                tessera.jit(int_of)(s)
            continue
        same_as_python(int_of, s)
        assert tessera.jit(int_of)(s) == expected
    for n in (0, 7, 9876, 10**17 + 3):
        same_as_python(digit_square_sum, n)


# ---------------------------------------------------------------- NumPy integer scalars


def mul(a, b):
    return a * b


def scale(a, x):
    return a * x


def add_loop(a, n):
    s = a
    for i in range(n):
        s = s * a + i
    return s


def test_numpy_int64_scalars_keep_numpy_semantics(threads):
    big = np.int64(2**40)
    assert mul(big, big) == 0  # NumPy wraps (the test can tell a Python int's result)
    check(mul, big, big)
    check(mul, np.int64(-(2**62)), np.int64(4))
    check(scale, np.int64(3), np.arange(5, dtype=np.int8))
    check(scale, np.int64(3), np.arange(5, dtype=np.float32))
    check(scale, np.int32(3), np.arange(5, dtype=np.int8))
    check(add_loop, np.int64(3), 50)
    check(add_loop, np.uint64(3), 50)


def int_scalar_uses(n, xs):
    d = {n: 1, 0.5: 2, (1, 2): 3}
    return [0] * n, xs[n], d[2], "ab" * n, n * [1], d[0.5] + d[(1, 2)], xs[-n]


def test_numpy_integer_scalars_work_where_python_takes_an_int(threads):
    for n in (np.int64(2), np.int32(2), np.uint8(2), 2):
        check(int_scalar_uses, n, [5, 6, 7])
    with pytest.raises(IndexError):
        tessera.jit(int_scalar_uses)(np.int64(5), [5, 6, 7])


# ---------------------------------------------------------------- the kernels

_QUICK = {k["name"]: k for k in suite_kernels.FOURTH_PUBLISHED}


@pytest.mark.parametrize("name", sorted(_QUICK))
def test_fourth_round_kernel_matches_python(name, threads):
    spec = _QUICK[name]
    args = spec["setup"](True)
    if any(isinstance(a, np.ndarray) for a in args):
        check(spec["func"], *args, rtol=spec.get("rtol", 1e-6))
    else:
        same_as_python(spec["func"], *args)


CASES = [(set_basics, ([5, 3, 1, 2, 9, 5], [2, 7, 9, 11])), (set_in_conditions, ([9, 1, 4, 7, 6],)),
         (suite_kernels.sieve_set, (300,)), (suite_kernels.happy_numbers, (20,)),
         (suite_kernels.two_sum_pairs, (list(range(0, 300, 7)), 140)),
         (suite_kernels.distinct_powers, (8,)), (remove_missing, ([1],)),
         (suite_kernels.levenshtein, ("kitten", "sitting")),
         (suite_kernels.knapsack01, ([60, 100, 120], [10, 20, 30], 50)),
         (suite_kernels.word_frequency, ("a b a c b a", 2)), (digit_square_sum, (4567,))]

_SCRIPT = """
import copy, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import tessera
import test_jit_published_kernels4 as t


def outcome(f, args):
    try:
        r = f(*copy.deepcopy(args))
        return (type(r).__name__, r)
    except Exception as e:
        return (type(e).__name__, None)


for threads in (1, 2):
    for f, args in t.CASES:
        got = outcome(tessera.jit(f, threads=threads), args)
        want = outcome(f, args)
        print(f.__name__, threads, "same" if got == want else f"DIFF {{got}} {{want}}")
"""


@pytest.mark.parametrize("fast", ["debug", "0"])
def test_fast_loops_on_and_off_match_python(fast):
    out, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS=fast)
    lines = out.splitlines()
    assert len(lines) == 2 * len(CASES)
    assert all(line.endswith(" same") for line in lines), out
