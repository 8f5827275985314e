# The cached agreement's cost, counted by the PMPI counter (bench/pmpi_count.py): once a loop of
# 8-byte all-reduces (an int64 sum, a float64 max, a float64 sum) has been agreed, each takes one
# all-reduce of the 40-byte fingerprint that also carries the value (the engine's recursive
# doubling: a float sum in the same fixed order as the full round's): ceil(log2 N) messages of 40
# bytes per rank on tessera.agree and nothing else, whatever N (the full exchange sent
# 64 (N - 1) bytes: 192 at N = 4, 448 at N = 8). The float64 sum is checked bitwise against
# that order computed here. Run as `python cached_agreement_count.py BUILD_DIR [N,N,...]` (it launches
# itself on 4 and 8 ranks unless told); prints "ok".
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import pmpi_count  # noqa: E402

KINDS = ("int64 sum", "float64 max", "float64 sum")

if os.environ.get("CACHED_COUNT_CHILD"):
    import numpy as np

    import tessera.distributed as dist

    def doubling_order(xs):
        # The fixed order of inline float sums (docs/distributed.md).
        p = 1
        while p * 2 <= len(xs):
            p *= 2
        f = len(xs) - p
        v = [xs[2 * i] + xs[2 * i + 1] if i < f else xs[i + f] for i in range(p)]
        while len(v) > 1:
            v = [v[i] + v[i + 1] for i in range(0, len(v), 2)]
        return v[0]

    def term(k, step):
        # Sums of these depend on the order of the additions.
        return np.float64(0.1 * (k + 1) + 1e-3 * step) * 10.0 ** (k % 5 - 2)

    r = dist.rank()
    for kind in KINDS:
        def call(step):
            if kind == "int64 sum":
                return dist.all_reduce(np.array([r + step], dtype=np.int64))
            if kind == "float64 sum":
                return dist.all_reduce(np.array([term(r, step)]))
            return dist.all_reduce(np.array([r + step + 0.5]), op="max")
        for step in range(10):
            call(step)
        pmpi_count.reset()
        got = call(10)
        pmpi_count.mark(kind)
        n = dist.size()
        want = (sum(k + 10 for k in range(n)) if kind == "int64 sum"
                else doubling_order([term(k, 10) for k in range(n)]) if kind == "float64 sum"
                else n - 1 + 10.5)
        assert got.tolist() == [want], (kind, got, want)
    sys.exit(0)

build = sys.argv[1] if len(sys.argv) > 1 else "build"
sizes = [int(v) for v in sys.argv[2].split(",")] if len(sys.argv) > 2 else [4, 8]
bad = []
for n in sizes:
    _, ranks = pmpi_count.run(n, [sys.executable, os.path.abspath(__file__)], build=build,
                              env={"CACHED_COUNT_CHILD": "1", "TESSERA_THREADS": "1",
                                   # (=0: the full exchange, to see this test fail)
                                   "TESSERA_AGREE_CACHE": os.environ.get("TESSERA_AGREE_CACHE",
                                                                         "1")},
                              timeout=300)
    rounds = math.ceil(math.log2(n))
    for kind in KINDS:
        for r, seg in enumerate(pmpi_count.segment(ranks, kind)):
            agree = pmpi_count.on_comm(seg, "tessera.agree")
            print(f"N = {n}, {kind}, rank {r}: {seg['msgs']} messages, {seg['bytes']} bytes "
                  f"({agree['msgs']} and {agree['bytes']} on tessera.agree)")
            expected = (rounds, 40 * rounds)
            if (seg["msgs"], seg["bytes"]) != expected or agree["bytes"] != seg["bytes"]:
                bad.append(f"N = {n}, {kind}, rank {r}: {seg['msgs']} messages of {seg['bytes']} "
                           f"bytes, expected {rounds} of {40 * rounds} on tessera.agree")
if bad:
    print("FAIL:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("ok")
