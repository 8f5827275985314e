"""keras.utils.text_dataset_from_directory, image_dataset_from_directory and
audio_dataset_from_directory: a folder of class subfolders into a
tessera.data.Dataset of (samples, labels), indexed, shuffled and split as Keras
does.

The folder is untrusted: links are never followed out of it (with
follow_links=False no link is followed at all), files are opened without
following a link planted in their place, an image's pixel count is checked
from its header before it is decoded, and a WAV file's claimed frames against
the bytes it has."""

from __future__ import annotations

import io
import os
import struct
import wave

import numpy as np

from .. import data as _data
from .given_batches import GivenBatches
from .layers import Resizing

_MAX_TEXT_BYTES = 64 << 20
_MAX_IMAGE_PIXELS = 1 << 26  # 67 M pixels, a decompression bomb beyond


def _inside(root_real: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == root_real or real.startswith(root_real + os.sep)


def _walk(top: str, root_real: str, follow_links: bool):
    """(folder, sorted file names) of the tree under top, sorted by folder
    as Keras's; links only with follow_links and only into the root."""
    out = []
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            raise ValueError(f"[dataset_from_directory] cannot list {d}: {e}") from None
        files = []
        for e in entries:
            if e.is_symlink():
                if not follow_links or not _inside(root_real, e.path):
                    continue
            if e.is_dir(follow_symlinks=follow_links):
                stack.append(e.path)
            elif e.is_file(follow_symlinks=follow_links):
                files.append(e.name)
        out.append((d, files))
    return sorted(out, key=lambda x: x[0])


def _index(directory, labels, formats, class_names, shuffle, seed, follow_links, where):
    """Keras's index_directory: (file paths, labels or None, class names)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise ValueError(f"[{where}] directory {directory!r} is not a folder")
    root_real = os.path.realpath(directory)
    if labels not in ("inferred", None):
        if not isinstance(labels, (list, tuple)):
            raise ValueError(f"[{where}] labels must be 'inferred', None or a list of ints, got "
                             f"{labels!r}")
        if class_names is not None:
            raise ValueError(f"[{where}] class_names is only for labels='inferred' (with a list "
                             "of labels the class names are the sorted labels)")
    if labels is None and class_names is not None:
        raise ValueError(f"[{where}] class_names needs labels='inferred'")
    if labels == "inferred":
        subdirs = [d for d in sorted(os.listdir(directory))
                   if not d.startswith(".") and os.path.isdir(os.path.join(directory, d)) and
                   (follow_links or not os.path.islink(os.path.join(directory, d))) and
                   _inside(root_real, os.path.join(directory, d))]
        if class_names is not None:
            if not set(class_names) <= set(subdirs):
                raise ValueError(f"[{where}] class_names {list(class_names)} must be "
                                 f"subfolders of {directory}: {subdirs}")
            subdirs = list(class_names)
        tops = [(os.path.join(directory, d), i) for i, d in enumerate(subdirs)]
        class_names = subdirs
    else:
        tops = [(directory, None)]
    paths, found = [], []
    for top, label in tops:
        for folder, files in _walk(top, root_real, follow_links):
            for name in files:
                if name.lower().endswith(formats):
                    paths.append(os.path.join(folder, name))
                    found.append(label)
    if labels == "inferred":
        labels = np.array(found, dtype=np.int32)
    elif labels is not None:
        if len(labels) != len(paths):
            raise ValueError(f"[{where}] {len(labels)} labels for the {len(paths)} files found "
                             f"in {directory}")
        class_names = [str(v) for v in sorted(set(labels))]
        labels = np.asarray(labels)
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        np.random.RandomState(seed).shuffle(paths)
        if labels is not None:
            np.random.RandomState(seed).shuffle(labels)
    return paths, labels, class_names


def _split(paths, labels, validation_split, subset, shuffle, seed, where):
    if validation_split is None:
        if subset is not None:
            raise ValueError(f"[{where}] subset needs validation_split")
        return [(paths, labels)]
    if not 0 < validation_split < 1:
        raise ValueError(f"[{where}] validation_split must be in (0, 1), got {validation_split!r}")
    if subset not in ("training", "validation", "both"):
        raise ValueError(f"[{where}] with validation_split, subset must be 'training', "
                         f"'validation' or 'both', got {subset!r}")
    if shuffle and seed is None:
        raise ValueError(f"[{where}] validation_split with shuffle needs a seed, so that the "
                         "training and validation subsets do not overlap")
    n_val = int(validation_split * len(paths))
    cut = len(paths) - n_val
    train = (paths[:cut], None if labels is None else labels[:cut])
    val = (paths[cut:], None if labels is None else labels[cut:])
    return {"training": [train], "validation": [val], "both": [train, val]}[subset]


def _encode_labels(labels, label_mode, n_classes, where):
    if label_mode not in ("int", "categorical", "binary", None):
        raise ValueError(f"[{where}] label_mode must be 'int', 'categorical', 'binary' or None, "
                         f"got {label_mode!r}")
    if label_mode == "binary" and n_classes != 2:
        raise ValueError(f"[{where}] label_mode='binary' needs exactly 2 classes, found "
                         f"{n_classes}")
    if label_mode == "int":
        return labels.astype(np.int32)
    if label_mode == "binary":
        return labels.astype(np.float32).reshape(-1, 1)
    return np.eye(n_classes, dtype=np.float32)[labels.astype(np.int64)]


def _read(path, limit, where):
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"[{where}] {path} is larger than {limit} bytes")
    return data


def _dataset(samples, labels, label_mode, class_names, batch_size, where):
    if batch_size is not None and (isinstance(batch_size, bool) or
                                   not isinstance(batch_size, int) or batch_size <= 0):
        raise ValueError(f"[{where}] batch_size must be a positive int or None, got "
                         f"{batch_size!r}")
    if labels is None or label_mode is None:
        ds = _data.Dataset.from_tensor_slices(samples)
    else:
        ds = _data.Dataset.from_tensor_slices(
            (samples, _encode_labels(labels, label_mode, len(class_names), where)))
    ds = ds if batch_size is None else ds.batch(batch_size)
    ds.class_names = class_names
    ds.file_paths = None
    return ds


def text_dataset_from_directory(directory, labels="inferred", label_mode="int",
                                class_names=None, batch_size=32, max_length=None, shuffle=True,
                                seed=None, validation_split=None, subset=None,
                                follow_links=False, verbose=True):
    """A Dataset of (texts, labels) from the .txt files of directory's
    class subfolders, like keras.utils.text_dataset_from_directory (texts
    as a NumPy str array, UTF-8; max_length truncates each to that many
    characters). Everything is read into memory."""
    w = "text_dataset_from_directory"
    if max_length is not None and (isinstance(max_length, bool) or
                                   not isinstance(max_length, int) or max_length <= 0):
        raise ValueError(f"[{w}] max_length must be a positive int or None, got {max_length!r}")
    paths, labs, names = _index(directory, labels, (".txt",), class_names, shuffle, seed,
                                follow_links, w)
    if verbose:
        print(f"Found {len(paths)} files" + ("." if labs is None else
                                             f" belonging to {len(names)} classes."))
    out = []
    for part_paths, part_labels in _split(paths, labs, validation_split, subset, shuffle, seed,
                                          w):
        texts = []
        for p in part_paths:
            t = _read(p, _MAX_TEXT_BYTES, w).decode("utf-8", errors="replace")
            texts.append(t[:max_length] if max_length else t)
        arr = np.array(texts, dtype=str) if texts else np.zeros((0,), dtype=str)
        ds = _dataset(arr, part_labels, label_mode, names, batch_size, w)
        ds.file_paths = part_paths
        out.append(ds)
    return out[0] if len(out) == 1 else tuple(out)


_IMAGE_FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")


def image_dataset_from_directory(directory, labels="inferred", label_mode="int",
                                 class_names=None, color_mode="rgb", batch_size=32,
                                 image_size=(256, 256), shuffle=True, seed=None,
                                 validation_split=None, subset=None, interpolation="bilinear",
                                 follow_links=False, crop_to_aspect_ratio=False,
                                 pad_to_aspect_ratio=False, data_format=None, verbose=True):
    """A Dataset of (images, labels) from the images (bmp, gif, jpeg, png)
    of directory's class subfolders, like
    keras.utils.image_dataset_from_directory: float32 pixels in [0, 255],
    resized to image_size (tessera's Resizing, bilinear or nearest).
    Decoding needs Pillow (an ImportError naming it otherwise). Everything is
    read into memory."""
    w = "image_dataset_from_directory"
    channels = {"rgb": 3, "rgba": 4, "grayscale": 1}.get(color_mode)
    if channels is None:
        raise ValueError(f"[{w}] color_mode must be 'rgb', 'rgba' or 'grayscale', got "
                         f"{color_mode!r}")
    try:
        h, wd = (int(v) for v in image_size)
    except (TypeError, ValueError):
        raise ValueError(f"[{w}] image_size must be (height, width), got {image_size!r}") from None
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"[{w}] data_format must be 'channels_last' or 'channels_first', got "
                         f"{data_format!r}")
    try:
        from PIL import Image  # noqa: PLC0415 - optional dependency, only for image folders
    except ImportError:
        raise ImportError(f"[{w}] decoding images needs Pillow (pip install pillow)") from None
    resize = Resizing(h, wd, interpolation=interpolation,
                      crop_to_aspect_ratio=crop_to_aspect_ratio,
                      pad_to_aspect_ratio=pad_to_aspect_ratio)
    paths, labs, names = _index(directory, labels, _IMAGE_FORMATS, class_names, shuffle, seed,
                                follow_links, w)
    if verbose:
        print(f"Found {len(paths)} files" + ("." if labs is None else
                                             f" belonging to {len(names)} classes."))
    mode = {"rgb": "RGB", "rgba": "RGBA", "grayscale": "L"}[color_mode]
    out = []
    for part_paths, part_labels in _split(paths, labs, validation_split, subset, shuffle, seed,
                                          w):
        images = np.zeros((len(part_paths), h, wd, channels), np.float32)
        for k, p in enumerate(part_paths):
            raw = _read(p, 1 << 30, w)
            try:
                with Image.open(io.BytesIO(raw)) as im:
                    if im.width * im.height > _MAX_IMAGE_PIXELS:
                        raise ValueError(f"[{w}] {p} claims {im.width}x{im.height} pixels, more "
                                         f"than {_MAX_IMAGE_PIXELS}")
                    a = np.asarray(im.convert(mode), dtype=np.float32)
            except Image.DecompressionBombError as e:
                raise ValueError(f"[{w}] {p} claims more pixels than allowed: {e}") from None
            except (OSError, SyntaxError) as e:
                raise ValueError(f"[{w}] {p} is not a readable image: {e}") from None
            if a.ndim == 2:
                a = a[..., None]
            images[k] = resize(a)
        if data_format == "channels_first":
            images = np.moveaxis(images, -1, 1)
        ds = _dataset(images, part_labels, label_mode, names, batch_size, w)
        ds.file_paths = part_paths
        out.append(ds)
    return out[0] if len(out) == 1 else tuple(out)


_MAX_AUDIO_BYTES = 1 << 30


def _read_file(path, limit, where) -> bytes:
    """The file's bytes (a link planted in its place is not followed), its size
    checked before anything is read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ValueError(f"[{where}] {path} is larger than {limit} bytes ({size})")
        return f.read(size)


def decode_wav(raw: bytes, path, where):
    """(samples float32 (frames, channels) in [-1, 1), frame rate) of a PCM WAV
    file's bytes: 8-bit unsigned, 16-, 24- or 32-bit signed samples divided by
    2^(bits - 1) (16-bit as tf.audio.decode_wav, which reads only 16-bit). A
    header claiming more frames than the file holds is an error naming the file."""
    try:
        with wave.open(io.BytesIO(raw), "rb") as wf:
            channels, width = wf.getnchannels(), wf.getsampwidth()
            rate, frames = wf.getframerate(), wf.getnframes()
            claimed = frames * channels * width
            if claimed > len(raw):
                raise ValueError(f"[{where}] {path} is truncated: its header claims {frames} "
                                 f"frames ({claimed} bytes), the file has {len(raw)} bytes")
            data = wf.readframes(frames)
    except (wave.Error, EOFError, struct.error) as e:
        raise ValueError(f"[{where}] {path} is not a readable PCM WAV file: {e}") from None
    if len(data) != claimed:
        raise ValueError(f"[{where}] {path} is truncated: its header claims {frames} frames "
                         f"({claimed} bytes of samples), it holds {len(data)} bytes")
    if width == 1:
        v = (np.frombuffer(data, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 3:
        b = np.frombuffer(data, np.uint8).reshape(-1, 3).astype(np.int32)
        v = (b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8  # sign-extended
        v = v.astype(np.float32) / np.float32(1 << 23)
    elif width in (2, 4):
        v = np.frombuffer(data, f"<i{width}").astype(np.float32) / \
            np.float32(1 << (8 * width - 1))
    else:
        raise ValueError(f"[{where}] {path} has {8 * width}-bit samples; 8-, 16-, 24- and "
                         "32-bit PCM are read")
    return v.reshape(frames, channels), rate


def _fit_length(a, length):
    """a (frames, channels) cut or zero-padded to `length` frames."""
    if len(a) >= length:
        return a[:length]
    return np.concatenate([a, np.zeros((length - len(a), a.shape[1]), a.dtype)])


class _AudioSamples(list):
    """Unbatched samples of different lengths (batch_size=None): a list of
    x or (x, y), with the dataset's class_names and file_paths."""


def _audio_part(paths, labels, label_mode, names, batch_size, sampling_rate, length, where):
    """One subset's Dataset: every file read now; of equal lengths, a Dataset of
    their rows; else each batch padded to its longest (Keras's padded_batch)."""
    clips = []
    for p in paths:
        a, rate = decode_wav(_read_file(p, _MAX_AUDIO_BYTES, where), p, where)
        if sampling_rate is not None and rate != sampling_rate:
            raise ValueError(f"[{where}] {p} is sampled at {rate} Hz, not sampling_rate="
                             f"{sampling_rate}: tessera does not resample audio")
        if clips and a.shape[1] != clips[0].shape[1]:
            raise ValueError(f"[{where}] {p} has {a.shape[1]} channels, {paths[0]} has "
                             f"{clips[0].shape[1]}: the files of a dataset need the same "
                             "number of channels")
        clips.append(a if length is None else _fit_length(a, length))
    if len({len(c) for c in clips}) <= 1:
        width = clips[0].shape[1] if clips else 1
        x = np.stack(clips) if clips else np.zeros((0, length or 0, width), np.float32)
        ds = _dataset(x, labels, label_mode, names, batch_size, where)
        ds.file_paths = list(paths)
        return ds
    y = None if labels is None or label_mode is None else \
        _encode_labels(labels, label_mode, len(names), where)
    if batch_size is None:
        out = _AudioSamples(clips if y is None else list(zip(clips, y)))
    else:
        batches = []
        for lo in range(0, len(clips), batch_size):
            part = clips[lo:lo + batch_size]
            longest = max(len(c) for c in part)
            x = np.stack([_fit_length(c, longest) for c in part])
            batches.append([x] if y is None else [x, y[lo:lo + batch_size]])

        def read_epoch(epoch, start):
            for i in range(start, len(batches)):
                yield i, batches[i]

        out = GivenBatches(batches[0], read_epoch, len(batches),
                           "audio_dataset_from_directory's padded batches", where)
    out.class_names, out.file_paths = names, list(paths)
    return out


def audio_dataset_from_directory(directory, labels="inferred", label_mode="int",
                                 class_names=None, batch_size=32, sampling_rate=None,
                                 output_sequence_length=None, ragged=False, shuffle=True,
                                 seed=None, validation_split=None, subset=None,
                                 follow_links=False, format="tf",  # noqa: A002 - Keras's name
                                 verbose=True):
    """A Dataset of (audio, labels) from the .wav files of directory's class
    subfolders, like keras.utils.audio_dataset_from_directory: float32 samples
    (batch, frames, channels) in [-1, 1) (PCM 8/16/24/32-bit), cut or zero-padded
    to output_sequence_length, else each batch zero-padded to its longest file (as
    Keras's padded_batch: then the batches are given as they are, of their own
    lengths). sampling_rate, if given, must be the files' rate (no resampling);
    ragged=True is not supported. Everything is read into memory."""
    w = "audio_dataset_from_directory"
    if format not in ("tf", "grain"):
        raise ValueError(f"[{w}] format must be 'tf' or 'grain', got {format!r}")
    if ragged and output_sequence_length is not None:
        raise ValueError(f"[{w}] cannot set both ragged and output_sequence_length")
    if ragged:
        raise ValueError(f"[{w}] ragged=True is not supported (tessera has no ragged tensors): "
                         "leave it False for batches padded to their longest file, or give "
                         "output_sequence_length")
    if output_sequence_length is not None and (
            isinstance(output_sequence_length, bool) or
            not isinstance(output_sequence_length, int) or output_sequence_length <= 0):
        raise ValueError(f"[{w}] output_sequence_length must be a positive int or None, got "
                         f"{output_sequence_length!r}")
    if sampling_rate is not None and (isinstance(sampling_rate, bool) or
                                      not isinstance(sampling_rate, int) or sampling_rate <= 0):
        raise ValueError(f"[{w}] sampling_rate must be a positive int or None, got "
                         f"{sampling_rate!r}")
    if label_mode not in ("int", "categorical", "binary", None):
        raise ValueError(f"[{w}] label_mode must be 'int', 'categorical', 'binary' or None, "
                         f"got {label_mode!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or
                                   not isinstance(batch_size, int) or batch_size <= 0):
        raise ValueError(f"[{w}] batch_size must be a positive int or None, got "
                         f"{batch_size!r}")
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    _split([], None, validation_split, subset, shuffle, seed, w)  # the arguments, first
    paths, labs, names = _index(directory, labels, (".wav",), class_names, shuffle, seed,
                                follow_links, w)
    if verbose:
        print(f"Found {len(paths)} files" + ("." if labs is None else
                                             f" belonging to {len(names)} classes."))
    if label_mode == "binary" and len(names) != 2:
        raise ValueError(f"[{w}] label_mode='binary' needs exactly 2 classes, found "
                         f"{len(names)}: {names}")
    parts = _split(paths, labs, validation_split, subset, shuffle, seed, w)
    kinds = {"both": ["training", "validation"]}.get(subset, [subset or "all"])
    out = []
    for (part_paths, part_labels), kind in zip(parts, kinds):
        if not part_paths:
            what = "" if kind == "all" else f"{kind} "
            raise ValueError(f"[{w}] no {what}audio files found in {directory} (the files "
                             "read end in .wav)")
        out.append(_audio_part(part_paths, part_labels, label_mode, names, batch_size,
                               sampling_rate, output_sequence_length, w))
    return out[0] if len(out) == 1 else tuple(out)
