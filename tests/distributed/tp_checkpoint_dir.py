# fit(checkpoint_dir=) with layers split over a tensor group, under
# `tessera run -n N` (N = 2: tensor=2; N = 4: data=2 x tensor=2): the
# checkpoint holds the whole weights and optimizer state (each split weight
# gathered, as the one-locality model holds it), whichever localities write
# its shards, and a fit resumed from it continues exactly as the fit that was
# never interrupted (losses and weights), here and on one process with plain
# Dense layers; BackupAndRestore's file likewise (it hung: locality 0 gathered
# the split weights alone). Before, each locality wrote its share of its own slices: the
# checkpoint mixed the members' slices and a resume loaded another member's.
# Prints "ok" on every rank.
import glob
import json
import os
import shutil
import sys
import tempfile

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
assert N in (2, 4), N
ZERO = int(sys.argv[1]) if len(sys.argv) > 1 else None  # ZeRO stage on the data axis
mesh = dist.Mesh(data=N // 2, tensor=2)
tp = mesh.group("tensor")

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 16)).astype(np.float32)
y = np.tanh(x @ rng.standard_normal((16, 4))).astype(np.float32)


def make(layers=None, seed=1):
    layers = layers or [nn.ColumnParallelDense(30, activation="relu", group=tp),
                        nn.RowParallelDense(4, group=tp)]
    model = nn.Sequential(layers, input_shape=(16,), seed=seed)
    model.compile(optim.Adam(1e-2), "mse")
    return model


def fit(model, epochs, **kw):
    kw.setdefault("zero", ZERO)
    return model.fit(x, y, batch_size=32, epochs=epochs, shuffle=False, verbose=0,
                     **kw).history["loss"]


# every locality must name the same folder: locality 0's, broadcast
name = np.zeros(256, dtype=np.uint8)
if R == 0:
    made = tempfile.mkdtemp(prefix="tessera-tp-ckpt-").encode()
    name[:len(made)] = np.frombuffer(made, dtype=np.uint8)
folder = np.asarray(dist.broadcast(name)).astype(np.uint8).tobytes().rstrip(b"\0").decode()

straight = make()
losses = fit(straight, 4)
weights = straight.get_weights()

first = make()
backup = os.path.join(folder, "backup")  # BackupAndRestore's file, written by locality 0
fit(first, 2, checkpoint_dir=folder,
    callbacks=[nn.callbacks.BackupAndRestore(backup, delete_checkpoint=False)])
dist.barrier()  # (fit's end commits the checkpoint on the localities that write it)
newest = sorted(glob.glob(os.path.join(folder, "fit1-*", "ckpt-*")),
                key=lambda p: int(p.rsplit("-", 1)[1]))[-1]
with open(os.path.join(newest, "manifest.json")) as f:
    manifest = json.load(f)
shapes = {t["name"]: tuple(t["shape"]) for t in manifest["tensors"]}
assert shapes["l0_kernel"] == (16, 30) and shapes["l1_kernel"] == (30, 4), shapes
assert shapes["optimizer/opt_l0_kernel_m"] == (16, 30), shapes
assert manifest["localities"] == (N if N > 2 else 1), manifest["localities"]

resumed = make(seed=9)  # other initial weights: the checkpoint must replace them all
again = fit(resumed, 4, resume_from=newest)
np.testing.assert_allclose(again, losses[2:], rtol=1e-6)
for a, b in zip(resumed.get_weights(), weights):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

# BackupAndRestore's file (every member joined locality 0's gathers) alike
from_backup = make(seed=9)
np.testing.assert_allclose(fit(from_backup, 4, resume_from=os.path.join(backup, "backup.tsm")),
                           losses[2:], rtol=1e-6)

# the whole state resumes on one locality with plain Dense layers (no group)
alone = make([nn.Dense(30, activation="relu"), nn.Dense(4)], seed=9)
alone_losses = fit(alone, 4, resume_from=newest, data_parallel=False, zero=None)
np.testing.assert_allclose(alone_losses, losses[2:], rtol=1e-5)
for a, b in zip(alone.get_weights(), weights):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

dist.barrier()
if R == 0:
    shutil.rmtree(folder)
print("ok")
