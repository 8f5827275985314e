"""How NumPy's ufunc methods are translated: ``np.add.outer``,
``np.maximum.reduce``, ``np.maximum.accumulate``, ``np.add.reduceat``,
``np.add.at``.

A mixin of ``_calls.CallsMixin``.  Each method means what NumPy's means
(defaults, result dtypes, in-place writes, errors); add and multiply map onto
sum/prod/cumsum/cumprod, maximum and minimum onto max/min, logical_and/or onto
all/any, the rest onto the accumulate and reduce_op primitives, reduceat and
at onto the reduceat and at_op primitives (tessera/primitives/ufunc_scan.cpp).
"""

from __future__ import annotations

import ast

import numpy as np

from . import _numpy_map as M
from . import _translate as T

METHODS = ("outer", "reduce", "accumulate", "reduceat", "at")

# ufunc -> primitive of its reduction (keyword dtype= where the primitive has it).
_REDUCE_PRIM = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                "logical_and": "all", "logical_or": "any"}
# ufuncs reduced and scanned by reduce_op / accumulate.
_OP_PRIM = {"fmax", "fmin", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
            "maximum", "minimum", "logical_and", "logical_or"}
_SCAN_PRIM = {"add": "cumsum", "multiply": "cumprod"}
_REDUCEAT = {"add", "multiply", "maximum", "minimum"}
_AT = {"add", "subtract", "multiply", "maximum", "minimum", "fmax", "fmin", "bitwise_and",
       "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor", "divide",
       "true_divide", "power"}
# The element a where= mask leaves out counts as (ufuncs with an identity).
_IDENTITY_LIKE = {"add": "zeros_like", "multiply": "ones_like"}

# Expansions added to _translate.INLINE on first use (it imports this module
# before it defines INLINE).
_INLINE = {
    # ufunc.accumulate of add/multiply: cumsum/cumprod, which flatten a 0-d
    # array where NumPy refuses it.
    "ufunc_scan": """block(define($x, asarray($1)), if(ndim($x) == 0, assert(false,
  "$ETypeError] [$L] cannot accumulate on a scalar (a 0-d array)")), $x)""",
    # ufunc.at(a, indices, b): a[indices] op= b unbuffered, in place (every
    # view of a sees it), repeated indices applied one after another in order.
    # A 1-d array indexed by an integer array: the indices are the positions
    # (at_op wraps negatives and names an index out of bounds as NumPy);
    # anything else selects the flat positions of an arange.
    "ufunc_at_op": """block(define($a, $1), define($i, $3),
  define($ix, if(ndim($a) == 1 && (type($i) == "int64 array" || type($i) == "int32 array"), $i,
    getitem(reshape(arange(size($a)), shape($a)), $i))),
  define($v, asarray($2)),
  setitem($a, at_op($a, ravel($ix), if(ndim($v) == 0, $v, ravel(broadcast_to($v, shape($ix)))),
    "__OP__"), "..."), nil)""",
    "ufunc_at": """block(define($a, $1),
  define($pos, ravel(getitem(reshape(arange(size($a)), shape($a)), $3))),
  define($v, ravel(broadcast_to(asarray($2), shape(getitem(reshape(arange(size($a)),
    shape($a)), $3))))),
  define($r, ravel(copy($a))), define($i, 0), define($n, size($pos)),
  while($i < $n, block(define($q, item(getitem($pos, $i))),
    setitem($r, astype(__OP__(getitem($r, $q), getitem($v, $i)), dtype_name($r),
      casting="unsafe"), $q),
    define($i, $i + 1))),
  setitem($a, reshape($r, shape($a)), "..."), nil)""",
}


def ufunc_method(obj):
    """(ufunc, method name) for a bound method of an ``np.ufunc`` such as
    ``np.add.outer``, else None."""
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", None)
    if isinstance(owner, np.ufunc) and isinstance(name, str):
        return owner, name
    return None


def _literal(node):
    """The Python value of a literal argument (an int, None, a tuple of
    ints), else T._NO."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return T._NO


def _is_none(node) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value is None)


class UfuncMethodsMixin:
    """The ufunc-method-translating methods of FunctionTranslator."""

    def ufunc_prim(self, uf, label, node) -> str:
        """The primitive computing the binary ufunc ``uf``."""
        name = uf.__name__
        prim = M.NUMPY_RENAMES.get(name, name)
        if uf.nin != 2 or uf.nout != 1 or prim not in T.primitive_names():
            self.unsupported(f"the ufunc method {label}", node,
                             "ufunc methods are translated for the binary ufuncs tessera has "
                             "(np.add, np.maximum, np.equal, ...)")
        return prim

    def bind_ufunc_args(self, label, names, args, kws, node, required=1) -> dict:
        """NumPy's parameters of a ufunc method bound to the call's arguments."""
        if len(args) > len(names):
            raise TypeError(f"[{label}] takes at most {len(names)} arguments, got {len(args)} "
                            f"(at {self.where(node)})")
        bound = dict(zip(names, args))
        for k, v in kws.items():
            if k not in names:
                raise TypeError(f"[{label}] got an unexpected keyword argument '{k}' "
                                f"(at {self.where(node)})")
            if k in bound:
                raise TypeError(f"[{label}] got multiple values for argument '{k}' "
                                f"(at {self.where(node)})")
            bound[k] = v
        for n in names[:required]:
            if n not in bound:
                raise TypeError(f"[{label}] missing required argument '{n}' "
                                f"(at {self.where(node)})")
        if not _is_none(bound.get("out")):
            self.unsupported(f"the argument out= of {label}", node)
        return bound

    def ufunc_method_call(self, uf, method: str, node, args, kws) -> str:
        label = f"np.{uf.__name__}.{method}"
        T.INLINE.update(_INLINE)
        if method not in METHODS:
            self.unsupported(f"the ufunc method {label}", node,
                             "supported: outer, reduce, accumulate, reduceat, at")
        if uf.nin != 2 and method != "at":
            if uf.nin == 1:
                what = "outer product" if method == "outer" else method
                raise ValueError(f"[{label}] {what} only supported for binary functions "
                                 f"(at {self.where(node)})")
        prim = self.ufunc_prim(uf, label, node)
        return getattr(self, f"ufunc_{method}")(uf.__name__, prim, label, node, args, kws)

    def ufunc_outer(self, name, prim, label, node, args, kws) -> str:
        b = self.bind_ufunc_args(label, ("A", "B", "out", "dtype"), args, kws, node, required=2)
        a, bb = self.b.tmp(), self.b.tmp()
        # a reshaped to a.shape + (1,) * b.ndim, broadcast against b.
        out = (f"block(define({a}, asarray({self.expr(b['A'])})), "
               f"define({bb}, asarray({self.expr(b['B'])})), "
               f"{prim}(reshape({a}, (shape({a}) + (tuple(1) * ndim({bb})))), {bb}))")
        if not _is_none(b.get("dtype")):
            out = f"astype({out}, {self.expr(b['dtype'])})"
        return out

    def ufunc_reduce(self, name, prim, label, node, args, kws) -> str:
        b = self.bind_ufunc_args(
            label, ("array", "axis", "dtype", "out", "keepdims", "initial", "where"),
            args, kws, node)
        x = self.expr(b["array"])
        axis_node = b.get("axis")
        axis = "0" if axis_node is None else self.expr(axis_node)
        keep = self.expr(b["keepdims"]) if "keepdims" in b else "false"
        dtype = None if _is_none(b.get("dtype")) else self.expr(b["dtype"])
        initial = b.get("initial")
        initial = None if initial is None or (
            isinstance(initial, ast.Constant) and initial.value is None and name in _REDUCE_PRIM
            and name not in ("maximum", "minimum")) else initial
        where = b.get("where")
        if where is not None and isinstance(where, ast.Constant) and where.value is True:
            where = None
        if name not in _REDUCE_PRIM and name not in _OP_PRIM:
            self.unsupported(f"the ufunc method {label}", node,
                             "reduce is translated for add, multiply, maximum, minimum, fmax, "
                             "fmin, logical_and/or/xor and bitwise_and/or/xor")
        xv = self.b.tmp("x")
        pre = [f"define({xv}, asarray({x}))"]
        if dtype is not None and name not in ("add", "multiply"):
            pre.append(f"define({xv}, astype({xv}, {dtype}))")
        init_text = None if initial is None else self.expr(initial)
        if where is not None:
            if name in _IDENTITY_LIKE:
                fill = f"{_IDENTITY_LIKE[name]}({xv})"
            elif name in ("logical_and",):
                fill = f"ones_like({xv}, dtype=\"bool\")"
            elif name in ("logical_or", "logical_xor"):
                fill = f"zeros_like({xv}, dtype=\"bool\")"
            elif name == "bitwise_and":
                fill = f"astype(full_like({xv}, -1), dtype_name({xv}), casting=\"unsafe\")"
            elif name in ("bitwise_or", "bitwise_xor"):
                fill = f"zeros_like({xv})"
            elif init_text is None:
                raise ValueError(
                    f"[{label}] reduction operation '{name}' does not have an identity, so to "
                    f"use a where mask one has to specify 'initial' (at {self.where(node)})")
            else:
                fill = f"full_like({xv}, {init_text})"
            if name in ("logical_and", "logical_or", "logical_xor"):
                pre.append(f"define({xv}, astype({xv}, \"bool\"))")
            pre.append(f"define({xv}, where({self.expr(where)}, {xv}, {fill}))")
        use_op = name not in _REDUCE_PRIM or (
            init_text is not None and name in ("maximum", "minimum"))

        def reduction(axis_node, axis):
            if use_op:
                return self.reduce_op_text(name, xv, axis_node, axis, keep, init_text, node,
                                           label)
            parts = [xv, f"axis={axis}", f"keepdims={keep}"]
            if name in ("add", "multiply") and dtype is not None:
                parts.append(f"dtype={dtype}")
            red = f"{prim_of(name)}({', '.join(parts)})"
            if init_text is not None:
                r = self.b.tmp("r")
                red = (f"block(define({r}, {red}), astype({prim}({r}, {init_text}), "
                       f"dtype_name({r}), casting=\"unsafe\"))")
            return red

        red = reduction(axis_node, axis)
        if axis_node is None or _literal(axis_node) in (0, -1):
            # NumPy reduces a 0-d array by axis 0 (the default) to its element
            red = (f"if(ndim({xv}) == 0, {reduction(ast.Constant(value=None), 'nil')}, "
                   f"{red})")
        return f"block({', '.join(pre)}, {red})"

    def reduce_op_text(self, name, xv, axis_node, axis, keep, init_text, node, label) -> str:
        """reduce_op over an int axis, None (all axes) or a tuple of axes: one
        axis at a time, the last first (the ops are associative and
        commutative; initial enters once)."""
        init = init_text if init_text is not None else "nil"
        value = _literal(axis_node) if axis_node is not None else 0
        if value is T._NO or isinstance(value, int):
            return f"reduce_op({xv}, \"{name}\", {axis}, {keep}, {init})"
        if value is None:
            flat = f"reduce_op(ravel({xv}), \"{name}\", 0, false, {init})"
            if keep == "false":  # no shape tuple: the fast loops' subset
                return flat
            r = self.b.tmp("r")
            return (f"block(define({r}, {flat}), "
                    f"if({keep}, reshape({r}, (tuple(1) * ndim({xv}))), {r}))")
        if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
            if not value:
                return f"copy({xv})"
            r = self.b.tmp("r")
            nd = f"ndim({xv})"
            text = xv
            # normalized axes, largest first, each reduction keeping its dim
            order = f"sort(mod(asarray(list({', '.join(map(str, value))})), {nd}))"
            axes = self.b.tmp("axes")
            steps = [f"define({axes}, {order})", f"define({r}, {text})"]
            # and/or/max/min are idempotent: initial may enter every lane of
            # the first step; xor's enters once, at the end.
            once = name in ("logical_xor", "bitwise_xor")
            for i in range(len(value)):
                ax = f"item(getitem({axes}, {len(value) - 1 - i}))"
                first_init = init if i == 0 and not once else "nil"
                steps.append(f"define({r}, reduce_op({r}, \"{name}\", {ax}, true, {first_init}))")
            if once and init_text is not None:
                steps.append(f"define({r}, astype({name}({r}, {init_text}), dtype_name({r}), "
                             f"casting=\"unsafe\"))")
            steps.append(f"if({keep}, {r}, squeeze({r}, axis=to_tuple(to_list({axes}))))")
            return f"block({', '.join(steps)})"
        self.unsupported(f"{label} with axis={ast.unparse(axis_node)}", node)

    def ufunc_accumulate(self, name, prim, label, node, args, kws) -> str:
        b = self.bind_ufunc_args(label, ("array", "axis", "dtype", "out"), args, kws, node)
        axis_node = b.get("axis")
        value = _literal(axis_node) if axis_node is not None else 0
        if value is None or isinstance(value, tuple):
            raise ValueError(f"[{label}] accumulate does not allow multiple axes: axis={value} "
                             f"(at {self.where(node)})")
        axis = "0" if axis_node is None else self.expr(axis_node)
        dtype = None if _is_none(b.get("dtype")) else self.expr(b["dtype"])
        if name in _SCAN_PRIM:
            x = self.inline("ufunc_scan", self.expr(b["array"]), label=label)
            extra = f", dtype={dtype}" if dtype is not None else ""
            return f"{_SCAN_PRIM[name]}({x}, axis={axis}{extra})"
        x = self.expr(b["array"])  # accumulate refuses a 0-d array itself
        if name not in _OP_PRIM:
            self.unsupported(f"the ufunc method {label}", node,
                             "accumulate is translated for add, multiply, maximum, minimum, fmax, "
                             "fmin, logical_and/or/xor and bitwise_and/or/xor")
        if dtype is not None:
            x = f"astype({x}, {dtype})"
        return f"accumulate({x}, \"{name}\", {axis})"

    def ufunc_reduceat(self, name, prim, label, node, args, kws) -> str:
        b = self.bind_ufunc_args(label, ("array", "indices", "axis", "dtype", "out"), args, kws,
                                 node, required=2)
        if name not in _REDUCEAT:
            self.unsupported(f"the ufunc method {label}", node,
                             "reduceat is translated for add, multiply, maximum and minimum")
        axis = "0" if b.get("axis") is None else self.expr(b["axis"])
        x = f"asarray({self.expr(b['array'])})"
        if not _is_none(b.get("dtype")):
            x = f"astype({x}, {self.expr(b['dtype'])})"
        return f"reduceat({x}, asarray({self.expr(b['indices'])}), \"{name}\", {axis})"

    def ufunc_at(self, name, prim, label, node, args, kws) -> str:
        b = self.bind_ufunc_args(label, ("a", "indices", "b"), args, kws, node, required=2)
        if name not in _AT:
            self.unsupported(f"the ufunc method {label}", node)
        if "b" not in b:
            raise TypeError(f"[{label}] second operand needed for ufunc (at {self.where(node)})")
        target = b["a"]
        if not isinstance(target, (ast.Name, ast.Subscript, ast.Attribute)):
            self.unsupported(f"{label} on a temporary value", node,
                             "NumPy changes the array in place: give a variable or a view")
        if isinstance(target, ast.Name) and not self.is_variable(target.id) and not isinstance(
                self.global_value(target.id, target), np.ndarray):
            self.unsupported(f"{label} on the module-level variable '{target.id}'", node,
                             "only arrays change in place")
        a_text, idx, v = self.expr(target), self.expr(b["indices"]), self.expr(b["b"])
        if name in ("add", "subtract", "multiply") or name in _OP_PRIM:  # the at_op primitive
            return self.inline("ufunc_at_op", a_text, v, idx, label=label).replace("__OP__", name)
        return self.inline("ufunc_at", a_text, v, idx, label=label).replace("__OP__", prim)


def prim_of(name):
    return _REDUCE_PRIM[name]
