"""Generator functions under tessera.jit: run to their end when called.

A generator function (``def g(n, k): for i in range(n): yield i * k``) is
translated as a function that returns the list of the values it yields, which
is what every consumer tessera translates does with it: ``list(g(...))``,
``tuple``, ``sum``, ``sorted``, a ``for`` loop over it, ``zip`` and
``enumerate``. Two kinds are refused, naming the line: a generator that
receives values (``x = yield v``: nothing sends them), and one with a
``while True`` loop (it may only end when its consumer stops asking, and here
it runs first, so it would never end).
"""

import ast

# The list a rewritten generator collects its values in; a name no user writes.
_YIELDED = "_tessera_yielded_"


def _own_nodes(fn):
    """The nodes of ``fn``'s own body, not of the functions or lambdas inside it."""
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    stack = [n for n in fn.body if not isinstance(n, scopes)]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, scopes))


def _is_generator(fn) -> bool:
    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(fn))


def _always_true(test) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value)


def _check(fn, fname: str, unsupported) -> None:
    statements = set()
    for n in _own_nodes(fn):
        if isinstance(n, ast.Expr) and isinstance(n.value, (ast.Yield, ast.YieldFrom)):
            statements.add(id(n.value))
    for n in _own_nodes(fn):
        if isinstance(n, (ast.Yield, ast.YieldFrom)) and id(n) not in statements:
            raise unsupported(
                f"a generator that receives values (a yield used as a value, as in "
                f"'x = yield v') is not supported by tessera.jit: generators run to their "
                f"end when called, and nothing sends to them (at {fname}:{n.lineno})")
        if isinstance(n, ast.While) and _always_true(n.test):
            raise unsupported(
                f"a generator with a 'while True' loop ('{fn.name}') is not supported by "
                f"tessera.jit: a generator runs to its end when called (its values "
                f"collected in a list), and this one may only end when its consumer stops; "
                f"give the loop a condition or return a list (at {fname}:{n.lineno})")


class _Collect(ast.NodeTransformer):
    """``yield v`` -> ``collected.append(v)``; ``yield from it`` -> a loop of
    appends; ``return`` -> ``return collected``. Nested functions are left alone."""

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Expr(self, node):
        value = node.value
        if isinstance(value, ast.Yield):
            item = value.value if value.value is not None else ast.Constant(None)
            return ast.copy_location(ast.Expr(_append(item)), node)
        if isinstance(value, ast.YieldFrom):
            loop = ast.For(target=ast.Name(_YIELDED + "item", ast.Store()), iter=value.value,
                           body=[ast.Expr(_append(ast.Name(_YIELDED + "item", ast.Load())))],
                           orelse=[])
            return ast.copy_location(loop, node)
        return self.generic_visit(node)

    def visit_Return(self, node):
        # A generator's ``return v`` ends it; v goes to StopIteration, which no
        # consumer of the list sees.
        return ast.copy_location(ast.Return(ast.Name(_YIELDED, ast.Load())), node)


def _append(item):
    return ast.Call(ast.Attribute(ast.Name(_YIELDED, ast.Load()), "append", ast.Load()),
                    [item], [])


def _rewrite(fn) -> None:
    start = fn.body[0]
    body = []
    for stmt in fn.body:
        new = _Collect().visit(stmt)
        body.extend(new if isinstance(new, list) else [new])
    first = ast.copy_location(
        ast.Assign([ast.Name(_YIELDED, ast.Store())], ast.List([], ast.Load())), start)
    last = ast.Return(ast.Name(_YIELDED, ast.Load()))
    ast.copy_location(last, fn.body[-1])
    fn.body = [first] + body + [last]
    ast.fix_missing_locations(fn)


def first_yield_line(fn) -> int:
    """The line of the first yield of a generator function rewritten by
    ``eager_generators`` (it marks the appends it put in their place)."""
    return getattr(fn, "_tessera_first_yield", fn.lineno)


def eager_generators(tree, fname: str, unsupported) -> None:
    """Rewrites, in place, every generator function in ``tree`` (the function
    being translated and those defined inside it) to return its values as a
    list; ``unsupported`` is the exception class for the two refusals."""
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        if _is_generator(fn):
            _check(fn, fname, unsupported)
            fn._tessera_first_yield = min(n.lineno for n in _own_nodes(fn)
                                          if isinstance(n, (ast.Yield, ast.YieldFrom)))
            _rewrite(fn)
