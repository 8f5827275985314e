"""Sample weights as Keras 3 takes them: the shapes its losses multiply by (squeeze_or_expand
then broadcasting), the checks fit/evaluate/train_on_batch make on the arrays given, and
class_weight turned into weights per sample. A shape Keras refuses is refused here, naming
the call, the shapes and the user's line."""

from __future__ import annotations

import numpy as np

from .symbolic import user_location

__all__ = ["squeeze_or_expand_shapes", "same_rank", "weights_fit_loss", "per_entry_shape",
           "check_fit_weights", "class_weights_of", "per_output_given", "weight_streams",
           "weight_names", "weights_of_output", "weight_flags", "weight_arrays", "UNREAD"]

# The placeholder of an output given no weights (None) when the others are given per output:
# rows of no entries, a stream the programs carry and do not read (weight_names).
UNREAD = (0,)


def squeeze_or_expand_shapes(values: tuple, weights: tuple):
    """Keras's squeeze_or_expand_to_same_rank on shapes: when the ranks differ by one and
    the longer has a last axis of 1, it is squeezed (or the shorter, of rank 1, expanded)."""
    v, w = tuple(values), tuple(weights)
    if len(v) == len(w) + 1 and v and v[-1] == 1:
        v, w = (v, w + (1,)) if len(w) == 1 else (v[:-1], w)
    if len(w) == len(v) + 1 and w and w[-1] == 1:
        v, w = (v + (1,), w) if len(v) == 1 else (v, w[:-1])
    return v, w


def same_rank(values, weights, squeeze, expand_dims):
    """Keras's squeeze_or_expand_to_same_rank on arrays or symbolic tensors (with their
    library's squeeze(x, axis) and expand_dims(x, axis))."""
    v_shape, w_shape = squeeze_or_expand_shapes(values.shape, weights.shape)
    if len(v_shape) != len(values.shape):
        values = squeeze(values, axis=-1) if len(v_shape) < len(values.shape) else \
            expand_dims(values, -1)
    if len(w_shape) != len(weights.shape):
        weights = squeeze(weights, axis=-1) if len(w_shape) < len(weights.shape) else \
            expand_dims(weights, -1)
    return values, weights


def weights_fit_loss(per: tuple, weights: tuple) -> bool:
    """Do weights of this shape multiply a loss of per-entry shape `per` as Keras's
    reduce_weighted_values does (the same rank after squeeze_or_expand, each axis the
    loss's or 1)? Other shapes make Keras raise, or broadcast by coincidence (a batch
    as long as the steps) into an outer product: refused."""
    if per == ():  # a loss of one value for the whole batch (Dice's): any weights
        return True
    v, w = squeeze_or_expand_shapes(per, weights)
    return len(v) == len(w) and all(b in (1, a) for a, b in zip(v, w))


def _loss_name(loss) -> str:
    return type(loss).__name__ if not hasattr(loss, "fn") else getattr(loss, "name", "loss")


def per_entry_shape(loss, y: np.ndarray, out_shape: tuple, n: int) -> tuple:
    """The shape of a loss's values before reduction, (n,) + ...: a built-in loss run on
    one row (the last axis reduced, or all of them: () for Dice's one value of the batch);
    the output's shape but its last axis when that cannot be run."""
    guess = (n,) + tuple(out_shape[:-1])
    if loss is None or None in tuple(out_shape) or len(y) == 0:
        return guess
    if type(loss).__name__ == "FunctionLoss" or getattr(loss, "_is_custom", lambda: True)():
        return guess
    p = np.full((1,) + tuple(out_shape), 0.5, dtype=np.float32)
    try:
        with np.errstate(all="ignore"):
            got = np.shape(loss.values(np.asarray(y[:1]), p))
    except Exception:  # (a loss that needs more than one row: its usual shape)
        return guess
    return (n,) + tuple(got[1:]) if len(got) >= 1 else ()  # (): one value for the batch


def check_fit_weights(sw: np.ndarray, n: int, outputs: list, where: str,
                      what: str = "sample_weight") -> np.ndarray:
    """sample_weight `sw` (as given) checked as Keras's fit/evaluate take it, then in the
    form the programs read: (n,) for one weight per sample, else the loss's rank.
    outputs: (k, loss, per-entry shape) of each output with a loss; what: the weights'
    name in messages."""
    if sw.ndim == 0 or sw.shape[0] != n:
        raise ValueError(f"[{where}] {what} must have one weight per sample, shape "
                         f"({n},) (or one per entry of the loss), got {sw.shape} "
                         f"(at {user_location()})")
    if len(outputs) > 1 and not (sw.ndim == 1 or sw.shape == (n, 1)):
        raise ValueError(f"[{where}] a model of {len(outputs)} outputs with losses takes one "
                         f"{what} array of one weight per sample, shape ({n},) or "
                         f"({n}, 1), as Keras (it gives it to every output), got "
                         f"{sw.shape} (at {user_location()})")
    bad = [(k, loss, per) for k, loss, per in outputs if not weights_fit_loss(per, sw.shape)]
    if bad:
        k, loss, per = bad[0]
        one = (n,) + (1,) * (len(per) - 1)
        hint = f"give one weight per sample, shape {one}"
        if len(per) > 1:
            hint += (f" (Keras multiplies the losses of shape {per} by the weights with "
                     f"NumPy's broadcasting, which aligns ({n},) with the last axis), or one "
                     f"per entry of the loss (temporal weights), shape {per}")
        raise ValueError(f"[{where}] {what} of shape {sw.shape} does not broadcast to the "
                         f"losses: output {k}'s {_loss_name(loss)} has values of shape {per}; "
                         f"{hint} (at {user_location()})")
    if len(outputs) != 1:  # (several: (n,) or (n, 1); none: as given)
        return sw.reshape(n) if sw.shape[1:] == (1,) else sw
    per = outputs[0][2]
    _, w = squeeze_or_expand_shapes(per, sw.shape) if per else ((), sw.shape)
    if all(d == 1 for d in w[1:]):
        return sw.reshape(n)
    return sw.reshape(w)


def class_weights_of(y: np.ndarray, class_weight: dict, where: str) -> np.ndarray:
    """Keras's class_weight_to_sample_weights: each sample's class (the label; the
    argmax of a last axis longer than 1) looked up in the dict, 1.0 for a class it does
    not name. Labels of more than one class per sample (a sequence's) are a TypeError,
    as in Keras."""
    if not isinstance(class_weight, dict):
        raise TypeError(f"[{where}] class_weight must be a dict {{class: weight}}, got "
                        f"{type(class_weight).__name__} (at {user_location()})")
    cls = np.asarray(y)
    if cls.ndim > 1:
        cls = np.argmax(cls, axis=-1) if cls.shape[-1] != 1 else cls.reshape(cls.shape[:-1])
    if cls.ndim > 1:
        raise TypeError(f"[{where}] class_weight needs one class per sample, got labels of "
                        f"shape {np.shape(y)} (classes of shape {cls.shape} after the argmax "
                        f"of the last axis); weight a sequence's steps with sample_weight "
                        f"(at {user_location()})")
    cls = np.round(cls).astype(np.int64)
    table = {int(k): float(v) for k, v in class_weight.items()}
    return np.array([table.get(int(c), 1.0) for c in cls], dtype=np.float64)


def per_output_given(sample_weight) -> bool:
    """Is `sample_weight` given per output, as Keras's flattened structure of y: a dict, or
    a list/tuple whose entries are None or arrays (a list of numbers is one array)?"""
    if isinstance(sample_weight, dict):
        return True
    return isinstance(sample_weight, (list, tuple)) and len(sample_weight) > 0 and \
        all(v is None or np.ndim(v) >= 1 for v in sample_weight)


def weight_flags(sw):
    """The programs' kind of weights of what _prepare_sw returns: False (none), True (one
    array for every output) or a tuple of flags per output (does output k read its own)."""
    if sw is None:
        return False
    if isinstance(sw, list):
        return tuple(tuple(a.shape[1:]) != UNREAD for a in sw)
    return True


def weight_arrays(sw) -> list:
    """The weights' data streams' arrays (one, one per output, or none)."""
    return [] if sw is None else list(sw) if isinstance(sw, list) else [sw]


def weight_streams(weighted) -> list:
    """The names of the programs' weight streams: none, "sw" (one array for every output)
    or one per output ("swo0", "swo1", ...; an unweighted output's is carried unread)."""
    if weighted is False or weighted is None:
        return []
    return ["sw"] if weighted is True else [f"swo{k}" for k in range(len(weighted))]


def weight_names(weighted, suffix: str = ""):
    """The weights the losses and weighted metrics read: None, "sw" (every output's), or a
    list of each output's (None: that output unweighted, as Keras's None in the list);
    `suffix` ends each name (a chunk's or micro-batch's streams: "_3")."""
    if weighted is False or weighted is None:
        return None
    return "sw" + suffix if weighted is True else \
        [f"swo{k}{suffix}" if f else None for k, f in enumerate(weighted)]


def weights_of_output(sw, k: int):
    """Output k's weights' name from weight_names' value."""
    return sw[k] if isinstance(sw, list) else sw
