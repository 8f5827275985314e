"""Cost of distributed checkpoints: the HAR CNN training step at 2 localities with and
without asynchronous checkpoints every k updates, and the time a killed job takes to
come back (tessera run --max-restarts).

    .venv/bin/python bench/bench_checkpoint.py [--build build] [--every 10 50 200]
        [--steps 200] [--skip 10] [--batch 64] [--repeats 5] [--threads 1] [--cpu]

overhead  `tessera run -n 2 --threads T` of this file: the model of examples/har_cnn.py
          (410k parameters, Adam: 4.9 MB of state, 2.5 MB written per locality), --steps
          updates of --batch rows per fit, each fit in a fresh checkpoint folder; without
          checkpoints and with checkpoint_every=k interleaved. The time per step is that of
          the steps from --skip to --steps - --skip (locality 0's wall clock, or with --cpu
          its process's CPU time, the writer thread's included), median of --repeats fits;
          the overhead per step is (with - without) / without (also for the fastest fit of
          each, the least disturbed on a shared machine). Also printed: how much
          longer fit's end takes (it waits for the last checkpoint's write and commit).
restart   `tessera run -n 2 --max-restarts 1 --checkpoint-dir D` of this file: rank 1
          kills itself (SIGKILL) at update 30 (checkpoints every 10); the time from the
          kill to the first update of the restarted job (the launcher noticing, mpirun
          starting again, Python and tessera importing, the model built and compiled, the
          checkpoint found, checked and loaded), and within it the restore in fit; median
          of --repeats.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def worker_overhead(args):
    import tessera  # noqa: PLC0415
    from tessera import data, nn  # noqa: PLC0415

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from har_cnn import build_model  # noqa: PLC0415

    td = tessera.distributed
    rank = td.rank()
    x, y = data.synthetic_har(n=args.steps * args.batch, seed=1, split="train")
    model = build_model(0)
    model.compile(tessera.optim.Adam(1e-3), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(x[:args.batch * 2], y[:args.batch * 2], batch_size=args.batch, verbose=0,
              checkpoint_dir=False)  # compiled before timing
    clock = time.process_time if args.cpu else time.perf_counter
    lo, hi = args.skip, args.steps - args.skip  # the steps timed: [lo, hi)

    class Clock(nn.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == lo:
                self.start = clock()

        def on_train_batch_end(self, batch, logs=None):
            if batch == hi - 1:
                self.seconds = clock() - self.start

    settings = [None] + args.every
    times = {k: [] for k in settings}
    ends = {k: [] for k in settings}
    for rep in range(args.repeats):
        for k in settings:
            folder = os.path.join(args.work, f"r{rep}-k{k}")
            c = Clock()
            td.barrier()
            model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False,
                      checkpoint_dir=folder if k is not None else False,
                      checkpoint_every=k or "epoch", keep_checkpoints=2, callbacks=[c])
            ends[k].append(clock() - c.start - c.seconds)
            times[k].append(c.seconds / (hi - lo))
            td.barrier()
    if rank == 0:
        parts = _parts(model, td.size(), args.work)
        base, low = statistics.median(times[None]), min(times[None])
        out = {"step_ms": base * 1e3, "min_ms": low * 1e3, "threads": tessera.num_threads(),
               "ranks": td.size(), "every": {}}
        for k in args.every:
            step = statistics.median(times[k])
            out["every"][k] = {"step_ms": step * 1e3, "overhead": (step - base) / base,
                               "min_ms": min(times[k]) * 1e3,
                               "min_overhead": (min(times[k]) - low) / low,
                               "end_ms": 1e3 * (statistics.median(ends[k]) -
                                                statistics.median(ends[None]))}
        out["parts"] = parts
        print("RESULT " + json.dumps(out), flush=True)


def _parts(model, n, work):
    """CPU milliseconds (this thread's) of the pieces of one checkpoint on
    locality 0: the snapshot on the training thread; hashing and writing
    (with fsync and rename) in the background."""
    import hashlib  # noqa: PLC0415

    from tessera.nn import checkpoints as ck  # noqa: PLC0415

    tensors = ck._state_tensors(model)
    entries, total = ck._layout(tensors, "bench")
    lo, hi = ck._span(total, n, 0)
    snap, sha, write = [], [], []
    for k in range(9):
        t = time.thread_time()
        buf = ck._snapshot(tensors, entries, lo, hi)
        snap.append(time.thread_time() - t)
        t = time.thread_time()
        hashlib.sha256(buf).hexdigest()
        sha.append(time.thread_time() - t)
        t = time.thread_time()
        ck._write_atomic(os.path.join(work, f"part-{k}"), [memoryview(buf)])
        write.append(time.thread_time() - t)
    return {"bytes": hi - lo, "snapshot_ms": 1e3 * statistics.median(snap),
            "sha256_ms": 1e3 * statistics.median(sha), "write_ms": 1e3 * statistics.median(write)}


def worker_restart(args):
    import tessera  # noqa: PLC0415
    from tessera import data, nn  # noqa: PLC0415

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from har_cnn import build_model  # noqa: PLC0415

    rank = tessera.distributed.rank()
    attempt = int(os.environ.get("TESSERA_RESTART", "0"))
    x, y = data.synthetic_har(n=60 * args.batch, seed=1, split="train")
    model = build_model(0)
    model.compile(tessera.optim.Adam(1e-3), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    stamp = os.path.join(os.environ["TESSERA_CHECKPOINT_DIR"], os.pardir)

    class Probe(nn.callbacks.Callback):
        first = True

        def on_train_begin(self, logs=None):
            if rank == 0 and attempt == 1:
                with open(os.path.join(stamp, "restored.txt"), "w") as f:
                    f.write(repr(time.time()))

        def on_train_batch_begin(self, batch, logs=None):
            it = self.model._iteration
            if attempt == 0 and rank == 1 and it == 30:
                manifest = os.path.join(os.environ["TESSERA_CHECKPOINT_DIR"], "ckpt-30",
                                        "manifest.json")
                while not os.path.exists(manifest):
                    time.sleep(0.005)
                with open(os.path.join(stamp, "killed.txt"), "w") as f:
                    f.write(repr(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)
            if attempt == 1 and rank == 0 and self.first:
                self.first = False
                with open(os.path.join(stamp, "first_step.txt"), "w") as f:
                    f.write(repr(time.time()))

    start = time.time()
    model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False,
              checkpoint_every=10, callbacks=[Probe()])
    if rank == 0 and attempt == 1:
        with open(os.path.join(stamp, "fit_start.txt"), "w") as f:
            f.write(repr(start))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--every", type=int, nargs="+", default=[10, 25, 50])
    p.add_argument("--skip", type=int, default=10,
                   help="steps left untimed at each end of a fit (its start and its end)")
    p.add_argument("--cpu", action="store_true",
                   help="CPU seconds of locality 0's process (all its threads), not wall seconds")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--worker", choices=["overhead", "restart"])
    p.add_argument("--work", help="(worker) the folder for checkpoints")
    args = p.parse_args()
    if args.worker == "overhead":
        return worker_overhead(args)
    if args.worker == "restart":
        return worker_restart(args)

    sys.path.insert(0, HERE)
    from machine import machine_line  # noqa: PLC0415

    cli = os.path.join(args.build, "tessera")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.setdefault("TESSERA_PYTHON", sys.executable)
    env.pop("TESSERA_CHECKPOINT_DIR", None)
    print(machine_line())
    work = tempfile.mkdtemp(prefix="tessera-bench-ckpt-")
    cmd = [cli, "run", "-n", "2", "--threads", str(args.threads), __file__, "--worker",
           "overhead", "--work", work, "--steps", str(args.steps), "--batch", str(args.batch),
           "--skip", str(args.skip), *(["--cpu"] if args.cpu else []),
           "--repeats", str(args.repeats), "--every", *map(str, args.every)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    shutil.rmtree(work, ignore_errors=True)
    line = [l for l in r.stdout.splitlines() if "RESULT " in l]
    if r.returncode or not line:
        sys.exit(f"the overhead run failed:\n{r.stdout}\n{r.stderr}")
    res = json.loads(line[0].split("RESULT ", 1)[1])
    print(f"HAR CNN training step, batch {args.batch}, {res['ranks']} localities x "
          f"{res['threads']} thread(s), {args.steps} updates per fit (steps {args.skip} to "
          f"{args.steps - args.skip} timed), median of {args.repeats} fits, "
          f"{'CPU' if args.cpu else 'wall'} time of locality 0")
    print(f"  no checkpoints            {res['step_ms']:.2f} ms per step (fastest fit "
          f"{res['min_ms']:.2f})")
    p = res["parts"]
    print(f"  one checkpoint on locality 0 ({p['bytes'] / 1e6:.2f} MB): snapshot "
          f"{p['snapshot_ms']:.1f} ms on the training thread; SHA-256 {p['sha256_ms']:.1f} ms and "
          f"write {p['write_ms']:.1f} ms of CPU in the background")
    for k, v in res["every"].items():
        print(f"  checkpoint every {int(k):>4}     {v['step_ms']:.2f} ms per step "
              f"({100 * v['overhead']:+.1f}%; fastest fit {v['min_ms']:.2f}, "
              f"{100 * v['min_overhead']:+.1f}%); fit's end {v['end_ms']:+.0f} ms (waits for "
              "the last write)")

    probe = tempfile.mkdtemp(prefix="tessera-bench-fsync-")
    writes = []
    for k in range(5):
        block = os.urandom(2_450_000)
        start = time.perf_counter()
        with open(os.path.join(probe, f"f{k}"), "wb") as f:
            f.write(block)
            f.flush()
            os.fsync(f.fileno())
        writes.append(time.perf_counter() - start)
    shutil.rmtree(probe, ignore_errors=True)
    print(f"  (writing and fsyncing 2.45 MB in {tempfile.gettempdir()}: median "
          f"{1e3 * statistics.median(writes):.0f} ms, max {1e3 * max(writes):.0f} ms)")

    totals, restores = [], []
    for rep in range(args.repeats):
        work = tempfile.mkdtemp(prefix="tessera-bench-restart-")
        ck = os.path.join(work, "ckpts")
        cmd = [cli, "run", "-n", "2", "--threads", str(args.threads), "--max-restarts", "1",
               "--checkpoint-dir", ck, __file__, "--worker", "restart", "--batch", str(args.batch)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode:
            sys.exit(f"the restart run failed:\n{r.stdout}\n{r.stderr}")

        def read(name):
            with open(os.path.join(work, name)) as f:
                return float(f.read())

        totals.append(read("first_step.txt") - read("killed.txt"))
        restores.append(read("restored.txt") - read("fit_start.txt"))  # fit's start, restore in it
        shutil.rmtree(work, ignore_errors=True)
    print(f"restart: from the kill to the restarted job's first update "
          f"{statistics.median(totals):.2f} s "
          f"(min {min(totals):.2f}, max {max(totals):.2f}); of which fit's restore "
          f"{1e3 * statistics.median(restores):.0f} ms (median of {args.repeats})")


if __name__ == "__main__":
    main()
