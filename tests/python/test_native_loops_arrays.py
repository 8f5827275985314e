"""Native code for loops that make arrays (a new array each turn, rebound,
released at the next turn) and loops that call other functions (compiled
inline, writing the caller's arrays), with the tests that are theirs alone: the
callee's errors and lines, a turn stopped inside keeping the turns before, the
memory of arrays made each turn. test_native_loops_agree.py runs every loop
here against Python/NumPy, the register interpreter and the general evaluation
at 1 and 2 threads."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from native_loops_common import debug_run

import tessera


# Calls of other functions inside loops (compiled inline: their operations in
# the loop's code, their locals in registers of their own).
def _sq(v):
    return v * v


def _clip(v, hi):
    w = v
    if w > hi:
        w = hi
    return w + 0.5 * _sq(w)


def _row_dot(a, b, i):
    s = 0.0
    for j in range(a.shape[1]):
        s += a[i, j] * b[j]
    return s


def _bump(out, i, v):
    out[i] += v
    out[i + 1] -= 0.5 * v


def _shifted(x, i):
    return x[i + 1] - x[i]


def helper_scalars(x):
    s = 0.0
    for i in range(len(x)):
        s += _sq(x[i]) - _clip(x[i], 1.5)
    return s


def helper_arrays(a, b, out):
    for i in range(a.shape[0] - 1):
        _bump(out, i, _row_dot(a, b, i))
    return out


def helper_index_error(x, n):
    d = 0.0
    for i in range(n):
        d += _shifted(x, i)
        x[i] = d
    return d


def helper_int_kinds(a):
    t = 0
    for i in range(len(a)):
        t += _sq(a[i]) + _sq(i)
    return t


def _log_density(x):
    return -0.5 * x * x


def metropolis(n, step):
    chain = np.empty(n)
    x = 0.0
    for i in range(n):
        proposal = x + step * (2.0 * np.random.random() - 1.0)
        if np.log(np.random.random()) < _log_density(proposal) - _log_density(x):
            x = proposal
        chain[i] = x
    return chain


def _neg(v):
    return -v


def helper_rebound(x):
    # The inner loop is compiled with the function `h` holds at its first
    # run; when `h` holds another, it goes the general way.
    s = 0.0
    for k in range(3):
        if k == 1:
            h = _neg
        else:
            h = _sq
        for i in range(len(x)):
            s += h(x[i])
    return s


def _maybe_unset(v):
    if v > 0:
        w = 1.0
    return w


def helper_unset_local(x):
    # _maybe_unset reads w unassigned when v <= 0: the general path's error,
    # not the value an earlier call left (the function is not inlined).
    s = 0.0
    for i in range(len(x)):
        s += _maybe_unset(x[i])
    return s


def gather_then_fail(x, idx, n):
    # x[idx[i]] is checked in the turn (not provable before the loop): the
    # turn past the end stops the native code after turns that wrote x.
    d = 0.0
    for i in range(n):
        d += x[idx[i]] - x[i]
        x[i] = d
    return d


def sqrt_nest(X, out):
    # out is only written: when np.sqrt meets a negative (the general path's
    # NaN and warning), the turns redone write the same values into it, so
    # it is not copied before the nest, unless its memory is X's.
    n = X.shape[0]
    for i in range(n):
        for j in range(n):
            out[i, j] = np.sqrt(X[i, 0] - X[j, 1])
    return out


def draws_then_fail(x, idx, n):
    # Draws in turns stopped by the check of x[i] before the loop
    # (kNativeBailCall) or of x[idx[i]] in the turn (kNativeBail): the
    # general evaluation redraws the same numbers.
    s = 0.0
    for i in range(n):
        s += np.random.random() + x[i] * x[idx[i]]
    return s, np.random.random()


def wave(u, u_prev, c2, steps):
    # A new array each turn (np.zeros), the registers rebound (u = u_next).
    n = len(u)
    for t in range(steps):
        u_next = np.zeros(n)
        for i in range(1, n - 1):
            u_next[i] = 2.0 * u[i] - u_prev[i] + c2 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u_prev = u
        u = u_next
    return u, u_prev


def ping_pong(a, b, steps, bad):
    # The caller's two arrays written in turn and swapped (a, b = b, a); at
    # t == bad an index out of range: the writes of the turns before stay.
    n = len(a)
    for t in range(steps):
        for i in range(1, n - 1):
            b[i] = 0.5 * (a[i - 1] + a[i + 1]) + t
        b[(t // bad) * n] += 1.0
        a, b = b, a
    return a[0], b[0]


def copies(x, steps):
    # 2-d int64 arrays made each turn: copies and *_like, one rebound.
    acc = np.zeros_like(x)
    for t in range(steps):
        y = x.copy()
        z = np.ones_like(x)
        w = np.empty_like(x)
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                w[i, j] = y[i, j] * z[i, j] + t
                y[i, j] = 0
                acc[i, j] += w[i, j] - y[i, j]
        x = np.copy(w)
    return acc, x


def made_then_fail(u, steps):
    # Arrays made and rebound each turn, the caller's `keep` written each
    # turn until keep[t] is out of range (t == len(keep)).
    n = len(u)
    keep = u
    for t in range(steps):
        nxt = np.empty(n)
        for i in range(n):
            nxt[i] = u[i] * 0.5 + t
        u = nxt
        keep[t] = u[0]
    return u


def small_copies(x, idx):
    # A loop without loops inside making an array each turn (a copy), the
    # caller's x written each turn, an index out of range at the last.
    s = 0.0
    for t in range(len(idx)):
        y = x.copy()
        j = idx[t]
        y[j] = -1.0
        x[t % 3] += 1.0
        s += y[0] + y[1]
    return s


def swap_rows(a, b, steps):
    # A loop without loops inside (native code from its second turn, the
    # swap's temporaries holding arrays then) swapping the caller's arrays.
    n = len(a)
    for t in range(steps):
        b[t % n] = a[(t + 1) % n] * 2.0 + t
        a, b = b, a
    return a, b


def life_loop(grid, steps):
    # bench_numpy_kernels.py's: a new grid each turn, np.zeros((n, m), dtype=...).
    n = grid.shape[0]
    m = grid.shape[1]
    for t in range(steps):
        new = np.zeros((n, m), dtype=np.int64)
        for i in range(n):
            for j in range(m):
                alive = 0
                for di in range(-1, 2):
                    for dj in range(-1, 2):
                        if di != 0 or dj != 0:
                            alive += grid[(i + di) % n, (j + dj) % m]
                if alive == 3 or (alive == 2 and grid[i, j] == 1):
                    new[i, j] = 1
        grid = new
    return grid


def shaped(n, m, steps):
    # Arrays of tuple and list shapes and dtypes made each turn.
    acc = np.zeros((n, m))
    last = np.ones((1, 1), np.float32)  # the types the loop assigns them
    e = np.zeros(1, dtype=np.int32)
    for t in range(steps):
        g = np.zeros((n, m), dtype=np.int64)
        o = np.ones([n, m], np.float32)
        e = np.empty((n,), dtype=np.int32)
        for i in range(n):
            e[i] = i * t - 3
            for j in range(m):
                g[i, j] = i * m + j + t
                o[i, j] = g[i, j] * 0.1
                acc[i, j] += g[i, j]
        last = o
    return acc, last, e


def cond_alloc(x, steps):
    # A new array on some turns only (an `if`): the register holds the
    # caller's copy, then arrays made in the call.
    buf = x.copy()
    for t in range(steps):
        if t % 3 == 0:
            buf = np.zeros(len(x))
        for i in range(len(x)):
            buf[i] += x[i] * t
    return buf


def inner_alloc(x, steps):
    # Arrays made in an inner loop (released at the outer turns' starts).
    s = 0.0
    for t in range(steps):
        for k in range(3):
            y = np.ones(len(x))
            for i in range(len(x)):
                y[i] = y[i] + x[i] * k
            s += y[t % len(x)]
    return s


def alias_alloc(x, steps):
    # `a` is the caller's x on the first turn (its writes logged), a copy
    # made in the call after.
    a = x
    for t in range(steps):
        b = a.copy()
        for i in range(1, len(a)):
            b[i] = a[i - 1] + b[i]
        a = b
        x[t % len(x)] = 0.0 - t
    return a


def like_2d(m, steps):
    out = np.zeros_like(m)
    for t in range(steps):
        nxt = np.empty_like(m)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                nxt[i, j] = out[i, j] + m[i, j] * t
        out = nxt
    return out


def bad_shape(n, steps):
    # np.zeros of a negative extent at turn n + 1: the general path's
    # ValueError, after the turns before.
    s = 0.0
    for t in range(steps):
        a = np.zeros(n - t)
        for i in range(len(a)):
            a[i] = i
            s += a[i]
    return s


def test_helper_calls_compiled_natively_with_the_callees_errors():
    """Loops calling other functions run as native code (the debug log says
    so for their lines), give the general path's values and random stream,
    and an index past the end inside the function called is an IndexError
    naming the function's line, with the caller's array written up to it."""
    code = ("import sys, numpy as np, tessera\n"
            f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
            "import test_native_loops_arrays as t\n"
            "print(repr(tessera.jit(t.helper_scalars)(np.linspace(-3.0, 3.0, 200))))\n"
            "print(repr(tessera.jit(t.metropolis)(2000, 0.8).tolist()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, TESSERA_FAST_LOOPS="debug"))
    assert r.returncode == 0, r.stderr
    loops = {helper_scalars: helper_scalars.__code__.co_firstlineno + 2,
             metropolis: metropolis.__code__.co_firstlineno + 3}
    for f, at in loops.items():
        assert any(f"test_native_loops_arrays.py:{at}: native code compiled" in line
                   or f"test_native_loops_arrays.py:{at}: native code loaded" in line
                   for line in r.stderr.splitlines()), (f.__name__, r.stderr)
    general = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=600, env=dict(os.environ, TESSERA_FAST_LOOPS="0"))
    assert general.returncode == 0, general.stderr
    assert r.stdout == general.stdout
    x = np.arange(50.0) ** 2
    with pytest.raises(IndexError) as e:
        tessera.jit(helper_index_error)(x, 50)
    assert f"test_native_loops_arrays.py:{_shifted.__code__.co_firstlineno + 1}" in str(e.value)
    d = np.cumsum(np.diff(np.arange(50.0) ** 2))
    assert np.array_equal(x[:49], d)
    assert x[49] == 49.0 ** 2



def test_a_turn_stopped_inside_keeps_the_turns_before():
    """A native turn that stops on a checked index (kNativeBail) leaves the
    arrays as the turns before it wrote them, and the general evaluation
    goes on from that turn, not from the call's start (it used to redo
    those turns on the written array)."""
    x = np.arange(50.0) ** 2
    with pytest.raises(IndexError) as e:
        tessera.jit(gather_then_fail)(x, np.arange(1, 51), 50)
    line = gather_then_fail.__code__.co_firstlineno + 5
    assert f"test_native_loops_arrays.py:{line}" in str(e.value)
    want = np.arange(50.0) ** 2
    with pytest.raises(IndexError):
        gather_then_fail(want, np.arange(1, 51), 50)
    assert np.array_equal(x, want)


def test_an_only_written_array_shared_with_a_read_one_is_undone():
    """The nest writes `out`, which is X itself: its memory is read, so its
    old values are kept before the nest and a bail (np.sqrt of a negative)
    redoes the turns from them, as Python reads what earlier turns wrote."""
    for native in ("1", "0"):
        code = ("import json, sys, numpy as np, tessera, warnings\n"
                "warnings.simplefilter('ignore')\n"
                f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
                "import test_native_loops_arrays as t\n"
                "X = np.linspace(3.0, 1.0, 900).reshape(30, 30)\n"
                "print(json.dumps(tessera.jit(t.sqrt_nest)(X, X).tolist()))\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=600, env=dict(os.environ, TESSERA_NATIVE=native,
                                                 TESSERA_FAST_LOOPS="debug"))
        assert r.returncode == 0, r.stderr
        X = np.linspace(3.0, 1.0, 900).reshape(30, 30)
        with np.errstate(invalid="ignore"):
            want = sqrt_nest(X, X)
        got = np.array(json.loads(r.stdout))
        np.testing.assert_array_equal(got, want)
        if native == "1":
            assert "native code returned 4" in r.stderr, r.stderr


def test_helper_reading_an_unassigned_local_raises():
    with pytest.raises(ValueError) as e:
        tessera.jit(helper_unset_local)(np.array([1.0, -1.0, 2.0] * 30))
    assert f"test_native_loops_arrays.py:{_maybe_unset.__code__.co_firstlineno + 3}" in str(e.value)
    assert tessera.jit(helper_unset_local)(np.ones(90)) == 90.0



def churn(n, steps):
    # 8 KB made per turn, the array before released by the sweep at the
    # next turn's start: 0.8 GB made in 100,000 turns, little held at once.
    u = np.zeros(n)
    for s in range(steps):
        v = np.zeros(n)
        for i in range(n):
            v[i] = u[i] + 1.0
        u = v
    return u


_ALLOC_SCRIPT = """
import resource, sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_loops_arrays as t
f = tessera.jit(t.churn, threads={threads})
f(1000, 10)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
u = f(1000, 100_000)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(float(u[0]), float(u[-1]), u.shape[0], grown)
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_arrays_made_in_native_loops_are_released_each_turn(threads):
    # Stays native (no bail: 100,000 turns of 8 KB held would pass the
    # loop's 64 MB of arrays), and the peak memory grows far less than 0.8 GB.
    here = os.path.dirname(os.path.abspath(__file__))
    out, err = debug_run(_ALLOC_SCRIPT.format(here=here, threads=threads),
                          TESSERA_FAST_LOOPS="debug", TESSERA_NATIVE="1")
    first, last, n, grown_kb = out.split()
    assert (first, last, n) == ("100000.0", "100000.0", "1000"), out
    assert int(grown_kb) < 64 * 1024, out
    assert "native code compiled" in err or "native code loaded" in err, err
    assert "rolled back" not in err and "returned 2" not in err and "returned 4" not in err, err
