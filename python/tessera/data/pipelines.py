"""The tf.data transformations that do not fit Dataset's fixed plan (per-sample
``map``, ``filter``, ``unbatch``, ``padded_batch``, ``zip``, ``concatenate``,
``enumerate``, ``cache``): each makes a new source, a stream of the parent
dataset's elements changed as it is read, epoch by epoch; and ``cache``'s
files, ``.npy`` shards written in a temporary folder renamed into place."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading

import numpy as np

from .structure import Spec, _build, _close, _describe, _flatten, _loose

__all__ = ["StreamSource", "MemoryCache", "FileCache"]

# the dtypes a cache file may hold (no objects: nothing is unpickled)
_CACHE_KINDS = "biufc"
_CACHE_VERSION = 1
_MANIFEST = "manifest.json"


class StreamSource:
    """A stream of elements made from other datasets: `make(epoch)` yields
    each element in its structure. `rows`: the elements of an epoch, when
    known; `batched`: the elements are batches (padded_batch, the cache of a
    batched dataset), so the dataset reads them as its batches."""

    indexable = False

    def __init__(self, label: str, make, rows=None, batched: bool = False, spec=None,
                 tree=None):
        self.label = label
        self.make = make
        self.rows = rows
        self.batched = batched
        self.spec = spec
        self.tree = tree

    def specs(self):
        """Each component's (shape, dtype), from the first element (without
        the batch axis of a batched stream's): later ones may differ in shape."""
        if self.spec is None:
            it = self.make(0)
            try:
                first = next(it, None)
            finally:
                _close(it)
            if first is None:
                raise ValueError(f"[Dataset] {self.label} yields no elements, so the shapes "
                                 "of its elements are unknown")
            leaves = []
            self.tree = _flatten(first, "", leaves, [])
            arrays = [np.asarray(v) for v in leaves]
            cut = 1 if self.batched else 0
            self.spec = tuple(Spec(a.shape[cut:], a.dtype) for a in arrays)
        return self.spec

    def samples(self, epoch: int = 0):
        """The elements of epoch `epoch`, each a tuple of arrays."""
        specs = self.specs()
        it = self.make(epoch)
        try:
            for i, element in enumerate(it):
                leaves = []
                tree = _flatten(element, "", leaves, [])
                if _loose(tree) != _loose(self.tree):
                    raise ValueError(f"[Dataset] element {i} of {self.label} is "
                                     f"{_describe(tree, len(leaves))}, but its elements are "
                                     f"{_describe(self.tree, len(specs))}")
                out = []
                for c, (v, s) in enumerate(zip(leaves, specs)):
                    a = np.asarray(v)
                    if a.dtype != s.dtype:
                        if a.dtype == object or not np.can_cast(a.dtype, s.dtype, "same_kind"):
                            raise TypeError(f"[Dataset] component {c} of element {i} of "
                                            f"{self.label} has dtype {a.dtype}, the first had "
                                            f"{s.dtype}")
                        a = a.astype(s.dtype)
                    out.append(a[()] if a.ndim == 0 else a)  # (a NumPy scalar, as a row's)
                yield tuple(out)
        finally:
            _close(it)


def apply(fn, element):
    """fn on one element, as tf.data calls it: a tuple's parts as arguments,
    anything else (an array, a dict) as the one argument."""
    return fn(*element) if isinstance(element, tuple) else fn(element)


def checked(fn, value):
    """A map's result, its leaves as arrays (none of dtype object)."""
    leaves, names = [], []
    tree = _flatten(value, "", leaves, names)
    arrays = [np.asarray(v) for v in leaves]
    for a, name in zip(arrays, names):
        if a.dtype == object:
            raise TypeError(f"[Dataset.map] {getattr(fn, '__name__', fn)} returned a "
                            f"non-array {name or 'value'} (dtype object)")
    return _build(tree, arrays)


def truth(predicate, element, i: int) -> bool:
    """filter's predicate on element i: one boolean (a scalar or one-element array)."""
    got = np.asarray(apply(predicate, element))
    if got.size != 1 or got.dtype.kind not in "biu":
        raise TypeError(f"[Dataset.filter] {getattr(predicate, '__name__', predicate)} must "
                        f"return one boolean, got {got.dtype} of shape {got.shape} for "
                        f"element {i}")
    return bool(got.reshape(()))


def unbatched(elements):
    """The rows of each element (a batch): its components split along their
    first axis."""
    for i, element in enumerate(elements):
        leaves = []
        tree = _flatten(element, "", leaves, [])
        arrays = [np.asarray(v) for v in leaves]
        if any(a.ndim == 0 for a in arrays):
            raise ValueError(f"[Dataset.unbatch] element {i} has a scalar component; each "
                             "needs a first axis to split")
        counts = {len(a) for a in arrays}
        if len(counts) > 1:
            raise ValueError(f"[Dataset.unbatch] the components of element {i} have "
                             f"different numbers of rows: {sorted(counts)}")
        for r in range(len(arrays[0])):
            yield _build(tree, [a[r] for a in arrays])


def by_tree(where: str, what: str, tree, value, out: list) -> list:
    """`value`'s parts, one per component of elements of structure `tree`
    (padded_batch's padded_shapes and padding_values)."""
    if tree is None:
        out.append(value)
    elif tree[0] == "dict":
        if not isinstance(value, dict) or set(value) != set(tree[1]):
            raise ValueError(f"[Dataset.{where}] {what} must be a dict with the keys "
                             f"{list(tree[1])} of the elements, got {value!r}")
        for key, t in zip(tree[1], tree[2]):
            by_tree(where, what, t, value[key], out)
    else:
        if not isinstance(value, (tuple, list)) or len(value) != len(tree[1]):
            raise ValueError(f"[Dataset.{where}] {what} must have one entry per part of the "
                             f"elements ({len(tree[1])}), got {value!r}")
        for t, v in zip(tree[1], value):
            by_tree(where, what, t, v, out)
    return out


def padded_shapes_of(padded_shapes, tree, specs) -> list:
    """One target shape per component (None along an axis: the batch's longest)."""
    if padded_shapes is None:
        return [(None,) * len(s.shape) for s in specs]
    shapes = by_tree("padded_batch", "padded_shapes", tree, padded_shapes, [])
    out = []
    for c, (shape, s) in enumerate(zip(shapes, specs)):
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else shape
        if not isinstance(shape, tuple) or len(shape) != len(s.shape) or not all(
                d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                              and d >= 0) for d in shape):
            raise ValueError(f"[Dataset.padded_batch] padded_shapes of component {c} must be "
                             f"{len(s.shape)} ints >= 0 or None (its samples have "
                             f"{len(s.shape)} axes), got {shape!r}")
        out.append(shape)
    return out


def padding_values_of(padding_values, tree, specs) -> list:
    """One padding value per component (0 by default, as tf.data's)."""
    if padding_values is None:
        return [0] * len(specs)
    if tree is None or not isinstance(padding_values, (tuple, list, dict)):
        values = [padding_values] * len(specs)
    else:
        values = by_tree("padded_batch", "padding_values", tree, padding_values, [])
    for c, (v, s) in enumerate(zip(values, specs)):
        if np.ndim(v) != 0 or not np.can_cast(np.asarray(v).dtype, s.dtype, "same_kind"):
            raise ValueError(f"[Dataset.padded_batch] the padding value of component {c} must "
                             f"be one number of its dtype {s.dtype}, got {v!r}")
    return values


def padded_batches(elements, batch_size: int, drop: bool, shapes, values, tree):
    """Batches of `batch_size` elements (samples, in structure `tree`), each
    component padded at the end of every axis to the batch's longest (or to
    its padded shape, None along an axis for the longest) with its value."""
    group = []
    b = 0

    def pad(group, b):
        out = []
        for c in range(len(group[0])):
            parts = [np.asarray(s[c]) for s in group]
            ndim = parts[0].ndim
            if any(p.ndim != ndim for p in parts) or len(shapes[c]) != ndim:
                raise ValueError(f"[Dataset.padded_batch] component {c} of batch {b} mixes "
                                 f"samples of {sorted({p.ndim for p in parts})} dimensions "
                                 f"(the first sample had {len(shapes[c])})")
            longest = [max(p.shape[d] for p in parts) for d in range(ndim)]
            target = shapes[c]
            for d, (want, most) in enumerate(zip(target, longest)):
                if want is not None and most > want:
                    raise ValueError(f"[Dataset.padded_batch] component {c} of batch {b} has "
                                     f"a sample of length {most} along axis {d}, longer than "
                                     f"its padded shape {tuple(target)}")
            full = [most if want is None else want for want, most in zip(target, longest)]
            batch = np.full([len(parts)] + full, values[c], dtype=parts[0].dtype)
            for i, p in enumerate(parts):
                batch[(i,) + tuple(slice(0, k) for k in p.shape)] = p
            out.append(batch)
        return _build(tree, out)

    for e in elements:
        leaves = []
        _flatten(e, "", leaves, [])
        group.append(leaves)
        if len(group) == batch_size:
            yield pad(group, b)
            group, b = [], b + 1
    if group and not drop:
        yield pad(group, b)


class MemoryCache:
    """cache(): the first complete pass's elements, replayed after; a pass
    left unfinished is not kept (tf.data's)."""

    def __init__(self):
        self.elements = None
        self.lock = threading.Lock()

    def stream(self, parent_elements, epoch: int):
        if self.elements is not None:
            yield from self.elements
            return
        kept = []
        for e in parent_elements(epoch):
            kept.append(e)
            yield e
        with self.lock:
            if self.elements is None:
                self.elements = kept


class FileCache:
    """cache(filename): the first complete pass written to the folder
    `filename` (.npy shards and a manifest, in a temporary folder beside it
    renamed into place, so a reader finds it whole or not at all), read back
    in later passes and later runs. Reading checks every file against the
    manifest: no pickles, no symbolic links, no sizes merely claimed."""

    def __init__(self, path: str, specs, tree, batched: bool):
        self.path = os.path.abspath(os.fspath(path))
        self.specs = specs
        self.tree = tree
        self.batched = batched  # (its elements have a batch axis more)

    def stream(self, parent_elements, epoch: int):
        if os.path.lexists(self.path):
            yield from (_build(self.tree, e) for e in self._read())
            return
        kept = []
        for e in parent_elements(epoch):
            leaves = []
            _flatten(e, "", leaves, [])
            kept.append([np.asarray(v) for v in leaves])
            yield e
        self._write(kept)

    def _write(self, elements):
        parent = os.path.dirname(self.path)
        tmp = tempfile.mkdtemp(prefix=os.path.basename(self.path) + ".tmp-", dir=parent)
        try:
            shards = []
            start = 0
            while start < len(elements):
                shapes = [a.shape for a in elements[start]]
                end = start + 1
                while end < len(elements) and [a.shape for a in elements[end]] == shapes:
                    end += 1
                k = len(shards)
                for c in range(len(shapes)):
                    np.save(os.path.join(tmp, f"s{k}_c{c}.npy"),
                            np.stack([e[c] for e in elements[start:end]]), allow_pickle=False)
                shards.append(end - start)
                start = end
            manifest = {"version": _CACHE_VERSION, "components": len(self.specs),
                        "dtypes": [np.dtype(s.dtype).str for s in self.specs],
                        "shards": shards}
            with open(os.path.join(tmp, _MANIFEST), "w", encoding="utf-8") as f:
                json.dump(manifest, f)
            try:
                os.rename(tmp, self.path)
            except OSError:
                if not os.path.isdir(self.path):  # (another process's is there: keep it)
                    raise
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)

    def _error(self, what: str) -> ValueError:
        return ValueError(f"[Dataset.cache] '{self.path}' is not a cache tessera wrote: {what}")

    def _read(self):
        if os.path.islink(self.path) or not os.path.isdir(self.path):
            raise self._error("not a folder (or a symbolic link)")
        manifest = self._open(_MANIFEST, 1 << 20)
        try:
            m = json.loads(manifest.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise self._error(f"its manifest is not JSON ({e})") from None
        n = len(self.specs)
        if not isinstance(m, dict) or m.get("version") != _CACHE_VERSION or \
                m.get("components") != n or \
                m.get("dtypes") != [np.dtype(s.dtype).str for s in self.specs] or \
                not isinstance(m.get("shards"), list) or \
                not all(isinstance(k, int) and not isinstance(k, bool) and k > 0
                        for k in m["shards"]):
            raise self._error("its manifest does not describe this dataset's elements "
                              f"({n} components of dtypes "
                              f"{[str(s.dtype) for s in self.specs]})")
        for k, count in enumerate(m["shards"]):
            parts = [self._array(f"s{k}_c{c}.npy", count, self.specs[c]) for c in range(n)]
            for i in range(count):
                yield tuple(p[i] for p in parts)

    def _file(self, name: str):
        """The cache's file `name`, opened for reading without following a link."""
        path = os.path.join(self.path, name)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as e:
            raise self._error(f"{name} cannot be opened ({e.strerror})") from None
        return os.fdopen(fd, "rb")

    def _open(self, name: str, limit: int) -> bytes:
        with self._file(name) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise self._error(f"{name} is larger than {limit} bytes")
        return data

    def _array(self, name: str, count: int, spec):
        with self._file(name) as f:
            size = os.fstat(f.fileno()).st_size
            try:
                version = np.lib.format.read_magic(f)
                header = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                          np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = header(f)
            except ValueError as e:
                raise self._error(f"{name} is not a .npy array ({e})") from None
            if dtype.kind not in _CACHE_KINDS or dtype != spec.dtype or fortran or \
                    not shape or shape[0] != count or \
                    len(shape) != len(spec.shape) + 1 + self.batched:
                raise self._error(f"{name} holds {dtype} {shape}, the manifest says {count} "
                                  f"elements of {spec.dtype} and "
                                  f"{len(spec.shape) + self.batched} axes")
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if f.tell() + nbytes != size:
                raise self._error(f"{name} is {size} bytes, its header claims "
                                  f"{f.tell() + nbytes}")
            data = bytearray(nbytes)
            if f.readinto(data) != nbytes:
                raise self._error(f"{name} ends early")
        return np.frombuffer(data, dtype=dtype).reshape(shape)
