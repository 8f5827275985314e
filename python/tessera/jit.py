"""``@tessera.jit``: run a NumPy-style Python function on tessera's execution tree.

The decorated function's source is translated into the expression language
(see ``_translate.py`` and docs/python.md), compiled by the C++ core once per
argument signature (dtype and rank of each array, type of each scalar), and
evaluated with the GIL released.  Errors point at the user's Python lines.

    import numpy as np
    import tessera

    @tessera.jit
    def predict(x, w):
        return 1.0 / (1.0 + np.exp(-(x @ w)))

    predict(x, w)          # runs on the C++ runtime
    print(predict.code)    # the generated program
"""

from __future__ import annotations

import builtins
import functools
import inspect
import os
import re
import sys
import threading

import numpy as np

from ._list_args import CONTAINERS, shared_container, write_back, written_params
from ._translate import (ERROR_TAG, RAISABLE, ProgramBuilder, Translation, UnsupportedError,
                         convert_result, parse_function)
from ._calls import helper_list_changes  # noqa: I001 - after _translate, which imports it

__all__ = ["jit", "set_eager", "is_eager", "UnsupportedError", "JitFunction"]

_eager = os.environ.get("TESSERA_EAGER", "") not in ("", "0")

try:
    from ._core import JitEntry as _JitEntry
    from ._core import _set_jit_eager
except ImportError:  # translation only, without the extension

    class _JitEntry:
        """What tessera._core.JitEntry does, without its fast path."""

        _last = None

        def __call__(self, *args, **kwargs):
            return self._call(args, kwargs)

        def _set_fast(self, key, program, constants, threads):
            pass

        def _clear_fast(self):
            pass

    def _set_jit_eager(enabled):
        pass


def set_eager(enabled: bool = True) -> None:
    """Module-level switch: when on, every jit function runs as the plain
    Python/NumPy function it decorates (for debugging and comparison).  The
    environment variable ``TESSERA_EAGER=1`` turns it on at import."""
    global _eager
    _eager = bool(enabled)
    _set_jit_eager(_eager)


def is_eager() -> bool:
    """Whether the module-level eager switch is on."""
    return _eager


# The files of jit functions by the name their positions use (the base
# name), so that a trace can show their lines.
_source_files: dict = {}


def source_files() -> dict:
    """The source files of the jit functions made so far: ``{base name: path}``."""
    return dict(_source_files)


_core_module = None


def _core():
    global _core_module  # noqa: PLW0603 - imported once, on first use
    if _core_module is None:
        from . import _core as core  # noqa: PLC0415 - the extension is optional for translation

        _core_module = core
    return _core_module


_ndarray = np.ndarray

# Argument types that are never functions: their key is the type, without
# the look-ups of _is_function_arg (a hot call's fixed cost).
_PLAIN_TYPES = frozenset({int, float, bool, complex, str, type(None), tuple, list, dict})


def _arg_key(a):
    """The part of the cache key one argument contributes: dtype and rank for
    arrays, the type for anything else."""
    t = type(a)
    if t is np.ndarray:
        return (a.dtype.char, a.ndim)
    if t in _PLAIN_TYPES:
        return t
    if _is_function_arg(a):
        return _FunctionKey(("function", id(getattr(a, "__wrapped__", a))))
    return t


class _FunctionKey(tuple):
    """The cache-key entry of a function argument: ("function", id)."""


def _is_function_arg(a) -> bool:
    """A jit function or a plain Python function passed as an argument: the
    program is specialized on it (it is translated in), as Numba does."""
    return (
        getattr(a, "_tessera_jit", False) is True
        or inspect.isfunction(a)
        or isinstance(a, np.ufunc)
    )


# Settings of a JitFunction that the C entry's fast path does not look at:
# changing one forgets its registered programs.
_FAST_SETTINGS = frozenset({"eager", "threads", "performance", "trace"})


def _fast_key(key) -> bool:
    """Whether a cache key can be matched by the C entry (JitEntry): arrays and
    types that are never functions, so an argument's type is its key."""
    return all(type(k) is tuple or k in _PLAIN_TYPES
               or (isinstance(k, type) and issubclass(k, np.generic)) for k in key)


class JitFunction(_JitEntry):
    """A Python function compiled through tessera.  Call it like the original.

    Attributes: ``code`` (the generated program text), ``tree()`` (Graphviz
    DOT of the last compiled execution tree), ``counters()`` (per-node
    counters of the last run, with ``performance=True``), ``last_trace`` (the
    trace of the last call, with ``trace=True`` or a directory)."""

    _tessera_jit = True

    def __init__(self, func, *, debug=False, performance=False, threads=None, eager=False,
                 trace=False):
        if not inspect.isfunction(func):
            raise UnsupportedError(
                f"tessera.jit needs a Python function, got {type(func).__name__}"
            )
        functools.update_wrapper(self, func)
        self.debug = debug
        self.performance = performance
        self.threads = threads
        self.eager = eager
        self.trace = trace
        self.last_trace = None
        _source_files[os.path.basename(func.__code__.co_filename)] = func.__code__.co_filename
        self._signature = inspect.signature(func)
        self._n_params = len(self._signature.parameters)
        # A call with this many positional arguments needs no binding; with *args,
        # every call is bound (its extra arguments become a tuple).
        self._plain_arity = self._n_params
        if any(p.kind is p.VAR_POSITIONAL for p in self._signature.parameters.values()):
            self._plain_arity = -1
        self._lock = threading.Lock()
        self._translation: Translation | None = None
        self._specialized: dict = {}  # (function arguments, writeback) -> Translation
        self._written: tuple | None = None  # parameters changed in place (_list_args.py)
        self._programs: dict = {}
        self._fast_keys: set = set()  # keys registered with the C entry
        self._last = None

    def __reduce_ex__(self, protocol):
        # copy.copy as before JitEntry: the attributes shared, the C entry's
        # registrations not (the copy registers its own).
        return (_JitEntry.__new__, (type(self),), dict(self.__dict__, _fast_keys=set()))

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in _FAST_SETTINGS and "_fast_keys" in self.__dict__:
            self._clear_fast()
            self._fast_keys.clear()

    # ------------------------------------------------------------------ translation

    def _translate(self) -> Translation:
        if self._translation is None:
            with self._lock:
                if self._translation is None:
                    self._translation = ProgramBuilder().build(self)
        return self._translation

    @property
    def code(self) -> str:
        """The expression-language program this function is translated into."""
        return self._translate().text

    def _writeback_for(self, args) -> tuple:
        """The positions of the arguments the function changes in place that
        are lists, tuples or dicts (values in the program): the caller gets
        their final values back."""
        if self._written is None:
            self._written = written_params(parse_function(self.__wrapped__)[0],
                                           helper_list_changes(self.__wrapped__))
        return tuple(i for i in self._written if isinstance(args[i], CONTAINERS))

    def _translate_for(self, args, writeback=()) -> Translation:
        """The translation for a call: the plain one, or one specialized on the
        functions passed as arguments and on the arguments given back."""
        fns = {i: a for i, a in enumerate(args) if _is_function_arg(a)}
        if not fns and not writeback:
            return self._translate()
        key = (tuple((i, id(f)) for i, f in fns.items()), writeback)
        tr = self._specialized.get(key)
        if tr is None:
            with self._lock:
                tr = self._specialized.get(key)
                if tr is None:
                    tr = ProgramBuilder().build(self, fn_args=fns, writeback=writeback)
                    # Keeps the functions alive, so their ids stay theirs.
                    tr.functions = list(fns.values())
                    self._specialized[key] = tr
        return tr

    def _program(self, key, args):
        """(program, translation, specialized) for a cache key; specialized
        when function arguments were translated in (they are passed as None)."""
        entry = self._programs.get(key)
        if entry is not None:
            return entry
        core = _core()
        # A trace shows the translation (Python to the execution tree) as an
        # event: part of a first call's cost, beside the native compiles.
        t0 = core._trace_now() if core._trace_active() else None
        entry = self._build_program(key, args)
        if t0 is not None:
            code = getattr(self.__wrapped__, "__code__", None)
            where = f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})" if code else ""
            core._trace_translation(f"{self.__qualname__}{where}", t0, core._trace_now())
        return entry

    def _build_program(self, key, args):
        specialized = any(type(k) is _FunctionKey for k in key)
        writeback = self._writeback_for(args)
        tr = self._translate_for(args, writeback) if specialized or writeback else \
            self._translate()
        with self._lock:
            entry = self._programs.get(key)
            if entry is None:
                if self.debug:
                    print(
                        f"tessera.jit: {self.__qualname__} for {key}:\n{tr.text}", file=sys.stderr
                    )
                prog = _core().Program(tr.text, f"<jit {self.__name__}>")
                entry = (prog, tr, specialized)
                self._programs[key] = entry
        return entry

    # ------------------------------------------------------------------ calling

    # __call__ is JitEntry's (C): a call of argument types registered with
    # _set_fast runs there; every other call comes here.
    def _call(self, args, kwargs):
        if kwargs is None:
            kwargs = {}
        if self.eager or _eager:
            return self.__wrapped__(*args, **kwargs)
        plain = not kwargs and len(args) == self._plain_arity
        if not plain:
            try:
                bound = self._signature.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{self.__name__}(): {e}") from None
            bound.apply_defaults()
            args = tuple(bound.arguments[p] for p in self._signature.parameters)
        # The key of the common call (arrays and plain values) inline: what
        # _arg_key gives for those; on a miss (function arguments, whose key
        # is not their type, or a new signature) the key is computed in full.
        key = tuple([(a.dtype.char, a.ndim) if type(a) is _ndarray else type(a) for a in args])
        entry = self._programs.get(key)
        if entry is None:
            key = tuple(map(_arg_key, args))
            entry = self._programs.get(key)
            if entry is None:
                entry = self._program(key, args)
        prog, tr, specialized = entry
        self._last = prog
        if plain and key not in self._fast_keys:
            self._register_fast(key, entry)
        if tr.writeback:
            shared = shared_container(args, list(self._signature.parameters))
            if shared is not None:
                raise UnsupportedError(
                    f"{self.__name__}(): {shared} are the same list or dict, and the function "
                    f"changes its arguments in place: in Python a change through one shows "
                    f"through the other, which tessera.jit (whose lists and dicts are values "
                    f"inside the function) cannot give; pass separate objects (xs.copy(), "
                    f"[row.copy() for row in t]) or only one of them")
        if specialized:
            run_args = [None if _is_function_arg(a) else a for a in args]
        else:
            run_args = list(args)
        if tr.constants:
            run_args.extend(tr.constants)
        if self.threads is not None:
            core = _core_module or _core()
            if core.num_threads() != self.threads:
                core.set_num_threads(self.threads)
        if self.performance:
            prog.reset_counters()
        recording = self._start_trace() if self.trace else None
        try:
            result = prog.run(run_args)
        except RuntimeError as e:
            if str(e).startswith("[assert]"):
                raise _assertion_error(str(e)) from None
            raise
        finally:
            if recording is not None:
                recording.stop()
                self.last_trace = recording
        if tr.writeback:
            for i, final in zip(tr.writeback, result[1:]):
                write_back(args[i], final)
            result = result[0]
        if tr.result_spec is not None:
            return convert_result(result, tr.result_spec)
        return result

    def _register_fast(self, key, entry):
        """Lets the C entry run calls of this key itself when nothing of this
        method is needed for them (see tessera/python/jit_entry.cpp)."""
        prog, tr, specialized = entry
        threads = self.threads
        if threads is None:
            threads = 0
        elif type(threads) is not int or threads < 1:
            return  # set_num_threads's error, from the Python dispatch
        if (specialized or tr.writeback or tr.result_spec is not None
                or self.performance or self.trace or self.eager or _eager
                or not _fast_key(key)):
            return
        with self._lock:
            if key not in self._fast_keys:
                self._fast_keys.add(key)
                self._set_fast(key, prog, tuple(tr.constants), threads)

    def _start_trace(self):
        """With ``trace``, a recording of this call (none inside another recording)."""
        if not self.trace or _core()._trace_active():
            return None
        from .trace import Trace  # noqa: PLC0415

        if self.trace is True:
            # One directory per function, rewritten by each call.
            if self._trace_dir is None:
                import tempfile  # noqa: PLC0415

                self._trace_dir = tempfile.mkdtemp(prefix=f"tessera-trace-{self.__name__}-")
            directory = self._trace_dir
        else:
            directory = os.fspath(self.trace)
        return Trace(directory).start()

    _trace_dir = None

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        raise UnsupportedError(
            f"tessera.jit on the method '{self.__qualname__}' (classes are not supported)"
        )

    # ------------------------------------------------------------------ introspection

    def _last_program(self):
        if self._last is None:
            raise RuntimeError(f"{self.__name__} has not been run yet")
        return self._last

    def tree(self) -> str:
        """The execution tree of the last compiled program as Graphviz DOT."""
        return self._last_program().tree_dot()

    def counters(self, parsed: bool = False):
        """Per-node counters of the last run as CSV text (name, position,
        evaluations, total_ns, mean_ns, execution), or as a list of dicts with
        ``parsed=True``.  Meaningful after a run with ``performance=True``."""
        text = self._last_program().counters_csv()
        if not parsed:
            return text
        import csv  # noqa: PLC0415
        import io  # noqa: PLC0415

        rows = list(csv.DictReader(io.StringIO(text)))
        for r in rows:
            for k in ("evaluations", "total_ns", "mean_ns"):
                r[k] = int(r[k])
        return rows

    def __repr__(self):
        return f"<tessera.jit {self.__qualname__}>"


def prange(*args):
    """``range(*args)``; in a ``@tessera.jit`` function, ``for i in prange(...)``
    is a parallel loop (as Numba's ``prange``).

    Its turns must be independent: each may read anything the loop does not
    write, write array elements no other turn touches, and update scalar
    reductions (``s += e``, ``s -= e``, ``s *= e``, ``s |= e``, ``s &= e``,
    ``s ^= e``, ``s = min(s, e)``, ``s = max(s, e)``). Two turns writing the
    same element is a race, the user's to avoid. The turns run in chunks on
    the runtime's workers, each reduction's partials combined in chunk order
    (chunks fixed by the number of turns: the same bits at any thread count).
    A loop that cannot run so (see ``TESSERA_NATIVE=debug``) runs as range.
    Outside jit it is ``range``. See docs/runtime.md, "Parallel loops".
    """
    return range(*args)


def jit(func=None, *, debug=False, performance=False, threads=None, eager=False, trace=False):
    """Compile a NumPy-style Python function to run on tessera.

    Use as ``@tessera.jit`` or ``@tessera.jit(debug=True, performance=True,
    threads=N)``; ``tessera.jit(f, eager=True)`` returns a wrapper that runs
    ``f`` as plain Python.  ``debug`` prints the generated program on first
    compile (to stderr); ``performance`` resets the per-node counters before
    each run so ``f.counters()`` describes the last call; ``threads`` sets the
    runtime's thread count before each call; ``trace`` (True, or a directory)
    records each call, whose :class:`tessera.trace.Trace` is ``f.last_trace``
    (shown as the report in Jupyter).  Unsupported Python raises
    :class:`UnsupportedError` (at the first call or on ``f.code``)."""
    options = dict(debug=debug, performance=performance, threads=threads, eager=eager,
                   trace=trace)
    if func is None:
        return lambda f: JitFunction(f, **options)
    if isinstance(func, JitFunction):
        func = func.__wrapped__
    return JitFunction(func, **options)


# A failed assert(false, ERROR_TAG + "KIND] message") of the translator's own
# expansions (np.diagonal of a 1-d array, random.choice of an empty list) is
# the Python exception KIND that NumPy or Python raises there.
_EXPANSION_ERROR = re.compile(
    r"\[assert\] assertion failed: " + re.escape(ERROR_TAG) + r"(\w+)\] (.*)", re.S)
_EXPANSION_KINDS = {"UnsupportedError": UnsupportedError,
                    **{name: getattr(builtins, name) for name in RAISABLE}}


def _assertion_error(msg: str) -> Exception:
    m = _EXPANSION_ERROR.match(msg)
    if m and m.group(1) in _EXPANSION_KINDS:
        return _EXPANSION_KINDS[m.group(1)](m.group(2))
    return AssertionError(msg)


try:
    from ._core import _set_jit_assertion_error
except ImportError:
    pass
else:
    _set_jit_assertion_error(_assertion_error)
    _set_jit_eager(_eager)
