// Layer normalization kernels (see layer_norm.hpp).
//
// A row's sums accumulate in kLnLanes double lanes (element c in lane c %
// kLnLanes), added in lane order at the end: an order fixed by n alone that the
// compiler can vectorize (a single running sum would be a serial chain). The
// loops are compiled for AVX-512 and AVX2 as well, chosen at load time (the
// arithmetic, and so the bits, are the same).
#include "tessera/kernels/layer_norm.hpp"

#include <cmath>

namespace tessera::kernels {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_LAYER_NORM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_LAYER_NORM_CLONES
#endif

constexpr int64_t kLnLanes = 8;

// The sum of f(c) for c < n in the lane order above.
template <class F>
[[gnu::always_inline]] inline double ln_lane_sum(int64_t n, F f) {
  double lane[kLnLanes] = {};
  int64_t c = 0;
  for (; c + kLnLanes <= n; c += kLnLanes) {
    for (int64_t j = 0; j < kLnLanes; ++j) lane[j] += f(c + j);
  }
  double s = 0.0;
  for (int64_t j = 0; j < kLnLanes; ++j) s += lane[j];
  for (; c < n; ++c) s += f(c);
  return s;
}

struct LnRowStats {
  double mean, rstd;
};

// Mean and 1 / sqrt(variance + epsilon) of a row, the variance as the mean
// of the squared deviations from the mean (two passes, as the composed
// x - mean(x) and mean(c * c) compute it).
template <class T>
[[gnu::always_inline]] inline LnRowStats ln_row_stats(const T* __restrict x, int64_t n,
                                                 double epsilon) {
  const double inv_n = 1.0 / static_cast<double>(n);
  const double mean = ln_lane_sum(n, [&](int64_t c) { return static_cast<double>(x[c]); }) * inv_n;
  const double var = ln_lane_sum(n, [&](int64_t c) {
                       const double d = static_cast<double>(x[c]) - mean;
                       return d * d;
                     }) * inv_n;
  return {mean, 1.0 / std::sqrt(var + epsilon)};
}

template <class T>
[[gnu::always_inline]] inline void ln_forward_rows(const T* __restrict x, const T* __restrict gamma,
                                                const T* __restrict beta, int64_t rows,
                                                int64_t n, double epsilon, T* __restrict y) {
  for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
    const LnRowStats st = ln_row_stats(x, n, epsilon);
    const T mean = static_cast<T>(st.mean), rstd = static_cast<T>(st.rstd);
    for (int64_t c = 0; c < n; ++c) y[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
  }
}

// dx = rstd * (g gamma - mean(g gamma) - x_hat mean(g gamma x_hat)), the
// gradient of x through the row's mean and variance.
template <class T>
[[gnu::always_inline]] inline void ln_backward_rows(const T* __restrict g, const T* __restrict x,
                                                 const T* __restrict gamma, int64_t rows,
                                                 int64_t n, double epsilon, T* __restrict dx,
                                                 double* __restrict dgamma,
                                                 double* __restrict dbeta) {
  const double inv_n = 1.0 / static_cast<double>(n);
  for (int64_t r = 0; r < rows; ++r, g += n, x += n, dx += n) {
    const LnRowStats st = ln_row_stats(x, n, epsilon);
    const T mean = static_cast<T>(st.mean), rstd = static_cast<T>(st.rstd);
    const double a = ln_lane_sum(n, [&](int64_t c) {
                       return static_cast<double>(g[c] * gamma[c]);
                     }) * inv_n;
    const double b = ln_lane_sum(n, [&](int64_t c) {
                       return static_cast<double>(g[c] * gamma[c] * ((x[c] - mean) * rstd));
                     }) * inv_n;
    const T ta = static_cast<T>(a), tb = static_cast<T>(b);
    for (int64_t c = 0; c < n; ++c) {
      const T xh = (x[c] - mean) * rstd;
      dx[c] = rstd * (g[c] * gamma[c] - ta - xh * tb);
      dgamma[c] += static_cast<double>(g[c] * xh);
      dbeta[c] += static_cast<double>(g[c]);
    }
  }
}

TESSERA_LAYER_NORM_CLONES void layer_norm_forward_of(const float* x, const float* gamma,
                                                     const float* beta, int64_t rows, int64_t n,
                                                     double epsilon, float* y) {
  ln_forward_rows(x, gamma, beta, rows, n, epsilon, y);
}
TESSERA_LAYER_NORM_CLONES void layer_norm_forward_of(const double* x, const double* gamma,
                                                     const double* beta, int64_t rows, int64_t n,
                                                     double epsilon, double* y) {
  ln_forward_rows(x, gamma, beta, rows, n, epsilon, y);
}
TESSERA_LAYER_NORM_CLONES void layer_norm_backward_of(const float* g, const float* x,
                                                      const float* gamma, int64_t rows,
                                                      int64_t n, double epsilon, float* dx,
                                                      double* dgamma, double* dbeta) {
  ln_backward_rows(g, x, gamma, rows, n, epsilon, dx, dgamma, dbeta);
}
TESSERA_LAYER_NORM_CLONES void layer_norm_backward_of(const double* g, const double* x,
                                                      const double* gamma, int64_t rows,
                                                      int64_t n, double epsilon, double* dx,
                                                      double* dgamma, double* dbeta) {
  ln_backward_rows(g, x, gamma, rows, n, epsilon, dx, dgamma, dbeta);
}

}  // namespace

template <class T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, int64_t rows, int64_t n,
                        double epsilon, T* y) {
  layer_norm_forward_of(x, gamma, beta, rows, n, epsilon, y);
}

template <class T>
void layer_norm_backward(const T* g, const T* x, const T* gamma, int64_t rows, int64_t n,
                         double epsilon, T* dx, double* dgamma, double* dbeta) {
  layer_norm_backward_of(g, x, gamma, rows, n, epsilon, dx, dgamma, dbeta);
}

template void layer_norm_forward<float>(const float*, const float*, const float*, int64_t,
                                        int64_t, double, float*);
template void layer_norm_forward<double>(const double*, const double*, const double*, int64_t,
                                         int64_t, double, double*);
template void layer_norm_backward<float>(const float*, const float*, const float*, int64_t,
                                         int64_t, double, float*, double*, double*);
template void layer_norm_backward<double>(const double*, const double*, const double*, int64_t,
                                          int64_t, double, double*, double*, double*);

}  // namespace tessera::kernels
