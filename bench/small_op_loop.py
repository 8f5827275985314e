#!/usr/bin/env python3
"""One elementwise operation in a @tessera.jit loop, for counting instructions
per operation with callgrind (docs/benchmarks.md, "Small arrays and the SIMD
level"): run it for two turn counts and divide the difference of the totals.

Run: TESSERA_THREADS=1 OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind \\
         --callgrind-out-file=cg.N.out .venv/bin/python bench/small_op_loop.py add N
     (op: add, axpy, sqrt, sin or sum; N turns after a warm-up of 10; 1,000 float64 elements)
"""

import sys

import numpy as np

import tessera


def add(x, y, n):
    for _ in range(n):
        x = x + y
    return x


def axpy(x, y, n):
    for _ in range(n):
        x = x * 0.5 + y
    return x


def sqrt(x, y, n):
    for _ in range(n):
        x = np.sqrt(x)
    return x


def sin(x, y, n):
    for _ in range(n):
        x = np.sin(x)
    return x


def total(x, y, n):
    s = 0.0
    for _ in range(n):
        s = s + x.sum()
    return s


def main():
    op, n = sys.argv[1], int(sys.argv[2])
    tessera.set_num_threads(1)
    f = tessera.jit({"add": add, "axpy": axpy, "sqrt": sqrt, "sin": sin, "sum": total}[op])
    x = np.random.default_rng(1).random(1000) + 0.5
    y = np.full(1000, 1e-6)
    f(x, y, 10)
    f(x, y, n)


if __name__ == "__main__":
    main()
