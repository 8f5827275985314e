"""ZeRO 2 under pipeline stages (docs/parallelism.md, "Tensor x pipeline x data"): the median
step time of a pipelined MLP whose stage buckets are reduce-scattered over the data group, with
the tessera found on PYTHONPATH (run it once per checkout to compare where the reduce-scatter
runs: in the pass, or in the update after it).

run: PYTHONPATH=<checkout>/python build/tessera run -n 4 --mesh data=2,pipeline=2 \\
         bench/bench_pipe_zero_scatter.py [--width 768] [--steps 12] [--zero 2]
Prints, on locality 0, the median over the steps after the first two of the slowest
locality's step time."""

import argparse
import time

import numpy as np

import tessera
from tessera import distributed as dist
from tessera import nn

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=768)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--zero", type=int, default=2)
parser.add_argument("--microbatches", type=int, default=4)
args = parser.parse_args()

W = args.width
model = nn.Sequential([nn.Dense(W, activation="tanh", name=f"h{i}") for i in range(6)]
                      + [nn.Dense(10, name="out")], input_shape=(W,), seed=0)
model.compile(tessera.optim.Adam(1e-4), "sparse_categorical_crossentropy")
rng = np.random.default_rng(0)
batch = 128
x = rng.normal(size=(batch * args.steps, W)).astype("float32")
y = rng.integers(0, 10, size=len(x))
ends = []


class Probe(nn.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        ends.append(time.perf_counter())


model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0, zero=args.zero,
          microbatches=args.microbatches, pipeline_split=["h3"], callbacks=[Probe()])
steps = np.diff(ends)[1:]  # after the first two steps (the first compiles)
slowest = np.asarray(dist.all_reduce(np.asarray(steps, dtype=np.float64), "max"))
if dist.rank() == 0:
    print(f"zero={args.zero} width={W} microbatches={args.microbatches}: median step "
          f"{np.median(slowest) * 1e3:.1f} ms over {len(slowest)} steps", flush=True)
