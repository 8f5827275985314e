"""Where a tessera training step (or forward pass) of the fair race's workloads
spends its time: one step recorded with tessera.trace, each primitive's
exclusive time summed over its evaluations, largest first.

run: .venv/bin/python bench/profile_step.py har|gpt|mesh-gpt|resnet|keras-transformer|keras-lstm|
         keras-convnet|lstm [--threads 1] [--forward]    (lstm: keras-lstm)
         [--trace DIR]
     (under the race's allocator: LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4)
"""

import argparse
import collections
import csv
import os
import tempfile
import time

import numpy as np

import tessera


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workload", choices=["har", "gpt", "mesh-gpt", "resnet", "keras-transformer",
                                        "keras-lstm", "keras-convnet", "lstm"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--forward", action="store_true", help="model.predict instead of a step")
    p.add_argument("--trace", help="trace directory (default: a temporary one)")
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    if args.workload == "lstm":
        args.workload = "keras-lstm"
    tessera.set_num_threads(args.threads)
    if args.workload == "har":
        import bench_har_cnn as b

        x, y = b.make_data(8000)
        model, batch = b.tessera_model(), 8000
    elif args.workload == "gpt":
        import bench_char_gpt as b

        ids, _, vocab, _ = b.make_corpus()
        x, y = b.batches(ids, 1, b.BATCH, seed=1)[0]
        model, batch = b.tessera_model(vocab), b.BATCH
    elif args.workload == "mesh-gpt":  # bench_mesh.py's GPT at its defaults (issue 28's base)
        import bench_mesh as b

        g = argparse.Namespace(layers=8, d=512, heads=8, context=64, batch=8)
        x = np.random.default_rng(0).integers(0, b.VOCAB, size=(g.batch, g.context),
                                              dtype=np.int32)
        y = np.roll(x, -1, axis=1)
        model, batch = b.tessera_gpt(g), g.batch
    elif args.workload.startswith("keras-"):  # bench_keras_race.py's models, tessera's side
        import bench_keras_race as b
        import tessera.nn as tnn

        name = args.workload[len("keras-"):]
        model = getattr(b, name)(tnn, tnn.layers, tnn.ops)
        x, y, batch = b.data(name, np.random.default_rng(0))
    else:
        import bench_resnet as b

        x, y = b.make_data(128)
        model, batch = b.tessera_model(), 128

    def run():
        if args.forward:
            model.predict(x, batch_size=batch, verbose=0)
        else:
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)

    run()
    run()
    t = time.perf_counter()
    run()
    untraced = time.perf_counter() - t
    folder = args.trace or tempfile.mkdtemp(prefix=f"profile-{args.workload}-")
    with tessera.trace(folder) as tr:
        t = time.perf_counter()
        run()
        traced = time.perf_counter() - t
    path = os.path.join(folder, "counters.csv")
    tr.csv(path)
    own, count = collections.Counter(), collections.Counter()
    with open(path) as fh:
        for r in csv.DictReader(fh):
            own[r["name"]] += int(r["exclusive_ns"])
            count[r["name"]] += int(r["evaluations"])
    total = sum(own.values())
    print(f"{args.workload} {'forward' if args.forward else 'training step'}, {args.threads} "
          f"thread(s): {untraced:.3f} s untraced, {traced:.3f} s traced; primitives' exclusive "
          f"time {total / 1e9:.3f} s; trace in {folder}")
    for name, ns in own.most_common(args.top):
        print(f"  {name:<40} {ns / 1e9:8.3f} s {100 * ns / total:5.1f}%  "
              f"{count[name]} evaluation(s)")


if __name__ == "__main__":
    main()
