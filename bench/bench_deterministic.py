"""Cost of deterministic training: one epoch of the HAR CNN (examples/har_cnn.py) with
fit(deterministic=...) against the normal mode, on one process or under `tessera run`.

    .venv/bin/python bench/bench_deterministic.py [--batch 64 256 1024] [--cpu]
    build/tessera run -n 2 bench/bench_deterministic.py --cpu

The modes run interleaved, the same model each (compiled before timing), on synthetic HAR data;
each figure is the median of --repeats epochs. --cpu times the process's CPU time instead of the
wall clock (steadier on a shared machine; with one thread per locality it is the work done).
Locality 0 prints one line per batch size: seconds per epoch and the ratios to the normal mode.
"""

import argparse
import os
import statistics
import sys
import time

import tessera
from tessera import data

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples"))
from har_cnn import build_model  # noqa: E402

MODES = {"normal": False, "deterministic (C=8)": True, "deterministic=4": 4}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cpu", action="store_true", help="time CPU seconds, not wall seconds")
    args = p.parse_args()
    clock = time.process_time if args.cpu else time.perf_counter
    rank, size = tessera.distributed.rank(), tessera.distributed.size()
    x, y = data.synthetic_har(n=args.samples, seed=1, split="train")
    if rank == 0:
        print(f"HAR CNN, {args.samples} samples, {size} localit{'y' if size == 1 else 'ies'} x "
              f"{tessera.num_threads()} threads, median of {args.repeats} epochs "
              f"({'CPU' if args.cpu else 'wall'} seconds)")
    for batch in args.batch:
        models = {}
        for mode, setting in MODES.items():
            m = build_model(0)
            m.compile(tessera.optim.Adam(1e-3), "sparse_categorical_crossentropy",
                      metrics=["accuracy"])
            m.fit(x[:batch], y[:batch], batch_size=batch, verbose=0, deterministic=setting)
            models[mode] = m
        times = {mode: [] for mode in MODES}
        for _ in range(args.repeats):
            for mode, setting in MODES.items():
                start = clock()
                models[mode].fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False,
                                 deterministic=setting)
                times[mode].append(clock() - start)
        med = {mode: statistics.median(t) for mode, t in times.items()}
        if rank == 0:
            cells = [f"{mode} {med[mode]:.3f} s" + ("" if mode == "normal" else
                                                    f" ({med[mode] / med['normal']:.2f}x)")
                     for mode in MODES]
            print(f"batch {batch:5d}: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
