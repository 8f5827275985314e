"""The fused attention primitive (softmax(scale * q @ k^T) @ v per (batch,
head) block, scores kept in cache) and its backward: values against NumPy,
gradients against central differences in float64, bits independent of the
thread count; MultiHeadAttention on it against Keras 3 on JAX (the oracle,
same weights) and against the composed path (FUSED = False), outputs and
gradients; the cases that keep the composed path (masks, dropout, returned
scores); the primitive's errors."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn  # noqa: E402
from tessera.nn.layers import multi_head_attention as mha_module  # noqa: E402

RNG = np.random.default_rng(31)


def _reference(q, k, v, scale=1.0, causal=False):
    """NumPy: Keras's composition (masked scores set to -1e9, softmax, product)."""
    s = scale * (q @ np.swapaxes(k, -1, -2))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -1e9)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(-1, keepdims=True)) @ v


def _attention(q, k, v, scale=1.0, causal=False):
    return tessera.call_primitive("attention", [q, k, v], {"scale": scale, "causal": causal})


def _qkv(lead, tq, tk, d, dv, dtype=np.float64):
    return [RNG.normal(size=lead + (t, n)).astype(dtype)
            for t, n in ((tq, d), (tk, d), (tk, dv))]


# (leading dims, tq, tk, d, dv): one band, several bands (tq * tk > the band's
# 32768 scores), a long key axis (the band's floor of 16 rows), no leading dims.
SHAPES = [((2, 3), 7, 5, 4, 3), ((2,), 300, 260, 8, 5), ((1, 2), 40, 3000, 4, 4),
          ((), 6, 6, 3, 2)]


@pytest.mark.parametrize("shape", SHAPES, ids=["small", "bands", "long_keys", "2d"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_values_match_numpy(shape, causal):
    lead, tq, tk, d, dv = shape
    q, k, v = _qkv(lead, tq, tk, d, dv)
    want = _reference(q, k, v, 0.7, causal)
    got = _attention(q, k, v, 0.7, causal)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    got32 = _attention(*[a.astype(np.float32) for a in (q, k, v)], scale=0.7, causal=causal)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, rtol=1e-5, atol=2e-6)


def test_large_scores_do_not_overflow_and_ints_compute_in_float64():
    q, k, v = _qkv((2,), 4, 5, 3, 2)
    np.testing.assert_allclose(_attention(q * 300, k, v), _reference(q * 300, k, v),
                               rtol=1e-12, atol=1e-13)
    qi = RNG.integers(-3, 3, size=(2, 4, 3))
    got = _attention(qi, k, v)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _reference(qi.astype(np.float64), k, v), rtol=1e-12)


@pytest.mark.parametrize("shape", [((2, 2), 5, 4, 3, 2), ((1,), 40, 900, 2, 3)],
                         ids=["small", "bands"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gradients_match_finite_differences(shape, causal):
    lead, tq, tk, d, dv = shape
    qkv = _qkv(lead, tq, tk, d, dv)
    g = RNG.normal(size=lead + (tq, dv))
    grads = tessera.call_primitive("attention_grad", [g] + qkv, {"scale": 0.8, "causal": causal})
    assert len(grads) == 3
    eps = 1e-6
    for i, (a, da) in enumerate(zip(qkv, grads)):
        assert da.shape == a.shape and da.dtype == np.float64
        for idx in RNG.choice(a.size, size=min(a.size, 12), replace=False):
            pos = np.unravel_index(idx, a.shape)
            up, down = [x.copy() for x in qkv], [x.copy() for x in qkv]
            up[i][pos] += eps
            down[i][pos] -= eps
            num = (np.sum(_attention(*up, 0.8, causal) * g) -
                   np.sum(_attention(*down, 0.8, causal) * g)) / (2 * eps)
            np.testing.assert_allclose(da[pos], num, rtol=1e-6, atol=1e-8,
                                       err_msg=f"{'qkv'[i]}{pos}")




def test_bits_do_not_depend_on_the_thread_count():
    qkv = _qkv((4, 4), 120, 150, 16, 16, np.float32)
    g = RNG.normal(size=(4, 4, 120, 16)).astype(np.float32)
    results = []
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            out = _attention(*qkv, 0.25, True)
            grads = tessera.call_primitive("attention_grad", [g] + qkv,
                                           {"scale": 0.25, "causal": True})
            results.append([out] + list(grads))
    finally:
        tessera.set_num_threads(os.cpu_count())
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)


# ---- MultiHeadAttention on the primitive

@pytest.fixture
def composed():
    """Runs the body with the composed path (the reference), then restores."""
    def switch(on):
        mha_module.FUSED = not on
    yield switch
    mha_module.FUSED = True


def _mha_model(lib, causal, dtype=None, dropout=0.0, cross=False, value_dim=4):
    L = lib.layers if lib is keras else lib
    q = lib.Input((6, 5))
    v = lib.Input((4, 5)) if cross else q
    layer = L.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=value_dim,
                                  dropout=dropout)
    out = layer(q, v, use_causal_mask=causal)
    inputs = [q, v] if cross else q
    return lib.Model(inputs, out) if dtype is None else lib.Model(inputs, out, dtype=dtype)


def _weights(model, dtype=np.float32, scale=0.5):
    return [(RNG.normal(size=w.shape) * scale).astype(dtype) for w in model.get_weights()]


@pytest.mark.parametrize("case", ["self", "causal", "cross"])
def test_multi_head_attention_matches_keras(case):
    causal, cross = case == "causal", case == "cross"
    # value_dim = key_dim: Keras 3.15's fused path refuses other value dims.
    t = _mha_model(nn, causal, cross=cross, value_dim=None)
    k = _mha_model(keras, causal, cross=cross, value_dim=None)
    w = _weights(t)
    t.set_weights(w)
    k.set_weights(w)
    x = [RNG.normal(size=(3, 6, 5)).astype(np.float32)]
    if cross:
        x.append(RNG.normal(size=(3, 4, 5)).astype(np.float32))
    x = x if cross else x[0]
    np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=1e-5, atol=2e-6)


def _grads(model, x, r):
    """Every weight's gradient of sum(output * r) / n: one SGD step of rate 1."""
    def loss_fn(y_true, y_pred):
        return np.sum(y_pred * y_true, axis=(-2, -1))

    model.compile(tessera.optim.SGD(1.0), loss_fn)
    w0 = model.get_weights()
    model.fit(x, r, batch_size=len(r), epochs=1, shuffle=False, verbose=0)
    grads = [a - b for a, b in zip(w0, model.get_weights())]
    model.set_weights(w0)
    return grads


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fused_equals_composed_with_gradients(causal, composed):
    x = RNG.normal(size=(3, 6, 5))
    r = RNG.normal(size=(3, 6, 5))
    results = []
    for ref in (False, True):
        composed(ref)
        m = _mha_model(nn, causal, dtype="float64")
        if not results:
            w = _weights(m, np.float64)
        m.set_weights(w)
        results.append((m.predict(x, verbose=0), _grads(m, x, r)))
    (out, grads), (ref_out, ref_grads) = results
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    for g, e in zip(grads, ref_grads):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-13)
    assert all(np.abs(g).max() > 0 for g in grads)


def test_layer_gradients_match_finite_differences():
    x = RNG.normal(size=(2, 6, 5))
    r = RNG.normal(size=(2, 6, 5))
    m = _mha_model(nn, True, dtype="float64")
    m.set_weights(_weights(m, np.float64))
    grads = _grads(m, x, r)
    w0 = m.get_weights()

    def loss(ws):
        m.set_weights(ws)
        return float(np.mean(np.sum(m.predict(x, verbose=0) * r, axis=(-2, -1))))

    eps = 1e-6
    for i, g in enumerate(grads):
        for idx in RNG.choice(g.size, size=min(3, g.size), replace=False):
            pos = np.unravel_index(idx, g.shape)
            w = [a.copy() for a in w0]
            w[i][pos] += eps
            up = loss(w)
            w[i][pos] -= 2 * eps
            down = loss(w)
            np.testing.assert_allclose(g[pos], (up - down) / (2 * eps), rtol=1e-5, atol=1e-8,
                                       err_msg=f"weight {i}{pos}")
    m.set_weights(w0)


def _program_calls_attention(model, x):
    """Whether a training step evaluated the fused primitive (the trace's counters)."""
    import csv
    import tempfile

    model.compile(tessera.optim.SGD(0.0), "mse")
    with tempfile.TemporaryDirectory() as folder:
        with tessera.trace(folder) as tr:
            n = len(x[0] if isinstance(x, list) else x)
            model.fit(x, np.zeros((n,) + model.output_shape[1:], np.float32), epochs=1,
                      batch_size=n, verbose=0)
        tr.csv(os.path.join(folder, "c.csv"))
        with open(os.path.join(folder, "c.csv")) as fh:
            names = {r["name"] for r in csv.DictReader(fh)}
    return "attention" in names and "attention_grad" in names


def test_masks_dropout_and_scores_keep_the_composed_path():
    x = RNG.normal(size=(2, 6, 5)).astype(np.float32)
    assert _program_calls_attention(_mha_model(nn, True), x)
    assert not _program_calls_attention(_mha_model(nn, False, dropout=0.2), x)
    q, mask = nn.Input((6, 5)), nn.Input((6, 6), dtype="bool")
    out = nn.MultiHeadAttention(2, 3)(q, q, attention_mask=mask)
    assert not _program_calls_attention(nn.Model([q, mask], out), [x, np.ones((2, 6, 6), bool)])
    out, _ = nn.MultiHeadAttention(2, 3)(q, q, return_attention_scores=True)
    assert not _program_calls_attention(nn.Model(q, out), x)


def test_primitive_errors_name_the_operation_and_the_values():
    q, k, v = _qkv((2,), 4, 5, 3, 2)
    with pytest.raises(ValueError, match=r"\[attention\] argument 'q' must have at least 2 "
                                         r"dimensions .*got shape \(3,\)"):
        _attention(np.ones(3), k, v)
    with pytest.raises(ValueError, match=r"\[attention\] q, k and v must have the same leading "
                                         r"\(batch, head\) dimensions, got shapes \(2, 4, 3\), "
                                         r"\(3, 5, 3\) and \(2, 5, 2\)"):
        _attention(q, np.ones((3, 5, 3)), v)
    with pytest.raises(ValueError, match=r"\[attention\] q and k must have the same last "
                                         r"\(feature\) dimension, got shapes \(2, 4, 3\) and "
                                         r"\(2, 5, 4\)"):
        _attention(q, np.ones((2, 5, 4)), v)
    with pytest.raises(ValueError, match=r"\[attention\] k and v must have as many tokens "
                                         r"\(axis -2\), got shapes \(2, 5, 3\) and \(2, 6, 2\)"):
        _attention(q, k, np.ones((2, 6, 2)))
    with pytest.raises(ValueError, match=r"\[attention\] argument 'scale' must be a finite "
                                         r"number, got nan"):
        _attention(q, k, v, scale=float("nan"))
    with pytest.raises(ValueError, match=r"\[attention_grad\] g has shape \(2, 4, 3\) but "
                                         r"attention's result has shape \(2, 4, 2\)"):
        tessera.call_primitive("attention_grad", [np.ones((2, 4, 3)), q, k, v])


def test_float16_computes_in_float32_and_stores_float16_as_softmax_does():
    q, k, v = _qkv((2, 3), 5, 4, 4, 3, np.float16)
    got = _attention(q, k, v, 0.5, True)
    assert got.dtype == np.float16
    want = _reference(*[a.astype(np.float64) for a in (q, k, v)], scale=0.5, causal=True)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)
    # float16 with float32 (or an integer array) promotes as NumPy does
    assert _attention(q.astype(np.float32), k, v).dtype == np.float32
    assert _attention(RNG.integers(0, 3, size=q.shape), k, v).dtype == np.float64


@pytest.mark.parametrize("case", ["plain", "causal_scaled", "mask", "bias"])
def test_ops_dot_product_attention_matches_keras(case):
    # (batch, seq, heads, dim), Keras's layout; no mask and no bias: the fused primitive
    q, k, v = (RNG.normal(size=(2, t, 3, 4)).astype(np.float32) for t in (5, 7, 7))
    kw = {}
    if case == "causal_scaled":
        q = q[:, :5]
        k, v = k[:, :5], v[:, :5]
        kw = {"is_causal": True, "scale": 0.3}
    elif case == "mask":
        kw = {"mask": RNG.random((2, 3, 5, 7)) > 0.3}
    elif case == "bias":
        kw = {"bias": RNG.normal(size=(2, 3, 5, 7)).astype(np.float32)}
    got = np.asarray(nn.ops.dot_product_attention(q, k, v, **kw))
    want = np.asarray(keras.ops.dot_product_attention(q, k, v, **kw))
    assert got.shape == want.shape == q.shape[:3] + (4,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


def test_strided_views_read_in_place_or_packed_give_the_same_values():
    # (batch, tokens, heads, features) arrays seen heads-first (rows contiguous,
    # read in place), a view with a step on the feature axis, one reversed along
    # the tokens, one broadcast over the batch: packed first.
    x = RNG.normal(size=(2, 9, 3, 8))
    q, k, v = (x.transpose(0, 2, 1, 3) for _ in range(3))
    k = np.ascontiguousarray(k)[:, :, ::-1]
    v = x[:, :, :, ::2].transpose(0, 2, 1, 3)
    g = RNG.normal(size=(2, 9, 3, 4)).transpose(0, 2, 1, 3)
    for qq, kk, vv in ((q, k, v), (np.broadcast_to(q[:1], q.shape), k, v)):
        want = _reference(qq, kk, vv, 0.4, True)
        np.testing.assert_allclose(_attention(qq, kk, vv, 0.4, True), want, rtol=1e-12,
                                   atol=1e-13)
        dense = [np.ascontiguousarray(a) for a in (g, qq, kk, vv)]
        got = tessera.call_primitive("attention_grad", [g, qq, kk, vv], {"scale": 0.4,
                                                                       "causal": True})
        ref = tessera.call_primitive("attention_grad", dense, {"scale": 0.4, "causal": True})
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
