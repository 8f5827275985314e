"""What callbacks.TensorBoard writes besides scalars, as Keras 3.15's callback
does: its arguments checked, the weights it logs (histograms and images, in
Keras's order and shapes), the embedding projector's configuration, and the
batches profiled with tessera's own tracer (tessera.trace)."""

from __future__ import annotations

import os
import warnings

import numpy as np

from .. import _core, distributed
from ..trace import Trace
from ._config import SETTINGS
from .layers.core import Embedding
from .symbolic import user_location
from .weights_file import write_atomic

# Keras names every embedding so: the first weighted layer's variable in a
# TensorFlow checkpoint (its projector reads such checkpoints only).
EMBEDDING_TENSOR_NAME = "layer_with_weights-0/embeddings/.ATTRIBUTES/VARIABLE_VALUE"


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_freq(name: str, value) -> int:
    """histogram_freq / embeddings_freq: a whole number of epochs, 0 for never."""
    if not _is_int(value):
        raise TypeError(f"[TensorBoard] {name} must be a non-negative int (epochs), got "
                        f"{value!r} of type {type(value).__name__} (at {user_location()})")
    if value < 0:
        raise ValueError(f"[TensorBoard] {name} must be a non-negative int (epochs), got "
                         f"{value} (at {user_location()})")
    return int(value)


def check_flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"[TensorBoard] {name} must be True or False, got {value!r} of type "
                        f"{type(value).__name__} (at {user_location()})")
    return bool(value)


def check_metadata(value):
    """embeddings_metadata: None, one file name for every Embedding layer, or
    {layer name: file name}."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, (str, os.PathLike))
                                       for k, v in value.items()):
        return {k: os.fspath(v) for k, v in value.items()}
    raise TypeError(f"[TensorBoard] embeddings_metadata must be None, a file name or a dict of "
                    f"Embedding layer names to file names, got {value!r} (at "
                    f"{user_location()})")


def profile_range(profile_batch) -> tuple:
    """(start, stop) of the training batches to profile (counted from 1
    over the whole fit), as Keras's _init_profile_batch reads the argument:
    an int N (batch N alone; 0: none), a pair (start, stop), or their text
    "N" / "start,stop"."""
    message = (f"[TensorBoard] profile_batch must be a non-negative integer or a pair of positive "
               f"integers (start, stop) with start <= stop, got {profile_batch!r} (at "
               f"{{where}})")
    value = profile_batch
    if isinstance(value, str):
        try:
            value = [int(p) for p in value.split(",")]
        except ValueError:
            raise ValueError(message.format(where=user_location())) from None
        value = value[0] if len(value) == 1 else value
    if _is_int(value) or isinstance(value, (bool, np.bool_)):  # Keras: True is batch 1
        start = stop = int(value)
    elif isinstance(value, (tuple, list)) and len(value) == 2 and all(_is_int(v) for v in value):
        start, stop = int(value[0]), int(value[1])
        if start == 0:  # Keras takes it and never starts: batches count from 1
            raise ValueError(message.format(where=user_location()))
    else:
        error = ValueError if isinstance(value, (tuple, list)) else TypeError
        raise error(message.format(where=user_location()))
    if start < 0 or stop < start:
        raise ValueError(message.format(where=user_location()))
    return start, stop


def logged_weights(model) -> list:
    """[(tag prefix, array)] of every weight of every layer in model.layers,
    Keras's order (a weight's path with ':' made '_'), each whole: a weight
    split over a tensor group is gathered (a collective every locality
    joins, so every locality calls this)."""
    whole = model.whole_weights()
    var_of = getattr(model, "_var_of", {})
    out = []
    for layer in model.layers:
        for w in layer.weights:
            key = var_of.get((id(getattr(w, "_layer", None)), getattr(w, "_param", None)))
            value = whole[key] if key in whole else w.numpy()
            out.append((w.path.replace(":", "_"), np.asarray(value)))
    return out


def weight_image(value):
    """A weight as Keras's _log_weight_as_image shapes it, [k, h, w, c], or
    None where Keras logs no image: squeezed, a vector one column of one
    image, a matrix one image with its longer side across (transposed when
    taller than wide), a 3-D kernel one image per last-axis slice (its
    filters, channels_last), and a 4-D array only when its last axis can be
    colour channels (1, 3 or 4)."""
    w = np.squeeze(value)
    if w.ndim == 1:
        w = w.reshape(1, w.shape[0], 1, 1)
    elif w.ndim == 2:
        if w.shape[0] > w.shape[1]:
            w = w.T
        w = w.reshape(1, w.shape[0], w.shape[1], 1)
    elif w.ndim == 3:
        if SETTINGS["image_data_format"] == "channels_last":
            w = np.transpose(w, (2, 0, 1))
        w = w.reshape(w.shape + (1,))
    if w.ndim == 4 and w.shape[-1] in (1, 3, 4):
        return w
    return None


def _text_string(s: str) -> str:
    """A string as protobuf's text format writes it (C escapes, bytes past
    ASCII in octal)."""
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[c])
        elif c in "\"'\\":
            out.append("\\" + c)
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def projector_config(model, metadata) -> str:
    """The text of projector_config.pbtxt Keras writes: an `embeddings`
    entry for each Embedding layer among model.layers, with its metadata
    file (one name for all, or the layer's in the dict; a name there that
    is no Embedding layer's is an error, as in Keras)."""
    left = dict(metadata) if isinstance(metadata, dict) else None
    text = ""
    for layer in model.layers:
        if not isinstance(layer, Embedding):
            continue
        text += f"embeddings {{\n  tensor_name: {_text_string(EMBEDDING_TENSOR_NAME)}\n"
        path = metadata if isinstance(metadata, str) else \
            left.pop(layer.name, None) if left is not None else None
        if path is not None:
            text += f"  metadata_path: {_text_string(path)}\n"
        text += "}\n"
    if left:
        raise ValueError(f"[TensorBoard] embeddings_metadata names layers that are not "
                         f"Embedding layers of the model: {sorted(left)} (at "
                         f"{user_location()})")
    return text


def write_projector_config(log_dir: str, text: str):
    os.makedirs(log_dir, exist_ok=True)
    write_atomic(os.path.join(log_dir, "projector_config.pbtxt"), [text.encode()],
                 durable=False)


class BatchTracer:
    """Keras profiles batches start..stop with the backend's profiler (on
    JAX, jax.profiler into log_dir/train/plugins/profile; Keras 3.15 turns it
    off with a warning below Python 3.12). tessera records them with its own
    tracer instead, into log_dir/train/tessera_trace_batch_<start>-<stop>/
    (each locality's locality-R.trace; on one locality also trace.json,
    report.html, tree.dot and counters.csv: open trace.json in Perfetto or
    chrome://tracing, or run `tessera report` on the folder). A later fit
    into the same log_dir profiling the same batches replaces these files."""

    def __init__(self, start: int, stop: int):
        self.start, self.stop = start, stop
        self.trace = None
        self.directory = None

    def begin(self, train_dir: str):
        if _core._trace_active():
            # as Keras, whose profiler errors are not fatal: training goes on, untraced
            warnings.warn("[TensorBoard] profile_batch: a tessera trace is already being "
                          "recorded in this process (tessera.trace or tessera run --trace), "
                          "so batches "
                          f"{self.start}-{self.stop} are part of that one, not traced apart",
                          stacklevel=3)
            return
        # (the same name on every locality; a later fit into this log_dir replaces the files)
        self.directory = os.path.join(train_dir, f"tessera_trace_batch_{self.start}-{self.stop}")
        self.trace = Trace(self.directory).start()

    @property
    def tracing(self) -> bool:
        return self.trace is not None

    def end(self):
        trace, self.trace = self.trace, None
        trace.stop()
        if distributed.size() == 1:
            trace.export()
