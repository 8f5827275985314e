"""Two names for one list or dict, which a jit function cannot give.

Inside a program lists and dicts are values (docs/python.md, "Differences from
Python"): ``e = d`` copies, ``rows.append(row)`` stores a copy.  In Python both
names (or the name and the list holding it) reach one object, so a change in
place through one shows through the other.  Where a function makes such a pair
and then changes one side in place while the pair still holds (neither name
rebound since), its answer would silently differ from Python's; those
statements are found here, from the source, and the translator refuses them at
run time when the value is a list or dict (arrays are shared in programs too,
numbers cannot change in place: both pass).

The walk is forward through the function's statements (not its nested
functions or comprehensions), both branches of an ``if``, loop bodies twice
(what one turn makes, the next turn may change), a name's rebinding ending the
pairs it was in.  It errs on the side of refusing (a change in a branch not
taken is counted), except for ``xs += ys`` on a name, which is mostly a number's
new binding and is not counted as a change.

Changes through an element (``t[i][j] = v``, ``t[i].append(v)``) are followed too:
a table holding one row twice (``[row, row]``, ``[[0] * n] * m``, ``t[1] = t[0]``)
is refused when a row is changed that way; a name bound to a row (``cur = t[i]``)
that is read after such a change is brought up to date at run time when the row
changed is its own (Refresh), as Python's shared row would be.
"""

from __future__ import annotations

import ast

from ._list_args import _CHANGING_METHODS, _root, _targets, changed_roots

# Methods that store their argument in the receiver: ``rows.append(row)``.
_STORING_METHODS = {"append": 0, "insert": 1, "setdefault": 1}


class Pair:
    """Names that reach one object since ``origin`` (a statement), and the
    variable holding it as an element (``rows`` of ``rows.append(row)``), if any."""

    __slots__ = ("origin", "names", "holder", "repeated", "direct")

    def __init__(self, origin, names, holder=None, repeated=False, direct=True):
        self.origin, self.names, self.holder = origin, frozenset(names), holder
        self.repeated = repeated  # the holder holds the object more than once
        self.direct = direct  # as an item of the holder, not an item's (t[i][j] = v)

    def live(self) -> bool:
        if self.holder:
            return bool(self.names) or self.repeated
        return len(self.names) >= 2


class Elem:
    """``name = container[index]`` (``origin``): the name reaches one of the
    container's objects, which a change through the container changes too;
    ``depth`` subscripts down (``c = g[i][j]``: 2, no index followed)."""

    __slots__ = ("origin", "name", "container", "index", "depth", "chain")

    def __init__(self, origin, name, container, index, depth=1, chain=None):
        self.origin, self.name, self.container, self.index = origin, name, container, index
        self.depth = depth
        # the indices from the container down (never_same), when known
        self.chain = chain if chain is not None else ([index] if index is not None else [])


def _key(p: Pair):
    return (id(p.origin), p.holder)


def _merge(*states) -> dict:
    out: dict = {}
    for st in states:
        for k, p in st.items():
            q = out.get(k)
            if q is None or isinstance(p, Elem):
                out[k] = p
            else:
                out[k] = Pair(p.origin, p.names | q.names, p.holder, p.repeated or q.repeated,
                              p.direct)
    return out


def deep_changes(stmt) -> list:
    """The changes in place a statement makes through an element of a variable:
    ``(variable, object changed, depth)`` for ``t[i][j] = v``, ``t[i][j] op= v``,
    ``del t[i][j]``, ``t[i] += xs`` (a list extended in place) and
    ``t[i].append(v)`` (any changing method): the object changed and its depth
    (``g[i][j][k] = v`` changes g[i][j]: 2)."""
    nodes = []
    if isinstance(stmt, (ast.Assign, ast.Delete)):
        for top in stmt.targets:
            nodes += [t.value for t in _targets(top) if isinstance(t, ast.Subscript)]
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Subscript):
        nodes.append(stmt.target.value)
        if isinstance(stmt.op, (ast.Add, ast.Mult, ast.BitOr)):
            nodes.append(stmt.target)  # the element itself, when it is a list or dict
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        if isinstance(f, ast.Attribute) and f.attr in _CHANGING_METHODS:
            nodes.append(f.value)
    out = []
    for n in nodes:
        if isinstance(n, ast.Subscript) and _root(n) is not None:
            node, depth = n, 1
            while isinstance(n.value, ast.Subscript):
                n = n.value
                depth += 1
            out.append((n.value.id, node, depth))
    return out


def _indices(node) -> list:
    """The indices of a subscript chain, from its root down (``g[i][j]``: [i, j])."""
    out = []
    while isinstance(node, ast.Subscript):
        out.append(node.slice)
        node = node.value
    return out[::-1]


def _self_element(value, holder: str) -> bool:
    """Whether ``value`` is an element of ``holder`` itself (``t[0]``)."""
    return (isinstance(value, ast.Subscript) and not isinstance(value.slice, ast.Slice)
            and isinstance(value.value, ast.Name) and value.value.id == holder)


def repetition(value):
    """``[E1, ..., Ek] * m`` (or ``m * [...]``, or ``[row for _ in ...]`` of a name
    bound outside): ``(k, display)``, whose items a list holds more than once
    when it is longer than k; None otherwise."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        for side in (value.left, value.right):
            if isinstance(side, ast.List) and side.elts and not any(
                    isinstance(e, (ast.Constant, ast.Starred)) for e in side.elts):
                return len(side.elts), side
    if isinstance(value, ast.ListComp) and isinstance(value.elt, ast.Name):
        bound = {t.id for g in value.generators for t in _targets(g.target)
                 if isinstance(t, ast.Name)}
        if value.elt.id not in bound:
            return 1, value
    return None


def _linear(node):
    """``node`` as ``{name: coefficient, None: constant}`` when it is a sum of
    integer multiples of names and integers (``i - 1``, ``2 * k + j``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return {None: node.value}
    if isinstance(node, ast.Name):
        return {node.id: 1}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _linear(node.operand)
        return None if inner is None else {k: -v for k, v in inner.items()}
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        a, b = _linear(node.left), _linear(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Mult):
            if set(a) == {None}:
                a, b = b, a
            if set(b) != {None}:
                return None
            return {k: v * b[None] for k, v in a.items()}
        sign = 1 if isinstance(node.op, ast.Add) else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    return None


def _differ_by_constant(a, b) -> bool:
    """Whether two linear forms differ by a nonzero constant (``i - 1`` and ``i``)."""
    la, lb = _linear(a), _linear(b)
    if la is None or lb is None:
        return False
    diff = dict(la)
    for k, v in lb.items():
        diff[k] = diff.get(k, 0) - v
    return diff.get(None, 0) != 0 and all(v == 0 for k, v in diff.items() if k is not None)


class ReadAfter:
    """Whether a name is read after a statement: on a later line, or anywhere in
    a loop holding the statement (its next turn). It errs towards a read."""

    def __init__(self, fdef):
        self.loads: dict = {}
        self.loops = [n for n in ast.walk(fdef) if isinstance(n, (ast.For, ast.While))]
        for n in ast.walk(fdef):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.loads.setdefault(n.id, []).append(n)

    def __call__(self, stmt, name, rebinding_loop=None):
        """``rebinding_loop``: a loop whose next turn binds ``name`` first."""
        loads = self.loads.get(name, ())
        end = getattr(stmt, "end_lineno", stmt.lineno)
        if any(n.lineno > end for n in loads):
            return True
        for loop in self.loops:
            if loop is rebinding_loop:
                continue
            if loop.lineno <= stmt.lineno and stmt.lineno <= loop.end_lineno and any(
                    loop.lineno <= n.lineno <= loop.end_lineno for n in loads):
                return True
        return False


def _bound_names(stmt) -> set:
    """The names a statement rebinds (not the in-place changes of changed_roots)."""
    names: set = set()
    if isinstance(stmt, ast.Assign):
        tops = stmt.targets
    elif isinstance(stmt, ast.AnnAssign):
        tops = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        tops = [stmt.target]
    elif isinstance(stmt, ast.Delete):
        tops = stmt.targets
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        tops = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    else:
        tops = []
    for top in tops:
        names.update(t.id for t in _targets(top) if isinstance(t, ast.Name))
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and not isinstance(
            stmt.op, (ast.Add, ast.Mult, ast.BitOr)):
        names.add(stmt.target.id)  # -=, /= ...: a number's new binding
    for n in ast.walk(stmt) if not isinstance(stmt, (ast.If, ast.While, ast.For, ast.With,
                                                    ast.Try)) else ():
        if isinstance(n, ast.NamedExpr):
            names.add(n.target.id)
    return names


def _container_display(node) -> bool:
    return isinstance(node, (ast.List, ast.Dict, ast.ListComp, ast.DictComp, ast.Set,
                             ast.SetComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in ("list", "dict", "set"))


def _made_pairs(stmt, variables) -> list:
    """The pairs a statement makes: ``e = d``; ``a = b = []``; ``rows.append(row)``,
    ``rows[i] = row``, ``d.setdefault(k, row)``, ``pair = [row, col]``."""
    out = []
    if isinstance(stmt, ast.Assign):
        names = [t.id for top in stmt.targets for t in [top] if isinstance(t, ast.Name)]
        v = stmt.value
        if isinstance(v, ast.Name) and v.id in variables and names:
            out.append(Pair(stmt, names + [v.id]))
        elif len(names) >= 2 and _container_display(v):
            out.append(Pair(stmt, names))
        if isinstance(v, ast.Name) and v.id in variables:
            for top in stmt.targets:
                if isinstance(top, ast.Subscript) and _root(top) is not None:
                    out.append(Pair(stmt, [v.id], holder=_root(top),
                                    direct=isinstance(top.value, ast.Name)))
        rep = repetition(v) if names else None
        if rep is not None:
            # [row] * m, [[0] * n] * m, [row for _ in range(m)]: one pair, repeated
            shown = rep[1].elts if isinstance(rep[1], ast.List) else [rep[1].elt]
            held = [e.id for e in shown if isinstance(e, ast.Name) and e.id in variables]
            out.append(Pair(stmt, held, holder=names[0], repeated=True))
        elif isinstance(v, (ast.List, ast.Tuple, ast.Dict)) and names:
            items = v.values if isinstance(v, ast.Dict) else v.elts
            for e in items:
                if isinstance(e, ast.Name) and e.id in variables:
                    twice = sum(isinstance(x, ast.Name) and x.id == e.id for x in items) > 1
                    out.append(Pair(stmt, [e.id], holder=names[0], repeated=twice))
        for top in stmt.targets:
            if isinstance(top, ast.Subscript) and _root(top) and _self_element(v, _root(top)):
                out.append(Pair(stmt, [], holder=_root(top), repeated=True))
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        args = stmt.value.args
        if isinstance(f, ast.Attribute) and f.attr in _STORING_METHODS:
            i = _STORING_METHODS[f.attr]
            holder = _root(f.value)
            if holder is not None and len(args) > i and isinstance(args[i], ast.Name) \
                    and args[i].id in variables:
                out.append(Pair(stmt, [args[i].id], holder=holder))
            elif holder is not None and len(args) > i and _self_element(args[i], holder):
                out.append(Pair(stmt, [], holder=holder, repeated=True))
    return out


def _loop_elems(loop, variables) -> list:
    """``for row in t`` / ``for i, row in enumerate(t)``: the loop's variable
    bound to each item of a variable in turn (which item, tessera does not follow:
    no index)."""
    it, target = loop.iter, loop.target
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" \
            and len(it.args) == 1 and isinstance(target, ast.Tuple) and len(target.elts) == 2:
        it, target = it.args[0], target.elts[1]
    chain = _item_chain(it, variables)
    if isinstance(it, ast.Name) and it.id in variables and isinstance(target, ast.Name):
        return [Elem(loop, target.id, it.id, None)]
    if chain is not None and isinstance(target, ast.Name):  # for c in g[i]: g's items' items
        return [Elem(loop, target.id, chain[0], None, chain[1] + 1)]
    return []


def _item_chain(value, variables):
    """``g[i][j]...`` (plain indices, no slice) of a variable: ``(g, depth)``, else None."""
    depth = 0
    while isinstance(value, ast.Subscript) and not isinstance(value.slice, ast.Slice):
        value, depth = value.value, depth + 1
    if depth and isinstance(value, ast.Name) and value.id in variables:
        return value.id, depth
    return None


def _made_elems(stmt, variables) -> list:
    """``cur = t[i]``, ``prev, cur = t[i - 1], t[i]``: the names bound to an
    element of a variable (not a slice: a new list)."""
    out = []
    if not isinstance(stmt, ast.Assign):
        return out
    for top in stmt.targets:
        pairs = [(top, stmt.value)]
        both = isinstance(top, (ast.Tuple, ast.List)) and isinstance(stmt.value,
                                                                     (ast.Tuple, ast.List))
        if both and len(top.elts) == len(stmt.value.elts):
            pairs = list(zip(top.elts, stmt.value.elts))
        for t, v in pairs:
            if isinstance(t, ast.Name) and isinstance(v, ast.Subscript) \
                    and isinstance(v.value, ast.Name) and v.value.id in variables \
                    and not isinstance(v.slice, ast.Slice):
                out.append(Elem(stmt, t.id, v.value.id, v.slice))
            elif isinstance(t, ast.Name) and _item_chain(v, variables):
                # c = g[i][j]: which item, tessera does not follow (no index)
                root, depth = _item_chain(v, variables)
                out.append(Elem(stmt, t.id, root, None, depth, _indices(v)))
            elif isinstance(t, ast.Name) and _element_call(v, variables):
                out.append(Elem(stmt, t.id, _element_call(v, variables), None))
    return out


def _element_call(value, variables):
    """The variable whose item ``value`` gives: ``d.get(k)``, ``d.setdefault(k, [])``,
    ``max(rows, key=len)``, ``min(rows)`` (which item, tessera does not follow)."""
    if not isinstance(value, ast.Call):
        return None
    f, args = value.func, value.args
    if isinstance(f, ast.Attribute) and f.attr in ("get", "setdefault") \
            and isinstance(f.value, ast.Name):
        holder = f.value.id
    elif isinstance(f, ast.Name) and f.id in ("max", "min") and len(args) == 1 \
            and isinstance(args[0], ast.Name):
        holder = args[0].id
    else:
        return None
    return holder if holder in variables else None


class _Walk:
    def __init__(self, variables, read_after, counters=frozenset(), bindings=None):
        self.variables = variables
        self.bindings = bindings or {}  # name -> how many places bind it
        self.counters = counters  # names only ever numbers of range()
        self.read_after = read_after
        # id(origin) -> (origin, names, holder, changing statement, kind)
        self.hazards: dict = {}
        # id(change) -> (change, {(Elem's name, container): (Elem, subscript changed)})
        self.refreshes: dict = {}
        self.shifts: dict = {}  # id(change) -> (change, {(name, container)})
        self.elems: list = []  # every Elem made

    def block(self, stmts, state: dict) -> dict:
        for s in stmts:
            state = self.stmt(s, state)
        return state

    def stmt(self, s, state: dict) -> dict:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return self.rebind(state, {s.name})
        if isinstance(s, ast.If):
            return _merge(self.block(s.body, dict(state)), self.block(s.orelse, dict(state)))
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            start = state
            if isinstance(s, (ast.For, ast.AsyncFor)):
                state = self.rebind(state, _bound_names(s))
                for e in _loop_elems(s, self.variables):
                    self.elems.append(e)
                    state = dict(state)
                    state[("elem", id(s), e.name)] = e
            once = self.block(s.body, dict(state))
            again = self.block(s.body, _merge(state, once))
            out = _merge(start, once, again)
            return _merge(out, self.block(s.orelse, dict(out)))
        if isinstance(s, (ast.With, ast.AsyncWith)):
            return self.block(s.body, self.rebind(state, _bound_names(s)))
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            st = self.block(s.body, dict(state))
            handlers = [self.block(h.body, self.rebind(_merge(state, st),
                                                       {h.name} if h.name else set()))
                        for h in s.handlers]
            st = _merge(st, *handlers)
            st = self.block(s.orelse, st)
            return self.block(s.finalbody, st)
        # a statement: its changes in place first (``rows.append(row)`` changes rows).
        # ``v += x`` is left out: it changes a list in place, but is mostly a number's
        # new binding (``out[i] = acc`` then ``acc += x``), which would pay a check.
        changed = [] if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) \
            else changed_roots(s)
        for name in changed:
            for p in state.values():
                if isinstance(p, Pair) and p.live() and name in p.names \
                        and id(p.origin) not in self.hazards and p.origin is not s:
                    self.hazards[id(p.origin)] = (p.origin, p.names, p.holder, s, "changed")
        self.through_elements(s, state, changed)
        state = self.rebind(state, _bound_names(s))
        for p in _made_pairs(s, self.variables - self.counters):
            state = dict(state)
            # joining a pair that holds already: ``f = e`` after ``e = d``
            names = set(p.names)
            if p.holder is None:
                for q in state.values():
                    if isinstance(q, Pair) and q.live() and q.holder is None and names & q.names:
                        names |= q.names
            old = state.get(_key(p))
            # stored again while it still holds: ``rows.append(row)`` in a loop
            again = old is not None and old.live() and bool(names & old.names)
            state[_key(p)] = Pair(p.origin, names, p.holder, p.repeated or again, p.direct)
        for e in _made_elems(s, self.variables):
            self.elems.append(e)
            state = dict(state)
            state[("elem", id(e.origin), e.name)] = e
        return state

    def never_same(self, elem, change, node) -> bool:
        """Whether the object ``change`` changes (``node``, holder[X]...) is never
        ``elem``'s (``prev = d[i - 1]`` then ``d[i][j] = v`` in the same turn):
        at some level the two indices differ by a constant, and their names are
        bound only by the targets of the loops around the innermost one whose
        body holds ``elem``'s binding before ``change``."""
        changed = _indices(node)
        for index, x in zip(elem.chain, changed):
            if not _differ_by_constant(index, x):
                continue
            names = {n.id for n in ast.walk(index) if isinstance(n, ast.Name)}
            inner = [loop for loop in self.read_after.loops if isinstance(loop, ast.For)
                     and any(s is elem.origin for s in loop.body)
                     and elem.origin.lineno < change.lineno <= loop.end_lineno]
            if not inner:
                return False
            targets = {t.id for loop in self.read_after.loops if isinstance(loop, ast.For)
                       and loop.lineno <= inner[0].lineno <= loop.end_lineno
                       for t in _targets(loop.target) if isinstance(t, ast.Name)}
            if names <= targets and all(self.bindings.get(n) == 1 for n in names):
                return True
        return False

    def through_elements(self, s, state: dict, changed) -> None:
        """A change through an element of a holder (``t[i][j] = v``): a hazard for
        a holder holding an object twice, or one whose name is read later; a
        refresh of the names bound to the holder's elements read later. Another
        change of the holder (but ``t[k] = v`` and growing it) loses track of
        which of its elements such a name holds (a shift)."""
        deep = deep_changes(s)
        for root, node, depth in deep:
            sub = node
            while isinstance(sub.value, ast.Subscript):
                sub = sub.value
            for p in state.values():
                if isinstance(p, Elem):
                    loop = p.origin if isinstance(p.origin, ast.For) else None
                    if p.container == root and p.origin is not s and depth >= p.depth \
                            and self.read_after(s, p.name, loop) \
                            and not self.never_same(p, s, node):
                        entry = self.refreshes.setdefault(id(s), (s, {}))[1]
                        entry.setdefault((p.name, root), (p, sub))
                elif p.holder == root and p.live() and id(p.origin) not in self.hazards \
                        and p.origin is not s and (p.repeated or p.direct and any(
                            self.read_after(s, n) for n in p.names - self.counters)):
                    self.hazards[id(p.origin)] = (p.origin, p.names, p.holder, s, "deep")
        deep_roots = {r for r, _, _ in deep}
        for root in set(changed) - deep_roots:
            elems = [p for p in state.values() if isinstance(p, Elem) and p.container == root
                     and self.read_after(s, p.name)]
            if not elems:
                continue
            replaced = _replaced(s, root)
            if replaced is None and _keeps_positions(s, root):
                continue
            entry = self.shifts.setdefault(id(s), (s, {}))[1]
            for p in elems:
                entry[(p.name, root)] = replaced  # None: lost; else the subscripts replaced

    @staticmethod
    def rebind(state: dict, names: set) -> dict:
        if not names:
            return state
        out = {}
        for k, p in state.items():
            if isinstance(p, Elem):
                if p.name not in names and p.container not in names:
                    out[k] = p
                continue
            gone = p.holder in names
            q = Pair(p.origin, p.names - names, None if gone else p.holder,
                     p.repeated and not gone, p.direct)
            if q.live():
                out[k] = q
        return out


def _keeps_positions(stmt, root: str) -> bool:
    """Whether a change of ``root`` keeps its elements where they are: ``t[k] = v``
    (only the element at k is replaced), ``t.append(v)``, ``t.extend(xs)``,
    ``t += xs``, ``d.setdefault(k, v)``, ``d.update(e)``."""
    if isinstance(stmt, ast.Assign):
        return all(not isinstance(t, ast.Subscript) or isinstance(t.value, ast.Name)
                   and not isinstance(t.slice, ast.Slice)
                   for top in stmt.targets for t in _targets(top))
    if isinstance(stmt, ast.AugAssign):
        return isinstance(stmt.target, ast.Name)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in (
            "append", "extend", "setdefault", "update")
    return False


def _replaced(stmt, root: str):
    """The subscripts of ``root[k] = v`` (an element replaced), or None."""
    if not isinstance(stmt, ast.Assign):
        return None
    subs = [t.slice for top in stmt.targets for t in _targets(top)
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
            and t.value.id == root]
    return subs if subs and not any(isinstance(x, ast.Slice) for x in subs) else None


def _plain_bindings(fdef) -> set:
    """The names every binding of which (in ``fdef``'s body, not its nested functions)
    is a plain assignment ``name = ...`` / ``a, b = ...``, or a parameter."""
    bad: set = set()
    stack = list(fdef.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bad.add(n.name)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            stack.append(n.generators[0].iter)
            continue
        if isinstance(n, ast.Assign):
            stack.append(n.value)
            stack.extend(t for top in n.targets for t in _targets(top)
                         if not isinstance(t, ast.Name))
            continue
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            bad.update(n.names)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bad.add(n.id)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bad.add(n.name)
        stack.extend(ast.iter_child_nodes(n))
    names = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)}
    a = fdef.args
    names |= {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    return names - bad


class Analysis:
    """What _Walk found in a function: ``hazards`` (``{id(statement): (statement,
    names, holder, change, kind)}``: statements making two names, or a name and a
    holder, of one object that ``change`` changes in place while they share it),
    ``refreshes``, ``shifts`` and ``elems`` (see _Walk), and ``plain`` (_plain_bindings)."""

    def __init__(self, hazards=None, refreshes=None, shifts=None, plain=frozenset(), elems=()):
        self.hazards = hazards or {}
        self.refreshes = refreshes or {}
        self.shifts = shifts or {}
        self.plain = plain
        self.elems = list(elems)


def alias_analysis(fdef) -> Analysis:
    """The Analysis of ``fdef`` (a def; a lambda has no statements)."""
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return Analysis()
    variables = set()
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            variables.add(n.id)
        elif isinstance(n, ast.arg):
            variables.add(n.arg)
    counters = {t.id for n in ast.walk(fdef) if isinstance(n, ast.For)
                and isinstance(n.iter, ast.Call) and isinstance(n.iter.func, ast.Name)
                and n.iter.func.id == "range" for t in _targets(n.target)
                if isinstance(t, ast.Name)}
    others = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)} - {
        t.id for n in ast.walk(fdef) if isinstance(n, ast.For) for t in _targets(n.target)
        if isinstance(t, ast.Name)}
    bindings: dict = {}
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            bindings[n.id] = bindings.get(n.id, 0) + 1
        elif isinstance(n, ast.arg):
            bindings[n.arg] = bindings.get(n.arg, 0) + 1
    w = _Walk(variables, ReadAfter(fdef), frozenset(counters - others), bindings)
    w.block(fdef.body, {})
    return Analysis(w.hazards, w.refreshes, w.shifts, _plain_bindings(fdef), w.elems)



# Changes of a row itself (not of its items' objects): ``row.append(v)``, ...
_ROW_METHODS = {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"}


def _row_change(stmt, name: str):
    """How ``stmt`` changes the list under ``name`` itself: ``("item", j, inplace)``
    for ``name[j] = v`` / ``name[j] op= v`` (inplace: ``+=``, ``*=``, ``|=``, which
    change a list item in place), ``("whole", None, False)`` for ``del name[j]``
    and ``name.append(v)`` (_ROW_METHODS); None for anything else."""
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AugAssign):
        target = stmt.target
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
            and target.value.id == name and not isinstance(target.slice, ast.Slice):
        inplace = isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Mult,
                                                                           ast.BitOr))
        return "item", target.slice, inplace
    if isinstance(stmt, ast.Delete) and len(stmt.targets) == 1 and isinstance(
            stmt.targets[0], ast.Subscript) and isinstance(stmt.targets[0].value, ast.Name) \
            and stmt.targets[0].value.id == name:
        return "whole", None, False
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        if isinstance(f, ast.Attribute) and f.attr in _ROW_METHODS \
                and isinstance(f.value, ast.Name) and f.value.id == name:
            return "whole", None, False
    return None


def _fresh_row(v) -> bool:
    """A list or dict no other name holds: a display, a comprehension, ``[0] * n``,
    ``list(...)``, ``dict(...)``."""
    if isinstance(v, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult):
        return any(isinstance(x, ast.List) and all(isinstance(e, ast.Constant) for e in x.elts)
                   for x in (v.left, v.right))
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in (
        "list", "dict", "set")


def _fresh_table(v) -> bool:
    """A list or dict of rows no other name holds (``[[0] * n for _ in range(m)]``)."""
    if isinstance(v, (ast.ListComp, ast.SetComp)):
        return _fresh_row(v.elt)
    if isinstance(v, ast.DictComp):
        return _fresh_row(v.value)
    if isinstance(v, ast.List):
        return all(_fresh_row(e) for e in v.elts)
    if isinstance(v, ast.Dict):
        return None not in v.keys and all(_fresh_row(e) for e in v.values)
    return False


class RowPlan:
    """A change of a row through its name (``r = t[i]; r[j] = v``) that keeps
    Python's answer (row_plans): ``back`` None when ``t`` is never read after it
    (the change is the row's own), else ``(index name, how)``: written back to
    ``t[i]`` in a ``for i, row in enumerate(t)`` loop (_row_change's how)."""

    __slots__ = ("name", "holder", "back", "how")

    def __init__(self, name, holder, back, how):
        self.name, self.holder, self.back, self.how = name, holder, back, how


def _exclusive_table(fdef, t: str, elems) -> bool:
    """Whether the rows of ``t`` are reached only through ``t``: it is a local bound
    only to fresh tables, grown only by fresh rows, read only through an item, a
    method, len() or a loop (and returned), in no nested function; only
    plain names bound to its items."""
    a = fdef.args
    if t in {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs} | {
            x.arg for x in (a.vararg, a.kwarg) if x is not None}:
        return False
    parents = {}
    for n in ast.walk(fdef):
        for c in ast.iter_child_nodes(n):
            parents[id(c)] = n
    for n in ast.walk(fdef):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and t in n.names:
            return False
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fdef \
                and any(isinstance(m, ast.Name) and m.id == t for m in ast.walk(n)):
            return False
        if isinstance(n, ast.Assign) and any(isinstance(x, ast.Name) and x.id == t
                                             for top in n.targets for x in _targets(top)):
            if len(n.targets) != 1 or not isinstance(n.targets[0], ast.Name) \
                    or not _fresh_table(n.value):
                return False
        elif isinstance(n, ast.Name) and n.id == t and not isinstance(n.ctx, ast.Load):
            if not isinstance(parents.get(id(n)), ast.Assign):
                return False  # for t in ..., with ... as t, del t
        elif isinstance(n, ast.Name) and n.id == t:
            up = parents.get(id(n))
            if isinstance(up, ast.Subscript) and up.value is n:
                continue
            if isinstance(up, ast.Attribute) and up.value is n:
                call = parents.get(id(up))
                # a method's result may be a row (t.pop(), t.get(k)): only statements
                if not (isinstance(call, ast.Call) and call.func is up
                        and isinstance(parents.get(id(call)), ast.Expr)):
                    return False
                if up.attr in ("append", "insert", "setdefault", "extend", "update") and not (
                        up.attr in ("append", "insert", "setdefault")
                        and call.args and _fresh_row(call.args[-1])):
                    return False
                continue
            if isinstance(up, (ast.For, ast.comprehension)) and up.iter is n:
                continue
            if isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id in (
                    "len", "enumerate") and up.args == [n]:
                continue
            if isinstance(up, ast.Return) or isinstance(up, ast.Tuple) and isinstance(
                    parents.get(id(up)), ast.Return):
                continue
            return False
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == t:
            return False
        elif isinstance(n, (ast.Assign, ast.AugAssign)):
            # t[k] = v stores v: only a fresh row
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for top in targets:
                for x in _targets(top):
                    if isinstance(x, ast.Subscript) and isinstance(x.value, ast.Name) \
                            and x.value.id == t and not _fresh_row(n.value):
                        return False
    # every name bound to an item of t (two levels down: their items) is an Elem
    return all(e.container != t or e.depth == 1 for e in elems)


def _read_after_stmt(fdef, stmt, name: str) -> bool:
    """Whether ``name`` is read after ``stmt``: on a later line, or in a loop holding
    ``stmt`` (its next turn) -- but the iterable of a for loop, read once before."""
    end = getattr(stmt, "end_lineno", stmt.lineno)
    loops = [n for n in ast.walk(fdef) if isinstance(n, (ast.For, ast.While))
             and n.lineno <= stmt.lineno <= n.end_lineno]
    for n in ast.walk(fdef):
        if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
            continue
        if n.lineno > end:
            return True
        for loop in loops:
            if loop.lineno <= n.lineno <= loop.end_lineno and not (
                    isinstance(loop, ast.For) and any(m is n for m in ast.walk(loop.iter))):
                return True
    return False


def row_plans(fdef, analysis, elements) -> dict:
    """``{(id(statement), name): RowPlan}``: the changes in place of a row through
    its name (an element variable, refused otherwise) that keep Python's answer."""
    plans: dict = {}
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return plans
    stores: dict = {}
    own = {id(x) for n in ast.walk(fdef) if isinstance(n, ast.comprehension)
           for x in ast.walk(n.target)}  # a comprehension's targets are its own
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and id(n) not in own:
            stores[n.id] = stores.get(n.id, 0) + 1
    stmts, stack = [], list(fdef.body)  # not those of nested functions: their own names
    while stack:
        n = stack.pop()
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stmts += [n] if isinstance(n, ast.stmt) else []
            stack.extend(ast.iter_child_nodes(n))
    for r in elements:
        mine = [e for e in analysis.elems if e.name == r]
        if not mine or len(mine) != stores.get(r, 0) or len({e.container for e in mine}) != 1 \
                or any(e.depth != 1 for e in mine):
            continue
        t = mine[0].container
        if not _exclusive_table(fdef, t, analysis.elems):
            continue
        for s in stmts:
            how = _row_change(s, r) if r in changed_roots(s) else None
            if how is None:
                continue
            # the enumerate loop binding r around s (and no other binding of r in it)
            loops = [e.origin for e in mine if isinstance(e.origin, ast.For)
                     and any(x is s for x in ast.walk(e.origin))]
            loop, index = (loops[-1] if loops else None), None
            if loop is not None and isinstance(loop.target, ast.Tuple) \
                    and isinstance(loop.target.elts[0], ast.Name) \
                    and stores.get(loop.target.elts[0].id) == 1 and not any(
                        e.origin is not loop and any(x is e.origin for x in ast.walk(loop))
                        for e in mine):
                index = loop.target.elts[0].id
            others = [e for e in analysis.elems if e.container == t and e.name != r
                      and _read_after_stmt(fdef, s, e.name)]
            if others:
                continue
            if not _read_after_stmt(fdef, s, t):
                plans[(id(s), r)] = RowPlan(r, t, None, how)
            elif index is not None and any(x is s for x in ast.walk(loop)) and not any(
                    t in changed_roots(x) and not deep_changes(x) or t in _bound_names(x)
                    for x in ast.walk(loop) if isinstance(x, ast.stmt) and x is not loop) \
                    and _flushes(fdef, loop, t) is not None:
                plan = RowPlan(r, t, index, how)
                plans[(id(s), r)] = plan
                for where, x in _flushes(fdef, loop, t):
                    plans.setdefault((where, id(x)), {})[(r, t)] = plan
    return plans


def _flushes(fdef, loop, t: str):
    """Where the row of ``for i, row in enumerate(t)`` is written back to ``t[i]``:
    ``[("before" | "after", statement)]`` -- before each statement of the loop's
    body reading t and each break or continue, after the body's last statement
    (so that t shows the row's changes wherever it is read, and a loop writing the
    row item by item keeps its native code); None where that cannot be told (a try
    statement in the function, a while loop testing t in the body)."""
    if any(isinstance(n, ast.Try) or type(n).__name__ == "TryStar" for n in ast.walk(fdef)):
        return None

    def reads(node) -> bool:
        return any(isinstance(n, ast.Name) and n.id == t and isinstance(n.ctx, ast.Load)
                   for n in ast.walk(node))

    out, stack = [], list(loop.body)
    while stack:
        x = stack.pop()
        if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(x, ast.While) and reads(x.test):
            return None
        if isinstance(x, (ast.If, ast.While)):
            head = [x.test]
        elif isinstance(x, (ast.For, ast.AsyncFor)):
            head = [x.iter]
        elif isinstance(x, (ast.With, ast.AsyncWith)):
            head = [i.context_expr for i in x.items]
        else:
            head = [x]
        if isinstance(x, (ast.Break, ast.Continue)) or any(reads(h) for h in head):
            out.append(("before", x))
        if head[0] is not x:
            stack.extend(x.body + getattr(x, "orelse", []))
    last = loop.body[-1]
    if not isinstance(last, (ast.Break, ast.Continue, ast.Return, ast.Raise)):
        out.append(("after", last))
    return out


def hazard_check(names, holder, change, value_text: str, error_tag: str,
                 kind: str = "changed") -> str:
    """The program text refusing, at run time, a pair (alias_hazards) when its value
    (``value_text``, read before the statement making it) is a list or dict."""
    shown = sorted(names)
    line = change.lineno
    if kind == "deep":
        held = f"'{shown[0]}'" if shown else "one list or dict more than once"
        what = (f"'{holder}' holds {held} here and is changed in place through an item "
                f"later (line {line}): in Python every name and place holding that object "
                f"would see the change")
        fix = (f"store copies (list(row), [[0] * n for _ in range(m)]) if separate objects "
               f"are meant")
    elif holder is not None:
        what = (f"'{shown[0]}' is put into '{holder}' here and changed in place later (line "
                f"{line}): in Python '{holder}' would see that change")
        fix = f"finish '{shown[0]}' before storing it, or store a copy (list({shown[0]}))"
    else:
        what = (f"{' and '.join(repr(n) for n in shown)} name one object here, and one of "
                f"them is changed in place later (line {line}) while the other still names "
                f"it: in Python both would see that change")
        fix = "use one name, or copy (e = d.copy(), ys = list(xs)) if a copy is meant"
    msg = (f"{error_tag}UnsupportedError] {what}; lists and dicts are values in a jit "
           f"function, so tessera.jit cannot give Python's answer: {fix}")
    return f"if(is_mutable_container({value_text}), assert(false, \"{msg}\"))"


def static_hazard(stmt) -> bool:
    """Whether the pair is known to be of a list or dict when translating
    (``a = b = []``): refused then, not at run time."""
    return isinstance(stmt, ast.Assign) and _container_display(stmt.value) and not isinstance(
        stmt.value, ast.Name)


__all__ = ["Analysis", "RowPlan", "alias_analysis", "deep_changes", "hazard_check", "row_plans",
           "repetition", "static_hazard"]
