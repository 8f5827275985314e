"""Keras's `optimizer.variables`: the optimizer's state as Variables, in Keras's order and
under Keras's names, reading and writing the state a model's training holds.

A tessera optimizer writes its update into the model's training program (tessera.optim), so
its state (Adam's moments, ...) lives where that program's caller keeps it: the model that
compiled it (`fit`, `train_on_batch`) or the model whose `train_step` applies it (a
GradientTape step). The Variables made here are views of that state: `numpy()` reads it,
`assign(...)` writes it (an optimizer's state can so be copied to another model's optimizer,
as with Keras's `v.assign(w)`), and they are listed as Keras 3 lists them:

* `{name}/iteration` (int32, the updates so far), then `{name}/learning_rate` (float32; only
  for a constant learning rate, as Keras has no variable for a schedule);
* with `use_ema`, each weight's `average`; with `gradient_accumulation_steps`, each weight's
  `gradient_accumulator`;
* the optimizer's own, named `{weight path with "/" as "_"}_{kind}` (Keras's
  `add_variable_from_reference`), grouped as each Keras optimizer's `build` makes them (Adam:
  each weight's momentum and velocity, then the AMSGrad maxima; RMSprop: the velocities, the
  momentums, then the average gradients; ...), and Nadam's product of the momentum factors
  last, named `variable` (`variable_1`, ...) as Keras's unnamed Variable is.

Before the first update only the iteration and learning rate exist (Keras builds the rest
with the optimizer). Optimizers Keras does not have (Adafactor's factored moments, Muon,
ScheduleFreeAdamW, tessera.optim's PyTorch forms) list their state under tessera's own kind
names, in tessera's order."""

from __future__ import annotations

import weakref

import numpy as np

from .. import optim as _optim
from .symbolic import next_name
from .variables import Variable, _plain

__all__ = ["OptimizerVariable", "optimizer_variables", "iteration_variable",
           "learning_rate_variable", "attach_model", "attach_tape"]

# tessera's kind of state (the end of its state variable's name) -> Keras's, per Keras
# optimizer; each Keras optimizer's groups in its build's order (one group: each weight's
# kinds together, as add_optimizer_variables makes them)
_KINDS = {
    "SGD": [[("momentum", "momentum")]],
    "Adam": [[("m", "momentum"), ("v", "velocity")], [("vhat", "velocity_hat")]],
    "RMSprop": [[("rms", "velocity")], [("momentum", "momentum")],
                [("average_grad", "average_gradient")]],
    "Adagrad": [[("accumulator", "accumulator")]],
    "Adadelta": [[("agrad", "accumulated_grad"), ("adelta", "accumulated_delta_var")]],
    "Adamax": [[("m", "momentum"), ("u", "norm")]],
    "Nadam": [[("m", "momentum"), ("v", "velocity")]],
    "Ftrl": [[("accum", "accumulator"), ("linear", "linear")]],
    "Lion": [[("m", "momentum")]],
    "Lamb": [[("m", "momentum"), ("v", "velocity")]],
}
_KINDS["AdamW"] = _KINDS["Adam"]
# Keras's base optimizer's, before the optimizer's own
_COMMON = [[("average", "average")], [("grad_accumulator", "gradient_accumulator")]]


class OptimizerVariable(Variable):
    """A Variable viewing one piece of an optimizer's state: `read()` gives its value,
    `write(array)` sets it."""

    def __init__(self, name, path, shape, dtype, read, write):
        super().__init__(np.zeros(shape, dtype=dtype), dtype=dtype, trainable=False, name=name)
        self._view_path, self._read, self._write = path, read, write

    @property
    def path(self) -> str:
        return self._view_path

    @property
    def value(self) -> np.ndarray:
        return np.asarray(self._read(), dtype=self.dtype).reshape(self.shape)

    def _store(self, value, where: str):
        new = np.asarray(_plain(value))
        if new.shape != tuple(self.shape):
            try:
                new = np.broadcast_to(new, tuple(self.shape))
            except ValueError:
                raise ValueError(f"[Variable.{where}] {self.path} has shape "
                                 f"{tuple(self.shape)}, got a value of shape "
                                 f"{new.shape}") from None
        self._write(np.array(new, dtype=self.dtype, copy=True))
        return self


def attach_model(optimizer, model) -> None:
    """The optimizer's state is `model`'s (compile): held weakly."""
    optimizer.__dict__["_state_home"] = ("model", weakref.ref(model), "opt_")


def attach_tape(optimizer, model, prefix: str, statevars, variable_of) -> None:
    """The optimizer's state is `model`'s GradientTape step's (tape_steps): its state
    variables `statevars` (named with `prefix`) and each weight's Variable
    (`variable_of(program name)`)."""
    optimizer.__dict__["_state_home"] = ("tape", weakref.ref(model), prefix, list(statevars),
                                         variable_of)


def _counter(optimizer):
    """(read, write) of the optimizer's update count."""
    home = optimizer.__dict__.get("_state_home")
    if home is not None and home[0] == "model":
        model = home[1]()

        def write(v):
            if model is None:
                return
            model._iteration = int(v)
        return (lambda: model._iteration if model is not None else 0), write

    def write_own(v):
        optimizer.__dict__["_tape_iterations"] = int(v)
        optimizer.__dict__["_iterations_of"] = \
            (lambda o=optimizer: o.__dict__["_tape_iterations"])
    return (lambda: _optim.Optimizer.iterations.fget(optimizer)), write_own


def iteration_variable(optimizer) -> OptimizerVariable:
    """Keras's `{name}/iteration`: the updates made so far (assign sets the count)."""
    read, write = _counter(optimizer)
    return OptimizerVariable("iteration", f"{optimizer.name}/iteration", (), "int32", read,
                             write)


def learning_rate_variable(optimizer):
    """Keras's `{name}/learning_rate` (float32), or None for a schedule or a function."""
    if callable(optimizer._lr):
        return None

    def read():
        return np.float32(float(optimizer.learning_rate))

    return OptimizerVariable("learning_rate", f"{optimizer.name}/learning_rate", (), "float32",
                             read, lambda v: optimizer.set_learning_rate(float(v)))


def _home_state(optimizer):
    """(state dict or None, [StateVar], prefix, variable_of) of where the state lives."""
    home = optimizer.__dict__.get("_state_home")
    if home is None:
        return None, [], "", None
    model = home[1]()
    if model is None:
        return None, [], "", None
    if home[0] == "model":
        statevars = list(getattr(model, "_opt_statevars", None) or [])
        return model._opt_state, statevars, home[2], model._variable_of_weight
    _, _, prefix, statevars, variable_of = home
    return model.__dict__.get("_tape_opt_state"), statevars, prefix, variable_of


def _kind(statevar, prefix) -> str:
    start = len(prefix) + len(statevar.param) + 1
    return statevar.name[start:]


def optimizer_variables(optimizer) -> list:
    """Keras's `optimizer.variables` (see the module doc)."""
    out = [iteration_variable(optimizer)]
    lr = learning_rate_variable(optimizer)
    if lr is not None:
        out.append(lr)
    state, statevars, prefix, variable_of = _home_state(optimizer)
    if state is None or not statevars:
        return out
    cls = type(optimizer).__name__
    keras_form = getattr(optimizer, "tessera_config", None) is not None
    groups = _COMMON + (_KINDS.get(cls, []) if keras_form else [])
    known = {k for g in groups for k, _ in g}
    per = [s for s in statevars if not s.scalar]
    params = list(dict.fromkeys(s.param for s in per))
    by = {(s.param, _kind(s, prefix)): s for s in per}

    def current():
        return _home_state(optimizer)[0]

    def view(s, kind):
        var = variable_of(s.param) if variable_of is not None else None
        base = var.path.replace("/", "_") if var is not None else s.param
        name = f"{base}_{kind}"
        shape = tuple(np.shape(state[s.name]))
        dtype = str(np.asarray(state[s.name]).dtype)

        def write(a, n=s.name):
            current()[n] = a
        return OptimizerVariable(name, f"{optimizer.name}/{name}", shape, dtype,
                                 lambda n=s.name: current()[n], write)

    for group in groups:
        for p in params:
            for ours, theirs in group:
                s = by.get((p, ours))
                if s is not None:
                    out.append(view(s, theirs))
    # kinds Keras's optimizer does not have: tessera's names, in tessera's order
    out += [view(s, _kind(s, prefix)) for s in per if _kind(s, prefix) not in known]
    for s in statevars:
        if s.scalar:
            name = s.name[len(prefix):]
            if cls == "Nadam" and keras_form:  # Keras's unnamed Variable: variable, variable_1
                name = optimizer.__dict__.setdefault("_keras_scalar_name", next_name("variable"))

            def write_scalar(a, n=s.name):
                current()[n] = float(a)
            out.append(OptimizerVariable(name, name if keras_form and cls == "Nadam" else
                                         f"{optimizer.name}/{name}", (), "float32",
                                         lambda n=s.name: current()[n], write_scalar))
    return out
