"""Multi-head attention, like keras.layers.MultiHeadAttention: the same
weights (query/key/value kernels (dim, heads, key_dim) with biases (heads,
key_dim), output kernel (heads, value_dim, dim)), scaling, masks and call
signature:

    mha = nn.MultiHeadAttention(num_heads=4, key_dim=64)
    y = mha(x, x, use_causal_mask=True)                # self-attention, causal
    y = mha(q, v, attention_mask=mask)                  # mask (batch, Tq, Tv): 1 = attend
    y, scores = mha(q, v, return_attention_scores=True)

A key padding mask is an attention_mask of shape (batch, 1, Tv).

Without masks other than the causal one, without dropout and without the
scores returned, the scores, softmax and product with the values are one
primitive, attention (tessera/primitives/attention.cpp): per (batch, head)
block the scores stay in cache; in a training step the forward keeps the
probabilities for the backward (up to 64 MB per call, 256 MB in all; beyond,
the backward recomputes them, with the same bits). The other cases, or the module switch FUSED = False,
compose matmul, where and softmax (the reference the fused path is tested
against)."""

from __future__ import annotations

import math

from .. import initializers
from ..symbolic import KerasTensor, next_name
from .attention import call_flags
from .base import Layer, Param, _initializer, _positive, _regularizer

__all__ = ["GroupQueryAttention", "GroupedQueryAttention", "MultiHeadAttention"]

# False: every MultiHeadAttention composes its scores, softmax and product
# (the reference of the fused primitive); read when a model's program is written.
FUSED = True


class MultiHeadAttention(Layer):
    """Scaled dot-product attention over num_heads heads."""

    kind = "MultiHeadAttention"
    multi_input = True

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, attention_axes=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 name=None, input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        k = self.kind
        self.num_heads = _positive(num_heads, "num_heads", k)
        self.key_dim = _positive(key_dim, "key_dim", k)
        self.value_dim = self.key_dim if value_dim is None else _positive(value_dim,
                                                                          "value_dim", k)
        if isinstance(dropout, bool) or not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"[{k}] dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        if output_shape is not None and not isinstance(output_shape, int):
            output_shape = tuple(output_shape)
            if len(output_shape) != 1:
                raise ValueError(f"[{k}] output_shape must be an int (the last axis), got "
                                 f"{output_shape!r}")
            output_shape = output_shape[0]
        self.out_dim = output_shape
        if attention_axes is not None:
            raise ValueError(f"[{k}] attention_axes is not supported: attention runs over axis 1 "
                             "(timesteps) of (batch, timesteps, features) inputs")
        self.kernel_initializer = _initializer(kernel_initializer, k, "kernel_initializer")
        self.bias_initializer = _initializer(bias_initializer, k, "bias_initializer")
        self.kernel_regularizer = _regularizer(kernel_regularizer, k, "kernel_regularizer")
        self.bias_regularizer = _regularizer(bias_regularizer, k, "bias_regularizer")

    def split_call(self, query, value=None, key=None, query_mask=None, value_mask=None,
                   key_mask=None, attention_mask=None, return_attention_scores=False,
                   training=None, use_causal_mask=False, _has_key=None, _has_mask=None):
        """The symbolic inputs [query, value, (key), (attention_mask)] and the
        call's flags."""
        if isinstance(query, (list, tuple)):  # a recorded call, rebuilt by load_model
            items = list(query)
            query, value = items[0], items[1]
            rest = items[2:]
            key = rest.pop(0) if _has_key else None
            attention_mask = rest.pop(0) if _has_mask else None
        masks = {}
        for name, m in (("query_mask", query_mask), ("value_mask", value_mask),
                        ("key_mask", key_mask)):
            if m is not None and not isinstance(m, KerasTensor):
                raise TypeError(f"[{self.kind}] {name} must be a symbolic tensor "
                                f"(batch, timesteps), got {type(m).__name__}")
            if m is not None:
                masks[name] = m
        if value is None:
            raise TypeError(f"[{self.kind}] called without value: layer(query, value)")
        ins = [query, value] + ([key] if key is not None else []) + \
            ([attention_mask] if attention_mask is not None else [])
        for t in ins:
            if not isinstance(t, KerasTensor):
                raise TypeError(f"[{self.kind}] inputs must be symbolic tensors, got "
                                f"{type(t).__name__}")
        static = {"_has_key": key is not None, "_has_mask": attention_mask is not None}
        static.update(masks)
        self._flags = call_flags(static, return_attention_scores, use_causal_mask, training)
        return ins, static

    supports_masking = True  # the output carries the query's mask (Keras)

    def auto_masks(self, inputs, static):
        """Keras's: the query's and value's (and key's) masks, from the masks
        they carry unless given as query_mask= ..."""
        names = ["query_mask", "value_mask"] + (["key_mask"] if static.get("_has_key") else [])
        for name, t in zip(names, inputs):
            m = getattr(t, "_keras_mask", None)
            if name not in static and m is not None:
                static[name] = m
        if not static.get("_has_key"):
            static.pop("key_mask", None)  # Keras ignores it when key is value

    def _draw_sublayer_names(self):
        """Keras's attention layers make a Softmax and a Dropout when first built, which take
        the next "softmax" and "dropout" names: later unnamed layers are numbered past them
        (token_learner: the Dropout after a MultiHeadAttention is dropout_2, not dropout_1)."""
        if not getattr(self, "_sublayer_names_drawn", False):
            self._sublayer_names_drawn = True
            next_name("softmax")
            next_name("dropout")

    def compute_output_shape(self, shapes):
        self._draw_sublayer_names()
        flags = getattr(self, "_flags", {})
        q, v = shapes[0], shapes[1]
        k = shapes[2] if flags.get("_has_key") else v
        for name, s in (("query", q), ("value", v), ("key", k)):
            if len(s) < 2:
                raise ValueError(f"[{self.kind}] {name} must have shape (batch, "
                                 f"timesteps, features), got {(None,) + tuple(s)}")
        if any(len(s) > 2 for s in (q, v, k)):
            self._check_many_axes(q, v, k, flags)
        elif k[0] != v[0]:
            raise ValueError(f"[{self.kind}] key and value must have the same length, got "
                             f"{k[0]} and {v[0]}")
        if flags.get("_has_mask"):
            m = shapes[-1]
            ok = len(m) == 2 and m[0] in (1, q[0]) and m[1] == v[0]
            if not ok:
                raise ValueError(f"[{self.kind}] attention_mask must have shape (batch, "
                                 f"{q[0]}, {v[0]}) or (batch, 1, {v[0]}), got "
                                 f"{(None,) + tuple(m)}")
        h, vd = self.num_heads, self.value_dim
        d_out = self.out_dim or q[-1]
        kinit, binit = self.kernel_initializer, self.bias_initializer
        kreg, breg = self.kernel_regularizer, self.bias_regularizer
        self.params = []
        param = self._param
        for part, dim, heads, size in self._projections(q[-1], k[-1], v[-1]):
            self.params.append(param(f"{part}_kernel", (dim, heads, size), kinit, kreg))
            if self.use_bias:
                self.params.append(param(f"{part}_bias", (heads, size), binit, breg))
        self.params.append(param("output_kernel", (h, vd, d_out), kinit, kreg))
        if self.use_bias:
            self.params.append(param("output_bias", (d_out,), binit, breg))
        out = tuple(q[:-1]) + (d_out,)
        if flags.get("return_attention_scores"):
            return [out, (self._heads_here(), q[0], v[0])]
        return out

    def _check_many_axes(self, q, v, k, flags):
        """Inputs with several axes between the batch and the features (MobileViT's
        (batch, patch, patches, features)): as Keras's default attention_axes, attention runs
        over all of them at once, here as one flattened sequence."""
        k_ = self.kind
        if type(self) is not MultiHeadAttention:
            raise NotImplementedError(f"[{k_}] inputs of shape (batch, timesteps, features) are "
                                      f"supported, got {(None,) + tuple(q)}")
        for name, s in (("query", q), ("value", v), ("key", k)):
            if len(s) != len(q) or any(n is None for n in s[:-1]):
                raise ValueError(f"[{k_}] with more than one axis between the batch and the "
                                 f"features, query, value and key must have the same rank and "
                                 f"known lengths, got {name} {(None,) + tuple(s)} for query "
                                 f"{(None,) + tuple(q)}")
        if tuple(k[:-1]) != tuple(v[:-1]):
            raise ValueError(f"[{k_}] key and value must have the same axes before the "
                             f"features, got {(None,) + tuple(k)} and {(None,) + tuple(v)}")
        used = [f for f in ("_has_mask", "use_causal_mask", "return_attention_scores",
                            "query_mask", "value_mask", "key_mask") if flags.get(f) is not None
                and flags.get(f) is not False]
        if used:
            raise NotImplementedError(f"[{k_}] on inputs of rank {len(q) + 1}, masks and "
                                      f"returned scores are not supported yet (got {used}); "
                                      "inputs (batch, timesteps, features) take them")

    def _weight_subpath(self, pname: str) -> str:
        # Keras builds the projections as EinsumDense sublayers "query", "key",
        # "value" and "attention_output"
        part, _, what = pname.rpartition("_")
        if part in ("query", "key", "value", "gate", "output") and what in ("kernel", "bias"):
            return f"{'attention_output' if part == 'output' else part}/{what}"
        return pname

    # Hooks for the grouped layer (GroupQueryAttention: fewer key/value heads,
    # a gate, a sliding window).
    def _projections(self, dq: int, dk: int, dv: int) -> list:
        """(name, input features, heads, size) of each input projection, in
        Keras's weight order."""
        h, kd, vd = self.num_heads, self.key_dim, self.value_dim
        return [("query", dq, h, kd), ("key", dk, h, kd), ("value", dv, h, vd)]

    def _kv_heads(self) -> int:
        """The key and value heads this layer projects."""
        return self._heads_here()

    def _share_kv(self, k: str, v: str, ctx) -> tuple:
        """The projected keys and values (batch, kv heads, Tv, size) as every
        query head reads them."""
        return k, v

    def _extra_keep(self, tq: int, tv: int) -> list:
        """Masks (1, Tq, Tv) of the scores kept besides the call's masks."""
        return []

    def _gate(self, o: str, q_in: str, p, ctx, dq: int) -> str:
        """The heads' outputs o (batch, Tq, heads * value_dim) before the
        output projection."""
        return o

    def _project_flat(self, x: str, part: str, dim: int, heads: int, size: int, p) -> str:
        """x @ the part's kernel (+ its bias): (batch, t, heads * size)."""
        y = f"({x} @ reshape({p[part + '_kernel']}, [{dim}, {heads * size}]))"
        if self.use_bias:
            y = f"bias_add({y}, reshape({p[part + '_bias']}, [{heads * size}]))"
        return y

    # Hooks for the layer split by heads (tessera.nn.parallel_layers).
    def _param(self, name, shape, init, regularizer):
        return Param(name, shape, self._fan_axes(name, shape, init), regularizer=regularizer)

    @staticmethod
    def _fan_axes(name, shape, init):
        """A kernel's initializer with Keras's fans: its projections are EinsumDense
        layers, whose kernels take their fans from the einsum's axes: (dim | heads,
        size), the output's (heads, size | dim)."""
        if not name.endswith("_kernel"):
            return init
        inputs = [0, 1] if name == "output_kernel" else [0]
        return initializers._with_fan_axes(init, inputs,
                                           [a for a in range(len(shape)) if a not in inputs])

    def _heads_here(self) -> int:
        """The heads this layer computes (all of them here)."""
        return self.num_heads

    def _enter(self, inputs, ctx) -> list:
        """The query, value and key inputs as the projections read them."""
        return inputs

    def _leave(self, out: str, ctx) -> str:
        """The output projection's product (before the bias)."""
        return out

    def _dropout(self, probs: str, ctx, tq: int, tv: int) -> str:
        return ctx.define("p", f"dropout({probs}, {self.dropout!r}, "
                               f"{ctx.seed} * {ctx.seed_stride} + {ctx.index}, "
                               f"{ctx.training})")

    def forward(self, xs, p, ctx, _has_key=False, _has_mask=False, return_attention_scores=False,
                use_causal_mask=False, query_mask=None, value_mask=None, key_mask=None):
        shapes = [s[1:] for s in ctx.input_shapes]
        n_in = 3 if _has_key else 2
        many = shapes[0][:-1] if any(len(s) > 2 for s in shapes[:n_in]) else None
        if many is not None:  # attention over all the middle axes: one flattened sequence
            xs, shapes = list(xs), list(shapes)
            for i in range(n_in):
                t = math.prod(shapes[i][:-1])
                xs[i] = f"reshape({xs[i]}, [-1, {t}, {shapes[i][-1]}])"
                shapes[i] = (t, shapes[i][-1])
            out = self._attend(xs, p, ctx, shapes, _has_key, False, False, False, None, None,
                               None)
            d_out = self.out_dim or shapes[0][-1]
            return f"reshape({out}, [-1, {', '.join(str(n) for n in many)}, {d_out}])"
        return self._attend(xs, p, ctx, shapes, _has_key, _has_mask, return_attention_scores,
                            use_causal_mask, query_mask, value_mask, key_mask)

    def _attend(self, xs, p, ctx, shapes, _has_key, _has_mask, return_attention_scores,
                use_causal_mask, query_mask, value_mask, key_mask):
        """The attention of inputs (batch, T, features) (shapes without the batch)."""
        q_in, v_in = xs[0], xs[1]
        k_in = xs[2] if _has_key else v_in
        q_in, v_in, k_in = self._enter([q_in, v_in, k_in], ctx)
        mask = xs[-1] if _has_mask else None
        tq, tv = shapes[0][0], shapes[1][0]
        h, kd, vd = self._heads_here(), self.key_dim, self.value_dim

        def project(x, part, dim, size, t, scale=None, heads=h):
            y = self._project_flat(x, part, dim, heads, size, p)
            if scale is not None:
                # Scaled while contiguous: the same products as scaling the
                # transposed view, without a strided pass over it.
                y = f"({y} * {scale!r})"
            # (batch, t, heads, size) -> (batch, heads, t, size)
            return ctx.define(part[0], f"transpose(reshape({y}, [-1, {t}, {heads}, {size}]), "
                                       "[0, 2, 1, 3])")

        extra_keep = self._extra_keep(tq, tv)
        only_causal = not (query_mask is not None or value_mask is not None or mask is not None
                           or (_has_key and key_mask is not None) or extra_keep)
        fused = FUSED and only_causal and not self.dropout and not return_attention_scores
        scale = 1.0 / math.sqrt(kd)
        # The fused primitive scales the scores itself (no pass over q forward
        # or backward); the composed path scales q as Keras does.
        q = project(q_in, "query", shapes[0][-1], kd, tq, scale=None if fused else scale)
        hkv = self._kv_heads()
        k = project(k_in, "key", shapes[2 if _has_key else 1][-1], kd, tv, heads=hkv)
        v = project(v_in, "value", shapes[1][-1], vd, tv, heads=hkv)
        k, v = self._share_kv(k, v, ctx)
        if fused:
            # In a training step the forward keeps the probabilities for the
            # backward (attention's keep_probs: one product and the softmax
            # passes fewer there, bounded in memory by the primitive).
            o = ctx.define("o", f"reshape(transpose(attention({q}, {k}, {v}, {scale!r}, "
                                f"{'true' if use_causal_mask else 'false'}, {ctx.training}), "
                                f"[0, 2, 1, 3]), [-1, {tq}, {h * vd}])")
            o = self._gate(o, q_in, p, ctx, shapes[0][-1])
            return self._finish(o, p, ctx, shapes)
        scores = ctx.define("s", f"matmul({q}, transpose({k}, [0, 1, 3, 2]))")
        # Keras's _compute_attention_mask: the query's mask (batch, Tq, 1), the
        # value's and key's (batch, 1, Tv), the causal one and attention_mask,
        # all and-ed; masked scores set to -1e9. Keras's fused path (no
        # dropout, no scores returned: dot_product_attention) leaves a row
        # masked whole uniform; its other path (a masked Softmax) sets masked
        # probabilities to 0, so that such a row attends to nothing.
        keep = []
        if query_mask is not None:
            keep.append(f"expand_dims(astype({query_mask}, \"bool\"), -1)")
        for m in (value_mask, key_mask if _has_key else None):
            if m is not None:
                keep.append(f"expand_dims(astype({m}, \"bool\"), -2)")
        if use_causal_mask:
            keep.append(f"astype(tril(ones([1, {tq}, {tv}])), \"bool\")")
        keep += extra_keep
        if mask is not None:
            keep.append(f"astype({mask}, \"bool\")")
        if keep:
            m = keep[0]
            for other in keep[1:]:
                m = f"logical_and({m}, {other})"
            m = ctx.define("am", f"expand_dims({m}, 1)")
            scores = ctx.define("s", f"where({m}, {scores}, astype(-1e9, dtype_name({scores})))")
            probs = f"softmax({scores}, axis=-1)"
            if self.dropout or return_attention_scores:
                probs = f"where({m}, {probs}, zeros_like({scores}))"
            probs = ctx.define("p", probs)
        else:
            probs = ctx.define("p", f"softmax({scores}, axis=-1)")
        attended = probs
        if self.dropout:
            attended = self._dropout(probs, ctx, tq, tv)
        o = ctx.define("o", f"reshape(transpose(matmul({attended}, {v}), [0, 2, 1, 3]), "
                            f"[-1, {tq}, {h * vd}])")
        o = self._gate(o, q_in, p, ctx, shapes[0][-1])
        out = self._finish(o, p, ctx, shapes)
        if return_attention_scores:
            return [out, probs]
        return out

    def _finish(self, o: str, p, ctx, shapes) -> str:
        """The output projection of the heads' outputs o (batch, Tq, heads * value_dim)."""
        h, vd = self._heads_here(), self.value_dim
        d_out = self.out_dim or shapes[0][-1]
        out = self._leave(f"({o} @ reshape({p['output_kernel']}, [{h * vd}, {d_out}]))", ctx)
        if self.use_bias:
            out = f"bias_add({out}, {p['output_bias']})"
        return out


class GroupedQueryAttention(MultiHeadAttention):
    """Grouped-query attention, like keras.layers.GroupQueryAttention:
    num_key_value_heads key and value heads, each read by num_query_heads //
    num_key_value_heads consecutive query heads (1: multi-query attention).
    Weights query (dim, Hq, head_dim), key and value (dim, Hkv, head_dim),
    with use_gate a gate (dim, Hq, head_dim) whose sigmoid multiplies the
    heads' outputs, and attention_output (Hq, head_dim, dim), each with its
    bias. sliding_window w keeps the keys within w - 1 positions of the query
    (both sides; with use_causal_mask, the causal band)."""

    kind = "GroupQueryAttention"

    def __init__(self, head_dim, num_query_heads, num_key_value_heads, dropout=0.0,
                 use_bias=True, sliding_window=None, flash_attention=None,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, use_gate=False, seed=None,
                 name=None, input_shape=None, **kwargs):
        k = self.kind
        theirs = sorted({"num_heads", "key_dim", "value_dim", "output_shape",
                         "attention_axes"} & set(kwargs))
        if theirs:
            raise TypeError(f"[{k}] unexpected keyword argument {theirs[0]!r} (a "
                            "MultiHeadAttention argument; this layer takes head_dim, "
                            "num_query_heads and num_key_value_heads)")
        if activity_regularizer is not None:
            raise TypeError(f"[{k}] the Keras argument 'activity_regularizer' is not supported: "
                            "use kernel_regularizer, or add the penalty to a custom loss")
        super().__init__(num_query_heads, head_dim, dropout=dropout, use_bias=use_bias,
                         kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer,
                         kernel_regularizer=kernel_regularizer,
                         bias_regularizer=bias_regularizer, name=name,
                         input_shape=input_shape, **kwargs)
        self.head_dim, self.num_query_heads = self.key_dim, self.num_heads
        self.num_key_value_heads = _positive(num_key_value_heads, "num_key_value_heads", k)
        if self.num_query_heads % self.num_key_value_heads:
            raise ValueError(f"[{k}] num_query_heads must be divisible by num_key_value_heads, "
                             f"got num_query_heads={self.num_query_heads} and "
                             f"num_key_value_heads={self.num_key_value_heads}")
        self.num_repeats = self.num_query_heads // self.num_key_value_heads
        if sliding_window is not None:
            sliding_window = _positive(sliding_window, "sliding_window", k)
        self.sliding_window = sliding_window
        if flash_attention not in (None, True, False):
            raise ValueError(f"[{k}] flash_attention must be None, True or False, got "
                             f"{flash_attention!r}")
        # A hint in Keras (its backend's flash kernel); tessera uses its fused
        # attention primitive whenever the call allows it. Keras's refusals kept.
        self.flash_attention = flash_attention
        if flash_attention and self.dropout:
            raise ValueError(f"[{k}] dropout is not supported with flash_attention=True, got "
                             f"dropout={self.dropout!r}; set dropout=0.0 or flash_attention=None")
        self.use_gate = bool(use_gate)
        self.seed = seed  # (dropout draws from the training step's seed, as Dropout's)
        parts = ["query", "key", "value", "output"] + (["gate"] if self.use_gate else [])
        for arg, what, c in (("kernel_constraint", "kernel", kernel_constraint),
                             ("bias_constraint", "bias", bias_constraint)):
            for part in parts:
                self.set_constraint(f"{part}_{what}", c, arg)

    def split_call(self, query, value=None, key=None, query_mask=None, value_mask=None,
                   key_mask=None, attention_mask=None, return_attention_scores=False,
                   training=None, use_causal_mask=False, _has_key=None, _has_mask=None):
        """As MultiHeadAttention's."""
        if return_attention_scores and self.flash_attention:
            raise ValueError(f"[{self.kind}] return_attention_scores=True is not supported with "
                             "flash_attention=True")
        return super().split_call(query, value, key, query_mask, value_mask, key_mask,
                                  attention_mask, return_attention_scores, training,
                                  use_causal_mask, _has_key, _has_mask)

    def compute_output_shape(self, shapes):
        self._draw_sublayer_names()
        q, v = shapes[0], shapes[1]
        if q and v and q[-1] != v[-1]:
            raise ValueError(f"[{self.kind}] query and value must have the same last dimension, "
                             f"got query {(None,) + tuple(q)} and value {(None,) + tuple(v)}")
        return super().compute_output_shape(shapes)

    def _projections(self, dq, dk, dv):
        h, hkv, d = self.num_heads, self.num_key_value_heads, self.head_dim
        return [("query", dq, h, d), ("key", dk, hkv, d)] + \
            ([("gate", dq, h, d)] if self.use_gate else []) + [("value", dv, hkv, d)]

    def _kv_heads(self):
        return self.num_key_value_heads

    def _share_kv(self, k, v, ctx):
        if self.num_repeats == 1:
            return k, v
        # (batch, Hkv, T, d) -> (batch, Hq, T, d): query head u reads kv head u // repeats
        return tuple(ctx.define(name, f"repeat({x}, {self.num_repeats}, axis=1)")
                     for name, x in (("k", k), ("v", v)))

    def _extra_keep(self, tq, tv):
        if self.sliding_window is None:
            return []
        w = self.sliding_window
        return [f"logical_and(astype(tril(ones([1, {tq}, {tv}]), {w - 1}), \"bool\"), "
                f"astype(triu(ones([1, {tq}, {tv}]), {1 - w}), \"bool\"))"]

    def _gate(self, o, q_in, p, ctx, dq):
        if not self.use_gate:
            return o
        h, d = self.num_heads, self.head_dim
        g = self._project_flat(q_in, "gate", dq, h, d, p)
        return ctx.define("o", f"({o} * sigmoid({g}))")


GroupQueryAttention = GroupedQueryAttention  # keras.layers' name for it
