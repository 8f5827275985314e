#include "tessera/kernels/elementwise.hpp"

#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/simd.hpp"

namespace tessera {

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::subtract: return "subtract";
    case BinaryOp::multiply: return "multiply";
    case BinaryOp::divide: return "divide";
    case BinaryOp::floor_divide: return "floor_divide";
    case BinaryOp::mod: return "mod";
    case BinaryOp::power: return "power";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
    case BinaryOp::fmax: return "fmax";
    case BinaryOp::fmin: return "fmin";
    case BinaryOp::arctan2: return "arctan2";
    case BinaryOp::hypot: return "hypot";
    case BinaryOp::copysign: return "copysign";
    case BinaryOp::equal: return "equal";
    case BinaryOp::not_equal: return "not_equal";
    case BinaryOp::less: return "less";
    case BinaryOp::less_equal: return "less_equal";
    case BinaryOp::greater: return "greater";
    case BinaryOp::greater_equal: return "greater_equal";
    case BinaryOp::logical_and: return "logical_and";
    case BinaryOp::logical_or: return "logical_or";
    case BinaryOp::logical_xor: return "logical_xor";
  }
  return "?";
}

const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::negative: return "negative";
    case UnaryOp::positive: return "positive";
    case UnaryOp::abs: return "abs";
    case UnaryOp::sign: return "sign";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::square: return "square";
    case UnaryOp::exp: return "exp";
    case UnaryOp::exp2: return "exp2";
    case UnaryOp::expm1: return "expm1";
    case UnaryOp::log: return "log";
    case UnaryOp::log2: return "log2";
    case UnaryOp::log10: return "log10";
    case UnaryOp::log1p: return "log1p";
    case UnaryOp::sin: return "sin";
    case UnaryOp::cos: return "cos";
    case UnaryOp::tan: return "tan";
    case UnaryOp::arcsin: return "arcsin";
    case UnaryOp::arccos: return "arccos";
    case UnaryOp::arctan: return "arctan";
    case UnaryOp::sinh: return "sinh";
    case UnaryOp::cosh: return "cosh";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::arcsinh: return "arcsinh";
    case UnaryOp::arccosh: return "arccosh";
    case UnaryOp::arctanh: return "arctanh";
    case UnaryOp::floor: return "floor";
    case UnaryOp::ceil: return "ceil";
    case UnaryOp::rint: return "rint";
    case UnaryOp::trunc: return "trunc";
    case UnaryOp::reciprocal: return "reciprocal";
    case UnaryOp::isnan: return "isnan";
    case UnaryOp::isinf: return "isinf";
    case UnaryOp::isfinite: return "isfinite";
    case UnaryOp::logical_not: return "logical_not";
    case UnaryOp::deg2rad: return "deg2rad";
    case UnaryOp::rad2deg: return "rad2deg";
  }
  return "?";
}

bool is_predicate(BinaryOp op) {
  switch (op) {
    case BinaryOp::equal:
    case BinaryOp::not_equal:
    case BinaryOp::less:
    case BinaryOp::less_equal:
    case BinaryOp::greater:
    case BinaryOp::greater_equal:
    case BinaryOp::logical_and:
    case BinaryOp::logical_or:
    case BinaryOp::logical_xor: return true;
    default: return false;
  }
}

}  // namespace tessera

namespace tessera::kernels {

double cost_ns(BinaryOp op) {
  switch (op) {
    case BinaryOp::divide: return 1.0;
    case BinaryOp::floor_divide:
    case BinaryOp::mod: return 5.0;
    case BinaryOp::power:
    case BinaryOp::arctan2: return 20.0;
    case BinaryOp::hypot: return 8.0;
    default: return 0.5;
  }
}

double cost_ns(UnaryOp op) {
  switch (op) {
    case UnaryOp::negative:
    case UnaryOp::positive:
    case UnaryOp::abs:
    case UnaryOp::sign:
    case UnaryOp::square:
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::rint:
    case UnaryOp::trunc:
    case UnaryOp::isnan:
    case UnaryOp::isinf:
    case UnaryOp::isfinite:
    case UnaryOp::logical_not:
    case UnaryOp::deg2rad:
    case UnaryOp::rad2deg: return 0.5;
    case UnaryOp::sqrt:
    case UnaryOp::reciprocal: return 1.5;
    default: {
      // exp .. arctanh of float32 run a vector at a time (vmath.hpp):
      // 0.3-1.3 ns per element measured on one core; float64's scalar
      // functions 10-20 ns (the cost is per operation, not per dtype).
      VecFn f;
      return vector_fn_of(op, f) ? 3.0 : 10.0;
    }
  }
}

DType binary_compute_dtype(BinaryOp op, DType common, const char* opname) {
  switch (op) {
    case BinaryOp::subtract:
      if (common == DType::bool_) {
        throw TypeError(error_message(
            "[", opname, "] boolean subtract is not supported: got two bool operands; ",
            "use logical_xor instead"));
      }
      return common;
    case BinaryOp::divide:
    case BinaryOp::arctan2:
    case BinaryOp::hypot:
    case BinaryOp::copysign: return is_floating(common) ? common : DType::float64;
    case BinaryOp::floor_divide:
    case BinaryOp::mod:
    case BinaryOp::power: return common == DType::bool_ ? DType::int64 : common;
    case BinaryOp::logical_and:
    case BinaryOp::logical_or:
    case BinaryOp::logical_xor: return DType::bool_;
    default: return common;
  }
}

DType binary_out_dtype(BinaryOp op, DType compute) {
  return is_predicate(op) ? DType::bool_ : compute;
}

DType unary_compute_dtype(UnaryOp op, DType in, const char* opname) {
  switch (op) {
    case UnaryOp::negative:
      if (in == DType::bool_) {
        throw TypeError(error_message("[", opname,
                                      "] negative of a bool array is not supported: got dtype "
                                      "bool; use logical_not instead"));
      }
      return in;
    case UnaryOp::abs:
    case UnaryOp::isnan:
    case UnaryOp::isinf:
    case UnaryOp::isfinite:
    case UnaryOp::logical_not: return in;
    case UnaryOp::positive:
    case UnaryOp::sign:
      if (in == DType::bool_) {
        // NumPy has no loop for these on bools (UFuncTypeError).
        throw TypeError(error_message("[", opname, "] ", op_name(op),
                                      " of a bool array is not supported: got dtype bool"));
      }
      return in;
    case UnaryOp::square: return in == DType::bool_ ? DType::int64 : in;
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::trunc: return in;  // NumPy 2: integers and bools stay as they are
    default: return is_floating(in) ? in : DType::float64;
  }
}

DType unary_out_dtype(UnaryOp op, DType compute) {
  switch (op) {
    case UnaryOp::isnan:
    case UnaryOp::isinf:
    case UnaryOp::isfinite:
    case UnaryOp::logical_not: return DType::bool_;
    default: return compute;
  }
}

Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op) {
  size_t nd = 0;
  for (const Shape& s : shapes) nd = std::max(nd, s.size());
  Shape out(nd, 1);
  for (const Shape& s : shapes) {
    size_t off = nd - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t e = s[d];
      int64_t& o = out[d + off];
      if (e == o || e == 1) continue;
      if (o == 1) {
        o = e;
        continue;
      }
      std::string list;
      for (size_t k = 0; k < shapes.size(); ++k) {
        if (k) list += k + 1 == shapes.size() ? " and " : ", ";
        list += shape_str(shapes[k]);
      }
      throw std::invalid_argument(
          error_message("[", op, "] operands could not be broadcast together: shapes ", list));
    }
  }
  return out;
}

void where_range(const Broadcast<3>& layout, const Array& cond, const Array& x, const Array& y,
                 Array& out, int64_t begin, int64_t end) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* c = cond.data<bool>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    auto body = [&](const auto& off, int64_t pos, int64_t len, const auto& st) {
      const bool* cc = c + off[0];
      const T* xx = px + off[1];
      const T* yy = py + off[2];
      T* oo = po + pos;
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
        for (int64_t i = 0; i < len; ++i) oo[i] = cc[i] ? xx[i] : yy[i];
      } else {
        for (int64_t i = 0; i < len; ++i) oo[i] = cc[i * st[0]] ? xx[i * st[1]] : yy[i * st[2]];
      }
    };
    for_each_run(layout, begin, end, body);
  });
}

namespace {

// One cast loop, compiled per SIMD level (AVX-512DQ converts float64 to int64
// four or eight at a time; SSE2 has no such instruction). The same values at
// every level: element_cast's range check and truncation are exact.
template <class From, class To>
struct CastLoop {
  [[gnu::always_inline]] static inline void run(const From* src, To* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = element_cast<To>(src[i]);
  }
};

}  // namespace

void cast_range(const Array& in, Array& out, int64_t begin, int64_t end) {
  dispatch_all(in.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    dispatch_all(out.dtype(), [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* src = in.data<From>();
      To* dst = out.data<To>();
      constexpr bool plain = std::is_arithmetic_v<From> && std::is_arithmetic_v<To>;
      if constexpr (plain) {
        simd_call<CastLoop<From, To>>(src + begin, dst + begin, end - begin);
      } else {
        for (int64_t i = begin; i < end; ++i) dst[i] = element_cast<To>(src[i]);
      }
    });
  });
}

void nan_to_num_range(const Array& in, Array& out, double nan, double posinf, double neginf,
                      int64_t begin, int64_t end) {
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      const T n = static_cast<T>(nan), p = static_cast<T>(posinf), m = static_cast<T>(neginf);
      for (int64_t i = begin; i < end; ++i) {
        T v = src[i];
        dst[i] = std::isnan(v) ? n : std::isinf(v) ? (v > 0 ? p : m) : v;
      }
    } else {
      std::copy(src + begin, src + end, dst + begin);
    }
  });
}

void isclose_range(const Broadcast<2>& layout, const Array& a, const Array& b, Array& out,
                   double rtol, double atol, bool equal_nan, int64_t begin, int64_t end) {
  const double* pa = a.data<double>();
  const double* pb = b.data<double>();
  bool* po = out.data<bool>();
  for_each_run(layout, begin, end, [&](const auto& off, int64_t pos, int64_t len, const auto& st) {
    for (int64_t i = 0; i < len; ++i) {
      double x = pa[off[0] + i * st[0]], y = pb[off[1] + i * st[1]];
      bool r;
      if (std::isnan(x) || std::isnan(y)) {
        r = equal_nan && std::isnan(x) && std::isnan(y);
      } else if (std::isinf(x) || std::isinf(y)) {
        r = x == y;
      } else {
        r = std::fabs(x - y) <= atol + rtol * std::fabs(y);
      }
      po[pos + i] = r;
    }
  });
}

}  // namespace tessera::kernels

namespace tessera::kernels {

void throw_zero_division(const char* opname) {
  throw ZeroDivisionError(error_message("[", opname, "] integer division by zero"));
}

void throw_negative_power(const char* opname, int64_t exp) {
  throw std::invalid_argument(error_message(
      "[", opname, "] integers to negative integer powers are not allowed: got exponent ", exp));
}

}  // namespace tessera::kernels
