"""Scaled dot-product attention, forward and backward (issue 30): tessera's fused
`attention` primitive against the composed path it replaces in MultiHeadAttention
(matmul, softmax, matmul and their backward primitives) and PyTorch's
F.scaled_dot_product_attention (its CPU flash kernel) and its composed
softmax(q k^T) v, at the keras-io text classifier's shapes (batch 32, 2 heads,
200 tokens, 32 features) or others given.

Each side computes out = softmax(scale * q k^T) v and the gradients of q, k, v for a
given cotangent; medians of interleaved rounds (fair.interleave) of wall time and of
this process's CPU time (all threads), which the machine's other jobs disturb less.

run: .venv/bin/python bench/bench_attention.py [--shape 32,2,200,32] [--threads 1,2]
         [--rounds 15] [--causal]
"""

import argparse
import math
import os
import statistics
import time

import numpy as np

import fair


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="32,2,200,32", help="batch,heads,tokens,features")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS))
    args = p.parse_args()
    fair.ensure_allocator(args.allocator)
    import torch

    import tessera

    b, h, t, d = (int(s) for s in args.shape.split(","))
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.normal(size=(b, h, t, d)).astype(np.float32) for _ in range(4))
    scale = 1.0 / math.sqrt(d)
    call = tessera.call_primitive
    kt = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    vt = np.ascontiguousarray(np.swapaxes(v, -1, -2))
    qs = q * np.float32(scale)
    causal_mask = np.tril(np.ones((t, t), bool))

    def fused():
        call("attention", [q, k, v], {"scale": scale, "causal": args.causal})
        call("attention_grad", [g, q, k, v], {"scale": scale, "causal": args.causal})

    # What MultiHeadAttention ran before: q pre-scaled, P kept (the transposed
    # operands of the two weight-side products are NumPy copies here).
    def composed():
        s = call("matmul", [qs, kt])
        if args.causal:
            s = call("where", [causal_mask, s, np.float32(-1e9)])
        pr = call("softmax", [s])
        call("matmul", [pr, v])
        dp = call("matmul", [g, vt])
        ds = call("softmax_grad", [dp, pr, -1])
        call("matmul", [np.ascontiguousarray(np.swapaxes(pr, -1, -2)), g])
        call("matmul", [ds, k])
        call("matmul", [np.ascontiguousarray(np.swapaxes(ds, -1, -2)), qs])

    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tg = torch.tensor(g)

    def torch_sdpa():
        tq.grad = tk.grad = tv.grad = None
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, scale=scale,
                                                               is_causal=args.causal)
        out.backward(tg)

    tmask = torch.tensor(causal_mask)

    def torch_composed():
        tq.grad = tk.grad = tv.grad = None
        s = (tq * scale) @ tk.transpose(-1, -2)
        if args.causal:
            s = s.masked_fill(~tmask, -1e9)
        out = torch.softmax(s, -1) @ tv
        out.backward(tg)

    fns = {"tessera fused": fused, "tessera composed": composed, "torch sdpa": torch_sdpa,
           "torch composed": torch_composed}
    fair.header(f"attention forward + backward, q k v ({b}, {h}, {t}, {d}) float32"
                f"{', causal' if args.causal else ''}", threads=args.threads, extra=[
                    f"PyTorch {torch.__version__}; medians of {args.rounds} interleaved rounds "
                    "(wall; CPU time of the process)"])
    for threads in (int(s) for s in args.threads.split(",")):
        tessera.set_num_threads(threads)
        torch.set_num_threads(threads)
        cpu = {n: [] for n in fns}

        def timed(name, fn):
            def run():
                c = time.process_time()
                fn()
                cpu[name].append(time.process_time() - c)
            return run

        wall = fair.interleave({n: timed(n, f) for n, f in fns.items()}, args.rounds, warmup=1)
        cpu = {n: c[1:] for n, c in cpu.items()}  # the warm-up round's
        print(f"\n{threads} thread(s):  {'wall ms':>9} {'cpu ms':>9}")
        for n in fns:
            print(f"  {n:<18} {1e3 * fair.med(wall[n]):9.2f} "
                  f"{1e3 * statistics.median(cpu[n]):9.2f}")
        fused = fair.med(wall["tessera fused"])
        best = min(fair.med(wall["torch sdpa"]), fair.med(wall["torch composed"]))
        print(f"  fused / composed: wall {fused / fair.med(wall['tessera composed']):.2f}; "
              f"fused / PyTorch best: wall {fused / best:.2f}")
    print(f"load average at end: {fair.load_average()}")


if __name__ == "__main__":
    main()
