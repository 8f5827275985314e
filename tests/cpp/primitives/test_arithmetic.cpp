#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "tessera/core/error.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/runtime/parallel.hpp"
#include "test_util.hpp"

using namespace tessera;
using test::named;
using test::kNaN;
using test::kInf;
using namespace tessera::test;

namespace {

const double kPi = std::numbers::pi;
const int64_t kMax = std::numeric_limits<int64_t>::max();
const int64_t kMin = std::numeric_limits<int64_t>::min();

}  // namespace

TEST(ArithmeticBroadcast, ShapesFollowNumPy) {
  EXPECT_EQ(kernels::broadcast_shapes({{2, 3}, {3}}, "add"), (Shape{2, 3}));
  EXPECT_EQ(kernels::broadcast_shapes({{4, 1}, {1, 5}}, "add"), (Shape{4, 5}));
  EXPECT_EQ(kernels::broadcast_shapes({{}, {2}}, "add"), (Shape{2}));
  EXPECT_EQ(kernels::broadcast_shapes({{0}, {1}}, "add"), (Shape{0}));
  EXPECT_EQ(kernels::broadcast_shapes({{2, 1, 3}, {4, 1}}, "add"), (Shape{2, 4, 3}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { kernels::broadcast_shapes({{2, 3}, {4}}, "add"); },
      "[add] operands could not be broadcast together: shapes (2, 3) and (4,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { kernels::broadcast_shapes({{0}, {3}}, "add"); }, "shapes (0,) and (3,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { kernels::broadcast_shapes({{2}, {3}, {1}}, "where"); },
      "[where] operands could not be broadcast together: shapes (2,), (3,) and (1,)"));
}

TEST(ArithmeticBroadcast, LayoutMergesDimensions) {
  auto same = kernels::make_broadcast<2>({Shape{2, 3}, Shape{2, 3}}, "add");
  EXPECT_EQ(same.dims, (std::vector<int64_t>{6}));
  EXPECT_EQ(same.strides[0], (std::vector<int64_t>{1}));
  auto scalar = kernels::make_broadcast<2>({Shape{2, 3}, Shape{}}, "add");
  EXPECT_EQ(scalar.dims, (std::vector<int64_t>{6}));
  EXPECT_EQ(scalar.strides[1], (std::vector<int64_t>{0}));
  auto outer = kernels::make_broadcast<2>({Shape{3, 1}, Shape{1, 4}}, "add");
  EXPECT_EQ(outer.out_shape, (Shape{3, 4}));
  EXPECT_EQ(outer.dims, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(outer.strides[0], (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(outer.strides[1], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(outer.size, 12);
}

TEST(ArithmeticBroadcast, RangesCoverPartialRows) {
  // Tiles that start and end mid-row must still see the right elements.
  Array a = i64({0, 100, 200}, {3, 1}), b = i64({1, 2, 3, 4}, {1, 4});
  auto layout = kernels::make_broadcast<2>({a.shape(), b.shape()}, "add");
  Array out(DType::int64, layout.out_shape);
  kernels::binary_range(BinaryOp::add, layout, a, b, out, 0, 5, "add");
  kernels::binary_range(BinaryOp::add, layout, a, b, out, 5, 7, "add");
  kernels::binary_range(BinaryOp::add, layout, a, b, out, 7, 12, "add");
  EXPECT_TRUE(array_eq(out, DType::int64, {3, 4},
                       {1, 2, 3, 4, 101, 102, 103, 104, 201, 202, 203, 204}));
}

TEST(ArithmeticAdd, SameShapeEachDtype) {
  EXPECT_TRUE(array_eq(call("add", {f64({1, 2, 3}), f64({10, 20, 30.5})}), DType::float64, {3},
                       {11, 22, 33.5}));
  EXPECT_TRUE(array_eq(call("add", {f32({1.5f, 2}), f32({1, 1})}), DType::float32, {2},
                       {2.5, 3}));
  EXPECT_TRUE(array_eq(call("add", {i64({1, -2}), i64({3, 4})}), DType::int64, {2}, {4, 2}));
  // Two bool arrays add as logical or, as in NumPy.
  EXPECT_TRUE(array_eq(call("add", {b8({true, false, false}), b8({true, true, false})}),
                       DType::bool_, {3}, {1, 1, 0}));
}

TEST(ArithmeticAdd, RowPlusColumnAndScalar) {
  EXPECT_TRUE(array_eq(call("add", {i64({1, 2, 3}, {3, 1}), i64({10, 20}, {1, 2})}),
                       DType::int64, {3, 2}, {11, 21, 12, 22, 13, 23}));
  EXPECT_TRUE(array_eq(call("add", {f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({10, 20, 30})}),
                       DType::float64, {2, 3}, {11, 22, 33, 14, 25, 36}));
  EXPECT_TRUE(array_eq(call("add", {Value(2.5), f32({1, 2})}), DType::float32, {2}, {3.5, 4.5}));
  EXPECT_TRUE(array_eq(call("add", {f64({1, 2}, {2, 1}), Value(int64_t{1})}), DType::float64,
                       {2, 1}, {2, 3}));
}

TEST(ArithmeticAdd, ZeroDAndEmpty) {
  EXPECT_TRUE(array_eq(call("add", {Array::scalar(2.0), f64({1, 2})}), DType::float64, {2},
                       {3, 4}));
  EXPECT_TRUE(array_eq(call("add", {Array::scalar(2.0), Array::scalar(0.5)}), DType::float64, {},
                       {2.5}));
  EXPECT_TRUE(array_eq(call("add", {Array::scalar_int(2), Value(int64_t{3})}), DType::int64, {},
                       {5}));
  EXPECT_TRUE(array_eq(call("add", {Array(DType::float64, {0}), Value(1.0)}), DType::float64,
                       {0}, {}));
  EXPECT_TRUE(array_eq(call("add", {Array(DType::int64, {0, 3}), i64({1, 2, 3})}), DType::int64,
                       {0, 3}, {}));
}

TEST(ArithmeticAdd, ListsWithAnArrayBecomeArrays) {
  EXPECT_TRUE(array_eq(call("add", {Value(List{1, 2, 3}), Array::scalar_int(1)}), DType::int64,
                       {3}, {2, 3, 4}));
  EXPECT_TRUE(array_eq(call("multiply", {i64({2}, {1}), Value(List{1, 2})}), DType::int64, {2},
                       {2, 4}));
}

TEST(ArithmeticAdd, PythonValuesFollowPython) {
  Value l = call("add", {Value(List{1, 2}), Value(List{3})});
  EXPECT_TRUE(l.equals(Value(List{1, 2, 3})));
  EXPECT_FALSE(l.is_tuple());
  Value t = call("add", {Value::tuple(List{1}), Value::tuple(List{2})});
  EXPECT_TRUE(t.is_tuple() && t.equals(Value::tuple(List{1, 2})));
  EXPECT_EQ(call("add", {Value("ab"), Value("c")}).as_string(), "abc");
  EXPECT_TRUE(call("multiply", {Value(List{0}), Value(int64_t{3})}).equals(Value(List{0, 0, 0})));
  EXPECT_TRUE(call("multiply", {Value(int64_t{2}), Value(List{1, 2})}).equals(Value(List{1, 2, 1, 2})));
  EXPECT_TRUE(call("multiply", {Value(List{1}), Value(int64_t{-1})}).equals(Value(List{})));
  EXPECT_EQ(call("multiply", {Value("ab"), Value(true)}).as_string(), "ab");
  EXPECT_TRUE(throws_with<TypeError>([] { call("add", {Value(List{1}), Value(int64_t{1})}); },
                                     "[add] can only concatenate list (not \"int\") to list"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("add", {Value(List{1}), Value::tuple(List{1})}); },
      "[add] can only concatenate list (not \"tuple\") to list"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("add", {Value(), Value(int64_t{1})}); },
                                     "[add] unsupported operand type(s) for +: 'NoneType' and 'int'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("multiply", {Value(List{1}), Value(2.0)}); },
                                     "[multiply] can't multiply sequence by non-int of type 'float'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("multiply", {Value(List{1}), Value(List{1})}); },
                                     "can't multiply sequence by non-int of type 'list'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("subtract", {Value(List{1}), Value(List{1})}); },
                                     "[subtract] unsupported operand type(s) for -: 'list' and 'list'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("power", {Value(), Value(int64_t{2})}); },
                                     "[power] unsupported operand type(s) for **: 'NoneType' and 'int'"));
  EXPECT_EQ(call("mod", {Value("%d"), Value(int64_t{2})}).as_string(), "2");
  EXPECT_TRUE(array_eq(call("subtract", {Value(List{3, 4}), i64({1}, {1})}), DType::int64, {2}, {2, 3}));
  // maximum / minimum: Python's max(a, b) and min(a, b) (the first unless the
  // second is strictly greater / less).
  EXPECT_EQ(call("maximum", {Value("abc"), Value("abd")}).as_string(), "abd");
  EXPECT_TRUE(call("minimum", {Value(List{1, 2}), Value(List{1, 2, 0})}).equals(Value(List{1, 2})));
  EXPECT_TRUE(throws_with<TypeError>([] { call("maximum", {Value("a"), Value(List{1})}); },
                                     "[maximum] '>' not supported between instances of 'list' and 'str'"));
}

TEST(ArithmeticAdd, IntegerArraysWrapLikeNumPy) {
  Value r = call("add", {i64({kMax}, {1}), Value(int64_t{1})});
  EXPECT_EQ(r.as_array().data<int64_t>()[0], kMin);
  Value m = call("multiply", {i64({kMax}, {1}), Value(int64_t{2})});
  EXPECT_EQ(m.as_array().data<int64_t>()[0], -2);
}

TEST(ArithmeticPromotion, Nep50WeakScalars) {
  EXPECT_EQ(call("add", {f32({1}, {1}), Value(1.5)}).as_array().dtype(), DType::float32);
  EXPECT_EQ(call("add", {f32({1}, {1}), Array::scalar(1.5)}).as_array().dtype(), DType::float64);
  EXPECT_EQ(call("add", {i64({1}, {1}), Value(1.5)}).as_array().dtype(), DType::float64);
  EXPECT_EQ(call("add", {i64({1}, {1}), f32({1}, {1})}).as_array().dtype(), DType::float64);
  EXPECT_EQ(call("add", {b8({true}, {1}), Value(int64_t{1})}).as_array().dtype(), DType::int64);
  EXPECT_EQ(call("add", {i64({1}, {1}), Value(true)}).as_array().dtype(), DType::int64);
  EXPECT_EQ(call("multiply", {f32({1}, {1}), Value(int64_t{3})}).as_array().dtype(),
            DType::float32);
  EXPECT_TRUE(array_eq(call("multiply", {b8({true, false}), Value(2.5)}), DType::float64, {2},
                       {2.5, 0}));
}

TEST(ArithmeticScalar, PythonSemantics) {
  Value s = call("add", {Value(int64_t{1}), Value(int64_t{2})});
  ASSERT_TRUE(s.is_int());
  EXPECT_EQ(s.as_int(), 3);
  Value f = call("add", {Value(int64_t{1}), Value(2.5)});
  ASSERT_TRUE(f.is_float());
  EXPECT_EQ(f.as_float(), 3.5);
  Value d = call("divide", {Value(int64_t{7}), Value(int64_t{2})});
  ASSERT_TRUE(d.is_float());
  EXPECT_EQ(d.as_float(), 3.5);
  EXPECT_EQ(call("floor_divide", {Value(int64_t{-7}), Value(int64_t{2})}).as_int(), -4);
  EXPECT_EQ(call("mod", {Value(int64_t{-7}), Value(int64_t{2})}).as_int(), 1);
  EXPECT_EQ(call("mod", {Value(int64_t{7}), Value(int64_t{-2})}).as_int(), -1);
  EXPECT_EQ(call("mod", {Value(-7.5), Value(2.0)}).as_float(), 0.5);
  EXPECT_EQ(call("floor_divide", {Value(-7.5), Value(2.0)}).as_float(), -4.0);
  EXPECT_EQ(call("power", {Value(int64_t{2}), Value(int64_t{10})}).as_int(), 1024);
  Value neg = call("power", {Value(int64_t{2}), Value(int64_t{-1})});
  ASSERT_TRUE(neg.is_float());
  EXPECT_EQ(neg.as_float(), 0.5);
  Value tt = call("add", {Value(true), Value(true)});
  ASSERT_TRUE(tt.is_int());
  EXPECT_EQ(tt.as_int(), 2);
  Value mx = call("maximum", {Value(true), Value(false)});
  ASSERT_TRUE(mx.is_bool());
  EXPECT_TRUE(mx.as_bool());
  EXPECT_EQ(call("maximum", {Value(int64_t{3}), Value(int64_t{5})}).as_int(), 5);
  EXPECT_EQ(call("minimum", {Value(int64_t{3}), Value(2.5)}).as_float(), 2.5);
  EXPECT_TRUE(std::isnan(call("maximum", {Value(kNaN), Value(1.0)}).as_float()));
  EXPECT_EQ(call("fmax", {Value(kNaN), Value(1.0)}).as_float(), 1.0);
  EXPECT_EQ(call("fmin", {Value(2.0), Value(kNaN)}).as_float(), 2.0);
  EXPECT_EQ(call("subtract", {Value(true), Value(true)}).as_int(), 0);
  EXPECT_EQ(call("multiply", {Value(int64_t{6}), Value(int64_t{7})}).as_int(), 42);
  // Python's numbers divided by zero: Python's ZeroDivisionError (NumPy's
  // scalars are 0-d arrays, which give inf).
  EXPECT_TRUE(throws_with<ZeroDivisionError>(
      [] { call("divide", {Value(1.0), Value(0.0)}); }, "[divide] float division by zero"));
  EXPECT_TRUE(throws_with<ZeroDivisionError>(
      [] { call("divide", {Value(int64_t{1}), Value(int64_t{0})}); }, "[divide] division by zero"));
  EXPECT_TRUE(throws_with<ZeroDivisionError>(
      [] { call("floor_divide", {Value(1.0), Value(-0.0)}); },
      "[floor_divide] float floor division by zero"));
  EXPECT_TRUE(throws_with<ZeroDivisionError>([] { call("mod", {Value(2.5), Value(0.0)}); },
                                             "[mod] float modulo by zero"));
  EXPECT_TRUE(throws_with<ZeroDivisionError>(
      [] { call("power", {Value(0.0), Value(int64_t{-1})}); },
      "[power] 0.0 cannot be raised to a negative power"));
  EXPECT_EQ(call("divide", {f64({1.0}), Value(0.0)}).as_array().data<double>()[0], kInf);
  EXPECT_NEAR(call("arctan2", {Value(int64_t{1}), Value(int64_t{1})}).as_float(), kPi / 4, 1e-15);
  EXPECT_EQ(call("hypot", {Value(int64_t{3}), Value(int64_t{4})}).as_float(), 5.0);
  EXPECT_EQ(call("copysign", {Value(2.0), Value(int64_t{-1})}).as_float(), -2.0);
}

// Python's ints would grow; tessera's int64 cannot: Python's OverflowError (overflow_error).
TEST(ArithmeticScalar, IntegerOverflowRaises) {
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("add", {Value(kMax), Value(int64_t{1})}); },
      "[add] integer overflow: 9223372036854775807 + 1 does not fit in int64 (Python would give a "
      "big integer; tessera's ints are int64)"));
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("subtract", {Value(kMin), Value(int64_t{1})}); }, "[subtract] integer overflow"));
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("multiply", {Value(kMax), Value(int64_t{2})}); }, "[multiply] integer overflow"));
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("power", {Value(int64_t{2}), Value(int64_t{64})}); },
      "[power] integer overflow: 2 ** 64"));
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("floor_divide", {Value(kMin), Value(int64_t{-1})}); },
      "[floor_divide] integer overflow"));
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("negative", {Value(kMin)}); },
      "[negative] integer overflow: negative of -9223372036854775808 does not fit in int64"));
  EXPECT_TRUE(throws_with<std::overflow_error>([] { call("abs", {Value(kMin)}); },
                                               "[abs] integer overflow"));
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("square", {Value(int64_t{1} << 32)}); }, "[square] integer overflow"));
  EXPECT_EQ(call("power", {Value(int64_t{-2}), Value(int64_t{63})}).as_int(), kMin);
}

TEST(ArithmeticScalar, CppEntryPoints) {
  Value r = binary_op(BinaryOp::add, Value(int64_t{1}), Value(int64_t{2}));
  EXPECT_EQ(r.as_int(), 3);
  EXPECT_EQ(unary_op(UnaryOp::negative, Value(int64_t{3})).as_int(), -3);
  EXPECT_EQ(unary_op(UnaryOp::logical_not, Value(int64_t{0})).as_bool(), true);
  EXPECT_STREQ(op_name(BinaryOp::floor_divide), "floor_divide");
  EXPECT_STREQ(op_name(UnaryOp::logical_not), "logical_not");
  EXPECT_TRUE(array_eq(binary_array(BinaryOp::subtract, i64({5}, {1}), f64({0.5}, {1})),
                       DType::float64, {1}, {4.5}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { binary_op(BinaryOp::floor_divide, i64({1}, {1}), Value(int64_t{0}), "//"); },
      "[//] integer division by zero"));
}

TEST(ArithmeticSubtract, ValuesAndBoolError) {
  EXPECT_TRUE(array_eq(call("subtract", {f64({1, 2}), f64({0.5, 4})}), DType::float64, {2},
                       {0.5, -2}));
  EXPECT_TRUE(array_eq(call("subtract", {i64({1, 2}), Value(int64_t{5})}), DType::int64, {2},
                       {-4, -3}));
  EXPECT_TRUE(throws_with<TypeError>([] { call("subtract", {b8({true}, {1}), b8({false}, {1})}); },
                                     "[subtract] boolean subtract is not supported"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("subtract", {b8({true}, {1}), Value(true)}); },
                                     "use logical_xor"));
}

TEST(ArithmeticMultiply, EachDtype) {
  EXPECT_TRUE(array_eq(call("multiply", {f32({1.5f, 2}), f32({2, -3})}), DType::float32, {2},
                       {3, -6}));
  EXPECT_TRUE(array_eq(call("multiply", {i64({3, -4}), i64({5}, {1})}), DType::int64, {2},
                       {15, -20}));
  EXPECT_TRUE(array_eq(call("multiply", {b8({true, true}), b8({true, false})}), DType::bool_, {2},
                       {1, 0}));
}

TEST(ArithmeticDivide, IntegersGiveFloat64AndZeroGivesInf) {
  EXPECT_TRUE(array_eq(call("divide", {i64({1, 2, 3}), i64({2}, {1})}), DType::float64, {3},
                       {0.5, 1, 1.5}));
  EXPECT_TRUE(array_eq(call("divide", {f32({1, 3}), Value(int64_t{2})}), DType::float32, {2},
                       {0.5, 1.5}));
  EXPECT_TRUE(array_eq(call("divide", {b8({true, false}), b8({true, true})}), DType::float64, {2},
                       {1, 0}));
  EXPECT_TRUE(array_eq(call("divide", {f64({1, -1, 0}), Value(0.0)}), DType::float64, {3},
                       {kInf, -kInf, kNaN}));
  EXPECT_TRUE(array_eq(call("divide", {i64({1, 0}), i64({0, 0})}), DType::float64, {2},
                       {kInf, kNaN}));
}

TEST(ArithmeticFloorDivide, SignsAndZero) {
  EXPECT_TRUE(array_eq(call("floor_divide", {i64({7, -7, 7, -7}), i64({2, 2, -2, -2})}),
                       DType::int64, {4}, {3, -4, -4, 3}));
  EXPECT_TRUE(array_eq(call("floor_divide", {f64({7.5, -7.5}), Value(int64_t{2})}),
                       DType::float64, {2}, {3, -4}));
  EXPECT_TRUE(array_eq(call("floor_divide", {f32({7, -7}), Value(2.0)}), DType::float32, {2},
                       {3, -4}));
  EXPECT_TRUE(array_eq(call("floor_divide", {f64({1, -1, 0}), Value(0.0)}), DType::float64, {3},
                       {kInf, -kInf, kNaN}));
  // Bools divide in int8, as NumPy's.
  EXPECT_TRUE(array_eq(call("floor_divide", {b8({true, false}), b8({true, true})}), DType::int8,
                       {2}, {1, 0}));
  Value wrap = call("floor_divide", {i64({kMin}, {1}), Value(int64_t{-1})});
  EXPECT_EQ(wrap.as_array().data<int64_t>()[0], kMin);
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("floor_divide", {i64({1, 2}), i64({1, 0})}); },
      "[floor_divide] integer division by zero"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("floor_divide", {Value(int64_t{1}), Value(int64_t{0})}); },
      "[floor_divide] integer division by zero"));
}

TEST(ArithmeticMod, SignOfDivisor) {
  EXPECT_TRUE(array_eq(call("mod", {i64({7, -7, 7, -7}), i64({2, 2, -2, -2})}), DType::int64,
                       {4}, {1, 1, -1, -1}));
  EXPECT_TRUE(array_eq(call("mod", {f64({5.5, -5.5}), Value(int64_t{2})}), DType::float64, {2},
                       {1.5, 0.5}));
  EXPECT_TRUE(array_eq(call("remainder", {f64({5.5}, {1}), Value(-2.0)}), DType::float64, {1},
                       {-0.5}));
  EXPECT_TRUE(array_eq(call("mod", {f64({1}, {1}), Value(0.0)}), DType::float64, {1}, {kNaN}));
  EXPECT_TRUE(
      array_eq(call("mod", {i64({kMin}, {1}), Value(int64_t{-1})}), DType::int64, {1}, {0}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("mod", {i64({1}, {1}), Value(int64_t{0})}); }, "[mod] integer division by zero"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("remainder", {Value(int64_t{5}), Value(false)}); },
      "[remainder] integer division by zero"));
}

TEST(ArithmeticPower, IntegersFloatsAndNegativeExponent) {
  EXPECT_TRUE(array_eq(call("power", {i64({2, 3, -2}), Value(int64_t{3})}), DType::int64, {3},
                       {8, 27, -8}));
  EXPECT_TRUE(array_eq(call("power", {i64({5}, {1}), Value(int64_t{0})}), DType::int64, {1}, {1}));
  EXPECT_TRUE(array_eq(call("power", {f64({4, 9}), Value(0.5)}), DType::float64, {2}, {2, 3}));
  EXPECT_TRUE(
      array_eq(call("power", {f32({3}, {1}), Value(int64_t{2})}), DType::float32, {1}, {9}));
  EXPECT_TRUE(array_eq(call("power", {i64({2}, {1}), Value(-1.0)}), DType::float64, {1}, {0.5}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("power", {i64({2, 3}), i64({1, -1})}); },
      "[power] integers to negative integer powers are not allowed: got exponent -1"));
}

TEST(ArithmeticMaximum, NaNPropagatesButFmaxIgnoresIt) {
  Array a = f64({1, kNaN, 3, kNaN}), b = f64({kNaN, 2, 1, kNaN});
  EXPECT_TRUE(array_eq(call("maximum", {a, b}), DType::float64, {4}, {kNaN, kNaN, 3, kNaN}));
  EXPECT_TRUE(array_eq(call("minimum", {a, b}), DType::float64, {4}, {kNaN, kNaN, 1, kNaN}));
  EXPECT_TRUE(array_eq(call("fmax", {a, b}), DType::float64, {4}, {1, 2, 3, kNaN}));
  EXPECT_TRUE(array_eq(call("fmin", {a, b}), DType::float64, {4}, {1, 2, 1, kNaN}));
  EXPECT_TRUE(array_eq(call("maximum", {i64({1, 5}), Value(int64_t{3})}), DType::int64, {2},
                       {3, 5}));
  EXPECT_TRUE(array_eq(call("minimum", {f32({1, 5}), Value(int64_t{3})}), DType::float32, {2},
                       {1, 3}));
  EXPECT_TRUE(array_eq(call("maximum", {b8({true, false}), b8({false, false})}), DType::bool_,
                       {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("fmin", {i64({4, -1}), i64({2, 2})}), DType::int64, {2}, {2, -1}));
}

TEST(ArithmeticFloatBinary, Arctan2HypotCopysign) {
  EXPECT_TRUE(array_eq(call("arctan2", {f64({1, -1, 0}), f64({1, -1, -1})}), DType::float64, {3},
                       {kPi / 4, -3 * kPi / 4, kPi}));
  EXPECT_TRUE(array_eq(call("arctan2", {i64({1}, {1}), i64({0}, {1})}), DType::float64, {1},
                       {kPi / 2}));
  EXPECT_TRUE(array_eq(call("arctan2", {f32({1}, {1}), Value(1.0)}), DType::float32, {1},
                       {kPi / 4}));
  EXPECT_TRUE(array_eq(call("hypot", {i64({3, 5}), i64({4, 12})}), DType::float64, {2}, {5, 13}));
  EXPECT_TRUE(array_eq(call("hypot", {f64({1e300}, {1}), f64({1e300}, {1})}), DType::float64, {1},
                       {1.4142135623730951e300}));
  EXPECT_TRUE(array_eq(call("copysign", {f64({1, -2, 3}), f64({-1, 1, -0.0})}), DType::float64,
                       {3}, {-1, 2, -3}));
  EXPECT_TRUE(array_eq(call("copysign", {i64({2}, {1}), Value(int64_t{-1})}), DType::float64, {1},
                       {-2}));
}

TEST(ArithmeticUnary, SignedOps) {
  EXPECT_TRUE(array_eq(call("negative", {i64({3, -2})}), DType::int64, {2}, {-3, 2}));
  EXPECT_TRUE(array_eq(call("negative", {f32({1.5f}, {1})}), DType::float32, {1}, {-1.5}));
  EXPECT_TRUE(throws_with<TypeError>([] { call("negative", {b8({true}, {1})}); },
                                     "[negative] negative of a bool array is not supported"));
  EXPECT_EQ(call("negative", {Value(true)}).as_int(), -1);
  EXPECT_EQ(call("negative", {Value(2.5)}).as_float(), -2.5);
  // NumPy has no positive or sign of bools.
  EXPECT_TRUE(throws_with<TypeError>([] { call("positive", {b8({true, false})}); },
                                     "[positive] positive of a bool array is not supported"));
  EXPECT_TRUE(array_eq(call("positive", {f64({-1}, {1})}), DType::float64, {1}, {-1}));
  EXPECT_TRUE(array_eq(call("abs", {i64({-3, 2})}), DType::int64, {2}, {3, 2}));
  EXPECT_TRUE(array_eq(call("absolute", {f32({-1.5f, 2})}), DType::float32, {2}, {1.5, 2}));
  EXPECT_TRUE(array_eq(call("abs", {b8({true, false})}), DType::bool_, {2}, {1, 0}));
  EXPECT_EQ(call("abs", {Value(int64_t{-4})}).as_int(), 4);
  EXPECT_EQ(call("abs", {Value(-0.5)}).as_float(), 0.5);
  EXPECT_TRUE(array_eq(call("sign", {f64({-2, 0, 3, kNaN})}), DType::float64, {4},
                       {-1, 0, 1, kNaN}));
  EXPECT_TRUE(array_eq(call("sign", {i64({-7, 0, 9})}), DType::int64, {3}, {-1, 0, 1}));
  EXPECT_EQ(call("sign", {Value(int64_t{-7})}).as_int(), -1);
  EXPECT_TRUE(array_eq(call("square", {i64({-3, 4})}), DType::int64, {2}, {9, 16}));
  EXPECT_TRUE(array_eq(call("square", {b8({true}, {1})}), DType::int8, {1}, {1}));
  EXPECT_TRUE(array_eq(call("square", {f32({1.5f}, {1})}), DType::float32, {1}, {2.25}));
  EXPECT_EQ(call("square", {Value(int64_t{-3})}).as_int(), 9);
  Value wrap = call("negative", {i64({kMin}, {1})});
  EXPECT_EQ(wrap.as_array().data<int64_t>()[0], kMin);
}

TEST(ArithmeticUnary, FloatFunctionsTable) {
  const double e = std::numbers::e;
  struct Case {
    const char* op;
    double in, out;
  };
  const Case cases[] = {
      {"sqrt", 9, 3},          {"exp", 1, e},         {"exp2", 3, 8},
      {"expm1", 0, 0},         {"log", e, 1},         {"log2", 8, 3},
      {"log10", 1000, 3},      {"log1p", e - 1, 1},   {"sin", kPi / 2, 1},
      {"cos", kPi, -1},        {"tan", kPi / 4, 1},   {"arcsin", 1, kPi / 2},
      {"arccos", -1, kPi},     {"arctan", 1, kPi / 4}, {"sinh", 1, std::sinh(1.0)},
      {"cosh", 0, 1},          {"tanh", 0.5, std::tanh(0.5)}, {"arcsinh", std::sinh(2.0), 2},
      {"arccosh", 1, 0},       {"arctanh", std::tanh(0.25), 0.25}, {"floor", -1.5, -2},
      {"ceil", -1.5, -1},      {"trunc", -1.7, -1},   {"rint", 2.5, 2},
      {"reciprocal", 4, 0.25}, {"deg2rad", 180, kPi}, {"rad2deg", kPi / 2, 90},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    Value s = call(c.op, {Value(c.in)});
    ASSERT_TRUE(s.is_float());
    EXPECT_NEAR(s.as_float(), c.out, 1e-12);
    EXPECT_TRUE(array_eq(call(c.op, {f64({c.in, c.in}, {1, 2})}), DType::float64, {1, 2},
                         {c.out, c.out}));
    EXPECT_TRUE(array_eq(call(c.op, {f32({static_cast<float>(c.in)}, {1})}), DType::float32, {1},
                         {c.out}, 1e-5, 1e-6));
  }
}

TEST(ArithmeticUnary, IntegerInputsGiveFloat64) {
  EXPECT_TRUE(array_eq(call("sqrt", {i64({4, 9})}), DType::float64, {2}, {2, 3}));
  EXPECT_TRUE(array_eq(call("exp", {b8({false}, {1})}), DType::float16, {1}, {1}));  // NumPy's
  // NumPy 2: floor, ceil and trunc keep integers and bools as they are.
  EXPECT_TRUE(array_eq(call("floor", {i64({3, -2})}), DType::int64, {2}, {3, -2}));
  EXPECT_TRUE(array_eq(call("trunc", {b8({true}, {1})}), DType::bool_, {1}, {1}));
  EXPECT_TRUE(array_eq(call("rint", {i64({3}, {1})}), DType::float64, {1}, {3}));
  EXPECT_TRUE(array_eq(call("reciprocal", {i64({2, 0})}), DType::float64, {2}, {0.5, kInf}));
  Value s = call("sqrt", {Value(int64_t{4})});
  ASSERT_TRUE(s.is_float());
  EXPECT_EQ(s.as_float(), 2.0);
  EXPECT_TRUE(std::isnan(call("sqrt", {Value(-1.0)}).as_float()));
  EXPECT_TRUE(array_eq(call("log", {f64({0, -1})}), DType::float64, {2}, {-kInf, kNaN}));
  EXPECT_TRUE(array_eq(call("sin", {Array::scalar(0.0)}), DType::float64, {}, {0}));
  EXPECT_TRUE(array_eq(call("cos", {Array(DType::float32, {0, 2})}), DType::float32, {0, 2}, {}));
}

TEST(ArithmeticRounding, HalfToEvenAndDecimals) {
  EXPECT_TRUE(array_eq(call("floor", {f64({-1.5, 1.5})}), DType::float64, {2}, {-2, 1}));
  EXPECT_TRUE(array_eq(call("ceil", {f64({-1.5, 1.5})}), DType::float64, {2}, {-1, 2}));
  EXPECT_TRUE(array_eq(call("trunc", {f32({-1.5f, 1.5f})}), DType::float32, {2}, {-1, 1}));
  EXPECT_TRUE(array_eq(call("rint", {f64({0.5, 1.5, 2.5, -0.5, -1.5})}), DType::float64, {5},
                       {0, 2, 2, 0, -2}));
  EXPECT_TRUE(array_eq(call("round", {f64({0.5, 1.5, 2.5})}), DType::float64, {3}, {0, 2, 2}));
  EXPECT_TRUE(array_eq(named("round", {{"", f64({1.25, 2.5, -1.35})}, {"decimals", 1}}),
                       DType::float64, {3}, {1.2, 2.5, -1.4}));
  EXPECT_TRUE(array_eq(named("round", {{"", f32({1.25f}, {1})}, {"decimals", 1}}),
                       DType::float32, {1}, {1.2}));
  EXPECT_TRUE(array_eq(named("round", {{"", i64({15, 25, -15, 3})}, {"decimals", -1}}),
                       DType::int64, {4}, {20, 20, -20, 0}));
  EXPECT_TRUE(array_eq(call("round", {i64({3, -4})}), DType::int64, {2}, {3, -4}));
  Value s = call("round", {Value(2.5)});
  ASSERT_TRUE(s.is_float());
  EXPECT_EQ(s.as_float(), 2.0);
  EXPECT_EQ(named("round", {{"", Value(1234.5678)}, {"decimals", -2}}).as_float(), 1200.0);
  EXPECT_EQ(call("round", {Value(int64_t{7})}).as_int(), 7);
  EXPECT_TRUE(throws_with<TypeError>([] { call("round", {Value("x")}); },
                                     "[round] argument 'x' must be a number or an array"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { named("round", {{"", f64({1}, {1})}, {"decimals", 1.5}}); },
      "[round] argument 'decimals' must be an integer"));
}

TEST(ArithmeticPredicates, NanInfFiniteAndLogicalNot) {
  Array x = f64({1, kNaN, kInf, -kInf});
  EXPECT_TRUE(array_eq(call("isnan", {x}), DType::bool_, {4}, {0, 1, 0, 0}));
  EXPECT_TRUE(array_eq(call("isinf", {x}), DType::bool_, {4}, {0, 0, 1, 1}));
  EXPECT_TRUE(array_eq(call("isfinite", {x}), DType::bool_, {4}, {1, 0, 0, 0}));
  EXPECT_TRUE(array_eq(call("isnan", {f32({std::nanf("")}, {1})}), DType::bool_, {1}, {1}));
  EXPECT_TRUE(array_eq(call("isnan", {i64({1, 2})}), DType::bool_, {2}, {0, 0}));
  EXPECT_TRUE(array_eq(call("isfinite", {b8({true}, {1})}), DType::bool_, {1}, {1}));
  Value s = call("isnan", {Value(kNaN)});
  ASSERT_TRUE(s.is_bool());
  EXPECT_TRUE(s.as_bool());
  EXPECT_FALSE(call("isinf", {Value(int64_t{3})}).as_bool());
  EXPECT_TRUE(array_eq(call("logical_not", {i64({0, 2})}), DType::bool_, {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("logical_not", {f64({0.0, kNaN})}), DType::bool_, {2}, {1, 0}));
  EXPECT_TRUE(call("logical_not", {Value(int64_t{0})}).as_bool());
}

TEST(ArithmeticClip, BoundsAndPromotion) {
  EXPECT_TRUE(array_eq(call("clip", {i64({-5, 3, 10}), Value(int64_t{0}), Value(int64_t{5})}),
                       DType::int64, {3}, {0, 3, 5}));
  EXPECT_TRUE(array_eq(named("clip", {{"", f64({-5, 3, 10})}, {"a_max", 2.0}}), DType::float64,
                       {3}, {-5, 2, 2}));
  EXPECT_TRUE(array_eq(call("clip", {i64({0, 3}), Value(0.5), Value()}), DType::float64, {2},
                       {0.5, 3}));
  EXPECT_TRUE(array_eq(call("clip", {f32({0, 3}), Value(1.0), Value(2.0)}), DType::float32, {2},
                       {1, 2}));
  EXPECT_TRUE(array_eq(call("clip", {f64({1, 5, 9}), f64({2, 2, 2}), Value(6.0)}),
                       DType::float64, {3}, {2, 5, 6}));
  EXPECT_TRUE(array_eq(call("clip", {f64({kNaN}, {1}), Value(0.0), Value(1.0)}),
                       DType::float64, {1}, {kNaN}));
  EXPECT_TRUE(array_eq(call("clip", {i64({4}, {1})}), DType::int64, {1}, {4}));
  Value s = call("clip", {Value(int64_t{7}), Value(int64_t{0}), Value(int64_t{5})});
  ASSERT_TRUE(s.is_int());
  EXPECT_EQ(s.as_int(), 5);
  EXPECT_TRUE(throws_with<TypeError>([] { call("clip", {f64({1}, {1}), Value("a")}); },
                                     "[clip] argument 'a_min' must be a number, an array or nil, "
                                     "got string 'a'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("clip", {f64({1, 2}), f64({1, 2, 3})}); },
      "[clip] operands could not be broadcast together: shapes (2,) and (3,)"));
}

TEST(ArithmeticWhere, ThreeWayBroadcast) {
  EXPECT_TRUE(array_eq(call("where", {b8({true, false, true}), i64({1, 2, 3}), f64({10, 20, 30})}),
                       DType::float64, {3}, {1, 20, 3}));
  EXPECT_TRUE(array_eq(
      call("where", {b8({true, false}, {2, 1}), i64({1, 2, 3}), Value(int64_t{0})}), DType::int64,
      {2, 3}, {1, 2, 3, 0, 0, 0}));
  EXPECT_TRUE(array_eq(call("where", {i64({0, 7}), Value(1.5), f32({2, 2})}), DType::float32, {2},
                       {2, 1.5}));
  EXPECT_TRUE(array_eq(call("where", {Array::scalar_bool(true), f64({1, 2}), Value(0.0)}),
                       DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("where", {b8({}, {0}), f64({}, {0}), Value(1.0)}), DType::float64,
                       {0}, {}));
  Value s = call("where", {Value(true), Value(int64_t{1}), Value(2.5)});
  ASSERT_TRUE(s.is_float());
  EXPECT_EQ(s.as_float(), 1.0);
  EXPECT_EQ(call("where", {Value(false), Value(int64_t{1}), Value(int64_t{2})}).as_int(), 2);
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("where", {b8({true, false}), i64({1, 2, 3}), Value(int64_t{0})}); },
      "[where] operands could not be broadcast together: shapes (2,), (3,) and ()"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("where", {Value("c"), i64({1}, {1}), i64({2}, {1})}); },
      "[where] argument 'condition' must be a number or an array, got string 'c'"));
}

TEST(ArithmeticAstype, NamesAndCasting) {
  EXPECT_TRUE(array_eq(call("astype", {f64({1.7, -1.7}), Value("int64")}), DType::int64, {2},
                       {1, -1}));
  Value nan_cast = call("astype", {f64({kNaN}, {1}), Value("int64")});
  EXPECT_EQ(nan_cast.as_array().data<int64_t>()[0], kMin);
  EXPECT_TRUE(array_eq(call("astype", {i64({0, 2}), Value("bool")}), DType::bool_, {2}, {0, 1}));
  EXPECT_TRUE(array_eq(call("astype", {i64({1, 2}), Value("float32")}), DType::float32, {2},
                       {1, 2}));
  EXPECT_TRUE(array_eq(call("astype", {f32({1.5f}, {1}), Value("float64")}), DType::float64, {1},
                       {1.5}));
  Value s = call("astype", {Value(3.7), Value("int")});
  ASSERT_TRUE(s.is_int());
  EXPECT_EQ(s.as_int(), 3);
  EXPECT_TRUE(call("astype", {Value(int64_t{2}), Value("bool")}).as_bool());
  EXPECT_EQ(call("astype", {Value(true), Value("float64")}).as_float(), 1.0);
  EXPECT_TRUE(
      array_eq(call("astype", {Value(int64_t{1}), Value("float32")}), DType::float32, {}, {1}));
  EXPECT_TRUE(throws_with<TypeError>([] { call("astype", {f64({1}, {1}), Value("quaternion")}); },
                                     "[astype] unknown dtype 'quaternion'"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("astype", {f64({1}, {1}), Value(int64_t{3})}); },
      "[astype] argument 'dtype' must be a dtype name such as 'float32', got int 3"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("astype", {f64({1}, {1}), Value()}); },
                                     "[astype] argument 'dtype' must be a dtype name"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("astype", {Value("s"), Value("int64")}); },
                                     "[astype] argument 'x' must be a number or an array"));
}

TEST(ArithmeticNanToNum, DefaultsAndCustomValues) {
  const double big = std::numeric_limits<double>::max();
  EXPECT_TRUE(array_eq(call("nan_to_num", {f64({kNaN, kInf, -kInf, 1})}), DType::float64, {4},
                       {0, big, -big, 1}));
  const double fbig = std::numeric_limits<float>::max();
  EXPECT_TRUE(array_eq(call("nan_to_num", {f32({std::nanf(""), INFINITY})}), DType::float32, {2},
                       {0, fbig}));
  EXPECT_TRUE(array_eq(named("nan_to_num", {{"", f64({kNaN, kInf, -kInf})},
                                            {"nan", -1.0},
                                            {"posinf", 9},
                                            {"neginf", -9}}),
                       DType::float64, {3}, {-1, 9, -9}));
  EXPECT_TRUE(array_eq(call("nan_to_num", {i64({1, 2})}), DType::int64, {2}, {1, 2}));
  EXPECT_EQ(call("nan_to_num", {Value(kNaN)}).as_float(), 0.0);
  EXPECT_EQ(call("nan_to_num", {Value(int64_t{5})}).as_int(), 5);
  EXPECT_TRUE(throws_with<TypeError>(
      [] { named("nan_to_num", {{"", f64({1}, {1})}, {"nan", "zero"}}); },
      "[nan_to_num] argument 'nan' must be a number"));
}

TEST(ArithmeticErrors, OperandTypesAndShapes) {
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("add", {Value("a"), Array::scalar_int(1)}); },
      "[add] argument 'x' must be a number or an array, got string 'a'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("multiply", {f64({1}, {1}), Value()}); },
                                     "[multiply] argument 'y' must be a number or an array, got "
                                     "nil"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("add", {f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({1, 2, 3, 4})}); },
      "[add] operands could not be broadcast together: shapes (2, 3) and (4,)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("sqrt", {Value("x")}); },
                                     "[sqrt] argument 'x' must be a number or an array, got "
                                     "string 'x'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("add", {Value(List{Value(List{1, 2}), Value(List{3})}), Array::scalar_int(1)}); },
      "[add] argument 'x' is a ragged nested list"));
}

TEST(ArithmeticInPlace, ReusesUniquelyHeldBuffers) {
  Array x = f64({1, 2, 3});
  const void* px = x.raw();
  Value r = binary_op(BinaryOp::add, Value(std::move(x)), Value(1.0));
  EXPECT_EQ(r.as_array().raw(), px);
  EXPECT_TRUE(array_eq(r, DType::float64, {3}, {2, 3, 4}));
  Array y = f64({1, 2, 3});
  const void* py = y.raw();
  Value r2 = binary_op(BinaryOp::multiply, Value(2.0), Value(std::move(y)));
  EXPECT_EQ(r2.as_array().raw(), py);
  EXPECT_TRUE(array_eq(r2, DType::float64, {3}, {2, 4, 6}));
  Array z = f64({4, 9});
  const void* pz = z.raw();
  Value s = unary_op(UnaryOp::sqrt, Value(std::move(z)));
  EXPECT_EQ(s.as_array().raw(), pz);
  EXPECT_TRUE(array_eq(s, DType::float64, {2}, {2, 3}));
}

TEST(ArithmeticInPlace, NeverWritesSharedBuffers) {
  Array x = f64({1, 2, 3});
  Value r = binary_op(BinaryOp::add, x, Value(1.0));
  EXPECT_NE(r.as_array().raw(), x.raw());
  Value alias = x;
  Value r2 = binary_op(BinaryOp::add, std::move(alias), x);
  EXPECT_TRUE(array_eq(r2, DType::float64, {3}, {2, 4, 6}));
  Value u = unary_op(UnaryOp::negative, x);
  EXPECT_TRUE(array_eq(u, DType::float64, {3}, {-1, -2, -3}));
  call("add", {x, Value(5.0)});
  call("sqrt", {x});
  EXPECT_TRUE(array_eq(x, DType::float64, {3}, {1, 2, 3}));
  // A unique operand of the wrong shape or dtype is not reused.
  Value b = binary_op(BinaryOp::add, Value(f64({1, 2})), Value(f64({10, 20, 30, 40}, {2, 2})));
  EXPECT_TRUE(array_eq(b, DType::float64, {2, 2}, {11, 22, 31, 42}));
  Value c = binary_op(BinaryOp::less, Value(f64({1, 2})), Value(1.5));
  EXPECT_TRUE(array_eq(c, DType::bool_, {2}, {1, 0}));
}

TEST(ArithmeticRegistry, EveryPrimitiveHasHelp) {
  const char* names[] = {
      "add",     "subtract", "multiply", "divide",  "floor_divide", "mod",        "remainder",
      "power",   "maximum",  "minimum",  "fmax",    "fmin",         "arctan2",    "hypot",
      "copysign", "negative", "positive", "abs",    "absolute",     "sign",       "sqrt",
      "square",  "exp",      "exp2",     "expm1",   "log",          "log2",       "log10",
      "log1p",   "sin",      "cos",      "tan",     "arcsin",       "arccos",     "arctan",
      "sinh",    "cosh",     "tanh",     "arcsinh", "arccosh",      "arctanh",    "floor",
      "ceil",    "rint",     "round",    "trunc",   "reciprocal",   "isnan",      "isinf",
      "isfinite", "deg2rad", "rad2deg",  "clip",    "where",        "astype",     "nan_to_num"};
  for (const char* n : names) {
    const PrimitiveSpec* spec = find_primitive(n);
    ASSERT_NE(spec, nullptr) << n;
    EXPECT_EQ(spec->family, "arithmetic") << n;
    EXPECT_FALSE(spec->help.empty()) << n;
    EXPECT_GT(spec->ns_per_element, 0.0) << n;
  }
}

TEST(ArithmeticParallel, CostModelTiles) {
  // A 1,000-element add stays one tile; a 10M-element add is cut up.
  EXPECT_EQ(tile_count(1000, kernels::cost_ns(BinaryOp::add)), 1);
  EXPECT_GT(tile_count(10'000'000, kernels::cost_ns(BinaryOp::add)), 1);
}

TEST(ArithmeticParallel, LargeAddMatchesSingleThreaded) {
  const int64_t n = 10'000'000;
  Array x(DType::float64, {n}), y(DType::float64, {n});
  for (int64_t i = 0; i < n; ++i) {
    x.data<double>()[i] = static_cast<double>(i) * 0.5;
    y.data<double>()[i] = 1.0 / static_cast<double>(i + 1);
  }
  Value got = call("add", {x, y});
  auto layout = kernels::make_broadcast<2>({x.shape(), y.shape()}, "add");
  Array want(DType::float64, {n});
  kernels::binary_range(BinaryOp::add, layout, x, y, want, 0, n, "add");
  ASSERT_EQ(got.as_array().shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.as_array().raw(), want.raw(), want.nbytes()), 0);
  EXPECT_EQ(got.as_array().data<double>()[n - 1], (n - 1) * 0.5 + 1.0 / n);
}

TEST(ArithmeticParallel, LargeBroadcastAndUnaryMatchSingleThreaded) {
  const int64_t rows = 4000, cols = 1000;
  Array x(DType::float32, {rows, cols}), col(DType::float32, {rows, 1});
  for (int64_t i = 0; i < rows * cols; ++i) x.data<float>()[i] = static_cast<float>(i % 977);
  for (int64_t r = 0; r < rows; ++r) col.data<float>()[r] = static_cast<float>(r);
  Value got = call("multiply", {x, col});
  auto layout = kernels::make_broadcast<2>({x.shape(), col.shape()}, "multiply");
  Array want(DType::float32, {rows, cols});
  kernels::binary_range(BinaryOp::multiply, layout, x, col, want, 0, rows * cols, "multiply");
  EXPECT_EQ(std::memcmp(got.as_array().raw(), want.raw(), want.nbytes()), 0);

  Value s = call("sin", {x});
  Array want_sin(DType::float32, {rows, cols});
  kernels::unary_range(UnaryOp::sin, x, want_sin, 0, rows * cols);
  EXPECT_EQ(std::memcmp(s.as_array().raw(), want_sin.raw(), want_sin.nbytes()), 0);
}

TEST(ArithmeticParallel, ErrorsInTilesReachTheCaller) {
  const int64_t n = 2'000'000;
  Array x = Array::full(DType::int64, {n}, 7.0), y = Array::full(DType::int64, {n}, 1.0);
  y.data<int64_t>()[n - 3] = 0;
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("floor_divide", {x, y}); },
                                                 "[floor_divide] integer division by zero"));
}
