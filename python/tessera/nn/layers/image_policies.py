"""Keras's augmentation policies built from the other image layers:
RandAugment (num_ops operations drawn for the batch, applied in turn),
AugMix (chains of operations mixed by Dirichlet weights and blended with
the input) and Pipeline (layers in turn). Eager, with NumPy, on arrays
(data preprocessing)."""

from __future__ import annotations

import inspect

import numpy as np

from ..registry import get_registered_object
from ..symbolic import KerasTensor
from . import image_augment, image_color, image_preprocessing
from .base import Layer
from .image_augment import RandomShear
from .image_color import (AutoContrast, Equalization, RandomBrightness, RandomColorDegeneration,
                          RandomPosterization, RandomSharpness, Solarization, _located,
                          _unit_range, _value_range)
from .image_preprocessing import (RandomContrast, RandomRotation, RandomTranslation, _check_interp,
                                  _RandomImage)

__all__ = ["RandAugment", "AugMix", "Pipeline"]


def _operations(factor, value_range, interpolation, rng):
    """Keras's operations of RandAugment and AugMix, by name, each with its
    own seed from rng (the first seven are AugMix's without all_ops)."""
    s = [int(v) for v in rng.integers(0, 2 ** 31, 11)]
    vr, f = value_range, factor
    return {
        "random_shear": RandomShear(f, f, interpolation=interpolation, seed=s[0]),
        "random_translation": RandomTranslation(f, f, interpolation=interpolation, seed=s[1]),
        "random_rotation": RandomRotation(f, interpolation=interpolation, seed=s[2]),
        "random_posterization": RandomPosterization(max(1, int(8 * f[1])), value_range=vr,
                                                    seed=s[3]),
        "solarization": Solarization(f, f, value_range=vr, seed=s[4]),
        "auto_contrast": AutoContrast(value_range=vr),
        "equalization": Equalization(value_range=vr),
        "random_brightness": RandomBrightness(f, value_range=vr, seed=s[5]),
        "random_color_degeneration": RandomColorDegeneration(f, value_range=vr, seed=s[6]),
        "random_contrast": RandomContrast(f, value_range=vr, seed=s[7]),
        "random_sharpness": RandomSharpness(f, value_range=vr, seed=s[8]),
    }


# Keras's order of RandAugment's operations (its random index picks among them).
_RAND_AUGMENT = ["random_shear", "random_translation", "random_rotation", "random_brightness",
                 "random_color_degeneration", "random_contrast", "random_sharpness",
                 "random_posterization", "solarization", "auto_contrast", "equalization"]


def _positive_int(v, where, name):
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise _located(ValueError, f"[{where}] {name} must be a positive int, got {v!r}")
    return v


class RandAugment(_RandomImage):
    """Applies num_ops operations, each drawn (for the batch) from Keras's
    eleven (shear, translation, rotation, brightness, colour degeneration,
    contrast, sharpness, posterization, solarization, auto contrast,
    equalization) with magnitude factor, like keras.layers.RandAugment."""

    kind = "RandAugment"

    def __init__(self, value_range=(0, 255), num_ops=2, factor=0.5, interpolation="bilinear",
                 seed=None, data_format=None, name=None, **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.value_range = _value_range(value_range, self.kind)
        self.num_ops = _positive_int(num_ops, self.kind, "num_ops")
        self.factor = _unit_range(factor, self.kind)
        self.interpolation = _check_interp(interpolation, self.kind)
        self._ops = _operations(self.factor, self.value_range, interpolation, self._rng)

    def _draw(self):
        return [_RAND_AUGMENT[i] for i in self._rng.integers(0, len(_RAND_AUGMENT),
                                                             self.num_ops)]

    def _augment(self, a):
        for name in self._draw():
            a = self._ops[name]._augment(a)
        return a.astype(np.float32)


class AugMix(_RandomImage):
    """AugMix, like keras.layers.AugMix: num_chains chains of up to
    chain_depth operations (each step one of the operations or none), mixed
    by Dirichlet(alpha) weights, blended with the input by a Beta(alpha,
    alpha) weight and clipped to value_range; all_ops=False keeps the
    geometric and tone operations only."""

    kind = "AugMix"

    def __init__(self, value_range=(0, 255), num_chains=3, chain_depth=3, factor=0.3, alpha=1.0,
                 all_ops=True, interpolation="bilinear", seed=None, data_format=None, name=None,
                 **kwargs):
        super().__init__(seed, data_format, name, **kwargs)
        self.value_range = _value_range(value_range, self.kind)
        self.num_chains = _positive_int(num_chains, self.kind, "num_chains")
        self.chain_depth = _positive_int(chain_depth, self.kind, "chain_depth")
        self.factor = _unit_range(factor, self.kind)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
            raise _located(ValueError, f"[AugMix] alpha must be a positive number, got {alpha!r}")
        self.alpha, self.all_ops = float(alpha), bool(all_ops)
        self.interpolation = _check_interp(interpolation, self.kind)
        ops = _operations(self.factor, self.value_range, interpolation, self._rng)
        self._ops = dict(list(ops.items())[:11 if all_ops else 7])

    def _draw(self):
        weights = self._rng.dirichlet([self.alpha] * self.num_chains)
        blend = self._rng.beta(self.alpha, self.alpha)
        names = list(self._ops) + [None]
        chains = [[n for n in (names[i] for i in self._rng.integers(0, len(names),
                                                                    self.chain_depth))
                   if n is not None] for _ in range(self.num_chains)]
        return weights.astype(np.float32), np.float32(blend), chains

    def _augment(self, a):
        weights, blend, chains = self._draw()
        mixed = np.zeros_like(a)
        for w, chain in zip(weights, chains):
            x = a
            for name in chain:
                x = self._ops[name]._augment(x)
            mixed += x * w
        return np.clip(blend * a + (1 - blend) * mixed, *self.value_range).astype(np.float32)


def _layer_from_config(entry):
    if isinstance(entry, Layer):
        return entry
    if not isinstance(entry, dict) or "class_name" not in entry:
        raise _located(ValueError,
                       f"[Pipeline.from_config] each layer must be a layer or a dict with "
                       f"'class_name' and 'config', got {entry!r}")
    name = entry["class_name"]
    cls = get_registered_object(name) or next(
        (getattr(m, name) for m in (image_preprocessing, image_color, image_augment)
         if name in m.__all__), None) or (globals().get(name) if name in __all__ else None)
    if not (isinstance(cls, type) and issubclass(cls, Layer)):
        raise _located(ValueError,
                       f"[Pipeline.from_config] unknown layer class {name!r}: an image "
                       "preprocessing layer or a registered one")
    return cls.from_config(dict(entry.get("config") or {}))


class Pipeline(Layer):
    """Applies its layers in order (passing `training` to those taking it),
    like keras.layers.Pipeline: a chain of preprocessing layers for arrays
    and data pipelines; on a model's tensor it adds its layers to the model
    (those that compile into one)."""

    kind = "Pipeline"

    def __init__(self, layers, name=None):
        super().__init__(name=name)
        if not isinstance(layers, (list, tuple)) or not all(isinstance(l, Layer)
                                                            for l in layers):
            raise _located(TypeError, f"[Pipeline] layers must be a list of layers, got {layers!r}")
        self._pipeline_layers = list(layers)

    @property
    def layers(self):
        return list(self._pipeline_layers)

    def __call__(self, inputs, training=True):
        # On a model's tensor the model decides (random in fit, identity in predict).
        symbolic = isinstance(inputs, KerasTensor)
        for layer in self._pipeline_layers:
            takes = "training" in inspect.signature(layer.call).parameters
            inputs = layer(inputs, training=training) if takes and training is not None \
                and not symbolic else layer(inputs)
        return inputs

    def call(self, inputs, training=True):
        return self(inputs, training=training)

    def get_config(self):
        return {"name": self.name,
                "layers": [{"class_name": type(l).__name__, "config": l.get_config()}
                           for l in self._pipeline_layers]}

    @classmethod
    def from_config(cls, config):
        layers = config.get("layers") if isinstance(config, dict) else None
        if not isinstance(layers, (list, tuple)):
            raise _located(ValueError,
                           f"[Pipeline.from_config] config must map 'layers' to a list of "
                           f"layers, got {config!r}")
        return cls([_layer_from_config(e) for e in layers], name=config.get("name"))
