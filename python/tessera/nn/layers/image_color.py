"""Keras's colour augmentations: RandomBrightness, RandomColorDegeneration,
RandomGrayscale, RandomHue, RandomSaturation, RandomInvert,
RandomPosterization, RandomSharpness, RandomColorJitter, and the fixed
Solarization, AutoContrast, Equalization and
ContrastLimitedAdaptiveHistogramEqualization (CLAHE).

Each layer draws its random parameters (`_draw`, from NumPy's generator
seeded by `seed`) and applies them (`_apply`), so a test can give a draw
to tessera and to Keras and compare. Eagerly they compute with NumPy on
arrays (channels_last inside; data_format moves the axes); all but CLAHE
also compile into a model (random in fit, the identity in evaluate and
predict, as Keras's; AutoContrast in both)."""

from __future__ import annotations

import numpy as np

from ..symbolic import user_location
from .image_preprocessing import RandomContrast, _ImageGraph, _images, _RandomImage

__all__ = ["RandomBrightness", "RandomColorDegeneration", "RandomGrayscale", "RandomHue",
           "RandomSaturation", "RandomInvert", "RandomPosterization", "RandomSharpness",
           "RandomColorJitter", "Solarization", "AutoContrast", "Equalization",
           "ContrastLimitedAdaptiveHistogramEqualization"]

def _located(kind, message):
    """The error to raise: message, then where the user's code is."""
    return kind(f"{message} (at {user_location()})")


_GRAY = np.array([0.2989, 0.587, 0.114], np.float32)  # Keras's rgb_to_grayscale weights


def _value_range(v, where):
    if not isinstance(v, (tuple, list)) or len(v) != 2 or not all(
            isinstance(e, (int, float)) and not isinstance(e, bool) for e in v):
        raise _located(ValueError,
                       f"[{where}] value_range must be a list of two numbers, got {v!r}")
    if v[0] == v[1]:
        raise _located(ValueError, f"[{where}] value_range must have two different ends, got {v!r}")
    return sorted(float(e) for e in v)


def _unit_range(factor, where, name="factor", bounds=(0.0, 1.0), symmetric=False):
    """Keras's factor: a number f for [max(-f, low), f] (or [-f, f] with
    symmetric), or a pair (sorted), inside bounds."""
    lo_b, hi_b = bounds
    if isinstance(factor, (int, float)) and not isinstance(factor, bool):
        f = float(factor)
        if not lo_b <= f <= hi_b:
            raise _located(ValueError,
                           f"[{where}] {name} must lie in [{lo_b}, {hi_b}], got {factor!r}")
        f = abs(f)
        return (-f if symmetric else max(-f, lo_b)), f
    if isinstance(factor, (tuple, list)) and len(factor) == 2 and all(
            isinstance(e, (int, float)) and not isinstance(e, bool) for e in factor):
        lo, hi = sorted(float(e) for e in factor)
        if lo < lo_b or hi > hi_b:
            raise _located(ValueError,
                           f"[{where}] {name} must lie in [{lo_b}, {hi_b}], got {factor!r}")
        return lo, hi
    raise _located(ValueError,
                   f"[{where}] {name} must be a number or a list of two numbers in "
                   f"[{lo_b}, {hi_b}], got {factor!r}")


def _to_range(a, src, dst):
    """Keras's _transform_value_range: maps src linearly onto dst."""
    if src[0] == dst[0] and src[1] == dst[1]:
        return a
    return ((a - src[0]) / (src[1] - src[0]) * (dst[1] - dst[0]) + dst[0]).astype(np.float32)


def _grayscale(a):
    """(b, h, w, 1) luminance by Keras's weights; 1-channel images unchanged."""
    if a.shape[-1] == 1:
        return a
    if a.shape[-1] != 3:
        raise _located(ValueError,
                       f"[rgb_to_grayscale] expects 1 or 3 channels, got shape {a.shape}")
    return np.tensordot(a, _GRAY, axes=(3, 0))[..., None].astype(np.float32)


def _rgb(a, where):
    if a.shape[-1] != 3:
        raise _located(ValueError,
                       f"[{where}] expects RGB images (3 channels), got shape {a.shape}")
    return a


def rgb_to_hsv(a):
    """Keras-on-JAX's rgb_to_hsv of channels_last float images."""
    eps = np.finfo(np.float32).eps
    a = np.where(np.abs(a) < eps, 0.0, a).astype(np.float32)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    v = np.maximum(np.maximum(r, g), b)
    rng = v - np.minimum(np.minimum(r, g), b)
    s = np.where(v > 0, rng / np.where(v > 0, v, 1.0), 0.0)
    norm = 1.0 / (6.0 * np.where(rng > 0, rng, 1.0))
    h = np.where(v == g, norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0)
    h = np.where(v == r, norm * (g - b), h)
    h = np.where(rng > 0, h, 0.0) + (h < 0.0)
    return np.stack([h, s, v], -1).astype(np.float32)


def hsv_to_rgb(a):
    """Keras-on-JAX's hsv_to_rgb of channels_last float images."""
    h, s, v = a[..., 0], a[..., 1], a[..., 2]
    dh = np.mod(h, 1.0) * 6.0
    dr = np.clip(np.abs(dh - 3.0) - 1.0, 0.0, 1.0)
    dg = np.clip(2.0 - np.abs(dh - 2.0), 0.0, 1.0)
    db = np.clip(2.0 - np.abs(dh - 4.0), 0.0, 1.0)
    return np.stack([v * (1 - s + s * d) for d in (dr, dg, db)], -1).astype(np.float32)


class _Random(_RandomImage):
    """A random colour layer: _draw(n) gives the per-image parameters,
    _apply(a, draw) the transform of channels_last float32 images."""

    def _augment(self, a):
        return self._apply(a, self._draw(a.shape[0]))

    def _u(self, lo, hi, n):
        return self._rng.uniform(lo, hi, n).astype(np.float32)


class _PixelGraph(_ImageGraph):
    """The compiled path of a per-image colour layer: `_expr(x, u, ch, hw)`
    writes the training output from u, a (batch, k, 1, 1) uniform draw in
    [0, 1); the identity when not training (`_fixed` layers: always)."""

    in_graph = True
    _draws = 1
    _fixed = False

    def compute_output_shape(self, s):
        self._split_shape(s)
        return tuple(s)

    def forward(self, x, p, ctx):
        cf = self.data_format == "channels_first"
        ch, hw = (1, "list(2, 3)") if cf else (3, "list(1, 2)")
        u = None
        if self._draws:
            u = ctx.define("aug_u", f"random_uniform(list(shape({x})[0], {self._draws}, 1, 1), "
                                    f"0.0, 1.0, {self._seed(ctx)}, \"float32\")")
        self._graph_ctx = ctx  # for _define while _expr writes
        out = self._expr(x, u, ch, hw)
        return out if self._fixed else f"if({ctx.training}, {out}, {x})"

    def _define(self, tag, expr):
        return self._graph_ctx.define(tag, expr)

    @staticmethod
    def _channel(x, ch, k):
        """Channel k of 4-d images, kept as an axis of 1."""
        return f"{x}[:, {k}:{k + 1}, :, :]" if ch == 1 else f"{x}[:, :, :, {k}:{k + 1}]"

    def _rgb_graph(self):
        if self._split_shape(self._in_shape)[2] != 3:
            raise _located(ValueError, f"[{self.kind}] expects RGB images (3 channels), got "
                                       f"per-sample shape {tuple(self._in_shape)}")

    def _hsv_expr(self, x, ch):
        """rgb_to_hsv's expressions (h, s, v), each with a channel axis of 1."""
        eps = float(np.finfo(np.float32).eps)
        a = self._define("rgb", f"where(abs({x}) < {eps!r}, 0.0, {x})")
        r, g, b = (self._channel(a, ch, k) for k in range(3))
        v = self._define("hsv_v", f"maximum(maximum({r}, {g}), {b})")
        rng = self._define("hsv_range", f"{v} - minimum(minimum({r}, {g}), {b})")
        sat = f"where({v} > 0.0, {rng} / where({v} > 0.0, {v}, 1.0), 0.0)"
        norm = self._define("hsv_norm", f"1.0 / (6.0 * where({rng} > 0.0, {rng}, 1.0))")
        h = f"where(equal({v}, {g}), {norm} * ({b} - {r}) + {2.0 / 6.0!r}, " \
            f"{norm} * ({r} - {g}) + {4.0 / 6.0!r})"
        h = self._define("hsv_h", f"where(equal({v}, {r}), {norm} * ({g} - {b}), {h})")
        h = f"where({rng} > 0.0, {h}, 0.0) + astype({h} < 0.0, \"float32\")"
        return h, sat, v

    def _rgb_expr(self, h, s, v, ch):
        """hsv_to_rgb of channel expressions h, s, v."""
        dh = self._define("hsv_dh", f"mod({h}, 1.0) * 6.0")
        s = self._define("hsv_s", s)
        d = (f"clip(abs({dh} - 3.0) - 1.0, 0.0, 1.0)", f"clip(2.0 - abs({dh} - 2.0), 0.0, 1.0)",
             f"clip(2.0 - abs({dh} - 4.0), 0.0, 1.0)")
        parts = ", ".join(f"{v} * (1.0 - {s} + {s} * {dk})" for dk in d)
        return f"concatenate(list({parts}), axis={ch})"

    def _range_expr(self, x, src, dst):
        """_to_range as an expression."""
        if tuple(src) == tuple(dst):
            return x
        return f"(({x} - {float(src[0])!r}) / {float(src[1] - src[0])!r} * " \
               f"{float(dst[1] - dst[0])!r} + {float(dst[0])!r})"

    def _gray_expr(self, x, ch):
        c = self._split_shape(self._in_shape)[2]
        if c == 1:
            return x
        sub = "bchw" if ch == 1 else "bhwc"
        w = ", ".join(repr(float(v)) for v in _GRAY)
        return f"expand_dims(einsum(\"{sub},c->{sub.replace('c', '')}\", {x}, " \
               f"asarray([{w}], \"float32\")), {ch})"

    @staticmethod
    def _between(u, k, lo, hi):
        return f"({lo!r} + {hi - lo!r} * {u}[:, {k}:{k + 1}])"


class RandomBrightness(_PixelGraph, _Random):
    """Adds a random delta, factor * (value_range width), to each image and
    clips to value_range, like keras.layers.RandomBrightness (factor f means
    [-f, f]; a pair (lower, upper) in [-1, 1])."""

    kind = "RandomBrightness"

    def __init__(self, factor, value_range=(0, 255), seed=None, data_format=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind, bounds=(-1.0, 1.0))
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        return self._u(*self.factor, n) * (self.value_range[1] - self.value_range[0])

    def _apply(self, a, delta):
        return np.clip(a + delta.reshape(-1, 1, 1, 1), *self.value_range)

    def _expr(self, x, u, ch, hw):
        lo, hi = self.factor
        width = self.value_range[1] - self.value_range[0]
        v0, v1 = self.value_range
        return f"clip({x} + {self._between(u, 0, lo, hi)} * {width!r}, {v0!r}, {v1!r})"


class RandomColorDegeneration(_PixelGraph, _Random):
    """Blends each image towards its grayscale by a random factor, clipped
    to value_range, like keras.layers.RandomColorDegeneration."""

    kind = "RandomColorDegeneration"

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind, bounds=(-1.0, 1.0))
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        return self._u(*self.factor, n)

    def _apply(self, a, f):
        out = a + f.reshape(-1, 1, 1, 1) * (_grayscale(a) - a)
        return np.clip(out, *self.value_range).astype(np.float32)

    def _expr(self, x, u, ch, hw):
        f = self._between(u, 0, *self.factor)
        v0, v1 = self.value_range
        return f"clip({x} + {f} * ({self._gray_expr(x, ch)} - {x}), {v0!r}, {v1!r})"


class RandomGrayscale(_PixelGraph, _Random):
    """Turns each image to grayscale (kept at its channel count) with
    probability factor, like keras.layers.RandomGrayscale."""

    kind = "RandomGrayscale"

    def __init__(self, factor=0.5, data_format=None, seed=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or \
                not 0 <= factor <= 1:
            raise _located(ValueError,
                           f"[RandomGrayscale] factor must be a number in [0, 1], got "
                           f"{factor!r}")
        self.factor = float(factor)

    def _draw(self, n):
        return self._rng.random(n) < self.factor

    def _apply(self, a, apply):
        return np.where(apply.reshape(-1, 1, 1, 1), _grayscale(a), a).astype(np.float32)

    def _expr(self, x, u, ch, hw):
        return f"where({u}[:, 0:1] < {self.factor!r}, {self._gray_expr(x, ch)} + 0.0 * {x}, {x})"


class RandomInvert(_PixelGraph, _Random):
    """Replaces an image x by value_range[1] - x with a probability drawn
    from factor, like keras.layers.RandomInvert (a number f draws it from
    [0, f]; (1, 1): always)."""

    kind = "RandomInvert"
    _draws = 2

    def __init__(self, factor=1.0, value_range=(0, 255), seed=None, data_format=None,
                 name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind)
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        return self._u(0.0, 1.0, n) < self._u(*self.factor, n)

    def _apply(self, a, apply):
        return np.where(apply.reshape(-1, 1, 1, 1), self.value_range[1] - a, a)

    def _expr(self, x, u, ch, hw):
        p = self._between(u, 1, *self.factor)
        return f"where({u}[:, 0:1] < {p}, {self.value_range[1]!r} - {x}, {x})"


class RandomPosterization(_PixelGraph, _Random):
    """Keeps a random number of high bits (factor: an int or pair in
    [1, 8]) of each 8-bit channel value, like keras.layers.RandomPosterization."""

    kind = "RandomPosterization"

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        lo, hi = _unit_range(factor, self.kind, bounds=(1, 8))
        if lo != int(lo) or hi != int(hi):
            raise _located(ValueError,
                           f"[RandomPosterization] factor must be whole bit counts in [1, 8], "
                           f"got {factor!r}")
        self.factor = (int(lo), int(hi))
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        lo, hi = self.factor
        bits = self._rng.integers(lo, hi, n) if lo != hi else np.full(n, lo)
        return 8 - bits  # Keras's randint excludes the upper end

    def _apply(self, a, shift):
        v = np.clip(_to_range(a, self.value_range, (0, 255)), 0, 255).astype(np.uint8)
        s = shift.astype(np.uint8).reshape(-1, 1, 1, 1)
        return _to_range(((v >> s) << s).astype(np.float32), (0, 255), self.value_range)

    def _expr(self, x, u, ch, hw):
        lo, hi = self.factor
        bits = f"{lo}.0" if lo == hi else f"floor({self._between(u, 0, float(lo), float(hi))})"
        step = f"power(2.0, 8.0 - {bits})"
        v0, v1 = self.value_range
        v = x if (v0, v1) == (0.0, 255.0) else f"(({x} - {v0!r}) * {255.0 / (v1 - v0)!r})"
        q = f"floor(floor(clip({v}, 0.0, 255.0)) / {step}) * {step}"
        return q if (v0, v1) == (0.0, 255.0) else f"({q} * {(v1 - v0) / 255.0!r} + {v0!r})"


class RandomSharpness(_PixelGraph, _Random):
    """Sharpens (factor > 0.5) or smooths each image by a random factor
    against Keras's 3x3 smoothing kernel, like keras.layers.RandomSharpness."""

    kind = "RandomSharpness"

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind)
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        return self._u(*self.factor, n)

    def _apply(self, a, f):
        s = (2 * f).reshape(-1, 1, 1, 1)
        pad = np.pad(a, ((0, 0), (1, 1), (1, 1), (0, 0)))
        H, W = a.shape[1], a.shape[2]
        smooth = sum(pad[:, i:i + H, j:j + W] for i in range(3) for j in range(3)) / 13.0
        smooth = smooth + a * (4.0 / 13.0)  # the centre weighs 5/13
        out = a + (1.0 - s) * (smooth - a)
        return np.clip(out, *self.value_range).astype(np.float32)

    def _expr(self, x, u, ch, hw):
        H, W, _ = self._split_shape(self._in_shape)
        hax = 2 if ch == 1 else 1
        widths = [[0, 0]] * 4
        widths[hax] = widths[hax + 1] = [1, 1]
        widths = ", ".join(f"list({a}, {b})" for a, b in widths)
        pad = self._define("sharp_pad", f"pad({x}, list({widths}))")
        win = (f"{pad}[:, :, {i}:{i + H}, {j}:{j + W}]" if ch == 1 else
               f"{pad}[:, {i}:{i + H}, {j}:{j + W}, :]" for i in range(3) for j in range(3))
        smooth = f"({' + '.join(win)}) / 13.0 + {x} * {4.0 / 13.0!r}"
        f = self._between(u, 0, *self.factor)
        v0, v1 = self.value_range
        return f"clip({x} + (1.0 - 2.0 * {f}) * ({smooth} - {x}), {v0!r}, {v1!r})"


class RandomHue(_PixelGraph, _Random):
    """Rotates each image's hue by a random amount (factor in [0, 1]; 1 is
    half the circle either way), like keras.layers.RandomHue."""

    kind = "RandomHue"

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind)
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        sign = np.where(self._rng.random(n) > 0.5, -1.0, 1.0)
        return (sign * self._u(*self.factor, n) * 0.5).astype(np.float32)

    def _apply(self, a, delta):
        hsv = rgb_to_hsv(_to_range(_rgb(a, self.kind), self.value_range, (0, 1)))
        h = hsv[..., 0] + delta.reshape(-1, 1, 1)
        h = np.where(h > 1.0, h - 1.0, h)
        hsv[..., 0] = np.where(h < 0.0, h + 1.0, h)
        return _to_range(np.clip(hsv_to_rgb(hsv), 0, 1), (0, 1), self.value_range)

    _draws = 2

    def _expr(self, x, u, ch, hw):
        self._rgb_graph()
        sign = f"where({u}[:, 0:1] > 0.5, -1.0, 1.0)"
        delta = f"{sign} * {self._between(u, 1, *self.factor)} * 0.5"
        h, sat, v = self._hsv_expr(self._range_expr(x, self.value_range, (0, 1)), ch)
        h = self._define("hue", f"{h} + {delta}")
        h = self._define("hue", f"where({h} > 1.0, {h} - 1.0, {h})")
        h = f"where({h} < 0.0, {h} + 1.0, {h})"
        rgb = f"clip({self._rgb_expr(h, sat, v, ch)}, 0.0, 1.0)"
        return self._range_expr(rgb, (0, 1), self.value_range)


class RandomSaturation(_PixelGraph, _Random):
    """Scales each image's saturation by a random factor (0: grayscale,
    0.5: unchanged, 1: full), like keras.layers.RandomSaturation."""

    kind = "RandomSaturation"

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind)
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        f = self._u(*self.factor, n)
        return (f / (1 - f + 1e-7)).astype(np.float32)  # Keras's epsilon

    def _apply(self, a, f):
        hsv = rgb_to_hsv(_rgb(a, self.kind))
        # As Keras's: the saturation (in [0, 1]) is clipped to value_range.
        hsv[..., 1] = np.clip(hsv[..., 1] * f.reshape(-1, 1, 1), *self.value_range)
        return hsv_to_rgb(hsv)

    def _expr(self, x, u, ch, hw):
        self._rgb_graph()
        f = self._between(u, 0, *self.factor)
        f = f"({f} / (1.0 - {f} + 1e-07))"
        h, sat, v = self._hsv_expr(x, ch)
        v0, v1 = self.value_range
        return self._rgb_expr(h, f"clip({sat} * {f}, {v0!r}, {v1!r})", v, ch)


class RandomColorJitter(_PixelGraph, _Random):
    """RandomBrightness, RandomContrast, RandomSaturation and RandomHue in
    that order, each with its factor when given, like
    keras.layers.RandomColorJitter."""

    kind = "RandomColorJitter"

    def __init__(self, value_range=(0, 255), brightness_factor=None, contrast_factor=None,
                 saturation_factor=None, hue_factor=None, seed=None, data_format=None,
                 name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.value_range = _value_range(value_range, self.kind)
        self.brightness_factor, self.contrast_factor = brightness_factor, contrast_factor
        self.saturation_factor, self.hue_factor = saturation_factor, hue_factor
        vr = self.value_range
        rng = np.random.default_rng(seed)
        seeds = rng.integers(0, 2 ** 31, 4).tolist() if seed is not None else [None] * 4
        self._parts = [cls(f, value_range=vr, seed=s) for cls, f, s in (
            (RandomBrightness, brightness_factor, seeds[0]),
            (RandomContrast, contrast_factor, seeds[1]),
            (RandomSaturation, saturation_factor, seeds[2]),
            (RandomHue, hue_factor, seeds[3])) if f is not None]

    def _augment(self, a):
        for part in self._parts:
            a = part._augment(a)
        return a.astype(np.float32)

    @property
    def _draws(self):
        return sum(1 if isinstance(p, RandomContrast) else p._draws for p in self._parts) or 1

    def _expr(self, x, u, ch, hw):
        k = 0
        for part in self._parts:
            n = 1 if isinstance(part, RandomContrast) else part._draws
            draw = self._define("jitter_u", f"{u}[:, {k}:{k + n}]")
            k += n
            if isinstance(part, RandomContrast):
                lo, hi = 1.0 - part.factor[0], 1.0 + part.factor[1]
                mean = self._define("jitter_mean", f"mean({x}, {hw}, keepdims=true)")
                v0, v1 = (float(v) for v in part.value_range)
                x = f"clip(({x} - {mean}) * {self._between(draw, 0, lo, hi)} + {mean}, " \
                    f"{v0!r}, {v1!r})"
            else:
                part._in_shape, part.data_format = self._in_shape, self.data_format
                part._graph_ctx = self._graph_ctx
                x = part._expr(x, draw, ch, hw)
            x = self._define("jitter", x)
        return x


class Solarization(_PixelGraph, _Random):
    """Adds a random amount to each image, clips to [0, 255] (in
    value_range's scale) and inverts the values at or above a random
    threshold, like keras.layers.Solarization (the defaults invert all)."""

    kind = "Solarization"
    _draws = 2

    def __init__(self, addition_factor=0.0, threshold_factor=0.0, value_range=(0, 255),
                 seed=None, data_format=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.addition_factor = _unit_range(addition_factor, self.kind, "addition_factor")
        self.threshold_factor = _unit_range(threshold_factor, self.kind, "threshold_factor")
        self.value_range = _value_range(value_range, self.kind)

    def _draw(self, n):
        # Keras's draws: uniform(lower, upper * 255), the lower end unscaled.
        add = self._u(self.addition_factor[0], self.addition_factor[1] * 255, n)
        thr = self._u(self.threshold_factor[0], self.threshold_factor[1] * 255, n)
        return add, thr

    def _apply(self, a, draw):
        add, thr = (d.reshape(-1, 1, 1, 1) for d in draw)
        r = np.clip(_to_range(a, self.value_range, (0, 255)) + add, 0, 255)
        r = np.where(r < thr, r, 255 - r)
        return _to_range(r.astype(np.float32), (0, 255), self.value_range)

    def _expr(self, x, u, ch, hw):
        a0, a1 = self.addition_factor
        t0, t1 = self.threshold_factor
        v0, v1 = self.value_range
        scaled = x if (v0, v1) == (0.0, 255.0) else f"(({x} - {v0!r}) * {255.0 / (v1 - v0)!r})"
        r = f"clip({scaled} + {self._between(u, 0, a0, a1 * 255)}, 0.0, 255.0)"
        out = f"where({r} < {self._between(u, 1, t0, t1 * 255)}, {r}, 255.0 - {r})"
        return out if (v0, v1) == (0.0, 255.0) else f"({out} * {(v1 - v0) / 255.0!r} + {v0!r})"


class AutoContrast(_PixelGraph, _Random):
    """Stretches each image channel to the whole value_range (min to the
    low end, max to the high end), like keras.layers.AutoContrast; applied
    in training and inference alike, as Keras's."""

    kind = "AutoContrast"
    _draws = 0
    _fixed = True

    def __init__(self, value_range=(0, 255), data_format=None, name=None, **kwargs):
        super().__init__(None, data_format, name, **kwargs)
        self.value_range = _value_range(value_range, self.kind)

    def call(self, inputs, training=True):
        a, back = _images(inputs, self.kind, self.data_format)
        return back(self._augment(a))

    def _augment(self, a):
        img = _to_range(a, self.value_range, (0, 255))
        low = img.min(axis=(1, 2), keepdims=True)
        high = img.max(axis=(1, 2), keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = 255.0 / (high - low)
            out = np.clip(img * scale - low * scale, 0, 255)
        out = _to_range(out.astype(np.float32), (0, 255), self.value_range)
        return np.where(np.isnan(out), a, out).astype(np.float32)

    def _expr(self, x, u, ch, hw):
        v0, v1 = self.value_range
        img = x if (v0, v1) == (0.0, 255.0) else f"(({x} - {v0!r}) * {255.0 / (v1 - v0)!r})"
        low, high = f"min({img}, {hw}, keepdims=true)", f"max({img}, {hw}, keepdims=true)"
        flat = f"{high} - {low} <= 0.0"
        # A flat channel (max == min) stays as it is, where Keras's 0/0 gives its input.
        scale = f"where({flat}, 1.0, 255.0 / where({flat}, 1.0, {high} - {low}))"
        out = f"clip(({img} - {low}) * {scale}, 0.0, 255.0)"
        if (v0, v1) != (0.0, 255.0):
            out = f"({out} * {(v1 - v0) / 255.0!r} + {v0!r})"
        return f"where({flat}, {x}, {out})"


class Equalization(_PixelGraph, _Random):
    """Histogram equalization of each channel (over the batch, with `bins`
    bins), like keras.layers.Equalization; the identity with
    training=False, as Keras's."""

    kind = "Equalization"

    def __init__(self, value_range=(0, 255), bins=256, data_format=None, name=None, **kwargs):
        super().__init__(None, data_format, name, **kwargs)
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
            raise _located(ValueError, f"[Equalization] bins must be an int >= 2, got {bins!r}")
        self.bins = bins
        self.value_range = _value_range(value_range, self.kind)

    def _augment(self, a):
        out = np.empty_like(a)
        for c in range(a.shape[-1]):
            out[..., c] = self._channel(_to_range(a[..., c], self.value_range, (0, 255)))
        return _to_range(out, (0, 255), self.value_range)

    def _channel(self, ch):
        nb = self.bins
        idx = np.clip((ch * (nb - 1) / 255.0).astype(np.int32), 0, nb - 1)
        hist = np.bincount(idx.ravel(), minlength=nb)
        if np.count_nonzero(hist) <= 1:
            return ch
        cdf = np.cumsum(hist)
        cdf_min = cdf[np.argmax(cdf > 0)]
        den = cdf[-1] - cdf_min
        # float32 times the reciprocal, as Keras on JAX computes it: table entries
        # fall on .5 often, and which way they round depends on it
        lut = ((cdf - cdf_min) * 255).astype(np.float32) * (np.float32(1) /
                                                              np.float32(den if den else 1))
        lut = np.clip(np.round(lut), 0, 255)
        at = np.clip(ch / 255.0 * (nb - 1), 0, nb - 1).astype(np.int32)
        return lut[at].astype(np.float32)

    _draws = 0

    def _expr(self, x, u, ch, hw):
        nb = self.bins
        C = self._split_shape(self._in_shape)[2]
        outs = []
        for c in range(C):
            # _channel's steps, on the channel of every image of the batch
            img = f"{x}[:, {c}, :, :]" if ch == 1 else f"{x}[:, :, :, {c}]"
            v = self._define("eq_v", self._range_expr(img, self.value_range, (0, 255)))
            idx = f"clip(astype({v} * {nb - 1} / 255.0, \"int64\"), 0, {nb - 1})"
            hist = self._define("eq_hist", f"bincount(reshape({idx}, -1), minlength={nb})")
            cdf = self._define("eq_cdf", f"cumsum({hist})")
            low = self._define("eq_low", f"take({cdf}, argmax({cdf} > 0))")
            den = f"astype(where(equal({cdf}[{nb - 1}] - {low}, 0), 1, {cdf}[{nb - 1}] - {low}), " \
                  "\"float32\")"
            lut = f"astype(({cdf} - {low}) * 255, \"float32\") * (1.0 / {den})"
            lut = self._define("eq_lut", f"clip(rint({lut}), 0.0, 255.0)")
            at = f"astype(clip({v} / 255.0 * {float(nb - 1)!r}, 0.0, {float(nb - 1)!r}), \"int64\")"
            flat = f"count_nonzero({hist}) <= 1"
            outs.append(f"where({flat}, {v}, astype(take({lut}, {at}), \"float32\"))")
        out = f"stack(list({', '.join(outs)}), axis={ch})"
        return self._range_expr(out, (0, 255), self.value_range)


class ContrastLimitedAdaptiveHistogramEqualization(_Random):
    """CLAHE, like keras.layers.ContrastLimitedAdaptiveHistogramEqualization:
    each channel equalized per tile of a tile_grid_size grid (histograms
    clipped at clip_limit times the mean bin count, the excess spread over
    all bins), tiles' tables blended bilinearly; applied in training and
    inference alike, as Keras's; integer images keep their dtype, as
    Keras's."""

    kind = "ContrastLimitedAdaptiveHistogramEqualization"

    def __init__(self, value_range=(0, 255), clip_limit=4.0, tile_grid_size=(8, 8),
                 data_format=None, name=None, **kwargs):
        super().__init__(None, data_format, name, **kwargs)
        self.value_range = _value_range(value_range, "CLAHE")
        if isinstance(clip_limit, bool) or not isinstance(clip_limit, (int, float)):
            raise _located(ValueError,
                           f"[ContrastLimitedAdaptiveHistogramEqualization] clip_limit must be "
                           f"a number, got {clip_limit!r}")
        grid = tile_grid_size
        if not (isinstance(grid, (tuple, list)) and len(grid) == 2 and all(
                isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in grid)):
            raise _located(ValueError,
                           f"[ContrastLimitedAdaptiveHistogramEqualization] tile_grid_size must "
                           f"be two positive ints, got {tile_grid_size!r}")
        self.clip_limit, self.tile_grid_size = float(clip_limit), tuple(grid)

    def call(self, inputs, training=True):
        a, back = _images(inputs, self.kind, self.data_format)
        out = back(self._augment(a))
        dtype = np.asarray(inputs).dtype
        # As Keras's: integer images come back in their dtype (the cast truncates).
        return out.astype(dtype) if dtype.kind in "iu" else out

    def _augment(self, a):
        img = _to_range(a, self.value_range, (0, 255))
        b, H, W, C = img.shape
        gh, gw = self.tile_grid_size
        th, tw = -(-H // gh), -(-W // gw)
        pad = np.pad(img, ((0, 0), (0, th * gh - H), (0, tw * gw - W), (0, 0)), mode="symmetric")
        tiles = pad.reshape(b, gh, th, gw, tw, C).transpose(0, 1, 3, 5, 2, 4)
        ints = np.clip(tiles.reshape(-1, th * tw).astype(np.int32), 0, 255)
        offsets = (np.arange(ints.shape[0]) * 256)[:, None]
        hists = np.bincount((ints + offsets).ravel(), minlength=ints.shape[0] * 256)
        hists = hists.reshape(b, gh, gw, C, 256).astype(np.float32)
        if self.clip_limit > 0:
            clipped = np.minimum(hists, np.float32(self.clip_limit * th * tw / 256.0))
            hists = clipped + (hists - clipped).sum(-1, keepdims=True) / np.float32(256)
        cdf = np.cumsum(hists, -1, dtype=np.float32)
        cdf_min = cdf.min(-1, keepdims=True)
        den = np.float32(th * tw) - cdf_min
        table = np.clip((cdf - cdf_min) * np.float32(255) / np.where(den == 0, 1, den), 0, 255)
        table = np.pad(table, ((0, 0), (1, 1), (1, 1), (0, 0), (0, 0)), mode="edge")

        def axis(n, t, g):
            pos = (np.arange(n, dtype=np.float32) - np.float32(t / 2.0)) / np.float32(t) + 1
            lo = np.floor(pos)
            return (np.clip(lo, 0, g + 1).astype(np.int64),
                    np.clip(lo + 1, 0, g + 1).astype(np.int64), pos - lo)

        y0, y1, wy = axis(th * gh, th, gh)
        x0, x1, wx = axis(tw * gw, tw, gw)
        px = np.clip(pad, 0, 255).astype(np.int32)
        bi, ci = np.arange(b)[:, None, None, None], np.arange(C)[None, None, None, :]
        Y0, Y1 = y0[None, :, None, None], y1[None, :, None, None]
        X0, X1 = x0[None, None, :, None], x1[None, None, :, None]
        WY, WX = wy[None, :, None, None], wx[None, None, :, None]
        top = table[bi, Y0, X0, ci, px] * (1 - WX) + table[bi, Y0, X1, ci, px] * WX
        bottom = table[bi, Y1, X0, ci, px] * (1 - WX) + table[bi, Y1, X1, ci, px] * WX
        out = (top * (1 - WY) + bottom * WY)[:, :H, :W]
        return _to_range(out.astype(np.float32), (0, 255), self.value_range)
