// Unary elementwise kernels: one flat loop per (operation, dtype).
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/simd.hpp"

namespace tessera::kernels {

namespace {

template <class T, class O, class F>
struct UnaryLoop {
  [[gnu::always_inline]] static inline void run(const T* x, O* o, int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
  }
};

template <class T, class O, class F>
void run_unary(const Array& x, Array& out, int64_t begin, int64_t end, F f) {
  simd_call<UnaryLoop<T, O, F>>(x.data<T>() + begin, out.data<O>() + begin, end - begin, f);
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
        if constexpr (std::is_same_v<T, float>) {
          if (VecFn f; vector_fn_of(op, f)) {
            vmath(f, x.data<T>() + begin, out.data<T>() + begin, end - begin);
            return;
          }
        }
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
