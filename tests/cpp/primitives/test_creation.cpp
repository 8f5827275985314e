#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/kernels/random.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using test::named;
using namespace tessera::test;

namespace {

}  // namespace

TEST(CreationFill, ZerosOnesEmptyFull) {
  EXPECT_TRUE(array_eq(call("zeros", {int64_t{3}}), DType::float64, {3}, {0, 0, 0}));
  EXPECT_TRUE(array_eq(call("ones", {List{int64_t{2}, int64_t{2}}, "int64"}), DType::int64,
                       {2, 2}, {1, 1, 1, 1}));
  EXPECT_TRUE(array_eq(call("zeros", {List{}}), DType::float64, {}, {0}));
  EXPECT_TRUE(array_eq(call("ones", {i64({2, 0}), "bool"}), DType::bool_, {2, 0}, {}));
  EXPECT_TRUE(array_eq(call("empty", {int64_t{2}, "float32"}), DType::float32, {2}, {0, 0}));
  EXPECT_TRUE(array_eq(call("full", {int64_t{2}, int64_t{7}}), DType::int64, {2}, {7, 7}));
  EXPECT_TRUE(array_eq(call("full", {int64_t{2}, 1.5}), DType::float64, {2}, {1.5, 1.5}));
  EXPECT_TRUE(array_eq(call("full", {int64_t{2}, 2.7, "int64"}), DType::int64, {2}, {2, 2}));
  EXPECT_TRUE(array_eq(call("full", {List{int64_t{2}, int64_t{2}}, f32({1, 2})}),
                       DType::float32, {2, 2}, {1, 2, 1, 2}));
}

TEST(CreationFill, LikeVariants) {
  Value x = f32({1, 2, 3}, {3, 1});
  EXPECT_TRUE(array_eq(call("zeros_like", {x}), DType::float32, {3, 1}, {0, 0, 0}));
  EXPECT_TRUE(array_eq(call("ones_like", {x, "int64"}), DType::int64, {3, 1}, {1, 1, 1}));
  EXPECT_TRUE(array_eq(call("empty_like", {i64({5})}), DType::int64, {}, {0}));
  EXPECT_TRUE(array_eq(call("full_like", {x, 2.5}), DType::float32, {3, 1}, {2.5, 2.5, 2.5}));
  EXPECT_TRUE(array_eq(call("full_like", {b8({true, false}), int64_t{0}}), DType::bool_, {2},
                       {0, 0}));
}

TEST(CreationFill, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("zeros", {int64_t{-1}}); },
                                                 "[zeros] negative dimensions are not allowed"));
  EXPECT_TRUE(throws_with<MemoryError>(
      [] { call("ones", {List{int64_t{1} << 40, int64_t{1} << 40}}); }, "[ones] array is too big"));
  EXPECT_TRUE(throws_with<MemoryError>([] { call("zeros", {int64_t{1} << 58}); },
                                       "[zeros] cannot allocate"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("zeros", {1.5}); },
                                     "[zeros] argument 'shape' must be an int or a list of ints"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("zeros", {int64_t{2}, "quaternion"}); }, "quaternion"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("full", {int64_t{2}, f64({1, 2, 3})}); },
      "[full] fill value of shape (3,) cannot be broadcast to shape (2,)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("full", {int64_t{2}, "a"}); },
                                     "[full] argument 'fill_value' must be a number"));
}

TEST(CreationRange, Arange) {
  EXPECT_TRUE(array_eq(call("arange", {int64_t{4}}), DType::int64, {4}, {0, 1, 2, 3}));
  EXPECT_TRUE(array_eq(call("arange", {int64_t{2}, int64_t{9}, int64_t{3}}), DType::int64, {3},
                       {2, 5, 8}));
  EXPECT_TRUE(array_eq(call("arange", {int64_t{5}, int64_t{0}, int64_t{-2}}), DType::int64, {3},
                       {5, 3, 1}));
  EXPECT_TRUE(array_eq(call("arange", {int64_t{3}, int64_t{1}}), DType::int64, {0}, {}));
  EXPECT_TRUE(array_eq(call("arange", {0.0, 1.0, 0.25}), DType::float64, {4},
                       {0, 0.25, 0.5, 0.75}));
  EXPECT_TRUE(array_eq(call("arange", {1.0, 2.1, 0.5}), DType::float64, {3}, {1, 1.5, 2}));
  EXPECT_TRUE(array_eq(named("arange", {{"", int64_t{3}}, {"dtype", "float32"}}),
                       DType::float32, {3}, {0, 1, 2}));
  EXPECT_TRUE(array_eq(call("arange", {int64_t{-3}}), DType::int64, {0}, {}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("arange", {int64_t{0}, int64_t{5}, int64_t{0}}); }, "[arange] step must not be zero"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("arange", {0.0, INFINITY}); }, "[arange] cannot compute the length"));
  EXPECT_TRUE(throws_with<MemoryError>([] { call("arange", {0.0, 1e300}); }, "[arange]"));
}

TEST(CreationRange, Linspace) {
  EXPECT_TRUE(array_eq(call("linspace", {0.0, 1.0, int64_t{5}}), DType::float64, {5},
                       {0, 0.25, 0.5, 0.75, 1}));
  EXPECT_TRUE(array_eq(call("linspace", {0.0, 1.0, int64_t{4}, false}), DType::float64, {4},
                       {0, 0.25, 0.5, 0.75}));
  EXPECT_TRUE(array_eq(call("linspace", {2.0, 3.0, int64_t{1}}), DType::float64, {1}, {2}));
  EXPECT_TRUE(array_eq(call("linspace", {2.0, 3.0, int64_t{0}}), DType::float64, {0}, {}));
  EXPECT_TRUE(array_eq(call("linspace", {-1.0, 1.0, int64_t{3}, true, "int64"}), DType::int64,
                       {3}, {-1, 0, 1}));
  EXPECT_TRUE(array_eq(call("linspace", {0.0, 1.0, int64_t{3}, true, "int64"}), DType::int64,
                       {3}, {0, 0, 1}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("linspace", {0.0, 1.0, int64_t{-1}}); },
      "[linspace] number of samples must be non-negative, got -1"));
}

TEST(CreationMatrix, EyeIdentityDiagTri) {
  EXPECT_TRUE(array_eq(call("eye", {int64_t{2}}), DType::float64, {2, 2}, {1, 0, 0, 1}));
  EXPECT_TRUE(array_eq(call("eye", {int64_t{2}, int64_t{3}, int64_t{1}, "int64"}), DType::int64,
                       {2, 3}, {0, 1, 0, 0, 0, 1}));
  EXPECT_TRUE(array_eq(call("eye", {int64_t{3}, int64_t{2}, int64_t{-1}}), DType::float64,
                       {3, 2}, {0, 0, 1, 0, 0, 1}));
  EXPECT_TRUE(array_eq(call("eye", {int64_t{2}, Value(), int64_t{-9000000000000000000}}),
                       DType::float64, {2, 2}, {0, 0, 0, 0}));
  EXPECT_TRUE(array_eq(call("identity", {int64_t{2}, "bool"}), DType::bool_, {2, 2},
                       {1, 0, 0, 1}));
  EXPECT_TRUE(array_eq(call("diag", {i64({1, 2})}), DType::int64, {2, 2}, {1, 0, 0, 2}));
  EXPECT_TRUE(array_eq(call("diag", {i64({1, 2}), int64_t{1}}), DType::int64, {3, 3},
                       {0, 1, 0, 0, 0, 2, 0, 0, 0}));
  EXPECT_TRUE(array_eq(call("diag", {i64({1, 2}), int64_t{-1}}), DType::int64, {3, 3},
                       {0, 0, 0, 1, 0, 0, 0, 2, 0}));
  Value m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(array_eq(call("diag", {m}), DType::float64, {2}, {1, 5}));
  EXPECT_TRUE(array_eq(call("diag", {m, int64_t{1}}), DType::float64, {2}, {2, 6}));
  EXPECT_TRUE(array_eq(call("diag", {m, int64_t{-1}}), DType::float64, {1}, {4}));
  EXPECT_TRUE(array_eq(call("diag", {m, int64_t{5}}), DType::float64, {0}, {}));
  EXPECT_TRUE(array_eq(call("tri", {int64_t{2}, int64_t{3}}), DType::float64, {2, 3},
                       {1, 0, 0, 1, 1, 0}));
  EXPECT_TRUE(array_eq(call("tril", {m}), DType::float64, {2, 3}, {1, 0, 0, 4, 5, 0}));
  EXPECT_TRUE(array_eq(call("triu", {m, int64_t{1}}), DType::float64, {2, 3},
                       {0, 2, 3, 0, 0, 6}));
  EXPECT_TRUE(array_eq(call("tril", {i64({1, 2})}), DType::int64, {2, 2}, {1, 0, 1, 2}));
  EXPECT_TRUE(array_eq(call("triu", {f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})}), DType::float64,
                       {2, 2, 2}, {1, 2, 0, 4, 5, 6, 0, 8}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("eye", {int64_t{-2}}); },
                                                 "[eye] negative dimensions"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("diag", {f64({1}, {1, 1, 1})}); },
                                                 "[diag] input must be 1-d or 2-d, got shape (1, 1, 1)"));
  EXPECT_TRUE(throws_with<MemoryError>([] { call("diag", {i64({1}, {1}), int64_t{1} << 50}); },
                                       "[diag] array is too big"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("tril", {int64_t{3}}); },
                                                 "[tril] input must be at least 1-d"));
}

TEST(CreationArray, FromValues) {
  List nested{List{int64_t{1}, int64_t{2}}, List{int64_t{3}, 4.5}};
  EXPECT_TRUE(array_eq(call("array", {nested}), DType::float64, {2, 2}, {1, 2, 3, 4.5}));
  EXPECT_TRUE(array_eq(call("array", {List{true, false}}), DType::bool_, {2}, {1, 0}));
  EXPECT_TRUE(array_eq(call("array", {int64_t{3}}), DType::int64, {}, {3}));
  EXPECT_TRUE(array_eq(call("array", {List{int64_t{1}, int64_t{2}}, "float32"}), DType::float32,
                       {2}, {1, 2}));
  Array src = f64({1, 2});
  Value c = call("array", {src});
  EXPECT_FALSE(c.as_array().shares_storage(src));
  EXPECT_TRUE(array_eq(c, DType::float64, {2}, {1, 2}));
  Value cp = call("copy", {src});
  EXPECT_FALSE(cp.as_array().shares_storage(src));
  EXPECT_TRUE(array_eq(cp, DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("array", {List{List{int64_t{1}, int64_t{2}}, List{int64_t{3}}}}); },
      "ragged nested list"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("array", {"abc"}); },
                                     "[array] argument 'object' must be a number, an array"));
}

TEST(CreationMeshgrid, XyAndIj) {
  Value x = i64({1, 2, 3}), y = f64({10, 20});
  Value xy = call("meshgrid", {List{x, y}});
  ASSERT_TRUE(xy.is_list());
  EXPECT_TRUE(array_eq(xy.as_list()[0], DType::int64, {2, 3}, {1, 2, 3, 1, 2, 3}));
  EXPECT_TRUE(array_eq(xy.as_list()[1], DType::float64, {2, 3}, {10, 10, 10, 20, 20, 20}));
  Value ij = call("meshgrid", {List{x, y}, "ij"});
  EXPECT_TRUE(array_eq(ij.as_list()[0], DType::int64, {3, 2}, {1, 1, 2, 2, 3, 3}));
  EXPECT_TRUE(array_eq(ij.as_list()[1], DType::float64, {3, 2}, {10, 20, 10, 20, 10, 20}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("meshgrid", {List{x}, "xz"}); },
      "[meshgrid] argument 'indexing' must be 'xy' or 'ij', got 'xz'"));
}

TEST(RandomDraws, SeededReproducible) {
  auto draw = [](const char* op, int64_t seed) {
    return named(op, {{"", int64_t{1000}}, {"seed", seed}}).as_array();
  };
  for (const char* op : {"random_uniform", "random_normal"}) {
    Array a = draw(op, 7), b = draw(op, 7), c = draw(op, 8);
    EXPECT_TRUE(Value(a).equals(Value(b))) << op;
    EXPECT_FALSE(Value(a).equals(Value(c))) << op;
  }
  Array u = draw("random_uniform", 3);
  for (int64_t i = 0; i < u.size(); ++i) {
    ASSERT_GE(u.get_double(i), 0.0);
    ASSERT_LT(u.get_double(i), 1.0);
  }
  Value r = named("random_uniform", {{"", List{int64_t{2}, int64_t{3}}}, {"low", -2.0},
                                     {"high", -1.0}, {"seed", int64_t{1}}, {"dtype", "float32"}});
  EXPECT_EQ(r.as_array().dtype(), DType::float32);
  EXPECT_EQ(r.as_array().shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_GE(r.as_array().get_double(i), -2.0);
    EXPECT_LT(r.as_array().get_double(i), -1.0);
  }
}

TEST(RandomDraws, UnseededStreamsFollowSetSeed) {
  call("set_seed", {int64_t{42}});
  Value a1 = call("random_uniform", {int64_t{5}});
  Value a2 = call("random_uniform", {int64_t{5}});
  EXPECT_FALSE(a1.equals(a2));
  call("set_seed", {int64_t{42}});
  EXPECT_TRUE(call("random_uniform", {int64_t{5}}).equals(a1));
  EXPECT_TRUE(call("random_uniform", {int64_t{5}}).equals(a2));
  call("set_seed", {int64_t{43}});
  EXPECT_FALSE(call("random_uniform", {int64_t{5}}).equals(a1));
  EXPECT_TRUE(call("set_seed", {int64_t{0}}).is_nil());
}

TEST(RandomDraws, ThreadCountIndependent) {
  const int before = num_threads();
  for (const char* op : {"random_uniform", "random_normal"}) {
    set_num_threads(1);
    Value one = named(op, {{"", int64_t{200000}}, {"seed", int64_t{5}}});
    set_num_threads(4);
    Value four = named(op, {{"", int64_t{200000}}, {"seed", int64_t{5}}});
    EXPECT_TRUE(one.equals(four)) << op;
  }
  set_num_threads(1);
  Value one = named("random_integers", {{"", int64_t{-5}}, {"", int64_t{5}},
                                        {"shape", int64_t{200000}}, {"seed", int64_t{5}}});
  set_num_threads(4);
  Value four = named("random_integers", {{"", int64_t{-5}}, {"", int64_t{5}},
                                         {"shape", int64_t{200000}}, {"seed", int64_t{5}}});
  EXPECT_TRUE(one.equals(four));
  set_num_threads(before);
}

// The fills draw their words a block at a time (philox4x32_many); each element
// must still be the value of its own counter, as philox4x32 gives it: every
// block boundary, a tile's offset and both float dtypes.
TEST(RandomDraws, FillsMatchPerCounterWords) {
  const kernels::RandomKey key{12345, 678};
  for (DType dt : {DType::float64, DType::float32}) {
    for (int64_t offset : {int64_t{0}, int64_t{3}, int64_t{1} << 33}) {
      const int64_t n = 1100, begin = 5, end = 1037;
      Array u(dt, {n}), z(dt, {n});
      kernels::uniform_fill_range(u, key, -2.0, 3.0, begin, end, offset);
      kernels::normal_fill_range(z, key, 1.0, 2.0, begin, end, offset);
      for (int64_t i = begin; i < end; ++i) {
        auto w = kernels::philox4x32(key, static_cast<uint64_t>(i + offset));
        const double uv = -2.0 + 5.0 * kernels::unit_double(w[0], w[1]);
        const double u1 = 1.0 - kernels::unit_double(w[0], w[1]);
        const double u2 = kernels::unit_double(w[2], w[3]);
        const double zv =
            1.0 + 2.0 * (std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2));
        if (dt == DType::float64) {
          ASSERT_EQ(u.data<double>()[i], uv) << i << " offset " << offset;
          ASSERT_EQ(z.data<double>()[i], zv) << i << " offset " << offset;
        } else {
          float uf = static_cast<float>(uv);
          if (uf >= 3.0f) uf = std::nextafter(3.0f, -2.0f);
          ASSERT_EQ(u.data<float>()[i], uf) << i << " offset " << offset;
          ASSERT_EQ(z.data<float>()[i], static_cast<float>(zv)) << i << " offset " << offset;
        }
      }
    }
  }
}

TEST(RandomDraws, NormalMoments) {
  Array z = named("random_normal", {{"", int64_t{1000000}}, {"mean", 2.0}, {"std", 3.0},
                                    {"seed", int64_t{11}}})
                .as_array();
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < z.size(); ++i) sum += z.get_double(i);
  double mean = sum / z.size();
  for (int64_t i = 0; i < z.size(); ++i) sq += (z.get_double(i) - mean) * (z.get_double(i) - mean);
  double sd = std::sqrt(sq / z.size());
  EXPECT_NEAR(mean, 2.0, 0.02);
  EXPECT_NEAR(sd, 3.0, 0.02);
  Array u = named("random_uniform", {{"", int64_t{1000000}}, {"seed", int64_t{11}}}).as_array();
  double us = 0;
  for (int64_t i = 0; i < u.size(); ++i) us += u.get_double(i);
  EXPECT_NEAR(us / u.size(), 0.5, 0.003);
}

TEST(RandomDraws, Integers) {
  Array r = named("random_integers", {{"", int64_t{-3}}, {"", int64_t{4}},
                                      {"shape", int64_t{10000}}, {"seed", int64_t{2}}})
                .as_array();
  EXPECT_EQ(r.dtype(), DType::int64);
  std::vector<int> counts(7, 0);
  for (int64_t i = 0; i < r.size(); ++i) {
    int64_t v = r.get_int(i);
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    ++counts[v + 3];
  }
  for (int c : counts) EXPECT_GT(c, 1200);  // about 1429 each
  Value one = call("random_integers", {int64_t{5}, int64_t{6}});
  EXPECT_TRUE(array_eq(one, DType::int64, {}, {5}));
  Value full = named("random_integers", {{"", std::numeric_limits<int64_t>::min()},
                                         {"", std::numeric_limits<int64_t>::max()},
                                         {"shape", int64_t{4}}, {"seed", int64_t{1}}});
  EXPECT_EQ(full.as_array().size(), 4);
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("random_integers", {int64_t{3}, int64_t{3}}); },
      "[random_integers] high must be greater than low: low=3, high=3"));
}

TEST(RandomDraws, PermutationShuffle) {
  Array p = named("permutation", {{"", int64_t{50}}, {"seed", int64_t{3}}}).as_array();
  std::vector<bool> seen(50, false);
  for (int64_t i = 0; i < 50; ++i) seen[p.get_int(i)] = true;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 50);
  bool moved = false;
  for (int64_t i = 0; i < 50; ++i) moved |= p.get_int(i) != i;
  EXPECT_TRUE(moved);
  Value x = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  Array s = named("shuffle", {{"", x}, {"seed", int64_t{3}}}).as_array();
  ASSERT_EQ(s.shape(), (Shape{3, 2}));
  for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(s.get_double(2 * r) + 1, s.get_double(2 * r + 1));
  EXPECT_TRUE(named("shuffle", {{"", x}, {"seed", int64_t{3}}}).equals(Value(s)));
  EXPECT_TRUE(array_eq(call("permutation", {int64_t{0}}), DType::int64, {0}, {}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("permutation", {int64_t{-1}}); },
                                                 "[permutation] argument 'x' must be non-negative"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("shuffle", {f64({1})}); },
                                                 "[shuffle] argument 'x' must be an array of at least 1 dimension"));
}

TEST(RandomDraws, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("random_normal", {{"", int64_t{2}}, {"std", -1.0}}); },
      "[random_normal] argument 'std' must be non-negative, got -1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("random_uniform", {{"", int64_t{2}}, {"dtype", "int64"}}); },
      "[random_uniform] argument 'dtype' must be 'float32' or 'float64', got 'int64'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("random_uniform", {{"", int64_t{2}}, {"seed", int64_t{-1}}}); },
      "[random_uniform] argument 'seed' must be non-negative"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("random_uniform", {{"", int64_t{2}}, {"high", INFINITY}}); },
      "[random_uniform] low and high must be finite"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("random_uniform", {int64_t{-2}}); },
                                                 "[random_uniform] negative dimensions"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("set_seed", {int64_t{-2}}); },
                                                 "[set_seed] argument 'seed' must be non-negative"));
}
