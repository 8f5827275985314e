"""keras.optimizers' classes: tessera.optim's optimizers with Keras's meaning
where it differs. Weight decay (Keras 3 decouples it for every optimizer: ``w -= w *
weight_decay * learning_rate`` before the step, where tessera.optim's SGD and Adam add
PyTorch's L2 term to the gradient), AdamW's default decay (Keras's 0.004, PyTorch's
0.01), and Keras's arguments common to every optimizer (``clipnorm`` per weight,
``global_clipnorm``, ``clipvalue``, ``name``; the others refused by name).
keras.optimizers (tessera.nn.optimizers) and compile("adam") give these."""

from __future__ import annotations

import inspect
import re
from collections.abc import MutableMapping

import numpy as np

from .. import optim as _optim
from ..optim import StateVar
from .layers.base import _auto_name
from .optimizer_variables import iteration_variable, optimizer_variables
from .variables import is_tracing


def _decay(weight_decay):
    return 0.0 if weight_decay is None else weight_decay


# Keras's arguments of every optimizer that tessera does not implement, with
# their defaults (a default is accepted; anything else is an error naming it)
_NOT_SUPPORTED = {"loss_scale_factor": (None, "loss scaling (mixed precision)"),
                  "amsgrad": (False, "AMSGrad's maximum of the second moments")}


# tessera_config's keys that Keras's get_config holds under its own names (or not at all)
_TESSERA_KEYS = {"class", "learning_rate", "clipnorm", "weight_clipnorm", "clipvalue",
                 "weight_decay", "decoupled", "epsilon_hat", "gradient_accumulation_steps",
                 "use_ema", "ema_momentum", "ema_overwrite_frequency"}
# Keras's optimizers whose weight_decay defaults to a number (the others' None: no decay)
_DECAYING = {"AdamW", "Muon"}


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
    def variables(self) -> list:
        """Keras's `optimizer.variables`: the iteration count, the learning rate (a
        constant one) and the state, as Variables in Keras's order and names, viewing the
        state the training holds (optimizer_variables)."""
        return optimizer_variables(self)

    @property
    def iterations(self):
        """Keras's `optimizer.iterations`: the updates so far, as Keras's int32 Variable
        (`int(...)`, `numpy()`, `assign(n)`); with gradient_accumulation_steps the updates
        (the iteration variable // steps, a number); inside a traced step, the count as a
        number."""
        if is_tracing():
            return _optim.Optimizer.iterations.fget(self)
        steps = getattr(self, "gradient_accumulation_steps", None)
        if steps:  # Keras's: the updates, the iteration variable // steps (not a Variable)
            return np.int32(int(_optim.Optimizer.iterations.fget(self)) // steps)
        return iteration_variable(self)

    @property
    def global_clipnorm(self):
        """Keras's global_clipnorm (tessera.optim's clipnorm)."""
        return self.clipnorm

    def get_config(self) -> dict:
        """Keras's config: the arguments common to every optimizer (clipnorm
        per weight, global_clipnorm, ...), then this optimizer's own; the
        learning rate as Keras's float32 variable holds it, a schedule as
        Keras's serialized dict. (model.save writes tessera_config.)"""
        own = self.tessera_config()
        lr = own["learning_rate"]
        if isinstance(lr, dict) and "class" in lr:
            lr = {"module": "tessera.nn.optimizers.schedules", "class_name": lr["class"],
                  "config": {k: v for k, v in lr.items() if k != "class"},
                  "registered_name": None}
        elif isinstance(lr, (int, float)):
            lr = float(np.float32(lr))
        decay = getattr(self, "weight_decay", None)
        config = {"name": self.name, "learning_rate": lr,
                  "weight_decay": decay if decay or type(self).__name__ in _DECAYING else None,
                  "clipnorm": self.weight_clipnorm, "global_clipnorm": self.clipnorm,
                  "clipvalue": self.clipvalue, "use_ema": self.use_ema,
                  "ema_momentum": self.ema_momentum,
                  "ema_overwrite_frequency": self.ema_overwrite_frequency,
                  "loss_scale_factor": None,
                  "gradient_accumulation_steps": getattr(self, "gradient_accumulation_steps",
                                                         None)}
        config.update((k, v) for k, v in own.items() if k not in _TESSERA_KEYS)
        if "amsgrad" in inspect.signature(type(self).__init__).parameters:
            config["amsgrad"] = bool(getattr(self, "amsgrad", False))
        return config

    def tessera_config(self) -> dict:
        """tessera.optim's config of this optimizer ("class" and tessera's keys:
        clipnorm the global one, weight_clipnorm Keras's clipnorm), which
        model.save writes and from_config and get read too."""
        return {**_optim.Optimizer.get_config(self), "name": self.name}

    @classmethod
    def from_config(cls, config):
        """This class from a get_config dict: Keras's (get_config's), or
        tessera's (tessera_config's, what model.save writes)."""
        config = dict(config)
        if "class" not in config:
            if "learning_rate" in config:
                config["learning_rate"] = _optim._lr_from_config(config["learning_rate"])
            return cls(**config)
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

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        if self.momentum == 0:
            return super()._emit(i, param, grad, prefix, lr, iteration, statements, state)
        # Keras's momentum holds the learning rate (m = momentum m - lr g, w += m):
        # under a schedule it differs from PyTorch's (v = momentum v + g, w -= lr v)
        m = f"{prefix}{param}_momentum"
        state.append(StateVar(m, param))
        _optim._decay_first(param, lr, self.weight_decay if self._decays(param) else 0.0,
                            statements)
        mu = repr(float(self.momentum))
        statements.append(f"define({m}, {m} * {mu} - ({grad}) * {lr})")
        step = f"{m} * {mu} - ({grad}) * {lr}" if self.nesterov else m
        statements.append(f"define({param}, {param} + {step})")


class Adam(KerasArguments, _optim.Adam):
    """Keras's Adam: ``weight_decay`` (default None) is Keras's decoupled decay,
    ``epsilon`` Keras's "epsilon hat" (added to sqrt(v) before the bias
    correction; PyTorch adds it after)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, weight_decay=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, name=None, **kwargs):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, _decay(weight_decay),
                         global_clipnorm, decoupled=True, epsilon_hat=True, amsgrad=amsgrad)
        self._keras_arguments(clipnorm, clipvalue, global_clipnorm, name, kwargs)


class AdamW(KerasArguments, _optim.AdamW):
    """Keras's AdamW: Keras's default weight decay, 0.004."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, name=None, **kwargs):
        super().__init__(learning_rate, weight_decay, beta_1, beta_2, epsilon, global_clipnorm,
                         epsilon_hat=True, amsgrad=amsgrad)
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


def saved_config(optimizer) -> dict:
    """The config model.save writes of an optimizer: tessera's (tessera_config)."""
    own = getattr(optimizer, "tessera_config", None)
    return own() if own is not None else optimizer.get_config()


def get(identifier):
    """keras.optimizers.get: a name (Keras's optimizers, Keras's arguments),
    a config dict (Keras's serialized form; or tessera's get_config: the Keras
    form of its class unless it describes tessera.optim's PyTorch forms, then
    tessera.optim's), or an optimizer (returned as is)."""
    if isinstance(identifier, str) and identifier.lower() in _KERAS:
        return _KERAS[identifier.lower()]()
    if isinstance(identifier, dict) and "MultiOptimizer" in (identifier.get("class"),
                                                             identifier.get("class_name")):
        return MultiOptimizer.from_config(identifier.get("config", identifier))
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


class OptimizerMap(MutableMapping):
    """Keras's OptimizerMap: optimizers by weight path. A key is a path
    (``"sequential/dense/kernel"``) or a regular expression matching whole paths
    (``"encoder/.*"``); an exact key wins, then the one pattern that matches
    (two: an error), else ``default_optimizer``."""

    def __init__(self, default_optimizer, optimizer_map=None):
        if not isinstance(default_optimizer, _optim.Optimizer) or \
                isinstance(default_optimizer, MultiOptimizer):
            raise TypeError(f"[OptimizerMap] default_optimizer must be an optimizer, got "
                            f"{default_optimizer!r}")
        if optimizer_map is not None and not isinstance(optimizer_map, dict):
            raise TypeError(f"[OptimizerMap] optimizer_map must be a dict, got "
                            f"{type(optimizer_map).__name__}: {optimizer_map!r}")
        self.default_optimizer = default_optimizer
        self._optimizer_map = {}
        for k, v in (optimizer_map or {}).items():
            self[k] = v

    def __getitem__(self, key):
        if key in self._optimizer_map:
            return self._optimizer_map[key]
        found = [k for k in self._optimizer_map if re.fullmatch(k, key)]
        if len(found) > 1:
            raise ValueError(f"[OptimizerMap] more than one optimizer for the weight {key!r}: "
                             f"the patterns {found} all match it")
        return self._optimizer_map[found[0]] if found else self.default_optimizer

    def __setitem__(self, key, optimizer):
        if not isinstance(key, str):
            raise ValueError(f"[OptimizerMap] a key must be a string, got {key!r}")
        if key in self._optimizer_map:
            raise ValueError(f"[OptimizerMap] the key {key!r} is in the map already (with "
                             f"{self._optimizer_map[key]!r}); keys may not repeat")
        try:
            re.compile(key)
        except re.error as e:
            raise ValueError(f"[OptimizerMap] the key {key!r} is not a valid regular "
                             f"expression: {e}") from None
        if not isinstance(optimizer, _optim.Optimizer) or isinstance(optimizer, MultiOptimizer):
            raise ValueError(f"[OptimizerMap] the value of {key!r} must be an optimizer (not a "
                             f"MultiOptimizer), got {optimizer!r}")
        self._optimizer_map[key] = optimizer

    def __delitem__(self, key):
        del self._optimizer_map[key]

    def __len__(self):
        return len(self._optimizer_map)

    def __iter__(self):
        return iter(self._optimizer_map)

    def __call__(self, variable):
        return self[variable.path]

    def get_config(self) -> dict:
        return {"default_optimizer": saved_config(self.default_optimizer),
                "optimizer_map": {k: saved_config(v) for k, v in self._optimizer_map.items()}}

    @classmethod
    def from_config(cls, config):
        return cls(get(config["default_optimizer"]),
                   {k: get(v) for k, v in (config.get("optimizer_map") or {}).items()})


class MultiOptimizer(_optim.Optimizer):
    """Keras's MultiOptimizer: each weight updated by the optimizer that
    ``optimizer_map`` (an OptimizerMap, or a function of the weight's Variable)
    gives it, each with its own learning rate (schedule), state and clipping,
    in the one compiled step. It has no learning rate of its own (reading or
    setting ``learning_rate`` is an AttributeError, as in Keras; set it on
    ``optimizers``). Needs whole weights of a model (not under ZeRO or tensor
    parallelism); the sub-optimizers' use_ema is not supported."""

    def __init__(self, optimizer_map, loss_scale_factor=None, name=None):
        if not isinstance(optimizer_map, OptimizerMap) and not callable(optimizer_map):
            raise TypeError(f"[MultiOptimizer] optimizer_map must be an OptimizerMap or a "
                            f"function of a Variable, got {optimizer_map!r}")
        if loss_scale_factor is not None:
            raise ValueError(f"[MultiOptimizer] loss_scale_factor={loss_scale_factor!r} is not "
                             "supported (loss scaling, mixed precision); leave it at None")
        super().__init__(0.0)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"[MultiOptimizer] name must be a str, got {name!r}")
        self.name = name or _auto_name("MultiOptimizer")
        self.loss_scale_factor = None
        self._optimizer_map = optimizer_map
        self._inner = []
        if isinstance(optimizer_map, OptimizerMap):
            for opt in [*optimizer_map.values(), optimizer_map.default_optimizer]:
                if all(opt is not o for o in self._inner):
                    self._inner.append(opt)

    @property
    def optimizers(self) -> list:
        """The sub-optimizers (the map's, then any a function gave)."""
        return list(self._inner)

    @property
    def learning_rate(self):
        raise AttributeError("[MultiOptimizer] has no learning rate of its own: read it on the "
                             "sub-optimizers (optimizer.optimizers)")

    @learning_rate.setter
    def learning_rate(self, value):
        raise AttributeError("[MultiOptimizer] has no learning rate of its own: set it on the "
                             "sub-optimizers (optimizer.optimizers)")

    def set_learning_rate(self, value):
        raise AttributeError("[MultiOptimizer.set_learning_rate] has no learning rate of its "
                             "own: set it on the sub-optimizers (optimizer.optimizers)")

    @property
    def _override(self):
        return None

    @_override.setter
    def _override(self, value):
        if value is not None:  # (a callback: LearningRateScheduler, ReduceLROnPlateau)
            raise ValueError("[MultiOptimizer] a callback set the learning rate to "
                             f"{value!r}, but a MultiOptimizer has none of its own; change "
                             "the sub-optimizers' rates instead")

    def rate_at(self, iteration: int = 0) -> list:
        """Every sub-optimizer's learning rate of update ``iteration``, in the
        order of ``optimizers`` (the step reads its own from this list)."""
        for opt in self._inner:
            opt._last_iteration = iteration
        return [opt.rate_at(iteration) for opt in self._inner]

    def _optimizer_of(self, param: str):
        var = self._variable_of(param) if self._variable_of is not None else None
        if var is None:
            raise ValueError(f"[MultiOptimizer] needs each weight whole, as one of a model's "
                             f"Variables: {param!r} is not one here (ZeRO holds flat slices of "
                             "the weights; fit without zero=)")
        opt = self._optimizer_map(var)
        if not isinstance(opt, _optim.Optimizer) or isinstance(opt, MultiOptimizer):
            raise ValueError(f"[MultiOptimizer] the optimizer for {var.path!r} must be an "
                             f"optimizer (not a MultiOptimizer), got {opt!r}")
        if opt.use_ema:
            raise ValueError(f"[MultiOptimizer] the optimizer for {var.path!r} has use_ema=True,"
                             " which is not supported inside a MultiOptimizer")
        if all(opt is not o for o in self._inner):
            self._inner.append(opt)
        return next(k for k, o in enumerate(self._inner) if o is opt)

    def update_code(self, param_names, grad_names, state_prefix="opt_", lr_expr="lr",
                    iteration_expr="iteration", global_norm=None, sum_squares=None):
        """Each sub-optimizer's update of its weights (Optimizer.update_code),
        reading its rate as ``(lr)[k]`` (rate_at's list)."""
        if global_norm is not None or sum_squares is not None:
            raise ValueError("[MultiOptimizer] weights held in slices or split over a tensor "
                             "group (ZeRO, tensor parallelism) are not supported")
        params, grads = list(param_names), list(grad_names)
        if len(params) != len(grads):
            raise ValueError(f"[MultiOptimizer.update_code] {len(params)} parameters but "
                             f"{len(grads)} gradients")
        self._built = True
        groups = {}
        for p, g in zip(params, grads):
            groups.setdefault(self._optimizer_of(p), []).append((p, g))
        statements, state = [], []
        for k in sorted(groups):
            opt = self._inner[k]
            opt._variable_of, opt._iterations_of = self._variable_of, self._iterations_of
            ps, gs = zip(*groups[k])
            upd = opt.update_code(list(ps), list(gs), state_prefix=f"{state_prefix}m{k}_",
                                  lr_expr=f"({lr_expr})[{k}]", iteration_expr=iteration_expr)
            statements += upd.statements
            state += upd.state
        return _optim.UpdateCode(statements, state)

    def get_config(self) -> dict:
        if not isinstance(self._optimizer_map, OptimizerMap):
            raise TypeError("[MultiOptimizer.get_config] an optimizer_map given as a function "
                            "cannot be serialized; use an OptimizerMap")
        return {"class": "MultiOptimizer", "optimizer_map": self._optimizer_map.get_config(),
                "loss_scale_factor": None, "name": self.name}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("class", None)
        return cls(OptimizerMap.from_config(config.pop("optimizer_map")), **config)

    def __repr__(self) -> str:
        return f"MultiOptimizer({self._optimizer_map!r}, name={self.name!r})"
