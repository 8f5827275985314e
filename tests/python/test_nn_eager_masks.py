"""Masks of layers called on arrays (eagerly), as Keras 3 gives them: the
output carries `_keras_mask` (Embedding's mask_zero, Masking), the next layer
called on it takes it, `mask=` given as an array, `compute_mask` on built-in
layers, users' compute_mask giving one mask per output, supports_masking --
checked against Keras on JAX (the oracle) with the same weights and data
(the masking and padding guide of keras.io, as its users run it)."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402

RNG = np.random.default_rng(5)
PADDED = np.array([[711, 632, 71, 0, 0, 0], [73, 8, 3215, 55, 927, 0],
                   [83, 91, 1, 645, 1253, 927]], dtype=np.int32)


def _mask(y):
    return np.asarray(y._keras_mask)


def test_embedding_and_masking_outputs_carry_keras_masks():
    for lib in (nn, keras):
        emb = lib.layers.Embedding(input_dim=5000, output_dim=4, mask_zero=True)
        y = emb(PADDED)
        np.testing.assert_array_equal(_mask(y), PADDED != 0)
        tiled = np.tile(PADDED[..., None], (1, 1, 3)).astype("float32")
        z = lib.layers.Masking()(tiled)
        np.testing.assert_array_equal(_mask(z), PADDED != 0)
        # the built-in layers' compute_mask, called by users
        np.testing.assert_array_equal(np.asarray(emb.compute_mask(PADDED)), PADDED != 0)
    # without mask_zero: no mask (Keras sets none either)
    y = nn.layers.Embedding(10, 3)(np.array([[1, 0]]))
    assert getattr(y, "_keras_mask", None) is None
    assert nn.layers.Embedding(10, 3).compute_mask(np.array([[1, 0]])) is None


def test_masked_output_is_an_ordinary_array():
    y = nn.layers.Embedding(5000, 4, mask_zero=True)(PADDED)
    assert isinstance(y, np.ndarray) and y.shape == (3, 6, 4)
    assert repr(y) == repr(np.asarray(y).view(np.ndarray))
    z = y * 2.0 + 1.0
    assert type(z) is np.ndarray and getattr(z, "_keras_mask", None) is None
    np.testing.assert_array_equal(z, np.asarray(y) * 2.0 + 1.0)
    assert getattr(y[0], "_keras_mask", None) is None  # a view: no mask
    assert float(y.sum()) == float(np.asarray(y).view(np.ndarray).sum())


def _lstm_pair(units=5):
    t = nn.layers.LSTM(units)
    k = keras.layers.LSTM(units)
    x = RNG.normal(size=(3, 6, 4)).astype(np.float32)
    k(x)  # builds
    t(x)
    t.set_weights([RNG.normal(size=w.shape).astype(np.float32) * 0.5 for w in t.get_weights()])
    k.set_weights(t.get_weights())
    return t, k, x


def test_lstm_takes_a_mask_given_or_carried_as_keras():
    t, k, x = _lstm_pair()
    m = PADDED != 0
    want = np.asarray(k(x, mask=m))
    np.testing.assert_allclose(t(x, mask=m), want, rtol=1e-5, atol=1e-6)
    # the mask differs from none: the check can fail
    assert not np.allclose(np.asarray(k(x)), want, atol=1e-3)
    # carried by the previous eager output
    emb_t = nn.layers.Embedding(5000, 4, mask_zero=True)
    emb_k = keras.layers.Embedding(5000, 4, mask_zero=True)
    emb_k(PADDED)
    emb_t(PADDED)
    emb_k.set_weights(emb_t.get_weights())
    np.testing.assert_allclose(t(emb_t(PADDED)), np.asarray(k(emb_k(PADDED))), rtol=1e-5,
                               atol=1e-6)


def test_users_layer_passes_a_mask_to_its_sublayers_eagerly():
    def build(lib):
        class MyLayer(lib.layers.Layer):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.embedding = lib.layers.Embedding(input_dim=50, output_dim=4,
                                                      mask_zero=True)
                self.lstm = lib.layers.LSTM(3)

            def call(self, inputs):
                x = self.embedding(inputs)
                mask = self.embedding.compute_mask(inputs)
                return self.lstm(x, mask=mask)
        return MyLayer()
    x = (PADDED % 50).astype(np.int32)
    t, k = build(nn), build(keras)
    t(x), k(x)
    t.set_weights([RNG.normal(size=w.shape).astype(np.float32) * 0.5 for w in t.get_weights()])
    k.set_weights(t.get_weights())
    np.testing.assert_allclose(t(x), np.asarray(k(x)), rtol=1e-5, atol=1e-6)


def _split_layer(lib):
    class TemporalSplit(lib.layers.Layer):
        def call(self, inputs):
            return lib.ops.split(inputs, 2, axis=1)

        def compute_mask(self, inputs, mask=None):
            if mask is None:
                return None
            return lib.ops.split(mask, 2, axis=1)
    return TemporalSplit()


def test_compute_mask_gives_one_mask_per_output_as_keras():
    tiled = np.tile(PADDED[..., None], (1, 1, 3)).astype("float32")
    for lib in (nn, keras):
        masked = lib.layers.Masking()(tiled)
        first, second = _split_layer(lib)(masked)
        np.testing.assert_array_equal(_mask(first), (PADDED != 0)[:, :3])
        np.testing.assert_array_equal(_mask(second), (PADDED != 0)[:, 3:])
    # symbolically: each half's mask reaches the layer called on it
    def model(lib):
        inp = lib.Input(shape=(6, 3))
        first, second = _split_layer(lib)(lib.layers.Masking()(inp))
        pooled = [lib.layers.GlobalAveragePooling1D()(h) for h in (first, second)]
        return lib.Model(inp, lib.layers.Concatenate()(pooled))
    x = tiled.copy()
    x[0, 1] = 0.0  # a masked step inside the first half too
    np.testing.assert_allclose(model(nn).predict(x, verbose=0), np.asarray(model(keras)(x)),
                               rtol=1e-6)
    # an axis of unknown length cannot be cut into equal sections symbolically: said so
    with pytest.raises(ValueError, match=r"cannot split axis 1 into 2 equal sections .*not known"):
        _split_layer(nn)(nn.layers.Masking()(nn.Input(shape=(None, 3))))


def test_supports_masking_passes_the_mask_eagerly_and_symbolically():
    def act(lib):
        class MyActivation(lib.layers.Layer):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.supports_masking = True

            def call(self, inputs):
                return lib.ops.relu(inputs)
        return MyActivation()
    for lib in (nn, keras):
        y = act(lib)(lib.layers.Embedding(5000, 4, mask_zero=True)(PADDED))
        np.testing.assert_array_equal(_mask(y), PADDED != 0)
        inputs = lib.Input(shape=(None,), dtype="int32")
        h = act(lib)(lib.layers.Embedding(5000, 4, mask_zero=True)(inputs))
        assert h._keras_mask is not None


@pytest.mark.parametrize("given", [False, True])
def test_users_call_with_mask_argument_gets_the_carried_mask(given):
    seen = {}

    class TemporalSoftmax(nn.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_masking = True

        def call(self, inputs, mask=None):
            seen["mask"] = None if mask is None else np.asarray(mask)
            m = nn.ops.expand_dims(nn.ops.cast(mask, "float32"), -1)
            e = nn.ops.exp(inputs) * m
            return e / nn.ops.sum(e, axis=1, keepdims=True)

    x = RNG.normal(size=(3, 6, 1)).astype(np.float32)
    m = PADDED != 0
    if given:
        y = TemporalSoftmax()(x, mask=m)
    else:
        y = TemporalSoftmax()(nn.layers.Masking(mask_value=99.0)(np.where(m[..., None], x, 99.0)))
    np.testing.assert_array_equal(seen["mask"], m)
    want = np.exp(x) * m[..., None]
    want = want / want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    np.testing.assert_array_equal(_mask(y), m)
