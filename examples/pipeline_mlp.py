# Pipeline parallelism (docs/parallelism.md, "Pipeline parallelism"): an MLP
# cut into stages, one per locality of the mesh's pipeline axis, trained on
# micro-batches, next to the same MLP trained on one process. Run with
#     tessera run -n 2 --mesh pipeline=2 --microbatches 4 examples/pipeline_mlp.py
# (any pipeline=P with --microbatches M >= P works, and data=D beside it).
# deterministic=True makes the pipelined run bitwise the one-process run with
# the same chunks; the example exits non-zero when it is not.
import hashlib
import sys

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

mesh = dist.mesh()  # from --mesh (TESSERA_MESH)
rng = np.random.default_rng(0)
x = rng.standard_normal((512, 20)).astype(np.float32)
y = (x[:, :5].sum(axis=1) > 0).astype(np.int64) + (x[:, 5] > 1)


def model():
    m = nn.Sequential([nn.Dense(64, activation="relu", name="hidden1"),
                       nn.Dense(64, activation="relu", name="hidden2"),
                       nn.Dense(32, activation="relu", name="hidden3"),
                       nn.Dense(3, activation="softmax", name="classes")],
                      input_shape=(20,), seed=1)
    m.compile(optim.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def digest(m):
    h = hashlib.sha256()
    for a in m.get_weights():  # the whole model, on every locality
        h.update(a.tobytes())
    return h.hexdigest()[:16]


piped = model()
# The mesh's pipeline axis cuts the model (here before hidden3 on 2 stages;
# without pipeline_split the cut balances the parameters); --microbatches
# gives each step's micro-batches (TESSERA_MICROBATCHES).
split = ["hidden3"] if mesh.size("pipeline") == 2 else None
history = piped.fit(x, y, batch_size=64, epochs=3, deterministic=True, pipeline_split=split)
step = piped._pipeline
print(f"rank {dist.rank()}: stage {step.stage} of {step.p} holds "
      f"{', '.join(layer.name for layer in step.plan.layers[step.stage])}")

alone = model()  # every locality: the same model on one process, the same chunks
chunks = mesh.size("data") * step.m
reference = alone.fit(x, y, batch_size=64, epochs=3, verbose=0, deterministic=chunks,
                      data_parallel=False)
same = digest(piped) == digest(alone) and all(
    history.history[k] == reference.history[k] for k in ("loss", "accuracy"))
if dist.rank() == 0:
    print(f"{step.m} micro-batches, {chunks} chunks: weights {digest(piped)} pipelined, "
          f"{digest(alone)} on one process")
    print("predict:", np.array2string(piped.predict(x[:2]), precision=4))
print(f"rank {dist.rank()}: bitwise the one-process run: {same}")
sys.exit(0 if same else 1)
