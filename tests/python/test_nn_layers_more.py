"""Keras layers added for issue 30 (activation, Lambda, reshaping, noise,
separable convolutions, attention, normalization, channels_first), each
against Keras 3 on JAX as the oracle: the same model built in both, the
same weights (set_weights), outputs compared; names, configs, summaries,
and a few training steps where the layer has weights or acts in training."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn  # noqa: E402

RNG = np.random.default_rng(30)


def _x(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _both(build, randomize=True, scale=0.4):
    """The model `build(lib)` made in tessera and in Keras, with tessera's
    (random) weights copied into Keras's."""
    t = build(nn)
    k = build(keras)
    if randomize:
        t.set_weights([RNG.normal(size=w.shape).astype(np.float32) * scale
                       for w in t.get_weights()])
    k.set_weights(t.get_weights())
    return t, k


def _single(layer_of, shape):
    """build(lib): Input(shape) -> layer_of(lib)."""
    def build(lib):
        inp = lib.Input(shape=shape)
        return lib.Model(inp, layer_of(lib)(inp))
    return build


def _same(t, k, x, rtol=1e-5, atol=1e-6):
    got = t.predict(x, verbose=0)
    want = k.predict(x, verbose=0)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _keras_sgd(k, x, y, lr, steps):
    """`steps` plain SGD steps of Keras's model on the mean squared error
    plus its layers' losses (what keras's fit with SGD(lr) and "mse" does),
    the gradient from JAX: one XLA compilation instead of Keras's eager
    fit compiling each operation of a new model."""
    import jax  # noqa: PLC0415  (Keras's backend here)
    import jax.numpy as jnp  # noqa: PLC0415

    trainable = [v.value for v in k.trainable_variables]
    fixed = [v.value for v in k.non_trainable_variables]

    def loss(tv):
        out, _, losses = k.stateless_call(tv, fixed, x, return_losses=True, training=True)
        return jnp.mean((out - y) ** 2) + sum(losses)

    grad = jax.jit(jax.grad(loss))
    for _ in range(steps):
        trainable = [w - lr * g for w, g in zip(trainable, grad(trainable))]
    for v, w in zip(k.trainable_variables, trainable):
        v.assign(w)


def _train_same(t, k, x, y, steps=3, lr=0.1, rtol=2e-4, atol=1e-5):
    """A few SGD steps on the mean squared error in both: the same weights
    after them."""
    t.compile(nn.optimizers.SGD(lr), "mse")
    t.fit(x, y, batch_size=len(y), epochs=steps, shuffle=False, verbose=0)
    _keras_sgd(k, x, y, lr, steps)
    for a, b in zip(t.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _base_name(name: str) -> str:
    """A default name without its counter: dense_3 -> dense."""
    head, _, tail = name.rpartition("_")
    return head if head and tail.isdigit() else name


def _names_and_config(t_layer, k_layer):
    """Keras's default name and a get_config/from_config round trip."""
    assert _base_name(t_layer.name) == _base_name(k_layer.name)
    again = type(t_layer).from_config(t_layer.get_config())
    assert type(again) is type(t_layer)
    return again


# ------------------------------------------------------------ 1. activations


@pytest.mark.parametrize("make", [
    lambda L: L.ReLU(),
    lambda L: L.ReLU(max_value=1.5),
    lambda L: L.ReLU(negative_slope=0.2),
    lambda L: L.ReLU(max_value=6.0, negative_slope=0.1, threshold=0.5),
    lambda L: L.ReLU(threshold=0.3),
    lambda L: L.LeakyReLU(),
    lambda L: L.LeakyReLU(negative_slope=0.05),
    lambda L: L.ELU(alpha=0.7),
    lambda L: L.Softmax(),
    lambda L: L.Softmax(axis=1),
    lambda L: L.Softmax(axis=[1, 2]),
    lambda L: L.PReLU(),
    lambda L: L.PReLU(shared_axes=[1]),
], ids=["relu", "relu-max", "relu-slope", "relu-all", "relu-threshold", "leaky", "leaky-0.05",
        "elu", "softmax", "softmax-1", "softmax-12", "prelu", "prelu-shared"])
def test_activation_layers_match_keras(make):
    t, k = _both(_single(lambda lib: make(lib.layers), (3, 4)), scale=0.5)
    x = _x(5, 3, 4, scale=2.0)
    _same(t, k, x)
    _names_and_config(t.layers[-1], k.layers[-1])


def test_relu_names_and_bad_arguments():
    assert nn.layers.ReLU().name.startswith("re_lu")
    assert nn.layers.LeakyReLU().name.startswith("leaky_re_lu")
    assert nn.layers.PReLU().name.startswith("p_re_lu")
    with pytest.raises(ValueError, match=r"\[ReLU\] max_value must be a number >= 0"):
        nn.layers.ReLU(max_value=-1)
    with pytest.raises(ValueError, match=r"\[LeakyReLU\] negative_slope"):
        nn.layers.LeakyReLU(negative_slope=-0.1)
    with pytest.raises(ValueError, match=r"\[PReLU\] shared_axes"):
        nn.layers.PReLU(shared_axes=[0])


def test_softmax_mask_matches_keras():
    def build(lib):
        x = lib.Input(shape=(3, 5))
        m = lib.Input(shape=(3, 5))
        return lib.Model([x, m], lib.layers.Softmax()(x, mask=m))

    t, k = build(nn), build(keras)
    x = _x(4, 3, 5)
    m = (RNG.random((4, 3, 5)) > 0.4).astype(np.float32)
    m[0, 1] = 0  # a whole row masked: zeros
    _same(t, k, [x, m])


def test_prelu_trains_as_keras():
    def build(lib):
        inp = lib.Input(shape=(4,))
        h = lib.layers.Dense(6)(inp)
        h = lib.layers.PReLU(alpha_initializer="ones")(h)
        return lib.Model(inp, lib.layers.Dense(2)(h))

    t, k = _both(build)
    assert t.count_params() == k.count_params() == 4 * 6 + 6 + 6 + 6 * 2 + 2
    _train_same(t, k, _x(8, 4), _x(8, 2))


# ------------------------------------------------------------ 2. Lambda


def test_lambda_matches_keras_and_infers_its_shape():
    def build(lib):
        inp = lib.Input(shape=(3, 4))
        h = lib.layers.Lambda(lambda z, k: lib.ops.sum(z * z, axis=-1) * k,
                              arguments={"k": 0.5})(inp)
        h = lib.layers.Dense(2)(h)
        h = lib.layers.Lambda(lambda z: lib.ops.concatenate([z, lib.ops.tanh(z)], axis=-1))(h)
        return lib.Model(inp, h)

    t, k = _both(build)
    assert [type(l).__name__ for l in t.layers] == [type(l).__name__ for l in k.layers]
    lam = t.layers[1]  # (Keras lists its InputLayer first, as tessera does)
    assert lam.name.startswith("lambda") and lam.output_shape == (None, 3)
    assert t.output_shape == (None, 4)
    x = _x(5, 3, 4)
    _same(t, k, x)
    _train_same(t, k, x, _x(5, 4))  # the gradient flows through the functions
    y = nn.layers.Lambda(lambda z: nn.ops.square(z) + 1.0)(x)  # eager, on arrays
    np.testing.assert_allclose(y, x * x + 1.0, rtol=1e-6)


def test_lambda_errors_name_the_function():
    inp = nn.Input(shape=(3,))

    def branchy(z):
        return z if z > 0 else -z

    with pytest.raises(TypeError, match=r"\[Lambda\].*branchy.*test_nn_layers_more.py:\d+.*"
                                        "cannot be translated"):
        nn.layers.Lambda(branchy)(inp)
    with pytest.raises(TypeError, match=r"\[Lambda\].*must return tensors.*float"):
        nn.layers.Lambda(lambda z: 1.0)(inp)
    with pytest.raises(ValueError, match=r"output_shape \(None, 4\) differs .* \(None, 3\)"):
        nn.layers.Lambda(lambda z: z * 2.0, output_shape=(4,))(inp)
    with pytest.raises(TypeError, match=r"\[Lambda\] function must be callable"):
        nn.layers.Lambda(3)


def _twice(z):
    return z * 2.0


def test_lambda_saving_refuses_bytecode_but_saves_registered_functions(tmp_path):
    inp = nn.Input(shape=(3,))
    model = nn.Model(inp, nn.layers.Lambda(lambda z: z + 1.0)(inp))
    with pytest.raises(TypeError, match="cannot save the function.*bytecode.*safe_mode.*"
                                        "register_keras_serializable"):
        model.save(str(tmp_path / "a.keras"))
    assert not os.path.exists(tmp_path / "a.keras")
    fn = nn.register_keras_serializable("test_layers_more")(_twice)
    model = nn.Model(inp, nn.layers.Lambda(fn)(inp))
    model.save(str(tmp_path / "b.keras"))
    x = _x(4, 3)
    np.testing.assert_allclose(nn.load_model(str(tmp_path / "b.keras")).predict(x, verbose=0),
                               2 * x, rtol=1e-6)


# ------------------------------------------------------------ 3. reshaping


@pytest.mark.parametrize("make, shape", [
    (lambda L: L.ZeroPadding1D(), (4, 3)),
    (lambda L: L.ZeroPadding1D((2, 0)), (4, 3)),
    (lambda L: L.ZeroPadding2D(), (3, 4, 2)),
    (lambda L: L.ZeroPadding2D(((1, 0), (2, 3))), (3, 4, 2)),
    (lambda L: L.ZeroPadding2D((1, 2), data_format="channels_first"), (2, 3, 4)),
    (lambda L: L.Cropping1D(), (5, 3)),
    (lambda L: L.Cropping1D((0, 2)), (5, 3)),
    (lambda L: L.Cropping2D(((1, 0), (1, 2))), (4, 5, 2)),
    (lambda L: L.Cropping2D(1, data_format="channels_first"), (2, 4, 5)),
    (lambda L: L.UpSampling1D(3), (4, 2)),
    (lambda L: L.UpSampling2D(), (3, 4, 2)),
    (lambda L: L.UpSampling2D((1, 3), data_format="channels_first"), (2, 3, 4)),
    (lambda L: L.UpSampling2D((2, 3), interpolation="bilinear"), (3, 4, 2)),
    (lambda L: L.UpSampling2D(2, data_format="channels_first", interpolation="bilinear"),
     (2, 3, 4)),
], ids=["zp1", "zp1-left", "zp2", "zp2-pairs", "zp2-cf", "crop1", "crop1-end", "crop2",
        "crop2-cf", "up1", "up2", "up2-cf", "up2-bilinear", "up2-bilinear-cf"])
def test_reshaping_layers_match_keras(make, shape):
    t, k = _both(_single(lambda lib: make(lib.layers), shape))
    _same(t, k, _x(3, *shape))
    assert t.output_shape == k.output_shape
    _names_and_config(t.layers[-1], k.layers[-1])


def test_reshaping_layers_train_in_a_convnet_as_keras():
    def build(lib):
        inp = lib.Input(shape=(5, 5, 2))
        h = lib.layers.ZeroPadding2D(1)(inp)
        h = lib.layers.Conv2D(3, 3)(h)
        h = lib.layers.UpSampling2D(interpolation="bilinear")(h)
        h = lib.layers.Cropping2D(((1, 2), (0, 1)))(h)
        return lib.Model(inp, lib.layers.Dense(2)(lib.layers.Flatten()(h)))

    t, k = _both(build)
    # Data of its own, not the module's stream: with lr 0.1 on other draws the weights grew
    # to 1e4 in three steps, where float32's rounding order alone passes the tolerance.
    rng = np.random.default_rng(11)
    x = rng.normal(size=(4, 5, 5, 2)).astype(np.float32)
    _same(t, k, x)
    _train_same(t, k, x, rng.normal(size=(4, 2)).astype(np.float32), lr=0.02)
    assert max(np.abs(w).max() for w in t.get_weights()) < 10.0  # a few steps, not a blow-up


def test_reshaping_errors():
    with pytest.raises(ValueError, match=r"\[ZeroPadding2D\] padding must be an int"):
        nn.layers.ZeroPadding2D((1, 2, 3))
    with pytest.raises(ValueError, match=r"\[Cropping1D\] cropping \(\(3, 2\),\) must leave"):
        nn.layers.Cropping1D((3, 2))(nn.Input(shape=(5, 2)))
    with pytest.raises(ValueError, match=r"\[UpSampling2D\] interpolation 'bicubic'"):
        nn.layers.UpSampling2D(interpolation="bicubic")
    with pytest.raises(ValueError, match=r"data_format must be"):
        nn.layers.Cropping2D(data_format="NCHW")


# ------------------------------------------------------------ 4. noise


NOISE = {
    "SpatialDropout1D": (lambda L: L.SpatialDropout1D(0.5), (6, 40)),
    "SpatialDropout2D": (lambda L: L.SpatialDropout2D(0.5), (3, 4, 40)),
    "SpatialDropout2D-cf": (lambda L: L.SpatialDropout2D(0.5, data_format="channels_first"),
                            (40, 3, 4)),
    "GaussianNoise": (lambda L: L.GaussianNoise(0.3), (400,)),
    "GaussianDropout": (lambda L: L.GaussianDropout(0.2), (400,)),
    "AlphaDropout": (lambda L: L.AlphaDropout(0.2), (400,)),
}


@pytest.mark.parametrize("name", list(NOISE))
def test_noise_layers_are_identity_in_inference_as_keras(name):
    make, shape = NOISE[name]
    t, k = _both(_single(lambda lib: make(lib.layers), shape))
    x = _x(3, *shape)
    _same(t, k, x, rtol=0, atol=0)
    np.testing.assert_array_equal(t.predict(x, verbose=0), x)
    _names_and_config(t.layers[-1], k.layers[-1])


def _training_output(make, shape, x):
    """The layer's output in training (training=True forced on the call)."""
    inp = nn.Input(shape=shape)
    model = nn.Model(inp, make(nn.layers)(inp, training=True))
    return np.asarray(model(x, training=True))  # (predict and a call without training= run
    # it in inference: a functional graph's own training overrides a node's, as Keras)


def test_spatial_dropout_drops_whole_channels_in_training():
    for name, axes in (("SpatialDropout1D", (1,)), ("SpatialDropout2D", (1, 2)),
                       ("SpatialDropout2D-cf", (2, 3))):
        make, shape = NOISE[name]
        x = np.abs(_x(8, *shape)) + 0.1
        ratio = _training_output(make, shape, x) / x
        assert set(np.round(np.unique(ratio), 5)) <= {0.0, 2.0}
        # the same factor at every position of a channel, about half dropped
        assert np.all(ratio.min(axis=axes) == ratio.max(axis=axes)), name
        assert 0.3 < np.mean(ratio == 0) < 0.7, name


def test_gaussian_and_alpha_dropout_have_keras_statistics_in_training():
    x = np.ones((50, 400), np.float32)
    noise = _training_output(NOISE["GaussianNoise"][0], (400,), x) - x
    assert abs(noise.mean()) < 0.02 and abs(noise.std() - 0.3) < 0.02
    factor = _training_output(NOISE["GaussianDropout"][0], (400,), x)
    assert abs(factor.mean() - 1) < 0.02 and abs(factor.std() - np.sqrt(0.2 / 0.8)) < 0.02
    # AlphaDropout keeps a standard normal input's mean and variance (SELU's fixed point)
    z = RNG.normal(size=(50, 400)).astype(np.float32)
    y = _training_output(NOISE["AlphaDropout"][0], (400,), z)
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    alpha_p = -1.6732632423543772 * 1.0507009873554805
    a = ((1 - 0.2) * (1 + 0.2 * alpha_p ** 2)) ** -0.5
    dropped = np.isclose(y, a * alpha_p - a * alpha_p * 0.2, atol=1e-5)
    np.testing.assert_allclose(y[~dropped], a * z[~dropped] - a * alpha_p * 0.2, rtol=1e-5,
                               atol=1e-5)
    assert 0.15 < dropped.mean() < 0.25


def test_noise_layers_train():
    for name in ("SpatialDropout1D", "GaussianNoise", "AlphaDropout"):
        make, shape = NOISE[name]
        inp = nn.Input(shape=shape)
        h = make(nn.layers)(nn.layers.Dense(3)(inp))
        model = nn.Model(inp, nn.layers.Dense(1)(h))
        model.compile(nn.optimizers.SGD(0.01), "mse")
        w0 = model.get_weights()
        hist = model.fit(_x(8, *shape), _x(8, *shape[:-1], 1), epochs=2, verbose=0)
        assert np.all(np.isfinite(hist.history["loss"]))
        assert not np.allclose(w0[0], model.get_weights()[0])


def test_activity_regularization_loss_matches_keras():
    def build(lib):
        inp = lib.Input(shape=(4,))
        h = lib.layers.Dense(5)(inp)
        h = lib.layers.ActivityRegularization(l1=0.01, l2=0.05)(h)
        return lib.Model(inp, lib.layers.Dense(2)(h))

    t, k = _both(build)
    x, y = _x(6, 4), _x(6, 2)
    _same(t, k, x)
    t.compile(nn.optimizers.SGD(0.1), "mse")
    k_out, _, k_losses = k.stateless_call([v.value for v in k.trainable_variables],
                                          [v.value for v in k.non_trainable_variables], x,
                                          return_losses=True)
    want = np.mean((np.asarray(k_out) - y) ** 2) + float(sum(k_losses))
    np.testing.assert_allclose(t.evaluate(x, y, verbose=0), want, rtol=1e-5)
    _train_same(t, k, x, y)


# ------------------------------------------------------------ 5. separable convolutions


@pytest.mark.parametrize("make, shape", [
    (lambda L: L.SeparableConv1D(4, 3), (7, 3)),
    (lambda L: L.SeparableConv1D(4, 3, strides=2, padding="same", depth_multiplier=2,
                                 activation="relu"), (7, 3)),
    (lambda L: L.SeparableConv2D(5, 3), (6, 6, 2)),
    (lambda L: L.SeparableConv2D(5, (2, 3), padding="same", dilation_rate=2,
                                 depth_multiplier=3, use_bias=False), (6, 6, 2)),
    (lambda L: L.SeparableConv2D(4, 3, data_format="channels_first"), (2, 6, 5)),
], ids=["1d", "1d-strided-dm2", "2d", "2d-dilated-dm3", "2d-cf"])
def test_separable_convolutions_match_keras(make, shape):
    t, k = _both(_single(lambda lib: make(lib.layers), shape))
    assert [w.shape for w in t.get_weights()] == [tuple(w.shape) for w in k.get_weights()]
    assert t.count_params() == k.count_params()
    x = _x(3, *shape)
    _same(t, k, x, rtol=1e-4, atol=1e-5)
    _names_and_config(t.layers[-1], k.layers[-1])


def test_separable_convolution_trains_as_keras():
    def build(lib):
        inp = lib.Input(shape=(6, 6, 2))
        h = lib.layers.SeparableConv2D(3, 3, depth_multiplier=2, activation="tanh")(inp)
        return lib.Model(inp, lib.layers.Dense(2)(lib.layers.GlobalAveragePooling2D()(h)))

    t, k = _both(build)
    _train_same(t, k, _x(4, 6, 6, 2), _x(4, 2))


@pytest.mark.parametrize("make", [
    lambda L: L.DepthwiseConv2D(3, depth_multiplier=2),
    lambda L: L.SeparableConv2D(8, 3, depth_multiplier=2),
], ids=["depthwise", "separable"])
def test_depthwise_kernel_initial_scale_is_keras(make):
    """glorot_uniform draws the depthwise kernel (k, k, C, m) within Keras's
    limit sqrt(6 / (fan_in + fan_out)), fans by Keras's compute_fans (C·k² in,
    m·k² out): with C = 32 the limit is 0.12, not the 0.58 of fans m·k²."""
    t = _single(lambda lib: make(lib.layers), (9, 9, 32))(nn)
    k = _single(lambda lib: make(lib.layers), (9, 9, 32))(keras)
    for tw, kw in zip(t.get_weights(), k.get_weights()):
        assert tw.shape == tuple(kw.shape)
        k_max = float(np.abs(np.asarray(kw)).max())
        if k_max == 0:  # bias
            assert not np.abs(tw).any()
            continue
        # Both uniform on (-limit, limit): the largest of >= 576 draws is
        # within 2 % of the limit with probability > 1 - 1e-5.
        assert float(np.abs(tw).max()) == pytest.approx(k_max, rel=0.04)


# ------------------------------------------------------------ 6. attention


ATTENTION = {
    "dot": lambda L: L.Attention(),
    "dot-scale": lambda L: L.Attention(use_scale=True),
    "concat": lambda L: L.Attention(score_mode="concat"),
    "concat-scale": lambda L: L.Attention(use_scale=True, score_mode="concat"),
    "additive": lambda L: L.AdditiveAttention(),
    "additive-noscale": lambda L: L.AdditiveAttention(use_scale=False),
}


@pytest.mark.parametrize("name", list(ATTENTION))
@pytest.mark.parametrize("with_key, causal", [(False, False), (True, True)])
def test_attention_layers_match_keras(name, with_key, causal):
    def build(lib):
        vdim = 2 if with_key else 4  # (the value is the key without one)
        q, v, key = lib.Input(shape=(3, 4)), lib.Input(shape=(5, vdim)), lib.Input(shape=(5, 4))
        ins = [q, v, key] if with_key else [q, v]
        out, scores = ATTENTION[name](lib.layers)(ins, return_attention_scores=True,
                                                  use_causal_mask=causal)
        return lib.Model([q, v, key], [out, scores])

    t, k = _both(build, scale=0.8)
    x = [_x(2, 3, 4), _x(2, 5, 2 if with_key else 4), _x(2, 5, 4)]
    for got, want in zip(t.predict(x, verbose=0), k.predict(x, verbose=0)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    _names_and_config([lay for lay in t.layers if "ttention" in lay.kind][0],
                      [lay for lay in k.layers if "ttention" in type(lay).__name__][0])


def test_attention_masks_from_embeddings_match_keras():
    def build(lib):
        q = lib.Input(shape=(None,), dtype="int32")
        v = lib.Input(shape=(None,), dtype="int32")
        emb = lib.layers.Embedding(10, 4, mask_zero=True)
        out = lib.layers.Attention(use_scale=True)([emb(q), emb(v)])
        pooled = lib.layers.GlobalAveragePooling1D()(out)  # reads the query's mask
        return lib.Model([q, v], lib.layers.Dense(2)(pooled))

    t, k = _both(build)
    qx = np.array([[3, 4, 0, 0], [1, 2, 5, 0]], np.int32)
    vx = np.array([[6, 7, 8, 0, 0], [2, 0, 0, 0, 0]], np.int32)
    _same(t, k, [qx, vx])
    _train_same(t, k, [qx, vx], _x(2, 2))


def test_attention_explicit_mask_list_and_errors():
    def build(lib):
        q, v = lib.Input(shape=(3, 4)), lib.Input(shape=(5, 4))
        qm, vm = lib.Input(shape=(3,), dtype="bool"), lib.Input(shape=(5,), dtype="bool")
        out = lib.layers.AdditiveAttention()([q, v], mask=[qm, vm])
        return lib.Model([q, v, qm, vm], out)

    t, k = _both(build)
    x = [_x(2, 3, 4), _x(2, 5, 4), np.array([[1, 1, 0], [1, 0, 0]], bool),
         np.array([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]], bool)]
    _same(t, k, x)
    with pytest.raises(ValueError, match=r"\[Attention\] .* must be called on a list"):
        nn.layers.Attention()(nn.Input(shape=(3, 4)))
    with pytest.raises(ValueError, match=r"score_mode must be 'dot' or 'concat'"):
        nn.layers.Attention(score_mode="general")


def test_attention_dropout_acts_only_in_training():
    q, v = nn.Input(shape=(3, 4)), nn.Input(shape=(6, 4))
    layer = nn.layers.Attention(dropout=0.5)
    x = [np.ones((2, 3, 4), np.float32), _x(2, 6, 4)]
    infer = nn.Model([q, v], layer([q, v])).predict(x, verbose=0)
    q2, v2 = nn.Input(shape=(3, 4)), nn.Input(shape=(6, 4))
    train = nn.Model([q2, v2], nn.layers.Attention(dropout=0.5)([q2, v2], training=True))
    k = keras.layers.Attention(dropout=0.5)
    np.testing.assert_allclose(infer, np.asarray(k(x)), rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(train(x, training=True)), infer)


def test_new_layers_save_and_load(tmp_path):
    q = nn.Input(shape=(None,), dtype="int32")
    emb = nn.layers.Embedding(10, 4, mask_zero=True)(q)
    h = nn.layers.Attention(use_scale=True)([emb, emb], use_causal_mask=True)
    h = nn.layers.SpatialDropout1D(0.2)(nn.layers.LeakyReLU(0.1)(h))
    h = nn.layers.ZeroPadding1D(2)(nn.layers.SeparableConv1D(3, 2, padding="same")(h))
    model = nn.Model(q, nn.layers.Dense(2)(nn.layers.GlobalAveragePooling1D()(h)))
    path = str(tmp_path / "m.keras")
    model.save(path)
    x = np.array([[3, 4, 0, 0], [1, 2, 5, 0]], np.int32)
    np.testing.assert_array_equal(nn.load_model(path).predict(x, verbose=0),
                                  model.predict(x, verbose=0))


# ------------------------------------------------------------ 7. normalization, InputLayer


@pytest.mark.parametrize("make, shape", [
    (lambda L: L.Rescaling(1 / 255.0), (3, 2)),
    (lambda L: L.Rescaling([0.5, 2.0], offset=-1.0), (3, 2)),
    (lambda L: L.Normalization(mean=2.0, variance=4.0), (3, 2)),
    (lambda L: L.Normalization(mean=[1.0, -1.0], variance=[4.0, 0.25]), (3, 2)),
    (lambda L: L.Normalization(axis=(1, 2), mean=np.arange(6.0).reshape(3, 2),
                               variance=np.arange(1.0, 7.0).reshape(3, 2)), (3, 2)),
    (lambda L: L.Normalization(mean=[1.0, -1.0], variance=[4.0, 0.25], invert=True), (3, 2)),
    (lambda L: L.UnitNormalization(), (3, 4)),
    (lambda L: L.UnitNormalization(axis=[1, 2]), (3, 4)),
    (lambda L: L.GroupNormalization(groups=2), (3, 4)),
    (lambda L: L.GroupNormalization(groups=-1, epsilon=1e-5), (3, 4)),
    (lambda L: L.GroupNormalization(groups=3, axis=1), (6, 2)),
], ids=["rescale", "rescale-vector", "norm-scalar", "norm-vector", "norm-2axes", "norm-invert",
        "unit", "unit-2axes", "group2", "instance", "group-axis1"])
def test_normalization_layers_match_keras(make, shape):
    t, k = _both(_single(lambda lib: make(lib.layers), shape))
    _same(t, k, _x(4, *shape, scale=3.0), rtol=1e-5, atol=1e-5)
    _names_and_config(t.layers[-1], k.layers[-1])


def test_rescaling_casts_integers_to_float32_as_keras():
    def build(lib):
        inp = lib.Input(shape=(4,), dtype="uint8")
        return lib.Model(inp, lib.layers.Rescaling(1 / 127.5, offset=-1)(inp))

    t, k = build(nn), build(keras)
    x = np.arange(8, dtype=np.uint8).reshape(2, 4) * 30
    got, want = t.predict(x, verbose=0), k.predict(x, verbose=0)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_normalization_adapt_matches_keras_on_arrays_batches_and_datasets():
    data = _x(40, 3, scale=2.0) + np.array([1.0, -2.0, 5.0], np.float32)
    k = keras.layers.Normalization()
    k.adapt(data)
    dataset = tessera.data.Dataset.from_tensor_slices(data)
    for given in (data, [data[:15], data[15:]], dataset.batch(16),
                  dataset):
        t = nn.layers.Normalization()
        t.adapt(given)
        inp = nn.Input(shape=(3,))
        model = nn.Model(inp, t(inp))
        assert [w.shape for w in t.get_weights()] == [tuple(w.shape) for w in k.get_weights()]
        np.testing.assert_allclose(t.get_weights()[0], k.get_weights()[0], rtol=1e-5)
        np.testing.assert_allclose(t.get_weights()[1], k.get_weights()[1], rtol=1e-5)
        np.testing.assert_allclose(model.predict(data, verbose=0), np.asarray(k(data)),
                                   rtol=1e-4, atol=1e-5)
    # adapt again after the model was built: the model sees the new statistics
    t.adapt(data * 2.0)
    np.testing.assert_allclose(model.predict(data * 2.0, verbose=0).std(axis=0), 1.0,
                               rtol=1e-3)
    with pytest.raises(ValueError, match=r"\[Normalization\] give both mean and variance"):
        nn.layers.Normalization(mean=1.0)


def test_group_normalization_trains_as_keras():
    def build(lib):
        inp = lib.Input(shape=(5, 4))
        h = lib.layers.GroupNormalization(groups=2)(lib.layers.Dense(4)(inp))
        return lib.Model(inp, lib.layers.Dense(1)(lib.layers.Flatten()(h)))

    t, k = _both(build)
    _train_same(t, k, _x(6, 5, 4), _x(6, 1))


def test_input_layer_builds_a_sequential_as_keras():
    def build(lib):
        return lib.Sequential([lib.layers.InputLayer(shape=(4,)), lib.layers.Dense(3),
                               lib.layers.ReLU(max_value=1.0)])

    t, k = _both(build)
    assert t.built and t.output_shape == k.output_shape == (None, 3)
    assert [lay.name.split("_")[0] for lay in t.layers] == \
        [lay.name.split("_")[0] for lay in k.layers]  # (Keras leaves the InputLayer out)
    _same(t, k, _x(5, 4))
    s = nn.Sequential()
    s.add(nn.layers.InputLayer(shape=(4,)))
    s.add(nn.layers.Dense(2))
    assert s.built and s.count_params() == 10
    layer = nn.layers.InputLayer(shape=(None, 3), dtype="int32")
    assert layer.name.startswith("input_layer") and layer.batch_shape == (None, None, 3)
    assert layer.output.dtype == "int32"
    inp = layer.output  # usable as keras.Input
    assert nn.Model(inp, nn.layers.Dense(2)(inp)).output_shape == (None, None, 2)
    with pytest.raises(ValueError, match=r"\[InputLayer\] give shape"):
        nn.layers.InputLayer()


# ------------------------------------------------------------ 8. channels_first


@pytest.mark.parametrize("make, shape", [
    (lambda L: L.Conv1D(3, 2, data_format="channels_first"), (2, 6)),
    (lambda L: L.Conv1D(4, 3, strides=2, padding="same", activation="relu",
                        data_format="channels_first"), (2, 7)),
    (lambda L: L.Conv2D(3, (2, 3), data_format="channels_first"), (2, 5, 6)),
    (lambda L: L.Conv2D(4, 3, padding="same", dilation_rate=2, use_bias=False,
                        data_format="channels_first"), (3, 6, 6)),
    (lambda L: L.Conv2DTranspose(3, 2, strides=2, data_format="channels_first"), (2, 3, 4)),
    (lambda L: L.DepthwiseConv2D(3, depth_multiplier=2, data_format="channels_first"),
     (2, 5, 5)),
    (lambda L: L.MaxPooling1D(2, data_format="channels_first"), (3, 6)),
    (lambda L: L.AveragePooling1D(3, strides=1, padding="same", data_format="channels_first"),
     (3, 6)),
    (lambda L: L.MaxPooling2D((2, 3), data_format="channels_first"), (2, 4, 6)),
    (lambda L: L.AveragePooling2D(2, padding="same", data_format="channels_first"), (2, 5, 5)),
    (lambda L: L.GlobalAveragePooling1D(data_format="channels_first"), (3, 6)),
    (lambda L: L.GlobalMaxPooling1D(data_format="channels_first", keepdims=True), (3, 6)),
    (lambda L: L.GlobalAveragePooling2D(data_format="channels_first", keepdims=True), (2, 4, 5)),
    (lambda L: L.GlobalMaxPooling2D(data_format="channels_first"), (2, 4, 5)),
], ids=["conv1d", "conv1d-same", "conv2d", "conv2d-dilated", "conv2dT", "depthwise2d", "max1d",
        "avg1d-same", "max2d", "avg2d-same", "gap1d", "gmp1d-keep", "gap2d-keep", "gmp2d"])
def test_channels_first_matches_keras(make, shape):
    t, k = _both(_single(lambda lib: make(lib.layers), shape))
    assert t.output_shape == k.output_shape
    _same(t, k, _x(3, *shape), rtol=1e-4, atol=1e-5)
    again = _names_and_config(t.layers[-1], k.layers[-1])
    assert again.data_format == "channels_first"


def test_channels_first_convnet_trains_as_keras():
    def build(lib):
        inp = lib.Input(shape=(2, 6, 6))
        h = lib.layers.Conv2D(3, 3, activation="relu", data_format="channels_first")(inp)
        h = lib.layers.MaxPooling2D(data_format="channels_first")(h)
        h = lib.layers.GlobalAveragePooling2D(data_format="channels_first")(h)
        return lib.Model(inp, lib.layers.Dense(2)(h))

    t, k = _both(build)
    _train_same(t, k, _x(4, 2, 6, 6), _x(4, 2))


def test_lambda_on_several_inputs_and_masks_as_keras():
    def build(lib):
        a, b = lib.Input(shape=(None,), dtype="int32"), lib.Input(shape=(3,))
        emb = lib.layers.Embedding(10, 3, mask_zero=True)(a)
        # the mask passes through a Lambda that says how (Keras's mask=)
        h = lib.layers.Lambda(lambda t: t * 2.0, mask=lambda inputs, mask: mask)(emb)
        pooled = lib.layers.GlobalAveragePooling1D()(h)  # reads the mask
        both = lib.layers.Lambda(lambda ts: ts[0] * ts[1] + ts[1])([pooled, b])
        return lib.Model([a, b], both)

    t, k = _both(build)
    x = [np.array([[1, 2, 0], [3, 0, 0]], np.int32), _x(2, 3)]
    _same(t, k, x)


def test_print_keras_layers_tessera_lacks():
    """The keras.layers names tessera.nn.layers lacks (printed: `pytest -k lacks -s`); the
    ones issue 30 asked of this module are all there."""
    from tessera.nn import layers as ours

    def has(name):
        try:
            getattr(ours, name)
            return True
        except AttributeError:
            return False

    theirs = sorted(n for n in dir(keras.layers) if n[:1].isupper())
    lacking = [n for n in theirs if not has(n)]
    print(f"keras.layers names tessera lacks ({len(lacking)}): {' '.join(lacking)}")
    built = ("ReLU Softmax LeakyReLU PReLU ELU Lambda ZeroPadding1D ZeroPadding2D UpSampling1D "
             "UpSampling2D Cropping1D Cropping2D SpatialDropout1D SpatialDropout2D GaussianNoise "
             "GaussianDropout AlphaDropout ActivityRegularization SeparableConv1D SeparableConv2D "
             "Attention AdditiveAttention Rescaling Normalization UnitNormalization "
             "GroupNormalization InputLayer").split()
    assert not [n for n in built if n in lacking]
    assert all(getattr(ours, n) is getattr(nn, n) for n in built)


def test_softmax_mask_shape_and_noise_seed():
    x, m = nn.Input(shape=(3, 5)), nn.Input(shape=(4,))
    with pytest.raises(ValueError, match=r"\[Softmax\] .* mask \(None, 4\) does not broadcast "
                                         r"against the input \(None, 3, 5\)"):
        nn.layers.Softmax()(x, mask=m)


def test_noise_layers_own_seed_in_an_eager_training_call():
    # a layer's own seed changes its draws; the same seed repeats them
    data = np.ones((4, 50), np.float32)
    a, b, c = (_training_output(lambda L, s=s: L.GaussianNoise(1.0, seed=s), (50,), data)
               for s in (1, 1, 2))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_a_sequential_of_new_layers_summarizes_as_keras(tmp_path):
    def build(lib):
        L = lib.layers
        return lib.Sequential([
            L.InputLayer(shape=(8, 8, 3)), L.Rescaling(1 / 255), L.ZeroPadding2D(),
            L.SeparableConv2D(4, 3), L.PReLU(shared_axes=[1, 2]), L.UpSampling2D(),
            L.GroupNormalization(2), L.SpatialDropout2D(0.1), L.Cropping2D(1),
            L.GlobalAveragePooling2D(), L.GaussianNoise(0.1), L.Dense(2), L.Softmax()])

    t, k = _both(build)
    assert t.count_params() == k.count_params()
    assert len(t.layers) == len(k.layers)
    for a, b in zip(t.layers, k.layers):
        assert (_base_name(a.name), a.output_shape, a.count_params()) == \
            (_base_name(b.name), tuple(b.output.shape), b.count_params())
    x = (RNG.random((2, 8, 8, 3)) * 255).astype(np.float32)
    _same(t, k, x)
    t.save(str(tmp_path / "s.keras"))
    np.testing.assert_array_equal(nn.load_model(str(tmp_path / "s.keras")).predict(x, verbose=0),
                                  t.predict(x, verbose=0))
