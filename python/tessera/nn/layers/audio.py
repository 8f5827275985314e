"""Keras's audio layers: STFTSpectrogram (the STFT as a strided convolution with
the STFT initializer's kernels, trainable like Keras's) and MelSpectrogram (ops.stft,
the HTK mel filter bank and decibels). Both are written with tessera.nn.ops in
`call`, so they run eagerly on arrays and compile into a model's program (and
train) as a user's layer written with ops does."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import initializers
from .. import ops as kops
from ..input_spec import InputSpec
from ..symbolic import KerasTensor, user_location
from ..symbolic import _record as symbolic_record
from .base import Layer, _data_format

__all__ = ["MelSpectrogram", "STFTSpectrogram"]

_EPSILON = 1e-7  # keras.backend.epsilon()
_MODES = ("log", "magnitude", "psd", "real", "imag", "angle", "stft")
# the HTK mel scale: mel(f) = 1127 log(1 + f / 700)
_MEL_BREAK_HZ = 700.0
_MEL_Q = 1127.0


def _int_at_least(v, low: int, name: str, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"[{where}] {name} must be an int >= {low}, got {v!r}")
    return int(v)


def _float_input(layer, x):
    d = kops.dtype(x)
    if d not in ("float16", "float32", "float64"):
        raise TypeError(f"[{layer.kind}] layer {layer.name!r} takes float16, float32 or float64 "
                        f"inputs, got {d} (at {user_location()})")
    return x


def _known_time(layer, x, axis, example):
    """Inside a model the time axis must have a length (tessera's strided
    convolutions and stft need it while the model is built)."""
    if isinstance(x, KerasTensor) and x.shape[axis] is None:
        raise ValueError(f"[{layer.kind}] layer {layer.name!r} needs the time axis's length "
                         f"inside a model (give it in the Input, e.g. {example}), got inputs of "
                         f"shape {tuple(x.shape)}")


class STFTSpectrogram(Layer):
    """The short-time Fourier transform of (batch, time, channels) signals, like
    keras.layers.STFTSpectrogram: each channel convolved with the windowed DFT
    kernels (weights `real_kernel`, `imag_kernel`, from initializers.STFT) with
    stride frame_step; mode chooses log / magnitude / psd / real / imag / angle /
    stft (real and imag concatenated). The kernels train unless trainable=False."""

    kind = "STFTSpectrogram"

    def __init__(self, mode="log", frame_length=256, frame_step=None, fft_length=None,
                 window="hann", periodic=False, scaling="density", padding="valid",
                 expand_dims=False, data_format=None, **kwargs):
        w = "STFTSpectrogram"
        frame_length = _int_at_least(frame_length, 1, "frame_length", w)
        if frame_step is not None and (isinstance(frame_step, bool) or
                                       not isinstance(frame_step, (int, np.integer)) or
                                       not 1 <= frame_step <= frame_length):
            raise ValueError(f"[{w}] frame_step must be a positive int not greater than "
                             f"frame_length ({frame_length}), got {frame_step!r}")
        if fft_length is not None:
            fft_length = _int_at_least(fft_length, 1, "fft_length", w)
            if fft_length < frame_length:
                raise ValueError(f"[{w}] fft_length must be at least frame_length: got "
                                 f"fft_length={fft_length}, frame_length={frame_length}")
            if fft_length & (fft_length - 1):
                warnings.warn(f"[{w}] fft_length is recommended to be a power of two, got "
                              f"{fft_length}", stacklevel=2)
        if mode not in _MODES:
            raise ValueError(f"[{w}] mode must be one of {', '.join(_MODES)}, got {mode!r}")
        if scaling not in (None, "density", "spectrum"):
            raise ValueError(f"[{w}] scaling must be None, 'density' or 'spectrum', got "
                             f"{scaling!r}")
        if padding not in ("valid", "same"):
            raise ValueError(f"[{w}] padding must be 'valid' or 'same', got {padding!r}")
        if isinstance(window, str):
            initializers.signal_window(window, 1, False, w)
        super().__init__(**kwargs)
        self.mode, self.frame_length, self.frame_step = mode, frame_length, frame_step
        self._frame_step = int(frame_step or frame_length // 2)
        if self._frame_step < 1:
            raise ValueError(f"[{w}] frame_length {frame_length} gives no default frame_step "
                             "(frame_length // 2 is 0); give frame_step")
        self.fft_length = fft_length
        self._fft_length = fft_length or 2 ** int(math.ceil(math.log2(frame_length)))
        self.window, self.periodic, self.scaling = window, bool(periodic), scaling
        self.padding, self.expand_dims = padding, bool(expand_dims)
        self.data_format = _data_format(data_format, w)
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape):
        shape = (self.frame_length, 1, self._fft_length // 2 + 1)
        if self.mode != "imag":
            self.real_kernel = self.add_weight(
                name="real_kernel", shape=shape,
                initializer=initializers.STFT("real", self.window, self.scaling, self.periodic))
        if self.mode != "real":
            self.imag_kernel = self.add_weight(
                name="imag_kernel", shape=shape,
                initializer=initializers.STFT("imag", self.window, self.scaling, self.periodic))
        self.built = True

    def _convolve(self, x, kernel):
        """Every channel convolved alone: (batch, channels, bins, frames)."""
        last = self.data_format == "channels_last"
        shape = kops.shape(x)  # (a length unknown while the model is built: a symbolic int)
        time, channels = (shape[1], shape[2]) if last else (shape[2], shape[1])
        if last:
            x = kops.reshape(kops.transpose(x, [0, 2, 1]), [-1, time, 1])
        else:
            x = kops.reshape(x, [-1, 1, time])
        y = kops.conv(x, kops.cast(kernel, kops.dtype(x)), strides=self._frame_step,
                      padding=self.padding, data_format=self.data_format)
        if last:
            y = kops.transpose(y, [0, 2, 1])
        _, bins, frames = kops.shape(y)
        return kops.reshape(y, [-1, channels, bins, frames])

    def _arrange(self, y):
        """(batch, channels, bins, frames) in the layer's output layout."""
        _, channels, bins, frames = kops.shape(y)
        if self.expand_dims:
            order = [0, 3, 2, 1] if self.data_format == "channels_last" else [0, 1, 3, 2]
            return kops.transpose(y, order)
        y = kops.reshape(y, [-1, channels * bins, frames])
        return kops.transpose(y, [0, 2, 1]) if self.data_format == "channels_last" else y

    def call(self, inputs):
        x = _float_input(self, kops.convert_to_tensor(inputs))
        shape = kops.shape(x)
        if len(shape) != 3:
            raise ValueError(f"[STFTSpectrogram] layer {self.name!r} expects inputs of shape "
                             f"(batch, time, channels) (rank 3), got shape {tuple(shape)}")
        time_axis = 1 if self.data_format == "channels_last" else 2
        if isinstance(x, KerasTensor) and x.shape[time_axis] is None:
            return self._unknown_length_output(x, time_axis)
        real = self._convolve(x, self.real_kernel) if self.mode != "imag" else None
        imag = self._convolve(x, self.imag_kernel) if self.mode != "real" else None
        if self.mode == "real":
            return self._arrange(real)
        if self.mode == "imag":
            return self._arrange(imag)
        if self.mode == "angle":
            return self._arrange(kops.arctan2(imag, real))
        if self.mode == "stft":
            return self._arrange(kops.concatenate([real, imag], axis=2))
        power = kops.add(kops.square(real), kops.square(imag))
        if self.mode == "psd":
            # the one-sided density: the bins between DC and Nyquist counted twice
            inner = kops.pad(power[:, :, 1:-1, :], [[0, 0], [0, 0], [1, 1], [0, 0]])
            return self._arrange(kops.add(power, inner))
        magnitude = self._arrange(kops.sqrt(kops.maximum(power, _EPSILON)))
        if self.mode == "magnitude":
            return magnitude
        return kops.log(kops.maximum(magnitude, _EPSILON))

    def _unknown_length_output(self, x, time_axis):
        """The output's shape while a model whose time axis has no length yet is
        recorded (Keras's Input((None, 1))): the frames' axis is unknown too. The
        stand-in signals are shorter than a frame, so nothing is convolved here;
        the model's programs are written for each length met (varlen.py), where
        this call is traced again on the signal's length and computes."""
        shape = self.compute_output_shape(tuple(x.shape))
        frames = shape.index(None, 1)
        signal = x[:, :, 0] if time_axis == 1 else x[:, 0, :]
        along_time = kops.multiply(signal, 0)  # (batch, time): zeros
        index = (slice(None),) + tuple(slice(None) if a == frames else None
                                       for a in range(1, len(shape)))
        rest = tuple(1 if a in (0, frames) else d for a, d in enumerate(shape))
        return kops.add(along_time[index], kops.zeros(rest[1:], dtype=kops.dtype(x)))

    def compute_output_shape(self, input_shape):
        last = self.data_format == "channels_last"
        batch = input_shape[0]
        time, channels = (input_shape[1], input_shape[2]) if last else \
            (input_shape[2], input_shape[1])
        bins = (self._fft_length // 2 + 1) * (2 if self.mode == "stft" else 1)
        if time is None:
            frames = None
        elif self.padding == "same":
            frames = -(-time // self._frame_step)
        else:
            frames = (time - self.frame_length) // self._frame_step + 1
        if self.expand_dims:
            return (batch, frames, bins, channels) if last else (batch, channels, frames, bins)
        flat = None if channels is None else channels * bins
        return (batch, frames, flat) if last else (batch, flat, frames)

    def get_config(self):
        window = self.window
        if window is not None and not isinstance(window, str):
            window = np.asarray(window).tolist()
        return {"name": self.name, "trainable": self.trainable, "dtype": self.dtype,
                "mode": self.mode, "frame_length": self.frame_length,
                "frame_step": self.frame_step, "fft_length": self.fft_length,
                "window": window, "periodic": self.periodic, "scaling": self.scaling,
                "padding": self.padding, "data_format": self.data_format,
                "expand_dims": self.expand_dims}


def mel_weight_matrix(num_mel_bins, num_spectrogram_bins, sampling_rate, lower_edge_hertz,
                      upper_edge_hertz, dtype="float32", in_program=False):
    """Keras's linear_to_mel_weight_matrix: (num_spectrogram_bins, num_mel_bins)
    triangles of peak 1 on the HTK mel scale, the DC bin zero; computed in
    `dtype` in Keras's order. With in_program, a symbolic tensor the model's program
    computes from the bins' and bands' mel values (a NumPy constant is written into
    the program's text: the (bins, bands) matrix would cost most of each call)."""
    t = np.dtype(dtype).type

    def to_mel(hz):
        return t(_MEL_Q) * np.log(t(1.0) + hz / t(_MEL_BREAK_HZ))

    nyquist = t(sampling_rate) / t(2.0)
    linear = np.linspace(t(0.0), nyquist, num_spectrogram_bins, dtype=dtype)[1:]
    bins_mel = to_mel(linear)[:, None]
    edges = np.linspace(to_mel(t(lower_edge_hertz)), to_mel(t(upper_edge_hertz)),
                        num_mel_bins + 2, dtype=dtype)
    lower, center, upper = edges[None, :-2], edges[None, 1:-1], edges[None, 2:]
    if in_program:
        bins_mel = symbolic_record("astype", (bins_mel, str(bins_mel.dtype)), {})
        lower_slopes = kops.divide(kops.subtract(bins_mel, lower), center - lower)
        upper_slopes = kops.divide(kops.subtract(upper, bins_mel), upper - center)
        weights = kops.maximum(t(0.0), kops.minimum(lower_slopes, upper_slopes))
        return kops.pad(weights, [[1, 0], [0, 0]])
    lower_slopes = (bins_mel - lower) / (center - lower)
    upper_slopes = (upper - bins_mel) / (upper - center)
    weights = np.maximum(t(0.0), np.minimum(lower_slopes, upper_slopes))
    return np.pad(weights, [[1, 0], [0, 0]]).astype(dtype)


class MelSpectrogram(Layer):
    """Mel spectrograms of (time,) or (batch, time) signals, like
    keras.layers.MelSpectrogram: ops.stft (centred, reflect-padded), the
    magnitude to the power mag_exp, the HTK mel filter bank, then (power_to_db)
    decibels relative to ref_power, floored at min_power and at top_db below the
    largest value (of the whole batch, as Keras's); output (..., num_mel_bins,
    frames)."""

    kind = "MelSpectrogram"

    def __init__(self, fft_length=2048, sequence_stride=512, sequence_length=None,
                 window="hann", sampling_rate=16000, num_mel_bins=128, min_freq=20.0,
                 max_freq=None, power_to_db=True, top_db=80.0, mag_exp=2.0, min_power=1e-10,
                 ref_power=1.0, **kwargs):
        w = "MelSpectrogram"
        self.fft_length = _int_at_least(fft_length, 1, "fft_length", w)
        self.sequence_stride = _int_at_least(sequence_stride, 1, "sequence_stride", w)
        self.sequence_length = _int_at_least(sequence_length or fft_length, 1,
                                             "sequence_length", w)
        if self.fft_length < self.sequence_length:
            raise ValueError(f"[{w}] fft_length must be at least sequence_length: got "
                             f"sequence_length={self.sequence_length}, "
                             f"fft_length={self.fft_length}")
        if isinstance(window, str) and window not in ("hann", "hamming"):
            raise ValueError(f"[{w}] window must be 'hann', 'hamming', an array or None, got "
                             f"{window!r}")
        self.window = window
        self.sampling_rate = sampling_rate
        self.num_mel_bins = _int_at_least(num_mel_bins, 1, "num_mel_bins", w)
        self.min_freq = min_freq
        self.max_freq = max_freq or int(sampling_rate / 2)
        self.power_to_db, self.top_db, self.mag_exp = power_to_db, top_db, mag_exp
        self.min_power, self.ref_power = min_power, ref_power
        super().__init__(**kwargs)

    def call(self, inputs):
        # Keras's: computed in the layer's dtype (float32 for float16 / bfloat16)
        d = self.compute_dtype
        work = d if d in ("float32", "float64") else "float32"
        x = kops.cast(kops.convert_to_tensor(inputs), work)
        if len(x.shape) not in (1, 2):
            raise ValueError(f"[MelSpectrogram] layer {self.name!r} takes (time,) or (batch, "
                             f"time) signals, got shape {tuple(x.shape)} (at "
                             f"{user_location()})")
        _known_time(self, x, -1, "Input((time,))")
        real, imag = kops.stft(x, self.sequence_length, self.sequence_stride, self.fft_length,
                               window=self.window, center=True)
        spec = kops.power(kops.sqrt(kops.add(kops.square(real), kops.square(imag))),
                          self.mag_exp)
        matrix = mel_weight_matrix(self.num_mel_bins, real.shape[-1], self.sampling_rate,
                                   self.min_freq, self.max_freq, work,
                                   in_program=isinstance(spec, KerasTensor))
        out = kops.tensordot(spec, matrix, axes=1)
        if self.power_to_db:
            out = self._decibels(out, work)
        out = kops.swapaxes(out, -1, -2)
        return kops.cast(out, d)

    def _decibels(self, power, dtype):
        t = np.dtype(dtype).type
        db = kops.multiply(kops.log10(kops.maximum(power, t(self.min_power))), t(10.0))
        ref = max(abs(float(self.ref_power)), float(self.min_power))
        db = kops.subtract(db, t(10.0) * np.log10(t(ref)))
        return kops.maximum(db, kops.subtract(kops.max(db), t(self.top_db)))

    def compute_output_shape(self, input_shape):
        # the frames the centred stft gives: 1 + n // stride (Keras's own formula,
        # (n + stride + 1) // stride, says one more when stride divides n + 1)
        def frames(n):
            return None if n is None else 1 + n // self.sequence_stride

        if len(input_shape) == 1:
            return (self.num_mel_bins, frames(input_shape[0]))
        return (input_shape[0], self.num_mel_bins, frames(input_shape[1]))

    def get_config(self):
        window = self.window
        if window is not None and not isinstance(window, str):
            window = np.asarray(window).tolist()
        return {"name": self.name, "trainable": self.trainable, "dtype": self.dtype,
                "fft_length": self.fft_length, "sequence_stride": self.sequence_stride,
                "sequence_length": self.sequence_length, "window": window,
                "sampling_rate": self.sampling_rate, "num_mel_bins": self.num_mel_bins,
                "min_freq": self.min_freq, "max_freq": self.max_freq,
                "power_to_db": self.power_to_db, "top_db": self.top_db,
                "mag_exp": self.mag_exp, "min_power": self.min_power,
                "ref_power": self.ref_power}
