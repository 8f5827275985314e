// Neural-network kernels: activations and their derivatives, softmax along an
// axis, dropout masks, per-channel statistics for batch normalization, class
// labels, and the row losses of the cross-entropies.
//
// Every kernel is single-threaded over a range of elements, lanes or rows, so
// the primitives (primitives/nn.cpp, primitives/losses.cpp) can cut the work
// into tiles. Arrays passed in hold float32 or float64 (the compute dtype);
// inputs that must share it say so. Sums run in double.
#pragma once

#include <cstdint>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// Calls f(TypeTag<float>{}) for float32 and f(TypeTag<double>{}) otherwise:
// the nn kernels compute in float32 or float64 only (callers promote first).
template <class F>
void dispatch_float(DType dt, F&& f) {
  if (dt == DType::float32) {
    f(TypeTag<float>{});
  } else {
    f(TypeTag<double>{});
  }
}

// True when the shapes are equal or differ only by a trailing 1 ((N,) and
// (N, 1)): the label shapes losses and accuracy accept.
inline bool same_but_trailing_one(const Shape& a, const Shape& b) {
  if (a == b) return true;
  auto with_one = [](Shape s) {
    s.push_back(1);
    return s;
  };
  return with_one(a) == b || a == with_one(b);
}

// The dtype nn primitives compute in: float32 stays float32, everything else
// (float64, int64, bool) computes in float64.
inline DType float_dtype(DType dt) {
  return dt == DType::float32 ? DType::float32 : DType::float64;
}

// Elementwise activations. alpha is the slope of leaky_relu and the scale of elu.
enum class Activation : uint8_t { relu, leaky_relu, elu, gelu, gelu_tanh, sigmoid, tanh, softplus };

// Estimated nanoseconds per element of the activation (forward or backward).
double activation_cost_ns(Activation f);

// out[i] = f(x[i]) for i in [begin, end); x and out share a dtype (out may be x).
void activation_range(Activation f, double alpha, const Array& x, Array& out, int64_t begin,
                      int64_t end);

// dx[i] = g[i] * f'(.) for i in [begin, end). `v` is the activation's input x,
// except for sigmoid and tanh, where it is the output (their derivatives are
// cheapest from it). g, v and dx share a dtype (dx may be g).
void activation_grad_range(Activation f, double alpha, const Array& g, const Array& v, Array& dx,
                           int64_t begin, int64_t end);

// An array seen as (outer, n, inner) around one axis: lane l runs along the
// axis at outer index l / inner and inner index l % inner.
struct AxisLanes {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count() const { return outer * inner; }
};
AxisLanes axis_lanes(const Shape& shape, int axis);

// Lanes [begin, end) of softmax (log = false) or log_softmax (log = true) of x,
// shifted by the lane's maximum for stability.
void softmax_range(const AxisLanes& lanes, bool log, const Array& x, Array& out, int64_t begin,
                   int64_t end);

// Lanes [begin, end) of the backward of softmax / log_softmax from its output:
// softmax: dx = out * (g - sum(g * out)); log_softmax: dx = g - exp(out) * sum(g).
void softmax_grad_range(const AxisLanes& lanes, bool log, const Array& g, const Array& out,
                        Array& dx, int64_t begin, int64_t end);

// The dropout mask: element i is kept when word i % 4 of Philox at counter i / 4,
// keyed by `seed`, is at least `threshold` (rate * 2^32). It depends on
// (seed, i) alone, never on tiling.
uint64_t dropout_threshold(double rate);
bool dropout_keeps(uint64_t seed, uint64_t threshold, int64_t i);

// out[i] = keep(i) ? x[i] * scale : 0 for i in [begin, end); x and out share a
// dtype (out may be x).
void dropout_range(const Array& x, Array& out, uint64_t seed, uint64_t threshold, double scale,
                   int64_t begin, int64_t end);

// Per-channel sums over rows [row_begin, row_end) of a channels-last array
// viewed as (rows, channels), added into doubles (`channels` each):
//   channel_sum:          sums[c] += x[r, c]
//   channel_shifted_sums: s1[c] += x[r, c] - shift[c];  s2[c] += (x[r, c] - shift[c])^2
//   channel_grad_sums:    sum_g[c] += g'[r, c];  sum_g_dev[c] += g'[r, c] * (x[r, c] - mean[c])
// where g' is g, or with a `mask`, g * (mask > 0 ? 1 : 0): the backward of a
// relu fused after the map, mask its output; with a mask and `masked_g`, g' is
// also written to masked_g's rows. g, x, mask and masked_g share a dtype.
void channel_sum(const Array& x, int64_t channels, int64_t row_begin, int64_t row_end,
                 double* sums);
void channel_shifted_sums(const Array& x, int64_t channels, const double* shift,
                          int64_t row_begin, int64_t row_end, double* s1, double* s2);
void channel_grad_sums(const Array& g, const Array& x, const Array* mask, int64_t channels,
                       const double* mean, int64_t row_begin, int64_t row_end, double* sum_g,
                       double* sum_g_dev, Array* masked_g = nullptr);

// Rows [row_begin, row_end) of out[r, c] = a[c] * u'[r, c] + p[c] * v[r, c] + q[c],
// u' being u masked as above (mask may be null; v may be null when p is all
// zero), then max(out, 0) when relu (only without mask): the affine map
// of batch normalization forward (u = x; v, with p = 1, the residual that
// batch_norm_add_relu adds) and backward (u = g, v = x). u, mask,
// v and out share a dtype; out may be u.
void channel_affine(const Array& u, const Array* mask, const Array* v, int64_t channels,
                    const double* a, const double* p, const double* q, bool relu, Array& out,
                    int64_t row_begin, int64_t row_end);
// The same rows written to `out` (row row_begin first; u's dtype), a buffer
// of the caller's: a convolution's chunk that consumes them while in cache.
void channel_affine_to(const Array& u, const Array* mask, const Array* v, int64_t channels,
                       const double* a, const double* p, const double* q, bool relu, void* out,
                       int64_t row_begin, int64_t row_end);

// Class indices as int64: `labels` (int64, bool, or floats holding whole
// numbers) checked to lie in [0, depth). Throws ValueError naming `op`, the
// first bad label, its flat index and the depth.
Array class_indices(const Array& labels, int64_t depth, const char* op);

// Index of the first maximum of n values (NaN compares false: never chosen
// after a number; a leading NaN stays, as the first element).
int64_t argmax_row(const Array& x, int64_t offset, int64_t n);

// Losses: sums of per-row (categorical, sparse) or per-element (binary, squared)
// losses over [begin, end), and their gradients wrt y_pred scaled by `scale`.
// Rows hold `classes` values; y_true and y_pred share a dtype; `labels` are
// checked class indices. Probabilities are rescaled to sum to 1 per row and
// clipped to [kLossEpsilon, 1 - kLossEpsilon], as Keras does; from_logits
// works on log_softmax / log-sigmoid instead, which needs no clipping.
inline constexpr double kLossEpsilon = 1e-7;
double categorical_ce_sum(const Array& y_true, const Array& y_pred, int64_t classes,
                          bool from_logits, int64_t row_begin, int64_t row_end);
void categorical_ce_grad(const Array& y_true, const Array& y_pred, int64_t classes,
                         bool from_logits, double scale, Array& dp, int64_t row_begin,
                         int64_t row_end);
double sparse_ce_sum(const int64_t* labels, const Array& y_pred, int64_t classes,
                     bool from_logits, int64_t row_begin, int64_t row_end);
void sparse_ce_grad(const int64_t* labels, const Array& y_pred, int64_t classes, bool from_logits,
                    double scale, Array& dp, int64_t row_begin, int64_t row_end);
double binary_ce_sum(const Array& y_true, const Array& y_pred, bool from_logits, int64_t begin,
                     int64_t end);
void binary_ce_grad(const Array& y_true, const Array& y_pred, bool from_logits, double scale,
                    Array& dp, int64_t begin, int64_t end);
double squared_error_sum(const Array& y_true, const Array& y_pred, int64_t begin, int64_t end);
void squared_error_grad(const Array& y_true, const Array& y_pred, double scale, Array& dp,
                        int64_t begin, int64_t end);

}  // namespace tessera::kernels
