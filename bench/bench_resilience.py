#!/usr/bin/env python3
"""Cost of replay and replicate against a plain call of the same function.

Two functions: a small one (x + 1.0 on 16 doubles, about 1 us with the call)
and a medium one (sin(x) * 2 + cos(x) on 20,000 doubles, about 1 ms). Each
form is called `calls` times in a loop of the language (no Python in the
loop), so the figures are the runtime's own cost per call; the median of
`rounds` rounds is printed, with the ratio to the plain call measured in the
same run (each round times every form in turn), for 1 and all worker
threads, without fault injection and with the injector on at zero
probabilities (the cost of its bookkeeping alone, timed in rounds of its own).

replicate(3) runs three copies as three tasks: with 2 threads the medium
function's copies run two at a time, so it costs about 3/2 of the plain call
plus the spawns; with 1 thread, 3 times.

Run: PYTHONPATH=python .venv/bin/python bench/bench_resilience.py [--rounds R]
"""

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine_line  # noqa: E402

import tessera  # noqa: E402
from tessera import _core  # noqa: E402
from tessera.resilience import inject_faults  # noqa: E402

FUNCTIONS = {
    "small": ("x + 1.0", np.arange(16, dtype=np.float64), 4000),
    "medium": ("sin(x) * 2.0 + cos(x)", np.linspace(0.0, 1.0, 20000), 40),
}

FORMS = [
    ("plain call f(x)", "f(x)"),
    ("replay(3, f, x)", "replay(3, f, x)"),
    ("replay(3, f, x, validate=g)", "replay(3, f, x, validate=ok)"),
    ("replicate(3, f, x)  (consensus)", "replicate(3, f, x)"),
    ("replicate(3, f, x, validate=g)", "replicate(3, f, x, validate=ok)"),
    ("replicate(3, f, x, vote=h)", "replicate(3, f, x, vote=first)"),
]


def program(body: str, call: str) -> "_core.Program":
    text = (
        f"define(f, x, {body})\n"
        "define(ok, r, true)\n"
        "define(first, rs, rs[0])\n"
        "define(loop, x, k, block(define(i, 0), define(y, nil),\n"
        f"  while(i < k, block(store(y, {call}), store(i, i + 1))), y))\n"
        "loop"
    )
    return _core.Program(text, "bench_resilience.tsl")


def per_call_us(progs, x, calls, rounds):
    """Median per-call time of each program; every round times each program
    in turn, so that the load of the machine weighs on all alike."""
    for prog in progs:
        prog.run([x, max(1, calls // 10)])  # warm up: first evaluation, caches, threads
    times = [[] for _ in progs]
    for _ in range(rounds):
        for prog, t in zip(progs, times):
            t0 = time.perf_counter_ns()
            prog.run([x, calls])
            t.append((time.perf_counter_ns() - t0) / calls / 1000.0)
    return [statistics.median(t) for t in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds (the median is printed)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the calls per round")
    args = parser.parse_args()

    print(machine_line() + f", load average {os.getloadavg()[0]:.1f} (other processes share it)")
    print(f"tessera {tessera.__version__}, NumPy {np.__version__}, Python {platform.python_version()}")
    print(f"median of {args.rounds} rounds; per call, in microseconds; ratio to the plain call")
    before = _core.num_threads()
    for threads in sorted({1, os.cpu_count() or 1}):
        _core.set_num_threads(threads)
        for fname, (body, x, calls) in FUNCTIONS.items():
            calls = max(1, int(calls * args.scale))
            print(f"\nthreads: {threads}; {fname} function f(x) = {body}, x of {x.size} doubles, "
                  f"{calls} calls per round")
            progs = [program(body, call) for _, call in FORMS]
            with inject_faults(throw=0.0, bitflip=0.0, seed=1):
                # The injector's bookkeeping alone: on, at zero probabilities.
                injected = per_call_us([program(body, "replicate(3, f, x)")], x, calls,
                                       args.rounds)[0]
            results = per_call_us(progs, x, calls, args.rounds)
            plain = results[0]
            for (label, _), us in zip(FORMS, results):
                print(f"  {label:36s} {us:10.2f} us  {us / plain:6.2f}x")
            label = "replicate(3, f, x), injector on, p=0"
            print(f"  {label:36s} {injected:10.2f} us  {injected / plain:6.2f}x")
    _core.set_num_threads(before)


if __name__ == "__main__":
    main()
