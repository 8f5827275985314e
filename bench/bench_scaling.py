"""All-reduce cost as the number of ranks N grows: counted, timed and extrapolated.

For N = 2, 4, 8, 16, 32 ranks on this machine (oversubscribed, 1 thread each), per
all-reduce size (8 B, 4 KiB, 128 KiB, 4 MiB of float32):

  - the messages and bytes each rank sends for one all-reduce, counted by the PMPI
    counter preloaded into every rank (bench/pmpi/pmpi_count.cpp, build/bench/
    libpmpi_count.so): the most any rank sends, and of that what goes on tessera's
    data communicator (the algorithm; the rest is the agreement round). Counts do
    not depend on the machine;
  - tessera's time (the engine's all-reduce) next to MPI_Allreduce at the same N,
    in the same processes (build/bench/bench_allreduce --scaling: medians of single
    calls, interleaved). On 2 cores with N ranks these are times of an
    oversubscribed machine, comparable only with each other;
  - the α-β-γ model (α = 3 µs per message, β = 12.5 GB/s, γ = 0.2 ns per byte
    reduced) of the algorithm the engine chooses (algorithms.hpp, mirrored here)
    against the ring every all-reduce of 128 KiB and more used before (below 128 KiB
    MPI_Iallreduce until the engine took them too),
    extrapolated to 1,000 and 10,000 ranks.

--baseline ALGORITHM runs every N a second time with TESSERA_ALLREDUCE=ALGORITHM
(e.g. ring: the engine before the algorithms were chosen by N and size) and prints
its counts beside.

run: .venv/bin/python bench/bench_scaling.py [--build build] [--ns 2,4,8,16,32]
         [--sizes 8,4096,131072,4194304] [--repeats 5] [--baseline ring] [--json out.json]
"""

import argparse
import json
import math
import os
import sys

import pmpi_count
from machine import machine_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The model and the choice of tessera/distributed/algorithms.hpp.
ALPHA, BETA, GAMMA = 3e-6, 12.5e9, 1 / 5e9
WIDE_MIN_BYTES = 128 << 10  # the ring and the hierarchical one from here (kWideMinBytes)
DOUBLING_MAX_BYTES = 64 << 10  # doubling up to here, whatever the model (kDoublingMaxBytes)
INLINE_BUDGET = 64 << 10  # engine.hpp: kInlineBudget, halved per exchange after the first
RING_CHUNK_MIN_BYTES = 1 << 20


def floor_pow2(n):
    return 1 << (n.bit_length() - 1)


def model_seconds(algorithm, n, nbytes):
    """The α-β-γ time of an all-reduce of nbytes among n ranks (the longest path)."""
    if n <= 1:
        return 0.0
    p2 = floor_pow2(n)
    steps = math.log2(p2)
    fold = 2 * (ALPHA + nbytes / BETA) + nbytes * GAMMA if n > p2 else 0.0
    if algorithm == "ring":
        return 2 * (n - 1) * (ALPHA + nbytes / n / BETA) + (n - 1) / n * nbytes * GAMMA
    if algorithm == "halving":
        return (2 * steps * ALPHA + 2 * (p2 - 1) / p2 * nbytes / BETA
                + (p2 - 1) / p2 * nbytes * GAMMA + fold)
    if algorithm == "doubling":
        return steps * (ALPHA + nbytes / BETA + nbytes * GAMMA) + fold
    return min(model_seconds("halving", n, nbytes), model_seconds("doubling", n, nbytes))


def model_messages(algorithm, n):
    """The most messages one rank sends, a cached agreement round included: halving's and
    doubling's first steps ride in the round's messages; a rank standing in for a folded one
    of a non-power of two sends the round's answer and then the result back (two more). The
    ring pays the round's ceil(log2 n) messages on top."""
    p2 = floor_pow2(n)
    steps = int(math.log2(p2))
    fold = 2 if n > p2 else 0
    if algorithm == "ring":
        return 2 * (n - 1) + math.ceil(math.log2(n))
    if algorithm == "halving":
        return 2 * steps + fold
    if algorithm == "doubling":
        return steps + fold
    return steps


def inline_budget(n):
    """Bytes an all-reduce may have to travel inline in the agreement round (engine.hpp)."""
    b, reach = INLINE_BUDGET, 2
    while reach < n:
        b //= 2
        reach *= 2
    return b


def choose(n, nbytes, inline=False):
    """TESSERA_ALLREDUCE=auto's choice (algorithms.hpp: choose_algorithm); with inline, "inline"
    for a lone all-reduce that travels in the agreement round."""
    if inline and nbytes <= inline_budget(n):
        return "inline"
    if nbytes >= WIDE_MIN_BYTES and (n == 2 or nbytes // n >= RING_CHUNK_MIN_BYTES):
        return "ring"
    if nbytes // 4 < floor_pow2(n) or nbytes <= DOUBLING_MAX_BYTES:
        return "doubling"
    if model_seconds("doubling", n, nbytes) < model_seconds("halving", n, nbytes):
        return "doubling"
    return "halving"


def run_n(build, n, sizes, repeats, algorithm):
    """One mpirun of bench_allreduce --scaling with the counter preloaded: per size, the
    counts of one all-reduce (the most any rank sends) and the times (rank 0's JSON)."""
    exe = os.path.join(build, "bench", "bench_allreduce")
    cmd = [exe, "--scaling", ",".join(map(str, sizes)), "--repeats", str(repeats)]
    try:
        out, ranks = pmpi_count.run(n, cmd, build=build, env={
            "TESSERA_THREADS": "1", "TESSERA_ALLREDUCE": algorithm})
    except RuntimeError as e:
        sys.exit(f"bench_scaling: {e}")
    timing = next(json.loads(line) for line in reversed(out.splitlines())
                  if line.startswith("{"))
    rows = []
    for t in timing["allreduce"]:
        segs = pmpi_count.segment(ranks, f"engine {t['bytes']}")
        data = [pmpi_count.on_comm(s, "tessera.data") for s in segs]
        rows.append({
            "n": n, "bytes": t["bytes"], "algorithm": algorithm if algorithm != "auto"
            else choose(n, t["bytes"], inline=True),
            "msgs": max(s["msgs"] for s in segs), "bytes_sent": max(s["bytes"] for s in segs),
            "data_msgs": max(d["msgs"] for d in data), "data_bytes": max(d["bytes"] for d in data),
            "engine_s": t["engine_s"], "mpi_s": t["mpi_s"]})
    return rows


def size_name(b):
    if b >= 1 << 20:
        return f"{b >> 20} MiB"
    if b >= 1 << 10:
        return f"{b >> 10} KiB"
    return f"{b} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ns", default="2,4,8,16,32")
    ap.add_argument("--sizes", default="8,4096,131072,4194304")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", default="", help="also run with TESSERA_ALLREDUCE=this")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    try:
        ns = [int(v) for v in args.ns.split(",")]
        sizes = [int(v) for v in args.sizes.split(",")]
    except ValueError:
        sys.exit(f"bench_scaling: --ns and --sizes take integers separated by commas, got "
                 f"'{args.ns}' and '{args.sizes}'")
    if any(n < 2 for n in ns) or any(b < 4 or b % 4 for b in sizes) or args.repeats < 1:
        sys.exit(f"bench_scaling: ranks >= 2, sizes multiples of 4 bytes, --repeats >= 1: got "
                 f"--ns {args.ns} --sizes {args.sizes} --repeats {args.repeats}")
    for path in ("bench/bench_allreduce", "bench/libpmpi_count.so"):
        if not os.path.exists(os.path.join(args.build, path)):
            sys.exit(f"bench_scaling: {os.path.join(args.build, path)} is missing (make build)")

    print(machine_line())
    print(f"ranks: N on this machine (oversubscribed), 1 thread each; times: medians of "
          f"{args.repeats} single calls; messages and bytes: the most any rank sends for one "
          f"all-reduce (data: on tessera's data communicator; the rest goes on the agreement "
          f"round's, whose cached messages also carry halving's and doubling's reduce-scatter)")
    results = {"machine": machine_line(), "repeats": args.repeats, "rows": [], "baseline": [],
               "model": []}
    for n in ns:
        results["rows"] += run_n(args.build, n, sizes, args.repeats, "auto")
        if args.baseline:
            results["baseline"] += run_n(args.build, n, sizes, args.repeats, args.baseline)

    base = {(r["n"], r["bytes"]): r for r in results["baseline"]}
    head = (f"{'N':>4} {'size':>8} {'algorithm':>9} {'msgs':>5} {'data':>5} {'bytes/rank':>11} "
            f"{'tessera ms':>10} {'MPI ms':>8} {'ratio':>6}")
    if base:
        head += f"  {args.baseline + ' msgs':>11} {'bytes/rank':>11} {'ms':>8}"
    print()
    print(head)
    for r in results["rows"]:
        line = (f"{r['n']:>4} {size_name(r['bytes']):>8} {r['algorithm']:>9} {r['msgs']:>5} "
                f"{r['data_msgs']:>5} {r['bytes_sent']:>11} {r['engine_s'] * 1e3:>10.3f} "
                f"{r['mpi_s'] * 1e3:>8.3f} "
                f"{(r['engine_s'] / r['mpi_s'] if r['mpi_s'] > 0 else 0):>6.2f}")
        b = base.get((r["n"], r["bytes"]))
        if b:
            line += f"  {b['msgs']:>11} {b['bytes_sent']:>11} {b['engine_s'] * 1e3:>8.3f}"
        print(line)

    print()
    print(f"α-β-γ model (α = {ALPHA * 1e6:.0f} µs per message, β = {BETA / 1e9:.1f} GB/s, "
          f"γ = {GAMMA * 1e9:.1f} ns per byte reduced) of the data exchange; messages: the whole "
          f"all-reduce, its cached agreement round included:")
    print(f"{'N':>6} {'size':>8} {'algorithm':>9} {'msgs':>5} {'model ms':>9}   "
          f"{'ring msgs':>9} {'ring ms':>9}")
    for n in (1000, 10000):
        for b in sizes:
            a = shown = choose(n, b)
            m = {"n": n, "bytes": b, "algorithm": a, "msgs": model_messages(a, n),
                 "model_s": model_seconds(a, n, b), "ring_msgs": model_messages("ring", n),
                 "ring_s": model_seconds("ring", n, b)}
            results["model"].append(m)
            print(f"{n:>6} {size_name(b):>8} {shown:>9} {m['msgs']:>5} "
                  f"{m['model_s'] * 1e3:>9.3f}   {m['ring_msgs']:>9} {m['ring_s'] * 1e3:>9.3f}")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(results, fh, indent=1)
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
