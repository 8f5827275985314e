"""Grouped convolution (conv1d/conv2d with `groups`, depthwise as groups =
channels) and the transposed convolution (conv1d/conv2d_grad_input, Keras's
Conv1DTranspose/Conv2DTranspose): values against NumPy loop references in
float32 and float64, gradients against central differences of the references
in float64, and the errors for channels that groups does not divide."""

import numpy as np
import pytest

import tessera


def geometry(n, k, stride, dilation, padding):
    """Output length and left padding of one dimension, as Keras defines them."""
    k_eff = dilation * (k - 1) + 1
    if padding == "valid":
        return (n - k_eff) // stride + 1, 0
    if padding == "same":
        out = -(-n // stride)
        return out, max((out - 1) * stride + k_eff - n, 0) // 2
    return (n - 1) // stride + 1, k_eff - 1  # causal


def taps(x_shape, w_shape, strides, dilation, padding):
    """Yields (output index, input index, kernel index) of every product of a
    2-d convolution of x (N, H, W, C) with w (KH, KW, C / groups, F)."""
    _, h, wd, _ = x_shape
    kh, kw = w_shape[:2]
    oh, ph = geometry(h, kh, strides[0], dilation[0], padding)
    ow, pw = geometry(wd, kw, strides[1], dilation[1], padding)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                r = i * strides[0] - ph + a * dilation[0]
                if not 0 <= r < h:
                    continue
                for b in range(kw):
                    q = j * strides[1] - pw + b * dilation[1]
                    if 0 <= q < wd:
                        yield (i, j), (r, q), (a, b)


def out_shape(x_shape, w_shape, strides, dilation, padding):
    oh, _ = geometry(x_shape[1], w_shape[0], strides[0], dilation[0], padding)
    ow, _ = geometry(x_shape[2], w_shape[1], strides[1], dilation[1], padding)
    return (x_shape[0], oh, ow, w_shape[3])


def ref_conv2d(x, w, strides, dilation, padding, groups):
    """Keras's grouped Conv2D (no bias): output channel f reads the input
    channels of group f // (F / groups) through w[..., :, f]."""
    cg, f = w.shape[2], w.shape[3]
    fg = f // groups
    y = np.zeros(out_shape(x.shape, w.shape, strides, dilation, padding))
    for (i, j), (r, q), (a, b) in taps(x.shape, w.shape, strides, dilation, padding):
        for g in range(groups):
            xs = x[:, r, q, g * cg : (g + 1) * cg]  # (N, cg)
            y[:, i, j, g * fg : (g + 1) * fg] += xs @ w[a, b, :, g * fg : (g + 1) * fg]
    return y


def ref_conv_transpose2d(dy, w, x_shape, strides, dilation, padding, groups):
    """The transposed convolution: each dy element spread over the window it
    was computed from (the adjoint of ref_conv2d in x)."""
    cg, f = w.shape[2], w.shape[3]
    fg = f // groups
    x = np.zeros(x_shape)
    for (i, j), (r, q), (a, b) in taps(x_shape, w.shape, strides, dilation, padding):
        for g in range(groups):
            x[:, r, q, g * cg : (g + 1) * cg] += (
                dy[:, i, j, g * fg : (g + 1) * fg] @ w[a, b, :, g * fg : (g + 1) * fg].T
            )
    return x


def as_2d(x):
    return x[:, None]


def conv(x, w, spatial, strides, padding, dilation, groups):
    return (
        tessera.conv1d(x, w, stride=strides, padding=padding, dilation=dilation, groups=groups)
        if spatial == 1
        else tessera.conv2d(
            x, w, strides=strides, padding=padding, dilation=dilation, groups=groups
        )
    )


def conv_t(dy, w, x_shape, spatial, strides, padding, dilation, groups):
    return (
        tessera.conv1d_grad_input(
            dy, w, x_shape, stride=strides, padding=padding, dilation=dilation, groups=groups
        )
        if spatial == 1
        else tessera.conv2d_grad_input(
            dy, w, x_shape, strides=strides, padding=padding, dilation=dilation, groups=groups
        )
    )


forward = tessera.jit(conv)
transposed = tessera.jit(conv_t)


def conv_loss(x, w, r, spatial, strides, padding, dilation, groups):
    return np.sum(conv(x, w, spatial, strides, padding, dilation, groups) * r)


def conv_t_loss(dy, w, r, spatial, strides, padding, dilation, groups):
    return np.sum(conv_t(dy, w, np.shape(r), spatial, strides, padding, dilation, groups) * r)


def pairs(v):
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


def ref(x, w, spatial, strides, padding, dilation, groups):
    """ref_conv2d for either rank (1-d: height 1; causal is 'same'-like on one side)."""
    if spatial == 1:
        y = ref_conv2d(as_2d(x), w[None], (1, strides), (1, dilation), padding, groups)
        return y[:, 0]
    return ref_conv2d(x, w, pairs(strides), pairs(dilation), padding, groups)


def ref_t(dy, w, x_shape, spatial, strides, padding, dilation, groups):
    if spatial == 1:
        n, steps, c = x_shape
        x = ref_conv_transpose2d(
            as_2d(dy), w[None], (n, 1, steps, c), (1, strides), (1, dilation), padding, groups
        )
        return x[:, 0]
    return ref_conv_transpose2d(dy, w, x_shape, pairs(strides), pairs(dilation), padding, groups)


def numeric_grad(f, a, h=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        ap, am = a.copy(), a.copy()
        ap[i] += h
        am[i] -= h
        g[i] = (f(ap) - f(am)) / (2 * h)
    return g


# (spatial, x shape, kernel shape, strides, padding, dilation, groups)
CASES = [
    (1, (2, 9, 4), (3, 2, 6), 1, "valid", 1, 2),
    (1, (2, 9, 6), (3, 2, 6), 2, "same", 1, 3),
    (1, (2, 10, 4), (2, 1, 8), 1, "causal", 2, 4),  # depthwise, multiplier 2
    (1, (1, 7, 6), (3, 6, 4), 2, "same", 2, 1),
    (2, (2, 6, 5, 4), (3, 2, 2, 6), 1, "valid", 1, 2),
    (2, (2, 7, 6, 6), (2, 3, 2, 9), [2, 1], "same", 1, 3),
    (2, (1, 8, 7, 4), (3, 3, 1, 4), [1, 2], "same", [2, 1], 4),  # depthwise
    (2, (2, 6, 6, 4), (2, 2, 4, 4), 2, "valid", 1, 1),
]


def case_id(c):
    return f"{c[0]}d-x{c[1]}-w{c[2]}-s{c[3]}-{c[4]}-d{c[5]}-g{c[6]}".replace(" ", "")


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_grouped_forward_matches_numpy(case, dtype):
    spatial, xs, ws, strides, padding, dilation, groups = case
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    y = np.asarray(
        forward(x.astype(dtype), w.astype(dtype), spatial, strides, padding, dilation, groups)
    )
    want = ref(x, w, spatial, strides, padding, dilation, groups)
    assert y.dtype == dtype and y.shape == want.shape
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_grouped_gradients_match_central_differences(case):
    spatial, xs, ws, strides, padding, dilation, groups = case
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    r = rng.normal(size=ref(x, w, spatial, strides, padding, dilation, groups).shape)
    settings = (spatial, strides, padding, dilation, groups)
    dx, dw = tessera.grad(conv_loss, argnums=(0, 1))(x, w, r, *settings)
    nx = numeric_grad(lambda v: np.sum(ref(v, w, *settings) * r), x)
    nw = numeric_grad(lambda v: np.sum(ref(x, v, *settings) * r), w)
    np.testing.assert_allclose(dx, nx, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, nw, rtol=1e-6, atol=1e-7)


def test_depthwise_is_grouped_conv2d_with_the_kernel_reshaped():
    # Keras DepthwiseConv2D: kernel (kh, kw, C, m); output channel c * m + j is
    # input channel c convolved with kernel[:, :, c, j].
    rng = np.random.default_rng(3)
    c, m = 3, 2
    x, k = rng.normal(size=(2, 6, 5, c)), rng.normal(size=(3, 2, c, m))
    y = forward(x, k.reshape(3, 2, 1, c * m), 2, [1, 2], "same", 1, c)
    for ci in range(c):
        for j in range(m):
            want = ref_conv2d(
                x[..., ci : ci + 1], k[:, :, ci : ci + 1, j : j + 1], (1, 2), (1, 1), "same", 1
            )
            np.testing.assert_allclose(y[..., ci * m + j], want[..., 0], rtol=1e-12, atol=1e-12)


def keras_transpose_length(n, k, stride, dilation, padding):
    """Keras's Conv*Transpose output length (deconv_output_length, no output_padding)."""
    k_eff = k + (k - 1) * (dilation - 1)
    return n * stride + max(k_eff - stride, 0) if padding == "valid" else n * stride


# (spatial, dy shape, kernel shape (k..., filters / groups, in_channels), strides, padding,
#  dilation, groups)
T_CASES = [
    (1, (2, 5, 4), (3, 3, 4), 2, "valid", 1, 1),
    (1, (2, 5, 4), (3, 2, 4), 2, "same", 1, 2),
    (1, (1, 4, 6), (2, 1, 6), 3, "valid", 2, 3),
    (2, (2, 3, 4, 4), (3, 3, 2, 4), 2, "same", 1, 1),
    (2, (1, 3, 3, 6), (2, 3, 2, 6), [2, 1], "valid", 1, 3),
    (2, (1, 4, 3, 4), (2, 2, 1, 4), 1, "valid", 2, 4),
]


def t_x_shape(case):
    spatial, dys, ws, strides, padding, dilation, groups = case
    st = (strides,) if spatial == 1 else pairs(strides)
    dil = (dilation,) if spatial == 1 else pairs(dilation)
    lengths = [
        keras_transpose_length(dys[1 + d], ws[d], st[d], dil[d], padding) for d in range(spatial)
    ]
    return (dys[0], *lengths, ws[-2] * groups)


@pytest.mark.parametrize("case", T_CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transposed_conv_matches_numpy(case, dtype):
    spatial, dys, ws, strides, padding, dilation, groups = case
    rng = np.random.default_rng(4)
    dy, w = rng.normal(size=dys), rng.normal(size=ws)
    x_shape = t_x_shape(case)
    # Keras's output length is one the forward convolution maps back to dy's.
    assert ref(np.zeros(x_shape), w, spatial, strides, padding, dilation, groups).shape == dys
    y = np.asarray(
        transposed(
            dy.astype(dtype),
            w.astype(dtype),
            list(x_shape),
            spatial,
            strides,
            padding,
            dilation,
            groups,
        )
    )
    want = ref_t(dy, w, x_shape, spatial, strides, padding, dilation, groups)
    assert y.dtype == dtype and y.shape == x_shape
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


def test_transposed_conv_stride_1_valid_is_a_full_correlation_with_the_flipped_kernel():
    # An independent check of the reference: 1-d, one channel each way.
    rng = np.random.default_rng(5)
    dy, w = rng.normal(size=(1, 6, 1)), rng.normal(size=(3, 1, 1))
    y = transposed(dy, w, [1, 8, 1], 1, 1, "valid", 1, 1)
    np.testing.assert_allclose(
        np.asarray(y)[0, :, 0], np.convolve(dy[0, :, 0], w[:, 0, 0]), rtol=1e-12
    )


@pytest.mark.parametrize("case", T_CASES, ids=case_id)
def test_transposed_conv_gradients_match_central_differences(case):
    spatial, dys, ws, strides, padding, dilation, groups = case
    rng = np.random.default_rng(6)
    dy, w = rng.normal(size=dys), rng.normal(size=ws)
    x_shape = t_x_shape(case)
    r = rng.normal(size=x_shape)
    settings = (spatial, strides, padding, dilation, groups)
    ddy, dw = tessera.grad(conv_t_loss, argnums=(0, 1))(dy, w, r, *settings)
    n_dy = numeric_grad(lambda v: np.sum(ref_t(v, w, x_shape, *settings) * r), dy)
    n_w = numeric_grad(lambda v: np.sum(ref_t(dy, v, x_shape, *settings) * r), w)
    np.testing.assert_allclose(ddy, n_dy, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, n_w, rtol=1e-6, atol=1e-7)


def weight_gradient_dot(x, w, r, c, strides, padding, dilation, groups):
    dw = tessera.conv2d_grad_weight(
        r, x, np.shape(w), strides=strides, padding=padding, dilation=dilation, groups=groups
    )
    return np.sum(dw * c)


def test_second_derivatives_through_the_weight_gradient():
    # conv2d_grad_weight has rules too: the gradient of sum(d loss / dw * c)
    # in x and in the cotangent r, against central differences of tessera's
    # own first-order gradient.
    rng = np.random.default_rng(7)
    x, w = rng.normal(size=(1, 5, 4, 4)), rng.normal(size=(2, 2, 2, 4))
    r, c = rng.normal(size=(1, 4, 3, 4)), rng.normal(size=w.shape)
    settings = (1, "valid", 1, 2)
    dx, dr = tessera.grad(weight_gradient_dot, argnums=(0, 2))(x, w, r, c, *settings)

    def first_order(x, r):
        return np.sum(tessera.grad(conv_loss, argnums=1)(x, w, r, 2, *settings) * c)

    np.testing.assert_allclose(
        dx, numeric_grad(lambda v: first_order(v, r), x), rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(
        dr, numeric_grad(lambda v: first_order(x, v), r), rtol=1e-6, atol=1e-7
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: forward(np.zeros((1, 5, 5, 6)), np.zeros((2, 2, 2, 9)), 2, 1, "valid", 1, 4),
            r"\[conv2d\] input channels \(6\) must be divisible by groups \(4\); "
            r"input shape \(1, 5, 5, 6\)",
        ),
        (
            lambda: forward(np.zeros((1, 5, 6)), np.zeros((2, 2, 8)), 1, 1, "valid", 1, 3),
            r"\[conv1d\] filters \(8, the kernel's last dimension\) must be divisible by "
            r"groups \(3\); kernel shape \(2, 2, 8\)",
        ),
        (
            lambda: forward(np.zeros((1, 5, 5, 6)), np.zeros((2, 2, 3, 9)), 2, 1, "valid", 1, 3),
            r"\[conv2d\] input has 6 channels in 3 groups of 2, so the kernel's in_channels "
            r"dimension must be 2, got 3",
        ),
        (
            lambda: forward(np.zeros((1, 5, 6)), np.zeros((2, 6, 6)), 1, 1, "valid", 1, 0),
            r"\[conv1d\] argument 'groups' must be a positive integer, got 0",
        ),
        (
            lambda: transposed(
                np.zeros((1, 4, 4, 4)), np.zeros((2, 2, 1, 4)), [1, 5, 5, 3], 2, 1, "valid", 1, 3
            ),
            r"\[conv2d_grad_input\] filters \(4, the kernel's last dimension\) must be "
            r"divisible by groups \(3\)",
        ),
        (
            lambda: transposed(
                np.zeros((1, 4, 5)), np.zeros((2, 2, 4)), [1, 5, 4], 1, 1, "valid", 1, 2
            ),
            r"\[conv1d_grad_input\] dy has shape \(1, 4, 5\) but the forward result has "
            r"shape \(1, 4, 4\)",
        ),
    ],
)
def test_errors_name_the_op_and_the_values(call, message):
    with pytest.raises(ValueError, match=message):
        call()
