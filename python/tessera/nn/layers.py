"""Layers of tessera.nn: each knows its parameters and writes its forward
computation as an expression of tessera's language. Layouts are Keras's:
channels last, kernels (kernel_size..., in_channels, filters), Dense weights
(in, out)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from .. import _core

__all__ = [
    "Layer", "Dense", "Conv1D", "Conv2D", "MaxPool1D", "MaxPool2D", "AvgPool1D", "AvgPool2D",
    "MaxPooling1D", "MaxPooling2D", "AveragePooling1D", "AveragePooling2D", "Dropout", "Flatten",
    "BatchNormalization", "Activation",
]

ACTIVATIONS = {
    None: None, "linear": None, "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh",
    "softmax": "softmax", "log_softmax": "log_softmax", "elu": "elu", "gelu": "gelu",
    "leaky_relu": "leaky_relu", "softplus": "softplus",
}


def _activation(name, where: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"[{where}] unknown activation {name!r}; expected one of "
                         f"{sorted(k for k in ACTIVATIONS if k)}")
    return ACTIVATIONS[name]


def _apply(activation: Optional[str], expr: str) -> str:
    return f"{activation}({expr})" if activation else expr


def _pair(v, name: str, where: str) -> Tuple[int, int]:
    if isinstance(v, int):
        v = (v, v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(i, int) and i > 0 for i in v):
        raise ValueError(f"[{where}] {name} must be a positive int or a pair of them, got {v!r}")
    return v


def _positive(v, name: str, where: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"[{where}] {name} must be a positive int, got {v!r}")
    return v


def _padding(p, where: str, allowed=("valid", "same")) -> str:
    if p not in allowed:
        raise ValueError(f"[{where}] padding must be one of {list(allowed)}, got {p!r}")
    return p


def _conv_length(n: int, k: int, stride: int, dilation: int, padding: str) -> int:
    if padding in ("same",):
        return -(-n // stride)
    if padding == "causal":
        return (n - 1) // stride + 1
    span = dilation * (k - 1) + 1
    return (n - span) // stride + 1 if n >= span else 0


@dataclass
class Param:
    """A parameter (or, when not trainable, a state) of a layer."""

    name: str
    shape: Tuple[int, ...]
    init: str  # "glorot_uniform", "zeros", "ones"
    fan_in: int = 0
    fan_out: int = 0
    trainable: bool = True


class Context:
    """What a layer's forward code may refer to: the `training` flag and the
    dropout `seed` expressions, and the layer's index."""

    def __init__(self, training: str, seed: str, index: int):
        self.training = training
        self.seed = seed
        self.index = index
        self.stats: list = []  # expressions of batch statistics (batch norm), for the fit loop


class Layer:
    """A layer: `build` fixes its parameters from the input shape (without the
    batch axis) and returns the output shape; `forward` returns the statements
    and the expression of its output."""

    kind = "Layer"

    def __init__(self, name: Optional[str] = None, input_shape=None):
        self.name = name
        # Keras's input_shape= on a model's first layer (the per-sample shape,
        # without the batch axis): the model is built with it.
        self.declared_input_shape: Optional[tuple] = None
        if input_shape is not None:
            try:
                shape = tuple(int(d) for d in input_shape)
            except TypeError:
                raise TypeError(f"[{self.kind}] input_shape must be a tuple of ints (the shape of "
                                f"one sample), got {input_shape!r}") from None
            if not shape or any(d <= 0 for d in shape):
                raise ValueError(f"[{self.kind}] input_shape must be a non-empty tuple of "
                                 f"positive ints, got {input_shape!r}")
            self.declared_input_shape = shape
        self.params: list = []
        self.input_shape: Optional[tuple] = None
        self.output_shape: Optional[tuple] = None

    def build(self, input_shape: tuple) -> tuple:
        self.input_shape = tuple(input_shape)
        self.output_shape = self.compute_output_shape(self.input_shape)
        return self.output_shape

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return input_shape

    def forward(self, x: str, p: dict, ctx: Context) -> str:
        raise NotImplementedError

    def count_params(self) -> int:
        return sum(math.prod(q.shape) for q in self.params)

    def _need_rank(self, shape: tuple, rank: int, what: str):
        if len(shape) != rank:
            raise ValueError(
                f"[{self.kind}] expects inputs of shape (batch, {what}), got per-sample shape "
                f"{shape} (rank {len(shape) + 1} with the batch)")


class Dense(Layer):
    """Fully connected: activation(x @ kernel + bias)."""

    kind = "Dense"

    def __init__(self, units: int, activation=None, use_bias: bool = True, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.units = _positive(units, "units", "Dense")
        self.activation = _activation(activation, "Dense")
        self.use_bias = use_bias

    def compute_output_shape(self, s):
        if len(s) < 1:
            raise ValueError(f"[Dense] expects inputs with a feature axis, got per-sample shape {s}")
        self.params = [Param("kernel", (s[-1], self.units), "glorot_uniform", s[-1], self.units)]
        if self.use_bias:
            self.params.append(Param("bias", (self.units,), "zeros"))
        return s[:-1] + (self.units,)

    def forward(self, x, p, ctx):
        y = f"({x} @ {p['kernel']})"
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        return _apply(self.activation, y)


class _Conv(Layer):
    rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", dilation_rate=1,
                 activation=None, use_bias=True, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.filters = _positive(filters, "filters", self.kind)
        if self.rank == 1:
            self.kernel_size = (_positive(kernel_size if isinstance(kernel_size, int)
                                          else tuple(kernel_size)[0], "kernel_size", self.kind),)
            self.strides = (_positive(strides if isinstance(strides, int) else tuple(strides)[0],
                                      "strides", self.kind),)
            self.dilation = (_positive(dilation_rate if isinstance(dilation_rate, int)
                                       else tuple(dilation_rate)[0], "dilation_rate", self.kind),)
            self.padding = _padding(padding, self.kind, ("valid", "same", "causal"))
        else:
            self.kernel_size = _pair(kernel_size, "kernel_size", self.kind)
            self.strides = _pair(strides, "strides", self.kind)
            self.dilation = _pair(dilation_rate, "dilation_rate", self.kind)
            self.padding = _padding(padding, self.kind)
        self.activation = _activation(activation, self.kind)
        self.use_bias = use_bias

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        cin = s[-1]
        spatial = tuple(_conv_length(n, k, st, d, self.padding) for n, k, st, d in
                        zip(s[:-1], self.kernel_size, self.strides, self.dilation))
        if any(n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] kernel {self.kernel_size} with dilation "
                             f"{self.dilation} does not fit the input {s} with padding "
                             f"'{self.padding}'")
        ks = math.prod(self.kernel_size)
        self.params = [Param("kernel", self.kernel_size + (cin, self.filters), "glorot_uniform",
                             ks * cin, ks * self.filters)]
        if self.use_bias:
            self.params.append(Param("bias", (self.filters,), "zeros"))
        return spatial + (self.filters,)

    def forward(self, x, p, ctx):
        if self.rank == 1:
            conv = (f"conv1d({x}, {p['kernel']}, stride={self.strides[0]}, "
                    f"padding=\"{self.padding}\", dilation={self.dilation[0]})")
        else:
            conv = (f"conv2d({x}, {p['kernel']}, strides=[{self.strides[0]}, {self.strides[1]}], "
                    f"padding=\"{self.padding}\", dilation=[{self.dilation[0]}, "
                    f"{self.dilation[1]}])")
        if self.use_bias:
            conv = f"bias_add({conv}, {p['bias']})"
        return _apply(self.activation, conv)


class Conv1D(_Conv):
    """1-d convolution over (batch, steps, channels), like keras.layers.Conv1D."""

    kind = "Conv1D"
    rank = 1


class Conv2D(_Conv):
    """2-d convolution over (batch, height, width, channels), like keras.layers.Conv2D."""

    kind = "Conv2D"
    rank = 2


class _Pool(Layer):
    rank = 1
    op = "max"

    def __init__(self, pool_size=2, strides=None, padding="valid", name=None, input_shape=None):
        super().__init__(name, input_shape)
        if self.rank == 1:
            self.pool = (_positive(pool_size, "pool_size", self.kind),)
            self.strides = self.pool if strides is None else (
                _positive(strides, "strides", self.kind),)
        else:
            self.pool = _pair(pool_size, "pool_size", self.kind)
            self.strides = self.pool if strides is None else _pair(strides, "strides", self.kind)
        self.padding = _padding(padding, self.kind)

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        spatial = tuple(_conv_length(n, k, st, 1, self.padding)
                        for n, k, st in zip(s[:-1], self.pool, self.strides))
        if any(n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] pool {self.pool} does not fit the input {s}")
        return spatial + (s[-1],)

    def forward(self, x, p, ctx):
        fn = f"{self.op}_pool{self.rank}d"
        if self.rank == 1:
            return (f"{fn}({x}, pool_size={self.pool[0]}, strides={self.strides[0]}, "
                    f"padding=\"{self.padding}\")")
        return (f"{fn}({x}, pool_size=[{self.pool[0]}, {self.pool[1]}], "
                f"strides=[{self.strides[0]}, {self.strides[1]}], padding=\"{self.padding}\")")


class MaxPool1D(_Pool):
    """Max pooling over steps, like keras.layers.MaxPool1D."""

    kind, rank, op = "MaxPool1D", 1, "max"


class AvgPool1D(_Pool):
    """Average pooling over steps, like keras.layers.AvgPool1D."""

    kind, rank, op = "AvgPool1D", 1, "avg"


class MaxPool2D(_Pool):
    """Max pooling over height and width, like keras.layers.MaxPool2D."""

    kind, rank, op = "MaxPool2D", 2, "max"


class AvgPool2D(_Pool):
    """Average pooling over height and width, like keras.layers.AvgPool2D."""

    kind, rank, op = "AvgPool2D", 2, "avg"


MaxPooling1D, AveragePooling1D = MaxPool1D, AvgPool1D
MaxPooling2D, AveragePooling2D = MaxPool2D, AvgPool2D


class Dropout(Layer):
    """Inverted dropout in training, identity otherwise. The mask is drawn
    from tessera's counter-based generator, keyed by the training step's seed
    and the layer, so runs are reproducible."""

    kind = "Dropout"

    def __init__(self, rate: float, name=None, input_shape=None):
        super().__init__(name, input_shape)
        if not (isinstance(rate, (int, float)) and 0.0 <= rate < 1.0):
            raise ValueError(f"[Dropout] rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)

    def forward(self, x, p, ctx):
        return f"dropout({x}, {self.rate!r}, {ctx.seed} * 64 + {ctx.index}, {ctx.training})"


class Flatten(Layer):
    """Keeps the batch axis and flattens the rest."""

    kind = "Flatten"

    def compute_output_shape(self, s):
        return (math.prod(s),)

    def forward(self, x, p, ctx):
        return f"batch_flatten({x})"


class Activation(Layer):
    """An activation function as a layer."""

    kind = "Activation"

    def __init__(self, activation, name=None, input_shape=None):
        super().__init__(name, input_shape)
        self.activation = _activation(activation, "Activation")

    def forward(self, x, p, ctx):
        return _apply(self.activation, x)


class BatchNormalization(Layer):
    """Normalizes each channel (last axis): batch statistics in training, the
    moving averages in inference, like keras.layers.BatchNormalization."""

    kind = "BatchNormalization"

    def __init__(self, momentum: float = 0.99, epsilon: float = 1e-3, name=None, input_shape=None):
        super().__init__(name, input_shape)
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"[BatchNormalization] momentum must be in [0, 1], got {momentum!r}")
        if not epsilon > 0:
            raise ValueError(f"[BatchNormalization] epsilon must be positive, got {epsilon!r}")
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)

    def compute_output_shape(self, s):
        c = s[-1]
        self.params = [Param("gamma", (c,), "ones"), Param("beta", (c,), "zeros"),
                       Param("moving_mean", (c,), "zeros", trainable=False),
                       Param("moving_variance", (c,), "ones", trainable=False)]
        return s

    def forward(self, x, p, ctx):
        ctx.stats.append((self, x))
        return (f"batch_norm({x}, {p['gamma']}, {p['beta']}, {p['moving_mean']}, "
                f"{p['moving_variance']}, epsilon={self.epsilon!r}, training={ctx.training})")


def initial_value(param: Param, seed: int, dtype: str = "float32"):
    """The starting value of a parameter, made by tessera's seeded generators."""
    shape = list(param.shape)
    if param.init == "zeros":
        return _core.call_primitive("zeros", [shape], {"dtype": dtype})
    if param.init == "ones":
        return _core.call_primitive("ones", [shape], {"dtype": dtype})
    limit = math.sqrt(6.0 / max(1, param.fan_in + param.fan_out))
    return _core.call_primitive("random_uniform", [shape],
                                {"low": -limit, "high": limit, "seed": seed, "dtype": dtype})
