#!/usr/bin/env python3
"""Audio front ends: tessera.nn's MelSpectrogram and STFTSpectrogram against Keras 3
on JAX and PyTorch, on a batch of one-second 16 kHz clips.

MelSpectrogram with Keras's defaults (fft_length 2048, stride 512, 128 mel bins,
decibels) and STFTSpectrogram as speech models use it (frame 400, step 160,
fft 512, mode "log"). Each is checked against Keras first, then timed
interleaved in one process after a warm-up, median of --runs: tessera's model
(predict on the whole batch, the compiled program) and the layer called eagerly on
the array, Keras's model (predict, jitted
by JAX), and PyTorch computing the same values (torch.stft with the same window,
the same mel matrix, decibels; conv1d with Keras's kernels for the STFT layer).
tessera's stft is a DFT written as matrix products (differentiable inside a
model); the peers use an FFT. In a model those DFT matrices are constants of the
program, written into its text as literals (see docs/benchmarks.md, "Audio front
ends"); the STFT layer's kernels are weights.

Run:
  KERAS_BACKEND=jax .venv/bin/python bench/bench_audio.py [--runs 7] [--batch 8]
"""

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, os.pardir, "python"))

from tessera import nn  # noqa: E402
from tessera.nn.layers.audio import mel_weight_matrix  # noqa: E402

try:
    import keras  # a benchmark peer (and tessera.nn's test oracle), never a dependency
except ImportError:
    keras = None
try:
    import torch  # a benchmark peer only
except ImportError:
    torch = None


def torch_mel(x, layer):
    """Keras's MelSpectrogram in PyTorch: stft (periodic hann, reflect-centred),
    |.|^2, the mel matrix, decibels floored at top_db below the batch's maximum."""
    n = layer.fft_length
    spec = torch.stft(x, n, hop_length=layer.sequence_stride, win_length=layer.sequence_length,
                      window=torch.hann_window(layer.sequence_length), center=True,
                      pad_mode="reflect", return_complex=True).abs() ** layer.mag_exp
    mel = torch.from_numpy(mel_weight_matrix(layer.num_mel_bins, n // 2 + 1,
                                             layer.sampling_rate, layer.min_freq,
                                             layer.max_freq))
    out = torch.einsum("bft,fm->bmt", spec, mel)
    db = 10.0 * torch.log10(torch.clamp(out, min=layer.min_power))
    return torch.maximum(db, db.max() - layer.top_db)


def torch_stft_log(x, real, imag, step):
    """STFTSpectrogram(mode="log", valid) in PyTorch: two strided conv1d."""
    xt = x.permute(0, 2, 1).reshape(-1, 1, x.shape[1])
    re = torch.nn.functional.conv1d(xt, real, stride=step)
    im = torch.nn.functional.conv1d(xt, imag, stride=step)
    mag = torch.sqrt(torch.clamp(re * re + im * im, min=1e-7))
    out = mag.reshape(x.shape[0], x.shape[2] * real.shape[0], -1).transpose(1, 2)
    return torch.log(torch.clamp(out, min=1e-7))


def median_ms(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def race(name, contenders, runs):
    for _, fn in contenders:
        fn()  # warm-up: tessera writes its program, JAX compiles
    results = {label: [] for label, _ in contenders}
    for r in range(runs):
        order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
        for label, fn in order:
            results[label].append(median_ms(fn, 1))
    base = statistics.median(results[contenders[0][0]])
    cells = []
    for label, _ in contenders:
        m = statistics.median(results[label])
        cells.append(f"{label} {m:8.2f} ms ({m / base:4.2f}x)")
    print(f"{name:34s} " + "  ".join(cells))


def _inference(fn):
    """fn run under torch.inference_mode (PyTorch at its best for a forward pass)."""
    def run():
        with torch.inference_mode():
            return fn()
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; batch {args.batch} clips of "
          f"16000 samples; medians of {args.runs}")
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
        print(f"PyTorch {torch.__version__}: eager under torch.inference_mode, "
              f"{torch.get_num_threads()} threads (torch.stft, conv1d and einsum are single "
              f"library calls here)")
    rng = np.random.default_rng(0)
    clips = (0.3 * rng.standard_normal((args.batch, 16000))).astype("float32")

    mel = nn.layers.MelSpectrogram()
    inp = nn.Input((16000,))
    t_model = nn.Model(inp, mel(inp))
    contenders = [("tessera", lambda: t_model.predict(clips, batch_size=args.batch, verbose=0)),
                  ("tessera-eager", lambda: mel(clips))]
    want = t_model.predict(clips, batch_size=args.batch, verbose=0)
    assert np.abs(mel(clips) - want).max() < 1e-3
    if keras is not None:
        kin = keras.Input((16000,))
        k_model = keras.Model(kin, keras.layers.MelSpectrogram()(kin))
        got = k_model.predict(clips, batch_size=args.batch, verbose=0)
        assert np.abs(got - want).max() < 1e-2, np.abs(got - want).max()
        contenders.append(("keras-jax", lambda: k_model.predict(clips, batch_size=args.batch,
                                                                 verbose=0)))
    if torch is not None:
        tx = torch.from_numpy(clips)
        assert np.abs(torch_mel(tx, mel).numpy() - want).max() < 1e-2
        contenders.append(("torch", _inference(lambda: torch_mel(tx, mel))))
    race("MelSpectrogram (Keras's defaults)", contenders, args.runs)

    waves = clips[:, :, None]
    stft = nn.layers.STFTSpectrogram(mode="log", frame_length=400, frame_step=160,
                                     fft_length=512)
    sin = nn.Input((16000, 1))
    s_model = nn.Model(sin, stft(sin))
    want = s_model.predict(waves, batch_size=args.batch, verbose=0)
    contenders = [("tessera", lambda: s_model.predict(waves, batch_size=args.batch, verbose=0)),
                  ("tessera-eager", lambda: stft(waves))]
    if keras is not None:
        kin = keras.Input((16000, 1))
        k_model = keras.Model(kin, keras.layers.STFTSpectrogram(
            mode="log", frame_length=400, frame_step=160, fft_length=512)(kin))
        got = k_model.predict(waves, batch_size=args.batch, verbose=0)
        assert np.abs(got - want).max() < 1e-3, np.abs(got - want).max()
        contenders.append(("keras-jax", lambda: k_model.predict(waves, batch_size=args.batch,
                                                                 verbose=0)))
    if torch is not None:
        real, imag = (torch.from_numpy(np.ascontiguousarray(np.transpose(w, (2, 1, 0))))
                      for w in stft.get_weights())
        tw = torch.from_numpy(waves)
        assert np.abs(torch_stft_log(tw, real, imag, 160).numpy() - want).max() < 1e-3
        contenders.append(("torch", _inference(lambda: torch_stft_log(tw, real, imag, 160))))
    race("STFTSpectrogram (400/160/512, log)", contenders, args.runs)


if __name__ == "__main__":
    main()
