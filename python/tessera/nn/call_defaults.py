"""Keras's `training` for a call given none and made outside any other call:
the default of the called `call`'s own `training` parameter (Keras's third
rule, after the argument and the outer call's value). It decides a subclassed
model called on arrays (real_nvp's `call(x, training=True)` runs its flow from
data to latent when called eagerly, and backwards in predict) and a model called
inside a traced compute_loss override, where Keras's step has no outer call:
`self(x)` there runs with the signature's default, None (so inference: Dropout
off) unless it says True."""
from __future__ import annotations

import contextlib
import contextvars
import inspect

__all__ = ["signature_training", "eager_training", "outside_calls", "step_call_training"]

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
