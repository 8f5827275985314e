"""The shards of a checkpoint shared among localities on resume: which
bytes each locality's block of shards holds, and moving them (all to all
localities, or under ZeRO, a mesh or pipeline stages only to the localities
that keep them). Part of tessera.nn.checkpoints (docs/scaling.md,
"Checkpoints")."""

from __future__ import annotations

import numpy as np

from .. import distributed as _dist
from .._state_share import share as _share_wanted


def _span(total: int, n: int, r: int):
    return r * total // n, (r + 1) * total // n


def _words(blob: bytes) -> np.ndarray:
    """Bytes as int64 words (zero-padded to a multiple of 8): the collectives
    carry int64 as it is, bit for bit."""
    return np.frombuffer(bytes(blob) + bytes(-len(blob) % 8), dtype=np.int64)


def _gather_blocks(part: bytes, manifest, n: int, who: str, path) -> bytes:
    """The state's bytes from every locality's block of shards (locality r
    read shards _span(localities, n, r)): one all-gather of int64 words."""
    words = np.asarray(_dist.all_gather(_words(part))).tobytes()
    data, at, m = bytearray(), 0, manifest["localities"]
    for r in range(n):  # each locality's block, without its padding
        first, stop = _span(m, n, r)
        size = sum(s["bytes"] for s in manifest["shards"][first:stop])
        data += words[at:at + size]
        at += (size + 7) // 8 * 8
    if at != len(words) or len(data) != manifest["total_bytes"]:
        raise RuntimeError(f"{who}: the localities sent {len(data)} bytes of the checkpoint "
                           f"{path}, its manifest says {manifest['total_bytes']}")
    return bytes(data)


def _block_bytes(manifest, n: int, r: int):
    """Bytes [lo, hi) of the state in locality r's block of shards."""
    first, stop = _span(manifest["localities"], n, r)
    if first >= stop:
        return 0, 0
    shards = manifest["shards"]
    return shards[first]["start"], shards[stop - 1]["start"] + shards[stop - 1]["bytes"]


# What the last resume moved on this locality (tests and bench/bench_resume_scaling.py):
# bytes of the state it read from its shards, received from the others, and kept.
last_share = {"read": 0, "received": 0, "kept": 0}


def _share_blocks(part: bytes, manifest, n: int, rank: int, wants, who: str, path) -> bytes:
    """The state's bytes this locality keeps, from every locality's block of
    shards (locality r read _block_bytes(manifest, n, r)): without `wants`
    all of them (one all-gather); with a _state_share.Wants only what it keeps
    (_state_share.share; the rest zero)."""
    if wants is None:
        data = _gather_blocks(part, manifest, n, who, path)
        last_share.update(read=len(part), received=len(data) - len(part), kept=len(data))
        return data
    data, received, kept = _share_wanted(part, lambda r: _block_bytes(manifest, n, r),
                                         manifest["total_bytes"], n, rank, wants, who, path)
    last_share.update(read=len(part), received=received, kept=kept)
    return data
