#!/usr/bin/env python3
"""Unseen kernels: NumPy/Numba-style kernels nobody here wrote, raced against CPython and Numba.

Issue 31's acceptance as an outsider would test it: kernels written the way NumPy and
Numba tutorials, benchmark collections and Stack Overflow answers publish them
(bench/unseen_kernels.py), with nothing changed for tessera, each wrapped in
``tessera.jit`` by the harness. The machinery is bench_numpy_kernels.py's (imported:
its Kernel, checks, timing rounds, Numba peer and columns); only the list of kernels
and the driver are here, since its driver runs its own list.

Run:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=python LD_LIBRARY_PATH=build \
      .venv/bin/python bench/bench_unseen_kernels.py [--runs 5] [--filter NAME] [--quick]
      [--check-only] [--no-numba] [--cold] [--json FILE] [--in-process]
"""

import argparse
import json
import math
import os
import sys

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

import bench_numpy_kernels as suite  # noqa: E402 - bench/, on the path above
import unseen_kernels as uk  # noqa: E402
from bench_numpy_kernels import Kernel  # noqa: E402


def _r(seed=42):
    return np.random.default_rng(seed)


def _q(quick, small, big):
    return small if quick else big


# ---------------------------------------------------------------- inputs


def _image(n, m, dtype=np.float64, seed=3):
    return _r(seed).random((n, m)).astype(dtype)


def _life(n, m, seed=5):
    return (_r(seed).random((n, m)) < 0.35).astype(np.int64)


def _heat(n, seed=7):
    u = _r(seed).random((n, n))
    mask = _r(seed + 1).random((n, n)) < 0.8
    return u, mask, 0.2


def _graph(n, seed=13):
    r = _r(seed)
    d = np.where(r.random((n, n)) < 0.3, r.random((n, n)) * 10, np.inf)
    np.fill_diagonal(d, 0.0)
    return (d,)


def _knapsack(n, cap, seed=17):
    r = _r(seed)
    return r.integers(1, 100, n), r.integers(1, max(2, cap // 4), n), cap


def _dna(n, seed=19):
    r = _r(seed)
    return r.integers(0, 4, n).astype(np.uint8), r.integers(0, 4, n + n // 7).astype(np.uint8), 1, -1, -2


def _bodies(n, steps, seed=23):
    r = _r(seed)
    return r.random((n, 3)), r.random((n, 3)) * 0.01, r.random(n) + 0.5, steps, 0.001, 0.01


def _runs(n, seed=29):
    r = _r(seed)
    return (np.repeat(r.integers(0, 5, n // 4), r.integers(1, 7, n // 4)),)


# ---------------------------------------------------------------- statistics of random kernels


def _check_ising(result, args):
    n, beta, sweeps = args
    # (np.float64 from NumPy and tessera, a float from Numba: the test checks the kind)
    assert isinstance(result, float), f"ising: {type(result)} is not a float"
    # Started all up, below the critical temperature (beta 0.4 < 0.44 is above it; the
    # chain still stays mostly magnetised over a few sweeps from a cold start).
    assert 0.0 < result <= 1.0, f"ising: magnetisation {result} outside (0, 1]"


def _check_passage(result, args):
    walks, barrier, max_steps = args
    assert type(result) is tuple and len(result) == 2, f"first passage: {result!r}"
    mean, escaped = result
    assert type(mean) is float and type(escaped) is int, f"first passage kinds: {result!r}"
    # A symmetric walk leaves [-b, b] after b*b steps on average.
    assert escaped > 0.9 * walks, f"first passage: {escaped} of {walks} escaped"
    assert 0.6 * barrier**2 < mean < 1.4 * barrier**2, f"first passage: mean {mean}"


def _check_pi(result, args):
    n = args[0]
    assert type(result) is float, f"pi: {type(result)} is not float"
    assert abs(result - math.pi) < 6 * 1.7 / math.sqrt(n), f"pi estimate {result}"


# ---------------------------------------------------------------- the kernels

KERNELS = [
    Kernel("burning_ship", "fractal", uk.burning_ship,
           lambda q: (_q(q, 16, 200), _q(q, 12, 150), _q(q, 30, 80)), kind="loop"),
    Kernel("newton_fractal", "fractal", uk.newton_fractal,
           lambda q: (_q(q, 10, 50), 30, 1e-6), kind="loop"),
    Kernel("separable_blur", "stencil", uk.separable_blur,
           lambda q: (_image(_q(q, 12, 300), _q(q, 10, 300), np.float32), 2), kind="loop",
           rtol=1e-5),
    Kernel("sobel", "stencil", uk.sobel,
           lambda q: (_image(_q(q, 12, 400), _q(q, 14, 400)),), kind="loop", rtol=1e-12),
    Kernel("median_filter3", "stencil", uk.median_filter3,
           lambda q: (_image(_q(q, 10, 150), _q(q, 9, 150), np.float32),), kind="loop"),
    Kernel("life_wrap", "cellular automaton", uk.life_wrap,
           lambda q: (_life(_q(q, 10, 100), _q(q, 12, 100)), _q(q, 3, 5)), kind="loop"),
    Kernel("heat_bool_mask", "stencil", uk.heat_bool_mask,
           lambda q: (*_heat(_q(q, 10, 200)), _q(q, 3, 10)), kind="loop", rtol=1e-12),
    Kernel("ising_metropolis", "monte carlo", uk.ising_metropolis,
           lambda q: (_q(q, 10, 100), 0.4, _q(q, 2, 20)), kind="random",
           stat=_check_ising),
    Kernel("first_passage", "monte carlo", uk.first_passage,
           lambda q: (_q(q, 100, 2000), _q(q, 6, 30), 100_000), kind="random",
           stat=_check_passage),
    Kernel("pi_loops", "monte carlo", uk.pi_loops,
           lambda q: (_q(q, 10_000, 2_000_000),), kind="random", stat=_check_pi),
    Kernel("elementary_ca", "cellular automaton", uk.elementary_ca,
           lambda q: (_q(q, 31, 801), _q(q, 15, 400), 110), kind="loop"),
    Kernel("longest_increasing_subsequence", "dynamic programming",
           uk.longest_increasing_subsequence,
           lambda q: (_r(31).integers(0, 1000, _q(q, 50, 3000)).astype(np.int32),), kind="loop"),
    Kernel("coin_change_min", "dynamic programming", uk.coin_change_min,
           lambda q: ([3, 7, 11, 25, 40], _q(q, 100, 200_000)), kind="loop"),
    Kernel("floyd_warshall", "dynamic programming", uk.floyd_warshall,
           lambda q: _graph(_q(q, 8, 120)), kind="loop", rtol=1e-12),
    Kernel("knapsack_table", "dynamic programming", uk.knapsack_table,
           lambda q: _knapsack(_q(q, 8, 100), _q(q, 30, 2000)), kind="loop"),
    Kernel("needleman_wunsch", "dynamic programming", uk.needleman_wunsch,
           lambda q: _dna(_q(q, 12, 600)), kind="loop"),
    Kernel("nbody_steps", "physics", uk.nbody_steps,
           lambda q: _bodies(_q(q, 5, 50), _q(q, 3, 50)), kind="loop", rtol=1e-10),
    Kernel("histogram_loop", "histogram", uk.histogram_loop,
           lambda q: (_r(37).normal(size=_q(q, 1000, 1_000_000)), 20, -3.0, 3.0), kind="loop"),
    Kernel("histogram_edges", "histogram", uk.histogram_edges,
           lambda q: (_r(41).normal(size=_q(q, 1000, 500_000)), np.linspace(-3, 3, 21)),
           kind="loop"),
    Kernel("shell_sort", "sorting", uk.shell_sort,
           lambda q: (_r(43).random(_q(q, 100, 100_000)),), kind="loop", lists=True),
    Kernel("odd_even_sort", "sorting", uk.odd_even_sort,
           lambda q: (_r(47).integers(-1000, 1000, _q(q, 50, 2000)).astype(np.int32),),
           kind="loop"),
    Kernel("prefix_sums", "scan", uk.prefix_sums,
           lambda q: (_r(53).integers(0, 100, _q(q, 100, 2_000_000)).astype(np.int32),),
           kind="loop"),
    Kernel("running_extremes", "scan", uk.running_extremes,
           lambda q: (_r(59).random(_q(q, 100, 2_000_000)).astype(np.float32),), kind="loop"),
    Kernel("run_length_encode", "scan", uk.run_length_encode,
           lambda q: _runs(_q(q, 100, 1_000_000)), kind="loop"),
    Kernel("matmul_triple", "linear algebra", uk.matmul_triple,
           lambda q: (_image(_q(q, 6, 80), _q(q, 5, 80), np.float32),
                      _image(_q(q, 5, 80), _q(q, 7, 80), np.float32, seed=4)),
           kind="loop", rtol=1e-5),
    Kernel("roots_on_grid", "root finding", uk.roots_on_grid,
           lambda q: (np.array([1.0, 0.0, -7.0, 6.0]), np.linspace(-4, 4, _q(q, 20, 20_000)),
                      1e-12), kind="loop", rtol=1e-9,
           helpers=("newton_root", "bisect_root", "poly_eval", "poly_deriv_eval")),
    Kernel("collatz_memo", "integer puzzle", uk.collatz_memo,
           lambda q: (_q(q, 100, 300_000),), kind="loop"),
    Kernel("digital_root_counts", "integer puzzle", uk.digital_root_counts,
           lambda q: (_q(q, 100, 300_000),), kind="loop", helpers=("digit_sum",)),
]


def by_name(name):
    for k in KERNELS:
        if k.name == name:
            return k
    raise KeyError(f"no kernel named {name!r}")


# ---------------------------------------------------------------- driver


def run_isolated(kernel, args):
    """One kernel in a child process of this file: a crash or a hang is a FAIL line."""
    return suite.run_isolated(kernel, args, os.path.abspath(__file__))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per kernel (median)")
    ap.add_argument("--filter", default="", help="only kernels whose name contains one of "
                    "these (comma-separated) or of this category")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--check-only", action="store_true", help="check against Python, no timing")
    ap.add_argument("--json", help="write every result and raw time to this file")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per kernel")
    ap.add_argument("--in-process", action="store_true", help="no child processes (to debug)")
    ap.add_argument("--no-numba", action="store_true", help="no Numba column")
    ap.add_argument("--cold", action="store_true", help="tessera's disk cache of native code off")
    ap.add_argument("--markdown", action="store_true", help="also print a markdown table")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.one:
        try:
            res = suite.run_kernel(by_name(args.one), args.quick, args.runs, args.check_only,
                                   not args.no_numba)
        except Exception as e:  # noqa: BLE001 - the setup or Python itself failed
            res = dict(name=args.one, category=by_name(args.one).category, status="FAIL",
                       error=f"harness: {suite._short(e)}", scalar_loop=False)
        print("RESULT " + json.dumps(res), flush=True)
        return 0

    if args.cold:
        os.environ["TESSERA_CACHE_DIR"] = "0"
    kernels = [k for k in KERNELS
               if any(f in k.name or f == k.category for f in args.filter.split(","))]
    info = suite.machine_info()
    suite.print_header(info, args)
    print(suite.COLUMNS, flush=True)
    results = []
    for k in kernels:
        if args.in_process:
            res = suite.run_kernel(k, args.quick, args.runs, args.check_only, not args.no_numba)
        else:
            res = run_isolated(k, args)
        results.append(res)
        print(suite.format_row(res), flush=True)
    if args.check_only:
        failed = [r["name"] for r in results if r["status"] != "ok"]
        print(f"\nchecked {len(results)} kernels: {len(results) - len(failed)} agree with Python"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    else:
        suite.print_summary(results)
        if args.markdown:
            print()
            suite.print_markdown(results)
    print(info["machine"] + f"; tessera threads {', '.join(map(str, suite.THREADS))}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(info=info, runs=args.runs, quick=args.quick, results=results), fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
