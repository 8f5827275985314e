#!/usr/bin/env python3
"""NumPy speed suite: 40+ NumPy kernels run through tessera.jit and as NumPy.

The kernels are plain Python/NumPy functions, written the way NumPy users
write them (stencils, distances, reductions, cumulative sums, image filters,
Monte Carlo, element loops, small linear algebra, machine learning, graphs,
physics, polynomials); the harness wraps each in ``tessera.jit(f, threads=N)``
itself. Each kernel is first checked against NumPy (its result and every
argument array after the call, by tests/python/jit_check.py's ``assert_same``;
kernels drawing random numbers by statistics and shapes, since tessera's
stream differs from NumPy's by design), then timed interleaved with NumPy in
one process: NumPy, tessera at 1 thread and tessera at 2 threads called in
turn (rotating which goes first), after a warm-up, median of ``--runs``.
Element-loop kernels are raced against CPython running the same code (that
is what NumPy runs for them), and where the code allows also on Python lists.
Numba's ``@njit`` of the same code (every function of the kernel decorated,
single-threaded as by default; a benchmark peer only, ``pip install numba``)
is checked the same way and raced in the same rounds; a kernel Numba refuses
says so. First-call times (translation or type inference and compilation)
are printed beside the run times. The summary holds issue 31's targets:
vectorised kernels <= 0.8x NumPy (geometric mean) and none over 1.5x;
element loops <= 1.5x Numba (geometric mean) and none over 3x.

Each kernel runs in a process of its own, so one that crashes or hangs is a
FAIL line and the suite goes on (``--in-process`` to debug one).

Run:
  .venv/bin/python bench/bench_numpy_kernels.py [--runs 5] [--filter NAME] [--quick]
      [--check-only] [--no-numba] [--cold] [--json FILE]
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_numpy_kernels.py
      (NumPy's OpenBLAS at its best kernel where these are set; see docs/benchmarks.md)

Kernels tessera does not run today are listed in KNOWN_FAILURES, with the reason.
"""

import argparse
import copy
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(_HERE, os.pardir, "tests", "python"))

from published_kernels import (  # noqa: E402 - bench/, on the path above
    lu_decompose, insertion_sort, bubble_sort, sieve, life_roll,
    random_walk_2d, black_scholes, black_scholes_erf, rk4_oscillator, sor_poisson,
    knn_predict, rolling_std, count_prime_factors, matrix_chain_order, spectral_norm,
    nbody_game, select_to_list, digitize_histogram, _check_walk_2d, _options, _bodies,
    _knn_data, MORE_PUBLISHED, FOURTH_PUBLISHED)

# ---------------------------------------------------------------- stencils and diffusion


def jacobi_1d(a, b, steps):
    for t in range(steps):
        b[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0
        a[1:-1] = (b[:-2] + b[1:-1] + b[2:]) / 3.0


def jacobi_2d(a, b, steps):
    for t in range(steps):
        b[1:-1, 1:-1] = 0.2 * (
            a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1]
        )
        a[1:-1, 1:-1] = 0.2 * (
            b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] + b[2:, 1:-1] + b[:-2, 1:-1]
        )


def heat_1d(u0, alpha, steps):
    u = u0.copy()
    for _ in range(steps):
        u[1:-1] = u[1:-1] + alpha * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def heat_2d(u, alpha, steps):
    for _ in range(steps):
        u[1:-1, 1:-1] += alpha * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
        )
    return u


def laplacian_2d(u, dx):
    return (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]) / dx**2


def wave_2d(u_prev, u, c, steps):
    for _ in range(steps):
        lap = np.zeros_like(u)
        lap[1:-1, 1:-1] = (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
        )
        u_next = 2 * u - u_prev + c**2 * lap
        u_prev, u = u, u_next
    return u


def gray_scott(U, V, Du, Dv, F, k, steps):
    for _ in range(steps):
        u = U[1:-1, 1:-1]
        v = V[1:-1, 1:-1]
        Lu = U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:] - 4 * u
        Lv = V[:-2, 1:-1] + V[2:, 1:-1] + V[1:-1, :-2] + V[1:-1, 2:] - 4 * v
        uvv = u * v * v
        u += Du * Lu - uvv + F * (1 - u)
        v += Dv * Lv + uvv - (F + k) * v
    return U, V


# ---------------------------------------------------------------- distances


def pairwise_distances(X):
    diff = X[:, np.newaxis, :] - X[np.newaxis, :, :]
    return np.sqrt(np.sum(diff**2, axis=-1))


def euclidean_gram(X, Y):
    XX = np.sum(X * X, axis=1)
    YY = np.sum(Y * Y, axis=1)
    d2 = XX[:, None] + YY[None, :] - 2 * X @ Y.T
    return np.sqrt(np.maximum(d2, 0))


def cosine_similarity(A, B):
    An = A / np.linalg.norm(A, axis=1, keepdims=True)
    Bn = B / np.linalg.norm(B, axis=1, keepdims=True)
    return An @ Bn.T


def haversine(lat1, lon1, lat2, lon2):
    lat1, lon1, lat2, lon2 = map(np.radians, (lat1, lon1, lat2, lon2))
    dlat = lat2 - lat1
    dlon = lon2 - lon1
    a = np.sin(dlat / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin(dlon / 2) ** 2
    return 6371.0 * 2 * np.arcsin(np.sqrt(a))


# ---------------------------------------------------------------- reductions


def column_stats(x):
    return x.mean(axis=0), x.std(axis=0), x.argmax(axis=1), x.sum(axis=1)


def standardize(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def normalize_rows(x):
    return x / np.linalg.norm(x, axis=1)[:, np.newaxis]


def l2_norms(x):
    return np.sqrt(np.sum(np.abs(x) ** 2, axis=1))


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def logsumexp(x):
    m = np.max(x, axis=1)
    return m + np.log(np.sum(np.exp(x - m[:, None]), axis=1))


# ---------------------------------------------------------------- cumulative sums


def moving_average(x, w):
    ret = np.cumsum(x, dtype=float)
    ret[w:] = ret[w:] - ret[:-w]
    return ret[w - 1:] / w


def cumsum_2d(x):
    return np.cumsum(x, axis=1), np.cumsum(x, axis=0)


# ---------------------------------------------------------------- image filters


def box_blur_3x3(img):
    out = np.zeros_like(img)
    out[1:-1, 1:-1] = (
        img[:-2, :-2] + img[:-2, 1:-1] + img[:-2, 2:]
        + img[1:-1, :-2] + img[1:-1, 1:-1] + img[1:-1, 2:]
        + img[2:, :-2] + img[2:, 1:-1] + img[2:, 2:]
    ) / 9.0
    return out


def sobel(img):
    gx = (img[:-2, 2:] + 2 * img[1:-1, 2:] + img[2:, 2:]) - (
        img[:-2, :-2] + 2 * img[1:-1, :-2] + img[2:, :-2]
    )
    gy = (img[2:, :-2] + 2 * img[2:, 1:-1] + img[2:, 2:]) - (
        img[:-2, :-2] + 2 * img[:-2, 1:-1] + img[:-2, 2:]
    )
    return np.sqrt(gx**2 + gy**2)


def bilinear_resize(img, out_h, out_w):
    h, w = img.shape
    ys = np.linspace(0, h - 1, out_h)
    xs = np.linspace(0, w - 1, out_w)
    y0 = np.floor(ys).astype(int)
    x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    wy = (ys - y0)[:, None]
    wx = (xs - x0)[None, :]
    top = img[y0][:, x0] * (1 - wx) + img[y0][:, x1] * wx
    bottom = img[y1][:, x0] * (1 - wx) + img[y1][:, x1] * wx
    return top * (1 - wy) + bottom * wy


# ---------------------------------------------------------------- Monte Carlo


def monte_carlo_pi(n):
    x = np.random.random(n)
    y = np.random.random(n)
    inside = np.sum(x * x + y * y <= 1.0)
    return 4.0 * inside / n


def random_walk(n):
    steps = np.where(np.random.random(n) < 0.5, -1, 1)
    return np.cumsum(steps)


def monte_carlo_pi_loop(n):
    inside = 0
    for i in range(n):
        x = np.random.random()
        y = np.random.random()
        if x * x + y * y <= 1.0:
            inside += 1
    return 4.0 * inside / n


# ---------------------------------------------------------------- element loops


def axpy_loop(a, x, y):
    for i in range(len(x)):
        y[i] = a * x[i] + y[i]
    return y


def prefix_sum_loop(x):
    out = np.empty_like(x)
    total = 0.0
    for i in range(len(x)):
        total += x[i]
        out[i] = total
    return out


def smooth_loop(x):
    out = np.zeros_like(x)
    for i in range(1, len(x) - 1):
        out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0
    return out


def histogram_loop(x, nbins, lo, hi):
    counts = np.zeros(nbins, dtype=np.int64)
    width = (hi - lo) / nbins
    for v in x:
        b = int((v - lo) / width)
        if 0 <= b < nbins:
            counts[b] += 1
    return counts


def lcg(n, seed):
    out = np.empty(n, dtype=np.int64)
    state = seed
    for i in range(n):
        state = (1103515245 * state + 12345) % 2147483648
        out[i] = state
    return out


def mandelbrot_loop(xmin, xmax, ymin, ymax, width, height, max_iter):
    counts = np.zeros((height, width), dtype=np.int64)
    for j in range(height):
        for i in range(width):
            cr = xmin + i * (xmax - xmin) / width
            ci = ymin + j * (ymax - ymin) / height
            zr = 0.0
            zi = 0.0
            n = 0
            while n < max_iter and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            counts[j, i] = n
    return counts


def thomas_solve(a, b, c, d):
    n = len(d)
    cp = np.zeros(n)
    dp = np.zeros(n)
    cp[0] = c[0] / b[0]
    dp[0] = d[0] / b[0]
    for i in range(1, n):
        m = b[i] - a[i] * cp[i - 1]
        cp[i] = c[i] / m
        dp[i] = (d[i] - a[i] * dp[i - 1]) / m
    x = np.zeros(n)
    x[-1] = dp[-1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return x


def collatz_lengths(n):
    lengths = np.zeros(n, dtype=np.int64)
    for start in range(1, n):
        k = start
        steps = 0
        while k != 1:
            if k % 2 == 0:
                k = k // 2
            else:
                k = 3 * k + 1
            steps += 1
        lengths[start] = steps
    return lengths


# ---------------------------------------------------------------- vectorised Mandelbrot


def mandelbrot_complex(width, height, max_iter):
    x = np.linspace(-2.0, 1.0, width)
    y = np.linspace(-1.5, 1.5, height)
    c = x[np.newaxis, :] + 1j * y[:, np.newaxis]
    z = np.zeros_like(c)
    counts = np.zeros(c.shape, dtype=int)
    for _ in range(max_iter):
        mask = np.abs(z) <= 2
        z[mask] = z[mask] ** 2 + c[mask]
        counts[mask] += 1
    return counts


# ---------------------------------------------------------------- linear algebra


def matrix_chain(A, B, C):
    return A @ B @ C


def power_iteration(A, iters):
    v = np.ones(A.shape[0])
    for _ in range(iters):
        v = A @ v
        v /= np.linalg.norm(v)
    return v, v @ A @ v


def gram_schmidt(A):
    m, n = A.shape
    Q = np.zeros((m, n))
    for j in range(n):
        v = A[:, j].copy()
        for i in range(j):
            v -= np.dot(Q[:, i], A[:, j]) * Q[:, i]
        Q[:, j] = v / np.linalg.norm(v)
    return Q


def solve_and_inverse(A, b):
    x = np.linalg.solve(A, b)
    Ainv = np.linalg.inv(A)
    return x, Ainv @ b


# ---------------------------------------------------------------- machine learning and physics


def kmeans_step(X, centers):
    d = ((X[:, np.newaxis, :] - centers[np.newaxis, :, :]) ** 2).sum(axis=2)
    labels = d.argmin(axis=1)
    new_centers = np.array([X[labels == k].mean(axis=0) for k in range(len(centers))])
    return labels, new_centers


def logistic_step(X, y, w, lr):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    grad = X.T @ (p - y) / len(y)
    return w - lr * grad


def floyd_warshall(dist):
    d = dist.copy()
    n = d.shape[0]
    for k in range(n):
        d = np.minimum(d, d[:, k, np.newaxis] + d[np.newaxis, k, :])
    return d


def nbody_forces(pos, mass, eps):
    dx = pos[np.newaxis, :, :] - pos[:, np.newaxis, :]
    r2 = np.sum(dx**2, axis=2) + eps**2
    inv_r3 = r2**-1.5
    np.fill_diagonal(inv_r3, 0.0)
    return np.sum(dx * (mass[np.newaxis, :] * inv_r3)[:, :, np.newaxis], axis=1)


def horner(coeffs, x):
    result = np.zeros_like(x)
    for c in coeffs:
        result = result * x + c
    return result


def growth(population, rates, years):
    history = np.empty((years + 1, population.shape[0]))
    history[0] = population
    for t in range(years):
        history[t + 1] = history[t] * (1 + rates)
    return history


# ---------------------------------------------------------------- issue 31's kinds, as NumPy users write them


def julia_loop(width, height, cr, ci, max_iter):
    counts = np.zeros((height, width), dtype=np.int64)
    for j in range(height):
        for i in range(width):
            zr = -1.5 + 3.0 * i / width
            zi = -1.5 + 3.0 * j / height
            n = 0
            while n < max_iter and zr * zr + zi * zi < 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
            counts[j, i] = n
    return counts


def conv2d_loop(img, k):
    h = img.shape[0] - k.shape[0] + 1
    w = img.shape[1] - k.shape[1] + 1
    out = np.zeros((h, w))
    for i in range(h):
        for j in range(w):
            s = 0.0
            for a in range(k.shape[0]):
                for b in range(k.shape[1]):
                    s += img[i + a, j + b] * k[a, b]
            out[i, j] = s
    return out


def wave_1d_loop(u, u_prev, c2, steps):
    n = len(u)
    for t in range(steps):
        u_next = np.zeros(n)
        for i in range(1, n - 1):
            u_next[i] = 2.0 * u[i] - u_prev[i] + c2 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u_prev = u
        u = u_next
    return u


def _log_density(x):
    return -0.5 * x * x


def metropolis_loop(n, step):
    chain = np.empty(n)
    x = 0.0
    for i in range(n):
        proposal = x + step * (2.0 * np.random.random() - 1.0)
        if np.log(np.random.random()) < _log_density(proposal) - _log_density(x):
            x = proposal
        chain[i] = x
    return chain


def life_loop(grid, steps):
    n = grid.shape[0]
    m = grid.shape[1]
    for t in range(steps):
        new = np.zeros((n, m), dtype=np.int64)
        for i in range(n):
            for j in range(m):
                alive = 0
                for di in range(-1, 2):
                    for dj in range(-1, 2):
                        if di != 0 or dj != 0:
                            alive += grid[(i + di) % n, (j + dj) % m]
                if alive == 3 or (alive == 2 and grid[i, j] == 1):
                    new[i, j] = 1
        grid = new
    return grid


def life(grid, steps):
    for _ in range(steps):
        neighbours = (
            grid[:-2, :-2] + grid[:-2, 1:-1] + grid[:-2, 2:]
            + grid[1:-1, :-2] + grid[1:-1, 2:]
            + grid[2:, :-2] + grid[2:, 1:-1] + grid[2:, 2:]
        )
        inner = grid[1:-1, 1:-1]
        born = (neighbours == 3) & (inner == 0)
        survive = ((neighbours == 2) | (neighbours == 3)) & (inner == 1)
        grid = np.zeros_like(grid)
        grid[1:-1, 1:-1] = (born | survive).astype(grid.dtype)
    return grid


def edit_distance_loop(a, b):
    n = len(a)
    m = len(b)
    d = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(n + 1):
        d[i, 0] = i
    for j in range(m + 1):
        d[0, j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + cost)
    return d[n, m]


def lcs_loop(a, b):
    n = len(a)
    m = len(b)
    L = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if a[i - 1] == b[j - 1]:
                L[i, j] = L[i - 1, j - 1] + 1
            else:
                L[i, j] = max(L[i - 1, j], L[i, j - 1])
    return L[n, m]


def nbody_loop(pos, mass, eps):
    n = pos.shape[0]
    acc = np.zeros((n, 3))
    for i in range(n):
        for j in range(n):
            if i != j:
                dx = pos[j, 0] - pos[i, 0]
                dy = pos[j, 1] - pos[i, 1]
                dz = pos[j, 2] - pos[i, 2]
                r2 = dx * dx + dy * dy + dz * dz + eps * eps
                inv_r3 = mass[j] / (r2 * np.sqrt(r2))
                acc[i, 0] += dx * inv_r3
                acc[i, 1] += dy * inv_r3
                acc[i, 2] += dz * inv_r3
    return acc


def odd_even_sort_loop(a):
    x = a.copy()
    n = len(x)
    for phase in range(n):
        for i in range(phase % 2, n - 1, 2):
            if x[i] > x[i + 1]:
                x[i], x[i + 1] = x[i + 1], x[i]
    return x


def histogram_bincount(x, nbins, lo, hi):
    idx = ((x - lo) / (hi - lo) * nbins).astype(np.int64)
    keep = (idx >= 0) & (idx < nbins)
    return np.bincount(idx[keep], minlength=nbins)


def upsample_repeat(img, f):
    return np.repeat(np.repeat(img, f, axis=0), f, axis=1)


def conv1d_slicing(x, w):
    k = len(w)
    n = len(x) - k + 1
    out = np.zeros(n)
    for j in range(k):
        out += w[j] * x[j:j + n]
    return out


def lorenz96_rk4(x, forcing, dt, steps):
    def deriv(y):
        return (np.roll(y, -1) - np.roll(y, 2)) * np.roll(y, 1) - y + forcing

    for _ in range(steps):
        k1 = deriv(x)
        k2 = deriv(x + 0.5 * dt * k1)
        k3 = deriv(x + 0.5 * dt * k2)
        k4 = deriv(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def small_arrays(x, y, steps):
    for _ in range(steps):
        d = x - y
        y = y + 0.1 * d
        x = np.sqrt(np.abs(x * 0.99 + 0.01))
    return x, y



# ---------------------------------------------------------------- the registry


@dataclass
class Kernel:
    name: str
    category: str
    func: Callable
    setup: Callable  # setup(quick) -> tuple of arguments
    kind: str = "vector"  # vector | loop | random
    elements: Callable | None = None  # elements(quick) -> size of the main array
    stat: Callable | None = None  # random kernels: stat(result, args) raises AssertionError
    rtol: float = 1e-6
    atol: float = 1e-12
    lists: bool = False  # loop kernels: also runs as plain CPython on lists
    notes: str = ""
    extra: dict = field(default_factory=dict)
    helpers: tuple = ()  # module-level functions the kernel calls (Numba: each @njit too)


def _rng(seed=42):
    return np.random.default_rng(seed)


def _pick(quick, small, big):
    return small if quick else big


def _check_pi(result, args):
    n = args[0]
    assert np.ndim(result) == 0, f"pi estimate: expected a scalar, got shape {np.shape(result)}"
    tol = 6 * 1.7 / math.sqrt(n)
    assert abs(float(result) - math.pi) < tol, f"pi estimate {float(result)} not within {tol} of pi"


def _check_walk(result, args):
    n = args[0]
    r = np.asarray(result)
    assert r.shape == (n,), f"walk: shape {r.shape} != {(n,)}"
    assert r.dtype.kind == "i", f"walk: dtype {r.dtype} is not an integer dtype"
    steps = np.diff(np.concatenate(([0], r)))
    assert np.all(np.abs(steps) == 1), "walk: a step is not +-1"
    assert abs(steps.mean()) < 6 / math.sqrt(n), f"walk: mean step {steps.mean()} not near 0"


def _check_chain(result, args):
    n = args[0]
    r = np.asarray(result)
    assert r.shape == (n,), f"chain: shape {r.shape} != {(n,)}"
    assert abs(r.mean()) < 0.2, f"chain: mean {r.mean()} of a standard normal target not near 0"
    assert abs(r.var() - 1.0) < 0.3, f"chain: variance {r.var()} of a standard normal not near 1"


def _life_grid(n, seed=5):
    return (np.random.default_rng(seed).random((n, n)) < 0.3).astype(np.int64)


def _codes(n, seed):
    return np.random.default_rng(seed).integers(0, 4, n)


def _tridiag(n):
    r = _rng()
    a = r.random(n)
    c = r.random(n)
    b = a + c + 1.0 + r.random(n)  # diagonally dominant
    return a, b, c, r.random(n)


def _spd(n, seed=3):
    r = np.random.default_rng(seed)
    m = r.random((n, n))
    return m @ m.T / n + np.eye(n)


def _graph(n):
    r = _rng()
    d = r.random((n, n)) * 10
    d[r.random((n, n)) < 0.7] = np.inf
    np.fill_diagonal(d, 0.0)
    return d


def _latlon(n):
    r = _rng()
    return (r.uniform(-90, 90, n), r.uniform(-180, 180, n),
            r.uniform(-90, 90, n), r.uniform(-180, 180, n))


def _gray_scott_grid(n):
    U = np.ones((n, n))
    V = np.zeros((n, n))
    c = n // 2
    U[c - 8:c + 8, c - 8:c + 8] = 0.5
    V[c - 8:c + 8, c - 8:c + 8] = 0.25
    return U, V


def _sq(n):
    return lambda quick: (_pick(quick, 64, n)) ** 2


KERNELS = [
    # stencils and diffusion
    Kernel("jacobi_1d", "stencil",
           jacobi_1d,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)),
                      np.zeros(_pick(q, 1000, 1_000_000)), _pick(q, 3, 10)),
           elements=lambda q: _pick(q, 1000, 1_000_000)),
    Kernel("jacobi_2d", "stencil",
           jacobi_2d,
           lambda q: (_rng().random((_pick(q, 40, 1000),) * 2),
                      np.zeros((_pick(q, 40, 1000),) * 2), _pick(q, 3, 5)),
           elements=_sq(1000)),
    Kernel("heat_1d", "stencil",
           heat_1d,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)), 0.25, _pick(q, 3, 20)),
           elements=lambda q: _pick(q, 1000, 1_000_000)),
    Kernel("heat_2d", "stencil",
           heat_2d,
           lambda q: (_rng().random((_pick(q, 40, 1000),) * 2), 0.1, _pick(q, 3, 5)),
           elements=_sq(1000)),
    Kernel("laplacian_2d", "stencil",
           laplacian_2d,
           lambda q: (_rng().random((_pick(q, 40, 2000),) * 2), 0.01),
           elements=_sq(2000)),
    Kernel("wave_2d", "stencil",
           wave_2d,
           lambda q: (np.zeros((_pick(q, 40, 1000),) * 2),
                      _rng().random((_pick(q, 40, 1000),) * 2), 0.3, _pick(q, 3, 5)),
           elements=_sq(1000)),
    Kernel("gray_scott", "stencil",
           gray_scott,
           lambda q: (*_gray_scott_grid(_pick(q, 40, 1000)), 0.16, 0.08, 0.035, 0.065,
                      _pick(q, 3, 2)),
           elements=_sq(1000)),
    # distances
    Kernel("pairwise_distances", "distance",
           pairwise_distances,
           lambda q: (_rng().random((_pick(q, 30, 600), 3)),),
           elements=lambda q: _pick(q, 30, 600) ** 2 * 3),
    Kernel("euclidean_gram", "distance",
           euclidean_gram,
           lambda q: (_rng().random((_pick(q, 50, 1500), 64)),
                      _rng(7).random((_pick(q, 40, 1500), 64))),
           elements=lambda q: _pick(q, 50, 1500) * _pick(q, 40, 1500)),
    Kernel("cosine_similarity", "distance",
           cosine_similarity,
           lambda q: (_rng().random((_pick(q, 50, 2000), 128)),
                      _rng(7).random((_pick(q, 40, 1500), 128))),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 40, 1500)),
    Kernel("haversine", "distance",
           haversine,
           lambda q: _latlon(_pick(q, 1000, 1_000_000)),
           elements=lambda q: _pick(q, 1000, 1_000_000)),
    # reductions
    Kernel("column_stats", "reduction",
           column_stats,
           lambda q: (_rng().random((_pick(q, 50, 2000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 30, 1000)),
    Kernel("standardize", "reduction",
           standardize,
           lambda q: (_rng().random((_pick(q, 50, 2000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 30, 1000)),
    Kernel("normalize_rows", "reduction",
           normalize_rows,
           lambda q: (_rng().random((_pick(q, 50, 4000), _pick(q, 30, 500))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 500)),
    Kernel("l2_norms", "reduction",
           l2_norms,
           lambda q: (_rng().random((_pick(q, 50, 4000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 1000)),
    Kernel("rosenbrock", "reduction",
           rosenbrock,
           lambda q: (_rng().random(_pick(q, 1000, 4_000_000)),),
           elements=lambda q: _pick(q, 1000, 4_000_000)),
    Kernel("softmax", "reduction",
           softmax,
           lambda q: (_rng().normal(size=(_pick(q, 50, 4000), _pick(q, 30, 500))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 500)),
    Kernel("logsumexp", "reduction",
           logsumexp,
           lambda q: (_rng().normal(size=(_pick(q, 50, 4000), _pick(q, 30, 500))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 500)),
    # cumulative sums
    Kernel("moving_average", "cumulative",
           moving_average,
           lambda q: (_rng().random(_pick(q, 1000, 4_000_000)), 50),
           elements=lambda q: _pick(q, 1000, 4_000_000), rtol=1e-5, atol=1e-9),
    Kernel("cumsum_2d", "cumulative",
           cumsum_2d,
           lambda q: (_rng().random((_pick(q, 50, 2000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 30, 1000)),
    # image filters
    Kernel("box_blur_3x3", "image",
           box_blur_3x3,
           lambda q: (_rng().random((_pick(q, 40, 1200),) * 2),),
           elements=_sq(1200)),
    Kernel("sobel", "image",
           sobel,
           lambda q: (_rng().random((_pick(q, 40, 1200),) * 2),),
           elements=_sq(1200)),
    Kernel("bilinear_resize", "image",
           bilinear_resize,
           lambda q: (_rng().random((_pick(q, 30, 1000),) * 2),
                      _pick(q, 50, 2000), _pick(q, 45, 1500)),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 45, 1500)),
    # Monte Carlo
    Kernel("monte_carlo_pi", "monte carlo",
           monte_carlo_pi,
           lambda q: (_pick(q, 10_000, 4_000_000),),
           kind="random", stat=_check_pi, elements=lambda q: _pick(q, 10_000, 4_000_000)),
    Kernel("random_walk", "monte carlo",
           random_walk,
           lambda q: (_pick(q, 10_000, 2_000_000),),
           kind="random", stat=_check_walk, elements=lambda q: _pick(q, 10_000, 2_000_000)),
    Kernel("monte_carlo_pi_loop", "monte carlo",
           monte_carlo_pi_loop,
           lambda q: (_pick(q, 20_000, 50_000),),
           kind="random", stat=_check_pi),
    # element loops
    Kernel("axpy_loop", "element loop",
           axpy_loop,
           lambda q: (2.5, _rng().random(_pick(q, 1000, 100_000)),
                      _rng(7).random(_pick(q, 1000, 100_000))),
           kind="loop", lists=True),
    Kernel("prefix_sum_loop", "element loop",
           prefix_sum_loop,
           lambda q: (_rng().random(_pick(q, 1000, 200_000)),),
           kind="loop", rtol=1e-9),
    Kernel("smooth_loop", "element loop",
           smooth_loop,
           lambda q: (_rng().random(_pick(q, 1000, 200_000)),),
           kind="loop"),
    Kernel("histogram_loop", "element loop",
           histogram_loop,
           lambda q: (_rng().normal(size=_pick(q, 1000, 100_000)), 50, -3.0, 3.0),
           kind="loop", lists=True),
    Kernel("lcg", "element loop",
           lcg,
           lambda q: (_pick(q, 1000, 200_000), 12345),
           kind="loop"),
    Kernel("mandelbrot_loop", "element loop",
           mandelbrot_loop,
           lambda q: (-2.0, 1.0, -1.5, 1.5, _pick(q, 30, 150), _pick(q, 20, 100), 50),
           kind="loop"),
    Kernel("thomas_solve", "element loop",
           thomas_solve,
           lambda q: _tridiag(_pick(q, 1000, 50_000)),
           kind="loop", lists=True, rtol=1e-9),
    Kernel("collatz_lengths", "element loop",
           collatz_lengths,
           lambda q: (_pick(q, 300, 10_000),),
           kind="loop"),
    Kernel("mandelbrot_complex", "complex",
           mandelbrot_complex,
           lambda q: (_pick(q, 40, 600), _pick(q, 30, 400), _pick(q, 5, 20)),
           elements=lambda q: _pick(q, 40, 600) * _pick(q, 30, 400)),
    # linear algebra
    Kernel("matrix_chain", "linear algebra",
           matrix_chain,
           lambda q: tuple(_rng(s).random((_pick(q, 30, 600),) * 2) for s in range(3)),
           rtol=1e-9, elements=_sq(600)),
    Kernel("power_iteration", "linear algebra",
           power_iteration,
           lambda q: (_spd(_pick(q, 30, 1000)), _pick(q, 5, 50)),
           rtol=1e-8, elements=_sq(1000)),
    Kernel("gram_schmidt", "linear algebra",
           gram_schmidt,
           lambda q: (_rng().random((_pick(q, 30, 1000), _pick(q, 8, 60))),),
           rtol=1e-6, atol=1e-9, elements=lambda q: _pick(q, 30, 1000) * _pick(q, 8, 60)),
    Kernel("solve_and_inverse", "linear algebra",
           solve_and_inverse,
           lambda q: (_spd(_pick(q, 30, 500)), _rng(7).random(_pick(q, 30, 500))),
           rtol=1e-8, atol=1e-10, elements=_sq(500)),
    # machine learning, graphs, physics, polynomials
    Kernel("kmeans_step", "machine learning",
           kmeans_step,
           lambda q: (_rng().random((_pick(q, 200, 100_000), 4)),
                      _rng(7).random((_pick(q, 3, 8), 4))),
           rtol=1e-9, elements=lambda q: _pick(q, 200, 100_000) * _pick(q, 3, 8) * 4),
    Kernel("logistic_step", "machine learning",
           logistic_step,
           lambda q: (_rng().normal(size=(_pick(q, 100, 100_000), _pick(q, 5, 50))),
                      (_rng(7).random(_pick(q, 100, 100_000)) > 0.5).astype(float),
                      np.zeros(_pick(q, 5, 50)), 0.1),
           rtol=1e-9, elements=lambda q: _pick(q, 100, 100_000) * _pick(q, 5, 50)),
    Kernel("floyd_warshall", "graph",
           floyd_warshall,
           lambda q: (_graph(_pick(q, 20, 250)),),
           elements=lambda q: _pick(q, 20, 250) ** 2),
    Kernel("nbody_forces", "physics",
           nbody_forces,
           lambda q: (_rng().random((_pick(q, 20, 600), 3)), _rng(7).random(_pick(q, 20, 600)),
                      0.01),
           rtol=1e-8, elements=lambda q: _pick(q, 20, 600) ** 2 * 3),
    Kernel("horner", "polynomial",
           horner,
           lambda q: (_rng(7).random(10), _rng().random(_pick(q, 1000, 2_000_000))),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 2_000_000)),
    Kernel("growth", "polynomial",
           growth,
           lambda q: (_rng().random(_pick(q, 100, 50_000)) * 1000,
                      _rng(7).random(_pick(q, 100, 50_000)) * 0.05, _pick(q, 5, 100)),
           rtol=1e-9, elements=lambda q: _pick(q, 100, 50_000) * _pick(q, 6, 101)),
    # issue 31's kinds: per-point fractals, stencils and convolutions by loops, a Monte Carlo
    # chain, cellular automata, dynamic programming, n-body by loops, histogramming, a sorting
    # network; np.repeat expansion, a convolution by slicing, and small (1,000-element) arrays
    Kernel("julia_loop", "element loop",
           julia_loop,
           lambda q: (_pick(q, 30, 150), _pick(q, 20, 100), -0.8, 0.156, _pick(q, 20, 50)),
           kind="loop"),
    Kernel("conv2d_loop", "element loop",
           conv2d_loop,
           lambda q: (_rng().random((_pick(q, 12, 100),) * 2), _rng(7).random((3, 3))),
           kind="loop", rtol=1e-9),
    Kernel("wave_1d_loop", "element loop",
           wave_1d_loop,
           lambda q: (np.sin(np.linspace(0, 6, _pick(q, 100, 2000))),
                      np.sin(np.linspace(0, 6, _pick(q, 100, 2000))), 0.2, _pick(q, 3, 50)),
           kind="loop", rtol=1e-9),
    Kernel("metropolis_loop", "monte carlo",
           metropolis_loop,
           lambda q: (_pick(q, 20_000, 50_000), 1.0),
           kind="random", stat=_check_chain, helpers=("_log_density",)),
    Kernel("life_loop", "cellular automaton",
           life_loop,
           lambda q: (_life_grid(_pick(q, 12, 40)), _pick(q, 2, 5)),
           kind="loop"),
    Kernel("life", "cellular automaton",
           life,
           lambda q: (_life_grid(_pick(q, 40, 1000)), _pick(q, 3, 10)),
           elements=_sq(1000)),
    Kernel("edit_distance_loop", "dynamic program",
           edit_distance_loop,
           lambda q: (_codes(_pick(q, 30, 300), 1), _codes(_pick(q, 25, 280), 2)),
           kind="loop"),
    Kernel("lcs_loop", "dynamic program",
           lcs_loop,
           lambda q: (_codes(_pick(q, 30, 300), 3), _codes(_pick(q, 25, 280), 4)),
           kind="loop"),
    Kernel("nbody_loop", "physics",
           nbody_loop,
           lambda q: (_rng().random((_pick(q, 20, 150), 3)), _rng(7).random(_pick(q, 20, 150)),
                      0.01),
           kind="loop", rtol=1e-9),
    Kernel("odd_even_sort_loop", "sorting network",
           odd_even_sort_loop,
           lambda q: (_rng().random(_pick(q, 50, 500)),),
           kind="loop"),
    Kernel("histogram_bincount", "histogram",
           histogram_bincount,
           lambda q: (_rng().normal(size=_pick(q, 1000, 4_000_000)), 50, -3.0, 3.0),
           elements=lambda q: _pick(q, 1000, 4_000_000)),
    Kernel("upsample_repeat", "expansion",
           upsample_repeat,
           lambda q: (_rng().random((_pick(q, 30, 1000),) * 2), 2),
           elements=lambda q: _pick(q, 30, 1000) ** 2 * 4),
    Kernel("conv1d_slicing", "convolution",
           conv1d_slicing,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)), _rng(7).random(15)),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 1_000_000)),
    Kernel("lorenz96_rk4", "small arrays",
           lorenz96_rk4,
           lambda q: (_rng().random(1000) + 8.0, 8.0, 0.01, _pick(q, 5, 200)),
           rtol=1e-9, elements=lambda q: 1000),
    Kernel("small_arrays", "small arrays",
           small_arrays,
           lambda q: (_rng().random(1000), _rng(7).random(1000), _pick(q, 5, 500)),
           rtol=1e-9, elements=lambda q: 1000),
    # published kernels (above): as their authors write them, only @tessera.jit added
    Kernel("lu_decompose", "published",
           lu_decompose,
           lambda q: (_spd(_pick(q, 20, 200)),),
           kind="loop", rtol=1e-9),
    Kernel("insertion_sort", "published",
           insertion_sort,
           lambda q: (_rng().random(_pick(q, 200, 3000)),),
           kind="loop", lists=True),
    Kernel("bubble_sort", "published",
           bubble_sort,
           lambda q: (_rng().integers(0, 1_000_000, _pick(q, 100, 1500)),),
           kind="loop", lists=True),
    Kernel("sieve", "published",
           sieve,
           lambda q: (_pick(q, 1000, 2_000_000),),
           elements=lambda q: _pick(q, 1000, 2_000_000)),
    Kernel("life_roll", "published",
           life_roll,
           lambda q: (_life_grid(_pick(q, 40, 500)).astype(bool), _pick(q, 3, 10)),
           elements=_sq(500)),
    Kernel("random_walk_2d", "published",
           random_walk_2d,
           lambda q: (_pick(q, 10_000, 2_000_000),),
           kind="random", stat=_check_walk_2d, elements=lambda q: _pick(q, 10_000, 2_000_000)),
    Kernel("black_scholes", "published",
           black_scholes,
           lambda q: _options(_pick(q, 1000, 1_000_000)),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 1_000_000), helpers=("_cnd",)),
    Kernel("black_scholes_erf", "published",
           black_scholes_erf,
           lambda q: _options(_pick(q, 500, 100_000)),
           kind="loop", rtol=1e-12),
    Kernel("rk4_oscillator", "published",
           rk4_oscillator,
           lambda q: (1.0, 0.0, 2.0, 0.1, 0.001, _pick(q, 500, 100_000)),
           kind="loop", rtol=1e-9),
    Kernel("sor_poisson", "published",
           sor_poisson,
           lambda q: (np.zeros((_pick(q, 20, 200),) * 2), _rng().random((_pick(q, 20, 200),) * 2),
                      0.005, 1.5, _pick(q, 3, 20)),
           kind="loop", rtol=1e-9),
    Kernel("knn_predict", "published",
           knn_predict,
           lambda q: _knn_data(_pick(q, 100, 2000), _pick(q, 20, 500)),
           elements=lambda q: _pick(q, 100, 2000) * _pick(q, 20, 500)),
    Kernel("rolling_std", "published",
           rolling_std,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)), 50),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 1_000_000) * 50),
    Kernel("count_prime_factors", "published",
           count_prime_factors,
           lambda q: (_pick(q, 300, 50_000),),
           kind="loop", helpers=("prime_factors",)),
    Kernel("matrix_chain_order", "published",
           matrix_chain_order,
           lambda q: (_rng().integers(5, 50, _pick(q, 20, 150)),),
           kind="loop"),
    Kernel("spectral_norm", "published",
           spectral_norm,
           lambda q: (_pick(q, 30, 300),),
           kind="loop", rtol=1e-12),
    Kernel("nbody_game", "published",
           nbody_game,
           lambda q: (*_bodies()[:2], _bodies()[2], _pick(q, 20, 20_000), 0.01),
           kind="loop", rtol=1e-9),
    Kernel("select_to_list", "published",
           select_to_list,
           lambda q: (_rng().random(_pick(q, 1000, 200_000)), 0.5),
           kind="loop"),
    Kernel("digitize_histogram", "published",
           digitize_histogram,
           lambda q: (_rng().normal(size=_pick(q, 1000, 2_000_000)), np.linspace(-3, 3, 41)),
           elements=lambda q: _pick(q, 1000, 2_000_000)),
]

KERNELS += [Kernel(category="published", **spec) for spec in MORE_PUBLISHED]
KERNELS += [Kernel(category="published", **spec) for spec in FOURTH_PUBLISHED]

# The published kernels (issue 31's check "against programs nobody here wrote"):
# tests/python/test_jit_published_kernels.py runs them at 1 and 2 threads.
PUBLISHED = [k.name for k in KERNELS if k.category == "published"]

# Kernels that tessera does not run correctly today, with the reason. The
# smoke test (tests/python/test_bench_kernels.py) requires every other kernel
# to pass; this list is the work list for making tessera complete.
KNOWN_FAILURES: dict[str, str] = {}


# ---------------------------------------------------------------- checking

THREADS = (1, 2)
TARGET_GEOMEAN = 0.8  # vectorised kernels, tessera 2t / NumPy (issue 31)
TARGET_WORST = 1.5  # no vectorised kernel slower than this many times NumPy
TARGET_LOOPS_VS_NUMBA = 1.5  # element loops, tessera 2t / Numba, geometric mean
TARGET_LOOPS_WORST_VS_NUMBA = 3.0
TARGET_SPEEDUP = 1.6


def by_name(name):
    for k in KERNELS:
        if k.name == name:
            return k
    raise KeyError(f"no kernel named {name!r}")


def _copy(args):
    return copy.deepcopy(args)


def _as_lists(args):
    return tuple(a.tolist() if isinstance(a, np.ndarray) else a for a in _copy(args))


def _param_names(f):
    return list(f.__code__.co_varnames[: f.__code__.co_argcount])


def compare(kernel, got, got_args, expected, expected_args, args):
    """Raises AssertionError when tessera's result or arguments differ from NumPy's."""
    from jit_check import assert_same  # noqa: PLC0415 - tests/python, on the path above

    if kernel.kind == "random":
        kernel.stat(got, args)
    else:
        assert_same(got, expected, rtol=kernel.rtol, atol=kernel.atol)
    names = _param_names(kernel.func)
    for i, (g, e) in enumerate(zip(got_args, expected_args)):
        if isinstance(e, (np.ndarray, list)):
            assert_same(g, e, rtol=kernel.rtol, atol=kernel.atol,
                        path=f"argument '{names[i]}' after the call")


def _short(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    lines[:1] = [f"{type(e).__name__}: {lines[0] if lines else ''}"]
    # assert_allclose's message: keep its first lines (what differed and how much).
    return " / ".join(lines[:4])[:300]


def _timed(fn, args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def run_kernel(kernel, quick=False, runs=5, check_only=False, with_numba=True):
    """Checks one kernel against NumPy and times it (and Numba's @njit of the same
    code, unless with_numba is false); returns a dict of results."""
    import tessera  # noqa: PLC0415
    from tessera import _core  # noqa: PLC0415

    res = dict(name=kernel.name, category=kernel.category, kind=kernel.kind,
               scalar_loop=kernel.kind == "loop" or kernel.name.endswith("_loop"),
               elements=kernel.elements(quick) if kernel.elements else None,
               status="ok", error=None)
    args = kernel.setup(quick)
    np.random.seed(0)
    expected_args = _copy(args)
    t_first_np, expected = _timed(kernel.func, expected_args)
    res["first_numpy_s"] = t_first_np

    jits = {t: tessera.jit(kernel.func, threads=t) for t in THREADS}
    first = {}
    for t in THREADS:
        got_args = _copy(args)
        _core.set_num_threads(t)
        try:
            first[t], got = _timed(jits[t], got_args)
            compare(kernel, got, got_args, expected, expected_args, args)
        except Exception as e:  # noqa: BLE001 - any failure is a FAIL line, not the end
            res["status"] = "FAIL"
            res["error"] = f"{_short(e)} (at {t} thread{'s' if t > 1 else ''})"
            return res
    res["first_tessera_s"] = first
    # Native loops compile a quick tier first and their optimised code on a
    # background thread (docs/runtime.md, "Compile time"): the timed runs
    # below are of the optimised code, once it is swapped in.
    wait = getattr(_core, "_native_tiers_wait", None)
    if wait is not None:
        wait()

    with_lists = False
    if kernel.lists:
        try:
            got = kernel.func(*_as_lists(args))
            np.testing.assert_allclose(np.asarray(got, dtype=float),
                                       np.asarray(expected, dtype=float), rtol=1e-9)
            with_lists = True
        except Exception as e:  # noqa: BLE001
            res["lists_error"] = _short(e)
    if check_only:
        return res

    numba_fn = None
    if with_numba:
        numba_fn = _numba_version(kernel, res, args, expected, expected_args)

    contenders = [("numpy", kernel.func, None, _copy)]
    blas1 = _blas_one_thread()
    if blas1 is not None and not res["scalar_loop"]:
        # NumPy at its best: on a busy machine OpenBLAS's threads can make a product
        # many times slower than one thread; the faster of the two is the peer.
        contenders.append(("numpy_blas1", blas1(kernel.func), None, _copy))
    contenders += [(f"tessera{t}", jits[t], t, _copy) for t in THREADS]
    if numba_fn is not None:
        contenders.append(("numba", numba_fn, None, _copy))
    if with_lists:
        contenders.append(("cpython_lists", kernel.func, None, _as_lists))
    slowest_first = max([t_first_np, *first.values()])
    n_runs = 1 if slowest_first > 20.0 else runs  # a kernel taking minutes gets one run
    times = {c[0]: [] for c in contenders}
    for r in range(n_runs + 1):  # the first round is the warm-up
        k = r % len(contenders)
        for name, fn, threads, prepare in contenders[k:] + contenders[:k]:
            call_args = prepare(args)
            if threads is not None:
                _core.set_num_threads(threads)  # outside the timed call
            if not res["scalar_loop"]:
                # Each at its best: OpenBLAS's threads spin for ~0.1 s after
                # NumPy's BLAS calls, on the cores tessera's threads need, so
                # they are let fall asleep before a tessera call, and woken by
                # a product before a NumPy call (as in a program using NumPy).
                if name.startswith("tessera"):
                    time.sleep(BLAS_SPIN_S)
                elif name == "numpy":
                    _WARM_BLAS @ _WARM_BLAS
            np.random.seed(r)
            dt, _ = _timed(fn, call_args)
            if r > 0:
                times[name].append(dt)
    # tessera's 2-thread speedup, measured in rounds of its own: within the
    # race, OpenBLAS's idle threads spin for ~0.1 s after each of NumPy's
    # BLAS calls (or threadpoolctl's limits) on the core that tessera's
    # second thread needs, which is NumPy's doing, not tessera's scaling.
    # (Twice the rounds of the race: the ratio of two noisy medians.)
    time.sleep(0.3)
    for r in range(2 * n_runs + 1):
        for t in THREADS if r % 2 == 0 else THREADS[::-1]:
            call_args = _copy(args)
            _core.set_num_threads(t)
            np.random.seed(r)
            dt, _ = _timed(jits[t], call_args)
            if r > 0:
                times.setdefault(f"solo{t}", []).append(dt)
    res["runs"] = n_runs
    res["times_s"] = times
    res["ms"] = {name: statistics.median(v) * 1e3 for name, v in times.items()}
    _pick_best_numpy(res)
    return res


def _numba_version(kernel, res, args, expected, expected_args):
    """Numba's @njit of the kernel (every module-level function it calls decorated
    too, single-threaded as by default), called once and checked like tessera's.
    Returns the compiled function, or None after recording in res["numba"] that
    Numba refused the code, raised, or gave a different answer."""
    try:
        import numba  # noqa: PLC0415 - a benchmark peer, never a tessera dependency
        from numba.core import errors as numba_errors  # noqa: PLC0415
    except ImportError:
        res["numba"] = "not installed (.venv/bin/pip install numba)"
        return None
    res["numba_version"] = numba.__version__
    scope = dict(kernel.func.__globals__)  # the kernel's module, helpers swapped for njit's

    def rebind(f):
        return types.FunctionType(f.__code__, scope, f.__name__, f.__defaults__, f.__closure__)

    for name in kernel.helpers:
        scope[name] = numba.njit(rebind(scope[name]))
    fn = numba.njit(rebind(kernel.func))
    got_args = _copy(args)
    np.random.seed(0)
    try:
        t0 = time.perf_counter()
        got = fn(*got_args)
        res["first_numba_s"] = time.perf_counter() - t0
    except (numba_errors.NumbaError, NotImplementedError) as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()
                 and not ln.startswith(("Failed in nopython", "- Resolution failure"))]
        res["numba"] = "refused: " + " ".join(lines[:2])[:160]
        return None
    except Exception as e:  # noqa: BLE001 - Numba's compiled code raised
        res["numba"] = "raised: " + _short(e)[:160]
        return None
    try:
        compare(kernel, got, got_args, expected, expected_args, args)
    except AssertionError as e:
        res["numba"] = "differs from NumPy: " + _short(e)[:160]
        return None
    res["numba"] = "ok"
    return fn


# How long OpenBLAS's idle threads spin before they sleep (2**28 cycles by
# default: ~0.1 s), and a product large enough to wake them all.
BLAS_SPIN_S = 0.12
_WARM_BLAS = np.ones((256, 256))


def _blas_one_thread():
    """A wrapper running a function with NumPy's BLAS on one thread (None
    without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415
    except ImportError:
        return None

    def wrap(f):
        def g(*a):
            with threadpool_limits(limits=1, user_api="blas"):
                return f(*a)
        return g

    return wrap


def _pick_best_numpy(res):
    """The NumPy column is the faster of NumPy with its BLAS threads and with one."""
    ms = res["ms"]
    if "numpy_blas1" in ms:
        ms["numpy_blas_threads"] = ms["numpy"]
        if ms["numpy_blas1"] < ms["numpy"]:
            ms["numpy"] = ms["numpy_blas1"]
            res["numpy_best"] = "BLAS on 1 thread"


# ---------------------------------------------------------------- report


def machine_info():
    from machine import machine_line  # noqa: PLC0415 - bench/machine.py

    import tessera  # noqa: PLC0415

    info = dict(machine=machine_line(), python=platform.python_version(),
                numpy=np.__version__, tessera=getattr(tessera, "__version__", "?"),
                loadavg=os.getloadavg(),
                openblas_env={k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")})
    try:
        import numba  # noqa: PLC0415 - benchmark peer only

        info["numba"] = numba.__version__
    except ImportError:
        info["numba"] = None
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415

        info["numpy_blas"] = [
            {k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads",
                                   "threading_layer", "filepath")}
            for p in threadpool_info() if p.get("user_api") == "blas"
        ]
    except ImportError:
        info["numpy_blas"] = "threadpoolctl not installed (.venv/bin/pip install threadpoolctl)"
    return info


def _scale2(x):
    return x * 2.0


def bandwidth_probe(runs=5):
    """Memory bandwidth seen by tessera at 1 and 2 threads: x * 2.0 over a
    256 MB array (read + write). A kernel that streams memory gains at most
    this ratio from a second thread, whatever the runtime does."""
    import tessera  # noqa: PLC0415
    from tessera import _core  # noqa: PLC0415

    x = np.ones(32_000_000)
    fn = tessera.jit(_scale2)
    out = {}
    for t in THREADS:
        _core.set_num_threads(t)
        fn(x)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
        out[t] = 2 * x.nbytes / statistics.median(times) / 1e9
    return out


def print_header(info, args):
    print(info["machine"])
    print(f"Python {info['python']}, NumPy {info['numpy']}, tessera {info['tessera']}; "
          f"tessera threads {', '.join(map(str, THREADS))}; load average before the run "
          + " ".join(f"{x:.2f}" for x in info["loadavg"]))
    blas = info["numpy_blas"]
    if isinstance(blas, list):
        for b in blas:
            whose = "NumPy's BLAS" if "numpy" in (b["filepath"] or "") else \
                "also loaded (tessera's, called single-threaded)"
            print(f"{whose}: {b['internal_api']} {b['version']}, kernel {b['architecture']}, "
                  f"{b['num_threads']} threads ({b['threading_layer']}), "
                  f"{os.path.basename(b['filepath'] or '?')}")
    else:
        print(f"NumPy's BLAS: {blas}")
    if info["openblas_env"]:
        env = " ".join(f"{k}={v}" for k, v in sorted(info["openblas_env"].items()))
        print(f"note: {env} is set: NumPy's OpenBLAS runs that core type's kernels, not its "
              "best; unset both for NumPy at its best (docs/benchmarks.md)")
    bw = info.get("bandwidth_gbs")
    if bw:
        one, two = bw[THREADS[0]], bw[THREADS[-1]]
        print(f"memory bandwidth (tessera, x * 2.0 over 256 MB, read + write): {one:.0f} GB/s at "
              f"1 thread, {two:.0f} GB/s at 2: a kernel that streams memory gains at most "
              f"{two / one:.2f}x from a second thread on this machine")
    if not args.check_only and not args.no_numba:
        print(f"Numba {info['numba']}: @njit with its defaults (single-threaded, no fastmath, "
              "no parallel), every function of the kernel decorated" if info["numba"] else
              "Numba: not installed (.venv/bin/pip install numba), no Numba column")
    mode = "quick sizes, " if args.quick else ""
    if args.check_only:
        print(f"{mode}checking every kernel against NumPy (no timing)")
    else:
        print(f"{mode}median of {args.runs} interleaved runs after a warm-up; times in ms; "
              "ratio = tessera at 2 threads / NumPy (below 1: tessera faster); "
              "2t/1t = tessera's speedup from 1 to 2 threads, timed in rounds of its own after "
              "the race (no NumPy call in between: OpenBLAS's idle threads spin ~0.1 s); "
              "Numba = its @njit raced in the same rounds, 2t/Numba = tessera 2t / Numba; "
              "1st t, 1st nb = first call of tessera (1t, the call that compiles) and Numba in "
              "s (translation or type inference + compilation + one run)"
              + ("; --cold: tessera's disk cache off (TESSERA_CACHE_DIR=0), every compile cold"
                 if args.cold else "; tessera's disk cache on (--cold: off)")
              + "; tessera's run times are its optimised native code (the bench waits for "
              "the background compiles after the first calls)")
    print()


COLUMNS = (f"{'kernel':22s} {'category':18s} {'NumPy':>9s} {'tessera 1t':>10s} "
           f"{'tessera 2t':>10s} {'ratio':>7s} {'2t/1t':>6s} {'Numba':>9s} {'2t/Numba':>8s}  "
           f"{'1st t':>6s} {'1st nb':>6s}")


def speedup(ms):
    """tessera's speedup from 1 to 2 threads: from the rounds of its own
    (run_kernel), or from the race in results recorded before those."""
    if "solo1" in ms and "solo2" in ms:
        return ms["solo1"] / ms["solo2"]
    return ms["tessera1"] / ms["tessera2"]


def _first_call(r):
    """tessera's first call of the kernel in its process (at 1 thread: the call
    that compiles; the 2-thread jit of the same function finds its loops
    compiled), in s."""
    first = r.get("first_tessera_s", {})
    if not isinstance(first, dict):
        return None
    return first.get(str(THREADS[0]), first.get(THREADS[0]))


def _numba_cells(r):
    """The Numba columns of a row: its time, tessera 2t / Numba, and the first
    calls (translation and compilation included) of tessera (2t) and Numba."""
    ms = r["ms"]
    first_t = _first_call(r)
    first = f"{first_t:6.2f}" if first_t is not None else f"{'':6s}"
    if "numba" in ms:
        return (f" {ms['numba']:9.2f} {ms['tessera2'] / ms['numba']:8.2f}  {first} "
                f"{r['first_numba_s']:6.2f}")
    status = r.get("numba", "not run")
    return f" {'refused' if status.startswith('refused') else status.split(':')[0]:>9s} " \
           f"{'':8s}  {first} {'':6s}"


def format_row(r):
    lead = f"{r['name']:22s} {r['category']:18s}"
    if r["status"] != "ok":
        return f"{lead} FAIL: {r['error']}"
    if "ms" not in r:
        return f"{lead} ok (checked against NumPy)"
    ms = r["ms"]
    ratio = ms["tessera2"] / ms["numpy"]
    line = (f"{lead} {ms['numpy']:9.2f} {ms['tessera1']:10.2f} {ms['tessera2']:10.2f} "
            f"{ratio:7.2f} {speedup(ms):6.2f}" + _numba_cells(r))
    notes = []
    if r["scalar_loop"]:
        notes.append("NumPy column = CPython")
    if "numba" not in ms and r.get("numba", "ok") != "ok":
        notes.append("Numba " + r["numba"])
    if "numpy_blas1" in ms and ms["numpy_blas1"] < 0.8 * ms["numpy_blas_threads"]:
        notes.append(f"NumPy with BLAS threads {ms['numpy_blas_threads']:.2f}")
    if "cpython_lists" in ms:
        notes.append(f"CPython on lists {ms['cpython_lists']:.2f}")
    if r.get("runs") == 1:
        notes.append("1 run (slow)")
    return line + ("  (" + "; ".join(notes) + ")" if notes else "")


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def print_summary(results):
    ran = [r for r in results if r["status"] == "ok" and "ms" in r]
    failed = [r for r in results if r["status"] != "ok"]
    print()
    print(f"kernels: {len(results)}; ran: {len(ran)}; failed: {len(failed)}"
          + (" (" + ", ".join(r["name"] for r in failed) + ")" if failed else ""))
    if not ran:
        return

    def ratio(r):
        return r["ms"]["tessera2"] / r["ms"]["numpy"]

    def vs_numba(r):
        return r["ms"]["tessera2"] / r["ms"]["numba"]

    vec = [r for r in ran if not r["scalar_loop"]]
    loops = [r for r in ran if r["scalar_loop"]]
    print(f"geometric mean of tessera(2 threads)/NumPy over the {len(ran)} kernels that ran: "
          f"{geomean([ratio(r) for r in ran]):.2f}; "
          f"vectorised {geomean([ratio(r) for r in vec]):.2f} (target <= {TARGET_GEOMEAN}), "
          f"element loops {geomean([ratio(r) for r in loops]):.2f} (against CPython)")
    slow = sorted((r for r in vec if ratio(r) > TARGET_WORST), key=ratio, reverse=True)
    print(f"vectorised kernels slower than {TARGET_WORST:g}x NumPy: {len(slow)} (target 0)"
          + (": " + ", ".join(f"{r['name']} {ratio(r):.1f}x" for r in slow) if slow else ""))
    with_numba = [r for r in ran if "numba" in r["ms"]]
    refused = [r for r in ran if "numba" not in r["ms"] and "numba" in r]
    if with_numba or refused:
        loops_nb = [r for r in loops if "numba" in r["ms"]]
        vec_nb = [r for r in vec if "numba" in r["ms"]]
        print(f"Numba @njit (1 thread): ran {len(with_numba)} of {len(ran)}; refused or wrong "
              f"{len(refused)}" + (" (" + ", ".join(f"{r['name']}: {r['numba']}"[:90]
                                                 for r in refused) + ")" if refused else ""))
        if loops_nb:
            worst = max(loops_nb, key=vs_numba)
            print(f"element loops, tessera 2t / Numba over {len(loops_nb)}: geomean "
                  f"{geomean([vs_numba(r) for r in loops_nb]):.2f} (target <= "
                  f"{TARGET_LOOPS_VS_NUMBA}), worst {worst['name']} {vs_numba(worst):.1f}x "
                  f"(target <= {TARGET_LOOPS_WORST_VS_NUMBA:g})")
        if vec_nb:
            print(f"vectorised, over the {len(vec_nb)} Numba runs: tessera 2t / Numba geomean "
                  f"{geomean([vs_numba(r) for r in vec_nb]):.2f}; Numba / NumPy geomean "
                  f"{geomean([r['ms']['numba'] / r['ms']['numpy'] for r in vec_nb]):.2f}")
    if loops:
        print("element loops against CPython running the same code (target: ratio <= 1):")
        for r in loops:
            ms = r["ms"]
            text = f"  {r['name']:22s} tessera 2t / CPython {ms['tessera2'] / ms['numpy']:6.2f}"
            if "cpython_lists" in ms:
                text += f"; / CPython on lists {ms['tessera2'] / ms['cpython_lists']:6.2f}"
            print(text)
        met = sum(1 for r in loops if ratio(r) <= 1.0)
        print(f"  at least CPython's speed: {met} of {len(loops)}")
    big = [r for r in vec if (r["elements"] or 0) >= 1_000_000]
    if big:
        sp = [speedup(r["ms"]) for r in big]
        met = sum(1 for x in sp if x >= TARGET_SPEEDUP)
        print(f"2 threads / 1 thread on the {len(big)} vectorised kernels with >= 1M elements: "
              f"geomean {geomean(sp):.2f}, min {min(sp):.2f}, max {max(sp):.2f}; "
              f">= {TARGET_SPEEDUP}: {met} of {len(big)}")


def combine(paths):
    """Results of several --json files merged: each time is the median over the
    files of each file's median (a kernel failing in any file is a FAIL)."""
    runs = []
    for path in paths:
        with open(path) as fh:
            runs.append({r["name"]: r for r in json.load(fh)["results"]})
    merged = []
    for name in runs[0]:
        rs = [run[name] for run in runs if name in run]
        bad = [r for r in rs if r["status"] != "ok" or "ms" not in r]
        if bad:
            merged.append(bad[0])
            continue
        r = dict(rs[0])
        r["ms"] = {c: statistics.median(x["ms"][c] for x in rs if c in x["ms"])
                   for c in rs[0]["ms"]}
        r["runs"] = sum(x["runs"] for x in rs)
        merged.append(r)
    return merged


def print_markdown(results):
    print("| kernel | category | NumPy ms | tessera 1t ms | tessera 2t ms | 2t / NumPy | 2t / 1t "
          "| Numba ms | 2t / Numba | first call s: tessera 1t, Numba |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        if r["status"] != "ok":
            error = r["error"].split(" (at ")[0]
            print(f"| {r['name']} | {r['category']} | FAIL: {error} | | | | | | | |")
            continue
        ms = r["ms"]
        peer = f"{ms['numpy']:.1f}"
        if "cpython_lists" in ms:
            peer += f" (CPython; on lists {ms['cpython_lists']:.1f})"
        elif r["scalar_loop"]:
            peer += " (CPython)"
        first_t = _first_call(r)
        first_t = f"{first_t:.2f}" if first_t is not None else "-"
        if "numba" in ms:
            nb = (f"{ms['numba']:.2f} | {ms['tessera2'] / ms['numba']:.2f} | "
                  f"{first_t}, {r['first_numba_s']:.2f}")
        else:
            nb = f"{r.get('numba', 'not run').split(':')[0]} | | {first_t}, -"
        print(f"| {r['name']} | {r['category']} | {peer} | {ms['tessera1']:.1f} | "
              f"{ms['tessera2']:.1f} | {ms['tessera2'] / ms['numpy']:.2f} | "
              f"{speedup(ms):.2f} | {nb} |")


# ---------------------------------------------------------------- driver


def run_isolated(kernel, args):
    """Runs one kernel in a child process: a crash or a hang is a FAIL, not the end."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", kernel.name, "--runs",
           str(args.runs)]
    if args.quick:
        cmd.append("--quick")
    if args.check_only:
        cmd.append("--check-only")
    if args.no_numba:
        cmd.append("--no-numba")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(name=kernel.name, category=kernel.category, status="FAIL",
                    error=f"timeout: no answer in {args.timeout:g} s", scalar_loop=False)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = " / ".join((proc.stderr or "").strip().splitlines()[-3:])
    return dict(name=kernel.name, category=kernel.category, status="FAIL",
                error=f"the process ended with code {proc.returncode}: {tail}"[:300],
                scalar_loop=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per kernel (median)")
    ap.add_argument("--filter", default="", help="only kernels whose name contains this (or one of these, comma-separated; "
                    "'published' picks the published kernels)")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--check-only", action="store_true", help="check against NumPy, no timing")
    ap.add_argument("--json", help="write every result and raw time to this file")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per kernel")
    ap.add_argument("--in-process", action="store_true",
                    help="run the kernels in this process (to debug; a crash ends the suite)")
    ap.add_argument("--combine", nargs="+", metavar="JSON",
                    help="no run: merge earlier --json files (median of their medians)")
    ap.add_argument("--markdown", action="store_true", help="with --combine: a markdown table")
    ap.add_argument("--no-numba", action="store_true", help="no Numba column")
    ap.add_argument("--cold", action="store_true",
                    help="tessera's disk cache of native code off (TESSERA_CACHE_DIR=0): the "
                    "first-call column is a cold compile")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.combine:
        results = combine(args.combine)
        if args.markdown:
            print_markdown(results)
        else:
            print(COLUMNS)
            for r in results:
                print(format_row(r))
        print_summary(results)
        return 0

    if args.one:
        try:
            res = run_kernel(by_name(args.one), args.quick, args.runs, args.check_only,
                             not args.no_numba)
        except Exception as e:  # noqa: BLE001 - the setup or NumPy itself failed
            res = dict(name=args.one, category=by_name(args.one).category, status="FAIL",
                       error=f"harness: {_short(e)}", scalar_loop=False)
        print("RESULT " + json.dumps(res), flush=True)
        return 0

    if args.cold:
        os.environ["TESSERA_CACHE_DIR"] = "0"  # the kernels' processes inherit it
    kernels = [k for k in KERNELS
               if any(f in k.name or f == k.category for f in args.filter.split(","))]
    info = machine_info()
    if not args.check_only and not args.quick:
        info["bandwidth_gbs"] = bandwidth_probe()
    print_header(info, args)
    print(COLUMNS, flush=True)
    results = []
    for k in kernels:
        if args.in_process:
            res = run_kernel(k, args.quick, args.runs, args.check_only, not args.no_numba)
        else:
            res = run_isolated(k, args)
        if res["status"] != "ok" and k.name in KNOWN_FAILURES:
            res["known"] = KNOWN_FAILURES[k.name]
        results.append(res)
        print(format_row(res), flush=True)
    if not args.check_only:
        print_summary(results)
    else:
        failed = [r["name"] for r in results if r["status"] != "ok"]
        print(f"\nchecked {len(results)} kernels: {len(results) - len(failed)} agree with NumPy"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    print(info["machine"] + f"; tessera threads {', '.join(map(str, THREADS))}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(info=info, runs=args.runs, quick=args.quick, results=results), fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
