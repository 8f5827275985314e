"""Depthwise-separable convolutions, like keras.layers.SeparableConv1D/2D:
each input channel convolved with its own depth_multiplier filters
(depthwise_kernel (k..., in_channels, depth_multiplier)), then a 1x1
convolution mixing them (pointwise_kernel (1..., in_channels *
depth_multiplier, filters)), a bias and an activation."""

from __future__ import annotations

from ..data_format import ChannelsFirst
from .base import Param, _apply, _fans, _initializer, _positive, _regularizer
from .conv import _DepthwiseConv

__all__ = ["SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D",
           "SeparableConvolution2D"]


class _SeparableConv(_DepthwiseConv):
    """The channels-last layer (ChannelsFirst transposes around it): the
    depthwise convolution of _DepthwiseConv, then the pointwise one."""

    constraint_arguments = {"depthwise_constraint": "depthwise_kernel",
                            "pointwise_constraint": "pointwise_kernel",
                            "bias_constraint": "bias"}

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, dilation_rate,
                         activation, use_bias, depthwise_initializer, bias_initializer,
                         depthwise_regularizer, bias_regularizer, data_format, name,
                         input_shape, **kwargs)
        k = self.kind
        if max(self.strides) > 1 and max(self.dilation) > 1:
            raise ValueError(f"[{k}] strides {self.strides} > 1 with dilation_rate "
                             f"{self.dilation} > 1 is not allowed (Keras's rule)")
        self.filters = _positive(filters, "filters", k)
        self.pointwise_initializer = _initializer(pointwise_initializer, k,
                                                  "pointwise_initializer")
        self.pointwise_regularizer = _regularizer(pointwise_regularizer, k,
                                                  "pointwise_regularizer")

    def compute_output_shape(self, s):
        spatial = self._depthwise_spatial(s)
        c, m = s[-1], self.depth_multiplier
        pw = (1,) * self.rank + (c * m, self.filters)
        self.params = [self._depthwise_param("depthwise_kernel", c),
                       Param("pointwise_kernel", pw, self.pointwise_initializer, *_fans(pw),
                             regularizer=self.pointwise_regularizer)]
        if self.use_bias:
            self.params.append(Param("bias", (self.filters,), self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return spatial + (self.filters,)

    def forward(self, x, p, ctx):
        c = self._in_shape[-1] * self.depth_multiplier
        y = self._depthwise(x, p["depthwise_kernel"])
        y = f"({y} @ reshape({p['pointwise_kernel']}, [{c}, {self.filters}]))"
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
