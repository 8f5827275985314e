"""Python ``ast`` -> tessera expression-language text.

The translator reads a function's source, walks its syntax tree and writes an
equivalent program in the expression language (docs/language.md), with a
``#line N "file.py"`` directive wherever the Python line changes, so that every
error the core reports names the user's file and line.

One ``ProgramBuilder`` makes one program: the entry function, every
``@tessera.jit`` function it calls (transitively, once each), the small helper
functions some constructs need, and the module-level arrays the code reads
(passed as hidden extra arguments, never printed into the text).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import os
import random
import re
import textwrap
from dataclasses import dataclass, field

import numpy as np

from . import _numpy_map as M
from ._assignments import AssignmentsMixin
from ._calls import CallsMixin
from ._expressions import ExpressionsMixin
from ._generators import eager_generators, first_yield_line
from ._loops import LoopsMixin
from ._list_args import (_result_spec, _returns_spec,
                         convert_result, element_check, element_names)
from ._sets import rewrite_sets
from ._statements import StatementsMixin
from ._aliases import Analysis, alias_analysis
from ._templates import ERROR_TAG, HELPER_DEPS, HELPERS, INLINE, RAISABLE  # noqa: F401


class UnsupportedError(NotImplementedError):
    """Python that ``tessera.jit`` cannot translate (a class, ``try``, a call of
    an arbitrary Python object, ...).  The message names the construct and the
    ``file.py:line`` where it appears.  A subclass of NotImplementedError."""


# --------------------------------------------------------------------------- names

_primitive_cache: frozenset | None = None


def primitive_names() -> frozenset:
    """The names of the core's primitives (from ``_core`` when it is built)."""
    global _primitive_cache
    if _primitive_cache is None:
        try:
            from . import _core  # noqa: PLC0415

            _primitive_cache = frozenset(p[0] for p in _core.primitives())
        except ImportError:
            _primitive_cache = M.STATIC_PRIMITIVES
    return _primitive_cache


# How deep an expression may nest: the core's limit (tessera/lang/parser.hpp,
# kMaxExpressionDepth), checked here too so the translator never recurses
# past it. It counts nesting only: a chain of operators of one precedence
# (``a + b - c + ...``, ``x * y / z ...``) is written flat and is one level,
# however long (see _chain_spine); ``and``/``or`` and comparison chains are
# flat in Python's tree already.
MAX_EXPRESSION_DEPTH = 256


def _too_deep(levels: str, where: str) -> Exception:
    from . import _core  # noqa: PLC0415

    return _core.CompileError(
        f"[jit] expression nested {levels} levels deep: the limit is {MAX_EXPRESSION_DEPTH} "
        f"(split it into steps with variables) (at {where})"
    )


def _beyond_python(name: str, where: str) -> Exception:
    """The error for a function whose source Python's own parser cannot read
    back (``ast.parse`` raising RecursionError or MemoryError)."""
    from . import _core  # noqa: PLC0415

    return _core.CompileError(
        f"[jit] Python's parser cannot read the source of '{name}' back: an expression in it is "
        f"nested or chained too deeply for CPython (RecursionError in ast.parse); split it into "
        f"steps with variables (at {where})"
    )


# The operators written as a flat chain, by precedence level (the core's
# parser folds a chain left to right, as Python does). ``**`` nests (it is
# right-associative); ``//``, ``&``, ``|``, ... become calls, which nest.
_CHAIN_LEVEL = {
    ast.Add: 1,
    ast.Sub: 1,
    ast.Mult: 2,
    ast.Div: 2,
    ast.Mod: 2,
    ast.MatMult: 2,
}


def _chain_spine(node):
    """``node`` (a BinOp of a chain operator) as its chain: the first operand
    and the (op, right operand) pairs in order, walked without recursion
    (``a + b + c`` is BinOp(BinOp(a, +, b), +, c): its left operands nest as
    deep as the chain is long)."""
    level = _CHAIN_LEVEL[type(node.op)]
    steps = []
    while isinstance(node, ast.BinOp) and _CHAIN_LEVEL.get(type(node.op)) == level:
        steps.append((node.op, node.right))
        node = node.left
    steps.reverse()
    return node, steps


def _continues_chain(parent, child) -> bool:
    """True when ``child`` is the left operand of ``parent`` in one chain (it
    adds no level of nesting)."""
    return (
        isinstance(parent, ast.BinOp)
        and isinstance(child, ast.BinOp)
        and child is parent.left
        and type(parent.op) in _CHAIN_LEVEL
        and _CHAIN_LEVEL.get(type(child.op)) == _CHAIN_LEVEL[type(parent.op)]
    )


def _check_depth(root, fname: str) -> None:
    """Raises CompileError at the first expression of ``root`` nested deeper than
    MAX_EXPRESSION_DEPTH (walked with a stack: the translator's passes recurse)."""
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.expr):
            depth += 1
            if depth > MAX_EXPRESSION_DEPTH:
                raise _too_deep(f"more than {MAX_EXPRESSION_DEPTH}", f"{fname}:{node.lineno}")
        for c in ast.iter_child_nodes(node):
            stack.append((c, depth - 1 if _continues_chain(node, c) else depth))


def _unparsed(node) -> str:
    """``ast.unparse(node)``, or a description when the expression is too long
    a chain for it (it recurses once per operand)."""
    try:
        return ast.unparse(node)
    except RecursionError:
        return f"the expression of line {node.lineno} ({type(node).__name__})"


def _is_reserved(name: str) -> bool:
    return name in M.LANGUAGE_WORDS or name in primitive_names() or name.startswith("__")


def mangle(name: str) -> str:
    """The name a Python variable gets in the generated text: its own name
    unless that is a primitive, a word of the language, or starts with ``__``
    (the prefix of generated names)."""
    return "py_" + name if _is_reserved(name) else name


# --------------------------------------------------------------------------- literals


def int_literal(v: int) -> str:
    if v < -(2**63) or v >= 2**63:
        raise OverflowError(f"integer {v} does not fit in int64")
    if v == -(2**63):
        return "(-9223372036854775807 - 1)"
    return str(v) if v >= 0 else f"({v})"


def float_literal(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "(-inf)"
    text = repr(float(v))
    return text if v >= 0 else f"({text})"


def string_literal(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"')
    out = out.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r").replace("\0", "\\0")
    return '"' + out + '"'


def dtype_name_of(obj) -> str | None:
    """The dtype name of a Python/NumPy dtype-like object, or None."""
    if obj is bool:
        return "bool"
    if obj is int:
        return "int64"
    if obj is complex:
        return "complex128"
    if obj is float:
        return "float64"
    if isinstance(obj, np.dtype):
        return M.DTYPE_NAMES.get(obj.name, obj.name)
    if isinstance(obj, type) and issubclass(obj, np.generic):
        return M.DTYPE_NAMES.get(np.dtype(obj).name, np.dtype(obj).name)
    return None


# --------------------------------------------------------------------------- program


@dataclass
class Translation:
    """The result of translating an entry function."""

    text: str  # the program
    n_params: int  # parameters of the entry function
    constants: list = field(default_factory=list)  # hidden arrays, appended to the arguments
    # How to turn the list results back into tuples: None, or ("tuple" | "list",
    # [spec of each item] or None), the same for every return of the entry.
    result_spec: tuple | None = None
    functions: list = field(default_factory=list)  # function arguments specialized on
    # The parameters given back to the caller (_list_args.py): the program's
    # result is then [result, final value of each].
    writeback: tuple = ()


_MARK = re.compile(r"\x00(\d+):(\d+)\x01")


class ProgramBuilder:
    """Collects the definitions of one program."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.defs: list[str] = []
        self.helpers: list[str] = []
        self.constants: list = []
        self.const_names: dict[int, str] = {}
        self.files: list[str] = []
        self.counter = 0

    def tmp(self, stem: str = "t") -> str:
        self.counter += 1
        return f"__{stem}{self.counter}"

    def file_index(self, name: str) -> int:
        if name not in self.files:
            self.files.append(name)
        return self.files.index(name)

    def helper(self, name: str) -> str:
        for dep in HELPER_DEPS.get(name, ()):
            self.helper(dep)
        if name not in self.helpers:
            self.helpers.append(name)
        return name

    def constant(self, value: np.ndarray) -> str:
        key = id(value)
        if key not in self.const_names:
            self.const_names[key] = f"__c{len(self.constants)}"
            self.constants.append(value)
        return self.const_names[key]

    def include(self, jitfn, writeback: tuple = ()) -> str:
        """The generated name of a @jit function or of a plain Python function
        (a helper it calls), translating it on first use; with ``writeback``, its
        variant giving back the parameters at those positions (_list_args.py's
        list_changed_params: list(result, p, ...))."""
        func = jitfn.__wrapped__ if _is_jit(jitfn) else jitfn
        key = (id(func), writeback) if writeback else id(func)
        if key in self.names:
            return self.names[key]
        base = mangle(func.__name__ if func.__name__.isidentifier() else "lambda_fn")
        base += "_out" if writeback else ""
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        self.names[key] = name  # before translating: the function may recurse
        translator = FunctionTranslator(self, func)
        if writeback:
            names = translator.param_names(translator.node.args, True)
            translator.writeback = [mangle(names[i]) for i in writeback]
        self.defs.append(translator.translate_toplevel(name))
        return name

    def include_entry(self, func, writeback: tuple) -> str:
        """The generated name of the entry function whose parameters at the
        positions ``writeback`` are given back to the caller (_list_args.py):
        a variant of its own (a call of the function from the program, a
        recursion, is the plain one)."""
        name, n = mangle(f"{func.__name__}_entry"), 1
        while name in self.used:
            n += 1
            name = mangle(f"{func.__name__}_entry_{n}")
        self.used.add(name)
        translator = FunctionTranslator(self, func)
        names = translator.param_names(translator.node.args, True)
        translator.writeback = [mangle(names[i]) for i in writeback]
        self.defs.append(translator.translate_toplevel(name))
        return name

    def include_library(self, func, site: str) -> str:
        """The generated name of a function of tessera's NumPy library
        (_numpy_lib.py) called at `site` (a line mark of the caller's): one copy
        per call site, its statements marked with the site, so that an error
        inside names the user's line as NumPy's own errors do."""
        key = ("library", id(func), site)
        if key in self.names:
            return self.names[key]
        base = mangle(f"np_{func.__name__}")
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        self.names[key] = name
        translator = FunctionTranslator(self, func)
        translator.site = site
        self.defs.append(translator.translate_toplevel(name))
        return name

    def function_value(self, f) -> str:
        """The text of a function passed as an argument: a NumPy function that
        is a primitive by its name, anything else translated in."""
        ns, name = _numpy_function(f)
        if ns is not None:
            if name not in primitive_names():
                raise UnsupportedError(
                    f"the NumPy function {name} passed as an argument is not supported by "
                    "tessera.jit"
                )
            return name
        return self.include(f)

    def build(self, entry_jitfn, fn_args=None, writeback=()) -> Translation:
        """The program of an entry function. ``fn_args`` maps parameter
        positions to the functions (jit or plain) passed there in this call:
        they are translated into the program and passed by name, the caller
        passing None in their place."""
        func = entry_jitfn.__wrapped__
        if inspect.isgeneratorfunction(func):
            # Called from Python it must give a generator object, which a
            # program does not return; called from jitted code it is a list.
            fdef, fname = parse_function(func)
            raise UnsupportedError(
                f"a generator function given to tessera.jit ('{func.__name__}'): Python's "
                f"call gives a generator object, which tessera does not return; jit the "
                f"function that consumes it (list(...), a for loop), which tessera runs "
                f"generators in (at {fname}:{first_yield_line(fdef)})")
        if writeback:
            entry = self.include_entry(func, writeback)
        else:
            entry = self.include(entry_jitfn)
        fn_names = {i: self.function_value(f) for i, f in (fn_args or {}).items()}
        fdef, _ = parse_function(func)
        n_params = len(fdef.args.posonlyargs) + len(fdef.args.args) + len(fdef.args.kwonlyargs)
        reset = "\x000:0\x01"  # top-level text belongs to no Python line
        parts = [reset + HELPERS[h] for h in self.helpers]
        for i, c in enumerate(self.const_names.values()):
            parts.append(f"{reset}define({c}, getitem(argv, {n_params + i}))")
        parts.extend(self.defs)
        parts.append(reset)
        if self.constants or fn_names:
            ps = [f"__a{i}" for i in range(n_params)]
            hs = [f"__h{i}" for i in range(len(self.constants))]
            passed = [fn_names.get(i, p) for i, p in enumerate(ps)]
            call = entry + "(" + ", ".join(passed) + ")"
            parts.append(f"lambda({', '.join(ps + hs + [call])})")
        else:
            parts.append(entry)
        text = self.resolve_markers("\n".join(parts) + "\n")
        if isinstance(fdef, ast.Lambda):
            spec = _result_spec(fdef.body)
        else:
            spec = _returns_spec(fdef)
        return Translation(text, n_params, list(self.constants), spec, writeback=writeback)

    def resolve_markers(self, text: str) -> str:
        """Turns the line markers left by the translator into ``#line``
        directives.  Generated lines that belong to the same Python line are
        joined; before a token whose Python line is not the one the parser
        would count, a directive is inserted."""
        pieces = _MARK.split(text)
        out: list[str] = []  # finished output lines
        buf = ""  # the output line being built
        physical = None  # (file index, line) the parser counts for buf
        logical = None  # (file index, line) the text belongs to
        newline = False  # a newline is pending before the next token
        indent = ""  # the indentation that followed it

        def directive(at):
            name = self.files[at[0]].replace("\\", "\\\\").replace('"', '\\"')
            return f'#line {at[1]} "{name}"\n'

        for i in range(0, len(pieces), 3):
            for part in re.split(r"(\n)", pieces[i]):
                if part == "\n":
                    if logical is None:
                        out.append(buf + "\n")
                        buf = ""
                    else:
                        newline = True
                    continue
                if not part:
                    continue
                m = re.search(r"[^\s),]", part)
                if m is None:  # closing parentheses, commas, spaces
                    if newline:
                        stripped = part.strip()
                        buf += stripped
                        indent = indent + part if not stripped else ""
                    else:
                        buf += part
                    continue
                head, rest = part[: m.start()], part[m.start() :]
                if newline:
                    stripped = head.strip()
                    buf += stripped
                    indent = (indent if not stripped else "") + head[len(head.rstrip(" ")) :]
                else:
                    buf += head
                if newline:
                    if logical == physical:
                        buf += " " + rest
                    else:
                        out.append(buf + "\n")
                        nxt = None if physical is None else (physical[0], physical[1] + 1)
                        if logical != nxt:
                            out.append(directive(logical))
                        buf = indent + rest
                    newline = False
                    indent = ""
                elif logical is not None and logical != physical:
                    if buf.strip():
                        out.append(buf + "\n")
                        buf = " " * (len(buf) - len(buf.lstrip()) + 4)
                    out.append(directive(logical))
                    buf += rest
                else:
                    buf += rest
                physical = logical if logical is not None else physical
            if i + 2 < len(pieces):
                line = int(pieces[i + 1])
                logical = (int(pieces[i + 2]), line) if line else None
                if line == 0:
                    physical = None
                    if newline:
                        out.append(buf + "\n")
                        buf, newline, indent = indent, False, ""
        out.append(buf + ("\n" if newline else ""))
        return "".join(out)


# --------------------------------------------------------------------------- source


def source_file(func) -> str:
    return os.path.basename(func.__code__.co_filename)


_parse_cache: dict = {}


def parse_function(func):
    """The ``ast.FunctionDef`` (or ``ast.Lambda``) of ``func`` with the line
    numbers of its file, and the file's short name."""
    key = func.__code__
    if key in _parse_cache:
        return _parse_cache[key]
    fname = source_file(func)
    where = f"{fname}:{func.__code__.co_firstlineno}"
    try:
        lines, start = inspect.getsourcelines(func)
    except (OSError, TypeError) as e:
        raise UnsupportedError(
            f"the source of '{func.__name__}' is not available ({e}); tessera.jit needs "
            f"functions defined in a file (at {where})"
        ) from None
    src = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(src)
    except (RecursionError, MemoryError):
        # CPython's parser refuses very deep nesting, and chains of a few
        # thousand operators, this way (its limit falls as the stack it is
        # called from grows, so a function Python compiled may still fail here).
        raise _beyond_python(func.__name__, where) from None
    except SyntaxError:
        # A lambda inside a larger expression: parse the line as an expression.
        try:
            tree = ast.parse("(" + src.strip().rstrip(",") + ")")
        except SyntaxError:
            raise UnsupportedError(
                f"cannot parse the source of '{func.__name__}' (at {where})"
            ) from None
    ast.increment_lineno(tree, start - 1)
    eager_generators(tree, fname, UnsupportedError)
    node = None
    if func.__name__ == "<lambda>":
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        if len(lambdas) != 1:
            raise UnsupportedError(
                f"a lambda that does not stand alone on its line (at {where}); use def"
            )
        node = lambdas[0]
    else:
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func.__name__:
                node = n
                break
    if node is None:
        raise UnsupportedError(f"cannot find the definition of '{func.__name__}' (at {where})")
    if isinstance(node, ast.AsyncFunctionDef):
        raise UnsupportedError(f"async function '{func.__name__}' (at {where})")
    _check_depth(node, fname)
    rewrite_sets(node, fname, UnsupportedError,
                 builtin_set="set" not in func.__globals__ or func.__globals__["set"] is set)
    _parse_cache[key] = (node, fname)
    return node, fname


def _bound_names(stmts) -> set:
    """Names a function body binds (its locals), as Python decides them."""
    names: set = set()
    # Walked with a stack (a chain nests as deep as it is long); the order
    # does not matter for a set.
    stack = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            stack.extend(getattr(n, "decorator_list", []))
            if not isinstance(n, ast.ClassDef):
                stack.extend(n.args.defaults + [d for d in n.args.kw_defaults if d])
            continue
        if isinstance(n, ast.Lambda):
            stack.extend(n.args.defaults)
            continue
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            stack.append(n.generators[0].iter)
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                names.add((a.asname or a.name).split(".")[0])
        stack.extend(ast.iter_child_nodes(n))
    return names


def _declared_global(stmts) -> dict:
    """The names a function body declares ``global`` (not in functions nested
    in it), each with the statement declaring it."""
    names: dict = {}
    stack = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Global):
            for name in n.names:
                names.setdefault(name, n)
        stack.extend(ast.iter_child_nodes(n))
    return names


def _global_rebinding(stmts, names):
    """The first node of a body (not of its nested functions) that rebinds one
    of ``names`` (``G = ...``, ``G += ...``, ``for G in ...``, ``del G``), or None."""
    stack = list(stmts)
    found = None
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if n.name in names:
                found = n if found is None or n.lineno < found.lineno else found
            continue
        if isinstance(n, ast.Lambda):
            continue
        if (isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))
                and n.id in names):
            found = n if found is None or n.lineno < found.lineno else found
        stack.extend(ast.iter_child_nodes(n))
    return found


class _Scope:
    def __init__(self, parent, local_names):
        self.parent = parent
        self.locals = set(local_names)
        self.globals: set = set()  # names declared global here: never an enclosing local


_BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
}
_BINOP_PRIMS = {
    ast.FloorDiv: "floor_divide",
    # Bitwise on ints, logical on bools (the two coincide there), as in NumPy.
    ast.BitAnd: "bitwise_and",
    ast.BitOr: "bitwise_or",
    ast.BitXor: "bitwise_xor",
    ast.LShift: "left_shift",
    ast.RShift: "right_shift",
}
# Augmented assignment x OP= y: the in-place primitive (iadd, ...) writes
# into an array x (NumPy's in-place operators) and is x OP y for anything else.
_AUG_PRIMS = {
    ast.Add: "iadd",
    ast.Sub: "isub",
    ast.Mult: "imul",
    ast.Div: "itruediv",
    ast.Mod: "imod",
    ast.Pow: "ipow",
    ast.MatMult: "imatmul",
    ast.FloorDiv: "ifloordiv",
    ast.BitAnd: "iand",
    ast.BitOr: "ior",
    ast.BitXor: "ixor",
    ast.LShift: "ilshift",
    ast.RShift: "irshift",
}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

_UNSUPPORTED_STMTS = {
    ast.ClassDef: "class definition",
    ast.Try: "try statement",
    ast.AsyncWith: "async with statement",
    ast.AsyncFor: "async for statement",
    ast.AsyncFunctionDef: "async function",
    ast.Nonlocal: "nonlocal statement",
    ast.Import: "import statement",
    ast.ImportFrom: "import statement",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STMTS[ast.TryStar] = "try statement"
if hasattr(ast, "Match"):
    _UNSUPPORTED_STMTS[ast.Match] = "match statement"

_UNSUPPORTED_EXPRS = {
    ast.Yield: "generator (yield)",
    ast.YieldFrom: "generator (yield from)",
    ast.Await: "await expression",
    ast.SetComp: "set comprehension",
    ast.Set: "set literal",
    ast.Starred: "star-args (*x)",
}

# Sentinel for "not statically resolvable".
_NO = object()


class FunctionTranslator(AssignmentsMixin, LoopsMixin, CallsMixin, ExpressionsMixin,
                         StatementsMixin):
    """Translates one Python function (and the functions nested in it)."""

    def __init__(self, builder: ProgramBuilder, func):
        self.b = builder
        self.func = func
        self.node, self.file = parse_function(func)
        self.fidx = builder.file_index(self.file)
        # a function of tessera's NumPy library (_numpy_lib.py) has its call site's mark
        # (include_library): its errors name the user's line
        self.site: str | None = None
        self.scope: _Scope | None = None
        self.renames: list[dict] = []
        self.line = self.node.lineno
        self._index_tuples: list[set] = [set()]  # np.ndindex loop variables
        self._depth = 0  # nesting of expr()
        self._closure = {}
        # One entry per enclosing loop of the function being translated: the
        # variable its break sets when it has an else clause, else None.
        self.break_flags: list = []
        # Comprehensions being translated around the current expression: one
        # outside any loop and comprehension is wrapped as a loop of one turn
        # (ExpressionsMixin.comprehension).
        self.comp_nesting = 0
        # The entry function's parameters given back to the caller (_list_args.py):
        # its returns give list(result, p, ...); None in any other function.
        self.writeback: list | None = None
        # Variables holding an object another holds that the function changes in
        # place (_list_args.element_names): a list or dict there is refused.
        self.elements: set = set()
        self.hazards: dict = {}  # _aliases.alias_analysis of the function being translated
        self.aliases, self.keys = Analysis(), {}
        self.fdef = self.node  # the def being translated (a nested one inside it)
        if func.__closure__:
            for name, cell in zip(func.__code__.co_freevars, func.__closure__):
                try:
                    self._closure[name] = cell.cell_contents
                except ValueError:
                    pass

    # ------------------------------------------------------------------ errors

    def where(self, node=None) -> str:
        line = getattr(node, "lineno", None) or self.line
        return f"{self.file}:{line}"

    def unsupported(self, what: str, node=None, hint: str = ""):
        msg = f"{what} is not supported by tessera.jit"
        if hint:
            msg += f"; {hint}"
        raise UnsupportedError(f"{msg} (at {self.where(node)})")

    def mark(self, line: int) -> str:
        return self.site if self.site is not None else f"\x00{line}:{self.fidx}\x01"

    # ------------------------------------------------------------------ functions

    def translate_toplevel(self, name: str) -> str:
        """``define(name, params..., body)`` for the function being translated."""
        node = self.node
        if isinstance(node, ast.Lambda):
            params = self.params(node.args, self.func)
            self.scope = _Scope(None, self.param_names(node.args))
            body = self.expr(node.body)
            return self.mark(node.lineno) + _define_function(name, params, body)
        # The decorators (tessera.jit) are what brought us here: ignored.
        return self.function_def(node, name, toplevel=True)

    def param_names(self, args: ast.arguments, varargs_ok=False) -> list:
        """The parameters' names; a ``def``'s ``*args`` is the parameter after the
        positional ones (a tuple: calls pack their extra arguments, _calls.py)."""
        if args.kwarg:
            self.unsupported("**kwargs in a function definition", args)
        if args.vararg and not varargs_ok:
            self.unsupported("*args in a lambda", args)
        rest = [args.vararg.arg] if args.vararg else []
        return [a.arg for a in args.posonlyargs + args.args] + rest + \
            [a.arg for a in args.kwonlyargs]

    def params(self, args: ast.arguments, func=None, varargs_ok=False) -> list:
        """Parameter texts with their defaults (``b=2``); ``*args`` defaults to the
        empty tuple."""
        self.param_names(args, varargs_ok)  # rejects **kwargs
        positional = args.posonlyargs + args.args
        n_plain = len(positional) - len(args.defaults)
        out = []
        if func is not None:
            # The decorated function itself: its defaults are Python values.
            pos_defaults = list(func.__defaults__ or ())
            kw_defaults = dict(func.__kwdefaults__ or {})
            for i, a in enumerate(positional):
                if i >= n_plain:
                    out.append(f"{mangle(a.arg)}={self.value_text(pos_defaults[i - n_plain], a)}")
                else:
                    out.append(mangle(a.arg))
            if args.vararg:
                out.append(f"{mangle(args.vararg.arg)}=tuple()")
            for a in args.kwonlyargs:
                if a.arg in kw_defaults:
                    out.append(f"{mangle(a.arg)}={self.value_text(kw_defaults[a.arg], a)}")
                else:
                    self._kwonly_without_default(out, a)
            return out
        for i, a in enumerate(positional):
            if i >= n_plain:
                out.append(f"{mangle(a.arg)}={self.expr(args.defaults[i - n_plain])}")
            else:
                out.append(mangle(a.arg))
        if args.vararg:
            out.append(f"{mangle(args.vararg.arg)}=tuple()")
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            if d is not None:
                out.append(f"{mangle(a.arg)}={self.expr(d)}")
            else:
                self._kwonly_without_default(out, a)
        return out

    def _kwonly_without_default(self, out, a):
        if any("=" in p for p in out):
            self.unsupported(
                f"keyword-only parameter '{a.arg}' without a default after parameters with one", a
            )
        out.append(mangle(a.arg))

    def function_def(self, node: ast.FunctionDef, name: str, toplevel=False) -> str:
        if not toplevel and node.decorator_list:
            self.unsupported("a decorator on a nested function", node)
        params = self.params(node.args, self.func if toplevel else None, varargs_ok=True)
        outer_scope, outer_renames = self.scope, self.renames
        declared = _declared_global(node.body)
        if declared:
            self.check_globals(node, declared)
        local_names = self.param_names(node.args, True) + sorted(
            _bound_names(node.body) - set(declared))
        self.scope = _Scope(outer_scope, local_names)
        self.scope.globals = set(declared)
        self.renames = []
        saved_line = self.line
        self.line = node.lineno
        outer_writeback, outer_elements = self.writeback, self.elements
        outer_hazards, outer_aliases, outer_keys = self.hazards, self.aliases, self.keys
        outer_breaks, self.break_flags = self.break_flags, []
        outer_fdef, self.fdef = self.fdef, node
        if not toplevel:
            self.writeback = None
        param_names = self.param_names(node.args, True)
        given_back = {p for p in param_names if self.writeback and mangle(p) in self.writeback}
        self.elements = element_names(node, given_back)
        self.aliases = alias_analysis(node)
        self.hazards = self.aliases.hazards
        keys = self.alias_keys(self.aliases)
        # a parameter changed in place is checked once, on entry (not in its loops)
        checked = [p for p in param_names if p in self.elements]
        self.elements -= set(checked)
        try:
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    body = body[1:]  # the docstring
            if self.writeback:
                # Every way out gives the result and the final values of the
                # parameters the caller gets back: the returns, and the end.
                texts = self.stmts(body) + [self.returned("nil")]
            else:
                texts = self.stmts(body, tail=True)
            texts = [element_check(self.name(p, node), p, ERROR_TAG) for p in checked] + texts
            texts = keys + texts
            body_text = self.block(texts)
        finally:
            self.scope, self.renames = outer_scope, outer_renames
            self.line = saved_line
            self.writeback, self.elements = outer_writeback, outer_elements
            self.hazards, self.aliases, self.keys = outer_hazards, outer_aliases, outer_keys
            self.break_flags, self.fdef = outer_breaks, outer_fdef
        return self.mark(node.lineno) + _define_function(name, params, body_text)

    def check_globals(self, node: ast.FunctionDef, declared: dict) -> None:
        """``global G``: reading G reads the module's G (captured when the
        function is translated, as every module-level value); rebinding it
        would change the module, which a translated function cannot do."""
        params = set(self.param_names(node.args, True))
        for name, stmt in declared.items():
            if name in params:
                raise SyntaxError(f"name '{name}' is parameter and global (at {self.where(stmt)})")
        bad = _global_rebinding(node.body, declared)
        if bad is not None:
            name = bad.id if isinstance(bad, ast.Name) else bad.name
            self.unsupported(
                f"rebinding the module-level variable '{name}' declared global", bad,
                "a jit function reads module variables (captured when it is first called) and "
                "may write into module-level arrays in place (G[...] = v), not rebind them",
            )

    @staticmethod
    def block(texts: list) -> str:
        if len(texts) == 1:
            return texts[0]
        inner = ",\n".join(textwrap.indent(t, "  ") for t in texts)
        return "block(\n" + inner + ")"

    # ------------------------------------------------------------------ statements

    def stmts(self, body: list, tail=False) -> list:
        out = []
        for i, s in enumerate(body):
            out.extend(self.stmt(s, tail and i == len(body) - 1))
        if tail and not body:
            out.append("nil")
        return out or ["nil"]

    def stmt(self, node, tail=False) -> list:
        saved = self.line
        self.line = node.lineno
        try:
            texts = self.alias_texts(node, self._stmt(node, tail), tail)
        finally:
            self.line = saved
        if self.elements:
            texts = self.element_texts(node, texts, tail)
        if texts:
            texts[0] = self.mark(node.lineno) + texts[0]
        return texts

    def _stmt(self, node, tail) -> list:
        kind = type(node)
        if kind in _UNSUPPORTED_STMTS:
            self.unsupported(_UNSUPPORTED_STMTS[kind], node)
        if isinstance(node, ast.Delete):
            out = [t for target in node.targets for t in self.del_target(target, node)]
            return out + ["nil"] if tail else out
        if isinstance(node, ast.Return):
            value = self.expr(node.value) if node.value is not None else None
            if self.writeback:
                return [f"return({self.returned(value or 'nil')})"]
            if tail:
                return [value if value is not None else "nil"]
            return [f"return({value})" if value is not None else "return()"]
        if isinstance(node, ast.Global):
            return ["nil"] if tail else []
        if isinstance(node, ast.With):
            self.check_with(node)
            return self.stmts(node.body, tail)
        if isinstance(node, ast.If):
            cond = self.expr(node.test)
            then = self.block(self.stmts(node.body, tail))
            if node.orelse:
                other = self.block(self.stmts(node.orelse, tail))
                return [f"if({cond}, {then}, {other})"]
            if tail:
                return [f"if({cond}, {then}, nil)"]
            return [f"if({cond}, {then})"]
        out = self._simple_stmt(node)
        if tail:
            out.append("nil")
        return out

    def returned(self, value: str) -> str:
        """The entry's result with the parameters given back (self.writeback)."""
        return f"list({', '.join([value] + self.writeback)})"

    def check_with(self, node: ast.With) -> None:
        """``with np.errstate(...):`` runs its body: tessera neither warns nor
        stops on floating-point errors (inf and NaN result as NumPy's
        'ignore'), so only the settings 'ignore', 'warn', 'print' and 'log'
        (warnings, which tessera does not emit) keep NumPy's meaning; 'raise'
        and 'call' are refused.  Any other context manager is refused."""
        for item in node.items:
            call = item.context_expr
            fn = (self.static_object(call.func)
                  if isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute))
                  else _NO)
            if fn is not np.errstate:
                self.unsupported(
                    f"the with statement on '{_unparsed(call)}'", item.context_expr,
                    "only 'with np.errstate(...):' is translated (its body runs)",
                )
            if item.optional_vars is not None:
                self.unsupported("'with np.errstate(...) as name'", item.optional_vars)
            if call.args:
                self.unsupported("np.errstate() with positional arguments", call)
            for k in call.keywords:
                v = k.value
                if k.arg not in ("all", "divide", "over", "under", "invalid"):
                    self.unsupported(f"np.errstate({k.arg}=...)", call)
                if not (isinstance(v, ast.Constant) and v.value in (None, "ignore", "warn",
                                                                    "print", "log")):
                    self.unsupported(
                        f"np.errstate({k.arg}={_unparsed(v)})", call,
                        "tessera computes inf and NaN as NumPy does without warning; only "
                        "'ignore', 'warn', 'print' and 'log' (a literal) are accepted",
                    )

    def _simple_stmt(self, node) -> list:
        if isinstance(node, ast.Assign):
            if len(node.targets) == 1:
                return self.assign(node.targets[0], node.value)
            tmp = self.b.tmp()
            out = [f"define({tmp}, {self.expr(node.value)})"]
            for t in node.targets:
                out.extend(self.assign_text(t, tmp))
            return out
        if isinstance(node, ast.AnnAssign):
            if node.value is None:
                return []
            return self.assign(node.target, node.value)
        if isinstance(node, ast.AugAssign):
            return self.aug_assign(node)
        if isinstance(node, ast.Expr):
            return self.expr_stmt(node.value)
        if isinstance(node, (ast.While, ast.For)):
            return self.loop_stmt(node)
        if isinstance(node, ast.Break):
            return self.break_stmt()
        if isinstance(node, ast.Continue):
            return ["continue()"]
        if isinstance(node, ast.Pass):
            return []
        if isinstance(node, ast.Raise):
            return [self.raise_stmt(node)]
        if isinstance(node, ast.Assert):
            cond = self.expr(node.test)
            if node.msg is not None:
                return [f"assert({cond}, {self.expr(node.msg)})"]
            return [f"assert({cond}, {string_literal(_unparsed(node.test))})"]
        if isinstance(node, ast.FunctionDef):
            return [self.function_def(node, self.local_name(node.name))]
        self.unsupported(f"the statement '{type(node).__name__}'", node)

    def raise_stmt(self, node: ast.Raise) -> str:
        """``raise ValueError(message)`` of a builtin exception: the same exception
        with the message (converted with str) when the statement runs, through the
        assert primitive's tagged message (jit.py turns it back into the class)."""
        exc = node.exc
        if exc is None:
            self.unsupported("a bare raise (re-raising the exception being handled)", node)
        call = exc if isinstance(exc, ast.Call) else None
        cls = self.static_object(call.func if call is not None else exc)
        if not (isinstance(cls, type) and cls.__name__ in RAISABLE
                and getattr(builtins, cls.__name__, None) is cls):
            self.unsupported(f"raising {_unparsed(exc)} (only Python's builtin exceptions "
                             f"{', '.join(sorted(RAISABLE))} can be raised)", node)
        args = [] if call is None else call.args
        if call is not None and (call.keywords or len(args) > 1 or
                                 any(isinstance(a, ast.Starred) for a in args)):
            self.unsupported(f"raising {cls.__name__} with other than one message argument",
                             node)
        tag = string_literal(f"{ERROR_TAG}{cls.__name__}] ")
        message = f"str({self.expr(args[0])})" if args else '""'
        return f"assert(false, concat({tag}, {message}))"


def _define_function(name: str, params: list, body: str) -> str:
    # define(f, body) would define a variable: a function without parameters
    # is a lambda.
    if not params:
        return f"define({name}, lambda({body}))"
    return f"define({', '.join([name] + params + [body])})"


def _tuple_text(value) -> str:
    """The text of a loop element: a tuple (from zip/enumerate) becomes tuple(...)."""
    if isinstance(value, tuple):
        return f"tuple({', '.join(_tuple_text(v) for v in value)})"
    return value


def _is_simple(text: str) -> bool:
    return re.fullmatch(r"[^\W\d]\w*|\(?-?[0-9.e+]+\)?", text) is not None


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _constant_number(node):
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        return -node.operand.value
    return None


def _is_jit(obj) -> bool:
    return getattr(obj, "_tessera_jit", False) is True


def _tessera_module():
    import sys

    return sys.modules.get("tessera")


def _python_random_name(obj):
    """The name of a function of Python's ``random`` module (a method of its
    hidden shared ``Random`` instance), or None."""
    inst = getattr(random, "_inst", None)
    if inst is not None and getattr(obj, "__self__", None) is inst:
        name = getattr(obj, "__name__", None)
        return name if isinstance(name, str) else None
    return None


def _numpy_function(obj):
    """('numpy' | 'linalg' | 'random' | 'fft' | 'math', name) for a function of
    those namespaces, else (None, None)."""
    name = getattr(obj, "__name__", None)
    if not isinstance(name, str):
        return None, None
    for ns, mod in (("numpy", np), ("linalg", np.linalg), ("random", np.random), ("fft", np.fft),
                    ("math", math)):
        try:
            if getattr(mod, name, None) is obj or (
                ns == "random" and getattr(mod, name, None) == obj
            ):
                return ns, name
        except Exception:  # noqa: BLE001 - comparing arbitrary objects
            pass
    # Aliases NumPy exports under another name (np.round is around, ...).
    for alias in ("round", "abs", "max", "min", "concat"):
        if getattr(np, alias, None) is obj:
            return "numpy", alias
    return None, None
