"""keras.models for code written against Keras: Model, Sequential,
load_model and save_model."""

import os

from .model import Model, Sequential
from .json_config import model_from_json
from .saving import clone_model, load_model

__all__ = ["Model", "Sequential", "clone_model", "load_model", "model_from_json", "save_model"]


def save_model(model, filepath, overwrite=True):
    """model.save(filepath) (keras.models.save_model / keras.saving.save_model)."""
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError(f"[save_model] {filepath} exists and overwrite=False")
    model.save(filepath)
