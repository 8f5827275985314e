"""Every layer of tessera.nn: output shape and values against a NumPy
reference written here (Keras's definitions), and the gradients of its
weights against central differences, in float64."""

import numpy as np
import pytest

import tessera
from tessera import nn

RNG = np.random.default_rng(7)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _softmax(z, axis=-1):
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def _set_random_weights(layer, rng, scale=0.5):
    layer.set_weights([rng.normal(size=w.shape) * scale for w in layer.get_weights()])


def _grad_check(model, xs, rng, coords=4, rtol=2e-5, atol=1e-7):
    """The gradient of L = mean over samples of sum(output * r) with respect to
    every weight, from one SGD step with learning rate 1, against central
    differences of L (evaluate)."""
    outs = model.predict(xs, batch_size=len(np.asarray(xs[0] if isinstance(xs, list) else xs)))
    r = rng.normal(size=np.shape(outs))
    n = len(r)

    def loss_fn(y_true, y_pred):
        return np.sum(y_pred * y_true, axis=-1)

    model.compile(tessera.optim.SGD(1.0), loss_fn)
    w0 = model.get_weights()
    model.fit(xs, r, batch_size=n, epochs=1, shuffle=False, verbose=0)
    grads = [a - b for a, b in zip(w0, model.get_weights())]
    model.set_weights(w0)
    trainable = set(model._params(True))
    names = list(model.weights.keys())
    eps = 1e-6
    checked = 0
    for k, (name, g) in enumerate(zip(names, grads)):
        if name not in trainable:
            np.testing.assert_array_equal(g, 0.0)
            continue
        flat = rng.choice(g.size, size=min(coords, g.size), replace=False)
        for idx in flat:
            pos = np.unravel_index(idx, g.shape)
            w = [a.copy() for a in w0]
            w[k][pos] += eps
            model.set_weights(w)
            up = model.evaluate(xs, r, batch_size=n, verbose=0)
            w[k][pos] -= 2 * eps
            model.set_weights(w)
            down = model.evaluate(xs, r, batch_size=n, verbose=0)
            fd = (up - down) / (2 * eps)
            np.testing.assert_allclose(g[pos], fd, rtol=rtol, atol=atol,
                                       err_msg=f"{name}{pos}")
            checked += 1
    model.set_weights(w0)
    assert checked > 0


def _model(layer, shapes, dtypes=None, **call_kwargs):
    ins = [nn.Input(s, dtype=(dtypes or [None] * len(shapes))[i]) for i, s in enumerate(shapes)]
    out = layer(ins if len(ins) > 1 and getattr(layer, "multi_input", False) and
                not call_kwargs.get("_positional") else ins[0], **call_kwargs)
    return nn.Model(ins if len(ins) > 1 else ins[0], out, dtype="float64")


def test_dense_with_initializers_and_regularizer():
    x = RNG.normal(size=(6, 5))
    layer = nn.Dense(3, activation="tanh", kernel_initializer="he_normal",
                     kernel_regularizer=nn.regularizers.L2(0.1))
    m = _model(layer, [(5,)])
    w, b = layer.get_weights()
    np.testing.assert_allclose(m.predict(x), np.tanh(x @ w + b), rtol=1e-12)
    _grad_check(_model(nn.Dense(3, activation="gelu"), [(5,)]), x, RNG)


@pytest.mark.parametrize("activation", ["relu", "sigmoid", "softmax", "elu", "silu", "selu",
                                        "softplus", "gelu", "relu6", "hard_sigmoid", "mish"])
def test_activations_match_keras(activation):
    from math import erf
    x = RNG.normal(size=(4, 6)) * 3
    ref = {
        "relu": np.maximum(x, 0), "sigmoid": _sigmoid(x), "softmax": _softmax(x),
        "elu": np.where(x > 0, x, np.exp(x) - 1), "silu": x * _sigmoid(x),
        "selu": 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1)),
        "softplus": np.log1p(np.exp(x)),
        "gelu": x * 0.5 * (1 + np.vectorize(erf)(x / np.sqrt(2))),
        "relu6": np.clip(x, 0, 6), "hard_sigmoid": np.clip(x + 3, 0, 6) / 6,
        "mish": x * np.tanh(np.log1p(np.exp(x))),
    }[activation]
    # a float64 layer computes in float64: NumPy's float64 values, tightly
    np.testing.assert_allclose(nn.Activation(activation, dtype="float64")(x), ref, rtol=1e-9,
                               atol=1e-12)
    # by default, as Keras, the float64 input is cast to the layer's float32: NumPy's
    # values of the float32-rounded input, at float32's precision
    x32 = x.astype(np.float32).astype(np.float64)
    ref32 = np.asarray(nn.Activation(activation, dtype="float64")(x32))
    out = nn.Activation(activation)(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref32, rtol=2e-6, atol=1e-6)


def test_a_python_function_as_activation_is_traced():
    x = RNG.normal(size=(4, 6))
    out = nn.Dense(3, activation=lambda z: z * np.tanh(z), kernel_initializer="ones",
                   bias_initializer="zeros", dtype="float64")(x)
    s = x.sum(axis=1, keepdims=True).repeat(3, axis=1)
    np.testing.assert_allclose(out, s * np.tanh(s), rtol=1e-12)


def _conv1d_ref(x, w, stride=1, groups=1):
    n, t, c = x.shape
    k, cg, f = w.shape
    fg = f // groups
    out_t = (t - k) // stride + 1
    y = np.zeros((n, out_t, f))
    for o in range(f):
        g = o // fg
        for i in range(out_t):
            y[:, i, o] = np.einsum("nkc,kc->n", x[:, i * stride:i * stride + k,
                                                  g * cg:(g + 1) * cg], w[:, :, o])
    return y


def test_conv1d_with_groups():
    x = RNG.normal(size=(3, 10, 4))
    layer = nn.Conv1D(6, 3, strides=2, groups=2)
    m = _model(layer, [(10, 4)])
    w, b = layer.get_weights()
    assert w.shape == (3, 2, 6)
    np.testing.assert_allclose(m.predict(x), _conv1d_ref(x, w, 2, 2) + b, rtol=1e-10)
    _grad_check(m, x, RNG)


def test_conv2d_transpose_and_depthwise():
    x = RNG.normal(size=(2, 4, 5, 3))
    layer = nn.Conv2DTranspose(2, (2, 3), strides=2)
    m = _model(layer, [(4, 5, 3)])
    w, b = layer.get_weights()
    assert w.shape == (2, 3, 2, 3)
    out = np.zeros((2, (4 - 1) * 2 + 2, (5 - 1) * 2 + 3, 2))
    for i in range(4):
        for j in range(5):
            out[:, i * 2:i * 2 + 2, j * 2:j * 2 + 3, :] += np.einsum("nc,abfc->nabf",
                                                                     x[:, i, j], w)
    assert m.output_shape == (None,) + out.shape[1:]
    np.testing.assert_allclose(m.predict(x), out + b, rtol=1e-10)
    _grad_check(m, x, RNG)

    dw = nn.DepthwiseConv2D(2, depth_multiplier=2)
    m = _model(dw, [(4, 5, 3)])
    k, b = dw.get_weights()
    ref = np.zeros((2, 3, 4, 6))
    for c in range(3):
        for j in range(2):
            for a in range(3):
                for bb in range(4):
                    ref[:, a, bb, c * 2 + j] = np.einsum("nhw,hw->n", x[:, a:a + 2, bb:bb + 2, c],
                                                         k[:, :, c, j])
    np.testing.assert_allclose(m.predict(x), ref + b, rtol=1e-10)
    _grad_check(m, x, RNG)


def test_embedding_layer_norm_and_pooling():
    ids = RNG.integers(0, 7, size=(4, 5))
    emb = nn.Embedding(7, 3)
    m = _model(emb, [(5,)], ["int64"])
    table = emb.get_weights()[0]
    np.testing.assert_array_equal(m.predict(ids), table[ids])
    with pytest.raises(IndexError):
        m.predict(ids + 10)
    _grad_check(m, ids, RNG)

    x = RNG.normal(size=(4, 5, 6))
    ln = nn.LayerNormalization(epsilon=1e-5)
    m = _model(ln, [(5, 6)])
    _set_random_weights(ln, RNG)
    g, b = ln.get_weights()
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(m.predict(x), (x - mu) / np.sqrt(var + 1e-5) * g + b, rtol=1e-9)
    _grad_check(m, x, RNG)
    for cls, ref in ((nn.GlobalAveragePooling1D, x.mean(1)), (nn.GlobalMaxPooling1D, x.max(1))):
        np.testing.assert_allclose(cls(dtype="float64")(x), ref, rtol=1e-12)
    x4 = RNG.normal(size=(2, 3, 4, 5))
    np.testing.assert_allclose(nn.GlobalAveragePooling2D(dtype="float64")(x4), x4.mean((1, 2)),
                               rtol=1e-12)
    np.testing.assert_allclose(nn.GlobalMaxPooling2D(keepdims=True, dtype="float64")(x4),
                               x4.max((1, 2), keepdims=True), rtol=1e-12)
    # (by default in float32, Keras's cast of the input: NumPy's float32 values)
    x32 = x4.astype(np.float32)
    np.testing.assert_allclose(nn.GlobalAveragePooling2D()(x4), x32.mean((1, 2)), rtol=1e-6)
    np.testing.assert_array_equal(nn.GlobalMaxPooling2D()(x4), x32.max((1, 2)))


def test_shape_layers():
    x = RNG.normal(size=(2, 3, 4))
    x32 = x.astype(np.float32)  # (Keras's layers cast a float64 input to their float32)
    np.testing.assert_array_equal(nn.Reshape((4, -1))(x), x32.reshape(2, 4, 3))
    np.testing.assert_array_equal(nn.Permute((2, 1))(x), x32.transpose(0, 2, 1))
    np.testing.assert_array_equal(nn.RepeatVector(3)(x[:, 0]),
                                  np.repeat(x32[:, None, 0], 3, axis=1))
    assert nn.Reshape((4, -1))(x).dtype == np.float32
    np.testing.assert_array_equal(nn.Permute((2, 1), dtype="float64")(x), x.transpose(0, 2, 1))
    with pytest.raises(ValueError, match=r"\[Reshape\] cannot reshape samples of shape \(3, 4\)"):
        nn.Reshape((5, -1))(nn.Input((3, 4)))
    with pytest.raises(ValueError, match=r"\[Permute\] dims must be a permutation"):
        nn.Permute((0, 1))


def test_merging_layers():
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    ia, ib = nn.Input((4,)), nn.Input((4,))
    cases = [(nn.Add(), a + b), (nn.Subtract(), a - b), (nn.Multiply(), a * b),
             (nn.Average(), (a + b) / 2), (nn.Maximum(), np.maximum(a, b)),
             (nn.Minimum(), np.minimum(a, b)), (nn.Concatenate(), np.concatenate([a, b], 1)),
             (nn.Dot(axes=1), np.sum(a * b, 1, keepdims=True))]
    for layer, ref in cases:
        m = nn.Model([ia, ib], layer([ia, ib]), dtype="float64")
        np.testing.assert_allclose(m.predict([a, b]), ref, rtol=1e-12, err_msg=layer.kind)
    with pytest.raises(ValueError, match=r"\[Add\] the inputs' shapes .* do not match"):
        nn.Add()([ia, nn.Input((5,))])
    with pytest.raises(ValueError, match=r"\[Concatenate\] the inputs' shapes"):
        nn.Concatenate(axis=1)([nn.Input((2, 3)), nn.Input((3, 4))])


def _rnn_ref(kind, x, weights, units, return_sequences, go_backwards=False):
    n, t, _ = x.shape
    h = np.zeros((n, units))
    c = np.zeros((n, units))
    W, U, b = weights
    outs = []
    steps = range(t - 1, -1, -1) if go_backwards else range(t)
    for s in steps:
        xt = x[:, s]
        if kind == "SimpleRNN":
            h = np.tanh(xt @ W + h @ U + b)
        elif kind == "LSTM":
            z = xt @ W + h @ U + b
            i, f, g, o = (z[:, k * units:(k + 1) * units] for k in range(4))
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        else:  # GRU, reset_after
            xz = xt @ W + b[0]
            hu = h @ U + b[1]
            z = _sigmoid(xz[:, :units] + hu[:, :units])
            r = _sigmoid(xz[:, units:2 * units] + hu[:, units:2 * units])
            hh = np.tanh(xz[:, 2 * units:] + r * hu[:, 2 * units:])
            h = z * h + (1 - z) * hh
        outs.append(h)
    return np.stack(outs, 1) if return_sequences else h


@pytest.mark.parametrize("cls", [nn.SimpleRNN, nn.LSTM, nn.GRU])
@pytest.mark.parametrize("return_sequences", [False, True])
def test_recurrent_layers_match_keras_formulas(cls, return_sequences):
    x = RNG.normal(size=(3, 6, 4))
    layer = cls(5, return_sequences=return_sequences, go_backwards=return_sequences)
    m = _model(layer, [(6, 4)])
    _set_random_weights(layer, RNG)
    ref = _rnn_ref(cls.__name__, x, layer.get_weights(), 5, return_sequences,
                   go_backwards=return_sequences)
    np.testing.assert_allclose(m.predict(x), ref, rtol=1e-9, atol=1e-12)
    _grad_check(m, x, RNG, coords=3)


def test_lstm_defaults_and_return_state():
    layer = nn.LSTM(3, return_state=True)
    out, h, c = layer(nn.Input((4, 2)))
    assert out.shape == h.shape == c.shape == (None, 3)
    # Keras's unit_forget_bias: the forget gate's bias starts at 1
    lstm = nn.LSTM(3)
    nn.Model(i := nn.Input((4, 2)), lstm(i))
    b = lstm.get_weights()[2]
    np.testing.assert_array_equal(b, [0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    U = lstm.get_weights()[1]
    np.testing.assert_allclose(U.T @ U if U.shape[0] >= U.shape[1] else U @ U.T,
                               np.eye(min(U.shape)), atol=1e-5)  # orthogonal
    with pytest.raises(ValueError, match=r"\[LSTM\] recurrent_dropout must be in \[0, 1\), "
                                         r"got 1.0"):
        nn.LSTM(3, recurrent_dropout=1.0)


def _mha_ref(q_in, v_in, weights, heads, key_dim, causal=False, mask=None):
    wq, bq, wk, bk, wv, bv, wo, bo = weights
    q = np.einsum("btd,dhk->bhtk", q_in, wq) + bq[None, :, None, :]
    k = np.einsum("btd,dhk->bhtk", v_in, wk) + bk[None, :, None, :]
    v = np.einsum("btd,dhk->bhtk", v_in, wv) + bv[None, :, None, :]
    s = np.einsum("bhqk,bhsk->bhqs", q / np.sqrt(key_dim), k)
    keep = np.ones(s.shape[-2:])
    if causal:
        keep = np.tril(keep)
    keep = keep[None, None] * (1.0 if mask is None else mask[:, None])
    s = s + (1.0 - keep) * -1e9
    p = _softmax(s)
    o = np.einsum("bhqs,bhsv->bqhv", p, v)
    return np.einsum("bqhv,hvd->bqd", o, wo) + bo, p


def test_multi_head_attention_matches_keras():
    x = RNG.normal(size=(2, 5, 6))
    mha = nn.MultiHeadAttention(num_heads=2, key_dim=3)
    inp = nn.Input((5, 6))
    out, scores = mha(inp, inp, use_causal_mask=True, return_attention_scores=True)
    m = nn.Model(inp, [out, scores], dtype="float64")
    _set_random_weights(mha, RNG)
    assert [w.shape for w in mha.get_weights()] == [(6, 2, 3), (2, 3), (6, 2, 3), (2, 3),
                                                    (6, 2, 3), (2, 3), (2, 3, 6), (6,)]
    y, p = m.predict(x)
    ry, rp = _mha_ref(x, x, mha.get_weights(), 2, 3, causal=True)
    np.testing.assert_allclose(y, ry, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(p, rp, rtol=1e-9, atol=1e-12)
    assert np.all(p[:, :, 0, 1:] == 0)  # causal: the first step sees itself only

    # a key padding mask (batch, 1, Tv) and cross attention
    q = RNG.normal(size=(2, 3, 4))
    pad = np.ones((2, 1, 5))
    pad[0, 0, 3:] = 0
    iq, iv, im = nn.Input((3, 4)), nn.Input((5, 6)), nn.Input((1, 5))
    cross = nn.MultiHeadAttention(2, 3, value_dim=2)
    m2 = nn.Model([iq, iv, im], cross(iq, iv, attention_mask=im), dtype="float64")
    _set_random_weights(cross, RNG)
    ry, _ = _mha_ref(q, x, cross.get_weights(), 2, 3, mask=pad)
    np.testing.assert_allclose(m2.predict([q, x, pad]), ry, rtol=1e-9, atol=1e-12)
    _grad_check(nn.Model(inp, nn.MultiHeadAttention(2, 3)(inp, inp, use_causal_mask=True),
                         dtype="float64"), x, RNG, coords=2)


def test_batch_normalization_fuses_a_following_relu():
    # BatchNormalization -> Activation("relu") runs as one batch_norm_relu; the
    # same step with the relu as a function (not fused) gives the same weights,
    # and the moving averages follow Keras (momentum 0.99) from the batch's
    # statistics.
    x = RNG.normal(size=(16, 4)) * 2 + 1
    y = RNG.normal(size=(16, 3))

    def build(relu):
        inp = nn.Input((4,))
        h = nn.Activation(relu)(nn.BatchNormalization()(nn.Dense(5)(inp)))
        m = nn.Model(inp, nn.Dense(3)(h), dtype="float64", seed=3)
        m.compile(tessera.optim.SGD(0.1), "mse")
        return m

    fused, apart = build("relu"), build(lambda t: np.maximum(t, 0.0))
    text = fused._loss_fn(fused._params(True), fused._params(False))[0]
    assert "batch_norm_relu(" in text and " relu(" not in text and "(relu(" not in text
    assert "batch_norm_relu(" not in apart._loss_fn(apart._params(True), apart._params(False))[0]
    kernel, bias = fused.get_weights()[:2]
    h = x @ kernel + bias
    for m in (fused, apart):
        m.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(fused.get_weights(), apart.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    w = fused.get_weights()
    np.testing.assert_allclose(w[4], 0.01 * h.mean(0), rtol=1e-10)
    np.testing.assert_allclose(w[5], 0.99 + 0.01 * h.var(0), rtol=1e-10)
    np.testing.assert_allclose(fused.predict(x), apart.predict(x), rtol=1e-12)


def _residual_model(relu, bn_first, project, conv=False, frozen=False):
    """Dense (or Conv2D) -> residual block ending BatchNormalization -> Add ->
    Activation(relu), the batch norm first or second in the Add, the shortcut
    the block's input or (project) a batch norm of its own."""
    if conv:
        inp = nn.Input((6, 6, 16))
        layer = lambda: nn.Conv2D(16, 3, padding="same", use_bias=False)  # noqa: E731
    else:
        inp = nn.Input((4,))
        layer = lambda: nn.Dense(5)  # noqa: E731
    h = layer()(inp)
    bn = nn.BatchNormalization()
    bn.trainable = not frozen
    b = bn(layer()(h))
    s = nn.BatchNormalization()(layer()(h)) if project else h
    out = nn.Activation(relu)(nn.Add()([b, s] if bn_first else [s, b]))
    if conv:
        out = nn.GlobalAveragePooling2D()(out)
    m = nn.Model(inp, nn.Dense(3)(out), dtype="float32" if conv else "float64", seed=3)
    m.compile(tessera.optim.SGD(0.1), "mse")
    return m


def _program(m):
    return m._loss_fn(m._params(True), m._params(False))[0]


@pytest.mark.parametrize("bn_first", [True, False])
@pytest.mark.parametrize("project", [False, True])
@pytest.mark.parametrize("frozen", [False, True])
def test_batch_normalization_add_relu_fuses_the_end_of_a_residual_block(bn_first, project,
                                                                       frozen):
    # BatchNormalization -> Add -> Activation("relu") runs as one
    # batch_norm_add_relu; the same model with the relu as a function (not
    # fused) trains to the same weights and predicts the same.
    x = RNG.normal(size=(16, 4)) * 2 + 1
    y = RNG.normal(size=(16, 3))
    fused = _residual_model("relu", bn_first, project, frozen=frozen)
    apart = _residual_model(lambda t: np.maximum(t, 0.0), bn_first, project, frozen=frozen)
    assert _program(fused).count("batch_norm_add_relu(") == 1
    assert "batch_norm_add_relu(" not in _program(apart)
    for m in (fused, apart):
        m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    for a, b in zip(fused.get_weights(), apart.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fused.predict(x), apart.predict(x), rtol=1e-10, atol=1e-12)


def test_batch_normalization_add_relu_with_convolutions_in_float32():
    # The ResNet case: Conv2D (Winograd's shapes, both gradients in one pass)
    # -> BatchNormalization -> Add -> ReLU, in float32.
    x = RNG.normal(size=(8, 6, 6, 16)).astype(np.float32)
    y = RNG.normal(size=(8, 3)).astype(np.float32)
    fused = _residual_model("relu", True, True, conv=True)
    apart = _residual_model(lambda t: np.maximum(t, 0.0), True, True, conv=True)
    assert "batch_norm_add_relu(" in _program(fused)
    for m in (fused, apart):
        m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    for a, b in zip(fused.get_weights(), apart.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_batch_normalization_add_relu_not_fused_when_read_elsewhere():
    # The batch norm's output also read by another layer, the Add's by two
    # layers, an Add of three inputs, or the Add a model output: no fusion.
    inp = nn.Input((4,))
    h = nn.Dense(4)(inp)
    b = nn.BatchNormalization()(nn.Dense(4)(h))
    a = nn.Add()([b, h])
    m1 = nn.Model(inp, [nn.Activation("relu")(a), nn.Dense(2)(b)], dtype="float64")
    b2 = nn.BatchNormalization()(nn.Dense(4)(h))
    a2 = nn.Add()([b2, h])
    m2 = nn.Model(inp, [nn.Activation("relu")(a2), a2], dtype="float64")
    b3 = nn.BatchNormalization()(nn.Dense(4)(h))
    m3 = nn.Model(inp, nn.Activation("relu")(nn.Add()([b3, h, h])), dtype="float64")
    for m in (m1, m2, m3):
        m.compile(tessera.optim.SGD(0.1), "mse")
        assert "batch_norm_add_relu(" not in _program(m)


def test_batch_normalization_inference_and_frozen():
    x = RNG.normal(size=(8, 3))
    bn = nn.BatchNormalization()
    m = _model(bn, [(3,)])
    _set_random_weights(bn, RNG)
    g, b, mean, var = bn.get_weights()
    var = np.abs(var) + 0.5
    bn.set_weights([g, b, mean, var])
    np.testing.assert_allclose(m.predict(x), g * (x - mean) / np.sqrt(var + 1e-3) + b,
                               rtol=1e-10)
    # trainable=False: inference mode in training too, and its weights stay
    inp = nn.Input((3,))
    m = nn.Model(inp, nn.Dense(3)(bn(inp)), dtype="float64")
    bn.trainable = False
    m.compile(tessera.optim.SGD(0.1), "mse")
    before = bn.get_weights()
    dense_before = m.get_weights()[4]
    m.fit(x, x, epochs=1, verbose=0)
    for a, c in zip(before, bn.get_weights()):
        np.testing.assert_array_equal(a, c)
    assert not np.array_equal(dense_before, m.get_weights()[4])
