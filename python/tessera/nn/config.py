"""keras.config: Keras 3's global settings, for scripts written against Keras.

tessera computes with its own kernels (`backend()` is "tessera"); the defaults are
Keras's. What the settings change here:

- `set_floatx` / `set_dtype_policy`: the dtype of layers and models made afterwards
  without one ("float32" or "float64"; half precision is refused, naming it).
- `set_image_data_format`: the data_format of layers, `ops.image` and the image utilities
  given none.
- `set_max_epochs` / `set_max_steps_per_epoch` (or the environment variables
  KERAS_MAX_EPOCHS / KERAS_MAX_STEPS_PER_EPOCH, as Keras): cap fit's epochs and the steps
  of fit, evaluate and predict, with Keras's warning.
- `disable_interactive_logging`: no progress bar; fit's epoch lines go to the Python
  logger "tessera.nn" (Keras sends them to absl's logging).
- `enable_unsafe_deserialization`: recorded only. tessera never runs code from a file
  (a saved Lambda is refused by name whatever this says: docs/security.md).
- `set_epsilon`: tessera's losses and metrics use Keras's 1e-7; another value is refused.
- traceback filtering and flash attention: switches Keras's tooling reads; recorded
  (tessera's errors name the user's line anyway; its attention is one fused kernel).
"""

from __future__ import annotations

from ._config import SETTINGS
from .dtype_policies import global_policy, set_global_policy
from .symbolic import user_location

__all__ = [
    "backend", "disable_flash_attention", "disable_interactive_logging",
    "disable_traceback_filtering", "dtype_policy", "enable_flash_attention",
    "enable_interactive_logging", "enable_traceback_filtering", "enable_unsafe_deserialization",
    "epsilon", "floatx", "image_data_format", "is_flash_attention_enabled",
    "is_interactive_logging_enabled", "is_nnx_enabled", "is_traceback_filtering_enabled",
    "max_epochs", "max_steps_per_epoch", "set_backend", "set_dtype_policy", "set_epsilon",
    "set_floatx", "set_image_data_format", "set_max_epochs", "set_max_steps_per_epoch"]


def backend() -> str:
    """The framework computing: "tessera" (Keras says "jax", "torch", ...)."""
    return "tessera"


def set_backend(backend):  # noqa: ARG001 - Keras's signature
    raise NotImplementedError(
        f"[keras.config.set_backend] tessera.nn is its own backend: it cannot switch to "
        f"{backend!r} (called at {user_location()}); import keras itself for Keras's backends")


def floatx() -> str:
    """The default float dtype of weights and computations ("float32" unless set)."""
    return global_policy().name


def set_floatx(value):
    """The default float dtype of layers and models made from now on."""
    if value not in ("float16", "bfloat16", "float32", "float64"):
        raise ValueError(f"[keras.config.set_floatx] unknown floatx {value!r}: give one of "
                         f"'bfloat16', 'float16', 'float32', 'float64'")
    set_global_policy(value)


def dtype_policy():
    """The global DTypePolicy (keras.config.dtype_policy)."""
    return global_policy()


def set_dtype_policy(policy):
    """Sets the global DTypePolicy (keras.config.set_dtype_policy)."""
    set_global_policy(policy)


def epsilon() -> float:
    """The fuzz factor of losses and metrics: 1e-7, Keras's."""
    return SETTINGS["epsilon"]


def set_epsilon(value):
    if float(value) != 1e-7:
        raise NotImplementedError(
            f"[keras.config.set_epsilon] tessera's losses and metrics are compiled with "
            f"Keras's default fuzz factor 1e-7; {value!r} is not supported (called at "
            f"{user_location()})")
    SETTINGS["epsilon"] = 1e-7


def image_data_format() -> str:
    """The data_format of layers given none ("channels_last" unless set)."""
    return SETTINGS["image_data_format"]


def set_image_data_format(data_format):
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"[keras.config.set_image_data_format] the data_format must be "
                         f"'channels_first' or 'channels_last', got {data_format!r}")
    SETTINGS["image_data_format"] = data_format


def _cap(name, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or
                              value <= 0):
        raise ValueError(f"[keras.config.set_{name}] expected a positive int or None, got "
                         f"{value!r}")
    SETTINGS[name] = value


def max_epochs():
    """The cap on fit's epochs (None: none), from set_max_epochs or KERAS_MAX_EPOCHS."""
    return SETTINGS["max_epochs"]


def set_max_epochs(max_epochs):
    _cap("max_epochs", max_epochs)


def max_steps_per_epoch():
    """The cap on the steps of an epoch of fit, evaluate or predict (None: none)."""
    return SETTINGS["max_steps_per_epoch"]


def set_max_steps_per_epoch(max_steps_per_epoch):
    _cap("max_steps_per_epoch", max_steps_per_epoch)


def enable_interactive_logging():
    SETTINGS["interactive_logging"] = True


def disable_interactive_logging():
    SETTINGS["interactive_logging"] = False


def is_interactive_logging_enabled() -> bool:
    return SETTINGS["interactive_logging"]


def enable_traceback_filtering():
    SETTINGS["traceback_filtering"] = True


def disable_traceback_filtering():
    SETTINGS["traceback_filtering"] = False


def is_traceback_filtering_enabled() -> bool:
    return SETTINGS["traceback_filtering"]


def enable_flash_attention():
    SETTINGS["flash_attention"] = True


def disable_flash_attention():
    SETTINGS["flash_attention"] = False


def is_flash_attention_enabled():
    """None unless set, as Keras's (its automatic choice)."""
    return SETTINGS["flash_attention"]


def enable_unsafe_deserialization():
    """Recorded for scripts that call it; tessera still never runs code from a file."""
    SETTINGS["unsafe_deserialization"] = True


def is_nnx_enabled() -> bool:
    """Flax NNX integration: never (tessera is not JAX)."""
    return False
