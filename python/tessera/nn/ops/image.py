"""``ops.image``: Keras 3's image ops. ``resize`` is two matrix products of
fixed interpolation weights (one per spatial axis), so it works inside a
model and is differentiable in the images."""

from __future__ import annotations

import numpy as np

from . import numpy as knp
from ._base import dtype_of, floating, missing, shape_of

__all__ = ["resize"]


def _weights(n_in: int, n_out: int, interpolation: str) -> np.ndarray:
    """(n_out, n_in) weights: half-pixel centres, as jax.image.resize without
    antialiasing (bilinear: a triangle renormalised inside the image)."""
    scale = n_out / n_in
    centres = (np.arange(n_out) + 0.5) / scale - 0.5
    if interpolation == "nearest":
        src = np.clip(np.floor((np.arange(n_out) + 0.5) / scale).astype(int), 0, n_in - 1)
        w = np.zeros((n_out, n_in))
        w[np.arange(n_out), src] = 1.0
        return w
    w = np.maximum(0.0, 1.0 - np.abs(centres[:, None] - np.arange(n_in)[None, :]))
    total = w.sum(axis=1, keepdims=True)
    return np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)


def resize(images, size, interpolation="bilinear", antialias=False, crop_to_aspect_ratio=False,
           pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, data_format=None):
    if interpolation not in ("bilinear", "nearest"):
        raise ValueError(f"[ops.image.resize] interpolation {interpolation!r} is not supported; "
                         "supported: 'bilinear', 'nearest'")
    if antialias or crop_to_aspect_ratio or pad_to_aspect_ratio:
        raise ValueError("[ops.image.resize] antialias, crop_to_aspect_ratio and "
                         "pad_to_aspect_ratio are not supported")
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"[ops.image.resize] data_format must be 'channels_last' or "
                         f"'channels_first', got {data_format!r}")
    x = floating(images)
    nd = len(shape_of(x))
    if nd not in (3, 4):
        raise ValueError(f"[ops.image.resize] images must be 3-d or 4-d, got shape "
                         f"{shape_of(x)}")
    if len(size) != 2:
        raise ValueError(f"[ops.image.resize] size must be (height, width), got {size!r}")
    first = data_format == "channels_first"
    hax, wax = (nd - 2, nd - 1) if first else (nd - 3, nd - 2)
    h, w = shape_of(x)[hax], shape_of(x)[wax]
    d = dtype_of(x)
    wh = _weights(h, int(size[0]), interpolation).astype(d)
    ww = _weights(w, int(size[1]), interpolation).astype(d)
    x = knp.moveaxis(knp.matmul(knp.moveaxis(x, hax, -1), wh.T.copy()), -1, hax)
    x = knp.moveaxis(knp.matmul(knp.moveaxis(x, wax, -1), ww.T.copy()), -1, wax)
    return x


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("tessera.nn.ops.image", name, __all__)
