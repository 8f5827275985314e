# Small all-reduces (up to 64 KiB between 2 ranks, 32 KiB among 3 or 4, 16
# KiB among 5 to 8) are
# summed by every rank from the contributions carried in the agreement round,
# in the fixed order of recursive doubling (docs/distributed.md): with
# p = 2^floor(log2 N) and r = N - p, v_i = x_2i + x_2i+1 for i < r and
# v_i = x_(i+r) otherwise, then adjacent pairs level by level, the lower on
# the left — (x0 + x1) + x2 at N = 3, (x0 + x1) + (x2 + x3) at N = 4 — as
# NumPy computes it here, bitwise, for float32 and float64, with lengths that
# are not multiples of a vector width. Repeated calls of the same shape go
# through the cached agreement, whose message carries a sum of up to 16 bytes
# (1 and 2 float64 elements here): the same bits. Prints "ok".
import numpy as np

import tessera.distributed as td


def doubling_order(xs):
    p = 1
    while p * 2 <= len(xs):
        p *= 2
    r = len(xs) - p
    v = [xs[2 * i] + xs[2 * i + 1] if i < r else xs[i + r] for i in range(p)]
    while len(v) > 1:
        v = [v[i] + v[i + 1] for i in range(0, len(v), 2)]
    return v[0]


r, n = td.rank(), td.size()
# The round carries up to 64 KiB per rank between 2 ranks, halved per
# exchange after the first (32 KiB among 3 or 4, 16 KiB among 5 to 8).
budget = 65536
reach = 2
while reach < n:
    budget //= 2
    reach *= 2
assert np.array_equal(doubling_order([np.float32(k) for k in (1, 2, 3)]), np.float32(6))
for dtype in (np.float32, np.float64):
    sizes = [k for k in (1, 2, 7, 1000, 2047, 4095, 8191)
             if k * np.dtype(dtype).itemsize <= budget]
    for size in sizes:
        for repeat in range(3):
            xs = [np.random.default_rng([k, size, repeat]).normal(size=size).astype(dtype)
                  * 10.0 ** np.arange(-3, 4)[np.arange(size) % 7].astype(dtype)
                  for k in range(n)]
            got = td.all_reduce(xs[r])
            want = doubling_order(xs)
            assert got.dtype == dtype, got.dtype
            assert np.array_equal(got, want), (dtype, size, repeat, got[:4], want[:4])
            if n == 3:  # the rank order, (x0 + x1) + x2
                assert np.array_equal(got, (xs[0] + xs[1]) + xs[2])
print("ok")
