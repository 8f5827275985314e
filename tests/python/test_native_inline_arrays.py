"""Functions called inline in a native loop with other arrays at each call (docs/runtime.md,
"Native loops"): a helper first called inside the loop, given (u, v) at one call and (v, u) at
the next, as the power iteration of spectral_norm writes it. Its parameters' registers take
each call's arrays; the loop is native code, and the results and the arrays written are
Python's, the interpreter's and the general evaluation's, at 1 and 2 threads."""

import numpy as np
from jit_check import check, loop_log_lines, run_on_every_path

import tessera


def power_steps(n, sweeps):
    def entry(i, j):
        return 1.0 / ((i + j) * (i + j + 1) // 2 + i + 1)

    def times(u, out):
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += entry(i, j) * u[j]
            out[i] = s

    def times_t(u, out):
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += entry(j, i) * u[j]
            out[i] = s

    def both(u, out, tmp):
        times(u, tmp)
        times_t(tmp, out)

    u = np.ones(n)
    v = np.zeros(n)
    tmp = np.zeros(n)
    for _ in range(sweeps):
        both(u, v, tmp)
        both(v, u, tmp)
    return u, v, tmp


def swap_scale(a, b, k):
    def scale_into(src, dst, c):
        for i in range(len(src)):
            dst[i] = src[i] * c + dst[i]

    for t in range(k):
        scale_into(a, b, 0.5)
        scale_into(b, a, -0.25)
    return a, b


def swap_sizes(a, b):
    # the second call's arrays have another length: the same code must read theirs
    def total(x):
        s = 0
        for i in range(len(x)):
            s += x[i]
        return s

    out = 0
    for t in range(3):
        out += total(a) - total(b)
        a, b = b, a
    return out


CASES = [(power_steps, (7, 3)), (swap_scale, (np.arange(5.0), np.ones(5), 4)),
         (swap_sizes, (np.arange(6), np.arange(9)))]

_SCRIPT = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_inline_arrays as t
for threads in (1, 2):
    for f, args in t.CASES:
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        print(f.__name__, threads, repr(tessera.jit(f, threads=threads)(*a)), repr(a))
"""


def test_helpers_given_other_arrays_at_each_call_are_pythons():
    for f, args in CASES:
        check(f, *args, rtol=0, atol=0)


def test_the_loop_is_native_and_every_path_prints_the_same():
    runs = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    assert runs["native"][0] == runs["interpreter"][0] == runs["general"][0]
    log = runs["native"][1]
    for f in (power_steps, swap_scale):
        assert loop_log_lines(log, f, "native code compiled"), log
        assert not loop_log_lines(log, f, "no native code"), log
