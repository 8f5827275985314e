# Localities given different amounts of data: fit compares the row counts at
# its start and fails at once, naming each locality's rows (instead of
# training some epochs and failing in a collective).
import numpy as np

import tessera
from tessera import nn

td = tessera.distributed
rows = 64 + 32 * td.rank()
x = np.random.default_rng(0).normal(size=(rows, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
model = nn.Sequential([nn.Dense(2, activation="softmax")], input_shape=(4,))
model.compile("adam", "sparse_categorical_crossentropy")
model.fit(x, y, batch_size=16, epochs=6, verbose=0, checkpoint_dir=False)
print("trained")
