"""Keras features met by the keras-io scripts of issue 30's seventh pass (tests/keras_io:
attention_mil_classification, token_learner, ...), against Keras 3 on JAX with the same
weights and data."""

import numpy as np
import pytest

import tessera.nn as tn


def _conv_layers(lib):
    L = lib.layers
    return [(L.Conv2D(2, 3, padding="VALID"), (8, 8, 3)),
            (L.Conv1D(2, 3, padding="Causal"), (8, 3)),
            (L.Conv2DTranspose(2, 3, strides=2, padding="Same"), (8, 8, 3)),
            (L.SeparableConv2D(2, 3, padding="SAME"), (8, 8, 3)),
            (L.DepthwiseConv2D(3, padding="SAME"), (8, 8, 3)),
            (L.ConvLSTM2D(2, 3, padding="SAME"), (4, 8, 8, 3))]


def test_conv_padding_in_any_case_as_keras(keras):
    """token_learner's patch projection: Conv2D(..., padding="VALID"), TensorFlow's spelling."""
    x8 = np.random.default_rng(0).normal(size=(2, 8, 8, 3)).astype("float32")
    for (kl, shape), (tl, _) in zip(_conv_layers(keras), _conv_layers(tn)):
        km = keras.Sequential([keras.Input(shape), kl])
        tm = tn.Sequential([tn.Input(shape), tl])
        assert tm.output_shape == km.output_shape, type(tl).__name__
        assert tl.get_config()["padding"] == kl.get_config()["padding"], type(tl).__name__
        tm.set_weights([np.asarray(w) for w in km.get_weights()])
        x = x8 if len(shape) == 3 else x8[:, :, 0] if len(shape) == 2 else \
            np.stack([x8] * 4, axis=1)
        np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0),
                                   rtol=1e-4, atol=1e-5, err_msg=type(tl).__name__)
    # pooling keeps Keras's strict check, and an unknown padding names the op
    with pytest.raises(ValueError, match=r"\[Conv2D\] padding must be one of \['valid', 'same'\], "
                                         r"got 'full'"):
        tn.layers.Conv2D(2, 3, padding="full")
    with pytest.raises(ValueError, match=r"\[Conv2D\] padding must be one of"):
        tn.layers.Conv2D(2, 3, padding="CAUSAL")


def _names_after_attention(lib):
    lib.backend.clear_session()
    L = lib.layers
    x = lib.Input((6, 8))
    h = L.Dropout(0.1)(x)
    h = L.MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.1)(h, h)
    h = L.Dropout(0.1)(h)
    h = L.Softmax()(h)
    g = L.GroupQueryAttention(head_dim=4, num_query_heads=2, num_key_value_heads=1)(h, h)
    g = L.Dropout(0.1)(g)
    g = L.Softmax()(g)
    model = lib.Model(x, g)
    return [layer.name for layer in model.layers]


def test_attention_layers_take_the_names_keras_draws_for_their_sublayers(keras):
    """Keras's MultiHeadAttention and GroupQueryAttention make a Softmax and a Dropout when
    built: the Dropout after token_learner's first attention is dropout_2 under Keras."""
    want = _names_after_attention(keras)
    assert "dropout_2" in want  # the oracle draws the names; the test can fail
    assert _names_after_attention(tn) == want


def _unseeded_draws(lib):
    lib.utils.set_random_seed(812)
    out = []
    for cls in [lib.initializers.RandomNormal, lib.initializers.RandomUniform,
                lib.initializers.TruncatedNormal, lib.initializers.GlorotNormal,
                lib.initializers.HeUniform, lib.initializers.Orthogonal]:
        one, other = cls(), cls()
        a, b, c = (np.asarray(one((3, 5))), np.asarray(one((3, 5))),
                   np.asarray(other((3, 5))))
        out.append((cls.__name__, bool(np.array_equal(a, b)), bool(np.array_equal(a, c)),
                    one.get_config()["seed"]))
    return out


def test_unseeded_initializer_gives_the_same_values_each_call_as_keras(keras):
    """reproducibility_recipes: "an initializer seeded with an integer or None (unseeded)
    will produce the same random values across multiple calls" (Keras's documentation);
    tessera's drew anew at each call."""
    want = _unseeded_draws(keras)
    assert _unseeded_draws(tn) == want
    # and set_random_seed repeats an unseeded object's values (the recipe's second run)
    tn.utils.set_random_seed(812)
    first = tn.initializers.GlorotNormal()((3, 5))
    tn.utils.set_random_seed(812)
    np.testing.assert_array_equal(tn.initializers.GlorotNormal()((3, 5)), first)
    tn.utils.set_random_seed(813)
    assert not np.array_equal(tn.initializers.GlorotNormal()((3, 5)), first)
    # deterministic initializers draw nothing: the global stream is left as it was
    tn.utils.set_random_seed(812)
    tn.initializers.Zeros()((2,)), tn.initializers.Identity()((2, 2))
    np.testing.assert_array_equal(tn.initializers.GlorotNormal()((3, 5)), first)


class _GAN(tn.Model):
    """dcgan_overriding_train_step's model: two sub-models, each trained in the one step by
    its own tape and optimizer."""

    def __init__(self, discriminator, generator):
        super().__init__()
        self.discriminator, self.generator = discriminator, generator

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn

    def train_step(self, real):
        n = tn.ops.shape(real)[0]
        fake = self.generator(tn.random.normal((n, 2), seed=1))
        with tn.GradientTape() as tape:
            d_loss = self.loss_fn(tn.ops.zeros((n, 1)), self.discriminator(real + fake))
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        return {"d_loss": d_loss}


class _GANWithCall(_GAN):
    def call(self, x):
        return self.discriminator(x)


def _gan(cls):
    d = tn.Sequential([tn.Input((4,)), tn.layers.Dense(1)])
    g = tn.Sequential([tn.Input((2,)), tn.layers.Dense(4)])
    gan = cls(d, g)
    gan.compile(tn.optimizers.Adam(), tn.optimizers.Adam(),
                tn.losses.BinaryCrossentropy(from_logits=True))
    return gan


def test_a_gan_train_step_trains_its_discriminator():
    """dcgan_overriding_train_step's form (a model with no call, its sub-models trained by
    tapes and optimizers of their own) fits (tape_steps.py; tests/python/
    test_nn_gan_train_step.py compares it with Keras); a model with a call of its own traces
    its train_step around it, with the compiled optimizer only: another optimizer is refused
    by name."""
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    gan = _gan(_GAN)
    before = [w.copy() for w in gan.discriminator.get_weights()]
    history = gan.fit(x, epochs=1, batch_size=8, verbose=0)
    assert list(history.history) == ["d_loss"]
    assert all(not np.array_equal(a, b) for a, b in zip(before, gan.discriminator.get_weights()))
    with pytest.raises(NotImplementedError, match=r"\[Optimizer.apply_gradients\] only the "
                                                  r"model's compiled optimizer .*a GAN's.* "
                                                  r"\(at .*test_nn_keras_io_seventh.py:\d+\)"):
        _gan(_GANWithCall).fit(x, epochs=1, batch_size=8, verbose=0)


def _mha_rank4(lib, dropout, cross):
    q = lib.Input((4, 6, 8))
    v = lib.Input((3, 5, 8)) if cross else q
    mha = lib.layers.MultiHeadAttention(num_heads=2, key_dim=8, dropout=dropout)
    y = mha(q, v)
    return lib.Model([q, v] if cross else q, y)


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_attention_over_several_axes_as_keras(keras, cross):
    """MobileViT's transformer reads (batch, patch area, patches, features): Keras's default
    attention_axes attend over both axes at once; tessera refused inputs of rank 4."""
    rng = np.random.default_rng(0)
    xq = rng.normal(size=(3, 4, 6, 8)).astype("float32")
    xv = rng.normal(size=(3, 3, 5, 8)).astype("float32")
    km, tm = _mha_rank4(keras, 0.1, cross), _mha_rank4(tn, 0.1, cross)
    assert tm.output_shape == km.output_shape
    assert [w.shape for w in tm.get_weights()] == [tuple(w.shape) for w in km.get_weights()]
    tm.set_weights([np.asarray(w) for w in km.get_weights()])
    x = [xq, xv] if cross else xq
    np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0),
                               rtol=1e-4, atol=1e-5)
    # the gradients agree too: one step of SGD from the same weights
    y = rng.normal(size=(3, 4, 6, 8)).astype("float32")
    km_no_drop, tm_no_drop = _mha_rank4(keras, 0.0, cross), _mha_rank4(tn, 0.0, cross)
    tm_no_drop.set_weights([np.asarray(w) for w in km_no_drop.get_weights()])
    for m in (km_no_drop, tm_no_drop):
        m.compile(optimizer="sgd", loss="mse")
        m.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(tm_no_drop.get_weights(), km_no_drop.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)


def test_multi_head_attention_over_several_axes_refuses_masks_by_name():
    q = tn.Input((4, 6, 8))
    with pytest.raises(NotImplementedError, match=r"\[MultiHeadAttention\] on inputs of rank 4, "
                                                  r"masks and returned scores are not supported"):
        tn.layers.MultiHeadAttention(num_heads=2, key_dim=8)(q, q, use_causal_mask=True)
    with pytest.raises(ValueError, match=r"\[MultiHeadAttention\] with more than one axis "
                                         r"between the batch and the features"):
        tn.layers.MultiHeadAttention(num_heads=2, key_dim=8)(q, tn.Input((5, 8)))


def _activation_names_and_reload(lib, path):
    acts = [lib.activations.relu, lib.activations.swish, lib.ops.gelu, lib.activations.gelu,
            "gelu", lib.ops.relu, lib.activations.hard_sigmoid]
    names = [lib.layers.Dense(2, activation=a).get_config()["activation"] for a in acts]
    names.append(lib.layers.LSTM(2, recurrent_activation=lib.activations.hard_sigmoid)
                 .get_config()["recurrent_activation"])
    model = lib.Sequential([lib.Input((3,)),
                            lib.layers.Dense(4, activation=lib.activations.swish),
                            lib.layers.Dense(2, activation=lib.ops.gelu)])
    model.save(path)
    again = lib.models.load_model(path)
    return names, model, again


def test_activation_functions_are_named_in_configs_and_saved_as_keras(keras, tmp_path):
    """mobilevit's Conv2D(activation=keras.activations.swish) could not be saved ("cannot save
    the function 'silu'"); Keras's configs name built-in activations (and ops of the same
    name) given as functions."""
    k_names, km, k_again = _activation_names_and_reload(keras, str(tmp_path / "k.keras"))
    t_names, tm, t_again = _activation_names_and_reload(tn, str(tmp_path / "t.keras"))
    assert t_names == k_names
    tm.set_weights([np.asarray(w) for w in km.get_weights()])
    t_again.set_weights([np.asarray(w) for w in km.get_weights()])
    x = np.random.default_rng(0).normal(size=(5, 3)).astype("float32")
    np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0), rtol=1e-5,
                               atol=1e-6)
    # reloaded, ops.gelu (tanh approximation) becomes activations.gelu (exact) under both
    np.testing.assert_allclose(t_again.predict(x, verbose=0), k_again.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)
    # a user's function stays a function (saving it is refused by name, as before)
    assert callable(tn.layers.Dense(2, activation=lambda v: v).get_config()["activation"])


def _graph_lstm(lib):
    """timeseries_traffic_forecasting's LSTMGC, small: the batch axis moved inward by a
    transpose, neighbours taken along axis 0 and summed by segment, (batch * nodes) sequences
    into an LSTM, and back."""
    ops, layers = lib.ops, lib.layers
    edges = (np.array([0, 0, 1, 2, 3, 3]), np.array([1, 2, 0, 3, 1, 2]))

    class GraphLSTM(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.weight = self.add_weight(shape=(1, 3), initializer="glorot_uniform",
                                          name="graph_weight")
            self.lstm = layers.LSTM(5, activation="relu")
            self.dense = layers.Dense(2)

        def call(self, inputs):
            x = ops.transpose(inputs, [2, 0, 1, 3])  # (nodes, batch, steps, 1)
            nodes = ops.matmul(x, self.weight)
            msgs = ops.segment_sum(ops.take(x, edges[1], axis=0), edges[0], num_segments=4)
            h = ops.concatenate([nodes, ops.matmul(msgs, self.weight)], axis=-1)
            shape = ops.shape(h)
            h = ops.reshape(h, (shape[1] * shape[0], shape[2], shape[3]))
            out = ops.reshape(self.dense(self.lstm(h)), (shape[0], shape[1], 2))
            return ops.transpose(out, [1, 2, 0])  # (batch, 2, nodes)

    inputs = layers.Input((6, 4, 1))
    return lib.Model(inputs, GraphLSTM()(inputs))


def test_graph_lstm_over_a_transposed_batch_as_keras(keras):
    """timeseries_traffic_forecasting ran as written and in line; this keeps its layer's
    outputs and one training step equal to Keras's with the same weights (batches of 16 over
    37 samples: the last batch shorter)."""
    km, tm = _graph_lstm(keras), _graph_lstm(tn)
    assert tm.output_shape == km.output_shape
    tm.set_weights([np.asarray(w) for w in km.get_weights()])
    rng = np.random.default_rng(1)
    x = rng.normal(size=(37, 6, 4, 1)).astype("float32")
    np.testing.assert_allclose(tm.predict(x, batch_size=16, verbose=0),
                               km.predict(x, batch_size=16, verbose=0), rtol=1e-4, atol=1e-5)
    y = rng.normal(size=(37, 2, 4)).astype("float32")
    for m in (km, tm):
        m.compile(optimizer="sgd", loss="mse")
        m.fit(x, y, batch_size=37, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)
