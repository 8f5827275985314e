#!/bin/sh
# The PMPI counter's file counts (bench/pmpi/pmpi_count.cpp): 2 ranks each
# read both ranks' 100,000-byte parts (pmpi_read_all.py, docs/scaling.md's
# example); every rank must count exactly 2 opens and 200,000 bytes read under
# PMPI_COUNT_PATH, and nothing of the files it opened outside it.
# usage: pmpi_count_files.sh PYTHON MPIRUN LIBPMPI_COUNT
python="$1"; mpirun="$2"; lib="$3"
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
mkdir "$out/parts"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "$mpirun" -n 2 --oversubscribe --bind-to none -x LD_PRELOAD="$lib" \
  -x PMPI_COUNT_OUT="$out/counts.jsonl" -x PMPI_COUNT_PATH="$out/parts" \
  "$python" "$here/pmpi_read_all.py" || { echo "FAIL: the program failed"; exit 1; }
"$python" - "$out/counts.jsonl" <<'PY' || exit 1
import json
import sys

lines = [json.loads(line) for line in open(sys.argv[1])]
assert sorted(d["rank"] for d in lines) == [0, 1], f"FAIL: lines {lines}"
for d in lines:
    seg = next(s for s in d["segments"] if s["label"] == "read every part")
    got = (seg["file_opens"], seg["read_bytes"])
    print(f"rank {d['rank']}: {got[0]} opens, {got[1]} bytes read in {seg['read_calls']} calls")
    assert got == (2, 200_000), f"FAIL: rank {d['rank']} counted {got}, expected (2, 200000)"
PY
echo "PASS"
