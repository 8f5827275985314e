"""Keras's training-mode call on arrays, `layer(x, training=True)`, against
Keras 3 on JAX (the oracle): random layers draw (tessera's streams, so the
values differ from JAX's, but their form and statistics are Keras's),
BatchNormalization uses the batch's statistics and moves its moving mean and
variance exactly as Keras's."""

import numpy as np
import pytest

import tessera.nn as nn


def _distinct(a, decimals=5):
    return sorted(set(np.round(np.asarray(a, dtype=np.float64).ravel(), decimals)))


@pytest.mark.parametrize("make", [
    lambda k: k.layers.Dropout(0.3),
    lambda k: k.layers.AlphaDropout(0.3),
])
def test_dropout_values_as_keras(keras, make):
    """On a constant input the training-mode output takes Keras's two values
    (dropped, kept and rescaled), in Keras's proportion."""
    x = np.full((200, 50), 1.5, dtype="float32")
    got, want = np.asarray(make(nn)(x, training=True)), np.asarray(make(keras)(x, training=True))
    assert got.shape == want.shape
    assert _distinct(got) == _distinct(want)
    dropped = _distinct(want)[0] if make(keras).__class__.__name__ == "AlphaDropout" else 0.0
    frac = np.mean(np.isclose(got, dropped, atol=1e-5))
    assert abs(frac - 0.3) < 0.03
    np.testing.assert_array_equal(make(nn)(x), x)  # inference: the identity, as Keras's


def test_draws_differ_per_call_and_repeat_after_set_random_seed():
    x = np.ones((16, 32), dtype="float32")
    d = nn.layers.Dropout(0.5)
    a, b = np.asarray(d(x, training=True)), np.asarray(d(x, training=True))
    assert not np.array_equal(a, b)
    nn.utils.set_random_seed(7)
    c = np.asarray(d(x, training=True))
    nn.utils.set_random_seed(7)
    np.testing.assert_array_equal(c, d(x, training=True))


@pytest.mark.parametrize("name,rank", [("SpatialDropout1D", 3), ("SpatialDropout2D", 4)])
def test_spatial_dropout_drops_whole_channels_as_keras(keras, name, rank):
    shape = (40, 6, 5, 8)[:rank - 1] + (8,) if rank == 4 else (40, 6, 8)
    x = np.ones(shape, dtype="float32")
    for k in (nn, keras):
        out = np.asarray(getattr(k.layers, name)(0.4)(x, training=True))
        assert _distinct(out) == [0.0, round(1 / 0.6, 5)]
        per_channel = out.reshape(len(out), -1, out.shape[-1])
        # each (sample, channel) is dropped or kept whole
        assert np.all(per_channel.min(axis=1) == per_channel.max(axis=1))


def test_gaussian_noise_and_dropout_statistics_as_keras(keras):
    x = np.ones((400, 100), dtype="float32")
    for k in (nn, keras):
        noise = np.asarray(k.layers.GaussianNoise(0.2)(x, training=True)) - 1.0
        assert abs(noise.mean()) < 0.01 and abs(noise.std() - 0.2) < 0.01
        mult = np.asarray(k.layers.GaussianDropout(0.2)(x, training=True))
        assert abs(mult.mean() - 1.0) < 0.01
        assert abs(mult.std() - np.sqrt(0.2 / 0.8)) < 0.01
        np.testing.assert_array_equal(k.layers.GaussianNoise(0.2)(x), x)


def test_batch_normalization_training_call_as_keras(keras):
    rng = np.random.default_rng(0)
    xs = [(rng.normal(size=(16, 5)) * 3 + 2).astype("float32") for _ in range(2)]
    results = {}
    for k in (nn, keras):
        bn = k.layers.BatchNormalization(momentum=0.9)
        outs = [np.asarray(bn(x, training=True)) for x in xs]
        outs.append(np.asarray(bn(xs[0])))  # inference: the moving statistics
        weights = [np.asarray(w) for w in bn.get_weights()]
        results[k.__name__] = (outs, weights)
    (got, got_w), (want, want_w) = results["tessera.nn"], results["keras"]
    for a, b in zip(got + got_w, want + want_w):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_frozen_batch_normalization_uses_moving_statistics(keras):
    """Keras: a BatchNormalization with trainable=False runs in inference
    mode even when called with training=True, and leaves its statistics."""
    x = np.random.default_rng(1).normal(size=(8, 3)).astype("float32")
    for k in (nn, keras):
        bn = k.layers.BatchNormalization()
        bn.build((None, 3))
        bn.trainable = False
        out = np.asarray(bn(x, training=True))
        np.testing.assert_allclose(out, x / np.sqrt(1 + 1e-3), rtol=1e-5)
        np.testing.assert_array_equal(np.asarray(bn.moving_mean), np.zeros(3))


def test_model_and_user_layer_called_in_training_mode(keras):
    """A Sequential called on arrays with training=True drops (and BN inside
    it uses batch statistics); a user's layer passes training on to the
    layers its call uses, as in Keras."""
    x = np.ones((64, 6), dtype="float32")

    class Block(nn.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.drop = nn.layers.Dropout(0.5)

        def call(self, inputs, training=None):
            return self.drop(inputs, training=training) * 2.0

    out = np.asarray(Block()(x, training=True))
    assert _distinct(out) == [0.0, 4.0]
    np.testing.assert_array_equal(Block()(x), 2 * x)
    m = nn.Sequential([nn.Input((6,)), nn.layers.Dense(4, kernel_initializer="ones"),
                       nn.layers.BatchNormalization(), nn.layers.Dropout(0.5)])
    out = np.asarray(m(x, training=True))
    # every row equal: batch statistics make it 0 before the dropout, as Keras's
    np.testing.assert_allclose(out, 0.0, atol=1e-5)
    assert not np.allclose(np.asarray(m.layers[1].moving_mean), 0.0)


def test_random_flip_training_call(keras):
    x = np.arange(64 * 2 * 3, dtype="float32").reshape(64, 2, 3, 1)
    for k in (nn, keras):
        out = np.asarray(k.layers.RandomFlip("horizontal")(x, training=True))
        flipped = np.array([np.array_equal(o, a[:, ::-1]) for o, a in zip(out, x)])
        same = np.array([np.array_equal(o, a) for o, a in zip(out, x)])
        assert np.all(flipped | same) and flipped.any() and same.any()
