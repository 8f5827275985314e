"""``Dataset``: a tf.data-like pipeline over arrays, ``.npy`` files and
generators, whose ``epoch_batches`` is what ``Model.fit`` reads."""

from __future__ import annotations

import itertools
import mmap
import os
import queue
import threading
from typing import Iterator, Optional, Tuple

import numpy as np

from . import pipelines as _pl
from .loaders import _call, _mix
from .structure import (_NOTHING, Batch, Spec, _build, _close, _describe, _flatten,
                        _int_arg, _loose, _shard_args, _shard_range)

__all__ = ["Dataset", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]

# Dataset.cardinality() of a dataset repeated forever, and of one whose length
# is unknown (tf.data's constants)
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2

# Rows per chunk of Dataset.validate: at most this many, and at most _CHUNK_BYTES.
_CHUNK_ROWS = 65536
_CHUNK_BYTES = 64 << 20
# Dtypes tessera's ``take`` primitive gathers (the others use NumPy indexing).
_TAKE_KINDS = "biufc"


def _is_mapped(a) -> bool:
    """Whether an array's memory is a memory-mapped file."""
    while a is not None:
        if isinstance(a, (np.memmap, mmap.mmap)):
            return True
        a = getattr(a, "base", None)
    return False


def _gather(a, rows):
    """Rows of one component: a slice (a view of an in-memory array, a copy of a
    memory-mapped one) or an int64 index array (a new array)."""
    if isinstance(rows, slice):
        return np.array(a[rows]) if _is_mapped(a) else a[rows]
    if _is_mapped(a):
        # Read the file in increasing row order, then put the rows in place.
        order = np.argsort(rows, kind="stable")
        got = np.asarray(a[rows[order]])
        out = np.empty_like(got)
        out[order] = got
        return out
    if a.dtype.kind in _TAKE_KINDS and a.flags.c_contiguous:
        return _call("take", a, rows, axis=0)
    return np.asarray(a[rows])


class _ArraySource:
    """Arrays with a common first axis (in memory or memory-mapped)."""

    indexable = True

    def __init__(self, arrays, names, tree, label):
        self.arrays = arrays
        self.names = names
        self.tree = tree
        self.label = label
        self.rows = arrays[0].shape[0]

    def specs(self):
        return tuple(Spec(tuple(a.shape[1:]), a.dtype) for a in self.arrays)

    def read(self, rows):
        return tuple(_gather(a, rows) for a in self.arrays)


class _GeneratorSource:
    """A generator function called once per epoch, yielding samples."""

    indexable = False
    rows = None

    def __init__(self, fn, spec):
        self.fn = fn
        self.spec = spec  # a tuple of Spec, or None until the first sample is read
        self.tree = None if spec is None or len(spec) == 1 else ("tuple", [None] * len(spec))
        self.label = getattr(fn, "__qualname__", type(fn).__name__)

    def _start(self):
        it = self.fn()
        if not hasattr(it, "__next__"):
            raise TypeError(f"[Dataset.from_generator] fn() must return an iterator (call a "
                            f"generator function), got {type(it).__name__}")
        return it

    def specs(self):
        """The spec, from element_spec or the generator's first sample."""
        if self.spec is None:
            it = self._start()
            try:
                sample = next(it, _NOTHING)
            finally:
                _close(it)
            if sample is _NOTHING:
                raise ValueError("[Dataset.from_generator] the generator yielded no samples, "
                                 "so the shapes of its samples are unknown; pass "
                                 "element_spec=")
            leaves = []
            self.tree = _flatten(sample, "", leaves, [])
            self.spec = tuple(Spec(np.shape(v), np.asarray(v).dtype) for v in leaves)
        return self.spec

    def samples(self, epoch: int = 0):
        """The samples of one run of the generator, each a tuple of arrays of the
        spec's shapes and dtypes."""
        specs = self.specs()
        it = self._start()
        try:
            for i, sample in enumerate(it):
                leaves = []
                tree = _flatten(sample, "", leaves, [])
                if _loose(tree) != _loose(self.tree):
                    raise ValueError(f"[Dataset.from_generator] sample {i} is "
                                     f"{_describe(tree, len(leaves))}, but the samples are "
                                     f"{_describe(self.tree, len(specs))}")
                out = []
                for c, (v, s) in enumerate(zip(leaves, specs)):
                    v = np.asarray(v)
                    if v.shape != s.shape:
                        raise ValueError(f"[Dataset.from_generator] component {c} of sample "
                                         f"{i} has shape {v.shape}, expected {s.shape}")
                    if v.dtype != s.dtype:
                        if not np.can_cast(v.dtype, s.dtype, "same_kind"):
                            raise ValueError(f"[Dataset.from_generator] component {c} of "
                                             f"sample {i} has dtype {v.dtype}, which does not "
                                             f"convert to {s.dtype} safely")
                        v = v.astype(s.dtype)
                    out.append(v)
                yield tuple(out)
        finally:
            _close(it)


def _shuffle_buffer(samples, size: int, rng):
    """A shuffle buffer of ``size`` samples (tf.data's): each sample read replaces
    a random one of the buffer, which is emitted; at the end the buffer drains in
    random order."""
    buf = []
    draws = iter(())
    for s in samples:
        if len(buf) < size:
            buf.append(s)
            continue
        u = next(draws, None)
        if u is None:
            draws = iter(rng.random(1024).tolist())
            u = next(draws)
        j = int(u * size)
        yield buf[j]
        buf[j] = s
    order = rng.permutation(len(buf))
    for j in order:
        yield buf[j]


def _prefetched(make, depth: int):
    """Runs the iterator ``make()`` in a background thread, ``depth`` items ahead.
    An exception in the thread is raised here, at the item it replaced."""
    q = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def producer():
        it = None
        try:
            it = make()
            for item in it:
                if not put((True, item)):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            e.add_note("[Dataset.prefetch] raised in the prefetch thread")
            put((False, e))
            return
        finally:
            _close(it)
        put((False, None))

    thread = threading.Thread(target=producer, name="tessera-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = q.get()
            if ok:
                yield item
            elif item is None:
                return
            else:
                raise item
    finally:
        stop.set()
        thread.join()


class Dataset:
    """A pipeline of samples for training, modelled on ``tf.data.Dataset``.

    Make one with ``Dataset.from_tensor_slices``, ``Dataset.from_npy`` or
    ``Dataset.from_generator``; chain ``shuffle``, ``batch``, ``map``, ``take``,
    ``shard``, ``repeat`` and ``prefetch`` (each returns a new Dataset); iterate
    it, or give it to ``Model.fit``, which reads it with ``epoch_batches``.

    The transformations apply in a fixed order: ``take`` (rows) and ``shuffle``
    on samples, ``batch``, then ``map``, ``take`` (batches) and ``shard`` on
    batches, then ``repeat``; calling them in an order that would mean
    something else (``shuffle`` after ``batch``, anything but ``prefetch``
    after ``repeat``) is an error. tf.data's others (``map`` per sample
    before ``batch``, ``filter``, ``unbatch``, ``padded_batch``, ``zip``,
    ``concatenate``, ``enumerate``, ``cache``) make a new dataset that reads
    this one's elements as a generator's samples are read (pipelines.py).
    See docs/data.md."""

    def __init__(self, *args, **kwargs):
        raise TypeError("[Dataset] make a Dataset with Dataset.from_tensor_slices(...), "
                        "Dataset.from_npy(...) or Dataset.from_generator(...)")

    @classmethod
    def _new(cls, source, **plan):
        ds = object.__new__(cls)
        ds._source = source
        ds._plan = dict(_PLAN, **plan)
        ds._spec = None
        ds._tree = None  # the elements' structure after the maps (_find_spec)
        return ds

    def _with(self, **changes) -> "Dataset":
        return Dataset._new(self._source, **dict(self._plan, **changes))

    # ------------------------------------------------------------------ sources

    @classmethod
    def from_tensor_slices(cls, elements) -> "Dataset":
        """A dataset of the slices of ``elements`` along their first axis.

        ``elements`` is an array (anything ``np.asarray`` reads), a tuple ``(x, y)``
        or ``(x, y, sample_weight)``, or any tuple/list/dict nesting of arrays with
        the same number of rows. The arrays are not copied (a memory-mapped array
        stays on disk and only the rows read are loaded)."""
        leaves, names = [], []
        tree = _flatten(elements, "", leaves, names)
        if not leaves:
            raise ValueError("[Dataset.from_tensor_slices] elements holds no arrays")
        arrays = []
        for v, name in zip(leaves, names):
            a = np.asanyarray(v)
            if a.dtype == object:
                raise TypeError(f"[Dataset.from_tensor_slices] component {name or 'elements'} "
                                f"is not an array of numbers (dtype object, from "
                                f"{type(v).__name__})")
            if a.ndim == 0:
                raise ValueError(f"[Dataset.from_tensor_slices] component {name or 'elements'} "
                                 "is a scalar; each component needs a first axis (the samples)")
            arrays.append(a)
        _check_rows("from_tensor_slices", arrays, names)
        return cls._new(_ArraySource(arrays, names, tree, f"{arrays[0].shape[0]} rows"))

    @classmethod
    def from_npy(cls, x_path, y_path=None, sample_weight_path=None, *,
                 mmap_mode: Optional[str] = "r") -> "Dataset":
        """A dataset of the rows of ``.npy`` files: ``x`` alone, ``(x, y)`` or
        ``(x, y, sample_weight)``.

        The files are memory-mapped (``numpy.load(path, mmap_mode="r")``): reading a
        batch loads only its rows, so a locality under ``tessera run -n N`` touches
        only the rows of its shards. ``mmap_mode=None`` loads them whole."""
        if sample_weight_path is not None and y_path is None:
            raise ValueError("[Dataset.from_npy] sample_weight_path needs y_path")
        paths = [p for p in (x_path, y_path, sample_weight_path) if p is not None]
        arrays = []
        for p in paths:
            p = os.fspath(p)
            if not os.path.isfile(p):
                if os.path.exists(p):
                    raise ValueError(f"[Dataset.from_npy] '{p}' is not a regular file (a device, "
                                     "a pipe or a directory)")
                raise FileNotFoundError(f"[Dataset.from_npy] '{p}' does not exist")
            try:
                a = np.load(p, mmap_mode=mmap_mode, allow_pickle=False)
            except ValueError as e:
                if "empty file" in str(e) or "cannot mmap" in str(e):
                    a = np.load(p, allow_pickle=False)  # no data to map (0 rows)
                else:
                    raise ValueError(f"[Dataset.from_npy] '{p}' cannot be read as a .npy "
                                     f"array: {e}") from None
            except (OSError, EOFError) as e:
                raise ValueError(f"[Dataset.from_npy] '{p}' cannot be read as a .npy "
                                 f"array: {e}") from None
            if not isinstance(a, np.ndarray):
                raise ValueError(f"[Dataset.from_npy] '{p}' is a .npz archive, not one .npy "
                                 "array")
            if a.ndim == 0:
                raise ValueError(f"[Dataset.from_npy] '{p}' holds a scalar; it needs a first "
                                 "axis (the samples)")
            arrays.append(a)
        names = [f"'{os.fspath(p)}'" for p in paths]
        _check_rows("from_npy", arrays, names)
        tree = None if len(arrays) == 1 else ("tuple", [None] * len(arrays))
        label = f"{os.path.basename(os.fspath(x_path))}, {arrays[0].shape[0]} rows"
        return cls._new(_ArraySource(arrays, names, tree, label))

    @classmethod
    def from_generator(cls, fn, element_spec=None) -> "Dataset":
        """A dataset of the samples a generator yields; ``fn`` is the generator
        function (called with no arguments, once per epoch and by every locality).

        Each sample is an array (or number), or a tuple/list/dict of them, like
        ``(x, y)``. ``element_spec``, a sequence of ``(shape, dtype)`` per
        component, fixes the shapes and dtypes; without it they are those of the
        first sample (read by running ``fn`` once more). The number of batches is
        unknown (``len`` raises, ``num_batches()`` is None)."""
        if not callable(fn):
            kind = "a generator: pass the generator function" if hasattr(fn, "__next__") \
                else type(fn).__name__
            raise TypeError(f"[Dataset.from_generator] fn must be a function returning an "
                            f"iterator (it is called once per epoch), got {kind}")
        specs = None
        if element_spec is not None:
            try:
                specs = tuple(Spec(tuple(int(d) for d in shape), np.dtype(dtype))
                              for shape, dtype in element_spec)
            except (TypeError, ValueError) as e:
                raise TypeError(f"[Dataset.from_generator] element_spec must be a sequence of "
                                f"(shape, dtype) pairs, one per component: {e}") from None
            if not specs:
                raise ValueError("[Dataset.from_generator] element_spec is empty")
        source = _GeneratorSource(fn, specs)
        return cls._new(source)

    # ------------------------------------------------------------------ transformations

    def shuffle(self, buffer_size: Optional[int] = None, seed: int = 0,
                reshuffle_each_iteration: Optional[bool] = None) -> "Dataset":
        """Shuffles the samples, differently in every epoch (or, with
        ``reshuffle_each_iteration=False``, in the first epoch's order every epoch, as
        tf.data's) and identically in every run and on every locality.

        From arrays and ``.npy`` files, each epoch is a full permutation drawn by
        tessera's ``permutation`` primitive from (seed, epoch), the order of
        ``data.batches`` (``buffer_size`` is accepted and not needed). From a
        generator, a shuffle buffer of ``buffer_size`` samples (required), seeded
        from (seed, epoch)."""
        if self._plan["stage"] == 2 and self._plan["shard"] is None:
            return self._shuffled_batches(buffer_size, seed, reshuffle_each_iteration)
        if self._plan["shuffle"] is not None:
            raise ValueError("[Dataset.shuffle] the dataset is already shuffled; shuffle once")
        self._stage_check("shuffle", 0)
        if buffer_size is not None:
            buffer_size = _int_arg("shuffle", "buffer_size", buffer_size, 1, "a positive int")
        elif not self._source.indexable:
            raise ValueError("[Dataset.shuffle] a generator dataset needs buffer_size (the "
                             "number of samples held to shuffle among)")
        seed = _int_arg("shuffle", "seed", seed, 0, "an int >= 0")
        if reshuffle_each_iteration is None:
            reshuffle_each_iteration = True
        elif not isinstance(reshuffle_each_iteration, (bool, np.bool_)):
            raise TypeError(f"[Dataset.shuffle] reshuffle_each_iteration must be a bool or "
                            f"None, got {type(reshuffle_each_iteration).__name__}")
        return self._with(stage=1, shuffle=(buffer_size, seed, bool(reshuffle_each_iteration)))

    def _shuffled_batches(self, buffer_size, seed, reshuffle) -> "Dataset":
        """shuffle() after batch(), as tf.data's: whole batches through a shuffle
        buffer of ``buffer_size`` batches, drawn from (seed, epoch)."""
        if buffer_size is None:
            raise ValueError("[Dataset.shuffle] after batch() shuffle needs buffer_size (the "
                             "number of batches held to shuffle among)")
        size = _int_arg("shuffle", "buffer_size", buffer_size, 1, "a positive int")
        seed = _int_arg("shuffle", "seed", seed, 0, "an int >= 0")
        if reshuffle is not None and not isinstance(reshuffle, (bool, np.bool_)):
            raise TypeError(f"[Dataset.shuffle] reshuffle_each_iteration must be a bool or "
                            f"None, got {type(reshuffle).__name__}")
        again = reshuffle is None or bool(reshuffle)

        def make(epoch):
            rng = np.random.default_rng(_mix(seed, epoch if again else 0))
            return _shuffle_buffer(self._elements(epoch), size, rng)

        return self._stream(f"shuffle({size})", make, rows=self._count(), batched=True,
                            spec=self.element_spec, tree=self._element_tree())

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """Groups samples into batches of ``batch_size`` rows. The last batch is
        smaller when ``batch_size`` does not divide the samples, unless
        ``drop_remainder``."""
        batch_size = _int_arg("batch", "batch_size", batch_size, 1, "a positive int")
        if self._plan["batch"] is not None:
            raise ValueError("[Dataset.batch] the dataset is already batched (by "
                             f"{self._plan['batch'][0]}); batch once")
        self._stage_check("batch", 1)
        return self._with(stage=2, batch=(batch_size, bool(drop_remainder)))

    def map(self, fn) -> "Dataset":
        """Applies ``fn`` to every batch (after ``batch`` and ``shard``: to the rows
        this locality reads), or, before ``batch``, to every sample (tf.data's
        per-sample map: a new dataset of ``fn``'s results, read as a generator's
        samples are, its shapes those of the first result). ``fn`` is a ``tessera.jit`` function or any Python
        callable; it is called as ``fn(x, y)`` for a tuple batch ``(x, y)``,
        ``fn(x)`` for one array and ``fn(d)`` for a dict, and returns the new
        batch (an array or a tuple/list/dict of arrays)."""
        if not callable(fn):
            raise TypeError(f"[Dataset.map] fn must be callable, got {type(fn).__name__}")
        if self._plan["stage"] == 3:  # after repeat(): the same as mapping, then repeating
            repeat = self._plan["repeat"]
            before = 2 if self._plan["batch"] is not None else \
                1 if self._plan["shuffle"] is not None else 0
            return self._with(stage=before, repeat=None).map(fn).repeat(
                None if repeat == -1 else repeat)
        if self._plan["batch"] is None:  # per sample, as tf.data's map
            return self._stream(f"map({_name(fn)})", lambda e: (
                _pl.checked(fn, _pl.apply(fn, v)) for v in self._elements(e)),
                rows=self._count())
        self._stage_check("map", 2, need_batch=True)
        return self._with(maps=self._plan["maps"] + (fn,))

    def take(self, count: int) -> "Dataset":
        """The first ``count`` samples (before ``batch``: before or after
        ``shuffle``) or batches (after ``batch``) of every epoch."""
        count = _int_arg("take", "count", count, 0, "an int >= 0")
        stage = self._plan["stage"]
        if stage == 3:
            raise ValueError("[Dataset.take] call take before repeat(): tessera repeats whole "
                             "epochs")
        key = ("take_rows", "take_shuffled", "take_batches")[stage]
        old = self._plan[key]
        return self._with(**{key: count if old is None else min(old, count)})

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """This shard's part of every batch: rows ``[index * n // num_shards,
        (index + 1) * n // num_shards)`` of each batch of ``n`` rows. ``Model.fit``
        shards by itself under ``tessera run -n N``; use this to read one
        locality's part yourself."""
        num_shards, index = _shard_args("shard", num_shards, index)
        self._stage_check("shard", 2, need_batch=True)
        if self._plan["shard"] is not None:
            raise ValueError("[Dataset.shard] the dataset is already sharded; shard once")
        return self._with(shard=(num_shards, index))

    def repeat(self, count: Optional[int] = None) -> "Dataset":
        """Iterating goes through ``count`` epochs (forever with None), epoch ``e``
        shuffled as epoch ``e``. Only iteration repeats: ``epoch_batches`` and
        ``num_batches`` describe one epoch."""
        if count is not None:
            count = _int_arg("repeat", "count", count, 1, "a positive int or None")
        if self._plan["stage"] == 3:
            raise ValueError("[Dataset.repeat] the dataset is already repeated; repeat once")
        return self._with(stage=3, repeat=count if count is not None else -1)

    def prefetch(self, buffer_size: int = 1) -> "Dataset":
        """Produces the next ``buffer_size`` batches in a background thread (named
        ``tessera-prefetch``) while the consumer works on the current one. The
        batches are the same as without; an exception in the thread is raised by
        the consumer at the batch it failed on. 0 turns prefetching off."""
        buffer_size = _int_arg("prefetch", "buffer_size", buffer_size, 0, "an int >= 0")
        return self._with(prefetch=buffer_size)

    def filter(self, predicate) -> "Dataset":
        """The elements (samples, or batches after ``batch``) for which
        ``predicate`` (called as ``map``'s fn is) returns True."""
        if not callable(predicate):
            raise TypeError(f"[Dataset.filter] predicate must be callable, got "
                            f"{type(predicate).__name__}")

        def make(epoch):
            return (v for i, v in enumerate(self._elements(epoch))
                    if _pl.truth(predicate, v, i))

        return self._stream(f"filter({_name(predicate)})", make,
                            batched=self._plan["batch"] is not None)

    def unbatch(self) -> "Dataset":
        """The rows of every element: a batched dataset's samples again (each
        component split along its first axis)."""
        return self._stream("unbatch()", lambda e: _pl.unbatched(self._elements(e)))

    def padded_batch(self, batch_size: int, padded_shapes=None, padding_values=None,
                     drop_remainder: bool = False) -> "Dataset":
        """Batches of samples of different shapes (sequences of different
        lengths): each component padded at the end of every axis to the
        longest of its batch, or to ``padded_shapes`` (per component, a shape
        with None for "the longest"), with ``padding_values`` (0 by default;
        one number, or one per component). The batches differ in shape;
        ``element_spec`` gives the first's."""
        batch_size = _int_arg("padded_batch", "batch_size", batch_size, 1, "a positive int")
        if self._plan["batch"] is not None:
            raise ValueError("[Dataset.padded_batch] the dataset is already batched (by "
                             f"{self._plan['batch'][0]}); batch once")
        specs = self.element_spec
        tree = self._element_tree()
        shapes = _pl.padded_shapes_of(padded_shapes, tree, specs)
        values = _pl.padding_values_of(padding_values, tree, specs)
        drop = bool(drop_remainder)
        count = self._count()
        ds = self._stream(
            f"padded_batch({batch_size})",
            lambda e: _pl.padded_batches(self._elements(e), batch_size, drop, shapes, values,
                                         tree),
            batched=True)  # (its spec: the first batch's)
        if count is not None:
            ds._source.rows = count // batch_size if drop else -(-count // batch_size)
        return ds._with(stage=2, batch=(batch_size, drop))

    @classmethod
    def range(cls, *args) -> "Dataset":
        """The int64 numbers ``range(stop)``, ``range(start, stop)`` or
        ``range(start, stop, step)``, as Python's range."""
        if not 1 <= len(args) <= 3 or not all(
                isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            raise TypeError(f"[Dataset.range] takes 1 to 3 ints (stop; start, stop; start, "
                            f"stop, step), got {args!r}")
        if len(args) == 3 and args[2] == 0:
            raise ValueError("[Dataset.range] step must not be zero")
        values = np.arange(*[int(a) for a in args], dtype=np.int64)
        return cls._new(_ArraySource([values], [""], None, f"range{tuple(args)}"))

    @classmethod
    def zip(cls, *datasets) -> "Dataset":
        """Elements made of one element of each dataset, in the structure given
        (``zip((a, b))``, ``zip(a, b)`` or a dict of datasets); it ends with the
        shortest. Datasets batched alike zip into a batched dataset (for fit)."""
        structure = datasets[0] if len(datasets) == 1 and isinstance(
            datasets[0], (tuple, list, dict)) else tuple(datasets)
        leaves = []
        tree = _flatten(structure, "", leaves, [])
        if not leaves or not all(isinstance(d, Dataset) for d in leaves):
            raise TypeError(f"[Dataset.zip] takes Datasets (or a tuple or dict of them), got "
                            f"{[type(d).__name__ for d in leaves]}")
        counts = [d._count() for d in leaves]

        def make(epoch):
            streams = [d._elements(epoch) for d in leaves]
            try:
                for parts in zip(*streams):
                    yield _build(tree, list(parts))
            finally:
                for it in streams:
                    _close(it)

        rows = None if None in counts else min(counts)
        plans = {d._plan["batch"] for d in leaves}
        batched = len(plans) == 1 and None not in plans  # batches zipped: a batch
        source = _pl.StreamSource(f"zip of {len(leaves)}", make, rows=rows, batched=batched)
        if not batched:
            return cls._new(source)
        return cls._new(source, stage=2, batch=leaves[0]._plan["batch"])

    def concatenate(self, dataset: "Dataset") -> "Dataset":
        """This dataset's elements, then ``dataset``'s (of the same structure
        and dtypes)."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"[Dataset.concatenate] takes a Dataset, got "
                            f"{type(dataset).__name__}")
        mine, theirs = self.element_spec, dataset.element_spec
        if _loose(self._element_tree()) != _loose(dataset._element_tree()) or \
                [s.dtype for s in mine] != [s.dtype for s in theirs] or \
                [len(s.shape) for s in mine] != [len(s.shape) for s in theirs]:
            raise ValueError(f"[Dataset.concatenate] the datasets' elements differ: "
                             f"{_describe(self._element_tree(), len(mine))} {list(mine)} and "
                             f"{_describe(dataset._element_tree(), len(theirs))} "
                             f"{list(theirs)}")

        def make(epoch):
            yield from self._elements(epoch)
            yield from dataset._elements(epoch)

        a, b = self._count(), dataset._count()
        batched = self._plan["batch"] is not None and dataset._plan["batch"] is not None
        return self._stream("concatenate", make, rows=None if None in (a, b) else a + b,
                            batched=batched)

    def enumerate(self, start: int = 0) -> "Dataset":
        """Pairs ``(i, element)``, i an int64 counting from ``start``."""
        start = _int_arg("enumerate", "start", start, -(1 << 62), "an int")

        def make(epoch):
            for i, v in enumerate(self._elements(epoch)):
                yield (np.int64(start + i), v)

        return self._stream("enumerate", make, rows=self._count())

    def cache(self, filename: str = "") -> "Dataset":
        """Keeps the elements of the first complete pass (after the maps before
        it) and replays them in the later epochs, without reading or mapping
        again. With a ``filename``, they are written to that folder (``.npy``
        files and a manifest) and read from it in later runs too."""
        if not isinstance(filename, (str, os.PathLike)):
            raise TypeError(f"[Dataset.cache] filename must be a path, got "
                            f"{type(filename).__name__}")
        specs, tree = self.element_spec, self._element_tree()
        batched = self._plan["batch"] is not None
        keep = _pl.FileCache(filename, specs, tree, batched) if os.fspath(filename) else \
            _pl.MemoryCache()
        ds = self._stream(f"cache({os.fspath(filename)!r})",
                          lambda e: keep.stream(self._elements, e), rows=self._count(),
                          batched=batched, spec=specs, tree=tree)
        return ds

    def as_numpy_iterator(self):
        """The elements as NumPy arrays, in their structure (iterating does the same)."""
        return iter(self)

    def cardinality(self) -> int:
        """The number of elements (batches once batched), with repeat's;
        ``INFINITE_CARDINALITY`` (-1) repeated forever, ``UNKNOWN_CARDINALITY``
        (-2) when unknown (a generator, a filter)."""
        if self._plan["repeat"] == -1:
            return INFINITE_CARDINALITY
        n = self._count()
        return UNKNOWN_CARDINALITY if n is None else n

    def _count(self) -> Optional[int]:
        """The elements of one pass, repeats included (batches once batched),
        None when unknown or endless."""
        n = self.num_batches() if self._plan["batch"] is not None else self._rows()
        repeat = self._plan["repeat"]
        return None if n is None or repeat == -1 else n * (repeat or 1)

    def _element_tree(self):
        """The structure of the elements (after the maps)."""
        self.element_spec  # (finds the maps' results)
        return self._tree if self._plan["maps"] else self._source.tree

    def _elements(self, epoch: int):
        """The elements of epoch `epoch` (its repeats included), each in its
        structure: what a dataset made from this one reads."""
        repeat = self._plan["repeat"]
        if repeat == -1:
            passes = itertools.count(epoch)
        else:
            passes = range(epoch * (repeat or 1), (epoch + 1) * (repeat or 1))
        shard = self._plan["shard"] or (1, 0)
        for p in passes:
            if self._plan["batch"] is None:
                yield from self._samples(p)
            else:
                yield from self._batches(p, shard[0], shard[1], 0, structure=True)

    def _stream(self, label: str, make, rows=None, batched: bool = False, spec=None,
                tree=None) -> "Dataset":
        """A new dataset of the elements `make(epoch)` yields (a batched one
        reads them as its batches)."""
        source = _pl.StreamSource(f"{label} of {self._source.label}", make, rows=rows,
                                  batched=batched, spec=spec, tree=tree)
        if not batched:
            return Dataset._new(source)
        return Dataset._new(source, stage=2, batch=self._plan["batch"])

    def _stage_check(self, where: str, max_stage: int, need_batch: bool = False):
        stage = self._plan["stage"]
        if stage > max_stage:
            before = {1: "shuffle()", 2: "batch()", 3: "repeat()"}[stage]
            raise ValueError(f"[Dataset.{where}] call {where} before {before}: tessera applies "
                             "the transformations in the order take/shuffle, batch, "
                             "map/take/shard, repeat")
        if need_batch and self._plan["batch"] is None:
            raise ValueError(f"[Dataset.{where}] call batch() first: {where} applies to whole "
                             "batches")

    # ------------------------------------------------------------------ properties

    @property
    def batch_size(self) -> Optional[int]:
        """The batch size, or None before ``batch``."""
        return None if self._plan["batch"] is None else self._plan["batch"][0]

    @property
    def element_spec(self) -> Tuple[Spec, ...]:
        """One ``Spec(shape, dtype)`` per component of the batches (or samples) the
        dataset yields, the shape without the batch axis; after ``map``, of the
        map's results (found by running the maps on the first two rows)."""
        if self._spec is None:
            self._spec = self._find_spec()
        return self._spec

    def _find_spec(self):
        specs = self._source.specs()
        if not self._plan["maps"]:
            return specs
        src = self._source
        if src.indexable:
            k = min(2, src.rows)
            if k == 0:
                raise ValueError("[Dataset.element_spec] the dataset is empty, so the shapes "
                                 "the maps return are unknown")
            arrays = src.read(slice(0, k))
        elif getattr(src, "batched", False):  # its first batch
            it = src.samples()
            try:
                arrays = next(it, None)
            finally:
                _close(it)
            if arrays is None:
                raise ValueError("[Dataset.element_spec] the dataset is empty, so the shapes "
                                 "the maps return are unknown")
        else:
            it = src.samples()
            try:
                first = list(itertools.islice(it, 2))
            finally:
                _close(it)
            if not first:
                raise ValueError("[Dataset.element_spec] the generator yielded no samples, so "
                                 "the shapes the maps return are unknown")
            arrays = tuple(np.stack([s[c] for s in first]) for c in range(len(specs)))
        out, self._tree = self._apply_maps(arrays, tree=True)
        return tuple(Spec(tuple(a.shape[1:]), a.dtype) for a in out)

    def num_batches(self) -> Optional[int]:
        """The number of batches of an epoch, or None when unknown (a generator)."""
        if self._plan["batch"] is None:
            raise ValueError("[Dataset.num_batches] the dataset is not batched: call "
                             "batch(batch_size) first")
        batch_size, drop = self._plan["batch"]
        if getattr(self._source, "batched", False):  # a stream of batches: its count
            n = self._source.rows
            if n is None:
                return None
        else:
            rows = self._rows()
            if rows is None:
                return None
            n = rows // batch_size if drop else -(-rows // batch_size)
        take = self._plan["take_batches"]
        return n if take is None else min(n, take)

    def _rows(self) -> Optional[int]:
        """The samples of an epoch (after the row takes), None for a generator."""
        rows = self._source.rows
        if rows is None:
            return None
        for key in ("take_rows", "take_shuffled"):
            if self._plan[key] is not None:
                rows = min(rows, self._plan[key])
        return rows

    def __len__(self) -> int:
        n = self.num_batches() if self._plan["batch"] is not None else self._rows()
        if n is None:
            raise TypeError("[Dataset.__len__] the length of a generator dataset is unknown")
        repeat = self._plan["repeat"]
        if repeat == -1:
            raise TypeError("[Dataset.__len__] the dataset repeats forever")
        return n * (repeat or 1)

    def __repr__(self) -> str:
        p = self._plan
        kind = "arrays" if self._source.indexable else \
            "stream" if isinstance(self._source, _pl.StreamSource) else "generator"
        parts = [f"Dataset.{kind}({self._source.label})"]
        if p["take_rows"] is not None:
            parts.append(f"take({p['take_rows']})")
        if p["shuffle"] is not None:
            again = "" if p["shuffle"][2] else ", reshuffle_each_iteration=False"
            parts.append(f"shuffle(buffer_size={p['shuffle'][0]}, seed={p['shuffle'][1]}{again})")
        if p["take_shuffled"] is not None:
            parts.append(f"take({p['take_shuffled']})")
        if p["batch"] is not None:
            parts.append(f"batch({p['batch'][0]}, drop_remainder={p['batch'][1]})")
        parts += [f"map({getattr(f, '__name__', type(f).__name__)})" for f in p["maps"]]
        if p["take_batches"] is not None:
            parts.append(f"take({p['take_batches']})")
        if p["shard"] is not None:
            parts.append(f"shard({p['shard'][0]}, {p['shard'][1]})")
        if p["repeat"] is not None:
            parts.append("repeat()" if p["repeat"] == -1 else f"repeat({p['repeat']})")
        if p["prefetch"]:
            parts.append(f"prefetch({p['prefetch']})")
        return "<" + ".".join(parts) + ">"

    # ------------------------------------------------------------------ reading

    def epoch_batches(self, epoch: int, *, num_shards: int = 1, shard_index: int = 0,
                      start_batch: int = 0) -> Iterator[Batch]:
        """This shard's part of every global batch of epoch ``epoch``, from global
        batch ``start_batch`` on, as ``Batch(arrays, global_size, index)``.

        The shard of a global batch of n rows is rows ``[shard_index * n //
        num_shards, (shard_index + 1) * n // num_shards)`` (possibly none). The
        order depends only on (seed, epoch): the same on every shard and in every
        run, and ``epoch_batches(e, start_batch=k)`` yields exactly batches k... of
        ``epoch_batches(e)``; from arrays and files the skipped batches are not
        read. A dataset already ``shard``-ed takes num_shards=1 here."""
        if self._plan["batch"] is None:
            raise ValueError("[Dataset.epoch_batches] the dataset is not batched: call "
                             "batch(batch_size) first")
        epoch = _int_arg("epoch_batches", "epoch", epoch, 0, "an int >= 0")
        num_shards, shard_index = _shard_args("epoch_batches", num_shards, shard_index)
        start_batch = _int_arg("epoch_batches", "start_batch", start_batch, 0, "an int >= 0")
        if self._plan["shard"] is not None:
            if num_shards != 1:
                raise ValueError(f"[Dataset.epoch_batches] the dataset is already sharded "
                                 f"({self._plan['shard'][0]} shards); num_shards must be 1, got "
                                 f"{num_shards}")
            num_shards, shard_index = self._plan["shard"]

        def make():
            return self._batches(epoch, num_shards, shard_index, start_batch)

        if self._plan["prefetch"]:
            return _prefetched(make, self._plan["prefetch"])
        return make()

    def __iter__(self):
        repeat = self._plan["repeat"]
        epochs = itertools.count() if repeat == -1 else range(repeat or 1)
        if self._plan["batch"] is None:
            def make():
                for epoch in epochs:
                    yield from self._samples(epoch)
        else:
            shard = self._plan["shard"] or (1, 0)

            def make():
                for epoch in epochs:
                    for b in self._batches(epoch, shard[0], shard[1], 0, structure=True):
                        yield b

        if self._plan["prefetch"]:
            return _prefetched(make, self._plan["prefetch"])
        return make()

    def _order(self, epoch: int):
        """For arrays: the rows of the epoch in order (an int64 array), or the
        number of rows when the order is the natural one."""
        rows = self._source.rows
        if self._plan["take_rows"] is not None:
            rows = min(rows, self._plan["take_rows"])
        if self._plan["shuffle"] is None:
            return self._rows()
        order = _call("permutation", rows, seed=_mix(self._plan["shuffle"][1],
                                                     self._shuffle_epoch(epoch)))
        if self._plan["take_shuffled"] is not None:
            order = order[:self._plan["take_shuffled"]]
        return order

    def _shuffle_epoch(self, epoch: int) -> int:
        """The epoch whose order the shuffle draws: 0 every time without reshuffling."""
        return epoch if self._plan["shuffle"][2] else 0

    def _sample_stream(self, epoch: int):
        """For a generator: the samples of the epoch, shuffled and taken."""
        samples = self._source.samples(epoch)
        try:
            stream = samples
            if self._plan["take_rows"] is not None:
                stream = itertools.islice(stream, self._plan["take_rows"])
            if self._plan["shuffle"] is not None:
                rng = np.random.default_rng(_mix(self._plan["shuffle"][1],
                                                 self._shuffle_epoch(epoch)))
                stream = _shuffle_buffer(stream, self._plan["shuffle"][0], rng)
            if self._plan["take_shuffled"] is not None:
                stream = itertools.islice(stream, self._plan["take_shuffled"])
            yield from stream
        finally:
            samples.close()

    def _samples(self, epoch: int):
        """The samples of an unbatched dataset, each in the source's structure."""
        src = self._source
        if src.indexable:
            order = self._order(epoch)
            rows = range(order) if isinstance(order, int) else order.tolist()
            for i in rows:
                yield _build(src.tree, [np.array(a[i]) if _is_mapped(a) else a[i]
                                        for a in src.arrays])
        else:
            src.specs()
            stream = self._sample_stream(epoch)
            try:
                for s in stream:
                    yield _build(src.tree, s)
            finally:
                _close(stream)

    def _apply_maps(self, arrays, tree=None):
        """Runs the maps on one batch; returns the flat arrays (and the tree with
        ``tree`` given)."""
        out_tree = self._source.tree
        value = _build(out_tree, arrays)
        for fn in self._plan["maps"]:
            value = fn(*value) if isinstance(value, (tuple, list)) else fn(value)
            leaves, names = [], []
            out_tree = _flatten(value, "", leaves, names)
            arrays = tuple(np.asarray(v) for v in leaves)
            for a, name in zip(arrays, names):
                if a.dtype == object:
                    raise TypeError(f"[Dataset.map] {getattr(fn, '__name__', fn)} returned a "
                                    f"non-array {name or 'value'} (dtype object)")
            value = _build(out_tree, arrays)
        return (arrays, out_tree) if tree else arrays

    def _batches(self, epoch, num_shards, shard_index, start_batch, structure=False):
        """The batches of one epoch for one shard: Batch items, or the batches in
        their structure (for iteration)."""
        batch_size, drop = self._plan["batch"]
        limit = self._plan["take_batches"]
        src = self._source
        maps = self._plan["maps"]

        def finish(arrays, n, b):
            try:
                if maps:
                    arrays, tree = self._apply_maps(arrays, tree=True)
                else:
                    tree = src.tree
            except Exception as e:
                e.add_note(f"[Dataset] in map, for batch {b} of epoch {epoch}")
                raise
            return _build(tree, arrays) if structure else Batch(tuple(arrays), n, b)

        if src.indexable:
            order = self._order(epoch)
            rows = order if isinstance(order, int) else len(order)
            stop = rows - rows % batch_size if drop else rows
            count = -(-stop // batch_size)
            if limit is not None:
                count = min(count, limit)
            for b in range(start_batch, count):
                start = b * batch_size
                n = min(start + batch_size, stop) - start
                lo, hi = _shard_range(n, num_shards, shard_index)
                if isinstance(order, int):
                    part = slice(start + lo, start + hi)
                else:
                    part = order[start + lo:start + hi]
                try:
                    arrays = src.read(part)
                except Exception as e:
                    e.add_note(f"[Dataset] reading batch {b} of epoch {epoch}")
                    raise
                yield finish(arrays, n, b)
            return

        specs = src.specs()
        if getattr(src, "batched", False):  # a stream of batches (padded_batch, cache)
            stream = src.samples(epoch)
            try:
                for b, arrays in enumerate(stream):
                    if limit is not None and b >= limit:
                        break
                    if b >= start_batch:
                        n = len(arrays[0])
                        lo, hi = _shard_range(n, num_shards, shard_index)
                        yield finish(tuple(a[lo:hi] for a in arrays) if num_shards > 1 else
                                     arrays, n, b)
            finally:
                _close(stream)
            return
        stream = self._sample_stream(epoch)
        b = 0
        try:
            while limit is None or b < limit:
                try:
                    group = list(itertools.islice(stream, batch_size))
                except Exception as e:
                    e.add_note(f"[Dataset] reading the samples of batch {b} of epoch {epoch}")
                    raise
                n = len(group)
                if n == 0 or (drop and n < batch_size):
                    break
                if b >= start_batch:
                    lo, hi = _shard_range(n, num_shards, shard_index)
                    mine = group[lo:hi]
                    try:
                        arrays = tuple(np.stack([s[c] for s in mine]) if mine else
                                       np.empty((0,) + s.shape, s.dtype)
                                       for c, s in enumerate(specs))
                    except ValueError:
                        shapes = sorted({tuple(np.shape(s[c])) for s in mine
                                         for c in range(len(specs))})
                        raise ValueError(f"[Dataset.batch] the samples of batch {b} differ in "
                                         f"shape ({shapes}): batch samples of one shape, or "
                                         "pad them with padded_batch") from None
                    yield finish(arrays, n, b)
                b += 1
                if n < batch_size:
                    break
        finally:
            _close(stream)

    # ------------------------------------------------------------------ validation

    def validate(self, check, *, num_shards: int = 1, shard_index: int = 0) -> bool:
        """Calls ``check(component_index, start_row, chunk)`` over all the data, in
        chunks of at most 65536 rows (and about 64 MiB), in row order and
        component by component within a chunk; the sample of row r of a chunk is
        ``start_row + r``. The chunks go through the maps, as batches do. Returns
        True, or False when the data cannot be checked up front (a generator, or
        maps that change the number of rows). With num_shards, only this
        shard's part of the rows ([i * n // num_shards, (i + 1) * n // num_shards)
        of all n) is checked."""
        if not callable(check):
            raise TypeError(f"[Dataset.validate] check must be callable, got "
                            f"{type(check).__name__}")
        num_shards, shard_index = _shard_args("validate", num_shards, shard_index)
        src = self._source
        if not src.indexable:
            return False
        rows = src.rows
        if self._plan["take_rows"] is not None:
            rows = min(rows, self._plan["take_rows"])
        lo, hi = _shard_range(rows, num_shards, shard_index)
        row_bytes = sum(a.dtype.itemsize * int(np.prod(a.shape[1:])) for a in src.arrays)
        chunk = max(1, min(_CHUNK_ROWS, _CHUNK_BYTES // max(1, row_bytes)))
        maps = self._plan["maps"]
        for start in range(lo, hi, chunk):
            end = min(start + chunk, hi)
            arrays = src.read(slice(start, end))
            if maps:
                arrays = self._apply_maps(arrays)
                if any(len(a) != end - start for a in arrays):
                    return False
            for c, a in enumerate(arrays):
                check(c, start, a)
        return True


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


_PLAN = dict(stage=0, take_rows=None, shuffle=None, take_shuffled=None, batch=None, maps=(),
             take_batches=None, shard=None, repeat=None, prefetch=0)


def _check_rows(where: str, arrays, names) -> None:
    counts = [a.shape[0] for a in arrays]
    if len(set(counts)) > 1:
        listed = ", ".join(f"{c} ({n or 'elements'})" for c, n in zip(counts, names))
        raise ValueError(f"[Dataset.{where}] all components must have the same number of "
                         f"samples (first axis), got {listed}")
