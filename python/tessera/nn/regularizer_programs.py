"""Regularizers' penalties written into the training step's program: a
weight's (kernel_regularizer=, ...) and a layer output's (activity_regularizer=)."""

from .functional import apply_function
from .variables import add_program_losses

__all__ = ["regularizer_text", "write_activity_loss"]


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
