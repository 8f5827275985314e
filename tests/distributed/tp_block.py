# Tensor parallelism of a transformer under `tessera run -n N` (N = 2 or 4):
# a char-GPT-like model (VocabParallelEmbedding, ParallelMultiHeadAttention
# with 5 heads, a ColumnParallelDense -> RowParallelDense MLP, layer norms,
# residuals, dropout, a vocabulary-split output projection and
# VocabParallelSparseCategoricalCrossentropy; vocabulary 11, uneven on 2 and
# 4) against the same model of plain layers on one process (computed here by
# every rank, with no collective): initial slices bitwise, forward, loss,
# accuracy, the gradient of each slice, 100 steps of Adam, dropout masks;
# all-reduces counted in the trace (2 forward and 2 backward per block);
# deterministic fit bitwise from run to run;
# save under t > 1 and load on one member and back; from_layer; column- then
# row-parallel Conv1D/Conv2D/Conv3D with uneven filters; errors. On the meshes
# tensor=N and, with 4, data=2 x tensor=2. Prints "ok" on every rank.
import csv
import hashlib
import io
import os
import tempfile

import numpy as np

import tessera
import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
assert N in (2, 4), N
VOCAB, T, D, HEADS = 11, 6, 10, 5


def gpt(tp, dtype="float64", dropout=0.0, blocks=1, seed=3):
    """The model: plain layers with tp None, split over tp otherwise."""
    split = tp is not None
    ids = nn.Input(shape=(T,), dtype="int32")
    emb = nn.VocabParallelEmbedding(VOCAB, D, group=tp) if split else nn.Embedding(VOCAB, D)
    x = emb(ids)
    for _ in range(blocks):
        h = nn.LayerNormalization(epsilon=1e-5)(x)
        mha = nn.ParallelMultiHeadAttention(HEADS, 2, dropout=dropout, group=tp) if split \
            else nn.MultiHeadAttention(HEADS, 2, dropout=dropout)
        x = nn.Add()([x, mha(h, h, use_causal_mask=True)])
        h = nn.LayerNormalization(epsilon=1e-5)(x)
        if split:
            h = nn.ColumnParallelDense(7, activation="gelu", group=tp)(h)
            h = nn.RowParallelDense(D, group=tp)(h)
        else:
            h = nn.Dense(D)(nn.Dense(7, activation="gelu")(h))
        if dropout:
            h = nn.Dropout(dropout)(h)  # replicated: every member must draw the same mask
        x = nn.Add()([x, h])
    x = nn.LayerNormalization(epsilon=1e-5)(x)
    logits = (nn.ColumnParallelDense(VOCAB, group=tp) if split else nn.Dense(VOCAB))(x)
    model = nn.Model(ids, logits, seed=seed, dtype=dtype)
    loss = nn.VocabParallelSparseCategoricalCrossentropy(VOCAB, group=tp) if split else \
        nn.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optim.SGD(1.0), loss, metrics=["accuracy"])
    return model


def data(rows=8, seed=5):
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCAB, (rows, T)), rng.integers(0, VOCAB, (rows, T))


FIT = dict(shuffle=False, verbose=0, data_parallel=False)


def check_against_one_process(tp):
    ref, par = gpt(None), gpt(tp)
    # Initial weights: each split weight is this member's slice of the
    # one-process draw, bitwise; the gathered weights are the whole ones.
    for lr, lp in zip(ref.layers, par.layers):
        for q in lp.params:
            want = ref.weights[ref._var_of[(id(lr), q.name)]]
            part = lp._local_part(q.name, want) if hasattr(lp, "_local_part") else want
            got = lp._values[q.name]
            assert got.shape == part.shape and np.array_equal(got, part), (lp.name, q.name)
    split = [lp for lp in par.layers if getattr(lp, "tensor_size", 1) > 1]
    assert len(split) == 5 and all(lp.tensor_size == tp.size for lp in split), split
    for a, b in zip(par.get_weights(), ref.get_weights()):
        assert a.shape == b.shape and np.array_equal(a, b)
    # Forward, loss and accuracy (the arg max over the whole vocabulary).
    x, y = data()
    np.testing.assert_allclose(par.predict(x, verbose=0),
                               ref.predict(x, verbose=0)[..., slice(*split[-1]._span)],
                               rtol=1e-12, atol=1e-12)
    e_par, e_ref = par.evaluate(x, y, verbose=0), ref.evaluate(x, y, verbose=0)
    np.testing.assert_allclose(e_par[0], e_ref[0], rtol=1e-12)
    assert e_par[1] == e_ref[1], (e_par, e_ref)
    # per-sample weights of the per-step losses (the sample-weighted path): (n, 1), as
    # Keras needs them for losses of shape (n, steps)
    w = np.linspace(0.5, 2.0, len(x))[:, None]
    np.testing.assert_allclose(par.evaluate(x, y, sample_weight=w, verbose=0),
                               ref.evaluate(x, y, sample_weight=w, verbose=0), rtol=1e-12)
    # Gradients: one SGD step of learning rate 1 on the whole batch moves
    # each weight by minus its gradient; each slice against the slice.
    before_ref = dict(ref.weights)
    before_par = {k: np.array(v) for k, v in par.weights.items()}
    ref.fit(x, y, batch_size=len(x), epochs=1, **FIT)
    par.fit(x, y, batch_size=len(x), epochs=1, **FIT)
    for (v, (lp, q)), (w, _) in zip(par._owner.items(), ref._owner.items()):
        g_ref = before_ref[w] - ref.weights[w]
        g_par = before_par[v] - par.weights[v]
        part = lp._local_part(q.name, g_ref) if hasattr(lp, "_local_part") else g_ref
        assert np.abs(part).max() > 0, (lp.name, q.name)  # every weight learns here
        np.testing.assert_allclose(g_par, part, rtol=1e-8, atol=1e-12,
                                   err_msg=f"{lp.name}/{q.name}")


def check_training(tp, dropout):
    # float32 Adam, 100 steps (25 epochs of 4 batches): the loss within 1e-5
    # relative of the one-process model's; with dropout in the attention and
    # after the MLP (the masks are the one-process masks).
    x, y = data(32, seed=8)
    ref, par = gpt(None, "float32", dropout), gpt(tp, "float32", dropout)
    for m in (ref, par):
        m.compile(optim.Adam(1e-3), m._compiled.losses[0], metrics=["accuracy"])
    h_ref = ref.fit(x, y, batch_size=8, epochs=25, **FIT).history
    h_par = par.fit(x, y, batch_size=8, epochs=25, **FIT).history
    assert h_ref["loss"][-1] < 0.95 * h_ref["loss"][0], h_ref["loss"]
    np.testing.assert_allclose(h_par["loss"], h_ref["loss"], rtol=1e-5)
    np.testing.assert_allclose(h_par["accuracy"], h_ref["accuracy"], atol=1e-6)


def check_dropout_replicated(tp):
    # Dropout after the MLP's row-parallel sum acts on a replicated activation:
    # every member of the group must draw the same mask, else the replicated
    # weights (layer norms, output bias) would drift apart. After 10 steps with
    # rate 0.5 they are bitwise the same on every member, and they equal the
    # one-process model's.
    x, y = data(16, seed=2)
    ref, par = gpt(None, dropout=0.5), gpt(tp, dropout=0.5)
    for m in (ref, par):
        m.compile(optim.Adam(1e-2), m._compiled.losses[0])
        m.fit(x, y, batch_size=8, epochs=5, **FIT)
    replicated = [(v, w) for (v, (lp, q)), w in zip(par._owner.items(), ref._owner)
                  if not hasattr(lp, "_local_part") or lp._split_axis.get(q.name) is None]
    assert len(replicated) >= 7, replicated
    for v, w in replicated:
        mine = np.ascontiguousarray(par.weights[v])
        every = np.asarray(dist.all_gather(mine[None], group=tp))
        for k in range(tp.size):
            assert np.array_equal(every[k], mine), (v, k)
        np.testing.assert_allclose(mine, ref.weights[w], rtol=1e-9, atol=1e-12)


def check_deterministic(tp):
    # fit(deterministic=True) with dropout: two runs give bitwise the same
    # weights (SHA-256 of the gathered weights), the same on every member.
    x, y = data(16)
    digests = []
    for _ in range(2):
        m = gpt(tp, "float32", dropout=0.1)
        m.compile(optim.Adam(1e-3), m._compiled.losses[0])
        m.fit(x, y, batch_size=8, epochs=2, deterministic=True, **FIT)
        whole = b"".join(np.ascontiguousarray(w).tobytes() for w in m.get_weights())
        digests.append(hashlib.sha256(whole).hexdigest())
    assert digests[0] == digests[1], digests
    codes = np.frombuffer(digests[0].encode(), dtype=np.uint8).astype(np.int64)
    every = np.asarray(dist.all_gather(codes[None], group=tp))
    assert all(np.array_equal(row, codes) for row in every), "members disagree"


def counted(fn):
    """Evaluations of each primitive in fn() on this rank, from the trace."""
    with tessera.trace(tempfile.mkdtemp(prefix=f"tp-block-trace-{R}-")) as t:
        fn()
    counts = {}
    for r in csv.DictReader(io.StringIO(t.csv())):
        if int(r["locality"]) == R:
            counts[r["name"]] = counts.get(r["name"], 0) + int(r["evaluations"])
    return counts


def check_counts(tp):
    # Blocks alone (float input through a Dense, so the first block's input
    # needs its gradient): per block, 2 tp_reduce forward (attention output,
    # MLP output) and 2 all-reduces backward (tp_copy's rule: attention
    # input, MLP input); nothing else.
    for blocks in (1, 2):
        inp = nn.Input(shape=(T, 4))
        x = nn.Dense(D)(inp)
        for _ in range(blocks):
            h = nn.LayerNormalization()(x)
            x = nn.Add()([x, nn.ParallelMultiHeadAttention(HEADS, 2, group=tp)(h, h)])
            h = nn.ColumnParallelDense(7, activation="relu", group=tp)(nn.LayerNormalization()(x))
            x = nn.Add()([x, nn.RowParallelDense(D, group=tp)(h)])
        model = nn.Model(inp, x, dtype="float32")
        model.compile(optim.SGD(0.1), "mse")
        xs = np.random.default_rng(1).standard_normal((4, T, 4))
        ys = np.random.default_rng(2).standard_normal((4, T, D))
        model.predict(xs, verbose=0)
        fwd = counted(lambda: model.predict(xs, batch_size=4, verbose=0))
        assert fwd.get("tp_reduce", 0) == 2 * blocks and fwd.get("all_reduce", 0) == 0, fwd
        model.fit(xs, ys, batch_size=4, epochs=1, **FIT)
        step = counted(lambda: model.fit(xs, ys, batch_size=4, epochs=1, **FIT))
        assert step.get("tp_reduce", 0) == 2 * blocks, step
        assert step.get("all_reduce", 0) == 2 * blocks, step
        assert step.get("tp_copy", 0) == 2 * blocks, step
    # The whole model: the embedding's tp_reduce, 2 per block, the loss's max
    # (all_reduce) and its two sums in one tp_reduce; backward, 2 per block
    # and the output projection's input.
    x, y = data()
    par = gpt(tp, "float32", blocks=2)
    par.fit(x, y, batch_size=8, epochs=1, **FIT)
    step = counted(lambda: par.fit(x, y, batch_size=8, epochs=1, **FIT))
    assert step.get("tp_reduce", 0) == 1 + 2 * 2 + 1, step
    # all_reduce: the loss's max, 2 x 2 backward, the logits' input backward,
    # accuracy's max and min
    assert step.get("all_reduce", 0) == 1 + 2 * 2 + 1 + 2, step


def check_save_and_from_layer(tp):
    x, y = data()
    par = gpt(tp)
    out = par.predict(x, verbose=0)
    folder = tempfile.mkdtemp(prefix=f"tp-block-{R}-")
    path = os.path.join(folder, "gpt.tsm")
    par.save(path)
    # Loaded where the layers have no group: the one-process model.
    one = nn.load_model(path)
    assert all(getattr(lay, "group", None) is None for lay in one.layers)
    whole = one.predict(x, verbose=0)
    np.testing.assert_allclose(whole[..., slice(*par.layers[-1]._span)], out, rtol=1e-12)
    ref = gpt(None)
    np.testing.assert_allclose(whole, ref.predict(x, verbose=0), rtol=1e-12)
    np.testing.assert_allclose(one.evaluate(x, y, verbose=0), par.evaluate(x, y, verbose=0),
                               rtol=1e-12)
    # A t = 1 file into the split model: each member takes its slices.
    ref2 = gpt(None, seed=9)
    ref2.save(os.path.join(folder, "one.tsm"))
    again = gpt(tp)
    again.load_weights(os.path.join(folder, "one.tsm"))
    for a, b in zip(again.get_weights(), ref2.get_weights()):
        assert np.array_equal(a, b)
    np.testing.assert_allclose(again.evaluate(x, y, verbose=0), ref2.evaluate(x, y, verbose=0),
                               rtol=1e-12)
    # With Adam's state: 2 epochs split, saved with the training state; 2
    # more on one process from the file, or split again resumed from it, are
    # the one-process model's epochs 3 and 4.
    fit = dict(batch_size=4, **FIT)
    ref = gpt(None)
    ref.compile(optim.Adam(1e-2), ref._compiled.losses[0])
    h_ref = ref.fit(x, y, epochs=4, **fit).history["loss"]
    par = gpt(tp)
    par.compile(optim.Adam(1e-2), par._compiled.losses[0])
    par.fit(x, y, epochs=2, **fit)
    ck = os.path.join(folder, "ck.tsm")
    par.save_checkpoint(ck)
    one = nn.load_model(ck)
    np.testing.assert_allclose(one.fit(x, y, epochs=2, **fit).history["loss"], h_ref[2:],
                               rtol=1e-9)
    back = gpt(tp)
    back.compile(optim.Adam(1e-2), back._compiled.losses[0])
    h_back = back.fit(x, y, epochs=4, resume_from=ck, **fit).history["loss"]
    np.testing.assert_allclose(h_back[-2:], h_ref[2:], rtol=1e-9)
    # from_layer: the split layers of a built one-process model.
    ref3 = gpt(None, seed=4)
    emb = next(lay for lay in ref3.layers if isinstance(lay, nn.Embedding))
    mha = next(lay for lay in ref3.layers if isinstance(lay, nn.MultiHeadAttention))
    pe = nn.VocabParallelEmbedding.from_layer(emb, tp)
    pm = nn.ParallelMultiHeadAttention.from_layer(mha, tp)
    assert pe.name == emb.name and pm.name == mha.name and pm.num_heads == HEADS
    for a, b in zip(pe.get_weights() + pm.get_weights(), emb.get_weights() + mha.get_weights()):
        assert a.shape == b.shape and np.array_equal(a, b)
    lo, hi = pm._span
    assert np.array_equal(pm._values["query_kernel"], mha.get_weights()[0][:, lo:hi])


def check_convolutions(tp):
    rng = np.random.default_rng(6)
    for rank, shape in ((1, (9, 3)), (2, (6, 5, 3)), (3, (4, 4, 3, 3))):
        col_cls = getattr(nn, f"ColumnParallelConv{rank}D")
        row_cls = getattr(nn, f"RowParallelConv{rank}D")
        plain = getattr(nn, f"Conv{rank}D")

        def model(split):
            layers = [col_cls(5, 3, activation="relu", padding="same", group=tp),
                      row_cls(4, 2, group=tp)] if split else \
                [plain(5, 3, activation="relu", padding="same"), plain(4, 2)]
            layers = [plain(2, 1)] + layers + [nn.Flatten(), nn.Dense(2)]
            m = nn.Sequential(layers, input_shape=shape, seed=7, dtype="float64")
            m.compile(optim.SGD(1.0), "mse")
            return m

        ref, par = model(False), model(True)
        col, row = par.layers[1], par.layers[2]
        lo, hi = col._span
        assert col._values["kernel"].shape[-1] == hi - lo and row.extents == col.extents
        for a, b in zip(par.get_weights(), ref.get_weights()):
            assert np.array_equal(a, b)
        x = rng.standard_normal((4,) + shape)
        y = rng.standard_normal((4, 2))
        np.testing.assert_allclose(par.predict(x, verbose=0), ref.predict(x, verbose=0),
                                   rtol=1e-12, atol=1e-12)
        before_ref, before_par = dict(ref.weights), {k: np.array(v) for k, v in
                                                     par.weights.items()}
        ref.fit(x, y, batch_size=4, epochs=1, **FIT)
        par.fit(x, y, batch_size=4, epochs=1, **FIT)
        for (v, (lp, q)), w in zip(par._owner.items(), ref._owner):
            g_ref = before_ref[w] - ref.weights[w]
            part = lp._local_part(q.name, g_ref) if hasattr(lp, "_local_part") else g_ref
            np.testing.assert_allclose(before_par[v] - par.weights[v], part, rtol=1e-8,
                                       atol=1e-12, err_msg=f"{lp.name}/{q.name}")
        # from_layer of the built plain convolutions gives the same model
        conv = ref.layers[1]
        split = col_cls.from_layer(conv, tp)
        assert np.array_equal(split._values["kernel"], conv.get_weights()[0][..., lo:hi])
        rsplit = row_cls.from_layer(ref.layers[2], tp)
        assert np.array_equal(rsplit.get_weights()[0], ref.layers[2].get_weights()[0])


def split_counts(n, t):
    return [n // t + (1 if k < n % t else 0) for k in range(t)]


def expect(error, text, fn):
    try:
        fn()
    except error as e:
        assert text in str(e), str(e)
    else:
        raise AssertionError(f"no {error.__name__}: {text}")


def check_errors(tp):
    t, members = tp.size, ", ".join(map(str, tp.members))
    expect(ValueError, f"[ParallelMultiHeadAttention] num_heads 1 cannot be split over the {t} "
           f"members of group tensor (ranks {members}): each member needs at least one "
           "(layer 'attn')", lambda: nn.ParallelMultiHeadAttention(1, 4, group=tp, name="attn"))
    expect(ValueError, "[VocabParallelEmbedding] input_dim (the vocabulary) 1 cannot be split",
           lambda: nn.VocabParallelEmbedding(1, 4, group=tp))
    expect(ValueError, "[ColumnParallelConv2D] filters 1 cannot be split over",
           lambda: nn.ColumnParallelConv2D(1, 3, group=tp))
    expect(ValueError, "[ColumnParallelConv1D] activation 'softmax' needs every output channel, "
           "but each member holds a slice (layer 'cs')",
           lambda: nn.ColumnParallelConv1D(4, 3, activation="softmax", group=tp, name="cs"))
    expect(ValueError, "[ColumnParallelConv1D] groups=2 cannot be split over a tensor group",
           lambda: nn.ColumnParallelConv1D(4, 3, groups=2, group=tp))
    expect(ValueError, "[ParallelMultiHeadAttention] kernel_regularizer is not supported",
           lambda: nn.ParallelMultiHeadAttention(4, 2, kernel_regularizer="l2", group=tp))
    expect(TypeError, "[ParallelMultiHeadAttention] argument 'group' must be a "
           "tessera.distributed.Group", lambda: nn.ParallelMultiHeadAttention(4, 2, group=2))
    expect(TypeError, "[VocabParallelEmbedding.from_layer] expects a tessera.nn.Embedding, got "
           "Dense", lambda: nn.VocabParallelEmbedding.from_layer(nn.Dense(3), tp))
    expect(ValueError, f"[VocabParallelSparseCategoricalCrossentropy] vocab_size 1 cannot be "
           f"split over the {t} members of group tensor",
           lambda: nn.VocabParallelSparseCategoricalCrossentropy(1, group=tp))
    # A metric needing the whole output, on split logits: refused at compile.
    model = gpt(tp)
    expect(ValueError, "[compile] metric 'sparse_top_k_categorical_accuracy' needs the whole "
           "output, but the loss VocabParallelSparseCategoricalCrossentropy leaves each member",
           lambda: model.compile("adam", model._compiled.losses[0],
                                 metrics=["sparse_top_k_categorical_accuracy"]))
    # A loss whose vocabulary does not match the split output: an error on
    # every member, also on those whose own count happens to match (13 over
    # 4: 4, 3, 3, 3 against 3, 3, 3, 2).
    x, y = data()
    model.compile("adam", nn.VocabParallelSparseCategoricalCrossentropy(VOCAB + 2, group=tp))
    have, want = split_counts(VOCAB, t), split_counts(VOCAB + 2, t)
    expect(ValueError, f"[VocabParallelSparseCategoricalCrossentropy] the output has {have} "
           f"classes on the members of group tensor (ranks {members}) (per-sample shape (6, "
           f"{have[tp.rank]}) here), but vocab_size {VOCAB + 2} split over {t} members gives "
           f"{want} (the last layer must be ColumnParallelDense({VOCAB + 2}, group=...))",
           lambda: model.fit(x, y, epochs=1, **FIT))
    # Labels checked against the whole vocabulary, not this member's slice.
    model.compile("adam", nn.VocabParallelSparseCategoricalCrossentropy(VOCAB, group=tp))
    bad = y.copy()
    bad[2, 1] = VOCAB
    expect(ValueError, f"[fit] y[2] (sample 2) holds the label {VOCAB}, outside the model's "
           f"{VOCAB} classes", lambda: model.fit(x, bad, epochs=1, **FIT))
    ok = np.full_like(y, VOCAB - 1)  # the last class, held by the last member only
    model.fit(x, ok, epochs=1, **FIT)
    # Ids outside the vocabulary: an error, as the plain Embedding gives.
    # Negative ids count from the end, as numpy's take (and the plain layer).
    ids = x.copy()
    ids[1, 2], ids[0, 0] = -2, -VOCAB
    model.set_weights(gpt(None).get_weights())
    mine = slice(*model.layers[-1]._span)
    np.testing.assert_allclose(model.predict(ids, verbose=0),
                               gpt(None).predict(ids, verbose=0)[..., mine], rtol=1e-12)
    for bad_id in (VOCAB + 3, -VOCAB - 1):
        ids = x.copy()
        ids[1, 2] = bad_id
        try:
            model.predict(ids, verbose=0)
        except (IndexError, ValueError) as e:
            assert str(bad_id) in str(e), str(e)
        else:
            raise AssertionError(f"no error for the id {bad_id}, outside the vocabulary")


meshes = [dict(tensor=N)] + ([dict(data=2, tensor=2)] if N == 4 else [])
for shape in meshes:
    mesh = dist.Mesh(**shape)
    tp = mesh.group("tensor")
    check_against_one_process(tp)
    check_training(tp, 0.2)
    check_dropout_replicated(tp)
    if "data" not in shape:  # once per run (the tensor groups are alike)
        check_training(tp, 0.0)
        check_deterministic(tp)
    check_counts(tp)
    check_save_and_from_layer(tp)
    check_convolutions(tp)
    check_errors(tp)
dist.barrier()
print("ok")
