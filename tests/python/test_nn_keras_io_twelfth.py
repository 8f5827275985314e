"""Keras features met by the keras-io scripts of issue 30's twelfth pass (tests/keras_io:
classification_with_grn_and_vsn, deep_neural_decision_forests, ...), against Keras 3 on JAX
with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)


# ------------------------------- classification_with_grn_and_vsn: `build(self)` with no shape
def _selection_model(lib):
    """A layer called on a dict of Inputs whose `build(self)` takes no shape (the VSN's), as
    Keras calls it: with no argument."""

    class Select(lib.layers.Layer):
        def __init__(self):
            super().__init__()
            self.proj = {"a": lib.layers.Dense(3), "b": lib.layers.Dense(3)}
            self.weights_of = lib.layers.Dense(2, activation="softmax")

        def call(self, inputs):
            parts = [self.proj[k](lib.ops.expand_dims(inputs[k], -1)) for k in inputs]
            v = lib.ops.expand_dims(self.weights_of(lib.layers.concatenate(parts)), -1)
            return lib.ops.sum(v * lib.ops.stack(parts, axis=1), axis=1)

        def build(self):
            self.built = True

    inputs = {k: lib.layers.Input(name=k, shape=(), dtype="float32") for k in ("a", "b")}
    return lib.Model(inputs, lib.layers.Dense(1)(Select()(inputs)))


def test_build_without_a_shape_argument(keras):
    tm, km = _selection_model(tn), _selection_model(keras)
    _same_weights(tm, km)
    x = {k: RNG.normal(size=(5,)).astype("float32") for k in ("a", "b")}
    np.testing.assert_allclose(tm.predict(x, verbose=0), np.asarray(km.predict(x, verbose=0)),
                               rtol=1e-5, atol=1e-6)


def test_build_without_a_shape_argument_on_arrays(keras):
    """The same layer called eagerly on arrays is built by its no-argument build."""
    for lib in (tn, keras):
        class Scale(lib.layers.Layer):
            def build(self):
                self.w = self.add_weight(shape=(), initializer="ones")

            def call(self, x):
                return x * self.w

        layer = Scale()
        out = np.asarray(layer(np.ones((2, 3), "float32")))
        assert layer.built and out.shape == (2, 3)
        np.testing.assert_allclose(out, 1.0)


# ------------------------- metric_learning: a train_step override fitted on x alone (no y)
def _self_supervised(lib, tape):
    """An autoencoder whose train_step reads x alone and scores it with the compiled loss
    (metric_learning's step reads its labels from inside the step, as this one does)."""

    class AutoEncoder(lib.Model):
        def train_step(self, data):
            if isinstance(data, tuple):
                data = data[0]
            with tape() as t:
                y_pred = self(data, training=True)
                loss = self.compiled_loss(data, y_pred)
            grads = t.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.compiled_metrics.update_state(data, y_pred)
            return {m.name: m.result() for m in self.metrics}

    inp = lib.Input((6,))
    out = lib.layers.Dense(6)(lib.layers.Dense(3, activation="tanh")(inp))
    return AutoEncoder(inp, out)


def _plain_autoencoder(lib):
    inp = lib.Input((6,))
    return lib.Model(inp, lib.layers.Dense(6)(lib.layers.Dense(3, activation="tanh")(inp)))


def test_train_step_override_fits_on_x_alone_as_keras(keras):
    """fit(x) of a model whose train_step computes its loss from x alone, compiled with a
    loss: Keras gives the step x (no labels needed); tessera asked for y ("the compiled loss
    or metrics read them"). After 3 SGD steps from the same weights the weights are those of
    Keras's compiled fit(x, x) of the same network (Keras's JAX backend cannot run the
    TensorFlow tape the example's step takes)."""
    x = RNG.normal(size=(24, 6)).astype("float32")
    tm, km = _self_supervised(tn, tn.GradientTape), _plain_autoencoder(keras)
    _same_weights(tm, km)
    tm.compile(optimizer=tn.optimizers.SGD(0.1), loss="mse")
    km.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    th = tm.fit(x, batch_size=8, epochs=1, shuffle=False, verbose=0)
    kh = km.fit(x, x, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-5)
    # Keras's TensorFlow shim updates the loss tracker (a Mean) with y_pred: "loss" logs the
    # predictions' mean, not the loss (so here the epoch's mean of the 3 batches' outputs)
    assert list(th.history) == ["loss"]
    assert not np.isclose(th.history["loss"][0], kh.history["loss"][0], rtol=0.05)


class _Pairs(tn.utils.Sequence):
    """metric_learning's batches: one (2, classes, h, w) array of anchors and positives."""

    def __len__(self):
        return 2

    def __getitem__(self, idx):
        return RNG.normal(size=(2, 3, 6)).astype("float32")


def test_train_step_on_data_not_shaped_as_the_inputs_runs():
    """metric_learning's step slices its batch into anchors and positives before calling the
    model: fit traces it on the batches' own shapes (a PyDataset's, or arrays'), as Keras
    runs it (test_nn_tapes20.py compares such a step with Keras's stateless JAX updates)."""

    class Embedding(tn.Model):
        def train_step(self, data):
            with tn.GradientTape() as tape:
                a, p = self(data[0], training=True), self(data[1], training=True)
                loss = self.compiled_loss(tn.ops.arange(3), tn.ops.einsum("ae,pe->ap", a, p))
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            return {"loss": loss}

    inp = tn.Input((6,))
    model = Embedding(inp, tn.layers.Dense(4)(inp))
    model.compile(optimizer="adam",
                  loss=tn.losses.SparseCategoricalCrossentropy(from_logits=True))
    w0 = model.get_weights()
    hist = model.fit(_Pairs(), epochs=1, verbose=0)
    assert np.isfinite(hist.history["loss"]).all()
    assert not np.allclose(model.get_weights()[0], w0[0])
    hist = model.fit(RNG.normal(size=(4, 3, 6)).astype("float32"), batch_size=2, epochs=1,
                     verbose=0)  # arrays: batches of 2 (anchors, positives) of 3 samples
    assert np.isfinite(hist.history["loss"]).all()
    assert model.predict(RNG.normal(size=(5, 6)).astype("float32"), verbose=0).shape == (5, 4)


# ------- structured_data_classification_from_scratch: a layer's output among a model's inputs
def _cut_model(lib):
    """A Normalization's output given to Model as an input (the example's numeric columns):
    Keras takes it as a new input and cuts the graph there."""
    norm = lib.layers.Normalization()
    norm.adapt(np.array([[1.0], [3.0], [5.0]], "float32"))
    a = lib.layers.Input(name="a", shape=(1,), dtype="float32")
    c = lib.layers.Input(name="c", shape=(2,), dtype="int64")
    inputs = {"a": norm(a), "c": c}
    out = lib.layers.Dense(1)(lib.layers.concatenate([inputs["a"], c]))
    return lib.Model(inputs, out)


def test_a_layer_output_given_as_input_cuts_the_graph_as_keras(keras):
    tm, km = _cut_model(tn), _cut_model(keras)
    assert [type(l).__name__ for l in tm.layers] == [type(l).__name__ for l in km.layers]
    assert len(tm.inputs) == len(km.inputs) == 2
    assert [tuple(t.shape) for t in tm.inputs] == [tuple(t.shape) for t in km.inputs]
    _same_weights(tm, km)
    x = {"a": np.array([[5.0], [-2.0]], "float32"), "c": np.array([[1, 0], [0, 1]])}
    got, want = tm.predict(x, verbose=0), np.asarray(km.predict(x, verbose=0))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the raw value goes in: the normalization (mean 3, variance 8/3) is not applied
    kernel, bias = tm.get_weights()
    np.testing.assert_allclose(got[0, 0], 5.0 * kernel[0, 0] + kernel[1, 0] + bias[0], rtol=1e-5)


@pytest.mark.parametrize("merge", ["concatenate", "add", "maximum"])
def test_merging_int64_and_float32_computes_in_float32_as_keras(keras, merge):
    """structured_data_classification_from_scratch concatenates int64 one-hot columns with
    float32 ones: Keras's merge gives float32; tessera's computed in float64 (NumPy's
    promotion) and predict returned float64."""

    def model(lib):
        a = lib.layers.Input(shape=(2,), dtype="float32")
        f = lib.layers.Input(shape=(2,), dtype="int64")
        return lib.Model([a, f], getattr(lib.layers, merge)([a, f]))

    x = [np.array([[0.5, -1.25], [3.0, 2.0]], "float32"), np.array([[1, 0], [0, 7]])]
    got = model(tn).predict(x, verbose=0)
    want = np.asarray(model(keras).predict(x, verbose=0))
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)
