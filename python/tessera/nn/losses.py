"""tessera.nn.losses: Keras's losses, with Keras's names, arguments and
definitions (the mean over the samples of each sample's loss), for
``model.compile(loss=...)``. Each writes itself as an expression of
tessera's language in the labels and the model's output, which the training
step differentiates like the rest of the model.

    model.compile("adam", nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile("adam", nn.losses.Huber(delta=2.0))
    model.compile("adam", "kld")          # the same by name
"""

import numbers

__all__ = ["Loss", "MeanSquaredError", "MeanAbsoluteError", "MeanAbsolutePercentageError",
           "MeanSquaredLogarithmicError", "Huber", "LogCosh", "KLDivergence", "Poisson",
           "SparseCategoricalCrossentropy", "CategoricalCrossentropy", "BinaryCrossentropy",
           "FunctionLoss", "get"]

# Keras's epsilon where its losses clip.
_EPS = "1e-7"


def _num(x) -> str:
    return repr(float(x))


def _fraction(cls: str, name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v <= 1:
        raise ValueError(f"[{cls}] {name} must be a number in [0, 1], got {v!r}")
    return float(v)


class Loss:
    """A loss: ``expression(y, p)`` is the language's text of the mean loss of
    the labels ``y`` and the outputs ``p`` (both variable names)."""

    name = "loss"
    sparse_labels = False  # integer class labels (checked by fit/evaluate)

    def expression(self, y: str, p: str) -> str:
        return f"mean({self.per_sample(y, p)})"

    def per_sample(self, y: str, p: str) -> str:
        """Each sample's loss (the last axis reduced, as Keras's functions do),
        for sample weights."""
        raise NotImplementedError(f"[{type(self).__name__}] per-sample losses are not available")

    def whole_output_shape(self, out_shape) -> tuple:
        """The shape labels are checked against: the output's own, except for
        an output split over a tensor group (tessera.nn.parallel_losses)."""
        return tuple(out_shape)

    def expression_for(self, y, p, ctx, label_spec, out_shape) -> str:
        """The mean loss as the model writes it (shapes known)."""
        return self.expression(y, p)

    def per_sample_for(self, y, p, ctx, label_spec, out_shape) -> str:
        return self.per_sample(y, p)

    def get_config(self) -> dict:
        return {"name": self.name}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"


class MeanSquaredError(Loss):
    name = "mean_squared_error"

    def expression(self, y, p):
        return f"mean_squared_error({y}, {p})"

    def per_sample(self, y, p):
        return f"mean(square({p} - {y}), axis=-1)"


class MeanAbsoluteError(Loss):
    name = "mean_absolute_error"

    def per_sample(self, y, p):
        return f"mean(abs({p} - {y}), axis=-1)"


class MeanAbsolutePercentageError(Loss):
    name = "mean_absolute_percentage_error"

    def per_sample(self, y, p):
        return f"100.0 * mean(abs(({y} - {p}) / maximum(abs({y}), {_EPS})), axis=-1)"


class MeanSquaredLogarithmicError(Loss):
    name = "mean_squared_logarithmic_error"

    def per_sample(self, y, p):
        return (f"mean((log(maximum({p}, {_EPS}) + 1.0) - log(maximum({y}, {_EPS}) + 1.0)) "
                "** 2, axis=-1)")


class Huber(Loss):
    """0.5 e² where |e| <= delta, delta (|e| - 0.5 delta) beyond (e = p - y)."""

    name = "huber"

    def __init__(self, delta=1.0):
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not delta > 0:
            raise ValueError(f"[Huber] delta must be a positive number, got {delta!r}")
        self.delta = float(delta)

    def get_config(self):
        return {"name": self.name, "delta": self.delta}

    def per_sample(self, y, p):
        d = _num(self.delta)
        e = f"({p} - {y})"
        return (f"mean(where(abs{e} <= {d}, 0.5 * {e} ** 2, {d} * (abs{e} - 0.5 * {d})), "
                "axis=-1)")


class LogCosh(Loss):
    name = "log_cosh"

    def per_sample(self, y, p):
        e = f"({p} - {y})"
        return f"mean({e} + softplus(-2.0 * {e}) - 0.6931471805599453, axis=-1)"


class KLDivergence(Loss):
    name = "kl_divergence"

    def per_sample(self, y, p):
        yc, pc = f"clip({y}, {_EPS}, 1.0)", f"clip({p}, {_EPS}, 1.0)"
        return f"sum({yc} * log({yc} / {pc}), axis=-1)"


class Poisson(Loss):
    name = "poisson"

    def per_sample(self, y, p):
        return f"mean({p} - {y} * log({p} + {_EPS}), axis=-1)"


class SparseCategoricalCrossentropy(Loss):
    """Integer class labels; ``from_logits`` when the model's last layer has no
    softmax."""

    name = "sparse_categorical_crossentropy"
    sparse_labels = True

    def __init__(self, from_logits=False):
        self.from_logits = bool(from_logits)

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits}

    def expression(self, y, p):
        logits = "true" if self.from_logits else "false"
        return f"sparse_categorical_crossentropy({y}, {p}, from_logits={logits})"

    def per_sample(self, y, p):
        return _crossentropy(f"one_hot({y}, shape({p})[-1], dtype=dtype_name({p}))", p,
                             self.from_logits)


class _SmoothedCrossentropy(Loss):
    def __init__(self, from_logits=False, label_smoothing=0.0):
        self.from_logits = bool(from_logits)
        self.label_smoothing = _fraction(type(self).__name__, "label_smoothing", label_smoothing)

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits,
                "label_smoothing": self.label_smoothing}

    def _labels(self, y, p):
        raise NotImplementedError

    def expression(self, y, p):
        logits = "true" if self.from_logits else "false"
        return f"{self.name}({self._labels(y, p)}, {p}, from_logits={logits})"

    def per_sample(self, y, p):
        return _crossentropy(self._labels(y, p), p, self.from_logits)


class CategoricalCrossentropy(_SmoothedCrossentropy):
    """One-hot labels, smoothed toward uniform: y (1 - s) + s / classes."""

    name = "categorical_crossentropy"

    def _labels(self, y, p):
        s = self.label_smoothing
        if not s:
            return y
        return f"({y} * {_num(1 - s)} + {_num(s)} / shape({p})[-1])"


class BinaryCrossentropy(_SmoothedCrossentropy):
    """0/1 labels, smoothed toward 0.5: y (1 - s) + s / 2."""

    name = "binary_crossentropy"

    def per_sample(self, y, p):
        t = self._labels(y, p)
        if self.from_logits:
            return f"mean(relu({p}) - {p} * {t} + log1p(exp(-abs({p}))), axis=-1)"
        q = f"clip({p}, {_EPS}, {1 - 1e-7!r})"
        return f"-mean({t} * log({q}) + (1.0 - {t}) * log(1.0 - {q}), axis=-1)"

    def _labels(self, y, p):
        s = self.label_smoothing
        if not s:
            return y
        return f"({y} * {_num(1 - s)} + {_num(0.5 * s)})"


_BY_NAME = {
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError,
    "mean_absolute_error": MeanAbsoluteError, "mae": MeanAbsoluteError,
    "mean_absolute_percentage_error": MeanAbsolutePercentageError,
    "mape": MeanAbsolutePercentageError,
    "mean_squared_logarithmic_error": MeanSquaredLogarithmicError,
    "msle": MeanSquaredLogarithmicError,
    "huber": Huber, "log_cosh": LogCosh, "logcosh": LogCosh,
    "kl_divergence": KLDivergence, "kld": KLDivergence,
    "kullback_leibler_divergence": KLDivergence, "poisson": Poisson,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy,
    "binary_crossentropy": BinaryCrossentropy,
}


def _crossentropy(t: str, p: str, from_logits: bool) -> str:
    """Keras's categorical crossentropy of targets t per sample."""
    if from_logits:
        return f"-sum({t} * log_softmax({p}, axis=-1), axis=-1)"
    q = f"clip({p} / sum({p}, axis=-1, keepdims=true), {_EPS}, {1 - 1e-7!r})"
    return f"-sum({t} * log({q}), axis=-1)"


class FunctionLoss(Loss):
    """A loss given as a Python function of (y_true, y_pred), written in
    NumPy style: traced when the model's programs are written, its values
    averaged (Keras: the function gives each sample's loss)."""

    def __init__(self, fn):
        self.fn = fn
        self.name = getattr(fn, "__name__", "loss")

    def _values(self, y, p, ctx, label_spec, out_shape) -> str:
        from .functional import apply_function  # noqa: PLC0415

        shape, dtype = label_spec
        return apply_function(self.fn, [y, p], [shape, out_shape], ctx, [dtype, "float32"])

    def expression_for(self, y, p, ctx, label_spec, out_shape):
        return f"mean({self._values(y, p, ctx, label_spec, out_shape)})"

    def per_sample_for(self, y, p, ctx, label_spec, out_shape):
        return self._values(y, p, ctx, label_spec, out_shape)

    def get_config(self):
        return {"name": self.name}


def get(loss) -> Loss:
    """A loss object from a name (Keras's names and aliases) or a Loss."""
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, str):
        cls = _BY_NAME.get(loss.lower())
        if cls is None:
            import difflib  # noqa: PLC0415

            close = difflib.get_close_matches(loss.lower(), list(_BY_NAME), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"[compile] unknown loss {loss!r}{hint} Known: {sorted(_BY_NAME)}")
        return cls()
    if callable(loss):
        return FunctionLoss(loss)
    raise TypeError(f"[compile] loss must be a name or a tessera.nn.losses object, got {loss!r}")
