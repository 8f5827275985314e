// Unary elementwise kernels: one flat loop per (operation, dtype).
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera::kernels {

namespace {

// The float functions, one per operation, written once for the array kernels
// and the scalar path.
template <UnaryOp Op, class T>
inline T float_fn(T v) {
  if constexpr (Op == UnaryOp::abs) return std::fabs(v);
  if constexpr (Op == UnaryOp::sign) return v > 0 ? T(1) : v < 0 ? T(-1) : v == 0 ? T(0) : v;
  if constexpr (Op == UnaryOp::sqrt) return std::sqrt(v);
  if constexpr (Op == UnaryOp::square) return v * v;
  if constexpr (Op == UnaryOp::exp) return std::exp(v);
  if constexpr (Op == UnaryOp::exp2) return std::exp2(v);
  if constexpr (Op == UnaryOp::expm1) return std::expm1(v);
  if constexpr (Op == UnaryOp::log) return std::log(v);
  if constexpr (Op == UnaryOp::log2) return std::log2(v);
  if constexpr (Op == UnaryOp::log10) return std::log10(v);
  if constexpr (Op == UnaryOp::log1p) return std::log1p(v);
  if constexpr (Op == UnaryOp::sin) return std::sin(v);
  if constexpr (Op == UnaryOp::cos) return std::cos(v);
  if constexpr (Op == UnaryOp::tan) return std::tan(v);
  if constexpr (Op == UnaryOp::arcsin) return std::asin(v);
  if constexpr (Op == UnaryOp::arccos) return std::acos(v);
  if constexpr (Op == UnaryOp::arctan) return std::atan(v);
  if constexpr (Op == UnaryOp::sinh) return std::sinh(v);
  if constexpr (Op == UnaryOp::cosh) return std::cosh(v);
  if constexpr (Op == UnaryOp::tanh) return std::tanh(v);
  if constexpr (Op == UnaryOp::arcsinh) return std::asinh(v);
  if constexpr (Op == UnaryOp::arccosh) return std::acosh(v);
  if constexpr (Op == UnaryOp::arctanh) return std::atanh(v);
  if constexpr (Op == UnaryOp::floor) return std::floor(v);
  if constexpr (Op == UnaryOp::ceil) return std::ceil(v);
  // nearbyint rounds half to even under the default rounding mode, like NumPy.
  if constexpr (Op == UnaryOp::rint) return std::nearbyint(v);
  if constexpr (Op == UnaryOp::trunc) return std::trunc(v);
  if constexpr (Op == UnaryOp::reciprocal) return T(1) / v;
  if constexpr (Op == UnaryOp::deg2rad) return v * static_cast<T>(std::numbers::pi / 180.0);
  if constexpr (Op == UnaryOp::rad2deg) return v * static_cast<T>(180.0 / std::numbers::pi);
  return v;
}

// Calls f(std::integral_constant<UnaryOp, op>) when op is one of Ops; false
// otherwise. Runs once per kernel call, not per element.
template <UnaryOp... Ops, class F>
bool with_op_constant(UnaryOp op, F&& f) {
  return ((op == Ops && (f(std::integral_constant<UnaryOp, Ops>{}), true)) || ...);
}

// Calls f(std::integral_constant<UnaryOp, op>) for the float functions; false
// for operations that are not one of them.
template <class F>
bool with_float_fn(UnaryOp op, F&& f) {
  using U = UnaryOp;
  return with_op_constant<U::abs, U::sign, U::sqrt, U::square, U::exp, U::exp2, U::expm1, U::log,
                          U::log2, U::log10, U::log1p, U::sin, U::cos, U::tan, U::arcsin,
                          U::arccos, U::arctan, U::sinh, U::cosh, U::tanh, U::arcsinh,
                          U::arccosh, U::arctanh, U::floor, U::ceil, U::rint, U::trunc,
                          U::reciprocal, U::deg2rad, U::rad2deg>(op, std::forward<F>(f));
}

template <class T, class O, class F>
void run_unary(const Array& x, Array& out, int64_t begin, int64_t end, F f) {
  const T* px = x.data<T>();
  O* po = out.data<O>();
  for (int64_t i = begin; i < end; ++i) po[i] = f(px[i]);
}

template <class T>
void unary_typed(UnaryOp op, const Array& x, Array& out, int64_t begin, int64_t end) {
  constexpr bool is_bool = std::is_same_v<T, bool>;
  constexpr bool is_int = std::is_same_v<T, int64_t>;
  constexpr bool is_float = std::is_floating_point_v<T>;
  auto run = [&](auto f) { run_unary<T, T>(x, out, begin, end, f); };
  auto pred = [&](auto f) { run_unary<T, bool>(x, out, begin, end, f); };
  switch (op) {
    case UnaryOp::isnan:
      if constexpr (is_float) return pred([](T v) { return std::isnan(v); });
      return pred([](T) { return false; });
    case UnaryOp::isinf:
      if constexpr (is_float) return pred([](T v) { return std::isinf(v); });
      return pred([](T) { return false; });
    case UnaryOp::isfinite:
      if constexpr (is_float) return pred([](T v) { return std::isfinite(v); });
      return pred([](T) { return true; });
    case UnaryOp::logical_not: return pred([](T v) { return v == T(0); });
    default: break;
  }
  // floor, ceil and trunc of integers and bools are the values themselves.
  if constexpr (is_bool || is_int) {
    if (op == UnaryOp::floor || op == UnaryOp::ceil || op == UnaryOp::trunc) {
      return run([](T v) { return v; });
    }
  }
  if constexpr (is_bool) {
    if (op == UnaryOp::abs) return run([](T v) { return v; });
  } else if constexpr (is_int) {
    // Through uint64_t so that INT64_MIN wraps as in NumPy instead of being UB.
    switch (op) {
      case UnaryOp::negative:
        return run([](T v) { return static_cast<T>(0 - static_cast<uint64_t>(v)); });
      case UnaryOp::positive: return run([](T v) { return v; });
      case UnaryOp::abs:
        return run([](T v) { return v < 0 ? static_cast<T>(0 - static_cast<uint64_t>(v)) : v; });
      case UnaryOp::sign: return run([](T v) { return static_cast<T>((v > 0) - (v < 0)); });
      case UnaryOp::square:
        return run([](T v) {
          return static_cast<T>(static_cast<uint64_t>(v) * static_cast<uint64_t>(v));
        });
      default: break;
    }
  } else if constexpr (is_float) {
    switch (op) {
      case UnaryOp::negative: return run([](T v) { return -v; });
      case UnaryOp::positive: return run([](T v) { return v; });
      default: {
        auto apply = [&](auto c) { run([](T v) { return float_fn<decltype(c)::value>(v); }); };
        if (with_float_fn(op, apply)) return;
      }
    }
  }
  throw std::logic_error(error_message("[", op_name(op), "] internal error: no kernel for dtype ",
                                       dtype_name(x.dtype())));
}

}  // namespace

double unary_float(UnaryOp op, double v) {
  double r = v;
  if (!with_float_fn(op, [&](auto c) { r = float_fn<decltype(c)::value>(v); })) {
    throw std::logic_error(
        error_message("[", op_name(op), "] internal error: not a float function"));
  }
  return r;
}

void unary_range(UnaryOp op, const Array& x, Array& out, int64_t begin, int64_t end) {
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_typed<T>(op, x, out, begin, end);
  });
}

}  // namespace tessera::kernels
