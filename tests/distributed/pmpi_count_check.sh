#!/bin/sh
# The PMPI counter (bench/pmpi/pmpi_count.cpp) on one 4 MiB all-reduce at N
# ranks (bench_allreduce --scaling): every rank's data messages and bytes on
# tessera's data communicator must be the algorithm's exact count (counts do
# not depend on the machine): recursive halving at N = 8 (auto), 2 log2 N
# messages of 2 (N - 1) / N of the data in total.
# usage: pmpi_count_check.sh PYTHON MPIRUN BENCH_ALLREDUCE LIBPMPI_COUNT N MSGS BYTES [ALGORITHM]
python="$1"; mpirun="$2"; bench="$3"; lib="$4"; n="$5"; msgs="$6"; bytes="$7"; algorithm="${8:-auto}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TESSERA_THREADS=1 \
  TESSERA_ALLREDUCE="$algorithm" \
  "$mpirun" -n "$n" --oversubscribe --bind-to none -x TESSERA_THREADS -x TESSERA_ALLREDUCE \
  -x LD_PRELOAD="$lib" -x PMPI_COUNT_OUT="$out/counts.jsonl" \
  "$bench" --scaling 4194304 --repeats 1 >"$out/bench.txt" 2>&1
status=$?
cat "$out/bench.txt"
if [ "$status" -ne 0 ]; then echo "FAIL: bench_allreduce exited with $status"; exit 1; fi
"$python" - "$out/counts.jsonl" "$n" "$msgs" "$bytes" <<'PY'
import json
import sys

path, n, msgs, bytes_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lines = [json.loads(line) for line in open(path)]
assert sorted(d["rank"] for d in lines) == list(range(n)), f"FAIL: lines of ranks {[d['rank'] for d in lines]}"
bad = 0
for d in sorted(lines, key=lambda d: d["rank"]):
    seg = [s for s in d["segments"] if s["label"] == "engine 4194304"]
    assert len(seg) == 1, f"FAIL: rank {d['rank']} has no segment 'engine 4194304'"
    data = seg[0]["by_comm"].get("tessera.data", {"msgs": 0, "bytes": 0})
    rest = seg[0]["msgs"] - data["msgs"]
    print(f"rank {d['rank']}: {data['msgs']} data messages, {data['bytes']} bytes; "
          f"{rest} other messages (the agreement round)")
    if (data["msgs"], data["bytes"]) != (msgs, bytes_):
        print(f"FAIL: rank {d['rank']} sent {data['msgs']} messages of {data['bytes']} bytes on "
              f"tessera.data, expected {msgs} of {bytes_}")
        bad = 1
sys.exit(bad)
PY
if [ $? -ne 0 ]; then exit 1; fi
echo "PASS"
