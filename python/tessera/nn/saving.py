"""Saving models: tessera's weights format (named arrays, a JSON header, a
SHA-256), extended with the model's architecture, compile settings, optimizer
state and training state. Loading never executes anything from the file.

    offset  size  content
    0       8     magic b"TSRWGHT1"
    8       8     header length H, little-endian uint64
    16      H     header, UTF-8 JSON: {"format": "tessera-weights", "version": 1,
                  "tensors": [{"name", "dtype", "shape", "offset", "nbytes"}, ...],
                  and for model.save / save_checkpoint: "model" (architecture),
                  "compile", "training"}
    16+H    D     the arrays' bytes, little-endian, C order, at their offsets
    16+H+D  32    SHA-256 of everything before it

Weights are named by their variables (l<layer>_<name>); optimizer state
tensors start with "optimizer/".
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import struct
import tempfile

import numpy as np

MAGIC = b"TSRWGHT1"
DTYPES = {"float32": "<f4", "float64": "<f8", "int64": "<i8", "int32": "<i4", "bool": "|b1"}
_MAX_RANK = 32

__all__ = ["save_file", "read_file", "load_model", "register_keras_serializable"]


_TMP_PREFIX = ".tessera-weights-"


def _host() -> str:
    import socket  # noqa: PLC0415

    return socket.gethostname().replace("-", "_")


def _sweep_temporaries(folder: str):
    """Removes the temporaries of writes killed part way (SIGKILL leaves no
    chance to clean up): files named by this host and a process that no
    longer exists. Other hosts' files (a shared file system) are left alone."""
    prefix = f"{_TMP_PREFIX}{_host()}-"
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # alive, another user's
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def save_file(path, tensors: dict, meta: dict, where: str):
    """Writes `tensors` (name -> array) and `meta` atomically: a temporary in
    the same folder renamed into place, so a failed or killed write leaves
    the old file (or none), never a partial one."""
    entries, chunks, offset = [], [], 0
    for name, a in tensors.items():
        a = np.asarray(a)
        dt = str(a.dtype)
        if dt not in DTYPES:
            raise TypeError(f"[{where}] {name}: dtype {dt} is not supported")
        raw = np.ascontiguousarray(a).astype(DTYPES[dt], copy=False).tobytes()
        entries.append({"name": name, "dtype": dt, "shape": list(a.shape), "offset": offset,
                        "nbytes": len(raw)})
        chunks.append(raw)
        offset += len(raw)
    header = dict(meta, format="tessera-weights", version=1, tensors=entries)
    try:
        text = json.dumps(header, allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise TypeError(f"[{where}] the model's configuration cannot be saved: {e}") from None
    body = MAGIC + struct.pack("<Q", len(text)) + text + b"".join(chunks)
    digest = hashlib.sha256(body).digest()
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    _sweep_temporaries(folder)
    write_atomic(path, [body, digest])


def write_atomic(path, chunks, prefix=_TMP_PREFIX, hook=None, durable=True):
    """Writes the byte chunks to a new temporary beside `path` (named
    prefix + host + pid, so a sweep can tell a dead writer's), fsyncs it
    (unless not durable) and renames it into place; the temporary is removed
    on any failure. `hook` is called after the first chunk (tests stop a
    writer half way there)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{_host()}-{os.getpid()}-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for k, chunk in enumerate(chunks):
                f.write(chunk)
                if k == 0 and hook is not None:
                    hook()
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_file(path, where: str):
    """(tensors, header) of a file written by save_file; ValueError naming
    what is wrong for anything that is not such a file."""
    path = os.fspath(path)

    def bad(what):
        return ValueError(f"[{where}] {path}: {what}; nothing was loaded")

    if not os.path.isfile(path):
        if os.path.exists(path):
            raise bad("not a regular file")
        raise FileNotFoundError(f"[{where}] {path}: no such file")
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < len(MAGIC) + 8 + 32 or blob[:8] != MAGIC:
        raise bad("not a tessera weights file (bad magic or too short)")
    body, digest = blob[:-32], blob[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise bad("checksum mismatch: the file is corrupted or truncated")
    (hlen,) = struct.unpack("<Q", body[8:16])
    if 16 + hlen > len(body):
        raise bad("header length exceeds the file")
    try:
        header = json.loads(body[16:16 + hlen].decode("utf-8"))
    except (ValueError, RecursionError) as e:  # also JSON integers past Python's digit limit
        raise bad(f"unreadable header ({type(e).__name__})") from None
    if not isinstance(header, dict) or header.get("format") != "tessera-weights" or \
            header.get("version") != 1:
        raise bad("unsupported format or version")
    data = body[16 + hlen:]
    out = {}
    entries = header.get("tensors", [])
    if not isinstance(entries, list):
        raise bad("the tensor table is not a list")
    for t in entries:
        if not isinstance(t, dict):
            raise bad("a tensor entry is not an object")
        name, dt, shape = t.get("name"), t.get("dtype"), t.get("shape", [])
        if not isinstance(name, str) or not isinstance(dt, str) or dt not in DTYPES or \
                not isinstance(shape, list) or \
                len(shape) > _MAX_RANK or not all(isinstance(d, int) and not isinstance(d, bool)
                                                  and 0 <= d < 2 ** 40 for d in shape):
            raise bad(f"tensor entry {str(name)[:64]!r} is malformed")
        count = math.prod(shape)  # Python ints: no overflow
        nbytes = count * np.dtype(DTYPES[dt]).itemsize
        start = t.get("offset")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0 or \
                nbytes != t.get("nbytes") or start + nbytes > len(data):
            raise bad(f"tensor {name!r} lies outside the data section")
        out[name] = np.frombuffer(data, dtype=DTYPES[dt], count=count,
                                  offset=start).reshape(shape).astype(dt)
    return out, header


def load_weights_into(model, path, where="load_weights"):
    """Sets the model's weights from a file; every name, shape and dtype must
    match, or nothing is loaded (the first mismatch is named)."""
    tensors, _ = read_file(path, where)
    set_weights_from(model, tensors, os.fspath(path), where)
    return tensors


def set_weights_from(model, tensors: dict, source: str, where: str):
    """Sets the model's weights from the non-optimizer entries of `tensors`
    (read from `source`), or nothing when a name, shape or dtype differs."""
    weights = {k: v for k, v in tensors.items() if not k.startswith("optimizer/")}
    expected = model.weights
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        raise ValueError(f"[{where}] {source}: the weights do not match the model: "
                         f"missing {missing}, unexpected {extra}; nothing was loaded")
    for name, a in expected.items():
        w = weights[name]
        if w.shape != a.shape or w.dtype != a.dtype:
            layer, p = model._owner[name]
            raise ValueError(f"[{where}] {source}: {name} ({layer.name}/{p.name}) has "
                             f"shape {w.shape} and dtype {w.dtype}, the model expects {a.shape} "
                             f"and {a.dtype}; nothing was loaded")
    for name, w in weights.items():
        model._set(name, w)


# ------------------------------------------------------------------ configs

_CUSTOM: dict = {}


def register_keras_serializable(package="Custom", name=None):
    """Decorator registering a user's Layer or Model class, so load_model can
    rebuild it (as keras.saving.register_keras_serializable)."""
    def wrap(cls):
        _CUSTOM[name or cls.__name__] = cls
        return cls

    return wrap


def _encode(v, where):
    """A constructor argument as JSON."""
    from . import layers as _layers  # noqa: PLC0415

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
    if isinstance(v, _layers.Layer):
        return {"__layer__": _layer_config(v, where)}
    if hasattr(v, "get_config") and callable(v.get_config):
        return {"__object__": type(v).__name__, "module": type(v).__module__,
                "config": _encode(v.get_config(), where)}
    raise TypeError(f"[{where}] cannot save the argument {v!r} (of type {type(v).__name__}); "
                    "use names for activations and initializers, or objects with get_config")


def _object_class(name, module, custom):
    import importlib  # noqa: PLC0415

    if name in custom:
        return custom[name]
    if name in _CUSTOM:
        return _CUSTOM[name]
    if isinstance(module, str) and module.startswith("tessera."):
        mod = importlib.import_module(module)
        cls = getattr(mod, name, None)
        if cls is not None:
            return cls
    raise ValueError(f"[load_model] the file names the class {name!r}, which is not a tessera "
                     "class: pass it in custom_objects={...} or register it with "
                     "tessera.nn.saving.register_keras_serializable()")


def _decode(v, custom):
    if isinstance(v, list):
        return [_decode(u, custom) for u in v]
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(_decode(u, custom) for u in v["__tuple__"])
        if "__dict__" in v:
            return {k: _decode(u, custom) for k, u in v["__dict__"].items()}
        if "__layer__" in v:
            return _layer_from(v["__layer__"], custom)
        if "__object__" in v:
            cls = _object_class(v["__object__"], v.get("module"), custom)
            config = _decode(v.get("config", {}), custom)
            if hasattr(cls, "from_config"):
                return cls.from_config(config)
            return cls(**{k: u for k, u in config.items() if k not in ("name", "class")})
        raise ValueError("[load_model] malformed configuration")
    return v


def _layer_config(layer, where):
    from .model import Model, Sequential  # noqa: PLC0415

    if isinstance(layer, Sequential):
        return {"class": "Sequential", "arch": _architecture(layer, where)}
    if isinstance(layer, Model) and layer._functional:
        return {"class": "Functional", "arch": _architecture(layer, where)}
    config = layer.get_config()
    return {"class": type(layer).__name__, "module": type(layer).__module__,
            "config": _encode(config, where)}


def _layer_from(cfg, custom):
    if not isinstance(cfg, dict) or "class" not in cfg:
        raise ValueError("[load_model] malformed layer configuration")
    if cfg["class"] in ("Sequential", "Functional"):
        return _model_from(cfg["arch"], custom)
    cls = _object_class(cfg["class"], cfg.get("module"), custom)
    config = _decode(cfg.get("config", {}), custom)
    if not isinstance(config, dict):
        raise ValueError("[load_model] malformed layer configuration")
    try:
        return cls(**config)
    except TypeError as e:
        raise ValueError(f"[load_model] cannot rebuild {cfg['class']}: {e}") from None


def _architecture(model, where="save") -> dict:
    """The model's structure as JSON: its layers' configurations and the
    graph of calls and operations connecting them."""
    from .functional import _deps  # noqa: PLC0415
    from .model import Sequential  # noqa: PLC0415
    from .symbolic import KerasTensor, _Index  # noqa: PLC0415

    base = {"name": model.name, "seed": model.seed, "dtype": model.dtype}
    if isinstance(model, Sequential):
        layers = model._stack
        return dict(base, kind="Sequential", input_shape=list(model._inputs[0].shape[1:]) if
                    model._inputs else None,
                    layers=[_layer_config(l, where) for l in layers])
    if not model._functional:
        return dict(base, kind="Subclassed", **{
            "class": type(model).__name__, "module": type(model).__module__,
            "config": _encode(model.get_config(), where),
            "input_shapes": [list(t.shape[1:]) for t in model._inputs],
            "input_dtypes": [t.dtype for t in model._inputs]})
    order, ids = [], {}
    stack = [(t, False) for t in reversed(model._outputs)]
    for t in model._inputs:
        ids[t.id] = len(order)
        order.append(t)
    while stack:
        t, ready = stack.pop()
        if t.id in ids:
            continue
        if not ready:
            stack.append((t, True))
            for d in reversed(_deps(t)):
                if d.id not in ids:
                    stack.append((d, False))
            continue
        ids[t.id] = len(order)
        order.append(t)
    layer_index, layers = {}, []

    def layer_ref(layer):
        if id(layer) not in layer_index:
            layer_index[id(layer)] = len(layers)
            layers.append(_layer_config(layer, where))
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
        elif t.op == "param":
            nodes.append({"op": "param", "layer": layer_ref(t.args[0]), "param": t.args[1]})
        elif t.op == "item":
            nodes.append({"op": "item", "node": ids[t.args[0].id], "index": t.args[1]})
        elif t.op == "layer":
            layer, ins, multi = t.args
            static = {k: v for k, v in t.kwargs.items() if k != "_template"}
            nodes.append({"op": "layer", "layer": layer_ref(layer),
                          "inputs": [ids[i.id] for i in ins], "multi": bool(multi),
                          "custom": layer._is_custom(), "kwargs": _encode(static, where)})
        else:
            nodes.append({"op": "prim", "fn": t.fn, "args": [enc(a) for a in t.args],
                          "kwargs": {k: enc(v) for k, v in t.kwargs.items()}})
    return dict(base, kind="Functional", layers=layers, nodes=nodes,
                inputs=[ids[t.id] for t in model._inputs],
                outputs=[ids[t.id] for t in model._outputs],
                multi_in=model._multi_in, multi_out=model._multi_out)


def _model_from(arch, custom):
    from .model import Model, Sequential  # noqa: PLC0415
    from .symbolic import Input, _record  # noqa: PLC0415

    if not isinstance(arch, dict) or arch.get("kind") not in ("Sequential", "Functional",
                                                             "Subclassed"):
        raise ValueError("[load_model] the file has no model architecture (written by "
                         "save_weights?): build the model in code and use load_weights")
    kind = arch["kind"]
    common = {"name": arch.get("name"), "seed": int(arch.get("seed", 0)),
              "dtype": arch.get("dtype", "float32")}
    if kind == "Sequential":
        layers = [_layer_from(c, custom) for c in arch["layers"]]
        shape = arch.get("input_shape")
        return Sequential(layers, input_shape=tuple(shape) if shape is not None else None,
                          **common)
    if kind == "Subclassed":
        cls = _object_class(arch["class"], arch.get("module"), custom)
        config = _decode(arch.get("config", {}), custom)
        config = {k: v for k, v in config.items() if k not in ("name",)}
        try:
            model = cls(**config)
        except TypeError as e:
            raise ValueError(f"[load_model] cannot rebuild {arch['class']}: {e} (give the "
                             "class a get_config returning its constructor's arguments)") \
                from None
        shapes = [tuple(s) for s in arch["input_shapes"]]
        model.build(shapes if len(shapes) > 1 else shapes[0])
        return model
    layers = [_layer_from(c, custom) for c in arch["layers"]]
    made = []

    def dec(a):
        if isinstance(a, dict):
            if "t" in a:
                return made[a["t"]]
            if "slice" in a:
                return slice(*a["slice"])
            if "ellipsis" in a:
                return Ellipsis
            if "index" in a:
                return dec(a["index"])
            if "list" in a:
                items = [dec(u) for u in a["list"]]
                return tuple(items) if a.get("tuple") else items
            if "array" in a:
                return np.asarray(a["array"], dtype=a["dtype"])
            return _decode(a, custom)
        return _decode(a, custom)

    for node in arch["nodes"]:
        op = node.get("op")
        if op == "input":
            made.append(Input(tuple(node["shape"]), dtype=node["dtype"], name=node.get("name")))
        elif op == "param":
            layer = layers[node["layer"]]
            made.append(layer._symbols[node["param"]])
        elif op == "item":
            made.append(made[node["node"]][node["index"]])
        elif op == "layer":
            layer = layers[node["layer"]]
            ins = [made[i] for i in node["inputs"]]
            static = _decode(node.get("kwargs", {}), custom)
            if node.get("custom"):
                res = layer(*ins, **static)
                made.append(res if isinstance(res, list) else [res])
            else:
                made.append(layer(ins if node["multi"] else ins[0], **static))
        elif op == "prim":
            args = [dec(a) for a in node["args"]]
            kwargs = {k: dec(v) for k, v in node["kwargs"].items()}
            if node["fn"] == "getitem":
                made.append(args[0][tuple(args[1:])])
            else:
                made.append(_record(node["fn"], args, kwargs))
        else:
            raise ValueError(f"[load_model] unknown node kind {op!r}")
    inputs = [made[i] for i in arch["inputs"]]
    outputs = [made[i] for i in arch["outputs"]]
    return Model(inputs if arch.get("multi_in") else inputs[0],
                 outputs if arch.get("multi_out") else outputs[0], **common)


def _compile_config(model, where) -> dict:
    c = model._compiled
    if c is None:
        return {}
    from .programs import _FunctionMetric  # noqa: PLC0415

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

    return {"optimizer": _encode(c.optimizer.get_config(), where),
            "losses": [loss_cfg(l) for l in c.losses], "loss_weights": c.loss_weights,
            "metrics": [[metric_cfg(m) for m in ms] for ms in c.metrics]}


def save_model(model, path, training_state=None):
    """model.save / save_checkpoint."""
    where = "save_checkpoint" if training_state is not None else "save"
    model._check_built(where)
    tensors = dict(model.weights)
    meta = {"model": _architecture(model, where), "compile": _compile_config(model, where)}
    if model._opt_state is not None:
        for k, v in model._opt_state.items():
            tensors[f"optimizer/{k}"] = v
    if training_state is not None:
        meta["training"] = training_state
    meta["iteration"] = model._iteration
    save_file(path, tensors, meta, where)


def _optimizer_from(cfg, custom):
    from .. import optim  # noqa: PLC0415

    cfg = _decode(cfg, custom)
    from_config = getattr(optim, "from_config", None)
    if from_config is not None:
        return from_config(cfg)
    cls = getattr(optim, cfg.get("class", ""), None)
    if cls is None:
        raise ValueError(f"[load_model] unknown optimizer {cfg.get('class')!r}")
    args = {k: v for k, v in cfg.items() if k != "class"}
    if isinstance(args.get("learning_rate"), dict):
        raise ValueError("[load_model] this optimizer's schedule cannot be rebuilt")
    return cls(**args)


def _compile_from(model, cfg, custom):
    from . import losses as _losses, metrics as _metrics  # noqa: PLC0415

    if not cfg:
        return
    losses = []
    for l in cfg["losses"]:
        if l is None:
            losses.append(None)
        elif "function" in l:
            fn = custom.get(l["function"]) or _CUSTOM.get(l["function"])
            if fn is None:
                raise ValueError(f"[load_model] the model was compiled with the loss function "
                                 f"{l['function']!r}: pass it in custom_objects")
            losses.append(fn)
        else:
            config = _decode(l["config"], custom)
            cls = getattr(_losses, l["class"])
            losses.append(cls(**{k: v for k, v in config.items() if k != "name"}))
    metrics = []
    for ms in cfg["metrics"]:
        out = []
        for m in ms:
            if "function" in m:
                fn = custom.get(m["function"]) or _CUSTOM.get(m["function"])
                if fn is None:
                    raise ValueError(f"[load_model] the model was compiled with the metric "
                                     f"function {m['function']!r}: pass it in custom_objects")
                out.append(fn)
            else:
                cls = getattr(_metrics, m["class"], None)
                config = _decode(m.get("config", {}), custom)
                if cls is not None and hasattr(cls, "from_config"):
                    out.append(cls.from_config(config))
                else:
                    out.append(_metrics.get(m["name"]))
        metrics.append(out)
    opt = _optimizer_from(cfg["optimizer"], custom)
    n = len(losses)
    model.compile(opt, losses if n > 1 else losses[0],
                  metrics=metrics if n > 1 else metrics[0],
                  loss_weights=cfg.get("loss_weights"))


def load_model(path, custom_objects=None, compile: bool = True):  # noqa: A002
    """A model saved by model.save (or save_checkpoint): architecture,
    weights, and (compile=True) the compile settings and optimizer state."""
    from .layers import WEIGHTS_IN_FILE  # noqa: PLC0415

    custom = dict(custom_objects or {})
    tensors, header = read_file(path, "load_model")
    total = sum(a.size for name, a in tensors.items() if not name.startswith("optimizer/"))
    budget = WEIGHTS_IN_FILE.set({"left": total, "total": total, "path": os.fspath(path)})
    try:
        model = _model_from(header.get("model"), custom)
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
    load_weights_into(model, path, "load_model")
    if compile and header.get("compile"):
        try:
            _compile_from(model, header["compile"], custom)
            _restore_optimizer(model, tensors, header)
        except _MALFORMED + (ValueError,) as e:
            if isinstance(e, ValueError) and str(e).startswith("["):
                raise
            raise ValueError(f"[load_model] {os.fspath(path)}: the compile settings are malformed "
                             f"({type(e).__name__}: {str(e)[:200]})") from None
    return model


# What a crafted configuration makes the constructors it names raise.
_MALFORMED = (KeyError, IndexError, AttributeError, TypeError, OverflowError, RecursionError,
              ImportError)


def _restore_optimizer(model, tensors, header):
    state = {k[len("optimizer/"):]: v for k, v in tensors.items() if k.startswith("optimizer/")}
    if not state:
        return
    P, S = model._params(True), model._params(False)
    model._update_setup(P, S)
    want = {s.name for s in model._opt_statevars}
    if set(state) != want:
        raise ValueError(f"[load_model] the optimizer state in the file ({sorted(state)[:4]}...) "
                         f"does not match the optimizer's ({sorted(want)[:4]}...)")
    model._opt_state = {k: np.array(v) for k, v in state.items()}
    model._iteration = int(header.get("iteration", 0))


def load_training_state(model, path) -> dict:
    """fit(resume_from=path): weights, optimizer state and training position
    from a checkpoint; the model must be the same architecture."""
    tensors, header = read_file(path, "resume_from")
    training = header.get("training")
    if not isinstance(training, dict):
        raise ValueError(f"[resume_from] {os.fspath(path)} holds no training state (written by "
                         "model.save or save_weights?): write it with save_checkpoint or "
                         "ModelCheckpoint(save_training_state=True)")
    return apply_training_state(model, tensors, header, os.fspath(path), "resume_from")


def apply_training_state(model, tensors: dict, header: dict, source: str, where: str) -> dict:
    """Puts the weights, optimizer state and training position of a
    checkpoint (tensors, and a header with "training" and "iteration") into
    the model: all of it, or nothing."""
    training = header.get("training")

    def whole(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    lr = training.get("lr_override") if isinstance(training, dict) else None
    acc = training.get("acc") if isinstance(training, dict) else None
    if not isinstance(training, dict) or not all(
            whole(training.get(k)) for k in ("iteration", "epoch", "batch")) or not (
            lr is None or (isinstance(lr, (int, float)) and not isinstance(lr, bool))) or not (
            acc is None or (isinstance(acc, dict) and {"loss", "seen", "totals"} <= set(acc))):
        raise ValueError(f"[{where}] {source}: the training state is malformed "
                         f"(iteration, epoch, batch, lr_override, acc); nothing was loaded")
    # all or nothing: the model is put back as it was if any part fails
    before = (dict(model.weights), model._opt_state, model._iteration, model._lr_override)
    try:
        set_weights_from(model, tensors, source, where)
        _restore_optimizer(model, tensors, header)
    except BaseException as e:
        for name, value in before[0].items():
            model._set(name, value)
        model._opt_state, model._iteration, model._lr_override = before[1:]
        if isinstance(e, ValueError) and str(e).startswith("["):
            raise
        if isinstance(e, _MALFORMED + (ValueError,)):
            raise ValueError(f"[{where}] {source}: the training state is malformed "
                             f"({type(e).__name__}: {str(e)[:200]}); nothing was loaded") from None
        raise
    model._iteration = training["iteration"]
    model._lr_override = None if lr is None else float(lr)
    return training
