"""More of Keras 3's nn and math ops, written over differentiable primitives so
they work inside a model and train: adaptive average and max pooling (1-3 d),
unfold (im2col) and fold, erfinv, polar and view_as_complex/view_as_real."""

from __future__ import annotations

import builtins

import numpy as np

from ..symbolic import user_location
from . import numpy as knp
from ._base import cast, dtype_of, floating, shape_of, tensor

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _tuple(op, v, n, what):
    t = (v,) * n if isinstance(v, (int, np.integer)) else tuple(v)
    if len(t) != n or not builtins.all(isinstance(i, (int, np.integer)) and i >= 0 for i in t):
        raise ValueError(f"[ops.{op}] {what} must be an int or {n} non-negative ints, got {v!r} "
                         f"(at {user_location()})")
    return tuple(int(i) for i in t)


def _adaptive(op, reduce, inputs, output_size, data_format):
    x = floating(inputs)
    nd = len(shape_of(x)) - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"[ops.{op}] inputs must be 3-d, 4-d or 5-d (batch, spatial..., "
                         f"channels), got shape {shape_of(x)} (at {user_location()})")
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"[ops.{op}] data_format must be 'channels_last' or 'channels_first', "
                         f"got {data_format!r} (at {user_location()})")
    sizes = _tuple(op, output_size, nd, "output_size")
    first = data_format == "channels_first"
    for i, out in enumerate(sizes):
        axis = (2 if first else 1) + i
        n = shape_of(x)[axis]
        if out < 1:
            raise ValueError(f"[ops.{op}] output_size must be positive, got {output_size!r}")
        # PyTorch's (and Keras's) windows: [floor(j n / out), ceil((j + 1) n / out))
        parts = []
        for j in builtins.range(out):
            lo, hi = (j * n) // out, -((-(j + 1) * n) // out)
            idx = [slice(None)] * axis + [slice(lo, hi)]
            parts.append(getattr(knp, reduce)(x[tuple(idx)], axis=axis))
        x = knp.stack(parts, axis=axis)
    return x


@_export
def adaptive_average_pool(inputs, output_size, data_format=None):
    """Like keras.ops.adaptive_average_pool: the mean over output_size windows per
    spatial axis (PyTorch's windows), channels last by default."""
    return _adaptive("adaptive_average_pool", "mean", inputs, output_size, data_format)


@_export
def adaptive_max_pool(inputs, output_size, data_format=None):
    """Like keras.ops.adaptive_max_pool: the maximum over output_size windows."""
    return _adaptive("adaptive_max_pool", "max", inputs, output_size, data_format)


def _blocks_geometry(op, x, kernel_size, dilation, padding, stride):
    if len(shape_of(x)) != 4:
        raise ValueError(f"[ops.{op}] x must be 4-d (N, C, H, W), got shape {shape_of(x)} "
                         f"(at {user_location()})")
    k = _tuple(op, kernel_size, 2, "kernel_size")
    d = _tuple(op, dilation, 2, "dilation")
    p = _tuple(op, padding, 2, "padding")
    s = _tuple(op, stride, 2, "stride")
    if 0 in k or 0 in d or 0 in s:
        raise ValueError(f"[ops.{op}] kernel_size, dilation and stride must be positive, got "
                         f"{kernel_size!r}, {dilation!r}, {stride!r} (at {user_location()})")
    return k, d, p, s


@_export
def unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    """Like keras.ops.unfold (im2col): (N, C, H, W) to (N, C * kh * kw, L), the
    flattened sliding blocks, channel-major, L blocks in row order."""
    x = tensor(x)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _blocks_geometry("unfold", x, kernel_size,
                                                              dilation, padding, stride)
    _, c, h, w = shape_of(x)
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"[ops.unfold] the kernel does not fit the padded input {h}x{w} "
                         f"(at {user_location()})")
    xp = knp.pad(x, [(0, 0), (0, 0), (ph, ph), (pw, pw)]) if ph or pw else x
    blocks = []
    for i in builtins.range(kh):
        for j in builtins.range(kw):
            blocks.append(xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                             j * dw:j * dw + (ow - 1) * sw + 1:sw])
    y = knp.stack(blocks, axis=2)  # (N, C, kh*kw, oh, ow)
    return knp.reshape(y, (-1, c * kh * kw, oh * ow))


@_export
def fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Like keras.ops.fold (col2im): (N, C * kh * kw, L) blocks summed back into an
    (N, C, H, W) image; unfold's adjoint."""
    x = tensor(x)
    if len(shape_of(x)) != 3:
        raise ValueError(f"[ops.fold] x must be 3-d (N, C * kh * kw, L), got shape "
                         f"{shape_of(x)} (at {user_location()})")
    h, w = _tuple("fold", output_size, 2, "output_size")
    probe = np.zeros((1, 1, h, w), "float32")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _blocks_geometry("fold", probe, kernel_size,
                                                              dilation, padding, stride)
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    _, ck, n_blocks = shape_of(x)
    if ck % (kh * kw) or n_blocks != oh * ow:
        raise ValueError(f"[ops.fold] x's shape {shape_of(x)} does not hold C * {kh * kw} "
                         f"channels and {oh * ow} blocks for output_size {(h, w)} "
                         f"(at {user_location()})")
    c = ck // (kh * kw)
    # each kernel position's (oh, ow) values land on a strided grid: a one-hot
    # scatter matrix per axis (fixed weights), so fold is two products and trains
    hp, wp = h + 2 * ph, w + 2 * pw
    y = knp.reshape(x, (-1, c, kh, kw, oh, ow))
    rows = np.zeros((kh, hp, oh), dtype_of(x) if dtype_of(x).startswith("float") else "float32")
    cols = np.zeros((kw, wp, ow), rows.dtype)
    for i in builtins.range(kh):
        rows[i, i * dh + np.arange(oh) * sh, np.arange(oh)] = 1
    for j in builtins.range(kw):
        cols[j, j * dw + np.arange(ow) * sw, np.arange(ow)] = 1
    out = knp.einsum("ncijab,iha,jwb->nchw", floating(y), rows, cols)
    return out[:, :, ph:ph + h, pw:pw + w]


@_export
def erfinv(x):
    """Like keras.ops.erfinv: the inverse error function (Giles's single-precision
    approximation, within a few float32 ulps; +-inf at +-1, NaN outside)."""
    x = floating(x)
    ax = knp.minimum(knp.abs(x), 1.0)
    w = knp.negative(knp.log(knp.maximum(knp.multiply(knp.subtract(1.0, ax),
                                                      knp.add(1.0, ax)), 1e-30)))
    a = knp.subtract(w, 2.5)
    small = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
             -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
    b = knp.subtract(knp.sqrt(knp.maximum(w, 5.0)), 3.0)
    large = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
             -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

    def poly(t, cs):
        r = cs[0]
        for c in cs[1:]:
            r = knp.add(knp.multiply(r, t), c)
        return r

    y = knp.multiply(knp.where(knp.less(w, 5.0), poly(a, small), poly(b, large)), ax)
    y = knp.where(knp.equal(ax, 1.0), float("inf"), y)
    y = knp.multiply(knp.sign(x), y)
    return knp.where(knp.greater(knp.abs(x), 1.0), float("nan"), y)


@_export
def polar(abs_, angle):
    """Like keras.ops.polar: the complex abs_ * (cos(angle) + i sin(angle))."""
    r, t = floating(abs_), floating(angle)
    dt = "complex128" if dtype_of(r) == "float64" else "complex64"
    re = knp.multiply(r, knp.cos(t))
    im = knp.multiply(r, knp.sin(t))
    return knp.add(cast(re, dt), knp.multiply(cast(im, dt), np.asarray(1j, dt)))


@_export
def view_as_complex(x):
    """A (..., 2) real tensor as the complex64 tensor real + 1j * imag."""
    x = floating(x)
    s = shape_of(x)
    if len(s) < 1 or s[-1] != 2:
        raise ValueError(f"[ops.view_as_complex] the last axis must hold 2 values (real, imag), "
                         f"got shape {s} (at {user_location()})")
    re, im = x[..., 0], x[..., 1]
    return knp.add(cast(re, "complex64"), knp.multiply(cast(im, "complex64"),
                                                       np.asarray(1j, "complex64")))


@_export
def view_as_real(x):
    """A complex tensor as a real one of shape (..., 2): (real, imag)."""
    x = tensor(x)
    if not dtype_of(x).startswith("complex"):
        raise ValueError(f"[ops.view_as_real] expects a complex tensor, got {dtype_of(x)} (at "
                         f"{user_location()})")
    return knp.stack([knp.real(x), knp.imag(x)], axis=-1)
