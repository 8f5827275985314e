"""A `train_step(self, data)` override that trains several parts of a model,
each with its own `GradientTape` and optimizer (a GAN's generator and
discriminator), on a model that defines no `call` (Keras 3's Model
semantics, as its TensorFlow and PyTorch trainers run it).

fit traces the override once on symbolic data (one placeholder per array of
a batch, batch axis None): `keras.random` draws, the sub-models' calls, the
losses, every `tape.gradient(loss, weights)` and every optimizer's
`apply_gradients`/`apply`, in the order the step makes them. The whole step
becomes one program of tessera's language:

    define(tape_step, <weights>, <optimizers' state>, <data>, <it_j, lr_j>..., seed, block(
      define(phase_0, <sources>, <loss>), define(r_0, value_and_grad(phase_0, ...)(...)),
      <update 0: the sources' new values under new names>,
      define(phase_1, ...), ...          # reads the weights as the step left them
      list(<logged values>, <weights>, <state>)))

Each value reads the weights as they were when the step computed it: every
update gives its weights new names (`l3_kernel__1`), and a value made after
the update reads the new name, one made before it the old one; so the
second optimizer sees the first one's update, as in Keras. Metrics' update_state
calls are recorded and replayed on the step's values after each batch; the
logs are what the override returns (metric results, or values: the batch's).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from .. import data as _data
from .. import optim as _optim
from . import callbacks as _cb
from .functional import carried_mask_exprs, graph_layers
from .layers import Context
from .metric_base import Metric
from .optimizer_variables import attach_tape
from .program_constants import compile_program
from .step_overrides import _ACTIVE, StepGradient, _user_override
from .utils import PyDataset
from .symbolic import (STEP_SEED, GraphWriter, KerasTensor, depending_on, in_gradient_function,
                       user_location)
from .variables import tracing

__all__ = ["uses_tape_steps", "trains_on_own_data", "fit_tape_steps", "adopt_sublayers", "TapeGradient"]


def uses_tape_steps(model) -> bool:
    """A model whose train_step is its user's and that defines no call: its
    step trains sub-models (a GAN), each part with its own tape and optimizer."""
    if getattr(model, "_functional", False) or getattr(model, "kind", "") == "Sequential":
        return False  # (a graph of its own: its call is the graph's)
    return _user_override(model, "train_step") is not None and \
        _user_override(model, "call") is None


def trains_on_own_data(model, x) -> bool:
    """A model with inputs of its own (a functional one) whose train_step is given batches
    whose x is not shaped as those inputs (metric_learning's (2, classes, h, w, 3) anchors
    and positives, embedded by `self(data[0])`): its step is traced on the data's own
    shapes and dtypes, the model called inside on what it is given, as Keras runs it."""
    if _user_override(model, "train_step") is None or not model._inputs or x is None:
        return False
    first = x[0] if isinstance(x, PyDataset) and len(x) else x
    if isinstance(first, list):
        first = tuple(first)
    if isinstance(x, PyDataset) and isinstance(first, tuple):
        first = first[0]  # (x, y[, sample_weight])
    xs = list(first) if isinstance(first, (list, tuple)) else [first]
    if isinstance(first, dict) or len(xs) != len(model._inputs) or \
            not all(isinstance(a, np.ndarray) for a in xs):
        return False  # (a Dataset's batches, arrays given as lists: fit's own checks)
    for a, t in zip(xs, model._inputs):
        got, want = tuple(np.shape(a)[1:]), tuple(t.shape[1:])
        if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
            return True
    return False


def _vname(var: str, version: int) -> str:
    return var if version == 0 else f"{var}__{version}"


def _mark() -> int:
    """The id the next symbolic value will get: values made before a mark
    are older than it (ids only grow)."""
    return KerasTensor((), "float32", "input").id


class TapeGradient(StepGradient):
    """What GradientTape.gradient gives in a traced multi-update step: the
    gradient of phase `phase`'s loss for its source `index`, for an
    optimizer's apply_gradients/apply only (any arithmetic refused as
    StepGradient's)."""

    APPLY = "an optimizer's apply_gradients (or apply)"

    def __init__(self, trace, phase: int, index: int, key):  # its own fields, not a var name
        self.trace, self.phase, self.index, self.key = trace, phase, index, key

    def __repr__(self):
        return f"<gradient of {self.trace.var_of[self.key]} in a traced train_step>"


class _Recorded:
    """metric.result() in the traced step: the metric's result after the
    batch's recorded updates."""

    def __init__(self, metric):
        self.metric = metric


class TapeStepTrace:
    """The override traced on symbolic data: its phases (a loss and the
    weights it is differentiated for), its updates (an optimizer, the
    weights and their phases' gradients), the metric updates and the logs."""

    multi_update = True
    hook = "train_step"

    def __init__(self, model):
        self.model = model
        self.phases: list = []  # (loss tensor, [key], mark)
        self.updates: list = []  # (optimizer, [(key, phase, index)], mark)
        self.metric_calls: list = []  # (metric, args, kwargs) with tensors
        self.logs: list = []  # (name, tensor or _Recorded)
        self.var_of: dict = {}  # (id(layer), param) -> the program's name of the weight
        self.layer_of: dict = {}  # key -> (layer, param)

    # ----------------------------------------------------------- recording
    def key_of(self, v, what: str):
        layer, pname = getattr(v, "_layer", None), getattr(v, "_param", None)
        if layer is None or pname is None:
            raise TypeError(f"[{what}] expected the model's weights (Variables, e.g. "
                            f"self.generator.trainable_weights), got {type(v).__name__} "
                            f"(at {user_location()})")
        key = (id(layer), pname)
        if key not in self.var_of:
            raise ValueError(f"[{what}] {getattr(v, 'path', v)!r} is not a weight of the "
                             f"layers {type(self.model).__name__}.train_step calls (at "
                             f"{user_location()})")
        return key

    def tape_gradient(self, tape, target, sources):
        """GradientTape.gradient in the traced step: the gradients of a loss with respect
        to weights (for an optimizer), or a tensor's gradient with respect to computed
        tensors (see value_gradient)."""
        where = user_location()
        single = not isinstance(sources, (list, tuple, dict))
        srcs = list(sources.values()) if isinstance(sources, dict) else \
            [sources] if single else list(sources)
        computed = [isinstance(s, KerasTensor) and getattr(s, "_layer", None) is None
                    for s in srcs]
        if any(computed):
            if not all(computed):
                raise NotImplementedError(
                    f"[GradientTape.gradient] the gradient with respect to computed values and "
                    f"weights at once is not supported: take them with two tapes (at {where})")
            return self.value_gradient(target, sources, srcs, single, where)
        if not isinstance(target, KerasTensor) or tuple(target.shape) != ():
            what = getattr(target, "shape", type(target).__name__)
            raise ValueError(f"[GradientTape.gradient] the target must be a scalar loss "
                             f"computed in the step, got {what} (at {where})")
        keys = [self.key_of(s, "GradientTape.gradient") for s in srcs]
        reached = {id(l) for l in graph_layers([target])[0]}
        watched = tape._watched_keys(self)
        phase = len(self.phases)
        self.phases.append((target, keys, _mark()))
        out = [TapeGradient(self, phase, i, k)
               if k[0] in reached and (watched is None or k in watched) else None
               for i, k in enumerate(keys)]
        if isinstance(sources, dict):
            return dict(zip(sources.keys(), out))
        return out[0] if single else out

    @staticmethod
    def value_gradient(target, sources, srcs, single, where):
        """The gradient of `target` (summed, as TensorFlow's tape sums a non-scalar
        target) with respect to computed tensors (WGAN-GP's interpolated images): a
        tensor of the step, written as grad of the target's computation as a function of
        the source. Inside another tape's loss it is differentiated in turn (a
        second-order gradient)."""
        if not isinstance(target, KerasTensor):
            raise ValueError(f"[GradientTape.gradient] the target must be a tensor computed in "
                             f"the step, got {type(target).__name__} (at {where})")
        for s in srcs:
            if not depending_on(target, s)[target.id]:
                raise ValueError(f"[GradientTape.gradient] the target (made at {target.where}) "
                                 f"does not depend on the source (made at {s.where}): its "
                                 f"gradient is None under TensorFlow, not a tensor (at {where})")
        out = [KerasTensor(s.shape, s.dtype, "grad", (s,), where=where) for s in srcs]
        for t in out:
            t.grad_target = target
        if isinstance(sources, dict):
            return dict(zip(sources.keys(), out))
        return out[0] if single else out

    def apply(self, optimizer, grads, variables, what: str):
        where = user_location()
        grads = list(grads)
        if variables is None:
            raise NotImplementedError(f"[Optimizer.{what}] in a traced train_step give the "
                                      f"weights too: apply(grads, weights) (at {where})")
        variables = list(variables)
        if len(grads) != len(variables):
            raise ValueError(f"[Optimizer.{what}] {len(grads)} gradients for {len(variables)} "
                             f"weights: give one gradient per weight (at {where})")
        if not grads:
            return  # Keras: an empty update is a no-op
        first = next((pairs for o, pairs, _ in self.updates if o is optimizer), None)
        pairs, missing = [], []
        for g, v in zip(grads, variables):
            key = self.key_of(v, f"Optimizer.{what}")
            if g is None:
                missing.append(getattr(v, "path", self.var_of[key]))
                continue
            if not isinstance(g, TapeGradient) or g.trace is not self:
                raise NotImplementedError(
                    f"[Optimizer.{what}] the gradient given for {getattr(v, 'path', v)} is "
                    f"{type(g).__name__}: a traced train_step applies the gradients its "
                    f"GradientTape.gradient returned, as they are (at {where})")
            if g.key != key:
                raise ValueError(f"[Optimizer.{what}] the gradient of "
                                 f"{self.var_of[g.key]} is given for the weight "
                                 f"{self.var_of[key]} (at {where})")
            pairs.append((key, g.phase, g.index))
        if not pairs:
            raise ValueError("No gradients provided for any variable.")  # Keras's words
        if first is not None:  # Keras: an optimizer updates the weights it was built for
            known = {key for key, _, _ in first}
            for key, _, _ in pairs:
                if key not in known:
                    layer, param = self.layer_of[key]
                    raise ValueError(
                        f"[Optimizer.{what}] Unknown variable: "
                        f"{layer._variable(param.name).path}. This optimizer can only be called "
                        "for the variables it was originally built with (Keras's words): give "
                        f"each set of weights an optimizer of its own (at {where})")
        if missing:
            warnings.warn(f"Gradients do not exist for variables {missing} when minimizing "
                          "the loss.", stacklevel=3)  # (Keras's warning)
        self.updates.append((optimizer, pairs, _mark()))

    # ----------------------------------------------------------- versions
    def version(self, key, when: int) -> int:
        """How many updates of the weight `key` the step made before `when`."""
        return sum(1 for _, pairs, mark in self.updates if mark < when
                   and any(k == key for k, _, _ in pairs))

    def final_version(self, key) -> int:
        return self.version(key, float("inf"))

    def trainable_keys(self) -> list:
        return [k for k in self.var_of if self.final_version(k)]


# A layer call's random stream: seed * _STRIDE + its number (an outermost node's number
# times _INNER, plus the index of a layer inside its call)
_INNER = 1 << 10
_STRIDE = 1 << 24


class _Writer:
    """Writes symbolic values into statements, each layer reading the
    weights under the names current when the step made its node."""

    def __init__(self, trace, bound: dict, prefix: str, numbers: dict, sources=None,
                 moving=None):
        self.trace = trace
        # a BatchNormalization's moving statistics: {key: their name now} (updated
        # by the calls with training=True written before)
        self.moving = {} if moving is None else moving
        self.time = None  # the id of the outermost node being written
        self.count = iter(range(1 << 30))
        # each outermost layer node's number, shared by the program's writers, so that a
        # node written twice (in a tape's loss and in the logs) draws the same dropout
        self.numbers = numbers
        self.inner = 0
        self.training = "false"
        self.outer_training = "false"  # an outermost call's mode when it names none
        self.prefix = prefix
        self.stats: list = []  # (outermost node id, layer, batch statistics' name)
        # (outermost node id, layer, where, training nodes seen): inference-mode calls
        self.reads: list = []
        # a BatchNormalization's moving statistics as a training-mode call written by this
        # writer moved them: {key: name}, and {id(layer): the outermost nodes that moved them}
        self.local_moving: dict = {}
        self.moved_by: dict = {}
        self.sources = sources  # {key: name}: a phase's differentiated weights
        self.gw = GraphWriter(bound, self.param, self.layer_code, prefix=prefix,
                              param_at=self.param_at)

    def param(self, layer, pname):
        return self.param_at(layer, pname, None)

    def param_at(self, layer, pname, when):
        """The weight as a layer node being written reads it (its node's time), else
        as an operation made at `when` reads it (a loss a layer added, recorded again
        on the step's tensors: functional._outer_losses)."""
        key = (id(layer), pname)
        name = self.trace.var_of.get(key)
        if name is None:
            raise ValueError(f"[fit] layer {layer.name!r} is called by the train_step but its "
                             f"weight {pname!r} was not found when the step was traced")
        if key in self.local_moving:
            return self.local_moving[key]
        if key in self.moving:
            return self.moving[key]
        at = self.time if self.time is not None else when
        return _vname(name, self.trace.version(key, float("inf") if at is None else at))

    def _move_now(self, bn, x, rank, emit):
        """The moving statistics of `bn` as its training-mode call on `x` moves them, read by
        its inference-mode calls written after it in the same loss, as Keras on JAX reads them
        (the assigned value, within the stateless call): differentiated through the batch
        statistics, as JAX differentiates them."""
        axes = f"list({', '.join(str(i) for i in range(rank - 1))})"
        mean = self.fresh("bn_moved_mean")
        emit(f"define({mean}, mean({x}, axis={axes}))")
        var = f"mean(square(({x}) - {mean}), axis={axes})"
        m = float(bn.momentum)
        for pname, stat in (("moving_mean", mean), ("moving_variance", var)):
            new = self.fresh(f"bn_{pname}")
            emit(f"define({new}, {m!r} * {self.param(bn, pname)} + {1.0 - m!r} * {stat})")
            self.local_moving[(id(bn), pname)] = new
        self.moved_by.setdefault(id(bn), set()).add(self.time)

    def fresh(self, tag):
        return f"{self.prefix}_{''.join(c if c.isalnum() else '_' for c in tag)}" \
               f"{next(self.count)}"

    def layer_code(self, t, name, w):
        outer = self.time is None
        if outer:
            self.time = t.id
            self.inner = 0
            number = self.numbers.setdefault(t.id, len(self.numbers)) * _INNER
        else:
            self.inner += 1
            if self.inner >= _INNER:
                raise NotImplementedError(
                    f"[fit] a sub-model called in the train_step has over {_INNER - 1} layers "
                    f"inside one call (at {t.where})")
            number = self.numbers[self.time] * _INNER + self.inner
        held = self.training
        try:
            layer, ins, multi = t.args
            exprs = [w.names[i.id] for i in ins]
            static = {k: (w.expr(v) if isinstance(v, KerasTensor) else v)
                      for k, v in t.kwargs.items()}
            forced = static.pop("training", None)
            if forced is None:  # a user's layer or a sub-model: the flag of its call
                forced = getattr(t, "call_training", None)
            # Keras: a layer called without `training` outside a training call runs in
            # inference mode (its call's default), as a GAN's sub-models are called; inside
            # a call, the call's
            train = ("true" if forced else "false") if forced is not None else \
                (self.outer_training if outer else held)
            self.training = train
            ctx = Context(train, "seed", number, w.stmts.append, self.fresh,
                          self.param, self.layer_code)
            ctx.seed_stride = _STRIDE
            ctx.input_shapes = [i.shape for i in ins]
            traced = layer._is_custom() and not getattr(t, "builtin", None)
            ctx.input_masks = carried_mask_exprs(ins, w) if traced else None
            ctx.output_masks = getattr(t, "mask_outputs", None)
            p = {q.name: self.param(layer, q.name) for q in layer.params} if not traced else {}
            p.update({k: w.expr(v) for k, v in getattr(t, "param_overrides", {}).items()})
            moved = [self.local_moving.get((id(layer), n)) for n in ("moving_mean",
                                                                       "moving_variance")]
            if (train == "false" or not layer.trainable) and None not in moved and not multi \
                    and not traced and not getattr(ctx, "fuse_relu", False):
                # the statistics a training-mode call moved in this loss, differentiated
                # through as JAX does (batch_norm takes them as constants)
                out = (f"{p['gamma']} * (({exprs[0]}) - {moved[0]}) / sqrt({moved[1]} + "
                       f"{float(layer.epsilon)!r}) + {p['beta']}")
            else:
                out = (getattr(t, "builtin", None) or type(layer)).forward(
                    layer, exprs if multi else exprs[0], p, ctx, **static)
            if ctx.stats and in_gradient_function():
                raise NotImplementedError(
                    f"[fit] layer {layer.name!r} ({layer.kind}) is called with training=True "
                    "inside a GradientTape's gradient with respect to a computed value: its "
                    "moving statistics are not updated there yet (call it without "
                    f"training=True there) (at {t.where})")
            self.stats += [(self.time, bn, st) for bn, st in ctx.stats]
            if not ctx.stats and any(q.name == "moving_mean" for q in layer.params):
                # reads the moving statistics (as the calls written before moved them)
                self.reads.append((self.time, layer, t.where,
                                   frozenset(self.moved_by.get(id(layer), ()))))
            elif any(bn is layer for bn, _ in ctx.stats) and not multi and not ctx.input_masks:
                self._move_now(layer, exprs[0], len(ins[0].shape), w.stmts.append)
            return out
        finally:
            self.training = held
            if outer:
                self.time = None

    def expr(self, t) -> str:
        # the calls of layers holding moving statistics in the order the step made them, so
        # that an inference-mode call reads what a training-mode call made before it moved
        calls = [u for u in _layer_calls(t, self.gw.names) if _holds_moving(u.args[0])]
        if len(calls) > 1:
            for u in sorted(calls, key=lambda u: u.id):
                self.gw.expr(u)
        return self.gw.expr(t)


def _layer_calls(root, written) -> list:
    """The layer-call tensors `root` is computed from (not through a gradient's), not
    yet written."""
    out, seen, todo = [], set(), [root]
    while todo:
        t = todo.pop()
        if not isinstance(t, KerasTensor) or t.id in seen or t.id in written:
            continue
        seen.add(t.id)
        if t.op == "layer":
            out.append(t)
        if t.op != "grad":
            todo += GraphWriter._inputs(t)
    return out


def _holds_moving(layer, depth=0) -> bool:
    """Whether `layer` or a layer inside it keeps moving statistics (BatchNormalization)."""
    if any(getattr(q, "name", None) == "moving_mean" for q in getattr(layer, "params", ())):
        return True
    if depth > 32:
        return False
    subs = list(getattr(layer, "layers", None) or [])
    sub_of = getattr(layer, "_sublayers", None)
    if callable(sub_of):
        subs += list(sub_of())
    return any(_holds_moving(u, depth + 1) for u in subs if u is not layer)


def _data_placeholders(model, arrays) -> list:
    """One symbolic value per array of a batch (floats in the model's dtype)."""
    out = []
    for k, a in enumerate(arrays):
        a = np.asarray(a)
        dtype = str(a.dtype) if a.dtype.kind in "iub" else model.dtype
        out.append(KerasTensor((None,) + a.shape[1:], dtype, "input", name=f"data{k}"))
    return out


def _model_metrics(model) -> list:
    found: list = []

    def add(m):
        if isinstance(m, Metric) and all(m is not f for f in found):
            found.append(m)

    for v in list(vars(model).values()):
        for u in (v if isinstance(v, (list, tuple)) else [v]):
            add(u)
    try:
        ms = model.metrics
    except Exception:
        ms = []
    for m in ms or []:
        add(m)
    return found


def _optimizers(model) -> list:
    found = []
    for v in list(vars(model).values()) + [getattr(model, "optimizer", None)]:
        if isinstance(v, _optim.Optimizer) and all(v is not o for o in found):
            found.append(v)
    return found


def trace_tape_step(model, arrays) -> TapeStepTrace:
    """The override called on symbolic data of the batch's arrays' shapes."""
    trace = TapeStepTrace(model)
    phs = _data_placeholders(model, arrays)
    data = phs[0] if len(phs) == 1 else tuple(phs)
    metrics = _model_metrics(model)
    optimizers = _optimizers(model)
    owner = _user_override(model, "train_step").__name__

    def record(m):
        def update_state(*args, **kwargs):
            trace.metric_calls.append((m, args, kwargs))
        return update_state

    for m in metrics:
        m.__dict__["update_state"] = record(m)
        m.__dict__["result"] = (lambda m=m: _Recorded(m))
        m.__dict__["reset_state"] = lambda: None
    for o in optimizers:
        o.__dict__["apply"] = lambda grads, variables=None, o=o: trace.apply(
            o, grads, variables, "apply")
        o.__dict__["apply_gradients"] = lambda pairs, o=o: trace.apply(
            o, *(zip(*list(pairs)) if pairs else ((), ())), "apply_gradients")
    token = _ACTIVE.set(trace)
    # the layers' weights are named before the step runs (what the tapes see is checked)
    trace.var_of, trace.layer_of = adopt_sublayers(model)
    try:
        with tracing():
            logs = model.train_step(data)
    finally:
        _ACTIVE.reset(token)
        for m in metrics:
            for k in ("update_state", "result", "reset_state"):
                m.__dict__.pop(k, None)
        for o in optimizers:
            for k in ("apply", "apply_gradients"):
                o.__dict__.pop(k, None)
    if not trace.updates:
        raise NotImplementedError(f"[fit] {owner}.train_step applies no gradients (an "
                                  "optimizer's apply_gradients or apply): nothing would train")
    trace.logs = _logs(logs, owner)
    trace.placeholders = phs
    return trace


def adopt_sublayers(model):
    """The layers the model keeps (its sub-models' layers) made the model's,
    in Keras's order (its attributes'), its sub-models its top layers;
    ({(id(layer), param): program name}, {key: (layer, param)})."""
    if model._inputs:  # a functional model (trains_on_own_data): its graph's layers
        var_of = dict(model._var_of)
        return var_of, {k: model._owner[v] for k, v in var_of.items()}
    leaves = []
    seen = set()

    def visit(layer):
        inner = getattr(layer, "_layers", None)
        subs = layer._sublayers() if hasattr(layer, "_sublayers") else []
        kids = list(inner) if inner else subs
        if not kids or (not inner and layer.params):
            if id(layer) not in seen:
                seen.add(id(layer))
                leaves.append(layer)
        for k in kids:
            if id(k) not in seen:
                visit(k)

    for layer in model._sublayers():
        visit(layer)
    model._layers = leaves
    model.__dict__["_top_layers"] = model._sublayers()
    model._assign_vars()
    var_of = dict(model._var_of)
    layer_of = {k: model._owner[v] for k, v in var_of.items()}
    return var_of, layer_of


def _logs(logs, owner) -> list:
    if not isinstance(logs, dict):
        raise TypeError(f"[train_step] {owner}.train_step must return its logs as a dict, got "
                        f"{type(logs).__name__}")
    out = []
    for k, v in logs.items():
        if isinstance(v, dict):
            out += _logs(v, owner)
        elif isinstance(v, (_Recorded, KerasTensor)):
            out.append((k, v))
        elif isinstance(v, (int, float, np.number, np.ndarray)):
            out.append((k, np.asarray(v)))
        else:
            raise TypeError(f"[train_step] {owner}.train_step returns {k!r}: "
                            f"{type(v).__name__}; logs are metric results or values the step "
                            "computed")
    return out


class TapeStepProgram:
    """The traced step written as one program, and the state it carries."""

    def __init__(self, model, trace: TapeStepTrace):
        self.model, self.trace = model, trace
        self.keys = list(trace.var_of)
        self.data = [f"d{k}" for k in range(len(trace.placeholders))]
        bound = {t.id: n for t, n in zip(trace.placeholders, self.data)}
        bound[STEP_SEED.id] = "seed"
        self.bound = bound
        lines = []
        phase_loss = {}
        self.numbers: dict = {}
        values = {key: model._owner[trace.var_of[key]] for key in self.keys}
        self.optimizers: list = []  # each applied, in the order met
        for o, _, _ in trace.updates:
            if all(o is not u for u in self.optimizers):
                self.optimizers.append(o)
        self.state_now = [{} for _ in self.optimizers]  # state name -> its name now
        self.opt_vars: list = []  # (optimizer index, StateVar), each state once
        updates = sorted(range(len(trace.updates)), key=lambda j: trace.updates[j][2])
        events = [("phase", k, trace.phases[k][2]) for k in range(len(trace.phases))] + \
            [("update", j, trace.updates[j][2]) for j in updates]
        events.sort(key=lambda e: e[2])
        used_phases = {ph for _, pairs, _ in trace.updates for _, ph, _ in pairs}
        self.moving: dict = {}  # a moving statistic's key -> its name now
        self.moved: set = set()  # (node id, id(layer)) whose statistics were applied
        self.moves = 0  # the moving statistics' new names so far
        for kind, k, mark in events:
            if kind == "phase":
                if k not in used_phases:
                    continue
                loss, keys, _ = trace.phases[k]
                srcs = [_vname(trace.var_of[key], trace.version(key, mark)) for key in keys]
                w = _Writer(trace, bound, f"p{k}", self.numbers, moving=self.moving)
                e = w.expr(loss)
                stats = self._new_stats(w)
                if stats:  # the batch statistics leave the phase as its aux value
                    e = f"list({e}, list({', '.join(st for _, st in stats)}))"
                body = ",\n    ".join(w.gw.stmts + [e])
                lines.append(f"define(phase_{k}, {', '.join(srcs)}, block(\n    {body}))")
                nums = ", ".join(str(i) for i in range(len(srcs)))
                aux = ", has_aux=true" if stats else ""
                lines.append(f"define(r_{k}, value_and_grad(phase_{k}, argnums=[{nums}]{aux})"
                             f"({', '.join(srcs)}))")
                lines += [f"define(g_{k}_{i}, r_{k}[1][{i}])" for i in range(len(srcs))]
                lines += self._moving_lines(stats, [f"r_{k}[2][{j}]" for j in range(len(stats))])
                phase_loss[loss.id] = f"r_{k}[0]"
                continue
            opt, pairs, _ = trace.updates[k]
            q = next(i for i, o in enumerate(self.optimizers) if o is opt)
            olds = [_vname(trace.var_of[key], trace.version(key, mark)) for key, _, _ in pairs]
            news = [_vname(trace.var_of[key], trace.version(key, mark) + 1)
                    for key, _, _ in pairs]
            grads = [f"g_{ph}_{i}" for _, ph, i in pairs]
            # the optimizer's code on its weights' own names, its state named by them: an
            # optimizer applied again in the step (a critic's extra steps) continues the
            # same state, under new names in the step
            canon = [trace.var_of[key] for key, _, _ in pairs]
            upd = opt.update_code(canon, grads, state_prefix=f"o{q}_", lr_expr=f"lr_{k}",
                                  iteration_expr=f"it_{k}")
            states = [st.name for st in upd.state]
            current = self.state_now[q]
            for st in upd.state:
                if st.name not in current:
                    current[st.name] = "s_" + st.name
                    self.opt_vars.append((q, st))
            # the update as a function: its statements redefine their parameters (the
            # optimizer's code), while every name of the step is defined once, so that the
            # phases' functions, which read them, see one value whatever the order of
            # evaluation
            body = ",\n    ".join(upd.statements + [
                f"list(list({', '.join(canon)}), list({', '.join(states)}))"])
            lines.append(f"define(update_{k}, {', '.join(canon + states)}, block(\n    {body}))")
            ins = olds + [current[n] for n in states]
            lines.append(f"define(u_{k}, update_{k}({', '.join(ins)}))")
            lines += [f"define({n}, u_{k}[0][{i}])" for i, n in enumerate(news)]
            for i, n in enumerate(states):
                current[n] = f"{n}__a{k}"
                lines.append(f"define({current[n]}, u_{k}[1][{i}])")
        self.update_order = updates
        # the logged values and the metrics' arguments, as the step left them
        tail = _Writer(trace, bound, "t", self.numbers, moving=self.moving)
        self.reported: list = []
        reported_exprs = []
        for t in self._reported_tensors():
            reported_exprs.append(phase_loss.get(t.id) or tail.expr(t))
            self.reported.append(t)
        lines += tail.gw.stmts
        stats = self._new_stats(tail)
        lines += self._moving_lines(stats, [st for _, st in stats])
        finals = [self.moving.get(key) or _vname(trace.var_of[key], trace.final_version(key))
                  for key in self.keys]
        self.opt_state_names = [st.name for _, st in self.opt_vars]
        out_states = [self.state_now[q][st.name] for q, st in self.opt_vars]
        lines.append(f"list(list({', '.join(reported_exprs)}), list({', '.join(finals)}), "
                     f"list({', '.join(out_states)}))")
        head = [trace.var_of[key] for key in self.keys] + \
            ["s_" + n for n in self.opt_state_names] + self.data
        head += [f"it_{j}, lr_{j}" for j in range(len(trace.updates))]
        body = ",\n  ".join(lines)
        self.text = (f"define(tape_step, {', '.join(head)}, seed, block(\n  {body}))\n"
                     "tape_step\n")
        self.values = values
        self.program = compile_program(self.text, "<model train_step (tapes)>")

    def _new_stats(self, w) -> list:
        """The (layer, statistics) of the BatchNormalization calls with training=True that
        writer `w` wrote and no writer before it (a node written twice moves once)."""
        for node, layer, where, seen in w.reads:
            # Keras reads the statistics a training-mode call of the same step moved: a read
            # written before such a call made earlier (out of order) is refused rather than
            # read the old ones
            if any(bn is layer and trained < node and trained not in seen
                   for trained, bn, _ in w.stats):
                raise NotImplementedError(
                    f"[fit] layer {layer.name!r} ({layer.kind}) is called in inference mode "
                    "after a call in training mode in the same GradientTape's loss: Keras would "
                    "read the moving statistics that call updated, which tessera's traced step "
                    f"does not yet (call it with training=True both times) (at {where})")
        out = []
        for node, bn, st in w.stats:
            if (node, id(bn)) not in self.moved:
                self.moved.add((node, id(bn)))
                out.append((bn, st))
        return out

    def _moving_lines(self, stats, values) -> list:
        """Each layer's moving mean and variance moved toward its batch statistics
        `values` (Keras's momentum * moving + (1 - momentum) * batch), under new names."""
        lines = []
        for (bn, _), value in zip(stats, values):
            m = bn.momentum
            for i, pname in enumerate(("moving_mean", "moving_variance")):
                key = (id(bn), pname)
                old = self.moving.get(key) or self.trace.var_of[key]
                self.moves += 1
                new = f"{self.trace.var_of[key]}__m{self.moves}"
                lines.append(f"define({new}, {m!r} * {old} + {1.0 - m!r} * {value}[{i}])")
                self.moving[key] = new
        return lines

    def _reported_tensors(self) -> list:
        seen, out = set(), []

        def add(v):
            if isinstance(v, KerasTensor) and v.id not in seen:
                seen.add(v.id)
                out.append(v)
            elif isinstance(v, (list, tuple)):
                for u in v:
                    add(u)
            elif isinstance(v, dict):
                for u in v.values():
                    add(u)

        for _, args, kwargs in self.trace.metric_calls:
            add(list(args))
            add(kwargs)
        for _, v in self.trace.logs:
            add(v)
        return out

    def run(self, arrays, seed: int):
        """One step on a batch: the weights and optimizer state updated in
        place on the model, the optimizers' update counts advanced; returns
        {tensor id: value} of the reported values."""
        model, trace = self.model, self.trace
        weights = [np.asarray(self.values[key][0]._values[self.values[key][1].name])
                   for key in self.keys]
        state = model.__dict__.setdefault("_tape_opt_state", {})
        shapes = {trace.var_of[key]: a for key, a in zip(self.keys, weights)}
        for q, opt in enumerate(self.optimizers):
            missing = [st for i, st in self.opt_vars if i == q and st.name not in state]
            if missing:
                state.update(opt.init_state(shapes, missing))
        steps, applied = [], {}
        for opt, _, _ in trace.updates:  # each application its own update number
            it = int(opt.__dict__.get("_tape_iterations", 0)) + applied.get(id(opt), 0)
            applied[id(opt)] = applied.get(id(opt), 0) + 1
            opt._last_iteration = it
            steps += [it, opt.rate_at(it)]
        data = [np.asarray(a, dtype=t.dtype) for a, t in zip(arrays, trace.placeholders)]
        args = weights + [state[n] for n in self.opt_state_names] + data + steps + [seed]
        reported, new_w, new_s = self.program.run(args)
        for key, a in zip(self.keys, new_w):
            layer, p = self.values[key]
            layer._values[p.name] = a
        for n, a in zip(self.opt_state_names, new_s):
            state[n] = a
        key_of = {trace.var_of[key]: key for key in self.keys}

        def variable_of(name):
            key = key_of.get(name)
            if key is None:
                return None
            layer, p = self.values[key]
            return layer._variable(p.name)

        for q, opt in enumerate(self.optimizers):
            opt.__dict__["_tape_iterations"] = int(opt.__dict__.get("_tape_iterations", 0)) + \
                applied[id(opt)]
            opt.__dict__["_iterations_of"] = (lambda o=opt: o.__dict__["_tape_iterations"])
            # its state as Keras's `optimizer.variables`
            attach_tape(opt, model, f"o{q}_", [st for i, st in self.opt_vars if i == q],
                        variable_of)
        return {t.id: v for t, v in zip(self.reported, reported)}


def _valued(v, values):
    if isinstance(v, KerasTensor):
        return np.asarray(values[v.id])
    if isinstance(v, (list, tuple)):
        return type(v)(_valued(u, values) for u in v)
    if isinstance(v, dict):
        return {k: _valued(u, values) for k, u in v.items()}
    return v


def _log_value(v):
    a = np.asarray(v)
    return float(a) if a.ndim == 0 else [float(u) for u in a.ravel()]


_REFUSED = ("validation_split", "validation_data", "class_weight", "sample_weight",
            "resume_from", "checkpoint_dir", "zero", "pipeline_split", "data_parallel",
            "deterministic")


def fit_tape_steps(model, x=None, y=None, batch_size=None, epochs=1, verbose="auto",
                   callbacks=None, shuffle=True, initial_epoch=0, steps_per_epoch=None,
                   seed=0, **others):
    """Model.fit of a model whose train_step trains sub-models with tapes of
    their own (uses_tape_steps): the data's batches through the traced step,
    callbacks, progress and History as fit's."""
    where = user_location()
    for name in _REFUSED:
        v = others.get(name)
        if v not in (None, False, 0, 0.0, "") and not (name == "checkpoint_dir" and v is False):
            raise NotImplementedError(
                f"[fit] {name}= is not supported yet for {type(model).__name__}, whose "
                f"train_step trains sub-models with tapes and optimizers of their own "
                f"(at {where})")
    if isinstance(x, PyDataset):
        if y is not None:
            raise ValueError("[fit] with a PyDataset, labels come from its batches: y must be "
                             "None")
        ds = _PyBatches(x)
    elif isinstance(x, _data.Dataset):
        if y is not None:
            raise ValueError("[fit] with a Dataset, labels come from the dataset: y must be None")
        # batch_size is ignored, as Keras's fit ignores it for a tf.data Dataset or a
        # PyDataset (their batches are the data's own)
        if x.batch_size is None:
            raise ValueError("[fit] the Dataset is not batched: call ds.batch(batch_size)")
        ds = x
    else:
        if x is None:
            raise ValueError("[fit] x is required")
        arrays = [np.asarray(a) for a in (x if isinstance(x, (list, tuple)) else [x])]
        if y is not None:
            arrays += [np.asarray(a) for a in (y if isinstance(y, (list, tuple)) else [y])]
        if any(a.ndim == 0 or len(a) != len(arrays[0]) for a in arrays):
            raise ValueError(f"[fit] the arrays must have one length (samples), got "
                             f"{[a.shape for a in arrays]}")
        ds = _data.Dataset.from_tensor_slices(tuple(arrays) if len(arrays) > 1 else arrays[0])
        if shuffle:
            ds = ds.shuffle(seed=seed)
        ds = ds.batch(32 if batch_size is None else batch_size)
    n_batches = ds.num_batches()
    steps = n_batches if steps_per_epoch is None else (
        steps_per_epoch if n_batches is None else min(steps_per_epoch, n_batches))
    if verbose == "auto":
        verbose = 1
    history = _cb.History()
    model.history = history
    cbs = _cb.CallbackList(callbacks, history=history, model=model,
                           params={"epochs": epochs, "steps": steps, "verbose": verbose})
    if any(isinstance(c, _cb.ProgbarLogger) for c in cbs.callbacks):
        verbose = 0
    model.stop_training = False
    step = model.__dict__.setdefault("_tape_steps_done", 0)
    cbs.on_train_begin()
    logs = {}
    for epoch in range(initial_epoch, epochs):
        for m in _model_metrics(model):
            m.reset_state()
        cbs.on_epoch_begin(epoch)
        start = time.perf_counter()
        seen = 0
        for batch in ds.epoch_batches(epoch):
            b = batch.index
            if steps is not None and b >= steps:
                break
            cbs.on_train_batch_begin(b)
            prog = _program_for(model, batch.arrays)
            values = prog.run(batch.arrays, (seed * 1_000_003 + step) % (1 << 30))
            step += 1
            model.__dict__["_tape_steps_done"] = step
            model._iteration = step
            for m, args, kwargs in prog.trace.metric_calls:
                m.update_state(*_valued(list(args), values), **_valued(kwargs, values))
            logs = {}
            for name, v in prog.trace.logs:
                if isinstance(v, _Recorded):
                    logs[name] = _log_value(v.metric.result())
                elif isinstance(v, KerasTensor):
                    logs[name] = _log_value(values[v.id])
                else:
                    logs[name] = _log_value(v)
            seen += 1
            if verbose == 1:
                model._progress(epoch, epochs, b + 1, steps, logs, start)
            cbs.on_train_batch_end(b, dict(logs))
            if model.stop_training:
                break
        if seen == 0:
            raise ValueError("[fit] the data gave no batches in this epoch")
        took = time.perf_counter() - start
        logs = dict(logs)
        cbs.on_epoch_end(epoch, logs)
        history._add(epoch, logs)
        if verbose:
            model._progress_end(epoch, epochs, logs, took)
        if model.stop_training:
            break
    cbs.on_train_end(dict(logs))
    return history


class _PyBatches:
    """A PyDataset's batches as fit_tape_steps reads a Dataset's: each item's arrays (a
    tuple's elements, a list's, or the array), on_epoch_end after each epoch."""

    def __init__(self, data):
        self.data = data

    def num_batches(self):
        return len(self.data)

    def epoch_batches(self, epoch):
        if epoch:
            self.data.on_epoch_end()
        for index in range(len(self.data)):
            item = self.data[index]
            arrays = list(item) if isinstance(item, (tuple, list)) else [item]
            yield _Batch(index, [np.asarray(a) for a in arrays if a is not None])


class _Batch:
    def __init__(self, index, arrays):
        self.index, self.arrays = index, arrays


def _program_for(model, arrays) -> TapeStepProgram:
    """The step's program for batches of these arrays' sample shapes and
    dtypes (traced and written once per kind)."""
    key = tuple((np.shape(a)[1:], np.asarray(a).dtype.kind) for a in arrays)
    cache = model.__dict__.setdefault("_tape_programs", {})
    prog = cache.get(key)
    if prog is None:
        prog = TapeStepProgram(model, trace_tape_step(model, arrays))
        cache[key] = prog
    return prog
