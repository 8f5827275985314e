#include "tessera/kernels/vmath.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__)
#include <immintrin.h>
#define TESSERA_LIBMVEC 1
#endif

namespace tessera::kernels {

// The functions of VecFn, in its order.
#define TESSERA_VMATH_FUNCTIONS \
  X(exp)                        \
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

// Per function fn: fn_avx512, fn_avx2 and fn_sse2 for float and double.
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
TESSERA_VMATH_FUNCTIONS
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

}  // namespace tessera::kernels
