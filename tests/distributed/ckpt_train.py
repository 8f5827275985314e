# Training with distributed checkpoints, for ckpt_restart.py: a small model
# with dropout, deterministic mode, checkpoints every few updates into
# TESSERA_CHECKPOINT_DIR (set by `tessera run --checkpoint-dir`; no
# checkpoint_dir in the script). Kills itself as asked, on one launch only:
#   --kill ATTEMPT:RANK:STEP        SIGKILL before update STEP
#   --kill ATTEMPT:RANK:STEP:write  SIGKILL half way through writing this
#                                   locality's shard of checkpoint STEP
#   --stop STEP                     every locality leaves (exit 3) before update STEP
# Locality 0 writes the SHA-256 of the final weights to --out.
import argparse
import glob
import hashlib
import os
import signal
import sys
import time

import numpy as np

import tessera
import tessera.distributed as td
from tessera import nn
from tessera.nn import checkpoints

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--every", type=int, default=6)
p.add_argument("--keep", type=int, default=2)
p.add_argument("--chunks", type=int, default=8)
p.add_argument("--kill", action="append", default=[])
p.add_argument("--stop", type=int, default=None)
p.add_argument("--single", action="store_true", help="one process, no checkpoints (the reference)")
p.add_argument("--callback", action="store_true",
               help="checkpoints from ModelCheckpoint(folder, save_training_state=True)")
args = p.parse_args()

rng = np.random.default_rng(3)
x = rng.normal(size=(384, 10)).astype(np.float32)
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1)


def make():
    m = nn.Sequential([nn.Dense(32, activation="relu"), nn.Dropout(0.25),
                       nn.Dense(16, activation="tanh"), nn.Dense(3, activation="softmax")],
                      input_shape=(10,), seed=5)
    m.compile(tessera.optim.Adam(tessera.optim.CosineDecay(1e-2, 60)),
              "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


attempt = int(os.environ.get("TESSERA_RESTART", "0"))
rank = td.rank()
armed = {"write": None}


def wait_committed(step):
    """Waits until the checkpoint before update `step` is committed, so the
    test knows where the restarted job resumes (writes are asynchronous)."""
    last = (step - 1) // args.every * args.every
    # DIR/fit1-<run id>-<identity>/ckpt-<step>: the run of this job's one fit
    pattern = os.path.join(os.environ["TESSERA_CHECKPOINT_DIR"],
                           f"fit1-{os.environ['TESSERA_RUN_ID']}-*", f"ckpt-{last}",
                           "manifest.json")
    deadline = time.monotonic() + 20
    while last > 0 and not glob.glob(pattern) and time.monotonic() < deadline:
        time.sleep(0.01)
    if last > 0 and not glob.glob(pattern):
        sys.exit(f"checkpoint {last} was not committed within 20 s ({pattern})")


class Killer(nn.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        it = self.model._iteration
        if args.stop is not None and it == args.stop and attempt == 0:
            wait_committed(it)
            sys.stdout.flush()
            os._exit(3)
        for spec in args.kill:
            a, r, step, *how = spec.split(":")
            if int(a) == attempt and int(r) == rank and int(step) == it and not how:
                wait_committed(it)
                os.kill(os.getpid(), signal.SIGKILL)

    def on_train_batch_end(self, batch, logs=None):
        for spec in args.kill:
            a, r, step, *how = spec.split(":")
            if how and int(a) == attempt and int(r) == rank and int(step) == self.model._iteration:
                wait_committed(int(step))
                armed["write"] = True


def kill_mid_write():
    if armed["write"]:
        os.kill(os.getpid(), signal.SIGKILL)


checkpoints._partial_write_hook = kill_mid_write
model = make()
if args.single:
    model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=0, deterministic=args.chunks,
              data_parallel=False, checkpoint_dir=False)
elif args.callback:
    folder = nn.callbacks.ModelCheckpoint(os.environ["TESSERA_CHECKPOINT_DIR"],
                                          save_training_state=True, save_freq=args.every,
                                          keep_checkpoints=args.keep, verbose=1)
    model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=2, deterministic=args.chunks,
              callbacks=[Killer(), folder])
else:
    model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=2, deterministic=args.chunks,
              checkpoint_every=[args.every, "epoch"], keep_checkpoints=args.keep,
              callbacks=[Killer()])
h = hashlib.sha256()
for k in sorted(model.weights.keys()):
    h.update(np.ascontiguousarray(model.weights[k]).tobytes())
for k in sorted(model._opt_state):
    h.update(np.ascontiguousarray(model._opt_state[k]).tobytes())
if rank == 0:
    with open(args.out, "w") as f:
        f.write(f"{h.hexdigest()} {model._iteration}\n")
print("ok")
