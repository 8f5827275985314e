"""Tensor-parallel attention, embeddings and convolutions (Megatron's splits).

* ``ParallelMultiHeadAttention``: the heads split over a tensor group (the
  first ``num_heads % t`` members one head more). The query, key and value
  projections are column-parallel (each member projects to its heads; the
  inputs enter through ``tp_copy``, one per distinct input), the output
  projection row-parallel (one ``tp_reduce``), its bias added once, after the
  sum: one all-reduce forward and one backward per attention block.
* ``VocabParallelEmbedding``: the rows of the table split by vocabulary;
  each member looks up the ids in its range, gives zeros for the others, and
  ``tp_reduce`` sums (one all-reduce forward, none backward: ids have no
  gradient).
* ``ColumnParallelConv1D``/``2D``/``3D``: the filters (output
  channels) split; ``RowParallelConv1D``/``2D``/``3D``: the input
  channels split (the output of a column-parallel convolution), the partial
  convolutions summed by ``tp_reduce``, the bias added once.

As for the Dense pair (tessera.nn.parallel), every split weight starts as
this member's slice of the one-locality draw, bit for bit; get_weights and
model.save give whole weights; ``from_layer`` converts an unsplit layer.
"""

from __future__ import annotations

import numpy as np

from .. import distributed
from .layers import Conv1D, Conv2D, Conv3D, Embedding, MultiHeadAttention
from .layers.base import _apply
from .layers.keras_config import given_arguments
from .parallel import _MIXING, _SplitLayer

__all__ = ["ParallelMultiHeadAttention", "VocabParallelEmbedding", "ColumnParallelConv1D",
           "ColumnParallelConv2D", "ColumnParallelConv3D", "RowParallelConv1D",
           "RowParallelConv2D", "RowParallelConv3D"]


def _span(extents, k):
    lo = sum(extents[:k])
    return lo, lo + extents[k]


class _FromLayer:
    """``from_layer(layer, group)``: this kind of split layer from the unsplit
    one (`_unsplit`): the same arguments and name and, when the layer holds
    weights, this member's slices of them."""

    _unsplit = None

    @classmethod
    def from_layer(cls, layer, group, **kwargs):
        base = cls._unsplit
        if not isinstance(layer, base) or isinstance(layer, _SplitLayer):
            raise TypeError(f"[{cls.kind}.from_layer] expects a tessera.nn.{base.kind}, got "
                            f"{type(layer).__name__}")
        config = given_arguments(layer)  # (the arguments given, not Keras's every default)
        for k, v in config.items():
            if k.endswith("_regularizer") and v is not None:
                raise ValueError(f"[{cls.kind}.from_layer] {base.kind} {layer.name!r} has a "
                                 f"{k}, which a tensor-parallel layer does not support")
        config = {k: v for k, v in config.items() if not k.endswith("_regularizer")}
        config.update(kwargs)
        config["group"] = group
        new = cls(**config)
        if layer._in_shape is not None:
            if hasattr(layer, "_flags"):
                new._flags = dict(layer._flags)
            shape = new._local_input_shape(layer._in_shape)
            new._in_shape = shape
            new._out_shape = new.compute_output_shape(shape)
            new._take_values(layer)
        return new

    def _local_input_shape(self, shape):
        """This member's input shape when the unsplit layer's was `shape`."""
        return shape


class ParallelMultiHeadAttention(_FromLayer, _SplitLayer, MultiHeadAttention):
    """MultiHeadAttention with its heads split over a tensor group: member k
    holds heads [lo_k, hi_k) of the query/key/value kernels (dim, heads,
    size) and biases (heads, size), and the same rows of the output kernel
    (heads, value_dim, dim); the output bias is whole and added once. Inputs
    and output are replicated (the same on every member). Attention dropout
    draws the whole layer's mask and keeps this member's heads, so the masks
    are those of the one-locality layer. return_attention_scores gives this
    member's heads' scores."""

    kind = "ParallelMultiHeadAttention"
    _unsplit = MultiHeadAttention
    _split_axis = {"query_kernel": 1, "key_kernel": 1, "value_kernel": 1, "query_bias": 0,
                   "key_bias": 0, "value_bias": 0, "output_kernel": 0}

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, attention_axes=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", group=None, name=None, input_shape=None, **kwargs):
        self._refuse_regularizers(kwargs, ("kernel_regularizer", "bias_regularizer"))
        super().__init__(num_heads, key_dim, value_dim, dropout, use_bias, output_shape,
                         attention_axes, kernel_initializer, bias_initializer, name=name,
                         input_shape=input_shape, **kwargs)
        self._init_group(group)
        self.extents = self._split_count(self.num_heads, "num_heads")
        self._span = _span(self.extents, self.tensor_rank)

    def _param(self, name, shape, init, regularizer):
        return self._sliced(name, shape, self._split_axis.get(name),
                            self._fan_axes(name, shape, init))

    def _heads_here(self) -> int:
        return self.extents[self.tensor_rank]

    def _enter(self, inputs, ctx):
        if self.group is None:
            return inputs
        copies: dict = {}
        for x in inputs:  # self-attention: one tp_copy (one all-reduce backward)
            if x not in copies:
                copies[x] = ctx.define("tp_in", self._through("tp_copy", x))
        return [copies[x] for x in inputs]

    def _leave(self, out, ctx):
        return self._through("tp_reduce", out)

    def _dropout(self, probs, ctx, tq, tv):
        if self.group is None:
            return super()._dropout(probs, ctx, tq, tv)
        lo, hi = self._span
        seed = f"{ctx.seed} * {ctx.seed_stride} + {ctx.index}"
        whole = (f"dropout(ones(list(shape({probs})[0], {self.num_heads}, {tq}, {tv}), "
                 f"dtype=dtype_name({probs})), {self.dropout!r}, {seed}, {ctx.training})")
        return ctx.define("p", f"{probs} * take({whole}, arange({lo}, {hi}), axis=1)")


class VocabParallelEmbedding(_FromLayer, _SplitLayer, Embedding):
    """Embedding whose table's rows (the vocabulary) are split over a tensor
    group: member k holds rows [lo_k, hi_k) (the first input_dim % t members
    one more), looks up the ids in its range, gives zeros for the others, and
    the sum over the group (tp_reduce) is the lookup."""

    kind = "VocabParallelEmbedding"
    _unsplit = Embedding
    _split_axis = {"embeddings": 0}

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", group=None,
                 name=None, input_shape=None, **kwargs):
        self._refuse_regularizers(kwargs, ("embeddings_regularizer",))
        super().__init__(input_dim, output_dim, embeddings_initializer, name=name,
                         input_shape=input_shape, **kwargs)
        self._init_group(group)
        self.extents = self._split_count(self.input_dim, "input_dim (the vocabulary)")
        self._span = _span(self.extents, self.tensor_rank)

    def compute_output_shape(self, s):
        self.params = [self._sliced("embeddings", (self.input_dim, self.output_dim), 0,
                                    self.embeddings_initializer, fan_in=self.input_dim,
                                    fan_out=self.output_dim)]
        return tuple(s) + (self.output_dim,)

    def forward(self, x, p, ctx):
        if self.group is None:
            return super().forward(x, p, ctx)
        lo, hi = self._span
        v = self.input_dim
        ids = ctx.define("ids", f"astype({x}, \"int64\")")
        # As take on the whole table: ids in [-v, 0) count from the end.
        whole = ctx.define("ids", f"where({ids} < 0, {ids} + {v}, {ids})")
        here = ctx.define("here", f"logical_and({whole} >= {lo}, {whole} < {hi})")
        # Ids outside the whole vocabulary stay out of range: take's error
        # names them, as the plain Embedding's does.
        valid = f"logical_and({whole} >= 0, {whole} < {v})"
        index = f"where({here}, {whole} - {lo}, where({valid}, 0, {ids}))"
        rows = (f"take({p['embeddings']}, {index}, axis=0) * "
                f"expand_dims(astype({here}, dtype_name({p['embeddings']})), -1)")
        return self._through("tp_reduce", rows)


class _SplitConv(_FromLayer, _SplitLayer):
    """What the two split convolutions share: the checks and the plain
    convolution's construction."""

    def _init_conv(self, filters, kernel_size, strides, padding, dilation_rate, activation,
                   use_bias, kernel_initializer, bias_initializer, group, name, input_shape,
                   kwargs):
        self._refuse_regularizers(kwargs, ("kernel_regularizer", "bias_regularizer"))
        if kwargs.get("groups", 1) != 1:
            raise ValueError(f"[{self.kind}] groups={kwargs['groups']!r} cannot be split over a "
                             "tensor group (grouped convolutions are not supported here; "
                             "use groups=1)")
        if kwargs.get("data_format") not in (None, "channels_last"):
            raise ValueError(f"[{self.kind}] data_format={kwargs['data_format']!r} is not "
                             "supported by the split convolutions (channels_last only)")
        super().__init__(filters, kernel_size, strides, padding, dilation_rate, activation,
                         use_bias, kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer, name=name, input_shape=input_shape,
                         **kwargs)
        self._init_group(group)


class _ColumnConv(_SplitConv):
    """A convolution whose filters (output channels) are split over a tensor
    group: member k holds filters [lo_k, hi_k) of the kernel (..., in,
    filters) and of the bias; the input (replicated) enters through tp_copy
    and the output is this member's channels (feed it to a RowParallelConv)."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", dilation_rate=1,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", group=None, name=None, input_shape=None, **kwargs):
        self._init_conv(filters, kernel_size, strides, padding, dilation_rate, activation,
                        use_bias, kernel_initializer, bias_initializer, group, name, input_shape,
                        kwargs)
        if self.activation in _MIXING and self.tensor_size > 1:
            raise ValueError(f"[{self.kind}] activation {self.activation!r} needs every output "
                             f"channel, but each member holds a slice (layer {self.name!r})")
        self.extents = self._split_count(self.filters, "filters")
        self._span = _span(self.extents, self.tensor_rank)

    def compute_output_shape(self, s):
        out = super().compute_output_shape(s)  # checks s, declares the whole weights
        whole = {q.name: q for q in self.params}
        self.params = [self._sliced(q.name, q.shape, self._split_axis[q.name], q.init,
                                    fan_in=q.fan_in, fan_out=q.fan_out) for q in whole.values()]
        lo, hi = self._span
        return out[:-1] + (hi - lo,)

    def forward(self, x, p, ctx):
        return super().forward(self._through("tp_copy", x), p, ctx)


class _RowConv(_SplitConv):
    """A convolution whose input channels are split over a tensor group (its
    input is a ColumnParallelConv's output, this member's channels): member k
    holds input channels [lo_k, hi_k) of the kernel (..., in, filters); the
    partial convolutions are summed by tp_reduce (one all-reduce) and the
    whole bias is added once, after the sum. The channels' extents are
    learned from the members when the layer is built (a small all-gather)."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", dilation_rate=1,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", group=None, name=None, input_shape=None, **kwargs):
        self._init_conv(filters, kernel_size, strides, padding, dilation_rate, activation,
                        use_bias, kernel_initializer, bias_initializer, group, name, input_shape,
                        kwargs)
        self.extents = None

    def _local_input_shape(self, shape):
        # from_layer: the unsplit layer's input is whole; this member's slice.
        extents = self._split_count(int(shape[-1]), "input channels")
        return tuple(shape[:-1]) + (extents[self.tensor_rank],)

    def _input_extents(self, local: int) -> list:
        if self.tensor_size == 1:
            return [local]
        every = np.asarray(distributed.all_gather(np.array([local], dtype=np.int64),
                                                  group=self.group))
        return [int(e) for e in every]

    def compute_output_shape(self, s):
        if self.extents is None or self.extents[self.tensor_rank] != s[-1]:
            self.extents = self._input_extents(int(s[-1]))
            self._span = _span(self.extents, self.tensor_rank)
        out = super().compute_output_shape(tuple(s[:-1]) + (sum(self.extents),))
        axis = self.rank  # the kernel's input-channel axis
        self.params = [self._sliced(q.name, q.shape, axis if q.name == "kernel" else None,
                                    q.init, fan_in=q.fan_in, fan_out=q.fan_out)
                       for q in self.params]
        return out

    def forward(self, x, p, ctx):
        y = self._through("tp_reduce", self._conv(x, p["kernel"], ctx))
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        return _apply(self.activation, y, ctx, self._out_shape)


class ColumnParallelConv1D(_ColumnConv, Conv1D):
    """Conv1D with its filters split over a tensor group (see _ColumnConv)."""

    kind = "ColumnParallelConv1D"
    _unsplit = Conv1D
    _split_axis = {"kernel": 2, "bias": 0}


class ColumnParallelConv2D(_ColumnConv, Conv2D):
    """Conv2D with its filters split over a tensor group (see _ColumnConv)."""

    kind = "ColumnParallelConv2D"
    _unsplit = Conv2D
    _split_axis = {"kernel": 3, "bias": 0}


class RowParallelConv1D(_RowConv, Conv1D):
    """Conv1D with its input channels split over a tensor group (see _RowConv)."""

    kind = "RowParallelConv1D"
    _unsplit = Conv1D
    _split_axis = {"kernel": 1}


class RowParallelConv2D(_RowConv, Conv2D):
    """Conv2D with its input channels split over a tensor group (see _RowConv)."""

    kind = "RowParallelConv2D"
    _unsplit = Conv2D
    _split_axis = {"kernel": 2}


class ColumnParallelConv3D(_ColumnConv, Conv3D):
    """Conv3D with its filters split over a tensor group (see _ColumnConv)."""

    kind = "ColumnParallelConv3D"
    _unsplit = Conv3D
    _split_axis = {"kernel": 4, "bias": 0}


class RowParallelConv3D(_RowConv, Conv3D):
    """Conv3D with its input channels split over a tensor group (see _RowConv)."""

    kind = "RowParallelConv3D"
    _unsplit = Conv3D
    _split_axis = {"kernel": 3}
