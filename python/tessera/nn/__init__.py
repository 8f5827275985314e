"""tessera.nn: Keras-like layers and models (functional, Sequential,
subclassed) whose training step (forward, backward, update) is one compiled
tessera program.

Its modules import one way, lowest first (docs/nn.md, "Layout (for
developers)"; tests/python/test_nn_structure.py checks it):

    foundations (symbolic, params, initializers, regularizers, registry, ...)
    -> variables -> ops, activations, random -> graph (functional)
    -> layers/ (base, then one module per family)
    -> losses, metrics, parallel* -> the compiled step (programs, zero, varlen, pipeline)
    -> files and callbacks (weights_file, saving, checkpoints, callbacks, utils)
    -> model/ (core, compile, training, inference, sequential) -> this namespace

A lower module that needs the model asks registry.model_class().
"""

import contextlib
import difflib
import importlib
import sys

from . import callbacks, constraints, initializers, losses, metrics, regularizers, saving, tree
from . import backend, config, datasets, models, optimizers, preprocessing, utils  # keras.datasets, ...
from . import wrappers  # keras.wrappers (scikit-learn's estimators)
from . import distillation  # keras.distillation (a Distiller and its losses)
from .file_editor import KerasFileEditor as _KerasFileEditor
from .keras_objects import deserialize_keras_object as _deserialize
from .keras_objects import serialize_keras_object as _serialize

# keras.saving holds them too (saving is below keras_objects, which uses its registry)
saving.serialize_keras_object, saving.deserialize_keras_object = _serialize, _deserialize
saving.KerasFileEditor = _KerasFileEditor  # (file_editor.py imports saving)
from . import activations, ops, random  # keras.activations, keras.ops, keras.random
from . import dtype_policies, mixed_precision  # float32 / float64 policies (Keras's names)
from .dtype_policies import DTypePolicy, FloatDTypePolicy
from .layers import (GRU, LSTM, RNN, Activation, ActivityRegularization, AdaptiveAveragePooling1D,
                     AdaptiveAveragePooling2D, AdaptiveAveragePooling3D, AdaptiveMaxPooling1D,
                     AdaptiveMaxPooling2D, AdaptiveMaxPooling3D, Add,
                     AdditiveAttention, AlphaDropout, Attention, Average, AveragePooling1D,
                     AveragePooling2D, AvgPool1D, AvgPool2D, BatchNormalization, Bidirectional,
                     CategoryEncoding, CenterCrop, Concatenate, Conv1D, Conv1DTranspose, Conv2D,
                     Conv2DTranspose, Convolution1D, Convolution1DTranspose, Convolution2D,
                     Convolution2DTranspose, Cropping1D, EinsumDense, RMSNormalization, Wrapper,
                     dot, Cropping2D, Dense, DepthwiseConv1D,
                     DepthwiseConv2D, Discretization, Dot, Dropout, ELU, Embedding, Flatten,
                     GaussianDropout, GaussianNoise, GlobalAveragePooling1D,
                     GlobalAveragePooling2D, GlobalAvgPool1D, GlobalAvgPool2D, GlobalMaxPool1D,
                     GlobalMaxPool2D, GlobalMaxPooling1D, GlobalMaxPooling2D, GroupNormalization,
                     GroupQueryAttention, GroupedQueryAttention,
                     GRUCell, HashedCrossing, Hashing, Identity, InputLayer, IntegerLookup, Lambda,
                     Layer,
                     LayerNormalization, LeakyReLU, LSTMCell, Masking, Maximum, MaxPool1D,
                     MaxPool2D, MaxPooling1D, MaxPooling2D, Minimum, MultiHeadAttention, Multiply,
                     Normalization, Permute, PReLU, RandomContrast, RandomCrop, RandomFlip,
                     RandomRotation, RandomTranslation, RandomZoom, ReLU, RepeatVector, Rescaling,
                     ReversibleEmbedding,
                     Reshape, Resizing, SeparableConv1D, SeparableConv2D, SeparableConvolution1D,
                     SeparableConvolution2D, SimpleRNN, SimpleRNNCell, Softmax, SpatialDropout1D,
                     SpectralNormalization,
                     SpatialDropout2D, SpatialDropout3D, StackedRNNCells, StringLookup, Subtract,
                     TextVectorization, TimeDistributed, UnitNormalization, UpSampling1D,
                     UpSampling2D, ZeroPadding1D, ZeroPadding2D, add, average, concatenate,
                     maximum, minimum, multiply, subtract)
from .layers import (AugMix, AutoContrast, ContrastLimitedAdaptiveHistogramEqualization, CutMix,
                     Equalization, MaxNumBoundingBoxes, MixUp, Pipeline, RandAugment,
                     RandomBrightness, RandomColorDegeneration, RandomColorJitter,
                     RandomElasticTransform, RandomErasing, RandomGaussianBlur, RandomGrayscale,
                     RandomHue, RandomInvert, RandomPerspective, RandomPosterization,
                     RandomSaturation, RandomSharpness, RandomShear, Solarization)
from .layers import ConvLSTM1D, ConvLSTM2D, ConvLSTM3D
from .layers import MelSpectrogram, STFTSpectrogram
from .layers import (AveragePooling3D, AvgPool3D, Conv3D, Conv3DTranspose, Convolution3D,
                     Convolution3DTranspose, Cropping3D, GlobalAveragePooling3D, GlobalAvgPool3D,
                     GlobalMaxPool3D, GlobalMaxPooling3D, MaxPool3D, MaxPooling3D, UpSampling3D,
                     ZeroPadding3D)
from .model import History, Model, Sequential
from .parallel import ColumnParallelDense, RowParallelDense
from .parallel_layers import (ColumnParallelConv1D, ColumnParallelConv2D, ColumnParallelConv3D,
                              ParallelMultiHeadAttention, RowParallelConv1D, RowParallelConv2D,
                              RowParallelConv3D, VocabParallelEmbedding)
from .parallel_losses import (VocabParallelSparseCategoricalAccuracy,
                              VocabParallelSparseCategoricalCrossentropy)
from .saving import load_model, register_keras_serializable
from .symbolic import Input, KerasTensor
from .variables import Variable, name_scope
from .step_overrides import GradientTape
from .input_spec import InputSpec
from .initializers import Initializer
from .losses import Loss
from .metrics import Metric
from .optimizers import Optimizer
from .regularizers import Regularizer

__all__ = [
    "Add", "Average", "Concatenate", "Dot", "GRU", "LSTM", "Maximum", "Minimum", "Multiply",
    "GroupQueryAttention", "GroupedQueryAttention", "MultiHeadAttention", "SimpleRNN", "Subtract",
    "ReversibleEmbedding", "add", "average",
    "concatenate", "load_model", "maximum", "minimum", "multiply", "register_keras_serializable",
    "subtract",
    "Activation", "AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D",
    "AdaptiveAveragePooling3D", "AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D",
    "AdaptiveMaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AvgPool1D", "AvgPool2D",
    "BatchNormalization", "ColumnParallelDense", "Conv1D", "Conv1DTranspose", "Conv2D",
    "Conv2DTranspose",
    "DepthwiseConv1D", "DepthwiseConv2D", "Dense", "Dropout", "Embedding", "Flatten",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAvgPool1D", "GlobalAvgPool2D",
    "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "History",
    "Identity", "Input", "KerasTensor", "Layer", "LayerNormalization", "MaxPool1D", "MaxPool2D",
    "MaxPooling1D", "MaxPooling2D", "Model", "Permute", "RepeatVector", "Reshape",
    "RowParallelDense", "Sequential", "ColumnParallelConv1D", "ColumnParallelConv2D",
    "ParallelMultiHeadAttention", "RowParallelConv1D", "RowParallelConv2D",
    "ColumnParallelConv3D", "RowParallelConv3D",
    "VocabParallelEmbedding", "VocabParallelSparseCategoricalAccuracy",
    "VocabParallelSparseCategoricalCrossentropy",
    "GradientTape", "callbacks", "constraints", "initializers", "losses", "metrics",
    "regularizers", "Variable", "name_scope", "wrappers",
    "activations",
    "ops", "random",
    "Bidirectional", "GRUCell", "LSTMCell", "Masking", "RNN", "SimpleRNNCell", "StackedRNNCells",
    "SpectralNormalization",
    "TimeDistributed",
    "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D",
    "MelSpectrogram", "STFTSpectrogram",
    "ELU", "LeakyReLU", "PReLU", "ReLU", "Softmax", "Lambda",
    "Cropping1D", "Cropping2D", "UpSampling1D", "UpSampling2D", "ZeroPadding1D", "ZeroPadding2D",
    "ActivityRegularization", "AlphaDropout", "GaussianDropout", "GaussianNoise",
    "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
    "SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D", "SeparableConvolution2D",
    "AdditiveAttention", "Attention",
    "GroupNormalization", "Normalization", "Rescaling", "UnitNormalization", "InputLayer",
    "CategoryEncoding", "CenterCrop", "Discretization", "HashedCrossing", "Hashing",
    "IntegerLookup",
    "RandomContrast", "RandomCrop", "RandomFlip", "RandomRotation", "RandomTranslation",
    "RandomZoom", "Resizing", "StringLookup", "TextVectorization",
    "AugMix", "AutoContrast", "ContrastLimitedAdaptiveHistogramEqualization", "CutMix",
    "Equalization", "MaxNumBoundingBoxes", "MixUp", "Pipeline",
    "RandAugment", "RandomBrightness", "RandomColorDegeneration", "RandomColorJitter",
    "RandomElasticTransform", "RandomErasing", "RandomGaussianBlur", "RandomGrayscale",
    "RandomHue", "RandomInvert", "RandomPerspective", "RandomPosterization", "RandomSaturation",
    "RandomSharpness", "RandomShear", "Solarization",
    "Convolution1D", "Convolution1DTranspose", "Convolution2D", "Convolution2DTranspose",
    "EinsumDense", "RMSNormalization", "Wrapper", "dot", "InputSpec",
    "AveragePooling3D", "AvgPool3D", "Conv3D", "Conv3DTranspose", "Convolution3D",
    "Convolution3DTranspose", "Cropping3D", "GlobalAveragePooling3D", "GlobalAvgPool3D",
    "GlobalMaxPool3D", "GlobalMaxPooling3D", "MaxPool3D", "MaxPooling3D", "UpSampling3D",
    "ZeroPadding3D",
    "Initializer", "Loss", "Metric", "Optimizer", "Regularizer", "device", "version",
]


def version() -> str:
    """keras.version(): here tessera's version (tessera.nn follows Keras 3's API)."""
    return sys.modules[__name__.rsplit(".", 1)[0]].__version__  # set after tessera.nn loads


@contextlib.contextmanager
def device(device_name):
    """keras.device(name): tessera runs on the CPU, so "cpu" (also "cpu:0",
    "/cpu:0", "/device:CPU:0") is a context that changes nothing; any other
    device is an error rather than a silent run on the CPU."""
    if not isinstance(device_name, str):
        raise TypeError(f"[device] expected a device name such as 'cpu', got {device_name!r}")
    kind = device_name.strip("/").lower().replace("device:", "").split(":")[0]
    if kind != "cpu":
        raise ValueError(f"[device] tessera runs on the CPU only, got device {device_name!r} "
                         "(use 'cpu', or leave keras.device out)")
    yield


def __getattr__(name):
    """keras.visualization, imported on first use (it imports matplotlib when
    installed); a Keras name tessera lacks: an AttributeError naming the
    closest one."""
    if name == "visualization":
        return importlib.import_module(".visualization", __name__)
    if name.startswith("__"):
        raise AttributeError(name)
    close = difflib.get_close_matches(name, __all__, n=2)
    hint = f"; the closest are {close}" if close else ""
    raise AttributeError(f"[tessera.nn] has no {name!r} (Keras's {name} is not supported yet)"
                         f"{hint}. Supported: docs/nn.md")
