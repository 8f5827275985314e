// Tests of the losses family (primitives/losses.cpp): values against plain-loop
// references of Keras' formulas, gradients against central differences in
// float64, dtypes, determinism, and every error branch.
#include <algorithm>
#include <cmath>
#include <random>

#include "grad_check.hpp"
#include "tessera/core/error.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

constexpr double kEps = 1e-7;

Array uniform(Shape shape, unsigned seed, double lo, double hi) {
  Array a(DType::float64, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = d(gen);
  return a;
}

// Rows of probabilities (softmax of random logits), shape (rows, classes).
Array probabilities(int64_t rows, int64_t classes, unsigned seed) {
  Array z = uniform({rows, classes}, seed, -2, 2);
  return call("softmax", {z}).as_array();
}

Value loss(const char* op, Value y_true, Value y_pred, bool from_logits) {
  return call(op, {std::move(y_true), std::move(y_pred), from_logits});
}

double clip(double p) { return std::min(std::max(p, kEps), 1 - kEps); }

// Keras' categorical cross-entropy: rescale rows to sum 1, clip, -sum(y log p), batch mean.
double cce_ref(const Array& y, const Array& p, bool logits) {
  const int64_t c = p.shape().back(), rows = p.size() / c;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, m = -1e300, lse = 0;
    for (int64_t j = 0; j < c; ++j) {
      s += p.get_double(r * c + j);
      m = std::max(m, p.get_double(r * c + j));
    }
    for (int64_t j = 0; j < c; ++j) lse += std::exp(p.get_double(r * c + j) - m);
    lse = m + std::log(lse);
    for (int64_t j = 0; j < c; ++j) {
      double pj = p.get_double(r * c + j), yj = y.get_double(r * c + j);
      total -= logits ? yj * (pj - lse) : yj * std::log(clip(pj / s));
    }
  }
  return total / rows;
}

// Checks grad_op(g, y_true, y_pred, from_logits) against d(g * loss)/d y_pred.
void check_loss_grad(const char* op, const Value& y_true, const Array& y_pred, bool logits,
                     double g = 1.7) {
  auto f = [&](const Array& p) { return loss(op, y_true, p, logits).as_array(); };
  std::string grad_op = std::string(op) + "_grad";
  Array analytic = call(grad_op.c_str(), {g, y_true, y_pred, logits}).as_array();
  EXPECT_EQ(analytic.dtype(), DType::float64);
  EXPECT_TRUE(grads_close(analytic, numeric_vjp(f, y_pred, Array::scalar(g)), 1e-5, 1e-8))
      << op << (logits ? " from logits" : "");
}

}  // namespace

// ---- categorical ----

TEST(LossCategorical, HandChecked) {
  // -log(0.7) for the first row, -log(0.5) for the second: mean 0.52491...
  Array y = f64({0, 1, 0, 1, 0, 0}, {2, 3});
  Array p = f64({0.2, 0.7, 0.1, 0.5, 0.25, 0.25}, {2, 3});
  EXPECT_TRUE(array_eq(loss("categorical_crossentropy", y, p, false), DType::float64, {},
                       {(-std::log(0.7) - std::log(0.5)) / 2}, 1e-12));
  // Rows not summing to 1 are rescaled, as Keras does: [1, 3] -> [0.25, 0.75].
  EXPECT_TRUE(array_eq(loss("categorical_crossentropy", f64({0, 1}, {1, 2}), f64({1, 3}, {1, 2}),
                            false),
                       DType::float64, {}, {-std::log(0.75)}, 1e-12));
  // A zero probability is clipped to 1e-7.
  EXPECT_TRUE(array_eq(loss("categorical_crossentropy", f64({1, 0}, {1, 2}), f64({0, 1}, {1, 2}),
                            false),
                       DType::float64, {}, {-std::log(kEps)}, 1e-9));
}

TEST(LossCategorical, MatchesReference) {
  Array p = probabilities(6, 4, 1);
  Array y = call("one_hot", {i64({0, 3, 1, 2, 2, 0}, {6}), int64_t{4}, "float64"}).as_array();
  EXPECT_TRUE(array_eq(loss("categorical_crossentropy", y, p, false), DType::float64, {},
                       {cce_ref(y, p, false)}, 1e-12));
  Array z = uniform({6, 4}, 2, -30, 30);  // logits far apart: log_softmax, no clipping
  EXPECT_TRUE(array_eq(loss("categorical_crossentropy", y, z, true), DType::float64, {},
                       {cce_ref(y, z, true)}, 1e-12));
  // Soft labels and a 3-d batch (rows over every axis but the last).
  Array soft = probabilities(6, 4, 3).reshaped({2, 3, 4});
  Array p3 = p.reshaped({2, 3, 4});
  EXPECT_TRUE(array_eq(loss("categorical_crossentropy", soft, p3, false), DType::float64, {},
                       {cce_ref(soft, p3, false)}, 1e-12));
}

TEST(LossCategorical, Gradients) {
  Array p = probabilities(5, 3, 4);
  Array y = call("one_hot", {i64({0, 2, 1, 1, 0}, {5}), int64_t{3}, "float64"}).as_array();
  check_loss_grad("categorical_crossentropy", y, p, false);
  check_loss_grad("categorical_crossentropy", y, uniform({5, 3}, 5, -3, 3), true);
  Array soft = probabilities(5, 3, 6);
  check_loss_grad("categorical_crossentropy", soft, p, false);
  check_loss_grad("categorical_crossentropy", soft, uniform({5, 3}, 7, -3, 3), true);
  // Unnormalized positive rows (the rescaling is differentiated too).
  check_loss_grad("categorical_crossentropy", y, uniform({5, 3}, 8, 0.2, 2.0), false);
}

TEST(LossCategorical, DtypesAndDeterminism) {
  Array p = probabilities(4, 3, 9).astype(DType::float32);
  Array y = call("one_hot", {i64({0, 1, 2, 0}, {4}), int64_t{3}}).as_array();
  Value l = loss("categorical_crossentropy", y, p, false);
  EXPECT_EQ(l.as_array().dtype(), DType::float32);
  EXPECT_EQ(l.as_array().ndim(), 0);
  EXPECT_EQ(call("categorical_crossentropy_grad", {1.0, y, p, false}).as_array().dtype(),
            DType::float32);
  // Large batches: the same bits for any number of threads.
  const int before = num_threads();
  Array big = probabilities(100000, 6, 10).astype(DType::float32);
  Array labels(DType::int64, {100000});
  for (int64_t i = 0; i < 100000; ++i) labels.data<int64_t>()[i] = (i * 7) % 6;
  Array onehot = call("one_hot", {labels, int64_t{6}}).as_array();
  auto run = [&] {
    return List{loss("categorical_crossentropy", onehot, big, false),
                loss("sparse_categorical_crossentropy", labels, big, true),
                call("categorical_crossentropy_grad", {1.0, onehot, big, false}),
                loss("binary_crossentropy", onehot, big, false),
                call("mean_squared_error", {onehot, big})};
  };
  set_num_threads(1);
  Value one = run();
  set_num_threads(4);
  Value four = run();
  set_num_threads(before);
  EXPECT_TRUE(one.equals(four));
}

TEST(LossCategorical, Errors) {
  Array p = f64({0.5, 0.5, 0.5, 0.5}, {2, 2});
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { loss("categorical_crossentropy", f64({1, 0, 0, 1, 1, 0}, {3, 2}), p, false); },
      "[categorical_crossentropy] y_true and y_pred must have the same shape (the same batch "
      "size and classes), got (3, 2) and (2, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { loss("categorical_crossentropy", Value(1.0), Value(1.0), false); },
      "[categorical_crossentropy] y_pred must have at least 1 dimension (classes last), got "
      "shape ()"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] {
        loss("categorical_crossentropy", Array(DType::float64, {0, 3}),
             Array(DType::float64, {0, 3}), false);
      },
      "[categorical_crossentropy] y_pred is empty: shape (0, 3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("categorical_crossentropy_grad", {p, p, p, false}); },
      "[categorical_crossentropy_grad] g must be a single number (the cotangent of the scalar "
      "loss), got float64 array of shape (2, 2)"));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] { loss("categorical_crossentropy", Value("a"), p, false); },
                                     "[categorical_crossentropy] argument 'y_true' must be a "
                                     "number or an array"));
}

// ---- sparse categorical ----

TEST(LossSparse, MatchesCategorical) {
  Array p = probabilities(6, 4, 11);
  Array labels = i64({0, 3, 1, 2, 2, 0}, {6});
  Array y = call("one_hot", {labels, int64_t{4}, "float64"}).as_array();
  for (bool logits : {false, true}) {
    Array in = logits ? uniform({6, 4}, 12, -5, 5) : p;
    double ref = cce_ref(y, in, logits);
    EXPECT_TRUE(array_eq(loss("sparse_categorical_crossentropy", labels, in, logits),
                         DType::float64, {}, {ref}, 1e-12));
    EXPECT_TRUE(array_eq(loss("sparse_categorical_crossentropy", labels.reshaped({6, 1}), in,
                              logits),
                         DType::float64, {}, {ref}, 1e-12));
    // Labels stored as whole floats work too.
    EXPECT_TRUE(array_eq(loss("sparse_categorical_crossentropy", labels.astype(DType::float32),
                              in, logits),
                         DType::float64, {}, {ref}, 1e-12));
  }
  // Hand-checked: -log(0.25).
  EXPECT_TRUE(array_eq(loss("sparse_categorical_crossentropy", i64({2}, {1}),
                            f64({0.5, 0.25, 0.25}, {1, 3}), false),
                       DType::float64, {}, {std::log(4.0)}, 1e-12));
}

TEST(LossSparse, Gradients) {
  Array labels = i64({0, 2, 1, 1, 0}, {5});
  check_loss_grad("sparse_categorical_crossentropy", labels, probabilities(5, 3, 13), false);
  check_loss_grad("sparse_categorical_crossentropy", labels, uniform({5, 3}, 14, -3, 3), true);
  check_loss_grad("sparse_categorical_crossentropy", labels, uniform({5, 3}, 15, 0.2, 2), false);
  // Agrees with the categorical gradient on one-hot rows.
  Array p = probabilities(5, 3, 16);
  Array y = call("one_hot", {labels, int64_t{3}, "float64"}).as_array();
  EXPECT_TRUE(grads_close(
      call("sparse_categorical_crossentropy_grad", {1.0, labels, p, false}).as_array(),
      call("categorical_crossentropy_grad", {1.0, y, p, false}).as_array(), 1e-12, 1e-14));
}

TEST(LossSparse, Errors) {
  Array p = f64({0.5, 0.5, 0.5, 0.5}, {2, 2});
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { loss("sparse_categorical_crossentropy", i64({0, 2}, {2}), p, false); },
      "[sparse_categorical_crossentropy] label 2 at flat index 1 is out of range for depth 2 "
      "(valid labels are 0 to 1)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { loss("sparse_categorical_crossentropy", i64({0, 1, 1}, {3}), p, false); },
      "[sparse_categorical_crossentropy] y_true has shape (3,) but y_pred has shape (2, 2): "
      "expected one class index per row, shape (2,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { loss("sparse_categorical_crossentropy", f64({0.5, 1}, {2}), p, false); },
      "[sparse_categorical_crossentropy] label 0.5 at flat index 0 is not a whole number"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("sparse_categorical_crossentropy_grad", {1.0, i64({0, -1}, {2}), p, true}); },
      "[sparse_categorical_crossentropy_grad] label -1 at flat index 1 is out of range"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] {
        loss("sparse_categorical_crossentropy", i64({}, {0}), Array(DType::float64, {0, 3}),
             false);
      },
      "[sparse_categorical_crossentropy] y_pred is empty: shape (0, 3)"));
}

// ---- binary cross-entropy ----

TEST(LossBinary, MatchesReference) {
  Array y = f64({1, 0, 1, 0, 1, 1}, {3, 2});
  Array p = f64({0.9, 0.2, 0.4, 0.0, 1.0, 0.7}, {3, 2});
  double ref = 0;
  for (int i = 0; i < 6; ++i) {
    double q = clip(p.get_double(i)), t = y.get_double(i);
    ref -= t * std::log(q) + (1 - t) * std::log(1 - q);
  }
  EXPECT_TRUE(array_eq(loss("binary_crossentropy", y, p, false), DType::float64, {}, {ref / 6},
                       1e-12));
  Array z = f64({3, -2, 0.5, -40, 40, 0}, {3, 2});
  double lref = 0;
  for (int i = 0; i < 6; ++i) {
    // log(sigmoid(z)) and log(1 - sigmoid(z)); |z| <= 40 keeps these exact enough.
    const double zi = z.get_double(i), t = y.get_double(i);
    const double log_s = -std::log1p(std::exp(-zi));
    const double log_1ms = -zi - std::log1p(std::exp(-zi));
    lref -= t * log_s + (1 - t) * log_1ms;
  }
  EXPECT_TRUE(array_eq(loss("binary_crossentropy", y, z, true), DType::float64, {}, {lref / 6},
                       1e-12));
  // (N,) labels against (N, 1) outputs, and 0-d.
  EXPECT_TRUE(array_eq(loss("binary_crossentropy", f64({1, 0}, {2}), f64({0.8, 0.3}, {2, 1}),
                            false),
                       DType::float64, {}, {-(std::log(0.8) + std::log(0.7)) / 2}, 1e-12));
  EXPECT_TRUE(array_eq(loss("binary_crossentropy", Value(1.0), Value(0.5), false), DType::float64,
                       {}, {std::log(2.0)}, 1e-12));
}

TEST(LossBinary, Gradients) {
  Array y = f64({1, 0, 1, 0, 0.3, 1}, {3, 2});
  check_loss_grad("binary_crossentropy", y, uniform({3, 2}, 21, 0.05, 0.95), false);
  check_loss_grad("binary_crossentropy", y, uniform({3, 2}, 22, -4, 4), true);
  // Outside the clip range the gradient is 0 (as TensorFlow's clip_by_value).
  EXPECT_TRUE(array_eq(call("binary_crossentropy_grad",
                            {1.0, f64({1, 1}, {2}), f64({0.0, 0.5}, {2}), false}),
                       DType::float64, {2}, {0, -1.0}));
}

TEST(LossBinary, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { loss("binary_crossentropy", f64({1, 0, 1}, {3}), f64({0.5, 0.5}, {2, 1}), false); },
      "[binary_crossentropy] y_true and y_pred must have the same shape (the same batch size "
      "and classes), got (3,) and (2, 1)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { loss("binary_crossentropy", f64({}, {0}), f64({}, {0}), false); },
      "[binary_crossentropy] y_pred is empty: shape (0,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("binary_crossentropy_grad", {f64({1, 1}, {2}), f64({1.0}), f64({0.5}), false}); },
      "[binary_crossentropy_grad] g must be a single number"));
}

// ---- mean squared error ----

TEST(LossMse, ValuesGradientsDtypes) {
  EXPECT_TRUE(array_eq(call("mean_squared_error", {f64({1, 2, 3, 4}, {2, 2}),
                                                   f64({1.5, 2, 1, 4}, {2, 2})}),
                       DType::float64, {}, {(0.25 + 4) / 4}, 1e-12));
  Array y = uniform({4, 3}, 31, -1, 1);
  auto f = [&](const Array& p) { return call("mean_squared_error", {y, p}).as_array(); };
  Array p = uniform({4, 3}, 32, -1, 1);
  EXPECT_TRUE(grads_close(call("mean_squared_error_grad", {0.5, y, p}).as_array(),
                          numeric_vjp(f, p, Array::scalar(0.5))));
  Value l32 = call("mean_squared_error", {f64({1, 2}, {2}), f32({1.5f, 2.5f}, {2})});
  EXPECT_TRUE(array_eq(l32, DType::float32, {}, {0.25}));
  EXPECT_EQ(call("mean_squared_error_grad", {1.0, f64({1, 2}, {2}), f32({1.5f, 2.5f}, {2})})
                .as_array()
                .dtype(),
            DType::float32);
  EXPECT_TRUE(array_eq(call("mean_squared_error", {i64({1, 2}, {2}), i64({2, 4}, {2})}),
                       DType::float64, {}, {2.5}));
  // A 0-d array cotangent is accepted.
  EXPECT_TRUE(array_eq(call("mean_squared_error_grad", {f64({2.0}), f64({0.0}), f64({1.0})}),
                       DType::float64, {}, {4.0}));
}

TEST(LossMse, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("mean_squared_error", {f64({1, 2}, {2}), f64({1, 2, 3}, {3})}); },
      "[mean_squared_error] y_true and y_pred must have the same shape"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("mean_squared_error_grad", {1.0, f64({1, 2}, {2}), f64({1, 2, 3}, {3})}); },
      "[mean_squared_error_grad] y_true and y_pred must have the same shape"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("mean_squared_error_grad", {Value("g"), 1.0, 1.0}); },
                                     "[mean_squared_error_grad] g must be a single number"));
}

TEST(LossRegistry, RulesAndFamily) {
  for (const char* op : {"categorical_crossentropy", "sparse_categorical_crossentropy",
                         "binary_crossentropy", "mean_squared_error"}) {
    const PrimitiveSpec* s = find_primitive(op);
    ASSERT_NE(s, nullptr) << op;
    EXPECT_EQ(s->family, "losses");
    EXPECT_EQ(s->grads.size(), s->params.size());
    EXPECT_TRUE(s->grads[0].empty()) << op;   // y_true is not differentiable
    EXPECT_FALSE(s->grads[1].empty()) << op;
    ASSERT_NE(find_primitive(std::string(op) + "_grad"), nullptr) << op;
  }
}
