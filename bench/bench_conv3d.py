"""A small 3-D CNN training step on 16 x 16 x 16 x 1 volumes, batch 16:
tessera's Conv3D / MaxPooling3D against PyTorch's torch.nn.Conv3d /
MaxPool3d at its best (fair.py's rules: tuned allocator, native layout,
eager and torch.compile), same process, interleaved.

The network: Conv3D 16 3x3x3 'same' + ReLU, MaxPooling3D 2, Conv3D 32 3x3x3
'same' + ReLU, MaxPooling3D 2, Conv3D 32 3x3x3 'same' + ReLU,
GlobalAveragePooling3D, Dense 10 (logits); Adam, sparse categorical
cross-entropy. tessera: a functional nn.Model, channels last (N, D, H, W, C)
as Keras; PyTorch: the same layers in its native NCDHW layout (the data is
handed to it in NCDHW, converted once outside the timed region),
torch.optim.Adam(fused=True). Before the race, PyTorch's network is given
tessera's weights and both forward passes are compared.

run: .venv/bin/python bench/bench_conv3d.py [--threads 1] [--rounds 7] [--batch 16]
         [--no-compile] [--no-default] [--quick]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

import fair

SIZE = 16
LAYERS = ((16, SIZE), (32, SIZE // 2), (32, SIZE // 4))  # (filters, input side) of each Conv3D


def make_data(batch, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, SIZE, SIZE, SIZE, 1)).astype(np.float32)
    y = rng.integers(0, 10, size=batch)
    return x, y


def flop_per_sample():
    """Multiply-adds x 2 of the convolutions and the dense layer (forward)."""
    f, c = 0, 1
    for filters, side in LAYERS:
        f += 2 * side ** 3 * 27 * c * filters
        c = filters
    return f + 2 * c * 10


def tessera_model(seed=0):
    import tessera
    from tessera import nn

    inp = nn.Input((SIZE, SIZE, SIZE, 1))
    h = inp
    for k, (filters, _) in enumerate(LAYERS):
        if k:
            h = nn.layers.MaxPooling3D(2)(h)
        h = nn.layers.Conv3D(filters, 3, padding="same", activation="relu")(h)
    out = nn.Dense(10)(nn.layers.GlobalAveragePooling3D()(h))
    model = nn.Model(inp, out, seed=seed)
    model.compile(tessera.optim.Adam(1e-3),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def torch_model(torch):
    tnn = torch.nn
    layers, c = [], 1
    for k, (filters, _) in enumerate(LAYERS):
        if k:
            layers.append(tnn.MaxPool3d(2))
        layers += [tnn.Conv3d(c, filters, 3, padding=1), tnn.ReLU()]
        c = filters

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.body = tnn.Sequential(*layers)
            self.fc = tnn.Linear(c, 10)

        def forward(self, x):  # x: (N, 1, D, H, W)
            return self.fc(self.body(x).mean((2, 3, 4)))

    return Net()


def copy_weights(torch, tm, net):
    """PyTorch's network given tessera's weights (kernels (kd, kh, kw, in, out)
    -> (out, in, kd, kh, kw), the dense kernel transposed)."""
    ws = tm.get_weights()
    convs = [m for m in net.body if isinstance(m, torch.nn.Conv3d)]
    with torch.no_grad():
        for conv, (kernel, bias) in zip(convs, zip(ws[0::2], ws[1::2])):
            conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.transpose(4, 3, 0, 1,
                                                                                     2))))
            conv.bias.copy_(torch.from_numpy(bias))
        net.fc.weight.copy_(torch.from_numpy(np.ascontiguousarray(ws[-2].T)))
        net.fc.bias.copy_(torch.from_numpy(ws[-1]))


def step_race(threads, args, default_config=False):
    import torch

    import tessera

    torch.set_num_threads(threads)
    tessera.set_num_threads(threads)
    x, y = make_data(args.batch)
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 4, 1, 2, 3)))
    yt = torch.from_numpy(y)
    tm = tessera_model()
    torch.manual_seed(0)
    net = torch_model(torch)
    copy_weights(torch, tm, net)
    with torch.no_grad():
        diff = float(np.abs(net(xt).numpy() - tm.predict(x, verbose=0)).max())
    if not default_config:
        print(f"{threads} thread(s): outputs differ by {diff:.2e} (PyTorch given tessera's "
              "weights)")
    return fair.classifier_step_race(torch, tm, net, x, y, xt, yt, args, default_config,
                                     "3-D CNN")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS))
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-default", action="store_true")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 thread, 1 round, batch 2")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--default-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.threads, args.rounds, args.batch = "1", 1, 2
        args.no_compile = args.no_default = True
    threads = [int(t) for t in args.threads.split(",")]
    if args.default_child:
        print(json.dumps({str(t): step_race(t, args, True) for t in threads}))
        return
    fair.ensure_allocator(args.allocator)
    gf = flop_per_sample() * args.batch * 3 / 1e9
    fair.header("3-D CNN training step (16x16x16x1), tessera vs PyTorch at its best",
                args.threads, [
                    f"batch {args.batch}; Conv3D layers (filters, input side) {LAYERS}, 3x3x3 "
                    f"'same' + ReLU, MaxPooling3D 2 between; ~{gf:.2f} GFLOP per step "
                    f"(3 x forward); medians of {args.rounds} interleaved rounds after 1 warm-up",
                    "tessera: channels last (N, D, H, W, C); PyTorch: NCDHW (native), "
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
          f"{'ratio':>6} {'tessera GF/s':>13} {'default s':>10} {'vs default':>10}")
    summary = {}
    for t in threads:
        r = results[str(t)]
        x = fair.race(r, default.get(str(t)))
        tt, pe, pc, ratio = x["tessera"], x["eager"], x["compiled"], x["ratio"]
        ds = f"{x['default']:.4f}" if x["default"] else "-"
        dr = f"{x['default_ratio']:.2f}" if x["default"] else "-"
        print(f"{t:>3} {tt:>10.4f} {pe:>8.4f} {(f'{pc:.4f}' if pc else '-'):>11} "
              f"{x['best_name']:>9} {ratio:>6.2f} {gf / tt:>13.1f} {ds:>10} {dr:>10}")
        print(f"    spread (min-max): tessera {fair.spread(r['tessera'])}, eager "
              f"{fair.spread(r['eager'])}" +
              (f", compiled {fair.spread(r['compiled'])}" if "compiled" in r else ""))
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
