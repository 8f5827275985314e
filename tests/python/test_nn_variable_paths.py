"""Keras's names of layers, models and variables in tessera.nn (issue 30, items
2 and 5), against Keras 3 on JAX (the oracle): the same program written once
for each library (`k` is keras or tessera.nn) gives the same names. Both name
counters start from zero (clear_session), as a fresh script's do."""

import numpy as np
import pytest

import tessera.nn as nn


def _fresh(keras):
    keras.backend.clear_session()
    nn.utils.clear_session()


def _same(keras, build):
    """build(k) -> a list of strings, run with Keras and with tessera.nn."""
    _fresh(keras)
    theirs = build(keras)
    _fresh(keras)
    ours = build(nn)
    assert ours == theirs


def _paths(model):
    return [(w.path, w.name, tuple(w.shape)) for w in model.weights]


def _encoder_model(k):
    L = k.layers

    class Enc(L.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.att = L.MultiHeadAttention(2, 4)
            self.d = L.Dense(8)

        def build(self, shape):
            self.scale = self.add_weight(shape=(8,), initializer="ones", name="scale")

        def call(self, x):
            return self.d(self.att(x, x)) * self.scale

    inp = k.Input((5, 8))
    x = L.Dense(8)(inp)
    x = Enc(name="encoder")(x)
    x = L.LayerNormalization()(x)
    return k.Model(inp, x)


def test_paths_of_nested_layers_and_attention(keras):
    """A user's layer's sublayers are under its name; MultiHeadAttention's
    weights under its query/key/value/attention_output sublayers."""
    _same(keras, lambda k: _paths(_encoder_model(k)) + [_encoder_model(k).name])


def test_paths_of_recurrent_and_wrapped_layers(keras):
    def build(k):
        L = k.layers
        inp = k.Input((6, 8))
        x = L.LSTM(4, return_sequences=True)(inp)
        x = L.GRU(4, return_sequences=True, reset_after=False)(x)
        x = L.SimpleRNN(4, return_sequences=True)(x)
        x = L.Bidirectional(L.LSTM(4, return_sequences=True))(x)
        x = L.Bidirectional(L.GRU(3, return_sequences=True),
                            backward_layer=L.GRU(3, return_sequences=True, go_backwards=True))(x)
        x = L.TimeDistributed(L.Dense(2))(x)
        x = L.RNN([L.LSTMCell(3), L.GRUCell(2)], return_sequences=True)(x)
        x = L.RNN(L.SimpleRNNCell(3))(x)
        return _paths(k.Model(inp, x))

    _same(keras, build)


def test_paths_of_plain_layers(keras):
    def build(k):
        L = k.layers
        out = []
        for shape, dtype, make in [((5,), "int32", lambda: L.Embedding(10, 4)),
                                   ((6, 6, 2), "float32", lambda: L.Conv2D(2, 3)),
                                   ((6, 6, 2), "float32", lambda: L.Conv2DTranspose(2, 3)),
                                   ((6, 6, 2), "float32", lambda: L.DepthwiseConv2D(3)),
                                   ((6, 6, 2), "float32", lambda: L.SeparableConv2D(2, 3)),
                                   ((6, 4), "float32", lambda: L.GroupNormalization(2)),
                                   ((4,), "float32", lambda: L.BatchNormalization()),
                                   ((4,), "float32", lambda: L.PReLU()),
                                   ((6, 4), "float32",
                                    lambda: L.EinsumDense("abc,cd->abd", output_shape=(None, 5),
                                                          bias_axes="d"))]:
            inp = k.Input(shape, dtype=dtype)
            out += _paths(k.Model(inp, make()(inp)))
        return out

    _same(keras, build)


def test_paths_of_sequential_subclassed_and_prebuilt(keras):
    """Sequential's layers are under its name, a subclassed model's under its
    class's snake-case name; a layer built before it joins a model keeps the
    path it had (Keras names a variable when it is made)."""
    def build(k):
        L = k.layers

        class MyModel(k.Model):
            def __init__(self):
                super().__init__()
                self.d = L.Dense(3)
                self.blocks = [L.Dense(2), L.Dense(2)]

            def call(self, x):
                return self.blocks[1](self.blocks[0](self.d(x)))

        m = MyModel()
        m(np.zeros((1, 4), "float32"))
        out = [m.name] + [w.path for w in m.weights]
        s = k.Sequential([k.Input((4,)), L.Dense(2), L.Dense(1)])
        out += [s.name] + [w.path for w in s.weights]
        d = L.Dense(2)
        d.build((None, 3))
        s2 = k.Sequential([d])
        s2.build((None, 3))
        out += [w.path for w in s2.weights]
        i = k.Input((3,))
        f = k.Model(i, L.Dense(1)(i))  # Sequential built a functional model: "functional_2"
        out += [f.name, L.Dense(1).name]

        class MyLayer(L.Layer):
            pass

        class MyDense(L.Dense):
            pass

        return out + [MyLayer().name, MyDense(2).name]

    _same(keras, build)


def test_weight_attributes_and_build(keras):
    """dense.kernel, bn.moving_mean, embedding.embeddings, lstm.cell.kernel and
    a Bidirectional's forward_layer.cell.kernel are the layer's Variables;
    layer.build(shape) on a built-in layer makes its weights (get_weights,
    set_weights before any call)."""
    _fresh(keras)
    m = nn.Sequential([nn.Input((3, 2)), nn.Bidirectional(nn.LSTM(2, return_sequences=True)),
                       nn.TimeDistributed(nn.Dense(2)), nn.BatchNormalization(), nn.Flatten(),
                       nn.Dense(1)])
    bidi, td, bn, _, dense = m.layers
    assert dense.kernel is m.weights[-2] and dense.bias is m.weights[-1]
    assert dense.kernel.path == "sequential/dense_1/kernel"
    assert bidi.forward_layer.cell.kernel.path == "sequential/bidirectional/forward_lstm/" \
                                                 "lstm_cell/kernel"
    assert bidi.backward_layer.cell.bias is bidi._variable("backward_bias")
    assert td.layer.kernel is td._variable("kernel")
    dense.kernel.assign(np.full((6, 1), 0.5, np.float32))
    np.testing.assert_array_equal(m.get_weights()[-2], np.full((6, 1), 0.5, np.float32))
    assert bn.moving_variance.path.endswith("batch_normalization/moving_variance")
    with pytest.raises(AttributeError, match="has no attribute 'kernal'"):
        dense.kernal  # noqa: B018 - the error is the point
    with pytest.raises(AttributeError, match=r"\[Dense\] layer .* has never been called"):
        nn.Dense(2).output_shape  # noqa: B018 - a property's own error, not a generic one

    a, b = nn.Dense(4, name="a"), nn.Dense(4, name="b")
    a.build((None, 3))
    b.build((None, 3))
    assert a.built and [w.shape for w in a.get_weights()] == [(3, 4), (4,)]
    b.set_weights(a.get_weights())
    x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(b(x)), np.asarray(a(x)))
    with pytest.raises(ValueError, match=r"\[Dense.build\] input_shape must include the batch"):
        nn.Dense(2).build(())
