"""The compiled metrics' part of a model's programs: each metric's sums
over a batch (float64) as expressions of tessera's language, weighted by the
sample weights for compile's weighted_metrics only (as Keras's), and a
metric given as a plain function (_FunctionMetric)."""

from __future__ import annotations

import numpy as np

from .functional import apply_function
from .metrics import MeanMetricWrapper
from .program_constants import compile_program
from .sample_weights import weights_of_output

__all__ = ["MetricProgramsMixin"]


class _FunctionMetric:
    """A metric given as a Python function of (y_true, y_pred): the mean of
    its values (Keras's MeanMetricWrapper), traced like a custom layer."""

    def __init__(self, fn):
        self.fn = fn
        self.name = getattr(fn, "__name__", "metric")

    def expressions_for(self, y, p, w, ctx, label_spec, out_shape):
        v = self.values_for(y, p, ctx, label_spec, out_shape)
        if w is None:
            return [f"sum({v})", f"astype(size({v}), \"float64\")"]
        per = f"reshape({v}, list(shape({v})[0], -1))"
        wv = f"reshape(astype({w}, \"float64\"), [-1, 1])"
        return [f"sum({per} * {wv})", f"sum(broadcast_to({wv}, shape({per})))"]

    def values_for(self, y, p, ctx, label_spec, out_shape):
        """The function's values (float64), as an expression."""
        shape, dtype = label_spec
        v = apply_function(self.fn, [y, p], [shape, out_shape], ctx, [dtype, "float32"])
        return ctx.define("mv", f"astype({v}, \"float64\")")

    def result(self, totals):
        return float(totals[0] / totals[1]) if totals[1] else 0.0


def _function_metric(fn):
    return _FunctionMetric(fn)


class MetricProgramsMixin:
    """The metrics' sums in a model's programs, mixed into ProgramsMixin."""

    def _metric_exprs(self, ys, hs, sw=None, counts=None) -> tuple:
        """(statements, expressions): every metric's sums (float64), in order;
        `counts`, a list, gets each metric's number of sums."""
        ctx, stmts = self._loss_ctx("_met")
        out = []
        given_sw = sw
        for k, ms in enumerate(self._compiled.metrics):
            flags = self._compiled.weighted[k]
            own = weights_of_output(given_sw, k)  # (weights given per output: its own)
            if any(flags) and not all(flags):  # plain ones, then weighted ones
                cut = flags.index(True)
                for part, part_sw in ((ms[:cut], None), (ms[cut:], own)):
                    out += self._metrics_of_output(k, part, ys, hs, part_sw, counts, ctx)
                continue
            sw = own if all(flags) and flags else None  # Keras: metrics= are unweighted
            out += self._metrics_of_output(k, ms, ys, hs, sw, counts, ctx)
        loss_map = self.__dict__.get("_loss_sw_map")  # (a compute_loss override's)
        for tracker in self._compiled.output_losses:  # Keras's "<output>_loss"
            k = tracker.k  # (Keras records it before the loss weight)
            own = given_sw
            if loss_map is not None and given_sw is not None and k < len(loss_map) and \
                    loss_map[k] != "given":  # weighted as super().compute_loss was given
                j = loss_map[k]
                own = None if j is None else given_sw if j == "sw" else \
                    [weights_of_output(given_sw, j) if i == k else None
                     for i in range(len(self._outputs))]
            e = self._output_loss_expr(k, ys, hs, own, ctx)
            n = ctx.define("mn", f"astype(shape({hs[k]})[0], \"float64\")")
            out += [f"astype({e}, \"float64\") * {n}", n]
            if counts is not None:
                counts.append(2)
        return stmts, out

    def _metrics_of_output(self, k, ms, ys, hs, sw, counts, ctx) -> list:
        """The sums of output k's metrics `ms`, weighted by `sw` (or None)."""
        out = []
        mask = self._output_mask_expr(k) if ms else None
        mf = None
        means = (MeanMetricWrapper, _FunctionMetric)  # (Keras wraps a function in one)
        if mask is not None and any(isinstance(m, means) for m in ms):
            # Keras's MeanMetricWrapper: the mask (times the sample weights)
            # weights each value
            mf = ctx.define("mmask", f"astype({mask}, \"float64\")")
            if sw is not None:
                lead = [-1] + [1] * (len(self._outputs[k].shape) - 2)
                w = f"astype({sw}, \"float64\")"  # (temporal weights: one per entry)
                mf = ctx.define("mmask", f"{mf} * if(ndim({sw}) > 1, {w}, reshape({w}, {lead}))")
        for m in ms:
            if mf is not None and isinstance(m, means):
                if isinstance(m, _FunctionMetric):
                    v = m.values_for(ys[k], hs[k], ctx, self._label_specs[k],
                                     self._outputs[k].shape[1:])
                else:
                    v = ctx.define("mval", f"astype({m.values(ys[k], hs[k])}, \"float64\")")
                # (Keras's squeeze_or_expand_to_same_rank: values of one more
                # axis, a binary output's (batch, steps, 1), take the mask
                # (batch, steps) on each)
                wide = (f"reshape({mf}, concatenate(list(shape({mf}), "
                        f"ones(ndim({v}) - ndim({mf}), dtype=\"int64\"))))")
                # a function returning the batch's value already reduced (a scalar): Keras
                # averages it over the batches, unweighted by the mask
                wv = ctx.define("mw", f"if(ndim({v}) == 0, astype(1.0, \"float64\"), "
                                      f"broadcast_to({wide}, shape({v})))")
                out += [f"sum({v} * {wv})", f"sum({wv})"]
                if counts is not None:
                    counts.append(2)
            else:
                # the others (Precision, AUC, a Metric subclass...) ignore the
                # mask, as Keras 3's do: only its MeanMetricWrapper reads it
                out += self._unmasked_metric(k, m, ys, hs, sw, counts, ctx)
        return out

    def _unmasked_metric(self, k, m, ys, hs, sw, counts, ctx) -> list:
        """The sums of output k's metric `m`, weighted by `sw` (or None)."""
        stateful = getattr(m, "_stateful", None)
        # the whole batch: written for the model's own label variables
        # (micro-batches and chunks have others) in one process
        split = self.__dict__.get("_split_batch") or list(ys) != self._names()[1]
        if stateful is not None and stateful() and split:
            raise ValueError(
                f"[fit] the metric {m.name!r} ({type(m).__name__}.update_state) is not "
                "supported yet with data-parallel (several processes), ZeRO, pipeline "
                "stages or deterministic=True training: its increments would be made "
                "per part of the batch, which changes a per-batch count or mean; train "
                "in one process without deterministic=True, or evaluate it with "
                "evaluate()")
        if stateful is not None and stateful():
            # (Keras gives a Metric subclass the weights as given: (batch, 1) stays so)
            given = self.__dict__.get("_sw_given") if sw is not None else None
            if isinstance(given, list):  # (weights given per output)
                given = given[k]
            exprs = m.expressions_for(ys[k], hs[k], sw, ctx, self._label_specs[k],
                                      self._outputs[k].shape[1:], w_shape=given)
        elif isinstance(m, _FunctionMetric) or getattr(m, "checks_shapes", False):
            spec = self._label_specs[k]
            exprs = m.expressions_for(ys[k], hs[k], sw, ctx, spec,
                                      self._outputs[k].shape[1:])
        else:
            exprs = m.expressions(ys[k], hs[k], sw)
        if counts is not None:
            counts.append(len(exprs))
        return [f"astype({e}, \"float64\")" for e in exprs]

    def _metric_sizes(self) -> list:
        """The shape of every metric sum, in order (found by running the
        metrics' expressions once on stand-in data); _metric_counts then
        gives how many sums each metric has."""
        if not self._compiled or not self._compiled.has_metrics:
            self._programs[("metric_counts",)] = []
            return []
        key = ("metric_sizes",)
        if key in self._programs:
            return self._programs[key]
        xs, ys = self._names()
        hs = [f"h{k}" for k in range(len(self._outputs))]
        counts: list = []
        # all-true stand-ins of the outputs' masks, shaped (batch, steps)
        self._out_masks = [None if getattr(o, "_keras_mask", None) is None else
                           f"not_equal(sum(abs({h}), axis=-1), -1.0)"
                           for o, h in zip(self._outputs, hs)]
        stmts, exprs = self._metric_exprs(ys, hs, None, counts)
        body = ",\n  ".join(stmts + [f"list({', '.join(exprs)})"])
        prog = compile_program(f"define(m, {', '.join(ys + hs)}, block(\n  {body}))\nm\n",
                             "<model metrics>")
        labels = [np.zeros((2,) + tuple(shape), dtype=dtype) for shape, dtype in
                  self._label_specs]
        outs = [np.asarray(o._dummies[0], dtype=self.dtype) for o in self._outputs]
        sizes = [tuple(np.shape(v)) for v in prog.run(labels + outs)]
        self._programs[key] = sizes
        self._programs[("metric_counts",)] = counts
        return sizes

    def _metric_counts(self) -> list:
        """The number of sums of each metric (found by _metric_sizes, again when the
        programs were cleared since: a run_eagerly step writes its own)."""
        if ("metric_counts",) not in self._programs:
            self._metric_sizes()
        return self._programs[("metric_counts",)]
