# The cached agreement (docs/distributed.md, "Agreement"): a loop of
# collectives agreed once by the full exchange, then by a constant-size
# all-reduce. The results are those of the uncached run (TESSERA_AGREE_CACHE=0
# runs this script too): exact sums of integer-valued floats, max of float32,
# int64 sums, gathers and broadcasts, and a pattern that changes (another
# shape, two collectives at once) in the middle of the loop. Prints "ok".
import numpy as np

import tessera.distributed as dist

r, n = dist.rank(), dist.size()
for step in range(40):
    x = np.array([r + 1.0 + step])
    got = dist.all_reduce(x)
    want = sum(k + 1.0 + step for k in range(n))
    assert got.dtype == np.float64 and got.tolist() == [want], (step, got, want)
    m = dist.all_reduce(np.array([r, -r, step], dtype=np.float32), op="max")
    assert m.tolist() == [n - 1, 0, step], (step, m)
    i = dist.all_reduce(np.array([r, 2 * r], dtype=np.int64))
    assert i.tolist() == [n * (n - 1) // 2, n * (n - 1)], (step, i)
    g = dist.all_gather(np.full((2,), float(r)))
    assert np.array_equal(np.concatenate(g) if isinstance(g, list) else g,
                          np.repeat(np.arange(n, dtype=np.float64), 2)), (step, g)
    b = dist.broadcast(np.full((3,), float(r + step)), root=n - 1)
    assert b.tolist() == [n - 1.0 + step] * 3, (step, b)
    if step == 20:
        # Another shape and a larger all-reduce once: a new pattern.
        big = dist.all_reduce(np.full((5000,), 1.0))
        assert big.tolist() == [float(n)] * 5000
print("ok")
