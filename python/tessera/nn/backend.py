"""keras.backend for code written against Keras 3: the calls keras-io's examples make
(`keras.backend.clear_session()` before building a model again) and the read-only
settings. tessera is its own backend: it computes in float32 unless a model or layer
says float64 and takes channels_last unless a layer says channels_first, so the
setters Keras has here (set_floatx, set_epsilon, set_image_data_format) are not."""

import numpy as np

from .utils import clear_session, is_keras_tensor, standardize_dtype

__all__ = ["backend", "clear_session", "epsilon", "floatx", "image_data_format",
           "is_float_dtype", "is_int_dtype", "is_keras_tensor", "standardize_dtype"]


def backend() -> str:
    """The name of the framework computing ("tessera"; Keras says "jax", "torch", ...)."""
    return "tessera"


def floatx() -> str:
    """The default float type of weights and computations: "float32", as Keras's."""
    return "float32"


def epsilon() -> float:
    """The fuzz factor Keras's losses and metrics add: 1e-7, as Keras's default."""
    return 1e-7


def image_data_format() -> str:
    """The default layout of images: "channels_last", as Keras's."""
    return "channels_last"


def is_float_dtype(dtype) -> bool:
    """Whether dtype (a name, a NumPy dtype or a tensor's) is a floating type."""
    return np.issubdtype(np.dtype(standardize_dtype(dtype)), np.floating)


def is_int_dtype(dtype) -> bool:
    """Whether dtype (a name, a NumPy dtype or a tensor's) is an integer type."""
    return np.issubdtype(np.dtype(standardize_dtype(dtype)), np.integer)
