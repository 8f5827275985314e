"""The HAR CNN data-parallel on 2 ranks: tessera against PyTorch DistributedDataParallel.

Global batch 8000 (each rank takes its 4000 rows), 2 ranks x 1 thread on this
machine, the model of bench_har_cnn.py and examples/har_cnn.py:

  forward   each rank predicts its rows (inference mode, softmax output) and
            the 8000 x 6 outputs are gathered on every rank (tessera:
            model.predict + distributed.all_gather; PyTorch: the DDP module
            under inference_mode (no_grad in the default configuration) +
            all_gather_single);
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
the slowest rank's (every repetition starts after a barrier), median of the
repetitions after warm-up.

PyTorch is raced at its best (fair.py): the benchmark re-executes itself under
a tuned allocator (default tcmalloc by LD_PRELOAD; --allocator glibc-tuned:
MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000), which every launched
process inherits,
tessera's localities too; the data in PyTorch's (N, C, L) layout; forward under
torch.inference_mode(); torch.optim.Adam(fused=True); DDP eager and
torch.compile(DDP) (the faster is the peer; their repetitions interleave in the
same processes). A further launch times DDP in PyTorch's default configuration
(stock glibc malloc, eager, torch.no_grad(), Adam()) for the ratio most users
would see. Targets (issue 16): forward <= 0.75, step <= 0.6 of the best DDP.

run: .venv/bin/python bench/bench_dp_har.py [--build build] [--repeats 5] [--warmup 2]
         [--runs 1] [--batch 8000] [--threads 1]
         [--allocator tcmalloc|glibc-tuned|jemalloc|glibc] [--no-compile]
         [--no-default] [--json out.json]
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

import fair
from machine import end_torch_worker, free_port, machine_line

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

def _torch_worker(rank, port, args, tmp, default_config):
    os.environ["TESSERA_THREADS"] = "1"  # bench_har_cnn imports tessera; it stays idle
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from bench_har_cnn import copy_weights, to_torch_layout, torch_model

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=RANKS)
    x, y = make_data(args.batch)
    lo, hi = shard(args.batch, rank, RANKS)
    share = (hi - lo) / args.batch
    xs, ys = torch.from_numpy(to_torch_layout(x[lo:hi])), torch.from_numpy(y[lo:hi])

    torch.manual_seed(0)
    net = torch_model(torch)
    with np.load(os.path.join(tmp, "weights.npz")) as w:
        copy_weights(types.SimpleNamespace(weights=dict(w)), net, torch)
    ddp = DDP(net)
    opt = torch.optim.Adam(ddp.parameters(), 1e-3, **({} if default_config else {"fused": True}))
    no_grad = torch.no_grad if default_config else torch.inference_mode

    # all_gather_into_tensor is deprecated in 2.13 in favour of all_gather_single.
    gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def forward_of(module):
        def forward():
            ddp.eval()
            with no_grad():
                out = torch.softmax(module(xs), 1)
                full = torch.empty((args.batch, out.shape[1]), dtype=out.dtype)
                gather_into(full, out.contiguous())
            return full
        return forward

    losses = []

    def step_of(module):
        def step():
            ddp.train()
            opt.zero_grad()
            logits = module(xs)
            loss = torch.nn.functional.cross_entropy(logits, ys)
            loss.backward()
            opt.step()
            # The whole batch's loss and accuracy, as model.fit reports them.
            with torch.no_grad():
                stats = torch.stack([loss.detach(), (logits.argmax(1) == ys).float().mean()]) \
                    * share
            dist.all_reduce(stats)
            losses.append(float(stats[0]))
        return step

    out = forward_of(ddp)().numpy()  # before any step changes the weights
    variants = {"eager": ddp}
    compile_s = {}
    if not (default_config or args.no_compile):
        cddp = torch.compile(ddp)
        for what, fn in (("forward", forward_of(cddp)), ("step", step_of(cddp))):
            dist.barrier()
            t = time.perf_counter()
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                print(f"rank {rank}: compiled DDP {what} failed: {type(e).__name__}: {e}")
                break
            compile_s[what] = time.perf_counter() - t
        else:
            variants["compiled"] = cddp

    def timed(fns):
        """Repetitions interleaved over the variants (the order rotating),
        each after a barrier; every rank's times after warm-up."""
        names = list(fns)
        times = {n: [] for n in names}
        for r in range(args.warmup + args.repeats):
            k = r % len(names)
            for n in names[k:] + names[:k]:
                dist.barrier()
                t = time.perf_counter()
                fns[n]()
                times[n].append(time.perf_counter() - t)
        res = {}
        for n in names:
            every = [torch.zeros(len(times[n]), dtype=torch.float64) for _ in range(RANKS)]
            dist.all_gather(every, torch.tensor(times[n], dtype=torch.float64))
            res[n] = [e[args.warmup:].tolist() for e in every]
        return res

    fwd = timed({n: forward_of(m) for n, m in variants.items()})
    stp = timed({n: step_of(m) for n, m in variants.items()})
    if rank == 0:
        np.save(os.path.join(tmp, "torch_forward.npy"), out)
        with open(os.path.join(tmp, "torch.json"), "w") as fh:
            json.dump({"forward": fwd, "step": stp, "first_loss": losses[0],
                       "compile_s": compile_s, "torch": torch.__version__,
                       "threads": torch.get_num_threads()}, fh)
    dist.barrier()
    end_torch_worker(dist)


def run_torch(args, tmp, default_config=False):
    """DDP in 2 spawned processes; default_config: under stock glibc malloc
    (the spawned processes take the environment of this moment)."""
    import torch.multiprocessing as mp

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    saved = dict(os.environ)
    if default_config:
        os.environ.clear()
        os.environ.update(fair.allocator_env("glibc", saved))
    try:
        mp.spawn(_torch_worker, args=(free_port(), args, tmp, default_config), nprocs=RANKS)
    finally:
        os.environ.clear()
        os.environ.update(saved)
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
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS),
                   help=f"allocator of every process (default {fair.BEST_ALLOCATOR})")
    p.add_argument("--no-compile", action="store_true", help="DDP eager only")
    p.add_argument("--no-default", action="store_true",
                   help="skip the launch of DDP in PyTorch's default configuration")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: batch 512, 1 repetition after 1 warm-up, eager only")
    p.add_argument("--json", metavar="FILE", help="also write every repetition's times to FILE")
    p.add_argument("--worker", choices=["tessera"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker == "tessera":
        return tessera_worker(args)
    if args.quick:
        args.batch, args.repeats, args.warmup, args.runs = 512, 1, 1, 1
        args.no_compile = args.no_default = True
    if args.batch < RANKS or min(args.repeats, args.warmup, args.threads, args.runs) < 1:
        sys.exit("bench_dp_har: --batch must be >= 2; --repeats, --warmup, --threads and --runs "
                 ">= 1")
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("bench_dp_har: PyTorch is not installed (.venv/bin/pip install torch==2.13.0)")
    fair.ensure_allocator(args.allocator)

    load_before = fair.load_average()
    tess_runs, ref_runs, dflt_runs, diff = [], [], [], 0.0
    # Launches alternate so that a change in the machine's load between them
    # falls on every side.
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            tess_runs.append(run_tessera(args, tmp))
            ref_runs.append(run_torch(args, tmp))
            out_t = np.load(os.path.join(tmp, "tessera_forward.npy"))
            out_p = np.load(os.path.join(tmp, "torch_forward.npy"))
            if not args.no_default:
                dflt_runs.append(run_torch(args, tmp, default_config=True))
        diff = max(diff, float(np.abs(out_t - out_p).max()))
    tess, ref = tess_runs[0], ref_runs[0]

    print("== HAR CNN data-parallel, 2 localities x 1 thread: tessera vs DDP (gloo) at its best")
    print(machine_line())
    print(f"ranks: {RANKS} on this machine, threads per rank: {args.threads} (tessera: "
          f"`tessera run -n {RANKS} --threads {args.threads}`, {tess['threads']} worker(s) + its "
          f"MPI progress thread per rank; PyTorch {ref['torch']} DDP (gloo), torch.set_num_threads("
          f"{ref['threads']})); global batch {args.batch}, {args.batch // RANKS} rows per rank; "
          f"slowest rank, median of {args.repeats} after {args.warmup} warm-up"
          f"{f', over {args.runs} alternating launches of each side' if args.runs > 1 else ''}")
    print(f"allocator of every process (tessera's localities and DDP's): "
          f"{fair.allocator_in_use()}")
    print("DDP at its best: (N, C, L) data, forward under torch.inference_mode(), "
          "Adam(fused=True); eager and torch.compile(DDP) interleaved in the same processes, the "
          "faster is the peer. Default configuration ('vs default'): a further launch under stock "
          "glibc malloc, eager, torch.no_grad(), Adam()")
    print(f"tessera: {args.build}/tessera, Python package {tess['module']}")
    print(f"load average before the run: {load_before}")
    print(f"same initial weights: gathered forward outputs differ by at most {diff:.1e}; "
          f"loss of the first step: tessera {tess['first_loss']:.4f}, DDP {ref['first_loss']:.4f} "
          "(dropout masks differ)")
    if ref.get("compile_s"):
        print("compiled DDP, first calls (compilation): " +
              ", ".join(f"{k} {v:.1f} s" for k, v in ref["compile_s"].items()))
    print(f"\n{'what':<34} {'tessera s':>10} {'eager s':>8} {'compiled s':>11} {'best':>9} "
          f"{'ratio':>6} {'target':>12} {'default s':>10} {'vs default':>10}")
    rows = {}
    targets = {"forward": 0.75, "step": 0.6}
    for key, label in (("forward", f"forward (predict), batch {args.batch}"),
                       ("step", f"training step (Adam), batch {args.batch}")):
        t = statistics.median([v for r in tess_runs for v in slowest(r[key])])
        sides = {}
        for variant in ("eager", "compiled"):
            vals = [v for r in ref_runs if variant in r[key] for v in slowest(r[key][variant])]
            if vals:
                sides[variant] = statistics.median(vals)
        best = min(sides.values())
        dvals = [v for r in dflt_runs for v in slowest(r[key]["eager"])]
        d = statistics.median(dvals) if dvals else None
        ratio = t / best
        rows[key] = {"tessera_s": t, "ddp_s": sides, "ddp_best_s": best, "ratio": ratio,
                     "ddp_default_s": d}
        pc = sides.get("compiled")
        print(f"{label:<34} {t:>10.3f} {sides['eager']:>8.3f} "
              f"{(f'{pc:.3f}' if pc else '-'):>11} "
              f"{('compiled' if pc and pc < sides['eager'] else 'eager'):>9} {ratio:>6.2f} "
              f"{f'<={targets[key]} ' + ('met' if ratio <= targets[key] else 'NOT met'):>12} "
              f"{(f'{d:.3f}' if d else '-'):>10} {(f'{t / d:.2f}' if d else '-'):>10}")
    print(f"load average at end: {fair.load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_line(), "ranks": RANKS, "threads": args.threads,
                       "batch": args.batch, "date": time.strftime("%Y-%m-%d %H:%M"),
                       "allocator": args.allocator, "medians": rows,
                       "forward_max_abs_diff": diff, "tessera": tess_runs, "ddp": ref_runs,
                       "ddp_default": dflt_runs}, fh, indent=1)


if __name__ == "__main__":
    main()
