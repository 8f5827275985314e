#include "tessera/kernels/linalg.hpp"
#include "tessera/kernels/blis_pool.hpp"
#include "tessera/kernels/lapack.hpp"
#include "tessera/kernels/one_omp_thread.hpp"
#include "tessera/kernels/simd.hpp"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <limits>

extern "C" void bli_init(void);  // blis.h, not included for its macros

namespace tessera::kernels {

namespace {

// BLAS is BLIS's serial build: no thread pool of its own (one scheduler owns
// the cores, DESIGN.md principle 1), and reentrant, so row tiles of one product
// call it concurrently from several workers. (Debian's serial OpenBLAS is not
// safe for concurrent calls: its shared buffers gave wrong results.)
using blasint = int;

#if defined(__x86_64__)
// BLIS picks its kernels from the CPU's vendor, family and model, and falls
// back to portable C ('generic', about a third of the speed) on CPUs newer
// than the library: Debian 12's BLIS 0.9 does not know AMD's Zen 4 and Zen 5
// (families 0x19 with AVX-512 and 0x1A), on which its Zen 3 kernels (AVX2 and
// FMA) and its Skylake-X kernels (AVX-512, which both have) run as intended:
// 2-3x faster matrix products measured on a Zen 5 EPYC. BLIS 0.9 reads
// BLIS_ARCH_TYPE as its arch_t number (blis.h: BLIS_ARCH_SKX 0, BLIS_ARCH_ZEN3
// 6) at its first call, after this runs; a BLIS_ARCH_TYPE the user set wins.
// The CPU's BLIS configuration when BLIS would fall back to 'generic', else
// null.
const char* blis_arch_for_this_cpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return nullptr;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // AuthenticAMD
  if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return nullptr;
  unsigned family = (eax >> 8) & 0xf;
  if (family == 0xf) family += (eax >> 20) & 0xff;
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool zen4_or_later =
      family > 0x19 || (family == 0x19 && __builtin_cpu_supports("avx512f"));
  if (!avx2_fma || !zen4_or_later) return nullptr;
  return __builtin_cpu_supports("avx512f") ? "0" : "6";
}

const bool blis_arch_chosen = [] {
  const char* arch = blis_arch_for_this_cpu();
  if (std::getenv("BLIS_ARCH_TYPE") == nullptr && arch != nullptr) {
    setenv("BLIS_ARCH_TYPE", arch, 0);
  }
  // With BLIS_ARCH_TYPE set, BLIS 0.9 aborts the process when its
  // architecture is queried before it is initialised, which is what
  // threadpoolctl (imported by scikit-learn) does: initialise it now.
  if (std::getenv("BLIS_ARCH_TYPE") != nullptr) bli_init();
  return true;
}();
#endif

// C (m, n), leading dimension n, = op(A) op(B) for a float32 tile, row-major,
// through oneDNN's sgemm: single-threaded it ran 1.2-2.4x BLIS's at the tiles
// of small models' products (bench/bench_gemm_tiles.cpp; on a par for
// k >= 1024) and is reentrant. Its result depends on the tile's shape and
// operands only (not on their alignment or the caller's thread); its ISA is
// chosen once per process (DNNL_MAX_CPU_ISA pins it). BLIS if oneDNN refuses
// the call. The callers keep matrix-vector products on BLIS's gemv (as fast).
void sgemm_tile(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float* c) {
  {
    OneOpenMPThread one_thread;
    if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n) ==
        dnnl_success) {
      return;
    }
  }
  BlisCall in_blis("matmul");
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c,
              static_cast<blasint>(n));
}

// Blocked i-p-j loop: streams rows of B through cache in (kBlockK, kBlockN) panels.
constexpr int64_t kBlockK = 128;
constexpr int64_t kBlockN = 512;

void matmul_rows_int(const int64_t* a, const int64_t* b, int64_t* c, int64_t k, int64_t n,
                     int64_t r0, int64_t r1) {
  // Unsigned arithmetic wraps on overflow as NumPy's int64 does (signed overflow is UB).
  const uint64_t* ua = reinterpret_cast<const uint64_t*>(a);
  const uint64_t* ub = reinterpret_cast<const uint64_t*>(b);
  uint64_t* uc = reinterpret_cast<uint64_t*>(c);
  for (int64_t i = r0; i < r1; ++i) std::fill(uc + i * n, uc + (i + 1) * n, uint64_t{0});
  for (int64_t jb = 0; jb < n; jb += kBlockN) {
    int64_t je = std::min(n, jb + kBlockN);
    for (int64_t pb = 0; pb < k; pb += kBlockK) {
      int64_t pe = std::min(k, pb + kBlockK);
      for (int64_t i = r0; i < r1; ++i) {
        uint64_t* ci = uc + i * n;
        for (int64_t p = pb; p < pe; ++p) {
          uint64_t aip = ua[i * k + p];
          if (aip == 0) continue;
          const uint64_t* bp = ub + p * n;
          for (int64_t j = jb; j < je; ++j) ci[j] += aip * bp[j];
        }
      }
    }
  }
}

void matmul_rows_bool(const bool* a, const bool* b, bool* c, int64_t k, int64_t n, int64_t r0,
                      int64_t r1) {
  for (int64_t i = r0; i < r1; ++i) std::fill(c + i * n, c + (i + 1) * n, false);
  for (int64_t jb = 0; jb < n; jb += kBlockN) {
    int64_t je = std::min(n, jb + kBlockN);
    for (int64_t pb = 0; pb < k; pb += kBlockK) {
      int64_t pe = std::min(k, pb + kBlockK);
      for (int64_t i = r0; i < r1; ++i) {
        bool* ci = c + i * n;
        for (int64_t p = pb; p < pe; ++p) {
          if (!a[i * k + p]) continue;
          const bool* bp = b + p * n;
          for (int64_t j = jb; j < je; ++j) ci[j] = ci[j] | bp[j];
        }
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// Matrix-vector kernels of tessera's own for float64 (AVX2 + FMA, and
// AVX-512), used instead of BLAS's gemv for the bits: every output element is
// summed in one fixed order whatever rows or columns the call covers, so row
// and column tiles of a product give the bits of one call at any thread count
// (BLIS 0.9's dgemv summed a row by its place in the call). The AVX-512
// variants keep the AVX2 variants' order, so the SIMD level does not change
// the bits either.
//
// dot_rows: y[i] = a[i, :] . x, each row summed by two 4-wide accumulators
// over k in steps of 8 (columns j..j+3 and j+4..j+7), added, then their lanes
// ((0 + 1) + (2 + 3)), then the last k % 8 columns by scalar FMAs. AVX2 runs
// four rows at a time sharing each load of x; AVX-512 holds both accumulators
// of a row in one 8-wide register and runs eight rows at a time.

// A row's sum from its two accumulators, then the tail.
[[gnu::target("avx2,fma"), gnu::always_inline]] inline double matvec_finish_row(
    __m256d s0, __m256d s1, const double* row, const double* x, int64_t k8, int64_t k) {
  alignas(32) double l[4];
  _mm256_store_pd(l, _mm256_add_pd(s0, s1));
  double r = (l[0] + l[1]) + (l[2] + l[3]);
  for (int64_t j = k8; j < k; ++j) r = __builtin_fma(row[j], x[j], r);
  return r;
}

[[gnu::target("avx2,fma")]] void matvec_dot_rows_avx2(const double* a, int64_t lda, int64_t k,
                                                       const double* x, double* y,
                                                       int64_t rows) {
  const int64_t k8 = k - k % 8;
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    const double* r0 = a + i * lda;
    const double* r1 = r0 + lda;
    const double* r2 = r1 + lda;
    const double* r3 = r2 + lda;
    __m256d s[8];
    for (auto& v : s) v = _mm256_setzero_pd();
    for (int64_t j = 0; j < k8; j += 8) {
      const __m256d x0 = _mm256_loadu_pd(x + j), x1 = _mm256_loadu_pd(x + j + 4);
      s[0] = _mm256_fmadd_pd(_mm256_loadu_pd(r0 + j), x0, s[0]);
      s[1] = _mm256_fmadd_pd(_mm256_loadu_pd(r0 + j + 4), x1, s[1]);
      s[2] = _mm256_fmadd_pd(_mm256_loadu_pd(r1 + j), x0, s[2]);
      s[3] = _mm256_fmadd_pd(_mm256_loadu_pd(r1 + j + 4), x1, s[3]);
      s[4] = _mm256_fmadd_pd(_mm256_loadu_pd(r2 + j), x0, s[4]);
      s[5] = _mm256_fmadd_pd(_mm256_loadu_pd(r2 + j + 4), x1, s[5]);
      s[6] = _mm256_fmadd_pd(_mm256_loadu_pd(r3 + j), x0, s[6]);
      s[7] = _mm256_fmadd_pd(_mm256_loadu_pd(r3 + j + 4), x1, s[7]);
    }
    y[i] = matvec_finish_row(s[0], s[1], r0, x, k8, k);
    y[i + 1] = matvec_finish_row(s[2], s[3], r1, x, k8, k);
    y[i + 2] = matvec_finish_row(s[4], s[5], r2, x, k8, k);
    y[i + 3] = matvec_finish_row(s[6], s[7], r3, x, k8, k);
  }
  for (; i < rows; ++i) {
    const double* r0 = a + i * lda;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (int64_t j = 0; j < k8; j += 8) {
      s0 = _mm256_fmadd_pd(_mm256_loadu_pd(r0 + j), _mm256_loadu_pd(x + j), s0);
      s1 = _mm256_fmadd_pd(_mm256_loadu_pd(r0 + j + 4), _mm256_loadu_pd(x + j + 4), s1);
    }
    y[i] = matvec_finish_row(s0, s1, r0, x, k8, k);
  }
}

#define TESSERA_MATVEC_AVX512 "avx2,fma,avx512f,avx512vl,avx512bw,avx512dq"

// The 8-wide accumulator's halves are the AVX2 kernel's s0 (lanes 0-3) and s1.
[[gnu::target(TESSERA_MATVEC_AVX512), gnu::always_inline]] inline double matvec_finish_row512(
    __m512d s, const double* row, const double* x, int64_t k8, int64_t k) {
  alignas(64) double l[8];
  _mm512_store_pd(l, s);
  double r = (l[0] + l[4] + (l[1] + l[5])) + (l[2] + l[6] + (l[3] + l[7]));
  for (int64_t j = k8; j < k; ++j) r = __builtin_fma(row[j], x[j], r);
  return r;
}

[[gnu::target(TESSERA_MATVEC_AVX512)]] void matvec_dot_rows_avx512(const double* a, int64_t lda,
                                                                  int64_t k, const double* x,
                                                                  double* y, int64_t rows) {
  const int64_t k8 = k - k % 8;
  int64_t i = 0;
  for (; i + 8 <= rows; i += 8) {
    const double* r = a + i * lda;
    __m512d s[8];
    for (auto& v : s) v = _mm512_setzero_pd();
    for (int64_t j = 0; j < k8; j += 8) {
      const __m512d xv = _mm512_loadu_pd(x + j);
      for (int q = 0; q < 8; ++q) {
        s[q] = _mm512_fmadd_pd(_mm512_loadu_pd(r + q * lda + j), xv, s[q]);
      }
    }
    for (int q = 0; q < 8; ++q) y[i + q] = matvec_finish_row512(s[q], r + q * lda, x, k8, k);
  }
  for (; i < rows; ++i) {
    const double* r = a + i * lda;
    __m512d s = _mm512_setzero_pd();
    for (int64_t j = 0; j < k8; j += 8) {
      s = _mm512_fmadd_pd(_mm512_loadu_pd(r + j), _mm512_loadu_pd(x + j), s);
    }
    y[i] = matvec_finish_row512(s, r, x, k8, k);
  }
}

// vec_mat: y[j] = sum over i of x[i] a[i, j] for j < cols, as one chain of
// FMAs per element in the order of i (y[j] = fma(x[i], a[i, j], y[j]) from
// 0), whatever the vector width: eight rows at a time stream through the
// columns, each element's partial sum loaded, carried through the eight
// rows' FMAs in order, and stored.
[[gnu::target("avx2,fma")]] void matvec_vec_mat_avx2(const double* a, int64_t lda, int64_t k,
                                                      const double* x, double* y,
                                                      int64_t cols) {
  std::fill(y, y + cols, 0.0);
  const int64_t cw = cols - cols % 4;
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const double* r = a + i * lda;
    __m256d xv[8];
    for (int q = 0; q < 8; ++q) xv[q] = _mm256_set1_pd(x[i + q]);
    for (int64_t j = 0; j < cw; j += 4) {
      __m256d acc = _mm256_loadu_pd(y + j);
      for (int q = 0; q < 8; ++q) {
        acc = _mm256_fmadd_pd(xv[q], _mm256_loadu_pd(r + q * lda + j), acc);
      }
      _mm256_storeu_pd(y + j, acc);
    }
    for (int64_t j = cw; j < cols; ++j) {
      double acc = y[j];
      for (int q = 0; q < 8; ++q) acc = __builtin_fma(x[i + q], r[q * lda + j], acc);
      y[j] = acc;
    }
  }
  for (; i < k; ++i) {
    const double* r = a + i * lda;
    const __m256d xv = _mm256_set1_pd(x[i]);
    for (int64_t j = 0; j < cw; j += 4) {
      _mm256_storeu_pd(y + j, _mm256_fmadd_pd(xv, _mm256_loadu_pd(r + j), _mm256_loadu_pd(y + j)));
    }
    for (int64_t j = cw; j < cols; ++j) y[j] = __builtin_fma(x[i], r[j], y[j]);
  }
}

// The same chains as matvec_vec_mat_avx2, eight columns to a register.
[[gnu::target(TESSERA_MATVEC_AVX512)]] void matvec_vec_mat_avx512(const double* a, int64_t lda,
                                                                 int64_t k, const double* x,
                                                                 double* y, int64_t cols) {
  std::fill(y, y + cols, 0.0);
  const int64_t cw = cols - cols % 8;
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const double* r = a + i * lda;
    __m512d xv[8];
    for (int q = 0; q < 8; ++q) xv[q] = _mm512_set1_pd(x[i + q]);
    for (int64_t j = 0; j < cw; j += 8) {
      __m512d acc = _mm512_loadu_pd(y + j);
      for (int q = 0; q < 8; ++q) {
        acc = _mm512_fmadd_pd(xv[q], _mm512_loadu_pd(r + q * lda + j), acc);
      }
      _mm512_storeu_pd(y + j, acc);
    }
    for (int64_t j = cw; j < cols; ++j) {
      double acc = y[j];
      for (int q = 0; q < 8; ++q) acc = __builtin_fma(x[i + q], r[q * lda + j], acc);
      y[j] = acc;
    }
  }
  for (; i < k; ++i) {
    const double* r = a + i * lda;
    const __m512d xv = _mm512_set1_pd(x[i]);
    for (int64_t j = 0; j < cw; j += 8) {
      _mm512_storeu_pd(y + j, _mm512_fmadd_pd(xv, _mm512_loadu_pd(r + j), _mm512_loadu_pd(y + j)));
    }
    for (int64_t j = cw; j < cols; ++j) y[j] = __builtin_fma(x[i], r[j], y[j]);
  }
}
#undef TESSERA_MATVEC_AVX512

// The level of the float64 matrix-vector kernels: BLAS (sse2) where the CPU
// lacks AVX2 and FMA or the SIMD level is sse2.
SimdLevel matvec_level() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has ? active_simd() : SimdLevel::sse2;
}

// The rows' dot products by tessera's kernels; false: the caller uses BLAS.
bool dot_rows(const double* a, int64_t lda, int64_t k, const double* x, double* y,
              int64_t rows) {
  switch (matvec_level()) {
    case SimdLevel::avx512: matvec_dot_rows_avx512(a, lda, k, x, y, rows); return true;
    case SimdLevel::avx2: matvec_dot_rows_avx2(a, lda, k, x, y, rows); return true;
    case SimdLevel::sse2: break;
  }
  return false;
}

// y = x a for `cols` columns of a (k rows, leading dimension lda) by
// tessera's kernels; false: the caller uses BLAS.
bool vec_mat(const double* a, int64_t lda, int64_t k, const double* x, double* y,
             int64_t cols) {
  switch (matvec_level()) {
    case SimdLevel::avx512: matvec_vec_mat_avx512(a, lda, k, x, y, cols); return true;
    case SimdLevel::avx2: matvec_vec_mat_avx2(a, lda, k, x, y, cols); return true;
    case SimdLevel::sse2: break;
  }
  return false;
}
#else
SimdLevel matvec_level() { return SimdLevel::sse2; }
bool dot_rows(const double*, int64_t, int64_t, const double*, double*, int64_t) { return false; }
bool vec_mat(const double*, int64_t, int64_t, const double*, double*, int64_t) { return false; }
#endif

template <class T>
void matmul_rows_blas(const T* a, const T* b, T* c, int64_t k, int64_t n, int64_t r0, int64_t r1) {
  const int64_t rows = r1 - r0;
  const T* ar = a + r0 * k;
  T* cr = c + r0 * n;
  // BLAS needs leading dimensions >= 1, so degenerate products are done here.
  if (k == 0) {
    std::fill(cr, cr + rows * n, T(0));
    return;
  }
  const blasint bk = static_cast<blasint>(k), bn = static_cast<blasint>(n);
  const blasint brows = static_cast<blasint>(rows);
  if constexpr (std::is_same_v<T, double>) {
    if (n == 1) {
      if (!dot_rows(ar, k, k, b, cr, rows)) {
        cblas_dgemv(CblasRowMajor, CblasNoTrans, brows, bk, 1.0, ar, bk, b, 1, 0.0, cr, 1);
      }
    } else if (rows == 1) {
      if (!vec_mat(b, n, k, ar, cr, n)) {
        cblas_dgemv(CblasRowMajor, CblasTrans, bk, bn, 1.0, b, bn, ar, 1, 0.0, cr, 1);
      }
    } else {
      BlisCall in_blis("matmul");
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, brows, bn, bk, 1.0, ar, bk, b, bn,
                  0.0, cr, bn);
    }
  } else {
    if (n == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, brows, bk, 1.0f, ar, bk, b, 1, 0.0f, cr, 1);
    } else if (rows == 1) {
      cblas_sgemv(CblasRowMajor, CblasTrans, bk, bn, 1.0f, b, bn, ar, 1, 0.0f, cr, 1);
    } else {
      sgemm_tile(false, false, rows, n, k, ar, k, b, n, cr);
    }
  }
}

template <class T>
void matmul_tn_rows_blas(const T* a, const T* b, T* c, int64_t k, int64_t p, int64_t n,
                         int64_t r0, int64_t r1) {
  const int64_t rows = r1 - r0;
  T* cr = c + r0 * n;
  if (k == 0) {
    std::fill(cr, cr + rows * n, T(0));
    return;
  }
  // Rows r0..r1 of A^T are columns r0..r1 of A: the block starting at a + r0
  // with leading dimension p, read transposed.
  const blasint bk = static_cast<blasint>(k), bn = static_cast<blasint>(n);
  const blasint bp = static_cast<blasint>(p), brows = static_cast<blasint>(rows);
  if constexpr (std::is_same_v<T, double>) {
    if (n == 1) {
      if (!vec_mat(a + r0, p, k, b, cr, rows)) {
        cblas_dgemv(CblasRowMajor, CblasTrans, bk, brows, 1.0, a + r0, bp, b, 1, 0.0, cr, 1);
      }
    } else {
      BlisCall in_blis("matmul");
      cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, brows, bn, bk, 1.0, a + r0, bp, b, bn,
                  0.0, cr, bn);
    }
  } else {
    if (n == 1) {
      cblas_sgemv(CblasRowMajor, CblasTrans, bk, brows, 1.0f, a + r0, bp, b, 1, 0.0f, cr, 1);
    } else {
      sgemm_tile(true, false, rows, n, k, a + r0, p, b, n, cr);
    }
  }
}

template <class T>
void matmul_rows_strided_blas(const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
                              int64_t bcs, T* c, int64_t k, int64_t n, int64_t r0, int64_t r1) {
  const int64_t rows = r1 - r0;
  const T* ar = a + r0 * ars;
  T* cr = c + r0 * n;
  if (k == 0) {
    std::fill(cr, cr + rows * n, T(0));
    return;
  }
  // An operand whose column stride is not 1 is stored transposed (its row
  // stride is 1): BLAS reads it with the transpose flag, leading dimension
  // the column stride.
  const bool ta = acs != 1, tb = bcs != 1;
  const auto lda = static_cast<blasint>(ta ? acs : ars);
  const auto ldb = static_cast<blasint>(tb ? bcs : brs);
  const auto bk = static_cast<blasint>(k), bn = static_cast<blasint>(n);
  const auto brows = static_cast<blasint>(rows);
  const CBLAS_TRANSPOSE na = ta ? CblasTrans : CblasNoTrans, nb = tb ? CblasTrans : CblasNoTrans;
  auto gemv = [](CBLAS_TRANSPOSE t, blasint m, blasint nn, const T* mat, blasint ld, const T* x,
                 blasint incx, T* y) {
    if constexpr (std::is_same_v<T, double>) {
      cblas_dgemv(CblasRowMajor, t, m, nn, 1.0, mat, ld, x, incx, 0.0, y, 1);
    } else {
      cblas_sgemv(CblasRowMajor, t, m, nn, 1.0f, mat, ld, x, incx, 0.0f, y, 1);
    }
  };
  if (n == 1) {  // C's rows = A's rows . b's column (stride brs)
    bool done = false;
    if constexpr (std::is_same_v<T, double>) {
      // A transposed view's rows are the columns of the matrix it views.
      if (brs == 1) {
        done = ta ? vec_mat(ar, lda, k, b, cr, rows) : dot_rows(ar, lda, k, b, cr, rows);
      }
    }
    if (!done) {
      gemv(ta ? CblasTrans : CblasNoTrans, ta ? bk : brows, ta ? brows : bk, ar, lda, b,
           static_cast<blasint>(brs), cr);
    }
  } else if (rows == 1) {  // C's row = a's row (stride acs) . B
    bool done = false;
    if constexpr (std::is_same_v<T, double>) {
      if (acs == 1 || k == 1) {
        done = tb ? dot_rows(b, ldb, k, ar, cr, n) : vec_mat(b, ldb, k, ar, cr, n);
      }
    }
    if (!done) {
      gemv(tb ? CblasNoTrans : CblasTrans, tb ? bn : bk, tb ? bk : bn, b, ldb, ar,
           static_cast<blasint>(acs), cr);
    }
  } else if constexpr (std::is_same_v<T, double>) {
    BlisCall in_blis("matmul");
    cblas_dgemm(CblasRowMajor, na, nb, brows, bn, bk, 1.0, ar, lda, b, ldb, 0.0, cr, bn);
  } else {
    sgemm_tile(ta, tb, rows, n, k, ar, lda, b, ldb, cr);
  }
}

}  // namespace

void matmul_tn_rows(DType dt, const void* a, const void* b, void* c, int64_t k, int64_t p,
                    int64_t n, int64_t row_begin, int64_t row_end) {
  if (row_end <= row_begin || n == 0) return;
  if (dt == DType::float64) {
    matmul_tn_rows_blas(static_cast<const double*>(a), static_cast<const double*>(b),
                        static_cast<double*>(c), k, p, n, row_begin, row_end);
  } else {
    matmul_tn_rows_blas(static_cast<const float*>(a), static_cast<const float*>(b),
                        static_cast<float*>(c), k, p, n, row_begin, row_end);
  }
}

bool vector_matrix_splits(DType dt, int64_t incx, BlasMatrix b) {
  return dt == DType::float64 && incx == 1 && matvec_level() != SimdLevel::sse2 &&
         (b.col_stride == 1 || b.row_stride == 1);
}

void vector_matrix_cols(DType dt, const void* x, int64_t incx, BlasMatrix b, void* y, int64_t k,
                        int64_t col_begin, int64_t col_end) {
  if (col_end <= col_begin) return;
  const int64_t cols = col_end - col_begin;
  if (vector_matrix_splits(dt, incx, b)) {
    const double* m = static_cast<const double*>(b.data);
    const double* xv = static_cast<const double*>(x);
    double* yv = static_cast<double*>(y) + col_begin;
    if (b.col_stride == 1) {
      vec_mat(m + col_begin, b.row_stride, k, xv, yv, cols);
    } else {
      dot_rows(m + col_begin * b.col_stride, b.col_stride, k, xv, yv, cols);
    }
    return;
  }
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  const BlasMatrix block{static_cast<const char*>(b.data) + col_begin * b.col_stride * es,
                         b.row_stride, b.col_stride};
  matmul_rows_strided(dt, {x, std::max<int64_t>(k * incx, 1), incx}, block,
                      static_cast<char*>(y) + col_begin * es, k, cols, 0, 1);
}

void matmul_rows_strided(DType dt, BlasMatrix a, BlasMatrix b, void* c, int64_t k, int64_t n,
                         int64_t row_begin, int64_t row_end) {
  if (row_end <= row_begin || n == 0) return;
  if (dt == DType::float64) {
    matmul_rows_strided_blas(static_cast<const double*>(a.data), a.row_stride, a.col_stride,
                             static_cast<const double*>(b.data), b.row_stride, b.col_stride,
                             static_cast<double*>(c), k, n, row_begin, row_end);
  } else if (dt == DType::float32) {
    matmul_rows_strided_blas(static_cast<const float*>(a.data), a.row_stride, a.col_stride,
                             static_cast<const float*>(b.data), b.row_stride, b.col_stride,
                             static_cast<float*>(c), k, n, row_begin, row_end);
  } else {
    unsupported_dtype(dt, "matmul");
  }
}

void matmul_rows(DType dt, const void* a, const void* b, void* c, int64_t k, int64_t n,
                 int64_t row_begin, int64_t row_end) {
  if (row_end <= row_begin || n == 0) return;
  switch (dt) {
    case DType::float64:
      matmul_rows_blas(static_cast<const double*>(a), static_cast<const double*>(b),
                       static_cast<double*>(c), k, n, row_begin, row_end);
      break;
    case DType::float32:
      matmul_rows_blas(static_cast<const float*>(a), static_cast<const float*>(b),
                       static_cast<float*>(c), k, n, row_begin, row_end);
      break;
    case DType::int64:
      matmul_rows_int(static_cast<const int64_t*>(a), static_cast<const int64_t*>(b),
                      static_cast<int64_t*>(c), k, n, row_begin, row_end);
      break;
    case DType::bool_:
      matmul_rows_bool(static_cast<const bool*>(a), static_cast<const bool*>(b),
                       static_cast<bool*>(c), k, n, row_begin, row_end);
      break;
    default: unsupported_dtype(dt, "matmul");  // storage dtypes arrive converted
  }
}

Array permute_axes(const Array& a, const std::vector<int>& perm) {
  const int nd = a.ndim();
  Shape out_shape(nd);
  std::vector<int64_t> in_strides = contiguous_strides(a.shape());
  std::vector<int64_t> strides(nd);
  bool identity = true;
  for (int i = 0; i < nd; ++i) {
    out_shape[i] = a.shape()[perm[i]];
    strides[i] = in_strides[perm[i]];
    identity = identity && perm[i] == i;
  }
  if (identity) return a;
  Array out(a.dtype(), out_shape);
  if (out.size() == 0) return out;
  const size_t es = dtype_size(a.dtype());
  const char* src = static_cast<const char*>(a.raw());
  char* dst = static_cast<char*>(out.raw());
  // Odometer over the output; the last axis is the inner loop.
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = nd ? out_shape[nd - 1] : 1;
  const int64_t inner_stride = nd ? strides[nd - 1] : 0;
  int64_t offset = 0;
  for (int64_t done = 0; done < out.size(); done += inner) {
    const char* s = src + offset * static_cast<int64_t>(es);
    for (int64_t j = 0; j < inner; ++j) {
      std::memcpy(dst, s + j * inner_stride * static_cast<int64_t>(es), es);
      dst += es;
    }
    for (int ax = nd - 2; ax >= 0; --ax) {
      if (++idx[ax] < out_shape[ax]) {
        offset += strides[ax];
        break;
      }
      offset -= strides[ax] * (out_shape[ax] - 1);
      idx[ax] = 0;
    }
  }
  return out;
}

Array scale_by(const Array& a, const Array& s, DType dt) {
  Array x = a.astype(dt);
  Array out(dt, a.shape());
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T f = s.astype(dt).template data<T>()[0];
    const T* p = x.template data<T>();
    T* q = out.template data<T>();
    for (int64_t i = 0; i < x.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        q[i] = p[i] && f;
      } else if constexpr (std::is_same_v<T, int64_t>) {
        q[i] = static_cast<int64_t>(static_cast<uint64_t>(p[i]) * static_cast<uint64_t>(f));
      } else {
        q[i] = p[i] * f;
      }
    }
  });
  return out;
}

// Matrices of this order and more are factored and solved by LAPACK (blocked,
// on BLAS 3); smaller ones by the loops below, which cost less than the
// call and the layout conversions.
constexpr int64_t kLapackOrder = 48;

bool lu_factor(double* m, int64_t n, int64_t* pivots, int* sign) {
  *sign = 1;
  if (n >= kLapackOrder) {
    const int info = lapack_lu(n, m, pivots);  // 1-based interchanges
    for (int64_t i = 0; i < n; ++i) {
      pivots[i] -= 1;
      if (pivots[i] != i) *sign = -*sign;
    }
    return info == 0;
  }
  bool regular = true;
  for (int64_t col = 0; col < n; ++col) {
    int64_t best = col;
    double best_abs = std::fabs(m[col * n + col]);
    for (int64_t r = col + 1; r < n; ++r) {
      double v = std::fabs(m[r * n + col]);
      if (v > best_abs) {
        best_abs = v;
        best = r;
      }
    }
    pivots[col] = best;
    if (best != col) {
      std::swap_ranges(m + col * n, m + (col + 1) * n, m + best * n);
      *sign = -*sign;
    }
    const double p = m[col * n + col];
    if (p == 0.0) {
      regular = false;
      continue;
    }
    for (int64_t r = col + 1; r < n; ++r) {
      double f = m[r * n + col] / p;
      m[r * n + col] = f;
      if (f == 0.0) continue;
      for (int64_t j = col + 1; j < n; ++j) m[r * n + j] -= f * m[col * n + j];
    }
  }
  return regular;
}

void lu_solve(const double* lu, const int64_t* pivots, int64_t n, double* x, int64_t nrhs) {
  if (n >= kLapackOrder) {
    lapack_getrs(n, nrhs, lu, pivots, x);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (pivots[i] != i) std::swap_ranges(x + i * nrhs, x + (i + 1) * nrhs, x + pivots[i] * nrhs);
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < i; ++p) {
      double l = lu[i * n + p];
      if (l == 0.0) continue;
      for (int64_t j = 0; j < nrhs; ++j) x[i * nrhs + j] -= l * x[p * nrhs + j];
    }
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    for (int64_t p = i + 1; p < n; ++p) {
      double u = lu[i * n + p];
      if (u == 0.0) continue;
      for (int64_t j = 0; j < nrhs; ++j) x[i * nrhs + j] -= u * x[p * nrhs + j];
    }
    const double d = lu[i * n + i];
    for (int64_t j = 0; j < nrhs; ++j) x[i * nrhs + j] /= d;
  }
}

Array trace(const Array& a, int64_t offset, int axis1, int axis2) {
  const int nd = a.ndim();
  std::vector<int> perm;
  Shape out_shape;
  for (int i = 0; i < nd; ++i) {
    if (i != axis1 && i != axis2) {
      perm.push_back(i);
      out_shape.push_back(a.shape()[i]);
    }
  }
  perm.push_back(axis1);
  perm.push_back(axis2);
  const DType out_dt = is_floating(a.dtype()) ? a.dtype() : DType::int64;
  Array x = permute_axes(a.astype(out_dt), perm);
  const int64_t rows = a.shape()[axis1], cols = a.shape()[axis2];
  Array out(out_dt, out_shape);
  // Diagonal element d sits at (d - min(offset, 0), d + max(offset, 0)).
  // Offsets beyond the matrix are clamped first: -INT64_MIN would overflow.
  const int64_t r0 = offset < 0 ? (offset <= -rows ? rows : -offset) : 0;
  const int64_t c0 = offset > 0 ? (offset >= cols ? cols : offset) : 0;
  const int64_t len = (r0 >= rows || c0 >= cols) ? 0 : std::min(rows - r0, cols - c0);
  dispatch(out_dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      const T* p = x.template data<T>();
      T* q = out.template data<T>();
      for (int64_t o = 0; o < out.size(); ++o) {
        const T* m = p + o * rows * cols;
        if constexpr (std::is_same_v<T, int64_t>) {
          uint64_t s = 0;
          for (int64_t d = 0; d < len; ++d) s += static_cast<uint64_t>(m[(r0 + d) * cols + c0 + d]);
          q[o] = static_cast<int64_t>(s);
        } else {
          T s = 0;
          for (int64_t d = 0; d < len; ++d) s += m[(r0 + d) * cols + c0 + d];
          q[o] = s;
        }
      }
    }
  });
  return out;
}

double vector_norm(const double* x, int64_t n, double ord) {
  if (std::isinf(ord)) {
    double best = ord > 0 ? 0.0 : std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      double v = std::fabs(x[i]);
      if (std::isnan(v)) return v;
      best = ord > 0 ? std::max(best, v) : std::min(best, v);
    }
    return best;
  }
  if (ord == 0.0) {
    double count = 0;
    for (int64_t i = 0; i < n; ++i) count += x[i] != 0.0;
    return count;
  }
  double s = 0;
  if (ord == 1.0) {
    for (int64_t i = 0; i < n; ++i) s += std::fabs(x[i]);
    return s;
  }
  if (ord == 2.0) {
    for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
    return std::sqrt(s);
  }
  for (int64_t i = 0; i < n; ++i) s += std::pow(std::fabs(x[i]), ord);
  return std::pow(s, 1.0 / ord);
}

double matrix_norm(const double* x, int64_t rows, int64_t cols, MatrixNorm kind) {
  if (rows == 0 || cols == 0) return 0.0;
  switch (kind) {
    case MatrixNorm::frobenius: return vector_norm(x, rows * cols, 2.0);
    case MatrixNorm::max_col_sum:
    case MatrixNorm::min_col_sum: {
      std::vector<double> sums(cols, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) sums[c] += std::fabs(x[r * cols + c]);
      }
      return kind == MatrixNorm::max_col_sum ? *std::max_element(sums.begin(), sums.end())
                                             : *std::min_element(sums.begin(), sums.end());
    }
    case MatrixNorm::max_row_sum:
    case MatrixNorm::min_row_sum: {
      std::vector<double> sums(rows, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) sums[r] += std::fabs(x[r * cols + c]);
      }
      return kind == MatrixNorm::max_row_sum ? *std::max_element(sums.begin(), sums.end())
                                             : *std::min_element(sums.begin(), sums.end());
    }
  }
  return 0.0;
}

}  // namespace tessera::kernels
