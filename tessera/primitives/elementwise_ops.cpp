#include "tessera/primitives/elementwise_ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <stdexcept>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/kernels/complex.hpp"
#include "tessera/kernels/fused.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

using kernels::cost_ns;

// Operand Values as arrays (lists become arrays); others are TypeErrors.
Array operand(const Value& v, const char* opname, const char* what) {
  return to_array(v, opname, what);
}

// Moves the array out of an operand Value, so that a uniquely held buffer stays
// unique; other kinds convert as operand() does.
Array take_array(Value& v, const char* opname, const char* what) {
  if (v.is_array()) return std::move(v.as_array());
  return to_array(v, opname, what);
}

// True when an operand's buffer may hold the result: nobody else holds it and
// it has the result's dtype and shape (elementwise kernels read element i
// before writing it).
bool reusable(const Array& candidate, DType dtype, const Shape& shape) {
  return candidate.unique() && candidate.is_contiguous() && candidate.dtype() == dtype &&
         candidate.shape() == shape;
}

// A numeric view of an operand for result_type: lists become strong arrays.
Value numeric(const Value& v, const char* opname, const char* what) {
  if (v.is_numeric()) return v;
  return Value(operand(v, opname, what));
}

double as_double(const Value& v) {
  if (v.is_float()) return v.as_float();
  if (v.is_int()) return static_cast<double>(v.as_int());
  return v.as_bool() ? 1.0 : 0.0;
}

int64_t as_int64(const Value& v) { return v.is_int() ? v.as_int() : (v.as_bool() ? 1 : 0); }

// What an int result past int64 is: Python would give a big integer, which
// tessera's int64 cannot hold, so the nearest honest answer is Python's
// OverflowError (std::overflow_error), never a wrapped number.
constexpr const char* kBigIntNote =
    " does not fit in int64 (Python would give a big integer; tessera's ints are int64)";

[[noreturn]] void overflow(const char* opname, const char* sym, int64_t a, int64_t b) {
  throw std::overflow_error(
      error_message("[", opname, "] integer overflow: ", a, " ", sym, " ", b, kBigIntNote));
}

int64_t checked_power(int64_t base, int64_t exp, const char* opname) {
  int64_t result = 1, b = base;
  for (int64_t e = exp; e; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(result, b, &result)) overflow(opname, "**", base, exp);
    if (e > 1 && __builtin_mul_overflow(b, b, &b)) overflow(opname, "**", base, exp);
  }
  return result;
}

// Python's semantics for two Python-like scalars, without allocating.
Value scalar_binary(BinaryOp op, const Value& a, const Value& b, const char* opname) {
  const bool fl = a.is_float() || b.is_float();
  const bool both_bool = a.is_bool() && b.is_bool();
  const double x = as_double(a), y = as_double(b);
  // Python's ZeroDivisionError for its numbers (NumPy's scalars are arrays:
  // not here); integer // and % by zero report it in int_floor_divide/int_mod.
  if (y == 0.0 && (op == BinaryOp::divide || (fl && (op == BinaryOp::floor_divide ||
                                                     op == BinaryOp::mod)))) {
    const char* what = !fl                               ? "division by zero"
                       : op == BinaryOp::divide          ? "float division by zero"
                       : op == BinaryOp::floor_divide    ? "float floor division by zero"
                                                         : "float modulo by zero";
    throw ZeroDivisionError(error_message("[", opname, "] ", what));
  }
  if (op == BinaryOp::power && x == 0.0 && y < 0.0) {
    throw ZeroDivisionError(
        error_message("[", opname, "] 0.0 cannot be raised to a negative power"));
  }
  switch (op) {
    case BinaryOp::equal:
      return fl ? x == y : as_int64(a) == as_int64(b);
    case BinaryOp::not_equal:
      return fl ? x != y : as_int64(a) != as_int64(b);
    case BinaryOp::less:
      return fl ? x < y : as_int64(a) < as_int64(b);
    case BinaryOp::less_equal:
      return fl ? x <= y : as_int64(a) <= as_int64(b);
    case BinaryOp::greater:
      return fl ? x > y : as_int64(a) > as_int64(b);
    case BinaryOp::greater_equal:
      return fl ? x >= y : as_int64(a) >= as_int64(b);
    case BinaryOp::logical_and:
      return a.truthy(opname) && b.truthy(opname);
    case BinaryOp::logical_or:
      return a.truthy(opname) || b.truthy(opname);
    case BinaryOp::logical_xor:
      return a.truthy(opname) != b.truthy(opname);
    case BinaryOp::divide:
      return x / y;
    case BinaryOp::arctan2:
      return std::atan2(x, y);
    case BinaryOp::hypot:
      return std::hypot(x, y);
    case BinaryOp::copysign:
      return std::copysign(x, y);
    default:
      break;
  }
  if (fl) {
    switch (op) {
      case BinaryOp::add:
        return x + y;
      case BinaryOp::subtract:
        return x - y;
      case BinaryOp::multiply:
        return x * y;
      case BinaryOp::floor_divide:
        return kernels::float_floor_divide(x, y);
      case BinaryOp::mod:
        return kernels::float_mod(x, y);
      case BinaryOp::power:
        return std::pow(x, y);
      case BinaryOp::maximum:
        return (x >= y || x != x) ? x : y;
      case BinaryOp::minimum:
        return (x <= y || x != x) ? x : y;
      case BinaryOp::fmax:
        return (x >= y || y != y) ? x : y;
      case BinaryOp::fmin:
        return (x <= y || y != y) ? x : y;
      default:
        break;
    }
  }
  const int64_t i = as_int64(a), j = as_int64(b);
  int64_t r = 0;
  switch (op) {
    case BinaryOp::add:
      if (__builtin_add_overflow(i, j, &r)) overflow(opname, "+", i, j);
      return r;
    case BinaryOp::subtract:
      if (__builtin_sub_overflow(i, j, &r)) overflow(opname, "-", i, j);
      return r;
    case BinaryOp::multiply:
      if (__builtin_mul_overflow(i, j, &r)) overflow(opname, "*", i, j);
      return r;
    case BinaryOp::floor_divide:
      if (i == std::numeric_limits<int64_t>::min() && j == -1) overflow(opname, "//", i, j);
      return kernels::int_floor_divide(i, j, opname);
    case BinaryOp::mod:
      return kernels::int_mod(i, j, opname);
    case BinaryOp::power:
      // Python: a negative exponent gives a float.
      if (j < 0) return std::pow(x, y);
      return checked_power(i, j, opname);
    case BinaryOp::maximum:
    case BinaryOp::fmax:
      return both_bool ? Value(i >= j ? a : b) : Value(i >= j ? i : j);
    case BinaryOp::minimum:
    case BinaryOp::fmin:
      return both_bool ? Value(i <= j ? a : b) : Value(i <= j ? i : j);
    default:
      break;
  }
  throw std::logic_error(error_message("[", opname, "] internal error: unhandled scalar op"));
}

Value scalar_unary(UnaryOp op, const Value& v, const char* opname) {
  const double x = as_double(v);
  switch (op) {
    case UnaryOp::isnan:
      return std::isnan(x);
    case UnaryOp::isinf:
      return std::isinf(x);
    case UnaryOp::isfinite:
      return std::isfinite(x);
    case UnaryOp::logical_not:
      return !v.truthy(opname);
    default:
      break;
  }
  if (!v.is_float()) {
    const int64_t i = as_int64(v);
    const int64_t kMin = std::numeric_limits<int64_t>::min();
    switch (op) {
      case UnaryOp::negative:
      case UnaryOp::abs:
        if (i == kMin) {
          throw std::overflow_error(error_message("[", opname, "] integer overflow: ",
                                                  op_name(op), " of ", i, kBigIntNote));
        }
        return op == UnaryOp::negative || i < 0 ? -i : i;
      case UnaryOp::positive:
        return i;
      case UnaryOp::sign:
        return static_cast<int64_t>((i > 0) - (i < 0));
      case UnaryOp::square: {
        int64_t r;
        if (__builtin_mul_overflow(i, i, &r)) overflow(opname, "*", i, i);
        return r;
      }
      default:
        break;
    }
  }
  if (op == UnaryOp::negative) return -x;
  if (op == UnaryOp::positive) return x;
  return kernels::unary_float(op, x);
}

}  // namespace

Array cast_array(const Array& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  const Array in = a.contiguous();
  Array out(dtype, in.shape());
  parallel_for(in.size(), 0.5, [&](int64_t b, int64_t e) { kernels::cast_range(in, out, b, e); });
  return out;
}

Array cast_array(Array&& a, DType dtype) {
  if (a.dtype() == dtype) return std::move(a);
  return cast_array(static_cast<const Array&>(a), dtype);
}

Value cast_value(const Value& v, DType dtype, const char* opname) {
  if (v.is_scalar()) {
    switch (dtype) {
      case DType::bool_:
        return v.truthy(opname);
      case DType::int64:
        return v.is_float() ? element_cast<int64_t>(v.as_float()) : as_int64(v);
      case DType::float64:
        return as_double(v);
      case DType::float32:
        return Array::scalar(as_double(v), DType::float32);
      default:
        break;
    }
  }
  return cast_array(operand(v, opname, "argument 'x'"), dtype);
}

Array binary_array(BinaryOp op, const Array& a, const Array& b, const char* opname) {
  if (!opname) opname = op_name(op);
  if (is_complex(a.dtype()) || is_complex(b.dtype()))
    return kernels::complex_binary(op, a, b, opname);
  DType compute = kernels::binary_compute_dtype(op, promote(a.dtype(), b.dtype()), opname);
  DType out_dtype = kernels::binary_out_dtype(op, compute);
  Array x = cast_array(a, compute), y = cast_array(b, compute);
  auto layout = kernels::make_broadcast<2>({&x.shape(), &y.shape()}, opname);
  Array out(out_dtype, std::move(layout.out_shape));
  parallel_for(layout.size, cost_ns(op), [&](int64_t begin, int64_t end) {
    kernels::binary_range(op, layout, x, y, out, begin, end, opname);
  });
  return out;
}

namespace {

using Cx = std::complex<double>;

// A number of complex scalar arithmetic: Python's (a Python number or a
// Python complex: `python`) or NumPy's (a 0-d complex128, float64, int64 or
// bool); false for anything else (an array, another dtype).
bool complex_operand(const Value& v, Cx& z, bool& python) {
  if (v.is_bool() || v.is_int() || v.is_float()) {
    const double x = v.is_float()  ? v.as_float()
                     : v.is_bool() ? (v.as_bool() ? 1.0 : 0.0)
                                   : static_cast<double>(v.as_int());
    z = Cx(x, 0.0);
    python = true;
    return true;
  }
  if (!v.is_array()) return false;
  const Array& a = v.as_array();
  if (a.ndim() != 0) return false;
  if (a.dtype() == DType::complex128) {
    z = a.get_complex(0);
    python = a.weak();
    return true;
  }
  if (a.weak() || (a.dtype() != DType::float64 && a.dtype() != DType::int64 &&
                    a.dtype() != DType::bool_))
    return false;
  z = Cx(a.dtype() == DType::float64 ? a.get_double(0) : static_cast<double>(a.get_int(0)), 0.0);
  python = false;
  return true;
}

using kernels::complex_product;

// CPython's _Py_c_quot: false for a zero divisor (its ZeroDivisionError).
bool py_quot(Cx a, Cx b, Cx& r) {
  const double abr = b.real() < 0 ? -b.real() : b.real();
  const double abi = b.imag() < 0 ? -b.imag() : b.imag();
  if (abr >= abi) {
    if (abr == 0.0) return false;
    const double ratio = b.imag() / b.real();
    const double denom = b.real() + b.imag() * ratio;
    r = Cx((a.real() + a.imag() * ratio) / denom, (a.imag() - a.real() * ratio) / denom);
  } else if (abi >= abr) {
    const double ratio = b.real() / b.imag();
    const double denom = b.real() * ratio + b.imag();
    r = Cx((a.real() * ratio + a.imag()) / denom, (a.imag() * ratio - a.real()) / denom);
  } else {
    r = Cx(std::nan(""), std::nan(""));
  }
  return true;
}

// x ** n by CPython's c_powu (binary exponentiation from 1).
Cx c_powu(Cx x, int64_t n) {
  Cx r(1.0, 0.0), p = x;
  for (int64_t mask = 1; mask > 0 && n >= mask; mask <<= 1) {
    if (n & mask) r = complex_product(r, p);
    p = complex_product(p, p);
  }
  return r;
}

// Python's complex ** complex (complexobject.c's complex_pow, CPython 3.11).
Cx py_pow(Cx a, Cx b, const char* opname) {
  auto zero_power = [&] {
    return ZeroDivisionError(error_message("[", opname, "] 0.0 to a negative or complex power"));
  };
  Cx p;
  if (b.imag() == 0.0 && b.real() == std::floor(b.real()) && std::fabs(b.real()) <= 100.0) {
    const auto n = static_cast<int64_t>(b.real());
    if (n > 0) {
      p = c_powu(a, n);
    } else if (!py_quot(Cx(1.0, 0.0), c_powu(a, -n), p)) {
      throw zero_power();
    }
  } else if (b.real() == 0.0 && b.imag() == 0.0) {
    p = Cx(1.0, 0.0);
  } else if (a.real() == 0.0 && a.imag() == 0.0) {
    if (b.imag() != 0.0 || b.real() < 0.0) throw zero_power();
    p = Cx(0.0, 0.0);
  } else {
    // _Py_c_pow
    const double vabs = std::hypot(a.real(), a.imag());
    double len = std::pow(vabs, b.real());
    const double at = std::atan2(a.imag(), a.real());
    double phase = at * b.real();
    if (b.imag() != 0.0) {
      len /= std::exp(at * b.imag());
      phase += b.imag() * std::log(vabs);
    }
    p = Cx(len * std::cos(phase), len * std::sin(phase));
  }
  if (std::isinf(p.real()) || std::isinf(p.imag()))
    throw std::overflow_error(error_message("[", opname, "] complex exponentiation overflows"));
  return p;
}

// a op b of two complex scalars (at least one complex) with Python's
// formulas when both are Python's numbers (a Python complex result) and
// NumPy's scalar math otherwise (a complex128 scalar): `out` set, or false
// for what the array kernels compute.
bool complex_scalar_binary(BinaryOp op, const Value& a, const Value& b, const char* opname,
                           Value& out) {
  if (op != BinaryOp::add && op != BinaryOp::subtract && op != BinaryOp::multiply &&
      op != BinaryOp::divide && op != BinaryOp::power && op != BinaryOp::equal &&
      op != BinaryOp::not_equal)
    return false;
  Cx x, y;
  bool px, py;
  if (!complex_operand(a, x, px) || !complex_operand(b, y, py)) return false;
  const bool complex_in = (a.is_array() && a.as_array().dtype() == DType::complex128) ||
                          (b.is_array() && b.as_array().dtype() == DType::complex128);
  if (!complex_in) return false;
  const bool python = px && py;
  if (op == BinaryOp::equal || op == BinaryOp::not_equal) {
    // A Python bool of Python's numbers, np.bool_ of NumPy's.
    const bool eq = x.real() == y.real() && x.imag() == y.imag();
    const bool r = op == BinaryOp::equal ? eq : !eq;
    out = python ? Value(r) : Value(Array::scalar_bool(r));
    return true;
  }
  Cx r;
  switch (op) {
    case BinaryOp::add: r = Cx(x.real() + y.real(), x.imag() + y.imag()); break;
    case BinaryOp::subtract: r = Cx(x.real() - y.real(), x.imag() - y.imag()); break;
    case BinaryOp::multiply: r = complex_product(x, y); break;
    case BinaryOp::divide:
      if (python && !py_quot(x, y, r))
        throw ZeroDivisionError(error_message("[", opname, "] complex division by zero"));
      // NumPy's by zero: inf or nan with its warning, the array kernel's.
      if (!python && y.real() == 0.0 && y.imag() == 0.0) return false;
      if (!python) r = kernels::numpy_quotient(x, y);
      break;
    default:  // power
      if (python) {
        r = py_pow(x, y, opname);
      } else if (y.imag() == 0.0 && y.real() == std::floor(y.real()) &&
                 std::fabs(y.real()) < 100.0 && !(x.real() == 0.0 && x.imag() == 0.0) &&
                 y.real() != 0.0) {
        // NumPy's scalar power of a small integer: binary exponentiation,
        // the reciprocal by its division for a negative one.
        // 1, 2 and 3 unrolled, as NumPy's npy_cpow (no product with 1 + 0j,
        // whose 0 * inf would be NaN).
        const auto n = static_cast<int64_t>(y.real());
        r = n == 1   ? x
            : n == 2 ? complex_product(x, x)
            : n == 3 ? complex_product(x, complex_product(x, x))
                     : c_powu(x, n < 0 ? -n : n);
        if (n < 0) {
          if (r.real() == 0.0 && r.imag() == 0.0) return false;  // NumPy's inf and warning
          r = kernels::numpy_quotient(Cx(1.0, 0.0), r);
        }
      } else {
        return false;
      }
      break;
  }
  if (python) {
    out = Value(Array::weak_complex(r));
  } else {
    Array z(DType::complex128, Shape{});
    z.data<Cx>()[0] = r;
    out = Value(std::move(z));
  }
  return true;
}

}  // namespace

Value binary_op(BinaryOp op, Value a, Value b, const char* opname) {
  if (!opname) opname = op_name(op);
  if (a.is_scalar() && b.is_scalar()) return scalar_binary(op, a, b, opname);
  if (Value r; complex_scalar_binary(op, a, b, opname, r)) return r;
  if (!a.is_numeric()) a = numeric(a, opname, "argument 'x'");
  if (!b.is_numeric()) b = numeric(b, opname, "argument 'y'");
  if ((a.is_array() && is_complex(a.as_array().dtype())) ||
      (b.is_array() && is_complex(b.as_array().dtype()))) {
    return kernels::complex_binary(op, to_array(a, opname, "argument 'x'").contiguous(),
                                   to_array(b, opname, "argument 'y'").contiguous(), opname);
  }
  DType compute = kernels::binary_compute_dtype(op, result_type(a, b), opname);
  DType out_dtype = kernels::binary_out_dtype(op, compute);
  // Cast only when the dtype differs (no move through cast_array otherwise).
  Array x = take_array(a, opname, "argument 'x'");
  if (x.dtype() != compute) x = cast_array(x, compute);
  Array y = take_array(b, opname, "argument 'y'");
  if (y.dtype() != compute) y = cast_array(y, compute);
  if (!x.is_contiguous() || !y.is_contiguous()) {
    // A strided view (a slice, a column, x.T): float operations read it in
    // place; anything else works on a packed copy.
    if (out_dtype == compute) {
      Array out(out_dtype, kernels::broadcast_shapes({x.shape(), y.shape()}, opname));
      if (kernels::strided_binary(op, x, y, out)) return out;
    }
    // Anything else (integers, bools, comparisons) reads the views in place
    // through their strides, as NumPy does: no packed copy of each operand.
    auto layout = kernels::make_broadcast_views<2>({&x, &y}, opname);
    Array out(out_dtype, layout.out_shape);
    parallel_for(layout.size, cost_ns(op), [&](int64_t begin, int64_t end) {
      kernels::binary_range_views(op, layout, x, y, out, begin, end, opname);
    });
    return out;
  }
  const bool x0 = x.ndim() == 0, y0 = y.ndim() == 0;
  kernels::Broadcast<2> layout;
  if (x0 || y0 || x.shape() == y.shape()) {
    // Operands of one shape, or one of them 0-d (the common cases): the layout
    // make_broadcast gives them (one run of every element), without its copy
    // of the shape, which a result written into a reused operand never needs.
    // The kernel reads the layout's runs only; `out_shape` stays empty.
    const Shape& full = x0 ? y.shape() : x.shape();
    layout.size = x0 ? y.size() : x.size();
    if (std::any_of(full.begin(), full.end(), [](int64_t e) { return e != 1; })) {
      layout.dims.push_back(layout.size);
      layout.strides[0].push_back(x0 ? 0 : 1);
      layout.strides[1].push_back(y0 ? 0 : 1);
    }
  } else {
    layout = kernels::make_broadcast<2>({&x.shape(), &y.shape()}, opname);
  }
  const Shape& shape = layout.out_shape.empty() ? (x0 ? y.shape() : x.shape()) : layout.out_shape;
  // A new result takes the shape (the layout's is moved: the kernel needs only
  // its runs); a reused operand is moved into the result (no copy of its
  // shape) and read from there.
  const bool into_x = reusable(x, out_dtype, shape);
  const bool into_y = !into_x && reusable(y, out_dtype, shape);
  Array out = into_x   ? std::move(x)
              : into_y ? std::move(y)
              : layout.out_shape.empty() ? Array(out_dtype, shape)
                                         : Array(out_dtype, std::move(layout.out_shape));
  const Array& xs = into_x ? out : x;
  const Array& ys = into_y ? out : y;
  parallel_for(layout.size, cost_ns(op), [&](int64_t begin, int64_t end) {
    kernels::binary_range(op, layout, xs, ys, out, begin, end, opname);
  });
  return out;
}

namespace {

Array unary_into(UnaryOp op, Array x, const char* opname) {
  if (is_complex(x.dtype())) return kernels::complex_unary(op, x.contiguous(), opname);
  DType compute = kernels::unary_compute_dtype(op, x.dtype(), opname);
  // Moved, not copied, so that a uniquely held buffer stays unique.
  Array in = x.dtype() == compute ? std::move(x) : cast_array(x, compute);
  DType out_dtype = kernels::unary_out_dtype(op, compute);
  if (!in.is_contiguous()) {
    // A strided view: float functions read it in place (binary_op).
    if (out_dtype == compute) {
      Array out(out_dtype, in.shape());
      if (kernels::strided_unary(op, in, out)) return out;
    }
    in = in.contiguous();
  }
  // A reused operand is moved into the result (no copy of its shape) and read from there.
  const bool into_in = reusable(in, out_dtype, in.shape());
  Array out = into_in ? std::move(in) : Array(out_dtype, in.shape());
  const Array& src = into_in ? out : in;
  parallel_for(out.size(), cost_ns(op),
               [&](int64_t begin, int64_t end) { kernels::unary_range(op, src, out, begin, end); });
  return out;
}

}  // namespace

Array unary_array(UnaryOp op, const Array& x, const char* opname) {
  return unary_into(op, x, opname ? opname : op_name(op));
}

Value unary_op(UnaryOp op, Value x, const char* opname) {
  if (!opname) opname = op_name(op);
  if (x.is_scalar()) return scalar_unary(op, x, opname);
  if (op == UnaryOp::abs && x.is_array() && x.as_array().ndim() == 0 &&
      x.as_array().dtype() == DType::complex128) {
    // abs() of a complex scalar: hypot (CPython's _Py_c_abs, NumPy's scalar
    // math), a Python float of a Python complex (OverflowError past the
    // largest float, as Python), NumPy's float64 of np.complex128.
    const Cx z = x.as_array().get_complex(0);
    const double h = std::hypot(z.real(), z.imag());
    if (!x.as_array().weak()) return Value(Array::scalar(h));
    if (std::isinf(h) && std::isfinite(z.real()) && std::isfinite(z.imag()))
      throw std::overflow_error(error_message("[", opname, "] absolute value too large"));
    return Value(h);
  }
  if ((op == UnaryOp::negative || op == UnaryOp::positive) && x.is_array() &&
      x.as_array().ndim() == 0 && x.as_array().dtype() == DType::complex128 &&
      x.as_array().weak()) {
    // -z and +z of a Python complex: a Python complex.
    const Cx z = x.as_array().get_complex(0);
    return Value(Array::weak_complex(op == UnaryOp::negative ? -z : z));
  }
  return unary_into(op, take_array(x, opname, "argument 'x'"), opname);
}

Value where_op(const Value& cond, const Value& x, const Value& y, const char* opname) {
  Value xv = numeric(x, opname, "argument 'x'"), yv = numeric(y, opname, "argument 'y'");
  DType dtype = result_type(xv, yv);
  if (cond.is_scalar() && xv.is_scalar() && yv.is_scalar()) {
    return cast_value(cond.truthy(opname) ? xv : yv, dtype, opname);
  }
  Array c = cast_array(operand(cond, opname, "argument 'condition'"), DType::bool_);
  Array a = cast_array(operand(xv, opname, "argument 'x'"), dtype);
  Array b = cast_array(operand(yv, opname, "argument 'y'"), dtype);
  auto layout = kernels::make_broadcast<3>({c.shape(), a.shape(), b.shape()}, opname);
  Array out(dtype, layout.out_shape);
  parallel_for(layout.size, 0.7, [&](int64_t begin, int64_t end) {
    kernels::where_range(layout, c, a, b, out, begin, end);
  });
  return out;
}

namespace {

// isclose of complex operands, by NumPy's formula: |a - b| <= atol + rtol |b|
// where b is finite, or a == b (infinities), or both NaN with equal_nan.
Array isclose_complex(const Array& A, const Array& B, double rtol, double atol, bool equal_nan,
                      const char* op) {
  using kernels::complex_binary;
  using kernels::complex_unary;
  Array diff = complex_unary(UnaryOp::abs, complex_binary(BinaryOp::subtract, A, B, op), op);
  Array tol = binary_array(
      BinaryOp::add, Array::scalar(atol),
      binary_array(BinaryOp::multiply, Array::scalar(rtol), complex_unary(UnaryOp::abs, B, op), op),
      op);
  Array close =
      binary_array(BinaryOp::logical_and, binary_array(BinaryOp::less_equal, diff, tol, op),
                   complex_unary(UnaryOp::isfinite, B, op), op);
  Array out =
      binary_array(BinaryOp::logical_or, close, complex_binary(BinaryOp::equal, A, B, op), op);
  if (equal_nan) {
    Array nans = binary_array(BinaryOp::logical_and, complex_unary(UnaryOp::isnan, A, op),
                              complex_unary(UnaryOp::isnan, B, op), op);
    out = binary_array(BinaryOp::logical_or, out, nans, op);
  }
  return out;
}

}  // namespace

Value isclose_op(const Value& a, const Value& b, double rtol, double atol, bool equal_nan,
                 const char* opname) {
  if ((a.is_array() && is_complex(a.as_array().dtype())) ||
      (b.is_array() && is_complex(b.as_array().dtype()))) {
    Array out = isclose_complex(operand(a, opname, "argument 'a'"),
                                operand(b, opname, "argument 'b'"), rtol, atol, equal_nan, opname);
    if (out.ndim() == 0 && !a.is_array() && !b.is_array()) return Value(out.get_bool(0));
    return out;
  }
  Array x = cast_array(operand(a, opname, "argument 'a'"), DType::float64);
  Array y = cast_array(operand(b, opname, "argument 'b'"), DType::float64);
  auto layout = kernels::make_broadcast<2>({x.shape(), y.shape()}, opname);
  Array out(DType::bool_, layout.out_shape);
  parallel_for(layout.size, 1.0, [&](int64_t begin, int64_t end) {
    kernels::isclose_range(layout, x, y, out, rtol, atol, equal_nan, begin, end);
  });
  if (a.is_scalar() && b.is_scalar()) return Value(out.get_bool(0));
  return out;
}

namespace {

template <BinaryOp Op>
Value scalar_binary_for(const PrimitiveSpec& spec, const Value& a, const Value& b) {
  return scalar_binary(Op, a, b, spec.name.c_str());
}

template <size_t... I>
constexpr std::array<ScalarBinary, sizeof...(I)> scalar_binary_table(std::index_sequence<I...>) {
  return {&scalar_binary_for<static_cast<BinaryOp>(I)>...};
}

}  // namespace

ScalarBinary scalar_binary_of(BinaryOp op) {
  static constexpr auto table = scalar_binary_table(
      std::make_index_sequence<static_cast<size_t>(BinaryOp::logical_xor) + 1>());
  return table[static_cast<size_t>(op)];
}

}  // namespace tessera
