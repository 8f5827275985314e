"""Recurrent layers, like Keras's SimpleRNN, LSTM and GRU (Keras's gate
order, weight layouts and defaults), over inputs (batch, timesteps,
features).

The input projection of all timesteps is one matrix product. With Keras's
default activations (tanh, and sigmoid for the gates) the time loop is one
primitive, rnn_sequence (tessera/primitives/recurrent.cpp): per step one
recurrent matrix product and the gates, in C++, and its backward through
time one primitive too. Other activations, unroll=True, or the module switch
FUSED = False unroll the loop into the training step's program: each step
adds its recurrent product and gates, and the backward pass (the core's
autodiff) runs back through the steps. The number of timesteps is that of
the input shape; with an axis of unknown length (Input(shape=(None, d)))
each length met gets its own program (varlen.py).

Dropout works as Keras's (DropoutRNNCell): the masks are drawn once per batch
and used at every step; `dropout` masks the inputs (one mask, or one per gate
with recurrent_dropout, as Keras's implementation 1), `recurrent_dropout` the
state entering each gate's recurrent product (one mask per gate), which
unrolls the loop in training.

Masks (an Embedding's mask_zero, Masking, or mask=) work as Keras's: at a
masked step the states keep their values and the output is the previous
output (zeros with zero_output_for_mask, which Bidirectional sets when it
returns sequences)."""

from __future__ import annotations

import numpy as np

from .base import Layer, Param, _activation, _apply, _initializer, _positive, _regularizer
from .rnn_states import (check_state_shapes, reset_states, split_states_call, stateful_eager_call,
                         stateful_symbolic_call, _symbolic_args)

__all__ = ["SimpleRNN", "LSTM", "GRU"]

# False: every recurrent layer unrolls its time loop (the reference the fused
# primitive is tested against); read when a model's program is written.
FUSED = True


class _ForgetBias:
    """LSTM bias: zeros, with ones for the forget gate (Keras's unit_forget_bias)."""

    def __init__(self, units: int):
        self.units = units

    def generate(self, shape, dtype, seed):
        b = np.zeros(shape, dtype=dtype)
        b[self.units:2 * self.units] = 1.0
        return b


class _CellWeights:
    """What Keras's `lstm.cell` shows of the cell: its weights, units, name."""

    def __init__(self, layer):
        self._owner, self.units = layer, layer.units
        self.name = f"{_snake_kind(layer.kind)}_cell"

    @property
    def weights(self) -> list:
        return self._owner.weights

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._owner, name)


def _snake_kind(kind: str) -> str:
    return {"SimpleRNN": "simple_rnn"}.get(kind, kind.lower())


class _RNN(Layer):
    gates = 1
    mask_input = True  # forward reads the mask of its input (functional.py)

    def _weight_subpath(self, pname: str) -> str:
        # Keras's LSTM, GRU and SimpleRNN keep their weights in a cell
        # sublayer named "lstm_cell", "gru_cell", "simple_rnn_cell"
        return f"{_snake_kind(self.kind)}_cell/{pname}"

    @property
    def cell(self):
        """Keras's `layer.cell`: its weights (cell.kernel, recurrent_kernel,
        bias: the layer's Variables), units and name."""
        return _CellWeights(self)

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, dropout=0.0, recurrent_dropout=0.0,
                 return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                 unroll=False, zero_output_for_mask=False, name=None, input_shape=None,
                 **kwargs):
        super().__init__(name, input_shape, **kwargs)
        k = self.kind
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.units = _positive(units, "units", k)
        self.activation = _activation(activation, k)
        self.recurrent_activation = _activation(recurrent_activation, k)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _initializer(kernel_initializer, k, "kernel_initializer")
        self.recurrent_initializer = _initializer(recurrent_initializer, k,
                                                  "recurrent_initializer")
        self.bias_initializer = _initializer(bias_initializer, k, "bias_initializer")
        self.kernel_regularizer = _regularizer(kernel_regularizer, k, "kernel_regularizer")
        self.recurrent_regularizer = _regularizer(recurrent_regularizer, k,
                                                  "recurrent_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, k, "bias_regularizer")
        if isinstance(dropout, bool) or not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"[{k}] dropout must be in [0, 1), got {dropout!r}")
        if isinstance(recurrent_dropout, bool) or not 0.0 <= float(recurrent_dropout) < 1.0:
            raise ValueError(f"[{k}] recurrent_dropout must be in [0, 1), got "
                             f"{recurrent_dropout!r}")
        self.recurrent_dropout = float(recurrent_dropout)
        self.stateful = bool(stateful)
        self.carry_states = False  # stateful in a model: the states are in- and outputs
        self.states = None  # stateful: the states the next call starts from (arrays)
        self.dropout = float(dropout)
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.unroll = bool(unroll)

    def _bias_shape(self):
        return (self.gates * self.units,)

    def _bias_init(self):
        return self.bias_initializer

    def split_call(self, inputs, *args, **kwargs):
        return split_states_call(self, self._n_states(), inputs, args, kwargs)

    def __call__(self, *args, **kwargs):
        if self.stateful and args and not _symbolic_args(args, kwargs):
            return stateful_eager_call(self, args[0], args[1:], kwargs)
        if self.stateful:
            return stateful_symbolic_call(self, args, kwargs)
        return Layer.__call__(self, *args, **kwargs)

    def reset_states(self):
        """stateful=True: the next call starts from zero states (Keras's)."""
        reset_states(self)

    reset_state = reset_states

    def compute_output_shape(self, s):
        if isinstance(s, list):  # [sequences, *initial states]
            check_state_shapes(self, s[1:], [(self.units,)] * self._n_states())
            s = s[0]
        self._need_rank(s, 2, "timesteps, features")
        t, f = s
        u, g = self.units, self.gates
        self.params = [
            Param("kernel", (f, g * u), self.kernel_initializer,
                  regularizer=self.kernel_regularizer),
            Param("recurrent_kernel", (u, g * u), self.recurrent_initializer,
                  regularizer=self.recurrent_regularizer)]
        if self.use_bias:
            self.params.append(Param("bias", self._bias_shape(), self._bias_init(),
                                     regularizer=self.bias_regularizer))
        out = (t, u) if self.return_sequences else (u,)
        if self.return_state or self.carry_states:
            return [out] + [(u,)] * self._n_states()
        return out

    def _n_states(self):
        return 1

    def _state_shape(self, sequences):
        """One sample's state for per-sample sequences of shape `sequences`
        (None: any; its rank is what stateful calls check)."""
        return (self.units,)

    def output_mask(self, inputs, mask):
        """Keras's compute_mask: the input's mask when returning sequences."""
        return mask if self.return_sequences else None

    def forward(self, x, p, ctx, mask=None):
        initial = None
        if isinstance(x, (list, tuple)):  # initial_state= given
            x, initial = x[0], list(x[1:])
        steps = ctx.input_shapes[0][1]
        if steps is None:
            raise ValueError(f"[{self.kind}] layer {self.name!r}: the number of timesteps is "
                             "unknown while writing the program")
        u = self.units
        in_masks, state_masks = [], []
        if (self.dropout or self.recurrent_dropout) and ctx.training != "false":
            in_masks, state_masks = self._dropout_masks(x, ctx)
        if len(in_masks) == 1:  # the same mask at every step
            x = ctx.define("rd_xs", f"{x} * expand_dims({in_masks[0]}, 1)")
        if self._fused_cell() is not None and not state_masks:
            return self._fused_forward(x, initial, p, ctx, mask)
        if len(in_masks) > 1:  # one mask per gate (Keras's implementation 1)
            xw = "concatenate(list(" + ", ".join(
                f"({x} * expand_dims({m}, 1)) @ {p['kernel']}[:, {k * u}:{(k + 1) * u}]"
                for k, m in enumerate(in_masks)) + "), -1)"
        else:
            xw = f"({x} @ {p['kernel']})"
        if self.use_bias:
            xw = f"({xw} + {self._input_bias(p)})"
        xw = ctx.define("xw", xw)
        if initial:
            states = list(initial)
        else:
            zero = ctx.define("h0", f"zeros_like({xw}[:, 0, 0:{u}])")
            states = [zero] * self._n_states()
        outputs, states = self._unrolled(
            ctx, steps, states,
            lambda t, st: self._step(f"{xw}[:, {t}, :]", st, p, ctx, state_masks),
            None if mask is None else (lambda t: f"{mask}[:, {t}:{t + 1}]"))
        out = f"stack(list({', '.join(outputs)}), axis=1)" if self.return_sequences \
            else outputs[-1]
        if self.return_state or self.carry_states:
            return [out] + list(states)
        return out

    def _unrolled(self, ctx, steps, states, step_at, keep_at):
        """The unrolled time loop: step_at(t, states) gives step t's new states
        (the first is its output). With keep_at (t -> step t's mask, broadcast
        against the states), as Keras: a masked step keeps the states and its
        output is the previous output (the first state), or zeros
        (zero_output_for_mask). Returns (outputs in the loop's order, states)."""
        outputs = []
        order = range(steps - 1, -1, -1) if self.go_backwards else range(steps)
        for t in order:
            new = step_at(t, states)
            if keep_at is None:
                states = new
                outputs.append(states[0])
                continue
            keep = ctx.define("m", keep_at(t))
            if self.zero_output_for_mask:
                outputs.append(ctx.define("o", f"where({keep}, {new[0]}, zeros_like({new[0]}))"))
            states = [ctx.define("s", f"where({keep}, {n}, {o})") for n, o in zip(new, states)]
            if not self.zero_output_for_mask:
                outputs.append(states[0])
        return outputs, states

    def _input_bias(self, p):
        return p["bias"]

    def _dropout_masks(self, x, ctx):
        """Keras's dropout masks of a batch (DropoutRNNCell): drawn once, the
        same at every step. With recurrent_dropout (Keras's implementation 1) one
        mask per gate for the inputs and one per gate for the states, else one for
        the inputs. One draw of (batch, columns), each mask its own columns (a
        draw depends only on the seed and the element's index); returns the
        inputs' masks and the states' (lists of variables, maybe empty)."""
        f, u = ctx.input_shapes[0][2], self.units
        g = self.gates if self.recurrent_dropout else 1
        width = g * f + (g * u if self.recurrent_dropout else 0)
        one = ctx.define("rd_one", f"ones_like(stop_gradient({x}[:, 0, 0:1]))")
        ones = ctx.define("rd_ones", f"tile({one}, list(1, {width}))")
        seed = f"{ctx.seed} * {ctx.seed_stride} + {ctx.index}"
        inputs, states = [], []
        if self.dropout:
            d = ctx.define("rd_x", f"dropout({ones}, {self.dropout!r}, {seed}, {ctx.training})")
            inputs = [ctx.define("rd_xm", f"{d}[:, {k * f}:{(k + 1) * f}]") for k in range(g)]
        if self.recurrent_dropout:
            d = ctx.define("rd_h", f"dropout({ones}, {self.recurrent_dropout!r}, {seed}, "
                                   f"{ctx.training})")
            states = [ctx.define("rd_hm", f"{d}[:, {g * f + k * u}:{g * f + (k + 1) * u}]")
                      for k in range(g)]
        return inputs, states

    def _recurrent_products(self, h, U, masks, gates):
        """h @ U[:, the gates' columns]: with recurrent dropout each gate's
        product of h times its own mask (Keras's implementation 1)."""
        u = self.units
        if not masks:
            return f"{h} @ {U}" if gates == self.gates else f"{h} @ {U}[:, 0:{gates * u}]"
        return "concatenate(list(" + ", ".join(
            f"({h} * {masks[k]}) @ {U}[:, {k * u}:{(k + 1) * u}]" for k in range(gates)) + \
            "), -1)"

    def _fused_cell(self):
        """The cell name of rnn_sequence for this layer, or None (unrolled)."""
        if not FUSED or self.unroll or self.activation != "tanh":
            return None
        if self.gates > 1 and self.recurrent_activation != "sigmoid":
            return None
        return self.cell_name

    def _recurrent_bias(self, p):
        return "nil"

    def _fused_forward(self, x, initial, p, ctx, mask):
        """The time loop, with the input projection, as one rnn_sequence call
        (see the module's docstring)."""
        n = self._n_states()
        h0 = initial[0] if initial else "nil"
        c0 = initial[1] if initial and n > 1 else "nil"
        flag = {True: "true", False: "false"}
        bias = self._input_bias(p) if self.use_bias else "nil"
        r = ctx.define("rnn", f"rnn_sequence(\"{self._fused_cell()}\", {x}, {p['kernel']}, "
                       f"{p['recurrent_kernel']}, {bias}, {self._recurrent_bias(p)}, {h0}, {c0}, "
                       f"{'nil' if mask is None else mask}, {flag[self.go_backwards]}, "
                       f"{flag[self.return_sequences]}, {flag[self.zero_output_for_mask]})")
        out = f"{r}[0]"
        if self.return_state or self.carry_states:
            return [out] + [f"{r}[{1 + k}]" for k in range(n)]
        return out

    def _act(self, expr, ctx):
        return ctx.define("a", _apply(self.activation, expr, ctx))

    def _ract(self, expr, ctx):
        return ctx.define("r", _apply(self.recurrent_activation, expr, ctx))


class SimpleRNN(_RNN):
    """h_t = activation(x_t @ kernel + h_{t-1} @ recurrent_kernel + bias)."""

    kind = "SimpleRNN"
    gates = 1
    cell_name = "simple_rnn"

    def _step(self, xt, states, p, ctx, masks=()):
        (h,) = states
        hu = self._recurrent_products(h, p["recurrent_kernel"], masks, 1)
        return [self._act(f"{xt} + {hu}", ctx)]


class LSTM(_RNN):
    """Long short-term memory, Keras's gate order (input, forget, cell,
    output) and unit_forget_bias."""

    kind = "LSTM"
    gates = 4
    cell_name = "lstm"

    def __init__(self, units, *args, unit_forget_bias=True, **kwargs):
        super().__init__(units, *args, **kwargs)
        self.unit_forget_bias = bool(unit_forget_bias)

    def _bias_init(self):
        return _ForgetBias(self.units) if self.unit_forget_bias else self.bias_initializer

    def _n_states(self):
        return 2

    def _step(self, xt, states, p, ctx, masks=()):
        h, c = states
        u = self.units
        hu = self._recurrent_products(h, p["recurrent_kernel"], masks, 4)
        z = ctx.define("z", f"{xt} + {hu}")
        i = self._ract(f"{z}[:, 0:{u}]", ctx)
        f = self._ract(f"{z}[:, {u}:{2 * u}]", ctx)
        g = self._act(f"{z}[:, {2 * u}:{3 * u}]", ctx)
        o = self._ract(f"{z}[:, {3 * u}:{4 * u}]", ctx)
        c = ctx.define("c", f"{f} * {c} + {i} * {g}")
        h = ctx.define("h", f"{o} * {_apply(self.activation, c, ctx)}")
        return [h, c]


class GRU(_RNN):
    """Gated recurrent unit, Keras's gate order (update, reset, candidate);
    reset_after=True (Keras 3's default) applies the reset gate after the
    recurrent product and has separate input and recurrent biases."""

    kind = "GRU"
    gates = 3

    def __init__(self, units, *args, reset_after=True, **kwargs):
        super().__init__(units, *args, **kwargs)
        self.reset_after = bool(reset_after)

    def _bias_shape(self):
        return (2, 3 * self.units) if self.reset_after else (3 * self.units,)

    def _input_bias(self, p):
        return f"{p['bias']}[0]" if self.reset_after else p["bias"]

    @property
    def cell_name(self):
        return "gru" if self.reset_after else "gru_reset_before"

    def _recurrent_bias(self, p):
        return f"{p['bias']}[1]" if self.reset_after and self.use_bias else "nil"

    def _step(self, xt, states, p, ctx, masks=()):
        (h,) = states
        u = self.units
        xz = ctx.define("xz", xt)
        U = p["recurrent_kernel"]
        if self.reset_after:
            hu = self._recurrent_products(h, U, masks, 3)
            if self.use_bias:
                hu = f"{hu} + {p['bias']}[1]"
            hu = ctx.define("hu", hu)
            z = self._ract(f"{xz}[:, 0:{u}] + {hu}[:, 0:{u}]", ctx)
            r = self._ract(f"{xz}[:, {u}:{2 * u}] + {hu}[:, {u}:{2 * u}]", ctx)
            hh = self._act(f"{xz}[:, {2 * u}:{3 * u}] + {r} * {hu}[:, {2 * u}:{3 * u}]", ctx)
        else:
            hu = ctx.define("hu", self._recurrent_products(h, U, masks, 2))
            z = self._ract(f"{xz}[:, 0:{u}] + {hu}[:, 0:{u}]", ctx)
            r = self._ract(f"{xz}[:, {u}:{2 * u}] + {hu}[:, {u}:{2 * u}]", ctx)
            hr = f"({h} * {masks[2]})" if masks else h
            hh = self._act(f"{xz}[:, {2 * u}:{3 * u}] + ({r} * {hr}) @ {U}[:, {2 * u}:{3 * u}]",
                           ctx)
        return [ctx.define("h", f"{z} * {h} + (1.0 - {z}) * {hh}")]
