"""dropout and recurrent_dropout of the recurrent layers as Keras's
(DropoutRNNCell): masks drawn once per batch and used at every step, one per
gate with recurrent_dropout (Keras's implementation 1); inference against
Keras 3 on JAX with the same weights, the masks' structure by construction."""

import numpy as np
import pytest

import tessera.nn as tn

KINDS = [("LSTM", {}), ("GRU", {}), ("GRU", {"reset_after": False}), ("SimpleRNN", {})]


def _models(keras, kind, kwargs, **rates):
    x_k, x_t = keras.Input((6, 3)), tn.Input((6, 3))
    ours = tn.Model(x_t, getattr(tn.layers, kind)(5, return_sequences=True, **rates, **kwargs)(x_t))
    theirs = keras.Model(x_k, getattr(keras.layers, kind)(5, return_sequences=True, **rates,
                                                           **kwargs)(x_k))
    ours.set_weights(theirs.get_weights())
    return ours, theirs


@pytest.mark.parametrize("kind,kwargs", KINDS)
def test_inference_ignores_the_masks_as_keras(keras, kind, kwargs):
    x = np.random.default_rng(0).random((4, 6, 3)).astype(np.float32)
    ours, theirs = _models(keras, kind, kwargs, dropout=0.3, recurrent_dropout=0.4)
    np.testing.assert_allclose(ours.predict(x, verbose=0), np.asarray(theirs(x)), atol=1e-6)
    # in training the masks apply
    assert np.abs(np.asarray(ours(x, training=True)) - ours.predict(x, verbose=0)).max() > 1e-3


@pytest.mark.parametrize("kind,kwargs", KINDS)
def test_training_with_rates_near_zero_is_the_cell(keras, kind, kwargs):
    """The unrolled training path with per-gate masks computes Keras's cell
    (masks of ones up to 1e-7)."""
    x = np.random.default_rng(1).random((4, 6, 3)).astype(np.float32)
    ours, theirs = _models(keras, kind, kwargs, dropout=1e-7, recurrent_dropout=1e-7)
    np.testing.assert_allclose(np.asarray(ours(x, training=True)), np.asarray(theirs(x)),
                               atol=1e-6)


def test_recurrent_mask_is_the_same_at_every_step():
    """h_t = (h_{t-1} * m) @ I with h_0 = 1: each unit's trajectory is 2^t
    (kept at rate 0.5, scaled by 2) or 0, if the mask does not change over
    time; about half the units are kept."""
    u, steps = 8, 5
    xi, hi = tn.Input((steps, 2)), tn.Input((u,))
    rnn = tn.layers.SimpleRNN(u, activation="linear", use_bias=False, recurrent_dropout=0.5,
                              return_sequences=True)
    model = tn.Model([xi, hi], rnn(xi, initial_state=[hi]))
    model.set_weights([np.zeros((2, u), np.float32), np.eye(u, dtype=np.float32)])
    out = np.asarray(model([np.zeros((64, steps, 2), np.float32), np.ones((64, u), np.float32)],
                           training=True))
    kept = out[:, 0, :] == 2.0
    assert np.all((out[:, 0, :] == 0.0) | kept)
    powers = 2.0 ** np.arange(1, steps + 1)
    np.testing.assert_array_equal(out, kept[:, None, :] * powers[None, :, None])
    assert 0.35 < kept.mean() < 0.65


def test_input_mask_is_the_same_at_every_step():
    """h_t = (x_t * m) @ I with x = 1: each unit constant over time."""
    u, steps = 8, 5
    xi = tn.Input((steps, u))
    model = tn.Model(xi, tn.layers.SimpleRNN(u, activation="linear", use_bias=False,
                                             dropout=0.5, return_sequences=True)(xi))
    model.set_weights([np.eye(u, dtype=np.float32), np.zeros((u, u), np.float32)])
    out = np.asarray(model(np.ones((64, steps, u), np.float32), training=True))
    np.testing.assert_array_equal(out, np.broadcast_to(out[:, :1, :], out.shape))
    assert set(np.unique(out)) == {0.0, 2.0}


def test_fit_with_recurrent_dropout_trains():
    """fit through the unrolled loop with per-gate masks: finite, decreasing."""
    rng = np.random.default_rng(2)
    x = rng.random((16, 6, 3)).astype(np.float32)
    xi = tn.Input((6, 3))
    model = tn.Model(xi, tn.layers.LSTM(4, recurrent_dropout=0.5)(xi))
    model.compile(tn.optimizers.Adam(0.01), "mse")
    losses = model.fit(x, np.zeros((16, 4), np.float32), epochs=4, batch_size=8,
                       verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_bad_rates_are_named_errors():
    with pytest.raises(ValueError, match=r"\[GRU\] recurrent_dropout must be in \[0, 1\), got "
                                         r"True"):
        tn.layers.GRU(3, recurrent_dropout=True)
    with pytest.raises(ValueError, match=r"\[SimpleRNN\] recurrent_dropout must be in"):
        tn.layers.SimpleRNN(3, recurrent_dropout=-0.1)
