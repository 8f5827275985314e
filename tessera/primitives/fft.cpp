// Discrete Fourier transforms, NumPy's np.fft: fft, ifft, rfft, irfft along
// one axis, their n-axis forms (fftn, fft2, ...) as sequences of one-axis
// transforms in NumPy's order, fftfreq, rfftfreq, fftshift and ifftshift. The
// transforms compute in complex128 (kernels/fft.cpp), one line per task tile,
// so results do not depend on the thread count; float32 (and float16) input
// gives complex64 as NumPy 2 does. They have no gradient rules (tessera
// differentiates real functions only).
#include <cmath>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/kernels/fft.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

using kernels::FftKind;

enum class Norm : uint8_t { backward, ortho, forward };

Norm parse_norm(const Args& a, size_t i) {
  if (a.is_nil(i)) return Norm::backward;
  if (!a[i].is_string()) a.type_error(i, "None or a string");
  const std::string& s = a.string(i);
  if (s == "backward") return Norm::backward;
  if (s == "ortho") return Norm::ortho;
  if (s == "forward") return Norm::forward;
  throw std::invalid_argument(error_message("[", a.op(), "] Invalid norm value ", s,
                                            "; should be \"backward\",\"ortho\" or \"forward\"."));
}

// The factor applied to a transform of n points.
double norm_scale(Norm norm, int64_t n, bool inverse) {
  const auto dn = static_cast<double>(n);
  switch (norm) {
    case Norm::ortho:
      return 1.0 / std::sqrt(dn);
    case Norm::forward:
      return inverse ? 1.0 : 1.0 / dn;
    default:
      return inverse ? 1.0 / dn : 1.0;
  }
}

void check_points(int64_t n, const char* op) {
  if (n < 1) {
    throw std::invalid_argument(error_message("[", op, "] Invalid number of FFT data points (",
                                              n, ") specified."));
  }
}

// A number of points: an int (NumPy refuses floats with a TypeError).
int64_t points_arg(const Args& a, size_t i) {
  if (!a[i].is_int()) a.type_error(i, "an integer");
  return a[i].as_int();
}

// The single-precision inputs, whose transforms NumPy returns in complex64.
bool single_precision(DType dt) {
  return dt == DType::float32 || dt == DType::float16 || dt == DType::bfloat16 ||
         dt == DType::complex64;
}

struct Input {
  Array x;       // complex128 (float64 for rfft)
  DType source;  // the argument's dtype
};

Input complex_input(const Args& a, bool real_only) {
  Array x = a.array(0);
  if (real_only && is_complex(x.dtype())) {
    throw TypeError(error_message("[", a.op(), "] argument 'a' must be real, got a ",
                                  dtype_name(x.dtype()), " array (use fft for complex input)"));
  }
  // Real transforms read float64 (no complex copy of the input).
  const DType compute = real_only ? DType::float64 : DType::complex128;
  return {x.dtype() == compute ? x : cast_array(x, compute), x.dtype()};
}

// The result in NumPy's dtype for an input of dtype `source`.
Value finish(Array y, DType source) {
  if (is_complex(y.dtype())) {
    return Value(single_precision(source) ? cast_array(y, DType::complex64) : y);
  }
  // irfft keeps float16 and float32 (complex64 gives float32).
  if (source == DType::float16) return Value(cast_array(y, DType::float16));
  return Value(single_precision(source) ? cast_array(y, DType::float32) : y);
}

// One transform along one axis of a complex128 array.
Array transform(const Array& x, int axis, int64_t n, FftKind kind, bool inverse, Norm norm,
                const char* op) {
  check_points(n, op);
  return kernels::fft_lines(x, axis, n, kind, inverse, norm_scale(norm, n, inverse),
                            &parallel_for);
}

// fft(a, n, axis, norm) and its kin.
Value one_axis(Args& a, FftKind kind, bool inverse) {
  Input in = complex_input(a, kind == FftKind::real_to_complex);
  const int axis = normalize_axis(a.integer(2), in.x.ndim(), a.op());
  const Norm norm = parse_norm(a, 3);
  const int64_t len = in.x.dim(axis);
  int64_t n = kind == FftKind::complex_to_real ? 2 * (len - 1) : len;
  if (!a.is_nil(1)) n = points_arg(a, 1);
  check_points(n, a.op());
  return finish(transform(in.x, axis, n, kind, inverse, norm, a.op()), in.source);
}

// fftn(a, s, axes, norm) and its kin: NumPy's rules for s and axes
// (_cook_nd_args), then one-axis transforms in NumPy's order.
Value many_axes(Args& a, FftKind kind, bool inverse, bool two_d) {
  Input in = complex_input(a, kind == FftKind::real_to_complex);
  const Array& x = in.x;
  const Norm norm = parse_norm(a, 3);
  std::vector<int64_t> axes, s;
  const bool shapeless = a.is_nil(1);
  if (!shapeless) s = a.int_list(1);
  if (!a.is_nil(2)) {
    axes = a.int_list(2);
  } else if (two_d) {
    axes = {-2, -1};
  } else {
    const int64_t k = shapeless ? x.ndim() : static_cast<int64_t>(s.size());
    for (int64_t i = -k; i < 0; ++i) axes.push_back(i);
  }
  std::vector<int> ax;
  for (int64_t v : axes) ax.push_back(normalize_axis(v, x.ndim(), a.op()));
  if (shapeless) {
    for (int v : ax) s.push_back(x.dim(v));
  } else if (s.size() != axes.size()) {
    throw std::invalid_argument(error_message("[", a.op(),
                                              "] Shape and axes have different lengths: s has ",
                                              s.size(), " entries, axes ", axes.size()));
  }
  if (ax.empty()) {
    if (kind == FftKind::complex_to_complex) return Value(a.array(0).copy());
    throw std::invalid_argument(
        error_message("[", a.op(), "] needs at least one axis to transform, got axes=()"));
  }
  if (kind == FftKind::complex_to_real && shapeless) s.back() = 2 * (x.dim(ax.back()) - 1);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) s[i] = x.dim(ax[i]);
    check_points(s[i], a.op());
  }
  const size_t last = ax.size() - 1;
  Array y = x;
  switch (kind) {
    case FftKind::complex_to_complex:
      for (size_t i = ax.size(); i-- > 0;)
        y = transform(y, ax[i], s[i], kind, inverse, norm, a.op());
      break;
    case FftKind::real_to_complex:
      y = transform(y, ax[last], s[last], kind, false, norm, a.op());
      for (size_t i = last; i-- > 0;)
        y = transform(y, ax[i], s[i], FftKind::complex_to_complex, false, norm, a.op());
      break;
    case FftKind::complex_to_real:
      for (size_t i = 0; i < last; ++i)
        y = transform(y, ax[i], s[i], FftKind::complex_to_complex, true, norm, a.op());
      y = transform(y, ax[last], s[last], kind, true, norm, a.op());
      // NumPy's first ifft turns float16 into complex64, whose irfft is float32.
      if (last > 0 && in.source == DType::float16) in.source = DType::complex64;
      break;
  }
  return finish(y, in.source);
}

// fftfreq (real = false) and rfftfreq: k / (n * d) as NumPy computes it,
// k * (1 / (n * d)).
Value frequencies(Args& a, bool real) {
  if (!a[0].is_int()) {
    throw std::invalid_argument(error_message("[", a.op(), "] n should be an integer, got ",
                                              a[0].is_float() ? "a float" : "a non-integer",
                                              " (argument 'n')"));
  }
  const int64_t n = a[0].as_int();
  if (n < 0) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] negative dimensions are not allowed: n = ", n));
  }
  const double d = a.number(1);
  if (static_cast<double>(n) * d == 0.0) {
    throw std::invalid_argument(error_message("[", a.op(), "] float division by zero: n * d is 0 (n = ",
                                              n, ", d = ", d, ")"));
  }
  const double val = 1.0 / (static_cast<double>(n) * d);
  const int64_t count = real ? n / 2 + 1 : n;
  Array out(DType::float64, {count});
  double* p = out.data<double>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = real || i < (n + 1) / 2 ? i : i - n;
    p[i] = static_cast<double>(k) * val;
  }
  return Value(out);
}

// fftshift / ifftshift: a roll by half of each axis (negated for ifftshift).
Value shift(Args& a, bool inverse) {
  Array x = a.array(0);
  std::vector<int> ax;
  if (a.is_nil(1)) {
    for (int d = 0; d < x.ndim(); ++d) ax.push_back(d);
  } else {
    for (int64_t v : a.int_list(1)) ax.push_back(normalize_axis(v, x.ndim(), a.op()));
  }
  Value y(x);
  for (int d : ax) {
    const int64_t half = x.dim(d) / 2;
    y = prim("roll", {y, Value(inverse ? -half : half), Value(static_cast<int64_t>(d))});
  }
  return ax.empty() ? Value(x.copy()) : y;
}

PrimitiveSpec one_axis_spec(const char* name, FftKind kind, bool inverse, const char* help) {
  return PrimitiveSpec{.name = name,
                       .family = "fft",
                       .params = {{"a"}, opt("n", Value()), opt("axis", int64_t{-1}),
                                  opt("norm", Value())},
                       .help = help,
                       .eval = [kind, inverse](Args& a) { return one_axis(a, kind, inverse); },
                       .ns_per_element = 20.0,
                       .dtype_rule = DTypeRule::raw};
}

PrimitiveSpec many_axes_spec(const char* name, FftKind kind, bool inverse, bool two_d,
                             const char* help) {
  return PrimitiveSpec{
      .name = name,
      .family = "fft",
      .params = {{"a"}, opt("s", Value()), opt("axes", Value()), opt("norm", Value())},
      .help = help,
      .eval = [kind, inverse, two_d](Args& a) { return many_axes(a, kind, inverse, two_d); },
      .ns_per_element = 40.0,
      .dtype_rule = DTypeRule::raw};
}

// The transforms have no gradient rule: differentiating through one is an
// error naming it (tessera's autodiff is real-valued), never a zero gradient.
const bool registered_fft = register_primitives({
    one_axis_spec("fft", FftKind::complex_to_complex, false,
                  "The discrete Fourier transform along one axis, like numpy.fft.fft: "
                  "fft(a, n=nil, axis=-1, norm=nil); n truncates or zero-pads the axis, norm is "
                  "\"backward\" (default), \"ortho\" or \"forward\". Mixed radix (2, 3, 4, 5, small "
                  "primes) or Bluestein for large prime factors, computed in complex128; float32 "
                  "input gives complex64. Not differentiable."),
    one_axis_spec("ifft", FftKind::complex_to_complex, true,
                  "The inverse discrete Fourier transform along one axis, like numpy.fft.ifft "
                  "(norm=\"backward\" divides by n). Not differentiable."),
    one_axis_spec("rfft", FftKind::real_to_complex, false,
                  "The DFT of real input along one axis, like numpy.fft.rfft: the n // 2 + 1 "
                  "non-negative frequencies. Complex input is a TypeError. Not differentiable."),
    one_axis_spec("irfft", FftKind::complex_to_real, true,
                  "The inverse of rfft, like numpy.fft.irfft: a real result of n points "
                  "(default 2 * (m - 1) for m input points), the input read as the non-negative "
                  "half of a Hermitian spectrum. Not differentiable."),
    many_axes_spec("fftn", FftKind::complex_to_complex, false, false,
                   "The n-dimensional DFT, like numpy.fft.fftn(a, s=nil, axes=nil, norm=nil): one "
                   "fft per axis, with NumPy's rules for s (sizes, -1 keeps an axis) and axes "
                   "(default: the last len(s) axes, or all). Not differentiable."),
    many_axes_spec("ifftn", FftKind::complex_to_complex, true, false,
                   "The n-dimensional inverse DFT, like numpy.fft.ifftn. Not differentiable."),
    many_axes_spec("rfftn", FftKind::real_to_complex, false, false,
                   "The n-dimensional DFT of real input, like numpy.fft.rfftn: rfft along the "
                   "last axis, then fft along the others. Not differentiable."),
    many_axes_spec("irfftn", FftKind::complex_to_real, true, false,
                   "The inverse of rfftn, like numpy.fft.irfftn: ifft along all but the last "
                   "axis, then irfft along it (default size 2 * (m - 1)). Not differentiable."),
    many_axes_spec("fft2", FftKind::complex_to_complex, false, true,
                   "The 2-dimensional DFT, like numpy.fft.fft2: fftn over axes (-2, -1) by "
                   "default. Not differentiable."),
    many_axes_spec("ifft2", FftKind::complex_to_complex, true, true,
                   "The 2-dimensional inverse DFT, like numpy.fft.ifft2. Not differentiable."),
    many_axes_spec("rfft2", FftKind::real_to_complex, false, true,
                   "The 2-dimensional DFT of real input, like numpy.fft.rfft2. Not "
                   "differentiable."),
    many_axes_spec("irfft2", FftKind::complex_to_real, true, true,
                   "The inverse of rfft2, like numpy.fft.irfft2. Not differentiable."),
});

const bool registered_fft_helpers = register_primitives(without_gradient({
    {.name = "fftfreq",
     .family = "fft",
     .params = {{"n"}, opt("d", 1.0)},
     .help = "The sample frequencies of an n-point DFT with spacing d, like numpy.fft.fftfreq: "
             "[0, 1, ..., -(n // 2), ..., -1] / (d * n), float64.",
     .eval = [](Args& a) { return frequencies(a, false); },
     .dtype_rule = DTypeRule::raw},
    {.name = "rfftfreq",
     .family = "fft",
     .params = {{"n"}, opt("d", 1.0)},
     .help = "The sample frequencies of rfft's n // 2 + 1 outputs, like numpy.fft.rfftfreq: "
             "[0, 1, ..., n // 2] / (d * n), float64.",
     .eval = [](Args& a) { return frequencies(a, true); },
     .dtype_rule = DTypeRule::raw},
}));

// The shifts are permutations: the gradient is the opposite shift.
const bool registered_fft_shifts = register_primitives({
    {.name = "fftshift",
     .family = "fft",
     .params = {{"x"}, opt("axes", Value())},
     .help = "The zero frequency moved to the centre, like numpy.fft.fftshift: a roll by "
             "shape // 2 along axes (default all).",
     .eval = [](Args& a) { return shift(a, false); },
     .grads = {"ifftshift(g, axes)", ""},
     .dtype_rule = DTypeRule::raw},
    {.name = "ifftshift",
     .family = "fft",
     .params = {{"x"}, opt("axes", Value())},
     .help = "The inverse of fftshift, like numpy.fft.ifftshift: a roll by -(shape // 2).",
     .eval = [](Args& a) { return shift(a, true); },
     .grads = {"fftshift(g, axes)", ""},
     .dtype_rule = DTypeRule::raw},
});

}  // namespace

}  // namespace tessera
