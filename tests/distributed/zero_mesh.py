# fit on the data axis of a 2-D mesh (run with `tessera run -n 4`):
# Mesh(data=2, tensor=2) with ColumnParallelDense -> RowParallelDense trains
# with fit's default data parallelism, which sums over the data group only
# (members of one tensor group take the same rows of every batch), plain and
# under ZeRO 1, 2 and 3: 100 steps of Adam with the loss within 1e-5 relative
# of the same MLP of plain Dense layers on one process (computed here by
# every rank, with no collective), and the whole weights after fit; under a
# data-only mesh of the job (TESSERA_MESH unset) nothing changes. Prints "ok"
# on every rank.
import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
assert N == 4, N
mesh = dist.Mesh(data=2, tensor=2)
tp = mesh.group("tensor")

rng = np.random.default_rng(3)
x = rng.standard_normal((64, 6)).astype(np.float32)
y = np.tanh(x @ rng.standard_normal((6, 3))).astype(np.float32)


def mlp(layers):
    model = nn.Sequential(layers, input_shape=(6,), seed=11, dtype="float32")
    model.compile(optim.Adam(1e-2), "mse")
    return model


def train(model, epochs, **kw):
    return model.fit(x, y, batch_size=16, epochs=epochs, shuffle=False, verbose=0,
                     **kw).history["loss"]


for zero, epochs in ((0, 25), (1, 5), (2, 5), (3, 25)):  # 4 steps an epoch
    ref = mlp([nn.Dense(7, activation="relu"), nn.Dense(3)])
    h_ref = train(ref, epochs, data_parallel=False)
    par = mlp([nn.ColumnParallelDense(7, activation="relu", group=tp),
               nn.RowParallelDense(3, group=tp)])
    h_par = train(par, epochs, zero=zero)
    assert h_ref[-1] < h_ref[0], h_ref
    np.testing.assert_allclose(h_par, h_ref, rtol=1e-5, err_msg=f"zero={zero}")
    for a, b in zip(par.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"zero={zero}")
    # the data group sums: the two data members' batches differ, so a sum over
    # the tensor group (or none) would not give the one-process losses above
    assert par._data_axis(None)[1:] == (2, mesh.rank("data"))
print(f"rank {R}: ok", flush=True)
