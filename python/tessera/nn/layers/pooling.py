"""Pooling layers: MaxPooling1D/2D/3D, AveragePooling1D/2D/3D, their global
forms (with Keras's short aliases MaxPool2D, GlobalAvgPool1D, ...) and the
adaptive ones (AdaptiveAveragePooling1D/2D/3D, AdaptiveMaxPooling1D/2D/3D)."""

from __future__ import annotations

from ..data_format import ChannelsFirst
from .base import Layer, _conv_length, _data_format, _ints, _list, _padding, _pair, _positive
__all__ = ["AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D", "AdaptiveAveragePooling3D",
           "AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D",
           "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "AvgPool1D", "AvgPool2D",
           "AvgPool3D", "GlobalAveragePooling1D", "GlobalAveragePooling2D",
           "GlobalAveragePooling3D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D",
           "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalMaxPooling1D",
           "GlobalMaxPooling2D", "GlobalMaxPooling3D", "MaxPool1D", "MaxPool2D", "MaxPool3D",
           "MaxPooling1D", "MaxPooling2D", "MaxPooling3D"]

# The per-sample axes of a channels-last input of 1, 2 or 3 spatial dimensions.
_AXES = {1: "steps, channels", 2: "height, width, channels",
         3: "depth, height, width, channels"}


class _Pool(Layer):
    rank = 1
    op = "max"

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.data_format = _data_format(data_format, self.kind)
        if self.rank == 1:
            self.pool = (_positive(pool_size if isinstance(pool_size, int)
                                   else tuple(pool_size)[0], "pool_size", self.kind),)
            self.strides = self.pool if strides is None else (
                _positive(strides if isinstance(strides, int) else tuple(strides)[0],
                          "strides", self.kind),)
        elif self.rank == 2:
            self.pool = _pair(pool_size, "pool_size", self.kind)
            self.strides = self.pool if strides is None else _pair(strides, "strides", self.kind)
        else:
            self.pool = _ints(pool_size, self.rank, "pool_size", self.kind)
            self.strides = self.pool if strides is None else _ints(strides, self.rank, "strides",
                                                                   self.kind)
        self.padding = _padding(padding, self.kind)

    def get_config(self) -> dict:
        # Keras's config holds pool_size and strides as tuples, given or not
        config = super().get_config()
        config.update(pool_size=self.pool, strides=self.strides)
        return config

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, _AXES[self.rank])
        spatial = tuple(_conv_length(n, k, st, 1, self.padding)
                        for n, k, st in zip(s[:-1], self.pool, self.strides))
        if any(n is not None and n <= 0 for n in spatial):
            raise ValueError(f"[{self.kind}] pool {self.pool} does not fit the input {s}")
        return spatial + (s[-1],)

    def forward(self, x, p, ctx):
        fn = f"{self.op}_pool{self.rank}d"
        if self.rank == 1:
            return (f"{fn}({x}, pool_size={self.pool[0]}, strides={self.strides[0]}, "
                    f"padding=\"{self.padding}\")")
        return (f"{fn}({x}, pool_size={_list(self.pool)}, strides={_list(self.strides)}, "
                f"padding=\"{self.padding}\")")


class MaxPooling1D(ChannelsFirst, _Pool):
    """Max pooling over steps, like keras.layers.MaxPooling1D (MaxPool1D)."""

    kind, rank, op = "MaxPooling1D", 1, "max"


class AveragePooling1D(ChannelsFirst, _Pool):
    """Average pooling over steps, like keras.layers.AveragePooling1D (AvgPool1D)."""

    kind, rank, op = "AveragePooling1D", 1, "avg"


class MaxPooling2D(ChannelsFirst, _Pool):
    """Max pooling over height and width, like keras.layers.MaxPooling2D (MaxPool2D)."""

    kind, rank, op = "MaxPooling2D", 2, "max"


class AveragePooling2D(ChannelsFirst, _Pool):
    """Average pooling over height and width, like keras.layers.AveragePooling2D
    (AvgPool2D)."""

    kind, rank, op = "AveragePooling2D", 2, "avg"


class MaxPooling3D(ChannelsFirst, _Pool):
    """Max pooling over depth, height and width, like keras.layers.MaxPooling3D
    (MaxPool3D)."""

    kind, rank, op = "MaxPooling3D", 3, "max"


class AveragePooling3D(ChannelsFirst, _Pool):
    """Average pooling over depth, height and width, like
    keras.layers.AveragePooling3D (AvgPool3D)."""

    kind, rank, op = "AveragePooling3D", 3, "avg"


# Keras's other names of the same classes (files naming either load)
MaxPool1D, AvgPool1D = MaxPooling1D, AveragePooling1D
MaxPool2D, AvgPool2D = MaxPooling2D, AveragePooling2D
MaxPool3D, AvgPool3D = MaxPooling3D, AveragePooling3D


class _GlobalPool(Layer):
    rank = 1
    op = "mean"

    def __init__(self, keepdims: bool = False, data_format=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.data_format = _data_format(data_format, self.kind)
        self.keepdims = bool(keepdims)

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, _AXES[self.rank])
        return (1,) * self.rank + (s[-1],) if self.keepdims else (s[-1],)

    def forward(self, x, p, ctx):
        axes = _list(range(1, self.rank + 1))
        keep = ", keepdims=true" if self.keepdims else ""
        return f"{self.op}({x}, axis={axes}{keep})"


class GlobalAveragePooling1D(ChannelsFirst, _GlobalPool):
    """The mean over steps, like keras.layers.GlobalAveragePooling1D."""

    kind, rank, op = "GlobalAveragePooling1D", 1, "mean"
    mask_input = True

    def forward(self, x, p, ctx, mask=None):
        if mask is None:
            return super().forward(x, p, ctx)
        # Keras: the mean over the unmasked steps
        keep = ctx.define("m", f"expand_dims({mask}, 2)")
        kept = f"where({keep}, {x}, zeros_like({x}))"
        count = f"sum(astype({keep}, dtype_name({x})), axis=1{', keepdims=true' if self.keepdims else ''})"
        keepdims = ", keepdims=true" if self.keepdims else ""
        return f"(sum({kept}, axis=1{keepdims}) / {count})"


class GlobalAveragePooling2D(ChannelsFirst, _GlobalPool):
    """The mean over height and width, like keras.layers.GlobalAveragePooling2D."""

    kind, rank, op = "GlobalAveragePooling2D", 2, "mean"


class GlobalMaxPooling1D(ChannelsFirst, _GlobalPool):
    """The maximum over steps, like keras.layers.GlobalMaxPooling1D."""

    kind, rank, op = "GlobalMaxPooling1D", 1, "max"


class GlobalMaxPooling2D(ChannelsFirst, _GlobalPool):
    """The maximum over height and width, like keras.layers.GlobalMaxPooling2D."""

    kind, rank, op = "GlobalMaxPooling2D", 2, "max"


class GlobalAveragePooling3D(ChannelsFirst, _GlobalPool):
    """The mean over depth, height and width, like keras.layers.GlobalAveragePooling3D."""

    kind, rank, op = "GlobalAveragePooling3D", 3, "mean"


class GlobalMaxPooling3D(ChannelsFirst, _GlobalPool):
    """The maximum over depth, height and width, like keras.layers.GlobalMaxPooling3D."""

    kind, rank, op = "GlobalMaxPooling3D", 3, "max"


GlobalAvgPool1D, GlobalAvgPool2D = GlobalAveragePooling1D, GlobalAveragePooling2D
GlobalMaxPool1D, GlobalMaxPool2D = GlobalMaxPooling1D, GlobalMaxPooling2D
GlobalAvgPool3D, GlobalMaxPool3D = GlobalAveragePooling3D, GlobalMaxPooling3D


class _AdaptivePool(Layer):
    """Pools each spatial axis into `output_size` windows whatever its
    length, Keras's (and PyTorch's) windows: window j of n steps into `out`
    is [floor(j n / out), ceil((j + 1) n / out)), so windows may overlap
    when n is not a multiple of out."""

    rank = 1
    op = "mean"

    def __init__(self, output_size, data_format=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        sizes = (output_size,) * self.rank if isinstance(output_size, int) and \
            not isinstance(output_size, bool) else tuple(output_size) \
            if isinstance(output_size, (tuple, list)) else None
        if sizes is None or len(sizes) != self.rank or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            raise ValueError(f"[{self.kind}] output_size must be a positive int or {self.rank} "
                             f"positive ints, got {output_size!r}")
        self.output_size = sizes
        self.data_format = _data_format(data_format, self.kind)

    def compute_output_shape(self, s):
        self._need_rank(s, self.rank + 1, _AXES[self.rank])
        for n, axis in zip(s[:-1], range(1, self.rank + 1)):
            if n is None:
                raise ValueError(f"[{self.kind}] spatial axis {axis} of the input {s} has no "
                                 "length (None): adaptive windows need it")
        return tuple(self.output_size) + (s[-1],)

    def forward(self, x, p, ctx):
        rank = self.rank + 2
        x = ctx.define("ap_in", x)  # (read by every window)
        for k, (n, out) in enumerate(zip(self._in_shape[:-1], self.output_size)):
            axis = k + 1
            if n == out:
                continue
            parts = []
            for j in range(out):
                lo, hi = (j * n) // out, -((-(j + 1) * n) // out)
                index = ", ".join(f"{lo}:{hi}" if a == axis else ":" for a in range(rank))
                parts.append(f"{self.op}({x}[{index}], axis={axis}, keepdims=true)")
            x = ctx.define("ap", parts[0] if out == 1 else
                           f"concatenate(list({', '.join(parts)}), axis={axis})")
        return x


class AdaptiveAveragePooling1D(ChannelsFirst, _AdaptivePool):
    """The mean over output_size windows of the steps, like
    keras.layers.AdaptiveAveragePooling1D."""

    kind, rank, op = "AdaptiveAveragePooling1D", 1, "mean"


class AdaptiveAveragePooling2D(ChannelsFirst, _AdaptivePool):
    """The mean over output_size windows of height and width, like
    keras.layers.AdaptiveAveragePooling2D."""

    kind, rank, op = "AdaptiveAveragePooling2D", 2, "mean"


class AdaptiveAveragePooling3D(ChannelsFirst, _AdaptivePool):
    """The mean over output_size windows of depth, height and width, like
    keras.layers.AdaptiveAveragePooling3D."""

    kind, rank, op = "AdaptiveAveragePooling3D", 3, "mean"


class AdaptiveMaxPooling1D(ChannelsFirst, _AdaptivePool):
    """The maximum over output_size windows of the steps, like
    keras.layers.AdaptiveMaxPooling1D."""

    kind, rank, op = "AdaptiveMaxPooling1D", 1, "max"


class AdaptiveMaxPooling2D(ChannelsFirst, _AdaptivePool):
    """The maximum over output_size windows of height and width, like
    keras.layers.AdaptiveMaxPooling2D."""

    kind, rank, op = "AdaptiveMaxPooling2D", 2, "max"


class AdaptiveMaxPooling3D(ChannelsFirst, _AdaptivePool):
    """The maximum over output_size windows of depth, height and width, like
    keras.layers.AdaptiveMaxPooling3D."""

    kind, rank, op = "AdaptiveMaxPooling3D", 3, "max"
