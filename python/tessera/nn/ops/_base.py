"""What every op of ``tessera.nn.ops`` shares: one call that runs a primitive
eagerly on arrays, or records it on symbolic tensors (inside a custom
layer's ``call``, a loss or a metric), so each op is written once."""

from __future__ import annotations

import difflib
import numbers

import numpy as np

from ... import _core
from ..symbolic import KerasTensor, _dtype_name, _record, user_location
from ..variables import Variable, is_tracing

FLOATX = "float32"


def is_symbolic(*values) -> bool:
    """True when a symbolic tensor is among values (nested lists, tuples, dicts)."""
    for v in values:
        if isinstance(v, KerasTensor):
            # a Variable outside a traced call is its value (Keras's eager ops on it)
            if isinstance(v, Variable) and not is_tracing():
                continue
            return True
        if isinstance(v, (list, tuple)) and is_symbolic(*v):
            return True
        if isinstance(v, dict) and is_symbolic(*v.values()):
            return True
    return False


def eager_value(a):
    """An argument as the core takes it: array-likes (JAX arrays, NumPy
    scalars) become NumPy arrays; Python numbers stay (weakly typed, as in
    Keras: float32 + 2.0 stays float32); lists keep their structure."""
    if isinstance(a, (np.ndarray, bool, numbers.Number, str)) or a is None:
        return a
    if isinstance(a, (list, tuple)):
        return type(a)(eager_value(v) for v in a)
    if isinstance(a, dict):
        return {k: eager_value(v) for k, v in a.items()}
    if isinstance(a, (np.generic,)) or hasattr(a, "__array__"):
        return np.asarray(a)
    return a


def prim(name: str, *args, **kwargs):
    """The primitive `name` on args: recorded when one is symbolic, else run now."""
    if "dtype" in kwargs and kwargs["dtype"] is not None:
        kwargs["dtype"] = _dtype_name(kwargs["dtype"])
    if is_symbolic(args, kwargs):
        return _record(name, args, kwargs)
    r = _core.call_primitive(name, [eager_value(a) for a in args],
                             {k: eager_value(v) for k, v in kwargs.items()})
    return np.asarray(r) if isinstance(r, np.generic) else r


def tensor(x, dtype=None):
    """x as a tensor: symbolic tensors and arrays as they are; Python numbers
    and lists as Keras converts them (floats float32, ints int32)."""
    if isinstance(x, KerasTensor):
        return x if dtype is None else cast(x, dtype)
    if isinstance(x, (list, tuple)) and is_symbolic(x):
        return prim("stack", [tensor(v) for v in x], axis=0)
    if dtype is not None:
        return np.asarray(eager_value(x), dtype=_dtype_name(dtype))
    if isinstance(x, np.ndarray):
        return x
    a = np.asarray(eager_value(x))
    if a.dtype == np.float64 and not isinstance(x, (np.ndarray, np.generic)):
        a = a.astype(FLOATX)
    elif a.dtype == np.int64 and not isinstance(x, (np.ndarray, np.generic)):
        a = a.astype("int32")
    return a


def dtype_of(x) -> str:
    if isinstance(x, KerasTensor):
        return x.dtype
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, numbers.Integral):
        return "int32"
    if isinstance(x, numbers.Real):
        return FLOATX
    return str(np.asarray(x).dtype)


def shape_of(x) -> tuple:
    if isinstance(x, KerasTensor):
        return x.shape
    return tuple(np.shape(eager_value(x)))


def cast(x, dtype):
    dtype = _dtype_name(dtype)
    if dtype_of(x) == dtype and not isinstance(x, (numbers.Number, list, tuple)):
        return x
    return prim("astype", tensor(x), dtype)


def floating(x):
    """x as a float tensor: ints and bools become float32, as Keras's
    float-valued ops (sqrt, exp, mean, ...) do."""
    x = tensor(x)
    d = dtype_of(x)
    if d.startswith("float") or d.startswith("complex") or d == "bfloat16":
        return x
    return cast(x, FLOATX)


def eager_only(op: str, *values):
    """A clear error for an op that needs values while the model is built."""
    if is_symbolic(*values):
        raise TypeError(f"[ops.{op}] at {user_location()}: not supported on symbolic tensors "
                        "(inside a layer's call, a loss or a metric) yet; it runs eagerly on "
                        "arrays only")


def check_axis(op: str, axis, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"[ops.{op}] axis must be an int, got {axis!r}")
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"[ops.{op}] axis {axis} is out of range for a tensor of rank {ndim} "
                         f"(at {user_location()})")
    return int(axis) % max(ndim, 1)


def missing(module: str, name: str, supported) -> AttributeError:
    """The error for a Keras name the module lacks, naming the closest supported one."""
    close = difflib.get_close_matches(name, sorted(supported), n=3)
    hint = f"; the closest supported: {close}" if close else ""
    return AttributeError(f"[{module}] Keras's {name!r} is not supported by tessera yet{hint} "
                          "(docs/nn.md, section \"ops, activations, random\")")


def static_or_symbolic_shape(x) -> tuple:
    """ops.shape: a tuple of ints; on a symbolic tensor the batch axis
    (unknown while the model is built) is a symbolic int."""
    s = shape_of(x)
    if None not in s:
        return tuple(s)
    whole = prim("shape", x)
    return tuple(d if d is not None else whole[i] for i, d in enumerate(s))


# Keras's type promotion lattice (JAX's): each dtype and the dtypes just above it; "int" and
# "float" are Python's weakly typed numbers. The least upper bound of the operands' places is
# the result. Unlike Keras on JAX, 64-bit results stay 64-bit (tessera holds int64 and
# float64; Keras narrows them to 32 bits).
_LATTICE_UP = {
    "bool": ("int",), "uint8": ("int16", "uint16"), "uint16": ("int32", "uint32"),
    "uint32": ("int64", "uint64"), "uint64": ("float",), "int": ("uint8", "int8", "complex64"),
    "int8": ("int16",), "int16": ("int32",), "int32": ("int64",), "int64": ("float",),
    "float": ("bfloat16", "float16"), "bfloat16": ("float32",), "float16": ("float32",),
    "float32": ("float64", "complex64"), "float64": ("complex128",),
    "complex64": ("complex128",), "complex128": (),
}


def _above(dtype: str) -> set:
    seen, stack = set(), [dtype]
    while stack:
        d = stack.pop()
        if d not in seen:
            seen.add(d)
            stack.extend(_LATTICE_UP[d])
    return seen


_ABOVE = {d: _above(d) for d in _LATTICE_UP}


def keras_result_type(*operands) -> str:
    """The dtype Keras's ops give for these operands (tensors, arrays, Python numbers):
    int32 + 1.5 and int32 + float32 are float32, bool + 1 is int32, as keras.backend.
    result_type; Python numbers alone are int32 or the float dtype."""
    places = set()
    for x in operands:
        if isinstance(x, bool):
            places.add("bool")
        elif isinstance(x, numbers.Integral) and not isinstance(x, np.generic):
            places.add("int")
        elif isinstance(x, numbers.Real) and not isinstance(x, np.generic):
            places.add("float")
        else:
            d = dtype_of(x)
            places.add(d if d in _LATTICE_UP else np.dtype(d).name)
    return lattice_bound(places)


def lattice_bound(places) -> str:
    """The least upper bound of dtype names ("int" and "float": Python's weak numbers) on
    Keras's lattice, a weak result as Keras resolves it (int32, the float dtype)."""
    unknown = [p for p in places if p not in _LATTICE_UP]
    if unknown:
        raise ValueError(f"[result_type] not a dtype Keras promotes: {unknown[0]!r}")
    common = set.intersection(*(_ABOVE[p] for p in places))
    lub = next(d for d in common if _ABOVE[d] >= common)  # the one below all the others
    return {"int": "int32", "float": FLOATX}.get(lub, lub)
