"""keras.layers for tessera.nn: every layer, one module per family.

    base          Layer, Context, Param and the helpers the families share
    core          Dense, Embedding, Activation, Identity, Dropout, Lambda, InputLayer
    conv          Conv1D/2D, Conv1D/2DTranspose, DepthwiseConv1D/2D
    separable     SeparableConv1D/2D
    pooling       Max/AveragePooling1D/2D and their global forms
    reshaping     Flatten, Reshape, Permute, RepeatVector, ZeroPadding, UpSampling, Cropping
    normalization BatchNormalization, LayerNormalization, GroupNormalization,
                  UnitNormalization, Normalization, Rescaling
    activation    ReLU, LeakyReLU, PReLU, ELU, Softmax
    noise         GaussianNoise/Dropout, AlphaDropout, SpatialDropout, ActivityRegularization
    merging       Add, Concatenate, Dot, ... and add(), concatenate(), ...
    attention     Attention, AdditiveAttention
    multi_head_attention  MultiHeadAttention
    recurrent     SimpleRNN, LSTM, GRU (rnn_states: their states; user_cells: RNN(cell))
    wrappers      RNN, the cells, Bidirectional, TimeDistributed, Masking
    preprocessing TextVectorization, StringLookup, IntegerLookup, CategoryEncoding, Hashing,
                  Discretization (image_preprocessing: Resizing, CenterCrop, Random*)

A family module imports `base` (and the graph and variables below it), never this
package nor a module above it; adding a layer touches its family file, the list below
and its test (tests/python/test_nn_structure.py checks that every family's public
names are here).
"""

from ..params import WEIGHTS_IN_FILE, DeferredValues, initial_value, peek_value, value_spec
from ..symbolic import Input
from . import (activation, attention, base, conv, core, image_preprocessing, merging,
               multi_head_attention, noise, normalization, pooling, preprocessing, recurrent,
               reshaping, separable, wrappers)
from .activation import ELU, LeakyReLU, PReLU, ReLU, Softmax
from .attention import AdditiveAttention, Attention
from .base import Context, Layer, Param
from .conv import (Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Convolution1D,
                   Convolution1DTranspose, Convolution2D, Convolution2DTranspose, DepthwiseConv1D,
                   DepthwiseConv2D)
from .core import Activation, Dense, Dropout, Embedding, Identity, InputLayer, Lambda
from .image_preprocessing import (CenterCrop, RandomContrast, RandomCrop, RandomFlip,
                                  RandomRotation, RandomTranslation, RandomZoom, Resizing)
from .merging import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add,
                      average, concatenate, maximum, minimum, multiply, subtract)
from .multi_head_attention import MultiHeadAttention
from .noise import (ActivityRegularization, AlphaDropout, GaussianDropout, GaussianNoise,
                    SpatialDropout1D, SpatialDropout2D, SpatialDropout3D)
from .normalization import (BatchNormalization, GroupNormalization, LayerNormalization,
                            Normalization, Rescaling, UnitNormalization)
from .pooling import (AveragePooling1D, AveragePooling2D, AvgPool1D, AvgPool2D,
                      GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAvgPool1D,
                      GlobalAvgPool2D, GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPooling1D,
                      GlobalMaxPooling2D, MaxPool1D, MaxPool2D, MaxPooling1D, MaxPooling2D)
from .preprocessing import (CategoryEncoding, Discretization, Hashing, IntegerLookup,
                            StringLookup, TextVectorization)
from .recurrent import GRU, LSTM, SimpleRNN
from .reshaping import (Cropping1D, Cropping2D, Flatten, Permute, RepeatVector, Reshape,
                        UpSampling1D, UpSampling2D, ZeroPadding1D, ZeroPadding2D)
from .separable import (SeparableConv1D, SeparableConv2D, SeparableConvolution1D,
                        SeparableConvolution2D)
from .wrappers import (GRUCell, LSTMCell, RNN, Bidirectional, Masking, SimpleRNNCell,
                       StackedRNNCells, TimeDistributed)

# The family modules whose public classes load_model may build (saving.builtin_classes).
FAMILIES = (activation, attention, base, conv, core, image_preprocessing, merging,
            multi_head_attention, noise, normalization, pooling, preprocessing, recurrent,
            reshaping, separable, wrappers)

__all__ = sorted({name for family in FAMILIES for name in family.__all__} | {"Input"})
