"""How calls of Python's builtins are translated (``len``, ``range``, ``sorted``, ``min``/``max``
with ``key=``, ``isinstance`` and the other type tests, ``dict()``), and ``np.vectorize``: a mixin
of ``_calls.CallsMixin`` (split from ``_calls.py`` by topic; the methods use the translator's
others through ``self``).
"""

from __future__ import annotations

import ast
import inspect
import json

import numpy as np

from . import _translate as T
from . import _type_tests as TT
from ._numpy_lib import SPECIAL


class BuiltinCallsMixin:
    """The builtin-call translating methods of FunctionTranslator."""

    def builtin_call(self, name: str, node, args, kws) -> str:
        def texts():
            return [self.expr(a) for a in args]

        def one():
            if len(args) != 1 or kws:
                self.unsupported(f"{name}() with other than one argument", node)
            return self.expr(args[0])

        if name in ("len", "abs", "str", "repr"):
            return f"{name}({one()})"
        if name == "format":
            if kws or not 1 <= len(args) <= 2:
                self.unsupported("format() with these arguments", node)
            return f"format({', '.join(texts())})"
        if name == "complex":
            if kws or len(args) > 2:
                self.unsupported("complex() with keyword or more than two arguments", node)
            if not args:
                return "complex(0.0)"
            return f"complex({', '.join(texts())})"
        if name in ("int", "float", "bool"):
            if not args and not kws:
                return {"int": "0", "float": "0.0", "bool": "false"}[name]
            obj = {"int": int, "float": float, "bool": bool}[name]
            return self.convert_call(T.dtype_name_of(obj), obj, name, node, args, kws)
        if name == "range":
            if kws:
                self.unsupported("range() with keyword arguments", node)
            return f"range({', '.join(texts())})"
        if name == "print":
            for k, v in kws.items():
                default = {"sep": " ", "end": "\n", "flush": None, "file": None}.get(k, 0)
                if not (isinstance(v, ast.Constant) and (v.value == default or k == "flush")):
                    self.unsupported(f"print() with {k}=", node)
            return f"print({', '.join(texts())})"
        if name in ("min", "max") and kws:
            return self.extreme_by_key(name, node, args, kws)
        if name == "sorted" and kws:
            return self.sorted_by_key(node, args, kws)
        if name in ("min", "max"):
            t = texts()
            if len(t) == 1:
                return f"{name}({t[0]})"
            # Python's min(a, b): b if b < a else a -- the object itself
            # (min(2, 3.5) is 2), NaN as Python orders it, and arrays of more
            # than one element an error (an ambiguous truth value), as in
            # Python; each argument evaluated once.
            cmp = "<" if name == "min" else ">"
            out = t[0]
            for x in t[1:]:
                a, b = self.b.tmp(), self.b.tmp()
                out = f"block(define({a}, {out}), define({b}, {x}), if(({b} {cmp} {a}), {b}, {a}))"
            return out
        if name == "sum":
            if kws or not 1 <= len(args) <= 2:
                self.unsupported("sum() with these arguments", node)
            t = texts()
            made = (ast.GeneratorExp, ast.ListComp, ast.List, ast.Tuple)
            s = self.inline("py_sum_list" if isinstance(args[0], made) else "py_sum", t[0])
            return s if len(t) == 1 else f"({s} + {t[1]})"
        if name == "round":
            t = texts()
            nd = kws.get("ndigits")
            if len(t) == 2 or nd is not None:
                digits = t[1] if len(t) == 2 else self.expr(nd)
                return f"round({t[0]}, decimals={digits})"
            return self.inline("round_int", t[0])
        if name == "pow":
            t = texts()
            if len(t) != 2:
                self.unsupported("pow() with a modulus", node)
            return f"power({t[0]}, {t[1]})"
        if name == "divmod":
            t = texts()
            return f"tuple(floor_divide({t[0]}, {t[1]}), mod({t[0]}, {t[1]}))"
        if name in ("all", "any"):
            return f"{name}({one()})"
        if name in ("list", "tuple"):
            if not args:
                return f"{name}()"
            a = args[0]
            made = isinstance(a, (ast.ListComp, ast.GeneratorExp)) or (
                isinstance(a, ast.Call) and self.builtin_called(a) == "range"
            )
            if made and name == "list":
                return self.expr(a)  # already a new list
            return f"to_{name}({one()})"
        if name == "sorted":
            # lists, tuples, strings and dicts as Python sorts them (strings, tuples and
            # mixed numbers compared as Python compares them); arrays by the sort primitive
            v, t = self.b.tmp("s"), self.b.tmp("t")
            lib = self.b.include_library(SPECIAL["_sorted_by_key"], self.library_site(node))
            return (f"block(define({v}, {one()}), define({t}, type({v})), "
                    f"if(contains(list(\"list\", \"tuple\", \"string\", \"dict\"), {t}), "
                    f"{lib}({v}, nil, false), {self.b.helper('__to_list')}(sort({v}))))")
        if name == "slice":
            if kws or not 1 <= len(args) <= 3:
                self.unsupported("slice() with these arguments", node)
            t = texts()
            return f"slice(nil, {t[0]})" if len(t) == 1 else f"slice({', '.join(t)})"
        if name == "map":
            # map(f, xs, ys): the list [f(x, y) for x, y in zip(xs, ys)] (Python's
            # iterator, consumed at once: unpacking, list(), for loops see the same items).
            if kws or len(args) < 2:
                self.unsupported("map() without a function and an iterable", node)
            names = [f"tessera_map_item{i}" for i in range(len(args) - 1)]
            loads = [ast.Name(id=n, ctx=ast.Load()) for n in names]
            target = (ast.Name(id=names[0], ctx=ast.Store()) if len(names) == 1 else
                      ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names],
                                ctx=ast.Store()))
            source = (args[1] if len(args) == 2 else
                      ast.Call(func=ast.Name(id="zip", ctx=ast.Load()), args=list(args[1:]),
                               keywords=[]))
            comp = ast.ListComp(
                elt=ast.Call(func=args[0], args=loads, keywords=[]),
                generators=[ast.comprehension(target=target, iter=source, ifs=[], is_async=0)])
            ast.copy_location(comp, node)
            for sub in ast.walk(comp):
                if not hasattr(sub, "lineno") or getattr(sub, "lineno", None) is None:
                    ast.copy_location(sub, node)
            return self.expr(comp)
        if name == "filter":
            # filter(f, xs): the list [x for x in xs if f(x)] (filter(None, xs):
            # the true items), consumed at once as map's.
            if kws or len(args) != 2:
                self.unsupported("filter() without a function and an iterable", node)
            item = "tessera_filter_item"
            load = ast.Name(id=item, ctx=ast.Load())
            test = (load if T._is_none(args[0])
                    else ast.Call(func=args[0], args=[load], keywords=[]))
            comp = ast.ListComp(
                elt=ast.Name(id=item, ctx=ast.Load()),
                generators=[ast.comprehension(target=ast.Name(id=item, ctx=ast.Store()),
                                              iter=args[1], ifs=[test], is_async=0)])
            ast.copy_location(comp, node)
            for sub in ast.walk(comp):
                if getattr(sub, "lineno", None) is None and hasattr(sub, "_attributes"):
                    ast.copy_location(sub, node)
            return self.expr(comp)
        if name == "reversed":
            # consumed at once, as map's and filter's: the items in reverse order
            return f"getitem({one()}, slice(nil, nil, -1))"
        if name in ("isinstance", "hasattr", "callable"):
            return self.type_test(name, node, args, kws)
        if name in ("zip", "enumerate"):
            self.unsupported(f"{name}() outside a for loop or comprehension", node)
        if name == "dict":
            return self.dict_call(node, args, kws)
        self.unsupported(f"the builtin {name}()", node)

    def dict_call(self, node, args, kws) -> str:
        """Python's dict(): ``dict()``, ``dict(a=1)``, ``dict(mapping_or_pairs, **kw)``.
        Pairs made by zip/enumerate or a comprehension become a dict comprehension;
        anything else is copied at run time (a dict's items, or an iterable of pairs
        checked as Python checks them: INLINE["py_dict"])."""
        if len(args) > 1:
            self.unsupported(f"dict() with {len(args)} positional arguments (Python takes one)",
                             node)
        if None in kws:
            self.unsupported("dict(**mapping)", node)
        if not args:
            base = "dict()"
        elif isinstance(args[0], (ast.Dict, ast.DictComp)):
            base = self.expr(args[0])
        elif isinstance(args[0], (ast.GeneratorExp, ast.ListComp)) or (
                isinstance(args[0], ast.Call)
                and self.builtin_called(args[0]) in ("zip", "enumerate")):
            k, v = self.b.tmp("k"), self.b.tmp("v")
            comp = ast.DictComp(
                key=ast.Name(id=k, ctx=ast.Load()), value=ast.Name(id=v, ctx=ast.Load()),
                generators=[ast.comprehension(
                    target=ast.Tuple(elts=[ast.Name(id=k, ctx=ast.Store()),
                                           ast.Name(id=v, ctx=ast.Store())], ctx=ast.Store()),
                    iter=args[0], ifs=[], is_async=0)])
            for sub in ast.walk(comp):
                if getattr(sub, "lineno", None) is None and hasattr(sub, "_attributes"):
                    ast.copy_location(sub, node)
            base = self.expr(comp)
        else:
            base = self.inline("py_dict", self.expr(args[0]))
        for key, value in kws.items():
            base = f"setitem({base}, {self.expr(value)}, {json.dumps(key)})"
        return base

    def vectorize_otype(self, otypes, node) -> str:
        """The text of np.vectorize's output dtype: nil (the first result's) or a name."""
        if otypes is None or otypes == "" or otypes == []:
            return "nil"
        if len(otypes) != 1:
            self.unsupported(f"np.vectorize with several outputs (otypes={otypes!r})", node)
        try:
            return T.string_literal(np.dtype(otypes[0]).name)
        except TypeError:
            self.unsupported(f"np.vectorize with otypes={otypes!r}", node)

    def vectorize_call(self, node, args, kws) -> str:
        """``np.vectorize(f, otypes=...)`` in jit code: a lambda applying f to each
        element (of its broadcast arguments), as NumPy's vectorize object."""
        kws = dict(kws)
        pyfunc = args[0] if args else kws.pop("pyfunc", None)
        otypes_node = args[1] if len(args) > 1 else kws.pop("otypes", None)
        for k, v in kws.items():
            if not (isinstance(v, ast.Constant) and v.value in (None, False)):
                self.unsupported(f"np.vectorize with {k}=", node)
        if pyfunc is None or len(args) > 2:
            self.unsupported("np.vectorize with these arguments", node)
        otypes = None
        if otypes_node is not None:
            otypes = self.static_value(otypes_node)
            if otypes is T._NO:
                self.unsupported("np.vectorize with otypes not known at translation", node)
        if isinstance(pyfunc, ast.Lambda):
            a = pyfunc.args
            arity = len(a.posonlyargs + a.args) - len(a.defaults)
        elif isinstance(pyfunc, ast.Name) and self.is_variable(pyfunc.id):
            arity = self.local_def_arity(pyfunc.id, node)
        else:
            func = self.static_object(pyfunc)
            if func is T._NO or not callable(func):
                self.unsupported("np.vectorize of a function not known at translation", node,
                                 "vectorize a module-level function, a nested def or a lambda")
            arity = sum(1 for p in inspect.signature(func).parameters.values()
                        if p.default is inspect.Parameter.empty and
                        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        if not 1 <= arity <= 3:
            self.unsupported(f"np.vectorize of a function of {arity} arguments", node,
                             "functions of 1 to 3 arguments are supported")
        names = [self.b.tmp("v") for _ in range(arity)]
        lib = self.b.include_library(SPECIAL[f"_vectorize{arity}"], self.library_site(node))
        body = f"{lib}({self.expr(pyfunc)}, {self.vectorize_otype(otypes, node)}, " \
               f"{', '.join(names)})"
        return f"lambda({', '.join(names)}, {body})"

    def local_def_args(self, name: str):
        """The parameters (ast.arguments) of the nested function or lambda ``name`` when
        the function being translated defines it once, else None."""
        found = []
        for sub in ast.walk(self.node):
            if isinstance(sub, ast.FunctionDef) and sub.name == name:
                found.append(sub.args)
            elif (isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Lambda) and
                  any(isinstance(t, ast.Name) and t.id == name for t in sub.targets)):
                found.append(sub.value.args)
            elif isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                if any(isinstance(t, ast.Name) and t.id == name
                       for tg in targets for t in ast.walk(tg)):
                    return None  # the name is rebound: not known at translation
        return found[0] if len(found) == 1 else None

    def local_def_arity(self, name: str, node) -> int:
        """The number of required positional parameters of the nested function or
        lambda ``name`` (defined once in the function being translated)."""
        a = self.local_def_args(name)
        if a is None:
            self.unsupported("np.vectorize of a function not known at translation", node,
                             "vectorize a module-level function, a nested def or a lambda")
        return len(a.posonlyargs + a.args) - len(a.defaults)

    def vectorized_call(self, obj, node, args, kws) -> str:
        """A call of a module-level ``np.vectorize`` object (``@np.vectorize``)."""
        if kws or not 1 <= len(args) <= 3:
            self.unsupported("a call of an np.vectorize function with keyword arguments or "
                             "other than 1 to 3 arguments", node)
        if obj.excluded or obj.signature is not None:
            self.unsupported("np.vectorize with excluded= or signature=", node)
        otypes = obj.otypes if obj.otypes else None
        lib = self.b.include_library(SPECIAL[f"_vectorize{len(args)}"], self.library_site(node))
        texts = [self.value_text(obj.pyfunc, node), self.vectorize_otype(otypes, node)]
        texts += [self.expr(a) for a in args]
        return f"{lib}({', '.join(texts)})"

    def static_value(self, node):
        """The value of a constant, a global name, or a list or tuple of those, known
        at translation; T._NO otherwise."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.static_value(e) for e in node.elts]
            return T._NO if any(i is T._NO for i in items) else items
        return self.static_object(node)

    def library_site(self, node):
        return self.site if self.site is not None else self.mark(node.lineno)

    def key_function(self, key):
        """key= of max/min/sorted: a bound method (``d.get``) as a lambda calling it."""
        if key is None:
            return ast.Constant(None)
        if isinstance(key, (ast.Name, ast.Attribute)) and not (
                isinstance(key, ast.Name) and self.is_variable(key.id)) and (
                inspect.isbuiltin(self.static_object(key)) or
                self.static_object(key) is T._NO):
            item = "tessera_key_item"
            lam = ast.Lambda(
                args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=item)], vararg=None,
                                   kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
                body=ast.Call(func=key, args=[ast.Name(id=item, ctx=ast.Load())], keywords=[]))
            for sub in ast.walk(lam):
                if getattr(sub, "lineno", None) is None and hasattr(sub, "_attributes"):
                    ast.copy_location(sub, key)
            return lam
        return key

    def extreme_by_key(self, name: str, node, args, kws) -> str:
        """``max(xs, key=f, default=d)``, ``min(a, b, key=f)``: Python's."""
        bad = set(kws) - {"key", "default"}
        if bad or not args or ("default" in kws and len(args) > 1):
            self.unsupported(f"{name}() with these arguments", node)
        items = args[0] if len(args) == 1 else ast.copy_location(
            ast.List(elts=list(args), ctx=ast.Load()), node)
        default = kws.get("default", ast.Constant(None))
        flags = [ast.Constant(name == "max"), ast.Constant("default" in kws)]
        return self.library_call(SPECIAL["_extreme_by_key"], node,
                                 [items, self.key_function(kws.get("key"))] + flags + [default],
                                 {})

    def sorted_by_key(self, node, args, kws) -> str:
        """``sorted(xs, key=f, reverse=True)``: Python's stable sort."""
        if set(kws) - {"key", "reverse"} or len(args) != 1:
            self.unsupported("sorted() with these arguments", node)
        reverse = kws.get("reverse", ast.Constant(False))
        return self.library_call(SPECIAL["_sorted_by_key"], node,
                                 [args[0], self.key_function(kws.get("key")), reverse], {})

    def type_test(self, name: str, node, args, kws) -> str:
        """``isinstance(x, C)``, ``hasattr(x, "name")``, ``callable(x)``: Python's
        answer for the kind of value x has (_type_tests.py); C and the name must be
        known at translation."""
        nargs = 1 if name == "callable" else 2
        if kws or len(args) != nargs:
            self.unsupported(f"{name}() with other than {nargs} positional argument(s)", node)
        if name == "callable":
            return TT.kind_test(self.expr(args[0]), TT.callable_predicate, self.b.tmp)
        if name == "hasattr":
            attr = args[1]
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                self.unsupported("hasattr() with an attribute name that is not a string literal",
                                 node)
            return TT.kind_test(self.expr(args[0]), TT.hasattr_predicate(attr.value), self.b.tmp)
        classinfo = self.static_classinfo(args[1])
        predicate = None if classinfo is T._NO else TT.isinstance_predicate(classinfo)
        if predicate is None:
            self.unsupported(f"isinstance() with the class argument '{ast.unparse(args[1])}'",
                             node, "the classes must be names known at translation "
                             "(int, float, np.ndarray, np.floating, (list, tuple), ...)")
        return TT.kind_test(self.expr(args[0]), predicate, self.b.tmp)

    def static_classinfo(self, node):
        """The class, tuple or union of classes ``node`` names, or T._NO."""
        if isinstance(node, ast.Tuple):
            items = tuple(self.static_classinfo(e) for e in node.elts)
            return T._NO if any(i is T._NO for i in items) else items
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            a, b = self.static_classinfo(node.left), self.static_classinfo(node.right)
            if a is T._NO or b is T._NO:
                return T._NO
            try:
                return a | b
            except TypeError:
                return T._NO
        if isinstance(node, ast.Constant) and node.value is None:
            return type(None)
        return self.static_object(node)
