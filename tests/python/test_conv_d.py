"""conv1d_d from Python on one locality (the multi-locality runs are
tests/distributed/conv_d.py): tessera._core.TiledArray made from a tile and its
metadata, and conv1d_d with its gradient inside jit functions."""

import numpy as np
import pytest

import tessera
from tessera import _core


def whole(a, tiling="pages"):
    return _core.TiledArray(a, a.shape, [[(0, e) for e in a.shape]], tiling)


@tessera.jit
def spatial(x, w):
    return tessera.conv1d_d(x, w, stride=2, padding="causal", dilation=2)


@tessera.jit
def local(x, w):
    return tessera.conv1d(x, w, stride=2, padding="causal", dilation=2)


@tessera.jit
def spatial_loss(x, w, r):
    return np.sum(tessera.local_tile(tessera.conv1d_d(x, w, padding="same")) * r)


@tessera.jit
def local_loss(x, w, r):
    return np.sum(tessera.conv1d(x, w, padding="same") * r)


def test_tiled_array_from_its_parts():
    a = np.arange(24.0).reshape(2, 4, 3)
    t = whole(a, "columns")
    assert t.shape == (2, 4, 3) and t.tiling == "columns" and t.locality == 0
    assert t.spans == [((0, 2), (0, 4), (0, 3))]
    np.testing.assert_array_equal(t.tile, a)


def test_tiled_array_checks_its_parts():
    a = np.zeros((2, 4))
    with pytest.raises(ValueError, match=r"\[TiledArray\] needs one span per locality \(1\), got 2"):
        _core.TiledArray(a, a.shape, [[(0, 2), (0, 4)], [(0, 2), (0, 4)]])
    with pytest.raises(ValueError, match=r"element \(0, 3\) is in no locality's span"):
        _core.TiledArray(a[:, :3], a.shape, [[(0, 2), (0, 3)]])
    with pytest.raises(ValueError, match=r"has span \[0:2, 0:4\] of shape \(2, 4\) but its tile has shape \(2, 3\)"):
        _core.TiledArray(a[:, :3], a.shape, [[(0, 2), (0, 4)]])
    with pytest.raises(ValueError, match=r"the span of locality 0 has 1 dimensions, the array 2"):
        _core.TiledArray(a, a.shape, [[(0, 2)]])
    with pytest.raises(TypeError, match=r"\[TiledArray\] tile must be an array, got string"):
        _core.TiledArray("tile", (2,), [[(0, 2)]])


def test_conv1d_d_in_jit_is_conv1d_on_one_locality():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(3, 9, 2)), rng.normal(size=(3, 2, 4))
    y = spatial(whole(x), w)
    assert isinstance(y, _core.TiledArray) and y.tiling == "pages"
    np.testing.assert_allclose(y.tile, local(x, w), rtol=1e-12)


def test_conv1d_d_gradients_in_jit():
    rng = np.random.default_rng(1)
    x, w, r = rng.normal(size=(2, 7, 3)), rng.normal(size=(3, 3, 2)), rng.normal(size=(2, 7, 2))
    value, (dx, dw) = tessera.value_and_grad(spatial_loss, argnums=(0, 1))(whole(x), w, r)
    want_value, (want_dx, want_dw) = tessera.value_and_grad(local_loss, argnums=(0, 1))(x, w, r)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    assert isinstance(dx, _core.TiledArray) and dx.spans == whole(x).spans
    np.testing.assert_allclose(dx.tile, want_dx, rtol=1e-12)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-12)


def test_conv1d_d_wants_a_tiled_x():
    with pytest.raises(TypeError, match=r"\[conv1d_d\] argument 'x' must be a tiled array \(for a plain array use "
                                        r"conv1d\)"):
        spatial(np.zeros((1, 5, 2)), np.zeros((3, 2, 1)))
