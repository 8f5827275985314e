"""Keras's object model in tessera.nn (issue 30, item 2): Variable, add_weight,
add_loss, and the keras-io guide "Making new layers and models via
subclassing", checked against Keras 3 on JAX (the oracle: same weights, same
data -> same outputs, losses and trained weights)."""

import os

import numpy as np
import pytest

import tessera.nn as nn

os.environ.setdefault("KERAS_BACKEND", "jax")


class Linear(nn.Layer):
    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                 initializer="random_normal", trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=True)

    def call(self, inputs):
        return np.matmul(inputs, self.w) + self.b


class ActivityRegularizationLayer(nn.Layer):
    def __init__(self, rate=1e-2, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * np.sum(inputs))
        return inputs


def _keras_classes(keras):
    ops = keras.ops

    class KLinear(keras.layers.Layer):
        def __init__(self, units=32, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                     initializer="random_normal", trainable=True)
            self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=True)

        def call(self, inputs):
            return ops.matmul(inputs, self.w) + self.b

    class KActReg(keras.layers.Layer):
        def __init__(self, rate=1e-2, **kwargs):
            super().__init__(**kwargs)
            self.rate = rate

        def call(self, inputs):
            self.add_loss(self.rate * ops.sum(inputs))
            return inputs

    return KLinear, KActReg


def test_add_weight_is_the_variable_in_weights_and_outputs_match_keras(keras):
    KLinear, _ = _keras_classes(keras)
    x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    ours, theirs = Linear(4), KLinear(4)
    ours(x)
    theirs(x)
    assert ours.weights == [ours.w, ours.b]
    assert ours.weights[0] is ours.w and ours.weights[1] is ours.b
    assert ours.trainable_weights == [ours.w, ours.b] and ours.non_trainable_weights == []
    assert ours.w.shape == (5, 4) and ours.w.dtype == "float32" and ours.w.trainable
    assert ours.w.path.endswith("/" + ours.w.name) and ours.w.path.startswith(ours.name)
    rng = np.random.default_rng(1)
    w, b = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)
    ours.set_weights([w, b])
    theirs.set_weights([w, b])
    np.testing.assert_array_equal(ours.w.numpy(), w)  # set_weights shows in the Variable
    np.testing.assert_allclose(ours(x), np.asarray(theirs(x)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours(x), x @ w + b, rtol=1e-6, atol=1e-6)


def test_variable_assign_and_arithmetic_like_keras(keras):
    ours = Linear(3)
    ours(np.ones((1, 2), np.float32))
    kv = keras.Variable(np.zeros(3, np.float32))
    ours.b.assign(np.full(3, 2.0))
    kv.assign(np.full(3, 2.0))
    ours.b.assign_add(np.arange(3.0))
    kv.assign_add(np.arange(3.0).astype(np.float32))
    ours.b.assign_sub(np.ones(3))
    kv.assign_sub(np.ones(3, np.float32))
    np.testing.assert_array_equal(ours.b.numpy(), np.asarray(kv))
    np.testing.assert_array_equal(np.asarray(ours.b * 2 + 1), np.asarray(kv * 2 + 1))
    np.testing.assert_array_equal(np.asarray(ours.b.value), np.asarray(kv.value))
    assert float(np.sum(ours.b)) == float(keras.ops.sum(kv))
    # the layer computes with the assigned value
    np.testing.assert_allclose(ours(np.ones((1, 2), np.float32)),
                               np.ones((1, 2)) @ ours.w.numpy() + ours.b.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"assign.*shape \(3,\).*\(4,\)"):
        ours.b.assign(np.zeros(4))
    v = nn.Variable(np.array([1.0, 2.0]), name="v")
    assert v.dtype == "float32" and v.name == "v" and v.path == "v"
    v.assign_add([1.0, 1.0])
    np.testing.assert_array_equal(v.numpy(), [2.0, 3.0])
    with pytest.raises(ValueError, match="initializer.*needs a shape"):
        nn.Variable("zeros")


def _models(keras, rate=0.05):
    KLinear, KActReg = _keras_classes(keras)
    inp = nn.Input((5,))
    lin = Linear(3)
    ours = nn.Model(inp, ActivityRegularizationLayer(rate)(lin(inp)))
    kin = keras.Input((5,))
    klin = KLinear(3)
    theirs = keras.Model(kin, KActReg(rate)(klin(kin)))
    rng = np.random.default_rng(2)
    w = [rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)]
    ours.set_weights(w)
    theirs.set_weights(w)
    return ours, theirs, lin


def test_add_loss_is_added_to_the_loss_as_keras_does(keras):
    ours, theirs, lin = _models(keras)
    assert len(ours.losses) == 1
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 5)).astype(np.float32)
    y = rng.normal(size=(16, 3)).astype(np.float32)
    ours.compile(nn.optimizers.SGD(0.01), "mse")
    theirs.compile(keras.optimizers.SGD(0.01), "mse")
    ev_ours, ev_theirs = ours.evaluate(x, y, verbose=0), theirs.evaluate(x, y, verbose=0)
    p = x @ lin.w.numpy() + lin.b.numpy()
    expected = np.mean((p - y) ** 2) + 0.05 * np.sum(p)  # by hand too
    np.testing.assert_allclose(ev_ours, expected, rtol=1e-5)
    np.testing.assert_allclose(ev_ours, ev_theirs, rtol=1e-5)
    h1 = ours.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    h2 = theirs.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(h1.history["loss"], h2.history["loss"], rtol=1e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the Variables show the trained values
    np.testing.assert_array_equal(lin.w.numpy(), ours.get_weights()[0])
    np.testing.assert_array_equal(lin.b.numpy(), ours.get_weights()[1])


def test_assign_after_fit_is_what_the_next_fit_starts_from(keras):
    ours, theirs, lin = _models(keras, rate=0.0)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(8, 5)).astype(np.float32)
    y = rng.normal(size=(8, 3)).astype(np.float32)
    ours.compile(nn.optimizers.SGD(0.1), "mse")
    theirs.compile(keras.optimizers.SGD(0.1), "mse")
    ours.fit(x, y, batch_size=8, epochs=1, verbose=0)
    theirs.fit(x, y, batch_size=8, epochs=1, verbose=0)
    new = np.full((5, 3), 0.25, np.float32)
    lin.w.assign(new)
    theirs.layers[1].w.assign(new)
    np.testing.assert_array_equal(ours.get_weights()[0], new)
    ours.fit(x, y, batch_size=8, epochs=1, verbose=0)
    theirs.fit(x, y, batch_size=8, epochs=1, verbose=0)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class MLPBlock(nn.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.linear_1 = Linear(32)
        self.linear_2 = Linear(32)
        self.linear_3 = Linear(1)

    def call(self, inputs):
        x = np.maximum(self.linear_1(inputs), 0.0)
        x = np.maximum(self.linear_2(x), 0.0)
        return self.linear_3(x)


class OuterLayer(nn.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.activity_reg = ActivityRegularizationLayer(1e-2)

    def call(self, inputs):
        return self.activity_reg(inputs)


def test_layers_kept_as_attributes_like_keras(keras):
    KLinear, KActReg = _keras_classes(keras)
    ops = keras.ops

    class KMLPBlock(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.linear_1 = KLinear(32)
            self.linear_2 = KLinear(32)
            self.linear_3 = KLinear(1)

        def call(self, inputs):
            x = ops.relu(self.linear_1(inputs))
            x = ops.relu(self.linear_2(x))
            return self.linear_3(x)

    class KOuter(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.activity_reg = KActReg(1e-2)

        def call(self, inputs):
            return self.activity_reg(inputs)

    x = np.random.default_rng(0).normal(size=(3, 64)).astype(np.float32)
    ours, theirs = MLPBlock(), KMLPBlock()
    ours(x)
    theirs(x)
    assert len(ours.weights) == len(theirs.weights) == 6
    assert len(ours.trainable_weights) == len(theirs.trainable_weights) == 6
    assert ours.weights[:2] == [ours.linear_1.w, ours.linear_1.b]
    theirs.set_weights([w.numpy() for w in ours.weights])
    np.testing.assert_allclose(ours(x), np.asarray(theirs(x)), rtol=1e-5, atol=1e-6)
    # an add_loss of a layer called by a layer: counted once, in the model's loss
    inp, kin = nn.Input((4,)), keras.Input((4,))
    lin, klin = Linear(2), KLinear(2)
    model = nn.Model(inp, lin(OuterLayer()(inp)))
    kmodel = keras.Model(kin, klin(KOuter()(kin)))
    assert len(model.losses) == 1
    w = [np.random.default_rng(1).normal(size=(4, 2)).astype(np.float32),
         np.zeros(2, np.float32)]
    model.set_weights(w)
    kmodel.set_weights(w)
    model.compile("sgd", "mse")
    kmodel.compile("sgd", "mse")
    xs = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    ys = np.zeros((8, 2), np.float32)
    np.testing.assert_allclose(model.evaluate(xs, ys, verbose=0),
                               kmodel.evaluate(xs, ys, verbose=0), rtol=1e-5)


class RegularizedLinear(Linear):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="ones",
                                 regularizer="l2", name="kernel")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=False,
                                 name="bias")


def test_add_weight_regularizer_and_trainable_like_keras(keras):
    KLinear, _ = _keras_classes(keras)

    class KRegularizedLinear(KLinear):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="ones",
                                     regularizer="l2", name="kernel")
            self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=False,
                                     name="bias")

    inp, kin = nn.Input((3,)), keras.Input((3,))
    layer, klayer = RegularizedLinear(2), KRegularizedLinear(2)
    model, kmodel = nn.Model(inp, layer(inp)), keras.Model(kin, klayer(kin))
    assert layer.w.path.endswith("/kernel") and layer.w.name == klayer.w.name == "kernel"
    assert layer.trainable_weights == [layer.w] and layer.non_trainable_weights == [layer.b]
    assert len(klayer.trainable_weights) == 1
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = rng.normal(size=(8, 2)).astype(np.float32)
    model.compile(nn.optimizers.SGD(0.05), "mse")
    kmodel.compile(keras.optimizers.SGD(0.05), "mse")
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), kmodel.evaluate(x, y, verbose=0),
                               rtol=1e-5)
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    kmodel.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), kmodel.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"\[RegularizedLinear.add_weight\] initializer"):
        RegularizedLinear(2).add_weight(shape=(2,), initializer="no_such_init")


def test_add_loss_refused_where_the_batch_is_split():
    inp = nn.Input((3,))
    model = nn.Model(inp, ActivityRegularizationLayer(0.1)(Linear(2)(inp)))
    model.compile("sgd", "mse")
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 2), np.float32)
    with pytest.raises(ValueError, match=r"\[fit\] a layer's add_loss is not supported yet with "
                                         r"data-parallel.*deterministic=True"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, deterministic=True)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # one process: supported


def test_builtin_loss_objects_inside_call_and_add_loss_only_models():
    # Keras: a built-in loss object called on a layer's tensors (the "endpoint layer"
    # pattern), compile without a loss (Keras's default loss=None) and fit(x) without y.
    # Oracle: the same loss objects called on arrays with the model's weights.
    import tessera.nn as keras

    cases = [keras.losses.BinaryCrossentropy(from_logits=True),
             keras.losses.BinaryCrossentropy(label_smoothing=0.2),
             keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
             keras.losses.CategoricalCrossentropy(),
             keras.losses.MeanSquaredError(), keras.losses.MeanAbsoluteError()]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 5)).astype(np.float32)
    t = rng.random((12, 3)).astype(np.float32)
    w = rng.random((12, 1)).astype(np.float32)
    for loss_fn in cases + [keras.losses.SparseCategoricalCrossentropy(from_logits=True)]:
        sparse = isinstance(loss_fn, keras.losses.SparseCategoricalCrossentropy)
        probs = not getattr(loss_fn, "from_logits", True)

        class Endpoint(keras.layers.Layer):
            def call(self, p, targets, sample_weight):
                self.add_loss(loss_fn(targets, p, sample_weight))
                return p

        inp = keras.Input((5,))
        tgt = keras.Input((1,) if sparse else (3,))
        swi = keras.Input((1,))
        p = keras.layers.Dense(3, activation="softmax" if probs else None, name="d")(inp)
        model = keras.Model([inp, tgt, swi], Endpoint()([p, tgt, swi][0], tgt, swi))
        model.compile("sgd")
        targets = rng.integers(0, 3, (12, 1)).astype(np.float32) if sparse else t
        got = model.evaluate([x, targets, w], verbose=0)
        k, b = model.get_layer("d").get_weights()
        z = x @ k + b
        if probs:
            z = np.exp(z - z.max(-1, keepdims=True))
            z = z / z.sum(-1, keepdims=True)
        want = loss_fn(targets, z, w[:, 0])
        assert got == pytest.approx(float(want), rel=1e-4), type(loss_fn).__name__
        model.fit([x, targets, w], epochs=1, batch_size=6, verbose=0)  # no y: add_loss only
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1)])
    model.compile("sgd")
    with pytest.raises(ValueError, match="no loss to compute"):
        model.fit(x, t[:, :1], verbose=0)
    # (every built-in loss object is taken on symbolic tensors: test_nn_symbolic_losses.py)


def test_subclassed_model_on_a_dict_and_first_argument_by_keyword():
    # Keras: fit(dict) hands the dict to a subclassed model's call; a layer's first
    # argument may be passed by its name in call (layer(logits=..., targets=...)).
    import tessera.nn as keras

    class Head(keras.layers.Layer):
        def call(self, logits, scale=None):
            return logits * scale

    class TwoInputs(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2, name="d")
            self.head = Head()

        def call(self, inputs):
            return self.head(logits=self.dense(inputs["a"]), scale=inputs["s"])

    rng = np.random.default_rng(2)
    data = {"a": rng.normal(size=(8, 3)).astype(np.float32),
            "s": rng.random((8, 1)).astype(np.float32)}
    model = TwoInputs()
    model.compile("sgd", "mse")
    model.fit(data, np.zeros((8, 2), np.float32), epochs=1, batch_size=4, verbose=0)
    k, b = model.dense.get_weights()
    np.testing.assert_allclose(model.predict(data, verbose=0), (data["a"] @ k + b) * data["s"],
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=r"called without its inputs \(the first argument of "
                                        r"call, 'logits'\); got only \['scale'\]"):
        Head()(scale=keras.Input((1,)))
