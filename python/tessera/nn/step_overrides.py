"""A subclassed model's `compute_loss` override, traced into the compiled
training and evaluation steps (Keras 3's Model.compute_loss semantics).

fit and evaluate call the override once per program, on symbolic values: `x`
(the model's inputs, as `call` receives them), `y` (placeholders of the labels'
shapes and dtypes), `y_pred` (the model's outputs) and `sample_weight` (a
placeholder, or None when the data has no weights), plus `training` when the
override takes it. What it returns (a scalar) is the step's loss: its gradient
trains the weights, and it is logged as "loss". Sub-models it calls (a
distiller's teacher) join the model's weights, as Keras tracks them.
`super().compute_loss(...)` is the compiled loss of the values it is given,
plus the losses the layers add and the regularizers (Keras's default).
"""

from __future__ import annotations

import inspect

import numpy as np

from .functional import graph_layers
from .symbolic import KerasTensor, is_symbolic, user_location
from .variables import tracing

__all__ = ["overrides_compute_loss", "step_layers", "trace_compute_loss", "compiled_loss_tensor",
           "compiled_loss_value"]


def _user_override(model, hook: str):
    """The user's class that defines `hook` (None: tessera's own)."""
    owner = next((c for c in type(model).__mro__ if hook in c.__dict__), None)
    if owner is None or owner.__module__.startswith("tessera."):
        return None
    return owner


def overrides_compute_loss(model) -> bool:
    return _user_override(model, "compute_loss") is not None


class CompiledLoss:
    """The node `super().compute_loss(...)` records: compile's losses of the
    labels and outputs it was given, plus the layers' added losses and the
    regularizers, written when the step is (not a layer: no weights)."""

    params: list = []
    trainable = True

    def __init__(self, model, n_out: int, weighted: bool):
        self.model, self.n_out, self.weighted = model, n_out, weighted
        self.name = "compute_loss"

    def _is_custom(self) -> bool:
        return False

    def forward(self, exprs, p, ctx):
        n = self.n_out
        ys, hs = exprs[:n], exprs[n:2 * n]
        sw = exprs[2 * n] if self.weighted else None
        terms = self.model._compiled_loss_terms(ys, hs, sw, ctx)
        dtype = self.model.dtype
        if not terms:  # Keras on JAX: no loss at all is a loss of 0
            return f"astype(0.0, \"{dtype}\")"
        return f"astype({' + '.join(f'({t})' for t in terms)}, \"{dtype}\")"


def _flat(v, what: str, where: str) -> list:
    if isinstance(v, dict):
        v = list(v.values())
    vs = list(v) if isinstance(v, (list, tuple)) else [v]
    for t in vs:
        if not isinstance(t, KerasTensor):
            raise TypeError(f"[compute_loss] {what} must be the symbolic values compute_loss "
                            f"received (or computed from them), got {type(t).__name__} "
                            f"(at {where})")
    return vs


def compiled_loss_tensor(model, y, y_pred, sample_weight):
    """Model.compute_loss (Keras's default) on symbolic values: one node
    written as compile's losses, the added losses and the regularizers."""
    where = user_location()
    if model._compiled is None:
        raise RuntimeError(f"[compute_loss] call model.compile(...) first (at {where})")
    hs = _flat(y_pred, "y_pred", where)
    n = len(model._outputs)
    if len(hs) != n:
        raise ValueError(f"[compute_loss] y_pred has {len(hs)} values for a model of {n} "
                         f"outputs (at {where})")
    given = [l is not None for l in model._compiled.losses]
    ys = _flat(y, "y", where) if y is not None else []
    if any(given) and len(ys) != n:
        raise ValueError(f"[compute_loss] y has {len(ys)} values for a model of {n} outputs "
                         f"(at {where})")
    ys = ys or hs  # no compiled loss reads labels
    ins = ys + hs
    weighted = sample_weight is not None
    if weighted:
        ins += _flat(sample_weight, "sample_weight", where)[:1]
    node = CompiledLoss(model, n, weighted)
    return KerasTensor((), model.dtype, "layer", args=(node, ins, True), where=where)


def compiled_loss_value(model, y, y_pred, sample_weight):
    """Model.compute_loss on arrays (called outside fit): compile's losses,
    each weighted by its loss weight, of the arrays, now."""
    c = model._compiled
    if c is None:
        raise RuntimeError(f"[compute_loss] call model.compile(...) first (at {user_location()})")
    n = len(c.losses)
    ys = list(y) if n > 1 else [y]
    ps = list(y_pred) if n > 1 else [y_pred]
    total = 0.0
    for loss, w, yv, pv in zip(c.losses, c.loss_weights, ys, ps):
        if loss is not None and w:
            total += w * float(loss(np.asarray(yv), np.asarray(pv), sample_weight))
    return np.asarray(total, dtype=model.dtype)


def _placeholder(shape, dtype, name):
    return KerasTensor((None,) + tuple(shape), dtype, "input", name=name)


def trace_compute_loss(model, weighted: bool, training: bool):
    """(loss tensor, label placeholders, sample-weight placeholder or None):
    the override called on symbolic values (cached per kind and labels)."""
    specs = tuple(getattr(model, "_label_specs", None) or ())
    key = (weighted, training, specs, model.dtype)
    cache = model.__dict__.setdefault("_loss_traces", {})
    if key in cache:
        return cache[key]
    if not specs:
        specs = tuple((tuple(t.shape[1:]), model.dtype) for t in model._outputs)
    ys = [_placeholder(s, d, f"y{k}") for k, (s, d) in enumerate(specs)]
    sw = _placeholder((), model.dtype, "sample_weight") if weighted else None
    x = model.input
    y = ys[0] if len(ys) == 1 else list(ys)
    y_pred = model._as_declared(list(model._outputs))
    kwargs = {"x": x, "y": y, "y_pred": y_pred, "sample_weight": sw}
    fn = type(model).compute_loss
    try:
        takes = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes = {}
    if "training" in takes or any(p.kind == p.VAR_KEYWORD for p in takes.values()):
        kwargs["training"] = training
    owner = _user_override(model, "compute_loss").__name__
    with tracing():
        loss = model.compute_loss(**kwargs)
    if not isinstance(loss, KerasTensor):
        raise TypeError(f"[compute_loss] {owner}.compute_loss must return the loss as a scalar "
                        f"computed from its arguments (with keras.ops or NumPy functions), got "
                        f"{type(loss).__name__}: {loss!r}")
    if tuple(loss.shape) != ():
        raise ValueError(f"[compute_loss] {owner}.compute_loss returned a value of shape "
                         f"{tuple(loss.shape)} (made at {loss.where}): the loss must be a scalar "
                         "(reduce it, e.g. ops.mean)")
    cache[key] = (loss, ys, sw)
    return cache[key]


def step_layers(model, weighted: bool) -> list:
    """The layers the override reaches that the model's graph does not (a
    teacher called only in compute_loss), in the order met."""
    loss, _, _ = trace_compute_loss(model, weighted, True)
    have = {id(l) for l in model._layers}
    leaves, _ = graph_layers([loss])
    return [l for l in leaves if id(l) not in have and not isinstance(l, CompiledLoss)]


def refuse_split(model, how: str):
    """compute_loss overrides in one process only (each part of a split batch
    would return its own loss, whose weighting tessera cannot know)."""
    if overrides_compute_loss(model):
        owner = _user_override(model, "compute_loss").__name__
        raise NotImplementedError(
            f"[fit] {owner} overrides compute_loss, which {how} does not support yet (each "
            "part of the batch would compute its own loss); fit in one process without "
            f"deterministic=, ZeRO or pipeline stages (at {user_location()})")


def symbolic_args(*values) -> bool:
    return any(is_symbolic(v) for v in values if v is not None) or any(
        is_symbolic(t) for v in values if isinstance(v, (list, tuple)) for t in v)
