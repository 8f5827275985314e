#include "tessera/core/dtype.hpp"

#include "tessera/core/error.hpp"

namespace tessera {

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::bool_: return "bool";
    case DType::int64: return "int64";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
  }
  return "?";
}

DType dtype_from_name(std::string_view name, std::string_view op) {
  if (name == "bool" || name == "bool_") return DType::bool_;
  if (name == "int64" || name == "int" || name == "i8") return DType::int64;
  if (name == "float32" || name == "f4" || name == "single") return DType::float32;
  if (name == "float64" || name == "float" || name == "f8" || name == "double") {
    return DType::float64;
  }
  throw TypeError(error_message("[", op, "] unknown dtype '", name,
                                "': expected one of bool, int64, float32, float64"));
}

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::bool_: return 1;
    case DType::int64: return 8;
    case DType::float32: return 4;
    case DType::float64: return 8;
  }
  return 8;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  // int64 cannot be represented exactly in float32, so NumPy widens to float64.
  if ((a == DType::int64 && b == DType::float32) || (a == DType::float32 && b == DType::int64)) {
    return DType::float64;
  }
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

}  // namespace tessera
