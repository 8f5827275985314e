"""Stage s's live array bytes through one pipelined step, sampled (docs/parallelism.md,
"Stage 0's activations under 1F1B"): a thread reads tessera.memory_stats()["live_bytes"]
every 0.2 ms while the stage's pass runs and prints the levels it saw (MiB above the step's
start, each change once), so a forward's rise, a backward's working set and what a step holds
between them can be read off, step by step. The model is bench_pipeline_bubble's: --blocks x
Dense(--width, tanh), cut into p equal stages, micro-batches of --rows rows, SGD and mse.

run: build/tessera run -n 4 --threads 1 --mesh pipeline=4 bench/pipeline_live_bytes.py \\
         [--m 8] [--schedule 1f1b] [--rows 512] [--width 256] [--blocks 8] [--steps 3] [--stage 0]
"""
import argparse
import threading
import time

import numpy as np

import tessera
from tessera import distributed as dist
from tessera import nn
from tessera.nn import pipeline as pp

ap = argparse.ArgumentParser()
ap.add_argument("--m", type=int, default=8)
ap.add_argument("--schedule", default="1f1b")
ap.add_argument("--rows", type=int, default=512)
ap.add_argument("--width", type=int, default=256)
ap.add_argument("--blocks", type=int, default=8)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--stage", type=int, default=0)
args = ap.parse_args()

R, p = dist.rank(), dist.size()
names = [f"b{i}" for i in range(args.blocks)]
model = nn.Sequential([nn.Dense(args.width, activation="tanh", name=n) for n in names],
                      input_shape=(args.width,), seed=1)
model.compile("sgd", "mse")
x = np.random.default_rng(0).normal(size=(args.rows * args.m * args.steps, args.width))
x = x.astype("float32")
steps = []
run = pp.StageStep.run


def sampled(self, a):
    stop, levels = threading.Event(), []

    def sample():
        while not stop.is_set():
            levels.append(tessera.memory_stats()["live_bytes"])
            time.sleep(0.0002)

    base = tessera.memory_stats()["live_bytes"]
    tessera.reset_peak_memory()
    th = threading.Thread(target=sample)
    th.start()
    out = run(self, a)
    stop.set()
    th.join()
    seen = [levels[0]] + [v for u, v in zip(levels, levels[1:]) if v != u]
    steps.append(([(v - base) / 2**20 for v in seen],
                  (tessera.memory_stats()["peak_live_bytes"] - base) / 2**20))
    return out


pp.StageStep.run = sampled
per = args.blocks // p
model.fit(x, np.tanh(x[:, ::-1]).copy(), batch_size=args.rows * args.m, epochs=1, shuffle=False,
          verbose=0, microbatches=args.m, pipeline_split=[names[per * s] for s in range(1, p)],
          pipeline_schedule=args.schedule)
if model._pipeline.stage == args.stage:
    for k, (seen, peak) in enumerate(steps):
        print(f"stage {args.stage}, {args.schedule}, m={args.m}, step {k}: peak {peak:.2f} MiB "
              f"above the step's start; levels seen (MiB): "
              f"{' '.join(f'{v:.2f}' for v in seen)}", flush=True)
