// Elementwise operations on Values: the entry points the primitives and the
// language compiler (for infix operators) call. They resolve dtypes (NumPy 2 /
// NEP 50), broadcast, and cut large outputs into tiles with parallel_for.
#pragma once

#include "tessera/core/value.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera {

// a OP b with NumPy broadcasting and promotion. Two Python-like scalars give a
// scalar with Python's rules (int + int -> int, int / int -> float, 2 ** -1 -> 0.5;
// int overflow raises ValueError). `opname` (default op_name(op)) names errors.
// Operands are taken by value: an array moved in and held nowhere else has its
// buffer reused for the result when dtype and shape allow.
Value binary_op(BinaryOp op, Value a, Value b, const char* opname = nullptr);

// PrimitiveSpec::scalar_binary for a primitive computing `op` (binary_op on
// two scalars, errors named by the primitive).
struct PrimitiveSpec;
using ScalarBinary = Value (*)(const PrimitiveSpec&, const Value&, const Value&);
ScalarBinary scalar_binary_of(BinaryOp op);

// OP x elementwise; a Python-like scalar gives a scalar (abs(-3) -> 3, sqrt(4) -> 2.0).
// A uniquely held array moved in may be updated in place, as in binary_op.
Value unary_op(UnaryOp op, Value x, const char* opname = nullptr);

// The same on arrays (no scalar rules), for C++ callers that hold Arrays.
Array binary_array(BinaryOp op, const Array& a, const Array& b, const char* opname = nullptr);
Array unary_array(UnaryOp op, const Array& x, const char* opname = nullptr);

// Converts an array to `dtype` (NumPy casting), in tiles when large; returns
// `a` itself when the dtype already matches.
Array cast_array(const Array& a, DType dtype);
// The same for an array the caller gives up: moved through when its dtype is already `dtype`.
Array cast_array(Array&& a, DType dtype);

// Converts a numeric Value to `dtype`: Python-like scalars stay scalars where a
// scalar kind exists (bool, int, float), otherwise a 0-d array results.
Value cast_value(const Value& v, DType dtype, const char* opname);

// cond ? x : y elementwise with three-way broadcasting; all-scalar operands
// give a scalar of the promoted kind.
Value where_op(const Value& cond, const Value& x, const Value& y, const char* opname = "where");

// |a - b| <= atol + rtol * |b| elementwise (NumPy's isclose), as bool.
Value isclose_op(const Value& a, const Value& b, double rtol, double atol, bool equal_nan,
                 const char* opname = "isclose");

}  // namespace tessera
