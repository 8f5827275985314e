"""The shape argument of a user's layer's `build` on its first symbolic call, as
Keras 3 gives it: the structure of the call's first argument with each tensor
replaced by its shape. A list `[node_states, edges]` of one symbolic tensor and
one constant array (a graph layer called on the model's node states and the
edge list it holds) builds with `[node_states.shape, edges.shape]`, so a
`build` reading `input_shape[0][-1]` sees the node states' width (tessera gave
the symbolic tensor's shape alone)."""
from __future__ import annotations

from .symbolic import KerasTensor

__all__ = ["first_argument_shapes"]


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
