# Constraints in pipeline stages (`tessera run -n 2 --mesh pipeline=2`): each
# stage projects its own constrained weights after its update, giving the
# weights of the one-process fit. Prints "ok" on every rank.
import numpy as np

from tessera import nn

rng = np.random.default_rng(0)
X = rng.normal(size=(32, 6)).astype(np.float32)
Y = rng.normal(size=(32, 3)).astype(np.float32)
c = nn.constraints


def make():
    inp = nn.Input((6,))
    h = nn.layers.Dense(8, activation="tanh", kernel_constraint=c.MaxNorm(0.5),
                        bias_constraint=c.NonNeg(), name="d1")(inp)
    out = nn.layers.Dense(3, kernel_constraint=c.UnitNorm(), name="d2")(h)
    model = nn.Model(inp, out, seed=3)
    model.compile(nn.optimizers.SGD(0.1), "mse")
    return model


FIT = dict(batch_size=16, epochs=2, shuffle=False, verbose=0)
ref = make()
ref.fit(X, Y, data_parallel=False, **FIT)
pm = make()
pm.fit(X, Y, pipeline_split=["d2"], microbatches=2, **FIT)
for a, b in zip(pm.get_weights(), ref.get_weights()):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
assert np.linalg.norm(pm.get_weights()[0], axis=0).max() <= 0.5 + 1e-5
print("ok")
