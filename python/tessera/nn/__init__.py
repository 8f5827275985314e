"""tessera.nn: Keras-like layers and models (functional, Sequential,
subclassed) whose training step (forward, backward, update) is one compiled
tessera program."""

from . import callbacks, initializers, losses, metrics, regularizers
from .layers import (Activation, AveragePooling1D, AveragePooling2D, AvgPool1D, AvgPool2D,
                     BatchNormalization, Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose,
                     DepthwiseConv1D, DepthwiseConv2D, Dense, Dropout, Embedding, Flatten,
                     GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAvgPool1D,
                     GlobalAvgPool2D, GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPooling1D,
                     GlobalMaxPooling2D, Identity, Layer, LayerNormalization, MaxPool1D,
                     MaxPool2D, MaxPooling1D, MaxPooling2D, Permute, RepeatVector, Reshape)
from .model import History, Model, Sequential
from .symbolic import Input, KerasTensor

__all__ = [
    "Activation", "AveragePooling1D", "AveragePooling2D", "AvgPool1D", "AvgPool2D",
    "BatchNormalization", "Conv1D", "Conv1DTranspose", "Conv2D", "Conv2DTranspose",
    "DepthwiseConv1D", "DepthwiseConv2D", "Dense", "Dropout", "Embedding", "Flatten",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAvgPool1D", "GlobalAvgPool2D",
    "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "History",
    "Identity", "Input", "KerasTensor", "Layer", "LayerNormalization", "MaxPool1D", "MaxPool2D",
    "MaxPooling1D", "MaxPooling2D", "Model", "Permute", "RepeatVector", "Reshape", "Sequential",
    "callbacks", "initializers", "losses", "metrics", "regularizers",
]
