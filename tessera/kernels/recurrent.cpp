#include "tessera/kernels/recurrent.hpp"

#include <cblas.h>
#include <dnnl.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tessera/kernels/blis_pool.hpp"
#include "tessera/kernels/one_omp_thread.hpp"
#include "tessera/kernels/simd.hpp"
#include "tessera/kernels/vmath.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
// The LSTM's gates in one pass per row on AVX-512 (lstm_step_row_avx512).
#define TESSERA_RNN_FUSED_GATES 1
#endif

namespace tessera::kernels {

int rnn_gates(RnnCell cell) {
  switch (cell) {
    case RnnCell::simple: return 1;
    case RnnCell::lstm: return 4;
    case RnnCell::gru:
    case RnnCell::gru_before: return 3;
  }
  return 1;
}

bool rnn_grads_in_place(RnnCell cell) {
  return cell == RnnCell::simple || cell == RnnCell::lstm;
}

int rnn_act_width(RnnCell cell) {
  switch (cell) {
    case RnnCell::simple: return 1;
    case RnnCell::lstm: return 5;  // i, f, c~, o, tanh(c)
    case RnnCell::gru: return 4;   // z, r, h~, the recurrent part of h~ (with its bias)
    case RnnCell::gru_before: return 4;  // z, r, h~, r * h
  }
  return 1;
}

namespace {

// C = beta C for an empty product (k = 0): BLAS refuses its leading
// dimensions then.
template <class T>
bool empty_product(int64_t m, int64_t n, int64_t k, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k > 0) return false;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  }
  return true;
}

// C = op(A) op(B) + beta C, row-major.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (empty_product(m, n, k, beta, c, ldc)) return;
  if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) ==
      dnnl_success) {
    return;
  }
  BlisCall in_blis("rnn_sequence");
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (empty_product(m, n, k, beta, c, ldc)) return;
  BlisCall in_blis("rnn_sequence");
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// The pointwise passes of sig_tanh, compiled for the host's SIMD level
// (simd.hpp), branch-free so that they vectorise.
template <class T>
struct RnnActArgument {  // t = -s |x|
  [[gnu::always_inline]] static void run(const T* x, T* t, int64_t n, T s) {
    for (int64_t j = 0; j < n; ++j) t[j] = -s * std::fabs(x[j]);
  }
};
template <class T>
struct RnnActArgumentAdding {  // x += y, then t = -s |x|
  [[gnu::always_inline]] static void run(T* __restrict x, const T* __restrict y,
                                         T* __restrict t, int64_t n, T s) {
    for (int64_t j = 0; j < n; ++j) {
      const T v = x[j] + y[j];
      x[j] = v;
      t[j] = -s * std::fabs(v);
    }
  }
};
template <class T>
struct RnnSigmoidFromExpm1 {  // (x >= 0 ? 1 : 1 + m) / (2 + m)
  [[gnu::always_inline]] static void run(const T* x, const T* m, T* y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const T negative = static_cast<T>(x[j] < T(0));
      y[j] = (T(1) + negative * m[j]) / (T(2) + m[j]);
    }
  }
};
template <class T>
struct RnnTanhFromExpm1 {  // sign(x) * -m / (2 + m)
  [[gnu::always_inline]] static void run(const T* x, const T* m, T* y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = std::copysign(-m[j] / (T(2) + m[j]), x[j]);
  }
};

// y = sigmoid(x), or tanh(x) for columns in [tanh_begin, tanh_end), over a
// (rows, cols) block; one vector expm1 over the block: with m = expm1(-s |x|)
// (s = 1 for sigmoid, 2 for tanh), sigmoid(x) = (x >= 0 ? 1 : 1 + m) / (2 + m)
// and tanh(|x|) = -m / (2 + m), both without cancellation. tmp holds
// rows * cols values. With `add` (row stride ldadd), x += add first, in the
// same pass.
template <class T>
void sig_tanh(T* x, int64_t ldx, T* y, int64_t ldy, int64_t rows, int64_t cols,
              int64_t tanh_begin, int64_t tanh_end, T* tmp, const T* add = nullptr,
              int64_t ldadd = 0) {
  // The column segments: sigmoid, tanh, sigmoid (some empty).
  const int64_t edges[4] = {0, tanh_begin, tanh_end, cols};
  for (int64_t r = 0; r < rows; ++r) {
    for (int s = 0; s < 3; ++s) {
      const int64_t j0 = edges[s], n = edges[s + 1] - j0;
      if (n <= 0) continue;
      if (add) {
        simd_call<RnnActArgumentAdding<T>>(x + r * ldx + j0, add + r * ldadd + j0,
                                           tmp + r * cols + j0, n, T(s == 1 ? 2 : 1));
      } else {
        simd_call<RnnActArgument<T>>(static_cast<const T*>(x + r * ldx + j0),
                                     tmp + r * cols + j0, n, T(s == 1 ? 2 : 1));
      }
    }
  }
  vmath(VecFn::expm1, tmp, tmp, rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int s = 0; s < 3; ++s) {
      const int64_t j0 = edges[s], n = edges[s + 1] - j0;
      if (n <= 0) continue;
      const T* xs = x + r * ldx + j0;
      const T* ms = tmp + r * cols + j0;
      T* ys = y + r * ldy + j0;
      if (s == 1) {
        simd_call<RnnTanhFromExpm1<T>>(xs, ms, ys, n);
      } else {
        simd_call<RnnSigmoidFromExpm1<T>>(xs, ms, ys, n);
      }
    }
  }
}

// The LSTM step's new cell state from the gates i, f, c~ (H each) and the
// previous c: cn = f cp + i c~, with t = -2 |cn|, the argument of tanh(cn)'s
// expm1 (sig_tanh).
template <class T>
struct RnnLstmCellState {
  [[gnu::always_inline]] static void run(const T* __restrict ig, const T* __restrict fg,
                                         const T* __restrict cg, const T* __restrict cp,
                                         T* __restrict cn, T* __restrict t, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const T c = fg[j] * cp[j] + ig[j] * cg[j];
      cn[j] = c;
      t[j] = T(-2) * std::fabs(c);
    }
  }
};

// Then tanh(cn) from m = expm1(-2 |cn|) and the new h = o tanh(cn).
template <class T>
struct RnnLstmCellOutput {
  [[gnu::always_inline]] static void run(const T* __restrict cn, const T* __restrict m,
                                         const T* __restrict og, T* __restrict tc,
                                         T* __restrict hn, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const T v = std::copysign(-m[j] / (T(2) + m[j]), cn[j]);
      tc[j] = v;
      hn[j] = og[j] * v;
    }
  }
};

// The pointwise backward of one row of an LSTM step (SIMD, simd.hpp), for a
// kept row: the gates i, f, c~, o and tanh(c) (H each), go the cotangent of
// this step's output, cp the previous c; dh, dc the cotangents carried from
// the next step. Writes the gate inputs' cotangents di, df, dg, dout; the new
// h's cotangent is g = dh + go, the new c's dc; then dc becomes the previous
// c's and dh is zeroed for the recurrent product to add into.
template <class T>
struct RnnLstmCellGrad {
  [[gnu::always_inline]] static void run(const T* __restrict ig, const T* __restrict fg,
                                         const T* __restrict cg, const T* __restrict og,
                                         const T* __restrict tc, const T* __restrict go,
                                         const T* __restrict cp, T* __restrict dh,
                                         T* __restrict dc, T* __restrict di, T* __restrict df,
                                         T* __restrict dg, T* __restrict dout, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const T g = dh[j] + go[j];
      const T dct = dc[j] + g * og[j] * (T(1) - tc[j] * tc[j]);
      di[j] = dct * cg[j] * ig[j] * (T(1) - ig[j]);
      df[j] = dct * cp[j] * fg[j] * (T(1) - fg[j]);
      dg[j] = dct * ig[j] * (T(1) - cg[j] * cg[j]);
      dout[j] = g * tc[j] * og[j] * (T(1) - og[j]);
      dc[j] = dct * fg[j];
      dh[j] = T(0);
    }
  }
};

// The same for a GRU step (reset after): the gates z, r, h~ and hu, the
// candidate's block of h U + rb; hp the previous h. Writes the gate inputs'
// cotangents dz, dr, dhh, those of h U + rb qz, qr, qh, and adds g z to dh.
template <class T>
struct RnnGruCellGrad {
  [[gnu::always_inline]] static void run(const T* __restrict zg, const T* __restrict rg,
                                         const T* __restrict hh, const T* __restrict hu,
                                         const T* __restrict g, const T* __restrict hp,
                                         T* __restrict dz, T* __restrict dr, T* __restrict dhh,
                                         T* __restrict qz, T* __restrict qr, T* __restrict qh,
                                         T* __restrict dh, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const T dzg = g[j] * (hp[j] - hh[j]) * zg[j] * (T(1) - zg[j]);
      const T dah = g[j] * (T(1) - zg[j]) * (T(1) - hh[j] * hh[j]);
      const T drg = dah * hu[j] * rg[j] * (T(1) - rg[j]);
      dz[j] = dzg;
      qz[j] = dzg;
      dr[j] = drg;
      qr[j] = drg;
      dhh[j] = dah;
      qh[j] = dah * rg[j];
      dh[j] += g[j] * zg[j];
    }
  }
};

// The recurrent products (a block of at most 16 rows against U or U^T, once
// per step) by a kernel of their own on AVX-512 machines: the right operand
// packed once per sequence in panels of 32 columns, each (k, 32) contiguous,
// so that a panel stays in L1 while every row block reads it: 2.4 us for
// 16 x 256 x 64 (two FMAs a cycle) against oneDNN's sgemm's 2.7-4 us.
constexpr int64_t kPanel = 32;
constexpr int kPanelRows = 8;

// C rows [0, kRows) x 32 columns = A (kRows, k) times one panel (+ C when
// accumulating). Each element sums its k products in order with FMA, the same
// whatever kRows: a row's bits do not depend on its neighbours.
template <int kRows>
__attribute__((target("avx512f"))) void panel_tile(const float* a, int64_t lda,
                                                   const float* panel, int64_t k, bool accumulate,
                                                   float* c, int64_t ldc) {
  __m512 acc[kRows][2];
  for (int r = 0; r < kRows; ++r) {
    acc[r][0] = accumulate ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < k; ++i) {
    const __m512 b0 = _mm512_loadu_ps(panel + i * kPanel);
    const __m512 b1 = _mm512_loadu_ps(panel + i * kPanel + 16);
    // unrolled, so that the accumulators stay in registers (GCC at -O2 keeps
    // them in memory: 3x slower)
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + i]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
  }
}

using PanelTile = void (*)(const float*, int64_t, const float*, int64_t, bool, float*, int64_t);
constexpr PanelTile kPanelTiles[kPanelRows] = {panel_tile<1>, panel_tile<2>, panel_tile<3>,
                                               panel_tile<4>, panel_tile<5>, panel_tile<6>,
                                               panel_tile<7>, panel_tile<8>};

// A right operand B (k, n) of the recurrent products, packed when the panel
// kernel runs (float32, AVX-512, n a multiple of 32), else read as it is.
template <class T>
class RecurrentOperand {
 public:
  // B = U (H, G H) when !transposed, else U^T (G H, H), from U's rows.
  RecurrentOperand(const T* u, int64_t units, int64_t gh, bool transposed)
      : k_(transposed ? gh : units), n_(transposed ? units : gh) {
    packed_ = std::is_same_v<T, float> && units % kPanel == 0 &&
              active_simd() == SimdLevel::avx512;
    if (packed_) {
      panels_.resize(k_ * n_);
      for (int64_t j0 = 0; j0 < n_; j0 += kPanel) {
        float* panel = panels_.data() + j0 * k_;
        for (int64_t i = 0; i < k_; ++i) {
          for (int64_t j = 0; j < kPanel; ++j) {
            panel[i * kPanel + j] = static_cast<float>(
                transposed ? u[(j0 + j) * gh + i] : u[i * gh + j0 + j]);
          }
        }
      }
      return;
    }
    if (!transposed) {
      b_ = u;
      return;
    }
    // U^T row-major: the products with it as the right operand, untransposed,
    // run about four times faster than with U read transposed (oneDNN).
    bt_.resize(k_ * n_);
    for (int64_t r = 0; r < units; ++r) {
      for (int64_t j = 0; j < gh; ++j) bt_[j * units + r] = u[r * gh + j];
    }
    b_ = bt_.data();
  }

  // Whether the products run the panel kernel (float32 on AVX-512).
  bool packed() const { return packed_; }

  // C = A B[i0 : i0 + k, j0 : j0 + n] (+ C when accumulating): A (rows, k)
  // with row stride lda; j0, n multiples of the units.
  void product(int64_t rows, int64_t i0, int64_t k, int64_t j0, int64_t n, const T* a,
               int64_t lda, bool accumulate, T* c, int64_t ldc) const {
    if (!packed_) {
      gemm(false, false, rows, n, k, a, lda, b_ + i0 * n_ + j0, n_, accumulate ? T(1) : T(0), c,
           ldc);
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t j = j0; j < j0 + n; j += kPanel) {
        const float* panel = panels_.data() + j * k_ + i0 * kPanel;
        for (int64_t r = 0; r < rows; r += kPanelRows) {
          const int64_t m = std::min<int64_t>(kPanelRows, rows - r);
          kPanelTiles[m - 1](a + r * lda, lda, panel, k, accumulate, c + r * ldc + (j - j0), ldc);
        }
      }
    }
  }

 private:
  int64_t k_, n_;
  bool packed_ = false;
  const T* b_ = nullptr;
  std::vector<T> bt_;
  std::vector<float> panels_;
};

#ifdef TESSERA_RNN_FUSED_GATES
// GCC 12's AVX-512 intrinsics pass an undefined vector as the unused merge
// operand of their unmasked forms, which -Wmaybe-uninitialized reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The value of y with the sign of x (std::copysign).
__attribute__((target("avx512f"))) inline __m512 copysign_ps(__m512 y, __m512 x) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  // the bits of y where the mask has them, of x elsewhere (0xca: a ? b : c)
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      magnitude, _mm512_castps_si512(y), _mm512_castps_si512(x), 0xca));
}

// expm1(t) for t <= 0 (or NaN), inline so that the gates keep their values in
// registers (a call to libmvec's spills them all): t = n ln 2 + r with
// |r| <= ln 2 / 2, expm1(r) by its Taylor polynomial to r^8 (truncation below
// 1e-10 relative), then expm1(t) = 2^n expm1(r) + (2^n - 1), both terms
// exact scalings and one rounding; -1 for t below -104, NaN stays NaN. (The
// LSTM's outputs through it are as close to float64's as through libmvec's
// expm1: tests/python/test_nn_rnn_fused.py.)
[[gnu::always_inline]] __attribute__((target("avx512f"))) inline __m512 expm1_nonpositive(
    __m512 t) {
  t = _mm512_max_ps(_mm512_set1_ps(-104.0f), t);  // NaN (second operand) passes through
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), t);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 q = _mm512_set1_ps(1.0f / 40320.0f);
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 5040.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 720.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 120.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 24.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 6.0f));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
  const __m512 em = _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r);  // expm1(r)
  const __m512 scale_minus_one =
      _mm512_sub_ps(_mm512_scalef_ps(_mm512_set1_ps(1.0f), n), _mm512_set1_ps(1.0f));
  return _mm512_add_ps(_mm512_scalef_ps(em, n), scale_minus_one);
}

// tanh(x) from m = expm1(-2 |x|), as RnnTanhFromExpm1: sign(x) * -m / (2 + m).
__attribute__((target("avx512f"))) inline __m512 tanh_from_expm1(__m512 x, __m512 m) {
  const __m512 negm = _mm512_sub_ps(_mm512_setzero_ps(), m);
  return copysign_ps(_mm512_div_ps(negm, _mm512_add_ps(_mm512_set1_ps(2.0f), m)), x);
}

// One row of an LSTM step on AVX-512, 16 units at a time with every value in
// registers: the gates from z = h U and the step's input projection xw (G H
// each), their activations, the new cell state, tanh(c) and h. The formulas
// of sig_tanh, RnnLstmCellState and RnnLstmCellOutput (this file compiles
// without FMA contraction: the same roundings) with expm1_nonpositive for
// libmvec's expm1 (a few ulp apart); one pass over the row instead of six.
__attribute__((target("avx512f"))) void lstm_step_row_avx512(const float* z, const float* xw,
                                                            const float* cp, float* a,
                                                            float* cn, float* hn, int64_t h) {
  const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
  for (int64_t j = 0; j < h; j += 16) {
    __m512 g[4];
    for (int q = 0; q < 4; ++q) {
      const __m512 v = _mm512_add_ps(_mm512_loadu_ps(z + q * h + j),
                                     _mm512_loadu_ps(xw + q * h + j));
      const __m512 t = _mm512_mul_ps(_mm512_set1_ps(q == 2 ? -2.0f : -1.0f), _mm512_abs_ps(v));
      const __m512 m = expm1_nonpositive(t);
      if (q == 2) {
        g[q] = tanh_from_expm1(v, m);
      } else {
        // (1 + [v < 0] m) / (2 + m), as RnnSigmoidFromExpm1
        const __mmask16 negative = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        const __m512 scaled =
            _mm512_mul_ps(_mm512_mask_blend_ps(negative, _mm512_setzero_ps(), one), m);
        g[q] = _mm512_div_ps(_mm512_add_ps(one, scaled), _mm512_add_ps(two, m));
      }
      _mm512_storeu_ps(a + q * h + j, g[q]);
    }
    const __m512 c = _mm512_add_ps(_mm512_mul_ps(g[1], _mm512_loadu_ps(cp + j)),
                                   _mm512_mul_ps(g[0], g[2]));
    _mm512_storeu_ps(cn + j, c);
    const __m512 m = expm1_nonpositive(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_abs_ps(c)));
    const __m512 tc = tanh_from_expm1(c, m);
    _mm512_storeu_ps(a + 4 * h + j, tc);
    _mm512_storeu_ps(hn + j, _mm512_mul_ps(g[3], tc));
  }
}
#pragma GCC diagnostic pop
#endif

// Asks for n values from p on to be brought into the cache: rows of a
// strided array that the next step reads from memory, fetched while this
// step's product runs.
template <class T>
void prefetch_values(const T* p, int64_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
}

template <class T>
bool keeps(const RnnProblem& p, int64_t b, int64_t t) {
  return p.mask == nullptr || p.mask[b * p.steps + t] != 0;
}

}  // namespace


void rnn_matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  OneOpenMPThread one_thread;
  gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void rnn_matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void rnn_forward(const RnnProblem& p, int64_t b0, int64_t b1, const T* xw, const T* u,
                 const T* rb, const T* h0, const T* c0, T* hs, T* cs, T* acts) {
  const int64_t B = p.batch, S = p.steps, H = p.units, R = b1 - b0;
  const int64_t GH = rnn_gates(p.cell) * H, A = rnn_act_width(p.cell) * H;
  const int64_t BH = B * H;
  if (R <= 0) return;
  OneOpenMPThread one_thread;
  std::vector<T> pre(R * GH), tmp(R * GH);
  const RecurrentOperand<T> uf(u, H, GH, false);
  // Row b of a (T + 1 or T, B, width) array at step k.
  auto state = [&](T* base, int64_t k) { return base + k * BH + b0 * H; };
  if (h0) {
    std::memcpy(state(hs, 0), h0 + b0 * H, sizeof(T) * R * H);
  } else {
    std::fill(state(hs, 0), state(hs, 0) + R * H, T(0));
  }
  if (cs) {
    if (c0) {
      std::memcpy(state(cs, 0), c0 + b0 * H, sizeof(T) * R * H);
    } else {
      std::fill(state(cs, 0), state(cs, 0) + R * H, T(0));
    }
  }
  for (int64_t k = 0; k < S; ++k) {
    const int64_t t = p.go_backwards ? S - 1 - k : k;
    const T* hp = state(hs, k);
    T* hn = state(hs, k + 1);
    T* a = acts + k * B * A + b0 * A;
    // Row i (batch row b0 + i) of this step's input projection.
    auto x = [&](int64_t i) { return xw + (i * S + t) * GH; };
    if (p.cell == RnnCell::simple || p.cell == RnnCell::lstm) {
      // z = h U, then xw added in the activations' first pass (accumulating
      // the product into xw's rows in place, row stride S G H, ran slower).
      T* z = pre.data();
      if (k + 1 < S) {  // the next step's rows of xw (rows of S G H apart)
        const int64_t tn = p.go_backwards ? t - 1 : t + 1;
        for (int64_t i = 0; i < R; ++i) prefetch_values(xw + (i * S + tn) * GH, GH);
      }
      uf.product(R, 0, H, 0, GH, hp, H, false, z, GH);
      if (p.cell == RnnCell::simple) {
        sig_tanh(z, GH, a, A, R, H, int64_t{0}, H, tmp.data(),
                 static_cast<const T*>(x(0)), S * GH);
        for (int64_t i = 0; i < R; ++i) {
          const bool keep = keeps<T>(p, b0 + i, t);
          std::memcpy(hn + i * H, keep ? a + i * A : hp + i * H, sizeof(T) * H);
        }
        continue;
      }
      const T* cp = state(cs, k);
      T* cn = state(cs, k + 1);
#ifdef TESSERA_RNN_FUSED_GATES
      if constexpr (std::is_same_v<T, float>) {
        if (uf.packed()) {
          for (int64_t i = 0; i < R; ++i) {
            lstm_step_row_avx512(z + i * GH, x(i), cp + i * H, a + i * A, cn + i * H,
                                 hn + i * H, H);
            if (!keeps<T>(p, b0 + i, t)) {
              std::memcpy(hn + i * H, hp + i * H, sizeof(T) * H);
              std::memcpy(cn + i * H, cp + i * H, sizeof(T) * H);
            }
          }
          continue;
        }
      }
#endif
      sig_tanh(z, GH, a, A, R, GH, 2 * H, 3 * H, tmp.data(),
               static_cast<const T*>(x(0)), S * GH);
      // c, tanh(c) and h in two fused passes around one vector expm1.
      for (int64_t i = 0; i < R; ++i) {
        T* ar = a + i * A;
        simd_call<RnnLstmCellState<T>>(static_cast<const T*>(ar), static_cast<const T*>(ar + H),
                                       static_cast<const T*>(ar + 2 * H), cp + i * H,
                                       cn + i * H, tmp.data() + i * H, H);
      }
      vmath(VecFn::expm1, tmp.data(), tmp.data(), R * H);
      for (int64_t i = 0; i < R; ++i) {
        T* ar = a + i * A;
        simd_call<RnnLstmCellOutput<T>>(static_cast<const T*>(cn + i * H),
                                        static_cast<const T*>(tmp.data() + i * H),
                                        static_cast<const T*>(ar + 3 * H), ar + 4 * H,
                                        hn + i * H, H);
        if (!keeps<T>(p, b0 + i, t)) {
          std::memcpy(hn + i * H, hp + i * H, sizeof(T) * H);
          std::memcpy(cn + i * H, cp + i * H, sizeof(T) * H);
        }
      }
      continue;
    }
    // pre = h U (the first two gates' columns only when r * h comes first)
    if (p.cell == RnnCell::gru_before) {
      uf.product(R, 0, H, 0, 2 * H, hp, H, false, pre.data(), GH);
    } else {
      uf.product(R, 0, H, 0, GH, hp, H, false, pre.data(), GH);
    }
    if (rb) {
      for (int64_t i = 0; i < R; ++i) {
        for (int64_t j = 0; j < GH; ++j) pre[i * GH + j] += rb[j];
      }
    }
    switch (p.cell) {
      case RnnCell::simple:
      case RnnCell::lstm:
        break;  // both handled before the switch
      case RnnCell::gru:
      case RnnCell::gru_before: {
        for (int64_t i = 0; i < R; ++i) {
          const T* xr = x(i);
          T* r = pre.data() + i * GH;
          for (int64_t j = 0; j < 2 * H; ++j) r[j] += xr[j];
        }
        sig_tanh(pre.data(), GH, a, A, R, 2 * H, int64_t{0}, int64_t{0}, tmp.data());
        if (p.cell == RnnCell::gru) {
          for (int64_t i = 0; i < R; ++i) {
            const T* xr = x(i) + 2 * H;
            T* r = pre.data() + i * GH + 2 * H;
            const T* gate = a + i * A + H;
            T* hu = a + i * A + 3 * H;
            for (int64_t j = 0; j < H; ++j) {
              hu[j] = r[j];
              r[j] = xr[j] + gate[j] * r[j];
            }
          }
        } else {
          for (int64_t i = 0; i < R; ++i) {
            const T* gate = a + i * A + H;
            T* rh = a + i * A + 3 * H;
            for (int64_t j = 0; j < H; ++j) rh[j] = gate[j] * hp[i * H + j];
          }
          uf.product(R, 0, H, 2 * H, H, a + 3 * H, A, false, pre.data() + 2 * H, GH);
          for (int64_t i = 0; i < R; ++i) {
            const T* xr = x(i) + 2 * H;
            T* r = pre.data() + i * GH + 2 * H;
            for (int64_t j = 0; j < H; ++j) r[j] += xr[j];
          }
        }
        sig_tanh(pre.data() + 2 * H, GH, a + 2 * H, A, R, H, int64_t{0}, H, tmp.data());
        for (int64_t i = 0; i < R; ++i) {
          const T* ar = a + i * A;
          if (keeps<T>(p, b0 + i, t)) {
            for (int64_t j = 0; j < H; ++j) {
              const T z = ar[j];
              hn[i * H + j] = z * hp[i * H + j] + (T(1) - z) * ar[2 * H + j];
            }
          } else {
            std::memcpy(hn + i * H, hp + i * H, sizeof(T) * H);
          }
        }
        break;
      }
    }
  }
}

template <class T>
void rnn_backward_rows(const RnnProblem& p, int64_t b0, int64_t b1, const T* u, const T* hs,
                       const T* cs, const T* acts, const T* gout, bool sequences, const T* gh,
                       const T* gc, T* dz, T* dhu, T* dxw, T* hx, T* dh0, T* dc0) {
  const int64_t B = p.batch, S = p.steps, H = p.units, R = b1 - b0;
  const int64_t GH = rnn_gates(p.cell) * H, A = rnn_act_width(p.cell) * H;
  const int64_t BH = B * H, RH = R * H;
  if (R <= 0) return;
  OneOpenMPThread one_thread;
  const bool lstm = p.cell == RnnCell::lstm;
  // dh, dc: the cotangents carried to the previous step's states; dhn, dcn:
  // those reaching this step's new states through the cell.
  std::vector<T> dh(RH, T(0)), dc(lstm ? RH : 0, T(0)), dhn(lstm ? 0 : RH), drh(RH);
  const std::vector<T> no_output(lstm ? H : 0, T(0));
  const RecurrentOperand<T> ub(u, H, GH, true);  // U^T
  if (gh) std::memcpy(dh.data(), gh + b0 * H, sizeof(T) * RH);
  if (gc && lstm) std::memcpy(dc.data(), gc + b0 * H, sizeof(T) * RH);
  for (int64_t k = S - 1; k >= 0; --k) {
    const int64_t t = p.go_backwards ? S - 1 - k : k;
    const T* hp = hs + k * BH + b0 * H;
    const T* a = acts + k * B * A + b0 * A;
    // This step's gate cotangents: written straight into dxw's rows (b, t)
    // for the cells whose dxw is dz, else into dz by loop step.
    const bool in_place = rnn_grads_in_place(p.cell);
    T* d = in_place ? dxw + (b0 * S + t) * GH : dz + k * B * GH + b0 * GH;
    const int64_t ldd = in_place ? S * GH : GH;
    // A kept row's carried cotangents (with this step's output's) go through
    // the cell; a masked row's pass to the previous states. (The LSTM's
    // kernel does this itself, below.)
    for (int64_t i = 0; i < R && !lstm; ++i) {
      const int64_t b = b0 + i;
      const T* go = nullptr;
      if (gout && sequences) go = gout + (b * S + k) * H;
      if (gout && !sequences && k == S - 1) go = gout + b * H;
      T* dhr = dh.data() + i * H;
      T* dnr = dhn.data() + i * H;
      if (keeps<T>(p, b, t)) {
        for (int64_t j = 0; j < H; ++j) dnr[j] = dhr[j] + (go ? go[j] : T(0));
        std::fill(dhr, dhr + H, T(0));
      } else {
        std::fill(dnr, dnr + H, T(0));
        if (go && !p.zero_output_for_mask) {
          for (int64_t j = 0; j < H; ++j) dhr[j] += go[j];
        }
      }
    }
    switch (p.cell) {
      case RnnCell::simple:
        for (int64_t i = 0; i < R; ++i) {
          const T* ar = a + i * A;
          const T* g = dhn.data() + i * H;
          T* dr = d + i * ldd;
          for (int64_t j = 0; j < H; ++j) dr[j] = g[j] * (T(1) - ar[j] * ar[j]);
        }
        ub.product(R, 0, GH, 0, H, d, ldd, true, dh.data(), H);
        break;
      case RnnCell::lstm: {
        const T* cp = cs + k * BH + b0 * H;
        for (int64_t i = 0; i < R; ++i) {
          const int64_t b = b0 + i;
          const T* go = nullptr;
          if (gout && sequences) go = gout + (b * S + k) * H;
          if (gout && !sequences && k == S - 1) go = gout + b * H;
          const T* ar = a + i * A;
          T* dr = d + i * ldd;
          T* dhr = dh.data() + i * H;
          if (k > 0) {
            // the row's gates and cell state of the previous step (written by
            // the forward long before, so in memory), a row at a time so that
            // the requests do not queue behind each other
            prefetch_values(ar - B * A, A);
            prefetch_values(cp + i * H - BH, H);
          }
          if (keeps<T>(p, b, t)) {
            simd_call<RnnLstmCellGrad<T>>(ar, ar + H, ar + 2 * H, ar + 3 * H, ar + 4 * H,
                                          go ? go : no_output.data(), cp + i * H, dhr,
                                          dc.data() + i * H, dr, dr + H, dr + 2 * H, dr + 3 * H,
                                          H);
          } else {
            std::fill(dr, dr + GH, T(0));
            if (go && !p.zero_output_for_mask) {
              for (int64_t j = 0; j < H; ++j) dhr[j] += go[j];
            }
          }
        }
        ub.product(R, 0, GH, 0, H, d, ldd, true, dh.data(), H);
        break;
      }
      case RnnCell::gru: {
        T* dq = dhu + k * B * GH + b0 * GH;
        for (int64_t i = 0; i < R; ++i) {
          const T* ar = a + i * A;
          T* dr = d + i * GH;
          T* qr = dq + i * GH;
          simd_call<RnnGruCellGrad<T>>(ar, ar + H, ar + 2 * H, ar + 3 * H,
                                       static_cast<const T*>(dhn.data() + i * H), hp + i * H, dr,
                                       dr + H, dr + 2 * H, qr, qr + H, qr + 2 * H,
                                       dh.data() + i * H, H);
        }
        ub.product(R, 0, GH, 0, H, dq, GH, true, dh.data(), H);
        break;
      }
      case RnnCell::gru_before: {
        for (int64_t i = 0; i < R; ++i) {
          const T* ar = a + i * A;
          const T* g = dhn.data() + i * H;
          const T* hpr = hp + i * H;
          T* dr = d + i * GH;
          for (int64_t j = 0; j < H; ++j) {
            const T z = ar[j], hh = ar[2 * H + j];
            dr[j] = g[j] * (hpr[j] - hh) * z * (T(1) - z);
            dr[2 * H + j] = g[j] * (T(1) - z) * (T(1) - hh * hh);
          }
        }
        // d(r * h) = dh~ U_h^T
        ub.product(R, 2 * H, H, 0, H, d + 2 * H, GH, false, drh.data(), H);
        for (int64_t i = 0; i < R; ++i) {
          const T* ar = a + i * A;
          const T* g = dhn.data() + i * H;
          const T* hpr = hp + i * H;
          const T* drr = drh.data() + i * H;
          T* dhr = dh.data() + i * H;
          T* dr = d + i * GH;
          for (int64_t j = 0; j < H; ++j) {
            const T z = ar[j], r = ar[H + j];
            dr[H + j] = drr[j] * hpr[j] * r * (T(1) - r);
            dhr[j] += drr[j] * r + g[j] * z;
          }
        }
        ub.product(R, 0, 2 * H, 0, H, d, GH, true, dh.data(), H);
        break;
      }
    }
  }
  for (int64_t k = 0; k < S; ++k) {
    const int64_t t = p.go_backwards ? S - 1 - k : k;
    for (int64_t b = b0; b < b1; ++b) {
      if (rnn_grads_in_place(p.cell)) {
        // the state each row (b, t) of dxw multiplied, for the weights' product
        std::memcpy(hx + (b * S + t) * H, hs + (k * B + b) * H, sizeof(T) * H);
      } else {
        std::memcpy(dxw + (b * S + t) * GH, dz + (k * B + b) * GH, sizeof(T) * GH);
      }
    }
  }
  std::memcpy(dh0 + b0 * H, dh.data(), sizeof(T) * RH);
  if (dc0 && lstm) std::memcpy(dc0 + b0 * H, dc.data(), sizeof(T) * RH);
}

template <class T>
void rnn_backward_weights(const RnnProblem& p, int64_t j0, int64_t j1, const T* hs,
                          const T* acts, const T* dz, const T* dhu, const T* hx, const T* dxw,
                          T* du, T* drb) {
  const int64_t H = p.units, GH = rnn_gates(p.cell) * H, A = rnn_act_width(p.cell) * H;
  const int64_t n = p.steps * p.batch;  // every (step, row) pair, one product
  if (j1 <= j0) return;
  OneOpenMPThread one_thread;
  if (p.cell == RnnCell::gru_before) {
    // columns of z and r against h, of the candidate against r * h
    const int64_t split = std::min(std::max(j0, 2 * H), j1);
    gemm(true, false, H, split - j0, n, hs, H, dz + j0, GH, T(0), du + j0, GH);
    gemm(true, false, H, j1 - split, n, acts + 3 * H, A, dz + split, GH, T(0), du + split, GH);
    return;
  }
  if (rnn_grads_in_place(p.cell)) {
    gemm(true, false, H, j1 - j0, n, hx, H, dxw + j0, GH, T(0), du + j0, GH);
    return;
  }
  const T* dq = p.cell == RnnCell::gru ? dhu : dz;
  gemm(true, false, H, j1 - j0, n, hs, H, dq + j0, GH, T(0), du + j0, GH);
  if (drb) {
    std::fill(drb + j0, drb + j1, T(0));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = j0; j < j1; ++j) drb[j] += dq[r * GH + j];
    }
  }
}

template void rnn_forward<float>(const RnnProblem&, int64_t, int64_t, const float*, const float*,
                                 const float*, const float*, const float*, float*, float*,
                                 float*);
template void rnn_forward<double>(const RnnProblem&, int64_t, int64_t, const double*,
                                  const double*, const double*, const double*, const double*,
                                  double*, double*, double*);
template void rnn_backward_rows<float>(const RnnProblem&, int64_t, int64_t, const float*,
                                       const float*, const float*, const float*, const float*,
                                       bool, const float*, const float*, float*, float*, float*,
                                       float*, float*, float*);
template void rnn_backward_rows<double>(const RnnProblem&, int64_t, int64_t, const double*,
                                        const double*, const double*, const double*,
                                        const double*, bool, const double*, const double*,
                                        double*, double*, double*, double*, double*, double*);
template void rnn_backward_weights<float>(const RnnProblem&, int64_t, int64_t, const float*,
                                          const float*, const float*, const float*, const float*,
                                          const float*, float*, float*);
template void rnn_backward_weights<double>(const RnnProblem&, int64_t, int64_t, const double*,
                                           const double*, const double*, const double*,
                                           const double*, const double*, double*, double*);

}  // namespace tessera::kernels
