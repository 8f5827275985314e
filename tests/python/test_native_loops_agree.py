"""Native code for scalar loops (tessera/lang/native.cpp, docs/runtime.md
"Native loops"): loops the generator compiles give what Python/NumPy give
(values, result kinds, arrays written in place, exceptions and their
positions, wrap-around, NaN and infinity), and exactly what the register
interpreter gives (TESSERA_NATIVE=0) and the general evaluation gives
(TESSERA_FAST_LOOPS=0): the same printed results and node counters, at 1
and 2 threads. TESSERA_FAST_LOOPS=debug must say that these loops were
compiled, so the tests cannot pass by never running native code.

The loops are in test_native_loops_scalars.py and test_native_loops_arrays.py
(with the tests that are theirs alone); this file holds the table of them
(CASES, EXTRA) and the tests that run every loop of it."""

import os

import numpy as np
import pytest
from jit_check import check, run_script
from native_loops_common import debug_run

import tessera
from test_native_loops_scalars import (  # the loops of the table
    sum_squares, mandelbrot, collatz, int_arith, float_arith, nan_and_inf, narrow_writes, strided,
    breaks, index_error_late, zero_division_late, int_overflow, wraps, lcs_wrap,
    wraps_from_python_int, row_norms, int_kinds, conv2d, write_then_fail, wrap_left, stencil_rows,
    backwards, diagonal, rows_then_fail, scatter_fail, loop_var_reassigned, int_writes_then_zero,
    pow2_arith, copy_then_fail, powers, big_range, pairwise, edit_distance, triangle,
    nest_index_error, rows_index_error, nest_overflow, stale_index, life_step, varying_or,
    narrow_reads, f32_sum_axpy, f32_mandelbrot, i32_histogram, i32_wrap, narrow_mixed,
    branchy_nest, branchy_flat)
from test_native_loops_arrays import (  # the loops of the table
    helper_scalars, helper_arrays, helper_index_error, helper_int_kinds, metropolis,
    helper_rebound, helper_unset_local, gather_then_fail, sqrt_nest, draws_then_fail, wave,
    ping_pong, copies, made_then_fail, small_copies, swap_rows, life_loop, shaped, cond_alloc,
    inner_alloc, alias_alloc, like_2d, bad_shape)


CASES = [
    (wave, (np.sin(np.linspace(0.0, 3.0, 60)), np.sin(np.linspace(0.0, 3.0, 60)) * 0.9, 0.1, 20)),
    (ping_pong, (np.linspace(0.0, 1.0, 30), np.zeros(30), 12, 99)),
    (ping_pong, (np.linspace(0.0, 1.0, 30), np.zeros(30), 12, 7)),
    (copies, (np.arange(20, dtype=np.int64).reshape(4, 5), 6)),
    (made_then_fail, (np.linspace(1.0, 2.0, 30), 25)),
    (made_then_fail, (np.linspace(1.0, 2.0, 30), 40)),
    (small_copies, (np.arange(5.0), np.array([0, 2, 4, 1, 3] * 10))),
    (swap_rows, (np.arange(7.0), np.ones(7), 41)),
    (life_loop, ((np.arange(144).reshape(12, 12) * 7 % 5 < 2).astype(np.int64), 4)),
    (shaped, (4, 5, 3)),
    (shaped, (-1, 5, 3)),
    (cond_alloc, (np.arange(6.0), 10)),
    (inner_alloc, (np.arange(5.0), 7)),
    (alias_alloc, (np.arange(8.0), 12)),
    (like_2d, (np.arange(12.0).reshape(3, 4), 5)),
    (bad_shape, (3, 3)),
    (bad_shape, (3, 6)),
    (narrow_reads, (np.linspace(-3.0, 3.0, 50).astype(np.float32) * np.float32(1.1),
                    (np.arange(50) * 12345 - 300000).astype(np.int32),
                    (np.arange(50) * 7).astype(np.uint8),
                    np.array([3, 1, 4, 1, 5, 9, 2, 6, 49, -1, -50], dtype=np.int32),
                    np.zeros(50), np.zeros(50, dtype=np.int64), np.zeros(50, dtype=np.float32))),
    (narrow_reads, (np.ones(5, dtype=np.float32), np.ones(5, dtype=np.int32),
                    np.ones(5, dtype=np.uint8), np.array([1, 5], dtype=np.int16),
                    np.zeros(5), np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.float32))),
    (small_copies, (np.arange(5.0), np.array([0, 2, 4, 1, 3] * 10 + [5]))),
    (life_step, ((np.arange(144).reshape(12, 12) * 7 % 5 < 2).astype(np.int64),)),
    (varying_or, (np.linspace(0.0, 1.0, 40), 45)),
    (helper_scalars, (np.linspace(-3.0, 3.0, 200),)),
    (helper_arrays, (np.arange(30.0).reshape(6, 5) % 4, np.linspace(1.0, 2.0, 5), np.zeros(6))),
    (helper_index_error, (np.arange(50.0) ** 2, 49)),
    (helper_index_error, (np.arange(50.0) ** 2, 50)),
    (helper_int_kinds, (np.arange(-20, 30, dtype=np.int64),)),
    (helper_rebound, (np.linspace(-2.0, 2.0, 100),)),
    (gather_then_fail, (np.arange(50.0) ** 2, np.arange(1, 51), 50)),
    (sqrt_nest, (np.linspace(1.0, 3.0, 60).reshape(30, 2), np.zeros((30, 30)))),
    (sqrt_nest, (np.linspace(1.0, 3.0, 60).reshape(30, 2), np.zeros((30, 30)).T)),
    (pairwise, (np.arange(24.0).reshape(6, 4) ** 0.5,)),
    (edit_distance, (np.array([1, 2, 3, 1, 0, 2, 2]), np.array([2, 3, 1, 1, 2]))),
    (triangle, (np.arange(9.0) ** 2, np.zeros((9, 9)))),
    (nest_index_error, (np.zeros((5, 6)), 6)),
    (nest_index_error, (np.zeros((5, 6)), 7)),
    (rows_index_error, (np.zeros((5, 6)), np.array([6, 2, 6, 6, 7]))),
    (nest_overflow, (np.full((4, 50), 7, dtype=np.int64), np.zeros((4, 50), dtype=np.int64))),
    (stale_index, (np.arange(6.0), np.zeros((3, 4)))),
    (wrap_left, (np.arange(50.0),)),
    (stencil_rows, (np.arange(120.0).reshape(10, 12) ** 1.5,)),
    (backwards, (np.linspace(1.0, 2.0, 80), np.linspace(0.1, 0.3, 80))),
    (diagonal, (np.arange(36.0).reshape(6, 6),)),
    (rows_then_fail, (np.zeros((7, 9)), np.ones(7))),
    (scatter_fail, (np.array([1, 2, 3, 7, 0] * 10 + [8, 1, 1]),)),
    (scatter_fail, (np.array([1, 2, 3, 7, 0] * 10),)),
    (loop_var_reassigned, (np.arange(40.0),)),
    (big_range, (200_000, np.arange(7.0))),
    (pow2_arith, (np.arange(-70, 70, 3, dtype=np.int64),)),
    (copy_then_fail, (np.arange(10.0), np.array([3, 7, 2, 12]))),
    (powers, (np.linspace(-3.0, 3.0, 41), np.arange(-20, 21, dtype=np.int64))),
    (write_then_fail, (np.zeros(300), np.ones(300))),
    (conv2d, (np.arange(64.0).reshape(8, 8) % 7, np.array([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]]))),
    (row_norms, (np.arange(24.0).reshape(4, 6), np.array([6, 3, 5, 0]))),
    (int_kinds, (np.arange(40, dtype=np.int64),)),
    (int_kinds, (np.arange(41, dtype=np.int64),)),
    (sum_squares, (np.arange(1000.0), 1000)),
    (mandelbrot, (-2.0, 1.0, -1.5, 1.5, 40, 30, 50)),
    (collatz, (300,)),
    (int_arith, (np.arange(-50, 50, 3, dtype=np.int64),)),
    (float_arith, (np.linspace(-4.0, 4.0, 101),)),
    (nan_and_inf, (np.array([1.0, np.nan, np.inf, -np.inf, 1e308, -0.0] * 20),)),
    (narrow_writes, (np.linspace(-3.0, 300.0, 150),)),
    (strided, (np.arange(60.0).reshape(6, 10),)),
    (breaks, (np.array([1.0, -2.0, 3.0] * 100), 250.0)),
    (index_error_late, (np.zeros(500), 501)),
    (wraps, (np.array([2**62, 2**62, 2**62, 5], dtype=np.int64),)),
    (lcs_wrap, (np.array([1, 2, 3, 1, 2, 2, 3, 1]), np.array([2, 3, 1, 1, 2, 3]),
                np.full((9, 7), 2**63 - 3, dtype=np.int64))),
    (lcs_wrap, (np.array([1, 2, 3, 1, 2, 2, 3, 1]), np.array([2, 3, 1, 1, 2, 3]),
                np.zeros((9, 7), dtype=np.int64))),
    (wraps_from_python_int, (np.array([2**62, 2**62, 2**62, -7, 5] * 8, dtype=np.int64), 3)),
    (f32_sum_axpy, (np.linspace(-1.0, 1.0, 101).astype(np.float32) ** 3,
                    np.linspace(0.0, 2.0, 101).astype(np.float32), 0.3)),
    (f32_mandelbrot, (np.linspace(-2.0, 1.0, 40).astype(np.float32),
                      np.linspace(-1.5, 1.5, 30).astype(np.float32), 50)),
    (i32_histogram, (((np.arange(500) * 7919) % 1013 - 100).astype(np.int32), 10, -50, 97)),
    (i32_wrap, (np.array([2**31 - 5, 2**31 - 7, 12345, -2**31 + 3] * 10, dtype=np.int32),)),
    (narrow_mixed, (np.linspace(-2.0, 2.0, 40).astype(np.float32) * np.float32(1.1),
                    np.arange(-20, 20, dtype=np.int32) * 50001,
                    np.linspace(0.5, 3.0, 40), np.arange(40, dtype=np.int64) * 3)),
    (branchy_nest, ((np.arange(60, dtype=np.int64).reshape(6, 10) * 7) % 23 - 5,
                    np.zeros((6, 10), dtype=np.int64))),
    (branchy_flat, (np.linspace(0.0, 1.0, 40), np.arange(40) % 37)),
    (branchy_flat, (np.linspace(0.0, 1.0, 40), np.array(list(range(39)) + [40]))),
]


# tessera reports an integer division by zero where NumPy warns and gives 0,
# and a Python int past int64 where Python goes on (docs/numpy.md): compared
# with the interpreter and the general path only.
EXTRA = [(varying_or, (np.linspace(0.0, 1.0, 40), 10)),
         (zero_division_late, (np.array([5, 3, -7] * 100 + [0, 4], dtype=np.int64),)),
         (int_writes_then_zero, (np.array([5, 3, -7] * 100 + [0, 4], dtype=np.int64),
                                 np.zeros(302, dtype=np.int64))),
         (int_overflow, (100,)),
         (helper_unset_local, (np.array([1.0, -1.0, 2.0] * 30),)),
         (metropolis, (3000, 0.8)),
         (draws_then_fail, (np.ones(400), np.arange(400), 401)),
         (draws_then_fail, (np.ones(400), np.arange(400) + 1, 400)),
         (powers, (np.linspace(-3.0, 3.0, 41), np.arange(-20, 21, dtype=np.int64) * 10**4))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_native_loops_agree_with_python(f, args):
    check(f, *args)


# Loops that make arrays (or read float32/int32 elements) and then stop
# mid-way: the interpreter counts those operations in the turns it rolls
# back too (it runs them by the primitive, whose compute() counts as it
# goes), the native code only in the turns kept, so their counters are not
# compared after an error.
ALLOC_BAILS = (made_then_fail, small_copies, bad_shape, narrow_reads)

# Loops of mostly math functions: the register interpreter calls each through
# its primitive and, after 64 such calls, leaves the rest of the loop to the
# general evaluation (which counts the fused expression's node), while the
# native code runs every turn (counting its operations): the same results,
# counted on other nodes.
INTERPRETER_LEAVES = (float_arith,)

_SCRIPT = """
import copy, sys, numpy as np, tessera, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import test_native_loops_agree as t
for threads in (1, 2):
    for f, args in t.CASES + t.EXTRA:
        a = copy.deepcopy(args)
        g = tessera.jit(f, threads=threads)
        try:
            r = g(*a)
            print(f.__name__, repr(r), repr(a))
        except Exception as e:
            print(f.__name__, type(e).__name__, str(e), repr(a))
            if f in t.ALLOC_BAILS:
                continue
        if f in t.INTERPRETER_LEAVES:
            continue
        print([",".join(l.split(",")[:3]) for l in g.counters().splitlines()])
"""


def _run(**env):
    return run_script(_SCRIPT, **env)


def test_native_interpreter_and_general_print_the_same():
    native, log = _run(TESSERA_FAST_LOOPS="debug")
    interp, _ = _run(TESSERA_NATIVE="0")
    general, _ = _run(TESSERA_FAST_LOOPS="0")
    assert native == interp
    # The general path counts some comparisons differently from the
    # interpreter (before native code too): results compared, not counters.
    results = lambda out: [l for l in out.splitlines() if not l.startswith("[")]  # noqa: E731
    assert results(native) == results(general)
    # The loops were compiled (not left to the interpreter).
    compiled = {line.split(":")[1] for line in log.splitlines()
                if "native code compiled" in line or "native code loaded" in line}
    assert len(compiled) >= 8, log
    assert "IndexError" in native and "test_native_loops_scalars.py" in native


@pytest.mark.parametrize("at", [0, 3, 7, 8, 9])
def test_loops_making_arrays_compile_natively(at):
    # Not refused by the generator: the loop that makes and rebinds arrays
    # is one native function (its debug line names the loop's line).
    f, args = CASES[at]
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys, numpy as np, tessera; sys.path.insert(0, {here!r}); "
            f"import test_native_loops_agree as t; "
            f"print(repr(tessera.jit(t.{f.__name__})(*t.CASES[{at}][1])))")
    out, err = debug_run(code, TESSERA_NATIVE="debug")
    assert "no native code" not in err, err
    line = f.__code__.co_firstlineno + {swap_rows: 4, life_loop: 4, shaped: 5}.get(f, 3)  # `for t`
    assert f"test_native_loops_arrays.py:{line}: native code" in err, err
    assert out.strip() == repr(f(*args))


NARROW = (f32_sum_axpy, f32_mandelbrot, i32_histogram, i32_wrap, narrow_mixed)


def _leaves(v):
    if isinstance(v, tuple):
        return [x for item in v for x in _leaves(item)]
    return [v]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("threads", [1, 2])
def test_float32_int32_scalars_keep_numpy_types(threads):
    # check() compares kinds (int, float); here NumPy's exact scalar types
    # and dtypes (float32 stays float32, int32 wraps as int32) and bits.
    for f, args in [c for c in CASES if c[0] in NARROW]:
        want = f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        got = tessera.jit(f, threads=threads)(*[a.copy() if isinstance(a, np.ndarray) else a
                                                for a in args])
        for w, g in zip(_leaves(want), _leaves(got), strict=True):
            assert type(g) is type(w), (f.__name__, w, g)
            if isinstance(w, np.ndarray):
                assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True), f.__name__
            else:
                assert np.array_equal(np.asarray(g), np.asarray(w), equal_nan=True), f.__name__


def test_float32_int32_loops_compile_natively():
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys, warnings, numpy as np, tessera; warnings.simplefilter('ignore'); "
            f"sys.path.insert(0, {here!r}); import test_native_loops_agree as t\n"
            f"for f, a in t.CASES:\n"
            f"    if f in t.NARROW: tessera.jit(f)(*a)\n")
    out, err = debug_run(code, TESSERA_NATIVE="debug")
    for f in NARROW:
        lines = range(f.__code__.co_firstlineno, f.__code__.co_firstlineno + 30)
        at = [f"test_native_loops_scalars.py:{ln}: " for ln in lines]
        compiled = [a for a in at if a + "native code compiled" in err or a + "native code loaded" in err]
        refused = [a for a in at if a + "no native code" in err]
        assert compiled and not refused, (f.__name__, err)
