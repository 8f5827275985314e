"""The order a functional model's saved architecture lists its tensors in
(saving.py's "nodes", json_config.py's inbound_nodes): the inputs, then
every tensor after the ones it reads, depth first from the outputs."""

from __future__ import annotations

from .functional import _deps

__all__ = ["tensor_order"]


def tensor_order(model) -> tuple:
    """(tensors in order, {tensor id: its index}) of a functional model."""
    order, ids = [], {}
    stack = [(t, False) for t in reversed(model._outputs)]
    for t in model._inputs:
        ids[t.id] = len(order)
        order.append(t)
    while stack:
        t, ready = stack.pop()
        if t.id in ids:
            continue
        if not ready:
            stack.append((t, True))
            for d in reversed(_deps(t)):
                if d.id not in ids:
                    stack.append((d, False))
            continue
        ids[t.id] = len(order)
        order.append(t)
    return order, ids
