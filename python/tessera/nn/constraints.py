"""tessera.nn.constraints: Keras's weight constraints. A constraint projects a
weight after each optimizer step, as Keras's optimizer does
(``variable.assign(variable.constraint(variable))`` after the update): the
layers' ``kernel_constraint``, ``bias_constraint``, ... arguments, applied
inside the compiled training step. Each writes its projection as an
expression of tessera's language in the weight variable; calling it on an
array evaluates that expression.

    c = nn.constraints.MaxNorm(max_value=2.0, axis=0)
    c.expression("w")        # the projection's text
    c(np.ones((3, 4)))       # the projected array

Keras's definitions (epsilon 1e-7): ``MaxNorm(max_value=2, axis=0)``: ``w *
clip(n, 0, max_value) / (eps + n)`` with ``n`` the L2 norms along ``axis``;
``MinMaxNorm(min_value=0.0, max_value=1.0, rate=1.0, axis=0)``: ``w * (rate *
clip(n, min, max) + (1 - rate) n) / (eps + n)``; ``NonNeg()``: ``maximum(w,
0)``; ``UnitNorm(axis=0)``: ``w / (eps + n)``. A user's subclass of
``Constraint`` defines ``__call__(w)`` with ``keras.ops`` (or NumPy) functions, as
Keras's do: it is traced into the training step.
"""

from __future__ import annotations

import difflib
import math
import numbers

import numpy as np

from .. import _core
from .registry import registered_class

__all__ = ["Constraint", "MaxNorm", "MinMaxNorm", "NonNeg", "UnitNorm", "max_norm",
           "min_max_norm", "non_neg", "unit_norm", "get", "serialize", "deserialize"]

_EPS = "1e-7"  # Keras's backend.epsilon()


def _num(x) -> str:
    return repr(float(x))


def _number(cls: str, name: str, value, low=None) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or (low is not None and value < low):
        what = "a finite number" + (f" >= {low}" if low is not None else "")
        raise ValueError(f"[{cls}] {name} must be {what}, got {value!r}")
    return value


def _axis(cls: str, axis):
    if isinstance(axis, (list, tuple)):
        if not axis or any(isinstance(a, bool) or not isinstance(a, numbers.Integral)
                           for a in axis):
            raise ValueError(f"[{cls}] axis must be an int or a list of ints, got {axis!r}")
        return list(axis)
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ValueError(f"[{cls}] axis must be an int or a list of ints, got {axis!r}")
    return int(axis)


def _norms(w: str, axis) -> str:
    ax = f"list({', '.join(str(int(a)) for a in axis)})" if isinstance(axis, list) else str(axis)
    return f"sqrt(sum(square({w}), axis={ax}, keepdims=true))"


class Constraint:
    """A constraint: ``expression(w)`` is the language's text of the projected
    weight ``w`` (a variable name). Keras's base class: its ``__call__``
    returns ``w`` unchanged; a user's subclass overrides ``__call__``."""

    def expression(self, w: str) -> str:
        """The projection's text (built-in constraints)."""
        if type(self).__call__ is Constraint.__call__:
            return w
        raise NotImplementedError

    def is_custom(self) -> bool:
        """A user's subclass with its own __call__ (traced into the step)."""
        return type(self).__call__ is not Constraint.__call__ and \
            type(self).expression is Constraint.expression

    def __call__(self, w):
        if type(self).expression is Constraint.expression:
            return w
        program = self.__dict__.get("_program")
        if program is None:
            program = _core.Program(f"lambda(w, {self.expression('w')})",
                                    f"<{type(self).__name__}>")
            self.__dict__["_program"] = program
        a = np.asarray(w)
        if a.dtype.kind != "f":
            a = a.astype(np.float32)
        return np.asarray(program.run([np.ascontiguousarray(a)]), dtype=a.dtype)

    def get_config(self) -> dict:
        """Keras's config: the constructor's arguments."""
        return {}

    @classmethod
    def from_config(cls, config):
        config = {k: v for k, v in dict(config).items() if k != "class"}
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class MaxNorm(Constraint):
    """The weights' L2 norms along ``axis`` at most ``max_value``."""

    def __init__(self, max_value=2, axis=0):
        self.max_value = _number("MaxNorm", "max_value", max_value, 0)
        self.axis = _axis("MaxNorm", axis)

    def expression(self, w):
        n = _norms(w, self.axis)
        return f"({w} * (clip({n}, 0.0, {_num(self.max_value)}) / ({_EPS} + {n})))"

    def get_config(self):
        return {"max_value": self.max_value, "axis": self.axis}


class MinMaxNorm(Constraint):
    """The weights' L2 norms along ``axis`` moved into [min_value, max_value]
    at ``rate`` (1: exactly)."""

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self.min_value = _number("MinMaxNorm", "min_value", min_value, 0)
        self.max_value = _number("MinMaxNorm", "max_value", max_value, 0)
        if self.max_value < self.min_value:
            raise ValueError(f"[MinMaxNorm] max_value must be >= min_value, got "
                             f"min_value={min_value!r}, max_value={max_value!r}")
        self.rate = _number("MinMaxNorm", "rate", rate)
        self.axis = _axis("MinMaxNorm", axis)

    def expression(self, w):
        n = _norms(w, self.axis)
        desired = (f"({_num(self.rate)} * clip({n}, {_num(self.min_value)}, "
                   f"{_num(self.max_value)}) + {_num(1 - self.rate)} * {n})")
        return f"({w} * ({desired} / ({_EPS} + {n})))"

    def get_config(self):
        return {"min_value": self.min_value, "max_value": self.max_value, "rate": self.rate,
                "axis": self.axis}


class NonNeg(Constraint):
    """The weights at least 0."""

    def expression(self, w):
        return f"maximum({w}, 0.0)"


class UnitNorm(Constraint):
    """The weights' L2 norms along ``axis`` 1."""

    def __init__(self, axis=0):
        self.axis = _axis("UnitNorm", axis)

    def expression(self, w):
        return f"({w} / ({_EPS} + {_norms(w, self.axis)}))"

    def get_config(self):
        return {"axis": self.axis}


# Keras's snake_case aliases: the classes themselves.
max_norm, min_max_norm, non_neg, unit_norm = MaxNorm, MinMaxNorm, NonNeg, UnitNorm

_CLASSES = {c.__name__: c for c in (Constraint, MaxNorm, MinMaxNorm, NonNeg, UnitNorm)}
_BY_NAME = {**_CLASSES, "constraint": Constraint, "max_norm": MaxNorm,
            "min_max_norm": MinMaxNorm, "non_neg": NonNeg, "unit_norm": UnitNorm}


def serialize(constraint) -> dict:
    """Keras's form: ``{"class_name": ..., "config": get_config()}``."""
    if not isinstance(constraint, Constraint):
        raise TypeError(f"[constraints.serialize] expected a Constraint, got {constraint!r}")
    return {"class_name": type(constraint).__name__, "config": constraint.get_config()}


def deserialize(config, custom_objects=None):
    """The constraint a serialize() dict (or a name) describes."""
    if isinstance(config, str):
        return get(config)
    if not isinstance(config, dict):
        raise TypeError(f"[constraints.deserialize] expected a name or a serialize() dict, got "
                        f"{config!r}")
    name = config.get("class_name", config.get("class"))
    cls = (custom_objects or {}).get(name) or _BY_NAME.get(name) or registered_class(config)
    if cls is None:
        raise ValueError(f"[constraints.deserialize] unknown constraint {name!r}"
                         f"{_hint(str(name))} Known: {sorted(_CLASSES)}")
    inner = config.get("config", {k: v for k, v in config.items() if k != "class"})
    return cls.from_config(inner or {})


def _hint(name: str) -> str:
    close = difflib.get_close_matches(name, list(_BY_NAME), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def get(identifier):
    """A constraint from None, Keras's names (``"max_norm"``, ``"NonNeg"``, ...),
    a serialize() dict, a Constraint (returned as is) or a function of the weight."""
    if identifier is None or isinstance(identifier, Constraint):
        return identifier
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier)
        if cls is None:
            raise ValueError(f"[constraints.get] unknown constraint {identifier!r}"
                             f"{_hint(identifier)} Known: {sorted(_BY_NAME)}")
        return cls()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, type) and issubclass(identifier, Constraint):
        return identifier()
    if callable(identifier) and not isinstance(identifier, type):
        return _FunctionConstraint(identifier)  # Keras's: a function of the weight
    raise TypeError(f"[constraints.get] expected a constraint name, config dict, Constraint "
                    f"or function, got {identifier!r}")


class _FunctionConstraint(Constraint):
    """A function of the weight given as a constraint (kernel_constraint=lambda w: ...), as
    Keras takes it: traced into the step like a subclass's __call__. The layer's config
    keeps the function itself (saved by its name, as Keras saves it)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, w):
        return self.fn(w)

    def __repr__(self) -> str:
        return f"<constraint {self.__name__}>"


# regularizer_programs.constraint_lines, set when that (higher) module is imported:
# (statements, text) of a user's subclass whose __call__ computes with ops.
TRACE_HOOKS: dict = {}


def step_lines(P, owner, refuse=None) -> list:
    """The training step's statements that end Keras's optimizer step: each
    updated whole weight of `P` (program variable names; `owner[v]` is its
    (layer, param)) redefined by its constraint's projection. Every locality
    of a data group makes the same projection of the same weights. `refuse`:
    the name of a mode that never holds the whole weights (ZeRO 3), an error
    if any weight is constrained. A user's subclass is traced (TRACE_HOOKS)."""
    lines = []
    for v in P:
        layer, param = owner[v]
        c = layer.constraint_of(param) if hasattr(layer, "constraint_of") else None
        if c is None:
            continue
        where = f"the constraint {type(c).__name__} of {layer.name}/{param.name}"
        if refuse:
            raise ValueError(f"[fit] {where} needs the whole weight after each step, which "
                             f"{refuse} does not hold: train without it, or drop the constraint")
        if c.is_custom():
            traced = TRACE_HOOKS.get("lines")
            if traced is None:
                raise ValueError(f"[fit] {where} defines only __call__, which this step cannot "
                                 "trace: write expression(w) in tessera's language (see "
                                 "tessera.nn.constraints)")
            stmts, text = traced(c, v, param.shape, getattr(layer, "variable_dtype", "float32"))
            lines += stmts
        else:
            text = c.expression(v)
        lines.append(f"define({v}, astype({text}, dtype_name({v})))")
    return lines


def state_lines(S, owner, refuse=None) -> list:
    """The training step's statements, before the optimizer's update, that
    set non-trainable weights a layer computes from the weights as they were
    (SpectralNormalization's vector_u): each of `S` whose layer's
    ``state_update(param_name, name_of)`` gives an expression (``name_of``:
    the program name of another of the layer's weights). `refuse`: the name
    of a mode that does not hold the whole weights (ZeRO 3), an error then."""
    names = {(id(layer), param.name): v for v, (layer, param) in owner.items()}
    lines = []
    for v in S:
        layer, param = owner[v]
        hook = getattr(layer, "state_update", None)
        expr = None if hook is None else hook(
            param.name, lambda n, layer=layer: names[(id(layer), n)])
        if expr is None:
            continue
        if refuse:
            raise ValueError(f"[fit] {layer.kind} {layer.name!r} updates {param.name} from its "
                             f"whole weights each step, which {refuse} does not hold: train "
                             "without it")
        lines.append(f"define({v}, {expr})")
    return lines
