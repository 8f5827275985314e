"""The masks a functional or Sequential model called as a layer carries out
of it (Keras's nested Functional.compute_mask), when its layers make them:
its node returns them after its outputs."""

from __future__ import annotations

from .registry import is_model
from .symbolic import KerasTensor

__all__ = ["graph_model", "mask_items", "output_or_mask", "carried_mask_exprs",
           "carried_mask_specs"]


def graph_model(layer) -> bool:
    """A functional or Sequential model (whose call records its graph)."""
    return bool(getattr(layer, "_functional", False)) or is_model(layer, "Sequential")


def mask_items(node, outs) -> list:
    """Per output of a model's call `node` (traced as `outs`), the mask it
    carries out, or None: item len(outs) + j of the node for the j-th output
    with a mask (an Embedding(mask_zero=True) inside the model).
    functional.custom_forward writes them after the outputs (node.mask_outputs
    lists the outputs that have one)."""
    inner = [getattr(o, "_keras_mask", None) for o in outs]
    node.mask_outputs = [k for k, m in enumerate(inner) if m is not None]
    n, j, masks = len(outs), 0, []
    for m in inner:
        if m is None:
            masks.append(None)
            continue
        masks.append(KerasTensor(m.shape, m.dtype, "item", (node, n + j), where=node.where))
        j += 1
    return masks


def output_or_mask(outs: list, k):
    """Item k of a layer call's results `outs` (the call recorded again, by
    clone_graph or load_model): output k, or past the outputs the mask of
    the (k - len(outs))-th output that carries one (mask_items)."""
    masks = [m for m in (getattr(o, "_keras_mask", None) for o in outs) if m is not None]
    n = len(outs)
    if isinstance(k, int) and not isinstance(k, bool) and n <= k < n + len(masks):
        return masks[k - n]
    return outs[k]


def carried_mask_exprs(tensors, writer) -> list:
    """Per tensor, (the expression `writer` gives its mask, the mask's shape,
    its dtype), or None: what a user's layer call sees (Context.input_masks)."""
    return [None if s is None else (writer.expr(t._keras_mask),) + s
            for t, s in zip(tensors, carried_mask_specs(tensors))]


def carried_mask_specs(tensors) -> list:
    """Per tensor, the (shape, dtype) of the symbolic mask it carries, or None."""
    out = []
    for t in tensors:
        m = getattr(t, "_keras_mask", None)
        out.append((m.shape, m.dtype) if isinstance(m, KerasTensor) else None)
    return out
