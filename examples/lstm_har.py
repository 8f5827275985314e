"""An LSTM classifier of human activities (HAR), trained with tessera.nn.

Two stacked LSTM(64) layers (the first with return_sequences=True) read the
128 timesteps of 9 inertial channels, 4 timesteps per LSTM step (a Reshape to
32 frames of 36 values; --frame 1 reads every timestep, about 10 times slower
to train and slower to learn); Dense(6, softmax) classifies the last state. The data is UCI HAR when it is on disk (TESSERA_HAR_DIR, --data or
~/.tessera/datasets: see tessera.data.load_har), else tessera's synthetic
HAR-like set of the same shapes (data.synthetic_har). The inputs are
standardized per channel with the training set's mean and deviation.

run: .venv/bin/python examples/lstm_har.py [--epochs 10] [--batch-size 64]
     .venv/bin/python examples/lstm_har.py --quick    # a CI-sized run
     build/tessera run -n 2 examples/lstm_har.py --quick
"""

import argparse
import time

import tessera
from tessera import nn, optim

from har_cnn import load  # the same data: UCI HAR when on disk, else synthetic


def build_model(units=64, layers=2, timesteps=128, channels=9, dropout=0.0, frame=1):
    inputs = nn.Input(shape=(timesteps, channels), name="signals")
    x = inputs
    if frame > 1:  # `frame` consecutive timesteps side by side: a shorter sequence
        x = nn.Reshape((timesteps // frame, frame * channels))(x)
    for i in range(layers):
        x = nn.LSTM(units, return_sequences=i < layers - 1)(x)
        if dropout:
            x = nn.Dropout(dropout)(x)
    outputs = nn.Dense(6, activation="softmax", name="activity")(x)
    return nn.Model(inputs, outputs, name="lstm_har")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=None, help="(10; quick: 3)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=5e-3)
    p.add_argument("--units", type=int, default=None, help="LSTM units (64; quick: 32)")
    p.add_argument("--layers", type=int, default=None, help="stacked LSTMs (2; quick: 1)")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--frame", type=int, default=4,
                   help="timesteps per LSTM step: 128 x 9 signals are read as 32 frames of 36 "
                        "with the default 4 (1: every timestep)")
    p.add_argument("--data", default=None, help="folder holding 'UCI HAR Dataset'")
    p.add_argument("--synthetic", action="store_true", help="use the synthetic data")
    p.add_argument("--train-samples", type=int, default=None,
                   help="synthetic training samples (7352; quick: 2000)")
    p.add_argument("--test-samples", type=int, default=None,
                   help="synthetic test samples (2947; quick: 1000)")
    p.add_argument("--quick", action="store_true",
                   help="a CI-sized run: one LSTM(32), 3 epochs on 2000 synthetic samples")
    p.add_argument("--min-accuracy", type=float, default=None,
                   help="exit with status 1 when the test accuracy is below this")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    quick = args.quick
    epochs = args.epochs or (3 if quick else 10)
    units = args.units or (32 if quick else 64)
    layers = args.layers or (1 if quick else 2)
    if quick:
        args.synthetic = args.synthetic or args.data is None
        args.train_samples = args.train_samples or 2000
        args.test_samples = args.test_samples or 1000

    rank, size = tessera.distributed.rank(), tessera.distributed.size()

    def report(*a):
        if rank == 0:
            print(*a, flush=True)

    xtr, ytr, xte, yte, source = load(args)
    mean = xtr.mean(axis=(0, 1), keepdims=True)
    std = xtr.std(axis=(0, 1), keepdims=True) + 1e-6
    xtr, xte = (xtr - mean) / std, (xte - mean) / std
    report(f"data: {source}: {len(xtr)} train, {len(xte)} test samples; {size} "
           f"localit{'y' if size == 1 else 'ies'} x {tessera.num_threads()} threads")

    model = build_model(units, layers, xtr.shape[1], xtr.shape[2], args.dropout,
                        args.frame)
    model.compile(optim.Adam(args.learning_rate, clipnorm=1.0), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.summary(print_fn=report)
    start = time.perf_counter()
    model.fit(xtr, ytr, batch_size=args.batch_size, epochs=epochs, seed=args.seed,
              validation_data=(xte, yte))
    train_time = time.perf_counter() - start
    loss, acc = model.evaluate(xte, yte, batch_size=500, verbose=0)
    report(f"test accuracy: {acc:.4f}  test loss: {loss:.4f}  training time: {train_time:.1f} s "
           f"({epochs} epochs)")
    ok = args.min_accuracy is None or acc >= args.min_accuracy
    if args.min_accuracy is not None:
        report(f"{'ok' if ok else 'FAILED'}: test accuracy {acc:.4f} "
               f"{'>=' if ok else '<'} {args.min_accuracy}")
    return {"accuracy": acc, "loss": loss, "time": train_time, "ok": ok}


if __name__ == "__main__":
    raise SystemExit(0 if main()["ok"] else 1)
