"""The datasets tessera reads (UCI HAR, Fashion-MNIST) and ``batches``, the
plain mini-batch iterator over arrays."""

from __future__ import annotations

import operator
import os
from pathlib import Path
from typing import Iterator, Optional, Tuple

import numpy as np

from .. import _core

__all__ = ["HAR_SIGNALS", "HAR_CLASSES", "FASHION_MNIST_CLASSES", "load_har", "synthetic_har",
           "load_fashion_mnist", "batches"]

# The nine signals of the UCI HAR "Inertial Signals" folder, in channel order.
HAR_SIGNALS = (
    "body_acc_x", "body_acc_y", "body_acc_z",
    "body_gyro_x", "body_gyro_y", "body_gyro_z",
    "total_acc_x", "total_acc_y", "total_acc_z",
)
# Class names of labels 0..5 (activity_labels.txt lists them as 1..6).
HAR_CLASSES = ("WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING",
               "LAYING")
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")

_HAR_SIZES = {"train": 7352, "test": 2947}
_HAR_HOWTO = (
    "Get it from the UCI Machine Learning Repository (\"Human Activity Recognition Using "
    "Smartphones\", https://archive.ics.uci.edu/dataset/240), unzip it so that "
    "'UCI HAR Dataset/train/Inertial Signals/' exists under a folder, and pass that folder as "
    "root=..., set TESSERA_HAR_DIR to it, or use ~/.tessera/datasets. "
    "tessera.data.synthetic_har() makes data of the same shapes without any download."
)
_FASHION_ROOT = "/usr/share/datasets/fashion-mnist"


def _check_split(split: str, fn: str) -> str:
    if split not in ("train", "test"):
        raise ValueError(f"[{fn}] split must be 'train' or 'test', got {split!r}")
    return split


def _call(name: str, *args, **kwargs):
    return _core.call_primitive(name, list(args), kwargs)


# --------------------------------------------------------------------------- UCI HAR


def _har_files(folder: Path, split: str):
    base = folder / split
    signals = [base / "Inertial Signals" / f"{s}_{split}.txt" for s in HAR_SIGNALS]
    return signals, base / f"y_{split}.txt"


def _har_search_folders(root) -> list:
    if root is not None:
        bases = [Path(root).expanduser()]
    else:
        bases = []
        env = os.environ.get("TESSERA_HAR_DIR")
        if env:
            bases.append(Path(env).expanduser())
        bases.append(Path.home() / ".tessera" / "datasets")
    folders = []
    for b in bases:
        # The folder holding "UCI HAR Dataset", or that folder itself.
        folders += [b / "UCI HAR Dataset", b]
    return folders


def load_har(root=None, split: str = "train") -> Tuple[np.ndarray, np.ndarray]:
    """The UCI HAR dataset's raw inertial signals: ``x`` (N, 128, 9) float32 with the
    channels in ``HAR_SIGNALS`` order, ``y`` (N,) int64 in 0..5 (``HAR_CLASSES``).

    Looks in ``root`` (the folder containing "UCI HAR Dataset", or that folder
    itself); without ``root``, in ``$TESSERA_HAR_DIR`` and then
    ``~/.tessera/datasets``. Missing files raise FileNotFoundError naming every
    place searched; malformed files raise ValueError naming the file and line.
    """
    _check_split(split, "load_har")
    folders = _har_search_folders(root)
    chosen = None
    for folder in folders:
        signals, labels = _har_files(folder, split)
        if all(p.is_file() for p in signals + [labels]):
            chosen = (signals, labels)
            break
    if chosen is None:
        looked = []
        for folder in folders:
            signals, labels = _har_files(folder, split)
            missing = [p for p in signals + [labels] if not p.is_file()]
            note = "" if len(missing) == 10 else f" (missing {', '.join(map(str, missing))})"
            looked.append(f"  {folder}{note}")
        raise FileNotFoundError(
            f"[load_har] the UCI HAR dataset ({split} split) was not found; looked for "
            f"'{split}/Inertial Signals/body_acc_x_{split}.txt' and the other signal files, and "
            f"'{split}/y_{split}.txt', in:\n" + "\n".join(looked) + "\n" + _HAR_HOWTO)
    signals, labels = chosen
    arrays = [_call("file_read_txt", str(p), dtype="float32") for p in signals]
    for p, a in zip(signals[1:], arrays[1:]):
        if a.shape != arrays[0].shape:
            raise ValueError(f"[load_har] '{p}' holds {a.shape[0]} rows of {a.shape[1]} values, "
                             f"but '{signals[0]}' holds {arrays[0].shape[0]} rows of "
                             f"{arrays[0].shape[1]}: the signal files must match")
    x = _call("stack", arrays, axis=2)
    y = _call("file_read_txt", str(labels), dtype="int64")
    if y.shape[1:] != (1,) or y.shape[0] != x.shape[0]:
        raise ValueError(f"[load_har] '{labels}' must hold one label per line for the "
                         f"{x.shape[0]} windows of the signal files, got {y.shape[0]} rows of "
                         f"{y.shape[1]} values")
    y = y.reshape(-1)
    if y.size and (y.min() < 1 or y.max() > 6):
        bad = int(np.flatnonzero((y < 1) | (y > 6))[0])
        raise ValueError(f"[load_har] '{labels}' line {bad + 1}: label {int(y[bad])} is outside "
                         "1..6")
    return x, _call("subtract", y, 1)


# --------------------------------------------------------------------------- synthetic HAR

# Each class has, per channel, a frequency (whole cycles per window), an
# amplitude and an offset drawn once from the class seed; each window adds a
# random phase, amplitude and frequency jitter and Gaussian noise. Labels are
# balanced (arange(n) % 6, shuffled). The noise (0.8) is above the signal
# amplitudes (0.3 to 0.8) and the offsets are small, so per-channel means and
# deviations alone classify about 80% of windows: a model has to find the
# frequencies to pass 95%.
_SYNTHETIC_HAR = """
lambda(n, class_seed, sample_seed, block(
  define(freq, astype(random_integers(1, 9, [6, 9], seed=class_seed), "float32")),
  define(amp, random_uniform([6, 9], 0.3, 0.8, seed=class_seed + 1, dtype="float32")),
  define(offset, random_uniform([6, 9], -0.05, 0.05, seed=class_seed + 2, dtype="float32")),
  define(y, take(arange(n) % 6, permutation(n, seed=sample_seed))),
  define(phase, random_uniform([n, 1, 9], 0.0, 6.283185307179586, seed=sample_seed + 1,
                               dtype="float32")),
  define(jitter_a, random_uniform([n, 1, 9], 0.6, 1.4, seed=sample_seed + 2, dtype="float32")),
  define(jitter_f, random_uniform([n, 1, 9], 0.9, 1.1, seed=sample_seed + 3, dtype="float32")),
  define(t, reshape(astype(arange(128), "float32"), [1, 128, 1])),
  define(f, reshape(take(freq, y, axis=0), [n, 1, 9]) * jitter_f),
  define(a, reshape(take(amp, y, axis=0), [n, 1, 9]) * jitter_a),
  define(b, reshape(take(offset, y, axis=0), [n, 1, 9])),
  define(noise, random_normal([n, 128, 9], 0.0, 0.8, seed=sample_seed + 4, dtype="float32")),
  list(a * sin(f * t * 0.04908738521234052 + phase) + b + noise, y)))
"""
_synthetic_program = None


def synthetic_har(n: Optional[int] = None, seed: int = 0,
                  split: str = "train") -> Tuple[np.ndarray, np.ndarray]:
    """HAR-like data: ``x`` (n, 128, 9) float32, ``y`` (n,) int64 in 0..5, balanced.

    ``n`` defaults to the real dataset's size (7352 train, 2947 test). The
    classes (their frequencies, amplitudes and offsets per channel) depend on
    ``seed`` only, so the train and test splits of one seed share them; the
    windows depend on (seed, split). Generated by a tessera program.
    """
    global _synthetic_program
    _check_split(split, "synthetic_har")
    if n is None:
        n = _HAR_SIZES[split]
    if isinstance(n, bool) or isinstance(seed, bool):
        raise TypeError("[synthetic_har] n and seed must be ints")
    n, seed = operator.index(n), operator.index(seed)
    if n < 0:
        raise ValueError(f"[synthetic_har] n must be >= 0, got {n}")
    if not 0 <= seed < 2 ** 58:
        raise ValueError(f"[synthetic_har] seed must be in [0, 2**58), got {seed}")
    if _synthetic_program is None:
        _synthetic_program = _core.Program(_SYNTHETIC_HAR, "<synthetic_har>")
    base = seed * 16
    sample_seed = base + (4 if split == "train" else 10)
    x, y = _synthetic_program.run([n, base + 1, sample_seed])
    return x, y


# --------------------------------------------------------------------------- Fashion-MNIST

_FASHION = """
lambda(images, labels, list(expand_dims(file_read_idx(images, dtype="float32") / 255.0, -1),
                            file_read_idx(labels)))
"""


def load_fashion_mnist(split: str = "train",
                       root: str = _FASHION_ROOT) -> Tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST: ``x`` (N, 28, 28, 1) float32 in [0, 1], ``y`` (N,) int64 in 0..9
    (``FASHION_MNIST_CLASSES``); N is 60000 for train, 10000 for test.

    Reads the IDX files (gzip-compressed or not) of Debian's dataset-fashion-mnist
    package, or the same files in ``root``.
    """
    _check_split(split, "load_fashion_mnist")
    stem = "train" if split == "train" else "t10k"
    folder = Path(root).expanduser()
    found = []
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        names = [folder / f"{stem}-{kind}.gz", folder / f"{stem}-{kind}"]
        hit = next((p for p in names if p.is_file()), None)
        if hit is None:
            raise FileNotFoundError(
                f"[load_fashion_mnist] Fashion-MNIST ({split} split) was not found: looked for "
                f"{names[0]} and {names[1]}. Install Debian's package with "
                "`apt-get install dataset-fashion-mnist` (it puts the files in "
                f"{_FASHION_ROOT}), or pass root= a folder holding {stem}-{kind}.gz")
        found.append(str(hit))
    x, y = _core.Program(_FASHION, "<load_fashion_mnist>").run(found)
    if x.ndim != 4 or x.shape[1:3] != (28, 28):
        raise ValueError(f"[load_fashion_mnist] '{found[0]}' holds images of shape "
                         f"{x.shape[:-1]}, expected (N, 28, 28)")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"[load_fashion_mnist] '{found[1]}' holds labels of shape {y.shape}, "
                         f"expected ({x.shape[0]},) to match the images")
    if y.size and (y.min() < 0 or y.max() > 9):
        raise ValueError(f"[load_fashion_mnist] '{found[1]}' holds labels outside 0..9")
    return x, y


# --------------------------------------------------------------------------- batches


def _mix(seed: int, epoch: int) -> int:
    """A seed for (seed, epoch): splitmix64 of both, kept below 2**62."""
    z = (seed * 0x9E3779B97F4A7C15 + epoch + 1) & 0xFFFFFFFFFFFFFFFF
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = ((z ^ (z >> shift)) * mult) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & ((1 << 62) - 1)


def batches(x, y=None, batch_size: int = 32, shuffle: bool = True, seed: int = 0,
            epoch: int = 0, drop_last: bool = False) -> Iterator:
    """Mini-batches ``(x_batch, y_batch)`` over the first axis (``x_batch`` alone when
    ``y`` is None).

    With ``shuffle``, the order is a permutation drawn by tessera's
    ``permutation`` primitive from (seed, epoch) — the same on every run and
    thread count, different for every epoch — and each batch is gathered in C++
    (``take``); without it, batches are views of consecutive rows. The last
    batch is smaller when ``batch_size`` does not divide N, unless ``drop_last``.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError("[batches] x must have at least one dimension (the samples)")
    n = x.shape[0]
    if y is not None:
        y = np.asarray(y)
        if y.ndim == 0 or y.shape[0] != n:
            raise ValueError(f"[batches] x and y must have the same number of samples, got "
                             f"{n} and {y.shape[0] if y.ndim else 'a scalar'}")
    if isinstance(batch_size, bool):
        raise TypeError("[batches] batch_size must be an int, got a bool")
    batch_size = operator.index(batch_size)
    if batch_size < 1:
        raise ValueError(f"[batches] batch_size must be >= 1, got {batch_size}")
    seed, epoch = operator.index(seed), operator.index(epoch)
    if seed < 0 or epoch < 0:
        raise ValueError(f"[batches] seed and epoch must be >= 0, got {seed} and {epoch}")
    order = _call("permutation", n, seed=_mix(seed, epoch)) if shuffle else None
    stop = n - n % batch_size if drop_last else n
    return _batches(x, y, batch_size, order, stop)


def _batches(x, y, batch_size, order, stop):
    for start in range(0, stop, batch_size):
        end = min(start + batch_size, stop)
        if order is None:
            xb = x[start:end]
            yb = None if y is None else y[start:end]
        else:
            index = order[start:end]
            xb = _call("take", x, index, axis=0)
            yb = None if y is None else _call("take", y, index, axis=0)
        yield xb if y is None else (xb, yb)
