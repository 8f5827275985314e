"""tessera.nn.callbacks: Keras's callbacks for fit, with Keras's names,
arguments and behaviour, and the base class for your own.

    class Printer(nn.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            print(epoch, logs["loss"])

    model.fit(x, y, epochs=50, validation_split=0.1, callbacks=[
        nn.callbacks.EarlyStopping(patience=3, restore_best_weights=True),
        nn.callbacks.ModelCheckpoint("best.tsm", save_best_only=True),
        Printer()])
"""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
import time
import warnings

import numpy as np

from .. import distributed
from . import tensorboard_logs as tb
from ._tfevents import EventFileWriter
from .checkpoint_layout import split_weight
from .symbolic import user_location
from .utils import Progbar
from .weights_file import read_file

__all__ = ["Callback", "CallbackList", "EarlyStopping", "ModelCheckpoint", "LearningRateScheduler",
           "ReduceLROnPlateau", "CSVLogger", "TerminateOnNaN", "LambdaCallback", "History",
           "ProgbarLogger", "BackupAndRestore", "TensorBoard", "SwapEMAWeights"]


class Callback:
    """Base class: override any of the hooks. `self.model` is the model being
    trained and `self.params` holds epochs, steps and verbose."""

    def __init__(self):
        self.model = None
        self.params: dict = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None): pass
    def on_train_end(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass
    def on_train_batch_begin(self, batch, logs=None): pass
    def on_train_batch_end(self, batch, logs=None): pass

    # evaluate (and fit's validation) and predict, as Keras calls them
    def on_test_begin(self, logs=None): pass
    def on_test_end(self, logs=None): pass
    def on_test_batch_begin(self, batch, logs=None): pass
    def on_test_batch_end(self, batch, logs=None): pass
    def on_predict_begin(self, logs=None): pass
    def on_predict_end(self, logs=None): pass
    def on_predict_batch_begin(self, batch, logs=None): pass
    def on_predict_batch_end(self, batch, logs=None): pass

    # Keras's older names of the batch hooks.
    def on_batch_begin(self, batch, logs=None): pass
    def on_batch_end(self, batch, logs=None): pass


class History:
    """Per-epoch logs of a fit: `history["loss"]`, `["accuracy"]`,
    `["val_loss"]`, `["val_accuracy"]`, ... (the epoch logs, as Keras's);
    `epoch` lists the epochs run."""

    def __init__(self):
        self.history: dict = {}
        self.epoch: list = []
        self.params: dict = {}
        self.model = None

    def _add(self, epoch: int, logs: dict):
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)


def _keras_logs(logs) -> dict:
    """The logs a hook gets: {} for None; else the same dict, its keys sorted in place (what
    a callback adds, as ReduceLROnPlateau's learning_rate, reaches the History after it)."""
    if logs is None:
        return {}
    if isinstance(logs, dict) and all(isinstance(k, str) for k in logs) and \
            list(logs) != sorted(logs):
        items = sorted(logs.items())
        logs.clear()
        logs.update(items)
    return logs


class CallbackList:
    """Calls every callback's hook in order. As Keras's, a hook given no
    logs gets an empty dict, never None, and the logs' keys in sorted order
    (Keras's pythonify_logs: `history.history` lists "accuracy" before "loss")."""

    def __init__(self, callbacks, history=None, model=None, params=None, where="fit"):
        callbacks = [] if callbacks is None else list(callbacks)
        for c in callbacks:
            if not isinstance(c, Callback):
                raise TypeError(f"[{where}] callbacks must be tessera.nn.callbacks.Callback "
                                f"objects, got {type(c).__name__}")
        self.callbacks = callbacks
        self.stops_on_nan = any(isinstance(c, TerminateOnNaN) for c in callbacks)
        if history is not None:
            history.model = model
            history.params = params
        for c in callbacks:
            c.set_model(model)
            c.set_params(params)

    def _each(self, hook, *args):
        for c in self.callbacks:
            getattr(c, hook)(*args)

    def on_train_begin(self, logs=None):
        self._each("on_train_begin", _keras_logs(logs))

    def on_train_end(self, logs=None):
        self._each("on_train_end", _keras_logs(logs))

    def on_epoch_begin(self, epoch, logs=None):
        self._each("on_epoch_begin", epoch, _keras_logs(logs))

    def on_epoch_end(self, epoch, logs=None):
        self._each("on_epoch_end", epoch, _keras_logs(logs))

    def on_train_batch_begin(self, batch, logs=None):
        logs = _keras_logs(logs)
        for c in self.callbacks:
            c.on_train_batch_begin(batch, logs)
            c.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        logs = _keras_logs(logs)
        for c in self.callbacks:
            c.on_train_batch_end(batch, logs)
            c.on_batch_end(batch, logs)

    def on_test_begin(self, logs=None):
        self._each("on_test_begin", _keras_logs(logs))

    def on_test_end(self, logs=None):
        self._each("on_test_end", _keras_logs(logs))

    def on_test_batch_begin(self, batch, logs=None):
        self._each("on_test_batch_begin", batch, _keras_logs(logs))

    def on_test_batch_end(self, batch, logs=None):
        self._each("on_test_batch_end", batch, _keras_logs(logs))

    def on_predict_begin(self, logs=None):
        self._each("on_predict_begin", _keras_logs(logs))

    def on_predict_end(self, logs=None):
        self._each("on_predict_end", _keras_logs(logs))

    def on_predict_batch_begin(self, batch, logs=None):
        self._each("on_predict_batch_begin", batch, _keras_logs(logs))

    def on_predict_batch_end(self, batch, logs=None):
        self._each("on_predict_batch_end", batch, _keras_logs(logs))


def _chief() -> bool:
    """Locality 0 writes files (the others hold the same model)."""
    return distributed.size() == 1 or distributed.rank() == 0


def split_over_tensor_group(model) -> bool:
    """Whether a weight of `model` is split over a tensor group
    (tessera.nn.parallel): saving it gathers the whole weights, a collective
    every member joins, writer or not."""
    return any(split_weight(model, v) is not None for v in getattr(model, "_owner", {}))


def _join_save_gathers(model, weights_only: bool):
    """On a locality that does not write: the gathers locality 0's save of
    a model split over a tensor group makes, in the same order."""
    model.whole_weights()
    if not weights_only and model._opt_state is not None:
        model._optimizer_state_of(model._opt_state, "_gathered")


def _mode(monitor: str, mode: str, where: str):
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"[{where}] mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "auto":
        name = monitor.lower()
        mode = "max" if any(k in name for k in ("acc", "auc", "precision", "recall")) and \
            "loss" not in name else "min"
    return mode


def _monitored(logs, monitor, where):
    if logs is None or monitor not in logs:
        available = sorted((logs or {}).keys())
        raise ValueError(f"[{where}] the monitored value {monitor!r} is not in the logs; "
                         f"available: {available} (val_* need validation data)")
    return float(logs[monitor])


class EarlyStopping(Callback):
    """Stops training when `monitor` has stopped improving (by more than
    min_delta) for `patience` epochs; restore_best_weights puts back the
    weights of the best epoch when training ends (stopped early or not)."""

    def __init__(self, monitor="val_loss", min_delta=0.0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor = monitor
        self.min_delta = abs(float(min_delta))
        self.patience = int(patience)
        self.verbose = verbose
        self.mode = _mode(monitor, mode, "EarlyStopping")
        self.baseline = baseline
        self.restore_best_weights = bool(restore_best_weights)
        self.start_from_epoch = int(start_from_epoch)

    def _better(self, a, b):
        if b is None:
            return True
        return a < b - self.min_delta if self.mode == "min" else a > b + self.min_delta

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_epoch = 0
        self.best_weights = None

    def on_epoch_end(self, epoch, logs=None):
        if epoch < self.start_from_epoch:
            return
        current = _monitored(logs, self.monitor, "EarlyStopping")
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
        self.wait += 1
        if self._better(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._better(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.verbose:
                print(f"Epoch {epoch + 1}: early stopping (best {self.monitor} "
                      f"{self.best:.4f} at epoch {self.best_epoch + 1})")

    def on_train_end(self, logs=None):
        # At the end of training, stopped or not, as Keras's: a fit that runs all its epochs
        # ends with the best epoch's weights too.
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose:
                print(f"Restoring model weights from the end of the best epoch: "
                      f"{self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)


class ModelCheckpoint(Callback):
    """Saves the model (model.save, or save_weights with
    save_weights_only, or the whole training state with
    save_training_state) at the end of every epoch, or every `save_freq`
    batches; with save_best_only only when `monitor` improves. `filepath`
    may hold {epoch} and log names: "ckpt-{epoch:02d}-{val_loss:.3f}.tsm".
    Files are written to a temporary in the same folder and renamed.

    With save_training_state and a filepath without a file extension (a
    folder, "ckpts"), it writes distributed checkpoints there as
    fit(checkpoint_dir=...) does: every locality its share, asynchronously,
    keeping the last `keep_checkpoints`, and fit resumes from the newest."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None, save_training_state=False, keep_checkpoints=3):
        super().__init__()
        self.filepath = os.fspath(filepath)
        self.folder_mode = bool(save_training_state) and \
            os.path.splitext(self.filepath.rstrip("/" + os.sep))[1] == ""
        self.keep_checkpoints = keep_checkpoints
        if self.folder_mode and (save_best_only or "{" in self.filepath):
            raise ValueError(f"[ModelCheckpoint] {self.filepath!r} is a checkpoint folder (no "
                             "file extension, save_training_state=True): it keeps the newest "
                             "checkpoints, so save_best_only and {...} names do not apply; give "
                             "a file name such as 'best.tsm' for those")
        self.monitor = monitor
        self.verbose = verbose
        self.save_best_only = bool(save_best_only)
        self.save_weights_only = bool(save_weights_only)
        self.save_training_state = bool(save_training_state)
        if self.save_weights_only and self.save_training_state:
            raise ValueError("[ModelCheckpoint] save_weights_only and save_training_state "
                             "exclude each other")
        self.mode = _mode(monitor, mode, "ModelCheckpoint")
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int)
                                     or save_freq <= 0):
            raise ValueError(f"[ModelCheckpoint] save_freq must be 'epoch' or a positive int "
                             f"(batches), got {save_freq!r}")
        self.save_freq = save_freq
        self.best = initial_value_threshold
        self._batches = 0

    def _path(self, epoch, logs):
        try:
            return self.filepath.format(epoch=epoch + 1, **(logs or {}))
        except KeyError as e:
            raise ValueError(f"[ModelCheckpoint] filepath {self.filepath!r} names {e} which is "
                             f"not in the logs {sorted(logs or {})}") from None

    def _save(self, epoch, logs):
        if self.folder_mode:
            return  # fit's CheckpointDir writes the folder
        split = split_over_tensor_group(self.model)
        if not _chief() and not split:
            return  # under tessera run -n N every locality holds the same state
        if self.save_best_only:
            current = _monitored(logs, self.monitor, "ModelCheckpoint")
            better = self.best is None or (current < self.best if self.mode == "min"
                                           else current > self.best)
            if not better:
                return
            self.best = current
        if not _chief():
            _join_save_gathers(self.model, self.save_weights_only)
            return
        path = self._path(epoch, logs)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        if self.save_weights_only:
            self.model.save_weights(path)
        elif self.save_training_state:
            self.model.save_checkpoint(path)
        else:
            self.model.save(path)
        if self.verbose:
            print(f"Epoch {epoch + 1}: saved {path}")

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._save(self._epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, logs)


class LearningRateScheduler(Callback):
    """Sets the learning rate at the start of every epoch to
    schedule(epoch, lr) (or schedule(epoch))."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError("[LearningRateScheduler] schedule must be a function of (epoch, lr)")
        self.schedule = schedule
        self.verbose = verbose

    def on_epoch_begin(self, epoch, logs=None):
        lr = self.model._learning_rate(self.model._iteration)
        try:
            new = self.schedule(epoch, lr)
        except TypeError:
            new = self.schedule(epoch)
        if isinstance(new, bool) or not isinstance(new, (int, float, np.floating)) or \
                not math.isfinite(new) or new < 0:
            raise ValueError(f"[LearningRateScheduler] the schedule returned {new!r} for epoch "
                             f"{epoch}; it must give a finite number >= 0")
        self.model._lr_override = float(new)
        if self.verbose:
            print(f"Epoch {epoch + 1}: learning rate {new:.6g}")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = self.model._learning_rate(self.model._iteration)


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by `factor` when `monitor` has not
    improved for `patience` epochs (not below min_lr), then waits `cooldown`
    epochs."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0):
        super().__init__()
        if not 0 < factor < 1:
            raise ValueError(f"[ReduceLROnPlateau] factor must be in (0, 1), got {factor!r}")
        self.monitor = monitor
        self.factor = float(factor)
        self.patience = int(patience)
        self.verbose = verbose
        self.mode = _mode(monitor, mode, "ReduceLROnPlateau")
        self.min_delta = float(min_delta)
        self.cooldown = int(cooldown)
        self.min_lr = float(min_lr)

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.cooldown_counter = 0
        self.best = None

    def on_epoch_end(self, epoch, logs=None):
        current = _monitored(logs, self.monitor, "ReduceLROnPlateau")
        lr = self.model._learning_rate(self.model._iteration)
        if logs is not None:
            logs["learning_rate"] = lr
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        better = self.best is None or (current < self.best - self.min_delta if self.mode == "min"
                                       else current > self.best + self.min_delta)
        if better:
            self.best = current
            self.wait = 0
            return
        if self.cooldown_counter > 0:
            return
        self.wait += 1
        if self.wait >= self.patience:
            new = max(lr * self.factor, self.min_lr)
            if new < lr:
                self.model._lr_override = new
                if self.verbose:
                    print(f"Epoch {epoch + 1}: ReduceLROnPlateau reducing the learning rate to "
                          f"{new:.6g}")
            self.cooldown_counter = self.cooldown
            self.wait = 0


class CSVLogger(Callback):
    """Writes one row per epoch (epoch, then the logs in sorted order) to a
    CSV file; append=True continues an existing file. The file is
    rewritten whole (to a temporary, renamed) after every epoch, so a kill
    never leaves a torn row."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename = os.fspath(filename)
        self.sep = separator
        self.append = bool(append)

    def on_train_begin(self, logs=None):
        self.rows = []
        self.keys = None
        if self.append and os.path.exists(self.filename):
            with open(self.filename, newline="") as f:
                self.rows = list(csv.reader(f, delimiter=self.sep))
            if self.rows:
                self.keys = self.rows[0][1:]

    def on_epoch_end(self, epoch, logs=None):
        if not _chief():
            return
        logs = dict(logs or {})
        if self.keys is None:
            self.keys = sorted(logs)
            self.rows = [["epoch"] + self.keys]
        self.rows.append([str(epoch)] + [repr(float(logs[k])) if k in logs else ""
                                         for k in self.keys])
        buf = io.StringIO()
        csv.writer(buf, delimiter=self.sep, lineterminator="\n").writerows(self.rows)
        folder = os.path.dirname(os.path.abspath(self.filename))
        fd, tmp = tempfile.mkstemp(prefix=".tessera-csv-", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(buf.getvalue())
            os.replace(tmp, self.filename)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


class TerminateOnNaN(Callback):
    """Stops training at the first batch whose loss is NaN or infinite."""

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            print(f"Batch {batch}: invalid loss {loss}, terminating training")
            self.model.stop_training = True


class LambdaCallback(Callback):
    """A callback from functions, as Keras's: on_epoch_begin/on_epoch_end(epoch,
    logs), on_train_begin/on_train_end(logs), on_train_batch_begin/
    on_train_batch_end(batch, logs), and by keyword any other hook
    (on_batch_end, on_test_begin, on_predict_batch_end, ...)."""

    _HOOKS = ("on_epoch_begin", "on_epoch_end", "on_train_begin", "on_train_end",
              "on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end",
              "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end",
              "on_predict_begin", "on_predict_end", "on_predict_batch_begin",
              "on_predict_batch_end")

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_train_batch_begin=None, on_train_batch_end=None,
                 **hooks):
        super().__init__()
        for name in hooks:
            if name not in self._HOOKS:
                raise TypeError(f"[LambdaCallback] {name!r} is not a callback hook; the hooks: "
                                f"{', '.join(self._HOOKS)}")
        hooks.update(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end,
                     on_train_begin=on_train_begin, on_train_end=on_train_end,
                     on_train_batch_begin=on_train_batch_begin,
                     on_train_batch_end=on_train_batch_end)
        for name, fn in hooks.items():
            if fn is not None:
                setattr(self, name, fn)


class ProgbarLogger(Callback):
    """Prints a progress bar (keras.utils.Progbar) per epoch of fit, and
    for evaluate and predict, as Keras's ProgbarLogger; given to fit it
    replaces fit's own printing. Follows fit's verbose (0 silent, 1 the
    bar, 2 one line per epoch)."""

    def __init__(self):
        super().__init__()
        self.verbose = 1
        self.epochs = 1
        self.target = None
        self.progbar = None
        self._seen = 0

    def set_params(self, params):
        super().set_params(params)
        verbose = params.get("verbose", 1)
        self.verbose = 1 if verbose == "auto" else int(verbose or 0)
        self.epochs = params.get("epochs", 1) or 1
        self.target = params.get("steps")

    def _reset(self):
        self._seen = 0
        self.progbar = Progbar(self.target, verbose=self.verbose, stateless_metrics=(),
                               unit_name="step")

    def _update(self, batch, logs, finalize=False):
        if self.progbar is None:
            self._reset()
        self._seen = batch + 1
        values = [(k, v) for k, v in (logs or {}).items() if np.ndim(v) == 0]
        # fit's logs are running averages already: shown as given
        self.progbar.update(self._seen, values, finalize=finalize)

    def on_epoch_begin(self, epoch, logs=None):
        self._reset()
        if self.verbose and self.epochs > 1:
            print(f"Epoch {epoch + 1}/{self.epochs}")

    def on_train_batch_end(self, batch, logs=None):
        self._update(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._update(max(self._seen - 1, 0), logs, finalize=True)

    def on_test_begin(self, logs=None):
        if self.model is not None and not getattr(self.model, "_fitting", False):
            self._reset()

    def on_test_batch_end(self, batch, logs=None):
        if self.params.get("epochs", 1) == 1 and self.progbar is not None:
            self._update(batch, logs)

    def on_test_end(self, logs=None):
        if self.progbar is not None and self.params.get("epochs", 1) == 1:
            self._update(max(self._seen - 1, 0), logs, finalize=True)

    def on_predict_begin(self, logs=None):
        self._reset()

    def on_predict_batch_end(self, batch, logs=None):
        self._update(batch, {})

    def on_predict_end(self, logs=None):
        self._update(max(self._seen - 1, 0), {}, finalize=True)


class BackupAndRestore(Callback):
    """Backs up the whole training state (weights, optimizer state, epoch
    and position in it) in backup_dir at the end of every epoch (or every
    save_freq batches), so that a fit interrupted by a crash or a kill,
    run again with the same callback, resumes where the backup was made,
    like keras.callbacks.BackupAndRestore. The backup is written to a
    temporary in the folder and renamed; delete_checkpoint removes it when
    training ends normally; double_checkpoint keeps the previous one too
    (used when the newest is unreadable)."""

    _NAME, _PREV = "backup.tsm", "backup-previous.tsm"

    def __init__(self, backup_dir, save_freq="epoch", double_checkpoint=False,
                 delete_checkpoint=True):
        super().__init__()
        if backup_dir is None or not os.fspath(backup_dir):
            raise ValueError("[BackupAndRestore] backup_dir must be a folder path, got "
                             f"{backup_dir!r}")
        if save_freq != "epoch" and save_freq is not False and (
                isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq <= 0):
            raise ValueError(f"[BackupAndRestore] save_freq must be 'epoch', False or a positive "
                             f"int (batches), got {save_freq!r}")
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.double_checkpoint = bool(double_checkpoint)
        self.delete_checkpoint = bool(delete_checkpoint)
        self._batches = 0
        self._path = os.path.join(self.backup_dir, self._NAME)
        self._prev = os.path.join(self.backup_dir, self._PREV)

    def _restore_path(self):
        """The backup fit resumes from (checked readable), or None."""
        for p in ([self._path, self._prev] if self.double_checkpoint else [self._path]):
            if os.path.lexists(p):
                if os.path.islink(p) or not os.path.isfile(p):
                    raise ValueError(f"[BackupAndRestore] {p} is not a regular file (a link or a "
                                     "folder); remove it")
                try:
                    read_file(p, "BackupAndRestore")
                except ValueError:
                    if self.double_checkpoint and p == self._path:
                        continue
                    raise
                return p
        return None

    def _backup(self):
        if not _chief():
            if split_over_tensor_group(self.model):
                _join_save_gathers(self.model, weights_only=False)
            return
        os.makedirs(self.backup_dir, exist_ok=True)
        if self.double_checkpoint and os.path.isfile(self._path):
            os.replace(self._path, self._prev)
        self.model.save_checkpoint(self._path)  # a temporary in the folder, then a rename

    def on_train_begin(self, logs=None):
        self._batches = 0

    def on_train_batch_end(self, batch, logs=None):
        if isinstance(self.save_freq, int) and not isinstance(self.save_freq, bool):
            self._batches += 1
            if self._batches % self.save_freq == 0:
                self._backup()

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._backup()

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and _chief():
            for p in (self._path, self._prev):
                if os.path.isfile(p) and not os.path.islink(p):
                    os.unlink(p)


class TensorBoard(Callback):
    """Writes TensorBoard event files (`tensorboard --logdir log_dir`), as
    keras.callbacks.TensorBoard (Keras 3.15 on JAX), with tessera's own
    encoder (nn/_tfevents.py), no TensorFlow:

    - scalars: the epoch's logs as "epoch_<name>" (with "epoch_learning_rate")
      in log_dir/train and the val_* ones in log_dir/validation without the
      prefix; with update_freq=N (or "batch") the running logs every N
      batches as "batch_<name>" at the batch's number in the fit; after each
      evaluation (fit's validation, evaluate) "evaluation_<name>_vs_iterations"
      at the optimizer's iterations;
    - write_graph: a functional or Sequential model's JSON (model.to_json) as
      the "keras" tag, the Graphs tab's conceptual graph;
    - histogram_freq=N: every N epochs a histogram of each layer weight,
      "<weight.path>/histogram", and with write_images its image,
      "<weight.path>/image";
    - embeddings_freq=N: projector_config.pbtxt and every N epochs the weights
      (model.save_weights) in log_dir/train/keras_embedding.ckpt-<epoch>.weights.tsw;
    - profile_batch: those batches recorded by tessera's tracer (see
      tensorboard_logs.BatchTracer)."""

    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True, write_images=False,
                 write_steps_per_second=False, update_freq="epoch", profile_batch=0,
                 embeddings_freq=0, embeddings_metadata=None):
        super().__init__()
        if not isinstance(log_dir, (str, os.PathLike)):
            raise TypeError(f"[TensorBoard] log_dir must be a folder name, got {log_dir!r} (at "
                            f"{user_location()})")
        if update_freq not in ("epoch", "batch") and (
                isinstance(update_freq, bool) or not isinstance(update_freq, int)
                or update_freq <= 0):
            raise ValueError(f"[TensorBoard] update_freq must be 'epoch', 'batch' or a positive "
                             f"int, got {update_freq!r} (at {user_location()})")
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq = tb.check_freq("histogram_freq", histogram_freq)
        self.write_graph = tb.check_flag("write_graph", write_graph)
        self.write_images = tb.check_flag("write_images", write_images)
        self.write_steps_per_second = tb.check_flag("write_steps_per_second",
                                                    write_steps_per_second)
        self.update_freq = 1 if update_freq == "batch" else update_freq
        self.embeddings_freq = tb.check_freq("embeddings_freq", embeddings_freq)
        self.embeddings_metadata = tb.check_metadata(embeddings_metadata)
        start, stop = tb.profile_range(profile_batch)
        self._tracer = tb.BatchTracer(start, stop) if stop > 0 else None
        self._writers: dict = {}
        self._in_fit = False
        self._step = 0
        self._epoch_start = None
        self._epoch_steps = 0
        self._batch_start = None

    def set_model(self, model):
        """As Keras's: new event files, the model's graph written, the
        projector's configuration (for fit, evaluate and predict alike)."""
        super().set_model(model)
        self._close_writers()
        if model is None or not _chief():
            return
        # Keras writes keras_model_summary("keras", model, step=0) for a
        # Functional or Sequential model; its train-function graph only for a
        # tf.function (TensorFlow backend), never on JAX: neither here.
        if self.write_graph and (getattr(model, "_functional", False) or
                                 type(model).__name__ == "Sequential"):
            try:
                text = model.to_json()
            except Exception as e:  # Keras: a warning, and no graph
                warnings.warn(f"[TensorBoard] Model failed to serialize as JSON. Ignoring... {e}",
                              stacklevel=2)
            else:
                self._writer("train").keras_model(0, "keras", text)
        if self.embeddings_freq:
            tb.write_projector_config(self.log_dir,
                                      tb.projector_config(model, self.embeddings_metadata))

    def _writer(self, kind):
        w = self._writers.get(kind)
        if w is None:
            w = self._writers[kind] = EventFileWriter(os.path.join(self.log_dir, kind))
        return w

    def _close_writers(self):
        for w in self._writers.values():
            w.close()
        self._writers = {}

    @staticmethod
    def _scalars(logs, prefix):
        out = {}
        for k, v in (logs or {}).items():
            if np.ndim(v) == 0:
                try:
                    out[prefix + k] = float(v)
                except (TypeError, ValueError):
                    pass
        return out

    def _learning_rates(self) -> dict:
        """Keras's _collect_learning_rate: the optimizer's rate now (each
        sub-optimizer's, named, under a MultiOptimizer)."""
        opt = getattr(self.model, "optimizer", None)
        opt = getattr(opt, "inner_optimizer", opt)
        if opt is None:
            return {}
        subs = getattr(opt, "optimizers", None)
        try:
            if subs is not None:
                return {f"learning_rate_{o.name}": float(o.learning_rate) for o in subs}
            return {"learning_rate": float(opt.learning_rate)}
        except (TypeError, ValueError, AttributeError):
            return {}

    def on_train_begin(self, logs=None):
        self._in_fit = True
        self._step = 0  # Keras's _global_train_batch: each fit counts from 1

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()
        self._epoch_steps = 0

    def on_train_batch_begin(self, batch, logs=None):
        self._step += 1
        self._batch_start = time.perf_counter()
        if self._tracer is not None and self._step == self._tracer.start:
            self._tracer.begin(os.path.join(self.log_dir, "train"))

    def on_train_batch_end(self, batch, logs=None):
        self._epoch_steps += 1
        if self._tracer is not None and self._tracer.tracing and self._step >= self._tracer.stop:
            self._tracer.end()
        if not _chief() or self.update_freq == "epoch" or self._step % self.update_freq:
            return
        values = {}
        if self.write_steps_per_second and self._batch_start is not None:
            took = time.perf_counter() - self._batch_start
            values["batch_steps_per_second"] = 1.0 / took if took > 0 else 0.0
        values.update(self._scalars(logs, "batch_"))
        self._writer("train").scalars(self._step, values)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if _chief():
            train = {k: v for k, v in logs.items() if not k.startswith("val_")}
            val = {k[4:]: v for k, v in logs.items() if k.startswith("val_")}
            values = self._scalars(train, "epoch_")
            values.update(self._scalars(self._learning_rates(), "epoch_"))
            if self.write_steps_per_second and self._epoch_start is not None:
                took = time.perf_counter() - self._epoch_start
                values["epoch_steps_per_second"] = self._epoch_steps / took if took > 0 else 0.0
            self._writer("train").scalars(epoch, values)
            if val:
                self._writer("validation").scalars(epoch, self._scalars(val, "epoch_"))
        # (every locality: reading whole weights and saving may gather them)
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            self._log_weights(epoch)
        if self.embeddings_freq and epoch % self.embeddings_freq == 0:
            self._log_embeddings(epoch)

    def _log_weights(self, epoch):
        weights = tb.logged_weights(self.model)
        if not _chief():
            return
        w = self._writer("train")
        for name, value in weights:
            w.histogram(epoch, f"{name}/histogram", value)
            if self.write_images:
                image = tb.weight_image(value)
                if image is not None:
                    w.image(epoch, f"{name}/image", image)

    def _log_embeddings(self, epoch):
        # Keras saves model.save_weights(... .weights.h5), HDF5; this is
        # tessera's weights file. TensorBoard's projector reads neither.
        if not _chief():
            if split_over_tensor_group(self.model):
                _join_save_gathers(self.model, True)
            return
        folder = os.path.join(self.log_dir, "train")
        os.makedirs(folder, exist_ok=True)
        self.model.save_weights(os.path.join(folder,
                                             f"keras_embedding.ckpt-{epoch}.weights.tsw"))

    def on_test_end(self, logs=None):
        # after fit's validation too, as Keras's
        if _chief() and logs:
            opt = getattr(self.model, "optimizer", None)
            try:  # Keras's step: optimizer.iterations
                step = int(opt.iterations)
            except (AttributeError, TypeError, ValueError):
                step = int(getattr(self.model, "_iteration", 0) or 0)
            self._writer("validation").scalars(step, {
                f"evaluation_{k}_vs_iterations": v for k, v in self._scalars(logs, "").items()})
        if not self._in_fit:
            self._close_writers()

    def on_predict_end(self, logs=None):
        if not self._in_fit:
            self._close_writers()

    def on_train_end(self, logs=None):
        self._in_fit = False
        if self._tracer is not None and self._tracer.tracing:
            self._tracer.end()
        self._close_writers()


class SwapEMAWeights(Callback):
    """Keras's SwapEMAWeights: with an optimizer made with ``use_ema=True``,
    evaluation (fit's validation, evaluate) runs on the weights' moving
    averages, swapped in before it and out after it; with ``swap_on_epoch``
    also between an epoch's end and the next epoch's beginning (so that
    callbacks after it, such as ModelCheckpoint, see the averages). As
    Keras 3.15's, predict swaps them in and does not swap them back."""

    def __init__(self, swap_on_epoch=False):
        super().__init__()
        self.swap_on_epoch = bool(swap_on_epoch)
        self._ema_weights_in_model = False

    def _pairs(self):
        """(weight variable, its average's optimizer state name) of each
        trainable weight."""
        opt = getattr(self.model, "optimizer", None)
        state = getattr(self.model, "_opt_state", None) or {}
        if not getattr(opt, "use_ema", False) or not state:
            raise ValueError("[SwapEMAWeights] must be used when `use_ema=True` is set on the "
                             f"optimizer (and after it has made its averages: fit); received "
                             f"use_ema={getattr(opt, 'use_ema', None)}")
        return [(v, opt.ema_name("opt_", v)) for v in self.model._params(True)
                if opt.ema_name("opt_", v) in state]

    def _swap_variables(self):
        state = self.model._opt_state
        for v, a in self._pairs():
            current = np.array(self.model.weights[v], copy=True)
            self.model._set(v, np.array(state[a], copy=True))
            state[a] = current

    def _finalize_ema_values(self):
        state = self.model._opt_state
        for v, a in self._pairs():
            state[a] = np.array(self.model.weights[v], copy=True)

    def on_epoch_begin(self, epoch, logs=None):
        if self.swap_on_epoch and self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = False

    def on_epoch_end(self, epoch, logs=None):
        if self.swap_on_epoch and not self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = True
            # fit's end puts the averages in: they must be the averages again
            if epoch == self.params.get("epochs", 0) - 1:
                self._finalize_ema_values()

    def on_test_begin(self, logs=None):
        if not self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = True

    def on_test_end(self, logs=None):
        if self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = False

    def on_predict_begin(self, logs=None):
        if not self._ema_weights_in_model:
            self._swap_variables()
            self._ema_weights_in_model = True
