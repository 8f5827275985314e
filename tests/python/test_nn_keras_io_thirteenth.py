"""Keras features met by the keras-io scripts of issue 30's thirteenth pass (tests/keras_io:
learnable_resizer, patch_convnet, ...), against Keras 3 on JAX with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)


# ----------------------------- learnable_resizer: Resizing/CenterCrop on Input((None, None, c))
def _resizer(lib, layer):
    inputs = lib.layers.Input(shape=[None, None, 3])
    x = lib.layers.Conv2D(4, 3, padding="same")(inputs)
    x = layer(x)
    return lib.Model(inputs, lib.layers.Conv2D(2, 1)(x))


@pytest.mark.parametrize("kind", ["Resizing", "Resizing_nearest", "CenterCrop"])
def test_resizing_on_unknown_sizes(keras, kind):
    def make(lib):
        if kind == "CenterCrop":
            return lib.layers.CenterCrop(6, 5)
        interp = "nearest" if kind.endswith("nearest") else "bilinear"
        return lib.layers.Resizing(6, 5, interpolation=interp)

    tm, km = _resizer(tn, make(tn)), _resizer(keras, make(keras))
    assert tuple(tm.output.shape) == tuple(km.output.shape) == (None, 6, 5, 2)
    _same_weights(tm, km)
    for shape in ((2, 9, 7, 3), (1, 13, 10, 3), (3, 4, 4, 3)):  # (a smaller one: CenterCrop
        x = RNG.normal(size=shape).astype("float32")              # resizes it)
        want = np.asarray(km(x))
        np.testing.assert_allclose(np.asarray(tm(x)), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(tm.predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)


def test_resizing_on_unknown_sizes_trains(keras):
    """A fit through the resizer on images of one size, then another, as Keras's."""
    y = RNG.normal(size=(8, 6, 5, 2)).astype("float32")
    xs = [RNG.normal(size=(8, h, w, 3)).astype("float32") for h, w in ((12, 10), (7, 9))]
    models = []
    for lib in (tn, keras):
        m = _resizer(lib, lib.layers.Resizing(6, 5))
        models.append(m)
    tm, km = models
    _same_weights(tm, km)
    for m in models:
        m.compile(optimizer="sgd", loss="mse")
        for x in xs:
            m.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-5)


def test_resizing_unknown_channels_still_refused():
    with pytest.raises(ValueError, match=r"\[Resizing\] in a model expects images of known"):
        tn.layers.Resizing(4, 4)(tn.layers.Input(shape=(None, None, None)))
