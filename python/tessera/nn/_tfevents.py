"""TensorBoard event files without TensorFlow: the tfevents record format
(length, masked CRC-32C of the length, data, masked CRC-32C of the data)
around Event protocol buffers (wall_time, step, file_version or a Summary
of scalar values), encoded and decoded here by hand.

The reader treats a file as untrusted: each record's length is capped,
both checksums are verified, and a malformed record is an error naming the
file and the offset."""

from __future__ import annotations

import os
import socket
import struct
import time

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


def encode_event(wall_time: float, step: int = 0, file_version=None, scalars=None) -> bytes:
    """An Event message: file_version (field 3), or a Summary (field 5)
    of {tag: simple_value}."""
    out = _field(1, 1) + struct.pack("<d", wall_time)
    if step:
        out += _field(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars:
        summary = b""
        for tag, value in scalars.items():
            v = _bytes_field(1, str(tag).encode()) + _field(2, 5) + struct.pack("<f", float(value))
            summary += _bytes_field(1, v)
        out += _bytes_field(5, summary)
    return out


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
    """{"wall_time", "step", "file_version" or "scalars": {tag: value}}."""
    ev = {"wall_time": 0.0, "step": 0}
    for number, wire, v in _fields(buf):
        if number == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif number == 2 and wire == 0:
            ev["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif number == 3 and wire == 2:
            ev["file_version"] = buf[v[0]:v[1]].decode("utf-8", "replace")
        elif number == 5 and wire == 2:
            scalars = {}
            for n2, w2, val in _fields(buf, *v):
                if n2 != 1 or w2 != 2:
                    continue
                tag, value = None, None
                for n3, w3, x in _fields(buf, *val):
                    if n3 == 1 and w3 == 2:
                        tag = buf[x[0]:x[1]].decode("utf-8", "replace")
                    elif n3 == 2 and w3 == 5:
                        value = struct.unpack("<f", x)[0]
                if tag is not None and value is not None:
                    scalars[tag] = value
            ev["scalars"] = scalars
    return ev


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
