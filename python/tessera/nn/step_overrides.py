"""A subclassed model's `compute_loss`, `train_step` and `test_step`
overrides, traced into the compiled training and evaluation steps (Keras 3's
Model semantics).

fit and evaluate call the override once per program, on symbolic values: `x`
(the model's inputs, as `call` receives them), `y` (placeholders of the labels'
shapes and dtypes), `y_pred` (the model's outputs) and `sample_weight` (a
placeholder, the structure given per output with a placeholder each: step_weights.py,
or None when the data has no weights), plus `training` when the
override takes it. What it returns (a scalar) is the step's loss: its gradient
trains the weights, and it is logged as "loss". Sub-models it calls (a
distiller's teacher) join the model's weights, as Keras tracks them.
`super().compute_loss(...)` is the compiled loss of the values it is given,
plus the losses the layers add and the regularizers (Keras's default).

A `train_step(self, data)` override is traced the same way, on symbolic data
(x, (x, y) or (x, y, sample_weight)), in the form TensorFlow's guide writes it:
`with keras.GradientTape() as tape:` the loss, `tape.gradient(loss, weights)`,
`self.optimizer.apply(grads, weights)` (or `apply_gradients`), metrics'
`update_state`, and a dict of `m.result()` returned. fit runs the traced
step as its compiled program: value_and_grad of the tape's loss, the update
of the weights applied, and each metric's increments summed over the epoch
(its result logged under the dict's key). `test_step(self, data)` likewise
for evaluate (no tape).
"""

from __future__ import annotations

import contextvars
import inspect

import numpy as np

from .. import optim as _optim
from . import ops
from .call_defaults import outside_calls
from .functional import graph_layers
from .metric_base import MeanMetricWrapper, Metric
from .symbolic import KerasTensor, WeightGradients, is_symbolic, record_operation, user_location
from .step_weights import (as_program_sw, bind_sw, sw_key, sw_placeholders,
                           weights_per_output)
from .variables import collecting_updates, tracing

__all__ = ["overrides_compute_loss", "step_layers", "trace_compute_loss", "compiled_loss_tensor",
           "compiled_loss_value", "GradientTape", "trace_step", "step_trace_for",
           "overridden_step", "refuse_unshaped_step_data",
           "StepOverridesMixin"]


def _user_override(model, hook: str):
    """The user's class that defines `hook` (None: tessera's own, unless the
    class traces it as a user's would: its _traced_hooks, a Distiller's)."""
    owner = next((c for c in type(model).__mro__ if hook in c.__dict__), None)
    if owner is None or (owner.__module__.startswith("tessera.") and
                         hook not in owner.__dict__.get("_traced_hooks", ())):
        return None
    return owner


def _refuse_stateless_form(owner, hook: str):
    """Keras's JAX trainer calls train_step(self, state, data) and test_step(self, state,
    data) (stateless); tessera traces the (self, data) form of its TensorFlow and torch
    trainers: the JAX form is refused by name, with the forms that work."""
    try:
        params = list(inspect.signature(owner.__dict__[hook]).parameters.values())[1:]
    except (TypeError, ValueError, KeyError):
        return
    needed = [p.name for p in params if p.default is p.empty and
              p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(needed) > 1:
        verb = "fit" if hook == "train_step" else "evaluate"
        raise NotImplementedError(
            f"[{verb}] {owner.__name__}.{hook} takes {needed}: the stateless {hook}(self, "
            f"state, data) of Keras's JAX trainer is not supported; tessera calls {hook}(self, "
            "data) as Keras's TensorFlow and PyTorch trainers do (with keras.GradientTape for "
            "the gradients), or override compute_loss(x, y, y_pred, sample_weight), which "
            "every Keras backend runs (docs/nn.md, \"Custom training\")")


def overrides_compute_loss(model) -> bool:
    return _user_override(model, "compute_loss") is not None


def _drop_unlogged_output_losses(model, loss):
    """Keras logs each output's compiled loss ("<output>_loss") only when its compiled loss
    runs: a compute_loss override that never calls super().compute_loss (ddpm's returns
    `self.loss(noise, pred_noise)`) logs "loss" alone, so compile's per-output trackers go."""
    compiled = getattr(model, "_compiled", None)
    if compiled is None or not compiled.output_losses:
        return
    leaves, _ = graph_layers([loss])
    if not any(isinstance(l, CompiledLoss) for l in leaves):
        compiled.output_losses = []
        model.__dict__.pop("_tracker_objects", None)


class CompiledLoss:
    """The node `super().compute_loss(...)` records: compile's losses of the
    labels and outputs it was given, plus the layers' added losses and the
    regularizers, written when the step is (not a layer: no weights)."""

    params: list = []
    trainable = True

    def __init__(self, model, n_out: int, weighted, w_shape=None):
        # weighted: False, True (one tensor for every output) or a flag per output (each
        # output's own weights, None for an unweighted one: step_weights.py)
        self.model, self.n_out, self.weighted = model, n_out, weighted
        self.w_shape = w_shape  # (the weights' shape but the batch axis, as passed; a list)
        self.name = "compute_loss"
        self.only = None  # an output's index: its loss alone, before its loss weight

    def _is_custom(self) -> bool:
        return False

    def forward(self, exprs, p, ctx):
        n = self.n_out
        ys, hs = exprs[:n], exprs[n:2 * n]
        sw = exprs[2 * n] if self.weighted else None
        given = self.model.__dict__.get("_sw_given")
        if isinstance(self.weighted, tuple):
            it = iter(exprs[2 * n:])
            sw = [next(it) if f else None for f in self.weighted]
            # (the weights fit was given per output, passed on: back in the programs' form)
            sw = [w if w is None or not isinstance(given, list) or s != tuple(given[k] or ())
                  else as_program_sw(self.model, w, k)
                  for k, (w, s) in enumerate(zip(sw, self.w_shape))]
        if isinstance(self.weighted, tuple) and not isinstance(given, list):
            # (the one array fit was given, passed on for each output as Keras gives it)
            shape = given_sw_shape(self.model)
            sw = [w if w is None or s != shape else as_program_sw(self.model, w)
                  for w, s in zip(sw, self.w_shape)]
        elif sw is not None and not isinstance(given, list) and \
                self.w_shape == given_sw_shape(self.model):
            sw = as_program_sw(self.model, sw)  # (the weights fit was given, passed on)
        dtype = self.model.dtype
        if self.only is not None:  # (Keras's "<output>_loss" tracker records it)
            return f"astype({self.model._output_loss_expr(self.only, ys, hs, sw, ctx)}, " \
                   f"\"{dtype}\")"
        terms = self.model._compiled_loss_terms(ys, hs, sw, ctx)
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


def _symbolic_labels(y):
    """Labels a step made of constants (metric_learning's `ops.arange(num_classes)`, an
    array while traced) as tensors of the step (a recorded copy of the array)."""
    if isinstance(y, (np.ndarray, np.generic)):
        return record_operation("copy", (np.asarray(y),), {})
    if isinstance(y, (list, tuple)):
        return type(y)(_symbolic_labels(v) for v in y)
    return y


def _by_output_keys(model, v):
    """A dict by the outputs' keys in the outputs' order (Keras matches them by key)."""
    if isinstance(v, dict) and set(v) == set(model._output_names()):
        return [v[k] for k in model._output_names()]
    return v


def compiled_loss_tensor(model, y, y_pred, sample_weight):
    """Model.compute_loss (Keras's default) on symbolic values: one node
    written as compile's losses, the added losses and the regularizers."""
    where = user_location()
    if model._compiled is None:
        raise RuntimeError(f"[compute_loss] call model.compile(...) first (at {where})")
    y, y_pred = (_by_output_keys(model, v) for v in (y, y_pred))
    hs = _flat(y_pred, "y_pred", where)
    n = len(model._outputs)
    if len(hs) != n:
        # (the first outputs, or values of their shapes computed from the outputs:
        # masked_image_modeling's reconstruction of the masked patches against the patches)
        if not (model._labels_of_first_outputs(len(hs)) and
                all(h is t or tuple(h.shape[1:]) == tuple(t.shape[1:])
                    for h, t in zip(hs, model._outputs))):
            raise ValueError(f"[compute_loss] y_pred has {len(hs)} values for a model of {n} "
                             f"outputs (at {where}); fewer are taken when compile was given "
                             "one loss and they are the model's first outputs, as called")
        n = len(hs)  # compile's loss for those (Keras builds it on the y_pred it is given)
    given = [l is not None for l in model._compiled.losses]
    ys = _flat(_symbolic_labels(y), "y", where) if y is not None else []
    if any(given) and len(ys) != n:
        raise ValueError(f"[compute_loss] y has {len(ys)} values for a model of {n} outputs "
                         f"(at {where})")
    ys = ys or hs  # no compiled loss reads labels
    ins = ys + hs
    sample_weight = weights_per_output(model, sample_weight, n, "compute_loss")
    weighted = sample_weight is not None
    w_shape = None
    if isinstance(sample_weight, list):  # one entry per output (None: unweighted)
        weighted = tuple(w is not None for w in sample_weight)
        ins += [w for w in sample_weight if w is not None]
        w_shape = [None if w is None else tuple(w.shape[1:]) for w in sample_weight]
        if not any(weighted):
            weighted = False
    elif weighted:
        ins += _flat(sample_weight, "sample_weight", where)
        w_shape = tuple(ins[-1].shape[1:])
    node = CompiledLoss(model, n, weighted, w_shape)
    node.sw_given = sample_weight  # (what each output's loss is weighted by: loss_weights_map)
    _track_output_losses(model, node, ins, hs, where)
    return KerasTensor((), model.dtype, "layer", args=(node, ins, True), where=where)


def loss_weights_map(loss, sw_phs):
    """Which of fit's weights each output's logged loss ("<output>_loss") is weighted by,
    as the override passed them to super().compute_loss: per output None (unweighted), "sw"
    (fit's one array), an output's index (its own array, as given per output), or "given"
    (weights it computed: fit's weights of that output are used); None without such a call."""
    nodes = [l for l in graph_layers([loss])[0] if isinstance(l, CompiledLoss)]
    if not nodes:
        return None
    node = nodes[0]
    given = node.sw_given
    entries = given if isinstance(given, list) else [given] * node.n_out

    def which(w):
        if w is None:
            return None
        if isinstance(sw_phs, list):
            return next((j for j, ph in enumerate(sw_phs) if ph is w), "given")
        return "sw" if w is sw_phs else "given"
    return [which(w) for w in entries]


def _track_output_losses(model, node, ins, hs, where):
    """In a traced train_step or test_step, Keras's compiled loss of several outputs
    updates each output's loss tracker ("<output>_loss", in model.metrics from then on)
    with that output's loss before its loss weight, weighted by the batch's size."""
    trace = _ACTIVE.get()
    outputs = model._compiled.output_losses
    if trace is None or trace.model is not model or not outputs or node.n_out < 2:
        return  # (a loss of the first output alone: Keras's is built on it, no trackers)
    batch = ops.cast(ops.shape(hs[0])[0], "float32")
    for tracker, t in zip(model._output_loss_trackers(), outputs):
        if t.k >= node.n_out:
            continue
        part = CompiledLoss(model, node.n_out, node.weighted, node.w_shape)
        part.only = t.k
        value = KerasTensor((), model.dtype, "layer", args=(part, ins, True), where=where)
        tracker.update_state(value, sample_weight=batch)
    model.__dict__["_step_output_losses"] = True


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


def _call_compute_loss(model, x, y, y_pred, sample_weight, training):
    """model.compute_loss as Keras's trainers call it: `training` passed
    only to an override that takes it (Keras 3.3's compatibility)."""
    kwargs = {"x": x, "y": y, "y_pred": y_pred, "sample_weight": sample_weight}
    try:
        takes = inspect.signature(type(model).compute_loss).parameters
    except (TypeError, ValueError):
        takes = {}
    if "training" in takes or any(p.kind == p.VAR_KEYWORD for p in takes.values()):
        kwargs["training"] = training
    return model.compute_loss(**kwargs)


def _given_labels(model, ys):
    """The `y` an override gets: the label placeholders, those given only (the first
    outputs' labels, compile.py's _padded_labels), one alone as itself; a dict-output
    model's by its keys, as Keras gives them."""
    m = model.__dict__.get("_labels_count") or len(ys)
    if m > 1 and m == len(ys) and getattr(model, "_output_keys", None):
        return dict(zip(model._output_names(), ys))
    return ys[0] if m == 1 else list(ys[:m])


def given_sw_shape(model) -> tuple:
    """The sample weights' shape as fit/evaluate were given them, but the batch axis: an
    override gets them so, as in Keras ((batch,) when not known)."""
    return tuple(model.__dict__.get("_sw_given") or ())


def _placeholder(shape, dtype, name):
    return KerasTensor((None,) + tuple(shape), dtype, "input", name=name)


def trace_compute_loss(model, weighted: bool, training: bool):
    """(loss tensor, label placeholders, sample-weight placeholder or None):
    the override called on symbolic values (cached per kind and labels)."""
    specs = tuple(getattr(model, "_label_specs", None) or ())
    has_y = model.__dict__.get("_labels_given", True)
    key = (weighted, training, specs, model.__dict__.get("_labels_count"), has_y, model.dtype,
           tuple(id(t) for t in model._inputs), sw_key(model) if weighted else None)
    cache = model.__dict__.setdefault("_loss_traces", {})
    if key in cache:
        return cache[key]
    if not specs:
        specs = tuple((tuple(t.shape[1:]), model.dtype) for t in model._outputs)
    ys = [_placeholder(s, d, f"y{k}") for k, (s, d) in enumerate(specs)]
    sw, sw_phs = sw_placeholders(model, weighted, model.dtype)
    x = model.input
    y = _given_labels(model, ys) if has_y else None  # (fit(x): Keras's y is None)
    y_pred = model._as_declared(list(model._outputs))
    owner = _user_override(model, "compute_loss").__name__
    with tracing(), outside_calls():  # (self(x) there: Keras's step has no outer call)
        loss = _call_compute_loss(model, x, y, y_pred, sw, training)
    if not isinstance(loss, KerasTensor):
        raise TypeError(f"[compute_loss] {owner}.compute_loss must return the loss as a scalar "
                        f"computed from its arguments (with keras.ops or NumPy functions), got "
                        f"{type(loss).__name__}: {loss!r}")
    if tuple(loss.shape) != ():
        raise ValueError(f"[compute_loss] {owner}.compute_loss returned a value of shape "
                         f"{tuple(loss.shape)} (made at {loss.where}): the loss must be a scalar "
                         "(reduce it, e.g. ops.mean)")
    _drop_unlogged_output_losses(model, loss)
    model.__dict__.setdefault("_loss_sw_maps", {})[key] = loss_weights_map(loss, sw_phs)
    cache[key] = (loss, ys, sw_phs)
    return cache[key]


def step_roots(model, which: str, weighted: bool):
    """(step trace or None, the tensors the step computes besides the
    model's outputs) of fit's ("train") or evaluate's ("evaluate") step."""
    trace = step_trace_for(model, which, weighted)
    if trace is not None:
        roots = [] if trace.loss is None else [trace.loss]
        roots += list((trace.custom_grads or {}).values())
        for per in trace.increments.values():
            roots += [t for incs, _ in per for _, t in incs]
        for _, y, p, w in trace.builtin.values():
            roots += [t for t in (y, p, w) if t is not None]
        return trace, roots
    if overrides_compute_loss(model):
        return None, [trace_compute_loss(model, weighted, which == "train")[0]]
    return None, []


def step_layers(model, which: str, weighted: bool) -> list:
    """The layers an override reaches that the model's graph does not (a
    teacher called only in compute_loss or train_step), in the order met."""
    _, roots = step_roots(model, which, weighted)
    if not roots:
        return []
    have = {id(l) for l in model._layers}
    leaves, _ = graph_layers(roots)
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
        is_symbolic(t) for v in values if isinstance(v, (list, tuple, dict))
        for t in (v.values() if isinstance(v, dict) else v))


# ------------------------------------------------------------ train_step / test_step

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_step_trace", default=None)


class StepGradient:
    """What GradientTape.gradient gives in a traced train_step: the gradient
    of the tape's target for one weight, for optimizer.apply (or
    apply_gradients) only."""

    # Where such a gradient may go (the refusal's message).
    APPLY = "self.optimizer.apply(grads, weights) (or apply_gradients)"

    def __init__(self, trace, var: str):
        self.trace, self.var = trace, var

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(
            f"[GradientTape.gradient] the gradients of a traced train_step can only be passed "
            f"to {self.APPLY} as they are; computing with them (clipping, scaling) is not "
            f"supported yet: set the optimizer's clipnorm/clipvalue instead "
            f"(at {user_location()})")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __neg__ = __pow__ = __array__ = _refuse

    def __repr__(self):
        return f"<gradient of {self.var} in a traced train_step>"


class GradientTape:
    """tessera.nn.GradientTape: the tape of a Model's train_step override, as
    TensorFlow's is written (`with keras.GradientTape() as tape: ...`,
    `tape.gradient(loss, self.trainable_weights)`). fit traces the step into
    its compiled program: the gradient is that program's (value_and_grad of
    the loss), and the gradients go to `self.optimizer.apply(grads, weights)`
    (or `apply_gradients(zip(grads, weights))`). Outside a traced train_step
    it raises; on arrays use tessera.value_and_grad."""

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self.persistent = persistent
        self.watch_accessed_variables = watch_accessed_variables
        self._watched: list = []
        self._used = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def watch(self, tensor):
        """Keras's: every weight the step reads is watched already (unless the
        tape was made with watch_accessed_variables=False: then only these)."""
        self._watched += list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]

    def _watched_keys(self, trace):
        """The weights a tape made with watch_accessed_variables=False
        watches (None: every weight the step reads)."""
        if self.watch_accessed_variables:
            return None
        return {trace.key_of(v, "GradientTape.watch") for v in self._watched}

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=None):
        trace = _ACTIVE.get()
        if trace is None or trace.hook != "train_step":
            raise RuntimeError(f"[GradientTape.gradient] works inside a Model's train_step "
                               f"override, which fit traces into its compiled step; on arrays "
                               f"use tessera.value_and_grad (at {user_location()})")
        if output_gradients is not None:
            raise NotImplementedError(f"[GradientTape.gradient] output_gradients is not "
                                      f"supported (at {user_location()})")
        if getattr(trace, "multi_update", False):  # a step training sub-models (tape_steps.py)
            if self._used and not self.persistent:
                raise RuntimeError("A non-persistent GradientTape can only be used to compute "
                                   "one set of gradients (or jacobians)")  # (TensorFlow's)
            self._used = True
            return trace.tape_gradient(self, target, sources)
        if self._used and not self.persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute "
                               "one set of gradients (or jacobians)")  # (TensorFlow's)
        self._used = True
        return trace.gradient(target, sources)


class ResultOf:
    """metric.result() in a traced step: logged as that metric's result
    over the interval (Keras's metric reset each epoch)."""

    def __init__(self, metric):
        self.metric = metric


class _CompileMetricsProxy:
    """model.metrics' CompileMetrics while a step is traced: update_state
    records compile's metrics, result() gives their results by log name."""

    name = "compile_metrics"

    def __init__(self, trace, real):
        self.trace, self.real = trace, real
        self.first_only = False  # compile's metrics updated for the first output alone

    def update_state(self, y_true, y_pred, sample_weight=None):
        per = self.real._per_output
        model = self.trace.model
        if len(per) > 1 and isinstance(y_pred, KerasTensor) and model._labels_of_first_outputs(1) \
                and tuple(y_pred.shape[1:]) == tuple(model._outputs[0].shape[1:]):
            # super().compute_metrics(x, y, logits): Keras builds its CompileMetrics on the
            # one value it is given (unprefixed names): the first output, or a value of its
            # shape computed from the outputs (masked_image_modeling's masked patches)
            self.first_only, per = True, per[:1]
        names = model._output_names()[:len(per)]
        ys, ps = ([v] if len(per) == 1 else [v[k] for k in names] if isinstance(v, dict)
                  else list(v) for v in (y_true, y_pred))
        sws = weights_per_output(model, sample_weight, len(per), "compute_metrics")
        sws = sws if isinstance(sws, list) else [sws] * len(per)
        # as Keras's CompileMetrics: the weights reach compile's weighted_metrics only
        for ms, flags, y, p, w in zip(per, self.real._weighted, ys, ps, sws):
            for m, weighted in zip(ms, flags):
                m.update_state(y, p, sample_weight=w if weighted else None)

    def result(self):
        if self.first_only:
            return {m.name: ResultOf(m) for m in self.real._per_output[0]}
        ms = [m for per in self.real._per_output for m in per]
        return {name: ResultOf(m) for name, m in zip(self.real._log_names, ms)}

    def reset_state(self):
        pass


class StepTrace:
    """A train_step or test_step override traced on symbolic data: the loss
    its tape differentiates, the weights its optimizer.apply updates, and
    the logs it returns, each a metric's result with the increments its
    update_state made (summed over an epoch's batches by fit)."""

    def __init__(self, model, hook: str):
        self.model, self.hook = model, hook
        self.loss = None  # the tape's target
        self.sources: list = []
        self.applied = None  # the weights optimizer.apply updates (program names)
        self.loss_gradients: dict = {}  # id of a gradient of the loss -> its weight's name
        self.custom_grads = None  # {weight name: the tensor applied}: computed gradients
        self.builtin: dict = {}  # id(metric) -> (metric, y, p, w): a built-in's update
        self.logs: list = []  # (name, metric)
        self.increments: dict = {}  # id(metric) -> per variable: [(sign, tensor)], const
        self.placeholders = ([], None)

    def var_name(self, v, what: str) -> str:
        layer, pname = getattr(v, "_layer", None), getattr(v, "_param", None)
        name = self.model._var_of.get((id(layer), pname)) if layer is not None else None
        if name is None:
            raise ValueError(f"[{what}] {v!r} is not one of the model's weights (the weights "
                             f"of the layers its call and {self.hook} use) (at "
                             f"{user_location()})")
        return name

    def gradient(self, target, sources, tape=None):
        """The first gradient of a scalar loss is the step's loss (fit's value_and_grad of
        it, its gradients applied as they are). Every gradient is also a tensor of
        the step (WeightGradients' "wgrad"): computed with (scaled, normalized,
        combined) or differentiated again by an outer tape (a second-order term), the
        step applies what it is given, written into its program."""
        where = user_location()
        single = not isinstance(sources, (list, tuple, dict))
        srcs = list(sources.values()) if isinstance(sources, dict) else \
            [sources] if single else list(sources)
        targets = list(target) if isinstance(target, (list, tuple)) else [target]
        if not targets or not all(isinstance(t, KerasTensor) for t in targets):
            raise ValueError(f"[GradientTape.gradient] the target must be the loss (or "
                             f"tensors) computed in the step, got "
                             f"{[type(t).__name__ for t in targets]} (at {where})")
        names = [self.var_name(v, "GradientTape.gradient") for v in srcs]
        first = self.loss is None and not isinstance(target, (list, tuple)) and \
            tuple(target.shape) == ()
        if not first:
            self._refuse_moving_statistics(targets, where)
        call = WeightGradients(targets, [(v._layer, v._param) for v in srcs],
                               self.model.dtype, where)
        out = call.tensors
        if first:
            self.sources, self.loss = names, target
            self.loss_gradients = {g.id: n for g, n in zip(out, names)}
        if isinstance(sources, dict):
            return dict(zip(sources.keys(), out))
        return out[0] if single else out

    def _refuse_moving_statistics(self, targets, where):
        """A gradient written again as a function of the weights would move a
        BatchNormalization's statistics twice (its batch statistics are the step's aux)."""
        for layer in graph_layers(targets)[0]:
            if any(getattr(q, "name", None) == "moving_mean" for q in layer.params):
                raise NotImplementedError(
                    f"[GradientTape.gradient] a second gradient (or one computed with) "
                    f"through layer {layer.name!r} ({layer.kind}), which keeps moving "
                    f"statistics, is not supported yet in a traced train_step (at {where})")

    def apply(self, optimizer, grads, variables, what="apply"):
        where = user_location()
        if optimizer is not self.model.optimizer:
            raise NotImplementedError(
                f"[Optimizer.{what}] only the model's compiled optimizer (self.optimizer) can "
                f"be applied in a traced {self.hook}: a step that trains parts of the model "
                f"with optimizers of their own (a GAN's) is not supported yet (at {where})")
        if self.applied is not None:
            raise NotImplementedError(f"[Optimizer.{what}] is called twice in the traced "
                                      f"{self.hook}: tessera's step makes one update (at {where})")
        grads, variables = list(grads), list(variables)
        if len(grads) != len(variables):
            raise ValueError(f"[Optimizer.{what}] {len(grads)} gradients for "
                             f"{len(variables)} weights (at {where})")
        names = []
        for g, v in zip(grads, variables):
            name = self.var_name(v, f"Optimizer.{what}")
            if not isinstance(g, KerasTensor):
                raise NotImplementedError(
                    f"[Optimizer.{what}] the gradient given for {name} is "
                    f"{type(g).__name__}: a traced {self.hook} applies tensors it computed "
                    f"from its GradientTape's gradients (at {where})")
            if tuple(g.shape) != tuple(v.shape):
                raise ValueError(f"[Optimizer.{what}] the gradient given for {name} has shape "
                                 f"{tuple(g.shape)}, the weight {tuple(v.shape)} (at {where})")
            given = self.loss_gradients.get(g.id)
            if given is not None and given != name:
                raise ValueError(f"[Optimizer.{what}] the gradient of {given} is given for the "
                                 f"weight {name} (at {where})")
            names.append(name)
        self.applied = names
        # what the step makes after this reads the updated weights in Keras (run_eagerly's
        # values refuse it: model/eager.py)
        self.applied_at = KerasTensor((), "float32", "input").id
        if any(self.loss_gradients.get(g.id) is None for g in grads):
            # computed gradients: the step's program applies these tensors (a loss's
            # gradients applied as they are stay fit's value_and_grad)
            self.custom_grads = dict(zip(names, grads))

    # -------------------------------------------------------------- logs
    def carried(self, writer) -> list:
        """The values the logs' sums are made of (the metrics' arguments and
        increments), written with the step: the training step carries them
        out of its differentiated function (sum_exprs makes the sums after)."""
        out = []
        for _, m in self.logs:
            entry = self.builtin.get(id(m))
            if entry is not None:
                out += [writer.expr(t) for t in entry[1:] if t is not None]
                continue
            for incs, _ in self.increments.get(id(m), ()):
                out += [writer.expr(t) for _, t in incs]
        return out

    def sum_exprs(self, names, ctx) -> list:
        """Every log's per-batch sums (float64 expressions) of the carried
        values' `names`, in order."""
        it = iter(names)
        out = []
        for _, m in self.logs:
            entry = self.builtin.get(id(m))
            if entry is not None:
                _, y, p, w = entry
                y_, p_ = next(it), next(it)
                w_ = None if w is None else next(it)
                exprs = m.expressions_for(y_, p_, w_, ctx, (tuple(y.shape[1:]), y.dtype),
                                          tuple(p.shape[1:]))
                out += [f"astype({e}, \"float64\")" for e in exprs]
                continue
            for (incs, const), v in zip(self.increments.get(id(m), ()), m.variables):
                terms = [f"{'-' if s < 0 else ''}astype({next(it)}, \"float64\")"
                         for s, _ in incs]
                terms.append(f"zeros({list(v.shape)}, dtype=\"float64\") + {float(const)!r}")
                out.append(" + ".join(terms))
        return out

    def sizes(self) -> list:
        out = []
        for _, m in self.logs:
            if id(m) in self.builtin:
                out += [(), ()]
            else:
                out += [tuple(v.shape) for v in m.variables]
        return out

    def counts(self) -> list:
        return [2 if id(m) in self.builtin else len(m.variables) for _, m in self.logs]

    @property
    def names(self) -> list:
        return [name for name, _ in self.logs]

    def results(self, totals) -> list:
        out, k = [], 0
        for (_, m), n in zip(self.logs, self.counts()):
            part = totals[k:k + n]
            r = m.result(part) if id(m) in self.builtin else m.stateless_result(part)
            out.append(float(r) if np.ndim(r) == 0 else [float(v) for v in np.ravel(r)])
            k += n
        return out


def _step_metrics(model) -> list:
    """The Metric objects a step may update: the model's attributes (and
    lists of them), model.metrics (a user's property, or the loss tracker
    and compile's), and compile's metrics."""
    found: list = []

    def add(m):
        if isinstance(m, Metric) and all(m is not f for f in found):
            found.append(m)
            for ms in getattr(m, "_per_output", None) or []:  # CompileMetrics
                for u in ms:
                    add(u)

    for v in list(vars(model).values()):
        for u in (v if isinstance(v, (list, tuple)) else [v]):
            add(u)
    for m in model.metrics:
        add(m)
    for ms in model._compiled.metrics if model._compiled else []:
        for m in ms:
            add(m)
    for m in model._output_loss_trackers() if model._compiled else []:
        add(m)  # (updated when the step calls super().compute_loss)
    return found


def overridden_step(model, hook: str) -> bool:
    return _user_override(model, hook) is not None


def refuse_unshaped_step_data(model, xs, where: str) -> None:
    """A train_step/test_step override is traced on the model's own inputs as its data;
    batches whose x is not shaped as those inputs (metric_learning's (2, classes, h, w, 3)
    anchors and positives, embedded by `self(data[0])`) are refused by name."""
    hook = {"fit": "train_step", "evaluate": "test_step"}.get(where)
    if hook is None or not overridden_step(model, hook) or not model._inputs:
        return
    for a, t in zip(xs, model._inputs):
        got, want = tuple(np.shape(a)[1:]), tuple(t.shape[1:])
        if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
            raise NotImplementedError(
                f"[{where}] {_user_override(model, hook).__name__}.{hook} is traced on data "
                f"shaped as the model's inputs {want} a sample; the batches' x has {got} a "
                f"sample (data the step slices or reshapes before calling the model is not "
                f"supported yet)")


def trace_step(model, hook: str, weighted: bool) -> StepTrace:
    """The override `hook` ("train_step" or "test_step") called on symbolic
    data, as fit/evaluate give it: x, (x, y) or (x, y, sample_weight)."""
    specs = tuple(getattr(model, "_label_specs", None) or ())
    has_y = model.__dict__.get("_labels_given", True)
    key = (hook, weighted, specs, has_y, model.__dict__.get("_labels_count"), model.dtype,
           tuple(id(t) for t in model._inputs), sw_key(model) if weighted else None)
    cache = model.__dict__.setdefault("_step_traces", {})
    if key in cache:
        return cache[key]
    which = hook.split(":")[1] if hook.startswith("compute_metrics:") else None
    owner_class = _user_override(model, "compute_metrics" if which else hook)
    if not which:
        _refuse_stateless_form(owner_class, hook)
    owner = owner_class.__name__
    trace = StepTrace(model, hook)
    ys = [_placeholder(s, d, f"y{k}") for k, (s, d) in enumerate(specs)]
    sw, sw_phs = sw_placeholders(model, weighted, model.dtype)
    trace.placeholders = (ys, sw_phs)
    x = model.input
    y = _given_labels(model, ys)
    data = x if not has_y else ((x, y) if sw is None else (x, y, sw))
    model._trackers()
    held = model.__dict__["_tracker_objects"]
    metrics = _step_metrics(model)
    saved = {id(m): [np.array(v.value, copy=True) for v in m.variables] for m in metrics}
    shadowed = []

    def record_builtin(m):
        def update_state(y_true=None, y_pred=None, sample_weight=None, **kwargs):
            if not (isinstance(y_true, KerasTensor) and isinstance(y_pred, KerasTensor)):
                raise TypeError(f"[{m.name}] update_state in a traced {hook} takes the step's "
                                f"symbolic (y_true, y_pred), got {type(y_true).__name__} and "
                                f"{type(y_pred).__name__} (at {user_location()})")
            if not isinstance(m, MeanMetricWrapper):
                raise NotImplementedError(
                    f"[{m.name}] {type(m).__name__}.update_state in a traced {hook} is not "
                    f"supported yet (mean metrics such as accuracy and mae are, and Metric "
                    f"subclasses with update_state, e.g. keras.metrics.Mean) "
                    f"(at {user_location()})")
            if id(m) in trace.builtin:
                raise NotImplementedError(f"[{m.name}] update_state is called twice in the "
                                          f"traced {hook} (at {user_location()})")
            trace.builtin[id(m)] = (m, y_true, y_pred, sample_weight)
        return update_state

    for m in metrics:
        m.__dict__["result"] = (lambda m=m: ResultOf(m))
        if not m._stateful():
            m.__dict__["update_state"] = record_builtin(m)
        shadowed.append(m)
    proxy = _CompileMetricsProxy(trace, held[2]) if held[2] is not None else None
    if proxy is not None:
        model.__dict__["_tracker_objects"] = (held[0], held[1], proxy, held[3])
    # the compiled optimizer, and the other optimizers the model holds (a GAN's d_optimizer),
    # whose apply is refused by name instead of an AttributeError
    optimizers = [model.optimizer] + [o for o in vars(model).values()
                                      if isinstance(o, _optim.Optimizer)
                                      and o is not model.optimizer]
    for optimizer in optimizers:
        optimizer.__dict__["apply"] = lambda grads, variables=None, o=optimizer: trace.apply(
            o, grads, variables if variables is not None else model.trainable_weights)
        optimizer.__dict__["apply_gradients"] = lambda pairs, o=optimizer: trace.apply(
            o, *zip(*list(pairs)) if pairs else ((), ()), what="apply_gradients")
    token = _ACTIVE.set(trace)
    model.__dict__["_step_self_call"] = True
    try:
        with collecting_updates() as record, tracing():
            if which is not None:
                logs = _default_step(model, trace, x, y if has_y else None, sw,
                                     which == "train", held[1])
            else:
                logs = getattr(model, hook)(data)
    finally:
        _ACTIVE.reset(token)
        model.__dict__.pop("_step_self_call", None)
        model.__dict__.pop("_step_output_losses", None)
        model.__dict__["_tracker_objects"] = held
        for optimizer in optimizers:
            for name in ("apply", "apply_gradients"):
                optimizer.__dict__.pop(name, None)
        for m in shadowed:
            m.__dict__.pop("result", None)
            m.__dict__.pop("update_state", None)
    # a constant increment (count += 1) ran on the variables: taken back, kept as a constant
    for m in metrics:
        per = []
        for v, before in zip(m.variables, saved[id(m)]):
            const = np.asarray(v.value, dtype=np.float64) - before
            v.assign(before)
            entry = record.get(id(v))
            if entry is not None and entry[2]:
                raise ValueError(f"[{m.name}] {type(m).__name__}.update_state assigns "
                                 f"{v.name!r} (assign) in the traced {hook}: tessera sums each "
                                 "batch's increments, so state must change by "
                                 "assign_add/assign_sub only")
            incs = [] if entry is None else entry[1]
            const = float(np.sum(const)) + sum(s * float(np.sum(t)) for s, t in incs
                                               if not isinstance(t, KerasTensor))
            per.append(([(s, t) for s, t in incs if isinstance(t, KerasTensor)], const))
        trace.increments[id(m)] = per
    trace.logs = _log_entries(logs, owner, "compute_metrics" if which else hook)
    if hook == "train_step" and trace.loss is None:
        raise NotImplementedError(
            f"[fit] {owner}.train_step computes no gradient: tessera traces a train_step "
            "that takes one GradientTape.gradient of its loss and applies it with "
            "self.optimizer.apply (docs/nn.md, \"Custom training\")")
    if hook == "train_step" and trace.applied is None:
        raise NotImplementedError(f"[fit] {owner}.train_step never calls self.optimizer.apply"
                                  "(grads, weights) (or apply_gradients): nothing would train")
    cache[key] = trace
    return trace


def _default_step(model, trace, x, y, sw, training: bool, loss_tracker):
    """Keras's own train_step/test_step around a compute_metrics override:
    the outputs, compute_loss, the loss tracker (weighted by the batch's
    size), the update of every trainable weight, then compute_metrics."""
    y_pred = model._as_declared(list(model._outputs))
    loss = _call_compute_loss(model, x, y, y_pred, sw, training)
    if not isinstance(loss, KerasTensor) or tuple(loss.shape) != ():
        raise TypeError(f"[compute_loss] must return the loss as a scalar computed from its "
                        f"arguments, got {getattr(loss, 'shape', type(loss).__name__)}")
    if training:
        trace.loss = loss
        trace.applied = list(model._params(True))
    batch = ops.cast(ops.shape(model._inputs[0])[0], "float32")
    loss_tracker.update_state(loss, sample_weight=batch)
    return model.compute_metrics(x, y, y_pred, sw)


def _log_entries(logs, owner: str, hook: str) -> list:
    """(name, metric) per returned log: each value a metric's result()."""
    if not isinstance(logs, dict):
        raise TypeError(f"[{hook}] {owner}.{hook} must return its logs as a dict of metric "
                        f"results, got {type(logs).__name__}")
    out = []
    for k, v in logs.items():
        if isinstance(v, dict):
            out += _log_entries(v, owner, hook)  # (Keras flattens compile_metrics' dict)
            continue
        if not isinstance(v, ResultOf):
            raise NotImplementedError(
                f"[{hook}] {owner}.{hook} returns {k!r}: {type(v).__name__}; a traced step's "
                "logs must be metric results (m.result() of metrics it updates, as keras-io's "
                "guides return {m.name: m.result() for m in self.metrics}); a tensor logged "
                "as the last batch's value is not supported yet: track it with a "
                "keras.metrics.Mean")
        out.append((k, v.metric))
    return out


def step_trace_for(model, which: str, weighted: bool):
    """The traced override of fit's ("train") or evaluate's ("evaluate")
    step, or None when the model has none."""
    hook = "train_step" if which == "train" else "test_step"
    for name in (hook, "compute_metrics"):
        if overridden_step(model, name):
            return trace_step(model, hook if name == hook else f"compute_metrics:{which}",
                              weighted)
    return None


def refuse_step_split(model, how: str):
    for hook in ("train_step", "test_step"):
        if overridden_step(model, hook):
            raise NotImplementedError(
                f"[fit] {type(model).__name__} overrides {hook}, which {how} does not support "
                f"yet (at {user_location()})")


class StepOverridesMixin:
    """The overrides' part of a model's programs, mixed into ProgramsMixin."""

    def _step_log_sums(self, names):
        """(statements, sums) of a traced step's logs from the carried
        values' `names` (_write_step_loss), or None without such a step."""
        held = self.__dict__.pop("_step_aux", None)
        if held is None:
            return None
        ctx, stmts = self._loss_ctx("_stp")
        return stmts, held[0].sum_exprs(names if names is not None else held[1], ctx)

    def _write_step_loss(self, writer, training, ys, sw):
        """A train_step/test_step override's loss and log sums, or a
        compute_loss override's loss, written with the forward pass
        (this module); _loss_text and the programs take them."""
        which = "train" if training == "true" else "evaluate"
        self.__dict__.pop("_step_grads", None)
        self.__dict__.pop("_loss_sw_map", None)
        weighted = tuple(w is not None for w in sw) if isinstance(sw, list) else sw is not None
        trace = step_trace_for(self, which, weighted)
        if trace is not None:
            phs, sw_ph = trace.placeholders
            writer.names.update({t.id: e for t, e in zip(phs, ys)})
            bind_sw(self, writer.names, sw_ph, sw)
            self.__dict__["_custom_loss"] = f"astype(0.0, \"{self.dtype}\")" \
                if trace.loss is None else writer.expr(trace.loss)
            carried = trace.carried(writer)
            if training == "true" and trace.custom_grads is not None:
                # the gradients the step computed leave the loss function after the logs'
                # values (_train_program applies them)
                self.__dict__["_step_grads"] = (len(carried), list(trace.custom_grads))
                carried += [writer.expr(g) for g in trace.custom_grads.values()]
            self.__dict__["_step_aux"] = (trace, carried)
            return
        if not overrides_compute_loss(self):
            return
        loss, phs, sw_ph = trace_compute_loss(self, weighted, training == "true")
        self.__dict__["_loss_sw_map"] = next((m for k, m in self.__dict__.get(
            "_loss_sw_maps", {}).items() if self._loss_traces.get(k, (None,))[0] is loss), None)
        writer.names.update({t.id: e for t, e in zip(phs, ys)})
        bind_sw(self, writer.names, sw_ph, sw)
        self.__dict__["_custom_loss"] = writer.expr(loss)

    def _add_step_layers(self, kind):
        """The layers an override reaches beyond the model's graph (a
        distiller's teacher) join the model's weights, as Keras tracks them;
        a train_step updating only some weights trains only those."""
        name = kind if isinstance(kind, str) else kind[0]
        which = "train" if name.startswith("train") else "evaluate"
        if name in ("train_dp", "train_det") or getattr(self, "_pipeline", None) is not None:
            how = "data-parallel or deterministic training"
            refuse_split(self, how)
            refuse_step_split(self, how)
            return
        weighted = isinstance(kind, tuple) and (kind[1] if isinstance(kind[1], tuple)
                                                else bool(kind[1]))
        self.__dict__.pop("_step_frozen", None)
        new = step_layers(self, which, weighted)
        if new:
            self._layers.extend(new)
            self._assign_vars()
            self._create_values()
            self._programs.clear()
        trace = step_trace_for(self, which, weighted)
        if which == "train" and trace is not None:
            applied = set(trace.applied)
            self.__dict__["_step_frozen"] = {v for v in self._params(True) if v not in applied}
