"""Keras's 3-D layers (issue 30): Conv3D, Conv3DTranspose, MaxPooling3D,
AveragePooling3D, GlobalMax/AveragePooling3D, UpSampling3D, ZeroPadding3D,
Cropping3D and their aliases, against Keras 3 on JAX as the oracle (the same
weights through set_weights) for each argument combination; the 3-D ops; the
gradients of a float64 chain of them against central differences; a few
training steps against Keras's; a save/load round trip; and the errors."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_nn_layers import _grad_check  # noqa: E402
from test_nn_layers_more import _both, _names_and_config, _same, _single  # noqa: E402
from test_nn_layers_more import _train_same, _x  # noqa: E402

from tessera import nn  # noqa: E402

RNG = np.random.default_rng(33)
# Keras's random initializers compile a JAX program per kernel shape (seconds
# each on a loaded machine); the tests replace the weights anyway.
Z = dict(kernel_initializer="zeros")
SHAPE = (4, 6, 5, 4)  # depth, height, width, channels (channels_first: read as (C, D, H, W))

CONV = [
    {},
    dict(strides=2, padding="same"),
    dict(strides=(1, 2, 3), padding="valid", use_bias=False),
    dict(dilation_rate=(2, 1, 2), padding="same", activation="relu"),
    dict(dilation_rate=(1, 2, 2), groups=2, activation="tanh"),
    dict(groups=4, strides=(2, 1, 1), padding="same"),
    dict(data_format="channels_first", strides=(1, 2, 1), padding="same"),
    dict(data_format="channels_first", groups=2, dilation_rate=(1, 2, 1)),
]


@pytest.mark.parametrize("kw", CONV, ids=[str(i) for i in range(len(CONV))])
def test_conv3d_matches_keras(kw):
    t, k = _both(_single(lambda L: L.layers.Conv3D(8, (3, 2, 3), **Z, **kw), SHAPE))
    _same(t, k, _x(2, *SHAPE), rtol=1e-4, atol=1e-5)
    again = _names_and_config(t.layers[-1], k.layers[-1])
    assert [w.shape for w in t.get_weights()] == [tuple(w.shape) for w in k.get_weights()]
    assert (again.strides, again.padding, again.dilation, again.groups) == \
        (t.layers[-1].strides, t.layers[-1].padding, t.layers[-1].dilation, t.layers[-1].groups)


TRANSPOSE = [
    ((3, 2, 3), {}),
    ((3, 2, 3), dict(strides=2, padding="same")),
    ((3, 2, 3), dict(strides=3)),  # valid, kernel 2 < stride 3 on one axis
    ((1, 1, 1), dict(strides=2)),  # the kernel smaller than the stride everywhere
    ((3, 2, 3), dict(strides=(2, 3, 1), output_padding=(1, 2, 0))),
    ((3, 2, 3), dict(strides=(2, 3, 2), padding="same", output_padding=(1, 0, 1))),
    ((2, 2, 2), dict(dilation_rate=(2, 1, 2), padding="same", use_bias=False)),
    ((3, 2, 3), dict(data_format="channels_first", strides=2, padding="same",
                     output_padding=1, activation="relu")),
]


@pytest.mark.parametrize("kernel, kw", TRANSPOSE, ids=[str(i) for i in range(len(TRANSPOSE))])
def test_conv3d_transpose_matches_keras(kernel, kw):
    t, k = _both(_single(lambda L: L.layers.Conv3DTranspose(5, kernel, **Z, **kw), SHAPE))
    _same(t, k, _x(2, *SHAPE), rtol=1e-4, atol=1e-5)
    _names_and_config(t.layers[-1], k.layers[-1])
    assert t.output_shape == k.output_shape


POOL = [
    ("MaxPooling3D", dict(pool_size=2)),
    ("MaxPooling3D", dict(pool_size=(3, 2, 2), strides=(1, 2, 1), padding="same")),
    ("MaxPooling3D", dict(pool_size=(2, 3, 2), strides=1, data_format="channels_first")),
    ("AveragePooling3D", dict(pool_size=2)),
    ("AveragePooling3D", dict(pool_size=(3, 2, 3), strides=(2, 1, 2), padding="same")),
    ("AveragePooling3D", dict(pool_size=2, padding="same", data_format="channels_first")),
    ("GlobalMaxPooling3D", {}),
    ("GlobalMaxPooling3D", dict(keepdims=True, data_format="channels_first")),
    ("GlobalAveragePooling3D", dict(keepdims=True)),
    ("GlobalAveragePooling3D", dict(data_format="channels_first")),
    ("UpSampling3D", {}),
    ("UpSampling3D", dict(size=(1, 2, 3))),
    ("UpSampling3D", dict(size=2, data_format="channels_first")),
    ("ZeroPadding3D", {}),
    ("ZeroPadding3D", dict(padding=2)),
    ("ZeroPadding3D", dict(padding=(1, 0, 2))),
    ("ZeroPadding3D", dict(padding=((0, 1), (2, 0), (1, 1)), data_format="channels_first")),
    ("Cropping3D", {}),
    ("Cropping3D", dict(cropping=(1, 0, 2))),
    ("Cropping3D", dict(cropping=((0, 1), (2, 0), (1, 1)), data_format="channels_first")),
]


@pytest.mark.parametrize("cls, kw", POOL, ids=[f"{c}-{i}" for i, (c, _) in enumerate(POOL)])
def test_pooling_and_reshaping_layers_match_keras(cls, kw):
    t, k = _both(_single(lambda L: getattr(L.layers, cls)(**kw), SHAPE), randomize=False)
    _same(t, k, _x(2, *SHAPE))
    _names_and_config(t.layers[-1], k.layers[-1])


def test_keras_aliases_are_the_same_classes():
    L = nn.layers
    assert L.Convolution3D is L.Conv3D and L.Convolution3DTranspose is L.Conv3DTranspose
    assert L.MaxPool3D is L.MaxPooling3D and L.AvgPool3D is L.AveragePooling3D
    assert L.GlobalMaxPool3D is L.GlobalMaxPooling3D
    assert L.GlobalAvgPool3D is L.GlobalAveragePooling3D
    assert nn.Conv3D is L.Conv3D and nn.Cropping3D is L.Cropping3D


def test_initializers_match_keras():
    def make(L):
        return L.layers.Conv3D(3, 2, kernel_initializer=L.initializers.Constant(0.1),
                               bias_initializer="ones")
    t, k = _both(_single(make, (3, 3, 3, 2)), randomize=False)
    _same(t, k, _x(2, 3, 3, 3, 2))
    # glorot_uniform's limit from Keras's fans: receptive field * channels.
    layer = nn.layers.Conv3D(8, (3, 2, 3), groups=2)
    nn.Sequential([nn.Input((4, 4, 4, 6)), layer])
    limit = np.sqrt(6.0 / (18 * 3 + 18 * 8))
    kernel = layer.get_weights()[0]
    assert kernel.shape == (3, 2, 3, 3, 8)
    assert np.abs(kernel).max() <= limit and np.abs(kernel).max() > 0.8 * limit


def test_ops_match_keras_ops():
    x = _x(2, *SHAPE)
    w = _x(3, 2, 3, 2, 6)  # groups = 2
    wt = _x(2, 3, 2, 5, 4)
    cases = [
        lambda o: o.conv(x, w, strides=(1, 2, 1), padding="same", dilation_rate=1),
        lambda o: o.conv(np.moveaxis(x, -1, 1), w, padding="valid", dilation_rate=(1, 2, 1),
                         data_format="channels_first"),
        lambda o: o.conv_transpose(x, wt, strides=2, padding="same"),
        lambda o: o.conv_transpose(x, wt, strides=(2, 3, 2), padding="valid",
                                   output_padding=(1, 2, 0)),
        lambda o: o.max_pool(x, (2, 3, 2), strides=1, padding="same"),
        lambda o: o.average_pool(x, (2, 2, 2), strides=(2, 1, 2), padding="valid"),
    ]
    for case in cases:
        np.testing.assert_allclose(np.asarray(case(nn.ops)), np.asarray(case(keras.ops)),
                                   rtol=1e-4, atol=1e-5)


def test_gradients_of_a_float64_chain_match_central_differences():
    # Each weight's gradient passes back through every later layer's input
    # gradient (the pooling, padding, cropping and upsampling included).
    rng = np.random.default_rng(3)
    inp = nn.Input((4, 5, 4, 2))
    h = nn.layers.Conv3D(4, (2, 3, 2), padding="same", groups=2, activation="tanh")(inp)
    h = nn.layers.MaxPooling3D((2, 2, 1), strides=(1, 2, 1), padding="same")(h)
    h = nn.layers.Conv3DTranspose(3, (2, 2, 3), strides=(2, 1, 2), output_padding=(1, 0, 1),
                                  padding="same")(h)
    h = nn.layers.AveragePooling3D(2, strides=1, padding="same")(h)
    h = nn.layers.UpSampling3D((1, 2, 1))(h)
    h = nn.layers.ZeroPadding3D((1, 0, 2))(h)
    h = nn.layers.Cropping3D(((0, 1), (2, 1), (1, 0)))(h)
    # (8, 1, 11, 3) read channels first: 8 channels of (1, 11, 3).
    h = nn.layers.Conv3D(2, (1, 2, 2), strides=(1, 2, 1), data_format="channels_first")(h)
    out = nn.layers.GlobalMaxPooling3D()(h)
    m = nn.Model(inp, out, dtype="float64")
    m.set_weights([rng.normal(size=w.shape) * 0.5 for w in m.get_weights()])
    _grad_check(m, rng.normal(size=(2, 4, 5, 4, 2)), rng, coords=3)


def test_training_steps_match_keras():
    def build(L):
        inp = L.Input((4, 5, 4, 2))
        h = L.layers.Conv3D(4, 2, padding="same", activation="relu",
                            kernel_regularizer=L.regularizers.L2(0.01), **Z)(inp)
        h = L.layers.MaxPooling3D(2, padding="same")(h)
        h = L.layers.Conv3DTranspose(3, 2, strides=2, bias_regularizer=L.regularizers.L1(0.01),
                                     **Z)(h)
        h = L.layers.GlobalAveragePooling3D()(h)
        return L.Model(inp, L.layers.Dense(2, **Z)(h))
    t, k = _both(build)
    _train_same(t, k, _x(4, 4, 5, 4, 2), _x(4, 2))


def test_save_and_load_round_trip(tmp_path):
    inp = nn.Input((4, 4, 4, 3))
    h = nn.layers.Conv3D(4, 2, padding="same", data_format="channels_first")(inp)
    h = nn.layers.Conv3DTranspose(2, 2, strides=2, output_padding=1)(h)
    h = nn.layers.ZeroPadding3D(1)(nn.layers.AveragePooling3D(2)(h))
    out = nn.layers.GlobalMaxPool3D()(nn.layers.Cropping3D(1)(nn.layers.UpSampling3D(2)(h)))
    m = nn.Model(inp, out)
    path = str(tmp_path / "conv3d.keras")
    m.save(path)
    back = nn.load_model(path)
    x = _x(2, 4, 4, 4, 3)
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    assert [type(a).__name__ for a in back.layers] == [type(a).__name__ for a in m.layers]


def test_errors_name_the_layer_and_the_values():
    L = nn.layers
    with pytest.raises(ValueError, match=r"\[Conv3DTranspose\] output_padding must be less than "
                                         r"strides on every axis: axis 1 has output_padding 2 "
                                         r"and strides 2"):
        L.Conv3DTranspose(2, 3, strides=(2, 2, 2), output_padding=(1, 2, 0))
    with pytest.raises(ValueError, match=r"\[Conv3DTranspose\] output_padding must be None, a "
                                         r"non-negative int or 3 of them, got \(1, 1\)"):
        L.Conv3DTranspose(2, 3, strides=2, output_padding=(1, 1))
    with pytest.raises(ValueError, match=r"\[Conv3DTranspose\] strides > 1 cannot go with "
                                         r"dilation_rate > 1"):
        L.Conv3DTranspose(2, 3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match=r"\[Conv3D\] kernel_size must be a positive int or 3 "
                                         r"of them, got \(3, 3\)"):
        L.Conv3D(2, (3, 3))
    with pytest.raises(ValueError, match=r"\[Conv3D\] padding"):
        L.Conv3D(2, 3, padding="causal")
    with pytest.raises(ValueError, match=r"\[Conv3D\] expects inputs of shape \(batch, depth, "
                                         r"height, width, channels\), got per-sample shape "
                                         r"\(4, 4, 2\)"):
        L.Conv3D(2, 3)(nn.Input((4, 4, 2)))
    with pytest.raises(ValueError, match=r"\[Conv3D\] kernel \(5, 1, 1\) .* does not fit"):
        L.Conv3D(2, (5, 1, 1))(nn.Input((4, 4, 4, 2)))
    with pytest.raises(ValueError, match=r"\[Conv3DTranspose\] needs the length of every "
                                         r"spatial axis .* got per-sample shape \(None, 4, 4, 2\)"):
        L.Conv3DTranspose(2, 2, strides=2)(nn.Input((None, 4, 4, 2)))
    with pytest.raises(ValueError, match=r"\[MaxPooling3D\] pool_size must be a positive int or "
                                         r"3 of them, got \(2, 2\)"):
        L.MaxPooling3D((2, 2))
    with pytest.raises(ValueError, match=r"\[UpSampling3D\] size must be a positive int or 3 of "
                                         r"them, got \(2, 0, 1\)"):
        L.UpSampling3D((2, 0, 1))
    with pytest.raises(ValueError, match=r"\[ZeroPadding3D\] padding must be an int, 3 ints"):
        L.ZeroPadding3D((1, 2))
    with pytest.raises(ValueError, match=r"\[Cropping3D\] entry 2 of cropping must be a "
                                         r"non-negative int or a pair of them, got \(-1, 0\)"):
        L.Cropping3D((1, (-1, 0), 1))
    with pytest.raises(ValueError, match=r"\[Cropping3D\] cropping .* must leave part of the "
                                         r"input"):
        L.Cropping3D(((2, 2), (0, 0), (0, 0)))(nn.Input((4, 5, 5, 1)))
    with pytest.raises(ValueError, match=r"\[GlobalAveragePooling3D\] expects inputs of shape "
                                         r"\(batch, depth, height, width, channels\)"):
        L.GlobalAveragePooling3D()(nn.Input((4, 5, 1)))
    with pytest.raises(ValueError, match=r"\[ops.conv_transpose\] output_padding must be None "
                                         r"or 3 ints each in \[0, strides\)"):
        nn.ops.conv_transpose(_x(1, 3, 3, 3, 2), _x(2, 2, 2, 2, 2), strides=2, output_padding=2)
