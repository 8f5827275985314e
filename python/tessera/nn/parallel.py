"""Tensor-parallel layers (Megatron's column- and row-parallel Dense pair).

A pair ``ColumnParallelDense(h) -> activation -> RowParallelDense(out)`` splits
an MLP over the members of a tensor group (``mesh.group("tensor")``): member k
holds columns ``[lo_k, hi_k)`` of the first kernel (and of its bias) and the
same rows of the second kernel, so the hidden activations never travel. The
input enters through ``tp_copy`` (identity forward, gradient summed over the
group) and the output leaves through ``tp_reduce`` (one all-reduce forward,
identity backward): one all-reduce per pair forward and one backward.

Initial weights are the slices of the one-locality draw, bit for bit: each
member draws the whole kernel with the layer's initializer and the seed a plain
``Dense`` at the same place of the model would use, and keeps its slice (the
whole kernel exists for a moment on every member while the model is built).
``get_weights``, ``model.get_weights`` and ``model.save`` give the whole
(gathered) weights, so a model saved under t > 1 loads where the group has one
member (docs/parallelism.md, "Tensor parallelism").
"""

from __future__ import annotations

import numpy as np

from .. import distributed
from ..distributed import Group
from .layers import Dense, Param
from .layers.base import _apply
from .regularizers import L1L2, Regularizer

__all__ = ["ColumnParallelDense", "RowParallelDense"]
# Attention, embeddings, convolutions: parallel_layers.py; the vocabulary-split
# cross-entropy and accuracy: parallel_losses.py.

# Activations that mix the features: they need the whole output.
_MIXING = ("softmax", "log_softmax")


def split_extents(n: int, parts: int) -> list:
    """How n features are split over `parts` members: the first n % parts
    members have one more (as reduce_scatter and scatter split axis 0)."""
    base, extra = divmod(n, parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def _group_of(group, kind: str, name):
    """The layer's group: None (one member) or a tessera.distributed.Group."""
    if group is None or isinstance(group, Group):
        return group
    raise TypeError(f"[{kind}] argument 'group' must be a tessera.distributed.Group "
                    f"(mesh.group(\"tensor\")) or None, got {type(group).__name__} "
                    f"{group!r} (layer {name!r})")


class _SliceOf:
    """An initializer drawing the whole `full` shape with `init` and keeping
    [lo, hi) along `axis`: the slice equals the one-locality draw bit for bit."""

    def __init__(self, init, full, axis, lo, hi):
        self.init, self.full, self.axis, self.lo, self.hi = init, tuple(full), axis, lo, hi

    def generate(self, shape, dtype="float32", seed=None):
        whole = self.init.generate(self.full, dtype, seed)
        index = [slice(None)] * len(self.full)
        index[self.axis] = slice(self.lo, self.hi)
        part = np.ascontiguousarray(whole[tuple(index)])
        assert part.shape == tuple(shape), (part.shape, shape)
        return part


class SlicePenalty(Regularizer):
    """The penalty of a weight split over a tensor group, held as slices: an
    elementwise sum (L1L2) of this member's slice, summed over the group by
    tp_reduce (an all-reduce forward, the identity backward)."""

    def __init__(self, whole, group: int):
        self.whole, self.group = whole, group

    def expression(self, w: str) -> str:
        return f"tp_reduce(({self.whole.expression(w)}), group={self.group})"

    def get_config(self) -> dict:
        return self.whole.get_config()


class _SplitLayer:
    """What every tensor-parallel layer shares (a mixin before the layer's
    class): the group, this member's span [lo, hi) of the split axis of each
    split weight (`_split_axis`: parameter name -> axis of the whole weight),
    and whole weights in get_weights/set_weights/save."""

    _split_axis: dict = {}
    # a constraint's norms would span the group's slices: refused, not applied per slice
    constraint_arguments: dict = {}

    def _init_group(self, group):
        self.group = _group_of(group, self.kind, self.name)
        self._full_shapes: dict = {}
        self._span = None

    def _refuse_regularizers(self, kwargs, names):
        for k in names:
            if kwargs.get(k) is not None:
                raise ValueError(f"[{self.kind}] {k} is not supported on a tensor-parallel "
                                 "layer (a penalty of a slice is not the penalty of the "
                                 "weight); add it to the loss from the gathered weights")
            kwargs.pop(k, None)

    @property
    def tensor_size(self) -> int:
        return 1 if self.group is None else self.group.size

    @property
    def tensor_rank(self) -> int:
        return 0 if self.group is None else self.group.rank

    def _group_text(self) -> str:
        if self.group is None:
            return "None (one member)"
        return f"{self.group.axis} (ranks {', '.join(str(m) for m in self.group.members)})"

    def _through(self, op: str, x: str) -> str:
        """op(x) on the layer's group; x itself without a group (one member:
        the language's nil group would be every locality)."""
        return x if self.group is None else f"{op}({x}, group={int(self.group)})"

    def _split_count(self, n: int, what: str) -> list:
        """The extents of n `what` over the group, or the error naming the
        layer and the axis when a member would get none."""
        t = self.tensor_size
        if n < t:
            raise ValueError(f"[{self.kind}] {what} {n} cannot be split over the {t} members of "
                             f"group {self._group_text()}: each member needs at least one "
                             f"(layer {self.name!r})")
        return split_extents(n, t)

    def _sliced(self, pname: str, full, axis, init, **kwargs) -> Param:
        """A parameter holding this member's span of the whole `full` shape
        along `axis` (None: whole), drawn as the slice of the whole draw."""
        full = tuple(full)
        if axis is None:
            return Param(pname, full, init, **kwargs)
        lo, hi = self._span
        shape = list(full)
        shape[axis] = hi - lo
        self._full_shapes[pname] = full
        return Param(pname, tuple(shape), _SliceOf(init, full, axis, lo, hi), **kwargs)

    def get_config(self) -> dict:
        """The constructor's arguments without the group: a saved model loads
        with group=None (one member), or with a group given again in code."""
        config = super().get_config()
        config.pop("group", None)
        return config

    # ------------------------------------------------------------ whole weights
    def _gathered(self, pname: str, value):
        """The whole weight `pname` from this member's part (a collective on
        the group when it has several members; every member must call it)."""
        axis = self._split_axis.get(pname)
        if axis is None or self.tensor_size == 1:
            return np.array(value, copy=True)
        return np.asarray(distributed.all_gather(np.ascontiguousarray(value), axis=axis,
                                                 group=self.group))

    def _local_part(self, pname: str, value):
        """This member's part of `value` when it has the whole weight's shape
        (loading weights saved elsewhere); `value` itself otherwise."""
        value = np.asarray(value)
        axis = self._split_axis.get(pname)
        full = self._full_shapes.get(pname)
        if axis is None or full is None or self.tensor_size == 1 or value.shape != full:
            return value
        lo, hi = self._span
        index = [slice(None)] * value.ndim
        index[axis] = slice(lo, hi)
        return np.ascontiguousarray(value[tuple(index)])

    def get_weights(self) -> list:
        """The whole weights (gathered over the group), in declaration order."""
        return [self._gathered(q.name, self._values[q.name]) for q in self.params
                if q.name in self._values]

    def set_weights(self, weights):
        """Whole weights (as get_weights gives) or this member's parts."""
        weights = list(weights)
        if len(weights) == len(self.params):
            weights = [self._local_part(q.name, w) for q, w in zip(self.params, weights)]
        super().set_weights(weights)

    def _take_values(self, layer):
        """This member's parts of the weights `layer` (the unsplit layer
        from_layer converts) holds, when it holds any."""
        if layer._values:
            whole = layer.get_weights()
            self._values = {q.name: self._local_part(q.name, w).astype(w.dtype, copy=True)
                            for q, w in zip(self.params, whole)}


class _ParallelDense(_SplitLayer, Dense):
    """What both Dense layers share."""

    def __init__(self, units: int, activation=None, use_bias: bool = True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 group=None, name=None, input_shape=None, **kwargs):
        super().__init__(units, activation, use_bias, kernel_initializer, bias_initializer,
                         name=name, input_shape=input_shape, **kwargs)
        self._init_group(group)
        for what in ("kernel_regularizer", "bias_regularizer"):
            reg = getattr(self, what)
            if reg is not None and not isinstance(reg, L1L2):
                raise ValueError(f"[{self.kind}] {what} {type(reg).__name__} is not supported on "
                                 "a tensor-parallel layer (only L1, L2 and L1L2, sums over the "
                                 "weight's elements, are summed over the group's slices); add "
                                 f"it to the loss from the gathered weights (layer {self.name!r})")

    def _penalty(self, reg, split: bool):
        """The regularizer of a slice: a split weight's penalty is the sum of
        its members' (tp_reduce: summed forward, each slice's gradient its
        own); a replicated weight's is the whole weight's on every member."""
        if reg is None or not split or self.group is None or self.tensor_size == 1:
            return reg
        return SlicePenalty(reg, int(self.group))

    # ------------------------------------------------------------------ helpers
    def _params_for(self, fan_in: int, kernel_axis: int, bias_split: bool):
        """Declares the kernel (and bias) as slices of the whole (fan_in,
        units) kernel along kernel_axis, and of the (units,) bias if split."""
        lo, hi = self._span
        full = (fan_in, self.units)
        kshape = list(full)
        kshape[kernel_axis] = hi - lo
        self._full_shapes = {"kernel": full}
        self.params = [Param("kernel", tuple(kshape),
                             _SliceOf(self.kernel_initializer, full, kernel_axis, lo, hi),
                             fan_in, self.units,
                             regularizer=self._penalty(self.kernel_regularizer, True))]
        if self.use_bias:
            bias = _SliceOf(self.bias_initializer, (self.units,), 0, lo, hi) if bias_split \
                else self.bias_initializer
            self.params.append(Param("bias", (hi - lo,) if bias_split else (self.units,), bias,
                                     regularizer=self._penalty(self.bias_regularizer,
                                                               bias_split)))
            self._full_shapes["bias"] = (self.units,)

    @staticmethod
    def _span_of(extents: list, k: int):
        lo = sum(extents[:k])
        return lo, lo + extents[k]

    @classmethod
    def from_dense(cls, dense, group, **kwargs):
        """This kind of layer from a plain Dense: the same units, activation,
        initializers and name, and, when the Dense holds weights, this
        member's slices of them (as MLX's from_linear)."""
        if not isinstance(dense, Dense) or isinstance(dense, _ParallelDense):
            raise TypeError(f"[{cls.kind}.from_dense] expects a tessera.nn.Dense, got "
                            f"{type(dense).__name__}")
        layer = cls(dense.units, activation=dense.activation, use_bias=dense.use_bias,
                    kernel_initializer=dense.kernel_initializer,
                    bias_initializer=dense.bias_initializer,
                    kernel_regularizer=dense.kernel_regularizer,
                    bias_regularizer=dense.bias_regularizer, group=group,
                    name=kwargs.pop("name", dense.name), **kwargs)
        if dense._in_shape is not None:
            shape = tuple(dense._in_shape)
            if isinstance(layer, RowParallelDense) and layer.input_is_parallel:
                # The Dense's input is whole: this member takes its slice.
                layer.extents = split_extents(shape[-1], layer.tensor_size)
                layer._span = layer._span_of(layer.extents, layer.tensor_rank)
                shape = shape[:-1] + (layer.extents[layer.tensor_rank],)
            layer._in_shape = shape
            layer._out_shape = layer.compute_output_shape(shape)
        if dense._values:
            whole = dense.get_weights()
            layer._values = {q.name: layer._local_part(q.name, w).astype(w.dtype, copy=True)
                             for q, w in zip(layer.params, whole)}
        return layer

    # The name the other split layers use (tessera.nn.parallel_layers).
    from_layer = from_dense


class ColumnParallelDense(_ParallelDense):
    """Dense whose output features are split over a tensor group: member k
    holds columns [lo_k, hi_k) of the kernel and of the bias. The input
    (replicated on every member) enters through tp_copy. With
    ``gather_output=False`` (the default) the output is this member's slice of
    the features (feed it to a RowParallelDense); with True every member gets
    the whole output (one all-reduce of the output's size)."""

    kind = "ColumnParallelDense"
    _split_axis = {"kernel": 1, "bias": 0}

    def __init__(self, units: int, activation=None, use_bias: bool = True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 group=None, gather_output: bool = False, name=None, input_shape=None,
                 **kwargs):
        super().__init__(units, activation, use_bias, kernel_initializer, bias_initializer,
                         group=group, name=name, input_shape=input_shape, **kwargs)
        self.gather_output = bool(gather_output)
        t = self.tensor_size
        if self.units < t:
            raise ValueError(f"[{self.kind}] units {self.units} cannot be split over the {t} "
                             f"members of group {self._group_text()}: each member needs at "
                             f"least one (layer {self.name!r})")
        if not self.gather_output and self.activation in _MIXING and self.tensor_size > 1:
            raise ValueError(f"[{self.kind}] activation {self.activation!r} needs every output "
                             f"feature, but gather_output=False leaves each member a slice "
                             f"(layer {self.name!r}); pass gather_output=True")
        self.extents = split_extents(self.units, self.tensor_size)
        self._span = self._span_of(self.extents, self.tensor_rank)

    def compute_output_shape(self, s):
        if len(s) < 1:
            raise ValueError(f"[{self.kind}] expects inputs with a feature axis, got per-sample "
                             f"shape {s}")
        self._params_for(s[-1], 1, True)
        lo, hi = self._span
        return s[:-1] + ((self.units if self.gather_output else hi - lo),)

    def forward(self, x, p, ctx):
        y = f"({self._through('tp_copy', x)} @ {p['kernel']})"
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        if self.gather_output and self.tensor_size > 1:
            # Gathered as a sum of zero-padded slices (exact: x + 0 is x):
            # its gradient is then this member's slice of the cotangent, as a
            # replicated loss needs (all_gather's rule would sum t copies).
            lo, hi = self._span
            ndim = len(self._in_shape) + 1
            pads = ", ".join(["list(0, 0)"] * (ndim - 1) + [f"list({lo}, {self.units - hi})"])
            y = self._through("tp_reduce", f"pad({y}, list({pads}))")
        return self._activate(y, ctx)

    def _activate(self, y, ctx):
        return _apply(self.activation, y, ctx, self._out_shape)


class RowParallelDense(_ParallelDense):
    """Dense whose input features are split over a tensor group: member k
    holds rows [lo_k, hi_k) of the kernel and multiplies its slice of the
    input; the partial products are summed by tp_reduce (one all-reduce) and
    the bias (whole, the same on every member) is added once, after the sum.

    ``input_is_parallel=True`` (the default): the input is already this
    member's slice (a ColumnParallelDense's output); the slices' extents are
    learned from the members when the layer is built (one small all-gather on
    the group), so any split works. False: the input is whole and replicated,
    and the layer takes its own slice (the first in % t members one feature
    more; the input enters through tp_copy, so its gradient is summed over
    the group: one all-reduce more backward)."""

    kind = "RowParallelDense"
    _split_axis = {"kernel": 0}

    def __init__(self, units: int, activation=None, use_bias: bool = True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 group=None, input_is_parallel: bool = True, name=None, input_shape=None,
                 **kwargs):
        super().__init__(units, activation, use_bias, kernel_initializer, bias_initializer,
                         group=group, name=name, input_shape=input_shape, **kwargs)
        self.input_is_parallel = bool(input_is_parallel)
        self.extents = None
        self._span = None

    def _input_extents(self, local: int) -> list:
        t = self.tensor_size
        if not self.input_is_parallel:
            if local < t:
                raise ValueError(f"[{self.kind}] {local} input features cannot be split over the "
                                 f"{t} members of group {self._group_text()}: each member needs "
                                 f"at least one (layer {self.name!r})")
            return split_extents(local, t)
        if t == 1:
            return [local]
        every = np.asarray(distributed.all_gather(np.array([local], dtype=np.int64),
                                                  group=self.group))
        extents = [int(e) for e in every]
        if min(extents) < 1:
            raise ValueError(f"[{self.kind}] the members of group {self._group_text()} hold "
                             f"{extents} input features: each needs at least one "
                             f"(layer {self.name!r})")
        return extents

    def compute_output_shape(self, s):
        if len(s) < 1:
            raise ValueError(f"[{self.kind}] expects inputs with a feature axis, got per-sample "
                             f"shape {s}")
        if self.extents is None or (self.input_is_parallel and
                                    self.extents[self.tensor_rank] != s[-1]) or \
                (not self.input_is_parallel and sum(self.extents) != s[-1]):
            self.extents = self._input_extents(int(s[-1]))
            self._span = self._span_of(self.extents, self.tensor_rank)
        self._params_for(sum(self.extents), 0, False)
        return s[:-1] + (self.units,)

    def forward(self, x, p, ctx):
        if not self.input_is_parallel and self.tensor_size > 1:
            lo, hi = self._span
            # Through tp_copy: each member's slice gives a part of the
            # input's gradient (zeros elsewhere); the sum is the whole.
            x = f"take({self._through('tp_copy', x)}, arange({lo}, {hi}), axis=-1)"
        y = self._through("tp_reduce", f"{x} @ {p['kernel']}")
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        return _apply(self.activation, y, ctx, self._out_shape)
