"""Keras's single-head attention layers: Attention (dot-product, Luong
style; score_mode "dot" or "concat", use_scale) and AdditiveAttention
(Bahdanau style), called on [query, value] or [query, value, key] with
Keras's masks ([query_mask, value_mask], or the masks the inputs carry),
use_causal_mask, dropout on the attention weights in training, and
return_attention_scores."""

from __future__ import annotations

from ..symbolic import KerasTensor
from .base import Layer, Param, _initializer
from .noise import _seed


def call_flags(static: dict, return_attention_scores, use_causal_mask, training) -> dict:
    """An attention layer's call flags added to `static` (only those set, so
    that calls without them share one program)."""
    if return_attention_scores:
        static["return_attention_scores"] = True
    if use_causal_mask:
        static["use_causal_mask"] = True
    if training is not None:
        static["training"] = bool(training)
    return static

__all__ = ["Attention", "AdditiveAttention"]


class Attention(Layer):
    """softmax(scores(query, key)) @ value, like keras.layers.Attention:
    scores = query @ key^T (times a learned scalar with use_scale), or with
    score_mode="concat", w * sum(tanh(scale * (query + key)))."""

    kind = "Attention"
    multi_input = True
    supports_masking = True

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None, name=None,
                 input_shape=None, **kwargs):
        super().__init__(name, input_shape, **kwargs)
        if score_mode not in ("dot", "concat"):
            raise ValueError(f"[{self.kind}] score_mode must be 'dot' or 'concat', got "
                             f"{score_mode!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
                not 0.0 <= dropout < 1.0:
            raise ValueError(f"[{self.kind}] dropout must be in [0, 1), got {dropout!r}")
        self.use_scale = bool(use_scale)
        self.score_mode = score_mode
        self.dropout = float(dropout)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"[{self.kind}] seed must be an int or None, got {seed!r}")
        self.seed = seed

    # ---------------------------------------------------------------- call
    def split_call(self, inputs, mask=None, training=None, return_attention_scores=False,
                   use_causal_mask=False, query_mask=None, value_mask=None):
        """The symbolic inputs [query, value, (key)] and the call's flags."""
        k = self.kind
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"[{k}] layer {self.name!r} must be called on a list of inputs, "
                             f"[query, value] or [query, value, key], got one "
                             f"{type(inputs).__name__}")
        if not 2 <= len(inputs) <= 3:
            raise ValueError(f"[{k}] layer {self.name!r} takes [query, value] or [query, value, "
                             f"key], got a list of {len(inputs)} inputs")
        for t in inputs:
            if not isinstance(t, KerasTensor):
                raise TypeError(f"[{k}] inputs must be symbolic tensors, got "
                                f"{type(t).__name__}")
        if mask is not None:
            if not isinstance(mask, (list, tuple)) or not 2 <= len(mask) <= 3:
                raise ValueError(f"[{k}] mask must be a list [query_mask, value_mask], got "
                                 f"{mask!r}")
            query_mask = mask[0] if query_mask is None else query_mask
            value_mask = mask[1] if value_mask is None else value_mask
        static = {}
        for name, m in (("query_mask", query_mask), ("value_mask", value_mask)):
            if m is not None and not isinstance(m, KerasTensor):
                raise TypeError(f"[{k}] {name} must be a symbolic tensor (batch, timesteps), "
                                f"got {type(m).__name__}")
            if m is not None:
                static[name] = m
        self._flags = call_flags(static, return_attention_scores, use_causal_mask, training)
        return list(inputs), static

    def auto_masks(self, inputs, static):
        """Keras's: the masks the query and the value carry, unless given."""
        for name, t in zip(("query_mask", "value_mask"), inputs):
            m = getattr(t, "_keras_mask", None)
            if name not in static and m is not None:
                static[name] = m

    def output_mask(self, inputs, mask):
        """Keras's compute_mask: the query's mask."""
        return getattr(self, "_flags", {}).get("query_mask")

    # ---------------------------------------------------------------- shapes
    def compute_output_shape(self, shapes):
        q, v = tuple(shapes[0]), tuple(shapes[1])
        key = tuple(shapes[2]) if len(shapes) > 2 else v
        for name, s in (("query", q), ("value", v), ("key", key)):
            if len(s) != 2:
                raise ValueError(f"[{self.kind}] {name} must have shape (batch, timesteps, "
                                 f"features), got {(None,) + s}")
        if key[0] != v[0]:
            raise ValueError(f"[{self.kind}] key and value must have the same length, got "
                             f"{key[0]} and {v[0]}")
        if q[-1] != key[-1]:
            raise ValueError(f"[{self.kind}] query and key must have the same features, got "
                             f"{q[-1]} and {key[-1]}")
        self.params = self._weights_for(q[-1])
        out = (q[0], v[-1])
        if getattr(self, "_flags", {}).get("return_attention_scores"):
            return [out, (q[0], v[0])]
        return out

    def _weights_for(self, dim) -> list:
        params = []
        if self.use_scale:
            params.append(Param("scale", (), _initializer("ones", self.kind, "scale")))
        if self.score_mode == "concat":
            params.append(Param("concat_score_weight", (),
                                _initializer("ones", self.kind, "concat_score_weight")))
        return params

    # ---------------------------------------------------------------- forward
    def _scores(self, q, k, p, ctx) -> str:
        if self.score_mode == "dot":
            s = f"matmul({q}, swapaxes({k}, -2, -1))"
            return f"({s} * {p['scale']})" if self.use_scale else s
        total = f"expand_dims({q}, -2) + expand_dims({k}, -3)"
        if self.use_scale:
            total = f"{p['scale']} * ({total})"
        return f"{p['concat_score_weight']} * sum(tanh({total}), axis=-1)"

    def forward(self, xs, p, ctx, query_mask=None, value_mask=None,
                return_attention_scores=False, use_causal_mask=False):
        q = ctx.define("att_q", xs[0])
        v = ctx.define("att_v", xs[1])
        k = ctx.define("att_k", xs[2]) if len(xs) > 2 else v
        scores = ctx.define("att_s", self._scores(q, k, p, ctx))
        # Keras's score mask: the value's mask (batch, 1, Tv) and-ed with the
        # causal one; masked scores lowered by 1e9
        keep = []
        if value_mask is not None:
            keep.append(f"expand_dims(astype({value_mask}, \"bool\"), -2)")
        if use_causal_mask:
            tq, tv = ctx.input_shapes[0][1], ctx.input_shapes[1][1]
            keep.append(f"astype(tril(ones([1, {tq}, {tv}])), \"bool\")")
        if keep:
            m = keep[0] if len(keep) == 1 else f"logical_and({keep[0]}, {keep[1]})"
            scores = ctx.define("att_s", f"where({m}, {scores}, {scores} - 1e9)")
        weights = ctx.define("att_w", f"softmax({scores}, axis=-1)")
        used = weights
        if self.dropout and ctx.is_training:
            used = ctx.define("att_d", f"dropout({weights}, {self.dropout!r}, "
                                       f"{_seed(ctx, self)}, true)")
        out = f"matmul({used}, {v})"
        if query_mask is not None:
            out = ctx.define("att_o", out)
            out = f"where(expand_dims(astype({query_mask}, \"bool\"), -1), {out}, " \
                  f"zeros_like({out}))"
        if return_attention_scores:
            return [out, weights]
        return out


class AdditiveAttention(Attention):
    """softmax(sum(scale * tanh(query + key))) @ value, like
    keras.layers.AdditiveAttention (scale: a learned vector over the
    features, with use_scale)."""

    kind = "AdditiveAttention"

    def __init__(self, use_scale=True, dropout=0.0, seed=None, name=None, input_shape=None,
                 **kwargs):
        super().__init__(use_scale=use_scale, score_mode="dot", dropout=dropout, seed=seed,
                         name=name, input_shape=input_shape, **kwargs)

    def _weights_for(self, dim) -> list:
        if not self.use_scale:
            return []
        return [Param("scale", (dim,), _initializer("glorot_uniform", self.kind, "scale"), dim,
                      dim)]

    def _scores(self, q, k, p, ctx) -> str:
        t = f"tanh(expand_dims({q}, -2) + expand_dims({k}, -3))"
        if self.use_scale:
            t = f"{p['scale']} * {t}"
        return f"sum({t}, axis=-1)"
