"""Keras features met by the keras-io scripts of issue 30's tenth pass (tests/keras_io:
mixture_of_experts, intro_to_keras_for_engineers, trainer_pattern, eeg_bci_ssvepformer),
against Keras 3 on JAX with the same weights and data."""

import numpy as np
import pytest

import tessera.data as tdata
import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)


def _close_weights(tm, km, tol=2e-4):
    tw, kw = tm.get_weights(), km.get_weights()
    assert len(tw) == len(kw)
    for a, b in zip(tw, kw):
        np.testing.assert_allclose(a, np.asarray(b), rtol=tol, atol=tol)


# ------------------------------------------- eeg_bci_ssvepformer: fit(PyDataset, batch_size=)
def _batches(lib, x, y, size):
    class Batches(lib.utils.PyDataset):
        def __len__(self):
            return -(-len(x) // size)

        def __getitem__(self, i):
            return x[i * size:(i + 1) * size], y[i * size:(i + 1) * size]

    return Batches()


def _dense_model(lib):
    inp = lib.Input((5,))
    h = lib.layers.Dense(4, activation="tanh")(inp)
    return lib.Model(inp, lib.layers.Dense(3, activation="softmax")(h))


def test_fit_ignores_batch_size_with_a_py_dataset_as_keras(keras):
    """The SSVEPFormer calls fit(PyDataset-like data, batch_size=BATCH_SIZE): Keras ignores
    batch_size (the batches are the data's own); tessera refused it. Same weights after an
    epoch of 3 batches of 8, and the same epoch loss."""
    x = RNG.normal(size=(24, 5)).astype("float32")
    y = RNG.integers(0, 3, 24)
    tm, km = _dense_model(tn), _dense_model(keras)
    _same_weights(tm, km)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    th = tm.fit(_batches(tn, x, y, 8), batch_size=128, epochs=1, shuffle=False, verbose=0)
    kh = km.fit(_batches(keras, x, y, 8), batch_size=128, epochs=1, shuffle=False, verbose=0)
    _close_weights(tm, km)
    np.testing.assert_allclose(th.history["loss"], kh.history["loss"], rtol=1e-4)


def test_fit_ignores_batch_size_with_a_batched_dataset():
    """A tessera.data.Dataset (tf.data's stand-in) with batch_size given trains as without."""
    x = RNG.normal(size=(24, 5)).astype("float32")
    y = RNG.integers(0, 3, 24)
    runs = []
    for bs in (None, 64):
        m = _dense_model(tn)
        m.set_weights([np.full(np.shape(w), 0.1, "float32") for w in m.get_weights()])
        m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        ds = tdata.Dataset.from_tensor_slices((x, y)).batch(8)
        m.fit(ds, batch_size=bs, epochs=1, verbose=0)
        runs.append(m.get_weights())
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


# --------------------------------------- seeds after set_random_seed: deep and nested models
def _deep_dropout_model(lib):
    """Over 32 layers (tessera's wider seed stride) with Dropout."""
    m = lib.Sequential([lib.Input((6,))])
    for _ in range(18):
        m.add(lib.layers.Dense(6, activation="relu"))
        m.add(lib.layers.Dropout(0.1))
    m.add(lib.layers.Dense(1))
    return m


@pytest.mark.parametrize("seed", [42, 1337])
def test_deep_model_with_dropout_trains_after_set_random_seed(keras, seed):
    """intro_to_keras_for_engineers and the SSVEPFormer, run after set_random_seed: the
    step's seed (the global stream's, up to 2**30) times the layer stride overflowed int64
    ('[multiply] integer overflow' in the step). Both frameworks train; tessera's loss is
    finite and repeats with the same seed."""
    x = RNG.normal(size=(32, 6)).astype("float32")
    y = RNG.normal(size=(32, 1)).astype("float32")
    losses = []
    for _ in range(2):
        tn.utils.set_random_seed(seed)
        m = _deep_dropout_model(tn)
        m.compile(optimizer="adam", loss="mse")
        losses.append(m.fit(x, y, batch_size=8, epochs=2, verbose=0).history["loss"])
    assert np.all(np.isfinite(losses[0])) and losses[0] == losses[1]
    keras.utils.set_random_seed(seed)
    km = _deep_dropout_model(keras)
    km.compile(optimizer="adam", loss="mse")
    kl = km.fit(x, y, batch_size=8, epochs=2, verbose=0).history["loss"]
    assert np.all(np.isfinite(kl))
    # same data, same model and loss: the losses are of one size (dropout masks differ)
    assert 0.1 < losses[0][-1] / kl[-1] < 10


def _nested(lib):
    class MyDropout(lib.layers.Layer):
        def __init__(self, rate):
            super().__init__()
            self.rate = rate
            self.seed_generator = lib.random.SeedGenerator(1337)

        def call(self, inputs):
            return lib.random.dropout(inputs, self.rate, seed=self.seed_generator)

    class Block(lib.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dense = lib.layers.Dense(8, activation="relu")
            self.drop = MyDropout(0.5)

        def call(self, x):
            return self.drop(self.dense(x))

    class Outer(lib.layers.Layer):
        def __init__(self):
            super().__init__()
            self.b1, self.b2 = Block(), Block()

        def call(self, x):
            return self.b2(self.b1(x))

    inp = lib.Input((4,))
    return lib.Model(inp, lib.layers.Dense(1)(Outer()(inp)))


def test_random_dropout_in_nested_user_layers_after_set_random_seed(keras):
    """keras.random.dropout with a SeedGenerator two user layers deep (the guide's
    MyDropout inside MyModel), after set_random_seed: it overflowed int64 in the step. It
    trains, its masks differ from step to step (a fit's epoch losses differ on the same
    batch with a zero learning rate), and it repeats with the same seed."""
    x = RNG.normal(size=(8, 4)).astype("float32")
    y = RNG.normal(size=(8, 1)).astype("float32")
    runs = []
    for _ in range(2):
        tn.utils.set_random_seed(42)
        m = _nested(tn)
        m.compile(optimizer=tn.optimizers.SGD(0.0), loss="mse")
        runs.append(m.fit(x, y, batch_size=8, epochs=3, verbose=0).history["loss"])
    assert runs[0] == runs[1] and np.all(np.isfinite(runs[0]))
    assert len(set(runs[0])) == 3
    keras.utils.set_random_seed(42)
    km = _nested(keras)
    km.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    kl = km.fit(x, y, batch_size=8, epochs=3, verbose=0).history["loss"]
    assert len(set(kl)) == 3  # Keras's masks differ from step to step too


# ------------------------------------------ trainer_pattern: a trainer wrapping another model
def _trainer(lib, tape):
    class MyTrainer(lib.Model):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.loss_fn = lib.losses.SparseCategoricalCrossentropy()
            self.accuracy_metric = lib.metrics.SparseCategoricalAccuracy()

        @property
        def metrics(self):
            return [self.accuracy_metric]

        def train_step(self, data):
            x, y = data
            with tape() as t:
                y_pred = self.model(x, training=True)
                loss = self.loss_fn(y, y_pred)
            grads = t.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            for metric in self.metrics:
                metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

        def call(self, x):
            return self.model(x)

    return MyTrainer


def _mnist_like(lib):
    return lib.Sequential([lib.Input((6, 6, 1)), lib.layers.Flatten(),
                           lib.layers.Dense(8, activation="relu"),
                           lib.layers.Dense(3, activation="softmax")])


def test_trainer_pattern_step_is_kerass_compiled_step(keras):
    """trainer_pattern's MyTrainer (a Model holding a model, its own loss and metric, a
    tape step): after 3 SGD steps from the same weights, the wrapped model's weights and
    the accuracy are those of Keras's compiled fit of the same model and loss (Keras's
    JAX backend cannot run the TensorFlow tape)."""
    x = RNG.uniform(size=(24, 6, 6, 1)).astype("float32")
    y = RNG.integers(0, 3, 24)
    inner_t, km = _mnist_like(tn), _mnist_like(keras)
    _same_weights(inner_t, km)
    trainer = _trainer(tn, tn.GradientTape)(inner_t)
    trainer.compile(optimizer=tn.optimizers.SGD(0.5))
    th = trainer.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    km.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy",
               metrics=["sparse_categorical_accuracy"])
    kh = km.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    _close_weights(inner_t, km)
    assert sorted(th.history) == ["sparse_categorical_accuracy"]
    np.testing.assert_allclose(th.history["sparse_categorical_accuracy"],
                               kh.history["sparse_categorical_accuracy"])


# ---------------------------------------- mixture_of_experts: Conv2DMoE / DenseMoE layers
def _moe(lib):
    ops = lib.ops

    class Conv2DMoE(lib.layers.Layer):
        def __init__(self, filters, n_experts, **kwargs):
            super().__init__(**kwargs)
            self.filters, self.n_experts = filters, n_experts

        def build(self, input_shape):
            c = input_shape[-1]
            self.expert_kernel = self.add_weight(shape=(3, 3, c, self.filters, self.n_experts),
                                                 initializer="glorot_uniform", name="ek")
            self.expert_bias = self.add_weight(shape=(self.filters, self.n_experts),
                                               initializer="zeros", name="eb")
            self.gating_kernel = self.add_weight(shape=(1, 1, c, self.n_experts),
                                                 initializer="glorot_uniform", name="gk")

        def call(self, inputs):
            k = ops.reshape(self.expert_kernel, (3, 3, ops.shape(inputs)[-1],
                                                 self.filters * self.n_experts))
            e = ops.conv(inputs, k, padding="same")
            s = ops.shape(e)
            e = ops.reshape(e, (s[0], s[1], s[2], self.filters, self.n_experts))
            e = lib.activations.get("relu")(e + self.expert_bias)
            g = lib.activations.get("softmax")(ops.conv(inputs, self.gating_kernel))
            return ops.sum(e * ops.expand_dims(g, axis=-2), axis=-1)

    class DenseMoE(lib.layers.Layer):
        def __init__(self, units, n_experts, **kwargs):
            super().__init__(**kwargs)
            self.units, self.n_experts = units, n_experts

        def build(self, input_shape):
            d = input_shape[-1]
            self.expert_kernel = self.add_weight(shape=(d, self.units, self.n_experts),
                                                 initializer="glorot_uniform", name="ek")
            self.gating_kernel = self.add_weight(shape=(d, self.n_experts),
                                                 initializer="glorot_uniform", name="gk")

        def call(self, x):
            e = ops.tensordot(x, self.expert_kernel, axes=1)
            g = lib.activations.get("softmax")(ops.tensordot(x, self.gating_kernel, axes=1))
            return ops.sum(e * ops.expand_dims(g, axis=1), axis=-1)

    inp = lib.Input((6, 6, 2))
    h = lib.layers.Flatten()(Conv2DMoE(3, 4)(inp))
    return lib.Model(inp, lib.layers.Dense(2, activation="softmax")(DenseMoE(5, 3)(h)))


def test_mixture_of_experts_layers_are_kerass(keras):
    """The MoE example's layers (all experts in one convolution by a reshaped 5-D kernel, a
    per-pixel softmax gate, tensordot experts): Keras's outputs, and its weights after two
    Adam steps, from the same weights."""
    x = RNG.normal(size=(8, 6, 6, 2)).astype("float32")
    y = RNG.integers(0, 2, 8)
    tm, km = _moe(tn), _moe(keras)
    _same_weights(tm, km)
    np.testing.assert_allclose(tm.predict(x, verbose=0), np.asarray(km.predict(x, verbose=0)),
                               rtol=1e-4, atol=1e-5)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
        m.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    _close_weights(tm, km)


# ------------------------------- eeg_bci_ssvepformer: channels_first, rfft, a layer in call
def _ssvep(lib):
    class ComplexSpectrum(lib.layers.Layer):
        def call(self, x):
            n = x.shape[-1]
            re, im = lib.ops.rfft(x, fft_length=32)
            return lib.ops.concatenate((re[:, :, 2:10] / n, im[:, :, 2:10] / n), axis=-1)

    class ChannelMLP(lib.layers.Layer):
        def __init__(self):
            super().__init__()
            self.mlp = lib.layers.Dense(16)
            self.cat = lib.layers.Concatenate(axis=1)

        def call(self, x):
            outs = []
            for i in range(x.shape[1]):
                outs.append(lib.layers.Reshape([1, -1])(self.mlp(x[:, :, i])))
            return self.cat(outs) + x

    return lib.Sequential([lib.Input((3, 24)), ComplexSpectrum(),
                           lib.layers.Conv1D(6, 1, padding="same"),
                           lib.layers.LayerNormalization(), ChannelMLP(),
                           lib.layers.Flatten(), lib.layers.Dense(2)])


def test_ssvepformer_layers_with_channels_first_are_kerass(keras):
    """The SSVEPFormer's pieces under image_data_format "channels_first": a spectrum by
    ops.rfft of the last axis, Conv1D over (batch, channels, steps), a Dense per column
    with a Reshape layer made inside call: Keras's shapes and outputs from the same
    weights, and its weights after an SGD step."""
    x = RNG.normal(size=(4, 3, 24)).astype("float32")
    y = RNG.normal(size=(4, 2)).astype("float32")
    before = (tn.config.image_data_format(), keras.config.image_data_format())
    tn.config.set_image_data_format("channels_first")
    keras.config.set_image_data_format("channels_first")
    try:
        tm, km = _ssvep(tn), _ssvep(keras)
        assert [tuple(w.shape) for w in tm.weights] == [tuple(w.shape) for w in km.weights]
        _same_weights(tm, km)
        np.testing.assert_allclose(tm.predict(x, verbose=0),
                                   np.asarray(km.predict(x, verbose=0)), rtol=1e-4, atol=1e-5)
        for m, lib in ((tm, tn), (km, keras)):
            m.compile(optimizer=lib.optimizers.SGD(0.05), loss="mse")
            m.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        _close_weights(tm, km)
    finally:
        tn.config.set_image_data_format(before[0])
        keras.config.set_image_data_format(before[1])


# ------------------- lstm_vs_cnn_timeseries_classification: EarlyStopping(restore_best_weights)
def test_early_stopping_restores_the_best_weights_at_the_end_of_fit_as_keras(keras):
    """EarlyStopping(patience=20, restore_best_weights=True) on a fit that runs all its
    epochs: Keras puts back the best epoch's weights when training ends; tessera restored
    them only when it stopped early, so the model kept the last epoch's (the example's
    best checkpoint and its model then differed). A learning rate that overshoots makes
    val_loss rise after its best; the weights after fit are Keras's."""
    x = RNG.normal(size=(40, 5)).astype("float32")
    y = (x @ RNG.normal(size=(5, 1))).astype("float32")
    tm = tn.Sequential([tn.Input((5,)), tn.layers.Dense(1)])
    km = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1)])
    _same_weights(tm, km)
    hs = []
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.9), loss="mse")
        stop = lib.callbacks.EarlyStopping(patience=20, restore_best_weights=True)
        hs.append(m.fit(x, y, batch_size=8, epochs=4, shuffle=False, validation_split=0.25,
                        callbacks=[stop], verbose=0).history["val_loss"])
    np.testing.assert_allclose(hs[0], hs[1], rtol=1e-4)
    assert int(np.argmin(hs[1])) < 3  # the best epoch is not the last
    _close_weights(tm, km)
    best = min(hs[0])
    np.testing.assert_allclose(tm.evaluate(x[30:], y[30:], verbose=0), best, rtol=1e-4)
