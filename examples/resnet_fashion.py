"""A small ResNet on Fashion-MNIST (Debian's dataset-fashion-mnist), trained with tessera.nn.

Stem Conv2D(16, 3)-BN-ReLU, then three stages of residual blocks of widths
16, 32, 64 (the second and third halve the resolution: 28 -> 14 -> 7). A block
is Conv2D-BN-ReLU-Conv2D-BN plus a shortcut (a 1x1 Conv2D-BN when the shape
changes, else the input itself), added with nn.Add, then ReLU.
GlobalAveragePooling2D and Dense(10) (logits). Adam with a cosine decay of the
learning rate over the run; random horizontal flips of the training images (a
Dataset.map on each batch). The test set is the validation data.

run: .venv/bin/python examples/resnet_fashion.py [--epochs 8] [--batch-size 128]
     .venv/bin/python examples/resnet_fashion.py --quick   # a CI-sized run
     build/tessera run -n 2 examples/resnet_fashion.py --quick
"""

import argparse
import time

import numpy as np

import tessera
from tessera import data, nn, optim


def conv_bn(x, filters, kernel, strides=1, relu=True):
    x = nn.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False,
                  kernel_initializer="he_normal")(x)
    x = nn.BatchNormalization(momentum=0.9)(x)
    return nn.Activation("relu")(x) if relu else x


def residual_block(x, filters, strides=1):
    y = conv_bn(x, filters, 3, strides)
    y = conv_bn(y, filters, 3, relu=False)
    if strides != 1 or x.shape[-1] != filters:
        x = conv_bn(x, filters, 1, strides, relu=False)
    return nn.Activation("relu")(nn.Add()([x, y]))


def build_model(widths=(16, 32, 64), blocks=1):
    inputs = nn.Input(shape=(28, 28, 1), name="image")
    x = conv_bn(inputs, widths[0], 3)
    for stage, w in enumerate(widths):
        for b in range(blocks):
            x = residual_block(x, w, strides=2 if stage > 0 and b == 0 else 1)
    x = nn.GlobalAveragePooling2D()(x)
    outputs = nn.Dense(10, name="logits")(x)
    return nn.Model(inputs, outputs, name="resnet_fashion")


def flip(seed):
    """A Dataset.map: flips a random half of each batch's images left-right
    (a seeded generator, so every run draws the same flips)."""
    rng = np.random.default_rng(seed)

    def fn(x, y):
        pick = rng.random(len(x)) < 0.5
        x = x.copy()
        x[pick] = x[pick, :, ::-1]
        return x, y
    return fn


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=None, help="(8; quick: 2)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--widths", default=None, help="stage widths (16,32,64; quick: 8,16,32)")
    p.add_argument("--blocks", type=int, default=1, help="residual blocks per stage")
    p.add_argument("--no-augment", action="store_true", help="no random flips")
    p.add_argument("--train-samples", type=int, default=None,
                   help="use the first N training images (quick: 12000)")
    p.add_argument("--test-samples", type=int, default=None, help="(quick: 2000)")
    p.add_argument("--quick", action="store_true",
                   help="a CI-sized run: widths 8,16,32, 12000 images, 2 epochs")
    p.add_argument("--min-accuracy", type=float, default=None,
                   help="exit with status 1 when the test accuracy is below this")
    p.add_argument("--checkpoint", default=None,
                   help="keep the best model (by test accuracy) in this .tsm file")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    quick = args.quick
    epochs = args.epochs or (2 if quick else 8)
    widths = tuple(int(w) for w in (args.widths or ("8,16,32" if quick else "16,32,64"))
                   .split(","))
    n_train = args.train_samples or (12000 if quick else None)
    n_test = args.test_samples or (2000 if quick else None)

    rank, size = tessera.distributed.rank(), tessera.distributed.size()

    def report(*a):
        if rank == 0:
            print(*a, flush=True)

    xtr, ytr = data.load_fashion_mnist("train")
    xte, yte = data.load_fashion_mnist("test")
    xtr, ytr = xtr[:n_train], ytr[:n_train]
    xte, yte = xte[:n_test], yte[:n_test]
    report(f"Fashion-MNIST: {len(xtr)} train, {len(xte)} test; {size} "
           f"localit{'y' if size == 1 else 'ies'} x {tessera.num_threads()} threads")

    model = build_model(widths, args.blocks)
    steps = epochs * -(-len(xtr) // args.batch_size)
    model.compile(optim.Adam(optim.CosineDecay(args.learning_rate, steps, alpha=0.01)),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.summary(print_fn=report)
    train = data.Dataset.from_tensor_slices((xtr, ytr)).shuffle(seed=args.seed) \
        .batch(args.batch_size)
    if not args.no_augment:
        train = train.map(flip(args.seed))
    callbacks = []
    if args.checkpoint:
        callbacks.append(nn.callbacks.ModelCheckpoint(args.checkpoint, monitor="val_accuracy",
                                                      save_best_only=True))
    start = time.perf_counter()
    model.fit(train, epochs=epochs, validation_data=(xte, yte), callbacks=callbacks,
              validation_batch_size=500)
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
