#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

List ints(std::initializer_list<int64_t> v) {
  return List(v.begin(), v.end());
}

// 0, 1, ..., n-1 as float64 of the given shape.
Array iota(Shape shape) {
  int64_t n = shape_size(shape);
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  Array a(DType::float64, shape);
  std::copy(v.begin(), v.end(), a.data<double>());
  return a;
}

}  // namespace

TEST(ShapeReshape, ReshapeRavelSqueezeExpand) {
  Value x = iota({2, 3});
  EXPECT_TRUE(array_eq(call("reshape", {x, ints({3, 2})}), DType::float64, {3, 2},
                       {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(array_eq(call("reshape", {x, ints({-1, 2})}), DType::float64, {3, 2},
                       {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(array_eq(call("reshape", {x, int64_t{-1}}), DType::float64, {6}, {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(array_eq(call("reshape", {f64({7}), ints({1, 1})}), DType::float64, {1, 1}, {7}));
  EXPECT_TRUE(array_eq(call("reshape", {Array(DType::int64, {0, 3}), ints({-1})}), DType::int64,
                       {0}, {}));
  EXPECT_TRUE(array_eq(call("ravel", {x}), DType::float64, {6}, {0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(array_eq(call("flatten", {int64_t{4}}), DType::int64, {1}, {4}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("reshape", {x, ints({4})}); },
                                                 "[reshape] cannot reshape array of size 6 into shape (4,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("reshape", {x, ints({-1, -1})}); },
                                                 "[reshape] can only specify one unknown dimension"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("reshape", {x, ints({-2, -3})}); },
                                                 "[reshape] negative dimensions are not allowed"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("reshape", {x, ints({0, -1})}); }, "[reshape] cannot reshape array of size 6 into shape (0, -1)"));

  Value y = iota({1, 3, 1});
  EXPECT_TRUE(array_eq(call("squeeze", {y}), DType::float64, {3}, {0, 1, 2}));
  EXPECT_TRUE(array_eq(call("squeeze", {y, int64_t{-1}}), DType::float64, {1, 3}, {0, 1, 2}));
  EXPECT_TRUE(array_eq(call("squeeze", {f64({5})}), DType::float64, {}, {5}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("squeeze", {y, int64_t{1}}); },
      "[squeeze] cannot select an axis to squeeze out which has size not equal to one: axis 1 has "
      "size 3"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("squeeze", {y, int64_t{3}}); },
                                             "[squeeze] axis 3 is out of bounds for array of dimension 3"));
  EXPECT_TRUE(array_eq(call("expand_dims", {f64({1, 2}), int64_t{0}}), DType::float64, {1, 2},
                       {1, 2}));
  EXPECT_TRUE(array_eq(call("expand_dims", {f64({1, 2}), int64_t{-1}}), DType::float64, {2, 1},
                       {1, 2}));
  EXPECT_TRUE(array_eq(call("expand_dims", {f64({1, 2}), ints({0, 2})}), DType::float64,
                       {1, 2, 1}, {1, 2}));
  EXPECT_TRUE(array_eq(call("expand_dims", {3.0, int64_t{0}}), DType::float64, {1}, {3}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("expand_dims", {f64({1, 2}), ints({0, 0})}); }, "[expand_dims] repeated axis: (0, 0)"));
}

TEST(ShapeTranspose, PermutationsAndBlocking) {
  Value x = iota({2, 3});
  EXPECT_TRUE(array_eq(call("transpose", {x}), DType::float64, {3, 2}, {0, 3, 1, 4, 2, 5}));
  Value z = iota({2, 3, 4});
  Value t = call("transpose", {z, ints({1, 2, 0})});
  ASSERT_EQ(t.as_array().shape(), (Shape{3, 4, 2}));
  // t[i, j, k] = z[k, i, j] = 12k + 4i + j
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 2; ++k)
        EXPECT_EQ(t.as_array().get_double((i * 4 + j) * 2 + k), 12 * k + 4 * i + j);
  EXPECT_TRUE(array_eq(call("transpose", {z, ints({-1, 0, 1})}), DType::float64, {4, 2, 3},
                       {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22,
                        3, 7, 11, 15, 19, 23}));
  EXPECT_TRUE(array_eq(call("transpose", {i64({4})}), DType::int64, {}, {4}));
  // Large enough for the blocked, tiled path, with odd sizes.
  const int64_t r = 301, c = 517;
  Array big = iota({r, c}).astype(DType::float32);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Array bt = call("copy", {call("transpose", {big})}).as_array();  // packs the view, tiled
    ASSERT_EQ(bt.shape(), (Shape{c, r}));
    bool ok = true;
    for (int64_t i = 0; i < c && ok; ++i)
      for (int64_t j = 0; j < r && ok; ++j) ok = bt.data<float>()[i * r + j] == float(j * c + i);
    EXPECT_TRUE(ok) << threads;
  }
  EXPECT_TRUE(array_eq(call("swapaxes", {z, int64_t{0}, int64_t{-1}}), DType::float64, {4, 3, 2},
                       {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22,
                        3, 15, 7, 19, 11, 23}));
  EXPECT_EQ(call("moveaxis", {z, int64_t{0}, int64_t{-1}}).as_array().shape(), (Shape{3, 4, 2}));
  EXPECT_TRUE(call("moveaxis", {z, int64_t{0}, int64_t{-1}})
                  .equals(call("transpose", {z, ints({1, 2, 0})})));
  EXPECT_TRUE(call("moveaxis", {z, ints({0, 1}), ints({-1, 0})})
                  .equals(call("transpose", {z, ints({1, 2, 0})})));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("transpose", {z, ints({0, 1})}); },
                                                 "[transpose] axes don't match array: got 2 axes for an array of dimension 3"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("transpose", {z, ints({0, 1, 1})}); },
                                                 "[transpose] repeated axis: (0, 1, 1)"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("swapaxes", {x, int64_t{0}, int64_t{2}}); },
                                             "[swapaxes] axis 2 is out of bounds"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("moveaxis", {z, ints({0, 1}), ints({0})}); },
      "[moveaxis] source and destination must have the same number of elements, got 2 and 1"));
}

TEST(ShapeJoin, ConcatenateStack) {
  Value a = i64({1, 2, 3, 4}, {2, 2}), b = f32({5, 6}, {1, 2});
  EXPECT_TRUE(array_eq(call("concatenate", {List{a, b}}), DType::float64, {3, 2},
                       {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(array_eq(call("concatenate", {List{a, i64({7, 8}, {2, 1})}, int64_t{-1}}),
                       DType::int64, {2, 3}, {1, 2, 7, 3, 4, 8}));
  EXPECT_TRUE(array_eq(call("concatenate", {List{a, b}, Value()}), DType::float64, {6},
                       {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(array_eq(call("concatenate", {List{Array(DType::bool_, {0}), b8({true}, {1})}}),
                       DType::bool_, {1}, {1}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("concatenate", {List{}}); },
                                                 "[concatenate] need at least one array"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("concatenate", {List{1.0, 2.0}}); },
                                                 "[concatenate] zero-dimensional arrays cannot be concatenated"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("concatenate", {List{a, f64({1, 2})}}); },
      "array at index 0 has 2 dimension(s) and the array at index 1 has 1 dimension(s)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("concatenate", {List{a, i64({1, 2, 3}, {1, 3})}}); },
      "along dimension 1, the array at index 0 has size 2 and the array at index 1 has size 3"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("concatenate", {"a"}); },
                                     "[concatenate] argument 'arrays' must be a list of arrays"));

  Value p = f64({1, 2}), q = f64({3, 4});
  EXPECT_TRUE(array_eq(call("stack", {List{p, q}}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("stack", {List{p, q}, int64_t{-1}}), DType::float64, {2, 2},
                       {1, 3, 2, 4}));
  EXPECT_TRUE(array_eq(call("stack", {List{1.0, 2.0}}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("stack", {List{p, f64({1, 2, 3})}}); },
      "[stack] all input arrays must have the same shape, but the array at index 0 has shape (2,) "
      "and the array at index 1 has shape (3,)"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("stack", {List{p, q}, int64_t{2}}); },
                                             "[stack] axis 2 is out of bounds for array of dimension 2"));

  EXPECT_TRUE(array_eq(call("hstack", {p, q}), DType::float64, {4}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("hstack", {List{p, q}}), DType::float64, {4}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("hstack", {a, i64({9, 9}, {2, 1})}), DType::int64, {2, 3},
                       {1, 2, 9, 3, 4, 9}));
  EXPECT_TRUE(array_eq(call("vstack", {p, q}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("vstack", {a, p}), DType::float64, {3, 2}, {1, 2, 3, 4, 1, 2}));
  EXPECT_TRUE(array_eq(call("dstack", {p, q}), DType::float64, {1, 2, 2}, {1, 3, 2, 4}));
}

TEST(ShapeSplit, Sections) {
  Value x = iota({6});
  Value parts = call("split", {x, int64_t{3}});
  ASSERT_EQ(parts.as_list().size(), 3u);
  EXPECT_TRUE(array_eq(parts.as_list()[2], DType::float64, {2}, {4, 5}));
  Value at = call("split", {x, ints({1, 4, 10})});
  ASSERT_EQ(at.as_list().size(), 4u);
  EXPECT_TRUE(array_eq(at.as_list()[0], DType::float64, {1}, {0}));
  EXPECT_TRUE(array_eq(at.as_list()[1], DType::float64, {3}, {1, 2, 3}));
  EXPECT_TRUE(array_eq(at.as_list()[2], DType::float64, {2}, {4, 5}));
  EXPECT_TRUE(array_eq(at.as_list()[3], DType::float64, {0}, {}));
  Value m = iota({2, 4});
  Value cols = call("split", {m, int64_t{2}, int64_t{-1}});
  EXPECT_TRUE(array_eq(cols.as_list()[1], DType::float64, {2, 2}, {2, 3, 6, 7}));
  Value neg = call("split", {x, ints({-2})});
  EXPECT_TRUE(array_eq(neg.as_list()[1], DType::float64, {2}, {4, 5}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("split", {iota({7}), int64_t{3}}); },
      "[split] array split does not result in an equal division: 7 elements into 3 sections"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("split", {x, int64_t{0}}); },
                                                 "[split] argument 'indices_or_sections' must be a positive"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("split", {1.0, int64_t{1}}); },
                                                 "[split] cannot split a 0-d array"));
}

TEST(ShapeReorder, FlipRoll) {
  Value x = iota({2, 3});
  EXPECT_TRUE(array_eq(call("flip", {x}), DType::float64, {2, 3}, {5, 4, 3, 2, 1, 0}));
  EXPECT_TRUE(array_eq(call("flip", {x, int64_t{-1}}), DType::float64, {2, 3}, {2, 1, 0, 5, 4, 3}));
  EXPECT_TRUE(array_eq(call("flip", {x, int64_t{0}}), DType::float64, {2, 3}, {3, 4, 5, 0, 1, 2}));
  EXPECT_TRUE(array_eq(call("flip", {Array(DType::int64, {0})}), DType::int64, {0}, {}));
  EXPECT_TRUE(array_eq(call("flip", {b8({true, false, false})}), DType::bool_, {3}, {0, 0, 1}));
  EXPECT_TRUE(array_eq(call("roll", {x, int64_t{1}}), DType::float64, {2, 3}, {5, 0, 1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("roll", {x, int64_t{-1}, int64_t{1}}), DType::float64, {2, 3},
                       {1, 2, 0, 4, 5, 3}));
  EXPECT_TRUE(array_eq(call("roll", {x, ints({1, 4}), ints({0, 1})}), DType::float64, {2, 3},
                       {5, 3, 4, 2, 0, 1}));
  EXPECT_TRUE(array_eq(call("roll", {Array(DType::float64, {0}), int64_t{3}}), DType::float64,
                       {0}, {}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("roll", {x, ints({1, 2}), ints({0, 1, 1})}); },
      "[roll] shift and axis must have the same length, got 2 and 3"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("flip", {x, int64_t{2}}); },
                                             "[flip] axis 2 is out of bounds"));
}

TEST(ShapeRepeat, TileRepeat) {
  Value x = i64({1, 2});
  EXPECT_TRUE(array_eq(call("tile", {x, int64_t{2}}), DType::int64, {4}, {1, 2, 1, 2}));
  EXPECT_TRUE(array_eq(call("tile", {x, ints({2, 2})}), DType::int64, {2, 4},
                       {1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_TRUE(array_eq(call("tile", {i64({1, 2, 3, 4}, {2, 2}), int64_t{2}}), DType::int64,
                       {2, 4}, {1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(array_eq(call("tile", {x, int64_t{0}}), DType::int64, {0}, {}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("tile", {x, int64_t{-1}}); },
                                                 "[tile] argument 'reps' must be non-negative"));
  EXPECT_TRUE(array_eq(call("repeat", {x, int64_t{2}}), DType::int64, {4}, {1, 1, 2, 2}));
  EXPECT_TRUE(array_eq(call("repeat", {x, ints({0, 3})}), DType::int64, {3}, {2, 2, 2}));
  Value m = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(array_eq(call("repeat", {m, int64_t{2}, int64_t{1}}), DType::float64, {2, 4},
                       {1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_TRUE(array_eq(call("repeat", {m, ints({1, 2}), int64_t{0}}), DType::float64, {3, 2},
                       {1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(array_eq(call("repeat", {m, int64_t{2}}), DType::float64, {8},
                       {1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_TRUE(array_eq(call("repeat", {int64_t{7}, int64_t{3}}), DType::int64, {3}, {7, 7, 7}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("repeat", {x, ints({1, 2, 3})}); },
                                                 "[repeat] repeats of length 3 do not match axis 0 of size 2"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("repeat", {x, int64_t{-1}}); },
                                                 "[repeat] argument 'repeats' may not contain negative values"));
}

TEST(ShapePad, Modes) {
  Value x = i64({1, 2, 3});
  EXPECT_TRUE(array_eq(call("pad", {x, int64_t{1}}), DType::int64, {5}, {0, 1, 2, 3, 0}));
  EXPECT_TRUE(array_eq(call("pad", {x, ints({2, 1}), "constant", int64_t{9}}), DType::int64, {6},
                       {9, 9, 1, 2, 3, 9}));
  EXPECT_TRUE(array_eq(call("pad", {x, ints({2, 2}), "edge"}), DType::int64, {7},
                       {1, 1, 1, 2, 3, 3, 3}));
  EXPECT_TRUE(array_eq(call("pad", {x, ints({2, 3}), "reflect"}), DType::int64, {8},
                       {3, 2, 1, 2, 3, 2, 1, 2}));
  EXPECT_TRUE(array_eq(call("pad", {x, ints({5, 0}), "reflect"}), DType::int64, {8},
                       {2, 1, 2, 3, 2, 1, 2, 3}));
  Value m = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(array_eq(call("pad", {m, List{ints({1, 0}), ints({0, 1})}}), DType::float64, {3, 3},
                       {0, 0, 0, 1, 2, 0, 3, 4, 0}));
  EXPECT_TRUE(array_eq(call("pad", {m, List{ints({0, 1})}, "edge"}), DType::float64, {3, 3},
                       {1, 2, 2, 3, 4, 4, 3, 4, 4}));
  EXPECT_TRUE(array_eq(call("pad", {f64({5}, {1}), int64_t{2}, "reflect"}), DType::float64, {5},
                       {5, 5, 5, 5, 5}));
  EXPECT_TRUE(array_eq(call("pad", {Array(DType::float64, {0}), int64_t{1}, "constant", 2.5}),
                       DType::float64, {2}, {2.5, 2.5}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("pad", {x, int64_t{-1}}); },
                                                 "[pad] argument 'pad_width' can't contain negative values"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("pad", {x, int64_t{1}, "wrap"}); },
                                                 "[pad] argument 'mode' must be 'constant', 'edge' or 'reflect', got 'wrap'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("pad", {m, List{ints({1, 0}), ints({0, 1}), ints({0, 1})}}); },
                                                 "[pad] argument 'pad_width' must be an int, a pair or one pair per axis (2 axes)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("pad", {Array(DType::float64, {0}), int64_t{1}, "edge"}); },
      "[pad] can't extend empty axis 0 using mode 'edge'"));
}

TEST(ShapeInfo, BroadcastShapeNdimSize) {
  Value x = i64({1, 2, 3});
  EXPECT_TRUE(array_eq(call("broadcast_to", {x, ints({2, 3})}), DType::int64, {2, 3},
                       {1, 2, 3, 1, 2, 3}));
  EXPECT_TRUE(array_eq(call("broadcast_to", {f64({1, 2}, {2, 1}), ints({2, 2})}), DType::float64,
                       {2, 2}, {1, 1, 2, 2}));
  EXPECT_TRUE(array_eq(call("broadcast_to", {2.0, ints({2})}), DType::float64, {2}, {2, 2}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("broadcast_to", {x, ints({4})}); },
      "[broadcast_to] cannot broadcast array of shape (3,) to shape (4,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("broadcast_to", {f64({1, 2}, {2, 1}), ints({2})}); },
      "[broadcast_to] cannot broadcast array of shape (2, 1) to shape (2,)"));
  Value s = call("shape", {iota({2, 0, 3})});
  ASSERT_TRUE(s.is_list());
  EXPECT_TRUE(s.is_tuple() && s.equals(Value::tuple(ints({2, 0, 3}))));
  EXPECT_TRUE(call("shape", {1.5}).equals(Value::tuple(List{})));
  EXPECT_TRUE(call("ndim", {iota({2, 3})}).equals(Value(int64_t{2})));
  EXPECT_TRUE(call("size", {iota({2, 3})}).equals(Value(int64_t{6})));
  EXPECT_TRUE(call("size", {true}).equals(Value(int64_t{1})));
  EXPECT_EQ(call("atleast_1d", {1.0}).as_array().shape(), (Shape{1}));
  EXPECT_EQ(call("atleast_2d", {f64({1, 2})}).as_array().shape(), (Shape{1, 2}));
  EXPECT_EQ(call("atleast_2d", {iota({2, 3, 4})}).as_array().shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(call("atleast_3d", {iota({2, 3})}).as_array().shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(call("atleast_3d", {f64({1, 2})}).as_array().shape(), (Shape{1, 2, 1}));
}
