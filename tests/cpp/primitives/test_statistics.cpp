// Tests of the reduction and statistics primitives (statistics.cpp).
#include <cmath>
#include <cstring>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using test::kNaN;
using test::kInf;
using namespace tessera::test;

namespace {


// 0, 1, ..., 23 as a (2, 3, 4) array of the given dtype.
Array arange3(DType dt = DType::float64) {
  Array a(DType::float64, {2, 3, 4});
  for (int i = 0; i < 24; ++i) a.data<double>()[i] = i;
  return a.astype(dt);
}

// [[3, -1, 4], [1, -5, 9]] as int64.
Array small_ints() { return i64({3, -1, 4, 1, -5, 9}, {2, 3}); }

// axis as a list value, e.g. axes({0, 2}).
Value axes(std::vector<int64_t> v) {
  List l;
  for (int64_t a : v) l.push_back(Value(a));
  return l;
}

}  // namespace

TEST(StatisticsSum, AxesOn3d) {
  Array x = arange3();
  EXPECT_TRUE(array_eq(call("sum", {x}), DType::float64, {}, {276}));
  EXPECT_TRUE(array_eq(call("sum", {x, 0}), DType::float64, {3, 4},
                       {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}));
  EXPECT_TRUE(array_eq(call("sum", {x, 1}), DType::float64, {2, 4},
                       {12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_TRUE(array_eq(call("sum", {x, -1}), DType::float64, {2, 3}, {6, 22, 38, 54, 70, 86}));
  EXPECT_TRUE(array_eq(call("sum", {x, axes({0, 2})}), DType::float64, {3}, {60, 92, 124}));
  EXPECT_TRUE(array_eq(call("sum", {x, axes({2, -3})}), DType::float64, {3}, {60, 92, 124}));
  EXPECT_TRUE(array_eq(call("sum", {x, axes({})}), DType::float64, {2, 3, 4},
                       {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                        12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}));
}

TEST(StatisticsSum, Keepdims) {
  Array x = arange3();
  EXPECT_TRUE(array_eq(named("sum", x, {{"axis", axes({0, 2})}, {"keepdims", true}}),
                       DType::float64, {1, 3, 1}, {60, 92, 124}));
  EXPECT_TRUE(array_eq(named("sum", x, {{"keepdims", true}}), DType::float64, {1, 1, 1}, {276}));
  EXPECT_TRUE(array_eq(named("sum", x, {{"axis", 1}, {"keepdims", true}}), DType::float64,
                       {2, 1, 4}, {12, 15, 18, 21, 48, 51, 54, 57}));
}

TEST(StatisticsSum, Dtypes) {
  EXPECT_TRUE(array_eq(call("sum", {arange3(DType::int64), 2}), DType::int64, {2, 3},
                       {6, 22, 38, 54, 70, 86}));
  EXPECT_TRUE(array_eq(call("sum", {arange3(DType::float32), axes({0, 2})}), DType::float32, {3},
                       {60, 92, 124}));
  EXPECT_TRUE(array_eq(call("sum", {b8({true, false, true, true})}), DType::int64, {}, {3}));
  EXPECT_TRUE(array_eq(named("sum", f32({1.5f, 2.5f}), {{"dtype", "float64"}}), DType::float64,
                       {}, {4}));
  // dtype casts each element first, as NumPy does: 1.5 -> 1, 2.5 -> 2.
  EXPECT_TRUE(array_eq(named("sum", f64({1.5, 2.5}), {{"dtype", "int64"}}), DType::int64, {},
                       {3}));
  EXPECT_TRUE(array_eq(named("sum", b8({true, true}), {{"dtype", "bool"}}), DType::bool_, {},
                       {1}));
}

TEST(StatisticsSum, ScalarsZeroDAndEmpty) {
  // Full reductions give 0-d arrays, also for Python-like scalars.
  EXPECT_TRUE(array_eq(call("sum", {Value(int64_t{5})}), DType::int64, {}, {5}));
  EXPECT_TRUE(array_eq(call("sum", {Value(2.5)}), DType::float64, {}, {2.5}));
  EXPECT_TRUE(array_eq(call("sum", {Array::scalar(4.0, DType::float32)}), DType::float32, {},
                       {4}));
  EXPECT_TRUE(array_eq(call("sum", {Array(DType::float64, {0})}), DType::float64, {}, {0}));
  EXPECT_TRUE(array_eq(call("sum", {Array(DType::int64, {0, 3}), 0}), DType::int64, {3},
                       {0, 0, 0}));
  EXPECT_TRUE(array_eq(call("sum", {Array(DType::int64, {0, 3}), 1}), DType::int64, {0}, {}));
  EXPECT_TRUE(array_eq(call("prod", {Array(DType::float64, {0})}), DType::float64, {}, {1}));
  EXPECT_TRUE(array_eq(call("sum", {List{Value(1), Value(2), Value(3)}}), DType::int64, {}, {6}));
}

TEST(StatisticsSum, NaNAndOverflow) {
  EXPECT_TRUE(array_eq(call("sum", {f64({1, kNaN, 2})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(array_eq(call("nansum", {f64({1, kNaN, 2, kNaN, 4}, {5})}), DType::float64, {},
                       {7}));
  EXPECT_TRUE(array_eq(call("nansum", {f64({kNaN, kNaN, 1, kNaN}, {2, 2}), 1}), DType::float64,
                       {2}, {0, 1}));
  EXPECT_TRUE(array_eq(call("nansum", {i64({1, 2})}), DType::int64, {}, {3}));
  // int64 wraps on overflow like NumPy, with no undefined behaviour.
  Value big = call("sum", {i64({std::numeric_limits<int64_t>::max(), 1})});
  EXPECT_EQ(big.as_array().get_int(0), std::numeric_limits<int64_t>::min());
}

TEST(StatisticsSum, PairwiseIsAccurate) {
  // 1e6 copies of 0.1f: naive float32 accumulation drifts by ~1%, pairwise does not.
  Array x = Array::full(DType::float32, {1000000}, 0.1);
  double s = call("sum", {x}).as_array().get_double(0);
  EXPECT_NEAR(s, 100000.0, 1.0);
}

TEST(StatisticsSum, ThreadCountIndependent) {
  Array x(DType::float32, {1 << 20});
  uint32_t state = 12345;
  for (int64_t i = 0; i < x.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    x.data<float>()[i] = static_cast<float>(state >> 8) / 65536.0f - 128.0f;
  }
  Array y = x.reshaped({1024, 1024});
  int before = num_threads();
  std::vector<float> full, mean;
  std::vector<std::vector<float>> rows, cols;
  for (int t = 1; t <= 4; ++t) {
    set_num_threads(t);
    full.push_back(call("sum", {x}).as_array().data<float>()[0]);
    mean.push_back(call("mean", {x}).as_array().data<float>()[0]);
    Array r = call("sum", {y, 1}).as_array();
    Array c = call("sum", {y, 0}).as_array();
    rows.emplace_back(r.data<float>(), r.data<float>() + r.size());
    cols.emplace_back(c.data<float>(), c.data<float>() + c.size());
  }
  set_num_threads(before);
  for (int t = 1; t < 4; ++t) {
    EXPECT_EQ(std::memcmp(&full[0], &full[t], sizeof(float)), 0) << "threads " << t + 1;
    EXPECT_EQ(std::memcmp(&mean[0], &mean[t], sizeof(float)), 0) << "threads " << t + 1;
    EXPECT_EQ(std::memcmp(rows[0].data(), rows[t].data(), rows[0].size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(cols[0].data(), cols[t].data(), cols[0].size() * sizeof(float)), 0);
  }
  // The split reduction equals a plain pairwise sum (of the same lane, reshaped).
  float whole = call("sum", {x}).as_array().data<float>()[0];
  float again = call("sum", {y, axes({0, 1})}).as_array().data<float>()[0];
  EXPECT_EQ(std::memcmp(&whole, &again, sizeof(float)), 0);
}

TEST(StatisticsSum, Errors) {
  Array x = arange3();
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("sum", {x, 3}); },
                                             "[sum] axis 3 is out of bounds for array of dimension 3"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("sum", {x, -4}); },
                                             "[sum] axis -4 is out of bounds"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("sum", {Array::scalar(1.0), 0}); },
                                             "[sum] axis 0 is out of bounds for array of dimension 0"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("sum", {x, axes({0, -3})}); },
                                                 "[sum] duplicate value in 'axis': [0, -3]"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("sum", {x, 1.5}); },
                                     "[sum] argument 'axis' must be an int or a list of ints"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("sum", {Value("abc")}); },
                                     "[sum] argument 'x' must be a number or an array"));
  EXPECT_TRUE(throws_with<TypeError>([&] { named("sum", x, {{"dtype", "complex"}}); }, "[sum]"));
  EXPECT_TRUE(throws_with<TypeError>([&] { named("mean", x, {{"dtype", 3}}); },
                                     "[mean] argument 'dtype' must be a dtype name"));
}

TEST(StatisticsProd, Values) {
  Array y = small_ints();
  EXPECT_TRUE(array_eq(call("prod", {y}), DType::int64, {}, {540}));
  EXPECT_TRUE(array_eq(call("prod", {y, 0}), DType::int64, {3}, {3, 5, 36}));
  EXPECT_TRUE(array_eq(call("prod", {y, -1}), DType::int64, {2}, {-12, -45}));
  EXPECT_TRUE(array_eq(call("prod", {b8({true, false})}), DType::int64, {}, {0}));
  EXPECT_TRUE(array_eq(call("prod", {f32({0.5f, 4.0f, 3.0f})}), DType::float32, {}, {6}));
  EXPECT_TRUE(array_eq(named("prod", y, {{"axis", 1}, {"keepdims", true}, {"dtype", "float64"}}),
                       DType::float64, {2, 1}, {-12, -45}));
}

TEST(StatisticsMean, AxesAndDtypes) {
  Array x = arange3();
  EXPECT_TRUE(array_eq(call("mean", {x}), DType::float64, {}, {11.5}));
  EXPECT_TRUE(array_eq(call("mean", {x, 1}), DType::float64, {2, 4}, {4, 5, 6, 7, 16, 17, 18, 19}));
  EXPECT_TRUE(array_eq(call("mean", {x, -1}), DType::float64, {2, 3},
                       {1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
  EXPECT_TRUE(array_eq(call("mean", {x, axes({0, 2})}), DType::float64, {3}, {7.5, 11.5, 15.5}));
  EXPECT_TRUE(array_eq(call("mean", {arange3(DType::int64), 0}), DType::float64, {3, 4},
                       {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}));
  EXPECT_TRUE(array_eq(call("mean", {arange3(DType::float32)}), DType::float32, {}, {11.5}));
  EXPECT_TRUE(array_eq(call("mean", {b8({true, false, true, true})}), DType::float64, {}, {0.75}));
  EXPECT_TRUE(array_eq(named("mean", i64({1, 2}), {{"dtype", "float32"}}), DType::float32, {},
                       {1.5}));
  EXPECT_TRUE(array_eq(named("mean", x, {{"axis", 2}, {"keepdims", true}}), DType::float64,
                       {2, 3, 1}, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
}

TEST(StatisticsMean, EmptyIsNaN) {
  EXPECT_TRUE(array_eq(call("mean", {Array(DType::float64, {0})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(array_eq(call("mean", {Array(DType::int64, {0, 2}), 0}), DType::float64, {2},
                       {kNaN, kNaN}));
  EXPECT_TRUE(array_eq(call("mean", {Array::scalar_int(7)}), DType::float64, {}, {7}));
}

TEST(StatisticsNanmean, IgnoresNaN) {
  EXPECT_TRUE(array_eq(call("nanmean", {f64({1, kNaN, 3, kNaN, kNaN, kNaN}, {2, 3}), 1}),
                       DType::float64, {2}, {2, kNaN}));
  EXPECT_TRUE(array_eq(call("nanmean", {f32({1, kNaN, 4})}), DType::float32, {}, {2.5}));
  EXPECT_TRUE(array_eq(call("nanmean", {i64({1, 2})}), DType::float64, {}, {1.5}));
}

TEST(StatisticsVar, VarAndStd) {
  Array x = arange3();
  EXPECT_TRUE(array_eq(call("var", {x}), DType::float64, {}, {47.916666666666664}));
  EXPECT_TRUE(array_eq(call("var", {x, 0}), DType::float64, {3, 4},
                       {36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36}));
  EXPECT_TRUE(array_eq(call("var", {x, 1}), DType::float64, {2, 4},
                       {32.0 / 3, 32.0 / 3, 32.0 / 3, 32.0 / 3, 32.0 / 3, 32.0 / 3, 32.0 / 3,
                        32.0 / 3}));
  EXPECT_TRUE(array_eq(call("var", {x, -1}), DType::float64, {2, 3},
                       {1.25, 1.25, 1.25, 1.25, 1.25, 1.25}));
  EXPECT_TRUE(array_eq(call("var", {x, axes({0, 2})}), DType::float64, {3}, {37.25, 37.25, 37.25}));
  EXPECT_TRUE(array_eq(named("std", small_ints(), {{"axis", 1}, {"ddof", 1}}), DType::float64, {2},
                       {2.6457513110645907, 7.0237691685684931}));
  EXPECT_TRUE(array_eq(named("std", arange3(DType::float32), {{"axis", -1}, {"keepdims", true}}),
                       DType::float32, {2, 3, 1},
                       {1.118034, 1.118034, 1.118034, 1.118034, 1.118034, 1.118034}));
  // ddof >= n: NumPy divides by max(n - ddof, 0).
  EXPECT_TRUE(array_eq(named("var", f64({1, 2}), {{"ddof", 3}}), DType::float64, {}, {kInf}));
  EXPECT_TRUE(array_eq(named("var", f64({1}), {{"ddof", 1}}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(array_eq(call("var", {Array(DType::float64, {0})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(array_eq(call("var", {f64({1, kNaN})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(throws_with<TypeError>([&] { named("var", x, {{"ddof", "one"}}); },
                                     "[var] argument 'ddof' must be a number"));
}

TEST(StatisticsMinMax, Values) {
  Array y = small_ints();
  EXPECT_TRUE(array_eq(call("max", {y}), DType::int64, {}, {9}));
  EXPECT_TRUE(array_eq(call("min", {y}), DType::int64, {}, {-5}));
  EXPECT_TRUE(array_eq(call("amax", {y, 0}), DType::int64, {3}, {3, -1, 9}));
  EXPECT_TRUE(array_eq(call("amin", {y, -1}), DType::int64, {2}, {-1, -5}));
  Array x = arange3(DType::float32);
  EXPECT_TRUE(array_eq(call("max", {x, axes({0, 2})}), DType::float32, {3}, {15, 19, 23}));
  EXPECT_TRUE(array_eq(named("min", x, {{"axis", 1}, {"keepdims", true}}), DType::float32,
                       {2, 1, 4}, {0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_TRUE(array_eq(call("max", {b8({false, true})}), DType::bool_, {}, {1}));
  EXPECT_TRUE(array_eq(call("min", {Array::scalar(3.5)}), DType::float64, {}, {3.5}));
  EXPECT_TRUE(array_eq(call("max", {f64({1, kNaN, 3})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(array_eq(call("min", {f64({kInf, -kInf, 0})}), DType::float64, {}, {-kInf}));
  EXPECT_TRUE(array_eq(call("max", {Array(DType::float64, {0, 3}), 1}), DType::float64, {0}, {}));
}

TEST(StatisticsMinMax, EmptyIsError) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("max", {Array(DType::float64, {0})}); },
      "[max] zero-size array to reduction operation max which has no identity"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("amin", {Array(DType::int64, {2, 0}), 1}); },
      "[amin] zero-size array to reduction operation amin which has no identity: shape (2, 0)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("min", {Array(DType::int64, {0, 0}), 0}); }, "[min] zero-size array"));
}

TEST(StatisticsPtp, Values) {
  EXPECT_TRUE(array_eq(call("ptp", {small_ints()}), DType::int64, {}, {14}));
  EXPECT_TRUE(array_eq(call("ptp", {small_ints(), 0}), DType::int64, {3}, {2, 4, 5}));
  EXPECT_TRUE(array_eq(call("ptp", {f32({2, 7.5f, -1})}), DType::float32, {}, {8.5}));
  EXPECT_TRUE(array_eq(call("ptp", {f64({2, kNaN})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(throws_with<TypeError>([] { call("ptp", {b8({true, false})}); },
                                     "[ptp] bool arrays are not supported"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("ptp", {Array(DType::float64, {0})}); },
      "[ptp] zero-size array to reduction operation ptp which has no identity"));
}

TEST(StatisticsArgminArgmax, Values) {
  Array y = small_ints();
  EXPECT_TRUE(array_eq(call("argmax", {y}), DType::int64, {}, {5}));
  EXPECT_TRUE(array_eq(call("argmin", {y}), DType::int64, {}, {4}));
  EXPECT_TRUE(array_eq(call("argmax", {y, 0}), DType::int64, {3}, {0, 0, 1}));
  EXPECT_TRUE(array_eq(call("argmin", {y, -1}), DType::int64, {2}, {1, 1}));
  EXPECT_TRUE(array_eq(call("argmax", {arange3(), 1}), DType::int64, {2, 4}, {2, 2, 2, 2, 2, 2, 2, 2}));
  EXPECT_TRUE(array_eq(named("argmax", y, {{"axis", 1}, {"keepdims", true}}), DType::int64, {2, 1},
                       {2, 2}));
  EXPECT_TRUE(array_eq(named("argmin", y, {{"keepdims", true}}), DType::int64, {1, 1}, {4}));
  // Ties give the first position; NaN wins as the first extreme.
  EXPECT_TRUE(array_eq(call("argmax", {f64({1, 3, 3, 2})}), DType::int64, {}, {1}));
  EXPECT_TRUE(array_eq(call("argmin", {f64({1, kNaN, 0, kNaN})}), DType::int64, {}, {1}));
  EXPECT_TRUE(array_eq(call("argmax", {b8({false, true, true})}), DType::int64, {}, {1}));
  EXPECT_TRUE(array_eq(call("argmax", {Array::scalar(2.0)}), DType::int64, {}, {0}));
  EXPECT_TRUE(array_eq(call("argmax", {Array(DType::float64, {0, 3}), 1}), DType::int64, {0}, {}));
}

TEST(StatisticsArgminArgmax, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("argmax", {Array(DType::float64, {0})}); },
      "[argmax] attempt to get argmax of an empty sequence"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("argmin", {Array(DType::float64, {3, 0}), 1}); },
      "[argmin] attempt to get argmin of an empty sequence: shape (3, 0)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("argmax", {small_ints(), axes({0, 1})}); },
                                     "[argmax] argument 'axis' must be an integer"));
  EXPECT_TRUE(throws_with<std::out_of_range>([] { call("argmin", {small_ints(), 2}); },
                                             "[argmin] axis 2 is out of bounds"));
}

TEST(StatisticsAllAny, Values) {
  Array b = b8({true, false, true, true, true, true}, {2, 3});
  EXPECT_TRUE(array_eq(call("all", {b}), DType::bool_, {}, {0}));
  EXPECT_TRUE(array_eq(call("any", {b}), DType::bool_, {}, {1}));
  EXPECT_TRUE(array_eq(call("all", {b, 0}), DType::bool_, {3}, {1, 0, 1}));
  EXPECT_TRUE(array_eq(call("all", {b, -1}), DType::bool_, {2}, {0, 1}));
  EXPECT_TRUE(array_eq(call("any", {f64({0, 0, 0, 0.5}, {2, 2}), 1}), DType::bool_, {2}, {0, 1}));
  EXPECT_TRUE(array_eq(call("all", {f64({kNaN})}), DType::bool_, {}, {1}));
  EXPECT_TRUE(array_eq(call("all", {Array(DType::float64, {0})}), DType::bool_, {}, {1}));
  EXPECT_TRUE(array_eq(call("any", {Array(DType::float64, {0})}), DType::bool_, {}, {0}));
  EXPECT_TRUE(array_eq(named("any", arange3(DType::int64), {{"axis", axes({0, 2})}, {"keepdims", true}}),
                       DType::bool_, {1, 3, 1}, {1, 1, 1}));
}

TEST(StatisticsCountNonzero, Values) {
  Array y = i64({0, 1, 2, 0, 0, 3}, {2, 3});
  EXPECT_TRUE(array_eq(call("count_nonzero", {y}), DType::int64, {}, {3}));
  EXPECT_TRUE(array_eq(call("count_nonzero", {y, 0}), DType::int64, {3}, {0, 1, 2}));
  EXPECT_TRUE(array_eq(call("count_nonzero", {y, 1}), DType::int64, {2}, {2, 1}));
  EXPECT_TRUE(array_eq(call("count_nonzero", {f64({kNaN, 0, -0.0})}), DType::int64, {}, {1}));
  EXPECT_TRUE(array_eq(call("count_nonzero", {Array(DType::bool_, {0})}), DType::int64, {}, {0}));
}

TEST(StatisticsLogsumexp, StableValues) {
  Array y = small_ints();
  EXPECT_TRUE(array_eq(call("logsumexp", {y, 1}), DType::float64, {2},
                       {4.318175429247454, 9.000336243940787}));
  // Large values would overflow exp without the shift.
  EXPECT_TRUE(array_eq(call("logsumexp", {f64({1000, 1000})}), DType::float64, {},
                       {1000 + std::log(2.0)}));
  EXPECT_TRUE(array_eq(call("logsumexp", {f32({-1000, -1000})}), DType::float32, {},
                       {-1000 + std::log(2.0)}));
  EXPECT_TRUE(array_eq(call("logsumexp", {f64({-kInf, -kInf})}), DType::float64, {}, {-kInf}));
  EXPECT_TRUE(array_eq(call("logsumexp", {f64({kInf, 1})}), DType::float64, {}, {kInf}));
  EXPECT_TRUE(array_eq(call("logsumexp", {f64({kNaN, 1})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(array_eq(call("logsumexp", {Array(DType::float64, {0})}), DType::float64, {},
                       {-kInf}));
  EXPECT_TRUE(array_eq(named("logsumexp", f64({0, 0, 0, 0}, {2, 2}), {{"axis", 0}, {"keepdims", true}}),
                       DType::float64, {1, 2}, {std::log(2.0), std::log(2.0)}));
}

TEST(StatisticsMedian, Values) {
  Array y = small_ints();
  EXPECT_TRUE(array_eq(call("median", {y}), DType::float64, {}, {2}));
  EXPECT_TRUE(array_eq(call("median", {y, 0}), DType::float64, {3}, {2, -3, 6.5}));
  EXPECT_TRUE(array_eq(call("median", {y, -1}), DType::float64, {2}, {3, 1}));
  EXPECT_TRUE(array_eq(call("median", {arange3(DType::float32), axes({0, 2})}), DType::float32, {3},
                       {7.5, 11.5, 15.5}));
  EXPECT_TRUE(array_eq(call("median", {f64({5, kNaN, 1})}), DType::float64, {}, {kNaN}));
  EXPECT_TRUE(array_eq(call("median", {Array(DType::float64, {0, 2}), 0}), DType::float64, {2},
                       {kNaN, kNaN}));
  EXPECT_TRUE(array_eq(named("median", f64({4, 1, 3, 2}), {{"keepdims", true}}), DType::float64,
                       {1}, {2.5}));
}

TEST(StatisticsCumsum, Values) {
  Array y = small_ints();
  EXPECT_TRUE(array_eq(call("cumsum", {y}), DType::int64, {6}, {3, 2, 6, 7, 2, 11}));
  EXPECT_TRUE(array_eq(call("cumsum", {y, 0}), DType::int64, {2, 3}, {3, -1, 4, 4, -6, 13}));
  EXPECT_TRUE(array_eq(call("cumsum", {y, -1}), DType::int64, {2, 3}, {3, 2, 6, 1, -4, 5}));
  EXPECT_TRUE(array_eq(call("cumprod", {y}), DType::int64, {6}, {3, -3, -12, -12, 60, 540}));
  EXPECT_TRUE(array_eq(call("cumprod", {y, 1}), DType::int64, {2, 3}, {3, -3, -12, 1, -5, -45}));
  EXPECT_TRUE(array_eq(call("cumsum", {arange3(DType::float32), 1}), DType::float32, {2, 3, 4},
                       {0, 1, 2, 3, 4, 6, 8, 10, 12, 15, 18, 21,
                        12, 13, 14, 15, 28, 30, 32, 34, 48, 51, 54, 57}));
  EXPECT_TRUE(array_eq(call("cumsum", {b8({true, false, true})}), DType::int64, {3}, {1, 1, 2}));
  EXPECT_TRUE(array_eq(named("cumsum", i64({1, 2}), {{"dtype", "float32"}}), DType::float32, {2},
                       {1, 3}));
  EXPECT_TRUE(array_eq(call("cumsum", {Array::scalar(3.0)}), DType::float64, {1}, {3}));
  EXPECT_TRUE(array_eq(call("cumsum", {Array(DType::float64, {0, 2}), 0}), DType::float64, {0, 2},
                       {}));
  EXPECT_TRUE(array_eq(call("cumsum", {f64({1, kNaN, 2})}), DType::float64, {3}, {1, kNaN, kNaN}));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("cumsum", {y, axes({0, 1})}); },
                                     "[cumsum] argument 'axis' must be an integer"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("cumprod", {y, 2}); },
                                             "[cumprod] axis 2 is out of bounds"));
}

TEST(StatisticsAverage, Values) {
  Array y = small_ints();
  EXPECT_TRUE(array_eq(call("average", {y}), DType::float64, {}, {11.0 / 6}));
  EXPECT_TRUE(array_eq(named("average", y, {{"axis", 1}, {"weights", i64({1, 2, 3})}}),
                       DType::float64, {2}, {13.0 / 6, 3}));
  EXPECT_TRUE(array_eq(named("average", y, {{"weights", i64({1, 1, 1, 0, 0, 2}, {2, 3})}}),
                       DType::float64, {}, {4.8}));
  EXPECT_TRUE(array_eq(named("average", f32({1, 3}), {{"weights", f32({3, 1})}}), DType::float32,
                       {}, {1.5}));
  EXPECT_TRUE(array_eq(named("average", y,
                             {{"axis", 0}, {"weights", f64({1, 3})}, {"keepdims", true}}),
                       DType::float64, {1, 3}, {1.5, -4, 7.75}));
}

TEST(StatisticsAverage, Errors) {
  Array y = small_ints();
  EXPECT_TRUE(throws_with<TypeError>(
      [&] { named("average", y, {{"weights", f64({1, 2, 3})}}); },
      "[average] axis must be specified when shapes of x and weights differ: shapes (2, 3) and "
      "(3,)"));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] { named("average", y, {{"axis", 1}, {"weights", f64({1, 2, 3, 4, 5, 6}, {3, 2})}}); },
      "[average] 1-d weights along one axis expected"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { named("average", y, {{"axis", 1}, {"weights", f64({1, 2})}}); },
      "[average] length of weights not compatible with the axis: weights of shape (2,) for axis "
      "1 of shape (2, 3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { named("average", f64({1, 2}), {{"weights", f64({1, -1})}}); },
      "[average] weights sum to zero, can't be normalized"));
}

TEST(StatisticsRegistry, HelpAndSignatures) {
  for (const char* name : {"sum", "prod", "mean", "var", "std", "min", "amin", "max", "amax",
                           "argmin", "argmax", "all", "any", "cumsum", "cumprod", "logsumexp",
                           "ptp", "median", "count_nonzero", "nansum", "nanmean", "average"}) {
    const PrimitiveSpec* spec = find_primitive(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_EQ(spec->family, "statistics");
    EXPECT_FALSE(spec->help.empty()) << name;
  }
  EXPECT_EQ(find_primitive("sum")->signature(), "sum(x, axis=nil, keepdims=false, dtype=nil)");
  EXPECT_EQ(find_primitive("var")->signature(),
            "var(x, axis=nil, ddof=0, keepdims=false, dtype=nil)");
}

TEST(StatisticsPlan, SizeOneDimsAndMergedAxes) {
  // Size-1 dims are skipped and neighbouring axes of one kind merged; the
  // results must not notice.
  Array x = arange3().reshaped({2, 1, 3, 4});
  EXPECT_TRUE(array_eq(call("sum", {x, axes({0, 2})}), DType::float64, {1, 4}, {60, 66, 72, 78}));
  EXPECT_TRUE(array_eq(call("max", {x, axes({1, 3})}), DType::float64, {2, 3},
                       {3, 7, 11, 15, 19, 23}));
  Array y = arange3();
  EXPECT_TRUE(array_eq(call("sum", {y, axes({0, 1})}), DType::float64, {4}, {60, 66, 72, 78}));
  EXPECT_TRUE(array_eq(call("sum", {y, axes({1, 2})}), DType::float64, {2}, {66, 210}));
  EXPECT_TRUE(array_eq(call("median", {y, axes({0, 1})}), DType::float64, {4}, {10, 11, 12, 13}));
  EXPECT_TRUE(array_eq(call("var", {y, axes({0, 1})}), DType::float64, {4},
                       {140.0 / 3, 140.0 / 3, 140.0 / 3, 140.0 / 3}));
}

TEST(StatisticsPlan, StridedLanesGatheredInBlocks) {
  // Reducing axis 0 of a wide matrix gathers many strided lanes at once.
  Array m(DType::int64, {300, 200});
  for (int64_t i = 0; i < m.size(); ++i) m.data<int64_t>()[i] = (i / 200) * (i % 200 == 7 ? -1 : 1);
  Array s = call("sum", {m, 0}).as_array();
  Array am = call("argmax", {m, 0}).as_array();
  ASSERT_EQ(s.shape(), Shape{200});
  for (int64_t j = 0; j < 200; ++j) {
    EXPECT_EQ(s.get_int(j), j == 7 ? -44850 : 44850) << j;
    EXPECT_EQ(am.get_int(j), j == 7 ? 0 : 299) << j;
  }
}

TEST(StatisticsPlan, ColumnSumsHaveTheBitsOfLaneSums) {
  // sum, nansum and mean over leading axes run down many columns at once;
  // each column must take pairwise summation's additions in its order, so it
  // equals (bitwise) the same reduction of the transposed, contiguous lanes.
  // Lanes of 5 (fewer than 8), 100 (one block), 1000 and 4096 (split) rows,
  // 70 and 300 columns (more than one block), float32 and float64 and int64.
  uint32_t state = 99;
  for (int64_t rows : {5, 100, 1000, 4096}) {
    for (int64_t cols : {70, 300}) {
      Array x(DType::float64, {rows, cols});
      for (int64_t i = 0; i < x.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        x.data<double>()[i] = static_cast<double>(state >> 8) / 65536.0 - 128.0;
      }
      x.data<double>()[3 * cols + 2] = kNaN;
      for (DType dt : {DType::float32, DType::float64, DType::int64}) {
        Array xt = x.astype(dt);
        Array lanes = call("transpose", {xt}).as_array().copy();
        for (const char* op : {"sum", "nansum", "mean"}) {
          Array by_columns = call(op, {xt, 0}).as_array();
          Array by_lanes = call(op, {lanes, 1}).as_array();
          ASSERT_EQ(by_columns.shape(), Shape{cols});
          EXPECT_EQ(std::memcmp(by_columns.raw(), by_lanes.raw(), by_columns.nbytes()), 0)
              << op << " " << dtype_name(dt) << " " << rows << "x" << cols;
        }
      }
    }
  }
  // (batch, steps, features) summed over batch and steps, as a bias's
  // gradient is: against float64 sums of the same values.
  Array g(DType::float32, {4, 33, 20});
  for (int64_t i = 0; i < g.size(); ++i) g.data<float>()[i] = static_cast<float>(i % 17) - 8.5f;
  std::vector<double> expected(20, 0.0);
  for (int64_t i = 0; i < g.size(); ++i) expected[i % 20] += g.get_double(i);
  EXPECT_TRUE(array_eq(call("sum", {g, axes({0, 1})}), DType::float32, {20}, expected));
}
