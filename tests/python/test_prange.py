"""tessera.prange (docs/runtime.md, "Parallel loops"): a parallel loop gives
what the same function gives with range under Python (prange is range
there) and what NumPy gives, at 1 and 2 threads: reductions (sum,
difference, product, min/max, integer and bitwise), 2-D writes, nests; an
IndexError in a chunk is the one range gives, at the same file:line, with
the same writes kept; reductions' bits do not depend on the thread count;
loops that cannot run in parallel run as range and TESSERA_NATIVE=debug says
why; Ctrl-C stops a parallel loop."""

import inspect
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from test_interrupt import _reader, _readline

import tessera
from tessera import prange


def psum(x):
    s = 0.0
    for i in prange(x.shape[0]):
        s += x[i] * 2.0
    return s


def rsum(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * 2.0
    return s


def pdiff_prod(x):
    d = 1.5
    p = 1.0
    for i in prange(1, x.shape[0]):
        d -= x[i]
        p *= 1.0 + x[i] * 1e-3
    return d, p


def pminmax(x):
    lo = x[0]
    hi = x[0]
    for i in prange(x.shape[0]):
        lo = min(lo, x[i])
        hi = max(hi, x[i] * 1.0)
    return lo, hi


def pints(a):
    t = 0
    n = 0
    lo = a[0]
    p = 1
    for i in prange(a.shape[0]):
        t += a[i] * a[i]
        if a[i] % 3 == 0:
            n += 1
        lo = min(lo, a[i])
        p *= a[i] % 2 + 1  # overflows: a chunk stops, the loop runs as range (wraps)
    return t, n, lo, p


def pbits(a):
    # bitwise operators have no native code yet: the loop runs as range
    o = 0
    x = 0
    for i in prange(a.shape[0]):
        o |= a[i]
        x ^= a[i]
    return o, x


def pwrite2d(out, a):
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = a[i] * j + np.sqrt(i + j)
    return out


def mandel_rows(out, maxit):
    h = out.shape[0]
    w = out.shape[1]
    for i in prange(h):
        for j in range(w):
            cr = -2.0 + 3.0 * j / w
            ci = -1.2 + 2.4 * i / h
            zr = 0.0
            zi = 0.0
            n = 0
            while n < maxit and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            out[i, j] = n
    return out


def pairwise(X, D):
    n = X.shape[0]
    for i in prange(n):
        for j in range(n):
            d = 0.0
            for k in range(X.shape[1]):
                t = X[i, k] - X[j, k]
                d += t * t
            D[i, j] = np.sqrt(d)
    return D


def nested(out):
    for i in prange(out.shape[0]):
        for j in prange(out.shape[1]):
            out[i, j] = i * 10 + j
    return out


def stepped(out):
    s = 0
    for i in prange(out.shape[0] - 1, -1, -3):
        out[i] = i * 2
        s += i
    return out, s, i


def shifted(x, n):
    for i in prange(n):
        x[i + 1] = x[i + 1] * 3.0 + i  # the IndexError's line
    return x


def rows_error(out, src, offs):
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = out[i, j] * 3.0 + src[offs[i] + j] + i  # the row's IndexError


def carried(x):
    s = 0.0
    for i in prange(x.shape[0]):
        s = s * 0.5 + x[i]
    return s


def float_stop(n):
    s = 0
    for i in prange(n):  # the TypeError's line
        s += i
    return s


def with_break(x):
    s = 0.0
    for i in prange(x.shape[0]):
        if x[i] > 0.9:
            break
        s += x[i]
    return s, i


def makes_arrays(x, out):
    for i in prange(x.shape[0]):
        t = np.zeros(3)
        t[0] = x[i]
        t[1] = x[i] * 2.0
        out[i] = t[0] + t[1] + t[2]
    return out


def draws(out):
    for i in prange(out.shape[0]):
        out[i] = np.random.random()
    return out


def some_assign(out, x, before):
    if before:
        t = -1.0
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            if x[i] > 0.5:
                t = x[i] * 2.0
                out[i, j] = t + j
    return out, t


def every_assign(x):
    t = 5.0
    for i in prange(x.shape[0]):
        t = x[i]
    return t


def range_float_stop(n):
    s = 0
    for i in range(n):
        s += i
    return s


def line_of(fn, marker):
    src, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(src) if marker in line)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(31)


def test_prange_outside_jit_is_range():
    assert list(prange(5)) == list(range(5))
    assert list(prange(2, 11, 3)) == [2, 5, 8]
    assert list(prange(5, 0, -2)) == [5, 3, 1]
    with pytest.raises(TypeError) as got:
        prange(2.5)
    with pytest.raises(TypeError) as want:
        range(2.5)
    assert str(got.value) == str(want.value)


def test_sums_match_range_and_numpy(threads, rng):
    x = rng.random(100_003)
    got = tessera.jit(psum)(x)
    assert got == pytest.approx(tessera.jit(rsum)(x), rel=1e-12)
    assert got == pytest.approx(2.0 * np.sum(x), rel=1e-12)
    assert got == pytest.approx(psum(x), rel=1e-12)


def test_difference_and_product(threads, rng):
    x = rng.random(20_001)
    d, p = tessera.jit(pdiff_prod)(x)
    wd, wp = pdiff_prod(x)
    assert d == pytest.approx(wd, rel=1e-10)
    assert d == pytest.approx(1.5 - np.sum(x[1:]), rel=1e-10)
    assert p == pytest.approx(wp, rel=1e-10)
    assert p == pytest.approx(np.prod(1.0 + x[1:] * 1e-3), rel=1e-10)


def test_min_max_exact(threads, rng):
    x = rng.standard_normal(50_000)
    lo, hi = tessera.jit(pminmax)(x)
    assert (lo, hi) == (x.min(), x.max())
    assert (lo, hi) == pminmax(x)


def test_integer_and_bitwise_reductions(threads, rng):
    a = rng.integers(0, 1 << 20, 30_000)
    got = tessera.jit(pints)(a)
    with np.errstate(over="ignore"):
        want = pints(a)
    assert tuple(int(v) for v in got) == tuple(int(v) for v in want)
    assert int(got[0]) == int(np.sum(a * a))
    assert int(got[1]) == int(np.sum(a % 3 == 0))
    assert int(got[2]) == int(a.min())
    assert int(got[3]) == int(np.prod(a % 2 + 1))  # 2**~15000 wrapped: 0
    a = a[:40]  # no overflow: the parallel path itself
    assert tuple(int(v) for v in tessera.jit(pints)(a)) == tuple(int(v) for v in pints(a))
    got = tessera.jit(pbits)(a)
    assert (int(got[0]), int(got[1])) == (int(np.bitwise_or.reduce(a)),
                                          int(np.bitwise_xor.reduce(a)))


def test_2d_writes_and_nests(threads, rng):
    a = rng.random(150)
    out = tessera.jit(pwrite2d)(np.zeros((150, 40)), a)
    np.testing.assert_allclose(out, a[:, None] * np.arange(40) +
                               np.sqrt(np.arange(150)[:, None] + np.arange(40)), rtol=1e-15)
    counts = tessera.jit(mandel_rows)(np.zeros((60, 80), dtype=np.int64), 50)
    np.testing.assert_array_equal(counts, mandel_rows(np.zeros((60, 80), dtype=np.int64), 50))
    X = rng.random((90, 5))
    D = tessera.jit(pairwise)(X, np.zeros((90, 90)))
    want = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(D, want, rtol=1e-12, atol=1e-15)
    # prange inside prange: the inner one as range
    out = tessera.jit(nested)(np.zeros((33, 7)))
    np.testing.assert_array_equal(out, np.arange(33)[:, None] * 10 + np.arange(7))


def row_norms(x, out):
    total = 0.0
    for i in prange(x.shape[0]):
        s = 0.0
        for j in range(x.shape[1]):
            s += x[i, j] * x[i, j]
        out[i] = np.sqrt(s)
        total += s
    return total, s, j


def test_reduction_and_privates_of_a_nest(threads, rng):
    # A nest's native code runs from the first turn: the chunks' registers
    # are all that assigns total, s and j (each written back).
    x = rng.random((300, 9))
    out = np.zeros(300)
    total, s, j = tessera.jit(row_norms)(x, out)
    np.testing.assert_allclose(out, np.linalg.norm(x, axis=1), rtol=1e-14)
    assert total == pytest.approx((x * x).sum(), rel=1e-12)
    assert (s, j) == row_norms(x, np.zeros(300))[1:]


def test_negative_step_and_loop_variable_after(threads):
    got = tessera.jit(stepped)(np.zeros(100))
    want = stepped(np.zeros(100))
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:] == want[1:]


def test_index_error_in_a_chunk_is_ranges(threads):
    line = line_of(shifted, "the IndexError's line")
    x = np.arange(200.0)
    with pytest.raises(IndexError) as err:
        tessera.jit(shifted)(x, 200)
    assert f"test_prange.py:{line}" in str(err.value)
    assert "out of bounds" in str(err.value)
    # The writes of the turns before the failing one stay, as in Python.
    want = np.arange(200.0)
    with pytest.raises(IndexError):
        shifted(want, 200)
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("layout", ["C", "strided", "F"])
def test_index_error_in_a_chunk_of_row_writes(threads, layout):
    # Each chunk keeps its own rows: every chunk's rows are put back (the
    # turns before the failing one are redone: written twice, their elements
    # would be tripled twice), the failing row keeps the elements written
    # before the error.
    line = line_of(rows_error, "the row's IndexError")
    src = np.arange(20.0)
    offs = np.zeros(50, dtype=np.int64)
    offs[25] = 17  # row 25 fails at j == 3; the rows after it are fine

    def make():
        if layout == "strided":
            return np.full((50, 14), -1.0)[:, ::2]
        return np.full((50, 7), -1.0, order=layout)

    out = make()
    with pytest.raises(IndexError) as err:
        tessera.jit(rows_error)(out, src, offs)
    assert f"test_prange.py:{line}" in str(err.value)
    want = make()
    with pytest.raises(IndexError):
        rows_error(want, src, offs)
    np.testing.assert_array_equal(out, want)
    assert (want[26:] == -1.0).all() and (want[25, 3:] == -1.0).all()


def test_float_stop_is_ranges_type_error():
    line = line_of(float_stop, "the TypeError's line")
    with pytest.raises(TypeError) as err:
        tessera.jit(float_stop)(2.5)
    msg = str(err.value)
    assert "'float' object cannot be interpreted as an integer" in msg
    assert f"test_prange.py:{line}" in msg
    assert tessera.jit(float_stop)(np.int64(5)) == 10
    assert tessera.jit(float_stop)(True) == 0
    # range itself, outside other loops, checks its bounds the same way
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        tessera.jit(range_float_stop)(2.5)
    assert tessera.jit(range_float_stop)(5) == 10


def test_carried_value_runs_as_range(threads, rng):
    x = rng.random(1000)
    assert tessera.jit(carried)(x) == carried(x)  # sequential: the same bits


def test_a_body_making_arrays_runs_as_range(threads, rng):
    # np.zeros in the body: the interpreter's table of arrays is not shared
    # by the chunks' threads, so the loop runs as range (same values)
    x = rng.random(300)
    got = tessera.jit(makes_arrays)(x, np.zeros(300))
    np.testing.assert_array_equal(got, makes_arrays(x, np.zeros(300)))


def test_break_and_draws_run_as_range(threads, rng):
    x = rng.random(500)
    assert tessera.jit(with_break)(x) == with_break(x)
    got = tessera.jit(draws)(np.zeros(200))  # one stream, in the order of the turns
    assert len(np.unique(got)) == 200 and got.min() >= 0.0 and got.max() < 1.0


@pytest.mark.parametrize("before", [False, True])
def test_a_variable_some_turns_assign(threads, before):
    # t is assigned by rows 0..39 only (first in the loop, or also before
    # it): after the loop it holds what the last turn that assigned it left,
    # as after range.
    x = np.where(np.arange(100) < 40, 0.75 + np.arange(100) * 1e-3, 0.25)
    out, t = tessera.jit(some_assign)(np.zeros((100, 3)), x, before)
    want_out, want_t = some_assign(np.zeros((100, 3)), x, before)
    np.testing.assert_array_equal(out, want_out)
    assert t == want_t
    # every turn assigns it: the last turn's value, even when it is the one
    # before the loop
    x = np.arange(100.0)
    x[-1] = 5.0
    assert tessera.jit(every_assign)(x) == 5.0


def test_reduction_bits_do_not_depend_on_threads(rng):
    x = rng.standard_normal(300_001) * 1e3
    before = tessera.num_threads()
    det = tessera.deterministic()
    results = []
    try:
        for mode in (False, True):
            tessera.set_deterministic(mode)
            for n in (1, 2, 1, 2):
                tessera.set_num_threads(n)
                results.append(tessera.jit(psum)(x))
    finally:
        tessera.set_num_threads(before)
        tessera.set_deterministic(det)
    assert len({float(r).hex() for r in results}) == 1, results


CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tessera
    from tessera import prange

    def psum(x):
        s = 0.0
        for i in prange(x.shape[0]):
            s += x[i]
        return s

    def carried(x):
        s = 0.0
        for i in prange(x.shape[0]):
            s = s * 0.5 + x[i]
        return s

    def shifted(x, n):
        for i in prange(n):
            x[i + 1] = x[i + 1] * 3.0 + i
        return x

    def spin(x):
        s = 0.0
        for i in prange(10**15):
            s += x[i % 7] * 0.0
        return s

    if sys.argv[1] == "spin":
        tessera.set_num_threads(2)
        f = tessera.jit(spin)
        print("ready", flush=True)
        try:
            f(np.ones(7))
            print("returned", flush=True)
        except KeyboardInterrupt:
            print("caught KeyboardInterrupt", flush=True)
        print("next", tessera.jit(psum)(np.arange(10.0)), flush=True)
    else:
        x = np.arange(1000.0)
        print(tessera.jit(psum)(x), tessera.jit(carried)(x), flush=True)
        y = x.copy()
        try:
            tessera.jit(shifted)(y, 1000)
        except IndexError as e:
            print(y[:3], y[-2:], flush=True)
    """
)


def test_debug_says_parallel_or_why_not(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, TESSERA_NATIVE="debug", TESSERA_CACHE_DIR="0")
    r = subprocess.run([sys.executable, str(script), "values"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "499500.0"
    # All 1,000 turns in chunks: the native code runs from the first turn.
    assert "prange ran 1000 turns in 64 chunks" in r.stderr, r.stderr
    assert "prange runs as range: 's' is carried from one turn to the next" in r.stderr, r.stderr
    assert "a chunk of the prange loop returned" in r.stderr, r.stderr
    assert r.stdout.splitlines()[1] == "[0. 3. 7.] [3991. 3995.]"  # each written once
    # TESSERA_NATIVE=0: the same values, as range, said so.
    env["TESSERA_NATIVE"] = "0"
    env["TESSERA_FAST_LOOPS"] = "debug"
    r0 = subprocess.run([sys.executable, str(script), "values"], env=env, capture_output=True,
                        text=True, timeout=300)
    assert r0.stdout == r.stdout
    assert "prange runs as range: TESSERA_NATIVE=0" in r0.stderr, r0.stderr


def test_sigint_stops_a_parallel_loop(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), "spin"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    lines = _reader(proc)
    try:
        assert _readline(lines, time.monotonic() + 60) == "ready"
        time.sleep(1.0)  # compiled and looping in chunks by now
        assert proc.poll() is None, "the child ended before SIGINT"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        first = _readline(lines, sent + 10)
        elapsed = time.monotonic() - sent
        assert first == "caught KeyboardInterrupt", first
        # 100 ms asked; room for a loaded machine, as test_interrupt.py
        assert elapsed < 0.5, f"KeyboardInterrupt after {elapsed:.3f} s"
        assert _readline(lines, sent + 20) == "next 45.0"
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
