# A layer assigning a non-trainable weight in its call (a count) is refused by
# data-parallel fit, naming the layer and the user's line, on every rank: each
# rank's part of the batch would compute its own new value; prints "ok".
import re

import numpy as np

from tessera import nn


class Counter(nn.layers.Layer):
    def build(self, shape):
        self.count = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                     name="count")

    def call(self, x):
        self.count.assign_add(1.0)
        return x


inp = nn.Input((3,))
model = nn.Model(inp, nn.layers.Dense(1)(Counter(name="counter")(inp)))
model.compile(optimizer="sgd", loss="mse")
x = np.ones((16, 3), np.float32)
try:
    model.fit(x, x[:, :1], batch_size=8, epochs=1, verbose=0, data_parallel=True)
    raise AssertionError("data-parallel fit of an assigning layer was not refused")
except ValueError as e:
    assert re.search(r"\[fit\] layer 'counter' assigns its non-trainable weight 'count'.*"
                     r"data-parallel.*dp_fit_layer_state.py:\d+", str(e)), str(e)
assert float(model.get_layer("counter").count.numpy()) == 0.0
print("ok")
