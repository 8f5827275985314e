"""Normalization layers: BatchNormalization, LayerNormalization, RMSNormalization, Rescaling,
Normalization (given mean and variance, or adapt() on arrays, batches or a
tessera Dataset; invert), UnitNormalization and GroupNormalization."""

from __future__ import annotations

import numpy as np

from ... import data as _data
from ..symbolic import KerasTensor
from .base import Layer, Param, _initializer, _list, _regularizer

__all__ = ["BatchNormalization", "GroupNormalization", "LayerNormalization", "Normalization",
           "RMSNormalization", "Rescaling", "UnitNormalization"]

# LayerNormalization over its input's last axes with both gamma and beta runs
# as one primitive, layer_norm, whose backward is one pass too (layer_norm_grad);
# False: the composed mean, subtract, square, sqrt, divide, multiply and add
# (the reference the tests compare it with).
FUSED_LAYER_NORM = True


def _const(v, x: str) -> str:
    """A constant (a number or an array) as text, in x's dtype."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0:
        return repr(float(a))

    def nested(b):
        return _list(nested(u) for u in b) if b.ndim else repr(float(b))

    return f"astype(array({nested(a)}), dtype_name({x}))"


class _FloatInput(Layer):
    """A layer whose output is floating point whatever its input (Keras
    casts to the compute dtype): integer inputs become float32."""

    supports_masking = True

    def split_call(self, inputs, training=None, mask=None):
        if not isinstance(inputs, KerasTensor):
            raise TypeError(f"[{self.kind}] layer {self.name!r} takes one symbolic tensor, got "
                            f"{type(inputs).__name__}")
        self._in_dtype = inputs.dtype
        static = {} if training is None else {"training": bool(training)}
        if mask is not None:
            static["mask"] = mask
        return [inputs], static

    def _float(self, x: str) -> str:
        return x if str(getattr(self, "_in_dtype", "float32")).startswith("float") else \
            f"astype({x}, \"float32\")"


class Rescaling(_FloatInput):
    """x * scale + offset, like keras.layers.Rescaling (scale and offset:
    numbers, or arrays broadcast against the input; e.g. scale=1/255)."""

    kind = "Rescaling"

    def __init__(self, scale, offset=0.0, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        for n, v in (("scale", scale), ("offset", offset)):
            try:
                a = np.asarray(v, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"[Rescaling] {n} must be a number or an array of numbers, got "
                                f"{v!r}") from None
            if not np.all(np.isfinite(a)):
                raise ValueError(f"[Rescaling] {n} must be finite, got {v!r}")
        self.scale, self.offset = scale, offset

    def forward(self, x, p, ctx):
        x = ctx.define("rs_x", self._float(x))
        y = f"{x} * {_const(self.scale, x)}"
        if np.any(np.asarray(self.offset, dtype=np.float64) != 0):
            y = f"{y} + {_const(self.offset, x)}"
        return y


class Normalization(_FloatInput):
    """(x - mean) / max(sqrt(variance), 1e-7) per position of `axis` (which
    counts the batch axis; None: one mean over all), like
    keras.layers.Normalization; invert=True maps back. mean and variance
    are given, or computed by adapt(data) (then they are the layer's
    non-trainable weights mean, variance and count, as Keras's)."""

    kind = "Normalization"

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if axis is None:
            axis = ()
        elif isinstance(axis, int) and not isinstance(axis, bool):
            axis = (axis,)
        try:
            self.axis = tuple(int(a) for a in axis)
        except (TypeError, ValueError):
            raise TypeError(f"[Normalization] axis must be an int, a tuple of ints or None, got "
                            f"{axis!r}") from None
        if (mean is None) != (variance is None):
            raise ValueError(f"[Normalization] give both mean and variance, or neither (adapt); "
                             f"got mean={mean!r} and variance={variance!r}")
        if mean is not None:
            if np.shape(mean) != np.shape(variance):
                raise ValueError(f"[Normalization] mean and variance must have the same shape, "
                                 f"got {np.shape(mean)} and {np.shape(variance)}")
            if np.ndim(mean) > len(self.axis):
                raise ValueError(f"[Normalization] the rank of mean ({np.ndim(mean)}) must be at "
                                 f"most the number of axes, {len(self.axis)} (axis={self.axis})")
        self.input_mean, self.input_variance = mean, variance  # (Keras's names)
        self.invert = bool(invert)
        self._adapted = None  # (mean, variance, count) from adapt before the layer was built

    @property
    def mean(self):
        """Keras's: the mean given, or after adapt (or build) the layer's, in the shape that
        broadcasts against a batch ((1, 4) for inputs (None, 4))."""
        return self._statistic(self.input_mean, 0)

    @property
    def variance(self):
        return self._statistic(self.input_variance, 1)

    def _statistic(self, given, k):
        if given is not None:
            return given
        if self.built and self.params:
            value = np.asarray(self.get_weights()[k])
        elif self._adapted is not None:
            value = np.asarray(self._adapted[k])
        else:
            return None
        if not self.built:
            return value.reshape(getattr(self, "_adapted_shape", value.shape))
        return value.reshape([1] + self._broadcast(self._in_shape))

    def _keep(self, rank: int) -> tuple:
        """The kept axes (counting the batch axis), sorted."""
        out = []
        for a in self.axis:
            if not -rank <= a < rank:
                raise ValueError(f"[Normalization] axis {a} is out of range for inputs of rank "
                                 f"{rank}")
            out.append(a + rank if a < 0 else a)
        if 0 in out:
            raise ValueError("[Normalization] the batch axis 0 cannot be a kept axis")
        return tuple(sorted(out))

    def _stat_shape(self, s) -> tuple:
        keep = self._keep(len(s) + 1)
        shape = tuple(s[a - 1] for a in keep)
        if any(d is None for d in shape):
            raise ValueError(f"[Normalization] the kept axes {self.axis} must have a known "
                             f"length, got per-sample shape {tuple(s)}")
        return shape

    def compute_output_shape(self, s):
        shape = self._stat_shape(s)
        self.params = []
        if self.input_mean is None:
            adapted = self._adapted
            inits = ("zeros", "ones", "zeros") if adapted is None else \
                tuple(_Given(v) for v in adapted)
            self.params = [Param("mean", shape, inits[0], trainable=False),
                           Param("variance", shape, inits[1], trainable=False),
                           Param("count", (), inits[2], trainable=False)]
        return s

    def _broadcast(self, s) -> list:
        rank = len(s) + 1
        keep = self._keep(rank)
        return [s[a - 1] if a in keep else 1 for a in range(1, rank)]

    def forward(self, x, p, ctx):
        s = self._in_shape
        bshape = [-1 if d is None else d for d in self._broadcast(s)]
        x = ctx.define("nm_x", self._float(x))
        if self.input_mean is None:
            mean = f"reshape({p['mean']}, {_list([1] + bshape)})"
            var = f"reshape({p['variance']}, {_list([1] + bshape)})"
        else:
            keep = self._keep(len(s) + 1)
            full = [1] * (len(s) + 1)
            m = np.asarray(self.input_mean, dtype=np.float64)
            for i in range(1, m.ndim + 1):
                full[keep[-i]] = m.shape[-i]
            mean = _const(np.broadcast_to(np.reshape(m, full), [1] + bshape), x)
            var = _const(np.broadcast_to(np.reshape(np.asarray(self.input_variance, np.float64),
                                                    full), [1] + bshape), x)
        std = ctx.define("nm_std", f"maximum(sqrt(astype({var}, dtype_name({x}))), 1e-07)")
        mean = f"astype({mean}, dtype_name({x}))"
        if self.invert:
            return f"{mean} + {x} * {std}"
        return f"({x} - {mean}) / {std}"

    def adapt(self, data):
        """Keras's adapt: the mean and variance of `data` (an array, a
        tessera Dataset, or an iterable of batches) over the axes not kept,
        combined batch by batch as Keras combines them."""
        if self.input_mean is not None:
            raise ValueError("[Normalization.adapt] the layer was given mean and variance; "
                             "adapt computes them: make it without them")
        batches = _batches(data, "Normalization.adapt")
        total_mean = total_var = None
        total = 0
        reduce_axes, stat_shape = None, None
        for b in batches:
            b = np.asarray(b, dtype=np.float64)
            if b.ndim < 1:
                raise ValueError(f"[Normalization.adapt] each batch must have a batch axis, got "
                                 f"shape {b.shape}")
            if reduce_axes is None:
                keep = self._keep(b.ndim)
                reduce_axes = tuple(a for a in range(b.ndim) if a not in keep)
                stat_shape = tuple(b.shape[a] for a in keep)
                self._adapted_shape = [b.shape[a] if a in keep else 1 for a in range(b.ndim)]
                if self.built and self.params and tuple(self.params[0].shape) != stat_shape:
                    raise ValueError(f"[Normalization.adapt] the layer was built for inputs "
                                     f"{(None,) + tuple(self._in_shape)}; the data's batches "
                                     f"have shape {b.shape}")
            elif tuple(b.shape[a] for a in self._keep(b.ndim)) != stat_shape:
                raise ValueError(f"[Normalization.adapt] a batch of shape {b.shape} does not "
                                 f"match the first one's kept axes {stat_shape}")
            mean = b.mean(axis=reduce_axes)
            var = b.var(axis=reduce_axes)
            count = int(np.prod([b.shape[a] for a in reduce_axes])) if reduce_axes else 1
            if total_mean is None:
                total_mean, total_var, total = mean, var, count
                continue
            total += count
            w = count / total
            new_mean = total_mean * (1 - w) + mean * w
            total_var = (total_var + (total_mean - new_mean) ** 2) * (1 - w) + \
                (var + (mean - new_mean) ** 2) * w
            total_mean = new_mean
        if total_mean is None:
            raise ValueError("[Normalization.adapt] the data has no batches")
        values = (total_mean.astype(np.float32), total_var.astype(np.float32),
                  np.array(total, dtype=np.float32))
        if self.built and self.params:
            self.set_weights(list(values))
        else:
            self._adapted = values


class _Given:
    """An initializer returning a value computed beforehand (adapt)."""

    def __init__(self, value):
        self.value = np.asarray(value)

    def generate(self, shape, dtype, seed):
        return np.array(np.broadcast_to(self.value, shape), dtype=dtype)

    def get_config(self):
        return {}


def _batches(data, where: str):
    """The batches of adapt's data: an array (one batch), a tessera Dataset
    (its inputs), or an iterable of arrays (or of (x, y) pairs)."""
    if isinstance(data, _data.Dataset):
        if data.batch_size is None:  # (Keras batches an unbatched dataset by 128)
            data = data.batch(128)
        return [b.arrays[0] for b in data.epoch_batches(0)]
    if isinstance(data, np.ndarray) or np.isscalar(data):
        return [np.asarray(data)]
    if isinstance(data, (list, tuple)) and data and not hasattr(data[0], "__len__"):
        return [np.asarray(data)]
    if hasattr(data, "__iter__"):
        out = []
        for b in data:
            if isinstance(b, tuple):
                b = b[0]
            out.append(np.asarray(b))
        return out
    raise TypeError(f"[{where}] expected an array, a tessera.data.Dataset or an iterable of "
                    f"batches, got {type(data).__name__}")


class UnitNormalization(Layer):
    """x / ||x|| over `axis` (the norm floored at 1e-6: Keras's rsqrt of the
    squares' sum capped at 1e12), like keras.layers.UnitNormalization."""

    kind = "UnitNormalization"
    supports_masking = True

    def __init__(self, axis=-1, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        if not all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
            raise TypeError(f"[UnitNormalization] axis must be an int or a list of ints, got "
                            f"{axis!r}")
        self.axis = axis

    def compute_output_shape(self, s):
        rank = len(s) + 1
        for a in (self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]):
            if not -rank <= a < rank:
                raise ValueError(f"[UnitNormalization] axis {a} is out of range for inputs of "
                                 f"rank {rank}")
        return s

    def forward(self, x, p, ctx):
        x = ctx.define("un_x", x)
        axes = _list(self.axis) if isinstance(self.axis, (list, tuple)) else str(self.axis)
        inv = f"minimum(1.0 / sqrt(sum({x} * {x}, axis={axes}, keepdims=true)), 1e12)"
        return f"{x} * {inv}"


class GroupNormalization(Layer):
    """Normalizes each sample over groups of channels (`groups`; -1: one
    channel a group, instance normalization), then gamma and beta per
    channel, like keras.layers.GroupNormalization."""

    kind = "GroupNormalization"
    constraint_arguments = {"beta_constraint": "beta", "gamma_constraint": "gamma"}
    supports_masking = True

    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if not isinstance(groups, int) or isinstance(groups, bool) or \
                (groups <= 0 and groups != -1):
            raise ValueError(f"[GroupNormalization] groups must be a positive int (or -1, "
                             f"instance normalization), got {groups!r}")
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError(f"[GroupNormalization] axis must be an int, got {axis!r}")
        if not epsilon > 0:
            raise ValueError(f"[GroupNormalization] epsilon must be positive, got {epsilon!r}")
        self.groups, self.axis, self.epsilon = groups, axis, float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        k = self.kind
        self.beta_initializer = _initializer(beta_initializer, k, "beta_initializer")
        self.gamma_initializer = _initializer(gamma_initializer, k, "gamma_initializer")
        self.beta_regularizer = _regularizer(beta_regularizer, k, "beta_regularizer")
        self.gamma_regularizer = _regularizer(gamma_regularizer, k, "gamma_regularizer")

    def _axis(self, s) -> int:
        rank = len(s) + 1
        a = self.axis + rank if self.axis < 0 else self.axis
        if not 1 <= a < rank:
            raise ValueError(f"[GroupNormalization] axis {self.axis} is out of range for inputs "
                             f"of rank {rank} (the batch axis cannot be normalized)")
        return a

    def compute_output_shape(self, s):
        a = self._axis(s)
        c = s[a - 1]
        if any(d is None for d in s):
            raise ValueError(f"[GroupNormalization] needs every axis's length, got per-sample "
                             f"shape {tuple(s)}")
        groups = c if self.groups == -1 else self.groups
        if groups > c or c % groups:
            raise ValueError(f"[GroupNormalization] the {c} channels must be divisible by "
                             f"groups ({groups}), and at least as many")
        self._group_count = groups
        self.params = []
        if self.scale:
            self.params.append(Param("gamma", (c,), self.gamma_initializer,
                                     regularizer=self.gamma_regularizer))
        if self.center:
            self.params.append(Param("beta", (c,), self.beta_initializer,
                                     regularizer=self.beta_regularizer))
        return s

    def forward(self, x, p, ctx):
        s = list(self._in_shape)
        a = self._axis(s)
        dims = [str(d) for d in s]
        g = self._group_count
        c = s[a - 1]
        grouped = dims[:a - 1] + [str(g), str(c // g)] + dims[a:]
        xg = ctx.define("gn_g", f"reshape({x}, list(-1, {', '.join(grouped)}))")
        rank = len(grouped) + 1
        axes = [i for i in range(1, rank) if i != a]  # all but the batch and the group axis
        ax = _list(axes)
        mean = ctx.define("gn_m", f"mean({xg}, axis={ax}, keepdims=true)")
        centered = ctx.define("gn_c", f"{xg} - {mean}")
        var = f"mean({centered} * {centered}, axis={ax}, keepdims=true)"
        y = f"{centered} / sqrt({var} + {self.epsilon!r})"
        bshape = [1] * (rank - 1)
        bshape[a - 1], bshape[a] = g, c // g
        if self.scale:
            y = f"({y}) * reshape({p['gamma']}, {_list(bshape)})"
        if self.center:
            y = f"({y}) + reshape({p['beta']}, {_list(bshape)})"
        return f"reshape({y}, list(-1, {', '.join(dims)}))"


class LayerNormalization(Layer):
    """Normalizes each sample over the last axis (or `axis`): gamma * (x -
    mean) / sqrt(var + epsilon) + beta, like keras.layers.LayerNormalization."""

    kind = "LayerNormalization"
    constraint_arguments = {"beta_constraint": "beta", "gamma_constraint": "gamma"}
    supports_masking = True  # passes its input's mask on (functional.py)

    def __init__(self, axis=-1, epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                 beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.axis = tuple(axis) if isinstance(axis, (list, tuple)) else (int(axis),)
        if not epsilon > 0:
            raise ValueError(f"[LayerNormalization] epsilon must be positive, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self.beta_initializer = _initializer(beta_initializer, self.kind, "beta_initializer")
        self.gamma_initializer = _initializer(gamma_initializer, self.kind, "gamma_initializer")
        self.beta_regularizer = _regularizer(beta_regularizer, self.kind, "beta_regularizer")
        self.gamma_regularizer = _regularizer(gamma_regularizer, self.kind, "gamma_regularizer")

    def _axes(self, s):
        rank = len(s) + 1
        axes = []
        for a in self.axis:
            b = a + rank if a < 0 else a
            if not 1 <= b < rank:
                raise ValueError(f"[LayerNormalization] axis {a} is out of range for inputs of "
                                 f"rank {rank} (the batch axis 0 cannot be normalized)")
            axes.append(b)
        return sorted(set(axes))

    def compute_output_shape(self, s):
        axes = self._axes(s)
        shape = tuple(s[a - 1] for a in axes)
        self.params = []
        if self.scale:
            self.params.append(Param("gamma", shape, self.gamma_initializer,
                                     regularizer=self.gamma_regularizer))
        if self.center:
            self.params.append(Param("beta", shape, self.beta_initializer,
                                     regularizer=self.beta_regularizer))
        return s

    def forward(self, x, p, ctx):
        s = self._in_shape
        axes = self._axes(s)
        contiguous_last = axes == list(range(len(s) - len(axes) + 1, len(s) + 1))
        if FUSED_LAYER_NORM and contiguous_last and self.scale and self.center:
            return f"layer_norm({x}, {p['gamma']}, {p['beta']}, {self.epsilon!r})"
        xv = ctx.define("ln_x", x)
        ax = _list(axes)
        centered = ctx.define("ln_c", f"{xv} - mean({xv}, axis={ax}, keepdims=true)")
        y = (f"{centered} / sqrt(mean({centered} * {centered}, axis={ax}, keepdims=true) + "
             f"{self.epsilon!r})")
        # gamma and beta broadcast along the normalized axes
        bshape = [s[a - 1] if a in axes else 1 for a in range(1, len(s) + 1)]
        def shaped(v):
            return v if contiguous_last else f"reshape({v}, {_list(bshape)})"
        if self.scale:
            y = f"({y}) * {shaped(p['gamma'])}"
        if self.center:
            y = f"({y}) + {shaped(p['beta'])}"
        return y


class RMSNormalization(Layer):
    """Keras's RMSNormalization: x / sqrt(mean(x², axis) + epsilon) * scale, the
    trained ``scale`` (ones) shaped like the normalized axes (the last ones)."""

    kind = "RMSNormalization"
    supports_masking = True

    def __init__(self, axis=-1, epsilon=1e-6, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        if not axes or any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
            raise ValueError(f"[RMSNormalization] axis must be an int or a list of ints, got "
                             f"{axis!r}")
        self.axis = sorted(axes) if isinstance(axis, (list, tuple)) else axis
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or epsilon < 0:
            raise ValueError(f"[RMSNormalization] epsilon must be a number >= 0, got "
                             f"{epsilon!r}")
        self.epsilon = float(epsilon)

    def _axes(self, s):
        rank = len(s) + 1
        axes = sorted({a + rank if a < 0 else a for a in (
            self.axis if isinstance(self.axis, list) else [self.axis])})
        if any(not 1 <= a < rank for a in axes):
            raise ValueError(f"[RMSNormalization] axis {self.axis} is out of range for inputs "
                             f"of rank {rank} (the batch axis 0 cannot be normalized)")
        if axes != list(range(rank - len(axes), rank)):
            raise ValueError(f"[RMSNormalization] axis {self.axis} must be the last axes of the "
                             f"input (rank {rank}): the scale broadcasts over them, as in Keras")
        return axes

    def compute_output_shape(self, s):
        shape = tuple(s[a - 1] for a in self._axes(s))
        self.params = [Param("scale", shape, "ones")]
        return s

    def forward(self, x, p, ctx):
        xv = ctx.define("rms_x", x)
        ax = _list(self._axes(self._in_shape))
        return (f"{xv} / sqrt(mean({xv} * {xv}, axis={ax}, keepdims=true) + "
                f"{self.epsilon!r}) * {p['scale']}")


class BatchNormalization(Layer):
    """Normalizes each channel (last axis): batch statistics in training, the
    moving averages in inference, like keras.layers.BatchNormalization. With
    trainable=False it runs in inference mode (Keras 3's rule)."""

    kind = "BatchNormalization"
    constraint_arguments = {"beta_constraint": "beta", "gamma_constraint": "gamma"}
    supports_masking = True  # passes its input's mask on (functional.py)

    def __init__(self, axis=-1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True, beta_initializer="zeros",
                 gamma_initializer="ones", moving_mean_initializer="zeros",
                 moving_variance_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if axis not in (-1,):
            raise ValueError(f"[BatchNormalization] only axis=-1 (channels last) is supported, "
                             f"got {axis!r}")
        if isinstance(momentum, bool) or not 0.0 <= momentum <= 1.0:
            raise ValueError(f"[BatchNormalization] momentum must be in [0, 1], got {momentum!r}")
        if not epsilon > 0:
            raise ValueError(f"[BatchNormalization] epsilon must be positive, got {epsilon!r}")
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        k = self.kind
        self.beta_initializer = _initializer(beta_initializer, k, "beta_initializer")
        self.gamma_initializer = _initializer(gamma_initializer, k, "gamma_initializer")
        self.moving_mean_initializer = _initializer(moving_mean_initializer, k,
                                                    "moving_mean_initializer")
        self.moving_variance_initializer = _initializer(moving_variance_initializer, k,
                                                        "moving_variance_initializer")
        self.beta_regularizer = _regularizer(beta_regularizer, k, "beta_regularizer")
        self.gamma_regularizer = _regularizer(gamma_regularizer, k, "gamma_regularizer")

    def compute_output_shape(self, s):
        c = s[-1]
        self.params = [Param("gamma", (c,), self.gamma_initializer, trainable=self.scale,
                             regularizer=self.gamma_regularizer),
                       Param("beta", (c,), self.beta_initializer, trainable=self.center,
                             regularizer=self.beta_regularizer),
                       Param("moving_mean", (c,), self.moving_mean_initializer, trainable=False),
                       Param("moving_variance", (c,), self.moving_variance_initializer,
                             trainable=False)]
        return s

    def forward(self, x, p, ctx):
        training = ctx.training if self.trainable else "false"
        stats = "nil"
        if training != "false":
            # The batch statistics, computed once for the normalization, its
            # backward and the moving averages (ctx.stats).
            stats = ctx.define("bn_stats", f"batch_norm_stats({x})")
            ctx.stats.append((self, stats))
        # A relu that alone reads the output runs in the same pass (fuse_relu),
        # after the residual of an Add between them (ctx.residual).
        op = "batch_norm_relu" if getattr(ctx, "fuse_relu", False) else "batch_norm"
        residual = getattr(ctx, "residual", None) if op == "batch_norm_relu" else None
        if residual is not None:
            op, x = "batch_norm_add_relu", f"{x}, {residual}"
        return (f"{op}({x}, {p['gamma']}, {p['beta']}, {p['moving_mean']}, "
                f"{p['moving_variance']}, epsilon={self.epsilon!r}, training={training}, "
                f"stats={stats})")
