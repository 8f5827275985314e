"""Keras's saving hooks in tessera's model files: a layer's
save_own_variables / load_own_variables (a store of named arrays),
save_assets / load_assets (a folder of files). model.save calls a hook only on a
layer whose class overrides it; load_model calls them in Keras's order:
build_from_config (saving.py, as each layer is made), compile_from_config
(model/compile.py), load_own_variables, load_assets.

In the file, a layer's store is the tensors "hooks/<k>/vars/<key>" and its
assets the tensors "hooks/<k>/assets/<relative path>" (bytes, uint8), k the
layer's index in model.layers. Reading stays untrusted: keys and paths are
checked (no absolute path, "..", empty or hidden-link component), files are
written only into a fresh private folder (never following a link, never
replacing a file), and their sizes are those of arrays already read and
checked against the file's length."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

import numpy as np

from .layers import Layer

__all__ = ["save_hooks", "load_own_variables", "load_assets", "HOOK_PREFIX"]

HOOK_PREFIX = "hooks/"
MAX_ASSET_FILES = 10_000  # files of one layer's assets
MAX_ASSET_DEPTH = 16  # folders of an asset's path
_STORE_DTYPES = ("float32", "float64", "int64", "int32", "bool", "uint8")


def _overrides(obj, name: str, base) -> bool:
    return getattr(type(obj), name, None) is not getattr(base, name, None)


def hook_layers(model) -> list:
    """The layers whose hooks model.save and load_model call: model.layers
    (indices 0..n-1, as files before nested layers had them), then, as
    Keras walks every layer a model holds, the layers nested in them (a
    user's layer's attributes, a nested model's layers), breadth first,
    each once."""
    top = list(getattr(model, "layers", None) or [])
    out, seen, queue = list(top), {id(model)} | {id(x) for x in top}, list(top)
    while queue:
        layer = queue.pop(0)
        if not isinstance(layer, Layer):
            continue
        inner = layer._sublayers() if layer._is_custom() else []
        if not inner and layer is not model and isinstance(getattr(layer, "layers", None),
                                                            list):
            inner = list(layer.layers)  # a nested model's
        for sub in inner:
            if id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
                queue.append(sub)
    return out


def _check_key(key, layer, where: str) -> str:
    if not isinstance(key, str) or not key or "\x00" in key or len(key) > 200:
        raise TypeError(f"[{where}] {type(layer).__name__}.save_own_variables of layer "
                        f"{layer.name!r} put the key {key!r} in its store; keys must be "
                        "non-empty strings (at most 200 characters)")
    return key


def _store_array(value, key: str, layer, where: str) -> np.ndarray:
    a = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    if str(a.dtype) not in _STORE_DTYPES:
        raise TypeError(f"[{where}] {type(layer).__name__}.save_own_variables of layer "
                        f"{layer.name!r}: store[{key!r}] has dtype {a.dtype}; a model file holds "
                        f"arrays of {list(_STORE_DTYPES)}")
    return np.array(a, copy=True)


def save_hooks(model, where: str) -> dict:
    """The tensors of the layers' stores and assets (for the hooks their
    classes override), named as the module's docstring says."""
    tensors = {}
    for k, layer in enumerate(hook_layers(model)):
        if not isinstance(layer, Layer):
            continue
        if _overrides(layer, "save_own_variables", Layer) or \
                _overrides(layer, "load_own_variables", Layer):
            store: dict = {}
            layer.save_own_variables(store)
            if not isinstance(store, dict):
                raise TypeError(f"[{where}] the store of layer {layer.name!r} was replaced by "
                                f"a {type(store).__name__}")
            for key, value in store.items():
                _check_key(key, layer, where)
                tensors[f"{HOOK_PREFIX}{k}/vars/{key}"] = _store_array(value, key, layer, where)
        if _overrides(layer, "save_assets", Layer):
            for rel, data in _saved_assets(layer, where):
                tensors[f"{HOOK_PREFIX}{k}/assets/{rel}"] = np.frombuffer(data, dtype=np.uint8)
    return tensors


def _saved_assets(layer, where: str) -> list:
    """(relative path, bytes) of the files layer.save_assets writes into a
    fresh folder (links and other non-regular files are refused)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="tessera-assets-") as folder:
        layer.save_assets(folder)
        for root, dirs, files in os.walk(folder, followlinks=False):
            for name in sorted(dirs) + sorted(files):
                full = os.path.join(root, name)
                rel = os.path.relpath(full, folder).replace(os.sep, "/")
                mode = os.lstat(full).st_mode
                if stat.S_ISDIR(mode):
                    continue
                if not stat.S_ISREG(mode):
                    raise ValueError(f"[{where}] {type(layer).__name__}.save_assets of layer "
                                     f"{layer.name!r} made {rel!r}, which is not a regular file "
                                     "(a link or a device); a model file keeps only files")
                with open(full, "rb") as f:
                    out.append((rel, f.read()))
    if len(out) > MAX_ASSET_FILES:
        raise ValueError(f"[{where}] layer {layer.name!r} saved {len(out)} asset files, past "
                         f"the {MAX_ASSET_FILES} a model file may hold for one layer")
    return out


def _entries(tensors: dict, k: int, part: str) -> dict:
    prefix = f"{HOOK_PREFIX}{k}/{part}/"
    return {name[len(prefix):]: a for name, a in tensors.items() if name.startswith(prefix)}


def _check_layers(tensors: dict, model, error):
    """Every hook entry of the file names a layer of the model (by index)."""
    count = len(hook_layers(model))
    for name in tensors:
        if not name.startswith(HOOK_PREFIX):
            continue
        head, _, rest = name[len(HOOK_PREFIX):].partition("/")
        part = rest.partition("/")[0]
        if not head.isdigit() or int(head) >= count or part not in ("vars", "assets") or \
                not rest.partition("/")[2]:
            raise error(f"the tensor {name[:200]!r} names no layer's store or assets of the "
                        f"model (it has {count} layers)")


class _Store(dict):
    """A layer's store as load_own_variables reads it: a missing key is a
    KeyError naming the layer and the keys the file holds for it."""

    def __init__(self, items, layer, path):
        super().__init__(items)
        self._about = (layer.name, path)

    def __missing__(self, key):
        name, path = self._about
        raise KeyError(f"[load_model] {path}: the file holds no variable {key!r} for layer "
                       f"{name!r} (it holds {sorted(self)})")


def load_own_variables(model, tensors: dict, path: str, error):
    """Calls load_own_variables on each layer whose class overrides it, with
    the store save_own_variables wrote."""
    _check_layers(tensors, model, error)
    for k, layer in enumerate(hook_layers(model)):
        if isinstance(layer, Layer) and _overrides(layer, "load_own_variables", Layer):
            layer.load_own_variables(_Store(_entries(tensors, k, "vars"), layer, path))


def _safe_parts(rel: str, error) -> list:
    parts = rel.split("/")
    if rel.startswith("/") or "\\" in rel or "\x00" in rel or len(parts) > MAX_ASSET_DEPTH or \
            any(p in ("", ".", "..") for p in parts) or ":" in parts[0]:
        raise error(f"an asset is named {rel[:200]!r}: asset paths must be relative, without "
                    f"'..', '.', empty parts or backslashes, at most {MAX_ASSET_DEPTH} deep")
    return parts


def _write_asset(folder: str, parts: list, data, flags: int):
    """Writes one asset under `folder` (ours, fresh): folders made as needed,
    the file new (O_EXCL), no link followed (O_NOFOLLOW; the folders are
    ours, made here, so none is a link)."""
    where = folder
    for p in parts[:-1]:
        where = os.path.join(where, p)
        if not os.path.isdir(where) or os.path.islink(where):
            os.mkdir(where, 0o700)  # (fails on anything else already there)
    fd = os.open(os.path.join(where, parts[-1]), flags, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.tobytes())


def load_assets(model, tensors: dict, error):
    """Calls load_assets on each layer whose class overrides it, with a fresh
    private folder holding the files save_assets wrote (removed after)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for k, layer in enumerate(hook_layers(model)):
        if not (isinstance(layer, Layer) and _overrides(layer, "load_assets", Layer)):
            continue
        files = _entries(tensors, k, "assets")
        if len(files) > MAX_ASSET_FILES:
            raise error(f"layer {layer.name!r} has {len(files)} asset files, past the "
                        f"{MAX_ASSET_FILES} a model file may hold for one layer")
        folder = tempfile.mkdtemp(prefix="tessera-assets-")  # 0700, ours alone
        try:
            for rel, data in sorted(files.items()):
                parts = _safe_parts(rel, error)
                if data.dtype != np.uint8 or data.ndim != 1:
                    raise error(f"the asset {rel[:200]!r} is not bytes (uint8, one axis)")
                try:
                    _write_asset(folder, parts, data, flags)
                except OSError as e:  # a file and a folder of one name, ...
                    raise error(f"the asset {rel[:200]!r} cannot be written beside the others "
                                f"({type(e).__name__}: {e.strerror})") from None
            layer.load_assets(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
