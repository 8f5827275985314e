"""Strings in native loops (docs/runtime.md, "Strings in native code"): str() of
ints and bools, string constants and variables, s[i] (negative from the end),
s[a:b:c] (any step, `[::-1]`), len(), ==, !=, <, <=, >, >=, `a in s`, s.find(a),
int(c) of digits, `for c in s`, a string's truth, items of
a list of strings, s.strip(chars) and dicts with string keys, with ASCII text as
views in the generated code; a string assigned or returned is a Python str.
Results and errors (IndexError at its line) are Python's with native code, the
register interpreter and the general evaluation, at 1 and 2 threads; non-ASCII
text falls back to the interpreter with the same answers; the loops must run as
native code (the debug log)."""

import copy
import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path, run_script, same_as_python

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import happy_numbers, largest_palindrome_product  # noqa: E402 - bench/


def palindromes(lo, hi):
    # str(p) == str(p)[::-1] of products, negative ones too
    count = 0
    best = -1
    for a in range(lo, hi):
        for b in range(a, hi):
            p = a * b - 50
            if str(p) == str(p)[::-1]:
                count += 1
                if p > best:
                    best = p
    return count, best


def digit_lengths(n):
    # len(str(k)) of negative, zero and positive ints, NumPy's too
    s = 0
    big = np.int64(-9223372036854775807) - 1
    for k in range(-n, n):
        s += len(str(k)) * 3 + len(str(np.int64(k) * 1000003))
    return s, len(str(big)), str(big)


def slices(s, n):
    # s[a:b:c] of a string argument: steps of both signs, bounds past the ends
    out = 0
    for k in range(n):
        i = k % 7 - 3
        out += len(s[i:]) + len(s[:i]) + len(s[i::2]) + len(s[::-1][i:]) + len(s[i:k:-2])
        if s[1:-1] == s[-2:0:-1]:
            out += 100
        if s[::3] < s[1::3]:
            out += 7
    return out


def slice_text(s, n):
    # the slices themselves, assigned (Python's str: returned and compared)
    last = ""
    total = 0
    for k in range(n):
        t = s[k % 5::-1]
        u = t[1:]
        if u >= last:
            last = u
        total += len(t)
    return last, total


def characters(s, n):
    # s[i], s[-i], a character compared with a constant and with another
    c = 0
    for i in range(n):
        if s[i % len(s)] == "b":
            c += 1
        if s[-1 - i % len(s)] < s[i % len(s)]:
            c += 10
        if str(i)[-1] == s[0]:
            c += 100
    return c


def index_past_the_end(s, n):
    c = 0
    for i in range(n):
        if str(i)[1] == s[0]:
            c += 1
    return c


def vowels(text, n):
    # `for ch in text` of a string argument, `ch in "aeiou"`
    c = 0
    for k in range(n):
        for ch in text:
            if ch in "aeiou":
                c += k
    return c


def word_counts(words, n):
    # items of a list of strings (negative indices too), w.strip(chars), a
    # dict with string keys (get, `in`, a write)
    counts = {}
    seen = 0
    for k in range(n):
        for w in words:
            w = w.strip(".,!")
            if w:
                if w in counts:
                    seen += 1
                counts[w] = counts.get(w, 0) + k
        if words[-1 - k % len(words)] == "bb":
            seen += 100
    return counts, seen


def prange_palindromes(n):
    # strings in a prange loop: compared only (parallel), and assigned (as range)
    flags = np.zeros(n, dtype=np.int64)
    for i in tessera.prange(n):
        if str(i * 7) == str(i * 7)[::-1]:
            flags[i] = 1
    for i in tessera.prange(n):
        s = str(i)
        if s[-1] == s[0]:
            flags[i] += 2
    return flags.sum()


def orders(w0, w1, w2, n):
    # ==, !=, <, <=, >, >= of strings of different lengths, an empty one
    lt = le = gt = ge = eq = ne = 0
    for k in range(n):
        a = str(k * 7 % 23)
        b = w0 if k % 3 == 0 else w1 if k % 3 == 1 else w2
        if a < b:
            lt += 1
        if a <= b:
            le += 1
        if a > b:
            gt += 1
        if a >= b:
            ge += 1
        if a == b:
            eq += 1
        if a != b:
            ne += 1
    return lt, le, gt, ge, eq, ne


def contains(text, n):
    # `a in s` and s.find(a) of digits, a constant, an empty string
    c = 0
    f = 0
    for k in range(n):
        if str(k % 50) in text:
            c += 1
        if "" in str(k):
            c += 2
        f += text.find(str(k % 13)) + str(k * 11).find("1")
    return c, f


def digit_sums(n):
    # int(c) for c in str(k): the published happy numbers' step
    s = 0
    for k in range(n):
        s += sum(int(c) ** 2 for c in str(k))
    return s


def truths(n):
    # a string's truth and not: str(k)[3:] is empty for k < 1000
    c = 0
    for k in range(n):
        if str(k)[3:]:
            c += 1
        if not str(k)[1:]:
            c += 10
    return c


def bools_and_strings(n):
    t = 0
    for k in range(n):
        if str(k % 3 == 0) == "True":
            t += 1
    return t


def last_digits(n):
    # a string assigned in the loop and returned: Python's str
    d = ""
    for k in range(n):
        d = str(k)[-2:]
    return d


def non_ascii(s, n):
    # characters of several bytes: the interpreter's, with Python's answers
    c = 0
    for k in range(n):
        if s[k % len(s)] == "é":
            c += 1
        if s[::-1][0] == s[-1]:
            c += 10
        c += len(s[1:])
    return c


def empty_strings(s, n):
    c = 0
    for k in range(n):
        c += len(s) + len(s[::-1])
        if s == "":
            c += 2
        if s < "a" and s[1:] == s[:-1]:
            c += 4
    return c


CASES = [(palindromes, (10, 60)),
         (largest_palindrome_product, (10, 100)),
         (happy_numbers, (30,)),
         (digit_lengths, (300,)),
         (slices, ("abcdefgh", 40)),
         (slices, ("ab", 9)),
         (slice_text, ("hello world", 30)),
         (characters, ("abcb", 50)),
         (index_past_the_end, ("1", 20)),
         (orders, ("", "12", "3", 60)),
         (contains, ("0123456789", 80)),
         (digit_sums, (500,)),
         (truths, (1500,)),
         (bools_and_strings, (30,)),
         (last_digits, (123,)),
         (non_ascii, ("aéb", 20)),
         (vowels, ("the quick brown fox", 7)),
         (vowels, ("", 3)),
         (word_counts, (["a.", "bb", "", "!c!", "a", "..."], 5)),
         (word_counts, (["x", "y,", "é.", "x"], 4)),
         (prange_palindromes, (3000,)),
         (empty_strings, ("", 5))]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_python(f, args, threads):
    try:
        f(*copy.deepcopy(args))
    except Exception as e:  # noqa: BLE001 - the same exception is expected of the jit
        with pytest.raises(type(e)):
            tessera.jit(f)(*copy.deepcopy(args))
        return
    same_as_python(f, *args)


def test_index_error_names_its_line():
    with pytest.raises(IndexError) as e:
        tessera.jit(index_past_the_end)("1", 20)
    line = index_past_the_end.__code__.co_firstlineno + 3
    assert f"test_native_strings.py:{line}" in str(e.value)


_SCRIPT = cases_script("test_native_strings")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native
    # The loops on strings compiled to native code (non_ascii too: its bails go to
    # the interpreter at run time, not at compilation).
    for f in (palindromes, largest_palindrome_product, digit_lengths, slices, slice_text,
              characters, orders, contains, truths, bools_and_strings, last_digits,
              non_ascii, empty_strings, vowels, word_counts):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
        # (word_counts' first turn meets an empty dict: compiled after it, as designed)
        refused = [ln for ln in loop_log_lines(log, f, "no native code")
                   if "a dict's values of a kind not known" not in ln]
        assert not refused, (f.__name__, refused)


COUNTED = [CASES[k] for k in (0, 3, 4, 9, 10, 12, 15)]

_COUNTERS = """
import copy, sys, tessera
sys.path.insert(0, {here!r})
import test_native_strings as t
for f, args in t.COUNTED:
    g = tessera.jit(f)
    print(f.__name__, repr(g(*copy.deepcopy(args))))
    print([",".join(l.split(",")[:3]) for l in g.counters().splitlines()])
"""


def test_native_code_counts_nodes_as_the_interpreter():
    native, log = run_script(_COUNTERS, TESSERA_FAST_LOOPS="debug", TESSERA_CACHE_DIR="0")
    interp, _ = run_script(_COUNTERS, TESSERA_NATIVE="0")
    assert native == interp
    assert "native code returned 0" in log
