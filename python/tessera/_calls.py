"""How calls are translated: ``@tessera.jit`` functions, builtins, NumPy
(``np.X``, ``np.linalg.X``, ``np.random.X``), ``math`` and array methods.

A mixin of ``_translate.FunctionTranslator``; the tables it follows are in
``_numpy_map.py``.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import string
import sys

import numpy as np

from . import _list_args as L
from . import _numpy_map as M
from . import _random_lib as R
from . import _templates
from . import _translate as T
from . import _ufuncs as U
from ._calls_builtins import BuiltinCallsMixin
from ._numpy_lib import LIBRARY, PAD_MODES, SPECIAL
from ._sets import SET_CALLS
from ._templates import ERROR_TAG

# the modules of tessera's NumPy library (functions translated per call site)
LIBRARY_MODULES = ("tessera._numpy_lib", "tessera._numpy_apply_lib")
# What an argument expression evaluated twice may be: no calls, no walrus.
_PLAIN_EXPRESSIONS = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.BinOp,
                      ast.UnaryOp, ast.Slice, ast.Tuple, ast.Load, ast.operator, ast.unaryop,
                      ast.expr_context)


_STR_METHODS = frozenset({"strip", "lstrip", "rstrip", "lower", "upper", "replace", "join",
                          "format", "split", "rsplit", "splitlines"})


def _string_like(node, fdef, depth=0) -> bool:
    """Whether ``node`` may hold a string (or, for a loop's iterable, strings):
    a string constant, f-string, ``str(...)``, ``input()``, a string method's
    result, an item of one, or a name the function binds to one (an
    assignment, or the target of a loop or comprehension over one)."""
    if depth > 8:
        return False
    if isinstance(node, (ast.JoinedStr, ast.Constant)):
        return isinstance(node, ast.JoinedStr) or isinstance(node.value, str)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id in ("str", "input", "repr", "format", "chr", "bin", "hex", "oct")
        return isinstance(f, ast.Attribute) and f.attr in _STR_METHODS
    if isinstance(node, ast.Subscript):
        return _string_like(node.value, fdef, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult, ast.Mod)):
        # s + t, s * 3, "%d" % n: a string when a side of + or * is one, or % formats one
        sides = (node.left,) if isinstance(node.op, ast.Mod) else (node.left, node.right)
        return any(_string_like(side, fdef, depth + 1) for side in sides)
    if not isinstance(node, ast.Name):
        return False
    for n in ast.walk(fdef):
        if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in n.targets):
            if _string_like(n.value, fdef, depth + 1):
                return True
        elif isinstance(n, (ast.For, ast.comprehension)) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in ast.walk(n.target)):
            if _string_like(n.iter, fdef, depth + 1):
                return True
        elif isinstance(n, ast.arg) and n.arg == node.id and isinstance(
                n.annotation, ast.Name) and n.annotation.id == "str":
            return True
    return False


def _param_seen(node, fdef) -> bool:
    """Whether ``node`` is a parameter of ``fdef`` whose type the translator cannot
    see (a str the caller passes: int(s) parses it as Python does)."""
    if not isinstance(node, ast.Name) or not isinstance(fdef, ast.FunctionDef):
        return False
    a = fdef.args
    for p in a.posonlyargs + a.args + a.kwonlyargs:
        if p.arg == node.id:
            return not (isinstance(p.annotation, ast.Name)
                        and p.annotation.id in ("int", "float", "bool"))
    return False


def _pack_varargs(spec, args):
    """A call's positional arguments for a function with ``*args`` (spec: its
    ast.arguments or code object): those past the named parameters as one tuple."""
    if isinstance(spec, ast.arguments):
        if spec.vararg is None:
            return args
        n = len(spec.posonlyargs + spec.args)
    else:
        n = spec.co_argcount
    if len(args) <= n:
        return args
    extra = ast.Tuple(elts=list(args[n:]), ctx=ast.Load())
    ast.copy_location(extra, args[n])
    return list(args[:n]) + [extra]


def _side_effect_free(node) -> bool:
    return all(isinstance(n, _PLAIN_EXPRESSIONS) for n in ast.walk(node))
RANDOM_MODULE = "tessera._random_lib"


def _pad_mode(args, kws):
    """np.pad's mode when given as a literal string, else None."""
    mode = kws.get("mode", args[2] if len(args) > 2 else None)
    return mode.value if isinstance(mode, ast.Constant) else None



_ACTIVE: set = set()


def _fresh(node) -> bool:
    """An argument that is a new list or dict no one else holds: a display, a
    comprehension, ``[False] * n``, ``list(xs)``, ``dict(d)``, ``sorted(xs)``."""
    if isinstance(node, (ast.List, ast.ListComp, ast.Dict, ast.DictComp, ast.BinOp)):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("list", "dict", "sorted"))


def helper_list_changes(func):
    """``helper_changes`` for _list_args's analyses of ``func``: a call's positions
    whose arguments the called helper (a plain function or @jit function of
    ``func``'s module, by its name) gives back (list_changed_params, of its own
    helpers too; a recursion adds nothing while it is being read)."""
    scope = dict(func.__globals__)
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:
                pass

    def changes(call) -> tuple:
        if not isinstance(call.func, ast.Name):
            return ()
        callee = scope.get(call.func.id)
        callee = getattr(callee, "__wrapped__", callee)
        if not inspect.isfunction(callee) or callee.__code__ in _ACTIVE or (
                getattr(callee, "__module__", None) != getattr(func, "__module__", None)):
            return ()
        if callee.__code__.co_flags & inspect.CO_VARARGS:
            return ()
        _ACTIVE.add(callee.__code__)
        try:
            fdef = T.parse_function(callee)[0]
            if not isinstance(fdef, ast.FunctionDef):
                return ()
            return L.list_changed_params(fdef, helper_list_changes(callee))
        except T.UnsupportedError:
            return ()
        finally:
            _ACTIVE.discard(callee.__code__)

    return changes


class CallsMixin(BuiltinCallsMixin, U.UfuncMethodsMixin):
    """The call-translating methods of FunctionTranslator (Python's builtins, dict(),
    np.vectorize, key functions and type tests: _calls_builtins.py)."""

    def call_args(self, node: ast.Call):
        for a in node.args:
            if isinstance(a, ast.Starred):
                self.unsupported("star-args (*x) in a call", a)
        for k in node.keywords:
            if k.arg is None:
                self.unsupported("star-args (**kw) in a call", k.value)
        return list(node.args), {k.arg: k.value for k in node.keywords}

    def call(self, node: ast.Call) -> str:
        f = node.func
        if (
            len(node.args) == 1
            and isinstance(node.args[0], ast.Starred)
            and not node.keywords
            and self.is_ndindex_call(node)
        ):
            return f"ndindex({self.expr(node.args[0].value)})"  # np.ndindex(*x.shape)
        args, kws = self.call_args(node)
        if isinstance(f, ast.Name) and f.id in SET_CALLS:  # sum/min/max of a set (_sets.py)
            return self.inline(SET_CALLS[f.id], self.expr(node.args[0]))
        if isinstance(f, ast.Name) and self.is_variable(f.id):
            spec = self.local_def_args(f.id)
            if spec is not None:
                args = _pack_varargs(spec, args)
            return self.plain_call(self.local_name(f.id), args, kws, mangle_kw=True)
        if isinstance(f, (ast.Name, ast.Attribute)):
            obj = self.static_object(f)
            if obj is not T._NO:
                return self.call_object(obj, f, node, args, kws)
            if isinstance(f, ast.Attribute):
                base = self.static_object(f.value)
                if base is T._tessera_module():
                    if f.attr not in T.primitive_names():
                        self.unsupported(f"tessera.{f.attr} (not a primitive)", node)
                    return self.plain_call(f.attr, args, kws)
                return self.method_call(f, node, args, kws)
        callee = self.expr(f)
        return self.plain_call(f"({callee})", args, kws, mangle_kw=True)

    def plain_call(self, callee: str, args, kws, mangle_kw=False) -> str:
        parts = [self.expr(a) for a in args]
        for k, v in kws.items():
            parts.append(f"{T.mangle(k) if mangle_kw else k}={self.expr(v)}")
        return f"{callee}({', '.join(parts)})"

    def call_object(self, obj, fnode, node, args, kws) -> str:
        label = ast.unparse(fnode)
        if T._is_jit(obj):
            return self.function_call(obj, node, args, kws)
        tessera = T._tessera_module()
        if obj is tessera.grad or obj is tessera.value_and_grad:
            return self.gradient_form(obj.__name__, node, args, kws)
        if isinstance(obj, tessera.autodiff.GradFunction) and obj.form is None:
            # a gradient made outside (df = tessera.grad(f)), called here
            return self.plain_call(f"({obj.form_text(self.b.include(obj.function))})", args, kws)
        prim = getattr(obj, "_tessera_primitive", None)
        if isinstance(prim, str) and prim in T.primitive_names():
            # tessera.distributed's eager functions: the primitive of the same name.
            return self.plain_call(prim, args, kws)
        if isinstance(fnode, ast.Name) and getattr(builtins, fnode.id, None) is obj:
            return self.builtin_call(fnode.id, node, args, kws)
        if obj is getattr(T._tessera_module(), "prange", None):
            return self.builtin_call("range", node, args, kws)  # not a for loop's: range
        dt = T.dtype_name_of(obj)
        if dt is not None:
            return self.convert_call(dt, obj, label, node, args, kws)
        if obj is np.dtype:
            a = self.single_arg(node, "np.dtype")
            return self.expr(a)
        method = U.ufunc_method(obj)
        if method is not None:  # np.add.outer, np.maximum.accumulate, ...
            return self.ufunc_method_call(method[0], method[1], node, args, kws)
        pyrandom = T._python_random_name(obj)
        if pyrandom is not None:
            return self.python_random_call(pyrandom, obj, node, args, kws)
        if obj is np.lib.stride_tricks.sliding_window_view:
            return self.library_call(SPECIAL["sliding_window_view"], node, args, kws)
        ns, name = T._numpy_function(obj)
        if ns == "numpy":
            return self.numpy_call(name, node, args, kws)
        if ns == "linalg":
            if name not in T.primitive_names():
                self.unsupported(f"the NumPy function np.linalg.{name}", node)
            return self.plain_call(name, args, kws)
        if ns == "random":
            return self.random_call(name, node, args, kws)
        if ns == "fft":
            if name not in M.FFT_SPECS:
                self.unsupported(f"the NumPy function np.fft.{name}", node,
                                 "supported: " + ", ".join(f"np.fft.{n}" for n in M.FFT_SPECS))
            return self.emit_spec(M.FFT_SPECS[name], args, kws, node)
        if ns == "math":
            return self.math_call(name, node, args, kws)
        if self.site is not None and getattr(obj, "__module__", None) in LIBRARY_MODULES:
            return self.library_call(obj, node, args, kws)  # one library function calling another
        if self.is_translatable_helper(obj):
            return self.function_call(obj, node, args, kws)
        if isinstance(obj, np.vectorize):  # a function decorated with @np.vectorize
            return self.vectorized_call(obj, node, args, kws)
        self.reject_foreign_function(obj, node, label)
        kind = "class" if isinstance(obj, type) else "function" if callable(obj) else "object"
        self.unsupported(
            f"calling the Python {kind} '{label}'",
            node,
            "only functions, NumPy functions and builtins can be called",
        )

    def gradient_form(self, name, node, args, kws) -> str:
        """``tessera.grad(f, argnums)`` / ``tessera.value_and_grad(f, argnums)`` in a jit
        function: the language's gradient form (called, or differentiated in turn:
        a gradient inside a differentiated function is a second-order gradient)."""
        kws = dict(kws)
        if len(args) > 2 or set(kws) - {"argnums"} or (len(args) == 2 and "argnums" in kws):
            self.unsupported(f"tessera.{name}() with other arguments than (f, argnums)", node)
        if not args:
            self.unsupported(f"tessera.{name}() without a function", node)
        nums = args[1] if len(args) == 2 else kws.get("argnums")
        text = f"{name}({self.expr(args[0])}"
        if nums is not None:
            try:
                value = ast.literal_eval(nums)
            except ValueError:
                value = None
            if isinstance(value, int) and not isinstance(value, bool):
                text += f", argnums={value}"
            elif (isinstance(value, tuple) and value
                  and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
                text += f", argnums=[{', '.join(map(str, value))}]"
            else:
                self.unsupported(f"tessera.{name}() with argnums other than an int or a "
                                 "tuple of ints written in the call", node)
        return text + ")"

    def convert_call(self, dt, obj, label, node, args, kws) -> str:
        """``float(x)``, ``np.float32(x)``: a conversion to a dtype."""
        if obj is int and label == "int" and (len(args) >= 2 or kws):
            return self.int_with_base(node, args, dict(kws))
        if len(args) != 1 or kws:
            self.unsupported(f"{label}() with other than one argument", node)
        a = args[0]
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and obj is float:
            if a.value.strip().lower() in ("inf", "+inf", "infinity", "-inf", "nan", "-infinity"):
                return T.float_literal(float(a.value))
        if obj is bool:
            return f"not_(not_({self.expr(a)}))"  # Python's truth (arrays: one element)
        if obj is int and (_string_like(a, self.node) or _param_seen(a, self.fdef)):
            # int(s) of a string (int(c) for c in str(n)): Python's base-10 parse
            # (only where the argument may be a string: the type test has no
            # native code, and would keep int(x[i]) loops off it)
            v = self.b.tmp("v")
            number = self.inline("python_number", v, T.string_literal(dt), label=label)
            return (f"block(define({v}, {self.expr(a)}), if(type({v}) == \"string\", "
                    f"{self.int_parse('str_to_int', v)}, {number}))")
        if obj in (int, float) and not isinstance(a, ast.Constant):
            return self.inline("python_number", self.expr(a), T.string_literal(dt), label=label)
        if obj not in (int, float, bool):
            # np.int64(3), np.float64(x) of a Python number: NumPy's scalar, not Python's
            return f"astype({self.expr(a)}, {T.string_literal(dt)}, \"unsafe\", true)"
        return f"astype({self.expr(a)}, {T.string_literal(dt)})"

    def int_with_base(self, node, args, kws) -> str:
        """``int(s, base)``, ``int(s, base=b)``: Python's parse of the string s in
        base b (0 or 2..36), with Python's errors at the user's line; a call
        Python itself refuses is its TypeError there too."""
        error = None
        if len(args) + len(kws) > 2:
            error = f"int() takes at most 2 arguments ({len(args) + len(kws)} given)"
        elif set(kws) - {"base"}:
            bad = next(k for k in kws if k != "base")
            error = f"'{bad}' is an invalid keyword argument for int()"
        elif not args:
            error = "int() missing string argument"
        if error is not None:
            # evaluated as Python would (arguments first), then its TypeError
            texts = [self.expr(a) for a in args] + [self.expr(v) for v in kws.values()]
            return (f"block({''.join(t + ', ' for t in texts)}"
                    f"assert(false, \"{ERROR_TAG}TypeError] {error}\"))")
        x, base = args[0], args[1] if len(args) == 2 else kws["base"]
        if isinstance(x, ast.Constant) and isinstance(base, ast.Constant):
            try:  # a literal the translator can read as Python does
                value = int(x.value, base.value)
            except (TypeError, ValueError):
                value = None
            if isinstance(value, int) and -(2**63) <= value < 2**63:
                return T.int_literal(value)
        return self.int_parse("int_base", self.expr(x), self.expr(base))

    def int_parse(self, name, *values) -> str:
        """The inline expansion ``name`` (int_base, str_to_int) of ``values`` and
        Python's digit limit, with the helpers it calls."""
        _templates.int_parse_helpers()
        self.b.helper("__py_type_name")
        self.b.helper("__int_parse")
        return self.inline(name, *values, str(sys.get_int_max_str_digits()))

    def emit_spec(self, spec: M.Spec, args, kws, node, receiver: str | None = None) -> str:
        texts = [receiver] if receiver is not None else []
        params = list(spec.params)
        if spec.varargs:
            fixed = len(params) - len(texts)
            extra = args[fixed:] if len(args) >= fixed else []
            args = args[:fixed]
            if len(extra) == 1:
                kws = dict(kws)
                kws[spec.varargs] = extra[0]
            elif len(extra) > 1:
                kws = dict(kws)
                kws[spec.varargs] = ast.Tuple(elts=extra, ctx=ast.Load(), lineno=extra[0].lineno)
            params.append(spec.varargs)
        bound: dict = {}
        for i, a in enumerate(args):
            idx = i + len(texts)
            if idx >= len(params):
                count = len(args) + len(texts)
                self.unsupported(f"{spec.prim}() with {count} positional arguments", node)
            bound[params[idx]] = self.expr(a)
        for i, t in enumerate(texts):
            bound[params[i]] = t
        for k, v in kws.items():
            if k == "a" and params and params[0] not in bound:
                k = params[0]
            if k in spec.ignore_none or k in ("retstep", "returned"):
                if isinstance(v, ast.Constant) and v.value in (None, False):
                    continue
                self.unsupported(f"the argument {k}= of {spec.prim}", node)
            if k == "kind":
                continue
            if k in bound:
                self.unsupported(f"{spec.prim}() got argument '{k}' twice", node)
            bound[k] = self.expr(v)
        for k in ("retstep", "returned", "out", "kind"):
            if k in bound and k not in kws:
                if bound[k] in ("nil", "false"):
                    del bound[k]
                elif k == "kind":
                    del bound[k]
                else:
                    self.unsupported(f"the argument {k}= of {spec.prim}", node)
        out, positional = [], True
        for i, p in enumerate(params):
            if p not in bound:
                positional = False
                continue
            if positional and i < spec.positional:
                out.append(bound.pop(p))
            else:
                positional = False
                out.append(f"{spec.rename.get(p, p)}={bound.pop(p)}")
        for k, v in bound.items():
            out.append(f"{spec.rename.get(k, k)}={v}")
        return f"{spec.prim}({', '.join(out)})"

    def python_random_call(self, name: str, obj, node, args, kws) -> str:
        """Python's ``random`` module: the same distributions from tessera's
        global stream (seeded by ``random.seed`` as by ``np.random.seed``), not
        Python's Mersenne Twister numbers."""
        label = f"random.{name}"
        if name not in M.PYTHON_RANDOM:
            self.unsupported(
                f"the function {label} of Python's random module", node,
                "supported: " + ", ".join(f"random.{n}" for n in M.PYTHON_RANDOM),
            )
        if name == "shuffle":
            self.unsupported(f"{label}() inside an expression", node,
                             "write it as a statement on a variable: random.shuffle(x)")
        try:
            bound = inspect.signature(obj).bind(*args, **kws)
        except TypeError as e:
            raise TypeError(f"[{label}] {e} (at {self.where(node)})") from None
        a = {k: self.expr(v) for k, v in bound.arguments.items()}
        # One float64 draw, in the form the scalar-loop fast path draws itself,
        # as Python's float (item(): NumPy's float64 is not what Python gives).
        uniform01 = "item(random_uniform(shape=tuple()))"
        if name == "random":
            return uniform01
        if name == "seed":
            if "version" in a:
                self.unsupported(f"{label}() with version=", node)
            if "a" not in a:
                self.unsupported(f"{label}() without a seed", node,
                                 "tessera's draws are reproducible: give the seed, random.seed(n)")
            return f"set_seed({a['a']})"
        if name == "uniform":  # Python's formula: a + (b - a) * random()
            lo, hi = self.b.tmp(), self.b.tmp()
            return (f"block(define({lo}, {a['a']}), define({hi}, {a['b']}), "
                    f"({lo} + ({hi} - {lo}) * {uniform01}))")
        if name == "randint":  # [a, b], both ends included
            return self.inline("randint", a["a"], a["b"])
        if name == "randrange":
            if "step" in a:
                self.unsupported(f"{label}() with a step", node)
            lo, hi = ("0", a["start"]) if "stop" not in a else (a["start"], a["stop"])
            return f"item(random_integers({lo}, {hi}, list()))"
        if name in ("gauss", "normalvariate"):
            mu, sigma = a.get("mu", "0.0"), a.get("sigma", "1.0")
            return f"item(({mu}) + ({sigma}) * random_normal(shape=tuple()))"
        # choice
        return self.inline("choice", a["seq"])

    def diagonal_call(self, x: str, label: str, node, args, kws) -> str:
        """``np.diagonal(x, offset, axis1, axis2)`` / ``x.diagonal(...)``."""
        names = ("offset", "axis1", "axis2")
        if len(args) > 3:
            raise TypeError(f"[{label}] takes at most 3 arguments besides the array, got "
                            f"{len(args)} (at {self.where(node)})")
        given = dict(zip(names, args))
        for k, v in kws.items():
            if k not in names or k in given:
                raise TypeError(f"[{label}] unexpected or repeated argument '{k}' "
                                f"(at {self.where(node)})")
            given[k] = v
        vals = [self.expr(given[k]) if k in given else d for k, d in zip(names, "001")]
        return self.inline("diagonal", x, *vals, label=label)

    def is_diagonal_call(self, node: ast.Call) -> bool:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "diagonal":
            obj = self.static_object(f)
            return obj is T._NO or obj is np.diagonal
        return isinstance(f, ast.Name) and self.static_object(f) is np.diagonal

    def numpy_call(self, name: str, node, args, kws) -> str:
        if name == "diagonal":
            kws = dict(kws)
            a = args[0] if args else kws.pop("a", None)
            if a is None:
                raise TypeError(f"[np.diagonal] missing the array argument (at {self.where(node)})")
            return self.diagonal_call(self.expr(a), "np.diagonal", node, args[1:], kws)
        if name == "where" and len(args) == 1 and not kws:
            return f"nonzero({self.expr(args[0])})"
        if name == "vectorize":
            return self.vectorize_call(node, args, kws)
        if name == "meshgrid":
            xs = ", ".join(self.expr(a) for a in args)
            rest = "".join(f", {k}={self.expr(v)}" for k, v in kws.items())
            return f"meshgrid(list({xs}){rest})"
        if name == "ndindex":
            if kws:
                self.unsupported("np.ndindex with keyword arguments", node)
            if len(args) == 1:
                return f"ndindex({self.expr(args[0])})"
            return f"ndindex(list({', '.join(self.expr(a) for a in args)}))"
        if name in ("vstack", "hstack", "row_stack") and ("dtype" in kws or "casting" in kws):
            return self.stack_with_dtype(name, node, args, kws)
        if name in M.QUANTILE_FUNCTIONS:
            kws = dict(kws)
            method = kws.pop("method", None)
            if method is not None and not (
                isinstance(method, ast.Constant) and method.value == "linear"
            ):
                self.unsupported(f"np.{name} with a method other than 'linear'", node)
            if isinstance(kws.get("overwrite_input"), ast.Constant):
                del kws["overwrite_input"]  # only allows NumPy to reuse the input
        if name == "einsum":
            kws = {k: v for k, v in kws.items() if k != "optimize"}  # a speed hint
        if name == "array" and "copy" in kws:  # NumPy 2: copy=False/None never copies
            kws = dict(kws)
            copy = kws.pop("copy")
            if not (isinstance(copy, ast.Constant) and copy.value is True):
                name = "asarray"
        if name in M.MASKED_REDUCTIONS and ("where" in kws or "initial" in kws):
            return self.library_call(SPECIAL[f"_{name}_where"], node, args, kws)
        if name == "pad" and _pad_mode(args, kws) in PAD_MODES:
            return self.library_call(SPECIAL["pad"], node, args, kws)
        if name in LIBRARY:  # defined in NumPy terms: translated like a helper
            return self.library_call(LIBRARY[name], node, args, kws)
        if name in M.NUMPY_SPECS:
            return self.emit_spec(M.NUMPY_SPECS[name], args, kws, node)
        prim = M.NUMPY_RENAMES.get(name, name)
        if prim == "copyto":  # where= and casting= are copyto's own parameters
            return self.plain_call(prim, args, kws)
        if prim in T.primitive_names():
            for k, v in kws.items():
                if k in ("out", "where", "casting", "order", "subok"):
                    if not (isinstance(v, ast.Constant) and v.value is None):
                        self.unsupported(f"the argument {k}= of np.{name}", node)
            kws = {k: v for k, v in kws.items() if k not in ("out", "order", "subok", "casting")}
            return self.plain_call(prim, args, kws)
        self.unsupported(f"the NumPy function np.{name}", node)

    def function_call(self, func, node, args, kws) -> str:
        """A call of a Python function translated in (a @jit function, a helper):
        arguments that do not fit its signature are Python's TypeError when the call
        runs (a positional argument past them, one for a keyword-only parameter)."""
        if self.site is not None and getattr(func, "__module__", None) == RANDOM_MODULE:
            return self.library_call(func, node, args, kws)  # the random library's helpers
        mismatch = self.signature_mismatch(func, args, kws)
        if mismatch is not None:
            return mismatch
        code = getattr(getattr(func, "__wrapped__", func), "__code__", None)
        if code is not None and code.co_flags & inspect.CO_VARARGS:
            args = _pack_varargs(code, args)
        elif code is not None:
            plain = getattr(func, "__wrapped__", func)
            fdef = T.parse_function(plain)[0]
            changed = L.list_changed_params(fdef, helper_list_changes(plain)) if isinstance(
                fdef, ast.FunctionDef) else ()
            if changed:
                return self.changing_call(func, fdef, changed, node, args, kws)
        return self.plain_call(self.b.include(func), args, kws, mangle_kw=True)

    def changing_call(self, func, fdef, changed, node, args, kws) -> str:
        """A call of a helper that changes lists or dicts passed to it (the positions
        ``changed``): its variant gives their final values back beside its result
        and the caller's variables are rebound to them, as Python's caller sees its
        list changed. A fresh list (a display, a comprehension) needs no rebinding;
        other arguments (xs[i], a variable holding another's element) are refused."""
        names = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
        label = getattr(func, "__name__", "function")
        caller_elements = L.element_vars(self.fdef) if isinstance(
            self.fdef, ast.FunctionDef) else set()
        if self.writeback:
            caller_elements -= {p for p in caller_elements if T.mangle(p) in self.writeback}
        w = self.b.tmp("w")
        rebinds = []
        passed = [a.id for a in list(args) + list(kws.values()) if isinstance(a, ast.Name)]
        for k, i in enumerate(changed):
            a = args[i] if i < len(args) else kws.get(names[i])
            if a is None or _fresh(a):
                continue
            if not isinstance(a, ast.Name) or a.id in caller_elements or passed.count(a.id) > 1:
                self.unsupported(
                    f"passing '{ast.unparse(a)}' to '{label}', which changes it in place", a,
                    "the helper's changes come back to a variable of the caller holding its "
                    "own list (not an element of another, nor one passed twice)")
            rebinds.append(self.rebind(a.id, f"getitem({w}, {k + 1})", node))
        call = self.plain_call(self.b.include(func, tuple(changed)), args, kws, mangle_kw=True)
        return f"block(define({w}, {call}), {', '.join(rebinds + [f'getitem({w}, 0)'])})"

    def signature_mismatch(self, func, args, kws):
        """The failing call's text when args and kws do not bind to func's
        signature (Python's message), else None."""
        try:
            inspect.signature(getattr(func, "__wrapped__", func)).bind(
                *range(len(args)), **{k: None for k in kws})
        except TypeError as e:
            name = getattr(func, "__name__", "function")
            if getattr(func, "__module__", None) in LIBRARY_MODULES:
                name = f"np.{name}"
            elif getattr(func, "__module__", None) == RANDOM_MODULE:
                name = (f"Generator.{name[4:]}" if name.startswith("rng_")
                        else f"np.random.{name}")
            text = f"{T.ERROR_TAG}TypeError] {name}(): {e}"
            return f"assert(false, {T.string_literal(text)})"
        except ValueError:  # no signature to read: the call is left to the runtime
            pass
        return None

    def library_call(self, func, node, args, kws, receiver: str | None = None) -> str:
        """A call of a function of tessera's NumPy library, marked with this call's line
        (or, inside the library, with the site the outer library call was marked with);
        `receiver`, the text of a method's object, is its first argument."""
        extra = [node] if receiver is not None else []  # stands for the receiver when binding
        mismatch = self.signature_mismatch(func, extra + list(args), kws)
        if mismatch is not None:
            return mismatch
        site = self.site if self.site is not None else self.mark(node.lineno)
        text = self.plain_call(self.b.include_library(func, site), args, kws, mangle_kw=True)
        if receiver is None:
            return text
        head, rest = text.split("(", 1)
        return f"{head}({receiver}{', ' if rest != ')' else ''}{rest}"

    def stack_with_dtype(self, name: str, node, args, kws) -> str:
        """``np.vstack(tup, dtype=d, casting=c)``: the stack converted with
        NumPy's casting rule (same_kind by default)."""
        kws = dict(kws)
        dtype = kws.pop("dtype", None)
        casting = kws.pop("casting", None)
        prim = M.NUMPY_RENAMES.get(name, name)
        stacked = self.plain_call(prim, args, kws)
        if dtype is None or (isinstance(dtype, ast.Constant) and dtype.value is None):
            return stacked
        rule = self.expr(casting) if casting is not None else '"same_kind"'
        return f"astype({stacked}, {self.expr(dtype)}, casting={rule})"

    def info_constant(self, node: ast.Attribute):
        """``np.iinfo(dtype).max``, ``np.finfo(np.float32).eps``: the constant,
        or None when ``node`` is not such an attribute."""
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute))):
            return None
        fn = self.static_object(call.func)
        if fn is not np.iinfo and fn is not np.finfo:
            return None
        label = f"np.{fn.__name__}"
        if len(call.args) != 1 or call.keywords:
            self.unsupported(f"{label}() with other than one argument", node)
        arg = call.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            dt = arg.value
        else:
            obj = self.static_object(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else T._NO
            dt = T.dtype_name_of(obj) if obj is not T._NO else None
            if dt is None:
                self.unsupported(
                    f"{label}() of a dtype known only at run time", node,
                    "name the dtype (np.float32, 'int64', ...)",
                )
        if node.attr not in M.INFO_ATTRIBUTES:
            self.unsupported(f"the attribute {label}(...).{node.attr}", node)
        try:
            info = fn(dt)
        except (TypeError, ValueError) as e:
            raise type(e)(f"[{fn.__name__}] {e}: got {dt!r} (at {self.where(node)})") from None
        try:
            value = getattr(info, node.attr)
        except AttributeError:
            self.unsupported(f"the attribute {label}(...).{node.attr}", node)
        value = value.item() if isinstance(value, np.generic) else value
        return self.constant(value, node)

    def fast_random_call(self, name: str, node, args, kws):
        """``np.random.NAME(literals)`` without a size: _random_lib.py's one-draw form of
        those parameters (written for native loops), when NumPy accepts them; else None."""
        func, valid = R.FAST[name]
        try:
            bound = inspect.signature(R.SIGNATURES[name]).bind(*args, **kws)
        except TypeError:
            return None
        values = {}
        variable = {}
        for k, v in bound.arguments.items():
            if k == "size":
                if not T._is_none(v):
                    return None
                continue
            neg = isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub)
            c = v.operand if neg else v
            number = None
            if isinstance(c, ast.Constant):
                number = c.value
            elif isinstance(c, (ast.Name, ast.Attribute)):
                number = self.static_object(c)  # a module-level constant (LAM = 0.8)
            if type(number) not in (int, float):
                variable[k] = v
                continue
            values[k] = -number if neg else number
        if variable:
            return self.variable_random_call(name, func, node, values, variable, args, kws)
        if not valid(**values):
            return None  # the general form raises NumPy's error
        params = inspect.signature(func).parameters
        defaults = inspect.signature(R.SIGNATURES[name]).parameters
        texts = [T.float_literal(float(values.get(p, defaults[p].default))) for p in params]
        site = self.site if self.site is not None else self.mark(node.lineno)
        # a float draw stays a float64 scalar (a float: item() would keep the loop off native
        # code); poisson's count is a Python int
        return f"{self.b.include_library(func, site)}({', '.join(texts)})"

    def variable_random_call(self, name: str, func, node, values, variable, args, kws):
        """``np.random.NAME(mu[i], s)``, parameters known only at run time: the one-draw
        form when every parameter is a number NumPy accepts (checked as the program runs),
        else the general form (arrays of parameters, NumPy's errors); in a loop, the
        general form is a branch that leaves the native code when taken. None when a
        parameter is not a plain expression (evaluated twice: no calls)."""
        if name not in R.FAST_CHECKS or not all(map(_side_effect_free, variable.values())):
            return None
        defaults = inspect.signature(R.SIGNATURES[name]).parameters
        temps, defines, checks = {}, [], []
        for p in inspect.signature(func).parameters:
            if p in variable:
                temps[p] = self.b.tmp(p)
                defines.append(f"define({temps[p]}, {self.expr(variable[p])})")
                checks.append(f"ndim({temps[p]}) == 0")
            else:
                temps[p] = T.float_literal(float(values.get(p, defaults[p].default)))
        checks.append("(" + R.FAST_CHECKS[name].format(**temps) + ")")
        site = self.site if self.site is not None else self.mark(node.lineno)
        fast = f"{self.b.include_library(func, site)}({', '.join(temps.values())})"
        general = self.random_call(name, node, args, kws, fast=False)
        return f"block({', '.join(defines)}, if({' && '.join(checks)}, {fast}, {general}))"

    def random_call(self, name: str, node, args, kws, fast=True) -> str:
        if name in R.FAST and fast:
            text = self.fast_random_call(name, node, args, kws)
            if text is not None:
                return text
        if name in R.LEGACY:  # a distribution written in NumPy terms (_random_lib.py)
            return self.library_call(R.LEGACY[name], node, args, kws)
        if name in R.REFUSED:
            self.unsupported(f"the NumPy distribution np.random.{name}", node,
                             "translated: " + ", ".join(sorted(R.LEGACY)))
        if name in ("rand", "randn"):
            if kws:
                self.unsupported(f"np.random.{name} with keyword arguments", node)
            dims = ", ".join(self.expr(a) for a in args)
            prim = "random_uniform" if name == "rand" else "random_normal"
            return f"{prim}(list({dims}))"
        if name == "standard_normal":
            size = args[0] if args else kws.get("size")
            shape = self.expr(size) if size is not None else "list()"
            return f"random_normal({shape})"
        if name in M.RANDOM_SPECS:
            spec = M.RANDOM_SPECS[name]
            if "size" in spec.params:
                given = len(args) > spec.params.index("size") or "size" in kws
                if not given:
                    kws = dict(kws)
                    kws["size"] = ast.Tuple(elts=[], ctx=ast.Load(), lineno=node.lineno)
            if name == "randint" and len(args) < 2 and "high" not in kws:
                # randint(n) draws from [0, n).
                kws = dict(kws)
                low = args[0] if args else kws.pop("low")
                args = []
                kws["low"] = ast.Constant(0, lineno=node.lineno)
                kws["high"] = low
            return self.emit_spec(spec, args, kws, node)
        if name == "shuffle":
            self.unsupported("np.random.shuffle() inside an expression", node,
                             "write it as a statement: np.random.shuffle(x) shuffles x in place "
                             "and gives None")
        self.unsupported(f"the NumPy function np.random.{name}", node)

    def generator_shuffle_stmt(self, call: ast.Call) -> str:
        """``rng.shuffle(x, axis=0)`` as a statement: x's contents permuted in place along
        the axis from the generator's stream (a list variable is rebound to its items in
        the new order; a view such as ``x[0]`` is written through)."""
        args, kws = self.call_args(call)
        recv = self.expr(call.func.value)
        arg = args[0] if args else kws.get("x")
        if arg is None:
            return self.library_call(R.rng_shuffled, call, args, kws, receiver=recv)  # its error
        x = self.b.tmp("x")
        others = {k: v for k, v in kws.items() if k != "x"}
        mismatch = self.signature_mismatch(R.rng_shuffled, [call, call] + args[1:], others)
        if mismatch is not None:
            return mismatch
        site = self.site if self.site is not None else self.mark(call.lineno)
        rest = self.plain_call("", args[1:], others, mangle_kw=True)[1:-1]
        texts = [f"{self.b.include_library(fn, site)}({recv}, {x}{', ' if rest else ''}{rest})"
                 for fn in (R.rng_shuffled_list, R.rng_shuffled)]
        text = (f"block(define({x}, {self.expr(arg)}), if(type({x}) == \"list\", {texts[0]}, "
                f"setitem({x}, {texts[1]}, \"...\")))")
        if isinstance(arg, ast.Name) and self.is_variable(arg.id):
            return self.rebind(arg.id, text, call)
        if isinstance(arg, (ast.Subscript, ast.Attribute)) or isinstance(arg, ast.Name):
            return text  # an array view or module-level array: written in place
        self.unsupported("rng.shuffle of a temporary value", call,
                         "shuffle a variable: NumPy shuffles in place and gives None")

    def math_call(self, name: str, node, args, kws) -> str:
        if name in M.MATH_LIBRARY:
            return self.library_call(SPECIAL["_math_" + name], node, args, kws)
        if kws:
            self.unsupported(f"math.{name} with keyword arguments", node)
        texts = [self.math_float(a, name) for a in args]
        if name in M.MATH_INT_RESULT:
            return f"astype({name}({', '.join(texts)}), \"int64\")"
        if name == "log" and len(texts) == 2:
            return f"(log({texts[0]}) / log({texts[1]}))"
        if name in M.MATH_RENAMES:
            return f"{M.MATH_RENAMES[name]}({', '.join(texts)})"
        self.unsupported(f"the function math.{name}", node)

    def math_float(self, a, name: str) -> str:
        """An argument of ``math.NAME`` as Python's float: math's functions convert
        theirs with float() and compute in double (``math.sqrt(np.float32(2))`` is
        1.4142135623730951, not NumPy's float32 root; ``math.pow(2, 3)`` is 8.0), as
        float() does it (an array of one or more dimensions: Python's TypeError)."""
        if isinstance(a, ast.Constant) and type(a.value) in (int, float):
            return T.float_literal(float(a.value))
        return self.inline("python_number", self.expr(a), T.string_literal("float64"),
                           label=f"math.{name}")

    def method_call(self, f: ast.Attribute, node, args, kws) -> str:
        attr = f.attr
        recv = self.expr(f.value)
        if attr in M.INPLACE_METHODS:
            self.unsupported(
                f"the in-place method .{attr}() inside an expression",
                node,
                f"write it as a statement on a variable: x.{attr}(...)",
            )
        if attr in M.MUTATING_LIST_METHODS:
            self.unsupported(
                f"the list/dict method .{attr}() inside an expression",
                node,
                f"write it as a statement on a variable: x.{attr}(...)",
            )
        if attr == "setdefault" and isinstance(f.value, ast.Name) and self.is_variable(f.value.id):
            # d.setdefault(k, v): d rebound with k set to v when missing; d[k] the value
            key, default = self.setdefault_args(node)
            k, d = self.b.tmp("k"), self.expr(f.value)
            rebound = self.rebind(f.value.id, f"setitem({d}, {default}, {k})", node)
            return (f"block(define({k}, {key}), if(!contains({d}, {k}), {rebound}), "
                    f"getitem({d}, {k}))")
        if attr == "pop":
            return self.pop_call(f, node, args, kws)
        if attr == "format" and isinstance(f.value, ast.Constant) and isinstance(f.value.value, str):
            return self.str_format(f.value.value, node, args, kws)
        if attr == "copy" and not args and not kws:
            return f"copy_value({recv})"
        if attr in M.VALUE_METHODS:
            return self.emit_spec(M.VALUE_METHODS[attr], args, kws, node, receiver=recv)
        if attr in M.STRING_METHODS:
            return self.emit_spec(M.STRING_METHODS[attr], args, kws, node, receiver=recv)
        if attr == "item":
            if kws:
                self.unsupported(".item() with keyword arguments", node)
            if args:  # x.item(k): the k-th element in C order; x.item(i, j): x[i, j]
                if len(args) == 1:
                    target = ast.Subscript(value=ast.Call(
                        func=ast.Attribute(value=f.value, attr="ravel", ctx=ast.Load()),
                        args=[], keywords=[]), slice=args[0], ctx=ast.Load())
                else:
                    target = ast.Subscript(value=f.value, slice=ast.Tuple(elts=list(args),
                                                                          ctx=ast.Load()),
                                           ctx=ast.Load())
                recv = self.expr(ast.copy_location(ast.fix_missing_locations(
                    ast.copy_location(target, node)), node))
            return f"item({recv})"
        if attr == "tolist":
            self.b.helper("__to_list")
            self.b.helper("__py_type_name")
            return self.inline("to_list", recv)
        if attr == "diagonal":
            return self.diagonal_call(recv, ".diagonal()", node, args, kws)
        if attr in M.METHOD_SPECS:
            return self.emit_spec(M.METHOD_SPECS[attr], args, kws, node, receiver=recv)
        if attr in M.GENERATOR_SPECS:
            # rng.random(...) on a generator of np.random.default_rng.
            return self.emit_spec(M.GENERATOR_SPECS[attr], args, kws, node, receiver=recv)
        if attr in R.GENERATOR:  # rng.exponential(...): _random_lib.py, the generator first
            return self.library_call(R.GENERATOR[attr], node, args, kws, receiver=recv)
        if attr == "shuffle":
            self.unsupported("rng.shuffle() inside an expression", node,
                             "write it as a statement: rng.shuffle(x) shuffles x in place and "
                             "gives None")
        if attr in R.REFUSED:
            self.unsupported(f"the Generator method rng.{attr}()", node,
                             "translated: " + ", ".join(sorted(set(R.GENERATOR)
                                                              | set(M.GENERATOR_SPECS))))
        self.unsupported(f"the method .{attr}()", node)

    def str_format(self, template: str, node, args, kws) -> str:
        """``"{} = {:.3f}".format(a, b)`` on a literal template: the same
        concat of literal text, str(), format() and repr() as an f-string."""
        try:
            pieces = list(string.Formatter().parse(template))
        except ValueError as e:
            raise ValueError(f"{e} (at {self.where(node)})") from None
        parts, auto, used = [], 0, None
        for literal, field, spec, conversion in pieces:
            if literal:
                parts.append(T.string_literal(literal))
            if field is None:
                continue
            if field == "" or field.isdigit():
                numbering = "automatic" if field == "" else "manual"
                if numbering != (used or numbering):
                    a, b = ("automatic", "manual") if used == "automatic" else ("manual", "automatic")
                    raise ValueError(
                        f"cannot switch from {a} field numbering to {b} field specification "
                        f"(at {self.where(node)})"
                    )
                used = numbering
            if field == "":
                key, auto = auto, auto + 1
            elif field.isdigit():
                key = int(field)
            elif field.isidentifier():
                key = field
            else:
                self.unsupported(f"the format field '{{{field}}}' (attributes or indices)", node)
            if isinstance(key, int):
                if key >= len(args):
                    raise IndexError(
                        f"Replacement index {key} out of range for positional args tuple "
                        f"(at {self.where(node)})"
                    )
                value = self.expr(args[key])
            else:
                if key not in kws:
                    raise KeyError(f"'{key}' (at {self.where(node)})")
                value = self.expr(kws[key])
            if conversion == "a":
                self.unsupported("the !a conversion (ascii) in str.format", node)
            if conversion in ("r", "s"):
                value = f"{'repr' if conversion == 'r' else 'str'}({value})"
            if "{" in (spec or ""):
                self.unsupported("a nested field in a str.format specification", node)
            if spec:
                parts.append(f"format({value}, {T.string_literal(spec)})")
            else:
                parts.append(value if conversion else f"str({value})")
        if not parts:
            return '""'
        return f"concat({', '.join(parts)})"

    def pop_call(self, f: ast.Attribute, node, args, kws) -> str:
        """``xs.pop(i)`` / ``d.pop(k, default)``: pop gives tuple(new value,
        item); the variable is rebound to the new value and the item is the
        expression's value."""
        if not (isinstance(f.value, ast.Name) and self.is_variable(f.value.id)):
            self.unsupported(".pop() on something other than a variable", node)
        if kws or len(args) > 2:
            self.unsupported(".pop() with these arguments", node)
        parts = [self.expr(f.value)] + [self.expr(a) for a in args[:1]]
        if len(args) == 2:
            parts += [f"default={self.expr(args[1])}", "has_default=true"]
        t = self.b.tmp()
        rebound = self.rebind(f.value.id, f"getitem({t}, 0)", node)
        return f"block(define({t}, pop({', '.join(parts)})), {rebound}, getitem({t}, 1))"

    def list_method_stmt(self, recv: ast.Name, attr: str, call: ast.Call) -> str:
        """A statement calling a method that changes a list or dict
        (``xs.insert(0, v)``, ``d.update(e)``): the variable is rebound to the
        primitive's new value."""
        args, kws = self.call_args(call)
        if kws:
            self.unsupported(f".{attr}() with keyword arguments", call)
        x = self.name(recv.id, recv)
        texts = [self.expr(a) for a in args]
        want = {"insert": 2, "reverse": 0, "update": 1, "remove": 1, "clear": 0}[attr]
        if len(texts) != want:
            self.unsupported(f".{attr}() with {len(texts)} arguments", call)
        return self.rebind(recv.id, f"{M.MUTATING_LIST_METHODS[attr]}({', '.join([x] + texts)})", call)

    def attribute(self, node: ast.Attribute) -> str:
        info = self.info_constant(node)
        if info is not None:
            return info
        obj = self.static_object(node)
        if obj is not T._NO:
            return self.value_text(obj, node, ast.unparse(node))
        base = self.static_object(node.value)
        if base is T._tessera_module():
            if node.attr in T.primitive_names():
                return node.attr
            self.unsupported(f"tessera.{node.attr}", node)
        x = self.expr(node.value)
        attr = node.attr
        if attr in ("shape", "ndim", "size"):
            return f"{attr}({x})"
        if attr == "T":
            return f"transpose({x})"
        if attr == "dtype":
            return f"dtype_name({x})"
        if attr in ("real", "imag"):
            return f"{attr}({x})"
        if attr == "itemsize":
            return f"itemsize({x})"
        if attr == "nbytes":
            return f"(size({x}) * itemsize({x}))"
        self.unsupported(f"the attribute .{attr}", node)
