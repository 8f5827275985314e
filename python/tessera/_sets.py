"""Python sets in jit code, rewritten into dicts before translation.

A set is held as a dict whose keys are its elements (each value True): dicts
already have Python's membership, length, equality and ``sorted`` of their
keys. Which names hold sets is found from the function's own assignments
(``s = set()``, ``s = {a, b}``, ``s = {f(x) for x in xs}``, ``s = t | u``, ...);
a name bound both to a set and to something else is refused. Python iterates a
set in an order of its own (by hash, not by insertion), which a dict does not
reproduce: every use of a set that would expose that order (``for x in s``,
``list(s)``, passing it to a function) is refused with an error that suggests
``sorted(s)``, never a silently different answer. A set returned to Python is
a Python set (the Return's value is marked for the result spec).
"""

from __future__ import annotations

import ast

# The mark on a rewritten expression that is a set (read by _list_args._result_spec).
SET_MARK = "_tessera_set"
# The calls the rewrite emits for sum(s), min(s), max(s); _calls.py writes
# each as its helper (_templates.py).
SET_CALLS = {f"__tessera_set_{op}": f"set_{op}" for op in ("sum", "min", "max")}

_SET_METHODS_STMT = ("add", "discard", "remove", "clear", "update", "difference_update",
                     "intersection_update")
_SET_METHODS_EXPR = ("union", "intersection", "difference", "symmetric_difference", "copy",
                     "issubset", "issuperset", "isdisjoint")
_SET_OPS = (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor)
_ORDER_HINT = ("Python iterates a set in its own hash order, which tessera does not reproduce; "
               "use sorted({name}) (or keep a list)")


def _mark(node):
    setattr(node, SET_MARK, True)
    return node


def _true():
    return ast.Constant(True)


def _name(id_, ctx=None):
    return ast.Name(id_, ctx or ast.Load())


def _call(fname: str, *args):
    return ast.Call(_name(fname), list(args), [])


class _Names:
    """The names of one function (with its nested functions) that hold sets."""

    def __init__(self, tree, builtin_set: bool):
        self.builtin_set = builtin_set
        self.names: set = set()
        binds: list = []  # (name, value node or None for a non-set binding, node)
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    for x in ast.walk(t):
                        if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                            binds.append((x.id, n.value if isinstance(t, ast.Name) else None, n))
            elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and isinstance(n.target, ast.Name):
                if n.value is not None:
                    value = n.value
                    if isinstance(n, ast.AugAssign):
                        value = ast.BinOp(_name(n.target.id), n.op, n.value)
                    binds.append((n.target.id, value, n))
            elif isinstance(n, ast.NamedExpr):
                binds.append((n.target.id, n.value, n))
            elif isinstance(n, (ast.For, ast.comprehension, ast.withitem)):
                target = n.target if not isinstance(n, ast.withitem) else n.optional_vars
                for x in ast.walk(target) if target is not None else ():
                    if isinstance(x, ast.Name):
                        binds.append((x.id, None, n))
            elif isinstance(n, ast.arg):
                binds.append((n.arg, None, n))
        changed = True
        while changed:  # t = s makes t a set once s is one
            changed = False
            for name, value, _ in binds:
                if name not in self.names and value is not None and self.is_set(value):
                    self.names.add(name)
                    changed = True
        self.bad = [(name, node) for name, value, node in binds
                    if name in self.names and (value is None or not self.is_set(value))]

    def is_set(self, node) -> bool:
        if isinstance(node, (ast.Set, ast.SetComp)):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Call) and not node.keywords:
            f = node.func
            if isinstance(f, ast.Name) and f.id == "set" and self.builtin_set:
                return len(node.args) <= 1
            if isinstance(f, ast.Attribute) and f.attr in _SET_METHODS_EXPR[:5]:
                return self.is_set(f.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _SET_OPS):
            return self.is_set(node.left) or self.is_set(node.right)
        if isinstance(node, ast.IfExp):
            return self.is_set(node.body) and self.is_set(node.orelse)
        return False


class _Rewriter(ast.NodeTransformer):
    def __init__(self, names: _Names, fname: str, unsupported):
        self.n = names
        self.fname = fname
        self.unsupported = unsupported
        self.tmp = 0

    def refuse(self, what: str, node):
        raise self.unsupported(f"{what} (at {self.fname}:{getattr(node, 'lineno', '?')})")

    def fresh(self) -> str:
        self.tmp += 1
        return f"__set_k{self.tmp}"

    # ------------------------------------------------------------ set values

    def set_value(self, node):
        """The dict expression for a set expression ``node`` (children rewritten)."""
        if isinstance(node, ast.Name):
            return _mark(ast.Name(node.id, ast.Load()))
        if isinstance(node, ast.Set):
            elts = [self.visit(e) for e in node.elts]
            if any(isinstance(e, ast.Starred) for e in elts):
                self.refuse("star-args (*x) in a set display is not supported by tessera.jit", node)
            if all(isinstance(e, ast.Constant) and type(e.value) in (int, str) for e in elts):
                return _mark(ast.Dict(elts, [_true() for _ in elts]))
            k = self.fresh()  # the dict display takes only int and str keys
            return _mark(ast.DictComp(_name(k), _true(), [ast.comprehension(
                _name(k, ast.Store()), ast.List(elts, ast.Load()), [], 0)]))
        if isinstance(node, ast.SetComp):
            comp = ast.DictComp(self.visit(node.elt), _true(),
                                [self.generator(g) for g in node.generators])
            return _mark(comp)
        if isinstance(node, ast.IfExp):
            return _mark(ast.IfExp(self.visit(node.test), self.set_value(node.body),
                                   self.set_value(node.orelse)))
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):  # set() / set(xs)
                if not node.args:
                    return _mark(ast.Dict([], []))
                arg = node.args[0]
                if self.n.is_set(arg):
                    return self.set_value(arg)
                k = self.fresh()
                return _mark(ast.DictComp(_name(k), _true(), [
                    ast.comprehension(_name(k, ast.Store()), self.visit(arg), [], 0)]))
            if f.attr == "copy":
                return self.set_value(f.value)
            op = {"union": ast.BitOr(), "intersection": ast.BitAnd(), "difference": ast.Sub(),
                  "symmetric_difference": ast.BitXor()}[f.attr]
            if len(node.args) != 1:
                self.refuse(f"set.{f.attr}() with {len(node.args)} arguments is not supported "
                            "by tessera.jit (give one)", node)
            return self.binop(f.value, op, self.as_set(node.args[0]), node,
                              iterable=not self.n.is_set(node.args[0]))
        if isinstance(node, ast.BinOp):
            return self.binop(node.left, node.op, node.right, node)
        raise AssertionError(node)

    def as_set(self, node):
        """The argument of s.union(xs), s.update(xs), ...: any iterable, as in Python."""
        return node if self.n.is_set(node) else ast.Call(_name("set"), [node], [])

    def order_refusal(self, node):
        self.refuse("this use of a set is not supported by tessera.jit: "
                    + _ORDER_HINT.format(name="s"), node)

    def generator(self, g):
        """A loop of a set comprehension: over a set too (the result is a set)."""
        if self.n.is_set(g.iter):
            g.iter = self.set_value(g.iter)
            g.target = self.visit(g.target)
            g.ifs = [self.visit(c) for c in g.ifs]
            return g
        return self.visit(g)

    def operand(self, node, whole):
        if not self.n.is_set(node):
            self.refuse(f"'{type(whole.op).__name__}' of a set and a non-set is not supported "
                        "by tessera.jit (both operands must be sets, as in Python)", whole)
        return self.set_value(node)

    def binop(self, left, op, right, whole, iterable=False):
        """s | t, s & t, s - t, s ^ t as dict comprehensions: each operand is
        evaluated once (bound by a one-item loop). `iterable`: the right
        operand is set(xs) of s.intersection(xs)'s iterable."""
        if not isinstance(whole, ast.BinOp):
            whole = ast.BinOp(left, op, right, lineno=whole.lineno)
        a, b = self.operand(left, whole), self.operand(right, whole)
        k, ta, tb = self.fresh(), self.fresh(), self.fresh()

        def gen(target, it, ifs=()):
            return ast.comprehension(_name(target, ast.Store()), it, list(ifs), 0)

        def has(s, neg=False):
            return ast.Compare(_name(k), [ast.NotIn() if neg else ast.In()], [_name(s)])

        bind = [gen(ta, ast.Tuple([a], ast.Load())), gen(tb, ast.Tuple([b], ast.Load()))]
        if isinstance(op, ast.BitOr):
            p = self.fresh()
            gens = bind + [gen(p, ast.Tuple([_name(ta), _name(tb)], ast.Load())),
                           gen(k, _name(p))]
        elif isinstance(op, ast.BitAnd) and iterable:
            # CPython walks the iterable, keeping its elements: {0}.intersection([0.0]) is {0.0}.
            gens = bind + [gen(k, _name(tb), [has(ta)])]
        elif isinstance(op, ast.BitAnd):
            # CPython's set_intersection walks the smaller set (the right one
            # when both are as big) and keeps its elements, whose kinds may
            # differ from the other's equal ones: {0, 6} & {0.0, 6.0} is {0.0, 6.0}.
            p, q = self.fresh(), self.fresh()
            right_smaller = ast.Compare(ast.Call(_name("len"), [_name(tb)], []), [ast.LtE()],
                                        [ast.Call(_name("len"), [_name(ta)], [])])
            pairs = ast.IfExp(right_smaller,
                              ast.Tuple([ast.Tuple([_name(tb), _name(ta)], ast.Load())], ast.Load()),
                              ast.Tuple([ast.Tuple([_name(ta), _name(tb)], ast.Load())], ast.Load()))
            gens = bind + [ast.comprehension(ast.Tuple([_name(p, ast.Store()),
                                                        _name(q, ast.Store())], ast.Store()),
                                             pairs, [], 0),
                           gen(k, _name(p), [has(q)])]
        elif isinstance(op, ast.Sub):
            gens = bind + [gen(k, _name(ta), [has(tb, neg=True)])]
        else:
            p, q = self.fresh(), self.fresh()
            pairs = ast.Tuple([ast.Tuple([_name(ta), _name(tb)], ast.Load()),
                               ast.Tuple([_name(tb), _name(ta)], ast.Load())], ast.Load())
            gens = bind + [ast.comprehension(ast.Tuple([_name(p, ast.Store()),
                                                        _name(q, ast.Store())], ast.Store()),
                                             pairs, [], 0),
                           gen(k, _name(p), [has(q, neg=True)])]
        return _mark(ast.DictComp(_name(k), _true(), gens))

    # ------------------------------------------------------------ contexts

    def visit_Name(self, node):
        if node.id in self.n.names and isinstance(node.ctx, ast.Load):
            self.refuse(f"this use of the set '{node.id}' is not supported by tessera.jit: "
                        + _ORDER_HINT.format(name=node.id)
                        + "; a set supports in, not in, len, sorted, sum, min, max, |, &, -, ^, "
                        "==, add, discard, remove, and being returned", node)
        return node

    def visit_Set(self, node):
        self.order_refusal(node)

    visit_SetComp = visit_Set

    def visit_BinOp(self, node):
        if isinstance(node.op, _SET_OPS) and self.n.is_set(node):
            self.order_refusal(node)
        return self.generic_visit(node)

    def visit_IfExp(self, node):
        if self.n.is_set(node):
            self.order_refusal(node)
        node.test = self.truth(node.test)
        node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
        return node

    def truth(self, node):
        """A condition: a set there is its truth (not empty), as in Python."""
        return self.set_value(node) if self.n.is_set(node) else self.visit(node)

    def visit_If(self, node):
        node.test = self.truth(node.test)
        node.body = [self.visit(x) for x in node.body]
        node.orelse = [self.visit(x) for x in node.orelse]
        return node

    visit_While = visit_If

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            node.operand = self.truth(node.operand)
            return node
        return self.generic_visit(node)

    def visit_BoolOp(self, node):
        node.values = [self.truth(v) for v in node.values]
        return node

    def visit_Assign(self, node):
        if self.n.is_set(node.value):
            node.targets = [self.visit(t) for t in node.targets]
            node.value = self.set_value(node.value)
            return node
        return self.generic_visit(node)

    def visit_AugAssign(self, node):
        if isinstance(node.target, ast.Name) and node.target.id in self.n.names:
            value = self.binop(node.target, node.op, node.value, node)
            return ast.copy_location(ast.Assign([_name(node.target.id, ast.Store())], value),
                                     node)
        return self.generic_visit(node)

    def visit_Return(self, node):
        if node.value is not None and self.n.is_set(node.value):
            node.value = self.set_value(node.value)
            return node
        return self.generic_visit(node)

    def visit_Tuple(self, node):
        if isinstance(node.ctx, ast.Load):
            node.elts = [self.set_value(e) if self.n.is_set(e) else self.visit(e)
                         for e in node.elts]
            return node
        return self.generic_visit(node)

    def visit_Compare(self, node):
        operands = [node.left] + node.comparators
        out = []
        for i, x in enumerate(operands):
            if self.n.is_set(x):
                ops_here = ([node.ops[i - 1]] if i > 0 else []) + (
                    [node.ops[i]] if i < len(node.ops) else [])
                membership = i > 0 and isinstance(node.ops[i - 1], (ast.In, ast.NotIn))
                if membership or all(isinstance(o, (ast.Eq, ast.NotEq)) for o in ops_here):
                    if not membership and not all(self.n.is_set(y) for y in operands):
                        pass  # a set == a non-set: False in Python, and a dict never equals one
                    out.append(self.set_value(x))
                    continue
                self.refuse("set comparisons other than ==, != and in are not supported by "
                            "tessera.jit (use s.issubset(t))", node)
            out.append(self.visit(x))
        node.left, node.comparators = out[0], out[1:]
        return node

    def visit_Expr(self, node):
        c = node.value
        if (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr in _SET_METHODS_STMT and isinstance(c.func.value, ast.Name)
                and c.func.value.id in self.n.names):
            return ast.copy_location(self.method_stmt(c.func.value.id, c), node)
        return self.generic_visit(node)

    def method_stmt(self, s: str, c: ast.Call):
        attr = c.func.attr
        if c.keywords or len(c.args) != (0 if attr == "clear" else 1):
            self.refuse(f"set.{attr}() with these arguments is not supported by tessera.jit", c)
        if attr == "clear":
            return ast.Assign([_name(s, ast.Store())], _mark(ast.Dict([], [])))
        x = self.visit(c.args[0]) if attr in ("add", "discard", "remove") else c.args[0]
        if attr == "add":
            return ast.Assign([ast.Subscript(_name(s), x, ast.Store())], _true())
        if attr in ("discard", "remove"):
            args = [x] + ([ast.Constant(None)] if attr == "discard" else [])
            return ast.Expr(ast.Call(ast.Attribute(_name(s), "pop", ast.Load()), args, []))
        iterable = not self.n.is_set(x)
        x = self.as_set(x)
        op = {"update": ast.BitOr(), "difference_update": ast.Sub(),
              "intersection_update": ast.BitAnd()}[attr]
        return ast.Assign([_name(s, ast.Store())],
                          self.binop(_name(s), op, x, c, iterable=iterable))

    def visit_Call(self, node):
        f = node.func
        if self.n.is_set(node):
            self.order_refusal(node)
        if (isinstance(f, ast.Attribute) and f.attr in ("issubset", "issuperset", "isdisjoint")
                and self.n.is_set(f.value)):
            if len(node.args) != 1 or not self.n.is_set(node.args[0]) or node.keywords:
                self.refuse(f"set.{f.attr}() takes one set in tessera.jit", node)
            a, b = self.set_value(f.value), self.set_value(node.args[0])
            if f.attr == "issuperset":
                a, b = b, a
            k = self.fresh()
            cond = ast.Compare(_name(k), [ast.In()], [b])
            if f.attr == "isdisjoint":
                cond = ast.UnaryOp(ast.Not(), cond)
            gen = ast.GeneratorExp(cond, [ast.comprehension(_name(k, ast.Store()), a, [], 0)])
            return ast.copy_location(
                ast.Call(_name("bool"), [ast.Call(_name("all"), [gen], [])], []), node)
        if (isinstance(f, ast.Name) and f.id in ("len", "sorted", "sum", "min", "max", "bool")
                and node.args and self.n.is_set(node.args[0])):
            s = self.set_value(node.args[0])
            rest = [self.visit(a) for a in node.args[1:]]
            kws = [self.visit(k) for k in node.keywords]
            if f.id in ("sum", "min", "max"):
                if rest or kws:
                    self.refuse(f"{f.id}() of a set with more arguments is not supported by "
                                "tessera.jit (give the set alone)", node)
                return ast.copy_location(_call(f"__tessera_set_{f.id}", s), node)
            node.args = [s] + rest
            node.keywords = kws
            return node
        return self.generic_visit(node)


def rewrite_sets(tree, fname: str, unsupported, builtin_set: bool = True) -> None:
    """Rewrites the sets of the function ``tree`` into dicts, in place; raises
    ``unsupported(message)`` for a use of a set that tessera does not support."""
    if not any(isinstance(n, (ast.Set, ast.SetComp)) or (
            isinstance(n, ast.Name) and n.id == "set") for n in ast.walk(tree)):
        return
    names = _Names(tree, builtin_set)
    if names.bad:
        name, node = names.bad[0]
        raise unsupported(f"the name '{name}' holds a set and, here, something else; tessera.jit "
                          f"needs a name to hold a set everywhere or nowhere "
                          f"(at {fname}:{getattr(node, 'lineno', '?')})")
    _Rewriter(names, fname, unsupported).visit(tree)
    ast.fix_missing_locations(tree)
