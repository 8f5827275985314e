"""Assignments and statements that change a value in place: ``x = v``,
unpacking, ``x[i] = v`` (through views and nested subscripts), ``x op= v``,
``x.append(v)``-like methods, ``np.random.shuffle(x)`` and the expansions of
INLINE (_templates.py) they use.

A mixin of ``_translate.FunctionTranslator``.
"""

from __future__ import annotations

import ast
import re

import numpy as np

from . import _numpy_map as M
from . import _translate as T


class AssignmentsMixin:
    """Assignments of FunctionTranslator (names resolved in its scopes)."""

    def local_name(self, name: str) -> str:
        for frame in reversed(self.renames):
            if name in frame:
                return frame[name]
        return T.mangle(name)

    def rebind(self, name: str, value: str, node) -> str:
        """Assigns ``value`` to an existing variable ``name`` (x[i] = v, x.append(v))."""
        for frame in reversed(self.renames):
            if name in frame:
                return f"define({frame[name]}, {value})"
        scope = self.scope
        if scope is not None and name in scope.locals:
            return f"define({T.mangle(name)}, {value})"
        while scope is not None:
            if name in scope.locals:
                return f"store({T.mangle(name)}, {value})"
            scope = scope.parent
        self.unsupported(f"changing the module-level variable '{name}'", node)

    def assign(self, target, value_node) -> list:
        if (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value_node, (ast.Tuple, ast.List))
            and len(target.elts) == len(value_node.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + value_node.elts)
        ):
            # a, b = b, a: every value first, then the targets.
            temps, out = [], []
            for v in value_node.elts:
                t = self.b.tmp()
                temps.append(t)
                out.append(f"define({t}, {self.expr(v)})")
            for t, tmp in zip(target.elts, temps):
                out.extend(self.assign_text(t, tmp))
            return out
        return self.assign_text(target, self.expr(value_node))

    def assign_text(self, target, value: str) -> list:
        if isinstance(target, ast.Name):
            return [f"define({self.local_name(target.id)}, {T._tuple_text(value)})"]
        if isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                return self.starred_assign(target, value)
            if isinstance(value, tuple):  # the element of a zip / enumerate
                if len(value) != len(target.elts):
                    self.unsupported("unpacking a zip/enumerate element into another count", target)
                out = []
                for t, v in zip(target.elts, value):
                    out.extend(self.assign_text(t, v))
                return out
            # unpack checks the count as Python does (too many / not enough values).
            tmp = self.b.tmp()
            out = [f"define({tmp}, unpack({value}, {len(target.elts)}))"]
            for i, t in enumerate(target.elts):
                out.extend(self.assign_text(t, f"getitem({tmp}, {i})"))
            return out
        value = T._tuple_text(value)
        if isinstance(target, ast.Subscript):
            return [self.setitem(target, value)]
        if isinstance(target, ast.Attribute):
            if target.attr in ("real", "imag"):
                # z.real = v: a write through the view, as NumPy's.
                return [f"setitem({target.attr}({self.expr(target.value)}), {value}, \"...\")"]
            self.unsupported(f"assignment to the attribute '.{target.attr}'", target)
        self.unsupported(f"assignment to {type(target).__name__}", target)

    def setitem(self, target: ast.Subscript, value: str) -> str:
        """x[i] = v: setitem writes into an array x in place (every view of
        it sees the write) and gives x; for a list it gives the new list, so
        the variable is rebound to the result either way.  x[i][j] = v writes
        through the view x[i] (then x[i] = that view, a no-op for arrays)."""
        base = target.value
        if self.is_index_tuple(target.slice):
            self.unsupported("assigning through an np.ndindex tuple (x[idx] = v)", target,
                             "unpack it: for i, j in np.ndindex(...): x[i, j] = v")
        new = f"setitem({', '.join([self.expr(base), value] + self.index(target.slice))})"
        if isinstance(base, ast.Name):
            if not self.is_variable(base.id) and isinstance(
                self.global_value(base.id, base), np.ndarray
            ):
                # A module-level array: written in place (it is passed by
                # reference), as NumPy writes into it.
                return new
            return self.rebind(base.id, new, target)
        if isinstance(base, ast.Subscript):
            return self.setitem(base, new)
        if isinstance(base, ast.Call) and self.is_diagonal_call(base):
            raise ValueError(
                "[setitem] assignment destination is read-only: the diagonal of an array is a "
                f"read-only view in NumPy (at {self.where(target)})"
            )
        if isinstance(base, (ast.Attribute, ast.Call)):
            # x.T[0] = v, np.real(x)[...] = v: a write through a view.
            return new
        self.unsupported("assignment into this kind of subscript", target)

    def augop(self, op, a: str, b: str, node) -> str:
        if type(op) not in T._AUG_PRIMS:
            self.unsupported(f"the operator {type(op).__name__}", node)
        return f"{T._AUG_PRIMS[type(op)]}({a}, {b})"

    def aug_assign(self, node: ast.AugAssign) -> list:
        t = node.target
        if isinstance(t, ast.Name):
            current = self.name(t.id, t)
            return [self.rebind(t.id, self.augop(node.op, current, self.expr(node.value), node), t)]
        if isinstance(t, ast.Subscript):
            current = f"getitem({', '.join([self.expr(t.value)] + self.index(t.slice))})"
            return [self.setitem(t, self.augop(node.op, current, self.expr(node.value), node))]
        self.unsupported("augmented assignment to this target", node)

    def expr_stmt(self, value) -> list:
        if isinstance(value, ast.Constant):
            return []  # a bare string (docstring-like) or number
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)
        ):
            recv, attr = value.func.value, value.func.attr
            if self.is_variable(recv.id) and attr in M.INPLACE_METHODS:
                return [self.inplace_method(recv, attr, value)]
            if self.is_variable(recv.id) and attr in M.MUTATING_LIST_METHODS:
                return [self.list_method_stmt(recv, attr, value)]
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and
                value.func.attr in ("append", "extend")):
            inner = self.inner_list_stmt(value)  # d[k].append(v), d.setdefault(k, []).append(v)
            if inner is not None:
                return [inner]
        if isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute)):
            obj = self.static_object(value.func)
            label = self.shuffle_label(obj) if obj is not T._NO else None
            if label is not None:
                return [self.shuffle_stmt(value, label)]
            if obj is T._NO and isinstance(value.func, ast.Attribute) and value.func.attr == "shuffle":
                return [self.generator_shuffle_stmt(value)]  # rng.shuffle(x): _calls.py
        return [self.expr(value)]

    @staticmethod
    def shuffle_label(obj):
        """'np.random.shuffle' or 'random.shuffle' when ``obj`` is one, else None."""
        if T._numpy_function(obj) == ("random", "shuffle"):
            return "np.random.shuffle"
        if T._python_random_name(obj) == "shuffle":
            return "random.shuffle"
        return None

    def inline(self, name: str, *values: str, label: str = "") -> str:
        """The expansion T.INLINE[name] of ``values`` ($1, $2, ...), its
        temporaries ($x) renamed apart; ``$L`` is the label named in errors."""
        text = T.INLINE[name].replace("$L", label).replace("$E", T.ERROR_TAG)
        for i in range(len(values), 0, -1):  # $10 before $1
            text = text.replace(f"${i}", f"({values[i - 1]})")
        temps: dict = {}
        return re.sub(r"\$([a-z]\w*)",
                      lambda m: temps.setdefault(m.group(1), self.b.tmp(m.group(1))), text)

    def shuffle_stmt(self, call: ast.Call, label: str) -> str:
        """``np.random.shuffle(x)``: x shuffled in place along its first axis
        (a variable, a module-level array, or a view such as ``x[0]`` or
        ``x.T``, written through)."""
        arg = self.single_arg(call, label)
        if isinstance(arg, ast.Name) and self.is_variable(arg.id):
            return self.rebind(arg.id, self.inline("shuffle", self.expr(arg)), call)
        if isinstance(arg, ast.Name) and not isinstance(self.global_value(arg.id, arg), np.ndarray):
            self.unsupported(f"{label} of the module-level variable '{arg.id}'", call,
                             "only a module-level array can be shuffled in place")
        if isinstance(arg, (ast.Name, ast.Subscript, ast.Attribute)):
            # an array view (or module array): written in place
            return self.inline("shuffle_view", self.expr(arg), label=label)
        self.unsupported(f"{label} of a temporary value", call,
                         "shuffle a variable: NumPy shuffles in place and gives None")

    def inplace_method(self, recv: ast.Name, attr: str, call: ast.Call) -> str:
        x = self.name(recv.id, recv)
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            self.unsupported("star-args (*x / **kw) in a call", call)
        args = [self.expr(a) for a in call.args]
        kws = {k.arg: self.expr(k.value) for k in call.keywords}
        if attr == "append":
            new = f"append({x}, {args[0]})"
        elif attr == "extend":
            new = f"extend({x}, {args[0]})"
        elif attr == "fill":
            new = f'setitem({x}, {args[0]}, "...")'
        else:  # sort: in place, as ndarray.sort
            if "kind" in kws:
                del kws["kind"]
            axis = args[0] if args else kws.get("axis", "-1")
            new = f'setitem({x}, sort({x}, axis={axis}), "...")'

        return self.rebind(recv.id, new, call)

    def single_arg(self, call: ast.Call, what: str):
        if len(call.args) != 1 or call.keywords:
            self.unsupported(f"{what} with other than one argument", call)
        return call.args[0]
