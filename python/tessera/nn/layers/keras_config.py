"""Keras's shape of a built-in layer's get_config: every constructor argument
with its default, the name, trainable and the dtype policy; initializers,
regularizers and constraints as Keras's serialized dicts; the activation by
its name ("linear" for none). `constructor_arguments` maps such a config (or
the shorter one tessera wrote before, which files saved earlier hold) back to
the arguments the class's constructor takes."""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap

import numpy as np

from .. import constraints, initializers, regularizers
from .._config import SETTINGS
from ..activations import builtin_name
from ..dtype_policies import DTypePolicy, policy_of
from ..dtype_policies import serialize as serialize_policy
from ..registry import get_registered_name

__all__ = ["keras_layer_config", "constructor_arguments", "given_arguments",
           "serialize_argument", "serialized_object_keys", "is_dtype_name", "layer_dict",
           "LAYER_FROM_DICT"]

# layers.deserialize, set by the package (above the families): builds a wrapper's layer
# from Keras's dict of it (from_config of a Bidirectional's or TimeDistributed's config)
LAYER_FROM_DICT: dict = {}

# Layer.__init__'s arguments that are no key of Keras's configs (Keras 2's aliases), or that
# the base entries (name, trainable, dtype) already hold
_BASE_ONLY = {"self", "name", "input_shape", "batch_input_shape", "dtype", "trainable"}

# Keras's keys tessera's constructors do not take, with the only value tessera has (its
# configs hold them so that scripts reading them find Keras's; from_config drops them at
# that value, and passes any other on to the constructor's error)
_RNN_ONLY = {"kernel_constraint": None, "recurrent_constraint": None, "bias_constraint": None,
             "seed": None}
_KERAS_ONLY = {
    "Dense": {"quantization_config": None},
    "EinsumDense": {"quantization_config": None},
    "Embedding": {"quantization_config": None},
    "BatchNormalization": {"synchronized": False, "renorm": False, "renorm_clipping": None,
                           "renorm_momentum": 0.99},
    "LayerNormalization": {"rms_scaling": False},
    "Flatten": {"data_format": "channels_last"},
    "SimpleRNN": {k: v for k, v in _RNN_ONLY.items() if k != "seed"},
    "LSTM": _RNN_ONLY, "GRU": _RNN_ONLY,
    "MultiHeadAttention": {"use_gate": False, "sliding_window": None, "kernel_constraint": None,
                           "bias_constraint": None, "seed": None},
    "InputLayer": {"sparse": False, "ragged": False, "optional": False},
}
# Keras's configs of these classes leave out an argument their constructors take
_TRANSPOSED = {"groups"}
_KERAS_OMITS = {"GroupedQueryAttention": {"flash_attention"},
                "SimpleRNN": {"recurrent_activation"}, "CategoryEncoding": {"sparse"},
                "Conv1DTranspose": _TRANSPOSED, "Conv2DTranspose": _TRANSPOSED,
                "Conv3DTranspose": _TRANSPOSED}
# Layers whose Keras configs hold activity_regularizer even when it is None (the others
# list it only when one is given)
_ACTIVITY_KEY = {"Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose",
                 "Conv3DTranspose", "SeparableConv1D", "SeparableConv2D", "DepthwiseConv1D",
                 "DepthwiseConv2D", "SimpleRNN", "LSTM", "GRU", "Embedding",
                 "MultiHeadAttention", "EinsumDense", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D",
                 "GroupedQueryAttention"}
# Classes whose constructors take only their own arguments (their **kwargs refuse their
# base's: GroupedQueryAttention's, MultiHeadAttention's)
_OWN_ONLY = {"GroupedQueryAttention"}


def _value_dim(config):
    if config.get("value_dim") is None:  # Keras's config: the key's size when not given
        config["value_dim"] = config.get("key_dim")


def _axis_tuple(config):
    if isinstance(config.get("axis"), int):  # Keras's Normalization keeps a tuple
        config["axis"] = (config["axis"],)


def _shape_tuple(config):
    if isinstance(config.get("output_shape"), int):  # Keras's EinsumDense keeps a tuple
        config["output_shape"] = (config["output_shape"],)


def _dtype_name(config):
    # Keras's configs of these hold the dtype policy's name and no trainable
    config.pop("trainable", None)
    if isinstance(config.get("dtype"), DTypePolicy):
        config["dtype"] = config["dtype"].name


def _no_box_format(config):
    if config.get("bounding_box_format", 0) is None:  # (Keras's configs list it when given)
        del config["bounding_box_format"]


def _padding_pairs(config):
    pad = config.get("padding")
    if isinstance(pad, (tuple, list)) and all(isinstance(p, int) for p in pad):
        config["padding"] = tuple((p, p) for p in pad)  # Keras's: (before, after) per axis


_FIXUPS = {"RandomFlip": _no_box_format, "Resizing": _no_box_format,
           "CenterCrop": _no_box_format, "ZeroPadding2D": _padding_pairs,
           "ZeroPadding3D": _padding_pairs, "MultiHeadAttention": _value_dim, "Normalization": _axis_tuple,
           "EinsumDense": _shape_tuple, "SpatialDropout1D": _dtype_name,
           "SpatialDropout2D": _dtype_name, "SpatialDropout3D": _dtype_name,
           "Discretization": _dtype_name}


def _public_module(obj) -> str:
    """tessera's public namespace of an initializer, regularizer or constraint
    (Keras writes keras.initializers, ...)."""
    for family in ("initializers", "regularizers", "constraints"):
        if type(obj).__module__ == f"tessera.nn.{family}":
            return f"tessera.nn.{family}"
    return type(obj).__module__


def _serialized(obj, tessera_config: dict) -> dict:
    config = {k: v for k, v in tessera_config.items() if k != "class"}
    # Keras's: None for its own classes, a user's class by its registered key (else its name),
    # which load_model looks up in custom_objects and the registry
    own = type(obj).__module__.startswith("tessera.")
    return {"module": _public_module(obj), "class_name": type(obj).__name__,
            "config": {k: serialize_argument("", v) for k, v in config.items()},
            "registered_name": None if own else get_registered_name(type(obj))}


def serialized_object_keys(config: dict) -> list:
    """The keys of a layer's config whose values are Keras's serialized
    initializers, regularizers or constraints ({"class_name": ..., "config":
    ...}), which the loader builds in its own context (the user's classes)."""
    return [k for k, v in config.items()
            if isinstance(k, str) and k.endswith(("initializer", "regularizer", "constraint"))
            and isinstance(v, dict) and "class_name" in v]


def serialize_argument(key: str, value):
    """One argument as Keras's config holds it (named by `key`)."""
    if key in ("activation", "recurrent_activation"):
        if value is None:
            return "linear"
        if callable(value) and builtin_name(value) is not None:
            return builtin_name(value)
        return value
    if value is None or isinstance(value, (bool, int, float, str, list, tuple)):
        if isinstance(value, str) and key.endswith("initializer"):
            value = initializers.get(value)  # Keras's dict of the named initializer
        elif isinstance(value, str) and key.endswith("regularizer"):
            value = regularizers.get(value)
        elif isinstance(value, str) and key.endswith("constraint"):
            value = constraints.get(value)
        else:
            return value
    if isinstance(value, dict) and "class_name" in value:
        return value  # already serialized (a config copied from another)
    if isinstance(value, DTypePolicy):
        return serialize_policy(value)
    if isinstance(value, (initializers.Initializer, regularizers.Regularizer)):
        return _serialized(value, value.get_config())
    if isinstance(value, constraints.Constraint):
        return _serialized(value, value.get_config())
    return value


def given_arguments(layer) -> dict:
    """The constructor arguments, as given when the layer was made, with its
    name (a user's layer's get_config; what a built-in layer's starts from)."""
    args, kwargs = getattr(layer, "_init_args", ((), {}))
    try:
        bound = inspect.signature(type(layer).__init__).bind(layer, *args, **kwargs)
    except TypeError:
        bound = None
    config = {}
    if bound is not None:
        # the **keyword parameter, whatever its name (**kwargs, **kw)
        var_kw = {q.name for q in bound.signature.parameters.values()
                  if q.kind == q.VAR_KEYWORD}
        for k, v in list(bound.arguments.items())[1:]:  # (after self)
            if k in var_kw:
                config.update(v)
            else:
                config[k] = v
    # Keras's configs name a built-in activation given as a function (Conv2D(activation=
    # keras.activations.swish) -> "silu"), so the model saves and loads
    for key in ("activation", "recurrent_activation"):
        if callable(config.get(key)) and builtin_name(config[key]) is not None:
            config[key] = builtin_name(config[key])
    config["name"] = layer.name
    return config


def _init_parameters(cls):
    """[(name, parameter)] of the arguments the class's constructors take:
    its own, then (when it passes **kwargs on to its base's constructor) the
    base's that its own call to it leaves to the **kwargs."""
    seen, out = set(), []
    for c in cls.__mro__:
        if c.__name__ == "Layer" or c is object:
            break
        if "__init__" not in c.__dict__:
            continue
        params = list(inspect.signature(c.__init__).parameters.values())
        for p in params[1:]:
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name in seen:
                continue
            seen.add(p.name)
            out.append((p.name, p))
        if not any(p.kind == p.VAR_KEYWORD for p in params) or c.__name__ in _OWN_ONLY:
            break
        seen |= _passed_on(c)
    return out


@functools.lru_cache(maxsize=None)
def _passed_on(cls) -> frozenset:
    """The base's constructor arguments the class's constructor gives it
    itself (``super().__init__(filters, activation=activation, **kwargs)``:
    its first positional one and activation)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    base = next((c for c in cls.__mro__[1:] if "__init__" in c.__dict__), None)
    if base is None or base is object:
        return frozenset()
    names = [p.name for p in list(inspect.signature(base.__init__).parameters.values())[1:]
             if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    given = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "__init__":
            positional = [a for a in node.args if not isinstance(a, ast.Starred)]
            if isinstance(node.func.value, ast.Name):  # Base.__init__(self, ...)
                positional = positional[1:]
            given |= set(names[:len(positional)])
            given |= {k.arg for k in node.keywords if k.arg is not None}
    return frozenset(given)


def keras_layer_config(layer, given: dict) -> dict:
    """Keras's get_config of a built-in layer: `given` (the arguments the
    layer was made with, as normalised by its class) over every argument's
    default, with the base entries and serialized objects."""
    cls = type(layer)
    config = {"name": layer.name, "trainable": bool(layer.trainable),
              "dtype": policy_of(_float_policy(layer.dtype))}
    for key, p in _init_parameters(cls):
        if key in _BASE_ONLY or (key == "input_dim" and p.default is None):
            continue
        config[key] = given.get(key, None if p.default is p.empty else p.default)
    for key in given:
        if key not in config and key not in _BASE_ONLY:
            config[key] = given[key]
    owned = {param: arg for arg, param in cls.constraint_arguments.items()}
    for param, constraint in getattr(layer, "_constraints", {}).items():
        if param in owned:
            # a function given as the constraint stays the function (saved by its name)
            config[owned[param]] = getattr(constraint, "fn", constraint) \
                if isinstance(constraint, constraints._FunctionConstraint) else constraint
    for arg in cls.constraint_arguments:
        config.setdefault(arg, None)
    kind = keras_class(cls)
    activity = getattr(layer, "activity_regularizer", None)
    if activity is not None or kind in _ACTIVITY_KEY:
        config["activity_regularizer"] = activity
    else:
        config.pop("activity_regularizer", None)
    if kind in _FIXUPS:
        _FIXUPS[kind](config)
    for key, value in _KERAS_ONLY.get(kind, {}).items():
        config.setdefault(key, value)
    for key in _KERAS_OMITS.get(kind, ()):
        config.pop(key, None)
    if "data_format" in config and config["data_format"] is None:
        config["data_format"] = SETTINGS["image_data_format"]
    return {k: serialize_argument(k, v) for k, v in config.items()}


def keras_class(cls) -> str:
    """The Keras class a layer's class is (itself, or the built-in one a
    subclass of tessera's, such as a tensor-parallel Dense, extends)."""
    for c in cls.__mro__:
        if c.__name__ in _KERAS_ONLY or c.__name__ in _ACTIVITY_KEY or \
                c.__name__ in _KERAS_OMITS or c.__name__ in _FIXUPS:
            return c.__name__
    return cls.__name__


def _float_policy(dtype):
    """A layer's dtype as a policy name: a float dtype, else the global policy's."""
    return dtype if isinstance(dtype, str) and dtype.startswith("float") else None


def constructor_arguments(cls, config: dict) -> dict:
    """The constructor's arguments of a get_config dict: Keras's keys that
    tessera lacks dropped at the one value tessera has, the dtype policy's
    dict as its name."""
    config = dict(config)
    for key, value in _KERAS_ONLY.get(keras_class(cls), {}).items():
        if key in config and config[key] == value and not _takes(cls, key):
            del config[key]
    dtype = config.get("dtype")
    if isinstance(dtype, dict) and dtype.get("class_name") in ("DTypePolicy",
                                                              "FloatDTypePolicy"):
        inner = dtype.get("config") or {}
        # (a malformed policy stays a dict: the constructor's error names it)
        config["dtype"] = inner.get("name", "float32") if isinstance(inner, dict) else dtype
    if "activity_regularizer" in config and config["activity_regularizer"] is None:
        del config["activity_regularizer"]
    for key in ("layer", "backward_layer"):  # a wrapper's layers, as Keras's dicts
        if isinstance(config.get(key), dict) and "class_name" in config[key] and \
                "deserialize" in LAYER_FROM_DICT:
            config[key] = LAYER_FROM_DICT["deserialize"](config[key])
    return config


def layer_dict(layer, name=None) -> dict:
    """Keras's serialized dict of a layer a wrapper holds ({"module",
    "class_name", "config", "registered_name"}), its config's name `name`
    when given (Bidirectional's forward_ and backward_ names)."""
    config = layer.get_config()
    if name is not None:
        config["name"] = name
    own = type(layer).__module__.startswith("tessera.")
    out = {"module": type(layer).__module__, "class_name": type(layer).__name__,
           "config": config, "registered_name": None if own else get_registered_name(type(layer))}
    build = layer.get_build_config()  # a built layer's, as Keras's serialize_keras_object
    if build is not None:
        out["build_config"] = {k: list(v) if isinstance(v, tuple) else v
                               for k, v in build.items()}
    return out


def _takes(cls, key: str) -> bool:
    return any(name == key for name, _ in _init_parameters(cls))


# dtype names of layers' configs NumPy does not know (Keras's policies, string inputs)
_OTHER_DTYPES = {"string", "bfloat16", "mixed_float16", "mixed_bfloat16"}


def is_dtype_name(dtype) -> bool:
    """A layer's dtype read from a file (after constructor_arguments): None,
    or the name of a NumPy dtype or of a policy."""
    if dtype is None:
        return True
    if not isinstance(dtype, str) or len(dtype) > 32:
        return False
    if dtype in _OTHER_DTYPES:
        return True
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True
