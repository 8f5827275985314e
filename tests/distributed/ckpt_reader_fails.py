# One reader per shard at resume (checkpoints.py, CheckpointDir._load_shared): a locality that
# cannot read its shard while locality 0 can (here: locality 1's reads fail on purpose) must
# make every locality raise an error naming it, within seconds, instead of leaving the others
# waiting in the all-gather of the bytes or resuming without it.
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


def make():
    model = nn.Sequential([nn.Dense(8, activation="relu"), nn.Dense(2, activation="softmax")],
                          input_shape=(4,), seed=1)
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


token = int(np.asarray(td.broadcast(np.array([time.time_ns() % (1 << 40)], dtype=np.int64)))[0])
folder = f"/tmp/tessera-ckpt-reader-fails-{token}"
make().fit(x, y, epochs=1, verbose=0, checkpoint_dir=folder)  # writes a checkpoint
checkpoints._fit_counts.clear()  # the next fit is the same run (fit call 1): it resumes

if rank == 1:
    def refuse(ck_fd, path, manifest, first=0, stop=None):
        raise ValueError(f"shard {path}/{manifest['shards'][first]['file']}: planted failure")

    checkpoints._read_state_at = refuse
start = time.monotonic()
try:
    make().fit(x, y, epochs=1, verbose=0, checkpoint_dir=folder)
    sys.exit(f"rank {rank}: resumed although locality 1 could not read its shard")
except ValueError as e:
    took = time.monotonic() - start
    text = str(e)
    print(f"rank {rank}: {text} ({took:.1f} s)")
    if "does not check out on locality 1" not in text or \
            (rank == 1 and "planted failure" not in text):
        sys.exit(f"rank {rank}: the error does not name locality 1's failure: {text}")
    if took > 20:
        sys.exit(f"rank {rank}: the error took {took:.1f} s")
td.barrier()
if rank == 0:
    shutil.rmtree(folder, ignore_errors=True)
print("ok")
