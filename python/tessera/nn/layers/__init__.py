"""keras.layers for tessera.nn: every layer, one module per family.

    base          Layer, Context, Param and the helpers the families share
    core          Dense, Embedding, ReversibleEmbedding, Activation, Identity, Dropout,
                  Lambda, InputLayer
    einsum_dense  EinsumDense
    conv          Conv1D/2D/3D, Conv1D/2D/3DTranspose, DepthwiseConv1D/2D
    separable     SeparableConv1D/2D
    pooling       Max/AveragePooling1D/2D/3D, their global and adaptive forms
    reshaping     Flatten, Reshape, Permute, RepeatVector, ZeroPadding, UpSampling, Cropping
    normalization BatchNormalization, LayerNormalization, GroupNormalization,
                  RMSNormalization, UnitNormalization, Normalization, Rescaling
    activation    ReLU, LeakyReLU, PReLU, ELU, Softmax
    noise         GaussianNoise/Dropout, AlphaDropout, SpatialDropout, ActivityRegularization
    merging       Add, Concatenate, Dot, ... and add(), concatenate(), ...
    attention     Attention, AdditiveAttention
    audio         STFTSpectrogram, MelSpectrogram
    multi_head_attention  MultiHeadAttention, GroupQueryAttention
    recurrent     SimpleRNN, LSTM, GRU (rnn_states: their states; user_cells: RNN(cell))
    conv_lstm     ConvLSTM1D/2D/3D
    wrappers      RNN, the cells, Bidirectional, TimeDistributed, SpectralNormalization,
                  Masking
    preprocessing TextVectorization, StringLookup, IntegerLookup, Hashing, HashedCrossing
                  (categorical: CategoryEncoding, Discretization; image_preprocessing: Resizing,
                  CenterCrop, Random*; image_color: the colour augmentations;
                  image_augment: RandomShear, RandomPerspective, RandomElasticTransform,
                  RandomGaussianBlur, RandomErasing, MixUp, CutMix, Pipeline, ...;
                  image_policies: RandAugment, AugMix)

A family module imports `base` (and the graph and variables below it), never this
package nor a module above it; adding a layer touches its family file, the list below
and its test (tests/python/test_nn_structure.py checks that every family's public
names are here).
"""

from ..input_spec import InputSpec
from ..params import WEIGHTS_IN_FILE, DeferredValues, initial_value, peek_value, value_spec
from ..registry import get_registered_object
from ..symbolic import Input
from . import (activation, attention, audio, base, categorical, conv, conv_lstm, core, einsum_dense,
               image_augment, image_color, image_policies, image_preprocessing, merging,
               multi_head_attention, noise, normalization, pooling, preprocessing, recurrent,
               reshaping, separable, wrappers)
from .activation import ELU, LeakyReLU, PReLU, ReLU, Softmax
from .attention import AdditiveAttention, Attention
from .audio import MelSpectrogram, STFTSpectrogram
from .base import Context, Layer, Param
from .conv import (Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose,
                   Convolution1D, Convolution1DTranspose, Convolution2D, Convolution2DTranspose,
                   Convolution3D, Convolution3DTranspose, DepthwiseConv1D, DepthwiseConv2D)
from .conv_lstm import ConvLSTM1D, ConvLSTM2D, ConvLSTM3D
from .core import (Activation, Dense, Dropout, Embedding, Identity, InputLayer, Lambda,
                   ReversibleEmbedding)
from .image_augment import (CutMix, MaxNumBoundingBoxes, MixUp, RandomElasticTransform,
                            RandomErasing, RandomGaussianBlur, RandomPerspective, RandomShear)
from .image_color import (AutoContrast, ContrastLimitedAdaptiveHistogramEqualization,
                          Equalization, RandomBrightness, RandomColorDegeneration,
                          RandomColorJitter, RandomGrayscale, RandomHue, RandomInvert,
                          RandomPosterization, RandomSaturation, RandomSharpness, Solarization)
from .image_policies import AugMix, Pipeline, RandAugment
from .image_preprocessing import (CenterCrop, RandomContrast, RandomCrop, RandomFlip,
                                  RandomRotation, RandomTranslation, RandomZoom, Resizing)
from .merging import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add,
                      average, concatenate, dot, maximum, minimum, multiply, subtract)
from .multi_head_attention import GroupQueryAttention, GroupedQueryAttention, MultiHeadAttention
from .noise import (ActivityRegularization, AlphaDropout, GaussianDropout, GaussianNoise,
                    SpatialDropout1D, SpatialDropout2D, SpatialDropout3D)
from .einsum_dense import EinsumDense
from . import keras_config
from .keras_config import constructor_arguments, is_dtype_name, serialized_object_keys
from .normalization import (BatchNormalization, GroupNormalization, LayerNormalization,
                            Normalization, RMSNormalization, Rescaling, UnitNormalization)
from .pooling import (AdaptiveAveragePooling1D, AdaptiveAveragePooling2D,
                      AdaptiveAveragePooling3D, AdaptiveMaxPooling1D, AdaptiveMaxPooling2D,
                      AdaptiveMaxPooling3D, AveragePooling1D, AveragePooling2D, AveragePooling3D,
                      AvgPool1D, AvgPool2D, AvgPool3D, GlobalAveragePooling1D,
                      GlobalAveragePooling2D, GlobalAveragePooling3D, GlobalAvgPool1D,
                      GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D,
                      GlobalMaxPool3D, GlobalMaxPooling1D, GlobalMaxPooling2D,
                      GlobalMaxPooling3D, MaxPool1D, MaxPool2D, MaxPool3D, MaxPooling1D,
                      MaxPooling2D, MaxPooling3D)
from .categorical import CategoryEncoding, Discretization
from .preprocessing import HashedCrossing, Hashing, IntegerLookup, StringLookup, TextVectorization
from .recurrent import GRU, LSTM, SimpleRNN
from .reshaping import (Cropping1D, Cropping2D, Cropping3D, Flatten, Permute, RepeatVector,
                        Reshape, UpSampling1D, UpSampling2D, UpSampling3D, ZeroPadding1D,
                        ZeroPadding2D, ZeroPadding3D)
from .separable import (SeparableConv1D, SeparableConv2D, SeparableConvolution1D,
                        SeparableConvolution2D)
from .wrappers import (GRUCell, LSTMCell, RNN, Bidirectional, Masking, SimpleRNNCell,
                       SpectralNormalization, StackedRNNCells, TimeDistributed, Wrapper)

# The family modules whose public classes load_model may build (saving.builtin_classes).
FAMILIES = (activation, attention, audio, base, categorical, conv, conv_lstm, core, einsum_dense,
            image_augment, image_color, image_policies, image_preprocessing, merging,
            multi_head_attention, noise, normalization, pooling, preprocessing, recurrent,
            reshaping, separable, wrappers)

__all__ = sorted({name for family in FAMILIES for name in family.__all__} |
                 {"Input", "InputSpec", "serialize", "deserialize"})


def serialize(layer) -> dict:
    """Keras's layers.serialize: ``{"module", "class_name", "config"}`` of a
    layer (its get_config; model.save writes the same config as JSON)."""
    if not isinstance(layer, Layer):
        raise TypeError(f"[layers.serialize] expected a layer, got {layer!r}")
    return {"module": type(layer).__module__, "class_name": type(layer).__name__,
            "config": layer.get_config(), "registered_name": None}


def deserialize(config, custom_objects=None):
    """Keras's layers.deserialize: the layer a serialize() dict describes, its
    class one of tessera's layers or a registered (or custom_objects) one."""
    if not isinstance(config, dict) or "class_name" not in config:
        raise TypeError(f"[layers.deserialize] expected a dict with 'class_name' and 'config', "
                        f"got {config!r}")
    name = config["class_name"]
    cls = get_registered_object(config.get("registered_name") or name, custom_objects)
    if cls is None:
        cls = next((getattr(f, name) for f in FAMILIES if name in f.__all__), None)
    if not (isinstance(cls, type) and issubclass(cls, Layer)):
        raise ValueError(f"[layers.deserialize] unknown layer class {name!r}: not one of "
                         "tessera's layers nor registered (pass custom_objects={"
                         f"{name!r}: ...}})")
    return cls.from_config(dict(config.get("config") or {}))


keras_config.LAYER_FROM_DICT["deserialize"] = deserialize
