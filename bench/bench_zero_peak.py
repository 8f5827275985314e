"""Peak memory of a training step per ZeRO stage (docs/parallelism.md, "ZeRO", "Memory").

An MLP of --layers Dense layers of --width units (default 6 x 2048: 25.2 M parameters), Adam,
batch --batch per locality, trained for --steps steps under `tessera run -n 4 --mesh data=4
--zero K`. Each rank notes its resident set after building the model and its data (VmRSS, the
baseline), resets its high-water mark (/proc/self/clear_refs), trains, and reports VmHWM - baseline
(MiB) at the end of the last step (peak_mib: the steps' peak) and after fit (fit_peak_mib: with
fit's end, which gathers the whole weights and optimizer state back into the model under ZeRO),
the same for tessera's arrays (peak_live_bytes), and its model state held between steps
(model.model_state_bytes()); rank 0 prints the largest of each over the ranks as one JSON line.

run: for k in 0 1 2 3; do build/tessera run -n 4 --mesh data=4 --zero $k \\
         bench/bench_zero_peak.py; done
(--deterministic 8: deterministic mode, 8 chunks per global batch, 2 per locality)
"""

import argparse
import json

import numpy as np

import tessera.distributed as dist
from tessera import _core, nn, optim


def status_mib(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--deterministic", type=int, default=0,
                    help="deterministic mode with this many chunks per global batch (0: off)")
    ap.add_argument("--prefetch", type=int, default=None,
                    help="ZeRO 3: buckets gathered ahead (Model.ZERO3_PREFETCH; default: its own)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--keep", action="store_true",
                    help="nan_policy='stop': fit keeps the state it hands the step")
    a = ap.parse_args()
    n = dist.size()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.batch * n * a.steps, a.width)).astype(np.float32)
    y = rng.standard_normal((a.batch * n * a.steps, a.width)).astype(np.float32)
    layers = [nn.Dense(a.width, activation="relu") for _ in range(a.layers - 1)]
    model = nn.Sequential(layers + [nn.Dense(a.width)], input_shape=(a.width,), seed=1)
    model.compile(optimizer=optim.Adam(1e-4), loss="mse")
    if a.prefetch is not None:
        model.ZERO3_PREFETCH = a.prefetch
    params = sum(int(np.prod(w.shape)) for w in model.get_weights())
    state = {}

    class Note(nn.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            state.setdefault("hwm", []).append(status_mib("VmHWM") - base)

        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                state.update(self.model.model_state_bytes())
            # the steps' peaks, before fit's end puts the whole state back
            state["step_hwm"] = status_mib("VmHWM") - base
            state["step_arrays"] = (_core.memory_stats()["peak_live_bytes"] - live0) / 2**20

    base = status_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # VmHWM starts again from VmRSS
    live0 = _core.memory_stats()["live_bytes"]
    _core.reset_peak_memory()
    model.fit(x, y, batch_size=a.batch * n, epochs=1, verbose=0, callbacks=[Note()],
              nan_policy="stop" if a.keep else "continue",
              deterministic=a.deterministic or False)
    peak = status_mib("VmHWM") - base
    arrays = (_core.memory_stats()["peak_live_bytes"] - live0) / 2**20
    mine = np.array([[state["step_hwm"], state.get("total", 0) / 2**20, state["step_arrays"],
                      peak, arrays]])
    every = np.asarray(dist.all_gather(mine)) if n > 1 else mine
    if dist.rank() == 0:
        print(json.dumps({"params": params, "ranks": n,
                          "peak_mib": round(max(e[0] for e in every), 1),
                          "model_state_mib": round(max(e[1] for e in every), 1),
                          "peak_array_mib": round(max(e[2] for e in every), 1),
                          "fit_peak_mib": round(max(e[3] for e in every), 1),
                          "fit_peak_array_mib": round(max(e[4] for e in every), 1)}))
    if dist.rank() == 0 and a.verbose:
        st = _core.memory_stats()
        print("hwm before each step", [round(h) for h in state["hwm"]], "end", round(peak),
              {k: round(v / 2**20) for k, v in st.items() if k.endswith("bytes")})


if __name__ == "__main__":
    main()
