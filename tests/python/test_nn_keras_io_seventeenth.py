"""Keras features met by the keras-io scripts of issue 30's seventeenth pass (tests/keras_io:
movielens_recommendations_transformers, custom_train_step_in_tensorflow, creating_tfrecords),
against Keras 3 on JAX with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(17)


def _regression(lib, cls=None):
    inputs = lib.Input(shape=(6,))
    outputs = lib.layers.Dense(1)(inputs)
    return (cls or lib.Model)(inputs, outputs)


# --------------------------- custom_train_step_in_tensorflow: fit(sample_weight) of (n, 1)
@pytest.mark.parametrize("shape", [(24, 1), (24,)])
def test_fit_takes_one_weight_per_sample_as_a_column(keras, shape):
    """The guide passes sample_weight of shape (1000, 1); Keras squeezes it to the per-sample
    loss's rank: the same losses, metrics and weights after an epoch as Keras's."""
    x = RNG.normal(size=(24, 6)).astype("float32")
    y = RNG.normal(size=(24, 1)).astype("float32")
    sw = RNG.random(shape).astype("float32")
    tm, km = _regression(tn), _regression(keras)
    _same_weights(tm, km)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    th = tm.fit(x, y, sample_weight=sw, batch_size=8, shuffle=False, verbose=0).history
    kh = km.fit(x, y, sample_weight=sw, batch_size=8, shuffle=False, verbose=0).history
    for k in ("loss", "mae"):
        np.testing.assert_allclose(th[k], kh[k], rtol=1e-5, err_msg=k)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    te = tm.evaluate(x, y, sample_weight=sw, batch_size=8, verbose=0)
    ke = km.evaluate(x, y, sample_weight=sw, batch_size=8, verbose=0)
    np.testing.assert_allclose(te, ke, rtol=1e-5)


def test_a_column_of_the_wrong_length_is_refused():
    m = _regression(tn)
    m.compile(optimizer="sgd", loss="mse")
    x = RNG.normal(size=(8, 6)).astype("float32")
    with pytest.raises(ValueError, match=r"\[fit\] sample_weight must have one weight per "):
        m.fit(x, x[:, :1], sample_weight=np.ones((7, 1)), verbose=0)


def _guide_step_model(lib):
    """The guide's first train_step (compute_loss, optimizer.apply, the compiled metrics), with
    the sample_weight of its third section."""

    class CustomModel(lib.Model):
        def train_step(self, data):
            if len(data) == 3:
                x, y, sample_weight = data
            else:
                sample_weight = None
                x, y = data
            with tn.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sample_weight)
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            self.optimizer.apply(gradients, trainable_vars)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred, sample_weight=sample_weight)
            return {m.name: m.result() for m in self.metrics}

    return _regression(lib, CustomModel)


@pytest.mark.parametrize("weighted", [False, True])
def test_the_guides_train_step_trains_as_kerass_own_step(keras, weighted):
    """Keras on JAX runs no TensorFlow GradientTape step: its built-in train_step (what the
    guide's override re-writes) is the oracle; the same weights and MAE after an epoch."""
    x = RNG.normal(size=(32, 6)).astype("float32")
    y = (x @ RNG.normal(size=(6, 1))).astype("float32")
    sw = RNG.random((32, 1)).astype("float32") if weighted else None
    tm, km = _guide_step_model(tn), _regression(keras)
    _same_weights(tm, km)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.Adam(0.01), loss="mse", metrics=["mae"],
                  weighted_metrics=["mae"])
    th = tm.fit(x, y, sample_weight=sw, batch_size=8, epochs=2, shuffle=False,
                verbose=0).history
    kh = km.fit(x, y, sample_weight=sw, batch_size=8, epochs=2, shuffle=False,
                verbose=0).history
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # The guide updates compile's metrics with the sample weights: as Keras's CompileMetrics,
    # they weigh the weighted_metrics alone ("mae" unweighted, "weighted_mae" weighted).
    assert sorted(th) == sorted(kh) == ["loss", "mae", "weighted_mae"]
    np.testing.assert_allclose(th["mae"], kh["mae"], rtol=1e-4)
    np.testing.assert_allclose(th["weighted_mae"], kh["weighted_mae"], rtol=1e-4)
    # The guide's loss tracker averages the batches' losses (equal batches: Keras's loss).
    np.testing.assert_allclose(th["loss"], kh["loss"], rtol=1e-4)


def test_compile_metrics_update_state_weighs_the_weighted_metrics_alone(keras):
    """model.metrics[1].update_state(y, y_pred, sample_weight) called eagerly after fit."""
    x = RNG.normal(size=(16, 6)).astype("float32")
    y = RNG.normal(size=(16, 1)).astype("float32")
    sw = RNG.random((16, 1)).astype("float32")
    results = []
    for lib in (tn, keras):
        m = _regression(lib)
        m.compile(optimizer="sgd", loss="mse", metrics=["mae"], weighted_metrics=["mse"])
        m.fit(x, y, sample_weight=sw, verbose=0)
        p = np.asarray(m.predict(x, verbose=0))
        cm = m.metrics[1]
        cm.reset_state()
        cm.update_state(y, p, sample_weight=sw)
        e = np.abs(p - y)[:, 0]
        results.append({k: float(v) for k, v in cm.result().items()})
        np.testing.assert_allclose(results[-1]["mae"], e.mean(), rtol=1e-5)
        np.testing.assert_allclose(results[-1]["mse"], (sw[:, 0] * e * e).sum() / sw.sum(),
                                   rtol=1e-5)
    assert sorted(results[0]) == sorted(results[1])


# ------------------- movielens_recommendations_transformers: the BST's encoding of movies
POSITIONS = (np.arange(16).reshape(4, 4) / 10.0 - 0.7).astype("float32")
GENRES = (np.arange(50).reshape(10, 5) % 3).astype("float32")


def _bst_encoding(lib):
    ids = lib.Input(shape=(3,), dtype="int32")
    ratings = lib.Input(shape=(3,), dtype="float32")
    movies = lib.layers.Embedding(10, 4, name="movie_embedding")(ids)
    genres = lib.layers.Embedding(10, 5, embeddings_initializer=lib.initializers.Constant(GENRES),
                                  trainable=False, name="genres_vector")(ids)
    movies = lib.layers.Dense(4, activation="relu")(lib.layers.concatenate([movies, genres]))
    positions = lib.layers.Embedding(
        4, 4, embeddings_initializer=lib.initializers.Constant(POSITIONS),
        name="position_embedding")(lib.ops.arange(start=0, stop=3, step=1))
    rated = lib.layers.Multiply()([movies + positions, lib.ops.expand_dims(ratings, -1)])
    out = lib.layers.Dense(1)(lib.layers.Flatten()(rated))
    return lib.Model([ids, ratings], out)


def test_an_embedding_called_on_a_constant_range_is_a_constant_of_the_graph(keras):
    """The example's position embedding is called on `tf.range` while the graph is built: its
    output is a constant (Keras: an eager tensor), so its weights are not the model's and do not
    train; the frozen Constant-initialized genre table is a non-trainable weight. Multiply and
    Adagrad: the same predictions and weights after an epoch as Keras's."""
    tm, km = _bst_encoding(tn), _bst_encoding(keras)
    assert len(tm.weights) == len(km.weights) == 6
    assert len(tm.trainable_weights) == len(km.trainable_weights) == 5
    assert [tuple(w.shape) for w in tm.weights] == [tuple(w.shape) for w in km.weights]
    assert not any("position" in w.path for w in tm.weights)
    _same_weights(tm, km)
    ids = RNG.integers(0, 10, (16, 3)).astype("int32")
    r = RNG.integers(1, 6, (16, 3)).astype("float32")
    np.testing.assert_allclose(np.asarray(tm([ids, r])), np.asarray(km([ids, r])),
                               rtol=1e-5, atol=1e-5)
    y = RNG.normal(size=(16, 1)).astype("float32")
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.Adagrad(0.05), loss="mse")
    th = tm.fit([ids, r], y, batch_size=8, shuffle=False, verbose=0).history["loss"]
    kh = km.fit([ids, r], y, batch_size=8, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(th, kh, rtol=1e-5)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# --------------------- creating_tfrecords (EfficientNet's MBConv): Dropout(noise_shape=)
def test_dropout_noise_shape_drops_whole_samples(keras):
    """EfficientNet drops a block's residual branch per sample: Dropout(0.5, noise_shape=(None,
    1, 1, 1)). In training each sample is kept whole (scaled by 1 / (1 - rate)) or zeroed, as
    Keras's; in inference it is the identity; the config is Keras's."""
    x = (RNG.random((64, 3, 4, 2)) + 0.5).astype("float32")
    for lib in (tn, keras):
        layer = lib.layers.Dropout(0.5, noise_shape=(None, 1, 1, 1), seed=3)
        out = np.asarray(layer(x, training=True))
        ratio = out / x
        per_sample = ratio.reshape(64, -1)
        np.testing.assert_allclose(per_sample, per_sample[:, :1] * np.ones((1, 24)), rtol=1e-6)
        assert set(np.round(per_sample[:, 0], 5)) == {0.0, 2.0}, lib.__name__
        np.testing.assert_array_equal(np.asarray(layer(x, training=False)), x)
    tc = tn.layers.Dropout(0.5, noise_shape=(None, 1, 1, 1)).get_config()
    kc = keras.layers.Dropout(0.5, noise_shape=(None, 1, 1, 1)).get_config()
    assert tuple(tc["noise_shape"]) == tuple(kc["noise_shape"]) == (None, 1, 1, 1)


def test_dropout_noise_shape_per_channel_in_a_model_trains_as_keras(keras):
    """A shared draw over the spatial axes (noise_shape (None, 1, 1, C)) inside a model: the
    same inference outputs as Keras's with the same weights; fit runs and only masks."""

    def make(lib):
        i = lib.Input((4, 4, 3))
        h = lib.layers.Conv2D(4, 3, padding="same")(i)
        h = lib.layers.Dropout(0.3, noise_shape=(None, 1, 1, 4))(h)
        return lib.Model(i, lib.layers.Dense(1)(lib.layers.Flatten()(h)))

    tm, km = make(tn), make(keras)
    _same_weights(tm, km)
    x = RNG.normal(size=(8, 4, 4, 3)).astype("float32")
    np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0), rtol=1e-5,
                               atol=1e-5)
    tm.compile(optimizer="sgd", loss="mse")
    h = tm.fit(x, np.zeros((8, 1), "float32"), epochs=2, verbose=0).history["loss"]
    assert all(np.isfinite(h))


@pytest.mark.parametrize("bad", [(None, 2, 1, 1), (None, 1, 1), [0, 1, 1, 1], "none"])
def test_dropout_noise_shape_that_does_not_fit_is_refused(bad):
    with pytest.raises(ValueError, match=r"\[Dropout\] noise_shape"):
        i = tn.Input((4, 4, 3))
        tn.Model(i, tn.layers.Dropout(0.5, noise_shape=bad)(i))
