"""Dicts and sets of numbers held compact (docs/runtime.md, "Dicts and sets in
native code"): while every key and value is a number, a dict's items are 16
bytes each, and the first key or value of another kind turns them into
Values. Every way through that must be Python's: keys equal across int, float
and bool (the first kind kept), values of each kind, a non-number key or value
arriving mid-loop, a roll-back after a bail or an error, dicts passed in and
returned, and set operations after the loop on the general path; on native
code, the interpreter and the general evaluation, at 1 and 2 threads. The
results are compared by repr (1, 1.0 and True apart; a dict's order) or, for
sets, by their elements with their types."""

import copy

import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path

import tessera


def mixed_kinds(n):
    # 1, 1.0 and True one key, the first kind kept; values of every kind the
    # compact form holds (None, bool, int, float), replaced by another kind.
    d = {}
    s = set()
    for i in range(n):
        d[i % 5] = i * 0.5
        d[float(i % 7)] = i
        d[i % 3 == 0] = i > n // 2
        s.add(float(i % 4))
        s.add(i % 6)
        if i % 9 == 0:
            d[i + 0.5] = None
    return d, s, len(d), len(s)


def mixed_key_kinds(n):
    # The same with float values only (what native code compiles): keys of
    # three kinds, equal ones found across kinds.
    d = {}
    s = set()
    t = 0.0
    for i in range(n):
        d[i % 5] = i * 0.5
        d[float(i % 7)] = i * 0.25
        d[i % 3 == 0] = d.get(i % 2, 0.0) + 1.0
        s.add(float(i % 4))
        s.add(i % 6)
        s.add(i % 2 == 0)
        if (i % 9) * 1.0 in d:
            t += d[(i % 9) * 1.0]
    return d, s, t, len(d), len(s)


def string_key_mid_loop(n, at):
    # Numbers only until turn `at`, then a string key: the items become Values
    # for good, in their order, and the loop goes on writing numbers.
    d = {}
    for i in range(n):
        d[i * 3] = i * 0.25
        if i == at:
            d["middle"] = i
        d[-i] = d.get(i * 3, 0.0) + 1
    return d, len(d)


def list_value_mid_loop(d, n):
    # A dict passed in, numbers only, given a list value mid-loop.
    total = 0
    for i in range(n):
        d[i % 13] = d.get(i % 13, 0) + i
        if i == n // 2:
            d[1000] = [i, i + 1]
        total += d[i % 13]
    return total, len(d)


def passed_in_and_returned(d, n):
    # A dict passed in (numbers only), read and written, returned.
    for i in range(n):
        if i in d:
            d[i] = d[i] * 2
        else:
            d[i + 0.5] = i
        d[True] = i
    return d


def late_error(d, n):
    # Native code writes a set, then a float value is read where an int was
    # compiled for: the bail rolls back to the checkpoint and the interpreter
    # redoes the turns; then a KeyError at the last turn.
    s = set()
    t = 0
    for i in range(n):
        s.add(i * 7 % 1000)
        d[i % 20] = i
        if i == n - 2:
            t += d[-1]
        if i == n - 1:
            t += d[12345]
    return t, len(s)


def set_ops_after_the_loop(n):
    # Sets made in native code, then read by the general path: | & - ^,
    # comparisons, membership, sorted, len.
    evens = set()
    threes = set()
    halves = set()
    for i in range(n):
        if i % 2 == 0:
            evens.add(i)
        if i % 3 == 0:
            threes.add(i)
            halves.add(i + 0.5)
    both = evens & threes
    either = evens | threes | halves
    only = evens - threes
    odd_one = evens ^ threes
    return (sorted(both), len(either), sorted(only)[:5], len(odd_one), 6 in both,
            7.0 in either, 4.5 in either, both.issubset(evens), sorted(halves)[:3])


def intersections_keep_python_s_kinds(n):
    # CPython's set_intersection walks the smaller set (the right one when both
    # are as big) and keeps its elements, whose kinds may differ from the
    # other's equal ones; intersection() of an iterable keeps the iterable's.
    ints = set()
    floats = set()
    more = set()
    for i in range(n):
        if i % 6 == 0:
            ints.add(i)
            floats.add(float(i))
        if i % 3 == 0:
            more.add(float(i))
    kept = set(ints)
    kept.intersection_update(floats)
    left = {0}
    left &= {0.0, 1.0}
    listed = ints.intersection([0.0, 6.0, 6, True])
    return (ints & floats, floats & ints, ints & more, more & ints, {0, 6} & {0.0, 6.0},
            {0, 6, 7} & {0.0, 6.0}, ints.intersection(more), kept, left, listed)


def probed_in_place(n):
    # Native code probes an indexed compact dict's int keys itself (`k in s`,
    # d.get, d[k], an add of a key there): hits and misses, negative keys,
    # keys past 2**53 (the helpers'), keys held as a float or a bool found by
    # an int, writes between reads that grow and move the index, adds of keys
    # there (k repeats every 101 turns), and a set made anew.
    s = set()
    d = {}
    seen = 0
    for i in range(n):
        k = (i * 37) % 101 - 50
        if k in s:
            seen += 1
        s.add(k)
        if i % 9 == 0:
            s.add(float(k + 1000))
        if i == 3:
            s.add(True)
        if k + 1000 in s:
            seen += 100
        if 1 in s:
            seen += 3
        big = 2**53 + i % 3
        if big in s:
            seen += 10000
        s.add(big)
        d[k] = d.get(k, 0) + i
        if i % 13 == 0:
            seen += d[k] + d.get(k + 7, -1)
        if i == n - 10:
            s = set()
    return seen, d, s


def probed_value_of_another_kind(d, n):
    # A value read in place of another kind than compiled for (a float among
    # ints): the helper's bail, the interpreter redoes the turns.
    t = 0
    for i in range(n):
        t += d.get(i % 30, 0)
        if i % 5 == 0:
            t += d[i % 20]
    return t


def sieve_returned(limit):
    # The published sieve_set, returning the set itself too.
    composites = set()
    primes = []
    for i in range(2, limit + 1):
        if i not in composites:
            primes.append(i)
            for j in range(i * i, limit + 1, i):
                composites.add(j)
    return primes, composites


CASES = [(mixed_kinds, (60,)),
         (mixed_key_kinds, (60,)),
         (string_key_mid_loop, (200, 150)),
         (string_key_mid_loop, (20, 3)),
         (list_value_mid_loop, ({k: k for k in range(13)}, 300)),
         (passed_in_and_returned, ({1: 2, 2: 3.5, 4: True, 50: None, 7.0: 1}, 40)),
         (late_error, ({**{k: k for k in range(20)}, -1: 0.5}, 3000)),
         (set_ops_after_the_loop, (300,)),
         (intersections_keep_python_s_kinds, (40,)),
         (probed_in_place, (400,)),
         (probed_value_of_another_kind, ({**{k: k * 3 for k in range(25)}, 17: 0.5}, 300)),
         (sieve_returned, (2000,))]

# The loops native code runs (the others, with a None or a string or a list in a
# dict, run on the loop interpreter, which reads and writes compact dicts too).
COMPILED = (mixed_key_kinds, passed_in_and_returned, late_error, set_ops_after_the_loop,
            intersections_keep_python_s_kinds, probed_in_place, probed_value_of_another_kind,
            sieve_returned)


def _shown(v):
    # repr for everything but sets, whose order is Python's hash order: their
    # elements with their types, sorted.
    if isinstance(v, set):
        return "set" + repr(sorted((type(x).__name__, x) for x in v))
    if isinstance(v, (list, tuple)):
        return type(v).__name__ + "[" + ", ".join(_shown(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_shown(x)}" for k, x in v.items()) + "}"
    return repr(v)


def _outcome(f, args):
    try:
        return _shown(f(*args)), _shown(args)
    except Exception as e:  # noqa: BLE001 - the exception is part of the answer
        return type(e).__name__ + " " + str(e).split(" (at ")[0], _shown(args)


@pytest.mark.parametrize("f, args", CASES, ids=[f"{f.__name__}-{k}" for k, (f, _) in
                                                 enumerate(CASES)])
def test_compact_dicts_agree_with_python(f, args, threads):
    want = _outcome(f, copy.deepcopy(args))
    got = _outcome(tessera.jit(f), copy.deepcopy(args))
    if want[0].startswith("KeyError"):
        assert got[0].startswith("KeyError") and "12345" in got[0], (got, want)
    else:
        assert got == want


def test_the_error_names_its_line(threads):
    with pytest.raises(KeyError) as e:
        tessera.jit(late_error)({**{k: k for k in range(20)}, -1: 0.5}, 3000)
    line = late_error.__code__.co_firstlineno + 12
    assert f"test_native_dicts_compact.py:{line}" in str(e.value), str(e.value)


def test_a_big_set_made_in_native_code_is_python_s():
    # 10**5 composites: indexed, grown many times, returned to Python.
    want = sieve_returned(100000)
    got = tessera.jit(sieve_returned)(100000)
    assert got[0] == want[0]
    assert got[1] == want[1] and all(type(x) is int for x in got[1])


_SCRIPT = cases_script("test_native_dicts_compact")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "KeyError" in native
    for f in COMPILED:
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
