"""tessera.nn: Keras-like layers and Sequential models whose training step
(forward, backward, update) is one compiled tessera program."""

from .layers import (Activation, AveragePooling1D, AveragePooling2D, AvgPool1D, AvgPool2D,
                     BatchNormalization, Conv1D, Conv2D, Dense, Dropout, Flatten, Layer,
                     MaxPool1D, MaxPool2D, MaxPooling1D, MaxPooling2D)
from . import losses
from .model import History, Sequential

__all__ = ["Activation", "AveragePooling1D", "AveragePooling2D", "AvgPool1D", "AvgPool2D",
           "BatchNormalization", "Conv1D", "Conv2D", "Dense", "Dropout", "Flatten", "History",
           "Layer", "MaxPool1D", "MaxPool2D", "MaxPooling1D", "MaxPooling2D", "Sequential",
           "losses"]
