"""More of Keras's metric classes, re-exported by tessera.nn.metrics, in the
same compiled form as the others (``expressions``: sums over a batch;
``result(totals)``), so each runs inside a model's programs and standalone
(``update_state`` / ``result()`` / ``reset_state``, metric_base.Metric):

* mean metrics of the losses' per-sample values: ``Hinge``, ``SquaredHinge``,
  ``CategoricalHinge``, ``KLDivergence``, ``LogCoshError``, ``Poisson``, and
  ``CosineSimilarity``, ``PearsonCorrelation``, ``ConcordanceCorrelation``;
* ``R2Score``: per output column, the weighted sums of y, y², the squared
  residuals and the weights;
* the IoU family: a weighted confusion matrix of the classes (rows: labels);
* ``PrecisionAtRecall`` & co: Keras's confusion counts at ``num_thresholds``
  thresholds, and the best value under the constraint.
"""

from __future__ import annotations

import numbers
from typing import Optional

import numpy as np

from . import losses
from .metric_base import (_EPS, _F64, Metric, _Builtin, _bucket_counts, _counts,
                          _divide_no_nan, _f64, _flat_parts, _like, _num)

__all__ = ["Hinge", "SquaredHinge", "CategoricalHinge", "KLDivergence", "LogCoshError",
           "Poisson", "CosineSimilarity", "PearsonCorrelation", "ConcordanceCorrelation",
           "R2Score", "IoU", "MeanIoU", "BinaryIoU", "OneHotIoU", "OneHotMeanIoU",
           "PrecisionAtRecall", "RecallAtPrecision", "SensitivityAtSpecificity",
           "SpecificityAtSensitivity"]


class _LossMean(_Builtin):
    """The weighted mean of a loss's per-sample values (Keras's metric of a
    loss function)."""

    loss_class = None

    def __init__(self, name=None, dtype=None):
        super().__init__(name)
        self.dtype = dtype

    def _values(self, y, p):
        return self.loss_class().per_sample(_like(y, p), p)

    def get_config(self):
        return {**super().get_config(), "dtype": self.dtype}


class Hinge(_LossMean):
    name, loss_class = "hinge", losses.Hinge


class SquaredHinge(_LossMean):
    name, loss_class = "squared_hinge", losses.SquaredHinge


class CategoricalHinge(_LossMean):
    name, loss_class = "categorical_hinge", losses.CategoricalHinge


class KLDivergence(_LossMean):
    name, loss_class = "kl_divergence", losses.KLDivergence


class LogCoshError(_LossMean):
    name, loss_class = "logcosh", losses.LogCosh


class Poisson(_LossMean):
    name, loss_class = "poisson", losses.Poisson


def _last_axis(cls: str, axis) -> int:
    if axis != -1:
        raise ValueError(f"[{cls}] axis={axis!r} is not supported (axis=-1, the last axis)")
    return -1


class CosineSimilarity(_LossMean):
    """The cosine of labels and outputs over the last axis (1 when aligned)."""

    name = "cosine_similarity"

    def __init__(self, name=None, dtype=None, axis=-1):
        self.axis = _last_axis("CosineSimilarity", axis)
        super().__init__(name, dtype)

    def _values(self, y, p):
        return f"-({losses.CosineSimilarity().per_sample(_like(y, p), p)})"


class _Correlation(_LossMean):
    def __init__(self, name=None, dtype=None, axis=-1):
        self.axis = _last_axis(type(self).__name__, axis)
        super().__init__(name, dtype)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


class PearsonCorrelation(_Correlation):
    """Each sample's Pearson correlation of labels and outputs over the last
    axis, averaged (Keras's metrics.pearson_correlation)."""

    name = "pearson_correlation"

    def _values(self, y, p):
        t = _like(y, p)
        tn = f"({t} - mean({t}, axis=-1, keepdims=true))"
        pn = f"({p} - mean({p}, axis=-1, keepdims=true))"
        return (f"mean(({tn} / std({tn}, axis=-1, keepdims=true)) * "
                f"({pn} / std({pn}, axis=-1, keepdims=true)), axis=-1)")


class ConcordanceCorrelation(_Correlation):
    """Each sample's concordance correlation over the last axis, averaged
    (Keras's metrics.concordance_correlation, its covariance term as Keras
    writes it)."""

    name = "concordance_correlation"

    def _values(self, y, p):
        t = _like(y, p)
        tm, pm = f"mean({t}, axis=-1, keepdims=true)", f"mean({p}, axis=-1, keepdims=true)"
        tv = f"var({t} - {tm}, axis=-1, keepdims=true)"
        pv = f"var({p} - {pm}, axis=-1, keepdims=true)"
        return (f"mean(2.0 * (({t} - {pm}) * ({p} - {pm})) / "
                f"(({tv} + {pv} + square({tm} - {pm})) + {_num(_EPS)}), axis=-1)")


def _weights_like(t: str, w: Optional[str]) -> str:
    """Each sample's weight broadcast over its values (float64)."""
    ones = f"ones_like({t}, dtype={_F64})"
    return ones if w is None else f"transpose(transpose({ones}) * {_f64(w)})"


class R2Score(Metric):
    """Keras's R2Score: per output column 1 - SS_res / SS_tot from weighted
    sums over every batch; averaged uniformly or by variance, or one per
    column (class_aggregation=None); adjusted for ``num_regressors``."""

    name = "r2_score"

    def __init__(self, class_aggregation="uniform_average", num_regressors=0, name="r2_score",
                 dtype=None):
        if class_aggregation not in (None, "uniform_average", "variance_weighted_average"):
            raise ValueError(f"[R2Score] class_aggregation must be None, 'uniform_average' or "
                             f"'variance_weighted_average', got {class_aggregation!r}")
        if isinstance(num_regressors, bool) or not isinstance(num_regressors, numbers.Integral) \
                or num_regressors < 0:
            raise ValueError(f"[R2Score] num_regressors must be an int >= 0, got "
                             f"{num_regressors!r}")
        self.class_aggregation, self.num_regressors = class_aggregation, int(num_regressors)
        super().__init__(name, dtype)

    def expressions(self, y, p, w=None):
        t = _f64(_like(y, p))
        q = _f64(p)
        sw = _weights_like(t, w)
        two_d = f"reshape({{}}, list(shape({q})[0], -1))"
        return [f"sum({two_d.format(e)}, axis=0)" for e in
                (f"{t} * {sw}", f"{t} * {t} * {sw}", f"square({t} - {q}) * {sw}", sw)] + \
            [f"zeros(list(), dtype={_F64}) + size({q})"]

    def result(self, totals):
        s, s2, res, count, n = (np.asarray(v, np.float64) for v in totals)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = s / count
            total = s2 - s * mean
            raw = 1 - res / total
        raw = np.where(np.isinf(raw), 0.0, raw)
        if self.class_aggregation == "uniform_average":
            score = np.mean(raw)
        elif self.class_aggregation == "variance_weighted_average":
            score = np.sum(total * raw) / np.sum(total)
        else:
            score = raw
        k, n = self.num_regressors, float(n)
        if k and k < n - 1:
            score = 1 - (1 - score) * (n - 1) / (n - k - 1)
        return float(score) if np.ndim(score) == 0 else [float(v) for v in score]

    def get_config(self):
        return {**super().get_config(), "dtype": self.dtype,
                "class_aggregation": self.class_aggregation,
                "num_regressors": self.num_regressors}


def _class_ids(cls: str, ids, num_classes: int) -> list:
    values = list(ids)
    if not values or any(isinstance(i, bool) or not isinstance(i, numbers.Integral) or
                         not 0 <= i < num_classes for i in values):
        raise ValueError(f"[{cls}] target_class_ids must be class ids in [0, {num_classes}), "
                         f"got {ids!r}")
    return [int(i) for i in values]


class IoU(Metric):
    """Keras's IoU: a confusion matrix of the classes (weighted; labels or
    outputs outside [0, num_classes), and ``ignore_class``, left out), then
    TP / (TP + FP + FN) of the target classes, averaged over those present.
    As in Keras, the matrix is of ints unless ``dtype`` is a float dtype:
    fractional sample weights are truncated then."""

    name = "io_u"

    def __init__(self, num_classes, target_class_ids, name=None, dtype=None, ignore_class=None,
                 sparse_y_true=True, sparse_y_pred=True, axis=-1):
        cls = type(self).__name__
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or \
                num_classes < 1:
            raise ValueError(f"[{cls}] num_classes must be an int >= 1, got {num_classes!r}")
        self.num_classes = int(num_classes)
        self.target_class_ids = _class_ids(cls, target_class_ids, self.num_classes)
        if ignore_class is not None and (isinstance(ignore_class, bool) or
                                         not isinstance(ignore_class, numbers.Integral)):
            raise ValueError(f"[{cls}] ignore_class must be None or an int, got "
                             f"{ignore_class!r}")
        self.ignore_class = ignore_class
        self.sparse_y_true, self.sparse_y_pred = bool(sparse_y_true), bool(sparse_y_pred)
        self.axis = _last_axis(cls, axis)
        super().__init__(name, dtype)

    def _integer_weights(self) -> bool:
        return self.dtype is None or "int" in str(np.dtype(self.dtype))

    def _classes(self, y: str, p: str):
        t = y if self.sparse_y_true else f"argmax({y}, axis=-1)"
        q = p if self.sparse_y_pred else f"argmax({p}, axis=-1)"
        return t, q

    def expressions(self, y, p, w=None):
        t, q = self._classes(y, p)
        t, q = f"astype({t}, \"int64\")", f"astype({q}, \"int64\")"
        sw = _weights_like(t, w)
        if self._integer_weights():
            sw = f"astype(astype({sw}, \"int64\"), {_F64})"
        c = self.num_classes
        ok = f"logical_and(logical_and(t >= 0, t < {c}), logical_and(q >= 0, q < {c}))"
        if self.ignore_class is not None:
            ok = f"logical_and({ok}, t != {int(self.ignore_class)})"
        onehot = "one_hot(where(ok, {}, 0), " + str(c) + f", dtype={_F64})"
        cm = (f"matmul(transpose({onehot.format('t')} * reshape(where(ok, v, 0.0), "
              f"list(-1, 1))), {onehot.format('q')})")
        return [f"(lambda(t, q, v, (lambda(ok, {cm}))({ok})))(ravel({t}), ravel({q}), "
                f"ravel({sw}))"]

    def _ious(self, totals):
        cm = np.asarray(totals[0], np.float64)
        tp = np.diag(cm)
        denominator = (cm.sum(axis=0) + cm.sum(axis=1) - tp)[self.target_class_ids]
        tp = tp[self.target_class_ids].astype(np.float32)
        denominator = denominator.astype(np.float32)
        valid = denominator > 1e-9
        iou = np.where(valid, tp / (denominator + np.float32(_EPS)), 0.0)
        return iou, valid

    def result(self, totals):
        iou, valid = self._ious(totals)
        return float(np.sum(iou) / (np.sum(valid) + _EPS))

    def get_config(self):
        return {**super().get_config(), "dtype": self.dtype, "num_classes": self.num_classes,
                "target_class_ids": self.target_class_ids, "ignore_class": self.ignore_class,
                "sparse_y_true": self.sparse_y_true, "sparse_y_pred": self.sparse_y_pred,
                "axis": self.axis}


class MeanIoU(IoU):
    """Keras's MeanIoU: IoU of every class."""

    name = "mean_io_u"

    def __init__(self, num_classes, name=None, dtype=None, ignore_class=None,
                 sparse_y_true=True, sparse_y_pred=True, axis=-1):
        super().__init__(num_classes, list(range(int(num_classes) if isinstance(
            num_classes, numbers.Integral) and not isinstance(num_classes, bool) and
            num_classes > 0 else 1)), name, dtype, ignore_class, sparse_y_true, sparse_y_pred,
            axis)
        if self.num_classes != num_classes:
            raise ValueError(f"[MeanIoU] num_classes must be an int >= 1, got {num_classes!r}")

    def get_config(self):
        config = super().get_config()
        config.pop("target_class_ids")
        return config


class BinaryIoU(IoU):
    """Keras's BinaryIoU: outputs >= ``threshold`` are class 1, the others 0."""

    name = "binary_io_u"

    def __init__(self, target_class_ids=(0, 1), threshold=0.5, name=None, dtype=None):
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise ValueError(f"[BinaryIoU] threshold must be a number, got {threshold!r}")
        self.threshold = float(threshold)
        super().__init__(2, target_class_ids, name, dtype)

    def _classes(self, y, p):
        return y, f"astype({p}, \"float32\") >= {_num(self.threshold)}"

    def get_config(self):
        return {"class": "BinaryIoU", "target_class_ids": self.target_class_ids,
                "threshold": self.threshold, "name": self.name, "dtype": self.dtype}


class OneHotIoU(IoU):
    """Keras's OneHotIoU: one-hot labels (their arg max) and outputs."""

    name = "one_hot_io_u"

    def __init__(self, num_classes, target_class_ids, name=None, dtype=None, ignore_class=None,
                 sparse_y_pred=False, axis=-1):
        super().__init__(num_classes, target_class_ids, name, dtype, ignore_class, False,
                         sparse_y_pred, axis)

    def get_config(self):
        config = super().get_config()
        config.pop("sparse_y_true")
        return config


class OneHotMeanIoU(MeanIoU):
    """Keras's OneHotMeanIoU: MeanIoU of one-hot labels and outputs."""

    name = "one_hot_mean_io_u"

    def __init__(self, num_classes, name=None, dtype=None, ignore_class=None,
                 sparse_y_pred=False, axis=-1):
        super().__init__(num_classes, name, dtype, ignore_class, False, sparse_y_pred, axis)

    def get_config(self):
        config = super().get_config()
        config.pop("sparse_y_true")
        return config


class _AtConstraint(Metric):
    """Keras's SensitivitySpecificityBase: tp, fp, tn, fn at num_thresholds
    thresholds evenly in [0, 1] (Keras's buckets), and the largest value of
    one rate where the other is at least ``value``."""

    _value_name = "value"

    def __init__(self, value, num_thresholds=200, class_id=None, name=None, dtype=None):
        cls = type(self).__name__
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
            raise ValueError(f"[{cls}] {self._value_name} must be a number in [0, 1], got "
                             f"{value!r}")
        if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, numbers.Integral) \
                or num_thresholds <= 0:
            raise ValueError(f"[{cls}] num_thresholds must be an int > 0, got "
                             f"{num_thresholds!r}")
        if class_id is not None and (isinstance(class_id, bool) or
                                     not isinstance(class_id, numbers.Integral) or class_id < 0):
            raise ValueError(f"[{cls}] class_id must be None or an int >= 0, got {class_id!r}")
        self.value, self.num_thresholds = value, int(num_thresholds)
        setattr(self, self._value_name, value)
        self.class_id = None if class_id is None else int(class_id)
        super().__init__(name, dtype)

    def expressions(self, y, p, w=None):
        parts = _flat_parts(y, p, w, None, self.class_id)
        if self.num_thresholds == 1:
            return [_counts([0.5], ("tp", "fp", "tn", "fn"), *parts)]
        return [_bucket_counts(self.num_thresholds, *parts)]

    def _rates(self, tp, fp, tn, fn):
        """(the constrained rate, the rate maximized) at each threshold."""
        raise NotImplementedError

    def result(self, totals):
        tp, fp, tn, fn = np.asarray(totals[0], np.float64)
        constrained, dependent = self._rates(tp, fp, tn, fn)
        feasible = constrained >= self.value
        return float(np.max(np.where(feasible, dependent, 0.0), initial=0.0))

    def get_config(self):
        return {**super().get_config(), "dtype": self.dtype, "class_id": self.class_id,
                "num_thresholds": self.num_thresholds, self._value_name: self.value}


def _recall(tp, fp, tn, fn):
    return _divide_no_nan(tp, tp + fn)


def _precision(tp, fp, tn, fn):
    return _divide_no_nan(tp, tp + fp)


def _specificity(tp, fp, tn, fn):
    return _divide_no_nan(tn, tn + fp)


class SensitivityAtSpecificity(_AtConstraint):
    """The best sensitivity (recall) where the specificity is >= ``specificity``."""

    name, _value_name = "sensitivity_at_specificity", "specificity"

    def __init__(self, specificity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(specificity, num_thresholds, class_id, name, dtype)

    def _rates(self, *counts):
        return _specificity(*counts), _recall(*counts)


class SpecificityAtSensitivity(_AtConstraint):
    """The best specificity where the sensitivity is >= ``sensitivity``."""

    name, _value_name = "specificity_at_sensitivity", "sensitivity"

    def __init__(self, sensitivity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(sensitivity, num_thresholds, class_id, name, dtype)

    def _rates(self, *counts):
        return _recall(*counts), _specificity(*counts)


class PrecisionAtRecall(_AtConstraint):
    """The best precision where the recall is >= ``recall``."""

    name, _value_name = "precision_at_recall", "recall"

    def __init__(self, recall, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(recall, num_thresholds, class_id, name, dtype)

    def _rates(self, *counts):
        return _recall(*counts), _precision(*counts)


class RecallAtPrecision(_AtConstraint):
    """The best recall where the precision is >= ``precision``."""

    name, _value_name = "recall_at_precision", "precision"

    def __init__(self, precision, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(precision, num_thresholds, class_id, name, dtype)

    def _rates(self, *counts):
        return _precision(*counts), _recall(*counts)
