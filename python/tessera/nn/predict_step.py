"""A subclassed model's `predict_step(self, data)` override (Keras 3's Model hook,
as its TensorFlow and PyTorch trainers call it), traced into predict's compiled
program.

predict calls the override once per input shape, on symbolic data: `x` (the
model's inputs, as `call` receives them) for arrays, or the batch's tuple
(x, y...) for a PyDataset, a generator or a Dataset, as Keras's data adapters
give it. What it returns (a tensor, or a dict, list or tuple of them, nested)
is computed from `self(x, training=False)`, the layers and sub-models it
calls, and keras.ops or NumPy functions on them; one program computes every
leaf, and predict concatenates each leaf over the batches, keeping the
structure (as Keras's `tree.map_structure(np.concatenate, ...)`)."""

from __future__ import annotations

import inspect

import numpy as np

from .layer_state import state_results
from .registry import INTERNAL_MODEL_NAME, model_class
from .symbolic import KerasTensor, user_location
from .variables import tracing

__all__ = ["overrides_predict_step", "PredictTrace", "trace_predict_step", "predict_batch_logs",
           "concatenate_outputs"]


def _user_owner(model):
    owner = next((c for c in type(model).__mro__ if "predict_step" in c.__dict__), None)
    if owner is None or owner.__module__.startswith("tessera."):
        return None
    return owner


def overrides_predict_step(model) -> bool:
    """Whether the model's class (a user's) overrides Model.predict_step."""
    return _user_owner(model) is not None


def _refuse_stateless_form(model, owner):
    """Keras's JAX trainer calls predict_step(self, state, data) (stateless);
    tessera traces the (self, data) form of its TensorFlow and torch trainers."""
    try:
        params = list(inspect.signature(owner.__dict__["predict_step"]).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in params[1:] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
    if len(positional) > 1:
        names = [p.name for p in params[1:]]
        raise NotImplementedError(
            f"[predict] {owner.__name__}.predict_step takes {names}: tessera calls "
            "predict_step(self, data) as Keras's TensorFlow and PyTorch trainers do (data: x, or "
            "the batch's tuple); the stateless predict_step(self, state, data) of Keras's JAX "
            "trainer is not supported: call self(x, training=False) instead of "
            f"stateless_call (at {user_location()})")


def _flatten(value, path: str, leaves: list, owner: str):
    """The structure of `value` with each tensor replaced by its index in `leaves`."""
    if isinstance(value, dict):
        return {k: _flatten(v, f"{path}[{k!r}]", leaves, owner) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_flatten(v, f"{path}[{i}]", leaves, owner) for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if not isinstance(value, KerasTensor):
        raise TypeError(
            f"[predict] {owner}.predict_step returns {path} of type {type(value).__name__}: a "
            "traced predict_step must return tensors computed from its data (self(x), layers, "
            "keras.ops or NumPy functions on them), or dicts, lists and tuples of them; values "
            "made in Python (NumPy arrays, .numpy(), numbers) are not part of the program: "
            "post-process predict's result instead")
    if len(value.shape) == 0:
        raise ValueError(
            f"[predict] {owner}.predict_step returns {path}, a scalar (made at {value.where}): "
            "predict concatenates each output over the batches along axis 0, as Keras's does, "
            "so every output needs a batch axis (reduce per sample, e.g. axis=-1)")
    leaves.append(value)
    return len(leaves) - 1


def _pack(structure, values):
    if isinstance(structure, dict):
        return {k: _pack(v, values) for k, v in structure.items()}
    if isinstance(structure, list):
        return [_pack(v, values) for v in structure]
    if isinstance(structure, tuple):
        return tuple(_pack(v, values) for v in structure)
    return values[structure]


class PredictTrace:
    """The traced override: the structure of what it returns, and the model
    computing its leaves (on the model's inputs, plus the batch's other parts
    when the data has them)."""

    def __init__(self, structure, twin, n_extra: int):
        self.structure, self.twin, self.n_extra = structure, twin, n_extra

    def pack(self, leaves):
        return _pack(self.structure, list(leaves))

    def run(self, arrays: list):
        """The override's result for one batch (its arrays: x's, then the other parts)."""
        twin = self.twin
        prog = twin._program("predict")
        args = [twin.weights[v] for v in twin._params(True) + twin._params(False)]
        r = prog.run(args + list(arrays[:len(twin._inputs)]) + [twin._inference_seed()])
        if state_results(prog):  # (the weights the layers' calls assign: kept)
            r, new = r
            twin._keep_state(prog, [new], args)
        r = list(r) if len(twin._outputs) > 1 else [r]
        return self.pack([np.asarray(a) for a in r])


def trace_predict_step(model, extra_specs=None) -> PredictTrace:
    """The override called on symbolic data (cached per input graph and data
    parts): `extra_specs` (per-sample shape, dtype) of the batch's parts after x
    when predict reads a dataset (the data is then the tuple (x, ...)), None for
    arrays (the data is x)."""
    key = (tuple(id(t) for t in model._inputs), None if extra_specs is None else
           tuple((tuple(s), str(d)) for s, d in extra_specs), model.dtype)
    cache = model.__dict__.setdefault("_predict_traces", {})
    if key in cache:
        return cache[key]
    owner = _user_owner(model)
    _refuse_stateless_form(model, owner)
    x = model.input
    extras = [KerasTensor((None,) + tuple(s), str(d), "input", name=f"data_{k + 1}")
              for k, (s, d) in enumerate(extra_specs or ())]
    data = x if extra_specs is None else (x, *extras)
    model.__dict__["_step_self_call"] = True
    try:
        with tracing():
            out = model.predict_step(data)
    finally:
        model.__dict__.pop("_step_self_call", None)
    leaves: list = []
    structure = _flatten(out, "its result", leaves, owner.__name__)
    if not leaves:
        raise ValueError(f"[predict] {owner.__name__}.predict_step returns no tensor "
                         f"({type(out).__name__}): nothing to predict")
    try:
        twin = model_class()(list(model._inputs), leaves, name=INTERNAL_MODEL_NAME)
    except (ValueError, TypeError) as e:
        raise type(e)(f"[predict] {owner.__name__}.predict_step's result cannot be computed "
                      f"from x alone (it reads the batch's labels, or values made outside the "
                      f"trace): {e}") from None
    twin.__dict__["_carries_states"] = model.__dict__.get("_carries_states", False)
    cache[key] = PredictTrace(structure, twin, len(extras))
    return cache[key]


def predict_batch_logs(outputs) -> dict:
    """on_predict_batch_end's logs as Keras's CallbackList gives them: {"outputs":
    the batch's outputs}, a dict of outputs flattened into the logs (its keys,
    sorted, as Keras's pythonify_logs)."""
    if not isinstance(outputs, dict):
        return {"outputs": outputs}
    out: dict = {}
    for k in _sorted_keys(outputs):
        v = outputs[k]
        if isinstance(v, dict):
            out.update(predict_batch_logs(v))
        else:
            out[k] = v
    return out


def _sorted_keys(d: dict) -> list:
    """A dict's keys in the order Keras's tree functions give them (sorted)."""
    try:
        return sorted(d)
    except TypeError:
        return list(d)


def concatenate_outputs(batches: list, where: str):
    """Each leaf of the batches' results (one structure each) concatenated along
    axis 0, in the same structure (Keras's)."""
    first = batches[0]
    if isinstance(first, dict):
        return {k: concatenate_outputs([b[k] for b in batches], f"{where}[{k!r}]")
                for k in _sorted_keys(first)}
    if isinstance(first, (list, tuple)):
        items = [concatenate_outputs([b[i] for b in batches], f"{where}[{i}]")
                 for i in range(len(first))]
        return items if isinstance(first, list) else tuple(items)
    shapes = {tuple(np.shape(b)[1:]) for b in batches}
    if len(shapes) > 1:
        raise ValueError(f"[predict] {where} has per-sample shapes {sorted(shapes)} in different "
                         "batches: predict concatenates the batches' outputs along axis 0, as "
                         "Keras's does, which needs one per-sample shape; pad the batches to "
                         "one length, or call predict_on_batch per batch")
    return batches[0] if len(batches) == 1 else np.concatenate(batches)
