"""Python's values in loops on the loop interpreter (docs/runtime.md, "Objects in
loops"): `k in d` and `k not in s` of dicts and sets, `d.get(k, v)`, `d[k]` and
`d[a, b]` (tuple keys, `pairs.add((a, b))`), the truth of a string, list or
dict (`if word:`, `not xs`), `s[i] == t[j]` of strings, `c in text` and
`for (i, j) in pairs`. Each is computed on the objects the registers hold
instead of through the primitive (or a roll-back to the general path, for
truth tests and tuple keys). Answers and the arguments afterwards are Python's
on every path (native code, the register interpreter, the general
evaluation) at 1 and 2 threads, errors at their line, and the loops run
without a roll-back (TESSERA_FAST_LOOPS=debug)."""

import copy
import inspect
import os
import sys

import numpy as np
import pytest
from jit_check import PATHS, cases_script, run_script, same_as_python

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import sieve_set  # noqa: E402 - bench/


def collatz_cache(limit):
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


def word_counts(text):
    counts = {}
    for word in text.lower().split():
        word = word.strip(".,;:!?\"'()")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return counts


def get_kinds(xs):
    # d.get of ints, floats equal to ints and bools (one key), a missing key
    # without a default (None), NumPy's scalars as keys.
    d = {}
    misses = 0
    for x in xs:
        d[x % 5] = d.get(x % 5, 0.5) + 1
        if d.get(x % 7) is None:
            misses += 1
    d[1.0] = d.get(True, 0) + 10
    a = np.arange(6)
    for i in range(5):  # keys there already (a new one keeps NumPy's type in Python)
        d[a[i]] = d.get(a[i], -1) * 2
    return d, misses


def two_sum_pairs(xs, target):
    seen = set()
    pairs = set()
    for x in xs:
        if target - x in seen:
            pairs.add((min(x, target - x), max(x, target - x)))
        seen.add(x)
    return len(pairs), sorted(pairs)[:5]


def tuple_keys(n):
    grid = {}
    for i in range(n):
        for j in range(3):
            grid[i % 4, j] = grid.get((i % 4, j), 0) + i * j
    total = 0
    for i in range(4):
        total += grid[i, 2] - grid[i, 1]
    return grid, total


def truth_of_objects(words):
    kept = []
    empties = 0
    for w in words:
        if w:
            kept.append(w)
        if not w:
            empties += 1
        if not kept:
            empties += 100
    return kept, empties


def char_compare(a, b):
    same = 0
    for i in range(len(a)):
        for j in range(len(b)):
            if a[i] == b[j]:
                same += 1
            elif a[i] != "x":
                same -= 1
    return same


def substring_tests(text, subs):
    hits = 0
    for s in subs:
        if s in text:
            hits += 1
        if s not in text:
            hits -= 10
    return hits


def pair_unpack(n, steps):
    pos = [[float(i), float(i * i) / 7] for i in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for _ in range(steps):
        for (i, j) in pairs:
            dx = pos[i][0] - pos[j][0]
            pos[i][1] -= 0.001 * dx
            pos[j][1] += 0.001 * dx
    return pos


def strip_words(words):
    # str.strip of ASCII text by bytes; other text by characters, as Python.
    out = []
    for w in words:
        out.append(w.strip() + "|" + w.strip(".,!") + "|" + w.lstrip(" .") + "|" + w.rstrip("é! "))
    return out


def chars_across_rollback(text, n):
    # s[i] read as one object per character, a roll-back at turn 25,000 (an
    # append of a list a variable holds is the general path's) in between: the
    # turns since the checkpoint are redone once, the characters placed since
    # dropped.
    counts = {}
    extra = []
    s = 0
    for i in range(n):
        c = text[i % len(text)]
        counts[c] = counts.get(c, 0) + 1
        if i == 25000:
            row = [i]
            extra.append(row)
        s = s + (c == "a")
    return counts, s, extra


def digit_values(texts):
    # s.find(c) of ASCII and non-ASCII text (an index in characters), and
    # int(c) of each character of str(n), which calls it.
    total = 0
    for t in texts:
        for c in t:
            total = total * 3 + "0123456789é-".find(c) + 1
    for n in range(1, 400):
        total += sum(int(c) ** 2 for c in str(n))
    return total


def missing_key_late(n):
    d = {k: k for k in range(10)}
    total = 0
    for i in range(n):
        total += d[i % 10]
        if i == n - 1:
            total += d[99]
    return total


def unhashable_in_loop(n):
    d = {1: 2}
    hits = 0
    for i in range(n):
        if i in d:
            hits += 1
        if i == n - 1:
            hits += [i] in d
    return hits


CASES = [(sieve_set, (3000,)),
         (collatz_cache, (3000,)),
         (word_counts, ("The quick brown fox; the lazy dog, a fox. 'The' (fox) ran! " * 40,)),
         (get_kinds, (list(range(200)),)),
         (two_sum_pairs, ([(i * 37) % 101 for i in range(2000)], 100)),
         (tuple_keys, (500,)),
         (truth_of_objects, (["a", "", "bc", "", "d"] * 30,)),
         (char_compare, ("kitten sitting" * 4, "sitting kitten on a mat" * 3)),
         (char_compare, ("héllo wörld" * 3, "ça va, wörld" * 3)),
         (substring_tests, ("the quick brown fox", ["qu", "ox", "dog", "", "the q"] * 20)),
         (pair_unpack, (6, 300)),
         (strip_words, ([" hi. ", "...", "", "a,b!", " \t x \n", " héllo! ", "é!x!é"] * 5,)),
         (chars_across_rollback, ("banana split", 40000)),
         (digit_values, (["12é9-x", "é", "", "007"],)),
         (missing_key_late, (30000,)),
         (unhashable_in_loop, (30000,))]

_RAISES = {missing_key_late: (KeyError, 6), unhashable_in_loop: (TypeError, 7)}


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ for f, _ in CASES])
def test_objects_in_loops_agree_with_python(f, args, threads):
    if f in _RAISES:
        kind, offset = _RAISES[f]
        with pytest.raises(kind) as e:
            tessera.jit(f)(*args)
        with pytest.raises(kind):
            f(*copy.deepcopy(args))
        line = f.__code__.co_firstlineno + offset
        assert f"test_fast_loop_objects.py:{line}" in str(e.value)
        return
    same_as_python(f, *args)


_SCRIPT = cases_script("test_fast_loop_objects")


def _python_lines():
    # What the script prints, from plain Python (types in the reprs too).
    lines = []
    for _ in (1, 2):
        for f, args in CASES:
            a = copy.deepcopy(args)
            try:
                lines.append(f"{f.__name__} {f(*a)!r} {a!r}")
            except Exception as e:  # noqa: BLE001 - compared by kind below
                lines.append(f"{f.__name__} {type(e).__name__}")
    return lines


def test_every_path_prints_what_python_prints():
    out = {mode: run_script(_SCRIPT, TESSERA_CACHE_DIR="0", **env) for mode, env in PATHS.items()}
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    expected = _python_lines()
    got = native.splitlines()
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e.split(" ")[1] in ("KeyError", "TypeError"):
            assert g.split(" ")[1] == e.split(" ")[1], (g, e)
        else:
            assert g == e, (g, e)
    # The loops of these constructs stay on the fast path: no roll-back to
    # the general evaluation (the lines that raise at their last turn aside).
    for f, _ in CASES:
        body, first = inspect.getsourcelines(f)
        # (comprehensions building lists of lists or tuples are the general path's appends)
        lines = [first + k for k, text in enumerate(body) if "] for " not in text]
        rolled = [ln for ln in log.splitlines() if "rolled back" in ln and any(
            f"test_fast_loop_objects.py:{k}:" in ln for k in lines)]
        if f in _RAISES or f is chars_across_rollback:
            assert rolled, f.__name__  # the roll-back these test
            continue
        assert not rolled, (f.__name__, rolled)
