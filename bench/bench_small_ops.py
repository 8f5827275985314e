#!/usr/bin/env python3
"""Small-array elementwise operations: tessera against NumPy at n = 10 .. 10,000
(issue 31 item 5: what one operation costs when the arrays are small).

Five operations, as NumPy users write them: ``a + b``, ``a * b + c``,
``np.sqrt(a)``, ``np.sin(a)``, ``a.sum()``. Two ways each:

- "loop": the operation repeated ``--reps`` times inside one function, the
  function run by ``@tessera.jit`` and by plain NumPy (CPython's loop): the cost
  of one operation in a program (the jit's call overhead is spread over the reps);
- "call": one operation per call of a one-line function (tessera's whole call
  from Python, the argument conversion and the hand-over to a worker included).

Prints microseconds of CPU time per operation (median of ``--rounds`` interleaved rounds),
the ratio tessera / NumPy (below 1: tessera faster), the machine, the thread
count and tessera's SIMD level (``--simd`` runs each level the CPU has).

Run: .venv/bin/python bench/bench_small_ops.py [--rounds 9] [--reps 2000] [--threads 1]
     [--simd all|sse2|avx2|avx512] [--sizes 10,100,1000,10000]
"""

import argparse
import statistics
import time

import numpy as np

import tessera
from machine import machine_line


def loop_add(a, b, reps):
    for _ in range(reps):
        a = a + b
    return a


def loop_axpy(a, b, c, reps):
    for _ in range(reps):
        a = a * b + c
    return a


def loop_sqrt(a, reps):
    for _ in range(reps):
        a = np.sqrt(a)
    return a


def loop_sin(a, reps):
    for _ in range(reps):
        a = np.sin(a)
    return a


def loop_sum(a, reps):
    s = 0.0
    for _ in range(reps):
        s = s + a.sum()
    return s


def one_add(a, b):
    return a + b


def one_axpy(a, b, c):
    return a * b + c


def one_sqrt(a):
    return np.sqrt(a)


def one_sin(a):
    return np.sin(a)


def one_sum(a):
    return a.sum()


def operations(n, reps):
    """(name, loop function, loop args, one-call function, call args)."""
    rng = np.random.default_rng(n)
    a = rng.random(n) + 0.5
    b = np.full(n, 1e-6)
    half = np.full(n, 0.5)
    c = rng.random(n)
    return [
        ("a + b", loop_add, (a, b, reps), one_add, (a, b)),
        ("a * b + c", loop_axpy, (a, half, c, reps), one_axpy, (a, half, c)),
        ("np.sqrt(a)", loop_sqrt, (a, reps), one_sqrt, (a,)),
        ("np.sin(a)", loop_sin, (a, reps), one_sin, (a,)),
        ("a.sum()", loop_sum, (a, reps), one_sum, (a,)),
    ]


# CPU time of the process (all its threads), not wall time: on a shared
# machine other jobs' load then counts less (the docs' figures use it too).
def per_op_us(fn, args, count):
    t0 = time.process_time()
    fn(*args)
    return 1e6 * (time.process_time() - t0) / count


def per_call_us(fn, args, calls):
    t0 = time.process_time()
    for _ in range(calls):
        fn(*args)
    return 1e6 * (time.process_time() - t0) / calls


def race(n, reps, rounds, calls):
    rows = []
    for name, loop_fn, loop_args, one_fn, one_args in operations(n, reps):
        jit_loop, jit_one = tessera.jit(loop_fn), tessera.jit(one_fn)
        # Same answers first (the loop's bits: both compute the same operations).
        want, got = loop_fn(*loop_args), jit_loop(*loop_args)
        if not np.allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=0):
            raise AssertionError(f"{name} n={n}: tessera {got!r} != NumPy {want!r}")
        jit_one(*one_args)
        t = {k: [] for k in ("np_loop", "ts_loop", "np_call", "ts_call")}
        for r in range(rounds):
            order = [("np", loop_fn, one_fn), ("ts", jit_loop, jit_one)]
            if r % 2:
                order.reverse()
            for side, lf, of in order:
                t[f"{side}_loop"].append(per_op_us(lf, loop_args, reps))
                t[f"{side}_call"].append(per_call_us(of, one_args, calls))
        rows.append((name, {k: statistics.median(v) for k, v in t.items()}))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--reps", type=int, default=2000, help="operations per loop run")
    parser.add_argument("--calls", type=int, default=500, help="calls per round (one-call rows)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--simd", default="best", help="best, all, sse2, avx2 or avx512")
    parser.add_argument("--sizes", default="10,100,1000,10000")
    args = parser.parse_args()
    tessera.set_num_threads(args.threads)
    order = ["sse2", "avx2", "avx512"]
    # A tessera from before the SIMD dispatch (for before/after figures) has
    # baseline loops only.
    has_levels = hasattr(tessera, "simd_best")
    best = tessera.simd_best() if has_levels else "sse2"
    if args.simd == "all":
        levels = order[: order.index(best) + 1]
    elif args.simd == "best":
        levels = [best]
    else:
        levels = [args.simd]
    if not has_levels:
        levels = ["sse2 (a build without SIMD dispatch)"]
    print(machine_line())
    print(f"tessera threads: {tessera.num_threads()}; NumPy {np.__version__} (1 thread); "
          f"widest SIMD here: {best}; CPU time, medians of {args.rounds} interleaved rounds")
    sizes = [int(s) for s in args.sizes.split(",")]
    for level in levels:
        if has_levels:
            tessera.set_simd_level(level)
        print(f"\nSIMD level {level} (us per operation; ratio tessera / NumPy)")
        print(f"{'op':<11} {'n':>6} | {'NumPy loop':>10} {'jit loop':>9} {'ratio':>6} | "
              f"{'NumPy call':>10} {'jit call':>9} {'ratio':>6}")
        for n in sizes:
            for name, m in race(n, args.reps, args.rounds, args.calls):
                print(f"{name:<11} {n:>6} | {m['np_loop']:>10.3f} {m['ts_loop']:>9.3f} "
                      f"{m['ts_loop'] / m['np_loop']:>6.2f} | {m['np_call']:>10.3f} "
                      f"{m['ts_call']:>9.3f} {m['ts_call'] / m['np_call']:>6.2f}")


if __name__ == "__main__":
    main()
