"""Keras features met by the keras-io scripts of issue 30's eighteenth pass (tests/keras_io:
Keras 3 forms of examples out only for tensorflow_datasets / Keras 2: ctc_asr, ...), against
Keras 3 on JAX with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(18)


# ------------------------------- ctc_asr: Reshape((-1, d, 1)) on Input((None, d))
def _deepspeech(lib):
    """ctc_asr's front: the spectrogram's unknown time axis reshaped to an image, a strided
    convolution, reshaped back to a sequence for a GRU."""
    inputs = lib.Input((None, 9), name="input")
    x = lib.layers.Reshape((-1, 9, 1))(inputs)
    x = lib.layers.Conv2D(3, (3, 5), strides=(2, 2), padding="same", use_bias=False)(x)
    x = lib.layers.Reshape((-1, x.shape[-2] * x.shape[-1]))(x)
    x = lib.layers.GRU(4, return_sequences=True)(x)
    return lib.Model(inputs, lib.layers.Dense(3, activation="softmax")(x))


def test_reshape_keeps_an_unknown_axis_unknown(keras):
    """Keras gives the -1 axis of a Reshape on an axis of unknown length as None (tessera
    refused the model with a TypeError); each length met then runs as Keras's."""
    tm, km = _deepspeech(tn), _deepspeech(keras)
    assert [tuple(l.output.shape) for l in tm.layers] == [tuple(l.output.shape) for l in km.layers]
    _same_weights(tm, km)
    for steps in (8, 11):
        x = RNG.normal(size=(2, steps, 9)).astype("float32")
        np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(tm(x)), np.asarray(km(x)), rtol=1e-5, atol=1e-6)


def test_reshape_of_a_known_shape_still_checks_its_size():
    inputs = tn.Input((6, 4))
    with pytest.raises(ValueError, match=r"\[Reshape\] cannot reshape samples of shape"):
        tn.layers.Reshape((-1, 5))(inputs)
