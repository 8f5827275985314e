"""model.metrics as Keras 3 returns them: the loss tracker (a Mean named
"loss") and a CompileMetrics holding compile's metrics, both holding the
state of the latest fit epoch, evaluate or *_on_batch call (the compiled
programs sum each batch; the sums are handed to these objects when the
interval ends, so result() answers as Keras's does)."""

from __future__ import annotations

import numpy as np

from .. import metrics as _metrics
from ..metric_base import Metric


class CompileMetrics(Metric):
    """Keras's container of the compiled metrics (``model.metrics[1]`` after
    compile with metrics): ``metrics`` are compile's Metric objects,
    ``result()`` a dict of their values by log name, ``reset_state()``
    resets them all, ``update_state(y_true, y_pred, sample_weight=None)``
    updates them all (lists by output for a model of several outputs); as
    Keras's, the sample weights reach compile's ``weighted_metrics`` only
    (``weighted_per_output``: a flag per metric), ``metrics`` are unweighted."""

    name = "compile_metrics"

    def __init__(self, metrics_per_output, log_names, weighted_per_output=None):
        super().__init__(name="compile_metrics")
        self._per_output = [list(ms) for ms in metrics_per_output]
        self._weighted = ([list(ws) for ws in weighted_per_output] if weighted_per_output
                          is not None else [[True] * len(ms) for ms in self._per_output])
        self._log_names = list(log_names)
        self.built = False  # (Keras's: by the first fit, evaluate or update_state)

    @property
    def metrics(self) -> list:
        """compile's metrics, once built (before, [] as Keras's)."""
        return [m for ms in self._per_output for m in ms] if self.built else []

    @property
    def variables(self) -> list:
        return [v for m in self.metrics for v in m.variables]

    def update_state(self, y_true, y_pred, sample_weight=None):
        n = len(self._per_output)
        self.built = True
        if n == 1:
            y_true, y_pred, sample_weight = [y_true], [y_pred], [sample_weight]
        else:
            if not (isinstance(y_true, (list, tuple)) and isinstance(y_pred, (list, tuple))
                    and len(y_true) == len(y_pred) == n):
                raise ValueError(f"[CompileMetrics.update_state] the model has {n} outputs: "
                                 f"y_true and y_pred must be lists of {n} arrays, got "
                                 f"{type(y_true).__name__} and {type(y_pred).__name__}")
            if not isinstance(sample_weight, (list, tuple)):
                sample_weight = [sample_weight] * n
        for ms, flags, y, p, w in zip(self._per_output, self._weighted, y_true, y_pred,
                                      sample_weight):
            for m, weighted in zip(ms, flags):
                m.update_state(y, p, sample_weight=w if weighted else None)

    def result(self) -> dict:
        if not self.built:
            raise ValueError("[CompileMetrics.result] the compiled metrics are not built yet: "
                             "call fit, evaluate, train_on_batch or update_state first (as "
                             "Keras's, which raises here too)")
        return {name: _result_of(m) for name, m in zip(self._log_names, self.metrics)}

    def reset_state(self):
        for m in self.metrics:  # (nothing to reset before it is built)
            if isinstance(m, Metric):
                m.reset_state()
            else:  # a function given to compile: its sums only
                m.__dict__.pop("_eager_totals", None)

    def get_config(self):
        # Keras's raises NotImplementedError too: the container is rebuilt by compile
        raise NotImplementedError("[CompileMetrics] is made by compile(); it has no config")


def _result_of(m):
    """A compiled metric's value: a Metric's result(); a function given to
    compile (a _FunctionMetric), the mean of its held sums."""
    if isinstance(m, Metric):
        return m.result()
    totals = m.__dict__.get("_eager_totals")
    return np.float32(0.0) if totals is None else np.float32(m.result(totals))


class TrackersMixin:
    """Keras's model.metrics, metrics_names and reset_metrics, mixed into Model."""

    def _metric_log_names(self) -> list:
        """The compiled metrics' names in the logs (prefixed by the output's
        name in a model of several outputs), in compile's order."""
        if not self._compiled:
            return []
        prefix = self._output_names() if len(self._outputs) > 1 else [""]

        def named(k, name):
            return f"{prefix[k]}_{name}" if prefix[k] else name

        # Keras's CompileMetrics.result: the plain metrics of every output
        # first, a repeated name numbered (_1, ...); then the weighted ones,
        # "weighted_" before a name already taken
        taken: dict = {}
        names = {}
        c = self._compiled
        for weighted in (False, True):
            for k, (ms, flags) in enumerate(zip(c.metrics, c.weighted)):
                for j, (m, w) in enumerate(zip(ms, flags)):
                    if w != weighted:
                        continue
                    name = named(k, m.name)
                    if name in taken and weighted:
                        name = named(k, f"weighted_{m.name}")
                    if name in taken:
                        taken[name] += 1
                        name = f"{name}_{taken[name] - 1}"
                    else:
                        taken[name] = 1
                    names[(k, j)] = name
        return [names[(k, j)] for k, ms in enumerate(c.metrics) for j in range(len(ms))] + \
            [t.name for t in c.output_losses]

    def _trackers(self):
        """(loss tracker, CompileMetrics or None) of the current compile."""
        held = self.__dict__.get("_tracker_objects")
        if held is None or held[0] is not self._compiled:
            loss = _metrics.Mean(name="loss")
            given = self.__dict__.get("_metrics_given", self._compiled.has_metrics)
            compiled = CompileMetrics(self._compiled.metrics, self._metric_log_names(),
                                      self._compiled.weighted) if given else None
            # Keras's per-output loss trackers (a model of several outputs)
            outputs = [_metrics.Mean(name=t.name) for t in self._compiled.output_losses]
            held = (self._compiled, loss, compiled, outputs)
            self.__dict__["_tracker_objects"] = held
        return held[1], held[2]

    def _output_loss_trackers(self) -> list:
        self._trackers()
        return self.__dict__["_tracker_objects"][3]

    @property
    def metrics(self) -> list:
        """Keras 3's: [] before compile; then the loss tracker (Mean "loss")
        and, when compile was given metrics, a CompileMetrics. They hold the
        state of the latest fit epoch (its validation, if any), evaluate or
        train_on_batch / test_on_batch."""
        if not self._compiled:
            return []
        loss, compiled = self._trackers()
        # each output's loss tracker once a fit or evaluate ran (as Keras's,
        # made when its CompileLoss is built)
        outputs = self._output_loss_trackers() if self.__dict__.get("_metrics_held") or \
            self.__dict__.get("_step_output_losses") else []  # (traced: step_overrides.py)
        held = [loss] + ([compiled] if compiled is not None else []) + outputs
        return held + self._attribute_metrics(held)

    def _attribute_metrics(self, held) -> list:
        """Metrics the model holds as attributes (ddim's `self.image_loss_tracker =
        keras.metrics.Mean(...)` made in an overridden compile), alone or in lists, in
        the order set: Keras tracks them into model.metrics, after compile's."""
        out, seen = [], {id(m) for m in held}
        for v in vars(self).values():
            for m in (v if isinstance(v, (list, tuple)) else [v]):
                if isinstance(m, Metric) and id(m) not in seen:
                    seen.add(id(m))
                    out.append(m)
        return out

    def compiled_loss(self, y, y_pred, sample_weight=None, regularization_losses=None):
        """The shim Keras 3 keeps on its TensorFlow backend for Keras 2's train_steps
        (`loss = self.compiled_loss(y, y_pred)`): compute_loss of (y, y_pred)."""
        del regularization_losses  # (Keras's shim ignores them too)
        return self.compute_loss(x=None, y=y, y_pred=y_pred, sample_weight=sample_weight)

    @property
    def compiled_metrics(self):
        """Keras 3's TensorFlow-backend shim: `update_state(y, y_pred)` updates each of
        model.metrics, as that shim does, a Mean (the loss tracker) with y_pred."""
        model = self

        class CompiledMetrics:
            def update_state(self, y, y_pred, sample_weight=None):
                for m in model.metrics:
                    if isinstance(m, _metrics.Mean):
                        m.update_state(y_pred, sample_weight=sample_weight)
                    else:
                        m.update_state(y, y_pred, sample_weight=sample_weight)

        return CompiledMetrics()

    @property
    def metrics_names(self) -> list:
        """Keras 3's: the names of model.metrics ("loss", "compile_metrics")."""
        return [m.name for m in self.metrics]

    def reset_metrics(self):
        for m in self.metrics:
            m.reset_state()

    def _hold_metric_state(self, total_loss: float, seen: int, totals) -> None:
        """The interval's sums handed to model.metrics (end of an epoch or of
        evaluate): the loss tracker's total and count, each built-in compiled
        metric's standalone sums (a user's metric has its variables set by
        stateless_result already)."""
        if not self._compiled:
            return
        loss, compiled = self._trackers()
        if compiled is not None:
            compiled.built = True
        loss.total.assign(np.float32(total_loss))
        loss.count.assign(np.float32(seen))
        self.__dict__["_metrics_held"] = True
        k = 0
        metrics = self._compiled.all_metrics()
        for tracker, t in zip(self._output_loss_trackers(), self._compiled.output_losses):
            t.__dict__["_tracker"] = tracker
        for m, n in zip(metrics, self._metric_counts()):
            stateful = getattr(m, "_stateful", None)
            if not (stateful and stateful()):
                m.__dict__["_eager_totals"] = [np.array(t, dtype=np.float64)
                                               for t in totals[k:k + n]]
            tracker = m.__dict__.get("_tracker")  # an output's loss: its Mean
            if tracker is not None:
                tracker.total.assign(np.float32(totals[k]))
                tracker.count.assign(np.float32(totals[k + 1]))
            k += n

    def _flatten_logs_in_order(self, logs: dict):
        """Keras's _flatten_metrics_in_order: "loss", then the compiled
        metrics by their own names, then every other key sorted; one value
        alone is returned as it is."""
        c = self._compiled
        order = ["loss"]
        if c:
            # An output's metrics and weighted metrics in turn, a name twice when both
            # have it (Keras lists its log twice); a name an earlier output's metrics
            # gave already is listed once (one log for both).
            earlier: set = set()
            for ms in c.metrics:
                names = [m.name for m in ms]
                order += [n for n in names if n not in earlier]
                earlier |= set(names)
            order += [t.name for t in c.output_losses if t.name not in order]
        values = [logs[n] for n in order if n in logs]
        values += [logs[k] for k in sorted(logs) if k not in order]
        return values[0] if len(values) == 1 else values
