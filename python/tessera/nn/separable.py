"""Depthwise-separable convolutions, like keras.layers.SeparableConv1D/2D:
each input channel convolved with its own depth_multiplier filters
(depthwise_kernel (k..., in_channels, depth_multiplier)), then a 1x1
convolution mixing them (pointwise_kernel (1..., in_channels *
depth_multiplier, filters)), a bias and an activation."""

from __future__ import annotations

from .data_format import ChannelsFirst
from .layers import (Layer, Param, _activation, _apply, _conv_length, _data_format, _fans,
                     _initializer, _ints, _list, _padding, _positive, _regularizer)

__all__ = ["SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D",
           "SeparableConvolution2D"]


class _SeparableConv(Layer):
    """The channels-last layer (ChannelsFirst transposes around it)."""

    rank = 2

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        k = self.kind
        self.filters = _positive(filters, "filters", k)
        self.kernel_size = _ints(kernel_size, self.rank, "kernel_size", k)
        self.strides = _ints(strides, self.rank, "strides", k)
        self.dilation = _ints(dilation_rate, self.rank, "dilation_rate", k)
        if max(self.strides) > 1 and max(self.dilation) > 1:
            raise ValueError(f"[{k}] strides {self.strides} > 1 with dilation_rate "
                             f"{self.dilation} > 1 is not allowed (Keras's rule)")
        self.padding = _padding(padding.lower() if isinstance(padding, str) else padding, k)
        self.data_format = _data_format(data_format, k)
        self.depth_multiplier = _positive(depth_multiplier, "depth_multiplier", k)
        self.activation = _activation(activation, k)
        self.use_bias = bool(use_bias)
        self.depthwise_initializer = _initializer(depthwise_initializer, k,
                                                  "depthwise_initializer")
        self.pointwise_initializer = _initializer(pointwise_initializer, k,
                                                  "pointwise_initializer")
        self.bias_initializer = _initializer(bias_initializer, k, "bias_initializer")
        self.depthwise_regularizer = _regularizer(depthwise_regularizer, k,
                                                  "depthwise_regularizer")
        self.pointwise_regularizer = _regularizer(pointwise_regularizer, k,
                                                  "pointwise_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, k, "bias_regularizer")

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        c, m = s[-1], self.depth_multiplier
        spatial = tuple(_conv_length(n, k, st, d, self.padding) for n, k, st, d in
                        zip(s[:-1], self.kernel_size, self.strides, self.dilation))
        if any(n is not None and n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] kernel {self.kernel_size} with dilation "
                             f"{self.dilation} does not fit the input {s} with padding "
                             f"'{self.padding}'")
        dw = self.kernel_size + (c, m)
        pw = (1,) * self.rank + (c * m, self.filters)
        self.params = [Param("depthwise_kernel", dw, self.depthwise_initializer, *_fans(dw),
                             regularizer=self.depthwise_regularizer),
                       Param("pointwise_kernel", pw, self.pointwise_initializer, *_fans(pw),
                             regularizer=self.pointwise_regularizer)]
        if self.use_bias:
            self.params.append(Param("bias", (self.filters,), self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return spatial + (self.filters,)

    def forward(self, x, p, ctx):
        c = self._in_shape[-1]
        m = self.depth_multiplier
        kernel = f"reshape({p['depthwise_kernel']}, {_list(self.kernel_size + (1, c * m))})"
        if self.rank == 1:
            opts = (f"stride={self.strides[0]}, padding=\"{self.padding}\", "
                    f"dilation={self.dilation[0]}")
        else:
            opts = (f"strides={_list(self.strides)}, padding=\"{self.padding}\", "
                    f"dilation={_list(self.dilation)}")
        y = f"conv{self.rank}d({x}, {kernel}, {opts}, groups={c})"
        y = f"({y} @ reshape({p['pointwise_kernel']}, [{c * m}, {self.filters}]))"
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        return _apply(self.activation, y, ctx, self._out_shape)


class SeparableConv1D(ChannelsFirst, _SeparableConv):
    """Depthwise then pointwise 1-d convolution, like keras.layers.SeparableConv1D."""

    kind, rank = "SeparableConv1D", 1


class SeparableConv2D(ChannelsFirst, _SeparableConv):
    """Depthwise then pointwise 2-d convolution, like keras.layers.SeparableConv2D."""

    kind, rank = "SeparableConv2D", 2


SeparableConvolution1D, SeparableConvolution2D = SeparableConv1D, SeparableConv2D
