"""ConvLSTM1D/2D/3D against Keras 3 on JAX as the oracle (the same weights
through set_weights): forward for each rank and the main arguments, states,
masks, Bidirectional, dropout; gradients of a float64 model against central
differences; a few training steps (losses and weights) against Keras's; a
save/load round trip; and the errors."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_nn_layers import _grad_check  # noqa: E402
from test_nn_layers_more import _both, _names_and_config, _same, _x  # noqa: E402

from tessera import nn  # noqa: E402

# Keras's random initializers compile a JAX program per kernel shape; the
# tests replace the weights anyway.
Z = dict(kernel_initializer="zeros", recurrent_initializer="zeros")

CASES = [
    (1, dict(), (3, 7, 2)),
    (1, dict(strides=2, return_sequences=True, go_backwards=True), (4, 8, 3)),
    (1, dict(padding="same", dilation_rate=2, data_format="channels_first",
             return_sequences=True), (3, 2, 6)),
    (2, dict(), (3, 5, 5, 2)),
    (2, dict(kernel_size=(3, 2), padding="same", return_sequences=True), (3, 5, 4, 2)),
    (2, dict(strides=(2, 1), activation="relu", recurrent_activation="hard_sigmoid",
             use_bias=False), (2, 6, 5, 1)),
    (2, dict(data_format="channels_first", padding="same", go_backwards=True), (3, 2, 4, 5)),
    (2, dict(unroll=True, unit_forget_bias=False, return_sequences=True), (2, 4, 4, 3)),
    (3, dict(padding="same", return_sequences=True), (2, 3, 4, 3, 2)),
    (3, dict(kernel_size=2, strides=(1, 2, 1), data_format="channels_first"), (2, 1, 3, 4, 4)),
]


def _layer(lib, rank, **kw):
    kw = dict(dict(filters=3, kernel_size=3), **kw)
    return getattr(lib.layers, f"ConvLSTM{rank}D")(**kw)


def _model(lib, rank, shape, **kw):
    inp = lib.Input(shape)
    return lib.Model(inp, _layer(lib, rank, **kw)(inp))


@pytest.mark.parametrize("rank,kw,shape", CASES)
def test_forward_matches_keras(rank, kw, shape):
    t, k = _both(lambda lib: _model(lib, rank, shape, **Z, **kw))
    x = _x(2, *shape)
    _same(t, k, x, rtol=1e-5, atol=2e-6)
    _names_and_config(t.layers[-1], k.layers[-1])


def test_weights_have_keras_names_shapes_and_order():
    t, k = _both(lambda lib: _model(lib, 2, (3, 6, 5, 2), filters=4, kernel_size=(3, 2),
                                    name="frames", **Z))
    assert [w.path for w in t.weights] == [w.path for w in k.weights] == [
        "frames/conv_lstm_cell/kernel", "frames/conv_lstm_cell/recurrent_kernel",
        "frames/conv_lstm_cell/bias"]
    assert [w.shape for w in t.get_weights()] == [(3, 2, 2, 16), (3, 2, 4, 16), (16,)]
    # the bias of a fresh layer: ones for the forget gate (unit_forget_bias)
    fresh = _model(nn, 1, (3, 5, 2), filters=2).get_weights()[2]
    np.testing.assert_array_equal(fresh, [0, 0, 1, 1, 0, 0, 0, 0])


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_states_in_and_out_match_keras(fmt):
    shape = (3, 6, 5, 2) if fmt == "channels_last" else (3, 2, 6, 5)
    state = (6, 5, 3) if fmt == "channels_last" else (3, 6, 5)

    def build(lib):
        x, h, c = lib.Input(shape), lib.Input(state), lib.Input(state)
        out = _layer(lib, 2, padding="same", data_format=fmt, return_sequences=True,
                     return_state=True, **Z)(x, initial_state=[h, c])
        return lib.Model([x, h, c], out)
    t, k = _both(build)
    xs = [_x(2, *shape), _x(2, *state), _x(2, *state)]
    got, want = t.predict(xs, verbose=0), k.predict(xs, verbose=0)
    assert len(got) == len(want) == 3
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)


def test_a_mask_keeps_the_states_at_masked_steps():
    """Keras 3 on JAX raises on a mask here; its meaning (the LSTM's: a
    masked step leaves the states as they were) is the sequence without the
    masked steps."""
    x, m = nn.Input((4, 5, 5, 2)), nn.Input((4,), dtype="bool")
    t = nn.Model([x, m], _layer(nn, 2, padding="same")(x, mask=m))
    k = _model(keras, 2, (None, 5, 5, 2), padding="same", **Z)
    t.set_weights([w * 0.5 for w in [_x(*w.shape) for w in t.get_weights()]])
    k.set_weights(t.get_weights())
    xs = _x(2, 4, 5, 5, 2)
    mask = np.array([[1, 1, 0, 1], [1, 0, 0, 0]], bool)
    got = t.predict([xs, mask], verbose=0)
    for i, kept in enumerate([[0, 1, 3], [0]]):
        np.testing.assert_allclose(got[i], k.predict(xs[i:i + 1, kept], verbose=0)[0],
                                   rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("merge_mode", ["concat", "sum"])
def test_bidirectional_matches_keras(merge_mode):
    def build(lib):
        inp = lib.Input((3, 6, 2))
        layer = lib.layers.ConvLSTM1D(2, 3, return_sequences=True, name="seq", **Z)
        wrapper = lib.layers.Bidirectional(layer, merge_mode=merge_mode, name="both")
        return lib.Model(inp, wrapper(inp))
    t, k = _both(build)
    assert [w.path for w in t.weights] == [w.path for w in k.weights]
    _same(t, k, _x(2, 3, 6, 2), atol=2e-6)


def test_dropout_is_off_in_inference_and_the_cell_with_tiny_rates():
    x = _x(2, 3, 6, 2)
    t, k = _both(lambda lib: _model(lib, 1, (3, 6, 2), return_sequences=True, dropout=0.3,
                                    recurrent_dropout=0.4, **Z))
    _same(t, k, x, atol=2e-6)
    # in training the masks apply
    assert np.abs(np.asarray(t(x, training=True)) - t.predict(x, verbose=0)).max() > 1e-3
    # the training path with masks of ones (up to 1e-7) is Keras's cell
    t, k = _both(lambda lib: _model(lib, 1, (3, 6, 2), return_sequences=True, dropout=1e-7,
                                    recurrent_dropout=1e-7, **Z))
    np.testing.assert_allclose(np.asarray(t(x, training=True)), np.asarray(k(x, training=True)),
                               atol=2e-6)


def test_the_input_mask_is_the_same_at_every_step():
    """No recurrence (recurrent kernel 0) and the same frame at every step:
    the outputs of the steps are equal only if the four input masks are."""
    t = _model(nn, 2, (4, 5, 5, 2), padding="same", return_sequences=True, dropout=0.5)
    w = [_x(*a.shape) for a in t.get_weights()]
    w[1][:] = 0.0
    w[0] *= 0.3
    w[2][3:6] = -100.0  # forget gate shut: the cell starts anew each step
    t.set_weights(w)
    frame = _x(8, 1, 5, 5, 2)
    out = np.asarray(t(np.repeat(frame, 4, axis=1), training=True))
    for s in range(1, 4):
        np.testing.assert_allclose(out[:, s], out[:, 0], atol=1e-6)
    assert np.abs(out - t.predict(np.repeat(frame, 4, axis=1), verbose=0)).max() > 1e-3


def test_gradients_match_central_differences():
    rng = np.random.default_rng(5)
    inp = nn.Input((3, 4, 3, 2))
    h = nn.layers.ConvLSTM2D(2, (2, 3), padding="same", return_sequences=True,
                             data_format="channels_first")(inp)
    h = nn.layers.ConvLSTM2D(2, 2, strides=(1, 2), go_backwards=True)(h)
    m = nn.Model(inp, nn.layers.Flatten()(h), dtype="float64")
    m.set_weights([rng.normal(size=w.shape) * 0.5 for w in m.get_weights()])
    _grad_check(m, rng.normal(size=(2, 3, 4, 3, 2)), rng, coords=3)


def test_a_few_training_steps_match_keras():
    def build(lib):
        inp = lib.Input((3, 5, 5, 1))
        h = lib.layers.ConvLSTM2D(2, 3, kernel_regularizer=lib.regularizers.L2(0.01), **Z)(inp)
        return lib.Model(inp, lib.layers.Conv2D(1, 1, kernel_initializer="zeros")(h))
    t, k = _both(build)
    x, y = _x(4, 3, 5, 5, 1), _x(4, 3, 3, 1)
    t.compile(nn.optimizers.Adam(0.01), "mse")
    k.compile(keras.optimizers.Adam(0.01), "mse")
    got = t.fit(x, y, batch_size=2, epochs=2, shuffle=False, verbose=0).history["loss"]
    want = k.fit(x, y, batch_size=2, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(got, want, rtol=1e-4)
    for a, b in zip(t.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def test_save_and_load_round_trip(tmp_path):
    inp = nn.Input((3, 6, 5, 2))
    # channels first: 6 channels of 5 x 2
    h = nn.layers.ConvLSTM2D(3, (3, 2), padding="same", data_format="channels_first",
                             return_sequences=True, dropout=0.1,
                             kernel_constraint=nn.constraints.MaxNorm(2.0))(inp)
    out = nn.layers.Bidirectional(nn.layers.ConvLSTM1D(2, 3, strides=2), merge_mode="ave")(
        nn.layers.Reshape((3, 3, 10))(h))
    m = nn.Model(inp, out)
    path = str(tmp_path / "conv_lstm.keras")
    m.save(path)
    back = nn.load_model(path)
    x = _x(2, 3, 6, 5, 2)
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    assert [w.path for w in back.weights] == [w.path for w in m.weights]
    assert back.layers[1].get_config()["kernel_size"] == (3, 2)


def test_errors_name_the_layer_and_the_values():
    L = nn.layers
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] filters must be a positive int, got 0"):
        L.ConvLSTM2D(0, 3)
    with pytest.raises(ValueError, match=r"\[ConvLSTM3D\] kernel_size must be a positive int or "
                                         r"3 of them, got \(3, 3\)"):
        L.ConvLSTM3D(2, (3, 3))
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] strides > 1 cannot go with "
                                         r"dilation_rate > 1"):
        L.ConvLSTM2D(2, 3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match=r"\[ConvLSTM1D\] padding must be one of "
                                         r"\['valid', 'same'\], got 'causal'"):
        L.ConvLSTM1D(2, 3, padding="causal")
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] data_format must be"):
        L.ConvLSTM2D(2, 3, data_format="nhwc")
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] layer .* stateful=True needs a fixed "
                                         r"batch size"):
        L.ConvLSTM2D(2, 3, stateful=True)(nn.Input((3, 5, 5, 2)))
    with pytest.raises(ValueError, match=r"\[ConvLSTM1D\] dropout must be in \[0, 1\)"):
        L.ConvLSTM1D(2, 3, dropout=1.5)
    with pytest.raises(TypeError, match=r"\[ConvLSTM2D\] unexpected keyword argument 'filter'"):
        L.ConvLSTM2D(filter=2, kernel_size=3)
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] expects inputs of shape \(batch, "
                                         r"timesteps, rows, cols, channels\), got per-sample "
                                         r"shape \(4, 5, 2\)"):
        L.ConvLSTM2D(2, 3)(nn.Input((4, 5, 2)))
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] layer .* needs the length of every "
                                         r"spatial axis .* got per-sample shape "
                                         r"\(3, None, 5, 2\)"):
        L.ConvLSTM2D(2, 3)(nn.Input((3, None, 5, 2)))
    with pytest.raises(ValueError, match=r"\[ConvLSTM1D\] kernel \(5,\) .* does not fit"):
        L.ConvLSTM1D(2, 5)(nn.Input((3, 4, 2)))
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] layer .* takes a mask \(batch, "
                                         r"timesteps\), got one of shape \(None, 4, 5, 5\).*"
                                         r"test_nn_conv_lstm.py"):
        L.ConvLSTM2D(2, 3)(L.Masking()(nn.Input((4, 5, 5, 2))))
    x, h = nn.Input((3, 5, 5, 2)), nn.Input((5, 5, 2))
    with pytest.raises(ValueError, match=r"\[ConvLSTM2D\] layer .*: initial state 0 must have "
                                         r"per-sample shape \(3, 3, 2\), got \(5, 5, 2\)"):
        L.ConvLSTM2D(2, 3)(x, initial_state=[h, h])


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_stateful_continues_the_sequence(fmt):
    """stateful=True: a batch after another is the two sequences joined on
    the time axis (Keras's on the whole sequence); reset_states starts anew."""
    shape = (5, 4, 2) if fmt == "channels_last" else (2, 5, 4)
    kw = dict(padding="same", data_format=fmt)
    inp = nn.Input(batch_shape=(2, 3) + shape)
    t = nn.Model(inp, _layer(nn, 2, stateful=True, **kw)(inp))
    k = _model(keras, 2, (6,) + shape, **kw, **Z)
    t.set_weights([_x(*w.shape) * 0.4 for w in t.get_weights()])
    k.set_weights(t.get_weights())
    x = _x(2, 6, *shape)
    t.predict(x[:, :3], verbose=0)
    np.testing.assert_allclose(t.predict(x[:, 3:], verbose=0), k.predict(x, verbose=0),
                               rtol=1e-5, atol=2e-6)
    t.layers[-1].reset_states()
    np.testing.assert_allclose(t.predict(x[:, :3], verbose=0), k.predict(x[:, :3], verbose=0),
                               rtol=1e-5, atol=2e-6)
    # called on arrays (Keras's eager use)
    layer = _layer(nn, 1, stateful=True, return_state=True)
    xs = _x(2, 4, 6, 2)
    layer(xs[:, :2])
    y, h, c = layer(xs[:, 2:])
    k1 = _model(keras, 1, (4, 6, 2), return_state=True, **Z)
    k1.set_weights(layer.get_weights())
    for a, b in zip((y, h, c), k1.predict(xs, verbose=0)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)
