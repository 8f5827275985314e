"""Learning-rate schedules (tessera.optim's, re-exported there): a learning
rate as a function of the update count, each with Keras's name, arguments
and ``get_config``/``from_config``. See tessera.optim's module doc."""

from __future__ import annotations

import difflib
import math
import numbers
import operator
from typing import Mapping, Optional, Sequence, Union

class LearningRateSchedule:
    """A learning rate as a function of the update count (0 for the first update).

    ``get_config()`` is a JSON-serializable dict naming the class (key
    ``"class"``) and the constructor's arguments; ``from_config(config)`` (on
    the class, or the module's ``from_config``) rebuilds the schedule."""

    def __call__(self, iteration: int) -> float:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"class": type(self).__name__}

    @classmethod
    def from_config(cls, config: Mapping) -> "LearningRateSchedule":
        """The schedule ``get_config`` described (a user's subclass: as Keras,
        ``cls(**config)``)."""
        if cls is not LearningRateSchedule and cls not in SCHEDULES.values():
            return cls(**{k: v for k, v in dict(config).items() if k != "class"})
        return schedule_from_config(config, cls)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "class")
        return f"{type(self).__name__}({items})"


def _check_iteration(iteration) -> int:
    if isinstance(iteration, bool):
        raise TypeError(f"[learning_rate] iteration must be an int, got {iteration!r}")
    try:
        iteration = operator.index(iteration)
    except TypeError:
        raise TypeError(f"[learning_rate] iteration must be an int, got {iteration!r}") from None
    if iteration < 0:
        raise ValueError(f"[learning_rate] iteration must be >= 0, got {iteration}")
    return iteration


def _positive(name: str, value, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return value


def _steps(name: str, value):
    """A positive number of updates: kept an int when given one."""
    out = _positive(name, value)
    return operator.index(value) if isinstance(value, numbers.Integral) else out


def _count(name: str, value, minimum: int) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


class StepDecay(LearningRateSchedule):
    """``initial * gamma ** (iteration // step_size)`` (PyTorch's StepLR, per update)."""

    def __init__(self, initial: float, step_size: int, gamma: float = 0.1):
        self.initial = _positive("[StepDecay] initial", initial, allow_zero=True)
        self.step_size = _count("[StepDecay] step_size", step_size, 1)
        self.gamma = _positive("[StepDecay] gamma", gamma, allow_zero=True)

    def __call__(self, iteration: int) -> float:
        return self.initial * self.gamma ** (_check_iteration(iteration) // self.step_size)

    def get_config(self) -> dict:
        return {"class": "StepDecay", "initial": self.initial, "step_size": self.step_size,
                "gamma": self.gamma}


def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def _schedule_name(cls: str, name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"[{cls}] name must be a string, got {name!r}")
    return name


class _RateDecay(LearningRateSchedule):
    """The arguments Keras's ExponentialDecay and InverseTimeDecay share; the
    decay of ``p = i / decay_steps`` (floored with ``staircase``) is _decay's."""

    def __init__(self, initial_learning_rate: float, decay_steps, decay_rate: float,
                 staircase: bool, name: str):
        cls = f"[{type(self).__name__}]"
        self.initial_learning_rate = _positive(f"{cls} initial_learning_rate",
                                               initial_learning_rate, allow_zero=True)
        self.decay_steps = _steps(f"{cls} decay_steps", decay_steps)
        self.decay_rate = _positive(f"{cls} decay_rate", decay_rate, allow_zero=True)
        self.staircase = bool(staircase)
        self.name = _schedule_name(type(self).__name__, name)

    def __call__(self, iteration: int) -> float:
        p = _check_iteration(iteration) / self.decay_steps
        if self.staircase:
            p = math.floor(p)
        return self._decay(p)

    def _decay(self, p: float) -> float:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"class": type(self).__name__,
                "initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase, "name": self.name}


class ExponentialDecay(_RateDecay):
    """Keras's ExponentialDecay: ``initial_learning_rate * decay_rate ** (i /
    decay_steps)``, the exponent floored with ``staircase``."""

    def __init__(self, initial_learning_rate: float, decay_steps, decay_rate: float,
                 staircase: bool = False, name: str = "ExponentialDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def _decay(self, p):
        return self.initial_learning_rate * self.decay_rate ** p


class InverseTimeDecay(_RateDecay):
    """Keras's InverseTimeDecay: ``initial_learning_rate / (1 + decay_rate * i /
    decay_steps)``, the quotient ``i / decay_steps`` floored with ``staircase``."""

    def __init__(self, initial_learning_rate: float, decay_steps, decay_rate: float,
                 staircase: bool = False, name: str = "InverseTimeDecay"):
        super().__init__(initial_learning_rate, decay_steps, decay_rate, staircase, name)

    def _decay(self, p):
        return self.initial_learning_rate / (1.0 + self.decay_rate * p)


class PiecewiseConstantDecay(LearningRateSchedule):
    """Keras's PiecewiseConstantDecay: ``values[0]`` while ``i <= boundaries[0]``,
    ``values[k]`` while ``boundaries[k - 1] < i <= boundaries[k]``, and
    ``values[-1]`` after the last boundary (one more value than boundaries)."""

    def __init__(self, boundaries: Sequence, values: Sequence, name: str = "PiecewiseConstant"):
        cls = "[PiecewiseConstantDecay]"
        try:
            boundaries, values = list(boundaries), list(values)
        except TypeError:
            raise TypeError(f"{cls} boundaries and values must be lists, got {boundaries!r} and "
                            f"{values!r}") from None
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"{cls} values must have one more element than boundaries, got "
                             f"{len(boundaries)} boundaries and {len(values)} values")
        self.boundaries = [_number(f"{cls} boundaries", b) for b in boundaries]
        if any(a >= b for a, b in zip(self.boundaries, self.boundaries[1:])):
            raise ValueError(f"{cls} boundaries must increase, got {boundaries!r}")
        self.boundaries = [int(b) if b == int(b) else b for b in self.boundaries]
        self.values = [_positive(f"{cls} values", v, allow_zero=True) for v in values]
        self.name = _schedule_name("PiecewiseConstantDecay", name)

    def __call__(self, iteration: int) -> float:
        i = _check_iteration(iteration)
        for b, v in zip(self.boundaries, self.values):
            if i <= b:
                return v
        return self.values[-1]

    def get_config(self) -> dict:
        return {"class": "PiecewiseConstantDecay", "boundaries": list(self.boundaries),
                "values": list(self.values), "name": self.name}


class PolynomialDecay(LearningRateSchedule):
    """Keras's PolynomialDecay: from ``initial_learning_rate`` to
    ``end_learning_rate`` as ``(initial - end) * (1 - i / decay_steps) ** power +
    end``, then constant; with ``cycle``, ``decay_steps`` is multiplied by
    ``ceil(i / decay_steps)`` (1 at ``i == 0``) so the decay restarts."""

    def __init__(self, initial_learning_rate: float, decay_steps, end_learning_rate=0.0001,
                 power=1.0, cycle: bool = False, name: str = "PolynomialDecay"):
        cls = "[PolynomialDecay]"
        self.initial_learning_rate = _positive(f"{cls} initial_learning_rate",
                                               initial_learning_rate, allow_zero=True)
        self.decay_steps = _steps(f"{cls} decay_steps", decay_steps)
        self.end_learning_rate = _positive(f"{cls} end_learning_rate", end_learning_rate,
                                           allow_zero=True)
        self.power = _positive(f"{cls} power", power, allow_zero=True)
        self.cycle = bool(cycle)
        self.name = _schedule_name("PolynomialDecay", name)

    def __call__(self, iteration: int) -> float:
        i = float(_check_iteration(iteration))
        steps = self.decay_steps
        if self.cycle:
            steps *= 1.0 if i == 0 else math.ceil(i / steps)
        else:
            i = min(i, steps)
        p = i / steps
        return ((self.initial_learning_rate - self.end_learning_rate) * (1.0 - p) ** self.power
                + self.end_learning_rate)

    def get_config(self) -> dict:
        return {"class": "PolynomialDecay", "initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "end_learning_rate": self.end_learning_rate,
                "power": self.power, "cycle": self.cycle, "name": self.name}


class CosineDecay(LearningRateSchedule):
    """Keras 3's CosineDecay: an optional linear warmup from
    ``initial_learning_rate`` to ``warmup_target`` over ``warmup_steps``
    updates, then a cosine decay over ``decay_steps`` updates from the warmup
    target (or, without one, from ``initial_learning_rate``) to ``alpha``
    times it, then constant::

        decayed(s, lr0) = lr0 * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha)
        i < warmup_steps:  initial + (warmup_target - initial) * i / warmup_steps
        otherwise:         decayed(min(i - warmup_steps, decay_steps), warmup_target or initial)
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int, alpha: float = 0.0,
                 name: str = "CosineDecay", warmup_target: Optional[float] = None,
                 warmup_steps: int = 0):
        cls = "[CosineDecay]"
        self.initial_learning_rate = _positive(f"{cls} initial_learning_rate",
                                               initial_learning_rate, allow_zero=True)
        self.decay_steps = _count(f"{cls} decay_steps", decay_steps, 1)
        self.alpha = _positive(f"{cls} alpha", alpha, allow_zero=True)
        if self.alpha > 1:
            raise ValueError(f"{cls} alpha must be in [0, 1], got {alpha!r}")
        self.name = _schedule_name("CosineDecay", name)
        self.warmup_target = None if warmup_target is None else _positive(
            f"{cls} warmup_target", warmup_target, allow_zero=True)
        self.warmup_steps = _count(f"{cls} warmup_steps", warmup_steps, 0)

    def _decayed(self, step: float, start: float) -> float:
        cosine = 0.5 * (1.0 + math.cos(math.pi * step / self.decay_steps))
        return start * ((1.0 - self.alpha) * cosine + self.alpha)

    def __call__(self, iteration: int) -> float:
        i = _check_iteration(iteration)
        if self.warmup_target is None:
            return self._decayed(min(i, self.decay_steps), self.initial_learning_rate)
        i = min(i, self.decay_steps + self.warmup_steps)
        if i < self.warmup_steps:
            delta = self.warmup_target - self.initial_learning_rate
            return delta * i / self.warmup_steps + self.initial_learning_rate
        return self._decayed(i - self.warmup_steps, self.warmup_target)

    def get_config(self) -> dict:
        return {"class": "CosineDecay", "initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "alpha": self.alpha, "name": self.name,
                "warmup_target": self.warmup_target, "warmup_steps": self.warmup_steps}


class CosineDecayRestarts(LearningRateSchedule):
    """Keras's CosineDecayRestarts (SGDR): cosine decays whose periods start at
    ``first_decay_steps`` and grow by ``t_mul`` each restart, each starting
    ``m_mul`` times lower; ``alpha`` is the floor as a fraction of the start."""

    def __init__(self, initial_learning_rate: float, first_decay_steps, t_mul: float = 2.0,
                 m_mul: float = 1.0, alpha: float = 0.0, name: str = "SGDRDecay"):
        cls = "[CosineDecayRestarts]"
        self.initial_learning_rate = _positive(f"{cls} initial_learning_rate",
                                               initial_learning_rate, allow_zero=True)
        self.first_decay_steps = _steps(f"{cls} first_decay_steps", first_decay_steps)
        self.t_mul = _positive(f"{cls} t_mul", t_mul)
        self.m_mul = _positive(f"{cls} m_mul", m_mul, allow_zero=True)
        self.alpha = _positive(f"{cls} alpha", alpha, allow_zero=True)
        self.name = _schedule_name("CosineDecayRestarts", name)

    def __call__(self, iteration: int) -> float:
        fraction = _check_iteration(iteration) / self.first_decay_steps
        if self.t_mul == 1.0:
            restart = math.floor(fraction)
            fraction -= restart
        else:
            t = self.t_mul
            restart = math.floor(math.log(1.0 - fraction * (1.0 - t)) / math.log(t))
            done = (1.0 - t ** restart) / (1.0 - t)
            fraction = (fraction - done) / t ** restart
        cosine = 0.5 * self.m_mul ** restart * (1.0 + math.cos(math.pi * fraction))
        return self.initial_learning_rate * ((1.0 - self.alpha) * cosine + self.alpha)

    def get_config(self) -> dict:
        return {"class": "CosineDecayRestarts",
                "initial_learning_rate": self.initial_learning_rate,
                "first_decay_steps": self.first_decay_steps, "t_mul": self.t_mul,
                "m_mul": self.m_mul, "alpha": self.alpha, "name": self.name}


class LinearWarmup(LearningRateSchedule):
    """Linear warmup over ``warmup_steps`` updates, then ``schedule_or_value``.

    Update ``i < warmup_steps`` uses ``target * (i + 1) / warmup_steps`` where
    target is the wrapped schedule's first value; afterwards the wrapped
    schedule runs from its own start: ``schedule(i - warmup_steps)``.
    """

    def __init__(self, schedule_or_value: Union[float, LearningRateSchedule], warmup_steps: int):
        if isinstance(schedule_or_value, LearningRateSchedule) or callable(schedule_or_value):
            self.after = schedule_or_value
        else:
            self.after = _positive("[LinearWarmup] schedule_or_value", schedule_or_value,
                                   allow_zero=True)
        self.warmup_steps = _count("[LinearWarmup] warmup_steps", warmup_steps, 0)

    def _after(self, i: int) -> float:
        return float(self.after(i)) if callable(self.after) else self.after

    def __call__(self, iteration: int) -> float:
        i = _check_iteration(iteration)
        if i < self.warmup_steps:
            return self._after(0) * (i + 1) / self.warmup_steps
        return self._after(i - self.warmup_steps)

    def get_config(self) -> dict:
        return {"class": "LinearWarmup", "schedule": lr_config("LinearWarmup", self.after),
                "warmup_steps": self.warmup_steps}

    def __repr__(self) -> str:
        return f"LinearWarmup({self.after!r}, warmup_steps={self.warmup_steps})"


SCHEDULES = {c.__name__: c for c in (
    StepDecay, ExponentialDecay, InverseTimeDecay, PiecewiseConstantDecay, PolynomialDecay,
    CosineDecay, CosineDecayRestarts, LinearWarmup)}


def normalized_config(config) -> dict:
    """A get_config dict as ``{"class": name, **arguments}`` (Keras's
    ``{"class_name": name, "config": {...}}`` taken too)."""
    if not isinstance(config, Mapping):
        raise TypeError(f"[from_config] config must be a dict, got {config!r}")
    config = dict(config)
    if "class_name" in config and "class" not in config:
        inner = config.get("config") or {}
        config = {"class": config["class_name"], **inner}
    return config


def unknown_class(name, known) -> ValueError:
    close = difflib.get_close_matches(str(name), list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"[from_config] unknown class {name!r}{hint} Known: {sorted(known)}")


def schedule_from_config(config, expected=None) -> LearningRateSchedule:
    """The schedule a get_config dict describes (`expected`: the class that
    must describe it, or a base of it)."""
    config = normalized_config(config)
    name = config.pop("class", None)
    cls = SCHEDULES.get(name)
    if cls is None:
        raise unknown_class(name, SCHEDULES)
    if expected is not None and not issubclass(cls, expected):
        raise ValueError(f"[{expected.__name__}.from_config] the config describes a {name}")
    if cls is LinearWarmup:
        if "schedule" in config:
            config["schedule_or_value"] = config.pop("schedule")
        config["schedule_or_value"] = lr_from_config(config["schedule_or_value"])
    return cls(**config)


def lr_from_config(value):
    """A learning rate from its config: a number, or a schedule's dict."""
    return schedule_from_config(value) if isinstance(value, Mapping) else value


def lr_config(owner: str, lr):
    """A learning rate (number or schedule) as JSON-serializable config."""
    if isinstance(lr, LearningRateSchedule):
        return lr.get_config()
    if callable(lr):
        raise TypeError(f"[{owner}.get_config] a learning rate given as a Python function "
                        f"({lr!r}) cannot be serialized; use a tessera.optim "
                        "LearningRateSchedule")
    return lr
