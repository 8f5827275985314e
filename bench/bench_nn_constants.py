"""Cost of a large NumPy constant inside a tessera.nn model (issue 30).

A custom layer multiplies its input by a 2048x1025 float32 table held as a
NumPy array and used through nn.ops inside call (as a DFT or positional
matrix would be). Measures, in one process: building the model (the
symbolic trace), the first predict (writing and compiling the program), the
steady predict of a batch of 8, and the length of the predict program's
text. No peer: it compares tessera before and after binding such constants
once (run it on both commits).

    PYTHONPATH=python python bench/bench_nn_constants.py [--rows 2048 --cols 1025]
"""

import argparse
import time

import numpy as np

from tessera import nn
from tessera.nn import ops


class TableLayer(nn.Layer):
    def __init__(self, table, **kwargs):
        super().__init__(**kwargs)
        self.table = table

    def call(self, x):
        return ops.matmul(x, ops.convert_to_tensor(self.table))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--cols", type=int, default=1025)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    table = np.random.default_rng(0).standard_normal((a.rows, a.cols)).astype("float32")
    x = np.random.default_rng(1).standard_normal((8, a.rows)).astype("float32")

    t0 = time.perf_counter()
    inp = nn.Input((a.rows,))
    model = nn.Model(inp, TableLayer(table)(inp))
    build = time.perf_counter() - t0

    t0 = time.perf_counter()
    y = model.predict(x, verbose=0)
    first = time.perf_counter() - t0
    assert np.allclose(y, x @ table, rtol=1e-4, atol=1e-3)

    steady = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        model.predict(x, verbose=0)
        steady.append(time.perf_counter() - t0)
    text = [len(p.text) for p in model._programs.values()
            if isinstance(getattr(p, "text", None), str)]
    print(f"constant {a.rows}x{a.cols} float32, batch 8, 1 process")
    print(f"model build     {build * 1e3:9.1f} ms")
    print(f"first predict   {first * 1e3:9.1f} ms (writes and compiles the program)")
    print(f"steady predict  {np.median(steady) * 1e3:9.1f} ms (median of {a.repeat})")
    if text:  # (programs that keep their text: after issue 30)
        print(f"program text    {max(text)} chars")


if __name__ == "__main__":
    main()
