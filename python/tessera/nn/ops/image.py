"""``ops.image``: Keras 3's image ops. ``resize`` is two matrix products of
fixed interpolation weights (one per spatial axis), so it works inside a
model and is differentiable in the images."""

from __future__ import annotations

import numpy as np

from . import numpy as knp
from ._base import cast, dtype_of, floating, missing, prim, shape_of, tensor

__all__ = ["resize", "rgb_to_grayscale", "pad_images", "crop_images"]


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


def rgb_to_grayscale(images, data_format=None):
    """0.2989 R + 0.5870 G + 0.1140 B, keeping a channel axis of 1."""
    x = tensor(images)
    nd = len(shape_of(x))
    if nd not in (3, 4):
        raise ValueError(f"[ops.image.rgb_to_grayscale] images must be 3-d or 4-d, got shape "
                         f"{shape_of(x)}")
    ax = nd - 3 if data_format == "channels_first" else nd - 1
    if shape_of(x)[ax] not in (1, 3):
        raise ValueError(f"[ops.image.rgb_to_grayscale] 1 or 3 channels expected, got shape "
                         f"{shape_of(x)}")
    if shape_of(x)[ax] == 1:
        return x
    d = dtype_of(x)
    xf = floating(x)
    w = np.array([0.2989, 0.5870, 0.1140], dtype=dtype_of(xf)).reshape(
        [3 if i == ax else 1 for i in range(nd)])
    return cast(knp.sum(knp.multiply(xf, w), axis=ax, keepdims=True), d)


def _box(op, images, data_format, a, b, c, d_, th, tw, grow):
    """Offsets (top, left, bottom, right) from Keras's arguments."""
    x = tensor(images)
    nd = len(shape_of(x))
    if nd not in (3, 4):
        raise ValueError(f"[ops.image.{op}] images must be 3-d or 4-d, got shape {shape_of(x)}")
    hax, wax = (nd - 2, nd - 1) if data_format == "channels_first" else (nd - 3, nd - 2)
    h, w = shape_of(x)[hax], shape_of(x)[wax]

    def solve(first, last, target, n, label):
        if target is None:
            first, last = first or 0, last or 0
        elif first is None and last is None:
            raise ValueError(f"[ops.image.{op}] give {label} offsets with target size {target}")
        elif first is None:
            first = (target - n - last) if grow else (n - target - last)
        elif last is None:
            last = (target - n - first) if grow else (n - target - first)
        if first < 0 or last < 0:
            raise ValueError(f"[ops.image.{op}] {label}: the offsets ({first}, {last}) and "
                             f"target {target} do not fit a size of {n}")
        return first, last

    top, bottom = solve(a, c, th, h, "height")
    left, right = solve(b, d_, tw, w, "width")
    return x, hax, wax, h, w, top, bottom, left, right


def pad_images(images, top_padding=None, left_padding=None, bottom_padding=None,
               right_padding=None, target_height=None, target_width=None, data_format=None):
    x, hax, wax, h, w, t, b, l, r = _box("pad_images", images, data_format, top_padding,
                                         left_padding, bottom_padding, right_padding,
                                         target_height, target_width, True)
    widths = [[0, 0] for _ in shape_of(x)]
    widths[hax], widths[wax] = [t, b], [l, r]
    return prim("pad", x, widths)


def crop_images(images, top_cropping=None, left_cropping=None, bottom_cropping=None,
                right_cropping=None, target_height=None, target_width=None, data_format=None):
    x, hax, wax, h, w, t, b, l, r = _box("crop_images", images, data_format, top_cropping,
                                         left_cropping, bottom_cropping, right_cropping,
                                         target_height, target_width, False)
    index = [slice(None)] * len(shape_of(x))
    index[hax], index[wax] = slice(t, h - b), slice(l, w - r)
    return x[tuple(index)]


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("tessera.nn.ops.image", name, __all__)
