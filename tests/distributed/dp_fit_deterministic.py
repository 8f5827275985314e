# Deterministic data-parallel fit: under `tessera run -n N` the weights after a
# few steps are bitwise those of the single-process deterministic run, which is
# computed twice: in this process (data_parallel=False) and, on locality 0, in
# a separate process with another number of threads. Includes dropout, batch
# normalization and empty chunks (the last batch has 4 rows for 8 chunks).
# Prints "ok".
import hashlib
import json
import os
import subprocess
import sys

import numpy as np

import tessera
import tessera.distributed as td
from tessera import nn

rng = np.random.default_rng(0)
x = rng.normal(size=(1028, 64, 4)).astype(np.float32)
y = (x[:, :, 0].mean(axis=1) > 0).astype(np.int64) + (x[:, 3, 1] > 0.5)


def train(data_parallel, deterministic=True, random_layers=True):
    # Dropout masks and batch statistics are per chunk in deterministic mode
    # (per locality's share otherwise); without them both modes compute the
    # same gradients up to rounding.
    extra = [nn.Dropout(0.25), nn.BatchNormalization()] if random_layers else []
    model = nn.Sequential([nn.Conv1D(16, 3, activation="relu"), nn.MaxPool1D(2), nn.Flatten(),
                           nn.Dense(128, activation="tanh")] + extra
                          + [nn.Dense(3, activation="softmax")], input_shape=(64, 4), seed=3)
    model.BUCKET_BYTES = 4096  # several buckets, some with several members
    model.compile(tessera.optim.Adam(0.01), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    h = model.fit(x, y, batch_size=512, epochs=2, seed=1, verbose=0, data_parallel=data_parallel,
                  deterministic=deterministic)
    return model, h


def digest(model):
    h = hashlib.sha256()
    for k in sorted(model.weights.keys()):
        h.update(k.encode())
        h.update(np.ascontiguousarray(model.weights[k]).tobytes())
    return h.hexdigest()


def summary(model, history):
    return {"digest": digest(model), "loss": history.history["loss"],
            "accuracy": history.history["accuracy"]}


if sys.argv[1:] == ["--reference"]:
    # The single-process run, in a process of its own (no MPI).
    print(json.dumps(summary(*train(False))))
    sys.exit(0)

r, n = td.rank(), td.size()
assert not tessera._core.deterministic(), "deterministic tiling is off outside fit"
single = summary(*train(False))
multi = summary(*train(None))
assert not tessera._core.deterministic(), "fit restores the tiling mode"
assert multi == single, f"rank {r} of {n}: data-parallel {multi} != single-process {single}"

# Locality 0 also runs the reference in a separate single process with
# another number of threads (1 or 3; the dense layer's product on a chunk of
# 64 rows gives other bits on 1 thread than on 2 or more unless tiles are
# fixed), and every locality compares.
reference = ""
if r == 0:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "OPAL_", "ORTE_"))}
    env["TESSERA_THREADS"] = "3" if tessera.num_threads() == 1 else "1"
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--reference"], env=env,
                         check=True, capture_output=True, text=True).stdout
    reference = json.loads(out.strip().splitlines()[-1])["digest"]
codes = np.frombuffer(reference.encode().ljust(64), dtype=np.uint8).astype(np.int64)
reference = bytes(td.broadcast(codes, root=0).astype(np.uint8)).decode()
assert multi["digest"] == reference, \
    f"rank {r} of {n}: {multi['digest']} != separate single process {reference}"

# Without dropout and batch normalization the deterministic mode trains like
# the normal mode (single process) up to rounding.
normal, h_normal = train(False, deterministic=False, random_layers=False)
det, h_det = train(None, random_layers=False)
for k in det.weights.keys():
    np.testing.assert_allclose(det.weights[k], normal.weights[k], rtol=1e-3, atol=1e-4, err_msg=k)
np.testing.assert_allclose(h_det.history["loss"], h_normal.history["loss"], rtol=1e-5)
np.testing.assert_allclose(h_det.history["accuracy"], h_normal.history["accuracy"], rtol=1e-12)

# Chunks the localities cannot share evenly are an error.
if n > 1:
    try:
        train(None, deterministic=2 * n + 1)
    except ValueError as e:
        assert f"into {2 * n + 1} chunks, which {n} localities cannot share evenly" in str(e), e
    else:
        raise AssertionError("deterministic=2n+1 should fail")
print("ok")
