"""attention's keep_probs: a training step's forward leaves the probabilities
for attention_grad, which then skips recomputing the scores. The gradients
must be the same bits as the recomputing backward's, and kept probabilities
must be used only for the result and the q, k they came from, and live as
long as the result."""

import os

import numpy as np
import pytest

import tessera
from tessera import nn

RNG = np.random.default_rng(7)


def _qkv(lead, tq, tk, d, dv, dtype):
    return [RNG.normal(size=lead + (t, n)).astype(dtype)
            for t, n in ((tq, d), (tk, d), (tk, dv))]


def _forward(q, k, v, scale, causal, keep):
    return tessera.call_primitive("attention", [q, k, v],
                                  {"scale": scale, "causal": causal, "keep_probs": keep})


def _backward(g, q, k, v, scale, causal, out=None):
    kw = {"scale": scale, "causal": causal}
    if out is not None:
        kw["out"] = out
    return [np.asarray(x) for x in tessera.call_primitive("attention_grad", [g, q, k, v], kw)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("threads", [1, 2])
def test_kept_probabilities_give_the_recomputed_gradients_bit_for_bit(dtype, causal, threads):
    # 300 query rows: several bands of rows per block (causal bands have
    # fewer keys), so the kept bands' layout is exercised.
    q, k, v = _qkv((2, 3), 300, 260, 24, 20, dtype)
    g = RNG.normal(size=(2, 3, 300, 20)).astype(dtype)
    try:
        tessera.set_num_threads(threads)
        ref_out = _forward(q, k, v, 0.3, causal, False)
        ref = _backward(g, q, k, v, 0.3, causal)
        out = _forward(q, k, v, 0.3, causal, True)
        got = _backward(g, q, k, v, 0.3, causal, out=out)
    finally:
        tessera.set_num_threads(os.cpu_count())
    assert np.array_equal(np.asarray(out), np.asarray(ref_out))
    for a, b in zip(got, ref):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert all(np.abs(a).max() > 0 for a in got)


def test_probabilities_are_used_only_for_the_q_and_k_they_came_from():
    q, k, v = _qkv((2,), 40, 30, 8, 8, np.float64)
    g = RNG.normal(size=(2, 40, 8))
    out = _forward(q, k, v, 0.5, False, True)
    q2 = q + 1.0  # another q with the same result handle: the backward recomputes
    got = _backward(g, q2, k, v, 0.5, False, out=out)
    ref = _backward(g, q2, k, v, 0.5, False)
    for a, b in zip(got, ref):
        assert np.array_equal(a, b)
    # another scale
    out = _forward(q, k, v, 0.5, False, True)
    got = _backward(g, q, k, v, 0.25, False, out=out)
    ref = _backward(g, q, k, v, 0.25, False)
    for a, b in zip(got, ref):
        assert np.array_equal(a, b)


def test_a_result_not_kept_recomputes_and_kept_ones_serve_every_backward():
    q, k, v = _qkv((3,), 50, 50, 8, 4, np.float32)
    g = RNG.normal(size=(3, 50, 4)).astype(np.float32)
    ref = _backward(g, q, k, v, 0.7, True)
    out = _forward(q, k, v, 0.7, True, False)  # not kept
    for a, b in zip(_backward(g, q, k, v, 0.7, True, out=out), ref):
        assert np.array_equal(a, b)
    out = _forward(q, k, v, 0.7, True, True)
    for _ in range(2):  # the kept probabilities serve a second backward too
        for a, b in zip(_backward(g, q, k, v, 0.7, True, out=out), ref):
            assert np.array_equal(a, b)


def _live():
    return tessera._core.memory_stats()["live_bytes"]


def test_they_live_as_long_as_the_result():
    # Observed by the live bytes: the kept probabilities (blocks * tq * tk
    # values) stay beside a keeping forward's result, through its backward,
    # and go with the result.
    q, k, v = _qkv((2, 2), 128, 96, 16, 8, np.float32)
    g = RNG.normal(size=(2, 2, 128, 8)).astype(np.float32)
    probs_bytes = 2 * 2 * 128 * 96 * 4
    base = _live()
    out = _forward(q, k, v, 0.25, False, False)
    plain = _live() - base
    del out
    base = _live()
    out = _forward(q, k, v, 0.25, False, True)
    assert _live() - base == plain + probs_bytes
    grads = _backward(g, q, k, v, 0.25, False, out=out)
    del grads
    assert _live() - base == plain + probs_bytes
    del out
    assert _live() - base == 0


def test_multi_head_attention_fit_keeps_nothing_after_the_step():
    inp = nn.Input((20, 8))
    x = nn.layers.MultiHeadAttention(2, 4)(inp, inp)
    model = nn.Model(inp, nn.layers.GlobalAveragePooling1D()(x))
    model.compile("adam", "mse")
    xs = RNG.normal(size=(16, 20, 8)).astype(np.float32)
    ys = RNG.normal(size=(16, 8)).astype(np.float32)
    model.fit(xs, ys, batch_size=16, epochs=1, verbose=0)
    base = _live()
    model.fit(xs, ys, batch_size=16, epochs=3, verbose=0)
    # the steps' kept probabilities went with their results
    assert _live() - base < 2 * 16 * 20 * 20 * 4


def test_the_backward_reads_the_kept_probabilities():
    # Proof that they are used: q changed in place after the forward (the
    # same buffer and origin, as a program never does) leaves the kept
    # probabilities those of the forward's q, so the backward differs from
    # one that recomputes them from the changed q.
    q, k, v = _qkv((2,), 30, 30, 8, 8, np.float64)
    g = RNG.normal(size=(2, 30, 8))
    q_forward = q.copy()
    out = _forward(q, k, v, 0.5, False, True)
    q *= 3.0
    kept = _backward(g, q, k, v, 0.5, False, out=out)
    recomputed = _backward(g, q, k, v, 0.5, False)
    assert not np.array_equal(kept[2], recomputed[2])  # dv = P^T g: P alone decides it
    from_forward = _backward(g, q_forward, k, v, 0.5, False)
    np.testing.assert_array_equal(kept[2], from_forward[2])
