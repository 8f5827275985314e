"""tessera.nn.regularizers: Keras's weight regularizers. Each writes its
penalty as an expression of tessera's language in a weight variable, which
the model adds to the loss (and so differentiates with it):

    reg = nn.regularizers.L2(1e-4)
    reg.expression("w")          # '0.0001 * sum(square(w))'
    reg(np.ones((2, 3)))         # 0.0006: the same, evaluated (through the language)

Keras's definitions: ``L1(l1=0.01)``: ``l1 * sum(abs(w))``; ``L2(l2=0.01)``:
``l2 * sum(square(w))`` (no factor 1/2); ``L1L2(l1=0.0, l2=0.0)``: both;
``OrthogonalRegularizer(factor=0.01, mode="rows")``: ``factor * 0.5 *
sum(|off-diagonal of N N^T|) / (n (n - 1) / 2)`` where N holds the rows (or
columns) of the 2-d weight scaled to unit L2 norm.
"""

from __future__ import annotations

import difflib
import math
import numbers

import numpy as np

from .. import _core
from ._config import Configurable
from .registry import registered_class

__all__ = ["Regularizer", "L1", "L2", "L1L2", "OrthogonalRegularizer", "l1", "l2", "l1_l2",
           "orthogonal_regularizer", "get", "serialize",
           "deserialize"]


def _num(x: float) -> str:
    return repr(float(x))


def _factor(cls: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or value < 0:
        raise ValueError(f"[{cls}] {name} must be a finite number >= 0, got {value!r}")
    return float(value)


class Regularizer(Configurable):
    """A penalty on a weight: ``expression(w)`` is the language's text of it
    for the weight variable named ``w``; calling the regularizer on a NumPy
    array evaluates that expression."""

    def expression(self, w: str) -> str:
        # A user's subclass computes in __call__ (Keras's way): fit traces that instead.
        raise NotImplementedError(f"[{type(self).__name__}] this regularizer computes in "
                                  f"__call__ and writes no expression of the language (fit and "
                                  f"evaluate trace its __call__; pipeline stages cannot yet)")

    def __call__(self, x) -> float:
        if type(self).expression is Regularizer.expression:
            raise NotImplementedError(f"[{type(self).__name__}] a Regularizer subclass must "
                                      f"define __call__(x) (or expression(w))")
        program = _core.Program(f"lambda(w, {self.expression('w')})",
                                f"<{type(self).__name__}>")
        return float(program.run([np.asarray(x)]))

    def get_config(self) -> dict:
        return {"class": type(self).__name__}



class L1L2(Regularizer):
    """``l1 * sum(abs(w)) + l2 * sum(square(w))`` (a zero factor's term left out)."""

    def __init__(self, l1=0.0, l2=0.0):
        cls = type(self).__name__
        self.l1 = _factor(cls, "l1", l1)
        self.l2 = _factor(cls, "l2", l2)

    def expression(self, w: str) -> str:
        terms = []
        if self.l1:
            terms.append(f"{_num(self.l1)} * sum(abs({w}))")
        if self.l2:
            terms.append(f"{_num(self.l2)} * sum(square({w}))")
        return " + ".join(terms) if terms else "0.0"

    def get_config(self) -> dict:
        return {"class": "L1L2", "l1": self.l1, "l2": self.l2}


class L1(L1L2):
    """``l1 * sum(abs(w))``."""

    def __init__(self, l1=0.01):
        super().__init__(l1=l1)

    def get_config(self) -> dict:
        return {"class": "L1", "l1": self.l1}


class L2(L1L2):
    """``l2 * sum(square(w))``."""

    def __init__(self, l2=0.01):
        super().__init__(l2=l2)

    def get_config(self) -> dict:
        return {"class": "L2", "l2": self.l2}


class OrthogonalRegularizer(Regularizer):
    """Keras's OrthogonalRegularizer for 2-d weights: pushes the rows
    (``mode="rows"``) or columns (``"columns"``) toward orthogonality."""

    def __init__(self, factor=0.01, mode="rows"):
        self.factor = _factor("OrthogonalRegularizer", "factor", factor)
        if mode not in ("rows", "columns"):
            raise ValueError(f"[OrthogonalRegularizer] mode must be 'rows' or 'columns', got "
                             f"{mode!r}")
        self.mode = mode

    def expression(self, w: str) -> str:
        axis, k = (1, 0) if self.mode == "rows" else (0, 1)
        n = f"({w} / sqrt(maximum(sum(square({w}), axis={axis}, keepdims=true), 1e-12)))"
        if self.mode == "columns":
            n = f"transpose{n}"
        size = f"shape({w})[{k}]"
        off = f"(({n} @ transpose({n})) * (1.0 - eye({size}, dtype=dtype_name({w}))))"
        return (f"{_num(self.factor)} * 0.5 * sum(abs{off}) / "
                f"({size} * ({size} - 1.0) / 2.0)")

    def get_config(self) -> dict:
        return {"class": "OrthogonalRegularizer", "factor": self.factor, "mode": self.mode}


_CLASSES = {c.__name__: c for c in (L1, L2, L1L2, OrthogonalRegularizer)}
_BY_NAME = {"l1": L1, "l2": L2, "l1_l2": L1L2, "l1l2": L1L2,
            "orthogonal_regularizer": OrthogonalRegularizer}


# Keras's lower-case names of the same classes (keras.regularizers.l2(1e-4))
l1, l2, l1_l2, orthogonal_regularizer = L1, L2, L1L2, OrthogonalRegularizer


def serialize(regularizer: Regularizer) -> dict:
    """``regularizer.get_config()``."""
    return regularizer.get_config()


def deserialize(config) -> Regularizer:
    """The regularizer a ``get_config()`` dict (or Keras's ``{"class_name":
    ..., "config": {...}}``) describes."""
    user = None if not isinstance(config, dict) or config.get("class_name") in _CLASSES else \
        registered_class(config)  # (a user's class: registered, or in a custom_object_scope)
    if user is not None:
        return user.from_config(dict(config.get("config") or {}))
    config = dict(config)
    if "class_name" in config and "class" not in config:
        config = {"class": config["class_name"], **(config.get("config") or {})}
    cls = _CLASSES.get(config.get("class"))
    if cls is None:
        raise ValueError(f"[regularizers.deserialize] unknown regularizer class "
                         f"{config.get('class')!r}{_hint(str(config.get('class')), _CLASSES)} "
                         f"Known: {sorted(_CLASSES)}")
    return cls.from_config(config)


def _hint(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def get(identifier):
    """A regularizer from a name (``"l1"``, ``"l2"``: factor 0.01;
    ``"l1_l2"``: both factors 0.01, as Keras's ``l1_l2()`` shortcut;
    ``"orthogonal_regularizer"``), a config dict or a Regularizer (returned as
    is). None stays None."""
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        cls = _BY_NAME.get(key) or _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(f"[regularizers.get] unknown regularizer {identifier!r}"
                             f"{_hint(key, _BY_NAME)} Known: {sorted(_BY_NAME)}")
        return L1L2(0.01, 0.01) if key in ("l1_l2", "l1l2") else cls()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    raise TypeError(f"[regularizers.get] expected a regularizer name, config dict or "
                    f"Regularizer, got {identifier!r}")
