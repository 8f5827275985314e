"""The shape argument of a user's layer's `build` on its first symbolic call, as
Keras 3 gives it: the structure of the call's first argument with each tensor
replaced by its shape. A list `[node_states, edges]` of one symbolic tensor and
one constant array (a graph layer called on the model's node states and the
edge list it holds) builds with `[node_states.shape, edges.shape]`, so a
`build` reading `input_shape[0][-1]` sees the node states' width (tessera gave
the symbolic tensor's shape alone). And the dtypes a subclassed model's stand-in
inputs take when it is built by its first call or fit: integer data gives int32
inputs, as Keras traces the model on the batch (a graph model's `ops.take` of
node rows by the node indices it is called on)."""
from __future__ import annotations

import contextlib

import numpy as np

from .symbolic import KerasTensor

__all__ = ["first_argument_shapes", "built_on"]


def _leaves(x) -> list:
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def _is_constant(v) -> bool:
    return not isinstance(v, KerasTensor) and hasattr(v, "shape") and hasattr(v, "dtype")


def _shapes_of(x):
    if isinstance(x, dict):
        return {k: _shapes_of(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_shapes_of(v) for v in x)
    if isinstance(x, KerasTensor):
        return tuple(x.shape)
    return tuple(int(n) for n in x.shape)


def first_argument_shapes(inputs, symbolic_shapes):
    """`build`'s argument: the shapes of `inputs` in its structure when it is a list,
    tuple or dict holding constant arrays beside every symbolic tensor of the call;
    otherwise the symbolic tensors' shapes as before (one shape, or a list of them)."""
    leaves = _leaves(inputs)
    symbolic = [v for v in leaves if isinstance(v, KerasTensor)]
    if (isinstance(inputs, (list, tuple, dict)) and any(_is_constant(v) for v in leaves)
            and len(symbolic) == len(symbolic_shapes)):
        return _shapes_of(inputs)
    return symbolic_shapes[0] if len(symbolic_shapes) == 1 else symbolic_shapes


@contextlib.contextmanager
def built_on(layer, data):
    """While `layer` builds: the dtypes of the symbolic tensors or arrays it is first
    called or fitted on ("int32" for integers, None for the others), which a
    subclassed model's build gives its stand-in inputs (Model._input_dtype)."""
    kinds = [np.dtype(d.dtype if isinstance(d, KerasTensor) else np.asarray(d).dtype).kind
             if getattr(d, "dtype", None) != "string" else "U" for d in data]
    layer.__dict__["_data_dtypes"] = ["int32" if k in "iu" else None for k in kinds]
    try:
        yield
    finally:
        layer.__dict__.pop("_data_dtypes", None)
