"""keras.InputSpec / layers.InputSpec (issue 30 item 4): a layer's input_spec is
checked on every call, symbolic or on arrays, as Keras's
assert_input_compatibility does; the same inputs pass or fail in both."""

import numpy as np
import pytest

import tessera.nn as nn


def _layer(lib, spec_kwargs):
    class Scaled(lib.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.input_spec = lib.InputSpec(**spec_kwargs)

        def call(self, x):
            return x * 2.0

    return Scaled()


CASES = [
    ({"ndim": 3}, (2, 4, 5), True), ({"ndim": 3}, (2, 4), False),
    ({"min_ndim": 3}, (2, 4), False), ({"min_ndim": 2}, (2, 4, 1), True),
    ({"max_ndim": 2}, (2, 4, 1), False), ({"axes": {-1: 5}}, (2, 3, 5), True),
    ({"axes": {-1: 5}}, (2, 3, 4), False), ({"shape": (None, 3)}, (7, 3), True),
    ({"shape": (None, 3)}, (7, 4), False), ({"dtype": "float64"}, (2, 3), False),
]


@pytest.mark.parametrize("spec,shape,ok", CASES)
def test_input_spec_enforced_as_keras(keras, spec, shape, ok):
    x = np.ones(shape, np.float32)
    outcomes = []
    for lib in (nn, keras):
        try:
            _layer(lib, spec)(x)
            outcomes.append(True)
        except ValueError as e:
            assert "incompatible" in str(e)
            outcomes.append(False)
    assert outcomes == [ok, ok]
    layer = _layer(nn, spec)
    inp = nn.Input(shape[1:])
    if ok:
        assert layer(inp).shape == (None,) + shape[1:]
    else:
        with pytest.raises(ValueError, match=r"\[Scaled\] input 0 of layer 'scaled.*' is "
                                             r"incompatible with the layer: expected "
                                             r".*test_nn_input_spec.py"):
            layer(inp)


def test_input_spec_names_and_errors(keras):
    assert nn.layers.InputSpec is nn.InputSpec
    assert nn.InputSpec(ndim=2, axes={-1: 4}).get_config() == {
        k: v for k, v in keras.InputSpec(ndim=2, axes={-1: 4}).get_config().items()
        if k in ("dtype", "shape", "ndim", "max_ndim", "min_ndim", "axes")}
    with pytest.raises(ValueError, match=r"\[InputSpec\] ndim must be None or an int >= 0"):
        nn.InputSpec(ndim="2")
    assert nn.layers.Dense(2).input_spec is None
