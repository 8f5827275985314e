// NumPy's ufunc methods beyond the existing scans and reductions:
// accumulate and reduce_op (ufunc.accumulate / ufunc.reduce along one axis
// for maximum, minimum, fmax, fmin, logical_and/or/xor, bitwise_and/or/xor,
// over every dtype, with NumPy's NaN rules), accumulate_grad (the cotangent
// of a running maximum or minimum: each g[j] goes to the position whose value
// out[j] is), at_op (ufunc.at: unbuffered, in order, in the promoted dtype)
// and reduceat.
//
// add and multiply scan as cumsum/cumprod and reduce as sum/prod (the Python
// front end maps them there), which have NumPy's widening of small integers.
#include <cmath>
#include <complex>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

enum class UOp {
  maximum,
  minimum,
  fmax,
  fmin,
  logical_and,
  logical_or,
  logical_xor,
  bitwise_and,
  bitwise_or,
  bitwise_xor
};

constexpr bool is_logical(UOp op) {
  return op == UOp::logical_and || op == UOp::logical_or || op == UOp::logical_xor;
}
constexpr bool is_bitwise(UOp op) {
  return op == UOp::bitwise_and || op == UOp::bitwise_or || op == UOp::bitwise_xor;
}

// Calls f(std::integral_constant<UOp, op>{}): the kernels' loops are
// compiled once per operation, without a switch per element.
template <class F>
void with_op(UOp op, F&& f) {
  switch (op) {
    case UOp::maximum:
      return f(std::integral_constant<UOp, UOp::maximum>{});
    case UOp::minimum:
      return f(std::integral_constant<UOp, UOp::minimum>{});
    case UOp::fmax:
      return f(std::integral_constant<UOp, UOp::fmax>{});
    case UOp::fmin:
      return f(std::integral_constant<UOp, UOp::fmin>{});
    case UOp::logical_and:
      return f(std::integral_constant<UOp, UOp::logical_and>{});
    case UOp::logical_or:
      return f(std::integral_constant<UOp, UOp::logical_or>{});
    case UOp::logical_xor:
      return f(std::integral_constant<UOp, UOp::logical_xor>{});
    case UOp::bitwise_and:
      return f(std::integral_constant<UOp, UOp::bitwise_and>{});
    case UOp::bitwise_or:
      return f(std::integral_constant<UOp, UOp::bitwise_or>{});
    case UOp::bitwise_xor:
      return f(std::integral_constant<UOp, UOp::bitwise_xor>{});
  }
}

UOp parse_op(const Args& a, size_t i) {
  static const char* const names[] = {"maximum",     "minimum",    "fmax",        "fmin",
                                      "logical_and", "logical_or", "logical_xor", "bitwise_and",
                                      "bitwise_or",  "bitwise_xor"};
  const std::string& s = a.string(i);
  for (size_t k = 0; k < std::size(names); ++k) {
    if (s == names[k]) return static_cast<UOp>(k);
  }
  throw std::invalid_argument(error_message(
      "[", a.op(), "] unknown operation '", s,
      "': expected one of maximum, minimum, fmax, fmin, logical_and, logical_or, logical_xor, "
      "bitwise_and, bitwise_or, bitwise_xor (add and multiply are cumsum/cumprod and sum/prod)"));
}

const char* op_name(UOp op) {
  static const char* const names[] = {"maximum",     "minimum",    "fmax",        "fmin",
                                      "logical_and", "logical_or", "logical_xor", "bitwise_and",
                                      "bitwise_or",  "bitwise_xor"};
  return names[static_cast<int>(op)];
}

// The value of a stored element to compare (the 16-bit floats as float).
template <class T>
auto value_of(T v) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return half_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return bfloat_to_float(v.bits);
  } else {
    return v;
  }
}

template <class T>
bool nonzero(T v) {
  if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return v.real() != 0 || v.imag() != 0;
  } else {
    return value_of(v) != 0;  // NaN is true, as in NumPy
  }
}

template <class T>
constexpr bool kScanComplex =
    std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;
template <class T>
constexpr bool kIntegral = std::is_integral_v<T>;  // bool and the integers

// Which dtypes an operation takes (NumPy's loops): bitwise ones integers and
// bools; maximum/minimum/fmax/fmin everything real (complex: not here).
void check_dtype(const Args& a, UOp op, DType dt) {
  const bool complex = dt == DType::complex64 || dt == DType::complex128;
  if (is_bitwise(op) && !(is_integer(dt) || dt == DType::bool_)) {
    throw TypeError(error_message("[", a.op(), "] ufunc '", op_name(op),
                                  "' not supported for the input types: ", dtype_name(dt),
                                  " (only integer and bool arrays)"));
  }
  if (!is_logical(op) && !is_bitwise(op) && complex) {
    throw TypeError(error_message("[", a.op(), "] ", op_name(op),
                                  " of complex arrays is not supported by tessera: got ",
                                  dtype_name(dt)));
  }
}

// True when acc OP v is acc itself (maximum/minimum/fmax/fmin; ties and
// NaN as NumPy's loops: maximum keeps a NaN acc and takes a NaN v, fmax the
// other way round).
template <class T>
bool keeps(UOp op, T acc, T v) {
  if constexpr (kScanComplex<T>) {
    return true;  // refused by check_dtype
  } else {
    auto a = value_of(acc);
    auto b = value_of(v);
    bool nan_a = false, nan_b = false;
    if constexpr (!kIntegral<T>) nan_a = std::isnan(a), nan_b = std::isnan(b);
    switch (op) {
      case UOp::maximum:
        return a >= b || nan_a;
      case UOp::minimum:
        return a <= b || nan_a;
      case UOp::fmax:
        return a >= b || nan_b;
      case UOp::fmin:
        return a <= b || nan_b;
      default:
        return true;
    }
  }
}

// acc OP v for the value-selecting and bitwise operations (same dtype).
template <class T>
T combine(UOp op, T acc, T v) {
  if constexpr (kIntegral<T>) {
    switch (op) {
      case UOp::bitwise_and:
        return static_cast<T>(acc & v);
      case UOp::bitwise_or:
        return static_cast<T>(acc | v);
      case UOp::bitwise_xor:
        return static_cast<T>(acc ^ v);
      default:
        break;
    }
  }
  return keeps(op, acc, v) ? acc : v;
}

bool combine_logical(UOp op, bool acc, bool v) {
  if (op == UOp::logical_and) return acc && v;
  if (op == UOp::logical_or) return acc || v;
  return acc != v;
}

// x (contiguous) seen as (outer, n, inner) around `axis`.
struct Lanes {
  int64_t outer = 1, n = 1, inner = 1;
};
Lanes lanes_of(const Array& x, int axis) {
  Lanes l;
  for (int d = 0; d < axis; ++d) l.outer *= x.dim(d);
  l.n = x.dim(axis);
  for (int d = axis + 1; d < x.ndim(); ++d) l.inner *= x.dim(d);
  return l;
}

int axis_of(const Args& a, size_t i, const Array& x) {
  if (x.ndim() == 0) {
    throw TypeError(error_message("[", a.op(), "] cannot ", a.op(), " on a scalar (a 0-d array)"));
  }
  if (a.is_nil(i) || a[i].is_list()) {
    throw std::invalid_argument(error_message("[", a.op(), "] ", a.op(),
                                              " takes one integer axis: got ", a[i].str()));
  }
  return normalize_axis(a.integer(i), x.ndim(), a.op());
}

// accumulate(x, op, axis): the running `op` along axis, like numpy's
// ufunc.accumulate (NumPy's defaults: axis 0; the dtype of x, bool for the
// logical operations).
Value eval_accumulate(Args& a) {
  const Array x = a.array(0).contiguous();
  const UOp op = parse_op(a, 1);
  check_dtype(a, op, x.dtype());
  const int axis = axis_of(a, 2, x);
  const Lanes l = lanes_of(x, axis);
  const bool logical = is_logical(op);
  Array out(logical ? DType::bool_ : x.dtype(), x.shape());
  if (out.size() == 0) return out;
  const int64_t row = l.n * l.inner;
  with_op(op, [&](auto opc) {
    constexpr UOp kOp = decltype(opc)::value;
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = x.data<T>();
      parallel_for(l.outer, static_cast<double>(row), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* s = src + o * row;
          if constexpr (is_logical(kOp)) {
            bool* d = out.data<bool>() + o * row;
            for (int64_t i = 0; i < l.inner; ++i) d[i] = nonzero(s[i]);
            for (int64_t k = 1; k < l.n; ++k) {
              for (int64_t i = 0; i < l.inner; ++i) {
                d[k * l.inner + i] =
                    combine_logical(kOp, d[(k - 1) * l.inner + i], nonzero(s[k * l.inner + i]));
              }
            }
          } else {
            T* d = out.data<T>() + o * row;
            for (int64_t i = 0; i < l.inner; ++i) d[i] = s[i];
            for (int64_t k = 1; k < l.n; ++k) {
              for (int64_t i = 0; i < l.inner; ++i) {
                d[k * l.inner + i] = combine(kOp, d[(k - 1) * l.inner + i], s[k * l.inner + i]);
              }
            }
          }
        }
      });
    });
  });
  return out;
}

// The identity NumPy starts an empty reduction from (none for the
// value-selecting operations).
bool has_identity(UOp op) {
  return is_logical(op) || is_bitwise(op);
}

// reduce_op(x, op, axis, keepdims, initial): `op` folded along axis from the
// first element (or from `initial`), like numpy's ufunc.reduce; empty lanes
// give the identity, or NumPy's ValueError for operations without one.
Value eval_reduce_op(Args& a) {
  const Array x = a.array(0).contiguous();
  const UOp op = parse_op(a, 1);
  check_dtype(a, op, x.dtype());
  const int axis = axis_of(a, 2, x);
  const bool keepdims = a.boolean(3);
  const bool has_initial = !a.is_nil(4);
  const Lanes l = lanes_of(x, axis);
  const bool logical = is_logical(op);
  const DType out_dtype = logical ? DType::bool_ : x.dtype();
  Shape shape = x.shape();
  if (keepdims) {
    shape[axis] = 1;
  } else {
    shape.erase(shape.begin() + axis);
  }
  Array out(out_dtype, shape);
  if (l.n == 0 && !has_initial && !has_identity(op) && out.size() != 0) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] zero-size array to reduction operation ", op_name(op),
        " which has no identity: shape ", shape_str(x.shape()), ", axis ", axis));
  }
  if (out.size() == 0) return out;
  // The start value as an element of the result dtype (initial converted as
  // NumPy casts it; the identities: all ones for and, zero for or/xor).
  Array start;
  if (has_initial) {
    start = to_array(a[4], a.op(), "initial").astype(out_dtype);
  } else if (has_identity(op)) {
    const bool all_ones = op == UOp::logical_and || op == UOp::bitwise_and;
    start = Array(DType::int64, {});
    start.data<int64_t>()[0] = all_ones ? -1 : 0;
    start = logical ? Array(DType::bool_, {}) : start.astype(out_dtype);
    if (logical) start.data<bool>()[0] = all_ones;
  }
  const int64_t row = l.n * l.inner;
  with_op(op, [&](auto opc) {
    constexpr UOp kOp = decltype(opc)::value;
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = x.data<T>();
      parallel_for(l.outer, static_cast<double>(row), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* s = src + o * row;
          const int64_t k0 = has_initial || l.n == 0 ? 0 : 1;
          if constexpr (is_logical(kOp)) {
            bool* d = out.data<bool>() + o * l.inner;
            for (int64_t i = 0; i < l.inner; ++i) {
              d[i] = k0 == 0 ? start.data<bool>()[0] : nonzero(s[i]);
            }
            for (int64_t k = k0; k < l.n; ++k) {
              for (int64_t i = 0; i < l.inner; ++i) {
                d[i] = combine_logical(kOp, d[i], nonzero(s[k * l.inner + i]));
              }
            }
          } else {
            T* d = out.data<T>() + o * l.inner;
            for (int64_t i = 0; i < l.inner; ++i) d[i] = k0 == 0 ? start.data<T>()[0] : s[i];
            for (int64_t k = k0; k < l.n; ++k) {
              for (int64_t i = 0; i < l.inner; ++i) d[i] = combine(kOp, d[i], s[k * l.inner + i]);
            }
          }
        }
      });
    });
  });
  return out;
}

// accumulate_grad(g, x, op, axis): the cotangent of x in accumulate(x, op,
// axis) for maximum/minimum/fmax/fmin: g[j] is added at the position the
// running value out[j] was taken from (ties keep the earlier position, as
// the forward keeps the earlier element).
Value eval_accumulate_grad(Args& a) {
  const Array g = a.array(0).contiguous();
  const Array x = a.array(1).contiguous();
  const UOp op = parse_op(a, 2);
  if (is_logical(op) || is_bitwise(op)) {
    throw std::invalid_argument(error_message("[", a.op(), "] accumulate of ", op_name(op),
                                              " has no gradient"));
  }
  const int axis = axis_of(a, 3, x);
  if (g.shape() != x.shape()) {
    throw std::invalid_argument(error_message("[", a.op(), "] g of shape ", shape_str(g.shape()),
                                              " does not match x of shape ",
                                              shape_str(x.shape())));
  }
  const Lanes l = lanes_of(x, axis);
  const DType gdt = is_floating(g.dtype()) ? g.dtype() : DType::float64;
  const Array gc = g.astype(gdt);
  Array dx(gdt, x.shape());
  if (dx.size() == 0) return dx;
  const int64_t row = l.n * l.inner;
  dispatch(gdt, [&](auto gtag) {
    using G = typename decltype(gtag)::type;
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = x.data<T>();
      const G* gs = gc.data<G>();
      G* d = dx.data<G>();
      for (int64_t i = 0; i < dx.size(); ++i) d[i] = G(0);
      parallel_for(l.outer, static_cast<double>(row), [&](int64_t b, int64_t e) {
        std::vector<int64_t> pos(static_cast<size_t>(l.inner));
        std::vector<T> acc(static_cast<size_t>(l.inner));
        for (int64_t o = b; o < e; ++o) {
          const int64_t base = o * row;
          for (int64_t i = 0; i < l.inner; ++i) {
            acc[i] = src[base + i];
            pos[i] = 0;
            d[base + i] += gs[base + i];
          }
          for (int64_t k = 1; k < l.n; ++k) {
            for (int64_t i = 0; i < l.inner; ++i) {
              const int64_t at = base + k * l.inner + i;
              if (!keeps<T>(op, acc[i], src[at])) {
                acc[i] = src[at];
                pos[i] = k;
              }
              d[base + pos[i] * l.inner + i] += gs[at];
            }
          }
        }
      });
    });
  });
  return dx;
}

enum class Arith { none, add, subtract, multiply };

// a + b, a - b, a * b in T: integers wrap (computed unsigned), 16-bit floats
// round once, bools: add is or, multiply and (subtract is refused).
template <class T>
T arith(Arith k, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return k == Arith::multiply ? (a && b) : (a || b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const uint64_t x = static_cast<U>(a), y = static_cast<U>(b);
    return static_cast<T>(k == Arith::multiply ? x * y : k == Arith::add ? x + y : x - y);
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    const float x = value_of(a), y = value_of(b);
    const float r = k == Arith::multiply ? x * y : k == Arith::add ? x + y : x - y;
    if constexpr (std::is_same_v<T, float16_t>) {
      return float16_t{float_to_half(r)};
    } else {
      return bfloat16_t{float_to_bfloat(r)};
    }
  } else {
    return k == Arith::multiply ? a * b : k == Arith::add ? a + b : a - b;
  }
}

template <class T>
T from_bool(bool v) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return float16_t{float_to_half(v ? 1.0f : 0.0f)};
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return bfloat16_t{float_to_bfloat(v ? 1.0f : 0.0f)};
  } else {
    return static_cast<T>(v);
  }
}

// An element converted as NumPy's unsafe cast (floats to integers through
// int64, truncating; integers wrap; the 16-bit floats through float).
template <class To, class From>
To cast_to(From v) {
  if constexpr (kScanComplex<From>) {
    if constexpr (kScanComplex<To>) {
      return To(v);
    } else {
      return cast_to<To>(v.real());
    }
  } else {
    const auto f = value_of(v);
    using F = std::remove_cv_t<decltype(f)>;
    if constexpr (std::is_same_v<To, bool>) {
      return f != 0;
    } else if constexpr (std::is_same_v<To, float16_t>) {
      if constexpr (std::is_same_v<F, double>) {
        return float16_t{double_to_half(f)};
      } else {
        return float16_t{float_to_half(static_cast<float>(f))};
      }
    } else if constexpr (std::is_same_v<To, bfloat16_t>) {
      return bfloat16_t{float_to_bfloat(static_cast<float>(f))};
    } else if constexpr (kScanComplex<To>) {
      return To(static_cast<typename To::value_type>(f), 0);
    } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<F>) {
      if (!(f > -9.2e18 && f < 9.2e18)) return To(0);  // NaN, inf, out of range
      return static_cast<To>(static_cast<int64_t>(f));
    } else {
      return static_cast<To>(f);
    }
  }
}

// e = op(e, w) for at_op.
template <class T>
T at_step(UOp op, Arith arith_kind, T e, T w) {
  if (arith_kind != Arith::none) return arith(arith_kind, e, w);
  if (is_logical(op)) return from_bool<T>(combine_logical(op, nonzero(e), nonzero(w)));
  return combine(op, e, w);
}

// at_op(x, positions, values, op): a copy of x with x.flat[p] = op(x.flat[p],
// v) for each position in order, repeated positions applied one after
// another (numpy's unbuffered ufunc.at); op is add, subtract, multiply or
// one of accumulate's. As NumPy's loop, each step computes in the dtype of x
// promoted with the values' and stores back in x's.
Value eval_at_op(Args& a) {
  Array x = a.array(0).copy();
  const Array pos = a.array(1).astype(DType::int64).contiguous();
  const std::string& name = a.string(3);
  const Arith kind = name == "add"        ? Arith::add
                     : name == "subtract" ? Arith::subtract
                     : name == "multiply" ? Arith::multiply
                                          : Arith::none;
  const UOp op = kind != Arith::none ? UOp::maximum : parse_op(a, 3);
  const DType work = promote(x.dtype(), a.array(2).dtype());
  if (kind == Arith::none) check_dtype(a, op, work);
  if (kind == Arith::subtract && work == DType::bool_) {
    throw TypeError(error_message(
        "[", a.op(), "] numpy boolean subtract, the `-` operator, is not supported, use the "
        "bitwise_xor, the `^` operator, or the logical_xor function instead"));
  }
  const Array vals = a.array(2).astype(work).contiguous();
  if (vals.size() != pos.size() && vals.size() != 1) {
    throw std::invalid_argument(error_message("[", a.op(), "] ", vals.size(),
                                              " values for ", pos.size(), " positions"));
  }
  // Negative positions count from the end, as a 1-d array's indices.
  std::vector<int64_t> positions(static_cast<size_t>(pos.size()));
  const int64_t n = x.size();
  for (int64_t k = 0; k < pos.size(); ++k) {
    const int64_t given = pos.data<int64_t>()[k];
    const int64_t q = given < 0 ? given + n : given;
    if (q < 0 || q >= n) {
      throw std::out_of_range(error_message("[", a.op(), "] index ", given,
                                            " is out of bounds for axis 0 with size ", n));
    }
    positions[k] = q;
  }
  const int64_t* p = positions.data();
  const int64_t step = vals.size() == 1 ? 0 : 1;
  dispatch_all(x.dtype(), [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    X* d = x.data<X>();
    if (work == x.dtype()) {
      const X* v = vals.data<X>();
      for (int64_t k = 0; k < pos.size(); ++k) {
        d[p[k]] = at_step(op, kind, d[p[k]], v[k * step]);
      }
      return;
    }
    dispatch_all(work, [&](auto wtag) {
      using W = typename decltype(wtag)::type;
      const W* v = vals.data<W>();
      for (int64_t k = 0; k < pos.size(); ++k) {
        d[p[k]] = cast_to<X>(at_step(op, kind, cast_to<W>(d[p[k]]), v[k * step]));
      }
    });
  });
  return x;
}

// f(part, along) over the lanes of `part` along `axis` (moved last, so that
// each lane is contiguous: NumPy reduces a reduceat lane as one run), with
// the axis kept.
Value lane_reduce(const char* f, const Value& part, int axis) {
  Value moved = prim("moveaxis", {part, Value(int64_t{axis}), Value(int64_t{-1})});
  Value r = call_primitive(f, std::vector<CallArg>{{"", moved}, {"axis", Value(int64_t{-1})}});
  return prim("expand_dims", {r, Value(int64_t{axis})});
}

// reduceat(x, indices, op, axis): numpy's ufunc.reduceat for add, multiply,
// maximum and minimum: for each i, op over x[idx[i]:idx[i+1]] along axis
// when idx[i] < idx[i+1], else x[idx[i]] alone, the last to the end; add is
// the first element plus the pairwise sum of the rest, multiply sequential,
// as NumPy's; add and multiply widen bool and small integers as sum.
Value eval_reduceat(Args& a) {
  const Array x = a.array(0);
  const Array idx = a.array(1).astype(DType::int64).contiguous();
  const std::string& name = a.string(2);
  if (name != "add" && name != "multiply" && name != "maximum" && name != "minimum") {
    throw std::invalid_argument(error_message("[", a.op(), "] unknown operation '", name,
                                              "': expected add, multiply, maximum or minimum"));
  }
  if (x.ndim() == 0) {
    throw TypeError(error_message("[", a.op(), "] cannot reduceat on a scalar (a 0-d array)"));
  }
  if (idx.ndim() != 1) {
    throw std::invalid_argument(error_message("[", a.op(), "] index array must be 1-D: got shape ",
                                              shape_str(idx.shape())));
  }
  const int axis = axis_of(a, 3, x);
  const int nd = x.ndim();
  const int64_t n = x.dim(axis);
  const int64_t* ix = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.size(); ++i) {
    if (ix[i] < 0 || ix[i] >= n) {
      throw std::out_of_range(error_message("[", a.op(), "] index ", ix[i], " out-of-bounds in ",
                                            name, ".reduceat [0, ", n, ")"));
    }
  }
  const bool widen = name == "add" || name == "multiply";
  DType out = x.dtype();
  if (widen && (x.dtype() == DType::bool_ || is_signed_integer(x.dtype()))) out = DType::int64;
  if (widen && is_unsigned(x.dtype())) out = DType::uint64;
  const Value xv(x);
  List parts;
  for (int64_t i = 0; i < idx.size(); ++i) {
    const int64_t s = ix[i];
    const int64_t e = i + 1 < idx.size() ? ix[i + 1] : n;
    Value part;
    if (s >= e || s + 1 == e) {
      part = slice_along(xv, nd, axis, s, s + 1);
    } else if (name == "add") {
      Value first = slice_along(xv, nd, axis, s, s + 1);
      Value rest = lane_reduce("sum", slice_along(xv, nd, axis, s + 1, e), axis);
      part = prim("add", {first, rest});
    } else {
      const char* f = name == "multiply" ? "prod" : name == "maximum" ? "max" : "min";
      part = lane_reduce(f, slice_along(xv, nd, axis, s, e), axis);
    }
    parts.push_back(part.is_array() ? Value(part.as_array().astype(out)) : part);
  }
  if (parts.empty()) return slice_along(Value(x.astype(out)), nd, axis, 0, 0);
  return call_primitive("concatenate", std::vector<CallArg>{{"", Value(std::move(parts))},
                                                           {"axis", Value(int64_t{axis})}});
}

const bool registered_ufunc_scan = register_primitives({
    {.name = "accumulate",
     .family = "statistics",
     .params = {{"x"}, {"op"}, opt("axis", int64_t{0})},
     .help = "The running op along one axis, like numpy's ufunc.accumulate (np.maximum."
             "accumulate(x, axis)): op is 'maximum', 'minimum' (NaN propagates), 'fmax', 'fmin' "
             "(NaN ignored), 'logical_and', 'logical_or', 'logical_xor' (bool result), "
             "'bitwise_and', 'bitwise_or' or 'bitwise_xor' (integers, bools); every dtype, the "
             "result in x's. add and multiply are cumsum and cumprod.",
     .eval = eval_accumulate,
     .ns_per_element = 1.0,
     .grads = {"accumulate_grad(g, x, op, axis)", "", ""}},
    {.name = "reduce_op",
     .family = "statistics",
     .params = {{"x"}, {"op"}, opt("axis", int64_t{0}), opt("keepdims", false),
                opt("initial", Value())},
     .help = "op folded along one axis, like numpy's ufunc.reduce (np.logical_xor.reduce(x, "
             "axis)), for the ops of accumulate, from initial when given; an empty axis gives "
             "the identity (all ones for and, zero for or/xor) or NumPy's ValueError for "
             "maximum/minimum/fmax/fmin.",
     .eval = eval_reduce_op,
     .ns_per_element = 1.0},
    {.name = "at_op",
     .family = "statistics",
     .params = {{"x"}, {"positions"}, {"values"}, {"op"}},
     .help = "A copy of x with x.flat[p] = op(x.flat[p], v) for each position p and value v in "
             "order (numpy's unbuffered ufunc.at: repeated positions apply again; negative ones "
             "count from the end); op is "
             "'add', 'subtract', 'multiply' or one of accumulate's; each step computes in x's "
             "dtype promoted with the values' and stores back in x's, as NumPy's loop.",
     .eval = eval_at_op,
     .ns_per_element = 2.0},
    {.name = "reduceat",
     .family = "statistics",
     .params = {{"x"}, {"indices"}, {"op"}, opt("axis", int64_t{0})},
     .help = "numpy's ufunc.reduceat for op 'add', 'multiply', 'maximum' or 'minimum': for "
             "each i, op over x[indices[i]:indices[i+1]] along axis when indices[i] < "
             "indices[i+1], else x[indices[i]] alone, the last to the end; NumPy's order "
             "and dtypes (add and multiply widen bool and small integers as sum).",
     .eval = eval_reduceat,
     .ns_per_element = 2.0},
    {.name = "accumulate_grad",
     .family = "statistics",
     .params = {{"g"}, {"x"}, {"op"}, opt("axis", int64_t{0})},
     .help = "The cotangent of x in accumulate(x, op, axis) for maximum/minimum/fmax/fmin: "
             "each g[j] added at the position whose value the running result took.",
     .eval = eval_accumulate_grad,
     .ns_per_element = 2.0},
});

}  // namespace

}  // namespace tessera
