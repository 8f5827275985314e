"""Model.compile(..., run_eagerly=True): the training step run on each batch's
values, for debugging (Keras's run_eagerly; keras-io's debugging_tips).

fit calls the user's train_step (or compute_loss, compute_metrics) again on
every batch, so that its Python runs once per batch: a counter in the step
counts batches, and `print`, `float()`, `%.4f` formatting, `bool()` and
`.numpy()` of any tensor the step computes (the loss, a tape's gradients and
their gradients, `ops.max(grads[0])`) give its value on that batch, with the
weights as the step found them. Each such value is computed when it is asked
for, by a small program of the tensor's graph; the update itself is the
program fit compiles for the step, traced again from the batch's call, so the
weights after training are those of the traced run (the same code, the same
random streams). evaluate runs a test_step and predict a predict_step the
same way.

The values are read as TensorFlow's eager tensors hold them, with two
differences: a dropout mask drawn for a printed value is its own draw (the
update's is the step's), and a value computed after the optimizer's apply
from a layer call or a weight is refused (Keras reads the updated weights;
the step makes its one update at its end).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from ... import data as _data
from .. import callbacks as _cb
from ..callbacks import History
from ..given_batches import GivenBatches
from ..predict_step import trace_predict_step
from ..program_constants import PROGRAM_CACHE, compile_program
from ..random import program_seed
from ..sample_weights import UNREAD, weight_arrays, weight_flags
from ..step_overrides import _ACTIVE, overridden_step, overrides_compute_loss, step_trace_for
from ..symbolic import EAGER_VALUES, STEP_SEED, GraphWriter, KerasTensor, user_location
from ..tape_steps import _Writer
from ._common import PyDataset, _from_py_dataset

__all__ = ["fit_eagerly", "warn_traced_anyway", "EagerBatches", "predict_eagerly",
           "traces_per_batch", "BatchValues"]


class _CurrentWeights:
    """What tape_steps' writer reads the weights through: each under its
    program name, as the model holds it now."""

    def __init__(self, model):
        self.var_of = model._var_of

    @staticmethod
    def version(key, when) -> int:
        return 0


class _EagerWriter(_Writer):
    """The writer of a value asked for in the step: the model's own layers
    called in the step's mode (training in a train_step) unless the call says."""

    def __init__(self, *args, training="false", **kwargs):
        super().__init__(*args, **kwargs)
        self.outer_training = training


class BatchValues:
    """The values of one batch's step: `values(t)` is symbolic tensor t's
    value on the batch (the model's inputs, the step's labels and sample
    weights bound to the batch's arrays, the weights as they are now)."""

    def __init__(self, model, xs, ys, sw, seed: int, training: bool):
        self.model, self.xs, self.ys, self.sw = model, list(xs), list(ys), sw
        self.seed, self.training = seed, "true" if training else "false"
        self.cache: dict = {}  # tensor id -> value
        self.programs = model.__dict__.setdefault("_eager_value_programs", {})

    def _bound(self):
        bound, data = {STEP_SEED.id: "seed"}, []
        for t, a in zip(self.model._inputs, self.xs):
            bound[t.id] = f"eager_d{len(data)}"
            data.append(a)
        trace = _ACTIVE.get()
        if trace is not None and getattr(trace, "model", None) is self.model:
            ys, sw = trace.placeholders if isinstance(trace.placeholders, tuple) else ([], None)
            for t, a in zip(ys, self.ys):
                bound[t.id] = f"eager_d{len(data)}"
                data.append(a)
            if sw is not None and self.sw is not None:
                # (weights per output: a placeholder, or None, each; sample_weights.UNREAD)
                for t, a in (zip(sw, self.sw) if isinstance(sw, list) else [(sw, self.sw)]):
                    if t is not None:
                        bound[t.id] = f"eager_d{len(data)}"
                        data.append(np.asarray(a).reshape(np.shape(a)[:1] + tuple(
                            t.shape[1:])))
        return bound, data

    def __call__(self, t: KerasTensor):
        if t.id in self.cache:
            return self.cache[t.id]
        at = getattr(_ACTIVE.get(), "applied_at", None)
        if at is not None and _reads_weights_after(t, at):
            raise NotImplementedError(
                f"[run_eagerly] a value computed after the step's optimizer.apply from layers "
                f"or weights reads the updated weights in Keras; tessera's step makes its "
                f"update at its end, so it has the old weights only: compute it before apply "
                f"(made at {t.where}, read at {user_location()})")
        bound, data = self._bound()
        names = list(self.model._owner)
        w = _EagerWriter(_CurrentWeights(self.model), bound, "ev", {}, training=self.training)
        e = w.expr(t)
        head = ", ".join(names + [bound[k] for k in bound if k != STEP_SEED.id] + ["seed"])
        body = ",\n  ".join(w.gw.stmts + [f"list({e})"])
        text = f"define(eager_value, {head}, block(\n  {body}))\neager_value\n"
        prog = self.programs.get(text)
        if prog is None:
            if len(self.programs) > 64:  # (a step whose code changes every batch)
                self.programs.clear()
            prog = self.programs[text] = compile_program(text, "<run_eagerly value>")
        weights = [np.asarray(layer._values[p.name]) for layer, p in
                   (self.model._owner[n] for n in names)]
        value = np.asarray(prog.run(weights + data + [self.seed])[0])
        self.cache[t.id] = value
        return value


def _reads_weights_after(t: KerasTensor, at: int) -> bool:
    """Whether t's computation calls a layer, takes a gradient or reads a weight after
    the id `at` (what is made before it reads nothing made after it)."""
    seen, stack = set(), [t]
    while stack:
        v = stack.pop()
        if v.id < at or v.id in seen:
            continue
        seen.add(v.id)
        ins = GraphWriter._inputs(v)
        if v.op in ("layer", "param", "grad", "wgrad") or any(a.op == "param" for a in ins):
            return True  # (a weight's tensor may be older than the update: read after it)
        stack.extend(ins)
    return False


def traces_per_batch(model, which: str = "train") -> bool:
    """Whether fit's ("train") or evaluate's ("evaluate") step has Python of its
    user's that the program is traced from (run once per batch under run_eagerly)."""
    hook = "train_step" if which == "train" else "test_step"
    return overridden_step(model, hook) or overridden_step(model, "compute_metrics") or \
        overrides_compute_loss(model)


def _traced_program(model, kind, values):
    """The step's program, traced again on this batch's call of the user's
    step (its Python runs now, its tensors valued by `values`)."""
    which = "train" if kind[0] == "train" else "evaluate"
    if traces_per_batch(model, which):
        for cached in ("_step_traces", "_loss_traces"):
            model.__dict__.pop(cached, None)
        model._programs.clear()
    token = EAGER_VALUES.set(values)
    cached = PROGRAM_CACHE.set(model.__dict__.setdefault("_eager_step_programs", {}))
    try:
        return model._program(kind)
    finally:
        PROGRAM_CACHE.reset(cached)
        EAGER_VALUES.reset(token)


_FIT_REFUSED = ("data_parallel", "deterministic", "resume_from", "checkpoint_dir", "zero",
                "pipeline_split")


def warn_traced_anyway(model):
    """run_eagerly=True on a step fit runs by tape_steps.py (a GAN's, or one given data
    not shaped as the model's inputs): traced once, as before, said so."""
    warnings.warn(
        f"[fit] run_eagerly=True: {type(model).__name__}.train_step trains sub-models with "
        "tapes of their own (or is given data not shaped as the model's inputs), which fit "
        "still traces once: its Python does not run on each batch and its tensors have no "
        f"values (float() raises) (at {user_location()})", stacklevel=3)


def _batches(model, x, y, sample_weight, class_weight, batch_size, shuffle, seed, steps,
             validation_split, where):
    """fit's batches (a Dataset), whether they are weighted, and the
    validation data split off."""
    model._build_from_first_batch(x, where)
    x = _from_py_dataset(x, where, steps, seed if shuffle else None, model._batch_form(where))
    if isinstance(x, _data.Dataset):
        if y is not None or sample_weight is not None or class_weight is not None:
            raise ValueError(f"[{where}] with a Dataset, labels and sample weights come from "
                             "the dataset: y, sample_weight and class_weight must be None")
        if validation_split:
            raise ValueError(f"[{where}] validation_split needs arrays; pass validation_data")
        if x.batch_size is None:
            raise ValueError(f"[{where}] the Dataset is not batched: call ds.batch(batch_size)")
        model.__dict__["_labels_given"] = True
        spec = x.element_spec
        n_in = len(model._inputs) or 1
        if not model.built:
            shapes = [tuple(s.shape) for s in spec[:n_in]]
            model.build(shapes if len(shapes) > 1 else shapes[0])
        model._specialize([tuple(s.shape) for s in spec[:len(model._inputs)]], where, 0)
        ds, weighted = model._dataset_weights(model._dataset_with_padded_labels(x), where)
        spec = ds.element_spec
        n_in, n_out = len(model._inputs), len(model._outputs)
        model._label_specs_from([np.zeros((0,) + tuple(s.shape), s.dtype)
                                 for s in spec[n_in:n_in + n_out]])
        return ds, weighted, None, ds.batch_size
    batch_size = 32 if batch_size is None else batch_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"[{where}] batch_size must be a positive int, got {batch_size!r}")
    xs = model._prepare_x(x, where)
    model._specialize([a.shape[1:] for a in xs], where, 0)
    n = len(xs[0])
    model.__dict__["_labels_given"] = y is not None
    ys = model._prepare_y(model._no_labels(n, where) if y is None else y, n, where)
    model._check_finite(xs, where)
    sw = model._prepare_sw(sample_weight, class_weight, ys, n, where)
    validation = None
    if validation_split:
        cut = int(n * (1 - validation_split))
        if cut in (0, n):
            raise ValueError(f"[{where}] validation_split {validation_split} of {n} samples "
                             "leaves no training or no validation samples")
        validation = ([a[cut:] for a in xs] if len(xs) > 1 else xs[0][cut:],
                      [a[cut:] for a in ys] if len(ys) > 1 else ys[0][cut:],
                      None if sw is None else
                      [None if a.shape[1:] == UNREAD else a[cut:] for a in sw]
                      if isinstance(sw, list) else sw[cut:])
        xs, ys = [a[:cut] for a in xs], [a[:cut] for a in ys]
        sw = None if sw is None else [a[:cut] for a in sw] if isinstance(sw, list) else \
            sw[:cut]
    if not len(xs[0]):
        raise ValueError(f"[{where}] x is empty")
    model._label_specs_from(ys)
    ds = _data.Dataset.from_tensor_slices(tuple(xs + ys + weight_arrays(sw)))
    if shuffle:
        ds = ds.shuffle(seed=seed)
    return ds.batch(batch_size), weight_flags(sw), validation, batch_size


def _split(model, arrays, weighted):
    n_in, n_out = len(model._inputs), len(model._outputs)
    xs, ys = arrays[:n_in], arrays[n_in:n_in + n_out]
    if isinstance(weighted, tuple):  # (one per output)
        return xs, ys, list(arrays[n_in + n_out:])
    return xs, ys, (arrays[n_in + n_out] if weighted else None)


def fit_eagerly(model, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
                validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
                sample_weight=None, initial_epoch=0, steps_per_epoch=None,
                validation_steps=None, validation_batch_size=None, validation_freq=1, seed=0,
                nan_policy="stop", **others):
    """Model.fit under run_eagerly=True: each batch's step traced from a new
    call of the user's step (valued on the batch), then run; callbacks,
    progress and History as fit's."""
    where = user_location()
    for name in _FIT_REFUSED:
        v = others.get(name)
        if v not in (None, False, 0, "") and not (name == "deterministic" and v is False):
            raise NotImplementedError(f"[fit] {name}= is not supported with run_eagerly=True "
                                      f"(a debugging mode, one process) (at {where})")
    model._check_loss_reductions()
    if nan_policy not in ("stop", "continue"):
        raise ValueError(f"[fit] nan_policy must be 'stop' or 'continue', got {nan_policy!r}")
    for name, v in (("epochs", epochs), ("initial_epoch", initial_epoch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"[fit] {name} must be an int >= 0, got {v!r}")
    ds, weighted, split_off, batch_size = _batches(
        model, x, y, sample_weight, class_weight, batch_size, shuffle, seed, steps_per_epoch,
        validation_split, "fit")
    if split_off is not None:
        validation_data = split_off
    n_batches = ds.num_batches()
    steps = n_batches if steps_per_epoch is None else (
        steps_per_epoch if n_batches is None else min(steps_per_epoch, n_batches))
    verbose = 1 if verbose == "auto" else verbose
    kind = ("train", weighted)
    history = History()
    model.history = history
    cbs = _cb.CallbackList(callbacks, history=history, model=model,
                           params={"verbose": verbose, "epochs": epochs, "steps": steps})
    if any(isinstance(c, _cb.ProgbarLogger) for c in cbs.callbacks):
        verbose = 0
    model.stop_training = False
    model._fit_settings = {"seed": seed, "batch_size": batch_size}
    opt = model._compiled.optimizer
    try:
        cbs.on_train_begin()
        for epoch in range(initial_epoch, epochs):
            cbs.on_epoch_begin(epoch)
            start = time.perf_counter()
            total_loss, seen, totals, logs = 0.0, 0, None, {}
            for batch in ds.epoch_batches(epoch):
                b = batch.index
                if steps is not None and b >= steps:
                    break
                it = model._iteration
                cbs.on_train_batch_begin(b)
                arrays = list(batch.arrays)
                if isinstance(ds, GivenBatches):  # (a PyDataset's: shapes may change)
                    model._enter_batch(arrays, b, "fit", 0, kind)
                step_seed = program_seed(seed, it, 64, 0)
                values = BatchValues(model, *_split(model, arrays, weighted), step_seed, True)
                prog = _traced_program(model, kind, values)
                trace = step_trace_for(model, "train", weighted)
                P, S = model._params(True), model._params(False)
                if model._opt_state is None or set(model._opt_state) != set(model._opt_vars):
                    model._opt_state = opt.init_state(model.weights, model._opt_statevars)
                sizes = trace.sizes() if trace is not None else model._metric_sizes()
                if totals is None:
                    totals = [np.zeros(s) for s in sizes]
                args = model._step_state(P, S) + arrays + [it, model._learning_rate(it),
                                                           step_seed]
                loss, mets, new_p, new_o, new_s = prog.run(args)
                loss = float(loss)
                if not math.isfinite(loss) and nan_policy == "stop" and not cbs.stops_on_nan:
                    raise FloatingPointError(
                        f"[fit] the loss became {loss} at epoch {epoch + 1}, step {b + 1} "
                        f"(update {it + 1}); the weights are those before this step. Lower "
                        "the learning rate, check the data, or pass nan_policy='continue'")
                for v, a in zip(P, new_p):
                    model._set(v, a)
                for v, a in zip(model._opt_vars, new_o):
                    model._opt_state[v] = a
                for v, a in zip(S, new_s):
                    model._set(v, a)
                model._iteration += 1
                n = batch.global_size
                seen += n
                total_loss += loss * n
                for t, m in zip(totals, model._split_sums(mets, sizes, False)):
                    t += np.asarray(m, dtype=np.float64).reshape(t.shape)
                if trace is not None:  # Keras's logs: what train_step returns
                    logs = dict(zip(trace.names, trace.results(totals)))
                else:
                    logs = {"loss": total_loss / seen}
                    logs.update(zip(model._metric_log_names(), model._metric_results(totals)))
                model._position = {"epoch": epoch, "batch": b + 1, "acc": None}
                if verbose == 1:
                    model._progress(epoch, epochs, b + 1, steps, logs, start)
                cbs.on_train_batch_end(b, dict(logs))
                if model.stop_training:
                    break
            if seen == 0:
                raise ValueError("[fit] the data gave no batches in this epoch")
            model._position = {"epoch": epoch + 1, "batch": 0, "acc": None}
            if trace is None:
                model._hold_metric_state(total_loss, seen, totals)
            model._end_epoch(epoch, epochs, logs, start, cbs, history, verbose,
                             (validation_data, validation_batch_size or batch_size,
                              validation_steps, validation_freq))
            if model.stop_training:
                break
        model._ema_finalize()
        cbs.on_train_end(dict(history.history and {k: v[-1] for k, v in
                                                   history.history.items()}))
    finally:
        model.__dict__.pop("_step_frozen", None)
    return history


class EagerBatches:
    """evaluate's batches under run_eagerly: before each is given, the
    test_step is traced again on it (its Python run on the batch's values);
    `program` is the batch's evaluation program. The first batch is read
    (and traced) when this is made, before evaluate's loop."""

    def __init__(self, model, batches, weighted: bool):
        self.model, self.weighted = model, weighted
        self.batches = iter(batches)
        self.first = next(self.batches, None)
        self.program = None
        if self.first is not None:
            self._trace(self.first)

    def _trace(self, arrays):
        arrays = list(arrays)
        values = BatchValues(self.model, *_split(self.model, arrays, self.weighted), 0, False)
        self.program = _traced_program(self.model, ("evaluate", self.weighted), values)

    def __iter__(self):
        if self.first is None:
            return
        yield self.first
        for arrays in self.batches:
            self._trace(arrays)
            yield arrays


def predict_eagerly(model, arrays, extra_specs):
    """predict_step traced again on this batch (its Python run on the batch's
    values): the PredictTrace to run on it."""
    model.__dict__.pop("_predict_traces", None)
    n_in = len(model._inputs)
    token = EAGER_VALUES.set(BatchValues(model, arrays[:n_in], [], None, 0, False))
    cached = PROGRAM_CACHE.set(model.__dict__.setdefault("_eager_step_programs", {}))
    try:
        trace = trace_predict_step(model, extra_specs)
        trace.twin._program("predict")  # (compiled once for the batches' same text)
        return trace
    finally:
        PROGRAM_CACHE.reset(cached)
        EAGER_VALUES.reset(token)
