"""tessera.nn.Variable: Keras 3's Variable — a named array a layer (or a
metric) owns, the same object everywhere it is seen (`add_weight`'s result,
the attribute the layer keeps it in, `layer.weights`).

A layer's weight reads and writes the layer's current value (the one fit
trained, set_weights set, or load_model read); inside a layer's `call` (while
the model's programs are written) it is the weight as the program reads it, so
`ops.matmul(x, self.w)` or `x @ self.w` is differentiated and trained. Outside
`call` it behaves as its value: NumPy functions and arithmetic take it and give
arrays. A metric's state variable (`Metric.add_variable`) holds its own value;
inside `update_state` traced for fit, `assign_add`/`assign_sub` record the
batch's increment, which the training program computes. A layer's weight
assigned inside `call` is read as assigned by the rest of the call; a
non-trainable one (a count, a moving average) keeps the value the step
computes, as Keras's stateless step keeps its non-trainable variables
(layer_state.py)."""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import operator
from typing import Optional

import numpy as np

from . import initializers
from .layer_state import call_writes
from .params import initial_value
from .symbolic import PARAM_OVERRIDES, KerasTensor, keras_dtype, next_name, user_location

__all__ = ["Variable", "name_scope", "tracing", "is_tracing", "collecting_updates",
           "collecting_losses", "assigning_in_call", "rewriting", "is_rewriting"]

# True while a user's call/update_state/loss is traced into a program: a
# variable's operations are then recorded instead of computed.
_TRACING: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_tracing", default=False)
# {id(variable): [variable, [(sign, symbolic increment)...], assigned?]} while a
# metric's update_state is traced for fit
_UPDATES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_updates", default=None)
# [(layer, symbolic loss)] while a layer's call is traced (Layer.add_loss)
_LOSSES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_losses", default=None)

# [expression] of the losses added by layers while a model's forward code is
# written (Model._forward_code)
_PROGRAM_LOSSES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_program_losses",
                                                                 default=None)

_seeds = itertools.count(7919)


def reseed_variables(seed) -> None:
    """The seeds of unseeded Variables' and add_weight's draws start again: from `seed`'s own
    sequence (utils.set_random_seed: the same global seed draws the same initial weights, as
    Keras's), or the process's default one (None)."""
    global _seeds
    _seeds = itertools.count(7919 if seed is None else 7919 + 1_000_003 * (seed % 1_000_000 + 1))


@contextlib.contextmanager
def collecting_program_losses():
    """Within: the written expressions of losses layers add (add_loss)."""
    record: list = []
    token = _PROGRAM_LOSSES.set(record)
    try:
        yield record
    finally:
        _PROGRAM_LOSSES.reset(token)


def add_program_losses(exprs):
    record = _PROGRAM_LOSSES.get()
    if record is not None:
        record.extend(exprs)


@contextlib.contextmanager
def tracing():
    """Within: Variables in arithmetic are recorded as program reads."""
    token = _TRACING.set(True)
    try:
        yield
    finally:
        _TRACING.reset(token)


def is_tracing() -> bool:
    return _TRACING.get()


@contextlib.contextmanager
def collecting_updates():
    """Within: assign_add/assign_sub on symbolic values are recorded (a
    metric's update_state traced for fit); yields the record."""
    record: dict = {}
    token = _UPDATES.set(record)
    try:
        yield record
    finally:
        _UPDATES.reset(token)


@contextlib.contextmanager
def assigning_in_call():
    """Within (a user's call traced, outermost): a trainable weight assigned a symbolic
    value is read as that value by what the call records afterwards, and keeps its own
    value, as in Keras's stateless (JAX) step, whose trainable variables the call's
    assignments do not change."""
    if PARAM_OVERRIDES.get() is not None:
        yield
        return
    token = PARAM_OVERRIDES.set({})
    try:
        yield
    finally:
        PARAM_OVERRIDES.reset(token)


@contextlib.contextmanager
def collecting_losses():
    """Within: Layer.add_loss appends (layer, loss) to the yielded list."""
    record: list = []
    token = _LOSSES.set(record)
    try:
        yield record
    finally:
        _LOSSES.reset(token)


# True while a layer's call is traced again to write a program (not a call the user
# made): the losses a layer keeps (Layer.losses, those of the latest call) stay as they are
_REWRITING: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_rewriting", default=False)


@contextlib.contextmanager
def rewriting(on: bool = True):
    """Within (on): calls traced are the program writer's, not the user's."""
    token = _REWRITING.set(on or _REWRITING.get())
    try:
        yield
    finally:
        _REWRITING.reset(token)


def is_rewriting() -> bool:
    return _REWRITING.get()


def add_loss_now(layer, loss) -> bool:
    """Records `loss` for the trace under way; False when none is."""
    record = _LOSSES.get()
    if record is None:
        return False
    record.append((layer, loss))
    return True


# Keras's variable paths: the names of the name scopes and of the layers (and
# models) whose build or call is running, outermost first. A layer takes the
# scope it is first called (or built) in as the prefix of its variables' paths
# ("encoder/multi_head_attention/query/kernel"), as Keras names a variable by
# the name scopes open when it is created (functional.path_scope, name_scope).
PATH_SCOPE: list = [()]
_NAME_SCOPES: list = []  # (name_scope, the depth of PATH_SCOPE it made)


class name_scope:
    """keras.name_scope(name): a context in which the variables made (a
    standalone Variable, a layer's weights when it is built or first called)
    have ``name/`` before their paths. ``override_parent`` ("a/b") replaces
    the scopes open around it; with ``caller`` and ``deduplicate``, a scope
    of the same caller and name as the innermost one adds nothing (Keras's)."""

    def __init__(self, name, caller=None, deduplicate=True, override_parent=None):
        if not isinstance(name, str) or "/" in name:
            raise ValueError(f"[name_scope] name must be a string without '/', got {name!r}")
        if override_parent is not None and not isinstance(override_parent, str):
            raise TypeError(f"[name_scope] override_parent must be a string (a path) or None, "
                            f"got {override_parent!r}")
        self.name, self.caller, self.deduplicate = name, caller, deduplicate
        self.override_parent = override_parent
        if override_parent is None and deduplicate and \
                getattr(caller, "_parent_path", None) is not None:
            self.override_parent = caller._parent_path
        self._pop_on_exit = False

    def __enter__(self):
        if self.deduplicate and self.caller is not None and _NAME_SCOPES:
            last, depth = _NAME_SCOPES[-1]
            if depth == len(PATH_SCOPE) and last.caller is self.caller and \
                    last.name == self.name:
                return self
        parent = PATH_SCOPE[-1] if self.override_parent is None else \
            tuple(p for p in self.override_parent.split("/") if p)
        PATH_SCOPE.append(parent + (self.name,))
        _NAME_SCOPES.append((self, len(PATH_SCOPE)))
        self._pop_on_exit = True
        return self

    def __exit__(self, *exc):
        if self._pop_on_exit:
            PATH_SCOPE.pop()
            _NAME_SCOPES.pop()
            self._pop_on_exit = False


def _numpy_dtype(dtype, where: str):
    """Keras's name of `dtype` ("int" and Python's int are int32; "float" a ValueError, as
    Keras's), as a NumPy dtype name; None stays None."""
    name = keras_dtype(dtype, where)
    if name is not None and name in ("bfloat16", "string", "float8_e4m3fn", "float8_e5m2"):
        raise TypeError(f"[{where}] dtype {name} is a Keras dtype tessera's arrays do not hold "
                        f"(at {user_location()})")
    return name


def _plain(v):
    """A Variable's value (other things as they are), for eager NumPy."""
    if isinstance(v, Variable):
        return v.value
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(u) for u in v)
    return v


def _symbolic(args) -> bool:
    """True when an operation on these arguments must be recorded: tracing,
    or a symbolic tensor that is not a Variable among them."""
    if _TRACING.get():
        return True
    stack = list(args)
    while stack:
        a = stack.pop()
        if isinstance(a, KerasTensor) and not isinstance(a, Variable):
            return True
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif isinstance(a, dict):
            stack.extend(a.values())
    return False


def _binary(name, reflected=False):
    def op(self, other):
        if _symbolic((other,)):
            return getattr(KerasTensor, name)(self, other)
        a, b = self.value, _plain(other)
        base = name.strip("_")[1:] if reflected else name.strip("_")
        fn = getattr(operator, base + "_" if base in ("and", "or") else base)
        return fn(b, a) if reflected else fn(a, b)

    op.__name__ = name
    return op


def _unary(name):
    def op(self):
        if _TRACING.get():
            return getattr(KerasTensor, name)(self)
        return getattr(operator, name.strip("_"))(self.value)

    op.__name__ = name
    return op


class Variable(KerasTensor):
    """Keras's Variable. Made by `Layer.add_weight` (owned by the layer: its
    value is the layer's weight), `Metric.add_variable`, or directly:
    `Variable(initializer, shape=None, dtype=None, trainable=True, name=None)`
    with an array or an initializer (name or object) and a shape."""

    def __init__(self, initializer=None, shape=None, dtype=None, trainable: bool = True,
                 autocast: bool = True, aggregation="none", synchronization="auto",
                 name: Optional[str] = None, *, _layer=None, _param=None):
        if _layer is not None:
            self._layer, self._param = _layer, _param
            p = self._spec()
            super().__init__(p.shape, str(np.dtype(dtype or "float32")), "param",
                             (_layer, _param), name=_layer._weight_subpath(_param).rsplit("/")[-1])
            self._own = None
            return
        dtype = _numpy_dtype(dtype, "Variable")
        if initializer is None:
            raise ValueError("[Variable] initializer is required (an array, or an initializer "
                             "with a shape)")
        if isinstance(initializer, (str,)) or hasattr(initializer, "generate") or (
                callable(initializer) and not isinstance(initializer, np.ndarray)):
            if shape is None:
                raise ValueError(f"[Variable] an initializer ({initializer!r}) needs a shape")
            init = initializer if hasattr(initializer, "generate") else \
                initializers.get(initializer)
            shape = tuple(int(d) for d in shape)
            value = np.asarray(init.generate(shape, str(np.dtype(dtype or "float32")),
                                             next(_seeds)))
        else:
            value = np.array(_plain(initializer), dtype=dtype or None, copy=True)
            if dtype is None and value.dtype.kind == "f":
                value = value.astype(np.float32)  # Keras's floatx unless a dtype is given
            elif dtype is None and value.dtype == np.int64:
                value = value.astype(np.int32)  # as Keras stores Python/NumPy ints
            if shape is not None and tuple(value.shape) != tuple(int(d) for d in shape):
                raise ValueError(f"[Variable] the initial value has shape {value.shape}, not "
                                 f"the shape given, {tuple(shape)}")
        self._layer, self._param = None, name or next_name("variable")  # Keras's auto_name
        self._scope = PATH_SCOPE[-1]  # the name scopes open now (name_scope)
        self._own = value
        self._trainable = bool(trainable)
        super().__init__(value.shape, str(value.dtype), "param", (None, self._param),
                         name=self._param)

    # ------------------------------------------------------------ identity
    def _spec(self):
        for q in self._layer.params:
            if q.name == self._param:
                return q
        raise RuntimeError(f"[Variable] layer {self._layer.name!r} has no weight "
                           f"{self._param!r} any more")

    @property
    def path(self) -> str:
        """Keras's path: the layers (and models) whose build or call the owner
        was first called in, the owner, then the weight's place in it
        ("encoder/multi_head_attention/query/kernel")."""
        if self._layer is not None:
            layer = self._layer
            scope = layer.__dict__.get("_path_prefix", ()) + (layer.name,)
            return "/".join(scope + (layer._weight_subpath(self._param),))
        owner = getattr(self, "_owner_name", None)
        if owner:
            return f"{owner}/{self._param}"
        return "/".join(getattr(self, "_scope", ()) + (self._param,))

    @property
    def trainable(self) -> bool:
        if self._layer is not None:
            return bool(self._spec().trainable and self._layer.trainable)
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        if self._layer is not None:
            self._spec().trainable = bool(value)
        else:
            self._trainable = bool(value)

    @property
    def regularizer(self):
        return self._spec().regularizer if self._layer is not None else None

    # ------------------------------------------------------------ value
    @property
    def value(self) -> np.ndarray:
        """The current value (the layer's weight as fit left it)."""
        if self._layer is None:
            return self._own
        values = self._layer._values
        if self._param not in values or dict.get(values, self._param) is None:
            if self._param in values:  # held elsewhere (ZeRO, pipeline stages)
                raise RuntimeError(f"[Variable] {self.path} is not held by this process now "
                                   "(sharded by ZeRO or a pipeline); read model.get_weights()")
            values[self._param] = initial_value(self._spec(), next(_seeds), self.dtype)
        return values[self._param]

    def numpy(self) -> np.ndarray:
        return np.array(self.value, copy=True)

    def __array__(self, dtype=None, copy=None):
        v = self.value
        return np.array(v, dtype=dtype, copy=True) if dtype is not None or copy else \
            np.asarray(v)

    def _store(self, value, where: str):
        old = self.value
        new = np.asarray(_plain(value))
        if new.shape != old.shape:
            try:
                new = np.broadcast_to(new, old.shape)
            except ValueError:
                raise ValueError(f"[Variable.{where}] {self.path} has shape {old.shape}, got a "
                                 f"value of shape {new.shape}") from None
        new = np.array(new, dtype=old.dtype, copy=True)
        if self._layer is None:
            self._own = new
        else:
            self._layer._values[self._param] = new
        return self

    def _record_update(self, sign, value, where) -> bool:
        record = _UPDATES.get()
        if record is None or not _symbolic((value,)):
            if _symbolic((value,)) and self._assign_in_call(sign, value):
                return True
            if _symbolic((value,)):
                raise TypeError(f"[Variable.{where}] {self.path}: a symbolic value can be "
                                "assigned only to a layer's weight inside a layer's call, or "
                                "to a metric's variable in its update_state; this variable "
                                f"belongs to neither (at {user_location()})")
            return False
        entry = record.setdefault(id(self), [self, [], False])
        if sign == 0:
            entry[2] = True
        else:
            entry[1].append((sign, value))
        return True

    def _assign_in_call(self, sign, value) -> bool:
        """A layer weight assigned inside a traced call: what the call records afterwards
        reads the new value (assign_add/assign_sub: added to the current one). A trainable
        weight keeps its own value (Keras's JAX step drops a call's assignments to
        trainable variables); a non-trainable one takes the value the program computes
        (the call's writes, recording_call_writes). False when not inside a call, or not
        a layer's weight."""
        ov = PARAM_OVERRIDES.get()
        if ov is None or self._layer is None:
            return False
        key = (id(self._layer), self._param)
        if not isinstance(value, KerasTensor):  # (an array: as a value of the program)
            value = KerasTensor.__add__(KerasTensor.__mul__(self, 0), np.asarray(_plain(value)))
        if sign:
            value = KerasTensor.__add__(ov.get(key, self),
                                        value if sign > 0 else np.negative(value))
        if tuple(value.shape) != tuple(self.shape):
            raise ValueError(f"[Variable.assign] {self.path} has shape {tuple(self.shape)}, got "
                             f"a value of shape {tuple(value.shape)} (at {user_location()})")
        new = value if str(value.dtype) == str(self.dtype) else value.astype(self.dtype)
        ov[key] = new
        writes = call_writes()
        if writes is not None:
            writes[key] = (self, new)
        return True

    def assign(self, value):
        """Sets the value (same shape; cast to the variable's dtype)."""
        if self._record_update(0, value, "assign"):
            return self
        return self._store(value, "assign")

    def assign_add(self, value):
        if self._record_update(1, value, "assign_add"):
            return self
        return self._store(self.value + np.asarray(_plain(value)), "assign_add")

    def assign_sub(self, value):
        if self._record_update(-1, value, "assign_sub"):
            return self
        return self._store(self.value - np.asarray(_plain(value)), "assign_sub")

    # ------------------------------------------------------------ as an array
    def __repr__(self):
        return (f"<Variable path={self.path}, shape={self.shape}, dtype={self.dtype}, "
                f"value={np.array2string(np.asarray(self.value), threshold=20)}>")

    def __bool__(self):
        if _TRACING.get():
            return KerasTensor.__bool__(self)
        return bool(self.value)

    def __float__(self):
        return float(self.value)

    def __int__(self):
        return int(self.value)

    def __len__(self):
        return len(self.value)

    def __iter__(self):
        if _TRACING.get():
            return KerasTensor.__iter__(self)
        return iter(self.value)

    def __hash__(self):
        return self.id

    def __eq__(self, other):
        if _symbolic((other,)):
            return KerasTensor.__eq__(self, other)
        return np.asarray(self.value) == np.asarray(_plain(other))

    def __ne__(self, other):
        if _symbolic((other,)):
            return KerasTensor.__ne__(self, other)
        return np.asarray(self.value) != np.asarray(_plain(other))

    def __getitem__(self, index):
        if _TRACING.get():
            return KerasTensor.__getitem__(self, index)
        return self.value[index]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if _TRACING.get():
            return KerasTensor.__getattr__(self, name)
        return getattr(self.value, name)

    @property
    def T(self):
        return KerasTensor.T.fget(self) if _TRACING.get() else self.value.T

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if _symbolic(inputs):
            return KerasTensor.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)
        return getattr(ufunc, method)(*_plain(inputs), **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if _symbolic(args) or _symbolic(tuple(kwargs.values())):
            return KerasTensor.__array_function__(self, func, types, args, kwargs)
        return func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})

    __add__, __radd__ = _binary("__add__"), _binary("__radd__", True)
    __sub__, __rsub__ = _binary("__sub__"), _binary("__rsub__", True)
    __mul__, __rmul__ = _binary("__mul__"), _binary("__rmul__", True)
    __truediv__, __rtruediv__ = _binary("__truediv__"), _binary("__rtruediv__", True)
    __floordiv__, __rfloordiv__ = _binary("__floordiv__"), _binary("__rfloordiv__", True)
    __pow__, __rpow__ = _binary("__pow__"), _binary("__rpow__", True)
    __matmul__, __rmatmul__ = _binary("__matmul__"), _binary("__rmatmul__", True)
    __mod__ = _binary("__mod__")
    __lt__, __le__ = _binary("__lt__"), _binary("__le__")
    __gt__, __ge__ = _binary("__gt__"), _binary("__ge__")
    __and__, __or__ = _binary("__and__"), _binary("__or__")
    __neg__, __abs__, __invert__ = _unary("__neg__"), _unary("__abs__"), _unary("__invert__")
