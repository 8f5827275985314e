"""Layer weights assigned inside a layer's `call` (`self.count.assign_add(1.0)`, a moving
average kept by hand), as Keras 3's stateless (JAX) steps treat them.

While a call is traced, what it assigns is read as assigned by the rest of the call
(symbolic.PARAM_OVERRIDES) and recorded here, per call (`recording_call_writes`). When a
model's programs are written, each written call hands its assignments on
(`add_program_writes`): a later call of the same layer reads the new value, and the
non-trainable weights' new values become outputs of the program, which the model stores
after each batch (fit's step returns them with the other non-trainable weights, evaluate's
and predict's programs after their results: `state_results`). Trainable weights keep their
value: Keras's step drops what a call assigns to them."""

from __future__ import annotations

import contextlib
import contextvars
import weakref

from . import tree as _tree
from .symbolic import PARAM_OVERRIDES, user_location

__all__ = ["recording_call_writes", "call_writes", "returned_as_assigned",
           "collecting_program_writes", "add_program_writes", "program_write", "kept_writes",
           "refuse_split_writes", "remember_state_results", "state_results"]

# {(id(layer), weight name): (Variable, symbolic value)} while one layer's call is traced:
# the layer weights it assigned, each with the last value it was given
_CALL_WRITES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_call_writes",
                                                              default=None)
# {(id(layer), weight name): (Variable, expression, the layer whose call assigned it)} while
# a model's forward code is written: the latest value each call assigned
_PROGRAM_WRITES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_program_writes",
                                                                 default=None)
# {evaluate or predict program: the weights whose new values it gives after its result}
# (the programs of each input shape too: varlen.py keeps a table of programs per shape)
_STATE_RESULTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def recording_call_writes():
    """Within (one layer's call traced): the layer weights the call assigns are recorded
    in the yielded dict, {(id(layer), weight name): (Variable, last value)}; when it ends,
    the rest of an enclosing call reads them as it did before (their new values are in
    this call's placeholders, which the enclosing call does not see)."""
    record: dict = {}
    token = _CALL_WRITES.set(record)
    ov = PARAM_OVERRIDES.get()
    before = dict(ov) if ov is not None else None
    try:
        yield record
    finally:
        _CALL_WRITES.reset(token)
        if ov is not None:
            for key in record:
                if key in before:
                    ov[key] = before[key]
                else:
                    ov.pop(key, None)


def call_writes():
    """The record of the call being traced (recording_call_writes), or None."""
    return _CALL_WRITES.get()


def returned_as_assigned(out, writes: dict):
    """A call's result with each layer weight it assigned and returns (`return
    self.total`) replaced by the value assigned, as Keras's call returns it."""
    if not writes:
        return out

    def swap(o):
        layer = getattr(o, "_layer", None) if hasattr(o, "_param") else None
        hit = writes.get((id(layer), o._param)) if layer is not None else None
        return o if hit is None else hit[1]

    return _tree.map_structure(swap, out)


@contextlib.contextmanager
def collecting_program_writes():
    """Within (a model's forward code written): the written expressions of the values
    layers' calls assign, {(id(layer), weight name): (Variable, expression, calling
    layer)}, the latest assignment last."""
    record: dict = {}
    token = _PROGRAM_WRITES.set(record)
    try:
        yield record
    finally:
        _PROGRAM_WRITES.reset(token)


def add_program_writes(pairs, caller):
    """Records [(Variable, expression)] that `caller`'s written call assigned. Outside a
    model's forward code (a GradientTape train_step's program), a non-trainable weight
    assigned is refused: that program would drop its new value."""
    record = _PROGRAM_WRITES.get()
    if record is None:
        kept = [var for var, _ in pairs if not var.trainable]
        if kept:
            raise ValueError(f"[{caller.kind}] layer {caller.name!r} assigns the "
                             f"non-trainable weight {kept[0].path} in its call, which this "
                             "program (a train_step with GradientTape) does not keep yet; "
                             "train with fit's own step (no train_step override), or keep the "
                             f"value in a metric (at {user_location()})")
        return
    for var, expr in pairs:
        key = (id(var._layer), var._param)
        record.pop(key, None)  # (the latest assignment last)
        record[key] = (var, expr, caller)


def program_write(key):
    """The expression a written call assigned to the layer weight `key`, or None."""
    record = _PROGRAM_WRITES.get()
    hit = None if record is None else record.get(key)
    return None if hit is None else hit[1]


def kept_writes(model, writes: dict, state_vars, pipeline: bool) -> list:
    """[(program variable, expression)] of the non-trainable weights (`state_vars`) among
    `writes` (collecting_program_writes's record); refused in a pipeline stage."""
    kept = [(model._var_of[k], e, caller) for k, (_, e, caller) in writes.items()
            if k in model._var_of and model._var_of[k] in state_vars]
    if kept and pipeline:
        raise ValueError(f"[{model.kind}] layer {kept[0][2].name!r} assigns a non-trainable "
                         "weight in its call, which pipeline stages do not support yet (the "
                         f"new value would be lost); train without pipeline stages (at "
                         f"{user_location()})")
    return [(v, e) for v, e, _ in kept]


def refuse_split_writes(model, kept: list) -> None:
    """A training step that splits the batch (data-parallel, ZeRO, deterministic chunks)
    refuses a model whose calls assign non-trainable weights: each part of the batch would
    compute its own new value."""
    if kept:
        layer, p = model._owner[kept[0][0]]
        raise ValueError(f"[fit] layer {layer.name!r} assigns its non-trainable weight "
                         f"{p.name!r} in its call, which data-parallel (several processes), "
                         "ZeRO or deterministic=True training does not support yet: each part "
                         "of the batch would compute its own new value; train in one process "
                         f"without deterministic=True (at {user_location()})")


def remember_state_results(prog, kept: list) -> None:
    """Notes which weights' new values the evaluate or predict program `prog` gives."""
    if kept:
        _STATE_RESULTS[prog] = [v for v, _ in kept]


def state_results(prog) -> list:
    """The weights whose new values an evaluate or predict program gives after its
    result (the non-trainable weights the layers' calls assign), in order."""
    return _STATE_RESULTS.get(prog, [])
