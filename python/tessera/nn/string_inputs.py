"""Models whose inputs are strings (``Input(shape=(1,), dtype="string")``
into ``TextVectorization``, ``StringLookup`` or ``Hashing``), as Keras's
end-to-end text models are written.

Strings cannot flow through a compiled program, so such a layer, called on a
string Input, is the model's *front*: it runs eagerly, with NumPy, on the
strings that fit, evaluate and predict are given, and its output (integer
ids, or counts) is what the compiled program takes (and what `model.inputs` lists).
A Dataset given to fit is not preprocessed: map the layer over it.""" 

from __future__ import annotations

import numpy as np

from .symbolic import KerasTensor, user_location

__all__ = ["is_string", "front_tensor", "split_fronts", "apply_fronts"]

STRING = "string"


def is_string(t) -> bool:
    return isinstance(t, KerasTensor) and t.dtype == STRING


def front_tensor(layer, t: KerasTensor) -> KerasTensor:
    """The result of a preprocessing layer called on a string Input: a tensor
    the compiled program takes as an input, computed by the layer from the
    strings given to the model."""
    where = user_location()
    if t.op != "input":
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} called at {where} on a string "
                        "tensor that is not a model Input; strings flow only from Input(..., "
                        "dtype='string') straight into a preprocessing layer")
    probe = np.full((2,) + tuple(1 if d is None else d for d in t.shape[1:]), "a", dtype=object)
    try:
        out = np.asarray(layer(probe.astype(str)))
    except (TypeError, ValueError) as e:
        raise type(e)(f"[{layer.kind}] layer {layer.name!r} called at {where} on the string "
                      f"Input {t.shape}: {e}") from None
    shape = list(out.shape[1:])
    if getattr(layer, "output_mode", None) == "int" and \
            getattr(layer, "output_sequence_length", 0) is None and shape:
        shape[-1] = None  # as long as the longest text of each batch
    front = KerasTensor((None,) + tuple(shape), str(out.dtype), "input", where=where,
                        name=t.name)
    front._string_front = (layer, t)
    t.__dict__.setdefault("_fronts", []).append(front)
    return front


def split_fronts(kind: str, ins: list) -> tuple:
    """The inputs the program takes (each string Input replaced by the output
    of the preprocessing layer called on it) and {position: layer}."""
    out, fronts = [], {}
    for k, t in enumerate(ins):
        if not is_string(t) or t.__dict__.get("_group_source"):  # (a FeatureSpace's: below)
            out.append(t)
            continue
        made = t.__dict__.get("_fronts", [])
        if len(made) != 1:
            raise ValueError(f"[{kind}] the string Input made at {t.where} must feed exactly one "
                             f"preprocessing layer (TextVectorization, StringLookup, Hashing), "
                             f"got {len(made)}")
        out.append(made[0])
        fronts[k] = made[0]._string_front[0]
    return out, fronts


def apply_fronts(model, x, where: str):
    """x with the strings of each string input replaced by what its
    preprocessing layer makes of them."""
    fronts = model.__dict__.get("_string_fronts")
    if not fronts:
        return x
    single = not isinstance(x, (list, tuple, dict))
    xs = [x] if single else dict(x) if isinstance(x, dict) else list(x)
    for k, layer in fronts.items():
        key = model._inputs[k].name if isinstance(xs, dict) else k
        try:
            xs[key] = np.asarray(layer(np.asarray(xs[key]).astype(str)))
        except (TypeError, ValueError) as e:
            raise type(e)(f"[{where}] input {k} (strings, into layer {layer.name!r}): {e}") \
                from None
    return xs[0] if single else xs


# ------------------------------------------------------------------ group fronts
# A FeatureSpace's encoded features (feature_space.py) are tensors the compiled
# program takes, computed from several raw Inputs at once (ints, floats,
# strings). A model whose inputs are those raw Inputs and whose outputs are
# computed from the encoded features runs the FeatureSpace on the raw arrays
# it is given (Keras's end-to-end "inference model").


def _group_front(t):
    return t.__dict__.get("_group_front") if isinstance(t, KerasTensor) else None


def split_group_fronts(kind: str, ins: list, outs: list, deps) -> tuple:
    """(the inputs the program takes, the plan apply_group_fronts follows, or
    None). `deps(t)` lists the tensors t is computed from."""
    given = {t.id for t in ins}
    fronts, reached, seen, stack = [], set(), set(), list(outs)
    while stack:
        t = stack.pop()
        if t.id in seen:
            continue
        seen.add(t.id)
        if t.op == "input":
            reached.add(t.id)
            if _group_front(t) is not None and t.id not in given:
                fronts.append(t)
            continue
        stack.extend(deps(t))
    if not fronts:
        return ins, None
    fronts.sort(key=lambda t: t.id)
    sources = {}
    for f in fronts:
        front = f._group_front[0]
        missing = [s.name for s in front.sources if s.id not in given]
        if missing:
            raise ValueError(
                f"[{kind}] the outputs are computed from the encoded features of FeatureSpace "
                f"{front.space.name!r}, but the model's inputs lack its Inputs {missing}: give "
                "feature_space.get_inputs() as the inputs (or the encoded features themselves)")
        for s in front.sources:
            sources[s.id] = s
    keep = [k for k, t in enumerate(ins) if t.id not in sources or t.id in reached]
    plan = {"raw": list(ins), "keep": keep, "fronts": [f._group_front for f in fronts]}
    return [ins[k] for k in keep] + fronts, plan


def apply_group_fronts(model, x, where: str):
    """x (the raw inputs: a list in the model's input order, a dict by the
    Inputs' names, or one array) as the program's inputs: the kept raw
    arrays, then each FeatureSpace's encoded arrays."""
    plan = model.__dict__.get("_group_fronts")
    if not plan:
        return x
    raw = plan["raw"]
    if isinstance(x, dict):  # by the keys of the dict of inputs, else by the Inputs' names
        names = plan.get("keys") or [t.name for t in raw]
        missing = [n for n in names if n not in x]
        if missing:
            raise ValueError(f"[{where}] x is a dict but lacks the model's inputs {missing} "
                             f"(got {sorted(x)})")
        xs = [x[n] for n in names]
    else:
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if len(xs) != len(raw):
        raise ValueError(f"[{where}] the model takes {len(raw)} inputs "
                         f"{[t.name for t in raw]}, got {len(xs)}")
    by_id = {t.id: a for t, a in zip(raw, xs)}
    done = {}
    out = [xs[k] for k in plan["keep"]]
    for front, key in plan["fronts"]:
        if id(front) not in done:
            done[id(front)] = front([by_id[s.id] for s in front.sources], where)
        value = done[id(front)]
        out.append(value if key is None else value[key])
    return out
