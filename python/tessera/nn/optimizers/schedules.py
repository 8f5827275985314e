"""keras.optimizers.schedules: tessera.optim's learning-rate schedules."""

from ...optim import from_config
from ..keras_objects import deserialize_keras_object, serialize_keras_object
from ...optim import (CosineDecay, CosineDecayRestarts, ExponentialDecay, InverseTimeDecay,
                      LearningRateSchedule, LinearWarmup, PiecewiseConstantDecay, PolynomialDecay,
                      StepDecay)

__all__ = ["CosineDecay", "CosineDecayRestarts", "ExponentialDecay", "InverseTimeDecay",
           "LearningRateSchedule", "LinearWarmup", "PiecewiseConstantDecay", "PolynomialDecay",
           "StepDecay"]

__all__ += ["serialize", "deserialize"]

_BUILT_IN = {c.__name__: c for c in (CosineDecay, CosineDecayRestarts, ExponentialDecay,
                                     InverseTimeDecay, LinearWarmup, PiecewiseConstantDecay,
                                     PolynomialDecay, StepDecay)}


def serialize(learning_rate_schedule):
    """Keras's serialized form of a schedule: {"module", "class_name", "config",
    "registered_name"} (a user's registered schedule as serialize_keras_object)."""

    s = learning_rate_schedule
    if type(s).__name__ in _BUILT_IN and type(s) is _BUILT_IN[type(s).__name__]:
        config = dict(s.get_config())
        config.pop("class", None)
        return {"module": "keras.optimizers.schedules", "class_name": type(s).__name__,
                "config": config, "registered_name": None}
    if not isinstance(s, LearningRateSchedule):
        raise TypeError(f"[optimizers.schedules.serialize] expects a LearningRateSchedule, got "
                        f"{type(s).__name__}")
    return serialize_keras_object(s)


def deserialize(config, custom_objects=None):
    """The schedule a serialized form describes (Keras's or tessera's; a user's
    schedule through custom_objects or register_keras_serializable)."""

    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"[optimizers.schedules.deserialize] expects a dict with 'class_name' "
                         f"and 'config' (from serialize), got {config!r}")
    name = config["class_name"]
    if name in _BUILT_IN and name not in (custom_objects or {}):
        return from_config({"class": name, **(config.get("config") or {})})
    return deserialize_keras_object(config, custom_objects=custom_objects)
