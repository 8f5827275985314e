"""Keras's `training` for a call given none and made outside any other call:
the default of the called `call`'s own `training` parameter (Keras's third
rule, after the argument and the outer call's value). It decides a subclassed
model called on arrays (real_nvp's `call(x, training=True)` runs its flow from
data to latent when called eagerly, and backwards in predict) and a model called
inside a traced compute_loss override, where Keras's step has no outer call:
`self(x)` there runs with the signature's default, None (so inference: Dropout
off) unless it says True.

Keras's call context also decides the layers a model's programs write
(`written_training`): a layer given no `training` takes its enclosing call's,
and where that is None (no call above it has one) its own call's default. On
JAX, Keras's `fit`, `evaluate` and `predict` run a subclassed model by
`stateless_call`, which calls `model.call` itself, not `model(...)`: no call
context is opened, so the layers its `call` calls without `training` run with
their own default (None: inference, Dropout off, BatchNormalization on its
moving statistics, which do not move), whatever the step; a functional or
Sequential model passes its `training` on to every layer of its graph, over the
`training=` a node was recorded with (keras/src/models/functional.py,
operation_fn)."""
from __future__ import annotations

import contextlib
import contextvars
import inspect

__all__ = ["signature_training", "eager_training", "outside_calls", "step_call_training",
           "written_training", "keep_origin", "eager_context"]

_OUTSIDE_CALLS: contextvars.ContextVar = contextvars.ContextVar(
    "tessera_nn_outside_calls", default=False)


def signature_training(fn):
    """The default of fn's `training` parameter when it is True or False, else None."""
    try:
        p = inspect.signature(fn).parameters.get("training")
    except (TypeError, ValueError):
        return None
    if p is None or not isinstance(p.default, bool):
        return None
    return p.default


def eager_training(fn, given):
    """An eager call's training: the one given, else fn's default."""
    return given if given is not None else signature_training(fn)


def eager_context(model, given):
    """`model` (an eager call's one-layer model), marked to run with Keras's call context
    of None when the call was given no `training`: the layers of a functional graph
    recorded with `training=` keep it (Keras's operation_fn passes on only a training
    that is not None), the others take their own call's default (written_training)."""
    if given is None:
        model.__dict__["_context_none"] = True
    return model


@contextlib.contextmanager
def outside_calls():
    """Calls made in this block (a compute_loss override being traced) are outside
    any other call, as in Keras's step: one given no training takes its signature's."""
    token = _OUTSIDE_CALLS.set(True)
    try:
        yield
    finally:
        _OUTSIDE_CALLS.reset(token)


def step_call_training(layer, given, nesting: int):
    """(training of a user's call on symbolic tensors, the node's keyword arguments
    that force it): inside outside_calls() and not nested in another call's trace,
    a call given no training runs with its call's default (None as False), forced in the
    programs whatever their mode; else (given, {}) (the program's mode decides)."""
    if given is not None or nesting or not _OUTSIDE_CALLS.get():
        return given, {}
    forced = bool(signature_training(layer.call))
    return forced, {"training": forced}


def _stateless_entry(model, node) -> bool:
    """`node` is the call of the subclassed model whose own programs are written
    (its graph's, not a `self(x)` in a compute_loss override): Keras's JAX trainer
    calls its `call` directly (stateless_call), with no call context for the
    layers it calls."""
    return node.args[0] is model and not getattr(node, "in_call", False) and \
        not getattr(model, "_functional", True) and getattr(model, "kind", "") != "Sequential"


def written_training(model, node, enclosing, mode: str):
    """(the program's training flag for a layer node of `model`'s program written in
    `mode` ("true"/"false"), the value the layers inside it inherit: True, False or
    None as Keras's call context holds it, None running as inference). `enclosing` is
    the value of the call the node sits in. A node given `training` inside a user's
    call (or forced by step_call_training) keeps it; one recorded with it in a
    functional graph keeps it only where the graph runs with None; else it takes the
    enclosing value, and with none its call's default."""
    if _stateless_entry(model, node):
        return mode, None
    given = node.kwargs.get("training")
    if given is None:
        given = getattr(node, "call_training", None)  # (a user's layer or model, given it)
    if given is not None and (enclosing is None or getattr(node, "in_call", False)):
        held = bool(given)
    elif enclosing is not None:
        held = enclosing
    else:  # (a built-in layer's too: Keras's image augmentation defaults to True)
        held = signature_training(node.args[0].call)
    return ("true" if held else "false"), held


def keep_origin(node, results):
    """`results` of clone_graph's new call of a layer node, which keep where the node's
    `training=` was given (a functional graph's node stays one: written_training)."""
    for r in results if isinstance(results, (list, tuple)) else [results]:
        target = r.args[0] if getattr(r, "op", None) == "item" else r
        if getattr(target, "op", None) == "layer":
            target.in_call = getattr(node, "in_call", False)
    return results
