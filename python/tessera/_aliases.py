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
"""

from __future__ import annotations

import ast

from ._list_args import _root, _targets, changed_roots

# Methods that store their argument in the receiver: ``rows.append(row)``.
_STORING_METHODS = {"append": 0, "insert": 1, "setdefault": 1}


class Pair:
    """Names that reach one object since ``origin`` (a statement), and the
    variable holding it as an element (``rows`` of ``rows.append(row)``), if any."""

    __slots__ = ("origin", "names", "holder")

    def __init__(self, origin, names, holder=None):
        self.origin, self.names, self.holder = origin, frozenset(names), holder

    def live(self) -> bool:
        return len(self.names) >= (1 if self.holder else 2)


def _key(p: Pair):
    return (id(p.origin), p.holder)


def _merge(*states) -> dict:
    out: dict = {}
    for st in states:
        for k, p in st.items():
            q = out.get(k)
            out[k] = p if q is None else Pair(p.origin, p.names | q.names, p.holder)
    return out


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
                    out.append(Pair(stmt, [v.id], holder=_root(top)))
        if isinstance(v, (ast.List, ast.Tuple, ast.Dict)) and names:
            items = v.values if isinstance(v, ast.Dict) else v.elts
            for e in items:
                if isinstance(e, ast.Name) and e.id in variables:
                    out.append(Pair(stmt, [e.id], holder=names[0]))
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        args = stmt.value.args
        if isinstance(f, ast.Attribute) and f.attr in _STORING_METHODS:
            i = _STORING_METHODS[f.attr]
            holder = _root(f.value)
            if holder is not None and len(args) > i and isinstance(args[i], ast.Name) \
                    and args[i].id in variables:
                out.append(Pair(stmt, [args[i].id], holder=holder))
    return out


class _Walk:
    def __init__(self, variables):
        self.variables = variables
        self.hazards: dict = {}  # id(origin) -> (origin, names, holder, changing statement)

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
                if p.live() and name in p.names and id(p.origin) not in self.hazards:
                    if p.origin is not s:
                        self.hazards[id(p.origin)] = (p.origin, p.names, p.holder, s)
        state = self.rebind(state, _bound_names(s))
        for p in _made_pairs(s, self.variables):
            state = dict(state)
            # joining a pair that holds already: ``f = e`` after ``e = d``
            names = set(p.names)
            if p.holder is None:
                for q in state.values():
                    if q.live() and q.holder is None and names & q.names:
                        names |= q.names
            state[_key(p)] = Pair(p.origin, names, p.holder)
        return state

    @staticmethod
    def rebind(state: dict, names: set) -> dict:
        if not names:
            return state
        out = {}
        for k, p in state.items():
            q = Pair(p.origin, p.names - names, None if p.holder in names else p.holder)
            if q.live():
                out[k] = q
        return out


def alias_hazards(fdef) -> dict:
    """``{id(statement): (statement, names, holder, change)}`` for the statements of
    ``fdef`` that make two names (or a name and a holder) of one object which
    ``change`` (a later statement) changes in place while they still share it."""
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    variables = set()
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            variables.add(n.id)
        elif isinstance(n, ast.arg):
            variables.add(n.arg)
    w = _Walk(variables)
    w.block(fdef.body, {})
    return w.hazards


def hazard_check(names, holder, change, value_text: str, error_tag: str) -> str:
    """The program text refusing, at run time, a pair (alias_hazards) when its value
    (``value_text``, read before the statement making it) is a list or dict."""
    shown = sorted(names)
    line = change.lineno
    if holder is not None:
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


__all__ = ["alias_hazards", "hazard_check", "static_hazard"]
