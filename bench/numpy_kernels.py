"""The NumPy speed suite's kernels (bench/bench_numpy_kernels.py races them):
plain Python/NumPy functions, written the way NumPy users write them, by
category. Their sizes, inputs and checks are in numpy_kernel_table.py; the
published ones are in published_kernels.py.

Numba's @njit of a kernel (the suite's peer) rebinds it in this module's
namespace, so the module-level functions a kernel calls (Kernel.helpers) live
here beside it."""

import math

import numpy as np

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
