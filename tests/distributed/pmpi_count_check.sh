#!/bin/sh
# The PMPI counter (bench/pmpi/pmpi_count.cpp) on one 4 MiB all-reduce at N
# ranks (bench_allreduce --scaling): every rank's messages and bytes, on any
# communicator (the agreement round's included), must be the exact count
# given (counts do not depend on the machine). Recursive halving at N = 8
# (auto) after a cached agreement: 2 log2 N messages in all, 2 (N - 1) / N of
# the data plus the 40 bytes of the agreement on each of the first log2 N,
# which carry the reduce-scatter (docs/scaling.md).
# MSGS and BYTES: one count for every rank, or one per rank separated by
# commas (a non-power-of-two N: the fold's ranks send more or less).
# HOST_RANKS: hosts of that many consecutive ranks simulated (TESSERA_HOST_RANKS).
# usage: pmpi_count_check.sh PYTHON MPIRUN BENCH_ALLREDUCE LIBPMPI_COUNT N MSGS BYTES [ALGORITHM [HOST_RANKS]]
python="$1"; mpirun="$2"; bench="$3"; lib="$4"; n="$5"; msgs="$6"; bytes="$7"; algorithm="${8:-auto}"
hosts=""
if [ -n "$9" ]; then TESSERA_HOST_RANKS="$9"; export TESSERA_HOST_RANKS; hosts="-x TESSERA_HOST_RANKS"; fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TESSERA_THREADS=1 \
  TESSERA_ALLREDUCE="$algorithm" \
  "$mpirun" -n "$n" --oversubscribe --bind-to none -x TESSERA_THREADS -x TESSERA_ALLREDUCE $hosts \
  -x LD_PRELOAD="$lib" -x PMPI_COUNT_OUT="$out/counts.jsonl" \
  "$bench" --scaling 4194304 --repeats 1 >"$out/bench.txt" 2>&1
status=$?
cat "$out/bench.txt"
if [ "$status" -ne 0 ]; then echo "FAIL: bench_allreduce exited with $status"; exit 1; fi
"$python" - "$out/counts.jsonl" "$n" "$msgs" "$bytes" <<'PY'
import json
import sys

path, n = sys.argv[1], int(sys.argv[2])
want_msgs = [int(v) for v in sys.argv[3].split(",")]
want_bytes = [int(v) for v in sys.argv[4].split(",")]
want_msgs = want_msgs * n if len(want_msgs) == 1 else want_msgs
want_bytes = want_bytes * n if len(want_bytes) == 1 else want_bytes
assert len(want_msgs) == n and len(want_bytes) == n, "FAIL: MSGS and BYTES need 1 or N values"
lines = [json.loads(line) for line in open(path)]
assert sorted(d["rank"] for d in lines) == list(range(n)), f"FAIL: lines of ranks {[d['rank'] for d in lines]}"
bad = 0
for d in sorted(lines, key=lambda d: d["rank"]):
    seg = [s for s in d["segments"] if s["label"] == "engine 4194304"]
    assert len(seg) == 1, f"FAIL: rank {d['rank']} has no segment 'engine 4194304'"
    total = (seg[0]["msgs"], seg[0]["bytes"])
    data = seg[0]["by_comm"].get("tessera.data", {"msgs": 0, "bytes": 0})
    print(f"rank {d['rank']}: {total[0]} messages, {total[1]} bytes in all; "
          f"{data['msgs']} of them on tessera.data ({data['bytes']} bytes)")
    msgs, bytes_ = want_msgs[d["rank"]], want_bytes[d["rank"]]
    if total != (msgs, bytes_):
        print(f"FAIL: rank {d['rank']} sent {total[0]} messages of {total[1]} bytes, "
              f"expected {msgs} of {bytes_}")
        bad = 1
sys.exit(bad)
PY
if [ $? -ne 0 ]; then exit 1; fi
echo "PASS"
