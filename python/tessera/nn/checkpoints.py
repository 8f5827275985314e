"""Distributed checkpoints of the training state: every locality writes its
share in parallel, in a background thread while training goes on, and a
checkpoint counts only once locality 0 has committed its manifest.

    DIR/tessera.lock                            the job using DIR: flock, host and pid
    DIR/<run>/ckpt-<step>/shard-<r>-of-<N>.bin  bytes [r*T//N, (r+1)*T//N) of the state
    DIR/<run>/ckpt-<step>/manifest.json         the commit: written last, by locality 0

The commit: at the next batch's end (or the next save, or fit's end) every
locality waits for its shard's write and the localities' reports (written,
offset, size, SHA-256) are gathered to locality 0 in one collective; locality
0 then writes the manifest (a temporary renamed into place). A locality killed
before leaves the checkpoint uncommitted and the previous one intact.

A run is one fit call of one job: <run> is fit<k>-<run id>-<identity>, k
the fit call's ordinal in the process (among the fits using DIR), the run id
TESSERA_RUN_ID (made by `tessera run` once and kept across --max-restarts
relaunches; "local" without it), and the identity a hash of the script, its
arguments, the model's state layout and the data's size, which the manifest
also records. A fit resumes only its own run.

The state is the weights and the optimizer's tensors laid end to end (T
bytes, little-endian, C order; the manifest lists each tensor's name, dtype,
shape and offset) plus the training position (update count, epoch, batch,
the epoch's running sums, a learning rate set by a callback) and the
history of the epochs done, in the manifest. <step> is the update count.
Any number of localities reads a checkpoint, each shard once in total:
locality 0 chooses it by its manifest and the shards' sizes and sends the
manifest; each locality reads and checks (size, SHA-256) a contiguous block
of the shards, the worst reader's outcome is all-reduced, then the bytes are
all-gathered; a shard that does not check out makes every locality fall back
to the previous checkpoint, or stop with an error naming the localities that
could not read. fit(resume_from=folder) on several localities reads the same
way (read_resume_shared), without changing the folder.

The folder is untrusted: every file is opened relative to its folder
without following links, only regular files of the size the manifest states
are read, and the whole manifest is checked (types, ranges, the model's
layout, the run's identity) before a checkpoint is chosen; the newest that
checks out is used. Every file is written to a temporary in its folder,
fsynced and renamed. A folder without a manifest, or whose manifest or
shards do not check out, is not a checkpoint: locality 0 removes the files
of it that tessera names (never through a link) before training starts, so
the temporaries of killed writes go with it. Only the last `keep` complete
checkpoints are kept.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import math
import os
import re
import socket
import stat
import sys
import threading
import time
import warnings
import zlib

import numpy as np

from .. import distributed as _dist
from .._files import write_chunks
from .._state_share import resume_wants
from .callbacks import Callback, split_over_tensor_group
from .checkpoint_layout import _layout, _snapshot, _state_tensors, _tensors_from  # noqa: F401
from .checkpoint_blocks import _gather_blocks, _share_blocks, _span, _words, last_share  # noqa: F401
from .training_state import apply_training_state
from .weights_file import DTYPES, _host

__all__ = ["CheckpointDir", "newest_checkpoint", "resume_wants"]

FORMAT = "tessera-checkpoint"
VERSION = 2
MANIFEST = "manifest.json"
LOCK = "tessera.lock"
_FOLDER = re.compile(r"ckpt-([1-9]\d{0,17})")
_SHARD = re.compile(r"shard-(\d{5})-of-(\d{5})\.(bin|json)")
_RUN_ID = re.compile(r"[A-Za-z0-9_.]{1,64}")
_RUN_NAME = re.compile(r"fit[1-9]\d*-[A-Za-z0-9_.]{1,64}-[0-9a-f]{12}")
_TMP_PREFIX = ".tessera-ckpt-"
_MANIFEST_LIMIT = 16 << 20  # bytes: a manifest is small (tensor list, history)
_MAX_LOCALITIES = 1 << 20
_BIG = 1 << 53  # larger counts are not counts
_KEYS = {"format", "version", "step", "epoch", "batch", "localities", "total_bytes", "tensors",
         "training", "shards", "written", "run", "history", "first_iteration", "checksum"}
_TRAINING_KEYS = {"iteration", "epoch", "batch", "acc", "seed", "lr_override"}

# Called by the writer thread half way through writing a shard, before the
# temporary is flushed and renamed: tests stop or kill the process there.
_partial_write_hook = None

# {folder: how many fits of this process used it}: the fit call's ordinal.
_fit_counts: dict = {}
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _timeout() -> float:
    try:
        return float(os.environ.get("TESSERA_COLLECTIVE_TIMEOUT", "300"))
    except ValueError:
        return 300.0


def _sealed(body: dict) -> bytes:
    """The manifest as JSON with a SHA-256 of its other fields."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return json.dumps(dict(body, checksum=hashlib.sha256(text.encode()).hexdigest()),
                      sort_keys=True, indent=1, allow_nan=False).encode()


def _open_dir(name, dir_fd=None):
    """A folder opened without following a link; OSError naming why not."""
    try:
        return os.open(name, _O_DIR, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            what = "a symbolic link" if _is_link(name, dir_fd) else "not a folder"
            raise OSError(e.errno, f"{name} is {what}") from None
        raise


def _is_link(name, dir_fd) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _kind(name, dir_fd) -> str:
    """'folder', 'link', 'other' or 'missing': what entry `name` is, not followed."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return "missing"
    return "folder" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "other"


def _read_regular(dir_fd, name, shown, size=None, limit=None) -> bytes:
    """The bytes of regular file `name` in folder dir_fd, opened without
    following a link and without blocking (a FIFO is refused, not waited on);
    exactly `size` bytes, or at most `limit`. ValueError naming what is wrong."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        raise ValueError(f"{shown} is missing") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError(f"{shown} is a symbolic link, not a file tessera wrote") from None
        raise ValueError(f"{shown} cannot be read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{shown} is not a regular file (a FIFO, a device or a folder)")
        if size is not None and st.st_size != size:
            raise ValueError(f"{shown} has {st.st_size} bytes, the manifest says {size}")
        if limit is not None and st.st_size > limit:
            raise ValueError(f"{shown} has {st.st_size} bytes, more than the {limit} a "
                             "checkpoint's file of its kind may have")
        want = st.st_size
        buf = bytearray(want)
        view, got = memoryview(buf), 0
        raw = io.FileIO(fd, "rb", closefd=False)  # read(2) into the buffer: no copy
        while got < want:
            k = raw.readinto(view[got:])
            if not k:
                break
            got += k
        if got != want or os.read(fd, 1):
            raise ValueError(f"{shown} changed size while it was read")
        return bytes(buf)
    except OSError as e:
        raise ValueError(f"{shown} cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _write_at(dir_fd, name, chunks, hook=None, durable=True):
    """Writes the chunks to a new temporary in folder dir_fd (named by host
    and pid, so a sweep can tell a dead writer's), fsyncs it (unless not
    durable) and renames it to `name` (a link of that name is replaced, not
    followed); the temporary is removed on any failure."""
    tmp = f"{_TMP_PREFIX}{_host()}-{os.getpid()}-{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dir_fd)
    try:
        write_chunks(fd, chunks, hook, durable)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _tessera_name(name: str) -> bool:
    return name == MANIFEST or name.startswith(_TMP_PREFIX) or bool(_SHARD.fullmatch(name))


def _remove_checkpoint(run_fd, name) -> str:
    """Removes checkpoint folder `name` of a run: the manifest first (so a
    folder half removed is an uncommitted one), then the files tessera names,
    never through a link, then the folder if that emptied it. What was done,
    for the warning: 'removed it', or why it was left."""
    kind = _kind(name, run_fd)
    if kind != "folder":
        return "left it in place (not a folder tessera made)" if kind != "missing" else ""
    try:
        fd = _open_dir(name, run_fd)
    except OSError as e:
        return f"left it in place ({e.strerror or e})"
    left = 0
    try:
        names = os.listdir(fd)
        for entry in [MANIFEST] + sorted(n for n in names if n != MANIFEST):
            if entry not in names:
                continue
            if not _tessera_name(entry) or _kind(entry, fd) == "folder":
                left += 1
                continue
            try:
                os.unlink(entry, dir_fd=fd)  # a link is removed, never what it points to
            except OSError:
                left += 1
    finally:
        os.close(fd)
    if left:
        return f"removed tessera's files from it and left {left} other entr" \
               f"{'y' if left == 1 else 'ies'} in place"
    try:
        os.rmdir(name, dir_fd=run_fd)
    except OSError as e:
        return f"removed its files, not the folder ({e.strerror or e})"
    return "removed it"


def _steps_at(run_fd):
    """{step: kind} of the ckpt-<step> entries of a run folder."""
    try:
        names = os.listdir(run_fd)
    except OSError:
        return {}
    out = {}
    for name in names:
        m = _FOLDER.fullmatch(name)
        if m:
            out[int(m.group(1))] = _kind(name, run_fd)
    return out


# ------------------------------------------------------------------ checking

def _whole(v, lo=0, hi=_BIG) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _array_of(v, shape) -> bool:
    """v is nested lists of finite numbers of this shape."""
    if not shape:
        return _number(v)
    return isinstance(v, list) and len(v) == shape[0] and all(_array_of(x, shape[1:]) for x in v)


def _check_tensors(tensors, total):
    if not isinstance(tensors, list) or len(tensors) > 1 << 20:
        raise ValueError("tensors is not a list of tensor entries")
    at, names = 0, set()
    for e in tensors:
        if not isinstance(e, dict) or set(e) != {"name", "dtype", "shape", "offset", "nbytes"}:
            raise ValueError(f"the tensor entry {str(e)[:80]} is malformed")
        shape = e["shape"]
        if not isinstance(e["name"], str) or e["name"] in names or \
                not isinstance(e["dtype"], str) or e["dtype"] not in DTYPES \
                or not isinstance(shape, list) or len(shape) > 32 \
                or not all(_whole(d, 0, _BIG) for d in shape) or e["offset"] != at \
                or not _whole(e["nbytes"]):
            raise ValueError(f"the tensor entry {str(e)[:80]} is malformed")
        count = 1
        for d in shape:
            count = min(count * d, _BIG)
        if e["nbytes"] != count * np.dtype(DTYPES[e["dtype"]]).itemsize:
            raise ValueError(f"the tensor {e['name']!r} of shape {shape} and dtype {e['dtype']} "
                             f"cannot have {e['nbytes']} bytes")
        names.add(e["name"])
        at += e["nbytes"]
    if at != total:
        raise ValueError(f"the tensors hold {at} bytes, the state {total}")


def check_manifest(doc, step=None, expect=None):
    """Checks every field of a manifest (parsed, checksum verified): types,
    ranges and how they fit together; with `expect` (what the fit that reads
    it knows: layout, total, identity, epochs, steps, ...) also that it is a
    checkpoint of that fit's run. ValueError naming the first defect."""
    expect = expect or {}
    if set(doc) != _KEYS:
        missing, extra = sorted(_KEYS - set(doc)), sorted(set(doc) - _KEYS)
        raise ValueError(f"its fields differ from a manifest's: missing {missing}, unknown "
                         f"{extra[:5]}")
    if not _whole(doc["step"], 1):
        raise ValueError(f"step {str(doc['step'])[:40]} is not an update count")
    if step is not None and doc["step"] != step:
        raise ValueError(f"its manifest is for step {doc['step']}")
    n, total = doc["localities"], doc["total_bytes"]
    if not _whole(n, 1, _MAX_LOCALITIES):
        raise ValueError(f"localities {str(n)[:40]} is not a number of localities")
    if not _whole(total):
        raise ValueError(f"total_bytes {str(total)[:40]} is not a size")
    if "total" in expect and total != expect["total"]:
        raise ValueError(f"the state has {total} bytes, the model's {expect['total']}")
    if "layout" in expect:
        if doc["tensors"] != expect["layout"]:
            raise ValueError("its tensors (names, dtypes, shapes, offsets) are not the model's")
    else:
        _check_tensors(doc["tensors"], total)
    shards = doc["shards"]
    if not isinstance(shards, list) or len(shards) != n:
        raise ValueError(f"it lists {len(shards) if isinstance(shards, list) else 'no'} shards "
                         f"for {n} localities")
    for r, s in enumerate(shards):
        lo, hi = _span(total, n, r)
        if not isinstance(s, dict) or set(s) != {"file", "start", "bytes", "sha256"} \
                or s["file"] != f"shard-{r:05d}-of-{n:05d}.bin" or s["start"] != lo \
                or s["bytes"] != hi - lo or not isinstance(s["sha256"], str) \
                or not re.fullmatch(r"[0-9a-f]{64}", s["sha256"]):
            raise ValueError(f"shard entry {r} ({str(s)[:100]}) is not bytes [{lo}, {hi}) of "
                             "the state")
    epoch, batch, t = doc["epoch"], doc["batch"], doc["training"]
    epochs, steps = expect.get("epochs"), expect.get("steps")
    if not _whole(epoch, expect.get("initial_epoch", 0), _BIG if epochs is None else epochs):
        raise ValueError(f"epoch {str(epoch)[:40]} is not an epoch of this fit (from "
                         f"{expect.get('initial_epoch', 0)} to {epochs})")
    if not _whole(batch, 0, _BIG if steps is None else steps - 1) or \
            (epoch == epochs and batch != 0):
        raise ValueError(f"batch {str(batch)[:40]} is not a batch of the epoch's "
                         f"{steps if steps is not None else 'batches'}")
    if not isinstance(t, dict) or set(t) != _TRAINING_KEYS:
        raise ValueError("training is not the training position (iteration, epoch, batch, "
                         "acc, seed, lr_override)")
    if t["iteration"] != doc["step"] or t["epoch"] != epoch or t["batch"] != batch:
        raise ValueError(f"the training position (update {str(t['iteration'])[:40]}, epoch "
                         f"{str(t['epoch'])[:40]}, batch {str(t['batch'])[:40]}) is not the "
                         f"checkpoint's ({doc['step']}, {epoch}, {batch})")
    if not _whole(t["seed"], -(1 << 63), (1 << 63) - 1):
        raise ValueError(f"seed {str(t['seed'])[:40]} is not a seed")
    lr = t["lr_override"]
    if lr is not None and not (_number(lr) and lr >= 0):
        raise ValueError(f"the learning rate {str(lr)[:40]} is not a finite number >= 0")
    acc = t["acc"]
    if (acc is None) != (batch == 0):
        raise ValueError("the epoch's running sums do not match its batch")
    if acc is not None:
        shapes = expect.get("metric_shapes")
        if not isinstance(acc, dict) or set(acc) != {"loss", "seen", "totals"} or \
                not _number(acc["loss"]) or not _whole(acc["seen"], 1) or \
                not isinstance(acc["totals"], list) or \
                (shapes is not None and (len(acc["totals"]) != len(shapes) or not all(
                    _array_of(v, list(s)) for v, s in zip(acc["totals"], shapes)))):
            raise ValueError("the epoch's running sums (loss, seen, totals) are malformed")
        rows = expect.get("batch_size")
        if rows is not None and acc["seen"] > batch * rows:
            raise ValueError(f"the epoch's running sums count {acc['seen']} samples in "
                             f"{batch} batches of {rows}")
    first = doc["first_iteration"]
    if not _whole(first, 0, doc["step"] - 1):
        raise ValueError(f"first_iteration {str(first)[:40]} is not an update count before "
                         f"{doc['step']}")
    if "first_iteration" in expect and first != expect["first_iteration"]:
        raise ValueError(f"the run started at update {first}, this fit at "
                         f"{expect['first_iteration']}")
    start = expect.get("initial_epoch", 0)
    if steps is not None and doc["step"] - first > (epoch - start) * steps + batch:
        raise ValueError(f"{doc['step'] - first} updates cannot have been made by epoch "
                         f"{epoch}, batch {batch} of {steps} per epoch")
    history = doc["history"]
    if "initial_epoch" not in expect and isinstance(history, list) and history and \
            isinstance(history[0], dict) and _whole(history[0].get("epoch"), 0, epoch):
        start = history[0]["epoch"]  # resume_from: a run that began at any epoch
    if not isinstance(history, list) or len(history) != epoch - start or not all(
            isinstance(h, dict) and set(h) == {"epoch", "logs"} and h["epoch"] == start + k
            and isinstance(h["logs"], dict) and len(h["logs"]) <= 1000
            and all(isinstance(a, str) and len(a) <= 200 and _number(v)
                    for a, v in h["logs"].items())
            for k, h in enumerate(history)):
        raise ValueError(f"the history is not one entry of logs per epoch done (epochs {start} "
                         f"to {epoch})")
    if not isinstance(doc["written"], str) or len(doc["written"]) > 64:
        raise ValueError("written is not a time")
    run = doc["run"]
    if "identity" in expect and run != expect["identity"]:
        raise ValueError(f"it belongs to another run ({str(run)[:300]}), not this fit's "
                         f"({str(expect['identity'])[:300]})")
    if not isinstance(run, dict):
        raise ValueError("run is not a run's identity")
    return doc


def _parse_manifest(blob: bytes, shown):
    try:
        doc = json.loads(blob.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{shown} is unreadable ({type(e).__name__}: {str(e)[:120]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"{shown} is not a {FORMAT} manifest of version {VERSION}")
    body = {k: v for k, v in doc.items() if k != "checksum"}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ValueError(f"{shown} holds a number that is not finite") from None
    if hashlib.sha256(text.encode()).hexdigest() != doc.get("checksum"):
        raise ValueError(f"{shown}: checksum mismatch (the manifest is corrupted)")
    return doc


def _read_manifest_at(ck_fd, path, step=None, expect=None) -> dict:
    shown = os.path.join(path, MANIFEST)
    blob = _read_regular(ck_fd, MANIFEST, shown, limit=_MANIFEST_LIMIT)
    doc = _parse_manifest(blob, shown)
    try:
        return check_manifest(doc, step, expect)
    except ValueError as e:
        raise ValueError(f"{shown}: {e}") from None
    except (TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError) as e:
        # a check that met a value of a type it did not foresee: still a defect of the file
        raise ValueError(f"{shown}: a field is malformed ({type(e).__name__}: "
                         f"{str(e)[:120]})") from None


def _read_state_at(ck_fd, path, manifest, first=0, stop=None) -> bytes:
    """The bytes of shards [first, stop) of the manifest (all by default),
    each a regular file checked against its size and SHA-256."""
    parts = []
    for s in manifest["shards"][first:stop]:
        shown = os.path.join(path, s["file"])
        data = _read_regular(ck_fd, s["file"], f"shard {shown}", size=s["bytes"])
        if hashlib.sha256(data).hexdigest() != s["sha256"]:
            raise ValueError(f"shard {shown}: checksum mismatch (corrupted)")
        parts.append(data)
    return b"".join(parts)


def _stat_shards(ck_fd, path, manifest):
    """Checks that every shard is a regular file of the size the manifest
    states, without opening or reading it (the bytes are read and their
    SHA-256 checked by one locality each: CheckpointDir._load_shared)."""
    for s in manifest["shards"]:
        shown = f"shard {os.path.join(path, s['file'])}"
        try:
            st = os.stat(s["file"], dir_fd=ck_fd, follow_symlinks=False)
        except FileNotFoundError:
            raise ValueError(f"{shown} is missing") from None
        except OSError as e:
            raise ValueError(f"{shown} cannot be read ({e.strerror or e})") from None
        if stat.S_ISLNK(st.st_mode):
            raise ValueError(f"{shown} is a symbolic link, not a file tessera wrote")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{shown} is not a regular file (a FIFO, a device or a folder)")
        if st.st_size != s["bytes"]:
            raise ValueError(f"{shown} has {st.st_size} bytes, the manifest says {s['bytes']}")


def read_manifest(path, expect=None) -> dict:
    """The manifest of checkpoint folder `path`, checked whole; ValueError
    naming what is wrong otherwise."""
    fd = _open_checkpoint(path)
    try:
        return _read_manifest_at(fd, os.fspath(path), expect=expect)
    finally:
        os.close(fd)


def read_state(path, manifest) -> bytes:
    """The state's bytes from every shard of checkpoint `path`, each a
    regular file checked against the manifest's size and SHA-256."""
    fd = _open_checkpoint(path)
    try:
        return _read_state_at(fd, os.fspath(path), manifest)
    finally:
        os.close(fd)


def _outcomes(status: int):
    """Every locality's reader status (0: read and checked), or None when
    all read theirs: an all-reduce of the largest (8 bytes whatever the
    number of localities), the whole list gathered only after a failure."""
    if not int(np.asarray(_dist.all_reduce(np.array([status], dtype=np.int64), op="max"))[0]):
        return None
    return np.asarray(_dist.all_gather(np.array([status], dtype=np.int64)))


def _read_block(open_checkpoint, path, manifest, n: int, rank: int) -> bytes:
    """The bytes of this locality's block of the shards (_span of them),
    each checked; b"" when the block is empty. open_checkpoint() gives the
    checkpoint folder's descriptor."""
    first, stop = _span(manifest["localities"], n, rank)
    if first >= stop:
        return b""
    ck = open_checkpoint()
    try:
        return _read_state_at(ck, path, manifest, first, stop)
    finally:
        os.close(ck)


def only_run(folder) -> str:
    """The name of the one run folder (fit<k>-<id>-<hash>) in a checkpoint
    folder, or "" when it holds none (then it is a run folder itself);
    ValueError when it holds several."""
    runs = sorted(e.name for e in os.scandir(folder) if _RUN_NAME.fullmatch(e.name)
                  and e.is_dir(follow_symlinks=False))
    if len(runs) > 1:
        raise ValueError(f"it holds {len(runs)} runs ({', '.join(runs[:4])}"
                         f"{', ...' if len(runs) > 4 else ''}): name one")
    return runs[0] if runs else ""


def _resolve_resume(folder, expect, below=None):
    """fit(resume_from=folder) on locality 0 of several: (names, manifest)
    of the checkpoint to load, its shards checked to be regular files of
    their size but not read (one reader per shard reads them); names is
    (run folder or "", ckpt folder or ""), relative to `folder`. None when
    the folder holds no complete checkpoint (below `below`)."""
    if os.path.lexists(os.path.join(folder, MANIFEST)):
        if below is not None:
            return None
        fd = _open_checkpoint(folder)
        try:
            manifest = _read_manifest_at(fd, folder, expect=expect)
            _stat_shards(fd, folder, manifest)
        finally:
            os.close(fd)
        return ("", ""), manifest
    run = only_run(folder)
    top = _open_checkpoint(folder)
    try:
        run_fd = _open_dir(run, top) if run else os.dup(top)
    finally:
        os.close(top)
    try:
        found = _newest_at(run_fd, os.path.join(folder, run), expect, verify=False, below=below)
    finally:
        os.close(run_fd)
    if found is None:
        return None
    return (run, os.path.basename(found[0])), found[1]


def _open_resolved(folder, names):
    """The checkpoint folder (run, ckpt) under `folder`, opened without
    following a link below the folder the user named."""
    fd = _open_checkpoint(folder)
    for name in names:
        if name:
            try:
                sub = _open_dir(name, fd)
            finally:
                os.close(fd)
            fd = sub
    return fd


def read_resume_shared(folder, expect, n: int, rank: int, where: str = "resume_from",
                       wants=None):
    """fit(resume_from=folder) on n localities (a collective of all of
    them): locality 0 chooses the checkpoint and sends its manifest, each
    locality reads and checks only its block of the shards, and one
    all-gather gives every locality the state: T bytes read in total, not
    n*T. A shard that does not check out makes locality 0 read it too: if
    it is bad there the previous checkpoint is chosen (with a warning, as
    on one locality; nothing is removed), otherwise every locality raises
    an error naming the localities that could not read theirs.
    (path, manifest, state bytes), or None when there is no complete
    checkpoint (on every locality). With `wants` (a tessera._state_share.Wants), each locality
    receives only the bytes it keeps; the others are zero."""
    below = None
    while True:
        head, blob, failure = [0, 0, 0], b"", None
        if rank == 0:
            try:
                found = _resolve_resume(folder, expect, below)
                if found is not None:
                    blob = json.dumps([list(found[0]), found[1]]).encode()
                    head = [1, len(blob), 0]
            except (OSError, ValueError) as e:
                failure = ValueError(f"[{where}] {folder}: "
                                     f"{getattr(e, 'strerror', None) or e}; nothing was loaded")
                head = [0, 0, 1]
        head = [int(v) for v in np.asarray(_dist.broadcast(np.array(head, dtype=np.int64)))]
        if head[2]:
            raise failure if failure is not None else ValueError(
                f"[{where}] locality {rank}: locality 0 could not read {folder} (its error "
                "says why); nothing was loaded")
        if not head[0]:
            return None
        sent = _words(blob) if rank == 0 else np.zeros((head[1] + 7) // 8, dtype=np.int64)
        names, manifest = json.loads(np.asarray(_dist.broadcast(sent)).tobytes()[:head[1]])
        path = os.path.join(folder, *[x for x in names if x])
        status, why, part = 0, "", b""
        try:
            manifest = check_manifest(manifest, None, expect)
            part = _read_block(lambda: _open_resolved(folder, names), path, manifest, n, rank)
        except (OSError, ValueError) as e:
            status, why = 1, str(getattr(e, "strerror", None) or e)
        except (TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
            status, why = 1, f"a field is malformed ({type(e).__name__})"
        statuses = _outcomes(status)
        if statuses is None:
            return path, manifest, _share_blocks(part, manifest, n, rank, wants,
                                                 f"[{where}] locality {rank}", path)
        failed = [r for r in range(n) if statuses[r]]
        bad, bad_why = 0, "a shard does not check out on locality 0"
        if rank == 0:
            try:
                ck = _open_resolved(folder, names)
                try:
                    for r in failed:
                        _read_state_at(ck, path, manifest, *_span(manifest["localities"], n, r))
                finally:
                    os.close(ck)
            except (OSError, ValueError) as e:
                bad, bad_why = 1, str(getattr(e, "strerror", None) or e)
                if names[1]:
                    warnings.warn(f"[checkpoint] {path} is not a valid checkpoint: {bad_why}; "
                                  "falling back to the previous one", RuntimeWarning,
                                  stacklevel=3)
        if int(np.asarray(_dist.broadcast(np.array([bad], dtype=np.int64)))[0]):
            if not names[1]:  # the folder named is the checkpoint: nothing to fall back to
                raise ValueError(f"[{where}] {folder}: {bad_why}; nothing was loaded")
            below = manifest["step"]
            continue
        own = f": {why}" if why else ""
        raise ValueError(f"[{where}] locality {rank}: the checkpoint {path} that locality 0 "
                         f"chose does not check out on localit"
                         f"{'y' if len(failed) == 1 else 'ies'} {', '.join(map(str, failed))}"
                         f"{own} (is {folder} the same shared folder on every host?); nothing "
                         "was loaded")


def _open_checkpoint(path):
    """A folder the user named (its path is trusted, links in it followed);
    what is inside is opened relative to it, without following links."""
    path = os.fspath(path)
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise ValueError(f"{path} cannot be opened as a folder ({e.strerror or e})") from None


def _newest_at(run_fd, run_path, expect=None, remove_bad=False, warn=True, verify=True,
               below=None):
    """(path, manifest, state bytes) of the newest checkpoint of a run folder
    that checks out whole, or None. The others are passed over with a
    warning (and, with remove_bad, their files removed, as are those of
    folders never committed). Without verify the shards are only checked
    to be regular files of their size (state bytes None: the localities read
    and check them, one reader per shard); `below`: only steps before it."""
    found = _steps_at(run_fd)
    chosen = None
    for step in sorted(found, reverse=True):
        if below is not None and step >= below:
            continue
        name = f"ckpt-{step}"
        path = os.path.join(run_path, name)
        if found[step] != "folder":
            if warn and chosen is None:
                what = "a symbolic link" if found[step] == "link" else "not a folder"
                warnings.warn(f"[checkpoint] {path} is {what}, not a checkpoint folder tessera "
                              "made: not read, left in place; falling back to the previous one",
                              RuntimeWarning, stacklevel=4)
            continue
        committed = _kind(f"{name}/{MANIFEST}", run_fd) != "missing"
        if not committed:
            if remove_bad:
                _remove_checkpoint(run_fd, name)
            continue
        if chosen is not None:
            continue  # older ones are only looked at for uncommitted folders
        try:
            ck = _open_dir(name, run_fd)
        except OSError as e:
            if warn:
                warnings.warn(f"[checkpoint] {path} cannot be opened ({e.strerror or e}); "
                              "falling back to the previous one", RuntimeWarning, stacklevel=4)
            continue
        try:
            manifest = _read_manifest_at(ck, path, step, expect)
            data = _read_state_at(ck, path, manifest) if verify else _stat_shards(ck, path,
                                                                                 manifest)
        except ValueError as e:
            done = _remove_checkpoint(run_fd, name) if remove_bad else ""
            if warn:
                warnings.warn(f"[checkpoint] {path} is not a valid checkpoint: {e}; "
                              f"{done + ' and ' if done else ''}falling back to the previous "
                              "one", RuntimeWarning, stacklevel=4)
            continue
        finally:
            os.close(ck)
        chosen = (path, manifest, data)
        if not remove_bad:
            break
    return chosen


def newest_checkpoint(folder, remove_bad: bool = False, warn: bool = True, expect=None):
    """(path, manifest, state bytes) of the newest checkpoint in run folder
    `folder` (a folder of ckpt-<step> folders) that checks out whole, or None."""
    try:
        fd = _open_checkpoint(folder)
    except ValueError:
        return None
    try:
        return _newest_at(fd, os.fspath(folder), expect, remove_bad, warn)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ runs, lock

def run_id() -> str:
    """TESSERA_RUN_ID (set by `tessera run`, kept across its restarts), or
    'local' without it."""
    rid = os.environ.get("TESSERA_RUN_ID", "")
    if not rid:
        return "local"
    if not _RUN_ID.fullmatch(rid):
        raise ValueError(f"[fit] TESSERA_RUN_ID must be 1 to 64 letters, digits, '_' or '.', got "
                         f"{rid[:80]!r} (environment)")
    return rid


def _script():
    """The script's path and a SHA-256 of its contents."""
    argv = list(getattr(sys, "argv", []) or [])
    path = os.path.abspath(argv[0]) if argv and argv[0] and argv[0] != "-c" else "<interactive>"
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                with os.fdopen(os.dup(fd), "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path, h.hexdigest()


def identity(model, layout, data: dict, ordinal: int) -> dict:
    """What makes a run: the run id, the script, the fit call's ordinal, the
    model's state layout and the data's size."""
    path, sha = _script()
    arch = hashlib.sha256(json.dumps([[e["name"], e["dtype"], e["shape"]] for e in layout])
                          .encode()).hexdigest()
    return {"run_id": run_id(), "script": path, "script_sha256": sha, "fit": ordinal,
            "model": arch, "optimizer": type(model._compiled.optimizer).__name__, "data": data}


def run_name(ident: dict) -> str:
    h = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    return f"fit{ident['fit']}-{ident['run_id']}-{h}"


class _Lock:
    """One job per checkpoint folder: flock on DIR/tessera.lock, which holds
    the host and pid of the job that has it. A lock left by a dead job is
    free (the kernel released it) and is taken over."""

    def __init__(self, top_fd, folder, where):
        self.fd = None
        shown = os.path.join(folder, LOCK)
        try:
            fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK |
                         os.O_CLOEXEC, 0o644, dir_fd=top_fd)
        except OSError as e:
            what = "is a symbolic link" if e.errno == errno.ELOOP else \
                f"cannot be opened ({e.strerror or e})"
            raise RuntimeError(f"[{where}] the lock file {shown} {what}: the checkpoint folder "
                               "cannot be locked for this job") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RuntimeError(f"[{where}] the lock file {shown} is not a regular file: the "
                                   "checkpoint folder cannot be locked for this job")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RuntimeError(f"[{where}] the checkpoint folder {folder} is in use by "
                                   f"another job: {self._holder(fd)} (lock file {shown}); one "
                                   "job per folder: give this job another checkpoint folder "
                                   "or wait for that one to end") from None
            me = {"host": socket.gethostname(), "pid": os.getpid(), "run_id": run_id(),
                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    @staticmethod
    def _holder(fd) -> str:
        try:
            doc = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            return f"host {str(doc['host'])[:100]}, pid {int(doc['pid'])}"
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return "a job that did not say which (the lock file holds no host and pid)"

    def release(self):
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor releases the flock
            self.fd = None


def parse_every(every, where: str):
    """(every_steps, every_epoch) from "epoch", a number of updates, or a
    list of both."""
    items = list(every) if isinstance(every, (list, tuple)) else [every]
    steps, epoch = 0, False
    for v in items:
        if v == "epoch":
            epoch = True
        elif isinstance(v, int) and not isinstance(v, bool) and v > 0 and not steps:
            steps = v
        else:
            raise ValueError(f"[{where}] checkpoint_every must be 'epoch', a positive number of "
                             f"updates, or a list of both, got {every!r}")
    if not items:
        raise ValueError(f"[{where}] checkpoint_every is empty")
    return steps, epoch


class CheckpointDir(Callback):
    """The checkpoints of one folder: on fit's start, finds the newest valid
    checkpoint of this fit's run and puts the training state back; then
    writes one every `every_steps` updates and/or at the end of every epoch,
    asynchronously, keeping the last `keep`. Made by fit(checkpoint_dir=...)
    or from a ModelCheckpoint(folder, save_training_state=True)."""

    def __init__(self, folder, every="epoch", keep=3, verbose=0, where="fit"):
        super().__init__()
        if not isinstance(folder, (str, os.PathLike)) or not os.fspath(folder):
            raise TypeError(f"[{where}] checkpoint_dir must be a folder path, got {folder!r}")
        self.folder = os.path.abspath(os.fspath(folder))
        self.every_steps, self.every_epoch = parse_every(every, where)
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise ValueError(f"[{where}] keep_checkpoints must be a positive int or None (keep "
                             f"all), got {keep!r}")
        self.keep = keep
        self.verbose = verbose
        self.where = where
        self._thread = None
        self._error = None
        self._pending = None  # the checkpoint in flight: committed by _collect
        self._last_step = None
        self._due = False
        self._lock = None
        self._run_fd = None
        self._history = []
        self._first = 0
        self.n, self.rank, self.writes = 1, 0, True
        self.run = None  # this fit's run folder
        self.last_saved = None  # path of the newest checkpoint this run committed

    # ------------------------------------------------------------- reading

    def restore(self, model, n_ranks: int, rank: int, fit=None, wants=None):
        """Chooses the newest valid checkpoint of this fit's run (locality 0
        decides and tells the others; it also locks the folder and removes
        uncommitted and invalid checkpoints of the run) and loads it into the
        model. `fit`: what the fit knows (data size, epochs, steps, ...). The
        training state (with "history"), or None when the run has no
        checkpoint yet. A collective when n_ranks > 1. `wants` (a tessera._state_share.Wants):
        the bytes each locality keeps, received alone (the rest is zero:
        ZeRO or the pipeline stages drop it before training starts), or a
        function of the state's layout giving it."""
        fit = dict(fit or {})
        self.n, self.rank = n_ranks, rank
        real_rank = _dist.rank() if _dist.size() > 1 else 0
        # data_parallel=False under several localities: only locality 0 writes
        self.writes = n_ranks > 1 or real_rank == 0
        _fit_counts[self.folder] = ordinal = _fit_counts.get(self.folder, 0) + 1
        layout, total = _layout(_state_tensors(model), self.where)
        if callable(wants):
            wants = wants(layout)
        ident = identity(model, layout, fit.get("data"), ordinal)
        self.run = os.path.join(self.folder, run_name(ident))
        self._first = model._iteration
        self._expect = {"layout": layout, "total": total, "identity": ident,
                        "first_iteration": model._iteration,
                        **{k: fit[k] for k in ("epochs", "steps", "initial_epoch", "batch_size",
                                               "metric_shapes") if fit.get(k) is not None}}
        found, failure = None, None
        if self.writes and rank == 0:
            try:
                found = self._open_run(lead=True)
            except (OSError, RuntimeError, ValueError) as e:
                failure = e
        chosen = -1 if found is None else found[1]["step"]
        if n_ranks > 1:
            folder, run = zlib.crc32(self.folder.encode()), zlib.crc32(self.run.encode())
            agreed = np.asarray(_dist.broadcast(np.array(
                [chosen, folder, run, failure is not None], dtype=np.int64)))
            chosen = int(agreed[0])
            if failure is not None:
                self.close()
                raise failure
            if int(agreed[3]):
                raise RuntimeError(f"[{self.where}] locality {rank}: locality 0 could not open "
                                   f"the checkpoint folder {self.folder} (its error says why)")
            if int(agreed[1]) != folder:
                raise ValueError(f"[{self.where}] locality {rank} writes its checkpoints to "
                                 f"{self.folder}, which is not locality 0's folder: every "
                                 "locality must name the same checkpoint folder")
            if int(agreed[2]) != run:
                raise ValueError(f"[{self.where}] locality {rank}: this fit's run "
                                 f"{os.path.basename(self.run)} is not locality 0's (the run id, "
                                 "script, fit call, model or data size differ): every locality "
                                 "must run the same script on the same data")
            if rank != 0:
                try:
                    self._open_run(lead=False)
                except OSError as e:  # told to the others by _load_shared
                    failure = e
        elif failure is not None:
            self.close()
            raise failure
        elif not self.writes:
            found = self._open_run(lead=False, read=True)
            chosen = -1 if found is None else found[1]["step"]
        if n_ranks > 1:
            found = self._load_shared(found, chosen, failure, wants) if chosen >= 0 else None
            chosen = -1 if found is None else chosen
        if chosen < 0:
            return None
        if found is None:
            path = os.path.join(self.run, f"ckpt-{chosen}")
            try:
                ck = _open_dir(f"ckpt-{chosen}", self._run_fd)
                try:
                    manifest = _read_manifest_at(ck, path, chosen, self._expect)
                    found = (path, manifest, _read_state_at(ck, path, manifest))
                finally:
                    os.close(ck)
            except (OSError, ValueError) as e:
                raise ValueError(f"[{self.where}] locality {rank}: the checkpoint {path} that "
                                 f"locality 0 chose does not check out here: "
                                 f"{getattr(e, 'strerror', None) or e} (is {self.folder} the "
                                 "same shared folder on every host?)") from None
        path, manifest, data = found
        tensors = _tensors_from(manifest, data, os.path.join(path, MANIFEST))
        header = {"training": manifest["training"], "iteration": manifest["step"]}
        training = apply_training_state(model, tensors, header, path, self.where)
        self._last_step = manifest["step"]
        self._history = [dict(h) for h in manifest["history"]]
        if self.verbose and rank == 0:
            n = manifest["localities"]
            done = " (the run had ended: nothing is left to train)" if \
                manifest["epoch"] == fit.get("epochs") else ""
            print(f"[{self.where}] resuming from {path} (epoch {training['epoch'] + 1}, batch "
                  f"{training['batch']}, update {manifest['step']}; written by {n} "
                  f"localit{'y' if n == 1 else 'ies'}){done}", flush=True)
        return dict(training, history=self._history)

    def _load_shared(self, found, chosen, failure, wants=None):
        """(path, manifest, state bytes) of the checkpoint locality 0 chose,
        each shard read by one locality (a contiguous block of the shards per
        locality) and the bytes all-gathered: T bytes read in total, not N*T.
        Every locality learns through a collective whether every reader
        succeeded; a shard that does not check out on locality 0 either
        makes it fall back to the previous checkpoint (removed, as when it
        read them all itself), otherwise every locality raises an error
        naming the localities that could not read theirs. None when no
        checkpoint is left. A collective of every locality."""
        n, rank = self.n, self.rank
        while True:
            blob = json.dumps(found[1]).encode() if rank == 0 and found is not None else b""
            head = np.asarray(_dist.broadcast(np.array([chosen, len(blob)], dtype=np.int64)))
            chosen, size = int(head[0]), int(head[1])
            if chosen < 0:
                return None
            sent = _words(blob) if rank == 0 else np.zeros((size + 7) // 8, dtype=np.int64)
            blob = np.asarray(_dist.broadcast(sent)).tobytes()[:size]
            path = os.path.join(self.run, f"ckpt-{chosen}")
            status, why, part, manifest = 0, "", b"", None
            try:
                if failure is not None:
                    raise failure
                manifest = _parse_manifest(blob, os.path.join(path, MANIFEST))
                manifest = check_manifest(manifest, chosen, self._expect)
            except (OSError, ValueError) as e:
                status, why = 1, str(getattr(e, "strerror", None) or e)
            except (TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
                status, why = 1, f"a field is malformed ({type(e).__name__})"
            if status == 0:
                try:
                    part = _read_block(lambda: _open_dir(f"ckpt-{chosen}", self._run_fd), path,
                                       manifest, n, rank)
                except (OSError, ValueError) as e:
                    status, why = 2, str(getattr(e, "strerror", None) or e)
            # the worst reader's outcome, on every locality: a failed reader never
            # leaves the others waiting in the all-gather of the bytes
            statuses = _outcomes(status)
            if statuses is None:
                return path, manifest, _share_blocks(part, manifest, n, rank, wants,
                                                     f"[{self.where}] locality {rank}", path)
            failed = [r for r in range(n) if statuses[r]]
            verdict = 0  # 1: the checkpoint is bad, locality 0 chose another
            if rank == 0 and (statuses != 1).all() and found is not None:
                manifest = found[1]
                ck = None
                try:
                    ck = _open_dir(f"ckpt-{chosen}", self._run_fd)
                    for r in failed:
                        _read_state_at(ck, path, manifest, *_span(manifest["localities"], n, r))
                except (OSError, ValueError) as e:
                    verdict = 1
                    done = _remove_checkpoint(self._run_fd, f"ckpt-{chosen}")
                    warnings.warn(f"[checkpoint] {path} is not a valid checkpoint: "
                                  f"{getattr(e, 'strerror', None) or e}; "
                                  f"{done + ' and ' if done else ''}falling back to the previous "
                                  "one", RuntimeWarning, stacklevel=4)
                    found = _newest_at(self._run_fd, self.run, self._expect, remove_bad=True,
                                       verify=False, below=chosen)
                    chosen = -1 if found is None else found[1]["step"]
                finally:
                    if ck is not None:
                        os.close(ck)
            if int(np.asarray(_dist.broadcast(np.array([verdict], dtype=np.int64)))[0]):
                continue
            own = f": {why}" if why else ""
            raise ValueError(f"[{self.where}] locality {rank}: the checkpoint {path} that "
                             f"locality 0 chose does not check out on localit"
                             f"{'y' if len(failed) == 1 else 'ies'} "
                             f"{', '.join(map(str, failed))}{own} (is {self.folder} the same "
                             "shared folder on every host?)")

    def _open_run(self, lead: bool, read: bool = False):
        """Opens the folder, and this run's folder in it, without following
        links below the folder the user named. The lead (locality 0) creates
        them, takes the lock and chooses the newest valid checkpoint."""
        if lead:
            try:
                os.makedirs(self.folder, exist_ok=True)
            except OSError as e:
                raise OSError(f"[{self.where}] cannot create the checkpoint folder "
                              f"{self.folder}: {e.strerror or e}") from None
        try:
            top = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            if read:
                return None
            raise OSError(f"[{self.where}] cannot open the checkpoint folder {self.folder}: "
                          f"{e.strerror or e}") from None
        name = os.path.basename(self.run)
        try:
            if lead:
                self._lock = _Lock(top, self.folder, self.where)
                try:
                    os.mkdir(name, 0o755, dir_fd=top)
                    self._note_other_launches(top, name)
                except FileExistsError:
                    pass
            try:
                self._run_fd = _open_dir(name, top)
            except FileNotFoundError:
                if read:
                    return None
                raise
            except OSError as e:
                what = "a symbolic link" if e.errno == errno.ELOOP else "not a folder"
                raise OSError(f"[{self.where}] the run folder {self.run} is {what}, not a folder "
                              "tessera made: not used; remove it") from None
        except BaseException:
            self.close()
            raise
        finally:
            os.close(top)
        if lead:
            self._sweep()
            # several localities: the shards are read once in total, by _load_shared
            return _newest_at(self._run_fd, self.run, self._expect, remove_bad=True,
                              verify=self.n == 1)
        if read:
            return _newest_at(self._run_fd, self.run, self._expect, warn=False)
        return None

    def _note_other_launches(self, top, name):
        """A new run while the folder holds the same fit call's runs of other
        launches: says so, and how to continue one (a fresh launch never
        resumes another's run: docs/resilience.md)."""
        fit, rid = name.split("-")[0], self._expect["identity"]["run_id"]
        try:
            others = sorted({n.split("-")[1] for n in os.listdir(top) if _RUN_NAME.fullmatch(n)
                             and n.split("-")[0] == fit and n.split("-")[1] != rid})
        except OSError:
            return
        if others:
            shown = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
            warnings.warn(f"[{self.where}] {self.folder} holds checkpoints of fit call "
                          f"{fit[3:]} of other launches (run ids {shown}); this launch (run id "
                          f"{rid}) trains a run of its own from the start. To continue one of "
                          "them, launch with TESSERA_RUN_ID=<its id>", RuntimeWarning,
                          stacklevel=2)

    def _sweep(self):
        """Removes this host's temporaries of dead writers in the run folder."""
        prefix = f"{_TMP_PREFIX}{_host()}-"
        try:
            names = os.listdir(self._run_fd)
        except OSError:
            return
        for name in names:
            if not name.startswith(prefix):
                continue
            pid = name[len(prefix):].split("-", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                os.kill(int(pid), 0)
                continue
            except ProcessLookupError:
                pass
            except (PermissionError, OverflowError):
                continue
            try:
                os.unlink(name, dir_fd=self._run_fd)
            except OSError:
                pass

    def close(self):
        if self._run_fd is not None:
            os.close(self._run_fd)
            self._run_fd = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # ------------------------------------------------------------- writing

    def on_train_batch_end(self, batch, logs=None):
        self._collect()  # the previous batch's checkpoint, if one is in flight
        if not self.every_steps or self.model._iteration % self.every_steps:
            return
        steps = self.params.get("steps")
        if steps is not None and batch + 1 >= steps:
            self._due = True  # written at the epoch's end, after its callbacks
        else:
            self.save(self.model)

    def on_epoch_end(self, epoch, logs=None):
        # the history so far, as fit will record it (numbers only: JSON)
        kept = {}
        for k, v in (logs or {}).items():
            try:
                v = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(v):
                kept[str(k)] = v
        self._history.append({"epoch": epoch, "logs": kept})
        if self.every_epoch or self._due:
            self.save(self.model)
        self._due = False

    def on_train_end(self, logs=None):
        self.finish()

    def save(self, model):
        """Snapshots this locality's share of the state now and writes it in
        a background thread (after the previous checkpoint was committed);
        it is committed at the next batch's end, the next save or fit's end,
        whichever comes first (_collect)."""
        step = model._iteration
        if step == self._last_step:
            return
        writing = self.writes and self._run_fd is not None
        split = split_over_tensor_group(model)
        if not writing and not split:
            return
        self._collect()
        # weights split over a tensor group are gathered whole: every member
        # of the group takes part, whether or not it writes a share
        tensors = _state_tensors(model, gather=split)
        if not writing:
            self._last_step = step
            return
        entries, total = _layout(tensors, self.where)
        lo, hi = _span(total, self.n, self.rank)
        job = {"step": step, "data": _snapshot(tensors, entries, lo, hi), "start": lo,
               "entries": entries, "total": total, "training": model._training_state(),
               "history": [dict(h) for h in self._history], "sha256": None}
        self._last_step = step
        self._pending = job
        self._thread = threading.Thread(target=self._write, args=(job,), daemon=True,
                                        name="tessera-checkpoint")
        self._thread.start()

    def finish(self, abandon: bool = False):
        """Commits the write in flight (fit's end, a collective) and unlocks
        the folder. With abandon (fit failed: the other localities may be
        gone) only waits for this locality's write: a checkpoint not yet
        committed stays uncommitted (removed at the next start)."""
        try:
            if abandon:
                self._pending = None
                try:
                    self._join()
                except Exception:  # the failure that ended fit is the one to report
                    pass
                return
            self._collect()
        finally:
            if self._thread is None:
                self.close()

    def _join(self):
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def _collect(self):
        """Commits the checkpoint in flight, if any: waits for this
        locality's shard to be written, gathers every locality's report
        (written or not, its bytes and SHA-256) to locality 0 in one
        collective, and locality 0 writes the manifest. A collective of the
        writing localities: every one has the same checkpoint in flight."""
        job, self._pending = self._pending, None
        if job is None:
            return
        error = None
        try:
            self._join()
        except BaseException as e:  # raised after the gather: the others are not left waiting
            error = e
        report = np.zeros(7, dtype=np.int64)
        if error is None and job["sha256"] is not None:
            report[:3] = (1, job["start"], len(job["data"]))
            report[3:] = np.frombuffer(job["sha256"], dtype=np.int64)
        reports = report[None]
        if self.n > 1:
            reports = np.asarray(_dist.gather(report, root=0))
        if error is not None:
            raise error
        if self.rank == 0:
            self._commit(job, reports.reshape(self.n, 7))

    def _write(self, job):
        try:
            self._write_shard(job)
        except BaseException as e:  # reported on the main thread, at the next boundary
            if isinstance(e, OSError):
                e = OSError(f"[{self.where}] locality {self.rank} could not write its shard of "
                            f"checkpoint ckpt-{job['step']} in {self.run}: "
                            f"{e.strerror or e}")
            self._error = e

    def _write_shard(self, job):
        name = f"ckpt-{job['step']}"
        try:
            os.mkdir(name, 0o755, dir_fd=self._run_fd)
        except FileExistsError:
            pass
        kind = _kind(name, self._run_fd)
        if kind != "folder":
            what = "a symbolic link" if kind == "link" else "not a folder"
            raise OSError(errno.ELOOP, f"{os.path.join(self.run, name)} is not a folder tessera "
                                       f"made ({what}): nothing was written through it")
        ck = _open_dir(name, self._run_fd)
        try:
            shard = f"shard-{self.rank:05d}-of-{self.n:05d}.bin"
            data = memoryview(job["data"])
            half = len(data) // 2
            _write_at(ck, shard, [data[:half], data[half:]], hook=_partial_write_hook)
            job["sha256"] = hashlib.sha256(data).digest()
        finally:
            os.close(ck)

    def _commit(self, job, reports):
        """Locality 0: the manifest, once every locality reported its shard
        written (reports: one row per locality: written, start, bytes, SHA-256
        as 4 words), to a temporary renamed into place: the commit."""
        name = f"ckpt-{job['step']}"
        path = os.path.join(self.run, name)
        failed = [r for r in range(self.n) if not reports[r, 0]]
        if failed:
            who = f"locality {failed[0]} could not write its shard (its error says why)" \
                if len(failed) == 1 else f"localities {', '.join(map(str, failed))} could not " \
                "write their shards (their errors say why)"
            raise RuntimeError(f"[{self.where}] checkpoint {path}: {who}; it was not committed")
        for r in range(self.n):
            lo, hi = _span(job["total"], self.n, r)
            if int(reports[r, 1]) != lo or int(reports[r, 2]) != hi - lo:
                raise RuntimeError(f"[{self.where}] checkpoint {path}: locality {r} reports "
                                   f"bytes [{int(reports[r, 1])}, +{int(reports[r, 2])}), "
                                   f"expected [{lo}, {hi}); not committed")
        training = job["training"]
        body = {"format": FORMAT, "version": VERSION, "step": job["step"],
                "epoch": training["epoch"], "batch": training["batch"], "localities": self.n,
                "total_bytes": job["total"], "tensors": job["entries"], "training": training,
                "shards": [{"file": f"shard-{r:05d}-of-{self.n:05d}.bin",
                            "start": int(reports[r, 1]), "bytes": int(reports[r, 2]),
                            "sha256": reports[r, 3:].tobytes().hex()} for r in range(self.n)],
                "run": self._expect["identity"], "history": job["history"],
                "first_iteration": self._first,
                "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            ck = _open_dir(name, self._run_fd)
            try:
                _write_at(ck, MANIFEST, [_sealed(body)])
                os.fsync(ck)
            finally:
                os.close(ck)
        except OSError as e:
            raise OSError(f"[{self.where}] could not commit checkpoint {path}: "
                          f"{e.strerror or e}") from None
        self.last_saved = path
        self._prune(job["step"])

    def _prune(self, newest):
        """Keeps the last `keep` committed checkpoints of the run; removes
        only folders tessera made, and in them only the files it names."""
        if self.keep is None:
            return
        done = sorted(s for s, kind in _steps_at(self._run_fd).items()
                      if s <= newest and kind == "folder"
                      and _kind(f"ckpt-{s}/{MANIFEST}", self._run_fd) == "other")
        for step in done[:-self.keep]:
            _remove_checkpoint(self._run_fd, f"ckpt-{step}")
