"""Keras's serialized form of single objects (keras.saving.serialize_keras_object
and deserialize_keras_object, also in tessera.nn.utils): classes resolve through
tessera.nn.saving's registry, never by importing a module a configuration names."""

from __future__ import annotations

import numpy as np

from .saving import (_OBJECT_KINDS, _construct, _Load, _resolve, get_registered_name,
                     get_registered_object)

__all__ = ["serialize_keras_object", "deserialize_keras_object"]


def serialize_keras_object(obj):
    """Keras's serialized form: {"module", "class_name", "config",
    "registered_name"} for objects with get_config and for functions;
    None, numbers, strings, lists and dicts as they are."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [serialize_keras_object(o) for o in obj]
    if isinstance(obj, dict):
        return {k: serialize_keras_object(v) for k, v in obj.items()}
    if isinstance(obj, type):
        raise TypeError(f"[serialize_keras_object] got the class {obj.__name__}; serialize an "
                        "object of it")
    if callable(obj) and not hasattr(obj, "get_config"):
        name = getattr(obj, "__name__", None)
        if name is None or name == "<lambda>":
            raise TypeError("[serialize_keras_object] a lambda cannot be serialized; give a "
                            "named, registered function")
        return {"module": obj.__module__, "class_name": "function", "config": name,
                "registered_name": get_registered_name(obj)}
    if not callable(getattr(obj, "get_config", None)):
        raise TypeError(f"[serialize_keras_object] {type(obj).__name__} has no get_config")
    cls = type(obj)
    return {"module": cls.__module__, "class_name": cls.__name__,
            "config": serialize_keras_object(obj.get_config()),
            "registered_name": get_registered_name(cls)}


def deserialize_keras_object(config, custom_objects=None, safe_mode=True, **kwargs):
    """The object serialize_keras_object described. Classes resolve as when
    loading a model: custom_objects, then the registry
    (register_keras_serializable, custom_object_scope), then tessera's own
    classes; no module a configuration names is imported."""
    if config is None or isinstance(config, (bool, int, float)):
        return config
    if isinstance(config, str):
        found = get_registered_object(config, custom_objects)
        return found if found is not None else config
    if isinstance(config, list):
        return [deserialize_keras_object(c, custom_objects, safe_mode) for c in config]
    if not isinstance(config, dict) or "class_name" not in config:
        if isinstance(config, dict):
            return {k: deserialize_keras_object(v, custom_objects, safe_mode)
                    for k, v in config.items()}
        raise TypeError(f"[deserialize_keras_object] cannot read {type(config).__name__}")
    custom = dict(custom_objects or {})
    name = config.get("registered_name") or config["class_name"]
    if config["class_name"] == "function":
        fn_name = config.get("config")
        fn = get_registered_object(name, custom) or get_registered_object(fn_name, custom)
        if fn is None:
            raise ValueError(f"[deserialize_keras_object] the function {fn_name!r} is not "
                             "registered: pass custom_objects={name: fn} or register it with "
                             "@register_keras_serializable()")
        return fn
    ctx = _Load("<config>", custom, where="deserialize_keras_object")
    # tessera's own module picks between its classes of one name (keras.optimizers' Adam or
    # tessera.optim's); Keras's modules name none of tessera's
    module = config.get("module") if str(config.get("module")).startswith("tessera.") else None
    try:
        cls = _resolve(name, module, ("layer",) + _OBJECT_KINDS, ctx,
                              "the configuration")
    except ValueError:
        if name == config["class_name"]:
            raise
        cls = _resolve(config["class_name"], module, ("layer",) + _OBJECT_KINDS,
                              ctx, "the configuration")
    inner = config.get("config") or {}
    if not isinstance(inner, dict):
        raise ValueError("[deserialize_keras_object] config['config'] must be a dict")
    return _construct(cls, inner, ctx, f"the object {config['class_name']}")


# ----------------------------------------------------------------- plot_model
