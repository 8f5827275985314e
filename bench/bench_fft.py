#!/usr/bin/env python3
"""FFT-based convolution through tessera.jit's np.fft against NumPy (pocketfft).

Three kernels written as NumPy users write them: a 2-d circular convolution
of an image with a blur kernel (rfft2 / irfft2), a batch of 1-d convolutions
along the last axis of power-of-two length (rfft / irfft), the same with a
prime length (Bluestein's algorithm in tessera; pocketfft has its own), and
a complex fft2 round trip of a 1000 x 1000 array (radix 2 and 5). Each is
checked against NumPy first, then timed interleaved in one process: NumPy,
tessera at 1 thread and tessera at 2 threads in turn (rotating which goes
first), after a warm-up, median of --runs. NumPy's FFT is single-threaded.
Numba is raced where it compiles the kernel; its nopython mode has no
np.fft (the line says so).

Run:
  .venv/bin/python bench/bench_fft.py [--runs 7]
"""

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

try:
    import numba  # a benchmark peer only, never a tessera dependency
except ImportError:
    numba = None

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, os.pardir, "python"))

import tessera  # noqa: E402


def conv2d_fft(image, kernel):
    s = image.shape
    return np.fft.irfft2(np.fft.rfft2(image) * np.fft.rfft2(kernel, s=s), s=s)


def conv1d_batch(x, k):
    n = x.shape[-1]
    return np.fft.irfft(np.fft.rfft(x, axis=-1) * np.fft.rfft(k, n=n), n=n, axis=-1)


def fft2_round_trip(z):
    return np.fft.ifft2(np.fft.fft2(z) * 0.5)


def cases():
    rng = np.random.default_rng(0)
    blur = np.zeros((9, 9))
    blur[:, :] = 1.0 / 81
    return [
        ("conv2d_fft 512x512 (rfft2)", conv2d_fft, (rng.standard_normal((512, 512)), blur)),
        ("conv1d_batch 256x4096 (rfft)", conv1d_batch,
         (rng.standard_normal((256, 4096)), rng.standard_normal(33))),
        ("conv1d_batch 256x4093 prime", conv1d_batch,
         (rng.standard_normal((256, 4093)), rng.standard_normal(33))),
        ("fft2_round_trip 1000x1000 complex", fft2_round_trip,
         (rng.standard_normal((1000, 1000)) + 1j * rng.standard_normal((1000, 1000)),)),
    ]


def timed(fn, args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def numba_peer(f, args):
    if numba is None:
        return None, "Numba not installed"
    try:
        g = numba.njit(f)
        g(*args)
        return g, None
    except Exception as e:  # noqa: BLE001 - any refusal is reported
        first = str(e).strip().splitlines()
        why = next((line for line in first if "fft" in line), first[0] if first else type(e).__name__)
        return None, f"Numba refuses it ({type(e).__name__}: {why.strip()[:90]})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    opts = ap.parse_args()
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    print(f"machine: {platform.machine()} {cpu}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, NumPy {np.__version__}")
    print("threads: NumPy 1 (pocketfft), tessera 1 and 2 (tessera.jit(f, threads=N))")
    print(f"medians of {opts.runs} interleaved runs after a warm-up\n")
    header = f"{'kernel':36s} {'NumPy':>9s} {'t1':>9s} {'t2':>9s} {'t1/np':>7s} {'t2/np':>7s}"
    print(header)
    print("-" * len(header))
    refusals = []
    for name, f, args in cases():
        expected = f(*args)
        peers = {"numpy": f, "t1": tessera.jit(f, threads=1), "t2": tessera.jit(f, threads=2)}
        for key in ("t1", "t2"):
            got = peers[key](*args)
            err = np.abs(got - expected).max() / np.abs(expected).max()
            assert got.dtype == expected.dtype and err < 1e-12, (name, key, err)
        nb, why = numba_peer(f, args)
        if nb is not None:
            peers["numba"] = nb
        else:
            refusals.append((name, why))
        times = {k: [] for k in peers}
        keys = list(peers)
        for r in range(opts.runs):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for k in order:
                times[k].append(timed(peers[k], args))
        med = {k: statistics.median(v) for k, v in times.items()}
        line = (f"{name:36s} {med['numpy'] * 1e3:8.2f}ms {med['t1'] * 1e3:8.2f}ms "
                f"{med['t2'] * 1e3:8.2f}ms {med['t1'] / med['numpy']:7.2f} "
                f"{med['t2'] / med['numpy']:7.2f}")
        if "numba" in med:
            line += f"  numba {med['numba'] * 1e3:.2f}ms"
        print(line)
    for name, why in refusals:
        print(f"numba, {name}: {why}")


if __name__ == "__main__":
    main()
