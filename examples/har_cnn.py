"""The HAR CNN of the Phylanx paper, trained with tessera.nn.

Conv1D(64, 3, relu) -> Conv1D(64, 3, relu) -> Dropout(0.5) -> MaxPool1D(2)
-> Flatten -> Dense(100, relu) -> Dense(6, softmax), on the UCI HAR inertial
signals (9 channels x 128 steps, 6 activities) when they are on disk
(TESSERA_HAR_DIR or --data), else on tessera's synthetic HAR-like data.

It times the forward pass at minibatch 8000 (the paper's measurement), then
trains and reports the test accuracy and the time. Under `tessera run -n N`
the training is data parallel over the N localities; locality 0 reports.

run: .venv/bin/python examples/har_cnn.py [--epochs 8] [--batch-size 64]
     build/tessera run -n 2 examples/har_cnn.py
"""

import argparse
import time

import numpy as np

import tessera
from tessera import data, nn


def build_model(seed=0):
    return nn.Sequential([
        nn.Conv1D(64, 3, activation="relu"),
        nn.Conv1D(64, 3, activation="relu"),
        nn.Dropout(0.5),
        nn.MaxPool1D(2),
        nn.Flatten(),
        nn.Dense(100, activation="relu"),
        nn.Dense(6, activation="softmax"),
    ], input_shape=(128, 9), seed=seed)


def load(args):
    if not args.synthetic:
        try:
            xtr, ytr = data.load_har(args.data, "train")
            xte, yte = data.load_har(args.data, "test")
            return xtr, ytr, xte, yte, "UCI HAR"
        except FileNotFoundError:
            pass
    xtr, ytr = data.synthetic_har(n=args.train_samples, seed=1, split="train")
    xte, yte = data.synthetic_har(n=args.test_samples, seed=1, split="test")
    return xtr, ytr, xte, yte, "synthetic HAR (UCI HAR files not found)"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--data", default=None, help="folder holding 'UCI HAR Dataset'")
    p.add_argument("--synthetic", action="store_true", help="use the synthetic data")
    p.add_argument("--train-samples", type=int, default=7352)
    p.add_argument("--test-samples", type=int, default=2947)
    p.add_argument("--forward-batch", type=int, default=8000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    rank, size = tessera.distributed.rank(), tessera.distributed.size()

    def report(*a):
        if rank == 0:
            print(*a, flush=True)

    xtr, ytr, xte, yte, source = load(args)
    report(f"data: {source}: {len(xtr)} train, {len(xte)} test samples; {size} "
           f"localit{'y' if size == 1 else 'ies'} x {tessera.num_threads()} threads")
    model = build_model(args.seed)
    model.compile(tessera.optim.Adam(args.learning_rate), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.summary(print_fn=report)

    batch = np.resize(xtr, (args.forward_batch,) + xtr.shape[1:]).astype(np.float32)
    model.predict(batch[:64], batch_size=64)  # compile once
    times = []
    for _ in range(3):
        t = time.perf_counter()
        model.predict(batch, batch_size=args.forward_batch)
        times.append(time.perf_counter() - t)
    report(f"forward pass, minibatch {args.forward_batch}: {np.median(times) * 1e3:.1f} ms "
           "(median of 3, on each locality)")

    start = time.perf_counter()
    model.fit(xtr, ytr, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
              validation_data=(xte, yte))
    train_time = time.perf_counter() - start
    loss, acc = model.evaluate(xte, yte, verbose=0)
    report(f"test accuracy: {acc:.4f}  test loss: {loss:.4f}  training time: {train_time:.1f} s")
    return acc


if __name__ == "__main__":
    main()
