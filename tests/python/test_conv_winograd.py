"""Winograd for float32 3x3 stride-1 convolutions (channels multiples of 16):
forward, input and kernel gradients against NumPy in float64 with Winograd on
and off, the switch (set_conv_winograd, TESSERA_CONV_WINOGRAD=0), and a kernel
updated in place between steps."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tessera

# Largest difference from NumPy as a fraction of NumPy's largest magnitude:
# Winograd's rounding error is a few times the direct algorithm's.
TOL = {True: 1e-5, False: 2e-6}


def ref_conv3x3(x, w, padding):
    """Keras's Conv2D (stride 1, no bias) of x (N, H, W, C) with w (3, 3, C, F)."""
    p = 1 if padding == "same" else 0
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    oh, ow = xp.shape[1] - 2, xp.shape[2] - 2
    return sum(xp[:, a : a + oh, b : b + ow] @ w[a, b] for a in range(3) for b in range(3))


def ref_grads(x, w, g, padding):
    """Gradients of sum(conv(x, w) * g) with respect to x and w."""
    p = 1 if padding == "same" else 0
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    oh, ow = g.shape[1], g.shape[2]
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for a in range(3):
        for b in range(3):
            dxp[:, a : a + oh, b : b + ow] += g @ w[a, b].T
            dw[a, b] = np.einsum("nhwc,nhwf->cf", xp[:, a : a + oh, b : b + ow], g)
    return dxp[:, p : p + x.shape[1], p : p + x.shape[2]], dw


def scaled_error(a, ref):
    return np.max(np.abs(a.astype(np.float64) - ref)) / np.max(np.abs(ref))


def conv(x, w, padding):
    return tessera.conv2d(x, w, padding=padding)


def loss(x, w, g, padding):
    return np.sum(conv(x, w, padding) * g)


forward = tessera.jit(conv)


@pytest.fixture
def winograd_setting():
    was = tessera.conv_winograd()
    yield
    tessera.set_conv_winograd(was)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("winograd", [True, False])
def test_conv2d_and_gradients_match_numpy(padding, winograd, winograd_setting):
    tessera.set_conv_winograd(winograd)
    rng = np.random.default_rng(3)
    # 36 samples of 16 channels at 20x20: more than one chunk of Winograd.
    x = rng.uniform(-1, 1, size=(36, 20, 20, 16))
    w = rng.uniform(-1, 1, size=(3, 3, 16, 32))
    y_ref = ref_conv3x3(x, w, padding)
    g = rng.uniform(-1, 1, size=y_ref.shape)
    dx_ref, dw_ref = ref_grads(x, w, g, padding)
    x32, w32, g32 = (a.astype(np.float32) for a in (x, w, g))
    y = np.asarray(forward(x32, w32, padding))
    dx, dw = tessera.grad(loss, argnums=(0, 1))(x32, w32, g32, padding)
    assert y.dtype == np.float32 and y.shape == y_ref.shape
    assert scaled_error(y, y_ref) < TOL[winograd]
    assert scaled_error(np.asarray(dx), dx_ref) < TOL[winograd]
    assert scaled_error(np.asarray(dw), dw_ref) < TOL[winograd]


def test_kernel_updated_in_place_is_read_again():
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, size=(4, 10, 10, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, size=(3, 3, 16, 16)).astype(np.float32)
    for _ in range(2):
        ref = ref_conv3x3(x.astype(np.float64), w.astype(np.float64), "same")
        assert scaled_error(np.asarray(forward(x, w, "same")), ref) < TOL[True]
        w *= -0.5  # the same buffer, new values


def test_switch(winograd_setting):
    tessera.set_conv_winograd(False)
    assert tessera.conv_winograd() is False
    tessera.set_conv_winograd(True)
    assert tessera.conv_winograd() is True
    env = dict(os.environ, TESSERA_CONV_WINOGRAD="0")
    out = subprocess.run(
        [sys.executable, "-c", "import tessera; print(tessera.conv_winograd())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
