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

import os
import sys

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
    fair.classifier_race_main(
        os.path.abspath(__file__), step_race, flop_per_sample(),
        "3-D CNN training step (16x16x16x1)",
        lambda args, gf: (f"batch {args.batch}; Conv3D layers (filters, input side) {LAYERS}, "
                          f"3x3x3 'same' + ReLU, MaxPooling3D 2 between; ~{gf:.2f} GFLOP per "
                          "step (3 x forward)"),
        "tessera: channels last (N, D, H, W, C); PyTorch: NCDHW (native)",
        threads="1", rounds=7, batch=16, quick_batch=2, digits=4)


if __name__ == "__main__":
    sys.exit(main())
