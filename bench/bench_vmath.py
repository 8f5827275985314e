"""Elementwise transcendental functions and dropout, per element, at 1 thread:
tessera's float32 kernels (glibc's libmvec a vector at a time, tessera/kernels/
vmath.hpp; dropout's Philox 16 counters per AVX-512 vector) against NumPy as
users call it (np.exp(x), ...) and PyTorch at its best for the layers NumPy
has not (torch.nn.functional.gelu / dropout in inference_mode or with
grad, 1 intra-op thread), all in one process under tcmalloc (fair.py).

Run: .venv/bin/python bench/bench_vmath.py [--n 4000000] [--rounds 7]
Prints ns per element (medians of the rounds; calls interleaved) and the
ratio tessera / peer (below 1: tessera faster).
"""

import argparse
import statistics
import time

import numpy as np

import fair
import tessera
from machine import machine_line


def timed(fn, n):
    t = time.perf_counter()
    fn()
    return 1e9 * (time.perf_counter() - t) / n


def race(rows, rounds, n):
    """rows: (name, tessera_fn, peer_fn or None); medians over interleaved rounds."""
    times = {name: ([], []) for name, _, _ in rows}
    for r in range(rounds):
        for name, ours, peer in rows:
            order = [(0, ours), (1, peer)] if r % 2 == 0 else [(1, peer), (0, ours)]
            for side, fn in order:
                if fn is not None:
                    times[name][side].append(timed(fn, n))
    for name, ours, peer in rows:
        a = statistics.median(times[name][0])
        if peer is None:
            print(f"  {name:<22} tessera {a:6.2f} ns")
        else:
            b = statistics.median(times[name][1])
            print(f"  {name:<22} tessera {a:6.2f} ns   peer {b:6.2f} ns   ratio {a / b:5.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4_000_000)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    # Both sides allocate their outputs per call: the allocator PyTorch is
    # fastest under (fair.py), for both, in this one process.
    fair.ensure_allocator(fair.BEST_ALLOCATOR)
    n = args.n
    tessera.set_num_threads(1)
    print(machine_line())
    print(f"threads: 1 (tessera and the peers); {n:,} float32 elements; medians of {args.rounds}")
    print(f"allocator of this process (tessera and the peers): {fair.ALLOCATORS[fair.BEST_ALLOCATOR][1]}")
    rng = np.random.default_rng(0)
    x = rng.normal(size=n).astype(np.float32)
    pos = np.abs(x) + np.float32(0.1)
    unit = np.tanh(x)
    g = rng.normal(size=n).astype(np.float32)
    call = tessera.call_primitive

    print("NumPy functions (peer: NumPy", np.__version__ + ")")
    rows = []
    for name, arg in [("exp", x), ("log", pos), ("sin", x), ("cos", x), ("tanh", x),
                      ("arctan", x), ("log1p", pos), ("expm1", x), ("arcsin", unit)]:
        rows.append((f"np.{name}", lambda name=name, arg=arg: call(name, [arg]),
                     lambda name=name, arg=arg: getattr(np, name)(arg)))
    race(rows, args.rounds, n)

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:  # pragma: no cover - torch is for benchmarks only
        torch = None
    print("Layers (peer: " + (f"PyTorch {torch.__version__}, 1 thread, inference_mode / no_grad "
                              "forward, autograd for the gradient" if torch else "none") + ")")
    rows = []
    if torch is not None:
        torch.set_num_threads(1)
        tx, tg = torch.from_numpy(x), torch.from_numpy(g)
        txg = tx.clone().requires_grad_(True)

        def torch_gelu():
            with torch.inference_mode():
                F.gelu(tx)

        def torch_gelu_grad():
            y = F.gelu(txg)
            (gx,) = torch.autograd.grad(y, txg, tg)
            return gx

        def torch_dropout():
            with torch.no_grad():
                F.dropout(tx, 0.5, training=True)
    else:
        torch_gelu = torch_gelu_grad = torch_dropout = None
    rows.append(("gelu (exact erf)", lambda: call("gelu", [x]), torch_gelu))
    # PyTorch's side is its forward and backward (autograd recomputes nothing
    # it kept); tessera's is the backward alone: compare with gelu + gelu_grad.
    rows.append(("gelu + gelu_grad", lambda: (call("gelu", [x]), call("gelu_grad", [g, x])),
                 torch_gelu_grad))
    rows.append(("dropout 0.5", lambda: call("dropout", [x, 0.5, 7, True]), torch_dropout))
    race(rows, args.rounds, n)


if __name__ == "__main__":
    main()
