"""Native code for scalar loops (tessera/lang/native.cpp, docs/runtime.md
"Native loops"): loops the generator compiles give what Python/NumPy give
(values, result kinds, arrays written in place, exceptions and their
positions, wrap-around, NaN and infinity), and exactly what the register
interpreter gives (TESSERA_NATIVE=0) and the general evaluation gives
(TESSERA_FAST_LOOPS=0): the same printed results and node counters, at 1
and 2 threads. TESSERA_FAST_LOOPS=debug must say that these loops were
compiled, so the tests cannot pass by never running native code."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from jit_check import check, run_script

import tessera


def sum_squares(x, n):
    s = 0.0
    k = 0
    while k < n:
        s += x[k] * x[k]
        k += 1
    return s, k


def mandelbrot(xmin, xmax, ymin, ymax, width, height, max_iter):
    counts = np.zeros((height, width), dtype=np.int64)
    for j in range(height):
        for i in range(width):
            cr = xmin + i * (xmax - xmin) / width
            ci = ymin + j * (ymax - ymin) / height
            zr = 0.0
            zi = 0.0
            n = 0
            while n < max_iter and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            counts[j, i] = n
    return counts


def collatz(n):
    lengths = np.zeros(n, dtype=np.int64)
    for start in range(1, n):
        k = start
        steps = 0
        while k != 1:
            if k % 2 == 0:
                k = k // 2
            else:
                k = 3 * k + 1
            steps += 1
        lengths[start] = steps
    return lengths


def int_arith(a):
    # Python's floor division and modulo of negative numbers, NumPy's int64
    # elements (strong) mixed with Python ints, comparisons.
    out = np.zeros((len(a), 6), dtype=np.int64)
    for i in range(len(a)):
        v = a[i]
        w = i - 3
        out[i, 0] = v // 7
        out[i, 1] = v % 7
        out[i, 2] = v // -3
        out[i, 3] = v % -3
        out[i, 4] = w * v
        out[i, 5] = (v > w) + (v == w)
    return out


def float_arith(x):
    out = np.zeros((len(x), 7))
    for i in range(len(x)):
        v = x[i]
        out[i, 0] = v // 0.75
        out[i, 1] = v % 0.75
        out[i, 2] = v / 3
        out[i, 3] = np.sqrt(abs(v))
        out[i, 4] = np.exp(-v * v)
        out[i, 5] = np.floor(v) + np.cos(v) * np.sin(v)
        out[i, 6] = math.log(1.0 + v * v)
    return out


def nan_and_inf(x):
    out = np.zeros(len(x))
    flags = np.zeros(len(x), dtype=np.bool_)
    for i in range(len(x)):
        v = x[i] * 2.0
        flags[i] = v != v or v > 1e308
        out[i] = v / (x[i] - x[i] + 1.0)
    return out, flags


def narrow_writes(x):
    f32 = np.zeros(len(x), dtype=np.float32)
    i32 = np.zeros(len(x), dtype=np.int32)
    u8 = np.zeros(len(x), dtype=np.uint8)
    b = np.zeros(len(x), dtype=np.bool_)
    for i in range(len(x)):
        f32[i] = x[i] * 1.1
        i32[i] = x[i] * 1000.5
        u8[i] = i * 37
        b[i] = x[i]
    return f32, i32, u8, b


def strided(a):
    # A transposed view: reads and writes through strides.
    t = a.T
    s = 0.0
    for i in range(t.shape[0]):
        for j in range(t.shape[1]):
            s += t[i, j] * (i + 1)
            t[i, j] = s
    return a, s


def breaks(x, limit):
    count = 0
    total = 0.0
    for i in range(len(x)):
        if x[i] < 0:
            continue
        if total > limit:
            break
        count += 1
        total += x[i]
    return count, total


def index_error_late(x, n):
    for i in range(n):
        x[i] = i * 2.0  # the write at i == len(x) fails: x keeps the others
    return x


def zero_division_late(a):
    s = 0
    for i in range(len(a)):
        s += 100 // a[i]
    return s


def int_overflow(n):
    k = 1
    for i in range(n):
        k = k * 3  # a Python int past 2**63: Python goes on; tessera's general path reports
    return k


def wraps(a):
    # NumPy int64 elements wrap... in NumPy; the general path decides.
    s = a[0]
    for i in range(1, len(a)):
        s = s + a[i]
    return s


def lcs_wrap(a, b, L):
    # NumPy's int64 `L[i - 1, j - 1] + 1` wraps around (L's first row starts
    # near int64's end): compiled without an overflow check, as a select.
    n = len(a)
    m = len(b)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if a[i - 1] == b[j - 1]:
                L[i, j] = L[i - 1, j - 1] + 1
            else:
                L[i, j] = max(L[i - 1, j], L[i, j - 1])
    return L[n, m]


def wraps_from_python_int(a, k):
    # s is Python's 0, then NumPy's int64 (s + a[i]): its sums wrap; k * 3 is
    # NumPy's int64 too (a[i] * 3) and wraps; a Python int never is here.
    s = 0
    t = a[0]
    for i in range(len(a)):
        s = s + a[i]
        t = t * k - a[i]
    return s, t


def row_norms(a, lengths):
    # s is a Python float at each row's start and a NumPy float after its
    # first element (Python's and NumPy's kinds by turns); a row of length 0
    # leaves it a Python float, which the result must show.
    out = np.zeros(a.shape[0])
    last = 0.0
    for i in range(len(lengths)):
        s = 0.0
        for j in range(lengths[i]):
            s += a[i, j] * a[i, j]
        out[i] = np.sqrt(s)
        last = s
    return out, last


def int_kinds(a):
    k = 0
    resets = 0
    for i in range(len(a)):
        if k > 50:
            k = 0  # a Python int again
            resets += 1
        else:
            k = k + a[i]  # NumPy's int64
    return k, resets


def conv2d(img, k):
    # k.shape[d] and len(k) read inside the loops
    out = np.zeros((img.shape[0] - k.shape[0] + 1, img.shape[1] - k.shape[1] + 1))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            s = 0.0
            for a in range(len(k)):
                for b in range(k.shape[-1]):
                    s += img[i + a, j + b] * k[a, b]
            out[i, j] = s
    return out


def write_then_fail(x, y):
    # The last turn writes x[i], then reads y out of range: the error comes
    # after that write, which stays (as in Python).
    for i in range(len(x)):
        x[i] = i + 0.5
        x[i] += y[i + 1]
    return x


def wrap_left(x):
    # x[i - 1] is x[-1] at i == 0: the range check before the loop fails and
    # the checked version (Python's negative indices) runs.
    out = np.zeros(len(x))
    for i in range(len(x)):
        out[i] = x[i - 1] + 2.0 * x[i]
    return out


def stencil_rows(a):
    # Nested range loops: the inner one's accesses checked before it (i, j
    # and the loop-invariant offsets), its writes logged before it.
    out = np.zeros((a.shape[0] - 2, a.shape[1] - 2))
    for i in range(1, a.shape[0] - 1):
        for j in range(1, a.shape[1] - 1):
            out[i - 1, j - 1] = a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1] - 4 * a[i, j]
    return out


def backwards(d, c):
    # range(n - 2, -1, -1): the counter going down.
    x = np.zeros(len(d))
    x[-1] = d[-1]
    for i in range(len(d) - 2, -1, -1):
        x[i] = d[i] - c[i] * x[i + 1]
    return x


def diagonal(a):
    s = 0.0
    for i in range(a.shape[0]):
        a[i, i] = a[i, i] + 1.0
        s += a[i, a.shape[1] - 1 - i]
    return a, s


def rows_then_fail(a, b):
    # The inner loop writes a row (logged before it); after it, b[i + 1]
    # is out of range on the last row: the error comes after that row's
    # writes, which stay, as in Python.
    m = a.shape[1]
    for i in range(a.shape[0]):
        for j in range(m):
            a[i, j] = i * 10.0 + j
        a[i, 0] += b[i + 1]
    return a


def scatter_fail(idx):
    # A proven write, then one whose index is data: it fails at idx == 50,
    # with out[0..k] written before (kept in registers for a bail).
    out = np.zeros(len(idx))
    counts = np.zeros(8, dtype=np.int64)
    for i in range(len(idx)):
        out[i] = i + 1.0
        k = idx[i]
        counts[k] = counts[k] + 1
    return out, counts


def loop_var_reassigned(x):
    # i changed in the body: its accesses keep their checks.
    s = 0.0
    for i in range(len(x) - 3):
        s += x[i]
        i = i + 3
        s += x[i] * 0.5
    return s


def int_writes_then_zero(a, out):
    # A write, then a division by zero in the same turn of a range loop.
    s = 0
    for i in range(len(a)):
        out[i] = i
        s += 100 // a[i]
    return s


def pow2_arith(a):
    # Floor division and modulo by powers of two (a shift and a mask in the
    # native code) on negative and positive ints, Python's and NumPy's.
    out = np.zeros((len(a), 5), dtype=np.int64)
    for i in range(len(a)):
        v = a[i]
        w = i - 20
        out[i, 0] = v // 8
        out[i, 1] = v % 8
        out[i, 2] = w // 2
        out[i, 3] = w % 2
        out[i, 4] = (w * 12345) % 1024 + v % 1
    return out


def copy_then_fail(x, idx):
    # Each turn: an element write (logged), a range loop over all of x
    # (x copied whole, after that write), then x[idx[t]], out of range at
    # the last turn: undone newest first, the error comes at that turn.
    n = len(x)  # (len() inside an erring loop is counted once more on the interpreter)
    for t in range(len(idx)):
        x[idx[t] % n] = -1.0 - t
        for i in range(n):
            x[i] = x[i] * 0.5 + t
        x[0] += x[idx[t]]
    return x


def powers(x, k):
    # ** of floats (std::pow, as the interpreter), of ints by a constant
    # (squarings checked for overflow), NumPy's and Python's kinds.
    out = np.zeros((len(x), 5))
    ints = np.zeros((len(x), 3), dtype=np.int64)
    for i in range(len(x)):
        v = x[i]
        out[i, 0] = v ** 2
        out[i, 1] = v ** 0.5 if v >= 0 else v ** 3
        out[i, 2] = 1.5 ** (i - 20)
        out[i, 3] = (i * 0.25) ** v
        out[i, 4] = v ** -1 if v != 0 else 0.0
        ints[i, 0] = k[i] ** 2
        ints[i, 1] = (i - 20) ** 3 + k[i] ** 0
        ints[i, 2] = k[i] ** 5
    return out, ints


def big_range(n, x):
    # More turns than a chunk (65536): Ctrl-C checks between chunks.
    s = 0.0
    for i in range(n):
        s += x[i % 7] * i
    return s


def pairwise(X):
    # A loop nest: every access checked once before the outer loop.
    n = X.shape[0]
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            s = 0.0
            for k in range(X.shape[1]):
                t = X[i, k] - X[j, k]
                s += t * t
            out[i, j] = np.sqrt(s)
    return out


def edit_distance(a, b):
    n = len(a)
    m = len(b)
    D = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(n + 1):
        D[i, 0] = i
    for j in range(m + 1):
        D[0, j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            best = D[i - 1, j] + 1
            if D[i, j - 1] + 1 < best:
                best = D[i, j - 1] + 1
            if D[i - 1, j - 1] + cost < best:
                best = D[i - 1, j - 1] + cost
            D[i, j] = best
    return D[n, m], D


def triangle(x, out):
    # Inner bounds that depend on the outer index, a backwards inner loop.
    n = len(x)
    for i in range(n):
        for j in range(i + 1, n):
            out[i, j] = x[j] - x[i]
        for j in range(i, -1, -1):
            out[j, i] += 1.0
    return out


def nest_index_error(x, m):
    # x[i, j] past the end when m > x.shape[1]: the check before the nest
    # fails, the elements before the bad one are written (and stay), then
    # the IndexError.
    for i in range(x.shape[0]):
        for j in range(m):
            v = i * 10 + j  # (not fused into the write: the same counters on every path)
            x[i, j] = v
    return x


def rows_index_error(x, ends):
    # Inner bounds not known before the nest (an element): each row's loop
    # checked on entry; the last row's goes past the end.
    for i in range(x.shape[0]):
        for j in range(ends[i]):
            v = i * 10 + j
            x[i, j] = v
    return x


def nest_overflow(a, out):
    # s is Python's 0, then NumPy's int64: its products wrap around in the
    # middle of a checked nest, as NumPy's do (no bail: the same answer as
    # the general path, in native code and the interpreter alike).
    for i in range(a.shape[0]):
        s = 0
        for j in range(a.shape[1]):
            t = s * 3  # (one operation a statement: the same counters on every path)
            s = t + a[i, j]
            out[i, j] = s
    return out


def stale_index(x, out):
    # j is read in the i loop before the inner loop assigns it, with the
    # value the statement after the i loop gave it in the turn before:
    # x[j] past the end there, an IndexError.
    for t in range(3):
        for i in range(4):
            if t > 0:
                out[t, i] = x[j]
            for j in range(5):
                out[t, i] += x[j]
        j = 9
    return out


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


def life_step(grid):
    # `alive` is Python's 0, then NumPy's int64 (alive += grid[...]): the
    # `or`/`and` on it evaluate their right side by the kind of the turn.
    n = grid.shape[0]
    m = grid.shape[1]
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
            elif i == 0 and alive:
                new[i, j] = 2
    return new


def varying_or(x, stop):
    # s is Python's 0.0 until a NumPy element is added: `s > 1 or x[i] > 0`
    # evaluates x[i] (an IndexError at len(x)) when s does not decide or is
    # NumPy's (tessera's general evaluation computes both sides of a NumPy
    # scalar's `or`, where Python short-circuits: compared with it only).
    s = 0.0
    hits = 0
    for i in range(len(x) + 1):
        if s > 1.0 or x[i] > 0.5:
            hits += 1
        if i == stop:
            s = 2.0
        elif i > stop:
            s = s + x[i - 1]
    return s, hits


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


def narrow_reads(x32, i32, u8, idx, out64, outi, out32):
    # float32 and narrow int elements written exactly into wider arrays (or
    # the same dtype), int32 elements as indices: NumPy's scalars of those
    # dtypes have no register kind, so their reads compile only there.
    for k in range(len(x32)):
        out64[k] = u8[k]
        outi[k] = i32[k]
        out32[k] = x32[k]
    s = 0.0
    for r in range(2):
        for k in range(len(idx)):
            s += out64[idx[k]] * (r + 1)
            out64[k] = x32[idx[k]]
    return s


def f32_sum_axpy(x32, y32, a):
    # float32 with Python numbers stays float32 (NEP 50): the sum, a * x + y + 1.
    s = 0.0
    out = np.zeros(len(x32), dtype=np.float32)
    for i in range(len(x32)):
        s += x32[i]
        out[i] = a * x32[i] + y32[i] + 1
    return s, out, s > 1.5, s * 2 == s + s


def f32_mandelbrot(cre, cim, max_iter):
    counts = np.zeros((len(cim), len(cre)), dtype=np.int32)
    for j in range(len(cim)):
        for i in range(len(cre)):
            cr = cre[i]
            ci = cim[j]
            zr = cr * 0.0
            zi = ci * 0.0
            n = 0
            while n < max_iter and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            counts[j, i] = n
    return counts


def i32_histogram(data, nbins, lo, width):
    # int32 bins (int32 // Python int), int32 counts (int32 + 1), an int32
    # index.
    counts = np.zeros(nbins, dtype=np.int32)
    for i in range(len(data)):
        b = (data[i] - lo) // width
        if b >= 0 and b < nbins:
            counts[b] += 1
    return counts


def i32_wrap(a):
    # int32 arithmetic wraps around as NumPy's int32 scalars do; / gives float64.
    s = a[0] * 0
    p = s + 1
    for i in range(len(a)):
        s += a[i]
        p = p * 3 + a[i]
    return s, p, s // 7, s % -5, s / 3, p - s, a[0] + 2.5, a[0] > s


def narrow_mixed(x32, i32, x64, i64):
    # With NumPy scalars of other kinds: float64 / int64 (NEP 50).
    out = np.zeros((len(x32), 7))
    t = 0.0
    for k in range(len(x32)):
        out[k, 0] = x32[k] * x64[k]
        out[k, 1] = x32[k] + i32[k]
        out[k, 2] = i32[k] + i64[k]
        out[k, 3] = i32[k] * 0.5
        out[k, 4] = np.sqrt(np.abs(x32[k])) + np.floor(x32[k])
        out[k, 5] = x32[k] < i32[k]
        out[k, 6] = np.sqrt(i32[k] * i32[k])
        t += x32[k] * x64[k]
    return out, t



def branchy_nest(a, out):
    # The native code keeps one counter for nodes that run equally often
    # (merge_counters): branches and a continue keep the interpreter's
    # counts.
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            v = a[i, j]
            if v < 0:
                continue
            if v % 2 == 0:
                t = v * 3
                out[i, j] = t
            else:
                t = v + 1
                out[i, j] = t - 2
    return out


def branchy_flat(x, idx):
    # A loop without loops inside that stops mid-turn (an index past the
    # end after a branch): the counters go back to that turn's start.
    s = 0.0
    for i in range(len(idx)):
        v = x[i]
        if v > 0.5:
            s += v
        else:
            s -= 1.0
        w = x[idx[i]]
        s += w
    return s


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
import test_native_loops as t
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
    assert "IndexError" in native and "test_native_loops.py" in native


def test_index_error_names_the_line():
    x = np.zeros(300)
    with pytest.raises(IndexError) as e:
        tessera.jit(index_error_late)(x, 301)
    assert f"test_native_loops.py:{index_error_late.__code__.co_firstlineno + 2}" in str(e.value)
    assert np.array_equal(x, np.arange(300) * 2.0)


_CACHE_SCRIPT = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_loops as t
print(repr(tessera.jit(t.pairwise)(np.arange(24.0).reshape(6, 4) ** 0.5).tolist()))
"""


def _cached_run(cache, **env):
    code = _CACHE_SCRIPT.format(here=os.path.dirname(os.path.abspath(__file__)))
    # One tier (optimised at once, stored at once): this tests the cache's entries, which
    # the background tier writes later (test_native_tiers.py)
    env = dict(os.environ, TESSERA_CACHE_DIR=str(cache), TESSERA_NATIVE="debug",
               TESSERA_NATIVE_TIERS="0", **env)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    compiled = r.stderr.count("native code compiled")
    loaded = r.stderr.count("native code loaded from the cache")
    return r.stdout, r.stderr, compiled, loaded


def test_disk_cache_hit_corrupt_symlink_truncated_other_cpu(tmp_path):
    want = repr(pairwise(np.arange(24.0).reshape(6, 4) ** 0.5).tolist()) + "\n"
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 1 and loaded == 0, err
    entries = list((tmp_path / "native").glob("*.o"))
    assert len(entries) == 1 and not list((tmp_path / "native").glob(".tmp*"))
    entry = entries[0]
    good = entry.read_bytes()
    # A hit: no compilation.
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 0 and loaded == 1, err
    # One byte of the object changed: recompiled (saying why), entry rewritten.
    bad = bytearray(good)
    bad[-10] ^= 0xFF
    entry.write_bytes(bytes(bad))
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 1 and "corrupt" in err, err
    assert entry.read_bytes() == good
    # Truncated, and a header claiming a huge size: recompiled.
    entry.write_bytes(good[: len(good) // 2])
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 1 and "size in the header" in err, err
    entry.write_bytes(good[:36] + (2**62).to_bytes(8, "little") + good[44:])
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 1 and "size in the header" in err, err
    # A planted symbolic link (to a valid entry) is not followed; the
    # entry written after is a file of its own.
    planted = tmp_path / "elsewhere.o"
    planted.write_bytes(good)
    entry.unlink()
    entry.symlink_to(planted)
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 1 and "symbolic link" in err, err
    assert not entry.is_symlink() and entry.read_bytes() == good
    # Another CPU: another key, compiled.
    out, err, compiled, loaded = _cached_run(tmp_path, TESSERA_CACHE_CPU="some-other-cpu +avx")
    assert out == want and compiled == 1 and loaded == 0, err
    assert len(list((tmp_path / "native").glob("*.o"))) == 2


def test_disk_cache_only_in_a_private_folder(tmp_path):
    """Machine code is read only from a folder of this user's that no one else
    may write into: a group- or world-writable cache folder is no cache (the
    entry in it is neither loaded nor replaced), and the code still runs."""
    want = repr(pairwise(np.arange(24.0).reshape(6, 4) ** 0.5).tolist()) + "\n"
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 1 and loaded == 0, err
    folder = tmp_path / "native"
    entry = next(folder.glob("*.o"))
    good = entry.read_bytes()
    folder.chmod(0o777)
    try:
        out, err, compiled, loaded = _cached_run(tmp_path)
        assert out == want and compiled == 1 and loaded == 0, err
        assert "no cache" in err and "only this user may write" in err, err
        assert entry.read_bytes() == good
    finally:
        folder.chmod(0o700)
    out, err, compiled, loaded = _cached_run(tmp_path)
    assert out == want and compiled == 0 and loaded == 1, err


def test_helper_calls_compiled_natively_with_the_callees_errors():
    """Loops calling other functions run as native code (the debug log says
    so for their lines), give the general path's values and random stream,
    and an index past the end inside the function called is an IndexError
    naming the function's line, with the caller's array written up to it."""
    code = ("import sys, numpy as np, tessera\n"
            f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
            "import test_native_loops as t\n"
            "print(repr(tessera.jit(t.helper_scalars)(np.linspace(-3.0, 3.0, 200))))\n"
            "print(repr(tessera.jit(t.metropolis)(2000, 0.8).tolist()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, TESSERA_FAST_LOOPS="debug"))
    assert r.returncode == 0, r.stderr
    loops = {helper_scalars: helper_scalars.__code__.co_firstlineno + 2,
             metropolis: metropolis.__code__.co_firstlineno + 3}
    for f, at in loops.items():
        assert any(f"test_native_loops.py:{at}: native code compiled" in line
                   or f"test_native_loops.py:{at}: native code loaded" in line
                   for line in r.stderr.splitlines()), (f.__name__, r.stderr)
    general = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=600, env=dict(os.environ, TESSERA_FAST_LOOPS="0"))
    assert general.returncode == 0, general.stderr
    assert r.stdout == general.stdout
    x = np.arange(50.0) ** 2
    with pytest.raises(IndexError) as e:
        tessera.jit(helper_index_error)(x, 50)
    assert f"test_native_loops.py:{_shifted.__code__.co_firstlineno + 1}" in str(e.value)
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
    assert f"test_native_loops.py:{gather_then_fail.__code__.co_firstlineno + 5}" in str(e.value)
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
                "import test_native_loops as t\n"
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
    assert f"test_native_loops.py:{_maybe_unset.__code__.co_firstlineno + 3}" in str(e.value)
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
import test_native_loops as t
f = tessera.jit(t.churn, threads={threads})
f(1000, 10)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
u = f(1000, 100_000)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(float(u[0]), float(u[-1]), u.shape[0], grown)
"""


def _debug_run(code, **env):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


@pytest.mark.parametrize("threads", [1, 2])
def test_arrays_made_in_native_loops_are_released_each_turn(threads):
    # Stays native (no bail: 100,000 turns of 8 KB held would pass the
    # loop's 64 MB of arrays), and the peak memory grows far less than 0.8 GB.
    here = os.path.dirname(os.path.abspath(__file__))
    out, err = _debug_run(_ALLOC_SCRIPT.format(here=here, threads=threads),
                          TESSERA_FAST_LOOPS="debug", TESSERA_NATIVE="1")
    first, last, n, grown_kb = out.split()
    assert (first, last, n) == ("100000.0", "100000.0", "1000"), out
    assert int(grown_kb) < 64 * 1024, out
    assert "native code compiled" in err or "native code loaded" in err, err
    assert "rolled back" not in err and "returned 2" not in err and "returned 4" not in err, err


@pytest.mark.parametrize("at", [0, 3, 7, 8, 9])
def test_loops_making_arrays_compile_natively(at):
    # Not refused by the generator: the loop that makes and rebinds arrays
    # is one native function (its debug line names the loop's line).
    f, args = CASES[at]
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys, numpy as np, tessera; sys.path.insert(0, {here!r}); "
            f"import test_native_loops as t; print(repr(tessera.jit(t.{f.__name__})(*t.CASES[{at}][1])))")
    out, err = _debug_run(code, TESSERA_NATIVE="debug")
    assert "no native code" not in err, err
    line = f.__code__.co_firstlineno + {swap_rows: 4, life_loop: 4, shaped: 5}.get(f, 3)  # `for t`
    assert f"test_native_loops.py:{line}: native code" in err, err
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
            f"sys.path.insert(0, {here!r}); import test_native_loops as t\n"
            f"for f, a in t.CASES:\n"
            f"    if f in t.NARROW: tessera.jit(f)(*a)\n")
    out, err = _debug_run(code, TESSERA_NATIVE="debug")
    for f in NARROW:
        lines = range(f.__code__.co_firstlineno, f.__code__.co_firstlineno + 30)
        compiled = [ln for ln in lines if f"test_native_loops.py:{ln}: native code compiled" in err
                    or f"test_native_loops.py:{ln}: native code loaded" in err]
        refused = [ln for ln in lines if f"test_native_loops.py:{ln}: no native code" in err]
        assert compiled and not refused, (f.__name__, err)


def _int32_plus(a, k):
    s = a[0]
    for i in range(len(a)):
        s = s + k
    return s


@pytest.mark.filterwarnings("ignore")
def test_int32_with_a_python_int_out_of_range_raises_as_numpy():
    a = np.arange(3, dtype=np.int32)
    with pytest.raises(OverflowError):
        _int32_plus(a, 3_000_000_000)
    with pytest.raises(OverflowError, match=r"out of bounds for int32.*test_native_loops.py:"):
        tessera.jit(_int32_plus)(a, 3_000_000_000)
    r = tessera.jit(_int32_plus)(a, 2_000_000_000)  # in range: wraps
    assert type(r) is np.int32 and r == _int32_plus(a, 2_000_000_000)
