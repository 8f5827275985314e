"""Keras's meaning of the optimizers whose tessera.optim form follows PyTorch:
weight decay (Keras 3 decouples it for every optimizer: ``w -= w * weight_decay *
learning_rate`` before the step, where tessera.optim's SGD and Adam add PyTorch's L2
term to the gradient) and AdamW's default decay (Keras's 0.004, PyTorch's 0.01).
keras.optimizers (tessera.nn.optimizers) and compile("adam") give these."""

from __future__ import annotations

from .. import optim as _optim


def _decay(weight_decay):
    return 0.0 if weight_decay is None else weight_decay


class SGD(_optim.SGD):
    """Keras's SGD: ``weight_decay`` (default None) is Keras's decoupled decay,
    ``w -= w * weight_decay * learning_rate`` before each step."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
                 clipnorm=None):
        super().__init__(learning_rate, momentum, nesterov, _decay(weight_decay), clipnorm,
                         decoupled=True)


class Adam(_optim.Adam):
    """Keras's Adam: ``weight_decay`` (default None) is Keras's decoupled decay."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 weight_decay=None, clipnorm=None):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, _decay(weight_decay), clipnorm,
                         decoupled=True)


class AdamW(_optim.AdamW):
    """Keras's AdamW: Keras's default weight decay, 0.004."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, clipnorm=None):
        super().__init__(learning_rate, weight_decay, beta_1, beta_2, epsilon, clipnorm)


_KERAS = {"sgd": SGD, "adam": Adam, "adamw": AdamW}


def get(identifier):
    """keras.optimizers.get: a name (Keras's meaning for "sgd", "adam", "adamw";
    tessera.optim's other optimizers, which already follow Keras), a config
    dict, or an optimizer (returned as is)."""
    if isinstance(identifier, str) and identifier.lower() in _KERAS:
        return _KERAS[identifier.lower()]()
    return _optim.get(identifier)
