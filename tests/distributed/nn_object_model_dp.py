# Keras's object model under data-parallel fit (`tessera run -n N`): a user's
# layer with add_weight trains as in one process (its Variables show the
# trained weights on every locality); a layer's add_loss and a user's Metric,
# whose terms would be made per locality, are refused naming them. Prints "ok".
import numpy as np

from tessera import nn


class Linear(nn.Layer):
    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                 initializer="random_normal")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        return np.matmul(inputs, self.w) + self.b


class ActivityRegularizationLayer(nn.Layer):
    def call(self, inputs):
        self.add_loss(0.01 * np.sum(inputs))
        return inputs


class PredictionSum(nn.metrics.Metric):
    def __init__(self, name="prediction_sum", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.total.assign_add(np.sum(y_pred))

    def result(self):
        return self.total


rng = np.random.default_rng(0)
x = rng.normal(size=(96, 5)).astype(np.float32)
y = rng.normal(size=(96, 3)).astype(np.float32)


def model(extra=None):
    inp = nn.Input((5,))
    lin = Linear(3)
    h = lin(inp)
    if extra is not None:
        h = extra(h)
    m = nn.Model(inp, h)
    m.compile(nn.optimizers.SGD(0.05), "mse")
    return m, lin


def train(data_parallel):
    # The same initial weights for both runs: unseeded initializers draw from
    # the global seed's stream, which moves on with each model (as Keras's).
    nn.utils.set_random_seed(0)
    m, lin = model()
    m.fit(x, y, batch_size=32, epochs=2, seed=1, verbose=0, data_parallel=data_parallel)
    return m, lin


dp, dp_lin = train(None)
one, _ = train(False)
for a, b in zip(dp.get_weights(), one.get_weights()):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
np.testing.assert_array_equal(dp_lin.w.numpy(), dp.get_weights()[0])
assert dp_lin.weights == [dp_lin.w, dp_lin.b]

m, _ = model(ActivityRegularizationLayer())
try:
    m.fit(x, y, batch_size=32, epochs=1, verbose=0)
    raise SystemExit("add_loss was not refused under data-parallel fit")
except ValueError as e:
    assert "add_loss is not supported yet with data-parallel" in str(e), e

m, _ = model()
m.compile(nn.optimizers.SGD(0.05), "mse", metrics=[PredictionSum()])
try:
    m.fit(x, y, batch_size=32, epochs=1, verbose=0)
    raise SystemExit("a user's Metric was not refused under data-parallel fit")
except ValueError as e:
    assert "the metric 'prediction_sum'" in str(e), e
print("ok")
