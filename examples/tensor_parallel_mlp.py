# Tensor parallelism (docs/parallelism.md): an MLP split over a tensor group,
# trained next to the same MLP on one process. Run with
#     tessera run -n 2 examples/tensor_parallel_mlp.py
# (any -n works: the tensor group is every locality). Exits non-zero when the
# split model's losses differ from the one-process model's by more than 1e-5
# relative.
import sys

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

mesh = dist.Mesh(tensor=dist.size())
tp = mesh.group("tensor")

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 16)).astype(np.float32)
y = np.tanh(x @ rng.standard_normal((16, 4))).astype(np.float32)


def train(layers, **kw):
    model = nn.Sequential(layers, input_shape=(16,), seed=1)
    model.compile(optim.Adam(1e-2), "mse")
    history = model.fit(x, y, batch_size=32, epochs=5, shuffle=False, verbose=0, **kw)
    return model, history.history["loss"]


# 30 hidden units: 15 per member on 2 localities, 8, 8, 7, 7 on 4.
split, split_loss = train([nn.ColumnParallelDense(30, activation="relu", group=tp),
                           nn.RowParallelDense(4, group=tp)])
# fit's data parallelism runs over the mesh's data axis, of size 1 here: every
# member of the tensor group sees every batch. The model of plain Dense layers
# is trained on each locality alone (data_parallel=False), as one process would.
whole, whole_loss = train([nn.Dense(30, activation="relu"), nn.Dense(4)], data_parallel=False)

kernel = split.layers[0].weights[0]  # this member's columns of the first kernel
whole_kernel = split.get_weights()[0]  # gathered: every member calls it
print(f"rank {dist.rank()}: first kernel slice {kernel.shape}, whole {whole_kernel.shape}")
if dist.rank() == 0:
    for epoch, (a, b) in enumerate(zip(split_loss, whole_loss)):
        print(f"epoch {epoch + 1}: loss {a:.6f} split over {tp.size}, {b:.6f} on one")
worst = max(abs(a - b) / abs(b) for a, b in zip(split_loss, whole_loss))
print(f"rank {dist.rank()}: largest relative difference {worst:.1e}")
sys.exit(0 if worst <= 1e-5 else 1)
