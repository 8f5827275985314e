"""What a new sequence length costs (docs/nn.md, "Variable lengths and masks").

The keras-io text classifier (Input(shape=(None,), int) -> Embedding(mask_zero)
-> Bidirectional(LSTM) -> Dense) is trained by fit on arrays padded to several
lengths. For each length: the first fit call (the graph recorded again for the
length, its training program written and compiled, then the steps) and the
same call again (programs from the cache), and the difference, which is the
cost of the new shape. With --keras, Keras 3 on JAX (which also compiles once
per input shape) is timed the same way, interleaved, from the same weights.

    .venv/bin/python bench/bench_varlen.py [--lengths 16,32,64] [--rounds 3] [--keras]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from machine import machine_line


def build(lib, vocab, dim, units):
    inp = lib.Input(shape=(None,), dtype="int32")
    h = lib.layers.Embedding(vocab, dim, mask_zero=True)(inp)
    h = lib.layers.Bidirectional(lib.layers.LSTM(units))(h)
    m = lib.Model(inp, lib.layers.Dense(1, activation="sigmoid")(h))
    m.compile(optimizer=lib.optimizers.SGD(0.1), loss="binary_crossentropy")
    return m


def data(rng, n, length, vocab):
    x = np.zeros((n, length), dtype=np.int32)
    for i in range(n):
        k = int(rng.integers(1, length + 1))
        x[i, :k] = rng.integers(1, vocab, size=k)
    return x, (x[:, 0] > vocab // 2).astype(np.float32).reshape(-1, 1)


def timed(model, x, y, batch):
    t = time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="16,32,64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--keras", action="store_true")
    a = ap.parse_args()
    lengths = [int(v) for v in a.lengths.split(",")]
    libs = {}
    import tessera  # noqa: PLC0415
    import tessera.nn as tnn  # noqa: PLC0415

    libs["tessera"] = tnn
    if a.keras:
        os.environ.setdefault("KERAS_BACKEND", "jax")
        import keras  # noqa: PLC0415

        libs["keras-jax"] = keras
    first = {(n, L): [] for n in libs for L in lengths}
    again = {(n, L): [] for n in libs for L in lengths}
    for r in range(a.rounds):
        rng = np.random.default_rng(r)
        models = {n: build(lib, 1000, 32, 32) for n, lib in libs.items()}
        if "keras-jax" in models:
            models["keras-jax"].set_weights(models["tessera"].get_weights())
        for L in lengths:
            x, y = data(rng, a.samples, L, 1000)
            for n, m in models.items():  # interleaved
                first[(n, L)].append(timed(m, x, y, a.batch))
                again[(n, L)].append(timed(m, x, y, a.batch))
        print(f"round {r + 1}/{a.rounds} done; tessera shapes written: "
              f"{models['tessera'].varlen_compiles}")
    print(machine_line())
    print(f"tessera: {tessera.num_threads()} threads; keras-jax: Keras 3 on JAX's CPU build (XLA, jit_compile default), same "
          "weights and data, fits interleaved")
    print(f"{'library':10} {'length':>6} {'first fit s':>12} {'cached fit s':>13} "
          f"{'new shape s':>12}  (medians of {a.rounds}; {a.samples} samples, batch {a.batch})")
    for n in libs:
        for L in lengths:
            f, c = statistics.median(first[(n, L)]), statistics.median(again[(n, L)])
            print(f"{n:10} {L:6d} {f:12.3f} {c:13.3f} {f - c:12.3f}")


if __name__ == "__main__":
    main()
