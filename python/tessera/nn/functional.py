"""Layer calls on symbolic tensors, tracing of users' Python (custom layers'
and subclassed models' ``call``, activation, loss and metric functions), and
the discovery of the layers a graph uses."""
from __future__ import annotations

import contextlib
import inspect

import numpy as np

from . import tree as _tree
from .build_shapes import built_on, first_argument_shapes
from .call_defaults import eager_context, eager_training, keep_origin, step_call_training
from .dtype_policies import eager_dtype, eager_inputs
from .input_spec import assert_input_compatibility
from .masked_arrays import _with_mask
from .nested_masks import (carried_mask_exprs, carried_mask_specs, graph_model, mask_items,
                           output_or_mask)
from .registry import INTERNAL_MODEL_NAME, model_class
from .sublayer_order import keras_order
from .symbolic import (STEP_SEED, GraphWriter, KerasTensor, _Index, _record, nested_step_seed,
                       follow_first_axis, stand_in_input, user_location)
from .layer_state import add_program_writes, recording_call_writes, returned_as_assigned
from .variables import (PATH_SCOPE, add_program_losses, assigning_in_call, collecting_losses,
                        is_rewriting, rewriting, tracing)

__all__ = ["call_layer", "trace_call", "write_traced", "apply_function", "collect_layers",
           "graph_layers", "clone_graph"]


def _flatten(x) -> list:
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            out += _flatten(v)
        return out
    return [x]


def _is_array(v) -> bool:
    return isinstance(v, np.ndarray) or (isinstance(v, (list, tuple)) and v and all(
        isinstance(u, (int, float, np.number)) for u in v))


def _is_constant(t: KerasTensor) -> bool:
    """A tensor of the program with no batch axis (a traced call's constant)."""
    return t.shape and t.shape[0] is not None and t.op == "prim"


def _fixed_lead(t: KerasTensor) -> bool:
    """A tensor whose first axis has a fixed length: a traced call's constant, or
    a tensor made from one of fixed shape (the switch transformer's (800, 32)
    tokens of a batch, the router's input inside its traced call, and the
    layers' outputs on them). Keras takes its first axis for the batch."""
    return _is_constant(t) or (bool(t.shape) and t.shape[0] is not None and
                               t.op in ("input", "layer", "item") and _TRACING[0] > 0)


def _per_sample(t: KerasTensor, layer) -> tuple:
    if _fixed_lead(t):
        return t.shape[1:]  # its first axis taken for the batch, as Keras does
    if not t.shape or t.shape[0] is not None:
        raise ValueError(f"[{layer.kind}] layer {layer.name!r} called at {user_location()} on a "
                         f"tensor of shape {t.shape} without a batch axis")
    return t.shape[1:]


def own_compute_mask(layer):
    """The compute_mask a user's layer defines (None when it inherits
    Layer's, which applies the built-in rules)."""
    rule = getattr(type(layer), "compute_mask", None)
    if rule is None or getattr(rule, "_tessera_default", False):
        return None
    return getattr(layer, "compute_mask")


def _accepts(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


# Keras's variable paths: variables.PATH_SCOPE (the layers' scopes and name_scope's)
_PATH_SCOPE = PATH_SCOPE


@contextlib.contextmanager
def path_scope(layer):
    """The scope of `layer`'s build and call: the layers it calls first
    inside take its path as their prefix."""
    claim_path(layer)
    _PATH_SCOPE.append(layer.__dict__["_path_prefix"] + (layer.name,))
    try:
        yield
    finally:
        _PATH_SCOPE.pop()


def claim_path(layer):
    """Fixes `layer`'s path prefix to the scope open now, on its first call."""
    layer.__dict__.setdefault("_path_prefix", _PATH_SCOPE[-1])


def call_layer(layer, inputs, args: tuple, kwargs: dict):
    """layer(inputs, *args, **kwargs): records a layer call on symbolic
    tensors, or computes it at once on arrays."""
    claim_path(layer)
    if getattr(layer, "input_spec", None) is not None:  # Keras checks it on every call
        assert_input_compatibility(layer.input_spec, inputs, layer.name, user_location(),
                                   layer.kind)
    tensors = [t for t in _flatten([inputs, list(args), list(kwargs.values())])
               if isinstance(t, KerasTensor)]
    if not tensors and _TRACING[0] and not args and not kwargs and _is_array(inputs):
        # Keras: a layer called in a traced call on an array (positions =
        # ops.arange(n); self.pos_emb(positions)) takes its first axis for
        # the batch; the array is a constant of the program, the layer's
        # weights are read (and trained) as in any call
        inputs = _record("asarray", (np.asarray(inputs),), {})
        tensors = [inputs]
    if not tensors:
        if _TRACING[0]:
            raise TypeError(
                f"[{layer.kind}] layer {layer.name!r} called at {user_location()} on arrays "
                "(no symbolic tensor) while a layer's call, a loss or a metric is traced: its "
                "result would be a constant computed with the initial weights, which would "
                "never train. Call it on a tensor derived from the call's inputs, with their "
                "batch axis: e.g. positions = ops.zeros_like(x) + ops.arange(length) and then "
                "self.pos_emb(positions)")
        return _eager_call(layer, inputs, args, kwargs)
    strings = [t for t in tensors if t.dtype == "string"]
    if strings:
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} called at {user_location()} on a "
                        "string Input: strings cannot flow through a compiled program; feed "
                        "the Input to a TextVectorization, StringLookup or Hashing layer first")
    if layer._is_custom():
        return _call_custom(layer, inputs, args, kwargs)
    return _record_builtin(layer, inputs, args, kwargs, None)


def call_builtin(layer, builtin, inputs, args: tuple, kwargs: dict):
    """`super().call(inputs, ...)` in a user's subclass of the built-in layer
    class `builtin`: the built-in's computation with the layer's own weights
    (the same Variables, declared once: Layer._builtin_output_shape), recorded
    as one node on symbolic tensors (in a traced call), or computed at once on
    arrays (an eager call)."""
    tensors = [t for t in _flatten([inputs, list(args), list(kwargs.values())])
               if isinstance(t, KerasTensor)]
    if not tensors:
        if _TRACING[0]:
            if _is_array(inputs) and not args and not kwargs:
                return _record_builtin(layer, _record("asarray", (np.asarray(inputs),), {}),
                                       (), {}, builtin)
            raise TypeError(f"[{builtin.__name__}.call] layer {layer.name!r}: super().call at "
                            f"{user_location()} got arrays (no symbolic tensor) while the "
                            "layer's call is traced; give it the call's inputs (or tensors "
                            "computed from them)")
        return _eager_call(layer, inputs, args, kwargs, builtin=builtin)
    return _record_builtin(layer, inputs, args, kwargs, builtin)


def _record_builtin(layer, inputs, args, kwargs, builtin):
    """Records a built-in layer's call on symbolic tensors (`builtin`: the
    built-in class a user's subclass computes with, or None: the layer's own)."""
    in_list, static = layer_inputs(layer, inputs, args, kwargs)
    in_mask, auto_keys = _input_masks(layer, in_list, static)
    shapes = [_per_sample(t, layer) for t in in_list]
    multi = getattr(layer, "multi_input", False)
    shape_arg = shapes if multi else shapes[0]
    where = user_location()
    if builtin is not None:
        out = layer._builtin_output_shape(builtin, shape_arg,
                                          f" (super().call at {where} on {_producers(in_list)})")
    elif not layer.built:
        try:
            out = layer.compute_output_shape(shape_arg)
        except ValueError as e:
            raise ValueError(f"{e} (layer {layer.name!r} called at {where} on "
                             f"{_producers(in_list)})") from None
        layer._refuse_weights_of_unknown_length(
            layer.params, layer.kind, f" called at {where} on {_producers(in_list)}", reset=True)
        layer._in_shape, layer._out_shape, layer.built = shape_arg, out, True
        layer._built_for = shapes
    elif shapes != layer._built_for or getattr(layer, "split_call", None) is not None:
        old = list(layer.params)
        try:
            out = layer.compute_output_shape(shape_arg)
        except ValueError as e:
            raise ValueError(f"{e} (layer {layer.name!r}, built for inputs {layer._built_for}, "
                             f"called at {where})") from None
        if [(q.name, q.shape) for q in old] != [(q.name, q.shape) for q in layer.params]:
            layer.params = old
            raise ValueError(f"[{layer.kind}] layer {layer.name!r} was built for inputs of shape "
                             f"{layer._built_for} and cannot be shared with inputs of shape "
                             f"{shapes} (called at {where}): its weights would differ")
    else:
        out = layer._out_shape
    dtype = _out_dtype(layer, in_list)
    node_args = (layer, tuple(in_list), multi)
    # on constants only (no batch axis): the output keeps their first axis
    lead = in_list[0].shape[0] if all(_fixed_lead(t) for t in in_list) else None
    if isinstance(out, list):
        node = KerasTensor((), dtype, "layer", node_args, static, where=where)
        node.builtin, node.in_call = builtin, _TRACING[0] > 0  # (see written_training)
        node.n_outputs = len(out)
        results = [KerasTensor((lead,) + tuple(s), dtype, "item", (node, k), where=where)
                   for k, s in enumerate(out)]
        for r in results:
            follow_first_axis(r, in_list[0])
        results[0]._keras_mask = _output_mask(layer, in_list, in_mask)
        node.auto_mask_keys = auto_keys
        if builtin is None:
            _record_first_call(layer, in_list, results)
        return results
    result = KerasTensor((lead,) + tuple(out), dtype, "layer", node_args, static, where=where)
    result.builtin, result.in_call = builtin, _TRACING[0] > 0  # (see written_training)
    follow_first_axis(result, in_list[0])
    result._keras_mask = _output_mask(layer, in_list, in_mask)
    result.auto_mask_keys = auto_keys
    if builtin is None:
        _record_first_call(layer, in_list, result)
    return result


def traced_node(t) -> bool:
    """A layer node whose layer's call is traced (a user's layer), not one
    written by a built-in's forward (a built-in layer, or super().call of a
    user's subclass of one)."""
    return t.args[0]._is_custom() and getattr(t, "builtin", None) is None


def _record_first_call(layer, in_list, out):
    """Keras's `layer.input` / `layer.output`: the symbolic tensors of the layer's
    first call (what feature extraction reads: `Model(m.inputs, m.get_layer(n).output)`).
    A Model has its own (its Input tensors and outputs)."""
    if "output" in layer.__dict__ or isinstance(getattr(type(layer), "output", None), property):
        return
    layer.input = in_list[0] if len(in_list) == 1 else list(in_list)
    layer.output = out


def _input_masks(layer, in_list, static):
    """The mask a layer call receives (Keras's: the `mask` argument, else the
    mask its first input carries). A layer that reads masks (mask_input)
    gets it as its forward's `mask` keyword, recorded among the call's
    arguments so that the graph computes it first; attention takes its
    query's and value's masks (auto_masks)."""
    before = set(static)
    auto = getattr(layer, "auto_masks", None)
    if auto is not None:
        auto(in_list, static)
    given = static.get("mask")
    mask = given if given is not None else getattr(in_list[0], "_keras_mask", None)
    if given is not None and not getattr(layer, "mask_input", False) and \
            not getattr(layer, "supports_masking", False):
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} does not take a mask "
                        f"(called at {user_location()})")
    if given is not None and not getattr(layer, "mask_input", False):
        del static["mask"]  # passed on, not read
    if mask is not None and getattr(layer, "mask_input", False):
        static["mask"] = mask
    # the masks taken from the inputs: a saved graph leaves them out (the
    # layer call recorded again on load takes them again)
    static_keys = set(static) - before
    return mask, static_keys


def _output_mask(layer, in_list, mask):
    """The mask of a layer's output, as Keras's compute_mask gives it: the
    layer's own rule (output_mask), else the input's mask for a layer that
    passes masks on (supports_masking), else none."""
    rule = getattr(layer, "output_mask", None)
    if rule is not None:
        return rule(in_list, mask)
    if getattr(layer, "supports_masking", False):
        return mask
    return None


def _producers(tensors) -> str:
    """Where each input comes from, for errors: "the output (None, 4) of layer 'dense'"."""
    parts = []
    for t in tensors:
        node = t.args[0] if t.op == "item" else t
        if node.op == "layer":
            parts.append(f"the output {t.shape} of layer {node.args[0].name!r}")
        elif t.op == "input":
            parts.append(f"the Input {t.shape}")
        else:
            parts.append(f"the result {t.shape} of {t.fn} at {t.where}")
    return ", ".join(parts)


def _out_dtype(layer, in_list) -> str:
    if getattr(layer, "output_dtype", None):
        return layer.output_dtype
    floats = [t.dtype for t in in_list if t.dtype.startswith("float")]
    return floats[0] if floats else "float32"


def layer_inputs(layer, inputs, args, kwargs):
    """The symbolic inputs of a call (in order) and its other arguments."""
    split = getattr(layer, "split_call", None)
    if split is not None:
        return split(inputs, *args, **kwargs)
    if args:
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} takes one input (or a list of "
                        f"inputs), got {1 + len(args)} positional arguments")
    static = {}
    for k, v in kwargs.items():
        if k == "training":
            if v is not None and not isinstance(v, bool):
                raise TypeError(f"[{layer.kind}] training must be True, False or None, got {v!r}")
            if v is not None:
                static[k] = v
        elif k == "mask":
            if v is not None:
                if not isinstance(v, KerasTensor):
                    raise TypeError(f"[{layer.kind}] layer {layer.name!r}: mask must be a "
                                    f"symbolic tensor (batch, timesteps), got "
                                    f"{type(v).__name__}")
                static[k] = v
        else:
            raise TypeError(f"[{layer.kind}] layer {layer.name!r} called with an unexpected "
                            f"keyword argument {k!r}")
    multi = getattr(layer, "multi_input", False)
    in_list = list(inputs) if multi and isinstance(inputs, (list, tuple)) else [inputs]
    if multi and not isinstance(inputs, (list, tuple)):
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} takes a list of inputs, got one "
                        "tensor")
    for t in in_list:
        if not isinstance(t, KerasTensor):
            raise TypeError(f"[{layer.kind}] layer {layer.name!r} got a {type(t).__name__} among "
                            "symbolic inputs; every input must come from Input() or a layer")
    return in_list, static


# ---------------------------------------------------------------- custom layers


def _placeholders(shapes, dtypes):
    return [KerasTensor(tuple(s), d, "input") for s, d in zip(shapes, dtypes)]


def _restructure(template, flat: list):
    """`flat` arranged like `template` (a tensor or a list/tuple of them)."""
    it = iter(flat)

    def build(t):
        if isinstance(t, dict):
            return {k: build(v) for k, v in t.items()}
        if isinstance(t, (list, tuple)):
            return type(t)(build(v) for v in t)
        return next(it) if isinstance(t, KerasTensor) else t

    return build(template)


# >0 while a user's call (or activation, loss, metric) is being traced: a layer
# called on plain arrays then is an error, not a constant made at build time.
_TRACING = [0]


def trace_call(layer, template, kwargs: dict, training: bool, input_masks=None,
               user_call=False):
    """Runs layer.call on fresh symbolic stand-ins for the inputs described by
    `template` (tensors arranged as the call received them). Returns the
    outputs (flat list), the placeholders, and whether there was one output.
    input_masks: per tensor of the template, the (shape, dtype) of the mask
    it carries, or None; the stand-ins carry stand-ins of them, as Keras's
    inputs keep their masks inside call (a MultiHeadAttention called on them
    takes them); their placeholders follow the inputs' in the list."""
    flat = [t for t in _flatten(template) if isinstance(t, KerasTensor)]
    ph = _placeholders([t.shape for t in flat], [t.dtype for t in flat])
    for p, t in zip(ph, flat):
        follow_first_axis(p, t)  # (an input of batch * windows rows keeps their count)
    mask_ph = []
    for p, m in zip(ph, input_masks or ()):
        if m is not None:
            p._keras_mask = KerasTensor(tuple(m[0]), m[1], "input")
            mask_ph.append(p._keras_mask)
    call_args = _restructure(template, ph)
    kw = dict(kwargs)
    if _accepts(layer.call, "training"):
        kw["training"] = training
    else:
        kw.pop("training", None)
    args, kwa = call_args
    if user_call and not is_rewriting():
        layer.__dict__["_added"] = []  # add_loss: the losses of the latest call
    _TRACING[0] += 1
    try:
        # (Variables read by the program, weights it assigns as assigned; user_call or writer's)
        with tracing(), path_scope(layer), assigning_in_call(), rewriting(not user_call), \
                recording_call_writes() as writes:
            out = returned_as_assigned(layer.call(*args, **kwa, **kw), writes)
    finally:
        _TRACING[0] -= 1
    # (the weights it assigned, with their values: custom_forward writes them)
    layer.__dict__["_call_writes"] = writes
    single = not isinstance(out, (list, tuple))
    outs = [out] if single else list(out)
    # a nested structure (Keras's layers may return one: a list of (output, kernel)
    # pairs): its leaves, the structure kept for _call_custom to return
    nested = not single and any(_tree.is_nested(o) for o in outs)
    layer.__dict__["_traced_structure"] = out if nested else None
    if nested:
        outs = _tree.flatten(out)
    for o in outs:
        if not isinstance(o, KerasTensor):
            raise TypeError(f"[{layer.kind}] {type(layer).__name__}.call must return symbolic "
                            f"tensors (computed from its inputs), got {type(o).__name__}")
    return outs, ph + mask_ph, single


def write_traced(outs, placeholders, exprs, ctx) -> list:
    """Writes traced outputs with the placeholders bound to `exprs`."""
    names = {p.id: e for p, e in zip(placeholders, exprs)}
    names[STEP_SEED.id] = nested_step_seed(ctx.seed, getattr(ctx, "seed_stride", 64), ctx.index)
    sub = GraphWriter(names, ctx.param, ctx.layer_code, prefix=ctx.fresh("c") + "_")
    results = [sub.expr(o) for o in outs]
    for s in sub.stmts:
        ctx.emit(s)
    return results


def _outer_losses(layer, placeholders, flat):
    """The add_loss terms of this call (its sublayers' and a model's layers' too) recorded
    again on the tensors it was called on: `losses` of the latest call, in the caller's
    graph (a train_step's `sum(self.vqvae.losses)`); one reading a mask stays as traced."""
    todo, seen = [layer], set()
    while todo:
        owner = todo.pop()
        if id(owner) in seen:
            continue
        seen.add(id(owner))
        added = owner.__dict__.get("_added") or []
        try:
            again = iter(clone_graph([a for a in added if isinstance(a, KerasTensor)],
                                     placeholders, flat))
            owner.__dict__["_added"] = [next(again) if isinstance(a, KerasTensor) else a
                                        for a in added]
        except (ValueError, KeyError):
            pass
        todo += list(owner._sublayers()) + list(getattr(owner, "layers", None) or [])


def _call_custom(layer, inputs, args, kwargs):
    """A user's layer (or model) called on symbolic tensors: builds it on the first call,
    traces call() once for the output shapes, and records one node that is traced again,
    with Python's training flag, when the model's programs are written. As Keras, a call()
    with a `mask` argument gets the masks its inputs carry (_call_masks; unless one is
    given), the inputs carry their masks inside call (trace_call), and the outputs carry
    compute_mask(inputs, mask) when the layer defines it, else the input's mask when it
    sets supports_masking (_output_masks)."""
    in_mask, auto_mask = _call_masks(layer, inputs, args, kwargs, KerasTensor)
    named = _named_masks(layer, inputs, args, kwargs, KerasTensor)
    if auto_mask:
        kwargs = dict(kwargs, mask=in_mask)
    kwargs = dict(kwargs, **named)
    tensor_kwargs = {k: v for k, v in kwargs.items()
                     if any(isinstance(t, KerasTensor) for t in _flatten(v))}
    static = {k: v for k, v in kwargs.items() if k not in tensor_kwargs}
    template = ((inputs,) + tuple(args), tensor_kwargs)
    flat = [t for t in _flatten([inputs, list(args), list(tensor_kwargs.values())])
            if isinstance(t, KerasTensor)]
    where = user_location()
    if not layer.built:
        auto = {id(t) for t in _flatten(in_mask)} if auto_mask else set()
        auto |= {id(t) for t in _flatten(list(named.values()))}
        shapes = [t.shape for t in flat if id(t) not in auto]
        with path_scope(layer), built_on(layer, [t for t in flat if id(t) not in auto]):
            layer.build(first_argument_shapes(inputs, shapes))
        layer.built = True
    called_training, forced = step_call_training(layer, static.pop("training", None), _TRACING[0])
    try:
        with collecting_losses():  # (its add_loss terms are written with its node)
            outs, ph, single = trace_call(layer, _template_of(template), static, False,
                                          carried_mask_specs(flat), user_call=True)
        if not is_rewriting():
            _outer_losses(layer, ph[:len(flat)], flat)
    except (ValueError, TypeError) as e:
        raise type(e)(f"{e} (in {type(layer).__name__}.call, layer {layer.name!r} called at "
                      f"{where})") from None
    node = KerasTensor((), outs[0].dtype, "layer", (layer, tuple(flat), True),
                       dict(static, **forced, _template=_template_of(template)), where=where)
    node.n_outputs = len(outs)
    # (a GAN's train_step reads call_training: tape_steps.py; in_call: written_training)
    node.call_training, node.in_call = called_training, bool(_TRACING[0] or forced)
    if not layer._in_shape:
        ins = [t.shape[1:] for t in flat]
        outs_ = [o.shape[1:] for o in outs]
        layer._in_shape = ins[0] if len(ins) == 1 else ins
        layer._out_shape = outs_[0] if single else outs_
    results = [KerasTensor(o.shape, o.dtype, "item", (node, k), where=where)
               for k, o in enumerate(outs)]
    for r in results:
        # (a GAN's discriminator called on generated and real rows concatenated; swin's
        # window attention on (batch * windows, tokens, channels): the reshape back needs
        # its output's first axis to be the windows')
        follow_first_axis(r, flat[0])
    _record_first_call(layer, flat, results[0] if single else results)
    masks = _output_masks(layer, inputs, in_mask, len(results), KerasTensor)
    if all(m is None for m in masks):
        masks = _inner_output_masks(layer, flat, len(results))
    if all(m is None for m in masks) and graph_model(layer):
        masks = mask_items(node, outs)
    for r, m in zip(results, masks):
        r._keras_mask = m
    structure = layer.__dict__.get("_traced_structure")
    if structure is not None:
        return _tree.pack_sequence_as(structure, results)
    return results[0] if single else results


def _carried_masks(inputs):
    """The masks the inputs carry, in their structure (Keras's
    map_structure(get_keras_mask, inputs))."""
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(_carried_masks(v) for v in inputs)
    if isinstance(inputs, dict):
        return {k: _carried_masks(v) for k, v in inputs.items()}
    return getattr(inputs, "_keras_mask", None)


def _call_masks(layer, inputs, args, kwargs, tensor_type):
    """The mask a user's layer call sees, and whether it is passed as its
    call's `mask` argument, as Keras 3 does: the one given; else, when the
    inputs are the call's only tensor argument, the masks they carry in
    their structure (a list of inputs: a list of masks, None where an input
    has none), passed as `mask`. With several tensor arguments (the
    translation example's decoder `call(inputs, encoder_outputs, mask=None)`)
    Keras passes no `mask` (each argument's goes to its `<name>_mask`
    argument, _named_masks); the first argument's masks are then only the
    outputs' previous mask."""
    if "mask" in kwargs:
        return kwargs["mask"], False
    other = list(args) + [v for k, v in kwargs.items()]
    one_argument = not any(isinstance(t, tensor_type) for t in _flatten(other))
    if isinstance(inputs, (list, tuple, dict)):
        in_mask = _carried_masks(inputs)
    else:
        in_mask = getattr(inputs, "_keras_mask", None)
    carries = isinstance(in_mask, (list, tuple, dict)) or in_mask is not None
    auto = one_argument and carries and _accepts(layer.call, "mask") and \
        not _accepts_any(layer.call)
    return in_mask, auto


def _inner_output_masks(model, flat, n_outputs: int) -> list:
    """A functional model called as a layer: the masks its graph gives its
    outputs (the translation example's decoder model, whose PositionalEmbedding
    masks the padding), recorded again on the tensors it is called on, as
    Keras's outputs of a nested model keep them (the loss and metrics are then
    masked). Only masks computed by operations on the inputs (not by layers)."""
    outs, ins = getattr(model, "_outputs", None), getattr(model, "_inputs", None)
    if not getattr(model, "_functional", False) or not outs or not ins or \
            len(ins) != len(flat) or len(outs) != n_outputs:
        return [None] * n_outputs
    inner = [getattr(t, "_keras_mask", None) for t in outs]
    if all(m is None for m in inner):
        return [None] * n_outputs
    ids, seen, stack = {t.id for t in ins}, set(), [m for m in inner if m is not None]
    while stack:  # prims and the model's inputs only
        t = stack.pop()
        if t.id in seen or t.id in ids:
            continue
        seen.add(t.id)
        if t.op != "prim":
            return [None] * n_outputs
        stack.extend(_deps(t))
    cloned = iter(clone_graph([m for m in inner if m is not None], ins, flat))
    return [None if m is None else next(cloned) for m in inner]


def _named_masks(layer, inputs, args, kwargs, tensor_type) -> dict:
    """Keras 3's masks of a call with several tensor arguments: each
    argument `k`'s masks (in its structure) as the call's `k_mask` argument
    when the call has one and it is not given."""
    tensor_args = [a for a in [inputs] + list(args) + list(kwargs.values())
                   if any(isinstance(t, tensor_type) for t in _flatten(a))]
    if len(tensor_args) < 2:
        return {}
    try:
        sig = inspect.signature(layer.call)
        bound = sig.bind_partial(inputs, *args, **kwargs).arguments
    except (TypeError, ValueError):
        return {}
    out = {}
    for name, value in bound.items():
        key = f"{name}_mask"
        if key in sig.parameters and bound.get(key) is None and \
                any(isinstance(t, tensor_type) for t in _flatten(value)):
            out[key] = _carried_masks(value) if isinstance(value, (list, tuple, dict)) \
                else getattr(value, "_keras_mask", None)
    return {k: v for k, v in out.items() if v is not None}


def _output_masks(layer, inputs, in_mask, n_outputs: int, tensor_type) -> list:
    """One mask (or None) per output of a user's layer call: Keras's
    compute_mask(inputs, previous_mask) when the layer defines it, else the
    previous mask when it sets supports_masking; a structure of masks is
    matched to the outputs in order (one output takes the first)."""
    rule = own_compute_mask(layer)
    if rule is not None:
        out_mask = rule(inputs, in_mask)
    else:
        out_mask = in_mask if getattr(layer, "supports_masking", False) else None
    if out_mask is None:
        return [None] * n_outputs
    flat = _flatten(out_mask)
    bad = [m for m in flat if m is not None and not isinstance(m, tensor_type)]
    if bad:
        raise TypeError(f"[{layer.kind}] {type(layer).__name__}.compute_mask must return "
                        f"{'a symbolic tensor' if tensor_type is KerasTensor else 'an array'}, "
                        f"None, or a list of them (one per output), got "
                        f"{type(bad[0]).__name__}")
    return (flat + [None] * n_outputs)[:n_outputs]


def _accepts_any(fn) -> bool:
    """fn takes **kwargs (so it does not ask for a mask by name)."""
    try:
        return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False


def _template_of(template):
    """The call's structure with tensors replaced by shape-only stand-ins."""
    def strip(t):
        if isinstance(t, KerasTensor):
            stripped = KerasTensor(t.shape, t.dtype, "input")
            follow_first_axis(stripped, t)
            return stripped
        if isinstance(t, (list, tuple)):
            return type(t)(strip(v) for v in t)
        if isinstance(t, dict):
            return {k: strip(v) for k, v in t.items()}
        return t

    return strip(template)


def custom_forward(layer, exprs: list, ctx, static: dict):
    """The text of a user's layer call: call() traced with Python's training
    flag and written with its inputs bound to `exprs`."""
    template = static["_template"]
    kwargs = {k: v for k, v in static.items() if k != "_template"}
    # the masks the inputs carry: (expression, shape, dtype) per input, or None
    masks = getattr(ctx, "input_masks", None) or [None] * len(exprs)
    with collecting_losses() as added:  # Layer.add_loss in call
        outs, ph, _ = trace_call(layer, template, kwargs, ctx.is_training,
                                 [None if m is None else m[1:] for m in masks])
    losses = [v for _, v in added if isinstance(v, KerasTensor)]
    # a nested model's outputs' masks, after its outputs (nested_masks.mask_items)
    out_masks = [getattr(outs[k], "_keras_mask", None) if k < len(outs) else None
                 for k in getattr(ctx, "output_masks", None) or ()]
    if any(m is None for m in out_masks):
        raise ValueError(f"[{layer.kind}] model {layer.name!r}: an output that carried a mask "
                         f"when the model was called carries none in this call (training="
                         f"{ctx.is_training})")
    # the layer weights the call assigned, with their new values (the program keeps the
    # non-trainable ones: Model._forward_code)
    writes = list((layer.__dict__.pop("_call_writes", None) or {}).values())
    n = len(outs) + len(losses) + len(out_masks)
    written = write_traced(outs + losses + out_masks + [v for _, v in writes], ph,
                           list(exprs) + [m[0] for m in masks if m is not None], ctx)
    add_program_losses(written[len(outs):len(outs) + len(losses)] +
                       [repr(float(v)) for _, v in added if not isinstance(v, KerasTensor)])
    add_program_writes([(var, e) for (var, _), e in zip(writes, written[n:])], layer)
    return written[:len(outs)] + written[len(outs) + len(losses):n]


def apply_function(fn, exprs, shapes, ctx, dtypes=None, batch_axis=True) -> str:
    """The text of a Python function of symbolic tensors (an activation, a
    loss or a metric) applied to expressions of the given per-sample shapes
    (whole shapes with `batch_axis=False`: a weight's, for a regularizer)."""
    ph = _placeholders([((None,) if batch_axis else ()) + tuple(s) for s in shapes],
                       dtypes or ["float32"] * len(shapes))
    _TRACING[0] += 1
    try:
        with tracing():
            out = fn(*ph)
    except (ValueError, TypeError) as e:
        raise type(e)(f"{e} (in {getattr(fn, '__name__', fn)!r})") from None
    finally:
        _TRACING[0] -= 1
    if not isinstance(out, KerasTensor):
        raise TypeError(f"[{getattr(fn, '__name__', fn)}] must return a symbolic tensor computed "
                        f"from its arguments, got {type(out).__name__}")
    return write_traced([out], ph, exprs, ctx)[0]


# ---------------------------------------------------------------- discovery


def _deps(t: KerasTensor) -> list:  # a tape's gradient tensor reads its target's layers too
    return GraphWriter._inputs(t) + ([t.grad_target] if t.op == "grad" else [])


def collect_layers(outputs, exclude=None) -> list:
    """The layers (and owners of weights) a graph uses, leaves only (a user layer's sublayers
    in its stead, with it when it has weights of its own), in Keras's order (graph_layers)."""
    return graph_layers(outputs, exclude)[0]


def graph_layers(outputs, exclude=None, keys=None):
    """(leaves, top): the layers a graph uses as Keras orders a functional
    model's layers -- by depth (the most operations between the layer and
    the outputs first; a shared layer at its deepest), ties in the order a
    depth-first walk from the outputs first meets them. `top` lists the
    layers called in the graph itself (a user's layer as one); `leaves` the
    layers holding weights, each top layer's in turn (a user layer's: its
    own, then its sublayers' as Keras lists its weights). Custom layers'
    calls are traced (in both training modes) to find the layers they use."""
    order, seen_layers, seen = [], set(), set()
    top, leaves_of, outer = [], {}, []

    def add(layer):
        if layer is not exclude and id(layer) not in seen_layers:
            seen_layers.add(id(layer))
            order.append(layer)

    def walk(roots, is_outer):
        stack = [(t, False) for t in reversed(roots)]
        while stack:
            t, ready = stack.pop()
            if t.id in seen:
                continue
            if not ready:
                stack.append((t, True))
                for d in reversed(_deps(t)):
                    if d.id not in seen:
                        stack.append((d, False))
                continue
            seen.add(t.id)
            if is_outer:
                outer.append(t)
            start = len(order)
            owner = None
            if t.op == "param":
                owner = t.args[0]
                add(owner)
            elif t.op == "layer":
                owner = t.args[0]
                if traced_node(t):
                    for training in (False, True):
                        static = {k: v for k, v in t.kwargs.items() if k != "_template"}
                        with collecting_losses() as added:
                            outs, _, _ = trace_call(owner, t.kwargs["_template"], static,
                                                    training)
                        walk(outs + [v for _, v in added if isinstance(v, KerasTensor)], False)
                    if owner.params:
                        add(owner)
                    order[start:] = keras_order(owner, order[start:])
                else:
                    add(owner)
            if is_outer and owner is not None and owner is not exclude:
                if id(owner) not in leaves_of:
                    top.append(owner)
                    leaves_of[id(owner)] = []
                leaves_of[id(owner)] += order[start:]

    walk(list(outputs), True)
    # Keras's depth of each node: the operations between it and the outputs
    depth = {}
    for t in reversed(outer):  # every node after the nodes that read it
        d = depth.setdefault(t.id, 0)
        step = 0 if t.op == "item" else 1
        for dep in _deps(t):
            depth[dep.id] = max(depth.get(dep.id, 0), d + step)
    layer_depth, first = {}, {}
    for t in outer:  # (keys: an Input's place among them too, ("in", its id): Keras's)
        if t.op in ("layer", "param", "input"):
            key = ("in", t.id) if t.op == "input" else id(t.args[0])
            layer_depth[key] = max(layer_depth.get(key, 0), depth.get(t.id, 0))
    visited, stack = set(), list(reversed(list(outputs)))
    while stack:  # the walk from the outputs, meeting layers in pre-order
        t = stack.pop()
        if t.id in visited:
            continue
        visited.add(t.id)
        if t.op in ("layer", "param", "input"):
            first.setdefault(("in", t.id) if t.op == "input" else id(t.args[0]), len(first))
        stack.extend(reversed(_deps(t)))
    keys = {} if keys is None else keys
    keys.update({k: (-layer_depth.get(k, 0), n) for k, n in first.items()})
    top.sort(key=lambda l: keys.get(id(l), (0, 0)))
    leaves, placed = [], set()
    for layer in top:
        for leaf in leaves_of[id(layer)]:
            if id(leaf) not in placed:
                placed.add(id(leaf))
                leaves.append(leaf)
    return leaves, top


def clone_graph(outputs, inputs, new_inputs) -> list:
    """The graph from `inputs` to `outputs` recorded again on `new_inputs`
    (a functional model called as a layer)."""
    mapping = {i.id: n for i, n in zip(inputs, new_inputs)}

    def arg(a):
        if isinstance(a, KerasTensor):
            return mapping[a.id]
        if isinstance(a, _Index):
            return a.value
        if isinstance(a, (list, tuple)):
            return type(a)(arg(v) for v in a)
        return a

    stack = [(t, False) for t in outputs]
    while stack:
        t, ready = stack.pop()
        if t.id in mapping:
            continue
        if not ready:
            stack.append((t, True))
            for d in _deps(t):
                if d.id not in mapping:
                    stack.append((d, False))
            continue
        if t.op == "input":
            raise ValueError(f"[Model] the graph reaches an Input (made at {t.where}) that is "
                             "not among the model's inputs")
        if t.op == "param":
            mapping[t.id] = t
        elif t.op == "item":
            mapping[t.id] = output_or_mask(mapping[t.args[0].id], t.args[1])
        elif t.op == "layer":
            layer, ins, multi = t.args
            static = {k: (mapping[v.id] if isinstance(v, KerasTensor) else v)
                      for k, v in t.kwargs.items() if k != "_template"}
            if traced_node(t):
                template = t.kwargs["_template"]
                flat_new = [mapping[i.id] for i in ins]
                (pos, tkw) = _restructure(template, flat_new)
                res = layer(*pos, **tkw, **static)
                mapping[t.id] = keep_origin(t, res if isinstance(res, list) else [res])
                continue
            new_ins = [mapping[i.id] for i in ins]
            res = layer(new_ins if multi else new_ins[0], **static)
            mapping[t.id] = keep_origin(t, res)
        else:
            if t.fn == "getitem":
                x = mapping[t.args[0].id]
                mapping[t.id] = x[tuple(a.value for a in t.args[1:])]
            else:
                mapping[t.id] = _record(t.fn, arg(t.args), {k: arg(v) for k, v in
                                                            t.kwargs.items()})
    return [mapping[o.id] for o in outputs]


def _eager_call(layer, inputs, args, kwargs, builtin=None):
    """A layer called on arrays: a one-layer model's prediction (weights made
    on the first call, as Keras does). builtin: the built-in class whose
    computation a user's subclass runs (its super().call on arrays)."""
    Model = model_class()  # (the model sits above the graph: registry.py)
    if layer._is_custom() and not isinstance(layer, Model) and builtin is None:
        return _eager_custom_call(layer, inputs, args, kwargs)
    given = _flatten([inputs, list(args)])
    arrays = eager_inputs(layer.dtype, given)  # floats in the compute dtype, as Keras casts
    if not arrays:
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} called without inputs")
    sym = [stand_in_input(a.shape[1:], dtype=str(a.dtype)) for a in arrays]
    # masks, as Keras's eager calls take them: the one given as mask=, else
    # those the arrays carry (the outputs of earlier calls)
    mask_in, mask_arrays = [], []

    def mask_input(m):
        m = np.asarray(m).astype(bool)
        t = stand_in_input(m.shape[1:], dtype="bool")
        mask_in.append(t)
        mask_arrays.append(m)
        return t

    kwargs = dict(kwargs)
    if kwargs.get("mask") is not None and not isinstance(kwargs["mask"], KerasTensor):
        given_mask = kwargs["mask"]
        if isinstance(given_mask, (list, tuple)):
            kwargs["mask"] = type(given_mask)(None if m is None else mask_input(m)
                                              for m in given_mask)
        else:
            kwargs["mask"] = mask_input(given_mask)
    # arrays given by keyword (MultiHeadAttention's value=, key=, attention_mask=)
    for k, v in list(kwargs.items()):
        if k != "mask" and isinstance(v, np.ndarray):
            given.append(v)
            arrays.extend(eager_inputs(layer.dtype, [v]))
            kwargs[k] = t = stand_in_input(v.shape[1:], dtype=str(arrays[-1].dtype))
            sym.append(t)
    for s, a in zip(sym, given):
        if getattr(a, "_keras_mask", None) is not None:
            s._keras_mask = mask_input(a._keras_mask)
    it = iter(sym)

    def rebuild(v):
        if isinstance(v, dict):  # (a model of a dict of Inputs called on a dict of arrays)
            return {k: rebuild(u) for k, u in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(rebuild(u) for u in v)
        return next(it)

    given_training = kwargs.pop("training", None)  # (True: Model._forward_training)
    training = bool(eager_training(layer.call, given_training))
    sym_inputs = rebuild(inputs)
    sym_args = rebuild(list(args))
    if builtin is not None:
        out = _record_builtin(layer, sym_inputs, tuple(sym_args), kwargs, builtin)
    elif training:
        out = layer(sym_inputs, *sym_args, training=True, **kwargs)
    else:
        out = layer(sym_inputs, *sym_args, **kwargs)
    dtype = eager_dtype(layer.dtype, arrays)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    # the outputs' masks: computed by the same program (or one of the masks fed)
    masks = [getattr(o, "_keras_mask", None) for o in outs]
    extra = [m for m in masks if m is not None and not any(m is t for t in mask_in)]
    feeds = arrays + mask_arrays
    if not extra:
        model = Model(sym + mask_in, out, dtype=dtype, name=INTERNAL_MODEL_NAME)
        result = _run_eager(eager_context(model, given_training), feeds, training)
        if not any(m is not None for m in masks):
            return result
        values = list(result) if isinstance(out, (list, tuple)) else [result]
        computed = []
    else:
        model = Model(sym + mask_in, outs + extra, dtype=dtype, name=INTERNAL_MODEL_NAME)
        result = _run_eager(eager_context(model, given_training), feeds, training)
        values, computed = list(result[:len(outs)]), list(result[len(outs):])
    found = iter(computed)
    with_masks = []
    for v, m in zip(values, masks):
        if m is None:
            with_masks.append(v)
            continue
        fed = [a for t, a in zip(mask_in, mask_arrays) if t is m]
        with_masks.append(_with_mask(v, fed[0] if fed else next(found)))
    if isinstance(out, (list, tuple)):
        return type(out)(with_masks) if isinstance(out, tuple) else with_masks
    return with_masks[0]


def _run_eager(model, feeds, training):
    """An eager call's one-layer model on its feeds as one batch (Keras's too)."""
    if training:
        return model._forward_training(feeds)
    model.__dict__["_one_batch"] = True
    return model.predict(feeds if len(feeds) > 1 else feeds[0],
                         batch_size=max([1] + [len(f) for f in feeds]), verbose=0)


def _eager_custom_call(layer, inputs, args, kwargs):
    """A user's layer called on arrays runs its call() at once, as Keras runs
    it eagerly: built on the first call with the arrays' shapes, its Variables
    read (and assigned: assign_add in call updates the weight) as arrays, the
    layers it calls run on arrays in turn, add_loss recording the latest
    call's losses."""
    arrays = [a for a in _flatten([inputs, list(args)]) if a is not None]
    if not arrays:
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} called without inputs")
    shapes = [tuple(np.shape(a)) for a in arrays]
    if not layer.built:
        layer.build(shapes[0] if len(shapes) == 1 else shapes)
        layer.built = True
    kw = dict(kwargs)
    if kw.get("training") is None:
        kw.pop("training", None)
    elif not _accepts(layer.call, "training"):
        kw.pop("training")
    # Keras: call() with a `mask` argument gets the mask the first input
    # carries (unless one is given); the output carries compute_mask's
    in_mask, auto_mask = _call_masks(layer, inputs, args, kw, np.ndarray)
    named = _named_masks(layer, inputs, args, kw, np.ndarray)
    if auto_mask:
        kw["mask"] = in_mask
    kw.update(named)
    layer.__dict__["_added"] = []  # add_loss: the losses of the latest call
    out = layer.call(inputs, *args, **kw)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    masks = _output_masks(layer, inputs, in_mask, len(outs), np.ndarray)
    if any(m is not None for m in masks):
        outs = [_with_mask(o, m) for o, m in zip(outs, masks)]
        out = type(out)(outs) if isinstance(out, (list, tuple)) else outs[0]
    if layer._in_shape is None:
        layer._in_shape = shapes[0][1:] if len(shapes) == 1 else [s[1:] for s in shapes]
        outs = out if isinstance(out, (list, tuple)) else [out]
        out_shapes = [tuple(np.shape(o))[1:] for o in outs]
        layer._out_shape = out_shapes if isinstance(out, (list, tuple)) else out_shapes[0]
    return out
