"""A functional model's nested outputs in its saved architecture: the nesting
of the outputs' indices (`Model(x, [(a, b), (c, d)])`: `[[0, 1], [2, 3]]`),
written by saving.py and checked when read back (the file is untrusted)."""

from __future__ import annotations

from . import tree as _tree


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
