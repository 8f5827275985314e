"""Per-step time and peak of tessera's arrays above what the step starts with,
for the ZeRO benchmarks (bench_zero2_marks.py, bench_zero3_prefetch.py)."""

import time

from tessera import _core, nn


class Step(nn.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times, self.peaks = [], []

    def on_train_batch_begin(self, batch, logs=None):
        self.live = _core.memory_stats()["live_bytes"]
        _core.reset_peak_memory()
        self.t = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter() - self.t)
        self.peaks.append(_core.memory_stats()["peak_live_bytes"] - self.live)
