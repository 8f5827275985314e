"""Large NumPy constants of a model's programs, bound once (issue 30).

A layer's call (or keras.ops code in a custom layer, loss or metric) may use
a NumPy array: a positional-encoding table, a mask, a DFT matrix. Written
into the program's text as a nested list, a 2048x1025 table made the text
megabytes long, took seconds to compile and was rebuilt from the list on
every run. Instead, an array of more than INLINE_LIMIT elements is written
as a name (`__nnk<N>`), its values copied once (read-only, dtype kept) when
the code is written; `compile_program` compiles the text so that those
names are extra arguments of the program, which the returned
`BoundProgram` passes on each run (NumPy arrays are handed over without a
copy), as the jit passes its constants and the model its weights.

The copies wait in a table until a program takes them; a program holds its
own, so the table only refers weakly to them afterwards.
"""

from __future__ import annotations

import contextvars
import itertools
import re
import weakref

import numpy as np

from .. import _core

__all__ = ["INLINE_LIMIT", "bindable", "constant_name", "compile_program", "BoundProgram"]

# Arrays with at most this many elements stay literals in the program's text.
INLINE_LIMIT = 64

_PREFIX = "__nnk"
_NAME = re.compile(_PREFIX + r"\d+")
_count = itertools.count()
_pending: dict = {}  # name -> copy, written but not yet in a program
_bound = weakref.WeakValueDictionary()  # name -> copy, held by programs
_name_of: dict = {}  # id(user's array) -> name, while that array lives


def _forget(key, name):
    if _name_of.get(key) == name:
        del _name_of[key]


def bindable(value) -> bool:
    """True for a NumPy array bound as a program constant rather than written
    as a literal: more than INLINE_LIMIT numbers or booleans."""
    return isinstance(value, np.ndarray) and value.size > INLINE_LIMIT and \
        value.dtype.kind in "biufc"


def constant_name(value: np.ndarray) -> str:
    """The program name of a NumPy array (more than INLINE_LIMIT elements):
    the same name for the same array while it lives, holds the same values
    and a program or the table still holds its copy; the copy is made on
    first use, so later writes to the user's array do not change a model
    already written (as with a literal), and a model written after them
    takes the new values."""
    key = id(value)
    name = _name_of.get(key)
    if name is not None:
        held = _pending.get(name)
        if held is None:
            held = _bound.get(name)
        # the same values: the same constant; an array written into since, a new one
        if held is not None and held.shape == value.shape and np.array_equal(held, value,
                                                                              equal_nan=True):
            # Held strongly again until a program takes it: the programs holding
            # it now may be dropped before the text being written is compiled.
            _pending.setdefault(name, held)
            return name
    name = f"{_PREFIX}{next(_count)}"
    copy = np.array(value, dtype=value.dtype.newbyteorder("="), copy=True, order="C")
    copy.flags.writeable = False
    _pending[name] = copy
    try:
        weakref.finalize(value, _forget, key, name)
        _name_of[key] = name
    except TypeError:  # (an object without weak references: no sharing)
        pass
    return name


def _constant(name: str):
    value = _pending.pop(name, None)
    if value is not None:
        _bound[name] = value
        return value
    value = _bound.get(name)
    if value is None:
        raise RuntimeError(f"[nn] the program constant {name} is no longer held: its program "
                           "text was written but compiled after every program using it was "
                           "dropped")
    return value


def _entry_params(text: str, entry: str):
    """The parameters of `define(entry, a, b, ..., block(...))`, or None."""
    head = re.search(r"(?:^|\n)define\(" + re.escape(entry) + r", ((?:[A-Za-z_]\w*, )*)block\(",
                     text)
    if head is None:
        return None
    return [p.strip() for p in head.group(1).split(",") if p.strip()]


def _bound_text(text: str, names: list):
    """The text taking the constants as extra arguments, or None when its form
    is neither `define(entry, params..., block(...))` ending with the line
    `entry` nor one `lambda(params..., body)`.
    The constants are top-level variables read from argv past the entry's
    own arguments; the program's value takes them all and calls the entry."""
    stripped = text.rstrip()
    lam = re.fullmatch(r"lambda\(((?:[A-Za-z_]\w*, )+)(.*)\)", stripped, re.DOTALL)
    if lam is not None:
        # a program that is one lambda (an eager loss or metric): its last
        # argument is the body (an expression has no top-level comma)
        params = lam.group(1).rstrip(", ")
        stripped = f"define(__nnentry, {params}, block({lam.group(2)}))\n__nnentry"
        text = stripped + "\n"
    last = re.search(r"(?:^|\n)([A-Za-z_]\w*)\Z", stripped)
    if last is None:
        return None
    entry = last.group(1)
    params = _entry_params(text, entry)
    if params is None:
        return None
    n = len(params)
    heads = "".join(f"define({c}, getitem(argv, {n + i}))\n" for i, c in enumerate(names))
    ps = [f"__nnp{i}" for i in range(n)]
    hs = [f"__nnh{i}" for i in range(len(names))]
    call = f"{entry}({', '.join(ps)})"
    return heads + stripped[:last.start()] + f"\nlambda({', '.join(ps + hs + [call])})\n"


def _literal_text(text: str, names: list, values: list) -> str:
    """The text with each constant defined as a literal at its top (the slow
    form, for texts whose entry is not a named function)."""
    heads = []
    for c, v in zip(names, values):
        heads.append(f"define({c}, array({_nested(v)}, dtype=\"{v.dtype}\"))\n")
    return "".join(heads) + text


def _nested(v: np.ndarray) -> str:
    if v.ndim == 0:
        return _scalar(v.item())
    return "[" + ", ".join(_nested(u) for u in v) + "]"


def _scalar(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    f = float(x)
    if f != f:
        return "nan"
    if f in (float("inf"), float("-inf")):
        return "inf" if f > 0 else "-inf"
    return repr(f)


class BoundProgram:
    """A compiled program with the constants it was written with: run(args)
    runs it on args followed by the constants. The rest of the interface is
    _core.Program's."""

    def __init__(self, program, constants: list, text: str):
        self._program = program
        self.constants = constants
        self.text = text

    def run(self, args=None, consume: bool = False):
        if consume and isinstance(args, list):
            # handed over as the caller's list (emptied by the run), so that
            # the arrays nothing else holds are freed at their last use
            args.extend(self.constants)
            return self._program.run(args, consume=True)
        return self._program.run(list(args or []) + self.constants, consume=consume)

    def __getattr__(self, name):
        return getattr(self._program, name)

    def __repr__(self):
        return f"<tessera.Program with {len(self.constants)} bound constants>"


# {(text, file): its program} while set: run_eagerly (model/eager.py) traces a step again
# on every batch, almost always into the same text, compiled once (a constant's name
# stands for one content, so the same text is the same program)
PROGRAM_CACHE: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_program_cache",
                                                               default=None)


def compile_program(text: str, file: str):
    """`_core.Program(text, file)`, with the large constants the text names
    bound (a BoundProgram) when it names any."""
    cache = PROGRAM_CACHE.get()
    if cache is None:
        return _compile(text, file)
    prog = cache.get((text, file))
    if prog is None:
        if len(cache) >= 16:  # (a step whose code changes from batch to batch)
            cache.clear()
        prog = cache[(text, file)] = _compile(text, file)
    return prog


def _compile(text: str, file: str):
    names = list(dict.fromkeys(_NAME.findall(text)))
    if not names:
        return _core.Program(text, file)
    values = [_constant(c) for c in names]
    bound = _bound_text(text, names)
    if bound is None:
        return _core.Program(_literal_text(text, names, values), file)
    return BoundProgram(_core.Program(bound, file), values, bound)
