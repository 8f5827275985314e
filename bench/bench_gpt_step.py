"""One locality's GPT training step (issue 28's base): tessera against PyTorch at its best,
same process, interleaved.

The GPT of bench_mesh.py (token + position embedding, L pre-LayerNorm blocks of causal
multi-head attention and a GELU MLP 4d, a final LayerNorm and a Dense to the vocabulary of 96;
fp32, Adam lr 1e-4), by default layers 8, d 512, heads 8, context 64, batch 8: 25.4 M
parameters, 512 tokens per step. Both sides build the model with bench_mesh.py's own functions
(tessera_gpt, torch_gpt: PyTorch has separate q/k/v Linears and
F.scaled_dot_product_attention(is_causal=True)), so the race is the same model as the mesh
races' base.

  tessera   model.fit on one batch of `batch` sequences (one optimizer step)
  eager     zero_grad, forward, cross_entropy, backward, Adam(fused=True).step
  compiled  the same step with the model torch.compile'd (inductor, default mode)

Times: fair.interleave (the order rotating each round, 0.1 s pause before each call), 1 warm-up
round, medians of --rounds; the ratio is tessera / the faster PyTorch. Both sides run under the
allocator chosen by --allocator (default: glibc with MALLOC_MMAP_MAX_=0
MALLOC_TRIM_THRESHOLD_=100000000000, issue 28's peer configuration; fair.py re-executes the
script under it). Thread counts are equal: tessera.set_num_threads(T), torch.set_num_threads(T).

run: .venv/bin/python bench/bench_gpt_step.py [--threads 1,2] [--rounds 5] [--layers 8]
         [--d 512] [--heads 8] [--context 64] [--batch 8] [--allocator glibc-tuned]
         [--no-compile] [--json FILE]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fair  # noqa: E402
from bench_mesh import VOCAB, n_params, tessera_gpt, torch_gpt  # noqa: E402


def race(threads, args):
    import torch

    import tessera

    torch.set_num_threads(threads)
    tessera.set_num_threads(threads)
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, size=(args.batch, args.context), dtype=np.int32)
    y = np.roll(x, -1, axis=1)
    model = tessera_gpt(args)
    net = torch_gpt(torch, args)
    opt = torch.optim.Adam(net.parameters(), 1e-4, fused=True)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()

    def torch_step(m):
        def step():
            opt.zero_grad()
            logits = m(xt)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), yt.reshape(-1))
            loss.backward()
            opt.step()
        return step

    fns = {"tessera": lambda: model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0,
                                        shuffle=False),
           "eager": torch_step(net)}
    note = ""
    if not args.no_compile:
        torch._dynamo.reset()
        cnet = fair.try_compile(torch, net, "the GPT")
        if cnet is not None:
            step = torch_step(cnet)
            s = fair.first_call(step, "compiled GPT step")
            if s is not None:
                fns["compiled"] = step
                note = f"; compiled step's first call {s:.1f} s"
    times = fair.interleave(fns, args.rounds, warmup=1)
    times["_note"] = note
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--allocator", default="glibc-tuned", choices=list(fair.ALLOCATORS))
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    fair.ensure_allocator(args.allocator)
    threads = [int(t) for t in args.threads.split(",")]
    fair.header("GPT training step on one locality, tessera vs PyTorch at its best", args.threads, [
        f"model: bench_mesh.py's GPT, layers {args.layers}, d {args.d}, heads {args.heads}, "
        f"context {args.context}, vocab {VOCAB}, {n_params(args) / 1e6:.1f} M parameters; "
        f"batch {args.batch} ({args.batch * args.context} tokens); Adam",
        f"step: medians of {args.rounds} interleaved rounds after 1 warm-up round",
        "PyTorch: separate q/k/v Linears, F.scaled_dot_product_attention(is_causal=True), "
        "Adam(fused=True); eager and torch.compile (inductor), the faster is the peer"])
    results = {t: race(t, args) for t in threads}
    print(f"\n{'thr':>3} {'tessera s':>10} {'eager s':>8} {'compiled s':>11} {'best':>9} "
          f"{'ratio':>6}  spread tessera / eager")
    summary = {}
    for t in threads:
        r = results[t]
        x = fair.race(r)
        pc = x["compiled"]
        print(f"{t:>3} {x['tessera']:>10.3f} {x['eager']:>8.3f} "
              f"{(f'{pc:.3f}' if pc else '-'):>11} {x['best_name']:>9} {x['ratio']:>6.2f}  "
              f"{fair.spread(r['tessera'])} / {fair.spread(r['eager'])}{r['_note']}")
        summary[f"{t}t"] = {k: x[k] for k in ("tessera", "eager", "compiled", "ratio")}
    print(f"load average at end: {fair.load_average()}")
    if args.json:
        tmp = f"{args.json}.tmp{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump({"machine": fair.machine_line(), "allocator": args.allocator,
                       "date": time.strftime("%Y-%m-%d %H:%M"), "summary": summary,
                       "raw": {str(t): {k: v for k, v in r.items() if k != "_note"}
                               for t, r in results.items()}}, fh, indent=1)
        os.replace(tmp, args.json)


if __name__ == "__main__":
    sys.exit(main())
