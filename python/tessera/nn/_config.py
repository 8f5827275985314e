"""A base for objects rebuilt from their configuration (model.save), and Keras's global
switches (keras.config)."""

import os
import warnings


class Configurable:
    """get_config() gives {"class": name, argument: value, ...};
    from_config rebuilds the object; repr shows the arguments."""

    def get_config(self) -> dict:
        return {"class": type(self).__name__}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        name = config.pop("class", cls.__name__)
        if name != cls.__name__:
            raise ValueError(f"[{cls.__name__}.from_config] the config describes a {name}")
        return cls(**config)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "class")
        return f"{type(self).__name__}({items})"


# Keras's global switches (keras.config, tessera.nn.config): read by fit, evaluate, predict
# and the layers. KERAS_MAX_EPOCHS / KERAS_MAX_STEPS_PER_EPOCH cap runs, as under Keras.
def _env_int(name):
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"[keras.config] the environment variable {name} must be an int, got "
                         f"{value!r}") from None


SETTINGS = {
    "max_epochs": _env_int("KERAS_MAX_EPOCHS"),
    "max_steps_per_epoch": _env_int("KERAS_MAX_STEPS_PER_EPOCH"),
    "interactive_logging": True,
    "traceback_filtering": True,
    "flash_attention": None,
    "unsafe_deserialization": False,
    "image_data_format": "channels_last",
    "epsilon": 1e-7,
}


def capped_epochs(epochs: int) -> int:
    """fit's epochs, at most keras.config.max_epochs() (with Keras's warning)."""
    cap = SETTINGS["max_epochs"]
    if cap and cap < epochs:
        warnings.warn(f"Limiting epochs to {cap}", stacklevel=3)
        return cap
    return epochs


def capped_steps(steps):
    """A run's steps per epoch (None: the whole data), at most
    keras.config.max_steps_per_epoch() (with Keras's warning)."""
    cap = SETTINGS["max_steps_per_epoch"]
    if cap and (not steps or cap < steps):
        warnings.warn(f"Limiting steps_per_epoch to {cap}", stacklevel=3)
        return cap
    return steps
