"""Reshaping layers: Flatten, Reshape, Permute, RepeatVector, and the ones
that move samples' borders: ZeroPadding1D/2D/3D, UpSampling1D/2D/3D (nearest;
bilinear for 2D) and Cropping1D/2D/3D, with Keras's arguments (data_format
too, for the 2D and 3D ones)."""

from __future__ import annotations

import math

from ..data_format import ChannelsFirst
from .base import Layer, _data_format, _list, _positive

__all__ = ["Cropping1D", "Cropping2D", "Cropping3D", "Flatten", "Permute", "RepeatVector",
           "Reshape", "UpSampling1D", "UpSampling2D", "UpSampling3D", "ZeroPadding1D",
           "ZeroPadding2D", "ZeroPadding3D"]


def _pair_of(v, name: str, where: str, allow_zero=True) -> tuple:
    """Keras's standardize_tuple(v, 2): an int n is (n, n)."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v, v)
    try:
        v = tuple(v)
    except TypeError:
        raise ValueError(f"[{where}] {name} must be an int or a pair of ints, got {v!r}") from None
    low = 0 if allow_zero else 1
    if len(v) != 2 or not all(isinstance(i, int) and not isinstance(i, bool) and i >= low
                              for i in v):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"[{where}] {name} must be a {kind} int or a pair of them, got {v!r}")
    return v


def _three_of(v, name: str, where: str, allow_zero=True) -> tuple:
    """Keras's standardize_tuple(v, 3): an int n is (n, n, n)."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v, v, v)
    low = 0 if allow_zero else 1
    if not isinstance(v, (tuple, list)) or len(v) != 3 or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= low for i in v):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"[{where}] {name} must be a {kind} int or 3 of them, got {v!r}")
    return tuple(v)


def _three_pairs(v, name: str, where: str) -> tuple:
    """((front, back), (top, bottom), (left, right)) from an int, 3 ints or 3 pairs."""
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            raise ValueError(f"[{where}] {name} cannot be negative, got {v!r}")
        return ((v, v),) * 3
    if not isinstance(v, (tuple, list)) or len(v) != 3:
        raise ValueError(f"[{where}] {name} must be an int, 3 ints (symmetric depth, height, "
                         "width) or 3 pairs ((front, back), (top, bottom), (left, right)), got "
                         f"{v!r}")
    # An int entry n is the pair (n, n), as Keras's.
    return tuple(_pair_of(i, f"entry {k + 1} of {name}", where) for k, i in enumerate(v))


def _two_pairs(v, name: str, where: str) -> tuple:
    """((top, bottom), (left, right)) from an int, a pair, or two pairs."""
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            raise ValueError(f"[{where}] {name} cannot be negative, got {v!r}")
        return ((v, v), (v, v))
    if not hasattr(v, "__len__") or len(v) != 2:
        raise ValueError(f"[{where}] {name} must be an int, a pair of ints (symmetric height, "
                         f"width) or a pair of pairs ((top, bottom), (left, right)), got {v!r}")
    return (_pair_of(v[0], f"the 1st entry of {name}", where),
            _pair_of(v[1], f"the 2nd entry of {name}", where))


class _Spatial(Layer):
    """A layer over the spatial axes of (batch, steps, channels) or (batch,
    height, width, channels) (channels second with channels_first)."""

    rank = 1
    supports_masking = False

    def _axes(self) -> list:
        """The spatial axes, counting the batch axis."""
        first = getattr(self, "data_format", "channels_last") == "channels_first"
        return [a + (2 if first else 1) for a in range(self.rank)]

    def _check_rank(self, s):
        spatial = "height, width" if self.rank == 2 else "depth, height, width"
        self._need_rank(s, self.rank + 1, "steps, channels" if self.rank == 1 else
                        (f"channels, {spatial}" if self._axes()[0] == 2
                         else f"{spatial}, channels"))


class _ZeroPadding(_Spatial):
    def compute_output_shape(self, s):
        self._check_rank(s)
        out = list(s)
        for a, (lo, hi) in zip(self._axes(), self.padding):
            if out[a - 1] is not None:
                out[a - 1] += lo + hi
        return tuple(out)

    def forward(self, x, p, ctx):
        widths = [[0, 0]] * (self.rank + 2)
        for a, pair in zip(self._axes(), self.padding):
            widths[a] = list(pair)
        pairs = ", ".join(f"list({lo}, {hi})" for lo, hi in widths)
        return f"pad({x}, list({pairs}))"


class ZeroPadding1D(_ZeroPadding):
    """Zeros before and after the steps, like keras.layers.ZeroPadding1D
    (padding: an int or (left, right))."""

    kind, rank = "ZeroPadding1D", 1

    def __init__(self, padding=1, data_format=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.padding = (_pair_of(padding, "padding", self.kind),)
        self.data_format = _data_format(data_format, self.kind)


class ZeroPadding2D(_ZeroPadding):
    """Zero rows and columns around each image, like keras.layers.ZeroPadding2D."""

    kind, rank = "ZeroPadding2D", 2

    def __init__(self, padding=(1, 1), data_format=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.padding = _two_pairs(padding, "padding", self.kind)
        self.data_format = _data_format(data_format, self.kind)


class ZeroPadding3D(_ZeroPadding):
    """Zero planes, rows and columns around each volume, like
    keras.layers.ZeroPadding3D (padding: an int, 3 ints or 3 pairs)."""

    kind, rank = "ZeroPadding3D", 3

    def __init__(self, padding=((1, 1), (1, 1), (1, 1)), data_format=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.padding = _three_pairs(padding, "padding", self.kind)
        self.data_format = _data_format(data_format, self.kind)


class _Cropping(_Spatial):
    def compute_output_shape(self, s):
        self._check_rank(s)
        out = list(s)
        for a, (lo, hi) in zip(self._axes(), self.cropping):
            n = out[a - 1]
            if n is not None:
                if lo + hi >= n:
                    raise ValueError(f"[{self.kind}] cropping {self.cropping} must leave part of "
                                     f"the input {(None,) + tuple(s)} (axis {a} has {n})")
                out[a - 1] = n - lo - hi
        return tuple(out)

    def forward(self, x, p, ctx):
        index = ["slice(nil, nil)"] * (self.rank + 2)
        for a, (lo, hi) in zip(self._axes(), self.cropping):
            index[a] = f"slice({lo}, {-hi if hi else 'nil'})"
        return f"getitem({x}, {', '.join(index)})"


class Cropping1D(_Cropping):
    """Removes steps at the start and end, like keras.layers.Cropping1D."""

    kind, rank = "Cropping1D", 1

    def __init__(self, cropping=(1, 1), name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.cropping = (_pair_of(cropping, "cropping", self.kind),)


class Cropping2D(_Cropping):
    """Removes rows and columns at the borders, like keras.layers.Cropping2D
    (cropping: an int, (height, width) or ((top, bottom), (left, right)))."""

    kind, rank = "Cropping2D", 2

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.cropping = _two_pairs(cropping, "cropping", self.kind)
        self.data_format = _data_format(data_format, self.kind)


class Cropping3D(_Cropping):
    """Removes planes, rows and columns at the borders, like keras.layers.Cropping3D
    (cropping: an int, 3 ints or 3 pairs)."""

    kind, rank = "Cropping3D", 3

    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.cropping = _three_pairs(cropping, "cropping", self.kind)
        self.data_format = _data_format(data_format, self.kind)


class UpSampling1D(_Spatial):
    """Each step repeated `size` times, like keras.layers.UpSampling1D."""

    kind, rank = "UpSampling1D", 1

    def __init__(self, size=2, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if not isinstance(size, int) or isinstance(size, bool):
            raise TypeError(f"[UpSampling1D] size must be an int, got {size!r}")
        if size <= 0:
            raise ValueError(f"[UpSampling1D] size must be positive, got {size!r}")
        self.size = size

    def compute_output_shape(self, s):
        self._check_rank(s)
        return (None if s[0] is None else s[0] * self.size, s[1])

    def forward(self, x, p, ctx):
        return f"repeat({x}, {self.size}, axis=1)"


def _bilinear_matrix(n: int, factor: int) -> list:
    """(n * factor, n): the weights of bilinear upsampling by `factor` with
    half-pixel centers, the samples past the border left out and the rest
    renormalized (jax.image.resize's, which Keras's bilinear UpSampling2D uses)."""
    rows = []
    for o in range(n * factor):
        c = (o + 0.5) / factor - 0.5
        weights = [max(0.0, 1.0 - abs(c - i)) for i in range(n)]
        total = sum(weights)
        rows.append([w / total for w in weights])
    return rows


class UpSampling2D(_Spatial):
    """Rows and columns repeated size = (height, width) times (interpolation
    "nearest"), or interpolated ("bilinear"), like keras.layers.UpSampling2D."""

    kind, rank = "UpSampling2D", 2

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.size = _pair_of(size, "size", self.kind, allow_zero=False)
        self.data_format = _data_format(data_format, self.kind)
        if not isinstance(interpolation, str) or interpolation.lower() not in ("nearest",
                                                                                "bilinear"):
            raise ValueError(f"[UpSampling2D] interpolation {interpolation!r} is not supported: "
                             "use 'nearest' or 'bilinear'")
        self.interpolation = interpolation.lower()

    def compute_output_shape(self, s):
        self._check_rank(s)
        out = list(s)
        for a, f in zip(self._axes(), self.size):
            if out[a - 1] is None and self.interpolation == "bilinear":
                raise ValueError(f"[UpSampling2D] bilinear interpolation needs the spatial axes' "
                                 f"lengths, got per-sample shape {tuple(s)}")
            out[a - 1] = None if out[a - 1] is None else out[a - 1] * f
        return tuple(out)

    def forward(self, x, p, ctx):
        if self.interpolation == "nearest":
            for a, f in zip(self._axes(), self.size):
                if f != 1:
                    x = f"repeat({x}, {f}, axis={a})"
            return x
        s = self._in_shape
        for a, f in zip(self._axes(), self.size):
            n = s[a - 1]
            m = _bilinear_matrix(n, f)
            # the interpolation as a product along axis a: x . (n, n*f)
            cols = [[m[o][i] for o in range(n * f)] for i in range(n)]
            x = ctx.define("up", x)
            w = f"astype(array({_list(_list(repr(v) for v in row) for row in cols)}), " \
                f"dtype_name({x}))"
            x = f"moveaxis(matmul(moveaxis({x}, {a}, -1), {w}), -1, {a})"
        return x


class UpSampling3D(_Spatial):
    """Planes, rows and columns repeated size = (depth, height, width) times,
    like keras.layers.UpSampling3D (nearest, Keras's only interpolation here)."""

    kind, rank = "UpSampling3D", 3

    def __init__(self, size=(2, 2, 2), data_format=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.size = _three_of(size, "size", self.kind, allow_zero=False)
        self.data_format = _data_format(data_format, self.kind)

    def compute_output_shape(self, s):
        self._check_rank(s)
        out = list(s)
        for a, f in zip(self._axes(), self.size):
            out[a - 1] = None if out[a - 1] is None else out[a - 1] * f
        return tuple(out)

    def forward(self, x, p, ctx):
        for a, f in zip(self._axes(), self.size):
            if f != 1:
                x = f"repeat({x}, {f}, axis={a})"
        return x


class _Flatten(Layer):
    """Flatten's computation on channels-last input."""

    def compute_output_shape(self, s):
        if any(d is None for d in s):
            raise ValueError(f"[Flatten] layer {self.name!r} needs every axis's length, got "
                             f"per-sample shape {tuple(s)} with an axis of unknown length "
                             "(None): its output size would depend on the input's length; "
                             "pool over the axis (GlobalAveragePooling1D) or give the Input "
                             "a length")
        return (math.prod(s),)

    def forward(self, x, p, ctx):
        return f"batch_flatten({x})"


class Flatten(ChannelsFirst, _Flatten):
    """Keeps the batch axis and flattens the rest; with data_format "channels_first" (or
    image_data_format's), the channels axis moved last first, as Keras's."""

    kind = "Flatten"

    def __init__(self, data_format=None, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.data_format = _data_format(data_format, self.kind)


class Reshape(Layer):
    """Reshapes each sample to target_shape (one axis may be -1), like keras.layers.Reshape."""

    kind = "Reshape"

    def __init__(self, target_shape, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        try:
            self.target_shape = tuple(int(d) for d in target_shape)
        except TypeError:
            raise TypeError(f"[Reshape] target_shape must be a tuple of ints, got "
                            f"{target_shape!r}") from None
        if sum(d == -1 for d in self.target_shape) > 1 or any(
                d == 0 or d < -1 for d in self.target_shape):
            raise ValueError(f"[Reshape] target_shape must hold positive ints and at most one "
                             f"-1, got {target_shape!r}")

    def compute_output_shape(self, s):
        known = math.prod(d for d in self.target_shape if d != -1)
        if any(d is None for d in s):
            # An axis of unknown length (Input((None, d))): the -1 axis is unknown too, as
            # Keras's; each concrete length met is recorded again with its own (varlen.py).
            return tuple(None if d == -1 else d for d in self.target_shape)
        n = math.prod(s)
        if -1 in self.target_shape:
            if n % known:
                raise ValueError(f"[Reshape] cannot reshape samples of shape {s} ({n} elements) "
                                 f"into {self.target_shape}")
            return tuple(n // known if d == -1 else d for d in self.target_shape)
        if known != n:
            raise ValueError(f"[Reshape] cannot reshape samples of shape {s} ({n} elements) into "
                             f"{self.target_shape} ({known} elements)")
        return self.target_shape

    def forward(self, x, p, ctx):
        if any(d is None for d in self._out_shape):
            # recorded on an axis of unknown length: the batch axis read from the input, the
            # -1 axis left to the reshape
            xv = ctx.define("rs_in", x)
            dims = ", ".join(str(d) for d in self.target_shape)
            return f"reshape({xv}, list(shape({xv})[0], {dims}))"
        return f"reshape({x}, {_list((-1,) + self._out_shape)})"


class Permute(Layer):
    """Permutes the axes of each sample (dims count from 1), like keras.layers.Permute."""

    kind = "Permute"

    def __init__(self, dims, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.dims = tuple(int(d) for d in dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(f"[Permute] dims must be a permutation of 1..{len(self.dims)}, got "
                             f"{dims!r}")

    def compute_output_shape(self, s):
        if len(s) != len(self.dims):
            raise ValueError(f"[Permute] dims {self.dims} do not match samples of shape {s}")
        return tuple(s[d - 1] for d in self.dims)

    def forward(self, x, p, ctx):
        return f"transpose({x}, {_list((0,) + self.dims)})"


class RepeatVector(Layer):
    """Repeats a (batch, features) input n times: (batch, n, features)."""

    kind = "RepeatVector"

    def __init__(self, n, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        self.n = _positive(n, "n", "RepeatVector")

    def compute_output_shape(self, s):
        self._need_rank(s, 1, "features")
        return (self.n, s[0])

    def forward(self, x, p, ctx):
        return f"repeat(expand_dims({x}, 1), {self.n}, axis=1)"
