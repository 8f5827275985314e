"""keras.backend for code written against Keras 3: the calls keras-io's examples make
(`keras.backend.clear_session()` before building a model again) and the global
settings, shared with keras.config (tessera.nn.config says what each changes)."""

import numpy as np

from .config import (backend, epsilon, floatx, image_data_format, set_epsilon, set_floatx,
                     set_image_data_format)
from .ops._base import lattice_bound
from .utils import clear_session, is_keras_tensor, standardize_dtype

__all__ = ["backend", "clear_session", "epsilon", "floatx", "image_data_format",
           "is_float_dtype", "is_int_dtype", "is_keras_tensor", "result_type", "set_epsilon",
           "set_floatx", "set_image_data_format", "standardize_dtype"]


def is_float_dtype(dtype) -> bool:
    """Whether dtype (a name, a NumPy dtype or a tensor's) is a floating type."""
    return np.issubdtype(np.dtype(standardize_dtype(dtype)), np.floating)


def is_int_dtype(dtype) -> bool:
    """Whether dtype (a name, a NumPy dtype or a tensor's) is an integer type."""
    return np.issubdtype(np.dtype(standardize_dtype(dtype)), np.integer)


def result_type(*dtypes) -> str:
    """Keras's type promotion (keras.backend.result_type, JAX's lattice): dtype names, or
    Python's int, float and bool as weakly typed numbers; ("int32", float) is float32,
    ("bool", int) int32. None is the float dtype. Unlike Keras on JAX, 64-bit dtypes stay
    64-bit (tessera's arrays hold them)."""
    if not dtypes:
        return floatx()
    weak = {int: "int", float: "float", bool: "bool"}
    places = [weak[d] if d in (int, float, bool) else
              floatx() if d is None else standardize_dtype(d) for d in dtypes]
    return lattice_bound(places)
