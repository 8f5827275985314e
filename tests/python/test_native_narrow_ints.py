"""NumPy's integer scalars narrower than int64 in the loop interpreter and native
code (tessera/lang/fastloop_impl.hpp narrow_int_kind, fastloop.cpp binary_narrow,
native_gen_scalars.cpp Gen::narrow_binary, Gen::int_bit_binary; docs/runtime.md
"Native loops"): elements of int8, uint8, int16, uint16 and uint32 arrays are
registers of their own kind, with NumPy 2's promotion (NEP 50: with a Python int
the array's kind, a Python int it cannot hold an OverflowError; with another kind
np.promote_types'; with float32 float32 up to 16 bits; with a Python float
float64), arithmetic wrapped around, & | ^ << >> (counts outside the width shift
everything out), // and % (by zero tessera's documented ZeroDivisionError where
NumPy gives 0: docs/python.md), comparisons, negation, np.uint8(v) and the like,
and element writes (NumPy 2's OverflowError for a number a signed dtype cannot
hold). & | ^ << >> of Python's ints and NumPy's int64 are native too. Compared
exactly (values and NumPy's scalar types, arrays written) with Python/NumPy, and
the three paths (native, interpreter, general evaluation) print the same; the
loops named in NATIVE must end in native code."""

import os
import sys
import warnings

import numpy as np
import pytest
from jit_check import (assert_identical, assert_loops_end_natively, cases_script,
                        run_on_every_path)

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from unseen_kernels import elementary_ca  # noqa: E402 - bench/, on the path above (rule 110
# on uint8 cells: `4 * left + 2 * cells[i] + right`, `(rule >> idx) & 1`)


def arith(x, y, c, out):
    # Every operation of two elements and of an element with a Python int, its
    # results kept in a list (their NumPy types compared too) and written back
    # into an array of x's dtype (wrapped as NumPy's cast wraps).
    res = []
    for i in range(len(x)):
        a = x[i]
        b = y[i]
        res.append(a + c)
        res.append(a - b)
        res.append(a * b)
        res.append(a + b * 3)
        res.append(-a)
        res.append(a < b)
        res.append(a == c)
        res.append(a / 2)
        res.append(a * 0.5)
        res.append(a // 3)
        res.append(a % 7)
        res.append(a & b)
        res.append(a | 3)
        res.append(a ^ b)
        res.append(a << 3)
        res.append(a >> 2)
        out[i] = a * 3 - 1
    return res


def divisions(x, y):
    # // and %, the most negative value // -1 (NumPy's wrap); / by zero: inf or
    # nan (// and % by zero: see test_division_by_zero).
    q = []
    for i in range(len(x)):
        q.append(x[i] // y[i])
        q.append(x[i] % y[i])
        q.append(x[i] / y[i])
    return q


def shifts(x, counts):
    # Counts from the array (negative, at or past the width: everything
    # shifted out, the sign left by >>).
    r = []
    for i in range(len(x)):
        for k in range(len(counts)):
            r.append(x[i] << counts[k])
            r.append(x[i] >> counts[k])
    return r


def python_int_out_of_range(x, c):
    # NEP 50: a Python int the array's kind cannot hold is NumPy's
    # OverflowError; compared with it, the exact answer.
    s = 0
    for i in range(len(x)):
        if x[i] < c:
            s += 1
    t = x[0]
    for i in range(len(x)):
        t = t + c
    return s, t


def store_out_of_range(out, v):
    # out[i] = v: a Python int out of the dtype's range is NumPy's OverflowError
    # (out's earlier elements written).
    for i in range(len(out)):
        out[i] = v - i
    return out


def store_other_kind(out, x, f):
    # NumPy 2 stores a NumPy scalar of another kind into a signed dtype only
    # when it fits (else OverflowError), into an unsigned one wrapped; floats
    # truncated first.
    for i in range(len(x)):
        out[i] = x[i] * 2
        out[len(out) - 1 - i] = f[i]
    return out


def popcount_sum(xs, n):
    # & >> << ^ | of Python's ints (a bound as big as int64's) and of NumPy's
    # int64 (elements): natively, Python's meaning or NumPy's by kind.
    total = 0
    for i in range(n):
        v = i
        while v:
            total += v & 1
            v >>= 1
    mixed = 0
    for i in range(len(xs)):
        mixed = mixed ^ (xs[i] << 3) | (xs[i] >> 61)
        mixed = mixed & 0x7FFFFFFF
    return total, mixed, (xs[0] << 64), (xs[1] >> 70), (xs[1] >> -1)


def quantize(x, scale, bias):
    # np.uint8(v), np.int8(v), np.int16(v) of NumPy's floats (truncated; out of
    # range NumPy wraps them), of narrow ints, and of a Python int (out of range
    # NumPy's OverflowError).
    out = np.zeros(len(x), np.uint8)
    q = []
    for i in range(len(x)):
        v = np.uint8(x[i] * scale)
        out[i] = v
        q.append(np.int8(v // 2))
        q.append(np.int16(i) * v)
        q.append(np.uint16(i + bias))
    return out, q


def float_mix(x, f):
    # int16 with float32: float32; uint32 (or int32) with float32: float64;
    # with a Python float: float64.
    acc = []
    for i in range(len(x)):
        acc.append(x[i] * f[i])
        acc.append(x[i] + 0.25)
        acc.append(x[i] < f[i])
    return acc


def _u(dtype, lo, hi, n, seed):
    return np.random.default_rng(seed).integers(lo, hi, n).astype(dtype)


CASES = [
    (arith, (_u(np.uint8, 0, 256, 40, 1), _u(np.uint8, 0, 256, 40, 2), 7, np.zeros(40, np.uint8))),
    (arith, (_u(np.int8, -128, 128, 40, 3), _u(np.uint8, 0, 256, 40, 4), -5,
             np.zeros(40, np.int8))),
    (arith, (_u(np.int16, -32768, 32768, 40, 5), _u(np.int8, -128, 128, 40, 6), 1000,
             np.zeros(40, np.int16))),
    (arith, (_u(np.uint16, 0, 65536, 40, 7), _u(np.int32, -10**6, 10**6, 40, 8), 65535,
             np.zeros(40, np.uint16))),
    (arith, (_u(np.uint32, 0, 2**32, 40, 9), _u(np.int32, -2**31, 2**31, 40, 10), 12345,
             np.zeros(40, np.uint32))),
    (arith, (_u(np.uint8, 0, 256, 20, 11), _u(np.int64, -10**12, 10**12, 20, 12), 3,
             np.zeros(20, np.uint8))),
    (divisions, (np.array([7, -128, 0, 100, -7, 5], np.int8),
                 np.array([1, -1, 3, 3, 2, -2], np.int8))),
    (divisions, (np.array([7, 255, 0, 100], np.uint8), np.array([2, 16, 5, 3], np.uint8))),
    (shifts, (np.array([1, 200, 255, 0], np.uint8), np.array([0, 1, 7, 8, 9, 200], np.uint8))),
    (shifts, (np.array([1, -5, 127, -128], np.int8), np.array([-1, 0, 3, 7, 8, 100], np.int8))),
    (shifts, (np.array([1, 40000], np.uint16), np.array([1, 15, 16, 17], np.int32))),
    (python_int_out_of_range, (np.array([3, 200, 255], np.uint8), 300)),
    (python_int_out_of_range, (np.array([3, 200, 255], np.uint8), 250)),
    (python_int_out_of_range, (np.array([3, -100], np.int8), -129)),
    (store_out_of_range, (np.zeros(4, np.uint8), 257)),
    (store_out_of_range, (np.zeros(4, np.int16), 32770)),
    (store_out_of_range, (np.zeros(4, np.uint16), 65537)),
    (store_other_kind, (np.zeros(4, np.uint8), np.array([100, -3], np.int16),
                        np.array([2.5, -1.5]))),
    (store_other_kind, (np.zeros(4, np.int8), np.array([30, -3], np.int16),
                        np.array([2.5, -1.5]))),
    (store_other_kind, (np.zeros(4, np.int8), np.array([100, -3], np.int16),
                        np.array([2.5, -1.5]))),
    (store_other_kind, (np.zeros(4, np.int16), np.array([30, -3], np.int16),
                        np.array([2.5, 1e6], np.float32))),
    (store_other_kind, (np.zeros(4, np.int32), np.array([30, 2**31 - 3], np.uint32),
                        np.array([2.5, -7.9]))),
    (popcount_sum, (np.array([5, -9, 2**40, -(2**62)], np.int64), 300)),
    (quantize, (np.linspace(0.0, 1.0, 12), 255.0, 3)),
    (quantize, (np.linspace(-1.0, 2.0, 12), 255.0, 3)),
    (quantize, (np.linspace(0.0, 1.0, 12), 255.0, 65530)),
    (float_mix, (_u(np.int16, -1000, 1000, 8, 13), np.linspace(-2, 2, 8, dtype=np.float32))),
    (float_mix, (_u(np.uint32, 0, 2**32, 8, 14), np.linspace(-2, 2, 8, dtype=np.float32))),
    (float_mix, (_u(np.uint8, 0, 256, 8, 15), np.linspace(-2, 2, 8, dtype=np.float32))),
    (elementary_ca, (200, 100, 110)),
    (elementary_ca, (101, 60, 30)),
]
IDS = [f.__name__ + str(i) for i, (f, _) in enumerate(CASES)]

# Loops that must run natively to their end (status 0), on every call.
NATIVE = (arith, shifts, elementary_ca, popcount_sum)
# Loops that end natively on some calls (the others bail where NumPy wraps or raises).
SOME_NATIVE = (quantize, store_other_kind)


def _copy(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def _python(f, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f, args", CASES, ids=IDS)
def test_narrow_ints_as_numpy(f, args, threads):
    theirs, mine = _copy(args), _copy(args)
    try:
        want = _python(f, theirs)
    except OverflowError as e:
        with pytest.raises(OverflowError, match="out of bounds"):
            tessera.jit(f, threads=threads)(*mine)
        assert "out of bounds" in str(e)
    else:
        assert_identical(tessera.jit(f, threads=threads)(*mine), want)
    for m, t in zip(mine, theirs):  # arrays written in place, as Python wrote them
        if isinstance(t, np.ndarray):
            assert_identical(m, t)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32])
def test_division_by_zero(dtype):
    # Integer // and % by zero: tessera's ZeroDivisionError at its line on every
    # path (docs/python.md; NumPy gives 0 with a warning).
    x, y = np.array([7, 5], dtype), np.array([2, 0], dtype)
    with pytest.raises(ZeroDivisionError, match="test_native_narrow_ints.py"):
        tessera.jit(divisions)(x, y)


def test_the_cases_reach_every_kind():
    # The cases above hold each narrow kind, and NumPy gives the kinds the
    # test means (so a case can fail: an element of another dtype would not).
    kinds = {a.dtype.name for _, args in CASES for a in args if isinstance(a, np.ndarray)}
    assert {"int8", "uint8", "int16", "uint16", "uint32", "int32"} <= kinds
    res = _python(arith, _copy(CASES[1][1]))
    assert {type(v) for v in res} >= {np.int8, np.int16, np.bool_, np.float64}


def test_every_path_prints_the_same_and_the_loops_run_natively():
    runs = run_on_every_path(cases_script("test_native_narrow_ints"), TESSERA_CACHE_DIR="0")
    native, log = runs["native"]
    assert native == runs["interpreter"][0] == runs["general"][0]
    assert "OverflowError" in native
    assert_loops_end_natively(log, NATIVE, SOME_NATIVE)
