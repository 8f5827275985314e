"""Native code for scalar loops (tessera/lang/native.cpp, docs/runtime.md
"Native loops"): the loops of numbers, NumPy's int64/float64 and float32/int32
scalars, wrap-around, NaN and infinity, branches, nests and their index errors,
with the tests that are theirs alone (an error's line, the disk cache of
native code, an int32 past its range). test_native_loops_agree.py runs every
loop here against Python/NumPy, the register interpreter and the general
evaluation at 1 and 2 threads; test_native_loops_arrays.py has the loops that
make arrays or call functions."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

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


def test_index_error_names_the_line():
    x = np.zeros(300)
    with pytest.raises(IndexError) as e:
        tessera.jit(index_error_late)(x, 301)
    line = index_error_late.__code__.co_firstlineno + 2
    assert f"test_native_loops_scalars.py:{line}" in str(e.value)
    assert np.array_equal(x, np.arange(300) * 2.0)


_CACHE_SCRIPT = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_loops_scalars as t
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
    with pytest.raises(OverflowError,
                       match=r"out of bounds for int32.*test_native_loops_scalars.py:"):
        tessera.jit(_int32_plus)(a, 3_000_000_000)
    r = tessera.jit(_int32_plus)(a, 2_000_000_000)  # in range: wraps
    assert type(r) is np.int32 and r == _int32_plus(a, 2_000_000_000)
