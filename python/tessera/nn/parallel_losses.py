"""Softmax cross-entropy and accuracy on logits split by vocabulary over a
tensor group, without ever gathering them (Megatron's parallel
cross-entropy).

The model's last layer is ``ColumnParallelDense(vocab, group=tp)`` (no
gather): member k holds the logits of classes [lo_k, hi_k) (the first
vocab % t members one more). Each sample's loss is

    m = max over the group of round(max_k(z))        all_reduce(max), no gradient
    s = sum over the group of sum_k(exp(z - m))      one tp_reduce of s and z_y,
    z_y = the target's logit from the member          stacked
          holding it (zeros from the others)
    loss = log(s) + m - z_y

The sums go through tp_reduce (forward: all-reduce; backward: the
cotangent itself), since the loss is replicated on every member: each member's
gradient is then (softmax(z)_k - onehot_k) / n for its own classes, the slice
of the one-locality gradient. The shift m only keeps exp in range (any
constant gives the same loss): it is rounded, which passes no gradient.

Accuracy needs the arg max over the whole vocabulary: each member's local
maximum, their maximum (all_reduce max), the smallest class index holding it
(all_reduce min), as numpy.argmax picks the first.
"""

from __future__ import annotations

import numpy as np

from .. import distributed
from .losses import Loss
from .metrics import MeanMetricWrapper
from .parallel import split_extents

__all__ = ["VocabParallelSparseCategoricalCrossentropy", "VocabParallelSparseCategoricalAccuracy"]


_MAX, _MIN = '"max"', '"min"'


def _block(lines) -> str:
    """A block expression, one statement a line. Collectives are matched
    across members by their position in the program's text, so text that
    differs between members (this member's class range) must never stand
    before a collective on the same line."""
    return "block(\n" + ",\n".join(lines) + ")"


class _VocabSplit:
    """The vocabulary's split over the group: this member's classes [lo, hi)."""

    def _init_split(self, vocab_size, group, kind):
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"[{kind}] vocab_size must be a positive int (the number of "
                             f"classes over the whole group), got {vocab_size!r}")
        self.vocab_size = vocab_size
        if group is not None and not isinstance(group, distributed.Group):
            raise TypeError(f"[{kind}] argument 'group' must be a tessera.distributed.Group "
                            f"(mesh.group(\"tensor\")) or None, got {type(group).__name__} "
                            f"{group!r}")
        self.group = group
        t = 1 if self.group is None else self.group.size
        if vocab_size < t:
            raise ValueError(f"[{kind}] vocab_size {vocab_size} cannot be split over the {t} "
                             f"members of group {self.group.axis}: each member needs at least "
                             "one class")
        self.extents = split_extents(vocab_size, t)
        k = 0 if self.group is None else self.group.rank
        self.lo = sum(self.extents[:k])
        self.hi = self.lo + self.extents[k]

    def _on_group(self, op: str, x: str, *args) -> str:
        if self.group is None:
            return x
        extra = "".join(f", {a}" for a in args)
        return f"{op}({x}{extra}, group={int(self.group)})"

    def _labels(self, y: str, p: str) -> str:
        return f"reshape(astype({y}, \"int64\"), shape({p})[:-1])"


class VocabParallelSparseCategoricalCrossentropy(_VocabSplit, Loss):
    """Sparse categorical cross-entropy from logits split by vocabulary over
    `group` (vocab_size: the classes over the whole group, split as
    ColumnParallelDense splits its units). Labels are whole class indices in
    [0, vocab_size). ``metrics=["accuracy"]`` gives
    VocabParallelSparseCategoricalAccuracy; metrics that need the whole
    output are refused at compile."""

    name = "vocab_parallel_sparse_categorical_crossentropy"
    sparse_labels = True
    vocab_parallel = True

    def __init__(self, vocab_size, group=None):
        self._init_split(vocab_size, group, type(self).__name__)
        self._checked = None  # this member's class count, once checked

    def get_config(self):
        return {"name": self.name, "vocab_size": self.vocab_size}

    def whole_output_shape(self, out_shape) -> tuple:
        """The shape of the whole output (labels are checked against it) from
        this member's: its last axis must be this member's classes. The
        members' class counts are compared once (a small all-gather on the
        group), so a mismatch is an error on every member."""
        out_shape = tuple(out_shape)
        local = out_shape[-1] if out_shape else 0
        if self._checked != local:
            every = [local]
            if self.group is not None and self.group.size > 1:
                every = [int(n) for n in np.asarray(distributed.all_gather(
                    np.array([local], dtype=np.int64), group=self.group))]
            if every != self.extents:
                where = "" if self.group is None else \
                    f" on the members of group {self.group.axis} (ranks " \
                    f"{', '.join(str(m) for m in self.group.members)})"
                raise ValueError(f"[{type(self).__name__}] the output has {every} classes"
                                 f"{where} (per-sample shape {out_shape} here), but vocab_size "
                                 f"{self.vocab_size} split over {len(self.extents)} members gives "
                                 f"{self.extents} (the last layer must be "
                                 f"ColumnParallelDense({self.vocab_size}, group=...))")
            self._checked = local
        return out_shape[:-1] + (self.vocab_size,)

    def per_sample(self, y, p):
        here = f"logical_and(yi >= {self.lo}, yi < {self.hi})"
        index = f"expand_dims(where(here, yi - {self.lo}, 0), -1)"
        picked = (f"squeeze(take_along_axis({p}, {index}, axis=-1), -1) * "
                  f"astype(here, dtype_name({p}))")
        top = f"round(max({p}, axis=-1, keepdims=true))"
        # One all-reduce for both sums: (sum of exp, the target's logit).
        sums = self._on_group("tp_reduce", f"stack(list(sum(exp({p} - m), axis=-1), picked), "
                                           "axis=-1)")
        return _block([f"define(m, {self._on_group('all_reduce', top, _MAX)})",
                       f"define(yi, {self._labels(y, p)})",
                       f"define(here, {here})",
                       f"define(picked, {picked})",
                       f"define(s, {sums})",
                       "log(take(s, 0, axis=-1)) + squeeze(m, -1) - take(s, 1, axis=-1)"])

    def per_sample_for(self, y, p, ctx, label_spec, out_shape):
        self.whole_output_shape(out_shape)
        return self.per_sample(y, p)

    def expression_for(self, y, p, ctx, label_spec, out_shape):
        return f"mean({self.per_sample_for(y, p, ctx, label_spec, out_shape)})"

    def accuracy_metric(self, name="accuracy"):
        """Keras's "accuracy" for this loss."""
        return VocabParallelSparseCategoricalAccuracy(self.vocab_size, self.group, name=name)


class VocabParallelSparseCategoricalAccuracy(_VocabSplit, MeanMetricWrapper):
    """How often the arg max over the whole vocabulary of logits split over
    `group` is the integer label (two small all-reduces per batch)."""

    name = "sparse_categorical_accuracy"
    vocab_parallel = True

    def __init__(self, vocab_size, group=None, name=None):
        self._init_split(vocab_size, group, type(self).__name__)
        super().__init__(self._values, name if name is not None else type(self).name)

    def _values(self, y, p):
        first = f"where(mx == top, argmax({p}, axis=-1) + {self.lo}, {self.vocab_size})"
        return _block([f"define(mx, max({p}, axis=-1))",
                       f"define(top, {self._on_group('all_reduce', 'mx', _MAX)})",
                       f"define(first, {first})",
                       f"define(best, {self._on_group('all_reduce', 'first', _MIN)})",
                       f"equal({self._labels(y, p)}, best)"])

    def get_config(self):
        return {"class": type(self).__name__, "name": self.name, "vocab_size": self.vocab_size}
