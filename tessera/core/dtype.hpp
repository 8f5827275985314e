// Element types of arrays, their names, sizes and NumPy's promotion rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// The element types an Array can hold, ordered by promotion rank.
enum class DType : uint8_t { bool_ = 0, int64 = 1, float32 = 2, float64 = 3 };

inline constexpr int kNumDTypes = 4;

// NumPy's name of a dtype ("bool", "int64", "float32", "float64").
std::string_view dtype_name(DType dt);

// Parses a dtype name; accepts NumPy's names and aliases ("float" = float64,
// "int" = int64, "bool_"). Throws TypeError naming `op` for unknown names.
DType dtype_from_name(std::string_view name, std::string_view op = "dtype");

// Size in bytes of one element.
size_t dtype_size(DType dt);

inline bool is_floating(DType dt) { return dt == DType::float32 || dt == DType::float64; }
inline bool is_integer(DType dt) { return dt == DType::int64; }

// NumPy's result type of a binary operation between two arrays.
// (int64 with float32 gives float64, as NumPy does.)
DType promote(DType a, DType b);

// The C++ type stored for each dtype.
template <DType D> struct dtype_traits;
template <> struct dtype_traits<DType::bool_> { using type = bool; };
template <> struct dtype_traits<DType::int64> { using type = int64_t; };
template <> struct dtype_traits<DType::float32> { using type = float; };
template <> struct dtype_traits<DType::float64> { using type = double; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::bool_; }
template <> constexpr DType dtype_of<int64_t>() { return DType::int64; }
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }

// A value standing for a C++ element type, passed to visitors.
template <class T> struct TypeTag { using type = T; };

// Calls f(TypeTag<T>{}) with T the element type of `dt` and returns its result.
//   dispatch(a.dtype(), [&](auto tag) { using T = typename decltype(tag)::type; ... });
template <class F>
decltype(auto) dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::bool_: return f(TypeTag<bool>{});
    case DType::int64: return f(TypeTag<int64_t>{});
    case DType::float32: return f(TypeTag<float>{});
    case DType::float64: break;
  }
  return f(TypeTag<double>{});
}

}  // namespace tessera
