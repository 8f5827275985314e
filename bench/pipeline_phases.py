"""Where a pipelined step's time goes, per stage, from a trace (issue 28; docs/parallelism.md,
"Where a pipelined step's time goes").

For each locality and each step after --warmup, from `tessera run --trace DIR`'s events:

- step: the step's length (fit's step span);
- pass: from the first to the last primitive evaluation of the stage's pass program
  (`<model pipeline stage s pass>`), and within it
  - compute: the union of its evaluations other than pipe_send / pipe_recv,
  - recv: the union of its pipe_recv evaluations not overlapped by compute (posting a receive,
    or waiting in one),
  - send: the same for pipe_send,
  - wait: no primitive of the pass running while a pipe_recv's message is pending (its
    communication event: posted to received): waiting for a neighbour, the bubble,
  - gaps: the rest of the pass (no primitive running and no message awaited: dispatch, or the
    operating system running another process);
- update: the same span of the update program (the data group's sum, the optimizer);
- outside: the step's time in neither program (Python: fit's loop, the arguments, the loss's
  all-reduce over the pipeline group, callbacks).

Medians over the timed steps, in ms. With more ranks than cores, compute and gaps grow with the
time slices the operating system gives other ranks.

run: .venv/bin/python bench/pipeline_phases.py TRACE_DIR [--warmup 1]
"""

import argparse
import json
import statistics

COMM = ("pipe_send", "pipe_recv")


def union(spans):
    """The union of intervals [(start, end)], as a sorted list of disjoint ones."""
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(spans) -> float:
    return sum(b - a for a, b in spans)


def minus(spans, cover) -> float:
    """The length of the union of `spans` not covered by the disjoint sorted `cover`."""
    total = 0.0
    for a, b in union(spans):
        covered = sum(max(0.0, min(b, d) - max(a, c)) for c, d in cover)
        total += (b - a) - covered
    return total


def phases(events, warmup):
    """{locality: {phase: median ms}} (see the module doc)."""
    steps, prims, recvs = {}, {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "communication" and e["name"].startswith("pipe_recv"):
            recvs.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
        elif e.get("cat") == "step":
            steps.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
        elif e.get("cat") == "primitive":
            program = (e.get("args") or {}).get("program", "")
            kind = "pass" if program.endswith(" pass>") else \
                "update" if program.endswith("update>") else None
            if kind:
                prims.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"], kind,
                                                       e["name"]))
    out = {}
    for pid in sorted(steps):
        rows = []
        for lo, hi in sorted(steps[pid])[warmup:]:
            mine = [(a, b, k, n) for a, b, k, n in prims.get(pid, []) if lo <= a <= hi]
            row = {"step": hi - lo}
            spans = 0.0
            for kind in ("pass", "update"):
                ev = [(a, b, n) for a, b, k, n in mine if k == kind]
                if not ev:
                    row[kind] = 0.0
                    continue
                span = max(b for _, b, _ in ev) - min(a for a, _, _ in ev)
                row[kind] = span
                spans += span
                if kind == "pass":
                    comp = union([(a, b) for a, b, n in ev if n not in COMM])
                    row["compute"] = length(comp)
                    row["recv"] = minus([(a, b) for a, b, n in ev if n == "pipe_recv"], comp)
                    row["send"] = minus([(a, b) for a, b, n in ev if n == "pipe_send"], comp)
                    busy = union([(a, b) for a, b, _ in ev])
                    lo_, hi_ = min(a for a, _, _ in ev), max(b for _, b, _ in ev)
                    pending = [(max(a, lo_), min(b, hi_)) for a, b in recvs.get(pid, [])
                               if b > lo_ and a < hi_]
                    row["wait"] = minus(pending, busy)
                    row["gaps"] = span - length(busy) - row["wait"]
            row["outside"] = row["step"] - spans
            rows.append(row)
        if rows:
            out[pid] = {k: statistics.median(r.get(k, 0.0) for r in rows) / 1e3
                        for k in rows[0]}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    import tessera

    t = tessera.trace(args.trace)
    if t.problems:
        raise SystemExit(f"the trace is incomplete: {t.problems}")
    out = phases(json.loads(t.chrome())["traceEvents"], args.warmup)
    keys = ["step", "pass", "compute", "recv", "send", "wait", "gaps", "update", "outside"]
    print("stage  " + "  ".join(f"{k:>8s}" for k in keys) + "   (ms, medians over steps)")
    for pid, row in out.items():
        print(f"{pid:5d}  " + "  ".join(f"{row.get(k, 0.0):8.1f}" for k in keys))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
