// Tests of the nn family (primitives/nn.cpp): forward values against plain-loop
// references, backward primitives against central differences in float64,
// dtypes, determinism across thread counts, and every error branch.
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "grad_check.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/nn.hpp"
#include "tessera/kernels/random.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using test::named;
using namespace tessera::test;

namespace {

// Normal values of a shape, reproducible from `seed` (float64).
Array randn(Shape shape, unsigned seed, double scale = 1.0) {
  Array a(DType::float64, shape);
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, scale);
  for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = d(gen);
  return a;
}

// Values bounded away from 0 (for functions with a kink there).
Array away_from_zero(Shape shape, unsigned seed) {
  Array a = randn(shape, seed);
  for (int64_t i = 0; i < a.size(); ++i) {
    double& v = a.data<double>()[i];
    v = v >= 0 ? v + 0.1 : v - 0.1;
  }
  return a;
}

std::vector<double> values(const Array& a) {
  std::vector<double> v(a.size());
  for (int64_t i = 0; i < a.size(); ++i) v[i] = a.get_double(i);
  return v;
}

// Reference: f applied to each element.
std::vector<double> map(const Array& x, const std::function<double(double)>& f) {
  std::vector<double> v(x.size());
  for (int64_t i = 0; i < x.size(); ++i) v[i] = f(x.get_double(i));
  return v;
}

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Checks the backward primitive `grad_op(g, x_or_out, extra...)` of `op` against
// central differences of sum(op(x) * g).
void check_activation_grad(const char* op, const char* grad_op, bool from_out, const Array& x,
                           std::vector<CallArg> extra = {}) {
  auto f = [&](const Array& v) {
    std::vector<CallArg> args{{"", v}};
    args.insert(args.end(), extra.begin(), extra.end());
    return named(op, args).as_array();
  };
  Array g = randn(x.shape(), 99);
  Array saved = from_out ? f(x) : x;
  std::vector<CallArg> args{{"", g}, {"", saved}};
  args.insert(args.end(), extra.begin(), extra.end());
  Array analytic = named(grad_op, args).as_array();
  EXPECT_EQ(analytic.dtype(), DType::float64) << grad_op;
  EXPECT_TRUE(grads_close(analytic, numeric_vjp(f, x, g))) << grad_op;
}

}  // namespace

// ---- activations ----

TEST(NnActivations, ForwardMatchesReference) {
  Array x = f64({-3, -1.5, -0.2, 0, 0.2, 1.5, 3}, {7});
  EXPECT_TRUE(array_eq(call("relu", {x}), DType::float64, {7}, {0, 0, 0, 0, 0.2, 1.5, 3}));
  EXPECT_TRUE(
      array_eq(call("leaky_relu", {x}), DType::float64, {7}, {-0.9, -0.45, -0.06, 0, 0.2, 1.5, 3}));
  EXPECT_TRUE(array_eq(named("leaky_relu", {{"", x}, {"alpha", 0.1}}), DType::float64, {7},
                       {-0.3, -0.15, -0.02, 0, 0.2, 1.5, 3}));
  EXPECT_TRUE(array_eq(call("elu", {x}), DType::float64, {7},
                       map(x, [](double v) { return v > 0 ? v : std::expm1(v); })));
  EXPECT_TRUE(array_eq(named("elu", {{"", x}, {"alpha", 2.0}}), DType::float64, {7},
                       map(x, [](double v) { return v > 0 ? v : 2 * std::expm1(v); })));
  EXPECT_TRUE(array_eq(call("gelu", {x}), DType::float64, {7}, map(x, [](double v) {
                         return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
                       })));
  EXPECT_TRUE(array_eq(named("gelu", {{"", x}, {"approximate", true}}), DType::float64, {7},
                       map(x, [](double v) {
                         double c = std::sqrt(2 / M_PI);
                         return 0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v)));
                       })));
  EXPECT_TRUE(array_eq(call("sigmoid", {x}), DType::float64, {7}, map(x, sigmoid_ref)));
  EXPECT_TRUE(array_eq(call("softplus", {x}), DType::float64, {7},
                       map(x, [](double v) { return std::log(1 + std::exp(v)); })));
}

TEST(NnActivations, HandChecked) {
  // gelu(1) = 0.8413447460685429 (= Phi(1)); sigmoid(0) = 0.5; softplus(0) = log 2.
  EXPECT_TRUE(array_eq(call("gelu", {f64({1.0})}), DType::float64, {}, {0.8413447460685429}));
  EXPECT_TRUE(array_eq(call("sigmoid", {f64({0.0})}), DType::float64, {}, {0.5}));
  EXPECT_TRUE(array_eq(call("softplus", {f64({0.0})}), DType::float64, {}, {std::log(2.0)}));
  EXPECT_TRUE(array_eq(call("elu", {f64({-1.0})}), DType::float64, {}, {std::exp(-1.0) - 1}));
}

TEST(NnActivations, ExtremeInputsStayFinite) {
  Array x = f64({-1000, -50, 50, 1000}, {4});
  EXPECT_TRUE(array_eq(call("sigmoid", {x}), DType::float64, {4},
                       {0, sigmoid_ref(-50), sigmoid_ref(50), 1}, 1e-12, 1e-300));
  EXPECT_TRUE(array_eq(call("softplus", {x}), DType::float64, {4},
                       {0, std::log1p(std::exp(-50.0)), 50 + std::log1p(std::exp(-50.0)), 1000},
                       1e-12, 1e-300));
  Array f = f32({-100.f, 100.f}, {2});
  EXPECT_TRUE(array_eq(call("sigmoid", {f}), DType::float32, {2}, {0, 1}, 1e-6, 1e-30));
  EXPECT_TRUE(array_eq(call("softplus", {f}), DType::float32, {2}, {0, 100}, 1e-6, 1e-30));
}

TEST(NnActivations, Dtypes) {
  Array f = f32({-1.f, 2.f}, {2});
  for (const char* op : {"relu", "leaky_relu", "elu", "gelu", "sigmoid", "softplus"}) {
    EXPECT_EQ(call(op, {f}).as_array().dtype(), DType::float32) << op;
    EXPECT_EQ(call(op, {i64({-1, 2})}).as_array().dtype(), DType::float64) << op;
  }
  EXPECT_TRUE(array_eq(call("relu", {i64({-1, 2})}), DType::float64, {2}, {0, 2}));
  EXPECT_TRUE(array_eq(call("relu", {b8({true, false})}), DType::float64, {2}, {1, 0}));
  // Python-like scalars give 0-d float64 arrays; empty arrays stay empty.
  EXPECT_TRUE(array_eq(call("relu", {Value(-2.5)}), DType::float64, {}, {0}));
  EXPECT_TRUE(array_eq(call("sigmoid", {Value(int64_t{0})}), DType::float64, {}, {0.5}));
  EXPECT_TRUE(array_eq(call("relu", {Array(DType::float32, {0, 3})}), DType::float32, {0, 3}, {}));
  // A nested list is an array.
  EXPECT_TRUE(
      array_eq(call("relu", {Value(List{Value(-1.0), Value(3.0)})}), DType::float64, {2}, {0, 3}));
  // float32 values agree with float64 to float precision.
  Array x = randn({50}, 3);
  Array r32 = call("gelu", {x.astype(DType::float32)}).as_array();
  EXPECT_TRUE(array_eq(r32.astype(DType::float64), DType::float64, {50},
                       values(call("gelu", {x}).as_array()), 1e-5, 1e-6));
}

TEST(NnActivations, ReusesAnUnsharedBufferOnly) {
  Array x = f64({-1, 2}, {2});
  Array out = call("relu", {x}).as_array();
  EXPECT_FALSE(out.shares_storage(x));  // x is still held here
  EXPECT_TRUE(array_eq(Value(x), DType::float64, {2}, {-1, 2}));
}

TEST(NnActivations, GradientsMatchFiniteDifferences) {
  Array x = away_from_zero({3, 4}, 1);
  check_activation_grad("relu", "relu_grad", false, x);
  check_activation_grad("leaky_relu", "leaky_relu_grad", false, x);
  check_activation_grad("leaky_relu", "leaky_relu_grad", false, x, {{"alpha", 0.05}});
  check_activation_grad("elu", "elu_grad", false, x);
  check_activation_grad("elu", "elu_grad", false, x, {{"alpha", 1.7}});
  check_activation_grad("gelu", "gelu_grad", false, x);
  check_activation_grad("gelu", "gelu_grad", false, x, {{"approximate", true}});
  check_activation_grad("sigmoid", "sigmoid_grad", true, x);
  check_activation_grad("tanh", "tanh_grad", true, x);
  check_activation_grad("softplus", "softplus_grad", false, x);
}

TEST(NnActivations, GradientValuesAtHandPoints) {
  // relu'(0) = 0 and leaky_relu'(0) = alpha, as TensorFlow.
  EXPECT_TRUE(array_eq(call("relu_grad", {f64({2, 2, 2}, {3}), f64({-1, 0, 1}, {3})}),
                       DType::float64, {3}, {0, 0, 2}));
  EXPECT_TRUE(array_eq(call("leaky_relu_grad", {f64({2, 2, 2}, {3}), f64({-1, 0, 1}, {3})}),
                       DType::float64, {3}, {0.6, 0.6, 2}));
  EXPECT_TRUE(array_eq(call("sigmoid_grad", {f64({1.0}), f64({0.5})}), DType::float64, {}, {0.25}));
  EXPECT_TRUE(array_eq(call("tanh_grad", {f64({2.0}), f64({0.5})}), DType::float64, {}, {1.5}));
}

TEST(NnActivations, GradientDtypesAndScalarCotangent) {
  Array x = f32({-1.f, 2.f}, {2});
  EXPECT_TRUE(array_eq(call("relu_grad", {f32({3.f, 3.f}, {2}), x}), DType::float32, {2}, {0, 3}));
  // A Python float cotangent is weak: float32 stays float32; it broadcasts.
  EXPECT_TRUE(array_eq(call("relu_grad", {Value(1.0), x}), DType::float32, {2}, {0, 1}));
  EXPECT_TRUE(array_eq(call("relu_grad", {f64({1.0}), x}), DType::float64, {2}, {0, 1}));
  EXPECT_TRUE(array_eq(call("relu_grad", {f64({1, 1}, {2}), x}), DType::float64, {2}, {0, 1}));
}

TEST(NnActivations, Errors) {
  EXPECT_TRUE(throws_with<TypeError>([] { call("relu", {Value("abc")}); },
                                     "[relu] argument 'x' must be a number or an array"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("relu_grad", {f64({1, 2}, {2}), f64({1, 2, 3}, {3})}); },
      "[relu_grad] g has shape (2,) but x has shape (3,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("sigmoid_grad", {f64({1, 2}, {2}), f64({1, 2, 3}, {3})}); },
      "[sigmoid_grad] g has shape (2,) but out has shape (3,)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("leaky_relu", {f64({1.0}), Value("x")}); },
                                     "[leaky_relu] argument 'alpha' must be a number"));
}

// ---- softmax ----

TEST(NnSoftmax, HandChecked) {
  // softmax([1, 2, 3]) = [0.09003057, 0.24472847, 0.66524096]
  EXPECT_TRUE(array_eq(call("softmax", {f64({1, 2, 3}, {3})}), DType::float64, {3},
                       {0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, 1e-12));
  EXPECT_TRUE(array_eq(call("log_softmax", {f64({1, 2, 3}, {3})}), DType::float64, {3},
                       {-2.40760596444438, -1.40760596444438, -0.40760596444438}, 1e-12));
  // Large logits do not overflow.
  EXPECT_TRUE(array_eq(call("softmax", {f64({1000, 1000}, {2})}), DType::float64, {2}, {0.5, 0.5}));
  EXPECT_TRUE(
      array_eq(call("log_softmax", {f64({1000, 0}, {2})}), DType::float64, {2}, {0, -1000}, 1e-12));
}

TEST(NnSoftmax, AxesMatchReference) {
  Array x = randn({2, 3, 4}, 7, 3.0);
  for (int axis : {0, 1, 2, -1, -2}) {
    int ax = axis < 0 ? axis + 3 : axis;
    std::vector<double> ref(24), logref(24);
    int64_t strides[3] = {12, 4, 1};
    for (int64_t i = 0; i < 24; ++i) {
      int64_t pos = (i / strides[ax]) % x.dim(ax);
      int64_t base = i - pos * strides[ax];
      double m = -1e300, s = 0;
      for (int64_t j = 0; j < x.dim(ax); ++j) m = std::max(m, x.get_double(base + j * strides[ax]));
      for (int64_t j = 0; j < x.dim(ax); ++j) {
        s += std::exp(x.get_double(base + j * strides[ax]) - m);
      }
      ref[i] = std::exp(x.get_double(i) - m) / s;
      logref[i] = x.get_double(i) - m - std::log(s);
    }
    EXPECT_TRUE(
        array_eq(call("softmax", {x, int64_t{axis}}), DType::float64, {2, 3, 4}, ref, 1e-12))
        << axis;
    EXPECT_TRUE(
        array_eq(call("log_softmax", {x, int64_t{axis}}), DType::float64, {2, 3, 4}, logref, 1e-12))
        << axis;
  }
}

TEST(NnSoftmax, DtypesAndEdges) {
  Array s = call("softmax", {f32({1.f, 2.f, 3.f}, {3})}).as_array();
  EXPECT_TRUE(array_eq(s, DType::float32, {3}, {0.09003057, 0.24472847, 0.66524096}, 1e-6));
  EXPECT_EQ(call("log_softmax", {i64({1, 2})}).as_array().dtype(), DType::float64);
  EXPECT_TRUE(
      array_eq(call("softmax", {Array(DType::float64, {0, 3})}), DType::float64, {0, 3}, {}));
  // A lane of one element is 1 (log: 0).
  EXPECT_TRUE(array_eq(call("softmax", {f64({5, -5}, {2, 1})}), DType::float64, {2, 1}, {1, 1}));
  EXPECT_TRUE(
      array_eq(call("log_softmax", {f64({5, -5}, {2, 1})}), DType::float64, {2, 1}, {0, 0}));
}

namespace {

// softmax (log: log_softmax) of a 3-d array along `axis`, in float64 from x's
// values: a lane of -inf only is nan, as in NumPy.
std::vector<double> softmax_reference(const Array& x, int axis, bool log) {
  const int64_t n = x.dim(axis);
  int64_t stride = 1;
  for (int d = axis + 1; d < x.ndim(); ++d) stride *= x.dim(d);
  std::vector<double> ref(x.size());
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t base = i - ((i / stride) % n) * stride;
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x.get_double(base + j * stride));
    for (int64_t j = 0; j < n; ++j) s += std::exp(x.get_double(base + j * stride) - m);
    ref[i] = log ? x.get_double(i) - m - std::log(s) : std::exp(x.get_double(i) - m) / s;
  }
  return ref;
}

}  // namespace

TEST(NnSoftmax, LongLanesMatchReference) {
  // Lanes longer than the kernels' blocks, along the last axis and across
  // it, float32 and float64, computed into a new array and in place; masked
  // (-inf) scores and one lane of nothing but -inf.
  Array x = randn({2, 37, 300}, 21, 3.0);
  double* px = x.data<double>();
  for (int64_t i = 0; i < x.size(); i += 7) px[i] = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < 300; ++j) px[300 + j] = -std::numeric_limits<double>::infinity();
  for (DType dt : {DType::float32, DType::float64}) {
    Array xt = x.astype(dt);
    const double rtol = dt == DType::float32 ? 1e-5 : 1e-12;
    const double atol = dt == DType::float32 ? 1e-6 : 1e-14;
    for (int axis : {2, 1, 0}) {
      for (const char* op : {"softmax", "log_softmax"}) {
        const bool log = op[0] == 'l';
        std::vector<double> ref = softmax_reference(xt, axis, log);
        EXPECT_TRUE(array_eq(call(op, {xt, int64_t{axis}}), dt, x.shape(), ref, rtol, atol))
            << op << " " << dtype_name(dt) << " axis " << axis;
        std::vector<Value> unique_args;  // the input's only reference: written in place
        unique_args.emplace_back(xt.copy());
        unique_args.emplace_back(int64_t{axis});
        EXPECT_TRUE(array_eq(call_primitive(op, std::move(unique_args)), dt, x.shape(), ref,
                             rtol, atol))
            << op << " in place, " << dtype_name(dt) << " axis " << axis;
      }
    }
  }
}

TEST(NnSoftmax, LongLaneGradientsMatchFiniteDifferences) {
  Array x = randn({2, 3, 40}, 13);
  for (int axis : {-1, 1}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      auto f = [&](const Array& v) { return call(op, {v, int64_t{axis}}).as_array(); };
      Array g = randn(x.shape(), 14);
      std::string grad_op = std::string(op) + "_grad";
      Array analytic = call(grad_op.c_str(), {g, f(x), int64_t{axis}}).as_array();
      EXPECT_TRUE(grads_close(analytic, numeric_vjp(f, x, g))) << op << " axis " << axis;
      // float32: the same gradient to float32's precision, also in place (g's
      // only reference).
      Array out32 = f(x).astype(DType::float32);
      std::vector<Value> unique_args;
      unique_args.emplace_back(g.astype(DType::float32).copy());
      unique_args.emplace_back(out32);
      unique_args.emplace_back(int64_t{axis});
      Array got = call_primitive(grad_op.c_str(), std::move(unique_args)).as_array();
      EXPECT_EQ(got.dtype(), DType::float32);
      EXPECT_TRUE(grads_close(got, analytic, 1e-4, 1e-6)) << op << " float32 axis " << axis;
    }
  }
}

TEST(NnSoftmax, GradientsMatchFiniteDifferences) {
  Array x = randn({2, 3, 4}, 11);
  for (int axis : {-1, 1, 0}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      auto f = [&](const Array& v) { return call(op, {v, int64_t{axis}}).as_array(); };
      Array g = randn(x.shape(), 12);
      std::string grad_op = std::string(op) + "_grad";
      Array analytic = call(grad_op.c_str(), {g, f(x), int64_t{axis}}).as_array();
      EXPECT_TRUE(grads_close(analytic, numeric_vjp(f, x, g))) << op << " axis " << axis;
    }
  }
}

TEST(NnSoftmax, Errors) {
  EXPECT_TRUE(
      throws_with<std::out_of_range>([] { call("softmax", {f64({1, 2}, {2}), int64_t{1}}); },
                                     "[softmax] axis 1 is out of bounds for array of "
                                     "dimension 1"));
  EXPECT_TRUE(throws_with<std::out_of_range>([] { call("log_softmax", {Value(1.0)}); },
                                             "[log_softmax] axis -1 is out of bounds for array "
                                             "of dimension 0"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("softmax_grad", {f64({1, 2}, {2}), f64({0.5, 0.25, 0.25}, {3})}); },
      "[softmax_grad] g has shape (2,) but out has shape (3,)"));
  EXPECT_TRUE(throws_with<TypeError>([] { call("softmax", {f64({1, 2}, {2}), 0.5}); },
                                     "[softmax] argument 'axis' must be an integer"));
}

// ---- bias_add, batch_flatten ----

TEST(NnBiasAdd, ForwardAndGradients) {
  Array x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(array_eq(call("bias_add", {x, f64({10, 20, 30}, {3})}), DType::float64, {2, 3},
                       {11, 22, 33, 14, 25, 36}));
  Array x3 = randn({2, 3, 4}, 5);
  Array b = randn({4}, 6);
  auto fb = [&](const Array& v) { return call("bias_add", {x3, v}).as_array(); };
  Array g = randn({2, 3, 4}, 7);
  EXPECT_TRUE(grads_close(call("bias_add_grad", {g}).as_array(), numeric_vjp(fb, b, g)));
  EXPECT_TRUE(array_eq(call("bias_add_grad", {f64({1, 2, 3, 4, 5, 6}, {2, 3})}), DType::float64,
                       {3}, {5, 7, 9}));
  EXPECT_TRUE(array_eq(call("bias_add_grad", {Array::zeros(DType::float32, {0, 2})}),
                       DType::float32, {2}, {0, 0}));
}

TEST(NnBiasAdd, Dtypes) {
  EXPECT_TRUE(array_eq(call("bias_add", {f32({1, 2}, {1, 2}), f32({0.5f, 1.5f}, {2})}),
                       DType::float32, {1, 2}, {1.5, 3.5}));
  EXPECT_EQ(call("bias_add", {f32({1, 2}, {1, 2}), f64({0.5, 1.5}, {2})}).as_array().dtype(),
            DType::float64);
  EXPECT_TRUE(array_eq(call("bias_add", {i64({1, 2}, {1, 2}), i64({1, 1}, {2})}), DType::float64,
                       {1, 2}, {2, 3}));
}

TEST(NnBiasAdd, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("bias_add", {f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({1, 2}, {2})}); },
      "[bias_add] b must be 1-d with one value per channel (the last axis of x, 3), got shape "
      "(2,) for x of shape (2, 3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("bias_add", {Value(1.0), Value(1.0)}); },
                                                 "[bias_add] x must have at least 1 dimension"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("bias_add_grad", {Value(1.0)}); },
                                                 "[bias_add_grad] g must have at least 1 "
                                                 "dimension"));
}

TEST(NnBatchFlatten, ShapesAndGradient) {
  Array x = randn({2, 3, 4}, 1);
  Value f = call("batch_flatten", {x});
  EXPECT_TRUE(array_eq(f, DType::float64, {2, 12}, values(x)));
  EXPECT_TRUE(f.as_array().shares_storage(x));
  EXPECT_EQ(call("batch_flatten", {f64({1, 2, 3}, {3})}).as_array().shape(), (Shape{3, 1}));
  EXPECT_EQ(call("batch_flatten", {Array(DType::float32, {0, 5, 2})}).as_array().shape(),
            (Shape{0, 10}));
  EXPECT_EQ(call("batch_flatten", {i64({1, 2}, {1, 2})}).as_array().dtype(), DType::int64);
  // The gradient rule: reshape(g, shape(x)).
  Value back = call("reshape", {call("batch_flatten", {x}), call("shape", {x})});
  EXPECT_TRUE(array_eq(back, DType::float64, {2, 3, 4}, values(x)));
  EXPECT_TRUE(
      throws_with<std::invalid_argument>([] { call("batch_flatten", {Value(3.0)}); },
                                         "[batch_flatten] x must have at least 1 dimension"));
}

// ---- dropout ----

TEST(NnDropout, IdentityWhenNotTrainingOrRateZero) {
  Array x = f64({1, 2, 3}, {3});
  EXPECT_TRUE(named("dropout", {{"", x}, {"", 0.5}, {"", int64_t{1}}, {"training", false}})
                  .as_array()
                  .shares_storage(x));
  EXPECT_TRUE(call("dropout", {x, 0.0, int64_t{1}}).as_array().shares_storage(x));
  EXPECT_TRUE(call("dropout", {Value(2.0), 0.0, int64_t{1}}).equals(Value(2.0)));
}

TEST(NnDropout, MaskValuesAndStatistics) {
  const int64_t n = 100000;
  Array x = Array::full(DType::float64, {n}, 3.0);
  for (double rate : {0.1, 0.5, 0.8}) {
    Array y = call("dropout", {x, rate, int64_t{42}}).as_array();
    int64_t kept = 0;
    const uint64_t threshold = kernels::dropout_threshold(rate);
    for (int64_t i = 0; i < n; ++i) {
      double v = y.get_double(i);
      bool keep = v != 0.0;
      if (keep) {
        ++kept;
        EXPECT_NEAR(v, 3.0 / (1.0 - rate), 1e-12);
      }
      // The mask is the documented function of (seed, index).
      if (keep != kernels::dropout_keeps(42, threshold, i)) {
        ADD_FAILURE() << "element " << i;
        break;
      }
    }
    // Binomial: the standard deviation of the kept fraction is < 0.0016.
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - rate, 0.01) << rate;
  }
}

TEST(NnDropout, DeterministicAcrossThreadsAndSeedsDiffer) {
  const int before = num_threads();
  Array x = randn({300000}, 3).astype(DType::float32);
  set_num_threads(1);
  Value one = call("dropout", {x, 0.5, int64_t{7}});
  set_num_threads(4);
  Value four = call("dropout", {x, 0.5, int64_t{7}});
  set_num_threads(before);
  EXPECT_TRUE(one.equals(four));
  EXPECT_EQ(one.as_array().dtype(), DType::float32);
  EXPECT_TRUE(call("dropout", {x, 0.5, int64_t{7}}).equals(one));
  EXPECT_FALSE(call("dropout", {x, 0.5, int64_t{8}}).equals(one));
  // Masks of a prefix agree: element i does not depend on the array's size.
  Array ones = Array::full(DType::float64, {10}, 1.0);
  Array head = call("dropout", {ones, 0.5, int64_t{7}}).as_array();
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(head.get_double(i) != 0, one.as_array().get_double(i) != 0) << i;
  }
}

TEST(NnDropout, GradientAppliesTheSameMask) {
  Array x = randn({4, 5}, 2);
  auto f = [&](const Array& v) { return call("dropout", {v, 0.4, int64_t{3}}).as_array(); };
  Array g = randn({4, 5}, 4);
  // The rule: dropout(g, rate, seed, training).
  Array analytic = call("dropout", {g, 0.4, int64_t{3}, true}).as_array();
  EXPECT_TRUE(grads_close(analytic, numeric_vjp(f, x, g)));
}

TEST(NnDropout, Errors) {
  Array x = f64({1, 2}, {2});
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("dropout", {x, 1.0, int64_t{1}}); },
                                                 "[dropout] argument 'rate' must be in [0, 1), "
                                                 "got 1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("dropout", {x, -0.1, int64_t{1}}); },
                                                 "[dropout] argument 'rate' must be in [0, 1), "
                                                 "got -0.1"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("dropout", {x, 0.5, 1.5}); },
                                     "[dropout] argument 'seed' must be an integer"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("dropout", {Value("x"), 0.5, int64_t{1}}); },
                                     "[dropout] argument 'x' must be a number or an array"));
}

// ---- batch normalization ----

namespace {

// Reference batch normalization of a (rows, channels) view.
std::vector<double> bn_ref(const Array& x, const std::vector<double>& gamma,
                           const std::vector<double>& beta, const std::vector<double>* mean_in,
                           const std::vector<double>* var_in, double eps) {
  const int64_t c = x.shape().back(), rows = x.size() / c;
  std::vector<double> mean(c, 0), var(c, 0), out(x.size());
  for (int64_t j = 0; j < c; ++j) {
    if (mean_in) {
      mean[j] = (*mean_in)[j];
      var[j] = (*var_in)[j];
      continue;
    }
    for (int64_t r = 0; r < rows; ++r) mean[j] += x.get_double(r * c + j) / rows;
    for (int64_t r = 0; r < rows; ++r) {
      double d = x.get_double(r * c + j) - mean[j];
      var[j] += d * d / rows;
    }
  }
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t j = i % c;
    out[i] = gamma[j] * (x.get_double(i) - mean[j]) / std::sqrt(var[j] + eps) + beta[j];
  }
  return out;
}

Value bn(const Array& x, Value gamma, Value beta, Value mean, Value var, double eps,
         bool training) {
  return call("batch_norm", {x, gamma, beta, mean, var, eps, training});
}

}  // namespace

TEST(NnBatchNorm, TrainingForward) {
  Array x = randn({4, 3, 2}, 21, 2.0);
  std::vector<double> gamma{1.5, -0.5}, beta{0.1, 0.2};
  EXPECT_TRUE(array_eq(bn(x, f64(gamma, {2}), f64(beta, {2}), Value(), Value(), 1e-3, true),
                       DType::float64, {4, 3, 2}, bn_ref(x, gamma, beta, nullptr, nullptr, 1e-3),
                       1e-10));
  // Defaults: gamma 1, beta 0, epsilon 1e-3, training.
  EXPECT_TRUE(array_eq(call("batch_norm", {x}), DType::float64, {4, 3, 2},
                       bn_ref(x, {1, 1}, {0, 0}, nullptr, nullptr, 1e-3), 1e-10));
  // Hand-checked: channel [1, 3] has mean 2, variance 1 -> [-1, 1] / sqrt(1 + eps).
  EXPECT_TRUE(array_eq(named("batch_norm", {{"", f64({1, 3}, {2, 1})}, {"epsilon", 0.0}}),
                       DType::float64, {2, 1}, {-1, 1}));
}

TEST(NnBatchNorm, InferenceUsesGivenMoments) {
  Array x = randn({5, 3}, 22);
  std::vector<double> gamma{1, 2, 3}, beta{0, 1, 2}, mean{0.5, -0.5, 0}, var{1, 4, 0.25};
  Value y = bn(x, f64(gamma, {3}), f64(beta, {3}), f64(mean, {3}), f64(var, {3}), 1e-3, false);
  EXPECT_TRUE(
      array_eq(y, DType::float64, {5, 3}, bn_ref(x, gamma, beta, &mean, &var, 1e-3), 1e-12));
}

TEST(NnBatchNorm, Stats) {
  Array x = f64({1, 10, 3, 20, 5, 60}, {3, 2});
  Value s = call("batch_norm_stats", {x});
  ASSERT_TRUE(s.is_list());
  EXPECT_TRUE(array_eq(s.as_list()[0], DType::float64, {2}, {3, 30}));
  EXPECT_TRUE(array_eq(s.as_list()[1], DType::float64, {2}, {8.0 / 3, 1400.0 / 3}));
  Value s32 = call("batch_norm_stats", {x.astype(DType::float32)});
  EXPECT_EQ(s32.as_list()[0].as_array().dtype(), DType::float32);
}

TEST(NnBatchNorm, Dtypes) {
  Array x = randn({6, 4}, 23).astype(DType::float32);
  Value y = call("batch_norm", {x});
  EXPECT_EQ(y.as_array().dtype(), DType::float32);
  EXPECT_TRUE(array_eq(y.as_array().astype(DType::float64), DType::float64, {6, 4},
                       bn_ref(x, {1, 1, 1, 1}, {0, 0, 0, 0}, nullptr, nullptr, 1e-3), 1e-5, 1e-5));
  EXPECT_EQ(call("batch_norm", {i64({1, 2, 3, 4}, {2, 2})}).as_array().dtype(), DType::float64);
  EXPECT_TRUE(
      array_eq(call("batch_norm", {Array(DType::float32, {0, 3})}), DType::float32, {0, 3}, {}));
}

TEST(NnBatchNorm, TrainingGradientsMatchFiniteDifferences) {
  Array x = randn({3, 4, 3}, 31, 1.5);
  Array gamma = f64({1.2, -0.7, 0.4}, {3});
  Array beta = f64({0.3, -0.1, 0.0}, {3});
  Array g = randn(x.shape(), 32);
  const double eps = 1e-3;
  const Value nil;
  auto fx = [&](const Array& v) { return bn(v, gamma, beta, nil, nil, eps, true).as_array(); };
  auto fgamma = [&](const Array& v) { return bn(x, v, beta, nil, nil, eps, true).as_array(); };
  auto fbeta = [&](const Array& v) { return bn(x, gamma, v, nil, nil, eps, true).as_array(); };
  Array dx = call("batch_norm_grad", {g, x, gamma, Value(), Value(), eps, true}).as_array();
  EXPECT_TRUE(grads_close(dx, numeric_vjp(fx, x, g), 1e-5, 1e-6));
  Array dgamma = call("batch_norm_gamma_grad", {g, x, Value(), Value(), eps, true}).as_array();
  EXPECT_TRUE(grads_close(dgamma, numeric_vjp(fgamma, gamma, g)));
  EXPECT_TRUE(grads_close(call("bias_add_grad", {g}).as_array(), numeric_vjp(fbeta, beta, g)));
}

TEST(NnBatchNorm, InferenceGradientsMatchFiniteDifferences) {
  Array x = randn({5, 2}, 33);
  Array gamma = f64({0.8, 1.3}, {2}), beta = f64({0.1, 0.2}, {2});
  Array mean = f64({0.2, -0.3}, {2}), var = f64({0.5, 2.0}, {2});
  Array g = randn(x.shape(), 34);
  auto fx = [&](const Array& v) { return bn(v, gamma, beta, mean, var, 1e-3, false).as_array(); };
  auto fgamma = [&](const Array& v) { return bn(x, v, beta, mean, var, 1e-3, false).as_array(); };
  EXPECT_TRUE(grads_close(call("batch_norm_grad", {g, x, gamma, mean, var, 1e-3, false}).as_array(),
                          numeric_vjp(fx, x, g)));
  EXPECT_TRUE(grads_close(call("batch_norm_gamma_grad", {g, x, mean, var, 1e-3, false}).as_array(),
                          numeric_vjp(fgamma, gamma, g)));
}

TEST(NnBatchNorm, StatsArgumentAndFusedRelu) {
  Array x = randn({4, 5, 3}, 24, 2.0);
  std::vector<double> gamma{1.5, -0.5, 0.7}, beta{0.1, 0.2, -0.3};
  Value stats = call("batch_norm_stats", {x});
  auto ref = bn_ref(x, gamma, beta, nullptr, nullptr, 1e-3);
  Value args_g = f64(gamma, {3}), args_b = f64(beta, {3});
  Value with_stats = call("batch_norm", {x, args_g, args_b, Value(), Value(), 1e-3, true, stats});
  EXPECT_TRUE(array_eq(with_stats, DType::float64, {4, 5, 3}, ref, 1e-10));
  std::vector<double> relu_ref = ref;
  for (double& v : relu_ref) v = std::max(v, 0.0);
  EXPECT_TRUE(array_eq(call("batch_norm_relu", {x, args_g, args_b}), DType::float64, {4, 5, 3},
                       relu_ref, 1e-10));
  // Inference: the moving statistics; stats are ignored there.
  std::vector<double> mean{0.5, -0.5, 0}, var{1, 4, 0.25};
  auto inf = bn_ref(x, gamma, beta, &mean, &var, 1e-3);
  for (double& v : inf) v = std::max(v, 0.0);
  EXPECT_TRUE(array_eq(call("batch_norm_relu", {x, args_g, args_b, f64(mean, {3}), f64(var, {3}),
                                                1e-3, false, stats}),
                       DType::float64, {4, 5, 3}, inf, 1e-12));
  // float32: the very bits of relu(batch_norm(x)).
  Array x32 = x.astype(DType::float32);
  Value s32 = call("batch_norm_stats", {x32});
  Value fused = call("batch_norm_relu", {x32, args_g, args_b, Value(), Value(), 1e-3, true, s32});
  Value apart = call("relu", {call("batch_norm", {x32, args_g, args_b, Value(), Value(), 1e-3,
                                                  true, s32})});
  EXPECT_TRUE(fused.equals(apart));
}

// batch_norm_add_relu(x, residual, ...) = relu(batch_norm(x, ...) + residual)
// in training and inference, float32 within rounding of the composition (the
// sum is rounded in another order); residual of another shape is an error.
TEST(NnBatchNorm, AddReluIsTheComposition) {
  Array x = randn({4, 5, 3}, 24, 2.0), res = randn({4, 5, 3}, 27);
  Value args_g = f64({1.5, -0.5, 0.7}, {3}), args_b = f64({0.1, 0.2, -0.3}, {3});
  Value mean = f64({0.5, -0.5, 0}, {3}), var = f64({1, 4, 0.25}, {3});
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    for (DType dt : {DType::float64, DType::float32}) {
      Array xd = x.astype(dt), rd = res.astype(dt);
      Value stats = call("batch_norm_stats", {xd});
      Value fused = call("batch_norm_add_relu",
                         {xd, rd, args_g, args_b, mean, var, 1e-3, training, stats});
      Value apart = call("relu", {call("add", {call("batch_norm", {xd, args_g, args_b, mean, var,
                                                                   1e-3, training, stats}),
                                               rd})});
      ASSERT_EQ(fused.as_array().dtype(), apart.as_array().dtype());
      EXPECT_TRUE(grads_close(fused.as_array(), apart.as_array(),
                              dt == DType::float64 ? 1e-14 : 1e-6, 1e-6));
    }
  }
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("batch_norm_add_relu", {x, randn({4, 5, 1}, 2)}); },
      "[batch_norm_add_relu] residual has shape (4, 5, 1) but x has shape (4, 5, 3): they must "
      "be equal"));
}

// batch_norm_grad_sums_masked gives g where y > 0 and the sums of it, in one
// pass: the bits of relu_grad(g, y) and batch_norm_grad_sums(that, ...).
TEST(NnBatchNorm, MaskedGradSumsAreReluGradAndSums) {
  Array x = randn({6, 4, 3}, 28), g = randn({6, 4, 3}, 29), y = randn({6, 4, 3}, 30);
  for (DType dt : {DType::float64, DType::float32}) {
    Array xd = x.astype(dt), gd = g.astype(dt), yd = y.astype(dt);
    Value stats = call("batch_norm_stats", {xd});
    Value both = call("batch_norm_grad_sums_masked",
                      {gd, xd, Value(), Value(), 1e-3, true, stats, yd});
    ASSERT_TRUE(both.is_list());
    Value gm = call("relu_grad", {gd, yd});
    EXPECT_TRUE(both.as_list()[0].equals(gm));
    Value sums = call("batch_norm_grad_sums", {gm, xd, Value(), Value(), 1e-3, true, stats});
    EXPECT_TRUE(both.as_list()[1].equals(sums));
  }
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("batch_norm_grad_sums_masked", {g, x}); },
      "[batch_norm_grad_sums_masked] y is required"));
}

TEST(NnBatchNorm, OnePassStatisticsOfAnOffsetBatch) {
  // |mean| >> std: the shifted sums keep the variance (a plain sum of squares
  // would lose it to cancellation).
  Array x = randn({3000, 2}, 25, 1e-3);
  for (int64_t i = 0; i < x.size(); ++i) x.data<double>()[i] += i % 2 ? -1e5 : 1e4;
  Value s = call("batch_norm_stats", {x});
  auto ref = bn_ref(x, {1, 1}, {0, 0}, nullptr, nullptr, 0.0);  // (x - mean) / std
  std::vector<double> mean(2, 0.0), var(2, 0.0);
  for (int64_t i = 0; i < x.size(); ++i) mean[i % 2] += x.get_double(i) / 3000;
  for (int64_t i = 0; i < x.size(); ++i) {
    const double d = x.get_double(i) - mean[i % 2];
    var[i % 2] += d * d / 3000;
  }
  EXPECT_TRUE(array_eq(s.as_list()[0], DType::float64, {2}, mean, 1e-14));
  EXPECT_TRUE(array_eq(s.as_list()[1], DType::float64, {2}, var, 1e-8));
  EXPECT_TRUE(array_eq(named("batch_norm", {{"", x}, {"epsilon", 0.0}}), DType::float64,
                       {3000, 2}, ref, 1e-7, 1e-7));
}

TEST(NnBatchNorm, GradSumsAndFusedReluGradients) {
  Array x = away_from_zero({3, 4, 3}, 35);
  Array gamma = f64({1.2, -0.7, 0.4}, {3});
  Array beta = f64({0.3, -0.1, 0.2}, {3});
  Array g = randn(x.shape(), 36);
  const double eps = 1e-3;
  const Value nil;
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "batch_norm_relu" : "batch_norm");
    const char* op = relu ? "batch_norm_relu" : "batch_norm";
    auto run = [&](const Array& xv, const Array& gv, const Array& bv) {
      return call(op, {xv, gv, bv, nil, nil, eps, true}).as_array();
    };
    auto fx = [&](const Array& v) { return run(v, gamma, beta); };
    auto fgamma = [&](const Array& v) { return run(x, v, beta); };
    auto fbeta = [&](const Array& v) { return run(x, gamma, v); };
    Array y = fx(x);
    Value mask = relu ? Value(y) : nil;
    Value stats = call("batch_norm_stats", {x});
    Array sums =
        call("batch_norm_grad_sums", {g, x, nil, nil, eps, true, stats, mask}).as_array();
    ASSERT_EQ(sums.shape(), (Shape{2, 3}));
    // Reference in the test: sum(g') and sum(g' * xhat), g' = g where y > 0.
    auto xhat = bn_ref(x, {1, 1, 1}, {0, 0, 0}, nullptr, nullptr, eps);
    std::vector<double> want(6, 0.0);
    for (int64_t i = 0; i < x.size(); ++i) {
      const double gi = relu && y.get_double(i) <= 0 ? 0.0 : g.get_double(i);
      want[i % 3] += gi;
      want[3 + i % 3] += gi * xhat[i];
    }
    EXPECT_TRUE(array_eq(sums, DType::float64, {2, 3}, want, 1e-10));
    Array dgamma = f64({want[3], want[4], want[5]}, {3});
    Array dbeta = f64({want[0], want[1], want[2]}, {3});
    EXPECT_TRUE(grads_close(dgamma, numeric_vjp(fgamma, gamma, g)));
    EXPECT_TRUE(grads_close(dbeta, numeric_vjp(fbeta, beta, g)));
    // dx from the given sums and statistics, and computed from scratch.
    Value mask_or_nil = relu ? Value(y) : nil;
    Array dx = call("batch_norm_grad",
                    {g, x, gamma, nil, nil, eps, true, stats, sums, mask_or_nil})
                   .as_array();
    EXPECT_TRUE(grads_close(dx, numeric_vjp(fx, x, g), 1e-5, 1e-6));
    Array dx_alone =
        call("batch_norm_grad", {g, x, gamma, nil, nil, eps, true, nil, nil, mask_or_nil})
            .as_array();
    EXPECT_TRUE(grads_close(dx_alone, dx, 1e-12, 1e-12));
  }
}

TEST(NnBatchNorm, DeterministicAcrossThreadCounts) {
  const int before = num_threads();
  Array x = randn({50000, 6}, 41, 3.0).astype(DType::float32);
  Array g = randn({50000, 6}, 42).astype(DType::float32);
  auto run = [&] {
    Value y = call("batch_norm_relu", {x});
    return List{call("batch_norm", {x}),
                y,
                call("batch_norm_stats", {x}),
                call("batch_norm_grad", {g, x}),
                call("batch_norm_gamma_grad", {g, x}),
                call("batch_norm_grad_sums", {g, x, Value(), Value(), 1e-3, true, Value(), y}),
                call("bias_add_grad", {g})};
  };
  set_num_threads(1);
  Value one = run();
  set_num_threads(4);
  Value four = run();
  set_num_threads(before);
  EXPECT_TRUE(one.equals(four));
}

TEST(NnBatchNorm, Errors) {
  Array x = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("batch_norm", {Value(1.0)}); },
                                                 "[batch_norm] x must have at least 1 dimension "
                                                 "(channels last), got a 0-d array"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("batch_norm", {x, f64({1, 2, 3}, {3})}); },
      "[batch_norm] argument 'gamma' must have shape (2,) (one value per channel), got shape "
      "(3,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { bn(x, Value(), Value(), Value(), Value(), 1e-3, false); },
      "[batch_norm] inference (training=false) needs the moving 'mean' and 'var', got nil and "
      "nil"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { bn(x, Value(), Value(), f64({0, 0}, {2}), f64({1, 1, 1}, {3}), 1e-3, false); },
      "[batch_norm] argument 'var' must have shape (2,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { bn(x, Value(), Value(), Value(), Value(), -1.0, true); },
      "[batch_norm] argument 'epsilon' must be non-negative, got -1"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("batch_norm_stats", {Array(DType::float64, {0, 3})}); },
      "[batch_norm_stats] batch statistics need a non-empty batch, got x of shape (0, 3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("batch_norm_grad", {f64({1, 2}, {2}), x}); },
      "[batch_norm_grad] g has shape (2,) but x has shape (3, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("batch_norm_gamma_grad", {x, x, Value(), Value(), 1e-3, false}); },
      "[batch_norm_gamma_grad] inference (training=false) needs the moving 'mean' and 'var'"));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] { call("batch_norm", {x, Value(), Value(), Value(), Value(), 1e-3, true, 1.0}); },
      "[batch_norm] argument 'stats' must be nil or list(mean, var) as batch_norm_stats(x) "
      "gives"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] {
        call("batch_norm_relu", {x, Value(), Value(), Value(), Value(), 1e-3, true,
                                 List{f64({0, 0}, {2}), f64({1, 1, 1}, {3})}});
      },
      "[batch_norm_relu] argument 'stats' must hold two arrays of shape (2,) (mean and var per "
      "channel), got shape (3,) for var"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] {
        call("batch_norm_grad", {x, x, Value(), Value(), Value(), 1e-3, true, Value(),
                                 f64({1, 2}, {2})});
      },
      "[batch_norm_grad] argument 'sums' must have shape (2, 2) as batch_norm_grad_sums gives, "
      "got shape (2,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] {
        call("batch_norm_grad_sums", {x, x, Value(), Value(), 1e-3, true, Value(),
                                      f64({1, 2}, {2})});
      },
      "[batch_norm_grad_sums] y has shape (2,) but x has shape (3, 2)"));
}

// ---- one_hot, accuracy ----

TEST(NnOneHot, Values) {
  EXPECT_TRUE(array_eq(call("one_hot", {i64({0, 2, 1}, {3}), int64_t{3}}), DType::float32, {3, 3},
                       {1, 0, 0, 0, 0, 1, 0, 1, 0}));
  EXPECT_TRUE(
      array_eq(named("one_hot", {{"", i64({1, 0}, {2, 1})}, {"", int64_t{2}}, {"dtype", "int64"}}),
               DType::int64, {2, 1, 2}, {0, 1, 1, 0}));
  EXPECT_TRUE(array_eq(call("one_hot", {Value(int64_t{2}), int64_t{4}}), DType::float32, {4},
                       {0, 0, 1, 0}));
  // Whole-number floats are labels too (datasets stored as float).
  EXPECT_TRUE(array_eq(call("one_hot", {f64({1.0, 0.0}, {2}), int64_t{2}}), DType::float32, {2, 2},
                       {0, 1, 1, 0}));
  EXPECT_TRUE(array_eq(call("one_hot", {i64({}, {0}), int64_t{3}}), DType::float32, {0, 3}, {}));
}

TEST(NnOneHot, Errors) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("one_hot", {i64({0, 1, 6, 2}, {4}), int64_t{6}}); },
      "[one_hot] label 6 at flat index 2 is out of range for depth 6 (valid labels are 0 to 5)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("one_hot", {i64({-1}, {1}), int64_t{6}}); },
      "[one_hot] label -1 at flat index 0 is out of range for depth 6"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("one_hot", {f64({0.0, 2.5}, {2}), int64_t{6}}); },
      "[one_hot] label 2.5 at flat index 1 is not a whole number"));
  EXPECT_TRUE(
      throws_with<std::invalid_argument>([] { call("one_hot", {i64({0}, {1}), int64_t{0}}); },
                                         "[one_hot] argument 'depth' must be positive, "
                                         "got 0"));
  EXPECT_TRUE(throws_with<TypeError>(
      [] { call("one_hot", {i64({0}, {1}), int64_t{2}, Value("quaternion")}); }, "quaternion"));
}

TEST(NnAccuracy, Modes) {
  Array probs = f64({0.1, 0.7, 0.2, 0.5, 0.3, 0.2, 0.2, 0.2, 0.6, 0.3, 0.3, 0.4}, {4, 3});
  // argmax rows: 1, 0, 2, 2
  Value acc = call("accuracy", {i64({1, 0, 1, 2}, {4}), probs});
  EXPECT_TRUE(array_eq(acc, DType::float64, {}, {0.75}));
  EXPECT_TRUE(
      array_eq(call("accuracy", {i64({1, 0, 1, 2}, {4, 1}), probs}), DType::float64, {}, {0.75}));
  Array onehot = call("one_hot", {i64({1, 1, 1, 2}, {4}), int64_t{3}}).as_array();
  EXPECT_TRUE(array_eq(call("accuracy", {onehot, probs}), DType::float64, {}, {0.5}));
  EXPECT_TRUE(array_eq(call("accuracy", {onehot, probs.astype(DType::float32)}), DType::float64, {},
                       {0.5}));
  // A last axis of 1: binary at 0.5.
  EXPECT_TRUE(array_eq(call("accuracy", {f64({1, 0, 1}, {3}), f64({0.9, 0.6, 0.4}, {3, 1})}),
                       DType::float64, {}, {1.0 / 3}));
  EXPECT_TRUE(array_eq(call("accuracy", {f64({1, 0, 1}, {3, 1}), f64({0.9, 0.2, 0.6}, {3, 1})}),
                       DType::float64, {}, {1.0}));
  // Ties pick the first maximum, as numpy.argmax.
  EXPECT_TRUE(array_eq(call("accuracy", {i64({0}, {1}), f64({0.5, 0.5}, {1, 2})}), DType::float64,
                       {}, {1.0}));
}

TEST(NnAccuracy, Errors) {
  Array probs = f64({0.1, 0.9, 0.8, 0.2}, {2, 2});
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("accuracy", {i64({0, 2}, {2}), probs}); },
      "[accuracy] label 2 at flat index 1 is out of range for depth 2"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("accuracy", {i64({0, 1, 1}, {3}), probs}); },
      "[accuracy] y_true has shape (3,) but y_pred has shape (2, 2): expected class indices of "
      "shape (2,) or one-hot rows of shape (2, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("accuracy", {i64({}, {0}), Array(DType::float64, {0, 3})}); },
      "[accuracy] y_pred is empty: shape (0, 3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { call("accuracy", {Value(1.0), Value(1.0)}); },
                                                 "[accuracy] y_pred must have at least 1 "
                                                 "dimension"));
}

TEST(NnRegistry, GradientRulesAndFamilies) {
  for (const char* op : {"relu", "leaky_relu", "elu", "gelu", "sigmoid", "softplus", "softmax",
                         "log_softmax", "bias_add", "batch_flatten", "dropout", "batch_norm",
                         "batch_norm_relu"}) {
    const PrimitiveSpec* s = find_primitive(op);
    ASSERT_NE(s, nullptr) << op;
    EXPECT_EQ(s->family, "nn") << op;
    EXPECT_EQ(s->grads.size(), s->params.size()) << op;
    EXPECT_FALSE(s->grads[0].empty()) << op;
  }
  for (const char* op : {"relu_grad", "tanh_grad", "sigmoid_grad", "softmax_grad",
                         "batch_norm_grad", "batch_norm_gamma_grad", "batch_norm_grad_sums",
                         "bias_add_grad"}) {
    ASSERT_NE(find_primitive(op), nullptr) << op;
  }
}

// ---- end to end: grad() in the language through every rule of nn and losses ----

namespace {

// f(params...) = sum(body * weights) with fixed weights, differentiated by the
// language's grad() and by central differences of the same program.
struct LangCase {
  std::string primitive;
  std::string body;
  std::vector<std::string> params;
};

Array lang_input(const std::string& name) {
  if (name == "a") return f64({0.3, -0.7, 1.1, 0.45, -1.3, 0.8}, {2, 3});
  if (name == "b") return f64({0.9, 0.35, -0.4, 1.2, 0.6, -0.25}, {2, 3});
  if (name == "prob") return f64({0.2, 0.5, 0.3, 0.6, 0.1, 0.3}, {2, 3});
  if (name == "pos") return f64({0.4, 1.5, 0.9, 2.0, 0.3, 1.1}, {2, 3});
  if (name == "cube") {
    return f64({0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2}, {2, 3, 2});
  }
  if (name == "res") {
    return f64({0.6, 0.25, -0.35, 0.9, 0.15, -0.7, 0.45, 0.3, -0.55, 0.8, 0.65, -0.2}, {2, 3, 2});
  }
  if (name == "w") return f64({1.5, -0.5}, {2});
  if (name == "w2") return f64({0.2, 0.7}, {2});
  ADD_FAILURE() << "no input " << name;
  return Array();
}

const std::vector<LangCase>& lang_cases() {
  static const std::vector<LangCase> c = {
      {"relu", "relu(a)", {"a"}},
      {"leaky_relu", "leaky_relu(a, alpha=0.1)", {"a"}},
      {"elu", "elu(a)", {"a"}},
      {"gelu", "gelu(a)", {"a"}},
      {"gelu", "gelu(a, approximate=true)", {"a"}},
      {"sigmoid", "sigmoid(a)", {"a"}},
      {"softplus", "softplus(a)", {"a"}},
      {"tanh", "tanh(a)", {"a"}},
      {"softmax", "softmax(a)", {"a"}},
      {"softmax", "softmax(cube, axis=1)", {"cube"}},
      {"log_softmax", "log_softmax(a, axis=0)", {"a"}},
      {"bias_add", "bias_add(cube, w)", {"cube", "w"}},
      {"batch_flatten", "batch_flatten(cube) * 2.0", {"cube"}},
      {"dropout", "dropout(a, 0.5, 3)", {"a"}},
      {"batch_norm", "batch_norm(cube, w, w2)", {"cube", "w", "w2"}},
      {"batch_norm",
       "batch_norm(cube, w, w2, [0.1, -0.2], [0.5, 2.0], epsilon=0.01, training=false)",
       {"cube", "w", "w2"}},
      {"batch_norm", "batch_norm(cube, w, w2, stats=batch_norm_stats(cube))", {"cube", "w", "w2"}},
      {"batch_norm_relu", "batch_norm_relu(cube, w, w2)", {"cube", "w", "w2"}},
      {"batch_norm_add_relu", "batch_norm_add_relu(cube, res, w, w2)", {"cube", "res", "w", "w2"}},
      {"batch_norm_add_relu",
       "batch_norm_add_relu(cube, res, w, w2, stats=batch_norm_stats(cube))",
       {"cube", "res", "w", "w2"}},
      {"batch_norm_add_relu",
       "batch_norm_add_relu(cube, res, w, w2, [0.1, -0.2], [0.5, 2.0], training=false)",
       {"cube", "res", "w", "w2"}},
      {"batch_norm_add_relu",
       "batch_norm_add_relu(cube, res, [1.5, -0.5], [0.2, 0.7], [0.1, -0.2], [0.5, 2.0], "
       "training=false)",
       {"cube", "res"}},
      {"batch_norm_relu",
       "batch_norm_relu(cube, w, w2, [0.1, -0.2], [0.5, 2.0], training=false)",
       {"cube", "w", "w2"}},
      // Frozen (inference, only x differentiated): no sums are computed.
      {"batch_norm_relu",
       "batch_norm_relu(cube, [1.5, -0.5], [0.2, 0.7], [0.1, -0.2], [0.5, 2.0], training=false)",
       {"cube"}},
      {"categorical_crossentropy",
       "categorical_crossentropy(one_hot([1, 0], 3, \"float64\"), softmax(a))",
       {"a"}},
      {"categorical_crossentropy", "categorical_crossentropy(P, b, from_logits=true)", {"b"}},
      {"sparse_categorical_crossentropy",
       "sparse_categorical_crossentropy([2, 0], prob)",
       {"prob"}},
      {"sparse_categorical_crossentropy", "sparse_categorical_crossentropy([1, 2], pos)", {"pos"}},
      {"sparse_categorical_crossentropy",
       "sparse_categorical_crossentropy([2, 0], a, from_logits=true)",
       {"a"}},
      {"binary_crossentropy", "binary_crossentropy(P, sigmoid(a))", {"a"}},
      {"binary_crossentropy", "binary_crossentropy(P, a, from_logits=true)", {"a"}},
      {"mean_squared_error", "mean_squared_error(B, a)", {"a"}},
  };
  return c;
}

std::string lang_program(const LangCase& c, bool with_grad) {
  std::string params;
  for (const auto& p : c.params) params += p + ", ";
  std::string wrt = "[";
  for (size_t i = 0; i < c.params.size(); ++i) wrt += (i ? ", " : "") + std::to_string(i);
  // Constants (not differentiated): P holds probability rows, B targets.
  return "define(P, [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])\n"
         "define(B, [[0.9, 0.35, -0.4], [1.2, 0.6, -0.25]])\n"
         "define(weights, y, reshape(arange(size(y)) * 0.37 + 0.5, shape(y)))\n"
         "define(f, " +
         params + "sum((" + c.body + ") * weights(" + c.body + ")))\n" +
         (with_grad ? "grad(f, " + wrt + "])" : "f");
}

}  // namespace

TEST(NnAutodiff, GradThroughTheLanguageMatchesCentralDifferences) {
  const double h = 1e-6;
  for (const auto& c : lang_cases()) {
    SCOPED_TRACE(c.body);
    Program f(lang_program(c, false), "f.tsl");
    Program g(lang_program(c, true), "g.tsl");
    std::vector<Array> args;
    for (const auto& p : c.params) args.push_back(lang_input(p));
    Value grads = g.run(std::vector<Value>(args.begin(), args.end()));
    ASSERT_TRUE(grads.is_list());
    auto value_at = [&](const std::vector<Array>& in) {
      return f.run(std::vector<Value>(in.begin(), in.end())).as_array().get_double(0);
    };
    for (size_t i = 0; i < args.size(); ++i) {
      const Array& analytic = grads.as_list()[i].as_array();
      ASSERT_EQ(analytic.shape(), args[i].shape());
      for (int64_t k = 0; k < args[i].size(); ++k) {
        std::vector<Array> plus = args, minus = args;
        plus[i] = args[i].copy();
        minus[i] = args[i].copy();
        plus[i].data<double>()[k] += h;
        minus[i].data<double>()[k] -= h;
        double numeric = (value_at(plus) - value_at(minus)) / (2 * h);
        EXPECT_NEAR(analytic.get_double(k), numeric, 1e-5 + 1e-5 * std::fabs(numeric))
            << "d/d" << c.params[i] << "[" << k << "]";
      }
    }
  }
}

TEST(NnAutodiff, EveryRuleOfNnAndLossesHasALanguageCase) {
  // The differentiable primitives of nn.cpp and losses.cpp (convolution and
  // pooling, also of the nn family, are tested with their own file).
  std::set<std::string> covered;
  for (const auto& c : lang_cases()) covered.insert(c.primitive);
  for (const char* op :
       {"relu", "leaky_relu", "elu", "gelu", "sigmoid", "softplus", "softmax", "log_softmax",
        "bias_add", "batch_flatten", "dropout", "batch_norm", "batch_norm_relu",
        "batch_norm_add_relu", "categorical_crossentropy",
        "sparse_categorical_crossentropy", "binary_crossentropy", "mean_squared_error"}) {
    EXPECT_TRUE(covered.count(op)) << "no language case for " << op;
  }
  for (const PrimitiveSpec* s : all_primitives()) {
    if (s->family != "losses") continue;
    bool has_rule = false;
    for (const auto& r : s->grads) has_rule = has_rule || !r.empty();
    if (has_rule && !covered.count(s->name)) ADD_FAILURE() << "no language case for " << s->name;
  }
}

TEST(NnAutodiff, ConstantsStopDifferentiation) {
  // one_hot, accuracy and batch_norm_stats pass no gradient (and do not fail).
  Value r = eval_string(
      "define(f, x, sum(x * accuracy([1, 0], x)) + sum(batch_norm_stats(x)[0]))\n"
      "grad(f)([[0.2, 0.8], [0.9, 0.1]])");
  EXPECT_TRUE(array_eq(r, DType::float64, {2, 2}, {1, 1, 1, 1}));
}

// dropout_range over any sub-range (tiles start anywhere) gives the bits of
// the whole range; rate 1 keeps nothing (x * 0, sign kept); float64 too.
TEST(NnDropout, RangesAnywhereGiveTheSameBits) {
  for (DType dt : {DType::float32, DType::float64}) {
    const int64_t n = 700;
    std::vector<double> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = std::sin(0.37 * static_cast<double>(i));
    Array x = Array::from_vector(values, {n}).astype(dt);
    for (double rate : {0.3, 1.0}) {
      const uint64_t threshold = tessera::kernels::dropout_threshold(rate);
      const double scale = rate < 1 ? 1.0 / (1.0 - rate) : 0.0;
      Array whole = Array::zeros(dt, {n});
      tessera::kernels::dropout_range(x, whole, 9, threshold, scale, 0, n);
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = rate < 1 && tessera::kernels::dropout_keeps(9, threshold, i);
        const double m = keep ? scale : 0.0;
        const double want =
            dt == DType::float32
                ? static_cast<double>(static_cast<float>(x.get_double(i)) * static_cast<float>(m))
                : x.get_double(i) * m;
        ASSERT_EQ(whole.get_double(i), want) << i;
        ASSERT_EQ(std::signbit(whole.get_double(i)), std::signbit(want)) << i;
      }
      for (int64_t b : {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{255}, int64_t{257}}) {
        for (int64_t e : {b + 1, b + 6, b + 300, n}) {
          Array part = Array::zeros(dt, {n});
          tessera::kernels::dropout_range(x, part, 9, threshold, scale, b, std::min(e, n));
          for (int64_t i = b; i < std::min(e, n); ++i) {
            ASSERT_EQ(part.get_double(i), whole.get_double(i)) << b << " " << e << " " << i;
          }
        }
      }
    }
  }
}

// Dropout draws its words several counters at a time: the same words as one
// counter at a time, for any start (also where the low word of the counter
// wraps inside a vector) and count, on each path the CPU has (AVX-512F, AVX2,
// portable), so masks did not change.
TEST(NnDropout, BatchedPhiloxWordsEqualOneAtATime) {
  const tessera::kernels::RandomKey key{0x1234567890abcdefull, 0x64726f706f7574ull};
  for (int isa : {0, 1, 2}) {
    for (uint64_t first :
         {uint64_t{0}, uint64_t{7}, (uint64_t{1} << 32) - 3, (uint64_t{5} << 32) - 12}) {
      for (int64_t count : {1, 7, 8, 9, 16, 17, 33, 64, 100}) {
        std::vector<uint32_t> words(4 * count);
        tessera::kernels::philox4x32_many_isa(isa, key, first, count, words.data());
        for (int64_t c = 0; c < count; ++c) {
          auto w = tessera::kernels::philox4x32(key, first + c);
          for (int j = 0; j < 4; ++j)
            EXPECT_EQ(words[4 * c + j], w[j]) << isa << " " << first << " " << c;
        }
      }
    }
  }
}
