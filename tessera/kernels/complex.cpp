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

// `a` as complex128, broadcast to `shape` and packed.
Array packed_complex(const Array& a, const Shape& shape) {
  Array c = a.astype(DType::complex128);
  return gather_view(c, broadcast_layout(c, shape));
}

[[noreturn]] void unsupported(const char* opname) {
  throw TypeError(error_message("[", opname,
                                "] this operation does not support complex numbers (dtype "
                                "complex128)"));
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
  switch (op) {
    case BinaryOp::add:
    case BinaryOp::subtract:
    case BinaryOp::multiply:
    case BinaryOp::divide:
    case BinaryOp::power:
    case BinaryOp::equal:
    case BinaryOp::not_equal: break;
    default: unsupported(opname);
  }
  Array x = packed_complex(a, shape), y = packed_complex(b, shape);
  Array out(predicate ? DType::bool_ : DType::complex128, shape);
  const C* px = x.data<C>();
  const C* py = y.data<C>();
  parallel_for(out.size(), 4.0, [&](int64_t begin, int64_t end) {
    if (predicate) {
      bool* po = out.data<bool>();
      for (int64_t i = begin; i < end; ++i) {
        po[i] = (px[i] == py[i]) == (op == BinaryOp::equal);
      }
      return;
    }
    C* po = out.data<C>();
    for (int64_t i = begin; i < end; ++i) {
      switch (op) {
        case BinaryOp::add: po[i] = px[i] + py[i]; break;
        case BinaryOp::subtract: po[i] = px[i] - py[i]; break;
        case BinaryOp::multiply: po[i] = px[i] * py[i]; break;
        case BinaryOp::divide: po[i] = px[i] / py[i]; break;
        default: po[i] = (py[i] == C(2, 0)) ? px[i] * px[i] : std::pow(px[i], py[i]); break;
      }
    }
  });
  return out;
}

Array complex_unary(UnaryOp op, const Array& a, const char* opname) {
  DType out_dtype = DType::complex128;
  switch (op) {
    case UnaryOp::abs: out_dtype = DType::float64; break;
    case UnaryOp::isnan:
    case UnaryOp::isinf:
    case UnaryOp::isfinite: out_dtype = DType::bool_; break;
    case UnaryOp::negative:
    case UnaryOp::positive:
    case UnaryOp::sqrt:
    case UnaryOp::square:
    case UnaryOp::exp:
    case UnaryOp::log:
    case UnaryOp::sin:
    case UnaryOp::cos:
    case UnaryOp::tanh:
    case UnaryOp::reciprocal: break;
    default: unsupported(opname);
  }
  Array x = a.astype(DType::complex128).contiguous();
  Array out(out_dtype, x.shape());
  const C* px = x.data<C>();
  parallel_for(out.size(), 8.0, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const C z = px[i];
      switch (op) {
        case UnaryOp::abs: out.data<double>()[i] = std::abs(z); break;
        case UnaryOp::isnan:
          out.data<bool>()[i] = std::isnan(z.real()) || std::isnan(z.imag());
          break;
        case UnaryOp::isinf:
          out.data<bool>()[i] = std::isinf(z.real()) || std::isinf(z.imag());
          break;
        case UnaryOp::isfinite:
          out.data<bool>()[i] = std::isfinite(z.real()) && std::isfinite(z.imag());
          break;
        case UnaryOp::negative: out.data<C>()[i] = -z; break;
        case UnaryOp::positive: out.data<C>()[i] = z; break;
        case UnaryOp::sqrt: out.data<C>()[i] = std::sqrt(z); break;
        case UnaryOp::square: out.data<C>()[i] = z * z; break;
        case UnaryOp::exp: out.data<C>()[i] = std::exp(z); break;
        case UnaryOp::log: out.data<C>()[i] = std::log(z); break;
        case UnaryOp::sin: out.data<C>()[i] = std::sin(z); break;
        case UnaryOp::cos: out.data<C>()[i] = std::cos(z); break;
        case UnaryOp::tanh: out.data<C>()[i] = std::tanh(z); break;
        case UnaryOp::reciprocal: out.data<C>()[i] = C(1, 0) / z; break;
        default: break;
      }
    }
  });
  return out;
}

Array complex_part(const Array& a, int part) {
  Array x = a.astype(DType::complex128).contiguous();
  Array out(part == 2 ? DType::complex128 : DType::float64, x.shape());
  const C* px = x.data<C>();
  for (int64_t i = 0; i < x.size(); ++i) {
    switch (part) {
      case 0: out.data<double>()[i] = px[i].real(); break;
      case 1: out.data<double>()[i] = px[i].imag(); break;
      case 2: out.data<C>()[i] = std::conj(px[i]); break;
      default: out.data<double>()[i] = std::arg(px[i]); break;
    }
  }
  return out;
}

Array make_complex(const Array& re, const Array& im) {
  Shape shape;
  if (!broadcast_shape_pair(re.shape(), im.shape(), shape)) {
    throw std::invalid_argument(error_message("[complex] real and imaginary parts of shapes ",
                                              shape_str(re.shape()), " and ",
                                              shape_str(im.shape()), " do not broadcast"));
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
