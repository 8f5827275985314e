# All-reduces of 128 KiB and more run as the engine's own ring (ring.cpp:
# post_ring): sums, means, maxima and minima of float32, float64 and int64
# against NumPy over every rank's data, with element counts that do not
# divide by the number of ranks and NaN in maxima and minima; every rank gets
# the same bits, and so does a repeated call. Several smaller all-reduces in
# flight together are coalesced into one ring, and several rings run at once
# beside the other paths. Prints "ok".
import numpy as np

import tessera
import tessera.distributed as td

r, n = td.rank(), td.size()


def data(rank, dtype, count, salt):
    rng = np.random.default_rng(1000 * rank + 7 * count + salt)
    if dtype == np.int64:
        return rng.integers(-1000, 1000, size=count, dtype=np.int64)
    return rng.normal(size=count).astype(dtype)


def same_everywhere(got, what):
    # The largest and smallest value over the ranks equal this rank's at
    # every element: the bits agree (no NaN in the compared results).
    hi, lo = td.all_reduce(got, "max"), td.all_reduce(got, "min")
    assert np.array_equal(hi, got) and np.array_equal(lo, got), f"{what}: ranks differ"


cases = [(np.float32, 40_001), (np.float32, 262_147), (np.float64, 16_384), (np.float64, 100_003),
         (np.int64, 20_011), (np.float32, 1_300_003)]
for dtype, count in cases:
    xs = [data(k, dtype, count, 1) for k in range(n)]
    for op in ("sum", "mean", "max", "min"):
        got = td.all_reduce(xs[r], op)
        stacked = np.stack(xs)
        want = {"sum": stacked.sum(axis=0), "mean": stacked.mean(axis=0), "max": stacked.max(axis=0),
                "min": stacked.min(axis=0)}[op]
        what = f"{op} {np.dtype(dtype).name} x {count}"
        if dtype == np.int64 and op != "mean":
            assert got.dtype == np.int64 and np.array_equal(got, want), what
        else:
            tol = 1e-5 if dtype == np.float32 else 1e-12
            assert np.allclose(got, want, rtol=tol, atol=tol), (what, np.abs(got - want).max())
        same_everywhere(got, what)
        again = td.all_reduce(xs[r], op)
        assert np.array_equal(again, got), f"{what}: a repeated call differs"

# NaN anywhere wins in max and min.
x = data(r, np.float64, 50_000, 2)
if n > 1 and r == 1:
    x[123] = np.nan
for op in ("max", "min"):
    got = td.all_reduce(x, op)
    assert np.isnan(got[123]) == (n > 1), op
    assert not np.isnan(np.delete(got, 123)).any(), op

# Four 60 KiB all-reduces in flight at once: coalesced into one 240 KiB ring.
parts = [data(r, np.float64, 7_680, 10 + k) for k in range(4)]
prog = tessera.Program("define(f, a, b, c, d, block(define(ra, all_reduce(a)), define(rb, all_reduce(b)),\n"
                       "  define(rc, all_reduce(c)), define(rd, all_reduce(d)), list(ra, rb, rc, rd))) f",
                       "ring.tsl")
got = prog.run(parts)
for k in range(4):
    want = sum(data(q, np.float64, 7_680, 10 + k) for q in range(n))
    assert np.allclose(got[k], want, rtol=1e-12, atol=1e-12), k
# Rings in flight together (each above the coalescing limit: a ring of its
# own, told apart by its tag), beside operations of every other path: inline
# (small), coalesced (two of 40 KiB), and MPI_Iallreduce (5 MiB).
sizes = [25_000, 30_001, 26_000, 27_500, 100, 5_120, 5_120, 655_360, 33_333, 29_000]
arrays = [data(r, np.float64, c, 20 + k) for k, c in enumerate(sizes)]
names = [f"a{k}" for k in range(len(sizes))]
text = ("define(f, " + ", ".join(names) + ", block("
        + ", ".join(f"define(r{k}, all_reduce({a}))" for k, a in enumerate(names))
        + ", list(" + ", ".join(f"r{k}" for k in range(len(sizes))) + "))) f")
for rep in range(3):
    got = tessera.Program(text, "rings.tsl").run(arrays)
    for k, c in enumerate(sizes):
        want = sum(data(q, np.float64, c, 20 + k) for q in range(n))
        assert np.allclose(got[k], want, rtol=1e-12, atol=1e-12), (rep, k, c)
print("ok")
