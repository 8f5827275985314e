"""The base of every layer: `Layer` (parameters, naming, building, calling
into the symbolic graph, Keras's object model) and the helpers the layer
families share (argument checks, activations, initializers, regularizers).
Layouts are Keras's: channels last, kernels (kernel_size..., in_channels,
filters), Dense weights (in, out). The families import it; it imports none
of them."""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import re
from typing import Optional, Tuple

import numpy as np

from .. import constraints, initializers, regularizers
from .._config import SETTINGS
from ..dtype_policies import layer_dtype, policy_of
from ..functional import (apply_function, call_builtin, call_layer, claim_path,
                          custom_forward)
from ..params import Param, value_spec
from ..symbolic import NAME_COUNTS, keras_dtype, next_name, user_location
from ..variables import Variable, add_loss_now, is_rewriting
from .keras_config import constructor_arguments, given_arguments, keras_layer_config

__all__ = ["Context", "Layer", "Param"]

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
        return apply_function(activation, [expr], [shape], ctx)
    template = ACTIVATIONS[activation]
    if template.count("{x}") > 1 and ctx is not None:
        expr = ctx.define("act", expr)
    return template.format(x=expr)


def _initializer(v, where: str, name: str):
    """Checks an initializer argument (a name or an initializer object)."""
    try:
        return initializers.get(v)
    except (ValueError, TypeError) as e:
        raise type(e)(f"[{where}] {name}: {e}") from None


def _regularizer(v, where: str, name: str):
    if v is None:
        return None
    try:
        return regularizers.get(v)
    except (ValueError, TypeError) as e:
        raise type(e)(f"[{where}] {name}: {e}") from None


def _activity_regularizer(v, cls):
    """A layer's activity_regularizer: None, a regularizer (a name, a config, a
    Regularizer: a user's subclass computes with ops in its __call__) or a function
    of the output tensor returning a number, as Keras takes."""
    if v is None or (callable(v) and not isinstance(v, (str, dict, type))):
        return v
    return _regularizer(v, getattr(cls, "kind", cls.__name__), "activity_regularizer")


def _pair(v, name: str, where: str) -> Tuple[int, int]:
    if isinstance(v, int):
        v = (v, v)
    v = tuple(v)
    if len(v) != 2 or not all(isinstance(i, int) and i > 0 for i in v):
        raise ValueError(f"[{where}] {name} must be a positive int or a pair of them, got {v!r}")
    return v


def _data_format(v, where: str) -> str:
    """Keras's data_format: None (keras.config.image_data_format(): channels_last unless
    set_image_data_format changed it), "channels_last" or "channels_first"."""
    if v is None:
        return SETTINGS["image_data_format"]
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
        # a user's layer: per input, (expression, shape, dtype) of the mask it
        # carries, or None (its call sees them, as Keras's: functional.custom_forward)
        self.input_masks = None
        # a nested model's call: its outputs whose masks it also returns
        # (functional._mask_items), or None
        self.output_masks = None

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


_name_counts = NAME_COUNTS  # (shared with Input(), which names its InputLayer as Keras)


def _snake(name: str) -> str:
    """Keras's snake_case of a class name: Conv2D -> conv2d, MaxPooling2D -> max_pooling2d."""
    name = name.lstrip("_") or "layer"
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _auto_name(kind: str) -> str:
    return next_name(_snake(kind))


# Keras keyword arguments and what a user should pass instead, for the ones
# tessera does not take.
_KERAS_ALTERNATIVES = {
    "kernel_constraint": "this layer has no kernel constraint in tessera yet (Dense, the "
                         "convolutions, Embedding and the normalizations take constraints)",
    "bias_constraint": "this layer has no bias constraint in tessera yet",
    "autocast": "tessera computes in the model's dtype",
    "input_length": "give Input(shape=(length,)) or input_shape=(length,)",
}


def _first_call_parameter(layer):
    """The name of the first parameter of a layer's call (None if it has none):
    a built-in layer's split_call's (MultiHeadAttention's `query`), else call's."""
    fn = type(layer).call
    if getattr(type(layer), "split_call", None) is not None and not layer._is_custom():
        fn = type(layer).split_call
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
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
    # Keras's constraint arguments the layer takes -> the parameter each constrains
    # (applied after each optimizer step, in the compiled training step)
    constraint_arguments: dict = {}
    input_spec = None  # Keras's InputSpec (or a list): checked on every call

    def __new__(cls, *args, **kwargs):
        if kwargs:
            _check_keywords(cls, kwargs)
        obj = super().__new__(cls)
        obj._init_args = (args, kwargs)  # for get_config (model.save)
        return obj

    def __init__(self, name: Optional[str] = None, input_shape=None, trainable: bool = True,
                 dtype=None, input_dim=None, batch_input_shape=None, activity_regularizer=None,
                 **kwargs):
        # Keras's: a penalty on each output, divided by the batch size, added to the loss
        # (written with the layer's node: programs.Model layer_code)
        self.activity_regularizer = _activity_regularizer(activity_regularizer, type(self))
        self._constraints: dict = {}  # parameter name -> constraints.Constraint
        for arg in [k for k in kwargs if k in type(self).constraint_arguments]:
            self.set_constraint(type(self).constraint_arguments[arg], kwargs.pop(arg), arg)
        if kwargs:
            self._unknown_arguments(kwargs)
        if type(self).kind == "Layer" and type(self) is not Layer:
            self.kind = type(self).__name__
        # Keras: the snake case of the class's name (a user's subclass: its own)
        self.name = name if name is not None else _auto_name(type(self).__name__)
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
        self.dtype = layer_dtype(dtype, self.kind)  # (a DTypePolicy: its name)
        self.params: list = []
        # One sample's input and output shapes (no batch axis; a list for
        # several inputs or outputs), once the layer was called or built.
        self._in_shape: Optional[tuple] = None
        self._out_shape: Optional[tuple] = None
        self.built = False
        self._values: dict = {}  # parameter name -> array, once created
        self._symbols: dict = {}  # parameter name -> symbolic tensor (add_weight)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # A user's subclass of a built-in layer that writes its own call: it is
        # a user's layer (its call is traced; super().call reaches the
        # built-in's computation), and its compute_output_shape is Keras's
        # (shapes with the batch axis), the built-in's unless it defines one.
        if not cls.__module__.startswith("tessera."):
            _wrap_build(cls)
        if cls.__module__.startswith("tessera.") or builtin_base(cls) is None:
            return
        owner = next(c for c in cls.__mro__ if "compute_output_shape" in c.__dict__)
        if cls.call is Layer.call:  # the built-in's call: its shapes keep the user's weights
            if owner.__module__.startswith("tessera."):
                cls.compute_output_shape = Layer._declaring_output_shape
            return
        if not any("forward" in c.__dict__ for c in cls.__mro__
                   if not c.__module__.startswith("tessera.")):
            cls.forward = Layer.forward
        if owner.__module__.startswith("tessera."):
            cls.compute_output_shape = Layer._subclass_output_shape

    @property
    def dtype(self):
        """Keras's: the dtype of the layer's weights (variable_dtype): the one
        given, else the dtype of the model that built it, else the global
        policy's."""
        given = self.__dict__.get("_dtype")
        return given if given is not None else self.dtype_policy.variable_dtype

    @dtype.setter
    def dtype(self, value):
        self.__dict__["_dtype"] = value

    @property
    def dtype_policy(self):
        """Keras's: the layer's DTypePolicy (its dtype's; without one, the
        dtype of the model that built it, else the global policy's)."""
        return policy_of(self.__dict__.get("_dtype"), self.__dict__.get("_model_dtype"))

    @property
    def compute_dtype(self) -> str:
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self) -> str:
        return self.dtype_policy.variable_dtype

    def save_own_variables(self, store):
        """Keras's saving hook: puts this layer's own weights into `store`
        (a dict) as "0", "1", ... in the order of its weights (trainable
        first). model.save calls it on a layer whose class overrides it (or
        load_own_variables); an override may add entries of its own."""
        for k, q in enumerate(self.params):
            store[str(k)] = np.array(self._variable(q.name).numpy(), copy=True)

    def load_own_variables(self, store):
        """Keras's loading hook: sets this layer's own weights from `store`
        ("0", "1", ...: what save_own_variables wrote), after compile and
        before load_assets, as Keras orders them."""
        keys = [str(k) for k in range(len(self.params))]
        missing = [k for k in keys if k not in store]
        if missing:
            raise ValueError(f"[{type(self).__name__}.load_own_variables] layer {self.name!r} "
                             f"has {len(keys)} weights; the store lacks {missing} (it holds "
                             f"{sorted(store)})")
        self.set_weights([store[k] for k in keys])

    def save_assets(self, dir_path):
        """Keras's saving hook: writes files of this layer (a vocabulary ...)
        into the folder `dir_path`; model.save keeps them in the file."""

    def load_assets(self, dir_path):
        """Keras's loading hook: reads back the files save_assets wrote, from
        a fresh folder `dir_path` (removed afterwards); called last."""

    def get_build_config(self):
        """Keras's: what build_from_config needs to build the layer on load,
        {"input_shape": ...} (the shape build was given, or the input's with
        the batch axis), or None before the layer is built."""
        shape = self.__dict__.get("_build_input_shape")
        if shape is None and self._in_shape is not None:
            shape = _with_batch(self._in_shape)
        return None if shape is None else {"input_shape": shape}

    def build_from_config(self, config):
        """Keras's: builds the layer from get_build_config's dict (load_model
        calls it, before the model's graph is made, on a layer whose class
        overrides either)."""
        if config and config.get("input_shape") is not None:
            shape = config["input_shape"]
            self.build([tuple(s) for s in shape] if shape and isinstance(shape[0], (list, tuple))
                       else tuple(shape))
            self.built = True

    def _declaring_output_shape(self, shape):
        """A user's subclass of a built-in layer without a call of its own:
        the built-in's per-sample output shape, its weights declared beside
        the ones the subclass made (a Variable kept as an attribute)."""
        return self._builtin_output_shape(builtin_base(type(self)), shape)

    def _subclass_output_shape(self, input_shape):
        """Keras's compute_output_shape of a user's subclass of a built-in
        layer: the built-in's output shape for `input_shape` (with the batch
        axis first, a list of shapes for several inputs), batch axis kept."""
        builtin = builtin_base(type(self))
        several = isinstance(input_shape, list) and input_shape and \
            isinstance(input_shape[0], (list, tuple))
        shapes = [tuple(s) for s in input_shape] if several else [tuple(input_shape)]
        if any(not s for s in shapes):
            raise ValueError(f"[{type(self).__name__}.compute_output_shape] input_shape must "
                             f"include the batch axis first (None), got {input_shape!r}")
        per = [s[1:] for s in shapes]
        out = self._builtin_output_shape(builtin, per if several else per[0])
        batch = shapes[0][0]
        if isinstance(out, list):
            return [(batch,) + tuple(o) for o in out]
        return (batch,) + tuple(out)

    def __setattr__(self, name: str, value):
        # Keras tracks a Variable made directly (keras.Variable(...)) and kept
        # as a layer's attribute as one of the layer's weights
        if isinstance(value, Variable) and value._layer is None and not name.startswith("_") \
                and "params" in self.__dict__:
            self._adopt(value)
        object.__setattr__(self, name, value)

    def _adopt(self, v: Variable):
        """Makes the Variable `v` (made directly) one of this layer's weights:
        the same object, its value kept, read and trained by the programs."""
        pname = v._param
        if any(q.name == pname for q in self.params):
            pname = f"{pname}_{len(self.params)}"
        value = v._own
        shape = tuple(value.shape)
        fan_in, fan_out = _fans(shape)
        self.params.append(Param(pname, shape, "zeros", fan_in, fan_out, v._trainable))
        self.params = _keras_weight_order(self.params)
        self._values[pname] = np.array(value, copy=True)
        v._layer, v._param, v._own, v.args = self, pname, None, (self, pname)
        self._symbols[pname] = v

    def set_constraint(self, param_name: str, constraint, argument: str = "constraint"):
        """Constrains the parameter `param_name` (Keras's kernel_constraint & co):
        projected after each optimizer step. None removes it."""
        try:
            c = constraints.get(constraint)
        except (TypeError, ValueError) as e:
            raise type(e)(f"[{type(self).__name__}] {argument}: {e}") from None
        if c is None:
            self._constraints.pop(param_name, None)
        else:
            self._constraints[param_name] = c

    def constraint_of(self, param) -> object:
        """The constraint of a declared parameter (None: none)."""
        return getattr(self, "_constraints", {}).get(param.name) or param.constraint

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
        """A built-in layer's computation, as Keras's `call`: what a user's
        subclass of a built-in layer reaches with `super().call(inputs)` (the
        built-in's computation with the layer's own weights), or the built-in
        layer itself called."""
        builtin = builtin_base(type(self))
        if builtin is None:
            raise NotImplementedError(f"[{self.kind}] a Layer subclass must define "
                                      "call(self, inputs)")
        if not args:
            raise TypeError(f"[{builtin.__name__}.call] layer {self.name!r} called without "
                            f"its inputs (at {user_location()})")
        if not self._is_custom():
            return call_layer(self, args[0], args[1:], kwargs)
        return call_builtin(self, builtin, args[0], args[1:], kwargs)

    def _builtin_output_shape(self, builtin, shape, where: str = ""):
        """The per-sample output shape of the built-in class `builtin`'s
        computation on this layer (a user's subclass of it) for `shape`,
        declaring the built-in's weights once, after the weights the layer
        already has (as Keras creates them in build order); on another call
        they must match (the same Variables are read and trained)."""
        own = list(self.params)
        try:
            out = builtin.compute_output_shape(self, shape)
        finally:
            declared, self.params = list(self.params), own
        have = {q.name: q for q in own}
        if all(q.name in have for q in declared):
            for q in declared:
                if tuple(have[q.name].shape) != tuple(q.shape):
                    raise ValueError(
                        f"[{builtin.__name__}] layer {self.name!r} ({type(self).__name__}) has "
                        f"its weight {q.name!r} of shape {tuple(have[q.name].shape)} and cannot "
                        f"compute {builtin.__name__} on inputs of per-sample shape {shape} "
                        f"(which needs {tuple(q.shape)}){where}")
            return out
        clash = [q.name for q in declared if q.name in have]
        if clash:
            raise ValueError(f"[{builtin.__name__}] layer {self.name!r} ({type(self).__name__}) "
                             f"made weights named {clash} itself; {builtin.__name__} needs those "
                             f"names for its own weights{where}")
        self._refuse_weights_of_unknown_length(
            declared, builtin.__name__, f" on inputs of per-sample shape {shape}{where}")
        self.params = _keras_weight_order(own + declared)
        return out

    def _refuse_weights_of_unknown_length(self, declared, kind: str, where: str,
                                          reset: bool = False):
        """Raises if a weight of `declared` (just declared for an input shape)
        has an axis of unknown length (None): a weight's shape must not depend
        on an input axis given as None. `reset` drops the layer's weights
        first (it stays unbuilt)."""
        unknown = [q.name for q in declared if any(d is None for d in q.shape)]
        if unknown:
            if reset:
                self.params = []
            raise ValueError(f"[{kind}] layer {self.name!r}{where}: its weights {unknown} "
                             "would depend on an axis of unknown length (None); give that "
                             "axis a length in Input")

    def build(self, input_shape):
        """Creates the weights for `input_shape` (with the batch axis, None).
        A user's layer overrides it and calls add_weight; a built-in layer
        declares its weights for that shape, as its first call would (then
        `dense.kernel`, `get_weights()` and `set_weights` work before any
        call, as Keras's)."""
        # a user's subclass of a built-in layer (super().build(input_shape)):
        # the built-in's weights, as Keras's Dense.build makes them
        builtin = builtin_base(type(self)) if self._is_custom() else None
        if (self._is_custom() and builtin is None) or self.built or input_shape is None or \
                getattr(type(self), "split_call", None) is not None:
            return
        multi = getattr(self, "multi_input", False)
        shapes = [tuple(s) for s in input_shape] if multi else [tuple(input_shape)]
        for s in shapes:
            if not s:
                raise ValueError(f"[{self.kind}.build] input_shape must include the batch axis "
                                 f"first (None), got {input_shape!r}")
        per = [s[1:] for s in shapes]
        arg = per if multi else per[0]
        claim_path(self)  # its weights are made now: their paths are fixed now
        if builtin is not None:
            out = self._builtin_output_shape(builtin, arg, f" (in build, at {user_location()})")
            # (its input and output shapes become its call's when it is called)
            self._out_shape, self._built_for = out, per
            return  # (built once build returns, as a user's layer is)
        out = self.compute_output_shape(arg)
        self._refuse_weights_of_unknown_length(self.params, f"{self.kind}.build",
                                               f" for input_shape {input_shape!r}", reset=True)
        self._in_shape, self._out_shape, self.built = arg, out, True
        self._built_for = per

    def add_weight(self, shape=None, initializer="glorot_uniform", trainable: bool = True,
                   name: Optional[str] = None, regularizer=None, dtype=None, **kwargs):
        """A weight of a user's layer, like Keras's Layer.add_weight: returns
        its Variable (the same object `weights` lists), which call() uses as
        the weight the program reads and trains."""
        for k in kwargs:
            if k not in ("constraint", "aggregation", "synchronization", "autocast"):
                raise TypeError(f"[{self.kind}.add_weight] unexpected keyword argument {k!r}")
        try:
            constraint = constraints.get(kwargs.get("constraint"))
        except (TypeError, ValueError) as e:
            raise type(e)(f"[{self.kind}.add_weight] constraint: {e}") from None
        shape = () if shape is None else tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"[{self.kind}.add_weight] shape must hold non-negative ints, got "
                             f"{shape}")
        # an unnamed weight is keyed "weight_<k>" inside tessera (stable: weight files and
        # programs name it so) and named as Keras's, "variable", "variable_1", ... from the
        # process's count of automatic names
        pname = name or f"weight_{len(self.params)}"
        if any(q.name == pname for q in self.params):
            pname = f"{pname}_{len(self.params)}"
        if name is None:
            self.__dict__.setdefault("_auto_weight_names", {})[pname] = next_name("variable")
        fan_in, fan_out = _fans(shape)
        if regularizer is not None:
            regularizer = _regularizer(regularizer, f"{self.kind}.add_weight", "regularizer")
        if initializer is None:
            initializer = "glorot_uniform" if dtype is None or "float" in str(dtype) else "zeros"
        _initializer(initializer, f"{self.kind}.add_weight", "initializer")  # (named errors)
        dtype = keras_dtype(dtype, f"{self.kind}.add_weight")
        exact = dtype if dtype is not None and dtype.startswith(("int", "uint", "bool")) else None
        self.params.append(Param(pname, shape, initializer, fan_in, fan_out, bool(trainable),
                                 regularizer, constraint, exact))
        self.params = _keras_weight_order(self.params)
        return self._variable(pname, _float_dtype(dtype or self.dtype))

    add_variable = add_weight  # Keras 3's other name

    @property
    def trainable(self) -> bool:
        return self.__dict__.get("_trainable_flag", True)

    @trainable.setter
    def trainable(self, value) -> None:
        """Keras's: setting it sets it on every layer inside too (a model's
        layers, a user's layer's sublayers), so `base_model.trainable = False`
        freezes the whole base (its BatchNormalization then runs in inference
        mode, as Keras's)."""
        value = bool(value)
        self.__dict__["_trainable_flag"] = value
        for sub in self._trainable_children():
            if sub is not self:
                sub.trainable = value

    def _trainable_children(self) -> list:
        if "params" not in self.__dict__:  # still in __init__
            return []
        if "_layers" in self.__dict__:  # a model
            try:
                return list(self.layers)
            except AttributeError:
                return []
        return self._sublayers()

    def __getattr__(self, name: str):
        # Keras's weight attributes (dense.kernel, bn.moving_mean,
        # embedding.embeddings ...): the weight's Variable once the layer is
        # built. A layer inside a wrapper (Bidirectional, TimeDistributed) gives
        # the wrapper's Variable, which holds the value.
        if hasattr(type(self), name):  # a property that raised: its own error again
            return object.__getattribute__(self, name)
        if not name.startswith("__"):
            owner, prefix = self.__dict__.get("_weights_owner", (self, ""))
            for q in owner.__dict__.get("params") or ():
                if q.name == prefix + name:
                    return owner._variable(q.name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _weight_subpath(self, pname: str) -> str:
        """Where Keras puts the weight `pname` inside this layer: its name, or
        the sublayers' names before it for layers Keras builds of sublayers
        (MultiHeadAttention's "query/kernel", LSTM's "lstm_cell/kernel"); an
        unnamed weight's Keras name ("variable_3")."""
        return self.__dict__.get("_auto_weight_names", {}).get(pname, pname)

    def _variable(self, pname: str, dtype=None):
        """The Variable of parameter `pname` (made once, then the same object)."""
        v = self._symbols.get(pname)
        if v is None:
            v = Variable(dtype=dtype or _float_dtype(self.dtype), _layer=self, _param=pname)
            self._symbols[pname] = v
        return v

    def add_loss(self, loss):
        """Keras's add_loss, called in call(): `loss` (a symbolic value of the
        inputs and weights, or a number) is summed and added to the training
        loss (and evaluate's), as Keras does; `losses` lists them."""
        add_loss_now(self, loss)
        if not is_rewriting():  # (a program written again: the user's latest call's stay)
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
        """The number of weight elements (a user's layer: with its sublayers')."""
        if self._sublayers():
            return sum(math.prod(v.shape) for v in self.weights)
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

    # Keras 3's other names of the same lists
    @property
    def trainable_variables(self) -> list:
        return self.trainable_weights

    @property
    def non_trainable_variables(self) -> list:
        return self.non_trainable_weights

    def get_weights(self) -> list:
        """This layer's weights as NumPy arrays (copies), in declaration order;
        a user's layer's include those of the layers it keeps (Keras's: the
        values of `layer.weights`)."""
        if self._sublayers():
            return [v.numpy() for v in self.weights]
        # (a weight declared but not yet drawn is drawn now, as Keras's build
        # draws them)
        return [self._variable(q.name).numpy() for q in self.params]

    def set_weights(self, weights):
        """Replaces this layer's weights (same count and shapes as get_weights)."""
        weights = list(weights)
        if self._sublayers():
            variables = self.weights
            if len(weights) != len(variables):
                raise ValueError(f"[{self.kind}.set_weights] layer {self.name!r} has "
                                 f"{len(variables)} weights (its own and its sublayers'), got "
                                 f"{len(weights)}")
            for v, w in zip(variables, weights):
                if tuple(np.shape(w)) != tuple(v.shape):
                    raise ValueError(f"[{self.kind}.set_weights] {v.path} must have shape "
                                     f"{tuple(v.shape)}, got {tuple(np.shape(w))}")
            for v, w in zip(variables, weights):
                v.assign(w)
            return
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

    def compute_mask(self, inputs, previous_mask=None):
        """Keras's Layer.compute_mask: the mask of this layer's output for
        `inputs` (symbolic tensors or arrays) carrying `previous_mask`: the
        layer's own rule (Embedding's ids != 0 with mask_zero, a recurrent
        layer's with return_sequences, ...), else `previous_mask` when the
        layer passes masks on (supports_masking), else None. A user's layer
        overrides it."""
        rule = getattr(self, "output_mask", None)
        if rule is not None:
            return rule(list(inputs) if isinstance(inputs, (list, tuple)) else [inputs],
                        previous_mask)
        return previous_mask if getattr(self, "supports_masking", False) else None

    compute_mask._tessera_default = True  # (functional.own_compute_mask)

    def get_config(self) -> dict:
        """Keras's config: for a built-in layer every constructor argument
        (its default if not given), name, trainable and the dtype policy,
        initializers and regularizers as Keras's dicts; for a user's layer the
        arguments it was made with and its name (keras_config.py)."""
        if type(self).get_config is not Layer.get_config and builtin_base(type(self)) is None \
                and not type(self).get_config.__module__.startswith("tessera."):
            # Keras: a user's layer writing its own get_config gets only the
            # base's entries from super().get_config() (it adds its arguments)
            return {"name": self.name, "trainable": self.trainable, "dtype": self.dtype}
        given = given_arguments(self)
        if type(self).__module__.startswith("tessera."):
            return keras_layer_config(self, given)
        return given

    @classmethod
    def from_config(cls, config):
        """The layer get_config described (Keras's Layer.from_config:
        the class called with the config's arguments)."""
        if not isinstance(config, dict):
            raise TypeError(f"[{cls.__name__}.from_config] config must be a dict, got "
                            f"{type(config).__name__}")
        return cls(**constructor_arguments(cls, config))

    def __call__(self, *args, **kwargs):
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
    known |= set(getattr(cls, "constraint_arguments", {}))
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


def _wrap_build(cls):
    """A user's build, as Keras wraps it: the layer is built once it returns
    (so a layer built by hand is not built again when called), and the shape
    it was given is what get_build_config saves."""
    own = cls.__dict__.get("build")
    if own is None or getattr(own, "_tessera_wrapped", False) or any(
            c.__module__.startswith("tessera.nn.model") for c in cls.__mro__):
        return

    @functools.wraps(own)
    def build(self, *args, **kwargs):
        shape = args[0] if args else kwargs.get("input_shape")  # `build(self)`: Keras passes none
        result = own(self, *args, **kwargs) if len(inspect.signature(own).parameters) > 1 else own(self)
        if shape is not None:
            self.__dict__.setdefault("_build_input_shape", shape)
        self.built = True
        return result

    build._tessera_wrapped = True
    cls.build = build


def _keras_weight_order(params: list) -> list:
    """A layer's weights as Keras lists them: the trainable ones first, then
    the others, each in creation order."""
    return [q for q in params if q.trainable] + [q for q in params if not q.trainable]


def builtin_base(cls):
    """The built-in layer class a user's subclass computes with when its
    call reaches `super().call(...)` (the nearest tessera layer class above
    it that writes its own computation), or None (a direct subclass of
    Layer). A built-in class is its own."""
    for c in cls.__mro__:
        if c is Layer or not issubclass(c, Layer):
            break
        module = c.__module__ or ""
        if module.startswith(("tessera.nn.layers.", "tessera.nn.parallel_layers")) and \
                "call" not in c.__dict__ and c.forward is not Layer.forward:
            return c
    return None


def _float_dtype(dtype) -> str:
    return "float32" if dtype is None else str(dtype)


_fans = initializers.compute_fans  # Keras's compute_fans, for the layer families


def _custom_forward(layer: Layer, x, p: dict, ctx: Context, kwargs: dict):
    """A user's layer: runs its call() on symbolic stand-ins of the inputs
    (with Python's True/False as `training`) and writes what it records."""
    exprs = list(x) if isinstance(x, (list, tuple)) else [x]
    return custom_forward(layer, exprs, ctx, kwargs)


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
