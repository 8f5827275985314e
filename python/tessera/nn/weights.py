"""tessera's weights file format: named arrays, a JSON header, a checksum.
Loading never executes anything from the file.

    offset  size  content
    0       8     magic b"TSRWGHT1"
    8       8     header length H, little-endian uint64
    16      H     header, UTF-8 JSON: {"format": "tessera-weights", "version": 1,
                  "tensors": [{"name", "dtype", "shape", "offset", "nbytes"}, ...]}
    16+H    D     the arrays' bytes, little-endian, C order, at their offsets
    16+H+D  32    SHA-256 of everything before it
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile

import numpy as np

MAGIC = b"TSRWGHT1"
DTYPES = {"float32": "<f4", "float64": "<f8", "int64": "<i8", "bool": "|b1"}


def save_weights(path, weights: dict):
    """Writes `weights` (name -> array) atomically: a temporary file renamed
    into place, so a failed write leaves no partial file."""
    tensors, chunks, offset = [], [], 0
    for name, a in weights.items():
        a = np.asarray(a)
        dt = str(a.dtype)
        if dt not in DTYPES:
            raise TypeError(f"[save_weights] {name}: dtype {dt} is not supported")
        raw = np.ascontiguousarray(a).astype(DTYPES[dt], copy=False).tobytes()
        tensors.append({"name": name, "dtype": dt, "shape": list(a.shape), "offset": offset,
                        "nbytes": len(raw)})
        chunks.append(raw)
        offset += len(raw)
    header = json.dumps({"format": "tessera-weights", "version": 1, "tensors": tensors}).encode()
    body = MAGIC + struct.pack("<Q", len(header)) + header + b"".join(chunks)
    digest = hashlib.sha256(body).digest()
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tessera-weights-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.write(digest)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_weights(path, expected: dict) -> dict:
    """Reads a weights file and checks it against `expected` (name -> (shape,
    dtype)). Returns the arrays; raises ValueError (nothing loaded) when the
    file is corrupted, truncated or does not match."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        blob = f.read()

    def bad(what):
        return ValueError(f"[load_weights] {path}: {what}; nothing was loaded")

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
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"unreadable header ({e})") from None
    if header.get("format") != "tessera-weights" or header.get("version") != 1:
        raise bad(f"unsupported format {header.get('format')!r} version {header.get('version')!r}")
    data = body[16 + hlen:]
    out = {}
    for t in header.get("tensors", []):
        name, dt, shape = t.get("name"), t.get("dtype"), tuple(t.get("shape", ()))
        if dt not in DTYPES:
            raise bad(f"tensor {name!r} has unsupported dtype {dt!r}")
        count = int(np.prod(shape)) if shape else 1
        nbytes = count * np.dtype(DTYPES[dt]).itemsize
        start = int(t.get("offset", -1))
        if start < 0 or nbytes != t.get("nbytes") or start + nbytes > len(data):
            raise bad(f"tensor {name!r} lies outside the data section")
        out[name] = np.frombuffer(data, dtype=DTYPES[dt], count=count,
                                  offset=start).reshape(shape).astype(dt)
    missing = sorted(set(expected) - set(out))
    extra = sorted(set(out) - set(expected))
    if missing or extra:
        raise bad(f"the weights do not match the model: missing {missing}, unexpected {extra}")
    for name, (shape, dtype) in expected.items():
        if tuple(out[name].shape) != tuple(shape) or out[name].dtype != np.dtype(dtype):
            raise bad(f"{name} has shape {out[name].shape} and dtype {out[name].dtype}, the "
                      f"model expects {tuple(shape)} and {np.dtype(dtype)}")
    return out
