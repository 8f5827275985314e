// Tests of the optim family: SGD (momentum, Nesterov, weight decay), Adam and
// AdamW against steps computed by hand (and by a scalar re-statement of
// PyTorch's update rules), in-place updates of unshared buffers, gradient
// clipping by global norm, thread-count independence and every error.
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "test_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

const List& as_list(const Value& v) { return v.as_list(); }

// Arguments are moved into the call (an initializer list would copy them and
// keep every buffer shared).
Value call_moved(const char* name, std::vector<std::pair<const char*, Value>> named) {
  std::vector<CallArg> args;
  for (auto& [n, v] : named) args.push_back({n, std::move(v)});
  return call_primitive(name, std::move(args));
}

Value sgd(Value w, Value g, double lr, double momentum = 0.0, Value velocity = Value(),
          bool nesterov = false, double weight_decay = 0.0) {
  std::vector<std::pair<const char*, Value>> a;
  a.emplace_back("", std::move(w));
  a.emplace_back("", std::move(g));
  a.emplace_back("", Value(lr));
  a.emplace_back("momentum", Value(momentum));
  a.emplace_back("velocity", std::move(velocity));
  a.emplace_back("nesterov", Value(nesterov));
  a.emplace_back("weight_decay", Value(weight_decay));
  return call_moved("sgd_update", std::move(a));
}

struct AdamOptions {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7, weight_decay = 0.0;
  bool decoupled = false;
};

Value adam(Value w, Value g, Value m, Value v, int64_t step, const AdamOptions& o) {
  std::vector<std::pair<const char*, Value>> a;
  a.emplace_back("", std::move(w));
  a.emplace_back("", std::move(g));
  a.emplace_back("", std::move(m));
  a.emplace_back("", std::move(v));
  a.emplace_back("", Value(step));
  a.emplace_back("", Value(o.lr));
  a.emplace_back("beta1", Value(o.beta1));
  a.emplace_back("beta2", Value(o.beta2));
  a.emplace_back("epsilon", Value(o.epsilon));
  a.emplace_back("weight_decay", Value(o.weight_decay));
  a.emplace_back("decoupled", Value(o.decoupled));
  return call_moved("adam_update", std::move(a));
}

// torch.optim.Adam / AdamW for one scalar, written out as in PyTorch's docs.
struct ScalarAdam {
  double w, m = 0.0, v = 0.0;
  void step(double g, int t, const AdamOptions& o) {
    if (o.decoupled) {
      w *= 1.0 - o.lr * o.weight_decay;
    } else {
      g += o.weight_decay * w;
    }
    m = o.beta1 * m + (1.0 - o.beta1) * g;
    v = o.beta2 * v + (1.0 - o.beta2) * g * g;
    double m_hat = m / (1.0 - std::pow(o.beta1, t));
    double v_hat = v / (1.0 - std::pow(o.beta2, t));
    w -= o.lr * m_hat / (std::sqrt(v_hat) + o.epsilon);
  }
};

TEST(Optim, SgdPlainStep) {
  Value r = sgd(f64({1, 2, 3}), f64({0.5, -1, 2}), 0.1);
  ASSERT_TRUE(r.is_list());
  ASSERT_EQ(as_list(r).size(), 2u);
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float64, {3}, {0.95, 2.1, 2.8}));
  EXPECT_TRUE(as_list(r)[1].is_nil());
}

TEST(Optim, SgdWeightDecayIsCoupledL2) {
  // d = g + 0.1 w = [0.6, -0.8, 2.3]; w' = w - 0.1 d.
  Value r = sgd(f64({1, 2, 3}), f64({0.5, -1, 2}), 0.1, 0.0, Value(), false, 0.1);
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float64, {3}, {0.94, 2.08, 2.77}));
}

TEST(Optim, SgdMomentumThreeSteps) {
  // v1 = g; v2 = 0.9 v1 + g; v3 = 0.9 v2 + g; w -= 0.1 v each step.
  Value w = f64({1, -2}), v;
  const double expected_w[3][2] = {{0.95, -2.1}, {0.855, -2.29}, {0.7195, -2.561}};
  const double expected_v[3][2] = {{0.5, 1.0}, {0.95, 1.9}, {1.355, 2.71}};
  for (int s = 0; s < 3; ++s) {
    Value r = sgd(w, f64({0.5, 1.0}), 0.1, 0.9, v);
    w = as_list(r)[0];
    v = as_list(r)[1];
    EXPECT_TRUE(array_eq(w, DType::float64, {2}, {expected_w[s][0], expected_w[s][1]}, 1e-12));
    EXPECT_TRUE(array_eq(v, DType::float64, {2}, {expected_v[s][0], expected_v[s][1]}, 1e-12));
  }
}

TEST(Optim, SgdNesterovTwoSteps) {
  // step = g + 0.9 v': [0.95, 1.9] then [1.355, 2.71].
  Value r1 = sgd(f64({1, -2}), f64({0.5, 1.0}), 0.1, 0.9, Value(), true);
  EXPECT_TRUE(array_eq(as_list(r1)[0], DType::float64, {2}, {0.905, -2.19}, 1e-12));
  EXPECT_TRUE(array_eq(as_list(r1)[1], DType::float64, {2}, {0.5, 1.0}));
  Value r2 = sgd(as_list(r1)[0], f64({0.5, 1.0}), 0.1, 0.9, as_list(r1)[1], true);
  EXPECT_TRUE(array_eq(as_list(r2)[0], DType::float64, {2}, {0.7695, -2.461}, 1e-12));
  EXPECT_TRUE(array_eq(as_list(r2)[1], DType::float64, {2}, {0.95, 1.9}, 1e-12));
}

TEST(Optim, SgdMomentumWithWeightDecayAndFloat32) {
  // d = g + 0.5 w = [1.0, 0.0]; v = d; w' = w - 0.1 * v.
  Value r = sgd(f32({1.0f, -2.0f}), f64({0.5, 1.0}), 0.1, 0.9, Value(), false, 0.5);
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float32, {2}, {0.9, -2.0}, 1e-6));
  EXPECT_TRUE(array_eq(as_list(r)[1], DType::float32, {2}, {1.0, 0.0}, 1e-6));
}

TEST(Optim, SgdIntegerParameterBecomesFloat64) {
  Value r = sgd(i64({1, 2}), i64({1, 1}), 0.5);
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float64, {2}, {0.5, 1.5}));
}

TEST(Optim, SgdUpdatesAnUnsharedBufferInPlace) {
  Array w = f64({1, 2, 3});
  const void* buffer = w.raw();
  Value r = sgd(Value(std::move(w)), f64({1, 1, 1}), 0.5);
  EXPECT_EQ(as_list(r)[0].as_array().raw(), buffer);
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float64, {3}, {0.5, 1.5, 2.5}));

  // Momentum: the velocity's buffer is reused too.
  Array v = f64({0, 0, 0});
  const void* vbuf = v.raw();
  Value r2 = sgd(f64({1, 2, 3}), f64({1, 1, 1}), 0.5, 0.9, Value(std::move(v)));
  EXPECT_EQ(as_list(r2)[1].as_array().raw(), vbuf);
}

TEST(Optim, SgdLeavesASharedBufferAlone) {
  Array w = f64({1, 2, 3});
  Value r = sgd(Value(w), f64({1, 1, 1}), 0.5);
  EXPECT_NE(as_list(r)[0].as_array().raw(), w.raw());
  EXPECT_TRUE(array_eq(Value(w), DType::float64, {3}, {1, 2, 3}));
}

TEST(Optim, SgdErrors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { sgd(f64({1, 2, 3}), f64({1, 2}), 0.1); },
      "[sgd_update] argument 'g' must have the shape of w (3,), got (2,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { sgd(f64({1, 2}), f64({1, 2}), 0.1, 0.9, f64({1, 2, 3})); },
      "argument 'velocity' must have the shape of w (2,), got (3,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { sgd(f64({1, 2}), f64({1, 2}), 0.1, 0.0, Value(), true); },
      "[sgd_update] argument 'nesterov' requires a momentum > 0"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { sgd(f64({1, 2}), f64({1, 2}), -0.1); },
      "[sgd_update] argument 'lr' must be a finite number >= 0, got -0.1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { sgd(f64({1, 2}), f64({1, 2}), 0.1, -0.5); }, "argument 'momentum' must be"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { sgd(f64({1, 2}), f64({1, 2}), 0.1, 0.0, Value(), false, -1.0); },
      "argument 'weight_decay' must be"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { sgd(f64({1, 2}), f64({1, 2}), 0.1, 0.0, f64({0, 0})); },
      "argument 'velocity' must be nil when momentum is 0"));
  EXPECT_TRUE(throws_with<TypeError>([] { sgd(Value("w"), f64({1, 2}), 0.1); },
                                     "[sgd_update] argument 'w' must be a float array, got "
                                     "string 'w'"));
  EXPECT_TRUE(throws_with<TypeError>([] { sgd(f64({1, 2}), Value(Nil{}), 0.1); },
                                     "argument 'g' must be an array, got nil"));
}

TEST(Optim, AdamMatchesTorchRuleOverThreeSteps) {
  const std::vector<double> w0 = {1.0, -2.0, 0.5};
  const std::vector<std::vector<double>> grads = {{0.1, -0.3, 0.0}, {0.2, 0.1, -1.0},
                                                  {-0.4, 0.05, 2.0}};
  std::vector<AdamOptions> cases(4);
  cases[1].weight_decay = 0.1;                          // Adam with L2
  cases[2].weight_decay = 0.1, cases[2].decoupled = true;  // AdamW
  cases[3].beta1 = 0.5, cases[3].beta2 = 0.9, cases[3].epsilon = 1e-3, cases[3].lr = 0.1;
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    std::vector<ScalarAdam> ref;
    for (double x : w0) ref.push_back({x});
    Value w = f64(w0), m, v;
    for (int t = 1; t <= 3; ++t) {
      for (size_t i = 0; i < ref.size(); ++i) ref[i].step(grads[t - 1][i], t, cases[c]);
      Value r = adam(w, f64(grads[t - 1]), m, v, t, cases[c]);
      ASSERT_EQ(as_list(r).size(), 3u);
      w = as_list(r)[0], m = as_list(r)[1], v = as_list(r)[2];
      std::vector<double> ew, em, ev;
      for (const ScalarAdam& s : ref) ew.push_back(s.w), em.push_back(s.m), ev.push_back(s.v);
      EXPECT_TRUE(array_eq(w, DType::float64, {3}, ew, 1e-12, 1e-15));
      EXPECT_TRUE(array_eq(m, DType::float64, {3}, em, 1e-12, 1e-15));
      EXPECT_TRUE(array_eq(v, DType::float64, {3}, ev, 1e-12, 1e-15));
    }
  }
}

TEST(Optim, AdamFirstStepByHand) {
  // Step 1: m_hat = g, v_hat = g², so w' = w - lr * g / (|g| + eps).
  AdamOptions o;
  o.epsilon = 0.0;
  Value r = adam(f64({1.0, -2.0}), f64({0.1, -0.3}), Value(), Value(), 1, o);
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float64, {2}, {0.99, -1.99}, 1e-12));
  EXPECT_TRUE(array_eq(as_list(r)[1], DType::float64, {2}, {0.01, -0.03}, 1e-12));
  EXPECT_TRUE(array_eq(as_list(r)[2], DType::float64, {2}, {1e-5, 9e-5}, 1e-9));
  // AdamW: w is first shrunk by (1 - 0.01 * 0.5).
  o.weight_decay = 0.5;
  o.decoupled = true;
  Value rw = adam(f64({1.0, -2.0}), f64({0.1, -0.3}), Value(), Value(), 1, o);
  EXPECT_TRUE(array_eq(as_list(rw)[0], DType::float64, {2}, {0.995 - 0.01, -1.99 + 0.01}, 1e-12));
}

TEST(Optim, AdamFloat32KeepsDtypeAndWorksInPlace) {
  Array w = f32({1.0f, -2.0f}), m = f32({0.0f, 0.0f}), v = f32({0.0f, 0.0f});
  const void* wb = w.raw();
  const void* mb = m.raw();
  const void* vb = v.raw();
  Value r = adam(Value(std::move(w)), f64({0.1, -0.3}), Value(std::move(m)), Value(std::move(v)),
                 1, AdamOptions{});
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float32, {2}, {0.99, -1.99}, 1e-6));
  EXPECT_EQ(as_list(r)[0].as_array().raw(), wb);
  EXPECT_EQ(as_list(r)[1].as_array().raw(), mb);
  EXPECT_EQ(as_list(r)[2].as_array().raw(), vb);
}

TEST(Optim, AdamErrors) {
  AdamOptions o;
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { adam(f64({1, 2}), f64({1, 2}), Value(), Value(), 0, o); },
      "[adam_update] argument 'step' must be an integer >= 1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] {
        call_primitive("adam_update", std::vector<Value>{f64({1}), f64({1}), Value(), Value(),
                                                         Value(1.5), Value(0.1)});
      },
      "argument 'step' must be an integer >= 1 (the 1-based count of updates), got 1.5"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { adam(f64({1, 2}), f64({1, 2}), f64({1}, {1}), Value(), 1, o); },
      "[adam_update] argument 'm' must have the shape of w (2,), got (1,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { adam(f64({1, 2}), f64({1, 2}), Value(), f64({1, 2, 3}), 1, o); },
      "argument 'v' must have the shape of w (2,)"));
  AdamOptions bad = o;
  bad.beta1 = 1.0;
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { adam(f64({1, 2}), f64({1, 2}), Value(), Value(), 1, bad); },
      "argument 'beta1' must be in [0, 1), got 1"));
  bad = o;
  bad.beta2 = -0.1;
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { adam(f64({1, 2}), f64({1, 2}), Value(), Value(), 1, bad); }, "argument 'beta2'"));
  bad = o;
  bad.epsilon = -1.0;
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { adam(f64({1, 2}), f64({1, 2}), Value(), Value(), 1, bad); }, "argument 'epsilon'"));
  bad = o;
  bad.lr = std::nan("");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { adam(f64({1, 2}), f64({1, 2}), Value(), Value(), 1, bad); }, "argument 'lr'"));
}

TEST(Optim, GlobalNormAndClipping) {
  List grads{Value(f64({3, 4})), Value(), Value(f64({12}, {1, 1}))};
  Value n = call("global_norm", {Value(grads)});
  ASSERT_TRUE(n.is_float());
  EXPECT_DOUBLE_EQ(n.as_float(), 13.0);

  Value clipped = call("clip_by_global_norm", {Value(grads), Value(6.5)});
  ASSERT_EQ(as_list(clipped).size(), 3u);
  EXPECT_TRUE(array_eq(as_list(clipped)[0], DType::float64, {2}, {1.5, 2.0}));
  EXPECT_TRUE(as_list(clipped)[1].is_nil());
  EXPECT_TRUE(array_eq(as_list(clipped)[2], DType::float64, {1, 1}, {6.0}));

  // Under the limit: unchanged, and the arrays are not copied.
  Value same = call("clip_by_global_norm", {Value(grads), Value(13.0)});
  EXPECT_TRUE(as_list(same)[0].as_array().shares_storage(grads[0].as_array()));

  // float32 stays float32; ints are promoted; a single array is a list of one.
  List mixed{Value(f32({3, 4})), Value(i64({0}, {1}))};
  Value f = call("clip_by_global_norm", {Value(mixed), Value(1.0)});
  EXPECT_TRUE(array_eq(as_list(f)[0], DType::float32, {2}, {0.6, 0.8}, 1e-6));
  EXPECT_TRUE(array_eq(as_list(f)[1], DType::float64, {1}, {0.0}));
  EXPECT_DOUBLE_EQ(call("global_norm", {Value(f64({3, 4}))}).as_float(), 5.0);
  EXPECT_DOUBLE_EQ(call("global_norm", {Value(List{})}).as_float(), 0.0);
}

TEST(Optim, ClippingANonFiniteNormGivesNaN) {
  List grads{Value(f64({1, INFINITY})), Value(f64({2}))};
  Value clipped = call("clip_by_global_norm", {Value(grads), Value(1.0)});
  EXPECT_TRUE(std::isnan(as_list(clipped)[1].as_array().get_double(0)));
  EXPECT_TRUE(std::isinf(call("global_norm", {Value(grads)}).as_float()));
}

TEST(Optim, ClippingErrors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("clip_by_global_norm", {Value(List{Value(f64({1}))}), Value(0.0)}); },
      "[clip_by_global_norm] argument 'max_norm' must be > 0, got 0"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("clip_by_global_norm", {Value(List{Value(f64({1})), Value("x")}), Value(1.0)}); },
      "[clip_by_global_norm] argument 'grads' item 1 must be an array or nil, got string 'x'"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("global_norm", {Value("x")}); },
                                     "[global_norm] argument 'grads' must be a list of arrays"));
}

TEST(Optim, NormAndUpdatesDoNotDependOnThreadCount) {
  const int64_t n = 3'000'001;
  Array g(DType::float32, {n}), w(DType::float32, {n});
  for (int64_t i = 0; i < n; ++i) {
    g.data<float>()[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)));
    w.data<float>()[i] = static_cast<float>(std::cos(0.002 * static_cast<double>(i)));
  }
  std::vector<double> norms;
  std::vector<Array> updated;
  for (int threads : {1, 3, 4}) {
    set_num_threads(threads);
    norms.push_back(call("global_norm", {Value(List{Value(g), Value(w)})}).as_float());
    AdamOptions o;
    updated.push_back(as_list(adam(Value(w), Value(g), Value(), Value(), 2, o))[0].as_array());
  }
  set_num_threads(2);
  for (size_t k = 1; k < norms.size(); ++k) {
    EXPECT_EQ(norms[k], norms[0]);
    EXPECT_EQ(std::memcmp(updated[k].raw(), updated[0].raw(), updated[0].nbytes()), 0);
  }
  double exact = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    exact += double(g.data<float>()[i]) * g.data<float>()[i] +
             double(w.data<float>()[i]) * w.data<float>()[i];
  }
  EXPECT_NEAR(norms[0], std::sqrt(exact), 1e-9 * std::sqrt(exact));
}

TEST(Optim, TrainingLoopInTheLanguage) {
  // Minimizes sum((w - 3)^2) with Adam, the state carried through a while loop.
  Value r = eval_string(R"(
    define(w, [0.0, 10.0])
    define(m, zeros(2))
    define(v, zeros(2))
    define(step, 1)
    while(step <= 500, block(
        define(u, adam_update(w, 2.0 * (w - 3.0), m, v, step, 0.1)),
        store(w, u[0]), store(m, u[1]), store(v, u[2]),
        store(step, step + 1)))
    define(clipped, clip_by_global_norm(list(w - 3.0), 1e-3))
    list(w, global_norm(clipped))
  )");
  EXPECT_TRUE(array_eq(as_list(r)[0], DType::float64, {2}, {3.0, 3.0}, 1e-3));
  EXPECT_LE(as_list(r)[1].as_float(), 1e-3 + 1e-12);
}

}  // namespace
