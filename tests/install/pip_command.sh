#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment gives the `tessera` command,
# and it works from a folder outside the checkout: `tessera ops`, `tessera eval
# FILE.tsl`, `tessera run -n 2 SCRIPT.py` (every rank runs that environment's
# Python and imports the installed tessera, not the checkout's) and `tessera
# report DIR`. It builds the wheel (1 to 2 minutes on 2 cores after `make build`):
# part of `make test`; alone, `make test-install` (docs/distributed.md, "After
# pip install .").
#
# usage: pip_command.sh SOURCE_DIR [WHEEL_BUILD_DIR]
# WHEEL_BUILD_DIR (default SOURCE_DIR/build-wheel) is emptied and used as
# scikit-build-core's build folder: a folder beside build/ makes the
# compiler's command lines the same as `make`'s, so ccache (base_dir) serves
# the objects of that build, when CXX names the compiler that build used
# (ctest sets it). PYTHON3 names the interpreter the environment is made from
# (default python3).
set -uo pipefail

src="$(cd "$1" && pwd)"
wheel_build="${2:-$src/build-wheel}"
python3="${PYTHON3:-python3}"
work="$(mktemp -d /tmp/tessera-pip-command.XXXXXX)"
# Two compile jobs (the machine's cores, as `make`), unless the caller says otherwise.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# Runs a command, keeping its combined output in $work/out; shows it.
run() {
  "$@" >"$work/out" 2>&1
  local status=$?
  cat "$work/out"
  return $status
}

start=$(date +%s)
venv="$work/venv"
"$python3" -m venv "$venv" || fail "cannot make a virtual environment with $python3 -m venv"
rm -rf "$wheel_build"
# Nothing of this environment may point at the checkout or at another Python.
clean_env=(env -u PYTHONPATH -u PYTHONHOME -u TESSERA_PYTHON -u VIRTUAL_ENV)
echo "== $venv/bin/pip install $src"
if ! "${clean_env[@]}" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --config-settings=build-dir="$wheel_build" "$src" >"$work/pip.log" 2>&1; then
  tail -n 60 "$work/pip.log"
  fail "pip install $src failed"
fi
installed=$(($(date +%s) - start))
echo "installed in ${installed}s"

# The commands run in a folder outside the checkout, with the environment's
# bin/ first on PATH, and not activated.
mkdir -p "$work/job"
cd "$work/job" || fail "cannot enter $work/job"
export PATH="$venv/bin:$PATH"
unset PYTHONPATH PYTHONHOME TESSERA_PYTHON VIRTUAL_ENV
[ "$(command -v tessera)" = "$venv/bin/tessera" ] ||
  fail "tessera on PATH is '$(command -v tessera)', not $venv/bin/tessera"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')"
[ -x "$site/tessera/bin/tessera" ] || fail "no program $site/tessera/bin/tessera"
# The program and the extension load the installed libtessera, not a build's.
for binary in "$site/tessera/bin/tessera" "$site"/tessera/_core*.so; do
  lib="$(ldd "$binary" | awk '$1 == "libtessera.so" {print $3}')"
  [ "$lib" -ef "$site/tessera/libtessera.so" ] ||
    fail "$binary loads libtessera.so from '$lib', not from $site/tessera"
done

echo "== tessera ops"
run tessera ops >/dev/null || fail "tessera ops exited with status $?"
grep -Eq '^[0-9]+ primitives\. `tessera ops NAME` shows one\.$' "$work/out" ||
  fail "tessera ops: no closing line 'N primitives. ...'"
grep -Eq '^  matmul\(' "$work/out" || fail "tessera ops: matmul is not listed"
run tessera ops matmul || fail "tessera ops matmul exited with status $?"
grep -q 'family: ' "$work/out" || fail "tessera ops matmul: no family line"

echo "== tessera eval prog.tsl 5"
cat >prog.tsl <<'EOF'
define(m, [[1, 2], [3, 4]])
lambda(k, sum(m @ m) + k)
EOF
run tessera eval prog.tsl 5 || fail "tessera eval exited with status $?"
[ "$(cat "$work/out")" = "59" ] ||
  fail "tessera eval prog.tsl 5 printed '$(cat "$work/out")', not 59"

echo "== tessera run -n 2 --trace trace job.py"
cat >job.py <<'EOF'
import os
import sys

import numpy as np

import tessera
import tessera.distributed as td


@tessera.jit
def scaled(x, f):
    return (x * f).sum()


r, n = td.rank(), td.size()
total = td.all_reduce(np.array([scaled(np.arange(4.0), r + 1.0)]))
print(f"rank={r} size={n} total={float(total[0]):g}")
print(f"python={sys.executable}")
print(f"tessera={os.path.dirname(os.path.abspath(tessera.__file__))}")
EOF
run tessera run -n 2 --trace trace job.py || fail "tessera run exited with status $?"
# 0+1+2+3 = 6 times 1 and times 2: 18 on both ranks.
for r in 0 1; do
  grep -qx "\[rank $r\] rank=$r size=2 total=18" "$work/out" ||
    fail "rank $r: no 'rank=$r size=2 total=18'"
  grep -qx "\[rank $r\] python=$venv/bin/python" "$work/out" ||
    fail "rank $r did not run the environment's Python $venv/bin/python"
  grep -qx "\[rank $r\] tessera=$site/tessera" "$work/out" ||
    fail "rank $r did not import the installed tessera from $site/tessera"
done

echo "== tessera report trace"
run tessera report trace || fail "tessera report exited with status $?"
grep -q "2 of 2 localities" "$work/out" || fail "tessera report: not '2 of 2 localities'"
for r in 0 1; do grep -q "locality $r: " "$work/out" || fail "tessera report: no locality $r"; done
for f in report.html trace.json tree.dot counters.csv; do
  [ -s "trace/$f" ] || fail "tessera report wrote no trace/$f"
done

echo "== TESSERA_PYTHON=their-python tessera run -n 2 job.py"
# A TESSERA_PYTHON the user sets wins over the installing interpreter.
cat >their-python <<EOF
#!/bin/sh
echo chosen >>"$work/job/chosen"
exec "$venv/bin/python" "\$@"
EOF
chmod +x their-python
run env TESSERA_PYTHON="$work/job/their-python" tessera run -n 2 job.py ||
  fail "tessera run with TESSERA_PYTHON exited with status $?"
[ "$(grep -c chosen chosen 2>/dev/null)" = 2 ] || fail "the ranks did not run TESSERA_PYTHON"

echo "PASS: installed in ${installed}s, everything in $(($(date +%s) - start))s"
