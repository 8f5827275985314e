# Pipeline-parallel fit (docs/parallelism.md, "Pipeline parallelism") under
# `tessera run -n N --mesh ...pipeline=P`, against the one-process fit of the
# same model on every rank (data_parallel=False):
# - normal mode: losses, metrics and weights within float tolerance, for each
#   number of micro-batches given on the command line, both schedules;
# - deterministic mode (micro-batches = chunks): SHA-256 of the weights and
#   the optimizer state bitwise the one-process deterministic run, with batch
#   norm, dropout and a skip connection crossing the cuts;
# - after fit: get_weights, save/load, predict and evaluate on every rank;
# - clipnorm (SGD with momentum, Adam): bitwise the one-process run in
#   deterministic mode, within tolerance in normal mode, with ZeRO 1, 2, 3 too;
# - 1F1B's in-flight bound measured at run time from a trace: stage s has at
#   most P - s micro-batches between the start of their forward and the end
#   of their backward (GPipe, measured alike, holds all of them);
# - a rank draws only its stage's initial weights before the first step;
# - 1F1B's memory: a stage's step peak of live bytes the same at m = P and
#   m = 4P (within 3 activations of a micro-batch); stage 0's within its
#   gradients' running sum and 0.1 x P micro-batches.
# usage: pipe_fit.py SPLIT M1,M2,...   (SPLIT: layer names joined by "+", or
# "auto"). Prints "ok" on every rank.
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

import tessera
from tessera import distributed as dist
from tessera import nn

R = dist.rank()
MESH = dist.mesh()
P, D = MESH.size("pipeline"), MESH.size("data")
SPLIT = None if sys.argv[1] == "auto" else sys.argv[1].split("+")
COUNTS = [int(v) for v in sys.argv[2].split(",")]


def make(extras, opt=None):
    """A functional model whose skip connection (d1 -> add) crosses the cuts;
    with `extras`, batch norm (fused with its relu) and dropout too; Adam
    unless `opt` makes another optimizer."""
    inp = nn.Input((6,))
    h1 = nn.Dense(16, activation="tanh", name="d1")(inp)
    h2 = nn.Dense(16, name="d2")(h1)
    if extras:
        h2 = nn.BatchNormalization(name="bn")(h2)
    h2 = nn.Activation("relu", name="act")(h2)
    h3 = nn.Dense(16, activation="tanh", name="d3")(h2)
    h4 = nn.Add(name="add")([h3, h1])
    if extras:
        h4 = nn.Dropout(0.25, name="drop")(h4)
    out = nn.Dense(3, activation="softmax", name="out")(h4)
    model = nn.Model(inp, out, seed=7)
    model.compile(opt() if opt else tessera.optim.Adam(0.01), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


rng = np.random.default_rng(1)
X = rng.normal(size=(64, 6)).astype("float32")
Y = rng.integers(0, 3, size=64)
FIT = dict(batch_size=32, epochs=2, verbose=0, shuffle=True, seed=5)


def sha(model):
    h = hashlib.sha256()
    for a in model.get_weights():
        h.update(np.ascontiguousarray(a).tobytes())
    for k in sorted(model._opt_state):
        h.update(k.encode())
        h.update(np.ascontiguousarray(np.asarray(model._opt_state[k])).tobytes())
    return h.hexdigest()


def close(a, b, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert np.allclose(a, b, rtol=2e-5, atol=2e-6), f"{what}: {a} != {b} (rank {R})"


class Drawn(nn.callbacks.Callback):
    """How many deferred initial weights this rank drew by the end of the
    first step: only its stage's (a pipeline rank draws on first read)."""

    count = None

    def on_train_batch_end(self, batch, logs=None):
        if self.count is None:
            self.count = DeferredValues.drawn - self.before


from tessera.nn.layers import DeferredValues  # noqa: E402

drawn = Drawn()
drawn.before = DeferredValues.drawn
model = make(True)
model.fit(X, Y, pipeline_split=SPLIT, microbatches=COUNTS[0], callbacks=[drawn], **FIT)
step = model._pipeline
mine = sum(1 for v in model._owner if step.owner[v] == step.stage)
assert 0 < mine < len(model._owner)
assert drawn.count == mine, (f"rank {R}: drew {drawn.count} initial weights by the end of the "
                             f"first step, its stage holds {mine} (of {len(model._owner)})")

for m in COUNTS:
    # Normal mode: within float tolerance of the one-process fit.
    for kind in ("1f1b", "gpipe"):
        ref, pm = make(False), make(False)
        h0 = ref.fit(X, Y, data_parallel=False, **FIT)
        h1 = pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, pipeline_schedule=kind, **FIT)
        for key in ("loss", "accuracy"):
            close(h0.history[key], h1.history[key], f"m={m} {kind} {key}")
        for a, b in zip(ref.get_weights(), pm.get_weights()):
            close(a, b, f"m={m} {kind} weights")
        assert pm._pipeline.stage == MESH.rank("pipeline")
        # the skip connection makes two tensors cross a cut: the stages but
        # the last still keep their forward's intermediates (a vjp of both)
        assert pm._pipeline.keeps == (pm._pipeline.stage < P - 1)
    # Deterministic mode: bitwise the one-process run with d*m chunks.
    ref = make(True)
    h0 = ref.fit(X, Y, data_parallel=False, deterministic=D * m, **FIT)
    for kind in ("1f1b", "gpipe"):
        pm = make(True)
        h1 = pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, deterministic=True,
                    pipeline_schedule=kind, **FIT)
        assert h0.history["loss"] == h1.history["loss"], (m, kind, h0.history, h1.history)
        assert h0.history["accuracy"] == h1.history["accuracy"]
        assert sha(ref) == sha(pm), f"m={m} {kind}: the weights differ on rank {R}"
    # The whole model on every rank after fit.
    assert np.array_equal(ref.predict(X), pm.predict(X))
    assert ref.evaluate(X, Y, verbose=0) == pm.evaluate(X, Y, verbose=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"m{R}.tsm")
        pm.save(path)
        back = nn.load_model(path)
        for a, b in zip(ref.get_weights(), back.get_weights()):
            assert np.array_equal(a, b)

# A stack of layers, split automatically: every cut carries one tensor, so
# every stage but the last keeps its forward's intermediates for its
# backward (vjp) instead of recomputing them; still bitwise.
def stack():
    model = nn.Sequential([nn.Dense(12, activation="tanh"), nn.Dense(12, activation="relu"),
                           nn.Dense(10, activation="tanh"), nn.Dense(8, activation="tanh"),
                           nn.Dense(3)], input_shape=(6,), seed=2)
    model.compile(tessera.optim.RMSprop(0.01), "sparse_categorical_crossentropy")
    return model


m = max(COUNTS)
ref, pm = stack(), stack()
h0 = ref.fit(X, Y, data_parallel=False, deterministic=D * m, **FIT)
h1 = pm.fit(X, Y, microbatches=m, deterministic=True, **FIT)
assert pm._pipeline.keeps == (pm._pipeline.stage < P - 1)
assert h0.history["loss"] == h1.history["loss"] and sha(ref) == sha(pm)


# Two outputs (their losses and metrics on the last stage; an output made
# early crosses the later cuts), split automatically: bitwise.
def two_outputs():
    inp = nn.Input((6,))
    h = nn.Dense(12, activation="tanh", name="h")(inp)
    a = nn.Dense(3, activation="softmax", name="cls")(nn.Dense(8, activation="relu",
                                                               name="h2")(h))
    b = nn.Dense(1, name="value")(nn.Dense(6, activation="tanh", name="h3")(h))
    model = nn.Model(inp, [a, b], seed=4)
    model.compile("adam", ["sparse_categorical_crossentropy", "mse"],
                  metrics=[["accuracy"], ["mae"]])
    return model


Y2 = X[:, :1] * 0.5
ref, pm = two_outputs(), two_outputs()
h0 = ref.fit(X, [Y, Y2], data_parallel=False, deterministic=D * m, **FIT)
h1 = pm.fit(X, [Y, Y2], microbatches=m, deterministic=True, **FIT)
assert all(h0.history[k] == h1.history[k] for k in h0.history if k != "time"), h1.history
assert sha(ref) == sha(pm)

# Sample weights and validation: bitwise too (validation runs the whole
# model on every locality after each epoch's gather).
sw = np.random.default_rng(2).uniform(0.5, 2.0, size=len(X))
ref, pm = make(True), make(True)
h0 = ref.fit(X, Y, data_parallel=False, deterministic=D * m, sample_weight=sw,
             validation_split=0.25, **FIT)
h1 = pm.fit(X, Y, microbatches=m, deterministic=True, sample_weight=sw, validation_split=0.25,
            pipeline_split=SPLIT, **FIT)
for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
    assert h0.history[key] == h1.history[key], (key, h0.history, h1.history)
assert sha(ref) == sha(pm)

# A checkpoint folder written under the pipeline (every step gathers the
# whole model) resumes on one process, bitwise the uninterrupted run.
name = np.frombuffer(tempfile.mkdtemp(prefix="pipe-ckpt-").encode().ljust(64), dtype=np.uint8)
folder = bytes(np.asarray(dist.broadcast(name, root=0)).astype(np.uint8)).decode().strip()
first = make(True)
first.fit(X, Y, microbatches=m, deterministic=True, pipeline_split=SPLIT, checkpoint_dir=folder,
          checkpoint_every=1, **dict(FIT, epochs=1))
again = make(True)
again.fit(X, Y, deterministic=D * m, data_parallel=False, resume_from=folder, **FIT)
whole = make(True)
whole.fit(X, Y, deterministic=D * m, data_parallel=False, **FIT)
assert sha(again) == sha(whole), f"rank {R}: the resumed run differs"
dist.barrier()
if R == 0:
    import shutil

    shutil.rmtree(folder)


# clipnorm under the pipeline: the global norm of every stage's gradients
# (fixed blocks of the whole model's buckets, block sums and the elements of
# blocks straddling a cut all-gathered over the pipeline group). Clipping is
# active (the norms exceed 0.05: the weights differ from an unclipped run);
# deterministic mode bitwise the one-process run, normal mode within
# tolerance, for SGD with momentum and Adam, both schedules.
m = max(COUNTS)
CLIPPED = {"sgd": lambda: tessera.optim.SGD(0.1, momentum=0.9, clipnorm=0.05),
           "adam": lambda: tessera.optim.Adam(0.01, clipnorm=0.05)}
for name, opt in CLIPPED.items():
    free = make(True, lambda: tessera.optim.SGD(0.1, momentum=0.9) if name == "sgd"
                else tessera.optim.Adam(0.01))
    free.fit(X, Y, data_parallel=False, deterministic=D * m, **FIT)
    ref = make(True, opt)
    h0 = ref.fit(X, Y, data_parallel=False, deterministic=D * m, **FIT)
    assert sha(ref) != sha(free), f"{name}: clipnorm=0.05 clipped nothing"
    for kind in ("1f1b", "gpipe"):
        pm = make(True, opt)
        h1 = pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, deterministic=True,
                    pipeline_schedule=kind, **FIT)
        assert h0.history["loss"] == h1.history["loss"], (name, kind, h0.history, h1.history)
        assert sha(ref) == sha(pm), f"clipnorm {name} {kind}: the weights differ on rank {R}"
    ref, pm = make(False, opt), make(False, opt)
    h0 = ref.fit(X, Y, data_parallel=False, **FIT)
    h1 = pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, **FIT)
    close(h0.history["loss"], h1.history["loss"], f"clipnorm {name} loss")
    for a, b in zip(ref.get_weights(), pm.get_weights()):
        close(a, b, f"clipnorm {name} weights")
# clipnorm with ZeRO on each stage's data group: the same global norm, from
# the whole sums (ZeRO 1, deterministic mode) or from this member's slices of
# the reduce-scattered buckets (ZeRO 2 and 3, normal mode); deterministic mode
# bitwise the one-process run (weights and optimizer state), normal mode
# within tolerance (Adam under ZeRO 1, 2, 3; SGD with momentum under 2).
if D > 1:
    for name, zeros in (("adam", (1, 2, 3)), ("sgd", (2,))):
        opt = CLIPPED[name]
        ref = make(True, opt)
        h0 = ref.fit(X, Y, data_parallel=False, deterministic=D * m, **FIT)
        plain, h2 = make(False, opt), None
        for zero in zeros:
            pm = make(True, opt)
            h1 = pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, deterministic=True,
                        zero=zero, **FIT)
            assert h0.history["loss"] == h1.history["loss"], (name, zero, h0.history,
                                                              h1.history)
            assert sha(ref) == sha(pm), f"clipnorm {name} ZeRO {zero}: the weights or " \
                f"optimizer state differ on rank {R}"
            if h2 is None:
                h2 = plain.fit(X, Y, data_parallel=False, **FIT)
            pm = make(False, opt)
            h1 = pm.fit(X, Y, pipeline_split=SPLIT, microbatches=m, zero=zero, **FIT)
            close(h2.history["loss"], h1.history["loss"], f"clipnorm {name} ZeRO {zero} loss")
            # ZeRO 2, 3: the buckets are reduce-scattered inside the pass (in
            # the backward of the last micro-batch), not in the update
            pass_text, update_text = pm.train_code.split("define(stage_update")
            assert ("reduce_scatter(" in pass_text) == (zero >= 2), (zero, pass_text)
            assert "reduce_scatter(" not in update_text, update_text
            for a, b in zip(plain.get_weights(), pm.get_weights()):
                close(a, b, f"clipnorm {name} ZeRO {zero} weights")


# 1F1B's bound at run time: is_nil marks the start of each micro-batch's
# forward and the end of its backward in the trace (StageStep.markers).
m = max(COUNTS)
for kind in ("1f1b", "gpipe"):
    pm = make(False)
    with tempfile.TemporaryDirectory() as tmp:
        with tessera.trace(tmp) as t:
            pm.fit(X, Y, batch_size=64, epochs=1, verbose=0, shuffle=False,
                   pipeline_split=SPLIT, microbatches=m, pipeline_schedule=kind)
        t.export()
        events = json.load(open(os.path.join(tmp, "trace.json")))["traceEvents"]
    step = pm._pipeline
    prog = f"<model pipeline stage {step.stage} pass>"
    at = {f"{prog}:{line}": key for key, line in step.markers.items()}
    marks = []
    for e in events:
        key = at.get((e.get("args") or {}).get("position", "").rsplit(":", 1)[0])
        if key is not None and e.get("name") == "is_nil":
            marks.append((e["ts"] if key[0] == "F" else e["ts"] + e["dur"], key[0]))
    assert len(marks) == 2 * m, (kind, len(marks))
    live = most = 0
    for _, action in sorted(marks):
        live += 1 if action == "F" else -1
        most = max(most, live)
    bound = P - step.stage
    if kind == "1f1b":
        assert most <= bound, f"stage {step.stage}: {most} micro-batches in flight > {bound}"
    print(f"rank {R}: stage {step.stage} {kind}: at most {most} of {m} micro-batches in flight")


# 1F1B's bound in memory: a stage's peak of live array bytes during a step
# (the least of 3 steps) does not grow with the number of micro-batches
# (what a micro-batch received, sent or kept is freed after its backward,
# not at the pass's end). Before the pass's pending defines stopped holding
# their values, stage 0 of 2 grew by one activation per micro-batch (6.9 MiB
# at m = 4, 13.4 MiB at m = 16).
class Peak(nn.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.peaks = []

    def on_train_batch_begin(self, batch, logs=None):
        self.live = tessera.memory_stats()["live_bytes"]
        tessera.reset_peak_memory()

    def on_train_batch_end(self, batch, logs=None):
        self.peaks.append(tessera.memory_stats()["peak_live_bytes"] - self.live)


ROWS = 1024  # rows of a micro-batch of the global batch
peaks = {}
for mm in (P, 4 * P):
    wide = nn.Sequential([nn.Dense(128, activation="tanh", name=f"w{i}") for i in range(2 * P)],
                         input_shape=(128,), seed=3)
    wide.compile("sgd", "mse")
    xw = np.random.default_rng(3).normal(size=(3 * ROWS * mm, 128)).astype("float32")
    peak = Peak()
    wide.fit(xw, np.tanh(xw), batch_size=ROWS * mm, epochs=1, shuffle=False, verbose=0,
             microbatches=mm, pipeline_split=[f"w{2 * s}" for s in range(1, P)],
             callbacks=[peak])
    peaks[mm] = min(peak.peaks)  # (of 3 steps: a message arriving early adds to one)
act = ROWS // D * 128 * 4  # one activation of a micro-batch on this data locality
grew = peaks[4 * P] - peaks[P]
print(f"rank {R}: stage {MESH.rank('pipeline')}: step peak {peaks[P] / 2**20:.1f} MiB at m={P}, "
      f"{peaks[4 * P] / 2**20:.1f} MiB at m={4 * P}")
assert grew < 3 * act, (f"rank {R}: the step's peak grew by {grew / act:.1f} activations from "
                        f"m={P} to m={4 * P} micro-batches under 1F1B")
# Stage 0 in particular (issue 28: its activations within 1.1 x P micro-batches): at m = P it
# holds P micro-batches as at m = 4P, so what m = 4P may add is the running sum of its
# gradients (G) and at most 0.1 x P micro-batches (one is 2 activations: each tanh layer keeps
# its output). Before its sends held copies of its outputs and its forward's values until its
# backward, stage 0 of 2 grew by G + 1 activation here (641 KiB).
if MESH.rank("pipeline") == 0:
    g0 = sum(np.asarray(wide.weights[v]).nbytes for v in wide._pipeline.P)
    allowed = g0 + 0.1 * P * 2 * act
    assert grew <= allowed, (
        f"rank {R}: stage 0's step peak under 1F1B grew by {grew / 2**10:.0f} KiB from m={P} "
        f"to m={4 * P}: more than the gradients' running sum ({g0 / 2**10:.0f} KiB) and "
        f"0.1 x {P} micro-batches of {2 * act / 2**10:.0f} KiB ({allowed / 2**10:.0f} KiB)")
print("ok")
