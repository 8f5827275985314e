"""A result written into a dying operand's buffer in the scalar-loop fast path
(tessera/lang/fastloop_state.cpp, give()): `x = x + y`, `x = np.sqrt(x * 0.5 + y)`
reuse the buffer of `x` or of the temporary when nothing else refers to it.
That must never be seen: arrays another variable, a view, a returned value, a
caller's argument or a checkpoint still holds keep their values, and results
are NumPy's bit for bit (rtol=0). Each case runs at 1 and 2 threads, with the
fast path on (these processes) and against plain NumPy (jit_check.check)."""

import numpy as np
import pytest
from jit_check import check

import tessera


def add_loop(x, y, n):
    for _ in range(n):
        x = x + y
    return x


def axpy_loop(x, y, n):
    for _ in range(n):
        x = x * 0.5 + y
    return x


def unary_of_temporary(x, y, n):
    for _ in range(n):
        x = np.sqrt(np.abs(x * 0.99 + y))
    return x


def alias_kept(x, y, n):
    # `keep` and `x` are one array after the assignment: x = x + y must not
    # write into it.
    keep = x
    for t in range(n):
        if t % 3 == 0:
            keep = x
        x = x + y
    return x, keep


def views_kept(x, y, n):
    # A view of x's buffer: the next x must be a new array, the view keeps
    # the old elements.
    firsts = np.zeros(n)
    v = x[::2]
    for t in range(n):
        v = x[::2]
        x = x * 1.5 + y
        firsts[t] = v[0]
    return x, v, firsts


def same_operand(x, n):
    for _ in range(n):
        x = x + x
        x = x * 0.5
    return x


def argument_untouched(x, y, n):
    # The first turn's x is the caller's array (it must not change); later
    # ones are the loop's own.
    z = x
    for _ in range(n):
        z = z + y
    return z


def writes_into_argument(out, y, n):
    acc = out * 0.0
    for t in range(n):
        acc = acc + y
        out[t % 4] = acc[t % 4]
    return acc


def bump(p, q):
    p = p + q
    return p * 2.0


def inlined_parameter(x, y, n):
    # bump's parameter p holds x's array: p = p + q must not write into it.
    total = x * 0.0
    for _ in range(n):
        z = bump(x, y)
        total = total + z + x
    return total, x


def kept_every_tenth(x, y, n):
    kept = []
    for t in range(n):
        x = x * 1.01 + y
        if t % 10 == 0:
            kept.append(x)
    return x, kept


def roll_back_after_reuse(x, y, big, n):
    # Turns reuse x's buffer; at t == 100 an int64 overflow (past the
    # checkpoint at 64 turns) rolls the fast path back and the general path
    # redoes the turns since: the result must be NumPy's.
    w = big[0]
    for t in range(n):
        x = x * 0.5 + y
        x = np.sqrt(x)
        if t == 100:
            w = big[0] + big[0]
    return x, w


def ints_change_dtype(k, n):
    # int64 array / 2 is float64: not the operand's dtype, never its buffer.
    for _ in range(n):
        k = k + 3
    f = k / 2
    for _ in range(n):
        f = f / 2 + k
    return k, f


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = tessera.num_threads()
    tessera.set_num_threads(request.param)
    yield request.param
    tessera.set_num_threads(before)


def _data(n=1000):
    rng = np.random.default_rng(7)
    return rng.random(n) + 0.5, np.full(n, 1e-3) + rng.random(n) * 1e-4


@pytest.mark.parametrize("f", [add_loop, axpy_loop, unary_of_temporary])
def test_reused_results_are_numpys_bits(threads, f):
    x, y = _data()
    check(f, x, y, 150, rtol=0, atol=0)
    check(f, x[:7], y[:7], 3, rtol=0, atol=0)


def test_arrays_still_held_keep_their_values(threads):
    x, y = _data(64)
    check(alias_kept, x, y, 40, rtol=0, atol=0)
    check(views_kept, x, y, 40, rtol=0, atol=0)
    check(same_operand, x, 40, rtol=0, atol=0)
    check(kept_every_tenth, x, y, 95, rtol=0, atol=0)


def test_arguments_are_never_reused(threads):
    x, y = _data(64)
    x0 = x.copy()
    got = tessera.jit(argument_untouched)(x, y, 30)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(np.asarray(got), argument_untouched(x0, y, 30))
    check(writes_into_argument, np.arange(8.0), np.full(8, 0.5), 30, rtol=0, atol=0)


def test_inlined_parameters_are_not_given_up(threads):
    x, y = _data(32)
    check(inlined_parameter, x, y, 20, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_roll_back_after_a_reused_buffer(threads):
    x, y = _data(16)
    big = np.array([2**62 + 5], dtype=np.int64)
    check(roll_back_after_reuse, x, y, big, 150, rtol=0, atol=0)


def test_dtype_changes_take_new_buffers(threads):
    check(ints_change_dtype, np.arange(10, dtype=np.int64), 30, rtol=0, atol=0)
