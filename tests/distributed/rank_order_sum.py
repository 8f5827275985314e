# Small all-reduces (up to 64 KiB between 2 ranks, 32 KiB among 3 or 4) are
# summed by every rank from the contributions carried in the agreement round,
# in rank order: bitwise (x0 + x1) + x2 + ... as NumPy computes it, for
# float32 and float64, with lengths that are not multiples of a vector width.
# Prints "ok".
import numpy as np

import tessera.distributed as td

r, n = td.rank(), td.size()
for dtype in (np.float32, np.float64):
    # Up to 32 KiB (float64 4095), and 64 KiB (float64 8191) between 2 ranks.
    for size in (1, 7, 1000, 2047, 4095) + ((8191,) if n == 2 else ()):
        xs = [np.random.default_rng(100 * k + size).normal(size=size).astype(dtype) for k in range(n)]
        got = td.all_reduce(xs[r])
        want = xs[0].copy()
        for k in range(1, n):
            want = want + xs[k]
        assert got.dtype == dtype, got.dtype
        assert np.array_equal(got, want), (dtype, size, got[:4], want[:4])
print("ok")
