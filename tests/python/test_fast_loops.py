"""Scalar loops on registers (tessera/lang/fastloop.cpp): loops of scalar code
give what NumPy/Python give -- values, result types (Python numbers stay
Python numbers, array elements stay NumPy scalars), the arrays they write --
also when a turn meets something the fast path leaves to the general
evaluation (an error, a list, another dtype): the turn is rolled back and
redone there, so errors and partial writes are as in Python. Each function is
checked against plain Python/NumPy (jit_check.check), and the same programs run
with TESSERA_FAST_LOOPS=0 in a subprocess must print the same."""

import os
import subprocess
import sys

import numpy as np
import pytest
from jit_check import check

import tessera


def prefix(x):
    out = np.empty_like(x)
    total = 0  # int first, float after the first element: as Python
    for i in range(len(x)):
        total += x[i]
        out[i] = total
    return out, total


def mixed_kinds(n):
    s = 0
    f = 0.5
    k = 0
    while k < n:
        if k % 3 == 0:
            s = s + k
        elif k % 3 == 1:
            s = s * 1.5
        else:
            f = f / 2 + s
        k += 1
    return s, f, k


def breaks_and_continues(x):
    count = 0
    total = 0.0
    for i in range(len(x)):
        if x[i] < 0:
            continue
        if x[i] > 3:
            break
        count += 1
        total += x[i]
    return count, total


def nested(n, m):
    grid = np.zeros((n, m), dtype=np.int64)
    for i in range(n):
        j = 0
        while j < m:
            grid[i, j] = i * m + j if (i + j) % 2 == 0 else -(i + j)
            j += 1
    return grid


def strong_scalars(x):
    acc = x[0]  # a NumPy float64 scalar
    best = 0
    for i in range(1, len(x)):
        v = x[i]
        if v > acc:
            acc = v
            best = i
    return acc, best, acc * 2, int(acc)


def int_elements(a):
    out = np.zeros(len(a), dtype=np.int64)
    for i in range(len(a)):
        k = a[i]
        steps = 0
        while k != 1 and steps < 50:
            k = k // 2 if k % 2 == 0 else 3 * k + 1
            steps += 1
        out[i] = steps
    return out


def writes_other_dtypes(x, y):
    for i in range(len(x)):
        x[i] = y[i] * 3      # float into int8: truncated then wrapped, as NumPy casts
        y[i] = y[i] - 0.25   # float32 element
    return x, y


def negative_indices(x):
    n = len(x)
    for i in range(1, n):
        x[-i] = x[-i - 1] + x[-i]
    return x


def logical_ops(x):
    c = 0
    for i in range(len(x)):
        if (x[i] > 0 and x[i] < 2) or not x[i] != 5:
            c += 1
    return c


def index_error_after_writes(x):
    for i in range(len(x) + 2):
        x[i % len(x)] = i      # written before the failing read, kept as in Python
        x[i] = x[i] + 1        # i == len(x): IndexError
    return x


def lists_in_the_loop(n):
    out = []
    for i in range(n):
        out.append(i * i)
    return out


def deep_turn_then_error(x, d):
    total = 0.0
    for i in range(len(x)):
        total += x[i] / d[i]   # d[3] == 0.0: inf, as NumPy (no error)
    return total


def random_draws(n, fail_at):
    # Scalar draws in a fast loop come from the same stream as the general
    # path's, also when a roll-back (an IndexError at `fail_at`) makes the
    # general path draw the last turns again.
    np.random.seed(5)
    out = np.zeros(n)
    inside = 0
    for i in range(n):
        x = np.random.random()
        y = np.random.random()
        out[i] = x
        if x * x + y * y <= 1.0:
            inside += 1
        if i == fail_at:
            out[n + 1] = 0.0
    return out, inside


def array_writes_then_error(v, x):
    # Whole-array and slice writes in a fast loop are snapshotted: the error
    # at i == 5 rolls them back and the general path redoes them, so the
    # arrays end as Python leaves them.
    for i in range(10):
        v -= x
        v[1:3] = v[1:3] * 2
        x[i % 4] += 0.5
        if i == 5:
            x[10] = 1.0
    return v


def array_ops_in_a_loop(a, n):
    total = np.zeros(a.shape[1])
    rows = []
    for i in range(n):
        row = a[i % a.shape[0]]
        total = total + row * i
        rows.append(float(row.sum()))
    return total, rows


def division_by_powers_of_two(a):
    # k // 2**m and k % 2**m (m known or not when the loop is compiled) are
    # computed without a division on the fast path: the floor and the
    # remainder of the divisor's sign also for negative k, as Python's ints
    # and NumPy's int64 elements give them.
    n = len(a)
    out = np.zeros((n, 10), dtype=np.int64)
    for i in range(n):
        k = i - n // 2
        d = 2 ** (i % 4)
        out[i, 0] = k // 2
        out[i, 1] = k % 2
        out[i, 2] = k // 8
        out[i, 3] = k % 8
        out[i, 4] = k // d
        out[i, 5] = k % d
        out[i, 6] = a[i] // 4
        out[i, 7] = a[i] % 4
        out[i, 8] = a[i] // -d
        out[i, 9] = a[i] % -d
    return out


def int_and_float_pairs(a, x):
    # An int and a float in one operation, either way round, Python's or
    # NumPy's: a float (NumPy's when either is), compared as floats.
    s = 0.0
    c = d = False
    p = q = r = f = g = 0.0
    for i in range(len(a)):
        p = a[i] * 0.5
        q = i * 1.5
        r = x[i] - i
        c = i < x[i]
        d = a[i] >= 2.5
        f = i // 0.75
        g = a[i] % 2.5
        s = s + p + q + r + f + g
    return s, p, q, r, c, d, f, g


CASES = [
    (prefix, (np.arange(1.0, 9.0),)),
    (prefix, (np.arange(5, dtype=np.int64),)),
    (mixed_kinds, (20,)),
    (breaks_and_continues, (np.array([1.0, -2.0, 2.5, 0.5, 7.0, 1.0]),)),
    (nested, (4, 5)),
    (strong_scalars, (np.array([0.5, 2.5, 1.0, 3.25, -1.0]),)),
    (int_elements, (np.array([1, 2, 3, 7, 27], dtype=np.int64),)),
    (writes_other_dtypes, (np.zeros(4, dtype=np.int8), np.array([10.2, 20.5, -3.7, 40.0], np.float32))),
    (negative_indices, (np.arange(6.0),)),
    (logical_ops, (np.array([0.5, 1.5, 5.0, -1.0, 2.0]),)),
    (index_error_after_writes, (np.zeros(4),)),
    (lists_in_the_loop, (5,)),
    (deep_turn_then_error, (np.ones(5), np.array([1.0, 2.0, 4.0, 0.0, 1.0]))),
    (array_writes_then_error, (np.arange(6.0), np.linspace(1.0, 2.0, 6))),
    (array_ops_in_a_loop, (np.arange(12.0).reshape(3, 4), 7)),
    (int_and_float_pairs, (np.array([3, -4, 7, 2], dtype=np.int64), np.array([0.5, 2.0, -1.5, 3.0]))),
    (division_by_powers_of_two,
     (np.concatenate([[5, -2**63, 2**63 - 1], np.arange(-20, 20, dtype=np.int64) * 7 + 3]),)),
]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_loops_agree_with_python(f, args):
    check(f, *args)


def test_fast_path_on_and_off_print_the_same():
    code = (
        "import sys, numpy as np, tessera\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import test_fast_loops as t\n"
        "for f, args in t.CASES:\n"
        "    import copy\n"
        "    a = copy.deepcopy(args)\n"
        "    try:\n"
        "        r = tessera.jit(f)(*a)\n"
        "        print(f.__name__, repr(r), repr(a))\n"
        "    except Exception as e:\n"
        "        print(f.__name__, type(e).__name__, str(e), repr(a))\n"
        "for fail_at in (-1, 90):\n"
        "    try:\n"
        "        print(repr(tessera.jit(t.random_draws)(100, fail_at)))\n"
        "    except IndexError as e:\n"
        "        print('IndexError', e)\n"
        "    print(repr(tessera.jit(t.random_draws)(100, -1)))\n"
        "g = tessera.jit(t.prefix)\n"
        "g(np.arange(3.0))\n"
        "print([l for l in g.counters().splitlines() if 'getitem' in l or 'setitem' in l])\n"
    )
    outs = []
    for flag in ("1", "0"):
        env = dict(os.environ, TESSERA_FAST_LOOPS=flag)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    fast, general = outs
    # The counters' times differ; evaluations must not.
    strip = lambda s: [",".join(p.split(",")[:3]) for p in s.replace("'", "").split()]  # noqa: E731
    assert strip(fast) == strip(general)
    assert "IndexError" in fast


# ---- arrays the loop lets go of are released between turns (State::arrays)


def add_loop(x, y, n):
    for _ in range(n):
        x = x + y
    return x


def nested_add_loop(x, y, n, m):
    for _ in range(n):
        for _ in range(m):
            x = x + y
    return x


def fresh_arrays_then_overflow(x, y, out, big, n):
    # Each turn makes arrays (the older ones released by the sweeps), writes
    # elements into them and into `out`, and keeps one of every ten; turn 100
    # overflows an int64 (past the checkpoint at 64 turns): the fast path
    # rolls back to its checkpoint and the general path redoes the turns
    # since, so the arrays written and `out` end as NumPy leaves them.
    keep = x
    w = big[0]
    for t in range(n):
        z = x * 0.5 + y
        z[t % 4] = t
        out[t % 7] += z[t % 4] + z[5]
        if t % 10 == 0:
            keep = z
        if t == 100:
            w = big[0] + big[0]
        x = z
    return x, keep, w


def _peak_bytes_of(f, *args):
    tessera.reset_peak_memory()
    base = tessera.memory_stats()["live_bytes"]
    got = f(*args)
    return got, tessera.memory_stats()["peak_live_bytes"] - base


def test_a_long_loop_holds_a_few_arrays():
    # 20,000 results of 8 KB: before, the fast path kept every one until the
    # loop ended (160 MB); now each is released a turn after its register
    # was overwritten, so the peak is a few arrays.
    x = np.random.default_rng(3).random(1000) + 0.5
    y = np.full(1000, 1e-6)
    f = tessera.jit(add_loop)
    f(x, y, 10)  # compiled, warm
    got, peak = _peak_bytes_of(f, x, y, 20000)
    np.testing.assert_allclose(np.asarray(got), add_loop(x, y, 20000), rtol=1e-12)
    assert peak <= 16 * x.nbytes, f"peak {peak} bytes for 8,000-byte arrays"

    g = tessera.jit(nested_add_loop)
    g(x, y, 2, 2)
    got, peak = _peak_bytes_of(g, x, y, 20, 1000)
    np.testing.assert_allclose(np.asarray(got), nested_add_loop(x, y, 20, 1000), rtol=1e-12)
    assert peak <= 16 * x.nbytes, f"peak {peak} bytes in an inner loop"


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_released_arrays_and_a_roll_back():
    x = np.linspace(0.0, 1.0, 8)
    y = np.full(8, 0.25)
    big = np.array([2**62 + 5], dtype=np.int64)
    check(fresh_arrays_then_overflow, x, y, np.zeros(7), big, 150)
    check(fresh_arrays_then_overflow, x, y, np.zeros(7), big, 60)
