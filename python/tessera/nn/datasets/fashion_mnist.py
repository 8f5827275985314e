"""keras.datasets.fashion_mnist: load_data() reads Debian's
dataset-fashion-mnist package (tessera.data.load_fashion_mnist) and returns
Keras's arrays: uint8 images of shape (N, 28, 28) and uint8 labels."""

import numpy as np

from ... import data

__all__ = ["load_data"]


def load_data():
    """((x_train, y_train), (x_test, y_test)): 60000 and 10000 uint8 images
    (28, 28) in 0..255 with uint8 labels 0..9, as keras.datasets.fashion_mnist."""
    out = []
    for split in ("train", "test"):
        x, y = data.load_fashion_mnist(split)
        out.append((np.rint(x[..., 0] * 255.0).astype(np.uint8), y.astype(np.uint8)))
    return tuple(out)
