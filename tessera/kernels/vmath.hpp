// Vector math: the transcendental functions of n float32 or float64 values
// at once, through glibc's vector math library (libmvec: its AVX-512, AVX2
// or SSE2 variants, the widest the CPU has), ten to forty times faster than a
// loop of std::exp / std::erf / std::tanh ..., which GCC does not vectorise
// (float32 exp 0.25-0.5 ns per element on one core, against 10-20 ns).
//
// Every element goes through the same vector function, the last partial
// vector padded: an element's bits depend on its value only, never on where
// a tile starts or whether it is alone (tiled, fused, scalar and
// deterministic runs rely on this). libmvec's results are within 4 ulp of
// the correctly rounded ones (glibc's manual lists each); they may differ in
// the last bits from the scalar std:: functions. Elsewhere than x86-64 glibc
// these are the std:: loops.
//
// x and y may be the same array (in place); otherwise they must not overlap.
#pragma once

#include <cstdint>

namespace tessera::kernels {

// The functions, each as name (for NumPy's name, see elementwise.hpp).
enum class VecFn : uint8_t {
  exp,
  exp2,
  expm1,
  log,
  log2,
  log10,
  log1p,
  sin,
  cos,
  tan,
  asin,
  acos,
  atan,
  sinh,
  cosh,
  tanh,
  asinh,
  acosh,
  atanh,
  erf,
};

void vmath(VecFn f, const float* x, float* y, int64_t n);
void vmath(VecFn f, const double* x, double* y, int64_t n);

template <class T>
inline void vexp(const T* x, T* y, int64_t n) {
  vmath(VecFn::exp, x, y, n);
}
template <class T>
inline void verf(const T* x, T* y, int64_t n) {
  vmath(VecFn::erf, x, y, n);
}
template <class T>
inline void vtanh(const T* x, T* y, int64_t n) {
  vmath(VecFn::tanh, x, y, n);
}

}  // namespace tessera::kernels
