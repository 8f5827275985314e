"""Keras features met by the keras-io scripts of issue 30's eighth pass (tests/keras_io: stft,
perceiver_image_classification, swin_transformers, approximating_non_function_mappings,
gradient_centralization, wide_deep_cross_networks), against Keras 3 on JAX with the same
weights and data."""

import numpy as np
import pytest

import tessera.nn as tn

RNG = np.random.default_rng(0)


def _same_weights(tm, km, scale=0.3):
    """Keras's model and tessera's given the same random weights (in Keras's order)."""
    rng = np.random.default_rng(1)
    ws = [(rng.normal(size=np.shape(w)) * scale).astype(np.asarray(w).dtype)
          for w in km.get_weights()]
    km.set_weights(ws)
    tm.set_weights(ws)


# ------------------------------------------------------------ stft: signals of unknown length
def _stft_models(lib):
    L = lib.layers
    one_d = lib.Sequential([L.InputLayer((None, 1)),
                            L.STFTSpectrogram(mode="log", frame_length=32, frame_step=12,
                                              trainable=False),
                            L.Conv1D(3, 4, activation="relu"), L.GlobalMaxPooling1D(),
                            L.Dense(2)])
    x = lib.Input((None, 1))
    specs = [L.STFTSpectrogram(mode="log", frame_length=f, frame_step=12, fft_length=64,
                               padding="same", expand_dims=True)(x) for f in (24, 32)]
    two_d = lib.Model(x, L.GlobalAveragePooling2D()(L.Conv2D(2, 3)(L.Concatenate()(specs))))
    return one_d, two_d


def test_stft_spectrogram_takes_signals_of_unknown_length_as_keras(keras):
    """stft's Sequential([InputLayer((None, 1)), STFTSpectrogram(...)]) and its model of
    three STFTSpectrograms on Input((None, 1)): refused by name before; now the shapes and
    the outputs, for two lengths, are Keras's."""
    for (tm, km) in zip(_stft_models(tn), _stft_models(keras)):
        assert tm.output_shape == km.output_shape
        _same_weights(tm, km, 0.2)
        for length in (300, 421):
            x = RNG.normal(size=(3, length, 1)).astype("float32")
            np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0),
                                       rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_stft_spectrogram_shapes_of_unknown_length_are_keras(keras, data_format):
    """Every mode and layout on a signal of unknown length: Keras's symbolic shapes, and
    the values of a length met."""
    shape = (None, 2) if data_format == "channels_last" else (2, None)
    x = RNG.normal(size=(2, 200, 2) if data_format == "channels_last" else (2, 2, 200))
    for mode in ("log", "stft", "magnitude"):
        for expand_dims in (False, True):
            kw = dict(mode=mode, frame_length=16, frame_step=8, fft_length=32,
                      expand_dims=expand_dims, data_format=data_format, padding="same")
            tm = tn.Sequential([tn.Input(shape), tn.layers.STFTSpectrogram(**kw)])
            km = keras.Sequential([keras.Input(shape), keras.layers.STFTSpectrogram(**kw)])
            assert tm.output_shape == km.output_shape, kw
            np.testing.assert_allclose(tm.predict(x.astype("float32"), verbose=0),
                                       km.predict(x.astype("float32"), verbose=0),
                                       rtol=2e-4, atol=2e-4, err_msg=str(kw))


def test_stft_spectrogram_eager_call_is_keras(keras):
    """stft's plots: the layer called on one signal, then NumPy's .T and concatenate."""
    wave = RNG.normal(size=(1, 400, 1)).astype("float32")
    for kwargs in (dict(mode="log", frame_length=40, frame_step=10, fft_length=64),
                   dict(mode="log", frame_length=20, frame_step=10, fft_length=64,
                        padding="same", expand_dims=True)):
        got = np.asarray(tn.layers.STFTSpectrogram(**kwargs)(wave))
        want = np.asarray(keras.layers.STFTSpectrogram(**kwargs)(wave))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------ perceiver
def _cross_attention(lib):
    L = lib.layers
    inputs = {"latent_array": L.Input(shape=(4, 8)), "data_array": L.Input(shape=(6, 8))}
    q = L.Dense(8)(L.LayerNormalization()(inputs["latent_array"]))
    kv = L.Dense(8)(inputs["data_array"])
    out = L.Add()([L.Attention(use_scale=True)([q, kv, kv]), q])
    return lib.Model(inputs=inputs, outputs=out)


def _perceiver_like(lib):
    ops = lib.ops

    class Tiny(lib.Model):
        def build(self, input_shape):
            self.latent = self.add_weight(shape=(4, 8), initializer="random_normal")
            self.embed = lib.layers.Dense(8)
            self.cross = _cross_attention(lib)
            self.head = lib.layers.Dense(3)
            super().build(input_shape)

        def call(self, x):
            inputs = {"latent_array": ops.expand_dims(self.latent, 0),
                      "data_array": self.embed(x)}
            for _ in range(2):  # the same module twice, as the perceiver's iterations
                inputs["latent_array"] = self.cross(inputs)
            return self.head(ops.mean(inputs["latent_array"], axis=1))

    return Tiny()


def test_model_of_a_dict_of_inputs_takes_a_dict_as_keras(keras):
    """perceiver's cross-attention module, a model of a dict of Inputs, called with a dict:
    'the model has 2 inputs, called with 1' before. Eagerly and in a traced call."""
    tm, km = _cross_attention(tn), _cross_attention(keras)
    _same_weights(tm, km)
    feed = {"latent_array": RNG.normal(size=(3, 4, 8)).astype("float32"),
            "data_array": RNG.normal(size=(3, 6, 8)).astype("float32")}
    np.testing.assert_allclose(np.asarray(tm(feed)), np.asarray(km(feed)), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(tm.predict(feed, verbose=0), km.predict(feed, verbose=0),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"the model's inputs are the dict keys "
                                         r"\['latent_array', 'data_array'\]; called with a "
                                         r"dict without \['data_array'\]"):
        tm({"latent_array": tn.Input((4, 8))})


def test_subclassed_models_own_weight_trains_as_keras(keras):
    """perceiver's latent array: add_weight on the subclassed model itself, broadcast from
    (1, 4, 8) against the batch; it stopped ('layer ... was not found when it was built').
    Listed first, trained as Keras trains it, the shared module's weights once."""
    x = RNG.normal(size=(16, 6, 2)).astype("float32")
    y = RNG.integers(0, 3, 16)
    tm, km = _perceiver_like(tn), _perceiver_like(keras)
    tm(x[:2]), km(x[:2])
    assert [np.shape(w) for w in tm.weights] == [np.shape(w) for w in km.weights]
    # its layers are its tracked sublayers, as Keras's (no InputLayer first)
    order = [[m.embed.name, m.cross.name, m.head.name] for m in (tm, km)]
    assert [[l.name for l in m.layers] for m in (tm, km)] == order
    assert tm.count_params() == km.count_params()
    _same_weights(tm, km)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.2),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True))
    ht = tm.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    hk = km.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ht, hk, rtol=1e-4)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


# ------------------------------------------------------------ swin
def _window_model(lib):
    ops, L = lib.ops, lib.layers

    class WindowAttention(L.Layer):
        def __init__(self, mask):
            super().__init__()
            self.mask = mask
            self.qkv = L.Dense(6)

        def call(self, x):
            _, n, c = x.shape
            qkv = ops.transpose(ops.reshape(self.qkv(x), (-1, n, 3, c)), (2, 0, 1, 3))
            attn = qkv[0] @ ops.transpose(qkv[1], (0, 2, 1))
            nw = self.mask.shape[0]  # the mask per window: needs the windows' count
            attn = ops.reshape(ops.reshape(attn, (-1, nw, n, n)) + self.mask, (-1, n, n))
            return ops.softmax(attn, axis=-1) @ qkv[2]

    class Block(L.Layer):
        def __init__(self):
            super().__init__()
            mask = np.zeros((4, 4, 4), "float32")
            mask[1:, 0, 1] = -100.0
            self.attn = WindowAttention(ops.convert_to_tensor(mask))

        def call(self, x):
            x = ops.reshape(x, (-1, 4, 2, 4, 2, 2))  # (batch, 8, 8, 2) in 2x2 windows
            windows = ops.reshape(ops.transpose(x, (0, 1, 3, 2, 4, 5)), (-1, 4, 2))
            out = self.attn(windows)  # (batch * 16 windows, 4, 2)
            out = ops.reshape(out, (-1, 4, 4, 2, 2, 2))
            out = ops.reshape(ops.transpose(out, (0, 1, 3, 2, 4, 5)), (-1, 8, 8, 2))
            return ops.roll(out, shift=[1, 1], axis=[1, 2])

    x = lib.Input((8, 8, 2))
    return lib.Model(x, Block()(x))


def test_layer_on_windows_of_the_batch_keeps_their_count_as_keras(keras):
    """swin's window attention is called on (batch * windows, tokens, channels) and reshapes
    its scores by the windows' count; the reshapes stopped on tessera's stand-in batches."""
    tm, km = _window_model(tn), _window_model(keras)
    assert tm.output_shape == km.output_shape
    _same_weights(tm, km)
    x = RNG.normal(size=(3, 8, 8, 2)).astype("float32")
    np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0), rtol=1e-4,
                               atol=1e-5)


# ------------------------------------------------------------ initial scales of attention
def _attention_kernels(lib):
    lib.utils.set_random_seed(3)
    L = lib.layers
    q = lib.Input((6, 32))
    mha = L.MultiHeadAttention(num_heads=2, key_dim=32)
    gqa = L.GroupQueryAttention(head_dim=16, num_query_heads=4, num_key_value_heads=2)
    ein = L.EinsumDense("abc,cde->abde", output_shape=(None, 4, 16), bias_axes="de")
    lib.Model(q, [mha(q, q), gqa(q, q), ein(q)])
    return {w.path.split("/", 1)[-1]: np.asarray(w) for layer in (mha, gqa, ein)
            for w in layer.weights if w.path.endswith("kernel")}


def test_attention_kernels_start_at_keras_scale(keras):
    """Keras 3.15's EinsumDense (and the attention layers' projections) take the kernel's
    fans from the einsum's input and output axes: a (32, 2, 32) query kernel has fan_in 32
    and fan_out 64, not Conv-style 64 and 1024. tessera's started 3.4x smaller (perceiver
    learned half as fast). Glorot uniform's bound: the largest values agree."""
    got, want = _attention_kernels(tn), _attention_kernels(keras)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].shape == want[name].shape, name
        bound = np.abs(want[name]).max()
        assert 0.9 * bound < np.abs(got[name]).max() <= bound * 1.01, name
        np.testing.assert_allclose(got[name].std(), want[name].std(), rtol=0.12, err_msg=name)


def test_variance_scaling_takes_keras_fan_axes(keras):
    for cls, kwargs in (("VarianceScaling", dict(scale=2.0, mode="fan_out",
                                                   distribution="uniform")),
                        ("GlorotUniform", {}), ("HeNormal", {}), ("LecunUniform", {})):
        axes = dict(input_axes=[0, 1], output_axes=[2])
        t = getattr(tn.initializers, cls)(**kwargs, **axes, seed=1)((6, 5, 40))
        k = np.asarray(getattr(keras.initializers, cls)(**kwargs, **axes, seed=1)((6, 5, 40)))
        np.testing.assert_allclose(np.abs(t).max(), np.abs(k).max(), rtol=0.1, err_msg=cls)
        np.testing.assert_allclose(t.std(), k.std(), rtol=0.1, err_msg=cls)
        again = tn.initializers.deserialize(tn.initializers.serialize(
            getattr(tn.initializers, cls)(**kwargs, **axes, seed=1)))
        np.testing.assert_array_equal(again((6, 5, 40)), t)
    with pytest.raises(TypeError, match=r"\[GlorotUniform\] input_axes must be None or a list "
                                        r"of ints"):
        tn.initializers.GlorotUniform(input_axes=["a"], output_axes=[1])
    with pytest.raises(ValueError, match=r"\[GlorotUniform\] input_axes \[0\] / output_axes "
                                         r"\[5\] do not fit a weight of shape \(2, 3\)"):
        tn.initializers.GlorotUniform(input_axes=[0], output_axes=[5])((2, 3))


# ------------------------------------------------------------ gradient centralization
def _gc_fit(lib):
    class GCRMSprop(lib.optimizers.RMSprop):
        def get_gradients(self, loss, params):  # Keras 2's hook: Keras 3 never calls it
            raise AssertionError("called")

    lib.utils.set_random_seed(0)
    m = lib.Sequential([lib.Input((6,)), lib.layers.Dense(4, activation="relu"),
                        lib.layers.Dense(1, activation="sigmoid")])
    ws = [np.random.default_rng(2).normal(size=np.shape(w)).astype("float32") * 0.5
          for w in m.get_weights()]
    m.set_weights(ws)
    m.compile(loss="binary_crossentropy", optimizer=GCRMSprop(learning_rate=1e-2),
              metrics=["accuracy"])
    x = np.random.default_rng(3).normal(size=(32, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("float32")
    return m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]


def test_optimizer_subclass_with_keras2_get_gradients_trains_as_keras(keras):
    """gradient_centralization's GCRMSprop overrides get_gradients, which Keras 3 does not
    call: it trains as RMSprop, under tessera as under Keras."""
    np.testing.assert_allclose(_gc_fit(tn), _gc_fit(keras), rtol=1e-4)
