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

import os
import sys

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
    fair.classifier_race_main(
        os.path.abspath(__file__), step_race, flop_per_sample(),
        "small ResNet training step (28x28x1)",
        lambda args, gf: (f"batch {args.batch}; stages {STAGES} (channels, stride), one basic "
                          f"block each; ~{gf:.1f} GFLOP per step (3 x forward)"),
        "tessera: channels last (N, H, W, C); PyTorch: NCHW (native)", target=0.8)


if __name__ == "__main__":
    sys.exit(main())
