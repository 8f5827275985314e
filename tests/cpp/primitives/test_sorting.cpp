// Tests of the sorting and searching primitives (sorting.cpp).
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using test::kNaN;
using namespace tessera::test;

namespace {


// [[3, 1, 2, 1], [0, -2, 5, -2]]: ties in both rows.
Array ties() { return i64({3, 1, 2, 1, 0, -2, 5, -2}, {2, 4}); }

}  // namespace

TEST(SortingSort, Axes) {
  Array x = ties();
  EXPECT_TRUE(array_eq(call("sort", {x}), DType::int64, {2, 4}, {1, 1, 2, 3, -2, -2, 0, 5}));
  EXPECT_TRUE(array_eq(call("sort", {x, 0}), DType::int64, {2, 4}, {0, -2, 2, -2, 3, 1, 5, 1}));
  EXPECT_TRUE(array_eq(call("sort", {x, Value()}), DType::int64, {8}, {-2, -2, 0, 1, 1, 2, 3, 5}));
  EXPECT_TRUE(array_eq(call("sort", {f32({2, 0.5f, -1})}), DType::float32, {3}, {-1, 0.5, 2}));
  EXPECT_TRUE(array_eq(call("sort", {b8({true, false, true})}), DType::bool_, {3}, {0, 1, 1}));
  EXPECT_TRUE(array_eq(call("sort", {Array(DType::float64, {0})}), DType::float64, {0}, {}));
  Array x3(DType::float64, {2, 2, 2});
  double v[] = {4, 3, 2, 1, 8, 7, 6, 5};
  for (int i = 0; i < 8; ++i) x3.data<double>()[i] = v[i];
  EXPECT_TRUE(array_eq(call("sort", {x3, 1}), DType::float64, {2, 2, 2}, {2, 1, 4, 3, 6, 5, 8, 7}));
}

TEST(SortingSort, NaNLast) {
  EXPECT_TRUE(array_eq(call("sort", {f64({2, kNaN, -1, kNaN, 0})}), DType::float64, {5},
                       {-1, 0, 2, kNaN, kNaN}));
  EXPECT_TRUE(array_eq(call("argsort", {f64({2, kNaN, -1, kNaN, 0})}), DType::int64, {5},
                       {2, 4, 0, 1, 3}));
}

TEST(SortingArgsort, StableWithTies) {
  Array x = ties();
  EXPECT_TRUE(array_eq(call("argsort", {x}), DType::int64, {2, 4}, {1, 3, 2, 0, 1, 3, 0, 2}));
  EXPECT_TRUE(array_eq(call("argsort", {x, 0}), DType::int64, {2, 4}, {1, 1, 0, 1, 0, 0, 1, 0}));
  EXPECT_TRUE(array_eq(call("argsort", {x, Value()}), DType::int64, {8},
                       {5, 7, 4, 1, 3, 2, 0, 6}));
  // Many equal keys keep their original order.
  Array same = Array::full(DType::float64, {100}, 1.0);
  Value idx = call("argsort", {same});
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(idx.as_array().get_int(i), i);
}

TEST(SortingSort, ManyLanesAnyThreadCount) {
  Array x(DType::float64, {512, 64});
  for (int64_t i = 0; i < x.size(); ++i) x.data<double>()[i] = static_cast<double>((i * 7919) % 613);
  int before = num_threads();
  set_num_threads(1);
  Array one = call("argsort", {x, 0}).as_array();
  set_num_threads(3);
  Array three = call("argsort", {x, 0}).as_array();
  set_num_threads(before);
  ASSERT_EQ(one.shape(), three.shape());
  for (int64_t i = 0; i < one.size(); ++i) ASSERT_EQ(one.get_int(i), three.get_int(i));
  // Column 0 is sorted by the permutation.
  for (int64_t r = 1; r < 512; ++r) {
    EXPECT_LE(x.get_double(one.get_int((r - 1) * 64) * 64), x.get_double(one.get_int(r * 64) * 64));
  }
}

TEST(SortingSort, Errors) {
  EXPECT_TRUE(throws_with<std::out_of_range>([] { call("sort", {ties(), 2}); },
                                             "[sort] axis 2 is out of bounds for array of dimension 2"));
  EXPECT_TRUE(throws_with<std::out_of_range>([] { call("argsort", {Array::scalar(1.0)}); },
                                             "[argsort] axis -1 is out of bounds for array of dimension 0"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("sort", {ties(), 1.5}); },
                                     "[sort] argument 'axis' must be an integer"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("sort", {Value("x")}); },
                                     "[sort] argument 'x' must be a number or an array"));
}

TEST(SortingUnique, ValuesAndExtras) {
  Array u = i64({2, 1, 2, 3, 1, 1}, {2, 3});
  EXPECT_TRUE(array_eq(call("unique", {u}), DType::int64, {3}, {1, 2, 3}));
  Value all = named("unique", u,
                    {{"return_index", true}, {"return_inverse", true}, {"return_counts", true}});
  ASSERT_TRUE(all.is_list());
  const List& l = all.as_list();
  ASSERT_EQ(l.size(), 4u);
  EXPECT_TRUE(array_eq(l[0], DType::int64, {3}, {1, 2, 3}));
  EXPECT_TRUE(array_eq(l[1], DType::int64, {3}, {1, 0, 3}));
  EXPECT_TRUE(array_eq(l[2], DType::int64, {2, 3}, {1, 0, 1, 2, 0, 0}));
  EXPECT_TRUE(array_eq(l[3], DType::int64, {3}, {3, 2, 1}));
  Value counts = named("unique", f64({kNaN, 1, kNaN}), {{"return_counts", true}});
  ASSERT_TRUE(counts.is_list());
  ASSERT_EQ(counts.as_list().size(), 2u);
  EXPECT_TRUE(array_eq(counts.as_list()[0], DType::float64, {2}, {1, kNaN}));
  EXPECT_TRUE(array_eq(counts.as_list()[1], DType::int64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("unique", {b8({true, true})}), DType::bool_, {1}, {1}));
  EXPECT_TRUE(array_eq(call("unique", {Array::scalar(4.0)}), DType::float64, {1}, {4}));
  EXPECT_TRUE(array_eq(call("unique", {Array(DType::int64, {0})}), DType::int64, {0}, {}));
  Value inv = named("unique", Array::scalar(4.0), {{"return_inverse", true}});
  EXPECT_TRUE(array_eq(inv.as_list()[1], DType::int64, {}, {0}));
}

TEST(SortingSearchsorted, Sides) {
  Array a = i64({1, 2, 2, 3});
  EXPECT_TRUE(array_eq(call("searchsorted", {a, f64({2, 0, 5, 2.5})}), DType::int64, {4},
                       {1, 0, 4, 3}));
  EXPECT_TRUE(array_eq(call("searchsorted", {a, f64({2, 0, 5, 2.5}), "right"}), DType::int64, {4},
                       {3, 0, 4, 3}));
  EXPECT_TRUE(array_eq(call("searchsorted", {a, Value(int64_t{2})}), DType::int64, {}, {1}));
  EXPECT_TRUE(array_eq(call("searchsorted", {a, i64({3, 1, 0, 2}, {2, 2})}), DType::int64, {2, 2},
                       {3, 0, 0, 1}));
  EXPECT_TRUE(array_eq(call("searchsorted", {f64({1, kNaN}), f64({kNaN, 5})}), DType::int64, {2},
                       {1, 1}));
  EXPECT_TRUE(array_eq(call("searchsorted", {Array(DType::float64, {0}), f64({1, 2})}),
                       DType::int64, {2}, {0, 0}));
  // As numpy.searchsorted (NumPy 2), which makes the value an array first: a
  // Python float against float32 compares in float64 (float32(0.1) > 0.1), a
  // Python int against int32 in int64 (no overflow).
  EXPECT_TRUE(array_eq(call("searchsorted", {f32({0.1f, 0.2f}), Value(0.1), "right"}),
                       DType::int64, {}, {0}));
  EXPECT_TRUE(array_eq(call("searchsorted", {Array(DType::int32, {3}), Value(int64_t{1} << 40)}),
                       DType::int64, {}, {3}));
}

TEST(SortingSearchsorted, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("searchsorted", {ties(), Value(1)}); },
      "[searchsorted] argument 'a' must be 1-d: got shape (2, 4)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("searchsorted", {i64({1, 2}), Value(1), "middle"}); },
      "[searchsorted] argument 'side' must be 'left' or 'right': got 'middle'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("searchsorted", {i64({1, 2}), Value(1), 3}); },
                                     "[searchsorted] argument 'side' must be a string"));
}

TEST(SortingNonzero, Forms) {
  Array x = i64({0, 1, 2, 0, 0, 3}, {3, 2});
  Value nz = call("nonzero", {x});
  ASSERT_TRUE(nz.is_list());
  ASSERT_EQ(nz.as_list().size(), 2u);
  EXPECT_TRUE(array_eq(nz.as_list()[0], DType::int64, {3}, {0, 1, 2}));
  EXPECT_TRUE(array_eq(nz.as_list()[1], DType::int64, {3}, {1, 0, 1}));
  EXPECT_TRUE(array_eq(call("argwhere", {x}), DType::int64, {3, 2}, {0, 1, 1, 0, 2, 1}));
  EXPECT_TRUE(array_eq(call("flatnonzero", {x}), DType::int64, {3}, {1, 2, 5}));
  Value nz1 = call("nonzero", {f64({0, kNaN, -0.0, 2})});
  EXPECT_TRUE(array_eq(nz1.as_list()[0], DType::int64, {2}, {1, 3}));
  EXPECT_TRUE(array_eq(call("argwhere", {Array::scalar(3.0)}), DType::int64, {1, 0}, {}));
  EXPECT_TRUE(array_eq(call("argwhere", {Array::scalar(0.0)}), DType::int64, {0, 0}, {}));
  EXPECT_TRUE(array_eq(call("flatnonzero", {Array::scalar(3.0)}), DType::int64, {1}, {0}));
  EXPECT_TRUE(array_eq(call("flatnonzero", {b8({false, false})}), DType::int64, {0}, {}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("nonzero", {Array::scalar(1.0)}); },
      "[nonzero] nonzero of a 0-d array is not allowed"));
}

TEST(SortingBincount, CountsAndWeights) {
  EXPECT_TRUE(array_eq(call("bincount", {i64({1, 3, 1})}), DType::int64, {4}, {0, 2, 0, 1}));
  EXPECT_TRUE(array_eq(named("bincount", i64({1, 3, 1}), {{"weights", f64({0.5, 1, 2})},
                                                          {"minlength", 5}}),
                       DType::float64, {5}, {0, 2.5, 0, 1, 0}));
  EXPECT_TRUE(array_eq(named("bincount", i64({1, 3, 1}), {{"weights", i64({1, 2, 3})}}),
                       DType::float64, {4}, {0, 4, 0, 2}));
  EXPECT_TRUE(array_eq(call("bincount", {b8({true, false, true})}), DType::int64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("bincount", {Array(DType::int64, {0})}), DType::int64, {0}, {}));
  EXPECT_TRUE(array_eq(named("bincount", Array(DType::int64, {0}), {{"minlength", 2}}),
                       DType::int64, {2}, {0, 0}));
}

TEST(SortingBincount, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("bincount", {i64({1, -1})}); },
      "[bincount] argument 'x' must have no negative elements: got -1 at index 1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("bincount", i64({1}, {1}), {{"minlength", -1}}); },
      "[bincount] argument 'minlength' must not be negative: got -1"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("bincount", {f64({1.0}, {1})}); },
                                     "[bincount] argument 'x' must be an array of non-negative "
                                     "integers, got float64"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("bincount", {i64({1, 2, 3, 4}, {2, 2})}); },
      "[bincount] argument 'x' must be 1-d: got shape (2, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("bincount", {Array::scalar_int(1)}); },
      "[bincount] argument 'x' must be 1-d: got shape ()"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { named("bincount", i64({1, 2}), {{"weights", f64({1.0}, {1})}}); },
      "[bincount] weights and x must have the same length: shapes (1,) and (2,)"));
  EXPECT_TRUE(throws_with<MemoryError>(
      [] { call("bincount", {i64({std::numeric_limits<int64_t>::max()}, {1})}); }, "[bincount]"));
  EXPECT_TRUE(throws_with<MemoryError>(
      [] { call("bincount", {i64({int64_t{1} << 60}, {1})}); }, "too big"));
}

TEST(SortingRegistry, Help) {
  for (const char* name : {"sort", "argsort", "unique", "searchsorted", "nonzero", "argwhere",
                           "flatnonzero", "bincount"}) {
    const PrimitiveSpec* spec = find_primitive(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_EQ(spec->family, "sorting");
    EXPECT_FALSE(spec->help.empty());
  }
  EXPECT_EQ(find_primitive("searchsorted")->signature(), "searchsorted(a, v, side='left')");
}
