"""Keras 3's function transforms: ``ops.custom_gradient`` and
``ops.associative_scan``.

``custom_gradient`` runs the user's forward eagerly; inside a traced call it
is refused with the reason (a model's gradients are its primitives' rules: a
Python rule cannot enter them). ``associative_scan`` applies the user's
combining function along the axis, one element after another, so it works
inside a model (the length must be known) and is differentiable."""

from __future__ import annotations

import functools

from . import numpy as knp
from .. import tree
from ._base import check_axis, is_symbolic, shape_of, tensor
from ..symbolic import user_location

__all__ = ["custom_gradient", "associative_scan"]


def custom_gradient(f):
    """Keras's decorator: ``f(*args)`` returns ``(y, grad_fn)``; the call gives y.

    Eagerly (on arrays) it runs f and returns its value. Inside a layer's call, a
    loss or a metric it is an error: tessera differentiates a model's program with
    the gradient rules of its primitives, and a Python gradient function cannot be
    one of them (write the forward with differentiable ops, with ops.stop_gradient
    where the gradient must be cut)."""
    if not callable(f):
        raise TypeError(f"[ops.custom_gradient] expects a function returning (value, grad_fn), "
                        f"got {f!r}")

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        if is_symbolic(args, kwargs):
            raise TypeError(
                f"[ops.custom_gradient] {getattr(f, '__name__', f)!r} at {user_location()}: a "
                "user gradient function cannot enter a model's program (tessera differentiates "
                "it by its primitives' rules); it runs eagerly on arrays only. Inside a layer's "
                "call write the forward with differentiable ops (ops.stop_gradient to cut a "
                "gradient)")
        out = f(*args, **kwargs)
        if not (isinstance(out, tuple) and len(out) == 2 and callable(out[1])):
            raise TypeError(f"[ops.custom_gradient] {getattr(f, '__name__', f)!r} must return "
                            f"(value, grad_fn), got {type(out).__name__} (at {user_location()})")
        return out[0]

    return wrapper


def associative_scan(f, elems, reverse=False, axis=0):
    """Inclusive prefix combination of elems along axis with the associative
    f(a, b) (elems a tensor or a nest of tensors of one length). f is called on
    slices that keep the axis (length 1), as it must accept batches in Keras."""

    if not callable(f):
        raise TypeError(f"[ops.associative_scan] f must be a function of two elements, got {f!r}")
    leaves = [tensor(v) for v in tree.flatten(elems)]
    if not leaves:
        raise ValueError(f"[ops.associative_scan] elems is empty (at {user_location()})")
    axes = [check_axis("associative_scan", axis, len(shape_of(v))) for v in leaves]
    lengths = {shape_of(v)[a] for v, a in zip(leaves, axes)}
    if len(lengths) != 1 or None in lengths:
        raise ValueError(f"[ops.associative_scan] every element must have one known length on "
                         f"axis {axis}, got shapes {[shape_of(v) for v in leaves]} (at "
                         f"{user_location()})")
    n = lengths.pop()

    def piece(i):
        out = []
        for v, a in zip(leaves, axes):
            index = [slice(None)] * len(shape_of(v))
            index[a] = slice(i, i + 1)
            out.append(v[tuple(index)])
        return tree.pack_sequence_as(elems, out)

    order = range(n - 1, -1, -1) if reverse else range(n)
    results, carry = [], None
    for i in order:
        carry = piece(i) if carry is None else f(carry, piece(i))
        results.append(tree.flatten(carry))
    if reverse:
        results.reverse()
    joined = [knp.concatenate([r[k] for r in results], axis=a) for k, a in enumerate(axes)]
    return tree.pack_sequence_as(elems, joined)
