#!/usr/bin/env python3
"""The fixed cost of one vectorised operation on 1,000 float64 in a jit loop (issue 31, item 5).

Each case is a loop of 10,000 turns of one small array operation, run as NumPy, as
``tessera.jit(f, threads=1)`` and ``threads=2``, interleaved, median of 5; prints microseconds
per turn. With ``TESSERA_FAST_LOOPS=0`` in the environment the loops run on the general
evaluation throughout (by default such loops leave the loop interpreter for it once their
array operations outweigh the rest).

Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=python LD_LIBRARY_PATH=build \\
         .venv/bin/python bench/bench_vector_op_cost.py [case,case...]
"""

import os
import platform
import sys
import time

import numpy as np

import tessera

N = 10_000


def iadd(v, w):
    for _ in range(10000):
        v += w
    return v


def dotcols(a, b):
    s = 0.0
    for i in range(10000):
        s += np.dot(a[:, i % 60], b[:, i % 60])
    return s


def mulcol(Q):
    t = Q[:, 0]
    for i in range(10000):
        t = 0.5 * Q[:, i % 60]
    return t


def isubcol(v, Q):
    for i in range(10000):
        v -= 0.5 * Q[:, i % 60]
    return v


def gsinner(v, Q, A):
    for i in range(10000):
        v -= np.dot(Q[:, i % 60], A[:, 3]) * Q[:, i % 60]
    return v


_R = np.random.default_rng(0)
_A, _Q = _R.random((1000, 60)), _R.random((1000, 60))
CASES = {
    "iadd": (iadd, lambda: (np.zeros(1000), np.ones(1000))),
    "dotcols": (dotcols, lambda: (_A, _Q)),
    "mulcol": (mulcol, lambda: (_Q,)),
    "isubcol": (isubcol, lambda: (np.zeros(1000), _Q)),
    "gsinner": (gsinner, lambda: (np.zeros(1000), _Q, _A)),
}


def main(argv):
    names = argv[0].split(",") if argv else list(CASES)
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f
                      if line.startswith("model name")), platform.machine())
    print(f"machine: {model}, {os.cpu_count()} cores; NumPy {np.__version__} as written "
          f"(its own threads), tessera at 1 and 2 threads; ratio = tessera 2t / NumPy")
    for name in names:
        f, make = CASES[name]
        j1, j2 = tessera.jit(f, threads=1), tessera.jit(f, threads=2)
        want = f(*make())
        assert np.allclose(j1(*make()), want) and np.allclose(j2(*make()), want)
        times = {}
        for _ in range(5):
            for label, g in (("numpy", f), ("1t", j1), ("2t", j2)):
                args = make()
                t0 = time.perf_counter()
                g(*args)
                times.setdefault(label, []).append(time.perf_counter() - t0)
        us = {k: sorted(v)[2] / N * 1e6 for k, v in times.items()}
        print(f"{name:8s} us per turn: NumPy {us['numpy']:.3f}  tessera 1t {us['1t']:.3f}  "
              f"2t {us['2t']:.3f}  ratio {us['2t'] / us['numpy']:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
