"""Lists in native loops (docs/runtime.md, "Lists built by append"): `[]`,
`[a, b]`, `list()`, `xs.append(v)` of numbers and `len(xs)` compile to native
code (the lists the interpreter's own, made and appended to by helpers). The
answers, lists changed in place and errors are Python's, and the same with
native code, on the register interpreter (TESSERA_NATIVE=0) and on the general
evaluation (TESSERA_FAST_LOOPS=0), at 1 and 2 threads; the loops must run as
native code (the debug log), and a roll-back after many native turns must
take back exactly the appends since its checkpoint."""

import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, check, run_script

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import count_prime_factors, primes_list, select_to_list  # noqa: E402 - bench/


def factor_counts(n):
    # A helper's list per turn (inlined), len() of it, appends in while loops.
    counts = []
    for m in range(2, n):
        fs = []
        d = 2
        k = m
        while d * d <= k:
            while k % d == 0:
                fs.append(d)
                k //= d
            d += 1
        if k > 1:
            fs.append(k)
        counts.append(len(fs))
    return counts


def display_per_turn(n):
    total = 0
    for i in range(n):
        pair = [i, i * 2.5]
        pair.append(i > 3)
        total += len(pair) + i
    return total


def appends_then_index_error(xs, x, n):
    # An IndexError far past the native code's first checkpoint.
    for i in range(n):
        xs.append(x[i] * 2.0)
    return len(xs)


def appends_then_raise(xs, n):
    q = 0
    for i in range(n):
        xs.append(i)
        q += i % 7
        if i == 30005:
            raise ValueError(f"stopped at {i}")
    return len(xs), q


def kind_changes_late(x, n):
    # An array item after 25,000 number items: the native code declines the
    # loop there; the general path ends it.
    out = []
    for i in range(n):
        if i == 25000:
            out.append(x[0:2])
        else:
            out.append(i * 0.5)
    return len(out), out[-1], out[25000]


def rolled_back_late(xs, n):
    # A variable changing kind at turn 25,000 (past the native code's first
    # checkpoint) sends the loop back to that checkpoint: the appends since
    # are taken back (the caller's list copied, a list of the frame, one made
    # in the turn) and redone by the interpreter, exactly once.
    out = [0.5]
    s = 0
    last = []
    for i in range(n):
        out.append(i * 0.25)
        xs.append(len(out))
        last = [i, i + 1]
        last.append(len(xs))
        if i == 25000:
            s = 0.5
        s = s + 1
    return out, xs, last, s


def list_reads(xs, arrays):
    # Items of lists read in loops (xs[i], for a in xs): the items as they
    # are, int8 and float16 arrays keeping their dtypes.
    total = 0
    for i in range(len(xs)):
        total += xs[i] * xs[-1 - i]
    firsts = []
    for a in arrays:
        firsts.append(a[0])
    return total, arrays[1], arrays[-1] * 2, firsts


def for_over_lists(xs, ys, d, text):
    # `for v in xs` of ints, of ints then floats (a read of another kind),
    # over a dict's keys and a string's characters, nested in a loop.
    total = 0
    mixed = 0.0
    keys = 0
    chars = 0
    for rep in range(3):
        for v in xs:
            total += v * rep
        for y in ys:
            mixed += y
        for k in d:
            keys += k
        for ch in text:
            chars += 1
    return total, mixed, keys, chars


def appended_while_iterated(xs, n):
    # The list iterated is appended to inside the loop: Python's loop iterates
    # the items appended, and so does tessera's (docs/python.md, `for`; the
    # loop reads the list at each turn, on the interpreter: native code does
    # not compile the test of its kind there).
    seen = 0
    for rep in range(n):
        for v in xs:
            if v < 3:
                xs.append(v + 3)
            seen += v
    return seen, xs


def alias_in_loop(n):
    xs = [0]
    total = 0
    for i in range(n):
        ys = xs
        xs.append(i)
        total += len(ys)
    return total, xs, ys


def list_variable_from_before(xs, n):
    extra = [7, 8]
    for i in range(n):
        extra.append(i)
        xs.append(len(extra))
    return xs, extra


def empty_loop_value(n):
    out = list()
    for i in range(n):
        out.append(i * i)
    return out


CASES = [(factor_counts, (3000,)),
         (display_per_turn, (40000,)),
         (appends_then_index_error, ([1.0], np.arange(40000.0), 40001)),
         (appends_then_raise, ([], 30010)),
         (kind_changes_late, (np.arange(4.0), 30000)),
         (list_variable_from_before, ([5], 20000)),
         (rolled_back_late, ([2, 3], 40000)),
         (primes_list, (300,)),
         (for_over_lists, (list(range(50)), [1, 2, 2.5, 3], {1: 2, 5: 6}, "abc")),
         (list_reads, (list(range(500)), [np.arange(3, dtype=np.int8),
                                          np.ones(2, dtype=np.float16),
                                          np.array([250, 7], dtype=np.uint8)])),
         (empty_loop_value, (0,)),
         (empty_loop_value, (50000,)),
         (count_prime_factors, (2000,)),
         (select_to_list, (np.random.default_rng(3).random(40000), 0.25)),
         (appended_while_iterated, ([0, 1, 5], 3))]


EXTRA = []


def test_two_names_of_a_list_appended_to_are_refused():
    # Lists are values in tessera (docs/python.md, "Differences from Python"):
    # `ys = xs` then `xs.append(v)` would leave ys as it was, where Python's
    # grows too -- refused on every path (_aliases.py).
    with pytest.raises(tessera.UnsupportedError, match="name one object"):
        tessera.jit(alias_in_loop)(200)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_native_list_loops_agree_with_python(f, args, threads):
    check(f, *args)


def test_raise_in_a_native_list_loop():
    xs, ys = [9], [9]
    with pytest.raises(ValueError):
        appends_then_raise(ys, 30010)
    with pytest.raises(ValueError) as e:
        tessera.jit(appends_then_raise)(xs, 30010)
    line = appends_then_raise.__code__.co_firstlineno + 6
    assert f"test_native_lists.py:{line}" in str(e.value)
    # The caller's list is given back only when the call returns
    # (docs/python.md, "Lists are values"); Python's has the appends.
    assert len(ys) == 30007 and xs == [9]


def test_index_error_in_a_native_list_loop():
    xs, ys = [1.0], [1.0]
    x = np.arange(40000.0)
    with pytest.raises(IndexError):
        appends_then_index_error(ys, x, 40001)
    with pytest.raises(IndexError) as e:
        tessera.jit(appends_then_index_error)(xs, x, 40001)
    line = appends_then_index_error.__code__.co_firstlineno + 3
    assert f"test_native_lists.py:{line}" in str(e.value)
    assert len(ys) == 40001 and xs == [1.0]


_SCRIPT = cases_script("test_native_lists", "t.CASES + t.EXTRA")


def test_native_interpreter_and_general_print_the_same():
    native, log = run_script(_SCRIPT, TESSERA_NATIVE="debug", TESSERA_CACHE_DIR="0")
    interp, _ = run_script(_SCRIPT, TESSERA_NATIVE="0")
    general, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert native == interp == general
    assert "IndexError" in native
    # The list loops compiled to native code (not refused by the generator).
    for f in (factor_counts, display_per_turn, list_variable_from_before, empty_loop_value,
              rolled_back_late, primes_list,
              count_prime_factors, select_to_list):
        first = f.__code__.co_firstlineno
        where = os.path.basename(f.__code__.co_filename)
        lines = [ln for ln in log.splitlines()
                 if any(f"{where}:{k}: native code compiled" in ln for k in range(first, first + 12))]
        assert lines, (f.__name__, log)
    first = appended_while_iterated.__code__.co_firstlineno
    assert not [ln for ln in log.splitlines() if "a list used other than" in ln and not any(
        f"test_native_lists.py:{k}:" in ln for k in range(first, first + 12))], log


_MANY = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_lists as t
print(tessera.jit(t.display_per_turn)(200_001), t.display_per_turn(200_001))
"""


def test_many_lists_made_and_let_go_natively():
    # 200,001 lists made and dropped by native code: released by its sweeps
    # (the table of 65,536 objects would otherwise fill and the loop roll
    # back to the general path).
    out, log = run_script(_MANY, TESSERA_FAST_LOOPS="debug", TESSERA_NATIVE="debug",
                          TESSERA_CACHE_DIR="0")
    got, want = out.split()
    assert got == want
    assert "rolled back" not in log, log
    assert "native code compiled" in log, log
