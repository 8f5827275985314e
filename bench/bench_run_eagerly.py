"""How much slower is compile(run_eagerly=True), the debugging mode, than the traced
step? One fit epoch of an MLP (784-256-10, 4,096 samples, batch 256: 16 steps) with
Keras's default train_step and with keras-io debugging_tips' second-order train_step
(two GradientTapes), traced and eager, after a warm-up epoch of each; Keras 3 on JAX's
default step compiled and with run_eagerly=True as the named peer (its JAX trainer has
no TensorFlow-style tape step). Medians of --rounds epochs, one process.

run: .venv/bin/python bench/bench_run_eagerly.py [--rounds 3]
"""

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "jax")

import tessera.nn as tn  # noqa: E402

SAMPLES, BATCH = 4096, 256


class SecondOrder(tn.Model):
    """debugging_tips' step, its prints left out (they would time the terminal)."""

    def train_step(self, data):
        x, y = data
        ws = self.trainable_variables
        with tn.GradientTape() as tape2:
            with tn.GradientTape() as tape1:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            dl = tape1.gradient(loss, ws)
        d2 = tape2.gradient(dl, ws)
        if self.run_eagerly:
            self.peek = float(tn.ops.max(dl[0])), float(tn.ops.max(d2[0]))
        self.optimizer.apply_gradients(zip([0.5 * a + 0.5 * b for a, b in zip(d2, dl)], ws))
        for m in self.metrics:
            if m.name == "loss":
                m.update_state(loss)
            else:
                m.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def model(lib, cls=None):
    inp = lib.Input((784,))
    h = lib.layers.Dense(256, activation="relu")(inp)
    out = lib.layers.Dense(10, activation="softmax")(h)
    return (cls or lib.Model)(inp, out)


def epoch_times(m, x, y, rounds):
    m.fit(x, y, epochs=1, batch_size=BATCH, verbose=0)  # warm-up (programs, jit)
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        m.fit(x, y, epochs=1, batch_size=BATCH, verbose=0)
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, 784)).astype("float32")
    y = rng.integers(0, 10, SAMPLES)
    rows = []
    for name, cls in (("default train_step", None), ("second-order train_step", SecondOrder)):
        times = []
        for eager in (False, True):
            m = model(tn, cls)
            m.compile(optimizer=tn.optimizers.SGD(1e-2), loss="sparse_categorical_crossentropy",
                      metrics=["sparse_categorical_accuracy"], run_eagerly=eager)
            times.append(epoch_times(m, x, y, args.rounds))
        rows.append((f"tessera {name}", *times))
    import keras  # noqa: PLC0415 - the peer, after KERAS_BACKEND

    times = []
    for eager in (False, True):
        m = model(keras)
        m.compile(optimizer=keras.optimizers.SGD(1e-2), loss="sparse_categorical_crossentropy",
                  metrics=["sparse_categorical_accuracy"], run_eagerly=eager)
        times.append(epoch_times(m, x, y, args.rounds))
    rows.append((f"keras {keras.__version__} (jax) default train_step", *times))
    print(f"one epoch, {SAMPLES} samples, batch {BATCH}, {os.cpu_count()} cores; "
          f"median of {args.rounds}")
    print(f"{'':52s} {'traced s':>9s} {'eager s':>9s} {'eager/traced':>13s}")
    for name, traced, eager in rows:
        print(f"{name:52s} {traced:9.3f} {eager:9.3f} {eager / traced:12.1f}x")


if __name__ == "__main__":
    main()
