"""tessera.nn.parallel_layers and parallel_losses on one process: with one
member (no group, or a one-member tensor group) the split transformer is the
plain one; the vocabulary-parallel cross-entropy and accuracy equal Keras's;
configs, save and load; the checks. The multi-rank cases are
tests/distributed/tp_block.py."""

import numpy as np
import pytest

import tessera.distributed as dist
from tessera import nn, optim

VOCAB, T, D = 9, 5, 8


def _gpt(group, split=True, dropout=0.0, seed=2):
    ids = nn.Input(shape=(T,), dtype="int32")
    x = (nn.VocabParallelEmbedding(VOCAB, D, group=group) if split
         else nn.Embedding(VOCAB, D))(ids)
    h = nn.LayerNormalization()(x)
    mha = (nn.ParallelMultiHeadAttention(4, 2, dropout=dropout, group=group) if split
           else nn.MultiHeadAttention(4, 2, dropout=dropout))
    x = nn.Add()([x, mha(h, h, use_causal_mask=True)])
    logits = (nn.ColumnParallelDense(VOCAB, group=group) if split else nn.Dense(VOCAB))(x)
    model = nn.Model(ids, logits, seed=seed, dtype="float64")
    loss = (nn.VocabParallelSparseCategoricalCrossentropy(VOCAB, group=group) if split
            else nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(optim.Adam(1e-2), loss, metrics=["accuracy"])
    return model


def _data(rows=12):
    rng = np.random.default_rng(4)
    return rng.integers(0, VOCAB, (rows, T)), rng.integers(0, VOCAB, (rows, T))


@pytest.mark.parametrize("group", ["none", "mesh"])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_one_member_is_the_plain_model(group, dropout):
    g = None if group == "none" else dist.Mesh(tensor=1).group("tensor")
    ref, par = _gpt(None, split=False, dropout=dropout), _gpt(g, dropout=dropout)
    for a, b in zip(par.get_weights(), ref.get_weights()):
        assert np.array_equal(a, b)
    x, y = _data()
    assert np.array_equal(par.predict(x, verbose=0), ref.predict(x, verbose=0))
    fit = dict(batch_size=4, epochs=3, shuffle=False, verbose=0)
    h_ref, h_par = ref.fit(x, y, **fit).history, par.fit(x, y, **fit).history
    np.testing.assert_allclose(h_par["loss"], h_ref["loss"], rtol=1e-12)
    assert h_par["accuracy"] == h_ref["accuracy"]
    for a, b in zip(par.get_weights(), ref.get_weights()):
        # (atol: the key bias, whose gradient is zero in exact arithmetic (softmax ignores a
        # shift), holds only rounding noise of order 1e-12)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-11)


def test_cross_entropy_and_accuracy_match_keras_with_sample_weights():
    x, y = _data()
    ref, par = _gpt(None, split=False), _gpt(None)
    # (one weight per sample of a sequence's per-token losses: (n, 1), as Keras takes it)
    w = np.linspace(0.5, 2.0, len(x))[:, None]
    e_ref = ref.evaluate(x, y, sample_weight=w, verbose=0)
    e_par = par.evaluate(x, y, sample_weight=w, verbose=0)
    np.testing.assert_allclose(e_par, e_ref, rtol=1e-12)
    # Large logits: the shift keeps exp in range.
    big = _gpt(None)
    kernel = big.layers[-1].get_weights()
    big.layers[-1].set_weights([kernel[0] * 400.0, kernel[1]])
    one = _gpt(None, split=False)
    one.set_weights(big.get_weights())
    got, want = big.evaluate(x, y, verbose=0)[0], one.evaluate(x, y, verbose=0)[0]
    assert np.isfinite(got) and got > 10
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_convolutions_on_one_member():
    for col, row, plain, shape in ((nn.ColumnParallelConv1D, nn.RowParallelConv1D, nn.Conv1D,
                                    (7, 2)),
                                   (nn.ColumnParallelConv2D, nn.RowParallelConv2D, nn.Conv2D,
                                    (5, 4, 2)),
                                   (nn.ColumnParallelConv3D, nn.RowParallelConv3D, nn.Conv3D,
                                    (4, 3, 3, 2))):
        def model(layers):
            m = nn.Sequential(layers + [nn.Flatten(), nn.Dense(1)], input_shape=shape, seed=5,
                              dtype="float64")
            m.compile(optim.SGD(0.1), "mse")
            return m

        ref = model([plain(3, 2, activation="relu"), plain(2, 2)])
        par = model([col(3, 2, activation="relu"), row(2, 2)])
        x = np.random.default_rng(0).standard_normal((6,) + shape)
        y = np.random.default_rng(1).standard_normal((6, 1))
        for m in (ref, par):
            m.fit(x, y, batch_size=3, epochs=2, shuffle=False, verbose=0)
        for a, b in zip(par.get_weights(), ref.get_weights()):
            np.testing.assert_array_equal(a, b)


def test_save_load_and_from_layer(tmp_path):
    x, y = _data()
    par = _gpt(None)
    par.fit(x, y, batch_size=4, epochs=1, verbose=0)
    mha = par.layers[3]  # (after the InputLayer, the embedding and a normalization)
    assert isinstance(mha, nn.ParallelMultiHeadAttention) and "group" not in mha.get_config()
    path = tmp_path / "gpt.tsm"
    par.save(path)
    back = nn.load_model(path)
    assert [type(lay).__name__ for lay in back.layers] == \
        [type(lay).__name__ for lay in par.layers]
    assert type(back._compiled.losses[0]) is nn.VocabParallelSparseCategoricalCrossentropy
    np.testing.assert_array_equal(back.predict(x, verbose=0), par.predict(x, verbose=0))
    np.testing.assert_allclose(back.evaluate(x, y, verbose=0), par.evaluate(x, y, verbose=0),
                               rtol=1e-12)
    ref = _gpt(None, split=False)
    emb = nn.VocabParallelEmbedding.from_layer(ref.layers[1], None)
    att = nn.ParallelMultiHeadAttention.from_layer(ref.layers[3], None, name="renamed")
    assert emb.name == ref.layers[1].name and att.name == "renamed"
    for a, b in zip(emb.get_weights() + att.get_weights(),
                    ref.layers[1].get_weights() + ref.layers[3].get_weights()):
        assert np.array_equal(a, b)


def test_errors():
    with pytest.raises(TypeError, match=r"\[ParallelMultiHeadAttention\] argument 'group' must "
                       r"be a tessera.distributed.Group .* got str"):
        nn.ParallelMultiHeadAttention(2, 2, group="tensor")
    with pytest.raises(ValueError, match=r"\[VocabParallelEmbedding\] embeddings_regularizer is "
                       "not supported"):
        nn.VocabParallelEmbedding(5, 2, embeddings_regularizer="l2")
    with pytest.raises(ValueError, match=r"\[RowParallelConv2D\] groups=3 cannot be split"):
        nn.RowParallelConv2D(3, 2, groups=3)
    with pytest.raises(TypeError, match=r"\[ColumnParallelConv2D.from_layer\] expects a "
                       r"tessera.nn.Conv2D, got Conv1D"):
        nn.ColumnParallelConv2D.from_layer(nn.Conv1D(2, 2), None)
    with pytest.raises(TypeError, match=r"\[VocabParallelSparseCategoricalAccuracy\] argument "
                       r"'group' must be a tessera.distributed.Group .* got int 4$"):
        nn.VocabParallelSparseCategoricalAccuracy(VOCAB, group=4)
    with pytest.raises(ValueError, match=r"vocab_size must be a positive int .* got 0"):
        nn.VocabParallelSparseCategoricalCrossentropy(0)
    model = _gpt(None)
    with pytest.raises(ValueError, match=r"\[compile\] metric 'mae' needs the whole output"):
        model.compile("adam", nn.VocabParallelSparseCategoricalCrossentropy(VOCAB),
                      metrics=["mae"])
    model.compile("adam", nn.VocabParallelSparseCategoricalCrossentropy(VOCAB + 1))
    x, y = _data()
    with pytest.raises(ValueError, match=r"the output has \[9\] classes \(per-sample shape "
                       r"\(5, 9\) here\), but vocab_size 10 split over 1 members gives \[10\]"):
        model.fit(x, y, epochs=1, verbose=0)
    model.compile("adam", nn.VocabParallelSparseCategoricalCrossentropy(VOCAB))
    y[3, 2] = VOCAB
    with pytest.raises(ValueError, match=r"y\[3\] \(sample 3\) holds the label 9, outside the "
                       r"model's 9 classes"):
        model.fit(x, y, epochs=1, verbose=0)

