"""The base of tessera.nn.losses: the Loss class (a loss written as an expression of
tessera's language, its calls on arrays and on symbolic tensors, configs) and the helpers
the loss families share."""

import inspect
import numbers

import numpy as np

from . import ops
from .functional import apply_function
from .layers.base import _snake
from .loss_calls import batch_loss_fn, own_dunder_call, refuse_weighted_batch_loss
from .loss_reductions import reduce_values, reduction_of
from .program_constants import compile_program
from .sample_weights import same_rank
from .symbolic import is_symbolic

# Keras's epsilon where its losses clip.
_EPS = "1e-7"
_EPSF = 1e-7  # (the same, for the losses written with ops)


def _num(x) -> str:
    return repr(float(x))


def _fraction(cls: str, name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v <= 1:
        raise ValueError(f"[{cls}] {name} must be a number in [0, 1], got {v!r}")
    return float(v)


class Loss:
    """A loss: ``expression(y, p)`` is the language's text of the mean loss of
    the labels ``y`` and the outputs ``p`` (both variable names)."""

    name = "loss"
    sparse_labels = False  # integer class labels (checked by fit/evaluate)
    # Keras broadcasts labels against the outputs (a (n, 1) column against (n, 2))
    # in the losses whose labels meet the outputs only elementwise; the others
    # (crossentropies, cosine, dice) need the same shapes.
    labels_broadcast = True

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        """Keras's Loss constructor, for subclasses that define
        `call(y_true, y_pred)` (each sample's loss, written with NumPy or
        keras.ops functions): the mean of its values over the batch."""
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ValueError(f"[{type(self).__name__}] name must be a non-empty string, "
                                 f"got {name!r}")
            self.name = name
        elif self._is_custom():
            self.name = _snake(type(self).__name__)
        self.reduction = reduction_of(type(self).__name__, reduction)
        self.dtype = dtype

    def _is_custom(self) -> bool:
        """A user's subclass defining call(y_true, y_pred) (or __call__: loss_calls.py)."""
        return type(self).call is not Loss.call or own_dunder_call(self, Loss)

    def call(self, y_true, y_pred):
        """Each sample's loss (a user's subclass defines it)."""
        raise NotImplementedError(f"[{type(self).__name__}] a Loss subclass must define "
                                  "call(self, y_true, y_pred)")

    def _traced(self, y, p, ctx, label_spec, out_shape) -> str:
        fn = batch_loss_fn(self, Loss) or self.call
        return apply_function(fn, [y, p], [label_spec[0], out_shape], ctx, [label_spec[1], "float32"])

    @classmethod
    def from_config(cls, config):
        """The loss get_config described (Keras's Loss.from_config)."""

        config = {k: v for k, v in dict(config).items() if k != "class"}
        params = inspect.signature(cls.__init__).parameters
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            config = {k: v for k, v in config.items() if k in params}
        return cls(**config)

    def expression(self, y: str, p: str) -> str:
        return f"mean({self.per_sample(y, p)})"

    def per_sample(self, y: str, p: str) -> str:
        """Each sample's loss (the last axis reduced, as Keras's functions do),
        for sample weights."""
        raise NotImplementedError(f"[{type(self).__name__}] per-sample losses are not available")

    def whole_output_shape(self, out_shape) -> tuple:
        """The shape labels are checked against: the output's own, except for
        an output split over a tensor group (tessera.nn.parallel_losses)."""
        return tuple(out_shape)

    def expression_for(self, y, p, ctx, label_spec, out_shape) -> str:
        """The mean loss as the model writes it (shapes known)."""
        if self._is_custom():
            return f"mean({self._traced(y, p, ctx, label_spec, out_shape)})"
        return self.expression(y, p)

    def per_sample_for(self, y, p, ctx, label_spec, out_shape) -> str:
        refuse_weighted_batch_loss(self, Loss)
        if self._is_custom():
            return self._traced(y, p, ctx, label_spec, out_shape)
        return self.per_sample(y, p)

    def get_config(self) -> dict:
        if self._is_custom():
            return {"name": self.name, "reduction": getattr(self, "reduction",
                                                             "sum_over_batch_size"),
                    "dtype": getattr(self, "dtype", None)}
        return {"name": self.name}

    def __call__(self, y_true, y_pred, sample_weight=None):
        """Keras's `loss_fn(y_true, y_pred, sample_weight=None)` on arrays,
        run now: each sample's loss (the last axis reduced), weighted, summed
        and divided by the number of values (Keras's "sum_over_batch_size"
        reduction, with or without weights). A float32 (float64 for float64
        outputs) NumPy scalar."""
        if any(is_symbolic(v) and type(v).__name__ != "Variable"
               for v in (y_true, y_pred, sample_weight)):
            return self._symbolic_call(y_true, y_pred, sample_weight)
        values = self.values(y_true, y_pred)
        return reduce_values(values, sample_weight, type(self).__name__,
                             getattr(self, "reduction", "sum_over_batch_size"))

    def _symbolic_call(self, y_true, y_pred, sample_weight):
        """The loss of symbolic tensors (a layer's call, e.g. for add_loss):
        a subclass's call() recorded, weighted and averaged as on arrays."""
        values = self._symbolic_values(y_true, y_pred)
        if sample_weight is not None:
            values, w = same_rank(values, sample_weight, ops.squeeze, ops.expand_dims)
            values = values * w  # (broadcast as NumPy's, as Keras's)
        reduction = getattr(self, "reduction", "sum_over_batch_size")
        if reduction in (None, "none") or len(values.shape) == 0:
            return values
        if reduction == "sum":
            return ops.sum(values)
        if reduction == "mean_with_sample_weight" and sample_weight is not None:
            return ops.sum(values) / ops.sum(w)  # (the weights as given, as Keras's)
        return np.mean(values)

    def _symbolic_values(self, y, p):
        """The values the reduction of a symbolic call averages: each sample's."""
        return self.call(y, p) if self._is_custom() else self.symbolic_per_sample(y, p)

    def symbolic_per_sample(self, y, p):
        """Each sample's loss of symbolic tensors (inside a layer's call), written
        with tessera.nn.ops (every built-in loss has it)."""
        raise TypeError(f"[{type(self).__name__}] this loss cannot be called on symbolic "
                        "tensors inside a layer's call(): write it with NumPy functions "
                        "(or a Loss subclass with call) there, or give it to compile(loss=...)")

    def values(self, y_true, y_pred):
        """Each sample's loss on arrays (no reduction), as Keras's loss
        functions (`keras.losses.mean_squared_error(y, p)`) give it."""
        where = type(self).__name__
        if self._is_custom():
            return np.asarray(self.call(np.asarray(y_true), np.asarray(y_pred)))
        p = np.asarray(y_pred)
        if p.dtype != np.float64:
            p = p.astype(np.float32)
        y = np.asarray(y_true)
        if p.ndim == 0:
            raise ValueError(f"[{where}] y_pred must have at least one axis, got a scalar")
        if self.sparse_labels:
            if y.dtype.kind not in "iub" and not (y.dtype.kind == "f" and np.all(y == np.round(y))):
                raise ValueError(f"[{where}] y_true must hold integer class labels, got dtype "
                                 f"{y.dtype}")
            y = y.astype(np.int64)
            if y.ndim == p.ndim and y.shape[-1:] == (1,):
                y = y[..., 0]  # Keras accepts labels of shape (batch, 1)
            if y.shape != p.shape[:-1]:
                raise ValueError(f"[{where}] y_true has shape {y.shape}; for y_pred of shape "
                                 f"{p.shape} it must be {p.shape[:-1]} (class indices)")
        else:
            y = y.astype(p.dtype)
            y, p = _same_rank(y, p)
            if y.shape != p.shape and not self.labels_broadcast:
                raise ValueError(f"[{where}] y_true has shape {y.shape} and y_pred {p.shape}: "
                                 "they must be the same")
            if y.shape != p.shape:
                try:
                    shape = np.broadcast_shapes(y.shape, p.shape)
                except ValueError:
                    raise ValueError(f"[{where}] y_true has shape {y.shape} and y_pred "
                                     f"{p.shape}: they must be the same or broadcast "
                                     "together (NumPy's rules)") from None
                # Keras broadcasts the two (a (n, 1) column against (n, 2))
                y, p = np.broadcast_to(y, shape), np.broadcast_to(p, shape)
        prog = self.__dict__.get("_eager_program")
        if prog is None:
            prog = compile_program(f"lambda(y, p, {self.per_sample('y', 'p')})", f"<{where}>")
            self.__dict__["_eager_program"] = prog
        return np.asarray(prog.run([np.ascontiguousarray(y), np.ascontiguousarray(p)]),
                          dtype=p.dtype)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"


def _same_rank(y, p):
    """Keras's squeeze_or_expand_to_same_rank: when the ranks differ by one and the
    longer one ends in an axis of 1, that axis is dropped (or the rank-1 one gains it)."""
    if y.ndim == p.ndim + 1 and y.shape[-1] == 1:
        return (y, p[..., None]) if p.ndim == 1 else (y[..., 0], p)
    if p.ndim == y.ndim + 1 and p.shape[-1] == 1:
        return (y[..., None], p) if y.ndim == 1 else (y, p[..., 0])
    return y, p
