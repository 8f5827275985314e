"""Which relus a BatchNormalization before them applies in its own pass (the
forward program's batch_norm_relu and batch_norm_add_relu), read off a model's
graph."""

from __future__ import annotations

from .layers import Activation, Add, BatchNormalization
from .symbolic import GraphWriter

__all__ = ["relus_after_batch_norm"]


def relus_after_batch_norm(outputs) -> tuple:
    """The relus that a BatchNormalization before them applies in its own
    pass: ({batch norm tensor id: relu tensor id} for each BatchNormalization
    whose output only an Activation("relu") reads (batch_norm_relu), and
    {batch norm tensor id: (other input, Add tensor id, relu tensor id)} for
    each whose output only an Add of two inputs of one shape reads, that Add
    read only by an Activation("relu") (batch_norm_add_relu: the end of a
    residual block). Model outputs are never fused away; the layers between
    pass their input on."""
    readers: dict = {}
    seen, stack = set(), list(outputs)
    while stack:
        t = stack.pop()
        if t.id in seen:
            continue
        seen.add(t.id)
        for a in GraphWriter._inputs(t):
            readers.setdefault(a.id, []).append(t)
            stack.append(a)
    out_ids = {o.id for o in outputs}

    def layer_of(t, cls):
        if t.op != "layer" or not isinstance(t.args[0], cls):
            return None
        layer = t.args[0]
        # a subclass with a forward of its own would not honour the fusion
        return layer if type(layer).forward is cls.forward else None

    def only_reader(t_id):
        rs = readers.get(t_id, [])
        return rs[0] if len(rs) == 1 and t_id not in out_ids else None

    def relu_after(t_id):
        r = only_reader(t_id)
        if r is None:
            return None
        act = layer_of(r, Activation)
        if act is None or act.activation != "relu" or len(r.args[1]) != 1:
            return None
        return r if r.args[1][0].id == t_id else None

    fused, added = {}, {}
    for t_id in list(readers):
        r = relu_after(t_id)
        if r is None:
            continue
        src = r.args[1][0]
        if layer_of(src, BatchNormalization) is not None:
            fused[t_id] = r.id
            continue
        if layer_of(src, Add) is None or len(src.args[1]) != 2:
            continue
        a, b = src.args[1]
        if a.id == b.id or tuple(a.shape) != tuple(b.shape) or \
                tuple(a.shape) != tuple(src.shape):
            continue
        # the main branch's batch norm (the later input) when both are (a projection shortcut)
        for bn, other in ((b, a), (a, b)):
            if layer_of(bn, BatchNormalization) is not None and \
                    only_reader(bn.id) is src:
                added[bn.id] = (other, src.id, r.id)
                break
    return fused, added
