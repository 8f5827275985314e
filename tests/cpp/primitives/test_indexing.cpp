#include <numeric>

#include "tessera/core/error.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

List ints(std::initializer_list<int64_t> v) { return List(v.begin(), v.end()); }

Value sl(std::optional<int64_t> a, std::optional<int64_t> b, std::optional<int64_t> c = {}) {
  return Value(Slice{a, b, c});
}

Array iota(Shape shape) {
  Array a(DType::float64, shape);
  std::iota(a.data<double>(), a.data<double>() + a.size(), 0.0);
  return a;
}

Value get(Value x, std::vector<Value> idx) {
  idx.insert(idx.begin(), std::move(x));
  return call("getitem", std::move(idx));
}

Value set(Value x, Value v, std::vector<Value> idx) {
  idx.insert(idx.begin(), std::move(v));
  idx.insert(idx.begin(), std::move(x));
  return call("setitem", std::move(idx));
}

}  // namespace

TEST(IndexingSlice, BuildsSliceValues) {
  Value s = call("slice", {int64_t{1}, Value(), int64_t{-1}});
  ASSERT_TRUE(s.is_slice());
  EXPECT_EQ(s.as_slice(), (Slice{1, std::nullopt, -1}));
  EXPECT_EQ(call("slice", {}).as_slice(), Slice{});
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("slice", {int64_t{0}, int64_t{3}, int64_t{0}}); }, "[slice] slice step cannot be zero"));
}

TEST(IndexingBasic, IntsSlicesNewaxisEllipsis) {
  Value x = iota({3, 4});
  EXPECT_TRUE(array_eq(get(x, {int64_t{1}}), DType::float64, {4}, {4, 5, 6, 7}));
  EXPECT_TRUE(array_eq(get(x, {int64_t{-1}, int64_t{-1}}), DType::float64, {}, {11}));
  EXPECT_TRUE(array_eq(get(x, {sl({}, {}, -1)}), DType::float64, {3, 4},
                       {8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_TRUE(array_eq(get(x, {sl({}, {}), sl(3, 0, -2)}), DType::float64, {3, 2},
                       {3, 1, 7, 5, 11, 9}));
  EXPECT_TRUE(array_eq(get(x, {sl(-100, 100), sl(-1, {}, -3)}), DType::float64, {3, 2},
                       {3, 0, 7, 4, 11, 8}));
  EXPECT_TRUE(array_eq(get(x, {sl(2, 2)}), DType::float64, {0, 4}, {}));
  EXPECT_TRUE(array_eq(get(x, {Value()}), DType::float64, {1, 3, 4},
                       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(array_eq(get(x, {sl({}, {}), Value(), int64_t{0}}), DType::float64, {3, 1},
                       {0, 4, 8}));
  EXPECT_TRUE(array_eq(get(x, {"...", int64_t{1}}), DType::float64, {3}, {1, 5, 9}));
  EXPECT_TRUE(array_eq(get(x, {int64_t{2}, "..."}), DType::float64, {4}, {8, 9, 10, 11}));
  EXPECT_TRUE(array_eq(get(x, {"...", Value()}), DType::float64, {3, 4, 1},
                       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(array_eq(get(i64({1, 2, 3}), {sl(1, {})}), DType::int64, {2}, {2, 3}));
  EXPECT_TRUE(array_eq(get(b8({true, false, true}), {int64_t{1}}), DType::bool_, {}, {0}));
  EXPECT_TRUE(array_eq(get(f32({1, 2, 3, 4}, {2, 2}), {sl({}, {}), int64_t{1}}), DType::float32,
                       {2}, {2, 4}));
  Value zero_d = f64({5});
  EXPECT_TRUE(array_eq(get(zero_d, {}), DType::float64, {}, {5}));
  EXPECT_TRUE(array_eq(get(zero_d, {Value()}), DType::float64, {1}, {5}));
  EXPECT_TRUE(array_eq(get(zero_d, {"..."}), DType::float64, {}, {5}));
  EXPECT_TRUE(array_eq(get(7.0, {Value()}), DType::float64, {1}, {7}));
}

TEST(IndexingBasic, Errors) {
  Value x = iota({3, 4});
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {int64_t{5}}); }, "[getitem] index 5 is out of bounds for axis 0 with size 3"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {int64_t{0}, int64_t{-5}}); },
      "[getitem] index -5 is out of bounds for axis 1 with size 4"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [] { get(f64({5}), {int64_t{0}}); },
      "[getitem] too many indices for array: array is 0-dimensional, but 1 were indexed"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {int64_t{0}, int64_t{0}, int64_t{0}}); },
      "too many indices for array: array is 2-dimensional, but 3 were indexed"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {"...", "..."}); }, "[getitem] an index can only have a single ellipsis"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { get(x, {1.5}); },
                                             "[getitem] only integers, slices, nil (newaxis)"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { get(x, {"a"}); }, "got string 'a'"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {f64({0, 1})}); },
      "[getitem] arrays used as indices must be of integer or boolean type, got float64"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { get(x, {true}); }, "[getitem] boolean scalar indices are not supported"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { get(x, {sl(0, 2, 0)}); }, "[getitem] slice step cannot be zero"));
}

TEST(IndexingAdvanced, IntegerArrays) {
  Value x = iota({3, 4});
  EXPECT_TRUE(array_eq(get(x, {ints({0, 2})}), DType::float64, {2, 4},
                       {0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_TRUE(array_eq(get(x, {ints({0, 2}), ints({1, -1})}), DType::float64, {2}, {1, 11}));
  EXPECT_TRUE(array_eq(get(x, {i64({0, 2}, {2, 1}), ints({1, 3})}), DType::float64, {2, 2},
                       {1, 3, 9, 11}));
  EXPECT_TRUE(array_eq(get(x, {sl(1, {}), ints({0, -1})}), DType::float64, {2, 2},
                       {4, 7, 8, 11}));
  EXPECT_TRUE(array_eq(get(x, {List{}}), DType::float64, {0, 4}, {}));
  // An empty selection writes nothing (and reads no index table).
  std::vector<double> x_values(12);
  std::iota(x_values.begin(), x_values.end(), 0.0);
  EXPECT_TRUE(array_eq(call("index_add", {x, 1.0, List{}}), DType::float64, {3, 4}, x_values));
  EXPECT_TRUE(
      array_eq(call("index_add", {x, 1.0, sl({}, {}), List{}}), DType::float64, {3, 4}, x_values));
  EXPECT_TRUE(array_eq(get(i64({5, 6, 7}), {i64({2, 2, 0, 1}, {2, 2})}), DType::int64, {2, 2},
                       {7, 7, 5, 6}));
  Value z = iota({2, 3, 4});
  // Adjacent advanced indices stay in place.
  EXPECT_TRUE(array_eq(get(z, {sl({}, {}), ints({0, 2}), ints({1, 3})}), DType::float64, {2, 2},
                       {1, 11, 13, 23}));
  // Separated by a slice: the broadcast dimensions go first.
  EXPECT_TRUE(array_eq(get(z, {ints({0, 1}), sl({}, {}), ints({0, 1})}), DType::float64, {2, 3},
                       {0, 4, 8, 13, 17, 21}));
  // An integer counts as an advanced index next to arrays (NumPy's rule).
  EXPECT_TRUE(array_eq(get(z, {int64_t{0}, sl({}, {}), ints({1, 2})}), DType::float64, {2, 3},
                       {1, 5, 9, 2, 6, 10}));
  EXPECT_TRUE(array_eq(get(z, {sl({}, {}), int64_t{1}, ints({0, 3})}), DType::float64, {2, 2},
                       {4, 7, 16, 19}));
  EXPECT_TRUE(array_eq(get(z, {"...", ints({3})}), DType::float64, {2, 3, 1},
                       {3, 7, 11, 15, 19, 23}));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {ints({0, 1}), ints({0, 1, 2})}); },
      "[getitem] shape mismatch: indexing arrays could not be broadcast together with shapes (2,) "
      "(3,)"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {sl({}, {}), ints({0, 4})}); },
      "[getitem] index 4 is out of bounds for axis 1 with size 4"));
}

TEST(IndexingAdvanced, BooleanMasks) {
  Value x = iota({3, 4});
  Array mask(DType::bool_, {3, 4});
  for (int64_t i = 0; i < 12; ++i) mask.data<bool>()[i] = i > 6 && i % 2 == 1;
  EXPECT_TRUE(array_eq(get(x, {mask}), DType::float64, {3}, {7, 9, 11}));
  EXPECT_TRUE(array_eq(get(x, {b8({true, false, true})}), DType::float64, {2, 4},
                       {0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_TRUE(array_eq(get(x, {sl({}, {}), b8({false, true, false, true})}), DType::float64,
                       {3, 2}, {1, 3, 5, 7, 9, 11}));
  EXPECT_TRUE(array_eq(get(x, {b8({false, false, false})}), DType::float64, {0, 4}, {}));
  EXPECT_TRUE(array_eq(get(x, {List{true, false, true}, int64_t{0}}), DType::float64, {2}, {0, 8}));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {b8({true, false})}); },
      "[getitem] boolean index did not match indexed array along axis 0; size of axis is 3 but "
      "size of corresponding boolean axis is 2"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(x, {sl({}, {}), b8({true, false})}); }, "along axis 1; size of axis is 4"));
}

TEST(IndexingList, ListsTakeIntAndSlice) {
  Value l = List{int64_t{1}, "b", 3.0};
  EXPECT_TRUE(get(l, {int64_t{-1}}).equals(Value(3.0)));
  EXPECT_TRUE(get(l, {sl({}, {}, -2)}).equals(Value(List{3.0, int64_t{1}})));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { get(l, {int64_t{3}}); }, "[getitem] list index 3 out of range (length 3)"));
  EXPECT_TRUE(throws_with<TypeError>([&] { get(l, {int64_t{0}, int64_t{0}}); },
                                     "[getitem] list indices must be integers or slices, not tuple"));
  EXPECT_TRUE(throws_with<TypeError>([&] { get(l, {1.0}); },
                                     "[getitem] list indices must be integers or slices, not float"));
  // NumPy integers and bools index lists, as in Python.
  EXPECT_TRUE(get(l, {Array::scalar_int(1)}).equals(Value("b")));
  EXPECT_TRUE(get(l, {true}).equals(Value("b")));
}

TEST(IndexingList, TuplesStringsAndDicts) {
  Value t = Value::tuple(List{int64_t{1}, int64_t{2}, int64_t{3}});
  Value s = get(t, {sl(int64_t{1}, {})});
  EXPECT_TRUE(s.is_tuple() && s.equals(Value::tuple(List{int64_t{2}, int64_t{3}})));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { get(t, {int64_t{5}}); },
                                             "[getitem] tuple index 5 out of range"));
  Value str("h\xc3\xa9llo");  // UTF-8: indices count characters
  EXPECT_EQ(get(str, {int64_t{1}}).as_string(), "\xc3\xa9");
  EXPECT_EQ(get(str, {sl({}, {}, -1)}).as_string(), "oll\xc3\xa9h");
  EXPECT_TRUE(throws_with<TypeError>([&] { get(str, {1.5}); },
                                     "[getitem] str indices must be integers, not float"));
  Dict d;
  d.set(Value("a"), Value(int64_t{1}));
  d.set(Value::tuple(List{int64_t{1}, int64_t{2}}), Value("pair"));
  Value dv(d);
  EXPECT_TRUE(get(dv, {Value("a")}).equals(Value(int64_t{1})));
  EXPECT_TRUE(get(dv, {int64_t{1}, int64_t{2}}).equals(Value("pair")));
  EXPECT_TRUE(throws_with<KeyError>([&] { get(dv, {Value("b")}); },
                                    "[getitem] key 'b' is not in the dict"));
  EXPECT_TRUE(throws_with<TypeError>([&] { get(dv, {Value(List{1})}); },
                                     "[getitem] unhashable type: 'list'"));
}

TEST(IndexingTuple, ATupleIndexIsMultiDimensional) {
  Array x = iota({3, 4});
  Value one = get(x, {Value::tuple(List{int64_t{1}, int64_t{2}})});
  EXPECT_TRUE(array_eq(one, DType::float64, {}, {6}));
  // A list stays an integer array index: rows 1 and 2.
  Value rows = get(x, {Value(List{int64_t{1}, int64_t{2}})});
  EXPECT_EQ(rows.as_array().shape(), (Shape{2, 4}));
}

TEST(IndexingSet, WritesIntoTheArray) {
  // setitem writes into x's buffer, as NumPy does, and gives x itself.
  Array x = iota({3, 4});
  Value r = set(x, int64_t{0}, {int64_t{1}});
  EXPECT_TRUE(array_eq(r, DType::float64, {3, 4}, {0, 1, 2, 3, 0, 0, 0, 0, 8, 9, 10, 11}));
  EXPECT_TRUE(r.as_array().shares_storage(x));
  EXPECT_EQ(x.data<double>()[4], 0.0);
  auto fresh = [] { return iota({3, 4}); };
  auto check = [&](const Value& value, List idx, std::vector<double> expected) {
    Array y = fresh();
    Value out = set(y, value, std::move(idx));
    return array_eq(Value(y), DType::float64, {3, 4}, expected) &&
           out.as_array().shares_storage(y);
  };
  EXPECT_TRUE(check(f64({10, 20, 30}), {sl({}, {}), int64_t{0}},
                    {10, 1, 2, 3, 20, 5, 6, 7, 30, 9, 10, 11}));
  EXPECT_TRUE(check(f64({1, 2, 3, 4}), {"..."}, {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_TRUE(check(f64({-1, -2}, {2, 1}), {sl(0, {}, 2), sl(1, 3)},
                    {0, -1, -1, 3, 4, 5, 6, 7, 8, -2, -2, 11}));
  EXPECT_TRUE(check(f64({1, 2, 3, 4}, {1, 4}), {int64_t{0}}, {1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11}));
  Array mask(DType::bool_, {3, 4});
  for (int64_t i = 0; i < 12; ++i) mask.data<bool>()[i] = i % 5 == 0;
  EXPECT_TRUE(check(-1.0, {mask}, {-1, 1, 2, 3, 4, -1, 6, 7, 8, 9, -1, 11}));
  EXPECT_TRUE(check(f64({5, 6}), {ints({0, 0}), ints({1, 1})}, {0, 6, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(check(1.0, {sl(2, 2)}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  // A value overlapping the target is read whole before it is written (NumPy).
  Array y = fresh();
  Value rev = get(y, {sl({}, {}, -1)});
  set(y, rev, {sl({}, {})});
  EXPECT_TRUE(array_eq(Value(y), DType::float64, {3, 4}, {8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_TRUE(array_eq(set(i64({1, 2, 3}), 2.7, {sl(1, {})}), DType::int64, {3}, {1, 2, 2}));
  EXPECT_TRUE(array_eq(set(b8({false, false}), int64_t{5}, {int64_t{0}}), DType::bool_, {2},
                       {1, 0}));
  EXPECT_TRUE(array_eq(set(f64({5}), 1.0, {}), DType::float64, {}, {1}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { set(x, f64({1, 2, 3}), {int64_t{0}}); },
      "[setitem] could not broadcast input array from shape (3,) into shape (4,)"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { set(x, 1.0, {int64_t{3}}); },
                                             "[setitem] index 3 is out of bounds for axis 0 with size 3"));
  EXPECT_TRUE(throws_with<TypeError>([&] { set(x, "a", {int64_t{0}}); },
                                     "[setitem] argument 'value' must be a number or an array"));
  EXPECT_TRUE(throws_with<TypeError>([&] { set(Value(3.0), 1.0, {int64_t{0}}); },
                                     "does not support item assignment"));
  // A broadcast view is read-only, as in NumPy.
  Value b = call_primitive("broadcast_to", std::vector<Value>{f64({1, 2}), List{int64_t{3}, int64_t{2}}});
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { set(b, 1.0, {int64_t{0}}); },
                                                 "[setitem] assignment destination is read-only"));
}

TEST(IndexingGet, BasicIndexingGivesViews) {
  Array x = iota({3, 4});
  Value row = get(x, {int64_t{1}});
  Value col = get(x, {sl({}, {}), int64_t{2}});
  Value rev = get(x, {sl({}, {}, -1), sl(1, {}, 2)});
  EXPECT_TRUE(row.as_array().shares_storage(x));
  EXPECT_TRUE(col.as_array().shares_storage(x));
  EXPECT_FALSE(col.as_array().is_contiguous());
  EXPECT_TRUE(array_eq(Value(col.as_array().contiguous()), DType::float64, {3}, {2, 6, 10}));
  EXPECT_TRUE(array_eq(Value(rev.as_array().contiguous()), DType::float64, {3, 2}, {9, 11, 5, 7, 1, 3}));
  // A write into x is seen through the views; a write through a view lands in x.
  set(x, 100.0, {int64_t{1}, int64_t{2}});
  EXPECT_EQ(col.as_array().get_double(1), 100.0);
  EXPECT_EQ(row.as_array().get_double(2), 100.0);
  set(col, -1.0, {int64_t{0}});
  EXPECT_EQ(x.data<double>()[2], -1.0);
  // A single element is a value of its own; advanced indexing copies.
  Value one = get(x, {int64_t{0}, int64_t{0}});
  Value fancy = get(x, {ints({0, 2})});
  EXPECT_FALSE(one.as_array().shares_storage(x));
  EXPECT_FALSE(fancy.as_array().shares_storage(x));
  // Other primitives see views packed into contiguous arrays.
  EXPECT_TRUE(array_eq(call_primitive("add", std::vector<Value>{col, 1.0}), DType::float64, {3},
                       {0, 101, 11}));
}

TEST(IndexingTake, TakeAndTakeAlongAxis) {
  Value x = iota({3, 4});
  EXPECT_TRUE(array_eq(call("take", {x, ints({0, 2}), int64_t{1}}), DType::float64, {3, 2},
                       {0, 2, 4, 6, 8, 10}));
  EXPECT_TRUE(array_eq(call("take", {x, int64_t{5}}), DType::float64, {}, {5}));
  EXPECT_TRUE(array_eq(call("take", {x, i64({0, 11}, {1, 2})}), DType::float64, {1, 2}, {0, 11}));
  EXPECT_TRUE(array_eq(call("take", {x, int64_t{-1}, int64_t{0}}), DType::float64, {4},
                       {8, 9, 10, 11}));
  EXPECT_TRUE(array_eq(call("take", {i64({4, 5}), List{}}), DType::int64, {0}, {}));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { call("take", {x, int64_t{12}}); }, "[take] index 12 is out of bounds for axis 0 with size 12"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("take", {x, int64_t{0}, int64_t{2}}); },
                                             "[take] axis 2 is out of bounds"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("take", {x, "a"}); },
                                     "[take] argument 'indices' must be an int or an integer array"));

  Value m = i64({10, 30, 20, 60, 40, 50}, {2, 3});
  Value idx = i64({0, 2, 1, 1, 2, 0}, {2, 3});
  EXPECT_TRUE(array_eq(call("take_along_axis", {m, idx, int64_t{1}}), DType::int64, {2, 3},
                       {10, 20, 30, 40, 50, 60}));
  EXPECT_TRUE(array_eq(call("take_along_axis", {m, i64({1, 0, -1}, {1, 3}), int64_t{0}}),
                       DType::int64, {1, 3}, {60, 30, 50}));
  EXPECT_TRUE(array_eq(call("take_along_axis", {m, i64({2, 0}, {2, 1}), int64_t{-1}}),
                       DType::int64, {2, 1}, {20, 60}));
  EXPECT_TRUE(array_eq(call("take_along_axis", {f64({1, 2}, {1, 2}), i64({1, 0, 1}, {3, 1}),
                                                int64_t{1}}),
                       DType::float64, {3, 1}, {2, 1, 2}));
  EXPECT_TRUE(array_eq(call("take_along_axis", {m, i64({5, 0}), Value()}), DType::int64, {2},
                       {50, 10}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("take_along_axis", {m, i64({0, 1}), int64_t{1}}); },
      "[take_along_axis] indices and x must have the same number of dimensions, got 1 and 2"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { call("take_along_axis", {m, f64({0, 1}, {1, 2}), int64_t{1}}); },
      "[take_along_axis] indices must be an integer array, got float64"));
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [&] { call("take_along_axis", {m, i64({3}, {1, 1}), int64_t{1}}); },
      "[take_along_axis] index 3 is out of bounds for axis 1 with size 3"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("take_along_axis", {m, i64({0, 0, 0, 0}, {4, 1}), int64_t{1}}); },
      "[take_along_axis] shape mismatch"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("take_along_axis", {m, i64({0, 0, 0, 0}, {2, 2}), Value()}); },
      "[take_along_axis] when axis is nil, indices must be 1-d"));
}
