"""One side of bench_keras_race.py's race on its own, timed by wall clock and by
this process's CPU time (all threads): on a machine shared with other jobs the CPU
time of a step moves far less than its wall time, so before/after pairs of one
side (two checkouts, run alternately) are comparable where the race's wall-clock
medians are not. Same models, data and Keras initial-weight order as the race;
PyTorch with Adam(fused=True), eager or torch.compile'd.

run: .venv/bin/python bench/keras_race_cpu.py transformer|lstm|convnet
         [--side tessera|torch-eager|torch-compiled] [--threads 1] [--steps 15]
     (under the race's allocator: LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4)
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TESSERA_CACHE_DIR", "0")

import numpy as np  # noqa: E402

import bench_keras_race as race  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", choices=list(race.MODELS))
    p.add_argument("--side", default="tessera", choices=["tessera", "torch-eager",
                                                          "torch-compiled"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=15)
    args = p.parse_args()
    import tessera
    import tessera.nn as tnn

    tessera.set_num_threads(args.threads)
    build, torch_build = race.MODELS[args.model]
    model = build(tnn, tnn.layers, tnn.ops)
    x, y, batch = race.data(args.model, np.random.default_rng(0))
    if args.side == "tessera":
        def step():
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
    else:
        import torch

        torch.set_num_threads(args.threads)
        net, loss_fn = torch_build(torch, [np.asarray(a, np.float32) for a in model.get_weights()])
        if args.side == "torch-compiled":
            net = torch.compile(net)
        xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy() if args.model == "convnet" else
                              x.astype("int64"))
        yt = torch.from_numpy(y.astype("int64") if args.model == "transformer" else
                              y.astype("float32"))
        opt = torch.optim.Adam(net.parameters(), 1e-3, fused=True)

        def step():
            opt.zero_grad()
            loss_fn(net(xt), yt).backward()
            opt.step()
    for _ in range(3):
        step()
    wall, cpu = [], []
    for _ in range(args.steps):
        t, c = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    print(f"{args.model} {args.side}, {args.threads} thread(s), {args.steps} steps: wall median "
          f"{statistics.median(wall):.4f} s (min {min(wall):.4f}), CPU median "
          f"{statistics.median(cpu):.4f} s (min {min(cpu):.4f}); load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
