"""What each locality keeps of a training state it resumes, and the
exchange that gives it only that (docs/scaling.md, "Checkpoints").

The state is laid end to end (tessera.nn.checkpoints: weights, then the
optimizer's tensors); each locality read a contiguous block of it from the
checkpoint's shards. Under ZeRO, a mesh or pipeline stages a locality keeps
only part of it: `resume_wants` says which bytes, for every locality, from
the fit's plan alone (every locality computes the same, so nothing is
exchanged to agree on it), and `share` moves to each locality only those.
"""

from __future__ import annotations

import numpy as np

from . import distributed as _dist

_TAG = 1048575  # a pipe tag of its own (pipe_send): no pipeline runs during a resume


def _words(blob: bytes) -> np.ndarray:
    """Bytes as int64 words (zero-padded to a multiple of 8): the collectives
    carry int64 as it is, bit for bit."""
    return np.frombuffer(bytes(blob) + bytes(-len(blob) % 8), dtype=np.int64)


class Wants:
    """Which bytes of the state laid end to end each locality keeps after a
    resume (under ZeRO or pipeline stages, not all of it): `common`, the
    ranges every locality keeps (replicated weights, scalars), and own(r),
    the ranges locality r keeps besides (its slices, its stage's tensors);
    sorted, disjoint [lo, hi) byte ranges. Every locality computes the same
    for every r, so each knows what to send and what to expect."""

    def __init__(self, common, own):
        self.common = _merged(common)
        self._own = own

    def own(self, r: int) -> list:
        return _merged(self._own(r))


def _merged(ranges) -> list:
    out = []
    for lo, hi in sorted((int(a), int(b)) for a, b in ranges if b > a):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def _clipped(ranges, lo: int, hi: int) -> list:
    """The parts of sorted disjoint `ranges` inside [lo, hi)."""
    return [(max(a, lo), min(b, hi)) for a, b in ranges if a < hi and b > lo]


def share(part: bytes, block_of, total: int, n: int, rank: int, wants: Wants, who: str,
          path) -> tuple:
    """(state bytes, bytes received, bytes kept) on this locality of n, from
    every locality's block of the state (locality r read bytes block_of(r) =
    [lo, hi) of the total; this one's are `part`): the bytes every locality
    keeps by one all-gather of each block's part of them, the bytes only
    some keep sent by the locality that read them to each that keeps them
    (point to point, nothing sent to a locality that does not keep it).
    Bytes this locality does not keep are zero. A collective of all n."""
    data = bytearray(total)
    lo, hi = block_of(rank)
    if hi - lo != len(part):
        raise RuntimeError(f"{who}: read {len(part)} bytes of {path}, its block is {hi - lo}")
    mine = wants.own(rank)
    received = 0
    # the common part: each locality's share of it, all-gathered
    piece = b"".join(part[a - lo:b - lo] for a, b in _clipped(wants.common, lo, hi))
    joined = np.asarray(_dist.all_gather(_words(piece))).tobytes()
    at, common_bytes = 0, 0
    for r in range(n):
        for a, b in _clipped(wants.common, *block_of(r)):
            data[a:b] = joined[at:at + b - a]
            at += b - a
            common_bytes += b - a
        at += -at % 8  # each locality's part padded to whole words
    if at != len(joined):
        raise RuntimeError(f"{who}: the localities sent {len(joined)} bytes of the common part "
                           f"of {path}, expected {at}")
    received += common_bytes - len(piece)
    # the rest: from the reader to each locality that keeps it
    for a, b in _clipped(mine, lo, hi):
        data[a:b] = part[a - lo:b - lo]
    for q in range(n):
        if q != rank:
            pieces = _clipped(wants.own(q), lo, hi)
            if pieces:
                out = b"".join(part[a - lo:b - lo] for a, b in pieces)
                _dist.pipe_send(_words(out), q, _TAG)
    for q in range(n):
        if q == rank:
            continue
        pieces = _clipped(mine, *block_of(q))
        if not pieces:
            continue
        got = np.asarray(_dist.pipe_recv(q, _TAG)).tobytes()
        want = sum(b - a for a, b in pieces)
        if len(got) != want + (-want % 8):
            raise RuntimeError(f"{who}: locality {q} sent {len(got)} bytes of {path}, "
                               f"expected {want}")
        at = 0
        for a, b in pieces:
            data[a:b] = got[at:at + b - a]
            at += b - a
        received += want
    kept = sum(b - a for a, b in _merged(list(wants.common) + mine))
    return bytes(data), received, kept


def resume_wants(model, layout, plan=None, pipe=None, dgroup=None):
    """The Wants of a fit resuming under ZeRO (plan: zero.ZeroPlan; dgroup
    the data group) or pipeline stages (pipe: pipeline.StageStep), or None
    when every locality keeps the whole state. Under ZeRO each locality
    keeps its data rank's slices of the optimizer state (and under stage 3
    of the trainable weights) and every other tensor whole; under pipeline
    stages its stage's weights and their optimizer state, whole (ZeRO then
    slices them after the load), and the scalars."""
    entries = {e["name"]: e for e in layout}
    place = {name: (e["offset"], e["offset"] + e["nbytes"], np.dtype(e["dtype"]).itemsize)
             for name, e in entries.items()}
    if pipe is not None:
        mesh = getattr(pipe.pg, "mesh", None)
        if mesh is None or pipe.p < 2:
            return None
        param_of = {f"optimizer/{z.name}": z.param
                    for z in getattr(model, "_opt_statevars", None) or [] if not z.scalar}
        stage_of = {}
        for name in entries:
            v = param_of.get(name, name)
            if v in pipe.owner:
                stage_of[name] = pipe.owner[v]
        common = [place[n][:2] for n in entries if n not in stage_of]
        by_stage = {}
        for name, s in stage_of.items():
            by_stage.setdefault(s, []).append(place[name][:2])
        return Wants(common, lambda r: by_stage.get(mesh._coords_of(r)["pipeline"], []))
    if plan is None or plan.d < 2:
        return None
    mesh = getattr(dgroup, "mesh", None)
    sliced = {}  # tensor name: (bucket, its first element in the bucket)
    for j, bucket in enumerate(plan.buckets):
        off = 0
        for v in bucket:
            names = [v] if plan.stage == 3 else []
            names += [f"optimizer/{plan.whole_state_name(s, v)}" for s in plan.state
                      if not s.scalar and plan._bucket_of(s) == j]
            for name in names:
                if name not in place:
                    continue
                lo, hi, size = place[name]
                if hi - lo != plan.sizes[v] * size:
                    return None  # not laid out as the plan cuts it: keep it all
                sliced[name] = (j, off)
            off += plan.sizes[v]
    common = [place[n][:2] for n in entries if n not in sliced]

    def own(r):
        i = mesh._coords_of(r)["data"] if mesh is not None else r
        out = []
        for name, (j, off) in sliced.items():
            lo, hi, size = place[name]
            a = max(i * plan.k[j], off) - off
            b = min((i + 1) * plan.k[j] - off, (hi - lo) // size)
            if b > a:
                out.append((lo + a * size, lo + b * size))
        return out

    return Wants(common, own)
