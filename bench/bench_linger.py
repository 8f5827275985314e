#!/usr/bin/env python3
"""Lingering helpers: jitted loops of 50-500 us parallel operations with
tessera's helpers lingering between operations (TESSERA_LINGER_US=200, the
default) and without (0: a helper sleeps as soon as its share is done, and
the next operation wakes it).

Each configuration runs in its own process, launched alternately, --launches
of each; every process calls every kernel --calls times after a warm-up, with
a pause before each call (as a program's loop meets the kernel after other
work, and as bench_numpy_kernels.py races), each followed by NumPy's call of
the same kernel (in both configurations; its own BLAS threads), whose time is
printed beside for scale. Prints medians over all calls, the
ratio lingering / not, the thread count and the machine.

Run:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_linger.py \\
      [--launches 4] [--calls 10] [--pause 0.12]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, os.pardir, "python"))
sys.path.insert(0, _HERE)

import numpy as np  # noqa: E402

import tessera  # noqa: E402
from bench_numpy_kernels import gram_schmidt, power_iteration  # noqa: E402  (the suite's own)
from machine import machine_line  # noqa: E402


def matvec_loop(A, iters):
    v = np.ones(A.shape[0])
    for _ in range(iters):
        v = A @ v
    return v


def relax_loop(x, y, iters):
    for _ in range(iters):
        x = 0.5 * x + 0.25 * np.sqrt(y * y + 1.0)
    return x


def kernels():
    rng = np.random.default_rng(0)
    M = rng.random((1000, 1000))
    spd = M @ M.T / 1000 + np.eye(1000)
    return {
        "matvec_loop (1000 x 1000, 50 products)": (matvec_loop, (spd / 1000, 50)),
        "power_iteration (1000 x 1000, 50)": (power_iteration, (spd, 50)),
        "relax_loop (300,000 elements, 40)": (relax_loop, (rng.random(300_000),
                                                            rng.random(300_000), 40)),
        "gram_schmidt (2000 x 60)": (gram_schmidt, (rng.random((2000, 60)),)),
    }


def child(calls: int, pause: float, with_numpy: bool) -> None:
    out = {"linger_us": tessera._core.helper_linger_us(), "kernels": {}}
    for name, (fn, args) in kernels().items():
        jf = tessera.jit(fn)
        jf(*args)
        ts, tn = [], []
        for _ in range(calls):
            time.sleep(pause)
            t0 = time.perf_counter()
            jf(*args)
            ts.append(time.perf_counter() - t0)
            if with_numpy:
                time.sleep(pause)
                t0 = time.perf_counter()
                fn(*args)
                tn.append(time.perf_counter() - t0)
        out["kernels"][name] = {"tessera": ts, "numpy": tn}
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=4)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--pause", type=float, default=0.12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--numpy", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.calls, a.pause, a.numpy)
        return
    print("== lingering helpers: jitted loops of parallel operations")
    print(machine_line())
    print(f"threads: {a.threads} (TESSERA_THREADS), 1 process per launch; {a.launches} launches "
          f"of each configuration, alternating; {a.calls} calls per kernel per launch, "
          f"{a.pause:.2f} s pause before each; NumPy {np.__version__} with its own BLAS threads")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    sys.stdout.flush()
    runs = {"0": [], "200": []}
    for launch in range(a.launches):
        for linger in (["0", "200"] if launch % 2 == 0 else ["200", "0"]):
            env = dict(os.environ, TESSERA_LINGER_US=linger, TESSERA_THREADS=str(a.threads))
            # Both configurations run NumPy's calls between tessera's (the same
            # work before each tessera call); NumPy's times come from both.
            cmd = [sys.executable, __file__, "--child", "--calls", str(a.calls),
                   "--pause", str(a.pause), "--numpy"]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            runs[linger].append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(f"\n{'kernel':42s} {'NumPy':>8s} {'linger 0':>9s} {'linger 200':>11s}  ratio"
          "   (ms, medians of all calls)")
    for name in runs["0"][0]["kernels"]:
        def med(key, linger):
            return statistics.median(t for r in runs[linger] for t in r["kernels"][name][key])
        off, on = med("tessera", "0"), med("tessera", "200")
        npy = statistics.median(t for linger in runs for r in runs[linger]
                                for t in r["kernels"][name]["numpy"])
        print(f"{name:42s} {npy * 1e3:8.2f} {off * 1e3:9.2f} {on * 1e3:11.2f}  {on / off:5.2f}")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
