"""keras.preprocessing for code written against Keras 3: its dataset makers and
its `image` and `sequence` helpers, the same functions as in tessera.nn.utils
(Keras 3 keeps the module for Keras 2 code: keras-io's examples call
`keras.preprocessing.timeseries_dataset_from_array`)."""

from ..utils import (image_dataset_from_directory, text_dataset_from_directory,
                     timeseries_dataset_from_array)
from . import image, sequence

__all__ = ["image", "image_dataset_from_directory", "sequence", "text_dataset_from_directory",
           "timeseries_dataset_from_array"]
