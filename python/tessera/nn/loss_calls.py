"""How compile's loss calls a loss object, where Keras's CompileLoss and
LossFunctionWrapper differ from calling `call`: a user's Loss subclass that
overrides `__call__` (a loss over the whole batch: keras-io's supervised
contrastive loss), and labels one axis short of an output ending in 1 (Keras's
squeeze_or_expand_to_same_rank, in the step itself for datasets' batches)."""
from __future__ import annotations

__all__ = ["own_dunder_call", "batch_loss_fn", "refuse_weighted_batch_loss", "ranked_labels"]


def own_dunder_call(loss, base) -> bool:
    """`loss` is a user's subclass of `base` (tessera's Loss) overriding __call__."""
    return type(loss).__call__ is not base.__call__ and \
        type(loss).__module__.split(".")[0] != "tessera"


def batch_loss_fn(loss, base):
    """fn(y_true, y_pred) calling the subclass's own __call__ (its value is the
    batch's loss, as Keras's CompileLoss takes it), or None for a loss without one."""
    if not own_dunder_call(loss, base):
        return None

    def fn(y_true, y_pred):
        return type(loss).__call__(loss, y_true, y_pred)

    return fn


def refuse_weighted_batch_loss(loss, base):
    """A __call__ override gives the batch's loss only: weighting needs each sample's."""
    if own_dunder_call(loss, base):
        raise NotImplementedError(
            f"[{type(loss).__name__}] the loss overrides __call__, which returns the batch's "
            "loss: with sample weights (or class_weight) tessera needs each sample's loss; "
            "define call(y_true, y_pred) instead, or fit without weights")


def ranked_labels(loss, y: str, spec, out_shape, ctx):
    """(labels expression, their spec): labels one axis short of an output ending in 1
    (a PyDataset's (n,) labels of tabtransformer's (n, 1) sigmoid; arrays are brought to
    rank by fit before) get that axis, as Keras's built-in losses; the per-sample path
    broadcast them to (n, n). A user's Loss subclass gets them as given, as Keras's."""
    if spec is None or not out_shape or out_shape[-1] != 1 or \
            tuple(spec[0]) != tuple(out_shape[:-1]) or loss.sparse_labels or loss._is_custom():
        return y, spec
    return ctx.define("y_ranked", f"expand_dims({y}, -1)"), (tuple(out_shape), spec[1])
