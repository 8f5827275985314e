# clipnorm and Lamb with layers split over a tensor group (docs/parallelism.md,
# "Clipping and Lamb on split layers") under `tessera run -n N`, N = 2 or 4:
# a small char-GPT split over the tensor group (embedding and logits by
# vocabulary, attention by heads, the MLP by columns then rows; LayerNorms
# and the row-parallel biases replicated):
# - normal mode, 100 steps: the loss within RTOL (1e-4) relative of the same model of
#   plain layers on one process, for Adam and SGD with clipnorm (clipping
#   active: the plain model's losses differ with and without it), Lamb with
#   weight decay and Lamb with clipnorm; a norm taken over this member's
#   slices only would give every member another scale and fail this;
# - deterministic mode: SHA-256 of the weights and the optimizer state
#   bitwise the same between two runs, and (N = 4) between the data sizes 1
#   and 2 (mesh data=2,tensor=2) and under pipeline stages (tensor=2,
#   pipeline=2, both schedules) with the same chunks; normal mode under the
#   pipeline within RTOL (1e-4) relative of one process too;
# - kernel and bias regularizers (L1, L2, L1L2) on the split Dense pair:
#   100 steps within RTOL (1e-4) relative of the plain pair on one process; the
#   plain pair data-parallel over every rank too;
# - under ZeRO 1, 2, 3 (N = 4; Lamb under 2 and 3): bitwise the same t
#   without ZeRO in deterministic mode, within RTOL of one process in normal
#   mode;
# usage: tp_norms.py [PARTS] (of normal,regs,det,zero; all when not given).
# Prints "ok" on every rank.
import hashlib
import sys

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
# Normal mode's bound on the relative difference of the losses from one
# process's: float32, 100 Adam steps, and the split model sums in another
# order (the group's reductions, the vocabulary-parallel softmax), so
# rounding differences grow over the steps with the CPU's kernels (3.2e-5 seen
# on an AMD EPYC with Adam and clipnorm). A norm over one member's slices only
# would clip by a scale ~30% off and differ by orders of magnitude more.
RTOL = 1e-4
assert N in (2, 4), N
PARTS = set(sys.argv[1].split(",")) if sys.argv[1:] else {"normal", "regs", "det", "zero"}

TEXT = "in the beginning god created the heaven and the earth. " * 6
chars = sorted(set(TEXT))  # 15 characters: uneven over 2 members
ids = np.array([chars.index(c) for c in TEXT])
CONTEXT, WIDTH, HEADS = 8, 12, 3
starts = np.arange(0, len(ids) - CONTEXT - 1, 5)[:64]
X = ids[starts[:, None] + np.arange(CONTEXT)]
Y = ids[starts[:, None] + np.arange(CONTEXT) + 1]
FIT = dict(batch_size=16, epochs=25, shuffle=True, seed=3, verbose=0)  # 100 steps

OPTS = {"adam+clipnorm": lambda: optim.Adam(3e-3, clipnorm=0.05),
        "sgd+clipnorm": lambda: optim.SGD(0.1, momentum=0.9, clipnorm=0.05),
        "lamb+decay": lambda: optim.Lamb(3e-3, weight_decay=0.01),
        "lamb+clipnorm": lambda: optim.Lamb(3e-3, clipnorm=0.05),
        # Keras's clipnorm: each weight's gradient to the norm (of the whole weight)
        "sgd+keras clipnorm": lambda: nn.optimizers.SGD(0.1, momentum=0.9, clipnorm=0.02)}
FREE = {"adam+clipnorm": lambda: optim.Adam(3e-3),
        "sgd+clipnorm": lambda: optim.SGD(0.1, momentum=0.9),
        "lamb+clipnorm": lambda: optim.Lamb(3e-3),
        "sgd+keras clipnorm": lambda: nn.optimizers.SGD(0.1, momentum=0.9)}


def gpt(group, opt):
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


mesh = dist.Mesh(tensor=2) if N == 2 else dist.Mesh(data=2, tensor=2)
tp = mesh.group("tensor")
data_parallel = N == 4  # the data axis of data=2,tensor=2; else each group alone

# Normal mode: within RTOL (1e-4) relative of the plain model on one process (on 4
# ranks, data=2 x tensor=2, two of the optimizers: the others are as on 2).
for name, opt in OPTS.items():
    if "normal" not in PARTS or N == 4 and name in ("sgd+clipnorm", "lamb+clipnorm",
                                                    "sgd+keras clipnorm"):
        continue
    ref = gpt(None, opt).fit(X, Y, data_parallel=False, **FIT).history["loss"]
    assert ref[-1] < ref[0], (name, ref)
    if name in FREE:
        short = dict(FIT, epochs=5)
        free = gpt(None, FREE[name]).fit(X, Y, data_parallel=False, **short).history["loss"]
        assert not np.allclose(free, ref[:5], rtol=1e-5), f"{name}: clipping clipped nothing"
    par = gpt(tp, opt).fit(X, Y, data_parallel=data_parallel, **FIT).history["loss"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(par, ref))
    assert worst <= RTOL, f"{name}: the split model's loss differs by {worst:.1e} on rank {R}"
    if R == 0:
        print(f"{name}: largest relative difference {worst:.1e} over {len(ref)} epochs")

# Kernel and bias regularizers (L1, L2, L1L2) on ColumnParallelDense ->
# RowParallelDense: a split weight's penalty is the sum of its slices' over the
# group (the row layer's bias is whole on every member and counted once); 100
# steps of Adam within RTOL (1e-4) relative of the plain pair on one process, whose
# loss the penalties change.
def mlp(split, regs=True):
    r = dict(kernel_regularizer=nn.regularizers.L2(0.01), bias_regularizer=nn.regularizers.L1(
        0.01)) if regs else {}
    r2 = dict(kernel_regularizer=nn.regularizers.L1L2(0.01, 0.02),
              bias_regularizer=nn.regularizers.L2(0.05)) if regs else {}
    layers = [nn.ColumnParallelDense(7, activation="relu", group=tp, **r),
              nn.RowParallelDense(3, group=tp, **r2)] if split else \
        [nn.Dense(7, activation="relu", **r), nn.Dense(3, **r2)]
    model = nn.Sequential(layers, input_shape=(6,), seed=11)
    model.compile(optim.Adam(1e-2), "mse")
    return model


def check_regularizers():
    rng = np.random.default_rng(3)
    xm, ym = rng.standard_normal((64, 6)).astype("float32"), rng.standard_normal((64, 3))
    ref = mlp(False).fit(xm, ym, data_parallel=False, **FIT).history["loss"]
    bare = mlp(False, False).fit(xm, ym, data_parallel=False, **FIT).history["loss"]
    assert not np.allclose(ref, bare, rtol=1e-3), "the penalties changed nothing"
    par = mlp(True).fit(xm, ym, data_parallel=data_parallel, **FIT).history["loss"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(par, ref))
    assert worst <= RTOL, f"regularizers: the split model's loss differs by {worst:.1e} (rank {R})"
    if R == 0:
        print(f"regularizers: largest relative difference {worst:.1e} over {len(ref)} epochs")
    # The plain pair data-parallel over every rank (gradient buckets summed
    # from inside the backward pass): the penalties' gradients are summed with
    # the rest of their buckets' (they read the bucket-marked weights), not 1/N.
    dp = mlp(False).fit(xm, ym, **FIT).history["loss"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(dp, ref))
    assert worst <= RTOL, f"regularizers, data parallel: the loss differs by {worst:.1e} (rank {R})"


if "regs" in PARTS:
    check_regularizers()

# Deterministic mode: bitwise across data sizes (and runs) for a fixed t; on
# 4 ranks also across pipeline stages (mesh tensor=2,pipeline=2, 4 micro-batches
# as the 4 chunks), where the stages' sums of squares are all-gathered over the
# pipeline group first. Normal mode under the pipeline: within RTOL of one process.
DET = dict(FIT, epochs=3)
pmesh = dist.Mesh(tensor=2, pipeline=2) if N == 4 else None
for name in ("adam+clipnorm", "lamb+clipnorm", "lamb+decay") if "det" in PARTS else ():
    one = gpt(tp, OPTS[name])
    one.fit(X, Y, data_parallel=False, deterministic=4, **DET)
    again = gpt(tp, OPTS[name])
    again.fit(X, Y, data_parallel=data_parallel, deterministic=4, **DET)
    assert sha(one) == sha(again), f"{name}: deterministic runs differ on rank {R}"
    if pmesh is None:
        continue
    assert pmesh.rank("tensor") == mesh.rank("tensor")
    for kind in ("1f1b", "gpipe"):
        pm = gpt(pmesh.group("tensor"), OPTS[name])
        pm.fit(X, Y, pipeline_split=["ln2"], microbatches=4, deterministic=True,
               pipeline_schedule=kind, **DET)
        assert pm._pipeline is not None
        assert sha(pm) == sha(one), f"{name} {kind}: the pipeline differs on rank {R}"
    if name == "lamb+decay":
        continue
    ref = gpt(None, OPTS[name]).fit(X, Y, data_parallel=False, **DET).history["loss"]
    pm = gpt(pmesh.group("tensor"), OPTS[name])
    h = pm.fit(X, Y, pipeline_split=["ln2"], microbatches=2, **DET).history["loss"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(h, ref))
    assert worst <= RTOL, f"{name} pipeline: the loss differs by {worst:.1e} on rank {R}"

# Under ZeRO 1, 2, 3 on the data axis (N = 4): bitwise the same t without
# ZeRO in deterministic mode; normal mode under ZeRO 2 within RTOL of one process.
if N == 4 and "zero" in PARTS:
    # every stage with clipnorm; Lamb's trust ratios on shards under stage 2
    # (whole weights, sharded gradients) and 3 (sharded weights)
    for name, stages in (("adam+clipnorm", (1, 2, 3)), ("lamb+clipnorm", (2,)),
                         ("lamb+decay", (3,))):
        one = gpt(tp, OPTS[name])
        one.fit(X, Y, data_parallel=False, deterministic=4, **DET)
        for zero in stages:
            zm = gpt(tp, OPTS[name])
            zm.fit(X, Y, deterministic=4, zero=zero, **DET)
            assert sha(zm) == sha(one), f"{name} ZeRO {zero}: differs on rank {R}"
        ref = gpt(None, OPTS[name]).fit(X, Y, data_parallel=False, **DET).history["loss"]
        h = gpt(tp, OPTS[name]).fit(X, Y, zero=2, **DET).history["loss"]
        worst = max(abs(a - b) / abs(b) for a, b in zip(h, ref))
        assert worst <= RTOL, f"{name} ZeRO 2: the loss differs by {worst:.1e} on rank {R}"

print("ok")
