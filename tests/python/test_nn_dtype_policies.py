"""Keras's dtype policies against Keras 3 on JAX (the oracle): a layer's
dtype / dtype_policy / compute_dtype / variable_dtype, DTypePolicy objects,
dtype_policies.get/serialize/deserialize and the global policy
(mixed_precision.set_global_policy); the mixed and half-precision policies
tessera cannot compute in are errors naming the policy."""

import numpy as np
import pytest

import tessera.nn as nn


def _attributes(k):
    out = {}
    d = k.layers.Dense(2)
    out["dense"] = (repr(d.dtype_policy), d.dtype, d.compute_dtype, d.variable_dtype,
                    d.dtype_policy.name)
    d64 = k.layers.Dense(2, dtype="float64")
    out["dense64"] = (d64.dtype_policy.name, d64.dtype, d64.compute_dtype)
    given = k.layers.Dense(2, dtype=k.DTypePolicy("float32"))
    out["given_policy"] = (given.dtype, given.dtype_policy.name)
    p = k.DTypePolicy("mixed_float16")  # the object answers; running it is another matter
    out["mixed"] = (p.name, p.compute_dtype, p.variable_dtype, repr(p))
    out["policy_eq"] = k.DTypePolicy() == k.DTypePolicy("float32")
    out["get"] = repr(k.dtype_policies.get("float64"))
    out["serialize"] = k.dtype_policies.serialize(k.DTypePolicy("float64"))
    out["deserialize"] = k.dtype_policies.deserialize(out["serialize"]).name
    out["global"] = repr(k.mixed_precision.global_policy())
    out["alias"] = k.mixed_precision.Policy("float32").name
    m = k.Sequential([k.Input((3,)), k.layers.Dense(2)])
    out["model"] = (m.dtype_policy.name, m.layers[0].dtype_policy.name,
                    str(np.asarray(m.layers[0].kernel).dtype))
    k.mixed_precision.set_global_policy("float64")
    try:
        out["global64"] = repr(k.mixed_precision.global_policy())
        layer = k.layers.Dense(2)
        out["layer64"] = (layer.dtype, layer.compute_dtype)
        m = k.Sequential([k.Input((3,)), k.layers.Dense(2, kernel_initializer="ones")])
        y = np.asarray(m.predict(np.ones((2, 3)), verbose=0))
        # (JAX runs without 64-bit types by default: Keras's output is float32
        # there; tessera's is float64, what the policy says)
        out["predict64"] = y.tolist()
        if k is nn:
            assert y.dtype == np.float64
    finally:
        k.mixed_precision.set_global_policy("float32")
    out["back"] = repr(k.mixed_precision.global_policy())
    with pytest.raises(ValueError, match="nope"):
        k.DTypePolicy("nope")
    return out


def test_dtype_policies_as_keras(keras):
    assert _attributes(nn) == _attributes(keras)


def test_half_precision_policies_are_refused_naming_them():
    for name in ("mixed_float16", "mixed_bfloat16", "float16", "bfloat16"):
        with pytest.raises(ValueError, match=rf"\[set_global_policy\] the dtype policy "
                                             rf"'{name}' is not supported"):
            nn.mixed_precision.set_global_policy(name)
        with pytest.raises(ValueError, match=rf"\[Dense\] the dtype policy '{name}'"):
            nn.layers.Dense(2, dtype=name)
        with pytest.raises(ValueError, match=rf"\[Sequential\] the dtype policy '{name}'"):
            nn.Sequential([nn.layers.Dense(2)], dtype=nn.DTypePolicy(name))
    assert nn.mixed_precision.global_policy().name == "float32"  # unchanged by the refusals
    with pytest.raises(ValueError, match="set_global_policy.*int32.*float32"):
        nn.mixed_precision.set_global_policy("int32")
    with pytest.raises(ValueError, match="got None"):
        nn.mixed_precision.set_global_policy(None)


def test_layer_in_a_float64_model_reports_float64():
    layer = nn.layers.Dense(2)
    nn.Sequential([nn.Input((3,)), layer], dtype="float64").build((None, 3))
    assert (layer.dtype, layer.compute_dtype) == ("float64", "float64")
    assert np.asarray(layer.kernel).dtype == np.float64


def test_layer_config_with_a_keras_dtype_policy_loads():
    """A layer config from a Keras file names its dtype as a serialized
    DTypePolicy: from_config reads it."""
    config = {"units": 2, "name": "d",
              "dtype": {"module": "keras", "class_name": "DTypePolicy",
                        "config": {"name": "float32"}, "registered_name": None}}
    layer = nn.layers.Dense.from_config(config)
    assert layer.dtype_policy.name == "float32"
