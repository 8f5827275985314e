// Tiled arrays in a single process (no mpirun): the tiled primitives and the
// tiled overloads of the ordinary ones on one locality, where every tiling
// holds the whole array, checked against the local primitives on the same
// arrays; and the errors that one locality can raise. Several localities
// (uneven and empty tiles, the exchange, retiling) are tested by
// tests/distributed/tiled.tsl and tiled.py under mpirun.
#include <gtest/gtest.h>

#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"
#include "test_util.hpp"

namespace tessera::test {
namespace {

Value tiled(Value x, Value tiling = Value("rows")) {
  return call_primitive("annotate_d", std::vector<CallArg>{{"", std::move(x)}, {"tiling", std::move(tiling)}});
}

Value gathered(const Value& v) { return call("all_gather_d", {v}); }

// A 3x4 float64 array with distinct values and a negative one.
Array sample() { return f64({3, -1, 4, 1, 5, 9, -2, 6, 5, 3, 5, 8}, {3, 4}); }

// Expects `got` (tiled or plain) to equal `want` in dtype, shape and values.
::testing::AssertionResult same(const Value& got, const Value& want) {
  Value g = got.is_tiled() ? gathered(got) : got;
  if (!g.is_array() || !want.is_array()) {
    return ::testing::AssertionFailure() << "expected arrays, got " << g.describe() << " and " << want.describe();
  }
  const Array& w = want.as_array();
  std::vector<double> values;
  for (int64_t i = 0; i < w.size(); ++i) values.push_back(w.get_double(i));
  return array_eq(g, w.dtype(), w.shape(), values, 1e-12, 1e-12);
}

TEST(Tiled, AnnotateOneLocality) {
  Value x = Value(sample());
  for (const char* tiling : {"rows", "columns", "replicated"}) {
    Value t = tiled(x, Value(tiling));
    ASSERT_TRUE(t.is_tiled()) << tiling;
    const TiledArray& a = t.as_tiled();
    EXPECT_EQ(a.shape, (Shape{3, 4}));
    EXPECT_EQ(a.tiling, tiling);
    ASSERT_EQ(a.spans.size(), 1u);
    EXPECT_EQ(a.spans[0], full_span({3, 4}));
    EXPECT_TRUE(same(t, x)) << tiling;
  }
  Value pages = tiled(Value(Array::zeros(DType::float32, {2, 3, 4})), Value("pages"));
  EXPECT_EQ(pages.as_tiled().tiling, "pages");
  Value user = call_primitive("annotate_d", std::vector<CallArg>{{"", x}, {"spans", eval_string("[[0, 3], [0, 4]]")}});
  EXPECT_EQ(user.as_tiled().tiling, "replicated");  // one span holding the whole
  Value pairs = Value(List{Value(List{0, 3}), Value(List{0, 4})});
  Value listed = call_primitive("annotate_d", std::vector<CallArg>{{"", x}, {"", pairs}});
  EXPECT_EQ(listed.as_tiled().spans[0], full_span({3, 4}));
}

TEST(Tiled, AnnotateErrors) {
  Value x = Value(sample());
  auto annotate = [&](std::vector<CallArg> args) {
    args.insert(args.begin(), CallArg{"", x});
    return call_primitive("annotate_d", std::move(args));
  };
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { annotate({{"tiling", Value("pages")}}); },
                                                 "[annotate_d] tiling 'pages' needs tiles of at least 3 dimensions, "
                                                 "got a 2-d tile (3, 4)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { annotate({{"tiling", Value("diagonal")}}); },
                                                 "[annotate_d] unknown tiling 'diagonal': expected 'rows'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { annotate({{"spans", eval_string("[[0, 2], [0, 4]]")}}); },
      "[annotate_d] on locality 0: its tile has shape (3, 4) but its span [0:2, 0:4] has shape (2, 4)"));
  // A tiling that does not cover the array.
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { annotate({{"spans", eval_string("[[0, 3], [0, 4]]")}, {"shape", eval_string("[5, 4]")}}); },
      "[annotate_d] the tiling does not cover the array of shape (5, 4): element (3, 0) is in no locality's span; "
      "the spans are: locality 0 [0:3, 0:4]"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { annotate({{"tiling", Value("rows")}, {"shape", eval_string("[4, 4]")}}); },
      "[annotate_d] the tiling does not cover the array: the tiles by rows make an array of shape (3, 4) but shape "
      "is (4, 4)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { annotate({{"spans", Value(List{Value(1)})}}); },
                                                 "[annotate_d] spans must be a list with a [start, stop] pair"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { annotate({{"spans", eval_string("[[0, 3]]")}}); },
                                                 "its span [0:3] has 1 dimension but its tile has shape (3, 4)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { annotate({{"tiling", Value("overlapped")}}); },
                                                 "[annotate_d] tiling 'overlapped' needs spans"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { annotate({{"tiling", Value("columns")}, {"spans", eval_string("[[0, 3], [0, 4]]")}}); },
      "give either a tiling name or spans"));
  Value t = tiled(x);
  EXPECT_TRUE(throws_with<TypeError>([&] { call("annotate_d", {t}); }, "[annotate_d] argument 'x' is already a tiled "
                                                                        "array"));
}

TEST(Tiled, Constructors) {
  Value c = call_primitive("constant_d", std::vector<CallArg>{{"", Value(2.5)}, {"", eval_string("[3, 4]")},
                                                              {"tiling", Value("columns")}});
  EXPECT_EQ(c.as_tiled().tiling, "columns");
  EXPECT_TRUE(same(c, eval_string("full([3, 4], 2.5)")));
  EXPECT_TRUE(same(eval_string("constant_d(7, [2, 3], dtype=\"float32\")"),
                   eval_string("full([2, 3], 7, dtype=\"float32\")")));
  EXPECT_TRUE(same(eval_string("random_d([5, 3], seed=4)"), eval_string("random_uniform([5, 3], seed=4)")));
  EXPECT_TRUE(same(eval_string("random_d([5, 3], \"columns\", \"normal\", seed=4, mean=1.0, std=2.0, "
                               "dtype=\"float32\")"),
                   eval_string("random_normal([5, 3], 1.0, 2.0, seed=4, dtype=\"float32\")")));
  EXPECT_TRUE(same(eval_string("random_d([5, 3], distribution=\"integers\", low=-3, high=9, seed=4)"),
                   eval_string("random_integers(-3, 9, [5, 3], seed=4)")));
  // Without a seed: the next stream of the global seed, as the local draw.
  EXPECT_TRUE(same(eval_string("set_seed(11)\nrandom_d([4, 2], \"replicated\", low=2.0, high=3.0)"),
                   eval_string("set_seed(11)\nrandom_uniform([4, 2], 2.0, 3.0)")));
  EXPECT_TRUE(same(eval_string("random_d([], \"replicated\", seed=1)"), eval_string("random_uniform([], seed=1)")));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { eval_string("random_d([2], distribution=\"poisson\")"); },
                                                 "[random_d] argument 'distribution' must be 'uniform', 'normal' or "
                                                 "'integers', got 'poisson'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { eval_string("constant_d(1.0, [2], \"columns\")"); },
                                                 "[constant_d] tiling 'columns' needs an array of at least 2 "
                                                 "dimensions, got shape (2,)"));
  EXPECT_TRUE(throws_with<TypeError>([] { eval_string("constant_d([1.0, 2.0], [2])"); },
                                     "[constant_d] argument 'value' must be a number"));
}

TEST(Tiled, ElementwiseMatchesLocal) {
  Value x = Value(sample());
  Value t = tiled(x), y = tiled(Value(f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4})));
  EXPECT_TRUE(same(call("add", {t, y}), call("add", {x, gathered(y)})));
  EXPECT_TRUE(same(call("multiply", {t, Value(2.0)}), call("multiply", {x, Value(2.0)})));
  EXPECT_TRUE(same(call("exp", {t}), call("exp", {x})));
  EXPECT_TRUE(same(call("greater", {t, Value(2)}), call("greater", {x, Value(2)})));
  EXPECT_TRUE(same(call("where", {call("less", {t, Value(0)}), Value(0.0), t}),
                   call("where", {call("less", {x, Value(0)}), Value(0.0), x})));
  // Plain operands broadcast against the whole: a row, a column, the whole.
  Value row = Value(f64({1, 2, 3, 4})), col = Value(f64({1, 2, 3}, {3, 1}));
  EXPECT_TRUE(same(call("subtract", {t, row}), call("subtract", {x, row})));
  EXPECT_TRUE(same(call("maximum", {col, t}), call("maximum", {col, x})));
  EXPECT_TRUE(same(call("add", {t, x}), call("add", {x, x})));
  EXPECT_TRUE(same(call("relu", {t}), call("relu", {x})));
  EXPECT_TRUE(same(call("astype", {t, Value("int64")}), call("astype", {x, Value("int64")})));
  EXPECT_EQ(call("add", {t, Value(1)}).as_tiled().tiling, "rows");
  // A replicated tiled array is a broadcast operand of any tiling.
  EXPECT_TRUE(same(call("add", {tiled(x, Value("columns")), tiled(row, Value("replicated"))}), call("add", {x, row})));
  EXPECT_TRUE(call("allclose", {t, x}).as_bool());
  EXPECT_FALSE(call("array_equal", {t, call("add", {t, Value(1)})}).as_bool());
  EXPECT_FALSE(call("array_equal", {t, row}).as_bool());
  // The same spans under different names are different tilings.
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("add", {t, tiled(x, Value("columns"))}); },
      "[add] the tiled operands have different tilings: 'x' is tiled float64 array of shape (3, 4), rows over 1 "
      "locality with spans locality 0 [0:3, 0:4]; 'y' is tiled float64 array of shape (3, 4), columns over 1 "
      "locality with spans locality 0 [0:3, 0:4]. Tile one like the other first: retile_d(y, x)"));
  EXPECT_TRUE(same(call("add", {t, call("retile_d", {tiled(x, Value("columns")), t})}), call("add", {x, x})));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("add", {t, Value(f64({1, 2}))}); },
                                                 "[add] operands could not be broadcast together"));
}

TEST(Tiled, ReductionsMatchLocal) {
  Value x = Value(sample()), ints = Value(i64({2, 7, 7, 1, 7, 0, 3, 3, 1, 2, 0, 7}, {3, 4}));
  for (const char* tiling : {"rows", "columns"}) {
    for (const Value& v : {x, ints}) {
      Value t = tiled(v, Value(tiling));
      for (const char* op : {"sum", "mean", "max", "min", "argmax", "argmin"}) {
        std::string what = std::string(op) + " " + tiling + " " + dtype_name(v.as_array().dtype()).data();
        EXPECT_TRUE(same(call(op, {t}), call(op, {v}))) << what;
        for (int axis : {0, 1, -1}) {
          EXPECT_TRUE(same(call(op, {t, Value(axis)}), call(op, {v, Value(axis)}))) << what << " axis " << axis;
          EXPECT_TRUE(same(call(op, {t, Value(axis), Value(true)}), call(op, {v, Value(axis), Value(true)})))
              << what << " keepdims axis " << axis;
        }
      }
      EXPECT_TRUE(same(call("sum", {t, Value(List{Value(0), Value(1)}), Value(true)}),
                       call("sum", {v, Value(List{Value(0), Value(1)}), Value(true)})));
      EXPECT_TRUE(same(call_primitive("mean", std::vector<CallArg>{{"", t}, {"axis", Value(0)},
                                                                   {"dtype", Value("float32")}}),
                       call_primitive("mean", std::vector<CallArg>{{"", v}, {"axis", Value(0)},
                                                                   {"dtype", Value("float32")}})));
    }
  }
  // Along the tiled axis the result is plain; along the other it stays tiled.
  Value t = tiled(x, Value("rows"));
  EXPECT_TRUE(call("sum", {t, Value(0)}).is_array());
  Value along = call("sum", {t, Value(1)});
  ASSERT_TRUE(along.is_tiled());
  EXPECT_EQ(along.as_tiled().tiling, "rows");
  EXPECT_EQ(call("max", {tiled(x, Value("columns")), Value(0)}).as_tiled().tiling, "rows");
  // NaN: max propagates it, argmax picks the first.
  Value nan = Value(f64({1, NAN, 3, NAN}, {2, 2}));
  EXPECT_TRUE(same(call("max", {tiled(nan), Value(0)}), call("max", {nan, Value(0)})));
  EXPECT_TRUE(same(call("argmax", {tiled(nan)}), call("argmax", {nan})));
  EXPECT_TRUE(same(call("argmin", {tiled(nan), Value(0)}), call("argmin", {nan, Value(0)})));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("max", {tiled(Value(Array::zeros(DType::float64, {0, 3}))), Value(0)}); },
      "[max] zero-size array to reduction operation max which has no identity: shape (0, 3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("argmin", {tiled(Value(Array::zeros(DType::float64, {0, 3})))}); },
      "[argmin] attempt to get argmin of an empty sequence: shape (0, 3)"));
  EXPECT_TRUE(same(call("sum", {tiled(Value(Array::zeros(DType::int64, {0, 3}))), Value(0)}),
                   Value(Array::zeros(DType::int64, {3}))));
}

TEST(Tiled, DotTransposeRetile) {
  Value x = Value(sample()), w = Value(f64({1, 0, 2, -1, 3, 1, 0.5, 2}, {4, 2})), v = Value(f64({1, -2, 3, 0.5}));
  Value rows = tiled(x), cols = tiled(x, Value("columns"));
  Value product = call("dot", {x, w});
  EXPECT_TRUE(same(call("dot_d", {rows, w}), product));
  EXPECT_EQ(call("dot_d", {rows, w}).as_tiled().tiling, "rows");
  EXPECT_TRUE(same(call("matmul", {rows, v}), call("dot", {x, v})));
  // The contracted axis tiled alike on both sides: a plain (replicated) result.
  Value k = call("dot_d", {cols, tiled(w, Value("rows"))});
  ASSERT_TRUE(k.is_array());
  EXPECT_TRUE(same(k, product));
  EXPECT_TRUE(same(call("dot_d", {cols, tiled(v)}), call("dot", {x, v})));
  EXPECT_TRUE(same(call("dot_d", {tiled(v), tiled(v)}), call("dot", {v, v})));
  // A plain x times y tiled by columns stays tiled by columns (rows for a vector x).
  Value wt = call("transpose", {w});
  EXPECT_TRUE(same(call("dot_d", {x, tiled(w, Value("columns"))}), product));
  EXPECT_EQ(call("dot_d", {Value(f64({1, 2, 3, 4})), tiled(w, Value("columns"))}).as_tiled().tiling, "rows");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("dot_d", {rows, tiled(w, Value("rows"))}); },
      "[dot_d] these tilings do not multiply without moving data: a is tiled float64 array of shape (3, 4), rows"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("dot_d", {rows, Value(f64({1, 2}))}); },
                                                 "[dot_d] shapes (3, 4) and (2,) are not aligned"));
  // transpose_d: values and the tiling's name follow the axes.
  Value tt = call("transpose_d", {rows});
  EXPECT_EQ(tt.as_tiled().tiling, "columns");
  EXPECT_TRUE(same(tt, call("transpose", {x})));
  EXPECT_TRUE(same(call("transpose", {cols}), call("transpose", {x})));
  EXPECT_EQ(call("transpose", {cols}).as_tiled().tiling, "rows");
  // retile_d: a name, spans, another tiled array's tiling.
  EXPECT_EQ(call("retile_d", {rows, Value("columns")}).as_tiled().tiling, "columns");
  EXPECT_TRUE(same(call("retile_d", {rows, Value("replicated")}), x));
  EXPECT_TRUE(same(call("retile_d", {rows, eval_string("[[0, 3], [0, 4]]")}), x));
  EXPECT_EQ(call("retile_d", {rows, cols}).as_tiled().tiling, "columns");
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("retile_d", {rows, tiled(w)}); },
                                                 "[retile_d] argument 'tiling' is a tiled array of shape (4, 2) but "
                                                 "x has shape (3, 4)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("retile_d", {rows, eval_string("[[0, 2], [0, 4]]")}); },
                                                 "[retile_d] the tiling does not cover the array of shape (3, 4)"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("transpose_d", {x}); }, "[transpose_d] argument 'x' must be a tiled "
                                                                         "array"));
  // shape, ndim and size describe the whole.
  EXPECT_EQ(call("size", {rows}).as_int(), 12);
  EXPECT_EQ(call("ndim", {rows}).as_int(), 2);
  EXPECT_EQ(call("shape", {rows}).str(), "(3, 4)");
  EXPECT_TRUE(same(call("all_gather_d", {x}), x));
}

TEST(Tiled, ThroughTheTree) {
  // The tree's path (nodes.cpp): a tiled operand selects the overload.
  Value v = eval_string(
      "define(a, reshape(arange(12.0), [3, 4]))\n"
      "define(t, annotate_d(a, \"columns\"))\n"
      "define(u, exp(t / 10.0) + 1)\n"
      "[all_gather_d(u), sum(u, axis=1), argmax(t), all_gather_d(retile_d(t, \"rows\") @ ones([4, 2])), shape(u)]");
  const List& l = v.as_list();
  Value a = eval_string("reshape(arange(12.0), [3, 4])");
  Value u = eval_string("exp(reshape(arange(12.0), [3, 4]) / 10.0) + 1");
  EXPECT_TRUE(same(l[0], u));
  EXPECT_TRUE(same(l[1], call("sum", {u, Value(1)})));
  EXPECT_TRUE(same(l[2], Value(Array::scalar_int(11))));
  EXPECT_TRUE(same(l[3], eval_string("reshape(arange(12.0), [3, 4]) @ ones([4, 2])")));
  EXPECT_EQ(l[4].str(), "(3, 4)");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { eval_string("annotate_d(ones([2, 2]), spans=[[0, 2], [0, 1]])"); },
      "its tile has shape (2, 2) but its span [0:2, 0:1] has shape (2, 1) (at <expr>:1:1)"));
  // No tiled argument: no overload.
  std::vector<Value> plain = {Value(1.0)};
  EXPECT_EQ(find_tiled_overload(*find_primitive("add"), plain), nullptr);
  std::vector<Value> with_tiled = {tiled(Value(f64({1, 2})))};
  EXPECT_NE(find_tiled_overload(*find_primitive("sin"), with_tiled), nullptr);  // by family
  EXPECT_EQ(find_tiled_overload(*find_primitive("cumsum"), with_tiled), nullptr);
}

}  // namespace
}  // namespace tessera::test
