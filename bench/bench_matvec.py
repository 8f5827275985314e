#!/usr/bin/env python3
"""Matrix-vector products of float64 against NumPy (OpenBLAS's dgemv with its
own threads): `A @ v`, `v @ A` and `A.T @ v` for square A of sizes 200..4000.

Each measurement is one jitted call of `reps` products (the same Python
function runs as NumPy), so the per-product time excludes most of the call's
overhead; tessera at 1 and 2 threads and NumPy are called in turn, --calls
times each, and the medians are printed in microseconds per product, with
the ratio tessera (2 threads) / NumPy, the SIMD level, NumPy's BLAS threads
and the machine.

--cpu compares the kernels alone on a machine shared with other jobs: tessera
at 1 thread and NumPy with one BLAS thread (threadpoolctl), each timed by
the calling thread's CPU time (time.thread_time), so time spent descheduled
does not count.

Run:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=python .venv/bin/python \\
      bench/bench_matvec.py [--sizes 200,500,1000,2000,4000] [--calls 31] [--cpu]
"""

import argparse
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, os.pardir, "python"))
sys.path.insert(0, _HERE)

import numpy as np  # noqa: E402

import tessera  # noqa: E402
from machine import machine_line  # noqa: E402


def a_v(A, v, reps):
    w = v
    for _ in range(reps):
        w = A @ v
    return w


def v_a(A, v, reps):
    w = v
    for _ in range(reps):
        w = v @ A
    return w


def at_v(A, v, reps):
    w = v
    for _ in range(reps):
        w = A.T @ v
    return w


PRODUCTS = {"A @ v": a_v, "v @ A": v_a, "A.T @ v": at_v}


def blas_threads():
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415  (optional)
    except ImportError:
        return "unknown (no threadpoolctl)"
    return ", ".join(f"{p['internal_api']} {p['num_threads']}" for p in threadpool_info()
                     if p.get("user_api") == "blas") or "none found"


def per_product_us(fn, args, reps):
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) / reps * 1e6


def one_thread_cpu(args):
    from threadpoolctl import threadpool_limits  # noqa: PLC0415  (only this mode needs it)

    print("CPU time of the calling thread, us a product: median (best); tessera 1 thread,"
          " NumPy 1 BLAS thread")
    print(f"{'product':>8} {'n':>5} {'tessera':>17} {'NumPy':>17} {'ratio':>6}")
    rng = np.random.default_rng(0)
    for name in args.products.split(","):
        fn = PRODUCTS[name.strip()]
        jf = tessera.jit(fn, threads=1)
        for n in (int(s) for s in args.sizes.split(",")):
            A, v = rng.standard_normal((n, n)), rng.standard_normal(n)
            reps = max(5, int(4e8 / (n * n * 8)))
            jf(A, v, 2)
            ts, ns = [], []
            for _ in range(args.calls):
                t0 = time.thread_time()
                jf(A, v, reps)
                ts.append((time.thread_time() - t0) / reps * 1e6)
                with threadpool_limits(1, user_api="blas"):
                    t0 = time.thread_time()
                    fn(A, v, reps)
                    ns.append((time.thread_time() - t0) / reps * 1e6)
            mt, mn = statistics.median(ts), statistics.median(ns)
            print(f"{name:>8} {n:>5} {mt:7.1f} ({min(ts):7.1f}) {mn:7.1f} ({min(ns):7.1f})"
                  f" {mt / mn:6.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200,500,1000,2000,4000")
    parser.add_argument("--calls", type=int, default=31)
    parser.add_argument("--products", default=",".join(PRODUCTS))
    parser.add_argument("--cpu", action="store_true", help="one thread each, CPU time")
    args = parser.parse_args()
    print(machine_line())
    print(f"simd: {tessera.simd_level()}; NumPy {np.__version__}, BLAS threads: {blas_threads()}"
          f"; load average {os.getloadavg()[0]:.1f}")
    if args.cpu:
        one_thread_cpu(args)
        return
    print("medians (best of the calls in brackets), us a product")
    print(f"{'product':>8} {'n':>5} {'1t us':>17} {'2t us':>17} {'NumPy us':>17} {'2t/NumPy':>13}"
          f" {'GB/s 2t':>8}")
    rng = np.random.default_rng(0)
    for name in args.products.split(","):
        fn = PRODUCTS[name.strip()]
        jits = {t: tessera.jit(fn, threads=t) for t in (1, 2)}
        for n in (int(s) for s in args.sizes.split(",")):
            A, v = rng.standard_normal((n, n)), rng.standard_normal(n)
            reps = max(5, int(2e8 / (n * n * 8)))  # about 200 MB of matrix a call
            for t, jf in jits.items():
                got = jf(A, v, reps)
                np.testing.assert_allclose(got, fn(A, v, 1), rtol=1e-9, atol=1e-9 * n)
            times = {1: [], 2: [], "np": []}
            for _ in range(args.calls):
                for t, jf in jits.items():
                    times[t].append(per_product_us(jf, (A, v, reps), reps))
                times["np"].append(per_product_us(fn, (A, v, reps), reps))
            med = {key: statistics.median(ts) for key, ts in times.items()}
            best = {key: min(ts) for key, ts in times.items()}
            cells = " ".join(f"{med[key]:7.1f} ({best[key]:7.1f})" for key in (1, 2, "np"))
            ratio = f"{med[2] / med['np']:5.2f} ({best[2] / best['np']:5.2f})"
            print(f"{name:>8} {n:>5} {cells} {ratio} {n * n * 8 / med[2] / 1e3:8.1f}", flush=True)


if __name__ == "__main__":
    main()
