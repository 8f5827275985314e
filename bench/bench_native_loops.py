#!/usr/bin/env python3
"""Element-loop kernels: tessera's register interpreter (TESSERA_NATIVE=0)
against its native code (LLVM, tessera/lang/native.cpp) and Numba's @njit
(single-threaded, as by default), with first-call (compile) times.

The kernels are bench_numpy_kernels.py's element loops plus a few of the
kinds issue 31 lists (Julia set per point, 2-D convolution by loops, edit
distance, pairwise distances by loops). Each mode runs in a process of its
own (the interpreter/native switch is read once per process); within a
process each kernel is called once (first call: translation + compile +
run), then `--runs` times, median reported. Numba is a benchmark-only
peer: `pip install numba` if it is missing (tessera never imports it).

Run:
  .venv/bin/python bench/bench_native_loops.py [--runs 5] [--filter NAME]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from bench_numpy_kernels import (axpy_loop, collatz_lengths, histogram_loop, lcg,  # noqa: E402
                                 mandelbrot_loop, prefix_sum_loop, smooth_loop, thomas_solve)


def julia_loop(width, height, cr, ci, max_iter):
    out = np.zeros((height, width), dtype=np.int64)
    for j in range(height):
        for i in range(width):
            zr = -1.5 + 3.0 * i / width
            zi = -1.5 + 3.0 * j / height
            n = 0
            while n < max_iter and zr * zr + zi * zi < 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            out[j, i] = n
    return out


def conv2d_loop(img, k):
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


def pairwise_loop(X):
    n = X.shape[0]
    d = X.shape[1]
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            s = 0.0
            for k in range(d):
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
    return D[n, m]


def wave_loop(u, v, c, steps):
    n = len(u)
    for t in range(steps):
        for i in range(1, n - 1):
            v[i] = 2.0 * u[i] - v[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(n):
            tmp = u[i]
            u[i] = v[i]
            v[i] = tmp
    return u


def mandelbrot32_loop(cre, cim, max_iter):
    # float32 coordinates: the iteration in float32 (NumPy 2 keeps float32
    # with Python floats).
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


def histogram32_loop(data, nbins, lo, width):
    # int32 data, int32 bins and counts.
    counts = np.zeros(nbins, dtype=np.int32)
    for i in range(len(data)):
        b = (data[i] - lo) // width
        if b >= 0 and b < nbins:
            counts[b] += 1
    return counts


def _kernels():
    rng = np.random.default_rng(1)
    x = rng.random(1_000_000)
    x32 = x.astype(np.float32)
    d32 = rng.integers(-1000, 100_000, 300_000).astype(np.int32)
    return {
        "axpy32_loop": (axpy_loop, lambda: (2.0, x32.copy(), x32.copy())),
        "prefix_sum32_loop": (prefix_sum_loop, lambda: (x32.copy(),)),
        "histogram32_loop": (histogram32_loop, lambda: (d32.copy(), 64, 0, 1563)),
        "mandelbrot32_loop": (mandelbrot32_loop,
                              lambda: (np.linspace(-2.0, 1.0, 300, dtype=np.float32),
                                       np.linspace(-1.5, 1.5, 200, dtype=np.float32), 200)),
        "axpy_loop": (axpy_loop, lambda: (2.0, x.copy(), x.copy())),
        "prefix_sum_loop": (prefix_sum_loop, lambda: (x.copy(),)),
        "smooth_loop": (smooth_loop, lambda: (x.copy(),)),
        "histogram_loop": (histogram_loop, lambda: (x[:300_000].copy(), 64, 0.0, 1.0)),
        "lcg": (lcg, lambda: (1_000_000, 7)),
        "mandelbrot_loop": (mandelbrot_loop, lambda: (-2.0, 1.0, -1.5, 1.5, 300, 200, 200)),
        "julia_loop": (julia_loop, lambda: (300, 200, -0.8, 0.156, 200)),
        "thomas_solve": (thomas_solve, lambda: (x[:200_000] * 0.1, x[:200_000] + 2.0,
                                                x[:200_000] * 0.1, x[:200_000].copy())),
        "collatz_lengths": (collatz_lengths, lambda: (20_000,)),
        "conv2d_loop": (conv2d_loop, lambda: (rng.random((200, 200)), rng.random((5, 5)))),
        "pairwise_loop": (pairwise_loop, lambda: (rng.random((200, 8)),)),
        "edit_distance": (edit_distance, lambda: (rng.integers(0, 4, 600), rng.integers(0, 4, 600))),
        "wave_loop": (wave_loop, lambda: (np.sin(np.linspace(0, 6, 20_000)), np.zeros(20_000),
                                          0.2, 50)),
    }


def _worker(mode, runs, names):
    kernels = _kernels()
    if mode == "numba":
        import numba
        wrap = numba.njit
    else:
        import tessera
        wrap = tessera.jit
    out = {}
    for name in names:
        f, make = kernels[name]
        g = wrap(f)
        try:
            args = make()
            t0 = time.perf_counter()
            g(*args)
            first = time.perf_counter() - t0
            times = []
            for _ in range(runs):
                args = make()
                t0 = time.perf_counter()
                g(*args)
                times.append(time.perf_counter() - t0)
            out[name] = {"first": first, "median": statistics.median(times)}
        except Exception as e:  # noqa: BLE001 - a kernel a tool refuses is reported
            out[name] = {"error": f"{type(e).__name__}: {str(e)[:80]}"}
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--filter", default="")
    ap.add_argument("--worker", default="")
    ap.add_argument("--names", default="")
    a = ap.parse_args()
    if a.worker:
        _worker(a.worker, a.runs, a.names.split(","))
        return
    try:
        import numba  # noqa: F401
        have_numba = True
    except ImportError:
        print("numba is missing: `pip install numba` into the benchmark environment for its column")
        have_numba = False
    names = [n for n in _kernels() if a.filter in n]
    modes = [("interpreter", {"TESSERA_NATIVE": "0"}), ("native", {})]
    if have_numba:
        modes.append(("numba", {}))
    res = {}
    for mode, env in modes:
        r = subprocess.run([sys.executable, __file__, "--worker", mode, "--runs", str(a.runs),
                            "--names", ",".join(names)], env=dict(os.environ, **env),
                           capture_output=True, text=True, timeout=3000)
        if r.returncode != 0:
            print(mode, "failed:", r.stderr[-2000:])
            return 1
        res[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    from machine import machine_line  # noqa: PLC0415 - bench/ is on sys.path from here

    print(machine_line())
    print("tessera: tessera.jit, the loops' scalar fast path (interp: TESSERA_NATIVE=0; native: "
          "LLVM); numba: numba.njit (its default: one thread, no fastmath, no parallel); each "
          f"a process of its own; medians of {a.runs} calls after a first (compiling) one")
    print(f"{'kernel':18s} {'interp ms':>10s} {'native ms':>10s} {'numba ms':>9s} "
          f"{'nat/numba':>9s} {'1st nat ms':>10s} {'1st numba ms':>12s}")
    ratios = []
    for n in names:
        row = [res[m].get(n, {}) for m, _ in modes]
        def ms(d, k="median"):
            return f"{d[k] * 1e3:.2f}" if k in d else d.get("error", "-")[:10]
        line = f"{n:18s} {ms(row[0]):>10s} {ms(row[1]):>10s}"
        if have_numba:
            line += f" {ms(row[2]):>9s}"
            if "median" in row[1] and "median" in row[2]:
                q = row[1]["median"] / row[2]["median"]
                ratios.append(q)
                line += f" {q:9.2f}"
            else:
                line += f" {'-':>9s}"
            line += f" {ms(row[1], 'first'):>10s} {ms(row[2], 'first'):>12s}"
        print(line)
    if ratios:
        gm = math.exp(sum(math.log(q) for q in ratios) / len(ratios))
        print(f"native / numba: geometric mean {gm:.2f}x, worst {max(ratios):.2f}x "
              f"over {len(ratios)} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
