// Layer normalization kernels (see layer_norm.hpp).
//
// A row's sums accumulate in kLnLanes double lanes (element c in lane c %
// kLnLanes), added in lane order at the end: an order fixed by n alone that the
// compiler can vectorize (a single running sum would be a serial chain). The
// loops are compiled for AVX-512 and AVX2 as well, chosen at load time (the
// arithmetic, and so the bits, are the same).
#include "tessera/kernels/layer_norm.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera::kernels {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_LAYER_NORM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_LAYER_NORM_CLONES
#endif

constexpr int64_t kLnLanes = 8;

// Eight doubles (one AVX-512 register, two AVX2 ones, four SSE2 ones: the
// same lanes and so the same bits on each).
typedef double LnLanes __attribute__((vector_size(kLnLanes * sizeof(double))));
typedef float LnFloats __attribute__((vector_size(kLnLanes * sizeof(float))));

// (Vectors go by reference: by value, their ABI would differ between the
// clones.)
[[gnu::always_inline]] inline void ln_load(const double* p, LnLanes& v) {
  std::memcpy(&v, p, sizeof v);
}
[[gnu::always_inline]] inline void ln_load(const float* p, LnLanes& v) {
  LnFloats f;
  std::memcpy(&f, p, sizeof f);
  v = __builtin_convertvector(f, LnLanes);
}

// The lanes of v added in lane order.
[[gnu::always_inline]] inline double ln_total(const LnLanes& v) {
  double s = 0.0;
  for (int64_t j = 0; j < kLnLanes; ++j) s += v[j];
  return s;
}

struct LnRowStats {
  double mean, rstd;
};

// A row's mean and 1 / sqrt(variance + epsilon) from the sums s1 and s2 of
// its deviations d = x - shift and their squares (one pass; shifting by the
// row's first element keeps the variance's subtraction from cancelling: the
// mean of d is of the order of the spread).
[[gnu::always_inline]] inline LnRowStats ln_stats_of(double shift, double s1, double s2,
                                                     int64_t n, double epsilon) {
  const double inv_n = 1.0 / static_cast<double>(n);
  const double m1 = s1 * inv_n;
  const double var = std::max(0.0, s2 * inv_n - m1 * m1);
  return {shift + m1, 1.0 / std::sqrt(var + epsilon)};
}

template <class T>
[[gnu::always_inline]] inline void ln_forward_rows(const T* __restrict x, const T* __restrict gamma,
                                                   const T* __restrict beta, int64_t rows,
                                                   int64_t n, double epsilon, T* __restrict y) {
  for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
    const double shift = static_cast<double>(x[0]);
    LnLanes l1 = {}, l2 = {};
    int64_t c = 0;
    for (; c + kLnLanes <= n; c += kLnLanes) {
      LnLanes d;
      ln_load(x + c, d);
      d -= shift;
      l1 += d;
      l2 += d * d;
    }
    double s1 = ln_total(l1), s2 = ln_total(l2);
    for (; c < n; ++c) {
      const double d = static_cast<double>(x[c]) - shift;
      s1 += d;
      s2 += d * d;
    }
    const LnRowStats st = ln_stats_of(shift, s1, s2, n, epsilon);
    const T mean = static_cast<T>(st.mean), rstd = static_cast<T>(st.rstd);
    for (int64_t c = 0; c < n; ++c) y[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
  }
}

// dx = rstd * (g gamma - mean(g gamma) - x_hat mean(g gamma x_hat)), the
// gradient of x through the row's mean and variance; the four row sums it
// needs (of d, d^2, g gamma and g gamma d, d = x - shift) in one pass, dx
// and the sums of dgamma and dbeta in a second.
template <class T>
[[gnu::always_inline]] inline void ln_backward_rows(const T* __restrict g, const T* __restrict x,
                                                    const T* __restrict gamma, int64_t rows,
                                                    int64_t n, double epsilon, T* __restrict dx,
                                                    double* __restrict dgamma,
                                                    double* __restrict dbeta) {
  const double inv_n = 1.0 / static_cast<double>(n);
  for (int64_t r = 0; r < rows; ++r, g += n, x += n, dx += n) {
    const double shift = static_cast<double>(x[0]);
    LnLanes l1 = {}, l2 = {}, l3 = {}, l4 = {};
    int64_t c = 0;
    for (; c + kLnLanes <= n; c += kLnLanes) {
      LnLanes d, gy, gm;
      ln_load(x + c, d);
      ln_load(g + c, gy);
      ln_load(gamma + c, gm);
      d -= shift;
      gy *= gm;
      l1 += d;
      l2 += d * d;
      l3 += gy;
      l4 += gy * d;
    }
    double s1 = ln_total(l1), s2 = ln_total(l2), s3 = ln_total(l3), s4 = ln_total(l4);
    for (; c < n; ++c) {
      const double d = static_cast<double>(x[c]) - shift;
      const double gy = static_cast<double>(g[c]) * static_cast<double>(gamma[c]);
      s1 += d;
      s2 += d * d;
      s3 += gy;
      s4 += gy * d;
    }
    const LnRowStats st = ln_stats_of(shift, s1, s2, n, epsilon);
    // mean(g gamma x_hat) = rstd (mean(g gamma d) - mean(d) mean(g gamma))
    const double a = s3 * inv_n;
    const double b = st.rstd * (s4 * inv_n - s1 * inv_n * a);
    const T mean = static_cast<T>(st.mean), rstd = static_cast<T>(st.rstd);
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
