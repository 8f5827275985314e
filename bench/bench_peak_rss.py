"""Peak memory (resident set) of training: tessera against PyTorch, each in a
process of its own that imports only its framework.

For each workload (the HAR CNN at batch 8000 of bench_har_cnn.py, the char-GPT
at batch 32 of bench_char_gpt.py, the ResNet at batch 128 of bench_resnet.py) a
child process imports its framework, makes the data and the model, notes its
resident set (VmRSS: the baseline), runs --steps training steps (tessera:
model.fit on one batch; PyTorch eager: forward, loss, backward,
Adam/AdamW(fused=True) step) and reports getrusage's ru_maxrss (the peak). Each
framework runs under each of --allocators (default: tcmalloc, the races'
allocator; glibc-tuned, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000;
and stock glibc malloc); each side's figure is its lowest. PyTorch runs eager: a
torch.compile'd step's process also holds the compiler (several hundred MB).

Target (issue 16): tessera's peak RSS <= PyTorch's.

run: .venv/bin/python bench/bench_peak_rss.py [--workloads har,gpt,resnet] [--threads 1]
         [--steps 3] [--allocators tcmalloc,glibc-tuned,glibc]
"""

import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

import fair


def vm_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(args):
    work, side = args.workload, args.side
    if side == "tessera":
        import tessera

        tessera.set_num_threads(args.threads)
    else:
        import torch

        torch.set_num_threads(args.threads)
    if work == "har":
        import bench_har_cnn as b

        x, y = b.make_data(8000)
        batch = 8000
        if side == "tessera":
            model = b.tessera_model()
        else:
            net = b.torch_model(torch)
            xt, yt = torch.from_numpy(b.to_torch_layout(x)), torch.from_numpy(y)
            opt = torch.optim.Adam(net.parameters(), 1e-3, fused=True)
    elif work == "gpt":
        import bench_char_gpt as b

        train_ids, _, vocab, _ = b.make_corpus()
        x, y = b.batches(train_ids, 1, b.BATCH, seed=1)[0]
        batch = b.BATCH
        if side == "tessera":
            model = b.tessera_model(vocab)
        else:
            net = b.torch_model(torch, vocab)
            xt, yt = torch.from_numpy(x), torch.from_numpy(y)
            opt = torch.optim.AdamW(net.parameters(), 3e-4, weight_decay=0.01, eps=1e-8,
                                    fused=True)
    else:
        import bench_resnet as b

        x, y = b.make_data(128)
        batch = 128
        if side == "tessera":
            model = b.tessera_model()
        else:
            net = b.torch_model(torch)
            xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
            yt = torch.from_numpy(y)
            opt = torch.optim.Adam(net.parameters(), 1e-3, fused=True)
    base = vm_rss_mb()
    for _ in range(args.steps):
        if side == "tessera":
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
        else:
            opt.zero_grad()
            out = net(xt)
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                     yt.reshape(-1).long())
            loss.backward()
            opt.step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"base_mb": base, "peak_mb": peak, "end_mb": vm_rss_mb()}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default="har,gpt,resnet")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--allocators", default="tcmalloc,glibc-tuned,glibc")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    p.add_argument("--side", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    fair.header("peak RSS of training, tessera vs PyTorch (eager), a process per framework",
                args.threads, [f"{args.steps} training steps per process; ru_maxrss (peak) and "
                               "VmRSS before the first step (base)"], allocator=False)
    allocs = args.allocators.split(",")
    labels = {"har": "HAR CNN, batch 8000", "gpt": "char-GPT, batch 32x128",
              "resnet": "ResNet 28x28, batch 128"}
    print(f"\n{'workload':<24} {'side':<8} {'allocator':<12} {'base MB':>8} {'peak MB':>8} "
          f"{'peak-base':>10}")
    summary = {}
    for work in args.workloads.split(","):
        got = {}
        for alloc in allocs:
            for side in ("tessera", "pytorch"):
                proc = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--child", "--workload", work,
                     "--side", side, "--threads", str(args.threads), "--steps", str(args.steps)],
                    env=fair.allocator_env(alloc), capture_output=True, text=True)
                if proc.returncode != 0:
                    print(f"{work} {side} {alloc}: failed\n{proc.stderr[-2000:]}")
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                got[(side, alloc)] = r
                print(f"{labels[work]:<24} {side:<8} {alloc:<12} {r['base_mb']:>8.0f} "
                      f"{r['peak_mb']:>8.0f} {r['peak_mb'] - r['base_mb']:>10.0f}")
        mine = [v["peak_mb"] for (s, _), v in got.items() if s == "tessera"]
        peer = [v["peak_mb"] for (s, _), v in got.items() if s == "pytorch"]
        if mine and peer:
            ratio = min(mine) / min(peer)
            summary[work] = {"tessera_min_mb": min(mine), "pytorch_min_mb": min(peer),
                             "ratio": ratio}
            print(f"  -> tessera's lowest {min(mine):.0f} MB / PyTorch's lowest "
                  f"{min(peer):.0f} MB = {ratio:.2f} (target <= 1: "
                  f"{'met' if ratio <= 1 else 'NOT met'})")
    print(f"load average at end: {fair.load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
