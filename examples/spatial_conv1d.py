"""A 1-d CNN on long sequences trained spatially parallel: every locality holds
a slice of time of every sequence (conv1d_d on time tiles exchanges the halos
its windows read), and the gradient is that of the whole computation.

    conv1d_d(2 -> 8, kernel 3) + bias, relu -> conv1d_d(8 -> 8, kernel 3,
    dilation 2) + bias, relu -> mean over time -> dense(8 -> 2) -> softmax
    cross-entropy

The task: tell a slow sine wave from a fast one in noisy sequences of 4096
steps. Each step is one tessera.value_and_grad of a jit function (forward,
backward with the halo exchanges and one all_reduce per shared parameter),
then plain SGD. The loss is one global value, the same on every locality. At
the end the script runs the same steps on one process with conv1d on the
whole arrays (every locality does it, from the same seeded data) and prints
the largest difference of the parameters.

run: build/tessera run -n 2 examples/spatial_conv1d.py [--steps 10]
     .venv/bin/python examples/spatial_conv1d.py      (one locality)
"""

import argparse
import sys
import time

import numpy as np

import tessera
import tessera.distributed as td


@tessera.jit
def spatial_loss(x, y, w1, b1, w2, b2, wd, bd):
    """x: tiled along time (batch, steps, channels); everything else plain."""
    h = tessera.relu(tessera.bias_add(tessera.conv1d_d(x, w1, padding="same"), b1))
    h = tessera.relu(tessera.bias_add(tessera.conv1d_d(h, w2, padding="same", dilation=2), b2))
    z = np.mean(h, axis=1)  # along the tiled axis: one all_reduce, a plain (batch, 8)
    return tessera.sparse_categorical_crossentropy(y, z @ wd + bd, from_logits=True)


@tessera.jit
def whole_loss(x, y, w1, b1, w2, b2, wd, bd):
    """The same model on one process, on the whole x."""
    h = tessera.relu(tessera.bias_add(tessera.conv1d(x, w1, padding="same"), b1))
    h = tessera.relu(tessera.bias_add(tessera.conv1d(h, w2, padding="same", dilation=2), b2))
    z = np.mean(h, axis=1)
    return tessera.sparse_categorical_crossentropy(y, z @ wd + bd, from_logits=True)


def make_data(batch, steps, seed=0):
    """Sines of period 64 (class 0) or 12 (class 1), random phase, in noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=batch)
    t = np.arange(steps)
    period = np.where(y == 1, 12.0, 64.0)[:, None]
    phase = rng.uniform(0, 2 * np.pi, size=(batch, 1))
    wave = np.sin(2 * np.pi * t / period + phase)
    x = np.stack([wave, 0.5 * wave ** 2], axis=-1) + 0.3 * rng.normal(size=(batch, steps, 2))
    return x, y.astype(np.int64)


def init_params(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(3, 2, 8)) * 0.5, np.zeros(8), rng.normal(size=(3, 8, 8)) * 0.2, np.zeros(8),
            rng.normal(size=(8, 2)) * 0.5, np.zeros(2)]


def train(loss, x, y, params, steps, learning_rate, report):
    step = tessera.value_and_grad(loss, argnums=tuple(range(2, 2 + len(params))))
    losses = []
    for i in range(steps):
        value, grads = step(x, y, *params)
        params = [p - learning_rate * g for p, g in zip(params, grads)]
        losses.append(float(value))
        report(i, float(value))
    return params, losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10, help="SGD steps")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--length", type=int, default=4096, help="time steps of each sequence")
    p.add_argument("--learning-rate", type=float, default=1.0)
    args = p.parse_args()
    r, n = td.rank(), td.size()
    x, y = make_data(args.batch, args.length)
    # This locality's slice of time of every sequence (numpy.array_split sizes).
    lo, hi = [(int(part[0]), int(part[-1]) + 1) if len(part) else (0, 0)
              for part in np.array_split(np.arange(args.length), n)][r]
    xt = td.annotate_d(np.ascontiguousarray(x[:, lo:hi]), "columns")

    def report(i, value):
        if r == 0:
            print(f"step {i + 1}: loss {value:.6f}", flush=True)

    if r == 0:
        print(f"{args.batch} sequences of {args.length} steps over {n} localit{'y' if n == 1 else 'ies'} "
              f"({hi - lo} steps on locality 0)", flush=True)
    start = time.perf_counter()
    spatial, spatial_losses = train(spatial_loss, xt, y, init_params(), args.steps, args.learning_rate, report)
    spatial_time = time.perf_counter() - start

    # The same steps on one process (every locality), on the whole arrays.
    start = time.perf_counter()
    whole, whole_losses = train(whole_loss, x, y, init_params(), args.steps, args.learning_rate, lambda i, v: None)
    whole_time = time.perf_counter() - start
    diff = max(max(float(np.abs(a - b).max()) for a, b in zip(spatial, whole)),
               float(np.abs(np.subtract(spatial_losses, whole_losses)).max()))
    if r == 0:
        print(f"max difference from one process: {diff:.3g} (parameters and losses after {args.steps} steps; "
              f"{spatial_time:.2f} s spatially parallel, {whole_time:.2f} s on the whole arrays)", flush=True)
    if diff > 1e-9:
        sys.exit(f"rank {r}: the spatially parallel training differs from one process by {diff:.3g}")


if __name__ == "__main__":
    main()
