// Binary elementwise kernels: one typed loop per (operation, dtype), with flat
// inner loops for the contiguous and scalar-operand cases.
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/simd.hpp"

namespace tessera::kernels {

namespace {

// One contiguous run: o[i] = f(x[i * sx], y[i * sy]), with flat loops for the
// contiguous and scalar-operand cases (the ones the compiler vectorises).
template <class T, class O, class F>
struct BinaryLoop {
  [[gnu::always_inline]] static inline void run(const T* x, int64_t sx, const T* y, int64_t sy,
                                                O* o, int64_t len, F f) {
    if (sx == 1 && sy == 1) {
      for (int64_t i = 0; i < len; ++i) o[i] = f(x[i], y[i]);
    } else if (sx == 0 && sy == 1) {
      const T s = x[0];
      for (int64_t i = 0; i < len; ++i) o[i] = f(s, y[i]);
    } else if (sx == 1 && sy == 0) {
      const T s = y[0];
      for (int64_t i = 0; i < len; ++i) o[i] = f(x[i], s);
    } else {
      for (int64_t i = 0; i < len; ++i) o[i] = f(x[i * sx], y[i * sy]);
    }
  }
};

template <class T, class O, class F>
void run_binary(const Broadcast<2>& layout, const Array& a, const Array& b, Array& out,
                int64_t begin, int64_t end, F f) {
  // origin(): operands may be views read through the layout's strides
  // (make_broadcast_views); the output is always a new C-ordered array.
  const T* pa = a.origin<T>();
  const T* pb = b.origin<T>();
  O* po = out.data<O>();
  if (layout.dims.size() <= 1) {
    // One run (operands of one shape, or a 0-d one): for_each_run's walk
    // would find the same run.
    const int64_t sa = layout.dims.empty() ? 0 : layout.strides[0][0];
    const int64_t sb = layout.dims.empty() ? 0 : layout.strides[1][0];
    if (begin < end) {
      simd_call<BinaryLoop<T, O, F>>(pa + begin * sa, sa, pb + begin * sb, sb, po + begin,
                                     end - begin, f);
    }
    return;
  }
  for_each_run(layout, begin, end, [&](const auto& off, int64_t pos, int64_t len, const auto& st) {
    simd_call<BinaryLoop<T, O, F>>(pa + off[0], st[0], pb + off[1], st[1], po + pos, len, f);
  });
}

[[noreturn]] void unsupported(BinaryOp op, DType dt) {
  throw std::logic_error(error_message("[", op_name(op), "] internal error: no kernel for dtype ",
                                       dtype_name(dt)));
}

template <class T>
void binary_typed(BinaryOp op, const Broadcast<2>& L, const Array& a, const Array& b, Array& out,
                  int64_t begin, int64_t end, const char* opname) {
  constexpr bool is_bool = std::is_same_v<T, bool>;
  constexpr bool is_int = std::is_same_v<T, int64_t>;
  constexpr bool is_float = std::is_floating_point_v<T>;
  auto run = [&](auto f) { run_binary<T, T>(L, a, b, out, begin, end, f); };
  auto pred = [&](auto f) { run_binary<T, bool>(L, a, b, out, begin, end, f); };
  if constexpr (is_float) {
    if (op == BinaryOp::power && b.size() == 1) {
      // A scalar exponent of 2, 3, 0.5, 1 or -1 (x ** 2 is the common one)
      // is computed without the general pow, as NumPy's fast paths do.
      switch (pow_shortcut(b.origin<T>()[0])) {
        case PowShortcut::square: return run([](T x, T) { return x * x; });
        case PowShortcut::cube: return run([](T x, T) { return x * x * x; });
        case PowShortcut::sqrt: return run([](T x, T) { return std::sqrt(x); });
        case PowShortcut::identity: return run([](T x, T) { return x; });
        case PowShortcut::reciprocal: return run([](T x, T) { return T(1) / x; });
        case PowShortcut::none: break;
      }
    }
    if (with_float_binary(op, [&](auto c) {
          run([](T x, T y) { return float_binary<decltype(c)::value>(x, y); });
        })) {
      return;
    }
  }
  switch (op) {
    case BinaryOp::add:
      if constexpr (is_bool) return run([](T x, T y) -> T { return x || y; });
      if constexpr (is_int) return run([](T x, T y) { return wrap_add(x, y); });
      break;
    case BinaryOp::subtract:
      if constexpr (is_int) return run([](T x, T y) { return wrap_sub(x, y); });
      break;
    case BinaryOp::multiply:
      if constexpr (is_bool) return run([](T x, T y) -> T { return x && y; });
      if constexpr (is_int) return run([](T x, T y) { return wrap_mul(x, y); });
      break;
    case BinaryOp::floor_divide:
      if constexpr (is_int) return run([&](T x, T y) { return int_floor_divide(x, y, opname); });
      break;
    case BinaryOp::mod:
      if constexpr (is_int) return run([&](T x, T y) { return int_mod(x, y, opname); });
      break;
    case BinaryOp::power:
      if constexpr (is_int) {
        if (b.size() == 1 && b.origin<T>()[0] == 2) return run([](T x, T) { return wrap_mul(x, x); });
        return run([&](T x, T y) { return int_power(x, y, opname); });
      }
      break;
    case BinaryOp::maximum:
    case BinaryOp::fmax: return run([](T x, T y) { return x >= y ? x : y; });
    case BinaryOp::minimum:
    case BinaryOp::fmin: return run([](T x, T y) { return x <= y ? x : y; });
    case BinaryOp::divide:
    case BinaryOp::arctan2:
    case BinaryOp::hypot:
    case BinaryOp::copysign: break;
    case BinaryOp::equal: return pred([](T x, T y) { return x == y; });
    case BinaryOp::not_equal: return pred([](T x, T y) { return x != y; });
    case BinaryOp::less: return pred([](T x, T y) { return x < y; });
    case BinaryOp::less_equal: return pred([](T x, T y) { return x <= y; });
    case BinaryOp::greater: return pred([](T x, T y) { return x > y; });
    case BinaryOp::greater_equal: return pred([](T x, T y) { return x >= y; });
    case BinaryOp::logical_and:
      if constexpr (is_bool) return pred([](T x, T y) { return x && y; });
      break;
    case BinaryOp::logical_or:
      if constexpr (is_bool) return pred([](T x, T y) { return x || y; });
      break;
    case BinaryOp::logical_xor:
      if constexpr (is_bool) return pred([](T x, T y) { return x != y; });
      break;
  }
  unsupported(op, a.dtype());
}

}  // namespace

void binary_range(BinaryOp op, const Broadcast<2>& layout, const Array& a, const Array& b,
                  Array& out, int64_t begin, int64_t end, const char* opname) {
  // A layout of shapes describes packed operands only.
  if (!a.is_contiguous() || !b.is_contiguous()) {
    throw std::logic_error(error_message("[", opname ? opname : op_name(op),
                                         "] internal error: binary_range on a view"));
  }
  binary_range_views(op, layout, a, b, out, begin, end, opname);
}

void binary_range_views(BinaryOp op, const Broadcast<2>& layout, const Array& a, const Array& b,
                        Array& out, int64_t begin, int64_t end, const char* opname) {
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_typed<T>(op, layout, a, b, out, begin, end, opname);
  });
}

}  // namespace tessera::kernels
