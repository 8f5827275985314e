#!/usr/bin/env python3
"""evaluate and predict over a big array at Keras's default of 32 rows a batch
(what they run without batch_size) and at 256, tessera against Keras 3 on JAX
measured in the same run: the per-batch cost that the default exposes.

The model: Dense(64, relu) -> Dense(1) on 32 features, loss mse, metric mae;
100,000 rows. Each figure is the median of --rounds runs after one warm-up on
2,000 rows. Prints the machine and tessera's worker-thread count.

Run: .venv/bin/python bench/bench_evaluate_batches.py [--rows N] [--rounds R] [--no-keras]
"""

import argparse
import os
import platform
import statistics
import time

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "jax")

import tessera  # noqa: E402
from tessera import nn  # noqa: E402

try:  # the peer, optional
    import keras  # noqa: E402
except ImportError:
    keras = None


def _model(lib):
    m = lib.Sequential([lib.Input((32,)), lib.layers.Dense(64, activation="relu"),
                        lib.layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse", metrics=["mae"])
    return m


def _median(fn, rounds):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-keras", action="store_true", help="tessera alone")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.rows, 32)).astype(np.float32)
    y = rng.normal(size=(args.rows, 1)).astype(np.float32)
    libs = [("tessera", nn)]
    if not args.no_keras and keras is not None:
        libs.append(("keras", keras))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} hardware "
          f"threads; tessera threads: {tessera.num_threads()}")
    print(f"{'library':8} {'batch':>6} {'batches':>8} {'evaluate s':>11} {'predict s':>10} "
          f"{'us/batch (evaluate)':>20}")
    for name, lib in libs:
        m = _model(lib)
        m.set_weights([np.full(w.shape, 0.01, np.float32) for w in m.get_weights()])
        for bs in (None, 256):
            m.evaluate(x[:2000], y[:2000], batch_size=bs, verbose=0)
            m.predict(x[:2000], batch_size=bs, verbose=0)
            ev = _median(lambda: m.evaluate(x, y, batch_size=bs, verbose=0), args.rounds)
            pr = _median(lambda: m.predict(x, batch_size=bs, verbose=0), args.rounds)
            n = -(-args.rows // (bs or 32))
            print(f"{name:8} {str(bs or '32*'):>6} {n:>8} {ev:>11.3f} {pr:>10.3f} "
                  f"{ev / n * 1e6:>20.1f}")
    print("* no batch_size: Keras's default for arrays")


if __name__ == "__main__":
    main()
