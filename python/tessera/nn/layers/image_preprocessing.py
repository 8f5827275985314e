"""Keras's image preprocessing layers: Resizing, CenterCrop and the
random augmentations RandomFlip, RandomRotation, RandomZoom, RandomCrop,
RandomTranslation and RandomContrast (exported by tessera.nn and
tessera.nn.layers; see preprocessing.py for where preprocessing runs).
The geometric ones also take a dict of images with their bounding boxes
and segmentation masks (image_targets.py).

Eagerly they compute with NumPy; they also compile into a model:
compute_output_shape and forward write their expression (random in fit,
the identity in evaluate and predict, as Keras's)."""

from __future__ import annotations

import math

import numpy as np

from .. import bounding_boxes as bb
from ..random import unseeded_layer_seed
from .image_targets import box_format, call_on_dict
from .preprocessing import _Preprocessing

__all__ = ["Resizing", "CenterCrop", "RandomFlip", "RandomRotation", "RandomZoom", "RandomCrop",
           "RandomTranslation", "RandomContrast"]


def _images(x, where, data_format):
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"[{where}] takes images (numbers), got dtype {a.dtype}")
    if a.ndim not in (3, 4):
        raise ValueError(f"[{where}] expects images of rank 3 (h, w, c) or 4 (batch, h, w, c), "
                         f"got shape {a.shape}")
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"[{where}] data_format must be 'channels_last' or 'channels_first', "
                         f"got {data_format!r}")
    single = a.ndim == 3
    if single:
        a = a[None]
    if data_format == "channels_first":
        a = np.moveaxis(a, 1, -1)
    a = a.astype(np.float32)

    def back(out):
        if data_format == "channels_first":
            out = np.moveaxis(out, -1, 1)
        return out[0] if single else out
    return a, back


def _interp_axis(a, axis, n_out, interpolation):
    """Resizes one axis by Keras-on-JAX's rule (half-pixel centres, no
    antialiasing)."""
    n_in = a.shape[axis]
    if n_in == n_out:
        return a
    pos = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
    if interpolation == "nearest":
        idx = np.clip(np.floor(pos + 0.5), 0, n_in - 1).astype(np.int64)
        return np.take(a, idx, axis=axis)
    lo = np.floor(pos)
    frac = (pos - lo).astype(np.float32)
    i0 = np.clip(lo, 0, n_in - 1).astype(np.int64)
    i1 = np.clip(lo + 1, 0, n_in - 1).astype(np.int64)
    shape = [1] * a.ndim
    shape[axis] = n_out
    frac = frac.reshape(shape)
    return np.take(a, i0, axis=axis) * (1 - frac) + np.take(a, i1, axis=axis) * frac


def _resize(a, h, w, interpolation):
    return _interp_axis(_interp_axis(a, 1, h, interpolation), 2, w, interpolation)


def _crop_to_aspect(a, h, w):
    H, W = a.shape[1], a.shape[2]
    ch = max(min(H, int(float(W * h) / w)), 1)
    cw = max(min(W, int(float(H * w) / h)), 1)
    top, left = int(float(H - ch) / 2), int(float(W - cw) / 2)
    return a[:, top:top + ch, left:left + cw]


def _interp_matrix(n_in, n_out, interpolation):
    """The (n_out, n_in) weights _interp_axis applies: a resize along one
    axis as a matrix product, for the compiled path."""
    return _interp_axis(np.eye(n_in, dtype=np.float32), 0, n_out, interpolation)


def _float_list(m) -> str:
    return "[" + ", ".join("[" + ", ".join(repr(float(v)) for v in row) + "]" for row in m) + "]"


class _ImageGraph:
    """The compiled path of an image layer: per-sample shapes (h, w, c) or
    (c, h, w) and expression text."""

    def _hw_axes(self):
        return (2, 3) if self.data_format == "channels_first" else (1, 2)

    def _split_shape(self, s, unknown_size_ok=False):
        """(height, width, channels) of a per-sample shape. unknown_size_ok: the height and
        width may be None (a layer whose output size is its own, on `Input((None, None, c))`:
        the graph is recorded again on each concrete size met, varlen.py)."""
        channel_axis = 0 if self.data_format == "channels_first" else 2
        known = [s[channel_axis]] if unknown_size_ok and len(s) == 3 else s
        if len(s) != 3 or any(d is None for d in known):
            raise ValueError(f"[{self.kind}] in a model expects images of known per-sample shape "
                             f"(height, width, channels), got {tuple(s)}")
        if self.data_format == "channels_first":
            return s[1], s[2], s[0]
        return s[0], s[1], s[2]

    def _node_shape(self, ctx):
        """The per-sample shape of the call being written: the node's (a model on `Input((None,
        None, c))` is written again for each concrete size met), else the first call's."""
        shapes = getattr(ctx, "input_shapes", None)
        return tuple(shapes[0][1:]) if shapes else self._in_shape

    def _join_shape(self, h, w, c):
        return (c, h, w) if self.data_format == "channels_first" else (h, w, c)

    def _resize_expr(self, x, H, W, h, w, interpolation):
        ax = "bchw" if self.data_format == "channels_first" else "bhwc"
        if H != h:
            m = _float_list(_interp_matrix(H, h, interpolation))
            x = f"einsum(\"{ax},Hh->{ax.replace('h', 'H')}\", {x}, asarray({m}, \"float32\"))"
        if W != w:
            m = _float_list(_interp_matrix(W, w, interpolation))
            x = f"einsum(\"{ax},Ww->{ax.replace('w', 'W')}\", {x}, asarray({m}, \"float32\"))"
        return x

    def _crop_expr(self, x, top, left, h, w):
        if self.data_format == "channels_first":
            return f"{x}[:, :, {top}:{top + h}, {left}:{left + w}]"
        return f"{x}[:, {top}:{top + h}, {left}:{left + w}, :]"

    def _aspect_crop(self, x, H, W, h, w):
        ch = max(min(H, int(float(W * h) / w)), 1)
        cw = max(min(W, int(float(H * w) / h)), 1)
        top, left = int(float(H - ch) / 2), int(float(W - cw) / 2)
        return self._crop_expr(x, top, left, ch, cw), ch, cw

    @staticmethod
    def _seed(ctx):
        return f"{ctx.seed} * {ctx.seed_stride} + {ctx.index}"


_INTERPOLATIONS = ("bilinear", "nearest")


def _check_interp(v, where):
    if v not in _INTERPOLATIONS:
        raise ValueError(f"[{where}] interpolation must be one of {list(_INTERPOLATIONS)} in "
                         f"tessera, got {v!r}")
    return v


class Resizing(_ImageGraph, _Preprocessing):
    """Resizes images to (height, width), like keras.layers.Resizing
    (bilinear or nearest, half-pixel centres as Keras on JAX;
    crop_to_aspect_ratio / pad_to_aspect_ratio keep the aspect ratio)."""

    kind = "Resizing"

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0,
                 antialias=False, data_format=None, bounding_box_format=None, name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.bounding_box_format = box_format(bounding_box_format, "Resizing")
        for n, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"[Resizing] {n} must be a positive int, got {v!r}")
        if crop_to_aspect_ratio and pad_to_aspect_ratio:
            raise ValueError("[Resizing] crop_to_aspect_ratio and pad_to_aspect_ratio exclude "
                             "each other")
        if antialias:
            raise ValueError("[Resizing] antialias=True is not supported; leave it False")
        if fill_mode != "constant":
            raise ValueError(f"[Resizing] fill_mode must be 'constant', got {fill_mode!r}")
        self.height, self.width = height, width
        self.interpolation = _check_interp(interpolation, "Resizing")
        self.crop_to_aspect_ratio = bool(crop_to_aspect_ratio)
        self.pad_to_aspect_ratio = bool(pad_to_aspect_ratio)
        self.fill_value = float(fill_value)
        self.data_format = data_format

    in_graph = True

    def _graph_refusal(self):
        if self.pad_to_aspect_ratio:
            return "pad_to_aspect_ratio=True runs on arrays only"
        return None

    def compute_output_shape(self, s):
        H, W, c = self._split_shape(s, unknown_size_ok=True)
        return self._join_shape(self.height, self.width, c)

    def forward(self, x, p, ctx):
        H, W, _ = self._split_shape(self._node_shape(ctx))
        if self.crop_to_aspect_ratio:
            x, H, W = self._aspect_crop(x, H, W, self.height, self.width)
        return self._resize_expr(x, H, W, self.height, self.width, self.interpolation)

    def call(self, inputs):
        if isinstance(inputs, dict):
            return call_on_dict(self, inputs, True, _images)
        a, back = _images(inputs, "Resizing", self.data_format)
        return back(self._targets_images(a, True, None))

    def _targets_draw(self, a, training):
        return True  # not random: always applied

    def _targets_images(self, a, draw, interpolation):
        h, w = self.height, self.width
        if self.crop_to_aspect_ratio:
            a = _crop_to_aspect(a, h, w)
        elif self.pad_to_aspect_ratio:
            H, W = a.shape[1], a.shape[2]
            top = (max(H, int(float(W * h) / w)) - H) // 2
            left = (max(W, int(float(H * w) / h)) - W) // 2
            # as Keras: the same padding on both sides (an odd excess loses its last row)
            padded = np.full((a.shape[0], H + 2 * top, W + 2 * left, a.shape[3]),
                             self.fill_value, np.float32)
            padded[:, top:top + H, left:left + W] = a
            a = padded
        return _resize(a, h, w, interpolation or self.interpolation)

    def _targets_boxes(self, b, draw, H, W):
        """Keras's box rules: stretched; or scaled by the larger ratio and
        shifted by half the cropped excess; or scaled by the smaller and
        shifted by half the padding. Boxes all 0 or all -1 (padding) stay 0."""
        h, w = self.height, self.width
        if self.pad_to_aspect_ratio:
            r = min(h / H, w / W)
            sx = sy = np.float32(r)
            dx, dy = -((w - W * r) // 2), -((h - H * r) // 2)
        elif self.crop_to_aspect_ratio:
            wider = W / H > w / h
            nw, nh = (h * W / H, h) if wider else (w, w / (W / H))
            sx, sy = np.float32(nw / W), np.float32(nh / H)
            dx, dy = (nw - w) // 2, (nh - h) // 2
        else:
            sx, sy, dx, dy = np.float32(w / W), np.float32(h / H), 0.0, 0.0
        out = np.stack([b[..., 0] * sx - dx, b[..., 1] * sy - dy, b[..., 2] * sx - dx,
                        b[..., 3] * sy - dy], -1)
        empty = np.all(b == -1, -1, keepdims=True) | np.all(b == 0, -1, keepdims=True)
        return np.where(empty, 0.0, out), (h, w)


class CenterCrop(_ImageGraph, _Preprocessing):
    """Crops the central (height, width) window, like
    keras.layers.CenterCrop (a smaller image is cropped to the aspect ratio
    and resized)."""

    kind = "CenterCrop"

    def __init__(self, height, width, data_format=None, bounding_box_format=None, name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        for n, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"[CenterCrop] {n} must be a positive int, got {v!r}")
        self.height, self.width, self.data_format = height, width, data_format
        self.bounding_box_format = box_format(bounding_box_format, "CenterCrop")

    in_graph = True

    def compute_output_shape(self, s):
        _, _, c = self._split_shape(s, unknown_size_ok=True)
        return self._join_shape(self.height, self.width, c)

    def forward(self, x, p, ctx):
        H, W, _ = self._split_shape(self._node_shape(ctx))
        h, w = self.height, self.width
        if H >= h and W >= w:
            return self._crop_expr(x, (H - h) // 2, (W - w) // 2, h, w)
        x, ch, cw = self._aspect_crop(x, H, W, h, w)
        return self._resize_expr(x, ch, cw, h, w, "bilinear")

    def call(self, inputs):
        if isinstance(inputs, dict):
            return call_on_dict(self, inputs, True, _images)
        a, back = _images(inputs, "CenterCrop", self.data_format)
        return back(self._targets_images(a, True, None))

    def _targets_draw(self, a, training):
        return True  # not random: always applied

    def _targets_images(self, a, draw, interpolation):
        H, W = a.shape[1], a.shape[2]
        if H >= self.height and W >= self.width:
            t, l = (H - self.height) // 2, (W - self.width) // 2
            return a[:, t:t + self.height, l:l + self.width]
        return _resize(_crop_to_aspect(a, self.height, self.width), self.height, self.width,
                       interpolation or "bilinear")

    def _targets_boxes(self, b, draw, H, W):
        h, w = self.height, self.width
        if H >= h and W >= w:
            top, left, ch, cw = (H - h) // 2, (W - w) // 2, h, w
        else:
            ch = max(min(H, int(float(W * h) / w)), 1)
            cw = max(min(W, int(float(H * w) / h)), 1)
            top, left = int(float(H - ch) / 2), int(float(W - cw) / 2)
        out = bb.crop(b, top, left, ch, cw)
        return out * np.array([w / cw, h / ch, w / cw, h / ch], np.float32), (h, w)


def _factor_range(factor, where, name="factor", lower_bound=-1.0):
    if isinstance(factor, (int, float)) and not isinstance(factor, bool):
        lo, hi = -abs(float(factor)), abs(float(factor))
    elif isinstance(factor, (tuple, list)) and len(factor) == 2:
        lo, hi = float(factor[0]), float(factor[1])
    else:
        raise ValueError(f"[{where}] {name} must be a float or a tuple of 2 floats, got "
                         f"{factor!r}")
    if lo > hi or lo < lower_bound or hi > 1.0 and lower_bound == -1.0:
        raise ValueError(f"[{where}] {name} must lie in [{lower_bound}, 1] with lower <= upper, "
                         f"got {factor!r}")
    return lo, hi


class _RandomImage(_Preprocessing):
    """Random augmentation: transforms with training=True (the default when
    called eagerly, as Keras), the identity with training=False."""

    def __init__(self, seed=None, data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.seed = seed
        self.data_format = data_format
        # an unseeded layer's draws come from the global stream (set_random_seed repeats them)
        self._rng = np.random.default_rng(seed if seed is not None else unseeded_layer_seed())

    def call(self, inputs, training=True):
        if isinstance(inputs, dict):
            if not hasattr(self, "_targets_boxes"):
                raise TypeError(f"[{self.kind}] takes an array of images, got a dict: dicts of "
                                "images with bounding boxes and segmentation masks go to the "
                                "geometric layers (see docs/nn.md \"Bounding boxes and "
                                "masks\")")
            return call_on_dict(self, inputs, training, _images)
        a, back = _images(inputs, self.kind, self.data_format)
        if not training:
            return back(self._inference(a))
        return back(self._augment(a))

    def _inference(self, a):
        return a


def _check_fill(fill_mode, interpolation, where):
    if fill_mode not in ("reflect", "wrap", "constant", "nearest"):
        raise ValueError(f"[{where}] fill_mode must be 'reflect', 'wrap', 'constant' or "
                         f"'nearest', got {fill_mode!r}")
    return _check_interp(interpolation, where)


def _fill_index(i, n, mode):
    """Keras's fill modes for coordinates outside [0, n - 1]."""
    if mode == "nearest":
        return np.clip(i, 0, n - 1), np.ones_like(i, bool)
    if mode == "wrap":
        return np.mod(i, n), np.ones_like(i, bool)
    if mode == "reflect":
        period = 2 * n
        m = np.mod(i, period)
        return np.where(m >= n, period - 1 - m, m), np.ones_like(i, bool)
    if mode == "mirror":  # whole-sample symmetric: d c b | a b c d
        if n == 1:
            return np.zeros_like(i), np.ones_like(i, bool)
        m = np.mod(i, 2 * n - 2)
        return np.where(m >= n, 2 * n - 2 - m, m), np.ones_like(i, bool)
    inside = (i >= 0) & (i < n)
    return np.clip(i, 0, n - 1), inside


def _round_half_away(v):
    """The nearest pixel as map_coordinates picks it (Keras on JAX): halves
    away from zero."""
    return np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5))


def _sample(img, sx, sy, fill_mode, interpolation, fill_value):
    """One (H, W, C) image read at float coordinates sx, sy (each (H, W)),
    bilinear or nearest, outside pixels by fill_mode (map_coordinates's
    rule, as Keras on JAX)."""
    H, W = img.shape[0], img.shape[1]
    if interpolation == "nearest":
        xi, xin = _fill_index(_round_half_away(sx).astype(np.int64), W, fill_mode)
        yi, yin = _fill_index(_round_half_away(sy).astype(np.int64), H, fill_mode)
        return np.where((xin & yin)[..., None], img[yi, xi], fill_value)
    x0, y0 = np.floor(sx), np.floor(sy)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
    acc = 0.0
    for dy, wy in ((0, 1 - fy), (1, fy)):
        yi, yin = _fill_index(y0.astype(np.int64) + dy, H, fill_mode)
        for dx, wx in ((0, 1 - fx), (1, fx)):
            xi, xin = _fill_index(x0.astype(np.int64) + dx, W, fill_mode)
            acc = acc + wy * wx * np.where((xin & yin)[..., None], img[yi, xi], fill_value)
    return acc


def _affine(a, inverse, fill_mode, interpolation, fill_value):
    """Samples each image at inverse(x, y) of its output pixels: inverse is
    (batch, 2, 3), mapping output (x, y, 1) to input (x, y)."""
    b, H, W, C = a.shape
    ys, xs = np.meshgrid(np.arange(H, dtype=np.float64), np.arange(W, dtype=np.float64),
                         indexing="ij")
    out = np.empty_like(a)
    for k in range(b):
        m = inverse[k]
        sx = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]
        sy = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
        out[k] = _sample(a[k], sx, sy, fill_mode, interpolation, fill_value)
    return out.astype(np.float32)


class RandomFlip(_ImageGraph, _RandomImage):
    """Flips each image left-right and/or up-down with probability 1/2, like
    keras.layers.RandomFlip."""

    kind = "RandomFlip"

    def __init__(self, mode="horizontal_and_vertical", seed=None, data_format=None,
                 bounding_box_format=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.bounding_box_format = box_format(bounding_box_format, self.kind)
        if mode not in ("horizontal", "vertical", "horizontal_and_vertical"):
            raise ValueError(f"[RandomFlip] mode must be 'horizontal', 'vertical' or "
                             f"'horizontal_and_vertical', got {mode!r}")
        self.mode = mode

    in_graph = True

    def compute_output_shape(self, s):
        self._split_shape(s)
        return tuple(s)

    def forward(self, x, p, ctx):
        hax, wax = self._hw_axes()
        u = (f"random_uniform(list(shape({x})[0], 2, 1, 1), 0.0, 1.0, {self._seed(ctx)}, "
             f"\"float32\")")
        out = x
        if self.mode in ("horizontal", "horizontal_and_vertical"):
            out = f"where({u}[:, 0:1] < 0.5, flip({out}, {wax}), {out})"
        if self.mode in ("vertical", "horizontal_and_vertical"):
            out = f"where({u}[:, 0:1] < 0.5, flip({out}, {hax}), {out})"
        return f"if({ctx.training}, {out}, {x})"

    def _draw(self, n):
        """Which images flip: as Keras's, one draw per image flips it along
        every axis of the mode (horizontal_and_vertical: both or neither)."""
        return self._rng.random(n) <= 0.5

    def _augment(self, a):
        return self._targets_images(a, self._draw(a.shape[0]), None)

    def _targets_draw(self, a, training):
        return self._draw(a.shape[0]) if training else None

    def _targets_images(self, a, flips, interpolation):
        a = a.copy()
        if self.mode in ("horizontal", "horizontal_and_vertical"):
            a[flips] = a[flips][:, :, ::-1]
        if self.mode in ("vertical", "horizontal_and_vertical"):
            a[flips] = a[flips][:, ::-1]
        return a

    def _targets_boxes(self, b, flips, H, W):
        f = np.asarray(flips).reshape(-1, 1)
        x1, y1, x2, y2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        if self.mode in ("horizontal", "horizontal_and_vertical"):
            x1, x2 = np.where(f, W - x2, x1), np.where(f, W - x1, x2)
        if self.mode in ("vertical", "horizontal_and_vertical"):
            y1, y2 = np.where(f, H - y2, y1), np.where(f, H - y1, y2)
        return np.stack([x1, y1, x2, y2], -1), (H, W)


def _fill_expr(i: str, n: int, mode: str) -> str:
    """_fill_index's index mapping as expression text (i: float coordinates
    already integral)."""
    if mode == "nearest":
        return f"clip({i}, 0.0, {float(n - 1)!r})"
    if mode == "wrap":
        return f"mod({i}, {float(n)!r})"
    if mode == "reflect":
        m = f"mod({i}, {float(2 * n)!r})"
        return f"where({m} >= {float(n)!r}, {float(2 * n - 1)!r} - {m}, {m})"
    if mode == "mirror":
        if n == 1:
            return f"0.0 * {i}"
        m = f"mod({i}, {float(2 * n - 2)!r})"
        return f"where({m} >= {float(n)!r}, {float(2 * n - 2)!r} - {m}, {m})"
    return f"clip({i}, 0.0, {float(n - 1)!r})"


class _RandomAffine(_ImageGraph, _RandomImage):
    """Random affine resampling (rotation, zoom, translation): eager with
    NumPy, and compiled into a model as gathers of the four neighbours of
    each output pixel (channels_last)."""

    in_graph = True

    def __init__(self, fill_mode, interpolation, seed, fill_value, data_format, name,
                 bounding_box_format=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.bounding_box_format = box_format(bounding_box_format, self.kind)
        self.interpolation = _check_fill(fill_mode, interpolation, self.kind)
        self.fill_mode = fill_mode
        self.fill_value = float(fill_value)

    def _graph_refusal(self):
        if self.data_format == "channels_first":
            return "in a model it takes channels_last images only"
        return None

    def compute_output_shape(self, s):
        self._split_shape(s)
        return tuple(s)

    def _graph_params(self, u, H, W) -> list:
        """The six inverse-affine expressions, each (batch, 1), from u, a
        (batch, 2) draw in [0, 1)."""
        raise NotImplementedError

    _graph_draws = 2  # uniforms per image

    def _graph_coords(self, ctx, u, xs, ys, H, W):
        """Where each output pixel (xs, ys: (H * W,)) reads the input: the
        expressions sx, sy, each (batch, H * W)."""
        m = [ctx.define("aug_m", e) for e in self._graph_params(u, H, W)]
        return (ctx.define("aug_sx", f"{m[0]} * {xs} + {m[1]} * {ys} + {m[2]}"),
                ctx.define("aug_sy", f"{m[3]} * {xs} + {m[4]} * {ys} + {m[5]}"))

    def _graph_choose(self, u, out, x):
        """The output from the warped images `out` (all warped by default)."""
        return out

    def forward(self, x, p, ctx):
        H, W, C = self._split_shape(self._in_shape)
        d = ctx.define
        u = d("aug_u", f"random_uniform(list(shape({x})[0], {self._graph_draws}), 0.0, 1.0, "
                       f"{self._seed(ctx)}, \"float32\")")
        k = d("aug_k", f"arange({H * W})")
        ys = d("aug_y", f"astype(floor_divide({k}, {W}), \"float32\")")
        xs = d("aug_x", f"astype(mod({k}, {W}), \"float32\")")
        sx, sy = self._graph_coords(ctx, u, xs, ys, H, W)
        flat = d("aug_f", f"reshape({x}, list(shape({x})[0], {H * W}, {C}))")
        if self.interpolation == "nearest":
            corners = [tuple(f"where({v} >= 0.0, floor({v} + 0.5), ceil({v} - 0.5))"
                             for v in (sy, sx)) + (None,)]
        else:
            y0, x0 = d("aug_y0", f"floor({sy})"), d("aug_x0", f"floor({sx})")
            fy, fx = d("aug_fy", f"{sy} - {y0}"), d("aug_fx", f"{sx} - {x0}")
            corners = [(f"{y0} + {dy}.0", f"{x0} + {dx}.0",
                        f"({fy if dy else '1.0 - ' + fy}) * ({fx if dx else '1.0 - ' + fx})")
                       for dy in (0, 1) for dx in (0, 1)]
        terms = []
        for yi, xi, w in corners:
            yi, xi = d("aug_yi", yi), d("aug_xi", xi)
            idx = (f"astype({_fill_expr(yi, H, self.fill_mode)} * {float(W)!r} + "
                   f"{_fill_expr(xi, W, self.fill_mode)}, \"int64\")")
            v = f"take_along_axis({flat}, expand_dims({idx}, 2), 1)"
            if self.fill_mode == "constant":
                inside = (f"logical_and(logical_and({yi} >= 0.0, {yi} <= {float(H - 1)!r}), "
                          f"logical_and({xi} >= 0.0, {xi} <= {float(W - 1)!r}))")
                v = f"where(expand_dims({inside}, 2), {v}, {self.fill_value!r})"
            terms.append(v if w is None else f"expand_dims({w}, 2) * {v}")
        out = f"reshape({' + '.join(terms)}, list(shape({x})[0], {H}, {W}, {C}))"
        out = self._graph_choose(u, f"astype({out}, \"float32\")", x)
        return f"if({ctx.training}, {out}, {x})"

    def _augment(self, a):
        return self._targets_images(a, self._draw_affine(*a.shape[:3]), None)

    def _inverses(self, n, H, W):
        return self._matrices(self._draw_affine(n, H, W), H, W)

    def _targets_draw(self, a, training):
        return self._draw_affine(*a.shape[:3]) if training else None

    def _targets_images(self, a, draw, interpolation):
        return _affine(a, self._matrices(draw, a.shape[1], a.shape[2]), self.fill_mode,
                       interpolation or self.interpolation, self.fill_value)


class RandomRotation(_RandomAffine):
    """Rotates each image by a random angle in factor * 2π about its centre
    (factor a float f for [-f, f], or a (lower, upper) pair), like
    keras.layers.RandomRotation."""

    kind = "RandomRotation"

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, value_range=(0, 255), data_format=None,
                 bounding_box_format=None, name=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, name,
                         bounding_box_format, **kwargs)
        self.factor = factor
        self.lower, self.upper = _factor_range(factor, "RandomRotation", lower_bound=-math.inf)
        self.value_range = value_range

    def _graph_params(self, u, H, W):
        cx, cy = (W - 1) / 2, (H - 1) / 2
        t = f"({self.lower!r} + {self.upper - self.lower!r} * {u}[:, 0:1]) * {2 * np.pi!r}"
        c, s_ = f"cos({t})", f"sin({t})"
        return [c, f"-{s_}", f"{cx!r} - {c} * {cx!r} + {s_} * {cy!r}",
                s_, c, f"{cy!r} - {s_} * {cx!r} - {c} * {cy!r}"]

    def _draw_affine(self, n, H, W):
        """Each image's angle in degrees (Keras's "angle")."""
        return self._rng.uniform(self.lower, self.upper, n) * 360.0

    def _targets_boxes(self, b, degrees, H, W):
        n = len(degrees)
        zero, one = np.zeros(n), np.ones(n)
        return bb.affine_transform(b, degrees, zero, zero, one, zero, zero, H, W), (H, W)

    def _matrices(self, degrees, H, W):
        ang = np.asarray(degrees, np.float64) * (np.pi / 180.0)
        cx, cy = (W - 1) / 2, (H - 1) / 2
        out = np.zeros((len(ang), 2, 3))
        for k, t in enumerate(ang):
            c, s = np.cos(t), np.sin(t)
            # output pixel -> input pixel: rotate by -t about the centre
            out[k] = [[c, -s, cx - c * cx + s * cy], [s, c, cy - s * cx - c * cy]]
        return out


class RandomZoom(_RandomAffine):
    """Zooms each image by a random factor: height_factor f (or (lo, hi))
    zooms by 1 + u, u in [lo, hi] (negative zooms in), like
    keras.layers.RandomZoom; width_factor None keeps the aspect ratio."""

    kind = "RandomZoom"

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 bounding_box_format=None, name=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, name,
                         bounding_box_format, **kwargs)
        self.height_factor, self.width_factor = height_factor, width_factor
        self.h_range = _factor_range(height_factor, "RandomZoom", "height_factor")
        self.w_range = None if width_factor is None else _factor_range(
            width_factor, "RandomZoom", "width_factor")

    def _graph_params(self, u, H, W):
        cx, cy = (W - 1) / 2, (H - 1) / 2
        (hl, hh) = self.h_range
        zy = f"(1.0 + {hl!r} + {hh - hl!r} * {u}[:, 0:1])"
        if self.w_range is None:
            zx = zy
        else:
            wl, wh = self.w_range
            zx = f"(1.0 + {wl!r} + {wh - wl!r} * {u}[:, 1:2])"
        zero = f"0.0 * {u}[:, 0:1]"
        return [zx, zero, f"{cx!r} - {zx} * {cx!r}", zero, zy, f"{cy!r} - {zy} * {cy!r}"]

    def _draw_affine(self, n, H, W):
        """Each image's (width, height) zoom (Keras's width_zoom, height_zoom)."""
        zy = 1.0 + self._rng.uniform(*self.h_range, n)
        zx = zy if self.w_range is None else 1.0 + self._rng.uniform(*self.w_range, n)
        return np.stack([zx, zy], 1)

    def _targets_boxes(self, b, zooms, H, W):
        # the input window the output shows, [start, start + zoom * size), onto the output
        zx, zy = (np.asarray(zooms[:, k], np.float32).reshape(-1, 1) for k in (0, 1))
        x0, y0 = (W - 1) / 2 * (1 - zx), (H - 1) / 2 * (1 - zy)
        out = [(np.clip(b[..., k], s, s + z * n) - s) / z
               for k, (s, z, n) in enumerate([(x0, zx, W), (y0, zy, H)] * 2)]
        return np.stack(out, -1), (H, W)

    def _matrices(self, zooms, H, W):
        zx, zy = zooms[:, 0], zooms[:, 1]
        n = len(zooms)
        cx, cy = (W - 1) / 2, (H - 1) / 2
        out = np.zeros((n, 2, 3))
        out[:, 0, 0], out[:, 0, 2] = zx, cx - zx * cx
        out[:, 1, 1], out[:, 1, 2] = zy, cy - zy * cy
        return out


class RandomTranslation(_RandomAffine):
    """Shifts each image by a random fraction of its height and width, like
    keras.layers.RandomTranslation."""

    kind = "RandomTranslation"

    def __init__(self, height_factor, width_factor, fill_mode="reflect",
                 interpolation="bilinear", seed=None, fill_value=0.0, data_format=None,
                 bounding_box_format=None, name=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, name,
                         bounding_box_format, **kwargs)
        self.height_factor, self.width_factor = height_factor, width_factor
        self.h_range = _factor_range(height_factor, "RandomTranslation", "height_factor")
        self.w_range = _factor_range(width_factor, "RandomTranslation", "width_factor")

    def _graph_params(self, u, H, W):
        (hl, hh), (wl, wh) = self.h_range, self.w_range
        dy = f"(({hl!r} + {hh - hl!r} * {u}[:, 0:1]) * {float(H)!r})"
        dx = f"(({wl!r} + {wh - wl!r} * {u}[:, 1:2]) * {float(W)!r})"
        zero, one = f"0.0 * {u}[:, 0:1]", f"1.0 + 0.0 * {u}[:, 0:1]"
        return [one, zero, f"-{dx}", zero, one, f"-{dy}"]

    def _draw_affine(self, n, H, W):
        """Each image's shift in pixels (x, y) (Keras's "translations")."""
        dy = self._rng.uniform(*self.h_range, n) * H
        dx = self._rng.uniform(*self.w_range, n) * W
        return np.stack([dx, dy], 1).astype(np.float32)

    def _targets_boxes(self, b, shifts, H, W):
        d = np.tile(np.asarray(shifts, np.float32), 2)[:, None]
        return b + d, (H, W)

    def _matrices(self, shifts, H, W):
        dx, dy = shifts[:, 0].astype(np.float64), shifts[:, 1].astype(np.float64)
        out = np.zeros((len(shifts), 2, 3))
        out[:, 0, 0] = out[:, 1, 1] = 1.0
        out[:, 0, 2], out[:, 1, 2] = -dx, -dy
        return out


class RandomCrop(_ImageGraph, _RandomImage):
    """Crops a random (height, width) window (the same offset for the
    batch), like keras.layers.RandomCrop; an image not larger than the
    window is cropped to its aspect ratio and resized; identity at
    inference, as Keras 3's (so in a model, evaluate and predict see the
    uncropped images, as Keras's do: follow it with layers that take any
    height and width)."""

    kind = "RandomCrop"
    in_graph = True

    def compute_output_shape(self, s):
        _, _, c = self._split_shape(s, unknown_size_ok=True)
        return self._join_shape(self.height, self.width, c)

    def forward(self, x, p, ctx):
        H, W, _ = self._split_shape(self._node_shape(ctx))
        h, w = self.height, self.width
        if H > h and W > w:
            hax, wax = self._hw_axes()
            u = ctx.define("crop_u", f"random_uniform(list(2), 0.0, 1.0, {self._seed(ctx)}, "
                                     "\"float32\")")
            top = f"minimum(astype(floor({u}[0] * {float(H - h + 1)!r}), \"int64\"), {H - h})"
            left = f"minimum(astype(floor({u}[1] * {float(W - w + 1)!r}), \"int64\"), {W - w})"
            out = f"take(take({x}, {top} + arange({h}), axis={hax}), {left} + arange({w}), " \
                  f"axis={wax})"
        else:
            top, left = self._small_window(H, W)
            eh, ew = min(h, H - top), min(w, W - left)
            out = self._resize_expr(self._crop_expr(x, top, left, eh, ew), eh, ew, h, w,
                                    "bilinear")
        if ctx.training == "true":
            return out
        return x if ctx.training == "false" else f"if({ctx.training}, {out}, {x})"

    def __init__(self, height, width, seed=None, data_format=None, bounding_box_format=None,
                 name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        for n, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"[RandomCrop] {n} must be a positive int, got {v!r}")
        self.height, self.width = height, width
        self.bounding_box_format = box_format(bounding_box_format, self.kind)

    def _small_window(self, H, W):
        """Keras's start of the window in an image not larger than it: where
        the aspect-ratio crop would start (the window then runs to the
        image's edge and is resized)."""
        ch = max(min(H, int(float(W * self.height) / self.width)), 1)
        cw = max(min(W, int(float(H * self.width) / self.height)), 1)
        return int(float(H - ch) / 2), int(float(W - cw) / 2)

    def _draw(self, H, W):
        """The window's (top, left) (Keras's (h_start, w_start))."""
        h, w = self.height, self.width
        if H > h and W > w:
            return int(self._rng.integers(0, H - h + 1)), int(self._rng.integers(0, W - w + 1))
        return self._small_window(H, W)

    def _augment(self, a):
        return self._targets_images(a, self._draw(a.shape[1], a.shape[2]), None)

    def _targets_draw(self, a, training):
        return self._draw(a.shape[1], a.shape[2]) if training else None

    def _targets_images(self, a, corner, interpolation):
        h, w = self.height, self.width
        t, l = corner
        win = a[:, t:t + h, l:l + w]
        return win if win.shape[1:3] == (h, w) else _resize(win, h, w,
                                                             interpolation or "bilinear")

    def _targets_boxes(self, b, corner, H, W):
        t, l = corner
        eh, ew = min(self.height, H - t), min(self.width, W - l)
        out = bb.crop(b, t, l, eh, ew)
        scale = np.array([self.width / ew, self.height / eh] * 2, np.float32)
        return out * scale, (self.height, self.width)


class RandomContrast(_ImageGraph, _RandomImage):
    """Scales each image's deviation from its per-channel mean by a random
    factor in [1 - lower, 1 + upper], clipped to value_range, like
    keras.layers.RandomContrast."""

    kind = "RandomContrast"

    def __init__(self, factor, value_range=(0, 255), seed=None, data_format=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        if isinstance(factor, (int, float)) and not isinstance(factor, bool):
            lo = hi = float(factor)
        elif isinstance(factor, (tuple, list)) and len(factor) == 2:
            lo, hi = float(factor[0]), float(factor[1])
        else:
            raise ValueError(f"[RandomContrast] factor must be a float or a tuple of 2 floats, "
                             f"got {factor!r}")
        if not (0 <= lo <= 1 and 0 <= hi):
            raise ValueError(f"[RandomContrast] factor must be >= 0 (lower <= 1), got {factor!r}")
        self.factor = (lo, hi)
        self.value_range = tuple(value_range)

    in_graph = True

    def compute_output_shape(self, s):
        self._split_shape(s)
        return tuple(s)

    def forward(self, x, p, ctx):
        hax, wax = self._hw_axes()
        lo, hi = 1.0 - self.factor[0], 1.0 + self.factor[1]
        f = (f"random_uniform(list(shape({x})[0], 1, 1, 1), {lo!r}, {hi!r}, {self._seed(ctx)}, "
             f"\"float32\")")
        mean = f"mean({x}, list({hax}, {wax}), keepdims=true)"
        v0, v1 = (float(v) for v in self.value_range)
        out = f"clip(({x} - {mean}) * {f} + {mean}, {v0!r}, {v1!r})"
        return f"if({ctx.training}, {out}, {x})"

    def _augment(self, a):
        f = self._rng.uniform(1.0 - self.factor[0], 1.0 + self.factor[1],
                              (a.shape[0], 1, 1, 1)).astype(np.float32)
        mean = a.mean(axis=(1, 2), keepdims=True)
        return np.clip((a - mean) * f + mean, self.value_range[0], self.value_range[1])
