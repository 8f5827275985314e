"""Keras features met by the keras-io scripts of issue 30's thirteenth pass (tests/keras_io:
learnable_resizer, patch_convnet, ...), against Keras 3 on JAX with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)


# ----------------------------- learnable_resizer: Resizing/CenterCrop on Input((None, None, c))
def _resizer(lib, layer):
    inputs = lib.layers.Input(shape=[None, None, 3])
    x = lib.layers.Conv2D(4, 3, padding="same")(inputs)
    x = layer(x)
    return lib.Model(inputs, lib.layers.Conv2D(2, 1)(x))


@pytest.mark.parametrize("kind", ["Resizing", "Resizing_nearest", "CenterCrop"])
def test_resizing_on_unknown_sizes(keras, kind):
    def make(lib):
        if kind == "CenterCrop":
            return lib.layers.CenterCrop(6, 5)
        interp = "nearest" if kind.endswith("nearest") else "bilinear"
        return lib.layers.Resizing(6, 5, interpolation=interp)

    tm, km = _resizer(tn, make(tn)), _resizer(keras, make(keras))
    assert tuple(tm.output.shape) == tuple(km.output.shape) == (None, 6, 5, 2)
    _same_weights(tm, km)
    for shape in ((2, 9, 7, 3), (1, 13, 10, 3), (3, 4, 4, 3)):  # (a smaller one: CenterCrop
        x = RNG.normal(size=shape).astype("float32")              # resizes it)
        want = np.asarray(km(x))
        np.testing.assert_allclose(np.asarray(tm(x)), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(tm.predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)


def test_resizing_on_unknown_sizes_trains(keras):
    """A fit through the resizer on images of one size, then another, as Keras's."""
    y = RNG.normal(size=(8, 6, 5, 2)).astype("float32")
    xs = [RNG.normal(size=(8, h, w, 3)).astype("float32") for h, w in ((12, 10), (7, 9))]
    models = []
    for lib in (tn, keras):
        m = _resizer(lib, lib.layers.Resizing(6, 5))
        models.append(m)
    tm, km = models
    _same_weights(tm, km)
    for m in models:
        m.compile(optimizer="sgd", loss="mse")
        for x in xs:
            m.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-5)


def test_resizing_unknown_channels_still_refused():
    with pytest.raises(ValueError, match=r"\[Resizing\] in a model expects images of known"):
        tn.layers.Resizing(4, 4)(tn.layers.Input(shape=(None, None, None)))


# ---------------- patch_convnet: compute_loss/compute_metrics on the first of several outputs
def _two_output_model(lib, metrics_override=True):
    """(logits, attention-like) outputs; the overrides read the logits alone, as
    patch_convnet's `super().compute_loss(x, y, logits)`."""

    class Net(lib.Model):
        def __init__(self):
            super().__init__()
            self.hidden = lib.layers.Dense(6, activation="tanh")
            self.logits = lib.layers.Dense(3)
            self.scores = lib.layers.Dense(2, activation="softmax")

        def call(self, x, training=False):
            h = self.hidden(x)
            return self.logits(h), self.scores(h)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            logits, _ = y_pred
            return super().compute_loss(x, y, logits, sample_weight, training=training)

    if metrics_override:
        def compute_metrics(self, x, y, y_pred, sample_weight=None):
            return lib.Model.compute_metrics(self, x, y, y_pred[0], sample_weight)
        Net.compute_metrics = compute_metrics
    m = Net()
    m(np.zeros((1, 4), "float32"))  # built by a call, as the example's first batch builds it
    return m


def _batches(lib, x, y, size):
    class Batches(lib.utils.PyDataset):
        def __len__(self):
            return len(x) // size

        def __getitem__(self, i):
            return x[i * size:(i + 1) * size], y[i * size:(i + 1) * size]
    return Batches()


@pytest.mark.parametrize("data", ["arrays", "pydataset"])
def test_compute_loss_on_the_first_output(keras, data):
    x = RNG.normal(size=(32, 4)).astype("float32")
    y = (np.arange(32) % 3).reshape(32, 1).astype("uint8")
    tm, km = _two_output_model(tn), _two_output_model(keras)
    _same_weights(tm, km)
    logs = []
    for lib, m in ((tn, tm), (keras, km)):
        m.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[lib.metrics.SparseCategoricalAccuracy(name="accuracy")])
        if data == "arrays":
            h = m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
            ev = m.evaluate(x, y, batch_size=8, verbose=0)
        else:
            h = m.fit(_batches(lib, x, y, 8), epochs=2, verbose=0, shuffle=False)
            ev = m.evaluate(_batches(lib, x, y, 8), verbose=0)
        logs.append((h.history, ev))
    (th, tev), (kh, kev) = logs
    assert sorted(th) == sorted(kh) == ["accuracy", "loss"]
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=1e-4, atol=1e-5)
    assert len(tev) == len(kev) == 2
    np.testing.assert_allclose(tev, kev, rtol=1e-4, atol=1e-5)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-5)


def test_compute_loss_on_the_first_output_without_metrics_override(keras):
    """Without metrics (none compiled), the compute_loss override alone trains as Keras's."""
    x = RNG.normal(size=(16, 4)).astype("float32")
    y = np.arange(16) % 3
    tm, km = _two_output_model(tn, False), _two_output_model(keras, False)
    _same_weights(tm, km)
    for lib, m in ((tn, tm), (keras, km)):
        m.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-5)


def test_fewer_labels_without_an_override_still_refused():
    inputs = tn.layers.Input((4,))
    m = tn.Model(inputs, [tn.layers.Dense(3)(inputs), tn.layers.Dense(2)(inputs)])
    m.compile(optimizer="sgd", loss=["mse", "mse"])
    with pytest.raises(ValueError, match=r"\[fit\] the model has 2 outputs, got 1 label arrays"):
        m.fit(np.zeros((4, 4), "float32"), [np.zeros((4, 3), "float32")], verbose=0)


# -------- ddim: fit(x) with a compute_loss override reading no labels; attribute metrics
def _denoiser(lib):
    """call returns (prediction, target) made from x alone; compute_loss asserts it gets
    y=None; a Mean made in an overridden compile is logged through compute_metrics."""

    class Denoiser(lib.Model):
        def __init__(self):
            super().__init__()
            self.net = lib.layers.Dense(4)

        def compile(self, **kwargs):
            super().compile(**kwargs)
            self.image_loss_tracker = lib.metrics.Mean(name="i_loss")

        def call(self, x, training=False):
            return self.net(x * 0.5), x

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            assert y is None
            pred, target = y_pred
            return lib.ops.mean(self.loss(target, pred))

        def compute_metrics(self, x, y, y_pred, sample_weight=None):
            pred, target = y_pred
            self.image_loss_tracker.update_state(lib.ops.mean(lib.ops.abs(pred)))
            return {m.name: m.result() for m in self.metrics}

    m = Denoiser()  # compiled before it is built, as ddim's (Keras locks a built model's state)
    m.compile(optimizer=lib.optimizers.SGD(0.1), loss=lib.losses.mean_absolute_error)
    m(np.zeros((1, 4), "float32"))
    return m


def test_fit_without_labels_and_attribute_metrics(keras):
    x = RNG.normal(size=(24, 4)).astype("float32")
    v = RNG.normal(size=(8, 4)).astype("float32")
    tm, km = _denoiser(tn), _denoiser(keras)
    _same_weights(tm, km)
    hist = []
    for lib, m in ((tn, tm), (keras, km)):
        assert [t.name for t in m.metrics] == ["loss", "i_loss"]
        hist.append(m.fit(x, epochs=2, batch_size=8, verbose=0, shuffle=False,
                          validation_data=(v,)).history)
    th, kh = hist
    assert sorted(th) == sorted(kh) == ["i_loss", "loss", "val_i_loss", "val_loss"]
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=1e-4, atol=1e-5)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-5)


def test_fit_without_labels_still_refused_when_the_compiled_loss_reads_them():
    inputs = tn.layers.Input((4,))
    m = tn.Model(inputs, tn.layers.Dense(2)(inputs))
    m.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match=r"\[fit\] y \(the labels\) is required"):
        m.fit(np.zeros((4, 4), "float32"), verbose=0)
