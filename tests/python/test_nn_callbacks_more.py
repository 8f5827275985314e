"""The callbacks issue 30 asks for: TensorBoard (event files decoded back by
tessera's reader and by TensorBoard's own EventAccumulator), BackupAndRestore
(an interrupted fit resumes at the right epoch and ends where an
uninterrupted one ends) and ProgbarLogger."""

import glob
import os
import struct

import numpy as np
import pytest

import tessera.nn as nn
from tessera.nn import _tfevents as T

RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 3)).astype(np.float32)
Y = X @ np.array([[1.0], [2.0], [3.0]], np.float32)


def _model(weights=None):
    m = nn.Sequential([nn.Input((3,)), nn.Dense(4, activation="tanh"), nn.Dense(1)])
    m.compile("adam", "mse", metrics=["mae"])
    if weights is not None:
        m.set_weights(weights)
    return m


def _events(folder):
    files = glob.glob(os.path.join(folder, "events.out.tfevents.*"))
    assert len(files) == 1
    return T.read_events(files[0])


# ----------------------------------------------------------------- tensorboard

def test_crc32c_and_record_framing():
    assert T.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert T.crc32c(b"") == 0
    data = T.encode_event(1.5, 7, scalars={"a": 2.0})
    rec = T.record(data)
    assert struct.unpack("<Q", rec[:8])[0] == len(data) and rec[12:-4] == data
    ev = T.decode_event(data)
    assert ev == {"wall_time": 1.5, "step": 7, "scalars": {"a": 2.0}}


def test_tensorboard_epoch_and_batch_scalars(tmp_path):
    tb = nn.callbacks.TensorBoard(tmp_path, update_freq=2, write_steps_per_second=True)
    hist = _model().fit(X, Y, epochs=3, batch_size=16, verbose=0, validation_split=0.25,
                        callbacks=[tb])
    train = _events(tmp_path / "train")
    assert train[0]["file_version"] == "brain.Event:2"
    epochs = [e for e in train if "epoch_loss" in e.get("scalars", {})]
    assert [e["step"] for e in epochs] == [0, 1, 2]
    np.testing.assert_allclose([e["scalars"]["epoch_loss"] for e in epochs],
                               hist.history["loss"], rtol=1e-6)
    np.testing.assert_allclose([e["scalars"]["epoch_mae"] for e in epochs],
                               hist.history["mae"], rtol=1e-6)
    assert all(e["scalars"]["epoch_steps_per_second"] > 0 for e in epochs)
    batches = [e for e in train if "batch_loss" in e.get("scalars", {})]
    assert [e["step"] for e in batches] == [2, 4, 6, 8]  # 3 batches an epoch, every 2nd step
    val = [e for e in _events(tmp_path / "validation") if "scalars" in e]
    np.testing.assert_allclose([e["scalars"]["epoch_loss"] for e in val
                                if "epoch_loss" in e["scalars"]],
                               hist.history["val_loss"], rtol=1e-6)
    assert all(not k.startswith("val_") for e in val for k in e["scalars"])


def test_tensorboard_files_read_by_tensorboard(tmp_path):
    # TensorBoard itself (PyPI `tensorboard`, a test oracle installed by
    # scripts/install-deps) reads the files.
    from tensorboard.backend.event_processing.event_accumulator import (  # noqa: PLC0415
        EventAccumulator)

    hist = _model().fit(X, Y, epochs=2, batch_size=32, verbose=0, validation_data=(X, Y),
                        callbacks=[nn.callbacks.TensorBoard(str(tmp_path), update_freq="batch")])
    ea = EventAccumulator(str(tmp_path / "train"))
    ea.Reload()
    assert {"epoch_loss", "epoch_mae", "batch_loss", "batch_mae"} <= set(ea.Tags()["scalars"])
    got = ea.Scalars("epoch_loss")
    assert [s.step for s in got] == [0, 1]
    np.testing.assert_allclose([s.value for s in got], hist.history["loss"], rtol=1e-6)
    assert [s.step for s in ea.Scalars("batch_loss")] == [1, 2, 3, 4]
    ev = EventAccumulator(str(tmp_path / "validation"))
    ev.Reload()
    np.testing.assert_allclose([s.value for s in ev.Scalars("epoch_loss")],
                               hist.history["val_loss"], rtol=1e-6)


def test_tensorboard_evaluate_alone(tmp_path):
    m = _model()
    loss = m.evaluate(X, Y, verbose=0, callbacks=[nn.callbacks.TensorBoard(tmp_path)])[0]
    (ev,) = [e for e in _events(tmp_path / "validation") if "scalars" in e]
    assert ev["scalars"]["evaluation_loss_vs_iterations"] == pytest.approx(loss, rel=1e-6)


def test_event_reader_refuses_corrupt_files(tmp_path):
    m = _model()
    m.fit(X, Y, epochs=1, batch_size=32, verbose=0,
          callbacks=[nn.callbacks.TensorBoard(tmp_path)])
    (path,) = glob.glob(str(tmp_path / "train" / "events.*"))
    good = open(path, "rb").read()
    bad = bytearray(good)
    bad[-6] ^= 0xFF  # inside the last record's data
    p = tmp_path / "bad"
    p.write_bytes(bytes(bad))
    with pytest.raises(ValueError, match=r"data checksum of the record at offset \d+"):
        T.read_events(p)
    p.write_bytes(good[:-3])  # a writer still writing: the last record is skipped
    assert len(T.read_events(p)) == len(T.read_events(path)) - 1
    header = struct.pack("<Q", 1 << 40)
    p.write_bytes(header + struct.pack("<I", T.masked_crc32c(header)) + b"x" * 8)
    with pytest.raises(ValueError, match="claims 1099511627776 bytes"):
        T.read_events(p)
    os.symlink(path, tmp_path / "link")
    with pytest.raises(OSError):
        T.read_events(tmp_path / "link")


def test_tensorboard_bad_update_freq():
    # (the other arguments: test_nn_tensorboard.py)
    with pytest.raises(ValueError, match="update_freq"):
        nn.callbacks.TensorBoard(update_freq=0)


# ----------------------------------------------------------------- backup and restore

class _Crash(nn.callbacks.Callback):
    def __init__(self, epoch, batch=None):
        super().__init__()
        self.epoch, self.batch, self.now = epoch, batch, None

    def on_epoch_begin(self, epoch, logs=None):
        self.now = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.batch is not None and self.now == self.epoch and batch == self.batch:
            raise KeyboardInterrupt("killed")

    def on_epoch_end(self, epoch, logs=None):
        if self.batch is None and epoch == self.epoch:
            raise KeyboardInterrupt("killed")


@pytest.mark.parametrize("save_freq,crash", [("epoch", (1, None)), (2, (2, 2))])
def test_backup_and_restore_resumes_where_it_stopped(tmp_path, save_freq, crash):
    w0 = _model().get_weights()
    ref = _model(w0)
    ref_hist = ref.fit(X, Y, epochs=4, batch_size=16, verbose=0, seed=3)

    m = _model(w0)
    backup = nn.callbacks.BackupAndRestore(tmp_path / "bk", save_freq=save_freq)
    with pytest.raises(KeyboardInterrupt):
        m.fit(X, Y, epochs=4, batch_size=16, verbose=0, seed=3,
              callbacks=[backup, _Crash(*crash)])
    assert os.listdir(tmp_path / "bk") == ["backup.tsm"]

    again = _model()  # a fresh process would build a new model
    begun = []
    hist = again.fit(X, Y, epochs=4, batch_size=16, verbose=0, seed=3, callbacks=[
        backup, nn.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: begun.append(e))])
    assert begun == [2, 3]  # after epoch 1, or in epoch 2 after its batch 1
    for a, b in zip(again.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hist.history["loss"][-1], ref_hist.history["loss"][-1],
                               rtol=1e-5)
    assert os.listdir(tmp_path / "bk") == []  # delete_checkpoint


def test_backup_kept_double_and_errors(tmp_path):
    bk = nn.callbacks.BackupAndRestore(tmp_path, double_checkpoint=True, delete_checkpoint=False)
    _model().fit(X, Y, epochs=2, batch_size=32, verbose=0, callbacks=[bk])
    assert sorted(os.listdir(tmp_path)) == ["backup-previous.tsm", "backup.tsm"]
    with open(tmp_path / "backup.tsm", "r+b") as f:  # the newest is damaged
        f.seek(40)
        f.write(b"\xff" * 8)
    assert bk._restore_path() == str(tmp_path / "backup-previous.tsm")
    begun = []
    _model().fit(X, Y, epochs=3, batch_size=32, verbose=0, callbacks=[
        bk, nn.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: begun.append(e))])
    assert begun == [1, 2]  # the previous backup was made after epoch 0
    with pytest.raises(ValueError, match="save_freq"):
        nn.callbacks.BackupAndRestore(tmp_path, save_freq=0)
    os.makedirs(tmp_path / "l")
    os.symlink(tmp_path / "backup.tsm", tmp_path / "l" / "backup.tsm")
    with pytest.raises(ValueError, match="not a regular file"):
        nn.callbacks.BackupAndRestore(tmp_path / "l")._restore_path()


# ----------------------------------------------------------------- progbar

def test_progbar_logger_replaces_fit_printing(capsys):
    _model().fit(X, Y, epochs=2, batch_size=16, verbose=1,
                 callbacks=[nn.callbacks.ProgbarLogger()])
    out = capsys.readouterr().out
    assert "Epoch 1/2" in out and "Epoch 2/2" in out and "4/4 [" in out and "loss: " in out
    assert "Epoch 1/2 - loss" not in out  # fit's own line is not printed too
    _model().fit(X, Y, epochs=1, batch_size=16, verbose=0,
                 callbacks=[nn.callbacks.ProgbarLogger()])
    assert capsys.readouterr().out == ""
