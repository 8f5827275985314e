// Elementwise kernels: NumPy broadcasting, binary and unary operations, where,
// casts. Kernels are single-threaded and process output elements [begin, end)
// so that the primitives layer can cut large outputs into tiles.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/kernels/vmath.hpp"

namespace tessera {

// Binary elementwise operations; the language's infix operators map onto these.
enum class BinaryOp : uint8_t {
  add,
  subtract,
  multiply,
  divide,
  floor_divide,
  mod,
  power,
  maximum,
  minimum,
  fmax,
  fmin,
  arctan2,
  hypot,
  copysign,
  equal,
  not_equal,
  less,
  less_equal,
  greater,
  greater_equal,
  logical_and,
  logical_or,
  logical_xor,
};

// Unary elementwise operations (unary - is negative, ! is logical_not).
enum class UnaryOp : uint8_t {
  negative,
  positive,
  abs,
  sign,
  sqrt,
  square,
  exp,
  exp2,
  expm1,
  log,
  log2,
  log10,
  log1p,
  sin,
  cos,
  tan,
  arcsin,
  arccos,
  arctan,
  sinh,
  cosh,
  tanh,
  arcsinh,
  arccosh,
  arctanh,
  floor,
  ceil,
  rint,
  trunc,
  reciprocal,
  isnan,
  isinf,
  isfinite,
  logical_not,
  deg2rad,
  rad2deg,
};

// The primitive name of an operation ("add", "logical_not", ...).
const char* op_name(BinaryOp op);
const char* op_name(UnaryOp op);

// True for the comparisons and logical operations (bool results).
bool is_predicate(BinaryOp op);

}  // namespace tessera

namespace tessera::kernels {

// Estimated nanoseconds per output element, for the runtime's cost model.
double cost_ns(BinaryOp op);
double cost_ns(UnaryOp op);

// The dtype a binary operation computes in, given NumPy's common dtype of its
// operands (ints divide in float64, bools floor-divide in int64). Throws
// TypeError for unsupported combinations (bool subtract), naming `opname`.
DType binary_compute_dtype(BinaryOp op, DType common, const char* opname);
// The dtype of the result: bool for predicates, the compute dtype otherwise.
DType binary_out_dtype(BinaryOp op, DType compute);
// Compute and result dtypes of a unary operation on an input dtype (ints go to
// float64 for float functions; negative of bool throws TypeError).
DType unary_compute_dtype(UnaryOp op, DType in, const char* opname);
DType unary_out_dtype(UnaryOp op, DType compute);

// NumPy's broadcast result shape; throws ValueError
// "[op] operands could not be broadcast together: shapes (2, 3) and (4,)".
Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op);

// A few int64 values kept inside the object: a layout's merged dimensions
// are rarely more than a handful, and an operation on 1,000 elements should
// not pay a heap allocation for each of its dims and strides. Longer ones
// move to the heap.
class DimVec {
 public:
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t* data() { return heap_.empty() ? inline_ : heap_.data(); }
  const int64_t* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& back() { return data()[n_ - 1]; }
  int64_t back() const { return data()[n_ - 1]; }
  friend bool operator==(const DimVec& a, const std::vector<int64_t>& b) {
    return std::equal(a.data(), a.data() + a.size(), b.begin(), b.end());
  }
  void push_back(int64_t v) {
    if (heap_.empty() && n_ < kInline) {
      inline_[n_++] = v;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_, inline_ + n_);
    heap_.push_back(v);
    ++n_;
  }

 private:
  static constexpr size_t kInline = 6;
  int64_t inline_[kInline] = {};
  size_t n_ = 0;
  std::vector<int64_t> heap_;  // all the values once there are more than kInline
};

// N operands broadcast to one output: per-operand element strides (0 along
// broadcast dimensions), with adjacent dimensions merged where every operand
// allows it, so equal shapes and scalar operands become one flat loop.
template <size_t N>
struct Broadcast {
  Shape out_shape;
  int64_t size = 1;
  DimVec dims;
  std::array<DimVec, N> strides;
};

namespace detail {
template <size_t N>
void merge_dims(Broadcast<N>& b, const std::array<std::vector<int64_t>, N>& full);
}  // namespace detail

// Builds the layout of N operands of the given shapes (throws as broadcast_shapes).
template <size_t N>
Broadcast<N> make_broadcast(const std::array<const Shape*, N>& shape_of, const char* op) {
  Broadcast<N> b;
  auto shapes = [&](size_t k) -> const Shape& { return *shape_of[k]; };
  // The common case, operands of one shape or 0-d scalars, without the general
  // construction's temporaries (its per-call cost shows on 1,000-element arrays).
  // The layout is the one the general code reaches: one run of every element.
  const Shape* full_shape = nullptr;
  bool simple = true;
  for (size_t k = 0; k < N && simple; ++k) {
    if (shapes(k).empty()) continue;
    if (!full_shape) full_shape = &shapes(k);
    simple = shapes(k) == *full_shape;
  }
  if (simple) {
    if (full_shape) b.out_shape = *full_shape;
    b.size = shape_size(b.out_shape, op);
    if (std::any_of(b.out_shape.begin(), b.out_shape.end(), [](int64_t e) { return e != 1; })) {
      b.dims.push_back(b.size);
      for (size_t k = 0; k < N; ++k) b.strides[k].push_back(shapes(k).empty() ? 0 : 1);
    }
    return b;
  }
  std::vector<Shape> all;
  for (size_t k = 0; k < N; ++k) all.push_back(shapes(k));
  b.out_shape = broadcast_shapes(all, op);
  b.size = shape_size(b.out_shape, op);
  const int nd = static_cast<int>(b.out_shape.size());
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) {
    const Shape& s = shapes(k);
    full[k].assign(nd, 0);
    int64_t stride = 1;
    int off = nd - static_cast<int>(s.size());
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      full[k][d + off] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  detail::merge_dims(b, full);
  return b;
}

// The layout of N operands read in place through their own strides (views: a
// slice, a column, a transpose), broadcast to one C-ordered output, with the
// dimensions merged as make_broadcast merges them. Kernels that take a layout
// read operand k at its origin() plus the layout's offsets.
template <size_t N>
Broadcast<N> make_broadcast_views(const std::array<const Array*, N>& arrays, const char* op) {
  Broadcast<N> b;
  std::vector<Shape> all;
  for (size_t k = 0; k < N; ++k) all.push_back(arrays[k]->shape());
  b.out_shape = broadcast_shapes(all, op);
  b.size = shape_size(b.out_shape, op);
  const int nd = static_cast<int>(b.out_shape.size());
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) {
    const Shape& s = arrays[k]->shape();
    const std::vector<int64_t> own = arrays[k]->strides();
    full[k].assign(nd, 0);
    const int off = nd - static_cast<int>(s.size());
    for (int d = 0; d < static_cast<int>(s.size()); ++d) full[k][d + off] = s[d] == 1 ? 0 : own[d];
  }
  detail::merge_dims(b, full);
  return b;
}

namespace detail {

// Fills b's dims and strides from the full per-operand strides of b.out_shape.
template <size_t N>
void merge_dims(Broadcast<N>& b, const std::array<std::vector<int64_t>, N>& full) {
  const int nd = static_cast<int>(b.out_shape.size());
  // Extent-1 dimensions carry no information; mergeable neighbours are fused.
  for (int d = 0; d < nd; ++d) {
    int64_t extent = b.out_shape[d];
    if (extent == 1) continue;
    bool merge = !b.dims.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = b.strides[k].back() == full[k][d] * extent;
    }
    if (merge) {
      b.dims.back() *= extent;
      for (size_t k = 0; k < N; ++k) b.strides[k].back() = full[k][d];
    } else {
      b.dims.push_back(extent);
      for (size_t k = 0; k < N; ++k) b.strides[k].push_back(full[k][d]);
    }
  }
}

}  // namespace detail

// The same, for shapes given by value.
template <size_t N>
Broadcast<N> make_broadcast(const std::array<Shape, N>& shapes, const char* op) {
  std::array<const Shape*, N> p;
  for (size_t k = 0; k < N; ++k) p[k] = &shapes[k];
  return make_broadcast<N>(p, op);
}

// Calls run(offsets, out_pos, len, inner_strides) for each contiguous run of
// output elements in [begin, end): operand k's elements are at
// offsets[k] + i * inner_strides[k] for i in [0, len).
template <size_t N, class Run>
void for_each_run(const Broadcast<N>& b, int64_t begin, int64_t end, Run&& run) {
  std::array<int64_t, N> off{}, inner{};
  if (begin >= end) return;
  const int nd = static_cast<int>(b.dims.size());
  if (nd == 0) {
    run(off, begin, end - begin, inner);
    return;
  }
  DimVec idx;
  for (int d = 0; d < nd; ++d) idx.push_back(0);
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % b.dims[d];
    rem /= b.dims[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * b.strides[k][d];
  }
  for (size_t k = 0; k < N; ++k) inner[k] = b.strides[k][nd - 1];
  const int64_t last = b.dims[nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t len = std::min(last - idx[nd - 1], end - pos);
    run(off, pos, len, inner);
    pos += len;
    idx[nd - 1] += len;
    for (size_t k = 0; k < N; ++k) off[k] += len * inner[k];
    for (int d = nd - 1; d > 0 && idx[d] == b.dims[d]; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += b.strides[k][d - 1] - idx[d] * b.strides[k][d];
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// Scalar element functions, shared by the kernels and the scalar fast path.
// Signed overflow is undefined in C++; NumPy wraps, so integer arithmetic goes
// through uint64_t.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Throws ValueError "[op] integer division by zero" (NumPy silently gives 0).
[[noreturn]] void throw_zero_division(const char* opname);

inline int64_t int_floor_divide(int64_t a, int64_t b, const char* opname) {
  if (b == 0) throw_zero_division(opname);
  if (b == -1) return wrap_sub(0, a);  // INT64_MIN // -1 wraps, as in NumPy
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

inline int64_t int_mod(int64_t a, int64_t b, const char* opname) {
  if (b == 0) throw_zero_division(opname);
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Throws ValueError for a negative integer exponent, as NumPy does.
[[noreturn]] void throw_negative_power(const char* opname, int64_t exp);

// Integer power with wrapping on overflow (NumPy's int64 behaviour).
inline int64_t int_power(int64_t base, int64_t exp, const char* opname) {
  if (exp < 0) throw_negative_power(opname, exp);
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exp); e; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

// NumPy's npy_divmod: floor division consistent with the remainder's sign.
template <class T>
inline T float_floor_divide(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) div -= T(1);
  }
  if (div != 0) {
    T fl = std::floor(div);
    if (div - fl > T(0.5)) fl += T(1);
    return fl;
  }
  return std::copysign(T(0), a / b);
}

template <class T>
inline T float_mod(T a, T b) {
  T mod = std::fmod(a, b);
  if (b == 0) return mod;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(T(0), b);
  }
  return mod;
}

// The float binary functions (T float or double), written once for the
// array kernels and fused expressions (fused.hpp), so both give the same
// bits. power's scalar-exponent shortcuts are the kernels' (pow_shortcut).
//
// x + y and x * y of two NaNs is one of them, and which one x86 returns is
// the first operand of the instruction, an order the compiler may choose
// (both operations commute), differently per loop and per SIMD level: a NaN
// x is therefore returned (quieted, as x + x) explicitly, so that every
// kernel, fused loop and SIMD level gives the same NaN.
template <BinaryOp Op, class T>
inline T float_binary(T x, T y) {
  // Both computed unconditionally: a select of two values vectorises, a
  // branch around a floating-point operation does not (it may trap).
  if constexpr (Op == BinaryOp::add) {
    const T r = x + y, nan_x = x + x;
    return x != x ? nan_x : r;
  }
  if constexpr (Op == BinaryOp::subtract) return x - y;
  if constexpr (Op == BinaryOp::multiply) {
    const T r = x * y, nan_x = x + x;
    return x != x ? nan_x : r;
  }
  if constexpr (Op == BinaryOp::divide) return x / y;
  if constexpr (Op == BinaryOp::floor_divide) return float_floor_divide(x, y);
  if constexpr (Op == BinaryOp::mod) return float_mod(x, y);
  if constexpr (Op == BinaryOp::power) return std::pow(x, y);
  if constexpr (Op == BinaryOp::maximum) return (x >= y || x != x) ? x : y;
  if constexpr (Op == BinaryOp::minimum) return (x <= y || x != x) ? x : y;
  if constexpr (Op == BinaryOp::fmax) return (x >= y || y != y) ? x : y;
  if constexpr (Op == BinaryOp::fmin) return (x <= y || y != y) ? x : y;
  if constexpr (Op == BinaryOp::arctan2) return std::atan2(x, y);
  if constexpr (Op == BinaryOp::hypot) return std::hypot(x, y);
  if constexpr (Op == BinaryOp::copysign) return std::copysign(x, y);
  return x;
}

// Calls f(std::integral_constant<BinaryOp, op>) for the float binary
// functions above; false for the others (comparisons, logical operations).
template <class F>
bool with_float_binary(BinaryOp op, F&& f) {
  using B = BinaryOp;
  auto one = [&](auto c) {
    if (op != decltype(c)::value) return false;
    f(c);
    return true;
  };
  return one(std::integral_constant<B, B::add>{}) || one(std::integral_constant<B, B::subtract>{}) ||
         one(std::integral_constant<B, B::multiply>{}) || one(std::integral_constant<B, B::divide>{}) ||
         one(std::integral_constant<B, B::floor_divide>{}) || one(std::integral_constant<B, B::mod>{}) ||
         one(std::integral_constant<B, B::power>{}) || one(std::integral_constant<B, B::maximum>{}) ||
         one(std::integral_constant<B, B::minimum>{}) || one(std::integral_constant<B, B::fmax>{}) ||
         one(std::integral_constant<B, B::fmin>{}) || one(std::integral_constant<B, B::arctan2>{}) ||
         one(std::integral_constant<B, B::hypot>{}) || one(std::integral_constant<B, B::copysign>{});
}

// x ** e for a scalar exponent the kernels compute without pow (as NumPy's
// fast paths do): 2, 3, 0.5, 1, -1; 0 for any other exponent.
enum class PowShortcut : uint8_t { none, square, cube, sqrt, identity, reciprocal };
template <class T>
inline PowShortcut pow_shortcut(T e) {
  if (e == T(2)) return PowShortcut::square;
  if (e == T(3)) return PowShortcut::cube;
  if (e == T(0.5)) return PowShortcut::sqrt;
  if (e == T(1)) return PowShortcut::identity;
  if (e == T(-1)) return PowShortcut::reciprocal;
  return PowShortcut::none;
}

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

// The float functions computed a vector at a time by vmath.hpp (libmvec) in
// float32: sets f and returns true for exp .. arctanh; false for the others.
// Every float32 path (array kernels, fused loops) computes these through
// vmath, so an element's bits do not depend on the path. float64 keeps
// glibc's scalar functions (correctly rounded in nearly every case, as
// NumPy's float64 results on most machines; libmvec's are within 4 ulp).
inline bool vector_fn_of(UnaryOp op, VecFn& f) {
  switch (op) {
    case UnaryOp::exp: f = VecFn::exp; return true;
    case UnaryOp::exp2: f = VecFn::exp2; return true;
    case UnaryOp::expm1: f = VecFn::expm1; return true;
    case UnaryOp::log: f = VecFn::log; return true;
    case UnaryOp::log2: f = VecFn::log2; return true;
    case UnaryOp::log10: f = VecFn::log10; return true;
    case UnaryOp::log1p: f = VecFn::log1p; return true;
    case UnaryOp::sin: f = VecFn::sin; return true;
    case UnaryOp::cos: f = VecFn::cos; return true;
    case UnaryOp::tan: f = VecFn::tan; return true;
    case UnaryOp::arcsin: f = VecFn::asin; return true;
    case UnaryOp::arccos: f = VecFn::acos; return true;
    case UnaryOp::arctan: f = VecFn::atan; return true;
    case UnaryOp::sinh: f = VecFn::sinh; return true;
    case UnaryOp::cosh: f = VecFn::cosh; return true;
    case UnaryOp::tanh: f = VecFn::tanh; return true;
    case UnaryOp::arcsinh: f = VecFn::asinh; return true;
    case UnaryOp::arccosh: f = VecFn::acosh; return true;
    case UnaryOp::arctanh: f = VecFn::atanh; return true;
    default: return false;
  }
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

// One float function (sqrt .. rad2deg, floor, rint, ...) of a double, for the
// scalar fast path; the same code as the array kernels.
double unary_float(UnaryOp op, double v);

// out[begin:end) = op(a, b). `a` and `b` hold the compute dtype, `out` the
// result dtype and layout.out_shape. Integer division by zero and integer
// negative powers throw ValueError naming `opname`.
void binary_range(BinaryOp op, const Broadcast<2>& layout, const Array& a, const Array& b,
                  Array& out, int64_t begin, int64_t end, const char* opname);
// The same for a layout of make_broadcast_views: `a` and `b` may be views,
// read through the layout's strides from their origins.
void binary_range_views(BinaryOp op, const Broadcast<2>& layout, const Array& a, const Array& b,
                        Array& out, int64_t begin, int64_t end, const char* opname);

// out[begin:end) = op(x). `x` holds the compute dtype, `out` the result dtype.
void unary_range(UnaryOp op, const Array& x, Array& out, int64_t begin, int64_t end);

// out[begin:end) = cond ? x : y; cond is bool, x, y and out share one dtype.
void where_range(const Broadcast<3>& layout, const Array& cond, const Array& x, const Array& y,
                 Array& out, int64_t begin, int64_t end);

// out[begin:end) = in converted to out's dtype (NumPy casting: truncation,
// NaN and out-of-range floats give INT64_MIN).
void cast_range(const Array& in, Array& out, int64_t begin, int64_t end);

// Replaces NaN, +inf and -inf in a floating array's [begin, end) (NumPy's nan_to_num).
void nan_to_num_range(const Array& in, Array& out, double nan, double posinf, double neginf,
                      int64_t begin, int64_t end);

// out[begin:end) = |a - b| <= atol + rtol * |b| (infinities equal only to
// themselves; NaNs equal when equal_nan). a and b hold float64.
void isclose_range(const Broadcast<2>& layout, const Array& a, const Array& b, Array& out,
                   double rtol, double atol, bool equal_nan, int64_t begin, int64_t end);

}  // namespace tessera::kernels
