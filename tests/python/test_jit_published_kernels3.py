"""Published NumPy kernels nobody here wrote, third round (issue 31): what they
needed fixed, each compared with plain Python/NumPy at 1 and 2 threads (the
kernels are bench/published_kernels.py's MORE_PUBLISHED, raced by
bench_numpy_kernels.py as its "published" category and run at their quick sizes
by test_jit_published_kernels.py's test_published_kernel_agrees_with_numpy).

- Python's integer functions of math (Project Euler's digit factorials:
  ``math.factorial``; ``comb``, ``perm``, ``gcd``, ``lcm``, ``isqrt``): refused;
  now Python's values and errors (an int beyond int64 is tessera's overflow error).
- ``d[k] = d.get(k, 0) + 1`` and ``ways[i] += ways[i - coin]`` in a loop (a dict
  counter, Project Euler's coin sums over a list): the loop interpreter rolled the
  loop back to the general evaluation at every dict or list item write, which
  copied the whole dict or list for each (coin sums was quadratic); the interpreter
  now changes them in place (their value before logged once per checkpoint, so
  that a roll-back restores it).
"""

import math
import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, check, run_script, same_as_python

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))

import published_kernels as suite_kernels  # noqa: E402


# ---------------------------------------------------------------- math's integer functions


def int_functions(n, k):
    return (math.factorial(n), math.comb(n, k), math.perm(n, k), math.perm(n),
            math.gcd(n * 6, k * 4), math.lcm(n, k), math.isqrt(n * n + k))


def gcd_isqrt_loop(n):
    s = 0
    for i in range(1, n):
        s += math.gcd(i, n) + math.isqrt(i) + math.comb(i % 9, 3)
    return s


def factorial_of(n):
    return math.factorial(n)


def comb_of(n, k):
    return math.comb(n, k)


def isqrt_of(n):
    return math.isqrt(n)


def test_math_integer_functions_match_python(threads):
    for n, k in ((0, 0), (1, 0), (5, 2), (10, 3), (20, 7), (3, 5), (-4, 6), (12, 12)):
        if n >= 0:
            same_as_python(int_functions, n, k)
    same_as_python(gcd_isqrt_loop, 500)
    same_as_python(suite_kernels.digit_factorial_sums, 3000)
    for big in (2**62, 2**63 - 1, 10**18 + 7, 99, 100, 101):
        same_as_python(isqrt_of, big)
    same_as_python(comb_of, 60, 30)  # its partial products stay within int64


def test_math_integer_function_errors_mirror_python(threads):
    # Python's exception kinds: a negative operand ValueError, a float TypeError.
    for f, args in ((factorial_of, (-1,)), (factorial_of, (2.0,)), (comb_of, (-1, 2)),
                    (comb_of, (5, -1)), (comb_of, (5.0, 2)), (isqrt_of, (-4,))):
        check(f, *args)
    with pytest.raises(ValueError, match=r"\[math.factorial\] .*negative.*got -3"):
        tessera.jit(factorial_of)(-3)


# ---------------------------------------------------------------- dict writes in loops


def count_by_key(n):
    counts = {}
    for i in range(n):
        k = (i * 7919) % 13
        counts[k] = counts.get(k, 0) + 1
    return counts


def letter_counts(words):
    counts = {}
    for w in words:
        for c in w:
            counts[c] = counts.get(c, 0) + 1
    return counts


def equal_keys(n):
    # 1, 1.0 and True are one key in Python: the first one stays, the value changes.
    d = {}
    for i in range(n):
        d[1] = i
        d[1.0] = i + 0.5
        d[True] = -i
        d[i % 3 + 2.5] = i
    return d, len(d)


def array_keys(a):
    d = {}
    for i in range(len(a)):
        if a[i] in d:
            d[a[i]] = d[a[i]] + i
        else:
            d[a[i]] = i
    return d


def keys_then_tuple(n):
    # A tuple key after many turns: the loop leaves the fast path at that
    # turn (back to a checkpoint), and the general evaluation goes on.
    d = {}
    for i in range(n):
        d[i % 17] = d.get(i % 17, 0) + i
        if i == n - 3:
            d[(i, i)] = 1
    return d


def two_names(n):
    # `e` holds the same dict as `d`: the writes go the general way.
    d = {0: 0}
    e = d
    for i in range(n):
        d[i % 5] = i
    return d, e


def counter_into(d, n):
    for i in range(n):
        d[i % 4] = d.get(i % 4, 0) + 1
    return len(d)


def test_dict_writes_in_loops_match_python(threads):
    for n in (0, 1, 70, 500):
        same_as_python(count_by_key, n)
        same_as_python(equal_keys, n)
        same_as_python(keys_then_tuple, n + 3)
    same_as_python(letter_counts, ["numpy", "tessera", "python", "dict"] * 30)
    check(array_keys, np.random.default_rng(3).integers(0, 9, 300))
    same_as_python(counter_into, {"x": 1}, 300)
    same_as_python(suite_kernels.digit_sum_counts, 2000)
    same_as_python(suite_kernels.longest_collatz, 1000)


def test_dict_write_with_another_name_is_refused(threads):
    # Python changes the dict both names hold; tessera's dicts are values, so the
    # answer would differ (e unchanged): refused with both lines (_aliases.py).
    with pytest.raises(tessera.UnsupportedError, match=r"name one object.*line \d+"):
        tessera.jit(two_names)(200)


# ---------------------------------------------------------------- list item writes in loops


def fill_squares(xs):
    # the caller's list, written item by item (negative indices too)
    for i in range(len(xs)):
        xs[-i - 1] = i * i
    return len(xs)


def writes_then_nested(n):
    # item writes for many turns, then an append of a list (outside the fast
    # path) near the end: the loop goes back to its checkpoint, the general path on
    xs = [0] * 10
    out = []
    for i in range(n):
        xs[i % 10] += i
        if i == n - 3:
            out.append([i])
    return xs, out


def writes_and_appends(n):
    xs = []
    for i in range(n):
        xs.append(i)
        xs[i // 2] = xs[i // 2] * 2 + 1
        if i == n - 2:
            xs.append([0])
    return xs


def copy_then_write(n):
    xs = [1] * 5
    ys = list(xs)
    for i in range(n):
        xs[i % 5] = i
    return xs, ys


def test_list_item_writes_in_loops_match_python(threads):
    for n in (0, 1, 70, 300):
        same_as_python(writes_then_nested, n + 3)
        same_as_python(writes_and_appends, n + 2)
        same_as_python(copy_then_write, n)
    same_as_python(fill_squares, list(range(200)))
    same_as_python(fill_squares, [])
    same_as_python(suite_kernels.coin_sums, 500, [1, 2, 5, 10, 20, 50, 100, 200])
    same_as_python(suite_kernels.coin_sums, 0, [3])


CASES = [(count_by_key, (300,)), (letter_counts, (["abc", "banana"] * 40,)),
         (equal_keys, (100,)), (keys_then_tuple, (200,)), (two_names, (100,)),
         (suite_kernels.digit_sum_counts, (3000,)), (suite_kernels.longest_collatz, (500,)),
         (gcd_isqrt_loop, (300,)), (factorial_of, (-2,)), (writes_then_nested, (200,)),
         (writes_and_appends, (150,)), (fill_squares, (list(range(100)),)),
         (suite_kernels.coin_sums, (300, [1, 2, 5, 10]))]

_SCRIPT = cases_script("test_jit_published_kernels3")


def test_fast_path_and_general_print_the_same():
    fast, log = run_script(_SCRIPT, TESSERA_FAST_LOOPS="debug")
    general, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert fast == general
    assert "ValueError" in fast


_COUNTERS = """
import sys
sys.path.insert(0, {here!r})
import tessera
import test_jit_published_kernels3 as t
for threads in (1, 2):
    print(tessera.jit(t.count_by_key, threads=threads)(3000) == t.count_by_key(3000))
    words = ["numpy", "tessera"] * 200
    print(tessera.jit(t.letter_counts, threads=threads)(words) == t.letter_counts(words))
    coins = [1, 2, 5, 10, 20, 50, 100, 200]
    print(tessera.jit(t.suite_kernels.coin_sums, threads=threads)(3000, coins)
          == t.suite_kernels.coin_sums(3000, coins))
"""


def test_dict_and_list_writes_stay_on_the_fast_path():
    # Before, each dict or list item write rolled the loop back to its last
    # checkpoint (and the general path copied the whole dict or list for it).
    out, log = run_script(_COUNTERS, TESSERA_FAST_LOOPS="debug")
    assert out.split() == ["True"] * 6
    assert "rolled back" not in log, log
