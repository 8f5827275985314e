"""keras.utils for code written against Keras: to_categorical and
set_random_seed."""

from __future__ import annotations

import numpy as np

__all__ = ["set_random_seed", "to_categorical"]


def to_categorical(x, num_classes=None):
    """One-hot float32 rows for integer class labels, like
    keras.utils.to_categorical: shape x.shape + (num_classes,), a last axis of
    1 dropped first; num_classes defaults to max(x) + 1."""
    y = np.asarray(x)
    if y.ndim > 1 and y.shape[-1] == 1:
        y = y.reshape(y.shape[:-1])
    if y.size and not np.all(np.equal(np.mod(y, 1), 0)):
        raise ValueError("[to_categorical] labels must be integers (class indices)")
    y = y.astype(np.int64)
    if num_classes is None:
        num_classes = int(y.max()) + 1 if y.size else 0
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        bad = y[(y < 0) | (y >= num_classes)].flat[0]
        raise ValueError(f"[to_categorical] label {bad} is out of range for num_classes="
                         f"{num_classes}")
    out = np.zeros(y.shape + (num_classes,), dtype=np.float32)
    np.put_along_axis(out, y[..., None], 1.0, axis=-1)
    return out


def set_random_seed(seed):
    """Seeds Python's random, NumPy's global generator and tessera's global
    generator (what unseeded initializers draw from), like
    keras.utils.set_random_seed."""
    import random  # noqa: PLC0415

    from .. import _core  # noqa: PLC0415

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"[set_random_seed] seed must be an int, got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed) % 2**32)
    _core.call_primitive("set_seed", [int(seed)], {})
