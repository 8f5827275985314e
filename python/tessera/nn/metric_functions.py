"""Keras's metric functions (``keras.metrics.binary_accuracy(y_true, y_pred)``
& co), re-exported by tessera.nn.metrics: each sample's (or value's) metric on
arrays, run now, float32 as Keras's floatx. The loss functions Keras also lists
as metrics are tessera.nn.losses's own."""

import numbers

import numpy as np

from .losses import (binary_crossentropy, binary_focal_crossentropy,  # noqa: F401
                     categorical_crossentropy, categorical_focal_crossentropy,
                     categorical_hinge, hinge, huber, kl_divergence, log_cosh,
                     mean_absolute_error, mean_absolute_percentage_error, mean_squared_error,
                     mean_squared_logarithmic_error, poisson, sparse_categorical_crossentropy,
                     squared_hinge)

__all__ = ["binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
           "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy",
           "pearson_correlation", "concordance_correlation", "binary_crossentropy",
           "binary_focal_crossentropy", "categorical_crossentropy",
           "categorical_focal_crossentropy", "categorical_hinge", "hinge", "huber",
           "kl_divergence", "log_cosh", "mean_absolute_error", "mean_absolute_percentage_error",
           "mean_squared_error", "mean_squared_logarithmic_error", "poisson",
           "sparse_categorical_crossentropy", "squared_hinge"]

_EPS = 1e-7


def _arrays(name, y_true, y_pred, same_rank=True):
    p = np.asarray(y_pred)
    if p.dtype.kind not in "fc":
        p = p.astype(np.float32)
    y = np.asarray(y_true)
    if p.ndim == 0:
        raise ValueError(f"[{name}] y_pred must have at least one axis, got a scalar")
    if same_rank:  # Keras's squeeze_or_expand_to_same_rank (a rank-1 side is expanded)
        if y.ndim == p.ndim + 1 and y.shape[-1] == 1:
            y, p = (y, p[..., None]) if p.ndim == 1 else (y[..., 0], p)
        elif p.ndim == y.ndim + 1 and p.shape[-1] == 1:
            y, p = (y[..., None], p) if y.ndim == 1 else (y, p[..., 0])
    return y, p


def _k(name, k):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"[{name}] k must be an int >= 1, got {k!r}")
    return int(k)


def _broadcast(name, y, p):
    try:
        return np.broadcast_arrays(y, p)
    except ValueError:
        raise ValueError(f"[{name}] y_true of shape {y.shape} and y_pred of shape {p.shape} "
                         "do not broadcast") from None


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """1.0 where (y_pred > threshold) equals y_true, else 0.0 (each value)."""
    y, p = _arrays("binary_accuracy", y_true, y_pred)
    y, p = _broadcast("binary_accuracy", y, p)
    return (y == (p > threshold).astype(y.dtype)).astype(np.float32)


def categorical_accuracy(y_true, y_pred):
    """1.0 where argmax(y_true) equals argmax(y_pred) (each sample)."""
    y, p = np.asarray(y_true), np.asarray(y_pred)
    return (np.argmax(y, axis=-1) == np.argmax(p, axis=-1)).astype(np.float32)


def _class_labels(name, y, p):
    if y.ndim == p.ndim and y.shape[-1] == 1:
        y = y[..., 0]
    if y.shape != p.shape[:-1]:
        raise ValueError(f"[{name}] y_true has shape {y.shape}; for y_pred of shape {p.shape} "
                         f"it must be {p.shape[:-1]} (class indices)")
    return y


def sparse_categorical_accuracy(y_true, y_pred):
    """1.0 where the integer label equals argmax(y_pred) (each sample)."""
    y, p = np.asarray(y_true), np.asarray(y_pred)
    y = _class_labels("sparse_categorical_accuracy", y, p)
    return (y == np.argmax(p, axis=-1)).astype(np.float32)


def _in_top_k(p, target, k):
    """The target class is in the top k: fewer than k classes score strictly higher."""
    score = np.take_along_axis(p, target[..., None].astype(np.int64), axis=-1)
    return (np.sum(p > score, axis=-1) < k).astype(np.float32)


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1.0 where argmax(y_true) is among y_pred's top k classes (each sample)."""
    k = _k("top_k_categorical_accuracy", k)
    p = np.asarray(y_pred)
    return _in_top_k(p, np.argmax(np.asarray(y_true), axis=-1), k)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5, from_sorted_ids=False):
    """1.0 where the integer label is among y_pred's top k classes (each sample);
    with from_sorted_ids, y_pred holds class ids sorted by score (its first k)."""
    name = "sparse_top_k_categorical_accuracy"
    k = _k(name, k)
    y, p = np.asarray(y_true), np.asarray(y_pred)
    if from_sorted_ids:
        if y.ndim == p.ndim:
            y = y[..., 0]
        return np.any(p[..., :k] == y[..., None], axis=-1).astype(np.float32)
    return _in_top_k(p, _class_labels(name, y, p), k)


def _correlation_arrays(name, y_true, y_pred, axis):
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ValueError(f"[{name}] axis must be an int, got {axis!r}")
    y, p = _arrays(name, y_true, y_pred)
    return _broadcast(name, y.astype(p.dtype), p)


def pearson_correlation(y_true, y_pred, axis=-1):
    """Keras's Pearson correlation of y_true and y_pred along `axis`."""
    y, p = _correlation_arrays("pearson_correlation", y_true, y_pred, axis)
    yn = y - y.mean(axis=axis, keepdims=True)
    pn = p - p.mean(axis=axis, keepdims=True)
    yn = yn / yn.std(axis=axis, keepdims=True)
    pn = pn / pn.std(axis=axis, keepdims=True)
    return np.mean(yn * pn, axis=axis)


def concordance_correlation(y_true, y_pred, axis=-1):
    """Keras's concordance correlation of y_true and y_pred along `axis` (its
    covariance term as Keras writes it: (y - mean(p)) (p - mean(p)))."""
    y, p = _correlation_arrays("concordance_correlation", y_true, y_pred, axis)
    ym, pm = y.mean(axis=axis, keepdims=True), p.mean(axis=axis, keepdims=True)
    yv, pv = (y - ym).var(axis=axis, keepdims=True), (p - pm).var(axis=axis, keepdims=True)
    covar = (y - pm) * (p - pm)
    norm = yv + pv + np.square(ym - pm)
    return np.mean(2 * covar / (norm + np.asarray(_EPS, p.dtype)), axis=axis)
