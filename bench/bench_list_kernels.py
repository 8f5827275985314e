"""The published kernels that work on lists of lists and string characters
(bench/published_kernels.py: levenshtein, knapsack01), raced on a shared machine
as the best of many interleaved calls: tessera.jit, Numba @njit and CPython on
the same arguments, each call timed alone, each kernel's minimum over the rounds
(steadier than a median when other jobs take the cores; docs/benchmarks.md,
"Lists of lists and string characters in native code").

    PYTHONPATH=python .venv/bin/python bench/bench_list_kernels.py [--rounds 40] [--threads 2]
"""

import argparse
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import published_kernels  # noqa: E402

import tessera  # noqa: E402

KERNELS = ("levenshtein", "knapsack01")


def _kernel(name):
    for group in vars(published_kernels).values():
        if isinstance(group, list):
            for d in group:
                if isinstance(d, dict) and d.get("name") == name:
                    return d
    raise KeyError(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--filter", default=",".join(KERNELS))
    a = ap.parse_args()
    try:
        import numba
    except ImportError:
        numba = None
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f}; tessera threads {a.threads}; "
          f"best of {a.rounds} interleaved calls, ms")
    for name in a.filter.split(","):
        d = _kernel(name)
        args = d["setup"](False)
        peers = {"tessera": tessera.jit(d["func"], threads=a.threads), "cpython": d["func"]}
        if numba is not None:
            peers["numba"] = numba.njit(d["func"])
        expected = d["func"](*args)
        for peer, f in peers.items():
            got = f(*args)  # compiles; the answers must agree
            if got != expected:
                raise SystemExit(f"{name}: {peer} gave {got!r}, CPython {expected!r}")
        best = dict.fromkeys(peers, float("inf"))
        for _ in range(a.rounds):
            for peer, f in peers.items():
                t = time.perf_counter()
                f(*args)
                best[peer] = min(best[peer], time.perf_counter() - t)
        line = "  ".join(f"{p} {t * 1e3:8.3f}" for p, t in best.items())
        ratio = f"  tessera/numba {best['tessera'] / best['numba']:.2f}" if "numba" in best else ""
        print(f"{name:12s} {line}{ratio}")


if __name__ == "__main__":
    main()
