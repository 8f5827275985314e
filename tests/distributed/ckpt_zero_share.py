# Resume under ZeRO 1, 2, 3 and a mesh: each locality receives only the bytes
# of the checkpoint it keeps (its slices of the optimizer state, under stage 3
# of the trainable weights too, and every other tensor whole), and the state
# is bitwise that of the uninterrupted one-locality run (deterministic mode).
# Checkpoints of N shards, of one shard (written by locality 0 alone), and of
# a mesh data=2,tensor=2 are resumed, also by pipeline stages. What each locality received is checked
# against the bytes it keeps, computed here from the sizes alone. Prints "ok".
import hashlib
import math
import os
import tempfile

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim
from tessera.nn import checkpoints as ck

R, N = dist.rank(), dist.size()
rng = np.random.default_rng(7)
X = rng.standard_normal((32, 6)).astype(np.float32)
Y = np.tanh(X @ rng.standard_normal((6, 2))).astype(np.float32)
FIT = {"batch_size": 8, "verbose": 0, "seed": 2, "deterministic": 8}


def model():
    m = nn.Sequential([nn.Dense(11, activation="relu", name="d1"), nn.Dense(2, name="d2")],
                      input_shape=(6,), seed=3)
    m.BUCKET_BYTES = 128  # several buckets, parameters cut across slices
    m.compile(optim.Adam(1e-2), "mse")
    return m


def digest(m):
    h = hashlib.sha256()
    for w in m.get_weights():
        h.update(np.ascontiguousarray(w).tobytes())
    state = m._opt_state
    for k in sorted(state):
        h.update(k.encode())
        h.update(np.ascontiguousarray(state[k]).tobytes())
    return h.hexdigest()


def on_mesh(text):
    if text is None:
        os.environ.pop("TESSERA_MESH", None)
    else:
        os.environ["TESSERA_MESH"] = text
    dist._job_mesh = None


def shared_folder():
    folder = tempfile.mkdtemp(prefix="ckpt-zero-share-") if R == 0 else ""
    got = dist.broadcast(np.frombuffer(folder.encode().ljust(200, b"\0"), dtype=np.uint8).copy())
    return bytes(np.asarray(got, dtype=np.uint8)).rstrip(b"\0").decode()


def kept_bytes(m, stage, d):
    """The bytes one locality keeps, from the sizes alone: every tensor whole
    but the optimizer's per-weight state (and under stage 3 the trainable
    weights), of which one data member keeps about 1/d (each bucket padded
    to a multiple of d elements: at most one element more per tensor)."""
    weights, state = m.weights, m._opt_state
    trainable = set(m._params(True))
    whole = sliced = 0
    for k, a in weights.items():
        n = np.asarray(a).nbytes
        if stage == 3 and k in trainable:
            sliced += n
        else:
            whole += n
    for k, a in state.items():
        n = np.asarray(a).nbytes
        if np.ndim(a) and n:
            sliced += n
        else:
            whole += n
    return whole, sliced


ref = model()
ref.fit(X, Y, epochs=4, data_parallel=False, **FIT)
want = digest(ref)
total = sum(np.asarray(a).nbytes for _, a in ck._state_tensors(ref))
folder = shared_folder()
# a checkpoint of N shards, one of a single shard (locality 0 alone), one of a mesh
writes = [("n", {"zero": 2}, None), ("one", {"data_parallel": False}, None),
          ("mesh", {"zero": 1}, "data=2,tensor=2")]
for name, kw, mesh in writes:
    on_mesh(mesh)
    m = model()
    m.fit(X, Y, epochs=2, checkpoint_dir=os.path.join(folder, name), **FIT, **kw)
on_mesh(None)
dist.barrier()
# (checkpoint, ZeRO stages and meshes resumed under): every stage on the
# checkpoint of N shards, the others on another number of shards
CASES = {"n": ((1, None), (2, None), (3, None), (3, "data=2,tensor=2")),
         "one": ((2, None), (3, "data=2,tensor=2")), "mesh": ((1, "data=2,tensor=2"),)}
for name, _, _ in writes:
    for stage, mesh in CASES[name]:
        on_mesh(mesh)
        m = model()
        m.fit(X, Y, epochs=4, zero=stage, resume_from=os.path.join(folder, name), **FIT)
        assert digest(m) == want, (name, stage, mesh)
        d = 2 if mesh else N
        got = dict(ck.last_share)
        whole, sliced = kept_bytes(m, stage, d)
        assert whole + sliced == total, (whole, sliced, total)
        # the slices of the sliced tensors partition them over the data members
        kept = np.asarray(dist.all_gather(np.array([got["kept"]], dtype=np.int64)))
        assert int((kept - whole).sum()) == sliced * (N // d) and (kept >= whole).all(), \
            (name, stage, kept, whole, sliced)
        assert got["received"] <= got["kept"] < total, got
        # before: every locality received all it had not read (T - read)
        assert got["received"] < total - got["read"] or got["read"] == total, got
        read = np.asarray(dist.all_gather(np.array([got["read"]], dtype=np.int64)))
        assert int(read.sum()) == total, (read, total)  # each shard once in total
    # pipeline stages (a mesh data=2,pipeline=2): each locality receives its
    # stage's weights and their optimizer state (ZeRO 1 then slices them)
    for stage in (0, 1) if name == "n" else ():
        on_mesh("data=2,pipeline=2")
        m = model()
        m.fit(X, Y, epochs=4, zero=stage, resume_from=os.path.join(folder, name),
              pipeline_split=["d2"], microbatches=4, **dict(FIT, deterministic=True))
        assert digest(m) == want, (name, "pipeline", stage)
        got = dict(ck.last_share)
        assert got["received"] <= got["kept"] < total, got
        kept = np.asarray(dist.all_gather(np.array([got["kept"]], dtype=np.int64)))
        d1 = m.get_layer("d1").count_params() * 4 * 3  # float32 weights, Adam's m and v
        d2 = total - d1
        assert sorted(kept.tolist()) == sorted([d1, d1, d2, d2]), (kept, d1, d2)
on_mesh(None)
print("ok")
