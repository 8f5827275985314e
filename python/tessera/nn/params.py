"""A layer's parameters and their starting values, below the layers and
Variables that hold them: `Param` (a declared parameter), `initial_value`
(its seeded draw), `DeferredValues` (a layer's values, drawn when first
read) and `WEIGHTS_IN_FILE` (what load_model's file can fill)."""

from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from . import initializers


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
    constraint: object = None  # a constraints.Constraint (add_weight's constraint=)
    dtype: object = None  # add_weight's integer or bool dtype (None: the model's float dtype)


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
    v = dict.get(layer._values, name)
    if isinstance(v, _Draw):
        return tuple(v.param.shape), np.dtype(v.param.dtype or v.dtype)
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
    return init.generate(tuple(param.shape), param.dtype or dtype, seed)
