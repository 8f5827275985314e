# Models beyond Sequential under `tessera run -n N`: a functional model with
# a residual connection, LayerNormalization, causal MultiHeadAttention and an
# LSTM, trained from a memory-mapped .npy Dataset (each locality reads its
# rows) in deterministic mode, gives bitwise the single-process weights; a
# checkpoint written mid-run by the N localities resumes on one process to
# the same weights; sample-weighted data-parallel training matches the
# single-process run within float tolerance. Prints "ok".
import hashlib
import os
import sys
import tempfile

import numpy as np

import tessera
import tessera.distributed as td
from tessera import nn

rng = np.random.default_rng(0)
x = rng.normal(size=(200, 12, 5)).astype(np.float32)
y = (x[:, :, 0].mean(axis=1) > 0).astype(np.int64) + (x[:, 3, 1] > 0.5)
w = rng.uniform(0.5, 2.0, size=len(x))
folder = os.environ.get("TMPDIR", tempfile.gettempdir())
xpath = os.path.join(folder, "tessera_models_dp_x.npy")
ypath = os.path.join(folder, "tessera_models_dp_y.npy")
if td.rank() == 0:
    np.save(xpath + ".tmp.npy", x)
    np.save(ypath + ".tmp.npy", y)
    os.replace(xpath + ".tmp.npy", xpath)
    os.replace(ypath + ".tmp.npy", ypath)
td.barrier()


def make(dropout=0.2):
    inp = nn.Input((12, 5))
    h = nn.Dense(8)(inp)
    a = nn.MultiHeadAttention(2, 4)(h, h, use_causal_mask=True)
    h = nn.LayerNormalization()(nn.Add()([h, a]))
    h = nn.LSTM(6)(h)
    if dropout:  # masks differ by locality outside deterministic mode
        h = nn.Dropout(dropout)(h)
    model = nn.Model(inp, nn.Dense(3, activation="softmax")(h), seed=2)
    model.compile(tessera.optim.Adam(0.01), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def dataset():
    return tessera.data.Dataset.from_npy(xpath, ypath).shuffle(seed=4).batch(64)


def digest(model):
    h = hashlib.sha256()
    for k in sorted(model.weights.keys()):
        h.update(np.ascontiguousarray(model.weights[k]).tobytes())
    return h.hexdigest()


single = make()
single.fit(dataset(), epochs=3, verbose=0, deterministic=True, data_parallel=False)
dist = make()
ckpt = os.path.join(folder, f"tessera_models_dp_{td.size()}.tsm")


class Stop(nn.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if self.model._iteration == 6:
            raise KeyboardInterrupt


try:
    dist.fit(dataset(), epochs=3, verbose=0, deterministic=True,
             callbacks=[nn.callbacks.ModelCheckpoint(ckpt, save_training_state=True, save_freq=1),
                        Stop()])
except KeyboardInterrupt:
    pass
td.barrier()
dist = make()
dist.fit(dataset(), epochs=3, verbose=0, deterministic=True, resume_from=ckpt)
assert digest(dist) == digest(single), "resumed N-locality run differs from one process"
one = make()
one.fit(dataset(), epochs=3, verbose=0, deterministic=True, data_parallel=False, resume_from=ckpt)
assert digest(one) == digest(single), "resumed on one process differs"

a, b = make(0), make(0)
for m in (a, b):  # SGD: Adam would magnify the rounding noise of the key bias's zero gradient
    m.compile(tessera.optim.SGD(0.1), "sparse_categorical_crossentropy")
a.fit(x, y, sample_weight=w, batch_size=50, epochs=2, verbose=0, data_parallel=False)
b.fit(x, y, sample_weight=w, batch_size=50, epochs=2, verbose=0)
for k in a.weights.keys():
    np.testing.assert_allclose(a.weights[k], b.weights[k], rtol=2e-4, atol=2e-5)
td.barrier()
print("ok")
