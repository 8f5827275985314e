"""Regularizers' penalties written into the training step's program: a
weight's (kernel_regularizer=, ...) and a layer output's (activity_regularizer=)."""

import itertools

from . import constraints
from .functional import apply_function
from .layers.base import Context
from .variables import add_program_losses

__all__ = ["regularizer_text", "write_activity_loss", "constraint_lines"]

_CONSTRAINT_NAMES = itertools.count()


def regularizer_text(reg, x: str, shape, dtype, ctx, batch_axis=True) -> str:
    """The text of regularizer `reg`'s penalty on `x`: a built-in's expression, else (a
    user's Regularizer subclass computing with ops in __call__, or a function) its call
    traced on a symbolic `x` of `shape` (per sample; a weight's whole shape without
    `batch_axis`)."""
    try:
        return reg.expression(x)
    except (AttributeError, NotImplementedError):
        return apply_function(reg, [x], [tuple(shape)], ctx, [dtype], batch_axis=batch_axis)


def write_activity_loss(layer, out: str, shape, dtype, ctx) -> str:
    """Writes the layer's activity_regularizer penalty on its output `out` as an added
    loss, divided by the batch size as Keras 3 does; returns the output's new name."""
    x = ctx.define("act_out", out)
    penalty = regularizer_text(layer.activity_regularizer, x, shape, dtype, ctx)
    add_program_losses([ctx.define("act_loss", f"({penalty}) / astype(shape({x})[0], "
                                               f"dtype_name({penalty}))")])
    return x


def constraint_lines(c, w: str, shape, dtype: str):
    """(statements, text) of a user's Constraint subclass projecting weight `w`: its
    __call__, computing with ops as Keras's constraints do, traced on a symbolic weight of
    `shape` (the training step then redefines `w` as the text, as Keras's optimizer
    assigns constraint(w) after the update)."""
    stmts = []

    def fresh(tag):
        return f"_cst{next(_CONSTRAINT_NAMES)}_{tag}"

    ctx = Context("false", "0", 0, stmts.append, fresh)
    return stmts, apply_function(c, [w], [tuple(shape)], ctx, [dtype], batch_axis=False)


constraints.TRACE_HOOKS["lines"] = constraint_lines
