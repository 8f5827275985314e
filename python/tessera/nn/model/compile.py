"""compile() and the data checks of fit, evaluate and predict."""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from .. import losses as _losses
from .. import metrics as _metrics
from ..build_shapes import built_on
from ..given_batches import GivenBatches
from ..keras_objects import deserialize_keras_object, serialize_keras_object
from ..metric_programs import _function_metric
from ..optimizer_variables import attach_model
from ..registry import is_model
from ..sample_weights import (UNREAD, check_fit_weights, class_weights_of, per_entry_shape,
                              per_output_given)
from ..step_overrides import (compiled_loss_tensor, compiled_loss_value, overridden_step,
                              overrides_compute_loss, refuse_unshaped_step_data, symbolic_args)
from ..string_inputs import apply_fronts, apply_group_fronts
from ..symbolic import user_location
from ..utils import PyDataset
from ._common import OutputLoss, _as_list, _Compiled, _optimizer


def _map_batches(ds, fn):
    """`ds` with `fn` applied to each batch's arrays: a PyDataset's batches (GivenBatches)
    as they are read, a Dataset by its map."""
    if isinstance(ds, GivenBatches):
        read = ds._read_epoch
        return GivenBatches(fn(*ds._first), lambda epoch, start: (
            (i, fn(*arrays)) for i, arrays in read(epoch, start)), ds._n, ds.what, ds._where)
    return ds.map(fn)


def _adjust_rank(a, shape):
    """Keras's functional models take an input one axis short of its Input when that
    Input's last axis is 1 (MNIST's (n, 28, 28) into Input((28, 28, 1))), and one axis
    too many when that axis is 1: the array given the Input's rank."""
    if a.ndim == len(shape) - 1 and shape[-1] == 1:
        return a[..., None]
    if a.ndim == len(shape) + 1 and a.shape[-1] == 1:
        return a[..., 0]
    return a


def _same_rank_labels(a, out_shape):
    """Keras's loss functions get labels of the output's rank
    (squeeze_or_expand_to_same_rank): (n,) labels of a (n, 1) output become
    (n, 1) (siamese_contrastive's `(1 - y_true) * ops.square(y_pred)` would
    otherwise broadcast to (n, n)); labels with one axis more, of length 1,
    lose it."""
    rank = len(out_shape) + 1
    if a.ndim == rank - 1 and rank > 1 and out_shape[-1] == 1 and \
            tuple(a.shape[1:]) == tuple(out_shape[:-1]):
        # (n,) labels of a (n, 1) output; (n, 28, 28) images of a (n, 28, 28, 1) one (Keras
        # squeezes the output instead: the same elementwise terms)
        return a[..., None]
    if a.ndim == rank + 1 and a.shape[-1] == 1 and rank > 1:
        return a[..., 0]
    return a


def _broadcasts_to(shape, target) -> bool:
    """Whether a sample shape broadcasts to the output's (NumPy's rules, same rank)."""
    return len(shape) == len(target) and all(a in (1, b) for a, b in zip(shape, target))

def _one_outputs_list(sample_weight, n_out: int):
    """A model of one output given its weights in a list (or tuple) of one array, as Keras
    takes them (one per output): that array (or None). A list of numbers stays one array."""
    if n_out == 1 and isinstance(sample_weight, (list, tuple)) and len(sample_weight) == 1 \
            and (sample_weight[0] is None or isinstance(sample_weight[0], np.ndarray)):
        return sample_weight[0]
    return sample_weight


def _refuse_bad_weights(sw, where: str, what: str):
    """Weights must be finite and non-negative: the first that is not, named."""
    bad = ~np.isfinite(sw) | (sw < 0)
    if bad.any():
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        at = i[0] if len(i) == 1 else i
        raise ValueError(f"[{where}] {what}[{at}] is {sw[i]}: weights must be finite and "
                         f"non-negative (at {user_location()})")


class CompileMixin:
    """Model.compile and the checks of what fit, evaluate and predict receive
    (inputs, labels, sample weights, datasets), mixed into Model."""

    # Keras's: fit and evaluate run the step on each batch's values (model/eager.py), for
    # debugging; set by compile or as an attribute
    run_eagerly = False
    # Keras's flag (its "auto" resolves to True on JAX); tessera's programs are compiled
    # either way: False changes nothing
    jit_compile = True

    # ------------------------------------------------------------------ compile

    def compile(self, optimizer="adam", loss=None, metrics=None,
                loss_weights=None, weighted_metrics=None, run_eagerly=None, jit_compile=None,
                steps_per_execution=None):
        """Chooses the optimizer, the loss (one, or one per output as a list or
        a dict by output layer name; None, Keras's default: only the losses the
        layers add with add_loss) and the metrics (names, Metric objects or
        functions of (y_true, y_pred); a list, or per output)."""
        n_out = len(self._outputs) if self._outputs else 1
        given = self._per_output(loss, "loss", n_out)
        losses = [self._get_loss(l) for l in given]
        if loss_weights is None:
            loss_weights = [1.0] * n_out
        else:
            loss_weights = [float(w) for w in self._per_output(loss_weights, "loss_weights",
                                                               n_out)]
        # Keras's model.metrics holds a CompileMetrics when metrics were given
        self.__dict__["_metrics_given"] = metrics is not None or weighted_metrics is not None
        mets = self._metrics_per_output(metrics, "metrics", losses, n_out)
        # Keras's weighted_metrics: weighted by sample_weight (metrics= are not),
        # after the plain ones of each output
        wmets = self._metrics_per_output(weighted_metrics, "weighted_metrics", losses, n_out)
        self._compiled = _Compiled(_optimizer(optimizer), losses, loss_weights,
                                   [a + b for a, b in zip(mets, wmets)])
        self._compiled.weighted = [[False] * len(a) + [True] * len(b)
                                   for a, b in zip(mets, wmets)]
        if sum(l is not None for l in losses) > 1:  # Keras logs each output's loss too
            # (when several outputs have one: loss=[fn, None] logs "loss" only)
            names = self._loss_log_names(given, losses)
            self._compiled.output_losses = [OutputLoss(k, f"{names[k]}_loss")
                                            for k, l in enumerate(losses) if l is not None]
        # exclude_from_weight_decay names Variables: the optimizer finds the
        # Variable of a program's weight through the model (held weakly)
        model = weakref.ref(self)
        self._compiled.optimizer._variable_of = \
            lambda v: model()._variable_of_weight(v) if model() is not None else None
        self._compiled.optimizer._iterations_of = \
            lambda: model()._iteration if model() is not None else 0
        attach_model(self._compiled.optimizer, self)  # its state as Keras's `variables`
        self._compiled.given_loss = loss
        self.__dict__.pop("_loss_set", None)  # compile's loss, as Keras sets model.loss
        self.run_eagerly = bool(run_eagerly)
        if jit_compile in (None, "auto"):
            jit_compile = not self.run_eagerly
        elif jit_compile and self.run_eagerly:  # (Keras's warning)
            warnings.warn("If `run_eagerly` is True, then `jit_compile` cannot also be True. "
                          "Disabling `jit_compile`.", stacklevel=2)
            jit_compile = False
        self.jit_compile = bool(jit_compile)
        self._compile_args = {"optimizer": optimizer, "loss": loss, "metrics": metrics,
                              "loss_weights": loss_weights}
        if weighted_metrics is not None:
            self._compile_args["weighted_metrics"] = weighted_metrics
        self._programs.clear()
        for traced in ("_loss_traces", "_step_traces"):  # overrides traced again (step_overrides)
            self.__dict__.pop(traced, None)
        self._opt_state = None
        self._iteration = 0
        self._lr_override = None
        return self

    def _metrics_per_output(self, metrics, what: str, losses, n_out: int) -> list:
        """compile's metrics= (or weighted_metrics=) as a list of Metric
        objects per output: a list for every output, a list of lists or a
        dict by output name for each."""
        if metrics is None:
            metrics = ()
        if what == "weighted_metrics" and not isinstance(metrics, (list, tuple, dict)):
            raise TypeError(f"[compile] {what} must be a list, a tuple or a dict, got "
                            f"{metrics!r} (of type {type(metrics).__name__})")
        if isinstance(metrics, dict) or (n_out > 1 and isinstance(metrics, (list, tuple)) and
                                         metrics and isinstance(metrics[0], (list, tuple))):
            per = self._per_output(metrics, "metrics", n_out)
        else:
            per = [list(_as_list(metrics)) if k == 0 or n_out > 1 else [] for k in range(n_out)]
            if n_out > 1:
                per = [list(_as_list(metrics))] * n_out
        return [[self._get_metric(m, losses[k], k) for m in (ms or [])]
                for k, ms in enumerate(per)]

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras's Model.compute_loss: the step's loss from compile's losses
        (each times its loss weight), the losses the layers add and the
        regularizers. fit and evaluate call a subclass's override on
        symbolic values and train on what it returns (docs/nn.md, "Custom
        training"); there, `super().compute_loss(...)` is this default. On
        arrays (outside fit): compile's losses of the arrays, now."""
        del x, training  # (Keras's default reads neither)
        if symbolic_args(y, y_pred, sample_weight):
            return compiled_loss_tensor(self, y, y_pred, sample_weight)
        return compiled_loss_value(self, y, y_pred, sample_weight)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Keras's Model.compute_metrics: compile's metrics updated with (y,
        y_pred), then get_metrics_result(). fit and evaluate call a subclass's
        override (after the loss tracker's update, as Keras's steps) on
        symbolic values, and log the dict it returns (docs/nn.md, "Custom
        training"); there, `super().compute_metrics(...)` is this default."""
        del x  # (Keras's default does not read it)
        _, compiled = self._trackers() if self._compiled else (None, None)
        if compiled is not None:
            compiled.update_state(y, y_pred, sample_weight)
        return self.get_metrics_result()

    def get_metrics_result(self) -> dict:
        """Keras's: {name: result} of every metric in model.metrics (the
        compiled metrics' dict merged in)."""
        out = {}
        for m in self.metrics:
            r = m.result() if callable(m.result) else m.result
            if isinstance(r, dict):
                out.update(r)
            else:
                out[m.name] = r
        return out

    def get_compile_config(self):
        """Keras's: the arguments compile was given, serialized
        (serialize_keras_object), or None before compile. model.save keeps
        what it returns (serialized) when the model's class overrides it or
        compile_from_config; load_model then passes that to
        compile_from_config."""
        args = self.__dict__.get("_compile_args")
        return None if args is None else serialize_keras_object(args)

    def compile_from_config(self, config):
        """Keras's: compiles the model with get_compile_config's arguments,
        deserialized (load_model calls it once the model is built, before
        its weights are set)."""
        if config:
            self.compile(**deserialize_keras_object(config))

    def _compile_hook_config(self):
        """get_compile_config's result, serialized, when the model's class
        overrides it or compile_from_config (else None: model.save keeps the
        compile settings its own way)."""
        cls = type(self)
        if cls.get_compile_config is CompileMixin.get_compile_config and \
                cls.compile_from_config is CompileMixin.compile_from_config:
            return None
        return serialize_keras_object(self.get_compile_config())

    def _output_names(self) -> list:
        if getattr(self, "_output_keys", None):
            return list(self._output_keys)
        names = []
        for t in self._outputs:
            node = t.args[0] if t.op == "item" else t
            layer = node.args[0] if node.op == "layer" else None
            names.append(layer.name if layer is not None else f"output_{len(names)}")
        return names

    def _loss_log_names(self, given: list, losses: list) -> list:
        """The names of the outputs' losses in the logs (before "_loss"), as Keras's
        CompileLoss: a functional model's output names (a dict's keys); a subclassed
        model has no output_names, so each is its loss's: the name given ("mse"), the
        Loss object's (`mean_squared_error`, `name=`) or the function's."""
        if "_output_names_set" in self.__dict__:
            return list(self.__dict__["_output_names_set"])
        if self._functional or getattr(self, "_output_keys", None):
            return self._output_names()
        return [g if isinstance(g, str) else getattr(l, "name", None) or
                getattr(g, "__name__", type(g).__name__)
                for g, l in zip(given, losses)]

    def _per_output(self, v, what: str, n: int) -> list:
        if isinstance(v, dict):
            names = self._output_names()
            unknown = sorted(set(v) - set(names))
            if unknown:
                raise ValueError(f"[compile] {what} names outputs {unknown} the model does not "
                                 f"have; its outputs are {names}")
            return [v.get(k) for k in names]
        if isinstance(v, (list, tuple)) and what != "metrics" or (
                what == "metrics" and isinstance(v, (list, tuple))):
            if len(v) != n:
                raise ValueError(f"[compile] {what} has {len(v)} entries for a model with {n} "
                                 "outputs")
            return list(v)
        return [v] * n

    def _get_loss(self, loss):
        if loss is None:
            return None
        if callable(loss) and not isinstance(loss, (_losses.Loss, str)) and \
                getattr(loss, "_tessera_loss", None) is None:  # not keras.losses.mse & co
            return _losses.FunctionLoss(loss)
        return _losses.loss_object(loss)

    def _get_metric(self, m, loss, k):
        if callable(m) and not isinstance(m, (str, _metrics.Metric)):
            return _function_metric(m)
        p_shape = tuple(self._outputs[k].shape) if self._outputs else None
        try:
            return _metrics.get(m, loss=loss, p_shape=p_shape)
        except ValueError as e:
            raise ValueError(f"[compile] {e}") from None

    @property
    def optimizer(self):
        return self._compiled.optimizer if self._compiled else None

    # ------------------------------------------------------------------ data

    def _ensure_built(self, xs):
        if self.built and self._inputs:
            return
        if is_model(self, "Sequential") or not self._functional:
            shapes = [tuple(a.shape[1:]) for a in xs]
            # a subclassed model's call sees integer data as int32, as Keras traces it on
            # the batch (gat_node_classification's `ops.take(outputs, indices)`)
            with built_on(self, xs):
                self.build(shapes if len(shapes) > 1 else shapes[0])

    def _compiled_for_outputs(self):
        """compile before a subclassed model knew its outputs (it is built by its
        first fit): compile's settings, made for one output, are made again for
        each output the call returned (real_nvp's `(x, log_det)`), as Keras builds
        its CompileLoss and CompileMetrics at the first step; the optimizer kept."""
        c = self._compiled
        n = len(self._outputs)
        if c is None or n <= 1 or len(c.losses) == n:
            return
        args = dict(self._compile_args)
        if isinstance(args.get("loss"), (list, tuple)):
            raise ValueError(f"[compile] loss has {len(args['loss'])} entries for a model with "
                             f"{n} outputs")
        weights = args.get("loss_weights")
        if weights is not None and len(weights) == 1 and weights[0] == 1.0:
            args["loss_weights"] = None  # compile's default, spread
        args["optimizer"] = c.optimizer
        given = self._compile_args
        CompileMixin.compile(self, **args)
        self._compile_args = given

    def _no_labels(self, n, where):
        """fit(x) without y, as Keras's: allowed when no compiled loss or metric
        reads labels (the loss is the layers' add_loss terms); the program then
        gets placeholder labels it does not read."""
        self._compiled_for_outputs()
        c = self._compiled
        # (a compute_loss override gets y=None, as Keras gives it: ddim's noise loss)
        own_step = overridden_step(self, {"fit": "train_step", "evaluate": "test_step"}.get(
            where, "")) or overrides_compute_loss(self)
        if not own_step and (c is None or any(l is not None for l in c.losses) or c.has_metrics):
            raise ValueError(f"[{where}] y (the labels) is required with array inputs: the "
                             "compiled loss or metrics read them")
        ys = [np.zeros((n,) + tuple(1 if d is None else d for d in t.shape[1:]), np.float32)
              for t in self._outputs]
        return ys if len(ys) > 1 else ys[0]

    def _build_from_first_batch(self, x, where):
        """A subclassed model not yet built, given a PyDataset whose batches' x is a
        list, tuple or dict of inputs (transformer_asr's `((source, target_in), y)`):
        built from the first batch, as Keras's first step builds it, so that its
        batches are flattened by the model's inputs (they could not be taken as given)."""
        if self._inputs or self._functional or is_model(self, "Sequential") or \
                not isinstance(x, PyDataset) or not x.num_batches:
            return
        b = x[0]
        b = tuple(b) if isinstance(b, list) else b
        first = b[0] if isinstance(b, tuple) and b else None
        if isinstance(first, (list, tuple, dict)):
            self._prepare_x(first, where)

    def _batch_form(self, where):
        """How fit, evaluate and predict flatten a PyDataset's batch, as Keras's
        adapters: a list is a tuple, a tuple is (x, y[, sample_weight]); x a dict, list
        or tuple of the model's inputs gives them in the model's order (captcha_ocr's
        {"image", "label"} batches), y a dict or list its outputs' labels; a batch of x
        alone gets placeholder labels in fit and evaluate when no loss or metric reads
        any (a model trained by add_loss). None before the model is built (its
        batches taken as given)."""
        if not self._inputs:
            return None

        def form(b):
            if isinstance(b, list):
                b = tuple(b)
            parts = list(b) if isinstance(b, tuple) else [b]
            x = parts[0]
            xs = self._prepare_x(x, where) if isinstance(x, (dict, list, tuple)) else \
                [np.asarray(x)]
            if where == "predict":
                return xs
            refuse_unshaped_step_data(self, xs, where)
            y = parts[1] if len(parts) > 1 else None
            if y is None:
                ys = _as_list(self._no_labels(len(xs[0]), where))
            elif isinstance(y, (dict, list, tuple)):
                ys = self._prepare_y(y, len(xs[0]), where)
            else:
                ys = [np.asarray(y)]
            w = _one_outputs_list(parts[2], len(ys)) if len(parts) > 2 else None
            if len(ys) > 1 and per_output_given(w):  # (x, y, [w0, w1, ...]): per output
                sws = self._per_output_sw(w, ys, len(xs[0]), where, note=False)
                return xs + ys + ([] if sws is None else sws)
            return xs + ys + ([] if w is None else [np.asarray(w)])

        return form

    def _prepare_x(self, x, where: str) -> list:
        if x is None:
            raise ValueError(f"[{where}] x is required")
        if isinstance(x, dict) and not self._functional and not self._inputs \
                and not is_model(self, "Sequential"):
            self._build_for_dict(x, where)
        keys = self.__dict__.get("_input_keys")
        if isinstance(x, dict) and keys and all(k in x for k in keys):
            x = [x[k] for k in keys]  # Model({"a": ..., "b": ...}, ...): by those keys
        x = apply_fronts(self, x, where)
        x = apply_group_fronts(self, x, where)
        if isinstance(x, dict):  # by the Inputs' names (as Keras, also when keys were given)
            names = [t.name for t in self._inputs]
            missing = [n for n in names if n not in x]
            if missing or None in names:
                keyed = f" or keyed {keys}" if keys else ""
                raise ValueError(f"[{where}] x is a dict but the model's inputs are named "
                                 f"{names}{keyed} (missing {missing}; got {sorted(x)})")
            x = [x[n] for n in names]
        xs = [np.asarray(a) for a in _as_list(x)]
        for a in xs:
            if a.ndim == 0:
                raise ValueError(f"[{where}] x must have a batch axis, got a scalar")
            if a.dtype == object:
                raise TypeError(f"[{where}] x must hold numbers, got dtype object")
        self._ensure_built(xs)
        if len(xs) != len(self._inputs):
            raise ValueError(f"[{where}] the model has {len(self._inputs)} inputs, got "
                             f"{len(xs)} arrays")
        out = []
        # checked against the graph as recorded (a callback's predict inside fit finds the
        # model written for fit's concrete shape in force)
        for k, (a, t) in enumerate(zip(xs, self._general_graph()[0])):
            a = _adjust_rank(a, t.shape)
            if len(a.shape) != len(t.shape) or (not self._shapes_follow_data() and any(
                    d is not None and d != e for d, e in zip(t.shape[1:], a.shape[1:]))):
                which = f"x[{k}]" if len(xs) > 1 else "x"
                raise ValueError(f"[{where}] {which} has samples of shape {tuple(a.shape[1:])}, "
                                 f"but the model expects {tuple(t.shape[1:])}")
            want = t.dtype if not t.dtype.startswith("float") else self.dtype
            if np.issubdtype(np.dtype(want), np.integer):
                if not np.issubdtype(a.dtype, np.integer):
                    if np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and \
                            np.all(a == np.round(a)):
                        a = a.astype(np.int64)
                    else:
                        raise ValueError(f"[{where}] input {k} takes integers (dtype {t.dtype}), "
                                         f"got dtype {a.dtype} with non-integer values")
                a = a.astype(np.int64, copy=False)
            elif a.dtype != np.dtype(want):
                a = a.astype(want)
            out.append(a)
        n = len(out[0])
        for k, a in enumerate(out):
            if len(a) != n and not self.__dict__.get("_one_batch"):
                raise ValueError(f"[{where}] the inputs have different numbers of samples: "
                                 f"{[len(b) for b in out]} (every input needs one row per "
                                 "sample, as Keras's 'data cardinality')")
        return out

    def _prepare_y(self, y, n: int, where: str) -> list:
        self._compiled_for_outputs()
        if isinstance(y, dict):
            names = self._output_names()
            missing = [k for k in names if k not in y]
            if missing:
                raise ValueError(f"[{where}] y is a dict but misses outputs {missing} (outputs: "
                                 f"{names})")
            ys = [a if a is None else np.asarray(a) for a in (y[k] for k in names)]
        elif len(self._outputs) > 1:
            ys = [a if a is None else np.asarray(a)
                  for a in self._targets_of_reading_outputs(_as_list(y))]
        else:
            ys = [np.asarray(y)]
        ys = self._padded_labels(ys)
        if len(ys) != len(self._outputs):
            raise ValueError(f"[{where}] the model has {len(self._outputs)} outputs, got "
                             f"{len(ys)} label arrays")
        out = []
        own_loss = overridden_step(self, "compute_loss")
        for k, (a, loss) in enumerate(zip(ys, self._compiled.losses)):
            which = f"y[{k}]" if len(ys) > 1 else "y"
            if a is None:  # an output nothing reads labels of (no loss, no metric)
                out.append(np.zeros((n,), dtype=self.dtype))
                continue
            if a.ndim == 0 or len(a) != n:
                raise ValueError(f"[{where}] x and {which} have different numbers of samples: "
                                 f"{n} and {len(a) if a.ndim else 'a scalar'}")
            out_shape = tuple(self._outputs[k].shape[1:])
            if own_loss:  # a compute_loss override reads y as given (transformer_asr's
                # token ids, one-hot encoded and masked there): Keras checks nothing
                out.append(a.astype(self.dtype, copy=False) if a.dtype.kind == "f" else a)
                continue
            if loss is not None and loss.sparse_labels:
                a = self._check_sparse(a, loss.whole_output_shape(out_shape), which, where,
                                       loss)
            elif loss is not None and not isinstance(loss, _losses.FunctionLoss) and \
                    getattr(loss, "labels_like_output", True):
                a = _same_rank_labels(a, out_shape)
                if a.ndim == len(out_shape) + 1 and tuple(a.shape[1:]) != out_shape and \
                        loss.labels_broadcast and not loss._is_custom() and \
                        _broadcasts_to(a.shape[1:], out_shape):
                    # Keras's losses broadcast labels of the output's rank against it
                    # (a (n, 1) column against a (n, 2) output): the same values.
                    a = np.ascontiguousarray(np.broadcast_to(a, (len(a),) + out_shape))
                # a Loss subclass's call takes the labels as given (Keras checks nothing:
                # the NER example's integer tags against the softmax over the tags)
                if tuple(a.shape[1:]) != out_shape and not loss._is_custom():
                    raise ValueError(f"[{where}] {which} has samples of shape "
                                     f"{tuple(a.shape[1:])}, but the output "
                                     f"{self._output_names()[k]!r} has {out_shape} (the loss "
                                     f"{loss.name} compares them elementwise)")
                a = a.astype(self.dtype, copy=False)
                bad = ~np.isfinite(a)
                if bad.any():
                    i = int(np.argwhere(bad)[0][0])
                    raise ValueError(f"[{where}] {which}[{i}] (sample {i}) holds a NaN or "
                                     "infinite label")
            else:
                if isinstance(loss, _losses.FunctionLoss):
                    a = _same_rank_labels(a, out_shape)
                if a.dtype.kind == "f":
                    a = a.astype(self.dtype, copy=False)
            out.append(a)
        return out

    def _targets_of_reading_outputs(self, ys: list) -> list:
        """Keras's targets of a model of several outputs given fewer arrays than
        outputs: one per output that has a loss or metrics, in order (the
        miniature GPT's outputs [logits, embeddings] with loss=[fn, None] fit on
        one label array); None for the others. Other counts are left as given."""
        reading = [k for k, (loss, ms) in enumerate(zip(self._compiled.losses,
                                                        self._compiled.metrics))
                   if loss is not None or ms]
        if len(ys) == len(self._outputs) or len(ys) != len(reading):
            return ys
        full = [None] * len(self._outputs)
        for k, a in zip(reading, ys):
            full[k] = a
        return full

    def _check_sparse(self, a, out_shape, which, where, loss=None):
        """Integer labels, one per row of the output; class indices of the output's
        last axis unless the loss takes any integer (Circle: labels_are_classes)."""
        what = getattr(loss, "name", None) or "sparse_categorical_crossentropy"
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_)):
            if np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and \
                    np.all(a == np.round(a)):
                a = a.astype(np.int64)
            else:
                raise ValueError(f"[{where}] {what} needs integer class "
                                 f"labels in {which}, got dtype {a.dtype}")
        a = a.astype(np.int64, copy=False)
        if a.ndim == len(out_shape) + 1 and a.shape[-1] == 1 and out_shape[-1] != 1 and \
                a.shape[1:-1] == out_shape[:-1]:
            a = a.reshape(a.shape[:-1])
        if tuple(a.shape[1:]) != tuple(out_shape[:-1]):
            raise ValueError(f"[{where}] {which} has labels of shape {tuple(a.shape[1:])} per "
                             f"sample, but the output of shape {out_shape} needs "
                             f"{tuple(out_shape[:-1])} (one class index per row)")
        if not getattr(loss, "labels_are_classes", True):
            return a
        classes = out_shape[-1]
        bad = (a < 0) | (a >= classes)
        if bad.any():
            pos = np.argwhere(bad)[0]
            i = int(pos[0])
            raise ValueError(f"[{where}] {which}[{i}] (sample {i}) holds the label "
                             f"{int(a[tuple(pos)])}, outside the model's {classes} classes "
                             f"[0, {classes})")
        return a

    @staticmethod
    def _check_finite(xs, where: str):
        for k, a in enumerate(xs):
            if a.dtype.kind != "f":
                continue
            step = 65536
            for start in range(0, len(a), step):
                chunk = a[start:start + step]
                ok = np.isfinite(chunk).reshape(len(chunk), -1).all(axis=1)
                if not ok.all():
                    i = start + int(np.argmin(ok))
                    which = f"x[{k}]" if len(xs) > 1 else "x"
                    raise ValueError(f"[{where}] {which}[{i}] (sample {i}) holds a NaN or "
                                     "infinite value; clean the data or pass "
                                     "check_inputs=False")

    def _weighted_outputs(self, ys, n: int) -> list:
        """(k, loss, per-entry shape of its values) of each output with a loss."""
        losses = getattr(getattr(self, "_compiled", None), "losses", None) or []
        out = []
        for k, (o, loss) in enumerate(zip(self._outputs, losses)):
            if loss is None:
                continue
            y = ys[k] if k < len(ys) and ys[k] is not None else np.zeros((0,))
            out.append((k, loss, per_entry_shape(loss, y, tuple(o.shape[1:]), n)))
        return out

    def _prepare_sw(self, sample_weight, class_weight, ys, n, where):
        """The weights fit/evaluate give the programs, from sample_weight or class_weight
        as Keras's data adapter and losses take them (sample_weights.py); the shape given
        is kept for a Metric subclass's update_state, which Keras gives it as is."""
        self.__dict__["_sw_given"] = self.__dict__["_sw_key"] = None
        self.__dict__["_sw_held"] = self.__dict__["_sw_form"] = None
        where = self.__dict__.get("_sw_where") or where  # (train_on_batch runs fit)
        sample_weight = _one_outputs_list(sample_weight, len(ys))
        if sample_weight is not None and class_weight is not None:
            raise ValueError(f"[{where}] sample_weight and class_weight cannot be given "
                             "together (Keras: \"You cannot `class_weight` and "
                             "`sample_weight` at the same time\"); multiply the class "
                             f"weights into sample_weight (at {user_location()})")
        if sample_weight is None and class_weight is None:
            return None
        if len(ys) > 1 and class_weight is None and per_output_given(sample_weight):
            return self._per_output_sw(sample_weight, ys, n, where)
        if class_weight is not None:
            if len(ys) != 1:
                raise ValueError(f"[{where}] class_weight works with one output only, as "
                                 f"Keras (\"`class_weight` is only supported for Models with "
                                 f"a single output.\"), and the model has {len(ys)}; weigh "
                                 f"each output's samples with sample_weight=[w0, w1, ...] "
                                 f"(at {user_location()})")
            sw = class_weights_of(ys[0], class_weight, where)
        else:
            sw = np.asarray(sample_weight, dtype=np.float64)
        given = sw.shape
        sw = check_fit_weights(sw, n, self._weighted_outputs(ys, n), where,
                               "sample_weight" if class_weight is None else
                               "class_weight's weights")
        _refuse_bad_weights(sw, where, "sample_weight")
        self._note_sw_shape(tuple(given[1:]))
        self.__dict__["_sw_held"] = tuple(sw.shape[1:])
        return sw.astype(self.dtype)

    def _per_output_sw(self, sample_weight, ys, n, where, note=True):
        """sample_weight given per output, as Keras takes it: a list or tuple in the
        outputs' order (a dict-output model's: a dict by its keys), None for an output left
        unweighted. Each array is checked against its own output's loss (as one array is
        against the only output's); the programs get a list of them, an unweighted output's
        a placeholder of no entries (UNREAD); None when every entry is None. `note`: keep
        the shapes given (not for a PyDataset's batch: _dataset_weights keeps them)."""
        names = self._output_names()
        keyed = bool(getattr(self, "_output_keys", None))
        def shape(v):
            return None if v is None else np.shape(v)
        got = ("{" + ", ".join(f"{k!r}: {shape(v)}" for k, v in sample_weight.items()) + "}"
               if isinstance(sample_weight, dict) else
               "[" + ", ".join(str(shape(v)) for v in sample_weight) + "]")
        kind = type(sample_weight).__name__
        same = "You should provide one `sample_weight` array per output in `y`"
        if isinstance(sample_weight, dict) != keyed:
            want = (f"a dict by the outputs' keys {names}" if keyed else
                    f"a list in the outputs' order {names}")
            raise ValueError(f"[{where}] sample_weight is a {kind} ({got}) but the model's "
                             f"outputs are {'a dict' if keyed else 'a list'}: give {want} (or "
                             f"one array for every output), as Keras (\"{same}\") "
                             f"(at {user_location()})")
        if keyed:
            if set(sample_weight) != set(names):
                missing = [k for k in names if k not in sample_weight]
                extra = sorted(str(k) for k in sample_weight if k not in names)
                raise ValueError(f"[{where}] sample_weight is a dict ({got}) but the model's "
                                 f"outputs are {names}: missing {missing}, unknown {extra}; "
                                 f"give one entry per output (None: unweighted), as Keras "
                                 f"(\"{same}\") (at {user_location()})")
            given = [sample_weight[k] for k in names]
        else:
            given = list(sample_weight)
            if len(given) != len(ys):
                raise ValueError(f"[{where}] the model has {len(ys)} outputs {names}, got "
                                 f"{len(given)} sample_weight arrays (a {kind} of shapes "
                                 f"{got}): give one per output (None: that output "
                                 f"unweighted), as Keras (\"{same}\") (at {user_location()})")
        losses = {k: (k, loss, per) for k, loss, per in self._weighted_outputs(ys, n)}
        out, trailing, helds = [], [], []
        for k, w in enumerate(given):
            what = f"sample_weight[{names[k]!r}]" if keyed else f"sample_weight[{k}]"
            if w is None:
                out.append(np.zeros((n,) + UNREAD, dtype=self.dtype))
                trailing.append(None)
                helds.append(None)
                continue
            w = np.asarray(w, dtype=np.float64)
            held = check_fit_weights(w, n, [losses[k]] if k in losses else [], where, what)
            _refuse_bad_weights(held, where, what)
            out.append(held.astype(self.dtype))
            trailing.append(tuple(w.shape[1:]))
            helds.append(tuple(held.shape[1:]))
        if all(t is None for t in trailing):
            return None  # (Keras: [None, None] is no weights)
        if note:
            self._note_sw_shape(trailing)
            self.__dict__["_sw_held"] = helds
        # the structure a step override gets them in (step_overrides.py), as Keras gives it
        self.__dict__["_sw_form"] = kind
        return out

    def _note_sw_shape(self, trailing: tuple):
        """The weights' shape as given but the batch axis: a Metric subclass's
        update_state is written for it (metric_base.expressions_for), so the programs
        of a model that has one are kept by it (_program's key)."""
        c = self._compiled
        stateful = c is not None and any(getattr(m, "_stateful", lambda: False)()
                                         for ms in c.metrics for m in ms)
        self.__dict__["_sw_given"] = trailing  # (a list: each output's, weights per output)
        key = tuple(trailing) if isinstance(trailing, list) else trailing
        self.__dict__["_sw_key"] = key if stateful else None

    def _label_specs_from(self, ys):
        self._compiled_for_outputs()
        specs = [(tuple(a.shape[1:]), str(a.dtype)) for a in ys]
        if getattr(self, "_label_specs", None) not in (None, specs):
            # the steps were written for other labels' shapes (a PyDataset's (n,) labels,
            # then arrays' brought to (n, 1))
            self._programs.clear()
        self._label_specs = specs

    # ------------------------------------------------------------------ training

    def _labels_of_first_outputs(self, m: int) -> bool:
        """Fewer label arrays (m) than outputs, as Keras takes them for a model whose
        compute_loss override reads the labels itself (patch_convnet's `(logits, attention)`
        trained on one label array, `super().compute_loss(x, y, logits)`): then they are the
        first outputs' labels, and compile's one loss (not a list) is for those outputs."""
        return 1 <= m < len(self._outputs) and overrides_compute_loss(self) and \
            not isinstance((self.__dict__.get("_compile_args") or {}).get("loss"),
                           (list, tuple, dict))

    def _padded_labels(self, ys: list) -> list:
        """Labels for the first outputs only (_labels_of_first_outputs): None for the others
        (placeholders the programs take and nothing reads); the count given is kept for the
        `y` a compute_loss override gets."""
        m = len(ys)
        padded = self._labels_of_first_outputs(m)
        self.__dict__["_labels_count"] = m if padded else None
        return list(ys) + [None] * (len(self._outputs) - m) if padded else ys

    def _dataset_with_padded_labels(self, ds):
        """A Dataset of (x, y) batches for a model of several outputs whose compute_loss reads
        one label array: its batches get placeholder labels for the other outputs."""
        n_in, n_out = len(self._inputs), len(self._outputs)
        if len(ds.element_spec) != n_in + 1 or not self._labels_of_first_outputs(1):
            self.__dict__["_labels_count"] = None
            return ds
        self.__dict__["_labels_count"] = 1

        def pad(*arrays):
            rows = len(arrays[0])
            return tuple(arrays) + tuple(np.zeros((rows,), self.dtype)
                                         for _ in range(n_out - 1))
        return _map_batches(ds, pad)

    def _dataset_weights(self, ds, where: str):
        """A Dataset's (or PyDataset's) sample weights checked by their shape as arrays'
        are (_prepare_sw), their batches brought to the programs' form: (the dataset,
        the programs' kind of weights: sample_weights.weight_flags). Weights per output
        (a model of several outputs whose elements end with one array per output; an
        unweighted output's of no entries, UNREAD) are checked each against its output."""
        n_in, n_out = len(self._inputs), len(self._outputs)
        spec = ds.element_spec
        self.__dict__["_sw_given"] = self.__dict__["_sw_key"] = None
        self.__dict__["_sw_held"] = self.__dict__["_sw_form"] = None
        per_output = n_out > 1 and len(spec) == n_in + 2 * n_out
        if len(spec) != n_in + n_out + 1 and not per_output:
            return ds, False
        rows = ds.batch_size or 1
        ys = [np.zeros((1,) + tuple(s.shape), s.dtype) for s in spec[n_in:n_in + n_out]]
        outputs = self._weighted_outputs(ys, rows)
        if not per_output:
            given = tuple(spec[-1].shape)
            held = check_fit_weights(np.ones((rows,) + given), rows, outputs, where,
                                     "the dataset's sample_weight (a batch)").shape[1:]
            self._note_sw_shape(given)
            self.__dict__["_sw_held"] = held
            helds, givens = [held], [given]
        else:
            losses = {k: (k, loss, per) for k, loss, per in outputs}
            names = self._output_names()
            givens = [tuple(s.shape) for s in spec[n_in + n_out:]]
            helds = [g if g == UNREAD else check_fit_weights(
                np.ones((rows,) + g), rows, [losses[k]] if k in losses else [], where,
                f"the dataset's sample_weight for output {names[k]!r} (a batch)").shape[1:]
                for k, g in enumerate(givens)]
            self._note_sw_shape([None if g == UNREAD else g for g in givens])
            self.__dict__["_sw_held"] = [None if g == UNREAD else h
                                         for g, h in zip(givens, helds)]
        weighted = True if not per_output else tuple(g != UNREAD for g in givens)
        if helds == givens:
            return ds, weighted
        first = len(spec) - len(helds)

        def reshaped(*arrays):
            ws = [np.asarray(w) for w in arrays[first:]]
            return tuple(arrays[:first]) + tuple(w.reshape((len(w),) + h)
                                                 for w, h in zip(ws, helds))
        return _map_batches(ds, reshaped), weighted

    def _dataset_parts(self, ds, where: str):
        """The number of components of a Dataset's elements, checked against
        the model (inputs, labels, optional sample weights)."""
        n_in, n_out = len(self._inputs), len(self._outputs)
        spec = ds.element_spec
        if len(spec) not in (n_in, n_in + n_out, n_in + n_out + 1) and \
                not (n_out > 1 and len(spec) == n_in + 2 * n_out):
            per = f" (or {n_out}, one per output)" if n_out > 1 else ""
            raise ValueError(f"[{where}] the dataset's elements have {len(spec)} components; the "
                             f"model takes {n_in} input(s), then {n_out} label array(s), then "
                             f"optional sample weights: one array{per}")
        return len(spec)
