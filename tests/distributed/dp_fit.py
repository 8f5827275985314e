# Data-parallel training under `tessera run -n N` matches training on one
# process on the same global batches (within float tolerance); prints "ok".
import numpy as np

import tessera
import tessera.distributed as td
from tessera import nn

rng = np.random.default_rng(0)
x = rng.normal(size=(96, 6)).astype(np.float32)
y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 0.5)


def train(data_parallel, overlap=True):
    model = nn.Sequential([nn.Dense(16, activation="tanh"), nn.Dense(8, activation="relu"),
                           nn.Dense(3, activation="softmax")], input_shape=(6,), seed=3)
    model.BUCKET_BYTES = 300  # several buckets, some with several members
    model.OVERLAP_BACKWARD = overlap
    model.compile(tessera.optim.Adam(0.01), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    h = model.fit(x, y, batch_size=32, epochs=3, seed=1, verbose=0, data_parallel=data_parallel)
    return model, h


single, h1 = train(False)
multi, hn = train(None)
# Buckets reduced from inside the backward pass, and after it.
after, ha = train(None, overlap=False)
assert "grad_bucket" in multi.train_code and "grad_bucket" not in after.train_code
for model, h in ((multi, hn), (after, ha)):
    for k in single.weights.keys():
        np.testing.assert_allclose(model.weights[k], single.weights[k], rtol=1e-4, atol=1e-5,
                                   err_msg=k)
    np.testing.assert_allclose(h.history["loss"], h1.history["loss"], rtol=1e-4)
    np.testing.assert_allclose(h.history["accuracy"], h1.history["accuracy"], rtol=1e-6)
# Parameters stay identical on every locality.
w = multi.weights["l0_kernel"]
np.testing.assert_array_equal(td.broadcast(w, root=0), w)
assert len(multi._bucket_plan(multi._params(True))) > 1

# The buckets are reduced while the backward pass goes on: in a traced step,
# the first bucket's all_reduce starts before the last gradient computation
# (of the first layers) ends, and with OVERLAP_BACKWARD off after it.
import json
import tempfile


def bucket_starts(model):
    with tempfile.TemporaryDirectory() as d:
        with tessera.trace(d) as t:
            model.fit(x, y, batch_size=96, epochs=1, verbose=0, shuffle=False)
        ev = [e for e in json.loads(t.chrome())["traceEvents"]
              if e.get("ph") == "X" and e.get("pid") == td.rank()]
    grads = [e for e in ev if e["name"].endswith("_grad") or "_grad_" in e["name"]]
    reduces = [e for e in ev if e["name"].startswith("all_reduce(")
               and e["ts"] < min(u["ts"] for u in ev if u["name"].endswith("_update"))]
    return min(e["ts"] for e in reduces), max(e["ts"] + e["dur"] for e in grads)


first, last_grad = bucket_starts(multi)
assert first < last_grad, (first, last_grad)
first, last_grad = bucket_starts(after)
assert first >= last_grad, (first, last_grad)
print("ok")
