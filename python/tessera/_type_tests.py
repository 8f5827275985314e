"""``isinstance``, ``hasattr`` and ``callable`` inside @tessera.jit.

A value in the core has a kind (the ``type`` primitive: ``nil``, ``bool``,
``int``, ``float``, ``string``, ``list``, ``tuple``, ``dict``, ``function``,
``slice``, or ``"<dtype> array"``). Each kind stands for one Python type: a
0-d array for a NumPy scalar (``x[0]``, ``x.sum()``: ``np.float64``, which is
a ``float``; ``np.int64``, which is not an ``int``), an array of one or more
dimensions for ``np.ndarray``. A test is answered at translation by asking
Python the same question of one representative object of each kind, and the
program checks only which kind the value has, so the answers are Python's
and NumPy's own (``isinstance(True, int)``, ``isinstance(np.float64(1), float)``,
``hasattr(x, "shape")`` for NumPy scalars too). A 0-d ndarray is taken as a
NumPy scalar (docs/python.md, "Differences from Python").
"""

from __future__ import annotations

import numpy as np

# The kinds that are not arrays, each with a representative Python value.
_SCALAR_KINDS = {
    "nil": None,
    "bool": True,
    "int": 1,
    "float": 1.0,
    "string": "s",
    "list": [1],
    "tuple": (1,),
    "dict": {1: 1},
    "function": (lambda: 0),
    "slice": slice(0, 1),
}

# The dtypes an array may have (bfloat16, which NumPy has not, answers as float32).
_ARRAY_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64", "complex64", "complex128")


def _representatives():
    """(kind, 0-d representative or None, n-d representative or None) for every kind."""
    out = [(k, v, None) for k, v in _SCALAR_KINDS.items()]
    for dt in _ARRAY_DTYPES:
        out.append((f"{dt} array", np.dtype(dt).type(0), np.zeros(2, dt)))
    out.append(("bfloat16 array", np.float32(0), np.zeros(2, np.float32)))
    return out


_REPS = _representatives()


def kind_test(value: str, predicate, tmp) -> str:
    """The program text testing ``predicate`` (a Python function of one
    object) of the value ``value`` (text), by its kind; ``tmp()`` gives a
    fresh temporary name. A predicate that holds for every kind or none is
    the constant ``true`` / ``false`` (``value`` is still evaluated, once)."""
    plain, zero_d, n_d = [], [], []
    total = 0
    for kind, rep0, repn in _REPS:
        if repn is None:
            total += 1
            if predicate(rep0):
                plain.append(kind)
        else:
            total += 2
            if predicate(rep0):
                zero_d.append(kind)
            if predicate(repn):
                n_d.append(kind)
    held = len(plain) + len(zero_d) + len(n_d)
    if held in (0, total):
        return f"block({value}, {'true' if held else 'false'})"
    x, t = tmp("x"), tmp("t")

    def among(kinds):
        if len(kinds) == 1:
            return f"{t} == \"{kinds[0]}\""
        return f"contains(list({', '.join(chr(34) + k + chr(34) for k in kinds)}), {t})"

    terms = []
    if plain:
        terms.append(among(plain))
    both = [k for k in zero_d if k in n_d]
    if both:
        terms.append(among(both))
    only0 = [k for k in zero_d if k not in n_d]
    if only0:
        terms.append(f"({among(only0)} && ndim({x}) == 0)")
    only_n = [k for k in n_d if k not in zero_d]
    if only_n:
        terms.append(f"({among(only_n)} && ndim({x}) > 0)")
    return f"block(define({x}, {value}), define({t}, type({x})), {' || '.join(terms)})"


def isinstance_predicate(classinfo):
    """Python's isinstance against ``classinfo`` (a class, a union or a tuple
    of them), or None when ``classinfo`` is not one."""
    try:
        isinstance(0, classinfo)
    except TypeError:
        return None
    return lambda rep: isinstance(rep, classinfo)


def hasattr_predicate(name: str):
    return lambda rep: hasattr(rep, name)


def callable_predicate(rep) -> bool:
    return callable(rep)
