"""Dicts and sets of numbers in native loops (docs/runtime.md, "Dicts and sets
in native code"): `k in d`, `k not in d`, `d[k]`, `d.get(k, v)`, `d[k] = v`,
`d[k] += v`, `s.add(k)`, `len(d)`, tuple keys `d[a, b]` and `{}`/`set()` made
in the loop compile to calls of helpers on the interpreter's own dicts. The
answers, the dicts changed in place and the errors (KeyError at the line) are
Python's, the same with native code, the register interpreter and the general
evaluation, at 1 and 2 threads; the loops must run as native code (the debug
log), and a bail late in a long loop must roll the dicts back exactly."""

import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path, same_as_python

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import sieve_set  # noqa: E402 - bench/


def membership(d, n):
    # k in d, k not in d, d[k], d.get(k, v) on a dict passed in.
    hits = 0
    misses = 0
    total = 0
    for i in range(n):
        if i in d:
            hits += 1
            total += d[i]
        if i not in d:
            misses += 1
        total += d.get(i + 1, -1) * 2
    return hits, misses, total


def writes_in_place(d, n):
    # d[k] = v on new and old keys, d[k] += v, len(d): the caller's dict
    # changed as Python changes it.
    for i in range(n):
        d[i % 7] = i
        d[100 + i % 3] += i
        d[1000 + i] = len(d)
    return len(d)


def counter(xs):
    counts = {}
    for x in xs:
        counts[x % 5] = counts.get(x % 5, 0) + 1
    return counts[0], counts.get(4, 0), len(counts)


def float_values(n):
    acc = {0: 0.5}
    for i in range(n):
        acc[i % 4] = acc.get(i % 4, 0.0) + i * 0.25
    return acc[0], acc[3], len(acc)


def collatz_memo(limit):
    cache = {1: 1}
    best, best_n = 1, 1
    for start in range(2, limit):
        n = start
        steps = 0
        while n not in cache:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        length = steps + cache[n]
        cache[start] = length
        if length > best:
            best, best_n = length, start
    return best_n, best, len(cache)


def two_sum_pairs(xs, target):
    seen = set()
    pairs = set()
    for x in xs:
        if target - x in seen:
            pairs.add((min(x, target - x), max(x, target - x)))
        seen.add(x)
    return len(pairs)


def grid_by_tuple_keys(n):
    grid = {}
    for i in range(n):
        for j in range(n):
            grid[i, j] = i * n + j
    t = 0
    for i in range(n):
        t += grid[i, n - 1 - i] + grid.get(i, -1)
    return t, len(grid)


def set_made_in_the_loop(count):
    # A set made at each turn (happy numbers without str()).
    found = 0
    n = 1
    while found < count:
        seen = set()
        m = n
        while m != 1 and m not in seen:
            seen.add(m)
            s = 0
            while m > 0:
                s += (m % 10) ** 2
                m //= 10
            m = s
        if m == 1:
            found += 1
        n += 1
    return n - 1


def equal_keys_of_three_kinds(d, n):
    # 1, 1.0 and True are one key: reads and writes by float and bool keys
    # find the int keys (and the other way round).
    t = 0.0
    for i in range(n):
        t += d[i * 1.0]
        if (i > 2) in d:
            t += 1
        d[float(i % 3)] = i
        d[i % 2 == 0] = -i
    return t, len(d)


def numpy_keys(a, d):
    # NumPy's int64 and float64 elements as keys: the Python numbers of the
    # same value (np.int64(3), 3.0 and 3 are one key).
    t = 0.0
    hits = 0
    for i in range(a.shape[0]):
        if a[i] in d:
            hits += 1
            t += d[a[i]]
        d[a[i] * 2] = i * 0.5
        t += d.get(a[i] * 1.0, -1.0)
    return t, hits, len(d)


def missing_key(d, n):
    t = 0
    for i in range(n):
        t += d[i]
    return t


def late_bail(d, n):
    # Native code until turn n - 3, where a float value the code was not
    # compiled for is read: the turns since the last checkpoint are redone
    # on the interpreter, from the dict as it was then.
    t = 0
    for i in range(n):
        d[i % 50] = i
        d[100] = d.get(100, 0) + 1  # redone twice, or not rolled back: counted twice
        d[5000 + i] = len(d)  # a key not cut on the roll-back: len one more
        if i > n - 4:
            t += d[-1]
        else:
            t += d[i % 50]
    return t, len(d)


def crowded_int_keys(d, n):
    # Int keys that crowd the index (multiples of 2**20 share their low bits;
    # ints past 2**53 share hashes with their neighbours yet are other keys),
    # negative keys, float keys finding int keys; a float value read at the
    # end: the bail rolls the crowded keys back (newest first) and the
    # interpreter redoes the turns.
    t = 0
    for i in range(n):
        d[i * 1048576] = i
        d[-i * 1024] = d.get(-(i - 1) * 1024, 0) + 1
        d[9007199254740993 + i % 5] = i
        if (i - 1) * 1048576 in d:
            t += d[(i - 1) * 1048576]
        t += d.get(float(i % 7), -1) + d.get(9007199254740992 + i % 3, -2)
        if i > n - 4:
            t += d[-1]
    return t, len(d)


CASES = [(membership, ({0: 3, 2: 5, 4: 7, 9: 11}, 12)),
         (writes_in_place, ({100: 1, 101: 2, 102: 3}, 40)),
         (counter, (list(range(50)),)),
         (float_values, (40,)),
         (sieve_set, (300,)),
         (collatz_memo, (400,)),
         (two_sum_pairs, ([(i * 37) % 101 for i in range(300)], 100)),
         (grid_by_tuple_keys, (9,)),
         (set_made_in_the_loop, (20,)),
         (equal_keys_of_three_kinds, ({k: k * 2 for k in range(30)}, 30)),
         (numpy_keys, (np.arange(-5, 25, dtype=np.int64), {k: k * 0.25 for k in range(0, 40, 3)})),
         (missing_key, ({0: 1, 1: 2, 2: 3}, 5)),
         (late_bail, ({**{k: k for k in range(50)}, -1: 0.5}, 2000)),
         (crowded_int_keys, ({**{k: k for k in range(3, 30)}, -1: 0.5}, 300))]

# The loops the generator must compile (missing_key's raises on the
# interpreter, after the native code's bail).
COMPILED = (membership, writes_in_place, counter, float_values, sieve_set, collatz_memo,
            two_sum_pairs, grid_by_tuple_keys, set_made_in_the_loop, equal_keys_of_three_kinds,
            numpy_keys, late_bail, crowded_int_keys)


_OWN_TESTS = (missing_key, numpy_keys)


@pytest.mark.parametrize("f, args", [c for c in CASES if c[0] not in _OWN_TESTS],
                         ids=[f.__name__ for f, _ in CASES if f not in _OWN_TESTS])
def test_dict_loops_agree_with_python(f, args, threads):
    same_as_python(f, *args)


def test_numpy_scalar_keys_are_python_s_keys(threads):
    a = np.arange(-5, 25, dtype=np.int64)
    d = {k: k * 0.25 for k in range(0, 40, 3)}
    expected = dict(d)
    want = numpy_keys(a, expected)
    got = tessera.jit(numpy_keys)(a, d)
    assert got == want and [type(x) for x in got] == [type(x) for x in want], (got, want)
    assert d == expected and list(d) == list(expected)


def test_late_bail_in_a_dict_passed_in_leaves_python_s_dict(threads):
    # 40,000 turns: past two checkpoints (16,384 turns each) of the native
    # code. (The general path copies the dict at each write: CASES' run is short.)
    d = {**{k: k for k in range(50)}, -1: 0.5}
    expected = dict(d)
    want = late_bail(expected, 40000)
    assert tessera.jit(late_bail)(d, 40000) == want
    assert d == expected and list(d) == list(expected)


def test_crowded_int_keys_rolled_back_after_two_checkpoints(threads):
    d = {**{k: k for k in range(3, 30)}, -1: 0.5}
    expected = dict(d)
    want = crowded_int_keys(expected, 40000)
    assert tessera.jit(crowded_int_keys)(d, 40000) == want
    assert d == expected and list(d) == list(expected)


def test_missing_key_is_python_s_key_error_at_its_line(threads):
    with pytest.raises(KeyError) as e:
        tessera.jit(missing_key)({0: 1, 1: 2, 2: 3}, 5)
    line = missing_key.__code__.co_firstlineno + 3
    assert f"test_native_dicts.py:{line}" in str(e.value), str(e.value)
    assert "3" in str(e.value)


_SCRIPT = cases_script("test_native_dicts")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "KeyError" in native
    for f in COMPILED:
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
        refused = loop_log_lines(log, f, "no native code")
        assert not refused, (f.__name__, refused)
