"""float32 accumulators in native loops (tessera/lang/native_gen_scalars.cpp,
Gen::dyn_f32_binary; docs/runtime.md "Native loops"): a variable reset to a
Python float and added to from a float32 array (`s = 0.0`, then
`s += img[i, k]`) holds Python's float in some turns and NumPy's float32 in
others (NEP 50: float32 with a Python float stays float32). The native code
keeps both in one register with a float32 flag, so such loops run natively
instead of leaving every turn to the interpreter. Compared exactly (values,
NumPy's scalar types, arrays written) with Python/NumPy, and with the loop
interpreter and the general evaluation; the debug log must show the loops
ending in native code (status 0), not bailing."""

import os
import sys

import numpy as np
import pytest
from jit_check import assert_identical, cases_script, loop_log_lines, run_on_every_path

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from unseen_kernels import separable_blur  # noqa: E402 - bench/, on the path above (a box blur
# along rows, then columns, written as tutorials write it)


def row_sums(x, lengths):
    # Rows of varying length, some empty: their sums stay Python's 0.0 (a
    # float), the others are float32; the last row's sum is returned too.
    out = []
    s = 0.0
    for r in range(len(lengths)):
        s = 0.0
        for k in range(lengths[r]):
            s = s + x[r, k] * 2
        out.append(s)
    return out, s


def mixed_ops(x, thr):
    # A float32 accumulator with Python ints and floats on both sides, its
    # comparisons (np.bool or bool), negation, `not`, division, and a
    # conditional expression merging it with a Python float.
    s = 0.0
    hits = 0
    lows = 0.0
    for i in range(len(x)):
        s = 1.5 - s / 2 + x[i] * 3
        if s > thr:
            hits += 1
        t = -s if i % 3 == 0 else 0.25
        lows = lows + t
        if not s:
            hits += 100
    return s, hits, lows, s > thr, 2 < s, s == s


def with_float64(x32, x64):
    # float32 with NumPy's float64 (and int64) gives float64: the accumulator
    # then holds three kinds by turns, which the interpreter runs.
    s = 0.0
    t = 0.0
    for i in range(len(x32)):
        t = x32[i] + x64[i]
        s = s + x32[i]
        s = s * 1
    u = s + x64[0]
    return s, t, u


def overflow(x, big):
    # Past float32's range: inf as NumPy gives (the Python float `big` does
    # not fit float32: NumPy's cast warns, the general path's).
    s = 0.0
    for i in range(len(x)):
        s += x[i] * 1e30
        s = s * 1e10
    t = 0.0
    for i in range(len(x)):
        t = t + big
        t = t + x[i]
    return s, t


def zero_division(x, at):
    # Python's float / 0 raises ZeroDivisionError; NumPy's float32 gives inf.
    s = 0.0
    out = 0.0
    for i in range(len(x)):
        s = 0.0 if i == at else s + x[i]
        out = s / (i % 4)
    return out


def three_kinds(x32, x64):
    # s is Python's float or np.float32 by turns, t Python's float or
    # np.float64; u takes either: three kinds, whose float64 turns the
    # interpreter runs (values and types still NumPy's, in the list too).
    out = []
    t = 0.0
    for i in range(len(x32)):
        s = 0.0
        for k in range(i % 3):
            s += x32[k]
        t = t + x64[i] if i % 3 else 0.5
        u = s if i % 4 else t
        out.append(u)
    return out, t


CASES = [
    (separable_blur, (np.linspace(0.0, 1.0, 48, dtype=np.float32).reshape(6, 8) ** 2, 2)),
    (separable_blur, (np.arange(30, dtype=np.float32).reshape(3, 10) / 7, 0)),
    (row_sums, (np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(4, 6) ** 3,
                np.array([6, 0, 3, 0]))),
    (row_sums, (np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(4, 6),
                np.array([0, 2, 0, 5]))),
    (mixed_ops, (np.linspace(-2.0, 2.0, 41, dtype=np.float32), 1.25)),
    (mixed_ops, (np.zeros(7, dtype=np.float32), 0.5)),
    (with_float64, (np.linspace(0.0, 1.0, 9, dtype=np.float32), np.linspace(1.0, 2.0, 9))),
    (overflow, (np.full(5, 3e8, dtype=np.float32), 1e300)),
    (three_kinds, (np.linspace(0.0, 1.0, 13, dtype=np.float32), np.linspace(1.0, 2.0, 13))),
    (zero_division, (np.linspace(1.0, 2.0, 12, dtype=np.float32), 5)),
    (zero_division, (np.linspace(1.0, 2.0, 12, dtype=np.float32), 8)),
]
IDS = [f.__name__ + str(i) for i, (f, _) in enumerate(CASES)]

# Loops that must run natively to their end (status 0) on every call.
NATIVE = (separable_blur, row_sums, mixed_ops)


def _copy(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f, args", CASES, ids=IDS)
def test_f32_accumulators_as_numpy(f, args, threads):
    try:
        want = f(*_copy(args))
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            tessera.jit(f, threads=threads)(*_copy(args))
        return
    assert_identical(tessera.jit(f, threads=threads)(*_copy(args)), want)


def test_every_path_prints_the_same_and_the_loops_run_natively():
    runs = run_on_every_path(cases_script("test_native_f32_accumulators"),
                             TESSERA_CACHE_DIR="0")
    native, log = runs["native"]
    assert native == runs["interpreter"][0] == runs["general"][0]
    assert "ZeroDivisionError" in native
    for f in NATIVE:
        ran = loop_log_lines(log, f, "native code returned")
        assert ran, (f.__name__, log)
        # Ended natively (0; 5: a partial code's loop completed, then 0),
        # never back to the interpreter at the call's start (4) or mid-turn
        # (2), as a float32 accumulator did every turn.
        assert any("returned 0 " in line for line in ran), (f.__name__, ran)
        assert all("returned 0 " in line or "returned 5 " in line for line in ran), (f.__name__, ran)
