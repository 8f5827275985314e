"""AdaptiveAveragePooling1D/2D/3D and AdaptiveMaxPooling1D/2D/3D against
Keras 3 on JAX (the oracle): outputs for sizes that divide the input and
sizes that do not (overlapping windows), channels_first, default names and
configs, a few SGD steps through the pooling, and the errors."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_nn_layers_more import _both, _names_and_config, _same, _single, _train_same, _x  # noqa: E402

from tessera import nn  # noqa: E402

CASES = [
    ("AdaptiveAveragePooling1D", (10, 3), 4, None),
    ("AdaptiveAveragePooling1D", (10, 3), 10, None),
    ("AdaptiveMaxPooling1D", (9, 2), 1, None),
    ("AdaptiveMaxPooling1D", (4, 6), 4, "channels_first"),
    ("AdaptiveAveragePooling2D", (7, 9, 3), (3, 4), None),
    ("AdaptiveAveragePooling2D", (3, 7, 9), 2, "channels_first"),
    ("AdaptiveMaxPooling2D", (8, 8, 2), (2, 2), None),
    ("AdaptiveMaxPooling2D", (3, 7, 9), (2, 5), "channels_first"),
    ("AdaptiveAveragePooling3D", (5, 6, 7, 2), (2, 3, 4), None),
    ("AdaptiveMaxPooling3D", (5, 6, 7, 2), 2, None),
]


@pytest.mark.parametrize("cls, shape, out, fmt", CASES)
def test_outputs_names_and_config_match_keras(cls, shape, out, fmt):
    t, k = _both(_single(lambda L: getattr(L.layers, cls)(out, data_format=fmt), shape),
                 randomize=False)
    _same(t, k, _x(3, *shape))
    again = _names_and_config(t.layers[-1], k.layers[-1])
    assert again.output_size == t.layers[-1].output_size


@pytest.mark.parametrize("cls", ["AdaptiveAveragePooling2D", "AdaptiveMaxPooling2D"])
def test_training_through_the_pooling_matches_keras(cls):
    def build(L):
        inp = L.Input(shape=(7, 5, 2))
        h = L.layers.Dense(3, activation="tanh")(inp)
        h = getattr(L.layers, cls)((3, 2))(h)
        return L.Model(inp, L.layers.Dense(1)(L.layers.Flatten()(h)))
    t, k = _both(build)
    _train_same(t, k, _x(6, 7, 5, 2), _x(6, 1))


def test_bad_output_size_and_unknown_length_are_errors():
    with pytest.raises(ValueError, match=r"\[AdaptiveAveragePooling2D\] output_size must be "
                                         r"a positive int or 2 positive ints, got \(2, 0\)"):
        nn.layers.AdaptiveAveragePooling2D((2, 0))
    with pytest.raises(ValueError, match=r"AdaptiveMaxPooling1D.*got \(2, 3\)"):
        nn.layers.AdaptiveMaxPooling1D((2, 3))
    with pytest.raises(ValueError, match=r"\[AdaptiveMaxPooling1D\] spatial axis 1 .*None"):
        nn.layers.AdaptiveMaxPooling1D(2)(nn.Input(shape=(None, 3)))
