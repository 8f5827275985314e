"""The training state a checkpoint holds, laid end to end: which tensors
(weights, then the optimizer's), their layout (name, dtype, shape, offset,
bytes), a locality's share of the bytes, and the tensors read back from
them. Part of tessera.nn.checkpoints (docs/resilience.md)."""

from __future__ import annotations

import numpy as np

from .weights_file import DTYPES


def split_weight(model, var: str):
    """(layer, parameter name) when the weight `var` is split over a tensor
    group of several members (tessera.nn.parallel), else None."""
    owner = getattr(model, "_owner", {}).get(var)
    if owner is None:
        return None
    layer, p = owner
    if getattr(layer, "tensor_size", 1) > 1 and p.name in getattr(layer, "_split_axis", {}):
        return layer, p.name
    return None


def _state_tensors(model, gather: bool = False) -> list:
    """(name, array) of the training state, in an order every locality
    agrees on. A weight split over a tensor group, and its optimizer state,
    is listed whole, as the one-locality model holds it (the checkpoint then
    resumes under any tensor size): gathered when `gather` (a collective on
    the layer's group: every member calls it), else a read-only stand-in of
    the whole shape (what the layout needs)."""
    def whole(var, value):
        split = split_weight(model, var)
        if split is None:
            return value
        layer, pname = split
        if gather:
            return layer._gathered(pname, value)
        value = np.asarray(value)
        return np.broadcast_to(np.zeros((), value.dtype), layer._full_shapes[pname])

    out = [(v, whole(v, a)) for v, a in model.weights.items()]
    opt = model._opt_state or {}
    param_of = {s.name: s.param for s in getattr(model, "_opt_statevars", None) or []
                if not s.scalar}
    return out + [(f"optimizer/{k}", whole(param_of[k], opt[k]) if k in param_of else opt[k])
                  for k in sorted(opt)]


def _layout(tensors, where):
    entries, offset = [], 0
    for name, a in tensors:
        a = np.asarray(a)
        dt = str(a.dtype)
        if dt not in DTYPES:
            raise TypeError(f"[{where}] {name}: dtype {dt} cannot be checkpointed")
        nbytes = a.size * a.dtype.itemsize
        entries.append({"name": name, "dtype": dt, "shape": list(a.shape), "offset": offset,
                        "nbytes": nbytes})
        offset += nbytes
    return entries, offset


def _snapshot(tensors, entries, lo: int, hi: int) -> bytearray:
    """A copy of bytes [lo, hi) of the state laid end to end: only this
    locality's share is copied."""
    buf = bytearray(hi - lo)
    view = memoryview(buf)
    for (_, a), e in zip(tensors, entries):
        start, stop = max(lo, e["offset"]), min(hi, e["offset"] + e["nbytes"])
        if start >= stop:
            continue
        raw = np.ascontiguousarray(a).astype(DTYPES[e["dtype"]], copy=False).reshape(-1)
        raw = raw.view(np.uint8)
        view[start - lo:stop - lo] = raw[start - e["offset"]:stop - e["offset"]]
    return buf


# ------------------------------------------------------------- the file system

def _tensors_from(manifest, data: bytes, file) -> dict:
    out = {}
    for e in manifest["tensors"]:
        try:
            dt, shape, off = e["dtype"], [int(d) for d in e["shape"]], int(e["offset"])
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            a = np.frombuffer(data, dtype=DTYPES[dt], count=count, offset=off)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{file}: the tensor entry {str(e)[:80]} is malformed ({err})") \
                from None
        out[e["name"]] = a.reshape(shape).astype(dt)
    return out
