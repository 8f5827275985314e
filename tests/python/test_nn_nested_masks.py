"""The mask of a nested model's output, carried out of it as Keras's nested
Functional.compute_mask carries it: an encoder sub-model with
Embedding(mask_zero=True) (on its input, or on a layer's output) or Masking
inside, read by the outer model's LSTM, GRU, MultiHeadAttention,
GlobalAveragePooling1D and masked loss; Sequential nested in Sequential.
Keras 3 on JAX is the oracle: the same weights, outputs and fit compared."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402

RNG = np.random.default_rng(17)


def _padded(n, length, vocab=20):
    x = np.zeros((n, length), dtype=np.int32)
    for i in range(n):
        k = int(RNG.integers(1, length + 1))
        x[i, :k] = RNG.integers(1, vocab, size=k)
    return x


def _both(build, scale=0.4):
    t, k = build(nn), build(keras)
    assert len(t.get_weights()) == len(k.get_weights())
    t.set_weights([RNG.normal(size=w.shape).astype(np.float32) * scale
                   for w in t.get_weights()])
    k.set_weights(t.get_weights())
    return t, k


def _encoder(lib, through_layer):
    """ids -> Embedding(mask_zero) -> Dense: the mask made by a layer of the
    encoder, on its input or (through_layer) on another layer's output."""
    ids = lib.Input((None,), dtype="int32")
    h = lib.layers.Identity()(ids) if through_layer else ids
    h = lib.layers.Embedding(20, 6, mask_zero=True)(h)
    h = lib.layers.Dense(6, activation="tanh")(h)
    return lib.Model(ids, h, name="encoder")


def _outer(lib, head, through_layer):
    enc = _encoder(lib, through_layer)
    ids = lib.Input((None,), dtype="int32")
    h = enc(ids)
    if head == "LSTM":
        h = lib.layers.LSTM(4)(h)
    elif head == "GRU":
        h = lib.layers.GRU(4, return_sequences=True)(h)
        h = lib.layers.GlobalAveragePooling1D()(h)
    elif head == "MultiHeadAttention":
        h = lib.layers.MultiHeadAttention(2, 3)(h, h)
        h = lib.layers.GlobalAveragePooling1D()(h)
    else:
        h = lib.layers.GlobalAveragePooling1D()(h)
    return lib.Model(ids, lib.layers.Dense(2)(h))


@pytest.mark.parametrize("through_layer", [False, True])
@pytest.mark.parametrize("head", ["LSTM", "GRU", "MultiHeadAttention",
                                  "GlobalAveragePooling1D"])
def test_outer_layers_read_the_nested_models_mask_as_keras(head, through_layer):
    t, k = _both(lambda lib: _outer(lib, head, through_layer))
    xs = {length: _padded(6, length) for length in (5, 8)}
    got = {length: t.predict(x, verbose=0) for length, x in xs.items()}
    for length, x in xs.items():
        np.testing.assert_allclose(got[length], np.asarray(k(x)), rtol=1e-4, atol=1e-5)
    # the padding changes nothing (so a lost mask would fail this): the length-5 batch
    # padded to the length-8 batch's shape (the same shapes: no other program compiled)
    longer = np.concatenate([xs[5], np.zeros((6, 3), np.int32)], axis=1)
    np.testing.assert_allclose(t.predict(longer, verbose=0), got[5], rtol=1e-4, atol=1e-5)


def _tagger(lib):
    """A tagger whose per-step outputs carry the encoder's mask: the loss
    and the accuracy are masked."""
    enc = _encoder(lib, True)
    ids = lib.Input((None,), dtype="int32")
    h = lib.layers.GRU(5, return_sequences=True)(enc(ids))
    m = lib.Model(ids, lib.layers.Dense(3, activation="softmax")(h))
    m.compile(optimizer=lib.optimizers.SGD(0.3), loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_accuracy"])
    return m


def test_masked_loss_and_fit_through_a_nested_model_as_keras():
    t, k = _both(_tagger)
    assert t.outputs[0]._keras_mask is not None
    x = _padded(12, 7)
    y = (x % 3).astype(np.int32)
    np.testing.assert_allclose(t.evaluate(x, y, verbose=0), k.evaluate(x, y, verbose=0),
                               rtol=2e-4)
    ht = t.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    hk = k.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(ht.history["loss"], hk.history["loss"], rtol=2e-4, atol=1e-6)
    for a, b in zip(t.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-3, atol=2e-5)
    # the masked loss by hand: the padded steps weigh nothing
    p = t.predict(x, verbose=0).astype(np.float64)
    ce = -np.log(np.take_along_axis(p, y[..., None], -1)[..., 0])
    m = x != 0
    np.testing.assert_allclose(t.evaluate(x, y, batch_size=12, verbose=0)[0],
                               np.sum(ce * m) / m.sum(), rtol=1e-5)


def _masking_encoder(lib):
    """Masking inside the encoder, on a relu layer's output (zero rows)."""
    x = lib.Input((None, 3))
    h = lib.layers.Dense(4, activation="relu")(x)
    h = lib.layers.Masking(0.0)(h)
    return lib.Model(x, lib.layers.Dense(4)(h))


def test_masking_inside_a_nested_model_as_keras():
    def build(lib):
        x = lib.Input((None, 3))
        h = lib.layers.SimpleRNN(3)(_masking_encoder(lib)(x))
        return lib.Model(x, h)

    t, k = _both(build, scale=0.8)
    # with the negative kernel below, the relu keeps the first 4 steps (negative
    # inputs) and sends the last 2 (positive) to zero
    x = -np.abs(RNG.normal(size=(8, 6, 3))).astype(np.float32) - 0.1
    x[:, 4:] *= -1
    w = t.get_weights()  # the relu layer's kernel first: sends those rows to zero
    w[0], w[1] = -np.abs(w[0]), np.zeros_like(w[1])
    t.set_weights(w)
    k.set_weights(w)
    got = t.predict(x, verbose=0)
    np.testing.assert_allclose(got, np.asarray(k(x)), rtol=1e-4, atol=1e-5)
    # the masked steps are skipped: the output is that of the first 4 steps
    np.testing.assert_allclose(got, t.predict(x[:, :4], verbose=0), rtol=1e-5, atol=1e-6)


def test_sequential_nested_in_sequential_as_keras():
    def build(lib):
        inner = lib.Sequential([lib.layers.Embedding(20, 6, mask_zero=True),
                                lib.layers.Dense(5)], name="inner")
        return lib.Sequential([lib.Input((None,), dtype="int32"), inner,
                               lib.layers.LSTM(3, return_sequences=True),
                               lib.layers.Dense(2)])

    t, k = _both(build)
    x = _padded(6, 7)
    np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-4, atol=1e-5)
    assert t.outputs[0]._keras_mask is not None
    t.compile(optimizer=nn.optimizers.SGD(0.2), loss="mse")
    k.compile(optimizer=keras.optimizers.SGD(0.2), loss="mse")
    y = RNG.normal(size=(6, 7, 2)).astype(np.float32)
    np.testing.assert_allclose(t.evaluate(x, y, verbose=0), k.evaluate(x, y, verbose=0),
                               rtol=2e-4)
    ht = t.fit(x, y, batch_size=3, epochs=2, verbose=0, shuffle=False)
    hk = k.fit(x, y, batch_size=3, epochs=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(ht.history["loss"], hk.history["loss"], rtol=2e-4, atol=1e-6)


def test_saved_model_keeps_the_nested_mask(tmp_path):
    t, _ = _both(lambda lib: _outer(lib, "LSTM", True))
    path = str(tmp_path / "m.keras")
    t.save(path)
    loaded = nn.load_model(path)
    x = _padded(5, 6)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), t.predict(x, verbose=0),
                               rtol=1e-6)
