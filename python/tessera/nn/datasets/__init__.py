"""keras.datasets for code written against Keras: the data sets that the
machine's packages ship (Fashion-MNIST, from Debian's dataset-fashion-mnist)."""

from . import fashion_mnist

__all__ = ["fashion_mnist"]
