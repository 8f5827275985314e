"""A small ResNet training step on 28 x 28 x 1 images (Fashion-MNIST's shape),
batch 128: tessera against PyTorch at its best (fair.py's rules), same
process, interleaved.

The network: Conv2D 32 3x3 + BatchNormalization + ReLU, then three residual
stages of one basic block each (two 3x3 Conv2D + BatchNormalization, ReLU,
identity shortcut, or a 1x1 strided Conv2D + BatchNormalization where the
shape changes) at 32 channels 28x28, 64 channels 14x14 and 128 channels 7x7,
GlobalAveragePooling2D and Dense 10 (logits); Adam, sparse categorical
cross-entropy. tessera: a functional nn.Model, channels last (N, H, W, C) as
Keras; PyTorch: the same blocks in its native NCHW layout (the data is handed
to it in NCHW, converted once outside the timed region),
torch.optim.Adam(fused=True), eager and torch.compile'd.

Target (issue 16): step time <= 0.8 x the best PyTorch.

run: .venv/bin/python bench/bench_resnet.py [--threads 1,2] [--rounds 5] [--batch 128]
         [--no-compile] [--no-default] [--quick]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

import fair

STAGES = ((32, 1), (64, 2), (128, 2))  # (channels, stride) of each stage's block


def make_data(batch, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, size=batch)
    return x, y


def flop_per_sample():
    """Multiply-adds x 2 of the convolutions and the dense layer (forward)."""
    f, hw, c = 2 * 28 * 28 * 9 * 1 * 32, 28, 32
    for ch, s in STAGES:
        out = hw // s
        f += 2 * out * out * 9 * c * ch + 2 * out * out * 9 * ch * ch
        if s != 1 or ch != c:
            f += 2 * out * out * c * ch
        hw, c = out, ch
    return f + 2 * c * 10


def tessera_model(seed=0):
    import tessera
    from tessera import nn

    def bn_relu(h, relu=True):
        h = nn.BatchNormalization()(h)
        return nn.Activation("relu")(h) if relu else h

    inp = nn.Input((28, 28, 1))
    h = bn_relu(nn.Conv2D(32, 3, padding="same", use_bias=False)(inp))
    c = 32
    for ch, s in STAGES:
        y = bn_relu(nn.Conv2D(ch, 3, strides=s, padding="same", use_bias=False)(h))
        y = bn_relu(nn.Conv2D(ch, 3, padding="same", use_bias=False)(y), relu=False)
        if s != 1 or ch != c:
            h = bn_relu(nn.Conv2D(ch, 1, strides=s, use_bias=False)(h), relu=False)
        h = nn.Activation("relu")(nn.Add()([h, y]))
        c = ch
    out = nn.Dense(10)(nn.GlobalAveragePooling2D()(h))
    model = nn.Model(inp, out, seed=seed)
    model.compile(tessera.optim.Adam(1e-3),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def torch_model(torch):
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self, cin, ch, s):
            super().__init__()
            self.c1 = tnn.Conv2d(cin, ch, 3, s, 1, bias=False)
            self.b1 = tnn.BatchNorm2d(ch, eps=1e-3, momentum=0.01)
            self.c2 = tnn.Conv2d(ch, ch, 3, 1, 1, bias=False)
            self.b2 = tnn.BatchNorm2d(ch, eps=1e-3, momentum=0.01)
            self.short = None
            if s != 1 or ch != cin:
                self.short = tnn.Sequential(tnn.Conv2d(cin, ch, 1, s, bias=False),
                                            tnn.BatchNorm2d(ch, eps=1e-3, momentum=0.01))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.short is None else self.short(x)))

    class ResNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.stem = tnn.Sequential(tnn.Conv2d(1, 32, 3, 1, 1, bias=False),
                                       tnn.BatchNorm2d(32, eps=1e-3, momentum=0.01), tnn.ReLU())
            blocks, c = [], 32
            for ch, s in STAGES:
                blocks.append(Block(c, ch, s))
                c = ch
            self.blocks = tnn.Sequential(*blocks)
            self.fc = tnn.Linear(c, 10)

        def forward(self, x):  # x: (N, 1, 28, 28)
            return self.fc(self.blocks(self.stem(x)).mean((2, 3)))

    return ResNet()


def step_race(threads, args, default_config=False):
    import torch

    import tessera

    torch.set_num_threads(threads)
    tessera.set_num_threads(threads)
    x, y = make_data(args.batch)
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    yt = torch.from_numpy(y)
    tm = tessera_model()
    torch.manual_seed(0)
    net = torch_model(torch)
    return fair.classifier_step_race(torch, tm, net, x, y, xt, yt, args, default_config,
                                     "ResNet")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS))
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-default", action="store_true")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 thread, 1 round, batch 16")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--default-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.threads, args.rounds, args.batch = "1", 1, 16
        args.no_compile = args.no_default = True
    threads = [int(t) for t in args.threads.split(",")]
    if args.default_child:
        print(json.dumps({str(t): step_race(t, args, True) for t in threads}))
        return
    fair.ensure_allocator(args.allocator)
    gf = flop_per_sample() * args.batch * 3 / 1e9
    fair.header("small ResNet training step (28x28x1), tessera vs PyTorch at its best",
                args.threads, [
                    f"batch {args.batch}; stages {STAGES} (channels, stride), one basic block "
                    "each; "
                    f"~{gf:.1f} GFLOP per step (3 x forward); medians of {args.rounds} interleaved "
                    "rounds after 1 warm-up round",
                    "tessera: channels last (N, H, W, C); PyTorch: NCHW (native), "
                    "Adam(fused=True), eager and torch.compile (inductor), the faster is the peer",
                    "PyTorch default configuration: a child under stock glibc malloc, eager, "
                    "Adam(), interleaved with tessera there"])
    results = {str(t): step_race(t, args) for t in threads}
    default = {}
    if not args.no_default:
        default = fair.run_default_child(os.path.abspath(__file__),
                                         ["--threads", args.threads, "--rounds", str(args.rounds),
                                          "--batch", str(args.batch)])
    print(f"\n{'thr':>3} {'tessera s':>10} {'eager s':>8} {'compiled s':>11} {'best':>9} "
          f"{'ratio':>6} {'target':>12} {'tessera GF/s':>13} {'default s':>10} {'vs default':>10}")
    summary = {}
    for t in threads:
        r = results[str(t)]
        x = fair.race(r, default.get(str(t)))
        tt, pe, pc, ratio = x["tessera"], x["eager"], x["compiled"], x["ratio"]
        ds = f"{x['default']:.3f}" if x["default"] else "-"
        dr = f"{x['default_ratio']:.2f}" if x["default"] else "-"
        print(f"{t:>3} {tt:>10.3f} {pe:>8.3f} {(f'{pc:.3f}' if pc else '-'):>11} "
              f"{x['best_name']:>9} {ratio:>6.2f} "
              f"{'<=0.8 ' + ('met' if ratio <= 0.8 else 'NOT met'):>12} {gf / tt:>13.1f} "
              f"{ds:>10} {dr:>10}")
        if r.get("_compile_s"):
            print(f"    compiled step's first call {r['_compile_s']:.1f} s")
        summary[f"{t}t"] = {"tessera": tt, "eager": pe, "compiled": pc, "ratio": ratio,
                            "default": x["default"]}
    print(f"load average at end: {fair.load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": fair.machine_line(), "allocator": args.allocator,
                       "date": time.strftime("%Y-%m-%d %H:%M"), "summary": summary,
                       "raw": results, "default_raw": default}, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
