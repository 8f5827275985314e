"""How expressions are translated: names and constants, operators and
comparisons, subscripts and slices, f-strings, lambdas and comprehensions, and
the values of globals and closure variables a function reads.

A mixin of ``_translate.FunctionTranslator`` (statements and functions are
there; calls in ``_calls.py``).
"""

from __future__ import annotations

import ast
import builtins
import inspect

import numpy as np

from . import _numpy_map as M
from . import _translate as T


class ExpressionsMixin:
    """The expression-translating methods of FunctionTranslator."""

    def expr(self, node) -> str:
        # Nesting is bounded as the core's parser bounds it: past the limit,
        # a clear error at the line rather than Python's RecursionError.
        self._depth += 1
        try:
            if self._depth > T.MAX_EXPRESSION_DEPTH:
                raise T._too_deep(f"more than {T.MAX_EXPRESSION_DEPTH}", self.where(node))
            return self._expr_at_line(node)
        except RecursionError:
            # Python's own limit, reached first when statements nest deeply too.
            if self._depth > 1:
                raise
            raise T._too_deep("too", self.where(node)) from None
        finally:
            self._depth -= 1

    def _expr_at_line(self, node) -> str:
        line = getattr(node, "lineno", None)
        if line is not None and line != self.line:
            saved = self.line
            self.line = line
            try:
                text = self._expr(node)
            finally:
                self.line = saved
            return self.mark(line) + text + self.mark(saved)
        return self._expr(node)

    def _expr(self, node) -> str:
        kind = type(node)
        if kind in T._UNSUPPORTED_EXPRS:
            self.unsupported(T._UNSUPPORTED_EXPRS[kind], node)
        if isinstance(node, ast.Constant):
            return self.constant(node.value, node)
        if isinstance(node, ast.Name):
            return self.name(node.id, node)
        if isinstance(node, ast.BinOp):
            if type(node.op) in T._CHAIN_LEVEL:
                return self.chain(node)
            return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand)
            if isinstance(node.op, ast.USub):
                c = T._constant_number(node.operand)
                if c is not None and isinstance(node.operand, ast.Constant):
                    return self.constant(-c, node)
                return f"(-{operand})"
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(node.op, ast.Not):
                return f"not_({operand})"
            return f"invert({operand})"  # ~: bitwise on ints, logical on bools
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + op.join(self.expr(v) for v in node.values) + ")"
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.IfExp):
            return f"if({self.expr(node.test)}, {self.expr(node.body)}, {self.expr(node.orelse)})"
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            concat = self.index_concatenation(node)
            if concat is not None:
                return concat
            if self.is_index_tuple(node.slice):
                return self.inline("index_tuple", self.expr(node.value), self.expr(node.slice))
            return f"getitem({', '.join([self.expr(node.value)] + self.index(node.slice))})"
        if isinstance(node, ast.Tuple):
            return f"tuple({', '.join(self.expr(e) for e in node.elts)})"
        if isinstance(node, ast.List):
            return f"list({', '.join(self.expr(e) for e in node.elts)})"
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                self.unsupported("dict unpacking (**d)", node)
            items = []
            for k, v in zip(node.keys, node.values):
                items += [self.expr(k), self.expr(v)]
            return f"dict({', '.join(items)})"
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node)
        if isinstance(node, ast.Lambda):
            return self.lambda_expr(node)
        if isinstance(node, ast.JoinedStr):
            return self.fstring(node)
        if isinstance(node, ast.NamedExpr):
            return self.rebind_walrus(node)
        if isinstance(node, ast.Slice):
            return self.slice_text(node)
        self.unsupported(f"the expression '{type(node).__name__}'", node)

    def constant(self, v, node) -> str:
        if v is None:
            return "nil"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, int):
            try:
                return T.int_literal(v)
            except OverflowError as e:
                self.unsupported(f"the integer constant {v} ({e})", node)
        if isinstance(v, float):
            return T.float_literal(v)
        if isinstance(v, str):
            return T.string_literal(v)
        if v is Ellipsis:
            return '"..."'
        if isinstance(v, complex):
            return f"complex({T.float_literal(v.real)}, {T.float_literal(v.imag)})"
        self.unsupported(f"the constant {v!r} of type {type(v).__name__}", node)

    def chain(self, node) -> str:
        """``a + b - c ...`` (operators of one precedence): written flat, one
        level of nesting for the core's parser, translated without recursing
        along the chain; the core folds it left to right as Python does."""
        first, steps = T._chain_spine(node)
        parts = [self.expr(first)]
        for op, right in steps:
            parts += [T._BINOPS[type(op)], self.expr(right)]
        return "(" + " ".join(parts) + ")"

    def binop(self, op, a: str, b: str, node) -> str:
        if type(op) in T._BINOPS:
            return f"({a} {T._BINOPS[type(op)]} {b})"
        if type(op) in T._BINOP_PRIMS:
            return f"{T._BINOP_PRIMS[type(op)]}({a}, {b})"
        self.unsupported(f"the operator {type(op).__name__}", node)

    def compare(self, node: ast.Compare) -> str:
        if len(node.ops) == 1:
            op, left, right = node.ops[0], node.left, node.comparators[0]
            special = self.special_compare(op, left, right, node)
            if special is not None:
                return special
            return self.cmp_text(op, self.expr(left), self.expr(right), node)
        # a < b < c: each middle operand is evaluated once (kept in a hidden variable).
        operands = [node.left] + node.comparators
        parts = []
        a = self.expr(operands[0])
        for i, op in enumerate(node.ops):
            b = self.expr(operands[i + 1])
            if i + 1 < len(node.ops) and not T._is_simple(b):
                tmp = self.b.tmp()
                parts.append(self.cmp_text(op, a, f"define({tmp}, {b})", node))
                a = tmp
            else:
                parts.append(self.cmp_text(op, a, b, node))
                a = b
        return "(" + " && ".join(parts) + ")"

    def cmp_text(self, op, a: str, b: str, node) -> str:
        if isinstance(op, (ast.In, ast.NotIn)):
            # `not in`: Python's not_ of contains' Python bool (native code has not_).
            c = f"contains({b}, {a})"
            return c if isinstance(op, ast.In) else f"not_({c})"
        if isinstance(op, (ast.Is, ast.IsNot)):
            self.unsupported("'is' comparison other than with None", node)
        return f"({a} {T._CMPOPS[type(op)]} {b})"

    def special_compare(self, op, left, right, node):
        """``x is None`` and dtype comparisons (shapes are tuples: ``==`` compares them)."""
        if isinstance(op, (ast.Is, ast.IsNot)) or (
            isinstance(op, (ast.Eq, ast.NotEq)) and (T._is_none(left) or T._is_none(right))
        ):
            if T._is_none(right) or T._is_none(left):
                other = left if T._is_none(right) else right
                text = f"is_nil({self.expr(other)})"
                return text if isinstance(op, (ast.Is, ast.Eq)) else f"(!{text})"
            return None
        if isinstance(op, (ast.Eq, ast.NotEq)):
            a, b = self.dtype_code(left), self.dtype_code(right)
            if a is not None and b is not None:
                return f"({a} {'==' if isinstance(op, ast.Eq) else '!='} {b})"
        return None

    def dtype_code(self, node):
        """The text of a dtype operand of ``==`` (``x.dtype == np.float32``): the
        dtype's name as a string, or None when `node` is not a dtype."""
        if isinstance(node, ast.Attribute) and node.attr == "dtype":
            if self.static_object(node) is T._NO:
                return f"dtype_name({self.expr(node.value)})"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = M.DTYPE_NAMES.get(node.value, node.value)
            return T.string_literal(name) if name in M.DTYPE_NAMES.values() else None
        obj = self.static_object(node) if isinstance(node, (ast.Name, ast.Attribute)) else T._NO
        if obj is not T._NO:
            name = T.dtype_name_of(obj)
            if name is not None:
                return T.string_literal(name)
        return None

    def index(self, node) -> list:
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        out = []
        for it in items:
            if isinstance(it, ast.Starred):
                self.unsupported("star-args (*x) in an index", it)
            out.append(self.expr(it))
        return out

    def slice_text(self, node: ast.Slice) -> str:
        bounds = (node.lower, node.upper, node.step)
        parts = [self.expr(p) if p is not None else "nil" for p in bounds]
        return f"slice({', '.join(parts)})"

    def fstring(self, node: ast.JoinedStr) -> str:
        """concat of the literal parts and each field: str(x), format(x, spec)
        with the spec itself an f-string, repr(x) for !r."""
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(T.string_literal(v.value))
            elif isinstance(v, ast.FormattedValue):
                value = self.expr(v.value)
                conversion = chr(v.conversion) if v.conversion > 0 else None
                if conversion == "a":
                    self.unsupported("the !a conversion (ascii) in an f-string", v)
                if conversion is not None:
                    value = f"{'repr' if conversion == 'r' else 'str'}({value})"
                if v.format_spec is not None:
                    parts.append(f"format({value}, {self.fstring(v.format_spec)})")
                else:
                    parts.append(value if conversion is not None else f"str({value})")
        if not parts:
            return '""'
        if len(parts) == 1 and parts[0].startswith('"'):
            return parts[0]
        return f"concat({', '.join(parts)})"

    def rebind_walrus(self, node: ast.NamedExpr) -> str:
        name = node.target.id
        value = self.expr(node.value)
        if not self.is_variable(name) and self.scope is not None:
            self.scope.locals.add(name)
        return self.rebind(name, value, node)

    def lambda_expr(self, node: ast.Lambda) -> str:
        params = self.params(node.args)
        outer_scope, outer_renames = self.scope, self.renames
        self.scope = T._Scope(outer_scope, self.param_names(node.args))
        self.renames = []
        try:
            body = self.expr(node.body)
        finally:
            self.scope, self.renames = outer_scope, outer_renames
        return f"lambda({', '.join(params + [body])})"

    def comprehension(self, node) -> str:
        """A list comprehension as a loop that appends to a hidden list (a dict
        comprehension: sets items of a hidden dict, the key evaluated first, as
        Python); its variables are hidden names, so they do not leak (as in Python 3)."""
        acc = self.b.tmp("acc")
        frame: dict = {}

        def level(i) -> list:
            if i == len(node.generators):
                if isinstance(node, ast.DictComp):
                    k = self.b.tmp("k")
                    return [f"define({k}, {self.expr(node.key)})",
                            f"define({acc}, setitem({acc}, {self.expr(node.value)}, {k}))"]
                return [f"define({acc}, append({acc}, {self.expr(node.elt)}))"]
            g = node.generators[i]
            if g.is_async:
                self.unsupported("async comprehension", node)

            def bind_names():
                for n in ast.walk(g.target):
                    if isinstance(n, ast.Name):
                        frame[n.id] = self.b.tmp("v")

            def body():
                inner = level(i + 1)
                if g.ifs:
                    conds = " && ".join(self.expr(c) for c in g.ifs)
                    return [f"if({conds}, {self.block(inner)})"]
                return inner

            return self.for_loop(g.target, g.iter, body, node, before_target=bind_names)

        outermost = not self.break_flags and self.comp_nesting == 0
        self.renames.append(frame)
        self.comp_nesting += 1
        try:
            loops = level(0)
        finally:
            self.comp_nesting -= 1
            self.renames.pop()
        empty = "dict()" if isinstance(node, ast.DictComp) else "list()"
        made = [f"define({acc}, {empty})"] + loops
        if outermost and not isinstance(node, ast.DictComp):
            # Outside any loop, a list comprehension is the body of a loop of
            # one turn, so that the fast path runs it whole (the list made, its
            # bounds, its loops: one native call) rather than the general path
            # its first statements.
            return self.block([f"while(true, {self.block(made + ['break()'])})", acc])
        return self.block(made + [acc])

    # ------------------------------------------------------------------ names and objects

    def is_variable(self, name: str) -> bool:
        if any(name in f for f in self.renames):
            return True
        scope = self.scope
        while scope is not None:
            if name in scope.globals:
                return False
            if name in scope.locals:
                return True
            scope = scope.parent
        return False

    def name(self, name: str, node) -> str:
        if self.is_variable(name):
            return self.local_name(name)
        return self.value_text(self.global_value(name, node), node, name)

    def global_value(self, name: str, node):
        if name in self._closure:
            return self._closure[name]
        g = self.func.__globals__
        if name in g:
            return g[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NameError(f"name '{name}' is not defined (at {self.where(node)})")

    def static_object(self, node):
        """The Python object a global name or attribute chain denotes
        (``np``, ``np.linalg.norm``, ``CONFIG.lr``), or T._NO for run-time values."""
        if isinstance(node, ast.Name):
            if self.is_variable(node.id):
                return T._NO
            return self.global_value(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self.static_object(node.value)
            if base is T._NO or isinstance(base, (np.ndarray, np.generic, int, float, complex, str)):
                return T._NO
            if isinstance(base, (list, tuple, dict)) or T._is_jit(base):
                return T._NO
            try:
                return getattr(base, node.attr)
            except AttributeError:
                if base is T._tessera_module():
                    return T._NO
                raise AttributeError(
                    f"'{getattr(base, '__name__', type(base).__name__)}' has no attribute "
                    f"'{node.attr}' (at {self.where(node)})"
                ) from None
        return T._NO

    def value_text(self, v, node, name: str = "") -> str:
        """The text of a Python object captured by value."""
        if v is None or v is Ellipsis or isinstance(v, (bool, int, float, str)):
            return self.constant(v, node)
        if isinstance(v, np.generic):
            return self.constant(v.item(), node)
        if isinstance(v, np.ndarray):
            return self.b.constant(v)
        if isinstance(v, (tuple, list)):
            kind = "tuple" if isinstance(v, tuple) else "list"
            return f"{kind}({', '.join(self.value_text(x, node, name) for x in v)})"
        if isinstance(v, dict):
            items = []
            for k, x in v.items():
                items += [self.value_text(k, node, name), self.value_text(x, node, name)]
            return f"dict({', '.join(items)})"
        if T._is_jit(v):
            return self.b.include(v)
        if self.is_translatable_helper(v):
            return self.b.include(v)
        dt = T.dtype_name_of(v)
        if dt is not None:
            return T.string_literal(dt)
        if inspect.ismodule(v):
            self.unsupported(f"the module '{v.__name__}' used as a value", node)
        ns, fname = T._numpy_function(v)
        if ns is not None and fname in T.primitive_names():
            return fname
        self.reject_foreign_function(v, node)
        label = f"'{name}' " if name else ""
        self.unsupported(
            f"the Python object {label}of type {type(v).__name__}",
            node,
            "only numbers, strings, tuples, NumPy arrays and functions can be used",
        )

    def index_concatenation(self, node: ast.Subscript):
        """``np.r_[...]`` / ``np.c_[...]``: NumPy's index-style concatenation, the
        translation of its items joined (None when node is another subscript).
        Items: arrays and numbers, and slices ``a:b:s`` as ``np.arange(a, b, s)``
        (a complex step ``a:b:nj`` as ``np.linspace(a, b, n)``); np.r_ joins them
        along the first axis, np.c_ along the last, 1-d items as columns."""
        if not isinstance(node.value, (ast.Name, ast.Attribute)):
            return None
        obj = self.static_object(node.value)
        if obj is not np.r_ and obj is not np.c_:
            return None
        label = "np.r_" if obj is np.r_ else "np.c_"
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        parts = []
        for item in items:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                self.unsupported(f"{label} with a directive string ({item.value!r})", node)
            if isinstance(item, ast.Slice):
                if item.upper is None:
                    self.unsupported(f"{label} with a slice without its end", node)
                start = self.expr(item.lower) if item.lower is not None else "0"
                stop = self.expr(item.upper)
                step = item.step
                if step is not None and isinstance(step, ast.Constant) and \
                        isinstance(step.value, complex):
                    parts.append(f"linspace({start}, {stop}, {int(abs(step.value))})")
                elif step is not None:
                    parts.append(f"arange({start}, {stop}, {self.expr(step)})")
                else:
                    parts.append(f"arange({start}, {stop})")
            else:
                parts.append(f"atleast_1d({self.expr(item)})")
        if obj is np.r_:
            return f"concatenate(list({', '.join(parts)}), axis=0)"
        cols = [self.inline("c_column", p) for p in parts]
        return f"concatenate(list({', '.join(cols)}), axis=-1)"

    def is_translatable_helper(self, v) -> bool:
        """A plain Python function (or lambda) of the module being translated:
        it is translated too, as Numba compiles the callees of an @njit
        function, so only the entry point needs the decorator."""
        return (
            inspect.isfunction(v)
            and not T._is_jit(v)
            and getattr(v, "__module__", None) == getattr(self.func, "__module__", None)
            and T._numpy_function(v)[0] is None
        )

    def reject_foreign_function(self, v, node, label=None):
        """A plain function of another module: not translated (it may be
        anything), a clear error instead."""
        if inspect.isfunction(v) and T._numpy_function(v)[0] is None:
            label = label or v.__qualname__
            self.unsupported(
                f"calling the Python function '{label}' of the module '{v.__module__}'",
                node,
                "plain functions of the jit function's own module are translated "
                "automatically; decorate functions of other modules with @tessera.jit",
            )

    def builtin_called(self, call: ast.Call):
        """The name of the builtin a call calls (``range``, ``len``, ...), or None."""
        f = call.func
        if isinstance(f, ast.Name) and not self.is_variable(f.id):
            try:
                obj = self.global_value(f.id, f)
            except NameError:
                return None
            if getattr(builtins, f.id, None) is obj:
                return f.id
        return None


# --------------------------------------------------------------------------- utilities
