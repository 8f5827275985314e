"""One pipeline stage's work on one micro-batch, tessera against PyTorch, in CPU time (issue 28;
docs/parallelism.md, "Where a pipelined step's time goes").

bench_mesh.py's pp race puts 4 ranks of one thread on this machine's 2 cores; its middle stages
(3 of the GPT's blocks each) set the pace. This measures what one of them computes per
micro-batch, alone in one process with one thread: the forward and backward of BLOCKS
pre-LayerNorm GPT blocks (d 512, 8 heads, context 64, causal attention, GELU MLP) on ROWS rows,
and an Adam step (a mean-squared loss stands in for the next stage's cotangent). tessera:
`model.fit` with batch_size ROWS; PyTorch 2.13 eager: hand-written blocks with
`F.scaled_dot_product_attention(is_causal=True)`, fused Adam. The sides run in turn, --rounds
times, --steps micro-batches each; the figure is the median over rounds of the process's CPU
time (`time.process_time`, every thread) per micro-batch, which the other jobs of a shared
machine inflate less than the wall time (also printed).

run: .venv/bin/python bench/pipeline_stage_cpu.py [--rows 2] [--blocks 3] [--steps 6] [--rounds 5]
     (both sides under tcmalloc, as bench_mesh.py: fair.py restarts the process with it)
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fair import allocator_in_use, ensure_allocator, load_average  # noqa: E402
from machine import machine_line  # noqa: E402

D, T, HEADS = 512, 64, 8


def tessera_side(a, x, y):
    import tessera
    from tessera import nn

    tessera.set_num_threads(1)
    inp = nn.Input((T, D))
    h = inp
    for _ in range(a.blocks):
        q = nn.LayerNormalization(epsilon=1e-5)(h)
        q = nn.MultiHeadAttention(HEADS, D // HEADS)(q, q, use_causal_mask=True)
        h = nn.Add()([h, q])
        m = nn.LayerNormalization(epsilon=1e-5)(h)
        m = nn.Dense(4 * D, activation="gelu")(m)
        h = nn.Add()([h, nn.Dense(D)(m)])
    model = nn.Model(inp, h, seed=0)
    model.compile(tessera.optim.Adam(1e-4), "mse")
    model.fit(x[:a.rows], y[:a.rows], batch_size=a.rows, epochs=1, verbose=0)  # compiles

    def run():
        model.fit(x, y, batch_size=a.rows, epochs=1, verbose=0, shuffle=False)
    return run


def torch_side(a, x, y):
    import torch

    torch.set_num_threads(1)
    F = torch.nn.functional
    hd = D // HEADS

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
            self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D) for _ in range(4))
            self.fc1, self.fc2 = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

        def forward(self, x):
            b, t, _ = x.shape
            z = self.ln1(x)
            q, k, v = (p(z).view(b, t, -1, hd).transpose(1, 2) for p in (self.q, self.k, self.v))
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(z.transpose(1, 2).reshape(b, t, -1))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    net = torch.nn.Sequential(*[Block() for _ in range(a.blocks)])
    opt = torch.optim.Adam(net.parameters(), 1e-4, fused=True)
    X, Y = torch.from_numpy(x), torch.from_numpy(y)

    def run():
        for s in range(a.steps):
            rows = slice(s * a.rows, (s + 1) * a.rows)
            opt.zero_grad()
            F.mse_loss(net(X[rows]), Y[rows]).backward()
            opt.step()
    run()
    return run, torch.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    ensure_allocator("tcmalloc")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.rows * a.steps, T, D)).astype(np.float32)
    y = rng.standard_normal((a.rows * a.steps, T, D)).astype(np.float32)
    print("== pipeline_stage_cpu: one stage's micro-batch, tessera vs PyTorch (CPU time)")
    print(machine_line())
    torch_run, version = torch_side(a, x, y)
    sides = {"tessera": tessera_side(a, x, y), f"pytorch {version}": torch_run}
    print(f"{a.blocks} GPT blocks (d {D}, {HEADS} heads, context {T}), micro-batches of {a.rows} "
          f"rows, forward + backward + Adam; 1 thread each; allocator {allocator_in_use()}; "
          f"{a.rounds} rounds of {a.steps} micro-batches, sides in turn")
    print(f"load average at start: {load_average()}")
    got = {k: [] for k in sides}
    for _ in range(a.rounds):
        for k, run in sides.items():
            c, w = time.process_time(), time.perf_counter()
            run()
            got[k].append(((time.process_time() - c) / a.steps, (time.perf_counter() - w) / a.steps))
    cpu = {}
    for k, v in got.items():
        cpu[k] = statistics.median(c for c, _ in v)
        print(f"  {k:22s} CPU {cpu[k] * 1e3:7.1f} ms per micro-batch (median; min "
              f"{min(c for c, _ in v) * 1e3:.1f})   wall {statistics.median(w for _, w in v) * 1e3:7.1f} ms")
    t, p = cpu.values()
    print(f"  ratio tessera/pytorch, CPU: {t / p:.2f}")
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
