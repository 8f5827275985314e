"""The pipeline bubble measured from the trace, and stage 0's activations under 1F1B (issue 28,
docs/parallelism.md, "Pipeline parallelism: the bubble, measured").

A stack of equal blocks (Dense(W, tanh)), cut into p stages of the same number of blocks, trained
for a few steps with p ranks (one thread each) under `tessera run --mesh pipeline=p`, for every
p in --stages and m in --microbatches, with the trace on. From the trace:

- the step's pass window W: from the first to the last primitive evaluation of the stages' pass
  programs (the forwards and backwards of the micro-batches, their point-to-point messages) in
  that step, over every stage, on the merged clock;
- stage s's busy time: the union of its pass program's primitive evaluations within W, leaving
  out pipe_send / pipe_recv (waiting for a neighbour is idle);
- stage s's bubble: 1 - busy / |W|, the median over the timed steps. With equal stages it is
  (p - 1) / (m + p - 1) for 1F1B and GPipe alike.

That wall bubble counts a rank the operating system descheduled as idle, so with more ranks than
cores (p = 4 on 2 cores) it is at least about 1 - cores / p whatever the schedule. The replayed
bubble (bench/pipeline_replay.py) is the schedule's own: each stage's evaluations in their traced
order with their thread CPU times, a receive's first dependent waiting for the matching send's
replayed completion, on a machine with a core per rank; both are printed.

Stage 0's activations under 1F1B, in micro-batches: each rank's tessera.memory_stats() peak of
live array bytes during a step above the bytes live at its start. GPipe holds every micro-batch,
so its peak grows by one micro-batch's activations per micro-batch: the slope of GPipe's peak
over m (a least-squares line) is one micro-batch's bytes, and 1F1B's stage 0 holds
m - (GPipe's peak - 1F1B's peak) / slope micro-batches. GPipe's peak is in its first backward,
before the running sum of the stage's gradients exists; 1F1B's peak holds that sum (one set of the
stage's gradients, weights' not activations'): without it, stage 0 holds that many micro-batches
fewer, gradient bytes / slope (the target: at most 1.1 p).

run: .venv/bin/python bench/bench_pipeline_bubble.py [--stages 2,4] [--microbatches 4,8,16]
         [--rows 128] [--width 384] [--blocks 8] [--steps 4] [--warmup 1] [--runs 1]
         [--build build] [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fair import load_average  # noqa: E402
from machine import machine_line  # noqa: E402
from pipeline_replay import replayed_bubbles  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COMM = ("pipe_send", "pipe_recv")


def union_length(spans, lo, hi) -> float:
    """The length of the union of intervals `spans` [(start, end)] clipped to [lo, hi]."""
    total, end = 0.0, lo
    for a, b in sorted(spans):
        a, b = max(a, end), min(b, hi)
        if b > a:
            total += b - a
            end = b
    return total


def bubbles(events, p, warmup):
    """{stage: [bubble of each timed step]} and the pass windows' lengths (µs), from a Chrome
    trace's events (see the module doc)."""
    steps = {}  # locality -> [(start, end)] of fit's steps
    prims = {}  # locality -> [(start, end, name)] of its pass program
    for e in events:
        if e.get("ph") != "X":
            continue
        pid = e["pid"]
        if e.get("cat") == "step":
            steps.setdefault(pid, []).append((e["ts"], e["ts"] + e["dur"]))
        elif e.get("cat") == "primitive" and \
                (e.get("args") or {}).get("program", "").endswith(" pass>"):
            prims.setdefault(pid, []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    if sorted(prims) != list(range(p)):
        raise RuntimeError(f"the trace has pass programs of localities {sorted(prims)}, "
                           f"expected 0..{p - 1}")
    n_steps = min(len(v) for v in steps.values())
    per_step = []  # [stage][step] -> events
    for s in range(p):
        spans = sorted(steps[s])
        rows = [[] for _ in range(n_steps)]
        for a, b, name in prims[s]:
            for k, (lo, hi) in enumerate(spans[:n_steps]):
                if lo <= a <= hi:
                    rows[k].append((a, b, name))
                    break
        per_step.append(rows)
    out, windows = {s: [] for s in range(p)}, []
    for k in range(warmup, n_steps):
        lo = min(min(a for a, _, _ in per_step[s][k]) for s in range(p))
        hi = max(max(b for _, b, _ in per_step[s][k]) for s in range(p))
        windows.append(hi - lo)
        for s in range(p):
            busy = union_length([(a, b) for a, b, n in per_step[s][k] if n not in COMM], lo, hi)
            out[s].append(1.0 - busy / (hi - lo))
    return out, windows


# ------------------------------------------------------------------ one launch, every rank

def worker(args):
    import tessera
    from tessera import distributed as dist
    from tessera import nn

    R, p = dist.rank(), dist.size()
    per = args.blocks // p
    names = [f"b{i}" for i in range(args.blocks)]
    model = nn.Sequential([nn.Dense(args.width, activation="tanh", name=n) for n in names],
                          input_shape=(args.width,), seed=1)
    model.compile("sgd", "mse")
    rows = args.rows * args.m  # a global batch: m micro-batches of `rows`
    n = rows * (args.steps + args.warmup)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, args.width)).astype("float32")
    y = np.tanh(x[:, ::-1]).copy()
    peaks = []

    class Peak(nn.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.live = tessera.memory_stats()["live_bytes"]
            tessera.reset_peak_memory()

        def on_train_batch_end(self, batch, logs=None):
            peaks.append(tessera.memory_stats()["peak_live_bytes"] - self.live)

    split = [names[per * s] for s in range(1, p)]
    fit = dict(batch_size=rows, epochs=1, shuffle=False, verbose=0, microbatches=args.m,
               pipeline_split=split, pipeline_schedule=args.schedule, callbacks=[Peak()])
    model.fit(x, y, **fit)  # recorded: tessera run --trace
    step = model._pipeline
    assert step.stage == R and step.keeps == (R < p - 1)
    # the bytes of the stage's gradients: one set, the running sum of the
    # micro-batches' gradients, lives from the first backward to the update
    grad = sum(np.asarray(model.weights[v]).nbytes for v in step.P)
    mine = np.array([float(np.median(peaks[args.warmup:])), float(grad)])
    every = np.asarray(dist.all_gather(mine)).reshape(p, 2)
    if R == 0:
        with open(args.out, "w") as fh:
            json.dump({"peak": every[:, 0].tolist(), "grad": every[:, 1].tolist()}, fh)


# ------------------------------------------------------------------ the launcher

def launch(args, p, m, schedule):
    with tempfile.TemporaryDirectory(prefix="bubble-") as tmp:
        out = os.path.join(tmp, "out.json")
        trace = os.path.join(tmp, "trace")
        cmd = [os.path.join(ROOT, args.build, "tessera"), "run", "-n", str(p), "--threads", "1",
               "--mesh", f"pipeline={p}", "--trace", trace, os.path.abspath(__file__),
               "--worker", "--m", str(m), "--schedule", schedule, "--out", out,
               f"--rows={args.rows}", f"--width={args.width}", f"--blocks={args.blocks}",
               f"--steps={args.steps}", f"--warmup={args.warmup}"]
        # TESSERA_TRACE_CPU: each evaluation's thread CPU time, for the replay
        env = dict(os.environ, TESSERA_PYTHON=sys.executable, OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", TESSERA_TRACE_CPU="1")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"p={p} m={m} {schedule} failed (exit {proc.returncode}):\n"
                               f"{(proc.stdout + proc.stderr)[-3000:]}")
        with open(out) as fh:
            result = json.load(fh)
        import tessera

        t = tessera.trace(trace)
        if t.problems:
            raise RuntimeError(f"p={p} m={m} {schedule}: the trace is incomplete: {t.problems}")
        events = json.loads(t.chrome())["traceEvents"]
        out, windows = bubbles(events, p, args.warmup)
        result["bubble"] = {str(s): statistics.median(v) for s, v in out.items()}
        result["window_ms"] = statistics.median(windows) / 1e3
        out, windows = replayed_bubbles(events, p, args.warmup)
        result["replayed"] = {str(s): statistics.median(v) for s, v in out.items()}
        result["replayed_ms"] = statistics.median(windows) / 1e3
        result["load"] = os.getloadavg()[0]
        return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", default="2,4")
    ap.add_argument("--microbatches", default="4,8,16")
    ap.add_argument("--rows", type=int, default=128, help="rows of a micro-batch")
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--m", type=int)
    ap.add_argument("--schedule", default="1f1b")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    stages = [int(v) for v in args.stages.split(",")]
    counts = [int(v) for v in args.microbatches.split(",")]
    for p in stages:
        if args.blocks % p:
            raise SystemExit(f"--blocks {args.blocks} cannot be cut into {p} equal stages")
    print("== bench_pipeline_bubble: the pipeline bubble from the trace, stage 0's activations")
    print(machine_line())
    print(f"ranks: p (one per stage) x 1 thread; model: {args.blocks} x Dense({args.width}, "
          f"tanh), {args.blocks // min(stages)}..{args.blocks // max(stages)} per stage; "
          f"micro-batches of {args.rows} rows; SGD, mse; {args.steps} steps timed after "
          f"{args.warmup}, median of {args.runs} run(s)")
    print(f"load average at start: {load_average()}")
    results = {}
    for p in stages:
        print(f"-- p = {p}")
        print("   m  schedule  (p-1)/(m+p-1) | wall: bubble per stage (0..p-1)  mean   diff   "
              "pass     | replayed: bubble per stage      mean   diff   pass    | stage-0 peak  "
              "load")
        for m in counts:
            for schedule in ("1f1b", "gpipe"):
                runs = [launch(args, p, m, schedule) for _ in range(args.runs)]
                per = [statistics.median(float(r["bubble"][str(s)]) for r in runs)
                       for s in range(p)]
                window = statistics.median(r["window_ms"] for r in runs)
                rper = [statistics.median(float(r["replayed"][str(s)]) for r in runs)
                        for s in range(p)]
                rwindow = statistics.median(r["replayed_ms"] for r in runs)
                peak0 = statistics.median(r["peak"][0] for r in runs)
                load = max(r["load"] for r in runs)
                results[(p, m, schedule)] = {"bubble": per, "window_ms": window,
                                             "replayed": rper, "replayed_ms": rwindow,
                                             "peak0": peak0, "grad0": runs[0]["grad"][0],
                                             "load": load}
                ideal = (p - 1) / (m + p - 1)
                mean, rmean = sum(per) / p, sum(rper) / p
                print(f"  {m:2d}  {schedule:8s}  {ideal:13.3f} | "
                      f"{' '.join(f'{b:.3f}' for b in per):30s} {mean:.3f}  {mean - ideal:+.3f}  "
                      f"{window:6.1f} ms | {' '.join(f'{b:.3f}' for b in rper):30s} "
                      f"{rmean:.3f}  {rmean - ideal:+.3f}  {rwindow:5.1f} ms | "
                      f"{peak0 / 2**20:7.1f} MiB  {load:.1f}")
        # stage 0's activations under 1F1B, in micro-batches (see the module doc)
        g = np.array([results[(p, m, "gpipe")]["peak0"] for m in counts])
        slope = np.polyfit(np.array(counts, dtype=float), g, 1)[0] if len(counts) > 1 else None
        for m in counts:
            if slope is None or slope <= 0:
                print(f"   m={m}: stage 0's activations: needs two or more m with GPipe's peak "
                      "growing")
                continue
            held = m - (results[(p, m, "gpipe")]["peak0"] - results[(p, m, "1f1b")]["peak0"]) \
                / slope
            # GPipe peaks in its first backward, before any running sum of
            # the gradients exists (when a micro-batch's activations outweigh
            # the stage's gradients); 1F1B's peak holds that sum beside the
            # new micro-batch's gradients: weights' gradients, not activations
            grad = results[(p, m, "1f1b")]["grad0"]
            net = held - (grad / slope if slope > grad else 0.0)
            results[(p, m, "1f1b")]["held0"] = held
            results[(p, m, "1f1b")]["held0_net"] = net
            print(f"   m={m:2d}: stage 0 under 1F1B holds {held:.2f} micro-batches above GPipe's "
                  f"({held / p:.2f} x p), {net:.2f} without the running sum of its gradients "
                  f"({net / p:.2f} x p; one micro-batch {slope / 2**20:.2f} MiB, from GPipe's "
                  f"slope; the gradients {grad / 2**20:.2f} MiB)")
    print(f"load average at the end: {load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({f"{p},{m},{s}": v for (p, m, s), v in results.items()}, fh, indent=1)


if __name__ == "__main__":
    main()
