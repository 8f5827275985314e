"""The HAR CNN of the Phylanx paper: tessera against PyTorch (CPU) on the same
machine and thread count.

  1. forward pass at batch 8000 (seconds, GFLOP/s at 4.28 MFLOP per sample)
  2. one training step at batch 8000 (forward, backward, Adam update)
  3. time to 95% test accuracy on the synthetic HAR set at batch 256

Each is printed as tessera/PyTorch (time ratio: below 1 means tessera is
faster), with the best tessera matrix-multiply GFLOP/s of this run for scale.

run: .venv/bin/python bench/bench_har_cnn.py [--threads 2] [--repeats 3] [--skip-accuracy]
"""

import argparse
import os
import statistics
import time

import numpy as np

import tessera
from machine import cpu_model
from tessera import data, nn

FLOP_PER_SAMPLE = 4.28e6




def tessera_model(seed=0):
    m = nn.Sequential([
        nn.Conv1D(64, 3, activation="relu"), nn.Conv1D(64, 3, activation="relu"),
        nn.Dropout(0.5), nn.MaxPool1D(2), nn.Flatten(), nn.Dense(100, activation="relu"),
        nn.Dense(6, activation="softmax")], input_shape=(128, 9), seed=seed)
    m.compile(tessera.optim.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def torch_model(torch):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv1d(9, 64, 3)
            self.c2 = torch.nn.Conv1d(64, 64, 3)
            self.drop = torch.nn.Dropout(0.5)
            self.pool = torch.nn.MaxPool1d(2)
            self.d1 = torch.nn.Linear(62 * 64, 100)
            self.d2 = torch.nn.Linear(100, 6)

        def forward(self, x):  # x: (N, 128, 9) channels last, as Keras
            h = x.transpose(1, 2)
            h = torch.relu(self.c1(h))
            h = torch.relu(self.c2(h))
            h = self.pool(self.drop(h))
            h = torch.relu(self.d1(h.flatten(1)))
            return self.d2(h)  # logits; softmax is in the loss

    return Net()


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


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=8000)
    p.add_argument("--skip-accuracy", action="store_true")
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    tessera.set_num_threads(args.threads)
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; threads: {args.threads} "
          f"(tessera and PyTorch {torch.__version__})")

    rng = np.random.default_rng(0)
    mm_gflops = 0.0
    for n in (1024, 2048):
        a = rng.normal(size=(n, n)).astype(np.float32)
        for _ in range(5):
            t = time.perf_counter()
            tessera.call_primitive("matmul", [a, a])
            mm_gflops = max(mm_gflops, 2 * n ** 3 / (time.perf_counter() - t) / 1e9)
    print(f"tessera matmul float32, best of n=1024 and 2048: {mm_gflops:.1f} GFLOP/s "
          "(the scale for the forward pass)")

    x = rng.normal(size=(args.batch, 128, 9)).astype(np.float32)
    y = rng.integers(0, 6, size=args.batch)
    tm = tessera_model()
    ptm = torch_model(torch)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    t_fwd = median_time(lambda: tm.predict(x, batch_size=args.batch), args.repeats)
    ptm.eval()
    with torch.no_grad():
        p_fwd = median_time(lambda: torch.softmax(ptm(xt), 1), args.repeats)
    gf = FLOP_PER_SAMPLE * args.batch / 1e9
    print(f"forward, batch {args.batch}: tessera {t_fwd:.3f} s ({gf / t_fwd:.1f} GFLOP/s, "
          f"{gf / t_fwd / mm_gflops:.0%} of matmul), PyTorch {p_fwd:.3f} s "
          f"({gf / p_fwd:.1f} GFLOP/s); tessera/PyTorch = {t_fwd / p_fwd:.2f}")

    t_step = median_time(lambda: tm.fit(x, y, batch_size=args.batch, epochs=1, verbose=0,
                                        shuffle=False), args.repeats)
    ptm.train()
    opt = torch.optim.Adam(ptm.parameters(), 1e-3)

    def torch_step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ptm(xt), yt)
        loss.backward()
        opt.step()

    p_step = median_time(torch_step, args.repeats)
    print(f"training step, batch {args.batch}: tessera {t_step:.3f} s, PyTorch {p_step:.3f} s; "
          f"tessera/PyTorch = {t_step / p_step:.2f}")

    if args.skip_accuracy:
        return
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
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    X, Y = torch.from_numpy(xtr), torch.from_numpy(ytr)
    Xe, Ye = torch.from_numpy(xte), torch.from_numpy(yte)
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
        with torch.no_grad():
            acc = (net(Xe).argmax(1) == Ye).float().mean().item()
        best["PyTorch"] = max(best["PyTorch"], acc)
        if acc >= target:
            p_acc = time.perf_counter() - start
            break

    def fmt(t, who):
        if t is not None:
            return f"{t:.1f} s"
        return f"not reached in {max_epochs} epochs (best {best[who]:.3f})"

    ratio = f"{t_acc / p_acc:.2f}" if t_acc and p_acc else "n/a"
    print(f"time to {target:.0%} test accuracy (synthetic HAR, batch 256): "
          f"tessera {fmt(t_acc, 'tessera')}, PyTorch {fmt(p_acc, 'PyTorch')}; "
          f"tessera/PyTorch = {ratio}")


if __name__ == "__main__":
    main()
