"""A functional model's nested outputs in its saved architecture: the nesting
of the outputs' indices (`Model(x, [(a, b), (c, d)])`: `[[0, 1], [2, 3]]`),
written by saving.py and checked when read back (the file is untrusted); and the
structure of a user layer's call (its list or dict arguments), for the same reason."""

from __future__ import annotations

from . import tree as _tree
from .symbolic import KerasTensor


def entry(model) -> dict:
    """The architecture's entry for the model's nested outputs ({} when flat)."""
    if getattr(model, "_output_tree", None) is None:
        return {}
    return {"output_nesting": _tree.pack_sequence_as(model._output_tree,
                                                     list(range(len(model._outputs))))}


def outputs_of(arch: dict, outputs: list, ctx):
    """The outputs as the architecture gives them: in the nesting it records
    (nested lists holding each output's index once, else ctx.error), else a
    list (multi_out) or the one output."""
    if "output_nesting" not in arch:
        return outputs if arch.get("multi_out") else outputs[0]
    nesting = arch["output_nesting"]
    leaves = _tree.flatten(nesting) if isinstance(nesting, list) else None
    if leaves is None or len(leaves) != len(outputs) or \
            sorted(l for l in leaves if type(l) is int) != list(range(len(outputs))):
        raise ctx.error(f"output_nesting must be nested lists holding each of the "
                        f"{len(outputs)} outputs' indices once, got {str(nesting)[:80]}")
    return _tree.map_structure(lambda i: outputs[i], nesting)


def call_entry(node) -> dict:
    """The entry for a user layer's call in the saved architecture: its positional
    arguments and tensor keyword arguments with each tensor as its index among the node's
    inputs (`Sampling()([z_mean, z_log_var])`: `{"args": [[0, 1]], "kwargs": {}}`), so that
    loading calls the layer as it was called; {} when the call held other values."""
    template = node.kwargs.get("_template")
    if not template or any(k == "mask" or k.endswith("_mask") for k in template[1]):
        return {}  # masks are passed again as the loaded graph carries them
    count = iter(range(1 << 30))

    def index(t):
        if isinstance(t, KerasTensor):
            return next(count)
        if isinstance(t, (list, tuple)):
            return [index(v) for v in t]
        if isinstance(t, dict) and all(isinstance(k, str) for k in t):
            return {"__dict__": {k: index(v) for k, v in t.items()}}
        raise TypeError("not a tensor")

    try:
        return {"call": {"args": index(list(template[0])),
                         "kwargs": {k: index(v) for k, v in template[1].items()}}}
    except (TypeError, IndexError):
        return {}


def call_arguments(node: dict, ins: list, ctx):
    """(args, kwargs) of a user layer's call from its saved entry (call_entry; checked:
    each input once), else the inputs as positional arguments (files without one)."""
    call = node.get("call")
    if call is None:
        return ins, {}
    seen = []

    def build(v, depth=0):
        if depth > 16:
            raise ctx.error("a layer call's arguments are nested too deeply")
        if type(v) is int and 0 <= v < len(ins):
            seen.append(v)
            return ins[v]
        if isinstance(v, list):
            return [build(u, depth + 1) for u in v]
        if isinstance(v, dict) and isinstance(v.get("__dict__"), dict) and len(v) == 1:
            return {str(k): build(u, depth + 1) for k, u in v["__dict__"].items()}
        raise ctx.error(f"a layer call's arguments hold {str(v)[:40]!r}, not an input's index")

    if not isinstance(call, dict) or not isinstance(call.get("kwargs"), dict):
        raise ctx.error("a layer call's arguments must name each of its inputs once")
    args = build(call.get("args"))
    kwargs = {str(k): build(v) for k, v in call["kwargs"].items()}
    if not isinstance(args, list) or \
            sorted(seen) != list(range(len(ins))):
        raise ctx.error("a layer call's arguments must name each of its inputs once")
    return args, kwargs
