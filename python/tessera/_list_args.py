"""Lists and dicts a jit function changes in place, given back to the caller.

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


def written_params(fdef) -> tuple:
    """The positions of ``fdef``'s parameters that its body (not its nested
    functions) changes in place, through a subscript or a changing method,
    and never rebinds (after ``p = list(p)`` the changes are to another object)."""
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
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            rebound.add(n.id)
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            rebound.update(n.names)
        stack.extend(ast.iter_child_nodes(n))
    return tuple(i for i, p in enumerate(names) if p in written and p not in rebound)


def write_back(target, value) -> None:
    """Updates the caller's ``target`` (a list, a tuple holding lists, a dict)
    in place to the program's final ``value`` of it: element by element, so
    that inner lists keep their identity; arrays the program wrote into are the
    caller's own already (an element rebound to another array is replaced)."""
    if isinstance(target, list) and isinstance(value, (list, tuple)):
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
