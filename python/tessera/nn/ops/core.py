"""Keras 3's core and math ops: conversions, shapes, slicing and scatter,
stop_gradient, control flow (unrolled or chosen while the model is built),
segment reductions, top_k, logsumexp, erf, rsqrt and the Fourier transforms."""

from __future__ import annotations

import builtins
import math
import numbers

import numpy as np

from ..initializers import signal_window
from ..symbolic import KerasTensor, _dtype_name, _record, user_location
from . import numpy as knp
from ._base import cast as _cast
from ._base import (dtype_of, eager_only, floating, is_symbolic, prim, shape_of,
                    static_or_symbolic_shape, tensor)
from .extra import extract_sequences

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


# ------------------------------------------------------------ conversions
@_export
def cast(x, dtype):
    return _cast(x, dtype)


@_export
def convert_to_tensor(x, dtype=None, sparse=None, ragged=None):
    if sparse or ragged:
        raise ValueError("[ops.convert_to_tensor] sparse and ragged tensors are not supported")
    return tensor(x, dtype)


@_export
def convert_to_numpy(x):
    if isinstance(x, KerasTensor):
        raise TypeError(f"[ops.convert_to_numpy] at {user_location()}: a symbolic tensor has no "
                        "values while the model is being built")
    return np.asarray(x)


@_export
def is_tensor(x):
    return isinstance(x, (np.ndarray, KerasTensor))


@_export
def shape(x):
    """A tuple of ints; on a symbolic tensor the batch axis (unknown while the
    model is built) is a symbolic int, usable in reshape, zeros, random ..."""
    return static_or_symbolic_shape(x)


@_export
def dtype(x):
    return dtype_of(x)


# ------------------------------------------------------------ slicing and scatter
def _starts(op, start_indices):
    if is_symbolic(start_indices):
        raise TypeError(f"[ops.{op}] start_indices must be Python ints (or arrays) while the "
                        f"model is built, got symbolic values (at {user_location()})")
    return [int(i) for i in np.asarray(start_indices).reshape(-1)]


@_export
def slice(inputs, start_indices, shape):  # noqa: A001 - Keras's names
    x = tensor(inputs)
    starts = _starts("slice", start_indices)
    size = [int(s) for s in shape]
    xs = shape_of(x)
    if len(starts) != len(xs) or len(size) != len(xs):
        raise ValueError(f"[ops.slice] start_indices {starts} and shape {size} must have one "
                         f"entry per axis of the input's shape {xs}")
    index = []
    for a, (b, n, d) in enumerate(zip(starts, size, xs)):
        if d is not None:
            b = 0 if d < n else builtins.min(b, d - n)  # clamped as lax.dynamic_slice
        index.append(builtins.slice(b, None if n == -1 else b + n))
    return x[tuple(index)]


@_export
def slice_update(inputs, start_indices, updates):
    """inputs with updates written at start_indices: the updates padded to the
    input's shape and chosen by a mask, so it is differentiable in both."""
    x, u = tensor(inputs), tensor(updates)
    starts = _starts("slice_update", start_indices)
    xs, us = shape_of(x), shape_of(u)
    if len(starts) != len(xs) or len(us) != len(xs):
        raise ValueError(f"[ops.slice_update] start_indices {starts} and updates of shape {us} "
                         f"must have one entry per axis of the input's shape {xs}")
    widths = []
    for b, n, d in zip(starts, us, xs):
        if d is None or n is None:
            if b != 0 or d != n:
                raise ValueError(f"[ops.slice_update] along the batch axis the updates must "
                                 f"cover the whole axis from 0, got start {b} (at "
                                 f"{user_location()})")
            widths.append([0, 0])
            continue
        if b < 0 or b + n > d:
            raise ValueError(f"[ops.slice_update] updates of shape {us} at {starts} do not fit "
                             f"the input's shape {xs}")
        widths.append([b, d - b - n])
    u = _cast(u, dtype_of(x))
    padded = prim("pad", u, widths)
    mask = prim("pad", knp.ones_like(u, dtype="bool"), widths)
    return knp.where(mask, padded, x)


def _index_columns(op, indices):
    idx = tensor(indices)
    s = shape_of(idx)
    if not s or s[-1] is None:
        raise ValueError(f"[ops.{op}] indices must have shape (..., k), got {s}")
    cols = [idx[..., i] for i in range(s[-1])]
    return [_cast(c, "int64") for c in cols]


@_export
def scatter(indices, values, shape):
    """zeros(shape) with values added at indices (repeated indices add up)."""
    v = tensor(values)
    return prim("index_add", knp.zeros(shape, dtype=dtype_of(v)), v,
                *_index_columns("scatter", indices))


@_export
def scatter_update(inputs, indices, updates, reduction=None):
    x = tensor(inputs)
    cols = _index_columns("scatter_update", indices)
    u = tensor(updates)
    if reduction is None:
        return prim("index_update", x, u, *cols)
    if reduction == "add":
        return prim("index_add", x, u, *cols)
    raise ValueError(f"[ops.scatter_update] reduction must be None or 'add', got {reduction!r}")


@_export
def stop_gradient(variable):
    return prim("stop_gradient", tensor(variable))


# ------------------------------------------------------------ control flow
def _map_structure(fn, *trees):
    t0 = trees[0]
    if isinstance(t0, (list, tuple)):
        return type(t0)(_map_structure(fn, *parts) for parts in zip(*trees))
    if isinstance(t0, dict):
        return {k: _map_structure(fn, *(t[k] for t in trees)) for k in t0}
    return fn(*trees)


def _truth(op, v):
    if isinstance(v, KerasTensor):
        raise TypeError(f"[ops.{op}] at {user_location()}: the condition is a symbolic tensor; "
                        "inside a model a loop's condition must be known while the model is "
                        "built (Python ints, shapes), the loop is then unrolled")
    return bool(np.asarray(v))


@_export
def cond(pred, true_fn, false_fn):
    """true_fn() if pred else false_fn(); a symbolic pred computes both and
    chooses elementwise (the branches must give the same shapes)."""
    if isinstance(pred, KerasTensor):
        if pred.shape not in ((), (None,)) and any(d is not None for d in pred.shape):
            raise ValueError(f"[ops.cond] pred must be a scalar, got shape {pred.shape}")
        t, f = true_fn(), false_fn()
        return _map_structure(lambda a, b: knp.where(pred, a, b), t, f)
    return true_fn() if _truth("cond", pred) else false_fn()


@_export
def switch(index, branches, *operands):
    if isinstance(index, KerasTensor):
        raise TypeError("[ops.switch] a symbolic index is not supported; use ops.where")
    i = int(np.clip(int(np.asarray(index)), 0, len(branches) - 1))
    return branches[i](*operands)


@_export
def while_loop(cond, body, loop_vars, maximum_iterations=None):
    """Runs body while cond holds (unrolled when the model is built)."""
    is_tuple = isinstance(loop_vars, (list, tuple))
    vars_ = tuple(loop_vars) if is_tuple else (loop_vars,)
    n = 0
    while (maximum_iterations is None or n < maximum_iterations) and \
            _truth("while_loop", cond(*vars_)):
        out = body(*vars_)
        vars_ = tuple(out) if is_tuple else (out,)
        n += 1
    return vars_ if is_tuple else vars_[0]


@_export
def fori_loop(lower, upper, body_fun, init_val):
    if is_symbolic(lower, upper):
        raise TypeError(f"[ops.fori_loop] lower and upper must be known while the model is "
                        f"built (at {user_location()})")
    val = init_val
    for i in range(int(lower), int(upper)):
        val = body_fun(i, val)
    return val


def _leading(op, elements) -> int:
    flat = elements if isinstance(elements, (list, tuple)) else [elements]
    n = shape_of(flat[0])[0] if shape_of(flat[0]) else None
    if n is None:
        raise ValueError(f"[ops.{op}] the leading axis must be known (not the batch axis of a "
                         f"symbolic tensor) to map over it (at {user_location()})")
    return n


def _element(elements, i):
    if isinstance(elements, (list, tuple)):
        return type(elements)(tensor(e)[i] for e in elements)
    return tensor(elements)[i]


def _stack_results(results):
    return _map_structure(lambda *rs: knp.stack(list(rs), 0), *results)


@_export
def vectorized_map(function, elements):
    n = _leading("vectorized_map", elements)
    return _stack_results([function(_element(elements, i)) for i in range(n)])


@_export
def map(f, xs):  # noqa: A001
    n = _leading("map", xs)
    return _stack_results([f(_element(xs, i)) for i in range(n)])


@_export
def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    n = _leading("scan", xs) if xs is not None else length
    if n is None:
        raise ValueError("[ops.scan] give xs or length")
    carry, ys = init, []
    order = range(n - 1, -1, -1) if reverse else range(n)
    for i in order:
        carry, y = f(carry, None if xs is None else _element(xs, i))
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, (_stack_results(ys) if ys and ys[0] is not None else None)


# ------------------------------------------------------------ segments, top_k
def _segment_mask(op, data, segment_ids, num_segments):
    ids = tensor(segment_ids)
    if num_segments is None:
        eager_only(f"{op} without num_segments", ids)
        num_segments = int(np.max(ids)) + 1 if np.size(ids) else 0
    hot = knp.equal(knp.expand_dims(ids, -1), knp.arange(int(num_segments), dtype=dtype_of(ids)))
    return hot, int(num_segments)


@_export
def segment_sum(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    data = tensor(data)
    hot, _ = _segment_mask("segment_sum", data, segment_ids, num_segments)
    return knp.tensordot(_cast(hot, dtype_of(data)), data, axes=[[0], [0]])


def _segment_extreme(op, data, segment_ids, num_segments, big):
    data = tensor(data)
    hot, _ = _segment_mask(op, data, segment_ids, num_segments)
    extra = len(shape_of(data)) - 1
    mask = knp.reshape(hot, tuple(shape_of(hot)[:1] if shape_of(hot)[0] is not None else (-1,))
                       + (shape_of(hot)[1],) + (1,) * extra)
    d = dtype_of(data)
    fill = (np.finfo(d).max if d.startswith("float") else np.iinfo(d).max) * big
    spread = knp.where(mask, knp.expand_dims(data, 1), np.asarray(fill, dtype=d))
    red = knp.max if big < 0 else knp.min
    return red(spread, axis=0)


@_export
def segment_max(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    """Each segment's maximum; an empty segment gives the dtype's lowest value."""
    return _segment_extreme("segment_max", data, segment_ids, num_segments, -1)


@_export
def segment_min(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    return _segment_extreme("segment_min", data, segment_ids, num_segments, 1)


@_export
def top_k(x, k, sorted=True, is_stable=True):  # noqa: A002
    """(values, indices) of the k largest along the last axis; ties go to the
    lower index, as lax.top_k."""
    x = tensor(x)
    n = shape_of(x)[-1]
    if n is not None and not 0 <= k <= n:
        raise ValueError(f"[ops.top_k] k={k} is out of range for a last axis of {n}")
    order = knp.argsort(knp.negative(x) if dtype_of(x) != "bool" else knp.logical_not(x), -1)
    idx = order[..., :k]
    return knp.take_along_axis(x, idx, axis=-1), idx


@_export
def in_top_k(targets, predictions, k):
    p = tensor(predictions)
    t = knp.expand_dims(_cast(tensor(targets), "int32"), -1)
    topv = top_k(p, k)[0]
    tv = knp.take_along_axis(p, t, axis=-1)
    return knp.any(knp.greater_equal(tv, topv), axis=-1)


@_export
def logsumexp(x, axis=None, keepdims=False):
    return prim("logsumexp", floating(x), axis=list(axis) if isinstance(axis, tuple) else axis,
                keepdims=keepdims)


@_export
def rsqrt(x):
    return knp.divide(1.0, knp.sqrt(floating(x)))


@_export
def erf(x):
    """erf(z) from the exact gelu: gelu(y) = y Phi(y), erf(z) = 2 Phi(z sqrt 2) - 1."""
    z = floating(x)
    y = knp.multiply(z, math.sqrt(2.0))
    zero = knp.equal(y, 0.0)
    safe = knp.where(zero, 1.0, y)
    phi = knp.divide(prim("gelu", safe, approximate=False), safe)
    return knp.where(zero, 0.0, knp.subtract(knp.multiply(phi, 2.0), 1.0))


@_export
def erfc(x):
    return knp.subtract(1.0, erf(x))


@_export
def logdet(x):
    eager_only("logdet", x)
    return np.asarray(np.linalg.slogdet(np.asarray(x))[1]).astype(dtype_of(x))


# ------------------------------------------------------------ Fourier transforms
def _dft(rows: int, cols: int, n: int, dtype: str, like=None, row_scale=None):
    """cos and sin matrices (rows x cols) of the DFT, of 2 pi (j k mod n) / n, rows times
    row_scale (a (rows,) vector) if given. NumPy constants on arrays; when `like` is
    symbolic, computed by the model's program from two aranges (a program writes its
    NumPy constants as literal text, which costs seconds a call at 2048 x 1025)."""
    if not is_symbolic(like):
        jk = np.outer(np.arange(rows), np.arange(cols)) % n
        ang = 2.0 * np.pi * jk / n
        c, s = np.cos(ang), np.sin(ang)
        if row_scale is not None:
            c, s = c * row_scale[:, None], s * row_scale[:, None]
        return c.astype(dtype), s.astype(dtype)
    j = _record("arange", (rows,), {"dtype": "float64"})
    k = _record("arange", (cols,), {"dtype": "float64"})
    ang = knp.divide(knp.multiply(knp.mod(knp.outer(j, k), float(n)), 2.0 * np.pi), float(n))
    c, s = knp.cos(ang), knp.sin(ang)
    if row_scale is not None:
        scale = np.asarray(row_scale, np.float64)[:, None]
        c, s = knp.multiply(c, scale), knp.multiply(s, scale)
    return _cast(c, dtype), _cast(s, dtype)


def _pair(op, x):
    if not isinstance(x, (list, tuple)) or len(x) != 2:
        raise ValueError(f"[ops.{op}] x must be a (real, imaginary) pair of tensors, got "
                         f"{type(x).__name__}")
    re, im = floating(x[0]), floating(x[1])
    if shape_of(re) != shape_of(im):
        raise ValueError(f"[ops.{op}] real and imaginary parts differ in shape: "
                         f"{shape_of(re)} and {shape_of(im)}")
    return re, im


def _last(op, x) -> int:
    n = shape_of(x)[-1] if shape_of(x) else None
    if n is None:
        raise ValueError(f"[ops.{op}] the last axis must be known")
    return n


@_export
def fft(x):
    """The DFT along the last axis of (real, imag); gives (real, imag). Written
    as two matrix products, so it is differentiable inside a model."""
    re, im = _pair("fft", x)
    n = _last("fft", re)
    c, s = _dft(n, n, n, dtype_of(re), re)
    return (knp.add(knp.matmul(re, c), knp.matmul(im, s)),
            knp.subtract(knp.matmul(im, c), knp.matmul(re, s)))


@_export
def ifft(x):
    re, im = _pair("ifft", x)
    n = _last("ifft", re)
    c, s = _dft(n, n, n, dtype_of(re), re)
    return (knp.divide(knp.subtract(knp.matmul(re, c), knp.matmul(im, s)), float(n)),
            knp.divide(knp.add(knp.matmul(im, c), knp.matmul(re, s)), float(n)))


def _fit_length(x, n):
    m = _last("rfft", x)
    if n == m:
        return x
    if n < m:
        return x[..., :n]
    nd = len(shape_of(x))
    return prim("pad", x, [[0, 0]] * (nd - 1) + [[0, n - m]])


@_export
def rfft(x, fft_length=None):
    x = floating(x)
    n = _last("rfft", x) if fft_length is None else int(fft_length)
    x = _fit_length(x, n)
    c, s = _dft(n, n // 2 + 1, n, dtype_of(x), x)
    return knp.matmul(x, c), knp.negative(knp.matmul(x, s))


@_export
def irfft(x, fft_length=None):
    re, im = _pair("irfft", x)
    m = _last("irfft", re)
    n = 2 * (m - 1) if fft_length is None else int(fft_length)
    # the full spectrum's weights: bins 1 .. ceil(n/2)-1 stand for two
    k = np.arange(m)
    w = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0)
    w = np.where(k <= n // 2, w, 0.0)
    c, s = _dft(m, n, n, dtype_of(re), re, row_scale=w / n)
    return knp.subtract(knp.matmul(re, c), knp.matmul(im, s))


@_export
def fft2(x):
    re, im = _pair("fft2", x)
    re, im = fft((re, im))
    re, im = knp.swapaxes(re, -1, -2), knp.swapaxes(im, -1, -2)
    re, im = fft((re, im))
    return knp.swapaxes(re, -1, -2), knp.swapaxes(im, -1, -2)


@_export
def ifft2(x):
    re, im = _pair("ifft2", x)
    re, im = ifft((re, im))
    re, im = knp.swapaxes(re, -1, -2), knp.swapaxes(im, -1, -2)
    re, im = ifft((re, im))
    return knp.swapaxes(re, -1, -2), knp.swapaxes(im, -1, -2)


@_export
def saturate_cast(x, dtype):
    d = _dtype_name(dtype)
    if d.startswith(("int", "uint")):
        info = np.iinfo(d)
        x = knp.clip(tensor(x), info.min, info.max)
    return _cast(x, d)


del numbers


def _window(window, length: int, dtype: str, op: str = "stft"):
    """The window's values: a name (scipy's periodic window, as Keras's backends
    take it), an array of `length` values, or None (ones)."""
    if window is None:
        return np.ones(length, dtype=dtype)
    if isinstance(window, str):
        if window not in ("hann", "hamming"):  # as Keras's ops
            raise ValueError(f"[ops.{op}] window must be 'hann', 'hamming', an array or None, "
                             f"got {window!r}")
        return signal_window(window, length, True, f"ops.{op}").astype(dtype)
    w = np.asarray(window, dtype=dtype)
    if w.shape != (length,):
        raise ValueError(f"[ops.{op}] window must have shape ({length},) (sequence_length), got "
                         f"{w.shape}")
    return w


@_export
def stft(x, sequence_length, sequence_stride, fft_length, window="hann", center=True):
    """(real, imag) of the windowed frames' DFT, shape (..., frames, fft_length // 2 + 1), as
    Keras's (periodic windows, reflect padding when centred); trains inside a model."""
    x = tensor(x)
    if dtype_of(x) not in ("float32", "float64"):
        raise TypeError(f"[ops.stft] x must be float32 or float64, got {dtype_of(x)}")
    if fft_length < sequence_length:
        raise ValueError(f"[ops.stft] fft_length {fft_length} must be at least sequence_length "
                         f"{sequence_length}")
    left = (fft_length - sequence_length) // 2
    if window is None:  # Keras's: the whole fft_length, not sequence_length
        win = np.ones(fft_length, dtype=dtype_of(x))
    else:
        win = np.pad(_window(window, sequence_length, dtype_of(x)),
                     (left, fft_length - sequence_length - left))
    if center:  # reflect padding, as slices (pad's mode 'reflect' has no gradient rule)
        p, n = fft_length // 2, _last("stft", x)
        if p >= n:
            raise ValueError(f"[ops.stft] centring pads {p} on each side, which needs more than "
                             f"{p} samples; got {n}")
        x = knp.concatenate([knp.flip(x[..., 1:p + 1], -1), x,
                             knp.flip(x[..., n - p - 1:n - 1], -1)], -1)
    frames = knp.multiply(extract_sequences(x, fft_length, sequence_stride), win)
    return rfft(frames, fft_length)


def _overlap_add(frames, step: int):
    """Frames (..., T, n) added into a signal (..., (T - 1) * step + n), frame t
    starting at t * step: the frames cut into ceil(n / step) hops, each hop's
    column of frames shifted by its index and the columns summed."""
    t, n = shape_of(frames)[-2:]
    hops = -(-n // step)
    lead = [[0, 0]] * (len(shape_of(frames)) - 2)
    if hops * step != n:
        frames = prim("pad", frames, lead + [[0, 0], [0, hops * step - n]])
    split = knp.reshape(frames, tuple(static_or_symbolic_shape(frames)[:-1]) + (hops, step))
    total = None
    for j in range(hops):
        part = prim("pad", split[..., j, :], lead + [[j, hops - 1 - j], [0, 0]])
        total = part if total is None else knp.add(total, part)
    lengths = tuple(static_or_symbolic_shape(total)[:-2]) + ((t + hops - 1) * step,)
    return knp.reshape(total, lengths)[..., :(t - 1) * step + n]


@_export
def istft(x, sequence_length, sequence_stride, fft_length, length=None, window="hann",
          center=True):
    """The signal whose ops.stft is x (a (real, imag) pair, (..., frames, bins)), as
    Keras's: each frame's inverse rfft, windowed, overlap-added and divided by the
    overlapping squared windows (where they exceed 1e-10); centring's padding cut
    off, or the first `length` samples. Differentiable inside a model."""
    if isinstance(sequence_stride, bool) or not isinstance(sequence_stride, int) or \
            sequence_stride <= 0:
        raise ValueError(f"[ops.istft] sequence_stride must be a positive int, got "
                         f"{sequence_stride!r}")
    re, im = _pair("istft", x)
    if len(shape_of(re)) < 2:
        raise ValueError(f"[ops.istft] x must have rank 2 or more (..., frames, bins), got "
                         f"shape {shape_of(re)}")
    frames = shape_of(re)[-2]
    if frames is None:
        raise ValueError(f"[ops.istft] the number of frames (axis -2) must be known (at "
                         f"{user_location()})")
    if fft_length < sequence_length:
        raise ValueError(f"[ops.istft] fft_length {fft_length} must be at least "
                         f"sequence_length {sequence_length}")
    if sequence_stride > fft_length:
        raise ValueError(f"[ops.istft] sequence_stride {sequence_stride} must not exceed "
                         f"fft_length {fft_length} (the frames would leave gaps)")
    d = dtype_of(re)
    left = (fft_length - sequence_length) // 2
    if window is None:
        win = np.ones(fft_length)
    else:
        win = np.pad(_window(window, sequence_length, d, "istft").astype(np.float64),
                     (left, fft_length - sequence_length - left))
    signal = _overlap_add(knp.multiply(irfft((re, im), fft_length), win.astype(d)),
                          sequence_stride)
    # the overlapping squared windows, known now; where they vanish the sum is kept
    norm = np.zeros((frames - 1) * sequence_stride + fft_length)
    for i in range(frames):
        norm[i * sequence_stride:i * sequence_stride + fft_length] += win * win
    scale = 1.0 if window is not None else fft_length / sequence_stride
    signal = knp.multiply(signal, (scale / np.where(norm > 1e-10, norm, 1.0)).astype(d))
    start = fft_length // 2 if center else 0
    if length is not None:
        end = start + int(length)
    else:
        end = norm.shape[0] - (fft_length // 2 if center else 0)
    return signal[..., start:end]
