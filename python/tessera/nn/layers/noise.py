"""Regularization layers of Keras that act only in training (as Dropout):
SpatialDropout1D/2D, GaussianNoise, GaussianDropout, AlphaDropout; and
ActivityRegularization (a loss on its input, its output unchanged). Their
noise is drawn from tessera's counter-based generators keyed by the step's
seed and the layer call, so runs repeat; Keras's draws differ (another
generator), their distributions are the same."""

from __future__ import annotations

import math

from ..random import own_seed
from ..variables import add_program_losses
from .base import Layer, _data_format

__all__ = ["SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
           "GaussianDropout", "AlphaDropout", "ActivityRegularization"]


def _rate(rate, where: str) -> float:
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
        raise ValueError(f"[{where}] rate must be a number in [0, 1], got {rate!r}")
    return float(rate)


def _seed(ctx, layer=None) -> str:
    """The draw's seed: the step's, the call's place in the model, and the
    layer's own `seed` when given; in an eager training-mode call, the layer's own
    draw (random.own_seed)."""
    name = own_seed(layer, ctx.index)
    if name is not None:
        return name
    own = getattr(layer, "seed", None)
    extra = f" + {int(own) * 1000003}" if own is not None else ""
    return f"{ctx.seed} * {ctx.seed_stride} + {ctx.index}{extra}"


class _Noise(Layer):
    supports_masking = True

    def __init__(self, seed=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"[{self.kind}] seed must be an int or None, got {seed!r}")
        self.seed = seed

    def forward(self, x, p, ctx):
        if not ctx.is_training or not self._active():
            return x
        return self._noisy(ctx.define("nz_x", x), ctx)


class _SpatialDropout(_Noise):
    rank = 1

    def __init__(self, rate, data_format=None, seed=None, name=None, input_shape=None, **kwargs):
        super().__init__(seed, name, input_shape, **kwargs)
        self.rate = _rate(rate, self.kind)
        self.data_format = _data_format(data_format, self.kind)

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1 else
                        "spatial axes and channels")
        return s

    def _active(self):
        return self.rate > 0

    def _noisy(self, x, ctx):
        # one draw per (sample, channel), the same at every position
        first = self.data_format == "channels_first"
        index = ["slice(nil, nil)"] + ["slice(0, 1)"] * (self.rank + 1)
        index[1 if first else -1] = "slice(nil, nil)"
        if self.rate >= 1.0:
            return f"zeros_like({x})"
        ones = f"ones_like(stop_gradient(getitem({x}, {', '.join(index)})))"
        keep = ctx.define("sd_keep", f"dropout({ones}, {self.rate!r}, {_seed(ctx, self)}, true)")
        return f"{x} * {keep}"


class SpatialDropout1D(_SpatialDropout):
    """Drops whole channels of (batch, steps, channels) in training (the
    kept ones scaled by 1 / (1 - rate)), like keras.layers.SpatialDropout1D."""

    kind, rank = "SpatialDropout1D", 1

    def __init__(self, rate, seed=None, name=None, input_shape=None, **kwargs):
        super().__init__(rate, None, seed, name, input_shape, **kwargs)


class SpatialDropout2D(_SpatialDropout):
    """Drops whole feature maps in training, like keras.layers.SpatialDropout2D."""

    kind, rank = "SpatialDropout2D", 2


class SpatialDropout3D(_SpatialDropout):
    """Drops whole 3-d feature maps in training, like keras.layers.SpatialDropout3D."""

    kind, rank = "SpatialDropout3D", 3


class GaussianNoise(_Noise):
    """Adds normal noise of standard deviation stddev in training, like
    keras.layers.GaussianNoise."""

    kind = "GaussianNoise"

    def __init__(self, stddev, seed=None, name=None, input_shape=None, **kwargs):
        super().__init__(seed, name, input_shape, **kwargs)
        if isinstance(stddev, bool) or not isinstance(stddev, (int, float)) or stddev < 0:
            raise ValueError(f"[GaussianNoise] stddev must be a number >= 0, got {stddev!r}")
        self.stddev = float(stddev)

    def _active(self):
        return self.stddev > 0

    def _noisy(self, x, ctx):
        return (f"{x} + random_normal(shape({x}), 0.0, {self.stddev!r}, seed={_seed(ctx, self)}, "
                f"dtype=dtype_name({x}))")


class GaussianDropout(_Noise):
    """Multiplies by normal noise of mean 1 and standard deviation
    sqrt(rate / (1 - rate)) in training, like keras.layers.GaussianDropout."""

    kind = "GaussianDropout"

    def __init__(self, rate, seed=None, name=None, input_shape=None, **kwargs):
        super().__init__(seed, name, input_shape, **kwargs)
        self.rate = _rate(rate, self.kind)
        if self.rate >= 1.0:
            raise ValueError(f"[GaussianDropout] rate must be below 1, got {rate!r}")

    def _active(self):
        return self.rate > 0

    def _noisy(self, x, ctx):
        std = math.sqrt(self.rate / (1.0 - self.rate))
        return (f"{x} * random_normal(shape({x}), 1.0, {std!r}, seed={_seed(ctx, self)}, "
                f"dtype=dtype_name({x}))")


class AlphaDropout(_Noise):
    """Dropout that keeps SELU's mean and variance: dropped units set to
    SELU's negative saturation, then an affine correction, in training, like
    keras.layers.AlphaDropout."""

    kind = "AlphaDropout"

    def __init__(self, rate, noise_shape=None, seed=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(seed, name, input_shape, **kwargs)
        self.rate = _rate(rate, self.kind)
        if self.rate >= 1.0:
            raise ValueError(f"[AlphaDropout] rate must be below 1, got {rate!r}")
        if noise_shape is not None and not (
                isinstance(noise_shape, (list, tuple)) and
                all(d is None or (isinstance(d, int) and not isinstance(d, bool) and d > 0)
                    for d in noise_shape)):
            raise ValueError(f"[AlphaDropout] noise_shape must be a tuple of positive ints or "
                             f"None (an input's size), got {noise_shape!r}")
        self.noise_shape = None if noise_shape is None else tuple(noise_shape)

    def compute_output_shape(self, s):
        ns = self.noise_shape
        if ns is not None and (len(ns) != len(s) + 1 or any(
                d is not None and d != 1 and d != n for d, n in zip(ns[1:], s))):
            raise ValueError(f"[AlphaDropout] noise_shape {ns} does not broadcast to the "
                             f"input's shape {(None,) + tuple(s)}: one size per axis, each "
                             "None, 1 or the input's")
        return s

    def _active(self):
        return self.rate > 0

    def _noisy(self, x, ctx):
        alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        alpha_p = -alpha * scale
        r = self.rate
        a = ((1 - r) * (1 + r * alpha_p ** 2)) ** -0.5
        b = -a * alpha_p * r
        drawn = f"shape({x})"
        if self.noise_shape is not None:
            # Keras's noise_shape: one draw per kept position, broadcast over the size-1
            # axes (the batch's too: (1, None) shares one mask across the samples)
            index = ", ".join("slice(0, 1)" if d == 1 and n != 1 else "slice(nil, nil)"
                              for d, n in zip(self.noise_shape, (None,) + tuple(self._in_shape)))
            drawn = f"shape(getitem({x}, {index}))"
        kept = ctx.define("ad_keep", f"greater_equal(random_uniform({drawn}, "
                                     f"seed={_seed(ctx, self)}, dtype=dtype_name({x})), {r!r})")
        return f"{a!r} * where({kept}, {x}, astype({alpha_p!r}, dtype_name({x}))) + {b!r}"


class ActivityRegularization(Layer):
    """Its input unchanged; adds l1 * sum(|x|) + l2 * sum(x**2), divided by
    the batch size (Keras 3's rule), to the loss, like
    keras.layers.ActivityRegularization."""

    kind = "ActivityRegularization"
    supports_masking = True

    def __init__(self, l1=0.0, l2=0.0, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        for n, v in (("l1", l1), ("l2", l2)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"[ActivityRegularization] {n} must be a number >= 0, got "
                                 f"{v!r}")
        self.l1, self.l2 = float(l1), float(l2)

    def forward(self, x, p, ctx):
        if not (self.l1 or self.l2):
            return x
        x = ctx.define("ar_x", x)
        terms = []
        if self.l1:
            terms.append(f"{self.l1!r} * sum(abs({x}))")
        if self.l2:
            terms.append(f"{self.l2!r} * sum({x} * {x})")
        penalty = " + ".join(terms)
        add_program_losses([ctx.define("ar_loss", f"({penalty}) / astype(shape({x})[0], "
                                                  f"dtype_name({x}))")])
        return x
