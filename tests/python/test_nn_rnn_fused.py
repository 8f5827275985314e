"""The fused time loop of SimpleRNN, LSTM and GRU (the rnn_sequence primitive
and its backward, rnn_sequence_grad): outputs against Keras 3 on JAX (the
oracle, same weights), outputs and gradients against the unrolled loop
(recurrent.FUSED = False) and against central differences in float64, with
masks, go_backwards, initial and returned states; a few training steps
against Keras's losses."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn  # noqa: E402
from tessera.nn.layers import recurrent  # noqa: E402

RNG = np.random.default_rng(23)

CELLS = [("SimpleRNN", {}), ("LSTM", {}), ("GRU", {}), ("GRU", {"reset_after": False})]
CELL_IDS = ["simple_rnn", "lstm", "gru", "gru_reset_before"]


@pytest.fixture
def unrolled():
    """Runs the body with the unrolled loop (the reference), then restores."""
    def switch(on):
        recurrent.FUSED = not on
    yield switch
    recurrent.FUSED = True


def _weights(model, scale=0.5, dtype=np.float32):
    return [(RNG.normal(size=w.shape) * scale).astype(dtype) for w in model.get_weights()]


def _eager(model, x):
    """Keras's outputs by an eager call (no XLA compilation: fast), as arrays."""
    out = model(x)
    if isinstance(out, (list, tuple)):
        return [np.asarray(o) for o in out]
    return np.asarray(out)


def _rnn_model(lib, kind, kw, steps, feat, units, dtype=None, **flags):
    i = lib.Input((steps, feat))
    layer = getattr(lib.layers if lib is keras else lib, kind)(units, **kw, **flags)
    out = layer(i)
    if dtype is None:
        return lib.Model(i, out)
    return lib.Model(i, out, dtype=dtype)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("flags", [{}, {"return_sequences": True},
                                   {"go_backwards": True, "return_state": True},
                                   {"return_sequences": True, "return_state": True,
                                    "go_backwards": True}],
                         ids=["last", "sequences", "backwards_state", "all"])
def test_fused_layers_match_keras(cell, flags):
    kind, kw = cell
    x = RNG.normal(size=(5, 7, 3)).astype(np.float32)
    t = _rnn_model(nn, kind, kw, 7, 3, 6, **flags)
    k = _rnn_model(keras, kind, kw, 7, 3, 6, **flags)
    w = _weights(t)
    t.set_weights(w)
    k.set_weights(w)
    got, want = t.predict(x, verbose=0), _eager(k, x)
    if not isinstance(want, list):
        got, want = [got], [want]
    assert len(got) == len(want)
    for g, e in zip(got, want):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_initial_state_matches_keras(cell):
    kind, kw = cell
    n_states = 2 if kind == "LSTM" else 1

    def build(lib):
        i = lib.Input((5, 3))
        states = [lib.Input((4,)) for _ in range(n_states)]
        layer = getattr(lib.layers if lib is keras else lib, kind)(
            4, return_sequences=True, return_state=True, **kw)
        return lib.Model([i] + states, layer(i, initial_state=states))

    t, k = build(nn), build(keras)
    w = _weights(t)
    t.set_weights(w)
    k.set_weights(w)
    xs = [RNG.normal(size=(3, 5, 3)).astype(np.float32)] + \
        [RNG.normal(size=(3, 4)).astype(np.float32) for _ in range(n_states)]
    for g, e in zip(t.predict(xs, verbose=0), _eager(k, xs)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=2e-6)


def _masked_model(lib_nn, kind, kw, bidirectional, return_sequences, initial, dtype="float64"):
    """Embedding(mask_zero) -> recurrent layer (in Bidirectional or with
    initial states from a Dense of a second input) -> Dense: every path of the
    fused primitive's gradient (xw, recurrent kernel and bias, h0, c0)."""
    ids = nn.Input((6,), dtype="int32")
    z = nn.Input((2,))
    x = nn.Embedding(9, 3, mask_zero=True)(ids)
    layer = getattr(nn, kind)(4, return_sequences=return_sequences, **kw)
    if bidirectional:
        y = nn.Bidirectional(layer)(x)
    elif initial:
        n = 2 if kind == "LSTM" else 1
        states = [nn.Dense(4, activation="tanh")(z) for _ in range(n)]
        y = layer(x, initial_state=states)
    else:
        y = layer(x)
    if return_sequences:
        y = nn.GlobalAveragePooling1D()(y)
    out = nn.Dense(2)(y)
    return nn.Model([ids, z], out, dtype=dtype)


def _grads(model, xs, r):
    """Every weight's gradient of sum(output * r) / n: one SGD step of rate 1."""
    def loss_fn(y_true, y_pred):
        return np.sum(y_pred * y_true, axis=-1)

    model.compile(tessera.optim.SGD(1.0), loss_fn)
    w0 = model.get_weights()
    model.fit(xs, r, batch_size=len(r), epochs=1, shuffle=False, verbose=0)
    grads = [a - b for a, b in zip(w0, model.get_weights())]
    model.set_weights(w0)
    return grads


def _masked_ids(n):
    ids = RNG.integers(1, 9, size=(n, 6)).astype(np.int32)
    for i, k in enumerate(RNG.integers(1, 7, size=n)):
        ids[i, k:] = 0  # padded tails of several lengths (one row full length)
    ids[0, :] = RNG.integers(1, 9, size=6)
    ids[1, 2] = 0  # a masked step inside a sequence
    return ids


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("case", ["bidirectional_sequences", "bidirectional_last",
                                  "initial_state", "last"])
def test_fused_equals_unrolled_with_gradients(cell, case, unrolled):
    kind, kw = cell
    bidi = case.startswith("bidirectional")
    seqs = case == "bidirectional_sequences"
    xs = [_masked_ids(5), RNG.normal(size=(5, 2))]
    r = RNG.normal(size=(5, 2))
    results = []
    for ref in (False, True):
        unrolled(ref)
        m = _masked_model(nn, kind, kw, bidi, seqs, case == "initial_state")
        if not results:
            w = _weights(m, dtype=np.float64)
        m.set_weights(w)
        results.append((m.predict(xs, verbose=0), _grads(m, xs, r)))
    (out, grads), (ref_out, ref_grads) = results
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    for g, e in zip(grads, ref_grads):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-13)
    assert any(np.abs(g).max() > 0 for g in grads)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_fused_gradients_match_finite_differences(cell):
    kind, kw = cell
    xs = [_masked_ids(4), RNG.normal(size=(4, 2))]
    r = RNG.normal(size=(4, 2))
    m = _masked_model(nn, kind, kw, False, False, True)
    m.set_weights(_weights(m, dtype=np.float64))
    grads = _grads(m, xs, r)
    w0 = m.get_weights()
    names = list(m.weights.keys())

    def loss(ws):
        m.set_weights(ws)
        return float(np.mean(np.sum(m.predict(xs, verbose=0) * r, axis=-1)))

    eps = 1e-6
    checked = set()
    for k, (name, g) in enumerate(zip(names, grads)):
        for idx in RNG.choice(g.size, size=min(3, g.size), replace=False):
            pos = np.unravel_index(idx, g.shape)
            w = [a.copy() for a in w0]
            w[k][pos] += eps
            up = loss(w)
            w[k][pos] -= 2 * eps
            down = loss(w)
            np.testing.assert_allclose(g[pos], (up - down) / (2 * eps), rtol=1e-5, atol=1e-8,
                                       err_msg=f"{name}{pos}")
            checked.add(name.split("/")[-1] if "/" in name else name)
    m.set_weights(w0)
    assert len(checked) >= 5


def test_float32_and_float64_results_keep_their_dtype():
    for dtype in ("float32", "float64"):
        m = _rnn_model(nn, "LSTM", {}, 4, 3, 2, dtype=dtype, return_sequences=True)
        out = m.predict(RNG.normal(size=(2, 4, 3)), verbose=0)
        assert out.dtype == np.dtype(dtype)


def test_other_activations_and_unroll_keep_the_unrolled_loop():
    layer = nn.LSTM(3, activation="relu")
    assert layer._fused_cell() is None
    assert nn.SimpleRNN(3, unroll=True)._fused_cell() is None
    assert nn.GRU(3, recurrent_activation="hard_sigmoid")._fused_cell() is None
    assert nn.GRU(3, reset_after=False)._fused_cell() == "gru_reset_before"
    assert nn.SimpleRNN(3)._fused_cell() == "simple_rnn"
    # and such a layer still matches Keras
    x = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    t = _rnn_model(nn, "SimpleRNN", {"activation": "relu"}, 5, 3, 4)
    k = _rnn_model(keras, "SimpleRNN", {"activation": "relu"}, 5, 3, 4)
    w = _weights(t, scale=0.3)
    t.set_weights(w)
    k.set_weights(w)
    np.testing.assert_allclose(t.predict(x, verbose=0), _eager(k, x), rtol=1e-5, atol=1e-6)


def test_training_steps_match_keras_losses():
    def build(lib):
        i = lib.Input((None,), dtype="int32")
        x = lib.layers.Embedding(30, 8, mask_zero=True)(i) if lib is keras else \
            lib.Embedding(30, 8, mask_zero=True)(i)
        L = lib.layers if lib is keras else lib
        x = L.Bidirectional(L.LSTM(6))(x)
        out = L.Dense(1, activation="sigmoid")(x)
        m = lib.Model(i, out)
        m.compile(optimizer=lib.optimizers.Adam(1e-2), loss="binary_crossentropy")
        return m

    t, k = build(nn), build(keras)
    w = _weights(t, scale=0.3)
    t.set_weights(w)
    k.set_weights(w)
    x = RNG.integers(1, 30, size=(16, 9)).astype(np.int32)
    x[::3, 6:] = 0
    y = RNG.integers(0, 2, size=(16, 1)).astype(np.float32)
    ht = t.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    hk = k.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ht, hk, rtol=2e-4)
    assert ht[-1] < ht[0]


def _call(*args, **kwargs):
    return tessera.call_primitive("rnn_sequence", list(args), kwargs)


def test_primitive_errors_name_the_operation_and_the_values():
    x = np.zeros((2, 3, 5), np.float32)
    k = np.zeros((5, 8), np.float32)
    u = np.zeros((2, 8), np.float32)
    with pytest.raises(ValueError,
                       match=r"\[rnn_sequence\] argument 'cell' must be .*got \"lstn\""):
        _call("lstn", x, k, u)
    with pytest.raises(ValueError, match=r"\[rnn_sequence\] argument 'recurrent_kernel' must be "
                                         r"\(units, 4 \* units\).*\(2, 6\)"):
        _call("lstm", x, k, np.zeros((2, 6), np.float32))
    with pytest.raises(ValueError, match=r"\[rnn_sequence\] argument 'kernel' must be \(features, "
                                         r"3 \* units\) \(5, 12\) for x of shape \(2, 3, 5\)"):
        _call("gru", x, k, np.zeros((4, 12), np.float32))
    with pytest.raises(ValueError, match=r"\[rnn_sequence\] argument 'x' must be \(batch, "
                                         r"timesteps, features\).*got shape \(2, 5\)"):
        _call("lstm", np.zeros((2, 5)), k, u)
    with pytest.raises(ValueError, match=r"\[rnn_sequence\] argument 'mask' must have shape "
                                         r"\(batch, timesteps\) \(2, 3\), got \(3, 2\)"):
        _call("lstm", x, k, u, mask=np.ones((3, 2), bool))
    with pytest.raises(ValueError, match=r"argument 'c0' is only for cell \"lstm\""):
        _call("simple_rnn", x, np.zeros((5, 2)), np.zeros((2, 2)), c0=np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"argument 'h0' must have shape \(2, 2\), got \(1, 2\)"):
        _call("lstm", x, k, u, h0=np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"argument 'bias' must have shape \(8,\), got \(4,\)"):
        _call("lstm", x, k, u, bias=np.zeros(4))
    with pytest.raises(TypeError, match=r"\[rnn_sequence_grad\] argument 'out'"):
        tessera.call_primitive("rnn_sequence_grad", ["lstm", [None] * 4, [1, 2], x, k, u])


def test_primitive_matches_numpy_lstm():
    b, t, f, h = 3, 5, 2, 4
    x = RNG.normal(size=(b, t, f))
    kernel = RNG.normal(size=(f, 4 * h))
    bias = RNG.normal(size=4 * h)
    u = RNG.normal(size=(h, 4 * h)) * 0.5
    mask = RNG.random((b, t)) > 0.3
    out, hT, cT, _ = _call("lstm", x, kernel, u, bias=bias, mask=mask, go_backwards=True)
    xw = x @ kernel + bias

    def sig(v):
        return 1 / (1 + np.exp(-v))

    hs, cs = np.zeros((b, h)), np.zeros((b, h))
    outs = []
    for k in range(t):
        s = t - 1 - k
        z = xw[:, s] + hs @ u
        c = sig(z[:, h:2 * h]) * cs + sig(z[:, :h]) * np.tanh(z[:, 2 * h:3 * h])
        hn = sig(z[:, 3 * h:]) * np.tanh(c)
        keep = mask[:, s:s + 1]
        hs, cs = np.where(keep, hn, hs), np.where(keep, c, cs)
        outs.append(hs)
    np.testing.assert_allclose(out, np.stack(outs, 1), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hT, hs, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cT, cs, rtol=1e-12, atol=1e-14)


def test_primitive_with_no_input_features_runs_on_its_biases():
    u = RNG.normal(size=(4, 4))
    b = RNG.normal(size=4)
    for dtype in (np.float32, np.float64):
        args = ["simple_rnn", np.zeros((2, 3, 0), dtype), np.zeros((0, 4), dtype),
                u.astype(dtype), b.astype(dtype)]
        out, h, _, _ = _call(*args)
        want = np.zeros((2, 4))
        for _ in range(3):
            want = np.tanh(b + want @ u)
        np.testing.assert_allclose(h, want, rtol=1e-6, atol=1e-6)
        g = tessera.call_primitive("rnn_sequence_grad",
                                   [args[0], [None, np.ones((2, 4), dtype), None, None],
                                    [out, h, None, _call(*args)[3]]] + args[1:])
        assert g[0].shape == (2, 3, 0) and g[1].shape == (0, 4) and g[3].shape == (4,)


@pytest.mark.parametrize("cell", CELLS, ids=CELL_IDS)
def test_fused_gradients_over_several_row_blocks(cell, unrolled):
    """37 rows: three blocks of the primitive's batch blocking (16, 16, 5),
    masked, both directions; outputs and every gradient against the unrolled
    loop in float64."""
    kind, kw = cell
    xs = [_masked_ids(37), RNG.normal(size=(37, 2))]
    r = RNG.normal(size=(37, 2))
    results = []
    for ref in (False, True):
        unrolled(ref)
        m = _masked_model(nn, kind, kw, True, True, False)
        if not results:
            w = _weights(m, dtype=np.float64)
        m.set_weights(w)
        results.append((m.predict(xs, verbose=0), _grads(m, xs, r)))
    (out, grads), (ref_out, ref_grads) = results
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    for g, e in zip(grads, ref_grads):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-13)


def _primitive_case(cell, b, t, f, h, dtype, seed):
    """rnn_sequence's arguments (mask, go_backwards, sequences) and an output cotangent."""
    g = {"simple_rnn": 1, "lstm": 4}.get(cell, 3)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, t, f)).astype(dtype)
    kernel = (rng.normal(size=(f, g * h)) * 0.3).astype(dtype)
    u = (rng.normal(size=(h, g * h)) * 0.3).astype(dtype)
    bias = rng.normal(size=g * h).astype(dtype)
    rb = rng.normal(size=g * h).astype(dtype) if cell == "gru" else None
    mask = rng.random((b, t)) > 0.2
    gout = rng.normal(size=(b, t, h)).astype(dtype)
    return [x, kernel, u, bias, rb, None, None, mask, True, True, False], gout


def _primitive_results(cell, args, gout):
    out = _call(cell, *args)
    grads = tessera.call_primitive("rnn_sequence_grad", [cell, [gout, None, None, None], out] +
                                   args)
    return [np.asarray(v) for v in list(out[:3]) + list(grads) if v is not None]


@pytest.mark.parametrize("cell", CELL_IDS)
def test_packed_recurrent_products_match_float64(cell):
    """float32 with units a multiple of 32 (on AVX-512 the recurrent products
    run the packed panel kernel: 37 rows = tiles of 8 rows and a tail) against
    the same primitive in float64 (BLAS): outputs, states and every cotangent."""
    args, gout = _primitive_case(cell, 37, 6, 5, 64, np.float32, 9)
    args64 = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32
              else a for a in args]
    got = _primitive_results(cell, args, gout)
    want = _primitive_results(cell, args64, gout.astype(np.float64))
    assert len(got) == len(want)
    for g, e in zip(got, want):
        assert g.dtype == np.float32 and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-4 * np.abs(e).max())


@pytest.mark.parametrize("h", [8, 32])
@pytest.mark.parametrize("cell", CELL_IDS)
def test_primitive_bits_do_not_depend_on_the_thread_count(cell, h):
    """float32, 37 rows (three blocks), mask, go_backwards: the outputs and
    every cotangent bit for bit equal on 1 and 2 threads (h = 32: the packed
    recurrent products on AVX-512)."""
    args, gout = _primitive_case(cell, 37, 9, 5, h, np.float32, 5)
    before = tessera.num_threads()
    results = []
    try:
        for threads in (1, 2):
            tessera.set_num_threads(threads)
            results.append(_primitive_results(cell, args, gout))
    finally:
        tessera.set_num_threads(before)
    assert len(results[0]) == len(results[1])
    for a1, a2 in zip(*results):
        np.testing.assert_array_equal(a1, a2)


def _numpy_lstm(x, kernel, u, bias):
    """Keras's LSTM (i, f, c~, o; tanh and sigmoid) in float64 NumPy: all outputs,
    the final h and c."""
    b, h = x.shape[0], u.shape[0]
    xw = x.astype(np.float64) @ kernel + bias
    hs, cs, outs = np.zeros((b, h)), np.zeros((b, h)), []
    with np.errstate(over="ignore"):
        def sig(v):
            return 1 / (1 + np.exp(-v))
        for k in range(x.shape[1]):
            z = xw[:, k] + hs @ u
            cs = sig(z[:, h:2 * h]) * cs + sig(z[:, :h]) * np.tanh(z[:, 2 * h:3 * h])
            hs = sig(z[:, 3 * h:]) * np.tanh(cs)
            outs.append(hs)
    return np.stack(outs, 1), hs, cs


@pytest.mark.parametrize("scale", [1e-3, 1.0, 3.0, 30.0])
def test_lstm_float32_gates_match_float64_over_their_range(scale):
    """float32, units a multiple of 32 (on AVX-512 the gates run fused after the
    packed recurrent product, with their own expm1): pre-activations from
    ~1e-3 (the sigmoid near 1/2, tanh near its argument) to ~100 (saturated),
    the large ones from the bias (a sum of large float32 products would carry
    its own rounding), against the LSTM in float64."""
    rng = np.random.default_rng(int(scale * 1000))
    b, t, f, h = 19, 7, 6, 64
    x = (rng.normal(size=(b, t, f)) * min(scale, 1.0)).astype(np.float32)
    kernel = (rng.normal(size=(f, 4 * h)) * 0.3).astype(np.float32)
    u = (rng.normal(size=(h, 4 * h)) * 0.2).astype(np.float32)
    bias = (rng.normal(size=4 * h) * scale).astype(np.float32)
    out, hT, cT, _ = _call("lstm", x, kernel, u, bias=bias)
    want = _numpy_lstm(x, kernel.astype(np.float64), u.astype(np.float64),
                       bias.astype(np.float64))
    for got, e in zip((out, hT, cT), want):
        got = np.asarray(got)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, e, rtol=5e-5, atol=2e-6 * max(1.0, np.abs(e).max()))


def test_lstm_float32_gates_pass_nan_and_saturate_at_infinity():
    """An infinite input saturates the gates (no NaN from inf / inf); a NaN input
    makes its row's outputs NaN (so a NaN loss is seen), the other rows stay
    finite and equal to float64's."""
    rng = np.random.default_rng(5)
    b, t, f, h = 4, 3, 2, 32
    x = rng.normal(size=(b, t, f)).astype(np.float32)
    x[1, 0, 0] = np.inf
    x[2, 1, 1] = np.nan
    kernel = np.abs(rng.normal(size=(f, 4 * h))).astype(np.float32)
    u = (rng.normal(size=(h, 4 * h)) * 0.1).astype(np.float32)
    out = np.asarray(_call("lstm", x, kernel, u)[0])
    assert np.isnan(out[2, 1:]).all() and np.isfinite(out[[0, 1, 3]]).all()
    # with every kernel entry positive, +inf saturates i, f, o at 1 and c~ at 1
    np.testing.assert_allclose(out[1, 0], np.tanh(1.0), rtol=1e-6)
    want = _numpy_lstm(x[[0, 3]], kernel.astype(np.float64), u.astype(np.float64), 0.0)[0]
    np.testing.assert_allclose(out[[0, 3]], want, rtol=5e-5, atol=2e-6)


@pytest.mark.parametrize("cell", ["simple_rnn", "lstm"])
def test_weight_gradients_summed_over_many_row_groups(cell):
    """300 rows: 19 blocks of 16, so the weights' cotangents are summed from 10
    partial sums of two blocks each (the last of one): the kernels' and bias's
    cotangents against central differences in float64 (masked, go_backwards),
    and in float32 bit for bit the same on 1 and 2 threads, in deterministic
    mode too, and close to float64's."""
    args, gout = _primitive_case(cell, 300, 3, 2, 3, np.float64, 11)

    def loss(a):
        return float(np.sum(np.asarray(_call(cell, *a)[0]) * gout))

    def gradients(a, g):  # dx, dkernel, drecurrent_kernel, dbias, dh0 (and dc0)
        out = _call(cell, *a)
        return [np.asarray(v) for v in tessera.call_primitive(
            "rnn_sequence_grad", [cell, [g, None, None, None], out] + a) if v is not None]

    grads = gradients(args, gout)
    eps = 1e-6
    for arg, g in ((1, grads[1]), (2, grads[2]), (3, grads[3])):
        num = np.zeros_like(g)
        for idx in np.ndindex(g.shape):
            for sign in (1, -1):
                a = list(args)
                a[arg] = args[arg].copy()
                a[arg][idx] += sign * eps
                num[idx] += sign * loss(a) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-6 * np.abs(num).max())
    args32 = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64
              else a for a in args]
    before, det = tessera.num_threads(), tessera.deterministic()
    results = []
    try:
        for on in (False, True):
            tessera.set_deterministic(on)
            for threads in (1, 2):
                tessera.set_num_threads(threads)
                results.append(gradients(args32, gout.astype(np.float32)))
    finally:
        tessera.set_num_threads(before)
        tessera.set_deterministic(det)
    for other in results[1:]:
        for a1, a2 in zip(results[0], other):
            np.testing.assert_array_equal(a1, a2)
    for g32, g64 in zip(results[0], grads):
        np.testing.assert_allclose(g32, g64, rtol=1e-4, atol=1e-4 * np.abs(g64).max())


@pytest.mark.parametrize("cell", CELL_IDS)
def test_empty_batch_has_zero_weight_gradients(cell):
    """No rows: empty outputs and input cotangents, zero weight cotangents (as the
    sum over no rows is), not an error or a crash."""
    args, gout = _primitive_case(cell, 0, 3, 2, 4, np.float32, 3)
    out = _call(cell, *args)
    grads = tessera.call_primitive("rnn_sequence_grad", [cell, [gout, None, None, None], out] +
                                   args)
    assert np.asarray(out[0]).shape == (0, 3, 4) and np.asarray(grads[0]).shape == (0, 3, 2)
    for g, a in zip(grads[1:5], args[1:5]):
        if a is not None:
            np.testing.assert_array_equal(np.asarray(g), np.zeros_like(a))
