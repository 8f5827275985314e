#!/usr/bin/env python3
"""Parallel loops: tessera's `prange` (docs/runtime.md, "Parallel loops") at
1 and 2 threads against Numba's `@njit(parallel=True)` with `numba.prange`
at 1 and 2 threads, on loops with enough work to split: a Mandelbrot set by
rows, pairwise distances by loops, and a sum reduction.

Each tool runs in a process of its own (Numba's thread pool and tessera's
workers would otherwise share the two cores); within a process each kernel is
called once (first call: translation and compile), then the thread counts
alternate (1, 2, 1, 2, ...) for `--runs` rounds, so both see the same moments
of this shared machine; figures are medians. The load average is printed
before and after, and the CPU time per wall time of the 2-thread calls (2.0
when both threads ran throughout; on a machine loaded by other jobs the
second thread gets little of a core, and no tool can be faster at 2). Numba is a benchmark-only peer (tessera never imports it).

Run:
  .venv/bin/python bench/bench_prange.py [--runs 7] [--filter NAME]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from machine import machine_line  # noqa: E402

try:
    from tessera import prange
except ImportError:  # the Numba worker without tessera on its path
    prange = range


def mandelbrot_rows(out, max_iter):
    h = out.shape[0]
    w = out.shape[1]
    for i in prange(h):
        for j in range(w):
            cr = -2.0 + 3.0 * j / w
            ci = -1.2 + 2.4 * i / h
            zr = 0.0
            zi = 0.0
            n = 0
            while n < max_iter and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            out[i, j] = n
    return out


def pairwise_rows(X, D):
    n = X.shape[0]
    for i in prange(n):
        for j in range(n):
            d = 0.0
            for k in range(X.shape[1]):
                t = X[i, k] - X[j, k]
                d += t * t
            D[i, j] = np.sqrt(d)
    return D


def sum_reduction(x):
    s = 0.0
    for i in prange(x.shape[0]):
        s += np.sqrt(x[i]) * x[i]
    return s


def cases():
    rng = np.random.default_rng(0)
    X = rng.random((1500, 8))
    x = rng.random(8_000_000)
    return [
        ("mandelbrot_rows (1200x800, 200)", mandelbrot_rows,
         lambda: (np.zeros((800, 1200), dtype=np.int64), 200)),
        ("pairwise_rows (1500x8)", pairwise_rows, lambda: (X, np.zeros((1500, 1500)))),
        ("sum_reduction (8M)", sum_reduction, lambda: (x,)),
    ]


def worker(tool, runs, filt):
    if tool == "tessera":
        import tessera

        wrap = tessera.jit
        set_threads = tessera.set_num_threads
    else:
        import numba

        globals()["prange"] = numba.prange
        wrap = lambda f: numba.njit(parallel=True)(f)  # noqa: E731
        set_threads = numba.set_num_threads
    out = {}
    for name, fn, make in cases():
        if filt and filt not in name:
            continue
        f = wrap(fn)
        args = make()
        t = time.perf_counter()
        f(*args)
        first = time.perf_counter() - t
        times = {1: [], 2: []}
        busy = []  # CPU seconds per wall second at 2 threads: 2.0 when both ran throughout
        for _ in range(runs):
            for th in (1, 2):
                set_threads(th)
                args = make()
                c = time.process_time()
                t = time.perf_counter()
                f(*args)
                times[th].append(time.perf_counter() - t)
                if th == 2:
                    busy.append((time.process_time() - c) / times[th][-1])
        out[name] = {"first": first, "t1": statistics.median(times[1]),
                     "t2": statistics.median(times[2]), "busy2": statistics.median(busy)}
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--filter", default="")
    ap.add_argument("--worker", default="")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.runs, a.filter)
        return
    print(machine_line())
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    res = {}
    for tool in ("tessera", "numba"):
        r = subprocess.run([sys.executable, __file__, "--worker", tool, "--runs", str(a.runs),
                            "--filter", a.filter], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{tool}: failed\n{r.stderr[-2000:]}")
            continue
        res[tool] = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"medians of {a.runs} runs, thread counts alternating; first call in ms")
    print("| kernel | tessera 1 thr ms | tessera 2 thr ms | tessera speed-up | "
          "Numba 1 thr ms | Numba 2 thr ms | Numba speed-up | tessera/Numba at 2 | "
          "CPU/wall at 2 tessera | CPU/wall at 2 Numba | first call tessera | first call Numba |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in res.get("tessera", {}):
        t = res["tessera"][name]
        n = res.get("numba", {}).get(name)
        row = [name, f"{1e3 * t['t1']:.2f}", f"{1e3 * t['t2']:.2f}", f"{t['t1'] / t['t2']:.2f}x"]
        if n:
            row += [f"{1e3 * n['t1']:.2f}", f"{1e3 * n['t2']:.2f}", f"{n['t1'] / n['t2']:.2f}x",
                    f"{t['t2'] / n['t2']:.2f}", f"{t['busy2']:.2f}", f"{n['busy2']:.2f}",
                    f"{1e3 * t['first']:.0f}", f"{1e3 * n['first']:.0f}"]
        else:
            row += ["-"] * 4 + [f"{t['busy2']:.2f}", "-", f"{1e3 * t['first']:.0f}", "-"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
