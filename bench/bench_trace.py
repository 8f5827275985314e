"""What tracing costs: the HAR CNN training step with and without recording.

The model of bench_har_cnn.py (two Conv1D, Dropout, MaxPool1D, two Dense, Adam)
trains for --steps steps at --batch rows per step, without a trace and inside
`with tessera.trace(DIR)`, --repeats times each (alternating which goes first);
the time per step is the median over the repetitions. Printed:

  recording    step time traced / untraced (goal: below 1.05): of the
               medians, the median of the back-to-back pairs, and in process
               CPU time; events per step, and the time to write the trace
               file (once, at the end);
  when off     the hooks' cost with no trace running: the two Python calls
               fit makes per step (measured), and the C++ hooks, one relaxed
               atomic load and a branch each, as many per step as a traced
               step records events (estimated at 1 ns each, a cache hit).

Both sides run in this process on the same thread count (--threads, default
all cores), so the ratio needs no peer.

run: .venv/bin/python bench/bench_trace.py [--threads N] [--batch 256] [--steps 20] [--repeats 5]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import tessera
from bench_har_cnn import tessera_model as har_cnn
from machine import machine_line
from tessera import _core, data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    tessera.set_num_threads(args.threads)
    x, y = data.synthetic_har(n=args.batch * args.steps, seed=1)
    model = har_cnn()

    def fit():
        t0, c0 = time.perf_counter(), time.process_time()
        model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0)
        return (time.perf_counter() - t0) / args.steps, (time.process_time() - c0) / args.steps

    fit()  # compiles the step and warms the direct-execution measurements
    plain, traced, writes, events = [], [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            # Alternating which goes first, so a drift of the machine's load
            # does not favour one side.
            for traced_now in ((False, True) if r % 2 == 0 else (True, False)):
                if not traced_now:
                    plain.append(fit())
                    continue
                t = tessera.trace(os.path.join(tmp, f"t{r}")).start()
                traced.append(fit())
                w0 = time.perf_counter()
                path = t.stop()
                writes.append(time.perf_counter() - w0)
                if r == 0:
                    with open(path) as f:
                        events = sum(1 for line in f if line[:2] in ("n\t", "t\t", "c\t", "s\t"))
    p, q = statistics.median(w for w, _ in plain), statistics.median(w for w, _ in traced)
    # Process CPU time (all threads) is less disturbed by other work on a
    # shared machine than wall time.
    pc, qc = statistics.median(c for _, c in plain), statistics.median(c for _, c in traced)
    # Each repetition's pair ran back to back: the median of their ratios
    # cancels most of the drift of a shared machine's load.
    paired = statistics.median(b[0] / a[0] for a, b in zip(plain, traced))

    # The hooks with no trace running: fit's two Python calls per step...
    n = 200000
    t0 = time.perf_counter()
    for i in range(n):
        s = _core._trace_now()
        _core._trace_step(i, s, _core._trace_now())
    python_hooks = (time.perf_counter() - t0) / n
    # ...and the C++ hooks: a relaxed load and a branch each (1 ns taken).
    per_step_events = events / args.steps
    cxx_hooks = per_step_events * 1e-9

    print(machine_line() + f", {args.threads} threads; HAR CNN, batch {args.batch}, "
          f"{args.steps} steps, median of {args.repeats}")
    print(f"step without trace     {p * 1e3:8.2f} ms")
    print(f"step while recording   {q * 1e3:8.2f} ms   ratio {q / p:.3f}  (goal < 1.05)")
    print(f"paired repetitions                  ratio {paired:.3f}  (median of traced / untraced)")
    print(f"CPU time per step      {pc * 1e3:8.2f} ms / {qc * 1e3:.2f} ms   ratio {qc / pc:.3f}")
    print(f"events per step        {per_step_events:8.0f}")
    print(f"writing the trace      {statistics.median(writes) * 1e3:8.2f} ms for {events} events "
          "(once, when the recording stops)")
    print(f"when off: Python hooks {python_hooks * 1e6:8.2f} us per step "
          f"({python_hooks / p * 100:.3f}% of a step, measured); C++ hooks ~{cxx_hooks * 1e6:.2f} us "
          f"per step ({per_step_events:.0f} relaxed loads at ~1 ns, estimated: "
          f"{cxx_hooks / p * 100:.4f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
