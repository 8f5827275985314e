# Small all-reduces (up to 16 KiB) are summed by every rank from the
# contributions carried in the agreement round, in rank order: bitwise
# (x0 + x1) + x2 + ... as NumPy computes it, for float32 and float64, with
# lengths that are not multiples of a vector width. Prints "ok".
import numpy as np

import tessera.distributed as td

r, n = td.rank(), td.size()
for dtype in (np.float32, np.float64):
    for size in (1, 7, 1000, 2047):  # up to 16 KiB: carried in the round
        xs = [np.random.default_rng(100 * k + size).normal(size=size).astype(dtype) for k in range(n)]
        got = td.all_reduce(xs[r])
        want = xs[0].copy()
        for k in range(1, n):
            want = want + xs[k]
        assert got.dtype == dtype, got.dtype
        assert np.array_equal(got, want), (dtype, size, got[:4], want[:4])
print("ok")
