#!/usr/bin/env python3
"""Per-call overhead of tessera from Python (goal: under 20 us per call).

Measures ``Program.run`` and @tessera.jit calls of trivial programs (``define(f, x, x) f`` with a small
array argument, and variants), which covers converting the arguments, releasing
the GIL, handing the evaluation to a worker thread, waiting for it, and
converting the result back. The reference measured in the same run is NumPy's
own per-call cost for a trivial operation (``np.add(x, 0)``). Prints the
machine and the worker-thread counts used.

Run: .venv/bin/python bench/bench_call_overhead.py [--calls N] [--rounds R]
``measure`` can be reused by other benchmarks (e.g. the @tessera.jit decorator).
"""

import argparse
import os
import platform
import statistics
import time

import numpy as np

import tessera
from tessera import _core


def machine_line():
    """The CPU model and core count, as the C++ benchmarks print them."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"machine: {model}, {os.cpu_count()} hardware threads"


def measure(fn, calls=2000, rounds=15):
    """Median over `rounds` of the mean time per call (in us) of `calls` calls of fn()."""
    return measure_both(fn, calls, rounds)[0]


def measure_both(fn, calls=2000, rounds=15):
    """(wall, CPU) per call in us, medians over `rounds`: the calling thread's CPU
    time, which a loaded machine inflates much less than the wall time."""
    for _ in range(min(calls, 200)):  # warm up (first evaluation, caches, thread start)
        fn()
    wall, cpu = [], []
    for _ in range(rounds):
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(calls):
            fn()
        cpu.append((time.thread_time_ns() - c0) / calls / 1000.0)
        wall.append((time.perf_counter_ns() - t0) / calls / 1000.0)
    return statistics.median(wall), statistics.median(cpu)


def empty(a, b):
    return a


def empty3(a, b, x):
    return b


def jit_cases(x):
    """The fixed cost of a @tessera.jit call (the C entry, jit_entry.cpp), beside a
    plain Python call of the same function."""
    j_empty, j_empty3 = tessera.jit(empty), tessera.jit(empty3)
    return [
        ("@tessera.jit empty(a, b), two ints", lambda: j_empty(1, 2)),
        ("@tessera.jit empty3(a, b, x), int, float, array", lambda: j_empty3(1, 2.0, x)),
        ("plain Python empty(a, b) (reference)", lambda: empty(1, 2)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=15, help="rounds (median is reported)")
    args = parser.parse_args()

    x = np.arange(16, dtype=np.float64)
    identity = _core.Program("define(f, x, x) f")
    add_one = _core.Program("define(f, x, x + 1.0) f")
    scalar = _core.Program("define(f, n, n + 1) f")
    constant = _core.Program("nil")
    cases = [
        ("Program.run identity, 16-element float64 array", lambda: identity.run([x])),
        ("Program.run x + 1.0, 16-element float64 array", lambda: add_one.run([x])),
        ("Program.run n + 1, Python int", lambda: scalar.run([3])),
        ("Program.run nil, no argument", lambda: constant.run([])),
        (
            "call_primitive add(x, 1.0) (no worker hand-off)",
            lambda: _core.call_primitive("add", [x, 1.0], {}),
        ),
    ]
    cases += jit_cases(x)
    numpy_us = measure(lambda: np.add(x, 0.0), args.calls, args.rounds)

    print(machine_line())
    print(
        f"tessera {tessera.__version__}, NumPy {np.__version__}, Python {platform.python_version()}"
    )
    print(
        f"median of {args.rounds} rounds of {args.calls} calls; reference: np.add(x, 0.0) = {numpy_us:.2f} us"
    )
    before = _core.num_threads()
    for threads in sorted({1, os.cpu_count() or 1}):
        _core.set_num_threads(threads)
        print(f"\nthreads: {threads}")
        for name, fn in cases:
            us, cpu = measure_both(fn, args.calls, args.rounds)
            verdict = "ok" if us < 20.0 else "over the 20 us goal"
            print(f"  {name:52s} {us:8.2f} us (CPU {cpu:6.2f} us)  ({us / numpy_us:5.1f}x NumPy call)"
                  f"  {verdict}")
    _core.set_num_threads(before)


if __name__ == "__main__":
    main()
