# The step's peak under ZeRO 2 and 3 (`tessera run -n 4 --mesh data=4 --zero
# K`): the arrays a training step holds at once above what it starts with,
# against the size of the whole weights (4 bytes x P). Stage 3 gathers each
# bucket just before its first use, frees it after its last forward use and
# gathers it again in the backward pass (remat), so at most a few buckets
# are whole at once, not the model; stage 2 reduce-scatters each bucket's
# gradient from inside the backward pass, so at most a few buckets of whole
# gradient exist at once. Twelve Dense(384) layers, a bucket per layer.
# Measured: 0.63 of the whole weights under stage 3; under stage 2 0.63 on
# the flat path, about 1.0 with the bucket marks unbounded (every bucket's
# gradient in flight at once) and 0.14-0.48 with the marks held to
# Model.ZERO2_IN_FLIGHT = 2 buckets in flight (the default); without either
# stage's care (the whole model gathered and kept for the backward pass,
# every whole gradient made before the reduce-scatter) 1.34 (stage 3) and
# 1.25 (stage 2). The test asks for at most 0.9 (stage 3) and 0.75 (stage 2). Under stage 3 also deterministic mode with 4
# and 8 chunks, whose gathers are per bucket too (it used to gather the whole
# model at the step's start): at most 1.5 and 2.5 of the whole weights
# (measured 1.25 and 2.1; 2.00 and 3.00 before). Prints "ok" on every rank.
import os

import numpy as np

import tessera.distributed as dist
from tessera import _core, nn, optim

R = dist.rank()
K = int(os.environ["TESSERA_ZERO"])
assert K in (2, 3), K
W, LAYERS = 384, 12

rng = np.random.default_rng(0)
x = rng.standard_normal((64, W)).astype(np.float32)
y = rng.standard_normal((64, W)).astype(np.float32)
model = nn.Sequential([nn.Dense(W, activation="relu") for _ in range(LAYERS - 1)] + [nn.Dense(W)],
                      input_shape=(W,), seed=1)
model.compile(optim.Adam(1e-3), "mse")
model.BUCKET_BYTES = 1 << 19
WHOLE = 4 * model.count_params()


class Peak(nn.callbacks.Callback):
    def __init__(self, peaks):
        super().__init__()
        self.peaks = peaks

    def on_train_batch_begin(self, batch, logs=None):
        self.live = _core.memory_stats()["live_bytes"]
        _core.reset_peak_memory()

    def on_train_batch_end(self, batch, logs=None):
        self.peaks.append(_core.memory_stats()["peak_live_bytes"] - self.live)


def step_peak(deterministic=False):
    """The median step peak of one epoch of 4 steps, after the first (which
    also compiles the programs): a step's peak depends a little on how its
    dataflow is timed."""
    peaks = []
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[Peak(peaks)],
              nan_policy="continue", deterministic=deterministic)
    assert len(peaks) == 4, peaks
    return sorted(peaks[1:])[1]


step = step_peak()
print(f"rank {R}: zero {K}: step peak {step / 2**20:.2f} MiB, whole weights "
      f"{WHOLE / 2**20:.2f} MiB, {step / WHOLE:.2f} of them", flush=True)
assert step <= (0.9 if K == 3 else 0.75) * WHOLE, (K, step, WHOLE)
if K == 3:
    # Deterministic mode gathers each bucket around its uses too (it used to
    # gather every bucket at the step's start: 1.0 more). What remains is
    # the chunks' whole gradients, which the fixed sum adds on each member
    # before the all-to-all: one chunk per member (deterministic=4) measured
    # 1.25 of the whole weights (2.00 before), two (8 chunks) 2.1 (3.00).
    for chunks, bound in ((4, 1.5), (8, 2.5)):
        det = step_peak(deterministic=chunks)
        print(f"rank {R}: zero 3, deterministic={chunks}: step peak {det / 2**20:.2f} MiB, "
              f"{det / WHOLE:.2f} of the whole weights", flush=True)
        assert det <= bound * WHOLE, (chunks, det, WHOLE)
print(f"rank {R}: ok", flush=True)
