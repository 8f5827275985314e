"""``ops.image``: Keras 3's image ops. ``resize`` is two matrix products of
fixed interpolation weights (one per spatial axis); blurs, edges and SSIM are
depthwise convolutions of fixed kernels; patches are strided slices; sampling
(``map_coordinates``, ``affine_transform``) gathers the neighbours and weighs
them. All compose differentiable ops, so they work inside a model and are
differentiable in the images (and in the sampling coordinates where the
weights depend on them)."""

from __future__ import annotations

import numpy as np

from . import numpy as knp
from .. import random
from .._config import SETTINGS
from .linalg import solve
from .nn import depthwise_conv
from ._base import static_or_symbolic_shape
from ._base import (cast, dtype_of, eager_only, eager_value, floating, missing, prim, shape_of,
                    tensor)
from ..symbolic import user_location

__all__ = ["resize", "rgb_to_grayscale", "pad_images", "crop_images", "extract_patches",
           "extract_patches_3d", "rgb_to_hsv", "hsv_to_rgb", "gaussian_blur", "sobel_edges",
           "ssim", "map_coordinates", "affine_transform", "perspective_transform",
           "scale_and_translate", "elastic_transform"]



def _first(data_format) -> bool:
    """Whether images are channels first: data_format, or keras.config's default for None."""
    return (data_format or SETTINGS["image_data_format"]) == "channels_first"

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
    first = _first(data_format)
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
    ax = nd - 3 if _first(data_format) else nd - 1
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
    hax, wax = (nd - 2, nd - 1) if _first(data_format) else (nd - 3, nd - 2)
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


def _rank(op, x, ranks=(3, 4), what="images"):
    nd = len(shape_of(x))
    if nd not in ranks:
        raise ValueError(f"[ops.image.{op}] {what} must be of rank {' or '.join(map(str, ranks))}"
                         f" (one or a batch), got shape {shape_of(x)} (at {user_location()})")
    return nd


def _format(op, data_format):
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"[ops.image.{op}] data_format must be 'channels_last' or "
                         f"'channels_first', got {data_format!r} (at {user_location()})")
    return data_format or SETTINGS["image_data_format"]


def _to_last(x, nd, batched_nd, data_format):
    """x batched (a leading axis added to one image) and channels last."""
    if nd < batched_nd:
        x = knp.expand_dims(x, 0)
    if _first(data_format):
        x = knp.moveaxis(x, 1, -1)
    return x


def _from_last(x, nd, batched_nd, data_format):
    if _first(data_format):
        x = knp.moveaxis(x, -1, 1)
    if nd < batched_nd:
        x = knp.squeeze(x, 0)
    return x


def _tuple(op, name, v, n):
    t = (v,) * n if isinstance(v, (int, np.integer)) else tuple(v)
    if len(t) != n or not all(isinstance(i, (int, np.integer)) and i > 0 for i in t):
        raise ValueError(f"[ops.image.{op}] {name} must be a positive int or {n} of them, got "
                         f"{v!r} (at {user_location()})")
    return tuple(int(i) for i in t)


def _patches(op, x, size, strides, dilation_rate, padding, n):
    """Patches of x (batch, *spatial(n), channels): each output position holds
    its window flattened in (spatial..., channel) order, as Keras's identity-
    kernel convolution gives."""
    size = _tuple(op, "size", size, n)
    strides = size if not strides else _tuple(op, "strides", strides, n)
    dil = _tuple(op, "dilation_rate", dilation_rate, n)
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"[ops.image.{op}] padding must be 'valid' or 'same', got {padding!r} "
                         f"(at {user_location()})")
    spatial = shape_of(x)[1:1 + n]
    if None in spatial:
        raise ValueError(f"[ops.image.{op}] the spatial axes must be known, got shape "
                         f"{shape_of(x)} (at {user_location()})")
    span = [(k - 1) * d + 1 for k, d in zip(size, dil)]
    if padding.lower() == "same":
        out = [-(-m // s) for m, s in zip(spatial, strides)]
        total = [max((o - 1) * s + e - m, 0) for o, s, e, m in zip(out, strides, span, spatial)]
        if any(total):
            x = prim("pad", x, [[0, 0]] + [[t // 2, t - t // 2] for t in total] + [[0, 0]])
    else:
        out = [(m - e) // s + 1 for m, e, s in zip(spatial, span, strides)]
        if min(out) < 1:
            raise ValueError(f"[ops.image.{op}] patches of size {size} (dilation {dil}) do not "
                             f"fit images of spatial shape {tuple(spatial)} (at "
                             f"{user_location()})")
    c = shape_of(x)[-1]
    if tuple(strides) == tuple(size) and set(dil) == {1}:
        # non-overlapping windows: one reshape and one transpose
        x = x[(slice(None),) + tuple(slice(0, o * k) for o, k in zip(out, size))]
        split = [-1]
        for o, k in zip(out, size):
            split += [o, k]
        x = knp.reshape(x, split + [c])
        order = [0] + [1 + 2 * i for i in range(n)] + [2 + 2 * i for i in range(n)] + [2 * n + 1]
        return knp.reshape(knp.transpose(x, order), [-1] + out + [int(np.prod(size)) * c])
    pieces = []
    for offsets in np.ndindex(*size):
        index = tuple(slice(o * d, o * d + (m - 1) * s + 1, s)
                      for o, d, m, s in zip(offsets, dil, out, strides))
        pieces.append(x[(slice(None),) + index])
    return knp.reshape(knp.stack(pieces, axis=-2), [-1] + out + [len(pieces) * c])


def extract_patches(images, size, strides=None, dilation_rate=1, padding="valid",
                    data_format=None):
    """Patches of 2-d images (of 3-d volumes when size has 3 entries), as keras.ops."""
    if not isinstance(size, (int, np.integer)) and len(size) == 3:
        return extract_patches_3d(images, size, strides, dilation_rate, padding, data_format)
    fmt = _format("extract_patches", data_format)
    x = floating(images) if not dtype_of(images).startswith(("int", "uint", "bool")) \
        else tensor(images)
    nd = _rank("extract_patches", x)
    y = _patches("extract_patches", _to_last(x, nd, 4, fmt), size, strides, dilation_rate,
                 padding, 2)
    return _from_last(y, nd, 4, fmt)


def extract_patches_3d(volumes, size, strides=None, dilation_rate=1, padding="valid",
                       data_format=None):
    fmt = _format("extract_patches_3d", data_format)
    x = tensor(volumes)
    nd = _rank("extract_patches_3d", x, (4, 5), "volumes")
    y = _patches("extract_patches_3d", _to_last(x, nd, 5, fmt), size, strides, dilation_rate,
                 padding, 3)
    return _from_last(y, nd, 5, fmt)


def _float_images(op, images):
    x = tensor(images)
    d = dtype_of(x)
    if not (d.startswith("float") or d == "bfloat16"):
        raise ValueError(f"[ops.image.{op}] images must be of a float dtype, got {d} (at "
                         f"{user_location()})")
    return x


def _planes(op, x, data_format):
    nd = _rank(op, x)
    ax = -1 if _format(op, data_format) == "channels_last" else -3
    if shape_of(x)[ax] != 3:
        raise ValueError(f"[ops.image.{op}] 3 channels expected, got shape {shape_of(x)} (at "
                         f"{user_location()})")
    return [knp.take(x, i, axis=ax % nd) for i in range(3)], ax


def rgb_to_hsv(images, data_format=None):
    """RGB in [0, 1] to hue, saturation, value in [0, 1] (Keras's formulas)."""
    x = _float_images("rgb_to_hsv", images)
    eps = float(np.finfo(dtype_of(x)).eps)
    x = knp.where(knp.less(knp.abs(x), eps), 0.0, x)
    (r, g, b), ax = _planes("rgb_to_hsv", x, data_format)
    value = knp.maximum(knp.maximum(r, g), b)
    range_ = value - knp.minimum(knp.minimum(r, g), b)
    safe_value = knp.where(knp.greater(value, 0), value, 1.0)
    safe_range = knp.where(knp.greater(range_, 0), range_, 1.0)
    saturation = knp.where(knp.greater(value, 0), range_ / safe_value, 0.0)
    norm = 1.0 / (6.0 * safe_range)
    hue = knp.where(knp.equal(value, g), norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0)
    hue = knp.where(knp.equal(value, r), norm * (g - b), hue)
    hue = knp.where(knp.greater(range_, 0), hue, 0.0) + cast(knp.less(hue, 0.0), dtype_of(x))
    return knp.stack([hue, saturation, value], axis=ax)


def hsv_to_rgb(images, data_format=None):
    x = _float_images("hsv_to_rgb", images)
    (h, s, v), ax = _planes("hsv_to_rgb", x, data_format)
    dh = knp.mod(h, 1.0) * 6.0
    dr = knp.clip(knp.abs(dh - 3.0) - 1.0, 0.0, 1.0)
    dg = knp.clip(2.0 - knp.abs(dh - 2.0), 0.0, 1.0)
    db = knp.clip(2.0 - knp.abs(dh - 4.0), 0.0, 1.0)
    one_minus_s = 1.0 - s
    return knp.stack([v * (one_minus_s + s * d) for d in (dr, dg, db)], axis=ax)


def _depthwise(x, kernel2d, padding):
    """Each channel of x (batch, h, w, c) convolved with one fixed 2-d kernel."""
    c = shape_of(x)[-1]
    k = np.repeat(kernel2d[:, :, None, None], c, axis=2).astype(dtype_of(x))
    return depthwise_conv(x, k, 1, padding)


def _gaussian_1d(size, sigma, dtype):
    t = np.arange(size, dtype=dtype) - np.asarray((size - 1) / 2, dtype=dtype)
    k = np.exp(np.asarray(-0.5, dtype) * (t / np.asarray(sigma, dtype)) ** 2)
    return k / k.sum()


def gaussian_blur(images, kernel_size=(3, 3), sigma=(1.0, 1.0), data_format=None):
    """A Gaussian blur ("same" size). As Keras on JAX: the kernel's rows use
    kernel_size[1] and sigma[1], its columns kernel_size[0] and sigma[0]."""
    fmt = _format("gaussian_blur", data_format)
    x = floating(images)
    nd = _rank("gaussian_blur", x)
    ks = _tuple("gaussian_blur", "kernel_size", kernel_size, 2)
    sg = (float(sigma),) * 2 if isinstance(sigma, (int, float)) else tuple(map(float, sigma))
    if len(sg) != 2 or min(sg) <= 0:
        raise ValueError(f"[ops.image.gaussian_blur] sigma must be one or two positive numbers, "
                         f"got {sigma!r} (at {user_location()})")
    d = dtype_of(x)
    kernel = np.outer(_gaussian_1d(ks[1], sg[1], d), _gaussian_1d(ks[0], sg[0], d))
    y = _depthwise(_to_last(x, nd, 4, fmt), kernel, "same")
    return _from_last(y, nd, 4, fmt)


def sobel_edges(images, data_format=None):
    """Sobel gradients: (..., 2) holding (dy, dx) per pixel and channel."""
    fmt = _format("sobel_edges", data_format)
    x = floating(images)
    nd = _rank("sobel_edges", x, (4,))
    x = _to_last(x, nd, 4, fmt)
    sx = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], "float64")
    dy, dx = _depthwise(x, sx.T.copy(), "same"), _depthwise(x, sx, "same")
    if fmt == "channels_first":
        dy, dx = knp.moveaxis(dy, -1, 1), knp.moveaxis(dx, -1, 1)
    return knp.stack([dy, dx], axis=-1)


def ssim(image1, image2, max_val=1.0, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
         data_format=None):
    """Structural similarity per image (mean over pixels and channels of
    Keras's SSIM map, an 11x11 Gaussian window by default, no padding)."""
    fmt = _format("ssim", data_format)
    a, b = floating(image1), floating(image2)
    nd = _rank("ssim", a, what="image1")
    if len(shape_of(b)) != nd:
        raise ValueError(f"[ops.image.ssim] image1 and image2 must have the same rank, got "
                         f"shapes {shape_of(a)} and {shape_of(b)} (at {user_location()})")
    a, b = _to_last(a, nd, 4, fmt), _to_last(b, nd, 4, fmt)
    d = dtype_of(a)
    g = _gaussian_1d(filter_size, filter_sigma, d)
    kernel = np.outer(g, g)
    if min(shape_of(a)[1:3]) < filter_size:
        raise ValueError(f"[ops.image.ssim] images of spatial shape {shape_of(a)[1:3]} are "
                         f"smaller than filter_size {filter_size} (at {user_location()})")
    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    mu1, mu2 = _depthwise(a, kernel, "valid"), _depthwise(b, kernel, "valid")
    mu12, mu1_sq, mu2_sq = mu1 * mu2, mu1 * mu1, mu2 * mu2
    s1 = _depthwise(a * a, kernel, "valid") - mu1_sq
    s2 = _depthwise(b * b, kernel, "valid") - mu2_sq
    s12 = _depthwise(a * b, kernel, "valid") - mu12
    smap = (2.0 * mu12 + c1) * (2.0 * s12 + c2) / ((mu1_sq + mu2_sq + c1) * (s1 + s2 + c2))
    r = knp.mean(smap, axis=(1, 2, 3))
    return knp.squeeze(r, 0) if nd == 3 else r


_FILL_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")


def _fix_index(index, n, mode):
    """Integer indices mapped into [0, n) as jax.scipy.ndimage does per fill mode."""
    if mode == "nearest":
        return knp.clip(index, 0, n - 1)
    if mode == "wrap":
        return knp.mod(index, n)
    if mode in ("mirror", "reflect"):
        def mirror(i, size):
            s = max(size - 1, 1)
            return knp.abs(knp.mod(i + s, 2 * s) - s)
        if mode == "mirror":
            return mirror(index, n) if n > 1 else index * 0
        return knp.floor_divide(mirror(2 * index + 1, 2 * n + 1) - 1, 2)
    return knp.clip(index, 0, n - 1)  # constant: out-of-range corners are masked


def _nodes(coord, order, dtype):
    """[(integer index, weight)] of one axis's coordinates (order 0: nearest)."""
    if order == 0:
        r = knp.sign(coord) * knp.floor(knp.abs(coord) + 0.5)
        return [(cast(r, "int32"), None)]
    lower = knp.floor(coord)
    upper_w = coord - lower
    i = cast(lower, "int32")
    return [(i, 1.0 - upper_w), (i + 1, upper_w)]


def _sample(op, flat, shape, coords, order, mode, cval, dtype, base=None):
    """Values of `flat` (the input ravelled on its first len(shape) axes) at
    fractional coordinates (one tensor per axis of shape), interpolated."""
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    total = None
    for corner in np.ndindex(*([order + 1] * len(shape))):
        flat_index, weight, valid = (0 if base is None else base), None, None
        for axis, k in enumerate(corner):
            index, w = _nodes(coords[axis], order, dtype)[k]
            if mode == "constant":
                inside = knp.logical_and(knp.greater_equal(index, 0),
                                         knp.less(index, shape[axis]))
                valid = inside if valid is None else knp.logical_and(valid, inside)
            index = _fix_index(index, shape[axis], mode)
            flat_index = flat_index + index * strides[axis] if strides[axis] != 1 \
                else flat_index + index
            if w is not None:
                weight = w if weight is None else weight * w
        value = knp.take(flat, flat_index, axis=0)
        extra = len(shape_of(value)) - len(shape_of(flat_index))
        if valid is not None:
            for _ in range(extra):
                valid = knp.expand_dims(valid, -1)
            value = knp.where(valid, value, np.asarray(cval, dtype))
        if weight is not None:
            for _ in range(extra):
                weight = knp.expand_dims(weight, -1)
            value = value * weight
        total = value if total is None else total + value
    return total


def _check_choice(op, name, value, choices):
    if value not in choices:
        raise ValueError(f"[ops.image.{op}] {name} must be one of {list(choices)}, got "
                         f"{value!r} (at {user_location()})")


def map_coordinates(inputs, coordinates, order, fill_mode="constant", fill_value=0.0):
    """inputs sampled at coordinates (rank(inputs), ...): order 0 nearest,
    order 1 linear; out-of-range points by fill_mode, as jax.scipy.ndimage."""
    x = tensor(inputs)
    shape = shape_of(x)
    cs = shape_of(coordinates)
    if len(cs) < 2 or cs[0] != len(shape):
        raise ValueError(f"[ops.image.map_coordinates] coordinates must have shape (rank of "
                         f"inputs = {len(shape)}, ...), got {cs} (at {user_location()})")
    if None in shape:
        raise ValueError(f"[ops.image.map_coordinates] inputs' shape must be known, got {shape} "
                         f"(at {user_location()})")
    _check_choice("map_coordinates", "fill_mode", fill_mode, _FILL_MODES)
    _check_choice("map_coordinates", "order", order, (0, 1))
    d = dtype_of(x)
    integer = not (d.startswith("float") or d == "bfloat16")
    xf = cast(x, "float32") if integer else x
    c = floating(coordinates)
    coords = [knp.take(c, i, axis=0) for i in range(len(shape))]
    y = _sample("map_coordinates", knp.reshape(xf, [-1]), shape, coords, order, fill_mode,
                fill_value, dtype_of(xf))
    if integer:
        y = cast(knp.sign(y) * knp.floor(knp.abs(y) + 0.5), d)
    return y


def _warp(op, x, xf, src_y, src_x, interpolation, fill_mode, fill_value):
    """x (batch, h, w, c; xf: as float) sampled at (src_y, src_x), each
    (batch, h, w) or (1, h, w); integer images rounded back to their dtype."""
    _, h, w, c = shape_of(x)
    ones = knp.ones_like(knp.take(xf, 0, axis=3))
    src_x, src_y = src_x * ones, src_y * ones
    # image b's pixels start at b*h*w in the ravelled batch
    base = cast(knp.cumsum(ones, axis=0) - 1.0, "int32") * (h * w)
    order = 0 if interpolation == "nearest" else 1
    y = _sample(op, knp.reshape(xf, [-1, c]), (h, w), [src_y, src_x], order, fill_mode,
                fill_value, dtype_of(xf), base)
    d = dtype_of(x)
    if d != dtype_of(xf):
        y = cast(knp.sign(y) * knp.floor(knp.abs(y) + 0.5), d)
    return y


def affine_transform(images, transform, interpolation="bilinear", fill_mode="constant",
                     fill_value=0, data_format=None):
    """Each output pixel (x, y) samples the input at ((a0 x + a1 y + a2) / k,
    (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1, for transform [a0, a1, a2,
    b0, b1, b2, c0, c1] (one, or one per image)."""
    op = "affine_transform"
    fmt = _format(op, data_format)
    _check_choice(op, "interpolation", interpolation, ("nearest", "bilinear"))
    _check_choice(op, "fill_mode", fill_mode, _FILL_MODES)
    x = tensor(images)
    nd = _rank(op, x)
    t = floating(transform)
    ts = shape_of(t)
    if len(ts) not in (1, 2) or ts[-1] != 8:
        raise ValueError(f"[ops.image.{op}] transform must have shape (8,) or (batch, 8), got "
                         f"{ts} (at {user_location()})")
    x = _to_last(x, nd, 4, fmt)
    _, h, w, c = shape_of(x)
    if None in (h, w, c):
        raise ValueError(f"[ops.image.{op}] the image size must be known, got shape "
                         f"{shape_of(x)} (at {user_location()})")
    d = dtype_of(x)
    integer = not (d.startswith("float") or d == "bfloat16")
    xf = cast(x, "float32") if integer else x
    if len(ts) == 1:
        t = knp.expand_dims(t, 0)
    t = cast(t, dtype_of(xf))
    gy, gx = np.meshgrid(np.arange(h, dtype=dtype_of(xf)), np.arange(w, dtype=dtype_of(xf)),
                         indexing="ij")
    col = [knp.reshape(knp.take(t, i, axis=1), [-1, 1, 1]) for i in range(8)]
    k = col[6] * gx + col[7] * gy + 1.0
    src_x = (col[0] * gx + col[1] * gy + col[2]) / k
    src_y = (col[3] * gx + col[4] * gy + col[5]) / k
    y = _warp(op, x, xf, src_y, src_x, interpolation, fill_mode, fill_value)
    return _from_last(y, nd, 4, fmt)


def _homography(start, end):
    """The 8 projective coefficients mapping end points to start points
    (batch, 4, 2) -> (batch, 8): the 8x8 linear system of four point pairs."""
    sx, sy = start[..., 0], start[..., 1]
    ex, ey = end[..., 0], end[..., 1]
    zeros, ones = ex * 0.0, ex * 0.0 + 1.0
    x_rows = knp.stack([ex, ey, ones, zeros, zeros, zeros, -sx * ex, -sx * ey], axis=-1)
    y_rows = knp.stack([zeros, zeros, zeros, ex, ey, ones, -sy * ex, -sy * ey], axis=-1)
    a = knp.concatenate([x_rows, y_rows], axis=1)
    b = knp.expand_dims(knp.concatenate([sx, sy], axis=-1), -1)
    return knp.squeeze(solve(a, b), -1)


def perspective_transform(images, start_points, end_points, interpolation="bilinear",
                          fill_value=0, data_format=None):
    """Each image warped so its start_points (4 (x, y) corners) land on
    end_points: affine_transform with the homography of the two quadrilaterals."""
    op = "perspective_transform"
    _check_choice(op, "interpolation", interpolation, ("nearest", "bilinear"))
    start, end = floating(start_points), floating(end_points)
    for name, v in (("start_points", start), ("end_points", end)):
        if tuple(shape_of(v)[-2:]) != (4, 2) or len(shape_of(v)) not in (2, 3):
            raise ValueError(f"[ops.image.{op}] {name} must have shape (4, 2) or (batch, 4, 2), "
                             f"got {shape_of(v)} (at {user_location()})")
    if shape_of(start) != shape_of(end):
        raise ValueError(f"[ops.image.{op}] start_points and end_points must have the same "
                         f"shape, got {shape_of(start)} and {shape_of(end)} (at "
                         f"{user_location()})")
    if len(shape_of(start)) == 2:
        start, end = knp.expand_dims(start, 0), knp.expand_dims(end, 0)
    t = _homography(cast(start, "float32"), cast(end, "float32"))
    if shape_of(t)[0] == 1:
        t = knp.squeeze(t, 0)
    return affine_transform(images, t, interpolation, "constant", fill_value, data_format)


def elastic_transform(images, alpha=20.0, sigma=5.0, interpolation="bilinear",
                      fill_mode="reflect", fill_value=0.0, seed=None, data_format=None):
    """Each image resampled at its pixel grid plus alpha times a Gaussian-blurred
    (sigma, window int(6 sigma) | 1) field of normal noise times sigma. As Keras
    3.15 on JAX, one noise field (one draw of keras.random's normal with seed)
    displaces both axes. Works inside a model (the step's seed, as keras.random)."""
    op = "elastic_transform"
    fmt = _format(op, data_format)
    _check_choice(op, "interpolation", interpolation, ("nearest", "bilinear"))
    _check_choice(op, "fill_mode", fill_mode, _FILL_MODES)
    if not isinstance(sigma, (int, float)) or sigma <= 0:
        raise ValueError(f"[ops.image.{op}] sigma must be a positive number, got {sigma!r} (at "
                         f"{user_location()})")
    x = tensor(images)
    nd = _rank(op, x)
    x = _to_last(x, nd, 4, fmt)
    d = dtype_of(x)
    integer = not (d.startswith("float") or d == "bfloat16")
    xf = cast(x, "float32") if integer else x
    b, h, w, _ = static_or_symbolic_shape(x)
    if not isinstance(h, int) or not isinstance(w, int):
        raise ValueError(f"[ops.image.{op}] the image size must be known, got shape "
                         f"{shape_of(x)} (at {user_location()})")
    noise = random.normal((b, h, w), dtype=dtype_of(xf), seed=seed) * float(sigma)
    k = int(6 * sigma) | 1
    field = knp.squeeze(gaussian_blur(knp.expand_dims(noise, -1), (k, k), (sigma, sigma),
                                      "channels_last"), -1)
    return _from_last(_elastic_warp(x, xf, field, field, alpha, interpolation, fill_mode,
                                   fill_value), nd, 4, fmt)


def _elastic_warp(x, xf, dy, dx, alpha, interpolation, fill_mode, fill_value):
    """x (batch, h, w, c) sampled at (row + alpha dy, column + alpha dx)."""
    _, h, w, _ = shape_of(x)
    gy, gx = np.meshgrid(np.arange(h, dtype=dtype_of(xf)), np.arange(w, dtype=dtype_of(xf)),
                         indexing="ij")
    return _warp("elastic_transform", x, xf, gy + dy * alpha, gx + dx * alpha, interpolation,
                 fill_mode, fill_value)


def _keys_cubic(x):
    out = ((1.5 * x - 2.5) * x) * x + 1.0
    out = np.where(x >= 1.0, ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0, out)
    return np.where(x >= 2.0, 0.0, out)


def _lanczos(radius):
    def kernel(x):
        y = radius * np.sin(np.pi * x) * np.sin(np.pi * x / radius)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(x > 1e-3, y / np.where(x != 0, np.pi ** 2 * x ** 2, 1), 1)
        return np.where(x > radius, 0.0, out)
    return kernel


_KERNELS = {"linear": lambda x: np.maximum(0, 1 - np.abs(x)), "cubic": _keys_cubic,
            "lanczos3": _lanczos(3), "lanczos5": _lanczos(5)}
_METHODS = {"linear": "linear", "bilinear": "linear", "trilinear": "linear", "cubic": "cubic",
            "bicubic": "cubic", "tricubic": "cubic", "lanczos3": "lanczos3",
            "lanczos5": "lanczos5"}


def _scale_weights(n_in, n_out, scale, translation, kernel, antialias, dtype):
    """(n_in, n_out) resampling weights, as jax.image.scale_and_translate."""
    scale, translation = np.asarray(scale, dtype), np.asarray(translation, dtype)
    inv = np.asarray(1.0, dtype) / scale
    kscale = np.maximum(inv, np.asarray(1.0, dtype)) if antialias else np.asarray(1.0, dtype)
    sample = (np.arange(n_out, dtype=dtype) + np.asarray(0.5, dtype)) * inv - translation * inv \
        - np.asarray(0.5, dtype)
    w = kernel(np.abs(sample[None, :] - np.arange(n_in, dtype=dtype)[:, None]) / kscale)
    total = w.sum(axis=0, keepdims=True)
    w = np.where(np.abs(total) > 1000.0 * float(np.finfo(np.float32).eps),
                 w / np.where(total != 0, total, 1), 0)
    inside = (sample >= -0.5) & (sample <= n_in - 0.5)
    return np.where(inside[None, :], w, 0).astype(dtype)


def scale_and_translate(images, output_shape, scale, translation, spatial_dims, method,
                        antialias=True):
    """Resampling of the spatial_dims to output_shape with a scale and a
    translation per axis, as jax.image.scale_and_translate: fixed weight
    matrices (scale and translation must be numbers), so differentiable in the
    images and usable inside a model."""
    op = "scale_and_translate"
    _check_choice(op, "method", method, tuple(_METHODS))
    x = floating(images)
    shape = shape_of(x)
    out = tuple(output_shape)
    dims = [int(d) % len(shape) for d in spatial_dims]
    if len(out) != len(shape):
        raise ValueError(f"[ops.image.{op}] output_shape {out} must have the rank of images "
                         f"{shape} (at {user_location()})")
    eager_only(op, scale, translation)
    sc = np.atleast_1d(np.asarray(eager_value(scale)))
    tr = np.atleast_1d(np.asarray(eager_value(translation)))
    if len(sc) != len(dims) or len(tr) != len(dims):
        raise ValueError(f"[ops.image.{op}] scale and translation need one value per spatial "
                         f"dim {tuple(spatial_dims)}, got {sc.tolist()} and {tr.tolist()} (at "
                         f"{user_location()})")
    for i, (a, b) in enumerate(zip(shape, out)):
        if i not in dims and a is not None and a != b:
            raise ValueError(f"[ops.image.{op}] axis {i} is not in spatial_dims, so "
                             f"output_shape must keep its length {a}, got {b} (at "
                             f"{user_location()})")
    wdtype = str(np.result_type(sc.dtype, tr.dtype, np.float32)) \
        if sc.dtype.kind == "f" or tr.dtype.kind == "f" else "float32"
    kernel = _KERNELS[_METHODS[method]]
    for i, d in enumerate(dims):
        if shape[d] is None:
            raise ValueError(f"[ops.image.{op}] spatial axis {d} must be known, got shape "
                             f"{shape} (at {user_location()})")
        w = _scale_weights(shape[d], int(out[d]), sc[i], tr[i], kernel, antialias, wdtype)
        x = knp.moveaxis(knp.matmul(knp.moveaxis(x, d, -1), w.astype(dtype_of(x))), -1, d)
    return x


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("tessera.nn.ops.image", name, __all__)
