# Several fits in one script under `tessera run --checkpoint-dir` (for
# ckpt_restart.py, scenario folds): a 3-fold cross-validation (a new model per
# fold) and a loop of fit(epochs=1) on one model. Every fit is its own run:
# each trains its epochs, and a relaunch resumes each from its own
# checkpoints. Kills itself as asked, on one launch only:
#   --kill ATTEMPT:RANK:FIT:STEP   SIGKILL before update STEP of the FIT-th fit (from 1)
# Locality 0 writes, for every fit, the SHA-256 of the final state, the update
# count and the history (without the times) to --out as JSON.
import argparse
import hashlib
import json
import os
import signal

import numpy as np

import tessera
import tessera.distributed as td
from tessera import nn

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--kill", action="append", default=[])
p.add_argument("--single", action="store_true", help="one process, no checkpoints (the reference)")
args = p.parse_args()

rng = np.random.default_rng(7)
x = rng.normal(size=(384, 10)).astype(np.float32)
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1)
attempt = int(os.environ.get("TESSERA_RESTART", "0"))
rank = td.rank()
fit_no = 0


def make():
    m = nn.Sequential([nn.Dense(24, activation="relu"), nn.Dropout(0.25),
                       nn.Dense(3, activation="softmax")], input_shape=(10,), seed=5)
    m.compile(tessera.optim.Adam(tessera.optim.CosineDecay(1e-2, 80)),
              "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


class Killer(nn.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        for spec in args.kill:
            a, r, f, step = (int(v) for v in spec.split(":"))
            if (a, r, f, step) == (attempt, rank, fit_no, self.model._iteration):
                os.kill(os.getpid(), signal.SIGKILL)


def digest(m):
    h = hashlib.sha256()
    for k in sorted(m.weights.keys()):
        h.update(np.ascontiguousarray(m.weights[k]).tobytes())
    for k in sorted(m._opt_state or {}):
        h.update(np.ascontiguousarray(m._opt_state[k]).tobytes())
    return h.hexdigest()


def train(m, xs, ys, epochs):
    global fit_no
    fit_no += 1
    before = digest(m)
    if args.single:
        h = m.fit(xs, ys, batch_size=32, epochs=epochs, verbose=0, deterministic=8,
                  data_parallel=False, checkpoint_dir=False)
    else:
        h = m.fit(xs, ys, batch_size=32, epochs=epochs, verbose=0, deterministic=8,
                  checkpoint_every=[5, "epoch"], callbacks=[Killer()])
    if digest(m) == before:
        raise SystemExit(f"fit {fit_no} did not change the weights")
    return {"digest": digest(m), "updates": m._iteration, "epochs": h.epoch,
            "history": {k: v for k, v in h.history.items() if k != "time"}}


results = []
folds = np.array_split(np.arange(len(x)), 3)
for k in range(3):
    keep = np.concatenate([f for j, f in enumerate(folds) if j != k])
    results.append(train(make(), x[keep], y[keep], 3))
model = make()
for _ in range(3):
    results.append(train(model, x, y, 1))
if rank == 0:
    with open(args.out, "w") as f:
        json.dump(results, f)
print("ok")
