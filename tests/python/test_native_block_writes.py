"""Row and plane writes in native loops (docs/runtime.md, "Row writes"): `history[t] =
cells`, `vol[i] = plane`, `vol[i, j] = row` of an array variable of the destination's
dtype are copies by a helper inside the native code, so a loop around them (an automaton's
steps, a simulation keeping its frames) no longer runs on the interpreter. NumPy's meaning
throughout: negative indices, IndexError at the line, a value of another shape broadcast or
refused (ValueError), a source sharing memory with the destination read whole first, the
arrays written as NumPy writes them. Each case agrees with NumPy, the loop interpreter and
the general evaluation at 1 and 2 threads, and the loops whose rows fit end natively."""

import os
import sys

import numpy as np
import pytest
from jit_check import assert_loops_end_natively, check, every_path_prints_the_same

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
# Rule 110 keeping every generation: a row write and a new uint8 row per step.
from unseen_kernels import elementary_ca  # noqa: E402 - bench/, on the path above


def automaton_like(cells, steps, rule):
    # elementary_ca on the caller's cells (int64 or bool), new rows by zeros_like.
    width = len(cells)
    history = np.zeros((steps, width), dtype=cells.dtype)
    for t in range(steps):
        history[t] = cells
        nxt = np.zeros_like(cells)
        for i in range(width):
            idx = 4 * int(cells[i - 1]) + 2 * int(cells[i]) + int(cells[(i + 1) % width])
            nxt[i] = (rule >> idx) & 1
        cells = nxt
    return history


def _seed(width, dtype):
    c = np.zeros(width, dtype=dtype)
    c[width // 2] = 1
    return c


def frames(n, steps):
    # A 3-d history of 2-d states written plane by plane, newest first (a
    # negative index), and a row of a plane by two ints.
    state = np.linspace(0.0, 1.0, n * n).reshape(n, n)
    vol = np.zeros((steps, n, n))
    for s in range(steps):
        vol[-1 - s] = state
        nxt = np.empty((n, n))
        for i in range(n):
            for j in range(n):
                nxt[i, j] = 0.5 * (state[i, j] + state[(i + 1) % n, j])
        state = nxt
        vol[s, 0] = state[n - 1]
    return vol, state


def int32_rows(n):
    a = np.zeros((n, 4), dtype=np.int32)
    row = np.arange(4, dtype=np.int32)
    for i in range(n):
        for k in range(4):
            row[k] = row[k] * 3 + i
        a[i] = row
    return a


def shared_memory(n):
    # The source is a row of the destination (itself, at the end): NumPy reads
    # it first.
    a = np.arange(float(n * 5)).reshape(n, 5)
    for i in range(1, n):
        for k in range(5):
            a[i - 1, k] += 1.0
        a[i] = a[i - 1]
        a[i - 1] = a[i - 1]
        a[-1] = a[i]
    return a


def out_of_bounds(n):
    a = np.zeros((n, 3))
    row = np.ones(3)
    for i in range(n + 1):
        for k in range(3):
            row[k] += i
        a[i] = row
    return a


def rows_of_length(n, k):
    # A value row of one element is broadcast (NumPy's); of five, refused (ValueError).
    a = np.zeros((n, 4))
    v = np.ones(k)
    for i in range(n):
        for j in range(k):
            v[j] = i * 2.0 + j
        a[i] = v
    return a


def other_dtype(n):
    # float32 rows into a float64 table: cast by NumPy (the interpreter's path).
    a = np.zeros((n, 3))
    r = np.ones(3, dtype=np.float32)
    for i in range(n):
        for k in range(3):
            r[k] = r[k] * np.float32(1.5)
        a[i] = r
    return a


CASES = [(elementary_ca, (61, 30, 110)),
         (automaton_like, (_seed(40, np.int64), 25, 30)),
         (automaton_like, (_seed(33, np.bool_), 20, 90)),
         (frames, (6, 5)),
         (int32_rows, (50,)),
         (shared_memory, (8,)),
         (out_of_bounds, (4,)),
         (rows_of_length, (6, 1)),
         (rows_of_length, (3, 5)),
         (other_dtype, (5,))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES,
                         ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_numpy(f, args, threads):
    check(f, *args, rtol=0, atol=0)


def test_native_interpreter_and_general_print_the_same():
    native, log = every_path_prints_the_same(__name__)
    assert "IndexError" in native and "ValueError" in native
    assert_loops_end_natively(log, [elementary_ca, automaton_like, frames, int32_rows,
                                    shared_memory])
