# Data-parallel training for the trace tests (trace_check.py): prints the final
# loss and a checksum of the weights, the same with and without --trace
# (rank 0 only: lines of Python ranks may interleave).
import numpy as np

from tessera import data, distributed, nn, optim

x, y = data.synthetic_har(n=256, seed=2)[:2]
model = nn.Sequential([nn.Conv1D(16, 3, activation="relu"), nn.MaxPool1D(2), nn.Flatten(),
                       nn.Dense(6, activation="softmax")], input_shape=x.shape[1:], seed=4)
model.compile(optim.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
h = model.fit(x, y, batch_size=64, epochs=1, seed=3, verbose=0)
if distributed.rank() == 0:
    print("result", repr(h.history["loss"][-1]), repr(float(sum(np.sum(w) for w in model.weights.values()))))
