"""The pieces of a Dataset's elements: ``Spec`` (a component's shape and
dtype), ``Batch``, and nested structures of arrays flattened into leaves and a
tree that rebuilds them."""

from __future__ import annotations

from typing import Iterator, NamedTuple, Tuple

import numpy as np

__all__ = ["Spec", "Batch"]

class Spec(NamedTuple):
    """One component of a dataset's elements: the shape of a sample (without the
    batch axis) and its dtype."""

    shape: Tuple[int, ...]
    dtype: np.dtype


class Batch(NamedTuple):
    """One shard's part of a global batch (``Dataset.epoch_batches``).

    ``arrays``: a tuple of NumPy arrays, one per component (e.g. ``(x, y)`` or
    ``(x, y, sample_weight)``), holding this shard's rows; ``global_size``: the
    number of rows of the whole global batch; ``index``: the global batch number
    within the epoch (0-based)."""

    arrays: Tuple[np.ndarray, ...]
    global_size: int
    index: int


def _int_arg(where: str, name: str, value, minimum: int, what: str) -> int:
    """``value`` as an int >= ``minimum``; TypeError / ValueError in tessera's style."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"[Dataset.{where}] {name} must be {what}, got {value!r}")
    if value < minimum:
        raise ValueError(f"[Dataset.{where}] {name} must be {what}, got {value!r}")
    return int(value)


def _shard_args(where: str, num_shards, shard_index) -> Tuple[int, int]:
    num_shards = _int_arg(where, "num_shards", num_shards, 1, "a positive int")
    shard_index = _int_arg(where, "shard_index", shard_index, 0, "an int >= 0")
    if shard_index >= num_shards:
        raise ValueError(f"[Dataset.{where}] shard_index must be in [0, {num_shards}) for "
                         f"num_shards={num_shards}, got {shard_index}")
    return num_shards, shard_index


def _shard_range(n: int, num_shards: int, shard_index: int) -> Tuple[int, int]:
    """Rows [lo, hi) of a batch of n rows that shard ``shard_index`` of
    ``num_shards`` takes (the split of nn.Model's ``_shard``)."""
    return shard_index * n // num_shards, (shard_index + 1) * n // num_shards


# Nested structures of arrays: flattened into a list of leaves plus a tree that
# rebuilds them. A tree is None (a leaf), ("tuple", children), ("list",
# children) or ("dict", keys, children).


def _is_structure(obj) -> bool:
    """Tuples and dicts are structure; a list is structure when it holds arrays,
    tuples, lists or dicts, and data (one array, as np.asarray reads it) when it
    holds numbers."""
    if isinstance(obj, (tuple, dict)):
        return True
    if isinstance(obj, list):
        return any(isinstance(v, (np.ndarray, tuple, list, dict)) and
                   not (isinstance(v, list) and not _is_structure(v)) for v in obj)
    return False


def _flatten(obj, name: str, leaves: list, names: list):
    if isinstance(obj, dict) and _is_structure(obj):
        keys = list(obj)
        return ("dict", keys, [_flatten(obj[k], f"{name}[{k!r}]", leaves, names) for k in keys])
    if isinstance(obj, (tuple, list)) and _is_structure(obj):
        kind = "tuple" if isinstance(obj, tuple) else "list"
        return (kind, [_flatten(v, f"{name}[{i}]", leaves, names) for i, v in enumerate(obj)])
    leaves.append(obj)
    names.append(name)
    return None


def _unflatten(tree, leaves: Iterator):
    if tree is None:
        return next(leaves)
    if tree[0] == "dict":
        return {k: _unflatten(t, leaves) for k, t in zip(tree[1], tree[2])}
    items = [_unflatten(t, leaves) for t in tree[1]]
    return tuple(items) if tree[0] == "tuple" else items


def _build(tree, arrays):
    return _unflatten(tree, iter(arrays))


def _close(it) -> None:
    close = getattr(it, "close", None)
    if close is not None:
        close()


def _loose(tree):
    """A tree with tuples and lists alike."""
    if tree is None:
        return None
    if tree[0] == "dict":
        return ("dict", tree[1], [_loose(t) for t in tree[2]])
    return ("seq", [_loose(t) for t in tree[1]])


_NOTHING = object()


def _describe(tree, n: int) -> str:
    if tree is None:
        return "one array"
    kind = {"tuple": "a tuple", "list": "a list", "dict": "a dict"}[tree[0]]
    keys = f" with keys {tree[1]}" if tree[0] == "dict" else ""
    return f"{kind}{keys} of {n} array{'s' if n != 1 else ''}"
