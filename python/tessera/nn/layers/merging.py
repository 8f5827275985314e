"""Layers that merge several inputs, like Keras's merging layers: Add,
Subtract, Multiply, Average, Maximum, Minimum, Concatenate, Dot."""

from __future__ import annotations

import numpy as np

from ..ops._base import lattice_bound
from .base import Layer

__all__ = ["Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot",
           "add", "subtract", "multiply", "average", "maximum", "minimum", "concatenate", "dot"]


def _fold(fn: str, xs) -> str:
    """fn(fn(x0, x1), x2)...: a binary primitive over all inputs."""
    out = xs[0]
    for x in xs[1:]:
        out = f"{fn}({out}, {x})"
    return out


def _promoted(xs, ctx) -> list:
    """The inputs cast to the dtype Keras's merge gives mixed dtypes (int64 and float32 make
    float32, where NumPy's promotion would compute in float64)."""
    dtypes = getattr(ctx, "input_dtypes", None)
    if not dtypes or len(dtypes) != len(xs) or len(set(dtypes)) == 1:
        return list(xs)
    common = lattice_bound({str(d) for d in dtypes})
    return [x if d == common else f"astype({x}, \"{common}\")" for x, d in zip(xs, dtypes)]


class _Merge(Layer):
    multi_input = True
    min_inputs = 2
    max_inputs = None

    def compute_output_shape(self, shapes):
        if not isinstance(shapes, list) or len(shapes) < self.min_inputs or (
                self.max_inputs and len(shapes) > self.max_inputs):
            n = f"exactly {self.max_inputs}" if self.max_inputs == self.min_inputs else \
                f"at least {self.min_inputs}"
            raise ValueError(f"[{self.kind}] takes a list of {n} inputs, got "
                             f"{len(shapes) if isinstance(shapes, list) else 1}")
        return self._merged_shape([tuple(s) for s in shapes])

    def output_mask(self, inputs, mask):
        """Keras's Merge.compute_mask: the inputs' masks or-ed, none when an
        input has none."""

        masks = [getattr(t, "_keras_mask", None) for t in inputs]
        if any(m is None for m in masks):
            return None
        out = masks[0]
        for m in masks[1:]:
            out = np.logical_or(out, m)
        return out

    def _merged_shape(self, shapes):
        """Keras's rule: shapes broadcast (equal, or 1) axis by axis."""
        rank = max(len(s) for s in shapes)
        out = []
        for axis in range(rank):
            dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
            if len(dims) > 1:
                raise ValueError(f"[{self.kind}] the inputs' shapes {[(None,) + s for s in shapes]}"
                                 " do not match (nor broadcast)")
            out.append(dims.pop() if dims else 1)
        return tuple(out)


class Add(_Merge):
    """The sum of its inputs (a residual connection)."""

    kind = "Add"

    def forward(self, xs, p, ctx):
        xs = _promoted(xs, ctx)
        return " + ".join(f"({x})" for x in xs)


class Subtract(_Merge):
    """inputs[0] - inputs[1]."""

    kind = "Subtract"
    max_inputs = 2

    def forward(self, xs, p, ctx):
        xs = _promoted(xs, ctx)
        return f"({xs[0]}) - ({xs[1]})"


class Multiply(_Merge):
    """The elementwise product of its inputs."""

    kind = "Multiply"

    def forward(self, xs, p, ctx):
        xs = _promoted(xs, ctx)
        return " * ".join(f"({x})" for x in xs)


class Average(_Merge):
    """The elementwise mean of its inputs."""

    kind = "Average"

    def forward(self, xs, p, ctx):
        xs = _promoted(xs, ctx)
        return f"({' + '.join(f'({x})' for x in xs)}) / {float(len(xs))!r}"


class Maximum(_Merge):
    """The elementwise maximum of its inputs."""

    kind = "Maximum"

    def forward(self, xs, p, ctx):
        xs = _promoted(xs, ctx)
        return _fold("maximum", xs)


class Minimum(_Merge):
    """The elementwise minimum of its inputs."""

    kind = "Minimum"

    def forward(self, xs, p, ctx):
        xs = _promoted(xs, ctx)
        return _fold("minimum", xs)


class Concatenate(_Merge):
    """Joins its inputs along `axis` (default the last)."""

    kind = "Concatenate"
    min_inputs = 1

    def __init__(self, axis: int = -1, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"[Concatenate] axis must be an int, got {axis!r}")
        self.axis = axis

    def _merged_shape(self, shapes):
        rank = len(shapes[0]) + 1
        axis = self.axis + rank if self.axis < 0 else self.axis
        if not 0 <= axis < rank or any(len(s) + 1 != rank for s in shapes):
            raise ValueError(f"[Concatenate] axis {self.axis} does not fit the inputs' shapes "
                             f"{[(None,) + s for s in shapes]} (all inputs need the same rank)")
        if axis == 0:
            # Along the batch axis (SCAN's two augmented views of one batch, as Keras allows):
            # the samples keep their shape, the batch grows.
            if any(s != shapes[0] for s in shapes):
                raise ValueError(f"[Concatenate] the inputs' shapes {[(None,) + s for s in shapes]}"
                                 " differ on axes other than the batch axis 0")
            self._axis = 0
            return tuple(shapes[0])
        for s in shapes:
            if [d for i, d in enumerate(s) if i != axis - 1] != \
                    [d for i, d in enumerate(shapes[0]) if i != axis - 1]:
                raise ValueError(f"[Concatenate] the inputs' shapes "
                                 f"{[(None,) + s for s in shapes]} differ on axes other than "
                                 f"{self.axis}")
        self._axis = axis
        out = list(shapes[0])
        lengths = [s[axis - 1] for s in shapes]
        out[axis - 1] = None if None in lengths else sum(lengths)
        return tuple(out)

    def output_mask(self, inputs, mask):
        """Keras's Concatenate.compute_mask: each input's mask spread over
        its shape (all true without one), joined along the axis, then any
        over the last axis."""

        masks = [getattr(t, "_keras_mask", None) for t in inputs]
        if all(m is None for m in masks):
            return None
        full = []
        for t, m in zip(inputs, masks):
            if m is None:
                full.append(np.ones_like(t, dtype="bool"))
            elif m.ndim < t.ndim:
                full.append(np.logical_or(np.expand_dims(m, -1), np.zeros_like(t, dtype="bool")))
            else:
                full.append(m)
        return np.any(np.concatenate(full, axis=self._axis), axis=-1)

    def forward(self, xs, p, ctx):
        xs = _promoted(xs, ctx)
        return f"concatenate(list({', '.join(xs)}), axis={self._axis})"


class Dot(_Merge):
    """The dot product of two inputs along `axes` (per sample), like
    keras.layers.Dot; normalize=True takes cosine similarity."""

    kind = "Dot"
    max_inputs = 2

    def output_mask(self, inputs, mask):
        return None  # Keras's Dot gives none

    def __init__(self, axes, normalize: bool = False, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.axes = (axes, axes) if isinstance(axes, int) else tuple(axes)
        self.normalize = bool(normalize)

    def _merged_shape(self, shapes):
        a, b = shapes
        ax = [(k + len(s) + 1 if k < 0 else k) for k, s in zip(self.axes, shapes)]
        if not (1 <= ax[0] <= len(a) and 1 <= ax[1] <= len(b)) or a[ax[0] - 1] != b[ax[1] - 1]:
            raise ValueError(f"[Dot] axes {self.axes} do not match the shapes {(None,) + a} and "
                             f"{(None,) + b}")
        if len(a) > 2 or len(b) > 2:
            raise ValueError("[Dot] inputs of rank 2 or 3 (with the batch) are supported")
        self._ax = ax
        out = tuple(d for i, d in enumerate(a) if i != ax[0] - 1) + \
            tuple(d for i, d in enumerate(b) if i != ax[1] - 1)
        return out or (1,)

    def forward(self, xs, p, ctx):
        a, b = xs
        if self.normalize:
            a = f"({a}) / sqrt(maximum(sum(({a}) * ({a}), axis={self._ax[0]}, keepdims=true), " \
                "1e-12))"
            b = f"({b}) / sqrt(maximum(sum(({b}) * ({b}), axis={self._ax[1]}, keepdims=true), " \
                "1e-12))"
        sa, sb = self._in_shape
        if len(sa) == 1 and len(sb) == 1:
            return f"sum(({a}) * ({b}), axis=1, keepdims=true)"
        left = a if self._ax[0] == len(sa) else f"swapaxes({a}, 1, 2)"
        right = b if self._ax[1] == 1 else f"swapaxes({b}, 1, 2)"
        return f"matmul({left}, {right})"


def _functional(cls):
    def apply(inputs, **kwargs):
        return cls(**kwargs)(inputs)

    apply.__name__ = cls.__name__.lower()
    apply.__doc__ = f"{cls.__name__}(**kwargs)(inputs), as keras.layers.{apply.__name__}."
    return apply


add, subtract, multiply = _functional(Add), _functional(Subtract), _functional(Multiply)
average, maximum, minimum = _functional(Average), _functional(Maximum), _functional(Minimum)
concatenate = _functional(Concatenate)


def dot(inputs, axes=-1, **kwargs):
    """Dot(axes, **kwargs)(inputs), as keras.layers.dot."""
    return Dot(axes=axes, **kwargs)(inputs)
