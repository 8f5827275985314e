"""User-written recurrent cells in ``keras.layers.RNN(cell)``, as Keras runs
them: a Layer with ``state_size`` (an int or a list of ints), optionally
``output_size``, weights made in ``build(input_shape)`` (input_shape: one
step's, (batch, features)), and ``call(inputs, states)`` returning
``(output, new_states)``.

The cell's call is traced once on symbolic stand-ins of one step's input and
states, and the traced code is written for every timestep (the loop is
unrolled, as the built-in recurrent layers are); masks, go_backwards,
return_sequences, return_state and initial_state= behave as theirs."""

from __future__ import annotations

from ..symbolic import GraphWriter, KerasTensor
from ..variables import tracing
from .base import Layer

__all__ = ["is_user_cell", "UserCellLayer"]


def is_user_cell(cell) -> bool:
    return isinstance(cell, Layer) and cell._is_custom() and hasattr(cell, "state_size")


def _sizes(cell) -> list:
    s = cell.state_size
    sizes = list(s) if isinstance(s, (list, tuple)) else [s]
    for d in sizes:
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(f"[RNN] cell {type(cell).__name__}: state_size must be a positive "
                             f"int or a list of them, got {cell.state_size!r}")
    return sizes


class UserCellLayer(Layer):
    """One user cell unrolled over the timesteps (what RNN stacks)."""

    kind = "RNN"
    mask_input = True

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False,
                 name=None):
        super().__init__(name)
        self.cell = cell
        self.sizes = _sizes(cell)
        self.units = getattr(cell, "output_size", None) or self.sizes[0]
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.zero_output_for_mask = False

    def _n_states(self):
        return len(self.sizes)

    def compute_output_shape(self, s):
        if isinstance(s, list):
            s = s[0]
        if len(s) != 2:
            raise ValueError(f"[RNN] expects inputs (batch, timesteps, features), got per-sample "
                             f"shape {tuple(s)}")
        t, f = s
        cell = self.cell
        if not cell.built:
            cell.build((None, f))
            cell.built = True
        if any(w._layer is not cell for w in cell.weights):
            raise TypeError(f"[RNN] cell {type(cell).__name__}: a cell whose weights belong to "
                            "layers it calls is not supported yet; make them with add_weight")
        self.params = cell.params
        self._step_trace = None
        out = (t, self.units) if self.return_sequences else (self.units,)
        if self.return_state:
            return [out] + [(d,) for d in self.sizes]
        return out

    def _trace(self, f, dtype):
        """cell.call traced once: (step input and state stand-ins, output, states)."""
        if self._step_trace is None:
            x = KerasTensor((None, f), dtype, "input")
            states = [KerasTensor((None, d), dtype, "input") for d in self.sizes]
            with tracing():
                try:
                    res = self.cell.call(x, states)
                except (TypeError, ValueError) as e:
                    raise type(e)(f"{e} (in {type(self.cell).__name__}.call, the cell of RNN "
                                  f"{self.name!r})") from None
            if not isinstance(res, (list, tuple)) or len(res) != 2:
                raise TypeError(f"[RNN] {type(self.cell).__name__}.call(inputs, states) must "
                                f"return (output, new_states), got {type(res).__name__}")
            out, new = res
            new = list(new) if isinstance(new, (list, tuple)) else [new]
            if len(new) != len(self.sizes):
                raise ValueError(f"[RNN] {type(self.cell).__name__}.call returned {len(new)} "
                                 f"states; its state_size says {len(self.sizes)}")
            for k, (n, d) in enumerate(zip(new, self.sizes)):
                if not isinstance(n, KerasTensor) or n.shape[1:] != (d,):
                    raise ValueError(f"[RNN] {type(self.cell).__name__}.call: state {k} must "
                                     f"have shape (batch, {d}), got "
                                     f"{getattr(n, 'shape', type(n).__name__)}")
            if not isinstance(out, KerasTensor) or out.shape[1:] != (self.units,):
                raise ValueError(f"[RNN] {type(self.cell).__name__}.call: the output must have "
                                 f"shape (batch, {self.units}), got "
                                 f"{getattr(out, 'shape', type(out).__name__)}")
            self._step_trace = (x, states, out, new)
        return self._step_trace

    def _step(self, xt, states, p, ctx):
        f = ctx.input_shapes[0][2]
        x, ph, out, new = self._trace(f, "float32")
        names = {x.id: ctx.define("cx", xt)}
        names.update({s.id: e for s, e in zip(ph, states)})
        cell = self.cell

        def param(layer, name):
            return p[name] if layer is cell else ctx.param(layer, name)

        w = GraphWriter(names, param, ctx.layer_code, prefix=ctx.fresh("cell") + "_")
        exprs = [w.expr(t) for t in [out] + new]
        for s in w.stmts:
            ctx.emit(s)
        return exprs

    def forward(self, x, p, ctx, mask=None):
        initial = None
        if isinstance(x, (list, tuple)):
            x, initial = x[0], list(x[1:])
        steps = ctx.input_shapes[0][1]
        if steps is None:
            raise ValueError(f"[RNN] layer {self.name!r}: the number of timesteps is unknown "
                             "while writing the program")
        xv = ctx.define("seq", x)
        if initial:
            states = list(initial)
        else:
            states = [ctx.define("s0", f"zeros_like({xv}[:, 0, 0:1]) * zeros({d})")
                      for d in self.sizes]
        outputs, prev = [], None
        order = range(steps - 1, -1, -1) if self.go_backwards else range(steps)
        for t in order:
            o, *new = self._step(f"{xv}[:, {t}, :]", states, p, ctx)
            if mask is None:
                states, prev = new, o
                outputs.append(o)
                continue
            keep = ctx.define("m", f"{mask}[:, {t}:{t + 1}]")
            last = prev if prev is not None else f"zeros_like({o})"
            if self.zero_output_for_mask:
                outputs.append(ctx.define("o", f"where({keep}, {o}, zeros_like({o}))"))
            else:
                outputs.append(ctx.define("o", f"where({keep}, {o}, {last})"))
            prev = outputs[-1] if not self.zero_output_for_mask else \
                ctx.define("o", f"where({keep}, {o}, {last})")
            states = [ctx.define("s", f"where({keep}, {n}, {s})") for n, s in zip(new, states)]
        out = f"stack(list({', '.join(outputs)}), axis=1)" if self.return_sequences \
            else outputs[-1]
        if self.return_state:
            return [out] + list(states)
        return out
