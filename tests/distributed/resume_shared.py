# fit(resume_from=folder) under `tessera run -n N`: each locality reads only
# its block of the checkpoint's shards and one all-gather shares them
# (docs/scaling.md, "Checkpoints"). Checks, on every locality, that the
# state loaded is bitwise the checkpoint's (as one process reads it), for a
# checkpoint of N shards and one of a single shard; that a corrupted shard
# of the newest checkpoint makes every locality fall back to the previous
# one; and that a corrupted checkpoint named directly is an error on every
# locality, never a hang. Prints "rank R: ok".
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np

import tessera
import tessera.distributed as td
from tessera import nn
from tessera.nn import checkpoints as ck

rank, size = td.rank(), td.size()
rng = np.random.default_rng(3)
x = rng.normal(size=(96, 10)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5)


def make():
    m = nn.Sequential([nn.Dense(16, activation="tanh"), nn.Dense(3, activation="softmax")],
                      input_shape=(10,), seed=5)
    m.compile(tessera.optim.Adam(0.01), "sparse_categorical_crossentropy")
    return m


def on_disk(path):
    """The checkpoint's tensors as one process reads them."""
    manifest = ck.read_manifest(path)
    return ck._tensors_from(manifest, ck.read_state(path, manifest), path)


def same(model, tensors, where):
    for name, a in model.weights.items():
        if not np.array_equal(np.asarray(a), tensors[name]):
            sys.exit(f"rank {rank}: {where}: weight {name} differs from the checkpoint's")
    for k, a in (model._opt_state or {}).items():
        if np.ndim(a) and not np.array_equal(np.asarray(a), tensors[f"optimizer/{k}"]):
            sys.exit(f"rank {rank}: {where}: optimizer state {k} differs from the checkpoint's")


def steps(run):
    return sorted(int(n.split("-")[1]) for n in os.listdir(run) if n.startswith("ckpt-"))


def resume(folder):
    m = make()
    # epochs=3 and the run wrote epochs 1-3: nothing is left to train, the state is as loaded
    m.fit(x, y, batch_size=32, epochs=3, verbose=0, resume_from=folder)
    return m


base = os.environ.get("TMPDIR", tempfile.gettempdir())
top = os.path.join(base, f"tessera_resume_shared_{os.environ.get('TESSERA_RUN_ID', 'x')}")
for kind in ("all", "one"):  # written by every locality (N shards), by locality 0 alone (1)
    folder = os.path.join(top, kind)
    w = make()
    w.fit(x, y, batch_size=32, epochs=3, verbose=0, checkpoint_dir=folder, keep_checkpoints=3,
          data_parallel=None if kind == "all" else False)
    td.barrier()
    run = os.path.join(folder, ck.only_run(folder))
    done = steps(run)
    if len(done) != 3:
        sys.exit(f"rank {rank}: {kind}: expected 3 checkpoints in {run}, found {done}")
    newest = os.path.join(run, f"ckpt-{done[-1]}")
    shards = ck.read_manifest(newest)["shards"]
    if len(shards) != (size if kind == "all" else 1):
        sys.exit(f"rank {rank}: {kind}: {len(shards)} shards, expected "
                 f"{size if kind == 'all' else 1}")
    same(resume(folder), on_disk(newest), f"{kind}: resume_from the folder")
    same(resume(newest), on_disk(newest), f"{kind}: resume_from the checkpoint")
    td.barrier()
    # the newest checkpoint's last shard corrupted: every locality falls back to the previous
    if rank == 0:
        shard = os.path.join(newest, shards[-1]["file"])
        with open(shard, "r+b") as fh:
            b = fh.read(1)
            fh.seek(0)
            fh.write(bytes([b[0] ^ 0xFF]))
    td.barrier()
    previous = os.path.join(run, f"ckpt-{done[-2]}")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        m = make()
        m.fit(x, y, batch_size=32, epochs=2, verbose=0, resume_from=folder, initial_epoch=0)
    if rank == 0 and not any("falling back to the previous one" in str(s.message)
                             for s in seen):
        sys.exit(f"rank 0: {kind}: no warning about the corrupted checkpoint {newest}")
    same(m, on_disk(previous), f"{kind}: the fallback")
    try:
        resume(newest)
    except ValueError as e:
        if "nothing was loaded" not in str(e) or "ckpt-" not in str(e):
            sys.exit(f"rank {rank}: {kind}: unexpected error: {e}")
    else:
        sys.exit(f"rank {rank}: {kind}: the corrupted checkpoint {newest} was loaded")
    td.barrier()
if rank == 0:
    shutil.rmtree(top, ignore_errors=True)
print(f"rank {rank}: ok", flush=True)
