"""Keras 3's ``ops.rearrange`` (einops notation): a reshape, a transpose and
a reshape, so it works inside a model and is differentiable."""

from __future__ import annotations

import re

import numpy as np

from . import numpy as knp
from ._base import shape_of, tensor
from ..symbolic import user_location

__all__ = ["rearrange"]

_TOKEN = re.compile(r"\([^()]*\)|[^\s()]+")


def _side(op, text, pattern):
    """[[names of one axis group]] of one side of an einops pattern."""
    groups = []
    for tok in _TOKEN.findall(text):
        names = tok[1:-1].split() if tok.startswith("(") else [tok]
        for n in names:
            if not n.isidentifier():
                raise ValueError(f"[ops.{op}] pattern {pattern!r}: {n!r} is not an axis name "
                                 "(letters, digits, _; no '...' or numbers, as in Keras) (at "
                                 f"{user_location()})")
        groups.append(names)
    if re.sub(r"\([^()]*\)|[^\s()]+|\s", "", text):
        raise ValueError(f"[ops.{op}] pattern {pattern!r} has unbalanced parentheses (at "
                         f"{user_location()})")
    return groups


def rearrange(tensor_, pattern, **axes_lengths):
    """Axes reordered, split and merged as the einops pattern says, e.g.
    ``"b (h p1) (w p2) c -> b (h w) (p1 p2 c)"`` with p1=, p2= given."""
    op = "rearrange"
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        raise ValueError(f"[ops.{op}] pattern must be a string 'left -> right', got {pattern!r} "
                         f"(at {user_location()})")
    x = tensor(tensor_)
    left_text, right_text = pattern.split("->")
    left, right = _side(op, left_text, pattern), _side(op, right_text, pattern)
    shape = shape_of(x)
    if len(left) != len(shape):
        raise ValueError(f"[ops.{op}] pattern {pattern!r} names {len(left)} axes, the tensor has "
                         f"shape {shape} (at {user_location()})")
    flat_left = [n for g in left for n in g]
    flat_right = [n for g in right for n in g]
    for side, names in (("left", flat_left), ("right", flat_right)):
        if len(set(names)) != len(names):
            raise ValueError(f"[ops.{op}] pattern {pattern!r}: an axis name repeats on the "
                             f"{side} (at {user_location()})")
    if set(flat_left) != set(flat_right):
        raise ValueError(f"[ops.{op}] pattern {pattern!r}: the two sides name different axes "
                         f"({sorted(set(flat_left) ^ set(flat_right))}) (at {user_location()})")
    unknown = set(axes_lengths) - set(flat_left)
    if unknown:
        raise ValueError(f"[ops.{op}] axes lengths {sorted(unknown)} are not in pattern "
                         f"{pattern!r} (at {user_location()})")
    sizes = {}
    for group, dim in zip(left, shape):
        known = [n for n in group if n in axes_lengths]
        free = [n for n in group if n not in axes_lengths]
        if len(group) == 1 and not known:
            sizes[group[0]] = dim
            continue
        if len(free) > 1:
            raise ValueError(f"[ops.{op}] pattern {pattern!r}: in ({' '.join(group)}) give the "
                             f"lengths of all axes but one, got {axes_lengths} (at "
                             f"{user_location()})")
        product = int(np.prod([axes_lengths[n] for n in known]))
        if free:
            if dim is not None and dim % product:
                raise ValueError(f"[ops.{op}] pattern {pattern!r}: an axis of {dim} does not "
                                 f"split into ({' '.join(group)}) with {axes_lengths} (at "
                                 f"{user_location()})")
            sizes[free[0]] = None if dim is None else dim // product
        elif dim is not None and dim != product:
            raise ValueError(f"[ops.{op}] pattern {pattern!r}: ({' '.join(group)}) = {product} "
                             f"but the axis has {dim} (at {user_location()})")
        sizes.update({n: int(axes_lengths[n]) for n in known})

    def shape_for(names_groups):
        out = []
        for g in names_groups:
            dims = [sizes[n] for n in g]
            out.append(None if None in dims else int(np.prod(dims)))
        if out.count(None) > 1:
            raise ValueError(f"[ops.{op}] pattern {pattern!r}: more than one axis of unknown "
                             f"length in a shape (at {user_location()})")
        return [-1 if d is None else d for d in out]

    if any(len(g) != 1 for g in left):
        x = knp.reshape(x, shape_for([[n] for n in flat_left]))
    perm = [flat_left.index(n) for n in flat_right]
    if perm != sorted(perm):
        x = knp.transpose(x, perm)
    if any(len(g) != 1 for g in right):
        x = knp.reshape(x, shape_for(right))
    return x
