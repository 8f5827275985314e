"""Recursive jit functions (issue 31): tessera against CPython and Numba @njit
(decorated at definition, so the self-calls are compiled) on fib, Ackermann, a
recursive sum over an array range, quicksort and mergesort by index ranges,
binary search, a flood fill over a 2-D grid, a segment-tree build and n-queens
by bitmasks. Prints medians of several runs, the ratios to CPython and Numba,
first-call times (translation and compilation), the thread count and the
machine. Run: PYTHONPATH=python python bench/bench_recursion.py [--runs 7]"""

import argparse
import inspect
import os
import platform
import statistics
import sys
import time

import numpy as np

import tessera

try:
    import numba
except ImportError:  # the race runs without its peer
    numba = None


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def ackermann(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


def range_sum(x, lo, hi):
    if hi - lo == 1:
        return x[lo]
    mid = (lo + hi) // 2
    return range_sum(x, lo, mid) + range_sum(x, mid, hi)


def quicksort(a, lo, hi):
    if lo >= hi:
        return 0
    pivot = a[hi]
    i = lo
    for j in range(lo, hi):
        if a[j] < pivot:
            a[i], a[j] = a[j], a[i]
            i += 1
    a[i], a[hi] = a[hi], a[i]
    quicksort(a, lo, i - 1)
    quicksort(a, i + 1, hi)
    return i


def mergesort(a, tmp, lo, hi):
    if hi - lo < 2:
        return 0
    mid = (lo + hi) // 2
    mergesort(a, tmp, lo, mid)
    mergesort(a, tmp, mid, hi)
    i = lo
    j = mid
    k = lo
    while k < hi:
        if j >= hi or (i < mid and a[i] <= a[j]):
            tmp[k] = a[i]
            i += 1
        else:
            tmp[k] = a[j]
            j += 1
        k += 1
    for k in range(lo, hi):
        a[k] = tmp[k]
    return hi - lo


def bsearch(a, x, lo, hi):
    if lo >= hi:
        return lo
    m = (lo + hi) // 2
    if a[m] < x:
        return bsearch(a, x, m + 1, hi)
    return bsearch(a, x, lo, m)


def flood(g, seen, i, j):
    if i < 0 or j < 0 or i >= g.shape[0] or j >= g.shape[1]:
        return 0
    if seen[i, j] or g[i, j] == 0:
        return 0
    seen[i, j] = True
    return (1 + flood(g, seen, i + 1, j) + flood(g, seen, i - 1, j) + flood(g, seen, i, j + 1)
            + flood(g, seen, i, j - 1))


def seg_build(tree, a, node, lo, hi):
    if lo == hi:
        tree[node] = a[lo]
        return tree[node]
    mid = (lo + hi) // 2
    s = seg_build(tree, a, 2 * node, lo, mid) + seg_build(tree, a, 2 * node + 1, mid + 1, hi)
    tree[node] = s
    return s


def queens(n, row, cols, d1, d2):
    if row == n:
        return 1
    count = 0
    for c in range(n):
        if not (cols >> c) & 1 and not (d1 >> (row + c)) & 1 and not (d2 >> (row - c + n)) & 1:
            count += queens(n, row + 1, cols | (1 << c), d1 | (1 << (row + c)),
                            d2 | (1 << (row - c + n)))
    return count


def _numba_versions():
    """The kernels under @njit, each calling its own compiled self."""
    if numba is None:
        return {}
    src = {f.__name__: f for f in (fib, ackermann, range_sum, quicksort, mergesort, bsearch, flood,
                                   seg_build, queens)}
    ns = {"np": np, "numba": numba}  # globals and locals: the self-call finds the njit one
    for name, f in src.items():
        exec(compile("@numba.njit(cache=False)\n" + inspect.getsource(f), f"<numba {name}>", "exec"),
             ns)
    return {name: ns[name] for name in src}


def _median_ms(call, make_args, runs):
    times = []
    for _ in range(runs):
        args = make_args()
        t = time.perf_counter()
        call(*args)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    data = rng.random(4096)
    sorted_data = np.sort(data)
    grid = np.ones((40, 40), np.int32)  # one region: every cell visited
    cases = [("fib(22)", fib, lambda: (22,)),
             ("ackermann(2, 300)", ackermann, lambda: (2, 300)),
             ("range_sum(x, 0, 4096)", range_sum, lambda: (data, 0, 4096)),
             ("quicksort(2,000 floats)", quicksort, lambda: (rng.random(2000), 0, 1999)),
             ("mergesort(2,000 floats)", mergesort,
              lambda: (rng.random(2000), np.zeros(2000), 0, 2000)),
             ("bsearch(4,096 sorted)", bsearch, lambda: (sorted_data, 0.5, 0, 4096)),
             ("flood(40x40 int32 grid)", flood,
              lambda: (grid, np.zeros(grid.shape, bool), 20, 20)),
             ("seg_build(4,096 floats)", seg_build, lambda: (np.zeros(8192), data, 1, 0, 4095)),
             ("n_queens(7) bitmask", queens, lambda: (7, 0, 0, 0, 0))]
    nb = _numba_versions()
    sys.setrecursionlimit(10_000)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores; "
          f"python {platform.python_version()}; numba {numba.__version__ if numba else 'absent'}; "
          f"tessera threads {tessera.num_threads()}; medians of {args.runs} runs")
    print(f"{'kernel':26s} {'tessera ms':>11s} {'CPython ms':>11s} {'Numba ms':>9s} "
          f"{'vs CPython':>10s} {'vs Numba':>9s} {'1st call ms':>12s} {'Numba 1st':>10s}")
    for label, f, make in cases:
        j = tessera.jit(f)
        t = time.perf_counter()
        j(*make())
        first = (time.perf_counter() - t) * 1e3
        mine = _median_ms(j, make, args.runs)
        py = _median_ms(f, make, args.runs)
        nb_first = nb_ms = float("nan")
        if f.__name__ in nb:
            g = nb[f.__name__]
            t = time.perf_counter()
            g(*make())
            nb_first = (time.perf_counter() - t) * 1e3
            nb_ms = _median_ms(g, make, args.runs)
        print(f"{label:26s} {mine:11.3f} {py:11.3f} {nb_ms:9.3f} {py / mine:9.1f}x "
              f"{mine / nb_ms:8.1f}x {first:12.1f} {nb_first:10.1f}")
    print("vs CPython: CPython's time / tessera's (above 1: tessera faster); vs Numba: tessera's "
          "time / Numba's (1.0: as fast).")


if __name__ == "__main__":
    main()
