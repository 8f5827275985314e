"""Keras 3's ``nn`` set of ops: activations, one_hot/multi_hot, moments,
normalization, the crossentropies (per sample, unreduced, as Keras's ops),
convolutions and pooling."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..symbolic import user_location
from . import numpy as knp
from ._base import (FLOATX, cast, check_axis, dtype_of, floating, prim, shape_of,
                    static_or_symbolic_shape, tensor)

__all__: list = []
_EPSILON = 1e-7  # keras.config.epsilon()


def _export(fn):
    __all__.append(fn.__name__)
    return fn


# ------------------------------------------------------------ activations
@_export
def relu(x):
    x = tensor(x)
    if dtype_of(x).startswith(("int", "uint")):  # Keras's relu keeps an integer dtype
        return knp.maximum(x, 0)
    return prim("relu", floating(x))


@_export
def relu6(x):
    return knp.minimum(relu(x), 6.0)


@_export
def sigmoid(x):
    return prim("sigmoid", floating(x))


@_export
def sparse_sigmoid(x):
    x = floating(x)
    return knp.clip(knp.multiply(knp.add(x, 1.0), 0.5), 0.0, 1.0)


@_export
def softplus(x):
    return prim("softplus", floating(x))


@_export
def softsign(x):
    x = floating(x)
    return knp.divide(x, knp.add(knp.abs(x), 1.0))


@_export
def soft_shrink(x, threshold=0.5):
    x = floating(x)
    return knp.where(knp.greater(x, threshold), knp.subtract(x, threshold),
                     knp.where(knp.less(x, -threshold), knp.add(x, threshold), 0.0))


@_export
def sparse_plus(x):
    x = floating(x)
    mid = knp.multiply(knp.square(knp.add(x, 1.0)), 0.25)
    return knp.where(knp.less_equal(x, -1.0), 0.0, knp.where(knp.greater_equal(x, 1.0), x, mid))


@_export
def silu(x):
    x = floating(x)
    return knp.multiply(x, sigmoid(x))


@_export
def swish(x):
    return silu(x)


@_export
def squareplus(x, b=4):
    x = floating(x)
    return knp.multiply(knp.add(x, knp.sqrt(knp.add(knp.square(x), float(b)))), 0.5)


@_export
def log_sigmoid(x):
    return knp.negative(softplus(knp.negative(floating(x))))


@_export
def leaky_relu(x, negative_slope=0.2):
    return prim("leaky_relu", floating(x), alpha=float(negative_slope))


@_export
def hard_sigmoid(x):
    return knp.divide(relu6(knp.add(floating(x), 3.0)), 6.0)


@_export
def hard_silu(x):
    x = floating(x)
    return knp.multiply(x, hard_sigmoid(x))


@_export
def hard_swish(x):
    return hard_silu(x)


@_export
def elu(x, alpha=1.0):
    return prim("elu", floating(x), alpha=float(alpha))


@_export
def selu(x):
    return knp.multiply(elu(x, 1.6732632423543772848170429916717),
                        1.0507009873554804934193349852946)


@_export
def gelu(x, approximate=True):
    return prim("gelu", floating(x), approximate=bool(approximate))


@_export
def celu(x, alpha=1.0):
    x = floating(x)
    return knp.where(knp.greater(x, 0.0), x, knp.multiply(knp.expm1(knp.divide(x, alpha)), alpha))


@_export
def glu(x, axis=-1):
    x = floating(x)
    a, b = knp.split(x, 2, axis=axis)
    return knp.multiply(a, sigmoid(b))


@_export
def hard_tanh(x):
    return knp.clip(floating(x), -1.0, 1.0)


@_export
def hard_shrink(x, threshold=0.5):
    x = floating(x)
    return knp.where(knp.greater(knp.abs(x), threshold), x, 0.0)


@_export
def threshold(x, threshold, default_value):
    x = floating(x)
    return knp.where(knp.greater(x, threshold), x, default_value)


@_export
def tanh_shrink(x):
    x = floating(x)
    return knp.subtract(x, knp.tanh(x))


@_export
def mish(x):
    x = floating(x)
    return knp.multiply(x, knp.tanh(softplus(x)))


@_export
def softmax(x, axis=-1):
    x = floating(x)
    if isinstance(axis, (tuple, list)):
        e = knp.exp(knp.subtract(x, knp.max(x, axis=tuple(axis), keepdims=True)))
        return knp.divide(e, knp.sum(e, axis=tuple(axis), keepdims=True))
    return prim("softmax", x, axis=axis)


@_export
def log_softmax(x, axis=-1):
    x = floating(x)
    if isinstance(axis, (tuple, list)):
        return knp.subtract(x, prim("logsumexp", x, axis=list(axis), keepdims=True))
    return prim("log_softmax", x, axis=axis)


# ------------------------------------------------------------ encodings
@_export
def one_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    """Rows with 1 at each class; indices outside [0, num_classes) give rows of
    zeros (as Keras on JAX)."""
    if sparse:
        raise ValueError("[ops.one_hot] sparse=True is not supported (tessera has no sparse "
                         "tensors)")
    x = tensor(x)
    hot = knp.equal(knp.expand_dims(x, -1), knp.arange(int(num_classes), dtype=dtype_of(x)))
    hot = cast(hot, dtype or FLOATX)
    if axis != -1:
        nd = len(shape_of(hot))
        hot = knp.moveaxis(hot, -1, check_axis("one_hot", axis, nd))
    return hot


@_export
def multi_hot(inputs, num_classes=None, axis=-1, dtype=None, sparse=False, **kwargs):
    if num_classes is None:
        num_classes = kwargs.pop("num_tokens", None)
    if kwargs or num_classes is None:
        raise TypeError(f"[ops.multi_hot] needs num_classes; unexpected arguments {kwargs}")
    x = tensor(inputs)
    reduction_axis = 1 if len(shape_of(x)) > 1 else 0
    return knp.max(one_hot(cast(x, "int32"), num_classes, axis=axis, dtype=dtype, sparse=sparse),
                   axis=reduction_axis)


# ------------------------------------------------------------ statistics, normalization
@_export
def moments(x, axes, keepdims=False, synchronized=False):
    if synchronized:
        raise ValueError("[ops.moments] synchronized=True is not supported (tessera's data "
                         "parallelism keeps one model per locality)")
    x = floating(x)
    axes = tuple(axes) if isinstance(axes, (list, tuple)) else (axes,)
    return knp.mean(x, axis=axes, keepdims=keepdims), knp.var(x, axis=axes, keepdims=keepdims)


@_export
def batch_normalization(x, mean, variance, axis, offset=None, scale=None, epsilon=1e-3):
    x = floating(x)
    nd = len(shape_of(x))
    ax = check_axis("batch_normalization", axis, nd)
    shape = [1] * nd
    shape[ax] = shape_of(mean)[0]

    def r(v):
        return knp.reshape(tensor(v), tuple(shape))

    inv = knp.divide(1.0, knp.sqrt(knp.add(r(variance), epsilon)))
    if scale is not None:
        inv = knp.multiply(inv, r(scale))
    res = knp.multiply(knp.negative(r(mean)), inv)
    if offset is not None:
        res = knp.add(res, r(offset))
    return knp.add(knp.multiply(x, inv), res)


@_export
def normalize(x, axis=-1, order=2, epsilon=None):
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"[ops.normalize] order must be an int >= 1, got {order!r}")
    x = floating(x)
    if not shape_of(x):
        x = knp.expand_dims(x, 0)
    eps = _EPSILON if epsilon is None else epsilon
    if order == 2:
        ss = knp.sum(knp.square(x), axis=axis, keepdims=True)
        return knp.multiply(x, knp.divide(1.0, knp.sqrt(knp.maximum(ss, eps * eps))))
    norm = prim("norm", x, ord=order, axis=axis, keepdims=True)
    return knp.divide(x, knp.maximum(norm, eps))


@_export
def rms_normalization(x, scale=1, axis=-1, epsilon=None):
    x = floating(x)
    eps = _EPSILON if epsilon is None else epsilon
    ms = knp.mean(knp.square(x), axis=axis, keepdims=True)
    return knp.multiply(knp.multiply(x, knp.divide(1.0, knp.sqrt(knp.add(ms, eps)))), scale)


@_export
def layer_normalization(x, gamma=None, beta=None, axis=-1, epsilon=None, **kwargs):
    """Keras 3's: (x - mean) / sqrt(var + epsilon) * gamma + beta over `axis` (an int or a
    list), epsilon keras.config.epsilon() by default; gamma and beta of the normalized axes'
    shape. The deprecated rms_scaling=True is Keras's too: x / sqrt(var + epsilon) * gamma
    (the variance, not the mean square; no beta), with Keras's warning."""
    rms_scaling = kwargs.pop("rms_scaling", False)
    if kwargs:
        raise TypeError(f"[ops.layer_normalization] unexpected arguments {sorted(kwargs)} "
                        f"(at {user_location()})")
    x = floating(x)
    nd = len(shape_of(x))
    axes = sorted(check_axis("layer_normalization", a, nd)
                  for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    eps = _EPSILON if epsilon is None else epsilon
    shape = [shape_of(x)[a] if a in axes else 1 for a in range(nd)]

    def broadcast(v):  # as Keras's: reshaped when the axes are not the last alone
        if v is None or len(shape_of(tensor(v))) == nd or axes == [nd - 1]:
            return v
        return knp.reshape(v, shape)

    m, v = moments(x, axes=tuple(axes), keepdims=True)
    inv = knp.divide(1.0, knp.sqrt(knp.add(v, eps)))
    if rms_scaling:
        warnings.warn("You passed `rms_scaling=True`, which is deprecated. This argument "
                      "incorrectly scales the input by the variance, not the root mean square. "
                      "To correctly use RMS Normalization, please use `keras.ops."
                      "rms_normalization` / `keras.ops.nn.rms_normalization` instead.",
                      stacklevel=2)
        out = knp.multiply(x, inv)
        return out if gamma is None else knp.multiply(out, broadcast(gamma))
    out = knp.multiply(knp.subtract(x, m), inv)
    if gamma is not None:
        out = knp.multiply(out, broadcast(gamma))
    if beta is not None:
        out = knp.add(out, broadcast(beta))
    return out


# ------------------------------------------------------------ crossentropies (unreduced)
@_export
def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    target, output = floating(target), floating(output)
    if shape_of(target)[1:] != shape_of(output)[1:] or len(shape_of(target)) != \
            len(shape_of(output)):
        raise ValueError(f"[ops.categorical_crossentropy] target and output must have the same "
                         f"shape, got {shape_of(target)} and {shape_of(output)} "
                         f"(at {user_location()})")
    if from_logits:
        log_prob = log_softmax(output, axis=axis)
    else:
        output = knp.divide(output, knp.sum(output, axis=axis, keepdims=True))
        log_prob = knp.log(knp.clip(output, _EPSILON, 1.0 - _EPSILON))
    return knp.negative(knp.sum(knp.multiply(target, log_prob), axis=axis))


@_export
def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    target, output = tensor(target), floating(output)
    ts, os_ = shape_of(target), shape_of(output)
    if len(ts) == len(os_) and ts[-1] == 1:
        target = knp.squeeze(target, axis=-1)
        ts = shape_of(target)
    if len(ts) + 1 != len(os_):
        raise ValueError(f"[ops.sparse_categorical_crossentropy] target's shape {ts} must be "
                         f"output's {os_} without its class axis (at {user_location()})")
    hot = one_hot(cast(target, "int32"), os_[axis], axis=axis, dtype=dtype_of(output))
    return categorical_crossentropy(hot, output, from_logits=from_logits, axis=axis)


@_export
def binary_crossentropy(target, output, from_logits=False):
    target, output = floating(target), floating(output)
    if len(shape_of(target)) != len(shape_of(output)) or \
            shape_of(target)[1:] != shape_of(output)[1:]:
        raise ValueError(f"[ops.binary_crossentropy] target and output must have the same "
                         f"shape, got {shape_of(target)} and {shape_of(output)} "
                         f"(at {user_location()})")
    if from_logits:
        return knp.subtract(knp.negative(knp.multiply(target, log_sigmoid(output))),
                            knp.multiply(knp.subtract(1.0, target),
                                         log_sigmoid(knp.negative(output))))
    output = knp.clip(output, _EPSILON, 1.0 - _EPSILON)
    bce = knp.add(knp.multiply(target, knp.log(output)),
                  knp.multiply(knp.subtract(1.0, target), knp.log(knp.subtract(1.0, output))))
    return knp.negative(bce)


# ------------------------------------------------------------ convolution, pooling
def _channels_last(op, x, data_format):
    if data_format in (None, "channels_last"):
        return x, False
    if data_format != "channels_first":
        raise ValueError(f"[ops.{op}] data_format must be 'channels_last' or 'channels_first', "
                         f"got {data_format!r}")
    nd = len(shape_of(x))
    return knp.transpose(x, (0,) + tuple(range(2, nd)) + (1,)), True


def _back(x, moved):
    if not moved:
        return x
    nd = len(shape_of(x))
    return knp.transpose(x, (0, nd - 1) + tuple(range(1, nd - 1)))


def _spatial(op, x) -> int:
    n = len(shape_of(x)) - 2
    if n not in (1, 2, 3):
        raise ValueError(f"[ops.{op}] inputs of rank 3 (1-d), 4 (2-d) or 5 (3-d) are "
                         f"supported, got shape {shape_of(x)}")
    return n


def _padding(op, padding):
    p = str(padding).lower()
    if p not in ("valid", "same"):
        raise ValueError(f"[ops.{op}] padding must be 'valid' or 'same', got {padding!r}")
    return p


def _ints(v, n):
    v = list(v) if isinstance(v, (list, tuple)) else [v] * n
    return v[0] if n == 1 else v


@_export
def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    x, moved = _channels_last("conv", floating(inputs), data_format)
    w = floating(kernel)
    n = _spatial("conv", x)
    cin, kin = shape_of(x)[-1], shape_of(w)[-2]
    if len(shape_of(w)) != n + 2 or cin % kin:
        raise ValueError(f"[ops.conv] kernel of shape {shape_of(w)} does not fit inputs of shape "
                         f"{shape_of(x)} (kernel: spatial..., in_channels / groups, filters)")
    p = _padding("conv", padding)
    if n == 1:
        y = prim("conv1d", x, w, stride=_ints(strides, 1), padding=p,
                 dilation=_ints(dilation_rate, 1), groups=cin // kin)
    else:
        y = prim(f"conv{n}d", x, w, strides=_ints(strides, n), padding=p,
                 dilation=_ints(dilation_rate, n), groups=cin // kin)
    return _back(y, moved)


@_export
def depthwise_conv(inputs, kernel, strides=1, padding="valid", data_format=None,
                   dilation_rate=1):
    x, moved = _channels_last("depthwise_conv", floating(inputs), data_format)
    w = floating(kernel)
    n = _spatial("depthwise_conv", x)
    ks = shape_of(w)
    if len(ks) != n + 2 or ks[-2] != shape_of(x)[-1]:
        raise ValueError(f"[ops.depthwise_conv] kernel of shape {ks} does not fit inputs of "
                         f"shape {shape_of(x)} (kernel: spatial..., in_channels, multiplier)")
    w = knp.reshape(w, tuple(ks[:-2]) + (1, ks[-2] * ks[-1]))
    y = conv(x, w, strides, padding, None, dilation_rate)
    return _back(y, moved)


def _pool(op, kind, inputs, pool_size, strides, padding, data_format):
    x, moved = _channels_last(op, floating(inputs), data_format)
    n = _spatial(op, x)
    strides = pool_size if strides is None else strides
    y = prim(f"{kind}_pool{n}d", x, _ints(pool_size, n), strides=_ints(strides, n),
             padding=_padding(op, padding))
    return _back(y, moved)


@_export
def max_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    return _pool("max_pool", "max", inputs, pool_size, strides, padding, data_format)


@_export
def average_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    return _pool("average_pool", "avg", inputs, pool_size, strides, padding, data_format)


@_export
def dot_product_attention(query, key, value, bias=None, mask=None, scale=None, is_causal=False,
                          flash_attention=None, attn_logits_soft_cap=None):
    """softmax(q k^T * scale + bias, masked) v over (batch, seq, heads, dim) tensors."""
    if flash_attention or attn_logits_soft_cap is not None:
        raise ValueError("[ops.dot_product_attention] flash_attention and attn_logits_soft_cap "
                         "are not supported")
    q, k, v = floating(query), floating(key), floating(value)
    if scale is None:
        scale = 1.0 / math.sqrt(shape_of(q)[-1])
    if bias is None and mask is None:
        # One fused primitive (scores kept in cache per batch and head; see
        # MultiHeadAttention), over (batch, heads, seq, dim) views.
        heads_first = [knp.transpose(t, (0, 2, 1, 3)) for t in (q, k, v)]
        out = prim("attention", *heads_first, scale=float(scale), causal=bool(is_causal))
        return knp.transpose(out, (0, 2, 1, 3))
    logits = knp.multiply(knp.einsum("bqhd,bkhd->bhqk", q, k), scale)
    if bias is not None:
        logits = knp.add(logits, bias)
    big = -0.7 * float(np.finfo(np.float32).max)
    if mask is not None:
        logits = knp.where(mask, logits, big)
    if is_causal:
        tq, tk = shape_of(q)[1], shape_of(k)[1]
        causal = np.tril(np.ones((tq, tk), dtype=bool))
        logits = knp.where(causal, logits, big)
    probs = softmax(logits, axis=-1)
    return knp.einsum("bhqk,bkhd->bqhd", probs, v)


_LOG_EPSILON = -1e5  # Keras's stand-in for log(0) in ctc_loss


def _lse3(a, b, c):
    m = knp.maximum(knp.maximum(a, b), c)
    return knp.add(m, knp.log(knp.add(knp.add(knp.exp(knp.subtract(a, m)),
                                              knp.exp(knp.subtract(b, m))),
                                      knp.exp(knp.subtract(c, m)))))


@_export
def ctc_loss(target, output, target_length, output_length, mask_index=0):
    """Connectionist temporal classification loss per sample: -log of the
    probability of `target` (batch, S) over all alignments of the logits
    `output` (batch, T, classes), `mask_index` the blank. The forward
    recursion is unrolled over T (known while the model is built), so it
    trains inside a model."""
    target = cast(tensor(target), "int32")
    output = floating(output)
    tl, ol = cast(tensor(target_length), "int32"), cast(tensor(output_length), "int32")
    ts, os_ = shape_of(target), shape_of(output)
    if len(ts) != 2 or len(os_) != 3 or os_[1] is None:
        raise ValueError(f"[ops.ctc_loss] target must be (batch, labels) and output (batch, "
                         f"time, classes) with a known number of time steps, got {ts} and "
                         f"{os_} (at {user_location()})")
    steps, classes = os_[1], os_[2]
    logp = log_softmax(output)
    blanks = knp.add(knp.zeros_like(target), mask_index)
    # (batch, 2S + 1): blank, label, blank, ..., label, blank; written with the labels'
    # length unknown too (captcha_ocr's Input((None,)) of labels: each length met is
    # written again with its own, varlen.py)
    ext = knp.reshape(knp.stack([blanks, target], axis=-1),
                      (static_or_symbolic_shape(target)[0], -1))
    ext = knp.concatenate([ext, blanks[:, :1]], axis=-1)
    emit = knp.einsum("btk,blk->btl", logp, one_hot(ext, classes, dtype=dtype_of(logp)))
    prev2 = knp.concatenate([knp.subtract(knp.zeros_like(ext[:, :2]), 1), ext[:, :-2]], axis=-1)
    skip = knp.logical_and(knp.not_equal(ext, mask_index), knp.not_equal(ext, prev2))
    first = emit[:, 0, :]
    start = knp.concatenate([knp.zeros_like(first[:, :2]),
                             knp.add(knp.zeros_like(first[:, 2:]), _LOG_EPSILON)], axis=-1)
    alpha = knp.add(emit[:, 0, :], start)
    neg1 = knp.add(knp.zeros_like(alpha[:, :1]), _LOG_EPSILON)
    for t in range(1, steps):
        stay = alpha
        step = knp.concatenate([neg1, alpha[:, :-1]], axis=-1)
        jump = knp.where(skip, knp.concatenate([neg1, neg1, alpha[:, :-2]], axis=-1),
                         _LOG_EPSILON)
        new = knp.add(_lse3(stay, step, jump), emit[:, t, :])
        alpha = knp.where(knp.expand_dims(knp.less(t, ol), -1), new, alpha)
    last = knp.multiply(tl, 2)
    ends = knp.stack([last, knp.maximum(knp.subtract(last, 1), 0)], axis=-1)
    finals = knp.take_along_axis(alpha, ends, axis=-1)
    finals = knp.where(knp.stack([knp.ones_like(tl, dtype="bool"), knp.greater(tl, 0)], -1),
                       finals, _LOG_EPSILON)
    return knp.negative(prim("logsumexp", finals, axis=-1))


@_export
def ctc_decode(inputs, sequence_lengths, strategy="greedy", beam_width=100, top_paths=1,
               merge_repeated=True, mask_index=0):
    """Greedy CTC decoding as Keras's: (labels (1, batch, time) with -1 after
    each sequence's labels, scores (batch, 1) = minus the sum of the best
    scores). Beam search is not supported."""
    if strategy != "greedy":
        raise ValueError(f"[ops.ctc_decode] strategy {strategy!r} is not supported; only "
                         "'greedy' is")
    x = floating(inputs)
    steps = shape_of(x)[1]
    if steps is None or len(shape_of(x)) != 3:
        raise ValueError(f"[ops.ctc_decode] inputs must be (batch, time, classes) with a known "
                         f"time axis, got {shape_of(x)}")
    lengths = cast(tensor(sequence_lengths), "int32")
    idx = knp.argmax(x, axis=-1)
    scores = knp.max(x, axis=-1)
    beyond = knp.greater_equal(np.arange(steps, dtype="int32")[None, :],
                               knp.expand_dims(lengths, -1))
    idx = knp.where(beyond, mask_index, idx)
    scores = knp.where(beyond, 0.0, scores)
    if merge_repeated:
        same = knp.equal(idx[:, 1:], idx[:, :-1])
        same = knp.concatenate([knp.zeros_like(same[:, :1]), same], axis=-1)
        idx = knp.where(same, mask_index, idx)
    invalid = knp.equal(idx, mask_index)
    idx = knp.where(invalid, -1, idx)
    order = knp.where(invalid, steps, knp.add(knp.zeros_like(idx), np.arange(steps,
                                                                                dtype="int32")))
    idx = knp.take_along_axis(idx, knp.argsort(order, axis=-1), axis=-1)
    return cast(knp.expand_dims(idx, 0), "int32"), knp.expand_dims(
        knp.negative(knp.sum(scores, axis=1)), -1)


def transpose_geometry(n, k, stride, dilation, padding, output_padding):
    """One spatial axis of Keras's transposed convolution of n inputs:
    (length, crop, full). The output is the full transposed convolution
    (every input's window written out, zeros past it) from `crop` on, `length`
    long; `full` is a length whose 'valid' convolution gives n again and that
    covers crop + length. With k the dilated kernel, Keras's lengths are
    (n - 1) * stride + k + output_padding for 'valid' (output_padding
    max(stride - k, 0) when None), n * stride for 'same' without
    output_padding and (n - 1) * stride + k % 2 + output_padding with it: the
    padding Keras's JAX backend gives lax.conv_transpose
    (_convert_conv_transpose_padding_args_from_keras_to_jax)."""
    k = (k - 1) * dilation + 1
    if padding == "valid":
        extra = max(k, stride) - k if output_padding is None else output_padding
        left, right = k - 1, k - 1 + extra
    else:
        total = stride + k - 2 if output_padding is None else k + k % 2 - 2 + output_padding
        left = min(total // 2 + total % 2, k - 1)
        right = total - left
    crop = k - 1 - left
    length = (n - 1) * stride + left + right - k + 2
    return length, crop, max((n - 1) * stride + k, crop + length)


@_export
def conv_transpose(inputs, kernel, strides=1, padding="valid", output_padding=None,
                   data_format=None, dilation_rate=1):
    """The transposed convolution (kernel (k..., filters, in_channels)), as
    Keras's: output length n * stride + max(k - stride, 0) ('valid') or
    n * stride ('same'), k = dilation * (k - 1) + 1; with output_padding,
    Keras's lengths for it (transpose_geometry)."""
    x, moved = _channels_last("conv_transpose", floating(inputs), data_format)
    w = floating(kernel)
    n = _spatial("conv_transpose", x)
    xs, ks = shape_of(x), shape_of(w)
    if len(ks) != n + 2 or ks[-1] != xs[-1]:
        raise ValueError(f"[ops.conv_transpose] kernel of shape {ks} does not fit inputs of "
                         f"shape {xs} (kernel: spatial..., filters, in_channels)")
    p = _padding("conv_transpose", padding)
    st = [strides] * n if isinstance(strides, int) else list(strides)
    dl = [dilation_rate] * n if isinstance(dilation_rate, int) else list(dilation_rate)
    pads = [None] * n if output_padding is None else [output_padding] * n \
        if isinstance(output_padding, int) else list(output_padding)
    if len(pads) != n or any(o is not None and not 0 <= o < s for o, s in zip(pads, st)):
        raise ValueError(f"[ops.conv_transpose] output_padding must be None or {n} ints each "
                         f"in [0, strides), got {output_padding!r} with strides {st}")
    geometry = [transpose_geometry(m, k, s, d, p, o)
                for m, k, s, d, o in zip(xs[1:-1], ks[:n], st, dl, pads)]
    batch = static_or_symbolic_shape(x)[0]
    if output_padding is None:
        shape, pad = [g[0] for g in geometry], p
    else:
        shape, pad = [g[2] for g in geometry], "valid"
    out_shape = [batch] + shape + [ks[-2]]
    if n == 1:
        y = prim("conv1d_grad_input", x, w, out_shape, stride=st[0], padding=pad,
                 dilation=dl[0])
    else:
        y = prim(f"conv{n}d_grad_input", x, w, out_shape, strides=st, padding=pad, dilation=dl)
    if output_padding is not None and any(c or m != f for m, c, f in geometry):
        y = y[(slice(None),) + tuple(slice(c, c + m) for m, c, _ in geometry)]
    return _back(y, moved)
