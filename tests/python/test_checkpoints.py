"""Checkpoint folders on one process: fit(checkpoint_dir=...), ModelCheckpoint
on a folder, TESSERA_CHECKPOINT_DIR, resuming bitwise after an interruption
at any point (also during a write), falling back past corrupted or
uncommitted checkpoints, keeping the last K, no temporaries left, and the
errors. The same on several localities and with `tessera run
--max-restarts`: tests/dist/ckpt_restart.py."""

import hashlib
import json
import os
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
    for k in sorted(m.weights):
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


def folders(d):
    return sorted(os.listdir(d), key=lambda s: int(s.split("-")[1]))


def no_temporaries(d):
    for root, _, files in os.walk(d):
        assert not [f for f in files if f.startswith(".tessera-")], root


@pytest.mark.parametrize("stop", [1, 5, 10, 21, 29])
def test_interrupted_and_resumed_bitwise(tmp_path, reference, stop):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(stop)])
    m = make()
    fit(m, checkpoint_dir=d)
    assert digest(m) == reference
    assert folders(d) == ["ckpt-24", "ckpt-28", "ckpt-30"]  # the last 3 (every 4 and each epoch)
    no_temporaries(d)
    again = make()  # a finished run's folder: resumes at the end, trains nothing
    fit(again, checkpoint_dir=d)
    assert digest(again) == reference


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
    assert not (d / "ckpt-12" / "manifest.json").exists()
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
    (d / "ckpt-12").mkdir()
    (d / "ckpt-12" / ".tessera-ckpt-host-999999-x").write_bytes(b"partial")
    (d / "ckpt-12" / "shard-00000-of-00001.bin").write_bytes(b"whole")
    m = make()
    fit(m, checkpoint_dir=d)
    assert digest(m) == reference
    no_temporaries(d)


def test_corrupted_shard_and_missing_manifest_fall_back(tmp_path, reference):
    d = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        fit(make(), checkpoint_dir=d, callbacks=[Stop(15)], keep_checkpoints=4)
    assert folders(d) == ["ckpt-4", "ckpt-8", "ckpt-10", "ckpt-12"]
    shard = d / "ckpt-12" / "shard-00000-of-00001.bin"
    blob = bytearray(shard.read_bytes())
    blob[7] ^= 0x40
    shard.write_bytes(bytes(blob))
    (d / "ckpt-10" / "manifest.json").unlink()
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
    path = d / "ckpt-8" / "manifest.json"
    doc = json.loads(path.read_text())
    doc["step"] = 7
    path.write_text(json.dumps(doc))
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
    m = make()
    m.fit(X, Y, epochs=3, deterministic=True, verbose=0, callbacks=[cb])
    assert digest(m) == reference
    # the launcher's variable: no change to the script
    monkeypatch.setenv("TESSERA_CHECKPOINT_DIR", str(tmp_path / "env"))
    with pytest.raises(KeyboardInterrupt):
        make().fit(X, Y, epochs=3, deterministic=True, verbose=0, callbacks=[Stop(11)])
    assert folders(tmp_path / "env") == ["ckpt-10"]
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
    for path in (d, d / "ckpt-8"):
        m = make()
        m.fit(X, Y, epochs=3, deterministic=True, verbose=0, resume_from=str(path))
        assert digest(m) == reference
    assert folders(d) == ["ckpt-8", "ckpt-10", "ckpt-12"]  # read, not changed


def test_no_checkpoint_yet_and_a_different_model(tmp_path):
    d = tmp_path / "ck"
    m = make()
    fit(m, checkpoint_dir=d)
    other = nn.Sequential([nn.Dense(5), nn.Dense(2, activation="softmax")], input_shape=(6,))
    other.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"\[fit\] .*ckpt-30: the weights do not match the "
                                         r"model: missing .*nothing was loaded"):
        other.fit(X, Y, epochs=1, verbose=0, checkpoint_dir=d)
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
                                      r"checkpoint ckpt-4 in .*ck: No space left on device"):
        fit(make(), checkpoint_dir=d)
    monkeypatch.setattr(checkpoints, "_partial_write_hook", None)
    no_temporaries(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = make()
        fit(m, checkpoint_dir=d)  # the uncommitted ckpt-4 is removed quietly
    assert m._iteration == 30
