"""Models bigger than one locality (issue 28): tessera's mesh strategies against PyTorch's.

One GPT (token + position embedding, L pre-LayerNorm blocks of causal multi-head attention and a
GELU MLP, a final LayerNorm and a Dense to the vocabulary; fp32, Adam) trained for a few steps by
each strategy on R ranks of this machine, one thread per rank, tessera and PyTorch launches
alternating (--runs times each):

  config  tessera                                   PyTorch 2.13 (CPU, gloo)
  dp      fit, data parallel over every rank         DistributedDataParallel
  zero1   fit(zero=1)                                DDP + ZeroRedundancyOptimizer
  zero2   fit(zero=2)                                FSDP2 fully_shard per block,
                                                     reshard_after_forward=False
  zero3   fit(zero=3)                                FSDP2 fully_shard per block
  tp      tensor-parallel layers, Mesh(tensor=R)     DTensor ColwiseParallel/RowwiseParallel
  pp      pipeline, Mesh(pipeline=R), 1F1B,          torch.distributed.pipelining Schedule1F1B
          the peer's split (pipeline_split)          (ceil(modules / R) modules per stage)
  2d      Mesh(data=R/2, tensor=2), zero 3           FSDP2 x TP on a (R/2, 2) device mesh
  3d      Mesh(data=R/4, tensor=2, pipeline=2),      the 2d peer (PyTorch's 2-D setup; issue 28
          zero 3, 1F1B (data=1 on 4 ranks)           compares both meshes against it)

--hosts 2 runs every launch across two emulated hosts (network namespaces made by
tests/distributed/netns/hosts.sh, joined by a bridge; needs root): R/2 ranks on each, ranks
0..R/2-1 on node1, so a tensor pair stays on one host. tessera run starts them through the rsh
agent of the namespaces (--hosts node1:R/2,node2:R/2); PyTorch's workers are started R/2 per
host by one spawner in each namespace, gloo over the namespaces' eth0 (GLOO_SOCKET_IFNAME).
Between hosts both sides talk TCP over the veth pair; within a host, as without --hosts.

Every rank reports its peak RSS above its baseline after the imports (VmHWM - VmRSS at the
baseline, from /proc/self/status; tessera's at the end of its last step, before fit's end gathers
the whole model state back into the model under ZeRO, which the peers do not do), the
model-state bytes it holds (parameters + gradients + optimizer state, counted from the arrays),
and the time between consecutive step ends; a step's
time is the slowest rank's, the figure the median over the steps after --warmup, then the median
over runs. Each rank also reports its process's CPU time (every thread) per timed step; the sum
over the ranks is printed beside the step (on a machine that other jobs share, the CPU a side
needs varies less than its wall time). A strategy tessera does not have yet is reported as such,
not raced.

The peer at its best: tcmalloc (LD_PRELOAD, fair.py) for every launch, PyTorch's fused Adam where
the strategy allows it (not under ZeroRedundancyOptimizer / DTensor / FSDP2, whose foreach path is
their default), torch.set_num_threads(1) per rank as tessera's --threads 1. PyTorch runs eager;
with --torch-compile it also runs compiled (a third launch per round, alternating with the
others): each module of the model (the embedding, every block, the head) is compiled in place
(`module.compile()`, TorchInductor's C++ backend on CPU) before it is wrapped: before DDP and
FSDP2's fully_shard (as PyTorch's FSDP2 docs recommend: per block), after DTensor's
parallelize_module and before FSDP2 in the 2-D setup (torchtitan's order), and before
PipelineStage for the pipeline's stage modules. The first steps then include the compilation:
give --warmup 2 or more. Both PyTorch figures are printed, the ratio is against the faster
(the peer's best), and a combination that fails is reported with its error, not raced.

run: .venv/bin/python bench/bench_mesh.py [--configs dp,zero1,zero2,zero3,tp,pp,2d,3d] [--ranks 4]
         [--sides tessera,torch]
         [--layers 8] [--d 512] [--heads 8] [--context 64] [--batch 8] [--steps 8]
         [--warmup 3] [--microbatches 4] [--runs 3] [--hosts 1|2] [--build build]
         [--json out.json] [--trace DIR] [--torch-compile]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fair import allocator_env, ensure_allocator, load_average  # noqa: E402
from machine import end_torch_worker, free_port, machine_line  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VOCAB = 96
CONFIGS = ("dp", "zero1", "zero2", "zero3", "tp", "pp", "2d", "3d")
HOSTS_SH = os.path.join(ROOT, "tests", "distributed", "netns", "hosts.sh")


def status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def data(args):
    """The same token batches on every rank and both sides (each side takes its rows)."""
    rng = np.random.default_rng(0)
    n = args.batch * (args.steps + args.warmup)
    x = rng.integers(0, VOCAB, size=(n, args.context), dtype=np.int32)
    y = np.roll(x, -1, axis=1)
    return x, y


def n_params(args) -> int:
    d, L = args.d, args.layers
    per_block = 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 4 * d
    return VOCAB * d + args.context * d + L * per_block + 2 * d + d * VOCAB + VOCAB


# ---------------------------------------------------------------- PyTorch

def torch_gpt(torch, args):
    F = torch.nn.functional
    d, hd = args.d, args.d // args.heads

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(d, eps=1e-5)
            self.q = torch.nn.Linear(d, d)
            self.k = torch.nn.Linear(d, d)
            self.v = torch.nn.Linear(d, d)
            self.o = torch.nn.Linear(d, d)
            self.ln2 = torch.nn.LayerNorm(d, eps=1e-5)
            self.fc1 = torch.nn.Linear(d, 4 * d)
            self.fc2 = torch.nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            a = self.ln1(x)
            # -1 heads: under tensor parallelism each rank holds its heads' columns
            q, k, v = (p(a).view(b, t, -1, hd).transpose(1, 2) for p in (self.q, self.k, self.v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(VOCAB, d)
            self.pos = torch.nn.Parameter(torch.randn(args.context, d) * 0.02)

        def forward(self, ids):
            return self.tok(ids) + self.pos

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_f = torch.nn.LayerNorm(d, eps=1e-5)
            self.head = torch.nn.Linear(d, VOCAB)

        def forward(self, h):
            return self.head(self.ln_f(h))

    torch.manual_seed(0)
    return torch.nn.Sequential(Embed(), *[Block() for _ in range(args.layers)], Head())


def compile_modules(mods, args):
    """--torch-compile: each module compiled in place, before it is wrapped (docstring)."""
    if args.compile:
        for m in mods:
            m.compile()


def torch_worker(local, port, args, out_path):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    R = args.ranks
    # across emulated hosts: this spawner's first rank and the master's address (node1)
    rank = args.first_rank + local
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{port}", rank=rank,
                            world_size=R)
    base = status_kib("VmRSS")
    x_all, y_all = data(args)
    cfg = args.config
    net = torch_gpt(torch, args)
    loss_fn = torch.nn.functional.cross_entropy
    step = None
    if cfg in ("dp", "zero1", "zero2", "zero3"):
        compile_modules(net, args)
    if cfg == "dp":
        model = torch.nn.parallel.DistributedDataParallel(net)
        opt = torch.optim.Adam(model.parameters(), 1e-4, fused=True)
    elif cfg == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        model = torch.nn.parallel.DistributedDataParallel(net)
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                      lr=1e-4)
    elif cfg in ("zero2", "zero3"):
        from torch.distributed.fsdp import fully_shard
        for blk in net:
            fully_shard(blk, reshard_after_forward=(cfg == "zero3"))
        fully_shard(net, reshard_after_forward=(cfg == "zero3"))
        model = net
        opt = torch.optim.Adam(model.parameters(), 1e-4)
    elif cfg in ("tp", "2d"):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)
        if cfg == "tp":
            mesh = init_device_mesh("cpu", (R,), mesh_dim_names=("tp",))
            tp_mesh = mesh
        else:
            mesh = init_device_mesh("cpu", (R // 2, 2), mesh_dim_names=("dp", "tp"))
            tp_mesh = mesh["tp"]
        plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                "o": RowwiseParallel(), "fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
        for blk in list(net)[1:-1]:
            parallelize_module(blk, tp_mesh, plan)
        compile_modules(net, args)
        if cfg == "2d":
            from torch.distributed.fsdp import fully_shard
            for blk in net:
                fully_shard(blk, mesh=mesh["dp"])
            fully_shard(net, mesh=mesh["dp"])
        model = net
        opt = torch.optim.Adam(model.parameters(), 1e-4)
    elif cfg == "pp":
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B
        mods = list(net)
        per = -(-len(mods) // R)
        stage_mod = torch.nn.Sequential(*mods[rank * per:(rank + 1) * per])
        del net, mods
        compile_modules(stage_mod, args)
        stage = PipelineStage(stage_mod, rank, R, torch.device("cpu"))
        model = stage_mod

        def pp_loss(logits, y):
            return loss_fn(logits.reshape(-1, VOCAB), y.reshape(-1).long())

        sched = Schedule1F1B(stage, n_microbatches=args.microbatches, loss_fn=pp_loss)
        opt = torch.optim.Adam(model.parameters(), 1e-4, fused=True)

        def step(x, y):
            opt.zero_grad()
            if rank == 0:
                sched.step(x)
            elif rank == R - 1:
                sched.step(target=y)
            else:
                sched.step()
            opt.step()
    else:
        raise SystemExit(f"unknown config {cfg}")

    # each data replica's rows of the global batch
    if cfg in ("dp", "zero1", "zero2", "zero3"):
        replicas, replica = R, rank
    elif cfg == "2d":
        replicas, replica = R // 2, rank // 2
    else:
        replicas, replica = 1, 0

    if step is None:
        def step(x, y):
            opt.zero_grad()
            logits = model(x)
            loss = loss_fn(logits.reshape(-1, VOCAB), y.reshape(-1).long())
            loss.backward()
            opt.step()

    ends, cpus = [], []
    B = args.batch
    dist.barrier()
    ends.append(time.perf_counter())
    cpus.append(time.process_time())
    for s in range(args.steps + args.warmup):
        rows = slice(s * B + replica * B // replicas, s * B + (replica + 1) * B // replicas)
        step(torch.from_numpy(x_all[rows]).long(), torch.from_numpy(y_all[rows]).long())
        ends.append(time.perf_counter())
        cpus.append(time.process_time())

    def local_bytes(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()

    params = list(model.parameters())
    state = sum(local_bytes(p) for p in params)
    state += sum(local_bytes(p.grad) for p in params if p.grad is not None)
    if cfg == "zero1":
        inner = opt.optim.state
    else:
        inner = opt.state
    for st in inner.values():
        state += sum(local_bytes(v) for v in st.values() if torch.is_tensor(v) and v.dim() > 0)
    report(dist, torch, rank, R, base, state, ends, cpus, args, out_path)


def cpu_per_step(cpus, args) -> float:
    """This process's CPU seconds (every thread) per timed step."""
    return (cpus[-1] - cpus[args.warmup]) / max(len(cpus) - 1 - args.warmup, 1)


def report(dist, torch, rank, R, base, state, ends, cpus, args, out_path):
    steps = np.diff(np.asarray(ends))[args.warmup:]
    t = torch.tensor(steps, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    peak = torch.tensor([(status_kib("VmHWM") - base) * 1024.0, float(state),
                         cpu_per_step(cpus, args)], dtype=torch.float64)
    every = [torch.zeros(3, dtype=torch.float64) for _ in range(R)]
    dist.all_gather(every, peak)
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump({"step": float(np.median(t.numpy())),
                       "peak": [float(e[0]) for e in every],
                       "state": [float(e[1]) for e in every],
                       "cpu": [float(e[2]) for e in every]}, fh)
    end_torch_worker(dist)


def run_torch(args, out_path):
    import torch.multiprocessing as mp

    port = args.port or free_port()
    mp.spawn(torch_worker, args=(port, args, out_path), nprocs=args.local_ranks or args.ranks)


# ---------------------------------------------------------------- tessera

def tessera_gpt(args, tensor_group=None):
    import tessera
    from tessera import nn

    class PositionEmbedding(nn.Layer):
        def build(self, input_shape):
            self.table = self.add_weight(shape=tuple(input_shape[-2:]),
                                         initializer=nn.initializers.RandomNormal(0.0, 0.02),
                                         name="embeddings")

        def call(self, x):
            return x + self.table

    d = args.d
    inp = nn.Input((args.context,), dtype="int32")
    h = PositionEmbedding(name="pos")(nn.Embedding(VOCAB, d, name="tok")(inp))
    par = tessera_parallel_layers(tensor_group)
    for i in range(args.layers):
        a = nn.LayerNormalization(epsilon=1e-5, name=f"ln1_{i}")(h)
        a = par["mha"](args.heads, d // args.heads, name=f"mha_{i}")(a, a, use_causal_mask=True)
        h = nn.Add()([h, a])
        m = nn.LayerNormalization(epsilon=1e-5, name=f"ln2_{i}")(h)
        m = par["col"](4 * d, activation="gelu", name=f"fc1_{i}")(m)
        m = par["row"](d, name=f"fc2_{i}")(m)
        h = nn.Add()([h, m])
    h = nn.LayerNormalization(epsilon=1e-5, name="ln_f")(h)
    model = nn.Model(inp, nn.Dense(VOCAB, name="head")(h), seed=0)
    model.compile(tessera.optim.Adam(1e-4),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def tessera_parallel_layers(group):
    """The layer constructors of one block: plain, or split over `group`."""
    from tessera import nn

    if group is None:
        return {"mha": nn.MultiHeadAttention, "col": nn.Dense, "row": nn.Dense}
    return {"mha": lambda *a, **k: nn.ParallelMultiHeadAttention(*a, group=group, **k),
            "col": lambda *a, **k: nn.ColumnParallelDense(*a, group=group, **k),
            "row": lambda *a, **k: nn.RowParallelDense(*a, group=group, **k)}


def tessera_worker(args, out_path):
    import inspect

    import tessera
    from tessera import distributed as dist
    from tessera import nn

    base = status_kib("VmRSS")
    x, y = data(args)
    cfg = args.config
    R = dist.size()
    fit_kw = {}
    params = inspect.signature(nn.Model.fit).parameters
    mesh = dist.mesh()
    group = None
    if cfg.startswith("zero") or cfg in ("2d", "3d"):
        if "zero" not in params:
            raise NotImplementedError("fit(zero=...)")
        fit_kw["zero"] = 3 if cfg in ("2d", "3d") else int(cfg[-1])
    if cfg in ("tp", "2d", "3d"):
        group = mesh.group("tensor")
    if cfg in ("pp", "3d"):
        P = mesh.size("pipeline")
        if "microbatches" not in params:
            raise NotImplementedError("pipeline parallelism in fit")
        fit_kw["microbatches"] = args.microbatches
        # The peer's split (torch_worker): the embedding, the blocks and the
        # head (final LayerNorm + Dense) as modules, ceil(modules / R) per
        # stage; each stage starts at its first module's first layer.
        firsts = ["tok"] + [f"ln1_{i}" for i in range(args.layers)] + ["ln_f"]
        per = -(-len(firsts) // P)
        fit_kw["pipeline_split"] = [firsts[s * per] for s in range(1, P)]
    model = tessera_gpt(args, group)
    ends, cpus = [], []
    held = {}

    class Clock(nn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.perf_counter())
            cpus.append(time.process_time())
            # the model state as held during fit (after fit the model is whole again)
            held["state"] = model.model_state_bytes()["total"]
            # the peak through the steps, before fit's end gathers the whole model state
            # back into the model under ZeRO (which the PyTorch peers do not do)
            held["hwm"] = status_kib("VmHWM")

    dist.barrier()
    ends.append(time.perf_counter())
    cpus.append(time.process_time())
    model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0,
              callbacks=[Clock()], **fit_kw)
    state = held["state"]
    steps = np.diff(np.asarray(ends))[args.warmup:]
    slowest = np.asarray(dist.all_reduce(steps, "max"))
    mine = np.array([(held["hwm"] - base) * 1024.0, float(state),
                     (status_kib("VmHWM") - base) * 1024.0, cpu_per_step(cpus, args)])
    every = np.asarray(dist.all_gather(mine)).reshape(R, 4)
    if dist.rank() == 0:
        with open(out_path, "w") as fh:
            json.dump({"step": float(np.median(slowest)), "peak": every[:, 0].tolist(),
                       "state": every[:, 1].tolist(), "fit_peak": every[:, 2].tolist(),
                       "cpu": every[:, 3].tolist()}, fh)
    del tessera


MESHES = {"dp": "data={R}", "zero1": "data={R}", "zero2": "data={R}", "zero3": "data={R}",
          "tp": "tensor={R}", "pp": "pipeline={R}", "2d": "data={H},tensor=2",
          "3d": "data={Q},tensor=2,pipeline=2"}
PEER = {"3d": "2d"}  # the PyTorch setup a config races


def launch(side, args, config):
    """One launch of one side; the parsed result, or a reason string."""
    out = os.path.join(args.tmp, f"{side}-{config}.json")
    if os.path.exists(out):
        os.remove(out)
    worker = "torch" if side == "torch-compiled" else side
    me = [os.path.abspath(__file__), "--worker", worker, "--config",
          config if side == "tessera" else PEER.get(config, config), "--out", out] + \
        args.forward + (["--compile"] if side == "torch-compiled" else [])
    env = allocator_env("tcmalloc")
    env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if side == "tessera":
        mesh = MESHES[config].format(R=args.ranks, H=args.ranks // 2, Q=max(args.ranks // 4, 1))
        cmd = [os.path.join(ROOT, args.build, "tessera"), "run", "-n", str(args.ranks),
               "--threads", "1", "--mesh", mesh] + \
            (["--trace", f"{args.trace}-{config}"] if args.trace else [])
        env["TESSERA_PYTHON"] = sys.executable
        env["PYTHONPATH"] = os.path.join(ROOT, "python")  # this checkout's, on every host
        if args.hosts == 2:  # started on node1, the ranks through the namespaces' rsh agent
            half = args.ranks // 2
            cmd += ["--hosts", f"node1:{half},node2:{half}", "--mca", "plm_rsh_agent",
                    f"/tmp/tessera-netns/{args.prefix}/agent", "-x", "LD_PRELOAD"]
            cmd = [HOSTS_SH, "run", args.prefix, "node1", " ".join(cmd + me)]
        else:
            cmd += me
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elif args.hosts == 2:  # one spawner of R/2 workers per host, gloo over eth0
        half, port = args.ranks // 2, free_port()
        env["GLOO_SOCKET_IFNAME"] = "eth0"
        procs = [subprocess.Popen(
            [HOSTS_SH, "run", args.prefix, f"node{h + 1}", " ".join(
                [sys.executable] + me + ["--first-rank", str(h * half), "--local-ranks",
                                         str(half), "--master", "10.77.0.1", "--port",
                                         str(port)])],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for h in range(2)]
        texts = [p.communicate()[0] for p in procs]
        proc = subprocess.CompletedProcess(procs[0].args, max(p.returncode for p in procs),
                                           "".join(texts), "")
    else:
        proc = subprocess.run([sys.executable] + me, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not os.path.exists(out):
        text = proc.stdout + proc.stderr
        for line in reversed(text.splitlines()):
            if "NotImplementedError:" in line:
                return "not built yet: " + line.split("NotImplementedError:")[-1].strip()
        return f"failed (exit {proc.returncode}): {text[-1500:]}"
    with open(out) as fh:
        return json.load(fh)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=1, choices=(1, 2))
    ap.add_argument("--build", default="build")
    ap.add_argument("--sides", default="tessera,torch",
                    help="tessera alone (--sides tessera) for quick comparisons of its strategies")
    ap.add_argument("--json")
    # a PyTorch spawner's part of the job (--hosts 2: one spawner per host)
    ap.add_argument("--first-rank", type=int, default=0)
    ap.add_argument("--local-ranks", type=int, default=0)
    ap.add_argument("--master", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--worker", choices=("tessera", "torch"))
    ap.add_argument("--config", choices=CONFIGS)
    ap.add_argument("--out")
    ap.add_argument("--trace", help="tessera launches traced into TRACE-<config> (tessera run "
                    "--trace; bench/pipeline_phases.py reads it; slows tessera a little)")
    ap.add_argument("--torch-compile", action="store_true",
                    help="also race PyTorch compiled (torch.compile of each module before it is "
                    "wrapped); the ratio is against the faster of eager and compiled")
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)  # a worker's
    args = ap.parse_args()
    if args.worker == "torch":
        return run_torch(args, args.out)
    if args.worker == "tessera":
        return tessera_worker(args, args.out)

    ensure_allocator("tcmalloc")
    if "torch" in args.sides.split(","):
        import torch
        version = torch.__version__
    else:
        version = "(not run)"

    args.forward = [f"--{k}={getattr(args, k)}" for k in
                    ("ranks", "layers", "d", "heads", "context", "batch", "steps", "warmup",
                     "microbatches")]
    psi = n_params(args)
    print("== bench_mesh: models bigger than one locality, tessera vs PyTorch")
    print(machine_line())
    if args.hosts == 2:
        if args.ranks % 2:
            ap.error(f"--hosts 2 needs an even --ranks, got {args.ranks}")
        args.prefix = f"bm{os.getpid()}"
        up = subprocess.run([HOSTS_SH, "up", args.prefix, "2"], capture_output=True, text=True)
        if up.returncode != 0:
            print(f"--hosts 2: cannot make emulated hosts: {up.stderr.strip()}")
            return 1
        print(f"hosts: 2 emulated (network namespaces {args.prefix}-node1/2, a veth bridge), "
              f"{args.ranks // 2} ranks on each")
    try:
        return race(args, psi, version)
    finally:
        if args.hosts == 2:
            subprocess.run([HOSTS_SH, "down", args.prefix], capture_output=True)


def race(args, psi, version):
    mode = ("eager, and compiled (torch.compile of each module before it is wrapped; the "
            "ratio against the faster)" if args.torch_compile else "eager (no torch.compile: "
            "--torch-compile races it too)")
    print(f"ranks: {args.ranks} x 1 thread (oversubscribed when above the cores); PyTorch "
          f"{version} with gloo, {mode}, fused Adam where the "
          "strategy allows it; allocator tcmalloc for both (fair.py)")
    print(f"model: GPT, {args.layers} blocks, d={args.d}, {args.heads} heads, context "
          f"{args.context}, vocabulary {VOCAB}: {psi / 1e6:.1f} M parameters; Adam fp32; "
          f"global batch {args.batch}; {args.steps} steps timed after {args.warmup}")
    print(f"load average at start: {load_average()}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        for config in args.configs.split(","):
            order = ["tessera", "torch"] + ["torch-compiled"] * args.torch_compile
            runs = {side: [] for side in order}
            sides = args.sides.split(",") + \
                ["torch-compiled"] * ("torch" in args.sides.split(","))
            for r in range(args.runs):
                for side in (order if r % 2 == 0 else order[::-1]):
                    runs[side].append(launch(side, args, config) if side in sides else
                                      "not run (--sides)")
            results[config] = runs
            print_config(config, runs, psi, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


def print_config(config, runs, psi, args):
    def summary(rs):
        ok = [r for r in rs if isinstance(r, dict)]
        if not ok:
            return None, rs[0]
        step = statistics.median(r["step"] for r in ok)
        peak = statistics.median(max(r["peak"]) for r in ok)
        state = statistics.median(max(r["state"]) for r in ok)
        # CPU seconds per step, each rank's median over the launches
        cpu = [statistics.median(r["cpu"][k] for r in ok) for k in range(len(ok[0]["cpu"]))]
        return (step, peak, state, cpu), None

    t, t_err = summary(runs["tessera"])
    p, p_err = summary(runs["torch"])
    c, c_err = summary(runs["torch-compiled"]) if "torch-compiled" in runs else (None, None)
    print(f"-- {config}" + (f" (PyTorch: its {PEER[config]} setup)" if config in PEER else ""))
    shown = [("tessera", t, t_err), ("pytorch", p, p_err)]
    if "torch-compiled" in runs:
        shown.append(("compiled", c, c_err))
    for name, s, err in shown:
        if s is None:
            print(f"   {name:8s} {err if isinstance(err, str) else err}")
        else:
            print(f"   {name:8s} step {s[0] * 1e3:8.1f} ms   peak RSS above baseline "
                  f"{s[1] / 2**20:7.1f} MiB (largest rank)   model state {s[2] / 2**20:7.1f} MiB "
                  f"({s[2] / psi:.2f} B/param)")
            print(f"   {'':8s} CPU per step {sum(s[3]) * 1e3:8.1f} ms over the ranks (each: "
                  + ", ".join(f"{c * 1e3:.0f}" for c in s[3]) + ")")
    if p and c:
        print(f"   PyTorch compiled / eager: step {c[0] / p[0]:.2f}, CPU per step "
              f"{sum(c[3]) / sum(p[3]):.2f}; the peer's best: "
              f"{'compiled' if c[0] < p[0] else 'eager'}")
    best = min((x for x in (p, c) if x), key=lambda x: x[0], default=None)
    if t and best:
        which = "" if best is p or c is None else " (compiled)"
        print(f"   ratio tessera/pytorch{which}: step {t[0] / best[0]:.2f}, peak memory "
              f"{t[1] / best[1]:.2f}, CPU per step {sum(t[3]) / sum(best[3]):.2f}")


if __name__ == "__main__":
    main()
