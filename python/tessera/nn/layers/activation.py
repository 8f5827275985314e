"""Activation layers, like Keras's: ReLU (max_value, negative_slope,
threshold), Softmax (axis, mask), LeakyReLU, PReLU (a learned slope per
unit, shared_axes) and ELU."""

from __future__ import annotations

from ..symbolic import KerasTensor
from .base import Layer, Param, _initializer, _list, _regularizer

__all__ = ["ReLU", "Softmax", "LeakyReLU", "PReLU", "ELU"]


def _number(v, name: str, where: str, allow_none=False, minimum=0.0) -> float:
    """A float argument >= minimum (Keras's checks), or None when allowed."""
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= minimum:
        raise ValueError(f"[{where}] {name} must be a number >= {minimum}, got {v!r}")
    return float(v)


class ReLU(Layer):
    """keras.layers.ReLU: x for threshold < x (clipped at max_value), else
    negative_slope * (x - threshold)."""

    kind = "ReLU"
    supports_masking = True

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.max_value = _number(max_value, "max_value", "ReLU", allow_none=True)
        self.negative_slope = _number(negative_slope, "negative_slope", "ReLU")
        self.threshold = _number(threshold, "threshold", "ReLU")

    def forward(self, x, p, ctx):
        slope, top, t = self.negative_slope, self.max_value, self.threshold
        if slope and top is None and not t:
            return f"leaky_relu({x}, alpha={slope!r})"
        if slope or t:
            x = ctx.define("relu_x", x)
        # Keras's relu: the positive part, clipped, less the slope's part
        if t:
            y = f"where(greater({x}, {t!r}), {x}, zeros_like({x}))"
        else:
            y = f"relu({x})"
        if top is not None:
            y = f"minimum({y}, {top!r})"
        if slope:
            neg = f"relu({t!r} - {x})" if t else f"relu(-({x}))"
            y = f"({y}) - {slope!r} * {neg}"
        return y


class LeakyReLU(Layer):
    """keras.layers.LeakyReLU: x for x > 0, else negative_slope * x (0.3)."""

    kind = "LeakyReLU"
    supports_masking = True

    def __init__(self, negative_slope=0.3, name=None, input_shape=None, **kwargs):
        if "alpha" in kwargs:  # Keras's deprecated name
            negative_slope = kwargs.pop("alpha")
        super().__init__(name, input_shape, **kwargs)
        self.negative_slope = _number(negative_slope, "negative_slope", "LeakyReLU")

    def forward(self, x, p, ctx):
        return f"leaky_relu({x}, alpha={self.negative_slope!r})"


class ELU(Layer):
    """keras.layers.ELU: x for x > 0, else alpha * (exp(x) - 1)."""

    kind = "ELU"
    supports_masking = True

    def __init__(self, alpha=1.0, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise ValueError(f"[ELU] alpha must be a number, got {alpha!r}")
        self.alpha = float(alpha)

    def forward(self, x, p, ctx):
        return f"elu({x}, alpha={self.alpha!r})"


class Softmax(Layer):
    """keras.layers.Softmax over `axis` (an int or several axes, counting
    the batch axis); a `mask` (1 = keep, broadcast against the input) sets
    the masked logits to -1e9 and their outputs to 0."""

    kind = "Softmax"
    supports_masking = True
    mask_input = True

    def __init__(self, axis=-1, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        if not axes or not all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
            raise ValueError(f"[Softmax] axis must be an int or a list of ints, got {axis!r}")
        self.axis = axis

    def split_call(self, inputs, mask=None, training=None):
        """The input and the mask (checked: it must broadcast against the
        input, Keras's rule)."""
        for what, t in (("input", inputs), ("mask", mask)):
            if t is not None and not isinstance(t, KerasTensor):
                raise TypeError(f"[Softmax] layer {self.name!r}: the {what} must be a symbolic "
                                f"tensor, got {type(t).__name__}")
        static = {} if training is None else {"training": bool(training)}
        if mask is not None:
            if len(mask.shape) > len(inputs.shape) or any(
                    m is not None and i is not None and m not in (1, i)
                    for m, i in zip(mask.shape[::-1], inputs.shape[::-1])):
                raise ValueError(f"[Softmax] layer {self.name!r}: the mask {mask.shape} does not "
                                 f"broadcast against the input {inputs.shape} (each of its axes "
                                 "must be 1 or the input's)")
            static["mask"] = mask
        return [inputs], static

    def compute_output_shape(self, s):
        rank = len(s) + 1
        axes = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(f"[Softmax] axis {a} is out of range for inputs of rank {rank}")
        return s

    def forward(self, x, p, ctx, mask=None):
        keep = None
        if mask is not None:
            # Keras: a bool mask as is, another kept where > 0.5
            x = ctx.define("sm_in", x)
            keep = ctx.define("sm_keep", f"greater(astype({mask}, dtype_name({x})), 0.5)")
            x = ctx.define("sm_x", f"where({keep}, {x}, astype(-1e9, dtype_name({x})))")
        axes = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        if len(axes) > 1:
            x = ctx.define("sm_x", x)
            y = f"exp({x} - logsumexp({x}, axis={_list(axes)}, keepdims=true))"
        else:
            y = f"softmax({x}, axis={axes[0]})"
        if keep is not None:
            y = f"where({keep}, {y}, zeros_like({x}))"
        return y


class PReLU(Layer):
    """keras.layers.PReLU: relu(x) - alpha * relu(-x), with a learned alpha
    per unit (one per axis in shared_axes, counted from 1, for all its
    positions)."""

    kind = "PReLU"
    supports_masking = True

    def __init__(self, alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.set_constraint("alpha", alpha_constraint, "alpha_constraint")
        self.alpha_initializer = _initializer(alpha_initializer, "PReLU", "alpha_initializer")
        self.alpha_regularizer = _regularizer(alpha_regularizer, "PReLU", "alpha_regularizer")
        if shared_axes is None:
            self.shared_axes = None
        else:
            axes = list(shared_axes) if isinstance(shared_axes, (list, tuple)) else [shared_axes]
            if not all(isinstance(a, int) and not isinstance(a, bool) and a >= 1 for a in axes):
                raise ValueError(f"[PReLU] shared_axes must hold axes >= 1 (0 is the batch), got "
                                 f"{shared_axes!r}")
            self.shared_axes = axes

    def compute_output_shape(self, s):
        shape = list(s)
        for a in self.shared_axes or []:
            if a > len(s):
                raise ValueError(f"[PReLU] shared_axes {self.shared_axes} holds axis {a}, past "
                                 f"the input's rank {len(s) + 1}")
            shape[a - 1] = 1
        self.params = [Param("alpha", tuple(shape), self.alpha_initializer,
                             regularizer=self.alpha_regularizer)]
        return s

    def forward(self, x, p, ctx):
        x = ctx.define("prelu_x", x)
        return f"relu({x}) - {p['alpha']} * relu(-({x}))"
