# Localities that name different checkpoint folders: the ones that differ
# from locality 0 fail at once, naming their folder (instead of locality 0
# waiting for shard reports that never come).
import os
import tempfile

import numpy as np

import tessera
from tessera import nn

td = tessera.distributed
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
model = nn.Sequential([nn.Dense(2, activation="softmax")], input_shape=(4,))
model.compile("adam", "sparse_categorical_crossentropy")
folder = os.path.join(tempfile.mkdtemp(prefix="tessera-ckpt-differ-"), f"rank{td.rank()}")
model.fit(x, y, verbose=0, checkpoint_dir=folder)
