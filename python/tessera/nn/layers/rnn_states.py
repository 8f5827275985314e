"""The states of recurrent layers, as Keras's: `initial_state=` (symbolic
tensors, one per state: LSTM's [h, c], GRU's and SimpleRNN's [h]; a
Bidirectional's forward states then backward states), and `stateful=True`
(each call starts from the states the previous one ended with, until
`reset_states()`).

A stateful layer called on arrays (Keras's eager use: one paragraph after
the other) runs a one-layer program that takes the states in and gives them
out; the states are arrays kept on the layer (`layer.states`), not weights,
as in Keras. Inside a model (whose Input fixes the batch size, as Keras
requires) the layer's states become extra inputs and outputs of the graph
(`carried`): the model's predict feeds each batch the states the previous
one ended with; fit and evaluate refuse such a model (docs/nn.md)."""

from __future__ import annotations

import numpy as np

from ..functional import _TRACING
from ..registry import INTERNAL_MODEL_NAME, model_class
from ..symbolic import Input, KerasTensor, user_location
from .base import Layer

__all__ = ["split_states_call", "check_state_shapes", "stateful_eager_call", "reset_states",
           "stateful_symbolic_call", "carried"]


def _symbolic_args(args, kwargs) -> bool:
    stack = list(args) + list(kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, KerasTensor):
            return True
        if isinstance(a, (list, tuple)):
            stack.extend(a)
    return bool(_TRACING[0])


def _as_states(initial_state) -> list:
    if initial_state is None:
        return []
    if isinstance(initial_state, (list, tuple)):
        return list(initial_state)
    return [initial_state]


def split_states_call(layer, n_states: int, inputs, args, kwargs):
    """layer(sequences, initial_state=[...], mask=, training=): the symbolic
    inputs ([sequences, *states]) and the other arguments. A call recorded
    with states is recorded again as layer([sequences, *states])."""
    if getattr(layer, "stateful", False) and not getattr(layer, "carry_states", False):
        raise ValueError(f"[{layer.kind}] layer {layer.name!r}: stateful=True is supported on a "
                         "layer called on arrays (layer(batch) after batch, reset_states()), not "
                         "inside a model yet: the states would have to be carried from one "
                         f"batch of the program to the next (at {user_location()})")
    if args:
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} takes one input (the sequences) "
                        f"and initial_state=, got {1 + len(args)} positional arguments")
    kwargs = dict(kwargs)
    initial = kwargs.pop("initial_state", None)
    static = {}
    training = kwargs.pop("training", None)
    if training is not None:
        if not isinstance(training, bool):
            raise TypeError(f"[{layer.kind}] training must be True, False or None, got "
                            f"{training!r}")
        static["training"] = training
    mask = kwargs.pop("mask", None)
    if mask is not None:
        if not isinstance(mask, KerasTensor):
            raise TypeError(f"[{layer.kind}] layer {layer.name!r}: mask must be a symbolic "
                            f"tensor (batch, timesteps), got {type(mask).__name__}")
        static["mask"] = mask
    if kwargs:
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} called with an unexpected keyword "
                        f"argument {sorted(kwargs)[0]!r}")
    if isinstance(inputs, (list, tuple)):  # [sequences, *states]
        if initial is not None:
            raise TypeError(f"[{layer.kind}] layer {layer.name!r}: the states are given both in "
                            "the inputs list and as initial_state")
        inputs, initial = inputs[0], list(inputs[1:])
    states = _as_states(initial)
    if states and len(states) != n_states:
        raise ValueError(f"[{layer.kind}] layer {layer.name!r} has {n_states} states, got "
                         f"initial_state with {len(states)} (at {user_location()})")
    for t in [inputs] + states:
        if not isinstance(t, KerasTensor):
            raise TypeError(f"[{layer.kind}] layer {layer.name!r}: the sequences and "
                            f"initial_state must be symbolic tensors here, got "
                            f"{type(t).__name__} (at {user_location()})")
    layer.multi_input = bool(states)
    return [inputs] + states, static


def check_state_shapes(layer, got: list, want: list):
    for k, (g, w) in enumerate(zip(got, want)):
        if tuple(g) != tuple(w):
            raise ValueError(f"[{layer.kind}] layer {layer.name!r}: initial state {k} must have "
                             f"shape (batch, {', '.join(str(d) for d in w)}), got per-sample "
                             f"shape {tuple(g)}")


def reset_states(layer):
    """The next call of a stateful layer starts from zeros."""
    if not getattr(layer, "stateful", False):
        return
    if layer.states is not None:
        layer.states = [np.zeros_like(s) for s in layer.states]


def _shadow(layer):
    """The layer without state (return_state=True, stateful=False), sharing
    its weights: the program a stateful call runs."""
    sh = layer.__dict__.get("_stateful_shadow")
    if sh is None:
        args, kwargs = layer._init_args
        sh = type(layer)(*args, **dict(kwargs, return_state=True, stateful=False,
                                       name=layer.name + "_stateful"))
        sh._values = layer._values
        layer.__dict__["_stateful_shadow"] = sh
    return sh


def stateful_eager_call(layer, x, args, kwargs):
    """A stateful layer called on arrays: starts from layer.states (zeros on
    the first call or after reset_states, or initial_state= when given) and
    keeps the states it ends with."""
    Model = model_class()  # the one-layer program (the model sits above: registry.py)

    kwargs = dict(kwargs)
    if args or set(kwargs) - {"initial_state", "training"}:
        raise TypeError(f"[{layer.kind}] a stateful layer called on arrays takes the sequences "
                        f"and initial_state=, got {len(args)} more positional arguments and "
                        f"{sorted(set(kwargs) - {'initial_state', 'training'})}")
    if kwargs.get("training"):
        raise ValueError(f"[{layer.kind}] calling a layer on arrays with training=True is not "
                         "supported; use a model's fit")
    x = np.asarray(x)
    if x.ndim != len(layer._state_shape(None)) + 2:
        raise ValueError(f"[{layer.kind}] layer {layer.name!r} expects sequences of rank "
                         f"{len(layer._state_shape(None)) + 2} (batch, timesteps, features...), "
                         f"got shape {x.shape}")
    state = layer._state_shape(x.shape[1:])
    n = layer._n_states()
    given = _as_states(kwargs.get("initial_state"))
    if given:
        if len(given) != n:
            raise ValueError(f"[{layer.kind}] layer {layer.name!r} has {n} states, got "
                             f"initial_state with {len(given)}")
        layer.states = [np.asarray(s, dtype=np.float32) for s in given]
    elif layer.states is None:
        layer.states = [np.zeros((len(x),) + state, np.float32) for _ in range(n)]
    if layer.states[0].shape[0] != len(x):
        raise ValueError(f"[{layer.kind}] layer {layer.name!r} is stateful: the batch size of "
                         f"the sequences must be that of its states, {layer.states[0].shape[0]}; "
                         f"got {len(x)}")
    for k, s in enumerate(layer.states):
        if s.shape != (len(x),) + state:
            raise ValueError(f"[{layer.kind}] layer {layer.name!r}: state {k} must have shape "
                             f"{(len(x),) + state}, got {s.shape}")
    models = layer.__dict__.setdefault("_stateful_models", {})
    key = (x.shape[1:], str(x.dtype))
    model = models.get(key)
    if model is None:
        sh = _shadow(layer)
        xi = Input(x.shape[1:], dtype=str(x.dtype) if x.dtype.kind == "f" else "float32")
        si = [Input(state) for _ in range(n)]
        model = Model([xi] + si, sh(xi, initial_state=si), name=INTERNAL_MODEL_NAME)
        layer._values = sh._values  # (a deferred draw may have wrapped the shared dict)
        if not layer.built:
            layer.params, layer.built = sh.params, True
            layer._in_shape, layer._out_shape = sh._in_shape[0], sh._out_shape[0]
        models[key] = model
    res = model.predict([x] + list(layer.states), batch_size=len(x), verbose=0)
    out, states = res[0], [np.asarray(s) for s in res[1:]]
    layer.states = states
    return [out] + states if layer.return_state else out


def _fixed_batch(t):
    """The batch size an Input upstream of `t` fixes (Input(batch_shape=)), or None."""
    seen, stack = set(), [t]
    while stack:
        a = stack.pop()
        if not isinstance(a, KerasTensor) or a.id in seen:
            continue
        seen.add(a.id)
        if a.op == "input" and getattr(a, "fixed_batch", None):
            return a.fixed_batch
        stack.extend(a.args)
        stack.extend(v for v in a.kwargs.values() if isinstance(v, KerasTensor))
        if a.op == "layer":
            stack.extend(a.args[1])
    return None


def stateful_symbolic_call(layer, args, kwargs):
    """A stateful layer called in a model: the call is recorded with its
    states as hidden inputs (batch_size fixed, as Keras requires) and the
    final states as extra outputs, kept in layer.carried for predict."""
    where = user_location()
    x = args[0] if args else kwargs.pop("sequences", kwargs.pop("inputs", None))
    rebuilt = isinstance(x, (list, tuple)) and bool(x)
    if rebuilt:
        # a saved model rebuilt (the call recorded with its carried states):
        # the states are made anew, and the graph takes all the outputs
        x = x[0]
    if kwargs.get("initial_state") is not None:
        raise ValueError(f"[{layer.kind}] layer {layer.name!r}: initial_state= with "
                         "stateful=True inside a model is not supported (the layer starts "
                         f"from its carried states); make it stateful=False (at {where})")
    if getattr(layer, "carried", None) is not None:
        raise ValueError(f"[{layer.kind}] layer {layer.name!r} is stateful and is already called "
                         f"in a model: one stateful layer has one set of states; make a second "
                         f"layer (at {where})")
    if not isinstance(x, KerasTensor):
        raise TypeError(f"[{layer.kind}] layer {layer.name!r}: the sequences must be a symbolic "
                        f"tensor here, got {type(x).__name__} (at {where})")
    batch = _fixed_batch(x)
    if batch is None:
        raise ValueError(f"[{layer.kind}] layer {layer.name!r}: stateful=True needs a fixed batch "
                         "size (Keras's rule): make the model's Input with batch_shape=(batch, "
                         "timesteps, features) or batch_size=; got sequences of shape "
                         f"{x.shape} (at {where})")
    state = layer._state_shape(tuple(x.shape[1:]))
    states = [Input(batch_shape=(batch,) + state) for _ in range(layer._n_states())]
    for s in states:
        s.carried_state = True
    layer.carry_states = True  # from now on its program gives the final states out
    res = Layer.__call__(layer, x, *args[1:], initial_state=states, **kwargs)
    n = len(states)
    layer.carried = (batch, states, list(res[-n:]))
    return res if layer.return_state or rebuilt else res[0]


def carried(layers) -> list:
    """The stateful layers among `layers` whose states a model carries."""
    return [l for l in layers if getattr(l, "stateful", False) and
            getattr(l, "carried", None) is not None]
