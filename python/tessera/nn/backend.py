"""keras.backend for code written against Keras 3: the calls keras-io's examples make
(`keras.backend.clear_session()` before building a model again) and the global
settings, shared with keras.config (tessera.nn.config says what each changes)."""

import numpy as np

from .config import (backend, epsilon, floatx, image_data_format, set_epsilon, set_floatx,
                     set_image_data_format)
from .utils import clear_session, is_keras_tensor, standardize_dtype

__all__ = ["backend", "clear_session", "epsilon", "floatx", "image_data_format",
           "is_float_dtype", "is_int_dtype", "is_keras_tensor", "set_epsilon", "set_floatx",
           "set_image_data_format", "standardize_dtype"]


def is_float_dtype(dtype) -> bool:
    """Whether dtype (a name, a NumPy dtype or a tensor's) is a floating type."""
    return np.issubdtype(np.dtype(standardize_dtype(dtype)), np.floating)


def is_int_dtype(dtype) -> bool:
    """Whether dtype (a name, a NumPy dtype or a tensor's) is an integer type."""
    return np.issubdtype(np.dtype(standardize_dtype(dtype)), np.integer)
