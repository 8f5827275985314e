"""Users' layers as keras.io's sequence-to-sequence Transformer writes them,
against Keras 3 on JAX (the oracle, same weights and data): positions made
with ops.arange(ops.shape(x)[-1]) on an axis of unknown length, a
MultiHeadAttention called with query=/value=/key= keywords, a layer called
on a list of inputs receiving the list of their masks (Keras 3's structure:
None where an input has none), and the output's mask from supports_masking."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402

from tessera import nn  # noqa: E402

RNG = np.random.default_rng(3)
VOCAB, LENGTH, DIM = 30, 7, 8


def _ids(n, length):
    x = np.zeros((n, length), dtype=np.int32)
    for i in range(n):
        k = int(RNG.integers(2, length + 1))
        x[i, :k] = RNG.integers(1, VOCAB, size=k)
    return x


def _classes(lib):
    layers, ops = lib.layers, lib.ops

    class PositionalEmbedding(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.token_embeddings = layers.Embedding(input_dim=VOCAB, output_dim=DIM)
            self.position_embeddings = layers.Embedding(input_dim=LENGTH, output_dim=DIM)

        def call(self, inputs):
            length = ops.shape(inputs)[-1]
            positions = ops.arange(0, length, 1)
            return self.token_embeddings(inputs) + self.position_embeddings(positions)

        def compute_mask(self, inputs, mask=None):
            return ops.not_equal(inputs, 0)

    class Encoder(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.attention = layers.MultiHeadAttention(num_heads=2, key_dim=DIM)
            self.norm = layers.LayerNormalization()
            self.supports_masking = True

        def call(self, inputs, mask=None):
            padding_mask = None if mask is None else ops.cast(mask[:, None, :], dtype="int32")
            out = self.attention(query=inputs, value=inputs, key=inputs,
                                 attention_mask=padding_mask)
            return self.norm(inputs + out)

    class Decoder(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.attention_1 = layers.MultiHeadAttention(num_heads=2, key_dim=DIM)
            self.attention_2 = layers.MultiHeadAttention(num_heads=2, key_dim=DIM)
            self.norm = layers.LayerNormalization()
            self.supports_masking = True

        def call(self, inputs, mask=None):
            inputs, encoder_outputs = inputs
            if mask is None:
                inputs_mask, encoder_mask = None, None
            else:
                inputs_mask, encoder_mask = mask
            out_1 = self.attention_1(query=inputs, value=inputs, key=inputs,
                                     use_causal_mask=True, query_mask=inputs_mask)
            out_2 = self.attention_2(query=out_1, value=encoder_outputs, key=encoder_outputs,
                                     query_mask=inputs_mask, key_mask=encoder_mask)
            return self.norm(out_1 + out_2)

    return PositionalEmbedding, Encoder, Decoder


def _model(lib):
    PositionalEmbedding, Encoder, Decoder = _classes(lib)
    enc_in = lib.Input(shape=(None,), dtype="int32", name="encoder_inputs")
    dec_in = lib.Input(shape=(None,), dtype="int32", name="decoder_inputs")
    encoded = Encoder()(PositionalEmbedding()(enc_in))
    h = Decoder()([PositionalEmbedding()(dec_in), encoded])
    out = lib.layers.Dense(VOCAB, activation="softmax")(h)
    return lib.Model([enc_in, dec_in], out)


def test_seq2seq_transformer_matches_keras_on_padded_batches():
    t, k = _model(nn), _model(keras)
    assert [w.shape for w in t.get_weights()] == [tuple(w.shape) for w in k.get_weights()]
    t.set_weights([RNG.normal(size=w.shape).astype(np.float32) * 0.3 for w in t.get_weights()])
    k.set_weights(t.get_weights())
    for length in (5, 7):  # two lengths of the unknown axis
        x = [_ids(4, length), _ids(4, length)]
        np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=2e-5,
                                   atol=2e-6)
    # the decoder's output carries its input's mask (the first of the list, as Keras)
    assert t.outputs[0]._keras_mask is not None


def test_seq2seq_loss_is_masked_as_keras():
    t, k = _model(nn), _model(keras)
    t.set_weights([RNG.normal(size=w.shape).astype(np.float32) * 0.3 for w in t.get_weights()])
    k.set_weights(t.get_weights())
    for m in (t, k):
        m.compile("sgd", loss="sparse_categorical_crossentropy")
    x = [_ids(6, LENGTH), _ids(6, LENGTH)]
    y = np.roll(x[1], -1, axis=1)
    np.testing.assert_allclose(t.evaluate(x, y, verbose=0), k.evaluate(x, y, verbose=0),
                               rtol=1e-5)


def test_layer_on_a_list_gets_the_list_of_masks_none_where_missing():
    seen = []

    class Probe(nn.layers.Layer):
        def call(self, inputs, mask=None):
            seen.append(mask)
            return inputs[0]

    a = nn.Input(shape=(None,), dtype="int32")
    b = nn.Input(shape=(None, DIM))
    e = nn.layers.Embedding(VOCAB, DIM, mask_zero=True)(a)
    Probe()([e, b])
    mask = seen[-1]
    assert isinstance(mask, list) and len(mask) == 2
    assert mask[0] is not None and mask[1] is None
    # eagerly too
    ids = _ids(3, 5)
    emb = nn.layers.Embedding(VOCAB, DIM, mask_zero=True)
    Probe()([emb(ids), np.zeros((3, 5, DIM), np.float32)])
    np.testing.assert_array_equal(np.asarray(seen[-1][0]), ids != 0)
    assert seen[-1][1] is None


def test_multi_head_attention_takes_its_inputs_by_keyword():
    q = RNG.normal(size=(2, 4, DIM)).astype(np.float32)
    v = RNG.normal(size=(2, 6, DIM)).astype(np.float32)
    t = nn.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    k = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    k(q, v)
    t(q, v)
    k.set_weights(t.get_weights())
    np.testing.assert_allclose(t(query=q, value=v, key=v), np.asarray(k(query=q, value=v, key=v)),
                               rtol=1e-5, atol=1e-6)
    qi, vi = nn.Input(shape=(4, DIM)), nn.Input(shape=(6, DIM))
    out = nn.layers.MultiHeadAttention(num_heads=2, key_dim=4)(query=qi, value=vi)
    assert out.shape == (None, 4, DIM)


def test_model_weights_are_keras_variables_in_keras_order():
    t, k = _model(nn), _model(keras)
    assert len(t.weights) == len(k.weights)
    assert [tuple(w.shape) for w in t.weights] == [tuple(w.shape) for w in k.weights]
    assert all(isinstance(w, nn.Variable) for w in t.weights)
    assert [w.name for w in t.weights[:2]] == [w.name for w in k.weights[:2]]
    assert len(t.trainable_weights) == len(k.trainable_weights) and not t.non_trainable_weights
    # a Variable of the model is the layer's weight: assign reaches predict
    x = [_ids(2, 4), _ids(2, 4)]
    before = t.predict(x, verbose=0)
    dense_kernel = t.weights[-2]
    dense_kernel.assign(np.zeros(dense_kernel.shape, np.float32))
    after = t.predict(x, verbose=0)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, 1.0 / VOCAB, rtol=1e-5)  # zero kernel: softmax(bias=0)
    # tessera's names still index the arrays
    assert "l0_embeddings" in t.weights and t.weights["l0_embeddings"].shape == (VOCAB, DIM)
    assert set(t.weights.keys()) == {k for k, _ in t.weights.items()}
