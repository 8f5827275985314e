// The comparison family: elementwise comparisons and logic (bool results with
// broadcasting), isclose, allclose and array_equal.
#include "tessera/core/error.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

PrimitiveSpec compare_spec(const char* name, BinaryOp op, std::string help) {
  return PrimitiveSpec{
      .name = name,
      .family = "comparison",
      .params = {{"x"}, {"y"}},
      .help = std::move(help),
      .eval = [op](Args& a) -> Value { return binary_op(op, a.take(0), a.take(1), a.op()); },
      .ns_per_element = kernels::cost_ns(op),
      .scalar_binary = scalar_binary_of(op)};
}

// ==, !=, <, ...: Python's comparison when no operand is an array ([1, 2] ==
// [1, 2] is one bool, "a" < "b"), NumPy's elementwise one otherwise.
PrimitiveSpec python_aware_spec(const char* name, BinaryOp op, std::string help) {
  PrimitiveSpec spec = compare_spec(name, op, std::move(help));
  if (spec.help.find("Python") == std::string::npos) {
    spec.help += " Without an array operand, Python's comparison: one bool (strings, lists and "
                 "tuples compare lexicographically; other pairs of non-numbers raise TypeError).";
  }
  spec.eval = [op](Args& a) -> Value {
    if (python_operands(a[0], a[1])) return python_compare(op, a[0], a[1], a.op());
    return binary_op(op, a.take(0), a.take(1), a.op());
  };
  return spec;
}

// Tolerances must be finite and non-negative to mean anything.
double tolerance(Args& a, size_t i) {
  double t = a.number(i);
  if (!(t >= 0.0) || std::isinf(t)) {
    a.value_error(i, error_message("must be a finite non-negative number, got ", t));
  }
  return t;
}

bool all_true(const Value& v) {
  if (!v.is_array()) return v.truthy();
  const Array a = v.as_array().contiguous();
  const bool* p = a.data<bool>();
  for (int64_t i = 0; i < a.size(); ++i) {
    if (!p[i]) return false;
  }
  return true;
}

Value isclose_value(Args& a) {
  return isclose_op(a[0], a[1], tolerance(a, 2), tolerance(a, 3), a.boolean(4), a.op());
}

Value array_equal_value(Args& a) {
  Array x = a.array(0), y = a.array(1);
  if (x.shape() != y.shape()) return false;
  Value eq = binary_array(BinaryOp::equal, x, y, a.op());
  if (a.boolean(2) && is_floating(promote(x.dtype(), y.dtype()))) {
    Value both_nan = binary_array(BinaryOp::logical_and, unary_array(UnaryOp::isnan, x),
                                  unary_array(UnaryOp::isnan, y), a.op());
    eq = binary_op(BinaryOp::logical_or, eq, both_nan, a.op());
  }
  return all_true(eq);
}

// Comparisons and logic pass no gradient (their results are piecewise constant).
const bool registered_comparison = register_primitives(without_gradient({
    python_aware_spec("equal", BinaryOp::equal,
                 "Elementwise x == y as bool with broadcasting, like numpy.equal; NaN is "
                 "never equal. Without an array operand, Python's == (one bool: [1, 2] == "
                 "[1, 2], 'a' == 'a', None == None; a tuple never equals a list)."),
    python_aware_spec("not_equal", BinaryOp::not_equal,
                 "Elementwise x != y as bool with broadcasting, like numpy.not_equal."),
    python_aware_spec("less", BinaryOp::less,
                 "Elementwise x < y as bool with broadcasting, like numpy.less."),
    python_aware_spec("less_equal", BinaryOp::less_equal,
                 "Elementwise x <= y as bool with broadcasting, like numpy.less_equal."),
    python_aware_spec("greater", BinaryOp::greater,
                 "Elementwise x > y as bool with broadcasting, like numpy.greater."),
    python_aware_spec("greater_equal", BinaryOp::greater_equal,
                 "Elementwise x >= y as bool with broadcasting, like numpy.greater_equal."),
    compare_spec("logical_and", BinaryOp::logical_and,
                 "Elementwise truth of x and y (nonzero is true), like numpy.logical_and."),
    compare_spec("logical_or", BinaryOp::logical_or,
                 "Elementwise truth of x or y (nonzero is true), like numpy.logical_or."),
    compare_spec("logical_xor", BinaryOp::logical_xor,
                 "Elementwise truth of exactly one of x and y, like numpy.logical_xor."),
    {.name = "logical_not",
     .family = "comparison",
     .params = {{"x"}},
     .help = "Elementwise negated truth of x (nonzero is true) as bool, like "
             "numpy.logical_not.",
     .eval = [](Args& a) -> Value { return unary_op(UnaryOp::logical_not, a.take(0), a.op()); },
     .ns_per_element = 0.5},
    {.name = "isclose",
     .family = "comparison",
     .params = {{"a"},
                {"b"},
                opt("rtol", Value(1e-5)),
                opt("atol", Value(1e-8)),
                opt("equal_nan", Value(false))},
     .help = "Elementwise |a - b| <= atol + rtol * |b| as bool with broadcasting, like "
             "numpy.isclose. Infinities are close only to themselves; NaNs only when "
             "equal_nan.",
     .eval = [](Args& a) -> Value { return isclose_value(a); },
     .ns_per_element = 1.0},
    {.name = "allclose",
     .family = "comparison",
     .params = {{"a"},
                {"b"},
                opt("rtol", Value(1e-5)),
                opt("atol", Value(1e-8)),
                opt("equal_nan", Value(false))},
     .help = "True when isclose(a, b) holds for every element (a single bool), like "
             "numpy.allclose. Shapes must broadcast.",
     .eval = [](Args& a) -> Value { return all_true(isclose_value(a)); },
     .ns_per_element = 1.0},
    {.name = "array_equal",
     .family = "comparison",
     .params = {{"a1"}, {"a2"}, opt("equal_nan", Value(false))},
     .help = "True when both have the same shape and equal elements (a single bool), like "
             "numpy.array_equal; different shapes give false, not an error.",
     .eval = [](Args& a) -> Value { return array_equal_value(a); },
     .ns_per_element = 0.5},
}));

}  // namespace

}  // namespace tessera
