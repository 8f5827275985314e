"""Keras's other image augmentations: RandomShear, RandomPerspective,
RandomElasticTransform, RandomGaussianBlur, RandomErasing, the batch
mixers MixUp and CutMix (which also mix the labels of a {"images",
"labels"} dict) and MaxNumBoundingBoxes.

As in image_color.py, each random layer draws (`_draw`) and applies
(`_apply`) separately, so tests give one draw to tessera and to Keras.
RandomShear (an affine gather, as RandomRotation), RandomGaussianBlur and
RandomErasing also compile into a model (random in fit, the identity in
evaluate and predict); the others run eagerly on arrays, as data
preprocessing."""

from __future__ import annotations

import numpy as np

from . import image_color
from .base import Layer
from .image_color import _located, _unit_range
from .image_preprocessing import (_check_interp, _ImageGraph, _images, _RandomAffine,
                                  _RandomImage, _sample)

__all__ = ["RandomShear", "RandomPerspective", "RandomElasticTransform", "RandomGaussianBlur",
           "RandomErasing", "MixUp", "CutMix", "MaxNumBoundingBoxes"]


class RandomShear(_RandomAffine):
    """Shears each image by random x and y factors (a number f for
    [-f, f], or a pair in [0, 1]) with a random sign, like
    keras.layers.RandomShear: output pixel (x, y) samples the input at
    (x + sx * y, y + sy * x)."""

    kind = "RandomShear"

    def __init__(self, x_factor=0.0, y_factor=0.0, interpolation="bilinear", fill_mode="reflect",
                 fill_value=0.0, data_format=None, seed=None, bounding_box_format=None,
                 name=None, **kwargs):
        super().__init__(fill_mode, interpolation, seed, fill_value, data_format, name,
                         bounding_box_format, **kwargs)
        self.x_factor = _unit_range(x_factor, self.kind, "x_factor", symmetric=True)
        self.y_factor = _unit_range(y_factor, self.kind, "y_factor", symmetric=True)

    def _draw(self, n):
        sign = np.where(self._rng.random(n) > 0.5, -1.0, 1.0)
        sy = self._rng.uniform(*self.y_factor, n)
        sx = self._rng.uniform(*self.x_factor, n)
        return np.stack([sx * sign, sy * sign], 1)

    def _draw_affine(self, n, H, W):
        return self._draw(n)

    def _matrices(self, shear, H=None, W=None):
        out = np.zeros((len(shear), 2, 3))
        out[:, 0, 0] = out[:, 1, 1] = 1.0
        out[:, 0, 1], out[:, 1, 0] = shear[:, 0], shear[:, 1]
        return out

    def _apply(self, a, shear):
        return self._targets_images(a, shear, None)

    def _targets_boxes(self, b, shear, H, W):
        """Keras's rule, on boxes relative to the image: x moved by -sx * y
        (the corner's y that widens the box), then y by -sy * x."""
        sx, sy = (np.asarray(shear[:, k], np.float32).reshape(-1, 1) for k in (0, 1))
        x1, y1 = b[..., 0] / np.float32(W), b[..., 1] / np.float32(H)
        x2, y2 = b[..., 2] / np.float32(W), b[..., 3] / np.float32(H)
        x1, x2 = (np.where(sx < 0, x1 - sx * y1, x1 - sx * y2),
                  np.where(sx < 0, x2 - sx * y2, x2 - sx * y1))
        y1, y2 = (np.where(sy > 0, y1 - sy * x2, y1 - sy * x1),
                  np.where(sy > 0, y2 - sy * x1, y2 - sy * x2))
        return np.stack([x1 * W, y1 * H, x2 * W, y2 * H], -1), (H, W)

    def _graph_params(self, u, H, W):
        # One uniform gives the sign (its half) and, independent of it, a
        # second uniform (its doubled fraction).
        sign = f"where({u}[:, 0:1] > 0.5, -1.0, 1.0)"
        v = f"mod(2.0 * {u}[:, 0:1], 1.0)"
        (xl, xh), (yl, yh) = self.x_factor, self.y_factor
        sx = f"({sign} * ({xl!r} + {xh - xl!r} * {u}[:, 1:2]))"
        sy = f"({sign} * ({yl!r} + {yh - yl!r} * {v}))"
        zero, one = f"0.0 * {u}[:, 0:1]", f"1.0 + 0.0 * {u}[:, 0:1]"
        return [one, sx, zero, sy, one, zero]


def _gauss1d(size, sigma):
    x = np.arange(size, dtype=np.float32) - (size - 1) / 2
    k = np.exp(-0.5 * (x / np.float32(sigma)) ** 2)
    return (k / k.sum()).astype(np.float32)


def _conv_same(a, k, axis):
    """Zero-padded 'same' correlation of channels_last images with a 1-D
    kernel along axis (1: height, 2: width)."""
    r = len(k) // 2
    pad = [(0, 0)] * 4
    pad[axis] = (r, r)
    p = np.pad(a, pad)
    n = a.shape[axis]
    return sum(k[i] * np.take(p, np.arange(i, i + n), axis=axis) for i in range(len(k)))


class _RandomGraph(_ImageGraph):
    """The compiled path of a random layer that keeps the image's shape:
    `_expr(x, u, ctx)` writes the training output from u, a
    (batch + 1, draws, 1, 1) uniform draw in [0, 1) (one row per image, and
    a last row for draws shared by the batch); the identity when not
    training."""

    in_graph = True
    _draws = 1

    def compute_output_shape(self, s):
        self._split_shape(s)
        return tuple(s)

    def forward(self, x, p, ctx):
        u = ctx.define("aug_u", f"random_uniform(list(shape({x})[0] + 1, {self._draws}, 1, 1), "
                                f"0.0, 1.0, {self._seed(ctx)}, \"float32\")")
        return f"if({ctx.training}, {self._expr(x, u, ctx)}, {x})"

    @staticmethod
    def _between(u, k, lo, hi, rows=":-1"):
        return f"({lo!r} + {hi - lo!r} * {u}[{rows}, {k}:{k + 1}])"

    def _applied(self, u, k):
        """Keras's choice of the images to transform: with a probability
        drawn from factor (draws k and k + 1)."""
        return f"({u}[:-1, {k + 1}:{k + 2}] < {self._between(u, k, *self.factor)})"


class RandomGaussianBlur(_RandomGraph, _RandomImage):
    """Blurs each image with probability drawn from factor by a Gaussian
    kernel (kernel_size, odd) of a random sigma in [0, sigma] (one per
    batch), clipped to value_range, like keras.layers.RandomGaussianBlur."""

    kind = "RandomGaussianBlur"

    def __init__(self, factor=1.0, kernel_size=3, sigma=1.0, value_range=(0, 255),
                 data_format=None, seed=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind)
        ks = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * 2
        if len(ks) != 2 or any(isinstance(k, bool) or not isinstance(k, int) or k <= 0 or
                               k % 2 == 0 for k in ks):
            raise _located(ValueError,
                           f"[RandomGaussianBlur] kernel_size must be an odd positive int or "
                           f"two of them, got {kernel_size!r}")
        self.kernel_size = tuple(ks)
        self.sigma = _unit_range(sigma, self.kind, "sigma")
        self.value_range = image_color._value_range(value_range, self.kind)

    def _draw(self, n):
        p = self._rng.uniform(*self.factor, n)
        apply = self._rng.random(n) < p
        return apply, self._rng.uniform(*self.sigma, 2).astype(np.float32) + 1e-6

    def _apply(self, a, draw):
        apply, sigma = draw
        # Keras's kernel: kernel_size[0] and sigma[0] along the width, [1] along the height.
        blur = _conv_same(a, _gauss1d(self.kernel_size[0], sigma[0]), 2)
        blur = _conv_same(blur, _gauss1d(self.kernel_size[1], sigma[1]), 1)
        out = np.where(np.asarray(apply).reshape(-1, 1, 1, 1), blur, a)
        return np.clip(out, *self.value_range).astype(np.float32)

    def _augment(self, a):
        return self._apply(a, self._draw(a.shape[0]))

    _draws = 2

    def _expr(self, x, u, ctx):
        H, W, _ = self._split_shape(self._in_shape)
        hax, wax = self._hw_axes()
        out = x
        # Keras's kernel: kernel_size[0] and sigma[0] along the width, [1] along the height
        for k, (axis, n) in enumerate(((wax, W), (hax, H))):
            size = self.kernel_size[k]
            sigma = ctx.define("blur_sigma", f"{self._between(u, k, *self.sigma, rows='-1:')} "
                                             "+ 1e-06")
            r = size // 2
            widths = ", ".join(f"list({r}, {r})" if a == axis else "list(0, 0)"
                               for a in range(4))
            padded = ctx.define("blur_pad", f"pad({out}, list({widths}))")
            weights = [f"exp(-0.5 * square({float(i - (size - 1) / 2)!r} / {sigma}))"
                       for i in range(size)]
            total = ctx.define("blur_total", " + ".join(weights))
            terms = []
            for i, w in enumerate(weights):
                window = [":"] * 4
                window[axis] = f"{i}:{i + n}"
                terms.append(f"{w} * {padded}[{', '.join(window)}]")
            out = ctx.define("blur", f"({' + '.join(terms)}) / {total}")
        v0, v1 = self.value_range
        return f"clip(where({self._applied(u, 0)}, {out}, {x}), {v0!r}, {v1!r})"


def _boxes(rng, n, H, W, ratio_w, ratio_h):
    """Keras's random boxes: a side ratio * length at a uniform offset;
    (x0, x1, y0, y1), each (n,)."""
    cw, ch = (ratio_w * W).astype(np.float32), (ratio_h * H).astype(np.float32)
    x0 = rng.random(n).astype(np.float32) * (W - cw)
    y0 = rng.random(n).astype(np.float32) * (H - ch)
    return x0, x0 + cw, y0, y0 + ch


def _box_mask(shape, box):
    x0, x1, y0, y1 = (np.asarray(v, np.float32).reshape(-1, 1, 1, 1) for v in box)
    gy, gx = np.meshgrid(np.arange(shape[1], dtype=np.float32),
                         np.arange(shape[2], dtype=np.float32), indexing="ij")
    gy, gx = gy[None, :, :, None], gx[None, :, :, None]
    return (gx >= x0) & (gx < x1) & (gy >= y0) & (gy < y1)


def _homography(start, end):
    """The 8 coefficients mapping each end point to its start point (Keras's
    compute_homography_matrix), for (batch, 4, 2) points."""
    out = np.empty((len(start), 8))
    for k, (src, dst) in enumerate(zip(np.asarray(start, np.float64),
                                       np.asarray(end, np.float64))):
        rows, rhs = [], []
        for (sx, sy), (ex, ey) in zip(src, dst):
            rows.append([ex, ey, 1, 0, 0, 0, -sx * ex, -sx * ey])
            rhs.append(sx)
        for (sx, sy), (ex, ey) in zip(src, dst):
            rows.append([0, 0, 0, ex, ey, 1, -sy * ex, -sy * ey])
            rhs.append(sy)
        out[k] = np.linalg.solve(np.array(rows), np.array(rhs))
    return out


class RandomPerspective(_RandomAffine):
    """Warps each image, with probability drawn from factor, by the
    homography moving its corners by random fractions (in [-scale / 2,
    scale / 2]) of their coordinates, outside pixels fill_value, like
    keras.layers.RandomPerspective (as Keras's, the (0, 0) corner stays)."""

    kind = "RandomPerspective"

    def __init__(self, factor=1.0, scale=1.0, interpolation="bilinear", fill_value=0.0, seed=None,
                 data_format=None, bounding_box_format=None, name=None, **kwargs):
        super().__init__("constant", interpolation, seed, fill_value, data_format, name,
                         bounding_box_format, **kwargs)
        self.factor = _unit_range(factor, self.kind)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or \
                not 0 <= scale <= 1:
            raise _located(ValueError,
                           f"[RandomPerspective] scale must be a number in [0, 1], got "
                           f"{scale!r}")
        self.scale = float(scale)

    def _draw(self, n, H, W):
        p = self._rng.uniform(*self.factor, n)
        apply = self._rng.random(n) < p
        move = self._rng.uniform(-0.5 * self.scale, 0.5 * self.scale, (n, 4, 2))
        start = np.repeat(np.array([[[0.0, 0.0], [W - 1, 0.0], [0.0, H - 1], [W - 1, H - 1]]]),
                          n, 0)
        return apply, start.astype(np.float32), (start + start * move).astype(np.float32)

    def _apply(self, a, draw, interpolation=None):
        apply, start, end = draw
        H, W = a.shape[1], a.shape[2]
        ys, xs = np.meshgrid(np.arange(H, dtype=np.float64), np.arange(W, dtype=np.float64),
                             indexing="ij")
        out = a.copy()
        for k, t in enumerate(_homography(start, end)):
            if not apply[k]:
                continue
            den = t[6] * xs + t[7] * ys + 1.0
            sx = (t[0] * xs + t[1] * ys + t[2]) / den
            sy = (t[3] * xs + t[4] * ys + t[5]) / den
            out[k] = _sample(a[k], sx, sy, "constant", interpolation or self.interpolation,
                             self.fill_value)
        return out.astype(np.float32)

    def _augment(self, a):
        return self._apply(a, self._draw(a.shape[0], a.shape[1], a.shape[2]))

    def _targets_draw(self, a, training):
        return self._draw(*a.shape[:3]) if training else None

    def _targets_images(self, a, draw, interpolation):
        return self._apply(a, draw, interpolation)

    def _targets_boxes(self, b, draw, H, W):
        """Each box's corners through the warp (the inverse of the
        output-to-input homography), enclosed in a box, where applied."""
        apply, start, end = draw
        out = b.astype(np.float64)
        xs = np.stack([b[..., 0], b[..., 2], b[..., 0], b[..., 2]], -1).astype(np.float64)
        ys = np.stack([b[..., 1], b[..., 3], b[..., 3], b[..., 1]], -1).astype(np.float64)
        for k, t in enumerate(_homography(start, end)):
            if not apply[k]:
                continue
            fwd = np.linalg.inv(np.append(t, 1.0).reshape(3, 3))
            den = fwd[2, 0] * xs[k] + fwd[2, 1] * ys[k] + fwd[2, 2]
            px = (fwd[0, 0] * xs[k] + fwd[0, 1] * ys[k] + fwd[0, 2]) / den
            py = (fwd[1, 0] * xs[k] + fwd[1, 1] * ys[k] + fwd[1, 2]) / den
            out[k] = np.stack([px.min(-1), py.min(-1), px.max(-1), py.max(-1)], -1)
        return out, (H, W)

    # In a model: per image the probability and its draw, then the 8 corner moves; the
    # homography solved per image (float64, as _homography), then the affine layers' gather.
    _graph_draws = 10

    def _graph_coords(self, ctx, u, xs, ys, H, W):
        d = ctx.define
        start = [(0.0, 0.0), (W - 1.0, 0.0), (0.0, H - 1.0), (W - 1.0, H - 1.0)]
        move = [f"astype({-0.5 * self.scale!r} + {self.scale!r} * {u}[:, {2 + k}], "
                "\"float64\")" for k in range(8)]
        end = [(d("persp_ex", f"{sx!r} + {sx!r} * {move[2 * i]}"),
                d("persp_ey", f"{sy!r} + {sy!r} * {move[2 * i + 1]}"))
               for i, (sx, sy) in enumerate(start)]
        zero = d("persp_0", f"0.0 * {end[0][0]}")
        one = f"1.0 + {zero}"
        rows = [[ex, ey, one, zero, zero, zero, f"{-sx!r} * {ex}", f"{-sx!r} * {ey}"]
                for (sx, _), (ex, ey) in zip(start, end)]
        rows += [[zero, zero, zero, ex, ey, one, f"{-sy!r} * {ex}", f"{-sy!r} * {ey}"]
                 for (_, sy), (ex, ey) in zip(start, end)]
        a = f"stack(list({', '.join(f'stack(list({chr(44).join(r)}), axis=1)' for r in rows)})" \
            ", axis=1)"
        rhs = ", ".join(f"{v!r} + {zero}" for v in [p[0] for p in start] + [p[1] for p in start])
        t = d("persp_t", f"solve({a}, expand_dims(stack(list({rhs}), axis=1), 2))")
        c = [d("persp_c", f"{t}[:, {k}:{k + 1}, 0]") for k in range(8)]
        x64, y64 = f"astype({xs}, \"float64\")", f"astype({ys}, \"float64\")"
        den = d("persp_den", f"{c[6]} * {x64} + {c[7]} * {y64} + 1.0")
        return (d("aug_sx", f"({c[0]} * {x64} + {c[1]} * {y64} + {c[2]}) / {den}"),
                d("aug_sy", f"({c[3]} * {x64} + {c[4]} * {y64} + {c[5]}) / {den}"))

    def _graph_choose(self, u, out, x):
        lo, hi = self.factor
        applied = f"{u}[:, 1:2] < ({lo!r} + {hi - lo!r} * {u}[:, 0:1])"
        return f"where(reshape({applied}, list(-1, 1, 1, 1)), {out}, {x})"


class RandomElasticTransform(_RandomAffine):
    """Displaces each pixel, with probability drawn from factor, by smoothed
    Gaussian noise (alpha = max(h, w) * 0.1 * s, sigma = min(h, w) * 0.05 *
    s, s drawn from scale), clipped to value_range, like
    keras.layers.RandomElasticTransform. As Keras's on JAX, one noise field
    moves x and y alike."""

    kind = "RandomElasticTransform"
    _FILL_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")

    def __init__(self, factor=1.0, scale=1.0, interpolation="bilinear", fill_mode="reflect",
                 fill_value=0.0, value_range=(0, 255), seed=None, data_format=None, name=None,
                 **kwargs):
        _RandomImage.__init__(self, seed, data_format, name, **kwargs)  # its own fill modes
        self.factor = _unit_range(factor, self.kind)
        self.scale = _unit_range(scale, self.kind, "scale")
        self.interpolation = _check_interp(interpolation, self.kind)
        if fill_mode not in self._FILL_MODES:
            raise _located(ValueError,
                           f"[RandomElasticTransform] fill_mode must be one of "
                           f"{list(self._FILL_MODES)}, got {fill_mode!r}")
        self.fill_mode, self.fill_value = fill_mode, float(fill_value)
        self.value_range = image_color._value_range(value_range, self.kind)

    def _draw(self, n, H, W):
        p = self._rng.uniform(*self.factor, n)
        apply = self._rng.random(n) < p
        s = float(self._rng.uniform(*self.scale))
        return apply, s, self._rng.standard_normal((n, H, W)).astype(np.float32)

    def _apply(self, a, draw):
        apply, s, noise = draw
        if self.scale[1] == 0 or self.factor[1] == 0:
            return a
        H, W = a.shape[1], a.shape[2]
        alpha, sigma = max(H, W) * 0.1 * s, min(H, W) * 0.05 * s
        size = int(6 * sigma) | 1
        k = _gauss1d(size, sigma)
        d = noise[..., None] * np.float32(sigma)
        d = _conv_same(_conv_same(d, k, 2), k, 1)[..., 0]
        ys, xs = np.meshgrid(np.arange(H, dtype=np.float32), np.arange(W, dtype=np.float32),
                             indexing="ij")
        out = a.copy()
        for i in range(a.shape[0]):
            if apply[i]:
                out[i] = _sample(a[i], xs + alpha * d[i], ys + alpha * d[i], self.fill_mode,
                                 self.interpolation, self.fill_value)
        return np.clip(out, *self.value_range).astype(np.float32)

    def _augment(self, a):
        return self._apply(a, self._draw(a.shape[0], a.shape[1], a.shape[2]))

    # In a model: per image the probability and its draw, the batch's scale from the first
    # image's third uniform, the noise from its own stream; the kernel is as wide as the
    # largest scale needs, its weights zero past the drawn one's radius.
    _graph_draws = 3
    NOISE_SEED = 1 << 40  # added to the call's seed: far from every call's uniform draws

    def forward(self, x, p, ctx):
        if self.scale[1] == 0 or self.factor[1] == 0:
            return x
        return super().forward(x, p, ctx)

    def _graph_coords(self, ctx, u, xs, ys, H, W):
        d = ctx.define
        lo, hi = self.scale
        s = d("elastic_s", f"({lo!r} + {hi - lo!r} * {u}[0, 2])")
        sigma = d("elastic_sigma", f"{min(H, W) * 0.05!r} * {s}")
        reach = (int(6 * min(H, W) * 0.05 * hi) | 1) // 2
        r = d("elastic_r", f"floor_divide(bitwise_or(astype(6.0 * {sigma}, \"int64\"), 1), 2)")
        field = d("elastic_d", f"random_normal(list(shape({u})[0], {H}, {W}), 0.0, 1.0, "
                               f"{self._seed(ctx)} + {self.NOISE_SEED}, \"float32\") * "
                               f"{sigma}")
        for axis, n in ((2, W), (1, H)):
            weights = [d("elastic_w", f"where({abs(o)} <= {r}, exp(-0.5 * square({float(o)!r} / "
                                      f"maximum({sigma}, 1e-12))), 0.0)")
                       for o in range(-reach, reach + 1)]
            widths = ", ".join(f"list({reach}, {reach})" if a == axis else "list(0, 0)"
                               for a in range(3))
            padded = d("elastic_pad", f"pad({field}, list({widths}))")
            terms = [f"{w} * {padded}[:, {f'{i}:{i + n}, :' if axis == 1 else f':, {i}:{i + n}'}]"
                     for i, w in enumerate(weights)]
            field = d("elastic_d", f"({' + '.join(terms)}) / ({' + '.join(weights)})")
        alpha = f"{max(H, W) * 0.1!r} * {s}"
        flat = d("elastic_f", f"{alpha} * reshape({field}, list(shape({u})[0], {H * W}))")
        return d("aug_sx", f"{xs} + {flat}"), d("aug_sy", f"{ys} + {flat}")

    def _graph_choose(self, u, out, x):
        lo, hi = self.factor
        applied = f"{u}[:, 1:2] < ({lo!r} + {hi - lo!r} * {u}[:, 0:1])"
        v0, v1 = self.value_range
        return f"clip(where(reshape({applied}, list(-1, 1, 1, 1)), {out}, {x}), {v0!r}, {v1!r})"


class RandomErasing(_RandomGraph, _RandomImage):
    """Erases a random box (its area a random fraction in scale) of each
    image, with probability drawn from factor, filling it with fill_value
    (a number or 3 numbers) or, when None, Gaussian noise * value_range[1],
    clipped to value_range, like keras.layers.RandomErasing."""

    kind = "RandomErasing"

    def __init__(self, factor=1.0, scale=(0.02, 0.33), fill_value=None, value_range=(0, 255),
                 seed=None, data_format=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind)
        self.scale = _unit_range(scale, self.kind, "scale")
        ok = fill_value is None or (isinstance(fill_value, (int, float)) and
                                    not isinstance(fill_value, bool)) or \
            (isinstance(fill_value, (tuple, list)) and len(fill_value) == 3)
        if not ok:
            raise _located(ValueError,
                           f"[RandomErasing] fill_value must be None, a number or a list of "
                           f"three numbers, got {fill_value!r}")
        self.fill_value = fill_value
        self.value_range = image_color._value_range(value_range, self.kind)

    def _draw(self, n, shape):
        mix = np.sqrt(self._rng.uniform(*self.scale, (n, 2))).astype(np.float32)
        box = _boxes(self._rng, n, shape[1], shape[2], mix[:, 0], mix[:, 1])
        p = self._rng.uniform(*self.factor, n)
        apply = self._rng.random(n) < p
        if self.fill_value is None:
            fill = self._rng.standard_normal(shape).astype(np.float32) * self.value_range[1]
        else:
            fill = np.broadcast_to(np.asarray(self.fill_value, np.float32), shape)
        return apply, _box_mask(shape, box), np.clip(fill, *self.value_range)

    def _apply(self, a, draw):
        apply, mask, fill = draw
        erased = np.where(mask, fill, a)
        return np.where(np.asarray(apply).reshape(-1, 1, 1, 1), erased, a).astype(np.float32)

    def _augment(self, a):
        return self._apply(a, self._draw(a.shape[0], a.shape))

    _draws = 6

    def _expr(self, x, u, ctx):
        H, W, C = self._split_shape(self._in_shape)
        cf = self.data_format == "channels_first"
        mix_w = f"sqrt({self._between(u, 0, *self.scale)})"
        mix_h = f"sqrt({self._between(u, 1, *self.scale)})"
        cw = ctx.define("erase_w", f"astype({mix_w} * {float(W)!r}, \"float32\")")
        chh = ctx.define("erase_h", f"astype({mix_h} * {float(H)!r}, \"float32\")")
        x0 = ctx.define("erase_x", f"{u}[:-1, 2:3] * ({float(W)!r} - {cw})")
        y0 = ctx.define("erase_y", f"{u}[:-1, 3:4] * ({float(H)!r} - {chh})")
        grid = (1, 1, H, W) if cf else (1, H, W, 1)
        gy = f"reshape(astype(floor_divide(arange({H * W}), {W}), \"float32\"), list{grid})"
        gx = f"reshape(astype(mod(arange({H * W}), {W}), \"float32\"), list{grid})"
        inside = (f"logical_and(logical_and({gx} >= {x0}, {gx} < {x0} + {cw}), "
                  f"logical_and({gy} >= {y0}, {gy} < {y0} + {chh}))")
        v0, v1 = self.value_range
        if self.fill_value is None:
            # its own stream: far from every call's uniform draws (seed * stride + index)
            fill = f"random_normal(shape({x}), 0.0, 1.0, {self._seed(ctx)} + {1 << 40}, " \
                   f"\"float32\") * {v1!r}"
        else:
            vals = np.broadcast_to(np.asarray(self.fill_value, np.float32), (C,))
            shape = (1, C, 1, 1) if cf else (1, 1, 1, C)
            fill = f"reshape(asarray([{', '.join(repr(float(v)) for v in vals)}], " \
                   f"\"float32\"), list{shape})"
        fill = f"clip({fill}, {v0!r}, {v1!r})"
        return f"where(logical_and({self._applied(u, 4)}, {inside}), {fill}, {x})"


class _Mixer(_RandomImage):
    """MixUp and CutMix: take images, or a dict {"images", "labels"} whose
    labels (batch, classes) they mix alike; single images pass unchanged."""

    def call(self, inputs, training=True):
        if isinstance(inputs, dict):
            unknown = set(inputs) - {"images", "labels"}
            if "images" not in inputs or unknown:
                raise _located(ValueError,
                               f"[{self.kind}] takes images or a dict with 'images' (and "
                               f"'labels'), got keys {sorted(inputs)}")
            a, back = _images(inputs["images"], self.kind, self.data_format)
            labels = inputs.get("labels")
            if labels is not None:
                labels = np.asarray(labels, np.float32)
                if labels.ndim == 0 or labels.shape[0] != a.shape[0]:
                    raise _located(ValueError,
                                   f"[{self.kind}] labels must have one row per image "
                                   f"({a.shape[0]}), got shape {labels.shape}")
            single = np.asarray(inputs["images"]).ndim == 3
        else:
            a, back = _images(inputs, self.kind, self.data_format)
            labels, single = None, np.asarray(inputs).ndim == 3
        if training and not single:
            a, labels = self._apply(a, labels, self._draw(a.shape[0], a.shape))
        if isinstance(inputs, dict):
            out = dict(inputs, images=back(a))
            if labels is not None:
                out["labels"] = labels
            return out
        return back(a)


class MixUp(_Mixer):
    """Mixes each image (and label) with another of the batch by a weight
    drawn from Beta(alpha, alpha), like keras.layers.MixUp."""

    kind = "MixUp"

    def __init__(self, alpha=0.2, data_format=None, seed=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
            raise _located(ValueError, f"[MixUp] alpha must be a positive number, got {alpha!r}")
        self.alpha = float(alpha)

    def _draw(self, n, shape):
        return self._rng.permutation(n), self._rng.beta(self.alpha, self.alpha, n)

    def _apply(self, a, labels, draw):
        perm, w = draw
        w = np.asarray(w, np.float32)
        out = w.reshape(-1, 1, 1, 1) * a + (1 - w.reshape(-1, 1, 1, 1)) * a[perm]
        if labels is not None:
            wl = w.reshape((-1,) + (1,) * (labels.ndim - 1))
            labels = wl * labels + (1 - wl) * labels[perm]
        return out.astype(np.float32), labels


class CutMix(_Mixer):
    """Pastes a random box of another image of the batch into each image
    (box area from Beta(alpha, alpha), alpha drawn from factor), mixing the
    labels by area, like keras.layers.CutMix."""

    kind = "CutMix"

    def __init__(self, factor=1.0, seed=None, data_format=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.factor = _unit_range(factor, self.kind)

    def _draw(self, n, shape):
        alpha = self._rng.uniform(*self.factor) + 1e-6
        ratio = np.sqrt(1.0 - self._rng.beta(alpha, alpha, n)).astype(np.float32)
        box = _boxes(self._rng, n, shape[1], shape[2], ratio, ratio)
        return self._rng.permutation(n), box

    def _apply(self, a, labels, draw):
        perm, (x0, x1, y0, y1) = draw
        mask = _box_mask(a.shape, (x0, x1, y0, y1))
        out = np.where(mask, a[perm], a)
        if labels is not None:
            w = 1.0 - (x1 - x0) * (y1 - y0) / (a.shape[1] * a.shape[2])
            w = np.asarray(w, np.float32).reshape((-1,) + (1,) * (labels.ndim - 1))
            labels = w * labels + (1 - w) * labels[perm]
        return out.astype(np.float32), labels


class MaxNumBoundingBoxes(Layer):
    """Keras's MaxNumBoundingBoxes: pads or trims a dict's
    "bounding_boxes" {"boxes" (batch, n, 4), "labels" (batch, n)} to
    max_number boxes (fill_value fills); images pass unchanged."""

    kind = "MaxNumBoundingBoxes"

    def __init__(self, max_number, fill_value=-1, bounding_box_format=None, name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.bounding_box_format = bounding_box_format
        if isinstance(max_number, bool) or not isinstance(max_number, int) or max_number <= 0:
            raise _located(ValueError,
                           f"[MaxNumBoundingBoxes] max_number must be a positive int, got "
                           f"{max_number!r}")
        self.max_number, self.fill_value = max_number, int(fill_value)

    def _fit(self, v, where):
        v = np.asarray(v)
        if v.ndim < 2:
            raise _located(ValueError,
                           f"[MaxNumBoundingBoxes] {where} must be batched (batch, boxes, "
                           f"...), got shape {v.shape}")
        n = v.shape[1]
        if n >= self.max_number:
            return v[:, :self.max_number]
        pad = [(0, 0)] * v.ndim
        pad[1] = (0, self.max_number - n)
        return np.pad(v, pad, constant_values=self.fill_value)

    def __call__(self, inputs, training=True):
        if not isinstance(inputs, dict):
            return inputs
        out = dict(inputs)
        boxes = inputs.get("bounding_boxes")
        if boxes is not None:
            if not isinstance(boxes, dict) or "boxes" not in boxes:
                raise _located(ValueError,
                               "[MaxNumBoundingBoxes] bounding_boxes must be a dict with "
                               f"'boxes' (and 'labels'), got {type(boxes).__name__}")
            out["bounding_boxes"] = {k: self._fit(v, f"bounding_boxes[{k!r}]")
                                     for k, v in boxes.items()}
        return out

    def call(self, inputs, training=True):
        return self(inputs, training=training)
