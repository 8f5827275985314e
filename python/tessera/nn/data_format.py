"""Keras's data_format="channels_first" for layers written channels_last
(convolutions, pooling, global pooling): the input transposed to channels
last, the layer's own computation, and the result transposed back. Shapes
and results are Keras's; kernels keep Keras's layout (which does not depend
on data_format)."""

from __future__ import annotations


def to_last(shape):
    """One sample's channels-first shape (C, spatial...) as channels last."""
    shape = tuple(shape)
    return shape[1:] + shape[:1]


def to_first(shape):
    """One sample's channels-last shape (spatial..., C) as channels first."""
    shape = tuple(shape)
    return shape[-1:] + shape[:-1]


def _perm(rank: int, first: bool) -> str:
    """The transpose of a batch of rank `rank` (with the batch axis) from
    channels first to last (first=False), or back (first=True)."""
    axes = [0, rank - 1] + list(range(1, rank - 1)) if first else \
        [0] + list(range(2, rank)) + [1]
    return "[" + ", ".join(str(a) for a in axes) + "]"


class ChannelsFirst:
    """A mixin placed before a channels-last layer class: with
    self.data_format == "channels_first" its shapes and forward run on the
    transposed input. The layer's forward sees channels-last _in_shape and
    _out_shape."""

    def _channels_first(self) -> bool:
        return getattr(self, "data_format", "channels_last") == "channels_first"

    def compute_output_shape(self, s):
        if not self._channels_first():
            return super().compute_output_shape(s)
        out = super().compute_output_shape(to_last(s))
        return to_first(out) if len(out) > 1 else out

    def forward(self, x, p, ctx, **kwargs):
        if not self._channels_first():
            return super().forward(x, p, ctx, **kwargs)
        saved = self._in_shape, self._out_shape
        rank_in, rank_out = len(saved[0]) + 1, len(saved[1]) + 1
        self._in_shape = to_last(saved[0])
        self._out_shape = to_last(saved[1]) if rank_out > 2 else saved[1]
        try:
            y = super().forward(f"transpose({x}, {_perm(rank_in, False)})", p, ctx, **kwargs)
        finally:
            self._in_shape, self._out_shape = saved
        return f"transpose({y}, {_perm(rank_out, True)})" if rank_out > 2 else y
