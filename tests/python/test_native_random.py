"""np.random.random() in native loops (tessera/lang/native_random.cpp): the
draws are computed in batches by the native code, not one call of the
interpreter's stream each, and must stay that stream's numbers: the same
as the interpreter (TESSERA_NATIVE=0) and the general evaluation
(TESSERA_FAST_LOOPS=0), the positions not drawn given back when a call
ends, and equal to Philox-4x32-10 computed here in plain Python."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tessera
from jit_check import run_script

_M32 = (1 << 32) - 1
_M64 = (1 << 64) - 1


def _mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _unseeded_draw(seed, position):
    """The uniform double of the unseeded draw at `position` of the stream
    after np.random.seed(seed): Philox-4x32-10 (Salmon et al., SC'11) at
    counter 0, keyed by the seed and the position's stream number."""
    stream = (1 << 56) | (position & ((1 << 56) - 1))
    mixed = _mix64(seed ^ _mix64(stream))
    k0, k1 = mixed & _M32, mixed >> 32
    c0, c1, c2, c3 = 0, 0, stream & _M32, stream >> 32
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _M32, (p0 >> 32) ^ c3 ^ k1, p0 & _M32
        k0 = (k0 + 0x9E3779B9) & _M32
        k1 = (k1 + 0xBB67AE85) & _M32
    return ((c0 << 21) ^ (c1 >> 11)) / 9007199254740992.0


def draw_loop(n, seed):
    # One or two draws a turn (a branch on the first); then an array draw
    # by the general path, which takes the next position of the stream.
    np.random.seed(seed)
    out = np.empty(n)
    extra = 0
    for i in range(n):
        u = np.random.random()
        if u < 0.25:
            u = u + np.random.random()
            extra += 1
        out[i] = u
    return out, extra, np.random.random()


def draw_break(n, stop, seed):
    # The loop leaves after `stop`: the draws reserved past it go back.
    np.random.seed(seed)
    s = 0.0
    for i in range(n):
        s += np.random.random()
        if i == stop:
            break
    return s, np.random.random(), np.random.random()


def draws_in_calls(reps, n, seed):
    # Many short native calls (an inner loop of n turns run reps times).
    np.random.seed(seed)
    out = np.zeros(reps)
    for r in range(reps):
        t = 0.0
        for i in range(n):
            t += np.random.random()
        out[r] = t
    return out, np.random.random()


def draw_then_index_error(x, n, seed):
    # The turn that reads x[n] stops the native code: the interpreter redraws
    # that turn's number, and the error names this line.
    np.random.seed(seed)
    s = 0.0
    for i in range(n + 1):
        s += np.random.random() * x[i]
    return s


def test_draws_are_philox_of_the_stream_positions():
    out, extra, after = tessera.jit(draw_loop)(300, 11)
    want, pos = [], 0
    for _ in range(300):
        u = _unseeded_draw(11, pos)
        pos += 1
        if u < 0.25:
            u += _unseeded_draw(11, pos)
            pos += 1
        want.append(u)
    assert out.tolist() == want
    assert extra == pos - 300
    assert after == _unseeded_draw(11, pos)


def test_draws_are_uniform():
    # 40,000 draws: their mean within 4 standard deviations of 1/2, the
    # share of first draws below 1/4 within 4 of 1/4.
    sums, _ = tessera.jit(draws_in_calls)(200, 200, 3)
    assert abs(sums.sum() / 40_000 - 0.5) < 4 * (1 / 12 / 40_000) ** 0.5
    _, extra, _ = tessera.jit(draw_loop)(40_000, 3)
    assert abs(extra / 40_000 - 0.25) < 4 * (0.1875 / 40_000) ** 0.5


_SCRIPT = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_random as t
for threads in (1, 2):
    for f, args in [(t.draw_loop, (20_000, 5)), (t.draw_loop, (3, 6)),
                    (t.draw_break, (10_000, 700, 7)), (t.draw_break, (10_000, 0, 7)),
                    (t.draws_in_calls, (300, 17, 8)),
                    (t.draw_then_index_error, (np.ones(5000), 5000, 9))]:
        g = tessera.jit(f, threads=threads)
        try:
            r = g(*args)
            print(f.__name__, repr(r))
        except IndexError as e:
            print(f.__name__, "IndexError", str(e))
"""


def test_native_interpreter_and_general_draw_the_same():
    native, log = run_script(_SCRIPT, TESSERA_FAST_LOOPS="debug")
    interp, _ = run_script(_SCRIPT, TESSERA_NATIVE="0")
    general, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert native == interp
    assert native == general
    assert "native code compiled" in log or "native code loaded" in log, log
    line = draw_then_index_error.__code__.co_firstlineno + 6
    assert f"test_native_random.py:{line}" in native


_SPIN = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_random as t
g = tessera.jit(t.draw_loop)
want = g(20_000, 5)
g(2, 5)
spin = tessera.jit(t.draw_break)
spin(100, 10, 1)  # compiled before "ready"
print("ready", flush=True)
try:
    spin(10**15, -1, 1)
    print("returned", flush=True)
except KeyboardInterrupt:
    got = g(20_000, 5)
    print("caught KeyboardInterrupt", all(np.array_equal(a, b) for a, b in zip(got, want)),
          flush=True)
"""


def test_sigint_stops_a_drawing_loop_and_the_stream_goes_on():
    code = _SPIN.format(here=os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out = p.communicate(timeout=5)[0]
    finally:
        p.kill()
    assert out.strip() == "caught KeyboardInterrupt True"
