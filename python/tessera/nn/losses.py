"""tessera.nn.losses: Keras's losses, with Keras's names, arguments and definitions (the mean
over the samples of each sample's loss), for ``model.compile(loss=...)``. Each writes itself as
an expression of tessera's language in the labels and the model's output, which the training
step differentiates like the rest of the model.

    model.compile("adam", nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile("adam", nn.losses.Huber(delta=2.0))
    model.compile("adam", "kld")          # the same by name
"""

import difflib
import inspect
import numbers

import numpy as np

from . import ops
from .functional import apply_function
from .loss_reductions import reduce_values, with_reduction
from .registry import get_registered_object
from .symbolic import is_symbolic

__all__ = ["Loss", "MeanSquaredError", "MeanAbsoluteError", "MeanAbsolutePercentageError",
           "MeanSquaredLogarithmicError", "Huber", "LogCosh", "KLDivergence", "Poisson",
           "SparseCategoricalCrossentropy", "CategoricalCrossentropy", "BinaryCrossentropy",
           "FunctionLoss", "get", "mean_squared_error", "mse", "mean_absolute_error", "mae",
           "mean_absolute_percentage_error", "mape", "mean_squared_logarithmic_error", "msle",
           "huber", "log_cosh", "logcosh", "kl_divergence", "kld", "kullback_leibler_divergence",
           "poisson", "sparse_categorical_crossentropy", "categorical_crossentropy",
           "binary_crossentropy", "CosineSimilarity", "Hinge", "SquaredHinge", "CategoricalHinge",
           "BinaryFocalCrossentropy", "cosine_similarity", "hinge", "squared_hinge",
           "categorical_hinge", "binary_focal_crossentropy", "serialize", "deserialize",
           "Dice", "Tversky", "CategoricalFocalCrossentropy", "CategoricalGeneralizedCrossEntropy",
           "Circle", "dice", "tversky", "categorical_focal_crossentropy",
           "categorical_generalized_cross_entropy", "circle", "CTC", "ctc"]

from .loss_base import _EPS, _EPSF, Loss, _fraction, _num

class MeanSquaredError(Loss):
    name = "mean_squared_error"

    def expression(self, y, p):
        return f"mean_squared_error({y}, {p})"

    def per_sample(self, y, p):
        return f"mean(square({p} - {y}), axis=-1)"

    def symbolic_per_sample(self, y, p):
        return ops.mean(ops.square(p - y), axis=-1)


class MeanAbsoluteError(Loss):
    name = "mean_absolute_error"

    def per_sample(self, y, p):
        return f"mean(abs({p} - {y}), axis=-1)"

    def symbolic_per_sample(self, y, p):
        return ops.mean(ops.abs(p - y), axis=-1)


class MeanAbsolutePercentageError(Loss):
    name = "mean_absolute_percentage_error"

    def per_sample(self, y, p):
        return f"100.0 * mean(abs(({y} - {p}) / maximum(abs({y}), {_EPS})), axis=-1)"

    def symbolic_per_sample(self, y, p):
        return 100.0 * ops.mean(ops.abs((y - p) / ops.maximum(ops.abs(y), _EPSF)), axis=-1)


class MeanSquaredLogarithmicError(Loss):
    name = "mean_squared_logarithmic_error"

    def per_sample(self, y, p):
        return (f"mean((log(maximum({p}, {_EPS}) + 1.0) - log(maximum({y}, {_EPS}) + 1.0)) "
                "** 2, axis=-1)")

    def symbolic_per_sample(self, y, p):
        K = ops
        return K.mean(K.square(K.log(K.maximum(p, _EPSF) + 1.0) -
                               K.log(K.maximum(y, _EPSF) + 1.0)), axis=-1)


class Huber(Loss):
    """0.5 e² where |e| <= delta, delta (|e| - 0.5 delta) beyond (e = p - y)."""

    name = "huber"

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name=None, dtype=None):
        Loss.__init__(self, name, reduction, dtype)
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not delta > 0:
            raise ValueError(f"[Huber] delta must be a positive number, got {delta!r}")
        self.delta = float(delta)

    def get_config(self):
        return with_reduction(self, {"name": self.name, "delta": self.delta})

    def per_sample(self, y, p):
        d = _num(self.delta)
        e = f"({p} - {y})"
        return (f"mean(where(abs{e} <= {d}, 0.5 * {e} ** 2, {d} * (abs{e} - 0.5 * {d})), "
                "axis=-1)")

    def symbolic_per_sample(self, y, p):
        e, d = ops.abs(p - y), self.delta  # (actor_critic_cartpole's critic, in compute_loss)
        return ops.mean(ops.where(e <= d, 0.5 * e * e, d * (e - 0.5 * d)), axis=-1)


class LogCosh(Loss):
    name = "log_cosh"

    def per_sample(self, y, p):
        e = f"({p} - {y})"
        return f"mean({e} + softplus(-2.0 * {e}) - 0.6931471805599453, axis=-1)"

    def symbolic_per_sample(self, y, p):
        e = p - y
        return ops.mean(e + ops.softplus(-2.0 * e) - 0.6931471805599453, axis=-1)


class KLDivergence(Loss):
    name = "kl_divergence"

    def per_sample(self, y, p):
        yc, pc = f"clip({y}, {_EPS}, 1.0)", f"clip({p}, {_EPS}, 1.0)"
        return f"sum({yc} * log({yc} / {pc}), axis=-1)"

    def symbolic_per_sample(self, y, p):
        K = ops
        yc, pc = K.clip(y, float(_EPS), 1.0), K.clip(p, float(_EPS), 1.0)
        return K.sum(yc * K.log(yc / pc), axis=-1)


class Poisson(Loss):
    name = "poisson"

    def per_sample(self, y, p):
        return f"mean({p} - {y} * log({p} + {_EPS}), axis=-1)"

    def symbolic_per_sample(self, y, p):
        return ops.mean(p - y * ops.log(p + _EPSF), axis=-1)


class SparseCategoricalCrossentropy(Loss):
    """Integer class labels; ``from_logits`` when the model's last layer has no
    softmax."""

    name = "sparse_categorical_crossentropy"
    sparse_labels = True

    def __init__(self, from_logits=False, ignore_class=None, reduction="sum_over_batch_size",
                 name=None, dtype=None):
        Loss.__init__(self, name, reduction, dtype)
        if ignore_class is not None:
            raise ValueError(f"[SparseCategoricalCrossentropy] ignore_class={ignore_class!r} is "
                             "not supported yet (mask the padding in a Loss subclass's call)")
        self.from_logits = bool(from_logits)

    def get_config(self):
        return with_reduction(self, {"name": self.name, "from_logits": self.from_logits})

    def expression(self, y, p):
        logits = "true" if self.from_logits else "false"
        return f"sparse_categorical_crossentropy({y}, {p}, from_logits={logits})"

    def per_sample(self, y, p):
        return _crossentropy(f"one_hot({y}, shape({p})[-1], dtype=dtype_name({p}))", p,
                             self.from_logits)

    def symbolic_per_sample(self, y, p):
        K = ops
        if len(y.shape) == len(p.shape) and y.shape[-1] == 1:
            y = K.squeeze(y, axis=-1)  # Keras accepts labels of shape (batch, 1)
        t = K.one_hot(K.cast(y, "int32"), p.shape[-1], dtype=p.dtype)
        return _symbolic_crossentropy(t, p, self.from_logits)


class _SmoothedCrossentropy(Loss):
    labels_broadcast = False

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name=None, dtype=None):
        Loss.__init__(self, name, reduction, dtype)
        if axis not in (-1,):
            raise ValueError(f"[{type(self).__name__}] axis={axis!r} is not supported yet (the "
                             "classes are on the last axis, axis=-1)")
        self.from_logits = bool(from_logits)
        self.label_smoothing = _fraction(type(self).__name__, "label_smoothing", label_smoothing)

    def get_config(self):
        return with_reduction(self, {"name": self.name, "from_logits": self.from_logits,
                                      "label_smoothing": self.label_smoothing})

    def _labels(self, y, p):
        raise NotImplementedError

    def expression(self, y, p):
        logits = "true" if self.from_logits else "false"
        return f"{type(self).name}({self._labels(y, p)}, {p}, from_logits={logits})"

    def per_sample(self, y, p):
        return _crossentropy(self._labels(y, p), p, self.from_logits)

    def symbolic_per_sample(self, y, p):
        s = self.label_smoothing
        t = y if not s else y * (1 - s) + s / p.shape[-1]
        return _symbolic_crossentropy(t, p, self.from_logits)


class CategoricalCrossentropy(_SmoothedCrossentropy):
    """One-hot labels, smoothed toward uniform: y (1 - s) + s / classes."""

    name = "categorical_crossentropy"

    def _labels(self, y, p):
        s = self.label_smoothing
        if not s:
            return y
        return f"({y} * {_num(1 - s)} + {_num(s)} / shape({p})[-1])"


class BinaryCrossentropy(_SmoothedCrossentropy):
    """0/1 labels, smoothed toward 0.5: y (1 - s) + s / 2."""

    name = "binary_crossentropy"

    def per_sample(self, y, p):
        t = self._labels(y, p)
        if self.from_logits:
            # max(p, 0) written (p + |p|) / 2: the same values, and at p = 0 (a zero input
            # row through zero biases) the gradient sigmoid(0) - t, as Keras's log-sigmoid
            # form gives (relu's would be -t there)
            return f"mean(0.5 * ({p} + abs({p})) - {p} * {t} + log1p(exp(-abs({p}))), axis=-1)"
        q = f"clip({p}, {_EPS}, {1 - 1e-7!r})"
        return f"-mean({t} * log({q}) + (1.0 - {t}) * log(1.0 - {q}), axis=-1)"

    def symbolic_per_sample(self, y, p):
        K, s = ops, self.label_smoothing
        t = y if not s else y * (1 - s) + 0.5 * s
        if self.from_logits:
            return K.mean(0.5 * (p + K.abs(p)) - p * t + K.log1p(K.exp(-K.abs(p))), axis=-1)
        q = K.clip(p, 1e-7, 1 - 1e-7)
        return -K.mean(t * K.log(q) + (1.0 - t) * K.log(1.0 - q), axis=-1)

    def _labels(self, y, p):
        s = self.label_smoothing
        if not s:
            return y
        return f"({y} * {_num(1 - s)} + {_num(0.5 * s)})"


def _l2_normalized(x: str) -> str:
    """Keras's l2 normalization over the last axis (epsilon 1e-12 on the
    squared norm)."""
    return f"({x} / sqrt(maximum(sum(square({x}), axis=-1, keepdims=true), 1e-12)))"


class CosineSimilarity(Loss):
    """Keras's CosineSimilarity: minus the cosine of y and p over the last
    axis (-1 when they point the same way)."""
    labels_broadcast = False

    name = "cosine_similarity"

    def __init__(self, axis=-1, name=None, reduction="sum_over_batch_size", dtype=None):
        if axis != -1:
            raise ValueError(f"[CosineSimilarity] axis={axis!r} is not supported: the cosine is "
                             "taken over the last axis (axis=-1)")
        super().__init__(name, reduction, dtype)
        self.axis = -1

    def get_config(self):
        return {"name": self.name, "axis": self.axis}

    def per_sample(self, y, p):
        return f"-sum({_l2_normalized(y)} * {_l2_normalized(p)}, axis=-1)"

    def symbolic_per_sample(self, y, p):
        def unit(x):
            return x / ops.sqrt(ops.maximum(ops.sum(ops.square(x), axis=-1, keepdims=True),
                                            1e-12))
        return -ops.sum(unit(y) * unit(p), axis=-1)


def _hinge_labels(y: str) -> str:
    """Keras's labels for hinge losses: 0/1 labels (all of the batch's) become
    -1/1; others are taken as they are."""
    return f"where(all(logical_or({y} == 0.0, {y} == 1.0)), 2.0 * {y} - 1.0, {y})"


class Hinge(Loss):
    """Keras's Hinge: mean(maximum(1 - y p, 0)) over the last axis, labels
    -1/1 (0/1 labels are converted)."""

    name = "hinge"

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        super().__init__(name, reduction, dtype)

    def per_sample(self, y, p):
        return f"mean(maximum(1.0 - {_hinge_labels(y)} * {p}, 0.0), axis=-1)"

    def symbolic_per_sample(self, y, p):
        return ops.mean(self._margin(_symbolic_hinge_labels(y), p), axis=-1)

    @staticmethod
    def _margin(t, p):
        return ops.maximum(1.0 - t * p, 0.0)


class SquaredHinge(Hinge):
    """Keras's SquaredHinge: mean(maximum(1 - y p, 0)^2) over the last axis."""

    name = "squared_hinge"

    def per_sample(self, y, p):
        return f"mean(square(maximum(1.0 - {_hinge_labels(y)} * {p}, 0.0)), axis=-1)"

    def symbolic_per_sample(self, y, p):
        return ops.mean(ops.square(self._margin(_symbolic_hinge_labels(y), p)), axis=-1)


class CategoricalHinge(Loss):
    """Keras's CategoricalHinge: maximum(max((1 - y) p) - sum(y p) + 1, 0)."""

    name = "categorical_hinge"

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        super().__init__(name, reduction, dtype)

    def per_sample(self, y, p):
        return (f"maximum(max((1.0 - {y}) * {p}, axis=-1) - sum({y} * {p}, axis=-1) + 1.0, "
                "0.0)")

    def symbolic_per_sample(self, y, p):
        return ops.maximum(ops.max((1.0 - y) * p, axis=-1) - ops.sum(y * p, axis=-1) + 1.0, 0.0)


class BinaryFocalCrossentropy(Loss):
    """Keras's BinaryFocalCrossentropy (Lin et al.): the binary crossentropy
    of each value times (1 - p_t)^gamma (times alpha / 1 - alpha with
    apply_class_balancing), averaged over the last axis."""
    labels_broadcast = False

    name = "binary_focal_crossentropy"

    def __init__(self, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False,
                 label_smoothing=0.0, axis=-1, name=None, reduction="sum_over_batch_size",
                 dtype=None):
        super().__init__(name, reduction, dtype)
        if axis != -1:
            raise ValueError(f"[BinaryFocalCrossentropy] axis={axis!r} is not supported "
                             "(axis=-1)")
        self.apply_class_balancing = bool(apply_class_balancing)
        self.alpha = _fraction("BinaryFocalCrossentropy", "alpha", alpha)
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or gamma < 0:
            raise ValueError(f"[BinaryFocalCrossentropy] gamma must be a number >= 0, got "
                             f"{gamma!r}")
        self.gamma = float(gamma)
        self.from_logits = bool(from_logits)
        self.label_smoothing = _fraction("BinaryFocalCrossentropy", "label_smoothing",
                                         label_smoothing)
        self.axis = -1

    def get_config(self):
        return {"name": self.name, "apply_class_balancing": self.apply_class_balancing,
                "alpha": self.alpha, "gamma": self.gamma, "from_logits": self.from_logits,
                "label_smoothing": self.label_smoothing, "axis": self.axis}

    def per_sample(self, y, p):
        t = y
        if self.label_smoothing:
            s = self.label_smoothing
            t = f"({y} * {_num(1 - s)} + {_num(0.5 * s)})"
        q = f"sigmoid({p})" if self.from_logits else p
        c = f"clip({q}, {_EPS}, {1 - 1e-7!r})"
        bce = f"(-({t} * log({c}) + (1.0 - {t}) * log(1.0 - {c})))"
        p_t = f"({t} * {q} + (1.0 - {t}) * (1.0 - {q}))"
        focal = f"power(1.0 - {p_t}, {_num(self.gamma)}) * {bce}"
        if self.apply_class_balancing:
            a = self.alpha
            focal = f"({t} * {_num(a)} + (1.0 - {t}) * {_num(1 - a)}) * {focal}"
        return f"mean({focal}, axis=-1)"

    def symbolic_per_sample(self, y, p):
        K = ops
        t = y
        if self.label_smoothing:
            s = self.label_smoothing
            t = y * (1 - s) + 0.5 * s
        q = K.sigmoid(p) if self.from_logits else p
        c = K.clip(q, _EPSF, 1 - 1e-7)
        bce = -(t * K.log(c) + (1.0 - t) * K.log(1.0 - c))
        p_t = t * q + (1.0 - t) * (1.0 - q)
        focal = K.power(1.0 - p_t, self.gamma) * bce
        if self.apply_class_balancing:
            focal = (t * self.alpha + (1.0 - t) * (1 - self.alpha)) * focal
        return K.mean(focal, axis=-1)


def _axis_sum(x: str, axis) -> str:
    """sum over `axis` (None: every axis, a scalar; an int or a tuple of ints)."""
    if axis is None:
        return f"sum({x})"
    if isinstance(axis, (list, tuple)):
        return f"sum({x}, axis=list({', '.join(str(int(a)) for a in axis)}))"
    return f"sum({x}, axis={int(axis)})"


def _check_axis(cls: str, axis):
    ok = axis is None or (isinstance(axis, numbers.Integral) and not isinstance(axis, bool)) or (
        isinstance(axis, (list, tuple)) and axis and all(
            isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in axis))
    if not ok:
        raise ValueError(f"[{cls}] axis must be None, an int or a tuple of ints, got {axis!r}")
    return list(axis) if isinstance(axis, list) else axis


class Dice(Loss):
    """Keras's Dice: 1 - 2 sum(y p) / (sum(y) + sum(p) + 1e-7), the sums over
    ``axis`` (None: the whole batch, one value)."""
    labels_broadcast = False

    name = "dice"

    def __init__(self, reduction="sum_over_batch_size", name="dice", axis=None, dtype=None):
        super().__init__(name, reduction, dtype)
        self.axis = _check_axis(type(self).__name__, axis)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, "dtype": self.dtype,
                "axis": self.axis}

    def per_sample(self, y, p):
        a = self.axis
        return (f"1.0 - 2.0 * {_axis_sum(f'{y} * {p}', a)} / "
                f"({_axis_sum(y, a)} + {_axis_sum(p, a)} + {_EPS})")

    def symbolic_per_sample(self, y, p):
        a = self.axis
        return 1.0 - 2.0 * _symbolic_axis_sum(y * p, a) / (
            _symbolic_axis_sum(y, a) + _symbolic_axis_sum(p, a) + _EPSF)


class Tversky(Loss):
    """Keras's Tversky: 1 - TP / (TP + alpha FP + beta FN + 1e-7) with TP =
    sum(y p), FP = sum((1 - p) y), FN = sum(p (1 - y)) over ``axis`` (as
    Keras writes them; alpha = beta = 0.5 is Dice)."""
    labels_broadcast = False

    name = "tversky"

    def __init__(self, alpha=0.5, beta=0.5, reduction="sum_over_batch_size", name="tversky",
                 axis=None, dtype=None):
        super().__init__(name, reduction, dtype)
        for arg, v in (("alpha", alpha), ("beta", beta)):
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise ValueError(f"[Tversky] {arg} must be a number, got {v!r}")
        self.alpha, self.beta = float(alpha), float(beta)
        self.axis = _check_axis("Tversky", axis)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, "dtype": self.dtype,
                "alpha": self.alpha, "beta": self.beta, "axis": self.axis}

    def per_sample(self, y, p):
        a = self.axis
        tp = _axis_sum(f"{y} * {p}", a)
        fp = _axis_sum(f"(1.0 - {p}) * {y}", a)
        fn = _axis_sum(f"{p} * (1.0 - {y})", a)
        return (f"1.0 - {tp} / ({tp} + {fp} * {_num(self.alpha)} + {fn} * {_num(self.beta)} + "
                f"{_EPS})")

    def symbolic_per_sample(self, y, p):
        a = self.axis
        tp = _symbolic_axis_sum(y * p, a)
        fp = _symbolic_axis_sum((1.0 - p) * y, a)
        fn = _symbolic_axis_sum(p * (1.0 - y), a)
        return 1.0 - tp / (tp + fp * self.alpha + fn * self.beta + _EPSF)


class CategoricalFocalCrossentropy(Loss):
    """Keras's CategoricalFocalCrossentropy (Lin et al.): one-hot labels
    (smoothed toward uniform), the outputs normalized and clipped; per sample
    sum(-alpha (1 - q)^gamma y log q) over the classes. ``alpha`` a number or a
    list (one per class)."""

    name = "categorical_focal_crossentropy"
    labels_broadcast = False  # its smoothing counts the labels' classes

    def __init__(self, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name="categorical_focal_crossentropy",
                 dtype=None):
        super().__init__(name, reduction, dtype)
        cls = "CategoricalFocalCrossentropy"
        if axis != -1:
            raise ValueError(f"[{cls}] axis={axis!r} is not supported (axis=-1)")
        values = list(alpha) if isinstance(alpha, (list, tuple, np.ndarray)) else [alpha]
        if not values or any(isinstance(v, bool) or not isinstance(v, numbers.Real)
                             for v in values):
            raise ValueError(f"[{cls}] alpha must be a number or a list of numbers, got "
                             f"{alpha!r}")
        self.alpha = [float(v) for v in values] if isinstance(
            alpha, (list, tuple, np.ndarray)) else float(alpha)
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or gamma < 0:
            raise ValueError(f"[{cls}] gamma must be a number >= 0, got {gamma!r}")
        self.gamma = float(gamma)
        self.from_logits = bool(from_logits)
        self.label_smoothing = _fraction(cls, "label_smoothing", label_smoothing)
        self.axis = -1

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, "dtype": self.dtype,
                "alpha": self.alpha, "gamma": self.gamma, "from_logits": self.from_logits,
                "label_smoothing": self.label_smoothing, "axis": self.axis}

    def per_sample(self, y, p):
        t = y
        if self.label_smoothing:
            s = self.label_smoothing
            t = f"({y} * {_num(1 - s)} + {_num(s)} / shape({p})[-1])"
        q = f"softmax({p}, axis=-1)" if self.from_logits else p
        out = f"clip({q} / sum({q}, axis=-1, keepdims=true), {_EPS}, {1 - 1e-7!r})"
        alpha = (f"array([{', '.join(_num(a) for a in self.alpha)}], dtype=dtype_name({p}))"
                 if isinstance(self.alpha, list) else _num(self.alpha))
        # written out (no lambda): the training step differentiates it
        return (f"sum(power(1.0 - {out}, {_num(self.gamma)}) * {alpha} * (-{t} * log({out})), "
                "axis=-1)")

    def symbolic_per_sample(self, y, p):
        K = ops
        t = y
        if self.label_smoothing:
            s = self.label_smoothing
            t = y * (1 - s) + s / p.shape[-1]
        q = K.softmax(p, axis=-1) if self.from_logits else p
        out = K.clip(q / K.sum(q, axis=-1, keepdims=True), _EPSF, 1 - 1e-7)
        alpha = (np.asarray(self.alpha, dtype=p.dtype) if isinstance(self.alpha, list)
                 else self.alpha)
        return K.sum(K.power(1.0 - out, self.gamma) * alpha * (-t * K.log(out)), axis=-1)


def _class_indices(y: str, p: str) -> str:
    """Integer labels shaped like the output without its last axis."""
    return f"reshape(astype({y}, \"int64\"), shape({p})[:-1])"


class CategoricalGeneralizedCrossEntropy(Loss):
    """Keras's CategoricalGeneralizedCrossEntropy (Zhang & Sabuncu): integer
    labels, (1 - p_y^q) / q with p_y the output of the label's class."""

    name = "categorical_generalized_cross_entropy"
    sparse_labels = True

    def __init__(self, q=0.5, reduction="sum_over_batch_size",
                 name="categorical_generalized_cross_entropy", dtype=None):
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0 < q < 1:
            raise ValueError(f"[CategoricalGeneralizedCrossEntropy] q must be in the interval "
                             f"(0, 1), got {q!r}")
        super().__init__(name, reduction, dtype)
        self.q = float(q)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, "dtype": self.dtype,
                "q": self.q}

    def per_sample(self, y, p):
        one_hot = f"one_hot({_class_indices(y, p)}, shape({p})[-1], dtype=dtype_name({p}))"
        q = _num(self.q)
        return f"(1.0 - power(sum({p} * {one_hot}, axis=-1), {q})) / {q}"

    def symbolic_per_sample(self, y, p):
        K = ops
        labels = K.reshape(K.cast(y, "int64"), tuple(-1 if d is None else d
                                                     for d in p.shape[:-1]))
        one_hot = K.one_hot(labels, p.shape[-1], dtype=p.dtype)
        return (1.0 - K.power(K.sum(p * one_hot, axis=-1), self.q)) / self.q


class Circle(Loss):
    """Keras's Circle loss (Sun et al.): integer labels (any values) and
    L2-normalized embeddings; each sample's softplus of the logsumexp of its
    weighted positive and negative cosine distances to the batch's others."""

    name = "circle"
    sparse_labels = True
    labels_are_classes = False  # any integers: samples with equal labels are positives

    def __init__(self, gamma=80.0, margin=0.4, remove_diagonal=True,
                 reduction="sum_over_batch_size", name="circle", dtype=None):
        super().__init__(name, reduction, dtype)
        for arg, v in (("gamma", gamma), ("margin", margin)):
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise ValueError(f"[Circle] {arg} must be a number, got {v!r}")
        self.gamma, self.margin = float(gamma), float(margin)
        self.remove_diagonal = bool(remove_diagonal)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, "dtype": self.dtype,
                "gamma": self.gamma, "margin": self.margin,
                "remove_diagonal": self.remove_diagonal}

    def per_sample(self, y, p):
        # written out (no lambda): the training step differentiates it
        g, m = _num(self.gamma), _num(self.margin)
        col = f"reshape(astype({y}, \"int64\"), list(-1, 1))"
        same = f"({col} == transpose({col}))"
        pos = same
        if self.remove_diagonal:
            pos = f"logical_and({same}, eye(size({y}), size({y})) == 0.0)"
        neg = f"logical_not({same})"
        d = f"maximum(1.0 - matmul({p}, transpose({p})), 0.0)"
        dt = f"dtype_name({p})"
        p_loss = (f"logsumexp(where({pos}, -{g} * maximum(({m} + {d}) * astype({pos}, {dt}), "
                  f"0.0) * ({m} - {d}), -inf), axis=1)")
        n_loss = (f"logsumexp(where({neg}, {g} * maximum((1.0 + {m} - {d}) * astype({neg}, {dt}),"
                  f" 0.0) * (1.0 - {m} - {d}), -inf), axis=1)")
        return f"softplus({p_loss} + {n_loss})"

    # Keras masks the samples whose loss is 0 (no positive or no negative pair):
    # the mean is over the others (its apply_mask: weights total / valid).
    @staticmethod
    def _masked(l: str) -> str:
        valid = f"maximum(sum(astype({l} > 0.0, dtype_name({l}))), 1.0)"
        return (f"({l} * where({l} > 0.0, astype(size({l}), dtype_name({l})) / {valid}, "
                "0.0))")

    def expression(self, y, p):
        return f"mean({self._masked(self.per_sample(y, p))})"

    def per_sample_for(self, y, p, ctx, label_spec, out_shape):
        return self._masked(ctx.define("circle", self.per_sample(y, p)))

    def expression_for(self, y, p, ctx, label_spec, out_shape):
        return f"mean({self.per_sample_for(y, p, ctx, label_spec, out_shape)})"

    def symbolic_per_sample(self, y, p):
        return _circle_values(y, p, None, None, self.remove_diagonal, self.gamma, self.margin)

    def _symbolic_values(self, y, p):
        values = self.symbolic_per_sample(y, p)  # Keras's mask, as on arrays below
        hit = ops.cast(values > 0.0, values.dtype)
        valid = ops.maximum(ops.sum(hit), 1.0)
        return values * hit * (ops.cast(ops.size(values), values.dtype) / valid)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if any(is_symbolic(v) and type(v).__name__ != "Variable"
               for v in (y_true, y_pred, sample_weight)):
            return self._symbolic_call(y_true, y_pred, sample_weight)
        values = self.values(y_true, y_pred)
        valid = np.count_nonzero(values > 0)
        scaled = np.where(values > 0, values * (values.size / max(valid, 1)), 0.0)
        return reduce_values(scaled.astype(values.dtype), sample_weight, "Circle")



def _circle_values(y, p, ref_labels, ref_embeddings, remove_diagonal, gamma, margin):
    """Keras's circle: each sample's loss against the reference embeddings
    (the batch's own when None), written with ops: symbolic tensors or arrays."""
    K = ops
    g, m = float(gamma), float(margin)
    refs = p if ref_embeddings is None else ref_embeddings
    col = K.reshape(K.cast(y, "int64"), (-1, 1))
    ref_col = col if ref_labels is None else K.reshape(K.cast(ref_labels, "int64"), (-1, 1))
    same = col == K.transpose(ref_col)
    pos = same
    if remove_diagonal:  # Keras's eye(queries, references): the i-th against the i-th
        index = K.cumsum(K.ones_like(col), axis=0)
        ref_index = index if ref_labels is None else K.cumsum(K.ones_like(ref_col), axis=0)
        pos = K.logical_and(same, index != K.transpose(ref_index))
    neg = K.logical_not(same)
    d = K.maximum(1.0 - K.matmul(p, K.transpose(refs)), 0.0)
    dt = p.dtype
    p_loss = K.logsumexp(K.where(pos, -g * K.maximum((m + d) * K.cast(pos, dt), 0.0) *
                                 (m - d), float("-inf")), axis=1)
    n_loss = K.logsumexp(K.where(neg, g * K.maximum((1.0 + m - d) * K.cast(neg, dt), 0.0) *
                                 (1.0 - m - d), float("-inf")), axis=1)
    return K.softplus(p_loss + n_loss)


def ctc(y_true, y_pred):
    """Keras's CTC loss of each sample: integer label sequences ``y_true``
    (batch, max_length; 0 is the blank and pads them) and logits ``y_pred``
    (batch, time, classes), every output step used (tessera.nn.ops.ctc_loss)."""
    K = ops
    if len(np.shape(y_true)) != 2:
        raise ValueError(f"[ctc] y_true must be (batch_size, max_length) integer labels, got "
                         f"shape {np.shape(y_true)}")
    if len(np.shape(y_pred)) != 3:
        raise ValueError(f"[ctc] y_pred must be logits (batch_size, max_length, num_classes), "
                         f"got shape {np.shape(y_pred)}")
    label_length = K.sum(K.cast(K.not_equal(y_true, 0), "int32"), axis=-1)
    steps = K.ones_like(label_length) * np.shape(y_pred)[1]
    return K.ctc_loss(y_true, y_pred, label_length, steps, mask_index=0)


class CTC(Loss):
    """Keras's CTC: the mean over the batch of ``ctc`` (labels (batch, length),
    padded with 0, the blank; logits (batch, time, classes))."""

    name = "ctc"
    labels_like_output = False  # label sequences, not the output's shape

    def __init__(self, reduction="sum_over_batch_size", name="ctc", dtype=None):
        super().__init__(name, reduction, dtype)

    def call(self, y_true, y_pred):
        return ctc(y_true, y_pred)


_BY_NAME = {
    "ctc": CTC, "dice": Dice, "tversky": Tversky, "circle": Circle,
    "categorical_focal_crossentropy": CategoricalFocalCrossentropy,
    "categorical_generalized_cross_entropy": CategoricalGeneralizedCrossEntropy,
    "cosine_similarity": CosineSimilarity, "hinge": Hinge, "squared_hinge": SquaredHinge,
    "categorical_hinge": CategoricalHinge,
    "binary_focal_crossentropy": BinaryFocalCrossentropy,
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError,
    "mean_absolute_error": MeanAbsoluteError, "mae": MeanAbsoluteError,
    "mean_absolute_percentage_error": MeanAbsolutePercentageError,
    "mape": MeanAbsolutePercentageError,
    "mean_squared_logarithmic_error": MeanSquaredLogarithmicError,
    "msle": MeanSquaredLogarithmicError,
    "huber": Huber, "log_cosh": LogCosh, "logcosh": LogCosh,
    "kl_divergence": KLDivergence, "kld": KLDivergence,
    "kullback_leibler_divergence": KLDivergence, "poisson": Poisson,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy,
    "binary_crossentropy": BinaryCrossentropy,
}




def _symbolic_hinge_labels(y):
    """_hinge_labels on symbolic tensors."""
    return ops.where(ops.all(ops.logical_or(y == 0.0, y == 1.0)), 2.0 * y - 1.0, y)


def _symbolic_axis_sum(x, axis):
    """_axis_sum on symbolic tensors."""
    return ops.sum(x) if axis is None else ops.sum(x, axis=tuple(axis) if isinstance(
        axis, list) else axis)


def _symbolic_crossentropy(t, p, from_logits: bool):
    """_crossentropy on symbolic tensors."""
    K = ops
    if from_logits:
        return -K.sum(t * K.log_softmax(p, axis=-1), axis=-1)
    q = K.clip(p / K.sum(p, axis=-1, keepdims=True), 1e-7, 1 - 1e-7)
    return -K.sum(t * K.log(q), axis=-1)


def _crossentropy(t: str, p: str, from_logits: bool) -> str:
    """Keras's categorical crossentropy of targets t per sample."""
    if from_logits:
        return f"-sum({t} * log_softmax({p}, axis=-1), axis=-1)"
    q = f"clip({p} / sum({p}, axis=-1, keepdims=true), {_EPS}, {1 - 1e-7!r})"
    return f"-sum({t} * log({q}), axis=-1)"


class FunctionLoss(Loss):
    """A loss given as a Python function of (y_true, y_pred), written in
    NumPy style: traced when the model's programs are written, its values
    averaged (Keras: the function gives each sample's loss)."""

    def __init__(self, fn):
        self.fn = fn
        self.name = getattr(fn, "__name__", "loss")

    def values(self, y_true, y_pred):
        """The function's per-sample values on arrays (called as it is)."""
        return np.asarray(self.fn(np.asarray(y_true), np.asarray(y_pred)))

    def _values(self, y, p, ctx, label_spec, out_shape) -> str:
        shape, dtype = label_spec
        return apply_function(self.fn, [y, p], [shape, out_shape], ctx, [dtype, "float32"])

    def expression_for(self, y, p, ctx, label_spec, out_shape):
        return f"mean({self._values(y, p, ctx, label_spec, out_shape)})"

    def per_sample_for(self, y, p, ctx, label_spec, out_shape):
        return self._values(y, p, ctx, label_spec, out_shape)

    def get_config(self):
        return {"name": self.name}


def _function(cls, name, positional=(), takes_axis=False):
    """Keras's loss function `name` of class `cls`: each sample's loss.
    `positional`: the names of Keras's arguments after (y_true, y_pred);
    `takes_axis`: the class takes Keras's `axis` (Dice, Tversky)."""

    def fn(y_true, y_pred, *args, **kwargs):
        if len(args) > len(positional):
            raise TypeError(f"[{name}] takes {2 + len(positional)} positional arguments "
                            f"(y_true, y_pred{''.join(', ' + a for a in positional)}), got "
                            f"{2 + len(args)}")
        kwargs.update(zip(positional, args))
        try:
            loss = cls(**kwargs) if takes_axis else _without_axis(cls, name, kwargs)
            if is_symbolic(y_true) or is_symbolic(y_pred):  # in a traced call or step
                return loss.symbolic_per_sample(y_true, y_pred)
            return loss.values(y_true, y_pred)
        except TypeError as e:
            if "unexpected keyword" not in str(e):
                raise
            raise TypeError(f"[{name}] {e}; its arguments: "
                            f"{list(inspect.signature(cls.__init__).parameters)[1:]}") from None

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"keras.losses.{name}(y_true, y_pred, ...): each sample's loss of "
                  f"{cls.__name__}, on arrays (no reduction).")
    fn._tessera_loss = cls
    return fn


def _without_axis(cls, name, kwargs):
    """cls(**kwargs) for a loss whose classes are on the last axis (axis=-1 only)."""
    if kwargs.get("axis", -1) != -1:
        raise ValueError(f"[{name}] axis={kwargs['axis']!r} is not supported: the classes "
                         "are on the last axis (axis=-1)")
    kwargs.pop("axis", None)
    if kwargs.get("ignore_class") is not None:
        raise ValueError(f"[{name}] ignore_class is not supported")
    kwargs.pop("ignore_class", None)
    return cls(**kwargs)


mean_squared_error = mse = MSE = _function(MeanSquaredError, "mean_squared_error")
mean_absolute_error = mae = MAE = _function(MeanAbsoluteError, "mean_absolute_error")
mean_absolute_percentage_error = mape = MAPE = _function(MeanAbsolutePercentageError,
                                                         "mean_absolute_percentage_error")
mean_squared_logarithmic_error = msle = MSLE = _function(MeanSquaredLogarithmicError,
                                                         "mean_squared_logarithmic_error")
huber = _function(Huber, "huber")
log_cosh = logcosh = _function(LogCosh, "log_cosh")
kl_divergence = kld = KLD = kullback_leibler_divergence = _function(KLDivergence,
                                                                   "kl_divergence")
poisson = _function(Poisson, "poisson")
sparse_categorical_crossentropy = _function(SparseCategoricalCrossentropy,
                                            "sparse_categorical_crossentropy")
categorical_crossentropy = _function(CategoricalCrossentropy, "categorical_crossentropy")
binary_crossentropy = _function(BinaryCrossentropy, "binary_crossentropy")
cosine_similarity = _function(CosineSimilarity, "cosine_similarity")
hinge = _function(Hinge, "hinge")
squared_hinge = _function(SquaredHinge, "squared_hinge")
categorical_hinge = _function(CategoricalHinge, "categorical_hinge")
binary_focal_crossentropy = _function(BinaryFocalCrossentropy, "binary_focal_crossentropy")
dice = _function(Dice, "dice", ("axis",), takes_axis=True)
tversky = _function(Tversky, "tversky", ("alpha", "beta", "axis"), takes_axis=True)
categorical_focal_crossentropy = _function(CategoricalFocalCrossentropy,
                                           "categorical_focal_crossentropy")
categorical_generalized_cross_entropy = _function(CategoricalGeneralizedCrossEntropy,
                                                  "categorical_generalized_cross_entropy", ("q",))
_circle_batch = _function(Circle, "circle")


def circle(y_true, y_pred, ref_labels=None, ref_embeddings=None, remove_diagonal=True,
           gamma=80.0, margin=0.4):
    """keras.losses.circle: each sample's Circle loss; integer labels, L2-normalized
    embeddings, compared with `ref_embeddings` of labels `ref_labels` (the batch's own
    when None), on arrays or symbolic tensors."""
    if ref_labels is None and ref_embeddings is None:
        return _circle_batch(y_true, y_pred, remove_diagonal=remove_diagonal, gamma=gamma,
                             margin=margin)
    if ref_labels is None or ref_embeddings is None:
        got = ["None" if v is None else np.shape(v) for v in (ref_labels, ref_embeddings)]
        raise ValueError(f"[circle] ref_labels and ref_embeddings go together: got "
                         f"ref_labels {got[0]}, ref_embeddings {got[1]}")
    Circle(gamma=gamma, margin=margin)  # (its argument checks)
    if not any(map(is_symbolic, (y_true, y_pred, ref_labels, ref_embeddings))):
        y_pred, ref_embeddings = np.asarray(y_pred), np.asarray(ref_embeddings)
        if y_pred.ndim != 2 or ref_embeddings.ndim != 2 or \
                y_pred.shape[1] != ref_embeddings.shape[1] or \
                np.size(ref_labels) != len(ref_embeddings) or np.size(y_true) != len(y_pred):
            raise ValueError(f"[circle] needs y_pred (n, d) with n labels and ref_embeddings "
                             f"(m, d) with m ref_labels; got y_true {np.shape(y_true)}, y_pred "
                             f"{y_pred.shape}, ref_labels {np.shape(ref_labels)}, "
                             f"ref_embeddings {ref_embeddings.shape}")
        if y_pred.dtype != np.float64:
            y_pred = y_pred.astype(np.float32)
        ref_embeddings = ref_embeddings.astype(y_pred.dtype)
        out = _circle_values(np.asarray(y_true), y_pred, np.asarray(ref_labels),
                             ref_embeddings, remove_diagonal, gamma, margin)
        return np.asarray(out, dtype=y_pred.dtype)
    return _circle_values(y_true, y_pred, ref_labels, ref_embeddings, remove_diagonal, gamma,
                          margin)


circle._tessera_loss = Circle


def get(identifier):
    """Keras's keras.losses.get: a function's name (`"mse"`,
    `"mean_squared_error"`) gives that function (each sample's loss, no
    reduction), a class's name (`"MeanSquaredError"`) or a serialize() dict an
    object of it, a callable itself, None None."""
    if identifier is None or (callable(identifier) and not isinstance(identifier, type)):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        fn = globals().get(identifier)
        if getattr(fn, "_tessera_loss", None) is not None:
            return fn
        cls = {c.__name__: c for c in set(_BY_NAME.values())}.get(identifier)
        if cls is not None:
            return cls()
        cls = _BY_NAME.get(identifier.lower())
        if cls is not None:
            return globals().get(cls.name, None) or cls()
        return loss_object(identifier)  # its error: the close names
    raise TypeError(f"[losses.get] expected a loss's name, a serialize() dict or a callable, "
                    f"got {identifier!r}")


def loss_object(loss) -> Loss:
    """A loss object from a name (Keras's names and aliases), a Loss, or one
    of Keras's loss functions (`keras.losses.mse`: its class, as compile
    takes it)."""
    if isinstance(loss, Loss):
        return loss
    cls = getattr(loss, "_tessera_loss", None)
    if cls is not None:
        return cls()
    if isinstance(loss, str):
        cls = _BY_NAME.get(loss.lower())
        if cls is None:
            close = difflib.get_close_matches(loss.lower(), list(_BY_NAME), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"[compile] unknown loss {loss!r}{hint} Known: {sorted(_BY_NAME)}")
        return cls()
    if callable(loss):
        return FunctionLoss(loss)
    raise TypeError(f"[compile] loss must be a name or a tessera.nn.losses object, got {loss!r}")


def serialize(loss) -> dict:
    """The loss's config with its class (keras.losses.serialize)."""
    loss = loss_object(loss)
    return {"class_name": type(loss).__name__, "config": loss.get_config()}


def deserialize(config, custom_objects=None):
    """The loss a serialize() config (or a name) describes."""
    if isinstance(config, str):
        return loss_object(config)
    if not isinstance(config, dict):
        raise TypeError(f"[losses.deserialize] expected a name or a serialize() dict, got "
                        f"{config!r}")
    name = config.get("class_name") or config.get("class")
    cls = get_registered_object(name, custom_objects)
    if cls is None:
        cls = {c.__name__: c for c in set(_BY_NAME.values())}.get(name)
    if cls is None or not (isinstance(cls, type) and issubclass(cls, Loss)):
        raise ValueError(f"[losses.deserialize] unknown loss class {name!r}: not one of "
                         "tessera's losses nor registered (pass custom_objects={"
                         f"{name!r}: ...}})")
    return cls.from_config(config.get("config", {}))
