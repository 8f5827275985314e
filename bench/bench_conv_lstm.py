"""A ConvLSTM2D training step (issue 30): tessera.nn against Keras 3 on JAX (XLA) and
PyTorch's nearest equivalent at its best, on keras-io's next-frame video prediction
model (examples/vision/conv_lstm.py) scaled down: three ConvLSTM2D layers (5x5, 3x3,
1x1 kernels, "same", relu, return_sequences) with BatchNormalization between them and a
Conv3D(1, 3x3x3, sigmoid) head, binary cross-entropy, Adam(1e-3).

The model code is one function, called with `keras` and with `tessera.nn`; tessera gets
Keras's initial weights. PyTorch has no ConvLSTM layer: its nearest equivalent is the
same cell written with torch.nn.functional.conv2d in its native layout (N, C, H, W)
(the input convolution of all frames as one convolution, then per frame the recurrent
convolution and the gates, Keras's gate order), BatchNorm3d and Conv3d over (N, C, T,
H, W), given the same weights; eager and torch.compile'd, the faster is the peer
(fair.py's rules). Keras: the faster of fit(one batch) and train_on_batch. Each side's
first step (compilation) is timed apart; then medians of interleaved rounds.

Threads: 1 by default for all three (XLA through XLA_FLAGS): on the shared 2-core
machine a second thread per side mostly waits (PyTorch's OpenMP threads under a load
of 10 took 10x longer per step than one thread).

run: .venv/bin/python bench/bench_conv_lstm.py [--frames 10] [--size 32] [--filters 16]
         [--batch 8] [--rounds 7] [--threads 1] [--no-compile] [--quick]
"""

import argparse
import os
import sys

import keras_jax_setup  # noqa: E402 - bench/

keras_jax_setup.setup()

import numpy as np  # noqa: E402

import fair  # noqa: E402


def model(keras, layers, frames, size, filters):
    """keras-io's conv_lstm model (filters 64 there), for either module."""
    inp = layers.Input(shape=(frames, size, size, 1))
    x = layers.ConvLSTM2D(filters=filters, kernel_size=(5, 5), padding="same",
                          return_sequences=True, activation="relu")(inp)
    x = layers.BatchNormalization()(x)
    x = layers.ConvLSTM2D(filters=filters, kernel_size=(3, 3), padding="same",
                          return_sequences=True, activation="relu")(x)
    x = layers.BatchNormalization()(x)
    x = layers.ConvLSTM2D(filters=filters, kernel_size=(1, 1), padding="same",
                          return_sequences=True, activation="relu")(x)
    x = layers.Conv3D(filters=1, kernel_size=(3, 3, 3), activation="sigmoid", padding="same")(x)
    m = keras.Model(inp, x)
    m.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(1e-3))
    return m


def torch_model(torch, w):
    """The same network in PyTorch from Keras's weights: per ConvLSTM2D kernel
    (kh, kw, in, 4F) -> (4F, in, kh, kw), recurrent kernel likewise, bias; per
    BatchNormalization gamma, beta, moving mean, moving variance; Conv3D (kt, kh, kw,
    in, out) -> (out, in, kt, kh, kw)."""
    F = torch.nn.functional
    T = [torch.from_numpy(np.ascontiguousarray(a)) for a in w]
    conv = lambda k: k.permute(3, 2, 0, 1).contiguous()  # noqa: E731
    cells = [(conv(T[i]), conv(T[i + 1]), T[i + 2]) for i in (0, 7, 14)]
    bns = [T[3:7], T[10:14]]
    P = torch.nn.ParameterList([torch.nn.Parameter(a) for c in cells for a in c] +
                               [torch.nn.Parameter(b[j]) for b in bns for j in (0, 1)] +
                               [torch.nn.Parameter(T[17].permute(4, 3, 0, 1, 2).contiguous()),
                                torch.nn.Parameter(T[18])])
    stats = [(b[2].clone(), b[3].clone()) for b in bns]

    def conv_lstm(x, k, rk, b):  # x (N, T, C, H, W) -> (N, T, F, H, W), relu activation
        n, t, c, h, w_ = x.shape
        f = rk.shape[1]
        xw = F.conv2d(x.reshape(n * t, c, h, w_), k, b, padding=k.shape[-1] // 2)
        xw = xw.reshape(n, t, 4 * f, h, w_)
        hs = xw.new_zeros(n, f, h, w_)
        cs = hs
        out = []
        for s in range(t):
            z = xw[:, s] + F.conv2d(hs, rk, padding=rk.shape[-1] // 2)
            i, fg, g, o = z.chunk(4, 1)
            cs = torch.sigmoid(fg) * cs + torch.sigmoid(i) * torch.relu(g)
            hs = torch.sigmoid(o) * torch.relu(cs)
            out.append(hs)
        return torch.stack(out, 1)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = P

        def forward(self, x):  # (N, T, 1, H, W)
            p = list(self.p)
            for j in range(3):
                x = conv_lstm(x, *p[3 * j:3 * j + 3])
                if j < 2:
                    g, b = p[9 + 2 * j], p[10 + 2 * j]
                    mean, var = stats[j]
                    x = F.batch_norm(x.transpose(1, 2), mean, var, g, b, self.training, 0.01,
                                     1e-3).transpose(1, 2)
            y = F.conv3d(x.transpose(1, 2), p[13], p[14], padding=1)  # (N, 1, T, H, W)
            return torch.sigmoid(y)

    return Net()


def race(args):
    import keras
    import torch

    import tessera.nn as tnn

    keras.utils.set_random_seed(0)
    km = model(keras, keras.layers, args.frames, args.size, args.filters)
    tm = model(tnn, tnn.layers, args.frames, args.size, args.filters)
    kw = [np.asarray(a, np.float32) for a in km.get_weights()]
    tm.set_weights(kw)
    rng = np.random.default_rng(0)
    x = rng.random((args.batch, args.frames, args.size, args.size, 1)).astype(np.float32)
    y = (rng.random(x.shape) > 0.8).astype(np.float32)
    net = torch_model(torch, kw)
    xt = torch.from_numpy(x.transpose(0, 1, 4, 2, 3).copy())  # (N, T, C, H, W)
    yt = torch.from_numpy(y.transpose(0, 4, 1, 2, 3).copy())  # (N, 1, T, H, W)

    kp = np.asarray(km.predict(x, batch_size=args.batch, verbose=0))
    tp = np.asarray(tm.predict(x, batch_size=args.batch, verbose=0))
    net.eval()
    with torch.inference_mode():
        pp = net(xt).numpy().transpose(0, 2, 3, 4, 1)
    diffs = (float(np.abs(tp - kp).max()), float(np.abs(pp - kp).max()))
    net.train()

    def k_fit():
        km.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False)

    def k_tob():
        km.train_on_batch(x, y)

    def t_fit():
        tm.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, shuffle=False)

    opt = torch.optim.Adam(net.parameters(), 1e-3, fused=True)

    def p_step_with(m):
        def step():
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy(m(xt), yt).backward()
            opt.step()
        return step

    first = {"tessera": fair.first_call(t_fit, "tessera's first step"),
             "keras fit": fair.first_call(k_fit, "Keras's first fit step"),
             "keras train_on_batch": fair.first_call(k_tob, "Keras's train_on_batch"),
             "torch eager": fair.first_call(p_step_with(net), "PyTorch's first eager step")}
    fns = {"tessera": t_fit, "keras_fit": k_fit, "keras_tob": k_tob, "eager": p_step_with(net)}
    if not args.no_compile:
        torch._dynamo.reset()
        cnet = fair.try_compile(torch, net, "the ConvLSTM network")
        if cnet is not None:
            s = fair.first_call(p_step_with(cnet), "PyTorch's compiled step")
            if s is not None:
                fns["compiled"] = p_step_with(cnet)
                first["torch compiled"] = s
    return fair.interleave(fns, args.rounds, warmup=1), first, diffs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=10)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--filters", type=int, default=16)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1,
                   help="threads of each side (1: XLA too; else XLA keeps one per core)")
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS))
    p.add_argument("--no-compile", action="store_true", help="PyTorch eager only")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round, no torch.compile")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.no_compile = 1, True
    fair.ensure_allocator(args.allocator)
    import jax
    import keras
    import torch

    import tessera

    torch.set_num_threads(args.threads)
    tessera.set_num_threads(args.threads)
    fair.header("ConvLSTM2D training step: tessera.nn, Keras 3 on JAX, PyTorch's nearest "
                "equivalent", threads=args.threads, extra=[
                    f"Keras {keras.__version__}, JAX {jax.__version__} (XLA CPU, "
                    f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '(its default threads)')}); "
                    f"tessera {tessera.__version__}",
                    f"keras-io conv_lstm model: {args.frames} frames of {args.size}x{args.size}"
                    f"x1, 3 ConvLSTM2D({args.filters}), batch {args.batch}",
                    f"medians of {args.rounds} interleaved rounds after 1 warm-up round"])
    times, first, diffs = race(args)
    med = {k: fair.med(v) for k, v in times.items()}
    kb = min(med["keras_fit"], med["keras_tob"])
    pb = min(med["eager"], med.get("compiled", float("inf")))
    print("first step (compile) s: " + ", ".join(
        f"{k} {v:.2f}" if v is not None else f"{k} failed" for k, v in first.items()))
    print(f"predictions before training differ from Keras's by {diffs[0]:.1e} (tessera), "
          f"{diffs[1]:.1e} (PyTorch)")
    print("step medians s: " + ", ".join(f"{k} {v:.4f} ({fair.spread(times[k])})"
                                         for k, v in med.items()))
    print(f"tessera {med['tessera']:.4f} s, Keras-JAX {kb:.4f} s, PyTorch {pb:.4f} s: "
          f"tessera/Keras = {med['tessera'] / kb:.2f}, tessera/PyTorch = "
          f"{med['tessera'] / pb:.2f}")
    print(f"load average at end: {fair.load_average()}")


if __name__ == "__main__":
    sys.exit(main())
