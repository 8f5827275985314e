// The attention family: scaled dot-product attention softmax(scale * q @ k^T)
// @ v as one primitive (attention) and its backward (attention_grad), each a
// pass over blocks (one per batch element and head) whose scores stay in
// cache (kernels/attention.hpp). tessera.nn's MultiHeadAttention calls it when
// no mask but the causal one, no dropout on the scores and no returned scores
// apply (python/tessera/nn/layers/multi_head_attention.py); other cases
// compose matmul, where and softmax.
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/attention.hpp"
#include "tessera/kernels/nn.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace ka = kernels;

struct AttentionInputs {
  Array q, k, v;
  DType dtype = DType::float32;
  ka::AttentionShape shape;
  int64_t blocks = 1;  // the product of the leading (batch, head) dimensions
  double scale = 1.0;
};

// An argument as the kernel reads it, in dtype dt: a strided view whose rows
// (the last axis) are contiguous and do not overlap is read in place (a
// head's rows inside a (batch, tokens, heads, features) projection: no copy
// for the transpose that puts heads first); any other layout is packed.
Array attention_rows_view(const Array& x, DType dt) {
  if (x.dtype() != dt) return cast_array(x.contiguous(), dt);
  if (x.is_contiguous() || x.ndim() < 2) return x.contiguous();
  const std::vector<int64_t> st = x.strides();
  const size_t n = st.size();
  bool ok = st[n - 1] == 1 && st[n - 2] >= x.dim(static_cast<int>(n) - 1);
  for (int64_t stride : st) ok = ok && stride >= 0;
  return ok ? x : x.contiguous();
}

// Element offsets of each block (the leading dimensions, in C order) of x.
std::vector<int64_t> attention_block_offsets(const Array& x, int64_t blocks) {
  const std::vector<int64_t> st = x.strides();
  const int lead = x.ndim() - 2;
  std::vector<int64_t> out(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t rest = b, off = 0;
    for (int i = lead - 1; i >= 0; --i) {
      off += (rest % x.dim(i)) * st[static_cast<size_t>(i)];
      rest /= x.dim(i);
    }
    out[static_cast<size_t>(b)] = off;
  }
  return out;
}

// The row stride of a (..., rows, cols) array as attention_rows_view left it.
int64_t attention_row_stride(const Array& x) {
  return x.strides()[static_cast<size_t>(x.ndim() - 2)];
}

// q (..., tq, d), k (..., tk, d), v (..., tk, dv) with the same leading
// dimensions, in their common float dtype; `first` is q's argument index.
AttentionInputs attention_inputs(Args& a, size_t first) {
  AttentionInputs in;
  in.q = a.view(first);
  in.k = a.view(first + 1);
  in.v = a.view(first + 2);
  in.dtype = promote(promote(ka::float_dtype(in.q.dtype()), ka::float_dtype(in.k.dtype())),
                     ka::float_dtype(in.v.dtype()));
  if (in.dtype != DType::float64) in.dtype = DType::float32;
  const Array* arrays[] = {&in.q, &in.k, &in.v};
  for (size_t i = 0; i < 3; ++i) {
    if (arrays[i]->ndim() < 2) {
      a.value_error(first + i, error_message("must have at least 2 dimensions (..., tokens, "
                                             "features), got shape ",
                                             shape_str(arrays[i]->shape())));
    }
  }
  const Shape& qs = in.q.shape();
  const Shape& ks = in.k.shape();
  const Shape& vs = in.v.shape();
  const size_t n = qs.size();
  const Shape lead(qs.begin(), qs.end() - 2);
  if (ks.size() != n || vs.size() != n || Shape(ks.begin(), ks.end() - 2) != lead ||
      Shape(vs.begin(), vs.end() - 2) != lead) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] q, k and v must have the same leading (batch, head) dimensions, got "
        "shapes ", shape_str(qs), ", ", shape_str(ks), " and ", shape_str(vs)));
  }
  if (ks[n - 1] != qs[n - 1]) {
    throw std::invalid_argument(error_message("[", a.op(), "] q and k must have the same last "
                                              "(feature) dimension, got shapes ",
                                              shape_str(qs), " and ", shape_str(ks)));
  }
  if (vs[n - 2] != ks[n - 2]) {
    throw std::invalid_argument(error_message("[", a.op(), "] k and v must have as many tokens "
                                              "(axis -2), got shapes ",
                                              shape_str(ks), " and ", shape_str(vs)));
  }
  in.q = attention_rows_view(in.q, in.dtype);
  in.k = attention_rows_view(in.k, in.dtype);
  in.v = attention_rows_view(in.v, in.dtype);
  in.shape = {.tq = qs[n - 2],
              .tk = ks[n - 2],
              .d = qs[n - 1],
              .dv = vs[n - 1],
              .ldq = attention_row_stride(in.q),
              .ldk = attention_row_stride(in.k),
              .ldv = attention_row_stride(in.v),
              .ldg = vs[n - 1],
              .causal = a.boolean(first + 4)};
  for (int64_t dim : lead) in.blocks *= dim;
  in.scale = a.number(first + 3);
  if (!std::isfinite(in.scale)) {
    a.value_error(first + 3, error_message("must be a finite number, got ", in.scale));
  }
  return in;
}

Shape attention_out_shape(const AttentionInputs& in) {
  Shape s = in.q.shape();
  s.back() = in.shape.dv;
  return s;
}

// ---- Probabilities kept from the forward for the backward.
//
// In a training step (keep_probs) the forward leaves each block's
// probabilities beside its result, as the result buffer's companion (they
// live exactly as long as it); attention_grad, given that result as `out`,
// reads them instead of recomputing the scores (one of its five products and
// the softmax passes). They hold the q and k they came from (alive, so no
// other array can be at their addresses) and are used only when the
// backward's q and k are those (the same origins and layouts). Bounded: nothing over
// kAttnKeepEntryBytes is kept, nor beyond kAttnKeepTotalBytes in all (the
// backward then recomputes them, with the same bits: the same kernel computes
// them either way).
struct AttnKeptProbs {
  Array q, k;
  ka::AttentionShape shape;
  double scale = 0;
  Array probs;
};
constexpr int64_t kAttnKeepEntryBytes = int64_t{64} << 20;
constexpr int64_t kAttnKeepTotalBytes = int64_t{256} << 20;
std::atomic<int64_t> g_attn_kept_bytes{0};

// Claims `bytes` of the budget (false: do not keep them).
bool attn_claim_keep(int64_t bytes) {
  if (bytes <= 0 || bytes > kAttnKeepEntryBytes) return false;
  if (g_attn_kept_bytes.fetch_add(bytes) + bytes <= kAttnKeepTotalBytes) return true;
  g_attn_kept_bytes.fetch_sub(bytes);
  return false;
}

// Files the probabilities as `out`'s companion; the budget is returned when
// the companion goes with `out`.
void attn_keep(const Array& out, AttnKeptProbs kept, int64_t bytes) {
  out.set_companion(std::shared_ptr<AttnKeptProbs>(
      new AttnKeptProbs(std::move(kept)), [bytes](AttnKeptProbs* p) {
        delete p;
        g_attn_kept_bytes.fetch_sub(bytes);
      }));
}

// The probabilities kept beside `out` when they came from these q and k.
const Array* attn_kept_probs(const Array& out, const AttentionInputs& in) {
  const auto* e = static_cast<const AttnKeptProbs*>(out.companion().get());
  if (e == nullptr || out.dtype() != in.dtype) return nullptr;
  const ka::AttentionShape& a = in.shape;
  const ka::AttentionShape& b = e->shape;
  const bool same_operands =
      in.q.origin_raw() == e->q.origin_raw() && in.k.origin_raw() == e->k.origin_raw() &&
      in.q.dtype() == e->q.dtype() && in.k.dtype() == e->k.dtype() &&
      in.q.strides() == e->q.strides() && in.k.strides() == e->k.strides();
  const bool same = same_operands && a.tq == b.tq && a.tk == b.tk && a.d == b.d &&
                    a.dv == b.dv && a.ldq == b.ldq && a.ldk == b.ldk && a.causal == b.causal &&
                    in.scale == e->scale && e->probs.dtype() == in.dtype;
  return same ? &e->probs : nullptr;
}

template <class T>
Value attention_typed(const AttentionInputs& in, bool keep_probs) {
  Array out(in.dtype, attention_out_shape(in));
  const ka::AttentionShape& s = in.shape;
  const std::vector<int64_t> oq = attention_block_offsets(in.q, in.blocks);
  const std::vector<int64_t> ok = attention_block_offsets(in.k, in.blocks);
  const std::vector<int64_t> ov = attention_block_offsets(in.v, in.blocks);
  const T* q = in.q.origin<T>();
  const T* k = in.k.origin<T>();
  const T* v = in.v.origin<T>();
  T* o = out.data<T>();
  const T scale = static_cast<T>(in.scale);
  const int64_t probs_bytes = in.blocks * s.tq * s.tk * static_cast<int64_t>(sizeof(T));
  std::optional<Array> probs;
  if (keep_probs && attn_claim_keep(probs_bytes)) {
    try {
      probs.emplace(in.dtype, Shape{in.blocks, s.tq, s.tk});
    } catch (...) {
      g_attn_kept_bytes.fetch_sub(probs_bytes);
      throw;
    }
  }
  T* pr = probs ? probs->data<T>() : nullptr;
  parallel_for(in.blocks, ka::attention_block_ns(s), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const size_t i = static_cast<size_t>(b);
      ka::attention_forward<T>(s, scale, q + oq[i], k + ok[i], v + ov[i], o + b * s.tq * s.dv,
                               pr != nullptr ? pr + b * s.tq * s.tk : nullptr);
    }
  });
  if (probs) {
    attn_keep(out,
              {.q = in.q,
               .k = in.k,
               .shape = s,
               .scale = in.scale,
               .probs = std::move(*probs)},
              probs_bytes);
  }
  return out;
}

// attention(q, k, v, scale, causal, keep_probs)
Value eval_attention(Args& a) {
  AttentionInputs in = attention_inputs(a, 0);
  const bool keep = a.size() > 5 && !a.is_nil(5) && a.boolean(5);
  if (in.dtype == DType::float64) return attention_typed<double>(in, keep);
  return attention_typed<float>(in, keep);
}

template <class T>
Value attention_grad_typed(const AttentionInputs& in, const Array& g, const Array* probs) {
  Array dq(in.dtype, in.q.shape()), dk(in.dtype, in.k.shape()), dv(in.dtype, in.v.shape());
  ka::AttentionShape s = in.shape;
  s.ldg = attention_row_stride(g);
  const std::vector<int64_t> oq = attention_block_offsets(in.q, in.blocks);
  const std::vector<int64_t> ok = attention_block_offsets(in.k, in.blocks);
  const std::vector<int64_t> ov = attention_block_offsets(in.v, in.blocks);
  const std::vector<int64_t> og = attention_block_offsets(g, in.blocks);
  const T scale = static_cast<T>(in.scale);
  const T* pr = probs != nullptr ? probs->data<T>() : nullptr;
  parallel_for(in.blocks, 2.5 * ka::attention_block_ns(s), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const size_t i = static_cast<size_t>(b);
      ka::attention_backward<T>(s, scale, in.q.origin<T>() + oq[i], in.k.origin<T>() + ok[i],
                                in.v.origin<T>() + ov[i], g.origin<T>() + og[i],
                                dq.data<T>() + b * s.tq * s.d, dk.data<T>() + b * s.tk * s.d,
                                dv.data<T>() + b * s.tk * s.dv,
                                pr != nullptr ? pr + b * s.tq * s.tk : nullptr);
    }
  });
  return Value(List{Value(std::move(dq)), Value(std::move(dk)), Value(std::move(dv))});
}

// attention_grad(g, q, k, v, scale, causal)
Value eval_attention_grad(Args& a) {
  AttentionInputs in = attention_inputs(a, 1);
  const Shape shape = attention_out_shape(in);
  Array g;
  if (a[0].is_scalar()) {
    g = Array::full(in.dtype, shape, a.number(0));
  } else {
    g = a.view(0);
    if (g.shape() != shape) {
      throw std::invalid_argument(error_message("[", a.op(), "] g has shape ",
                                                shape_str(g.shape()), " but attention's result "
                                                "has shape ", shape_str(shape)));
    }
    g = attention_rows_view(g, in.dtype);
  }
  // `out` is kept alive here (and so its companion) until the backward ends.
  Array out;
  const Array* probs = nullptr;
  if (a.size() > 6 && !a.is_nil(6) && a[6].is_array()) {
    out = a.view(6);
    probs = attn_kept_probs(out, in);
  }
  if (in.dtype == DType::float64) return attention_grad_typed<double>(in, g, probs);
  return attention_grad_typed<float>(in, g, probs);
}

const bool registered_attention = register_primitives({
    {.name = "attention",
     .family = "nn",
     .params = {{"q"}, {"k"}, {"v"}, opt("scale", Value(1.0)), opt("causal", Value(false)),
                opt("keep_probs", Value(false))},
     .help = "Scaled dot-product attention softmax(scale * q @ swapaxes(k, -1, -2)) @ v in one "
             "pass per (batch, head) block, its scores kept in cache: q (..., tq, d), k (..., "
             "tk, d), v (..., tk, dv) with the same leading dimensions; causal: query i sees "
             "keys j <= i only (Keras's use_causal_mask). Returns (..., tq, dv). "
             "Differentiable in q, k and v: the backward recomputes the scores, unless "
             "keep_probs (a training step's forward) left the probabilities beside the result "
             "(up to 64 MB per call, 256 MB in all, freed with the result).",
     .eval = eval_attention,
     .ns_per_element = 50.0,
     .grads = {"common[0]", "common[1]", "common[2]", "", "", ""},
     .grad_common = "attention_grad(g, q, k, v, scale, causal, out)",
     .strided = true},
    {.name = "attention_grad",
     .family = "nn",
     .params = {{"g"}, {"q"}, {"k"}, {"v"}, opt("scale", Value(1.0)),
                opt("causal", Value(false)), opt("out", Value())},
     .help = "Backward of attention: g is the cotangent of its result; returns list(dq, dk, "
             "dv). out: attention's result, whose kept probabilities (keep_probs) are used "
             "when they came from these q and k.",
     .eval = eval_attention_grad,
     .ns_per_element = 100.0,
     .strided = true},
});

}  // namespace

}  // namespace tessera
