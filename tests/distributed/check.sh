#!/bin/sh
# Runs a program under `tessera run` and checks its exit status, its output
# and its duration.
# usage: check.sh TESSERA N PROGRAM ok|fail PATTERN MAX_SECONDS [PROGRAM_ARGS...]
# PATTERN is an extended regular expression that must match a line of the
# combined output. CHECK_RUN_OPTIONS, when set, holds more options for
# `tessera run` (e.g. "--mesh data=2,tensor=2"), put before the program.
tessera="$1"; n="$2"; program="$3"; expect="$4"; pattern="$5"; max_seconds="$6"
shift 6
out="$(mktemp)"
# Each run's own TMPDIR: Open MPI keeps its session folders in /tmp/ompi.<host>.<uid>, and
# ctest's parallel runs raced on it (one mpirun removing the folder as another made its
# own in it: "mpirun: A call to mkdir was unable to create the desired directory").
run_tmp="$(mktemp -d)"
trap 'rm -f "$out"; rm -rf "$run_tmp"' EXIT
start=$(date +%s)
# shellcheck disable=SC2086 # CHECK_RUN_OPTIONS is split into options on purpose
TMPDIR="$run_tmp" "$tessera" run -n "$n" ${CHECK_RUN_OPTIONS:-} "$program" "$@" >"$out" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
echo "--- status $status after ${elapsed}s"
if [ "$expect" = ok ] && [ "$status" -ne 0 ]; then echo "FAIL: expected success"; exit 1; fi
if [ "$expect" = fail ] && [ "$status" -eq 0 ]; then echo "FAIL: expected a failure"; exit 1; fi
if ! grep -Eq -- "$pattern" "$out"; then echo "FAIL: no line matches: $pattern"; exit 1; fi
if [ "$elapsed" -gt "$max_seconds" ]; then echo "FAIL: took ${elapsed}s, more than ${max_seconds}s"; exit 1; fi
echo "PASS"
