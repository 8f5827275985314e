"""Convolution layers: Conv1D/2D/3D, their transposes and DepthwiseConv1D/2D
(SeparableConv in separable.py builds on the depthwise ones)."""

from __future__ import annotations

import math

from .. import activations
from .. import ops as kops
from ..data_format import ChannelsFirst
from ..ops.nn import transpose_geometry
from .base import (Layer, Param, _activation, _apply, _conv_length, _data_format, _fans,
                   _initializer, _ints, _list, _padding, _positive, _regularizer)
__all__ = ["Conv1D", "Conv1DTranspose", "Conv2D", "Conv2DTranspose", "Conv3D",
           "Conv3DTranspose", "DepthwiseConv1D", "DepthwiseConv2D", "Convolution1D",
           "Convolution2D", "Convolution3D", "Convolution1DTranspose", "Convolution2DTranspose",
           "Convolution3DTranspose"]

# The per-sample axes of a channels-last input of 1, 2 or 3 spatial dimensions.
_AXES = {1: "steps, channels", 2: "height, width, channels",
         3: "depth, height, width, channels"}


class _Conv(Layer):
    rank = 1
    constraint_arguments = {"kernel_constraint": "kernel", "bias_constraint": "bias"}
    transpose = False

    def __init__(self, filters, kernel_size, strides=1, padding="valid", dilation_rate=1,
                 activation=None, use_bias=True, groups=1, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 data_format=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        k = self.kind
        self.data_format = _data_format(data_format, k)
        self.filters = _positive(filters, "filters", k)
        self.kernel_size = _ints(kernel_size, self.rank, "kernel_size", k)
        self.strides = _ints(strides, self.rank, "strides", k)
        self.dilation = _ints(dilation_rate, self.rank, "dilation_rate", k)
        allowed = ("valid", "same", "causal") if self.rank == 1 and not self.transpose \
            else ("valid", "same")
        # Keras takes any case ("VALID", as TensorFlow spells it) and keeps it lower-cased
        self.padding = _padding(padding.lower() if isinstance(padding, str) else padding, k,
                                allowed)
        self.groups = _positive(groups, "groups", k)
        if self.filters % self.groups:
            raise ValueError(f"[{k}] filters ({self.filters}) must be divisible by groups "
                             f"({self.groups})")
        self.activation = _activation(activation, k)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _initializer(kernel_initializer, k, "kernel_initializer")
        self.bias_initializer = _initializer(bias_initializer, k, "bias_initializer")
        self.kernel_regularizer = _regularizer(kernel_regularizer, k, "kernel_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, k, "bias_regularizer")

    def get_config(self) -> dict:
        # Keras's config holds the window's sizes as tuples, given or not, and the padding
        # lower-cased (convmixer: layer.get_config()["kernel_size"] == (5, 5))
        config = super().get_config()
        config.update(kernel_size=self.kernel_size, strides=self.strides,
                      dilation_rate=self.dilation, padding=self.padding)
        return config

    def _spatial(self, s):
        return tuple(_conv_length(n, k, st, d, self.padding) for n, k, st, d in
                     zip(s[:-1], self.kernel_size, self.strides, self.dilation))

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, _AXES[self.rank])
        cin = s[-1]
        if cin % self.groups:
            raise ValueError(f"[{self.kind}] the input's channels ({cin}) must be divisible by "
                             f"groups ({self.groups})")
        spatial = self._spatial(s)
        if any(n is not None and n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] kernel {self.kernel_size} with dilation "
                             f"{self.dilation} does not fit the input {s} with padding "
                             f"'{self.padding}'")
        ks = math.prod(self.kernel_size)
        self.params = [Param("kernel", self._kernel_shape(cin), self.kernel_initializer,
                             ks * cin // self.groups, ks * self.filters,
                             regularizer=self.kernel_regularizer)]
        if self.use_bias:
            self.params.append(Param("bias", (self.filters,), self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return spatial + (self.filters,)

    def _kernel_shape(self, cin):
        return self.kernel_size + (cin // self.groups, self.filters)

    def _options(self) -> str:
        g = f", groups={self.groups}" if self.groups != 1 else ""
        if self.rank == 1:
            return (f"stride={self.strides[0]}, padding=\"{self.padding}\", "
                    f"dilation={self.dilation[0]}{g}")
        return (f"strides={_list(self.strides)}, padding=\"{self.padding}\", "
                f"dilation={_list(self.dilation)}{g}")

    def _conv(self, x, kernel, ctx) -> str:
        return f"conv{self.rank}d({x}, {kernel}, {self._options()})"

    def forward(self, x, p, ctx):
        if self.use_bias and type(self)._conv is _Conv._conv and \
                self.activation in (None, "relu"):
            # The bias (and relu) applied to each chunk of the convolution's
            # output while it is in cache: one pass and one array, not three.
            op = f"conv{self.rank}d_bias" + ("_relu" if self.activation == "relu" else "")
            return f"{op}({x}, {p['kernel']}, {p['bias']}, {self._options()})"
        conv = self._conv(x, p["kernel"], ctx)
        if self.use_bias:
            conv = f"bias_add({conv}, {p['bias']})"
        return _apply(self.activation, conv, ctx, self._out_shape)


class _ConvolutionOp:
    """Keras's `convolution_op(inputs, kernel)` of Conv1D/Conv2D: the convolution
    alone (no bias, no activation), written with ops.conv. A user's subclass may
    call it from its own call, or override Conv2D's: then the layer computes Keras's
    call around it (`_call_with_convolution_op`). Keras 3's Conv1D writes its call
    without it (for causal padding), so overriding Conv1D's changes nothing there:
    nor here."""

    calls_convolution_op = True

    def convolution_op(self, inputs, kernel):
        return kops.conv(inputs, kernel, strides=list(self.strides), padding=self.padding,
                         dilation_rate=list(self.dilation), data_format=self.data_format)

    def __init_subclass__(cls, **kwargs):
        # Before Layer's: the class then counts as a user's layer with a call.
        if not cls.__module__.startswith("tessera.") and cls.calls_convolution_op and \
                cls.convolution_op is not _ConvolutionOp.convolution_op and \
                not any("call" in c.__dict__ for c in cls.__mro__
                        if not c.__module__.startswith("tessera.")):
            cls.call = _ConvolutionOp._call_with_convolution_op
        super().__init_subclass__(**kwargs)

    def _call_with_convolution_op(self, inputs):
        """Keras's Conv call: the subclass's convolution_op, the bias, the activation."""
        outputs = self.convolution_op(inputs, self.kernel)
        if self.use_bias:
            if self.data_format == "channels_last":
                bias_shape = (1,) * (self.rank + 1) + (self.filters,)
            else:
                bias_shape = (1, self.filters) + (1,) * self.rank
            outputs = kops.add(outputs, kops.reshape(self.bias, bias_shape))
        if self.activation is not None:
            return activations.get(self.activation)(outputs)
        return outputs


class Conv1D(_ConvolutionOp, ChannelsFirst, _Conv):
    """1-d convolution over (batch, steps, channels), like keras.layers.Conv1D
    (groups: the channels split into groups convolved separately)."""

    kind = "Conv1D"
    rank = 1
    calls_convolution_op = False  # as Keras's Conv1D.call


class Conv2D(_ConvolutionOp, ChannelsFirst, _Conv):
    """2-d convolution over (batch, height, width, channels), like keras.layers.Conv2D."""

    kind = "Conv2D"
    rank = 2


class _ConvTranspose(_Conv):
    """Transposed convolution (the gradient of a convolution with respect to
    its input), like keras.layers.Conv2DTranspose: kernel (k..., filters,
    in_channels); output length n * stride + max(k - stride, 0) ('valid') or
    n * stride ('same') with k = dilation * (k - 1) + 1, or Keras's lengths
    for output_padding (transpose_geometry)."""

    transpose = True

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 dilation_rate=1, activation=None, use_bias=True, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, dilation_rate, activation,
                         use_bias, **kwargs)
        k = self.kind
        if max(self.strides) > 1 and max(self.dilation) > 1:
            raise ValueError(f"[{k}] strides > 1 cannot go with dilation_rate > 1 (as Keras): "
                             f"got strides={self.strides}, dilation_rate={self.dilation}")
        self.output_padding = None
        if output_padding is not None:
            pads = (output_padding,) * self.rank if isinstance(output_padding, int) \
                else tuple(output_padding) if isinstance(output_padding, (tuple, list)) else ()
            if len(pads) != self.rank or not all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in pads):
                raise ValueError(f"[{k}] output_padding must be None, a non-negative int or "
                                 f"{self.rank} of them, got {output_padding!r}")
            for i, (op, st) in enumerate(zip(pads, self.strides)):
                if op >= st:
                    raise ValueError(f"[{k}] output_padding must be less than strides on every "
                                     f"axis: axis {i} has output_padding {op} and strides {st} "
                                     f"(output_padding={pads}, strides={self.strides})")
            self.output_padding = pads

    def _geometry(self, s):
        pads = self.output_padding or (None,) * self.rank
        return [transpose_geometry(n, k, st, d, self.padding, op) for n, k, st, d, op in
                zip(s[:-1], self.kernel_size, self.strides, self.dilation, pads)]

    def _spatial(self, s):
        if any(n is None for n in s[:-1]):
            raise ValueError(f"[{self.kind}] needs the length of every spatial axis (the output "
                             f"shape is written into the program), got per-sample shape {s}")
        return tuple(g[0] for g in self._geometry(s))

    def _kernel_shape(self, cin):
        return self.kernel_size + (self.filters, cin)

    def _conv(self, x, kernel, ctx):
        xv = ctx.define("ct_in", x)
        geometry = self._geometry(self._in_shape)
        if self.output_padding is None:
            # Keras's lengths are those of the convolution's own padding.
            shape = f"list(shape({xv})[0], {', '.join(str(n) for n in self._out_shape)})"
            return f"conv{self.rank}d_grad_input({xv}, {kernel}, {shape}, {self._options()})"
        # The full transposed convolution ('valid'), then Keras's window of it.
        shape = f"list(shape({xv})[0], {', '.join(str(g[2]) for g in geometry)}, {self.filters})"
        options = self._options().replace(f'padding="{self.padding}"', 'padding="valid"')
        full = f"conv{self.rank}d_grad_input({xv}, {kernel}, {shape}, {options})"
        if all(crop == 0 and length == whole for length, crop, whole in geometry):
            return full
        index = ", ".join(["slice(nil, nil)"] + [f"slice({crop}, {crop + length})" for
                                                 length, crop, _ in geometry] +
                          ["slice(nil, nil)"])
        return f"getitem({full}, {index})"


class Conv1DTranspose(ChannelsFirst, _ConvTranspose):
    """1-d transposed convolution, like keras.layers.Conv1DTranspose."""

    kind = "Conv1DTranspose"
    rank = 1


class Conv2DTranspose(ChannelsFirst, _ConvTranspose):
    """2-d transposed convolution, like keras.layers.Conv2DTranspose."""

    kind = "Conv2DTranspose"
    rank = 2


class Conv3D(_ConvolutionOp, ChannelsFirst, _Conv):
    """3-d convolution over (batch, depth, height, width, channels), like
    keras.layers.Conv3D (kernel (kd, kh, kw, channels / groups, filters))."""

    kind = "Conv3D"
    rank = 3


class Conv3DTranspose(ChannelsFirst, _ConvTranspose):
    """3-d transposed convolution, like keras.layers.Conv3DTranspose (kernel
    (kd, kh, kw, filters, channels))."""

    kind = "Conv3DTranspose"
    rank = 3


class _DepthwiseConv(Layer):
    rank = 2
    constraint_arguments = {"depthwise_constraint": "kernel", "bias_constraint": "bias"}

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1,
                 dilation_rate=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, bias_regularizer=None, data_format=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        k = self.kind
        self.data_format = _data_format(data_format, k)
        self.kernel_size = _ints(kernel_size, self.rank, "kernel_size", k)
        self.strides = _ints(strides, self.rank, "strides", k)
        self.dilation = _ints(dilation_rate, self.rank, "dilation_rate", k)
        self.padding = _padding(padding.lower() if isinstance(padding, str) else padding, k)
        self.depth_multiplier = _positive(depth_multiplier, "depth_multiplier", k)
        self.activation = _activation(activation, k)
        self.use_bias = bool(use_bias)
        self.depthwise_initializer = _initializer(depthwise_initializer, k,
                                                  "depthwise_initializer")
        self.bias_initializer = _initializer(bias_initializer, k, "bias_initializer")
        self.depthwise_regularizer = _regularizer(depthwise_regularizer, k,
                                                  "depthwise_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, k, "bias_regularizer")

    def get_config(self) -> dict:
        # Keras's config holds the window's sizes as tuples, given or not, and the padding
        # lower-cased (convmixer: layer.get_config()["kernel_size"] == (5, 5))
        config = super().get_config()
        config.update(kernel_size=self.kernel_size, strides=self.strides,
                      dilation_rate=self.dilation, padding=self.padding)
        return config

    def _depthwise_spatial(self, s):
        """The output's spatial shape; refuses a kernel that does not fit."""
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1
                        else "height, width, channels")
        spatial = tuple(_conv_length(n, k, st, d, self.padding) for n, k, st, d in
                        zip(s[:-1], self.kernel_size, self.strides, self.dilation))
        if any(n is not None and n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] kernel {self.kernel_size} with dilation "
                             f"{self.dilation} does not fit the input {s} with padding "
                             f"'{self.padding}'")
        return spatial

    def _depthwise_param(self, name, c):
        """The depthwise kernel (k..., channels, depth_multiplier), Keras's fans."""
        shape = self.kernel_size + (c, self.depth_multiplier)
        return Param(name, shape, self.depthwise_initializer, *_fans(shape),
                     regularizer=self.depthwise_regularizer)

    def _depthwise(self, x, kernel):
        """Each channel of x convolved with its own depth_multiplier filters."""
        c = self._in_shape[-1]
        kernel = f"reshape({kernel}, {_list(self.kernel_size + (1, c * self.depth_multiplier))})"
        if self.rank == 1:
            opts = (f"stride={self.strides[0]}, padding=\"{self.padding}\", "
                    f"dilation={self.dilation[0]}")
        else:
            opts = (f"strides={_list(self.strides)}, padding=\"{self.padding}\", "
                    f"dilation={_list(self.dilation)}")
        return f"conv{self.rank}d({x}, {kernel}, {opts}, groups={c})"

    def compute_output_shape(self, s):
        spatial = self._depthwise_spatial(s)
        c, m = s[-1], self.depth_multiplier
        self.params = [self._depthwise_param("kernel", c)]
        if self.use_bias:
            self.params.append(Param("bias", (c * m,), self.bias_initializer,
                                     regularizer=self.bias_regularizer))
        return spatial + (c * m,)

    def forward(self, x, p, ctx):
        y = self._depthwise(x, p["kernel"])
        if self.use_bias:
            y = f"bias_add({y}, {p['bias']})"
        return _apply(self.activation, y, ctx, self._out_shape)


class DepthwiseConv1D(ChannelsFirst, _DepthwiseConv):
    """Each channel convolved with its own depth_multiplier filters, like
    keras.layers.DepthwiseConv1D (kernel (k, channels, depth_multiplier))."""

    kind = "DepthwiseConv1D"
    rank = 1


class DepthwiseConv2D(ChannelsFirst, _DepthwiseConv):
    """Each channel convolved with its own depth_multiplier filters, like
    keras.layers.DepthwiseConv2D (kernel (kh, kw, channels, depth_multiplier))."""

    kind = "DepthwiseConv2D"
    rank = 2


# Keras's long aliases: the same classes.
Convolution1D, Convolution2D, Convolution3D = Conv1D, Conv2D, Conv3D
Convolution1DTranspose, Convolution2DTranspose = Conv1DTranspose, Conv2DTranspose
Convolution3DTranspose = Conv3DTranspose
