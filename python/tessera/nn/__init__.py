"""tessera.nn: Keras-like layers and models (functional, Sequential,
subclassed) whose training step (forward, backward, update) is one compiled
tessera program."""

from . import callbacks, initializers, losses, metrics, regularizers, saving
from . import datasets, models, optimizers, utils  # keras.datasets, keras.models, ...: aliases
from . import activations, ops, random  # keras.activations, keras.ops, keras.random
from .layers import (Activation, AveragePooling1D, AveragePooling2D, AvgPool1D, AvgPool2D,
                     BatchNormalization, Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose,
                     DepthwiseConv1D, DepthwiseConv2D, Dense, Dropout, Embedding, Flatten,
                     GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAvgPool1D,
                     GlobalAvgPool2D, GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPooling1D,
                     GlobalMaxPooling2D, Identity, Layer, LayerNormalization, MaxPool1D,
                     MaxPool2D, MaxPooling1D, MaxPooling2D, Permute, RepeatVector, Reshape)
from .activation_layers import ELU, LeakyReLU, PReLU, ReLU, Softmax
from .attention import MultiHeadAttention
from .attention_layers import AdditiveAttention, Attention
from .core_layers import InputLayer, Lambda
from .merging import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add,
                      average, concatenate, maximum, minimum, multiply, subtract)
from .model import History, Model, Sequential
from .normalization import GroupNormalization, Normalization, Rescaling, UnitNormalization
from .noise import (ActivityRegularization, AlphaDropout, GaussianDropout, GaussianNoise,
                    SpatialDropout1D, SpatialDropout2D, SpatialDropout3D)
from .parallel import ColumnParallelDense, RowParallelDense
from .parallel_layers import (ColumnParallelConv1D, ColumnParallelConv2D,
                              ParallelMultiHeadAttention, RowParallelConv1D, RowParallelConv2D,
                              VocabParallelEmbedding)
from .parallel_losses import (VocabParallelSparseCategoricalAccuracy,
                              VocabParallelSparseCategoricalCrossentropy)
from .image_preprocessing import (CenterCrop, RandomContrast, RandomCrop, RandomFlip,
                                  RandomRotation, RandomTranslation, RandomZoom, Resizing)
from .preprocessing import (CategoryEncoding, Discretization, Hashing, IntegerLookup,
                            StringLookup, TextVectorization)
from .recurrent import GRU, LSTM, SimpleRNN
from .reshaping import (Cropping1D, Cropping2D, UpSampling1D, UpSampling2D, ZeroPadding1D,
                        ZeroPadding2D)
from .saving import load_model, register_keras_serializable
from .separable import (SeparableConv1D, SeparableConv2D, SeparableConvolution1D,
                        SeparableConvolution2D)
from .symbolic import Input, KerasTensor
from .variables import Variable
from .wrappers import (GRUCell, LSTMCell, Bidirectional, Masking, RNN, SimpleRNNCell,
                       StackedRNNCells, TimeDistributed)

__all__ = [
    "Add", "Average", "Concatenate", "Dot", "GRU", "LSTM", "Maximum", "Minimum", "Multiply",
    "MultiHeadAttention", "SimpleRNN", "Subtract", "add", "average", "concatenate", "load_model",
    "maximum", "minimum", "multiply", "register_keras_serializable", "subtract",
    "Activation", "AveragePooling1D", "AveragePooling2D", "AvgPool1D", "AvgPool2D",
    "BatchNormalization", "ColumnParallelDense", "Conv1D", "Conv1DTranspose", "Conv2D",
    "Conv2DTranspose",
    "DepthwiseConv1D", "DepthwiseConv2D", "Dense", "Dropout", "Embedding", "Flatten",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAvgPool1D", "GlobalAvgPool2D",
    "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "History",
    "Identity", "Input", "KerasTensor", "Layer", "LayerNormalization", "MaxPool1D", "MaxPool2D",
    "MaxPooling1D", "MaxPooling2D", "Model", "Permute", "RepeatVector", "Reshape",
    "RowParallelDense", "Sequential", "ColumnParallelConv1D", "ColumnParallelConv2D",
    "ParallelMultiHeadAttention", "RowParallelConv1D", "RowParallelConv2D",
    "VocabParallelEmbedding", "VocabParallelSparseCategoricalAccuracy",
    "VocabParallelSparseCategoricalCrossentropy",
    "callbacks", "initializers", "losses", "metrics", "regularizers", "Variable", "activations",
    "ops", "random",
    "Bidirectional", "GRUCell", "LSTMCell", "Masking", "RNN", "SimpleRNNCell", "StackedRNNCells",
    "TimeDistributed",
    "ELU", "LeakyReLU", "PReLU", "ReLU", "Softmax", "Lambda",
    "Cropping1D", "Cropping2D", "UpSampling1D", "UpSampling2D", "ZeroPadding1D", "ZeroPadding2D",
    "ActivityRegularization", "AlphaDropout", "GaussianDropout", "GaussianNoise",
    "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
    "SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D", "SeparableConvolution2D",
    "AdditiveAttention", "Attention",
    "GroupNormalization", "Normalization", "Rescaling", "UnitNormalization", "InputLayer",
    "CategoryEncoding", "CenterCrop", "Discretization", "Hashing", "IntegerLookup",
    "RandomContrast", "RandomCrop", "RandomFlip", "RandomRotation", "RandomTranslation",
    "RandomZoom", "Resizing", "StringLookup", "TextVectorization",
]


def __getattr__(name):
    """A Keras name tessera lacks: an AttributeError naming the closest one."""
    import difflib  # noqa: PLC0415

    if name.startswith("__"):
        raise AttributeError(name)
    close = difflib.get_close_matches(name, __all__, n=2)
    hint = f"; the closest are {close}" if close else ""
    raise AttributeError(f"[tessera.nn] has no {name!r} (Keras's {name} is not supported yet)"
                         f"{hint}. Supported: docs/nn.md")
