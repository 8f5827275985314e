"""What a jit call gives back to its caller: its result's tuples (the language
has lists only), and the lists and dicts the function changes in place.

Inside a program lists and dicts are values (docs/python.md, "Differences from
Python"), so a function that writes into a list argument (``bodies[i][0] +=
dx``, ``xs.append(v)``, ``d[k] = v``) changes the program's copy only.  The
entry function's parameters that the body changes in place and never rebinds
are found here from the source; when such an argument is a list, tuple or dict,
the program returns their final values beside its result and the caller's
objects are updated in place, nested lists too, so that references the caller
holds to the inner lists (the benchmarks game's bodies) see the new values.
"""

from __future__ import annotations

import ast

import numpy as np

from . import _numpy_map as M
from ._sets import SET_MARK

# Methods that change their receiver (lists, dicts): a call on a parameter, or
# on an element of one (``p[i].append(v)``), changes the caller's object.
_CHANGING_METHODS = frozenset(
    set(M.INPLACE_METHODS) | set(M.MUTATING_LIST_METHODS)
    | {"pop", "popitem", "setdefault", "sort"}
)

# The argument types whose changes are given back (arrays are shared, not copied).
CONTAINERS = (list, tuple, dict)


def _root(node):
    """The variable a chain of subscripts (``p[i][0]``) starts from, or None."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node):
    if isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            yield from _targets(e)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def written_params(fdef, helper_changes=None) -> tuple:
    """The positions of ``fdef``'s parameters that its body (not its nested
    functions) changes in place, through a subscript or a changing method, or by
    passing them to a helper that changes them (``helper_changes(call)``: the
    positions of the call's arguments it gives back, list_changed_params), and
    never rebinds (after ``p = list(p)`` the changes are to another object)."""
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ()
    a = fdef.args
    names = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        names.append(a.vararg.arg)
    names += [x.arg for x in a.kwonlyargs]
    written: set = set()
    rebound: set = set()
    stack = list(fdef.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.For)):
            if isinstance(n, ast.Assign):
                tops = n.targets
            elif isinstance(n, ast.Delete):
                tops = n.targets
            else:
                tops = [n.target]
            for top in tops:
                for t in _targets(top):
                    if isinstance(t, ast.Subscript):
                        written.add(_root(t))
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in _CHANGING_METHODS):
            written.add(_root(n.func.value))
        if isinstance(n, ast.Call) and helper_changes is not None:
            written.update(a.id for i, a in enumerate(n.args)
                           if i in helper_changes(n) and isinstance(a, ast.Name))
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            rebound.add(n.id)
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            rebound.update(n.names)
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            # a list's += and *=, a dict's |=, change it in place (a number's rebind
            # it, but a number is not given back)
            (written if isinstance(n.op, (ast.Add, ast.Mult, ast.BitOr)) else rebound).add(
                n.target.id)
            stack.append(n.value)
            continue
        stack.extend(ast.iter_child_nodes(n))
    return tuple(i for i, p in enumerate(names) if p in written and p not in rebound)


# Methods only lists and dicts have (an array has none of them): a helper calling
# one on its parameter is given a list or dict there.
_LIST_ONLY_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear",
                                "reverse", "update", "popitem", "setdefault"})


def list_changed_params(fdef, helper_changes=None) -> tuple:
    """The positions of the parameters ``fdef`` changes in place (written_params)
    when it calls a list's or dict's own method on one of them (``cols.append(c)``,
    ``cols.pop()``, also through ``cols[i]``) or passes one to a helper that does:
    a helper the program calls gives their final values back beside its result
    and the caller's variables are rebound to them (n-queens' backtracking over a
    list passed down a recursion). The helpers that only write by subscript stay
    as they are (arrays are shared: spectral norm's ``out[i] = s``)."""
    written = written_params(fdef, helper_changes)
    if not written:
        return ()
    a = fdef.args
    names = [x.arg for x in a.posonlyargs + a.args]
    listy: set = set()
    stack = list(fdef.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in _LIST_ONLY_METHODS):
            listy.add(_root(n.func.value))
        if isinstance(n, ast.Call) and helper_changes is not None:
            listy.update(a.id for i, a in enumerate(n.args)
                         if i in helper_changes(n) and isinstance(a, ast.Name))
        stack.extend(ast.iter_child_nodes(n))
    if not any(i < len(names) and names[i] in listy for i in written):
        return ()
    # every written parameter comes back (used[v] = True beside prefix.append(v))
    return tuple(i for i in written if i < len(names))


# Items whose identity write_back keeps (updated in place, or kept when the
# program wrote into them): anything else is replaced by the program's value.
_KEPT_ITEMS = (list, dict, tuple, np.ndarray)


def _flat(items) -> bool:
    """Whether none of ``items`` is a container or an array (their types looked
    at once each, in C: a table's row of numbers costs one pass)."""
    return not any(issubclass(t, _KEPT_ITEMS) for t in set(map(type, items)))


def write_back(target, value) -> None:
    """Updates the caller's ``target`` (a list, a tuple holding lists, a dict)
    in place to the program's final ``value`` of it: element by element, so
    that inner lists keep their identity; arrays the program wrote into are the
    caller's own already (an element rebound to another array is replaced). A
    list of numbers (a table's row) and its new value of numbers: one slice
    assignment, the list itself kept."""
    if isinstance(target, list) and isinstance(value, (list, tuple)):
        if _flat(target) and _flat(value):
            target[:] = value
            return
        common = min(len(target), len(value))
        for i in range(common):
            new = _updated(target[i], value[i])
            if new is not target[i]:
                target[i] = new
        if len(value) > common:
            target.extend(value[common:])
        elif len(target) > common:
            del target[common:]
    elif isinstance(target, tuple) and isinstance(value, (list, tuple)):
        # A tuple cannot change, its lists can: p[0][1] = v with p a tuple.
        for t, v in zip(target, value):
            _updated(t, v)
    elif isinstance(target, dict) and isinstance(value, dict):
        for k in [k for k in target if k not in value]:
            del target[k]
        for k, v in value.items():
            if k in target:
                new = _updated(target[k], v)
                if new is not target[k]:
                    target[k] = new
            else:
                target[k] = v


def shared_container(args, names) -> str | None:
    """Where two of a call's arguments (or two places inside them) hold the same
    list or dict, as ``'t[0]' and 'xs'``; None when no object is held twice.
    A function that changes an argument in place gives the caller Python's
    objects back (write_back), but inside the program each place is its own
    value: with a shared object, a change through one place would not show
    through the other, as it does in Python, so such a call is refused."""
    seen: dict = {}
    stack = [(a, n) for a, n in zip(args, names) if isinstance(a, CONTAINERS)]
    while stack:
        obj, where = stack.pop()
        if isinstance(obj, (list, dict)):
            if id(obj) in seen:
                return f"'{seen[id(obj)]}' and '{where}'"
            seen[id(obj)] = where
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for k, v in items:
            if isinstance(v, CONTAINERS):
                stack.append((v, f"{where}[{k!r}]"))
    return None


def _updated(old, new):
    """What an element of a written-back container becomes: the old object
    updated in place when it is a container of the same kind or the array the
    program wrote into, else the new value."""
    if isinstance(old, (list, dict)) and type(new) is type(old) or (
            isinstance(old, list) and isinstance(new, tuple)):
        write_back(old, new)
        return old
    if isinstance(old, tuple) and isinstance(new, (list, tuple)) and len(old) == len(new):
        items = [_updated(o, v) for o, v in zip(old, new)]
        if all(i is o for i, o in zip(items, old)):
            return old
        return tuple(items)
    if isinstance(old, np.ndarray) and isinstance(new, np.ndarray):
        if new is old or (new.shape == old.shape and new.dtype == old.dtype
                          and np.shares_memory(new, old)):
            return old
    return new


# ---------------------------------------------------------------- elements changed in place


# Calls whose result is an object the container they read holds (not a copy):
# ``d.setdefault(k, [])``, ``d.get(k)``, ``max(rows, key=len)``, ``random.choice(rows)``.
_ELEMENT_METHODS = frozenset({"setdefault", "get"})
_ELEMENT_FUNCTIONS = frozenset({"max", "min", "choice"})


def _is_element(value) -> bool:
    """Whether ``v = value`` binds an object another holds: ``xs[i]`` (not a
    slice, a new list), a call giving one of a container's objects
    (``d.setdefault(k, [])``, ``d.get(k)``, ``max(rows)``), or, unpacked, a
    variable or an element."""
    if isinstance(value, ast.Call):
        f = value.func
        if isinstance(f, ast.Attribute):
            return f.attr in _ELEMENT_METHODS or (f.attr == "choice" and bool(value.args))
        return isinstance(f, ast.Name) and f.id in _ELEMENT_FUNCTIONS and bool(value.args)
    return isinstance(value, ast.Subscript) and not isinstance(value.slice, ast.Slice)


def changed_roots(stmt) -> list:
    """The variables a statement changes in place: ``v[...] = x``, ``v[...] op= x``,
    ``del v[...]``, ``v.append(x)`` (also through ``v[i]``), and ``v += x``,
    ``v *= k``, ``v |= d`` (in place for a list or dict)."""
    roots = []
    if isinstance(stmt, (ast.Assign, ast.Delete)):
        for top in stmt.targets:
            roots += [_root(t) for t in _targets(top) if isinstance(t, ast.Subscript)]
    elif isinstance(stmt, ast.AugAssign):
        t = stmt.target
        if not isinstance(t, ast.Name):
            roots.append(_root(t))
        elif isinstance(stmt.op, (ast.Add, ast.Mult, ast.BitOr)):
            roots.append(t.id)  # list += / *= and dict |= change the object
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        f = stmt.value.func
        if isinstance(f, ast.Attribute) and f.attr in _CHANGING_METHODS:
            roots.append(_root(f.value))
    return [r for r in roots if r is not None]


def element_names(fdef, given_back=()) -> set:
    """The element variables (element_kinds) that ``fdef``'s body changes in place."""
    kinds, changed, excluded = element_kinds(fdef, given_back)
    return {name for name in changed
            if kinds.get(name) == {"element"} and name not in excluded}


def element_vars(fdef, given_back=()) -> set:
    """Every variable of ``fdef``'s body that only ever holds an object another
    holds (element_kinds), changed in place or not: a call of a helper that gives
    back a list passed in it (list_changed_params) changes it too."""
    kinds, _, excluded = element_kinds(fdef, given_back)
    return {name for name, k in kinds.items() if k == {"element"} and name not in excluded}


def element_kinds(fdef, given_back=()):
    """What each variable of ``fdef``'s body (not its nested functions) holds, the
    variables it changes in place, and those declared global or nonlocal. An
    "element" only ever holds an object another holds -- a for loop's target,
    ``v = xs[i]``, ``a, b = pair``, a parameter (its caller's object; not those in
    ``given_back``, which _list_args gives back). In Python a change of it reaches
    the object it came from; in a program, where lists and dicts are values, it
    would not: such a change of a list or dict is refused at run time (arrays
    are shared, and pass)."""
    a = fdef.args
    kinds: dict = {}
    for p in a.posonlyargs + a.args + a.kwonlyargs + ([a.vararg] if a.vararg else []):
        if p.arg not in given_back:
            kinds.setdefault(p.arg, set()).add("element")
    changed: set = set()
    excluded: set = set()
    stack = list(fdef.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if not isinstance(n, ast.Lambda):
                kinds.setdefault(n.name, set()).add("other")
            continue
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # their targets are their own
        if isinstance(n, ast.stmt):
            changed.update(changed_roots(n))
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            excluded.update(n.names)
        if isinstance(n, (ast.For, ast.AsyncFor)):
            for t in _targets(n.target):
                if isinstance(t, ast.Name):
                    kinds.setdefault(t.id, set()).add("element")
            stack.extend([n.iter] + n.body + n.orelse)
            continue
        if isinstance(n, ast.Assign):
            for top in n.targets:
                unpacking = isinstance(top, (ast.Tuple, ast.List))
                element = (_is_element(n.value) or
                           (unpacking and isinstance(n.value, (ast.Name, ast.Subscript))))
                for t in _targets(top):
                    if isinstance(t, ast.Name):
                        starred = unpacking and any(isinstance(e, ast.Starred) and e.value is t
                                                    for e in top.elts)
                        kind = "element" if element and not starred else "other"
                        kinds.setdefault(t.id, set()).add(kind)
            stack.append(n.value)
            stack.extend(t for top in n.targets for t in _targets(top)
                         if not isinstance(t, ast.Name))
            continue
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            stack.append(n.value)  # a number's += rebinds, a list's extends: changed_roots
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            kinds.setdefault(n.id, set()).add("other")  # with ... as, :=, except ... as
        stack.extend(ast.iter_child_nodes(n))
    return kinds, changed, excluded


def element_check(var: str, name: str, error_tag: str) -> str:
    """The program text refusing, at run time, to change in place the list or
    dict in variable ``name`` (read as ``var``) that another object holds
    (element_names): Python would change it there too, a program's lists are
    values. Arrays and numbers pass (native code too)."""
    return (f"if(is_mutable_container({var}), assert(false, "
            f"\"{error_tag}UnsupportedError] changing the list or dict '{name}' in place "
            f"is not supported by tessera.jit here: it is an object another one holds (an "
            f"element of a list or dict: a for loop's variable, {name} = xs[i], d.get(k), "
            f"d.setdefault(k, v), max(xs), unpacking; or a parameter), which Python would "
            f"change too, and lists and dicts are values in a jit function; change it "
            f"through what holds it (xs[i][0] = v, d.setdefault(k, []).append(v)), "
            f"return the new value, or use an array\"))")


# ---------------------------------------------------------------- results' tuples


_TUPLE_CALLS = {"shape", "nonzero", "meshgrid", "divmod", "svd", "eigh", "eig", "qr", "lstsq",
                "slogdet"}


def _result_spec(node):
    """Which parts of a returned expression are tuples in Python (the language
    only has lists): tuple displays, ``x.shape``, ``np.nonzero(...)``, ...;
    and which are sets (marked by _sets.py)."""
    if getattr(node, SET_MARK, False):
        return ("set", None)
    if isinstance(node, (ast.Tuple, ast.List)):
        kind = "tuple" if isinstance(node, ast.Tuple) else "list"
        return (kind, [_result_spec(e) for e in node.elts])
    if isinstance(node, ast.Attribute) and node.attr == "shape":
        return ("tuple", None)
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name in _TUPLE_CALLS or (name == "where" and len(node.args) == 1):
            return ("tuple", None)
    return None


def _returns_spec(fdef):
    specs = []
    # Walked with a stack, in source order (a chain nests as deep as it is long).
    stack = list(reversed(fdef.body))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Return):
            specs.append(_result_spec(n.value) if n.value is not None else None)
        stack.extend(reversed(list(ast.iter_child_nodes(n))))
    if specs and all(sp == specs[0] for sp in specs):
        return specs[0]
    return None


def convert_result(value, spec):
    """Applies a result spec: lists that were tuples in Python become tuples
    (tuples made by the program already come back as tuples; the spec covers
    the primitives that return lists where NumPy returns tuples); a set
    (held as a dict, _sets.py) becomes a Python set."""
    if spec is not None and spec[0] == "set" and isinstance(value, dict):
        return set(value)
    if spec is None or not isinstance(value, (list, tuple)):
        return value
    kind, items = spec
    if items is not None and len(items) == len(value):
        value = type(value)(convert_result(v, s) for v, s in zip(value, items))
    return tuple(value) if kind == "tuple" else value
