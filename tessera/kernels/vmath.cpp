#include "tessera/kernels/vmath.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__)
#include <immintrin.h>
#define TESSERA_LIBMVEC 1
#endif

namespace tessera::kernels {

// The functions of VecFn, in its order: exp, then those whose loops call
// libmvec directly.
#define TESSERA_VMATH_FUNCTIONS \
  X(exp)                        \
  TESSERA_VMATH_PLAIN_FUNCTIONS

#define TESSERA_VMATH_PLAIN_FUNCTIONS \
  X(exp2)                       \
  X(expm1)                      \
  X(log)                        \
  X(log2)                       \
  X(log10)                      \
  X(log1p)                      \
  X(sin)                        \
  X(cos)                        \
  X(tan)                        \
  X(asin)                       \
  X(acos)                       \
  X(atan)                       \
  X(sinh)                       \
  X(cosh)                       \
  X(tanh)                       \
  X(asinh)                      \
  X(acosh)                      \
  X(atanh)                      \
  X(erf)

#ifdef TESSERA_LIBMVEC

// libmvec's entry points (the vector function ABI's names: b = SSE2, d = AVX2,
// e = AVX-512; N = lanes; v = one vector argument). libm.so links libmvec as
// needed.
extern "C" {
#define X(fn)                                                          \
  __m128 _ZGVbN4v_##fn##f(__m128);                                     \
  __m128d _ZGVbN2v_##fn(__m128d);                                      \
  __attribute__((target("avx2"))) __m256 _ZGVdN8v_##fn##f(__m256);     \
  __attribute__((target("avx2"))) __m256d _ZGVdN4v_##fn(__m256d);      \
  __attribute__((target("avx512f"))) __m512 _ZGVeN16v_##fn##f(__m512); \
  __attribute__((target("avx512f"))) __m512d _ZGVeN8v_##fn(__m512d);
TESSERA_VMATH_FUNCTIONS
#undef X
}

namespace {

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// y[i] = f(x[i]), a vector V of W elements T at a time; the last partial
// vector is padded with zeros, so every element goes through f. A macro, not
// a template: the loop must be compiled with its function's target (AVX2 for
// the 256-bit vectors).
#define TESSERA_VMATH_LOOP(T, V, W, f)                           \
  int64_t i = 0;                                                 \
  for (; i + (W) <= n; i += (W)) {                               \
    V v;                                                         \
    std::memcpy(&v, x + i, sizeof v);                            \
    v = f(v);                                                    \
    std::memcpy(y + i, &v, sizeof v);                            \
  }                                                              \
  if (i < n) {                                                   \
    T buf[W] = {};                                               \
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(T); \
    std::memcpy(buf, x + i, bytes);                              \
    V v;                                                         \
    std::memcpy(&v, buf, sizeof v);                              \
    v = f(v);                                                    \
    std::memcpy(buf, &v, sizeof v);                              \
    std::memcpy(y + i, buf, bytes);                              \
  }

using FloatLoop = void (*)(const float*, float*, int64_t);
using DoubleLoop = void (*)(const double*, double*, int64_t);

// libmvec's exp leaves its vector code for scalar calls (about 8x slower over
// a whole array) whenever a vector holds an argument out of its fast range,
// |x| > 87 in float32: attention scores masked with -1e9 are full of them.
// Arguments at or below -104 (float32) or -746 (float64) have exactly 0 as
// their exp (below half the smallest subnormal), which is what those calls
// return: they go in as 0 and come out as 0, so the bits are libmvec's.
__attribute__((target("avx512f"))) __m512 exp_screened(__m512 v) {
  const __mmask16 low = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-104.0f), _CMP_LE_OQ);
  const __m512 e = _ZGVeN16v_expf(_mm512_mask_blend_ps(low, v, _mm512_setzero_ps()));
  return _mm512_mask_blend_ps(low, e, _mm512_setzero_ps());
}
__attribute__((target("avx512f"))) __m512d exp_screened(__m512d v) {
  const __mmask8 low = _mm512_cmp_pd_mask(v, _mm512_set1_pd(-746.0), _CMP_LE_OQ);
  const __m512d e = _ZGVeN8v_exp(_mm512_mask_blend_pd(low, v, _mm512_setzero_pd()));
  return _mm512_mask_blend_pd(low, e, _mm512_setzero_pd());
}
__attribute__((target("avx2"))) __m256 exp_screened(__m256 v) {
  const __m256 low = _mm256_cmp_ps(v, _mm256_set1_ps(-104.0f), _CMP_LE_OQ);
  return _mm256_andnot_ps(low, _ZGVdN8v_expf(_mm256_andnot_ps(low, v)));
}
__attribute__((target("avx2"))) __m256d exp_screened(__m256d v) {
  const __m256d low = _mm256_cmp_pd(v, _mm256_set1_pd(-746.0), _CMP_LE_OQ);
  return _mm256_andnot_pd(low, _ZGVdN4v_exp(_mm256_andnot_pd(low, v)));
}
__m128 exp_screened(__m128 v) {
  const __m128 low = _mm_cmple_ps(v, _mm_set1_ps(-104.0f));
  return _mm_andnot_ps(low, _ZGVbN4v_expf(_mm_andnot_ps(low, v)));
}
__m128d exp_screened(__m128d v) {
  const __m128d low = _mm_cmple_pd(v, _mm_set1_pd(-746.0));
  return _mm_andnot_pd(low, _ZGVbN2v_exp(_mm_andnot_pd(low, v)));
}

__attribute__((target("avx512f"))) void exp_avx512(const float* x, float* y, int64_t n) {
  TESSERA_VMATH_LOOP(float, __m512, 16, exp_screened)
}
__attribute__((target("avx512f"))) void exp_avx512(const double* x, double* y, int64_t n) {
  TESSERA_VMATH_LOOP(double, __m512d, 8, exp_screened)
}
__attribute__((target("avx2"))) void exp_avx2(const float* x, float* y, int64_t n) {
  TESSERA_VMATH_LOOP(float, __m256, 8, exp_screened)
}
__attribute__((target("avx2"))) void exp_avx2(const double* x, double* y, int64_t n) {
  TESSERA_VMATH_LOOP(double, __m256d, 4, exp_screened)
}
void exp_sse2(const float* x, float* y, int64_t n) {
  TESSERA_VMATH_LOOP(float, __m128, 4, exp_screened)
}
void exp_sse2(const double* x, double* y, int64_t n) {
  TESSERA_VMATH_LOOP(double, __m128d, 2, exp_screened)
}

// Per other function fn: fn_avx512, fn_avx2 and fn_sse2 for float and double.
#define X(fn)                                                                                  \
  __attribute__((target("avx512f"))) void fn##_avx512(const float* x, float* y, int64_t n) {   \
    TESSERA_VMATH_LOOP(float, __m512, 16, _ZGVeN16v_##fn##f)                                   \
  }                                                                                            \
  __attribute__((target("avx512f"))) void fn##_avx512(const double* x, double* y, int64_t n) { \
    TESSERA_VMATH_LOOP(double, __m512d, 8, _ZGVeN8v_##fn)                                      \
  }                                                                                            \
  __attribute__((target("avx2"))) void fn##_avx2(const float* x, float* y, int64_t n) {        \
    TESSERA_VMATH_LOOP(float, __m256, 8, _ZGVdN8v_##fn##f)                                     \
  }                                                                                            \
  __attribute__((target("avx2"))) void fn##_avx2(const double* x, double* y, int64_t n) {      \
    TESSERA_VMATH_LOOP(double, __m256d, 4, _ZGVdN4v_##fn)                                      \
  }                                                                                            \
  void fn##_sse2(const float* x, float* y, int64_t n) {                                        \
    TESSERA_VMATH_LOOP(float, __m128, 4, _ZGVbN4v_##fn##f)                                     \
  }                                                                                            \
  void fn##_sse2(const double* x, double* y, int64_t n) {                                      \
    TESSERA_VMATH_LOOP(double, __m128d, 2, _ZGVbN2v_##fn)                                      \
  }
TESSERA_VMATH_PLAIN_FUNCTIONS
#undef X
#undef TESSERA_VMATH_LOOP

// The loops of VecFn f, chosen once by the CPU.
template <class Loop>
Loop pick(Loop avx512, Loop avx2, Loop sse2) {
  return has_avx512() ? avx512 : has_avx2() ? avx2 : sse2;
}

const FloatLoop* float_loops() {
#define X(fn) pick<FloatLoop>(fn##_avx512, fn##_avx2, fn##_sse2),
  static const FloatLoop loops[] = {TESSERA_VMATH_FUNCTIONS};
#undef X
  return loops;
}

const DoubleLoop* double_loops() {
#define X(fn) pick<DoubleLoop>(fn##_avx512, fn##_avx2, fn##_sse2),
  static const DoubleLoop loops[] = {TESSERA_VMATH_FUNCTIONS};
#undef X
  return loops;
}

}  // namespace

void vmath(VecFn f, const float* x, float* y, int64_t n) {
  float_loops()[static_cast<int>(f)](x, y, n);
}
void vmath(VecFn f, const double* x, double* y, int64_t n) {
  double_loops()[static_cast<int>(f)](x, y, n);
}

#else

namespace {

template <class T>
void scalar_loop(VecFn f, const T* x, T* y, int64_t n) {
  switch (f) {
#define X(fn)                                             \
  case VecFn::fn:                                         \
    for (int64_t i = 0; i < n; ++i) y[i] = std::fn(x[i]); \
    return;
    TESSERA_VMATH_FUNCTIONS
#undef X
  }
}

}  // namespace

void vmath(VecFn f, const float* x, float* y, int64_t n) { scalar_loop(f, x, y, n); }
void vmath(VecFn f, const double* x, double* y, int64_t n) { scalar_loop(f, x, y, n); }

#endif

#undef TESSERA_VMATH_FUNCTIONS
#undef TESSERA_VMATH_PLAIN_FUNCTIONS

}  // namespace tessera::kernels
