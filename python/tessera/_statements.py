"""Statements of NumPy users' code the translator rewrites into others: a list
grown inside a dict or list (``d[k].append(v)``, ``d.setdefault(k, []).append(v)``),
starred assignment, ``for idx, v in np.ndenumerate(x)``, loops with an else
clause, and ``del`` (``d.pop(k)``, a slice assigned ``[]``).

A mixin of ``_translate.FunctionTranslator``.
"""

from __future__ import annotations

import ast

import numpy as np

from . import _translate as T


def _read_after(fdef, stmt, name: str):
    """A read of ``name`` in ``fdef`` after ``del name`` (``stmt``): on a later line,
    or anywhere in a loop holding ``stmt`` (its next turn); None if there is none."""
    loops = [n for n in ast.walk(fdef) if isinstance(n, (ast.For, ast.While))
             and any(s is stmt for s in ast.walk(n))]
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            if n.lineno > stmt.lineno or any(
                    any(m is n for m in ast.walk(loop)) for loop in loops):
                return n
    return None


class StatementsMixin:
    """The statement-rewriting methods of FunctionTranslator."""

    def del_target(self, target, node) -> list:
        """``del d[k]`` / ``del xs[i]``: ``d.pop(k)`` (KeyError and IndexError as
        Python's); ``del xs[a:b]``: ``xs[a:b] = []``; ``del xs[a:b:k]``: the list
        without the items the slice selects (INLINE["del_step"]); ``del x`` of a variable not read
        after it: nothing to do (a program frees values itself)."""
        if isinstance(target, (ast.Tuple, ast.List)):
            return [t for e in target.elts for t in self.del_target(e, node)]
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            if isinstance(target.slice, ast.Slice):
                if target.slice.step is not None:
                    # every k-th item dropped (a negative step too), as Python
                    self.b.helper("__py_type_name")
                    text = self.inline("del_step", self.expr(target.value),
                                       self.slice_text(target.slice))
                    return [self.rebind(target.value.id, text, node)]
                new = ast.Assign(targets=[ast.Subscript(value=target.value, slice=target.slice,
                                                        ctx=ast.Store())],
                                 value=ast.List(elts=[], ctx=ast.Load()))
            else:
                new = ast.Expr(value=ast.Call(
                    func=ast.Attribute(value=ast.Name(id=target.value.id, ctx=ast.Load()),
                                       attr="pop", ctx=ast.Load()),
                    args=[target.slice], keywords=[]))
            for sub in ast.walk(new):
                if getattr(sub, "lineno", None) is None and hasattr(sub, "_attributes"):
                    ast.copy_location(sub, node)
            return self._simple_stmt(new)
        if isinstance(target, ast.Name) and self.is_variable(target.id):
            later = _read_after(self.fdef, node, target.id)
            if later is not None:
                self.unsupported(
                    f"del {target.id} with '{target.id}' read again (line {later.lineno})", node,
                    "Python would raise UnboundLocalError there unless it is assigned first; "
                    "assign it a new value instead of deleting it")
            return []
        self.unsupported(f"del of {T._unparsed(target)}", node,
                         "tessera.jit deletes d[k], xs[i], xs[a:b] of variables and variables")

    def inner_list_stmt(self, call: ast.Call):
        """``d[k].append(v)`` / ``.extend(xs)`` on a list inside a list or dict, and
        ``d.setdefault(k, []).append(v)``: the outer value rebound with the list
        grown (lists are values in the core); None for other receivers."""
        recv, attr = call.func.value, call.func.attr
        args, kws = self.call_args(call)
        if kws or len(args) != 1:
            return None
        helper = self.b.helper("__list_append" if attr == "append" else "__list_extend")
        item = self.expr(args[0])
        if isinstance(recv, ast.Subscript) and isinstance(recv.value, (ast.Name, ast.Subscript)):
            current = f"getitem({', '.join([self.expr(recv.value)] + self.index(recv.slice))})"
            return self.setitem(recv, f"{helper}({current}, {item})")
        if (isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) and
                recv.func.attr == "setdefault" and isinstance(recv.func.value, ast.Name) and
                self.is_variable(recv.func.value.id)):
            d = recv.func.value
            key, default = self.setdefault_args(recv)
            k = self.b.tmp("k")
            grown = f"{helper}(get({self.expr(d)}, {k}, {default}), {item})"
            rebound = self.rebind(d.id, f"setitem({self.expr(d)}, {grown}, {k})", call)
            return f"block(define({k}, {key}), {rebound})"
        return None

    def setdefault_args(self, call: ast.Call):
        """The key's and default's texts of ``d.setdefault(k[, default])``."""
        args, kws = self.call_args(call)
        if kws or not 1 <= len(args) <= 2:
            self.unsupported(".setdefault() with these arguments", call)
        return self.expr(args[0]), (self.expr(args[1]) if len(args) == 2 else "nil")

    def starred_assign(self, target, value) -> list:
        """``a, *rest, z = v``: the items of v around a list of those between, as
        Python (at least one fewer item than names, else its ValueError)."""
        stars = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
        if len(stars) != 1 or isinstance(value, tuple):
            self.unsupported("this starred assignment", target)
        star, n = stars[0], len(target.elts)
        tmp = self.b.tmp()
        message = T.string_literal(f"{T.ERROR_TAG}ValueError] not enough values to unpack "
                                 f"(expected at least {n - 1}, got ")
        out = [f"define({tmp}, to_list({value}))",
               f"if(len({tmp}) < {n - 1}, assert(false, concat({message}, str(len({tmp})), "
               f"\")\")))"]
        for i, t in enumerate(target.elts):
            if i < star:
                item = f"getitem({tmp}, {i})"
            elif i == star:
                t = t.value
                item = f"getitem({tmp}, slice({star}, len({tmp}) - {n - 1 - star}))"
            else:
                item = f"getitem({tmp}, {i - n})"
            out.extend(self.assign_text(t, item))
        return out

    def loop_stmt(self, node) -> list:
        """A ``while`` or ``for`` loop. Its ``else:`` clause runs when the loop ends
        without a break (Cython's and Rosetta Code's prime searches): a hidden flag,
        false before the loop, set by the loop's own breaks (not an inner loop's)."""
        flag = self.b.tmp("broke") if node.orelse else None
        self.break_flags.append(flag)
        try:
            if isinstance(node, ast.While):
                cond = self.expr(node.test)
                loop = [f"while({cond}, {self.block(self.stmts(node.body))})"]
            else:
                node = self.ndenumerate_as_ndindex(node)
                loop = self.for_loop(node.target, node.iter, lambda: self.stmts(node.body), node)
        finally:
            self.break_flags.pop()
        if flag is None:
            return loop
        orelse = self.block(self.stmts(node.orelse))
        return [f"define({flag}, false)"] + loop + [f"if(not_({flag}), {orelse})"]

    def break_stmt(self) -> list:
        flag = self.break_flags[-1] if self.break_flags else None
        return ["break()"] if flag is None else [f"define({flag}, true)", "break()"]

    def ndenumerate_as_ndindex(self, node: ast.For) -> ast.For:
        """``for idx, v in np.ndenumerate(x)`` is ``for idx in np.ndindex(x.shape)`` with
        ``v = x[idx]`` first in the body (``(i, j), v`` too); other loops as they are."""
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and
                self.static_object(it.func) is getattr(np, "ndenumerate", None)):
            return node
        if (len(it.args) != 1 or it.keywords or not isinstance(it.args[0], ast.Name) or
                not isinstance(node.target, ast.Tuple) or len(node.target.elts) != 2):
            self.unsupported("np.ndenumerate other than 'for idx, v in np.ndenumerate(x)' with "
                             "x a name", node)
        x, (idx, v) = it.args[0], node.target.elts
        index = ast.Name(id=idx.id, ctx=ast.Load()) if isinstance(idx, ast.Name) else ast.Tuple(
            elts=[ast.Name(id=e.id, ctx=ast.Load()) for e in idx.elts], ctx=ast.Load())
        read = ast.Assign(targets=[v], value=ast.Subscript(
            value=ast.Name(id=x.id, ctx=ast.Load()), slice=index, ctx=ast.Load()))
        shape = ast.Attribute(value=ast.Name(id=x.id, ctx=ast.Load()), attr="shape",
                              ctx=ast.Load())
        loop = ast.For(target=idx, iter=ast.Call(
            func=ast.Attribute(value=it.func.value, attr="ndindex", ctx=ast.Load()),
            args=[shape], keywords=[]), body=[read] + node.body, orelse=node.orelse)
        for sub in ast.walk(loop):
            if getattr(sub, "lineno", None) is None and "lineno" in sub._attributes:
                ast.copy_location(sub, node)
        return loop
