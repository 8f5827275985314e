"""keras.utils for code written against Keras: to_categorical,
set_random_seed, pad_sequences, normalize, timeseries_dataset_from_array,
split_dataset, PyDataset, Progbar, get_file, plot_model / model_to_dot,
bounding_boxes (keras.utils.bounding_boxes) and
Keras's (de)serialization helpers (on tessera.nn.saving's registry)."""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import math
import os
import random as _random
import shutil
import sys
import tempfile
import time
from urllib.parse import unquote, urlparse

import numpy as np

from .. import _core
from .. import data as _data
from . import bounding_boxes, saving
from ._directory_datasets import (audio_dataset_from_directory, image_dataset_from_directory,
                                  text_dataset_from_directory)
from ._image_utils import array_to_img, img_to_array, load_img, save_img
from .feature_space import FeatureSpace
from .functional import _deps
from .given_batches import generator_batches, pydataset_batches
from .layers.base import _name_counts
from .random import reseed_global
from .keras_objects import deserialize_keras_object, serialize_keras_object
from .saving import (CustomObjectScope, custom_object_scope, get_custom_objects,
                     get_registered_name, get_registered_object, register_keras_serializable)
from .symbolic import KerasTensor, keras_dtype

__all__ = ["FeatureSpace", "set_random_seed", "to_categorical", "pad_sequences", "normalize",
           "timeseries_dataset_from_array", "split_dataset", "PyDataset", "Sequence", "Progbar",
           "get_file", "plot_model", "model_to_dot", "register_keras_serializable",
           "serialize_keras_object", "deserialize_keras_object", "get_custom_objects",
           "get_registered_name", "get_registered_object", "custom_object_scope",
           "CustomObjectScope", "audio_dataset_from_directory", "image_dataset_from_directory",
           "text_dataset_from_directory",
           "pack_x_y_sample_weight", "unpack_x_y_sample_weight", "is_keras_tensor",
           "standardize_dtype", "clear_session", "disable_interactive_logging",
           "enable_interactive_logging", "is_interactive_logging_enabled", "img_to_array",
           "array_to_img", "load_img", "save_img", "get_source_inputs", "Config"]


def to_categorical(x, num_classes=None):
    """One-hot rows for integer class labels, like keras.utils.to_categorical:
    shape x.shape + (num_classes,), a last axis of 1 dropped first; num_classes
    defaults to max(x) + 1; float64, as Keras's NumPy result."""
    y = np.asarray(x)
    if y.ndim > 1 and y.shape[-1] == 1:
        y = y.reshape(y.shape[:-1])
    if y.size and not np.all(np.equal(np.mod(y, 1), 0)):
        raise ValueError("[to_categorical] labels must be integers (class indices)")
    y = y.astype(np.int64)
    if num_classes is None:
        num_classes = int(y.max()) + 1 if y.size else 0
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        bad = y[(y < 0) | (y >= num_classes)].flat[0]
        raise ValueError(f"[to_categorical] label {bad} is out of range for num_classes="
                         f"{num_classes}")
    out = np.zeros(y.shape + (num_classes,), dtype=np.float64)
    np.put_along_axis(out, y[..., None], 1.0, axis=-1)
    return out


def set_random_seed(seed):
    """Seeds Python's random, NumPy's global generator and tessera's global
    generator (what unseeded initializers draw from), like
    keras.utils.set_random_seed."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"[set_random_seed] seed must be an int, got {seed!r}")
    _random.seed(int(seed))
    np.random.seed(int(seed) % 2**32)
    _core.call_primitive("set_seed", [int(seed)], {})
    reseed_global(int(seed))


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre",
                  value=0.0):
    """Pads (or truncates) a list of sequences to one length, like
    keras.utils.pad_sequences: (len(sequences), maxlen) + the samples'
    trailing shape, padding and truncating at the "pre" (start) or "post"
    end, with `value`."""
    if not hasattr(sequences, "__len__"):
        raise ValueError("[pad_sequences] sequences must be a list of sequences, got "
                         f"{type(sequences).__name__}")
    for name, v in (("padding", padding), ("truncating", truncating)):
        if v not in ("pre", "post"):
            raise ValueError(f"[pad_sequences] {name} must be 'pre' or 'post', got {v!r}")
    if maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int)
                               or maxlen < 0):
        raise ValueError(f"[pad_sequences] maxlen must be None or an int >= 0, got {maxlen!r}")
    lengths, sample_shape, found = [], (), False
    for i, x in enumerate(sequences):
        if not hasattr(x, "__len__"):
            raise ValueError(f"[pad_sequences] sequences[{i}] is not a sequence: {x!r}")
        lengths.append(len(x))
        if not found and len(x):
            sample_shape = np.asarray(x).shape[1:]
            found = True
    if maxlen is None:
        maxlen = max(lengths, default=0)
    is_str = np.issubdtype(np.dtype(dtype), np.str_) or np.issubdtype(np.dtype(dtype),
                                                                       np.object_)
    if isinstance(value, str) and dtype != object and not is_str:
        raise ValueError(f"[pad_sequences] dtype {dtype!r} cannot hold the padding value "
                         f"{value!r}; use dtype=object or a string dtype")
    out = np.full((len(lengths), maxlen) + tuple(sample_shape), value, dtype=dtype)
    for i, x in enumerate(sequences):
        if not len(x) or not maxlen:
            continue
        trunc = x[-maxlen:] if truncating == "pre" else x[:maxlen]
        trunc = np.asarray(trunc, dtype=dtype)
        if trunc.shape[1:] != tuple(sample_shape):
            raise ValueError(f"[pad_sequences] sequences[{i}] has samples of shape "
                             f"{trunc.shape[1:]}, the others {tuple(sample_shape)}")
        if padding == "post":
            out[i, :len(trunc)] = trunc
        else:
            out[i, -len(trunc):] = trunc
    return out


def normalize(x, axis=-1, order=2):
    """x divided by its `order`-norm along `axis` (zero norms left as 1),
    like keras.utils.normalize. (Keras's NumPy path puts the norm back on
    the last axis when axis=0, which fails or divides by the wrong norms;
    tessera puts it back on `axis`.)"""
    x = np.asarray(x)
    if x.dtype.kind not in "iuf":
        raise TypeError(f"[normalize] x must be numbers, got dtype {x.dtype}")
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, -1 if axis is None else axis)


def _int(where, name, v, minimum):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ValueError(f"[{where}] {name} must be an int >= {minimum}, got {v!r}")
    return int(v)


def timeseries_dataset_from_array(data, targets, sequence_length, sequence_stride=1,
                                  sampling_rate=1, batch_size=128, shuffle=False, seed=None,
                                  start_index=None, end_index=None):
    """A tessera.data.Dataset of sliding windows over `data`, like
    keras.utils.timeseries_dataset_from_array: window i is
    data[start + p_i + k * sampling_rate] for k < sequence_length, its
    target targets[start + p_i], p_i = i * sequence_stride (shuffled with
    NumPy's RandomState(seed), as Keras). Batched by batch_size (None: not
    batched). The windows are gathered into memory."""
    w = "timeseries_dataset_from_array"
    data = np.asarray(data)
    if data.ndim == 0:
        raise ValueError(f"[{w}] data must have a time axis first, got a scalar")
    sequence_length = _int(w, "sequence_length", sequence_length, 1)
    sequence_stride = _int(w, "sequence_stride", sequence_stride, 1)
    sampling_rate = _int(w, "sampling_rate", sampling_rate, 1)
    if batch_size is not None:
        batch_size = _int(w, "batch_size", batch_size, 1)
    if start_index is not None:
        start_index = _int(w, "start_index", start_index, 0)
        if start_index >= len(data):
            raise ValueError(f"[{w}] start_index must be lower than the length of the data "
                             f"({len(data)}), got {start_index}")
    if end_index is not None:
        if start_index and end_index <= start_index:
            raise ValueError(f"[{w}] end_index ({end_index}) must be higher than start_index "
                             f"({start_index})")
        if end_index >= len(data):
            raise ValueError(f"[{w}] end_index must be lower than the length of the data "
                             f"({len(data)}), got {end_index}")
        end_index = _int(w, "end_index", end_index, 1)
    if targets is not None:
        targets = np.asarray(targets)
        if len(targets) != len(data):
            raise ValueError(f"[{w}] data and targets must have the same length, got "
                             f"{len(data)} and {len(targets)}")
    start = start_index or 0
    end = len(data) if end_index is None else end_index
    n = end - start - (sequence_length - 1) * sampling_rate
    if targets is not None:
        n = min(n, len(targets))
    positions = np.arange(0, max(n, 0), sequence_stride, dtype=np.int64)
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        np.random.RandomState(seed).shuffle(positions)
    idx = start + positions[:, None] + np.arange(sequence_length) * sampling_rate
    windows = data[idx] if len(positions) else np.zeros((0, sequence_length) + data.shape[1:],
                                                        data.dtype)
    if len(positions) == 0:
        raise ValueError(f"[{w}] no window of sequence_length={sequence_length} and "
                         f"sampling_rate={sampling_rate} fits in rows [{start}, {end})")
    elements = windows if targets is None else (windows, targets[start + positions])
    ds = _data.Dataset.from_tensor_slices(elements)
    return ds if batch_size is None else ds.batch(batch_size)


def _split_sizes(left, right, total):
    w = "split_dataset"
    for name, v in (("left_size", left), ("right_size", right)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"[{w}] {name} must be an int, a float or None, got {v!r}")
    if left is None and right is None:
        raise ValueError(f"[{w}] give left_size or right_size (or both)")
    for name, v in (("left_size", left), ("right_size", right)):
        if isinstance(v, int) and not 0 < v < total or isinstance(v, float) and not 0 < v < 1:
            raise ValueError(f"[{w}] {name} must be an int in (0, {total}) or a float in (0, 1), "
                             f"got {v!r}")
    if isinstance(left, float) and isinstance(right, float) and left + right > 1:
        raise ValueError(f"[{w}] left_size + right_size is {left + right}, more than 1")
    left = round(left * total) if isinstance(left, float) else left
    right = round(right * total) if isinstance(right, float) else right
    left = total - right if left is None else left
    right = total - left if right is None else right
    if left + right > total:
        raise ValueError(f"[{w}] left_size + right_size = {left + right} is more than the "
                         f"{total} samples")
    for side, v in (("left", left), ("right", right)):
        if v == 0:
            raise ValueError(f"[{w}] with {total} samples, left_size={left} and right_size="
                             f"{right}, the {side} split would be empty")
    return int(left), int(right)


def split_dataset(dataset, left_size=None, right_size=None, shuffle=False, seed=None):
    """Splits samples in two tessera.data.Datasets, like
    keras.utils.split_dataset: `dataset` is an array, a tuple/list of arrays
    with the same first axis, or an unbatched-by-you tessera Dataset
    (batched ones are split by sample and batched again alike); sizes are
    ints (samples) or floats (fractions, rounded), one may be None (the
    rest). shuffle uses Python's random.seed(seed) as Keras."""
    batch = None
    if isinstance(dataset, _data.Dataset):
        batch = dataset.batch_size
        parts = [b if isinstance(b, tuple) else (b,) for b in dataset]
        if batch is None:
            arrays = [np.stack([p[k] for p in parts]) for k in range(len(parts[0]))]
        else:
            arrays = [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]
        tupled = len(arrays) > 1
    elif isinstance(dataset, (tuple, list)) and dataset and all(
            isinstance(a, np.ndarray) for a in dataset):
        arrays, tupled = [np.asarray(a) for a in dataset], True
    else:
        arrays, tupled = [np.asarray(dataset)], False
    total = len(arrays[0])
    if any(len(a) != total for a in arrays):
        raise ValueError(f"[split_dataset] the arrays have different numbers of samples: "
                         f"{[len(a) for a in arrays]}")
    left, right = _split_sizes(left_size, right_size, total)
    order = list(range(total))
    if shuffle:
        if seed is None:
            seed = _random.randint(0, int(1e6))
        _random.seed(seed)
        _random.shuffle(order)
    order = np.array(order, dtype=np.int64)
    out = []
    for rows in (order[:left], order[total - right:]):
        picked = [a[rows] for a in arrays]
        ds = _data.Dataset.from_tensor_slices(tuple(picked) if tupled else picked[0])
        out.append(ds if batch is None else ds.batch(batch))
    return tuple(out)


class PyDataset:
    """Keras's PyDataset: subclass it with __len__ (batches per epoch) and
    __getitem__(i) (batch i: x, (x, y) or (x, y, sample_weight)), and
    optionally on_epoch_begin/on_epoch_end; fit, evaluate and predict take
    it. workers / use_multiprocessing / max_queue_size are accepted; tessera
    reads the batches in order on the calling thread (its runtime owns the
    cores), each batch as given (its size and shapes may vary, as Keras's)."""

    def __init__(self, workers=1, use_multiprocessing=False, max_queue_size=10):
        for name, v, lo in (("workers", workers, 1), ("max_queue_size", max_queue_size, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"[PyDataset] {name} must be an int >= {lo}, got {v!r}")
        self._workers = workers
        self._use_multiprocessing = bool(use_multiprocessing)
        self._max_queue_size = max_queue_size

    @property
    def workers(self):
        return self._workers

    @property
    def use_multiprocessing(self):
        return self._use_multiprocessing

    @property
    def max_queue_size(self):
        return self._max_queue_size

    def __getitem__(self, index):
        raise NotImplementedError(f"[PyDataset] {type(self).__name__} must define "
                                  "__getitem__(index)")

    def __len__(self):
        raise NotImplementedError(f"[PyDataset] {type(self).__name__} must define __len__")

    @property
    def num_batches(self):
        try:
            return len(self)
        except NotImplementedError:
            return None

    def on_epoch_begin(self):
        pass

    def on_epoch_end(self):
        pass

    def _to_dataset(self, where, shuffle_seed=None, form=None):
        """Its batches as fit, evaluate and predict read them: each as given, of
        its own size and shape (given_batches.py); on_epoch_begin/on_epoch_end
        around each pass; in a shuffled order with shuffle_seed (fit's shuffle);
        form: the model's flattening of each batch (given_batches.batch_parts)."""
        return pydataset_batches(self, where, shuffle_seed, form)


Sequence = PyDataset  # Keras 2's name, still exported by Keras 3


def iterator_dataset(it, where: str, steps=None):
    """Keras's generator input of fit, evaluate and predict (a Python generator or
    iterator of batches x, (x, y) or (x, y, sample_weight)): each epoch takes `steps`
    batches from it, or runs until it ends, each batch as given (given_batches.py)."""
    return generator_batches(it, where, steps)


class Progbar:
    """A text progress bar, like keras.utils.Progbar: update(current,
    values) shows the running average of each value since the start
    (stateful_metrics are shown as given; with stateless_metrics, only
    those are averaged), with the time per step; the final update shows
    the values given, as Keras's."""

    def __init__(self, target, width=20, verbose=1, interval=0.05, stateful_metrics=None,
                 stateless_metrics=None, unit_name="step"):
        if target is not None and (isinstance(target, bool) or not isinstance(target, int)
                                   or target < 0):
            raise ValueError(f"[Progbar] target must be None or an int >= 0, got {target!r}")
        if stateful_metrics is not None and stateless_metrics is not None:
            raise ValueError("[Progbar] give stateful_metrics (averaged but these) or "
                             "stateless_metrics (shown as given but these), not both")
        self.target, self.width, self.verbose = target, int(width), verbose
        self.interval, self.unit_name = float(interval), unit_name
        self.stateful_metrics = None if stateless_metrics is not None else \
            set(stateful_metrics or ())
        self.stateless_metrics = None if stateless_metrics is None else set(stateless_metrics)
        self._dynamic = (hasattr(sys.stdout, "isatty") and sys.stdout.isatty())
        self._total_width = 0
        self._seen_so_far = 0
        self._values: dict = {}
        self._values_order: list = []
        self._start = time.time()
        self._last_update = 0.0

    def value(self, name):
        """The value shown for `name` (the running average, or the last
        stateful value)."""
        v = self._values[name]
        return v[0] / max(1, v[1])

    def update(self, current, values=None, finalize=None):
        """Moves the bar to `current` with [(name, value), ...]."""
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        for k, v in values or []:
            if k not in self._values_order:
                self._values_order.append(k)
            stateless = k not in self.stateful_metrics if self.stateful_metrics is not None \
                else k in self.stateless_metrics
            if stateless and not finalize:
                # averaged over the steps since the start, as Keras's
                step = max(1, current - self._seen_so_far)
                old = self._values.get(k, [0.0, 0])
                self._values[k] = [old[0] + float(np.mean(v)) * step, old[1] + step]
            else:
                # shown as given (Keras also shows a stateless value as given
                # on the final update)
                self._values[k] = [v, 1]
        self._seen_so_far = current
        now = time.time()
        if self.verbose == 0 or (self.verbose == 1 and not finalize and
                                 now - self._last_update < self.interval):
            return
        per = (now - self._start) / current if current else 0.0
        if self.target is not None:
            digits = int(math.log10(self.target)) + 1 if self.target else 1
            bar = f"{current:{digits}d}/{self.target}"
            if self.verbose == 1:
                done = int(self.width * current / self.target) if self.target else self.width
                bar += " [" + "=" * max(0, done - 1) + (">" if done < self.width else "=") * \
                    (done > 0) + "." * (self.width - done) + "]"
        else:
            bar = f"{current:7d}/Unknown"
        info = f" {now - self._start:.0f}s" if finalize else \
            (f" ETA {per * (self.target - current):.0f}s" if self.target else "")
        info += f" {per * 1e3:.0f}ms/{self.unit_name}" if per < 1 else \
            f" {per:.0f}s/{self.unit_name}"
        for k in self._values_order:
            v = self.value(k)
            info += f" - {k}: " + (f"{v:.4f}" if isinstance(v, (float, np.floating)) and
                                   abs(v) > 1e-3 else f"{v:.4e}" if isinstance(
                                       v, (float, np.floating)) else f"{v}")
        if not _interactive_logging[0]:  # Keras: progress goes to logging, one line each
            if self.verbose == 1 and not finalize:
                return
            logging.getLogger("tessera").info(bar + info)
            self._last_update = now
            return
        if self.verbose == 1:
            line = bar + info
            pad = max(0, self._total_width - len(line))
            sys.stdout.write(("\r" if self._dynamic else "") + line + " " * pad +
                             ("\n" if finalize or not self._dynamic else ""))
            self._total_width = len(line)
        elif finalize:
            sys.stdout.write(bar + info + "\n")
        sys.stdout.flush()
        self._last_update = now

    def add(self, n, values=None):
        self.update(self._seen_so_far + n, values)


def get_file(fname=None, origin=None, untar=False, md5_hash=None, file_hash=None,
             cache_subdir="datasets", hash_algorithm="auto", extract=False,
             archive_format="auto", cache_dir=None, force_download=False):
    """keras.utils.get_file without the network: tessera does not download.
    `origin` must be a local path or a file: URL; the file is copied into
    cache_dir/cache_subdir (default ~/.keras/datasets, or $KERAS_HOME),
    through a temporary and a rename, its hash checked when file_hash is
    given; the cached path is returned. An http(s)/ftp origin is refused
    (download it yourself, then pass its path)."""
    w = "get_file"
    if origin is None:
        raise ValueError(f"[{w}] origin is required (a local path or a file: URL)")
    if untar or extract:
        raise ValueError(f"[{w}] extract/untar is not supported (archives are untrusted input); "
                         "extract the archive yourself")
    url = urlparse(str(origin))
    if url.scheme in ("http", "https", "ftp", "ftps", "s3", "gs"):
        raise ValueError(f"[{w}] tessera does not download: origin {origin!r} is a network "
                         "address. Download the file yourself and pass its path (or a file: "
                         "URL) as origin")
    if url.scheme == "file":
        src = unquote(url.path)
    elif url.scheme in ("",) or len(url.scheme) == 1:  # a path (or a Windows drive)
        src = str(origin)
    else:
        raise ValueError(f"[{w}] origin {origin!r} has the scheme {url.scheme!r}; give a local "
                         "path or a file: URL")
    if not os.path.isfile(src):
        raise FileNotFoundError(f"[{w}] origin {src!r} is not a regular file")
    fname = fname or os.path.basename(src)
    if os.path.basename(fname) != fname or fname in ("", ".", ".."):
        raise ValueError(f"[{w}] fname must be a file name without folders, got {fname!r}")
    if cache_dir is None:
        cache_dir = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".keras")
    folder = os.path.join(os.fspath(cache_dir), cache_subdir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, fname)
    want = file_hash or md5_hash

    def digest(p):
        algo = hash_algorithm
        if algo == "auto":
            algo = "sha256" if want is None or len(want) == 64 else "md5"
        if algo not in ("sha256", "md5"):
            raise ValueError(f"[{w}] hash_algorithm must be 'auto', 'sha256' or 'md5', got "
                             f"{hash_algorithm!r}")
        h = hashlib.new(algo)
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()

    if os.path.isfile(path) and not force_download and (want is None or digest(path) == want):
        return path
    fd, tmp = tempfile.mkstemp(prefix=".get_file-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as f:
            shutil.copyfileobj(f, out)
        if want is not None and digest(tmp) != want:
            raise ValueError(f"[{w}] the file {src!r} does not have the expected hash {want}")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# ----------------------------------------------------------------- serialization

def _pydot(where):
    try:
        import pydot  # noqa: PLC0415 - optional dependency, only for plot_model
    except ImportError:
        raise ImportError(f"[{where}] needs pydot (pip install pydot) and Graphviz (Debian's "
                          "graphviz package; scripts/install-deps installs both)") from None
    if shutil.which("dot") is None:
        raise ImportError(f"[{where}] needs Graphviz's `dot` program (Debian's graphviz "
                          "package; scripts/install-deps installs it)")
    return pydot


def model_to_dot(model, show_shapes=False, show_dtype=False, show_layer_names=True, rankdir="TB",
                 expand_nested=False, dpi=200, subgraph=False, show_layer_activations=False,
                 show_trainable=False, **kwargs):
    """The model's layer graph as a pydot.Dot, like keras.utils.model_to_dot
    (one node per layer, an edge per connection)."""
    pydot = _pydot("model_to_dot")
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"[model_to_dot] rankdir must be 'TB' or 'LR', got {rankdir!r}")
    if kwargs:
        raise TypeError(f"[model_to_dot] unexpected arguments {sorted(kwargs)}")
    dot = pydot.Dot(graph_type="digraph", rankdir=rankdir, dpi=str(dpi),
                    concentrate="true")
    dot.set_node_defaults(shape="record")
    layers = list(getattr(model, "layers", []))
    ids = {}
    for layer in layers:
        ids[id(layer)] = str(id(layer))
        label = f"{layer.name} ({type(layer).__name__})" if show_layer_names else \
            type(layer).__name__
        if show_layer_activations and getattr(layer, "activation", None) is not None:
            act = layer.activation
            label += f" | activation: {getattr(act, '__name__', act)}"
        if show_shapes:
            try:
                label += f" | in: {layer.input_shape} | out: {layer.output_shape}"
            except AttributeError:
                pass
        if show_dtype:
            label += f" | dtype: {layer.dtype or 'float32'}"
        if show_trainable:
            label += f" | trainable: {layer.trainable}"
        dot.add_node(pydot.Node(ids[id(layer)], label="{" + label.replace(">", "\\>")
                                .replace("<", "\\<") + "}"))
    edges = _edges(model, layers)
    if edges is None:  # Sequential: a chain
        edges = list(zip(layers, layers[1:]))
    for a, b in edges:
        dot.add_edge(pydot.Edge(ids[id(a)], ids[id(b)]))
    return dot


def _edges(model, layers):
    """(producer layer, consumer layer) pairs of a functional model, from
    its symbolic graph; None for a Sequential."""
    outputs = getattr(model, "_outputs", None)
    if not outputs:
        return None
    known = {id(layer) for layer in layers}
    edges, seen, stack = [], set(), list(outputs)

    def producer(t):
        while t is not None and t.op == "item":
            t = t.args[0]
        if t is not None and t.op == "layer":
            return t.args[0]
        return None

    while stack:
        t = stack.pop()
        if id(t) in seen or not isinstance(t, KerasTensor):
            continue
        seen.add(id(t))
        me = producer(t)
        node = t
        while node.op == "item":
            node = node.args[0]
        parents = node.args[1] if node.op == "layer" else ()
        for p in parents:
            src = producer(p)
            if me is not None and src is not None and id(me) in known and id(src) in known:
                edges.append((src, me))
            stack.append(p)
    return list(dict.fromkeys(edges))


def plot_model(model, to_file="model.png", show_shapes=False, show_dtype=False,
               show_layer_names=True, rankdir="TB", expand_nested=False, dpi=200,
               show_layer_activations=False, show_trainable=False, **kwargs):
    """Draws the model's layer graph with Graphviz into to_file (.png, .svg,
    .pdf, .dot ...), like keras.utils.plot_model; needs pydot and Graphviz
    (an ImportError naming them otherwise). The file is written to a
    temporary in its folder and renamed."""
    dot = model_to_dot(model, show_shapes=show_shapes, show_dtype=show_dtype,
                       show_layer_names=show_layer_names, rankdir=rankdir,
                       expand_nested=expand_nested, dpi=dpi,
                       show_layer_activations=show_layer_activations,
                       show_trainable=show_trainable, **kwargs)
    to_file = os.fspath(to_file)
    ext = os.path.splitext(to_file)[1][1:].lower() or "png"
    folder = os.path.dirname(os.path.abspath(to_file))
    fd, tmp = tempfile.mkstemp(prefix=".plot_model-", suffix="." + ext, dir=folder)
    os.close(fd)
    try:
        if ext == "dot":
            with open(tmp, "w") as f:
                f.write(dot.to_string())
        else:
            dot.write(tmp, format=ext)
        os.replace(tmp, to_file)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------- small Keras helpers

def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    """Keras's packing of a step's data: x alone (a 1-tuple when x is a list or
    tuple, so it is not taken for (x, y)), (x, y) or (x, y, sample_weight)."""
    if y is None:
        return (x,) if isinstance(x, (list, tuple)) else x
    if sample_weight is None:
        return (x, y)
    return (x, y, sample_weight)


def unpack_x_y_sample_weight(data):
    """(x, y, sample_weight) from data packed as above, None for what is absent."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return (data, None, None)
    if len(data) == 1:
        return (data[0], None, None)
    if len(data) == 2:
        return (data[0], data[1], None)
    if len(data) == 3:
        return data
    raise ValueError(f"[unpack_x_y_sample_weight] data must be x, (x,), (x, y) or "
                     f"(x, y, sample_weight), got a tuple of {len(data)}: {data!r}")


class Config:
    """keras.utils.Config: a dict of settings read and written as attributes
    or items (``config.lr = 0.1``; ``config["lr"]``), which freeze() makes
    read-only; iteration gives the keys sorted."""

    def __init__(self, **kwargs):
        object.__setattr__(self, "_config", kwargs)
        object.__setattr__(self, "_frozen", False)

    @property
    def frozen(self):
        return self._frozen

    def freeze(self):
        object.__setattr__(self, "_frozen", True)

    def unfreeze(self):
        object.__setattr__(self, "_frozen", False)

    def _check_mutable(self):
        if self._frozen:
            raise ValueError("[utils.Config] Cannot mutate attribute(s) because the config is "
                             "frozen (unfreeze() first)")

    def as_dict(self):
        return dict(self._config)

    def to_json(self):
        return json.dumps(self._config)

    def keys(self):
        return self._config.keys()

    def values(self):
        return self._config.values()

    def items(self):
        return self._config.items()

    def pop(self, *args):
        self._check_mutable()
        return self._config.pop(*args)

    def update(self, *args, **kwargs):
        self._check_mutable()
        return self._config.update(*args, **kwargs)

    def get(self, keyname, value=None):
        return self._config.get(keyname, value)

    def __setattr__(self, name, value):
        if hasattr(type(self), name):
            raise AttributeError(f"[utils.Config] {name!r} is a method of Config, not a setting")
        self._check_mutable()
        self._config[name] = value

    def __getattr__(self, name):
        config = object.__getattribute__(self, "_config")
        if name in config:
            return config[name]
        close = difflib.get_close_matches(name, list(config), n=1, cutoff=0.7)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise AttributeError(f"Unknown attribute: '{name}'.{hint}")

    def __setitem__(self, key, item):
        self._check_mutable()
        self._config[key] = item

    def __getitem__(self, key):
        return self._config[key]

    def __delitem__(self, key):
        self._check_mutable()
        del self._config[key]

    def __contains__(self, item):
        return item in self._config

    def __iter__(self):
        return iter(sorted(self._config))

    def __len__(self):
        return len(self._config)

    def __repr__(self):
        return f"<Config {self._config}>"


def get_source_inputs(tensor, layer=None, node_index=None):
    """The Inputs a symbolic tensor was computed from (itself if it is one), in
    the order a depth-first walk from it meets them, as keras.utils."""
    if not isinstance(tensor, KerasTensor):
        raise TypeError(f"[utils.get_source_inputs] expects a symbolic tensor (from "
                        f"keras.Input or a layer called on one), got {type(tensor).__name__}")
    found, seen, stack = [], set(), [tensor]
    while stack:
        t = stack.pop()
        if t.id in seen:
            continue
        seen.add(t.id)
        if t.op == "input":
            found.append(t)
            continue
        stack.extend(reversed(_deps(t)))
    return found


def is_keras_tensor(x):
    """True for a symbolic tensor (an Input or what layers made of one)."""
    return isinstance(x, KerasTensor)


def standardize_dtype(dtype):
    """A dtype's name as Keras writes it: None is float32 (floatx), Python's int
    and "int" int32, float float32; NumPy and JAX dtypes by their names; others
    ("float", "double") a ValueError, as Keras's."""
    return "float32" if dtype is None else keras_dtype(dtype)


def clear_session(free_memory=True):
    """Restarts automatic names, as Keras's: the next Dense is 'dense' again."""
    _name_counts.clear()


_interactive_logging = [True]


def disable_interactive_logging():
    """Progress bars write to Python's logging ('tessera' logger, one line per
    epoch) instead of the terminal, as Keras's."""
    _interactive_logging[0] = False


def enable_interactive_logging():
    """Progress bars write to the terminal again (the default)."""
    _interactive_logging[0] = True


def is_interactive_logging_enabled():
    return _interactive_logging[0]
