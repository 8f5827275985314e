// Complex numbers (complex128): elementwise kernels and helpers that split a
// complex array into real parts for the primitives that are linear in their
// data (registry.cpp, run_complex).
#pragma once

#include <cmath>
#include <complex>

#include "tessera/core/array.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera::kernels {

// (a+bi)(c+di) without std::complex's NaN/infinity recovery: NumPy's product
// and CPython's _Py_c_prod.
inline std::complex<double> complex_product(std::complex<double> x, std::complex<double> y) {
  return {x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real()};
}

// x / y as NumPy's complex division loop computes it (the divisor scaled by
// its larger part, then its reciprocal multiplied in); by zero its inf or nan.
inline std::complex<double> numpy_quotient(std::complex<double> x, std::complex<double> y) {
  const double abr = std::fabs(y.real()), abi = std::fabs(y.imag());
  if (abr >= abi) {
    if (abr == 0.0 && abi == 0.0) return {x.real() / abr, x.imag() / abr};
    const double rat = y.imag() / y.real();
    const double scl = 1.0 / (y.real() + y.imag() * rat);
    return {(x.real() + x.imag() * rat) * scl, (x.imag() - x.real() * rat) * scl};
  }
  const double rat = y.real() / y.imag();
  const double scl = 1.0 / (y.imag() + y.real() * rat);
  return {(x.real() * rat + x.imag()) * scl, (x.imag() * rat - x.real()) * scl};
}

// x OP y on complex128 (broadcasting): add, subtract, multiply, divide, power,
// equal, not_equal; other operations raise TypeError naming `opname`.
Array complex_binary(BinaryOp op, const Array& a, const Array& b, const char* opname);

// OP z: negative, positive, abs (float64), sqrt, square, exp, log, sin, cos,
// tanh, reciprocal, isnan/isinf/isfinite (bool); others raise TypeError.
Array complex_unary(UnaryOp op, const Array& a, const char* opname);

// Part of `a` as a new array: 0 real, 1 imag (float64), 2 conjugate
// (complex128), 3 angle in radians (float64).
Array complex_part(const Array& a, int part);

// re + 1j * im (broadcast), complex128.
Array make_complex(const Array& re, const Array& im);

}  // namespace tessera::kernels
