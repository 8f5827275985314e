"""Saving models: tessera's weights format (weights_file.py: named arrays, a
JSON header, a SHA-256; its layout is there), extended with the model's architecture, compile
settings, optimizer state and training state. Loading never executes anything from the file."""

from __future__ import annotations

import inspect
import math
import numbers
import os

import numpy as np

from .. import optim
from . import initializers, layers, losses, metrics, parallel, parallel_layers, parallel_losses
from . import constraints, metric_classes, optimizer_classes, output_nesting, regularizers
from .functional import _deps, output_or_mask
from .graph_order import tensor_order
from .layers import (WEIGHTS_IN_FILE, Layer, constructor_arguments, is_dtype_name,
                     serialized_object_keys)
from .metric_programs import _FunctionMetric
from .saving_hooks import save_hooks
from . import saving_hooks as hooks
from .registry import (_CUSTOM, CustomObjectScope, _registered, custom_object_scope, named_class,
                       get_custom_objects, get_registered_name, get_registered_object,
                       model_class, register_keras_serializable, FILE_FORMATS, ARCHITECTURE_HOOKS)
from .symbolic import (_DUMMY_BATCH, DTYPE_NAMES, ELEMENTWISE_OPERATIONS, Input, KerasTensor,
                       _Index, _record)
# (load_training_state, set_weights_from, ...: also saving's names, as before)
from .training_state import (_MALFORMED, _restore_optimizer, apply_training_state,
                             load_training_state)
from .weights_file import load_weights_into, read_file, save_file, set_weights_from

__all__ = ["save_file", "read_file", "load_model", "register_keras_serializable",
           "get_custom_objects", "custom_object_scope", "CustomObjectScope",
           "get_registered_name", "get_registered_object", "clone_model",
           "save_weights", "load_weights"]


# ------------------------------------------------------------------ configs
#
# Loading never executes: a file names classes and operations, and only
# those of the registry below are built (docs/nn.md, "What a file can name").

# What a file may make, checked before anything is made (docs/nn.md).
MAX_SAMPLE_VALUES = 1 << 24  # values of one sample of any tensor of the graph
MAX_STANDIN_VALUES = 1 << 26  # stand-in values the graph's operations make, all together
MAX_NODES = 100_000  # nodes of a functional graph
MAX_LAYERS = 20_000  # layers of a file, nested models included
MAX_DEPTH = 64  # nesting of a configuration (lists, dicts, objects, nested models)
_MAX_RANK_SHAPE = 32


_BUILTIN = None
# (keras.optimizers' classes before tessera.optim's of the same names: a file's module picks)
_OBJECT_KINDS = ("initializer", "regularizer", "constraint", "schedule", "keras_optimizer",
                 "optimizer", "metric", "loss", "cell")


def builtin_classes() -> dict:
    """kind -> {class name: class}: tessera's own classes a file may name.
    Explicit tables of the public classes of a fixed list of modules (no
    module a file names is ever imported)."""
    global _BUILTIN
    if _BUILTIN is None:
        def public(modules, base, exclude):
            return {name: obj for mod in modules for name, obj in vars(mod).items()
                    if not name.startswith("_") and isinstance(obj, type) and
                    issubclass(obj, base) and obj not in exclude and
                    obj.__module__ == mod.__name__}

        # the layer family modules and the parallel ones (a fixed list of
        # tessera's modules, never one a file names)
        layer_modules = list(layers.FAMILIES) + [parallel, parallel_layers]
        _BUILTIN = {
            "layer": public(layer_modules, layers.Layer, (layers.Layer, parallel._ParallelDense)),
            "loss": public((losses, parallel_losses), losses.Loss,
                           (losses.Loss, losses.FunctionLoss)),
            "metric": public((metrics, metric_classes, parallel_losses), metrics.Metric,
                             (metrics.Metric, metrics.MeanMetricWrapper)),
            "initializer": public((initializers,), initializers.Initializer,
                                  (initializers.Initializer,)),
            "regularizer": public((regularizers,), regularizers.Regularizer,
                                  (regularizers.Regularizer,)),
            "constraint": public((constraints,), constraints.Constraint, ()),
            "keras_optimizer": public((optimizer_classes,), optim.Optimizer, ()),
            "optimizer": public((optim,), optim.Optimizer, (optim.Optimizer,)),
            "schedule": public((optim,), optim.LearningRateSchedule,
                               (optim.LearningRateSchedule,)),
            "cell": {c.__name__: c for c in layers.wrappers.CELLS},
        }
    return _BUILTIN


class _Load:
    """One load_model call: the file, the user's custom objects, the budgets left."""

    def __init__(self, path: str, custom: dict, where: str = "load_model"):
        self.path = path
        self.custom = custom
        self.layers = 0
        self.standins = MAX_STANDIN_VALUES
        self.where = where

    def error(self, what: str) -> ValueError:
        if self.where != "load_model":
            return ValueError(f"[{self.where}] {what}; nothing was made")
        return ValueError(f"[load_model] {self.path}: {what}; nothing was loaded")


# The modules the layers lived in before tessera.nn.layers became a package of
# families: a file saved then names them ("module"), and still loads.
_P = "tessera.nn.layers."
_FORMER_MODULES = {
    "tessera.nn.layers": {_P + m for m in ("core", "conv", "pooling", "reshaping",
                                           "normalization")},
    "tessera.nn.activation_layers": {_P + "activation"}, "tessera.nn.core_layers": {_P + "core"},
    "tessera.nn.attention": {_P + "multi_head_attention"},
    "tessera.nn.attention_layers": {_P + "attention"},
    **{"tessera.nn." + m: {_P + m, _P + ("categorical" if m == "preprocessing" else m)} for m in (
        "image_preprocessing", "merging", "noise", "normalization", "preprocessing", "recurrent",
        "reshaping", "separable", "wrappers")},
    _P + "preprocessing": {_P + "categorical"},  # CategoryEncoding, Discretization moved
}


def _same_module(named, cls) -> bool:
    """The module a file names is the class's own (or the one it had then)."""
    return named is None or named == cls.__module__ or \
        cls.__module__ in _FORMER_MODULES.get(named, ())


def _resolve(name, module, kinds, ctx: _Load, what: str):
    """The class a file names: the user's (custom_objects, then registered),
    else tessera's own class of one of `kinds` (of `module` when the file
    gives one). Anything else is refused."""
    if not isinstance(name, str) or not name:
        raise ctx.error(f"{what} names the class {str(name)[:80]!r}, which is not a class name")
    if name in ctx.custom:
        return ctx.custom[name]
    found = named_class(name)  # a user's, else one of tessera's upper modules' (registry.py)
    if found is not None:
        return found
    tables = builtin_classes()
    for kind in kinds:
        cls = tables[kind].get(name)
        if cls is not None and _same_module(module, cls):
            return cls
    shown = name[:80] + (f" (module {str(module)[:80]!r})" if module is not None else "")
    kinds_text = ", ".join(kinds) if kinds else "model"
    raise ctx.error(
        f"{what} names the class {shown}, which is neither one of tessera's {kinds_text} "
        "classes nor registered. Loading builds only known classes, since building a class a "
        "file chooses could run any code: if you trust this file and the class, pass it in "
        f"custom_objects={{{name[:80]!r}: ...}} or register it with "
        "@tessera.nn.register_keras_serializable()")


def _check_arguments(cls, config: dict, ctx: _Load, what: str):
    """The keyword arguments a file gives a constructor: names it accepts."""
    init = getattr(cls, "__init__", None)
    if init is object.__init__:
        signature = inspect.Signature([inspect.Parameter("self",
                                                         inspect.Parameter.POSITIONAL_ONLY)])
    elif inspect.isfunction(init):
        # (a builtin's signature is parsed from its text by compile(): not
        # while loading)
        signature = inspect.signature(init)
    else:
        return
    try:
        signature.bind(None, **config)
    except TypeError as e:
        raise ctx.error(f"{what}: {getattr(cls, '__name__', cls)!s} cannot be built from the "
                        f"file's arguments {sorted(config)[:12]} ({e})") from None


def _construct(cls, config, ctx: _Load, what: str):
    """An object of a resolved class: by its from_config, or its checked constructor."""
    if not isinstance(config, dict):
        raise ctx.error(f"{what}: the configuration of {cls.__name__} is not an object")
    if callable(getattr(cls, "from_config", None)):
        return cls.from_config(config)
    config = {k: u for k, u in config.items() if k not in ("name", "class")}
    _check_arguments(cls, config, ctx, what)
    return cls(**config)


def _depth_check(ctx: _Load, depth: int):
    if depth > MAX_DEPTH:
        raise ctx.error(f"the configuration is nested more than {MAX_DEPTH} levels deep")


def _encode(v, where):
    """A constructor argument as JSON."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    if isinstance(v, (list, tuple)):
        return {"__tuple__": [_encode(u, where) for u in v]} if isinstance(v, tuple) else \
            [_encode(u, where) for u in v]
    if isinstance(v, dict):
        return {"__dict__": {str(k): _encode(u, where) for k, u in v.items()}}
    if isinstance(v, Layer):
        return {"__layer__": _layer_config(v, where)}
    if hasattr(v, "get_config") and callable(v.get_config):
        return {"__object__": type(v).__name__, "module": type(v).__module__,
                "config": _encode(v.get_config(), where)}
    if callable(v) and not isinstance(v, type):
        key = next((k for k, u in _CUSTOM.items() if u is v), None) or \
            (v.__name__ if inspect.isfunction(v) and v.__name__ != "<lambda>" else None)
        if key is not None:  # Keras's: a def by its name, at load in custom_objects
            return {"__function__": key}
        raise TypeError(
            f"[{where}] cannot save the function {getattr(v, '__qualname__', v)!r}: a file "
            "holding a Python function's bytecode would run code when loaded, which tessera "
            "never does (Keras's safe_mode refuses such files too). Define it with def (the "
            "file names it; load_model's custom_objects gives it back), register it with "
            "@tessera.nn.register_keras_serializable(), or save only the weights")
    raise TypeError(f"[{where}] cannot save the argument {v!r} (of type {type(v).__name__}); "
                    "use names for activations and initializers, or objects with get_config")


def _decode(v, ctx: _Load, depth: int = 0):
    _depth_check(ctx, depth)
    if isinstance(v, list):
        return [_decode(u, ctx, depth + 1) for u in v]
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(_decode(u, ctx, depth + 1) for u in v["__tuple__"])
        if "__dict__" in v:
            return {k: _decode(u, ctx, depth + 1) for k, u in v["__dict__"].items()}
        if "__layer__" in v:
            return _layer_from(v["__layer__"], ctx, depth + 1)
        if "__function__" in v:
            name = v["__function__"]
            fn = (ctx.custom.get(name) or _registered(name)) if isinstance(name, str) else None
            if fn is None or not callable(fn):
                raise ctx.error(f"a configuration value names the function {str(name)[:80]!r}"
                                ": pass it in custom_objects, or register it with "
                                "@tessera.nn.register_keras_serializable()")
            return fn
        if "__object__" in v:
            cls = _resolve(v["__object__"], v.get("module"), _OBJECT_KINDS, ctx,
                           "a configuration value")
            config = _decode(v.get("config", {}), ctx, depth + 1)
            return _construct(cls, config, ctx, f"the object {v['__object__']}")
        raise ctx.error("a configuration value is malformed (an object of unknown kind)")
    return v


def _built_objects(config: dict, ctx: _Load) -> dict:
    """A Keras config's serialized initializers, regularizers and constraints as
    objects: a user's class from custom_objects or the registry, by its
    registered name, else its class name (Keras's lookup)."""
    config = dict(config)
    for key in serialized_object_keys(config):
        v = config[key]
        module = v.get("module") if str(v.get("module")).startswith("tessera.") else None
        name = v.get("registered_name")
        if not (isinstance(name, str) and (name in ctx.custom or named_class(name))):
            name = v["class_name"]
        cls = _resolve(name, module, _OBJECT_KINDS, ctx, f"the argument {key}")
        try:
            config[key] = _construct(cls, v.get("config") or {}, ctx, f"the argument {key}")
        except TypeError as e:
            raise ctx.error(f"the argument {key}: {str(e)[:200]}") from None
    for key in ("layer", "backward_layer"):  # a wrapper's layers, as Keras's dicts
        v = config.get(key)
        if isinstance(v, dict) and "class_name" in v:
            module = v.get("module") if str(v.get("module")).startswith("tessera.") else None
            config[key] = _layer_from({"class": v["class_name"], "module": module,
                                       "config": v.get("config")}, ctx, decoded=True)
    return config


def _layer_config(layer, where):
    Model, Sequential = model_class("Model"), model_class("Sequential")

    if isinstance(layer, Sequential):
        return {"class": "Sequential", "arch": _architecture(layer, where)}
    if isinstance(layer, Model) and layer._functional:
        return {"class": "Functional", "arch": _architecture(layer, where)}
    config = layer.get_config()
    out = {"class": type(layer).__name__, "module": type(layer).__module__,
           "config": _encode(config, where)}
    if any(getattr(type(layer), n) is not getattr(Layer, n)
           for n in ("get_build_config", "build_from_config")):
        out["build_config"] = _encode(layer.get_build_config(), where)  # (Keras's hook)
    return out


def _layer_from(cfg, ctx: _Load, depth: int = 0, decoded: bool = False):
    _depth_check(ctx, depth)
    if not isinstance(cfg, dict) or "class" not in cfg:
        raise ctx.error("a layer configuration is malformed")
    ctx.layers += 1
    if ctx.layers > MAX_LAYERS:
        raise ctx.error(f"the file declares more than {MAX_LAYERS} layers")
    if cfg["class"] in ("Sequential", "Functional"):
        return _model_from(cfg.get("arch"), ctx, depth + 1)
    cls = _resolve(cfg["class"], cfg.get("module"), ("layer",), ctx, "a layer")
    config = cfg["config"] if decoded else _decode(cfg.get("config", {}), ctx, depth + 1)
    if not isinstance(config, dict):
        raise ctx.error(f"the configuration of the layer {cfg['class']} is malformed")
    own = getattr(cls, "from_config", None)
    if isinstance(cls, type) and issubclass(cls, Layer) and \
            own.__func__ is not Layer.from_config.__func__:
        layer = own(config)  # the user's from_config (Keras's rule)
    else:
        config = constructor_arguments(cls, _built_objects(config, ctx))  # (or an older file's)
        if not is_dtype_name(config.get("dtype")):
            raise ctx.error(f"the layer {cfg['class']} has the dtype "
                            f"{str(config.get('dtype'))[:80]!r}, which names no dtype")
        _check_arguments(cls, config, ctx, f"the layer {cfg['class']}")
        try:
            layer = cls(**config)
        except TypeError as e:
            raise ctx.error(f"the layer {cfg['class']}: {cls.__name__} cannot be built from "
                            f"the file's arguments ({e})") from None
    if "build_config" in cfg:  # Keras's hook, first of the four load_model calls
        layer.build_from_config(_decode(cfg["build_config"], ctx, depth + 1))
        layer.built = True
    return layer


def _architecture(model, where="save", objects=None) -> dict:
    """The model's structure as JSON: its layers' configurations and the
    graph of calls and operations connecting them. `objects`, a list, gets
    the layers in the order of the architecture's "layers"."""
    Sequential = model_class("Sequential")

    base = {"name": model.name, "seed": model.seed, "dtype": model.dtype}
    if isinstance(model, Sequential):
        layers = model._stack
        if objects is not None:
            objects.extend(layers)
        batch = getattr(model._inputs[0], "fixed_batch", None) if model._inputs else None
        return dict(base, kind="Sequential", input_shape=list(model._inputs[0].shape[1:]) if
                    model._inputs else None,
                    layers=[_layer_config(l, where) for l in layers],
                    **({"batch_size": batch} if batch else {}))
    if not model._functional:
        return dict(base, kind="Subclassed", **{
            "class": type(model).__name__, "module": type(model).__module__,
            "config": _encode(model.get_config(), where),
            "input_shapes": [list(t.shape[1:]) for t in model._inputs],
            "input_dtypes": [t.dtype for t in model._inputs]})
    order, ids = tensor_order(model)
    layer_index, layers = {}, []

    def layer_ref(layer):
        if id(layer) not in layer_index:
            layer_index[id(layer)] = len(layers)
            layers.append(_layer_config(layer, where))
            if objects is not None:
                objects.append(layer)
        return layer_index[id(layer)]

    def enc(a):
        if isinstance(a, KerasTensor):
            return {"t": ids[a.id]}
        if isinstance(a, _Index):
            v = a.value
            if isinstance(v, slice):
                return {"slice": [v.start, v.stop, v.step]}
            if v is Ellipsis:
                return {"ellipsis": True}
            return {"index": enc(v)}
        if isinstance(a, (list, tuple)):
            return {"list": [enc(u) for u in a], "tuple": isinstance(a, tuple)}
        if isinstance(a, np.ndarray):
            return {"array": a.tolist(), "dtype": str(a.dtype)}
        if isinstance(a, np.generic):
            return a.item()
        return _encode(a, where)

    nodes = []
    for t in order:
        if t.op == "input":
            nodes.append({"op": "input", "shape": list(t.shape[1:]), "dtype": t.dtype,
                          "name": t.name})
            if getattr(t, "fixed_batch", None):  # Input(batch_shape=): stateful layers need it
                nodes[-1]["batch_size"] = t.fixed_batch
        elif t.op == "param":
            nodes.append({"op": "param", "layer": layer_ref(t.args[0]), "param": t.args[1]})
        elif t.op == "item":
            nodes.append({"op": "item", "node": ids[t.args[0].id], "index": t.args[1]})
        elif t.op == "layer":
            layer, ins, multi = t.args
            auto = getattr(t, "auto_mask_keys", ())  # taken again on load
            static = {k: v for k, v in t.kwargs.items() if k != "_template" and k not in auto}
            nodes.append({"op": "layer", "layer": layer_ref(layer),
                          "inputs": [ids[i.id] for i in ins], "multi": bool(multi),
                          "custom": layer._is_custom(), "kwargs": _encode(static, where),
                          **(output_nesting.call_entry(t) if layer._is_custom() else {})})
        else:
            nodes.append({"op": "prim", "fn": t.fn, "args": [enc(a) for a in t.args],
                          "kwargs": {k: enc(v) for k, v in t.kwargs.items()}})
    return dict(base, kind="Functional", layers=layers, nodes=nodes,
                inputs=[ids[t.id] for t in model._inputs],
                outputs=[ids[t.id] for t in model._outputs],
                multi_in=model._multi_in, multi_out=model._multi_out,
                **({"output_keys": list(model._output_keys)}
                   if getattr(model, "_output_keys", None) else {}), **output_nesting.entry(model),
                **({"input_keys": list(model._input_keys)} if getattr(model, "_input_keys", None)
                   else {}), **ARCHITECTURE_HOOKS["save"](model))  # (registry.py)


# The operations a functional graph read from a file may apply: the pure
# ones a symbolic tensor records (Python's operators, indexing, NumPy's
# functions and methods), each with the rule bounding its result's size
# before it runs (_result_bound). Anything else (printing, files, random
# numbers, collectives, creation from sizes alone, ...) is refused.
_NOT_LARGER = """
    sum prod mean nansum nanmean cumsum cumprod nancumsum max min amax amin all any argmax argmin
    ptp median count_nonzero std var average nanprod nanmin nanmax nanargmin nanargmax nanmedian
    nanstd nanvar logsumexp sort argsort reshape transpose swapaxes moveaxis flatten ravel squeeze
    expand_dims flip roll atleast_1d atleast_2d atleast_3d trace norm det inv pinv cholesky solve
    matrix_power matrix_rank asarray ascontiguousarray array
"""
_JOINING = "concatenate stack hstack vstack dstack append diff"
_PRODUCT = """
    matmul dot tile repeat broadcast_to pad take take_along_axis outer inner vdot kron tensordot
    einsum cross percentile quantile nanpercentile nanquantile isin searchsorted
"""
PURE_OPERATIONS = {name: rule for rule, names in (
    ("elementwise", ELEMENTWISE_OPERATIONS), ("not_larger", _NOT_LARGER.split()),
    ("joining", _JOINING.split()), ("product", _PRODUCT.split()), ("index", ["getitem"]))
    for name in names}


def _operand(a):
    """(shape, size) of one operand of an operation: the shape of a symbolic
    tensor (with the larger dummy batch), an array or a scalar; for a list,
    None and the number of values it holds (whatever it becomes: a shape, an
    array, a stack of its tensors)."""
    def one(v):
        if isinstance(v, KerasTensor):
            shape = tuple(max(_DUMMY_BATCH) if d is None else d for d in v.shape)
            return shape, math.prod(shape)
        if isinstance(v, np.ndarray):
            return v.shape, v.size
        return (), 1

    if not isinstance(a, (list, tuple)):
        return one(a)
    total, stack = 0, [a]  # without recursion
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        else:
            total += one(v)[1]
    return None, max(total, 1)


def _integers(values):
    stack = [values]
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif isinstance(a, numbers.Integral) and not isinstance(a, bool):
            yield int(a)


def _result_bound(fn: str, args: list, kwargs: dict) -> int:
    """An upper bound of the number of values the operation's stand-in
    result holds, from its operands' shapes alone (nothing is computed)."""
    operands = list(args) + list(kwargs.values())
    if not operands:
        return 1
    described = [_operand(a) for a in operands]
    shapes = [shape for shape, _ in described]
    sizes = [size for _, size in described]
    exact = all(shape is not None for shape in shapes)  # no lists among the operands
    rule = PURE_OPERATIONS[fn]
    if rule == "elementwise" and exact:
        try:
            return math.prod(np.broadcast_shapes(*shapes))
        except ValueError:  # the operation reports it
            return max(sizes)
    if rule == "elementwise":
        return math.prod(sizes)  # a broadcast's extents are at most their product
    if rule == "not_larger":
        return max(sizes)
    if rule == "joining":
        return sum(sizes)
    if rule == "index":
        # basic indexing selects from the operand; a list or array index
        # gathers up to its length from each
        return sizes[0] * math.prod(n for shape, n in described[1:] if shape != ())
    if fn in ("matmul", "dot") and exact and len(shapes) == 2 and all(shapes):
        a, b = shapes
        if fn == "matmul" or len(b) < 2:
            a2, b2 = (a if len(a) > 1 else (1,) + a), (b if len(b) > 1 else b + (1,))
            try:
                batch = np.broadcast_shapes(a2[:-2], b2[:-2])
            except ValueError:
                return max(sizes)
            return math.prod(batch) * a2[-2] * b2[-1]
        return math.prod(a[:-1]) * math.prod(b[:-2]) * b[-1]
    return math.prod(sizes) * math.prod(1 + abs(n) for n in _integers(operands))


def _check_shape(ctx: _Load, shape, what: str):
    """A shape a file declares: at most MAX_SAMPLE_VALUES values per sample."""
    if not isinstance(shape, (list, tuple)) or len(shape) > _MAX_RANK_SHAPE or not all(
            d is None or (isinstance(d, int) and not isinstance(d, bool) and d > 0)
            for d in shape):
        raise ctx.error(f"{what} has the malformed shape {str(shape)[:120]}")
    count = math.prod(d for d in shape if d is not None)
    if count > MAX_SAMPLE_VALUES:
        raise ctx.error(f"{what} has the shape {tuple(shape)}: {count} values per sample, past "
                        f"the {MAX_SAMPLE_VALUES} a loaded model may declare (nothing of that "
                        "size was allocated)")


def _check_outputs(ctx: _Load, out, what: str):
    """The shapes of a layer call's symbolic results."""
    for t in (out if isinstance(out, (list, tuple)) else [out]):
        if hasattr(t, "shape"):
            _check_shape(ctx, t.shape, what)


def _check_built(ctx: _Load, model):
    """Every layer shape of a model built from a file (Sequential, subclassed)."""
    for t in list(model._inputs) + list(model._outputs):
        _check_shape(ctx, t.shape, f"the model {model.name!r}")
    for layer in getattr(model, "layers", []):
        for attr in ("_in_shape", "_out_shape"):
            shape = getattr(layer, attr, None)
            for s in (shape if isinstance(shape, list) else [shape]):
                if s is not None:
                    _check_shape(ctx, s, f"the layer {layer.name!r}")


def _layers_from(configs, ctx: _Load, depth: int):
    """The layers of an architecture; clone_model's clone_function makes the
    top level's from the original layers."""
    clone = getattr(ctx, "clone", None)
    if clone is not None and depth == 0:
        fn, originals = clone
        out = []
        for layer in originals:
            new = fn(layer)
            if not isinstance(new, Layer):
                raise TypeError(f"[clone_model] clone_function must return a Layer, got "
                                f"{type(new).__name__} for layer {layer.name!r}")
            out.append(new)
        return out
    return [_layer_from(c, ctx, depth + 1) for c in configs]


def model_from_config(arch, custom_objects=None, where="from_config", clone=None):
    """A new model (fresh weights) from an architecture (Model.get_config's
    or to_json's): the classes it names resolve as load_model's do."""
    if custom_objects is not None and not (
            isinstance(custom_objects, dict) and all(isinstance(k, str) for k in custom_objects)):
        raise TypeError(f"[{where}] custom_objects must be a dict of class names to classes, "
                        f"got {custom_objects!r}")
    ctx = _Load(f"<{where}>", dict(custom_objects or {}), where)
    ctx.clone = clone
    try:
        return _model_from(arch, ctx)
    except _MALFORMED as e:
        if str(e).startswith("["):
            raise  # already says what and where
        raise ValueError(f"[{where}] the configuration is malformed ({type(e).__name__}: "
                         f"{str(e)[:200]})") from None


def _user_classes(model) -> dict:
    """{class name: class} of the layers a model holds (nested models too)."""
    out, stack = {}, [model]
    while stack:
        m = stack.pop()
        out[type(m).__name__] = type(m)
        for layer in getattr(m, "layers", None) or []:
            if layer is not m:
                stack.append(layer)
        for layer in getattr(m, "_stack", None) or []:
            stack.append(layer)
    return out


def clone_model(model, input_tensors=None, clone_function=None, call_function=None,
                recursive=False, **kwargs):
    """A new model of the same architecture and configuration with new
    weights (keras.models.clone_model). `clone_function(layer)` makes each
    top-level layer of a Sequential or functional model (default: the layer's
    class from its get_config)."""
    Model = model_class("Model")

    if not isinstance(model, Model):
        raise TypeError(f"[clone_model] expected a Model, got {type(model).__name__}")
    for what, v in (("input_tensors", input_tensors), ("call_function", call_function)):
        if v is not None:
            raise ValueError(f"[clone_model] {what} is not supported (got {v!r}); clone, then "
                             "call the clone on new inputs")
    if recursive:
        raise ValueError("[clone_model] recursive=True is not supported: clone_function "
                         "applies to the top-level layers")
    if kwargs:
        raise TypeError(f"[clone_model] unexpected keyword arguments {sorted(kwargs)}")
    if clone_function is not None and not callable(clone_function):
        raise TypeError(f"[clone_model] clone_function must be callable, got "
                        f"{clone_function!r}")
    model._check_built("clone_model")
    objects: list = []
    arch = _architecture(model, "clone_model", objects)
    # new weights: the initializers drawn with the next seed (deterministic)
    arch = dict(arch, seed=int(arch.get("seed", 0)) + 1)
    clone = (clone_function, objects) if clone_function is not None and \
        arch["kind"] != "Subclassed" else None
    classes = _user_classes(model)
    for layer in objects:  # (layers without weights are not in model.layers)
        classes.update(_user_classes(layer))
    _walk_layer_classes(model, classes)
    return model_from_config(arch, classes, "clone_model", clone)


def _walk_layer_classes(model, classes: dict):
    """Adds the classes of every layer called in a model's graph."""
    seen, stack = set(), list(getattr(model, "_outputs", None) or [])
    while stack:
        t = stack.pop()
        if t.id in seen:
            continue
        seen.add(t.id)
        if t.op == "layer":
            classes.setdefault(type(t.args[0]).__name__, type(t.args[0]))
        stack.extend(_deps(t))


def _model_from(arch, ctx: _Load, depth: int = 0):
    Model, Sequential = model_class("Model"), model_class("Sequential")

    _depth_check(ctx, depth)
    if not isinstance(arch, dict) or arch.get("kind") not in ("Sequential", "Functional",
                                                             "Subclassed"):
        raise ValueError("[load_model] the file has no model architecture (written by "
                         "save_weights?): build the model in code and use load_weights")
    kind = arch["kind"]
    common = {"name": arch.get("name"), "seed": int(arch.get("seed", 0)),
              "dtype": arch.get("dtype", "float32")}
    if kind == "Sequential":
        if len(arch["layers"]) > MAX_LAYERS:
            raise ctx.error(f"the file declares more than {MAX_LAYERS} layers")
        layers = _layers_from(arch["layers"], ctx, depth)
        shape = arch.get("input_shape")
        if shape is not None:
            _check_shape(ctx, shape, "the Sequential model's input")
        for layer in layers:
            if getattr(layer, "declared_input_shape", None) is not None:
                _check_shape(ctx, layer.declared_input_shape, f"the layer {layer.name!r}'s input")
        batch = arch.get("batch_size")
        if batch is not None:  # Input(batch_shape=) (stateful layers need the batch size)
            if isinstance(batch, bool) or not isinstance(batch, int) or not 0 < batch < 1 << 31 \
                    or shape is None:
                raise ctx.error(f"the Sequential model's batch size {str(batch)[:40]!r} is not "
                                "a positive int with an input shape")
            layers = [Input(tuple(shape), batch_size=batch, dtype=common["dtype"])] + layers
            shape = None
        model = Sequential(layers, input_shape=tuple(shape) if shape is not None else None,
                           **common)
        if model.built:
            _check_built(ctx, model)
        return model
    if kind == "Subclassed":
        cls = _resolve(arch.get("class"), arch.get("module"), (), ctx, "the model")
        if not (isinstance(cls, type) and issubclass(cls, Model)):
            raise ctx.error(f"the model class {arch.get('class')!r} is not a Model")
        shapes = [tuple(s) for s in arch["input_shapes"]]
        for s in shapes:
            _check_shape(ctx, s, "the model's input")
        config = _decode(arch.get("config", {}), ctx, depth + 1)
        config = {k: v for k, v in config.items() if k not in ("name",)}
        _check_arguments(cls, config, ctx, f"the model {arch.get('class')}")
        try:
            model = cls(**config)
        except TypeError as e:
            raise ValueError(f"[load_model] cannot rebuild {arch['class']}: {e} (give the "
                             "class a get_config returning its constructor's arguments)") \
                from None
        model.build(shapes if len(shapes) > 1 else shapes[0])
        _check_built(ctx, model)
        return model
    if len(arch["layers"]) > MAX_LAYERS or len(arch["nodes"]) > MAX_NODES:
        raise ctx.error(f"the graph declares {len(arch['layers'])} layers and "
                        f"{len(arch['nodes'])} nodes, past the {MAX_LAYERS} and {MAX_NODES} a "
                        "loaded model may have")
    layers = _layers_from(arch["layers"], ctx, depth)
    made = []

    def ref(i, table=made):
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(table):
            raise ctx.error(f"node {len(made)} refers to {str(i)[:40]}, which is not an earlier "
                            "node or a layer of the file")
        return table[i]

    def dec(a, level=0):
        _depth_check(ctx, depth + level)
        if isinstance(a, dict):
            if "t" in a:
                return ref(a["t"])
            if "slice" in a:
                return slice(*a["slice"])
            if "ellipsis" in a:
                return Ellipsis
            if "index" in a:
                return dec(a["index"], level + 1)
            if "list" in a:
                items = [dec(u, level + 1) for u in a["list"]]
                return tuple(items) if a.get("tuple") else items
            if "array" in a:
                if a.get("dtype") not in DTYPE_NAMES.values():
                    raise ctx.error(f"node {len(made)} holds an array of dtype "
                                    f"{str(a.get('dtype'))[:40]!r}")
                return np.asarray(a["array"], dtype=a["dtype"])
            if "__tuple__" in a:
                return tuple(dec(u, level + 1) for u in a["__tuple__"])
            if "__dict__" in a:
                return {k: dec(u, level + 1) for k, u in a["__dict__"].items()}
            raise ctx.error(f"node {len(made)}: an operation's argument names an object; "
                            "operations take only tensors, numbers, strings and lists")
        if isinstance(a, list):
            return [dec(u, level + 1) for u in a]
        return a

    for node in arch["nodes"]:
        k = len(made)
        op = node.get("op")
        if op == "input":
            _check_shape(ctx, node["shape"], f"node {k} (an Input)")
            if node["dtype"] not in DTYPE_NAMES.values():
                raise ctx.error(f"node {k} (an Input) has the dtype {str(node['dtype'])[:40]!r}")
            batch = node.get("batch_size")
            if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or
                                      not 0 < batch < 1 << 31):
                raise ctx.error(f"node {k} (an Input) has the batch size {str(batch)[:40]!r}")
            made.append(Input(tuple(node["shape"]), batch_size=batch, dtype=node["dtype"],
                              name=node.get("name")))
        elif op == "param":
            layer = ref(node["layer"], layers)
            made.append(layer._symbols[node["param"]])
        elif op == "item":
            outs = ref(node["node"])
            if not isinstance(outs, list):
                raise ctx.error(f"node {k} takes an output of node {node['node']}, which has one")
            made.append(output_or_mask(outs, node["index"]))  # (a nested model's mask)
        elif op == "layer":
            layer = ref(node["layer"], layers)
            ins = [ref(i) for i in node["inputs"]]
            static = _decode(node.get("kwargs", {}), ctx, depth + 1)
            if node.get("custom"):
                args, tensor_kwargs = output_nesting.call_arguments(node, ins, ctx)
                res = layer(*args, **tensor_kwargs, **static)
                made.append(res if isinstance(res, list) else [res])
            else:
                made.append(layer(ins if node["multi"] else ins[0], **static))
            _check_outputs(ctx, made[-1], f"node {k} (layer {layer.name!r})")
        elif op == "prim":
            fn = node.get("fn")
            if fn not in PURE_OPERATIONS:
                raise ctx.error(
                    f"node {k} applies the operation {str(fn)[:80]!r}, which a model file may "
                    "not hold: a functional graph may apply only pure operations (operators, "
                    "indexing, NumPy-style math), never ones that print, read or write files, "
                    "draw random numbers or communicate")
            args = [dec(a) for a in node["args"]]
            kwargs = {str(key): dec(v) for key, v in node["kwargs"].items()}
            bound = _result_bound(fn, args, kwargs)
            # the operands too: a kernel may copy a zero-stride stand-in
            operands = sum(_operand(a)[1] for a in list(args) + list(kwargs.values()))
            if bound > max(_DUMMY_BATCH) * MAX_SAMPLE_VALUES or \
                    (bound + operands) * len(_DUMMY_BATCH) > ctx.standins:
                shapes = [t.shape for t in args if isinstance(t, KerasTensor)]
                raise ctx.error(
                    f"node {k} ({fn} of {shapes}) could make up to {bound} values per stand-in "
                    f"batch, past the budget of {MAX_SAMPLE_VALUES} per sample and "
                    f"{MAX_STANDIN_VALUES} for the whole graph (nothing of that size was "
                    "allocated)")
            if fn == "getitem":
                t = args[0][tuple(args[1:])]
            else:
                t = _record(fn, args, kwargs)
            ctx.standins -= sum(np.size(v) for v in t._dummies) + operands * len(_DUMMY_BATCH)
            _check_shape(ctx, t.shape, f"node {k} ({fn})")
            made.append(t)
        else:
            raise ctx.error(f"node {k} is of the unknown kind {str(op)[:40]!r}")
    inputs = [ref(i) for i in arch["inputs"]]
    outputs = [ref(i) for i in arch["outputs"]]
    def keyed(what, tensors):
        keys = arch.get(what)
        if keys is None:
            return None
        if (not isinstance(keys, list) or len(keys) != len(tensors)
                or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys)):
            raise ctx.error(f"{what} must be {len(tensors)} distinct strings, got "
                            f"{str(keys)[:80]}")
        return dict(zip(keys, tensors))

    ins = keyed("input_keys", inputs) or (inputs if arch.get("multi_in") else inputs[0])
    outs = keyed("output_keys", outputs) or output_nesting.outputs_of(arch, outputs, ctx)
    return ARCHITECTURE_HOOKS["load"](Model(ins, outs, **common), arch, ctx)  # (registry.py)


def _compile_config(model, where) -> dict:
    c = model._compiled
    if c is None:
        return {}
    def loss_cfg(loss):
        if loss is None:
            return None
        if type(loss).__name__ == "FunctionLoss":
            return {"function": loss.name}
        return {"class": type(loss).__name__, "config": _encode(loss.get_config(), where)}

    def metric_cfg(m):
        if isinstance(m, _FunctionMetric):
            return {"function": m.name}
        cfg = m.get_config() if hasattr(m, "get_config") else {}
        return {"class": type(m).__name__, "module": type(m).__module__,
                "config": _encode(cfg, where), "name": m.name}

    hook = model._compile_hook_config()  # get_compile_config's, when overridden
    if hook is not None:
        return {"hook": hook}
    return {"optimizer": _encode(optimizer_classes.saved_config(c.optimizer), where),
            "losses": [loss_cfg(l) for l in c.losses], "loss_weights": c.loss_weights,
            "metrics": [[metric_cfg(m) for m in ms] for ms in c.metrics],
            "weighted": [list(flags) for flags in c.weighted]}


def save_model(model, path, training_state=None):
    """model.save / save_checkpoint."""
    where = "save_checkpoint" if training_state is not None else "save"
    model._check_built(where)
    tensors = dict(model.whole_weights())
    tensors.update(save_hooks(model, where))  # stores and assets of the layers' hooks
    meta = {"model": _architecture(model, where), "compile": _compile_config(model, where)}
    if model._opt_state is not None:
        for k, v in model._optimizer_state_of(model._opt_state, "_gathered").items():
            tensors[f"optimizer/{k}"] = v
    if training_state is not None:
        meta["training"] = training_state
    meta["iteration"] = model._iteration
    save_file(path, tensors, meta, where)


def _optimizer_from(cfg, ctx: _Load):
    # keras.optimizers' forms (and tessera.optim's where the config says so); no schedule
    return optimizer_classes.get(_decode(cfg, ctx))


def _compile_from(model, cfg, ctx: _Load):
    if not cfg:
        return
    if "hook" in cfg:  # the model's own get_compile_config: its compile_from_config
        model.compile_from_config(cfg["hook"])  # (JSON; Keras's serialized objects)
        return

    def function(entry, what):
        name = entry["function"]
        fn = (ctx.custom.get(name) or _registered(name)) if isinstance(name, str) else None
        if fn is None:
            raise ValueError(f"[load_model] the model was compiled with the {what} function "
                             f"{str(name)[:80]!r}: pass it in custom_objects")
        return fn

    losses = []
    for l in cfg["losses"]:
        if l is None:
            losses.append(None)
        elif "function" in l:
            losses.append(function(l, "loss"))
        else:
            cls = _resolve(l.get("class"), l.get("module"), ("loss",), ctx, "the compiled loss")
            losses.append(_construct(cls, _decode(l.get("config", {}), ctx), ctx,
                                     f"the loss {l.get('class')}"))
    per_output = []
    for ms in cfg["metrics"]:
        out = []
        for m in ms:
            if "function" in m:
                out.append(function(m, "metric"))
                continue
            try:
                cls = _resolve(m.get("class"), m.get("module"), ("metric",), ctx,
                               "a compiled metric")
            except ValueError:
                if not isinstance(m.get("name"), str):
                    raise
                out.append(metrics.get(m["name"]))  # a name: looked up, nothing built
                continue
            out.append(_construct(cls, _decode(m.get("config", {}), ctx), ctx,
                                  f"the metric {m.get('class')}"))
        per_output.append(out)
    # which were compile's weighted_metrics (files before them: none)
    flags = cfg.get("weighted") or [[False] * len(ms) for ms in per_output]
    if not isinstance(flags, list) or len(flags) != len(per_output) or any(
            not isinstance(f, list) or len(f) != len(ms) or
            any(not isinstance(b, bool) for b in f) for f, ms in zip(flags, per_output)):
        raise ctx.error("the compiled metrics' weighted flags are malformed")
    plain = [[m for m, w in zip(ms, f) if not w] for ms, f in zip(per_output, flags)]
    weighted = [[m for m, w in zip(ms, f) if w] for ms, f in zip(per_output, flags)]
    opt = _optimizer_from(cfg["optimizer"], ctx)
    n = len(losses)
    model.compile(opt, losses if n > 1 else losses[0],
                  metrics=(plain if n > 1 else plain[0]) if any(plain) else None,
                  weighted_metrics=(weighted if n > 1 else weighted[0]) if any(weighted)
                  else None, loss_weights=cfg.get("loss_weights"))


def load_model(path, custom_objects=None, compile: bool = True):  # noqa: A002
    """A model saved by model.save (or save_checkpoint): architecture, weights,
    and (compile=True) the compile settings and optimizer state; or a
    FeatureSpace (FeatureSpace.save). Nothing in the file is executed: it may
    name only tessera's own classes (layers, losses, metrics, optimizers,
    schedules, initializers, regularizers), registered or custom_objects
    classes, and pure operations; every size it declares is checked first."""
    if custom_objects is not None and not (
            isinstance(custom_objects, dict) and all(isinstance(k, str) for k in custom_objects)):
        raise TypeError(f"[load_model] custom_objects must be a dict of class names to classes, "
                        f"got {custom_objects!r}")
    ctx = _Load(os.fspath(path), dict(custom_objects or {}))
    tensors, header = read_file(path, "load_model")
    if header.get("holds") in FILE_FORMATS:  # not a model (registry.py)
        return FILE_FORMATS[header["holds"]](header, os.fspath(path))
    total = sum(a.size for name, a in tensors.items()
                if not name.startswith(("optimizer/", "hooks/")))
    budget = WEIGHTS_IN_FILE.set({"left": total, "total": total, "path": os.fspath(path)})
    try:
        model = _model_from(header.get("model"), ctx)
    except MemoryError as e:  # the shapes of a damaged or crafted architecture
        raise ValueError(f"[load_model] {os.fspath(path)}: the architecture needs more memory "
                         f"than there is ({str(e)[:200]}); nothing was loaded") from None
    except _MALFORMED + (ValueError,) as e:
        if isinstance(e, ValueError) and str(e).startswith("["):
            raise  # already says what and where
        raise ValueError(f"[load_model] {os.fspath(path)}: the architecture is malformed "
                         f"({type(e).__name__}: {str(e)[:200]}); nothing was loaded") from None
    finally:
        WEIGHTS_IN_FILE.reset(budget)
    # Keras's order: build_from_config (as the layers were made), compile_from_config,
    # the weights (load_own_variables), load_assets
    if compile and header.get("compile"):
        try:
            _compile_from(model, header["compile"], ctx)
        except _MALFORMED + (ValueError,) as e:
            if isinstance(e, ValueError) and str(e).startswith("["):
                raise
            raise ValueError(f"[load_model] {os.fspath(path)}: the compile settings are malformed "
                             f"({type(e).__name__}: {str(e)[:200]})") from None
    set_weights_from(model, tensors, os.fspath(path), "load_model")
    hooks.load_own_variables(model, tensors, os.fspath(path), ctx.error)
    if compile and header.get("compile"):
        _restore_optimizer(model, tensors, header)
    hooks.load_assets(model, tensors, ctx.error)
    return model


def save_weights(model, filepath, overwrite=True, max_shard_size=None):
    """keras.saving.save_weights: model.save_weights(filepath) (tessera's weights
    format); overwrite=False refuses an existing file."""
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError(f"[save_weights] {filepath!r} exists and overwrite=False")
    if max_shard_size is not None:
        raise ValueError("[save_weights] max_shard_size is not supported: one file")
    model.save_weights(filepath)


def load_weights(model, filepath, skip_mismatch=False, **kwargs):
    """keras.saving.load_weights: model.load_weights(filepath)."""
    if skip_mismatch:
        raise ValueError("[load_weights] skip_mismatch=True is not supported: every name, "
                         "shape and dtype must match")
    model.load_weights(filepath)
