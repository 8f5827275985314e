// Layer normalization as one primitive (layer_norm) and its backward
// (layer_norm_grad): one pass over the rows each (kernels/layer_norm.hpp)
// instead of the composed mean, subtract, square, mean, sqrt, divide,
// multiply and add, each a pass of its own with a backward of its own.
// tessera.nn's LayerNormalization calls it when it normalizes the last axes
// with both gamma and beta (python/tessera/nn/layers/normalization.py);
// other cases compose.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/layer_norm.hpp"
#include "tessera/kernels/nn.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/gradient_expansions.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace kl = kernels;

// Estimated nanoseconds per element of the forward (the backward: twice).
constexpr double kLayerNormNs = 1.0;

struct LayerNormInputs {
  Array x, gamma;
  DType dtype = DType::float32;
  int64_t rows = 0, n = 0;
  double epsilon = 1e-3;
};

// x (..., normalized dims), gamma with the normalized dims' shape, in their
// common float dtype (float64 if either is, float32 otherwise); `first` is
// x's argument index, gamma's is first + 1, epsilon's `eps`.
LayerNormInputs layer_norm_inputs(Args& a, size_t first, size_t eps) {
  LayerNormInputs in;
  in.x = a.array(first);
  in.gamma = a.array(first + 1);
  in.dtype = promote(kernels::float_dtype(in.x.dtype()), kernels::float_dtype(in.gamma.dtype()));
  if (in.dtype != DType::float64) in.dtype = DType::float32;
  const Shape& xs = in.x.shape();
  const Shape& gs = in.gamma.shape();
  if (gs.empty() || gs.size() > xs.size() || !std::equal(gs.begin(), gs.end(),
                                                         xs.end() - static_cast<long>(gs.size()))) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] gamma's shape must be x's last dimensions (the normalized ones), got "
        "x of shape ", shape_str(xs), " and gamma of shape ", shape_str(gs)));
  }
  in.n = in.gamma.size();
  in.rows = in.n == 0 ? 0 : in.x.size() / in.n;
  in.epsilon = a.number(eps);
  if (!(in.epsilon > 0) || !std::isfinite(in.epsilon)) {
    a.value_error(eps, error_message("must be a finite number > 0, got ", in.epsilon));
  }
  if (in.x.dtype() != in.dtype) in.x = cast_array(in.x, in.dtype);
  if (in.gamma.dtype() != in.dtype) in.gamma = cast_array(in.gamma, in.dtype);
  return in;
}

// An argument of gamma's shape (beta) in dtype dt.
Array layer_norm_like_gamma(Args& a, size_t i, const LayerNormInputs& in) {
  Array b = a.array(i);
  if (b.shape() != in.gamma.shape()) {
    a.value_error(i, error_message("must have gamma's shape ", shape_str(in.gamma.shape()),
                                   ", got ", shape_str(b.shape())));
  }
  return b.dtype() == in.dtype ? b : cast_array(b, in.dtype);
}

// Rows per task: a band of about 16K elements, and at most kLayerNormBands
// bands (the backward keeps 2 n partial sums per band, for dgamma and dbeta,
// added in band order: the band size depends on the shape alone, so the sums
// do not depend on the thread count).
constexpr int64_t kLayerNormBands = 64;
int64_t layer_norm_band_rows(int64_t rows, int64_t n) {
  const int64_t by_size = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  return std::max(by_size, (rows + kLayerNormBands - 1) / kLayerNormBands);
}

template <class T>
Value layer_norm_typed(const LayerNormInputs& in, const Array& beta) {
  Array y(in.dtype, in.x.shape());
  const int64_t band = layer_norm_band_rows(in.rows, in.n);
  const int64_t bands = (in.rows + band - 1) / band;
  const T* x = in.x.data<T>();
  const T* gamma = in.gamma.data<T>();
  const T* b = beta.data<T>();
  T* out = y.data<T>();
  parallel_for(bands, kLayerNormNs * static_cast<double>(band * in.n), [&](int64_t b0,
                                                                           int64_t b1) {
    for (int64_t k = b0; k < b1; ++k) {
      const int64_t r0 = k * band, r1 = std::min(in.rows, r0 + band);
      kl::layer_norm_forward<T>(x + r0 * in.n, gamma, b, r1 - r0, in.n, in.epsilon,
                                out + r0 * in.n);
    }
  });
  return y;
}

// layer_norm(x, gamma, beta, epsilon)
Value eval_layer_norm(Args& a) {
  const LayerNormInputs in = layer_norm_inputs(a, 0, 3);
  const Array beta = layer_norm_like_gamma(a, 2, in);
  if (in.dtype == DType::float64) return layer_norm_typed<double>(in, beta);
  return layer_norm_typed<float>(in, beta);
}

template <class T>
Value layer_norm_grad_typed(const LayerNormInputs& in, const Array& g) {
  Array dx(in.dtype, in.x.shape());
  const int64_t band = layer_norm_band_rows(in.rows, in.n);
  const int64_t bands = (in.rows + band - 1) / band;
  // One row of partial sums (dgamma then dbeta) per band.
  std::vector<double> part(static_cast<size_t>(bands * 2 * in.n), 0.0);
  const T* x = in.x.data<T>();
  const T* gp = g.data<T>();
  const T* gamma = in.gamma.data<T>();
  T* out = dx.data<T>();
  parallel_for(bands, 2 * kLayerNormNs * static_cast<double>(band * in.n), [&](int64_t b0,
                                                                               int64_t b1) {
    for (int64_t k = b0; k < b1; ++k) {
      const int64_t r0 = k * band, r1 = std::min(in.rows, r0 + band);
      double* s = part.data() + k * 2 * in.n;
      kl::layer_norm_backward<T>(gp + r0 * in.n, x + r0 * in.n, gamma, r1 - r0, in.n,
                                 in.epsilon, out + r0 * in.n, s, s + in.n);
    }
  });
  Array dgamma(in.dtype, in.gamma.shape()), dbeta(in.dtype, in.gamma.shape());
  T* pg = dgamma.data<T>();
  T* pb = dbeta.data<T>();
  for (int64_t c = 0; c < in.n; ++c) {
    double sg = 0.0, sb = 0.0;
    for (int64_t k = 0; k < bands; ++k) {
      sg += part[static_cast<size_t>(k * 2 * in.n + c)];
      sb += part[static_cast<size_t>(k * 2 * in.n + in.n + c)];
    }
    pg[c] = static_cast<T>(sg);
    pb[c] = static_cast<T>(sb);
  }
  return Value(List{Value(std::move(dx)), Value(std::move(dgamma)), Value(std::move(dbeta))});
}

// layer_norm_grad(g, x, gamma, epsilon)
Value eval_layer_norm_grad(Args& a) {
  const LayerNormInputs in = layer_norm_inputs(a, 1, 3);
  Array g;
  if (a[0].is_scalar()) {
    g = Array::full(in.dtype, in.x.shape(), a.number(0));
  } else {
    g = a.array(0);
    if (g.shape() != in.x.shape()) {
      throw std::invalid_argument(error_message("[", a.op(), "] g has shape ",
                                                shape_str(g.shape()), " but layer_norm's "
                                                "result has shape ", shape_str(in.x.shape())));
    }
    if (g.dtype() != in.dtype) g = cast_array(g, in.dtype);
  }
  if (in.dtype == DType::float64) return layer_norm_grad_typed<double>(in, g);
  return layer_norm_grad_typed<float>(in, g);
}

const bool registered_layer_norm = register_primitives({
    {.name = "layer_norm",
     .family = "nn",
     .params = {{"x"}, {"gamma"}, {"beta"}, opt("epsilon", Value(1e-3))},
     .help = "Layer normalization over x's last dimensions, those of gamma's shape: (x - "
             "mean) / sqrt(var + epsilon) * gamma + beta, with each row's mean and biased "
             "variance (Keras's LayerNormalization on its last axes), one pass over the rows; "
             "beta has gamma's shape. Differentiable in x, gamma and beta (one backward pass "
             "for all three).",
     .eval = eval_layer_norm,
     .ns_per_element = kLayerNormNs,
     .grads = {"common[0]", "common[1]", "common[2]", ""},
     .grad_common = "layer_norm_grad(g, x, gamma, epsilon)"},
    {.name = "layer_norm_grad",
     .family = "nn",
     .params = {{"g"}, {"x"}, {"gamma"}, opt("epsilon", Value(1e-3))},
     .help = "Backward of layer_norm: g is the cotangent of its result; returns list(dx, "
             "dgamma, dbeta).",
     .eval = eval_layer_norm_grad,
     .ns_per_element = 2 * kLayerNormNs},
});

// layer_norm_grad as an expression (second-order gradients), over the rows
// of x flattened to (rows, size(gamma)): with xhat = (x - mean) * rstd and
// gy = g * gamma, dx = rstd (gy - mean(gy) - xhat mean(gy xhat)),
// dgamma = the rows' sum of g xhat, dbeta = the rows' sum of g.
const bool expanded_layer_norm = register_gradient_expansions({
    {"layer_norm_grad",
     "block(define(n, size(gamma)),"
     "      define(x2, reshape(x, list(-1, n))),"
     "      define(g2, reshape(g, list(-1, n))),"
     "      define(xc, x2 - mean(x2, axis=-1, keepdims=true)),"
     "      define(rstd, 1.0 / sqrt(mean(xc * xc, axis=-1, keepdims=true) + epsilon)),"
     "      define(xhat, xc * rstd),"
     "      define(gy, g2 * reshape(gamma, list(1, n))),"
     "      define(dx, rstd * (gy - mean(gy, axis=-1, keepdims=true)"
     "                         - xhat * mean(gy * xhat, axis=-1, keepdims=true))),"
     "      list(reshape(dx, shape(x)), reshape(sum(g2 * xhat, axis=0), shape(gamma)),"
     "           reshape(sum(g2, axis=0), shape(gamma))))"},
});

}  // namespace

}  // namespace tessera
