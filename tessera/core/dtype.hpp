// Element types of arrays, their names, sizes and NumPy's promotion rules.
//
// Arrays hold any of NumPy's numeric types (plus bfloat16). Kernels are
// written for four *compute* types only (bool, int64, float32, float64) and
// complex128 where a primitive supports complex numbers; every other dtype is
// a *storage* type: a primitive's arguments are converted to the compute type
// of their NumPy result dtype and its result is stored back in that dtype
// (registry.cpp, "Storage dtypes"). Integer arithmetic done in int64 and
// truncated to a narrower type gives exactly NumPy's wrap-around; float16 and
// bfloat16 are computed in float32 and rounded once, as NumPy computes half.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tessera {

// The element types an Array can hold. The first four keep their historical
// numbers (they appear in files and messages between localities).
enum class DType : uint8_t {
  bool_ = 0,
  int64 = 1,
  float32 = 2,
  float64 = 3,
  int8 = 4,
  int16 = 5,
  int32 = 6,
  uint8 = 7,
  uint16 = 8,
  uint32 = 9,
  uint64 = 10,
  float16 = 11,
  bfloat16 = 12,
  complex64 = 13,
  complex128 = 14,
};

inline constexpr int kNumDTypes = 15;

// NumPy's name of a dtype ("bool", "int8", ..., "complex128"; "bfloat16").
std::string_view dtype_name(DType dt);

// Parses a dtype name; accepts NumPy's names, aliases and type codes
// ("float" = float64, "int" = int64, "i4", "u1", "f2", "c16", "half",
// "complex", ...). Throws TypeError naming `op` for unknown names.
DType dtype_from_name(std::string_view name, std::string_view op = "dtype");

// Size in bytes of one element.
size_t dtype_size(DType dt);

inline bool is_signed_integer(DType dt) {
  return dt == DType::int64 || dt == DType::int8 || dt == DType::int16 || dt == DType::int32;
}
inline bool is_unsigned(DType dt) {
  return dt == DType::uint8 || dt == DType::uint16 || dt == DType::uint32 || dt == DType::uint64;
}
inline bool is_integer(DType dt) { return is_signed_integer(dt) || is_unsigned(dt); }
inline bool is_complex(DType dt) { return dt == DType::complex64 || dt == DType::complex128; }
// Real floating types (float16, bfloat16, float32, float64).
inline bool is_floating(DType dt) {
  return dt == DType::float32 || dt == DType::float64 || dt == DType::float16 ||
         dt == DType::bfloat16;
}
inline bool is_inexact(DType dt) { return is_floating(dt) || is_complex(dt); }

// True for the types kernels compute in: bool, int64, float32, float64 and
// complex128.
inline bool is_compute_dtype(DType dt) {
  return dt == DType::bool_ || dt == DType::int64 || dt == DType::float32 || dt == DType::float64 ||
         dt == DType::complex128;
}

// The type a value of `dt` is computed in: narrower integers and uint64 in
// int64 (the bits, wrap-around preserved), float16/bfloat16 in float32,
// complex64 in complex128.
DType compute_dtype(DType dt);

// The smallest floating type that holds every value of an integer type, as
// NumPy picks for sqrt/true_divide of integers (int8 -> float16, int16 ->
// float32, int32/int64 -> float64); `dt` itself for floating types.
DType float_for(DType dt);

// The complex type of matching precision (float32 -> complex64, others ->
// complex128).
DType complex_for(DType dt);

// Bits of precision / range ordering used by promotion; exposed for tests.
// NumPy 2's result type of a binary operation between two arrays (or strongly
// typed scalars): int8 + uint8 -> int16, int64 + uint64 -> float64,
// int16 + float16 -> float32, float32 + complex128 -> complex128.
// bfloat16 (no NumPy type) promotes like float16 with integers, and to
// float32 with float16.
DType promote(DType a, DType b);

// True when every value of `from` is representable in `to` (NumPy's
// can_cast(from, to, "safe")).
bool can_cast_safe(DType from, DType to);

// NumPy's casting="same_kind": safe casts, and casts within a kind or down
// the order bool < unsigned/signed integers < floats < complex.
bool can_cast_same_kind(DType from, DType to);

// The 16-bit floating types, stored as their bits.
struct float16_t {
  uint16_t bits;
};
struct bfloat16_t {
  uint16_t bits;
};

float half_to_float(uint16_t bits);
uint16_t float_to_half(float v);
uint16_t double_to_half(double v);
inline float bfloat_to_float(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bfloat(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

// The shortest decimal (as a double) that reads back as the same float16 or
// bfloat16 value `v`: how NumPy prints them (np.float16(0.1) is "0.1", not
// its float64 value 0.0999755859375); `v` itself when not finite.
double shortest_decimal_16(double v, DType dt);

// The C++ type stored for each dtype.
template <DType D>
struct dtype_traits;
template <>
struct dtype_traits<DType::bool_> {
  using type = bool;
};
template <>
struct dtype_traits<DType::int64> {
  using type = int64_t;
};
template <>
struct dtype_traits<DType::float32> {
  using type = float;
};
template <>
struct dtype_traits<DType::float64> {
  using type = double;
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() {
  return DType::bool_;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::int64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::float64;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::int8;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::int16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::int32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::uint8;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::uint16;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::uint32;
}
template <>
constexpr DType dtype_of<uint64_t>() {
  return DType::uint64;
}
template <>
constexpr DType dtype_of<float16_t>() {
  return DType::float16;
}
template <>
constexpr DType dtype_of<bfloat16_t>() {
  return DType::bfloat16;
}
template <>
constexpr DType dtype_of<std::complex<float>>() {
  return DType::complex64;
}
template <>
constexpr DType dtype_of<std::complex<double>>() {
  return DType::complex128;
}

// A value standing for a C++ element type, passed to visitors.
template <class T>
struct TypeTag {
  using type = T;
};

// Thrown by dispatch() for a dtype the calling kernel has no loop for.
[[noreturn]] void unsupported_dtype(DType dt, const char* where);

// Calls f(TypeTag<T>{}) with T the element type of `dt` (one of the four
// real compute types) and returns its result:
//   dispatch(a.dtype(), [&](auto tag) { using T = typename decltype(tag)::type; ... });
// Other dtypes raise TypeError: primitives see them converted (registry.cpp).
template <class F>
decltype(auto) dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::bool_:
      return f(TypeTag<bool>{});
    case DType::int64:
      return f(TypeTag<int64_t>{});
    case DType::float32:
      return f(TypeTag<float>{});
    case DType::float64:
      return f(TypeTag<double>{});
    default:
      unsupported_dtype(dt, "this kernel");
  }
}

// The same over every dtype (element conversion, printing, I/O).
template <class F>
decltype(auto) dispatch_all(DType dt, F&& f) {
  switch (dt) {
    case DType::int8:
      return f(TypeTag<int8_t>{});
    case DType::int16:
      return f(TypeTag<int16_t>{});
    case DType::int32:
      return f(TypeTag<int32_t>{});
    case DType::uint8:
      return f(TypeTag<uint8_t>{});
    case DType::uint16:
      return f(TypeTag<uint16_t>{});
    case DType::uint32:
      return f(TypeTag<uint32_t>{});
    case DType::uint64:
      return f(TypeTag<uint64_t>{});
    case DType::float16:
      return f(TypeTag<float16_t>{});
    case DType::bfloat16:
      return f(TypeTag<bfloat16_t>{});
    case DType::complex64:
      return f(TypeTag<std::complex<float>>{});
    case DType::complex128:
      return f(TypeTag<std::complex<double>>{});
    default:
      return dispatch(dt, std::forward<F>(f));  // bool, int64, float32, float64
  }
}

}  // namespace tessera
