"""The HAR CNN of the Phylanx paper: tessera against PyTorch (CPU) at its best,
same machine, same process, same thread count (see fair.py for the rules).

  1. forward pass at batch 8000 (seconds, GFLOP/s at 4.28 MFLOP per sample):
     tessera model.predict against the PyTorch module under
     torch.inference_mode(), eager and torch.compile'd
  2. one training step at batch 8000 (forward, backward, Adam update): tessera
     model.fit on the one batch against PyTorch eager and compiled
     (torch.optim.Adam(fused=True))
  3. (--accuracy) time to 95% test accuracy on the synthetic HAR set at batch
     256, from the same initial weights

at 1 and 2 threads. PyTorch gets its native (N, C, L) layout (the data is
transposed once, outside the timed region); the process runs under a tuned
allocator (default tcmalloc by LD_PRELOAD, the fastest here for both; or
--allocator glibc-tuned: MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000;
tessera runs under it too). A child
process under stock glibc malloc times PyTorch in its default configuration
(eager; torch.no_grad() forward; torch.optim.Adam()) interleaved with tessera,
for the ratio most users would see.

Ratios are tessera/PyTorch (below 1: tessera is faster) against the faster of
eager and compiled. Targets (issue 16): forward <= 0.75, step <= 0.6.

run: .venv/bin/python bench/bench_har_cnn.py [--threads 1,2] [--rounds 5]
         [--allocator tcmalloc|glibc-tuned|jemalloc|glibc] [--no-compile] [--no-default]
         [--accuracy] [--quick]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

import fair

FLOP_PER_SAMPLE = 4.28e6
HERE = os.path.dirname(os.path.abspath(__file__))


def tessera_model(seed=0):
    import tessera
    from tessera import nn

    m = nn.Sequential([
        nn.Conv1D(64, 3, activation="relu"), nn.Conv1D(64, 3, activation="relu"),
        nn.Dropout(0.5), nn.MaxPool1D(2), nn.Flatten(), nn.Dense(100, activation="relu"),
        nn.Dense(6, activation="softmax")], input_shape=(128, 9), seed=seed)
    m.compile(tessera.optim.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def torch_model(torch):
    """The same network in PyTorch's own layout: input (N, 9, 128) channels first."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv1d(9, 64, 3)
            self.c2 = torch.nn.Conv1d(64, 64, 3)
            self.drop = torch.nn.Dropout(0.5)
            self.pool = torch.nn.MaxPool1d(2)
            self.d1 = torch.nn.Linear(62 * 64, 100)
            self.d2 = torch.nn.Linear(100, 6)

        def forward(self, x):  # x: (N, 9, 128)
            h = torch.relu(self.c1(x))
            h = torch.relu(self.c2(h))
            h = self.pool(self.drop(h))
            h = torch.relu(self.d1(h.flatten(1)))
            return self.d2(h)  # logits; softmax is in the loss

    return Net()


def to_torch_layout(x):
    """(N, 128, 9) as tessera/Keras take it -> (N, 9, 128), contiguous."""
    return np.ascontiguousarray(x.transpose(0, 2, 1))


def copy_weights(model, net, torch):
    """Gives the PyTorch network the tessera model's initial weights (layouts
    converted: channels-last kernels, and the flatten order (steps, channels))."""
    w = {k: np.asarray(v) for k, v in model.weights.items()}
    with torch.no_grad():
        net.c1.weight.copy_(torch.from_numpy(w["l0_kernel"].transpose(2, 1, 0).copy()))
        net.c1.bias.copy_(torch.from_numpy(w["l0_bias"]))
        net.c2.weight.copy_(torch.from_numpy(w["l1_kernel"].transpose(2, 1, 0).copy()))
        net.c2.bias.copy_(torch.from_numpy(w["l1_bias"]))
        d1 = w["l5_kernel"].reshape(62, 64, 100).transpose(1, 0, 2).reshape(3968, 100)
        net.d1.weight.copy_(torch.from_numpy(d1.T.copy()))
        net.d1.bias.copy_(torch.from_numpy(w["l5_bias"]))
        net.d2.weight.copy_(torch.from_numpy(w["l6_kernel"].T.copy()))
        net.d2.bias.copy_(torch.from_numpy(w["l6_bias"]))


def make_data(batch, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, 128, 9)).astype(np.float32)
    y = rng.integers(0, 6, size=batch)
    return x, y


def race(threads, args, default_config=False):
    """Interleaved times at `threads` threads: {what: {side: [seconds]}}."""
    import torch

    import tessera

    torch.set_num_threads(threads)
    tessera.set_num_threads(threads)
    x, y = make_data(args.batch)
    xt, yt = torch.from_numpy(to_torch_layout(x)), torch.from_numpy(y)
    tm = tessera_model()
    torch.manual_seed(0)
    net = torch_model(torch)
    copy_weights(tm, net, torch)
    out = {}

    # forward
    def t_fwd():
        tm.predict(x, batch_size=args.batch, verbose=0)

    if default_config:
        def p_eager():
            with torch.no_grad():
                torch.softmax(net(xt), 1)
    else:
        def p_eager():
            with torch.inference_mode():
                torch.softmax(net(xt), 1)
    fns = {"tessera": t_fwd, "eager": p_eager}
    net.eval()
    compile_s = {}
    if not (default_config or args.no_compile):
        torch._dynamo.reset()  # compiled kernels fix their thread count
        cfwd = fair.try_compile(torch, lambda inp: torch.softmax(net(inp), 1), "the forward")

        def p_comp():
            with torch.inference_mode():
                cfwd(xt)
        if cfwd is not None:
            with torch.inference_mode():
                s = fair.first_call(lambda: cfwd(xt), "compiled forward")
            if s is not None:
                fns["compiled"] = p_comp
                compile_s["forward"] = s
    # the same answer (no dropout in inference)
    with torch.inference_mode():
        ref = torch.softmax(net(xt), 1).numpy()
    diff = float(np.abs(tm.predict(x, batch_size=args.batch, verbose=0) - ref).max())
    out["forward"] = fair.interleave(fns, args.rounds, warmup=1)

    # training step
    def t_step():
        tm.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False)

    opt = torch.optim.Adam(net.parameters(), 1e-3, **({} if default_config else {"fused": True}))

    def p_step_with(model):
        def step():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt), yt)
            loss.backward()
            opt.step()
        return step

    net.train()
    fns = {"tessera": t_step, "eager": p_step_with(net)}
    if not (default_config or args.no_compile):
        cnet = fair.try_compile(torch, net, "the network")
        if cnet is not None:
            s = fair.first_call(p_step_with(cnet), "compiled training step")
            if s is not None:
                fns["compiled"] = p_step_with(cnet)
                compile_s["step"] = s
    out["step"] = fair.interleave(fns, args.rounds, warmup=1)
    out["_compile_s"] = compile_s
    out["_diff"] = diff
    return out


def accuracy_race(args):
    import torch

    import tessera
    from tessera import data

    xtr, ytr = data.synthetic_har(seed=1, split="train")
    xte, yte = data.synthetic_har(seed=1, split="test")
    target, max_epochs = 0.95, 30
    m = tessera_model()
    start = time.perf_counter()
    t_acc = None
    best = {"tessera": 0.0, "PyTorch": 0.0}
    for epoch in range(max_epochs):
        m.fit(xtr, ytr, batch_size=256, epochs=1, seed=epoch, verbose=0)
        _, acc = m.evaluate(xte, yte, verbose=0)
        best["tessera"] = max(best["tessera"], acc)
        if acc >= target:
            t_acc = time.perf_counter() - start
            break
    torch.manual_seed(0)
    net = torch_model(torch)
    copy_weights(tessera_model(), net, torch)  # both start from the same weights
    opt = torch.optim.Adam(net.parameters(), 1e-3, fused=True)
    X, Y = torch.from_numpy(to_torch_layout(xtr)), torch.from_numpy(ytr)
    Xe, Ye = torch.from_numpy(to_torch_layout(xte)), torch.from_numpy(yte)
    start = time.perf_counter()
    p_acc = None
    for epoch in range(max_epochs):
        net.train()
        perm = torch.randperm(len(X))
        for i in range(0, len(X), 256):
            idx = perm[i:i + 256]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(X[idx]), Y[idx]).backward()
            opt.step()
        net.eval()
        with torch.inference_mode():
            acc = (net(Xe).argmax(1) == Ye).float().mean().item()
        best["PyTorch"] = max(best["PyTorch"], acc)
        if acc >= target:
            p_acc = time.perf_counter() - start
            break

    def fmt(t, who):
        return f"{t:.1f} s" if t is not None else \
            f"not reached in {max_epochs} epochs (best {best[who]:.3f})"

    ratio = f"{t_acc / p_acc:.2f}" if t_acc and p_acc else "n/a"
    print(f"time to {target:.0%} test accuracy (synthetic HAR, batch 256, threads "
          f"{tessera.num_threads()}; PyTorch eager, (N, C, L), Adam(fused=True)): "
          f"tessera {fmt(t_acc, 'tessera')}, PyTorch {fmt(p_acc, 'PyTorch')}; "
          f"tessera/PyTorch = {ratio}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    p.add_argument("--rounds", type=int, default=5, help="timed interleaved rounds (default 5)")
    p.add_argument("--batch", type=int, default=8000)
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS),
                   help=f"allocator of the race (default {fair.BEST_ALLOCATOR})")
    p.add_argument("--no-compile", action="store_true", help="PyTorch eager only")
    p.add_argument("--no-default", action="store_true",
                   help="skip PyTorch's default configuration (the child process)")
    p.add_argument("--accuracy", action="store_true", help="also the time to 95%% accuracy")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: batch 256, 1 round, 1 thread, no compile, no child")
    p.add_argument("--json", metavar="FILE", help="also write every time to FILE")
    p.add_argument("--default-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.batch, args.rounds, args.threads = 256, 1, "1"
        args.no_compile = args.no_default = True
    threads = [int(t) for t in args.threads.split(",")]
    if args.default_child:
        res = {str(t): race(t, args, default_config=True) for t in threads}
        print(json.dumps(res))
        return
    fair.ensure_allocator(args.allocator)
    import torch

    fair.header("HAR CNN (Phylanx paper), tessera vs PyTorch at its best", args.threads, [
        f"batch {args.batch}; medians of {args.rounds} interleaved rounds after 1 warm-up round",
        "PyTorch: (N, C, L) layout (data transposed once, untimed); forward under "
        "torch.inference_mode(); Adam(fused=True); eager and torch.compile (inductor, default "
        "mode), the faster is the peer",
        "PyTorch default configuration (ratio 'vs default'): a child process under stock glibc "
        "malloc, eager, torch.no_grad() forward, Adam(), interleaved with tessera there"])
    results = {str(t): race(t, args) for t in threads}
    default = {}
    if not args.no_default:
        default = fair.run_default_child(os.path.abspath(__file__),
                                         ["--threads", args.threads, "--rounds", str(args.rounds),
                                          "--batch", str(args.batch)])
    gf = FLOP_PER_SAMPLE * args.batch / 1e9
    targets = {"forward": 0.75, "step": 0.6}
    print(f"\n{'what':<28} {'thr':>3} {'tessera s':>10} {'eager s':>9} {'compiled s':>11} "
          f"{'best':>9} {'ratio':>6} {'target':>11} {'default s':>10} {'vs default':>10}")
    summary = {}
    for t in threads:
        r = results[str(t)]
        for what in ("forward", "step"):
            ts = r[what]
            tt = fair.med(ts["tessera"])
            pe = fair.med(ts["eager"])
            pc = fair.med(ts["compiled"]) if "compiled" in ts else None
            best = min(pe, pc) if pc else pe
            ratio = tt / best
            d = default.get(str(t), {}).get(what)
            ds = f"{fair.med(d['eager']):.3f}" if d else "-"
            dr = f"{fair.med(d['tessera']) / fair.med(d['eager']):.2f}" if d else "-"
            met = "met" if ratio <= targets[what] else "NOT met"
            label = f"forward, batch {args.batch}" if what == "forward" else \
                f"training step, batch {args.batch}"
            print(f"{label:<28} {t:>3} {tt:>10.3f} {pe:>9.3f} "
                  f"{(f'{pc:.3f}' if pc else '-'):>11} "
                  f"{('compiled' if pc and pc < pe else 'eager'):>9}"
                  f" {ratio:>6.2f} {f'<={targets[what]} ' + met:>11} {ds:>10} {dr:>10}")
            summary[f"{what}_{t}t"] = {"tessera": tt, "eager": pe, "compiled": pc, "ratio": ratio,
                                      "default": fair.med(d["eager"]) if d else None,
                                      "ratio_default": float(dr) if d else None}
        print(f"{'':<28} {t:>3} forward GFLOP/s: tessera "
              f"{gf / fair.med(r['forward']['tessera']):.0f}, PyTorch best "
              f"{gf / min(fair.med(v) for k, v in r['forward'].items() if k != 'tessera'):.0f}; "
              f"outputs differ by "
              f"{r['_diff']:.1e}; first call of compiled (compile time): "
              + ", ".join(f"{k} {v:.1f} s" for k, v in r["_compile_s"].items()))
    print("(eager/compiled/best: PyTorch at its best, tuned allocator; default: PyTorch in the "
          "child, stock malloc, eager; 'vs default' uses the tessera time measured in that child)")
    print(f"load average at end: {fair.load_average()}")
    if args.accuracy:
        accuracy_race(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": fair.machine_line(), "allocator": args.allocator,
                       "date": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg(),
                       "summary": summary, "raw": results, "default_raw": default}, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
