"""Fuzz target (atheris, coverage-guided): tessera's model, weights and
checkpoint loaders (tessera.nn.saving: read_file, load_model,
Model.load_weights, fit(resume_from=...); tessera.nn.checkpoints:
newest_checkpoint, read_manifest, read_state). Every load must succeed or
raise a ValueError (or FileNotFoundError) whose message starts with "[op]"
(a checkpoint reader's errors name the file instead); any other exception is
a finding. So is anything loading does besides reading: every load runs
under an audit hook (sys.addaudithook) that fails the input if it opens a
file for writing, imports a module, starts a process, compiles or executes
code, or touches ctypes or sockets (docs/security.md, "Model and weights
files").

The input is a JSON document, a NUL byte, then a data section.
  - A weights file: the document is the header; the target adds the magic,
    the header length and the SHA-256, so that the fuzzer explores what lies
    behind the checksum.
  - A checkpoint folder, when the document is a checkpoint manifest
    ("format": "tessera-checkpoint"): the target writes it as
    ckpt-<step>/manifest.json, with its checksum and the shards' SHA-256
    recomputed, and the data section cut into the shards it lists.

    python fuzz/weights.py [libFuzzer flags] [corpus folders]
"""

import glob
import hashlib
import json
import os
import random
import re
import shutil
import struct
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["tessera"]):
    import numpy as np

    from tessera import nn
    from tessera.nn import checkpoints, saving, weights_file


def _model():
    model = nn.Sequential([nn.Dense(4, activation="relu"), nn.Dense(2)], input_shape=(3,))
    model.compile(optimizer="adam", loss="mse")
    model.fit(X, Y, epochs=1, verbose=0, checkpoint_dir=False)
    return model


X, Y = np.ones((8, 3), np.float32), np.ones((8, 2), np.float32)
MODEL = _model()
# The file the loaders read: unlinked at once, reached through /proc, so
# nothing is left behind however the fuzzer exits.
FILE = tempfile.TemporaryFile()
PATH = f"/proc/self/fd/{FILE.fileno()}"
# The checkpoint folder (removed at exit).
FOLDER = tempfile.mkdtemp(prefix="tessera-fuzz-ckpt-")
_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}\Z")


def sealed(data: bytes) -> bytes:
    header, _, rest = data.partition(b"\0")
    body = weights_file.MAGIC + struct.pack("<Q", len(header)) + header + rest
    return body + hashlib.sha256(body).digest()


# ----------------------------------------------------------------- the audit hook

# Audit events no load may raise ("open" counts only for writing).
FORBIDDEN = ("import", "exec", "compile", "subprocess.Popen", "os.system", "os.exec",
             "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.remove", "os.unlink",
             "os.rename", "os.replace", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
             "os.chmod", "os.truncate", "shutil.", "ctypes.", "socket.", "urllib.", "pty.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
SEEN: list = []
WATCHING = [False]


class Forbidden(Exception):
    """Raised by the hook into the loader: the action does not happen."""


def audit(event, args):
    if not WATCHING[0]:
        return
    if event == "open":
        mode, flags = args[1], (args[2] if len(args) > 2 else 0)
        if not ((isinstance(mode, str) and any(c in mode for c in "wax+")) or
                (isinstance(flags, int) and flags & _WRITE_FLAGS)):
            return
    elif not event.startswith(FORBIDDEN):
        return
    SEEN.append(f"{event} {repr(args)[:300]}")
    raise Forbidden(f"loading raised the audit event {event}")


# The process works in an empty folder of its own: the C++ core's file
# primitives write without audit events, so a file appearing there (a crafted
# relative path) is a finding too.
WORKDIR = tempfile.mkdtemp(prefix="tessera-fuzz-cwd-")


def watched(load):
    """load() under the hook: AssertionError if it raised a forbidden event
    or left a file in the working folder."""
    SEEN.clear()
    WATCHING[0] = True
    try:
        load()
    finally:
        WATCHING[0] = False
        left = os.listdir(WORKDIR)
        if SEEN or left:
            raise AssertionError(f"loading did more than read: {SEEN} {left}")


# ----------------------------------------------------------------- the loads


def _tagged(e: Exception, names_file: bool = False):
    """An error must start with its op tag ("[op] ..."); a checkpoint
    reader's may instead name the file it is about."""
    if not (str(e).startswith("[") or (names_file and FOLDER in str(e))):
        raise AssertionError(f"an error without an op tag: {e!r}") from e


def _resume():
    MODEL.fit(X, Y, epochs=1, verbose=0, resume_from=PATH, checkpoint_dir=False)


def load_file(data: bytes):
    FILE.seek(0)
    FILE.truncate()
    FILE.write(sealed(data))
    FILE.flush()
    loads = (lambda: saving.read_file(PATH, "fuzz"), lambda: nn.load_model(PATH),
             lambda: MODEL.load_weights(PATH), lambda: saving.load_training_state(MODEL, PATH),
             _resume)
    for load in loads:
        try:
            watched(load)
        except (ValueError, FileNotFoundError) as e:
            _tagged(e)


def write_folder(manifest: dict, data: bytes) -> str:
    """The checkpoint folder the input describes (written before the hook
    watches): its path."""
    shutil.rmtree(FOLDER, ignore_errors=True)
    step = manifest.get("step")
    step = step if isinstance(step, int) and not isinstance(step, bool) and \
        0 < step < 10 ** 12 else 1
    path = os.path.join(FOLDER, f"ckpt-{step}")
    os.makedirs(path)
    shards = manifest.get("shards")
    at = 0
    for s in (shards if isinstance(shards, list) else [])[:8]:
        if not isinstance(s, dict) or not isinstance(s.get("file"), str) or \
                not _SAFE_NAME.match(s["file"]) or s["file"] == checkpoints.MANIFEST:
            continue
        size = s.get("bytes")
        size = size if isinstance(size, int) and 0 <= size <= len(data) else len(data) - at
        part = data[at:at + size]
        at += len(part)
        s["sha256"] = hashlib.sha256(part).hexdigest()
        with open(os.path.join(path, s["file"]), "wb") as f:
            f.write(part)
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    manifest["checksum"] = hashlib.sha256(text.encode()).hexdigest()
    with open(os.path.join(path, checkpoints.MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return path


def load_folder(manifest: dict, data: bytes):
    try:
        path = write_folder(manifest, data)
    except (TypeError, ValueError, OverflowError):  # a manifest json cannot write back
        return
    for load in (lambda: checkpoints.newest_checkpoint(FOLDER, warn=False),
                 lambda: checkpoints.read_state(path, checkpoints.read_manifest(path))):
        try:
            watched(load)
        except ValueError as e:
            _tagged(e, names_file=True)


def test_one_input(data: bytes):
    header, _, rest = data.partition(b"\0")
    try:
        doc = json.loads(header)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and doc.get("format") == checkpoints.FORMAT:
        load_folder(doc, rest)
    else:
        load_file(data)


def _warm_up():
    """Every load once on valid inputs, so that everything loading imports is
    imported before the hook watches."""
    with tempfile.TemporaryDirectory() as d:
        for save in (MODEL.save, MODEL.save_checkpoint):
            save(os.path.join(d, "f"))
            with open(os.path.join(d, "f"), "rb") as f:
                blob = f.read()
            (length,) = struct.unpack("<Q", blob[8:16])
            load_file(blob[16:16 + length] + b"\0" + blob[16 + length:-32])
        MODEL.fit(X, Y, epochs=1, verbose=0, checkpoint_dir=os.path.join(d, "ck"))
        run = glob.glob(os.path.join(d, "ck", "fit*"))  # the fit's run folder
        found = checkpoints.newest_checkpoint(run[0], warn=False) if run else None
        if found is not None:
            load_folder(dict(found[1]), found[2])
    saving.builtin_classes()


# Values a header edit puts in place of another (wrong types, extremes).
JUNK = [None, True, -1, 0, 1, 2 ** 40, 2 ** 63, -(2 ** 63), 1e308, 0.5, "", "x" * 300, "float32",
        "Dense", "Sequential", "Functional", "tessera.nn.layers", "os", [], [0], [2 ** 31, 3],
        [[1, 2]], {}, {"__tuple__": [1]}, {"__dict__": {}}, {"__layer__": {"class": "Dense"}},
        {"__object__": "Adam", "module": "tessera.optim"}, {"t": 0}, {"t": 99},
        # what an attacker names: internal functions, effectful operations
        {"__object__": "save_file", "module": "tessera.nn.saving"}, "write_atomic",
        "tessera.nn.saving", "file_write_csv", "print", "save", "random_uniform",
        {"op": "prim", "fn": "file_write_npy", "args": ["x.npy", {"t": 0}], "kwargs": {}},
        "shard-0-of-1.bin", "../x", "manifest.json"]


def _paths(v, path=()):
    yield path
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, path + (i,))


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    """Half the time an edit of the JSON document (a value replaced by junk or
    by another value of the document, a key removed, an entry duplicated),
    which byte mutations rarely make without breaking the JSON; else
    libFuzzer's."""
    rnd = random.Random(seed)
    header, sep, rest = data.partition(b"\0")
    try:
        h = json.loads(header)
    except (ValueError, RecursionError):
        h = None
    if h is None or not sep or rnd.random() < 0.5:
        return atheris.Mutate(data, max_size)
    paths = list(_paths(h))[1:]
    if not paths:
        return atheris.Mutate(data, max_size)
    path = rnd.choice(paths)
    target = h
    for k in path[:-1]:
        target = target[k]
    choice = rnd.random()
    if choice < 0.15:
        del target[path[-1]]
    elif choice < 0.3 and isinstance(target, list):
        target.append(target[path[-1]])
    elif choice < 0.5:
        other = h
        for k in rnd.choice(paths):
            other = other[k]
        target[path[-1]] = json.loads(json.dumps(other))
    else:
        target[path[-1]] = rnd.choice(JUNK)
    out = json.dumps(h).encode() + b"\0" + rest
    return out[:max_size]


if __name__ == "__main__":
    import atexit

    atexit.register(shutil.rmtree, FOLDER, True)
    atexit.register(shutil.rmtree, WORKDIR, True)
    os.chdir(WORKDIR)
    _warm_up()
    sys.addaudithook(audit)  # after every import: loading must import nothing
    atheris.Setup(sys.argv, test_one_input, custom_mutator=mutate)
    atheris.Fuzz()
