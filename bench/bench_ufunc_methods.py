#!/usr/bin/env python3
"""NumPy's ufunc methods inside @tessera.jit against NumPy itself (issue 31).

Each kernel is one call of a ufunc method on arrays of realistic size
(a running maximum of a price series, a scatter-add histogram, a scatter
maximum, a segment sum, an outer sum, an xor reduction); the jit function
and the plain NumPy function run on the same data in the same process.
Prints the machine, the worker-thread counts, the median of several runs of
each and the ratio tessera / NumPy (below 1: tessera faster).

Run: .venv/bin/python bench/bench_ufunc_methods.py [--rounds R] [--threads 1,2]
"""

import argparse
import statistics
import time

import numpy as np
from bench_call_overhead import machine_line

import tessera


def running_max(x):
    return np.maximum.accumulate(x, axis=1)


def histogram(counts, idx):
    np.add.at(counts, idx, 1)
    return counts


def scatter_max(a, idx, v):
    np.maximum.at(a, idx, v)
    return a


def segment_sums(x, starts):
    return np.add.reduceat(x, starts)


def outer_sum(v, w):
    return np.add.outer(v, w)


def xor_rows(m):
    return np.bitwise_xor.reduce(m, axis=1)


def cases(rng):
    x = rng.random((256, 4096))
    idx = rng.integers(0, 1000, 200_000)
    starts = np.sort(rng.choice(1_000_000, 1000, replace=False))
    return [
        ("np.maximum.accumulate (256, 4096) axis=1", running_max, lambda: (x,)),
        ("np.add.at 200k indices into 1000 bins", histogram,
         lambda: (np.zeros(1000, np.int64), idx)),
        ("np.maximum.at 200k indices", scatter_max,
         lambda: (np.zeros(1000), idx, rng.random(idx.size))),
        ("np.add.reduceat 1M floats, 1000 segments", segment_sums,
         lambda: (rng.random(1_000_000), starts)),
        ("np.add.outer 2000 x 2000", outer_sum, lambda: (x[0, :2000], x[1, :2000])),
        ("np.bitwise_xor.reduce (2048, 2048) int64 axis=1", xor_rows,
         lambda: (rng.integers(0, 1 << 40, (2048, 2048)),)),
    ]


def median_time(fn, make_args, rounds):
    times = []
    for _ in range(rounds + 1):  # the first run compiles (jit) / warms caches
        args = make_args()
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    print(machine_line())
    print("numpy", np.__version__, "(its ufunc methods run on one thread)")
    rng = np.random.default_rng(0)
    for n in [int(t) for t in args.threads.split(",")]:
        tessera.set_num_threads(n)
        print(f"\ntessera worker threads: {n}")
        print(f"{'kernel':48s} {'tessera ms':>11s} {'numpy ms':>9s} {'ratio':>6s}")
        for label, fn, make in cases(rng):
            jit = tessera.jit(fn)
            t = median_time(jit, make, args.rounds)
            r = median_time(fn, make, args.rounds)
            print(f"{label:48s} {t * 1e3:11.2f} {r * 1e3:9.2f} {t / r:6.2f}")


if __name__ == "__main__":
    main()
