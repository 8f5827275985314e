"""ZeRO-2's step forms side by side (docs/parallelism.md, "ZeRO", "ZeRO 2's bucket marks"): the
bucket marks (grad_bucket_shard, the default) with at most Model.ZERO2_IN_FLIGHT buckets in flight
(`zero2`), the marks unbounded (`zero2_unbounded`) and the flat bucket of the whole weights
(grad_scatter, Model.ZERO2_BUCKET_MARKS = False: `zero2_flat`), next to data parallelism and ZeRO 1,
on the MLP of
tests/distributed/zero_peak.py (--layers Dense(--width), a gradient bucket per layer), Adam,
batch --batch per locality, --steps steps. Rank 0 prints one JSON line per configuration: the
median step time after the first step (ms, the slowest rank's) and the median step peak of
tessera's arrays above what the step starts with, in units of the whole weights (the largest
rank's).

run: build/tessera run -n 4 --mesh data=4 bench/bench_zero2_marks.py
"""

import argparse
import json

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

from step_meter import Step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=11)
    ap.add_argument("--configs", default="dp,zero1,zero2,zero2_unbounded,zero2_flat")
    a = ap.parse_args()
    n = dist.size()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch * n * a.steps, a.width)).astype(np.float32)
    y = rng.standard_normal((a.batch * n * a.steps, a.width)).astype(np.float32)
    bounded = nn.Model.ZERO2_IN_FLIGHT
    forms = {"dp": (0, True, bounded), "zero1": (1, True, bounded), "zero2": (2, True, bounded),
             "zero2_unbounded": (2, True, None), "zero2_flat": (2, False, None)}
    for name in a.configs.split(","):
        stage, marks, in_flight = forms[name]
        model = nn.Sequential([nn.Dense(a.width, activation="relu")
                               for _ in range(a.layers - 1)] + [nn.Dense(a.width)],
                              input_shape=(a.width,), seed=1)
        model.compile(optim.Adam(1e-3), "mse")
        model.BUCKET_BYTES = 4 * a.width * (a.width + 1)  # a bucket per layer
        model.ZERO2_BUCKET_MARKS = marks
        model.ZERO2_IN_FLIGHT = in_flight
        whole = 4 * model.count_params()
        step = Step()
        model.fit(x, y, batch_size=a.batch * n, epochs=1, verbose=0, callbacks=[step],
                  nan_policy="continue", zero=stage)
        mine = np.array([[np.median(step.times[1:]), np.median(step.peaks[1:]) / whole]])
        every = np.asarray(dist.all_gather(mine)) if n > 1 else mine
        if dist.rank() == 0:
            print(json.dumps({"config": name, "ranks": n, "params": model.count_params(),
                              "step_ms": round(1000 * float(every[:, 0].max()), 1),
                              "step_peak_of_weights": round(float(every[:, 1].max()), 2)}),
                  flush=True)


if __name__ == "__main__":
    main()
