// The arithmetic family: binary arithmetic, unary math, rounding, clip, where,
// astype and nan_to_num. The work is done by elementwise_ops (dtype rules,
// broadcasting, tiling) and the elementwise kernels.
#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/fused.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/primitives/text.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

PrimitiveSpec binary_spec(const char* name, BinaryOp op, std::string help) {
  return PrimitiveSpec{
      .name = name,
      .family = "arithmetic",
      .params = {{"x"}, {"y"}},
      .help = std::move(help),
      .eval = [op](Args& a) -> Value { return binary_op(op, a.take(0), a.take(1), a.op()); },
      .ns_per_element = kernels::cost_ns(op),
      .scalar_binary = scalar_binary_of(op),
      // binary_op reads strided views in place (or packs them itself).
      .strided = true,
      .fuse_binary = kernels::fusable(op) ? static_cast<int>(op) : -1};
}

// -, /, //, % and **: Python raises TypeError for a list, tuple, string,
// dict or None operand when no operand is an array (NumPy would compute
// elementwise: a different answer); a string % values formats, as in Python.
PrimitiveSpec operator_spec(const char* name, BinaryOp op, const char* symbol, std::string help) {
  PrimitiveSpec spec = binary_spec(name, op, std::move(help));
  spec.help +=
      " Without an array operand, a list, tuple, string, dict or nil operand raises "
      "TypeError, as Python's operator does.";
  if (op == BinaryOp::mod) {
    spec.help +=
        " A string x formats as Python's printf-style x % y (\"%5.2f\" % v, \"%s and %d\" "
        "% (a, b)).";
  }
  spec.eval = [op, symbol](Args& a) -> Value {
    // "%d items" % n: Python's printf-style formatting.
    if (op == BinaryOp::mod && a[0].is_string()) {
      a.pack_views();
      return percent_format(a[0].as_string(), a[1], a.op());
    }
    if (python_operands(a[0], a[1])) {
      throw TypeError(error_message("[", a.op(), "] unsupported operand type(s) for ", symbol,
                                    ": '", python_type_name(a[0]), "' and '",
                                    python_type_name(a[1]), "'"));
    }
    return binary_op(op, a.take(0), a.take(1), a.op());
  };
  return spec;
}

// add, multiply, maximum and minimum: Python's concatenation, repetition and
// max/min when no operand is an array (list + list, [0] * 3, "ab" * 2,
// max("a", "b")), NumPy's arithmetic otherwise.
// `[1] + [0] * n`, `[0] * n + [x]`: a list operand that only this call holds
// (a temporary: no variable, list or constant sees it) with room for the
// other's items takes them in place, into `out`, instead of both being
// copied into a new list (a repeated list of 1,024 items or more is made
// with room for a few: sequence_multiply). False when neither can.
bool join_into_temporary(Args& a, Value& out) {
  if (!a[0].is_list() || !a[1].is_list() || a[0].is_tuple() || a[1].is_tuple()) return false;
  for (size_t k : {size_t{1}, size_t{0}}) {
    if (a[k].number_items() == nullptr) continue;
    if (join_numbers_into_temporary(a.at(0), a.at(1), k == 0, out)) return true;
  }
  for (size_t k : {size_t{1}, size_t{0}}) {
    // unique_list() and as_list() would write an unboxed list out as Values.
    if (a[k].number_items() != nullptr || a[1 - k].number_items() != nullptr) continue;
    List* items = a.at(k).unique_list();
    if (items == nullptr) continue;
    const List& other = a[1 - k].as_list();
    if (&other == items || items->capacity() - items->size() < other.size()) continue;
    items->insert(k == 1 ? items->begin() : items->end(), other.begin(), other.end());
    out = a.take(k);
    return true;
  }
  return false;
}

PrimitiveSpec sequence_aware_spec(const char* name, BinaryOp op, std::string help) {
  PrimitiveSpec spec = binary_spec(name, op, std::move(help));
  spec.eval = [op](Args& a) -> Value {
    if (op == BinaryOp::multiply) {
      // A sequence times a NumPy integer scalar (a 0-d integer array) repeats
      // it, in either order, as Python and NumPy do ([0] * np.int64(3)).
      auto int_scalar = [](const Value& v) {
        return v.is_array() && v.as_array().ndim() == 0 && is_integer(v.as_array().dtype());
      };
      auto sequence = [](const Value& v) { return v.is_string() || v.is_list(); };
      if (sequence(a[0]) && int_scalar(a[1])) {
        return sequence_multiply(a[0], Value(a[1].as_array().get_int(0)), a.op());
      }
      if (int_scalar(a[0]) && sequence(a[1])) {
        return sequence_multiply(Value(a[0].as_array().get_int(0)), a[1], a.op());
      }
    }
    if (python_operands(a[0], a[1])) {
      switch (op) {
        case BinaryOp::add:
          if (Value joined; join_into_temporary(a, joined)) return joined;
          return sequence_add(a[0], a[1], a.op());
        case BinaryOp::multiply:
          return sequence_multiply(a[0], a[1], a.op());
        // Python's max(a, b) / min(a, b): a unless b is strictly greater / less.
        case BinaryOp::maximum:
          return python_compare(BinaryOp::greater, a[1], a[0], a.op()).as_bool() ? a[1] : a[0];
        default:
          return python_compare(BinaryOp::less, a[1], a[0], a.op()).as_bool() ? a[1] : a[0];
      }
    }
    return binary_op(op, a.take(0), a.take(1), a.op());
  };
  return spec;
}

PrimitiveSpec unary_spec(const char* name, UnaryOp op, std::string help) {
  return PrimitiveSpec{.name = name,
                       .family = "arithmetic",
                       .params = {{"x"}},
                       .help = std::move(help),
                       .eval = [op](Args& a) -> Value { return unary_op(op, a.take(0), a.op()); },
                       .ns_per_element = kernels::cost_ns(op),
                       .strided = true,  // unary_op reads strided views (binary_spec)
                       .fuse_unary = kernels::fusable(op) ? static_cast<int>(op) : -1};
}

// A float function: ints and bools give float64, float32 stays float32.
PrimitiveSpec float_fn_spec(const char* name, UnaryOp op, const char* what, const char* numpy) {
  return unary_spec(name, op,
                    std::string(what) + " elementwise, like " + numpy +
                        ". Integer and bool inputs give float64; float32 stays float32.");
}

bool is_integral_value(const Value& v) {
  if (v.is_int() || v.is_bool()) return true;
  return v.is_array() && !is_floating(v.as_array().dtype());
}

// NumPy's round: rint(x * 10**d) / 10**d, half to even; integers stay integers.
Value round_value(const Value& x, int64_t decimals, const char* op) {
  if (!x.is_numeric() && !x.is_list()) {
    throw TypeError(
        error_message("[", op, "] argument 'x' must be a number or an array, got ", x.describe()));
  }
  Value v = x.is_list() ? Value(to_array(x, op, "argument 'x'")) : x;
  if (is_integral_value(v)) {
    if (decimals >= 0) return v;
    // Negative decimals round integers to tens, hundreds, ...: via float64.
    double scale = std::pow(10.0, static_cast<double>(-decimals));
    Value f = binary_op(BinaryOp::divide, v, Value(scale), op);
    Value r = binary_op(BinaryOp::multiply, unary_op(UnaryOp::rint, f, op), Value(scale), op);
    return cast_value(r, DType::int64, op);
  }
  if (decimals == 0) return unary_op(UnaryOp::rint, v, op);
  double scale = std::pow(10.0, static_cast<double>(decimals >= 0 ? decimals : -decimals));
  BinaryOp in = decimals > 0 ? BinaryOp::multiply : BinaryOp::divide;
  BinaryOp back = decimals > 0 ? BinaryOp::divide : BinaryOp::multiply;
  Value scaled = binary_op(in, v, Value(scale), op);
  return binary_op(back, unary_op(UnaryOp::rint, scaled, op), Value(scale), op);
}

Value clip_value(Args& a) {
  for (size_t i = 1; i < 3; ++i) {
    if (!a.is_nil(i) && !a[i].is_numeric() && !a[i].is_list()) {
      a.type_error(i, "a number, an array or nil");
    }
  }
  Value r = a[0];
  if (!r.is_numeric()) r = Value(a.array(0));
  if (!a.is_nil(1)) r = binary_op(BinaryOp::maximum, r, a[1], a.op());
  if (!a.is_nil(2)) r = binary_op(BinaryOp::minimum, std::move(r), a[2], a.op());
  return r;
}

Value nan_to_num_value(Args& a) {
  const Value& x = a[0];
  if (x.is_scalar() && !x.is_float()) return x;
  Array arr = a.array(0);
  if (!is_floating(arr.dtype())) return arr;
  const bool f32 = arr.dtype() == DType::float32;
  double nan = a.number(1);
  double posinf =
      a.is_nil(2) ? (f32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max())
                  : a.number(2);
  double neginf = a.is_nil(3) ? (f32 ? std::numeric_limits<float>::lowest()
                                     : std::numeric_limits<double>::lowest())
                              : a.number(3);
  Array out(arr.dtype(), arr.shape());
  parallel_for(arr.size(), 0.5, [&](int64_t b, int64_t e) {
    kernels::nan_to_num_range(arr, out, nan, posinf, neginf, b, e);
  });
  if (x.is_float()) return Value(out.get_double(0));
  return out;
}

// NumPy's casting rules between tessera's dtypes (kinds bool < int < float).
void check_casting(const Args& a, DType to) {
  const std::string& rule = a.string(2);
  DType from =
      a[0].is_numeric() ? (a[0].is_array() ? a[0].as_array().dtype() : scalar_dtype(a[0])) : to;
  auto kind = [](DType d) { return d == DType::bool_ ? 0 : is_floating(d) ? 2 : 1; };
  bool ok;
  if (rule == "unsafe") {
    ok = true;
  } else if (rule == "no" || rule == "equiv") {
    ok = from == to;
  } else if (rule == "same_kind") {
    ok = kind(from) <= kind(to);
  } else if (rule == "safe") {
    ok = from == to || from == DType::bool_ || (from == DType::float32 && to == DType::float64) ||
         (from == DType::int64 && to == DType::float64);
  } else {
    a.value_error(
        2, "must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe': got '" + rule + "'");
  }
  if (!ok) {
    throw TypeError(error_message("[", a.op(), "] cannot cast array data from ", dtype_name(from),
                                  " to ", dtype_name(to), " according to the rule '", rule, "'"));
  }
}

const bool registered_arithmetic = register_primitives({
    with_grads(sequence_aware_spec(
                   "add", BinaryOp::add,
                   "Elementwise x + y with NumPy broadcasting and promotion, like numpy.add. "
                   "Two bool arrays give their logical or. Without an array operand, Python's +: "
                   "list + list, tuple + tuple and string + string concatenate (other pairs of "
                   "non-numbers raise TypeError)."),
               {"g", "g"}),
    with_grads(operator_spec("subtract", BinaryOp::subtract, "-",
                             "Elementwise x - y with broadcasting, like numpy.subtract. "
                             "Two bool operands raise TypeError (use logical_xor)."),
               {"g", "-g"}),
    with_grads(sequence_aware_spec(
                   "multiply", BinaryOp::multiply,
                   "Elementwise x * y with broadcasting, like numpy.multiply. Without an array "
                   "operand, Python's *: a list, tuple or string times an int repeats it ([0] * 3 "
                   "is [0, 0, 0])."),
               {"g * y", "g * x"}),
    with_grads(
        operator_spec("divide", BinaryOp::divide, "/",
                      "True division x / y with broadcasting, like numpy.divide: integers give "
                      "float64. Division by zero of arrays gives inf or nan; of two Python numbers it raises "
                      "ZeroDivisionError, as Python."),
        {"g / y", "-g * x / (y * y)"}),
    with_grads(
        operator_spec("floor_divide", BinaryOp::floor_divide, "//",
                      "Elementwise x // y rounded toward minus infinity, like numpy.floor_divide. "
                      "Integer division by zero raises ZeroDivisionError (NumPy silently gives 0); "
                      "float division by zero gives inf or nan (two Python floats: "
                      "ZeroDivisionError, as Python)."),
        {"", ""}),
    with_grads(
        operator_spec("mod", BinaryOp::mod, "%",
                      "Elementwise remainder x % y with the sign of the divisor, like numpy.mod "
                      "(and Python). Integer division by zero raises ZeroDivisionError (two Python "
                      "floats too, as Python)."),
        {"g", "-g * floor_divide(x, y)"}),
    with_grads(
        operator_spec("remainder", BinaryOp::mod, "%",
                      "Alias of mod: remainder with the sign of the divisor, like numpy.remainder. "
                      "Integer division by zero raises ZeroDivisionError."),
        {"g", "-g * floor_divide(x, y)"}),
    with_grads(
        operator_spec("power", BinaryOp::power, "**",
                      "Elementwise x ** y, like numpy.power. Integer arrays raised to negative "
                      "integer powers raise ValueError; two Python scalars follow Python (2 ** -1 "
                      "is 0.5)."),
        {"g * y * power(x, y - 1)", "g * out * log(x)"}),
    with_grads(sequence_aware_spec(
                   "maximum", BinaryOp::maximum,
                   "Elementwise maximum, like numpy.maximum: a NaN in either operand propagates. "
                   "Without an array operand, Python's max(x, y) (strings, lists and tuples "
                   "compare lexicographically)."),
               {"g * (x >= y)", "g * (x < y)"}),
    with_grads(sequence_aware_spec(
                   "minimum", BinaryOp::minimum,
                   "Elementwise minimum, like numpy.minimum: a NaN in either operand propagates. "
                   "Without an array operand, Python's min(x, y)."),
               {"g * (x <= y)", "g * (x > y)"}),
    with_grads(
        binary_spec(
            "fmax", BinaryOp::fmax,
            "Elementwise maximum ignoring NaN, like numpy.fmax: NaN only when both are NaN."),
        {"g * (x >= y)", "g * (x < y)"}),
    with_grads(
        binary_spec(
            "fmin", BinaryOp::fmin,
            "Elementwise minimum ignoring NaN, like numpy.fmin: NaN only when both are NaN."),
        {"g * (x <= y)", "g * (x > y)"}),
    with_grads(
        binary_spec("arctan2", BinaryOp::arctan2,
                    "Elementwise arc tangent of x / y choosing the quadrant, like numpy.arctan2. "
                    "Integers give float64."),
        {"g * y / (x * x + y * y)", "-g * x / (x * x + y * y)"}),
    with_grads(binary_spec("hypot", BinaryOp::hypot,
                           "Elementwise sqrt(x**2 + y**2) without overflow, like numpy.hypot. "
                           "Integers give float64."),
               {"g * x / out", "g * y / out"}),
    with_grads(binary_spec("copysign", BinaryOp::copysign,
                           "Elementwise magnitude of x with the sign of y, like numpy.copysign. "
                           "Integers give float64."),
               {"g * sign(out) * sign(x)", ""}),

    with_grads(unary_spec("negative", UnaryOp::negative,
                          "Elementwise -x, like numpy.negative. Bool arrays raise TypeError (use "
                          "logical_not)."),
               {"-g"}),
    with_grads(unary_spec("positive", UnaryOp::positive,
                          "Elementwise +x (a copy), like numpy.positive; bool gives int64."),
               {"g"}),
    with_grads(
        unary_spec("abs", UnaryOp::abs,
                   "Elementwise absolute value, like numpy.abs; keeps the dtype (bool and int "
                   "stay)."),
        {"g * sign(x)"}),
    with_grads(unary_spec("absolute", UnaryOp::abs, "Alias of abs, like numpy.absolute."),
               {"g * sign(x)"}),
    with_grads(
        unary_spec("sign", UnaryOp::sign,
                   "Elementwise -1, 0 or 1 by sign, like numpy.sign; NaN stays NaN, ints stay "
                   "ints."),
        {""}),
    with_grads(
        unary_spec("square", UnaryOp::square,
                   "Elementwise x * x, like numpy.square; ints stay ints (wrapping on overflow)."),
        {"2.0 * g * x"}),
    with_grads(
        float_fn_spec("sqrt", UnaryOp::sqrt, "Square root", "numpy.sqrt (negative gives nan)"),
        {"g * 0.5 / out"}),
    with_grads(float_fn_spec("exp", UnaryOp::exp, "e ** x", "numpy.exp"), {"g * out"}),
    with_grads(float_fn_spec("exp2", UnaryOp::exp2, "2 ** x", "numpy.exp2"),
               {"g * out * 0.6931471805599453"}),
    with_grads(float_fn_spec("expm1", UnaryOp::expm1, "exp(x) - 1, accurate near 0", "numpy.expm1"),
               {"g * (out + 1.0)"}),
    with_grads(
        float_fn_spec("log", UnaryOp::log, "Natural logarithm", "numpy.log (log(0) is -inf)"),
        {"g / x"}),
    with_grads(float_fn_spec("log2", UnaryOp::log2, "Base-2 logarithm", "numpy.log2"),
               {"g / (x * 0.6931471805599453)"}),
    with_grads(float_fn_spec("log10", UnaryOp::log10, "Base-10 logarithm", "numpy.log10"),
               {"g / (x * 2.302585092994046)"}),
    with_grads(float_fn_spec("log1p", UnaryOp::log1p, "log(1 + x), accurate near 0", "numpy.log1p"),
               {"g / (1.0 + x)"}),
    with_grads(float_fn_spec("sin", UnaryOp::sin, "Sine (radians)", "numpy.sin"), {"g * cos(x)"}),
    with_grads(float_fn_spec("cos", UnaryOp::cos, "Cosine (radians)", "numpy.cos"),
               {"-g * sin(x)"}),
    with_grads(float_fn_spec("tan", UnaryOp::tan, "Tangent (radians)", "numpy.tan"),
               {"g * (1.0 + out * out)"}),
    with_grads(float_fn_spec("arcsin", UnaryOp::arcsin, "Inverse sine", "numpy.arcsin"),
               {"g / sqrt(1.0 - x * x)"}),
    with_grads(float_fn_spec("arccos", UnaryOp::arccos, "Inverse cosine", "numpy.arccos"),
               {"-g / sqrt(1.0 - x * x)"}),
    with_grads(float_fn_spec("arctan", UnaryOp::arctan, "Inverse tangent", "numpy.arctan"),
               {"g / (1.0 + x * x)"}),
    with_grads(float_fn_spec("sinh", UnaryOp::sinh, "Hyperbolic sine", "numpy.sinh"),
               {"g * cosh(x)"}),
    with_grads(float_fn_spec("cosh", UnaryOp::cosh, "Hyperbolic cosine", "numpy.cosh"),
               {"g * sinh(x)"}),
    with_grads(float_fn_spec("tanh", UnaryOp::tanh, "Hyperbolic tangent", "numpy.tanh"),
               {"g * (1.0 - out * out)"}),
    with_grads(
        float_fn_spec("arcsinh", UnaryOp::arcsinh, "Inverse hyperbolic sine", "numpy.arcsinh"),
        {"g / sqrt(x * x + 1.0)"}),
    with_grads(
        float_fn_spec("arccosh", UnaryOp::arccosh, "Inverse hyperbolic cosine", "numpy.arccosh"),
        {"g / sqrt(x * x - 1.0)"}),
    with_grads(
        float_fn_spec("arctanh", UnaryOp::arctanh, "Inverse hyperbolic tangent", "numpy.arctanh"),
        {"g / (1.0 - x * x)"}),
    with_grads(float_fn_spec("floor", UnaryOp::floor, "Largest integer not above x", "numpy.floor"),
               {""}),
    with_grads(float_fn_spec("ceil", UnaryOp::ceil, "Smallest integer not below x", "numpy.ceil"),
               {""}),
    with_grads(float_fn_spec("rint", UnaryOp::rint, "Round to the nearest integer, halves to even",
                             "numpy.rint"),
               {""}),
    with_grads(float_fn_spec("trunc", UnaryOp::trunc, "Round toward zero", "numpy.trunc"), {""}),
    with_grads(
        unary_spec("reciprocal", UnaryOp::reciprocal,
                   "Elementwise 1 / x, like numpy.reciprocal. Integers give float64 (NumPy keeps "
                   "integers and truncates to 0)."),
        {"-g * out * out"}),
    with_grads(
        unary_spec("isnan", UnaryOp::isnan, "Elementwise test for NaN, like numpy.isnan (bool)."),
        {""}),
    with_grads(
        unary_spec("isinf", UnaryOp::isinf,
                   "Elementwise test for positive or negative infinity, like numpy.isinf (bool)."),
        {""}),
    with_grads(
        unary_spec("isfinite", UnaryOp::isfinite,
                   "Elementwise test for neither infinity nor NaN, like numpy.isfinite (bool)."),
        {""}),
    with_grads(float_fn_spec("deg2rad", UnaryOp::deg2rad, "Degrees to radians", "numpy.deg2rad"),
               {"g * 0.017453292519943295"}),
    with_grads(float_fn_spec("rad2deg", UnaryOp::rad2deg, "Radians to degrees", "numpy.rad2deg"),
               {"g * 57.29577951308232"}),

    {.name = "round",
     .family = "arithmetic",
     .params = {{"x"}, opt("decimals", Value(int64_t{0}))},
     .help = "Rounds to the given number of decimals, halves to even, like numpy.round. "
             "Integers stay integers (negative decimals round them to tens, hundreds, ...).",
     .eval = [](Args& a) -> Value { return round_value(a[0], a.integer(1), a.op()); },
     .ns_per_element = 1.5,
     .grads = {"", ""}},
    {.name = "clip",
     .family = "arithmetic",
     .params = {{"x"}, opt("a_min", Value()), opt("a_max", Value())},
     .help = "Limits x to [a_min, a_max] elementwise, like numpy.clip; a nil bound is "
             "not applied. Dtypes promote with the bounds (NEP 50); NaN propagates.",
     .eval = [](Args& a) -> Value { return clip_value(a); },
     .ns_per_element = 1.0,
     .grads = {"g * (x == out)", "", ""}},
    {.name = "where",
     .family = "arithmetic",
     .params = {{"condition"}, {"x"}, {"y"}},
     .help = "Elementwise choice: x where condition is true, else y, like numpy.where(c, x, "
             "y). The three operands broadcast together; x and y promote.",
     .eval = [](Args& a) -> Value { return where_op(a[0], a[1], a[2], a.op()); },
     .ns_per_element = 0.7,
     .grads = {"", "where(condition, g, 0.0)", "where(condition, 0.0, g)"}},
    {.name = "astype",
     .family = "arithmetic",
     .params = {{"x"}, {"dtype"}, opt("casting", "unsafe"), opt("numpy_scalar", Value(false))},
     .help = "Converts x to the dtype named by a string ('bool', 'int64', 'float32', "
             "'float64'), like ndarray.astype. Floats to int truncate; NaN gives INT64_MIN. "
             "casting ('no', 'equiv', 'safe', 'same_kind', 'unsafe') refuses other "
             "conversions with a TypeError, as NumPy's casting rules do. A Python number "
             "stays one, unless numpy_scalar is true (np.int64(x), np.float64(x), np.bool_(x): "
             "NumPy's scalar of the dtype; a Python int out of an int dtype's range is then "
             "NumPy's OverflowError).",
     .eval = [](Args& a) -> Value {
       if (a.is_nil(1)) a.type_error(1, "a dtype name such as 'float32'");
       DType to = *a.opt_dtype(1);
       check_casting(a, to);
       const bool numpy_scalar = !a.is_nil(3) && a.boolean(3);
       // np.int32(2**40): NumPy's OverflowError (astype of an array wraps)
       if (numpy_scalar) check_python_int(a[0], to, a.op());
       Value r = cast_value(a[0], to, a.op());
       if (r.is_scalar() && numpy_scalar) return to_array(r, a.op(), "x").astype(to);
       return r;
     },
     .ns_per_element = 0.5,
     .grads = {"g", "", "", ""}},
    {.name = "nan_to_num",
     .family = "arithmetic",
     .params = {{"x"}, opt("nan", Value(0.0)), opt("posinf", Value()), opt("neginf", Value())},
     .help = "Replaces NaN with `nan` and infinities with `posinf`/`neginf` (default: the "
             "largest finite values of the dtype), like numpy.nan_to_num. Integers are "
             "returned unchanged.",
     .eval = [](Args& a) -> Value { return nan_to_num_value(a); },
     .ns_per_element = 0.5,
     .grads = {"g * isfinite(x)", "", "", ""}},
});

}  // namespace

}  // namespace tessera
