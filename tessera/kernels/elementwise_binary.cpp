// Binary elementwise kernels: one typed loop per (operation, dtype), with flat
// inner loops for the contiguous and scalar-operand cases.
#include <cmath>
#include <stdexcept>
#include <type_traits>

// The ordered add and multiply below: x86 instructions (inline assembly).
#if defined(__x86_64__) && defined(__GNUC__)
#define TESSERA_ORDERED_X86 1
#include <immintrin.h>
#endif

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

#ifdef TESSERA_ORDERED_X86
// x + y and x * y of floats, one instruction per vector with x as its first
// source. When both operands are NaN, x86 returns the first source's, quieted:
// float_binary's result (x's NaN, as x + x), without its second operation,
// compare and blend per vector (NumPy's add loop is this one instruction). The
// compiler may swap the operands of a commutative + or *, so the instruction
// is written out: "v" instructions are AT&T order (src2, src1, dst).
//
// The loops are written once per level (intrinsics must be compiled in a
// function of their instruction set, lambdas and helpers included). A 0
// stride reads a splat of the operand; the elements after the last whole
// vector go through float_binary, whose select follows the same NaN rule.
template <bool Mul, class T>
[[gnu::always_inline]] inline void ordered_tail(const T* x, int64_t sx, const T* y, int64_t sy,
                                                T* o, int64_t i, int64_t n) {
  constexpr BinaryOp op = Mul ? BinaryOp::multiply : BinaryOp::add;
  for (; i < n; ++i) o[i] = float_binary<op>(x[i * sx], y[i * sy]);
}

template <bool Mul, class T>
[[gnu::noinline, gnu::target("avx2,avx512f,avx512vl,avx512bw,avx512dq")]] void ordered_avx512(
    const T* x, int64_t sx, const T* y, int64_t sy, T* o, int64_t n) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, double>) {
    const __m512d xs = _mm512_set1_pd(*x), ys = _mm512_set1_pd(*y);
#pragma GCC unroll 2
    for (; i + 8 <= n; i += 8) {
      const __m512d a = sx ? _mm512_loadu_pd(x + i) : xs, b = sy ? _mm512_loadu_pd(y + i) : ys;
      __m512d r;
      if constexpr (Mul) {
        asm("vmulpd %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      } else {
        asm("vaddpd %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      }
      _mm512_storeu_pd(o + i, r);
    }
  } else {
    const __m512 xs = _mm512_set1_ps(*x), ys = _mm512_set1_ps(*y);
#pragma GCC unroll 2
    for (; i + 16 <= n; i += 16) {
      const __m512 a = sx ? _mm512_loadu_ps(x + i) : xs, b = sy ? _mm512_loadu_ps(y + i) : ys;
      __m512 r;
      if constexpr (Mul) {
        asm("vmulps %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      } else {
        asm("vaddps %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      }
      _mm512_storeu_ps(o + i, r);
    }
  }
  ordered_tail<Mul>(x, sx, y, sy, o, i, n);
}

template <bool Mul, class T>
[[gnu::noinline, gnu::target("avx2")]] void ordered_avx2(const T* x, int64_t sx, const T* y,
                                                         int64_t sy, T* o, int64_t n) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, double>) {
    const __m256d xs = _mm256_set1_pd(*x), ys = _mm256_set1_pd(*y);
#pragma GCC unroll 2
    for (; i + 4 <= n; i += 4) {
      const __m256d a = sx ? _mm256_loadu_pd(x + i) : xs, b = sy ? _mm256_loadu_pd(y + i) : ys;
      __m256d r;
      if constexpr (Mul) {
        asm("vmulpd %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      } else {
        asm("vaddpd %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      }
      _mm256_storeu_pd(o + i, r);
    }
  } else {
    const __m256 xs = _mm256_set1_ps(*x), ys = _mm256_set1_ps(*y);
#pragma GCC unroll 2
    for (; i + 8 <= n; i += 8) {
      const __m256 a = sx ? _mm256_loadu_ps(x + i) : xs, b = sy ? _mm256_loadu_ps(y + i) : ys;
      __m256 r;
      if constexpr (Mul) {
        asm("vmulps %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      } else {
        asm("vaddps %2, %1, %0" : "=v"(r) : "v"(a), "v"(b));
      }
      _mm256_storeu_ps(o + i, r);
    }
  }
  ordered_tail<Mul>(x, sx, y, sy, o, i, n);
}

// The baseline: SSE2's two-operand forms, whose destination is the first source.
template <bool Mul, class T>
[[gnu::noinline]] void ordered_sse2(const T* x, int64_t sx, const T* y, int64_t sy, T* o,
                                    int64_t n) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, double>) {
    const __m128d xs = _mm_set1_pd(*x), ys = _mm_set1_pd(*y);
#pragma GCC unroll 2
    for (; i + 2 <= n; i += 2) {
      __m128d a = sx ? _mm_loadu_pd(x + i) : xs;
      const __m128d b = sy ? _mm_loadu_pd(y + i) : ys;
      if constexpr (Mul) {
        asm("mulpd %1, %0" : "+x"(a) : "x"(b));
      } else {
        asm("addpd %1, %0" : "+x"(a) : "x"(b));
      }
      _mm_storeu_pd(o + i, a);
    }
  } else {
    const __m128 xs = _mm_set1_ps(*x), ys = _mm_set1_ps(*y);
#pragma GCC unroll 2
    for (; i + 4 <= n; i += 4) {
      __m128 a = sx ? _mm_loadu_ps(x + i) : xs;
      const __m128 b = sy ? _mm_loadu_ps(y + i) : ys;
      if constexpr (Mul) {
        asm("mulps %1, %0" : "+x"(a) : "x"(b));
      } else {
        asm("addps %1, %0" : "+x"(a) : "x"(b));
      }
      _mm_storeu_ps(o + i, a);
    }
  }
  ordered_tail<Mul>(x, sx, y, sy, o, i, n);
}

#endif  // TESSERA_ORDERED_X86

// x + y (Mul false) or x * y over one run; false (nothing done) unless each
// stride is 0 or 1 and not both 0.
template <bool Mul, class T>
bool ordered_binary(const T* x, int64_t sx, const T* y, int64_t sy, T* o, int64_t n) {
#ifdef TESSERA_ORDERED_X86
  if ((sx != 0 && sx != 1) || (sy != 0 && sy != 1) || (sx == 0 && sy == 0)) return false;
  if (n <= 0) return true;
  switch (active_simd()) {
    case SimdLevel::avx512: ordered_avx512<Mul>(x, sx, y, sy, o, n); return true;
    case SimdLevel::avx2: ordered_avx2<Mul>(x, sx, y, sy, o, n); return true;
    case SimdLevel::sse2: break;
  }
  ordered_sse2<Mul>(x, sx, y, sy, o, n);
  return true;
#else
  // Elsewhere float_binary's loop (its select keeps x's NaN the same way).
  (void)x, (void)sx, (void)y, (void)sy, (void)o, (void)n;
  return false;
#endif
}

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

// run_binary for float x + y and x * y: each run the ordered instruction
// takes (strides 0 or 1) goes to it, any other to float_binary's loop.
template <bool Mul, class T>
void run_ordered(const Broadcast<2>& layout, const Array& a, const Array& b, Array& out,
                 int64_t begin, int64_t end) {
  const T* pa = a.origin<T>();
  const T* pb = b.origin<T>();
  T* po = out.data<T>();
  auto one = [](const T* x, int64_t sx, const T* y, int64_t sy, T* o, int64_t len) {
    if (ordered_binary<Mul>(x, sx, y, sy, o, len)) return;
    constexpr BinaryOp op = Mul ? BinaryOp::multiply : BinaryOp::add;
    auto f = [](T u, T v) { return float_binary<op>(u, v); };
    simd_call<BinaryLoop<T, T, decltype(f)>>(x, sx, y, sy, o, len, f);
  };
  if (layout.dims.size() <= 1) {
    const int64_t sa = layout.dims.empty() ? 0 : layout.strides[0][0];
    const int64_t sb = layout.dims.empty() ? 0 : layout.strides[1][0];
    if (begin < end) one(pa + begin * sa, sa, pb + begin * sb, sb, po + begin, end - begin);
    return;
  }
  for_each_run(layout, begin, end, [&](const auto& off, int64_t pos, int64_t len, const auto& st) {
    one(pa + off[0], st[0], pb + off[1], st[1], po + pos, len);
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
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
      if (op == BinaryOp::add) return run_ordered<false, T>(L, a, b, out, begin, end);
      if (op == BinaryOp::multiply) return run_ordered<true, T>(L, a, b, out, begin, end);
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
