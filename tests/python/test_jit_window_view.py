"""np.lib.stride_tricks.sliding_window_view in jit code: a read-only view of x (no copy), as
NumPy's, over one axis or several, of views and of every layout; writes through it refused as
NumPy refuses them; the primitive's gradient against finite differences."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view as swv

import tessera


def windows(x, y):
    a = swv(x, (2, 3))
    b = swv(x, 3, axis=0)
    c = swv(x, (2, 2), axis=(1, 0))
    d = swv(x[:, ::2], 2, axis=1)        # of a strided view
    e = swv(x.T, 4, axis=-1)             # of a transposed view
    f = swv(y, 5)
    return a, b, c, d, e, f, a.sum(axis=(-1, -2)), f.std(axis=-1), c[1, 2]


@pytest.mark.parametrize("threads", [1, 2])
def test_windows_are_numpys(threads):
    x = np.arange(42.0).reshape(6, 7) ** 1.5
    y = np.random.default_rng(2).random(1000).astype(np.float32)
    got = tessera.jit(windows, threads=threads)(x, y)
    want = windows(x, y)
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.shape(g) == np.shape(w), k
        assert np.asarray(g).dtype == np.asarray(w).dtype, k
        # the reductions (6, 7) in their own order: within rounding
        np.testing.assert_allclose(g, w, rtol={6: 1e-14, 7: 1e-6}.get(k, 0), err_msg=str(k))


def test_a_window_may_see_later_writes_to_x_as_numpys_view_does():
    def f(x):
        v = swv(x, 3)
        x[2] = 100.0
        return v.sum(axis=-1)
    x = np.arange(6.0)
    np.testing.assert_array_equal(tessera.jit(f)(x.copy()), f(x.copy()))


def test_writes_through_the_windows_are_refused_as_numpy_refuses_them():
    def f(x):
        v = swv(x, 3)
        v[0, 0] = 1.0
        return v
    with pytest.raises(ValueError, match="read-only"):
        f(np.arange(5.0))
    with pytest.raises(ValueError, match=r"read-only.*test_jit_window_view.py:\d+"):
        tessera.jit(f)(np.arange(5.0))


def test_windows_longer_than_the_axis_are_numpys_error():
    def f(x):
        return swv(x, 7)
    with pytest.raises(ValueError, match="window shape cannot be larger"):
        f(np.arange(5.0))
    with pytest.raises(ValueError, match="window shape cannot be larger"):
        tessera.jit(f)(np.arange(5.0))


def test_the_window_views_gradient_matches_finite_differences():
    w = np.array([0.5, -1.0, 2.0])

    def loss(x):
        return (tessera.window_view(x, 1, 3) ** 2 * w).sum()

    def loss_np(x):
        return (swv(x, 3, axis=1) ** 2 * w).sum()

    x = np.random.default_rng(5).normal(size=(3, 6))
    g = tessera.grad(loss)(x)
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        fd[i] = (loss_np(x + e) - loss_np(x - e)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
