"""tessera's weights file format (named arrays, a JSON header, a
SHA-256), which saving.py extends with the model's architecture, compile settings,
optimizer state and training state. Reading never executes anything from the
file. Written to a fresh temporary in the target folder, then renamed.

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
import os
import socket
import struct
import tempfile

import numpy as np

from .._files import mode_for_replacing, write_chunks

MAGIC = b"TSRWGHT1"
DTYPES = {"float32": "<f4", "float64": "<f8", "int64": "<i8", "int32": "<i4", "bool": "|b1",
          "uint8": "|u1"}  # (uint8: the bytes of a layer's assets, saving_hooks.py)
_MAX_RANK = 32


_TMP_PREFIX = ".tessera-weights-"


def _host() -> str:
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
        # mkstemp makes the temporary 0600: give it the mode of the file it
        # replaces, or that of a new file (0666 less the umask), as open() would
        try:
            os.fchmod(fd, mode_for_replacing(path))
        except OSError:  # a file system without modes: the safe 0600 stays
            pass
        write_chunks(fd, chunks, hook, durable)
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
        if name in out:
            raise bad(f"the tensor {name[:200]!r} is named twice")
        out[name] = np.frombuffer(data, dtype=DTYPES[dt], count=count,
                                  offset=start).reshape(shape).astype(dt)
    return out, header


def load_weights_into(model, path, where="load_weights"):
    """Sets the model's weights from a file; every name, shape and dtype must
    match, or nothing is loaded (the first mismatch is named)."""
    tensors, header = read_file(path, where)
    if header.get("keyed") == "path":  # KerasFileEditor's files (file_editor.py)
        tensors = _by_path(model, tensors, os.fspath(path), where)
    set_weights_from(model, tensors, os.fspath(path), where)
    return tensors


def _by_path(model, tensors: dict, source: str, where: str) -> dict:
    """A file's weights keyed by Keras's paths ("dense/kernel") renamed to
    the model's variables; every path must be one of the model's."""
    var_of = {layer._variable(p.name).path: var for var, (layer, p) in model._owner.items()}
    if len(var_of) != len(model._owner):
        raise ValueError(f"[{where}] {source}: the file's weights are keyed by layer path, and "
                         "two weights of the model share a path; nothing was loaded")
    missing, extra = sorted(set(var_of) - set(tensors)), sorted(set(tensors) - set(var_of))
    if missing or extra:
        raise ValueError(f"[{where}] {source}: the weights do not match the model's paths: "
                         f"missing {missing[:20]}, unexpected {extra[:20]}; nothing was loaded")
    return {var_of[k]: v for k, v in tensors.items()}


def set_weights_from(model, tensors: dict, source: str, where: str):
    """Sets the model's weights from the non-optimizer entries of `tensors`
    (read from `source`), or nothing when a name, shape or dtype differs."""
    weights = {k: v for k, v in tensors.items()
               if not k.startswith(("optimizer/", "hooks/"))}  # (saving_hooks.py's)
    expected = model.weights
    missing = sorted(set(expected.keys()) - set(weights))
    extra = sorted(set(weights) - set(expected.keys()))
    if missing or extra:
        raise ValueError(f"[{where}] {source}: the weights do not match the model: "
                         f"missing {missing}, unexpected {extra}; nothing was loaded")
    for name, a in expected.items():
        w = weights[name]
        part = getattr(model._owner[name][0], "_local_part", None)
        if part is not None:  # a whole weight of a layer split over a tensor group
            w = weights[name] = part(model._owner[name][1].name, w)
        if w.shape != a.shape or w.dtype != a.dtype:
            layer, p = model._owner[name]
            raise ValueError(f"[{where}] {source}: {name} ({layer.name}/{p.name}) has "
                             f"shape {w.shape} and dtype {w.dtype}, the model expects {a.shape} "
                             f"and {a.dtype}; nothing was loaded")
    for name, w in weights.items():
        model._set(name, w)
