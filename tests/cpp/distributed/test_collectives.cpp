// Collectives in a single process (no mpirun): every collective is the
// identity or the obvious local result, no MPI call is made, and the
// asynchronous primitive path (PrimitiveSpec::eval_async) runs through the
// execution tree. Multi-rank behaviour is tested by tests/distributed under mpirun.
#include <gtest/gtest.h>

#include "tessera/distributed/locality.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"
#include "test_util.hpp"

namespace tessera::test {
namespace {

TEST(Dist, OneLocalityWithoutMpirun) {
  EXPECT_EQ(distributed::locality(), 0);
  EXPECT_EQ(distributed::num_localities(), 1);
  EXPECT_EQ(eval_string("locality()").as_int(), 0);
  EXPECT_EQ(eval_string("num_localities()").as_int(), 1);
}

TEST(Dist, CollectivesAreLocalWithOneLocality) {
  Value x = Value(f64({1, 2, 3, 4}, {2, 2}));
  EXPECT_TRUE(array_eq(call("all_reduce", {x}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  for (const char* op : {"sum", "mean", "max", "min"}) {
    EXPECT_TRUE(array_eq(call("all_reduce", {x, Value(op)}), DType::float64, {2, 2}, {1, 2, 3, 4})) << op;
  }
  EXPECT_TRUE(array_eq(call("all_reduce", {Value(i64({1, 2})), Value("mean")}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("broadcast", {x}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("all_gather", {x}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("all_gather", {x, Value(1)}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("reduce_scatter", {x}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("gather", {x}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("scatter", {x}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(call("all_to_all", {x}), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(call("barrier", {}).is_nil());
}

TEST(Dist, CollectivesRunThroughTheTree) {
  // The async path: the node's future is the collective's future.
  Value v = eval_string(
      "define(x, [1.0, 2.0, 3.0])\n"
      "[all_reduce(x), all_reduce(x, \"mean\"), broadcast(x, root=0), all_gather(x), "
      "reduce_scatter(x), gather(x), scatter(x), all_to_all(x), barrier()]");
  ASSERT_TRUE(v.is_list());
  const List& l = v.as_list();
  for (size_t i = 0; i + 1 < l.size(); ++i) {
    EXPECT_TRUE(array_eq(l[i], DType::float64, {3}, {1, 2, 3})) << i;
  }
  EXPECT_TRUE(l.back().is_nil());
  EXPECT_NE(find_primitive("all_reduce")->eval_async, nullptr);
  EXPECT_NE(find_primitive("all_reduce")->eval, nullptr);
}

TEST(Dist, GradientRulesWithOneLocality) {
  // The rules (not yet attached as .grads, see collectives.cpp): on one
  // locality the cotangent passes through; for max/min it goes where x == out.
  Value x = Value(f64({3, 4})), g = Value(f64({1, 2}));
  EXPECT_TRUE(array_eq(call("all_reduce_grad", {x, x, g, Value("sum")}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("all_reduce_grad", {x, x, g, Value("mean")}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("all_reduce_grad", {x, Value(f64({3, 5})), g, Value("max")}), DType::float64, {2},
                       {1, 0}));
  EXPECT_TRUE(array_eq(call("reduce_scatter_grad", {g, Value("mean")}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("reduce_scatter_grad", {g, Value("max")}); },
                                                 "[reduce_scatter] has no gradient for op 'max'"));
  // all_gather, gather, scatter, all_to_all: the cotangent itself.
  EXPECT_TRUE(array_eq(call("all_gather_grad", {x, g, Value(0)}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("gather_grad", {x, g, Value(0)}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("scatter_grad", {x, g, Value(0)}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(array_eq(call("all_to_all_grad", {x, g}), DType::float64, {2}, {1, 2}));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("gather_grad", {x, g, Value(1)}); },
                                             "[gather_grad] argument 'root' is 1 but ranks are 0..0"));
}

TEST(Dist, Errors) {
  Value x = Value(f64({1, 2}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("all_reduce", {x, Value("prod")}); },
                                                 "[all_reduce] argument 'op' must be 'sum', 'mean', 'max' or 'min'"));
  EXPECT_TRUE(throws_with<std::out_of_range>([&] { call("broadcast", {x, Value(1)}); },
                                             "[broadcast] argument 'root' is 1 but ranks are 0..0"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("all_reduce", {Value(b8({true}))}); },
                                     "[all_reduce] argument 'x' must be a numeric array"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("all_gather", {Value(Array::scalar(1.0))}); },
                                                 "[all_gather] argument 'x' must have at least one dimension"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("send", {x, Value(0)}); },
                                                 "[send] needs another locality"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("recv", {Value(0)}); },
                                                 "[recv] needs another locality"));
}

}  // namespace
}  // namespace tessera::test
