"""Keras 3's loss reductions: the `reduction=` argument of a loss object and what it
does to the weighted values on arrays (losses.py's loss objects use them)."""

import numpy as np

from .sample_weights import squeeze_or_expand_shapes
from .symbolic import user_location

__all__ = ["REDUCTIONS", "reduce_values", "reduction_of", "with_reduction"]

REDUCTIONS = ("sum_over_batch_size", "mean", "sum", "mean_with_sample_weight", "none", None)


def reduction_of(where, reduction):
    """Keras 3's reduction argument of a loss ("auto": its default; None: "none")."""
    if reduction == "auto":
        return "sum_over_batch_size"
    if reduction not in REDUCTIONS:
        raise ValueError(f"[{where}] reduction={reduction!r} is not one of Keras's "
                         f"{list(REDUCTIONS)}")
    return reduction


def reduce_values(values, sample_weight, where, reduction="sum_over_batch_size"):
    """Keras's reduce_weighted_values on arrays: the weights and the values brought to
    the same rank as its squeeze_or_expand_to_same_rank does, multiplied with NumPy's
    broadcasting (Keras's), then reduced: "sum_over_batch_size" (and "mean"): the
    sum over the number of weighted values; "sum"; "mean_with_sample_weight": over the
    weights' sum (as given, not broadcast); None / "none": the weighted values."""
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=values.dtype)
        v_shape, w_shape = squeeze_or_expand_shapes(values.shape, w.shape)
        try:
            values = values.reshape(v_shape) * w.reshape(w_shape)
        except ValueError:
            raise ValueError(f"[{where}] sample_weight of shape {np.shape(sample_weight)} does "
                             f"not broadcast to the losses of shape {np.shape(values)} (Keras "
                             "multiplies them with NumPy's broadcasting after squeezing a last "
                             f"axis of 1) (at {user_location()})") from None
        w = w.reshape(w_shape)
    if reduction in (None, "none") or values.ndim == 0:
        return values
    if values.size == 0:
        return values.dtype.type(0)
    total = values.sum(dtype=np.float64)
    if reduction == "sum":
        return values.dtype.type(total)
    if reduction == "mean_with_sample_weight" and w is not None:
        wsum = float(np.sum(w, dtype=np.float64))
        return values.dtype.type(total / wsum if wsum else 0.0)
    return values.dtype.type(total / values.size)


def with_reduction(loss, config: dict) -> dict:
    """A built-in's config, with its reduction when not Keras's default."""
    if getattr(loss, "reduction", "sum_over_batch_size") != "sum_over_batch_size":
        config["reduction"] = loss.reduction
    return config
