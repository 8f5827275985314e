"""Keras 3's ``ops.rearrange`` (einops notation), ``ops.custom_gradient``,
``ops.view_as_complex``/``view_as_real`` and ``ops.linalg.lu_factor``.

``rearrange`` is a reshape, a transpose and a reshape, so it works inside a
model and is differentiable. ``custom_gradient`` runs the user's forward
eagerly; inside a traced call it is refused with the reason (the program's
gradients are the primitives' rules: a Python rule cannot enter them)."""

from __future__ import annotations

import functools
import re

import numpy as np

from . import numpy as knp
from ._base import cast, dtype_of, eager_only, floating, is_symbolic, shape_of, tensor
from ..symbolic import user_location

__all__ = ["rearrange", "custom_gradient", "view_as_complex", "view_as_real"]

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


def view_as_complex(x):
    """A (..., 2) real tensor as the complex64 tensor real + 1j * imag."""
    x = floating(x)
    s = shape_of(x)
    if len(s) < 1 or s[-1] != 2:
        raise ValueError(f"[ops.view_as_complex] the last axis must hold 2 values (real, imag), "
                         f"got shape {s} (at {user_location()})")
    re, im = x[..., 0], x[..., 1]
    return knp.add(cast(re, "complex64"), knp.multiply(cast(im, "complex64"),
                                                       np.asarray(1j, "complex64")))


def view_as_real(x):
    """A complex tensor as a real one of shape (..., 2): (real, imag)."""
    x = tensor(x)
    if not dtype_of(x).startswith("complex"):
        raise ValueError(f"[ops.view_as_real] expects a complex tensor, got {dtype_of(x)} (at "
                         f"{user_location()})")
    return knp.stack([knp.real(x), knp.imag(x)], axis=-1)


def lu_factor(x):
    """(lu, pivots) of square matrices (batched), as jax.scipy.linalg.lu_factor:
    L (unit diagonal, below) and U in one matrix; pivots the 0-based row swapped
    with row i at step i (int32). Eager only (a factorization, several outputs)."""
    eager_only("linalg.lu_factor", x)
    a = np.array(x, dtype=np.result_type(np.asarray(x).dtype, np.float32))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"[ops.linalg.lu_factor] expects square matrices (..., n, n), got "
                         f"shape {a.shape} (at {user_location()})")
    n = a.shape[-1]
    lu = a.reshape(-1, n, n).copy()
    piv = np.zeros((lu.shape[0], n), "int32")
    for m, piv_m in zip(lu, piv):
        for k in range(n):
            p = k + int(np.argmax(np.abs(m[k:, k])))
            piv_m[k] = p
            if p != k:
                m[[k, p]] = m[[p, k]]
            if m[k, k] != 0:
                m[k + 1:, k] /= m[k, k]
                m[k + 1:, k + 1:] -= np.outer(m[k + 1:, k], m[k, k + 1:])
    return lu.reshape(a.shape), piv.reshape(a.shape[:-1])
