"""tessera.nn.activations: Keras 3's ``keras.activations``. Each is a
function of a tensor with Keras's arguments and defaults: eager on arrays,
recorded on symbolic tensors, and usable as any layer's ``activation=``
(a function activation is traced into the layer's program)."""

from __future__ import annotations

import difflib

from .ops import nn as _nn
from .ops import numpy as _np
from .ops._base import cast as _cast
from .ops._base import floating as _floating
from .ops.extra import sparsemax as _sparsemax

__all__ = ["celu", "deserialize", "elu", "exponential", "gelu", "get", "glu", "hard_shrink",
           "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "leaky_relu", "linear",
           "log_sigmoid", "log_softmax", "mish", "relu", "relu6", "selu", "serialize",
           "sigmoid", "silu", "soft_shrink", "softmax", "softplus", "softsign", "sparse_plus",
           "sparsemax",
           "sparse_sigmoid", "squareplus", "swish", "tanh", "tanh_shrink", "threshold"]


def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """max(x, 0), with Keras's options: a slope below the threshold, a cap."""
    if negative_slope == 0.0 and max_value is None and threshold == 0.0:
        return _nn.relu(x)  # (an integer x stays integer, as Keras's)
    x = _floating(x)
    if negative_slope != 0.0 and max_value is None and threshold == 0.0:
        return _nn.leaky_relu(x, negative_slope)
    if negative_slope != 0.0:
        neg = _nn.relu(_np.add(_np.negative(x), threshold)) if threshold != 0.0 else \
            _nn.relu(_np.negative(x))
    clip_max = max_value is not None
    if threshold != 0.0:
        y = _np.multiply(x, _cast(_np.greater(x, threshold), "float32"))
    elif max_value == 6:
        y, clip_max = _nn.relu6(x), False
    else:
        y = _nn.relu(x)
    if clip_max:
        y = _np.clip(y, 0.0, max_value)
    if negative_slope != 0.0:
        y = _np.subtract(y, _np.multiply(neg, negative_slope))
    return y


def leaky_relu(x, negative_slope=0.2):
    return _nn.leaky_relu(x, negative_slope)


def relu6(x):
    return _nn.relu6(x)


def elu(x, alpha=1.0):
    return _nn.elu(x, alpha)


def selu(x):
    return _nn.selu(x)


def softplus(x):
    return _nn.softplus(x)


def softsign(x):
    return _nn.softsign(x)


def soft_shrink(x, threshold=0.5):
    return _nn.soft_shrink(x, threshold)


def sparse_plus(x):
    return _nn.sparse_plus(x)


def sparse_sigmoid(x):
    return _nn.sparse_sigmoid(x)


def silu(x):
    return _nn.silu(x)


def squareplus(x, b=4):
    return _nn.squareplus(x, b)


def gelu(x, approximate=False):
    return _nn.gelu(x, approximate)


def celu(x, alpha=1.0):
    return _nn.celu(x, alpha)


def glu(x, axis=-1):
    return _nn.glu(x, axis)


def tanh(x):
    return _np.tanh(x)


def tanh_shrink(x):
    return _nn.tanh_shrink(x)


def sigmoid(x):
    return _nn.sigmoid(x)


def exponential(x):
    return _np.exp(x)


def hard_sigmoid(x):
    return _nn.hard_sigmoid(x)


def hard_silu(x):
    return _nn.hard_silu(x)


def hard_tanh(x):
    return _nn.hard_tanh(x)


def hard_shrink(x, threshold=0.5):
    return _nn.hard_shrink(x, threshold)


def threshold(x, threshold, default_value):
    return _nn.threshold(x, threshold, default_value)


def linear(x):
    return x


def mish(x):
    return _nn.mish(x)


def log_sigmoid(x):
    return _nn.log_sigmoid(x)


def log_softmax(x, axis=-1):
    return _nn.log_softmax(x, axis)


def softmax(x, axis=-1):
    return _nn.softmax(x, axis)


def sparsemax(x, axis=-1):
    return _sparsemax(x, axis)


swish = silu  # Keras's alias (serialized as "silu")
hard_swish = hard_silu

_BY_NAME = {n: globals()[n] for n in __all__ if n not in ("get", "serialize", "deserialize")}


def serialize(activation):
    """The name of a built-in activation (Keras 3 gives the name too)."""
    for name, fn in _BY_NAME.items():
        if fn is activation:
            return name
    name = getattr(activation, "__name__", None)
    if name is None:
        raise ValueError(f"[activations.serialize] cannot serialize {activation!r}")
    return name


def builtin_name(fn):
    """The Keras name a layer's config gives an activation function: a built-in activation's,
    or an op's of the same name (``ops.gelu`` -> "gelu", as Keras names it); None for others."""
    for name, f in _BY_NAME.items():
        if f is fn:
            return name
    name = getattr(fn, "__name__", None)
    if (getattr(fn, "__module__", "") or "").startswith("tessera.nn.ops") and name in _BY_NAME:
        return name
    return None


def deserialize(config, custom_objects=None):
    if isinstance(config, dict):
        config = config.get("config", config.get("class_name"))
    if custom_objects and config in custom_objects:
        return custom_objects[config]
    if config in _BY_NAME:
        return _BY_NAME[config]
    close = difflib.get_close_matches(str(config), sorted(_BY_NAME), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"[activations.deserialize] unknown activation {config!r}{hint} "
                     f"Known: {sorted(_BY_NAME)}")


def get(identifier):
    """None → linear; a name → the function; a function → itself."""
    if identifier is None:
        return linear
    if isinstance(identifier, (str, dict)):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise TypeError(f"[activations.get] could not interpret activation {identifier!r} (a name, "
                    "a function or None)")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    close = difflib.get_close_matches(name, __all__, n=3)
    raise AttributeError(f"[tessera.nn.activations] Keras's {name!r} is not supported by tessera "
                         f"yet; the closest supported: {close}")
