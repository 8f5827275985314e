"""Parts of the keras-io transformer's training step on their own, at its
shapes: the embedding lookup and its gradient (take, take_grad: (32, 200)
rows of a (20000, 32) float32 table) and layer normalization (layer_norm,
layer_norm_grad on (32, 200, 32) float32), each against NumPy's x * gamma on
the same array as a memory-bound yardstick; and the keras-io LSTM's recurrent
layer (rnn_sequence and rnn_sequence_grad of an LSTM: batch 32, 100 steps, 128
features, 64 units, float32, all outputs, as one direction of its
Bidirectional layers) and Adam on its 20000x128 embedding (adam_update out of
place: its outputs new arrays, as under fit's nan_policy="stop"). CPU-time and wall-clock
medians of many calls, one thread (--threads N for more). Run it with two checkouts'
PYTHONPATH alternately to compare them.

run: PYTHONPATH=python .venv/bin/python bench/bench_step_parts.py [--calls 200] [--threads 1]
"""

import argparse
import os
import statistics
import time

import numpy as np

import tessera
from machine import machine_line


def medians(fn, calls):
    """CPU-time and wall-clock medians of `calls` calls, in microseconds (at 2
    threads the CPU time adds both threads' and the wall clock shows the gain)."""
    fn()
    cpu, wall = [], []
    for _ in range(calls):
        t, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - t)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu) * 1e6, statistics.median(wall) * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    tessera.set_num_threads(args.threads)
    print(f"{machine_line()}; tessera threads {args.threads}; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    rng = np.random.default_rng(0)
    table = rng.normal(size=(20000, 32)).astype(np.float32)
    idx = rng.integers(1, 20000, (32, 200))
    x = rng.normal(size=(32, 200, 32)).astype(np.float32)
    g = rng.normal(size=x.shape).astype(np.float32)
    gamma, beta = (rng.normal(size=32).astype(np.float32) for _ in range(2))
    prim = tessera.call_primitive
    # one direction of the LSTM's Bidirectional layers
    xs = rng.normal(size=(32, 100, 128)).astype(np.float32)
    kernel = (rng.normal(size=(128, 256)) * 0.1).astype(np.float32)
    rec = (rng.normal(size=(64, 256)) * 0.1).astype(np.float32)
    bias = (rng.normal(size=256) * 0.1).astype(np.float32)
    gout = rng.normal(size=(32, 100, 64)).astype(np.float32)
    rnn_args = ["lstm", xs, kernel, rec, bias]
    rnn_out = prim("rnn_sequence", rnn_args)
    emb = [rng.normal(size=(20000, 128)).astype(np.float32) for _ in range(3)]
    emb.append(rng.random((20000, 128)).astype(np.float32))
    adam = tessera.Program("lambda(w, g, m, v, adam_update(w, g, m, v, 3, 0.001))")
    parts = {
        "take": lambda: prim("take", [table, idx], {"axis": 0}),
        "take_grad": lambda: prim("take_grad", [g, table, idx], {"axis": 0}),
        "layer_norm": lambda: prim("layer_norm", [x, gamma, beta], {"epsilon": 1e-6}),
        "layer_norm_grad": lambda: prim("layer_norm_grad", [g, x, gamma], {"epsilon": 1e-6}),
        "numpy x * gamma": lambda: x * gamma,
        "rnn_sequence lstm": lambda: prim("rnn_sequence", rnn_args),
        "rnn_sequence_grad": lambda: prim("rnn_sequence_grad",
                                          ["lstm", [gout, None, None, None], rnn_out] +
                                          rnn_args[1:]),
        "adam_update 2.56 M": lambda: adam.run(emb),
    }
    for name, fn in parts.items():
        try:
            cpu, wall = medians(fn, args.calls)
            print(f"  {name:<18} {cpu:8.1f} us CPU, {wall:8.1f} us wall (medians of "
                  f"{args.calls})")
        except ValueError as e:  # a checkout without the primitive
            print(f"  {name:<18} not available: {e}")


if __name__ == "__main__":
    main()
