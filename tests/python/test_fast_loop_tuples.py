"""Tuples in scalar loops (tessera/lang/fastloop_tuples.cpp, docs/runtime.md
"Tuples in loops"): a tuple of fixed length built, unpacked, indexed by a
constant, returned by a helper or carried from turn to turn is kept as one
register per item, so such loops run as native code. Each loop gives what
Python/NumPy give (values, kinds, the tuple variables after the loop,
exceptions), the same as the register interpreter (TESSERA_NATIVE=0) and the
general evaluation (TESSERA_FAST_LOOPS=0), at 1 and 2 threads; the debug log
must show that the tuple loops were compiled (the tests cannot pass by never
running native code)."""

import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, check, run_script

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import rk4_oscillator  # noqa: E402 - bench/, on the path above


def fib_pair(n):
    p = (0, 1)
    for i in range(n):
        p = (p[1], p[0] + p[1])
    return p


def carried_argument(t, n):
    # A tuple given by the caller, carried and returned: the caller's tuple
    # is not changed (tuples are values), the result is the last one.
    for i in range(n):
        t = (t[-1], t[0] * 0.5 + i, len(t))
    return t


def unpack_points(xs, ys):
    best = (0.0, -1)
    total = 0.0
    for i in range(len(xs)):
        pt = (xs[i], ys[i])
        x, y = pt
        d = x * x + y * y
        total += d
        if d > best[0]:
            best = (d, i)
    return best, total


def int_helper(a):
    def qr(x, d):
        return x // d, x % d

    out = np.zeros((len(a), 2), dtype=np.int64)
    for i in range(len(a)):
        q, r = qr(a[i], 7)
        out[i, 0] = q
        out[i, 1] = r
    return out


def array_items(x, y, n):
    pair = (x, y)
    s = 0.0
    for i in range(n):
        s += pair[0][i] * pair[1][i]
        pair = (pair[1], pair[0])
    return s


def becomes_scalar(n):
    # A tuple when the loop starts, then a float: left to the other paths'
    # handling of `t` (an object, then a number), with the same answer.
    t = (1.0, 2.0)
    s = 0.0
    for i in range(n):
        if i > 0:
            s += t
        t = 1.5 * i
    return s, t


def used_whole(n):
    shape = (2, 3)
    s = 0.0
    for i in range(n):
        s += np.zeros(shape).size + i
    return s, shape


def indexed_by_variable(n):
    t = (1.5, 2.5, 3.5)
    s = 0.0
    for i in range(n):
        s += t[i % 3]
    return s


def nested(n):
    t = ((1.0, 2.0), 3.0)
    s = 0.0
    for i in range(n):
        s += t[0][1] * i + t[1]
    return s


def index_out_of_range(n):
    t = (1.0, 2.0)
    s = 0.0
    for i in range(n):
        s += t[2]
    return s


def unpack_mismatch(n):
    t = (1.0, 2.0)
    s = 0.0
    for i in range(n):
        a, b, c = t
        s += a
    return s


def late_index_error(x, n):
    p = (0.0, 0)
    for i in range(n):
        p = (p[0] + x[i], i)
    return p


def prange_pairs(x, y):
    # Each chunk's turns with their own item registers; the tuple after the
    # loop is the last turn's.
    out = np.empty(len(x))
    p = (0.0, 0.0)
    for i in tessera.prange(len(x)):
        p = (x[i], y[i])
        a, b = p
        out[i] = a * b + p[1]
    return out, p


def newton_helper(c, dc, starts, tol):
    # A helper returning tuples from early returns and at its end (inlined:
    # if(done, value, tail) of two tuples), its own helper's `r = 0.0` then
    # NumPy's float64.
    def poly(p, x):
        r = 0.0
        for k in range(len(p)):
            r = r * x + p[k]
        return r

    def newton(x0):
        x = x0
        for it in range(40):
            d = poly(dc, x)
            if d == 0.0:
                return x, -1
            step = poly(c, x) / d
            x -= step
            if abs(step) < tol:
                return x, it + 1
        return x, 40

    found = np.empty(len(starts))
    total = 0
    for k in range(len(starts)):
        x, it = newton(starts[k])
        found[k] = x
        total += it
    return found, total


def secant_helper(c, guesses, tol):
    # Secant steps returning (root, steps) from inside the loop, or a negative
    # count where the slope vanishes; the pair kept whole in `last` too.
    def f(x):
        acc = 0.0
        for k in range(len(c)):
            acc = acc * x + c[k]
        return acc

    def secant(x0, x1):
        f0 = f(x0)
        f1 = f(x1)
        steps = 0
        while abs(x1 - x0) > tol:
            if f1 == f0:
                return x1, -steps
            x0, x1 = x1, x1 - f1 * (x1 - x0) / (f1 - f0)
            f0 = f1
            f1 = f(x1)
            steps += 1
            if (f0 < 0.0) == (f1 < 0.0) and steps > 40:
                return x1, steps
        return x1, steps

    roots = np.empty(len(guesses))
    total = 0
    last = None
    for k in range(len(guesses)):
        last = secant(guesses[k], guesses[k] + 0.1)
        r, n = last
        roots[k] = r
        total += n
    return roots, total, last


def bool_compares(x, y):
    same = order = mixed = flags = 0
    last = False
    for i in range(len(x)):
        last = (x[i] < 0) == (y[i] < 0)
        if last:
            same += 1
        if (x[i] > 0) > (y[i] > 0):
            order += 1
        if (i % 3 == 0) != (x[i] > 0.5):
            mixed += 1
        flags += (i % 2 == 0) + (i < 5)
    return same, order, mixed, flags, last


def arity_changes(n):
    # Tuples of 2 and 3 items from one helper: the general path's.
    def f(i):
        if i % 2:
            return i, i
        return i, i, i

    s = 0
    for i in range(n):
        s += len(f(i))
    return s


CASES = [(rk4_oscillator, (1.0, 0.0, 2.0, 0.1, 0.01, 500)),
         (prange_pairs, (np.arange(20000.0), np.linspace(0.0, 1.0, 20000))),
         (fib_pair, (80,)),
         (carried_argument, ((1.0, 2.0, 3), 50)),
         (unpack_points, (np.linspace(-2, 3, 97), np.cos(np.arange(97.0)))),
         (int_helper, (np.arange(-60, 140, dtype=np.int64) * 37,)),
         (array_items, (np.arange(300.0), np.linspace(0, 1, 300), 300)),
         (becomes_scalar, (300,)),
         (used_whole, (100,)),
         (indexed_by_variable, (200,)),
         (nested, (200,)),
         (index_out_of_range, (10,)),
         (unpack_mismatch, (10,)),
         (late_index_error, (np.arange(100.0), 101)),
         (newton_helper, (np.array([1.0, 0.0, -7.0, 6.0]), np.array([3.0, 0.0, -7.0]),
                          np.linspace(-4, 4, 41), 1e-12)),
         (secant_helper, (np.array([1.0, 0.0, -7.0, 6.0]), np.array([-3.2, 1.1, 1.9, 0.0]), 1e-10)),
         (bool_compares, (np.linspace(-1, 1, 50), np.cos(np.arange(50.0)))),
         (arity_changes, (30,))]

# The loops that must run as native code (the others take the paths a tuple
# used whole takes, or raise).
NATIVE = ("rk4_oscillator", "prange_pairs", "fib_pair", "carried_argument", "unpack_points",
          "int_helper", "newton_helper", "secant_helper", "bool_compares")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_tuple_loops_agree_with_python(f, args, threads):
    check(f, *args)


def test_the_callers_tuple_is_unchanged_and_the_last_one_is_returned():
    t = (1.0, 2.0, 3)
    got = tessera.jit(carried_argument)(t, 7)
    assert t == (1.0, 2.0, 3)
    assert got == carried_argument(t, 7)
    assert type(got[2]) is int and type(got[1]) is float


@pytest.mark.parametrize("f", [newton_helper, secant_helper, bool_compares])
def test_the_kinds_of_numbers_returned_are_pythons(f):
    # np.float64 against float, np.bool_ against bool: as Python gives them.
    args = next(a for g, a in CASES if g is f)
    got, expected = tessera.jit(f)(*args), f(*args)

    def kinds(v):
        if isinstance(v, tuple):
            return tuple(kinds(x) for x in v)
        return type(v).__name__ if not isinstance(v, np.ndarray) else v.dtype.name

    assert kinds(got) == kinds(expected), (got, expected)


def test_a_run_across_native_checkpoints_matches_python():
    # 20,000 steps: past the native code's checkpoint every 16,384 turns, where
    # the tuple's item registers go back to the interpreter's state and on.
    g = tessera.jit(rk4_oscillator)
    ys = g(1.0, 0.0, 2.0, 0.1, 0.01, 20000)
    np.testing.assert_allclose(ys, rk4_oscillator(1.0, 0.0, 2.0, 0.1, 0.01, 20000), rtol=1e-12)


_SCRIPT = cases_script("test_fast_loop_tuples", "t.CASES")


def test_native_interpreter_and_general_print_the_same():
    native, log = run_script(_SCRIPT, TESSERA_FAST_LOOPS="debug")
    interp, _ = run_script(_SCRIPT, TESSERA_NATIVE="0")
    general, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert native == interp
    assert native == general
    assert "IndexError" in native and "ValueError" in native
    compiled = {tuple(line.split(": ")[0].split()[-1].split(":")) for line in log.splitlines()
                if "native code compiled" in line or "native code loaded" in line}
    for f, _ in CASES:
        if f.__name__ not in NATIVE:
            continue
        where = os.path.basename(f.__code__.co_filename)
        start = f.__code__.co_firstlineno
        assert any(w == where and start <= int(n) < start + 25 for w, n in compiled), (f, log)
    assert "is outside the subset" not in "".join(
        l for l in log.splitlines() if "'tuple'" in l), log
