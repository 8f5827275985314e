# Stage-only state under pipeline stages (docs/parallelism.md, "Memory per
# locality under a pipeline"), under `tessera run -n 4 --mesh data=2,pipeline=2`:
# between the steps of fit each locality holds only its stage's weights and
# optimizer state, so model_state_bytes() is 16 bytes per parameter of its
# stage (fp32 Adam: Ψ_stage), with ZeRO 1 (8 + 8/d) Ψ_stage, ZeRO 2
# (4 + 12/d) Ψ_stage and ZeRO 3 16 Ψ_stage / d up to the padding of the
# buckets; the other stages'
# weights are not held (None); asking for the whole model (get_weights in a
# callback, on every rank) gathers it, and the next step drops it again;
# after fit every rank has the whole model, equal to the one-process fit.
# Prints "rank R: ... ok" on every rank.
import hashlib
import os
import shutil
import tempfile

import numpy as np

import tessera
from tessera import distributed as dist
from tessera import nn

R = dist.rank()
MESH = dist.mesh()
P, D = MESH.size("pipeline"), MESH.size("data")
assert (P, D) == (2, 2), MESH

rng = np.random.default_rng(4)
X = rng.normal(size=(64, 10)).astype("float32")
Y = rng.integers(0, 4, size=64)
FIT = dict(batch_size=16, epochs=2, verbose=0, shuffle=False)


def make():
    model = nn.Sequential([nn.Dense(24, activation="tanh", name="d1"),
                           nn.Dense(20, activation="tanh", name="d2"),
                           nn.Dense(16, activation="relu", name="d3"),
                           nn.Dense(4, name="d4")], input_shape=(10,), seed=3)
    model.compile(tessera.optim.Adam(0.01), "sparse_categorical_crossentropy")
    return model


STAGE_LAYERS = [["d1", "d2"], ["d3", "d4"]][MESH.rank("pipeline")]
psi = {"d1": 10 * 24 + 24, "d2": 24 * 20 + 20, "d3": 20 * 16 + 16, "d4": 16 * 4 + 4}
PSI = sum(psi[n] for n in STAGE_LAYERS)  # this stage's parameters
WHOLE = sum(psi.values())


class Check(nn.callbacks.Callback):
    def __init__(self, zero):
        super().__init__()
        self.zero, self.seen = zero, []

    def on_train_batch_end(self, batch, logs=None):
        model = self.model
        held = {layer.name: [v for v in layer._values.values() if v is not None]
                for layer in model.layers}
        for layer in model.layers:  # the other stages' weights are not held (nor,
            # under ZeRO 3, this stage's whole weights: their slices are)
            mine = layer.name in STAGE_LAYERS and self.zero < 3
            assert bool(held[layer.name]) == mine, (R, self.zero, layer.name)
        got = model.model_state_bytes()
        step = model._pipeline
        pad = sum(step.zero.N) - PSI if step.zero is not None else 0
        assert got["parameters"] == 4 * (PSI if self.zero < 3 else (PSI + pad) // D), (R, got)
        if self.zero == 0:
            want_g, want_o = 4 * PSI, 8 * PSI
        elif self.zero == 1:
            want_g, want_o = 4 * PSI, 8 * (PSI + pad) // D
        else:
            want_g, want_o = 4 * (PSI + pad) // D, 8 * (PSI + pad) // D
        assert (got["gradients"], got["optimizer"]) == (want_g, want_o), (R, self.zero, got)
        assert pad < D * len(step.zero.N) if step.zero is not None else True
        self.seen.append(got["total"])

    def on_epoch_end(self, epoch, logs=None):
        # the whole model on demand (a collective: every rank asks), then
        # dropped again by the next step
        whole = self.model.get_weights()
        assert sum(a.size for a in whole) == WHOLE, (R, [a.shape for a in whole])
        assert self.model.model_state_bytes()["parameters"] == 4 * WHOLE


ref = make()
ref.fit(X, Y, data_parallel=False, **FIT)
for zero in (0, 1, 2, 3):
    pm = make()
    check = Check(zero)
    pm.fit(X, Y, pipeline_split=["d3"], zero=zero, callbacks=[check], **FIT)
    assert len(check.seen) == 8, check.seen
    # after fit: the whole model and optimizer state on every rank
    assert pm.model_state_bytes()["optimizer"] == 8 * WHOLE
    for a, b in zip(pm.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=f"zero={zero}")
    print(f"rank {R}: zero {zero}: {check.seen[-1]} bytes of model state for {PSI} of "
          f"{WHOLE} parameters", flush=True)

# A checkpoint folder written under the pipeline with ZeRO 1 and 3 (each step
# gathers the stages' weights and their data groups' slices) resumes on one
# process, bitwise the uninterrupted deterministic run.
def sha(model):
    h = hashlib.sha256()
    for a in model.get_weights():
        h.update(np.ascontiguousarray(a).tobytes())
    for k in sorted(model._opt_state):
        h.update(k.encode())
        h.update(np.ascontiguousarray(np.asarray(model._opt_state[k])).tobytes())
    return h.hexdigest()


name = np.frombuffer(tempfile.mkdtemp(prefix="mesh3d-ckpt-").encode().ljust(64), dtype=np.uint8)
folder = bytes(np.asarray(dist.broadcast(name, root=0)).astype(np.uint8)).decode().strip()
whole = make()
whole.fit(X, Y, deterministic=4, data_parallel=False, **FIT)
for zero in (1, 3):
    first = make()
    first.fit(X, Y, pipeline_split=["d3"], zero=zero, microbatches=2, deterministic=True,
              checkpoint_dir=os.path.join(folder, str(zero)), checkpoint_every=1,
              **dict(FIT, epochs=1))
    again = make()
    again.fit(X, Y, deterministic=4, data_parallel=False,
              resume_from=os.path.join(folder, str(zero)), **FIT)
    assert sha(again) == sha(whole), f"rank {R}: zero={zero}: the resumed run differs"
    # and the pipelined deterministic run itself, to its end
    piped = make()
    piped.fit(X, Y, pipeline_split=["d3"], zero=zero, microbatches=2, deterministic=True, **FIT)
    assert sha(piped) == sha(whole), f"rank {R}: zero={zero}: the pipelined run differs"
dist.barrier()
if R == 0:
    shutil.rmtree(folder)
print(f"rank {R}: ok", flush=True)
