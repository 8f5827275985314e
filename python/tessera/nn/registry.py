"""Names tessera.nn resolves at run time instead of importing them, so that
every import points down the layers (docs/nn.md, "Layout"):

- users' objects (register_keras_serializable, custom_object_scope,
  get_custom_objects), read by load_model, from_config and deserialize;
- the readers of files that are not models (FILE_FORMATS: a FeatureSpace);
- the model classes (`Model`, `Sequential`), registered by model/ when it is
  imported and looked up by the lower modules that build a model: a layer
  called on arrays runs as a one-layer model; load_model builds one.
"""

from __future__ import annotations

import contextvars

_CUSTOM: dict = {}
_MODEL_CLASSES: dict = {}
# Files load_model reads that hold something other than a model, by the "holds"
# of their header: {format: reader(header, path)} (feature_space.py's FeatureSpace).
FILE_FORMATS: dict = {}


def register_file_format(name: str, reader) -> None:
    """Lets load_model read files whose header says {"holds": name}."""
    FILE_FORMATS[name] = reader


# What a functional model's saved architecture adds for inputs the graph does not
# describe (a FeatureSpace's raw Inputs, feature_space.py): "save"(model) -> entries of
# the architecture; "load"(model, arch, ctx) -> the model with those inputs again.
ARCHITECTURE_HOOKS: dict = {"save": lambda model: {}, "load": lambda model, arch, ctx: model}


# tessera's own classes above saving (keras.distillation's Distiller and its losses),
# which a file may name as it names the built-in layers: registered by their module.
_BUILTIN_UPPER: dict = {}


def register_builtin(cls) -> None:
    """Makes one of tessera's own upper-layer classes known to load_model."""
    _BUILTIN_UPPER[cls.__name__] = cls


def register_model_class(name: str, cls) -> None:
    """Made known by tessera.nn.model: `Model` and `Sequential`."""
    _MODEL_CLASSES[name] = cls


def model_class(name: str = "Model"):
    """The registered model class `name` ("Model", "Sequential")."""
    try:
        return _MODEL_CLASSES[name]
    except KeyError:
        raise RuntimeError(f"[tessera.nn] the model class {name!r} is not registered: "
                           "import tessera.nn (not one of its modules alone)") from None


def is_model(obj, name: str = "Model") -> bool:
    """isinstance(obj, Model) (or Sequential) without importing the model."""
    cls = _MODEL_CLASSES.get(name)
    return cls is not None and isinstance(obj, cls)


def register_keras_serializable(package="Custom", name=None):
    """Decorator registering a user's class (a Layer, Model, loss, metric,
    optimizer, schedule, initializer, ...) or function under Keras's key
    "package>name", so that load_model, model_from_json and from_config may
    build it when a configuration names it (as
    keras.saving.register_keras_serializable). Only register classes whose
    constructor is safe to call with any arguments a file gives."""
    if not isinstance(package, str) or not package or ">" in package:
        raise TypeError(f"[register_keras_serializable] package must be a non-empty string "
                        f"without '>', got {package!r}")

    def wrap(cls):
        key = name or getattr(cls, "__name__", None)
        if not isinstance(key, str) or not key:
            raise TypeError(f"[register_keras_serializable] name must be a non-empty string, "
                            f"got {key!r}")
        if not callable(getattr(cls, "get_config", None)) and isinstance(cls, type):
            raise TypeError(f"[register_keras_serializable] {cls.__name__} has no get_config: "
                            "it cannot be serialized")
        _CUSTOM[f"{package}>{key}"] = cls
        return cls

    return wrap


# custom_object_scope's dicts, innermost last
_SCOPES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_custom_scopes", default=())


def get_custom_objects() -> dict:
    """The registry of users' objects (keras.saving.get_custom_objects): the
    dict itself, so that `get_custom_objects()["MyLayer"] = MyLayer`
    registers MyLayer; register_keras_serializable adds "package>name"."""
    return _CUSTOM


class custom_object_scope:  # noqa: N801 - Keras's name
    """`with custom_object_scope({"MyLayer": MyLayer}):` — the objects are
    known to load_model, model_from_json and from_config within."""

    def __init__(self, custom_objects=None, *more):
        scopes = [custom_objects or {}] + list(more)
        for d in scopes:
            if not isinstance(d, dict) or not all(isinstance(k, str) for k in d):
                raise TypeError(f"[custom_object_scope] expected dicts of names to objects, got "
                                f"{d!r}")
        self._objects = {k: v for d in scopes for k, v in d.items()}
        self._token = None

    def __enter__(self):
        self._token = _SCOPES.set(_SCOPES.get() + (self._objects,))
        return self

    def __exit__(self, *exc):
        _SCOPES.reset(self._token)
        return False


CustomObjectScope = custom_object_scope


def _registered(name: str):
    """A user's object by name: the scopes (innermost first), then the
    registry by exact key or by "package>name"."""
    for scope in reversed(_SCOPES.get()):
        if name in scope:
            return scope[name]
    if name in _CUSTOM:
        return _CUSTOM[name]
    for key, obj in _CUSTOM.items():
        if key.split(">", 1)[-1] == name:
            return obj
    return None


def registered_class(config):
    """The user's class a Keras serialized dict names ({"class_name", "config",
    "registered_name"}: registered, or in a custom_object_scope), else None."""
    if not isinstance(config, dict) or "class_name" not in config:
        return None
    for name in (config.get("registered_name"), config["class_name"]):
        found = _registered(name) if isinstance(name, str) and name else None
        if isinstance(found, type):
            return found
    return None


def named_class(name: str):
    """The class a file names, when it is a user's (_registered) or one of
    tessera's upper-layer classes (register_builtin); else None."""
    found = _registered(name)
    return found if found is not None else _BUILTIN_UPPER.get(name)


def get_registered_name(obj) -> str:
    """The key `obj` is registered under (else its name), as Keras's."""
    for key, v in _CUSTOM.items():
        if v is obj:
            return key
    return getattr(obj, "__name__", type(obj).__name__)


def get_registered_object(name, custom_objects=None, module_objects=None):
    """The object registered (or given in custom_objects, or in an active
    custom_object_scope) as `name`; None when there is none (Keras's)."""
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    found = _registered(name)
    if found is not None:
        return found
    if module_objects and name in module_objects:
        return module_objects[name]
    return None


# The name of the models tessera makes for itself (an eager call's program, a
# stateful layer's): named, so that they take no automatic name ("functional",
# "functional_1" stay the user's models', as in Keras).
INTERNAL_MODEL_NAME = "_tessera_internal"
