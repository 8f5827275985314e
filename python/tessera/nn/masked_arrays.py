"""An eager layer call's output that carries its mask (Keras's `y._keras_mask`):
a NumPy array subclass, and the function that attaches a mask to a value."""

from __future__ import annotations

import numpy as np


class _MaskedOutput(np.ndarray):
    """An eager layer call's output that carries its mask, as Keras's outputs
    do (`y._keras_mask`, read by the next layer called on `y`). NumPy's
    operations on it give plain arrays (as the mask is lost on Keras's too)."""

    _keras_mask = None

    def __array_finalize__(self, obj):
        self._keras_mask = None  # views and copies: no mask

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, _MaskedOutput) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, _MaskedOutput) else x
                                  for x in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def __repr__(self):
        return repr(self.view(np.ndarray))

    def __reduce__(self):  # pickled (or copied by copy.copy) as a plain array
        return self.view(np.ndarray).__reduce__()


def _with_mask(value, mask):
    """`value` (an array) carrying `mask` as `_keras_mask`; as it is without one."""
    if mask is None:
        return value
    out = np.asarray(value).view(_MaskedOutput)
    out._keras_mask = np.asarray(mask).astype(bool)
    return out
