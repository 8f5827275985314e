"""tessera.nn.metrics: Keras's metrics, in a form a compiled training step
computes batch by batch.

A metric does not keep state itself. ``expressions(y, p, w)`` gives
expressions of tessera's language in the labels variable ``y``, the model's
output ``p`` (batch first) and the optional per-sample weights ``w`` (a 1-d
float array variable, or None); each is a float64 array of a fixed shape
whose values are *sums over the batch* (accuracy: ``[sum(w * correct),
sum(w)]``). Whoever runs them adds them over the batches (and localities)
and ``result(totals)`` gives the metric::

    m = nn.metrics.SparseCategoricalAccuracy()
    step = tessera.Program(f"lambda(y, p, list({', '.join(m.expressions('y', 'p', None))}))")
    totals = [sum(parts) for parts in zip(*(step.run([yb, pb]) for yb, pb in batches))]
    m.result(totals)

The definitions, names and defaults are Keras 3's:

* Mean metrics (accuracies, errors, crossentropies, ``MeanMetricWrapper``):
  Keras's per-sample values, averaged over any axes after the batch, then
  ``sum(w * values) / sum(w)`` (without weights: over the samples).
* ``Precision``, ``Recall``: counts of true/false positives (a prediction is
  positive when ``> threshold``; labels are positive when nonzero); each
  sample's weight counts for all its outputs. Several thresholds give a list.
* ``AUC``: Keras's confusion counts at ``num_thresholds`` thresholds evenly
  spread over [0, 1] (plus -1e-7 and 1 + 1e-7 at the ends), bucketed as
  Keras does, and its Riemann sums (``interpolation``, ``minoring``,
  ``majoring``; PR interpolation by Davis & Goadrich).
* Top-k accuracies count the target as in the top k when fewer than k
  classes score strictly higher (TensorFlow's ``in_top_k``: ties straddling
  the boundary are all in).
"""

from __future__ import annotations

import difflib
import math
import numbers
from typing import Optional

import numpy as np

from . import losses, metric_classes, metric_functions
from .metric_base import (_EPS, _F64, _NEG_INF, Metric, MeanMetricWrapper, _Builtin,  # noqa: F401
                          _bucket_counts, _counts, _divide_no_nan, _flat_parts, _like, _num,
                          _f64, _sparse, _thresholds)
from .metric_classes import *  # noqa: F401,F403 - more of Keras's metric classes
from .metric_functions import *  # noqa: F401,F403 - Keras's metric functions
from .sample_weights import same_rank
from .symbolic import user_location

__all__ = ["Metric", "MeanMetricWrapper", "Accuracy", "BinaryAccuracy", "CategoricalAccuracy",
           "SparseCategoricalAccuracy", "TopKCategoricalAccuracy",
           "SparseTopKCategoricalAccuracy", "Precision", "Recall", "AUC", "MeanAbsoluteError",
           "MeanSquaredError", "RootMeanSquaredError", "MeanAbsolutePercentageError",
           "MeanSquaredLogarithmicError", "BinaryCrossentropy", "CategoricalCrossentropy",
           "SparseCategoricalCrossentropy", "get", "serialize", "deserialize", "TruePositives",
           "FalsePositives", "TrueNegatives", "FalseNegatives", "FBetaScore", "F1Score", "Mean",
           "Sum"] + metric_classes.__all__ + metric_functions.__all__

class Accuracy(_Builtin):
    """How often the output equals the label (elementwise)."""

    name = "accuracy"

    def _values(self, y, p):
        return f"equal({_like(y, p)}, {p})"


class BinaryAccuracy(_Builtin):
    """How often ``p > threshold`` equals the 0/1 label."""

    name = "binary_accuracy"

    def __init__(self, name=None, dtype=None, threshold=0.5):
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise ValueError(f"[BinaryAccuracy] threshold must be a number, got {threshold!r}")
        self.threshold = float(threshold)
        super().__init__(name)

    def _values(self, y, p):
        return (f"equal({_like(y, p)}, astype({p} > {_num(self.threshold)}, "
                f"dtype_name({p})))")

    def get_config(self):
        return {**super().get_config(), "threshold": self.threshold}


class CategoricalAccuracy(_Builtin):
    """How often the output's arg max is the one-hot label's."""

    name = "categorical_accuracy"

    def _values(self, y, p):
        return f"equal(argmax({y}, axis=-1), argmax({p}, axis=-1))"


class SparseCategoricalAccuracy(_Builtin):
    """How often the output's arg max is the integer label."""

    name = "sparse_categorical_accuracy"

    def _values(self, y, p):
        return f"equal({_sparse(y, p)}, argmax({p}, axis=-1))"


class _TopK(_Builtin):
    def __init__(self, k=5, name=None, dtype=None):
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"[{type(self).__name__}] k must be an int >= 1, got {k!r}")
        self.k = int(k)
        super().__init__(name)

    def _targets(self, y, p):
        raise NotImplementedError

    def _values(self, y, p):
        target = f"take_along_axis({p}, expand_dims({self._targets(y, p)}, -1), -1)"
        return f"sum({p} > {target}, axis=-1) < {self.k}"

    def get_config(self):
        return {**super().get_config(), "k": self.k}


class TopKCategoricalAccuracy(_TopK):
    """How often the one-hot label's class is in the output's top k."""

    name = "top_k_categorical_accuracy"

    def _targets(self, y, p):
        return f"argmax({y}, axis=-1)"


class SparseTopKCategoricalAccuracy(_TopK):
    """How often the integer label is in the output's top k."""

    name = "sparse_top_k_categorical_accuracy"

    def _targets(self, y, p):
        return _sparse(y, p)


class MeanAbsoluteError(_Builtin):
    name = "mean_absolute_error"

    def _values(self, y, p):
        return f"mean(abs({_like(y, p)} - {p}), axis=-1)"


class MeanSquaredError(_Builtin):
    name = "mean_squared_error"

    def _values(self, y, p):
        return f"mean(square({_like(y, p)} - {p}), axis=-1)"


class RootMeanSquaredError(_Builtin):
    """The square root of the (weighted) mean of the squared errors."""

    name = "root_mean_squared_error"

    def _values(self, y, p):
        return f"square({p} - {_like(y, p)})"

    def result(self, totals):
        return math.sqrt(super().result(totals))


class MeanAbsolutePercentageError(_Builtin):
    name = "mean_absolute_percentage_error"

    def _values(self, y, p):
        t = _like(y, p)
        return f"100.0 * mean(abs(({t} - {p}) / maximum(abs({t}), {_num(_EPS)})), axis=-1)"


class MeanSquaredLogarithmicError(_Builtin):
    name = "mean_squared_logarithmic_error"

    def _values(self, y, p):
        t = _like(y, p)
        return (f"mean(square(log(maximum({p}, {_num(_EPS)}) + 1.0) - "
                f"log(maximum({t}, {_num(_EPS)}) + 1.0)), axis=-1)")


def _smoothing(cls: str, s) -> float:
    if isinstance(s, bool) or not isinstance(s, numbers.Real) or not 0 <= s <= 1:
        raise ValueError(f"[{cls}] label_smoothing must be a number in [0, 1], got {s!r}")
    return float(s)


class BinaryCrossentropy(_Builtin):
    """Keras's binary crossentropy per sample (mean over the last axis; the
    output clipped to [1e-7, 1 - 1e-7], or the stable form with logits)."""

    name = "binary_crossentropy"

    def __init__(self, name=None, dtype=None, from_logits=False, label_smoothing=0.0):
        self.from_logits = bool(from_logits)
        self.label_smoothing = _smoothing("BinaryCrossentropy", label_smoothing)
        super().__init__(name)

    def _values(self, y, p):
        t = _like(y, p)
        s = self.label_smoothing
        if s:
            t = f"({t} * {_num(1 - s)} + {_num(0.5 * s)})"
        if self.from_logits:
            elem = f"maximum({p}, 0.0) - {p} * {t} + log1p(exp(-abs({p})))"
        else:
            q = f"clip({p}, {_num(_EPS)}, {_num(1 - _EPS)})"
            elem = f"-({t} * log({q}) + (1.0 - {t}) * log(1.0 - {q}))"
        return f"mean({elem}, axis=-1)"

    def get_config(self):
        return {**super().get_config(), "from_logits": self.from_logits,
                "label_smoothing": self.label_smoothing}


def _log_probs(p: str, from_logits: bool) -> str:
    if from_logits:
        return f"log_softmax({p}, axis=-1)"
    return (f"log(clip({p} / sum({p}, axis=-1, keepdims=true), {_num(_EPS)}, "
            f"{_num(1 - _EPS)}))")


class CategoricalCrossentropy(_Builtin):
    """Keras's categorical crossentropy per sample (one-hot labels, smoothed
    toward uniform by ``label_smoothing``)."""

    name = "categorical_crossentropy"

    def __init__(self, name=None, dtype=None, from_logits=False, label_smoothing=0.0):
        self.from_logits = bool(from_logits)
        self.label_smoothing = _smoothing("CategoricalCrossentropy", label_smoothing)
        super().__init__(name)

    def _values(self, y, p):
        t = _like(y, p)
        s = self.label_smoothing
        if s:
            t = f"({t} * {_num(1 - s)} + {_num(s)} / shape({p})[-1])"
        return f"-sum({t} * {_log_probs(p, self.from_logits)}, axis=-1)"

    def get_config(self):
        return {**super().get_config(), "from_logits": self.from_logits,
                "label_smoothing": self.label_smoothing}


class SparseCategoricalCrossentropy(_Builtin):
    """Keras's sparse categorical crossentropy per sample (integer labels)."""

    name = "sparse_categorical_crossentropy"

    def __init__(self, name=None, dtype=None, from_logits=False):
        self.from_logits = bool(from_logits)
        super().__init__(name)

    def _values(self, y, p):
        picked = (f"take_along_axis({_log_probs(p, self.from_logits)}, "
                  f"expand_dims({_sparse(y, p)}, -1), -1)")
        return f"-sum({picked}, axis=-1)"

    def get_config(self):
        return {**super().get_config(), "from_logits": self.from_logits}


class _PrecisionRecall(Metric):
    _kinds = ("tp", "fp")

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        cls = type(self).__name__
        if top_k is not None and (isinstance(top_k, bool) or
                                  not isinstance(top_k, numbers.Integral) or top_k < 1):
            raise ValueError(f"[{cls}] top_k must be None or an int >= 1, got {top_k!r}")
        if class_id is not None and (isinstance(class_id, bool) or
                                     not isinstance(class_id, numbers.Integral) or class_id < 0):
            raise ValueError(f"[{cls}] class_id must be None or an int >= 0, got {class_id!r}")
        self.init_thresholds = thresholds if thresholds is None or isinstance(
            thresholds, numbers.Real) else list(thresholds)
        self.thresholds = _thresholds(cls, thresholds, 0.5 if top_k is None else _NEG_INF)
        self.top_k = None if top_k is None else int(top_k)
        self.class_id = None if class_id is None else int(class_id)
        super().__init__(name)

    def expressions(self, y, p, w=None):
        parts = _flat_parts(y, p, w, self.top_k, self.class_id)
        return [_counts(self.thresholds, self._kinds, *parts)]

    def _ratio(self, tp, other):
        return _divide_no_nan(tp, tp + other)

    def result(self, totals):
        counts = np.asarray(totals[0], np.float64)
        out = self._ratio(counts[0], counts[1])
        return float(out[0]) if len(out) == 1 else [float(v) for v in out]

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds,
                "top_k": self.top_k, "class_id": self.class_id}


class Precision(_PrecisionRecall):
    """True positives / predicted positives (0 when nothing is predicted)."""

    name = "precision"
    _kinds = ("tp", "fp")


class Recall(_PrecisionRecall):
    """True positives / actual positives (0 when there are none)."""

    name = "recall"
    _kinds = ("tp", "fn")


class _ConfusionCount(Metric):
    """Keras's TruePositives & co: the weighted count over every output value
    (a prediction is positive when > threshold, a label when nonzero); a
    list of thresholds gives a list."""

    _kind = "tp"

    def __init__(self, thresholds=None, name=None, dtype=None):
        cls = type(self).__name__
        self.init_thresholds = thresholds if thresholds is None or isinstance(
            thresholds, numbers.Real) else list(thresholds)
        self.thresholds = _thresholds(cls, thresholds, 0.5)
        super().__init__(name)

    def expressions(self, y, p, w=None):
        parts = _flat_parts(y, p, w, None, None)
        return [_counts(self.thresholds, (self._kind,), *parts)]

    def result(self, totals):
        counts = np.asarray(totals[0], np.float64)[0]
        return float(counts[0]) if self.init_thresholds is None or isinstance(
            self.init_thresholds, numbers.Real) else [float(v) for v in counts]

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds}


class TruePositives(_ConfusionCount):
    name, _kind = "true_positives", "tp"


class FalsePositives(_ConfusionCount):
    name, _kind = "false_positives", "fp"


class TrueNegatives(_ConfusionCount):
    name, _kind = "true_negatives", "tn"


class FalseNegatives(_ConfusionCount):
    name, _kind = "false_negatives", "fn"


class FBetaScore(Metric):
    """Keras's FBetaScore: per class (the last axis) true positives, false
    positives, false negatives and label weights summed over the samples;
    the score per class, or averaged ("micro", "macro", "weighted"). Without
    a threshold, each sample's largest output is its prediction (ties all
    count, an all-zero output none), as Keras does."""

    name = "fbeta_score"

    def __init__(self, average=None, beta=1.0, threshold=None, name=None, dtype=None):
        cls = type(self).__name__
        if average not in (None, "micro", "macro", "weighted"):
            raise ValueError(f"[{cls}] average must be None, 'micro', 'macro' or 'weighted', "
                             f"got {average!r}")
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or beta <= 0:
            raise ValueError(f"[{cls}] beta must be a number > 0, got {beta!r}")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(
                threshold, numbers.Real) or not 0 < threshold <= 1):
            raise ValueError(f"[{cls}] threshold must be None or a number in (0, 1], got "
                             f"{threshold!r}")
        self.average, self.beta = average, float(beta)
        self.threshold = None if threshold is None else float(threshold)
        super().__init__(name)

    checks_shapes = True  # a model's programs call expressions_for

    def expressions_for(self, y, p, w, ctx, label_spec, out_shape, w_shape=None):
        if label_spec is not None and tuple(label_spec[0]) != tuple(out_shape):
            raise ValueError(f"[{self.name}] {type(self).__name__} needs labels shaped like the "
                             f"output (one-hot or multi-label, as in Keras): labels of shape "
                             f"{(None,) + tuple(label_spec[0])}, output "
                             f"{(None,) + tuple(out_shape)}")
        return self.expressions(y, p, w)

    def expressions(self, y, p, w=None):
        q = f"astype({p}, {_F64})"
        if self.threshold is None:
            pred = (f"logical_and({q} >= max({q}, axis=-1, keepdims=true), "
                    f"abs({q}) > 1e-9)")
        else:
            pred = f"{q} > {_num(self.threshold)}"
        pred = f"astype({pred}, {_F64})"
        t = f"astype({y}, {_F64})"
        wv = "" if w is None else f" * reshape(astype({w}, {_F64}), [-1, 1])"
        flat = "reshape({}, list(-1, shape(" + q + ")[-1]))"
        return [f"sum({flat.format(e)}{wv}, axis=0)" for e in
                (f"{pred} * {t}", f"{pred} * (1.0 - {t})", f"(1.0 - {pred}) * {t}", t)]

    def result(self, totals):
        tp, fp, fn, weights = (np.asarray(t, np.float64) for t in totals)
        eps = _EPS
        if self.average == "micro":
            tp, fp, fn = tp.sum(), fp.sum(), fn.sum()
        b2 = self.beta * self.beta
        precision = tp / (tp + fp + eps)
        recall = tp / (tp + fn + eps)
        score = precision * recall / (b2 * precision + recall + eps) * (1 + b2)
        if self.average == "weighted":
            score = np.sum(score * weights / (np.sum(weights) + eps))
        elif self.average is not None:
            score = np.mean(score)
        return float(score) if np.ndim(score) == 0 else [float(v) for v in score]

    def get_config(self):
        return {**super().get_config(), "average": self.average, "beta": self.beta,
                "threshold": self.threshold}


class F1Score(FBetaScore):
    """Keras's F1Score: FBetaScore with beta = 1."""

    name = "f1_score"

    def __init__(self, average=None, threshold=None, name=None, dtype=None):
        super().__init__(average, 1.0, threshold, name, dtype)

    def get_config(self):
        config = super().get_config()
        config.pop("beta")
        return config


def _f32(v):
    return v.astype("float32") if hasattr(v, "op") else np.asarray(v, dtype="float32")


def _samplewise(values, sample_weight, reduce=np.mean):
    """Keras's reduce_to_samplewise_values: values reduced (mean for Mean,
    sum for Sum) down to the weights' rank, weighted, then reduced per
    sample; the weights reduced per sample too."""
    values = _f32(values)
    w = None
    if sample_weight is not None:
        # (Keras's squeeze_or_expand_to_same_rank first: (batch, steps, 1) weights of
        # (batch, steps) values)
        values, w = same_rank(values, _f32(sample_weight), np.squeeze, np.expand_dims)
        if values.ndim > w.ndim:
            values = reduce(values, axis=tuple(range(w.ndim, values.ndim)))
        w = w * np.ones_like(values)
        values = values * w
        if w.ndim > 1:
            w = reduce(w, axis=tuple(range(1, w.ndim)))
    if values.ndim > 1:
        values = reduce(values, axis=tuple(range(1, values.ndim)))
    return values, w


class Mean(Metric):
    """Keras's Mean: the weighted mean of the values given to update_state
    (values of several axes are first averaged per sample)."""

    name = "mean"

    def __init__(self, name=None, dtype=None):
        super().__init__(name, dtype)
        self.total = self.add_variable((), "zeros", "float32", name="total")
        self.count = self.add_variable((), "zeros", "float32", name="count")

    def update_state(self, values, sample_weight=None):
        values, w = _samplewise(values, sample_weight)
        self.total.assign_add(np.sum(values))
        if w is not None:
            self.count.assign_add(np.sum(w))
        elif values.ndim == 0:
            self.count.assign_add(1.0)
        else:
            self.count.assign_add(np.sum(np.ones_like(values)))

    def result(self):
        c = float(self.count.value)
        return np.float32(float(self.total.value) / c) if c else np.float32(0.0)


class Sum(Metric):
    """Keras's Sum: the weighted sum of the values given to update_state."""

    name = "sum"

    def __init__(self, name=None, dtype=None):
        super().__init__(name, dtype)
        self.total = self.add_variable((), "zeros", "float32", name="total")

    def update_state(self, values, sample_weight=None):
        values, _ = _samplewise(values, sample_weight, np.sum)
        self.total.assign_add(np.sum(values))

    def result(self):
        return np.float32(self.total.value)


class AUC(Metric):
    """Keras's AUC: the area under the ROC or PR curve from the confusion
    counts at ``num_thresholds`` thresholds (or at ``thresholds`` plus the
    ends), summed as ``summation_method`` says. ``multi_label=True``: counts
    per label (outputs of shape (batch, labels)) and the mean of the labels'
    areas, weighted by ``label_weights`` when given; with ``multi_label=False``
    the ``label_weights`` weight each label's entries in the flattened counts."""

    name = "auc"

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation",
                 name=None, dtype=None, thresholds=None, multi_label=False, num_labels=None,
                 label_weights=None, from_logits=False):
        self.multi_label = bool(multi_label)
        if num_labels is not None and not self.multi_label:
            raise ValueError(f"[AUC] num_labels is needed only when multi_label is True, got "
                             f"num_labels={num_labels!r}")
        if num_labels is not None and (isinstance(num_labels, bool) or not isinstance(
                num_labels, numbers.Integral) or num_labels < 1):
            raise ValueError(f"[AUC] num_labels must be a positive int, got {num_labels!r}")
        self.num_labels = None if num_labels is None else int(num_labels)
        self.label_weights = None
        if label_weights is not None:
            lw = np.asarray(label_weights, dtype=np.float32)
            if lw.ndim != 1 or lw.size == 0 or not np.all(np.isfinite(lw)) or np.any(lw < 0):
                raise ValueError(f"[AUC] label_weights must be a 1-D list of non-negative "
                                 f"numbers, one per label, got {label_weights!r}")
            if self.num_labels is not None and lw.size != self.num_labels:
                raise ValueError(f"[AUC] label_weights has {lw.size} entries but num_labels is "
                                 f"{self.num_labels}")
            self.label_weights = lw
        curve = curve.upper() if isinstance(curve, str) else curve
        if curve not in ("ROC", "PR"):
            raise ValueError(f"[AUC] curve must be 'ROC' or 'PR', got {curve!r}")
        method = summation_method.lower() if isinstance(summation_method, str) else None
        if method not in ("interpolation", "minoring", "majoring"):
            raise ValueError(f"[AUC] summation_method must be 'interpolation', 'minoring' or "
                             f"'majoring', got {summation_method!r}")
        self.curve, self.summation_method = curve, method
        self.from_logits = bool(from_logits)
        self.init_thresholds = None if thresholds is None else list(thresholds)
        if thresholds is not None:
            inner = sorted(_thresholds("AUC", list(thresholds), 0.5))
            self.num_thresholds = len(inner) + 2
            ends = np.array([0.0] + inner + [1.0])
            even = np.arange(len(ends), dtype=np.float32) / (len(ends) - 1)
            self.evenly = len(ends) >= 3 and bool(np.allclose(ends, even, atol=_EPS))
        else:
            if isinstance(num_thresholds, bool) or not isinstance(num_thresholds,
                                                                  numbers.Integral) or \
                    num_thresholds <= 1:
                raise ValueError(f"[AUC] num_thresholds must be an int > 1, got "
                                 f"{num_thresholds!r}")
            self.num_thresholds = int(num_thresholds)
            inner = [(i + 1) * 1.0 / (self.num_thresholds - 1)
                     for i in range(self.num_thresholds - 2)]
            self.evenly = True
        self.thresholds = [0.0 - _EPS] + inner + [1.0 + _EPS]
        super().__init__(name)

    checks_shapes = True  # a model's programs call expressions_for

    def _check_labels(self, out_shape, where):
        """The per-sample output shape a multi-label AUC or one with
        label_weights can count: (labels,) for multi_label (Keras needs rank 2
        with the batch), and label_weights one per entry of the last axis."""
        n = out_shape[-1] if out_shape else 1
        if self.multi_label and len(out_shape) != 1:
            raise ValueError(f"[{self.name}] AUC(multi_label=True) needs outputs of shape "
                             f"(batch, labels) (rank 2, as Keras), got "
                             f"{(None,) + tuple(out_shape)} ({where})")
        if self.multi_label and self.num_labels is not None and n != self.num_labels:
            raise ValueError(f"[{self.name}] AUC(num_labels={self.num_labels}) got outputs of "
                             f"{n} labels, shape {(None,) + tuple(out_shape)} ({where})")
        if self.label_weights is not None and self.label_weights.size != n:
            raise ValueError(f"[{self.name}] label_weights has {self.label_weights.size} "
                             f"entries but the outputs have {n} labels (last axis of "
                             f"{(None,) + tuple(out_shape)}) ({where})")

    def expressions_for(self, y, p, w, ctx, label_spec, out_shape, w_shape=None):
        self._check_labels(tuple(out_shape), f"at {user_location()}")
        return self.expressions(y, p, w)

    def _check_eager_shapes(self, out_shape):  # (Metric.update_state's hook)
        if self.multi_label or self.label_weights is not None:
            self._check_labels(tuple(out_shape), f"at {user_location()}")

    def expressions(self, y, p, w=None):
        preds, labels, weights = _flat_parts(y, p, w, None, None, self.from_logits)
        if self.label_weights is not None and not self.multi_label:
            # Keras: each label's entries weighted by its label weight in the counts
            lw = "array([" + ", ".join(_num(v) for v in self.label_weights) + "])"
            ones = f"ones_like({p}, dtype={_F64})"
            per = ones if w is None else f"transpose(transpose({ones}) * {_f64(w)})"
            weights = f"ravel({per} * {lw})"
        if not self.multi_label:
            if self.evenly:
                return [_bucket_counts(self.num_thresholds, preds, labels, weights)]
            return [_counts(self.thresholds, ("tp", "fp", "tn", "fn"), preds, labels, weights)]
        # per label: (4, thresholds, labels), the entries of each label column counted alone
        rows = f"list(-1, shape({p})[-1])"
        q, l, v = (f"reshape({e}, {rows})" for e in (preds, labels, weights))
        if self.evenly:
            n = self.num_thresholds
            idx = (f"astype(maximum(ceil(clip(q, 0.0, 1.0) * {_num(n - 1)}) - 1.0, 0.0), "
                   "\"int64\")")
            hit = (f"astype(expand_dims(i, 0) == reshape(arange({n}), list(-1, 1, 1)), "
                   f"{_F64})")
            tp = "flip(cumsum(flip(sum(h * l * v, axis=1), axis=0), axis=0), axis=0)"
            fp = "flip(cumsum(flip(sum(h * (1.0 - l) * v, axis=1), axis=0), axis=0), axis=0)"
            body = ("stack(list(tp, fp, sum((1.0 - l) * v, axis=0) - fp, "
                    "sum(l * v, axis=0) - tp))")
            return [f"(lambda(q, l, v, (lambda(i, (lambda(h, (lambda(tp, fp, {body}))({tp}, "
                    f"{fp})))({hit})))({idx})))({q}, {l}, {v})"]
        ts = "array([" + ", ".join(_num(t) for t in self.thresholds) + "])"
        g = f"astype(expand_dims(q, 0) > reshape({ts}, list(-1, 1, 1)), {_F64})"
        body = ("stack(list(sum(g * l * v, axis=1), sum(g * (1.0 - l) * v, axis=1), "
                "sum((1.0 - g) * (1.0 - l) * v, axis=1), sum((1.0 - g) * l * v, axis=1)))")
        return [f"(lambda(q, l, v, (lambda(g, {body}))({g})))({q}, {l}, {v})"]

    def _by_label(self, terms):
        """The area: the terms summed over the thresholds, for several labels
        their mean (weighted by label_weights, Keras's divide_no_nan)."""
        if not self.multi_label:
            return float(np.sum(terms))
        by_label = np.sum(terms, axis=0)
        if self.label_weights is None:
            return float(np.mean(by_label))
        lw = self.label_weights.astype(np.float64)
        total = float(np.sum(lw))
        return float(np.sum(by_label * lw) / total) if total else 0.0

    def result(self, totals):
        tp, fp, tn, fn = np.asarray(totals[0], np.float64)
        if self.curve == "PR" and self.summation_method == "interpolation":
            return self._interpolate_pr_auc(tp, fp, fn)
        recall = _divide_no_nan(tp, tp + fn)
        if self.curve == "ROC":
            x, y = _divide_no_nan(fp, fp + tn), recall
        else:
            x, y = recall, _divide_no_nan(tp, tp + fp)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = np.minimum(y[:-1], y[1:])
        else:
            heights = np.maximum(y[:-1], y[1:])
        return self._by_label((x[:-1] - x[1:]) * heights)

    def _interpolate_pr_auc(self, tp, fp, fn):
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = _divide_no_nan(dtp, np.maximum(dp, 0))
        intercept = tp[1:] - slope * p[1:]
        both = (p[:-1] > 0) & (p[1:] > 0)
        ratio = np.where(both, _divide_no_nan(p[:-1], np.maximum(p[1:], 0)), 1.0)
        increment = _divide_no_nan(slope * (dtp + intercept * np.log(ratio)),
                                   np.maximum(tp[1:] + fn[1:], 0))
        return self._by_label(increment)

    def get_config(self):
        return {**super().get_config(), "num_thresholds": self.num_thresholds,
                "curve": self.curve, "summation_method": self.summation_method,
                "thresholds": self.init_thresholds, "from_logits": self.from_logits,
                "multi_label": self.multi_label, "num_labels": self.num_labels,
                "label_weights": None if self.label_weights is None else
                [float(v) for v in self.label_weights]}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("thresholds") is not None:
            config.pop("num_thresholds", None)
        return super().from_config(config)


# --------------------------------------------------------------------------- by name

_CLASSES = {c.__name__: c for c in (
    Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy,
    TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, Precision, Recall, AUC,
    MeanAbsoluteError, MeanSquaredError, RootMeanSquaredError, MeanAbsolutePercentageError,
    MeanSquaredLogarithmicError, BinaryCrossentropy, CategoricalCrossentropy,
    SparseCategoricalCrossentropy, TruePositives, FalsePositives, TrueNegatives, FalseNegatives,
    FBetaScore, F1Score, Mean, Sum) + tuple(getattr(metric_classes, n)
                                           for n in metric_classes.__all__)}

_BY_NAME = {
    "binary_accuracy": BinaryAccuracy, "categorical_accuracy": CategoricalAccuracy,
    "sparse_categorical_accuracy": SparseCategoricalAccuracy,
    "top_k_categorical_accuracy": TopKCategoricalAccuracy,
    "sparse_top_k_categorical_accuracy": SparseTopKCategoricalAccuracy,
    "precision": Precision, "recall": Recall, "auc": AUC,
    "mean_absolute_error": MeanAbsoluteError, "mae": MeanAbsoluteError,
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError,
    "root_mean_squared_error": RootMeanSquaredError, "rmse": RootMeanSquaredError,
    "mean_absolute_percentage_error": MeanAbsolutePercentageError,
    "mape": MeanAbsolutePercentageError,
    "mean_squared_logarithmic_error": MeanSquaredLogarithmicError,
    "msle": MeanSquaredLogarithmicError,
    "binary_crossentropy": BinaryCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "hinge": metric_classes.Hinge, "squared_hinge": metric_classes.SquaredHinge,
    "categorical_hinge": metric_classes.CategoricalHinge,
    "kl_divergence": metric_classes.KLDivergence, "kld": metric_classes.KLDivergence,
    "logcosh": metric_classes.LogCoshError, "log_cosh": metric_classes.LogCoshError,
    "poisson": metric_classes.Poisson, "cosine_similarity": metric_classes.CosineSimilarity,
    "pearson_correlation": metric_classes.PearsonCorrelation,
    "concordance_correlation": metric_classes.ConcordanceCorrelation,
    "r2_score": metric_classes.R2Score,
}

_ACCURACY_FOR_LOSS = {
    "sparse_categorical_crossentropy": SparseCategoricalAccuracy,
    "binary_crossentropy": BinaryAccuracy,
    "categorical_crossentropy": CategoricalAccuracy,
}


def _hint(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _loss_name(loss) -> Optional[str]:
    if loss is None:
        return None
    if isinstance(loss, str):
        name = loss.lower()
    else:
        name = getattr(loss, "name", None)
    try:
        return losses.loss_object(name).name if isinstance(name, str) else None
    except (ValueError, TypeError):
        return name


def _accuracy(name: str, loss, y_shape, p_shape) -> Metric:
    """Keras's "accuracy" by the loss, else by the shapes (Keras 3's rule)."""
    if hasattr(loss, "accuracy_metric"):  # a loss of logits split by vocabulary
        return loss.accuracy_metric(name)
    cls = _ACCURACY_FOR_LOSS.get(_loss_name(loss))
    if cls is None and p_shape is not None and p_shape and p_shape[-1] == 1:
        cls = BinaryAccuracy  # whatever the labels (siamese_contrastive's own loss)
    if cls is None and y_shape is not None and p_shape is not None:
        y_shape, p_shape = tuple(y_shape), tuple(p_shape)
        is_binary = p_shape[-1] == 1
        is_sparse = len(y_shape) < len(p_shape) or (y_shape[-1] == 1 and p_shape[-1] > 1)
        cls = (BinaryAccuracy if is_binary else SparseCategoricalAccuracy if is_sparse
               else CategoricalAccuracy)
    return (cls or Accuracy)(name=name)


def serialize(metric: Metric) -> dict:
    """``metric.get_config()``."""
    return metric.get_config()


def deserialize(config) -> Metric:
    """The metric a ``get_config()`` dict (or Keras's ``{"class_name": ...,
    "config": {...}}``) describes."""
    config = dict(config)
    if "class_name" in config and "class" not in config:
        config = {"class": config["class_name"], **(config.get("config") or {})}
    cls = _CLASSES.get(config.get("class"))
    if cls is None:
        raise ValueError(f"[metrics.deserialize] unknown metric class {config.get('class')!r}"
                         f"{_hint(str(config.get('class')), _CLASSES)} Known: "
                         f"{sorted(_CLASSES)}")
    return cls.from_config(config)


def get(identifier, loss=None, y_shape=None, p_shape=None) -> Metric:
    """A metric from Keras's names and aliases (the metric is named as given:
    ``"mae"`` logs as ``mae``), a config dict or a Metric (returned as is).

    ``"accuracy"``/``"acc"`` resolve as Keras does: from the loss (sparse
    categorical crossentropy: SparseCategoricalAccuracy; binary: BinaryAccuracy;
    categorical: CategoricalAccuracy), otherwise from the shapes of the labels
    and outputs (with the batch axis; Keras 3's rule: a last output axis of 1
    is binary; labels of lower rank, or a last label axis of 1 with several
    outputs, sparse; else categorical), otherwise elementwise Accuracy."""
    if getattr(loss, "vocab_parallel", False):
        metric = identifier if isinstance(identifier, Metric) else None
        if isinstance(identifier, str) and identifier.lower() in ("accuracy", "acc"):
            metric = _accuracy(identifier, loss, y_shape, p_shape)
        if not getattr(metric, "vocab_parallel", False):
            raise ValueError(f"metric {identifier!r} needs the whole output, but the loss "
                             f"{type(loss).__name__} leaves each member of the tensor group a "
                             "slice of the vocabulary; use 'accuracy' "
                             "(VocabParallelSparseCategoricalAccuracy)")
        return metric
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        if key in ("accuracy", "acc"):
            return _accuracy(identifier, loss, y_shape, p_shape)
        cls = _BY_NAME.get(key) or _CLASSES.get(identifier)
        if cls is None:
            known = sorted(set(_BY_NAME) | {"accuracy", "acc"})
            raise ValueError(f"[metrics.get] unknown metric {identifier!r}"
                             f"{_hint(key, known)} Known: {known}")
        return cls(name=identifier)
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if callable(identifier):
        raise TypeError(f"[metrics.get] a Python function ({identifier!r}) is not a metric "
                        "object: wrap an expression builder with MeanMetricWrapper(fn, name)")
    raise TypeError(f"[metrics.get] expected a metric name, config dict or Metric, got "
                    f"{identifier!r}")
