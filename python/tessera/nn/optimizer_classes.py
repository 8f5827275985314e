"""keras.optimizers' classes: tessera.optim's optimizers with Keras's meaning
where it differs. Weight decay (Keras 3 decouples it for every optimizer: ``w -= w *
weight_decay * learning_rate`` before the step, where tessera.optim's SGD and Adam add
PyTorch's L2 term to the gradient), AdamW's default decay (Keras's 0.004, PyTorch's
0.01), and Keras's arguments common to every optimizer (``clipnorm`` per weight,
``global_clipnorm``, ``clipvalue``, ``name``; the others refused by name).
keras.optimizers (tessera.nn.optimizers) and compile("adam") give these."""

from __future__ import annotations

import inspect

from .. import optim as _optim
from .layers.base import _auto_name


def _decay(weight_decay):
    return 0.0 if weight_decay is None else weight_decay


# Keras's arguments of every optimizer that tessera does not implement, with
# their defaults (a default is accepted; anything else is an error naming it)
_NOT_SUPPORTED = {"loss_scale_factor": (None, "loss scaling (mixed precision)"),
                  "amsgrad": (False, "AMSGrad's maximum of the second moments")}


# Keras's common arguments these classes take (beyond clipping and name)
_TAKEN = ("gradient_accumulation_steps", "use_ema", "ema_momentum", "ema_overwrite_frequency")


class KerasArguments:
    """Keras's arguments common to every optimizer, in Keras's meaning:
    ``clipnorm`` clips each weight's gradient to that norm, ``global_clipnorm``
    all of them together, ``clipvalue`` each element (at most one of the
    three); ``name``. tessera.optim's own ``clipnorm`` is the global one."""

    def _keras_arguments(self, clipnorm, clipvalue, global_clipnorm, name, rest):
        kind = type(self).__name__
        for k, v in rest.items():
            if k in _TAKEN:
                continue
            if k not in _NOT_SUPPORTED:
                raise TypeError(f"[{kind}] unexpected keyword argument {k!r}")
            default, what = _NOT_SUPPORTED[k]
            if v != default:
                raise ValueError(f"[{kind}] {k}={v!r} is not supported ({what}); leave it at "
                                 f"{default!r}")
        given = [k for k, v in (("clipnorm", clipnorm), ("clipvalue", clipvalue),
                                ("global_clipnorm", global_clipnorm)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"[{kind}] only one of clipnorm, clipvalue and global_clipnorm can "
                             f"be set, got {', '.join(given)}")
        self.set_clipping(clipvalue=clipvalue, weight_clipnorm=clipnorm)
        self.set_gradient_accumulation(rest.get("gradient_accumulation_steps"))
        self.set_ema(rest.get("use_ema", False), rest.get("ema_momentum", 0.99),
                     rest.get("ema_overwrite_frequency"))
        if name is not None and not isinstance(name, str):
            raise TypeError(f"[{kind}] name must be a str, got {name!r}")
        self.name = name or _auto_name(kind)  # sgd, sgd_1, ... (Keras's counters)

    @property
    def global_clipnorm(self):
        """Keras's global_clipnorm (tessera.optim's clipnorm)."""
        return self.clipnorm

    @classmethod
    def from_config(cls, config):
        """This class from a get_config dict (tessera's keys: clipnorm is
        the global one, weight_clipnorm Keras's clipnorm)."""
        config = dict(config)
        config.pop("class", None)
        if "learning_rate" in config:
            config["learning_rate"] = _optim._lr_from_config(config["learning_rate"])
        config.pop("decoupled", None)  # (Keras's SGD and Adam always decouple)
        config.pop("epsilon_hat", None)  # (and Keras's Adam's epsilon is always "hat")
        return cls(clipnorm=config.pop("weight_clipnorm", None),
                   use_ema=config.pop("use_ema", False),
                   ema_momentum=config.pop("ema_momentum", 0.99),
                   ema_overwrite_frequency=config.pop("ema_overwrite_frequency", None),
                   gradient_accumulation_steps=config.pop("gradient_accumulation_steps", None),
                   global_clipnorm=config.pop("clipnorm", None), **config)


class SGD(KerasArguments, _optim.SGD):
    """Keras's SGD: ``weight_decay`` (default None) is Keras's decoupled decay,
    ``w -= w * weight_decay * learning_rate`` before each step."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
                 clipnorm=None, clipvalue=None, global_clipnorm=None, name=None, **kwargs):
        super().__init__(learning_rate, momentum, nesterov, _decay(weight_decay),
                         global_clipnorm, decoupled=True)
        self._keras_arguments(clipnorm, clipvalue, global_clipnorm, name, kwargs)


class Adam(KerasArguments, _optim.Adam):
    """Keras's Adam: ``weight_decay`` (default None) is Keras's decoupled decay,
    ``epsilon`` Keras's "epsilon hat" (added to sqrt(v) before the bias
    correction; PyTorch adds it after)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 weight_decay=None, clipnorm=None, clipvalue=None, global_clipnorm=None,
                 name=None, **kwargs):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, _decay(weight_decay),
                         global_clipnorm, decoupled=True, epsilon_hat=True)
        self._keras_arguments(clipnorm, clipvalue, global_clipnorm, name, kwargs)


class AdamW(KerasArguments, _optim.AdamW):
    """Keras's AdamW: Keras's default weight decay, 0.004."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, clipnorm=None, clipvalue=None, global_clipnorm=None, name=None,
                 **kwargs):
        super().__init__(learning_rate, weight_decay, beta_1, beta_2, epsilon, global_clipnorm,
                         epsilon_hat=True)
        self._keras_arguments(clipnorm, clipvalue, global_clipnorm, name, kwargs)


def _keras_form(base):
    """tessera.optim's `base` (whose other arguments already follow Keras)
    taking Keras's common arguments (KerasArguments)."""
    takes = inspect.signature(base.__init__).parameters

    def __init__(self, *args, clipnorm=None, clipvalue=None, global_clipnorm=None, name=None,
                 **kwargs):
        rest = {k: kwargs.pop(k) for k in list(kwargs) if k in _NOT_SUPPORTED or k in _TAKEN}
        if "weight_decay" in takes and kwargs.get("weight_decay", 0.0) is None:
            kwargs["weight_decay"] = 0.0  # (Keras's default None: no decay)
        if "weight_decay" in kwargs and "weight_decay" not in takes:
            # (Keras's every optimizer has it; this one's decay is not built)
            decay = kwargs.pop("weight_decay")
            if decay:
                raise ValueError(f"[{base.__name__}] weight_decay={decay!r} is not supported "
                                 f"for {base.__name__}; leave it at None")
        try:
            base.__init__(self, *args, clipnorm=global_clipnorm, **kwargs)
        except TypeError as e:  # Python's own (an argument Keras's has not either): named
            if str(e).startswith("["):
                raise
            raise TypeError(f"[{base.__name__}] {e}") from None
        self._keras_arguments(clipnorm, clipvalue, global_clipnorm, name, rest)

    return type(base.__name__, (KerasArguments, base), {
        "__init__": __init__, "__module__": __name__,
        "__doc__": f"Keras's {base.__name__}: tessera.optim.{base.__name__} with Keras's "
                   "clipnorm (per weight), global_clipnorm, clipvalue and name."})


Adadelta, Adagrad, Adamax, Ftrl, Lamb, Lion, Nadam, RMSprop, Adafactor, Muon, \
    ScheduleFreeAdamW = (
        _keras_form(c) for c in (_optim.Adadelta, _optim.Adagrad, _optim.Adamax, _optim.Ftrl,
                                 _optim.Lamb, _optim.Lion, _optim.Nadam, _optim.RMSprop,
                                 _optim.Adafactor, _optim.Muon, _optim.ScheduleFreeAdamW))

_KERAS = {c.__name__.lower(): c for c in (SGD, Adam, AdamW, Adadelta, Adagrad, Adamax, Ftrl, Lamb,
                                           Lion, Nadam, RMSprop, Adafactor, Muon,
                                           ScheduleFreeAdamW)}


def get(identifier):
    """keras.optimizers.get: a name (Keras's optimizers, Keras's arguments),
    a config dict (Keras's serialized form; or tessera's get_config: the Keras
    form of its class unless it describes tessera.optim's PyTorch forms, then
    tessera.optim's), or an optimizer (returned as is)."""
    if isinstance(identifier, str) and identifier.lower() in _KERAS:
        return _KERAS[identifier.lower()]()
    if isinstance(identifier, dict) and "class_name" in identifier and "class" not in identifier:
        # Keras's own serialized form: Keras's argument names and meanings
        cls = _KERAS.get(str(identifier["class_name"]).lower())
        if cls is not None:
            config = dict(identifier.get("config") or {})
            if "learning_rate" in config:
                config["learning_rate"] = _optim._lr_from_config(config["learning_rate"])
            return cls(**config)
    if isinstance(identifier, dict):
        name = str(identifier.get("class", "")).lower()
        inner = identifier
        # tessera.optim's PyTorch forms stay tessera.optim's: the L2 decay of SGD
        # and Adam, the epsilon of Adam and AdamW added after the bias correction
        pytorch = (name in ("sgd", "adam") and inner.get("weight_decay") and
                   not inner.get("decoupled")) or \
            (name in ("adam", "adamw") and not inner.get("epsilon_hat"))
        if name in _KERAS and not pytorch:
            return _KERAS[name].from_config(inner)
    return _optim.get(identifier)
