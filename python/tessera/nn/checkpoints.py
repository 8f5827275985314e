"""Distributed checkpoints of the training state: every locality writes its
share in parallel, in a background thread while training goes on, and a
checkpoint counts only once locality 0 has committed its manifest.

    DIR/ckpt-<step>/shard-<r>-of-<N>.bin    bytes [r*T//N, (r+1)*T//N) of the state
    DIR/ckpt-<step>/shard-<r>-of-<N>.json   locality r's report: offset, size, SHA-256
    DIR/ckpt-<step>/manifest.json           the commit: written last, by locality 0

The state is the weights and the optimizer's tensors laid end to end (T
bytes, little-endian, C order; the manifest lists each tensor's name, dtype,
shape and offset) plus the training position (update count, epoch, batch,
the epoch's running sums, a learning rate set by a callback) in the
manifest. <step> is the update count. Any number of localities reads a
checkpoint: each reads every shard and checks it against the manifest.

Every file is written to a temporary in its folder, fsynced and renamed.
A folder without a manifest, or whose manifest or shards do not check
out, is not a checkpoint: locality 0 removes it (with a warning when it had a
manifest) before training starts, so the temporaries of killed writes go
with it. Only the last `keep` complete checkpoints are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
import warnings
import zlib

import numpy as np

from .. import distributed as _dist
from .callbacks import Callback
from .saving import DTYPES, apply_training_state, write_atomic

__all__ = ["CheckpointDir", "newest_checkpoint"]

FORMAT = "tessera-checkpoint"
VERSION = 1
MANIFEST = "manifest.json"
_FOLDER = re.compile(r"ckpt-([1-9]\d*)")
_TMP_PREFIX = ".tessera-ckpt-"

# Called by the writer thread half way through writing a shard, before the
# temporary is flushed and renamed: tests stop or kill the process there.
_partial_write_hook = None


def _timeout() -> float:
    try:
        return float(os.environ.get("TESSERA_COLLECTIVE_TIMEOUT", "300"))
    except ValueError:
        return 300.0


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sealed(body: dict) -> bytes:
    """The manifest as JSON with a SHA-256 of its other fields."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return json.dumps(dict(body, checksum=hashlib.sha256(text.encode()).hexdigest()),
                      sort_keys=True, indent=1, allow_nan=False).encode()


def _state_tensors(model) -> list:
    """(name, array) of the training state, in an order every locality agrees on."""
    out = list(model.weights.items())
    opt = model._opt_state or {}
    return out + [(f"optimizer/{k}", opt[k]) for k in sorted(opt)]


def _layout(tensors, where):
    entries, offset = [], 0
    for name, a in tensors:
        a = np.asarray(a)
        dt = str(a.dtype)
        if dt not in DTYPES:
            raise TypeError(f"[{where}] {name}: dtype {dt} cannot be checkpointed")
        nbytes = a.size * a.dtype.itemsize
        entries.append({"name": name, "dtype": dt, "shape": list(a.shape), "offset": offset,
                        "nbytes": nbytes})
        offset += nbytes
    return entries, offset


def _span(total: int, n: int, r: int):
    return r * total // n, (r + 1) * total // n


def _snapshot(tensors, entries, lo: int, hi: int) -> bytearray:
    """A copy of bytes [lo, hi) of the state laid end to end: only this
    locality's share is copied."""
    buf = bytearray(hi - lo)
    view = memoryview(buf)
    for (_, a), e in zip(tensors, entries):
        start, stop = max(lo, e["offset"]), min(hi, e["offset"] + e["nbytes"])
        if start >= stop:
            continue
        raw = np.ascontiguousarray(a).astype(DTYPES[e["dtype"]], copy=False).reshape(-1)
        raw = raw.view(np.uint8)
        view[start - lo:stop - lo] = raw[start - e["offset"]:stop - e["offset"]]
    return buf


def _steps_in(folder):
    """{step: path} of the ckpt-<step> folders in `folder`."""
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    out = {}
    for name in names:
        m = _FOLDER.fullmatch(name)
        if m and os.path.isdir(os.path.join(folder, name)):
            out[int(m.group(1))] = os.path.join(folder, name)
    return out


def read_manifest(path) -> dict:
    """The manifest of checkpoint folder `path`, checked; ValueError naming
    what is wrong otherwise."""
    file = os.path.join(path, MANIFEST)
    try:
        with open(file, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{file} is missing (the checkpoint was never committed)") from None
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{file} is unreadable ({type(e).__name__}: {str(e)[:120]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"{file} is not a {FORMAT} manifest of version {VERSION}")
    body = {k: v for k, v in doc.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    if hashlib.sha256(text.encode()).hexdigest() != doc.get("checksum"):
        raise ValueError(f"{file}: checksum mismatch (the manifest is corrupted)")
    shards, total = doc.get("shards"), doc.get("total_bytes")
    if not isinstance(shards, list) or not isinstance(total, int) or not shards or \
            not isinstance(doc.get("tensors"), list) or not isinstance(doc.get("training"), dict):
        raise ValueError(f"{file} is malformed (shards, total_bytes, tensors, training)")
    at = 0
    for s in shards:
        if not isinstance(s, dict) or s.get("start") != at or not isinstance(s.get("bytes"), int) \
                or not isinstance(s.get("file"), str) or "/" in s["file"]:
            raise ValueError(f"{file}: the shards do not cover the state in order")
        at += s["bytes"]
    if at != total:
        raise ValueError(f"{file}: the shards hold {at} bytes, the state {total}")
    return doc


def read_state(path, manifest) -> bytes:
    """The state's bytes from every shard of checkpoint `path`, each checked
    against the manifest's size and SHA-256."""
    parts = []
    for s in manifest["shards"]:
        file = os.path.join(path, s["file"])
        try:
            with open(file, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"shard {file} cannot be read ({e.strerror or e})") from None
        if len(data) != s["bytes"]:
            raise ValueError(f"shard {file} has {len(data)} bytes, the manifest says "
                             f"{s['bytes']}")
        if hashlib.sha256(data).hexdigest() != s.get("sha256"):
            raise ValueError(f"shard {file}: checksum mismatch (corrupted)")
        parts.append(data)
    return b"".join(parts)


def _tensors_from(manifest, data: bytes, file) -> dict:
    out = {}
    for e in manifest["tensors"]:
        try:
            dt, shape, off = e["dtype"], [int(d) for d in e["shape"]], int(e["offset"])
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            a = np.frombuffer(data, dtype=DTYPES[dt], count=count, offset=off)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{file}: the tensor entry {str(e)[:80]} is malformed ({err})") \
                from None
        out[e["name"]] = a.reshape(shape).astype(dt)
    return out


def newest_checkpoint(folder, remove_bad: bool = False, warn: bool = True):
    """(path, manifest, state bytes) of the newest complete, checksum-valid
    checkpoint in `folder`, or None. Folders that fail the checks are passed
    over with a warning (and removed with remove_bad, as are folders that
    were never committed)."""
    found = _steps_in(folder)
    chosen = None
    for step in sorted(found, reverse=True):
        path = found[step]
        committed = os.path.exists(os.path.join(path, MANIFEST))
        if not committed:
            if remove_bad:
                shutil.rmtree(path, ignore_errors=True)
            continue
        if chosen is not None:
            continue  # older ones are only looked at for uncommitted folders
        try:
            manifest = read_manifest(path)
            if manifest.get("step") != step:
                raise ValueError(f"its manifest is for step {manifest.get('step')}")
            data = read_state(path, manifest)
        except ValueError as e:
            if warn:
                warnings.warn(f"[checkpoint] {path} is not a valid checkpoint: {e}; "
                              f"{'removed it and ' if remove_bad else ''}falling back to the "
                              "previous one", RuntimeWarning, stacklevel=4)
            if remove_bad:
                shutil.rmtree(path, ignore_errors=True)
            continue
        chosen = (path, manifest, data)
        if not remove_bad:
            break
    return chosen


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
    """The checkpoints of one folder: on fit's start, finds the newest complete
    one and puts the training state back; then writes one every
    `every_steps` updates and/or at the end of every epoch, asynchronously,
    keeping the last `keep`. Made by fit(checkpoint_dir=...) or from a
    ModelCheckpoint(folder, save_training_state=True)."""

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
        self._abandon = threading.Event()
        self._last_step = None
        self._due = False
        self.n, self.rank, self.writes = 1, 0, True
        self.last_saved = None  # path of the newest checkpoint this run committed

    # ------------------------------------------------------------- reading

    def restore(self, model, n_ranks: int, rank: int):
        """Chooses the newest valid checkpoint (locality 0 decides and tells
        the others; it also removes uncommitted and invalid folders) and
        loads it into the model. The training state, or None when there is
        no checkpoint yet. A collective when n_ranks > 1."""
        self.n, self.rank = n_ranks, rank
        real_rank = _dist.rank() if _dist.size() > 1 else 0
        # data_parallel=False under several localities: only locality 0 writes
        self.writes = n_ranks > 1 or real_rank == 0
        found = None
        if self.writes and rank == 0:
            try:
                os.makedirs(self.folder, exist_ok=True)
            except OSError as e:
                raise OSError(f"[{self.where}] cannot create the checkpoint folder "
                              f"{self.folder}: {e.strerror or e}") from None
            found = newest_checkpoint(self.folder, remove_bad=True)
        nonce = int.from_bytes(os.urandom(6), "little")
        chosen = -1 if found is None else found[1]["step"]
        if n_ranks > 1:
            name = zlib.crc32(self.folder.encode())
            agreed = np.asarray(_dist.broadcast(np.array([chosen, nonce, name], dtype=np.int64)))
            chosen, nonce = int(agreed[0]), int(agreed[1])
            if int(agreed[2]) != name:
                raise ValueError(f"[{self.where}] locality {rank} writes its checkpoints to "
                                 f"{self.folder}, which is not locality 0's folder: every "
                                 "locality must name the same checkpoint folder")
        elif not self.writes:
            found = newest_checkpoint(self.folder, warn=False)
            chosen = -1 if found is None else found[1]["step"]
        self._nonce = nonce
        if chosen < 0:
            return None
        if found is None:
            path = os.path.join(self.folder, f"ckpt-{chosen}")
            try:
                manifest = read_manifest(path)
                found = (path, manifest, read_state(path, manifest))
            except ValueError as e:
                raise ValueError(f"[{self.where}] locality {rank}: the checkpoint {path} that "
                                 f"locality 0 chose does not check out here: {e} (is "
                                 f"{self.folder} the same shared folder on every host?)") \
                    from None
        path, manifest, data = found
        tensors = _tensors_from(manifest, data, os.path.join(path, MANIFEST))
        header = {"training": manifest["training"], "iteration": manifest["step"]}
        training = apply_training_state(model, tensors, header, path, self.where)
        self._last_step = manifest["step"]
        if self.verbose and rank == 0:
            n = manifest["localities"]
            print(f"[{self.where}] resuming from {path} (epoch {training['epoch'] + 1}, batch "
                  f"{training['batch']}, update {manifest['step']}; written by {n} "
                  f"localit{'y' if n == 1 else 'ies'})", flush=True)
        return training

    # ------------------------------------------------------------- writing

    def on_train_batch_end(self, batch, logs=None):
        if not self.every_steps or self.model._iteration % self.every_steps:
            return
        steps = self.params.get("steps")
        if steps is not None and batch + 1 >= steps:
            self._due = True  # written at the epoch's end, after its callbacks
        else:
            self.save(self.model)

    def on_epoch_end(self, epoch, logs=None):
        if self.every_epoch or self._due:
            self.save(self.model)
        self._due = False

    def on_train_end(self, logs=None):
        self.finish()

    def save(self, model):
        """Snapshots this locality's share of the state now and writes it in
        a background thread (after the previous checkpoint's write ended)."""
        step = model._iteration
        if not self.writes or step == self._last_step:
            return
        self._wait()
        tensors = _state_tensors(model)
        entries, total = _layout(tensors, self.where)
        lo, hi = _span(total, self.n, self.rank)
        job = {"step": step, "data": _snapshot(tensors, entries, lo, hi), "start": lo,
               "entries": entries, "total": total, "training": model._training_state()}
        self._last_step = step
        self._abandon.clear()
        self._thread = threading.Thread(target=self._write, args=(job,), daemon=True,
                                        name="tessera-checkpoint")
        self._thread.start()

    def finish(self, abandon: bool = False):
        """Waits for the write in flight (fit's end). With abandon (fit
        failed), locality 0 commits it only if every shard is already there."""
        if abandon:
            self._abandon.set()
            try:
                self._wait()
            except Exception:  # the failure that ended fit is the one to report
                pass
            return
        self._wait()

    def _wait(self):
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def _write(self, job):
        try:
            self._write_shard(job)
        except BaseException as e:  # reported on the main thread, at the next boundary
            if isinstance(e, OSError):
                e = OSError(f"[{self.where}] locality {self.rank} could not write its shard of "
                            f"checkpoint ckpt-{job['step']} in {self.folder}: "
                            f"{e.strerror or e}")
            self._error = e

    def _write_shard(self, job):
        path = os.path.join(self.folder, f"ckpt-{job['step']}")
        os.makedirs(path, exist_ok=True)
        name = f"shard-{self.rank:05d}-of-{self.n:05d}"
        data = memoryview(job["data"])
        half = len(data) // 2
        write_atomic(os.path.join(path, name + ".bin"), [data[:half], data[half:]],
                     prefix=_TMP_PREFIX, hook=_partial_write_hook)
        report = {"nonce": self._nonce, "rank": self.rank, "file": name + ".bin",
                  "start": job["start"], "bytes": len(data),
                  "sha256": hashlib.sha256(data).hexdigest()}
        # The report needs no fsync: it is written after the shard's fsync,
        # and one lost in a host crash only leaves the checkpoint uncommitted.
        write_atomic(os.path.join(path, name + ".json"), [json.dumps(report).encode()],
                     prefix=_TMP_PREFIX, durable=False)
        if self.rank == 0:
            self._commit(path, job)

    def _commit(self, path, job):
        """Locality 0: waits for every locality's report, then writes the manifest."""
        expected = [_span(job["total"], self.n, r) for r in range(self.n)]
        reports, delay = {}, 0.001
        deadline = time.monotonic() + _timeout()
        while True:
            for r in range(self.n):
                if r in reports:
                    continue
                file = os.path.join(path, f"shard-{r:05d}-of-{self.n:05d}.json")
                try:
                    with open(file, "rb") as f:
                        rep = json.loads(f.read().decode())
                except (OSError, ValueError):
                    continue
                if isinstance(rep, dict) and rep.get("nonce") == self._nonce:
                    lo, hi = expected[r]
                    if rep.get("start") != lo or rep.get("bytes") != hi - lo:
                        raise RuntimeError(f"[{self.where}] {file}: locality {r} reports bytes "
                                           f"[{rep.get('start')}, +{rep.get('bytes')}), "
                                           f"expected [{lo}, {hi}); not committed")
                    reports[r] = rep
            if len(reports) == self.n:
                break
            if self._abandon.is_set():
                return  # fit failed: an incomplete checkpoint is removed at the next start
            if time.monotonic() > deadline:
                missing = sorted(set(range(self.n)) - set(reports))
                raise RuntimeError(f"[{self.where}] checkpoint {path}: the shards of localities "
                                   f"{missing} were not reported written within "
                                   f"{_timeout():.0f} s (TESSERA_COLLECTIVE_TIMEOUT); it was not "
                                   "committed")
            self._abandon.wait(delay)
            delay = min(2 * delay, 0.01)
        training = job["training"]
        body = {"format": FORMAT, "version": VERSION, "step": job["step"],
                "epoch": training["epoch"], "batch": training["batch"], "localities": self.n,
                "total_bytes": job["total"], "tensors": job["entries"], "training": training,
                "shards": [{k: reports[r][k] for k in ("file", "start", "bytes", "sha256")}
                           for r in range(self.n)],
                "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_atomic(os.path.join(path, MANIFEST), [_sealed(body)], prefix=_TMP_PREFIX)
        _fsync_dir(path)
        self.last_saved = path
        self._prune(job["step"])

    def _prune(self, newest):
        """Keeps the last `keep` committed checkpoints. The manifest goes
        first, so a folder half removed is an uncommitted one."""
        if self.keep is None:
            return
        done = sorted(s for s, p in _steps_in(self.folder).items()
                      if s <= newest and os.path.exists(os.path.join(p, MANIFEST)))
        for step in done[:-self.keep]:
            path = os.path.join(self.folder, f"ckpt-{step}")
            try:
                os.unlink(os.path.join(path, MANIFEST))
            except OSError:
                pass
            shutil.rmtree(path, ignore_errors=True)
