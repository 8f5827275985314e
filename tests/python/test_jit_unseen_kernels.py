"""Kernels nobody here wrote (bench/unseen_kernels.py: fractals, stencils, Monte Carlo
chains, cellular automata, dynamic programming, n-body, histograms, sorts, scans, root
finding, integer puzzles), with only @tessera.jit added: each compared with plain
Python/NumPy at 1 and 2 threads (values, the exact kinds of scalars, dtypes, the
arguments written in place), at bench_unseen_kernels.py's quick sizes. Then what they
needed fixed, each with a test that failed before:

- np.int64(x), np.float64(x), np.bool_(x) of a Python number gave Python's int, float
  and bool (everywhere, loops or not).
- `for di in (-1, 0, 1)` kept a loop off native code ("a tuple is indexed by a
  variable"): a display of ints in arithmetic progression is now counted as a range.
- np.float32(x) and np.int32(x) in a loop had no native code (astype).
- `acc[:] = 0.0` of a 2-d array had no native code ("a slice write that is not 1-d").
- `a[i - 1] == b[j - 1]` of uint8 (int8, int16, uint16, uint32) arrays had no native code
  ("an element read of dtype uint8"): Needleman-Wunsch on the interpreter ran 3.6x
  slower than CPython.
The fixed constructs are also run with native code, the loop interpreter and the
general evaluation, which must print the same, with the loops compiled.
"""

import copy
import math
import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, loop_log_lines, run_on_every_path

import tessera
from tessera import _core

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))

import bench_unseen_kernels as bench  # noqa: E402 - bench/


@pytest.fixture(params=[1, 2], ids=["1t", "2t"])
def threads(request):
    before = _core.num_threads()
    _core.set_num_threads(request.param)
    yield request.param
    _core.set_num_threads(before)


def assert_exact(got, expected, rtol=1e-12, path="result"):
    """Equal values with the same type at every level: Python's int/float/bool and
    NumPy's scalars apart, arrays of the same dtype and shape, lists and tuples."""
    assert type(got) is type(expected), f"{path}: {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and got.shape == expected.shape, path
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(got, expected, rtol=max(rtol, 1e-5 if expected.dtype ==
                                                               np.float32 else 0), err_msg=path)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=path)
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), path
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_exact(g, e, rtol, f"{path}[{k}]")
    elif isinstance(expected, (float, np.floating)):
        assert math.isclose(got, expected, rel_tol=rtol) or got == expected, (path, got, expected)
    else:
        assert got == expected, (path, got, expected)


DETERMINISTIC = [k for k in bench.KERNELS if k.kind != "random"]
RANDOM = [k for k in bench.KERNELS if k.kind == "random"]


@pytest.mark.parametrize("kernel", DETERMINISTIC, ids=[k.name for k in DETERMINISTIC])
def test_kernel_as_python_computes_it(kernel, threads):
    args = kernel.setup(True)
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    expected = kernel.func(*theirs)
    got = tessera.jit(kernel.func)(*mine)
    assert_exact(got, expected, rtol=kernel.rtol)
    for k, (g, e) in enumerate(zip(mine, theirs)):
        assert_exact(g, e, rtol=kernel.rtol, path=f"argument {k} after the call")


@pytest.mark.parametrize("kernel", RANDOM, ids=[k.name for k in RANDOM])
def test_random_kernel_kinds_and_statistics(kernel, threads):
    # tessera's stream is not NumPy's (by design): the kinds and the statistics.
    args = kernel.setup(True)
    np.random.seed(0)
    expected = kernel.func(*copy.deepcopy(args))
    got = tessera.jit(kernel.func)(*copy.deepcopy(args))
    assert type(got) is type(expected)
    if isinstance(expected, tuple):
        assert [type(x) for x in got] == [type(x) for x in expected]
    kernel.stat(got, args)


# ---------------------------------------------------------------- NumPy's scalars made of Python's


def numpy_scalars(n, x):
    return (np.int64(n), np.float64(x), np.bool_(n), np.float64(1), np.int64(2.7),
            np.int64(np.float64(x)), np.float32(n), np.int32(n), int(2.5), float(3), bool(n))


def test_numpy_scalar_of_python_number_is_numpys():
    assert_exact(tessera.jit(numpy_scalars)(10, 2.5), numpy_scalars(10, 2.5))


# ---------------------------------------------------------------- the constructs in loops


def neighbours(g, n):
    # for over a display of ints in progression, the last item left in the target
    s = 0
    for i in range(n):
        for di in (-1, 0, 1):
            s += g[(i + di) % n]
        for dj in [4, 2, 0]:
            s -= g[dj] * (i % 2)
    return s, di, dj


def not_a_progression(g, n):
    s = 0
    for i in range(n):
        for c in (1, 5, 10, 25):
            s += c * g[i]
    return s


def float32_accumulator(A, n):
    total = np.float32(0.0)
    for i in range(n):
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * A[i, k]
        total += acc
    return total, acc


def int_conversions(xs, n):
    s = np.int64(0)
    m = np.int32(0)
    for i in range(n):
        s += np.int64(i) * 3
        m += np.int32(xs[i])
        f = np.float64(i)
    return s, m, f


def int32_out_of_range(n, big):
    m = np.int32(0)
    for i in range(n):
        m += np.int32(i)
        if i == n - 1:
            m = np.int32(big)  # the general path decides (NumPy: OverflowError)
    return m


def fill_each_step(pos, steps):
    acc = np.zeros_like(pos)
    for t in range(steps):
        acc[:] = 0.0
        for i in range(pos.shape[0]):
            for d in range(pos.shape[1]):
                acc[i, d] += pos[i, d] * t
        pos[0, 0] += acc[-1, -1]
    return acc


def fill_then_fail(grid, n):
    # the argument filled, then an IndexError in a later turn: Python's writes stay
    for t in range(n):
        grid[:] = t
        grid[t, 0] = -1
    return grid


def fill_ints_and_bools(a, m, n):
    for t in range(n):
        a[:] = t
        m[:, :] = t % 2 == 0
    return a.sum(), m.sum()


def small_int_compares(a, b, n):
    # uint8 and int16 elements compared with each other, ints and floats (a number past
    # their range too): NumPy's bools; the value of the last one kept
    eq = 0
    last = False
    for i in range(n):
        if a[i] == b[i]:
            eq += 1
        if a[i] < 2.5 and b[-1 - i] >= 1000:
            eq += 100
        if a[i] != 300:
            eq += 1000
        last = a[i] != b[i]
    return eq, last


CASES = [(neighbours, (np.arange(12), 12)),
         (not_a_progression, (np.arange(8), 8)),
         (float32_accumulator, (np.arange(12, dtype=np.float32).reshape(3, 4) / 7, 3)),
         (int_conversions, (np.arange(9), 9)),
         (int32_out_of_range, (5, 2**40)),
         (fill_each_step, (np.arange(6, dtype=np.float64).reshape(3, 2), 4)),
         (fill_then_fail, (np.zeros((3, 2)), 5)),
         (fill_ints_and_bools, (np.zeros((2, 3), dtype=np.int64), np.zeros((2, 2), dtype=bool), 3)),
         (small_int_compares, (np.array([1, 2, 3, 200, 5], dtype=np.uint8),
                               np.array([1, 0, 3, 4, 1500], dtype=np.int16), 5)),
         (small_int_compares, (np.array([1, 2, 3], dtype=np.uint8),
                               np.array([1, 0, 3], dtype=np.int16), 4))]


@pytest.mark.parametrize("f, args", CASES, ids=[c[0].__name__ for c in CASES])
def test_construct_as_python(f, args, threads):
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    try:
        expected = f(*theirs)
    except Exception as e:  # noqa: BLE001 - tessera must raise the same kind
        with pytest.raises(type(e)):
            tessera.jit(f)(*mine)
        expected = got = None
    else:
        got = tessera.jit(f)(*mine)
    assert_exact(got, expected)
    for k, (g, e) in enumerate(zip(mine, theirs)):
        assert_exact(g, e, path=f"argument {k} after the call")


_SCRIPT = cases_script("test_jit_unseen_kernels")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native
    for f in (neighbours, float32_accumulator, int_conversions, fill_each_step, fill_ints_and_bools,
              small_int_compares):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
