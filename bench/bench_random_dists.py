#!/usr/bin/env python3
"""A Monte Carlo kernel drawing from NumPy's distributions: tessera.jit against NumPy and
Numba.

The kernel is an insurance portfolio's aggregate loss: per policy a Poisson claim count, a
gamma total claim size (the sum of n gamma(k) claims is gamma(n k), so the shape differs by
policy), a beta recovery rate; the result is the mean loss and the 99% quantile. tessera
and NumPy run the same vectorised code (tessera: python/tessera/_random_lib.py's
distributions); Numba runs its best form, an @njit loop drawing one value at a time (its
np.random takes scalar parameters only), single-threaded as by default. Each side is checked
first (the mean within 5 standard errors of NumPy's, the 99% quantile within 5%: the
streams differ, the distributions do not),
then timed interleaved (the order rotating each round) after a warm-up; medians of --runs.
A second race runs the loop form (one value a call, size=None) on --loop-policies policies:
tessera.jit of the loop, Numba's @njit of it, and CPython running it on NumPy (in tessera's
loop, poisson(LAM) and beta(RA, RB) take the one-draw forms of constant parameters; gamma(n *
SHAPE, SCALE), a shape known only at run time, takes its one-draw form after a check of the
parameters as the loop runs, the general form being a branch that leaves the native code only
when taken: the whole loop is native code).

Run:
  .venv/bin/python bench/bench_random_dists.py [--policies 400000] [--loop-policies 20000]
      [--runs 7]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(_HERE, os.pardir, "python"))

from machine import machine_line  # noqa: E402

LAM, SHAPE, SCALE, RA, RB = 0.8, 2.5, 1000.0, 2.0, 5.0


def aggregate_loss(seed, m):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(LAM, m)
    severity = rng.gamma(counts * SHAPE, SCALE)
    recovery = rng.beta(RA, RB, m)
    loss = severity * (1.0 - recovery)
    return loss.mean(), np.quantile(loss, 0.99), loss.std() / np.sqrt(loss.shape[0])


def aggregate_loss_loop(seed, m):
    np.random.seed(seed)
    loss = np.empty(m)
    for i in range(m):
        n = np.random.poisson(LAM)
        s = np.random.gamma(n * SHAPE, SCALE) if n > 0 else 0.0
        loss[i] = s * (1.0 - np.random.beta(RA, RB))
    return loss.mean(), np.quantile(loss, 0.99), loss.std() / np.sqrt(loss.shape[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", type=int, default=400_000)
    ap.add_argument("--loop-policies", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    m = args.policies

    import tessera

    print("== Monte Carlo with NumPy's distributions: aggregate loss (poisson, gamma, beta)")
    print(machine_line())
    print(f"NumPy {np.__version__}; {m} policies; median of {args.runs} interleaved runs")
    print("load average at start: %.2f %.2f %.2f (2 cores: above ~0.5 others share them)"
          % os.getloadavg())
    sides = {"numpy": lambda: aggregate_loss(1, m)}
    for threads in (1, 2):
        jitted = tessera.jit(aggregate_loss, threads=threads)
        t = time.perf_counter()
        jitted(1, 1000)
        print(f"tessera {threads} thread(s): first call (translation) "
              f"{time.perf_counter() - t:.2f} s")
        sides[f"tessera-{threads}t"] = (lambda j: lambda: j(1, m))(jitted)
    try:
        import numba

        njit = numba.njit(cache=False)(aggregate_loss_loop)
        t = time.perf_counter()
        njit(1, 1000)
        print(f"Numba {numba.__version__} (@njit loop, 1 thread): first call "
              f"{time.perf_counter() - t:.2f} s")
        sides["numba"] = lambda: njit(1, m)
    except ImportError:
        print("Numba: not installed (pip install numba)")

    race("vectorised", sides, aggregate_loss(1, m), args.runs)

    ml = args.loop_policies
    print(f"\n-- loop form, one value a call: {ml} policies")
    loops = {"cpython+numpy": lambda: aggregate_loss_loop(1, ml)}
    for threads in (1, 2):
        jitted = tessera.jit(aggregate_loss_loop, threads=threads)
        t = time.perf_counter()
        jitted(1, 100)
        print(f"tessera {threads} thread(s): first call (translation) "
              f"{time.perf_counter() - t:.2f} s")
        loops[f"tessera-{threads}t"] = (lambda j: lambda: j(1, ml))(jitted)
    if "numba" in sides:
        loops["numba"] = lambda: njit(1, ml)
    race("loop", loops, aggregate_loss_loop(1, ml), max(3, args.runs // 2))
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())


def race(what, sides, want, runs):
    for name, fn in sides.items():
        got = fn()
        ok = abs(got[0] - want[0]) < 5 * want[2] and abs(got[1] / want[1] - 1) < 0.05
        print(f"check {name}: mean {got[0]:.1f}, q99 {got[1]:.1f} (NumPy {want[0]:.1f}, "
              f"{want[1]:.1f}): {'ok' if ok else 'DIFFERS'}")

    names = list(sides)
    times = {n: [] for n in names}
    for r in range(1 + runs):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            time.sleep(0.1)
            t = time.perf_counter()
            sides[n]()
            if r > 0:
                times[n].append(time.perf_counter() - t)
    med = {n: statistics.median(ts) for n, ts in times.items()}
    for n in names:
        print(f"{n:12s} median {med[n] * 1e3:8.1f} ms  (min {min(times[n]) * 1e3:.1f}, "
              f"max {max(times[n]) * 1e3:.1f})")
    best_peer = min((med[n], n) for n in names if not n.startswith("tessera"))
    for threads in (1, 2):
        t = med[f"tessera-{threads}t"]
        print(f"{what}: tessera {threads}t / {names[0]} = {t / med[names[0]]:.2f}; / best peer "
              f"({best_peer[1]}) = {t / best_peer[0]:.2f}")


if __name__ == "__main__":
    main()
