"""Symbolic tensors: what ``Input`` returns, what a layer returns when it is
called on symbolic tensors, and what NumPy-style code makes of them.

A model is a graph of these tensors. Building it runs the user's Python once
(a functional model's layer calls, a subclassed model's ``call``, a custom
layer's ``call``, a loss or metric function): each layer call, operator and
NumPy function applied to a symbolic tensor records one node and knows its
shape at once (the batch axis is ``None``). The training step, evaluation and
prediction programs are then written from the graph as tessera's language.

Shapes are found by running every operation on small stand-in arrays with
batch sizes 2 and 3: an axis whose extent differs between the two is the
batch axis. So any primitive's shape rule is the primitive itself, and a
mistake (shapes that do not broadcast, a wrong axis) is reported at the line
of user code that made it, when the model is built. The stand-ins of inputs
and layer outputs are zero-stride views of a single value, made when an
operation first needs them: declaring a shape allocates nothing (load_model
bounds what the operations make; saving.py).
"""

from __future__ import annotations

import contextvars
import itertools
import math
import numbers
import os
import sys
from typing import Optional

import numpy as np

from .. import _core
from .._numpy_map import DTYPE_NAMES, METHOD_SPECS, NUMPY_RENAMES, NUMPY_SPECS
from .program_constants import bindable, constant_name

__all__ = ["KerasTensor", "Input", "is_symbolic", "user_location", "GraphWriter", "weight_free",
           "WeightGradients", "record_operation"]

_ids = itertools.count()

# {(id(layer), weight name): symbolic value} while a user's call is traced: the
# weights the call assigned (`self.conv.kernel.assign(self.conv.kernel * mask)`), read
# as the assigned value by what the call records afterwards, as Keras's stateless
# step reads them (variables.assigning_in_call)
PARAM_OVERRIDES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_param_overrides",
                                                                 default=None)


# Model.compile(run_eagerly=True) (model/eager.py): while a step runs on a batch, the
# function giving a symbolic tensor of that step its value on the batch (None: no values)
EAGER_VALUES: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_eager_values",
                                                              default=None)


def _value_now(t):
    """t's value on the batch a run_eagerly step runs on, or None outside one."""
    value_of = EAGER_VALUES.get()
    return None if value_of is None else value_of(t)


def _overridden(args):
    """args with each weight the traced call assigned replaced by its assigned value."""
    ov = PARAM_OVERRIDES.get()
    if not ov:
        return args

    def sub(a):
        if isinstance(a, KerasTensor) and a.op == "param" and a.args[0] is not None:
            return ov.get((id(a.args[0]), a.args[1]), a)
        if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
            return type(a)(sub(v) for v in a)
        return a

    return sub(args)
_DUMMY_BATCH = (2, 3)
# Stand-in lengths of the axes of unknown length past the batch axis
# (Input(shape=(None, 8))): different from the batch sizes, so that an
# operation mixing the two axes is not silently taken for right.
_DUMMY_LENGTH = (5, 7)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_location() -> str:
    """file:line of the innermost frame outside the tessera package (the user's code)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PACKAGE_DIR + os.sep):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def _dtype_name(dtype) -> str:
    if dtype is None:
        return "float32"
    if isinstance(dtype, str) and dtype in DTYPE_NAMES:
        return DTYPE_NAMES[dtype]
    try:
        return str(np.dtype(dtype))
    except TypeError:
        raise TypeError(f"[Input] unknown dtype {dtype!r}") from None


# Keras 3's dtypes (backend.common.dtypes.ALLOWED_DTYPES) and its names of Python's types
# (int is int32, as on every backend but TensorFlow)
KERAS_DTYPES = ("float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8",
                "int16", "int32", "int64", "bfloat16", "bool", "string", "float8_e4m3fn",
                "float8_e5m2", "complex64", "complex128")
_PYTHON_DTYPES = {bool: "bool", int: "int32", float: "float32", str: "string", "int": "int32",
                  complex: "complex64"}


def keras_dtype(dtype, where: str = "standardize_dtype") -> str:
    """A dtype's name as Keras's standardize_dtype gives it (None stays None): Python's
    int and "int" are int32, float float32; NumPy dtypes and types by name; a name Keras
    does not take ("float", "double", "f4") is a ValueError, as Keras's."""
    if dtype is None:
        return None
    name = _PYTHON_DTYPES.get(dtype, dtype) if isinstance(dtype, (str, type)) else dtype
    if not isinstance(name, str):
        name = (getattr(name, "name", None) or getattr(name, "__name__", None)
                or getattr(getattr(name, "dtype", None), "name", None) or str(name))
    if name not in KERAS_DTYPES:
        raise ValueError(f"[{where}] invalid dtype: {dtype!r} (Keras's dtypes are "
                         f"{', '.join(KERAS_DTYPES)}; Python's int is int32, float float32)")
    return name


def is_symbolic(x) -> bool:
    return isinstance(x, KerasTensor)


def _dummy(shape, dtype, k: int, lead=None):
    """A stand-in of ones for dummy batch number k: one value seen through a
    read-only view of the whole shape (zero strides), so that it costs
    nothing however large the shape; an operation applied to it makes (and
    pays for) its own result. The batch axis (first) is _DUMMY_BATCH[k] long
    (or `lead`), other axes of unknown length _DUMMY_LENGTH[k]."""
    first = _DUMMY_BATCH[k] if lead is None else lead
    shape = tuple((first if i == 0 else _DUMMY_LENGTH[k]) if d is None else d
                  for i, d in enumerate(shape))
    return np.broadcast_to(np.ones((), dtype=bool if dtype == "bool" else dtype), shape)


def follow_first_axis(result: "KerasTensor", source: "KerasTensor") -> None:
    """A layer's output whose first axis is its input's: when the input's
    first axis is not the batch's stand-in (a layer called in a traced call
    on `ops.arange(ops.shape(x)[1])`, whose length is the time axis's), the
    output's stand-ins take the same length, so that `tokens + positions`
    broadcasts as Keras's shapes do."""
    if not result.shape or result.shape[0] is not None or not source.shape or \
            source.shape[0] is not None:
        return
    leads = tuple(int(np.shape(d)[0]) for d in source._dummies)
    if leads != tuple(_DUMMY_BATCH):
        result._standins = tuple(_dummy(result.shape, result.dtype, k, leads[k])
                                 for k in range(len(_DUMMY_BATCH)))


class KerasTensor:
    """A symbolic tensor: a shape (batch axis ``None``), a dtype, and the
    operation that makes it. Supports Python's operators, NumPy's functions
    and ufuncs (``np.tanh(x)``, ``np.concatenate([a, b], -1)``), indexing and
    the usual array methods, each recording one operation."""

    __array_priority__ = 1000

    def __init__(self, shape, dtype, op: str, args=(), kwargs=None, dummies=None, where=None,
                 name: Optional[str] = None, fn: Optional[str] = None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.op = op  # "input", "param", "layer", "item", "prim"
        self.fn = fn  # the primitive of a "prim" tensor
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.id = next(_ids)
        self.where = where or user_location()
        self.name = name
        self._standins = dummies  # made when first needed (_dummies)
        ov = PARAM_OVERRIDES.get()
        if ov and op == "layer":  # a layer called after its weights were assigned
            mine = {k[1]: v for k, v in ov.items() if k[0] == id(self.args[0])}
            if mine:
                self.param_overrides = mine

    # ------------------------------------------------------------ basics
    @property
    def _dummies(self):
        """The stand-in values for the dummy batches (an operation's results,
        or views of ones that allocate nothing)."""
        if self._standins is None:
            self._standins = tuple(_dummy(self.shape, self.dtype, k)
                                   for k in range(len(_DUMMY_BATCH)))
        return self._standins

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def T(self):
        return _record("transpose", (self,), {})

    def __repr__(self):
        v = _value_now(self)
        if v is not None:  # (TensorFlow's eager tensors print their values)
            return f"tessera.Tensor({np.array2string(np.asarray(v))}, shape={self.shape}, " \
                   f"dtype={self.dtype})"
        return f"<KerasTensor shape={self.shape} dtype={self.dtype} op={self.op}>"

    def numpy(self):
        """The value on the batch, in a step run with run_eagerly=True."""
        v = _value_now(self)
        if v is None:
            self.__float__()  # (raises, naming the gap)
        return np.asarray(v)

    def __format__(self, spec):
        v = _value_now(self)
        if v is None:
            if spec:  # (f"{loss:.4f}": raises as float() does, naming run_eagerly)
                self.__float__()
            return repr(self)
        v = np.asarray(v)
        return format(v.item() if v.ndim == 0 else v, spec) if spec else str(v)

    def __bool__(self):
        v = _value_now(self)
        if v is not None:
            return bool(np.asarray(v))
        raise TypeError(
            f"[{self.where}] a symbolic tensor has no truth value while the model is being "
            "built: Python's if/while/and/or cannot look at values that exist only when the "
            "model runs; use np.where(cond, a, b), np.maximum, ... instead")

    def __float__(self):
        v = _value_now(self)
        if v is not None:
            return float(np.asarray(v))
        raise TypeError(
            f"[KerasTensor] a symbolic tensor has no value to convert with float() (or print "
            f"with %f): it is computed when the model (or the train_step fit traces once into "
            f"its compiled step) runs; compile(..., run_eagerly=True) runs a train_step, "
            f"test_step or predict_step on each batch's values, where it has one (made at "
            f"{self.where}, converted at {user_location()})")

    def __int__(self):
        v = _value_now(self)
        if v is not None:
            return int(np.asarray(v))
        return self.__float__()

    def __len__(self):
        if not self.shape or self.shape[0] is None:
            raise TypeError(f"[{self.where}] len() of a symbolic tensor with shape {self.shape} "
                            "is not known while the model is being built")
        return self.shape[0]

    def __iter__(self):
        raise TypeError(f"[{self.where}] a symbolic tensor cannot be iterated while the model is "
                        "being built; index it (x[:, 0]) or use np.split")

    def __hash__(self):
        return self.id

    def __array__(self, *args, **kwargs):
        v = _value_now(self)
        if v is not None:
            return np.asarray(v, *args[:1])
        raise TypeError(f"[{self.where}] a symbolic tensor (shape {self.shape}) has no values "
                        "while the model is being built; use NumPy functions on it (they are "
                        "recorded), not np.asarray")

    # ------------------------------------------------------------ operators
    def __add__(self, o): return _record("add", (self, o), {})
    def __radd__(self, o): return _record("add", (o, self), {})
    def __sub__(self, o): return _record("subtract", (self, o), {})
    def __rsub__(self, o): return _record("subtract", (o, self), {})
    def __mul__(self, o): return _record("multiply", (self, o), {})
    def __rmul__(self, o): return _record("multiply", (o, self), {})
    def __truediv__(self, o): return _record("divide", (self, o), {})
    def __rtruediv__(self, o): return _record("divide", (o, self), {})
    def __floordiv__(self, o): return _record("floor_divide", (self, o), {})
    def __rfloordiv__(self, o): return _record("floor_divide", (o, self), {})
    def __mod__(self, o): return _record("mod", (self, o), {})
    def __pow__(self, o): return _record("power", (self, o), {})
    def __rpow__(self, o): return _record("power", (o, self), {})
    def __matmul__(self, o): return _record("matmul", (self, o), {})
    def __rmatmul__(self, o): return _record("matmul", (o, self), {})
    def __neg__(self): return _record("negative", (self,), {})
    def __pos__(self): return self
    def __abs__(self): return _record("abs", (self,), {})
    def __invert__(self): return _record("invert", (self,), {})
    def __lt__(self, o): return _record("less", (self, o), {})
    def __le__(self, o): return _record("less_equal", (self, o), {})
    def __gt__(self, o): return _record("greater", (self, o), {})
    def __ge__(self, o): return _record("greater_equal", (self, o), {})
    def __eq__(self, o): return _record("equal", (self, o), {})  # noqa: E704
    def __ne__(self, o): return _record("not_equal", (self, o), {})
    def __and__(self, o): return _record("logical_and", (self, o), {})
    def __or__(self, o): return _record("logical_or", (self, o), {})

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        return _record("getitem", (self,) + tuple(_Index(i) for i in index), {})

    # ------------------------------------------------------------ methods
    def __getattr__(self, name):
        spec = METHOD_SPECS.get(name)
        if name in ("item", "tolist") and _value_now(self) is not None:  # (run_eagerly)
            return getattr(np.asarray(_value_now(self)), name)
        if spec is None or name.startswith("_"):
            raise AttributeError(f"[{self.__dict__.get('where', '?')}] a symbolic tensor has no "
                                 f"method {name!r}")

        def method(*args, **kwargs):
            if spec.varargs and args:  # x.reshape(2, 3) and x.reshape((2, 3)) alike
                one = len(args) == 1 and isinstance(args[0], (tuple, list))
                args = (tuple(args[0]) if one else tuple(args),)
            return _call_spec(spec, (self,) + tuple(args), kwargs)

        return method

    # ------------------------------------------------------------ NumPy protocol
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs.get("out") is not None:
            return NotImplemented
        kwargs.pop("out", None)
        name = NUMPY_RENAMES.get(ufunc.__name__, ufunc.__name__)
        return _record(name, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__  # np.linalg's functions share the primitives' names too
        spec = NUMPY_SPECS.get(name)
        if spec is not None:
            return _call_spec(spec, args, kwargs)
        return _record(NUMPY_RENAMES.get(name, name), args, kwargs)


class _Index:
    """One component of an index, written as the language writes it."""

    def __init__(self, value):
        if isinstance(value, KerasTensor):
            raise TypeError(f"[{value.where}] indexing with a symbolic tensor is not supported "
                            "while the model is being built; use np.take or np.where")
        self.value = value


def _call_spec(spec, args, kwargs):
    """A NumPy call through the translator's table: positional arguments past
    the primitive's own become keywords, NumPy's names renamed."""
    args = list(args)
    kw = {}
    if spec.varargs and len(args) > spec.positional:  # x.reshape(...): the packed shape
        kw[spec.varargs] = args.pop(spec.positional)
    for i, a in enumerate(args[spec.positional:], start=spec.positional):
        if i < len(spec.params):
            kw[spec.params[i]] = a
        else:
            raise TypeError(f"[{spec.prim}] too many arguments: {len(args)}")
    args = args[:spec.positional]
    for k, v in kwargs.items():
        kw[spec.rename.get(k, k)] = v
    for k in spec.ignore_none:
        if k in kw and kw[k] is None:
            del kw[k]
    if "out" in kw:
        raise TypeError("[symbolic] out= is not supported on symbolic tensors")
    return _record(spec.prim, args, kw)


_PRIMITIVES = None


def _primitive_names():
    global _PRIMITIVES
    if _PRIMITIVES is None:
        _PRIMITIVES = {p[0] for p in _core.primitives()}
    return _PRIMITIVES


def _concrete(a, k: int):
    """The stand-in value of an argument for dummy batch number k."""
    if isinstance(a, KerasTensor):
        return a._dummies[k]
    if isinstance(a, _Index):
        return a.value
    if isinstance(a, (list, tuple)):
        return type(a)(_concrete(v, k) for v in a)
    if isinstance(a, dict):
        return {key: _concrete(v, k) for key, v in a.items()}
    return a


# Operations whose result is the broadcast of their operands, element by
# element (saving.py allows these in a file's graph under the same name).
ELEMENTWISE_OPERATIONS = frozenset("""
    abs absolute add arccos arccosh arcsin arcsinh arctan arctan2 arctanh astype ceil clip
    copysign cos cosh deg2rad divide exp exp2 expm1 floor floor_divide fmax fmin hypot isfinite
    isinf isnan log log10 log1p log2 maximum minimum mod multiply nan_to_num negative positive
    power rad2deg reciprocal remainder rint round sign sin sinh sqrt square subtract tan tanh
    trunc where equal greater greater_equal isclose less less_equal logical_and logical_not
    logical_or logical_xor not_equal bitwise_and bitwise_or bitwise_xor bitwise_not invert
    left_shift right_shift conj copy zeros_like ones_like empty_like full_like
""".split())


def _constant(v) -> bool:
    """v holds one value however large its shape: a zero-stride view (the
    inputs' stand-ins, and results made from them), or a single element."""
    return isinstance(v, np.ndarray) and (v.size <= 1 or not any(v.strides))


def _elementwise_of_constants(name, cargs, ckw):
    """An elementwise operation on stand-ins that each hold one value: its
    result holds one value too, computed once on one element of each and
    seen through a zero-stride view of the broadcast shape. The same array
    as computing it whole, without allocating in proportion to a declared
    shape (a model file may declare any). None when it does not apply."""
    arrays = [v for v in list(cargs) + list(ckw.values()) if isinstance(v, np.ndarray)]
    if name not in ELEMENTWISE_OPERATIONS or not arrays or not all(map(_constant, arrays)) or \
            any(isinstance(v, (list, tuple, dict)) for v in list(cargs) + list(ckw.values())):
        return None
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        return None  # the operation itself reports it
    if math.prod(shape) <= 1:
        return None

    def one(v):
        if not isinstance(v, np.ndarray) or v.ndim == 0:
            return v
        return np.ascontiguousarray(v.reshape(-1)[:1]).reshape((1,) * v.ndim)

    r = _core.call_primitive(name, [one(v) for v in cargs], {k: one(v) for k, v in ckw.items()})
    if not isinstance(r, np.ndarray) or r.size != 1:
        return None
    out = np.broadcast_to(r.reshape((1,) * len(shape)), shape)
    return out


def _call_concrete(name, args, kwargs, k):
    if name == "getitem":
        x = _concrete(args[0], k)
        index = tuple(_concrete(a, k) for a in args[1:])
        return np.asarray(x)[index if len(index) != 1 else index[0]]
    cargs = [_concrete(a, k) for a in args]
    ckw = {key: _concrete(v, k) for key, v in kwargs.items()}
    if "dtype" in ckw and ckw["dtype"] is not None and not isinstance(ckw["dtype"], str):
        ckw["dtype"] = _dtype_name(ckw["dtype"])
    out = _elementwise_of_constants(name, cargs, ckw)
    if out is not None:
        return out
    return _core.call_primitive(name, cargs, ckw)


def _result_tensor(name, args, kwargs, values, where):
    """The symbolic result of an operation from its stand-in values."""
    if isinstance(values[0], list):
        raise TypeError(f"[{name}] at {where}: operations giving lists are not supported on "
                        "symbolic tensors yet")
    a, b = np.asarray(values[0]), np.asarray(values[1])
    if a.ndim != b.ndim:
        raise ValueError(f"[{name}] at {where}: the result's rank depends on the batch size")
    shape = tuple(None if p != q else p for p, q in zip(a.shape, b.shape))
    return KerasTensor(shape, str(a.dtype), "prim", args, kwargs, dummies=(a, b), where=where,
                       fn=name)


def _deferred_reshape(name, args, where):
    """A reshape between a shape of unknown axes and a fixed one (the switch
    transformer's (batch, 50, 32) -> (800, 32) for batches of 16, and back to
    (batch, 50, 32)): the stand-in batches cannot take it, but as Keras on JAX
    (whose symbolic shapes defer the check to the run) the result has the
    target's shape, the unknown axes None; the program checks the sizes when it
    runs. None when the sizes cannot match whatever the unknown axes are."""
    if name != "reshape" or len(args) != 2 or not isinstance(args[0], KerasTensor) or \
            not isinstance(args[1], (list, tuple)):
        return None
    x, target = args
    shape = []
    for d in target:
        if isinstance(d, KerasTensor):
            vals = {int(np.asarray(v)) for v in d._dummies}
            shape.append(vals.pop() if len(vals) == 1 else None)
        elif isinstance(d, (int, np.integer)) and d >= 0:
            shape.append(int(d))
        else:
            return None  # a -1: the stand-ins' error stands
    known_in = math.prod(d for d in x.shape if d is not None)
    known_out = math.prod(d for d in shape if d is not None)
    if (None in x.shape) == (None in shape):
        return None
    if None in x.shape and (known_in == 0 or known_out % known_in):
        return None
    if None in shape and (known_out == 0 or known_in % known_out):
        return None
    dtype = x.dtype
    return KerasTensor(tuple(shape), dtype, "prim", args, {}, where=where, fn=name)


def _fixed_batch_retry(name, args, kwargs, where):
    """An operation joining tensors of an unknown batch with values of a fixed one (nerf's
    rendering: `ops.concatenate` of deltas from the batch's Inputs and an
    `ops.broadcast_to([1e10], (BATCH_SIZE, H, W, 1))`): the stand-in batches cannot take it,
    but Keras's symbolic shapes read the unknown axis as the fixed size, and so does this: the
    unknown-batch stand-ins are taken at that size, the result has it; the program checks
    the sizes when it runs (concatenate's result keeps the batch unknown, as Keras's). None
    when there is no one fixed size to read."""
    leaves = []

    def walk(v):
        if isinstance(v, (list, tuple)):
            for u in v:
                walk(u)
        elif isinstance(v, dict):
            for u in v.values():
                walk(u)
        else:
            leaves.append(v)

    walk(list(args) + list(kwargs.values()))
    unknown = [a for a in leaves if isinstance(a, KerasTensor) and a.shape and a.shape[0] is None]
    if name == "getitem" or not unknown:
        return None
    ranks = {a.ndim for a in unknown}
    fixed = {a.shape[0] for a in leaves if isinstance(a, KerasTensor) and a.shape and
             a.shape[0] is not None and a.ndim in ranks}
    fixed |= {a.shape[0] for a in leaves if isinstance(a, np.ndarray) and a.ndim in ranks}
    fixed.discard(1)  # (broadcasts against any batch)
    if len(fixed) != 1:
        return None
    size = fixed.pop()

    def at(v, k):
        if isinstance(v, KerasTensor) and v.shape and v.shape[0] is None:
            d = np.asarray(v._dummies[k])
            return np.broadcast_to(d[:1], (size,) + d.shape[1:])
        if isinstance(v, (list, tuple)):
            return type(v)(at(u, k) for u in v)
        if isinstance(v, dict):
            return {key: at(u, k) for key, u in v.items()}
        return _concrete(v, k)

    try:
        values = []
        for k in range(len(_DUMMY_BATCH)):
            ckw = {key: at(v, k) for key, v in kwargs.items()}
            if "dtype" in ckw and ckw["dtype"] is not None and not isinstance(ckw["dtype"], str):
                ckw["dtype"] = _dtype_name(ckw["dtype"])
            values.append(_core.call_primitive(name, [at(a, k) for a in args], ckw))
    except Exception:  # noqa: BLE001 - the stand-ins' own error is reported
        return None
    if name == "concatenate":  # Keras's concatenate keeps an unknown axis unknown
        a = np.asarray(values[0])
        return KerasTensor((None,) + a.shape[1:], str(a.dtype), "prim", args, kwargs,
                           where=where, fn=name)
    return _result_tensor(name, args, kwargs, values, where)


def record_operation(name: str, args, kwargs):
    """A primitive applied to args/kwargs recorded as a symbolic tensor, even when none
    of them is symbolic (a constant made a tensor of a traced step)."""
    return _record(name, args, kwargs)


def _record(name: str, args, kwargs):
    """Records the primitive `name` applied to args/kwargs (some symbolic)."""
    where = user_location()
    args = _overridden(args)
    kwargs = {k: _overridden(v) for k, v in kwargs.items()}
    if name not in _primitive_names():
        raise TypeError(f"[{name}] at {where}: {name!r} is not an operation tessera can apply to "
                        "symbolic tensors (see `tessera ops` for the list)")
    try:
        values = [_call_concrete(name, args, kwargs, k) for k in range(len(_DUMMY_BATCH))]
    except Exception as e:  # noqa: BLE001 - re-raised with the user's location
        shapes = [a.shape for a in args if isinstance(a, KerasTensor)]
        deferred = _deferred_reshape(name, args, where)
        if deferred is None:
            deferred = _fixed_batch_retry(name, args, kwargs, where)
        if deferred is not None:
            return deferred
        raise type(e)(f"{e} (symbolic operation {name} on shapes {shapes} at {where})") from None
    return _result_tensor(name, args, kwargs, values, where)


# Keras's automatic names: a count per snake_case base ("dense", "dense_1", ...), for layers,
# models, and the InputLayer an unnamed Input() names at once, as Keras makes it then.
NAME_COUNTS: dict = {}


def next_name(base: str) -> str:
    n = NAME_COUNTS.get(base, 0)
    NAME_COUNTS[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def Input(shape=None, batch_size=None, dtype=None, name=None, batch_shape=None):  # noqa: N802
    """A model input, like keras.Input: `shape` is one sample's shape (the
    batch axis is added in front). An axis given as None has a length known
    only when the model runs (variable-length sequences): the model's
    programs are then written for each length met (docs/nn.md, "Variable
    lengths and masks")."""
    return _input(shape, batch_size, dtype, name, batch_shape, reserve_name=True)


def stand_in_input(shape=None, batch_size=None, dtype=None, name=None, batch_shape=None):
    """An Input tessera makes for itself (an eager call's, a clone's): it draws no
    automatic name, as Keras makes no InputLayer there."""
    return _input(shape, batch_size, dtype, name, batch_shape, reserve_name=False)


def _input(shape, batch_size, dtype, name, batch_shape, reserve_name):
    if batch_shape is not None:
        if isinstance(batch_shape, int) or len(tuple(batch_shape)) < 1:
            raise ValueError(f"[Input] batch_shape must be a tuple (batch, ...), got "
                             f"{batch_shape!r}")
        if tuple(batch_shape)[0] is not None:
            batch_size = batch_shape[0]
        shape = tuple(batch_shape)[1:]
    if shape is None:
        raise ValueError("[Input] shape is required (the shape of one sample)")
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(None if d is None else int(d) for d in shape)
    except TypeError:
        raise TypeError(f"[Input] shape must be a tuple of ints, got {shape!r}") from None
    if any(d is not None and d <= 0 for d in shape):
        raise ValueError(f"[Input] shape must hold positive ints, got {shape!r}")
    if dtype in ("string", "str", str):  # for a preprocessing layer (string_inputs.py)
        t = KerasTensor((None,) + shape, "string", "input", name=name)
    else:
        t = KerasTensor((None,) + shape, _dtype_name(dtype), "input", name=name)
    # the batch axis stays None (any batch runs); a batch size given is kept
    # for the layers that need one (stateful recurrent layers, rnn_states.py)
    t.fixed_batch = None if batch_size is None else int(batch_size)
    # the name its InputLayer takes in a model, drawn now as Keras draws it (a Sequential
    # called on it later names its own InputLayer after it)
    t.input_layer_name = name if name is not None or not reserve_name else \
        next_name("input_layer")
    return t


# The step's random seed as traced code sees it (random.normal & co. inside a
# layer's call): bound, when the code is written, to the program's seed for
# the layer call, so each training step draws anew.
STEP_SEED = KerasTensor((), "int64", "input", name="step_seed",
                        dummies=(np.array(1, dtype="int64"),) * len(_DUMMY_BATCH))


def nested_step_seed(seed, stride, index) -> str:
    """STEP_SEED's code inside a user's layer call: the caller's seed for the call, taken
    modulo 2**40 so that layers nested in layers (each multiplying by the stride, up to
    2**16) and draws (seed * 1000003 + i) stay inside int64 at any depth."""
    return f"(({seed} * {stride} + {index}) % {1 << 40})"


# ----------------------------------------------------------------- writing code


def _literal(v) -> str:
    if v is None:
        return "nil"
    if isinstance(v, bool) or isinstance(v, np.bool_):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if f != f:
            return "nan"
        if f in (float("inf"), float("-inf")):
            return "inf" if f > 0 else "-inf"
        return repr(f)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, type) or isinstance(v, np.dtype):
        return _literal(_dtype_name(v))
    raise TypeError(f"[symbolic] cannot write {v!r} into the model's program")


_GRADIENT_DEPTH = [0]  # GradientTape gradients being written (local functions)


def in_gradient_function() -> bool:
    """True while a GradientTape's gradient with respect to a computed value is written:
    its statements are a local function's, not the step's."""
    return _GRADIENT_DEPTH[0] > 0


def depending_on(target: KerasTensor, src: KerasTensor) -> dict:
    """{tensor id: whether it depends on src} for the tensors target's computation
    reads (a GradientTape's gradient tensor through its target as well)."""
    depends: dict = {src.id: True}
    stack = [(target, False)]
    while stack:
        v, ready = stack.pop()
        if v.id in depends:
            continue
        ins = GraphWriter._inputs(v) + ([v.grad_target] if v.op == "grad" else [])
        if not ready:
            stack.append((v, True))
            stack.extend((a, False) for a in ins if a.id not in depends)
            continue
        depends[v.id] = any(depends.get(a.id, False) for a in ins)
    return depends


def weight_free(roots) -> dict:
    """{tensor id: whether it depends on no weight} for the tensors the roots'
    computation reads: no layer call, weight or gradient among what makes it."""
    free: dict = {}
    stack = [(r, False) for r in roots]
    while stack:
        v, ready = stack.pop()
        if v.id in free:
            continue
        ins = GraphWriter._inputs(v) + ([v.grad_target] if v.op == "grad" else [])
        if not ready:
            stack.append((v, True))
            stack.extend((a, False) for a in ins if a.id not in free)
            continue
        free[v.id] = v.op not in ("layer", "param", "grad", "wgrad") and \
            all(free.get(a.id, True) for a in ins)
    return free


class WeightGradients:
    """One GradientTape.gradient call with respect to weights in a traced step: its
    targets (summed, as TensorFlow sums a non-scalar target and a list of them), the
    weights as (layer, param name), and the gradient tensors (op "wgrad") it gave."""

    def __init__(self, targets, weights, dtype, where):
        self.targets, self.weights = list(targets), list(weights)
        self.tensors = []
        for k, (layer, pname) in enumerate(self.weights):
            p = next(q for q in layer.params if q.name == pname)
            g = KerasTensor(tuple(p.shape), dtype, "wgrad", (self.targets,), where=where)
            g.wgrad_call, g.wgrad_index = self, k
            self.tensors.append(g)


class GraphWriter:
    """Writes the statements computing a graph of symbolic tensors.

    `names` maps tensors already bound (inputs) to expressions; `param_var`
    gives a parameter's variable; `layer_code(tensor, input_exprs)` writes a
    layer call and returns its expression (or list of expressions)."""

    def __init__(self, names: dict, param_var, layer_code, prefix: str = "t", param_at=None):
        self.names = dict(names)
        self.param_var = param_var
        self.layer_code = layer_code
        self.prefix = prefix
        self.stmts: list = []
        self._count = itertools.count()
        # param_at(layer, name, when): a weight read by an operation made at `when` (a
        # traced train_step's weights change between its updates), or None
        self.param_at = param_at
        self._consumer = None

    def expr(self, t: KerasTensor) -> str:
        self._visit(t)
        return self.names[t.id]

    def _arg(self, a) -> str:
        if isinstance(a, KerasTensor):
            if a.op == "param" and self.param_at is not None and self._consumer is not None:
                return self.param_at(*a.args, self._consumer)
            return self.names[a.id]
        if isinstance(a, (list, tuple)):
            if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in a):
                return "[" + ", ".join(self._arg(v) for v in a) + "]"
            # inside a list, a list of numbers stays a list (np.pad's pairs,
            # tensordot's axes): the language reads `[0, 1]` as an array
            items = [self._list_item(v) for v in a]
            return "list(" + ", ".join(items) + ")"
        if isinstance(a, np.ndarray):
            if a.ndim == 0:
                return _literal(a.item())
            if bindable(a):  # bound once, not written out (program_constants.py)
                return constant_name(a)
            return f"array({self._arg(a.tolist())}, dtype={_literal(str(a.dtype))})"
        return _literal(a)

    def _list_item(self, v) -> str:
        if isinstance(v, (list, tuple)) and v and all(
                isinstance(u, numbers.Number) and not isinstance(u, bool) for u in v):
            return "list(" + ", ".join(self._arg(u) for u in v) + ")"
        return self._arg(v)

    def _index(self, a: _Index) -> str:
        v = a.value
        if v is None:
            return "nil"
        if v is Ellipsis:
            return '"..."'
        if isinstance(v, slice):
            parts = [_literal(v.start), _literal(v.stop), _literal(v.step)]
            return f"slice({', '.join(parts)})"
        if isinstance(v, np.ndarray) and bindable(v) and v.dtype.kind in "biu":
            return constant_name(v)
        if isinstance(v, (list, tuple, np.ndarray)):
            return self._arg(list(np.asarray(v).tolist()))
        return _literal(v)

    @staticmethod
    def _inputs(t: KerasTensor):
        out = []

        def walk(a):
            if isinstance(a, KerasTensor):
                out.append(a)
            elif isinstance(a, (list, tuple)):
                for v in a:
                    walk(v)
            elif isinstance(a, dict):
                for v in a.values():
                    walk(v)

        walk(t.args)
        walk({k: v for k, v in t.kwargs.items() if k != "_template"})
        walk(list(getattr(t, "param_overrides", {}).values()))
        return out

    def _visit(self, root: KerasTensor):
        stack = [(root, False)]
        while stack:
            t, ready = stack.pop()
            if t.id in self.names:
                continue
            if not ready:
                stack.append((t, True))
                for a in self._inputs(t):
                    if a.id not in self.names:
                        stack.append((a, False))
                continue
            self._write(t)

    def _write(self, t: KerasTensor):
        self._consumer = t.id
        if t.op == "input":
            raise ValueError(f"[Model] the graph reaches an Input (made at {t.where}) that is "
                             "not among the model's inputs")
        if t.op == "param":
            self.names[t.id] = self.param_var(*t.args)
            return
        name = f"{self.prefix}{next(self._count)}"
        if t.op == "item":
            # a layer with several outputs: each was defined on its own (the
            # autodiff does not look into elements of lists)
            self.names[t.id] = self.names[t.args[0].id][t.args[1]]
            return
        if t.op == "grad":
            self._write_gradient(t, name)
            return
        if t.op == "wgrad":
            self._write_weight_gradient(t, name)
            return
        if t.op == "layer":
            expr = self.layer_code(t, name, self)
            if isinstance(expr, (list, tuple)):
                names = []
                for k, e in enumerate(expr):
                    self.stmts.append(f"define({name}_{k}, {e})")
                    names.append(f"{name}_{k}")
                self.names[t.id] = names
                return
            self.stmts.append(f"define({name}, {expr})")
        else:
            self.stmts.append(f"define({name}, {self._prim_expr(t)})")
        self.names[t.id] = name

    def _write_gradient(self, t: KerasTensor, name: str):
        """A GradientTape's gradient of t.grad_target with respect to the computed tensor
        t.args[0]: the target's computation written as a local function of the source
        (what does not depend on the source read from outside), and grad of its sum."""
        src, target = t.args[0], t.grad_target
        depends = depending_on(target, src)
        if not depends[target.id]:
            raise ValueError(f"[GradientTape.gradient] the target (made at {target.where}) "
                             f"does not depend on the source (made at {src.where}): its "
                             f"gradient is None under TensorFlow, not a tensor")
        x = f"{name}_x"
        outside = {k: v for k, v in self.names.items() if not depends.get(k, False)}
        outside[src.id] = x
        sub = GraphWriter(outside, self.param_var, self.layer_code, prefix=f"{name}_")
        _GRADIENT_DEPTH[0] += 1
        try:
            value = sub.expr(target)
        finally:
            _GRADIENT_DEPTH[0] -= 1
        body = ", ".join(sub.stmts + [f"sum({value})"])
        self.stmts.append(f"define({name}_f, {x}, block({body}))")
        self.stmts.append(f"define({name}, grad({name}_f)({self.names[src.id]}))")
        self.names[t.id] = name

    def _write_weight_gradient(self, t: KerasTensor, name: str):
        """A GradientTape's gradients of t.wgrad_call's targets (their sums, summed) with
        respect to weights: the targets' computation written again as a local function
        whose parameters are the weights' own names (shadowing them, so that the layers
        written inside read them), and grad of it in every weight at once. What depends
        on no weight is read from outside. A target made of other such gradients is
        differentiated through them (a second-order gradient: grad of a grad)."""
        call = t.wgrad_call
        ws = [self.param_var(layer, pname) for layer, pname in call.weights]
        if not all(isinstance(w, str) and w.isidentifier() for w in ws) or \
                len(set(ws)) != len(ws):
            raise NotImplementedError(f"[GradientTape.gradient] a gradient with respect to "
                                      f"weights inside the step is not supported here (the "
                                      f"weights are read as {ws}) (at {t.where})")
        fixed = weight_free(call.targets)
        outside = {k: v for k, v in self.names.items() if fixed.get(k, True)}
        sub = GraphWriter(outside, self.param_var, self.layer_code, prefix=f"{name}_",
                          param_at=self.param_at)
        sums = [f"sum({sub.expr(target)})" for target in call.targets]
        body = ", ".join(sub.stmts + [" + ".join(sums)])
        nums = ", ".join(str(k) for k in range(len(ws)))
        self.stmts.append(f"define({name}_f, {', '.join(ws)}, block({body}))")
        self.stmts.append(f"define({name}, grad({name}_f, argnums=[{nums}])({', '.join(ws)}))")
        for k, g in enumerate(call.tensors):
            self.stmts.append(f"define({name}_{k}, {name}[{k}])")
            self.names[g.id] = f"{name}_{k}"

    def _prim_expr(self, t: KerasTensor) -> str:
        fn = t.fn
        if fn == "getitem":
            x = self._arg(t.args[0])
            index = ", ".join(self._index(a) for a in t.args[1:])
            return f"getitem({x}, {index})"
        parts = [self._arg(a) for a in t.args]
        for k, v in t.kwargs.items():
            if k == "dtype" and v is not None:
                v = _dtype_name(v)
            parts.append(f"{k}={self._arg(v)}")
        return f"{fn}({', '.join(parts)})"
