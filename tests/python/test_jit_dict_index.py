"""Dicts in jit code find keys by hash (tessera/core/value.hpp, `Dict`): a
dict of thousands of keys is read, written and tested with `in` in constant
time, as Python's. The answers are Python's: keys equal across int, float and
bool (1, 1.0, True) are one key, tuples and strings are keys, `pop` and `del`
keep the other keys found, and insertion order is kept; on every path (native
code, the register interpreter, the general evaluation) at 1 and 2 threads."""

import pytest
from jit_check import cases_script, run_on_every_path, same_as_python

import tessera


def collatz_memo(n):
    cache = {1: 1}
    best = 0
    for s in range(2, n):
        x = s
        steps = 0
        while x not in cache:
            x = x // 2 if x % 2 == 0 else 3 * x + 1
            steps += 1
        cache[s] = steps + cache[x]
        if cache[s] > best:
            best = cache[s]
    return best, len(cache)


def equal_keys_of_three_kinds(n):
    d = {}
    for i in range(n):
        d[i] = i
    for i in range(0, n, 3):
        d[float(i)] = -i      # 3.0 is the key 3
    d[True] = "one"           # True is the key 1
    total = 0
    for i in range(n):
        if i in d and not isinstance(d[i], str):
            total += d[i]
    return total, d[1], d.get(2.0), 1.5 in d, len(d), list(d)[:5]


def tuple_and_string_keys(n):
    grid = {}
    for i in range(n):
        for j in range(n):
            grid[(i, j)] = i * n + j
    names = {}
    for i in range(n * n):
        names["k" + str(i)] = i
    hits = 0
    for i in range(n):
        if (i, n - 1 - i) in grid:
            hits += grid[(i, n - 1 - i)]
        if ("k" + str(i * 3)) in names:
            hits += names["k" + str(i * 3)]
    return hits, grid[(n - 1, n - 1)], len(grid), len(names)


def pops_between(n):
    d = {}
    for i in range(n):
        d[i] = i * i
    removed = 0
    for i in range(0, n, 2):
        removed += d.pop(i)
    d.pop(1)
    missing = 0
    for i in range(n):
        if i not in d:
            missing += 1
    d[0] = -1
    return removed, missing, len(d), list(d)[:4], list(d)[-1], d.get(3), d.get(4, "gone")


def counter_of_words(words):
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    best = ""
    top = 0
    for w in counts:
        if counts[w] > top:
            best = w
            top = counts[w]
    return best, top, len(counts)


def dict_equality(n):
    a = {}
    b = {}
    for i in range(n):
        a[i] = i
    for i in range(n - 1, -1, -1):
        b[i] = i
    c = {k: a[k] for k in a}
    c[n // 2] = -1
    return a == b, a == c, len(a)


CASES = [(collatz_memo, (3000,)),
         (equal_keys_of_three_kinds, (40,)),
         (tuple_and_string_keys, (12,)),
         (pops_between, (50,)),
         (counter_of_words, (["a", "bb", "a", "c", "bb", "a"] * 30 + [f"w{i}" for i in range(40)],)),
         (dict_equality, (30,))]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ for f, _ in CASES])
def test_dict_kernels_agree_with_python(f, args, threads):
    same_as_python(f, *args)


def test_a_memo_dict_of_twenty_thousand_keys():
    # The size where a walk over the items (before the index) took 39 s;
    # the time itself is measured in bench/bench_dicts.py, not here.
    same_as_python(collatz_memo, 20000)


_SCRIPT = cases_script("test_jit_dict_index")


def test_every_path_prints_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    assert out["native"][0] == out["interpreter"][0] == out["general"][0]
