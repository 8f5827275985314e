"""keras.optimizers for code written against Keras: tessera.optim's
optimizers under Keras's names (`keras.optimizers.Adam(learning_rate=1e-3)`),
and its learning-rate schedules as `keras.optimizers.schedules`."""

from ...optim import Optimizer, from_config
from ..optimizer_classes import (SGD, Adadelta, Adafactor, Adagrad, Adam, Adamax, AdamW, Ftrl,
                                 Lamb, Lion, MultiOptimizer, Muon, Nadam, OptimizerMap,
                                 RMSprop, ScheduleFreeAdamW, get)
from . import schedules

__all__ = ["SGD", "Adadelta", "Adafactor", "Adamax", "Ftrl", "Lion", "Adagrad", "Adam", "AdamW",
           "Lamb", "MultiOptimizer", "Muon", "Nadam", "Optimizer", "OptimizerMap", "RMSprop",
           "ScheduleFreeAdamW",
           "deserialize", "from_config", "get", "schedules", "serialize"]


def serialize(optimizer) -> dict:
    """Keras's serialized form of the optimizer (keras.optimizers.serialize):
    {"module", "class_name", "config": get_config(), "registered_name"}."""
    return {"module": "tessera.nn.optimizers", "class_name": type(optimizer).__name__,
            "config": optimizer.get_config(), "registered_name": None}


def deserialize(config):
    """The optimizer a config describes (keras.optimizers.deserialize)."""
    return get(config)
