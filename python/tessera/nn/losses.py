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
           "get"]

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
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"name": self.name}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"


class MeanSquaredError(Loss):
    name = "mean_squared_error"

    def expression(self, y, p):
        return f"mean_squared_error({y}, {p})"


class MeanAbsoluteError(Loss):
    name = "mean_absolute_error"

    def expression(self, y, p):
        return f"mean(abs({p} - {y}))"


class MeanAbsolutePercentageError(Loss):
    name = "mean_absolute_percentage_error"

    def expression(self, y, p):
        return f"100.0 * mean(abs(({y} - {p}) / maximum(abs({y}), {_EPS})))"


class MeanSquaredLogarithmicError(Loss):
    name = "mean_squared_logarithmic_error"

    def expression(self, y, p):
        return (f"mean((log(maximum({p}, {_EPS}) + 1.0) - log(maximum({y}, {_EPS}) + 1.0)) "
                "** 2)")


class Huber(Loss):
    """0.5 e² where |e| <= delta, delta (|e| - 0.5 delta) beyond (e = p - y)."""

    name = "huber"

    def __init__(self, delta=1.0):
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not delta > 0:
            raise ValueError(f"[Huber] delta must be a positive number, got {delta!r}")
        self.delta = float(delta)

    def get_config(self):
        return {"name": self.name, "delta": self.delta}

    def expression(self, y, p):
        d = _num(self.delta)
        e = f"({p} - {y})"
        return (f"mean(where(abs{e} <= {d}, 0.5 * {e} ** 2, {d} * (abs{e} - 0.5 * {d})))")


class LogCosh(Loss):
    name = "log_cosh"

    def expression(self, y, p):
        e = f"({p} - {y})"
        return f"mean({e} + softplus(-2.0 * {e}) - 0.6931471805599453)"


class KLDivergence(Loss):
    name = "kl_divergence"

    def expression(self, y, p):
        yc, pc = f"clip({y}, {_EPS}, 1.0)", f"clip({p}, {_EPS}, 1.0)"
        return f"mean(sum({yc} * log({yc} / {pc}), axis=-1))"


class Poisson(Loss):
    name = "poisson"

    def expression(self, y, p):
        return f"mean({p} - {y} * log({p} + {_EPS}))"


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
        raise TypeError(f"[compile] a loss function of (y_true, y_pred) ({loss!r}) is not "
                        "supported yet: use a loss name or a tessera.nn.losses object")
    raise TypeError(f"[compile] loss must be a name or a tessera.nn.losses object, got {loss!r}")
