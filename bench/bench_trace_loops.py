#!/usr/bin/env python3
"""What tracing costs a loop kernel: bench_numpy_kernels.py's element-loop kernels
called through tessera.jit with and without a trace recording.

Each kernel is called once to compile its loops (outside any trace), then in
--rounds rounds of --calls calls untraced and --calls calls inside one
`with tessera.trace(DIR)` (alternating which goes first); printed per kernel:
the median call untraced and traced, their ratio, the trace's events per call
and the time to write its file. A build whose tracer turns the fast loops off
(before the loops were traced) runs the traced calls on the general evaluation:
the same script measures both builds (docs/benchmarks.md).

run: PYTHONPATH=python LD_LIBRARY_PATH=build .venv/bin/python bench/bench_trace_loops.py
         [--threads 2] [--rounds 5] [--calls 3] [--filter mandelbrot_loop conv2d_loop]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import tessera
from bench_numpy_kernels import KERNELS
from machine import machine_line
from tessera import _core


def timed_calls(f, args, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f(*args)
        out.append(time.perf_counter() - t0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the kernels' small sizes")
    ap.add_argument("--filter", nargs="+", default=["mandelbrot_loop", "conv2d_loop"])
    a = ap.parse_args()
    print(machine_line(), f"| load {os.getloadavg()[0]:.1f} | tessera {a.threads} threads")
    print(f"{'kernel':24} {'untraced':>12} {'traced':>12} {'ratio':>7} {'events/call':>12} {'write':>9}")
    for k in [k for k in KERNELS if k.name in a.filter]:
        f = tessera.jit(k.func, threads=a.threads)
        args = k.setup(a.quick)
        f(*args)  # compiles its loops (and fills the cache)
        plain, traced, events, writes = [], [], [], []
        for r in range(a.rounds):
            for traced_first in ([True, False] if r % 2 else [False, True]):
                if not traced_first:
                    plain += timed_calls(f, args, a.calls)
                    continue
                d = tempfile.mkdtemp(prefix="tessera-trace-loops-")
                _core._trace_start(d)
                try:
                    traced += timed_calls(f, args, a.calls)
                finally:
                    t0 = time.perf_counter()
                    path = _core._trace_stop()
                    writes.append(time.perf_counter() - t0)
                with open(path) as fh:
                    events.append(sum(1 for ln in fh if ln[:2] in ("n\t", "t\t", "l\t", "x\t")))
        p, t = statistics.median(plain), statistics.median(traced)
        print(f"{k.name:24} {p * 1e3:10.3f}ms {t * 1e3:10.3f}ms {t / p:7.2f} "
              f"{statistics.median(events) / a.calls:12.0f} {statistics.median(writes) * 1e3:7.1f}ms")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
