"""Models: functional (`Model(inputs, outputs)`), `Sequential`, and
subclassed (`class M(Model)` with `call`), with Keras's compile, fit,
evaluate, predict, summary, weights and saving.

The training step of `fit` is one program of tessera's language — forward,
backward (by the core's autodiff) and the optimizer update — written from the
model's graph, compiled once and run for every mini-batch with the GIL
released. Python only slices batches, passes arrays (without copies), runs
callbacks and prints progress.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from typing import Optional, Sequence

import numpy as np

from .. import _core, distributed as _dist, optim as _optim
from . import losses as _losses
from . import metrics as _metrics
from . import pipeline as _pipeline
from .functional import call_layer, clone_graph, collect_layers
from .layers import (WEIGHTS_IN_FILE, DeferredValues, Layer, _with_batch, initial_value,
                     value_spec)
from .data_axis import DataAxisMixin
from .programs import ProgramsMixin, _function_metric
from .string_inputs import apply_fronts, split_fronts
from .varlen import VarLenMixin, keeps_graph
from .zero import ZeroMixin, zero_setting
from .symbolic import GraphWriter, Input, KerasTensor

__all__ = ["Model", "Sequential", "History"]


def _optimizer(opt):
    if isinstance(opt, _optim.Optimizer):
        return opt
    getter = getattr(_optim, "get", None)
    if getter is not None and isinstance(opt, (str, dict)):
        try:
            return getter(opt)
        except ValueError as e:
            raise ValueError(f"[compile] {e}") from None
    table = {"sgd": _optim.SGD, "adam": _optim.Adam, "adamw": _optim.AdamW,
             "rmsprop": _optim.RMSprop, "adagrad": _optim.Adagrad}
    if isinstance(opt, str) and opt.lower() in table:
        return table[opt.lower()]()
    raise ValueError(f"[compile] unknown optimizer {opt!r}: use one of {sorted(table)} or a "
                     "tessera.optim optimizer")


def _fmt(v) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _draws_deferred() -> bool:
    """Whether a model made here draws its initial weights on first read:
    on a locality of a pipeline (TESSERA_MESH with pipeline > 1, from
    tessera run --mesh), where fit keeps only the stage's layers, so that
    the other stages' weights are never made there. Not while load_model
    counts the weights a file holds (it checks each draw's size first)."""
    text = os.environ.get("TESSERA_MESH")
    if not text or WEIGHTS_IN_FILE.get() is not None:
        return False
    try:
        return _dist._mesh_sizes(text).get("pipeline", 1) > 1
    except ValueError:
        return False  # the mesh's own check reports it where the mesh is made


def _own_initializer(p) -> bool:
    """A parameter drawn by one of tessera's initializers (a pure function
    of the seed); a user's initializer object is called when the model is
    made, as without a pipeline."""
    from . import initializers  # noqa: PLC0415

    init = p.init if hasattr(p.init, "generate") else initializers.get(p.init)
    return type(init).__module__ == initializers.__name__


def _readable_bytes(n: float) -> str:
    """Keras's summary's sizes: 1024-based units with two decimals."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024:
            return f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} PB"


class History:
    """Per-epoch logs of a fit: `history["loss"]`, `["accuracy"]`,
    `["val_loss"]`, `["val_accuracy"]`, ... (the epoch logs, as Keras's);
    `epoch` lists the epochs run."""

    def __init__(self):
        self.history: dict = {}
        self.epoch: list = []
        self.params: dict = {}
        self.model = None

    def _add(self, epoch: int, logs: dict):
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)


class _Compiled:
    """What compile() chose: the optimizer, a loss and its weight per output,
    the metrics per output."""

    def __init__(self, optimizer, losses, loss_weights, metrics):
        self.optimizer = optimizer
        self.losses = losses
        self.loss_weights = loss_weights
        self.metrics = metrics  # per output: list of Metric

    @property
    def has_metrics(self) -> bool:
        return any(self.metrics)


class Model(DataAxisMixin, ZeroMixin, ProgramsMixin, VarLenMixin, Layer):
    """A model, like keras.Model. Three ways to make one:

        inputs = nn.Input((128, 9))                       # functional
        h = nn.Conv1D(64, 3, activation="relu")(inputs)
        model = nn.Model(inputs, nn.Dense(6, activation="softmax")(nn.Flatten()(h)))

        model = nn.Sequential([nn.Dense(64, "relu"), nn.Dense(10)])   # a stack

        class MLP(nn.Model):                              # subclassing
            def __init__(self):
                super().__init__()
                self.hidden, self.out = nn.Dense(64, "relu"), nn.Dense(10)
            def call(self, x):
                return self.out(self.hidden(x) + np.tanh(x @ np.ones((x.shape[-1], 64))))

    A subclass's `call` runs when the model is built, on symbolic tensors:
    layer calls, operators and NumPy functions are recorded (docs/nn.md).
    """

    kind = "Model"

    def __init__(self, inputs=None, outputs=None, name: Optional[str] = None, seed: int = 0,
                 dtype: str = "float32", trainable: bool = True, **kwargs):
        super().__init__(name=name, trainable=trainable, **kwargs)
        if dtype not in ("float32", "float64"):
            raise ValueError(f"[{self.kind}] dtype must be 'float32' or 'float64', got {dtype!r}")
        self.dtype = dtype
        self.seed = seed
        self.layers: list = []
        self._inputs: list = []
        self._outputs: list = []
        self._var_of: dict = {}
        self._owner: dict = {}
        self._compiled: Optional[_Compiled] = None
        self._programs: dict = {}
        self._opt_state: Optional[dict] = None
        self._iteration = 0
        self._lr_override = None
        self.stop_training = False
        self.history: Optional[History] = None
        self._functional = inputs is not None or outputs is not None
        if self._functional:
            if inputs is None or outputs is None:
                raise TypeError(f"[{self.kind}] a functional model needs both inputs and outputs")
            self._init_graph(inputs, outputs)

    # ------------------------------------------------------------------ graph

    def _graph_tensors(self, which):
        if not self._inputs:
            raise AttributeError(f"[{self.kind}] model {self.name!r} has no {which} yet: it is "
                                 "not built (give it an input shape or call it on data)")
        return self._inputs if which.startswith("input") else self._outputs

    @property
    def inputs(self):
        """Keras's `model.inputs`: the list of the model's Input tensors."""
        return list(self._graph_tensors("inputs"))

    @property
    def outputs(self):
        """Keras's `model.outputs`: the list of the model's output tensors."""
        return list(self._graph_tensors("outputs"))

    @property
    def input(self):
        """Keras's `model.input`: the Input tensor (a list for several inputs)."""
        ins = self._graph_tensors("input")
        return list(ins) if getattr(self, "_multi_in", False) or len(ins) > 1 else ins[0]

    @property
    def output(self):
        """Keras's `model.output`: the output tensor (a list for several outputs, a
        dict for a dict of outputs)."""
        outs = self._graph_tensors("output")
        if getattr(self, "_output_keys", None):
            return dict(zip(self._output_keys, outs))
        return list(outs) if getattr(self, "_multi_out", False) or len(outs) > 1 else outs[0]

    def _init_graph(self, inputs, outputs):
        self._output_keys = None
        if isinstance(outputs, dict):  # Keras: outputs named by the dict's keys
            for k in outputs:
                if not isinstance(k, str):
                    raise TypeError(f"[{self.kind}] the keys of a dict of outputs must be "
                                    f"strings, got {k!r}")
            self._output_keys = list(outputs)
            outputs = list(outputs.values())
        ins, outs = _as_list(inputs), _as_list(outputs)
        for t in ins:
            if not isinstance(t, KerasTensor) or t.op != "input":
                raise TypeError(f"[{self.kind}] inputs must be made by nn.Input(...), got "
                                f"{t!r}")
        for t in outs:
            if not isinstance(t, KerasTensor):
                raise TypeError(f"[{self.kind}] outputs must be symbolic tensors (the results of "
                                f"layers called on the inputs), got {type(t).__name__}")
        if len({t.id for t in ins}) != len(ins):
            raise ValueError(f"[{self.kind}] an Input appears twice among the inputs")
        ins, self._string_fronts = split_fronts(self.kind, ins)  # string Inputs' layers
        self._inputs, self._outputs = ins, outs
        self._multi_in = isinstance(inputs, (list, tuple))
        self._multi_out = isinstance(outputs, (list, tuple))
        self.layers = [l for l in collect_layers(outs) if l is not self]
        self._check_reachable()
        self._assign_vars()
        self._create_values()
        self.built = True
        self._in_shape = [t.shape[1:] for t in ins] if self._multi_in else ins[0].shape[1:]
        self._out_shape = [t.shape[1:] for t in outs] if self._multi_out else outs[0].shape[1:]
        self._programs.clear()
        self._opt_state = None
        self._iteration = 0

    def _check_reachable(self):
        """Every Input the outputs depend on must be one of the model's inputs."""
        ids = {t.id for t in self._inputs}
        seen, stack = set(), list(self._outputs)
        while stack:
            t = stack.pop()
            if t.id in seen:
                continue
            seen.add(t.id)
            if t.op == "input" and t.id not in ids:
                raise ValueError(f"[{self.kind}] the outputs depend on an Input made at {t.where} "
                                 "that is not among the model's inputs")
            stack.extend(GraphWriter._inputs(t))

    def _assign_vars(self):
        self._var_of, self._owner = {}, {}
        for i, layer in enumerate(self.layers):
            for j, p in enumerate(layer.params):
                base = p.name if re.fullmatch(r"[A-Za-z_]\w*", p.name) else f"w{j}"
                var = f"l{i}_{base}"
                self._var_of[(id(layer), p.name)] = var
                self._owner[var] = (layer, p)

    def _create_values(self):
        defer = _draws_deferred()
        for i, layer in enumerate(self.layers):
            for j, p in enumerate(layer.params):
                if p.name not in layer._values:
                    seed = self.seed * 1000 + i * 10 + j
                    if defer and _own_initializer(p):
                        if not isinstance(layer._values, DeferredValues):
                            layer._values = DeferredValues(layer._values)
                        layer._values.defer(p.name, p, seed, self.dtype)
                    else:
                        layer._values[p.name] = initial_value(p, seed, self.dtype)

    def call(self, inputs, training=None):
        """A functional or Sequential model called on symbolic tensors (as a
        layer of another model) records its graph again on them."""
        self._ensure_built_for_call(inputs)
        new = _as_list(inputs)
        if len(new) != len(self._inputs):
            raise ValueError(f"[{self.name}] the model has {len(self._inputs)} inputs, called "
                             f"with {len(new)}")
        outs = clone_graph(self._outputs, self._inputs, new)
        return self._as_declared(outs)

    def _as_declared(self, outs):
        """Per-output values in the structure the outputs were given: a dict by
        the keys of a dict of outputs, a list, or the one value."""
        keys = getattr(self, "_output_keys", None)
        if keys:
            return dict(zip(keys, outs))
        return list(outs) if self._multi_out else outs[0]

    def _ensure_built_for_call(self, inputs):
        if not self._inputs:
            raise ValueError(f"[{self.kind}] the model is not built")

    def _is_custom(self) -> bool:
        return True

    def build(self, input_shape=None):
        """Builds the model for inputs of `input_shape` (one sample's shape,
        or Keras's with a leading None; a list of them for several inputs)."""
        if self._functional:
            return self
        if input_shape is None:
            raise ValueError(f"[{self.kind}.build] input_shape is required")
        shapes = input_shape
        multi = isinstance(shapes, list) and shapes and isinstance(shapes[0], (list, tuple))
        shapes = [tuple(s) for s in shapes] if multi else [tuple(shapes)]
        shapes = [s[1:] if s and s[0] is None else s for s in shapes]
        inputs = [Input(s, dtype=self._input_dtype(k)) for k, s in enumerate(shapes)]
        self.built = True
        try:
            outputs = call_layer(self, inputs if multi else inputs[0], (), {})
        except Exception:
            self.built = False
            raise
        self._init_graph(inputs if multi else inputs[0], outputs)
        return self

    def _build_for_dict(self, x: dict, where: str):
        """A subclassed model first given a dict of arrays (Keras: call receives
        the dict): builds on a dict of Inputs named by the keys."""
        inputs = {}
        for k, a in x.items():
            if not isinstance(k, str):
                raise TypeError(f"[{where}] the keys of a dict of inputs must be strings, "
                                f"got {k!r}")
            a = np.asarray(a)
            if a.ndim == 0:
                raise ValueError(f"[{where}] x[{k!r}] must have a batch axis, got a scalar")
            dtype = "int32" if a.dtype.kind in "iu" else self.dtype
            inputs[k] = Input(tuple(a.shape[1:]), dtype=dtype, name=k)
        self.built = True
        try:
            outputs = call_layer(self, inputs, (), {})
        except Exception:
            self.built = False
            raise
        self._init_graph(list(inputs.values()), outputs)

    def _input_dtype(self, k: int) -> str:
        return self.dtype

    def _check_built(self, where: str):
        if not self.built or not self._inputs:
            raise RuntimeError(f"[{where}] the model is not built: give it an input shape "
                               "(input_shape= on the first layer, nn.Input, or model.build)")

    # ------------------------------------------------------------------ weights

    @property
    def weights(self) -> dict:
        """The weights as {variable name: array} (l<layer index>_<name>).
        Under ZeRO stage 3 during fit the trainable ones are gathered from
        the data group first, and under pipeline stages the other stages'
        weights from the pipeline group (collectives: every member calls it)."""
        self._whole_held()
        return {v: layer._values[p.name] for v, (layer, p) in self._owner.items()}

    def _whole_held(self):
        """During fit, the model's whole weights held again where they are
        sharded: ZeRO 3's slices gathered over the data group, the other
        pipeline stages' weights over the pipeline group (collectives)."""
        if self._zero is not None:
            self._zero_whole_params()
        live = self.__dict__.get("_stage_live")
        if live is not None and not live.is_whole:
            live.whole()

    def _weight_stand_ins(self) -> dict:
        """{variable: a read-only stand-in of its weight's shape and dtype}
        (one element each, broadcast): what needs only the shapes reads
        these, and no weight whose draw is pending is drawn for it."""
        out = {}
        live = self.__dict__.get("_stage_live")
        for v, (layer, p) in self._owner.items():
            if dict.get(layer._values, p.name) is not None:
                shape, dtype = value_spec(layer, p.name)
            elif live is not None:
                shape, dtype = live.shapes[("w", v)]  # another stage's, dropped
            else:  # ZeRO 3's slices: the whole weights gathered, as before
                a = np.asarray(self.weights[v])
                shape, dtype = a.shape, a.dtype
            out[v] = np.broadcast_to(np.zeros((), dtype), shape)
        return out

    def _set(self, var: str, value):
        layer, p = self._owner[var]
        layer._values[p.name] = value

    @property
    def trainable_weights(self) -> list:
        return [self.weights[v] for v in self._params(True)]

    @property
    def non_trainable_weights(self) -> list:
        return [self.weights[v] for v in self._params(False)]

    def _trainable(self, layer, p) -> bool:
        return p.trainable and layer.trainable and self.trainable

    def _params(self, trainable: bool) -> list:
        return [v for v, (layer, p) in self._owner.items()
                if self._trainable(layer, p) == trainable]

    def count_params(self) -> int:
        return sum(layer.count_params() for layer in self.layers)

    def get_layer(self, name: Optional[str] = None, index: Optional[int] = None):
        """A layer by name or by index, like Keras's get_layer."""
        if index is not None:
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"[get_layer] no layer named {name!r}; layers: "
                         f"{[l.name for l in self.layers]}")

    def summary(self, print_fn=print):
        """Prints each layer's type, output shape and parameter count, and
        the totals with their bytes, as Keras's summary. An unbuilt model
        (a Sequential without an input shape) lists its layers with shape
        "?" and "0 (unbuilt)" parameters, as Keras does."""
        built = self.built and bool(self._inputs)
        rows = [("Layer (type)", "Output Shape", "Param #")]
        for layer in self.layers:
            if not built:
                rows.append((f"{layer.name} ({layer.kind})", "?", "0 (unbuilt)"))
                continue
            shape = str(_with_batch(layer._out_shape) if layer._out_shape is not None else
                        (None,))
            rows.append((f"{layer.name} ({layer.kind})", shape, f"{layer.count_params():,}"))
        widths = [max(len(r[k]) for r in rows) + 2 for k in range(3)]
        line = "=" * sum(widths)
        print_fn(f"Model: \"{self.name}\"")
        print_fn(line)
        for n, r in enumerate(rows):
            print_fn("".join(c.ljust(w) for c, w in zip(r, widths)))
            print_fn(line if n == 0 else "-" * sum(widths))
        counts = {True: [0, 0], False: [0, 0]}  # trainable: [parameters, bytes]
        if built:
            trainable = set(self._params(True))
            for v in self._params(True) + self._params(False):
                layer, p = self._owner[v]
                shape, dtype = value_spec(layer, p.name)
                n = math.prod(shape)
                c = counts[v in trainable]
                c[0] += n
                c[1] += n * np.dtype(dtype).itemsize
        total = [counts[True][k] + counts[False][k] for k in range(2)]
        for what, (n, size) in (("Total", total), ("Trainable", counts[True]),
                                ("Non-trainable", counts[False])):
            print_fn(f"{what} params: {n:,} ({_readable_bytes(size)})")

    def get_weights(self) -> list:
        """The weights as a list of NumPy arrays (copies), layer by layer in
        the order of each layer's parameters, as Keras's get_weights."""
        self._check_built("get_weights")
        return [np.array(v, copy=True) for v in self.whole_weights().values()]

    def whole_weights(self) -> dict:
        """The weights as {variable name: array}, each whole: a layer split
        over a tensor group (tessera.nn.parallel) gathers its parts (a
        collective: every member calls it). The arrays of other layers are
        the model's own, not copies."""
        self._whole_held()
        out = {}
        for v, (layer, p) in self._owner.items():
            whole = getattr(layer, "_gathered", None)
            out[v] = layer._values[p.name] if whole is None else whole(p.name,
                                                                      layer._values[p.name])
        return out

    def _optimizer_state_of(self, state: dict, how: str) -> dict:
        """`state` (optimizer state variables) with each variable of a weight
        split over a tensor group made whole (how="_gathered", a collective)
        or this member's part of a whole one (how="_local_part")."""
        out = dict(state)
        for s in getattr(self, "_opt_statevars", None) or []:
            if s.scalar or s.name not in out or s.param not in self._owner:
                continue
            layer, p = self._owner[s.param]
            convert = getattr(layer, how, None)
            if convert is not None:
                out[s.name] = convert(p.name, out[s.name])
        return out

    def set_weights(self, weights):
        """Replaces the weights from a list like get_weights gives: the same
        count, and each array of the same shape (cast to the model's dtype).
        Nothing is changed when any of them does not fit."""
        self._check_built("set_weights")
        weights = list(weights)
        names = list(self._owner)
        if len(weights) != len(names):
            raise ValueError(f"[set_weights] the model has {len(names)} weight arrays, got "
                             f"{len(weights)}")
        new = {}
        current = self.weights
        for i, (name, w) in enumerate(zip(names, weights)):
            w = np.asarray(w)
            part = getattr(self._owner[name][0], "_local_part", None)
            if part is not None:  # a whole weight of a layer split over a tensor group
                w = part(self._owner[name][1].name, w)
            want = current[name].shape
            if w.shape != want:
                layer, p = self._owner[name]
                raise ValueError(f"[set_weights] weight {i} ({layer.name}/{p.name}) must have "
                                 f"shape {want}, got {w.shape}")
            if not np.issubdtype(w.dtype, np.number) or np.iscomplexobj(w):
                raise TypeError(f"[set_weights] weight {i} ({name}) must hold real numbers, got "
                                f"dtype {w.dtype}")
            new[name] = np.array(w, dtype=current[name].dtype, copy=True)
        for name, w in new.items():
            self._set(name, w)

    def save_weights(self, path):
        """Writes the weights in tessera's weights format (docs/nn.md)."""
        from .saving import save_file  # noqa: PLC0415

        self._check_built("save_weights")
        save_file(path, self.whole_weights(), {}, "save_weights")

    def load_weights(self, path):
        """Reads weights written by save_weights (or model.save); every name,
        shape and dtype must match this model, and the checksum must be
        right, or nothing is loaded."""
        from .saving import load_weights_into  # noqa: PLC0415

        self._check_built("load_weights")
        load_weights_into(self, path)

    def get_config(self) -> dict:
        """A functional or Sequential model: its architecture (layers'
        configurations and the graph), which Model.from_config rebuilds with
        new weights; a subclassed model: its constructor's arguments."""
        if self._functional or isinstance(self, Sequential):
            from .saving import _architecture  # noqa: PLC0415

            self._check_built("get_config")
            return _architecture(self, "get_config")
        return super().get_config()

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A new model (new weights) from get_config's dict."""
        from .saving import model_from_config  # noqa: PLC0415

        if isinstance(config, dict) and config.get("kind") in ("Sequential", "Functional",
                                                                "Subclassed"):
            return model_from_config(config, custom_objects, f"{cls.__name__}.from_config")
        if not isinstance(config, dict):
            raise TypeError(f"[{cls.__name__}.from_config] config must be a dict, got "
                            f"{type(config).__name__}")
        return cls(**config)

    def to_json(self, **kwargs) -> str:
        """The architecture as JSON text (models.model_from_json rebuilds it)."""
        from .saving import model_to_json  # noqa: PLC0415

        return model_to_json(self, **kwargs)

    def save(self, path):
        """Writes the model: architecture, weights, compile settings and
        optimizer state (tessera's checksummed format, no code; docs/nn.md)."""
        from .saving import save_model  # noqa: PLC0415

        save_model(self, path, training_state=None)

    def save_checkpoint(self, path):
        """Writes the whole training state (weights, optimizer state and
        step, schedule, epoch and position in the epoch), for fit(resume_from=)."""
        from .saving import save_model  # noqa: PLC0415

        save_model(self, path, training_state=self._training_state())

    # ------------------------------------------------------------------ compile

    def compile(self, optimizer="adam", loss=None, metrics=(),
                loss_weights=None, weighted_metrics=None, run_eagerly=None, jit_compile=None,
                steps_per_execution=None):
        """Chooses the optimizer, the loss (one, or one per output as a list or
        a dict by output layer name; None, Keras's default: only the losses the
        layers add with add_loss) and the metrics (names, Metric objects or
        functions of (y_true, y_pred); a list, or per output)."""
        n_out = len(self._outputs) if self._outputs else 1
        losses = self._per_output(loss, "loss", n_out)
        losses = [self._get_loss(l) for l in losses]
        if loss_weights is None:
            loss_weights = [1.0] * n_out
        else:
            loss_weights = [float(w) for w in self._per_output(loss_weights, "loss_weights",
                                                               n_out)]
        if metrics is None:
            metrics = ()
        if isinstance(metrics, dict) or (n_out > 1 and isinstance(metrics, (list, tuple)) and
                                         metrics and isinstance(metrics[0], (list, tuple))):
            per = self._per_output(metrics, "metrics", n_out)
        else:
            per = [list(_as_list(metrics)) if k == 0 or n_out > 1 else [] for k in range(n_out)]
            if n_out > 1:
                per = [list(_as_list(metrics))] * n_out
        mets = [[self._get_metric(m, losses[k], k) for m in (ms or [])]
                for k, ms in enumerate(per)]
        self._compiled = _Compiled(_optimizer(optimizer), losses, loss_weights, mets)
        self._programs.clear()
        self._opt_state = None
        self._iteration = 0
        self._lr_override = None
        return self

    def _output_names(self) -> list:
        if getattr(self, "_output_keys", None):
            return list(self._output_keys)
        names = []
        for t in self._outputs:
            node = t.args[0] if t.op == "item" else t
            layer = node.args[0] if node.op == "layer" else None
            names.append(layer.name if layer is not None else f"output_{len(names)}")
        return names

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
        return _losses.get(loss)

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

    @property
    def metrics_names(self) -> list:
        names = ["loss"]
        if self._compiled:
            prefix = self._output_names() if len(self._outputs) > 1 else [""]
            for k, ms in enumerate(self._compiled.metrics):
                for m in ms:
                    names.append(f"{prefix[k]}_{m.name}" if prefix[k] else m.name)
        return names

    # ------------------------------------------------------------------ data

    def _ensure_built(self, xs):
        if self.built and self._inputs:
            return
        if isinstance(self, Sequential) or not self._functional:
            shapes = [tuple(a.shape[1:]) for a in xs]
            self.build(shapes if len(shapes) > 1 else shapes[0])

    def _no_labels(self, n, where):
        """fit(x) without y, as Keras's: allowed when no compiled loss or metric
        reads labels (the loss is the layers' add_loss terms); the program then
        gets placeholder labels it does not read."""
        c = self._compiled
        if c is None or any(l is not None for l in c.losses) or c.has_metrics:
            raise ValueError(f"[{where}] y (the labels) is required with array inputs: the "
                             "compiled loss or metrics read them")
        ys = [np.zeros((n,) + tuple(t.shape[1:]), np.float32) for t in self._outputs]
        return ys if len(ys) > 1 else ys[0]

    def _prepare_x(self, x, where: str) -> list:
        if x is None:
            raise ValueError(f"[{where}] x is required")
        if isinstance(x, dict) and not self._functional and not self._inputs \
                and not isinstance(self, Sequential):
            self._build_for_dict(x, where)
        x = apply_fronts(self, x, where)
        if isinstance(x, dict):
            names = [t.name for t in self._inputs]
            missing = [n for n in names if n not in x]
            if missing or None in names:
                raise ValueError(f"[{where}] x is a dict but the model's inputs are named "
                                 f"{names} (missing {missing})")
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
        for k, (a, t) in enumerate(zip(xs, self._inputs)):
            if len(a.shape) != len(t.shape) or any(
                    d is not None and d != e for d, e in zip(t.shape[1:], a.shape[1:])):
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
            if len(a) != n:
                raise ValueError(f"[{where}] the inputs have different numbers of samples: "
                                 f"{[len(b) for b in out]}")
        return out

    def _prepare_y(self, y, n: int, where: str) -> list:
        if isinstance(y, dict):
            names = self._output_names()
            missing = [k for k in names if k not in y]
            if missing:
                raise ValueError(f"[{where}] y is a dict but misses outputs {missing} (outputs: "
                                 f"{names})")
            y = [y[k] for k in names]
        ys = [np.asarray(a) for a in _as_list(y)] if len(self._outputs) > 1 else [np.asarray(y)]
        if len(ys) != len(self._outputs):
            raise ValueError(f"[{where}] the model has {len(self._outputs)} outputs, got "
                             f"{len(ys)} label arrays")
        out = []
        for k, (a, loss) in enumerate(zip(ys, self._compiled.losses)):
            which = f"y[{k}]" if len(ys) > 1 else "y"
            if a.ndim == 0 or len(a) != n:
                raise ValueError(f"[{where}] x and {which} have different numbers of samples: "
                                 f"{n} and {len(a) if a.ndim else 'a scalar'}")
            out_shape = tuple(self._outputs[k].shape[1:])
            if loss is not None and loss.sparse_labels:
                a = self._check_sparse(a, loss.whole_output_shape(out_shape), which, where)
            elif loss is not None and not isinstance(loss, _losses.FunctionLoss):
                if a.ndim == 1 and out_shape == (1,):
                    a = a.reshape(-1, 1)
                if tuple(a.shape[1:]) != out_shape:
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
            elif a.dtype.kind == "f":
                a = a.astype(self.dtype, copy=False)
            out.append(a)
        return out

    def _check_sparse(self, a, out_shape, which, where):
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_)):
            if np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and \
                    np.all(a == np.round(a)):
                a = a.astype(np.int64)
            else:
                raise ValueError(f"[{where}] sparse_categorical_crossentropy needs integer class "
                                 f"labels in {which}, got dtype {a.dtype}")
        a = a.astype(np.int64, copy=False)
        if a.ndim == len(out_shape) + 1 and a.shape[-1] == 1 and out_shape[-1] != 1 and \
                a.shape[1:-1] == out_shape[:-1]:
            a = a.reshape(a.shape[:-1])
        if tuple(a.shape[1:]) != tuple(out_shape[:-1]):
            raise ValueError(f"[{where}] {which} has labels of shape {tuple(a.shape[1:])} per "
                             f"sample, but the output of shape {out_shape} needs "
                             f"{tuple(out_shape[:-1])} (one class index per row)")
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

    def _prepare_sw(self, sample_weight, class_weight, ys, n, where):
        sw = None
        if sample_weight is not None:
            sw = np.asarray(sample_weight, dtype=np.float64)
            if sw.shape != (n,):
                raise ValueError(f"[{where}] sample_weight must have one weight per sample, "
                                 f"shape ({n},), got {sw.shape}")
            if not np.all(np.isfinite(sw)) or (sw < 0).any():
                i = int(np.argmax(~np.isfinite(sw) | (sw < 0)))
                raise ValueError(f"[{where}] sample_weight[{i}] is {sw[i]}: weights must be "
                                 "finite and non-negative")
        if class_weight is not None:
            if len(ys) != 1:
                raise ValueError(f"[{where}] class_weight works with one output only")
            if not isinstance(class_weight, dict):
                raise TypeError(f"[{where}] class_weight must be a dict {{class: weight}}, got "
                                f"{type(class_weight).__name__}")
            y = ys[0]
            if y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
                cls = y.reshape(len(y)).astype(np.int64)
            elif y.ndim == 2:
                cls = np.argmax(y, axis=1)
            else:
                raise ValueError(f"[{where}] class_weight needs one label per sample, got labels "
                                 f"of shape {y.shape[1:]}")
            table = {int(k): float(v) for k, v in class_weight.items()}
            missing = sorted(set(np.unique(cls).tolist()) - set(table))
            if missing:
                raise ValueError(f"[{where}] class_weight has no weight for the classes "
                                 f"{missing[:10]}")
            cw = np.array([table[int(c)] for c in cls], dtype=np.float64)
            sw = cw if sw is None else sw * cw
        return None if sw is None else sw.astype(self.dtype)

    def _label_specs_from(self, ys):
        self._label_specs = [(tuple(a.shape[1:]), str(a.dtype)) for a in ys]

    # ------------------------------------------------------------------ training

    def _dataset_parts(self, ds, where: str):
        """The number of components of a Dataset's elements, checked against
        the model (inputs, labels, optional sample weights)."""
        n_in, n_out = len(self._inputs), len(self._outputs)
        spec = ds.element_spec
        if len(spec) not in (n_in, n_in + n_out, n_in + n_out + 1):
            raise ValueError(f"[{where}] the dataset's elements have {len(spec)} components; the "
                             f"model takes {n_in} input(s), then {n_out} label array(s), then "
                             "optional sample weights")
        return len(spec)

    @keeps_graph
    def fit(self, x=None, y=None, batch_size=None, epochs: int = 1, verbose="auto",
            callbacks=None, validation_split: float = 0.0, validation_data=None,
            shuffle: bool = True, class_weight=None, sample_weight=None, initial_epoch: int = 0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None,
            validation_freq: int = 1, seed: int = 0, nan_policy: str = "stop",
            data_parallel=None, deterministic=False, resume_from=None, check_inputs=True,
            checkpoint_dir=None, checkpoint_every="epoch", keep_checkpoints=3, zero=None,
            pipeline_split=None, microbatches=None, pipeline_schedule="1f1b"):
        """Trains for `epochs` passes over (x, y) in mini-batches, like Keras's
        fit (x, y: arrays, lists of arrays for several inputs/outputs, or a
        tessera.data.Dataset of (x, y[, sample_weight]) batches). Returns a
        History. Data is checked before the first step (labels in range,
        finite inputs, lengths), naming the first bad sample.

        Under `tessera run -n N` (data_parallel None or True) every locality
        takes its share of each global batch of `batch_size` rows (from a
        Dataset, it reads only those rows), and the gradients are summed
        across the localities (weighted by share, in buckets fixed at compile
        time), so the parameters stay identical; the loss and metrics printed
        are those of the whole batch. Only locality 0 prints.

        deterministic=True (or a number of chunks) makes the result bitwise
        the same for any number of localities and threads (docs/nn.md).
        resume_from=path continues from a checkpoint written by
        save_checkpoint or ModelCheckpoint(save_training_state=True): the same
        steps follow as in the run that wrote it.

        checkpoint_dir=DIR writes distributed checkpoints of the training
        state into DIR (every locality its share, asynchronously) every
        `checkpoint_every` ('epoch', a number of updates, or both in a list),
        keeping the last `keep_checkpoints`. Each fit call is a run of its
        own (DIR/fit<k>-<run id>-<identity>): when its run already has a
        valid checkpoint (a relaunch of the same job, the same fit call,
        model and data), fit resumes from the newest, history included.
        TESSERA_CHECKPOINT_DIR (set by `tessera run --checkpoint-dir`) gives
        DIR when neither this nor a ModelCheckpoint names one;
        checkpoint_dir=False turns that off (docs/nn.md, docs/resilience.md).

        Under a mesh (the mesh of the model's tensor-parallel layers, or
        tessera.distributed.mesh() from `tessera run --mesh`) the data
        parallelism runs over the mesh's data group only. zero=1, 2 or 3
        (default: TESSERA_ZERO, set by `tessera run --zero`, else 0) shards
        the optimizer state (1), also the gradients (2), also the parameters
        (3) over the data group (docs/parallelism.md, "ZeRO").

        Under a mesh with a pipeline axis (`tessera run --mesh pipeline=P`),
        the model is cut into P stages, one per locality of the axis: before
        each layer named in `pipeline_split` (P - 1 names), or where the
        stages' measured times are most even; each global batch is cut
        into `microbatches` micro-batches per data locality (default
        TESSERA_MICROBATCHES, else 2 P), run in the order of
        `pipeline_schedule` ("1f1b" or "gpipe"). See docs/parallelism.md,
        "Pipeline parallelism"."""
        from .. import data as _data  # noqa: PLC0415
        from . import callbacks as _cb  # noqa: PLC0415

        if self._compiled is None:
            raise RuntimeError("[fit] call model.compile(optimizer, loss, metrics) first")
        if nan_policy not in ("stop", "continue"):
            raise ValueError(f"[fit] nan_policy must be 'stop' or 'continue', got {nan_policy!r}")
        for name, v in (("epochs", epochs), ("initial_epoch", initial_epoch)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"[fit] {name} must be an int >= 0, got {v!r}")
        if steps_per_epoch is not None and (isinstance(steps_per_epoch, bool) or not isinstance(
                steps_per_epoch, int) or steps_per_epoch <= 0):
            raise ValueError(f"[fit] steps_per_epoch must be a positive int, got "
                             f"{steps_per_epoch!r}")
        if not isinstance(validation_split, (int, float)) or not 0 <= validation_split < 1:
            raise ValueError(f"[fit] validation_split must be in [0, 1), got {validation_split!r}")
        x = _from_py_dataset(x, "fit")
        if validation_data is not None:
            validation_data = _from_py_dataset(validation_data, "fit")
        is_ds = isinstance(x, _data.Dataset)
        if is_ds:
            if y is not None or sample_weight is not None or class_weight is not None:
                raise ValueError("[fit] with a Dataset, labels and sample weights come from the "
                                 "dataset: y, sample_weight and class_weight must be None")
            if batch_size is not None:
                raise ValueError("[fit] with a Dataset, batch it with ds.batch(n); batch_size "
                                 "must be None")
            if validation_split:
                raise ValueError("[fit] validation_split needs arrays; pass validation_data")
            ds = x
            if ds.batch_size is None:
                raise ValueError("[fit] the Dataset is not batched: call ds.batch(batch_size)")
            if not self.built:
                spec = ds.element_spec
                n_in = len(self._inputs) or 1  # not built: one input
                shapes = [tuple(s.shape) for s in spec[:n_in]]
                self.build(shapes if len(shapes) > 1 else shapes[0])
            self._specialize([tuple(s.shape) for s in ds.element_spec[:len(self._inputs)]],
                             "fit", verbose)
            n_parts = self._dataset_parts(ds, "fit")
            spec = ds.element_spec
            n_in, n_out = len(self._inputs), len(self._outputs)
            if n_parts == n_in:
                raise ValueError("[fit] the dataset has no labels: its elements must be (x, y) "
                                 "or (x, y, sample_weight)")
            self._label_specs_from([np.zeros((0,) + tuple(s.shape), s.dtype)
                                    for s in spec[n_in:n_in + n_out]])
            weighted = len(spec) == n_in + n_out + 1
            if check_inputs:
                self._validate_dataset(ds, n_in, n_out)
            batch_size = ds.batch_size
        else:
            if batch_size is None:
                batch_size = 32
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
                raise ValueError(f"[fit] batch_size must be a positive int, got {batch_size!r}")
            xs = self._prepare_x(x, "fit")
            self._specialize([a.shape[1:] for a in xs], "fit", verbose)
            n = len(xs[0])
            if y is None:
                y = self._no_labels(n, "fit")
            ys = self._prepare_y(y, n, "fit")
            if check_inputs:
                self._check_finite(xs, "fit")
            sw = self._prepare_sw(sample_weight, class_weight, ys, n, "fit")
            if validation_split:
                cut = int(n * (1 - validation_split))
                if cut == 0 or cut == n:
                    raise ValueError(f"[fit] validation_split {validation_split} of {n} samples "
                                     "leaves no training or no validation samples")
                validation_data = ([a[cut:] for a in xs] if len(xs) > 1 else xs[0][cut:],
                                   [a[cut:] for a in ys] if len(ys) > 1 else ys[0][cut:],
                                   None if sw is None else sw[cut:])
                xs, ys = [a[:cut] for a in xs], [a[:cut] for a in ys]
                sw = None if sw is None else sw[:cut]
                n = cut
            if n == 0:
                raise ValueError("[fit] x is empty")
            self._label_specs_from(ys)
            weighted = sw is not None
            arrays = tuple(xs + ys + ([sw] if weighted else []))
            ds = _data.Dataset.from_tensor_slices(arrays)
            if shuffle:
                ds = ds.shuffle(seed=seed)
            ds = ds.batch(batch_size)
        stage = zero_setting(zero)
        pipe = _pipeline.setup(self, pipeline_split, microbatches, pipeline_schedule,
                               deterministic, data_parallel, rows=batch_size, zero=stage)
        self._pipeline = pipe  # this locality's stage (pipeline.StageStep), or None
        if pipe is not None:  # (ZeRO shards each stage's state over its data group: pipe.zero)
            dgroup, n_ranks, rank = pipe.dg, pipe.d, pipe.data_rank
            world = _dist.size()
        else:
            dgroup, n_ranks, rank = self._data_axis(data_parallel)
            world = _dist.size() if n_ranks > 1 else 1
        rows = None if is_ds else n
        n_batches = ds.num_batches()
        if world > 1:
            self._same_data_everywhere(rows, n_batches, batch_size, world)
        if pipe is not None:  # the data axis shares the batches; stages share the model
            chunks = pipe.chunks if pipe.deterministic else 0
            plan = None
        else:
            chunks = self._chunk_count(deterministic, n_ranks)
            plan = self._zero_plan(stage, n_ranks, chunks)
        if n_ranks > 1 and batch_size < n_ranks and not chunks:
            raise ValueError(f"[fit] batch_size {batch_size} is smaller than the {n_ranks} "
                             "localities sharing each batch")
        if verbose == "auto":
            verbose = 1
        # one printer: locality 0 of the world under data parallelism or a mesh
        lead = _dist.rank() == 0 if n_ranks > 1 or dgroup is not None or pipe is not None \
            else True
        verbose = verbose if lead else 0
        zkey = (plan.key,) if plan is not None else ()
        if pipe is not None:
            prog = pipe.program(weighted)
        elif chunks:
            prog = self._program(("train_det", chunks // n_ranks, chunks, n_ranks, weighted)
                                 + zkey)
        elif n_ranks > 1:
            prog = self._program(("train_dp", self.BUCKET_BYTES, self.OVERLAP_BACKWARD, weighted)
                                 + zkey)
        else:
            prog = self._program(("train", weighted))
        opt = self._compiled.optimizer
        P, S = self._params(True), self._params(False)
        if self._opt_state is None or set(self._opt_state) != set(self._opt_vars):
            # under ZeRO a fresh state is never made whole: read-only stand-ins
            # of its shapes (no memory) until _zero_begin makes the slices
            # pipeline stages: the same stand-ins (every stage's state is
            # made whole only on demand); begin() makes the stage's own
            self._opt_state = opt.init_state(
                self._weight_stand_ins() if pipe is not None else self.weights,
                self._opt_statevars, views=plan is not None or pipe is not None)
        sizes = self._metric_sizes()
        start_epoch, start_batch, acc0 = initial_epoch, 0, None
        steps = n_batches if steps_per_epoch is None else (
            steps_per_epoch if n_batches is None else min(steps_per_epoch, n_batches))
        callbacks, ckpts = self._checkpoint_dir(callbacks, checkpoint_dir, checkpoint_every,
                                                keep_checkpoints, verbose)
        # what a checkpoint of this fit's run must agree with (checkpoints.py)
        limits = {"epochs": epochs, "steps": steps, "initial_epoch": initial_epoch,
                  "batch_size": batch_size,
                  "metric_shapes": [list(np.zeros(s).shape) for s in sizes]}
        state = None
        backups = [c for c in (callbacks or []) if isinstance(c, _cb.BackupAndRestore)]
        if resume_from is None and backups:
            resume_from = backups[0]._restore_path()  # a backup of an interrupted run
        try:
            if ckpts is not None:
                from .checkpoints import resume_wants  # noqa: PLC0415

                state = ckpts.restore(self, world, _dist.rank() if world > 1 else 0, dict(
                    limits, data={"rows": rows, "batches": n_batches, "batch_size": batch_size}),
                    wants=lambda layout: resume_wants(self, layout, plan, pipe, dgroup))
            if state is None and resume_from is not None:
                from .saving import load_training_state  # noqa: PLC0415

                if os.path.isdir(resume_from):
                    state = self._resume_from_folder(os.fspath(resume_from), limits, world,
                                                     (plan, pipe, dgroup))
                else:
                    state = load_training_state(self, resume_from)
        except BaseException:
            if ckpts is not None:
                ckpts.finish(abandon=True)  # unlocks the folder
            raise
        if state is not None:
            start_epoch, start_batch, acc0 = state["epoch"], state["batch"], state.get("acc")
            seed = state.get("seed", seed)
        history = History()
        self.history = history
        for past in (state or {}).get("history") or []:  # the epochs a resumed run did
            history._add(past["epoch"], dict(past["logs"]))
        cbs = _cb.CallbackList(callbacks, history=history, model=self,
                               params={"epochs": epochs, "steps": steps, "verbose": verbose})
        if any(isinstance(c, _cb.ProgbarLogger) for c in cbs.callbacks):
            verbose = 0  # the user's ProgbarLogger prints instead, as in Keras
        self.stop_training = False
        self._fit_settings = {"seed": seed, "batch_size": batch_size}
        tiling = _core.deterministic()
        if chunks:
            _core.set_deterministic(True)
        names = self.metrics_names[1:]
        # nan_policy='continue': each step is handed the weights and optimizer
        # state (the model and fit drop their references, Program.run
        # consumes its arguments), so the step frees the old arrays at their
        # last use instead of holding them beside the new ones. 'stop' keeps
        # them, to give them back when the loss is not finite.
        hand_over = nan_policy == "continue" and pipe is None
        if plan is not None:
            self._zero_begin(plan, rank, dgroup, P)
        if pipe is not None:
            pipe.begin()  # only this stage's weights and state from here on
        finished = False
        try:
            cbs.on_train_begin()
            for epoch in range(start_epoch, epochs):
                cbs.on_epoch_begin(epoch)
                start = time.perf_counter()
                first = start_batch if epoch == start_epoch else 0
                if acc0 is not None and epoch == start_epoch:
                    total_loss, seen = acc0["loss"], acc0["seen"]
                    totals = [np.asarray(t, dtype=np.float64) for t in acc0["totals"]]
                else:
                    total_loss, seen = 0.0, 0
                    totals = [np.zeros(s) for s in sizes]
                logs = {}
                # each locality reads only its rows of every global batch (in
                # deterministic mode, its chunks are those same rows)
                shard = {"num_shards": n_ranks, "shard_index": rank} if n_ranks > 1 else {}
                batches = ds.epoch_batches(epoch, start_batch=first, **shard)
                b = first - 1
                for batch in batches:
                    b = batch.index
                    if steps is not None and b >= steps:
                        break
                    it = self._iteration
                    cbs.on_train_batch_begin(b)
                    arrays = list(batch.arrays)
                    n = batch.global_size
                    lr = self._learning_rate(it)
                    state = self._step_state(P, S) if pipe is None else None
                    if hand_over:
                        self._hand_over_state(P, S)
                    group_args = [dgroup, rank] if n_ranks > 1 else []
                    if pipe is not None:
                        args = pipe.args(arrays, n, it, lr, seed)
                    elif chunks:
                        args = state + self._chunk_args(
                            arrays, n, chunks, n_ranks, rank, seed, it,
                            fill_empty=plan is not None and plan.stage == 3) + [it, lr] \
                            + group_args
                    else:
                        extra = []
                        if n_ranks > 1:
                            extra = [len(arrays[0]) / n] + group_args
                        args = state + arrays + [it, lr, (seed * 1_000_003 + it) * 64 + rank] \
                            + extra
                    if hand_over:
                        state = None  # only `args` holds them now, and run empties it
                    t_step = _core._trace_now()
                    try:
                        if pipe is not None:
                            loss, mets = pipe.take(prog.run(args))
                            new_p = new_o = new_s = ()
                        else:
                            loss, mets, new_p, new_o, new_s = prog.run(args,
                                                                       consume=hand_over)
                    except Exception as e:
                        # A step that failed part way may leave gradient
                        # buckets waiting for members; the next would meet them.
                        if n_ranks > 1:
                            _core._drop_gradient_buckets()
                        if hand_over:
                            note = ("[fit] the step failed after fit handed it the weights and "
                                    "optimizer state (nan_policy='continue'), which it may have "
                                    "freed: the model has no weights now; resume from a "
                                    "checkpoint (fit(resume_from=...)) or build it again")
                            if not hasattr(e, "add_note"):  # Python < 3.11
                                raise RuntimeError(note) from e
                            e.add_note(note)
                            raise
                        if self._zero is not None:
                            self._zero_restore(state, P, S)
                        raise
                    _core._trace_step(it, t_step, _core._trace_now())
                    loss = float(loss)
                    if not math.isfinite(loss) and nan_policy == "stop" and not cbs.stops_on_nan:
                        if self._zero is not None:
                            self._zero_restore(state, P, S)
                        raise FloatingPointError(
                            f"[fit] the loss became {loss} at epoch {epoch + 1}, step {b + 1} "
                            f"(update {it + 1}); the weights are those before this step. Lower "
                            "the learning rate, check the data, or pass nan_policy='continue'")
                    del args, state
                    if self._zero is not None:
                        self._zero_take(new_p, new_o, P)
                    else:
                        for v, a in zip(P, new_p):
                            self._set(v, a)
                        for v, a in zip(self._opt_vars, new_o):
                            self._opt_state[v] = a
                    for v, a in zip(S, new_s):
                        self._set(v, a)
                    # Only the model holds the new state now: the next step is
                    # handed it alone (hand_over), not beside these names.
                    new_p = new_o = new_s = a = None
                    self._iteration += 1
                    seen += n
                    total_loss += loss * n
                    mets = self._split_sums(mets, sizes, chunks or pipe is not None)
                    for t, m in zip(totals, mets):
                        t += np.asarray(m, dtype=np.float64).reshape(t.shape)
                    logs = {"loss": total_loss / seen}
                    logs.update(zip(names, self._metric_results(totals)))
                    self._position = {"epoch": epoch, "batch": b + 1,
                                      "acc": {"loss": total_loss, "seen": seen,
                                              "totals": [t.copy() for t in totals]}}
                    if verbose == 1:
                        self._progress(epoch, epochs, b + 1, steps, logs, start)
                    if pipe is not None and ckpts is not None:
                        pipe.whole()  # a checkpoint may be written now: the whole model
                    cbs.on_train_batch_end(b, dict(logs))
                    if self.stop_training:
                        break
                if seen == 0:
                    raise ValueError("[fit] the data gave no batches in this epoch")
                self._position = {"epoch": epoch + 1, "batch": 0, "acc": None}
                logs = dict(logs)
                if validation_data is not None and (epoch + 1) % validation_freq == 0:
                    vlogs = self._validate(validation_data, validation_batch_size or
                                           max(batch_size, 256), validation_steps, cbs)
                    logs.update({f"val_{k}": v for k, v in vlogs.items()})
                took = time.perf_counter() - start
                cbs.on_epoch_end(epoch, logs)  # may add to the logs (learning_rate)
                history._add(epoch, logs)
                if verbose:
                    self._progress_end(epoch, epochs, logs, took)
                if self.stop_training:
                    break
            cbs.on_train_end(dict(history.history and {k: v[-1] for k, v in
                                                       history.history.items()}))
            finished = True
        finally:
            if finished:
                self._zero_end()  # whole weights and state again (a collective)
                if pipe is not None:
                    pipe.end()  # every stage's weights and state on every locality
            _core.set_deterministic(tiling)
            if ckpts is not None:
                ckpts.finish(abandon=True)  # fit failed: no commit may wait for the dead
        return history

    def _checkpoint_dir(self, callbacks, checkpoint_dir, every, keep, verbose):
        """(callbacks, CheckpointDir or None): the checkpoint folder of this
        fit, from checkpoint_dir, a ModelCheckpoint naming a folder, or
        TESSERA_CHECKPOINT_DIR; its writer runs after every other callback."""
        from .callbacks import ModelCheckpoint  # noqa: PLC0415
        from .checkpoints import CheckpointDir  # noqa: PLC0415

        callbacks = [] if callbacks is None else list(callbacks)
        named = [c for c in callbacks if isinstance(c, ModelCheckpoint) and c.folder_mode]
        if checkpoint_dir is not None and checkpoint_dir is not False:
            if named:
                raise ValueError(f"[fit] checkpoint_dir={os.fspath(checkpoint_dir)!r} and "
                                 f"ModelCheckpoint({named[0].filepath!r}, "
                                 "save_training_state=True) both name a checkpoint folder; give "
                                 "one")
            ckpts = CheckpointDir(checkpoint_dir, every, keep, verbose)
        elif len(named) > 1:
            raise ValueError(f"[fit] several ModelCheckpoint callbacks name checkpoint folders "
                             f"({[c.filepath for c in named]}); give one")
        elif named:
            c = named[0]
            ckpts = CheckpointDir(c.filepath, c.save_freq, c.keep_checkpoints, c.verbose,
                                  "ModelCheckpoint")
        elif checkpoint_dir is None and os.environ.get("TESSERA_CHECKPOINT_DIR"):
            ckpts = CheckpointDir(os.environ["TESSERA_CHECKPOINT_DIR"], every, keep, verbose)
        else:
            return callbacks, None
        return callbacks + [ckpts], ckpts

    def _resume_from_folder(self, folder, limits, world=1, sharding=(None, None, None)):
        """fit(resume_from=folder): a checkpoint folder (ckpt-<step>), a run's
        folder of them (the newest valid one) or a checkpoint folder holding
        one run, read without changing it and checked whole (of any run).
        With world > 1 localities in the fit, each reads only its block of
        the shards and shares them, each receiving only what it keeps under
        `sharding` = (ZeRO plan, pipeline stage, data group) (docs/scaling.md)."""
        from . import checkpoints as _ck  # noqa: PLC0415
        from .saving import apply_training_state  # noqa: PLC0415

        layout, total = _ck._layout(_ck._state_tensors(self), "resume_from")
        expect = {k: v for k, v in limits.items() if k != "initial_epoch"}
        expect.update(layout=layout, total=total)
        if world > 1:  # its errors name the folder and the localities
            found = _ck.read_resume_shared(folder, expect, world, _dist.rank(),
                                           wants=_ck.resume_wants(self, layout, *sharding))
        else:
            found = self._resume_read(folder, expect)
        if found is None:
            raise FileNotFoundError(f"[resume_from] {folder} holds no complete checkpoint "
                                    "(ckpt-<step> folders with a manifest.json)")
        path, manifest, data = found
        header = {"training": manifest["training"], "iteration": manifest["step"]}
        return apply_training_state(self, _ck._tensors_from(manifest, data, path), header, path,
                                    "resume_from")

    @staticmethod
    def _resume_read(folder, expect):
        """fit(resume_from=folder) on one locality: (path, manifest, state
        bytes) of the checkpoint, or None."""
        from . import checkpoints as _ck  # noqa: PLC0415

        try:
            if os.path.lexists(os.path.join(folder, _ck.MANIFEST)):
                manifest = _ck.read_manifest(folder, expect)
                found = (folder, manifest, _ck.read_state(folder, manifest))
            else:
                run = _ck.only_run(folder)
                if run:
                    folder = os.path.join(folder, run)
                found = _ck.newest_checkpoint(folder, expect=expect)
        except (OSError, ValueError) as e:
            raise ValueError(f"[resume_from] {folder}: {getattr(e, 'strerror', None) or e}; "
                             "nothing was loaded") from None
        return found

    def _hand_over_state(self, P, S):
        """The model lets go of the weights and optimizer state a step was
        given (fit with nan_policy='continue'); the step's results are set
        back after it."""
        for v in P + S:
            layer, p = self._owner[v]
            layer._values[p.name] = None
        if self._zero is None:
            for v in self._opt_vars:
                self._opt_state[v] = None

    def _step_state(self, P, S) -> list:
        """The weights and optimizer state a training step starts with."""
        if self._zero is not None:
            return self._zero_step_state(P, S)
        values = self.weights
        return ([values[v] for v in P] + [values[v] for v in S]
                + [self._opt_state[v] for v in self._opt_vars])

    def _learning_rate(self, iteration: int) -> float:
        if self._lr_override is not None:
            return self._lr_override
        opt = self._compiled.optimizer
        opt._last_iteration = iteration  # what opt.learning_rate reports, as in Keras
        return opt.rate_at(iteration)

    @staticmethod
    def _split_sums(mets, sizes, chunks):
        """The metric sums of a step as arrays (deterministic mode returns them
        as one flat float64 array)."""
        if not sizes:
            return []
        if chunks:
            flat = np.asarray(mets[0], dtype=np.float64)
            out, off = [], 0
            for s in sizes:
                n = math.prod(s)
                out.append(flat[off:off + n].reshape(s))
                off += n
            return out
        return list(mets)

    def _metric_results(self, totals) -> list:
        out, k = [], 0
        metrics = [m for ms in self._compiled.metrics for m in ms]
        for m, n in zip(metrics, self._metric_counts()):
            stateful = getattr(m, "_stateful", None)
            r = m.stateless_result(totals[k:k + n]) if stateful and stateful() else \
                m.result(totals[k:k + n])
            out.append(float(r) if np.ndim(r) == 0 else [float(v) for v in np.ravel(r)])
            k += n
        return out

    def _validate_dataset(self, ds, n_in, n_out):
        """Labels and inputs checked once, before training, naming the sample."""
        losses = self._compiled.losses

        def check(c, start, chunk):
            chunk = np.asarray(chunk)
            if c < n_in:
                if chunk.dtype.kind == "f":
                    ok = np.isfinite(chunk).reshape(len(chunk), -1).all(axis=1)
                    if not ok.all():
                        i = start + int(np.argmin(ok))
                        raise ValueError(f"[fit] the dataset's input {c} at sample {i} holds a "
                                         "NaN or infinite value")
                want = tuple(self._inputs[c].shape[1:])
                if tuple(chunk.shape[1:]) != want:
                    raise ValueError(f"[fit] the dataset's input {c} has samples of shape "
                                     f"{tuple(chunk.shape[1:])}, the model expects {want}")
            elif c < n_in + n_out:
                k = c - n_in
                if losses[k] is not None and losses[k].sparse_labels:
                    try:
                        self._check_sparse(chunk, losses[k].whole_output_shape(
                                           tuple(self._outputs[k].shape[1:])),
                                           f"labels {k}" if n_out > 1 else "the labels", "fit")
                    except ValueError as e:
                        msg = str(e)
                        m = re.search(r"\[(\d+)\] \(sample (\d+)\)", msg)
                        if m:
                            i = start + int(m.group(2))
                            msg = msg.replace(m.group(0), f"[{i}] (sample {i})")
                        raise ValueError(msg) from None

        ds.validate(check)

    def _chunk_count(self, deterministic, n_ranks) -> int:
        """The number of chunks per global batch in deterministic mode (0: off)."""
        if deterministic is False or deterministic is None:
            return 0
        chunks = self.DETERMINISTIC_CHUNKS if deterministic is True else deterministic
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise ValueError("[fit] deterministic must be True, False or a number of chunks (a "
                             f"positive int), got {deterministic!r}")
        if chunks % n_ranks:
            raise ValueError(f"[fit] deterministic mode cuts each global batch into {chunks} "
                             f"chunks, which {n_ranks} localities cannot share evenly: run on a "
                             f"number of localities that divides {chunks}, or pass "
                             f"deterministic=<chunks> with a multiple of {n_ranks}")
        return chunks

    @staticmethod
    def _chunk_args(arrays, n, chunks, n_ranks, rank, seed, it, fill_empty=False) -> list:
        """This locality's chunks of a global batch of n rows (chunk c: rows
        c*n//chunks up to (c+1)*n//chunks), their shares of the batch and their
        dropout seeds, as the deterministic step takes them: stream by stream
        (x_0.., y_0..), then w_0.., seed_0... `arrays` hold this locality's
        rows, [rank*n//n_ranks, (rank+1)*n//n_ranks): exactly its chunks.
        `fill_empty` (ZeRO 3, whose step runs every chunk: its gathers are
        collectives): an empty chunk is one row of zeros, its share still 0
        (the step drops what it computes)."""
        local = chunks // n_ranks
        mine = range(rank * local, (rank + 1) * local)
        base = rank * n // n_ranks
        bounds = [(c * n // chunks - base, (c + 1) * n // chunks - base) for c in mine]
        out = []
        for a in arrays:
            for lo, hi in bounds:
                if hi == lo and fill_empty:
                    a_ = np.asarray(a)
                    out.append(np.zeros((1,) + a_.shape[1:], dtype=a_.dtype))
                else:
                    out.append(a[lo:hi])
        return (out + [(hi - lo) / n for lo, hi in bounds]
                + [(seed * 1_000_003 + it) * chunks + c for c in mine])

    def _training_state(self) -> dict:
        pos = getattr(self, "_position", None) or {"epoch": 0, "batch": 0, "acc": None}
        settings = getattr(self, "_fit_settings", {})
        acc = pos["acc"]
        if acc is not None:  # the epoch's running sums, as JSON
            acc = dict(acc, totals=[np.asarray(t).tolist() for t in acc["totals"]])
        return {"iteration": self._iteration, "epoch": pos["epoch"], "batch": pos["batch"],
                "acc": acc, "seed": settings.get("seed", 0), "lr_override": self._lr_override}

    @staticmethod
    def _live() -> bool:
        """A progress bar redrawn in place: only on a terminal, and not under
        mpirun (which forwards output line by line)."""
        return sys.stdout.isatty() and "OMPI_COMM_WORLD_SIZE" not in os.environ

    def _progress(self, epoch, epochs, b, n, logs, start):
        if not self._live():
            return
        width = 24
        if n:
            done = int(width * b / n)
            bar = "=" * max(0, done - 1) + (">" if done < width else "=") + "." * (width - done)
            msg = f"\rEpoch {epoch + 1}/{epochs} [{bar}] {b}/{n}"
        else:
            msg = f"\rEpoch {epoch + 1}/{epochs} {b}"
        msg += "".join(f" - {k} {_fmt(v)}" for k, v in logs.items())
        msg += f" - {time.perf_counter() - start:.1f}s"
        sys.stdout.write(msg)
        sys.stdout.flush()

    def _progress_end(self, epoch, epochs, logs, took):
        parts = [f"Epoch {epoch + 1}/{epochs}"]
        parts += [f"{k} {_fmt(v)}" for k, v in logs.items()]
        parts.append(f"{took:.2f}s")
        end = "\r" if self._live() else ""
        sys.stdout.write(end + " - ".join(parts) + " " * 10 + "\n")
        sys.stdout.flush()

    # ------------------------------------------------------------------ inference

    def _validate(self, validation_data, batch_size, steps, cbs=None) -> dict:
        """fit's validation: evaluate, calling the fit's callbacks' on_test_*
        hooks as Keras does."""
        from .. import data as _data  # noqa: PLC0415

        if isinstance(validation_data, _data.Dataset):
            r = self.evaluate(validation_data, verbose=0, return_dict=True, steps=steps,
                              _cbs=cbs)
        else:
            vd = tuple(validation_data)
            if len(vd) not in (2, 3):
                raise ValueError("[fit] validation_data must be (x, y) or (x, y, sample_weight) "
                                 "or a Dataset")
            r = self.evaluate(vd[0], vd[1], batch_size=batch_size, verbose=0,
                              sample_weight=vd[2] if len(vd) == 3 else None, return_dict=True,
                              steps=steps, _cbs=cbs)
        return r

    def _inference_callbacks(self, callbacks, verbose, steps, where):
        """The CallbackList of evaluate or predict (Keras's params: verbose,
        epochs 1, steps)."""
        from . import callbacks as _cb  # noqa: PLC0415

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
        from .. import data as _data  # noqa: PLC0415

        if self._compiled is None:
            raise RuntimeError("[evaluate] call model.compile(optimizer, loss, metrics) first")
        x = _from_py_dataset(x, "evaluate")
        if isinstance(x, _data.Dataset):
            ds = x
            if not self.built:
                raise RuntimeError("[evaluate] the model is not built")
            self._specialize([tuple(s.shape) for s in ds.element_spec[:len(self._inputs)]],
                             "evaluate", verbose)
            n_parts = self._dataset_parts(ds, "evaluate")
            n_in = len(self._inputs)
            if n_parts == n_in:
                raise ValueError("[evaluate] the dataset has no labels")
            spec = ds.element_spec
            self._label_specs_from([np.zeros((0,) + tuple(s.shape), s.dtype)
                                    for s in spec[n_in:n_in + len(self._outputs)]])
            weighted = n_parts == n_in + len(self._outputs) + 1
            batches = (b.arrays for b in ds.epoch_batches(0))
        else:
            xs = self._prepare_x(x, "evaluate")
            self._specialize([a.shape[1:] for a in xs], "evaluate", verbose)
            if y is None:
                y = self._no_labels(len(xs[0]), "evaluate")
            ys = self._prepare_y(y, len(xs[0]), "evaluate")
            sw = self._prepare_sw(sample_weight, None, ys, len(xs[0]), "evaluate")
            self._label_specs_from(ys)
            weighted = sw is not None
            data = tuple(xs + ys + ([sw] if weighted else []))
            bs = batch_size or 256
            batches = (tuple(a[i:i + bs] for a in data) for i in range(0, len(xs[0]), bs))
        cbs = _cbs if _cbs is not None else self._inference_callbacks(callbacks, verbose, steps,
                                                                      "evaluate")
        prog = self._program(("evaluate", weighted))
        sizes = self._metric_sizes()
        args0 = [self.weights[v] for v in self._params(True) + self._params(False)]
        total_loss, seen = 0.0, 0
        totals = [np.zeros(s) for s in sizes]
        names = self.metrics_names[1:]

        def running():
            out = {"loss": total_loss / max(seen, 1)}
            out.update(zip(names, self._metric_results(totals)))
            return out

        cbs.on_test_begin()
        for i, arrays in enumerate(batches):
            if steps is not None and i >= steps:
                break
            cbs.on_test_batch_begin(i)
            loss, mets = prog.run(args0 + list(arrays))
            n = len(arrays[0])
            total_loss += float(loss) * n
            seen += n
            for t, m in zip(totals, mets):
                t += np.asarray(m, dtype=np.float64).reshape(t.shape)
            if cbs.callbacks:
                cbs.on_test_batch_end(i, running())
        result = running()
        cbs.on_test_end(dict(result))
        own_bar = any(type(c).__name__ == "ProgbarLogger" and
                      type(c).__module__ == "tessera.nn.callbacks" for c in cbs.callbacks)
        if not own_bar and (verbose and verbose != "auto" or
                            verbose == "auto" and sys.stdout.isatty()):
            print("evaluate: " + " - ".join(f"{k} {_fmt(v)}" for k, v in result.items()))
        if return_dict:
            return result
        values = list(result.values())
        return values[0] if len(values) == 1 else values

    @keeps_graph
    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """The model's outputs for x, in inference mode: one array (a list
        for several outputs). callbacks: their on_predict_begin,
        on_predict_batch_begin/end (logs {"outputs": the batch's outputs})
        and on_predict_end are called, as Keras calls them."""
        from .. import data as _data  # noqa: PLC0415

        x = _from_py_dataset(x, "predict")
        if isinstance(x, _data.Dataset):
            n_in = len(self._inputs) if self.built else 1
            parts = [b.arrays[:n_in] for b in x.epoch_batches(0)]
            xs = [np.concatenate([p[k] for p in parts]) for k in range(n_in)]
        else:
            xs = self._prepare_x(x, "predict")
        self._specialize([a.shape[1:] for a in xs], "predict", verbose)
        cbs = self._inference_callbacks(callbacks, verbose, steps, "predict")
        prog = self._program("predict")
        args0 = [self.weights[v] for v in self._params(True) + self._params(False)]
        bs = batch_size or 256
        outs = []
        cbs.on_predict_begin()
        for i, start in enumerate(range(0, len(xs[0]), bs)):
            if steps is not None and i >= steps:
                break
            cbs.on_predict_batch_begin(i)
            r = prog.run(args0 + [a[start:start + bs] for a in xs])
            outs.append(list(r) if len(self._outputs) > 1 else [r])
            if cbs.callbacks:
                got = [np.asarray(o) for o in outs[-1]]
                cbs.on_predict_batch_end(i, {"outputs": got if len(got) > 1 else got[0]})
        cbs.on_predict_end()
        results = []
        for k, t in enumerate(self._outputs):
            parts = [o[k] for o in outs]
            if not parts:
                results.append(np.zeros((0,) + tuple(t.shape[1:]), dtype=self.dtype))
            elif len(parts) == 1:
                results.append(np.asarray(parts[0]))
            else:
                results.append(np.asarray(_core.call_primitive("concatenate", [parts], {})))
        if getattr(self, "_output_keys", None):
            return dict(zip(self._output_keys, results))
        return results if len(self._outputs) > 1 else results[0]


class Sequential(Model):
    """A stack of layers, like keras.Sequential.

        model = Sequential([Conv1D(64, 3, activation="relu", input_shape=(128, 9)), Flatten(),
                            Dense(6, activation="softmax")])
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, batch_size=64, epochs=5, validation_split=0.1)
    """

    kind = "Sequential"

    def __init__(self, layers: Sequence[Layer] = (), input_shape=None, seed: int = 0,
                 dtype: str = "float32", name: Optional[str] = None, trainable: bool = True):
        super().__init__(name=name, seed=seed, dtype=dtype, trainable=trainable)
        self._stack: list = []
        self._declared_input = None  # one sample's shape (None: a variable-length axis)
        self._declared_dtype = None
        if layers is None:
            layers = ()
        if not isinstance(layers, (list, tuple)):
            raise TypeError(f"[Sequential] layers must be a list of layers, got "
                            f"{type(layers).__name__}")
        for i, layer in enumerate(layers):
            if getattr(layer, "is_input_layer", False):  # keras.layers.InputLayer
                layer = layer.output
            if isinstance(layer, KerasTensor) and layer.op == "input" and i == 0:
                self._declared_input = layer.shape[1:]
                self._declared_dtype = layer.dtype
                continue
            if not isinstance(layer, Layer):
                raise TypeError(f"[Sequential] layer {i} is not a tessera.nn layer: {layer!r}")
            self._stack.append(layer)
        self.layers = list(self._stack)
        if input_shape is None and self._stack and self._stack[0].declared_input_shape:
            # Keras: on the first layer, one sample's shape (None: unknown length)
            input_shape = (None,) + tuple(self._stack[0].declared_input_shape)
        if input_shape is None and self._declared_input is not None:
            input_shape = (None,) + tuple(self._declared_input)
        if input_shape is not None:
            self.build(tuple(input_shape))

    def add(self, layer, rebuild: bool = True):
        """Appends a layer, as Keras's: `add(nn.Input(shape))` first gives
        the input; once the input shape is known the model is built (again)
        after each add, the layers already built keeping their weights (the
        optimizer state and the compiled programs start over)."""
        if getattr(layer, "is_input_layer", False):  # keras.layers.InputLayer
            layer = layer.output
        if isinstance(layer, KerasTensor) and layer.op == "input":
            if self._stack:
                raise ValueError("[Sequential.add] an Input can only come first, before the "
                                 f"layers; the model has {len(self._stack)} already")
            self._declared_input = layer.shape[1:]
            self._declared_dtype = layer.dtype
            return
        if not isinstance(layer, Layer):
            raise TypeError(f"[Sequential.add] not a tessera.nn layer: {layer!r}")
        self._stack.append(layer)
        self.layers = list(self._stack)
        if rebuild:
            self._rebuild("Sequential.add")

    def pop(self, rebuild: bool = True):
        """Removes the last layer and returns it, as Keras's (the model is
        built again without it when its input shape is known)."""
        if not self._stack:
            raise IndexError("[Sequential.pop] the model has no layers")
        layer = self._stack.pop()
        self.layers = list(self._stack)
        if self.built:
            self.built, self._inputs, self._outputs = False, [], []
        if rebuild and self._stack:
            self._rebuild("Sequential.pop")
        return layer

    def _rebuild(self, where):
        """Builds the model when its input shape is known (on the Input
        given first, the first layer's input_shape, or the built model's)."""
        shape = self._declared_input
        if shape is None and self._stack and self._stack[0].declared_input_shape:
            shape = self._stack[0].declared_input_shape
        if shape is None and self._inputs:
            shape = self._inputs[0].shape[1:]
        if shape is None:
            return
        shape = (None,) + tuple(shape)  # build takes the batch axis first, as Keras's
        try:
            self.build(shape)
        except ValueError as e:
            # the new layer does not fit: the model as it was
            layer = self._stack.pop()
            self.layers = list(self._stack)
            if self._stack:
                self.build(shape)
            raise ValueError(f"[{where}] {type(layer).__name__} '{layer.name}' cannot follow "
                             f"the model's layers: {e}") from None

    def build(self, input_shape=None):
        """Fixes every layer's shapes and creates the parameters (seeded)."""
        if input_shape is None:
            sample = self._declared_input or (
                self._stack[0].declared_input_shape if self._stack else None)
            input_shape = None if sample is None else (None,) + tuple(sample)
        if input_shape is None:
            raise ValueError("[Sequential.build] input_shape is required")
        shape = tuple(input_shape)
        if shape and shape[0] is None:
            shape = shape[1:]
        if not self._stack:
            raise ValueError("[Sequential.build] the model has no layers")
        inputs = Input(shape, dtype=self._declared_dtype or self.dtype)
        h = inputs
        for i, layer in enumerate(self._stack):
            try:
                h = layer(h)
            except ValueError as e:
                raise ValueError(f"layer {i} ({layer.kind}): {e}") from None
            if isinstance(h, list):
                raise ValueError(f"[Sequential] layer {i} ({layer.kind}) has several outputs; "
                                 "use the functional API")
        self._init_graph(inputs, h)
        self.layers = [l for l in self.layers if l is not self]
        return self


def _from_py_dataset(x, where):
    """A keras.utils.PyDataset as a tessera Dataset (fit, evaluate and
    predict read those)."""
    from .utils import PyDataset  # noqa: PLC0415

    return x._to_dataset(where) if isinstance(x, PyDataset) else x
