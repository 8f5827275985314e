"""Inference: Model.evaluate, Model.predict and fit's validation pass."""

from __future__ import annotations

import sys

import numpy as np

from ... import _core
from ... import data as _data
from .. import callbacks as _cb
from .._config import capped_steps
from ..layer_state import state_results
from ..layers.rnn_states import carried
from ..random import eager_training_seed, next_own_seed, own_seeds_collected
from ..program_constants import compile_program
from ..registry import INTERNAL_MODEL_NAME, model_class
from ..string_inputs import apply_fronts
from ..symbolic import KerasTensor, user_location
from ..varlen import keeps_graph
from ..sample_weights import per_output_given, weight_arrays, weight_flags
from ..step_overrides import step_trace_for
from ..predict_step import (concatenate_outputs, overrides_predict_step, predict_batch_logs,
                            trace_predict_step)
from .eager import EagerBatches, predict_eagerly, traces_per_batch
from ._common import _fmt, _from_py_dataset


def _rows_per_batch(batch_size, where: str) -> int:
    """batch_size, or Keras's 32 for arrays when it is None; checked."""
    if batch_size is None:
        return 32
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size <= 0:
        raise ValueError(f"[{where}] batch_size must be a positive int or None: got "
                         f"{batch_size!r} (at {user_location()})")
    return int(batch_size)


def _data_leaves(x) -> list:
    if isinstance(x, dict):
        return [v for a in x.values() for v in _data_leaves(a)]
    if isinstance(x, (list, tuple)):
        return [v for a in x for v in _data_leaves(a)]
    return [x]


class InferenceMixin:
    """Model.evaluate and Model.predict (and fit's validation), mixed into Model."""

    # ------------------------------------------------------------------ inference

    def _validate(self, validation_data, batch_size, steps, cbs=None) -> dict:
        """fit's validation: evaluate, calling the fit's callbacks' on_test_*
        hooks as Keras does. (The training weights' shape is kept for fit's programs.)"""
        held = {k: self.__dict__.get(k) for k in ("_sw_given", "_sw_key", "_sw_held",
                                                   "_sw_form")}
        try:
            return self._validate_once(validation_data, batch_size, steps, cbs)
        finally:
            self.__dict__.update(held)

    def _validate_once(self, validation_data, batch_size, steps, cbs) -> dict:
        if isinstance(validation_data, _data.Dataset):
            r = self.evaluate(validation_data, verbose=0, return_dict=True, steps=steps,
                              _cbs=cbs)
        else:
            vd = tuple(validation_data)
            if len(vd) not in (1, 2, 3):  # (x,): Keras's unpack_x_y_sample_weight, no labels
                what = type(validation_data).__name__
                raise ValueError(f"[fit] validation_data must be (x,), (x, y) or (x, y, "
                                 f"sample_weight) or a Dataset: got a {what} of {len(vd)} "
                                 f"values (at {user_location()})")
            r = self.evaluate(vd[0], vd[1] if len(vd) > 1 else None, batch_size=batch_size,
                              verbose=0,
                              sample_weight=vd[2] if len(vd) == 3 else None, return_dict=True,
                              steps=steps, _cbs=cbs)
        return r

    def _inference_callbacks(self, callbacks, verbose, steps, where):
        """The CallbackList of evaluate or predict (Keras's params: verbose,
        epochs 1, steps)."""
        if isinstance(callbacks, _cb.Callback):
            callbacks = [callbacks]
        return _cb.CallbackList(callbacks, model=self, where=where,
                                params={"verbose": verbose, "epochs": 1, "steps": steps})

    @keeps_graph
    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict: bool = False, _cbs=None):
        """The loss (and metrics) over (x, y), in inference mode, like Keras:
        the loss alone without metrics, else [loss, metric...] (a dict with
        return_dict). callbacks: their on_test_begin, on_test_batch_begin/
        end (logs: the running loss and metrics) and on_test_end are called,
        as Keras calls them (fit's validation calls fit's callbacks')."""
        if self._compiled is None:
            raise RuntimeError("[evaluate] call model.compile(optimizer, loss, metrics) first")
        steps = capped_steps(steps)
        self._build_from_first_batch(x, "evaluate")
        x = _from_py_dataset(x, "evaluate", steps, form=self._batch_form("evaluate"))
        if isinstance(x, _data.Dataset):
            ds = x
            self.__dict__["_labels_given"] = True
            if not self.built:
                raise RuntimeError("[evaluate] the model is not built")
            self._specialize([tuple(s.shape) for s in ds.element_spec[:len(self._inputs)]],
                             "evaluate", verbose)
            ds = self._dataset_with_padded_labels(ds)
            n_parts = self._dataset_parts(ds, "evaluate")
            ds, weighted = self._dataset_weights(ds, "evaluate")
            n_in = len(self._inputs)
            if n_parts == n_in:
                raise ValueError("[evaluate] the dataset has no labels")
            spec = ds.element_spec
            self._label_specs_from([np.zeros((0,) + tuple(s.shape), s.dtype)
                                    for s in spec[n_in:n_in + len(self._outputs)]])
            batches = (b.arrays for b in ds.epoch_batches(0))
        else:
            xs = self._prepare_x(x, "evaluate")
            self._specialize([a.shape[1:] for a in xs], "evaluate", verbose)
            self.__dict__["_labels_given"] = y is not None  # (a traced test_step's data)
            if y is None:
                y = self._no_labels(len(xs[0]), "evaluate")
            ys = self._prepare_y(y, len(xs[0]), "evaluate")
            sw = self._prepare_sw(sample_weight, None, ys, len(xs[0]), "evaluate")
            self._label_specs_from(ys)
            weighted = weight_flags(sw)
            data = tuple(xs + ys + weight_arrays(sw))
            bs = _rows_per_batch(batch_size, "evaluate")
            batches = (tuple(a[i:i + bs] for a in data) for i in range(0, len(xs[0]), bs))
        cbs = _cbs if _cbs is not None else self._inference_callbacks(callbacks, verbose, steps,
                                                                      "evaluate")
        eager = self.run_eagerly and traces_per_batch(self, "evaluate")
        if eager:  # the test_step's Python run on each batch's values (model/eager.py)
            batches = EagerBatches(self, batches, weighted)
        prog = batches.program if eager else self._program(("evaluate", weighted))
        trace = step_trace_for(self, "evaluate", weighted)  # a test_step override's logs
        sizes = trace.sizes() if trace is not None else self._metric_sizes()
        cbs.on_test_begin()  # (before the weights are read: a callback may set them)
        weights = self.weights  # (once: each read builds the model's whole table)
        args0 = [weights[v] for v in self._params(True) + self._params(False)]
        total_loss, seen = 0.0, 0
        totals = [np.zeros(s) for s in sizes]
        names = trace.names if trace is not None else self._metric_log_names()

        def running():
            if trace is not None:  # Keras's logs: what test_step returns
                return dict(zip(names, trace.results(totals)))
            out = {"loss": total_loss / max(seen, 1)}
            out.update(zip(names, self._metric_results(totals)))
            return out

        given = isinstance(x, _data.Dataset)
        for i, arrays in enumerate(batches):
            if steps is not None and i >= steps:
                break
            if given and self._enter_batch(arrays, i, "evaluate", verbose,
                                           ("evaluate", weighted)):
                prog = self._program(("evaluate", weighted))
            if eager:
                prog, trace = batches.program, step_trace_for(self, "evaluate", weighted)
            cbs.on_test_batch_begin(i)
            loss, mets, *new = prog.run(args0 + list(arrays) + [self._inference_seed()])
            self._keep_state(prog, new, args0)
            n = len(arrays[0])
            total_loss += float(loss) * n
            seen += n
            for t, m in zip(totals, mets):
                t += np.asarray(m, dtype=np.float64).reshape(t.shape)
            if cbs.callbacks:
                cbs.on_test_batch_end(i, running())
        result = running()
        if trace is None:
            self._hold_metric_state(total_loss, seen, totals)  # model.metrics (Keras's)
        cbs.on_test_end(dict(result))
        own_bar = any(type(c).__name__ == "ProgbarLogger" and
                      type(c).__module__ == "tessera.nn.callbacks" for c in cbs.callbacks)
        if not own_bar and (verbose and verbose != "auto" or
                            verbose == "auto" and sys.stdout.isatty()):
            print("evaluate: " + " - ".join(f"{k} {_fmt(v)}" for k, v in result.items()))
        if return_dict:
            return dict(sorted(result.items()))  # (Keras's pythonify_logs sorts them)
        return self._flatten_logs_in_order(result)

    def _keep_state(self, prog, new, args0) -> None:
        """After a batch of an evaluate or predict program: the new values it gives of the
        non-trainable weights the layers' calls assign (`new`: [list of them], or [] when
        it gives none) are the model's, and the next batch's arguments (`args0`, the
        weights in the programs' order), as Keras's steps carry their state."""
        names = state_results(prog)
        if not names or not new:
            return
        order = self._params(True) + self._params(False)
        for v, a in zip(names, new[0]):
            self._set(v, a)
            args0[order.index(v)] = a

    def _inference_seed(self) -> int:
        """The seed of one evaluate or predict batch: the model's own count, so a
        keras.random draw with a SeedGenerator in a layer's call differs from batch
        to batch and call to call (Keras advances the generator's state), without
        drawing from the global stream. An eager call given no `training` whose
        graph runs a node in training mode (Dropout(x, training=True) in a functional
        graph) draws from the global stream, as Keras's eager call does."""
        if self.__dict__.get("_context_none") and self.__dict__.get("_trains_a_node"):
            return eager_training_seed()
        n = self.__dict__.get("_inference_batches", 0) + 1
        self.__dict__["_inference_batches"] = n
        return n

    def _program(self, kind):
        stateful = [] if self.__dict__.get("_carries_states") else carried(self._layers)
        if stateful:
            what = kind if isinstance(kind, str) else kind[0]
            what = "fit" if what.startswith("train") else what
            layer = stateful[0]
            raise ValueError(f"[{what}] layer {layer.name!r} is stateful (stateful=True): its "
                             "states are carried from batch to batch by predict (and by calling "
                             "the layer or the model on arrays), not yet by fit, evaluate or "
                             "the training step; train a copy of the model built with "
                             f"stateful=False (set_weights between them), or call predict "
                             f"(at {user_location()})")
        return super()._program(kind)

    def __call__(self, *args, **kwargs):
        if self.__dict__.get("_step_self_call") and args and \
                [id(t) for t in _data_leaves(args[0])] == [id(t) for t in self._inputs]:
            # self(x) in a traced train_step/test_step: the outputs the step computes
            return self._as_declared(list(self._outputs))
        # a model with stateful layers called on arrays (Keras's eager call):
        # predict on them, carrying the states (a symbolic call goes on)
        if args and carried(self._layers) and not self.__dict__.get("_carries_states") and \
                not any(isinstance(a, KerasTensor) for a in _data_leaves(args[0])):
            if kwargs.get("training") or set(kwargs) - {"training"}:
                raise ValueError(f"[{self.kind}] a model with stateful layers called on arrays "
                                 f"takes the inputs only (training=False), got {sorted(kwargs)}")
            return self.predict(args[0], verbose=0)
        if args and self.__dict__.get("_string_fronts") and \
                not any(isinstance(a, KerasTensor) for a in _data_leaves(args[0])):
            # strings into a model whose string Inputs feed TextVectorization & co: that
            # layer runs on them first, as fit and predict do (pretrained_word_embeddings'
            # end_to_end_model(strings))
            args = (apply_fronts(self, args[0], "call"),) + args[1:]
        return super().__call__(*args, **kwargs)

    def _stateful_twin(self):
        """The model with its stateful layers' states as extra inputs and
        outputs (the same layers and weights), and those layers."""
        twin = self.__dict__.get("_twin")
        if twin is None:
            layers = carried(self._layers)
            ins = [s for layer in layers for s in layer.carried[1]]
            outs = [s for layer in layers for s in layer.carried[2]]
            twin = model_class()(self._inputs + ins, self._outputs + outs,
                                 name=INTERNAL_MODEL_NAME)
            twin.__dict__["_carries_states"] = True
            twin = (twin, layers)
            self.__dict__["_twin"] = twin
        return twin

    def _stateful_predict(self, xs, batch_size, steps, cbs):
        """predict with stateful layers: batch after batch of the fixed batch
        size, each starting from the states the previous one ended with
        (layer.states; reset_states() starts again from zeros)."""
        twin, layers = self._stateful_twin()
        batch = layers[0].carried[0]
        n = len(xs[0])
        if (batch_size is not None and batch_size != batch) or n % batch:
            raise ValueError(f"[predict] layer {layers[0].name!r} is stateful with batch size "
                             f"{batch} (its Input's): predict needs batch_size={batch} or None "
                             f"and a multiple of {batch} samples; got batch_size={batch_size!r} "
                             f"and {n} samples")
        n_out = len(self._outputs)
        outs = []
        cbs.on_predict_begin()
        for i, start in enumerate(range(0, n, batch)):
            if steps is not None and i >= steps:
                break
            cbs.on_predict_batch_begin(i)
            states = []
            for layer in layers:
                if layer.states is None or layer.states[0].shape[0] != batch:
                    layer.states = [np.zeros((batch,) + tuple(s.shape[1:]), self.dtype)
                                    for s in layer.carried[1]]
                states += layer.states
            r = twin.predict([a[start:start + batch] for a in xs] + states, batch_size=batch,
                             verbose=0)
            r = [np.asarray(a) for a in r]
            at = n_out
            for layer in layers:
                k = len(layer.carried[1])
                layer.states, at = r[at:at + k], at + k
            outs.append(r[:n_out])
            if cbs.callbacks:
                cbs.on_predict_batch_end(i, {"outputs": r[:n_out] if n_out > 1 else r[0]})
        cbs.on_predict_end()
        results = [np.concatenate([o[k] for o in outs]) if outs else
                   np.zeros((0,) + tuple(t.shape[1:]), dtype=self.dtype)
                   for k, t in enumerate(self._outputs)]
        if getattr(self, "_output_tree", None) is not None:
            return self._as_declared(results)
        if getattr(self, "_output_keys", None):
            return dict(zip(self._output_keys, results))
        return results if n_out > 1 else results[0]

    @keeps_graph
    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The model's outputs for x, in inference mode: one array (a list
        for several outputs). callbacks: their on_predict_begin,
        on_predict_batch_begin/end (logs {"outputs": the batch's outputs})
        and on_predict_end are called, as Keras calls them. Stateful layers
        carry their states from batch to batch (_stateful_predict)."""
        steps = capped_steps(steps)
        self._build_from_first_batch(x, "predict")
        x = _from_py_dataset(x, "predict", steps, form=self._batch_form("predict"))
        if overrides_predict_step(self):
            return self._predict_with_step(x, batch_size, verbose, steps, callbacks)
        stateful = carried(self._layers) and not self.__dict__.get("_carries_states")
        given = isinstance(x, _data.Dataset) and not stateful
        if given:  # its batches as they come (Keras's), each of its own shape
            spec = x.element_spec
            if not self.built:
                shapes = [tuple(s.shape) for s in spec[:1]]
                self.build(shapes[0])
            n_in = len(self._inputs)
            self._specialize([tuple(s.shape) for s in spec[:n_in]], "predict", verbose)
            batches = (list(b.arrays[:n_in]) for b in x.epoch_batches(0))
        elif isinstance(x, _data.Dataset):
            n_in = len(self._inputs) if self.built else 1
            parts = [b.arrays[:n_in] for b in x.epoch_batches(0)]
            xs = [np.concatenate([p[k] for p in parts]) for k in range(n_in)]
        else:
            xs = self._prepare_x(x, "predict")
        if stateful:
            cbs = self._inference_callbacks(callbacks, verbose, steps, "predict")
            return self._stateful_predict(xs, batch_size, steps, cbs)
        if not given:
            self._specialize([a.shape[1:] for a in xs], "predict", verbose)
            bs = _rows_per_batch(batch_size, "predict")
            batches = ([a[start:start + bs] for a in xs] for start in range(0, len(xs[0]), bs))
        cbs = self._inference_callbacks(callbacks, verbose, steps, "predict")
        prog = self._program("predict")
        cbs.on_predict_begin()  # (before the weights are read: a callback may set them)
        weights = self.weights  # (once: each read builds the model's whole table)
        args0 = [weights[v] for v in self._params(True) + self._params(False)]
        outs = []
        for i, arrays in enumerate(batches):
            if steps is not None and i >= steps:
                break
            if given and self._enter_batch(arrays, i, "predict", verbose):
                prog = self._program("predict")
            cbs.on_predict_batch_begin(i)
            r = prog.run(args0 + arrays + [self._inference_seed()])
            if state_results(prog):
                r, new = r
                self._keep_state(prog, [new], args0)
            outs.append(list(r) if len(self._outputs) > 1 else [r])
            if cbs.callbacks:
                got = [np.asarray(o) for o in outs[-1]]
                keys = getattr(self, "_output_keys", None)
                got = dict(zip(keys, got)) if keys else got if len(got) > 1 else got[0]
                cbs.on_predict_batch_end(i, predict_batch_logs(got))
        cbs.on_predict_end()
        results = []
        for k, t in enumerate(self._outputs):
            parts = [o[k] for o in outs]
            if not parts:
                results.append(np.zeros((0,) + tuple(t.shape[1:]), dtype=self.dtype))
            elif len(parts) == 1:
                results.append(np.asarray(parts[0]))
            elif len({tuple(np.shape(p)[1:]) for p in parts}) > 1:
                results.append(concatenate_outputs([np.asarray(p) for p in parts],
                                                   f"output {k}"))  # (its named error)
            else:
                results.append(np.asarray(_core.call_primitive("concatenate", [parts], {})))
        if getattr(self, "_output_tree", None) is not None:
            return self._as_declared(results)
        if getattr(self, "_output_keys", None):
            return dict(zip(self._output_keys, results))
        return results if len(self._outputs) > 1 else results[0]

    def _predict_with_step(self, x, batch_size, verbose, steps, callbacks):
        """predict through the model's predict_step override, traced into one
        program per input shape (predict_step.py): its result per batch, each
        leaf concatenated over the batches as Keras's."""
        if isinstance(x, _data.Dataset):
            spec = x.element_spec
            if not self.built:
                n_in = len(self._inputs) or 1
                shapes = [tuple(s.shape) for s in spec[:n_in]]
                self.build(shapes if len(shapes) > 1 else shapes[0])
            n_in = len(self._inputs)
            extra = [(tuple(s.shape), s.dtype) for s in spec[n_in:]]
            batches = (list(b.arrays) for b in x.epoch_batches(0))
        else:
            xs = self._prepare_x(x, "predict")
            n_in, extra = len(xs), None
            bs = _rows_per_batch(batch_size, "predict")
            batches = ([a[i:i + bs] for a in xs] for i in range(0, len(xs[0]), bs))
        cbs = self._inference_callbacks(callbacks, verbose, steps, "predict")
        cbs.on_predict_begin()
        outs = []
        for i, arrays in enumerate(batches):
            if steps is not None and i >= steps:
                break
            self._enter_batch(arrays, i, "predict", verbose)
            if extra is not None:
                extra = [(tuple(a.shape[1:]), a.dtype) for a in arrays[n_in:]]
            trace = predict_eagerly(self, arrays, extra) if self.run_eagerly else \
                trace_predict_step(self, extra)
            cbs.on_predict_batch_begin(i)
            outs.append(trace.run(arrays))
            if cbs.callbacks:
                cbs.on_predict_batch_end(i, predict_batch_logs(outs[-1]))
        cbs.on_predict_end()
        if not outs:
            raise ValueError(f"[predict] the data gave no batches (at {user_location()})")
        return concatenate_outputs(outs, "predict_step's result")

    def _enter_batch(self, arrays, i: int, where: str, verbose, kind=None) -> bool:
        """Before batch i of a dataset read as given (its shapes may differ from
        the previous batch's): the model's graph for its inputs' shapes (varlen.py;
        a named error for a model of other fixed shapes), and its labels' shapes
        for the programs; True when the program of `kind` must be fetched again."""
        n_in, n_out = len(self._inputs), len(self._outputs)
        shapes = [tuple(a.shape[1:]) for a in arrays[:n_in]]
        changed = shapes != [tuple(t.shape[1:]) for t in self._inputs]
        if changed:
            self._specialize(shapes, where, verbose)
            self._check_batch_shapes(arrays[:n_in], i, where)
        labels = arrays[n_in:n_in + n_out]
        if kind is not None and len(labels) == n_out:
            specs = [(tuple(a.shape[1:]), str(a.dtype)) for a in labels]
            if specs != getattr(self, "_label_specs", None):
                self._label_specs = specs
                self._programs.pop(kind, None)  # (written for other labels' shapes)
                changed = True
        if changed and kind is not None:
            self._metric_sizes()  # (the new shape's programs hold the metrics' counts)
        return changed

    def _check_batch_shapes(self, arrays, i: int, where: str):
        """A named error when batch i's inputs do not have the per-sample shapes
        of the model's inputs (after _specialize: a model of fixed shapes)."""
        for k, (t, a) in enumerate(zip(self._inputs, arrays)):
            want, got = tuple(t.shape[1:]), tuple(np.shape(a)[1:])
            if len(want) != len(got) or any(w is not None and w != g
                                            for w, g in zip(want, got)):
                name = t.name or f"input {k}"
                raise ValueError(
                    f"[{where}] batch {i} of the data has {name} of per-sample shape {got}; the "
                    f"model expects {want} (its Input's shape): a model of fixed shapes takes "
                    "batches of that shape only; give the Input None for the axes that vary "
                    f"(Input(shape=(None, ...))), or pad every batch to {want} "
                    f"(at {user_location()})")

    @keeps_graph
    def _forward_training(self, xs):
        """The outputs for the arrays xs in training mode, as one batch (Keras's
        layer(x, training=True) on arrays): random layers draw from the
        global stream (random.eager_training_seed: a fresh draw each call,
        repeated after utils.set_random_seed), BatchNormalization normalizes
        by the batch's statistics and moves its moving mean and variance
        towards them (momentum), as Keras's does."""
        xs = [np.asarray(a) for a in xs]
        self._specialize([a.shape[1:] for a in xs], "call", 0)
        P, S = self._params(True), self._params(False)
        key = ("forward_training", tuple(P))
        held = self._programs.get(key)
        if held is None:
            with own_seeds_collected() as owners:
                stmts, hs, stats = self._forward_code("true", "seed")
            kept = self.__dict__.get("_state_writes") or []  # (weights the calls assign)
            xs_names = self._names()[0]
            owns = [f"own_seed_{k}" for k in range(len(owners))]
            head = ", ".join(P + S + xs_names + ["seed"] + owns)
            result = (f"list(list({', '.join(hs)}), "
                      f"list({', '.join(s for _, s in stats)}), "
                      f"list({', '.join(e for _, e in kept)}))")
            body = ",\n  ".join(stmts + [result])
            text = f"define(forward_training, {head}, block(\n  {body}))\nforward_training\n"
            held = (compile_program(text, "<model training-mode call>"), [bn for bn, _ in stats],
                    [layer for layer, _ in owners], [v for v, _ in kept])
            self._programs[key] = held
        prog, norms, owners, assigned = held
        weights = self.weights  # (once: each read builds the model's whole table)
        args = [weights[v] for v in P + S] + xs + [eager_training_seed()] + \
            [next_own_seed(layer) for layer in owners]
        outs, batch_stats, new = prog.run(args)
        for v, a in zip(assigned, new):
            self._set(v, a)
        for bn, (mean, var) in zip(norms, batch_stats):
            m = bn.momentum
            for index, stat in ((2, mean), (3, var)):
                v = self._bn_var(bn, index)
                old = np.asarray(self.weights[v])
                new = m * old + (1.0 - m) * np.asarray(stat, dtype=old.dtype).reshape(old.shape)
                self._set(v, new.astype(old.dtype))
        outs = [np.asarray(o) for o in outs]
        return outs if len(self._outputs) > 1 else outs[0]

    # ------------------------------------------------------------------ one batch

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        """Keras's: one training step on this batch (the whole of x, one
        update); returns that batch's loss, or [loss, metrics...] in
        metrics_names' order, or a dict with return_dict. As Keras 3, the
        metrics start afresh at each call; model.history is not touched."""
        n = _batch_rows(x, "train_on_batch")
        before = self.history
        sample_weight = self._one_batch_weight(sample_weight, n, "train_on_batch")
        self.__dict__["_sw_where"] = "train_on_batch"
        try:
            h = self.fit(x, y, batch_size=n, epochs=1, verbose=0, shuffle=False,
                         sample_weight=sample_weight, class_weight=class_weight)
        finally:
            self.history = before
            self.__dict__.pop("_sw_where", None)
        return self._batch_logs({k: v[-1] for k, v in h.history.items()}, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """Keras's: the loss and metrics of this batch at the current weights."""
        n = _batch_rows(x, "test_on_batch")
        sample_weight = self._one_batch_weight(sample_weight, n, "test_on_batch")
        self.__dict__["_sw_where"] = "test_on_batch"
        try:
            logs = self.evaluate(x, y, batch_size=n, verbose=0, sample_weight=sample_weight,
                                 return_dict=True)
        finally:
            self.__dict__.pop("_sw_where", None)
        return self._batch_logs(logs, return_dict)

    def _one_batch_weight(self, sample_weight, n: int, where: str):
        """A scalar weight (or one of shape (1,)) given to a *_on_batch call: Keras's step
        multiplies every value by it, as one weight per sample would, except where the
        weights themselves are read: "mean_with_sample_weight" divides by the scalar,
        and a Metric subclass gets it as given (refused there)."""
        if sample_weight is None or per_output_given(sample_weight) or \
                np.ndim(sample_weight) > 1 or \
                np.size(sample_weight) != 1 or (n == 1 and np.ndim(sample_weight) == 1):
            return sample_weight
        c = self._compiled
        if c is None:
            return sample_weight
        reads = [type(l).__name__ for l in c.losses if l is not None and
                 getattr(l, "reduction", None) == "mean_with_sample_weight"]
        reads += [m.name for ms, flags in zip(c.metrics, c.weighted)
                  for m, w in zip(ms, flags) if w and getattr(m, "_stateful", lambda: False)()]
        if reads:
            raise ValueError(f"[{where}] a scalar sample_weight (shape "
                             f"{np.shape(sample_weight)}) with {reads[0]}, which reads the "
                             f"weights themselves, is not supported: give one weight per "
                             f"sample, shape ({n},) (at {user_location()})")
        return np.full((n, 1), float(np.reshape(sample_weight, ())), dtype=np.float64)

    def predict_on_batch(self, x):
        """Keras's: the outputs for this batch, in one step."""
        return self.predict(x, batch_size=_batch_rows(x, "predict_on_batch"), verbose=0)

    def _batch_logs(self, logs: dict, return_dict: bool):
        logs = {k: float(v) for k, v in logs.items()}
        if return_dict:
            return dict(sorted(logs.items()))  # (Keras's pythonify_logs sorts them)
        return self._flatten_logs_in_order(logs)


def _batch_rows(x, where: str) -> int:
    """The batch size of x (its first array's rows)."""
    leaves = _data_leaves(x)
    if not leaves or leaves[0] is None:
        raise ValueError(f"[{where}] x is required")
    shape = np.shape(leaves[0])
    if not shape:
        raise ValueError(f"[{where}] x must have a batch axis, got a scalar")
    if shape[0] == 0:
        raise ValueError(f"[{where}] x holds no samples (batch of 0 rows)")
    return int(shape[0])
