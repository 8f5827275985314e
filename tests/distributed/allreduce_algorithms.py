# The engine's all-reduce algorithms over MPI (algorithms.hpp, ring.cpp):
# `allreduce_algorithms.py ALGORITHM` runs with TESSERA_ALLREDUCE=ALGORITHM
# (auto, ring, halving, doubling, or hierarchical with hosts of 2 ranks
# simulated by TESSERA_HOST_RANKS=2; auto-hosts: auto with such hosts, which
# chooses hierarchical; set before the engine starts, the same on every
# rank). Sums, means, maxima and minima of float32, float64 and int64
# against NumPy over every rank's data, at sizes around every switch point
# (just above the inline budget, around 128 KiB where auto leaves
# MPI_Iallreduce, around N MiB where auto takes the ring), with element
# counts that do not divide by the number of ranks; every rank gets the same
# bits and a repeated call the same bits; small all-reduces coalesced into
# one; on the groups of a mesh when there are 6 ranks (groups of 2 and 3).
# ALGORITHM "mixed" sets ring on rank 0 and halving on the others, which the
# start-up check refuses; "bad-hosts" sets TESSERA_HOST_RANKS=0. Prints "ok".
import os
import sys

ALGORITHM = sys.argv[1] if len(sys.argv) > 1 else "auto"
if ALGORITHM == "mixed":
    # Ranks that disagree on the setting: refused at start-up, naming it.
    ALGORITHM = "ring" if os.environ.get("OMPI_COMM_WORLD_RANK") == "0" else "halving"
os.environ["TESSERA_ALLREDUCE"] = ALGORITHM
if ALGORITHM == "hierarchical":
    # Hosts of 2 consecutive ranks simulated on this machine.
    os.environ["TESSERA_HOST_RANKS"] = "2"
if ALGORITHM == "auto-hosts":
    # auto with hosts of 2 simulated ranks: the hierarchical algorithm, chosen.
    os.environ["TESSERA_ALLREDUCE"] = "auto"
    os.environ["TESSERA_HOST_RANKS"] = "2"
if ALGORITHM == "bad-hosts":
    # A simulated host size that is not a positive integer: a ValueError naming it.
    os.environ["TESSERA_ALLREDUCE"] = "hierarchical"
    os.environ["TESSERA_HOST_RANKS"] = "0"

import numpy as np  # noqa: E402

import tessera  # noqa: E402
import tessera.distributed as td  # noqa: E402

R, N = td.rank(), td.size()


def data(rank, dtype, count, salt):
    rng = np.random.default_rng(1000 * rank + 7 * count + salt)
    if dtype == np.int64:
        return rng.integers(-1000, 1000, size=count, dtype=np.int64)
    # Magnitudes over six decades: float sums depend on the order of addition.
    return (rng.normal(size=count) * 10.0 ** rng.integers(-3, 3, size=count)).astype(dtype)


def inline_budget(n):
    b, reach = 64 << 10, 2
    while reach < n:
        b //= 2
        reach *= 2
    return b


def check(x_of, dtype, count, ops, members, group, what):
    me = members.index(R)
    xs = [x_of(q) for q in members]
    stacked = np.stack(xs)
    for op in ops:
        got = td.all_reduce(xs[me], op, group=group)
        want = {"sum": stacked.sum(axis=0), "mean": stacked.mean(axis=0),
                "max": stacked.max(axis=0), "min": stacked.min(axis=0)}[op]
        label = f"{what}: {op} {np.dtype(dtype).name} x {count}"
        if dtype == np.int64 and op != "mean":
            assert got.dtype == np.int64 and np.array_equal(got, want), label
        else:
            tol = 1e-4 if dtype == np.float32 else 1e-11
            assert np.allclose(got, want, rtol=tol, atol=tol), (label, np.abs(got - want).max())
        # The largest and smallest over the ranks equal this rank's: the bits agree.
        hi, lo = td.all_reduce(got, "max", group=group), td.all_reduce(got, "min", group=group)
        assert np.array_equal(hi, got) and np.array_equal(lo, got), f"{label}: ranks differ"
        again = td.all_reduce(xs[me], op, group=group)
        assert np.array_equal(again, got), f"{label}: a repeated call differs"


def run_cases(members, group, what):
    n = len(members)
    own = 128 << 10
    for dtype in (np.float32, np.float64, np.int64):
        w = np.dtype(dtype).itemsize
        counts = [inline_budget(n) // w + 1, own // w - 1, own // w, own // w + 1, 40_001]
        for count in counts:
            check(lambda q, d=dtype, c=count: data(q, d, c, 1), dtype, count,
                  ("sum", "mean", "max", "min"), members, group, what)
    # Around the ring's switch (auto: each of the n chunks 1 MiB).
    for count in ((n << 20) // 4 - 1, (n << 20) // 4):
        check(lambda q, c=count: data(q, np.float32, c, 2), np.float32, count, ("sum", "max"),
              members, group, what)
    # NaN anywhere wins in max and min.
    me = members.index(R)
    x = data(R, np.float64, 50_000, 3)
    if me == n - 1:
        x[123] = np.nan
    for op in ("max", "min"):
        got = td.all_reduce(x, op, group=group)
        assert np.isnan(got[123]), (what, op)
        assert not np.isnan(np.delete(got, 123)).any(), (what, op)


run_cases(list(range(N)), None, "world")

# Four 60 KiB all-reduces in flight at once: coalesced into one of 240 KiB.
parts = [data(R, np.float64, 7_680, 10 + k) for k in range(4)]
prog = tessera.Program(
    "define(f, a, b, c, d, block(define(ra, all_reduce(a)), define(rb, all_reduce(b)),\n"
    "  define(rc, all_reduce(c)), define(rd, all_reduce(d)), list(ra, rb, rc, rd))) f",
    "coalesced.tsl")
got = prog.run(parts)
for k in range(4):
    want = sum(data(q, np.float64, 7_680, 10 + k) for q in range(N))
    assert np.allclose(got[k], want, rtol=1e-11, atol=1e-11), k

# Bool arrays are refused with the operation named.
try:
    td.all_reduce(np.ones(200_000, dtype=bool))
    raise AssertionError("no error for a bool array")
except TypeError as e:
    assert "all_reduce" in str(e), e

if N == 6:
    mesh = td.Mesh(data=2, tensor=3)
    for axis in ("tensor", "data"):
        g = mesh.group(axis)
        run_cases(list(g.members), g, f"group {axis}")
print("ok")
