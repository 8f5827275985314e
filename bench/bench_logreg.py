"""Logistic regression on 100,000 x 100 data: the same NumPy function run
through @tessera.jit and as plain NumPy, on the same machine; and the call
overhead of a jit function with a trivial body.

run: python bench/bench_logreg.py [--n 100000] [--d 100] [--iterations 20] [--repeats 5]
"""

import argparse
import os
import statistics
import time

import numpy as np

import tessera
from machine import cpu_model


def train(x, y, iterations, learning_rate):
    n, d = x.shape
    w = np.zeros(d)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        w = w - learning_rate * (x.T @ (p - y)) / n
    return w


def trivial(x):
    return x




def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        tessera.set_num_threads(args.threads)

    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; tessera threads: "
          f"{tessera.num_threads()}; numpy {np.__version__}")

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.n, args.d))
    y = (x @ rng.normal(size=args.d) > 0).astype(np.float64)
    jit_train = tessera.jit(train)

    w_np = train(x, y, args.iterations, 0.5)
    w_ts = jit_train(x, y, args.iterations, 0.5)  # compiles
    np.testing.assert_allclose(w_ts, w_np, rtol=1e-8, atol=1e-12)

    t_np = median_time(lambda: train(x, y, args.iterations, 0.5), args.repeats)
    t_ts = median_time(lambda: jit_train(x, y, args.iterations, 0.5), args.repeats)
    print(f"logistic regression {args.n} x {args.d}, {args.iterations} iterations, "
          f"median of {args.repeats}:")
    print(f"  numpy          {t_np * 1e3:9.2f} ms")
    print(f"  tessera.jit    {t_ts * 1e3:9.2f} ms")
    print(f"  ratio numpy / tessera = {t_np / t_ts:.2f} (above 1: tessera is faster)")

    jit_trivial = tessera.jit(trivial)
    small = np.ones(4)
    jit_trivial(small)
    calls = 20000
    per_call = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(calls):
            jit_trivial(small)
        per_call.append((time.perf_counter() - start) / calls)
    plain = median_time(lambda: [trivial(small) for _ in range(calls)], args.repeats) / calls
    overhead = statistics.median(per_call)
    print(f"call overhead of a trivial jit function: {overhead * 1e6:.2f} us per call "
          f"(goal < 20 us; plain Python call {plain * 1e6:.3f} us)")


if __name__ == "__main__":
    main()
