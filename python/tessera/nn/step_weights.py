"""Sample weights as a step override gets them (step_overrides.py): one placeholder when fit
or evaluate were given one array, or, when they were given one array per output, the
structure given (a list, a tuple, a dict by the outputs' keys; None for an output left
unweighted), each entry a placeholder in the shape given, as Keras 3 passes
`data = (x, y, sample_weight)` to train_step and `sample_weight` to compute_loss and
compute_metrics. `super().compute_loss(...)` and compile's metrics take such a structure
back: each output weighted by its own entry (or one tensor for every output)."""

from __future__ import annotations

from .symbolic import KerasTensor, user_location

__all__ = ["per_output_weighted", "sw_key", "sw_placeholders", "bind_sw", "as_given_sw",
           "as_program_sw", "weights_per_output"]


def per_output_weighted(weighted) -> bool:
    """weighted: the programs' flags (sample_weights.weight_flags), a tuple per output."""
    return isinstance(weighted, tuple)


def _given(model, k=None):
    v = model.__dict__.get("_sw_given")
    if k is not None:
        v = v[k] if isinstance(v, list) else v
    return tuple(v or ())


def _held(model, k=None):
    v = model.__dict__.get("_sw_held")
    if k is not None:
        v = v[k] if isinstance(v, list) else v
    return tuple(v or ())


def sw_key(model):
    """What a trace of weights depends on: their shapes as given, and their structure."""
    given = model.__dict__.get("_sw_given")
    if isinstance(given, list):
        return tuple(given), model.__dict__.get("_sw_form") or "list"
    return tuple(given or ())


def as_given_sw(model, sw: str, k=None) -> str:
    """The programs' weights `sw` (their axes of 1 squeezed) in the shape given (output k's
    when they were given per output)."""
    given, held = _given(model, k), _held(model, k)
    return sw if given == held else f"reshape({sw}, {[-1] + list(given)})"


def as_program_sw(model, sw: str, k=None) -> str:
    """Weights in the shape given back in the programs' form (as_given_sw undone)."""
    given, held = _given(model, k), _held(model, k)
    return sw if given == held else f"reshape({sw}, {[-1] + list(held)})"


def sw_placeholders(model, weighted, dtype):
    """(the sample_weight an override gets, the placeholders to bind: one, or one per output
    with None for an unweighted output's), or (None, None) without weights."""
    if not weighted:
        return None, None
    if not per_output_weighted(weighted):
        ph = KerasTensor((None,) + _given(model), dtype, "input", name="sample_weight")
        m = model.__dict__.get("_labels_count") or len(model._outputs)
        if m > 1:  # one array for several outputs: Keras's data adapter gives it to each
            if m == len(model._outputs) and getattr(model, "_output_keys", None):
                return dict.fromkeys(model._output_names(), ph), ph
            return [ph] * m, ph
        return ph, ph
    phs = [KerasTensor((None,) + _given(model, k), dtype, "input", name=f"sample_weight{k}")
           if f else None for k, f in enumerate(weighted)]
    form = model.__dict__.get("_sw_form") or "list"
    if form == "dict":
        return dict(zip(model._output_names(), phs)), phs
    return (tuple(phs) if form == "tuple" else list(phs)), phs


def bind_sw(model, names: dict, phs, sw) -> None:
    """The placeholders' program names: `sw` the programs' weights (weight_names: one name,
    or one per output with None)."""
    if phs is None:
        return
    if not isinstance(phs, list):
        names[phs.id] = as_given_sw(model, sw)
        return
    for k, ph in enumerate(phs):
        if ph is not None:
            names[ph.id] = as_given_sw(model, sw[k] if isinstance(sw, list) else sw, k)


def weights_per_output(model, sample_weight, n: int, hook: str, what="sample_weight"):
    """The weights an override passes back (to super().compute_loss or compile's metrics)
    for n outputs: one tensor (every output's), or a list of n entries (tensor or None)
    from a list or tuple in the outputs' order or a dict by their keys. A structure Keras
    cannot take (another count, a dict's unknown keys) is refused by name."""
    where = user_location()
    if not isinstance(sample_weight, (list, tuple, dict)):
        return sample_weight
    names = model._output_names()[:n]

    def shape(v):
        return None if v is None else tuple(getattr(v, "shape", ()))
    if isinstance(sample_weight, dict):
        got = {k: shape(v) for k, v in sample_weight.items()}
        keyed = bool(getattr(model, "_output_keys", None))
        if not keyed or set(sample_weight) != set(names):
            want = f"a dict by the outputs' keys {names}" if keyed else \
                f"a list in the outputs' order {names}"
            raise ValueError(f"[{hook}] {what} is a dict {got} for the model's outputs "
                             f"{names}{'' if keyed else ' (a list)'}: give {want}, one entry "
                             f"per output (None: unweighted), or one tensor for every output "
                             f"(at {where})")
        entries = [sample_weight[k] for k in names]
    else:
        entries = list(sample_weight)
        if getattr(model, "_output_keys", None) and n > 1:
            raise ValueError(f"[{hook}] {what} is a {type(sample_weight).__name__} of "
                             f"{len(entries)} entries {[shape(v) for v in entries]} for the "
                             f"model's outputs, a dict {names}: give a dict by their keys "
                             f"(as Keras gives it) or one tensor for every output (at {where})")
        if n == 1 and entries and all(v is entries[0] for v in entries):
            # (one array given for every output, passed on to a loss or metrics built on
            # the first output alone: that array)
            return entries[0]
        if len(entries) != n:
            raise ValueError(f"[{hook}] {what} has {len(entries)} entries "
                             f"{[shape(v) for v in entries]} for a loss of {n} outputs "
                             f"{names}: give one per output (None: unweighted) or one tensor "
                             f"for every output (at {where})")
    for k, v in zip(names, entries):
        if v is not None and not isinstance(v, KerasTensor):
            raise TypeError(f"[{hook}] {what}'s entry for output {k!r} must be the symbolic "
                            f"weights the step received (or computed from them), got "
                            f"{type(v).__name__} (at {where})")
    return entries
