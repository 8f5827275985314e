"""Bytes each rank sends and receives per training step in deterministic mode (docs/scaling.md,
"Deterministic mode"), counted by the PMPI counter (bench/pmpi_count.py) on N oversubscribed
ranks: a 3-layer MLP of G bytes of float32 gradient, `fit(deterministic=16)`, batch 64. Two fits
of 2 and 6 steps are counted after a warm-up fit; the difference over 4 steps is one step's
traffic, without what a fit does once (its start and end). The collectives the step uses are
symmetric (all-gather, all-to-all, all-reduce): what a rank sends, it receives.

    .venv/bin/python bench/bench_det_bytes.py --ns 4,8,16 [--build build] [--python DIR]

--python: the folder holding the `tessera` package to measure (default: this checkout's
python/), --build: the build whose PMPI counter is preloaded."""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pmpi_count  # noqa: E402

WIDTH = 256  # the MLP: 64 -> 256 -> 256 -> 10
CHUNKS = 16
BATCH = 64


def child():
    import numpy as np

    import tessera
    import tessera.distributed as td
    from tessera import nn

    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * 6, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=BATCH * 6)
    model = nn.Sequential([nn.Dense(WIDTH, activation="tanh"), nn.Dense(WIDTH, activation="tanh"),
                           nn.Dense(10, activation="softmax")], input_shape=(64,), seed=1)
    model.compile(tessera.optim.SGD(0.01), "sparse_categorical_crossentropy")
    model.fit(x[:2 * BATCH], y[:2 * BATCH], batch_size=BATCH, epochs=1, verbose=0, shuffle=False,
              deterministic=CHUNKS)
    for steps in (2, 6):
        td.barrier()
        pmpi_count.reset()
        model.fit(x[:steps * BATCH], y[:steps * BATCH], batch_size=BATCH, epochs=1, verbose=0,
                  shuffle=False, deterministic=CHUNKS)
        pmpi_count.mark(f"{steps} steps")
    if td.rank() == 0:
        g = sum(int(np.prod(v.shape)) * 4 for v in model.weights.values())
        print(f"G {g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ns", default="4,8,16")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--python", default=os.path.join(HERE, "..", "python"))
    a = ap.parse_args()
    rows = []
    for n in [int(v) for v in a.ns.split(",")]:
        out, ranks = pmpi_count.run(
            n, [sys.executable, os.path.abspath(__file__), "--child"], build=a.build,
            env={"PYTHONPATH": os.path.abspath(a.python) + os.pathsep + HERE,
                 "TESSERA_THREADS": "1"}, timeout=1800)
        g = int([line for line in out.splitlines() if line.startswith("G ")][0].split()[1])
        few, many = pmpi_count.segment(ranks, "2 steps"), pmpi_count.segment(ranks, "6 steps")
        per = [(m["bytes"] - f["bytes"]) / 4 for f, m in zip(few, many)]
        msgs = [(m["msgs"] - f["msgs"]) / 4 for f, m in zip(few, many)]
        rows.append((n, g, max(per), max(per) / g, max(msgs)))
        print(f"N = {n}: G = {g} bytes, most bytes per rank per step {max(per):,.0f} "
              f"({max(per) / g:.2f} G), messages {max(msgs):.1f}", flush=True)
    print("\n| N | G (bytes) | bytes per rank per step | / G | messages per rank per step |")
    print("|---|---|---|---|---|")
    for n, g, b, r, m in rows:
        print(f"| {n} | {g:,} | {b:,.0f} | {r:.2f} | {m:.1f} |")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        main()
