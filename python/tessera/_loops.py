"""``for`` loops: over ``range`` / ``tessera.prange`` as counted ``while`` loops,
over anything else by index (``zip``, ``enumerate``, ``np.ndindex``, lists,
arrays, dicts, strings), and the checks of an ``np.ndindex`` tuple's name.

A mixin of ``_translate.FunctionTranslator``.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

import numpy as np

from . import _translate as T


# Sources of a ``for`` loop.
@dataclass
class _Seq:
    var: str

    def length(self):
        return f"len({self.var})"

    def elem(self, k):
        return f"getitem({self.var}, {k})"


@dataclass
class _Zip:
    parts: list

    def length(self):
        text = self.parts[0].length()
        for p in self.parts[1:]:
            text = f"minimum({text}, {p.length()})"
        return text

    def elem(self, k):
        return tuple(p.elem(k) for p in self.parts)


@dataclass
class _Enum:
    part: object
    start: str | None

    def length(self):
        return self.part.length()

    def elem(self, k):
        return (k if self.start is None else f"({k} + {self.start})", self.part.elem(k))


def _int_progression(node):
    """(first, step) of a tuple or list display of two or more int literals in
    arithmetic progression with a non-zero step (``(-1, 0, 1)``, ``[0, 2, 4]``), else None."""
    if not isinstance(node, (ast.Tuple, ast.List)) or len(node.elts) < 2:
        return None
    values = [T._constant_number(e) for e in node.elts]
    if any(type(v) is not int for v in values):
        return None
    step = values[1] - values[0]
    if step == 0 or any(b - a != step for a, b in zip(values, values[1:])):
        return None
    return values[0], step


# Methods that change a list in place.
_LIST_CHANGES = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort",
                           "reverse"})


def _changes_in_place(loop, iter_node) -> bool:
    """Whether the body of ``for ... in xs`` (xs a name) changes the list xs in place
    (``xs.append(v)``, ``xs.pop()``, ``xs[i] = v``, ``del xs[i]``, ``xs += ys``) and never
    binds the name to another object: Python's iterator then reads the list as it is at
    each turn (the items appended are iterated, a shortened list stops early), where
    tessera's loop would iterate the list as it was (lists are values here)."""
    if not isinstance(loop, ast.For) or not isinstance(iter_node, ast.Name):
        return False  # a comprehension's source is not changed by its expressions
    name = iter_node.id

    def names(t):
        return [n.id for n in ast.walk(t) if isinstance(n, ast.Name)] if t is not None else []

    changed = False
    for stmt in loop.body:  # (the else block runs after the last turn)
        for n in ast.walk(stmt):
            if isinstance(n, ast.Assign):
                bound = [t for t in n.targets if not isinstance(t, ast.Subscript)]
                if any(name in names(t) for t in bound):
                    return False
                changed = changed or any(isinstance(t, ast.Subscript) and
                                         isinstance(t.value, ast.Name) and t.value.id == name
                                         for t in n.targets)
            elif isinstance(n, (ast.AnnAssign, ast.For, ast.comprehension, ast.NamedExpr)):
                if name in names(n.target):
                    return False
            elif isinstance(n, ast.withitem):
                if name in names(n.optional_vars):
                    return False
            elif isinstance(n, ast.AugAssign):
                t = n.target
                changed = changed or name in ([t.id] if isinstance(t, ast.Name) else []) or (
                    isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                    and t.value.id == name)
            elif isinstance(n, ast.Delete):
                changed = changed or any(isinstance(t, ast.Subscript) and
                                         isinstance(t.value, ast.Name) and t.value.id == name
                                         for t in n.targets)
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and isinstance(n.func.value, ast.Name) and n.func.value.id == name
                  and n.func.attr in _LIST_CHANGES):
                changed = True
    return changed


class LoopsMixin:
    """Loops of FunctionTranslator."""

    def int_valued(self, node) -> bool:
        """Whether an expression is a Python int whatever the arguments: an int
        literal, ``len(x)`` (the builtin), ``x.shape[k]``, and ``+ - * // %`` of
        those. range's check of such a bound is skipped: it would cost a dozen
        general-path operations per call of a function whose loop is native."""
        if isinstance(T._constant_number(node), int):
            return True
        if isinstance(node, ast.BinOp) and isinstance(
                node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
            return self.int_valued(node.left) and self.int_valued(node.right)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "len" and len(node.args) == 1 and not node.keywords):
            try:
                return self.static_object(node.func) is builtins.len
            except (AttributeError, NameError, T.UnsupportedError):
                return False
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "shape" and isinstance(node.slice, ast.Constant)
                and type(node.slice.value) is int):
            base = node.value.value
            return isinstance(base, ast.Name) and self.is_variable(base.id)
        return False

    def for_loop(self, target, iter_node, make_body, node, before_target=None) -> list:
        """A ``for`` loop as a ``while`` with hidden counters; the target stays
        visible after the loop, as in Python."""
        setup: list = []
        rng = self.range_args(iter_node)
        progression = rng is None and isinstance(target, ast.Name) and _int_progression(iter_node)
        if progression:
            # `for di in (-1, 0, 1)`: the same ints in the same order as a range gives them,
            # so the loop is counted like one (a tuple indexed by a counter keeps a loop
            # off the fast path and native code).
            first, step = progression
            stop = first + step * len(iter_node.elts)
            rng = str(first), str(stop), str(step), 1 if step > 0 else -1
        if rng is not None and isinstance(target, ast.Name):
            start, stop, step, sign = rng
            parallel = self.is_prange_call(iter_node)
            if not self.inside_loop(node) and not progression:
                # Bounds that are not int literals are checked, as Python's
                # range checks them (not in an inner loop: the check, an
                # assert, would keep the enclosing loop off the fast path).
                a = iter_node.args
                nodes = [None, a[0], None] if len(a) == 1 else [a[0], a[1], (a[2:] or [None])[0]]
                start, stop, step = (
                    v if a is None or self.int_valued(a)
                    else self.inline("range_int", v, label="prange" if parallel else "range")
                    for v, a in zip((start, stop, step), nodes)
                )
            k, e = self.b.tmp("k"), self.b.tmp("e")
            setup.append(f"define({k}, {start})")
            setup.append(f"define({e}, {stop})")
            if not T._is_simple(step):
                s = self.b.tmp("s")
                setup.append(f"define({s}, {step})")
                step = s
            if sign > 0:
                cond = f"{k} < {e}"
            elif sign < 0:
                cond = f"{k} > {e}"
            else:
                cond = f"({step} > 0 && {k} < {e}) || ({step} < 0 && {k} > {e})"
            if before_target:
                before_target()
            head = self.assign_text(target, k) + [f"define({k}, {k} + {step})"]
            loop = "parallel_while" if parallel else "while"
            return setup + [f"{loop}({cond}, {self.block(head + make_body())})"]
        source = self.iter_source(iter_node, setup)
        if before_target:
            before_target()
        if self.is_ndindex_call(iter_node) and isinstance(target, ast.Name):
            self.check_index_tuple_name(target, iter_node)
            self._index_tuples[-1].add(target.id)
        k, n = self.b.tmp("k"), self.b.tmp("n")
        setup.append(f"define({k}, 0)")
        head = self.assign_text(target, source.elem(k)) + [f"define({k}, {k} + 1)"]
        if isinstance(source, _Seq) and _changes_in_place(node, iter_node):
            # A list the body changes in place: the list as it is at each turn, its length
            # asked again (native code asks again only after a helper may have changed it).
            # What is not a list (a tuple, a dict's keys, a string) keeps the items it had.
            is_list = self.b.tmp("l")
            setup.append(f"define({is_list}, type({self.expr(iter_node)}) == \"list\")")
            live = _Seq(f"if({is_list}, {self.expr(iter_node)}, {source.var})")
            head = self.assign_text(target, live.elem(k)) + [f"define({k}, {k} + 1)"]
            return setup + [f"while({k} < {live.length()}, {self.block(head + make_body())})"]
        setup.append(f"define({n}, {source.length()})")
        return setup + [f"while({k} < {n}, {self.block(head + make_body())})"]

    def inside_loop(self, node) -> bool:
        """True when the statement ``node`` is inside a loop of the function."""
        return any(
            p is not node and isinstance(p, (ast.For, ast.While)) and
            any(q is node for q in ast.walk(p))
            for p in ast.walk(self.node)
        )

    def is_prange_call(self, node) -> bool:
        """A call of tessera.prange (a parallel loop's range)."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))):
            return False
        try:
            obj = self.static_object(node.func)
        except (NameError, AttributeError):
            return False
        return obj is not T._NO and obj is getattr(T._tessera_module(), "prange", None)

    def range_args(self, node):
        """(start, stop, step, sign of step) of a call to builtin range or
        tessera.prange, or None."""
        if not isinstance(node, ast.Call):
            return None
        which = "prange" if self.is_prange_call(node) else self.builtin_called(node)
        if which not in ("range", "prange"):
            return None
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            self.unsupported(f"{which}() with keyword or star arguments", node)
        args = node.args
        if not 1 <= len(args) <= 3:
            self.unsupported(f"{which}() with this many arguments", node)
        if len(args) == 1:
            return "0", self.expr(args[0]), "1", 1
        step_node = args[2] if len(args) == 3 else None
        sign = 1
        if step_node is not None:
            c = T._constant_number(step_node)
            sign = 0 if c is None else (1 if c > 0 else -1)
        step = self.expr(step_node) if step_node is not None else "1"
        return self.expr(args[0]), self.expr(args[1]), step, sign

    def iter_source(self, node, setup: list):
        if isinstance(node, ast.Call) and not node.keywords:
            which = self.builtin_called(node)
            if which == "zip":
                if any(isinstance(a, ast.Starred) for a in node.args) or not node.args:
                    self.unsupported("zip() with star or no arguments", node)
                return _Zip([self.iter_source(a, setup) for a in node.args])
        if isinstance(node, ast.Call) and self.builtin_called(node) == "enumerate":
            args = node.args
            start = None
            kws = {k.arg: k.value for k in node.keywords}
            if len(args) == 2:
                start = self.expr(args[1])
            elif "start" in kws:
                start = self.expr(kws["start"])
            if not args or len(args) > 2 or set(kws) - {"start"}:
                self.unsupported("enumerate() with these arguments", node)
            return _Enum(self.iter_source(args[0], setup), start)
        # iterate: a dict's keys, a string's characters, lists and arrays themselves.
        var = self.b.tmp("it")
        setup.append(f"define({var}, iterate({self.expr(node)}))")
        return _Seq(var)

    def is_ndindex_call(self, node) -> bool:
        if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))):
            return False
        return self.static_object(node.func) is getattr(np, "ndindex", None)

    def check_index_tuple_name(self, target: ast.Name, iter_node):
        """An np.ndindex loop variable indexes as a tuple wherever its name
        appears; the name bound to anything else (another assignment, a
        parameter) would index differently in NumPy, so it is refused."""
        name = target.id
        for n in ast.walk(self.node):
            if isinstance(n, ast.arg) and n.arg == name:
                bad = n
            elif isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
                if n is target or any(
                    isinstance(p, (ast.For, ast.comprehension))
                    and p.target is n
                    and self.is_ndindex_call(p.iter)
                    for p in ast.walk(self.node)
                ):
                    continue
                bad = n
            else:
                continue
            self.unsupported(
                f"the np.ndindex loop variable '{name}' also bound to other values", bad,
                "give the index tuple a name of its own",
            )

    def is_index_tuple(self, node) -> bool:
        """A loop variable bound to the tuples of ``np.ndindex`` (``x[idx]``
        indexes with the tuple, not with a list of indices)."""
        return isinstance(node, ast.Name) and any(
            node.id in names for names in self._index_tuples
        )
