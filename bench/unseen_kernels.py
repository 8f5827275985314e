"""Kernels written as NumPy/Numba tutorials, benchmark collections and Stack Overflow
answers publish them, none of them written for tessera (issue 31's acceptance as an
outsider would test it): fractals per point, stencils and filters by loops, Monte Carlo
chains, cellular automata, dynamic programming, n-body, histograms, sorts, scans, root
finding and integer puzzles. bench_unseen_kernels.py races them against CPython and
Numba's @njit; tests/python/test_jit_unseen_kernels.py checks them against Python."""

import math

import numpy as np

# ---------------------------------------------------------------- fractals


def burning_ship(width, height, max_iter):
    image = np.zeros((height, width), dtype=np.int32)
    for row in range(height):
        y0 = -2.0 + 3.0 * row / height
        for col in range(width):
            x0 = -2.5 + 4.0 * col / width
            x = 0.0
            y = 0.0
            it = 0
            while x * x + y * y < 4.0 and it < max_iter:
                xt = x * x - y * y + x0
                y = abs(2.0 * x * y) + y0
                x = abs(xt)
                it += 1
            image[row, col] = it
    return image


def newton_fractal(n, max_iter, tol):
    roots = np.array([1.0 + 0j, -0.5 + 0.8660254037844386j, -0.5 - 0.8660254037844386j])
    basin = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in range(n):
            z = complex(-1.5 + 3.0 * j / n, -1.5 + 3.0 * i / n)
            for _ in range(max_iter):
                if z == 0:
                    break
                z = z - (z ** 3 - 1) / (3 * z ** 2)
            basin[i, j] = -1
            for r in range(3):
                if abs(z - roots[r]) < tol:
                    basin[i, j] = r
                    break
    return basin


# ---------------------------------------------------------------- stencils and filters


def separable_blur(img, radius):
    h, w = img.shape
    tmp = np.empty_like(img)
    out = np.empty_like(img)
    norm = 1.0 / (2 * radius + 1)
    for i in range(h):
        for j in range(w):
            s = 0.0
            for k in range(-radius, radius + 1):
                jj = min(max(j + k, 0), w - 1)
                s += img[i, jj]
            tmp[i, j] = s * norm
    for i in range(h):
        for j in range(w):
            s = 0.0
            for k in range(-radius, radius + 1):
                ii = min(max(i + k, 0), h - 1)
                s += tmp[ii, j]
            out[i, j] = s * norm
    return out


def sobel(img):
    h, w = img.shape
    mag = np.zeros((h, w))
    for i in range(1, h - 1):
        for j in range(1, w - 1):
            gx = (img[i - 1][j + 1] + 2 * img[i][j + 1] + img[i + 1][j + 1]
                  - img[i - 1][j - 1] - 2 * img[i][j - 1] - img[i + 1][j - 1])
            gy = (img[i + 1][j - 1] + 2 * img[i + 1][j] + img[i + 1][j + 1]
                  - img[i - 1][j - 1] - 2 * img[i - 1][j] - img[i - 1][j + 1])
            mag[i, j] = math.sqrt(gx * gx + gy * gy)
    return mag


def median_filter3(img):
    h, w = img.shape
    out = img.copy()
    window = np.empty(9, dtype=img.dtype)
    for i in range(1, h - 1):
        for j in range(1, w - 1):
            k = 0
            for di in range(-1, 2):
                for dj in range(-1, 2):
                    window[k] = img[i + di, j + dj]
                    k += 1
            window.sort()
            out[i, j] = window[4]
    return out


def life_wrap(grid, steps):
    n, m = grid.shape
    for _ in range(steps):
        new = np.zeros_like(grid)
        for i in range(n):
            for j in range(m):
                alive = 0
                for di in (-1, 0, 1):
                    for dj in (-1, 0, 1):
                        if di == 0 and dj == 0:
                            continue
                        alive += grid[(i + di) % n, (j + dj) % m]
                if grid[i, j] == 1 and (alive == 2 or alive == 3):
                    new[i, j] = 1
                elif grid[i, j] == 0 and alive == 3:
                    new[i, j] = 1
        grid = new
    return grid


def heat_bool_mask(u, mask, alpha, steps):
    # Explicit diffusion on the cells a bool mask marks free; the others are held fixed.
    n, m = u.shape
    for _ in range(steps):
        old = u.copy()
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                if mask[i, j]:
                    u[i, j] = old[i, j] + alpha * (old[i - 1, j] + old[i + 1, j]
                                                   + old[i, j - 1] + old[i, j + 1] - 4 * old[i, j])
    return u


# ---------------------------------------------------------------- Monte Carlo chains


def ising_metropolis(n, beta, sweeps):
    spins = np.ones((n, n), dtype=np.int64)
    for _ in range(sweeps):
        for i in range(n):
            for j in range(n):
                s = spins[i, j]
                nb = spins[(i + 1) % n, j] + spins[i - 1, j] + spins[i, (j + 1) % n] + spins[i, j - 1]
                dE = 2 * s * nb
                if dE <= 0 or np.random.random() < math.exp(-beta * dE):
                    spins[i, j] = -s
    return spins.sum() / (n * n)


def first_passage(walks, barrier, max_steps):
    total = 0
    escaped = 0
    for _ in range(walks):
        x = 0
        t = 0
        while t < max_steps:
            if np.random.random() < 0.5:
                x += 1
            else:
                x -= 1
            t += 1
            if abs(x) >= barrier:
                escaped += 1
                total += t
                break
    if escaped == 0:
        return 0.0, 0
    return total / escaped, escaped


def pi_loops(n):
    inside = 0
    for _ in range(n):
        x = np.random.random()
        y = np.random.random()
        if x * x + y * y <= 1.0:
            inside += 1
    return 4.0 * inside / n


# ---------------------------------------------------------------- cellular automata


def elementary_ca(width, steps, rule):
    cells = np.zeros(width, dtype=np.uint8)
    cells[width // 2] = 1
    history = np.zeros((steps, width), dtype=np.uint8)
    for t in range(steps):
        history[t] = cells
        nxt = np.zeros(width, dtype=np.uint8)
        for i in range(width):
            left = cells[i - 1]
            right = cells[(i + 1) % width]
            idx = 4 * left + 2 * cells[i] + right
            nxt[i] = (rule >> idx) & 1
        cells = nxt
    return history


# ---------------------------------------------------------------- dynamic programming


def longest_increasing_subsequence(a):
    n = len(a)
    lis = np.ones(n, dtype=np.int64)
    for i in range(1, n):
        for j in range(i):
            if a[j] < a[i] and lis[j] + 1 > lis[i]:
                lis[i] = lis[j] + 1
    return lis.max()


def coin_change_min(coins, amount):
    INF = amount + 1
    dp = np.full(amount + 1, INF, dtype=np.int64)
    dp[0] = 0
    for x in range(1, amount + 1):
        for c in coins:
            if c <= x and dp[x - c] + 1 < dp[x]:
                dp[x] = dp[x - c] + 1
    if dp[amount] == INF:
        return -1
    return int(dp[amount])


def floyd_warshall(dist):
    n = dist.shape[0]
    for k in range(n):
        for i in range(n):
            dik = dist[i, k]
            for j in range(n):
                if dik + dist[k, j] < dist[i, j]:
                    dist[i, j] = dik + dist[k, j]
    return dist


def knapsack_table(values, weights, capacity):
    n = len(values)
    K = np.zeros((n + 1, capacity + 1), dtype=np.int64)
    for i in range(1, n + 1):
        wi = weights[i - 1]
        vi = values[i - 1]
        for w in range(capacity + 1):
            K[i, w] = K[i - 1, w]
            if wi <= w and K[i - 1, w - wi] + vi > K[i, w]:
                K[i, w] = K[i - 1, w - wi] + vi
    chosen = []
    w = capacity
    for i in range(n, 0, -1):
        if K[i, w] != K[i - 1, w]:
            chosen.append(i - 1)
            w -= weights[i - 1]
    return K[n, capacity], chosen


def needleman_wunsch(a, b, match, mismatch, gap):
    n = len(a)
    m = len(b)
    F = np.zeros((n + 1, m + 1), dtype=np.int32)
    for i in range(n + 1):
        F[i, 0] = gap * i
    for j in range(m + 1):
        F[0, j] = gap * j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            s = match if a[i - 1] == b[j - 1] else mismatch
            F[i, j] = max(F[i - 1, j - 1] + s, F[i - 1, j] + gap, F[i, j - 1] + gap)
    return F[n, m]


# ---------------------------------------------------------------- physics


def nbody_steps(pos, vel, mass, steps, dt, soft):
    n = pos.shape[0]
    acc = np.zeros_like(pos)
    for _ in range(steps):
        acc[:] = 0.0
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                dx = pos[j, 0] - pos[i, 0]
                dy = pos[j, 1] - pos[i, 1]
                dz = pos[j, 2] - pos[i, 2]
                r = np.sqrt(dx * dx + dy * dy + dz * dz + soft)
                f = mass[j] / (r * r * r)
                acc[i, 0] += f * dx
                acc[i, 1] += f * dy
                acc[i, 2] += f * dz
        for i in range(n):
            for d in range(3):
                vel[i, d] += dt * acc[i, d]
                pos[i, d] += dt * vel[i, d]
    ke = 0.0
    for i in range(n):
        ke += 0.5 * mass[i] * (vel[i, 0] ** 2 + vel[i, 1] ** 2 + vel[i, 2] ** 2)
    return ke


# ---------------------------------------------------------------- histograms


def histogram_loop(x, nbins, lo, hi):
    counts = np.zeros(nbins, dtype=np.int64)
    width = (hi - lo) / nbins
    for v in x:
        if v < lo or v >= hi:
            continue
        b = int((v - lo) / width)
        if b == nbins:
            b -= 1
        counts[b] += 1
    return counts


def histogram_edges(x, edges):
    counts = np.zeros(len(edges) - 1, dtype=np.int64)
    last = edges[-1]
    for i in range(x.shape[0]):
        v = x[i]
        if v < edges[0] or v > last:
            continue
        if v == last:
            counts[-1] += 1
        else:
            counts[np.searchsorted(edges, v, side="right") - 1] += 1
    return counts


# ---------------------------------------------------------------- sorting


def shell_sort(a):
    n = len(a)
    gap = n // 2
    while gap > 0:
        for i in range(gap, n):
            tmp = a[i]
            j = i
            while j >= gap and a[j - gap] > tmp:
                a[j] = a[j - gap]
                j -= gap
            a[j] = tmp
        gap //= 2
    return a


def odd_even_sort(a):
    n = a.shape[0]
    done = False
    passes = 0
    while not done:
        done = True
        for start in (0, 1):
            for i in range(start, n - 1, 2):
                if a[i] > a[i + 1]:
                    a[i], a[i + 1] = a[i + 1], a[i]
                    done = False
        passes += 1
    return passes


# ---------------------------------------------------------------- scans


def prefix_sums(a):
    out = np.empty(a.shape[0] + 1, dtype=a.dtype)
    out[0] = 0
    for i in range(a.shape[0]):
        out[i + 1] = out[i] + a[i]
    return out


def running_extremes(x):
    n = len(x)
    cmax = np.empty_like(x)
    suffix_min = np.empty_like(x)
    best = x[0]
    for i in range(n):
        if x[i] > best:
            best = x[i]
        cmax[i] = best
    low = x[-1]
    for i in range(n - 1, -1, -1):
        low = min(low, x[i])
        suffix_min[i] = low
    return cmax, suffix_min


def run_length_encode(a):
    values = []
    counts = []
    if len(a) == 0:
        return values, counts
    current = a[0]
    count = 1
    for i in range(1, len(a)):
        if a[i] == current:
            count += 1
        else:
            values.append(current)
            counts.append(count)
            current = a[i]
            count = 1
    values.append(current)
    counts.append(count)
    return values, counts


# ---------------------------------------------------------------- linear algebra


def matmul_triple(A, B):
    n, p = A.shape
    m = B.shape[1]
    C = np.zeros((n, m), dtype=np.float32)
    for i in range(n):
        for j in range(m):
            acc = np.float32(0.0)
            for k in range(p):
                acc += A[i][k] * B[k][j]
            C[i][j] = acc
    return C


# ---------------------------------------------------------------- root finding


def poly_eval(c, x):
    # Horner's rule, highest power first.
    r = 0.0
    for k in range(len(c)):
        r = r * x + c[k]
    return r


def poly_deriv_eval(c, x):
    n = len(c) - 1
    r = 0.0
    for k in range(n):
        r = r * x + c[k] * (n - k)
    return r


def bisect_root(c, lo, hi, tol):
    flo = poly_eval(c, lo)
    it = 0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        fm = poly_eval(c, mid)
        if fm == 0.0:
            return mid, it
        if (fm < 0.0) == (flo < 0.0):
            lo = mid
            flo = fm
        else:
            hi = mid
        it += 1
    return 0.5 * (lo + hi), it


def newton_root(c, x0, tol, max_iter):
    x = x0
    for it in range(max_iter):
        d = poly_deriv_eval(c, x)
        if d == 0.0:
            return x, -1
        step = poly_eval(c, x) / d
        x -= step
        if math.fabs(step) < tol:
            return x, it + 1
    return x, max_iter


def roots_on_grid(c, starts, tol):
    found = np.empty(len(starts))
    iters = 0
    for k in range(len(starts)):
        x, it = newton_root(c, starts[k], tol, 50)
        if it < 0:
            x, it = bisect_root(c, starts[k] - 1.0, starts[k] + 1.0, tol)
        found[k] = x
        iters += it
    return found, iters


# ---------------------------------------------------------------- integer puzzles


def collatz_memo(limit):
    lengths = np.zeros(limit, dtype=np.int32)
    lengths[1] = 1
    best = 1
    best_len = 1
    for start in range(2, limit):
        n = start
        steps = 0
        while n >= limit or lengths[n] == 0:
            if n % 2 == 0:
                n //= 2
            else:
                n = 3 * n + 1
            steps += 1
        length = steps + lengths[n]
        lengths[start] = length
        if length > best_len:
            best_len = length
            best = start
    return best, best_len


def digit_sum(n):
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    return s


def digital_root_counts(limit):
    counts = [0] * 10
    for k in range(1, limit):
        r = k
        while r >= 10:
            r = digit_sum(r)
        counts[r] += 1
    return counts
