"""How fast is a lost rank found, and the job gone? Data-parallel training
(tests/distributed/rank_lost.py) under `tessera run -n N`, the last rank lost
after its 3rd batch: stopped (SIGSTOP: only failure detection finds it) or
killed (SIGKILL: mpirun sees its process end). Times from the loss (the victim
prints the time just before the signal) to the first error line naming it, and
to the launcher's exit (every process of the run gone: checked), medians over
--runs runs. The peer: the same stop found by the collective timeout alone
(TESSERA_FAILURE_TIMEOUT=off, TESSERA_COLLECTIVE_TIMEOUT=--baseline seconds),
which is all there was before failure detection.

run: PYTHONPATH=python .venv/bin/python bench/bench_failure.py [--ranks 4] [--runs 5]
         [--timeout 5] [--baseline 20] [--cli build/tessera]
"""

import argparse
import os
import statistics
import sys

from machine import machine_line

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "distributed"))

from failure_check import run_once  # noqa: E402


def summary(values):
    if not values:
        return "-"
    return f"{statistics.median(values):6.2f} s ({min(values):.2f}-{max(values):.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=5.0, help="TESSERA_FAILURE_TIMEOUT")
    ap.add_argument("--baseline", type=float, default=20.0,
                    help="TESSERA_COLLECTIVE_TIMEOUT of the run without failure detection (0: none)")
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "tessera"))
    args = ap.parse_args()
    print(machine_line())
    print(f"ranks: {args.ranks} on this machine (oversubscribed when more than the cores), "
          f"TESSERA_FAILURE_TIMEOUT={args.timeout:g}, {args.runs} runs each")
    cases = [("stop", "stop", args.timeout, {}), ("kill", "kill", args.timeout, {})]
    if args.baseline > 0:
        cases.append((f"stop, detection off, collective timeout {args.baseline:g} s", "stop", "off",
                      {"TESSERA_COLLECTIVE_TIMEOUT": str(args.baseline)}))
    print(f"{'loss':<48} {'loss -> error':>24} {'loss -> job gone':>24} {'error -> job gone':>24}")
    for name, loss, timeout, env in cases:
        to_error, to_gone, error_to_gone = [], [], []
        runs = 1 if timeout == "off" else args.runs
        for _ in range(runs):
            r = run_once(args.cli, args.ranks, loss, timeout=timeout, env=env, limit=args.baseline + 60)
            if r["lost"] is None or r["left"]:
                sys.exit(f"run failed ({name}): lost={r['lost']} left={r['left']}")
            to_gone.append(r["end"] - r["lost"])
            if r["error"] is not None:
                to_error.append(r["error"] - r["lost"])
                error_to_gone.append(r["end"] - r["error"])
        print(f"{name:<48} {summary(to_error):>24} {summary(to_gone):>24} {summary(error_to_gone):>24}",
              flush=True)


if __name__ == "__main__":
    main()
