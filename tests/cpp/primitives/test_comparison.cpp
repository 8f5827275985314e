#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "test_util.hpp"

using namespace tessera;
using test::named;
using test::kNaN;
using test::kInf;
using namespace tessera::test;

namespace {


}  // namespace

TEST(ComparisonOrdering, EachOpOnFloats) {
  Array a = f64({1, 2, 3, kNaN}), b = f64({2, 2, 2, kNaN});
  EXPECT_TRUE(array_eq(call("equal", {a, b}), DType::bool_, {4}, {0, 1, 0, 0}));
  EXPECT_TRUE(array_eq(call("not_equal", {a, b}), DType::bool_, {4}, {1, 0, 1, 1}));
  EXPECT_TRUE(array_eq(call("less", {a, b}), DType::bool_, {4}, {1, 0, 0, 0}));
  EXPECT_TRUE(array_eq(call("less_equal", {a, b}), DType::bool_, {4}, {1, 1, 0, 0}));
  EXPECT_TRUE(array_eq(call("greater", {a, b}), DType::bool_, {4}, {0, 0, 1, 0}));
  EXPECT_TRUE(array_eq(call("greater_equal", {a, b}), DType::bool_, {4}, {0, 1, 1, 0}));
}

TEST(ComparisonOrdering, IntsBoolsFloat32AndMixedDtypes) {
  EXPECT_TRUE(array_eq(call("less", {i64({-1, 5, 3}), i64({0, 5, 2})}), DType::bool_, {3},
                       {1, 0, 0}));
  EXPECT_TRUE(array_eq(call("greater", {b8({true, false}), b8({false, false})}), DType::bool_,
                       {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("equal", {f32({0.5f, 1}), Value(0.5)}), DType::bool_, {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("equal", {i64({1, 2}), f64({1.0, 2.5})}), DType::bool_, {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("less", {i64({1, 2}), Value(1.5)}), DType::bool_, {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("equal", {b8({true, false}), Value(int64_t{1})}), DType::bool_, {2},
                       {1, 0}));
}

TEST(ComparisonOrdering, BroadcastZeroDAndEmpty) {
  EXPECT_TRUE(array_eq(call("less", {i64({1, 2, 3}, {3, 1}), i64({2, 3}, {1, 2})}), DType::bool_,
                       {3, 2}, {1, 1, 0, 1, 0, 0}));
  EXPECT_TRUE(array_eq(call("greater_equal", {Array::scalar(2.0), f64({1, 2, 3})}), DType::bool_,
                       {3}, {1, 1, 0}));
  EXPECT_TRUE(array_eq(call("equal", {Array::scalar_int(4), Value(int64_t{4})}), DType::bool_, {},
                       {1}));
  EXPECT_TRUE(array_eq(call("not_equal", {Array(DType::float64, {0, 2}), f64({1, 2})}),
                       DType::bool_, {0, 2}, {}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("less", {f64({1, 2}), f64({1, 2, 3})}); },
      "[less] operands could not be broadcast together: shapes (2,) and (3,)"));
}

TEST(ComparisonScalar, PythonScalarsGiveBools) {
  Value r = call("less", {Value(int64_t{1}), Value(int64_t{2})});
  ASSERT_TRUE(r.is_bool());
  EXPECT_TRUE(r.as_bool());
  EXPECT_TRUE(call("equal", {Value(int64_t{1}), Value(1.0)}).as_bool());
  EXPECT_FALSE(call("equal", {Value(kNaN), Value(kNaN)}).as_bool());
  EXPECT_TRUE(call("not_equal", {Value(kNaN), Value(kNaN)}).as_bool());
  EXPECT_TRUE(call("greater_equal", {Value(true), Value(int64_t{1})}).as_bool());
  EXPECT_FALSE(call("greater", {Value(2.5), Value(int64_t{3})}).as_bool());
  EXPECT_TRUE(call("less_equal", {Value(int64_t{-3}), Value(int64_t{-3})}).as_bool());
  Value c = binary_op(BinaryOp::not_equal, Value(int64_t{2}), Value(int64_t{3}));
  ASSERT_TRUE(c.is_bool());
  EXPECT_TRUE(c.as_bool());
}

TEST(ComparisonLogic, TruthOfEachDtype) {
  EXPECT_TRUE(array_eq(call("logical_and", {b8({true, true, false}), b8({true, false, false})}),
                       DType::bool_, {3}, {1, 0, 0}));
  EXPECT_TRUE(array_eq(call("logical_or", {i64({0, 2, 0}), f64({0, 0, 0.5})}), DType::bool_, {3},
                       {0, 1, 1}));
  EXPECT_TRUE(array_eq(call("logical_xor", {f32({1, 0, 1}), Value(true)}), DType::bool_, {3},
                       {0, 1, 0}));
  EXPECT_TRUE(array_eq(call("logical_and", {f64({kNaN, 0}), Value(int64_t{1})}), DType::bool_,
                       {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("logical_or", {b8({true, false}, {2, 1}), b8({false, false})}),
                       DType::bool_, {2, 2}, {1, 1, 0, 0}));
  EXPECT_TRUE(array_eq(call("logical_not", {f32({0, 2})}), DType::bool_, {2}, {1, 0}));
  Value s = call("logical_and", {Value(int64_t{2}), Value(0.0)});
  ASSERT_TRUE(s.is_bool());
  EXPECT_FALSE(s.as_bool());
  EXPECT_TRUE(call("logical_or", {Value(int64_t{0}), Value(0.5)}).as_bool());
  EXPECT_TRUE(call("logical_xor", {Value(true), Value(false)}).as_bool());
  EXPECT_FALSE(call("logical_not", {Value(3.0)}).as_bool());
}

TEST(ComparisonIsclose, TolerancesInfAndNaN) {
  Array a = f64({1, 1 + 1e-6, 1.1, kInf, kNaN, -kInf});
  Array b = f64({1, 1, 1, kInf, kNaN, kInf});
  EXPECT_TRUE(array_eq(call("isclose", {a, b}), DType::bool_, {6}, {1, 1, 0, 1, 0, 0}));
  EXPECT_TRUE(array_eq(named("isclose", {{"", a}, {"", b}, {"equal_nan", true}}), DType::bool_,
                       {6}, {1, 1, 0, 1, 1, 0}));
  EXPECT_TRUE(array_eq(named("isclose", {{"", a}, {"", b}, {"rtol", 0.2}}), DType::bool_, {6},
                       {1, 1, 1, 1, 0, 0}));
  EXPECT_TRUE(array_eq(named("isclose", {{"", f64({0, 1e-9})}, {"", Value(0.0)}, {"atol", 0.0}}),
                       DType::bool_, {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("isclose", {i64({1, 2}, {2, 1}), f32({1, 2})}), DType::bool_, {2, 2},
                       {1, 0, 0, 1}));
  Value s = call("isclose", {Value(1.0), Value(1.0 + 1e-9)});
  ASSERT_TRUE(s.is_bool());
  EXPECT_TRUE(s.as_bool());
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("isclose", {{"", Value(1.0)}, {"", Value(1.0)}, {"rtol", -1.0}}); },
      "[isclose] argument 'rtol' must be a finite non-negative number, got -1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("isclose", {{"", Value(1.0)}, {"", Value(1.0)}, {"atol", kNaN}}); },
      "[isclose] argument 'atol' must be a finite non-negative number"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { named("isclose", {{"", Value(1.0)}, {"", Value(1.0)}, {"rtol", "big"}}); },
      "[isclose] argument 'rtol' must be a number, got string 'big'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("isclose", {Value("x"), Value(1.0)}); },
                                     "[isclose] argument 'a' must be a number or an array"));
}

TEST(ComparisonAllclose, SingleBool) {
  Value t = call("allclose", {f64({1, 2, 3}), f64({1, 2, 3 + 1e-7})});
  ASSERT_TRUE(t.is_bool());
  EXPECT_TRUE(t.as_bool());
  EXPECT_FALSE(call("allclose", {f64({1, 2, 3}), f64({1, 2, 3.1})}).as_bool());
  EXPECT_TRUE(call("allclose", {f64({2, 2}), Value(int64_t{2})}).as_bool());
  EXPECT_FALSE(call("allclose", {f64({kNaN}, {1}), f64({kNaN}, {1})}).as_bool());
  EXPECT_TRUE(
      named("allclose", {{"", f64({kNaN}, {1})}, {"", f64({kNaN}, {1})}, {"equal_nan", true}})
          .as_bool());
  EXPECT_TRUE(call("allclose", {Array(DType::float64, {0}), Value(1.0)}).as_bool());
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("allclose", {f64({1, 2}), f64({1, 2, 3})}); },
      "[allclose] operands could not be broadcast together: shapes (2,) and (3,)"));
}

TEST(ComparisonArrayEqual, ShapesDtypesAndNaN) {
  Value t = call("array_equal", {i64({1, 2}), f64({1, 2})});
  ASSERT_TRUE(t.is_bool());
  EXPECT_TRUE(t.as_bool());
  EXPECT_FALSE(call("array_equal", {i64({1, 2}), i64({1, 3})}).as_bool());
  EXPECT_FALSE(call("array_equal", {i64({1, 2}), i64({1, 2}, {2, 1})}).as_bool());
  EXPECT_FALSE(call("array_equal", {f64({1}, {1}), f64({1, 1})}).as_bool());
  EXPECT_FALSE(call("array_equal", {f64({1, kNaN}), f64({1, kNaN})}).as_bool());
  EXPECT_TRUE(named("array_equal", {{"", f64({1, kNaN})}, {"", f64({1, kNaN})},
                                    {"equal_nan", true}})
                  .as_bool());
  EXPECT_FALSE(named("array_equal", {{"", f64({1, kNaN})}, {"", f64({kNaN, 1})},
                                     {"equal_nan", true}})
                   .as_bool());
  EXPECT_TRUE(
      call("array_equal", {Array(DType::int64, {0}), Array(DType::float32, {0})}).as_bool());
  EXPECT_TRUE(call("array_equal", {Value(int64_t{3}), Value(3.0)}).as_bool());
  EXPECT_TRUE(throws_with<TypeError>([] { call("array_equal", {Value("a"), Value(1.0)}); },
                                     "[array_equal] argument 'a1' must be a number or an array"));
}

TEST(ComparisonErrors, OperandTypes) {
  EXPECT_TRUE(throws_with<TypeError>([] { call("equal", {Value("a"), Array::scalar_int(1)}); },
                                     "[equal] argument 'x' must be a number or an array, got "
                                     "string 'a'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("logical_and", {b8({true}, {1}), Value()}); },
                                     "[logical_and] argument 'y' must be a number or an array, "
                                     "got nil"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("logical_not", {Value("s")}); },
                                     "[logical_not] argument 'x' must be a number or an array"));
}

TEST(ComparisonRegistry, EveryPrimitiveHasHelp) {
  const char* names[] = {"equal",      "not_equal",   "less",        "less_equal",
                         "greater",    "greater_equal", "logical_and", "logical_or",
                         "logical_xor", "logical_not", "isclose",     "allclose",
                         "array_equal"};
  for (const char* n : names) {
    const PrimitiveSpec* spec = find_primitive(n);
    ASSERT_NE(spec, nullptr) << n;
    EXPECT_EQ(spec->family, "comparison") << n;
    EXPECT_FALSE(spec->help.empty()) << n;
  }
}
