"""Keras 3's NumPy set of ops (``keras.ops.abs`` ... ``keras.ops.zeros_like``),
with Keras's signatures and defaults: eager on arrays, recorded on symbolic
tensors (and then differentiated by the primitives' gradient rules)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ..symbolic import KerasTensor
from ._base import (FLOATX, cast, check_axis, dtype_of, eager_only, floating, keras_result_type,
                    prim, shape_of, tensor)

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _doc(name, text):
    return f"Like keras.ops.{name}: {text}"


# ------------------------------------------------------------ elementwise, one operand
# (primitive, Keras's result is float: ints and bools are cast to float32 first)
_UNARY = {
    "abs": ("abs", False), "absolute": ("abs", False), "negative": ("negative", False),
    "square": ("square", False), "sign": ("sign", False), "ceil": ("ceil", True),
    "floor": ("floor", True), "trunc": ("trunc", False), "conj": ("conj", False),
    "conjugate": ("conj", False), "real": ("real", False), "imag": ("imag", False),
    "copy": ("copy", False), "logical_not": ("logical_not", False),
    "bitwise_not": ("bitwise_not", False), "bitwise_invert": ("bitwise_not", False),
    "sqrt": ("sqrt", True), "exp": ("exp", True), "exp2": ("exp2", True),
    "expm1": ("expm1", True), "log": ("log", True), "log2": ("log2", True),
    "log10": ("log10", True), "log1p": ("log1p", True), "sin": ("sin", True),
    "cos": ("cos", True), "tan": ("tan", True), "arcsin": ("arcsin", True),
    "arccos": ("arccos", True), "arctan": ("arctan", True), "sinh": ("sinh", True),
    "cosh": ("cosh", True), "tanh": ("tanh", True), "arcsinh": ("arcsinh", True),
    "arccosh": ("arccosh", True), "arctanh": ("arctanh", True),
    "reciprocal": ("reciprocal", True), "deg2rad": ("deg2rad", True),
    "rad2deg": ("rad2deg", True), "isnan": ("isnan", False), "isinf": ("isinf", False),
    "isfinite": ("isfinite", False), "fabs": ("abs", True),
}


def _unary(name, p, to_float):
    def op(x):
        x = floating(x) if to_float else tensor(x)
        return prim(p, x)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = _doc(name, f"elementwise {p}.")
    return op


for _n, (_p, _f) in _UNARY.items():
    globals()[_n] = _export(_unary(_n, _p, _f))

# ------------------------------------------------------------ elementwise, two operands
_BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "true_divide": "divide", "floor_divide": "floor_divide", "mod": "mod", "fmod": None,
    "power": "power", "maximum": "maximum", "minimum": "minimum", "fmax": "fmax",
    "fmin": "fmin", "arctan2": "arctan2", "hypot": "hypot", "copysign": "copysign",
    "equal": "equal", "not_equal": "not_equal", "less": "less", "less_equal": "less_equal",
    "greater": "greater", "greater_equal": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "left_shift": "left_shift",
    "right_shift": "right_shift", "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
}
_FLOAT_BINARY = {"divide", "true_divide", "arctan2", "hypot"}
# the arithmetic ones, whose result has Keras's promoted dtype (keras_result_type)
_PROMOTED = {"add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "mod",
             "power", "maximum", "minimum", "fmax", "fmin", "arctan2", "hypot", "copysign"}


def _binary_operand(x):
    return x if isinstance(x, (int, float, bool)) else tensor(x)


def _operands(*xs):
    """Tensors stay, Python numbers stay weak (float32 + 2.0 is float32) unless
    all are Python numbers: then they become tensors as Keras makes them
    (floats float32, ints int32)."""
    if builtins.all(isinstance(x, (int, float, bool)) for x in xs):
        return tuple(tensor(x) for x in xs)
    return tuple(_binary_operand(x) for x in xs)


def _binary(name, p):
    def op(x1, x2):
        a, b = _operands(x1, x2)
        if name in _FLOAT_BINARY and not builtins.any(
                dtype_of(v).startswith(("float", "complex")) for v in (a, b)
                if not isinstance(v, (int, float))):
            a, b = (floating(v) if not isinstance(v, (int, float)) else v for v in (a, b))
        if name == "fmod":  # C's fmod: the remainder with the dividend's sign
            return subtract(a, multiply(trunc(divide(a, b)), b))
        if name in _PROMOTED:
            # Keras's promotion, not NumPy's: int32 + 1.5 and int32 + float32 are float32,
            # bool + 1 is int32 (the tensors cast to it; Python numbers stay weak)
            want = keras_result_type(a, b)
            a, b = (v if isinstance(v, (int, float)) or dtype_of(v) == want else cast(v, want)
                    for v in (a, b))
        return prim(p, a, b)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = _doc(name, f"elementwise {p or name} of x1 and x2 (broadcast).")
    return op


for _n, _p in _BINARY.items():
    globals()[_n] = _export(_binary(_n, _p))


@_export
def round(x, decimals=0):  # noqa: A001 - Keras's name
    return prim("round", tensor(x), decimals=decimals)


@_export
def cbrt(x):
    x = floating(x)
    return multiply(sign(x), power(abs(x), 1.0 / 3.0))


@_export
def logaddexp(x1, x2):
    a, b = floating(x1), floating(x2)
    m = maximum(a, b)
    return add(m, log1p(exp(negative(abs(subtract(a, b))))))


@_export
def divide_no_nan(x1, x2):
    """x1 / x2, 0 where x2 is 0 (Keras's divide_no_nan)."""
    a, b = floating(x1), floating(x2) if not isinstance(x2, (int, float)) else x2
    zero = equal(b, 0)
    safe = where(zero, 1.0, b)
    return where(zero, 0.0, divide(a, safe))


@_export
def clip(x, x_min, x_max):
    x = tensor(x)
    if dtype_of(x) == "bool":
        x = cast(x, "int32")
    return prim("clip", x, x_min, x_max)


@_export
def where(condition, x1=None, x2=None):
    if (x1 is None) != (x2 is None):
        raise ValueError("[ops.where] x1 and x2 must be given together (or neither, for the "
                         "indices of non-zero elements)")
    if x1 is None:
        eager_only("where(condition)", condition)
        return nonzero(condition)
    if builtins.all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x1, x2)):
        # two Python numbers: Keras's float32 / int32, the same whether recorded or not
        r = prim("where", tensor(condition), x1, x2)
        return cast(r, FLOATX if isinstance(x1, float) or isinstance(x2, float) else "int32")
    return prim("where", tensor(condition), _binary_operand(x1), _binary_operand(x2))


@_export
def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    return prim("nan_to_num", tensor(x), nan=nan, posinf=posinf, neginf=neginf)


@_export
def isclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    return prim("isclose", tensor(x1), tensor(x2), rtol=rtol, atol=atol, equal_nan=equal_nan)


@_export
def allclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    return prim("all", isclose(x1, x2, rtol, atol, equal_nan))


# ------------------------------------------------------------ reductions
def _int_result(x, r):
    """Keras (on JAX) keeps sums of 32-bit-or-narrower ints in int32."""
    d = dtype_of(x)
    if d in ("bool", "int8", "int16", "int32", "uint8", "uint16"):
        return cast(r, "int32")
    return r


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


@_export
def sum(x, axis=None, keepdims=False):  # noqa: A001
    x = tensor(x)
    return _int_result(x, prim("sum", x, axis=_axis(axis), keepdims=keepdims))


@_export
def prod(x, axis=None, keepdims=False, dtype=None):
    x = tensor(x)
    r = prim("prod", x, axis=_axis(axis), keepdims=keepdims)
    return cast(r, dtype) if dtype is not None else _int_result(x, r)


@_export
def mean(x, axis=None, keepdims=False):
    return prim("mean", floating(x), axis=_axis(axis), keepdims=keepdims)


@_export
def max(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    r = prim("max", tensor(x), axis=_axis(axis), keepdims=keepdims)
    return r if initial is None else maximum(r, initial)


@_export
def min(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    r = prim("min", tensor(x), axis=_axis(axis), keepdims=keepdims)
    return r if initial is None else minimum(r, initial)


amax = _export(lambda x, axis=None, keepdims=False: max(x, axis, keepdims))
amax.__name__ = "amax"
amin = _export(lambda x, axis=None, keepdims=False: min(x, axis, keepdims))
amin.__name__ = "amin"
__all__[-2:] = ["amax", "amin"]


@_export
def all(x, axis=None, keepdims=False):  # noqa: A001
    return prim("all", tensor(x), axis=_axis(axis), keepdims=keepdims)


@_export
def any(x, axis=None, keepdims=False):  # noqa: A001
    return prim("any", tensor(x), axis=_axis(axis), keepdims=keepdims)


@_export
def var(x, axis=None, keepdims=False):
    return prim("var", floating(x), axis=_axis(axis), keepdims=keepdims)


@_export
def std(x, axis=None, keepdims=False):
    return prim("std", floating(x), axis=_axis(axis), keepdims=keepdims)


@_export
def median(x, axis=None, keepdims=False):
    return prim("median", floating(x), axis=_axis(axis), keepdims=keepdims)


@_export
def argmax(x, axis=None, keepdims=False):
    return cast(prim("argmax", tensor(x), axis=axis, keepdims=keepdims), "int32")


@_export
def argmin(x, axis=None, keepdims=False):
    return cast(prim("argmin", tensor(x), axis=axis, keepdims=keepdims), "int32")


@_export
def count_nonzero(x, axis=None):
    return cast(prim("count_nonzero", tensor(x), axis=_axis(axis)), "int32")


@_export
def average(x, axis=None, weights=None):
    x = floating(x)
    if weights is None:
        return mean(x, axis=axis)
    w = floating(weights)
    if axis is not None and len(shape_of(w)) == 1 and len(shape_of(x)) > 1:
        ax = check_axis("average", axis, len(shape_of(x)))
        w = reshape(w, tuple(-1 if i == ax else 1 for i in builtins.range(len(shape_of(x)))))
    return divide(sum(multiply(x, w), axis=axis), sum(multiply(ones_like(x), w), axis=axis))


@_export
def cumsum(x, axis=None, dtype=None):
    x = tensor(x)
    r = prim("cumsum", x, axis=axis)
    return cast(r, dtype) if dtype is not None else _int_result(x, r)


@_export
def cumprod(x, axis=None, dtype=None):
    x = tensor(x)
    r = prim("cumprod", x, axis=axis)
    return cast(r, dtype) if dtype is not None else _int_result(x, r)


@_export
def ptp(x, axis=None, keepdims=False):
    return subtract(max(x, axis, keepdims), min(x, axis, keepdims))


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op, x, q, axis, method, keepdims, scale):
    """Keras's quantile/percentile: linear interpolation by the primitive; the other
    methods of NumPy's (lower, higher, midpoint, nearest) pick from the sorted values at
    static positions (q a number or a list; axis None or an int)."""
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"[ops.{op}] method must be one of {list(_QUANTILE_METHODS)}, got "
                         f"{method!r}")
    if method == "linear":
        return prim(op, floating(x), q, axis=_axis(axis), keepdims=keepdims)
    x = floating(x)
    if isinstance(q, KerasTensor) or isinstance(axis, (list, tuple)):
        raise NotImplementedError(f"[ops.{op}] method={method!r} takes q as numbers and axis as "
                                  f"None or an int (method='linear' takes any)")
    qs = np.asarray(q, dtype=np.float64) / scale
    nd = len(shape_of(x))
    ax = 0 if axis is None else check_axis(op, axis, nd)
    flat = reshape(x, (-1,)) if axis is None else x
    n = shape_of(flat)[ax]
    if n is None:
        raise NotImplementedError(f"[ops.{op}] method={method!r} needs the length of the axis it "
                                  "reduces (not the batch axis of a symbolic tensor)")
    pos = qs * (n - 1)
    ordered = sort(flat, axis=ax)

    def at(idx):
        return take(ordered, np.asarray(idx, dtype=np.int32), axis=ax)

    if method == "midpoint":
        out = multiply(add(at(np.floor(pos)), at(np.ceil(pos))), 0.5)
    else:
        # nearest: a tie takes the lower, as Keras on JAX (NumPy rounds it to even)
        pick = {"lower": np.floor, "higher": np.ceil, "nearest": lambda p: np.ceil(p - 0.5)}
        out = at(pick[method](pos))
    if qs.ndim:
        out = moveaxis(out, ax, 0)
    if keepdims:
        kept = range(nd) if axis is None else [ax]
        for a in kept:
            out = expand_dims(out, a + qs.ndim)
    return out


@_export
def quantile(x, q, axis=None, method="linear", keepdims=False):
    return _quantile("quantile", x, q, axis, method, keepdims, 1.0)


@_export
def percentile(x, q, axis=None, method="linear", keepdims=False):
    return _quantile("percentile", x, q, axis, method, keepdims, 100.0)


# ------------------------------------------------------------ linear algebra products
@_export
def matmul(x1, x2):
    return prim("matmul", tensor(x1), tensor(x2))


@_export
def dot(x1, x2):
    return prim("dot", tensor(x1), tensor(x2))


@_export
def tensordot(x1, x2, axes=2):
    """Written as an einsum (which has a gradient rule), so it trains."""
    a, b = tensor(x1), tensor(x2)
    na, nb = len(shape_of(a)), len(shape_of(b))
    if isinstance(axes, int):
        if not 0 <= axes <= builtins.min(na, nb):
            raise ValueError(f"[ops.tensordot] axes={axes} is out of range for ranks {na} and "
                             f"{nb}")
        ax_a, ax_b = list(builtins.range(na - axes, na)), list(builtins.range(axes))
    else:
        ax_a, ax_b = ([v] if isinstance(v, int) else list(v) for v in axes)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"[ops.tensordot] axes {axes!r}: the two lists differ in length")
        ax_a = [check_axis("tensordot", v, na) for v in ax_a]
        ax_b = [check_axis("tensordot", v, nb) for v in ax_b]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = [next(letters) for _ in builtins.range(na)]
    sb = [next(letters) for _ in builtins.range(nb)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in ax_a] + \
        [c for k, c in enumerate(sb) if k not in ax_b]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


@_export
def einsum(subscripts, *operands):
    return prim("einsum", subscripts, *[tensor(o) for o in operands])


@_export
def outer(x1, x2):
    return prim("outer", tensor(x1), tensor(x2))


@_export
def inner(x1, x2):
    return prim("inner", tensor(x1), tensor(x2))


@_export
def vdot(x1, x2):
    return prim("vdot", tensor(x1), tensor(x2))


@_export
def kron(x1, x2):
    return prim("kron", tensor(x1), tensor(x2))


@_export
def cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    if (axisa, axisb, axisc) != (-1, -1, -1):
        raise ValueError(f"[ops.cross] only the last axis is supported, got axisa={axisa}, "
                         f"axisb={axisb}, axisc={axisc}")
    return prim("cross", tensor(x1), tensor(x2))


@_export
def trace(x, offset=0, axis1=0, axis2=1):
    return prim("trace", tensor(x), offset=offset, axis1=axis1, axis2=axis2)


@_export
def diag(x, k=0):
    return prim("diag", tensor(x), k=k)


@_export
def diagonal(x, offset=0, axis1=0, axis2=1):
    x = tensor(x)
    nd = len(shape_of(x))
    a1, a2 = check_axis("diagonal", axis1, nd), check_axis("diagonal", axis2, nd)
    x = moveaxis(x, [a1, a2], [-2, -1])
    n, m = shape_of(x)[-2:]
    if n is None or m is None:
        raise ValueError("[ops.diagonal] the two axes' lengths must be known")
    rows = [i for i in builtins.range(n) if 0 <= i + offset < m]
    if not rows:
        return zeros(tuple(shape_of(x)[:-2]) + (0,), dtype=dtype_of(x))
    idx_r = np.array(rows)
    return x[..., idx_r, idx_r + offset]


# ------------------------------------------------------------ shapes
@_export
def reshape(x, newshape):
    if isinstance(newshape, int) or isinstance(newshape, KerasTensor):
        newshape = (newshape,)
    return prim("reshape", tensor(x), list(newshape))


@_export
def transpose(x, axes=None):
    return prim("transpose", tensor(x), axes=None if axes is None else list(axes))


@_export
def expand_dims(x, axis):
    return prim("expand_dims", tensor(x), list(axis) if isinstance(axis, tuple) else axis)


@_export
def squeeze(x, axis=None):
    return prim("squeeze", tensor(x), axis=_axis(axis))


@_export
def ravel(x):
    return reshape(x, (-1,))


@_export
def flip(x, axis=None):
    return prim("flip", tensor(x), axis=_axis(axis))


@_export
def fliplr(x):
    return flip(x, 1)


@_export
def flipud(x):
    return flip(x, 0)


@_export
def rot90(array, k=1, axes=(0, 1)):
    x = tensor(array)
    k %= 4
    a, b = axes
    for _ in builtins.range(k):
        x = swapaxes(flip(x, b), a, b)
    return x


@_export
def roll(x, shift, axis=None):
    return prim("roll", tensor(x), shift, axis=_axis(axis))


@_export
def swapaxes(x, axis1, axis2):
    return prim("swapaxes", tensor(x), axis1, axis2)


@_export
def moveaxis(x, source, destination):
    s = list(source) if isinstance(source, (list, tuple)) else source
    d = list(destination) if isinstance(destination, (list, tuple)) else destination
    return prim("moveaxis", tensor(x), s, d)


@_export
def broadcast_to(x, shape):
    return prim("broadcast_to", tensor(x), list(shape))


@_export
def concatenate(xs, axis=0):
    return prim("concatenate", [tensor(v) for v in xs], axis=axis)


@_export
def append(x1, x2, axis=None):
    if axis is None:
        return concatenate([ravel(x1), ravel(x2)], 0)
    return concatenate([x1, x2], axis)


@_export
def stack(x, axis=0):
    return prim("stack", [tensor(v) for v in x], axis=axis)


@_export
def hstack(xs):
    xs = [tensor(v) for v in xs]
    return concatenate(xs, 0 if len(shape_of(xs[0])) == 1 else 1)


@_export
def vstack(xs):
    return prim("vstack", [tensor(v) for v in xs])


@_export
def dstack(xs):
    return prim("dstack", [tensor(v) for v in xs])


def _sections(op, x, indices_or_sections, axis):
    """Split points along axis (Keras's: equal sections must divide the axis)."""
    n = shape_of(x)[axis]
    if isinstance(indices_or_sections, int):
        if n is None:
            what = "the batch axis" if axis == 0 else f"axis {axis}"
            raise ValueError(f"[ops.{op}] cannot split {what} into {indices_or_sections} equal "
                             f"sections of a tensor of shape {shape_of(x)}: its length is not "
                             "known while the model is built (give it a length in Input, or "
                             "split at indices)")
        if indices_or_sections <= 0 or n % indices_or_sections:
            raise ValueError(f"[ops.{op}] {n} elements along axis {axis} do not split into "
                             f"{indices_or_sections} equal sections")
        step = n // indices_or_sections
        return [(i * step, (i + 1) * step) for i in builtins.range(indices_or_sections)]
    pts = [0] + [int(i) for i in indices_or_sections] + [n]
    return list(zip(pts[:-1], pts[1:]))


@_export
def split(x, indices_or_sections, axis=0):
    """A list of parts of x along axis (each part its own tensor, so it works
    on symbolic tensors too)."""
    x = tensor(x)
    ax = check_axis("split", axis, len(shape_of(x)))
    index = [slice(None)] * ax
    return [x[tuple(index + [slice(a, b)])] for a, b in _sections("split", x, indices_or_sections,
                                                                   ax)]


@_export
def array_split(x, indices_or_sections, axis=0):
    x = tensor(x)
    ax = check_axis("array_split", axis, len(shape_of(x)))
    if isinstance(indices_or_sections, int):
        n = shape_of(x)[ax]
        q, r = divmod(n, indices_or_sections)
        sizes = [q + (i < r) for i in builtins.range(indices_or_sections)]
        indices_or_sections = list(np.cumsum(sizes)[:-1])
    return split(x, indices_or_sections, ax)


@_export
def hsplit(x, indices_or_sections):
    return split(x, indices_or_sections, 0 if len(shape_of(x)) == 1 else 1)


@_export
def vsplit(x, indices_or_sections):
    return split(x, indices_or_sections, 0)


@_export
def dsplit(x, indices_or_sections):
    return split(x, indices_or_sections, 2)


@_export
def unstack(x, num=None, axis=0):
    x = tensor(x)
    ax = check_axis("unstack", axis, len(shape_of(x)))
    n = shape_of(x)[ax]
    if n is None:
        raise ValueError("[ops.unstack] cannot unstack the batch axis (its length is not known "
                         "while the model is built)")
    if num is not None and num != n:
        raise ValueError(f"[ops.unstack] num={num} but axis {axis} has {n} elements")
    index = [slice(None)] * ax
    return [x[tuple(index + [i])] for i in builtins.range(n)]


@_export
def tile(x, repeats):
    return prim("tile", tensor(x), list(repeats) if isinstance(repeats, tuple) else repeats)


@_export
def repeat(x, repeats, axis=None):
    return prim("repeat", tensor(x), repeats, axis=axis)


@_export
def pad(x, pad_width, mode="constant", constant_values=None):
    if constant_values is not None and mode != "constant":
        raise ValueError(f"[ops.pad] constant_values applies to mode 'constant' only, got "
                         f"mode={mode!r}")
    pw = [list(p) for p in pad_width] if isinstance(pad_width[0], (list, tuple)) else \
        list(pad_width)
    kw = {} if constant_values is None else {"constant_values": constant_values}
    return prim("pad", tensor(x), pw, mode=mode, **kw)


@_export
def take(x, indices, axis=None):
    return prim("take", tensor(x), tensor(indices), axis=axis)


@_export
def take_along_axis(x, indices, axis=None):
    x, indices = tensor(x), tensor(indices)
    if axis is None:
        return prim("take_along_axis", ravel(x), ravel(indices), 0)
    return prim("take_along_axis", x, indices, axis)


@_export
def get_item(x, key):
    return tensor(x)[key]


@_export
def sort(x, axis=-1):
    return prim("sort", tensor(x), axis=axis)


@_export
def argsort(x, axis=-1):
    return cast(prim("argsort", tensor(x), axis=axis), "int32")


@_export
def diff(a, n=1, axis=-1):
    return prim("diff", tensor(a), n=n, axis=axis)


@_export
def searchsorted(sorted_sequence, values, side="left"):
    return cast(prim("searchsorted", tensor(sorted_sequence), tensor(values), side=side),
                "int32")


@_export
def digitize(x, bins):
    return searchsorted(bins, x, side="right")


@_export
def nonzero(x):
    eager_only("nonzero", x)
    return tuple(np.asarray(v).astype("int32") for v in np.nonzero(np.asarray(x)))


@_export
def isin(x1, x2, assume_unique=False, invert=False):
    r = prim("isin", tensor(x1), tensor(x2))
    return logical_not(r) if invert else r


@_export
def size(x):
    s = shape_of(x)
    if None in s:
        return prim("size", x)
    return math.prod(s)


@_export
def ndim(x):
    return len(shape_of(x))


@_export
def meshgrid(*x, indexing="xy"):
    eager_only("meshgrid", *x)
    return [np.asarray(v) for v in np.meshgrid(*[tensor(v) for v in x], indexing=indexing)]


# ------------------------------------------------------------ creation
def _float_or(dtype, default=FLOATX):
    return default if dtype is None else dtype


def _shape(shape):
    return [shape] if isinstance(shape, int) else list(shape)


@_export
def zeros(shape, dtype=None):
    return prim("zeros", _shape(shape), dtype=_float_or(dtype))


@_export
def ones(shape, dtype=None):
    return prim("ones", _shape(shape), dtype=_float_or(dtype))


@_export
def empty(shape, dtype=None):
    return zeros(shape, dtype)


@_export
def full(shape, fill_value, dtype=None):
    return prim("full", _shape(shape), fill_value, dtype=_float_or(dtype))


def _like(name, value):
    def op(x, dtype=None):
        x = tensor(x)
        return prim(name, x, dtype=dtype or dtype_of(x)) if value is None else \
            prim("full_like", x, value, dtype=dtype or dtype_of(x))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = _doc(name, "a tensor of x's shape (and dtype, unless given).")
    return op


zeros_like = _export(_like("zeros_like", None))
ones_like = _export(_like("ones_like", None))
empty_like = _export(_like("zeros_like", None))
empty_like.__name__ = "empty_like"
__all__[-1] = "empty_like"


@_export
def full_like(x, fill_value, dtype=None):
    x = tensor(x)
    return prim("full_like", x, fill_value, dtype=dtype or dtype_of(x))


@_export
def arange(start, stop=None, step=None, dtype=None):
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    if dtype is None:
        dtype = "int32" if builtins.all(isinstance(v, (int, np.integer))
                                        for v in (start, stop, step)) else FLOATX
    return prim("arange", start, stop, step, dtype=dtype)


@_export
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    eager_only("linspace", start, stop)
    r = np.linspace(np.asarray(start), np.asarray(stop), num=num, endpoint=endpoint,
                    retstep=retstep, dtype=None, axis=axis)
    if retstep:
        return r[0].astype(dtype or FLOATX), r[1]
    return r.astype(dtype or FLOATX)


@_export
def logspace(start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
    eager_only("logspace", start, stop)
    return np.logspace(start, stop, num, endpoint, base, axis=axis).astype(dtype or FLOATX)


@_export
def eye(N, M=None, k=0, dtype=None):  # noqa: N803 - Keras's names
    return prim("eye", N, M, k=k, dtype=_float_or(dtype))


@_export
def identity(n, dtype=None):
    return eye(n, dtype=dtype)


@_export
def tri(N, M=None, k=0, dtype=None):  # noqa: N803
    return prim("tri", N, M, k=k, dtype=_float_or(dtype))


@_export
def tril(x, k=0):
    return prim("tril", tensor(x), k=k)


@_export
def triu(x, k=0):
    return prim("triu", tensor(x), k=k)


@_export
def array(x, dtype=None):
    return tensor(x, dtype)
