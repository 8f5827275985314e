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


# A second round (issue 31): the pythran/numpy-benchmarks suite's kernels (rosen_der,
# harris, growcut, hyantes, wdist, smoothing, log_likelihood, evolve by np.roll,
# periodic_dist by boolean masks, multiple_sum, create_grid), a 1-D FDTD, Gaussian
# elimination with partial pivoting, n-queens by backtracking over a list, the primes of
# Cython's tutorial (for ... else), Project Euler's amicable numbers and Harshad numbers
# (digit sums by // and %), a dict counter with an f-string, Numba's go_fast and an
# RGB-to-HSV conversion by loops (max/min of several arguments).


def rosen_der(x):
    xm = x[1:-1]
    xm_m1 = x[:-2]
    xm_p1 = x[2:]
    der = np.zeros_like(x)
    der[1:-1] = 200 * (xm - xm_m1 ** 2) - 400 * (xm_p1 - xm ** 2) * xm - 2 * (1 - xm)
    der[0] = -400 * x[0] * (x[1] - x[0] ** 2) - 2 * (1 - x[0])
    der[-1] = 200 * (x[-1] - x[-2] ** 2)
    return der


def harris(I):
    m, n = I.shape
    dx = (I[1:, :] - I[:m - 1, :])[:, 1:]
    dy = (I[:, 1:] - I[:, :n - 1])[1:, :]
    A = dx * dx
    B = dy * dy
    C = dx * dy
    tr = A + B
    det = A * B - C * C
    k = 0.05
    return det - k * tr * tr


def window_floor(idx, radius):
    if radius > idx:
        return 0
    else:
        return idx - radius


def window_ceil(idx, ceil, radius):
    if idx + radius > ceil:
        return ceil
    else:
        return idx + radius


def growcut(image, state, state_next, window_radius):
    changes = 0
    sqrt_3 = math.sqrt(3.0)
    height = image.shape[0]
    width = image.shape[1]
    for j in range(width):
        for i in range(height):
            winning_colony = state[i, j, 0]
            defense_strength = state[i, j, 1]
            for jj in range(window_floor(j, window_radius),
                            window_ceil(j + 1, width, window_radius)):
                for ii in range(window_floor(i, window_radius),
                                window_ceil(i + 1, height, window_radius)):
                    if ii == i and jj == j:
                        continue
                    d = image[i, j, 0] - image[ii, jj, 0]
                    s = d * d
                    for k in range(1, 3):
                        d = image[i, j, k] - image[ii, jj, k]
                        s += d * d
                    gval = 1.0 - math.sqrt(s) / sqrt_3
                    attack_strength = gval * state[ii, jj, 1]
                    if attack_strength > defense_strength:
                        defense_strength = attack_strength
                        winning_colony = state[ii, jj, 0]
                        changes += 1
            state_next[i, j, 0] = winning_colony
            state_next[i, j, 1] = defense_strength
    return changes


def hyantes(xmin, ymin, xmax, ymax, step, range_, t):
    X = int((xmax - xmin) / step)
    Y = int((ymax - ymin) / step)
    pt = np.zeros((X, Y))
    for i in range(X):
        for j in range(Y):
            for k in t:
                tmp = 6368.0 * math.acos(math.cos(xmin + step * i) * math.cos(k[0])
                                         * math.cos((ymin + step * j) - k[1])
                                         + math.sin(xmin + step * i) * math.sin(k[0]))
                if tmp < range_:
                    pt[i][j] += k[2] / (1 + tmp)
    return pt


def wdist(A, B, W):
    k, m = A.shape
    _, n = B.shape
    D = np.zeros((m, n))
    for ii in range(m):
        for jj in range(n):
            wdiff = (A[:, ii] - B[:, jj]) / W[:, ii]
            D[ii, jj] = np.sqrt((wdiff ** 2).sum())
    return D


def smoothing(x, alpha):
    s = x.copy()
    for i in range(1, len(s)):
        s[i] = alpha * s[i] + (1 - alpha) * s[i - 1]
    return s


def log_likelihood(data, mean, sigma):
    s = (data - mean) ** 2 / (2 * (sigma ** 2))
    pdfs = np.exp(- s)
    pdfs /= np.sqrt(2 * np.pi) * sigma
    return np.log(pdfs).sum()


def roll_laplacian(grid):
    return (np.roll(grid, +1, 0) + np.roll(grid, -1, 0) + np.roll(grid, +1, 1)
            + np.roll(grid, -1, 1) - 4 * grid)


def evolve(grid, dt, steps, D=1.0):
    for _ in range(steps):
        grid = grid + dt * D * roll_laplacian(grid)
    return grid


def fdtd_1d(n, steps):
    ez = np.zeros(n)
    hy = np.zeros(n)
    src = n // 2
    for t in range(steps):
        hy[:-1] += 0.5 * (ez[1:] - ez[:-1])
        ez[1:] += 0.5 * (hy[1:] - hy[:-1])
        ez[src] += math.exp(-0.5 * ((t - 30.0) / 10.0) ** 2)
    return ez, hy


def gauss_solve(A, b):
    A = A.copy()
    b = b.copy()
    n = len(b)
    for k in range(n - 1):
        p = k + np.argmax(np.abs(A[k:, k]))
        if p != k:
            A[[k, p]] = A[[p, k]]
            b[k], b[p] = b[p], b[k]
        for i in range(k + 1, n):
            f = A[i, k] / A[k, k]
            A[i, k:] -= f * A[k, k:]
            b[i] -= f * b[k]
    x = np.zeros(n)
    for i in reversed(range(n)):
        x[i] = (b[i] - np.dot(A[i, i + 1:], x[i + 1:])) / A[i, i]
    return x


def queens_count(n, row, cols):
    if row == n:
        return 1
    count = 0
    for c in range(n):
        ok = True
        for r, cc in enumerate(cols):
            if cc == c or abs(cc - c) == row - r:
                ok = False
                break
        if ok:
            cols.append(c)
            count += queens_count(n, row + 1, cols)
            cols.pop()
    return count


def n_queens(n):
    return queens_count(n, 0, [])


def primes_list(nb_primes):
    p = []
    n = 2
    while len(p) < nb_primes:
        for i in p:
            if n % i == 0:
                break
        else:
            p.append(n)
        n += 1
    return p


def sum_divisors(n):
    s = 1
    i = 2
    while i * i <= n:
        if n % i == 0:
            s += i
            if i != n // i:
                s += n // i
        i += 1
    return s


def amicable_sum(limit):
    total = 0
    for a in range(2, limit):
        b = sum_divisors(a)
        if b != a and b < limit and sum_divisors(b) == a:
            total += a
    return total


def digit_sum(n):
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    return s


def harshad_numbers(limit):
    out = np.empty(limit, dtype=np.int64)
    count = 0
    for n in range(1, limit + 1):
        if n % digit_sum(n) == 0:
            out[count] = n
            count += 1
    return out[:count]


def go_fast(a):
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return a + trace


def periodic_dist(x, y, z, L, periodic_x, periodic_y, periodic_z):
    N = len(x)
    xtemp = np.tile(x, (N, 1))
    dx = xtemp - xtemp.T
    ytemp = np.tile(y, (N, 1))
    dy = ytemp - ytemp.T
    ztemp = np.tile(z, (N, 1))
    dz = ztemp - ztemp.T
    if periodic_x:
        dx[dx > L / 2] = dx[dx > L / 2] - L
        dx[dx < -L / 2] = dx[dx < -L / 2] + L
    if periodic_y:
        dy[dy > L / 2] = dy[dy > L / 2] - L
        dy[dy < -L / 2] = dy[dy < -L / 2] + L
    if periodic_z:
        dz[dz > L / 2] = dz[dz > L / 2] - L
        dz[dz < -L / 2] = dz[dz < -L / 2] + L
    d = np.sqrt(dx ** 2 + dy ** 2 + dz ** 2)
    d[d == 0] = -1
    return d, dx, dy, dz


def multiple_sum(array):
    rows = array.shape[0]
    cols = array.shape[1]
    out = np.zeros((rows, cols))
    for row in range(0, rows):
        out[row, :] = np.sum(array - array[row, :], 0)
    return out


def create_grid(x):
    N = x.shape[0]
    z = np.zeros((N, N, 3))
    z[:, :, 0] = x.reshape(-1, 1)
    z[:, :, 1] = x
    fast_grid = np.zeros((N * N, 3))
    fast_grid[:] = z.reshape(N * N, 3)
    return fast_grid


def digit_sum_counts(limit):
    counts = {}
    for n in range(1, limit):
        s = digit_sum(n)
        counts[s] = counts.get(s, 0) + 1
    best = max(counts, key=counts.get)
    return f"digit sum {best}: {counts[best]} of {limit - 1} numbers", len(counts)


def rgb_to_hsv(img):
    h, w, _ = img.shape
    out = np.empty_like(img)
    for i in range(h):
        for j in range(w):
            r, g, b = img[i, j, 0], img[i, j, 1], img[i, j, 2]
            mx = max(r, g, b)
            mn = min(r, g, b)
            d = mx - mn
            if d == 0:
                hue = 0.0
            elif mx == r:
                hue = (60 * ((g - b) / d) + 360) % 360
            elif mx == g:
                hue = (60 * ((b - r) / d) + 120) % 360
            else:
                hue = (60 * ((r - g) / d) + 240) % 360
            out[i, j, 0] = hue
            out[i, j, 1] = 0.0 if mx == 0 else d / mx
            out[i, j, 2] = mx
    return out


# A third round (issue 31): Project Euler's coin sums (a list DP), largest palindrome
# product (str(p)[::-1]), digit factorials (math.factorial, divmod) and longest Collatz
# chain (a dict cache); Rosetta Code's Pascal's triangle (zip of lists), maximum subarray
# (Kadane, max of two), quicksort by list comprehensions and binary search; QuantEcon's
# Markov chain simulation (np.searchsorted on a row of the cumulative matrix) and a Laplace
# solver iterated until converged (while err > tol).


def coin_sums(target, coins):
    ways = [1] + [0] * target
    for coin in coins:
        for i in range(coin, target + 1):
            ways[i] += ways[i - coin]
    return ways[target]


def pascal_row(n):
    row = [1]
    for _ in range(n):
        row = [left + right for left, right in zip(row + [0], [0] + row)]
    return row


def largest_palindrome_product(lo, hi):
    best = 0
    for a in range(lo, hi):
        for b in range(a, hi):
            p = a * b
            if p > best and str(p) == str(p)[::-1]:
                best = p
    return best


def digit_factorial_sums(limit):
    facts = [math.factorial(d) for d in range(10)]
    count = 0
    for n in range(10, limit):
        m = n
        total = 0
        while m:
            m, d = divmod(m, 10)
            total += facts[d]
        if total % n == 0:
            count += 1
    return count


def longest_collatz(limit):
    cache = {1: 1}
    best, best_n = 1, 1
    for start in range(2, limit):
        n = start
        steps = 0
        while n not in cache:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        length = steps + cache[n]
        cache[start] = length
        if length > best:
            best, best_n = length, start
    return best_n, best


def max_subarray(a):
    best = a[0]
    cur = a[0]
    for x in a[1:]:
        cur = max(x, cur + x)
        best = max(best, cur)
    return best


def quicksort(xs):
    if len(xs) <= 1:
        return xs
    pivot = xs[len(xs) // 2]
    less = [x for x in xs if x < pivot]
    equal = [x for x in xs if x == pivot]
    greater = [x for x in xs if x > pivot]
    return quicksort(less) + equal + quicksort(greater)


def binary_search(a, x):
    lo, hi = 0, len(a) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        elif a[mid] > x:
            hi = mid - 1
        else:
            return mid
    return -1


def search_all(a, queries):
    out = np.empty(len(queries), dtype=np.int64)
    for i in range(len(queries)):
        out[i] = binary_search(a, queries[i])
    return out


def markov_chain_sim(P, x0, draws):
    cdf = np.cumsum(P, axis=1)
    n = len(draws)
    X = np.empty(n + 1, dtype=np.int64)
    X[0] = x0
    for t in range(n):
        X[t + 1] = np.searchsorted(cdf[X[t]], draws[t])
    return X


def laplace_converge(u, tol):
    err = 1.0
    iters = 0
    while err > tol:
        un = u.copy()
        u[1:-1, 1:-1] = 0.25 * (un[2:, 1:-1] + un[:-2, 1:-1] + un[1:-1, 2:] + un[1:-1, :-2])
        err = np.abs(u - un).max()
        iters += 1
    return u, iters



# The fourth round: Rosetta Code's tasks as its Python entries write them (a sieve
# and happy numbers with a set, Levenshtein and 0/1 knapsack on lists of lists,
# Floyd-Warshall and matrix multiplication by A[i][j] on 2-D arrays, Ackermann by
# recursion, word frequency with a dict), Project Euler's distinct powers with a
# set comprehension, and the two-sum pair count of interview books.


def sieve_set(limit):
    composites = set()
    primes = []
    for i in range(2, limit + 1):
        if i not in composites:
            primes.append(i)
            for j in range(i * i, limit + 1, i):
                composites.add(j)
    return primes


def is_happy(n):
    seen = set()
    while n != 1 and n not in seen:
        seen.add(n)
        n = sum(int(c) ** 2 for c in str(n))
    return n == 1


def happy_numbers(count):
    out = []
    n = 1
    while len(out) < count:
        if is_happy(n):
            out.append(n)
        n += 1
    return out


def levenshtein(s1, s2):
    m, n = len(s1), len(s2)
    d = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(m + 1):
        d[i][0] = i
    for j in range(n + 1):
        d[0][j] = j
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            cost = 0 if s1[i - 1] == s2[j - 1] else 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
    return d[m][n]


def knapsack01(values, weights, capacity):
    n = len(values)
    table = [[0] * (capacity + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for w in range(capacity + 1):
            if weights[i - 1] <= w:
                table[i][w] = max(table[i - 1][w],
                                  table[i - 1][w - weights[i - 1]] + values[i - 1])
            else:
                table[i][w] = table[i - 1][w]
    return table[n][capacity]


def floyd_warshall_ij(dist):
    n = dist.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                if dist[i][k] + dist[k][j] < dist[i][j]:
                    dist[i][j] = dist[i][k] + dist[k][j]
    return dist


def matmul_loops(A, B):
    n, m, p = A.shape[0], A.shape[1], B.shape[1]
    C = np.zeros((n, p))
    for i in range(n):
        for j in range(p):
            for k in range(m):
                C[i][j] += A[i][k] * B[k][j]
    return C


def ackermann(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


def ackermann_table(m_max, n_max):
    return [[ackermann(m, n) for n in range(n_max + 1)] for m in range(m_max + 1)]


def word_frequency(text, top):
    counts = {}
    for word in text.lower().split():
        word = word.strip(".,;:!?\"'()")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def distinct_powers(n):
    return len({a ** b for a in range(2, n + 1) for b in range(2, n + 1)})


def two_sum_pairs(xs, target):
    seen = set()
    pairs = set()
    for x in xs:
        if target - x in seen:
            pairs.add((min(x, target - x), max(x, target - x)))
        seen.add(x)
    return len(pairs)

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


def _r(seed=42):
    return np.random.default_rng(seed)


def _q(quick, small, big):
    return small if quick else big


def _growcut_data(n):
    state = np.zeros((n, n, 2))
    state[n // 8:n // 4, n // 8:n // 4] = (1.0, 1.0)
    state[-n // 4:-n // 8, -n // 4:-n // 8] = (2.0, 1.0)
    return _r().random((n, n, 3)), state, np.zeros_like(state), 1


def _diag_dominant(n, seed=19):
    r = _r(seed)
    return r.random((n, n)) + n * np.eye(n) * r.random(n), r.random(n)


def _markov_data(n, states=6, seed=23):
    r = _r(seed)
    P = r.random((states, states))
    return P / P.sum(axis=1, keepdims=True), 0, r.random(n)


def _laplace_grid(n):
    u = np.zeros((n, n))
    u[0, :] = 1.0
    return u, _q(n <= 12, 1e-3, 1e-4)


def _sorted_queries(n, q, seed=29):
    r = _r(seed)
    return np.unique(r.integers(0, 4 * n, n)), r.integers(0, 4 * n, q)


# The second round's entries of the suite (numpy_kernel_table.py makes each a Kernel of
# category "published"): name, function, setup(quick), and the Kernel fields that differ.
MORE_PUBLISHED = [
    dict(name="rosen_der", func=rosen_der, setup=lambda q: (_r().random(_q(q, 1000, 2_000_000)),),
         rtol=1e-12, elements=lambda q: _q(q, 1000, 2_000_000)),
    dict(name="harris", func=harris, setup=lambda q: (_r().random((_q(q, 40, 1500),) * 2),),
         rtol=1e-12, elements=lambda q: _q(q, 40, 1500) ** 2),
    dict(name="growcut", func=growcut, setup=lambda q: _growcut_data(_q(q, 16, 120)),
         kind="loop", rtol=1e-12, helpers=("window_floor", "window_ceil")),
    dict(name="hyantes", func=hyantes,
         setup=lambda q: (0.0, 0.0, 1.0, 1.0, _q(q, 0.2, 0.02), 300.0, _r().random((_q(q, 10, 100), 3))),
         kind="loop", rtol=1e-12),
    dict(name="wdist", func=wdist,
         setup=lambda q: (_r().random((5, _q(q, 10, 150))), _r(7).random((5, _q(q, 12, 150))),
                          _r(8).random((5, _q(q, 10, 150))) + 0.5),
         kind="loop", rtol=1e-12),
    dict(name="smoothing", func=smoothing, setup=lambda q: (_r().random(_q(q, 1000, 500_000)), 0.1),
         kind="loop", rtol=1e-12, lists=False),
    dict(name="log_likelihood", func=log_likelihood,
         setup=lambda q: (_r().normal(size=_q(q, 1000, 2_000_000)), 0.1, 1.3),
         rtol=1e-9, elements=lambda q: _q(q, 1000, 2_000_000)),
    dict(name="evolve", func=evolve, setup=lambda q: (_r().random((_q(q, 30, 500),) * 2), 0.1, 10),
         rtol=1e-12, elements=lambda q: _q(q, 30, 500) ** 2, helpers=("roll_laplacian",)),
    dict(name="fdtd_1d", func=fdtd_1d, setup=lambda q: (_q(q, 200, 200_000), _q(q, 50, 200)),
         rtol=1e-12, elements=lambda q: _q(q, 200, 200_000)),
    dict(name="gauss_solve", func=gauss_solve, setup=lambda q: _diag_dominant(_q(q, 12, 200)),
         kind="loop", rtol=1e-9),
    dict(name="n_queens", func=n_queens, setup=lambda q: (_q(q, 5, 8),), kind="loop",
         helpers=("queens_count",)),
    dict(name="primes_list", func=primes_list, setup=lambda q: (_q(q, 50, 2000),), kind="loop"),
    dict(name="amicable_sum", func=amicable_sum, setup=lambda q: (_q(q, 300, 20_000),),
         kind="loop", helpers=("sum_divisors",)),
    dict(name="harshad_numbers", func=harshad_numbers, setup=lambda q: (_q(q, 300, 300_000),),
         kind="loop", helpers=("digit_sum",)),
    dict(name="go_fast", func=go_fast, setup=lambda q: (np.arange(_q(q, 100, 1_000_000), dtype=np.float64).reshape(
        _q(q, 10, 1000), -1),), kind="loop", rtol=1e-12),
    dict(name="periodic_dist", func=periodic_dist,
         setup=lambda q: (*(_r(s).random(_q(q, 30, 1000)) for s in (1, 2, 3)), 1.0, True, False, True),
         rtol=1e-12, elements=lambda q: _q(q, 30, 1000) ** 2),
    dict(name="multiple_sum", func=multiple_sum, setup=lambda q: (_r().random((_q(q, 20, 300), 200)),),
         rtol=1e-9, elements=lambda q: _q(q, 20, 300) ** 2 * 200),
    dict(name="create_grid", func=create_grid, setup=lambda q: (_r().random(_q(q, 30, 1000)),),
         elements=lambda q: _q(q, 30, 1000) ** 2 * 3),
    dict(name="digit_sum_counts", func=digit_sum_counts, setup=lambda q: (_q(q, 300, 200_000),),
         kind="loop", helpers=("digit_sum",)),
    dict(name="rgb_to_hsv", func=rgb_to_hsv, setup=lambda q: (_r().random((_q(q, 12, 300),) * 2 + (3,)),),
         kind="loop", rtol=1e-12),

    # the third round
    dict(name="coin_sums", func=coin_sums,
         setup=lambda q: (_q(q, 200, 20_000), [1, 2, 5, 10, 20, 50, 100, 200]), kind="loop"),
    dict(name="pascal_row", func=pascal_row, setup=lambda q: (_q(q, 20, 60),), kind="loop"),
    dict(name="largest_palindrome_product", func=largest_palindrome_product,
         setup=lambda q: (_q(q, 10, 100), _q(q, 100, 1000)), kind="loop"),
    dict(name="digit_factorial_sums", func=digit_factorial_sums,
         setup=lambda q: (_q(q, 300, 100_000),), kind="loop"),
    dict(name="longest_collatz", func=longest_collatz, setup=lambda q: (_q(q, 300, 5000),),
         kind="loop"),
    dict(name="max_subarray", func=max_subarray,
         setup=lambda q: (_r(31).normal(size=_q(q, 1000, 1_000_000)),), kind="loop", rtol=1e-9),
    dict(name="quicksort", func=quicksort,
         setup=lambda q: (_r(37).integers(0, 1000, _q(q, 30, 20_000)).tolist(),), kind="loop"),
    dict(name="search_all", func=search_all, setup=lambda q: _sorted_queries(
        _q(q, 200, 1_000_000), _q(q, 50, 100_000)), kind="loop", helpers=("binary_search",)),
    dict(name="markov_chain_sim", func=markov_chain_sim,
         setup=lambda q: _markov_data(_q(q, 100, 100_000)), kind="loop"),
    dict(name="laplace_converge", func=laplace_converge,
         setup=lambda q: _laplace_grid(_q(q, 10, 50)), rtol=1e-12,
         elements=lambda q: _q(q, 10, 50) ** 2),
]


_WORDS = ("the quick brown fox jumps over the lazy dog; a dog, a cat and the fox. "
          "Then the cat said: 'the dog is lazy!' (and the fox ran away)")


def _strings(n, seed=41):
    r = _r(seed)
    letters = "acgt"
    return tuple("".join(letters[i] for i in r.integers(0, 4, n)) for _ in range(2))


def _knapsack_data(n, cap, seed=43):
    r = _r(seed)
    return r.integers(1, 100, n).tolist(), r.integers(1, 30, n).tolist(), cap


def _distances(n, seed=47):
    d = _r(seed).random((n, n)) * 10
    np.fill_diagonal(d, 0.0)
    return (d,)


# The fourth round (numpy_kernel_table.py adds each as a Kernel of category "published").
FOURTH_PUBLISHED = [
    dict(name="sieve_set", func=sieve_set, setup=lambda q: (_q(q, 100, 5000),), kind="loop"),
    dict(name="happy_numbers", func=happy_numbers, setup=lambda q: (_q(q, 10, 300),),
         kind="loop", helpers=("is_happy",)),
    dict(name="levenshtein", func=levenshtein, setup=lambda q: _strings(_q(q, 12, 150)),
         kind="loop"),
    dict(name="knapsack01", func=knapsack01, setup=lambda q: _knapsack_data(
        _q(q, 8, 50), _q(q, 30, 500)), kind="loop"),
    dict(name="floyd_warshall_ij", func=floyd_warshall_ij, setup=lambda q: _distances(_q(q, 8, 60)),
         kind="loop", rtol=1e-12),
    dict(name="matmul_loops", func=matmul_loops, setup=lambda q: (
        _r(53).random((_q(q, 6, 60), _q(q, 5, 50))), _r(59).random((_q(q, 5, 50), _q(q, 7, 40)))),
         kind="loop", rtol=1e-9),
    dict(name="ackermann_table", func=ackermann_table, setup=lambda q: (2, _q(q, 3, 6)),
         kind="loop", helpers=("ackermann",)),
    dict(name="word_frequency", func=word_frequency, setup=lambda q: (_WORDS * _q(q, 1, 100), 5),
         kind="loop"),
    dict(name="distinct_powers", func=distinct_powers, setup=lambda q: (_q(q, 6, 15),),
         kind="loop"),
    dict(name="two_sum_pairs", func=two_sum_pairs, setup=lambda q: (
        _r(61).integers(0, 100, _q(q, 50, 20_000)).tolist(), 100), kind="loop"),
]
