# Data-parallel training of a model whose layer reads a large NumPy constant (bound to the
# programs once, nn/program_constants.py, issue 30) under `tessera run -n N` matches one
# process; prints "ok".
import numpy as np
import tessera.distributed as td
from tessera import nn
from tessera.nn import ops

table = np.random.default_rng(0).standard_normal((32, 100)).astype("float32")

class T(nn.Layer):
    def call(self, x):
        return ops.tanh(ops.matmul(x, ops.convert_to_tensor(table)))

x = np.random.default_rng(1).standard_normal((64, 32)).astype("float32")
y = np.random.default_rng(2).standard_normal((64, 3)).astype("float32")

def train(dp):
    inp = nn.Input((32,))
    m = nn.Model(inp, nn.layers.Dense(3)(T()(inp)))
    m.set_weights([np.full((100, 3), 0.01, "float32"), np.zeros(3, "float32")])
    m.compile(optimizer=nn.optimizers.SGD(0.1), loss="mse")
    h = m.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0, data_parallel=dp)
    return m, h

s, hs = train(False)
d, hd = train(None)
np.testing.assert_allclose(hd.history["loss"], hs.history["loss"], rtol=1e-4)
for a, b in zip(d.get_weights(), s.get_weights()):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
print("ok")
