# Bad pipeline settings under `tessera run -n 2 --mesh pipeline=2`: every
# rank gets the same clear ValueError within 5 s, naming the setting, the
# layer or the axis, and can go on (a good fit afterwards). Prints "ok".
import os
import time

import numpy as np
import pytest

import tessera
from tessera import distributed as dist
from tessera import nn

R = dist.rank()


def make(**opt):
    inp = nn.Input((4,))
    hs = [nn.Dense(3, name=f"b{k}")(inp) for k in range(5)]
    h = nn.Dense(8, activation="tanh", name="mix")(nn.Concatenate(name="cat")(hs))
    model = nn.Model(inp, nn.Dense(2, name="out")(h), seed=1)
    model.compile(tessera.optim.SGD(0.1, **opt), "sparse_categorical_crossentropy")
    return model


x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
y = np.arange(16) % 2


def refused(pattern, **kwargs):
    model = kwargs.pop("model", None) or make()
    start = time.monotonic()
    with pytest.raises(ValueError, match=pattern):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, **kwargs)
    took = time.monotonic() - start
    assert took < 5, f"rank {R}: the error took {took:.1f} s"


refused(r"^\[fit\] pipeline: 1 micro-batches \(microbatches=\) for 2 stages \(axis 'pipeline' "
        r"of the mesh, TESSERA_MESH\): a pipeline needs at least as many micro-batches as "
        r"stages; pass microbatches=2 or more", microbatches=1, pipeline_split=["mix"])
os.environ["TESSERA_MICROBATCHES"] = "1"
refused(r"^\[fit\] pipeline: 1 micro-batches \(TESSERA_MICROBATCHES in the environment, set by "
        r"tessera run --microbatches\) for 2 stages", pipeline_split=["mix"])
del os.environ["TESSERA_MICROBATCHES"]
refused(r"^\[fit\] pipeline_split names layer 'nope', which the model does not have; its "
        r"layers: \[", pipeline_split=["nope"], microbatches=2)
refused(r"^\[fit\] pipeline_split: the cut before layer 'cat' \(stage 0 to 1\) carries 5 "
        r"tensors \(made by layer 'b0', layer 'b1', layer 'b2', layer 'b3', layer 'b4'\); at "
        r"most 4 may cross a cut", pipeline_split=["cat"])
refused(r"^\[fit\] pipeline_split names 2 layer\(s\), which makes 3 stages, but the mesh's "
        r"pipeline axis has 2 localities",
        pipeline_split=["cat", "out"])
refused(r"^\[fit\] deterministic=6 chunks and 4 micro-batches \(microbatches=\) on 1 data "
        r"localities disagree", pipeline_split=["mix"], microbatches=4, deterministic=6)
refused(r"^\[fit\] pipeline_schedule must be one of \['1f1b', 'gpipe'\], got 'zb'",
        pipeline_schedule="zb")
# and the job goes on: a good pipelined fit, the automatic split
model = make()
h = model.fit(x, y, batch_size=8, epochs=1, verbose=0, microbatches=2)
assert np.isfinite(h.history["loss"][0])
print("ok")
