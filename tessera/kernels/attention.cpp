#include "tessera/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/kernels/recurrent.hpp"
#include "tessera/kernels/simd.hpp"
#include "tessera/kernels/vmath.hpp"

namespace tessera::kernels {

namespace {

// Elements of a band's score block: 128 KB of float32 (the scores and, in the
// backward, their cotangents stay in L2 between the passes and products).
constexpr int64_t kAttnBandElems = 32768;

// Query rows per band: as many as fit kAttnBandElems with all tk keys, at
// least 16 (a product of fewer rows runs far below the BLAS's speed).
int64_t attn_band_rows(const AttentionShape& s) {
  const int64_t rows = kAttnBandElems / std::max<int64_t>(s.tk, 1);
  return std::clamp<int64_t>(rows, 16, std::max<int64_t>(s.tq, 1));
}

// Keys that rows [r0, r1) see: all, or with the causal mask those up to r1 - 1.
int64_t attn_band_keys(const AttentionShape& s, int64_t r1) {
  return s.causal ? std::min(s.tk, r1) : s.tk;
}

// Partial sums (maxima) of kAttnLanes interleaved lanes, combined pairwise at
// the end: the loops vectorise at every SIMD level with the same order of
// operations, so the bits do not depend on the level.
constexpr int64_t kAttnLanes = 16;

template <class T>
[[gnu::always_inline]] inline T attn_combine(T* part, bool max) {
  for (int64_t w = kAttnLanes / 2; w > 0; w /= 2) {
    for (int64_t l = 0; l < w; ++l) {
      part[l] = max ? std::max(part[l], part[l + w]) : part[l] + part[l + w];
    }
  }
  return part[0];
}

// Pass one of the softmax of a band's rows: scores scaled, hidden keys (the
// causal mask; row i of the band is query first + i) set to -inf, each row
// shifted by its maximum (NaNs passed over; by 0 when it is not finite).
template <class T>
struct AttnShiftRows {
  [[gnu::always_inline]] static void run(T* p, int64_t rows, int64_t cols, int64_t first,
                                         bool causal, T scale) {
    for (int64_t i = 0; i < rows; ++i) {
      T* row = p + i * cols;
      const int64_t n = causal ? std::min(cols, first + i + 1) : cols;
      T part[kAttnLanes];
      std::fill(part, part + kAttnLanes, -std::numeric_limits<T>::infinity());
      for (int64_t j = 0; j < n; ++j) row[j] *= scale;
      int64_t j = 0;
      for (; j + kAttnLanes <= n; j += kAttnLanes) {
        for (int64_t l = 0; l < kAttnLanes; ++l) part[l] = std::max(part[l], row[j + l]);
      }
      for (int64_t l = 0; j + l < n; ++l) part[l] = std::max(part[l], row[j + l]);
      T m = attn_combine(part, true);
      if (!std::isfinite(m)) m = T(0);
      for (int64_t c = 0; c < n; ++c) row[c] -= m;
      for (int64_t c = n; c < cols; ++c) row[c] = -std::numeric_limits<T>::infinity();
    }
  }
};

// Pass two: each row of exponentials divided by its sum.
template <class T>
struct AttnNormaliseRows {
  [[gnu::always_inline]] static void run(T* p, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
      T* row = p + i * cols;
      T part[kAttnLanes] = {};
      int64_t j = 0;
      for (; j + kAttnLanes <= cols; j += kAttnLanes) {
        for (int64_t l = 0; l < kAttnLanes; ++l) part[l] += row[j + l];
      }
      for (int64_t l = 0; j + l < cols; ++l) part[l] += row[j + l];
      const T inv = T(1) / attn_combine(part, false);
      for (int64_t c = 0; c < cols; ++c) row[c] *= inv;
    }
  }
};

// The softmax backward of a band: dp becomes P * (dP - sum(dP * P)) * scale.
template <class T>
struct AttnSoftmaxGradRows {
  [[gnu::always_inline]] static void run(const T* p, T* dp, int64_t rows, int64_t cols,
                                         T scale) {
    for (int64_t i = 0; i < rows; ++i) {
      const T* pr = p + i * cols;
      T* dr = dp + i * cols;
      T part[kAttnLanes] = {};
      int64_t j = 0;
      for (; j + kAttnLanes <= cols; j += kAttnLanes) {
        for (int64_t l = 0; l < kAttnLanes; ++l) part[l] += dr[j + l] * pr[j + l];
      }
      for (int64_t l = 0; j + l < cols; ++l) part[l] += dr[j + l] * pr[j + l];
      const T t = attn_combine(part, false);
      for (int64_t c = 0; c < cols; ++c) dr[c] = pr[c] * (dr[c] - t) * scale;
    }
  }
};

inline void attn_exp(float* x, int64_t n) { vexp(x, x, n); }
inline void attn_exp(double* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j]);
}

// The probabilities of rows [r0, r1) into p (rows x cols, row-major): the
// scores q_r @ k^T scaled, softmax over each row's visible keys (shifted by
// the row's maximum, or by 0 when that is not finite, as softmax does), 0 at
// keys the causal mask hides.
template <class T>
void attn_probs(const AttentionShape& s, T scale, const T* q, const T* k, int64_t r0, int64_t r1,
                int64_t cols, T* p) {
  const int64_t rows = r1 - r0;
  rnn_matmul(false, true, rows, cols, s.d, q + r0 * s.ldq, s.ldq, k, s.ldk, T(0), p, cols);
  simd_call<AttnShiftRows<T>>(p, rows, cols, r0, s.causal, scale);
  attn_exp(p, rows * cols);
  simd_call<AttnNormaliseRows<T>>(p, rows, cols);
}

}  // namespace

template <class T>
void attention_forward(const AttentionShape& s, T scale, const T* q, const T* k, const T* v,
                       T* out, T* probs) {
  const int64_t band = attn_band_rows(s);
  std::vector<T> buf(probs != nullptr ? 0 : static_cast<size_t>(band * s.tk));
  for (int64_t r0 = 0; r0 < s.tq; r0 += band) {
    const int64_t r1 = std::min(s.tq, r0 + band), cols = attn_band_keys(s, r1);
    T* p = probs != nullptr ? probs + r0 * s.tk : buf.data();
    attn_probs(s, scale, q, k, r0, r1, cols, p);
    rnn_matmul(false, false, r1 - r0, s.dv, cols, p, cols, v, s.ldv, T(0), out + r0 * s.dv,
               s.dv);
  }
}

template <class T>
void attention_backward(const AttentionShape& s, T scale, const T* q, const T* k, const T* v,
                        const T* g, T* dq, T* dk, T* dv, const T* probs) {
  const int64_t band = attn_band_rows(s);
  std::vector<T> buf(probs != nullptr ? 0 : static_cast<size_t>(band * s.tk));
  std::vector<T> dp(static_cast<size_t>(band * s.tk));
  std::fill(dk, dk + s.tk * s.d, T(0));
  std::fill(dv, dv + s.tk * s.dv, T(0));
  for (int64_t r0 = 0; r0 < s.tq; r0 += band) {
    const int64_t r1 = std::min(s.tq, r0 + band), rows = r1 - r0, cols = attn_band_keys(s, r1);
    const T* p = probs != nullptr ? probs + r0 * s.tk : buf.data();
    if (probs == nullptr) attn_probs(s, scale, q, k, r0, r1, cols, buf.data());
    const T* gr = g + r0 * s.ldg;
    // dP = g_r @ v^T; dS = P * (dP - sum(dP * P)) * scale, row by row.
    rnn_matmul(false, true, rows, cols, s.dv, gr, s.ldg, v, s.ldv, T(0), dp.data(), cols);
    simd_call<AttnSoftmaxGradRows<T>>(p, dp.data(), rows, cols, scale);
    rnn_matmul(true, false, cols, s.dv, rows, p, cols, gr, s.ldg, T(1), dv, s.dv);
    rnn_matmul(false, false, rows, s.d, cols, dp.data(), cols, k, s.ldk, T(0), dq + r0 * s.d, s.d);
    rnn_matmul(true, false, cols, s.d, rows, dp.data(), cols, q + r0 * s.ldq, s.ldq, T(1), dk,
               s.d);
  }
}

double attention_block_ns(const AttentionShape& s) {
  const double scores = static_cast<double>(s.tq) * static_cast<double>(s.tk);
  // Two products of 2 d (or dv) flops per score at ~20 flops/ns, ~3 ns per score of softmax.
  return scores * (0.1 * static_cast<double>(s.d + s.dv) + 3.0) + 1000.0;
}

template void attention_forward<float>(const AttentionShape&, float, const float*, const float*,
                                       const float*, float*, float*);
template void attention_forward<double>(const AttentionShape&, double, const double*,
                                        const double*, const double*, double*, double*);
template void attention_backward<float>(const AttentionShape&, float, const float*, const float*,
                                        const float*, const float*, float*, float*, float*,
                                        const float*);
template void attention_backward<double>(const AttentionShape&, double, const double*,
                                         const double*, const double*, const double*, double*,
                                         double*, double*, const double*);

}  // namespace tessera::kernels
