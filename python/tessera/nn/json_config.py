"""model.to_json() in Keras's shape: {"module", "class_name", "config": {"name",
"trainable", "dtype", "layers": [each layer's {"module", "class_name", "config":
get_config(), "registered_name", "build_config"}]}, "registered_name",
"build_config"}, so that scripts reading json.loads(model.to_json())["config"]
["layers"] find what Keras writes. The document also holds tessera's own
architecture (the graph of calls, under "tessera"), which model_from_json reads:
a to_json text of an earlier tessera (its "config" that architecture) loads too."""

from __future__ import annotations

import json
import numbers

import numpy as np

from .dtype_policies import policy_of
from .graph_order import tensor_order
from .dtype_policies import serialize as serialize_policy
from .layers import Layer
from .registry import model_class
from .saving import _architecture, model_from_config

__all__ = ["model_to_json", "model_from_json", "keras_layer_entry"]


def _plain(v):
    """A get_config value as JSON (Keras's serialized forms for objects)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_plain(u) for u in (v.tolist() if isinstance(v, np.ndarray) else v)]
    if isinstance(v, dict):
        return {str(k): _plain(u) for k, u in v.items()}
    if isinstance(v, Layer):
        return keras_layer_entry(v)
    if callable(getattr(v, "get_config", None)):
        return {"module": type(v).__module__, "class_name": type(v).__name__,
                "config": _plain(v.get_config()), "registered_name": None}
    if callable(v):
        return {"module": getattr(v, "__module__", None), "class_name": "function",
                "config": getattr(v, "__name__", repr(v)), "registered_name": None}
    return repr(v)


def _batch_shape(shape):
    if shape is None:
        return None
    if isinstance(shape, list):
        return [_batch_shape(s) for s in shape]
    return [None] + [None if d is None else int(d) for d in shape]


def keras_layer_entry(layer) -> dict:
    """A layer as Keras's model JSON lists it."""
    Model = model_class("Model")
    if isinstance(layer, Model):
        return _model_document(layer)
    entry = {"module": type(layer).__module__, "class_name": type(layer).__name__,
             "config": _plain(layer.get_config()), "registered_name": None}
    if getattr(layer, "_in_shape", None) is not None:
        entry["build_config"] = {"input_shape": _batch_shape(layer._in_shape)}
    return entry


def _history_of(t, history) -> dict:
    return {"class_name": "__keras_tensor__", "config": {
        "shape": _batch_shape(tuple(t.shape[1:])), "dtype": str(t.dtype),
        "keras_history": list(history)}}


def _operation_args(node, refs):
    """A primitive's saved arguments as Keras's inbound node lists them."""
    def arg(a):
        if isinstance(a, dict) and "t" in a:
            return refs(a["t"])
        if isinstance(a, dict) and "slice" in a:
            start, stop, step = a["slice"]
            return {"class_name": "__slice__", "config": {"start": start, "stop": stop,
                                                          "step": step}}
        if isinstance(a, dict) and "list" in a:
            return [arg(u) for u in a["list"]]
        return _plain(a)
    return [arg(a) for a in node.get("args", [])]


def _functional_config(model, arch, entries) -> dict:
    """Keras's functional config: the Input layers, then each layer (and each
    operation) named, with its inbound_nodes (one per call: the tensors it
    read, each by its keras_history [layer, call, output]); input_layers and
    output_layers name the model's tensors so."""
    order, _ = tensor_order(model)
    history, calls, listed, names = {}, {}, [], {}

    def refs(i):
        return _history_of(order[i], history[i])

    for i, node in enumerate(arch["nodes"]):
        if node["op"] == "input":
            history[i] = (node["name"], 0, 0)
            listed.append({"module": "tessera.nn.layers", "class_name": "InputLayer", "config": {
                "batch_shape": _batch_shape(tuple(node["shape"])), "dtype": node["dtype"],
                "sparse": False, "ragged": False, "name": node["name"], "optional": False},
                "registered_name": None, "name": node["name"], "inbound_nodes": []})
        elif node["op"] == "layer":
            k, entry = node["layer"], entries[node["layer"]]
            calls[k] = calls.get(k, 0) + 1
            if calls[k] == 1:
                listed.append(entry)
            args = [refs(j) for j in node["inputs"]]
            entry.setdefault("inbound_nodes", []).append(
                {"args": [args] if node["multi"] else args, "kwargs": {}})
            history[i] = (entry["config"]["name"], calls[k] - 1, 0)
        elif node["op"] == "item":
            name, call, _ = history[node["node"]]
            history[i] = (name, call, node["index"])
        elif node["op"] == "param":
            history[i] = (entries[node["layer"]]["config"]["name"], 0, 0)
        else:  # an operation (Keras's entries of keras.ops: "multiply", "add_1", ...)
            fn = "get_item" if node["fn"] == "getitem" else str(node["fn"])
            n = names[fn] = names.get(fn, -1) + 1
            name = fn if n == 0 else f"{fn}_{n}"
            args = _operation_args(node, refs)
            if fn == "get_item" and len(args) > 2:  # Keras's: x[i, j] has the index (i, j)
                args = [args[0], args[1:]]
            listed.append({"module": "tessera.nn.ops", "class_name": fn.title().replace(
                "_", ""), "config": {"name": name}, "registered_name": None, "name": name,
                "inbound_nodes": [{"args": args, "kwargs": {}}]})
            history[i] = (name, 0, 0)
    for entry in entries:
        entry["name"] = entry["config"]["name"] if isinstance(entry["config"], dict) else None
        if "inbound_nodes" not in entry:  # (a layer whose weights only the graph reads)
            entry["inbound_nodes"] = []
            listed.append(entry)

    def tensors(indices, keys, multi):
        found = [list(history[i]) for i in indices]
        if keys:
            return dict(zip(keys, found))
        return found if multi else found[0]
    return {"layers": listed,
            "input_layers": tensors(arch["inputs"], arch.get("input_keys"), arch["multi_in"]),
            "output_layers": tensors(arch["outputs"], arch.get("output_keys"),
                                     arch["multi_out"])}


def _model_document(model, objects=None, arch=None) -> dict:
    Sequential = model_class("Sequential")
    if objects is None:
        objects = []
        arch = _architecture(model, "to_json", objects)
    layers = [keras_layer_entry(l) for l in objects]
    inputs = getattr(model, "_inputs", None) or []
    if isinstance(model, Sequential) and inputs:
        t = inputs[0]
        layers.insert(0, {"module": "tessera.nn.layers", "class_name": "InputLayer", "config": {
            "batch_shape": _batch_shape(tuple(t.shape[1:])), "dtype": str(t.dtype),
            "sparse": False, "ragged": False, "name": getattr(t, "name", None) or "input_layer",
            "optional": False}, "registered_name": None})
    kind = "Sequential" if isinstance(model, Sequential) else \
        "Functional" if model._functional else type(model).__name__
    config = {"name": model.name, "trainable": bool(getattr(model, "trainable", True)),
              "dtype": serialize_policy(policy_of(model.dtype)), "layers": layers}
    if kind == "Functional" and arch is not None and "nodes" in arch:
        config.update(_functional_config(model, arch, layers))
    shapes = [_batch_shape(tuple(t.shape[1:])) for t in inputs]
    return {"module": type(model).__module__, "class_name": kind, "config": config,
            "registered_name": None,
            "build_config": {"input_shape": shapes[0] if len(shapes) == 1 else shapes or None}}


def model_to_json(model, **kwargs) -> str:
    """model.to_json(): Keras's document of the model (json.dumps's keyword
    arguments, such as indent, pass on), with tessera's architecture."""
    model._check_built("to_json")
    objects = []
    arch = _architecture(model, "to_json", objects)
    doc = _model_document(model, objects, arch)
    doc.update(tessera=arch, format="tessera.nn")
    return json.dumps(doc, **kwargs)


MAX_JSON_CHARS = 1 << 26


def model_from_json(json_string, custom_objects=None):
    """The model (fresh weights) a to_json text describes (keras.models.model_from_json)."""
    if not isinstance(json_string, (str, bytes)):
        raise TypeError(f"[model_from_json] expected JSON text, got {type(json_string).__name__}")
    if len(json_string) > MAX_JSON_CHARS:
        raise ValueError(f"[model_from_json] the text has {len(json_string)} characters, past "
                         f"the {MAX_JSON_CHARS} a model description may have")
    try:
        doc = json.loads(json_string)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"[model_from_json] the text is not JSON ({str(e)[:200]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ValueError("[model_from_json] the JSON has no model \"config\" (not written by "
                         "model.to_json?)")
    # (to_json's Keras document holds tessera's architecture; an earlier tessera's, as config)
    return model_from_config(doc.get("tessera", doc["config"]), custom_objects, "model_from_json")
