"""Which allocator is PyTorch (and tessera) fastest under on this machine? The
HAR CNN forward and training step at batch 8000 (bench_har_cnn.py's model,
PyTorch eager in (N, C, L), inference_mode, Adam(fused=True)), timed in child
processes started under each allocator of fair.ALLOCATORS in turn (stock glibc,
glibc with MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000, jemalloc and
tcmalloc by LD_PRELOAD), the launches alternating over --runs cycles; each
child times tessera and PyTorch interleaved. Medians over all rounds.

run: .venv/bin/python bench/bench_allocators.py [--threads 1] [--runs 2] [--rounds 3]
         [--allocators glibc,glibc-tuned,jemalloc,tcmalloc]
"""

import argparse
import json
import os
import subprocess
import sys

import fair

HERE = os.path.dirname(os.path.abspath(__file__))


def child(args):
    import torch

    import tessera
    from bench_har_cnn import copy_weights, make_data, tessera_model, to_torch_layout, torch_model

    torch.set_num_threads(args.threads)
    tessera.set_num_threads(args.threads)
    x, y = make_data(args.batch)
    xt, yt = torch.from_numpy(to_torch_layout(x)), torch.from_numpy(y)
    tm = tessera_model()
    net = torch_model(torch)
    copy_weights(tm, net, torch)
    opt = torch.optim.Adam(net.parameters(), 1e-3, fused=True)

    def p_fwd():
        net.eval()
        with torch.inference_mode():
            torch.softmax(net(xt), 1)

    def p_step():
        net.train()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xt), yt).backward()
        opt.step()

    times = fair.interleave({
        "tessera forward": lambda: tm.predict(x, batch_size=args.batch, verbose=0),
        "PyTorch forward": p_fwd,
        "tessera step": lambda: tm.fit(x, y, batch_size=args.batch, epochs=1, verbose=0,
                                       shuffle=False),
        "PyTorch step": p_step}, args.rounds, warmup=1)
    print(json.dumps(times))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=2, help="cycles over the allocators (default 2)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per child (default 3)")
    p.add_argument("--batch", type=int, default=8000)
    p.add_argument("--allocators", default=",".join(fair.ALLOCATORS))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    names = args.allocators.split(",")
    fair.header("allocators: HAR CNN, batch %d, PyTorch eager (N, C, L) and tessera" % args.batch,
                args.threads, ["each allocator in child processes, launched in turn"],
                allocator=False)
    got = {n: {} for n in names}
    for _ in range(args.runs):
        for n in names:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                   "--threads", str(args.threads), "--rounds", str(args.rounds),
                                   "--batch", str(args.batch)],
                                  env=fair.allocator_env(n), capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{n}: child failed:\n{proc.stderr[-2000:]}")
                continue
            for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                got[n].setdefault(k, []).extend(v)
    keys = ["PyTorch forward", "PyTorch step", "tessera forward", "tessera step"]
    print(f"\n{'allocator':<12} " + " ".join(f"{k + ' s':>17}" for k in keys))
    for n in names:
        if got[n]:
            print(f"{n:<12} " + " ".join(f"{fair.med(got[n][k]):>17.3f}" for k in keys))
    for n in names:
        print(f"  {n}: {fair.ALLOCATORS[n][1]}")
    print(f"load average at end: {fair.load_average()}")


if __name__ == "__main__":
    sys.exit(main())
