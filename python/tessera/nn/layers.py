"""Layers of tessera.nn: each knows its parameters and writes its forward
computation as an expression of tessera's language. Layouts are Keras's:
channels last, kernels (kernel_size..., in_channels, filters), Dense weights
(in, out)."""

from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass
from typing import Optional, Tuple

from .data_format import ChannelsFirst

__all__ = [
    "Layer", "Dense", "Conv1D", "Conv2D", "MaxPool1D", "MaxPool2D", "AvgPool1D", "AvgPool2D",
    "MaxPooling1D", "MaxPooling2D", "AveragePooling1D", "AveragePooling2D", "Dropout", "Flatten",
    "BatchNormalization", "Activation",
]

# Activations by Keras's names: the language's text of each, in {x}.
ACTIVATIONS = {
    None: None, "linear": None, "relu": "relu({x})", "sigmoid": "sigmoid({x})",
    "tanh": "tanh({x})", "softmax": "softmax({x})", "log_softmax": "log_softmax({x})",
    "elu": "elu({x})", "gelu": "gelu({x})", "leaky_relu": "leaky_relu({x})",
    "softplus": "softplus({x})", "silu": "{x} * sigmoid({x})", "swish": "{x} * sigmoid({x})",
    "relu6": "minimum(relu({x}), 6.0)", "exponential": "exp({x})",
    "selu": "1.0507009873554805 * elu({x}, alpha=1.6732632423543772)",
    "hard_sigmoid": "minimum(relu({x} + 3.0), 6.0) / 6.0",
    "hard_silu": "{x} * (minimum(relu({x} + 3.0), 6.0) / 6.0)",
    "hard_swish": "{x} * (minimum(relu({x} + 3.0), 6.0) / 6.0)",
    "mish": "{x} * tanh(softplus({x}))", "softsign": "{x} / (1.0 + abs({x}))",
}


def _activation(name, where: str):
    """An activation: a name (checked) or a function of a symbolic tensor."""
    if callable(name) and not isinstance(name, str):
        return name
    if name not in ACTIVATIONS:
        import difflib  # noqa: PLC0415

        names = sorted(k for k in ACTIVATIONS if k)
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"[{where}] unknown activation {name!r}{hint} Known: {names}")
    return None if ACTIVATIONS[name] is None else name


def _apply(activation, expr: str, ctx=None, shape=None) -> str:
    """The text of activation(expr); a function activation is traced."""
    if activation is None:
        return expr
    if callable(activation):
        from .functional import apply_function  # noqa: PLC0415

        return apply_function(activation, [expr], [shape], ctx)
    template = ACTIVATIONS[activation]
    if template.count("{x}") > 1 and ctx is not None:
        expr = ctx.define("act", expr)
    return template.format(x=expr)


def _initializer(v, where: str, name: str):
    """Checks an initializer argument (a name or an initializer object)."""
    from . import initializers  # noqa: PLC0415

    try:
        return initializers.get(v)
    except (ValueError, TypeError) as e:
        raise type(e)(f"[{where}] {name}: {e}") from None


def _regularizer(v, where: str, name: str):
    if v is None:
        return None
    from . import regularizers  # noqa: PLC0415

    try:
        return regularizers.get(v)
    except (ValueError, TypeError) as e:
        raise type(e)(f"[{where}] {name}: {e}") from None


def _pair(v, name: str, where: str) -> Tuple[int, int]:
    if isinstance(v, int):
        v = (v, v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(i, int) and i > 0 for i in v):
        raise ValueError(f"[{where}] {name} must be a positive int or a pair of them, got {v!r}")
    return v


def _data_format(v, where: str) -> str:
    """Keras's data_format: None (channels_last, Keras's default), "channels_last" or
    "channels_first"."""
    if v is None:
        return "channels_last"
    if v not in ("channels_last", "channels_first"):
        raise ValueError(f"[{where}] data_format must be 'channels_last' or 'channels_first', "
                         f"got {v!r}")
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
    if n is None:  # an axis of variable length (Input(shape=(None, ...)))
        return None
    if padding in ("same",):
        return -(-n // stride)
    if padding == "causal":
        return (n - 1) // stride + 1
    span = dilation * (k - 1) + 1
    return (n - span) // stride + 1 if n >= span else 0


@dataclass
class Param:
    """A parameter (or, when not trainable, a state) of a layer. `init` is an
    initializer: a name ("glorot_uniform", "zeros", ...) or an object of
    tessera.nn.initializers."""

    name: str
    shape: Tuple[int, ...]
    init: object  # "glorot_uniform", "zeros", "ones", or an initializer
    fan_in: int = 0
    fan_out: int = 0
    trainable: bool = True
    regularizer: object = None


class Context:
    """What a layer's forward code may refer to: the `training` flag and the
    dropout `seed` expressions, the call's index (unique in the model), and a
    way to write statements before the layer's expression (`emit`, with fresh
    temporary names from `fresh`)."""

    def __init__(self, training: str, seed: str, index: int, emit=None, fresh=None, param=None,
                 layer_code=None):
        self.training = training
        self.seed = seed
        self.index = index
        self.stats: list = []  # (layer, variable of its batch statistics): batch norm, for fit
        self.fuse_relu = False  # the layer's output goes only to a relu, which it may apply
        # With fuse_relu: an expression the layer adds before the relu (the
        # other input of the Add between the layer and the relu), or None.
        self.residual = None
        self._emit = emit
        self._fresh = fresh
        self.param = param  # (layer, param name) -> variable, for layers calling layers
        self.layer_code = layer_code

    @property
    def is_training(self) -> bool:
        return self.training == "true"

    def emit(self, statement: str):
        """Adds `define(...)` (or any expression) before the layer's result."""
        self._emit(statement)

    def fresh(self, tag: str) -> str:
        """A variable name no other code of the model uses."""
        return self._fresh(tag)

    def define(self, tag: str, expr: str) -> str:
        """Defines a fresh variable as `expr` and returns its name."""
        name = self.fresh(tag)
        self.emit(f"define({name}, {expr})")
        return name


_name_counts: dict = {}


def _snake(name: str) -> str:
    """Keras's snake_case of a class name: Conv2D -> conv2d, MaxPooling2D -> max_pooling2d."""
    import re  # noqa: PLC0415

    name = name.lstrip("_") or "layer"
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _auto_name(kind: str) -> str:
    base = _snake(kind)
    n = _name_counts.get(base, 0)
    _name_counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


# Keras keyword arguments and what a user should pass instead, for the ones
# tessera does not take.
_KERAS_ALTERNATIVES = {
    "kernel_constraint": "constraints are not supported; clip the weights in a callback",
    "bias_constraint": "constraints are not supported",
    "activity_regularizer": "use kernel_regularizer, or add the penalty to a custom loss",
    "autocast": "tessera computes in the model's dtype",
    "input_length": "give Input(shape=(length,)) or input_shape=(length,)",
}



def _first_call_parameter(layer):
    """The name of the first parameter of a layer's call (None if it has none)."""
    import inspect  # noqa: PLC0415

    try:
        params = list(inspect.signature(type(layer).call).parameters.values())[1:]
    except (TypeError, ValueError, AttributeError):
        return None
    if params and params[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                     inspect.Parameter.POSITIONAL_OR_KEYWORD):
        return params[0].name
    return None

class Layer:
    """A layer. Built-in layers implement `compute_output_shape` (per-sample
    shapes, without the batch axis; it also declares the parameters) and
    `forward` (the language's text of the output). A user's layer subclasses
    Layer as in Keras: `build(input_shape)` creates weights with `add_weight`,
    and `call(inputs)` computes with NumPy functions and operators on them
    (it is traced when the model is built: see docs/nn.md "Writing layers")."""

    kind = "Layer"

    def __new__(cls, *args, **kwargs):
        if kwargs:
            _check_keywords(cls, kwargs)
        obj = super().__new__(cls)
        obj._init_args = (args, kwargs)  # for get_config (model.save)
        return obj

    def __init__(self, name: Optional[str] = None, input_shape=None, trainable: bool = True,
                 dtype=None, input_dim=None, batch_input_shape=None, **kwargs):
        if kwargs:
            self._unknown_arguments(kwargs)
        if type(self).kind == "Layer" and type(self) is not Layer:
            self.kind = type(self).__name__
        self.name = name if name is not None else _auto_name(self.kind)
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"[{self.kind}] name must be a non-empty string, got {name!r}")
        if input_shape is None and batch_input_shape is not None:
            input_shape = tuple(batch_input_shape)[1:]
        if input_shape is None and input_dim is not None:
            input_shape = (input_dim,)
        # Keras's input_shape= on a model's first layer (the per-sample shape,
        # without the batch axis): the model is built with it.
        self.declared_input_shape: Optional[tuple] = None
        if input_shape is not None:
            if isinstance(input_shape, int):
                raise TypeError(f"[{self.kind}] input_shape must be a tuple of ints (the shape "
                                f"of one sample), got {input_shape!r}; write ({input_shape},)")
            try:
                shape = tuple(None if d is None else int(d) for d in input_shape)
            except TypeError:
                raise TypeError(f"[{self.kind}] input_shape must be a tuple of ints (the shape of "
                                f"one sample), got {input_shape!r}") from None
            if not shape or any(d is not None and d <= 0 for d in shape):
                raise ValueError(f"[{self.kind}] input_shape must be a non-empty tuple of "
                                 f"positive ints, got {input_shape!r}")
            self.declared_input_shape = shape
        self.trainable = bool(trainable)
        self.dtype = dtype
        self.params: list = []
        # One sample's input and output shapes (no batch axis; a list for
        # several inputs or outputs), once the layer was called or built.
        self._in_shape: Optional[tuple] = None
        self._out_shape: Optional[tuple] = None
        self.built = False
        self._values: dict = {}  # parameter name -> array, once created
        self._symbols: dict = {}  # parameter name -> symbolic tensor (add_weight)

    def _unknown_arguments(self, kwargs):
        _check_keywords(type(self), kwargs, strict=True)

    # ---------------------------------------------------------------- shapes
    @property
    def input_shape(self):
        """The input's shape with the batch axis first (None), as Keras gives
        it (a list of shapes for several inputs). AttributeError until the
        layer has been called or built."""
        if self._in_shape is None:
            raise AttributeError(f"[{self.kind}] layer {self.name!r} has never been called "
                                 "and thus has no defined input shape")
        return _with_batch(self._in_shape)

    @property
    def output_shape(self):
        """The output's shape with the batch axis first (None), as Keras gives
        it (a list of shapes for several outputs)."""
        if self._out_shape is None:
            raise AttributeError(f"[{self.kind}] layer {self.name!r} has never been called "
                                 "and thus has no defined output shape")
        return _with_batch(self._out_shape)

    def compute_output_shape(self, input_shape):
        if self._is_custom():
            raise NotImplementedError
        return input_shape

    def forward(self, x, p: dict, ctx: Context, **kwargs):
        if self._is_custom():
            return _custom_forward(self, x, p, ctx, kwargs)
        raise NotImplementedError

    def _is_custom(self) -> bool:
        """A user's layer: it defines call (and is written in NumPy style)."""
        return type(self).call is not Layer.call

    def call(self, *args, **kwargs):
        raise NotImplementedError(f"[{self.kind}] a Layer subclass must define call(self, inputs)")

    def build(self, input_shape):
        """Creates the weights for `input_shape` (with the batch axis, None).
        A user's layer overrides it and calls add_weight; built-in layers
        declare theirs in compute_output_shape."""

    def add_weight(self, shape=None, initializer="glorot_uniform", trainable: bool = True,
                   name: Optional[str] = None, regularizer=None, dtype=None, **kwargs):
        """A weight of a user's layer, like Keras's Layer.add_weight: returns
        its Variable (the same object `weights` lists), which call() uses as
        the weight the program reads and trains."""
        for k in kwargs:
            if k not in ("constraint", "aggregation", "synchronization", "autocast"):
                raise TypeError(f"[{self.kind}.add_weight] unexpected keyword argument {k!r}")
        shape = () if shape is None else tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"[{self.kind}.add_weight] shape must hold non-negative ints, got "
                             f"{shape}")
        pname = name or f"weight_{len(self.params)}"
        if any(q.name == pname for q in self.params):
            pname = f"{pname}_{len(self.params)}"
        fan_in, fan_out = _fans(shape)
        if regularizer is not None:
            regularizer = _regularizer(regularizer, f"{self.kind}.add_weight", "regularizer")
        if initializer is None:
            initializer = "glorot_uniform" if dtype is None or "float" in str(dtype) else "zeros"
        _initializer(initializer, f"{self.kind}.add_weight", "initializer")  # (named errors)
        self.params.append(Param(pname, shape, initializer, fan_in, fan_out, bool(trainable),
                                 regularizer))
        return self._variable(pname, _float_dtype(dtype or self.dtype))

    add_variable = add_weight  # Keras 3's other name

    def _variable(self, pname: str, dtype=None):
        """The Variable of parameter `pname` (made once, then the same object)."""
        from .variables import Variable  # noqa: PLC0415

        v = self._symbols.get(pname)
        if v is None:
            v = Variable(dtype=dtype or _float_dtype(self.dtype), _layer=self, _param=pname)
            self._symbols[pname] = v
        return v

    def add_loss(self, loss):
        """Keras's add_loss, called in call(): `loss` (a symbolic value of the
        inputs and weights, or a number) is summed and added to the training
        loss (and evaluate's), as Keras does; `losses` lists them."""
        from .variables import add_loss_now  # noqa: PLC0415

        add_loss_now(self, loss)
        self.__dict__.setdefault("_added", []).append(loss)

    @property
    def losses(self) -> list:
        """The losses add_loss recorded when the layer was called (symbolic),
        with those of the layers it calls."""
        out = list(self.__dict__.get("_added", []))
        # Keras: then the penalties of its weights' regularizers, on their values
        out += [q.regularizer(self._values[q.name]) for q in self.params
                if q.regularizer is not None and dict.get(self._values, q.name) is not None]
        for layer in self._sublayers():
            out += layer.losses
        seen, stack = set(), list(self.__dict__.get("_outputs", None) or [])  # a model's graph
        while stack:
            t = stack.pop()
            if t.id in seen:
                continue
            seen.add(t.id)
            if t.op == "layer" and t.args[0] is not self:
                out += t.args[0].losses
            stack.extend(a for a in list(t.args) + [a for v in t.args if isinstance(v, tuple)
                                                    for a in v]
                         if hasattr(a, "op") and hasattr(a, "id"))
        return out

    def count_params(self) -> int:
        return sum(math.prod(q.shape) for q in self.params)

    def _sublayers(self) -> list:
        """The layers a user's layer keeps in its attributes (directly or in
        lists, tuples and dicts), in attribute order, as Keras tracks them."""
        if not self._is_custom() or "layers" in type(self).__dict__:
            return []
        out, seen = [], {id(self)}

        def visit(v, depth=0):
            if isinstance(v, Layer):
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
            elif isinstance(v, (list, tuple)) and depth < 2:
                for u in v:
                    visit(u, depth + 1)
            elif isinstance(v, dict) and depth < 2:
                for u in v.values():
                    visit(u, depth + 1)

        for k, v in vars(self).items():
            if not k.startswith("_"):
                visit(v)
        return out

    @property
    def weights(self) -> list:
        """The layer's Variables (Keras's layer.weights): `layer.w is
        layer.weights[0]` for a weight made by add_weight; then those of the
        layers a user's layer keeps as attributes."""
        out = [self._variable(q.name) for q in self.params]
        for layer in self._sublayers():
            out += [v for v in layer.weights if all(v is not u for u in out)]
        return out

    @property
    def trainable_weights(self) -> list:
        return [v for v in self.weights if v.trainable]

    @property
    def non_trainable_weights(self) -> list:
        return [v for v in self.weights if not v.trainable]

    @property
    def variables(self) -> list:
        return self.weights

    def get_weights(self) -> list:
        """This layer's weights as NumPy arrays (copies), in declaration order."""
        import numpy as np  # noqa: PLC0415

        return [np.array(self._values[q.name], copy=True) for q in self.params
                if q.name in self._values]

    def set_weights(self, weights):
        """Replaces this layer's weights (same count and shapes as get_weights)."""
        import numpy as np  # noqa: PLC0415

        weights = list(weights)
        if len(weights) != len(self.params):
            raise ValueError(f"[{self.kind}.set_weights] layer {self.name!r} has "
                             f"{len(self.params)} weights, got {len(weights)}")
        new = {}
        for q, w in zip(self.params, weights):
            w = np.asarray(w)
            if tuple(w.shape) != tuple(q.shape):
                raise ValueError(f"[{self.kind}.set_weights] {self.name}/{q.name} must have shape "
                                 f"{q.shape}, got {w.shape}")
            # the dtype of the value it replaces (a pending draw's, not drawn for it)
            old = value_spec(self, q.name)[1] if dict.get(self._values, q.name) is not None \
                else None
            new[q.name] = np.array(w, dtype=old if old is not None else w.dtype, copy=True)
        self._values.update(new)

    def get_config(self) -> dict:
        """The constructor arguments (for model.save), as given when the
        layer was made, with its name."""
        import inspect  # noqa: PLC0415

        args, kwargs = getattr(self, "_init_args", ((), {}))
        try:
            bound = inspect.signature(type(self).__init__).bind(self, *args, **kwargs)
        except TypeError:
            bound = None
        config = {}
        if bound is not None:
            for k, v in bound.arguments.items():
                if k == "self":
                    continue
                if k == "kwargs":
                    config.update(v)
                else:
                    config[k] = v
        config["name"] = self.name
        return config

    @classmethod
    def from_config(cls, config):
        """The layer get_config described (Keras's Layer.from_config:
        the class called with the config's arguments)."""
        if not isinstance(config, dict):
            raise TypeError(f"[{cls.__name__}.from_config] config must be a dict, got "
                            f"{type(config).__name__}")
        return cls(**config)

    def __call__(self, *args, **kwargs):
        from .functional import call_layer  # noqa: PLC0415

        if args:
            return call_layer(self, args[0], args[1:], kwargs)
        # Keras: the first argument may be given by the name call() gives it
        # (`layer(logits=x, targets=t)`), or as `inputs`.
        first = _first_call_parameter(self)
        for name in (first, "inputs"):
            if name is not None and name in kwargs:
                inputs = kwargs.pop(name)
                return call_layer(self, inputs, (), kwargs)
        raise TypeError(f"[{self.kind}] layer {self.name!r} called without its inputs (the "
                        f"first argument of call, {first or 'inputs'!r}); got only "
                        f"{sorted(kwargs)}")

    def _need_rank(self, shape: tuple, rank: int, what: str):
        if len(shape) != rank:
            raise ValueError(
                f"[{self.kind}] expects inputs of shape (batch, {what}), got per-sample shape "
                f"{shape} (rank {len(shape) + 1} with the batch)")

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


def _with_batch(shape):
    """One sample's shape (or a list of them) with Keras's batch axis, None,
    in front."""
    if isinstance(shape, list):
        return [_with_batch(s) for s in shape]
    return (None,) + tuple(shape)


def _check_keywords(cls, kwargs, strict=False):
    """Unknown keyword arguments of a layer's constructor: a TypeError naming
    the closest known one (and what to use for Keras arguments tessera lacks)."""
    import difflib  # noqa: PLC0415
    import inspect  # noqa: PLC0415

    known, open_ended = set(), False
    for c in cls.__mro__:
        if "__init__" in c.__dict__ and c is not object:
            params = inspect.signature(c.__init__).parameters
            known |= {n for n, p in params.items() if p.kind not in (p.VAR_KEYWORD,
                                                                      p.VAR_POSITIONAL)}
            if c.__module__.startswith("tessera.") is False and any(
                    p.kind == p.VAR_KEYWORD for p in params.values()):
                open_ended = True  # a user's class passing **kwargs on
    known.discard("self")
    if open_ended and not strict:
        return
    kind = getattr(cls, "kind", cls.__name__)
    if kind == "Layer":
        kind = cls.__name__
    for k in kwargs:
        if k in known:
            continue
        if k in _KERAS_ALTERNATIVES:
            raise TypeError(f"[{kind}] the Keras argument {k!r} is not supported: "
                            f"{_KERAS_ALTERNATIVES[k]}")
        close = difflib.get_close_matches(k, sorted(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TypeError(f"[{kind}] unexpected keyword argument {k!r}{hint} "
                        f"(arguments: {', '.join(sorted(known))})")


def _float_dtype(dtype) -> str:
    return "float32" if dtype is None else str(dtype)


def _fans(shape) -> Tuple[int, int]:
    """Keras's compute_fans."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _custom_forward(layer: Layer, x, p: dict, ctx: Context, kwargs: dict):
    """A user's layer: runs its call() on symbolic stand-ins of the inputs
    (with Python's True/False as `training`) and writes what it records."""
    from .functional import custom_forward  # noqa: PLC0415

    exprs = list(x) if isinstance(x, (list, tuple)) else [x]
    return custom_forward(layer, exprs, ctx, kwargs)


class Dense(Layer):
    """Fully connected: activation(x @ kernel + bias), over the last axis."""

    kind = "Dense"
    supports_masking = True  # passes its input's mask on (functional.py)

    def __init__(self, units: int, activation=None, use_bias: bool = True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        kind = self.kind  # Dense, or the tensor-parallel layers built on it
        self.units = _positive(units, "units", kind)
        self.activation = _activation(activation, kind)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _initializer(kernel_initializer, kind, "kernel_initializer")
        self.bias_initializer = _initializer(bias_initializer, kind, "bias_initializer")
        self.kernel_regularizer = _regularizer(kernel_regularizer, kind, "kernel_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, kind, "bias_regularizer")

    def compute_output_shape(self, s):
        if len(s) < 1:
            raise ValueError(f"[Dense] expects inputs with a feature axis, got per-sample shape {s}")
        self.params = [Param("kernel", (s[-1], self.units), self.kernel_initializer, s[-1],
                             self.units, regularizer=self.kernel_regularizer)]
        if self.use_bias:
            self.params.append(Param("bias", (self.units,), self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return s[:-1] + (self.units,)

    def forward(self, x, p, ctx):
        y = f"({x} @ {p['kernel']})"
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        return _apply(self.activation, y, ctx, self._out_shape)


def _ints(v, rank: int, name: str, where: str) -> tuple:
    if isinstance(v, int):
        v = (v,) * rank
    v = tuple(v)
    if len(v) != rank or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0
                                 for i in v):
        raise ValueError(f"[{where}] {name} must be a positive int or {rank} of them, got {v!r}")
    return v


def _list(v) -> str:
    return "[" + ", ".join(str(i) for i in v) + "]"


class _Conv(Layer):
    rank = 1
    transpose = False

    def __init__(self, filters, kernel_size, strides=1, padding="valid", dilation_rate=1,
                 activation=None, use_bias=True, groups=1, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 data_format=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        k = self.kind
        self.data_format = _data_format(data_format, k)
        self.filters = _positive(filters, "filters", k)
        self.kernel_size = _ints(kernel_size, self.rank, "kernel_size", k)
        self.strides = _ints(strides, self.rank, "strides", k)
        self.dilation = _ints(dilation_rate, self.rank, "dilation_rate", k)
        allowed = ("valid", "same", "causal") if self.rank == 1 and not self.transpose \
            else ("valid", "same")
        self.padding = _padding(padding, k, allowed)
        self.groups = _positive(groups, "groups", k)
        if self.filters % self.groups:
            raise ValueError(f"[{k}] filters ({self.filters}) must be divisible by groups "
                             f"({self.groups})")
        self.activation = _activation(activation, k)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _initializer(kernel_initializer, k, "kernel_initializer")
        self.bias_initializer = _initializer(bias_initializer, k, "bias_initializer")
        self.kernel_regularizer = _regularizer(kernel_regularizer, k, "kernel_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, k, "bias_regularizer")

    def _spatial(self, s):
        return tuple(_conv_length(n, k, st, d, self.padding) for n, k, st, d in
                     zip(s[:-1], self.kernel_size, self.strides, self.dilation))

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        cin = s[-1]
        if cin % self.groups:
            raise ValueError(f"[{self.kind}] the input's channels ({cin}) must be divisible by "
                             f"groups ({self.groups})")
        spatial = self._spatial(s)
        if any(n is not None and n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] kernel {self.kernel_size} with dilation "
                             f"{self.dilation} does not fit the input {s} with padding "
                             f"'{self.padding}'")
        ks = math.prod(self.kernel_size)
        self.params = [Param("kernel", self._kernel_shape(cin), self.kernel_initializer,
                             ks * cin // self.groups, ks * self.filters,
                             regularizer=self.kernel_regularizer)]
        if self.use_bias:
            self.params.append(Param("bias", (self.filters,), self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return spatial + (self.filters,)

    def _kernel_shape(self, cin):
        return self.kernel_size + (cin // self.groups, self.filters)

    def _options(self) -> str:
        g = f", groups={self.groups}" if self.groups != 1 else ""
        if self.rank == 1:
            return (f"stride={self.strides[0]}, padding=\"{self.padding}\", "
                    f"dilation={self.dilation[0]}{g}")
        return (f"strides={_list(self.strides)}, padding=\"{self.padding}\", "
                f"dilation={_list(self.dilation)}{g}")

    def _conv(self, x, kernel, ctx) -> str:
        return f"conv{self.rank}d({x}, {kernel}, {self._options()})"

    def forward(self, x, p, ctx):
        if self.use_bias and type(self)._conv is _Conv._conv and \
                self.activation in (None, "relu"):
            # The bias (and relu) applied to each chunk of the convolution's
            # output while it is in cache: one pass and one array, not three.
            op = f"conv{self.rank}d_bias" + ("_relu" if self.activation == "relu" else "")
            return f"{op}({x}, {p['kernel']}, {p['bias']}, {self._options()})"
        conv = self._conv(x, p["kernel"], ctx)
        if self.use_bias:
            conv = f"bias_add({conv}, {p['bias']})"
        return _apply(self.activation, conv, ctx, self._out_shape)


class Conv1D(ChannelsFirst, _Conv):
    """1-d convolution over (batch, steps, channels), like keras.layers.Conv1D
    (groups: the channels split into groups convolved separately)."""

    kind = "Conv1D"
    rank = 1


class Conv2D(ChannelsFirst, _Conv):
    """2-d convolution over (batch, height, width, channels), like keras.layers.Conv2D."""

    kind = "Conv2D"
    rank = 2


class _ConvTranspose(_Conv):
    """Transposed convolution (the gradient of a convolution with respect to
    its input), like keras.layers.Conv2DTranspose: kernel (k..., filters,
    in_channels); output length (n - 1) * stride + dilation * (k - 1) + 1
    ('valid') or n * stride ('same')."""

    transpose = True

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 dilation_rate=1, activation=None, use_bias=True, **kwargs):
        if output_padding is not None:
            raise ValueError(f"[{self.kind}] output_padding is not supported; leave it None")
        super().__init__(filters, kernel_size, strides, padding, dilation_rate, activation,
                         use_bias, **kwargs)

    def _spatial(self, s):
        out = []
        for n, k, st, d in zip(s[:-1], self.kernel_size, self.strides, self.dilation):
            out.append(n * st if self.padding == "same" else (n - 1) * st + d * (k - 1) + 1)
        return tuple(out)

    def _kernel_shape(self, cin):
        return self.kernel_size + (self.filters, cin)

    def _conv(self, x, kernel, ctx):
        xv = ctx.define("ct_in", x)
        shape = f"list(shape({xv})[0], {', '.join(str(n) for n in self._out_shape)})"
        return f"conv{self.rank}d_grad_input({xv}, {kernel}, {shape}, {self._options()})"


class Conv1DTranspose(ChannelsFirst, _ConvTranspose):
    """1-d transposed convolution, like keras.layers.Conv1DTranspose."""

    kind = "Conv1DTranspose"
    rank = 1


class Conv2DTranspose(ChannelsFirst, _ConvTranspose):
    """2-d transposed convolution, like keras.layers.Conv2DTranspose."""

    kind = "Conv2DTranspose"
    rank = 2


class _DepthwiseConv(Layer):
    rank = 2

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1,
                 dilation_rate=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, bias_regularizer=None, data_format=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        k = self.kind
        self.data_format = _data_format(data_format, k)
        self.kernel_size = _ints(kernel_size, self.rank, "kernel_size", k)
        self.strides = _ints(strides, self.rank, "strides", k)
        self.dilation = _ints(dilation_rate, self.rank, "dilation_rate", k)
        self.padding = _padding(padding.lower() if isinstance(padding, str) else padding, k)
        self.depth_multiplier = _positive(depth_multiplier, "depth_multiplier", k)
        self.activation = _activation(activation, k)
        self.use_bias = bool(use_bias)
        self.depthwise_initializer = _initializer(depthwise_initializer, k,
                                                  "depthwise_initializer")
        self.bias_initializer = _initializer(bias_initializer, k, "bias_initializer")
        self.depthwise_regularizer = _regularizer(depthwise_regularizer, k,
                                                  "depthwise_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, k, "bias_regularizer")

    def _depthwise_spatial(self, s):
        """The output's spatial shape; refuses a kernel that does not fit."""
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        spatial = tuple(_conv_length(n, k, st, d, self.padding) for n, k, st, d in
                        zip(s[:-1], self.kernel_size, self.strides, self.dilation))
        if any(n is not None and n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] kernel {self.kernel_size} with dilation "
                             f"{self.dilation} does not fit the input {s} with padding "
                             f"'{self.padding}'")
        return spatial

    def _depthwise_param(self, name, c):
        """The depthwise kernel (k..., channels, depth_multiplier), Keras's fans."""
        shape = self.kernel_size + (c, self.depth_multiplier)
        return Param(name, shape, self.depthwise_initializer, *_fans(shape),
                     regularizer=self.depthwise_regularizer)

    def _depthwise(self, x, kernel):
        """Each channel of x convolved with its own depth_multiplier filters."""
        c = self._in_shape[-1]
        kernel = f"reshape({kernel}, {_list(self.kernel_size + (1, c * self.depth_multiplier))})"
        if self.rank == 1:
            opts = (f"stride={self.strides[0]}, padding=\"{self.padding}\", "
                    f"dilation={self.dilation[0]}")
        else:
            opts = (f"strides={_list(self.strides)}, padding=\"{self.padding}\", "
                    f"dilation={_list(self.dilation)}")
        return f"conv{self.rank}d({x}, {kernel}, {opts}, groups={c})"

    def compute_output_shape(self, s):
        spatial = self._depthwise_spatial(s)
        c, m = s[-1], self.depth_multiplier
        self.params = [self._depthwise_param("kernel", c)]
        if self.use_bias:
            self.params.append(Param("bias", (c * m,), self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return spatial + (c * m,)

    def forward(self, x, p, ctx):
        y = self._depthwise(x, p["kernel"])
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        return _apply(self.activation, y, ctx, self._out_shape)


class DepthwiseConv1D(ChannelsFirst, _DepthwiseConv):
    """Each channel convolved with its own depth_multiplier filters, like
    keras.layers.DepthwiseConv1D (kernel (k, channels, depth_multiplier))."""

    kind = "DepthwiseConv1D"
    rank = 1


class DepthwiseConv2D(ChannelsFirst, _DepthwiseConv):
    """Each channel convolved with its own depth_multiplier filters, like
    keras.layers.DepthwiseConv2D (kernel (kh, kw, channels, depth_multiplier))."""

    kind = "DepthwiseConv2D"
    rank = 2


class _Pool(Layer):
    rank = 1
    op = "max"

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.data_format = _data_format(data_format, self.kind)
        if self.rank == 1:
            self.pool = (_positive(pool_size if isinstance(pool_size, int)
                                   else tuple(pool_size)[0], "pool_size", self.kind),)
            self.strides = self.pool if strides is None else (
                _positive(strides if isinstance(strides, int) else tuple(strides)[0],
                          "strides", self.kind),)
        else:
            self.pool = _pair(pool_size, "pool_size", self.kind)
            self.strides = self.pool if strides is None else _pair(strides, "strides", self.kind)
        self.padding = _padding(padding, self.kind)

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        spatial = tuple(_conv_length(n, k, st, 1, self.padding)
                        for n, k, st in zip(s[:-1], self.pool, self.strides))
        if any(n is not None and n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] pool {self.pool} does not fit the input {s}")
        return spatial + (s[-1],)

    def forward(self, x, p, ctx):
        fn = f"{self.op}_pool{self.rank}d"
        if self.rank == 1:
            return (f"{fn}({x}, pool_size={self.pool[0]}, strides={self.strides[0]}, "
                    f"padding=\"{self.padding}\")")
        return (f"{fn}({x}, pool_size=[{self.pool[0]}, {self.pool[1]}], "
                f"strides=[{self.strides[0]}, {self.strides[1]}], padding=\"{self.padding}\")")


class MaxPooling1D(ChannelsFirst, _Pool):
    """Max pooling over steps, like keras.layers.MaxPooling1D (MaxPool1D)."""

    kind, rank, op = "MaxPooling1D", 1, "max"


class AveragePooling1D(ChannelsFirst, _Pool):
    """Average pooling over steps, like keras.layers.AveragePooling1D (AvgPool1D)."""

    kind, rank, op = "AveragePooling1D", 1, "avg"


class MaxPooling2D(ChannelsFirst, _Pool):
    """Max pooling over height and width, like keras.layers.MaxPooling2D (MaxPool2D)."""

    kind, rank, op = "MaxPooling2D", 2, "max"


class AveragePooling2D(ChannelsFirst, _Pool):
    """Average pooling over height and width, like keras.layers.AveragePooling2D
    (AvgPool2D)."""

    kind, rank, op = "AveragePooling2D", 2, "avg"


# Keras's other names of the same classes (files naming either load)
MaxPool1D, AvgPool1D = MaxPooling1D, AveragePooling1D
MaxPool2D, AvgPool2D = MaxPooling2D, AveragePooling2D


class _GlobalPool(Layer):
    rank = 1
    op = "mean"

    def __init__(self, keepdims: bool = False, data_format=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.data_format = _data_format(data_format, self.kind)
        self.keepdims = bool(keepdims)

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        return (1,) * self.rank + (s[-1],) if self.keepdims else (s[-1],)

    def forward(self, x, p, ctx):
        axes = _list(range(1, self.rank + 1))
        keep = ", keepdims=true" if self.keepdims else ""
        return f"{self.op}({x}, axis={axes}{keep})"


class GlobalAveragePooling1D(ChannelsFirst, _GlobalPool):
    """The mean over steps, like keras.layers.GlobalAveragePooling1D."""

    kind, rank, op = "GlobalAveragePooling1D", 1, "mean"
    mask_input = True

    def forward(self, x, p, ctx, mask=None):
        if mask is None:
            return super().forward(x, p, ctx)
        # Keras: the mean over the unmasked steps
        keep = ctx.define("m", f"expand_dims({mask}, 2)")
        kept = f"where({keep}, {x}, zeros_like({x}))"
        count = f"sum(astype({keep}, dtype_name({x})), axis=1{', keepdims=true' if self.keepdims else ''})"
        keepdims = ", keepdims=true" if self.keepdims else ""
        return f"(sum({kept}, axis=1{keepdims}) / {count})"


class GlobalAveragePooling2D(ChannelsFirst, _GlobalPool):
    """The mean over height and width, like keras.layers.GlobalAveragePooling2D."""

    kind, rank, op = "GlobalAveragePooling2D", 2, "mean"


class GlobalMaxPooling1D(ChannelsFirst, _GlobalPool):
    """The maximum over steps, like keras.layers.GlobalMaxPooling1D."""

    kind, rank, op = "GlobalMaxPooling1D", 1, "max"


class GlobalMaxPooling2D(ChannelsFirst, _GlobalPool):
    """The maximum over height and width, like keras.layers.GlobalMaxPooling2D."""

    kind, rank, op = "GlobalMaxPooling2D", 2, "max"


GlobalAvgPool1D, GlobalAvgPool2D = GlobalAveragePooling1D, GlobalAveragePooling2D
GlobalMaxPool1D, GlobalMaxPool2D = GlobalMaxPooling1D, GlobalMaxPooling2D


class Dropout(Layer):
    """Inverted dropout in training, identity otherwise. The mask is drawn
    from tessera's counter-based generator, keyed by the training step's seed
    and the layer call, so runs are reproducible."""

    kind = "Dropout"
    supports_masking = True  # passes its input's mask on (functional.py)

    def __init__(self, rate: float, noise_shape=None, seed=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if isinstance(rate, bool) or not (isinstance(rate, (int, float)) and 0.0 <= rate < 1.0):
            raise ValueError(f"[Dropout] rate must be in [0, 1), got {rate!r}")
        if noise_shape is not None:
            raise ValueError("[Dropout] noise_shape is not supported; leave it None")
        self.rate = float(rate)
        self.seed = seed

    def forward(self, x, p, ctx):
        if not self.rate:
            return x
        return dropout_expr(x, self.rate, ctx)


def dropout_expr(x: str, rate: float, ctx) -> str:
    """Dropout keyed by the step's seed and the call's index."""
    return f"dropout({x}, {rate!r}, {ctx.seed} * {ctx.seed_stride} + {ctx.index}, {ctx.training})"


class Flatten(Layer):
    """Keeps the batch axis and flattens the rest."""

    kind = "Flatten"

    def compute_output_shape(self, s):
        if any(d is None for d in s):
            raise ValueError(f"[Flatten] layer {self.name!r} needs every axis's length, got "
                             f"per-sample shape {tuple(s)} with an axis of unknown length "
                             "(None): its output size would depend on the input's length; "
                             "pool over the axis (GlobalAveragePooling1D) or give the Input "
                             "a length")
        return (math.prod(s),)

    def forward(self, x, p, ctx):
        return f"batch_flatten({x})"


class Reshape(Layer):
    """Reshapes each sample to target_shape (one axis may be -1), like keras.layers.Reshape."""

    kind = "Reshape"

    def __init__(self, target_shape, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        try:
            self.target_shape = tuple(int(d) for d in target_shape)
        except TypeError:
            raise TypeError(f"[Reshape] target_shape must be a tuple of ints, got "
                            f"{target_shape!r}") from None
        if sum(d == -1 for d in self.target_shape) > 1 or any(
                d == 0 or d < -1 for d in self.target_shape):
            raise ValueError(f"[Reshape] target_shape must hold positive ints and at most one "
                             f"-1, got {target_shape!r}")

    def compute_output_shape(self, s):
        n = math.prod(s)
        known = math.prod(d for d in self.target_shape if d != -1)
        if -1 in self.target_shape:
            if n % known:
                raise ValueError(f"[Reshape] cannot reshape samples of shape {s} ({n} elements) "
                                 f"into {self.target_shape}")
            return tuple(n // known if d == -1 else d for d in self.target_shape)
        if known != n:
            raise ValueError(f"[Reshape] cannot reshape samples of shape {s} ({n} elements) into "
                             f"{self.target_shape} ({known} elements)")
        return self.target_shape

    def forward(self, x, p, ctx):
        return f"reshape({x}, {_list((-1,) + self._out_shape)})"


class Permute(Layer):
    """Permutes the axes of each sample (dims count from 1), like keras.layers.Permute."""

    kind = "Permute"

    def __init__(self, dims, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.dims = tuple(int(d) for d in dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(f"[Permute] dims must be a permutation of 1..{len(self.dims)}, got "
                             f"{dims!r}")

    def compute_output_shape(self, s):
        if len(s) != len(self.dims):
            raise ValueError(f"[Permute] dims {self.dims} do not match samples of shape {s}")
        return tuple(s[d - 1] for d in self.dims)

    def forward(self, x, p, ctx):
        return f"transpose({x}, {_list((0,) + self.dims)})"


class RepeatVector(Layer):
    """Repeats a (batch, features) input n times: (batch, n, features)."""

    kind = "RepeatVector"

    def __init__(self, n, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.n = _positive(n, "n", "RepeatVector")

    def compute_output_shape(self, s):
        self._need_rank(s, 1, "features")
        return (self.n, s[0])

    def forward(self, x, p, ctx):
        return f"repeat(expand_dims({x}, 1), {self.n}, axis=1)"


class Activation(Layer):
    """An activation function as a layer."""

    kind = "Activation"
    supports_masking = True  # passes its input's mask on (functional.py)

    def __init__(self, activation, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.activation = _activation(activation, "Activation")

    def forward(self, x, p, ctx):
        return _apply(self.activation, x, ctx, self._out_shape)


class Identity(Layer):
    """Returns its input, like keras.layers.Identity."""

    kind = "Identity"
    supports_masking = True  # passes its input's mask on (functional.py)

    def forward(self, x, p, ctx):
        return x


class Embedding(Layer):
    """Maps integer ids (any shape) to rows of a (input_dim, output_dim)
    table, like keras.layers.Embedding. Ids outside [0, input_dim) are an
    IndexError naming them."""

    kind = "Embedding"

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform",
                 embeddings_regularizer=None, mask_zero=False, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.input_dim = _positive(input_dim, "input_dim", "Embedding")
        self.output_dim = _positive(output_dim, "output_dim", "Embedding")
        self.mask_zero = bool(mask_zero)
        self.embeddings_initializer = _initializer(embeddings_initializer, "Embedding",
                                                   "embeddings_initializer")
        self.embeddings_regularizer = _regularizer(embeddings_regularizer, "Embedding",
                                                   "embeddings_regularizer")

    def compute_output_shape(self, s):
        self.params = [Param("embeddings", (self.input_dim, self.output_dim),
                             self.embeddings_initializer, self.input_dim, self.output_dim,
                             regularizer=self.embeddings_regularizer)]
        return tuple(s) + (self.output_dim,)

    def forward(self, x, p, ctx):
        return f"take({p['embeddings']}, astype({x}, \"int64\"), axis=0)"

    def output_mask(self, inputs, mask):
        """Keras's compute_mask: ids != 0 with mask_zero, else none."""
        return (inputs[0] != 0) if self.mask_zero else None


class LayerNormalization(Layer):
    """Normalizes each sample over the last axis (or `axis`): gamma * (x -
    mean) / sqrt(var + epsilon) + beta, like keras.layers.LayerNormalization."""

    kind = "LayerNormalization"
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
        xv = ctx.define("ln_x", x)
        ax = _list(axes)
        centered = ctx.define("ln_c", f"{xv} - mean({xv}, axis={ax}, keepdims=true)")
        y = (f"{centered} / sqrt(mean({centered} * {centered}, axis={ax}, keepdims=true) + "
             f"{self.epsilon!r})")
        # gamma and beta broadcast along the normalized axes
        bshape = [s[a - 1] if a in axes else 1 for a in range(1, len(s) + 1)]
        contiguous_last = axes == list(range(len(s) - len(axes) + 1, len(s) + 1))
        def shaped(v):
            return v if contiguous_last else f"reshape({v}, {_list(bshape)})"
        if self.scale:
            y = f"({y}) * {shaped(p['gamma'])}"
        if self.center:
            y = f"({y}) + {shaped(p['beta'])}"
        return y


class BatchNormalization(Layer):
    """Normalizes each channel (last axis): batch statistics in training, the
    moving averages in inference, like keras.layers.BatchNormalization. With
    trainable=False it runs in inference mode (Keras 3's rule)."""

    kind = "BatchNormalization"
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


# While load_model rebuilds a model from a file: {"left", "total", "path"},
# the weight values the file holds. A model whose weights outgrow them cannot
# match the file, and a damaged or crafted architecture (Dense(units=10**10))
# would exhaust memory before the mismatch was seen.
WEIGHTS_IN_FILE = contextvars.ContextVar("tessera_weights_in_file", default=None)


class _Draw:
    """A parameter's initial value not drawn yet: the draw's arguments."""

    __slots__ = ("param", "seed", "dtype")

    def __init__(self, param, seed, dtype):
        self.param, self.seed, self.dtype = param, seed, dtype


class DeferredValues(dict):
    """A layer's {parameter name: array} in which some initial values are
    drawn only when first read (`defer`). The draw is keyed by the model's
    seed and the parameter's place, so it is the same value whenever it is
    made: a pipeline stage that reads only its own layers' weights never
    holds the others'. Every way of reading a value draws it first; keys,
    `in` and len see pending values as present."""

    drawn = 0  # deferred values drawn and kept, in this process (tests read it)

    def defer(self, name, param, seed, dtype):
        dict.__setitem__(self, name, _Draw(param, seed, dtype))

    def peek(self, name):
        """The value, drawn if pending but not kept (nothing stays held)."""
        v = dict.__getitem__(self, name)
        return initial_value(v.param, v.seed, v.dtype) if isinstance(v, _Draw) else v

    def pending(self) -> list:
        """The names whose values are not drawn yet."""
        return [k for k, v in dict.items(self) if isinstance(v, _Draw)]

    def __getitem__(self, name):
        v = dict.__getitem__(self, name)
        if isinstance(v, _Draw):
            v = initial_value(v.param, v.seed, v.dtype)
            dict.__setitem__(self, name, v)
            DeferredValues.drawn += 1
        return v

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __iter__(self):
        # not dict's own: dict(values), {**values} and update(values) then
        # read through __getitem__ instead of copying pending entries
        return iter(list(dict.keys(self)))

    def items(self):
        return [(k, self[k]) for k in list(dict.keys(self))]

    def values(self):
        return [self[k] for k in list(dict.keys(self))]

    def pop(self, name, *default):
        if name in self:
            v = self[name]
            dict.__delitem__(self, name)
            return v
        if default:
            return default[0]
        raise KeyError(name)

    def setdefault(self, name, default=None):
        if name not in self:
            dict.__setitem__(self, name, default)
        return self[name]

    def copy(self):
        return dict(self.items())

    def __reduce__(self):
        return (dict, (dict(self.items()),))


def value_spec(layer, name):
    """(shape, dtype) of a layer's parameter value without drawing it if
    its draw is pending (DeferredValues)."""
    import numpy as np  # noqa: PLC0415

    v = dict.get(layer._values, name)
    if isinstance(v, _Draw):
        return tuple(v.param.shape), np.dtype(v.dtype)
    a = np.asarray(v)
    return a.shape, a.dtype


def peek_value(layer, name):
    """A layer's parameter value; a pending draw is made but not kept."""
    values = layer._values
    return values.peek(name) if isinstance(values, DeferredValues) else values[name]


def initial_value(param: Param, seed: int, dtype: str = "float32"):
    """The starting value of a parameter: its initializer's draw from
    tessera's seeded generators (an initializer with a seed of its own uses
    that one)."""
    from . import initializers  # noqa: PLC0415

    budget = WEIGHTS_IN_FILE.get()
    if budget is not None:
        count = math.prod(param.shape)
        if count > budget["left"]:
            raise ValueError(f"[load_model] {budget['path']}: the architecture makes a weight "
                             f"{param.name!r} of shape {tuple(param.shape)} past the "
                             f"{budget['total']} weight values in the file (damaged or not made "
                             "by model.save); nothing was loaded")
        budget["left"] -= count

    init = param.init if hasattr(param.init, "generate") else initializers.get(param.init)
    return init.generate(tuple(param.shape), dtype, seed)


# keras.layers offers every layer: `from tessera.nn import layers` then
# layers.LSTM, layers.MultiHeadAttention, layers.Add, layers.Input. The layers
# of the other modules are found on first use (those modules import this one).
_ELSEWHERE = {
    "MultiHeadAttention": "attention",
    "GRU": "recurrent", "LSTM": "recurrent", "SimpleRNN": "recurrent",
    "Add": "merging", "Average": "merging", "Concatenate": "merging", "Dot": "merging",
    "Maximum": "merging", "Minimum": "merging", "Multiply": "merging", "Subtract": "merging",
    "add": "merging", "average": "merging", "concatenate": "merging", "maximum": "merging",
    "minimum": "merging", "multiply": "merging", "subtract": "merging",
    "Input": "symbolic",
    "Masking": "wrappers", "Bidirectional": "wrappers", "TimeDistributed": "wrappers",
    "RNN": "wrappers", "SimpleRNNCell": "wrappers", "LSTMCell": "wrappers",
    "GRUCell": "wrappers", "StackedRNNCells": "wrappers",
    "ReLU": "activation_layers", "Softmax": "activation_layers", "LeakyReLU": "activation_layers",
    "PReLU": "activation_layers", "ELU": "activation_layers",
    "Lambda": "core_layers", "InputLayer": "core_layers",
    "ZeroPadding1D": "reshaping", "ZeroPadding2D": "reshaping", "UpSampling1D": "reshaping",
    "UpSampling2D": "reshaping", "Cropping1D": "reshaping", "Cropping2D": "reshaping",
    "SpatialDropout1D": "noise", "SpatialDropout2D": "noise", "SpatialDropout3D": "noise",
    "GaussianNoise": "noise", "GaussianDropout": "noise", "AlphaDropout": "noise",
    "ActivityRegularization": "noise",
    "SeparableConv1D": "separable", "SeparableConv2D": "separable",
    "SeparableConvolution1D": "separable", "SeparableConvolution2D": "separable",
    "Attention": "attention_layers", "AdditiveAttention": "attention_layers",
    "Rescaling": "normalization", "Normalization": "normalization",
    "UnitNormalization": "normalization", "GroupNormalization": "normalization",
    **{n: "preprocessing" for n in (
        "TextVectorization", "StringLookup", "IntegerLookup", "CategoryEncoding", "Hashing",
        "Discretization")},
    **{n: "image_preprocessing" for n in (
        "Resizing", "CenterCrop", "RandomFlip", "RandomRotation", "RandomZoom", "RandomCrop",
        "RandomTranslation", "RandomContrast")},
}


def __getattr__(name):
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415

    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def __dir__():
    return sorted(set(globals()) | set(_ELSEWHERE))
