"""Gradient buckets: bucket size, and all-reduces overlapping the backward pass.

One data-parallel training step (model.fit on one global batch) on 2 localities,
for several settings of Sequential.BUCKET_BYTES, with the bucket all-reduces
started from inside the backward pass (OVERLAP_BACKWARD, the default) and, as
the baseline, all after it (the behaviour before buckets overlapped). Two
models:

  har    the HAR CNN of bench_har_cnn.py (1.6 MB of gradients), global batch 2000
  wide   an MLP 512 -> 2048 -> 2048 -> 2048 -> 10 (about 38 MB of gradients),
         global batch 256: communication is a large part of its step

Every setting is timed in turn within each repetition (so load changes hit all
alike); a time is the slowest rank's; medians after warm-up. One more step per
setting is traced to measure the communication that is left after the backward
pass (the step's "communication wait" phase: from the backward pass's last
computation to the first optimizer update), and how many of the gradient
all-reduces had finished before the backward pass did.

run: .venv/bin/python bench/bench_buckets.py [--build build] [--model har|wide|both]
         [--repeats 7] [--warmup 2] [--threads 1]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from machine import machine_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RANKS = 2
SETTINGS = [(False, 4 << 20), (True, 4 << 20), (True, 1 << 20), (True, 256 << 10), (True, 64 << 10)]


def make(model_name):
    from tessera import nn
    rng = np.random.default_rng(0)
    if model_name == "har":
        from bench_har_cnn import tessera_model
        batch = 2000
        x = rng.normal(size=(batch, 128, 9)).astype(np.float32)
        y = rng.integers(0, 6, size=batch)
        return tessera_model, x, y, batch
    batch = 256
    x = rng.normal(size=(batch, 512)).astype(np.float32)
    y = rng.integers(0, 10, size=batch)

    def wide():
        import tessera
        m = nn.Sequential([nn.Dense(2048, activation="relu"), nn.Dense(2048, activation="relu"),
                           nn.Dense(2048, activation="relu"), nn.Dense(10, activation="softmax")],
                          input_shape=(512,), seed=0, dtype="float32")
        m.compile(tessera.optim.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
        return m
    return wide, x, y, batch


def after_backward(trace_json):
    """From a traced step, rank 0's view: the step's "communication wait" phase
    in ms (what is left of the gradient all-reduces after the backward pass's
    last computation; see docs/tracing.md), and how many of the gradient
    all-reduces had finished before the backward phase ended, of how many."""
    ev = [e for e in trace_json["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 0]
    wait = sum(e["dur"] for e in ev if e["name"] == "communication wait") / 1e3
    backward = [e for e in ev if e["name"] == "backward"]
    opt = [e["ts"] for e in ev if e["name"] == "optimizer"]
    if not backward or not opt:
        return float("nan"), (0, 0)
    end_bwd = max(e["ts"] + e["dur"] for e in backward)
    # The gradient all-reduces: everything communicated from the start of the
    # backward pass to the first optimizer update.
    start_bwd = min(e["ts"] for e in backward)
    grads = [e for e in ev if e["name"].startswith("all_reduce(") and start_bwd <= e["ts"] < min(opt)]
    done = sum(1 for e in grads if e["ts"] + e["dur"] <= end_bwd)
    return wait, (done, len(grads))


def worker(args):
    import tessera
    dist = tessera.distributed
    rank = dist.rank()
    build, x, y, batch = make(args.model)
    models = []
    for overlap, nbytes in SETTINGS:
        m = build()
        m.OVERLAP_BACKWARD, m.BUCKET_BYTES = overlap, nbytes
        models.append(m)
    times = [[] for _ in SETTINGS]
    for rep in range(args.warmup + args.repeats):
        for i, m in enumerate(models):
            dist.barrier()
            t = time.perf_counter()
            m.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
            if rep >= args.warmup:
                times[i].append(time.perf_counter() - t)
    rows = []
    for i, m in enumerate(models):
        every = np.asarray(dist.all_gather(np.asarray(times[i], dtype=np.float64))).reshape(RANKS, -1)
        slow = every.max(axis=0)
        with tempfile.TemporaryDirectory() as d:
            dist.barrier()
            with tessera.trace(d) as t:
                m.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
            wait, (done, total) = after_backward(json.loads(t.chrome())) if rank == 0 else (0, (0, 0))
        n_buckets = len(m._bucket_plan(m._params(True)))
        grad_mb = sum(int(np.prod(m.weights[v].shape)) * 4 for v in m._params(True)) / 1e6
        rows.append({"overlap": SETTINGS[i][0], "bucket_bytes": SETTINGS[i][1], "buckets": n_buckets,
                     "grad_mb": grad_mb, "median_s": statistics.median(slow), "all_s": slow.tolist(),
                     "wait_after_backward_ms": wait, "done_before_backward_end": done,
                     "bucket_allreduces": total})
    if rank == 0:
        with open(args.out, "w") as fh:
            json.dump({"rows": rows, "threads": tessera.num_threads()}, fh)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--model", choices=["har", "wide", "both"], default="both")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="threads per rank (default 1)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        sys.path.insert(0, HERE)
        return worker(args)
    exe = os.path.join(args.build, "tessera")
    if not os.access(exe, os.X_OK):
        sys.exit(f"bench_buckets: {exe} not found: build it first (make build)")
    print(machine_line())
    print(f"{RANKS} localities x {args.threads} thread(s); medians of {args.repeats} steps after "
          f"{args.warmup} warm-up; the slowest rank's time")
    for model in (["har", "wide"] if args.model == "both" else [args.model]):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            cmd = [exe, "run", "-n", str(RANKS), "--threads", str(args.threads), os.path.abspath(__file__),
                   "--worker", "--model", model, "--out", out, "--repeats", str(args.repeats),
                   "--warmup", str(args.warmup)]
            env = dict(os.environ, TESSERA_PYTHON=sys.executable)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"bench_buckets: the tessera run failed:\n{r.stdout}\n{r.stderr}")
            with open(out) as fh:
                rows = json.load(fh)["rows"]
        base = rows[0]["median_s"]
        print(f"\n{model}: {rows[0]['grad_mb']:.1f} MB of gradients")
        print(f"  {'all-reduces':<14} {'bucket':>8} {'buckets':>7} {'step ms':>9} {'ratio':>6} "
              f"{'wait after backward ms':>23} {'done before backward end':>25}")
        for row in rows:
            when = "in backward" if row["overlap"] else "after (base)"
            print(f"  {when:<14} {row['bucket_bytes'] >> 10:>6}Ki {row['buckets']:>7} "
                  f"{row['median_s'] * 1e3:>9.1f} {row['median_s'] / base:>6.2f} "
                  f"{row['wait_after_backward_ms']:>23.2f} "
                  f"{row['done_before_backward_end']:>15}/{row['bucket_allreduces']}")


if __name__ == "__main__":
    main()
