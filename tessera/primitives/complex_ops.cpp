// Complex numbers: complex(re, im), real, imag, conj, angle (NumPy's
// functions; the arithmetic is in kernels/complex.cpp, and linear primitives
// split complex arguments in storage.cpp).
#include <cmath>
#include <complex>

#include "tessera/core/error.hpp"
#include "tessera/kernels/complex.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

// A complex or real argument as an array (Python numbers become 0-d).
Array numeric_arg(Args& a, size_t i) {
  if (!a[i].is_numeric() && !a[i].is_list()) a.type_error(i, "a number or an array");
  return a.array(i);
}

// Scalars give scalars where Python would (real/imag of a float).
Value part(Args& a, int which) {
  if (a[0].is_array() && a[0].as_array().weak() && a[0].as_array().ndim() == 0 &&
      which <= 2) {
    // A Python complex: z.real and z.imag are Python floats, z.conjugate()
    // a Python complex.
    const std::complex<double> z = a[0].as_array().get_complex(0);
    if (which == 0) return Value(z.real());
    if (which == 1) return Value(z.imag());
    return Value(Array::weak_complex(std::conj(z)));
  }
  if ((which == 0 || which == 1) && a[0].is_array() && is_complex(a[0].as_array().dtype())) {
    // z.real and z.imag are views of z, as in NumPy (z.imag[0] = 7 writes z).
    return Value(Array::complex_part_view(a.view(0), which));
  }
  Array x = numeric_arg(a, 0);
  if (is_complex(x.dtype())) return Value(kernels::complex_part(x, which));
  switch (which) {
    // x.real of a real array is x itself (a view: writes reach x), and
    // x.imag a new read-only array of zeros, as NumPy gives them.
    case 0:
      return a[0].is_array() ? Value(a.view(0)) : a[0];
    case 1: {
      if (a[0].is_scalar()) return a[0].is_float() ? Value(0.0) : Value(int64_t{0});
      Array z = Array::zeros(x.dtype(), x.shape());
      return Value(Array::view(z, z.shape(), z.strides(), 0, true));
    }
    case 2:
      return a[0].is_scalar() ? a[0] : Value(x.copy());
    default: {
      Array angle = kernels::complex_part(x, 3);
      return a[0].is_scalar() ? Value(angle.get_double(0)) : Value(angle);
    }
  }
}

Value angle(Args& a) {
  Value r = part(a, 3);
  if (a.boolean(1)) {
    Array x = to_array(r, a.op(), "result");
    Array out(DType::float64, x.shape());
    for (int64_t i = 0; i < x.size(); ++i) out.data<double>()[i] = x.get_double(i) * 180.0 / M_PI;
    return a[0].is_scalar() ? Value(out.get_double(0)) : Value(out);
  }
  return r;
}

PrimitiveSpec part_spec(const char* name, int which, const char* help) {
  return PrimitiveSpec{.name = name,
                       .family = "arithmetic",
                       .params = {{"x"}},
                       .help = help,
                       .eval = [which](Args& a) { return part(a, which); },
                       .ns_per_element = 1.0,
                       // real/imag of a complex array are views of it.
                       .views = which == 0 || which == 1};
}

const bool registered_complex_ops = register_primitives(without_gradient({
    {.name = "complex",
     .family = "arithmetic",
     .params = {{"real"}, opt("imag", 0.0)},
     .help = "real + 1j * imag as complex128 (broadcasting), like Python's complex() and "
             "np.complex128; complex(2) is 2+0j.",
     .eval = [](Args& a) -> Value {
       Array re = numeric_arg(a, 0), im = numeric_arg(a, 1);
       if (is_complex(re.dtype()) || is_complex(im.dtype())) {
         // complex(z, w) = z + 1j * w, as Python computes it; 1j * w is
         // -imag(w) + 1j * real(w).
         Array minus_im = kernels::complex_part(im, 1);
         for (int64_t i = 0; i < minus_im.size(); ++i) minus_im.data<double>()[i] *= -1.0;
         Array jw = kernels::make_complex(minus_im, kernels::complex_part(im, 0));
         return Value(kernels::complex_binary(BinaryOp::add, re, jw, a.op()));
       }
       Array z = kernels::make_complex(re, im);
       // complex(1, 2) of two numbers (NumPy's scalars too, converted by
       // float() as Python's complex() does): a Python complex number, weak
       // in promotion.
       auto number = [](const Value& v) {
         return v.is_scalar() || (v.is_array() && v.as_array().ndim() == 0);
       };
       if (number(a[0]) && number(a[1]))
         return Value(Array::weak_complex(z.get_complex(0)));
       return Value(z);
     }},
    part_spec("real", 0,
              "The real part, like numpy.real and z.real: a view of a complex array "
              "(float64 for complex128, float32 for complex64; writes reach z); a "
              "real array's copy."),
    part_spec("imag", 1,
              "The imaginary part, like numpy.imag and z.imag: a view of a complex "
              "array (writes reach z); zeros of the dtype for real input."),
    part_spec("conj", 2,
              "The complex conjugate elementwise, like numpy.conj (real input is "
              "returned as it is)."),
    part_spec("conjugate", 2, "Alias of conj, like numpy.conjugate."),
    {.name = "dtype_name",
     .family = "arithmetic",
     .params = {{"x"}},
     .help = "NumPy's name of the dtype of x (\"int8\", \"float32\", ...; a Python bool, int "
             "or float gives bool, int64, float64): what x.dtype compares and converts as.",
     .eval = [](Args& a) -> Value {
       if (a[0].is_array()) return Value(std::string(dtype_name(a[0].as_array().dtype())));
       if (a[0].is_scalar()) return Value(std::string(dtype_name(scalar_dtype(a[0]))));
       a.type_error(0, "a number or an array");
     }},
    {.name = "itemsize",
     .family = "arithmetic",
     .params = {{"x"}},
     .help = "Bytes per element of x's dtype, like ndarray.itemsize (Python numbers: 8, or 1 "
             "for a bool).",
     .eval = [](Args& a) -> Value {
       if (a[0].is_array()) return Value(static_cast<int64_t>(dtype_size(a[0].as_array().dtype())));
       if (a[0].is_scalar()) return Value(static_cast<int64_t>(dtype_size(scalar_dtype(a[0]))));
       a.type_error(0, "a number or an array");
     }},
    {.name = "item",
     .family = "arithmetic",
     .params = {{"x"}},
     .help = "The one element of x as a Python number, like ndarray.item(): bool, int, float or "
             "complex (a uint64 above int64's range stays a NumPy uint64); a ValueError unless x "
             "has exactly one element.",
     .eval = [](Args& a) -> Value {
       if (a[0].is_scalar()) return a[0];
       if (!a[0].is_array()) a.type_error(0, "a number or an array");
       const Array& x = a[0].as_array();
       if (x.size() != 1) {
         throw std::invalid_argument(error_message(
             "[", a.op(), "] can only convert an array of size 1 to a Python scalar, got ",
             x.repr_short()));
       }
       const DType dt = x.dtype();
       if (dt == DType::bool_) return Value(x.get_bool(0));
       if (dt == DType::uint64 && x.get_int(0) < 0) return Value(x.reshaped({}).copy());
       if (is_integer(dt)) return Value(x.get_int(0));
       if (is_complex(dt)) return Value(Array::weak_complex(x.get_complex(0)));
       return Value(x.get_double(0));
     }},
    {.name = "iscomplexobj",
     .family = "arithmetic",
     .params = {{"x"}},
     .help = "True when x has a complex dtype (whatever its values), like numpy.iscomplexobj.",
     .eval = [](Args& a) -> Value {
       return Value(a[0].is_array() && is_complex(a[0].as_array().dtype()));
     }},
    {.name = "isrealobj",
     .family = "arithmetic",
     .params = {{"x"}},
     .help = "True when x has no complex dtype, like numpy.isrealobj.",
     .eval = [](Args& a) -> Value {
       return Value(!(a[0].is_array() && is_complex(a[0].as_array().dtype())));
     }},
    {.name = "angle",
     .family = "arithmetic",
     .params = {{"z"}, opt("deg", false)},
     .help = "The argument (phase) of complex numbers in radians (degrees with deg=true), like "
             "numpy.angle; float64.",
     .eval = angle},
}));

}  // namespace

}  // namespace tessera
