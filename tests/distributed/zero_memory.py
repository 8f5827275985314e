# Model-state bytes per locality under `tessera run -n 4 --mesh data=4
# --zero K` (K = 0..3, from TESSERA_ZERO: fit's zero= is not given): during
# fit, model.model_state_bytes() is within 5% of the ZeRO formulas for fp32
# Adam (16 P, (8 + 8/d) P, (4 + 12/d) P, 16 P / d with P parameters and
# d = 4), and its parameter and optimizer bytes are those of the arrays the
# model holds (counted here from the model's own storage). Prints "ok" on
# every rank.
import os

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
K = int(os.environ["TESSERA_ZERO"])
assert os.environ["TESSERA_MESH"].startswith("data=4"), os.environ["TESSERA_MESH"]
D = 4

rng = np.random.default_rng(0)
x = rng.standard_normal((32, 64)).astype(np.float32)
y = rng.standard_normal((32, 8)).astype(np.float32)
model = nn.Sequential([nn.Dense(256, activation="relu"), nn.Dense(256, activation="relu"),
                       nn.Dense(8)], input_shape=(64,), seed=1)
model.compile(optim.Adam(1e-3), "mse")
P = model.count_params()
FORMULA = {0: 16 * P, 1: (8 + 8 / D) * P, 2: (4 + 12 / D) * P, 3: 16 * P / D}[K]


def held(m):
    """(parameter bytes, optimizer bytes) of the arrays the model keeps."""
    params = 0
    for v in m._params(True):
        layer, p = m._owner[v]
        a = layer._values[p.name]
        params += 0 if a is None else a.nbytes
    z = m._zero
    if z is not None and z.params is not None:
        params += sum(a.nbytes for a in z.params)
    state = z.opt if z is not None else m.__dict__["_opt_state_whole"]
    return params, sum(a.nbytes for a in state.values() if np.ndim(a))


class Check(nn.callbacks.Callback):
    seen = 0

    def on_train_batch_end(self, batch, logs=None):
        got = self.model.model_state_bytes()
        assert abs(got["total"] - FORMULA) <= 0.05 * FORMULA, (K, got, FORMULA)
        params, opt = held(self.model)
        assert (got["parameters"], got["optimizer"]) == (params, opt), (got, params, opt)
        assert got["total"] == got["parameters"] + got["gradients"] + got["optimizer"]
        assert (self.model._zero is None) == (K == 0)
        Check.seen += 1


model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[Check()])
assert Check.seen == 4
# after fit: whole again, 16 P on every locality
assert abs(model.model_state_bytes()["total"] - 16 * P) <= 0.05 * 16 * P
print(f"rank {R}: zero {K}: {model.model_state_bytes()['total']} bytes after fit; ok",
      flush=True)
