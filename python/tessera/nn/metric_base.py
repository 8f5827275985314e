"""The base of tessera.nn.metrics (which re-exports it): ``Metric`` (compiled
sums, a user's stateful subclass, and Keras's standalone ``update_state`` /
``result()`` / ``reset_state`` for the built-in metrics, run now on arrays),
``MeanMetricWrapper``, and the expression helpers the metric families share
(labels aligned as Keras does, confusion counts at thresholds). See
tessera.nn.metrics for what a metric's expressions are."""

from __future__ import annotations

import inspect
import numbers
from typing import Callable, List, Optional, Sequence

import numpy as np

from ._config import Configurable
from .functional import _placeholders, write_traced
from .layers.base import _snake
from .program_constants import compile_program
from .sample_weights import squeeze_or_expand_shapes
from .symbolic import KerasTensor, next_name
from .variables import Variable, collecting_updates, tracing

_EPS = 1e-7  # Keras's backend.epsilon()
_F64 = '"float64"'


def _num(x) -> str:
    return repr(float(x))


def _f64(expr: str) -> str:
    return f"astype({expr}, {_F64})"


def _like(y: str, p: str) -> str:
    """The labels in the output's dtype, of the output's rank when they differ
    by a last axis of 1 (Keras's squeeze_or_expand_to_same_rank); otherwise
    as they are (broadcasting)."""
    return (f"(lambda(t, if(ndim(t) == ndim({p}) - 1 && shape({p})[-1] == 1, expand_dims(t, -1), "
            f"if(ndim(t) == ndim({p}) + 1 && shape(t)[-1] == 1, squeeze(t, -1), t))))"
            f"(astype({y}, dtype_name({p})))")


def _sparse(y: str, p: str) -> str:
    """Integer class labels shaped like the output without its class axis."""
    return f"reshape(astype({y}, \"int64\"), shape({p})[:-1])"


class Metric(Configurable):
    """A metric: ``expressions(y, p, w)`` (sums over a batch, float64) and
    ``result(totals)`` (the metric from their sums over batches).

    A user's metric subclasses it as in Keras: state variables made with
    ``add_variable`` (or ``add_weight``), ``update_state(y_true, y_pred,
    sample_weight=None)``, ``result()`` and ``reset_state()`` (default: the
    variables to zeros). Called on arrays it runs now. In ``compile(metrics=)``
    its ``update_state`` is traced into the training and evaluation programs:
    each ``assign_add``/``assign_sub`` of a state variable becomes the batch's
    increment, summed over the epoch's batches (and the processes of a
    data-parallel run) in the program; at the end of the logged interval the
    variables hold ``reset_state()``'s values plus the sums and ``result()``
    runs on them. An update that is not a sum (``assign`` of a batch's value)
    cannot be accumulated that way and is refused with the metric's name."""

    name = "metric"

    def __init__(self, name: Optional[str] = None, dtype=None):
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ValueError(f"[{type(self).__name__}] name must be a non-empty string, got "
                                 f"{name!r}")
            self.name = name
        elif self._stateful() and type(self).name == "metric":
            self.name = _snake(type(self).__name__)
        self.dtype = dtype

    # ------------------------------------------------------------ Keras's API
    def _stateful(self) -> bool:
        """A Keras-style metric: it defines update_state."""
        return type(self).update_state is not Metric.update_state

    def add_variable(self, shape=(), initializer="zeros", dtype=None, aggregation="sum",
                     name=None):
        """A state variable (Keras's Metric.add_variable)."""
        if aggregation not in ("sum", "mean", None, "none"):
            raise ValueError(f"[{type(self).__name__}.add_variable] aggregation="
                             f"{aggregation!r} is not supported (state is summed)")
        v = Variable(initializer if initializer is not None else "zeros",
                     shape=tuple(shape or ()), dtype=dtype or "float32",
                     name=name or next_name("variable"))  # Keras's auto_name
        v._owner_name = self.name
        self.__dict__.setdefault("_state", []).append(v)
        return v

    def add_weight(self, shape=(), initializer=None, dtype=None, name=None):
        return self.add_variable(shape, initializer, dtype, "sum", name)

    @property
    def variables(self) -> list:
        return list(self.__dict__.get("_state", []))

    def update_state(self, y_true=None, y_pred=None, sample_weight=None, **kwargs):
        """A built-in metric used standalone, as Keras's: the batch's sums (its
        ``expressions``) run now on the arrays and added to the metric's totals,
        which ``result()`` turns into the metric. (A user's subclass defines its
        own update_state.)"""
        if type(self).expressions is Metric.expressions:
            raise NotImplementedError(f"[{type(self).__name__}] a Metric subclass must define "
                                      "update_state(self, y_true, y_pred, sample_weight=None)")
        where = f"{type(self).__name__}.update_state"
        if kwargs or y_true is None or y_pred is None:
            raise TypeError(f"[{where}] takes (y_true, y_pred, sample_weight=None), got "
                            f"{sorted(kwargs) or 'no y_true or y_pred'}")
        p = np.asarray(y_pred)
        p = p if p.dtype in (np.float32, np.float64) else p.astype(np.float32)
        y = np.asarray(y_true)
        if p.ndim == 0 or y.ndim == 0 or len(y) != len(p):
            raise ValueError(f"[{where}] y_true and y_pred must hold the same number of samples "
                             f"(batch first), got shapes {y.shape} and {p.shape}")
        check = getattr(self, "_check_eager_shapes", None)
        if check is not None:
            check(p.shape[1:])
        args = [np.ascontiguousarray(y), np.ascontiguousarray(p)]
        if sample_weight is not None:
            w = np.asarray(sample_weight, dtype=np.float32)
            w = np.broadcast_to(w, (len(p),)) if w.ndim == 0 else w
            if w.ndim > 1 and isinstance(self, MeanMetricWrapper):
                w = _entry_weights(w, p)
            if w.ndim > 1 and w.shape[1:] == (1,) * (w.ndim - 1):
                w = w.reshape(len(w))
            if w.shape != (len(p),) and not (w.ndim > 1 and isinstance(self, MeanMetricWrapper)):
                raise ValueError(f"[{where}] sample_weight must hold one weight per sample "
                                 f"({len(p)}), got shape {np.shape(sample_weight)}")
            args.append(np.ascontiguousarray(w))
        weighted = len(args) == 3
        programs = self.__dict__.setdefault("_eager_programs", {})
        if weighted not in programs:
            exprs = self.expressions("y", "p", "w" if weighted else None)
            programs[weighted] = compile_program(
                f"lambda(y, p{', w' if weighted else ''}, list({', '.join(exprs)}))",
                f"<{where}>")
        sums = [np.asarray(v, np.float64) for v in programs[weighted].run(args)]
        old = self.__dict__.get("_eager_totals")
        self.__dict__["_eager_totals"] = sums if old is None else [a + b for a, b in
                                                                    zip(old, sums)]

    def reset_state(self):
        """The state variables back to zeros (Keras's default); a built-in
        metric's standalone totals cleared."""
        self.__dict__.pop("_eager_totals", None)
        for v in self.variables:
            v.assign(np.zeros(v.shape, dtype=v.value.dtype))

    def __init_subclass__(cls, **kwargs):
        """A built-in metric's result(totals) also answers Keras's result():
        the metric of the standalone totals (0.0 before any update_state)."""
        super().__init_subclass__(**kwargs)
        fn = cls.__dict__.get("result")
        if fn is not None and "update_state" not in cls.__dict__ and \
                cls.update_state is Metric.update_state:
            def result(self, totals=None, _fn=fn):
                if totals is None:
                    totals = self.__dict__.get("_eager_totals")
                    if totals is None:
                        return np.float32(0.0)
                return _fn(self, totals)

            result.__doc__, result.__name__ = fn.__doc__, "result"
            cls.result = result

    def reset_states(self):
        self.reset_state()

    def __call__(self, *args, **kwargs):
        """update_state, then result() (Keras's metric(y_true, y_pred))."""
        self.update_state(*args, **kwargs)
        return self.result()

    def stateless_result(self, totals):
        """result() of the state reset_state() gives plus `totals` (a
        compiled model's sums of each variable's increments)."""
        self.reset_state()
        for v, t in zip(self.variables, totals):
            try:
                inc = np.broadcast_to(np.asarray(t), v.shape)
            except ValueError:
                raise ValueError(f"[{self.name}] update_state adds values of shape "
                                 f"{np.shape(t)} to the variable {v.name} of shape {v.shape}"
                                 ) from None
            v.assign(v.value + inc)
        return np.asarray(self.result())

    def expressions_for(self, y, p, w, ctx, label_spec, out_shape, w_shape=None) -> List[str]:
        """The metric's sums as a model's programs write them. w_shape: the sample
        weights' shape as the user gave them, but the batch axis (None: one per sample);
        update_state sees them so, as in Keras, reshaped from the program's `w` (the
        same weights, their axes of 1 squeezed)."""
        if not self._stateful():
            return self.expressions(y, p, w)
        shape, dtype = label_spec
        shapes = [(None,) + tuple(shape), (None,) + tuple(out_shape)]
        dtypes = [dtype, "float32"]
        if w is not None:
            w_shape = tuple(w_shape or ())
            shapes.append((None,) + w_shape)
            dtypes.append("float32")
            if w_shape:
                w = f"reshape({w}, {[-1] + list(w_shape)})"
        ph = _placeholders(shapes, dtypes)
        with collecting_updates() as record, tracing():
            try:
                self.update_state(ph[0], ph[1], ph[2] if w is not None else None)
            except (ValueError, TypeError) as e:
                raise type(e)(f"{e} (in {type(self).__name__}.update_state, metric "
                              f"{self.name!r})") from None
        exprs, states = [], self.variables
        for v in states:
            entry = record.get(id(v))
            if entry is not None and entry[2]:
                raise ValueError(
                    f"[{self.name}] {type(self).__name__}.update_state assigns the state "
                    f"variable {v.name!r} (assign): in fit and evaluate tessera sums each "
                    "batch's increments in the program, so state must change by "
                    "assign_add/assign_sub only")
            incs = [] if entry is None else entry[1]
            exprs.append([(sign, inc) for sign, inc in incs])
        unknown = [e[0].name for k, e in record.items() if all(k != id(v) for v in states)]
        if unknown:
            raise ValueError(f"[{self.name}] update_state changes variables {unknown} that are "
                             "not this metric's (make them with self.add_variable)")
        outs, consts = [], []
        for incs in exprs:
            sym = [(sg, i) for sg, i in incs if isinstance(i, KerasTensor)]
            const = sum(sg * float(np.sum(i)) for sg, i in incs
                        if not isinstance(i, KerasTensor))
            consts.append(const)
            outs.append(sym)
        flat = [i for sym in outs for _, i in sym]
        written = iter(write_traced(flat, ph, [y, p] + ([w] if w is not None else []), ctx)
                       if flat else [])
        result = []
        for v, sym, const in zip(states, outs, consts):
            terms = [f"{'-' if sg < 0 else ''}astype({next(written)}, {_F64})" for sg, _ in sym]
            terms.append(f"zeros({list(v.shape)}, dtype={_F64}) + {_num(const)}")
            result.append(" + ".join(terms))
        return result

    # ------------------------------------------------------------ compiled form
    def expressions(self, y: str, p: str, w: Optional[str] = None) -> List[str]:
        raise NotImplementedError

    def result(self, totals: Sequence) -> float:
        raise NotImplementedError

    def get_config(self) -> dict:
        if self._stateful():
            return {"name": self.name, "dtype": self.dtype}
        return {"class": type(self).__name__, "name": self.name}

    @classmethod
    def from_config(cls, config):
        if cls.update_state is Metric.update_state:
            return super().from_config.__func__(cls, config)
        config = {k: v for k, v in dict(config).items() if k != "class"}
        params = inspect.signature(cls.__init__).parameters
        if not any(q.kind == q.VAR_KEYWORD for q in params.values()):
            config = {k: v for k, v in config.items() if k in params}
        return cls(**config)

    def __repr__(self):
        if self._stateful():
            return f"<{type(self).__name__} name={self.name}>"
        return super().__repr__()



# --------------------------------------------------------------------------- mean metrics


def _entry_weights(w: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Temporal weights of a mean metric's values (the output's shape but its last axis),
    as Keras's reduce_to_samplewise_values takes them: a last axis of 1 squeezed, then
    broadcast to the values' leading axes; other shapes are left for the caller's error."""
    values = p.shape[:-1] if p.ndim > 1 else p.shape
    v, ws = squeeze_or_expand_shapes(values, w.shape)
    if len(ws) > len(v) or any(b not in (1, a) for a, b in zip(v, ws)):
        return w
    return np.broadcast_to(w.reshape(ws), v[:len(ws)])


class MeanMetricWrapper(Metric):
    """The weighted mean over the samples of per-sample values.
    ``fn(y, p, **kwargs)`` returns an expression of the values, shaped
    (batch, ...) (any axes after the batch are averaged, as Keras does)."""

    def __init__(self, fn: Callable[..., str], name: Optional[str] = None, **kwargs):
        if not callable(fn):
            raise TypeError(f"[MeanMetricWrapper] fn must be a callable (y, p) -> expression, "
                            f"got {fn!r}")
        super().__init__(name if name is not None else getattr(fn, "__name__", "mean_metric"))
        self._fn = fn
        self._fn_kwargs = kwargs

    def values(self, y: str, p: str) -> str:
        """The expression of the per-sample values."""
        return self._fn(y, p, **self._fn_kwargs)

    def expressions(self, y, p, w=None):
        per_sample = f"mean(batch_flatten({_f64(self.values(y, p))}), axis=1)"
        if w is None:
            return [f"sum({per_sample})",
                    f"zeros(list(), dtype={_F64}) + shape({p})[0]"]
        # temporal weights (batch, steps, ...): Keras's reduce_to_samplewise_values, the
        # values averaged down to the weights' rank, each sample's weighted values and
        # weights averaged over its entries
        vals = f"mean(reshape({_f64(self.values(y, p))}, concatenate(list(shape({w}), " \
               "zeros(1, dtype=\"int64\") - 1))), axis=-1)"
        entries = f"(astype(size({w}), {_F64}) / astype(shape({w})[0], {_F64}))"
        return [f"if(ndim({w}) > 1, sum({vals} * {_f64(w)}) / {entries}, "
                f"sum({per_sample} * {_f64(w)}))",
                f"if(ndim({w}) > 1, sum({_f64(w)}) / {entries}, sum({_f64(w)}))"]

    def result(self, totals):
        total, count = (float(np.asarray(t)) for t in totals)
        return total / count if count else 0.0

    def get_config(self):
        if type(self) is MeanMetricWrapper:
            raise TypeError(f"[MeanMetricWrapper.get_config] a metric of a Python function "
                            f"({self._fn!r}) cannot be serialized")
        return super().get_config()


class _Builtin(MeanMetricWrapper):
    """A mean metric whose values are a method of the class."""

    def __init__(self, name: Optional[str] = None):
        super().__init__(self._values, name if name is not None else type(self).name)

    def _values(self, y, p):
        raise NotImplementedError


# --------------------------------------------------------------------------- confusion counts

_NEG_INF = -1e10  # Keras's metrics_utils.NEG_INF


def _thresholds(cls: str, thresholds, default: float) -> List[float]:
    if thresholds is None:
        return [default]
    values = [thresholds] if isinstance(thresholds, numbers.Real) else list(thresholds)
    out = []
    for t in values:
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not 0 <= t <= 1:
            raise ValueError(f"[{cls}] thresholds must be numbers in [0, 1], got {thresholds!r}")
        out.append(float(t))
    if not out:
        raise ValueError(f"[{cls}] thresholds must not be empty")
    return out


def _flat_parts(y: str, p: str, w: Optional[str], top_k, class_id, from_logits=False):
    """Flattened predictions, 0/1 labels (float64) and weights (float64, each
    sample's weight for all its outputs), as Keras's confusion counts use."""
    t = _like(y, p)
    q = f"sigmoid({p})" if from_logits else p
    if top_k is not None:
        # Keras's _filter_top_k: outputs outside each sample's top k (ties by
        # lower index, like top_k) become -1e10.
        kth = f"expand_dims(take(sort({q}, axis=-1), -{top_k}, axis=-1), -1)"
        above, tie = f"({q} > {kth})", f"({q} == {kth})"
        need = f"({top_k} - sum({above}, axis=-1, keepdims=true))"
        keep = f"logical_or({above}, logical_and({tie}, cumsum({tie}, axis=-1) <= {need}))"
        q = f"where({keep}, {q}, {_num(_NEG_INF)})"
    if class_id is not None:
        q, t = f"take({q}, {class_id}, axis=-1)", f"take({t}, {class_id}, axis=-1)"
    preds = f"ravel({_f64(q)})"
    labels = f"ravel(astype({t} != 0, {_F64}))"
    ones = f"ones_like({q}, dtype={_F64})"
    weights = f"ravel({ones})" if w is None else f"ravel(transpose(transpose({ones}) * {_f64(w)}))"
    return preds, labels, weights


def _counts(thresholds: Sequence[float], kinds: str, preds, labels, weights) -> str:
    """One expression: a float64 array (len(kinds), len(thresholds)) of the
    weighted counts (kinds from 'tp', 'fp', 'tn', 'fn'), thresholds compared
    directly (prediction > threshold)."""
    ts = "array([" + ", ".join(_num(t) for t in thresholds) + "])"
    rows = {"tp": "sum(g * l * v, axis=1)", "fp": "sum(g * (1.0 - l) * v, axis=1)",
            "tn": "sum((1.0 - g) * (1.0 - l) * v, axis=1)", "fn": "sum((1.0 - g) * l * v, axis=1)"}
    body = f"stack(list({', '.join(rows[k] for k in kinds)}))"
    greater = f"astype(reshape(q, list(1, -1)) > reshape({ts}, list(-1, 1)), {_F64})"
    return (f"(lambda(q, l, v, (lambda(g, {body}))({greater})))"
            f"({preds}, {labels}, {weights})")


def _bucket_counts(n: int, preds, labels, weights) -> str:
    """Keras's optimized confusion counts at n evenly spaced thresholds (the
    ends -1e-7 and 1 + 1e-7): a float64 array (4, n) of tp, fp, tn, fn."""
    idx = f"astype(maximum(ceil(clip(q, 0.0, 1.0) * {_num(n - 1)}) - 1.0, 0.0), \"int64\")"
    tp = f"flip(cumsum(flip(bincount(i, weights=l * v, minlength={n}))))"
    fp = f"flip(cumsum(flip(bincount(i, weights=(1.0 - l) * v, minlength={n}))))"
    body = ("stack(list(tp, fp, sum((1.0 - l) * v) - fp, sum(l * v) - tp))")
    return (f"(lambda(q, l, v, (lambda(i, (lambda(tp, fp, {body}))({tp}, {fp})))({idx})))"
            f"({preds}, {labels}, {weights})")


def _divide_no_nan(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=b != 0)
