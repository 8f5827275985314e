"""TensorBoard event files without TensorFlow: the tfevents record format
(length, masked CRC-32C of the length, data, masked CRC-32C of the data)
around Event protocol buffers (wall_time, step, file_version or a Summary
of scalar values and of tensor summaries: TensorFlow 2's histograms, images
and Keras model configurations), encoded and decoded here by hand, with the
histogram bucketing and the PNG encoding those summaries hold.

The reader treats a file as untrusted: each record's length is capped,
both checksums are verified, and a malformed record is an error naming the
file and the offset."""

from __future__ import annotations

import os
import socket
import struct
import time
import zlib

import numpy as np

_MAX_RECORD = 64 << 20  # a larger length is a corrupt or hostile file


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of TFRecord files."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    if n < 0:
        n &= (1 << 64) - 1  # int64 as protobuf encodes it
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _field(number, 2) + _varint(len(data)) + data


def encode_event(wall_time: float, step: int = 0, file_version=None, scalars=None,
                 values=()) -> bytes:
    """An Event message: file_version (field 3), or a Summary (field 5)
    of {tag: simple_value} and of `values`, Summary.Value messages already
    encoded (tensor_value)."""
    out = _field(1, 1) + struct.pack("<d", wall_time)
    if step:
        out += _field(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars or values:
        summary = b""
        for tag, value in (scalars or {}).items():
            v = _bytes_field(1, str(tag).encode()) + _field(2, 5) + struct.pack("<f", float(value))
            summary += _bytes_field(1, v)
        for v in values:
            summary += _bytes_field(1, v)
        out += _bytes_field(5, summary)
    return out


# TensorFlow's DataType numbers (types.proto)
DT_DOUBLE, DT_STRING = 2, 7


def tensor_value(tag: str, plugin: str, content: bytes = b"", array=None, strings=None) -> bytes:
    """A Summary.Value holding a tensor (field 8) and its SummaryMetadata
    (field 9: plugin_data {plugin_name, content}), as tf.summary.write
    makes it: a float64 `array` as a DT_DOUBLE TensorProto with its bytes in
    tensor_content, or `strings` (a list of bytes; a bytes object alone is a
    scalar) as DT_STRING with string_val."""
    plugin_data = _bytes_field(1, plugin.encode())
    if content:
        plugin_data += _bytes_field(2, content)
    metadata = _bytes_field(1, plugin_data)
    if array is not None:
        a = np.ascontiguousarray(array, dtype="<f8")
        dims = b"".join(_bytes_field(2, _field(1, 0) + _varint(d)) for d in a.shape)
        tensor = (_field(1, 0) + _varint(DT_DOUBLE) + _bytes_field(2, dims) +
                  _bytes_field(4, a.tobytes()))
    else:
        items = [strings] if isinstance(strings, bytes) else list(strings)
        dims = b"" if isinstance(strings, bytes) else _bytes_field(
            2, _field(1, 0) + _varint(len(items)))
        tensor = _field(1, 0) + _varint(DT_STRING) + _bytes_field(2, dims)
        for item in items:
            tensor += _bytes_field(8, item)
    return _bytes_field(1, tag.encode()) + _bytes_field(8, tensor) + _bytes_field(9, metadata)


# ----------------------------------------------------------------- histograms and images

DEFAULT_BUCKET_COUNT = 30


def histogram_buckets(data, bucket_count: int = DEFAULT_BUCKET_COUNT) -> np.ndarray:
    """The [k, 3] float64 (left edge, right edge, count) rows TensorFlow 2's
    tf.summary.histogram stores (tensorboard's histogram summary_v2
    `_buckets`): k equal buckets from the minimum to the maximum, closed-open
    but the last, closed; the edges min + i * (range / k) with the last one
    the maximum itself; all-equal data: every edge that value and all of
    the count in the last bucket; no data: k rows of zeros."""
    k = max(0, int(bucket_count))
    data = np.asarray(data, dtype=np.float64).reshape(-1)
    if data.size == 0 or k == 0:
        return np.zeros((k, 3))
    lo, hi = data.min(), data.max()
    span = hi - lo
    if span == 0:
        out = np.zeros((k, 3))
        out[:, :2] = hi
        out[-1, 2] = data.size
        return out
    width = span / k
    with np.errstate(invalid="ignore", over="ignore"):
        index = np.floor((data - lo) / width)
    index = np.minimum(index, k - 1)
    # (a NaN or infinite value lands in no bucket, as TF's one_hot of an index out of range)
    index = index[(index >= 0) & (index < k)].astype(np.int64)
    counts = np.bincount(index, minlength=k).astype(np.float64)
    edges = lo + np.arange(k + 1, dtype=np.float64) * width
    edges[-1] = hi
    return np.stack([edges[:-1], edges[1:], counts], axis=1)


def image_uint8(data) -> np.ndarray:
    """tf.image.convert_image_dtype(data, tf.uint8, saturate=True), what
    tf.summary.image applies: floats times 255.5 (in their own precision),
    clipped to [0, 255] and truncated (NaN: 0); wider integers divided
    down to 8 bits, negatives 0; booleans 0 or 1."""
    a = np.asarray(data)
    if a.dtype == np.uint8:
        return a
    if a.dtype.kind == "f":
        scaled = np.nan_to_num(a * a.dtype.type(255.5), nan=0.0)
        return np.clip(scaled, 0, 255).astype(np.uint8)
    if a.dtype.kind in "iu":
        info = np.iinfo(a.dtype)
        if info.max > 255:
            a = a // ((int(info.max) + 1) // 256)
        return np.clip(a, 0, 255).astype(np.uint8)
    if a.dtype == np.bool_:
        return a.astype(np.uint8)
    raise TypeError(f"[image_uint8] cannot make an image of dtype {a.dtype}")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def encode_png(image) -> bytes:
    """A PNG of a uint8 [height, width, channels] array (1: grayscale, 2:
    grayscale and alpha, 3: RGB, 4: RGBA), 8 bits, no interlace, every row
    with filter 0, zlib-compressed (what tf.image.encode_png makes, pixel
    for pixel)."""
    a = np.asarray(image)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4):
        raise ValueError(f"[encode_png] expected a uint8 [height, width, 1..4] array, got "
                         f"{a.dtype} {a.shape}")
    h, w, c = a.shape
    color = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    rows = np.concatenate([np.zeros((h, 1), np.uint8), a.reshape(h, w * c)], axis=1)
    return (b"\x89PNG\r\n\x1a\n" +
            _png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)) +
            _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) +
            _png_chunk(b"IEND", b""))


def record(data: bytes) -> bytes:
    """One TFRecord: the framing TensorBoard reads."""
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", masked_crc32c(header)) + data +
            struct.pack("<I", masked_crc32c(data)))


class EventFileWriter:
    """Appends events to a new events.out.tfevents.<time>.<host>.<pid>...
    file in `folder`, starting with the file_version event. Each write is
    flushed (the file is only ever appended to, so a reader sees complete
    records or a truncated last one, which readers skip)."""

    _count = 0

    def __init__(self, folder: str):
        os.makedirs(folder, exist_ok=True)
        EventFileWriter._count += 1
        name = (f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}."
                f"{os.getpid()}.{EventFileWriter._count}.v2")
        self.path = os.path.join(folder, name)
        # O_EXCL: never write through a file (or a link) someone placed there
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._file = os.fdopen(fd, "wb")
        self._write(encode_event(time.time(), file_version="brain.Event:2"))

    def _write(self, data: bytes):
        self._file.write(record(data))
        self._file.flush()

    def scalars(self, step: int, values: dict, wall_time=None):
        """One Summary event of scalars at `step`."""
        if values:
            self._write(encode_event(time.time() if wall_time is None else wall_time, step,
                                     scalars=values))

    def histogram(self, step: int, tag: str, data, bucket_count=DEFAULT_BUCKET_COUNT):
        """tf.summary.histogram(tag, data, step): the buckets as a tensor
        summary of the "histograms" plugin (TensorBoard's Histograms and
        Distributions tabs)."""
        value = tensor_value(tag, "histograms", array=histogram_buckets(data, bucket_count))
        self._write(encode_event(time.time(), step, values=[value]))

    def image(self, step: int, tag: str, images, max_outputs: int = 3):
        """tf.summary.image(tag, images, step, max_outputs): [k, h, w, c]
        pixels made uint8, the first max_outputs as PNGs after the width and
        the height, a string tensor of the "images" plugin."""
        pixels = image_uint8(images)
        if pixels.ndim != 4:
            raise ValueError(f"[TensorBoard] an image summary needs [k, h, w, c] data, got "
                             f"shape {pixels.shape}")
        strings = [str(pixels.shape[2]).encode(), str(pixels.shape[1]).encode()]
        strings += [encode_png(p) for p in pixels[:max_outputs]]
        self._write(encode_event(time.time(), step, values=[tensor_value(tag, "images",
                                                                          strings=strings)]))

    def keras_model(self, step: int, tag: str, json_text: str):
        """Keras's keras_model_summary: the model's JSON as a string scalar
        of the "graph_keras_model" plugin (content b"1", its version), which
        TensorBoard's Graphs tab draws as the conceptual graph."""
        value = tensor_value(tag, "graph_keras_model", b"1", strings=json_text.encode())
        self._write(encode_event(time.time(), step, values=[value]))

    def close(self):
        if not self._file.closed:
            self._file.close()


# ----------------------------------------------------------------- reading

def _read_varint(buf: bytes, i: int, end: int):
    shift, n = 0, 0
    while True:
        if i >= end or shift > 63:
            raise ValueError("truncated or overlong varint")
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, i
        shift += 7


def _fields(buf: bytes, start: int = 0, end=None):
    """(number, wire type, value) of a message's fields; value is an int,
    or a (start, end) slice for length-delimited fields."""
    i, end = start, len(buf) if end is None else end
    while i < end:
        key, i = _read_varint(buf, i, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(buf, i, end)
        elif wire == 1:
            if i + 8 > end:
                raise ValueError("truncated 64-bit field")
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            if i + 4 > end:
                raise ValueError("truncated 32-bit field")
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = _read_varint(buf, i, end)
            if i + n > end:
                raise ValueError("a length-delimited field runs past its message")
            v, i = (i, i + n), i + n
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, v


def decode_event(buf: bytes) -> dict:
    """{"wall_time", "step", "file_version" or "scalars": {tag: value}
    and/or "tensors": {tag: {"plugin", "array" or "strings"}}}."""
    ev = {"wall_time": 0.0, "step": 0}
    for number, wire, v in _fields(buf):
        if number == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif number == 2 and wire == 0:
            ev["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif number == 3 and wire == 2:
            ev["file_version"] = buf[v[0]:v[1]].decode("utf-8", "replace")
        elif number == 5 and wire == 2:
            scalars, tensors = {}, {}
            for n2, w2, val in _fields(buf, *v):
                if n2 != 1 or w2 != 2:
                    continue
                tag, value, tensor, plugin = None, None, None, ""
                for n3, w3, x in _fields(buf, *val):
                    if n3 == 1 and w3 == 2:
                        tag = buf[x[0]:x[1]].decode("utf-8", "replace")
                    elif n3 == 2 and w3 == 5:
                        value = struct.unpack("<f", x)[0]
                    elif n3 == 8 and w3 == 2:
                        tensor = _decode_tensor(buf, x)
                    elif n3 == 9 and w3 == 2:
                        plugin = _plugin_name(buf, x)
                if tag is not None and value is not None:
                    scalars[tag] = value
                if tag is not None and tensor is not None:
                    tensors[tag] = dict(tensor, plugin=plugin)
            if scalars or not tensors:
                ev["scalars"] = scalars
            if tensors:
                ev["tensors"] = tensors
    return ev


def _plugin_name(buf: bytes, span) -> str:
    for n, w, x in _fields(buf, *span):
        if n == 1 and w == 2:
            for n2, w2, y in _fields(buf, *x):
                if n2 == 1 and w2 == 2:
                    return buf[y[0]:y[1]].decode("utf-8", "replace")
    return ""


def _decode_tensor(buf: bytes, span) -> dict:
    """{"array": float64 array} of a DT_DOUBLE TensorProto with
    tensor_content, or {"strings": [bytes]} of a DT_STRING one; the shape
    must account for every element."""
    dtype, shape, content, strings = 0, [], None, []
    for n, w, x in _fields(buf, *span):
        if n == 1 and w == 0:
            dtype = x
        elif n == 2 and w == 2:
            for n2, w2, d in _fields(buf, *x):
                if n2 == 2 and w2 == 2:
                    size = 0
                    for n3, w3, y in _fields(buf, *d):
                        if n3 == 1 and w3 == 0:
                            size = y
                    shape.append(size)
        elif n == 4 and w == 2:
            content = buf[x[0]:x[1]]
        elif n == 8 and w == 2:
            strings.append(buf[x[0]:x[1]])
    count = 1
    for d in shape:
        count *= d
    if dtype == DT_DOUBLE:
        if content is None or len(content) != 8 * count:
            raise ValueError(f"a float64 tensor of shape {shape} holds "
                             f"{0 if content is None else len(content)} bytes")
        return {"array": np.frombuffer(content, "<f8").reshape(shape).copy()}
    if dtype == DT_STRING:
        if len(strings) != count:
            raise ValueError(f"a string tensor of shape {shape} holds {len(strings)} strings")
        return {"strings": strings}
    raise ValueError(f"tensors of DataType {dtype} are not read")


def read_events(path) -> list:
    """Every event of a tfevents file, checksums verified; a truncated last
    record (a writer still running) ends the list."""
    path = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    events, i = [], 0
    while i < len(data):
        if i + 12 > len(data):
            break
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[i + 8:i + 12])
        if crc != masked_crc32c(header):
            raise ValueError(f"[read_events] {path}: the length checksum of the record at "
                             f"offset {i} is wrong")
        if n > _MAX_RECORD:
            raise ValueError(f"[read_events] {path}: the record at offset {i} claims {n} "
                             f"bytes, more than {_MAX_RECORD}")
        if i + 12 + n + 4 > len(data):
            break
        body = data[i + 12:i + 12 + n]
        (crc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if crc != masked_crc32c(body):
            raise ValueError(f"[read_events] {path}: the data checksum of the record at offset "
                             f"{i} is wrong")
        try:
            events.append(decode_event(body))
        except ValueError as e:
            raise ValueError(f"[read_events] {path}: the record at offset {i} is not an Event: "
                             f"{e}") from None
        i += 16 + n
    return events
