"""Adafactor, Muon and ScheduleFreeAdamW as Keras 3 defines them, written as
update code like tessera.optim's other optimizers (see its module doc).

Adafactor and Muon look at each weight's shape (Adafactor keeps the second
moments of a matrix as a row and a column vector; Muon orthogonalizes the
update of a matrix, and Muon names weights by their path), so they need whole
weights of a model: under ZeRO (flat slices) or for weights split over a
tensor group they are refused with a named error. ScheduleFreeAdamW is
elementwise and runs anywhere Adam does.

Weight decay is Keras's, decoupled: ``w -= w * weight_decay * learning_rate``
before each step (``exclude_from_weight_decay`` applies)."""

from __future__ import annotations

import numbers
import re

from .lr_schedules import _positive
from .optim import Optimizer, StateVar, _beta, _decay_first, _num


def _whole_weight(opt: Optimizer, param: str):
    """The model Variable of program weight `param`, which must be whole."""
    cls = type(opt).__name__
    if getattr(opt, "_sum_squares", None) is not None:
        raise ValueError(f"[{cls}] weights split over a tensor group are not supported: "
                         f"{cls} needs each weight whole (its shape), got the weight {param!r} "
                         "held in parts")
    var = opt._variable_of(param) if opt._variable_of is not None else None
    if var is None:
        raise ValueError(f"[{cls}] needs each weight whole, as one of a model's Variables: "
                         f"{param!r} is not one here (ZeRO holds flat slices of the weights; "
                         f"fit without zero=, or use an elementwise optimizer such as AdamW)")
    return var


def _real(cls: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"[{cls}] {name} must be a number, got {value!r}")
    return float(value)


class Adafactor(Optimizer):
    """Adafactor as Keras defines it (Shazeer & Stern). With ``t = iteration + 1``,
    ``beta_2_t = 1 - t ** beta_2_decay`` and ``G = g**2 + epsilon_1``: a weight of
    two or more axes keeps ``r`` (G's mean over the last axis) and ``c`` (over the
    next-to-last) as moving averages with ``beta_2_t``, and
    ``v = r / mean(r) (outer) c``; a smaller one keeps ``v`` itself. Then
    ``u = g / sqrt(v)``, ``u /= max(1, rms(u) / clip_threshold)`` and
    ``w -= max(epsilon_2, rms(w)) * min(learning_rate, 1 / sqrt(t)) * u``.
    Keras's defaults: 0.001, -0.8, 1e-30, 1e-3, 1.0 (``relative_step`` is kept
    for Keras's config; Keras's step takes the minimum above either way)."""

    def __init__(self, learning_rate=0.001, beta_2_decay=-0.8, epsilon_1=1e-30, epsilon_2=1e-3,
                 clip_threshold=1.0, relative_step=True, weight_decay=0.0, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.beta_2_decay = _real("Adafactor", "beta_2_decay", beta_2_decay)
        if self.beta_2_decay >= 0:
            raise ValueError(f"[Adafactor] beta_2_decay must be < 0, got {beta_2_decay!r}")
        self.epsilon_1 = _positive("[Adafactor] epsilon_1", epsilon_1, allow_zero=True)
        self.epsilon_2 = _positive("[Adafactor] epsilon_2", epsilon_2, allow_zero=True)
        self.clip_threshold = _positive("[Adafactor] clip_threshold", clip_threshold)
        self.relative_step = bool(relative_step)
        self.weight_decay = _positive("[Adafactor] weight_decay", weight_decay, allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "beta_2_decay": self.beta_2_decay,
                "epsilon_1": self.epsilon_1, "epsilon_2": self.epsilon_2,
                "clip_threshold": self.clip_threshold, "relative_step": self.relative_step,
                "weight_decay": self.weight_decay}

    def _emit_prelude(self, prefix, lr, iteration, statements, state):
        statements += [
            f"define({prefix}af_rho, minimum({lr}, 1.0 / sqrt({iteration} + 1.0)))",
            f"define({prefix}af_beta2, 1.0 - power({iteration} + 1.0, "
            f"{_num(self.beta_2_decay)}))",
        ]

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        rank = len(_whole_weight(self, param).shape)
        _decay_first(param, lr, self.weight_decay if self._decays(param) else 0.0, statements)
        b2 = f"{prefix}af_beta2"
        sq, v, u = f"{prefix}af_g2_{i}", f"{prefix}af_v{i}", f"{prefix}af_u{i}"
        statements.append(f"define({sq}, square({grad}) + {_num(self.epsilon_1)})")
        if rank >= 2:
            r, c = f"{prefix}{param}_r", f"{prefix}{param}_c"
            state += [StateVar(r, param, without_axis=-1), StateVar(c, param, without_axis=-2)]
            statements += [
                f"define({r}, {b2} * {r} + (1.0 - {b2}) * mean({sq}, axis=-1))",
                f"define({c}, {b2} * {c} + (1.0 - {b2}) * mean({sq}, axis=-2))",
                f"define({v}, expand_dims({r} / mean({r}, axis=-1, keepdims=true), -1) * "
                f"expand_dims({c}, -2))",
            ]
        else:
            v = f"{prefix}{param}_v"
            state.append(StateVar(v, param))
            statements.append(f"define({v}, {b2} * {v} + (1.0 - {b2}) * {sq})")
        statements += [
            f"define({u}, ({grad}) / sqrt({v}))",
            f"define({u}, {u} / maximum(1.0, sqrt(mean(square({u}))) / "
            f"{_num(self.clip_threshold)}))",
            f"define({param}, {param} - maximum({_num(self.epsilon_2)}, "
            f"sqrt(mean(square({param})))) * {prefix}af_rho * {u})",
        ]


class Muon(Optimizer):
    """Muon as Keras defines it. A matrix (two axes) whose path names neither an
    embedding (``exclude_embeddings``) nor a match of ``exclude_layers``
    (regular expressions) takes Muon's step: ``m = momentum m + g``, the
    direction ``g + momentum m`` (Nesterov) or ``m``, orthogonalized by
    ``ns_steps`` Newton-Schulz iterations (``muon_a``, ``muon_b``, ``muon_c``)
    and scaled by ``sqrt(max(rows, cols)) * rms_rate`` (None: not scaled),
    ``w -= learning_rate * that``. Every other weight takes Adam's step at
    ``learning_rate * adam_lr_ratio`` (``adam_beta_1``, ``adam_beta_2``,
    ``epsilon`` as Keras's Adam). Decay: ``weight_decay`` for Muon's weights,
    ``adam_weight_decay`` for Adam's (each None: none), both at the learning
    rate."""

    def __init__(self, learning_rate=0.001, adam_beta_1=0.9, adam_beta_2=0.999,
                 adam_weight_decay=0.004, epsilon=1e-7, weight_decay=0.004, clipnorm=None,
                 exclude_layers=None, exclude_embeddings=True, muon_a=3.4445, muon_b=-4.7750,
                 muon_c=2.0315, adam_lr_ratio=1, momentum=0.95, ns_steps=5, nesterov=True,
                 rms_rate=0.2):
        super().__init__(learning_rate, clipnorm)
        self.adam_beta_1 = _beta("Muon", "adam_beta_1", adam_beta_1)
        self.adam_beta_2 = _beta("Muon", "adam_beta_2", adam_beta_2)
        self.adam_weight_decay = _positive("[Muon] adam_weight_decay", adam_weight_decay or 0.0,
                                           allow_zero=True)
        self.epsilon = _positive("[Muon] epsilon", epsilon, allow_zero=True)
        self.weight_decay = _positive("[Muon] weight_decay", weight_decay or 0.0,
                                      allow_zero=True)
        if exclude_layers is not None and (isinstance(exclude_layers, str) or not all(
                isinstance(k, str) for k in exclude_layers)):
            raise TypeError(f"[Muon] exclude_layers must be a list of strings, got "
                            f"{exclude_layers!r}")
        self.exclude_layers = list(exclude_layers or [])
        for k in self.exclude_layers:
            try:
                re.compile(k)
            except re.error as e:
                raise ValueError(f"[Muon] exclude_layers: {k!r} is not a valid regular "
                                 f"expression: {e}") from None
        self.exclude_embeddings = bool(exclude_embeddings)
        self.muon_a = _real("Muon", "muon_a", muon_a)
        self.muon_b = _real("Muon", "muon_b", muon_b)
        self.muon_c = _real("Muon", "muon_c", muon_c)
        self.adam_lr_ratio = _positive("[Muon] adam_lr_ratio", adam_lr_ratio, allow_zero=True)
        self.momentum = _beta("Muon", "momentum", momentum)
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 0:
            raise ValueError(f"[Muon] ns_steps must be an int >= 0, got {ns_steps!r}")
        self.ns_steps = ns_steps
        self.nesterov = bool(nesterov)
        self.rms_rate = None if rms_rate is None else _positive("[Muon] rms_rate", rms_rate)

    def _config(self) -> dict:
        return {**super()._config(), "adam_beta_1": self.adam_beta_1,
                "adam_beta_2": self.adam_beta_2, "adam_weight_decay": self.adam_weight_decay,
                "epsilon": self.epsilon, "weight_decay": self.weight_decay,
                "exclude_layers": list(self.exclude_layers),
                "exclude_embeddings": self.exclude_embeddings, "muon_a": self.muon_a,
                "muon_b": self.muon_b, "muon_c": self.muon_c,
                "adam_lr_ratio": self.adam_lr_ratio, "momentum": self.momentum,
                "ns_steps": self.ns_steps, "nesterov": self.nesterov, "rms_rate": self.rms_rate}

    def uses_adam(self, variable) -> bool:
        """Whether `variable` (a model Variable) takes Adam's step (Keras's rule)."""
        if len(variable.shape) != 2:
            return True
        if self.exclude_embeddings and "embedding" in variable.path.lower():
            return True
        return any(re.search(k, variable.path) for k in self.exclude_layers)

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        var = _whole_weight(self, param)
        adam = self.uses_adam(var)
        decay = self.adam_weight_decay if adam else self.weight_decay
        _decay_first(param, lr, decay if self._decays(param) else 0.0, statements)
        m = f"{prefix}{param}_momentum"
        state.append(StateVar(m, param))
        if adam:
            v = f"{prefix}{param}_velocity"
            state.append(StateVar(v, param))
            t = f"({iteration} + 1.0)"
            b1, b2 = _num(self.adam_beta_1), _num(self.adam_beta_2)
            alpha = (f"{lr} * {_num(self.adam_lr_ratio)} * sqrt(1.0 - power({b2}, {t})) / "
                     f"(1.0 - power({b1}, {t}))")
            statements += [
                f"define({m}, {m} + (({grad}) - {m}) * {_num(1 - self.adam_beta_1)})",
                f"define({v}, {v} + (square({grad}) - {v}) * {_num(1 - self.adam_beta_2)})",
                f"define({param}, {param} - {m} * ({alpha}) / (sqrt({v}) + "
                f"{_num(self.epsilon)}))",
            ]
            return
        rows, cols = var.shape
        x = f"{prefix}ns{i}"
        mu = _num(self.momentum)
        statements.append(f"define({m}, {m} * {mu} + ({grad}))")
        statements.append(f"define({x}, {f'({grad}) + {mu} * {m}' if self.nesterov else m})")
        if rows > cols:
            statements.append(f"define({x}, transpose({x}))")
        statements.append(f"define({x}, {x} / (norm({x}) + 1e-07))")
        a, b, c = _num(self.muon_a), _num(self.muon_b), _num(self.muon_c)
        for _ in range(self.ns_steps):
            statements += [
                f"define({x}_a, {x} @ transpose({x}))",
                f"define({x}, {a} * {x} + ({b} * {x}_a + {c} * ({x}_a @ {x}_a)) @ {x})",
            ]
        if rows > cols:
            statements.append(f"define({x}, transpose({x}))")
        scale = "" if self.rms_rate is None else \
            f" * {_num(max(rows, cols) ** 0.5)} * {_num(self.rms_rate)}"
        statements.append(f"define({param}, {param} - {lr} * {x}{scale})")


class ScheduleFreeAdamW(Optimizer):
    """Schedule-Free AdamW as Keras defines it (Defazio et al.): a sequence
    ``z`` (starting at the weights) takes Adam's steps without momentum,
    ``z -= lr g / (sqrt(v / (1 - beta_2**t)) + epsilon)`` (lr warmed up
    linearly over ``warmup_steps``); the average ``x`` of the ``z`` is recovered
    from the weights, ``x_old = (w - (1 - beta_1) z_old) / beta_1``,
    ``x = (1 - 1/t) x_old + z / t``, and the weights become
    ``w = (1 - beta_1) z + beta_1 x``. Keras's defaults: 0.0025, 0.9, 0.999,
    1e-8, 0."""

    def __init__(self, learning_rate=0.0025, beta_1=0.9, beta_2=0.999, epsilon=1e-8,
                 warmup_steps=0, weight_decay=0.0, clipnorm=None):
        super().__init__(learning_rate, clipnorm)
        self.beta_1 = _beta("ScheduleFreeAdamW", "beta_1", beta_1)
        if self.beta_1 == 0:
            raise ValueError("[ScheduleFreeAdamW] beta_1 must be in (0, 1), got 0 (the "
                             "average is recovered by dividing by it)")
        self.beta_2 = _beta("ScheduleFreeAdamW", "beta_2", beta_2)
        self.epsilon = _positive("[ScheduleFreeAdamW] epsilon", epsilon, allow_zero=True)
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or \
                warmup_steps < 0:
            raise ValueError(f"[ScheduleFreeAdamW] warmup_steps must be an int >= 0, got "
                             f"{warmup_steps!r}")
        self.warmup_steps = warmup_steps
        self.weight_decay = _positive("[ScheduleFreeAdamW] weight_decay", weight_decay,
                                      allow_zero=True)

    def _config(self) -> dict:
        return {**super()._config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "warmup_steps": self.warmup_steps,
                "weight_decay": self.weight_decay}

    def _emit_prelude(self, prefix, lr, iteration, statements, state):
        t = f"({iteration} + 1.0)"
        rate = lr
        if self.warmup_steps > 0:
            rate = f"{lr} * minimum({t} / {_num(self.warmup_steps)}, 1.0)"
        statements += [f"define({prefix}sf_lr, {rate})",
                       f"define({prefix}sf_c2, 1.0 - power({_num(self.beta_2)}, {t}))",
                       f"define({prefix}sf_w, 1.0 / {t})"]

    def _emit(self, i, param, grad, prefix, lr, iteration, statements, state):
        z, v, old = f"{prefix}{param}_momentum", f"{prefix}{param}_velocity", f"{prefix}zold{i}"
        state += [StateVar(z, param), StateVar(v, param)]
        b1 = _num(self.beta_1)
        # z starts as a copy of the weights (Keras's build), before any decay
        statements.append(f"define({z}, where(equal({iteration}, 0), {param}, {z}))")
        _decay_first(param, lr, self.weight_decay if self._decays(param) else 0.0, statements)
        statements += [
            f"define({old}, {z})",
            f"define({v}, {v} + (square({grad}) - {v}) * {_num(1 - self.beta_2)})",
            f"define({z}, {z} - {prefix}sf_lr * ({grad}) / (sqrt({v} / {prefix}sf_c2) + "
            f"{_num(self.epsilon)}))",
            f"define({prefix}x{i}, ({param} - {_num(1 - self.beta_1)} * {old}) / {b1})",
            f"define({prefix}x{i}, (1.0 - {prefix}sf_w) * {prefix}x{i} + {prefix}sf_w * {z})",
            f"define({param}, {_num(1 - self.beta_1)} * {z} + {b1} * {prefix}x{i})",
        ]
