"""Keras 3's loss reductions: the `reduction=` argument of a loss object and what it
does to the weighted values on arrays (losses.py's loss objects use them)."""

import numpy as np

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
    """Keras's reductions of the weighted values: "sum_over_batch_size" (and "mean"):
    sum(values * weights) / values.size; "sum"; "mean_with_sample_weight": divided by
    the weights' sum; None / "none": the weighted values themselves."""
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=values.dtype)
        if w.ndim > values.ndim and w.shape[values.ndim:] == (1,) * (w.ndim - values.ndim):
            w = w.reshape(w.shape[:values.ndim])  # (batch, 1) weights of (batch,) losses
        w = w.reshape(w.shape + (1,) * (values.ndim - w.ndim))
        try:
            values = values * np.broadcast_to(w, values.shape)
        except ValueError:
            raise ValueError(f"[{where}] sample_weight of shape {np.shape(sample_weight)} does "
                             f"not match the losses of shape {values.shape}") from None
    if reduction in (None, "none") or values.ndim == 0:
        return values
    if values.size == 0:
        return values.dtype.type(0)
    total = values.sum(dtype=np.float64)
    if reduction == "sum":
        return values.dtype.type(total)
    if reduction == "mean_with_sample_weight" and sample_weight is not None:
        wsum = float(np.sum(np.broadcast_to(w, values.shape), dtype=np.float64))
        return values.dtype.type(total / wsum if wsum else 0.0)
    return values.dtype.type(total / values.size)


def with_reduction(loss, config: dict) -> dict:
    """A built-in's config, with its reduction when not Keras's default."""
    if getattr(loss, "reduction", "sum_over_batch_size") != "sum_over_batch_size":
        config["reduction"] = loss.reduction
    return config
