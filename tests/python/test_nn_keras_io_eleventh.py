"""Keras features met by the keras-io scripts of issue 30's eleventh pass (tests/keras_io:
real_nvp, zero_dce, supervised_contrastive_learning, tabtransformer), against Keras 3 on
JAX with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)


# -------------------------------------- real_nvp: a call's training from its signature
def _flow(lib, default):
    """A model whose call runs one way in training and the other way otherwise (real_nvp's
    direction), with `training` defaulting to `default`."""

    class Flow(lib.Model):
        def __init__(self):
            super().__init__()
            self.shift = lib.layers.Dense(2)

        def _call(self, x, training):
            t = self.shift(x * np.array([1.0, 0.0], "float32")) * np.array([0.0, 1.0],
                                                                           "float32")
            return (x - t, -lib.ops.sum(t, axis=1)) if training else (x + t, lib.ops.sum(t, axis=1))

    if default:
        Flow.call = lambda self, x, training=True: Flow._call(self, x, training)
    else:
        Flow.call = lambda self, x, training=None: Flow._call(self, x, training)
    return Flow()


@pytest.mark.parametrize("default", [True, None])
def test_eager_call_takes_the_signature_default(keras, default):
    """real_nvp's `model(data)` runs `call(x, training=True)` in training mode (data to
    latent) and predict in inference mode (latent to data); tessera's eager call of a
    subclassed model ran in inference mode whatever the signature said."""
    x = RNG.normal(size=(6, 2)).astype("float32")
    tm, km = _flow(tn, default), _flow(keras, default)
    tm(x), km(x)  # built
    _same_weights(tm, km)
    for got, want in ((tm(x), km(x)), (tm.predict(x, verbose=0), km.predict(x, verbose=0)),
                      (tm(x, training=False), km(x, training=False))):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(tm(x)[0]), tm.predict(x, verbose=0)[0]) or not default


def _nll_model(lib, default):
    class NLL(type(_flow(lib, default))):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            z, logdet = self(x)
            return -lib.ops.mean(-0.5 * lib.ops.sum(lib.ops.square(z), axis=1) + logdet)

    return NLL()


@pytest.mark.parametrize("default", [True, None])
def test_compute_loss_self_call_and_two_outputs_as_keras(keras, default):
    """real_nvp's compute_loss calls self(x) (no training given: Keras's step has no outer
    call, so the signature's default decides, in fit and in validation alike) on a model
    compiled before its first fit built it with two outputs (tessera's fit stopped at
    "missing argument 'seed'": compile's settings were made for one output). The same
    losses, validation losses and weights as Keras after 2 epochs."""
    x = RNG.normal(size=(32, 2)).astype("float32")
    tm, km = _nll_model(tn, default), _nll_model(keras, default)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.05))
    tm(x), km(x)
    _same_weights(tm, km)
    th = tm.fit(x, batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(x[:8],))
    kh = km.fit(x, batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(x[:8],))
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(th.history[key], kh.history[key], rtol=1e-4, atol=1e-6)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-4)


def test_compute_loss_self_call_runs_dropout_as_its_signature_says(keras):
    """`self(x)` in compute_loss with `call(x, training=None)`: Keras runs it in inference
    mode in fit's step (Dropout off); tessera ran the step's training mode (Dropout on)."""

    def model(lib):
        class M(lib.Model):
            def __init__(self):
                super().__init__()
                self.d = lib.layers.Dense(2, kernel_initializer="ones")
                self.drop = lib.layers.Dropout(0.9)

            def call(self, x, training=None):
                return self.drop(self.d(x), training=training)

            def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                             training=True):
                return lib.ops.mean(lib.ops.square(self(x)))

        m = M()
        m.compile(optimizer=lib.optimizers.SGD(0.0))
        return m

    x = np.ones((64, 2), "float32")
    got = model(tn).fit(x, batch_size=64, epochs=1, verbose=0).history["loss"]
    want = model(keras).fit(x, batch_size=64, epochs=1, verbose=0).history["loss"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------ zero_dce: validation_data=(x,), save_weights
def test_validation_data_of_inputs_only_and_its_error():
    """fit(validation_data=(x,)) (Keras's unpack_x_y_sample_weight) for a model whose loss
    reads no labels; 4 values are refused, naming what was given."""
    class Square(tn.Model):
        def __init__(self):
            super().__init__()
            self.d = tn.layers.Dense(1)

        def call(self, x):
            return self.d(x)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            return tn.ops.mean(tn.ops.square(y_pred))

    m = Square()
    m.compile(optimizer=tn.optimizers.SGD(0.0))
    x = RNG.normal(size=(16, 3)).astype("float32")
    h = m.fit(x, epochs=1, verbose=0, validation_data=(x[:8],))
    want = np.mean(np.square(m.predict(x[:8], verbose=0)))
    np.testing.assert_allclose(h.history["val_loss"][0], want, rtol=1e-5)
    with pytest.raises(ValueError, match=r"\[fit\] validation_data must be .* tuple of 4"):
        m.fit(x, epochs=1, verbose=0, validation_data=(x, x, x, x))


def test_save_weights_takes_keras_arguments(tmp_path):
    """zero_dce's save_weights override passes overwrite= on (Keras's signature); an
    existing file with overwrite=False and load_weights(skip_mismatch=True) are refused."""
    inp = tn.Input((3,))
    m = tn.Model(inp, tn.layers.Dense(2)(inp))
    path = str(tmp_path / "m.weights.h5")
    m.save_weights(path, overwrite=True)
    m.save_weights(path)
    with pytest.raises(FileExistsError, match=r"\[save_weights\] .* overwrite=False"):
        m.save_weights(path, overwrite=False)
    with pytest.raises(ValueError, match=r"\[save_weights\] max_shard_size"):
        m.save_weights(path, max_shard_size=10)
    with pytest.raises(ValueError, match=r"\[load_weights\] skip_mismatch=True"):
        m.load_weights(path, skip_mismatch=True)
    other = tn.Model(inp, tn.layers.Dense(2)(inp))
    other.load_weights(path, skip_mismatch=False)
    for a, b in zip(m.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)


# ------------------------- supervised_contrastive_learning: a Loss overriding __call__
def _contrastive(lib):
    class SupCon(lib.losses.Loss):
        def __init__(self, temperature=1.0, name=None):
            super().__init__(name=name)
            self.temperature = temperature

        def __call__(self, labels, features, sample_weight=None):
            f = lib.ops.normalize(features, axis=1, order=2)
            logits = lib.ops.matmul(f, lib.ops.transpose(f)) / self.temperature
            labels = lib.ops.reshape(labels, (-1, 1))
            same = lib.ops.cast(lib.ops.equal(labels, lib.ops.transpose(labels)), "float32")
            same = same / lib.ops.sum(same, axis=1, keepdims=True)
            return lib.ops.mean(-lib.ops.sum(same * lib.ops.log_softmax(logits, axis=1), axis=1))

    return SupCon(0.5)


def test_loss_overriding_dunder_call_as_keras(keras):
    """compile(loss=a Loss subclass overriding __call__): Keras's step calls it with the
    labels and the outputs and takes the scalar it returns; tessera stopped at "per-sample
    losses are not available". Same losses and weights after an epoch of 3 batches."""
    x = RNG.normal(size=(24, 4)).astype("float32")
    y = RNG.integers(0, 3, (24, 1))
    models = []
    for lib in (tn, keras):
        inp = lib.Input((4,))
        m = lib.Model(inp, lib.layers.Dense(3, activation="relu")(inp))
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss=_contrastive(lib))
        models.append(m)
    tm, km = models
    _same_weights(tm, km)
    th = tm.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    kh = km.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(th.history["loss"], kh.history["loss"], rtol=1e-4)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-4)
    with pytest.raises(NotImplementedError, match=r"\[SupCon\] the loss overrides __call__"):
        tm.fit(x, y, sample_weight=np.ones(24), batch_size=8, epochs=1, verbose=0)


# ------------------------------------------ edsr: depth_to_space on unknown height/width
def test_depth_to_space_on_unknown_spatial_axes_as_keras(keras):
    """edsr upsamples with ops.depth_to_space on `Input((None, None, 3))`'s feature maps:
    tessera refused the reshape (its height and width were None). A model of it on two
    image sizes gives Keras's values."""
    models = []
    for lib in (tn, keras):
        inp = lib.Input((None, None, 8))
        models.append(lib.Model(inp, lib.ops.depth_to_space(inp, block_size=2)))
    for size in ((3, 5), (4, 4)):
        x = RNG.normal(size=(2,) + size + (8,)).astype("float32")
        got = models[0].predict(x, verbose=0)
        assert got.shape == (2, 2 * size[0], 2 * size[1], 2)
        np.testing.assert_array_equal(got, np.asarray(models[1].predict(x, verbose=0)))


# ------------------------- tabtransformer: (x, y, sample_weight) batches of (n,) labels
def test_weighted_py_dataset_labels_one_axis_short_as_keras(keras):
    """tabtransformer's batches are (features, target (n,), weights) for a (n, 1) sigmoid:
    tessera's weighted step broadcast the (n,) labels against the (n, 1) output to (n, n)
    (a loss of 1.04 where Keras's is 0.52), silently; the unweighted step and arrays (brought
    to rank by fit) were right. Same epoch loss and weights as Keras, then evaluate on
    arrays after the batches (the steps written for the batches' labels are not reused)."""
    x = RNG.normal(size=(32, 3)).astype("float32")
    y = (x[:, 0] > 0).astype("float32")
    w = np.linspace(0, 2, 32).astype("float32")
    models = []
    for lib in (tn, keras):
        class Batches(lib.utils.PyDataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                s = slice(16 * i, 16 * i + 16)
                return {"a": x[s]}, y[s], w[s]

        inp = {"a": lib.Input(name="a", shape=(3,), dtype="float32")}
        m = lib.Model(inp, lib.layers.Dense(1, activation="sigmoid")(inp["a"]))
        m.compile(optimizer=lib.optimizers.SGD(0.5), loss=lib.losses.BinaryCrossentropy(),
                  metrics=[lib.metrics.BinaryAccuracy(name="accuracy")])
        models.append((m, Batches()))
    (tm, tb), (km, kb) = models
    _same_weights(tm, km)
    th = tm.fit(tb, epochs=2, shuffle=False, verbose=0).history
    kh = km.fit(kb, epochs=2, shuffle=False, verbose=0).history
    for key in ("loss", "accuracy"):
        np.testing.assert_allclose(th[key], kh[key], rtol=1e-5)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tm.evaluate({"a": x}, y, sample_weight=w, verbose=0),
                               km.evaluate({"a": x}, y, sample_weight=w, verbose=0), rtol=1e-5)
