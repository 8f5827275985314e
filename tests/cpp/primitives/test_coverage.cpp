// The primitives added for NumPy coverage (issue 15): bitwise, einsum, diff,
// cross, isin, quantiles, nan-reductions, ndindex, the generator and the
// LAPACK decompositions, checked against hand-computed values. The Python
// tests compare them with NumPy form by form; these pin the kernels down
// without Python.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "tessera/core/error.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/runtime/interrupt.hpp"
#include "tessera/runtime/parallel.hpp"
#include "test_util.hpp"

using namespace tessera;
using test::named;
using namespace tessera::test;

namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST(Bitwise, IntsBoolsAndShifts) {
  EXPECT_TRUE(array_eq(call("bitwise_and", {i64({12, -1, 7}), i64({10, 5, 0})}), DType::int64, {3},
                       {8, 5, 0}));
  EXPECT_TRUE(array_eq(call("bitwise_xor", {b8({true, false}), b8({true, true})}), DType::bool_,
                       {2}, {0, 1}));
  EXPECT_TRUE(array_eq(call("invert", {i64({5, -1})}), DType::int64, {2}, {-6, 0}));
  EXPECT_TRUE(array_eq(call("left_shift", {i64({1, -3, 1}), i64({4, 1, 64})}), DType::int64, {3},
                       {16, -6, 0}));
  EXPECT_TRUE(array_eq(call("right_shift", {i64({-16, 16}), i64({2, 70})}), DType::int64, {2},
                       {-4, 0}));
  EXPECT_EQ(call("bitwise_or", {Value(int64_t{5}), Value(int64_t{2})}).as_int(), 7);
  EXPECT_TRUE(throws_with<TypeError>([] { call("bitwise_and", {f64({1.0}), i64({1})}); },
                                     "only integer and bool"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("left_shift", {Value(int64_t{1}), Value(int64_t{-1})}); }, "negative shift"));
  EXPECT_TRUE(throws_with<std::overflow_error>(
      [] { call("left_shift", {Value(int64_t{3}), Value(int64_t{62})}); },
      "[left_shift] integer overflow: 3 << 62 does not fit in int64 (Python would give a big"));
}

TEST(Einsum, MatmulTraceDiagonalAndEllipsis) {
  Array a = f64({1, 2, 3, 4}, {2, 2});
  Array b = f64({5, 6, 7, 8}, {2, 2});
  EXPECT_TRUE(array_eq(call("einsum", {Value("ij,jk->ik"), a, b}), DType::float64, {2, 2},
                       {19, 22, 43, 50}));
  EXPECT_EQ(to_array(call("einsum", {Value("ii"), a}), "test").item(), 5.0);
  EXPECT_TRUE(array_eq(call("einsum", {Value("ii->i"), a}), DType::float64, {2}, {1, 4}));
  EXPECT_TRUE(array_eq(call("einsum", {Value("ij"), a}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("einsum", {Value("ji"), a}), DType::float64, {2, 2}, {1, 3, 2, 4}));
  EXPECT_TRUE(array_eq(call("einsum", {Value("...j,j->..."), a, f64({1, 1})}), DType::float64,
                       {2}, {3, 7}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("einsum", {Value("ij,jk->ik"), a, f64({1, 2, 3}, {3, 1})}); },
      "could not be broadcast"));
}

TEST(Differences, DiffAndCross) {
  EXPECT_TRUE(array_eq(call("diff", {f64({1, 4, 9, 16})}), DType::float64, {3}, {3, 5, 7}));
  EXPECT_TRUE(array_eq(named("diff", {{"", f64({1, 4, 9, 16})}, {"n", Value(int64_t{2})}}),
                       DType::float64, {2}, {2, 2}));
  EXPECT_TRUE(array_eq(named("diff", {{"", i64({3, 5})}, {"prepend", Value(int64_t{0})}}),
                       DType::int64, {2}, {3, 2}));
  EXPECT_TRUE(array_eq(call("cross", {f64({1, 0, 0}), f64({0, 1, 0})}), DType::float64, {3},
                       {0, 0, 1}));
}

TEST(SetsAndQuantiles, IsinPercentileNanReductions) {
  EXPECT_TRUE(array_eq(call("isin", {f64({1, kNan, 3}), f64({3, kNan})}), DType::bool_, {3},
                       {0, 0, 1}));
  EXPECT_TRUE(array_eq(call("percentile", {f64({1, 2, 3, 4}), Value(50.0)}), DType::float64, {},
                       {2.5}));
  EXPECT_TRUE(array_eq(call("quantile", {f64({1, 2, 3, 4}), f64({0.0, 1.0 / 3.0, 1.0})}),
                       DType::float64, {3}, {1, 2, 4}));
  EXPECT_TRUE(array_eq(call("nanmax", {f64({1, kNan, 3})}), DType::float64, {}, {3}));
  EXPECT_TRUE(array_eq(call("nanargmin", {f64({kNan, 2, 1})}), DType::int64, {}, {2}));
  EXPECT_TRUE(array_eq(call("nanvar", {f64({1, kNan, 3})}), DType::float64, {}, {1}));
  EXPECT_TRUE(array_eq(call("nanmedian", {f64({kNan, 5, 1, 3})}), DType::float64, {}, {3}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("nanargmax", {f64({kNan, kNan})}); }, "All-NaN slice"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("percentile", {f64({1, 2}), Value(101.0)}); }, "range [0, 100]"));
}

TEST(Iteration, Ndindex) {
  Value v = call("ndindex", {Value(List{Value(int64_t{2}), Value(int64_t{2})})});
  ASSERT_TRUE(v.is_list());
  ASSERT_EQ(v.as_list().size(), 4u);
  EXPECT_EQ(v.as_list()[2].as_list()[0].as_int(), 1);
  EXPECT_EQ(v.as_list()[2].as_list()[1].as_int(), 0);
}

TEST(Generator, DrawsAdvanceAndRepeatPerSeed) {
  Value rng = call("default_rng", {Value(int64_t{3})});
  Value a = call("rng_random", {rng, Value(int64_t{4})});
  Value b = call("rng_random", {rng, Value(int64_t{4})});
  EXPECT_NE(to_array(a, "t").get_double(0), to_array(b, "t").get_double(0));
  Value again = call("rng_random", {call("default_rng", {Value(int64_t{3})}), Value(int64_t{4})});
  EXPECT_EQ(to_array(a, "t").get_double(0), to_array(again, "t").get_double(0));
  EXPECT_TRUE(throws_with<TypeError>([] { call("rng_random", {f64({1.0})}); }, "generator"));
}

TEST(Decompositions, SvdQrCholeskySlogdetLstsq) {
  Array a = f64({4, 2, 2, 3}, {2, 2});
  Value s = named("svd", {{"", a}, {"compute_uv", Value(false)}});
  // Eigenvalues of a symmetric positive matrix are its singular values.
  double t = 3.5, d = std::sqrt(0.25 + 4.0);
  EXPECT_TRUE(array_eq(s, DType::float64, {2}, {t + d, t - d}));
  EXPECT_TRUE(array_eq(call("eigvalsh", {a}), DType::float64, {2}, {t - d, t + d}));
  Value l = call("cholesky", {a});
  EXPECT_TRUE(array_eq(l, DType::float64, {2, 2}, {2, 0, 1, std::sqrt(2.0)}));
  Value sl = call("slogdet", {a});
  EXPECT_EQ(to_array(sl.as_list()[0], "t").item(), 1.0);
  EXPECT_NEAR(to_array(sl.as_list()[1], "t").item(), std::log(8.0), 1e-12);
  Value qr = call("qr", {a});
  Value back = call("matmul", {qr.as_list()[0], qr.as_list()[1]});
  EXPECT_TRUE(array_eq(back, DType::float64, {2, 2}, {4, 2, 2, 3}, 1e-12, 1e-12));
  Value ls = call("lstsq", {f64({1, 0, 0, 1, 1, 1}, {3, 2}), f64({1, 2, 4})});
  EXPECT_TRUE(array_eq(ls.as_list()[0], DType::float64, {2}, {4.0 / 3.0, 7.0 / 3.0}, 1e-12));
  EXPECT_EQ(ls.as_list()[2].as_int(), 2);
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("cholesky", {f64({-1, 0, 0, -1}, {2, 2})}); }, "not positive definite"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("eig", {f64({0, -1, 1, 0}, {2, 2})}); },
                                     "complex results are not supported yet"));
}

TEST(Interrupt, LoopsAndTilesStop) {
  request_interrupt();
  EXPECT_TRUE(throws_with<Interrupted>([] { parallel_for(10, 1.0, [](int64_t, int64_t) {}); },
                                       "interrupted"));
  clear_interrupt();
  int calls = 0;
  parallel_for(10, 1.0, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(Interrupt, EndlessLoopsStopAndTheNextRunWorks) {
  for (const char* text : {"block(define(i, 0), while(true, define(i, i + 1)))",
                           "for_each(lambda(k, while(true, 1)), list(1, 2))"}) {
    clear_interrupt();
    Program endless(text);
    std::thread stopper([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      request_interrupt();
    });
    EXPECT_TRUE(throws_with<Interrupted>([&] { endless.run(); }, "interrupted")) << text;
    stopper.join();
    clear_interrupt();
    EXPECT_EQ(Program("1 + 2").run().as_int(), 3);
  }
}
