#include "tessera/core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kInfo[kNumDTypes] = {
    {DType::bool_, "bool", 1},
    {DType::int64, "int64", 8},
    {DType::float32, "float32", 4},
    {DType::float64, "float64", 8},
    {DType::int8, "int8", 1},
    {DType::int16, "int16", 2},
    {DType::int32, "int32", 4},
    {DType::uint8, "uint8", 1},
    {DType::uint16, "uint16", 2},
    {DType::uint32, "uint32", 4},
    {DType::uint64, "uint64", 8},
    {DType::float16, "float16", 2},
    {DType::bfloat16, "bfloat16", 2},
    {DType::complex64, "complex64", 8},
    {DType::complex128, "complex128", 16},
};

struct Alias {
  const char* name;
  DType dtype;
};

// NumPy's aliases and type codes (np.dtype("i4") etc.), and Python's types.
constexpr Alias kAliases[] = {
    {"bool_", DType::bool_},      {"?", DType::bool_},
    {"b1", DType::bool_},         {"int", DType::int64},
    {"i8", DType::int64},         {"long", DType::int64},
    {"intp", DType::int64},       {"int_", DType::int64},
    {"longlong", DType::int64},   {"q", DType::int64},
    {"l", DType::int64},          {"i1", DType::int8},
    {"byte", DType::int8},        {"b", DType::int8},
    {"i2", DType::int16},         {"short", DType::int16},
    {"h", DType::int16},          {"i4", DType::int32},
    {"intc", DType::int32},       {"i", DType::int32},
    {"u1", DType::uint8},         {"ubyte", DType::uint8},
    {"B", DType::uint8},          {"u2", DType::uint16},
    {"ushort", DType::uint16},    {"H", DType::uint16},
    {"u4", DType::uint32},        {"uintc", DType::uint32},
    {"I", DType::uint32},         {"u8", DType::uint64},
    {"uint", DType::uint64},      {"uintp", DType::uint64},
    {"ulonglong", DType::uint64}, {"Q", DType::uint64},
    {"L", DType::uint64},         {"f2", DType::float16},
    {"half", DType::float16},     {"e", DType::float16},
    {"f4", DType::float32},       {"single", DType::float32},
    {"f", DType::float32},        {"float", DType::float64},
    {"f8", DType::float64},       {"double", DType::float64},
    {"d", DType::float64},        {"float_", DType::float64},
    {"c8", DType::complex64},     {"csingle", DType::complex64},
    {"F", DType::complex64},      {"complex", DType::complex128},
    {"c16", DType::complex128},   {"cdouble", DType::complex128},
    {"D", DType::complex128},     {"complex_", DType::complex128},
    {"bf16", DType::bfloat16},
};

// 0 bool, 1 unsigned, 2 signed, 3 floating, 4 complex (NumPy's kind order).
int kind(DType dt) {
  if (dt == DType::bool_) return 0;
  if (is_unsigned(dt)) return 1;
  if (is_signed_integer(dt)) return 2;
  if (is_floating(dt)) return 3;
  return 4;
}

int int_bits(DType dt) { return static_cast<int>(dtype_size(dt)) * 8; }

DType signed_of_bits(int bits) {
  switch (bits) {
    case 8:
      return DType::int8;
    case 16:
      return DType::int16;
    case 32:
      return DType::int32;
    default:
      return DType::int64;
  }
}

// Precision class of a real type for float promotion: 16 (float16 or
// bfloat16), 32, 64; `dt` a float.
int float_bits(DType dt) {
  if (dt == DType::float16 || dt == DType::bfloat16) return 16;
  return dt == DType::float32 ? 32 : 64;
}

DType float_of_bits(int bits) {
  return bits <= 16 ? DType::float16 : bits == 32 ? DType::float32 : DType::float64;
}

// The real precision (16/32/64) a value of `dt` needs in a float.
int needed_float_bits(DType dt) {
  if (is_complex(dt)) return dt == DType::complex64 ? 32 : 64;
  if (is_floating(dt)) return float_bits(dt);
  return float_bits(float_for(dt));
}

}  // namespace

void unsupported_dtype(DType dt, const char* where) {
  throw TypeError(
      error_message("[", where, "] dtype ", dtype_name(dt), " is not supported by this operation"));
}

std::string_view dtype_name(DType dt) {
  auto i = static_cast<size_t>(dt);
  return i < static_cast<size_t>(kNumDTypes) ? kInfo[i].name : "?";
}

DType dtype_from_name(std::string_view name, std::string_view op) {
  for (const DTypeInfo& d : kInfo) {
    if (name == d.name) return d.dtype;
  }
  // Byte-order prefixes of NumPy's type strings ("<f8", "=i4", "|b1").
  std::string_view bare = name;
  if (!bare.empty() && (bare[0] == '<' || bare[0] == '=' || bare[0] == '|')) bare.remove_prefix(1);
  for (const Alias& a : kAliases) {
    if (bare == a.name) return a.dtype;
  }
  for (const DTypeInfo& d : kInfo) {
    if (bare == d.name) return d.dtype;
  }
  std::string known;
  for (const DTypeInfo& d : kInfo) known += (known.empty() ? "" : ", ") + std::string(d.name);
  throw TypeError(error_message("[", op, "] unknown dtype '", name, "': expected one of ", known));
}

size_t dtype_size(DType dt) {
  auto i = static_cast<size_t>(dt);
  return i < static_cast<size_t>(kNumDTypes) ? kInfo[i].size : 8;
}

DType compute_dtype(DType dt) {
  if (dt == DType::bool_ || dt == DType::float32 || dt == DType::float64) return dt;
  if (is_integer(dt)) return DType::int64;
  if (is_complex(dt)) return DType::complex128;
  return DType::float32;  // float16, bfloat16
}

DType float_for(DType dt) {
  if (is_inexact(dt)) return dt;
  if (dt == DType::bool_ || dt == DType::int8 || dt == DType::uint8) return DType::float16;
  if (dt == DType::int16 || dt == DType::uint16) return DType::float32;
  return DType::float64;
}

DType complex_for(DType dt) {
  return needed_float_bits(dt) <= 32 ? DType::complex64 : DType::complex128;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  int ka = kind(a), kb = kind(b);
  if (ka == 0) return b;
  if (kb == 0) return a;
  if (ka > kb) {
    std::swap(a, b);
    std::swap(ka, kb);
  }
  // Now kind(a) <= kind(b).
  if (kb <= 2) {  // two integers
    if (ka == kb) return int_bits(a) >= int_bits(b) ? a : b;
    // a unsigned, b signed: a signed type wider than a, if any.
    if (int_bits(b) > int_bits(a)) return b;
    return int_bits(a) == 64 ? DType::float64 : signed_of_bits(2 * int_bits(a));
  }
  if (kb == 3) {  // b real float, a integer or float
    if (ka == 3) {
      int bits = std::max(float_bits(a), float_bits(b));
      if (bits == 16) return DType::float32;  // float16 with bfloat16
      return float_of_bits(bits);
    }
    int need = needed_float_bits(a);
    if (need <= float_bits(b)) return b;
    return float_of_bits(need);
  }
  // b complex
  return std::max(needed_float_bits(a), needed_float_bits(b)) <= 32 ? DType::complex64
                                                                    : DType::complex128;
}

bool can_cast_safe(DType from, DType to) { return promote(from, to) == to; }

bool can_cast_same_kind(DType from, DType to) {
  return can_cast_safe(from, to) || kind(from) <= kind(to) || (kind(from) == 2 && kind(to) == 2);
}

float half_to_float(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      out = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

uint16_t double_to_half(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000u : 0;
  double a = std::fabs(v);
  if (std::isnan(v)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (a < 5.9604644775390625e-08 / 2) return sign;                 // below half the least subnormal
  int e;
  std::frexp(a, &e);                                   // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;                                     // a = 1.x * 2^exp
  if (exp < -14) {                                     // subnormal: units of 2^-24
    double units = std::nearbyint(std::ldexp(a, 24));  // ties to even (default rounding)
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
  }
  double mant = std::nearbyint(std::ldexp(a, 10 - exp));  // in [1024, 2048]
  if (mant >= 2048.0) {
    mant /= 2;
    ++exp;
  }
  if (exp > 15) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | ((exp + 15) << 10) | (static_cast<uint16_t>(mant) & 0x3ffu));
}

uint16_t float_to_half(float v) { return double_to_half(static_cast<double>(v)); }

double shortest_decimal_16(double v, DType dt) {
  if (!std::isfinite(v)) return v;
  auto bits = [dt](double x) {
    return dt == DType::float16 ? double_to_half(x) : float_to_bfloat(static_cast<float>(x));
  };
  for (int p = 1; p <= 6; ++p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    double r = std::strtod(buf, nullptr);
    if (bits(r) == bits(v)) return r;
  }
  return v;
}

}  // namespace tessera
