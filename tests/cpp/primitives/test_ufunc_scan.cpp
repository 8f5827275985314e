// accumulate, reduce_op and accumulate_grad (ufunc_scan.cpp): numpy's
// ufunc.accumulate/reduce for maximum/minimum/fmax/fmin, logical_* and
// bitwise_*, checked against hand-computed values (the Python tests compare
// every op and dtype with NumPy); at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

Value op(const char* name) { return Value(std::string(name)); }

class UfuncScan : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    before_ = num_threads();
    set_num_threads(GetParam());
  }
  void TearDown() override { set_num_threads(before_); }
  int before_ = 1;
};

}  // namespace

TEST_P(UfuncScan, RunningMaxMinAndNaNRules) {
  Array x = f64({1, 3, kNaN, 2, 5, -1}, {6});
  EXPECT_TRUE(array_eq(call("accumulate", {x, op("maximum")}), DType::float64, {6},
                       {1, 3, kNaN, kNaN, kNaN, kNaN}));
  EXPECT_TRUE(array_eq(call("accumulate", {x, op("fmax")}), DType::float64, {6},
                       {1, 3, 3, 3, 5, 5}));
  EXPECT_TRUE(array_eq(call("accumulate", {x, op("fmin")}), DType::float64, {6},
                       {1, 1, 1, 1, 1, -1}));
  Array m = i64({3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
  EXPECT_TRUE(array_eq(call("accumulate", {m, op("minimum"), Value(int64_t{1})}), DType::int64,
                       {2, 4}, {3, 1, 1, 1, 5, 5, 2, 2}));
  EXPECT_TRUE(array_eq(call("accumulate", {m, op("maximum"), Value(int64_t{0})}), DType::int64,
                       {2, 4}, {3, 1, 4, 1, 5, 9, 4, 6}));
}

TEST_P(UfuncScan, LogicalAndBitwiseKeepNumpysDtypes) {
  Array x = f64({0.5, 0, kNaN, 2}, {4});
  EXPECT_TRUE(array_eq(call("accumulate", {x, op("logical_xor")}), DType::bool_, {4},
                       {1, 1, 0, 1}));
  EXPECT_TRUE(array_eq(call("accumulate", {x, op("logical_and")}), DType::bool_, {4},
                       {1, 0, 0, 0}));
  Array i8 = i64({12, 10, 7, -1}, {4}).astype(DType::int8);
  EXPECT_TRUE(array_eq(call("accumulate", {i8, op("bitwise_and")}), DType::int8, {4},
                       {12, 8, 0, 0}));
  EXPECT_TRUE(array_eq(call("accumulate", {i8, op("bitwise_or")}), DType::int8, {4},
                       {12, 14, 15, -1}));
  Array u8 = i64({200, 100, 250}, {3}).astype(DType::uint8);
  EXPECT_TRUE(array_eq(call("accumulate", {u8, op("maximum")}), DType::uint8, {3},
                       {200, 200, 250}));
  Array h = f64({1.5, -2, 3.25}, {3}).astype(DType::float16);
  EXPECT_TRUE(array_eq(call("accumulate", {h, op("minimum")}), DType::float16, {3},
                       {1.5, -2, -2}));
}

TEST_P(UfuncScan, ReduceWithIdentityInitialAndEmptyAxes) {
  Array m = i64({3, 1, 4, 1, 5, 9}, {2, 3});
  EXPECT_TRUE(array_eq(call("reduce_op", {m, op("bitwise_xor"), Value(int64_t{1})}),
                       DType::int64, {2}, {3 ^ 1 ^ 4, 1 ^ 5 ^ 9}));
  EXPECT_TRUE(array_eq(named("reduce_op", m, {{"", op("maximum")}, {"axis", Value(int64_t{0})},
                                             {"keepdims", Value(true)}}),
                       DType::int64, {1, 3}, {3, 5, 9}));
  EXPECT_TRUE(array_eq(named("reduce_op", m, {{"", op("fmax")}, {"axis", Value(int64_t{1})},
                                             {"initial", Value(int64_t{7})}}),
                       DType::int64, {2}, {7, 9}));
  Array empty(DType::float64, {3, 0});
  EXPECT_TRUE(array_eq(call("reduce_op", {empty, op("logical_and"), Value(int64_t{1})}),
                       DType::bool_, {3}, {1, 1, 1}));
  EXPECT_TRUE(array_eq(call("reduce_op", {empty.astype(DType::int16), op("bitwise_and"),
                                          Value(int64_t{1})}),
                       DType::int16, {3}, {-1, -1, -1}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("reduce_op", {empty, op("maximum"), Value(int64_t{1})}); },
      "zero-size array to reduction operation maximum which has no identity"));
  EXPECT_TRUE(array_eq(call("reduce_op", {empty, op("maximum"), Value(int64_t{0})}),
                       DType::float64, {0}, {}));
}

TEST_P(UfuncScan, ErrorsNameTheOperation) {
  Array x = f64({1, 2}, {2});
  EXPECT_TRUE(throws_with<TypeError>([&] { call("accumulate", {x, op("bitwise_or")}); },
                                     "ufunc 'bitwise_or' not supported for the input types"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("accumulate", {x, op("add")}); },
                                                 "unknown operation 'add'"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("accumulate", {f64({1}, {}), op("maximum")}); },
                                     "cannot accumulate on a scalar"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("accumulate", {x, op("maximum"), Value()}); }, "takes one integer axis"));
}

TEST_P(UfuncScan, RunningMaxGradientGoesToTheTakenPositions) {
  Array x = f64({1, 3, 2, 3, 5, 4}, {6});
  Array g = f64({1, 10, 100, 1000, 10000, 100000}, {6});
  // out = 1 3 3 3 5 5: positions 0 1 1 1 4 4 (a tie keeps the earlier 3)
  EXPECT_TRUE(array_eq(call("accumulate_grad", {g, x, op("maximum"), Value(int64_t{0})}),
                       DType::float64, {6}, {1, 1110, 0, 0, 110000, 0}));
  EXPECT_TRUE(array_eq(call("accumulate_grad", {g, x, op("minimum"), Value(int64_t{0})}),
                       DType::float64, {6}, {111111, 0, 0, 0, 0, 0}));
  Array m = f64({1, 5, 3, 2, 4, 6}, {2, 3});
  Array gm = f64({1, 1, 1, 1, 1, 1}, {2, 3});
  EXPECT_TRUE(array_eq(call("accumulate_grad", {gm, m, op("maximum"), Value(int64_t{0})}),
                       DType::float64, {2, 3}, {1, 2, 1, 1, 0, 1}));
}

TEST_P(UfuncScan, AtAppliesRepeatedPositionsInOrderInThePromotedDtype) {
  Array x = f64({1, 2, 3}, {3});
  Array pos = i64({0, 2, 0, 0}, {4});
  EXPECT_TRUE(array_eq(call("at_op", {x, pos, f64({2, 5, 3, 0.5}, {4}), op("multiply")}),
                       DType::float64, {3}, {3, 2, 15}));
  EXPECT_TRUE(array_eq(call("at_op", {x, pos, f64({2, kNaN, 3, 0.5}, {4}), op("fmax")}),
                       DType::float64, {3}, {3, 2, 3}));
  EXPECT_TRUE(array_eq(call("at_op", {x, pos, f64({2, kNaN, 3, 0.5}, {4}), op("maximum")}),
                       DType::float64, {3}, {3, 2, kNaN}));
  // bool ^ 3 computes in int64 and stores back each step: True, then True again
  Array b = b8({false, false});
  EXPECT_TRUE(array_eq(call("at_op", {b, i64({0, 0}, {2}), i64({3}, {}), op("bitwise_xor")}),
                       DType::bool_, {2}, {1, 0}));
  // int8: -3 + 1.5 twice is -1 then 0 (truncated each step), 127 + 1 wraps
  Array i8 = i64({-3, 127}, {2}).astype(DType::int8);
  EXPECT_TRUE(array_eq(call("at_op", {i8, i64({0, 0, 1}, {3}), f64({1.5}, {}), op("add")}),
                       DType::int8, {2}, {0, -128}));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] { call("at_op", {b, i64({0}, {1}), b8({true}), op("subtract")}); },
      "numpy boolean subtract"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { call("at_op", {x, i64({3}, {1}), f64({1}, {}), op("add")}); },
      "index 3 is out of bounds for axis 0 with size 3"));
  // negative positions count from the end
  EXPECT_TRUE(array_eq(call("at_op", {x, i64({-1, -3}, {2}), f64({10}, {}), op("add")}),
                       DType::float64, {3}, {11, 2, 13}));
}

TEST_P(UfuncScan, ReduceatFollowsNumpysRuleForIndices) {
  Array x = i64({0, 1, 2, 3, 4, 5, 6, 7}, {8}).astype(DType::int8);
  Array idx = i64({0, 4, 1, 5}, {4});
  // [0:4] [4] (4 >= 1: alone) [1:5] [5:]
  EXPECT_TRUE(array_eq(call("reduceat", {x, idx, op("add")}), DType::int64, {4},
                       {6, 4, 10, 18}));
  EXPECT_TRUE(array_eq(call("reduceat", {x, idx, op("maximum")}), DType::int8, {4},
                       {3, 4, 4, 7}));
  Array m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(array_eq(call("reduceat", {m, i64({0, 2}, {2}), op("multiply"), Value(int64_t{1})}),
                       DType::float64, {2, 2}, {2, 3, 20, 6}));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { call("reduceat", {x, i64({8}, {1}), op("add")}); },
      "index 8 out-of-bounds in add.reduceat [0, 8)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("reduceat", {x, idx, op("subtract")}); }, "unknown operation 'subtract'"));
}

INSTANTIATE_TEST_SUITE_P(Threads, UfuncScan, ::testing::Values(1, 2));
