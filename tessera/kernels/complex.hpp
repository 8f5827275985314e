// Complex numbers (complex128): elementwise kernels and helpers that split a
// complex array into real parts for the primitives that are linear in their
// data (registry.cpp, run_complex).
#pragma once

#include "tessera/core/array.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera::kernels {

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
