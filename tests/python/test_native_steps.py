"""Native range loops with steps other than 1 and -1, and index intervals
through % and // (tessera/lang/native.cpp, docs/runtime.md "Native loops"):
`for i in range(a, b, step)` is versioned like a unit-step range loop (its
accesses checked at the first and last turns, the counter's increment without
overflow check when the end leaves room), and inner loops with steps, wrap-
around indices `x[(i + d) % n]` and `x[i // 2]` are covered by the nest's
check before the outer loop. Each case must give what Python/NumPy give
(values, arrays written in place, IndexError and its position), and exactly
what the register interpreter (TESSERA_NATIVE=0) and the general evaluation
(TESSERA_FAST_LOOPS=0) give, at 1 and 2 threads; TESSERA_FAST_LOOPS=debug
must say the loops were compiled."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from jit_check import check, run_script

import tessera


def odd_even_sort(a):
    x = a.copy()
    n = len(x)
    for phase in range(n):
        for i in range(phase % 2, n - 1, 2):
            if x[i] > x[i + 1]:
                x[i], x[i + 1] = x[i + 1], x[i]
    return x


def stepped_writes(x, start, stop, step):
    # One loop, no loops inside: the top-level range loop, any step.
    out = np.zeros(len(x))
    s = 0.0
    for i in range(start, stop, step):
        out[i] = x[i] * 2.0 + x[i - 1]
        s += x[i + 1]
    return out, s


def stepped_inner(a, step):
    # An inner loop with a step inside an outer loop (the nest's check).
    n = a.shape[0]
    m = a.shape[1]
    out = np.zeros((n, m))
    for i in range(n):
        for j in range(i % 3, m, step):
            out[i, j] = a[i, j] + a[i, m - 1 - j]
    return out


def stepped_down(a, step):
    out = np.zeros_like(a)
    for i in range(len(a)):
        for j in range(len(a) - 1, -1, step):
            out[j] += a[j] * i
    return out


def past_the_end(x, step):
    # The last turn's x[i + step] is past the end: IndexError there, the
    # writes of the turns before it kept.
    for i in range(0, len(x), step):
        x[i] = x[i + step - 1] + 1.0
    return x


def wrap_life(grid, steps):
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


def wrap_shift(x, k):
    # Negative left operands of %: Python's result is in [0, n).
    n = len(x)
    out = np.zeros((3, n))
    for r in range(3):
        for i in range(n):
            out[r, i] = x[(i - k * r) % n]
    return out


def wrap_back(x, k):
    # (i - k) % n with k the caller's: proven in range (n > 0), the remainder
    # of a negative number without the zero check.
    n = len(x)
    out = np.zeros((2, n))
    for r in range(2):
        for i in range(n):
            out[r, i] = x[(i - k) % n] + x[(i + k + r) % n]
    return out


def halves(x):
    # x[i // 2] and x[(i - 3) // 2]: floor division of a negative number.
    n = len(x)
    out = np.zeros((2, 2 * n))
    for r in range(2):
        for i in range(2 * n):
            out[r, i] = x[i // 2] + r * x[(i + 1) // 2 - 1]
    return out


def mod_by_zero(x, m):
    s = 0.0
    for r in range(2):
        for i in range(len(x)):
            s += x[i % m]
    return s


def near_int64_max(n):
    # The counter near int64's end: k + step leaves int64 after the last turn
    # (the general evaluation's int64 counter raises its overflow error there,
    # and so must the native code: the end leaves no room for the unchecked
    # increment).
    s = 0
    for i in range(9223372036854775800, 9223372036854775807, 3):
        s += i % 1000
    for i in range(n):
        s += i
    return s


def diagonal_runs(t):
    # The nest writes its table unchecked after copying it whole (a bail, the
    # int64 overflow on the diagonal, goes back to the copy): tables of 64 KiB
    # to 1 MiB are copied into buffers kept per thread for the next call.
    n = t.shape[0]
    m = t.shape[1]
    for i in range(1, n):
        for j in range(1, m):
            if t[i, j] == 0:
                t[i, j] = t[i - 1, j - 1] + 1
    return t[n - 1, m - 1]


def _diagonal_table(order="C", big=False):
    t = np.zeros((300, 200), dtype=np.int64, order=order)
    if big:
        t[0, 0] = 2**63 - 150
    return t


def conv_windows(img, k):
    # Window loops whose length is the kernel's shape: inner loops of
    # run-time length inside a nest the check before it proved.
    h = img.shape[0] - k.shape[0] + 1
    w = img.shape[1] - k.shape[1] + 1
    out = np.zeros((h, w))
    for i in range(h):
        for j in range(w):
            s = 0.0
            for a in range(k.shape[0]):
                for b in range(k.shape[1]):
                    s += img[i + a, j + b] * k[a, b]
            out[i, j] = s
    return out


def conv_local_lengths(img, k, kh, kw):
    # The same with lengths held in locals (and passed in: kh too large
    # reads past the image, an IndexError at the read).
    out = np.zeros((img.shape[0] - k.shape[0] + 1, img.shape[1] - k.shape[1] + 1))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            s = 0.0
            for a in range(kh):
                for b in range(kw):
                    s += img[i + a, j + b] * k[a, b]
            out[i, j] = s
    return out


def varying_inner(x, n, longest):
    # Inner lengths that change each turn (0 included) and one of more than
    # 65,536 turns: its first chunk, then the rest as one plain loop.
    out = np.zeros(n)
    for i in range(n):
        m = (i * 7) % 5
        if i == n - 1:
            m = longest
        for j in range(m):
            out[i] += x[j] * 0.5
    return out


CASES = [
    (odd_even_sort, (np.random.default_rng(1).random(61),)),
    (odd_even_sort, (np.random.default_rng(2).integers(-50, 50, 40),)),
    (stepped_writes, (np.arange(20.0) ** 0.5, 1, 19, 2)),
    (stepped_writes, (np.arange(20.0) ** 0.5, 1, 18, 3)),
    (stepped_writes, (np.arange(20.0) ** 0.5, 18, 0, -2)),
    (stepped_writes, (np.arange(20.0) ** 0.5, 0, 18, 2)),  # x[-1] at the first turn
    (stepped_writes, (np.arange(20.0) ** 0.5, 1, 20, 2)),  # x[20] at the last turn
    (stepped_inner, (np.arange(42.0).reshape(6, 7), 2)),
    (stepped_inner, (np.arange(42.0).reshape(6, 7), 5)),
    (stepped_down, (np.arange(9.0), -2)),
    (stepped_down, (np.arange(9.0), -4)),
    (past_the_end, (np.arange(10.0), 3)),
    (past_the_end, (np.arange(12.0), 3)),
    (wrap_life, (np.random.default_rng(3).integers(0, 2, (9, 11)), 3)),
    (wrap_shift, (np.arange(7.0), 3)),
    (wrap_shift, (np.arange(7.0), -5)),
    (wrap_back, (np.arange(7.0), 10)),
    (wrap_back, (np.arange(7.0), -23)),
    (wrap_back, (np.arange(1.0), 3)),
    (diagonal_runs, (_diagonal_table(),)),
    (diagonal_runs, (_diagonal_table(big=True),)),
    (diagonal_runs, (_diagonal_table(),)),
    (diagonal_runs, (_diagonal_table("F", big=True),)),
    (diagonal_runs, (_diagonal_table()[::2, ::-1],)),
    (halves, (np.arange(5.0) + 1.0,)),
    (mod_by_zero, (np.arange(6.0), 4)),
    (mod_by_zero, (np.arange(6.0), 0)),
    (mod_by_zero, (np.arange(6.0), -4)),
    (conv_windows, (np.arange(42.0).reshape(6, 7) % 5, np.arange(6.0).reshape(3, 2) - 2.5)),
    (conv_windows, (np.arange(42.0).reshape(6, 7)[::-1, ::2], np.ones((1, 4)))),
    (conv_windows, (np.array([[np.nan, 1.0], [2.0, 3.0]]), np.ones((1, 1)))),
    (conv_local_lengths, (np.arange(30.0).reshape(5, 6), np.ones((2, 3)), 2, 3)),
    (conv_local_lengths, (np.arange(30.0).reshape(5, 6), np.ones((2, 3)), 3, 3)),
    (conv_local_lengths, (np.arange(30.0).reshape(5, 6), np.ones((2, 3)), 0, 3)),
    (varying_inner, (np.arange(70003.0), 9, 70003)),
    (varying_inner, (np.arange(70003.0), 9, 70004)),
]
# Compared between the generator, the interpreter and the general path only.
EXTRA = [(near_int64_max, (5,))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES,
                         ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_stepped_and_wrapped_loops_agree_with_python(f, args):
    check(f, *args)


def test_index_error_at_the_last_stepped_turn_keeps_earlier_writes():
    x = np.arange(10.0)
    with pytest.raises(IndexError) as e:
        tessera.jit(past_the_end)(x, 3)
    assert f"test_native_steps.py:{past_the_end.__code__.co_firstlineno + 4}" in str(e.value)
    want = np.arange(10.0)
    with pytest.raises(IndexError):
        past_the_end(want, 3)
    assert np.array_equal(x, want)


_SCRIPT = """
import copy, sys, numpy as np, tessera, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import test_native_steps as t
for threads in (1, 2):
    for f, args in t.CASES + t.EXTRA:
        a = copy.deepcopy(args)
        g = tessera.jit(f, threads=threads)
        try:
            r = g(*a)
            print(f.__name__, repr(r), repr(a))
        except Exception as e:
            print(f.__name__, type(e).__name__, str(e), repr(a))
            continue  # the turn that raised: its fused write counted as its parts (as before)
        print([",".join(l.split(",")[:3]) for l in g.counters().splitlines()])
"""


def _run(**env):
    return run_script(_SCRIPT, **env)


def test_native_interpreter_and_general_print_the_same():
    native, log = _run(TESSERA_FAST_LOOPS="debug")
    interp, _ = _run(TESSERA_NATIVE="0")
    general, _ = _run(TESSERA_FAST_LOOPS="0")
    assert native == interp
    results = lambda out: [l for l in out.splitlines() if not l.startswith("[")]  # noqa: E731
    assert results(native) == results(general)
    compiled = {line.split(":")[1] for line in log.splitlines()
                if "native code compiled" in line or "native code loaded" in line}
    lines = {str(f.__code__.co_firstlineno + d) for f, d in
             ((odd_even_sort, 3), (stepped_writes, 4), (stepped_inner, 5), (wrap_life, 3),
              (wrap_back, 5), (halves, 4), (conv_windows, 6), (conv_local_lengths, 4))}
    assert lines <= compiled, log
    assert "IndexError" in native and "test_native_steps.py" in native
    assert "OverflowError" in native
    assert "tessera's ints are int64) (at test_native_steps.py" in native


_SPIN = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_steps as t
g = tessera.jit(t.{name})
g(np.ones(65536), 2)  # compiled (and kept for this process) before "ready"
print("ready", flush=True)
try:
    g(np.ones(65536), 10**12)
    print("returned", flush=True)
except KeyboardInterrupt:
    print("caught KeyboardInterrupt", flush=True)
"""


def spin_nest(x, n):
    # 16,384 outer turns between checkpoints, 65,536 inner ones each, a chain
    # of four dependent float operations a turn: over 5 s if only the
    # checkpoints looked for Ctrl-C.
    s = 0.0
    for i in range(n):
        for j in range(len(x)):
            s = (s * 0.999999 + x[j]) * 0.999999 + 1e-9
    return s


def spin_deep(x, n):
    s = 0.0
    for t in range(n):
        for i in range(3):
            for j in range(len(x)):
                s += x[j]
    return s


@pytest.mark.parametrize("name", ["spin_nest", "spin_deep"])
def test_sigint_stops_a_nest_of_short_inner_loops(name):
    # Inner loops of at most 65,536 turns check no Ctrl-C of their own (a
    # constant short range unrolls whole); the loops around them do, on
    # each turn, the outermost one included.
    code = _SPIN.format(here=os.path.dirname(os.path.abspath(__file__)), name=name)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # running natively by then
        p.send_signal(signal.SIGINT)
        out = p.communicate(timeout=2.5)[0]  # Ctrl-C within 100 ms; 2.5 s on a busy machine
    finally:
        p.kill()
    assert out.strip() == "caught KeyboardInterrupt"
