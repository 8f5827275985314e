// Tests of the matrix primitives against hand-computed values, and of every
// error they raise.
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "test_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/runtime/parallel.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;
using test::named;
using test::kInf;
using namespace tessera::test;

namespace {


// Restores the runtime's thread count when a test changes it.
struct ThreadCountGuard {
  int saved = num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

// Deterministic pseudo-random values in [-1, 1).
std::vector<double> noise(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53) * 2.0 - 1.0;
  }
  return v;
}

std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b,
                                 int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * b[p * n + j];
      c[i * n + j] = s;
    }
  }
  return c;
}

}  // namespace

TEST(MatrixMatmul, TwoByTwoDimensionalEveryDtype) {
  EXPECT_TRUE(array_eq(call("matmul", {f64({1, 2, 3, 4, 5, 6}, {2, 3}),
                                       f64({7, 8, 9, 10, 11, 12}, {3, 2})}),
                       DType::float64, {2, 2}, {58, 64, 139, 154}));
  EXPECT_TRUE(array_eq(call("matmul", {f32({1, 2, 3, 4, 5, 6}, {2, 3}),
                                       f32({7, 8, 9, 10, 11, 12}, {3, 2})}),
                       DType::float32, {2, 2}, {58, 64, 139, 154}));
  EXPECT_TRUE(array_eq(call("matmul", {i64({1, 2, 3, 4, 5, 6}, {2, 3}),
                                       i64({7, 8, 9, 10, 11, 12}, {3, 2})}),
                       DType::int64, {2, 2}, {58, 64, 139, 154}));
  // Mixed dtypes promote first: int64 with float32 is float64.
  EXPECT_TRUE(array_eq(call("matmul", {i64({1, 2}, {1, 2}), f32({3, 4}, {2, 1})}),
                       DType::float64, {1, 1}, {11}));
  // Nested lists are arrays.
  EXPECT_TRUE(array_eq(call("matmul", {Value(List{List{1, 2}}), Value(List{List{3}, List{4}})}),
                       DType::int64, {1, 1}, {11}));
}

TEST(MatrixMatmul, OneDimensionalOperands) {
  Value m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(array_eq(call("matmul", {f64({1, 2}), m}), DType::float64, {3}, {9, 12, 15}));
  EXPECT_TRUE(array_eq(call("matmul", {m, f64({1, 0, -1})}), DType::float64, {2}, {-2, -2}));
  EXPECT_TRUE(array_eq(call("matmul", {f64({1, 2, 3}), f64({4, 5, 6})}), DType::float64, {}, {32}));
  EXPECT_TRUE(array_eq(call("matmul", {i64({1, 2, 3}), i64({4, 5, 6})}), DType::int64, {}, {32}));
  // A 1-d operand against a stack: the stack's batch dims survive.
  EXPECT_TRUE(array_eq(call("matmul", {f64({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2}), f64({1, 2})}),
                       DType::float64, {2, 2}, {1, 2, 2, 4}));
}

TEST(MatrixMatmul, BatchedAndBroadcastBatchDims) {
  Value a = f64({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});
  EXPECT_TRUE(array_eq(call("matmul", {a, f64({1, 2, 3, 4}, {2, 2})}), DType::float64, {2, 2, 2},
                       {1, 2, 3, 4, 2, 4, 6, 8}));
  // (2, 1, 1, 2) @ (3, 2, 1): batch dims (2, 1) and (3,) broadcast to (2, 3).
  Value x = f64({1, 2, 3, 4}, {2, 1, 1, 2});
  Value y = f64({1, 0, 0, 1, 1, 1}, {3, 2, 1});
  EXPECT_TRUE(array_eq(call("matmul", {x, y}), DType::float64, {2, 3, 1, 1}, {1, 2, 3, 3, 4, 7}));
  EXPECT_TRUE(array_eq(call("matmul", {i64({1, 2, 3, 4}, {2, 1, 1, 2}), i64({1, 0, 0, 1, 1, 1},
                                                                           {3, 2, 1})}),
                       DType::int64, {2, 3, 1, 1}, {1, 2, 3, 3, 4, 7}));
}

TEST(MatrixMatmul, BoolIsOrOfAnds) {
  Value r = call("matmul", {b8({true, false, false, true}, {2, 2}),
                            b8({true, true, false, false}, {2, 2})});
  EXPECT_TRUE(array_eq(r, DType::bool_, {2, 2}, {1, 1, 0, 0}));
  r = call("matmul", {b8({true, true}, {1, 2}), b8({true, false, true, false}, {2, 2})});
  EXPECT_TRUE(array_eq(r, DType::bool_, {1, 2}, {1, 0}));
}

TEST(MatrixMatmul, EmptyOperands) {
  EXPECT_TRUE(array_eq(call("matmul", {Array(DType::float64, {0, 3}), f64({1, 2, 3, 4, 5, 6},
                                                                          {3, 2})}),
                       DType::float64, {0, 2}, {}));
  // k = 0: the sum over an empty axis is zero.
  EXPECT_TRUE(array_eq(call("matmul", {Array(DType::float64, {2, 0}),
                                       Array(DType::float64, {0, 3})}),
                       DType::float64, {2, 3}, {0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(array_eq(call("matmul", {Array(DType::int64, {2, 0}), Array(DType::int64, {0, 1})}),
                       DType::int64, {2, 1}, {0, 0}));
  EXPECT_TRUE(array_eq(call("matmul", {Array(DType::float32, {1, 0}), Array(DType::float32, {0})}),
                       DType::float32, {1}, {0}));
}

TEST(MatrixMatmul, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matmul", {Array(DType::float64, {2, 3}), Array(DType::float64, {4, 5})}); },
      "[matmul] shapes (2, 3) and (4, 5) are not aligned: 3 (dim 1) != 4 (dim 0)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matmul", {Array(DType::float64, {3}), Array(DType::float64, {2, 4, 5})}); },
      "[matmul] shapes (3,) and (2, 4, 5) are not aligned: 3 (dim 0) != 4 (dim 1)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matmul", {Value(2.0), Array(DType::float64, {2})}); },
      "[matmul] operand 0 is 0-d (a scalar)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matmul", {Array(DType::float64, {2}), Array::scalar(1.0)}); },
      "[matmul] operand 1 is 0-d"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matmul", {Array(DType::float64, {2, 3, 4}), Array(DType::float64, {5, 4, 2})}); },
      "[matmul] batch dimensions could not be broadcast together: shapes (2, 3, 4) and (5, 4, 2)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("matmul", {Value("a"), f64({1})}); },
                                     "[matmul] argument 'x' must be a number or an array"));
  // The backward primitives check their operands too (a 0-d x once crashed).
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matmul_grad_y", {Array(DType::float64, {0, 3}), false, f64({1, 0, 0, 1}, {2, 2})}); },
      "[matmul_grad_y] x and y must have at least 1 dimension (matmul's operands), got shapes () "
      "and (2, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matmul_grad_x", {Value(1.0), f64({1, 2}, {2}), Value(2.0)}); },
      "[matmul_grad_x] x and y must have at least 1 dimension"));
  // A 0-d g for a batch of rows times a matrix once read past its shape.
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] {
        call("matmul_grad_y", {Value(0.0), Array::full(DType::float32, {2, 1, 3}, 1.0),
                               f64({1, 0, 0, 1, 0, 0}, {3, 2})});
      },
      "[matmul_grad_y] the cotangent g has shape () but matmul's result for x of shape "
      "(2, 1, 3) has 3 dimensions"));
}

TEST(MatrixMatmul, LargeFloat64MatchesNaiveLoopWithOneAndTwoThreads) {
  ThreadCountGuard guard;
  const int64_t n = 300;
  std::vector<double> a = noise(n * n, 1), b = noise(n * n, 2);
  std::vector<double> expected = naive_matmul(a, b, n, n, n);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Value r = call("matmul", {f64(a, {n, n}), f64(b, {n, n})});
    EXPECT_TRUE(array_eq(r, DType::float64, {n, n}, expected, 0.0, 1e-10)) << threads;
  }
}

TEST(MatrixMatmul, LargeBatchedFloat32AndInt64MatchNaiveLoop) {
  ThreadCountGuard guard;
  set_num_threads(2);
  // Three 70x90 @ 90x130 products: tiles of output rows cross matrix boundaries.
  const int64_t bs = 3, m = 70, k = 90, n = 130;
  std::vector<double> a = noise(bs * m * k, 3), b = noise(bs * k * n, 4);
  std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
  std::vector<int64_t> ai, bi;
  for (double v : a) ai.push_back(static_cast<int64_t>(v * 100));
  for (double v : b) bi.push_back(static_cast<int64_t>(v * 100));
  std::vector<double> ef, ei;
  for (int64_t t = 0; t < bs; ++t) {
    std::vector<double> sa(af.begin() + t * m * k, af.begin() + (t + 1) * m * k);
    std::vector<double> sb(bf.begin() + t * k * n, bf.begin() + (t + 1) * k * n);
    auto c = naive_matmul(sa, sb, m, k, n);
    ef.insert(ef.end(), c.begin(), c.end());
    std::vector<double> ia(ai.begin() + t * m * k, ai.begin() + (t + 1) * m * k);
    std::vector<double> ib(bi.begin() + t * k * n, bi.begin() + (t + 1) * k * n);
    auto ci = naive_matmul(ia, ib, m, k, n);
    ei.insert(ei.end(), ci.begin(), ci.end());
  }
  EXPECT_TRUE(array_eq(call("matmul", {f32(af, {bs, m, k}), f32(bf, {bs, k, n})}), DType::float32,
                       {bs, m, n}, ef, 1e-4, 1e-4));
  EXPECT_TRUE(array_eq(call("matmul", {i64(ai, {bs, m, k}), i64(bi, {bs, k, n})}), DType::int64,
                       {bs, m, n}, ei, 0.0, 0.0));
}

TEST(MatrixMatmul, LargeIntAndBoolCrossTheLoopBlocks) {
  // k = 300 and n = 600 exceed one (128, 512) block of the integer loop.
  const int64_t m = 5, k = 300, n = 600;
  std::vector<double> a = noise(m * k, 5), b = noise(k * n, 6);
  std::vector<int64_t> ai, bi;
  std::vector<bool> ab, bb;
  for (double v : a) {
    ai.push_back(static_cast<int64_t>(v * 1000));
    ab.push_back(v > 0.9);
  }
  for (double v : b) {
    bi.push_back(static_cast<int64_t>(v * 1000));
    bb.push_back(v > 0.9);
  }
  std::vector<double> ad(ai.begin(), ai.end()), bd(bi.begin(), bi.end());
  std::vector<double> abd(ab.begin(), ab.end()), bbd(bb.begin(), bb.end());
  EXPECT_TRUE(array_eq(call("matmul", {i64(ai, {m, k}), i64(bi, {k, n})}), DType::int64, {m, n},
                       naive_matmul(ad, bd, m, k, n), 0.0, 0.0));
  std::vector<double> eb = naive_matmul(abd, bbd, m, k, n);
  for (double& v : eb) v = v > 0 ? 1 : 0;
  EXPECT_TRUE(array_eq(call("matmul", {b8(ab, {m, k}), b8(bb, {k, n})}), DType::bool_, {m, n}, eb));
}

TEST(MatrixDot, Scalars) {
  Value r = call("dot", {Value(3), Value(4)});
  ASSERT_TRUE(r.is_int());
  EXPECT_EQ(r.as_int(), 12);
  r = call("dot", {Value(2.5), Value(2)});
  ASSERT_TRUE(r.is_float());
  EXPECT_EQ(r.as_float(), 5.0);
  r = call("dot", {Value(true), Value(false)});
  ASSERT_TRUE(r.is_bool());
  EXPECT_FALSE(r.as_bool());
  // A Python scalar promotes weakly: float32 stays float32.
  EXPECT_TRUE(array_eq(call("dot", {Value(2), f32({1, 2})}), DType::float32, {2}, {2, 4}));
  EXPECT_TRUE(array_eq(call("dot", {i64({1, 2}, {2, 1}), Array::scalar(0.5)}), DType::float64,
                       {2, 1}, {0.5, 1}));
}

TEST(MatrixDot, VectorsMatricesAndNd) {
  EXPECT_TRUE(array_eq(call("dot", {f64({1, 2, 3}), f64({4, 5, 6})}), DType::float64, {}, {32}));
  EXPECT_TRUE(array_eq(call("dot", {i64({1, 2, 3, 4, 5, 6}, {2, 3}), i64({7, 8, 9, 10, 11, 12},
                                                                          {3, 2})}),
                       DType::int64, {2, 2}, {58, 64, 139, 154}));
  // N-d x 1-d: sum over the last axis of x.
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i + 1;
  EXPECT_TRUE(array_eq(call("dot", {f64(v, {2, 2, 3}), f64({1, 1, 1})}), DType::float64, {2, 2},
                       {6, 15, 24, 33}));
  // N-d x M-d: dot(a, b)[i, j, n] = sum_k a[i, k] b[j, k, n].
  Value a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Value b = f64({1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 3, 2});
  EXPECT_TRUE(array_eq(call("dot", {a, b}), DType::float64, {2, 2, 2},
                       {4, 5, 6, 6, 10, 11, 15, 15}));
  // 1-d x N-d.
  EXPECT_TRUE(array_eq(call("dot", {f64({1, 2, 3}), b}), DType::float64, {2, 2}, {4, 5, 6, 6}));
  EXPECT_TRUE(array_eq(call("dot", {f64({}, {2, 0}), f64({}, {0, 3})}), DType::float64, {2, 3},
                       {0, 0, 0, 0, 0, 0}));
}

TEST(MatrixDot, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("dot", {Array(DType::float64, {2, 3}), Array(DType::float64, {4, 5})}); },
      "[dot] shapes (2, 3) and (4, 5) are not aligned: 3 (dim 1) != 4 (dim 0)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("dot", {Array(DType::float64, {2, 3}), Array(DType::float64, {2})}); },
      "[dot] shapes (2, 3) and (2,) are not aligned: 3 (dim 1) != 2 (dim 0)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("dot", {Array(DType::float64, {3}), Array(DType::float64, {2, 4, 5})}); },
      "[dot] shapes (3,) and (2, 4, 5) are not aligned: 3 (dim 0) != 4 (dim 1)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("dot", {Value(), f64({1})}); },
                                     "[dot] argument 'x' must be a number or an array, got nil"));
}

TEST(MatrixVdotInnerOuter, Values) {
  EXPECT_TRUE(array_eq(call("vdot", {f64({1, 2, 3, 4}, {2, 2}), i64({1, 1, 2, 2})}),
                       DType::float64, {}, {17}));
  EXPECT_TRUE(array_eq(call("vdot", {i64({1, 2}), i64({3, 4})}), DType::int64, {}, {11}));
  EXPECT_TRUE(array_eq(call("inner", {f64({1, 2, 3, 4}, {2, 2}), f64({1, 0, 0, 1, 1, 1}, {3, 2})}),
                       DType::float64, {2, 3}, {1, 2, 3, 3, 4, 7}));
  EXPECT_TRUE(array_eq(call("inner", {i64({1, 2, 3}), i64({4, 5, 6})}), DType::int64, {}, {32}));
  EXPECT_TRUE(array_eq(call("inner", {Value(2), i64({1, 2})}), DType::int64, {2}, {2, 4}));
  EXPECT_TRUE(array_eq(call("outer", {f64({1, 2}), f64({3, 4, 5})}), DType::float64, {2, 3},
                       {3, 4, 5, 6, 8, 10}));
  // outer flattens its operands.
  EXPECT_TRUE(array_eq(call("outer", {i64({1, 2, 3, 4}, {2, 2}), i64({1, -1})}), DType::int64,
                       {4, 2}, {1, -1, 2, -2, 3, -3, 4, -4}));
  EXPECT_TRUE(array_eq(call("outer", {b8({true, false}), b8({true, true})}), DType::bool_, {2, 2},
                       {1, 1, 0, 0}));
}

TEST(MatrixVdotInnerOuter, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("vdot", {Array(DType::float64, {2, 2}), Array(DType::float64, {3})}); },
      "[vdot] arrays must have the same size: 4 (shape (2, 2)) and 3 (shape (3,))"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("inner", {Array(DType::float64, {2, 2}), Array(DType::float64, {3})}); },
      "[inner] shapes (2, 2) and (3,) are not aligned: 2 (dim 1) != 3 (dim 0)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("outer", {Value("x"), f64({1})}); },
                                     "[outer] argument 'x' must be a number or an array"));
}

TEST(MatrixTensordot, IntegerAxes) {
  Value a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  // Default axes=2: full contraction.
  EXPECT_TRUE(array_eq(call("tensordot", {a, f64({1, 1, 1, 2, 2, 2}, {2, 3})}), DType::float64, {},
                       {36}));
  EXPECT_TRUE(array_eq(call("tensordot", {a, f64({1, 0, 0, 1, 1, 1}, {3, 2}), Value(1)}),
                       DType::float64, {2, 2}, {4, 5, 10, 11}));
  // axes=0: outer product.
  EXPECT_TRUE(array_eq(call("tensordot", {i64({1, 2}), i64({3, 4}), Value(0)}), DType::int64,
                       {2, 2}, {3, 4, 6, 8}));
}

TEST(MatrixTensordot, AxisListForm) {
  Value a = i64({1, 2, 3, 4, 5, 6}, {3, 2});
  Value b = i64({1, 0, 0, 1, 1, 1}, {3, 2});
  // Sum over axis 0 of both: a^T b.
  EXPECT_TRUE(array_eq(call("tensordot", {a, b, Value(List{List{0}, List{0}})}), DType::int64,
                       {2, 2}, {6, 8, 8, 10}));
  Value x = i64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(array_eq(call("tensordot", {x, b, Value(List{1, 0})}), DType::int64, {2, 2},
                       {4, 5, 10, 11}));
  // Two pairs (axis 0 with axis 1, axis 1 with axis 0) give trace(x @ b); negative axes count
  // from the end.
  EXPECT_TRUE(array_eq(call("tensordot", {x, b, Value(List{List{0, -1}, List{1, 0}})}),
                       DType::int64, {}, {15}));
  // Free axes keep their order: result shape (a free..., b free...).
  Value c = f64(std::vector<double>(24, 1.0), {2, 3, 4});
  Value r = named("tensordot", {{"", c}, {"", f64(std::vector<double>(15, 1.0), {3, 5})},
                                {"axes", Value(List{List{1}, List{0}})}});
  EXPECT_TRUE(array_eq(r, DType::float64, {2, 4, 5}, std::vector<double>(40, 3.0)));
}

TEST(MatrixTensordot, Errors) {
  Value a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("tensordot", {a, f64({1, 2, 3}), Value(2)}); },
      "[tensordot] axes=2 exceeds the dimensions of the operands: shapes (2, 3) and (3,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("tensordot", {a, a, Value(-1)}); },
      "[tensordot] argument 'axes' must be non-negative, got -1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("tensordot", {a, a, Value(1)}); },
      "[tensordot] shape mismatch for sum: axis 1 of a has length 3 but axis 0 of b has length 2"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("tensordot", {a, a, Value(List{List{0, 1}, List{0}})}); },
      "[tensordot] axes lists have different lengths: 2 and 1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("tensordot", {a, a, Value(List{List{0, -2}, List{0, 1}})}); },
      "[tensordot] repeated axis -2 in axes for an array of shape (2, 3)"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { call("tensordot", {a, a, Value(List{List{2}, List{0}})}); },
      "[tensordot] axis 2 is out of bounds for array of dimension 2"));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] { call("tensordot", {a, a, Value(List{1, 2, 3})}); },
      "[tensordot] argument 'axes' must be an int or a pair of axis lists"));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] { call("tensordot", {a, a, Value(List{List{1.5}, List{0}})}); },
      "[tensordot] argument 'axes' must be an int or a pair of axis lists"));
}

TEST(MatrixKron, Values) {
  EXPECT_TRUE(array_eq(call("kron", {i64({1, 2}), i64({1, 10, 100})}), DType::int64, {6},
                       {1, 10, 100, 2, 20, 200}));
  EXPECT_TRUE(array_eq(call("kron", {f64({1, 2, 3, 4}, {2, 2}), f64({0, 1, 1, 0}, {2, 2})}),
                       DType::float64, {4, 4},
                       {0, 1, 0, 2, 1, 0, 2, 0, 0, 3, 0, 4, 3, 0, 4, 0}));
  // The shorter shape is padded with leading 1s: (2, 1) x (1, 2).
  EXPECT_TRUE(array_eq(call("kron", {i64({1, 2}, {2, 1}), i64({1, 1})}), DType::int64, {2, 2},
                       {1, 1, 2, 2}));
  Value r = call("kron", {Value(2), Value(3)});
  ASSERT_TRUE(r.is_int());
  EXPECT_EQ(r.as_int(), 6);
  EXPECT_TRUE(array_eq(call("kron", {Value(2.0), i64({1, 2})}), DType::float64, {2}, {2, 4}));
}

TEST(MatrixTrace, Values) {
  Value m = i64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_TRUE(array_eq(call("trace", {m}), DType::int64, {}, {15}));
  EXPECT_TRUE(array_eq(call("trace", {m, Value(1)}), DType::int64, {}, {8}));
  EXPECT_TRUE(array_eq(call("trace", {m, Value(-1)}), DType::int64, {}, {12}));
  EXPECT_TRUE(array_eq(call("trace", {m, Value(5)}), DType::int64, {}, {0}));
  EXPECT_TRUE(array_eq(call("trace", {m, Value(INT64_MIN)}), DType::int64, {}, {0}));
  EXPECT_TRUE(array_eq(call("trace", {m, Value(-2)}), DType::int64, {}, {7}));
  EXPECT_TRUE(array_eq(call("trace", {b8({true, true, false, true}, {2, 2})}), DType::int64, {},
                       {2}));
  EXPECT_TRUE(array_eq(call("trace", {f32({1.5, 0, 0, 2}, {2, 2})}), DType::float32, {}, {3.5}));
  std::vector<double> v(8);
  for (int i = 0; i < 8; ++i) v[i] = i;
  EXPECT_TRUE(array_eq(call("trace", {f64(v, {2, 2, 2})}), DType::float64, {2}, {6, 8}));
  Value r = named("trace", {{"", f64(v, {2, 2, 2})}, {"axis1", Value(1)}, {"axis2", Value(-1)}});
  EXPECT_TRUE(array_eq(r, DType::float64, {2}, {3, 11}));
}

TEST(MatrixTrace, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("trace", {f64({1, 2})}); },
      "[trace] array must have at least 2 dimensions: got shape (2,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("trace", {f64({1, 2, 3, 4}, {2, 2}), Value(0), Value(1), Value(-1)}); },
      "[trace] axis1 and axis2 cannot be the same: 1 and -1"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [] { call("trace", {f64({1, 2, 3, 4}, {2, 2}), Value(0), Value(0), Value(2)}); },
      "[trace] axis 2 is out of bounds for array of dimension 2"));
}

TEST(MatrixNorm, Vectors) {
  Value v = f64({3, -4});
  EXPECT_TRUE(array_eq(call("norm", {v}), DType::float64, {}, {5}));
  EXPECT_TRUE(array_eq(call("norm", {v, Value(1)}), DType::float64, {}, {7}));
  EXPECT_TRUE(array_eq(call("norm", {v, Value(2)}), DType::float64, {}, {5}));
  EXPECT_TRUE(array_eq(call("norm", {v, Value(kInf)}), DType::float64, {}, {4}));
  EXPECT_TRUE(array_eq(call("norm", {v, Value("inf")}), DType::float64, {}, {4}));
  EXPECT_TRUE(array_eq(call("norm", {v, Value("-inf")}), DType::float64, {}, {3}));
  EXPECT_TRUE(array_eq(call("norm", {f64({0, 2, 0, 1}), Value(0)}), DType::float64, {}, {2}));
  EXPECT_TRUE(array_eq(call("norm", {v, Value(3)}), DType::float64, {}, {std::cbrt(91.0)}));
  EXPECT_TRUE(array_eq(call("norm", {i64({3, 4})}), DType::float64, {}, {5}));
  EXPECT_TRUE(array_eq(call("norm", {f32({3, 4})}), DType::float32, {}, {5}));
  EXPECT_TRUE(array_eq(call("norm", {Array(DType::float64, {0})}), DType::float64, {}, {0}));
}

TEST(MatrixNorm, MatricesAndAxes) {
  Value m = f64({1, -2, 3, 4}, {2, 2});
  EXPECT_TRUE(array_eq(call("norm", {m}), DType::float64, {}, {std::sqrt(30.0)}));
  EXPECT_TRUE(array_eq(call("norm", {m, Value("fro")}), DType::float64, {}, {std::sqrt(30.0)}));
  EXPECT_TRUE(array_eq(call("norm", {m, Value(1)}), DType::float64, {}, {6}));
  EXPECT_TRUE(array_eq(call("norm", {m, Value(-1)}), DType::float64, {}, {4}));
  EXPECT_TRUE(array_eq(call("norm", {m, Value(kInf)}), DType::float64, {}, {7}));
  EXPECT_TRUE(array_eq(call("norm", {m, Value(-kInf)}), DType::float64, {}, {3}));
  EXPECT_TRUE(array_eq(named("norm", {{"", m}, {"axis", Value(1)}}), DType::float64, {2},
                       {std::sqrt(5.0), 5}));
  EXPECT_TRUE(array_eq(named("norm", {{"", m}, {"axis", Value(0)}}), DType::float64, {2},
                       {std::sqrt(10.0), std::sqrt(20.0)}));
  EXPECT_TRUE(array_eq(named("norm", {{"", m}, {"ord", Value(1)}, {"axis", Value(1)},
                                      {"keepdims", Value(true)}}),
                       DType::float64, {2, 1}, {3, 7}));
  // Axes (1, 0) norm the transposed matrix: its max column sum is A's max row sum.
  EXPECT_TRUE(array_eq(named("norm", {{"", m}, {"ord", Value(1)}, {"axis", Value(List{1, 0})}}),
                       DType::float64, {}, {7}));
  EXPECT_TRUE(array_eq(named("norm", {{"", m}, {"keepdims", Value(true)}}), DType::float64, {1, 1},
                       {std::sqrt(30.0)}));
  // A stack of matrices normed over its last two axes.
  Value s = f64({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});
  EXPECT_TRUE(array_eq(named("norm", {{"", s}, {"ord", Value(kInf)}, {"axis", Value(List{1, 2})}}),
                       DType::float64, {2}, {1, 2}));
}

TEST(MatrixNorm, Errors) {
  Value v = f64({3, 4});
  Value m = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("norm", {v, Value("fro")}); },
                                                 "[norm] invalid norm order 'fro' for vectors"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("norm", {m, Value(2)}); },
      "[norm] matrix norm ord=2 needs singular values, which are not supported"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("norm", {m, Value(3)}); },
                                                 "[norm] invalid norm order 3 for matrices"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("norm", {Array::zeros(DType::float64, {2, 2, 2}), Value(1)}); },
      "[norm] improper number of dimensions to norm: with ord given and axis=nil the array must "
      "be 1-d or 2-d, got shape (2, 2, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] {
        call("norm", {Array::zeros(DType::float64, {2, 2, 2}), Value(), Value(List{0, 1, 2})});
      },
      "[norm] improper number of dimensions to norm: axis must name 1 or 2 axes, got 3"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("norm", {m, Value(), Value(List{1, -1})}); }, "[norm] duplicate axes given"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("norm", {v, Value("max")}); },
      "[norm] argument 'ord' must be a number, 'fro', 'nuc', 'inf' or '-inf', got 'max'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("norm", {Array(DType::float64, {0}), Value(kInf)}); },
      "[norm] zero-size array has no maximum or minimum: ord=inf"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { call("norm", {v, Value(), Value(1)}); },
      "[norm] axis 1 is out of bounds for array of dimension 1"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("norm", {v, Value(List{1})}); },
                                     "[norm] argument 'ord' must be a number or a string"));
}

TEST(MatrixDet, Values) {
  EXPECT_TRUE(array_eq(call("det", {f64({1, 2, 3, 4}, {2, 2})}), DType::float64, {}, {-2}));
  // Needs a row swap: the sign of the permutation counts.
  EXPECT_TRUE(array_eq(call("det", {i64({0, 1, 1, 0}, {2, 2})}), DType::float64, {}, {-1}));
  EXPECT_TRUE(array_eq(call("det", {f64({2, 0, 1, 1, 3, 2, 1, 1, 2}, {3, 3})}), DType::float64, {},
                       {6}));
  EXPECT_TRUE(array_eq(call("det", {f64({1, 2, 2, 4}, {2, 2})}), DType::float64, {}, {0}));
  EXPECT_TRUE(array_eq(call("det", {f32({1, 2, 3, 4}, {2, 2})}), DType::float32, {}, {-2}));
  EXPECT_TRUE(array_eq(call("det", {f64({1, 2, 3, 4, 0, 1, 1, 0}, {2, 2, 2})}), DType::float64,
                       {2}, {-2, -1}));
  EXPECT_TRUE(array_eq(call("det", {Array(DType::float64, {0, 0})}), DType::float64, {}, {1}));
}

TEST(MatrixInv, Values) {
  EXPECT_TRUE(array_eq(call("inv", {f64({4, 7, 2, 6}, {2, 2})}), DType::float64, {2, 2},
                       {0.6, -0.7, -0.2, 0.4}, 1e-12, 1e-12));
  EXPECT_TRUE(array_eq(call("inv", {i64({0, 1, 1, 0}, {2, 2})}), DType::float64, {2, 2},
                       {0, 1, 1, 0}));
  EXPECT_TRUE(array_eq(call("inv", {f32({2, 0, 0, 4}, {2, 2})}), DType::float32, {2, 2},
                       {0.5, 0, 0, 0.25}));
  EXPECT_TRUE(array_eq(call("inv", {f64({2, 0, 0, 2, 1, 0, 0, 4}, {2, 2, 2})}), DType::float64,
                       {2, 2, 2}, {0.5, 0, 0, 0.5, 1, 0, 0, 0.25}));
}

TEST(MatrixSolve, Values) {
  Value a = f64({3, 1, 1, 2}, {2, 2});
  EXPECT_TRUE(array_eq(call("solve", {a, f64({9, 8})}), DType::float64, {2}, {2, 3}, 1e-12));
  EXPECT_TRUE(array_eq(call("solve", {a, f64({9, 1, 8, 2}, {2, 2})}), DType::float64, {2, 2},
                       {2, 0, 3, 1}, 1e-12, 1e-12));
  // A stack of matrices with one vector: NumPy 2 treats 1-d b as a vector for each matrix.
  EXPECT_TRUE(array_eq(call("solve", {f64({1, 0, 0, 1, 2, 0, 0, 4}, {2, 2, 2}), f64({2, 4})}),
                       DType::float64, {2, 2}, {2, 4, 1, 1}));
  EXPECT_TRUE(array_eq(call("solve", {i64({2, 0, 0, 4}, {2, 2}), i64({1, 1})}), DType::float64,
                       {2}, {0.5, 0.25}));
  EXPECT_TRUE(array_eq(call("solve", {f32({2, 0, 0, 4}, {2, 2}), f32({1, 1})}), DType::float32,
                       {2}, {0.5, 0.25}));
}

TEST(MatrixMatrixPower, Values) {
  Value fib = i64({1, 1, 1, 0}, {2, 2});
  EXPECT_TRUE(array_eq(call("matrix_power", {fib, Value(5)}), DType::int64, {2, 2}, {8, 5, 5, 3}));
  EXPECT_TRUE(array_eq(call("matrix_power", {fib, Value(1)}), DType::int64, {2, 2}, {1, 1, 1, 0}));
  EXPECT_TRUE(array_eq(call("matrix_power", {fib, Value(0)}), DType::int64, {2, 2}, {1, 0, 0, 1}));
  EXPECT_TRUE(array_eq(call("matrix_power", {f64({4, 7, 2, 6}, {2, 2}), Value(-1)}),
                       DType::float64, {2, 2}, {0.6, -0.7, -0.2, 0.4}, 1e-12, 1e-12));
  EXPECT_TRUE(array_eq(call("matrix_power", {f64({2, 0, 0, 2, 1, 1, 0, 1}, {2, 2, 2}), Value(3)}),
                       DType::float64, {2, 2, 2}, {8, 0, 0, 8, 1, 3, 0, 1}));
}

TEST(MatrixLu, Errors) {
  for (const char* op : {"det", "inv", "matrix_power"}) {
    auto run = [&](Value x) {
      if (std::string(op) == "matrix_power") return call(op, {x, Value(2)});
      return call(op, {x});
    };
    EXPECT_TRUE(throws_with<std::invalid_argument>(
        [&] { run(f64({1, 2, 3})); },
        std::string("[") + op + "] array must have at least 2 dimensions: got shape (3,)"));
    EXPECT_TRUE(throws_with<std::invalid_argument>(
        [&] { run(Array::zeros(DType::float64, {2, 3})); },
        std::string("[") + op +
            "] last 2 dimensions of the array must be square: got shape (2, 3)"));
  }
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("inv", {f64({1, 2, 2, 4}, {2, 2})}); }, "[inv] singular matrix"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("matrix_power", {f64({1, 2, 2, 4}, {2, 2}), Value(-2)}); },
      "[matrix_power] singular matrix"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("solve", {f64({1, 2, 2, 4}, {2, 2}), f64({1, 1})}); }, "[solve] singular matrix"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("solve", {f64({1, 0, 0, 1}, {2, 2}), f64({1, 1, 1})}); },
      "[solve] shapes (2, 2) and (3,) are not aligned: 2 (dim 1) != 3 (dim 0)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("solve", {f64({1, 0, 0, 1}, {2, 2}), Array::scalar(1.0)}); },
      "[solve] b must have at least 1 dimension: got a 0-d array"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("solve", {Array::zeros(DType::float64, {2, 2, 2}),
                          Array::zeros(DType::float64, {3, 2, 1})}); },
      "[solve] batch dimensions could not be broadcast together: shapes (2, 2, 2) and (3, 2, 1)"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("matrix_power", {f64({1, 0, 0, 1}, {2, 2}), Value(1.5)}); },
      "[matrix_power] argument 'n' must be an integer, got float 1.5"));
}

TEST(MatrixTransposedProduct, MatchesTransposeThenMatmul) {
  using namespace tessera::test;
  Array a = call("random_normal", {Value(List{Value(int64_t{37}), Value(int64_t{19})})}).as_array();
  Array b = call("random_normal", {Value(List{Value(int64_t{37}), Value(int64_t{5})})}).as_array();
  Array v = call("random_normal", {Value(int64_t{37})}).as_array();
  for (const Array& rhs : {b, v}) {
    Value fused = call("matmul_tn", {a, rhs});
    Value plain = call("matmul", {call("transpose", {a}), rhs});
    ASSERT_EQ(fused.as_array().shape(), plain.as_array().shape());
    for (int64_t i = 0; i < fused.as_array().size(); ++i) {
      EXPECT_NEAR(fused.as_array().get_double(i), plain.as_array().get_double(i), 1e-12);
    }
  }
  // float32 stays float32; int operands fall back to the general path.
  Value f32 = call("matmul_tn", {call("astype", {a, Value("float32")}), call("astype", {b, Value("float32")})});
  EXPECT_EQ(f32.as_array().dtype(), DType::float32);
  EXPECT_TRUE(array_eq(call("matmul_tn", {i64({1, 2, 3, 4}, {2, 2}), i64({1, 1}, {2})}), DType::int64,
                       {2}, {4, 6}));
  // Errors are matmul's, with the transposed shape.
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("matmul_tn", {a, v.reshaped({37, 1}).copy().reshaped({1, 37})}); },
                                                 "[matmul] shapes (19, 37) and (1, 37) are not aligned"));
}

TEST(MatrixTransposedProduct, TallThinProductIsChunkedDeterministically) {
  using namespace tessera::test;
  // k = 50000 rows: the chunked path; compare with transpose + matmul and
  // across thread counts (bitwise).
  Array a = call_primitive("random_normal", {CallArg{"", Value(List{Value(int64_t{50000}), Value(int64_t{7})})},
                                             CallArg{"seed", Value(int64_t{3})}}).as_array();
  Array v = call_primitive("random_normal", {CallArg{"", Value(int64_t{50000})}, CallArg{"seed", Value(int64_t{4})}}).as_array();
  Value plain = call("matmul", {call("transpose", {a}), v});
  std::vector<Value> runs;
  for (int threads : {1, 2, 3}) {
    tessera::set_num_threads(threads);
    runs.push_back(call("matmul_tn", {a, v}));
  }
  tessera::set_num_threads(2);
  ASSERT_EQ(runs[0].as_array().shape(), (Shape{7}));
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_NEAR(runs[0].as_array().get_double(i), plain.as_array().get_double(i), 1e-9);
  }
  EXPECT_TRUE(runs[0].equals(runs[1]));
  EXPECT_TRUE(runs[0].equals(runs[2]));
}

TEST(MatrixTransposedProduct, SplitAlongTheSumMatchesReference) {
  // A dense layer's weight gradient: 4100 samples against small outputs, so
  // the sum over samples is cut into chunks whose partial products are added
  // (also when the output is wider than tall, and for a vector).
  ThreadCountGuard guard;
  const int64_t k = 4100;
  for (auto [p, n] : {std::pair<int64_t, int64_t>{40, 24}, {24, 300}, {33, 1}}) {
    std::vector<double> av = noise(k * p, 5), bv = noise(k * n, 6);
    std::vector<double> at(p * k);
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < p; ++c) at[c * k + r] = av[r * p + c];
    }
    std::vector<double> ref = naive_matmul(at, bv, p, k, n);
    const Shape bshape = n == 1 ? Shape{k} : Shape{k, n};
    const Shape oshape = n == 1 ? Shape{p} : Shape{p, n};
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      EXPECT_TRUE(array_eq(call("matmul_tn", {f64(av, {k, p}), f64(bv, bshape)}), DType::float64,
                           oshape, ref, 1e-10))
          << p << "x" << n << ", " << threads << " threads";
      Array a32 = call("astype", {f64(av, {k, p}), Value("float32")}).as_array();
      Array b32 = call("astype", {f64(bv, bshape), Value("float32")}).as_array();
      EXPECT_TRUE(array_eq(call("matmul_tn", {a32, b32}), DType::float32, oshape, ref, 1e-4, 1e-3))
          << p << "x" << n << ", " << threads << " threads";
    }
  }
}

TEST(MatrixTransposedProduct, DeterministicTilingGivesTheSameBitsForAnyThreadCount) {
  ThreadCountGuard guard;
  auto normal = [](int64_t rows, int64_t cols, int64_t seed) {
    return named("random_normal", {{"", Value(List{Value(rows), Value(cols)})},
                                   {"seed", Value(seed)},
                                   {"dtype", Value("float32")}})
        .as_array();
  };
  Array a = normal(6000, 96, 8), b = normal(6000, 200, 9);
  set_deterministic_tiling(true);
  std::vector<Value> runs;
  for (int threads : {1, 2, 3, 4}) {
    set_num_threads(threads);
    runs.push_back(call("matmul_tn", {a, b}));
  }
  set_deterministic_tiling(false);
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_TRUE(runs[0].equals(runs[i])) << i + 1;
}

TEST(MatrixConcurrency, RowTilesRunningAtOnceGiveIdenticalProducts) {
  // Row tiles call BLAS from several workers at once; a BLAS that is not
  // reentrant (Debian's serial OpenBLAS) corrupts some of them.
  using namespace tessera::test;
  tessera::set_num_threads(2);
  Array a = call_primitive("random_normal", {CallArg{"", Value(List{Value(int64_t{64}), Value(int64_t{1600})})},
                                             CallArg{"seed", Value(int64_t{1})}, CallArg{"dtype", Value("float32")}}).as_array();
  Array b = call_primitive("random_normal", {CallArg{"", Value(List{Value(int64_t{1600}), Value(int64_t{128})})},
                                             CallArg{"seed", Value(int64_t{2})}, CallArg{"dtype", Value("float32")}}).as_array();
  Value first = call("matmul", {a, b});
  int differing = 0;
  for (int i = 0; i < 60; ++i) differing += !call("matmul", {a, b}).equals(first);
  EXPECT_EQ(differing, 0);
}
