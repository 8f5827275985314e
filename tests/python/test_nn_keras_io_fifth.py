"""Keras features met by the keras-io scripts of issue 30's fifth pass (tests/keras_io:
siamese_contrastive, involution, cct, switch transformer, neural machine translation),
against Keras 3 on JAX with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn


def _siamese_tower(lib, w):
    inp = lib.Input((6, 6, 1))
    x = lib.layers.Conv2D(2, 3, activation="tanh")(inp)
    x = lib.layers.Flatten()(x)
    out = lib.layers.Dense(1)(x)
    m = lib.Model(inp, out)
    m.set_weights(w)
    return m


def test_inputs_one_axis_short_of_an_input_ending_in_1_as_keras(keras):
    """MNIST's (n, 28, 28) into Input((28, 28, 1)): Keras's functional models add the
    axis of 1 (and drop one too many); predict, evaluate and fit as on the full rank."""
    rng = np.random.default_rng(0)
    w = [rng.normal(size=(3, 3, 1, 2)), np.zeros(2), rng.normal(size=(32, 1)), np.zeros(1)]
    w = [a.astype("float32") for a in w]
    x = rng.normal(size=(16, 6, 6)).astype("float32")
    y = rng.normal(size=(16, 1)).astype("float32")
    got = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        m = _siamese_tower(lib, w)
        m.compile(lib.optimizers.SGD(0.05), loss="mse")
        p_short = np.asarray(m.predict(x, verbose=0))
        p_full = np.asarray(m.predict(x[..., None], verbose=0))
        np.testing.assert_allclose(p_short, p_full, rtol=1e-6)
        h = m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        got[name] = (p_short, h.history["loss"], m.evaluate(x, y, verbose=0))
    np.testing.assert_allclose(got["tessera"][0], got["keras"][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["tessera"][1], got["keras"][1], rtol=1e-4)
    np.testing.assert_allclose(got["tessera"][2], got["keras"][2], rtol=1e-4)
    # one axis too many, of size 1: dropped (Input((3,)) given (n, 3, 1))
    inp = tn.Input((3,))
    m = tn.Model(inp, tn.layers.Dense(2)(inp))
    x3 = rng.normal(size=(4, 3)).astype("float32")
    np.testing.assert_allclose(m.predict(x3[..., None], verbose=0), m.predict(x3, verbose=0))
    # any other rank is still refused, naming the shapes
    with pytest.raises(ValueError, match=r"samples of shape \(6,\), but the model expects "
                                         r"\(6, 6, 1\)"):
        _siamese_tower(tn, w).predict(np.zeros((2, 6), "float32"), verbose=0)


def _pairs_model(lib, w):
    """A model whose outputs are a list of (output, kernel) pairs, as involution's
    visualisation model: [layer.output for each layer] of layers returning tuples."""
    class Pair(lib.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.dense = lib.layers.Dense(3)

        def call(self, x):
            y = self.dense(x)
            return y, y * 2.0

    inp = lib.Input((4,))
    a = Pair(name="p1")
    b = Pair(name="p2")
    y1, _ = a(inp)
    b(y1)
    m = lib.Model(inp, [a.output, b.output])
    m.set_weights(w)
    return m


def test_nested_outputs_come_back_in_their_structure_as_keras(keras, tmp_path):
    rng = np.random.default_rng(1)
    w = [rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=(3, 3)),
         rng.normal(size=3)]
    w = [a.astype("float32") for a in w]
    x = rng.normal(size=(5, 4)).astype("float32")
    ours, theirs = _pairs_model(tn, w), _pairs_model(keras, w)
    # (Keras's layer.output of a layer returning a tuple is a list)
    assert [type(o) for o in ours.output] == [type(o) for o in theirs.output] == [list, list]
    got, want = ours.predict(x, verbose=0), theirs.predict(x, verbose=0)
    called = ours(x)
    for g in (got, called):
        assert type(g) is type(want) is list and len(g) == len(want) == 2
        for gp, wp in zip(g, want):
            assert type(gp) is type(wp) and len(gp) == len(wp) == 2
            for a, b in zip(gp, wp):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    # saved and loaded: the same nesting 
    path = str(tmp_path / "pairs.keras")
    ours.save(path)
    back = tn.models.load_model(path, custom_objects={"Pair": type(ours.get_layer("p1"))})
    again = back.predict(x, verbose=0)
    assert len(again) == 2 and all(len(p) == 2 for p in again)
    for gp, ap in zip(got, again):
        for a, b in zip(gp, ap):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_layer_returning_a_nested_structure_as_keras(keras):
    def build(lib):
        class Nest(lib.layers.Layer):
            def call(self, x):
                return x + 1.0, [x * 2.0, (x * 3.0, x - 1.0)]

        inp = lib.Input((3,))
        a, (b, (c, d)) = Nest()(inp)
        return lib.Model(inp, [a + b, c * d])

    x = np.arange(6, dtype="float32").reshape(2, 3)
    for g, w in zip(build(tn).predict(x, verbose=0), build(keras).predict(x, verbose=0)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6)


def _tokens_model(lib, w):
    """The switch transformer's pattern: a layer reshaping its (batch, 4, 3) input to
    the fixed (8, 3) tokens of a batch of 2, a Dense inside a traced call on them,
    and back to (batch, 4, 3) by the symbolic batch size."""
    ops = lib.ops

    class Tokens(lib.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.inner = lib.layers.Dense(3)

        def call(self, x):
            batch = ops.shape(x)[0]
            t = ops.reshape(x, [8, 3])
            t = self.inner(t)
            return ops.reshape(t, [batch, 4, 3])

    inp = lib.Input((4, 3))
    x = Tokens()(inp)
    out = lib.layers.Dense(1)(lib.layers.Flatten()(x))
    m = lib.Model(inp, out)
    m.set_weights(w)
    return m


def test_reshape_to_a_fixed_shape_runs_and_validates_as_keras(keras):
    rng = np.random.default_rng(3)
    w = [rng.normal(size=(3, 3)) * 0.3, np.zeros(3), rng.normal(size=(12, 1)) * 0.3, np.zeros(1)]
    w = [a.astype("float32") for a in w]
    x = rng.normal(size=(8, 4, 3)).astype("float32")
    y = rng.normal(size=(8, 1)).astype("float32")
    xv = rng.normal(size=(4, 4, 3)).astype("float32")
    yv = rng.normal(size=(4, 1)).astype("float32")
    runs = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        m = _tokens_model(lib, w)
        assert tuple(m.layers[1].output.shape) == (None, 4, 3)
        m.compile(lib.optimizers.SGD(0.01), loss="mse")
        # validation in batches of fit's batch_size (2), as the reshape needs
        h = m.fit(x, y, batch_size=2, epochs=2, shuffle=False, verbose=0,
                  validation_data=(xv, yv))
        runs[name] = (h.history, np.asarray(m.predict(xv, batch_size=2, verbose=0)))
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(runs["tessera"][0][key], runs["keras"][0][key], rtol=1e-4)
    np.testing.assert_allclose(runs["tessera"][1], runs["keras"][1], rtol=1e-4, atol=1e-6)
    # a batch the reshape cannot take fails when it runs, naming the reshape
    m = _tokens_model(tn, w)
    with pytest.raises(ValueError, match=r"\[reshape\] cannot reshape array of size 36 into "
                                         r"shape \(8, 3\)"):
        m.predict(x[:3], batch_size=3, verbose=0)


def test_a_reshape_no_batch_can_satisfy_is_refused_when_made():
    inp = tn.Input((6,))
    with pytest.raises(ValueError, match=r"\[reshape\].*symbolic operation reshape on shapes "
                                         r"\[\(None, 6\)\]"):
        tn.ops.reshape(inp, [4, 5])


def _translator(lib, tile, rate=0.5):
    """neural_machine_translation_with_transformer's model, small: PositionalEmbedding's
    compute_mask, an encoder and a decoder taking the masks in `mask=`, a causal mask made
    with ops (tiled by the symbolic batch size, or broadcast to it), the decoder as a
    nested model of two Inputs."""
    ops, layers = lib.ops, lib.layers

    class Encoder(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.attention = layers.MultiHeadAttention(num_heads=2, key_dim=4)
            self.proj = lib.Sequential([layers.Dense(8, activation="relu"), layers.Dense(4)])
            self.norm_1 = layers.LayerNormalization()
            self.norm_2 = layers.LayerNormalization()
            self.supports_masking = True

        def call(self, inputs, mask=None):
            padding_mask = None if mask is None else ops.cast(mask[:, None, :], "int32")
            a = self.attention(query=inputs, value=inputs, key=inputs,
                               attention_mask=padding_mask)
            p = self.norm_1(inputs + a)
            return self.norm_2(p + self.proj(p))

    class Embed(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.tokens = layers.Embedding(12, 4)
            self.positions = layers.Embedding(6, 4)

        def call(self, inputs):
            positions = ops.arange(0, ops.shape(inputs)[-1], 1)
            return self.tokens(inputs) + self.positions(positions)

        def compute_mask(self, inputs, mask=None):
            return ops.not_equal(inputs, 0)

    class Decoder(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.attention_1 = layers.MultiHeadAttention(num_heads=2, key_dim=4)
            self.attention_2 = layers.MultiHeadAttention(num_heads=2, key_dim=4)
            self.proj = lib.Sequential([layers.Dense(8, activation="relu"), layers.Dense(4)])
            self.norms = [layers.LayerNormalization() for _ in range(3)]
            self.supports_masking = True

        def call(self, inputs, encoder_outputs, mask=None):
            causal_mask = self.causal(inputs)
            if mask is not None:
                padding_mask = ops.cast(mask[:, None, :], dtype="int32")
                padding_mask = ops.minimum(padding_mask, causal_mask)
            else:
                padding_mask = None
            a = self.attention_1(query=inputs, value=inputs, key=inputs,
                                 attention_mask=causal_mask)
            o1 = self.norms[0](inputs + a)
            a = self.attention_2(query=o1, value=encoder_outputs, key=encoder_outputs,
                                 attention_mask=padding_mask)
            o2 = self.norms[1](o1 + a)
            return self.norms[2](o2 + self.proj(o2))

        def causal(self, inputs):
            shape = ops.shape(inputs)
            batch_size, length = shape[0], shape[1]
            i = ops.arange(length)[:, None]
            j = ops.arange(length)
            mask = ops.reshape(ops.cast(i >= j, dtype="int32"), (1, length, length))
            if not tile:
                return ops.broadcast_to(mask, (batch_size, length, length))
            mult = ops.concatenate([ops.expand_dims(batch_size, -1),
                                    ops.convert_to_tensor([1, 1])], axis=0)
            return ops.tile(mask, mult)

    enc_in = lib.Input(shape=(None,), dtype="int64", name="encoder_inputs")
    enc_out = Encoder()(Embed()(enc_in))
    dec_in = lib.Input(shape=(None,), dtype="int64", name="decoder_inputs")
    state_in = lib.Input(shape=(None, 4), name="decoder_state_inputs")
    x = Decoder()(Embed()(dec_in), state_in)
    x = layers.Dropout(rate)(x)
    decoder = lib.Model([dec_in, state_in], layers.Dense(12, activation="softmax")(x))
    return lib.Model([enc_in, dec_in], decoder([dec_in, enc_out]))


def _padded(rng, n, length):
    out = np.zeros((n, length), "int64")
    for r in range(n):
        k = rng.integers(2, length + 1)
        out[r, :k] = rng.integers(1, 12, k)
    return out


def test_translator_masks_as_keras(keras):
    """Same weights, padded sentences: the outputs, the masked loss and accuracy as
    Keras's: the decoder's call(inputs, encoder_outputs, mask=None)
    gets no mask (two tensor arguments), and the padding mask its nested model computes
    reaches the outer output (the loss and accuracy skip the padding)."""
    rng = np.random.default_rng(4)
    enc, dec = _padded(rng, 16, 6), _padded(rng, 16, 6)  # (one length, as the example)
    y = np.concatenate([dec[:, 1:], np.zeros((16, 1), "int64")], axis=1)
    ours = _translator(tn, tile=False, rate=0.0)  # (no dropout: the same steps)
    theirs = _translator(keras, tile=False, rate=0.0)
    theirs.set_weights(ours.get_weights())
    np.testing.assert_allclose(ours.predict([enc, dec], verbose=0),
                               np.asarray(theirs([enc, dec])), rtol=1e-4, atol=1e-6)
    hist = []
    for m, lib in ((ours, tn), (theirs, keras)):
        m.compile(lib.optimizers.RMSprop(0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
        hist.append(m.evaluate([enc, dec], y, batch_size=8, verbose=0))
    # the loss and accuracy over the unpadded steps (a fit of it: the script, and
    # run_all.py --compare's table in the README)
    np.testing.assert_allclose(hist[0], hist[1], rtol=1e-4)


def test_translator_causal_mask_tiled_by_the_batch_size():
    """The example's ops.tile(mask, [batch, 1, 1]) (repeats from the symbolic batch size,
    which Keras on JAX cannot trace) gives what broadcasting does."""
    rng = np.random.default_rng(5)
    enc, dec = _padded(rng, 4, 6), _padded(rng, 4, 6)
    tiled, broadcast = _translator(tn, tile=True), _translator(tn, tile=False)
    broadcast.set_weights(tiled.get_weights())
    np.testing.assert_allclose(tiled.predict([enc, dec], verbose=0),
                               broadcast.predict([enc, dec], verbose=0), rtol=1e-6)


def test_function_loss_gets_labels_of_the_outputs_rank_and_binary_accuracy(keras):
    """siamese_contrastive: a contrastive loss function on (n,) labels of a (n, 1)
    sigmoid output (Keras expands the labels to (n, 1); broadcast, the loss would be
    over (n, n)), and "accuracy" of a (n, 1) output with a user's loss is binary."""
    rng = np.random.default_rng(6)
    w = [(rng.normal(size=(4, 1)) * 0.5).astype("float32"), np.zeros(1, "float32")]
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("float32")  # (32,)

    def contrastive_loss(y_true, y_pred):
        return (1 - y_true) * y_pred ** 2 + y_true * (1 - y_pred) ** 2

    runs = []
    for lib in (tn, keras):
        inp = lib.Input((4,))
        m = lib.Model(inp, lib.layers.Dense(1, activation="sigmoid")(inp))
        m.set_weights(w)
        m.compile(lib.optimizers.SGD(0.5), loss=contrastive_loss, metrics=["accuracy"])
        h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        runs.append((h.history, m.evaluate(x, y, verbose=0)))
    for key in ("loss", "accuracy"):
        np.testing.assert_allclose(runs[0][0][key], runs[1][0][key], rtol=1e-4)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-4)


def test_named_mask_arguments_of_a_call_with_two_tensors_as_keras(keras):
    """Keras 3 fills `a_mask`/`b_mask` of call(a, b, a_mask=None, b_mask=None, mask=None)
    with each argument's mask and leaves `mask` None (two tensor arguments)."""
    def build(lib):
        ops = lib.ops

        class Two(lib.layers.Layer):
            def call(self, a, b, a_mask=None, b_mask=None, mask=None):
                assert mask is None
                am = ops.cast(a_mask, "float32")[..., None]
                bm = ops.cast(b_mask, "float32")[..., None]
                return a * am + b * bm

        ia, ib = lib.Input((None,), dtype="int32"), lib.Input((None,), dtype="int32")
        emb = lib.layers.Embedding(5, 2, mask_zero=True,
                                   embeddings_initializer=lib.initializers.Constant(0.5))
        return lib.Model([ia, ib], Two()(emb(ia), emb(ib)))

    a = np.array([[1, 2, 0], [3, 0, 0]], "int32")
    b = np.array([[0, 4, 4], [1, 1, 0]], "int32")
    np.testing.assert_allclose(build(tn).predict([a, b], verbose=0),
                               np.asarray(build(keras).predict([a, b], verbose=0)), rtol=1e-6)
