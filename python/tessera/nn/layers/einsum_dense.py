"""EinsumDense: a dense layer written as an einsum of the input and the kernel
(Keras's keras.layers.EinsumDense, which its transformer examples use)."""

from __future__ import annotations

import re

from .. import initializers
from .base import Layer, Param, _activation, _apply, _fans, _initializer, _regularizer

__all__ = ["EinsumDense"]


def _split(equation: str):
    """(input spec, weight spec, output spec, ellipsis: None, "left" or "right"),
    the forms Keras takes: X,Y->Z, ...X,Y->...Z and X...,Y->Z...."""
    eq = equation.replace(" ", "")
    for pattern, side in ((r"([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)", None),
                          (r"\.\.\.([a-zA-Z]+),([a-zA-Z]+)->\.\.\.([a-zA-Z]+)", "left"),
                          (r"([a-zA-Z]{2,})\.\.\.,([a-zA-Z]+)->([a-zA-Z]+)\.\.\.", "right")):
        m = re.fullmatch(pattern, eq)
        if m:
            return m.group(1), m.group(2), m.group(3), side
    raise ValueError(f"[EinsumDense] invalid equation {equation!r}: equations must be of the form "
                     "[X],[Y]->[Z], ...[X],[Y]->...[Z] or [X]...,[Y]->[Z]...")


class EinsumDense(Layer):
    """einsum(equation, x, kernel) [+ bias over ``bias_axes``], then the
    activation. ``output_shape`` gives the output's sizes without the batch
    (and the elided axes); the kernel's shape follows from the equation, as in
    Keras."""

    kind = "EinsumDense"
    constraint_arguments = {"kernel_constraint": "kernel", "bias_constraint": "bias"}

    def __init__(self, equation, output_shape, activation=None, bias_axes=None,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if not isinstance(equation, str):
            raise TypeError(f"[EinsumDense] equation must be a string, got {equation!r}")
        self.equation = equation
        self._specs = _split(equation)
        shape = [output_shape] if isinstance(output_shape, int) or output_shape is None \
            else list(output_shape)
        if any(d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 1)
               for d in shape):
            raise ValueError(f"[EinsumDense] output_shape must hold positive ints (or None), "
                             f"got {output_shape!r}")
        self.partial_output_shape = shape
        if bias_axes is not None:
            missing = [c for c in bias_axes if c not in self._specs[2]]
            if not isinstance(bias_axes, str) or missing:
                raise ValueError(f"[EinsumDense] bias_axes {bias_axes!r} must be letters of the "
                                 f"output spec {self._specs[2]!r}")
        self.bias_axes = bias_axes
        self.activation = _activation(activation, self.kind)
        self.kernel_initializer = _initializer(kernel_initializer, self.kind,
                                               "kernel_initializer")
        self.bias_initializer = _initializer(bias_initializer, self.kind, "bias_initializer")
        self.kernel_regularizer = _regularizer(kernel_regularizer, self.kind,
                                               "kernel_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, self.kind, "bias_regularizer")

    def _analyze(self, s):
        """(kernel shape, bias shape or None, output shape without the batch),
        by Keras's rules, for per-sample input shape s."""
        ins, ws, outs, side = self._specs
        input_shape = (None,) + tuple(s)
        elided = len(input_shape) - len(ins)
        if elided < 0 or (side is None and elided):
            raise ValueError(f"[EinsumDense] the equation {self.equation!r} needs inputs of "
                             f"rank {len(ins)}{' or more' if side else ''}, got shape "
                             f"{input_shape}")
        out = [None] + list(self.partial_output_shape)
        if side == "left":
            out[1:1] = list(input_shape[1:elided])
            in_map = {d: i + elided for i, d in enumerate(ins)}
            out_map = {d: i + elided for i, d in enumerate(outs)}
        else:
            out += list(input_shape[len(input_shape) - elided:]) if elided else []
            in_map = {d: i for i, d in enumerate(ins)}
            out_map = {d: i for i, d in enumerate(outs)}
        if len(out) != len(outs) + elided:
            raise ValueError(f"[EinsumDense] output_shape {self.partial_output_shape} does not "
                             f"fit the output spec {outs!r} of {self.equation!r}")
        for d in ins:
            if d in out_map:
                j, size = out_map[d], input_shape[in_map[d]]
                if out[j] is not None and size is not None and out[j] != size:
                    raise ValueError(f"[EinsumDense] the input and output shapes differ at the "
                                     f"shared dimension {d!r}: {size} and {out[j]}")
                out[j] = size if out[j] is None else out[j]
        for d in outs:
            if d not in ins and d not in ws:
                raise ValueError(f"[EinsumDense] output dimension {d!r} is in neither the input "
                                 f"spec {ins!r} nor the weight spec {ws!r}")
        kernel = []
        for d in ws:
            if d in out_map:
                kernel.append(out[out_map[d]])
            elif d in in_map:
                kernel.append(input_shape[in_map[d]])
            else:
                raise ValueError(f"[EinsumDense] weight dimension {d!r} is in neither the input "
                                 f"spec {ins!r} nor the output spec {outs!r}")
        if any(k is None for k in kernel) or any(o is None for o in out[1:]):
            raise ValueError(f"[EinsumDense] output_shape {self.partial_output_shape} leaves "
                             f"sizes of {self.equation!r} unknown (kernel {kernel}, output "
                             f"{out})")
        bias = None
        if self.bias_axes is not None:
            first = min(outs.find(c) for c in self.bias_axes)
            lead = elided if side == "left" else 0
            bias = [out[i + lead] if c in self.bias_axes else 1
                    for i, c in enumerate(outs) if i >= first]
            if side != "left":
                bias += [1] * elided
        return tuple(kernel), None if bias is None else tuple(bias), tuple(out[1:])

    def compute_output_shape(self, s):
        kernel, bias, out = self._analyze(s)
        # Keras's fans: the kernel's axes named in the output spec are its fan_out
        _, ws, outs, _ = self._specs
        out_axes = [i for i, d in enumerate(ws) if d in outs]
        in_axes = [i for i, d in enumerate(ws) if d not in outs]
        init = initializers._with_fan_axes(self.kernel_initializer, in_axes, out_axes)
        self.params = [Param("kernel", kernel, init, *_fans(kernel),
                             regularizer=self.kernel_regularizer)]
        if bias is not None:
            self.params.append(Param("bias", bias, self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return out

    def _explicit_equation(self) -> str:
        """The equation with the ellipsis written as letters (tessera's einsum)."""
        ins, ws, outs, side = self._specs
        elided = len(self._in_shape) + 1 - len(ins)
        if not side or not elided:
            return f"{ins},{ws}->{outs}"
        free = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                if c not in ins + ws + outs][:elided]
        e = "".join(free)
        return f"{e}{ins},{ws}->{e}{outs}" if side == "left" else f"{ins}{e},{ws}->{outs}{e}"

    def forward(self, x, p, ctx):
        y = f"einsum(\"{self._explicit_equation()}\", {x}, {p['kernel']})"
        if self.bias_axes is not None:
            y = f"({y} + {p['bias']})"
        return _apply(self.activation, y, ctx, self._out_shape)
