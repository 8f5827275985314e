"""Checkpoint folders on one process: fit(checkpoint_dir=...), ModelCheckpoint
on a folder, TESSERA_CHECKPOINT_DIR, resuming bitwise after an interruption
at any point (also during a write), falling back past corrupted or
uncommitted checkpoints, keeping the last K, no temporaries left, and the
errors. The same on several localities and with `tessera run
--max-restarts`: tests/distributed/ckpt_restart.py."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tessera
from tessera import nn
from tessera.nn import checkpoints

rng = np.random.default_rng(1)
X = rng.normal(size=(320, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int64")


def make():
    m = nn.Sequential([nn.Dense(12, activation="relu"), nn.Dropout(0.2),
                       nn.Dense(2, activation="softmax")], input_shape=(6,), seed=0)
    m.compile(tessera.optim.Adam(tessera.optim.CosineDecay(1e-2, 100)),
              "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def digest(m):
    h = hashlib.sha256()
    for k in sorted(m.weights.keys()):
        h.update(np.ascontiguousarray(m.weights[k]).tobytes())
    for k in sorted(m._opt_state):
        h.update(np.ascontiguousarray(m._opt_state[k]).tobytes())
    return h.hexdigest()


class Stop(nn.callbacks.Callback):
    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_train_batch_begin(self, batch, logs=None):
        if self.model._iteration == self.at:
            raise KeyboardInterrupt


def fit(m, **kw):
    kw.setdefault("checkpoint_every", [4, "epoch"])
    return m.fit(X, Y, epochs=3, deterministic=True, verbose=0, **kw)


@pytest.fixture(scope="module")
def reference():
    m = make()
    m.fit(X, Y, epochs=3, deterministic=True, verbose=0)
    return digest(m)


def relaunch():
    """What a new process of the same script starts with: no fit called yet
    (a fit resumes only the run of the same script, fit call, model and data)."""
    getattr(checkpoints, "_fit_counts", {}).clear()


def run_dir(d):
    """The folder of d's only run (the ckpt-<step> folders are in it)."""
    runs = [p for p in d.iterdir() if p.is_dir() and not p.is_symlink()]
    if any(p.name.startswith("ckpt-") for p in runs):
        return d
    assert len(runs) == 1, runs
    return runs[0]


def folders(d):
    names = [n for n in os.listdir(run_dir(d)) if n.startswith("ckpt-")]
    return sorted(names, key=lambda s: int(s.split("-")[1]))


def no_temporaries(d):
    for root, _, files in os.walk(d):
        assert not [f for f in files if f.startswith(".tessera-")], root


@pytest.mark.parametrize("stop", [1, 5, 10, 21, 29])
def test_interrupted_and_resumed_bitwise(tmp_path, reference, stop):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(stop)])
    relaunch()
    m = make()
    h = fit(m, checkpoint_dir=d)
    assert digest(m) == reference
    assert folders(d) == ["ckpt-24", "ckpt-28", "ckpt-30"]  # the last 3 (every 4 and each epoch)
    assert h.epoch == [0, 1, 2] and len(h.history["loss"]) == 3  # resumed epochs included
    no_temporaries(d)
    relaunch()
    again = make()  # a finished run: resumes at its end, with its history
    h2 = fit(again, checkpoint_dir=d)
    assert digest(again) == reference and h2.history["loss"] == h.history["loss"]


def test_killed_during_a_write(tmp_path, reference, monkeypatch):
    d = tmp_path / "ck"

    def die():
        raise SystemExit("killed half way through a shard")

    m = make()
    monkeypatch.setattr(checkpoints, "_partial_write_hook", None)

    class Arm(nn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.model._iteration == 12:
                checkpoints._partial_write_hook = die

    with pytest.raises(SystemExit):
        fit(m, checkpoint_dir=d, callbacks=[Arm()])
    checkpoints._partial_write_hook = None
    assert not (run_dir(d) / "ckpt-12" / "manifest.json").exists()
    relaunch()
    m = make()
    fit(m, checkpoint_dir=d)
    assert digest(m) == reference
    no_temporaries(d)


def test_a_kill_leaves_temporaries_that_the_next_start_removes(tmp_path, reference):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(9)])
    # what SIGKILL half way through writing ckpt-12 leaves: a temporary of a
    # process that is gone, a shard and its report, no manifest
    run = run_dir(d)
    (run / "ckpt-12").mkdir()
    (run / "ckpt-12" / ".tessera-ckpt-host-999999-x").write_bytes(b"partial")
    (run / "ckpt-12" / "shard-00000-of-00001.bin").write_bytes(b"whole")
    relaunch()
    m = make()
    fit(m, checkpoint_dir=d)
    assert digest(m) == reference
    no_temporaries(d)


def test_corrupted_shard_and_missing_manifest_fall_back(tmp_path, reference):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(15)], keep_checkpoints=4)
    assert folders(d) == ["ckpt-4", "ckpt-8", "ckpt-10", "ckpt-12"]
    shard = run_dir(d) / "ckpt-12" / "shard-00000-of-00001.bin"
    blob = bytearray(shard.read_bytes())
    blob[7] ^= 0x40
    shard.write_bytes(bytes(blob))
    (run_dir(d) / "ckpt-10" / "manifest.json").unlink()
    relaunch()
    with pytest.warns(RuntimeWarning, match=r"ckpt-12 is not a valid checkpoint: shard .*"
                      r"shard-00000-of-00001.bin: checksum mismatch \(corrupted\); removed it"):
        m = make()
        fit(m, checkpoint_dir=d, keep_checkpoints=4)
    assert digest(m) == reference
    assert folders(d) == ["ckpt-20", "ckpt-24", "ckpt-28", "ckpt-30"]


def test_corrupted_manifest_is_passed_over(tmp_path, reference):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(9)])
    path = run_dir(d) / "ckpt-8" / "manifest.json"
    doc = json.loads(path.read_text())
    doc["step"] = 7
    path.write_text(json.dumps(doc))
    relaunch()
    with pytest.warns(RuntimeWarning, match="ckpt-8.*manifest.json: checksum mismatch"):
        m = make()
        fit(m, checkpoint_dir=d)
    assert digest(m) == reference


def test_model_checkpoint_on_a_folder_and_the_environment(tmp_path, reference, monkeypatch):
    d = tmp_path / "mc"
    cb = nn.callbacks.ModelCheckpoint(str(d), save_training_state=True, save_freq=5,
                                      keep_checkpoints=2)
    with pytest.raises(KeyboardInterrupt):
        make().fit(X, Y, epochs=3, deterministic=True, verbose=0, callbacks=[cb, Stop(17)])
    assert folders(d) == ["ckpt-10", "ckpt-15"]
    relaunch()
    m = make()
    m.fit(X, Y, epochs=3, deterministic=True, verbose=0, callbacks=[cb])
    assert digest(m) == reference
    # the launcher's variable: no change to the script
    monkeypatch.setenv("TESSERA_CHECKPOINT_DIR", str(tmp_path / "env"))
    with pytest.raises(KeyboardInterrupt):
        make().fit(X, Y, epochs=3, deterministic=True, verbose=0, callbacks=[Stop(11)])
    assert folders(tmp_path / "env") == ["ckpt-10"]
    relaunch()
    m = make()
    m.fit(X, Y, epochs=3, deterministic=True, verbose=0)
    assert digest(m) == reference
    m = make()  # checkpoint_dir=False: the variable is ignored
    m.fit(X, Y, epochs=1, deterministic=True, verbose=0, checkpoint_dir=False)
    assert m._iteration == 10


def test_resume_from_a_folder(tmp_path, reference):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(14)])
    for path in (d, run_dir(d), run_dir(d) / "ckpt-8"):
        m = make()
        m.fit(X, Y, epochs=3, deterministic=True, verbose=0, resume_from=str(path))
        assert digest(m) == reference
    assert folders(d) == ["ckpt-8", "ckpt-10", "ckpt-12"]  # read, not changed


def test_no_checkpoint_yet_and_a_different_model(tmp_path):
    d = tmp_path / "ck"
    m = make()
    fit(m, checkpoint_dir=d)
    relaunch()
    # another model (or other data) is another run: it trains, beside the first
    other = nn.Sequential([nn.Dense(5), nn.Dense(2, activation="softmax")], input_shape=(6,))
    other.compile("adam", "sparse_categorical_crossentropy")
    h = other.fit(X, Y, epochs=1, verbose=0, checkpoint_dir=d)
    assert len(h.history["loss"]) == 1 and other._iteration == 10
    assert len([p for p in d.iterdir() if p.is_dir()]) == 2
    with pytest.raises(FileNotFoundError, match=r"\[resume_from\] .* holds no complete checkpoint"):
        make().fit(X, Y, epochs=1, verbose=0, resume_from=str(tmp_path))


def test_errors(tmp_path):
    m = make()
    with pytest.raises(ValueError, match=r"\[fit\] checkpoint_every must be 'epoch', a positive "
                                         r"number of updates, or a list of both, got 0"):
        m.fit(X, Y, verbose=0, checkpoint_dir=tmp_path, checkpoint_every=0)
    with pytest.raises(ValueError, match=r"\[fit\] keep_checkpoints must be a positive int or "
                                         r"None \(keep all\), got 0"):
        m.fit(X, Y, verbose=0, checkpoint_dir=tmp_path, keep_checkpoints=0)
    with pytest.raises(ValueError, match="both name a checkpoint folder"):
        m.fit(X, Y, verbose=0, checkpoint_dir=tmp_path / "a", callbacks=[
            nn.callbacks.ModelCheckpoint(str(tmp_path / "b"), save_training_state=True)])
    with pytest.raises(ValueError, match=r"\[ModelCheckpoint\] .* is a checkpoint folder"):
        nn.callbacks.ModelCheckpoint(str(tmp_path / "b"), save_training_state=True,
                                     save_best_only=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match=r"\[fit\] cannot create the checkpoint folder .*file"):
        m.fit(X, Y, verbose=0, checkpoint_dir=tmp_path / "file")


def test_a_failed_write_is_reported(tmp_path, monkeypatch):
    d = tmp_path / "ck"

    def full():
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoints, "_partial_write_hook", full)
    with pytest.raises(OSError, match=r"\[fit\] locality 0 could not write its shard of "
                                      r"checkpoint ckpt-4 in .*ck/fit1-local-[0-9a-f]{12}: "
                                      r"No space left on device"):
        fit(make(), checkpoint_dir=d)
    monkeypatch.setattr(checkpoints, "_partial_write_hook", None)
    no_temporaries(d)
    relaunch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = make()
        fit(m, checkpoint_dir=d)  # the uncommitted ckpt-4 is removed quietly
    assert m._iteration == 30


# ---------------------------------------------------------------- runs (issue 27)

def ckpt(d, step):
    return run_dir(d) / f"ckpt-{step}"


def reseal(path, change):
    """Changes the manifest of checkpoint folder `path` and recomputes its
    SHA-256, as anyone who can write to the folder can."""
    doc = json.loads((path / "manifest.json").read_text())
    change(doc)
    body = {k: v for k, v in doc.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    doc["checksum"] = hashlib.sha256(text.encode()).hexdigest()
    (path / "manifest.json").write_text(json.dumps(doc))


def test_every_fit_of_a_script_is_its_own_run(tmp_path, monkeypatch):
    """A 3-fold cross-validation with the launcher's folder: every fold
    trains its epochs (each fit its own run), as without checkpoints."""
    folds = np.array_split(np.arange(len(X)), 3)

    def cross_validate():
        out = []
        for k in range(3):
            train = np.concatenate([f for j, f in enumerate(folds) if j != k])
            m = make()
            before = [w.copy() for w in m.get_weights()]
            h = m.fit(X[train], Y[train], epochs=2, deterministic=True, verbose=0)
            assert h.epoch == [0, 1] and len(h.history["loss"]) == 2, (k, h.history)
            assert not any(np.array_equal(a, b) for a, b in zip(before, m.get_weights()))
            out.append((digest(m), h.history["loss"]))
        return out

    expected = cross_validate()
    monkeypatch.setenv("TESSERA_CHECKPOINT_DIR", str(tmp_path / "ck"))
    assert cross_validate() == expected
    assert len([p for p in (tmp_path / "ck").iterdir() if p.is_dir()]) == 3
    relaunch()  # a relaunch resumes each fold's finished run: the same results
    assert cross_validate() == expected


def test_a_loop_of_fit_epochs_1(tmp_path):
    """fit(epochs=1) in a loop on one model, interrupted in the third fit and
    relaunched: every fit trains its epoch; the relaunch resumes each one's
    own run (history included) and ends bitwise as without checkpoints."""
    d = tmp_path / "ck"

    def loop(checkpoint_dir, stop=None):
        m, losses = make(), []
        for _ in range(3):
            h = m.fit(X, Y, epochs=1, deterministic=True, verbose=0, checkpoint_every=[4, "epoch"],
                      checkpoint_dir=checkpoint_dir, callbacks=[Stop(stop)] if stop else None)
            losses.append(h.history["loss"])
        return digest(m), m._iteration, losses

    expected = loop(False)
    assert expected[1] == 30
    with pytest.raises(KeyboardInterrupt):
        loop(d, stop=25)
    relaunch()
    assert loop(d) == expected


FORGED = {
    "epoch past the fit's epochs": lambda m: (m.update(epoch=10**18),
                                              m["training"].update(epoch=10**18)),
    "epoch of the wrong type": lambda m: m.update(epoch="0"),
    "batch past the epoch's steps": lambda m: (m.update(batch=50),
                                               m["training"].update(batch=50)),
    "update count not the step": lambda m: m["training"].update(iteration=3),
    "tensor shape": lambda m: m["tensors"][0].update(shape=[10**6, 10**6]),
    "tensor dtype": lambda m: m["tensors"][0].update(dtype="object"),
    "learning rate": lambda m: m["training"].update(lr_override="fast"),
    "running loss": lambda m: m["training"]["acc"].update(loss=None),
    "metric sums": lambda m: m["training"]["acc"].update(totals=[[1.0] * 50]),
    "seed": lambda m: m["training"].update(seed=0.5),
    "localities": lambda m: m.update(localities="1"),
    "an unknown field": lambda m: m.update(surprise=1),
}


@pytest.mark.parametrize("value", [{}, [], None, 7])
def test_a_forged_field_of_any_type_is_a_defect_not_a_crash(tmp_path, value):
    """Read without a fit's expectations (the readers the fuzz target calls):
    a tensor entry's dtype of an unhashable or other type is "not a valid
    checkpoint", never a TypeError (found by fuzz_weights)."""
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(5)])
    reseal(ckpt(d, 4), lambda m: m["tensors"][0].update(dtype=value))
    with pytest.raises(ValueError, match=r"manifest.json: the tensor entry .* is malformed"):
        checkpoints.read_manifest(ckpt(d, 4))
    with pytest.warns(RuntimeWarning, match=r"ckpt-4 is not a valid checkpoint"):
        assert checkpoints.newest_checkpoint(run_dir(d)) is None


@pytest.mark.parametrize("forgery", sorted(FORGED))
def test_a_forged_manifest_falls_back_to_the_previous_checkpoint(tmp_path, reference, forgery):
    """A manifest whose checksum was recomputed after a change: the whole
    manifest is checked (types and ranges) before a checkpoint is chosen."""
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(9)])
    assert folders(d) == ["ckpt-4", "ckpt-8"]
    reseal(ckpt(d, 8), FORGED[forgery])
    relaunch()
    with pytest.warns(RuntimeWarning, match=r"ckpt-8 is not a valid checkpoint: .*falling back"):
        m = make()
        h = fit(m, checkpoint_dir=d)
    assert digest(m) == reference and len(h.history["loss"]) == 3


def test_a_symlinked_checkpoint_folder_is_neither_read_nor_written_nor_removed(tmp_path,
                                                                              reference):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(9)])
    # a folder elsewhere holding a checkpoint that checks out, planted as ckpt-9
    victim = tmp_path / "victim"
    shutil.copytree(ckpt(d, 8), victim)
    reseal(victim, lambda m: (m.update(step=9), m["training"].update(iteration=9)))
    before = {p.name: p.read_bytes() for p in victim.iterdir()}
    (run_dir(d) / "ckpt-9").symlink_to(victim)
    relaunch()
    with pytest.warns(RuntimeWarning) as seen:
        m = make()
        fit(m, checkpoint_dir=d)
    text = " ".join(str(w.message) for w in seen)
    assert "ckpt-9 is a symbolic link" in text and "removed" not in text, text
    assert digest(m) == reference  # resumed from ckpt-8, not through the link
    assert (run_dir(d) / "ckpt-9").is_symlink()
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before
    # a link where a checkpoint is to be written: an error, nothing written through
    d2 = tmp_path / "ck2"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d2, callbacks=[Stop(9)])
    (run_dir(d2) / "ckpt-12").symlink_to(victim)
    relaunch()
    with pytest.warns(RuntimeWarning, match="ckpt-12 is a symbolic link"), \
            pytest.raises(OSError, match=r"\[fit\] .*ckpt-12 is not a folder tessera made \(a "
                                         r"symbolic link\): nothing was written through it"):
        fit(make(), checkpoint_dir=d2)
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before


@pytest.mark.parametrize("kind", ["symlink", "fifo", "devzero", "longer"])
def test_a_shard_that_is_not_the_regular_file_of_its_size(tmp_path, reference, kind):
    """A shard replaced by a link (to a copy, or to /dev/zero), a FIFO or a
    longer file: not read (no hang, no unbounded read); the previous
    checkpoint is used."""
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(9)])
    shard = ckpt(d, 8) / "shard-00000-of-00001.bin"
    copy = tmp_path / "copy.bin"
    shutil.copy(shard, copy)
    shard.unlink()
    if kind == "symlink":
        shard.symlink_to(copy)
    elif kind == "fifo":
        os.mkfifo(shard)
    elif kind == "devzero":
        shard.symlink_to("/dev/zero")
    else:
        shard.write_bytes(copy.read_bytes() + b"\0" * 4096)
    relaunch()
    with pytest.warns(RuntimeWarning, match=r"ckpt-8 is not a valid checkpoint: shard .*"
                                            r"shard-00000-of-00001.bin"):
        m = make()
        fit(m, checkpoint_dir=d)
    assert digest(m) == reference
    assert copy.stat().st_size > 0


HOLD_LOCK = """
import fcntl, json, os, socket, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode())
print("held", flush=True)
time.sleep(120)
"""


def test_one_job_per_folder(tmp_path):
    """A folder locked by a live job is an error naming its host and pid; the
    lock of a job that died is taken over."""
    d = tmp_path / "ck"
    d.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(d / "tessera.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RuntimeError, match=rf"\[fit\] the checkpoint folder .*ck is in use "
                                               rf"by another job: host {socket.gethostname()}, "
                                               rf"pid {holder.pid} .*tessera.lock"):
            make().fit(X, Y, epochs=1, verbose=0, checkpoint_dir=d)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert f'"pid": {holder.pid}' in (d / "tessera.lock").read_text()  # left by the dead job
    m = make()
    h = m.fit(X, Y, epochs=1, verbose=0, checkpoint_dir=d)
    assert len(h.history["loss"]) == 1 and m._iteration == 10


class Count(nn.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


def test_another_launch_starts_a_run_beside_the_old_one(tmp_path, reference, monkeypatch):
    """A new `tessera run` (a new TESSERA_RUN_ID) never resumes an earlier
    launch's checkpoints: it trains from the start in a run folder of its
    own and leaves the other run alone; given the old id, it resumes it."""
    d = tmp_path / "ck"
    monkeypatch.setenv("TESSERA_RUN_ID", "launchA")
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(15)])
    old = run_dir(d)
    before = {p.name: p.stat().st_mtime_ns for p in old.rglob("*")}
    relaunch()
    monkeypatch.setenv("TESSERA_RUN_ID", "launchB")
    m, count = make(), Count()
    with pytest.warns(RuntimeWarning, match=r"holds checkpoints of fit call 1 of other launches "
                                            r"\(run ids launchA\); this launch \(run id launchB\) "
                                            r"trains a run of its own from the start\. To continue "
                                            r"one of them, launch with TESSERA_RUN_ID=<its id>"):
        fit(m, checkpoint_dir=d, callbacks=[count])
    assert count.batches == 30 and digest(m) == reference  # all of it, from the start
    runs = sorted(p.name for p in d.iterdir() if p.is_dir())
    assert len(runs) == 2 and "-launchA-" in runs[0] and "-launchB-" in runs[1], runs
    assert {p.name: p.stat().st_mtime_ns for p in old.rglob("*")} == before
    relaunch()
    monkeypatch.setenv("TESSERA_RUN_ID", "launchA")
    m, count = make(), Count()
    fit(m, checkpoint_dir=d, callbacks=[count])
    assert count.batches == 30 - 12 and digest(m) == reference  # resumed at update 12
    monkeypatch.setenv("TESSERA_RUN_ID", "no/such id")
    with pytest.raises(ValueError, match=r"\[fit\] TESSERA_RUN_ID must be 1 to 64 letters, "
                                         r"digits, '_' or '.', got 'no/such id' \(environment\)"):
        fit(make(), checkpoint_dir=d)
