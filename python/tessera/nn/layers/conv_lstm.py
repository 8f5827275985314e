"""Convolutional LSTMs, like Keras's ConvLSTM1D, ConvLSTM2D and ConvLSTM3D: an
LSTM whose input and recurrent transformations are convolutions, over inputs
(batch, timesteps, spatial..., channels) (or channels first: (batch,
timesteps, channels, spatial...)).

Keras's weights (kernel (k..., channels, 4 filters), recurrent_kernel (k...,
filters, 4 filters), bias (4 filters,), gate order input, forget, cell,
output, paths "conv_lstm_cell/..."), arguments and defaults. The input
convolution of all timesteps is one convolution (the timesteps folded into
the batch); the time loop is unrolled into the program: per step one
recurrent convolution ('same' padding, stride 1, as Keras's) and the gates,
and the backward pass (the core's autodiff) runs back through the steps, so
the program grows linearly with the number of timesteps.

Dropout is Keras's (DropoutRNNCell with four masks): `dropout` draws one mask
per gate over a step's input, `recurrent_dropout` one per gate over the
state; drawn once per batch, the same at every step. The states are the
LSTM's (initial_state=, return_state=, stateful=: rnn_states.py), feature
maps of the output's shape. A mask (batch,
timesteps) keeps the states at masked steps as the LSTM does (Keras 3 on JAX
raises on any mask here; its other backends and Keras 2 compute this)."""

from __future__ import annotations

import math

from ..data_format import to_first, to_last
from ..symbolic import user_location
from .base import _conv_length, _data_format, _fans, _ints, _list, _padding, _positive, Param
from .recurrent import _ForgetBias, _RNN

__all__ = ["ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"]

_AXES = {1: "steps", 2: "rows, cols", 3: "depth, rows, cols"}


class _ConvLSTM(_RNN):
    rank = 2
    gates = 4
    constraint_arguments = {"kernel_constraint": "kernel",
                            "recurrent_constraint": "recurrent_kernel",
                            "bias_constraint": "bias"}

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, activation="tanh", recurrent_activation="sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, dropout=0.0, recurrent_dropout=0.0, seed=None,
                 return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                 unroll=False, zero_output_for_mask=False, name=None, input_shape=None,
                 **kwargs):
        k = self.kind
        self.filters = _positive(filters, "filters", k)
        super().__init__(filters, activation=activation,
                         recurrent_activation=recurrent_activation, use_bias=use_bias,
                         kernel_initializer=kernel_initializer,
                         recurrent_initializer=recurrent_initializer,
                         bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                         recurrent_regularizer=recurrent_regularizer,
                         bias_regularizer=bias_regularizer, dropout=dropout,
                         recurrent_dropout=recurrent_dropout, return_sequences=return_sequences,
                         return_state=return_state, go_backwards=go_backwards,
                         stateful=stateful, unroll=unroll,
                         zero_output_for_mask=zero_output_for_mask, name=name,
                         input_shape=input_shape, **kwargs)
        self.kernel_size = _ints(kernel_size, self.rank, "kernel_size", k)
        self.strides = _ints(strides, self.rank, "strides", k)
        self.dilation_rate = _ints(dilation_rate, self.rank, "dilation_rate", k)
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(f"[{k}] strides > 1 cannot go with dilation_rate > 1 (as Keras): "
                             f"got strides={self.strides}, dilation_rate={self.dilation_rate}")
        self.padding = _padding(padding.lower() if isinstance(padding, str) else padding, k)
        self.data_format = _data_format(data_format, k)
        self.unit_forget_bias = bool(unit_forget_bias)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"[{k}] seed must be None or an int, got {seed!r}")
        self.seed = seed

    def get_config(self) -> dict:
        # Keras's config holds the window's sizes as tuples, given or not
        config = super().get_config()
        config.update(kernel_size=self.kernel_size, strides=self.strides,
                      dilation_rate=self.dilation_rate, padding=self.padding)
        return config

    def _weight_subpath(self, pname: str) -> str:
        return f"conv_lstm_cell/{pname}"

    @property
    def cell(self):
        cell = super().cell
        cell.name = "conv_lstm_cell"
        return cell

    def _bias_init(self):
        return _ForgetBias(self.filters) if self.unit_forget_bias else self.bias_initializer

    def _n_states(self):
        return 2

    def _state_shape(self, sequences):
        if sequences is None:
            return (None,) * (self.rank + 1)
        state = self._out_spatial(self._last(sequences[1:])[:-1]) + (self.filters,)
        return to_first(state) if self.data_format == "channels_first" else state

    def _fused_cell(self):
        return None  # always unrolled (no fused convolutional cell)

    def _last(self, shape) -> tuple:
        """One step's per-sample shape as channels last."""
        return to_last(shape) if self.data_format == "channels_first" else tuple(shape)

    def _out_spatial(self, spatial) -> tuple:
        return tuple(_conv_length(n, k, st, d, self.padding) for n, k, st, d in
                     zip(spatial, self.kernel_size, self.strides, self.dilation_rate))

    def compute_output_shape(self, s):
        states = None
        if isinstance(s, list):  # [sequences, *initial states]
            s, states = s[0], s[1:]
        k, r = self.kind, self.rank
        order = f"channels, {_AXES[r]}" if self.data_format == "channels_first" \
            else f"{_AXES[r]}, channels"
        self._need_rank(tuple(s), r + 2, f"timesteps, {order}")
        step = self._last(s[1:])
        spatial, cin = step[:-1], step[-1]
        if None in spatial or cin is None:
            raise ValueError(f"[{k}] layer {self.name!r} needs the length of every spatial axis "
                             f"and the channels (Keras's rule), got per-sample shape {tuple(s)}")
        out = self._out_spatial(spatial)
        if any(n <= 0 for n in out):
            raise ValueError(f"[{k}] kernel {self.kernel_size} with dilation "
                             f"{self.dilation_rate} does not fit the input {tuple(s)} with "
                             f"padding '{self.padding}'")
        f = self.filters
        state = out + (f,)
        if self.data_format == "channels_first":
            state = to_first(state)
        if states is not None:
            if len(states) != 2:
                raise ValueError(f"[{k}] layer {self.name!r} has 2 states, got "
                                 f"initial_state with {len(states)}")
            for i, g in enumerate(states):
                if tuple(g) != state:
                    raise ValueError(f"[{k}] layer {self.name!r}: initial state {i} must have "
                                     f"per-sample shape {state}, got {tuple(g)}")
        kshape = self.kernel_size + (cin, 4 * f)
        rshape = self.kernel_size + (f, 4 * f)
        self.params = [
            Param("kernel", kshape, self.kernel_initializer, *_fans(kshape),
                  regularizer=self.kernel_regularizer),
            Param("recurrent_kernel", rshape, self.recurrent_initializer, *_fans(rshape),
                  regularizer=self.recurrent_regularizer)]
        if self.use_bias:
            self.params.append(Param("bias", (4 * f,), self._bias_init(),
                                     regularizer=self.bias_regularizer))
        seq = (s[0],) + state if self.return_sequences else state
        if self.return_state or self.carry_states:
            return [seq, state, state]
        return seq

    def output_mask(self, inputs, mask):
        """Keras's compute_mask; a mask must be (batch, timesteps)."""
        if mask is not None and len(getattr(mask, "shape", ())) != 2:
            raise ValueError(f"[{self.kind}] layer {self.name!r} takes a mask (batch, timesteps), "
                             f"got one of shape {tuple(mask.shape)} (a Masking layer before it "
                             "masks each position of a frame, which Keras cannot take either); "
                             f"pass mask= of shape (batch, timesteps) (at {user_location()})")
        return mask if self.return_sequences else None

    def _options(self, same=False) -> str:
        if same:  # Keras's recurrent convolution: stride 1, 'same', no dilation
            return ("stride=1, padding=\"same\"" if self.rank == 1 else
                    f"strides={_list((1,) * self.rank)}, padding=\"same\"")
        if self.rank == 1:
            return (f"stride={self.strides[0]}, padding=\"{self.padding}\", "
                    f"dilation={self.dilation_rate[0]}")
        return (f"strides={_list(self.strides)}, padding=\"{self.padding}\", "
                f"dilation={_list(self.dilation_rate)}")

    def _gate(self, w, g) -> str:
        """Gate g's filters of a kernel (its last axis)."""
        f = self.filters
        return f"{w}[{', '.join([':'] * (self.rank + 1))}, {g * f}:{(g + 1) * f}]"

    def forward(self, x, p, ctx, mask=None):
        initial = None
        if isinstance(x, (list, tuple)):  # initial_state= given
            x, initial = x[0], list(x[1:])
        shape = ctx.input_shapes[0]
        shape = shape[0] if isinstance(shape, list) else shape
        steps, r, f = shape[1], self.rank, self.filters
        cf = self.data_format == "channels_first"
        if cf:  # computed channels last, the result transposed back
            x = ctx.define("cl_x", f"transpose({x}, {_list([0, 1] + list(range(3, r + 3)) + [2])})")
            if initial:
                perm = _list([0] + list(range(2, r + 2)) + [1])
                initial = [ctx.define("cl_s", f"transpose({s}, {perm})") for s in initial]
        step = self._last(shape[2:])
        spatial, cin = step[:-1], step[-1]
        out = self._out_spatial(spatial)
        in_masks, state_masks = [], []
        if (self.dropout or self.recurrent_dropout) and ctx.training != "false":
            in_masks, state_masks = self._conv_dropout_masks(x, step, out, steps, ctx)
        conv = f"conv{r}d"
        flat = _list((-1,) + step)
        if in_masks:  # one mask per gate, the same at every step
            xw = "concatenate(list(" + ", ".join(
                f"{conv}(reshape({x} * expand_dims({m}, 1), {flat}), "
                f"{self._gate(p['kernel'], g)}, {self._options()})"
                for g, m in enumerate(in_masks)) + "), axis=-1)"
            if self.use_bias:
                xw = f"bias_add({xw}, {p['bias']})"
        elif self.use_bias:
            xw = f"{conv}_bias(reshape({x}, {flat}), {p['kernel']}, {p['bias']}, {self._options()})"
        else:
            xw = f"{conv}(reshape({x}, {flat}), {p['kernel']}, {self._options()})"
        xw = ctx.define("xw", f"reshape({xw}, {_list((-1, steps) + out + (4 * f,))})")
        sp = ", ".join([":"] * r)
        if initial:
            states = list(initial)
        else:
            zero = ctx.define("h0", f"zeros_like({xw}[:, 0, {sp}, 0:{f}])")
            states = [zero, zero]
        ones = _list((-1,) + (1,) * (r + 1))  # a step's mask, broadcast over the pixels
        outputs, states = self._unrolled(
            ctx, steps, states,
            lambda t, st: self._conv_step(f"{xw}[:, {t}, {sp}, :]", st, p, ctx, state_masks),
            None if mask is None else (lambda t: f"reshape({mask}[:, {t}:{t + 1}], {ones})"))
        y = f"stack(list({', '.join(outputs)}), axis=1)" if self.return_sequences else outputs[-1]
        if cf:
            y = f"transpose({y}, {_list(self._first_perm(self.return_sequences))})"
            states = [f"transpose({s}, {_list(self._first_perm(False))})" for s in states]
        if self.return_state or self.carry_states:
            return [y] + list(states)
        return y

    def _first_perm(self, sequences: bool) -> list:
        """The transpose of a channels-last result back to channels first."""
        r = self.rank
        if sequences:
            return [0, 1, r + 2] + list(range(2, r + 2))
        return [0, r + 1] + list(range(1, r + 1))

    def _conv_step(self, xt, states, p, ctx, masks):
        h, c = states
        f, conv, U = self.filters, f"conv{self.rank}d", p["recurrent_kernel"]
        if masks:
            hu = "concatenate(list(" + ", ".join(
                f"{conv}({h} * {m}, {self._gate(U, g)}, {self._options(True)})"
                for g, m in enumerate(masks)) + "), axis=-1)"
        else:
            hu = f"{conv}({h}, {U}, {self._options(True)})"
        z = ctx.define("z", f"{xt} + {hu}")
        i = self._ract(self._gate(z, 0), ctx)
        fg = self._ract(self._gate(z, 1), ctx)
        g = self._act(self._gate(z, 2), ctx)
        o = self._ract(self._gate(z, 3), ctx)
        c = ctx.define("c", f"{fg} * {c} + {i} * {g}")
        h = ctx.define("h", f"{o} * {self._act(c, ctx)}")
        return [h, c]

    def _conv_dropout_masks(self, x, step, out, steps, ctx):
        """Keras's four dropout masks of a step's input (batch, *step) and four
        recurrent ones of the state (batch, *out, filters): one draw of
        (batch, columns), each mask its own columns (a draw depends only on
        the seed and the element's index), reshaped."""
        n_in = math.prod(step)
        n_h = math.prod(out) * self.filters
        width = (4 * n_in if self.dropout else 0) + (4 * n_h if self.recurrent_dropout else 0)
        per_sample = steps * n_in
        one = ctx.define("rd_one", f"ones_like(stop_gradient(reshape({x}, "
                                   f"{_list((-1, per_sample))})[:, 0:1]))")
        ones = ctx.define("rd_ones", f"tile({one}, list(1, {width}))")
        base = ctx.seed if self.seed is None else str(self.seed)
        seed = f"{base} * {ctx.seed_stride} + {ctx.index}"
        inputs, states, at = [], [], 0
        for rate, n, shape, into in ((self.dropout, n_in, step, inputs),
                                     (self.recurrent_dropout, n_h, out + (self.filters,), states)):
            if not rate:
                continue
            d = ctx.define("rd", f"dropout({ones}, {rate!r}, {seed}, {ctx.training})")
            into.extend(ctx.define("rd_m", f"reshape({d}[:, {at + g * n}:{at + (g + 1) * n}], "
                                           f"{_list((-1,) + tuple(shape))})") for g in range(4))
            at += 4 * n
        return inputs, states


class ConvLSTM1D(_ConvLSTM):
    """1-d convolutional LSTM over (batch, timesteps, steps, channels), like
    keras.layers.ConvLSTM1D."""

    kind = "ConvLSTM1D"
    rank = 1


class ConvLSTM2D(_ConvLSTM):
    """2-d convolutional LSTM over (batch, timesteps, rows, cols, channels),
    like keras.layers.ConvLSTM2D."""

    kind = "ConvLSTM2D"
    rank = 2


class ConvLSTM3D(_ConvLSTM):
    """3-d convolutional LSTM over (batch, timesteps, depth, rows, cols,
    channels), like keras.layers.ConvLSTM3D."""

    kind = "ConvLSTM3D"
    rank = 3
