"""Core layers: Dense, Embedding, Activation, Identity, Dropout, and the
ones that are not weights-and-kernels: Lambda (a Python function of the
symbolic input, translated into the model's program like a user's layer's
call) and InputLayer."""

from __future__ import annotations

import inspect

from ..functional import _TRACING, _placeholders, write_traced
from ..random import own_seed
from ..symbolic import Input, KerasTensor
from ..variables import tracing
from .base import Layer, Param, _activation, _apply, _initializer, _positive, _regularizer

__all__ = ["Activation", "Dense", "Dropout", "Embedding", "Identity", "InputLayer", "Lambda",
           "ReversibleEmbedding"]


def _where_defined(fn) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{code.co_firstlineno}"


def _fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class Lambda(Layer):
    """keras.layers.Lambda: `function(inputs, **arguments)` (with `mask=` and
    `training=` when it takes them), written with tessera.nn.ops or NumPy
    functions and operators on the symbolic input; the output shape is
    inferred (output_shape, when given, is checked against it). A function
    that cannot be translated is an error naming it and where it is defined.
    A Lambda saves only when its function is registered
    (register_keras_serializable): a file holding a function's bytecode
    would run code when loaded, which tessera never does (Keras's safe_mode
    refuses such files too)."""

    kind = "Lambda"

    def __init__(self, function, output_shape=None, mask=None, arguments=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if not callable(function):
            raise TypeError(f"[Lambda] function must be callable, got {function!r}")
        if arguments is not None and not isinstance(arguments, dict):
            raise TypeError(f"[Lambda] arguments must be a dict of keyword arguments, got "
                            f"{arguments!r}")
        if mask is not None and not callable(mask) and not isinstance(mask, KerasTensor):
            raise TypeError(f"[Lambda] mask must be None, a function (inputs, mask) -> mask or a "
                            f"symbolic tensor, got {mask!r}")
        if output_shape is not None and not callable(output_shape):
            try:
                output_shape = tuple(None if d is None else int(d) for d in output_shape)
            except TypeError:
                raise TypeError(f"[Lambda] output_shape must be a tuple (one sample's shape) "
                                f"or a function, got {output_shape!r}") from None
        self.function = function
        self.arguments = dict(arguments or {})
        self.mask = mask
        self.supports_masking = mask is not None
        self._output_shape = output_shape
        try:
            params = inspect.signature(function).parameters
        except (TypeError, ValueError):
            params = {}
        self._fn_mask = "mask" in params
        self._fn_training = "training" in params
        self.mask_input = self._fn_mask  # forward gets the input's mask

    def split_call(self, inputs, mask=None, training=None):
        """The symbolic inputs (one tensor or a list) and the call's flags."""
        self.multi_input = isinstance(inputs, (list, tuple))
        in_list = list(inputs) if self.multi_input else [inputs]
        for t in in_list:
            if not isinstance(t, KerasTensor):
                raise TypeError(f"[Lambda] layer {self.name!r} got a {type(t).__name__} among "
                                "symbolic inputs; every input must come from Input() or a layer")
        if mask is not None and not isinstance(mask, KerasTensor):
            raise TypeError(f"[Lambda] layer {self.name!r}: mask must be a symbolic tensor, got "
                            f"{type(mask).__name__}")
        if training is not None and not isinstance(training, bool):
            raise TypeError(f"[Lambda] training must be True, False or None, got {training!r}")
        self._in_dtypes = [t.dtype for t in in_list]
        static = {}
        if mask is not None:
            static["mask"] = mask
        if training is not None:
            static["training"] = training
        return in_list, static

    def _trace(self, shapes, mask, training: bool, multi: bool):
        """The function run on symbolic stand-ins of inputs of one sample's
        `shapes` (a list of them when `multi`): (outputs, stand-ins, whether
        it returned one tensor)."""
        shapes = shapes if multi else [shapes]
        dtypes = getattr(self, "_in_dtypes", None)
        if not dtypes or len(dtypes) != len(shapes):
            dtypes = ["float32"] * len(shapes)
        ph = _placeholders([(None,) + tuple(s) for s in shapes], dtypes)
        kwargs = dict(self.arguments)
        if self._fn_mask:
            kwargs["mask"] = mask
        if self._fn_training:
            kwargs["training"] = training
        fn = self.function
        _TRACING[0] += 1
        try:
            with tracing():
                out = fn(ph if multi else ph[0], **kwargs)
        except Exception as e:  # noqa: BLE001 - any failure of the user's code is reported
            raise TypeError(
                f"[Lambda] layer {self.name!r}: its function {_fn_name(fn)} (defined at "
                f"{_where_defined(fn)}) cannot be translated into tessera's program: "
                f"{type(e).__name__}: {e}. A Lambda's function must compute with "
                "tessera.nn.ops (or NumPy functions and operators) on its symbolic input; "
                "Python branches on values, other libraries' tensors and conversions to "
                "numbers cannot be translated") from None
        finally:
            _TRACING[0] -= 1
        single = not isinstance(out, (list, tuple))
        outs = [out] if single else list(out)
        for o in outs:
            if not isinstance(o, KerasTensor):
                raise TypeError(f"[Lambda] layer {self.name!r}: its function {_fn_name(fn)} "
                                f"(defined at {_where_defined(fn)}) must return tensors computed "
                                f"from its input, got {type(o).__name__}")
            if not o.shape or o.shape[0] is not None:
                raise ValueError(f"[Lambda] layer {self.name!r}: its function {_fn_name(fn)} "
                                 f"(defined at {_where_defined(fn)}) must keep the batch axis "
                                 f"first, got an output of shape {o.shape}")
        return outs, ph, single

    def compute_output_shape(self, shapes):
        mask_stand_in = None
        if self._fn_mask:
            first = shapes[0] if getattr(self, "multi_input", False) else shapes
            mask_stand_in = _placeholders([(None,) + tuple(first[:1])], ["bool"])[0]
        outs, _, single = self._trace(shapes, mask_stand_in, False,
                                      getattr(self, "multi_input", False))
        self.output_dtype = outs[0].dtype
        got = [tuple(o.shape[1:]) for o in outs]
        if single:
            self._check_shape(shapes, got[0])
        return got[0] if single else got

    def forward(self, x, p, ctx, mask=None):
        shapes = [tuple(s[1:]) for s in ctx.input_shapes]
        multi = isinstance(x, (list, tuple))  # (this call's, for a Lambda used on several)
        mask_ph = None
        exprs = list(x) if multi else [x]
        if self._fn_mask and mask is not None:
            mask_ph = _placeholders([(None,) + tuple(shapes[0][:1])], ["bool"])[0]
        outs, ph, single = self._trace(shapes if multi else shapes[0], mask_ph, ctx.is_training,
                                       multi)
        if mask_ph is not None:
            ph, exprs = ph + [mask_ph], exprs + [mask]
        written = write_traced(outs, ph, exprs, ctx)
        return written[0] if single else written

    def _check_shape(self, in_shapes, got):
        """output_shape, when given, must be the shape the function makes."""
        want = self._output_shape
        if want is None:
            return
        if callable(want):
            batch = [(None,) + tuple(s) for s in in_shapes] \
                if getattr(self, "multi_input", False) else (None,) + tuple(in_shapes)
            want = tuple(want(batch))[1:]
        if len(want) != len(got) or any(w is not None and g is not None and w != g
                                        for w, g in zip(want, got)):
            raise ValueError(f"[Lambda] layer {self.name!r}: output_shape {(None,) + want} "
                             f"differs from the shape its function makes, {(None,) + got}")

    def output_mask(self, inputs, mask):
        """Keras's compute_mask: mask(inputs, mask) when a function, the
        mask itself when a tensor, else none."""
        if callable(self.mask):
            return self.mask(inputs if getattr(self, "multi_input", False) else inputs[0], mask)
        return self.mask

    def get_config(self) -> dict:
        """The arguments; the function as itself (saving writes its
        registered name, and refuses an unregistered function)."""
        config = {"function": self.function, "arguments": dict(self.arguments),
                  "name": self.name}
        if self._output_shape is not None:
            config["output_shape"] = self._output_shape
        if self.mask is not None:
            config["mask"] = self.mask
        return config


class InputLayer(Layer):
    """keras.layers.InputLayer: a model's input as a layer. Its `output` is
    the symbolic input (as keras.Input(...) makes it), and
    Sequential([InputLayer(shape=...), ...]) builds the model at once, as
    Keras does."""

    kind = "InputLayer"
    is_input_layer = True  # (Sequential takes its output as the model's input)

    def __init__(self, shape=None, batch_size=None, dtype=None, sparse=None, batch_shape=None,
                 input_tensor=None, optional=False, name=None, input_shape=None,
                 batch_input_shape=None, **kwargs):
        super().__init__(name, None, **kwargs)
        if sparse:
            raise ValueError("[InputLayer] sparse inputs are not supported; leave sparse None")
        if optional:
            raise ValueError("[InputLayer] optional inputs are not supported; leave optional "
                             "False")
        if shape is None:
            shape = input_shape  # Keras 2's names
        if batch_shape is None:
            batch_shape = batch_input_shape
        if input_tensor is not None:
            if not isinstance(input_tensor, KerasTensor) or input_tensor.op != "input":
                raise TypeError(f"[InputLayer] input_tensor must come from keras.Input(), got "
                                f"{input_tensor!r}")
            self.output = input_tensor
        else:
            if shape is None and batch_shape is None:
                raise ValueError("[InputLayer] give shape (one sample's shape) or batch_shape")
            self.output = Input(shape=shape, batch_size=batch_size, dtype=dtype, name=self.name,
                                batch_shape=batch_shape)
        self.batch_shape = (getattr(self.output, "fixed_batch", None),) + \
            tuple(self.output.shape[1:])  # Keras's: with a batch size when one is given
        self.dtype = self.output.dtype
        self._in_shape = self._out_shape = tuple(self.output.shape[1:])
        self.built = True

    def forward(self, x, p, ctx):
        return x

    def get_config(self) -> dict:
        # Keras's keys (sparse, ragged and optional: the only values tessera takes)
        return {"batch_shape": tuple(self.batch_shape), "dtype": self.dtype, "sparse": False,
                "ragged": False, "name": self.name, "optional": False}


class Dense(Layer):
    """Fully connected: activation(x @ kernel + bias), over the last axis."""

    kind = "Dense"
    supports_masking = True  # passes its input's mask on (functional.py)
    constraint_arguments = {"kernel_constraint": "kernel", "bias_constraint": "bias"}

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
        if noise_shape is not None and not (
                isinstance(noise_shape, (list, tuple)) and
                all(d is None or (isinstance(d, int) and not isinstance(d, bool) and d > 0)
                    for d in noise_shape)):
            raise ValueError(f"[Dropout] noise_shape must be a tuple of positive ints or None "
                             f"(an input's size), got {noise_shape!r}")
        self.rate = float(rate)
        self.noise_shape = None if noise_shape is None else tuple(noise_shape)
        self.seed = seed

    def compute_output_shape(self, s):
        ns = self.noise_shape
        if ns is not None:
            bad = len(ns) != len(s) + 1 or any(
                d is not None and d != 1 and d != n for d, n in zip(ns[1:], s))
            if bad:
                raise ValueError(f"[Dropout] noise_shape {ns} does not broadcast to the "
                                 f"input's shape {(None,) + tuple(s)}: one size per axis, "
                                 "each None, 1 or the input's")
        return s

    def forward(self, x, p, ctx):
        if not self.rate:
            return x
        if self.noise_shape is None:
            return dropout_expr(x, self.rate, ctx, self)
        # Keras's noise_shape: one draw per kept position, broadcast over the size-1 axes
        # (EfficientNet's per-sample drop of a residual branch: (None, 1, 1, 1)).
        x = ctx.define("dr_x", x)
        index = ", ".join("slice(0, 1)" if d == 1 and n != 1 else "slice(nil, nil)"
                          for d, n in zip(self.noise_shape, (None,) + tuple(self._in_shape)))
        ones = f"ones_like(stop_gradient(getitem({x}, {index})))"
        keep = ctx.define("dr_keep", dropout_expr(ones, self.rate, ctx, self))
        return f"{x} * {keep}"


def dropout_expr(x: str, rate: float, ctx, layer=None) -> str:
    """Dropout keyed by the step's seed and the call's index (in an eager training-mode
    call, by a seeded layer's own draw: random.own_seed)."""
    seed = own_seed(layer, ctx.index) or f"{ctx.seed} * {ctx.seed_stride} + {ctx.index}"
    return f"dropout({x}, {rate!r}, {seed}, {ctx.training})"


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
    constraint_arguments = {"embeddings_constraint": "embeddings"}

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


class ReversibleEmbedding(Embedding):
    """An Embedding that also projects back, like keras.layers.ReversibleEmbedding:
    layer(ids) is Embedding's lookup; layer(x, reverse=True) maps x (..., output_dim)
    to logits (..., input_dim) with the transposed embeddings (tie_weights=True) or
    its own reverse_embeddings (output_dim, input_dim); logit_soft_cap c gives
    tanh(logits / c) * c. No bias."""

    kind = "ReversibleEmbedding"

    def __init__(self, input_dim, output_dim, tie_weights=True, embeddings_initializer="uniform",
                 embeddings_regularizer=None, mask_zero=False, reverse_dtype=None,
                 logit_soft_cap=None, name=None, input_shape=None, **kwargs):
        super().__init__(input_dim, output_dim, embeddings_initializer, embeddings_regularizer,
                         mask_zero, name=name, input_shape=input_shape, **kwargs)
        k = self.kind
        self.tie_weights = bool(tie_weights)
        if reverse_dtype is not None and reverse_dtype != self.dtype:
            raise ValueError(f"[{k}] reverse_dtype other than the layer's dtype "
                             f"({self.dtype!r}) is not supported, got {reverse_dtype!r}")
        self.reverse_dtype = reverse_dtype
        if logit_soft_cap is not None and (isinstance(logit_soft_cap, bool) or not isinstance(
                logit_soft_cap, (int, float)) or not logit_soft_cap > 0):
            raise ValueError(f"[{k}] logit_soft_cap must be None or a positive number, got "
                             f"{logit_soft_cap!r}")
        self.logit_soft_cap = logit_soft_cap
        self._reverse = False

    def split_call(self, inputs, reverse=False):
        """The input and the call's flag (reverse=True: the projection back)."""
        if not isinstance(inputs, KerasTensor):
            raise TypeError(f"[{self.kind}] layer {self.name!r} takes one symbolic tensor, got "
                            f"{type(inputs).__name__}")
        if not isinstance(reverse, bool):
            raise TypeError(f"[{self.kind}] reverse must be True or False, got {reverse!r}")
        self._reverse = reverse
        return [inputs], ({"reverse": True} if reverse else {})

    def compute_output_shape(self, s):
        out = super().compute_output_shape(s)
        if not self.tie_weights:
            self.params.append(Param("reverse_embeddings", (self.output_dim, self.input_dim),
                                     self.embeddings_initializer, self.output_dim,
                                     self.input_dim))
        if not self._reverse:
            return out
        if not s or s[-1] != self.output_dim:
            raise ValueError(f"[{self.kind}] reverse=True takes inputs (..., output_dim="
                             f"{self.output_dim}), got {(None,) + tuple(s)}")
        return tuple(s[:-1]) + (self.input_dim,)

    def forward(self, x, p, ctx, reverse=False):
        if not reverse:
            return super().forward(x, p, ctx)
        kernel = (f"transpose({p['embeddings']})" if self.tie_weights
                  else p["reverse_embeddings"])
        logits = f"matmul({x}, {kernel})"
        if self.logit_soft_cap is not None:
            c = float(self.logit_soft_cap)
            logits = f"(tanh({logits} / {c!r}) * {c!r})"
        return logits

    def output_mask(self, inputs, mask):
        """Keras's: the ids' mask (mask_zero) on the lookup, none on the projection."""
        return None if self._reverse else super().output_mask(inputs, mask)
