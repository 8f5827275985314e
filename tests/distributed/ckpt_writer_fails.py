# The commit by a gather (checkpoints.py, CheckpointDir._collect): a locality whose shard write
# fails (here: locality 1's second one, a full disk on purpose) makes locality 0 fail at once
# naming it, instead of waiting for its report; the checkpoint is not committed and the previous
# one stays intact.
import errno
import glob
import os
import shutil
import sys
import time

import numpy as np

import tessera
from tessera import nn
from tessera.nn import checkpoints

td = tessera.distributed
rank = td.rank()
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
model = nn.Sequential([nn.Dense(8, activation="relu"), nn.Dense(2, activation="softmax")],
                      input_shape=(4,), seed=1)
model.compile("adam", "sparse_categorical_crossentropy")
token = int(np.asarray(td.broadcast(np.array([time.time_ns() % (1 << 40)], dtype=np.int64)))[0])
folder = f"/tmp/tessera-ckpt-writer-fails-{token}"

if rank == 1:
    real, shards = checkpoints._write_at, []

    def full_disk(dir_fd, name, chunks, hook=None, durable=True):
        if name.endswith(".bin"):
            shards.append(name)
            if len(shards) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(dir_fd, name, chunks, hook, durable)

    checkpoints._write_at = full_disk
start = time.monotonic()
try:
    model.fit(x, y, epochs=2, verbose=0, checkpoint_dir=folder)
    sys.exit(f"rank {rank}: fit ended although locality 1 could not write its shard")
except (OSError, RuntimeError) as e:
    took, text = time.monotonic() - start, str(e)
    print(f"rank {rank}: {type(e).__name__}: {text} ({took:.1f} s)")
    want = "locality 1 could not write its shard (its error says why); it was not committed" \
        if rank == 0 else "locality 1 could not write its shard of checkpoint"
    if want not in text:
        sys.exit(f"rank {rank}: expected {want!r}")
    if took > 30:
        sys.exit(f"rank {rank}: the error took {took:.1f} s")
td.barrier()
if rank == 0:
    committed = sorted(glob.glob(os.path.join(folder, "fit1-*", "ckpt-*", "manifest.json")))
    folders = sorted(glob.glob(os.path.join(folder, "fit1-*", "ckpt-*")))
    if len(committed) != 1 or len(folders) != 2 or not committed[0].startswith(folders[0]):
        sys.exit(f"expected the first checkpoint committed and the second not: {folders}, "
                 f"manifests {committed}")
    shutil.rmtree(folder, ignore_errors=True)
print("ok")
