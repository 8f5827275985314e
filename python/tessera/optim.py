"""Optimizers and learning-rate schedules.

The update rules are PyTorch's (``torch.optim.SGD``, ``Adam``, ``AdamW``) and
run as fused C++ primitives (``sgd_update``, ``adam_update``,
``clip_by_global_norm``); the hyperparameter names are Keras's::

    opt = tessera.optim.Adam(learning_rate=tessera.optim.CosineDecay(1e-3, 10_000))
    opt = tessera.optim.SGD(0.01, momentum=0.9, nesterov=True, clipnorm=1.0)

How a training step uses an optimizer
-------------------------------------
A training step is one compiled program (forward, backward and update), so an
optimizer does not update arrays itself: it *writes the update* as statements
of the expression language, for the caller to splice into that program::

    upd = opt.update_code(["w", "b"], ["dw", "db"])
    upd.code      # 'define(opt_u0, adam_update(w, dw, opt_w_m, opt_w_v, (iteration) + 1,
                  #  (lr), ...)),\\n define(w, opt_u0[0]),\\n define(opt_w_m, opt_u0[1]), ...'
    upd.state     # [StateVar('opt_w_m', 'w'), StateVar('opt_w_v', 'w'), ...]

* ``code`` is a comma-separated sequence of expressions for a ``block(...)``
  (``statements`` is the same as a list). It reads each parameter, its
  gradient, the state variables, the learning rate (``lr``, a name or any
  expression) and the update count (``iteration``: how many updates came
  before this one, 0 for the first), and **rebinds** every parameter name to
  its updated value and every state name to its new state. Gradient names are
  only read; temporaries start with ``state_prefix``.
* ``state`` lists the state variables to create before the first step and to
  carry from each step to the next (for instance as arguments and results of
  the step function): each ``StateVar`` has the ``name`` used in the code, the
  ``param`` whose shape and dtype it takes, and its start value ``init`` (0).
  ``StateVar.init_expr`` is the expression creating it (``zeros_like(w)``);
  ``init_state(params)`` makes them as NumPy arrays.
* ``learning_rate(iteration)`` gives the (scheduled) learning rate of an
  update as a Python float, to pass to the program as ``lr`` each step.

Semantics (all PyTorch's): SGD ``d = g + weight_decay * w``; with momentum
``v = momentum * v + d`` and the step is ``v`` (``d + momentum * v`` with
Nesterov), ``w -= lr * step``. Adam with ``weight_decay`` adds it to the
gradient (L2); AdamW decays the weights directly (``w *= 1 - lr * wd``).
``clipnorm`` clips all gradients together to that global L2 norm (PyTorch's
``clip_grad_norm_``, Keras's ``global_clipnorm``) before the update.
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, Union

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Optimizer",
    "UpdateCode",
    "StateVar",
    "LearningRateSchedule",
    "StepDecay",
    "CosineDecay",
    "LinearWarmup",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- schedules


class LearningRateSchedule:
    """A learning rate as a function of the update count (0 for the first update)."""

    def __call__(self, iteration: int) -> float:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"class": type(self).__name__}


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


class CosineDecay(LearningRateSchedule):
    """Cosine decay from ``initial`` to ``initial * alpha`` over ``decay_steps`` updates,
    then constant (Keras's CosineDecay without warmup)."""

    def __init__(self, initial: float, decay_steps: int, alpha: float = 0.0):
        self.initial = _positive("[CosineDecay] initial", initial, allow_zero=True)
        self.decay_steps = _count("[CosineDecay] decay_steps", decay_steps, 1)
        self.alpha = _positive("[CosineDecay] alpha", alpha, allow_zero=True)
        if self.alpha > 1:
            raise ValueError(f"[CosineDecay] alpha must be in [0, 1], got {alpha!r}")

    def __call__(self, iteration: int) -> float:
        t = min(_check_iteration(iteration), self.decay_steps) / self.decay_steps
        cosine = 0.5 * (1.0 + math.cos(math.pi * t))
        return self.initial * ((1.0 - self.alpha) * cosine + self.alpha)

    def get_config(self) -> dict:
        return {"class": "CosineDecay", "initial": self.initial,
                "decay_steps": self.decay_steps, "alpha": self.alpha}


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
        after = self.after.get_config() if isinstance(self.after, LearningRateSchedule) else (
            self.after)
        return {"class": "LinearWarmup", "schedule": after, "warmup_steps": self.warmup_steps}


# --------------------------------------------------------------------------- optimizers


@dataclass(frozen=True)
class StateVar:
    """A state array of an optimizer: its variable name, the parameter whose
    shape and dtype it takes, and its start value."""

    name: str
    param: str
    init: float = 0.0

    @property
    def init_expr(self) -> str:
        """The expression creating the state from its parameter."""
        if self.init == 0.0:
            return f"zeros_like({self.param})"
        return f"full_like({self.param}, {_num(self.init)})"


@dataclass(frozen=True)
class UpdateCode:
    """What ``Optimizer.update_code`` returns: the statements and the state they carry."""

    statements: list = field(default_factory=list)
    state: list = field(default_factory=list)

    @property
    def code(self) -> str:
        """The statements as one comma-separated text for a ``block(...)``."""
        return ",\n".join(self.statements)


def _num(x: float) -> str:
    return repr(float(x))


def _bool(b: bool) -> str:
    return "true" if b else "false"


class Optimizer:
    """Base class: a learning rate (a number or a schedule), optional global-norm
    clipping, and the update code of one kind of step."""

    def __init__(self, learning_rate, clipnorm=None):
        name = f"[{type(self).__name__}]"
        if isinstance(learning_rate, LearningRateSchedule) or callable(learning_rate):
            self._lr = learning_rate
        else:
            self._lr = _positive(f"{name} learning_rate", learning_rate, allow_zero=True)
        self.clipnorm = None if clipnorm is None else _positive(f"{name} clipnorm", clipnorm)

    def learning_rate(self, iteration: int = 0) -> float:
        """The learning rate of update number ``iteration`` (0 for the first)."""
        iteration = _check_iteration(iteration)
        if callable(self._lr):
            return float(self._lr(iteration))
        return self._lr

    def update_code(self, param_names: Sequence[str], grad_names: Sequence[str],
                    state_prefix: str = "opt_", lr_expr: str = "lr",
                    iteration_expr: str = "iteration") -> UpdateCode:
        """The statements updating every parameter from its gradient (see the module doc)."""
        params, grads = list(param_names), list(grad_names)
        cls = type(self).__name__
        if len(params) != len(grads):
            raise ValueError(f"[{cls}.update_code] {len(params)} parameters but {len(grads)} "
                             "gradients")
        for n in params + grads + [state_prefix]:
            if not isinstance(n, str) or not _NAME.match(n):
                raise ValueError(f"[{cls}.update_code] {n!r} is not a variable name")
        if len(set(params)) != len(params):
            raise ValueError(f"[{cls}.update_code] parameter names repeat: {params}")
        statements, state = [], []
        if self.clipnorm is not None and params:
            clipped = f"{state_prefix}clipped"
            statements.append(f"define({clipped}, clip_by_global_norm(list({', '.join(grads)}), "
                              f"{_num(self.clipnorm)}))")
            grads = [f"{clipped}[{i}]" for i in range(len(params))]
        for i, (p, g) in enumerate(zip(params, grads)):
            self._emit(i, p, g, state_prefix, f"({lr_expr})", f"({iteration_expr})", statements,
                       state)
        return UpdateCode(statements, state)

    def init_state(self, params: Mapping[str, object], state: Sequence[StateVar]) -> dict:
        """The start values of ``state`` (from ``update_code``) as NumPy arrays shaped like
        the named parameters."""
        import numpy as np

        out = {}
        for s in state:
            p = np.asarray(params[s.param])
            dtype = p.dtype if p.dtype in (np.float32, np.float64) else np.float64
            out[s.name] = np.full(p.shape, s.init, dtype=dtype)
        return out

    def get_config(self) -> dict:
        lr = self._lr.get_config() if isinstance(self._lr, LearningRateSchedule) else self._lr
        return {"class": type(self).__name__, "learning_rate": lr, "clipnorm": self.clipnorm}

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "class")
        return f"{type(self).__name__}({items})"

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and
    (L2, PyTorch-style) weight decay."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=0.0,
                 clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.momentum = _positive("[SGD] momentum", momentum, allow_zero=True)
        self.nesterov = bool(nesterov)
        self.weight_decay = _positive("[SGD] weight_decay", weight_decay, allow_zero=True)
        if self.nesterov and self.momentum == 0:
            raise ValueError("[SGD] nesterov=True requires a momentum > 0")

    def get_config(self) -> dict:
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov,
                "weight_decay": self.weight_decay}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        u = f"{prefix}u{i}"
        options = f"weight_decay={_num(self.weight_decay)}"
        if self.momentum == 0:
            statements.append(f"define({param}, sgd_update({param}, {grad}, {lr}, {options})[0])")
            return
        vel = f"{prefix}{param}_velocity"
        state.append(StateVar(vel, param))
        statements.append(
            f"define({u}, sgd_update({param}, {grad}, {lr}, momentum={_num(self.momentum)}, "
            f"velocity={vel}, nesterov={_bool(self.nesterov)}, {options}))")
        statements.append(f"define({param}, {u}[0])")
        statements.append(f"define({vel}, {u}[1])")


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's bias correction; ``weight_decay`` is an L2
    term added to the gradient (use AdamW for decoupled decay)."""

    _decoupled = False

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 weight_decay=0.0, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        cls = type(self).__name__
        for name, b in (("beta_1", beta_1), ("beta_2", beta_2)):
            if isinstance(b, bool) or not isinstance(b, numbers.Real) or not 0 <= b < 1:
                raise ValueError(f"[{cls}] {name} must be in [0, 1), got {b!r}")
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = _positive(f"[{cls}] epsilon", epsilon, allow_zero=True)
        self.weight_decay = _positive(f"[{cls}] weight_decay", weight_decay, allow_zero=True)

    def get_config(self) -> dict:
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "weight_decay": self.weight_decay}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        u, m, v = f"{prefix}u{i}", f"{prefix}{param}_m", f"{prefix}{param}_v"
        state += [StateVar(m, param), StateVar(v, param)]
        statements.append(
            f"define({u}, adam_update({param}, {grad}, {m}, {v}, {iteration} + 1, {lr}, "
            f"beta1={_num(self.beta_1)}, beta2={_num(self.beta_2)}, "
            f"epsilon={_num(self.epsilon)}, weight_decay={_num(self.weight_decay)}, "
            f"decoupled={_bool(self._decoupled)}))")
        statements.append(f"define({param}, {u}[0])")
        statements.append(f"define({m}, {u}[1])")
        statements.append(f"define({v}, {u}[2])")


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): each update first
    multiplies the weights by ``1 - learning_rate * weight_decay``. The default
    weight decay is PyTorch's 0.01."""

    _decoupled = True

    def __init__(self, learning_rate=0.001, weight_decay=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, clipnorm=None):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, weight_decay, clipnorm)


class RMSprop(Optimizer):
    """RMSprop as Keras defines it: ``v = rho * v + (1 - rho) * g**2``, then
    ``w -= learning_rate * g / (sqrt(v) + epsilon)`` (Keras's defaults:
    learning rate 0.001, rho 0.9, epsilon 1e-7)."""

    def __init__(self, learning_rate=0.001, rho=0.9, epsilon=1e-7, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        if isinstance(rho, bool) or not isinstance(rho, numbers.Real) or not 0 <= rho < 1:
            raise ValueError(f"[RMSprop] rho must be in [0, 1), got {rho!r}")
        self.rho = float(rho)
        self.epsilon = _positive("[RMSprop] epsilon", epsilon, allow_zero=True)

    def get_config(self) -> dict:
        return {**super().get_config(), "rho": self.rho, "epsilon": self.epsilon}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        v = f"{prefix}{param}_rms"
        state.append(StateVar(v, param))
        # Elementwise expressions: each update runs as one fused pass.
        statements.append(f"define({v}, {_num(self.rho)} * {v} + {_num(1 - self.rho)} * "
                          f"({grad}) * ({grad}))")
        statements.append(f"define({param}, {param} - {lr} * ({grad}) / (sqrt({v}) + "
                          f"{_num(self.epsilon)}))")


class Adagrad(Optimizer):
    """Adagrad as Keras defines it: ``a += g**2`` (``a`` starting at
    ``initial_accumulator_value``), then ``w -= learning_rate * g / (sqrt(a) +
    epsilon)`` (Keras's defaults: learning rate 0.001, 0.1, 1e-7)."""

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7,
                 clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.initial_accumulator_value = _positive("[Adagrad] initial_accumulator_value",
                                                   initial_accumulator_value, allow_zero=True)
        self.epsilon = _positive("[Adagrad] epsilon", epsilon, allow_zero=True)

    def get_config(self) -> dict:
        return {**super().get_config(), "initial_accumulator_value":
                self.initial_accumulator_value, "epsilon": self.epsilon}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        a = f"{prefix}{param}_accumulator"
        state.append(StateVar(a, param, self.initial_accumulator_value))
        statements.append(f"define({a}, {a} + ({grad}) * ({grad}))")
        statements.append(f"define({param}, {param} - {lr} * ({grad}) / (sqrt({a}) + "
                          f"{_num(self.epsilon)}))")
