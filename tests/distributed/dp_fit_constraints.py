# Constraints (kernel_constraint & co) under data parallelism: each step's
# projection applied to the updated whole weights gives the weights of training
# on one process on the same global batches, with and without ZeRO 1 and 2;
# ZeRO 3 (which never holds the whole weights) is an error naming the
# constraint. Prints "ok".
import numpy as np

import tessera.distributed as td
from tessera import nn

rng = np.random.default_rng(0)
x = rng.normal(size=(48, 6)).astype(np.float32)
y = rng.normal(size=(48, 3)).astype(np.float32)
c = nn.constraints


def train(data_parallel, zero=None):
    model = nn.Sequential([
        nn.layers.Dense(8, activation="tanh", kernel_constraint=c.MaxNorm(0.6),
                        bias_constraint=c.NonNeg()),
        nn.layers.Dense(3, kernel_constraint=c.UnitNorm(axis=1))], input_shape=(6,), seed=3)
    model.compile(nn.optimizers.SGD(0.1), "mse")
    kw = {} if zero is None else {"zero": zero}
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0,
              data_parallel=data_parallel, **kw)
    return model


single = train(False)
assert np.linalg.norm(single.weights["l0_kernel"], axis=0).max() <= 0.6 + 1e-5
for zero in (None, 1, 2):
    multi = train(None, zero)
    for k in single.weights.keys():
        np.testing.assert_allclose(multi.weights[k], single.weights[k], rtol=1e-4, atol=1e-5,
                                   err_msg=f"{k} zero={zero}")
    w = multi.weights["l0_kernel"]
    np.testing.assert_array_equal(td.broadcast(w, root=0), w)
try:
    train(None, 3)
except ValueError as e:
    assert "constraint MaxNorm" in str(e) and "ZeRO 3" in str(e), e
else:
    raise AssertionError("ZeRO 3 with a constraint trained")
if td.rank() == 0:
    print("ok")
