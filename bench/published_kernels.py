"""Published NumPy kernels nobody here wrote (issue 31), for the NumPy speed
suite (bench_numpy_kernels.py, category "published", which races them against
NumPy or CPython and Numba): written as NumPy-compiler comparisons and tutorials
publish them, with their idioms, and with no change for tessera."""

import math

import numpy as np

# Kernels as NumPy-compiler comparisons publish them (Numba's examples, the benchmarks game,
# Rosetta Code, NumPy tutorials and "Python speed" posts), with their idioms: sorting by
# loops, LU by loops, a sieve by strided slices, Life by np.roll summed over a generator, a
# random walk, Black-Scholes (Numba's, with its cnd helper; and by math.erf), RK4 over a
# nested function of tuples, SOR, k-NN by argsort, rolling windows, factorisation with
# while loops and a list, a matrix-chain DP, the spectral norm and n-body of the
# benchmarks game (nested helpers; lists of floats changed in place), np.digitize.


def lu_decompose(A):
    n = A.shape[0]
    L = np.zeros((n, n))
    U = np.zeros((n, n))
    for i in range(n):
        for k in range(i, n):
            s = 0.0
            for j in range(i):
                s += L[i, j] * U[j, k]
            U[i, k] = A[i, k] - s
        L[i, i] = 1.0
        for k in range(i + 1, n):
            s = 0.0
            for j in range(i):
                s += L[k, j] * U[j, i]
            L[k, i] = (A[k, i] - s) / U[i, i]
    return L, U


def insertion_sort(arr):
    for i in range(1, len(arr)):
        key = arr[i]
        j = i - 1
        while j >= 0 and arr[j] > key:
            arr[j + 1] = arr[j]
            j -= 1
        arr[j + 1] = key
    return arr


def bubble_sort(arr):
    n = len(arr)
    for i in range(n):
        swapped = False
        for j in range(0, n - i - 1):
            if arr[j] > arr[j + 1]:
                arr[j], arr[j + 1] = arr[j + 1], arr[j]
                swapped = True
        if not swapped:
            break
    return arr


def sieve(n):
    is_prime = np.ones(n + 1, dtype=bool)
    is_prime[:2] = False
    for i in range(2, int(n ** 0.5) + 1):
        if is_prime[i]:
            is_prime[i * i::i] = False
    return np.nonzero(is_prime)[0]


def life_roll(grid, steps):
    for _ in range(steps):
        neighbours = sum(np.roll(np.roll(grid, i, 0), j, 1)
                         for i in (-1, 0, 1) for j in (-1, 0, 1)
                         if (i != 0 or j != 0))
        grid = (neighbours == 3) | (grid & (neighbours == 2))
    return grid


def random_walk_2d(n):
    steps = np.array([(0, 1), (0, -1), (1, 0), (-1, 0)])
    choice = np.random.randint(0, 4, size=n)
    return np.cumsum(steps[choice], axis=0)


def _cnd(d):
    A1 = 0.31938153
    A2 = -0.356563782
    A3 = 1.781477937
    A4 = -1.821255978
    A5 = 1.330274429
    RSQRT2PI = 0.39894228040143267794
    K = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    ret_val = (RSQRT2PI * np.exp(-0.5 * d * d) *
               (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    return np.where(d > 0, 1.0 - ret_val, ret_val)


def black_scholes(stockPrice, optionStrike, optionYears, Riskfree, Volatility):
    S = stockPrice
    X = optionStrike
    T = optionYears
    R = Riskfree
    V = Volatility
    sqrtT = np.sqrt(T)
    d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1 = _cnd(d1)
    cndd2 = _cnd(d2)
    expRT = np.exp(-R * T)
    callResult = S * cndd1 - X * expRT * cndd2
    putResult = X * expRT * (1.0 - cndd2) - S * (1.0 - cndd1)
    return callResult, putResult


def black_scholes_erf(S, K, T, r, sigma):
    call = np.empty_like(S)
    for i in range(len(S)):
        d1 = (math.log(S[i] / K[i]) + (r + 0.5 * sigma ** 2) * T[i]) / (sigma * math.sqrt(T[i]))
        d2 = d1 - sigma * math.sqrt(T[i])
        n1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
        n2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
        call[i] = S[i] * n1 - K[i] * math.exp(-r * T[i]) * n2
    return call


def rk4_oscillator(y0, v0, omega, gamma, dt, steps):
    def f(t, state):
        y, v = state
        return (v, -omega ** 2 * y - gamma * v)

    t = 0.0
    state = (y0, v0)
    ys = np.empty(steps)
    for n in range(steps):
        k1 = f(t, state)
        k2 = f(t + dt / 2, (state[0] + dt / 2 * k1[0], state[1] + dt / 2 * k1[1]))
        k3 = f(t + dt / 2, (state[0] + dt / 2 * k2[0], state[1] + dt / 2 * k2[1]))
        k4 = f(t + dt, (state[0] + dt * k3[0], state[1] + dt * k3[1]))
        state = (state[0] + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
                 state[1] + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))
        t += dt
        ys[n] = state[0]
    return ys


def sor_poisson(u, f, h, omega, iters):
    n, m = u.shape
    for it in range(iters):
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                gs = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                             - h * h * f[i, j])
                u[i, j] += omega * (gs - u[i, j])
    return u


def knn_predict(X_train, y_train, X_test, k):
    dists = np.sqrt(((X_test[:, np.newaxis, :] - X_train[np.newaxis, :, :]) ** 2).sum(axis=2))
    nearest = np.argsort(dists, axis=1)[:, :k]
    labels = y_train[nearest]
    return np.array([np.bincount(row).argmax() for row in labels])


def rolling_std(x, window):
    windows = np.lib.stride_tricks.sliding_window_view(x, window)
    return windows.std(axis=-1)


def prime_factors(n):
    factors = []
    d = 2
    while d * d <= n:
        while n % d == 0:
            factors.append(d)
            n //= d
        d += 1
    if n > 1:
        factors.append(n)
    return factors


def count_prime_factors(N):
    counts = np.zeros(N, dtype=np.int64)
    for n in range(2, N):
        counts[n] = len(prime_factors(n))
    return counts


def matrix_chain_order(p):
    n = len(p) - 1
    m = np.zeros((n, n), dtype=np.int64)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            m[i, j] = 2 ** 62
            for k in range(i, j):
                cost = m[i, k] + m[k + 1, j] + p[i] * p[k + 1] * p[j + 1]
                if cost < m[i, j]:
                    m[i, j] = cost
    return m[0, n - 1]


def spectral_norm(n):
    def eval_A(i, j):
        return 1.0 / ((i + j) * (i + j + 1) // 2 + i + 1)

    def A_times_u(u, out):
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += eval_A(i, j) * u[j]
            out[i] = s

    def At_times_u(u, out):
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += eval_A(j, i) * u[j]
            out[i] = s

    def AtA_times_u(u, out, tmp):
        A_times_u(u, tmp)
        At_times_u(tmp, out)

    u = np.ones(n)
    v = np.zeros(n)
    tmp = np.zeros(n)
    for _ in range(10):
        AtA_times_u(u, v, tmp)
        AtA_times_u(v, u, tmp)
    vBv = 0.0
    vv = 0.0
    for ue, ve in zip(u, v):
        vBv += ue * ve
        vv += ve * ve
    return math.sqrt(vBv / vv)


def nbody_game(positions, velocities, masses, steps, dt):
    n = len(masses)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for _ in range(steps):
        for (i, j) in pairs:
            dx = positions[i][0] - positions[j][0]
            dy = positions[i][1] - positions[j][1]
            dz = positions[i][2] - positions[j][2]
            mag = dt * ((dx * dx + dy * dy + dz * dz) ** -1.5)
            bm = masses[j] * mag
            velocities[i][0] -= dx * bm
            velocities[i][1] -= dy * bm
            velocities[i][2] -= dz * bm
            bm = masses[i] * mag
            velocities[j][0] += dx * bm
            velocities[j][1] += dy * bm
            velocities[j][2] += dz * bm
        for i in range(n):
            positions[i][0] += dt * velocities[i][0]
            positions[i][1] += dt * velocities[i][1]
            positions[i][2] += dt * velocities[i][2]
    e = 0.0
    for i in range(n):
        vx, vy, vz = velocities[i]
        e += 0.5 * masses[i] * (vx * vx + vy * vy + vz * vz)
    return e


def select_to_list(x, threshold):
    # The everyday idiom: a list built by append in a loop, then an array.
    out = []
    for i in range(len(x)):
        if x[i] > threshold:
            out.append(x[i] * 2.0)
    return np.array(out)


def digitize_histogram(x, edges):
    idx = np.digitize(x, edges)
    return np.bincount(idx, minlength=len(edges) + 1)


def _check_walk_2d(result, args):
    n = args[0]
    r = np.asarray(result)
    assert r.shape == (n, 2), f"walk: shape {r.shape} != {(n, 2)}"
    assert r.dtype.kind == "i", f"walk: dtype {r.dtype} is not an integer dtype"
    steps = np.diff(np.concatenate(([[0, 0]], r)), axis=0)
    assert np.all(np.abs(steps).sum(axis=1) == 1), "walk: a step is not one unit along one axis"
    for k in range(2):
        assert abs(steps[:, k].mean()) < 6 / math.sqrt(n), f"walk: mean step {k} not near 0"
    horizontal = (steps[:, 1] != 0).mean()
    assert abs(horizontal - 0.5) < 6 / math.sqrt(n), f"walk: {horizontal} of the steps horizontal"


def _options(n, seed=11):
    r = np.random.default_rng(seed)
    return r.uniform(5.0, 30.0, n), r.uniform(1.0, 100.0, n), r.uniform(0.25, 10.0, n), 0.02, 0.3


def _bodies(n=5, seed=13):
    r = np.random.default_rng(seed)
    return (r.random((n, 3)).tolist(), (r.random((n, 3)) * 0.01).tolist(),
            (r.random(n) + 0.5).tolist())


def _knn_data(n_train, n_test, seed=17):
    r = np.random.default_rng(seed)
    return r.random((n_train, 3)), r.integers(0, 3, n_train), r.random((n_test, 3)), 5
