"""Masking and the wrappers of recurrent and other layers, like Keras's:
``Masking``, ``Bidirectional``, ``TimeDistributed``, ``SpectralNormalization``, and
``RNN`` with the cells ``SimpleRNNCell``, ``LSTMCell``, ``GRUCell`` (a list of cells, or
``StackedRNNCells``, stacks them).

A wrapper holds the layers it wraps and declares their parameters as its
own (Keras's order: the forward layer's, then the backward layer's; each
cell's in order), so that ``get_weights`` / ``set_weights`` read and write
the same list as Keras's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..symbolic import user_location
from ..initializers import TruncatedNormal
from ..params import Param
from .base import Layer, _auto_name
from .conv_lstm import _ConvLSTM
from .keras_config import layer_dict
from .recurrent import GRU, LSTM, SimpleRNN, _RNN
from .rnn_states import check_state_shapes, split_states_call
from .user_cells import UserCellLayer, is_user_cell

__all__ = ["Masking", "Bidirectional", "TimeDistributed", "SpectralNormalization", "RNN",
           "SimpleRNNCell", "LSTMCell", "GRUCell", "StackedRNNCells", "Wrapper"]


class Wrapper(Layer):
    """Keras's Wrapper: the base of a user's layer that wraps another layer
    (``self.layer``), with the wrapped layer's config saved as Keras saves it.
    A subclass defines ``call`` (e.g. ``return self.layer(x) * 2``)."""

    def __init__(self, layer, **kwargs):
        if not isinstance(layer, Layer):
            raise TypeError(f"[{type(self).__name__}] layer must be a Layer, got {layer!r}")
        super().__init__(**kwargs)
        self.layer = layer

    def get_config(self) -> dict:
        """Keras's: the Layer's config and ``"layer"``, the wrapped layer's serialized
        dict (what from_config and load_model build it from)."""
        config = super().get_config()
        config["layer"] = layer_dict(self.layer)
        return config


class Masking(Layer):
    """Masks the timesteps whose features all equal `mask_value` (Keras's
    Masking): they are set to zeros, and the output carries the mask
    (batch, timesteps) that the layers after it read."""

    kind = "Masking"
    supports_masking = True

    def __init__(self, mask_value=0.0, name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if isinstance(mask_value, bool) or not isinstance(mask_value, (int, float)):
            raise TypeError(f"[Masking] mask_value must be a number, got {mask_value!r}")
        self.mask_value = float(mask_value)

    def compute_output_shape(self, s):
        if len(s) < 2:
            raise ValueError(f"[Masking] layer {self.name!r} expects inputs (batch, timesteps, "
                             f"features...), got per-sample shape {tuple(s)}")
        return s

    def forward(self, x, p, ctx):
        keep = ctx.define("keep", f"any(not_equal({x}, {self.mask_value!r}), axis=-1, "
                                  "keepdims=true)")
        return f"where({keep}, {x}, zeros_like({x}))"

    def output_mask(self, inputs, mask):

        return np.any(inputs[0] != self.mask_value, axis=-1)


def _removeprefix(name: str, prefix: str) -> str:
    return name[len(prefix):] if name.startswith(prefix) else name


def _own_params(sub: Layer, prefix: str) -> list:
    return [replace(q, name=prefix + q.name) for q in sub.params]


def _sub_params(sub: Layer, p: dict, prefix: str) -> dict:
    return {q.name: p[prefix + q.name] for q in sub.params}


def _rebuilt(layer: Layer, **changes) -> Layer:
    """A new layer of the same class and arguments as `layer`, some changed
    (a user's cell made anew from its config: its own weights)."""
    args, kwargs = layer._init_args
    if isinstance(layer, RNN):
        args = (_fresh_cells(args[0]),) + tuple(args[1:]) if args else args
        if "cell" in kwargs:
            kwargs = dict(kwargs, cell=_fresh_cells(kwargs["cell"]))
    return type(layer)(*args, **dict(kwargs, **changes))


def _fresh_cells(cell):
    if isinstance(cell, StackedRNNCells):
        return StackedRNNCells([_fresh_cells(c) for c in cell.cells])
    if isinstance(cell, (list, tuple)):
        return [_fresh_cells(c) for c in cell]
    if is_user_cell(cell):
        return type(cell).from_config(cell.get_config())
    return cell


class Bidirectional(Layer):
    """Runs a recurrent layer forwards and a copy of it backwards over the
    sequence and merges the two (Keras's Bidirectional): merge_mode
    "concat" (default), "sum", "mul", "ave", or None (both outputs, a list).
    With return_sequences the backward outputs are put back in time order,
    and masked steps output zeros (Keras sets zero_output_for_mask)."""

    kind = "Bidirectional"
    mask_input = True
    MERGE_MODES = ("concat", "sum", "mul", "ave", None)

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None, name=None,
                 input_shape=None, **kwargs):
        if not isinstance(layer, RNN) and (not isinstance(layer, _RNN) or
                                           type(layer).forward not in (_RNN.forward,
                                                                       _ConvLSTM.forward)):
            raise TypeError(f"[Bidirectional] wraps a SimpleRNN, LSTM, GRU, ConvLSTM or RNN "
                            f"layer, got "
                            f"{type(layer).__name__}")
        if getattr(layer, "stateful", False):
            raise ValueError(f"[Bidirectional] layer {layer.name!r} is stateful: a stateful "
                             "layer inside Bidirectional is not supported; use two stateful "
                             "layers (one with go_backwards=True) and merge them")
        if merge_mode not in self.MERGE_MODES:
            raise ValueError(f"[Bidirectional] merge_mode must be one of {self.MERGE_MODES}, got "
                             f"{merge_mode!r}")
        if weights is not None:
            raise ValueError("[Bidirectional] weights= is not supported; call set_weights after "
                             "building the model")
        super().__init__(name, input_shape, **kwargs)
        self.merge_mode = merge_mode
        self.return_sequences = layer.return_sequences
        self.return_state = layer.return_state
        self.forward_layer = layer
        given_backward = backward_layer is not None
        if backward_layer is None:
            backward_layer = _rebuilt(layer, go_backwards=not layer.go_backwards,
                                      name="backward_" + layer.name)
        elif not isinstance(backward_layer, (_RNN, RNN)) or \
                backward_layer.return_sequences != layer.return_sequences or \
                backward_layer.go_backwards == layer.go_backwards:
            raise ValueError("[Bidirectional] backward_layer must be a recurrent layer with the "
                             "same return_sequences as layer and the opposite go_backwards")
        self.backward_layer = backward_layer
        # Keras's names of the two inner layers (its variables' paths)
        self._sub_names = {"forward_": "forward_" + _removeprefix(layer.name, "forward_"),
                           "backward_": backward_layer.name if given_backward else
                           "backward_" + _removeprefix(layer.name, "backward_")}
        self.forward_layer._weights_owner = (self, "forward_")
        self.backward_layer._weights_owner = (self, "backward_")
        for sub in (self.forward_layer, self.backward_layer):
            sub.zero_output_for_mask = sub.return_sequences  # as Keras forces it

    def get_config(self) -> dict:
        """Keras's: both layers as Keras's dicts, named as the weights' paths
        name them (forward_lstm, backward_lstm); the loaded model's backward
        layer is this one, not a new copy."""
        config = super().get_config()
        config.pop("weights", None)
        for key, prefix, sub in (("layer", "forward_", self.forward_layer),
                                 ("backward_layer", "backward_", self.backward_layer)):
            config[key] = layer_dict(sub, self._sub_names[prefix])
            if "zero_output_for_mask" in config[key]["config"]:  # (as the constructor set it)
                config[key]["config"]["zero_output_for_mask"] = sub.zero_output_for_mask
        return config

    def split_call(self, inputs, *args, **kwargs):
        """Keras's: initial_state= holds the forward layer's states, then the
        backward layer's (cut in two halves)."""
        fw = self.forward_layer
        kwargs = dict(kwargs)
        initial = kwargs.get("initial_state")
        if isinstance(fw, RNN) and fw.stacked and initial is not None:
            initial = list(initial) if isinstance(initial, (list, tuple)) else [initial]
            half = len(initial) // 2
            kwargs["initial_state"] = fw._flat_states(initial[:half]) + \
                self.backward_layer._flat_states(initial[half:])
        return split_states_call(self, fw._n_states() + self.backward_layer._n_states(),
                                 inputs, args, kwargs)

    def _weight_subpath(self, pname: str) -> str:
        for prefix, sub in (("forward_", self.forward_layer), ("backward_", self.backward_layer)):
            if pname.startswith(prefix):
                return f"{self._sub_names[prefix]}/{sub._weight_subpath(pname[len(prefix):])}"
        return pname

    def _n_states(self):
        return self.forward_layer._n_states() + self.backward_layer._n_states()

    def __call__(self, *args, **kwargs):
        res = Layer.__call__(self, *args, **kwargs)
        fw, bw = self.forward_layer, self.backward_layer
        if not (self.return_state and isinstance(fw, RNN) and fw.stacked and
                isinstance(res, list)):
            return res
        n_out = len(res) - self._n_states()
        split = n_out + fw._n_states()
        return list(res[:n_out]) + fw._grouped(res[n_out:split]) + bw._grouped(res[split:])

    def compute_output_shape(self, s):
        if isinstance(s, list):  # [sequences, *forward states, *backward states]
            n = self.forward_layer._n_states()
            fw = self.forward_layer.compute_output_shape([s[0]] + s[1:1 + n])
            bw = self.backward_layer.compute_output_shape([s[0]] + s[1 + n:])
        else:
            fw = self.forward_layer.compute_output_shape(s)
            bw = self.backward_layer.compute_output_shape(s)
        self.params = _own_params(self.forward_layer, "forward_") + \
            _own_params(self.backward_layer, "backward_")
        states = []
        if self.return_state:  # Keras: the output(s), then fw's states, then bw's
            states = list(fw[1:]) + list(bw[1:])
            fw, bw = fw[0], bw[0]
        if self.merge_mode is None:
            return [fw, bw] + states
        out = fw[:-1] + (fw[-1] + bw[-1],) if self.merge_mode == "concat" else fw
        return [out] + states if states else out

    def output_mask(self, inputs, mask):
        return mask if self.return_sequences else None

    def forward(self, x, p, ctx, mask=None):
        x_fw = x_bw = x
        if isinstance(x, (list, tuple)):  # initial_state= given: forward's, then backward's
            n = self.forward_layer._n_states()
            x_fw, x_bw = [x[0]] + list(x[1:1 + n]), [x[0]] + list(x[1 + n:])
        y = self.forward_layer.forward(x_fw, _sub_params(self.forward_layer, p, "forward_"),
                                       ctx, mask=mask)
        y_rev = self.backward_layer.forward(x_bw, _sub_params(self.backward_layer, p,
                                                              "backward_"), ctx, mask=mask)
        states = []
        if self.return_state:
            states = list(y[1:]) + list(y_rev[1:])
            y, y_rev = y[0], y_rev[0]
        out = self._merge(y, y_rev, ctx)
        if states:
            return (out if isinstance(out, list) else [out]) + states
        return out

    def _merge(self, y, y_rev, ctx):
        if self.return_sequences:
            y_rev = f"flip({y_rev}, axis=1)"
        y, y_rev = ctx.define("fw", y), ctx.define("bw", y_rev)
        if self.merge_mode == "concat":
            return f"concatenate(list({y}, {y_rev}), axis=-1)"
        if self.merge_mode == "sum":
            return f"({y} + {y_rev})"
        if self.merge_mode == "mul":
            return f"({y} * {y_rev})"
        if self.merge_mode == "ave":
            return f"(({y} + {y_rev}) / 2.0)"
        return [y, y_rev]


class TimeDistributed(Layer):
    """Applies a layer to every timestep (axis 1) of its input, with the
    same weights (Keras's TimeDistributed): the layer's weights are the
    wrapper's."""

    kind = "TimeDistributed"
    supports_masking = True

    def __init__(self, layer, name=None, input_shape=None, **kwargs):
        if not isinstance(layer, Layer) or layer._is_custom() or \
                getattr(layer, "multi_input", False) or getattr(layer, "mask_input", False):
            raise TypeError(f"[TimeDistributed] wraps a built-in layer of one input without "
                            f"masks (Dense, Conv2D, Dropout, ...), got {type(layer).__name__}")
        super().__init__(name, input_shape, **kwargs)
        self.layer = layer
        layer._weights_owner = (self, "")

    def get_config(self) -> dict:
        config = super().get_config()
        config["layer"] = layer_dict(self.layer)  # (Keras's dict of it)
        return config

    def _weight_subpath(self, pname: str) -> str:
        return f"{self.layer.name}/{self.layer._weight_subpath(pname)}"

    def compute_output_shape(self, s):
        if len(s) < 2:
            raise ValueError(f"[TimeDistributed] layer {self.name!r} expects inputs (batch, "
                             f"timesteps, ...), got per-sample shape {tuple(s)}")
        inner = self.layer.compute_output_shape(tuple(s[1:]))
        if isinstance(inner, list):
            raise ValueError(f"[TimeDistributed] the wrapped layer {self.layer.name!r} has "
                             "several outputs")
        self.layer._in_shape, self.layer._out_shape = tuple(s[1:]), inner
        self.params = list(self.layer.params)
        return (s[0],) + tuple(inner)

    def forward(self, x, p, ctx):
        shape = ctx.input_shapes[0]
        steps, inner_in = shape[1], tuple(shape[2:])
        inner_out = self.layer.compute_output_shape(inner_in)
        flat = ctx.define("td", f"reshape({x}, {list((-1,) + inner_in)})")
        saved = ctx.input_shapes
        ctx.input_shapes = [(None,) + inner_in]
        try:
            y = self.layer.forward(flat, p, ctx)
        finally:
            ctx.input_shapes = saved
        return f"reshape({y}, {list((-1, steps) + tuple(inner_out))})"


class SpectralNormalization(Layer):
    """Keras's SpectralNormalization: in training the wrapped layer's kernel (or
    embeddings) is divided by its largest singular value ``sigma``, estimated
    by ``power_iterations`` steps of power iteration from the non-trainable
    ``vector_u`` (updated each training step); in inference the kernel is used
    as it is. As Keras on JAX: the optimizer updates the kernel itself (the
    gradient flows through ``kernel / sigma``, sigma = v W u^T with u and v
    held constant)."""

    kind = "SpectralNormalization"

    def __init__(self, layer, power_iterations=1, name=None, input_shape=None, **kwargs):
        if not isinstance(layer, Layer) or layer._is_custom() or \
                getattr(layer, "multi_input", False) or getattr(layer, "mask_input", False):
            raise TypeError(f"[SpectralNormalization] wraps a built-in layer of one input with a "
                            f"kernel or embeddings (Dense, Conv2D, Embedding, ...), got "
                            f"{type(layer).__name__}")
        if isinstance(power_iterations, bool) or not isinstance(power_iterations, int) or \
                power_iterations <= 0:
            raise ValueError(f"[SpectralNormalization] power_iterations must be an int > 0, got "
                             f"{power_iterations!r}")
        super().__init__(name, input_shape, **kwargs)
        self.layer = layer
        self.power_iterations = power_iterations
        layer._weights_owner = (self, "")

    def get_config(self) -> dict:
        config = super().get_config()
        config["layer"] = layer_dict(self.layer)  # (Keras's dict of it)
        return config

    def _weight_subpath(self, pname: str) -> str:
        if pname == "vector_u":
            return pname
        return f"{self.layer.name}/{self.layer._weight_subpath(pname)}"

    def compute_output_shape(self, s):
        out = self.layer.compute_output_shape(tuple(s))
        if isinstance(out, list):
            raise ValueError(f"[SpectralNormalization] the wrapped layer {self.layer.name!r} "
                             "has several outputs")
        self.layer._in_shape, self.layer._out_shape = tuple(s), out
        inner = {q.name: q for q in self.layer.params}
        target = next((n for n in ("kernel", "embeddings") if n in inner), None)
        if target is None:
            raise ValueError(f"[SpectralNormalization] {type(self.layer).__name__} has no "
                             "weight 'kernel' nor 'embeddings'")
        self._target = target
        # Keras's order: the kernel (the wrapper tracks it), vector_u, the rest
        u = Param("vector_u", (1, inner[target].shape[-1]), TruncatedNormal(stddev=0.02),
                  trainable=False)
        self.params = [inner[target], u] + [q for n, q in inner.items() if n != target]
        return out

    def _power_iteration(self, w: str, u: str, define) -> tuple:
        """(u, v) after the power iterations from `u` on the matrix `w`
        (Keras's normalize: x * min(1 / ||x||, 1 / 1e-7))."""
        v = None
        for _ in range(self.power_iterations):
            v = define("sn_v", f"{u} @ transpose({w})")
            v = define("sn_v", f"{v} * minimum(1.0 / sqrt(sum(square({v}))), 1e7)")
            u = define("sn_u", f"{v} @ {w}")
            u = define("sn_u", f"{u} * minimum(1.0 / sqrt(sum(square({u}))), 1e7)")
        return u, v

    def _matrix(self, kernel: str) -> str:
        return f"reshape({kernel}, [-1, {self.params[1].shape[-1]}])"

    def forward(self, x, p, ctx):
        inner = dict(p)
        if ctx.training != "false":
            k = p[self._target]
            w = ctx.define("sn_w", self._matrix(k))
            u, v = self._power_iteration(w, p["vector_u"], ctx.define)
            u = ctx.define("sn_u", f"stop_gradient({u})")
            v = ctx.define("sn_v", f"stop_gradient({v})")
            sigma = ctx.define("sn_sigma", f"sum(({v} @ {w}) * {u})")
            zero = ctx.define("sn_zero", f"all(equal({k}, 0.0))")  # Keras keeps it as it is
            scaled = f"{k} / where({zero}, 1.0, {sigma})"
            if ctx.training != "true":
                scaled = f"where({ctx.training}, {scaled}, {k})"
            inner[self._target] = ctx.define("sn_kernel", scaled)
        return self.layer.forward(x, inner, ctx)

    def state_update(self, pname: str, name_of):
        """The training step's new ``vector_u`` (from the weights before the
        optimizer's update), as one expression; None for other weights."""
        if pname != "vector_u":
            return None
        lines, count = [], iter(range(1 << 20))
        k, u = name_of(self._target), name_of("vector_u")

        def define(tag, expr):
            name = f"{u}_{tag}{next(count)}"
            lines.append(f"define({name}, {expr})")
            return name

        w = define("w", self._matrix(k))
        new, _ = self._power_iteration(w, u, define)
        lines.append(f"where(all(equal({k}, 0.0)), {u}, {new})")
        return f"block({', '.join(lines)})"


class _Cell:
    """A recurrent cell: the arguments of the recurrent layer of one step."""

    layer_class = None

    def __init__(self, units, **kwargs):
        for k in ("return_sequences", "return_state", "go_backwards", "stateful", "unroll"):
            if k in kwargs:
                raise TypeError(f"[{type(self).__name__}] unexpected keyword argument {k!r} (it "
                                "is an argument of RNN)")
        self.units = units
        self.name = kwargs.pop("name", None) or _auto_name(type(self).__name__)
        self.kwargs = kwargs
        # checks the arguments now, as Keras does (named: no default name used up)
        self.layer_class(units, **dict(kwargs, name="cell"))

    def get_config(self) -> dict:
        """The cell's arguments (a model holding RNN(cell) saves them)."""
        return {"units": self.units, "name": self.name, **self.kwargs}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class SimpleRNNCell(_Cell):
    """The cell of SimpleRNN, for RNN(cell)."""

    layer_class = SimpleRNN


class LSTMCell(_Cell):
    """The cell of LSTM, for RNN(cell)."""

    layer_class = LSTM


class GRUCell(_Cell):
    """The cell of GRU, for RNN(cell)."""

    layer_class = GRU


class StackedRNNCells:
    """Cells run one above the other at each step (the same as a list of
    cells given to RNN)."""

    def __init__(self, cells, name=None, **kwargs):
        if kwargs:
            raise TypeError(f"[StackedRNNCells] unexpected keyword arguments {sorted(kwargs)}")
        self.cells = list(cells)
        self.name = name or _auto_name("StackedRNNCells")

    def get_config(self) -> dict:
        return {"cells": list(self.cells), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class RNN(Layer):
    """Keras's RNN over a cell (SimpleRNNCell, LSTMCell, GRUCell) or a stack
    of them (a list, or StackedRNNCells): the same results as the
    corresponding layers (a stack: the cells one above the other at each
    step, which gives the outputs of the layers run one after the other)."""

    kind = "RNN"
    mask_input = True

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False,
                 stateful=False, unroll=False, zero_output_for_mask=False, name=None,
                 input_shape=None, **kwargs):
        cells = cell.cells if isinstance(cell, StackedRNNCells) else \
            list(cell) if isinstance(cell, (list, tuple)) else [cell]
        for c in cells:
            if not isinstance(c, _Cell) and not is_user_cell(c):
                raise TypeError(f"[RNN] cell must be a SimpleRNNCell, LSTMCell or GRUCell, a "
                                f"Layer with state_size and call(inputs, states) (or a list of "
                                f"them), got {type(c).__name__}")
        if not cells:
            raise ValueError("[RNN] needs at least one cell")
        if stateful:
            raise ValueError("[RNN] stateful=True is not supported on RNN(cell) yet; use the "
                             "LSTM, GRU or SimpleRNN layer (stateful=True on arrays)")
        super().__init__(name, input_shape, **kwargs)
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.cells = cells
        # Keras: a list or StackedRNNCells takes and gives one state entry per cell
        self.stacked = isinstance(cell, (StackedRNNCells, list, tuple))
        self._stack_name = cell.name if isinstance(cell, StackedRNNCells) else \
            _auto_name("StackedRNNCells") if self.stacked else None
        self.stack = []
        for k, c in enumerate(cells):
            last = k == len(cells) - 1
            if is_user_cell(c):
                self.stack.append(UserCellLayer(
                    c, return_sequences=self.return_sequences or not last,
                    return_state=self.return_state,
                    go_backwards=self.go_backwards and k == 0, name=f"{self.name}_cell{k}"))
                continue
            sub = c.layer_class(c.units, **dict(
                c.kwargs, return_sequences=self.return_sequences or not last,
                return_state=self.return_state,
                go_backwards=self.go_backwards and k == 0,
                name=f"{self.name}_cell{k}"))
            self.stack.append(sub)

    def get_config(self) -> dict:
        config = super().get_config()
        if isinstance(config.get("cell"), (list, tuple)):
            # Keras: a list of cells is a StackedRNNCells, saved with its name
            # (the weights' paths name it)
            config["cell"] = StackedRNNCells(self.cells, name=self._stack_name)
        return config

    def _prefix(self, k):
        return "" if len(self.stack) == 1 else f"cell{k}_"

    def _weight_subpath(self, pname: str) -> str:
        # Keras: "rnn/lstm_cell/kernel", "rnn/stacked_rnn_cells/gru_cell/bias"
        for k, c in enumerate(self.cells):
            prefix = self._prefix(k)
            if pname.startswith(prefix) and (prefix or len(self.cells) == 1):
                inner = f"{c.name}/{pname[len(prefix):]}"
                return f"{self._stack_name}/{inner}" if self.stacked else inner
        return pname

    def _state_counts(self) -> list:
        return [sub._n_states() for sub in self.stack]

    def _n_states(self):
        return sum(self._state_counts())

    def _state_sizes(self, k) -> list:
        sub = self.stack[k]
        return list(sub.sizes) if isinstance(sub, UserCellLayer) else \
            [sub.units] * sub._n_states()

    def _cell_has_list_state(self, k) -> bool:
        """Keras's nesting of cell k's states: a list when its state_size is one."""
        c = self.cells[k]
        if isinstance(c, _Cell):
            return isinstance(c, LSTMCell)
        return isinstance(c.state_size, (list, tuple))

    def split_call(self, inputs, *args, **kwargs):
        if self.stacked:  # one entry per cell, each a tensor or a list: flattened
            kwargs = dict(kwargs)
            if kwargs.get("initial_state") is not None:
                kwargs["initial_state"] = self._flat_states(kwargs["initial_state"])
            if isinstance(inputs, (list, tuple)):
                inputs = [inputs[0]] + self._flat_states(list(inputs[1:]))
        return split_states_call(self, self._n_states(), inputs, args, kwargs)

    def _flat_states(self, states) -> list:
        if not isinstance(states, (list, tuple)):
            states = [states]
        counts = self._state_counts()
        if len(states) != len(counts):
            raise ValueError(f"[RNN] layer {self.name!r} stacks {len(counts)} cells: "
                             f"initial_state must have one entry per cell (a tensor, or a list "
                             f"for a cell of several states), got {len(states)} entries "
                             f"(at {user_location()})")
        flat = []
        for k, (entry, n) in enumerate(zip(states, counts)):
            entry = list(entry) if isinstance(entry, (list, tuple)) else [entry]
            if len(entry) != n:
                raise ValueError(f"[RNN] layer {self.name!r}: cell {k} has {n} states, got "
                                 f"initial_state entry {k} with {len(entry)} "
                                 f"(at {user_location()})")
            flat += entry
        return flat

    def __call__(self, *args, **kwargs):
        res = Layer.__call__(self, *args, **kwargs)
        if not (self.stacked and self.return_state and isinstance(res, list)):
            return res
        n_out = len(res) - self._n_states()
        return list(res[:n_out]) + self._grouped(res[n_out:])

    def _grouped(self, states) -> list:
        """Keras's nesting of a stack's states: one entry per cell (a list for
        a cell of several states)."""
        return [part if self._cell_has_list_state(k) else part[0]
                for k, part in enumerate(self._split_states(list(states)))]

    def _split_states(self, states: list) -> list:
        """A flat list of states cut per cell."""
        parts, at = [], 0
        for n in self._state_counts():
            parts.append(list(states[at:at + n]))
            at += n
        return parts

    def compute_output_shape(self, s):
        initial = [[] for _ in self.stack]
        if isinstance(s, list):  # [sequences, *initial states]
            check_state_shapes(self, s[1:], [(d,) for k in range(len(self.stack))
                                             for d in self._state_sizes(k)])
            initial = self._split_states(s[1:])
            s = s[0]
        self.params = []
        states = []
        for k, sub in enumerate(self.stack):
            out = sub.compute_output_shape([s] + initial[k] if initial[k] else s)
            self.params += _own_params(sub, self._prefix(k))
            if self.return_state:
                out, states = out[0], states + list(out[1:])
            s = out
        return [out] + states if self.return_state else out

    def output_mask(self, inputs, mask):
        return mask if self.return_sequences else None

    def forward(self, x, p, ctx, mask=None):
        saved = ctx.input_shapes
        steps = saved[0][1]
        initial = [[] for _ in self.stack]
        if isinstance(x, (list, tuple)):  # initial_state= given
            x, initial = x[0], self._split_states(list(x[1:]))
        states = []
        try:
            for k, sub in enumerate(self.stack):
                last = k == len(self.stack) - 1
                sub.zero_output_for_mask = self.zero_output_for_mask and last
                x = sub.forward([x] + initial[k] if initial[k] else x,
                                _sub_params(sub, p, self._prefix(k)), ctx, mask=mask)
                if self.return_state:
                    x, states = x[0], states + list(x[1:])
                if k == 0 and self.go_backwards and mask is not None:
                    # the layers above read the first one's outputs, in its
                    # (reversed) order
                    mask = ctx.define("rm", f"flip({mask}, axis=1)")
                if not last:
                    ctx.input_shapes = [(None, steps, sub.units)]
        finally:
            ctx.input_shapes = saved
        return [x] + states if self.return_state else x


# RNN's cells: not layers in tessera (the arguments of one step), so the
# classes a saved model's file may name for them (tessera.nn.saving)
CELLS = (SimpleRNNCell, LSTMCell, GRUCell, StackedRNNCells)
