# Tensor x pipeline (x data) in one fit (docs/parallelism.md, "Meshes of
# three axes") under `tessera run -n N --mesh [data=D,]tensor=T,pipeline=P`:
# a small char-GPT whose layers are split over the job mesh's tensor group
# (VocabParallelEmbedding, ParallelMultiHeadAttention, ColumnParallelDense ->
# RowParallelDense, the vocabulary-parallel logits and cross-entropy), cut into
# P pipeline stages:
# - normal mode: the loss within 1e-5 relative of the same model of plain
#   layers on one process (t = 1, computed by every rank alone) after every
#   epoch, and the whole weights close after fit;
# - deterministic mode: SHA-256 of the weights and the optimizer state
#   bitwise those of the same t without a pipeline (fit on the data group of
#   Mesh(data=N/T, tensor=T) with the same chunks), and with zero=1 too; the
#   same for Lamb with weight decay and clipnorm (the norms of whole weights);
# - get_weights, predict and evaluate on every rank after fit.
# Prints "ok" on every rank.
import hashlib
import sys

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
JOB = dist.mesh()
T, P, D = JOB.size("tensor"), JOB.size("pipeline"), JOB.size("data")
ZERO = [int(v) for v in sys.argv[1].split(",")] if sys.argv[1:] else [0]

TEXT = "in the beginning god created the heaven and the earth. " * 6
chars = sorted(set(TEXT))  # 15 characters: uneven over 2 members
ids = np.array([chars.index(c) for c in TEXT])
CONTEXT, WIDTH, HEADS = 8, 12, 3
starts = np.arange(0, len(ids) - CONTEXT - 1, 5)[:64]
X = ids[starts[:, None] + np.arange(CONTEXT)]
Y = ids[starts[:, None] + np.arange(CONTEXT) + 1]
FIT = dict(batch_size=32, epochs=3, shuffle=True, seed=3, verbose=0)


def gpt(group, opt=lambda: optim.Adam(3e-3)):
    """One pre-LayerNorm block; split over `group` when it is not None."""
    split = group is not None
    inp = nn.Input(shape=(CONTEXT,), dtype="int32")
    h = (nn.VocabParallelEmbedding(len(chars), WIDTH, group=group, name="emb") if split
         else nn.Embedding(len(chars), WIDTH, name="emb"))(inp)
    a = nn.LayerNormalization(name="ln1")(h)
    attention = (nn.ParallelMultiHeadAttention(HEADS, WIDTH // HEADS, group=group, name="att")
                 if split else nn.MultiHeadAttention(HEADS, WIDTH // HEADS, name="att"))
    h = nn.Add(name="res1")([h, attention(a, a, use_causal_mask=True)])
    m = nn.LayerNormalization(name="ln2")(h)
    if split:
        m = nn.RowParallelDense(WIDTH, group=group, name="down")(
            nn.ColumnParallelDense(2 * WIDTH, activation="gelu", group=group, name="up")(m))
    else:
        m = nn.Dense(WIDTH, name="down")(nn.Dense(2 * WIDTH, activation="gelu", name="up")(m))
    h = nn.LayerNormalization(name="ln3")(nn.Add(name="res2")([h, m]))
    logits = (nn.ColumnParallelDense(len(chars), group=group, name="logits") if split
              else nn.Dense(len(chars), name="logits"))(h)
    model = nn.Model(inp, logits, seed=1)
    loss = (nn.VocabParallelSparseCategoricalCrossentropy(len(chars), group=group) if split
            else nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(opt(), loss)
    return model


SPLIT = {2: ["ln2"], 4: ["ln1", "ln2", "ln3"]}[P]


def sha(model):
    """This locality's weights (its slices) and optimizer state."""
    h = hashlib.sha256()
    for v in sorted(model.weights.keys()):
        h.update(v.encode())
        h.update(np.ascontiguousarray(np.asarray(model.weights[v])).tobytes())
    for k in sorted(model._opt_state):
        h.update(k.encode())
        h.update(np.ascontiguousarray(np.asarray(model._opt_state[k])).tobytes())
    return h.hexdigest()


# Normal mode: within 1e-5 relative of t = 1 on one process.
ref = gpt(None)
h_ref = ref.fit(X, Y, data_parallel=False, **FIT).history["loss"]
assert h_ref[-1] < h_ref[0], h_ref
for n, zero in enumerate(ZERO):
    kind = ("1f1b", "gpipe")[n % 2]
    pm = gpt(JOB.group("tensor"))
    h = pm.fit(X, Y, pipeline_split=SPLIT, zero=zero, pipeline_schedule=kind,
               **FIT).history["loss"]
    assert pm._pipeline is not None and pm._pipeline.stage == JOB.rank("pipeline")
    np.testing.assert_allclose(h, h_ref, rtol=1e-5, err_msg=f"rank {R} zero={zero}")
    # (the key projection's bias has a gradient of rounding noise only, which
    # Adam scales up to steps of its own: the weights are compared loosely)
    for a, b in zip(pm.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3, err_msg=f"rank {R} zero={zero}")
    lo, hi = pm.get_layer("logits")._span  # this member's classes of the logits
    np.testing.assert_allclose(pm.predict(X), ref.predict(X)[..., lo:hi], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(pm.evaluate(X, Y, verbose=0), ref.evaluate(X, Y, verbose=0),
                               rtol=1e-5)

# Deterministic mode: bitwise the same t on a mesh without a pipeline.
flat = dist.Mesh(data=N // T, tensor=T)
assert flat.rank("tensor") == JOB.rank("tensor")
m = 2 * P
base = gpt(flat.group("tensor"))
h_base = base.fit(X, Y, deterministic=m * D, **FIT).history["loss"]
assert base._pipeline is None
for zero in ZERO:
    pm = gpt(JOB.group("tensor"))
    h = pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, deterministic=True, zero=zero,
               **FIT).history["loss"]
    assert h == h_base, (R, zero, h, h_base)
    assert sha(pm) == sha(base), f"rank {R} zero={zero}: the weights or the state differ"

# Lamb with clipnorm: the global norm and the trust ratios of the whole weights
# (tensor-split weights' sums of squares summed over the tensor group, every
# stage's gathered over the pipeline group, ZeRO's slices gathered over the data
# group): bitwise the same t without a pipeline, for each ZeRO stage.
def lamb():
    return optim.Lamb(3e-3, weight_decay=0.01, clipnorm=0.05)


if T > 1:  # (without split layers: tests/distributed/pipe_fit.py)
    base = gpt(flat.group("tensor"), lamb)
    base.fit(X, Y, deterministic=m * D, **FIT)
    for zero in ZERO:
        pm = gpt(JOB.group("tensor"), lamb)
        pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, deterministic=True, zero=zero, **FIT)
        assert sha(pm) == sha(base), f"rank {R} zero={zero}: Lamb with clipnorm differs"
    # normal mode (under ZeRO 2/3 the norm's buckets gathered from the slices):
    # within 1e-5 relative of the plain model on one process
    h_ref = gpt(None, lamb).fit(X, Y, data_parallel=False, **FIT).history["loss"]
    h = gpt(JOB.group("tensor"), lamb).fit(X, Y, pipeline_split=SPLIT, zero=ZERO[-1],
                                           **FIT).history["loss"]
    np.testing.assert_allclose(h, h_ref, rtol=1e-5, err_msg=f"rank {R} Lamb zero={ZERO[-1]}")
print(f"rank {R}: ok", flush=True)
