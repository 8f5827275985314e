"""Logistic regression trained by batch gradient descent, in plain NumPy,
run on tessera by @tessera.jit (a port of examples/logistic_regression.tsl).

run: python examples/logistic_regression.py [n] [d] [iterations]
"""

import sys
import time

import numpy as np

import tessera


@tessera.jit
def train(x, y, iterations, learning_rate):
    n, d = x.shape
    w = np.zeros(d)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        w = w - learning_rate * (x.T @ (p - y)) / n
    return w


@tessera.jit
def accuracy(x, y, w):
    return np.mean(((x @ w > 0.0) == (y > 0.5)).astype(np.float64))


def make_data(n, d, seed=0):
    """Labels come from a hidden weight vector, so the problem is learnable."""
    rng = np.random.default_rng(seed)
    true_w = rng.normal(size=d)
    x = rng.normal(size=(n, d))
    y = (x @ true_w > 0.0).astype(np.float64)
    return x, y


def main(n=20000, d=20, iterations=200):
    x, y = make_data(n, d)
    start = time.perf_counter()
    w = train(x, y, iterations, 0.5)
    elapsed = time.perf_counter() - start
    acc = accuracy(x, y, w)
    print(f"logistic regression: {n} samples, {d} features, {iterations} iterations")
    print("training accuracy:", acc, f"({elapsed:.3f} s)")
    return acc


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])
