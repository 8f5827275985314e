"""Keras's InputSpec: what a layer accepts (rank, dtype, sizes of given axes),
checked on every call (``layer.input_spec``), as Keras's
assert_input_compatibility does."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["InputSpec", "assert_input_compatibility"]


def _int_or_none(cls: str, name: str, v):
    if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0):
        raise ValueError(f"[{cls}] {name} must be None or an int >= 0, got {v!r}")
    return None if v is None else int(v)


class InputSpec:
    """Keras's InputSpec(dtype=None, shape=None, ndim=None, max_ndim=None,
    min_ndim=None, axes=None, allow_last_axis_squeeze=False, name=None,
    optional=False). Shapes and axes count the batch axis."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None,
                 axes=None, allow_last_axis_squeeze=False, name=None, optional=False):
        self.dtype = None if dtype is None else np.dtype(dtype).name
        if shape is not None:
            shape = tuple(_int_or_none("InputSpec", "shape", d) for d in shape)
            ndim = len(shape)
        self.shape = shape
        self.ndim = _int_or_none("InputSpec", "ndim", ndim)
        self.max_ndim = _int_or_none("InputSpec", "max_ndim", max_ndim)
        self.min_ndim = _int_or_none("InputSpec", "min_ndim", min_ndim)
        self.name, self.optional = name, bool(optional)
        self.allow_last_axis_squeeze = bool(allow_last_axis_squeeze)
        axes = dict(axes or {})
        for k, v in axes.items():
            if isinstance(k, bool) or not isinstance(k, numbers.Integral):
                raise ValueError(f"[InputSpec] axes must map ints to sizes, got {axes!r}")
            _int_or_none("InputSpec", "axes", v)
        self.axes = {int(k): v for k, v in axes.items()}
        if self.axes and (self.ndim is not None or self.max_ndim is not None):
            top = (self.ndim if self.ndim is not None else self.max_ndim) - 1
            if max(self.axes) > top:
                raise ValueError(f"[InputSpec] axis {max(self.axes)} is past the rank "
                                 f"{top + 1} the spec gives")

    def get_config(self) -> dict:
        return {"dtype": self.dtype, "shape": self.shape, "ndim": self.ndim,
                "max_ndim": self.max_ndim, "min_ndim": self.min_ndim, "axes": self.axes}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if v)
        return f"InputSpec({items})"


def _flat(x):
    if isinstance(x, dict):
        return [u for v in x.values() for u in _flat(v)]
    if isinstance(x, (list, tuple)):
        return [u for v in x for u in _flat(v)]
    return [x]


def assert_input_compatibility(input_spec, inputs, layer_name: str, where: str = "",
                               kind: str = "Layer"):
    """A ValueError naming the layer, the input and what differs when
    ``inputs`` (arrays or symbolic tensors, batch first) do not meet
    ``input_spec`` (an InputSpec or a list of them; None: anything)."""
    if not input_spec:
        return
    specs = _flat(input_spec)
    xs = _flat(inputs)
    at = f" (at {where})" if where else ""
    if len(xs) != len(specs):
        raise ValueError(f"[{kind}] layer {layer_name!r} expects {len(specs)} input(s) "
                         f"(input_spec), got {len(xs)}{at}")
    for k, (spec, x) in enumerate(zip(specs, xs)):
        if spec is None or (x is None and spec.optional):
            continue
        shape = tuple(getattr(x, "shape", np.shape(x)))
        ndim = len(shape)
        head = f"[{kind}] input {k} of layer {layer_name!r} is incompatible with the layer: "
        if spec.ndim is not None and not spec.allow_last_axis_squeeze and ndim != spec.ndim:
            raise ValueError(f"{head}expected ndim={spec.ndim}, found ndim={ndim}; full shape "
                             f"received: {shape}{at}")
        if spec.max_ndim is not None and ndim > spec.max_ndim:
            raise ValueError(f"{head}expected max_ndim={spec.max_ndim}, found ndim={ndim}; "
                             f"full shape received: {shape}{at}")
        if spec.min_ndim is not None and ndim < spec.min_ndim:
            raise ValueError(f"{head}expected min_ndim={spec.min_ndim}, found ndim={ndim}; "
                             f"full shape received: {shape}{at}")
        if spec.dtype is not None:
            dtype = np.dtype(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype).name
            if dtype != spec.dtype:
                raise ValueError(f"{head}expected dtype={spec.dtype}, found dtype={dtype}{at}")
        for axis, value in spec.axes.items():
            if value is None:
                continue
            if not -ndim <= axis < ndim or shape[axis] not in (value, None):
                raise ValueError(f"{head}expected axis {axis} of the input shape to have value "
                                 f"{value}, but received input with shape {shape}{at}")
        if spec.shape is not None:
            for want, got in zip(spec.shape, shape):
                if want is not None and got is not None and want != got:
                    raise ValueError(f"{head}expected shape={spec.shape}, found shape={shape}"
                                     f"{at}")
