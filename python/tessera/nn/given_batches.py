"""The batches of a keras.utils.PyDataset or a Python generator, as Keras's data
adapters give them to fit, evaluate and predict: each batch as it comes, of its own
size and shape (a smaller last batch, sequences padded per batch to their longest),
never re-formed. A tessera Dataset to the model (fit reads it with epoch_batches);
the model writes its programs again for each new input shape (varlen.py)."""

from __future__ import annotations

import numpy as np

from .. import data as _data

__all__ = ["GivenBatches", "batch_parts", "pydataset_batches", "generator_batches",
           "iterable_batches"]


def batch_parts(b, i, what, where, form=None) -> list:
    """A batch x, (x, y) or (x, y, sample_weight) as a list of arrays. form: the
    model's flattening of a batch (x a dict or list of its inputs, no labels when no
    loss reads them: Model._batch_form), or None."""
    if form is not None:
        arrays = [np.asarray(a) for a in form(b)]
        rows = {len(a) if a.ndim else None for a in arrays}
        if len(rows) != 1 or None in rows:
            raise ValueError(f"[{where}] batch {i} of {what} has parts of "
                             f"{[a.shape for a in arrays]}: every part needs the same rows")
        return arrays
    if isinstance(b, list):
        b = tuple(b)
    parts = b if isinstance(b, tuple) else (b,)
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"[{where}] batch {i} of {what} has {len(parts)} parts; expected x, "
                         "(x, y) or (x, y, sample_weight)")
    arrays = [np.asarray(p) for p in parts]
    if arrays[0].ndim == 0:
        raise ValueError(f"[{where}] batch {i} of {what} is a scalar: a batch is x, (x, y) or "
                         "(x, y, sample_weight) with a batch axis")
    rows = {len(a) if a.ndim else None for a in arrays}
    if len(rows) != 1:
        raise ValueError(f"[{where}] batch {i} of {what} has parts of "
                         f"{[a.shape for a in arrays]}: every part needs the same rows")
    return arrays


class GivenBatches(_data.Dataset):
    """Batches read one by one from `read_epoch(epoch, start)` (an iterator of
    (index, arrays)), described by the first batch (`first`: its arrays):
    element_spec and batch_size are that batch's; the others may differ."""

    def __init__(self, first, read_epoch, n_batches, what, where):  # noqa: D107
        self._first, self._read_epoch, self._n = first, read_epoch, n_batches
        self.what, self._where = what, where
        self._source = None
        self._plan = dict(_data._PLAN, batch=len(first[0]))
        self._spec = tuple(_data.Spec(tuple(a.shape[1:]), a.dtype) for a in first)

    @property
    def batch_size(self):
        return len(self._first[0])

    @property
    def element_spec(self):
        return self._spec

    def num_batches(self):
        return self._n

    def __len__(self):
        if self._n is None:
            raise TypeError(f"[Dataset] {self.what} has no known length")
        return self._n

    def __repr__(self):
        return f"<batches of {self.what} ({self._n if self._n is not None else '?'} a pass)>"

    def validate(self, check, *, num_shards=1, shard_index=0) -> bool:
        return False  # (a stream: checked batch by batch as the model reads it)

    def epoch_batches(self, epoch, *, num_shards=1, shard_index=0, start_batch=0):
        """This shard's rows of every batch of `epoch`, from batch `start_batch` on
        (the split of Dataset.epoch_batches)."""
        num_shards, shard_index = _data._shard_args("epoch_batches", num_shards, shard_index)
        for i, arrays in self._read_epoch(epoch, start_batch):
            n = len(arrays[0])
            lo, hi = _data._shard_range(n, num_shards, shard_index)
            yield _data.Batch(tuple(a[lo:hi] for a in arrays) if num_shards > 1 else
                              tuple(arrays), n, i)

    def __iter__(self):
        for b in self.epoch_batches(0):
            yield b.arrays if len(b.arrays) > 1 else b.arrays[0]

    def _unsupported(self, *args, **kwargs):
        raise TypeError(f"[Dataset] {self.what}'s batches are read as given (Keras's): "
                        "shuffle, batch, map, take, shard and repeat do not apply")

    shuffle = batch = map = take = shard = repeat = prefetch = _unsupported


def _check_parts(arrays, spec_len, i, what, where):
    if len(arrays) != spec_len:
        raise ValueError(f"[{where}] batch {i} of {what} has {len(arrays)} parts, batch 0 had "
                         f"{spec_len}")


def pydataset_batches(ds, where: str, shuffle_seed=None, form=None) -> GivenBatches:
    """A keras.utils.PyDataset's batches: ds[i] for i < len(ds), on_epoch_begin and
    on_epoch_end around each pass; with `shuffle_seed` (fit's shuffle=True, as
    Keras's PyDataset adapter shuffles) in an order drawn per (seed, epoch)."""
    what = type(ds).__name__
    n = ds.num_batches
    if n is None or n <= 0:
        raise ValueError(f"[{where}] the PyDataset {what} has no batches (len is {n})")
    first = batch_parts(ds[0], 0, what, where, form)

    def read_epoch(epoch, start):
        ds.on_epoch_begin()
        order = range(n) if shuffle_seed is None else \
            np.random.default_rng([shuffle_seed, epoch]).permutation(n)
        for i in range(start, n):
            k = int(order[i])
            arrays = batch_parts(ds[k], k, what, where, form)
            _check_parts(arrays, len(first), k, what, where)
            yield i, arrays
        ds.on_epoch_end()

    return GivenBatches(first, read_epoch, n, f"the PyDataset {what}", where)


def generator_batches(it, where: str, steps=None) -> GivenBatches:
    """A Python generator or iterator of batches (Keras's generator input): each
    epoch takes `steps` batches from it (fit's steps_per_epoch, evaluate's and
    predict's steps), or runs until it ends, as Keras reads a generator."""
    what = f"the {type(it).__name__}"
    try:
        first = batch_parts(next(it), 0, what, where)
    except StopIteration:
        raise ValueError(f"[{where}] x is {what}, which yields no batches") from None
    pending = [first]
    taken = [1]

    def read_epoch(epoch, start):
        count = 0
        while steps is None or count < steps:
            if pending:
                arrays = pending.pop()
            else:
                try:
                    arrays = batch_parts(next(it), taken[0], what, where)
                except StopIteration:
                    return
                taken[0] += 1
            _check_parts(arrays, len(first), count, what, where)
            if count >= start:
                yield count, arrays
            count += 1

    return GivenBatches(first, read_epoch, steps, what, where)


def iterable_batches(source, where: str, steps=None) -> GivenBatches:
    """An iterable read again at each epoch (a PyTorch DataLoader, any object with
    __iter__ that is not an array or a sequence of samples), as Keras's torch
    adapter reads a DataLoader: iter(source) once per epoch, its batches as they
    come; `steps` batches an epoch at most. tessera never imports the library the
    iterable comes from: its batches need only convert with numpy.asarray."""
    what = f"the {type(source).__name__}"
    try:
        n = len(source)
    except TypeError:
        n = None
    if steps is not None:
        n = steps if n is None else min(n, steps)
    opened = iter(source)
    try:
        raw = next(opened)
    except StopIteration:
        raise ValueError(f"[{where}] x is {what}, which yields no batches") from None
    first = batch_parts(raw, 0, what, where)
    peeked = [(raw, opened)]  # the first pass goes on from the batch read here

    def passes():
        if peeked:
            b, it = peeked.pop()
            yield b
            yield from it
        else:
            yield from iter(source)

    def read_epoch(epoch, start):
        for i, b in enumerate(passes()):
            if n is not None and i >= n:
                return
            if i < start:
                continue
            arrays = batch_parts(b, i, what, where)
            _check_parts(arrays, len(first), i, what, where)
            yield i, arrays

    return GivenBatches(first, read_epoch, n, what, where)
