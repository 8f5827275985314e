# ZeRO (docs/parallelism.md, "ZeRO"): an MLP trained with its optimizer
# state, gradients and weights sharded over the data axis. Run with
#     tessera run -n 4 --mesh data=4 --zero 3 examples/zero_mlp.py
# (any -n, any --zero). Prints each locality's model-state bytes during fit
# next to the formula, and checks that deterministic mode gives bitwise the
# weights and optimizer state of the same training on one locality; exits
# non-zero when it does not.
import hashlib
import os
import sys

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

rng = np.random.default_rng(0)
x = rng.standard_normal((512, 32)).astype(np.float32)
y = np.tanh(x @ rng.standard_normal((32, 4))).astype(np.float32)


def mlp():
    model = nn.Sequential([nn.Dense(256, activation="relu"), nn.Dense(256, activation="relu"),
                           nn.Dense(4)], input_shape=(32,), seed=1)
    model.compile(optim.Adam(1e-3, clipnorm=1.0), "mse")
    return model


def sha256(model):
    h = hashlib.sha256()
    for w in model.get_weights():
        h.update(w.tobytes())
    for k in sorted(model._opt_state):
        h.update(np.asarray(model._opt_state[k]).tobytes())
    return h.hexdigest()[:16]


class Memory(nn.callbacks.Callback):
    """Prints this locality's model state once, during the first step."""

    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            self.held = self.model.model_state_bytes()


stage = int(os.environ.get("TESSERA_ZERO", "0"))
d = dist.mesh().size("data")
model, memory = mlp(), Memory()
# zero= is not given: fit reads TESSERA_ZERO (tessera run --zero)
history = model.fit(x, y, batch_size=64, epochs=3, verbose=0, deterministic=True,
                    callbacks=[memory])
one = mlp()  # the same training on this locality alone
one.fit(x, y, batch_size=64, epochs=3, verbose=0, deterministic=True, data_parallel=False)

P = model.count_params()
formula = {0: 16 * P, 1: (8 + 8 / d) * P, 2: (4 + 12 / d) * P, 3: 16 * P / d}[stage]
if dist.rank() == 0:
    print(f"ZeRO stage {stage} on a data axis of {d}, {P:,} parameters")
    print(f"loss per epoch: {', '.join(f'{v:.6f}' for v in history.history['loss'])}")
    print(f"model state held during fit: {memory.held}")
    print(f"formula: {formula:,.0f} bytes; held/formula = {memory.held['total'] / formula:.4f}")
    print(f"SHA-256 of weights and optimizer state: {sha256(model)} (one locality: "
          f"{sha256(one)})")
if sha256(model) != sha256(one):
    sys.exit("deterministic ZeRO differs from one locality")
