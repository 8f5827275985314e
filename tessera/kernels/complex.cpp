// Elementwise operations on complex128 (complex64 arrays arrive converted,
// registry storage rules), and the split of linear primitives into real and
// imaginary parts (run_complex).
#include "tessera/kernels/complex.hpp"

#include <cmath>
#include <complex>

#include "tessera/core/error.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera::kernels {

namespace {

using C = std::complex<double>;

[[noreturn]] void unsupported(const char* opname) {
  throw TypeError(error_message("[", opname,
                                "] this operation does not support complex numbers (dtype "
                                "complex128)"));
}

}  // namespace

namespace {

// `a` as a C-contiguous complex128 array of `shape` (no copy when it is one).
Array dense_complex(const Array& a, const Shape& shape) {
  Array c = a.astype(DType::complex128);
  if (c.is_contiguous() && c.shape() == shape) return c;
  return gather_view(c, broadcast_layout(c, shape));
}

// out[i] = f(x[i], y[i]) where an operand of one element is read once
// (x ** 2, z * 1j): no broadcast copy of it.
template <class Out, class F>
void binary_loop(const Array& a, const Array& b, Array& out, double cost, F f) {
  const Shape& shape = out.shape();
  const bool a_one = a.size() == 1, b_one = b.size() == 1;
  Array x = a_one ? a.astype(DType::complex128).contiguous() : dense_complex(a, shape);
  Array y = b_one ? b.astype(DType::complex128).contiguous() : dense_complex(b, shape);
  const C* px = x.data<C>();
  const C* py = y.data<C>();
  Out* po = out.data<Out>();
  parallel_for(out.size(), cost, [&](int64_t begin, int64_t end) {
    if (a_one) {
      const C u = px[0];
      for (int64_t i = begin; i < end; ++i) po[i] = f(u, py[i]);
    } else if (b_one) {
      const C v = py[0];
      for (int64_t i = begin; i < end; ++i) po[i] = f(px[i], v);
    } else {
      for (int64_t i = begin; i < end; ++i) po[i] = f(px[i], py[i]);
    }
  });
}

template <class Out, class F>
void unary_loop(const Array& a, Array& out, double cost, F f) {
  Array x = a.astype(DType::complex128).contiguous();
  const C* px = x.data<C>();
  Out* po = out.data<Out>();
  parallel_for(out.size(), cost, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = f(px[i]);
  });
}

}  // namespace

Array complex_binary(BinaryOp op, const Array& a, const Array& b, const char* opname) {
  Shape shape;
  if (!broadcast_shape_pair(a.shape(), b.shape(), shape)) {
    throw std::invalid_argument(error_message("[", opname,
                                              "] operands could not be broadcast together: shapes ",
                                              shape_str(a.shape()), " ", shape_str(b.shape())));
  }
  const bool predicate = op == BinaryOp::equal || op == BinaryOp::not_equal;
  Array out(predicate ? DType::bool_ : DType::complex128, shape);
  switch (op) {
    case BinaryOp::add:
      binary_loop<C>(a, b, out, 1.0, [](C x, C y) { return x + y; });
      break;
    case BinaryOp::subtract:
      binary_loop<C>(a, b, out, 1.0, [](C x, C y) { return x - y; });
      break;
    case BinaryOp::multiply:
      binary_loop<C>(a, b, out, 2.0, [](C x, C y) { return complex_product(x, y); });
      break;
    case BinaryOp::divide:
      // NumPy's formula (std::complex's division differs in the last bits).
      binary_loop<C>(a, b, out, 8.0, [](C x, C y) { return numpy_quotient(x, y); });
      break;
    case BinaryOp::power:
      binary_loop<C>(a, b, out, 20.0, [](C x, C y) {
        if (y == C(2, 0)) {
          return C(x.real() * x.real() - x.imag() * x.imag(), 2 * x.real() * x.imag());
        }
        return std::pow(x, y);
      });
      break;
    case BinaryOp::equal:
      binary_loop<bool>(a, b, out, 1.0, [](C x, C y) { return x == y; });
      break;
    case BinaryOp::not_equal:
      binary_loop<bool>(a, b, out, 1.0, [](C x, C y) { return x != y; });
      break;
    default:
      unsupported(opname);
  }
  return out;
}

// |x + iy|: sqrt(x*x + y*y) where neither square can overflow or lose the
// result to underflow (within ~1 ulp of hypot, and several times faster:
// np.abs(z) of the vectorised Mandelbrot set), hypot outside that range and
// for infinities and NaN (hypot(inf, nan) is inf).
inline double complex_abs(double x, double y) {
  const double ax = std::fabs(x), ay = std::fabs(y);
  const double m = ax > ay ? ax : ay;
  if (m > 1e-150 && m < 1e150) return std::sqrt(x * x + y * y);
  return std::hypot(x, y);
}

Array complex_unary(UnaryOp op, const Array& a, const char* opname) {
  DType out_dtype = DType::complex128;
  if (op == UnaryOp::abs) out_dtype = DType::float64;
  if (op == UnaryOp::isnan || op == UnaryOp::isinf || op == UnaryOp::isfinite) {
    out_dtype = DType::bool_;
  }
  Array out(out_dtype, a.shape());
  switch (op) {
    case UnaryOp::abs:
      unary_loop<double>(a, out, 1.5, [](C z) { return complex_abs(z.real(), z.imag()); });
      break;
    case UnaryOp::isnan:
      unary_loop<bool>(a, out, 1.0,
                       [](C z) { return std::isnan(z.real()) || std::isnan(z.imag()); });
      break;
    case UnaryOp::isinf:
      unary_loop<bool>(a, out, 1.0,
                       [](C z) { return std::isinf(z.real()) || std::isinf(z.imag()); });
      break;
    case UnaryOp::isfinite:
      unary_loop<bool>(a, out, 1.0,
                       [](C z) { return std::isfinite(z.real()) && std::isfinite(z.imag()); });
      break;
    case UnaryOp::negative:
      unary_loop<C>(a, out, 1.0, [](C z) { return -z; });
      break;
    case UnaryOp::positive:
      unary_loop<C>(a, out, 1.0, [](C z) { return z; });
      break;
    case UnaryOp::sqrt:
      unary_loop<C>(a, out, 20.0, [](C z) { return std::sqrt(z); });
      break;
    case UnaryOp::square:
      unary_loop<C>(a, out, 2.0, [](C z) {
        return C(z.real() * z.real() - z.imag() * z.imag(), 2 * z.real() * z.imag());
      });
      break;
    case UnaryOp::exp:
      unary_loop<C>(a, out, 20.0, [](C z) { return std::exp(z); });
      break;
    case UnaryOp::log:
      unary_loop<C>(a, out, 20.0, [](C z) { return std::log(z); });
      break;
    case UnaryOp::sin:
      unary_loop<C>(a, out, 20.0, [](C z) { return std::sin(z); });
      break;
    case UnaryOp::cos:
      unary_loop<C>(a, out, 20.0, [](C z) { return std::cos(z); });
      break;
    case UnaryOp::tanh:
      unary_loop<C>(a, out, 20.0, [](C z) { return std::tanh(z); });
      break;
    case UnaryOp::reciprocal:
      unary_loop<C>(a, out, 8.0, [](C z) { return C(1, 0) / z; });
      break;
    default:
      unsupported(opname);
  }
  return out;
}

Array complex_part(const Array& a, int part) {
  Array x = a.astype(DType::complex128).contiguous();
  Array out(part == 2 ? DType::complex128 : DType::float64, x.shape());
  const C* px = x.data<C>();
  for (int64_t i = 0; i < x.size(); ++i) {
    switch (part) {
      case 0:
        out.data<double>()[i] = px[i].real();
        break;
      case 1:
        out.data<double>()[i] = px[i].imag();
        break;
      case 2:
        out.data<C>()[i] = std::conj(px[i]);
        break;
      default:
        out.data<double>()[i] = std::arg(px[i]);
        break;
    }
  }
  return out;
}

Array make_complex(const Array& re, const Array& im) {
  Shape shape;
  if (!broadcast_shape_pair(re.shape(), im.shape(), shape)) {
    throw std::invalid_argument(error_message("[complex] real and imaginary parts of shapes ",
                                              shape_str(re.shape()), " and ", shape_str(im.shape()),
                                              " do not broadcast"));
  }
  Array r = re.astype(DType::float64), i = im.astype(DType::float64);
  r = gather_view(r, broadcast_layout(r, shape));
  i = gather_view(i, broadcast_layout(i, shape));
  Array out(DType::complex128, shape);
  C* po = out.data<C>();
  const double* pr = r.data<double>();
  const double* pi = i.data<double>();
  for (int64_t k = 0; k < out.size(); ++k) po[k] = C(pr[k], pi[k]);
  return out;
}

}  // namespace tessera::kernels
