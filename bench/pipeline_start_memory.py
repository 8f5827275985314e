"""Peak RSS of each pipeline rank above its RSS after the imports (VmHWM - VmRSS), after the
model is built, at fit's start (on_train_begin) and after the first step: 8 x Dense(1024, tanh),
Adam, cut into 2 stages (docs/parallelism.md, "The state a locality holds").

run: build/tessera run -n 2 --threads 1 --mesh pipeline=2 bench/pipeline_start_memory.py
"""
import numpy as np, tessera
from tessera import distributed as dist, nn

def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])

base = kib("VmRSS")
W = 1024
model = nn.Sequential([nn.Dense(W, activation="tanh", name=f"b{i}") for i in range(8)],
                      input_shape=(W,), seed=1)
model.compile(tessera.optim.Adam(1e-3), "mse")
built = kib("VmHWM") - base
peak = {}

class First(nn.callbacks.Callback):
    def on_train_begin(self, logs=None):
        peak["begin"] = kib("VmHWM") - base

    def on_train_batch_end(self, batch, logs=None):
        if "step" not in peak:
            peak["step"] = kib("VmHWM") - base

x = np.ones((64, W), "float32")
model.fit(x, x, batch_size=64, epochs=1, verbose=0, microbatches=4, callbacks=[First()],
          pipeline_split=["b4"])
print(f"rank {dist.rank()}: whole model {8 * (W * W + W) * 4 / 2**20:.1f} MiB; peak above the "
      f"imports after building {built / 1024:.1f} MiB, after the first step "
      f"{peak['step'] / 1024:.1f} MiB (at fit's start {peak['begin'] / 1024:.1f} MiB)", flush=True)
