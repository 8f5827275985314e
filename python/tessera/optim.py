"""Optimizers and learning-rate schedules.

The update rules of SGD, Adam and AdamW are PyTorch's (``torch.optim.SGD``,
``Adam``, ``AdamW``) and run as fused C++ primitives (``sgd_update``,
``adam_update``, ``clip_by_global_norm``); RMSprop, Adagrad, Nadam, Lamb, Adadelta,
Adamax, Lion and Ftrl are Keras's definitions written as elementwise
expressions, and so are Adafactor, Muon and ScheduleFreeAdamW (optim_more.py). The
hyperparameter names are Keras's, and so are the schedules
(``ExponentialDecay``, ``InverseTimeDecay``, ``PiecewiseConstantDecay``,
``PolynomialDecay``, ``CosineDecay`` with warmup, ``CosineDecayRestarts``)::

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
* ``rate_at(iteration)`` (also ``learning_rate(iteration)``) gives the
  (scheduled) learning rate of an update as a Python float, to pass to the
  program as ``lr`` each step. ``learning_rate`` is, as in Keras, the current
  rate as a float, and assigning it sets a constant rate.
* ``set_learning_rate(value)`` replaces a constant learning rate (a
  TypeError for a schedule-driven optimizer, as in Keras).

``get(identifier)`` makes an optimizer from a name (``"adam"``, any case), a
config dict or an Optimizer. ``get_config()`` of every optimizer and schedule
is a JSON-serializable dict naming its ``"class"``; ``from_config(config)``
rebuilds it (optimizer state is not part of it).

A state may also be a *scalar* (``StateVar.scalar``; Nadam's ``u_product``):
one Python float for the whole optimizer, ``param`` None.

Semantics (all PyTorch's): SGD ``d = g + weight_decay * w``; with momentum
``v = momentum * v + d`` and the step is ``v`` (``d + momentum * v`` with
Nesterov), ``w -= lr * step``. Adam with ``weight_decay`` adds it to the
gradient (L2); AdamW decays the weights directly (``w *= 1 - lr * wd``).
``clipnorm`` clips all gradients together to that global L2 norm (PyTorch's
``clip_grad_norm_``, Keras's ``global_clipnorm``) before the update;
``set_clipping(clipvalue=)`` clips each element (PyTorch's ``clip_grad_value_``,
Keras's ``clipvalue``) and ``set_clipping(weight_clipnorm=)`` each weight's
gradient to that norm (Keras's ``clipnorm``). tessera.nn.optimizers take
Keras's names for all three.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, Union

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Nadam",
    "Lamb",
    "Adadelta",
    "Adamax",
    "Lion",
    "Ftrl",
    "Adafactor",
    "Muon",
    "ScheduleFreeAdamW",
    "Optimizer",
    "UpdateCode",
    "StateVar",
    "LearningRateSchedule",
    "StepDecay",
    "ExponentialDecay",
    "InverseTimeDecay",
    "PiecewiseConstantDecay",
    "PolynomialDecay",
    "CosineDecay",
    "CosineDecayRestarts",
    "LinearWarmup",
    "get",
    "from_config",
]

from .lr_schedules import (SCHEDULES, CosineDecay, CosineDecayRestarts, ExponentialDecay,
                           InverseTimeDecay, LearningRateSchedule, LinearWarmup,
                           PiecewiseConstantDecay, PolynomialDecay, StepDecay, _check_iteration,
                           _positive, lr_config, lr_from_config, normalized_config,
                           schedule_from_config, unknown_class)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- optimizers


@dataclass(frozen=True)
class StateVar:
    """A state of an optimizer: its variable name, the parameter whose shape
    and dtype it takes, and its start value. A *scalar* state (``scalar=True``,
    ``param`` None: one number for the whole optimizer, such as Nadam's
    momentum-cache product) is a Python float, which the language treats as a
    weak scalar (it does not promote float32 parameters)."""

    name: str
    param: Optional[str]
    init: float = 0.0
    scalar: bool = False
    # an axis of the parameter the state does not have (Adafactor's factored
    # second moments: the parameter's shape without its last or next-to-last axis)
    without_axis: Optional[int] = None

    def shape_of(self, shape: tuple) -> tuple:
        """The state's shape for a parameter of `shape`."""
        if self.without_axis is None:
            return tuple(shape)
        k = self.without_axis % len(shape)
        return tuple(shape[:k]) + tuple(shape[k + 1:])

    @property
    def init_expr(self) -> str:
        """The expression creating the state (from its parameter unless scalar)."""
        if self.scalar:
            return _num(self.init)
        if self.without_axis is not None:
            return (f"full_like(sum({self.param}, axis={self.without_axis}), "
                    f"{_num(self.init)})")
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


class LearningRate(float):
    """What ``Optimizer.learning_rate`` gives: the current rate as a float, callable
    with an update number for the (scheduled) rate of that update."""

    def __new__(cls, value: float, rate_at):
        obj = super().__new__(cls, value)
        obj._rate_at = rate_at
        return obj

    def __call__(self, iteration: int = 0) -> float:
        return self._rate_at(iteration)

    def numpy(self):
        import numpy
        return numpy.float32(self)

    def assign(self, value) -> None:
        """Keras's ``optimizer.learning_rate.assign(value)``: sets a constant rate
        (``set_learning_rate``; a TypeError under a schedule, as in Keras)."""
        owner = getattr(self._rate_at, "__self__", None)
        if owner is None:
            raise TypeError("[learning_rate.assign] this learning rate has no optimizer")
        owner.set_learning_rate(float(value))

    def __reduce__(self):
        return (float, (float(self),))


class Optimizer:
    """Base class: a learning rate (a number or a schedule), optional global-norm
    clipping, and the update code of one kind of step."""

    def __init__(self, learning_rate, clipnorm=None, clipvalue=None, weight_clipnorm=None):
        name = f"[{type(self).__name__}]"
        if isinstance(learning_rate, LearningRateSchedule) or callable(learning_rate):
            self._lr = learning_rate
        else:
            self._lr = _positive(f"{name} learning_rate", learning_rate, allow_zero=True)
        self.clipnorm = None if clipnorm is None else _positive(f"{name} clipnorm", clipnorm)
        # Keras's clipvalue (each element to [-v, v], PyTorch's clip_grad_value_) and
        # Keras's clipnorm (each weight's gradient to that norm): set on the instance
        # (the subclasses' constructors take the common ones through set_clipping)
        self.set_clipping(clipvalue=clipvalue, weight_clipnorm=weight_clipnorm)
        self.use_ema, self.ema_momentum, self.ema_overwrite_frequency = False, 0.99, None
        self._decay_skip = (frozenset(), None)  # exclude_from_weight_decay's
        self._variable_of = None  # a model's: program weight name -> its Variable (or None)

    def set_gradient_accumulation(self, steps=None) -> None:
        """Keras's ``gradient_accumulation_steps``: the weights are updated
        every ``steps`` iterations with the mean of the gradients summed
        since the last update; the learning-rate schedule counts every step,
        the optimizer's own step count (Adam's bias correction) the updates,
        as Keras's. None: every step."""
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                                  or steps < 2):
            raise ValueError(f"[{type(self).__name__}] gradient_accumulation_steps must be an "
                             f"int >= 2 or None, got {steps!r}")
        self.gradient_accumulation_steps = steps

    def set_ema(self, use_ema=False, ema_momentum=0.99, ema_overwrite_frequency=None) -> None:
        """Keras's exponential moving average of the weights: after each
        update ``a = m a + (1 - m) w`` (``a = w`` at the first), with
        ``ema_overwrite_frequency`` k the weights replaced by their averages
        every k updates, and at the end of fit (tessera.nn's fit) by them."""
        name = f"[{type(self).__name__}]"
        if isinstance(ema_momentum, bool) or not isinstance(ema_momentum, numbers.Real) or \
                not 0 <= ema_momentum <= 1:
            raise ValueError(f"{name} ema_momentum must be in [0, 1], got {ema_momentum!r}")
        if ema_overwrite_frequency is not None and (
                isinstance(ema_overwrite_frequency, bool)
                or not isinstance(ema_overwrite_frequency, int) or ema_overwrite_frequency < 1):
            raise ValueError(f"{name} ema_overwrite_frequency must be an int >= 1 or None, got "
                             f"{ema_overwrite_frequency!r}")
        self.use_ema = bool(use_ema)
        self.ema_momentum = float(ema_momentum)
        self.ema_overwrite_frequency = ema_overwrite_frequency
        if self.use_ema and getattr(self, "gradient_accumulation_steps", None):
            raise ValueError(f"{name} use_ema with gradient_accumulation_steps is not supported")

    @staticmethod
    def ema_name(state_prefix: str, param: str) -> str:
        """The state variable holding `param`'s moving average (set_ema)."""
        return f"{state_prefix}{param}_average"

    def set_clipping(self, clipvalue=None, weight_clipnorm=None) -> None:
        """Clips each gradient element to [-clipvalue, clipvalue] (Keras's
        ``clipvalue``, PyTorch's ``clip_grad_value_``), or each weight's
        gradient to the L2 norm ``weight_clipnorm`` (Keras's ``clipnorm``),
        before the update; at most one kind of clipping per optimizer."""
        name = f"[{type(self).__name__}]"
        self.clipvalue = None if clipvalue is None else _positive(f"{name} clipvalue", clipvalue)
        self.weight_clipnorm = None if weight_clipnorm is None else _positive(
            f"{name} weight_clipnorm", weight_clipnorm)
        given = [k for k, v in (("clipnorm", self.clipnorm), ("clipvalue", self.clipvalue),
                                ("weight_clipnorm", self.weight_clipnorm)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"{name} only one of clipnorm, clipvalue and weight_clipnorm can "
                             f"be set, got {', '.join(given)}")

    def exclude_from_weight_decay(self, var_list=None, var_names=None) -> None:
        """Keras's: no weight decay for the Variables in ``var_list``, nor for those
        whose name (``Variable.name``: "bias", "gamma", ...) one of the regular
        expressions ``var_names`` matches (``var_names=["bias"]`` leaves every
        bias undecayed). Call it before the model's first fit or evaluate, as
        Keras requires it before the optimizer is built; a later call is an
        error (the programs already written keep their decay)."""
        cls = type(self).__name__
        if getattr(self, "_built", False):
            raise ValueError(f"[{cls}.exclude_from_weight_decay] can only be called before the "
                             "optimizer is built (before the model's first fit)")
        pattern = None
        if var_names:
            if isinstance(var_names, str) or not all(isinstance(n, str) for n in var_names):
                raise TypeError(f"[{cls}.exclude_from_weight_decay] var_names must be a list of "
                                f"strings, got {var_names!r}")
            try:
                pattern = re.compile("|".join(sorted(set(var_names))))
            except re.error as e:
                raise ValueError(f"[{cls}.exclude_from_weight_decay] var_names {var_names!r} "
                                 f"is not a valid regular expression: {e}") from None
        self._decay_skip = (frozenset(id(v) for v in (var_list or ())), pattern)

    def _decays(self, param: str) -> bool:
        """Whether weight ``param`` (a program name) is decayed
        (exclude_from_weight_decay)."""
        ids, pattern = getattr(self, "_decay_skip", (frozenset(), None))
        if not ids and pattern is None:
            return True
        var = self._variable_of(param) if self._variable_of is not None else None
        if var is None:
            raise ValueError(f"[{type(self).__name__}.exclude_from_weight_decay] the weight "
                             f"{param!r} is not one of a model's Variables here (ZeRO's flat "
                             "slices, or an update written outside a model): exclusions from "
                             "weight decay need whole weights")
        return id(var) not in ids and (pattern is None or pattern.search(var.name) is None)

    def rate_at(self, iteration: int = 0) -> float:
        """The learning rate of update number ``iteration`` (0 for the first)."""
        iteration = _check_iteration(iteration)
        if callable(self._lr):
            return float(self._lr(iteration))
        return self._lr

    @property
    def iterations(self) -> int:
        """Keras's `optimizer.iterations`: the updates made so far by the model
        using it."""
        counter = getattr(self, "_iterations_of", None)  # the model's (set by compile)
        return int(counter()) if counter is not None else 0

    @property
    def learning_rate(self) -> "LearningRate":
        """The current learning rate, as Keras's ``optimizer.learning_rate``: a float
        (``float(opt.learning_rate)``, ``np.array(opt.learning_rate)``) of the rate
        of the latest update a model computed (update 0 before training), which is
        also callable: ``opt.learning_rate(i)`` is the rate of update ``i``.
        Assigning it (``opt.learning_rate = 0.01``) is ``set_learning_rate``."""
        override = getattr(self, "_override", None)  # a callback's (LearningRateScheduler ...)
        if override is not None:
            return LearningRate(override, self.rate_at)
        return LearningRate(self.rate_at(getattr(self, "_last_iteration", 0)), self.rate_at)

    @learning_rate.setter
    def learning_rate(self, value) -> None:
        self.set_learning_rate(value)

    def set_learning_rate(self, value: float) -> None:
        """Sets a constant learning rate (what ReduceLROnPlateau does); used from
        the next update on. An optimizer driven by a schedule has no rate to set
        (a TypeError, as in Keras)."""
        cls = type(self).__name__
        if callable(self._lr):
            raise TypeError(f"[{cls}.set_learning_rate] this optimizer was created with a "
                            f"learning rate schedule ({self._lr!r}), so its learning rate cannot "
                            "be set; create it with a number to change the rate while training")
        self._lr = _positive(f"[{cls}.set_learning_rate] value", value, allow_zero=True)
        self._override = None  # the rate set now wins over a callback's earlier one

    def update_code(self, param_names: Sequence[str], grad_names: Sequence[str],
                    state_prefix: str = "opt_", lr_expr: str = "lr",
                    iteration_expr: str = "iteration", global_norm: Optional[str] = None,
                    sum_squares=None) -> UpdateCode:
        """The statements updating every parameter from its gradient (see the module doc).
        ``global_norm``: an expression of the gradients' global norm computed by the
        caller (ZeRO: from partial sums over the slices); clipping then scales by it
        instead of taking the norm of the gradients given. ``sum_squares(i, expr,
        name)``: (statements, expression) of the sum of squares of parameter i's
        ``expr`` over the whole weight, for per-weight norms (Lamb) of weights held
        in slices (tessera.nn.clipping); None: ``sum(square(expr))``."""
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
        self._built = True
        statements, state = [], []
        steps = getattr(self, "gradient_accumulation_steps", None)
        accumulators, update_now = [], f"{state_prefix}accumulated_update"
        if steps and params:
            if global_norm is not None or sum_squares is not None:
                raise ValueError(f"[{cls}] gradient_accumulation_steps is not supported where "
                                 "the weights are held in slices or split over a tensor group "
                                 "(ZeRO, tensor parallelism)")
            # Keras's: every `steps`-th iteration updates with the mean of the
            # gradients summed since the last update; the others only add
            statements.append(f"define({update_now}, equal(mod(({iteration_expr}) + 1, {steps}), "
                              "0))")
            for i, (p, g) in enumerate(zip(params, grads)):
                acc = f"{state_prefix}{p}_grad_accumulator"
                accumulators.append(StateVar(acc, p))
                statements.append(f"define({state_prefix}acc_sum{i}, {acc} + ({g}))")
            grads = [f"{state_prefix}acc_sum{i} / {_num(float(steps))}"
                     for i in range(len(params))]
            # the optimizer's own step count (Adam's bias correction, ...) counts
            # updates, as Keras's `iterations`; the learning rate keeps the caller's
            iteration_expr = f"floor(({iteration_expr}) / {steps})"
        mark = len(statements)
        clipvalue = getattr(self, "clipvalue", None)
        weight_clipnorm = getattr(self, "weight_clipnorm", None)
        if clipvalue is not None and params:
            for i, g in enumerate(grads):
                statements.append(f"define({state_prefix}vclipped{i}, clip({g}, "
                                  f"{_num(-clipvalue)}, {_num(clipvalue)}))")
            grads = [f"{state_prefix}vclipped{i}" for i in range(len(params))]
        elif weight_clipnorm is not None and params:
            c = _num(weight_clipnorm)
            for i, g in enumerate(grads):
                lines, sumsq = (sum_squares(i, g, f"{state_prefix}wsq{i}") if sum_squares
                                is not None else ([], f"sum(square({g}))"))
                statements += lines
                statements.append(f"define({state_prefix}wnorm{i}, sqrt({sumsq}))")
                statements.append(f"define({state_prefix}wclipped{i}, where({state_prefix}wnorm{i}"
                                  f" > {c}, ({g}) * ({c} / {state_prefix}wnorm{i}), {g}))")
            grads = [f"{state_prefix}wclipped{i}" for i in range(len(params))]
        elif self.clipnorm is not None and params and global_norm is not None:
            scale = f"{state_prefix}clip_scale"
            statements.append(f"define({scale}, where(({global_norm}) > {_num(self.clipnorm)}, "
                              f"{_num(self.clipnorm)} / ({global_norm}), 1.0))")
            for i, g in enumerate(grads):
                statements.append(f"define({state_prefix}clipped{i}, ({g}) * {scale})")
            grads = [f"{state_prefix}clipped{i}" for i in range(len(params))]
        elif self.clipnorm is not None and params:
            clipped = f"{state_prefix}clipped"
            statements.append(f"define({clipped}, clip_by_global_norm(list({', '.join(grads)}), "
                              f"{_num(self.clipnorm)}))")
            grads = [f"{clipped}[{i}]" for i in range(len(params))]
        if params:
            self._emit_prelude(state_prefix, f"({lr_expr})", f"({iteration_expr})", statements,
                               state)
        self._sum_squares = sum_squares
        try:
            for i, (p, g) in enumerate(zip(params, grads)):
                self._emit(i, p, g, state_prefix, f"({lr_expr})", f"({iteration_expr})",
                           statements, state)
        finally:
            self._sum_squares = None
        if accumulators:
            # the update's results are kept only on an update step
            held = list(params) + [v.name for v in state]
            statements[mark:mark] = [f"define({state_prefix}held_{k}, {x})"
                                     for k, x in enumerate(held)]
            statements += [f"define({x}, where({update_now}, {x}, {state_prefix}held_{k}))"
                           for k, x in enumerate(held)]
            statements += [f"define({a.name}, where({update_now}, zeros_like({a.name}), "
                           f"{state_prefix}acc_sum{i}))" for i, a in enumerate(accumulators)]
            state += accumulators
        if getattr(self, "use_ema", False) and params:
            # Keras's: the averages follow the updated weights (the first update
            # copies them); every ema_overwrite_frequency-th update puts them in
            it = f"({iteration_expr})"
            m = f"{state_prefix}ema_m"
            statements.append(f"define({m}, where(equal({it}, 0), 0.0, "
                              f"{_num(self.ema_momentum)}))")
            every = self.ema_overwrite_frequency
            for p in params:
                a = self.ema_name(state_prefix, p)
                state.append(StateVar(a, p))
                statements.append(f"define({a}, {m} * {a} + (1.0 - {m}) * {p})")
                if every:
                    statements.append(f"define({p}, where(equal(mod({it} + 1, {every}), 0), "
                                      f"{a}, {p}))")
        return UpdateCode(statements, state)

    def _sumsq(self, i: int, expr: str, name: str) -> tuple:
        """(statements, expression): parameter i's sum of squares of `expr`
        (update_code's sum_squares, or sum(square(expr)))."""
        hook = getattr(self, "_sum_squares", None)
        return hook(i, expr, name) if hook is not None else ([], f"sum(square({expr}))")

    def init_state(self, params: Mapping[str, object], state: Sequence[StateVar],
                   views: bool = False) -> dict:
        """The start values of ``state`` (from ``update_code``) as NumPy arrays shaped like
        the named parameters; with ``views``, read-only broadcast views of one value each
        (no memory: ZeRO slices them before the first step)."""
        import numpy as np

        out = {}
        for s in state:
            if s.scalar:
                out[s.name] = float(s.init)
                continue
            p = np.asarray(params[s.param])
            dtype = p.dtype if p.dtype in (np.float32, np.float64) else np.float64
            shape = s.shape_of(p.shape)
            out[s.name] = np.broadcast_to(np.array(s.init, dtype=dtype), shape) if views \
                else np.full(shape, s.init, dtype=dtype)
        return out

    def get_config(self) -> dict:
        """The constructor's arguments and ``"class"``, JSON-serializable (a
        schedule as its own config; a learning rate given as a plain Python
        function cannot be serialized: TypeError)."""
        return {"class": type(self).__name__,
                "learning_rate": _lr_config(type(self).__name__, self._lr),
                **self._config()}

    def _config(self) -> dict:
        out = {"clipnorm": self.clipnorm}
        for k in ("clipvalue", "weight_clipnorm", "gradient_accumulation_steps"):
            if getattr(self, k, None) is not None:
                out[k] = getattr(self, k)
        if getattr(self, "use_ema", False):
            out.update(use_ema=True, ema_momentum=self.ema_momentum,
                       ema_overwrite_frequency=self.ema_overwrite_frequency)
        return out

    @classmethod
    def from_config(cls, config: Mapping) -> "Optimizer":
        """The optimizer ``get_config`` described (without its state)."""
        return _rebuild(config, cls)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in
                          {"learning_rate": self._lr, **self._config()}.items())
        return f"{type(self).__name__}({items})"

    def _emit_prelude(self, prefix, lr, iteration, statements, state):
        """Statements once per update before the parameters' (shared scalars)."""

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and
    (L2, PyTorch-style) weight decay."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=0.0,
                 clipnorm=None, decoupled=False):
        super().__init__(learning_rate, clipnorm)
        self.momentum = _positive("[SGD] momentum", momentum, allow_zero=True)
        self.nesterov = bool(nesterov)
        self.weight_decay = _positive("[SGD] weight_decay", weight_decay, allow_zero=True)
        # Keras's decay (w -= w * weight_decay * lr before the step) instead of
        # PyTorch's L2 term in the gradient
        self.decoupled = bool(decoupled)
        if self.nesterov and self.momentum == 0:
            raise ValueError("[SGD] nesterov=True requires a momentum > 0")

    def _config(self) -> dict:
        return {**super()._config(), "momentum": self.momentum, "nesterov": self.nesterov,
                "weight_decay": self.weight_decay,
                **({"decoupled": True} if self.decoupled else {})}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        u = f"{prefix}u{i}"
        decay = self.weight_decay if self._decays(param) else 0.0
        if self.decoupled:
            _decay_first(param, lr, decay, statements)
            decay = 0.0
        options = f"weight_decay={_num(decay)}"
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
                 weight_decay=0.0, clipnorm=None, decoupled=False, epsilon_hat=False,
                 amsgrad=False):
        super().__init__(learning_rate, clipnorm)
        cls = type(self).__name__
        if not any(amsgrad is b or (type(amsgrad).__name__ == 'bool_' and amsgrad == b)
                   for b in (True, False)):
            raise TypeError(f"[{cls}] amsgrad must be True or False, got {amsgrad!r}")
        # AMSGrad (Reddi et al.): the step divides by the largest second moment met so far
        self.amsgrad = bool(amsgrad)
        # Keras's decay (decoupled, as AdamW's) instead of PyTorch's L2 term
        self._decoupled = type(self)._decoupled or bool(decoupled)
        # Keras's epsilon ("epsilon hat" of Kingma & Ba: added to sqrt(v) before
        # the bias correction) instead of PyTorch's (added to sqrt(v_hat))
        self.epsilon_hat = bool(epsilon_hat)
        for name, b in (("beta_1", beta_1), ("beta_2", beta_2)):
            if isinstance(b, bool) or not isinstance(b, numbers.Real) or not 0 <= b < 1:
                raise ValueError(f"[{cls}] {name} must be in [0, 1), got {b!r}")
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = _positive(f"[{cls}] epsilon", epsilon, allow_zero=True)
        self.weight_decay = _positive(f"[{cls}] weight_decay", weight_decay, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "weight_decay": self.weight_decay,
                **({"decoupled": True} if self._decoupled and not type(self)._decoupled
                   else {}), **({"epsilon_hat": True} if self.epsilon_hat else {}),
                **({"amsgrad": True} if self.amsgrad else {})}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        u, m, v = f"{prefix}u{i}", f"{prefix}{param}_m", f"{prefix}{param}_v"
        decay = self.weight_decay if self._decays(param) else 0.0
        state += [StateVar(m, param), StateVar(v, param)]
        if self.amsgrad:
            self._emit_amsgrad(param, grad, m, v, prefix, lr, iteration, decay, statements,
                               state)
            return
        epsilon = _num(self.epsilon)
        if self.epsilon_hat:
            # lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps) is PyTorch's form
            # with eps / sqrt(1 - b2^t) in place of eps
            epsilon = f"({epsilon} / sqrt(1.0 - {_num(self.beta_2)} ** ({iteration} + 1)))"
        statements.append(
            f"define({u}, adam_update({param}, {grad}, {m}, {v}, {iteration} + 1, {lr}, "
            f"beta1={_num(self.beta_1)}, beta2={_num(self.beta_2)}, "
            f"epsilon={epsilon}, weight_decay={_num(decay)}, "
            f"decoupled={_bool(self._decoupled)}))")
        statements.append(f"define({param}, {u}[0])")
        statements.append(f"define({m}, {u}[1])")
        statements.append(f"define({v}, {u}[2])")

    def _emit_amsgrad(self, param, grad, m, v, prefix, lr, iteration, decay, statements,
                      state):
        """Adam's update dividing by v_hat = max(v_hat, v) (Keras's and PyTorch's
        AMSGrad), written as elementwise expressions: decoupled decay first (Keras's
        order), then the moments, then the step."""
        v_hat = f"{prefix}{param}_vhat"
        state.append(StateVar(v_hat, param))
        b1, b2, t = _num(self.beta_1), _num(self.beta_2), f"({iteration} + 1)"
        if decay and self._decoupled:
            statements.append(f"define({param}, {param} - {param} * ({lr} * {_num(decay)}))")
        elif decay:
            grad = f"(({grad}) + {_num(decay)} * {param})"
        statements.append(f"define({m}, {m} + (({grad}) - {m}) * {_num(1 - self.beta_1)})")
        statements.append(f"define({v}, {v} + (({grad}) * ({grad}) - {v}) * "
                          f"{_num(1 - self.beta_2)})")
        statements.append(f"define({v_hat}, maximum({v_hat}, {v}))")
        # epsilon added to sqrt(v_hat) after the bias corrections are folded into the
        # rate: Keras's epsilon as is, PyTorch's (added to the corrected root) scaled
        epsilon = _num(self.epsilon)
        if not self.epsilon_hat:
            epsilon = f"({epsilon} * sqrt(1.0 - {b2} ** {t}))"
        alpha = f"({lr} * sqrt(1.0 - {b2} ** {t}) / (1.0 - {b1} ** {t}))"
        statements.append(f"define({param}, {param} - {m} * {alpha} / (sqrt({v_hat}) + "
                          f"{epsilon}))")


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): each update first
    multiplies the weights by ``1 - learning_rate * weight_decay``. The default
    weight decay is PyTorch's 0.01."""

    _decoupled = True

    def __init__(self, learning_rate=0.001, weight_decay=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, clipnorm=None, epsilon_hat=False, amsgrad=False):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, weight_decay, clipnorm,
                         epsilon_hat=epsilon_hat, amsgrad=amsgrad)


class RMSprop(Optimizer):
    """RMSprop as Keras defines it: ``v = rho * v + (1 - rho) * g**2``, the
    increment ``learning_rate * g / sqrt(v + epsilon)`` (``centered``: with
    ``a = rho * a + (1 - rho) * g``, ``sqrt(v - a**2 + epsilon)``), then
    ``w -= increment``, or with ``momentum`` ``s = momentum * s + increment``,
    ``w -= s`` (Keras's defaults: learning rate 0.001, rho 0.9, momentum 0,
    epsilon 1e-7). PyTorch puts epsilon outside the root: ``sqrt(v) + eps``."""

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        if isinstance(rho, bool) or not isinstance(rho, numbers.Real) or not 0 <= rho < 1:
            raise ValueError(f"[RMSprop] rho must be in [0, 1), got {rho!r}")
        self.rho = float(rho)
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real) or \
                not 0 <= momentum < 1:
            raise ValueError(f"[RMSprop] momentum must be in [0, 1), got {momentum!r}")
        self.momentum = float(momentum)
        self.epsilon = _positive("[RMSprop] epsilon", epsilon, allow_zero=True)
        self.centered = bool(centered)

    def _config(self) -> dict:
        return {**super()._config(), "rho": self.rho, "momentum": self.momentum,
                "epsilon": self.epsilon, "centered": self.centered}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        v = f"{prefix}{param}_rms"
        state.append(StateVar(v, param))
        # Elementwise expressions: each update runs as one fused pass.
        statements.append(f"define({v}, {_num(self.rho)} * {v} + {_num(1 - self.rho)} * "
                          f"({grad}) * ({grad}))")
        denominator = f"{v} + {_num(self.epsilon)}"
        if self.centered:
            a = f"{prefix}{param}_average_grad"
            state.append(StateVar(a, param))
            statements.append(f"define({a}, {_num(self.rho)} * {a} + {_num(1 - self.rho)} * "
                              f"({grad}))")
            denominator = f"{v} - {a} * {a} + {_num(self.epsilon)}"
        increment = f"{lr} * ({grad}) / sqrt({denominator})"
        if self.momentum:
            s = f"{prefix}{param}_momentum"
            state.append(StateVar(s, param))
            statements.append(f"define({s}, {_num(self.momentum)} * {s} + {increment})")
            increment = s
        statements.append(f"define({param}, {param} - {increment})")


class Adagrad(Optimizer):
    """Adagrad as Keras defines it: ``a += g**2`` (``a`` starting at
    ``initial_accumulator_value``), then ``w -= learning_rate * g / sqrt(a +
    epsilon)`` (Keras's defaults: learning rate 0.001, 0.1, 1e-7; PyTorch's
    epsilon is outside the root)."""

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7,
                 clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.initial_accumulator_value = _positive("[Adagrad] initial_accumulator_value",
                                                   initial_accumulator_value, allow_zero=True)
        self.epsilon = _positive("[Adagrad] epsilon", epsilon, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "initial_accumulator_value":
                self.initial_accumulator_value, "epsilon": self.epsilon}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        a = f"{prefix}{param}_accumulator"
        state.append(StateVar(a, param, self.initial_accumulator_value))
        statements.append(f"define({a}, {a} + ({grad}) * ({grad}))")
        statements.append(f"define({param}, {param} - {lr} * ({grad}) / sqrt({a} + "
                          f"{_num(self.epsilon)}))")


def _decay_first(param, lr, weight_decay, statements):
    """Keras's decoupled weight decay, applied before the update step."""
    if weight_decay:
        statements.append(f"define({param}, {param} - {param} * {_num(weight_decay)} * {lr})")


def _beta(cls: str, name: str, b) -> float:
    if isinstance(b, bool) or not isinstance(b, numbers.Real) or not 0 <= b < 1:
        raise ValueError(f"[{cls}] {name} must be in [0, 1), got {b!r}")
    return float(b)


class Nadam(Optimizer):
    """Nadam as Keras defines it (Adam with Nesterov momentum and Dozat's
    momentum schedule). With ``t = iteration + 1``,
    ``u_t = beta_1 * (1 - 0.5 * 0.96 ** t)`` and the running product
    ``u_product *= u_t`` (a scalar state starting at 1)::

        m = m + (g - m) * (1 - beta_1);  v = v + (g**2 - v) * (1 - beta_2)
        m_hat = u_{t+1} * m / (1 - u_product * u_{t+1}) + (1 - u_t) * g / (1 - u_product)
        v_hat = v / (1 - beta_2 ** t)
        w -= learning_rate * m_hat / (sqrt(v_hat) + epsilon)

    ``weight_decay`` is Keras's decoupled decay (``w -= w * weight_decay *
    learning_rate`` before the step). Keras's defaults: 0.001, 0.9, 0.999, 1e-7.
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 weight_decay=0.0, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.beta_1 = _beta("Nadam", "beta_1", beta_1)
        self.beta_2 = _beta("Nadam", "beta_2", beta_2)
        self.epsilon = _positive("[Nadam] epsilon", epsilon, allow_zero=True)
        self.weight_decay = _positive("[Nadam] weight_decay", weight_decay, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "weight_decay": self.weight_decay}

    def _emit_prelude(self, prefix, lr, iteration, statements, state):
        b1, b2 = _num(self.beta_1), _num(self.beta_2)
        product = f"{prefix}u_product"
        state.append(StateVar(product, None, 1.0, scalar=True))
        u_t, u_next = f"{prefix}nadam_u_t", f"{prefix}nadam_u_next"
        statements += [
            f"define({u_t}, {b1} * (1.0 - 0.5 * 0.96 ** ({iteration} + 1)))",
            f"define({u_next}, {b1} * (1.0 - 0.5 * 0.96 ** ({iteration} + 2)))",
            f"define({product}, {product} * {u_t})",
            # The coefficients of m and g in m_hat, and v's bias correction.
            f"define({prefix}nadam_cm, {u_next} / (1.0 - {product} * {u_next}))",
            f"define({prefix}nadam_cg, (1.0 - {u_t}) / (1.0 - {product}))",
            f"define({prefix}nadam_cv, 1.0 - {b2} ** ({iteration} + 1))",
        ]

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        m, v = f"{prefix}{param}_m", f"{prefix}{param}_v"
        state += [StateVar(m, param), StateVar(v, param)]
        _decay_first(param, lr, self.weight_decay if self._decays(param) else 0.0, statements)
        statements += [
            f"define({m}, {m} + (({grad}) - {m}) * {_num(1 - self.beta_1)})",
            f"define({v}, {v} + (({grad}) * ({grad}) - {v}) * {_num(1 - self.beta_2)})",
            f"define({param}, {param} - ({prefix}nadam_cm * {m} + {prefix}nadam_cg * ({grad}))"
            f" * {lr} / (sqrt({v} / {prefix}nadam_cv) + {_num(self.epsilon)}))",
        ]


class Lamb(Optimizer):
    """Lamb as Keras defines it: Adam's bias-corrected direction
    ``r = m_hat / (sqrt(v_hat) + epsilon)`` scaled per parameter (layer-wise) by
    the trust ratio ``||w|| / ||r||`` (1 when either norm is 0)::

        w -= trust_ratio * learning_rate * r

    ``weight_decay`` is Keras's decoupled decay, applied before the step.
    Keras's defaults: 0.001, 0.9, 0.999, 1e-7."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 weight_decay=0.0, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.beta_1 = _beta("Lamb", "beta_1", beta_1)
        self.beta_2 = _beta("Lamb", "beta_2", beta_2)
        self.epsilon = _positive("[Lamb] epsilon", epsilon, allow_zero=True)
        self.weight_decay = _positive("[Lamb] weight_decay", weight_decay, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "weight_decay": self.weight_decay}

    def _emit_prelude(self, prefix, lr, iteration, statements, state):
        statements += [
            f"define({prefix}lamb_c1, 1.0 - {_num(self.beta_1)} ** ({iteration} + 1))",
            f"define({prefix}lamb_c2, 1.0 - {_num(self.beta_2)} ** ({iteration} + 1))",
        ]

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        m, v = f"{prefix}{param}_m", f"{prefix}{param}_v"
        r, wn, rn = f"{prefix}r{i}", f"{prefix}wnorm{i}", f"{prefix}rnorm{i}"
        state += [StateVar(m, param), StateVar(v, param)]
        _decay_first(param, lr, self.weight_decay if self._decays(param) else 0.0, statements)
        statements += [
            f"define({m}, {m} + (({grad}) - {m}) * {_num(1 - self.beta_1)})",
            f"define({v}, {v} + (({grad}) * ({grad}) - {v}) * {_num(1 - self.beta_2)})",
            f"define({r}, ({m} / {prefix}lamb_c1) / (sqrt({v} / {prefix}lamb_c2) + "
            f"{_num(self.epsilon)}))"]
        pre_w, w_sq = self._sumsq(i, param, f"{prefix}wsq{i}")
        pre_r, r_sq = self._sumsq(i, r, f"{prefix}rsq{i}")
        statements += pre_w + [f"define({wn}, sqrt({w_sq}))"] + pre_r + [
            f"define({rn}, sqrt({r_sq}))",
            f"define({param}, {param} - where({wn} > 0.0, where({rn} > 0.0, {wn} / {rn}, 1.0), "
            f"1.0) * {lr} * {r})",
        ]


def _unit(cls: str, name: str, value, closed: bool = False) -> float:
    """A number in [0, 1) ([0, 1] when closed)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            0 <= value <= 1 if closed else 0 <= value < 1):
        raise ValueError(f"[{cls}] {name} must be in [0, 1{']' if closed else ')'}, got "
                         f"{value!r}")
    return float(value)


class Adadelta(Optimizer):
    """Adadelta as Keras defines it (Zeiler): ``a = rho a + (1 - rho) g**2``;
    ``d = -sqrt(D + eps) g / sqrt(a + eps)``; ``D = rho D + (1 - rho) d**2``;
    ``w += learning_rate * d`` (Keras's defaults: 0.001, 0.95, 1e-7)."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.rho = _unit("Adadelta", "rho", rho)
        self.epsilon = _positive("[Adadelta] epsilon", epsilon, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "rho": self.rho, "epsilon": self.epsilon}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        a, d, step = f"{prefix}{param}_agrad", f"{prefix}{param}_adelta", f"{prefix}d{i}"
        state += [StateVar(a, param), StateVar(d, param)]
        rho, eps = _num(self.rho), _num(self.epsilon)
        statements += [
            f"define({a}, {rho} * {a} + {_num(1 - self.rho)} * square({grad}))",
            f"define({step}, -(sqrt({d} + {eps}) * ({grad})) / sqrt({a} + {eps}))",
            f"define({d}, {rho} * {d} + {_num(1 - self.rho)} * square({step}))",
            f"define({param}, {param} + {lr} * {step})",
        ]


class Adamax(Optimizer):
    """Adamax as Keras defines it (Kingma & Ba): ``m += (g - m)(1 - beta_1)``;
    ``u = max(beta_2 u, |g|)``; ``w -= lr m / ((1 - beta_1**t)(u + eps))``."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.beta_1 = _unit("Adamax", "beta_1", beta_1)
        self.beta_2 = _unit("Adamax", "beta_2", beta_2)
        self.epsilon = _positive("[Adamax] epsilon", epsilon, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        m, u = f"{prefix}{param}_m", f"{prefix}{param}_u"
        state += [StateVar(m, param), StateVar(u, param)]
        b1 = _num(self.beta_1)
        statements += [
            f"define({m}, {m} + (({grad}) - {m}) * {_num(1 - self.beta_1)})",
            f"define({u}, maximum({_num(self.beta_2)} * {u}, abs({grad})))",
            f"define({param}, {param} - {lr} * {m} / ((1.0 - power({b1}, {iteration} + 1.0)) * "
            f"({u} + {_num(self.epsilon)})))",
        ]


class Lion(Optimizer):
    """Lion as Keras defines it (Chen et al.): ``w -= lr sign(beta_1 m +
    (1 - beta_1) g)``, then ``m = beta_2 m + (1 - beta_2) g``."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.99, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.beta_1 = _unit("Lion", "beta_1", beta_1, closed=True)
        self.beta_2 = _unit("Lion", "beta_2", beta_2, closed=True)

    def _config(self) -> dict:
        return {**super()._config(), "beta_1": self.beta_1, "beta_2": self.beta_2}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        m = f"{prefix}{param}_m"
        state.append(StateVar(m, param))
        statements += [
            f"define({param}, {param} - {lr} * sign({m} * {_num(self.beta_1)} + ({grad}) * "
            f"{_num(1 - self.beta_1)}))",
            f"define({m}, {m} * {_num(self.beta_2)} + ({grad}) * {_num(1 - self.beta_2)})",
        ]


class Ftrl(Optimizer):
    """FTRL-proximal as Keras defines it (McMahan et al.), with its L1, L2,
    L2-shrinkage regularization and beta; accumulators start at
    ``initial_accumulator_value``."""

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5,
                 initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, l2_shrinkage_regularization_strength=0.0,
                 beta=0.0, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        if isinstance(learning_rate_power, bool) or not isinstance(
                learning_rate_power, numbers.Real) or learning_rate_power > 0:
            raise ValueError(f"[Ftrl] learning_rate_power must be a number <= 0, got "
                             f"{learning_rate_power!r}")
        self.learning_rate_power = float(learning_rate_power)
        self.initial_accumulator_value = _positive("[Ftrl] initial_accumulator_value",
                                                   initial_accumulator_value, allow_zero=True)
        self.l1_regularization_strength = _positive(
            "[Ftrl] l1_regularization_strength", l1_regularization_strength, allow_zero=True)
        self.l2_regularization_strength = _positive(
            "[Ftrl] l2_regularization_strength", l2_regularization_strength, allow_zero=True)
        self.l2_shrinkage_regularization_strength = _positive(
            "[Ftrl] l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength,
            allow_zero=True)
        self.beta = _positive("[Ftrl] beta", beta, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "learning_rate_power": self.learning_rate_power,
                "initial_accumulator_value": self.initial_accumulator_value,
                "l1_regularization_strength": self.l1_regularization_strength,
                "l2_regularization_strength": self.l2_regularization_strength,
                "l2_shrinkage_regularization_strength":
                    self.l2_shrinkage_regularization_strength,
                "beta": self.beta}

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        acc, lin = f"{prefix}{param}_accum", f"{prefix}{param}_linear"
        new, used = f"{prefix}na{i}", f"{prefix}gu{i}"
        state += [StateVar(acc, param, self.initial_accumulator_value), StateVar(lin, param)]
        power = _num(-self.learning_rate_power)
        l1 = _num(self.l1_regularization_strength)
        l2 = f"({_num(self.l2_regularization_strength)} + {_num(self.beta)} / (2.0 * {lr}))"
        statements += [
            f"define({used}, ({grad}) + "
            f"{_num(2 * self.l2_shrinkage_regularization_strength)} * {param})",
            f"define({new}, {acc} + square({grad}))",
            f"define({lin}, {lin} + {used} - (power({new}, {power}) - power({acc}, {power})) / "
            f"{lr} * {param})",
            f"define({param}, (clip({lin}, -{l1}, {l1}) - {lin}) / "
            f"(power({new}, {power}) / {lr} + 2.0 * {l2}))",
            f"define({acc}, {new})",
        ]


# Keras's optimizers that look at each weight's shape (and Schedule-Free AdamW)
# live in their own module, which builds on the classes above
from .optim_more import Adafactor, Muon, ScheduleFreeAdamW  # noqa: E402

# --------------------------------------------------------------------------- by name, configs

_OPTIMIZERS = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop,
               "adagrad": Adagrad, "nadam": Nadam, "lamb": Lamb, "adadelta": Adadelta,
               "adamax": Adamax, "lion": Lion, "ftrl": Ftrl, "adafactor": Adafactor,
               "muon": Muon, "schedulefreeadamw": ScheduleFreeAdamW}
# (kept under these names: tessera.nn reads optim._lr_from_config)
_lr_config, _lr_from_config = lr_config, lr_from_config


def _rebuild(config: Mapping, expected=None):
    """The object a get_config dict describes: ``{"class": name, **arguments}``
    (or Keras's ``{"class_name": name, "config": {...}}``)."""
    config = normalized_config(config)
    name = config.get("class")
    if name in SCHEDULES:
        return schedule_from_config(config, expected)
    config.pop("class", None)
    known = {c.__name__: c for c in _OPTIMIZERS.values()}
    cls = known.get(name)
    if cls is None:
        raise unknown_class(name, known | SCHEDULES)
    if expected is not None and not issubclass(cls, expected):
        raise ValueError(f"[{expected.__name__}.from_config] the config describes a {name}")
    if "learning_rate" in config:
        config["learning_rate"] = _lr_from_config(config["learning_rate"])
    clipping = {k: config.pop(k) for k in ("clipvalue", "weight_clipnorm") if k in config}
    steps = config.pop("gradient_accumulation_steps", None)
    ema = {k: config.pop(k) for k in ("use_ema", "ema_momentum", "ema_overwrite_frequency")
           if k in config}
    out = cls(**config)
    if clipping:
        out.set_clipping(**clipping)
    out.set_gradient_accumulation(steps)
    out.set_ema(**ema)
    return out


def from_config(config: Mapping) -> Union[Optimizer, LearningRateSchedule]:
    """The optimizer or learning-rate schedule a ``get_config()`` dict describes."""
    return _rebuild(config)


def get(identifier) -> Optimizer:
    """An optimizer from a name (``"sgd"``, ``"adam"``, ``"adamw"``,
    ``"rmsprop"``, ``"adagrad"``, ``"nadam"``, ``"lamb"``, ``"adafactor"``, ``"muon"``, ...,
    any case; Keras's defaults), a config dict (``get_config()``'s) or an Optimizer (returned as
    is)."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        cls = _OPTIMIZERS.get(identifier.lower())
        if cls is None:
            import difflib  # noqa: PLC0415

            close = difflib.get_close_matches(identifier.lower(), list(_OPTIMIZERS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"[optim.get] unknown optimizer {identifier!r}{hint} Known: "
                             f"{sorted(_OPTIMIZERS)}")
        return cls()
    if isinstance(identifier, Mapping):
        out = from_config(identifier)
        if not isinstance(out, Optimizer):
            raise ValueError(f"[optim.get] the config describes a learning-rate schedule, not an "
                             f"optimizer: {dict(identifier)!r}")
        return out
    raise TypeError(f"[optim.get] expected an optimizer name, config dict or Optimizer, got "
                    f"{identifier!r}")
