# All-reduces of the engine's own halving and doubling whose reduce-scatter
# rides in the cached agreement round's messages (docs/scaling.md, "The
# agreement rides in the data"). `speculated_allreduce.py MODE ALGORITHM`:
#
# order: sums of float32 and float64 above the 128 KiB where the engine's
#   algorithms start, repeated (the first after a full round, the next ones
#   after cached rounds that carry the data), equal bitwise to the order of
#   recursive doubling computed by NumPy (v_i = x_2i + x_2i+1 for i < r, else
#   x_(i+r), then adjacent pairs level by level), on every rank; int64 max and
#   min equal NumPy's. Prints "ok".
# mismatch: a pattern of large all-reduces cached, then rank 1 offers another
#   length (it speculates with data of another size): every rank gets the
#   full round's precise error, not a hang or a wrong result.
# small: the same, rank 1 offering a small all-reduce (no data carried) where
#   the others speculate.
# several: three large all-reduces in flight (rounds offering several), each
#   bitwise in doubling's order. Prints "ok".
import os
import sys

MODE = sys.argv[1]
os.environ["TESSERA_ALLREDUCE"] = sys.argv[2] if len(sys.argv) > 2 else "auto"

import numpy as np  # noqa: E402

import tessera.distributed as td  # noqa: E402

r, n = td.rank(), td.size()


def doubling_order(xs):
    p = 1
    while p * 2 <= len(xs):
        p *= 2
    q = len(xs) - p
    v = [xs[2 * i] + xs[2 * i + 1] if i < q else xs[i + q] for i in range(p)]
    while len(v) > 1:
        v = [v[i] + v[i + 1] for i in range(0, len(v), 2)]
    return v[0]


def contributions(dtype, size, salt):
    return [np.random.default_rng([k, size, salt]).normal(size=size).astype(dtype)
            * 10.0 ** np.arange(-3, 4)[np.arange(size) % 7].astype(dtype) for k in range(n)]


if MODE == "order":
    for dtype in (np.float32, np.float64):
        for size in (40_001, 65_537):
            for repeat in range(4):
                xs = contributions(dtype, size, repeat)
                got = td.all_reduce(xs[r])
                want = doubling_order(xs)
                assert got.dtype == dtype, got.dtype
                assert np.array_equal(got, want), (dtype, size, repeat, got[:3], want[:3])
    for repeat in range(3):
        xs = [np.random.default_rng([k, repeat]).integers(-10**9, 10**9, size=50_001)
              for k in range(n)]
        assert np.array_equal(td.all_reduce(xs[r], "max"), np.max(xs, axis=0))
        assert np.array_equal(td.all_reduce(xs[r], "min"), np.min(xs, axis=0))
    print("ok")
elif MODE == "several":
    # Three large all-reduces in flight at once: a round offers several, and
    # the first that runs by halving or doubling rides in the cached round.
    import tessera  # noqa: E402

    prog = tessera.Program(
        "define(f, a, b, c, block(define(ra, all_reduce(a)), define(rb, all_reduce(b)),\n"
        "  define(rc, all_reduce(c)), list(ra, rb, rc))) f", "several.tsl")
    for repeat in range(5):
        parts = [contributions(np.float32, size, repeat) for size in (40_001, 50_000, 65_537)]
        got = prog.run([xs[r] for xs in parts])
        for k, xs in enumerate(parts):
            assert np.array_equal(got[k], doubling_order(xs)), (repeat, k)
    print("ok")
elif MODE in ("mismatch", "small"):
    for step in range(6):
        got = td.all_reduce(np.ones(40_000), op="max")
        assert got.shape == (40_000,) and got.min() == 1.0
    odd = 50_000 if MODE == "mismatch" else 3
    td.all_reduce(np.ones(odd if r == 1 else 40_000), op="max")
    print("no error")
else:
    raise SystemExit(f"speculated_allreduce.py: unknown mode {MODE!r}")
