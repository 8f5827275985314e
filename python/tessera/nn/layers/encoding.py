"""Keras's encode_categorical_inputs as expression text: how the categorical
preprocessing layers (IntegerLookup, CategoryEncoding, Discretization)
write their one_hot / multi_hot / count outputs inside a compiled model.

Keras on JAX compares each index with 0..depth-1 (jax.nn.one_hot), so an
index outside [0, depth) gives a row of zeros there, and a masked position
(index -1) counts nowhere; so does this."""

from __future__ import annotations

__all__: list = []  # helpers of the preprocessing families


def int_list(values) -> str:
    """An int64 constant array of the expression language."""
    return f"asarray([{', '.join(str(int(v)) for v in values)}], \"int64\")"


def float_list(values, dtype="float32") -> str:
    return f"asarray([{', '.join(repr(float(v)) for v in values)}], \"{dtype}\")"


def encoded_shape(kind, name, s, mode, depth):
    """The per-sample output shape of encode_expr for per-sample input
    shape s, or a ValueError naming the layer when Keras would fold the
    batch axis in (rank-0 samples with multi_hot / count) or refuse the rank."""
    if mode == "int":
        return tuple(s)
    if mode == "one_hot":
        if len(s) > 1:
            raise ValueError(f"[{kind}] layer {name!r}: output_mode='one_hot' in a model takes "
                             f"samples of shape () or (n,), got {tuple(s)}")
        return (depth,) if not s or s[-1] == 1 else tuple(s) + (depth,)
    if len(s) != 1:
        raise ValueError(f"[{kind}] layer {name!r}: output_mode={mode!r} in a model takes "
                         f"samples of shape (n,) (the values counted per sample), got "
                         f"{tuple(s)}; for one value per sample use Input(shape=(1,))")
    return (depth,)


def encode_expr(idx, s, mode, depth, dtype="float32", weights=None):
    """The expression of Keras's encoding of int64 indices `idx` (per-sample
    shape s, already checked by encoded_shape). weights: count_weights
    (count mode), an expression of idx's shape."""
    if mode == "int":
        return idx
    if mode == "one_hot" and s and s[-1] == 1:
        idx = f"squeeze({idx}, -1)"
    hot = f"equal(expand_dims({idx}, -1), arange({int(depth)}))"
    if mode == "one_hot":
        return f"astype({hot}, \"{dtype}\")"
    if mode == "multi_hot":
        return f"astype(any({hot}, axis=1), \"{dtype}\")"
    if weights is not None:
        return f"sum(astype({hot}, \"{dtype}\") * expand_dims({weights}, -1), axis=1)"
    return f"astype(sum({hot}, axis=1), \"{dtype}\")"
