"""Lazily compiled native loops (docs/runtime.md, "Compile time"): a loop's first native
code holds only the versions whose accesses are checked once before each loop; where such
a check fails (an index out of bounds or negative, a list whose items changed kind) the
code goes back to the call's start, the whole code (the versions checked at each access
too) is compiled and runs the call again. These tests make the checks pass on the first
call and fail on later ones, in the middle of a nest after writes too, and compare every
call's result, exception (with its file:line) and arguments afterwards with plain Python,
the loop interpreter and the general evaluation, at 1 and 2 threads; the native runs must
have compiled a partial code, then the whole one."""

import copy
import os

import numpy as np
import pytest
from jit_check import assert_identical, loop_log_lines, run_on_every_path, run_script

import tessera


def shifted(a, out, shift):
    # out[i, j] = a[i, j + shift]: in bounds for shift 0 (the hoisted check holds), out
    # of bounds for a large shift (IndexError), negative indices (Python's wrap) for -1.
    n = a.shape[0]
    m = out.shape[1]
    for i in range(n):
        for j in range(m):
            out[i, j] = a[i, j + shift] * 2.0 + out[i, j]
    return out[n - 1, m - 1]


def ragged(out, lim):
    # The inner loop's end comes from lim[i]: its check runs at each outer turn, so a
    # row past out's width fails it after earlier rows were written (the writes are
    # taken back, then done again by the whole code, and Python's IndexError leaves
    # those rows written).
    total = 0
    for i in range(out.shape[0]):
        for j in range(lim[i]):
            out[i, j] += i + j
            total += out[i, j]
    return total


def scale_list(xs, n):
    # A flat list read and written in place: its items' kind is asked once before the
    # loop; ints then a list with a float among them (the per-item version's work).
    for i in range(n):
        xs[i] = xs[i] * 3 + i
    return xs[n - 1]


def _grid(k):
    return np.arange(k * 7, dtype=np.float64).reshape(k, 7) * 0.5


# Each case: a function and the arguments of its successive calls (the first passes
# the checks before the loops, a later one fails them).
CASES = [
    (shifted, [(_grid(5), np.zeros((5, 6)), 0), (_grid(5), np.zeros((5, 6)), 1),
               (_grid(5), np.zeros((5, 6)), -1), (_grid(5), np.zeros((5, 6)), 0)]),
    (shifted, [(_grid(4), np.zeros((4, 6)), 0), (_grid(4), np.zeros((4, 6)), 3)]),
    (ragged, [(np.zeros((4, 5), dtype=np.int64), np.array([5, 3, 4, 1])),
              (np.zeros((4, 5), dtype=np.int64), np.array([2, 5, 6, 1])),
              (np.zeros((4, 5), dtype=np.int64), np.array([1, 2, 3, 4]))]),
    (scale_list, [([1, 2, 3, 4, 5], 5), ([1, 2.5, 3, 4, 5], 5), ([1, 2, 3, 4, 5], 6),
                  ([7, 8, 9], 3)]),
]


def _python(f, args):
    a = copy.deepcopy(args)
    try:
        return f(*a), None, a
    except Exception as e:  # noqa: BLE001 - the jit must raise the same
        return None, e, a


@pytest.mark.parametrize("f, calls", CASES, ids=[f.__name__ + str(i) for i, (f, _) in
                                                 enumerate(CASES)])
def test_every_call_agrees_with_python(f, calls, threads):
    g = tessera.jit(f, threads=threads)
    for args in calls:
        expected, error, theirs = _python(f, args)
        mine = copy.deepcopy(args)
        if error is not None:
            with pytest.raises(type(error)):
                g(*mine)
            # A call that raises gives the caller's lists back as they were (as every
            # jit call does, test_native_flat_lists); arrays keep Python's writes.
            theirs = [a if isinstance(a, list) else t for a, t in zip(args, theirs)]
        else:
            assert_identical(g(*mine), expected)
        for x, y in zip(mine, theirs):
            assert_identical(x, y, "arguments")


def test_index_error_names_its_line():
    g = tessera.jit(shifted)
    g(_grid(3), np.zeros((3, 6)), 0)  # the partial code, compiled and run
    with pytest.raises(IndexError) as e:
        g(_grid(3), np.zeros((3, 6)), 2)
    line = shifted.__code__.co_firstlineno + 7
    assert f"test_native_compile_lazy.py:{line}" in str(e.value)


_SCRIPT = """
import copy, sys, numpy as np, tessera, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import test_native_compile_lazy as t
for threads in (1, 2):
    for f, calls in t.CASES:
        g = tessera.jit(f, threads=threads)
        for args in calls:
            a = copy.deepcopy(args)
            try:
                print(f.__name__, repr(g(*a)), repr(a))
            except Exception as e:
                print(f.__name__, type(e).__name__, str(e), repr(a))
"""


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native
    for f in (shifted, ragged):
        assert loop_log_lines(log, f, "compiled in"), (f.__name__, log)
        assert any("(partial" in ln for ln in loop_log_lines(log, f, "compiled in")), (
            f.__name__, log)
        assert loop_log_lines(log, f, "a check before a loop failed"), (f.__name__, log)
    # A list from Python is a list of Values, which the hoisted version's check refuses:
    # its loop is compiled whole at once, not partial then whole (2026-12-06).
    assert loop_log_lines(log, scale_list, "compiled in"), log
    assert not any("(partial" in ln for ln in loop_log_lines(log, scale_list, "compiled in"))


def test_eager_compiles_the_whole_at_once():
    # TESSERA_NATIVE_LAZY=0: the whole code at the first call, the same answers.
    out, log = run_script(_SCRIPT, TESSERA_CACHE_DIR="0", TESSERA_NATIVE_LAZY="0",
                          TESSERA_FAST_LOOPS="debug")
    assert out == run_script(_SCRIPT, TESSERA_NATIVE="0")[0]
    assert "(partial" not in log and "the whole native code" not in log
    assert loop_log_lines(log, shifted, "native code compiled")


_CACHED = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_compile_lazy as t
g = tessera.jit(t.shifted)
print(repr(g(t._grid(5), np.zeros((5, 6)), 0)))
if {second!r}:
    print(repr(g(t._grid(5), np.zeros((5, 6)), -1)))
# the optimised codes are cached by the background compile (docs/runtime.md,
# "Tiered compilation"): waited for, so that the next process finds them
tessera._core._native_tiers_wait()
"""


def test_a_cache_hit_then_the_whole_code(tmp_path):
    cache = tmp_path / "cache"
    env = dict(TESSERA_CACHE_DIR=str(cache), TESSERA_NATIVE="debug")
    first, log1 = run_script(_CACHED.replace("{second!r}", "False"), **env)
    assert "(partial" in log1
    # A second process: the partial code from the cache, then a call that needs more
    # (the general version of the loop whose check failed, compiled now, stored too,
    # with the cache's mark of what the loop needs), then a third process loads that
    # code at once (no partial code first).
    second, log2 = run_script(_CACHED.replace("{second!r}", "True"), **env)
    assert "loaded from the cache" in log2 and "a check before a loop failed" in log2, log2
    third, log3 = run_script(_CACHED.replace("{second!r}", "True"), **env)
    assert "loaded from the cache" in log3 and "check before a loop failed" not in log3, log3
    a = _grid(5)
    expected = [shifted(a.copy(), np.zeros((5, 6)), s) for s in (0, -1)]
    assert first.split() == [repr(expected[0])]
    assert second.split() == third.split() == [repr(x) for x in expected]
    assert "native code compiled" not in log3, log3
    assert os.listdir(cache / "native")
