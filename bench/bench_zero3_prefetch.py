"""ZeRO 3's forward prefetch depth (docs/parallelism.md, "ZeRO", "What is sharded when"): the MLP of
tests/distributed/zero_peak.py (12 Dense(384) layers, 1.77 M parameters, a gradient bucket per
layer), Adam, batch 4 per locality, 11 steps, with Model.ZERO3_PREFETCH = 1, 2 and 3 (twice
each, in turn). Rank 0 prints, per run, the slowest rank's median step after the first (ms) and
the largest rank's median step peak of tessera's arrays above what the step starts with, in
units of the whole weights.

run: build/tessera run -n 4 --mesh data=4 bench/bench_zero3_prefetch.py
"""


import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

from step_meter import Step


def main():
    width, layers = 384, 12
    n = dist.size()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4 * n * 11, width)).astype(np.float32)
    y = rng.standard_normal((4 * n * 11, width)).astype(np.float32)
    for _ in range(2):
        for depth in (1, 2, 3):
            m = nn.Sequential([nn.Dense(width, activation="relu") for _ in range(layers - 1)]
                              + [nn.Dense(width)], input_shape=(width,), seed=1)
            m.compile(optim.Adam(1e-3), "mse")
            m.BUCKET_BYTES = 1 << 19
            m.ZERO3_PREFETCH = depth
            step = Step()
            m.fit(x, y, batch_size=4 * n, epochs=1, verbose=0, callbacks=[step],
                  nan_policy="continue", zero=3)
            whole = 4 * m.count_params()
            mine = np.array([[np.median(step.times[1:]), np.median(step.peaks[1:]) / whole]])
            every = np.asarray(dist.all_gather(mine)) if n > 1 else mine
            if dist.rank() == 0:
                print(f"prefetch {depth}: step {1000 * every[:, 0].max():.1f} ms, step peak "
                      f"{every[:, 1].max():.2f} of the whole weights", flush=True)


if __name__ == "__main__":
    main()
