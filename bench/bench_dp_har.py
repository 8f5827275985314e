"""The HAR CNN data-parallel on 2 ranks: tessera against PyTorch DistributedDataParallel.

Global batch 8000 (each rank takes its 4000 rows), 2 ranks x 1 thread on this
machine, the model of bench_har_cnn.py and examples/har_cnn.py:

  forward   each rank predicts its rows (inference mode, softmax output) and
            the 8000 x 6 outputs are gathered on every rank (tessera:
            model.predict + distributed.all_gather; PyTorch: the DDP module
            under no_grad + all_gather_single);
  step      one data-parallel training step: forward, backward, gradients
            summed across the ranks, Adam update, and the loss and accuracy of
            the whole batch (tessera: model.fit on the one global batch, which
            all-reduces the gradients in its compiled buckets; PyTorch: DDP
            (gloo) + torch.optim.Adam, plus one all_reduce of loss and
            accuracy, as fit reports them).

tessera runs under `tessera run -n 2 --threads 1`; PyTorch as 2 processes
(torch.multiprocessing, gloo over a TCP store on localhost) with
torch.set_num_threads(1). Both start from the same weights (tessera's seed-0
initialization, written by tessera's rank 0 and copied into the PyTorch
network), and the gathered forward outputs are compared as a check. A time is
the slowest rank's (every repetition starts after a barrier), median over the
repetitions after warm-up.

run: .venv/bin/python bench/bench_dp_har.py [--build build] [--repeats 5] [--warmup 2]
         [--runs 1] [--batch 8000] [--threads 1] [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

from machine import free_port, machine_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RANKS = 2


def make_data(batch):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, 128, 9)).astype(np.float32)
    y = rng.integers(0, 6, size=batch)
    return x, y


def shard(n, rank, size):
    """The rows [lo, hi) of rank's share, as tessera's fit splits a batch."""
    return rank * n // size, (rank + 1) * n // size


def repetitions(fn, count, barrier):
    """This rank's seconds for each of `count` calls of fn, each started after a barrier."""
    times = []
    for _ in range(count):
        barrier()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def slowest(per_rank):
    """per_rank[r][i]: rank r's time of repetition i -> the slowest rank's, per repetition."""
    return [max(ts) for ts in zip(*per_rank)]


# ---------------------------------------------------------------- tessera side

def tessera_worker(args):
    """Runs on every locality under `tessera run -n 2`; rank 0 writes the results."""
    import tessera
    from bench_har_cnn import tessera_model

    dist = tessera.distributed
    rank, size = dist.rank(), dist.size()
    if size != RANKS:
        sys.exit(f"bench_dp_har: the tessera worker needs {RANKS} localities, got {size}")
    x, y = make_data(args.batch)
    lo, hi = shard(args.batch, rank, size)
    model = tessera_model()
    if rank == 0:
        np.savez(os.path.join(args.out, "weights.npz"), **{k: np.asarray(v)
                                                           for k, v in model.weights.items()})

    def forward():
        return dist.all_gather(model.predict(x[lo:hi], batch_size=hi - lo))

    losses = []

    def step():
        h = model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False)
        losses.append(h.history["loss"][0])

    def timed(fn):
        times = repetitions(fn, args.warmup + args.repeats, dist.barrier)
        # Every rank's times, so the slowest rank's can be taken per repetition.
        every = np.asarray(dist.all_gather(np.asarray(times, dtype=np.float64)))
        return every.reshape(size, -1)[:, args.warmup:].tolist()

    out = np.asarray(forward())
    fwd = timed(forward)
    stp = timed(step)
    if rank == 0:
        np.save(os.path.join(args.out, "tessera_forward.npy"), out)
        with open(os.path.join(args.out, "tessera.json"), "w") as fh:
            json.dump({"forward": fwd, "step": stp, "first_loss": losses[0],
                       "threads": tessera.num_threads(), "localities": size,
                       "module": os.path.dirname(tessera.__file__)}, fh)


def run_tessera(args, tmp):
    exe = os.path.join(args.build, "tessera")
    if not os.access(exe, os.X_OK):
        sys.exit(f"bench_dp_har: {exe} not found: build it first (make build, or cmake --build "
                 f"{args.build})")
    env = dict(os.environ, TESSERA_PYTHON=sys.executable)
    cmd = [exe, "run", "-n", str(RANKS), "--threads", str(args.threads), os.path.abspath(__file__),
           "--worker", "tessera", "--out", tmp, "--batch", str(args.batch),
           "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_dp_har: {' '.join(cmd)} failed (exit {proc.returncode}):\n"
                 f"{proc.stdout}{proc.stderr}")
    with open(os.path.join(tmp, "tessera.json")) as fh:
        return json.load(fh)


# ---------------------------------------------------------------- PyTorch side

def _torch_worker(rank, port, args, tmp):
    os.environ["TESSERA_THREADS"] = "1"  # bench_har_cnn imports tessera; it stays idle
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from bench_har_cnn import copy_weights, torch_model

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=RANKS)
    x, y = make_data(args.batch)
    lo, hi = shard(args.batch, rank, RANKS)
    share = (hi - lo) / args.batch
    xs, ys = torch.from_numpy(x[lo:hi]), torch.from_numpy(y[lo:hi])

    torch.manual_seed(0)
    net = torch_model(torch)
    with np.load(os.path.join(tmp, "weights.npz")) as w:
        copy_weights(types.SimpleNamespace(weights=dict(w)), net, torch)
    ddp = DDP(net)
    opt = torch.optim.Adam(ddp.parameters(), 1e-3)

    # all_gather_into_tensor is deprecated in 2.13 in favour of all_gather_single.
    gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def forward():
        ddp.eval()
        with torch.no_grad():
            out = torch.softmax(ddp(xs), 1)
            full = torch.empty((args.batch, out.shape[1]), dtype=out.dtype)
            gather_into(full, out.contiguous())
        return full

    losses = []

    def step():
        ddp.train()
        opt.zero_grad()
        logits = ddp(xs)
        loss = torch.nn.functional.cross_entropy(logits, ys)
        loss.backward()
        opt.step()
        # The whole batch's loss and accuracy, as model.fit reports them.
        stats = torch.stack([loss.detach(), (logits.argmax(1) == ys).float().mean()]) * share
        dist.all_reduce(stats)
        losses.append(float(stats[0]))

    def timed(fn):
        times = repetitions(fn, args.warmup + args.repeats, dist.barrier)
        every = [torch.zeros(len(times), dtype=torch.float64) for _ in range(RANKS)]
        dist.all_gather(every, torch.tensor(times, dtype=torch.float64))
        return [e[args.warmup:].tolist() for e in every]

    out = forward().numpy()
    fwd = timed(forward)
    stp = timed(step)
    if rank == 0:
        np.save(os.path.join(tmp, "torch_forward.npy"), out)
        with open(os.path.join(tmp, "torch.json"), "w") as fh:
            json.dump({"forward": fwd, "step": stp, "first_loss": losses[0],
                       "torch": torch.__version__, "threads": torch.get_num_threads()}, fh)
    dist.barrier()
    dist.destroy_process_group()


def run_torch(args, tmp):
    import torch.multiprocessing as mp

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(_torch_worker, args=(free_port(), args, tmp), nprocs=RANKS)
    with open(os.path.join(tmp, "torch.json")) as fh:
        return json.load(fh)


# ---------------------------------------------------------------- driver

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="build directory holding the tessera command (default: build)")
    p.add_argument("--batch", type=int, default=8000, help="global batch (default 8000)")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed repetitions first (default 2)")
    p.add_argument("--threads", type=int, default=1, help="threads per rank (default 1)")
    p.add_argument("--runs", type=int, default=1,
                   help="alternating launches of each side; medians over all (default 1)")
    p.add_argument("--json", metavar="FILE", help="also write every repetition's times to FILE")
    p.add_argument("--worker", choices=["tessera"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker == "tessera":
        return tessera_worker(args)
    if args.batch < RANKS or min(args.repeats, args.warmup, args.threads, args.runs) < 1:
        sys.exit("bench_dp_har: --batch must be >= 2; --repeats, --warmup, --threads and --runs "
                 ">= 1")
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("bench_dp_har: PyTorch is not installed (.venv/bin/pip install torch==2.13.0)")

    load_before = os.getloadavg()[0]
    tess_runs, ref_runs, diff = [], [], 0.0
    # Launches alternate so that a change in the machine's load between them
    # falls on both sides.
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            tess_runs.append(run_tessera(args, tmp))
            ref_runs.append(run_torch(args, tmp))
            out_t = np.load(os.path.join(tmp, "tessera_forward.npy"))
            out_p = np.load(os.path.join(tmp, "torch_forward.npy"))
        diff = max(diff, float(np.abs(out_t - out_p).max()))
    tess, ref = tess_runs[0], ref_runs[0]

    print(machine_line())
    print(f"ranks: {RANKS} on this machine, threads per rank: {args.threads} (tessera: "
          f"`tessera run -n {RANKS} --threads {args.threads}`, {tess['threads']} worker(s) + its "
          f"MPI progress thread per rank; PyTorch {ref['torch']} DDP (gloo), torch.set_num_threads("
          f"{ref['threads']})); global batch {args.batch}, {args.batch // RANKS} rows per rank; "
          f"slowest rank, median of {args.repeats} after {args.warmup} warm-up"
          f"{f', over {args.runs} alternating launches of each side' if args.runs > 1 else ''}")
    print(f"tessera: {args.build}/tessera, Python package {tess['module']}")
    print(f"load average (1 min) before the run: {load_before:.2f} (above ~0.5, other work shared "
          "the cores and the figures are noisy)")
    print(f"same initial weights: gathered forward outputs differ by at most {diff:.1e}; "
          f"loss of the first step: tessera {tess['first_loss']:.4f}, DDP {ref['first_loss']:.4f} "
          "(dropout masks differ)")
    print(f"\n{'what':<40} {'tessera s':>10} {'DDP s':>8} {'tessera/DDP':>12}")
    rows = {}
    for key, label in (("forward", f"forward (predict), batch {args.batch}"),
                       ("step", f"training step (Adam), batch {args.batch}")):
        t = statistics.median([v for r in tess_runs for v in slowest(r[key])])
        d = statistics.median([v for r in ref_runs for v in slowest(r[key])])
        rows[key] = {"tessera_s": t, "ddp_s": d}
        print(f"{label:<40} {t:>10.3f} {d:>8.3f} {t / d:>12.2f}")
    r = rows["step"]["tessera_s"] / rows["step"]["ddp_s"]
    print(f"\ntarget: the 2-locality training step faster than DDP (ratio < 1): "
          f"{'met' if r < 1 else 'not met'} ({r:.2f})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_line(), "ranks": RANKS, "threads": args.threads,
                       "batch": args.batch, "date": time.strftime("%Y-%m-%d %H:%M"),
                       "medians": rows, "forward_max_abs_diff": diff, "tessera": tess_runs,
                       "ddp": ref_runs}, fh, indent=1)


if __name__ == "__main__":
    main()
