"""The Model class: functional (`Model(inputs, outputs)`), `Sequential`, and
subclassed (`class M(Model)` with `call`), with Keras's compile, fit,
evaluate, predict, summary, weights and saving.

The training step of `fit` is one program of tessera's language — forward,
backward (by the core's autodiff) and the optimizer update — written from the
model's graph, compiled once and run for every mini-batch with the GIL
released. Python only slices batches, passes arrays (without copies), runs
callbacks and prints progress.

This module holds the graph, building, weights, summary and saving; compile.py,
training.py and inference.py the rest (mixins); sequential.py the Sequential.
"""

from __future__ import annotations

import math
import os
import re
from typing import Optional

import numpy as np

from ..callbacks import History
from ..data_axis import DataAxisMixin
from ..dtype_policies import computed_name, global_policy
from ..functional import call_layer, clone_graph, graph_layers
from ..layers import InputLayer, Layer
from ..layers.base import _auto_name, _with_batch
from ..random import default_seed
from ..json_config import model_to_json
from ..params import DeferredValues, initial_value, value_spec
from ..programs import ProgramsMixin
from ..registry import INTERNAL_MODEL_NAME, is_model
from ..saving import (_architecture, load_weights_into, model_from_config,
                      save_file, save_model)
from ..step_overrides import overridden_step
from ..tape_steps import adopt_sublayers, uses_tape_steps
from ..string_inputs import split_fronts, split_group_fronts
from ..symbolic import GraphWriter, Input, KerasTensor, stand_in_input, user_location
from .. import tree as _tree
from ..varlen import VarLenMixin
from ..zero import ZeroMixin
from ._common import _as_list, _Compiled, _draws_deferred, _own_initializer, _readable_bytes
from .compile import CompileMixin
from .inference import InferenceMixin
from .trackers import TrackersMixin
from .training import TrainingMixin


class ModelWeights(list):
    """model.weights: a list of Variables, as Keras's (iterating it, len()
    and integer indexes see the Variables), which is also a read-only
    mapping from tessera's variable names to the arrays (weights["l0_kernel"],
    keys(), values(), items(), `in`), as tessera's earlier dict."""

    def __init__(self, variables, arrays: dict):
        super().__init__(variables)
        self._arrays = arrays

    def __getitem__(self, key):
        if isinstance(key, str):
            if key not in self._arrays:
                raise KeyError(f"[Model.weights] no weight named {key!r}; names: "
                               f"{list(self._arrays)[:20]}")
            return self._arrays[key]
        return super().__getitem__(key)

    def __contains__(self, key):
        if isinstance(key, str):
            return key in self._arrays
        return any(v is key for v in self)

    def keys(self):
        return self._arrays.keys()

    def values(self):
        return self._arrays.values()

    def items(self):
        return self._arrays.items()

    def get(self, key, default=None):
        return self._arrays.get(key, default)

def _cut_at_inputs(ins: list, outs: list):
    """Keras's functional model given a layer's output among its inputs (the backend-agnostic
    structured_data_classification_from_scratch's Normalization outputs): that tensor becomes
    a new Input of its shape and dtype and the graph is cut there (the layers before it are
    not the model's: its data goes in after them). The graph is recorded again on the new
    inputs; the given Inputs stay."""
    new_ins = [t if t.op == "input" else
               Input(batch_shape=t.shape, dtype=t.dtype) for t in ins]
    return new_ins, clone_graph(outs, ins, new_ins)


class Model(TrainingMixin, InferenceMixin, CompileMixin, TrackersMixin, DataAxisMixin, ZeroMixin, ProgramsMixin,
            VarLenMixin, Layer):
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

    def __init__(self, inputs=None, outputs=None, name: Optional[str] = None, seed=None,
                 dtype=None, trainable: bool = True, **kwargs):
        if name is None and type(self) is Model:
            name = _auto_name("Functional")  # Keras 3's name of Model(inputs, outputs)
        super().__init__(name=name, trainable=trainable, **kwargs)
        # None: the global policy's (mixed_precision.set_global_policy)
        dtype = computed_name(dtype, self.kind) or global_policy().name
        if dtype not in ("float32", "float64"):
            raise ValueError(f"[{self.kind}] dtype must be 'float32' or 'float64', got {dtype!r}")
        self.dtype = dtype
        # None: 0, or after utils.set_random_seed the global stream's next (so the global
        # seed varies the initial weights, as Keras's)
        self.seed = default_seed() if seed is None else seed
        self._layers: list = []  # the layers that compute (no InputLayer)
        self._input_layers: list = []  # a functional model's, as Keras lists them
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
        """Keras's `model.input`: the Input tensor (a list for several inputs, a
        dict for a dict of inputs)."""
        ins = self._graph_tensors("input")
        if getattr(self, "_input_keys", None):
            return dict(zip(self._input_keys, ins))
        return list(ins) if getattr(self, "_multi_in", False) or len(ins) > 1 else ins[0]

    @property
    def output(self):
        """Keras's `model.output`: the output tensor (a list for several outputs, a
        dict for a dict of outputs)."""
        outs = self._graph_tensors("output")
        if getattr(self, "_output_tree", None) is not None:
            return _tree.pack_sequence_as(self._output_tree, list(outs))
        if getattr(self, "_output_keys", None):
            return dict(zip(self._output_keys, outs))
        return list(outs) if getattr(self, "_multi_out", False) or len(outs) > 1 else outs[0]

    def _keyed(self, tensors, what: str):
        """(the keys, the values) of a dict of tensors; (None, tensors) otherwise."""
        if not isinstance(tensors, dict):
            return None, tensors
        for k in tensors:
            if not isinstance(k, str):
                raise TypeError(f"[{self.kind}] the keys of a dict of {what} must be strings, "
                                f"got {k!r}")
        return list(tensors), list(tensors.values())

    def _init_graph(self, inputs, outputs):
        # Keras: a dict of inputs takes data dicts by its keys; a dict of
        # outputs names the outputs by its keys
        self._input_keys, inputs = self._keyed(inputs, "inputs")
        self._output_keys, outputs = self._keyed(outputs, "outputs")
        # Keras: a nested list/tuple of outputs (involution's [layer.output, ...] of
        # (output, kernel) pairs) runs as its leaves; results come back in that structure
        self._output_tree = None
        if isinstance(outputs, (list, tuple)) and any(_tree.is_nested(o) for o in outputs):
            self._output_tree, outputs = outputs, _tree.flatten(outputs)
        ins, outs = _as_list(inputs), _as_list(outputs)
        if all(isinstance(t, KerasTensor) for t in ins + outs) and any(
                t.op != "input" for t in ins):
            ins, outs = _cut_at_inputs(ins, outs)
            inputs = type(inputs)(ins) if isinstance(inputs, (list, tuple)) else ins[0]
            if self._output_tree is None:
                outputs = type(outputs)(outs) if isinstance(outputs, (list, tuple)) else outs[0]
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
        given = list(ins)
        ins, self._string_fronts = split_fronts(self.kind, ins)  # string Inputs' layers
        # a FeatureSpace's raw Inputs -> its encoded features (string_inputs.py)
        ins, self._group_fronts = split_group_fronts(self.kind, ins, outs, GraphWriter._inputs)
        if self._group_fronts:  # the dict's keys name the raw inputs, which the plan keeps
            self._group_fronts["keys"], self._input_keys = self._input_keys, None
        self._inputs, self._outputs = ins, outs
        self._multi_in = isinstance(inputs, (list, tuple))
        self._multi_out = isinstance(outputs, (list, tuple))
        order = {}  # (minus depth, walk index) of each layer and ("in", id) of each Input
        leaves, top = graph_layers(outs, keys=order)
        # a subclassed model's own weights (add_weight in its build: the perceiver's latent
        # array) are its first, as Keras lists them
        self._layers = [l for l in leaves if l is not self or l.params]
        # the layers called in the graph, as Keras's model.layers lists them
        # (a user's layer as itself; _layers has its sublayers, for the weights)
        self._top_layers = [l for l in top if l is not self]
        subclassed = any(l is self for l in top)
        if subclassed:  # a subclassed model: its tracked sublayers (Keras's)
            self._top_layers = self._sublayers()
        # Keras lists a functional model's inputs first, as InputLayers
        # (model.layers[0], get_layer("input_name"), summary's first rows); a subclassed
        # model has none (its layers are its sublayers: model.layers[0] is the first)
        self._input_layers = [] if subclassed else [
            InputLayer(input_tensor=t, name=t.name or getattr(t, "input_layer_name", None))
            for t in given]
        for t, layer in zip(given, self._input_layers):
            t.name = layer.name  # an unnamed Input takes its layer's ("input_layer_3"), as
            #                      Keras's do, so a saved config rebuilds the same names
        # Keras lists a functional model's InputLayers among its layers by depth, as the
        # others (an Input read only near the outputs, captcha_ocr's labels, comes late)
        self.__dict__["_layer_keys"] = {id(layer): order.get(("in", t.id), (-(1 << 30), 0))
                                        for t, layer in zip(given, self._input_layers)}
        self.__dict__["_layer_keys"].update({id(l): order[id(l)] for l in self._top_layers
                                             if id(l) in order})
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
            if t.op == "input" and t.id not in ids and not getattr(t, "carried_state", False):
                # (a stateful layer's carried states: predict feeds them, rnn_states.py)
                raise ValueError(f"[{self.kind}] the outputs depend on an Input made at {t.where} "
                                 "that is not among the model's inputs")
            stack.extend(GraphWriter._inputs(t))

    def _assign_vars(self):
        self._var_of, self._owner = {}, {}
        for i, layer in enumerate(self._layers):
            for j, p in enumerate(layer.params):
                base = p.name if re.fullmatch(r"[A-Za-z_]\w*", p.name) else f"w{j}"
                var = f"l{i}_{base}"
                self._var_of[(id(layer), p.name)] = var
                self._owner[var] = (layer, p)

    def _create_values(self):
        defer = _draws_deferred()
        for i, layer in enumerate(self._layers):
            if self.name != INTERNAL_MODEL_NAME or "_model_dtype" not in layer.__dict__:
                # (its dtype_policy; an eager call's own model on float64 data leaves the
                # dtype of a layer a model of the user's already gave one, as Keras's)
                layer.__dict__["_model_dtype"] = self.dtype
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
        keys = getattr(self, "_input_keys", None)
        if keys and isinstance(inputs, dict):
            # Keras: a model made on a dict of Inputs takes a dict by its keys
            # (the perceiver's cross-attention module, called on its latent and data arrays)
            missing = [k for k in keys if k not in inputs]
            if missing:
                raise ValueError(f"[{self.name}] the model's inputs are the dict keys {keys}; "
                                 f"called with a dict without {missing} (keys "
                                 f"{sorted(inputs)}, at {user_location()})")
            inputs = [inputs[k] for k in keys]
        new = _as_list(inputs)
        if len(new) != len(self._inputs):
            raise ValueError(f"[{self.name}] the model has {len(self._inputs)} inputs, called "
                             f"with {len(new)}")
        outs = clone_graph(self._outputs, self._inputs, new)
        return self._as_declared(outs)

    def _as_declared(self, outs):
        """Per-output values in the structure the outputs were given: a dict by
        the keys of a dict of outputs, a list, or the one value."""
        if getattr(self, "_output_tree", None) is not None:
            return _tree.pack_sequence_as(self._output_tree, list(outs))
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
        if type(self).call is Model.call and overridden_step(self, "train_step"):
            # (fit runs its train_step without building it: tape_steps.py)
            raise NotImplementedError(
                f"[Model.call] Model {type(self).__name__} does not have a call() method "
                "implemented (Keras's words): its train_step trains the sub-models it holds, "
                "which fit runs (docs/nn.md, \"GANs\"); evaluate, predict and calling the "
                "model need a call, as in Keras; call its sub-models instead "
                f"(at {user_location()})")
        inputs = [stand_in_input(s, dtype=self._input_dtype(k)) for k, s in enumerate(shapes)]
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
            inputs[k] = stand_in_input(tuple(a.shape[1:]), dtype=dtype, name=k)
        self.built = True
        try:
            outputs = call_layer(self, inputs, (), {})
        except Exception:
            self.built = False
            raise
        self._init_graph(list(inputs.values()), outputs)

    def _input_dtype(self, k: int) -> str:
        data = self.__dict__.get("_data_dtypes") or []  # (fit's arrays: _ensure_built)
        return (data[k] if k < len(data) else None) or self.dtype

    def _adopt_sublayers(self) -> bool:
        """A model with no call whose train_step trains the sub-models it
        holds (a GAN's): its weights are theirs, in the order Keras tracks
        them (tape_steps.py). False for any other model."""
        if self._inputs or not uses_tape_steps(self):
            return False
        adopt_sublayers(self)
        return True

    def _check_built(self, where: str):
        if where in ("get_weights", "set_weights") and self._adopt_sublayers():
            return
        if not self._inputs and uses_tape_steps(self):
            raise ValueError(
                f"[{where}] {type(self).__name__} defines no call: its train_step trains the "
                "sub-models it holds (a GAN's), and it is never built (Keras refuses to save "
                "it too); save its sub-models (e.g. model.generator.save(path)) instead")
        if not self.built or not self._inputs:
            raise RuntimeError(f"[{where}] the model is not built: give it an input shape "
                               "(input_shape= on the first layer, nn.Input, or model.build)")

    # ------------------------------------------------------------------ weights

    @property
    def weights(self) -> "ModelWeights":
        """Keras's model.weights: the Variables, layer by layer in Keras's
        order (`w.path`, `w.numpy()`, `w.assign(...)`); also a mapping from
        tessera's variable names (l<layer index>_<name>) to the arrays
        (`model.weights["l0_kernel"]`, keys(), items()). Under ZeRO stage 3
        during fit the trainable ones are gathered from the data group first,
        and under pipeline stages the other stages' weights from the pipeline
        group (collectives: every member calls it)."""
        self._whole_held()
        self._adopt_sublayers()
        arrays = {v: layer._values[p.name] for v, (layer, p) in self._owner.items()}
        return ModelWeights([self._owner[v][0]._variable(self._owner[v][1].name)
                             for v in arrays], arrays)

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

    @property
    def _lr_override(self):
        """The learning rate a callback set (LearningRateScheduler,
        ReduceLROnPlateau), or None: kept on the optimizer, so that
        `optimizer.learning_rate` reports it and setting that clears it."""
        compiled = self.__dict__.get("_compiled")
        return None if compiled is None else getattr(compiled.optimizer, "_override", None)

    @_lr_override.setter
    def _lr_override(self, value):
        compiled = self.__dict__.get("_compiled")
        if compiled is not None:
            compiled.optimizer._override = value

    def _variable_of_weight(self, var: str):
        """The Variable of the program's weight `var` (None: not one of the model's)."""
        owner = self._owner.get(var)
        return owner[0]._variable(owner[1].name) if owner is not None else None

    def _set(self, var: str, value):
        layer, p = self._owner[var]
        layer._values[p.name] = value

    @property
    def trainable_weights(self) -> list:
        """The trainable Variables (Keras's), in the order of `weights`."""
        self._whole_held()
        self._adopt_sublayers()
        return [self._owner[v][0]._variable(self._owner[v][1].name) for v in self._params(True)]

    @property
    def non_trainable_weights(self) -> list:
        self._whole_held()
        return [self._owner[v][0]._variable(self._owner[v][1].name)
                for v in self._params(False)]

    @property
    def compiled(self) -> bool:
        """Keras's `model.compiled`: whether compile() was called."""
        return self.__dict__.get("_compiled") is not None

    @property
    def loss(self):
        """The loss compile() was given (Keras's `model.loss`), None before; a
        subclass may set it (as Keras's plain attribute)."""
        if "_loss_set" in self.__dict__:
            return self.__dict__["_loss_set"]
        compiled = self.__dict__.get("_compiled")
        return None if compiled is None else getattr(compiled, "given_loss", None)

    @loss.setter
    def loss(self, value):
        self.__dict__["_loss_set"] = value

    @property
    def layers(self) -> list:
        """The model's layers as Keras lists them: a functional model's
        InputLayers first, then the layers in the order they compute
        (a Sequential's without its InputLayer)."""
        top = self.__dict__.get("_top_layers")
        if top is None:
            return self._input_layers + self._layers
        keys = self.__dict__.get("_layer_keys") or {}
        if all(id(l) in keys for l in self._input_layers + top):  # (stable: ties as listed)
            return sorted(self._input_layers + top, key=lambda l: keys[id(l)])
        return self._input_layers + top

    @layers.setter
    def layers(self, layers) -> None:
        self._layers = list(layers)
        self.__dict__["_top_layers"] = None

    def _trainable(self, layer, p) -> bool:
        frozen = self.__dict__.get("_step_frozen")  # weights a train_step does not update
        if frozen and self._var_of.get((id(layer), p.name)) in frozen:
            return False
        return p.trainable and layer.trainable and self.trainable

    def _params(self, trainable: bool) -> list:
        return [v for v, (layer, p) in self._owner.items()
                if self._trainable(layer, p) == trainable]

    def count_params(self) -> int:
        return sum(math.prod(q.shape) for layer in self._layers for q in layer.params)

    def get_layer(self, name: Optional[str] = None, index: Optional[int] = None):
        """A layer by name or by index, like Keras's get_layer."""
        if index is not None:
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"[get_layer] no layer named {name!r}; layers: "
                         f"{[l.name for l in self.layers]}")

    @property
    def output_names(self) -> list:
        """Keras's, of a functional model: the names of the layers making its outputs (a
        dict's too, by layer, not key); Sequential and subclassed models have none."""
        if "_output_names_set" in self.__dict__:
            return self.__dict__["_output_names_set"]
        if not self._functional:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                 "'output_names' (Keras's functional models have it)")
        names = []
        for t in self._outputs:
            node = t.args[0] if t.op == "item" else t
            names.append(node.args[0].name if node.op in ("layer", "input") and node.args
                         and hasattr(node.args[0], "name") else
                         t.name or getattr(t, "fn", None) or t.op)  # (an op's: "add")
        return names

    @output_names.setter
    def output_names(self, value):
        self.__dict__["_output_names_set"] = list(value)

    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False,
                show_trainable=False, layer_range=None):
        """Prints each layer's type, output shape and parameter count, and
        the totals with their bytes, as Keras's summary. An unbuilt model
        (a Sequential without an input shape) lists its layers with shape
        "?" and "0 (unbuilt)" parameters, as Keras does. Keras's arguments:
        `expand_nested` also lists the layers inside nested models and users'
        layers (indented), `show_trainable` adds a "Trainable" column (Y/N),
        `layer_range=(first, last)` keeps the layers from the one named first
        to the one named last, `line_length` and `positions` (the columns'
        right ends, as fractions of the line or characters) size the columns."""
        print_fn = print if print_fn is None else print_fn
        # a GAN (no call): its sub-models, as Keras lists them
        built = (self.built and bool(self._inputs)) or self._adopt_sublayers()
        layers = list(self.layers)
        if layer_range is not None:
            names = [layer.name for layer in layers]
            if not isinstance(layer_range, (list, tuple)) or len(layer_range) != 2 or \
                    any(n not in names for n in layer_range):
                raise ValueError(f"[summary] layer_range must be two of the model's layer names "
                                 f"(first, last), got {layer_range!r}; the names: {names}")
            a, b = names.index(layer_range[0]), names.index(layer_range[1])
            layers = layers[min(a, b):max(a, b) + 1]
        rows = [("Layer (type)", "Output Shape", "Param #")
                + (("Trainable",) if show_trainable else ())]

        def row(layer, depth):
            # a user's class by its name (a subclass of Conv2D is not "Conv2D"), as Keras
            kind = layer.kind if type(layer).__module__.startswith("tessera.") \
                else type(layer).__name__
            name = ("  " * depth + "└ " if depth else "") + f"{layer.name} ({kind})"
            flag = (("Y" if layer.trainable else "N"),) if show_trainable else ()
            if not built:
                return (name, "?", "0 (unbuilt)") + flag
            out = layer._out_shape
            if getattr(layer, "carried", None) is not None and not layer.return_state:
                out = out[0]  # a stateful layer's carried states are not its outputs
            shape = str(_with_batch(out) if out is not None else (None,))
            return (name, shape, f"{layer.count_params():,}") + flag

        def add(layer, depth):
            rows.append(row(layer, depth))
            if expand_nested:
                inner = layer.layers if isinstance(layer, Model) else layer._sublayers()
                for sub in inner:
                    add(sub, depth + 1)

        for layer in layers:
            add(layer, 0)
        ncol = len(rows[0])
        widths = [max(len(r[k]) for r in rows) + 2 for k in range(ncol)]
        if positions is not None or line_length is not None:
            total = line_length or sum(widths)
            ends = list(positions) if positions is not None else \
                [total * f for f in ((0.45, 0.85, 1.0) if ncol == 3 else (0.4, 0.7, 0.85, 1.0))]
            if len(ends) != ncol:
                raise ValueError(f"[summary] positions must give {ncol} column ends, got "
                                 f"{positions!r}")
            ends = [int(e * total) if e <= 1 else int(e) for e in ends]
            widths = [max(1, e - s) for s, e in zip([0] + ends[:-1], ends)]
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
        # Keras's optimizer params, once fit built the optimizer: its state, its iteration
        # count and its learning rate (4 bytes each, as Keras-on-JAX's variables)
        state = self._opt_state if self._compiled is not None else None
        opt = [2, 8] if state is not None else None
        for a in (state or {}).values():
            if a is not None:
                opt[0] += int(np.size(a))
                opt[1] += int(np.size(a)) * np.asarray(a).dtype.itemsize
        total = [counts[True][k] + counts[False][k] + (opt[k] if opt else 0) for k in range(2)]
        lines = [("Total", total), ("Trainable", counts[True]), ("Non-trainable", counts[False])]
        for what, (n, size) in lines + ([("Optimizer", opt)] if opt else []):
            print_fn(f" {what} params: {n:,} ({_readable_bytes(size)})")

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

    def save_weights(self, path, overwrite=True, max_shard_size=None):
        """Writes the weights in tessera's weights format (docs/nn.md); Keras's
        arguments: overwrite=False refuses an existing file (Keras asks), and
        max_shard_size is refused (one file)."""
        self._check_built("save_weights")
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"[save_weights] {path!r} exists and overwrite=False (at "
                                  f"{user_location()})")
        if max_shard_size is not None:
            raise ValueError(f"[save_weights] max_shard_size is not supported: one file, got "
                             f"{max_shard_size!r} (at {user_location()})")
        save_file(path, self.whole_weights(), {}, "save_weights")

    def load_weights(self, path, skip_mismatch=False):
        """Reads weights written by save_weights (or model.save); every name,
        shape and dtype must match this model, and the checksum must be
        right, or nothing is loaded (skip_mismatch=True is refused)."""
        self._check_built("load_weights")
        if skip_mismatch:
            raise ValueError("[load_weights] skip_mismatch=True is not supported: every name, "
                             f"shape and dtype must match (at {user_location()})")
        load_weights_into(self, path)

    def get_config(self) -> dict:
        """A functional or Sequential model: its architecture (layers'
        configurations and the graph), which Model.from_config rebuilds with
        new weights; a subclassed model: its constructor's arguments."""
        if self._functional or is_model(self, "Sequential"):
            self._check_built("get_config")
            return _architecture(self, "get_config")
        return super().get_config()

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A new model (new weights) from get_config's dict."""
        if isinstance(config, dict) and config.get("kind") in ("Sequential", "Functional",
                                                                "Subclassed"):
            return model_from_config(config, custom_objects, f"{cls.__name__}.from_config")
        if not isinstance(config, dict):
            raise TypeError(f"[{cls.__name__}.from_config] config must be a dict, got "
                            f"{type(config).__name__}")
        return cls(**config)

    def to_json(self, **kwargs) -> str:
        """The architecture as JSON text (models.model_from_json rebuilds it)."""
        return model_to_json(self, **kwargs)

    def save(self, path):
        """Writes the model: architecture, weights, compile settings and
        optimizer state (tessera's checksummed format, no code; docs/nn.md)."""
        save_model(self, path, training_state=None)

    def save_checkpoint(self, path):
        """Writes the whole training state (weights, optimizer state and
        step, schedule, epoch and position in the epoch), for fit(resume_from=)."""
        save_model(self, path, training_state=self._training_state())
