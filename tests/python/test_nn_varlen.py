"""Variable-length axes (Input(shape=(None,))) and masks (Embedding's
mask_zero, Masking, masks flowing into recurrent layers, Bidirectional,
attention and pooling), against Keras 3 on JAX as the oracle: the same
weights (set_weights), the same padded batches, outputs compared."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn  # noqa: E402

RNG = np.random.default_rng(11)


def _padded(n, length, vocab=20, min_len=1):
    """n sequences of ids in [1, vocab) of random lengths, zero-padded to `length`."""
    x = np.zeros((n, length), dtype=np.int32)
    for i in range(n):
        k = int(RNG.integers(min_len, length + 1))
        x[i, :k] = RNG.integers(1, vocab, size=k)
    return x


def _random_weights(model, scale=0.4):
    model.set_weights([RNG.normal(size=w.shape).astype(np.float32) * scale
                       for w in model.get_weights()])


def _both(build):
    """The same model built by `build(lib)` in tessera and in Keras, with
    tessera's (random) weights copied into Keras's."""
    t = build(nn)
    k = build(keras)
    _random_weights(t)
    k.set_weights(t.get_weights())
    return t, k


def _rnn_model(lib, rnn, return_sequences=False):
    inp = lib.Input(shape=(None,), dtype="int32")
    h = lib.layers.Embedding(20, 6, mask_zero=True)(inp)
    h = getattr(lib.layers, rnn)(5, return_sequences=return_sequences)(h)
    return lib.Model(inp, lib.layers.Dense(3)(h))


@pytest.mark.parametrize("rnn, return_sequences", [("SimpleRNN", True), ("LSTM", False),
                                                   ("LSTM", True), ("GRU", False)])
def test_masked_rnn_matches_keras_at_two_lengths(rnn, return_sequences):
    t, k = _both(lambda lib: _rnn_model(lib, rnn, return_sequences))
    for length in (4, 9):
        x = _padded(6, length)
        got = t.predict(x, verbose=0)
        want = np.asarray(k(x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_padding_does_not_change_a_masked_rnn_output():
    t = _rnn_model(nn, "LSTM")
    _random_weights(t)
    x = _padded(5, 6)
    longer = np.concatenate([x, np.zeros((5, 7), np.int32)], axis=1)
    np.testing.assert_allclose(t.predict(x, verbose=0), t.predict(longer, verbose=0),
                               rtol=1e-5, atol=1e-6)
    # without the mask the padding does change it (so the check above can fail)
    inp = nn.Input(shape=(None,), dtype="int32")
    h = nn.layers.LSTM(5)(nn.layers.Embedding(20, 6)(inp))
    u = nn.Model(inp, nn.layers.Dense(3)(h))
    _random_weights(u)
    assert not np.allclose(u.predict(x, verbose=0), u.predict(longer, verbose=0), atol=1e-4)


def test_program_cache_compiles_once_per_length(capsys):
    t = _rnn_model(nn, "GRU")
    t.compile("adam", "mse")
    assert t.varlen_compiles == 0
    for length in (5, 7, 5, 7, 5):
        x = _padded(8, length)
        t.predict(x, verbose=0)
        t.fit(x, np.zeros((8, 3), np.float32), epochs=1, batch_size=4, verbose=0)
        t.evaluate(x, np.zeros((8, 3), np.float32), verbose=0)
    assert t.varlen_compiles == 2
    t.predict(_padded(2, 11), verbose=1)
    assert "new input shape [(None, 11)]" in capsys.readouterr().out
    assert t.varlen_compiles == 3
    # the graph as recorded (with the unknown axis) is in force again
    assert t._inputs[0].shape == (None, None)


def test_shape_cache_is_bounded(monkeypatch):
    monkeypatch.setenv("TESSERA_SHAPE_CACHE", "2")
    t = _rnn_model(nn, "SimpleRNN")
    for length in (3, 4, 5, 3):
        t.predict(_padded(2, length), verbose=0)
    # 3 was dropped (least recently used) when 5 came, so it is written again
    assert t.varlen_compiles == 4


def test_flatten_after_unknown_length_names_the_layer():
    inp = nn.Input(shape=(None, 4))
    with pytest.raises(ValueError, match=r"\[Flatten\] layer 'flat'.*unknown length"):
        nn.layers.Flatten(name="flat")(inp)


def test_dense_on_unknown_feature_axis_is_an_error():
    inp = nn.Input(shape=(3, None))
    with pytest.raises((ValueError, TypeError), match="Dense"):
        nn.layers.Dense(2, name="d")(inp)


def test_weights_of_unknown_length_are_refused_on_every_path():
    """Dense's kernel would depend on a None feature axis: its call, its
    build and a user's subclass calling super().call each say so, naming the
    layer and leaving it unbuilt (a later call on a known length works)."""
    inp = nn.Input(shape=(3, None))
    with pytest.raises(ValueError, match=r"\[Dense\] layer 'd1' called at .*kernel.*"
                                         r"unknown length"):
        nn.layers.Dense(2, name="d1")(inp)
    d2 = nn.layers.Dense(2, name="d2")
    with pytest.raises(ValueError, match=r"\[Dense\.build\] layer 'd2' for input_shape "
                                         r"\(None, 3, None\).*kernel.*unknown length"):
        d2.build((None, 3, None))
    assert not d2.built and d2.weights == []
    assert d2(nn.Input(shape=(3, 5))).shape == (None, 3, 2)

    class Scaled(nn.layers.Dense):
        def call(self, x):
            return super().call(x) * 2.0

    with pytest.raises(ValueError, match=r"\[Dense\] layer 's' on inputs of per-sample "
                                         r"shape \(3, None\).*kernel.*unknown length"):
        Scaled(2, name="s")(inp)


def test_input_with_batch_shape_none():
    inp = nn.Input(batch_shape=(None, None, 3))
    assert inp.shape == (None, None, 3)
    out = nn.layers.Dense(2)(inp)
    assert out.shape == (None, None, 2)
    m = nn.Model(inp, out)
    x = RNG.normal(size=(4, 6, 3)).astype(np.float32)
    w, b = m.get_weights()
    np.testing.assert_allclose(m.predict(x, verbose=0), x @ w + b, rtol=1e-5, atol=1e-6)
    y = RNG.normal(size=(4, 2, 3)).astype(np.float32)
    np.testing.assert_allclose(m.predict(y, verbose=0), y @ w + b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"\[predict\] x has samples of shape \(6, 4\)"):
        m.predict(RNG.normal(size=(4, 6, 4)), verbose=0)


@pytest.mark.parametrize("merge_mode, return_sequences", [
    ("concat", False), ("concat", True), ("sum", False), ("mul", True), ("ave", False),
    (None, True)])
def test_bidirectional_masked_matches_keras(merge_mode, return_sequences):
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 6, mask_zero=True)(inp)
        h = lib.layers.Bidirectional(lib.layers.LSTM(4, return_sequences=return_sequences),
                                     merge_mode=merge_mode)(h)
        return lib.Model(inp, h)

    t, k = _both(build)
    for length in (5, 8):
        x = _padded(5, length)
        got = t.predict(x, verbose=0)
        want = k(x)
        if merge_mode is None:
            assert len(got) == 2
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rnn", ["GRU", "SimpleRNN"])
def test_bidirectional_gru_simple_rnn_then_rnn_matches_keras(rnn):
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 6, mask_zero=True)(inp)
        h = lib.layers.Bidirectional(getattr(lib.layers, rnn)(4, return_sequences=True))(h)
        h = lib.layers.LSTM(3)(h)  # reads the mask the Bidirectional passes on
        return lib.Model(inp, h)

    t, k = _both(build)
    x = _padded(6, 7)
    np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-4, atol=1e-5)


def test_masking_layer_matches_keras():
    def build(lib):
        inp = lib.Input(shape=(None, 3))
        h = lib.layers.Masking(mask_value=-1.0)(inp)
        h = lib.layers.GRU(4, return_sequences=True)(h)
        return lib.Model(inp, h)

    t, k = _both(build)
    x = RNG.normal(size=(4, 6, 3)).astype(np.float32)
    x[0, 4:] = -1.0
    x[2, 1] = -1.0  # a masked step inside the sequence
    x[3, 2, 0] = -1.0  # one feature only: not masked
    np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-4, atol=1e-5)


def test_global_average_pooling_masked_mean_matches_keras():
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 5, mask_zero=True)(inp)
        h = lib.layers.Dense(4, activation="relu")(h)  # passes the mask on
        h = lib.layers.GlobalAveragePooling1D()(h)
        return lib.Model(inp, lib.layers.Dense(2)(h))

    t, k = _both(build)
    for length in (3, 10):
        x = _padded(5, length)
        np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("cells", ["LSTMCell", "GRUCell", "SimpleRNNCell", "stack"])
def test_rnn_of_cells_matches_keras(cells):
    def build(lib):
        L = lib.layers
        if cells == "stack":
            cell = [L.LSTMCell(4), L.GRUCell(3)]
        else:
            cell = getattr(L, cells)(4)
        inp = lib.Input(shape=(None,), dtype="int32")
        h = L.Embedding(20, 6, mask_zero=True)(inp)
        h = L.RNN(cell, return_sequences=True)(h)
        return lib.Model(inp, h)

    t, k = _both(build)
    x = _padded(5, 6)
    np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-4, atol=1e-5)


def test_time_distributed_matches_keras():
    def build(lib):
        inp = lib.Input(shape=(None, 4))
        h = lib.layers.TimeDistributed(lib.layers.Dense(3, activation="tanh"))(inp)
        return lib.Model(inp, h)

    t, k = _both(build)
    for length in (2, 5):
        x = RNG.normal(size=(3, length, 4)).astype(np.float32)
        np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("extra_mask", [False, True])
def test_masked_attention_matches_keras(causal, extra_mask):
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        ins = [inp]
        h = lib.layers.Embedding(20, 8, mask_zero=True)(inp)
        kw = {"use_causal_mask": causal}
        if extra_mask:
            am = lib.Input(shape=(None, None), dtype="bool")
            ins.append(am)
            kw["attention_mask"] = am
        a = lib.layers.MultiHeadAttention(2, 4)(h, h, **kw)
        return lib.Model(ins, a)

    t, k = _both(build)
    for length in (4, 7):
        x = _padded(4, length, min_len=2)
        x[0, :] = 0  # a sequence masked whole: no query attends
        args = [x]
        if extra_mask:
            args.append(RNG.random((4, length, length)) > 0.3)
        got = t.predict(args if extra_mask else x, verbose=0)
        want = np.asarray(k(args if extra_mask else x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_attention_key_and_query_masks_from_different_inputs_match_keras():
    def build(lib):
        q_in = lib.Input(shape=(None,), dtype="int32")
        v_in = lib.Input(shape=(None,), dtype="int32")
        q = lib.layers.Embedding(20, 8, mask_zero=True)(q_in)
        v = lib.layers.Embedding(20, 8, mask_zero=True)(v_in)
        a = lib.layers.MultiHeadAttention(2, 4)(q, v)
        return lib.Model([q_in, v_in], lib.layers.GlobalAveragePooling1D()(a))

    t, k = _both(build)
    xq, xv = _padded(5, 3), _padded(5, 6)
    np.testing.assert_allclose(t.predict([xq, xv], verbose=0), np.asarray(k([xq, xv])),
                               rtol=1e-4, atol=1e-5)


def test_masked_attention_scores_match_keras():
    """With return_attention_scores Keras takes its masked-softmax path: a
    query masked whole attends to nothing (zeros), unlike the fused path."""
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 8, mask_zero=True)(inp)
        a, s = lib.layers.MultiHeadAttention(2, 4)(h, h, return_attention_scores=True)
        return lib.Model(inp, [a, s])

    t, k = _both(build)
    x = _padded(3, 5, min_len=2)
    x[1, :] = 0
    for g, w in zip(t.predict(x, verbose=0), k(x)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)


def _fit_both(build, compile_args, x_parts, y_parts, epochs=2, batch_size=4, sw_parts=None):
    """fit on each padded array in turn, tessera and Keras from the same
    weights: the losses of every epoch and the final weights."""
    t, k = _both(build)
    t.compile(**compile_args(nn))
    k.compile(**compile_args(keras))
    t_losses, k_losses = [], []
    for i, (x, y) in enumerate(zip(x_parts, y_parts)):
        sw = None if sw_parts is None else sw_parts[i]
        ht = t.fit(x, y, epochs=epochs, batch_size=batch_size, shuffle=False, verbose=0,
                   sample_weight=sw)
        hk = k.fit(x, y, epochs=epochs, batch_size=batch_size, shuffle=False, verbose=0,
                   sample_weight=sw)
        t_losses += ht.history["loss"]
        k_losses += hk.history["loss"]
    return t, k, t_losses, k_losses


def test_text_classifier_fit_on_two_padded_lengths_matches_keras():
    """The keras-io text classification shape: int ids of any length ->
    Embedding(mask_zero) -> Bidirectional(LSTM) -> Dense, trained by fit on
    arrays padded to two different lengths."""
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 8, mask_zero=True)(inp)
        h = lib.layers.Bidirectional(lib.layers.LSTM(6))(h)
        h = lib.layers.Dense(6, activation="relu")(h)
        return lib.Model(inp, lib.layers.Dense(1, activation="sigmoid")(h))

    def compile_args(lib):
        return {"optimizer": lib.optimizers.SGD(0.5), "loss": "binary_crossentropy"}

    xs = [_padded(12, 6), _padded(12, 11)]
    ys = [(x[:, 0] > 10).astype(np.float32).reshape(-1, 1) for x in xs]
    t, k, lt, lk = _fit_both(build, compile_args, xs, ys)
    np.testing.assert_allclose(lt, lk, rtol=2e-4, atol=1e-6)
    for a, b in zip(t.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-3, atol=2e-5)
    assert lt[1] < lt[0]  # it learns (the second epoch on the same arrays)
    assert t.varlen_compiles == 2


def test_sequence_loss_is_masked_as_keras():
    """A tagger (return_sequences): Keras weights the loss by the output's
    mask, so padded steps count for nothing; with sample weights too."""
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 8, mask_zero=True)(inp)
        h = lib.layers.GRU(6, return_sequences=True)(h)
        return lib.Model(inp, lib.layers.Dense(4, activation="softmax")(h))

    def compile_args(lib):
        return {"optimizer": lib.optimizers.SGD(0.3), "loss": "sparse_categorical_crossentropy",
                "metrics": ["sparse_categorical_accuracy"]}

    xs = [_padded(8, 5), _padded(8, 9)]
    ys = [(x % 4).astype(np.int32) for x in xs]
    t, k, lt, lk = _fit_both(build, compile_args, xs, ys)
    np.testing.assert_allclose(lt, lk, rtol=2e-4, atol=1e-6)
    # (not fit's accuracies: Keras on JAX loses the mask of the outputs its
    # training step returns, so its fit weighs padded steps in; its
    # evaluate, below, masks them as Keras documents)
    x = _padded(8, 7)
    y = (x % 4).astype(np.int32)
    np.testing.assert_allclose(t.evaluate(x, y, verbose=0), k.evaluate(x, y, verbose=0),
                               rtol=2e-4)
    # the accuracy over the unmasked steps only
    p = t.predict(x, verbose=0)
    m = x != 0
    acc = np.sum((p.argmax(-1) == y) & m) / m.sum()
    np.testing.assert_allclose(t.evaluate(x, y, batch_size=8, verbose=0)[1], acc, rtol=1e-6)
    # with sample weights (Keras 3.15 fails to broadcast them against the
    # mask): each sample's weight times the mask, scaled by total / valid
    sw = RNG.random(8).astype(np.float32) + 0.5
    p = t.predict(x, verbose=0).astype(np.float64)
    ce = -np.log(np.clip(np.take_along_axis(p, y[..., None], -1)[..., 0], 1e-7, 1))
    m = (x != 0).astype(np.float64)
    want = np.sum(ce * m * (m.size / m.sum()) * sw[:, None]) / ce.size
    # ((n, 1): one weight per sample of the steps' losses, as Keras takes it)
    loss, acc = t.evaluate(x, y, sample_weight=sw[:, None], batch_size=8, verbose=0)
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    hit = (p.argmax(-1) == y).astype(np.float64)
    # compile's metrics= are not weighted by sample_weight (Keras's; weighted_metrics= are)
    np.testing.assert_allclose(acc, np.sum(hit * m) / np.sum(m), rtol=1e-6)


def test_save_and_load_keep_unknown_lengths_and_masks(tmp_path):
    inp = nn.Input(shape=(None,), dtype="int32")
    h = nn.layers.Embedding(20, 6, mask_zero=True)(inp)
    h = nn.layers.Bidirectional(nn.layers.GRU(4, return_sequences=True), merge_mode="ave")(h)
    h = nn.layers.TimeDistributed(nn.layers.Dense(3))(h)
    m = nn.Model(inp, nn.layers.GlobalAveragePooling1D()(h))
    _random_weights(m)
    path = str(tmp_path / "m.keras")
    m.save(path)
    m2 = nn.load_model(path)
    assert m2._inputs[0].shape == (None, None)
    for length in (4, 9):
        x = _padded(3, length)
        np.testing.assert_array_equal(m2.predict(x, verbose=0), m.predict(x, verbose=0))
    x = _padded(3, 4)
    longer = np.concatenate([x, np.zeros((3, 5), np.int32)], axis=1)
    np.testing.assert_allclose(m2.predict(longer, verbose=0), m2.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_sequential_with_unknown_length_input_shape():
    s = nn.Sequential([nn.layers.Embedding(20, 4, mask_zero=True, input_shape=(None,)),
                       nn.layers.GRU(3), nn.layers.Dense(1)])
    assert s._inputs[0].shape == (None, None)
    x = _padded(4, 5)
    longer = np.concatenate([x, np.zeros((4, 3), np.int32)], axis=1)
    np.testing.assert_allclose(s.predict(longer, verbose=0), s.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_mask_errors_are_clear():
    inp = nn.Input(shape=(None, 3))
    with pytest.raises(TypeError, match=r"\[Flatten\].*does not take a mask"):
        nn.layers.Flatten()(inp, mask=inp[:, :, 0] > 0)
    with pytest.raises(TypeError, match=r"\[Bidirectional\] wraps a SimpleRNN"):
        nn.layers.Bidirectional(nn.layers.Dense(3))
    with pytest.raises(ValueError, match=r"\[Bidirectional\] merge_mode"):
        nn.layers.Bidirectional(nn.layers.LSTM(3), merge_mode="max")
    with pytest.raises(TypeError, match=r"\[RNN\] cell must be"):
        nn.layers.RNN(nn.layers.Dense(3))
    # (an AUC of a masked output is no longer refused: test_nn_masked_metrics.py)


@pytest.mark.parametrize("merge", ["Add", "Concatenate"])
def test_merging_layers_and_the_masks_as_keras(merge):
    def build(lib):
        a_in = lib.Input(shape=(None,), dtype="int32")
        b_in = lib.Input(shape=(None,), dtype="int32")
        a = lib.layers.Embedding(20, 6, mask_zero=True)(a_in)
        b = lib.layers.Embedding(20, 6, mask_zero=True)(b_in)
        h = getattr(lib.layers, merge)()([a, b])
        return lib.Model([a_in, b_in], lib.layers.LSTM(4, return_sequences=True)(h))

    t, k = _both(build)
    xa, xb = _padded(5, 6), _padded(5, 6)
    np.testing.assert_allclose(t.predict([xa, xb], verbose=0), np.asarray(k([xa, xb])),
                               rtol=1e-4, atol=1e-5)


def test_concatenate_along_time_joins_masks_as_keras():
    def build(lib):
        a_in = lib.Input(shape=(None,), dtype="int32")
        b_in = lib.Input(shape=(None,), dtype="int32")
        a = lib.layers.Embedding(20, 6, mask_zero=True)(a_in)
        b = lib.layers.Embedding(20, 6)(b_in)  # no mask: all its steps count
        h = lib.layers.Concatenate(axis=1)([a, b])
        return lib.Model([a_in, b_in], lib.layers.GRU(4, return_sequences=True)(h))

    t, k = _both(build)
    xa, xb = _padded(5, 4), _padded(5, 3)
    np.testing.assert_allclose(t.predict([xa, xb], verbose=0), np.asarray(k([xa, xb])),
                               rtol=1e-4, atol=1e-5)


def test_users_layer_gets_and_gives_masks_as_keras():
    """A user's layer whose call takes `mask` receives the mask; its
    compute_mask gives its output's (here: a masked mean over time kept per
    step, the mask passed on)."""
    def build(lib):
        class MaskedScale(lib.layers.Layer):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.supports_masking = True

            def call(self, inputs, mask=None):
                m = lib.ops.cast(mask, "float32")[:, :, None] if lib is keras else \
                    mask[:, :, None].astype("float32")
                return inputs * m * 2.0

            def compute_mask(self, inputs, mask=None):
                return mask

        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 5, mask_zero=True)(inp)
        h = MaskedScale()(h)
        return lib.Model(inp, lib.layers.SimpleRNN(3, return_sequences=True)(h))

    t, k = _both(build)
    x = _padded(4, 6)
    np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("merge_mode", ["concat", None])
def test_bidirectional_return_state_matches_keras(merge_mode):
    def build(lib):
        inp = lib.Input(shape=(None,), dtype="int32")
        h = lib.layers.Embedding(20, 6, mask_zero=True)(inp)
        outs = lib.layers.Bidirectional(lib.layers.LSTM(4, return_state=True),
                                        merge_mode=merge_mode)(h)
        return lib.Model(inp, list(outs))

    t, k = _both(build)
    x = _padded(4, 6)
    got, want = t.predict(x, verbose=0), k(x)
    assert len(got) == len(want) == (6 if merge_mode is None else 5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)


def test_masked_loss_in_chunked_training_is_refused():
    ids = nn.Input(shape=(None,), dtype="int32")
    seq = nn.layers.GRU(3, return_sequences=True)(nn.layers.Embedding(9, 2, mask_zero=True)(ids))
    m = nn.Model(ids, seq)
    m.compile("sgd", "mse")
    with pytest.raises(ValueError, match=r"outputs \[0\] carry a mask.*deterministic"):
        m.fit(_padded(4, 3, vocab=9), np.zeros((4, 3, 3), np.float32), deterministic=True,
              verbose=0)
