"""Models with axes of unknown length (``Input(shape=(None,))``): the graph
is recorded once with the unknown axes; each concrete shape met by fit,
evaluate or predict gets the graph recorded again on inputs of that shape
(every layer then knows its lengths: a recurrent layer unrolls its steps,
attention sizes its masks) and programs of its own, kept in a cache of the
most recently used shapes (docs/nn.md, "Variable lengths and masks"). A
subclassed model, whose call Keras runs on any shape, is written again the same
way for each per-sample shape other than the one it was built for."""

from __future__ import annotations

import functools
import os
import sys
from collections import OrderedDict

from .functional import clone_graph
from .registry import is_model
from .symbolic import stand_in_input

__all__ = ["VarLenMixin", "keeps_graph", "shape_cache_size"]

_CACHE_KEY = ("varlen_shapes",)


def shape_cache_size() -> int:
    """How many concrete shapes keep their graph and programs (the least
    recently used is dropped past it): TESSERA_SHAPE_CACHE, else 8."""
    raw = os.environ.get("TESSERA_SHAPE_CACHE", "8")
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"[fit] TESSERA_SHAPE_CACHE must be a positive int, got {raw!r}") \
            from None
    if n <= 0:
        raise ValueError(f"[fit] TESSERA_SHAPE_CACHE must be a positive int, got {raw!r}")
    return n


def keeps_graph(method):
    """fit / evaluate / predict: the graph (and programs) in force when the
    call began are in force again when it returns, whatever concrete shape
    the call specialized the model for."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        outer = self.__dict__.get("_varlen_general")
        saved = (self._inputs, self._outputs, self._programs)
        try:
            return method(self, *args, **kwargs)
        finally:
            if outer is not None:  # inside another call's shape: back to it
                self._inputs, self._outputs, self._programs = saved
                self._varlen_general = outer
            elif self.__dict__.get("_varlen_general") is not None:
                self._inputs, self._outputs, self._programs = self._varlen_general
                self._varlen_general = None

    return wrapper


class VarLenMixin:
    """Per-shape graphs and programs for Model."""

    #: compiles (graphs recorded for a new shape) since the model was made
    varlen_compiles = 0

    def _general_graph(self):
        """(inputs, outputs, programs) of the graph as the user recorded it."""
        g = self.__dict__.get("_varlen_general")
        return g if g is not None else (self._inputs, self._outputs, self._programs)

    def _shapes_follow_data(self) -> bool:
        """A subclassed model (its own call, not a graph of Inputs): Keras runs its
        call on inputs of any shape, so each per-sample shape met gets its graph
        recorded again, as an axis of unknown length does."""
        return not self._functional and not is_model(self, "Sequential")

    def _has_unknown_lengths(self) -> bool:
        ins = self._general_graph()[0]
        return any(d is None for t in ins for d in t.shape[1:])

    def _specialize(self, shapes, where: str, verbose=0):
        """Puts in force the graph and programs for inputs of per-sample
        `shapes` (a list, one per input) when the model has axes of unknown
        length, or is a subclassed model met with other shapes than it was built
        for; nothing otherwise."""
        ins, outs, progs = self._general_graph()
        if not self._has_unknown_lengths() and not (
                self._shapes_follow_data() and ins and
                [tuple(s) for s in shapes] != [tuple(t.shape[1:]) for t in ins]):
            if self.__dict__.get("_varlen_general") is not None:
                # back to the graph as recorded (a dataset's batches of the shape it was
                # built for, after others)
                self._inputs, self._outputs, self._programs = ins, outs, progs
                self._varlen_general = None
            return
        key = tuple(tuple(int(d) for d in s) for s in shapes)
        cache = progs.get(_CACHE_KEY)
        if cache is None:
            cache = progs[_CACHE_KEY] = OrderedDict()
        entry = cache.get(key)
        if entry is None:
            for t, s in zip(ins, key):
                if any(d == 0 for d in s):
                    raise ValueError(f"[{where}] input {t.name or 'x'} has an empty axis: "
                                     f"per-sample shape {s}")
            new_ins = [stand_in_input(shape=s, dtype=t.dtype, name=t.name) for t, s in zip(ins, key)]
            try:
                new_outs = clone_graph(outs, ins, new_ins)
            except (ValueError, TypeError) as e:
                raise type(e)(f"[{where}] the model cannot be written for inputs of per-sample "
                              f"shape {list(key)}: {e}") from None
            entry = (new_ins, new_outs, {})
            cache[key] = entry
            limit = shape_cache_size()
            while len(cache) > limit:
                cache.popitem(last=False)
            self.varlen_compiles = self.varlen_compiles + 1
            if verbose == "auto":
                verbose = sys.stdout.isatty()
            if verbose:
                print(f"[{where}] model {self.name!r}: new input shape "
                      f"{[(None,) + s for s in key]}, its programs are written "
                      f"({self.varlen_compiles} shapes so far, {len(cache)} kept; "
                      "bucket lengths to bound this)", file=sys.stdout)
        else:
            cache.move_to_end(key)
        self._varlen_general = (ins, outs, progs)
        self._inputs, self._outputs, self._programs = entry
