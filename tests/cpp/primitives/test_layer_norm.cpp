// The fused layer normalization primitive without Python: values against a
// direct two-pass evaluation, the backward against central differences, bits
// that do not depend on the thread count, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

// x (rows, n) normalized per row, gamma and beta (n).
std::vector<double> direct_layer_norm(const std::vector<double>& x,
                                      const std::vector<double>& gamma,
                                      const std::vector<double>& beta, int64_t rows, int64_t n,
                                      double eps) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < n; ++c) mean += x[r * n + c];
    mean /= static_cast<double>(n);
    for (int64_t c = 0; c < n; ++c) var += (x[r * n + c] - mean) * (x[r * n + c] - mean);
    var /= static_cast<double>(n);
    for (int64_t c = 0; c < n; ++c) {
      out[r * n + c] = (x[r * n + c] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c];
    }
  }
  return out;
}

std::vector<double> wave(size_t n, double a, double b, double scale = 1.0) {
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = scale * std::sin(a * static_cast<double>(i) + b) + 2.0;
  return x;
}

}  // namespace

TEST(LayerNorm, MatchesADirectEvaluation) {
  const int64_t rows = 5, n = 11;  // a row of one 8-lane vector and a tail
  const auto x = wave(rows * n, 0.7, 0.1, 3.0), gamma = wave(n, 1.3, 0.4), beta = wave(n, 0.9, 1);
  Value got = named("layer_norm", {{"", f64(x, {rows, n})},
                                   {"", f64(gamma, {n})},
                                   {"", f64(beta, {n})},
                                   {"epsilon", Value(1e-5)}});
  EXPECT_TRUE(array_eq(got, DType::float64, {rows, n},
                       direct_layer_norm(x, gamma, beta, rows, n, 1e-5), 1e-12, 1e-13));
}

TEST(LayerNorm, GradientsMatchCentralDifferences) {
  const int64_t rows = 3, n = 9;
  const auto x = wave(rows * n, 0.5, 0.2, 2.0), gamma = wave(n, 1.1, 0.3), beta = wave(n, 0.3, 2);
  const auto g = wave(rows * n, 0.9, 0.7);
  Value grads = call("layer_norm_grad", {f64(g, {rows, n}), f64(x, {rows, n}), f64(gamma, {n}),
                                         Value(0.01)});
  const List& d = grads.as_list();
  ASSERT_EQ(d.size(), 3u);
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& gg,
                  const std::vector<double>& bb) {
    const auto y = direct_layer_norm(xx, gg, bb, rows, n, 0.01);
    double s = 0.0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * g[i];
    return s;
  };
  const double h = 1e-6;
  for (int which = 0; which < 3; ++which) {
    const std::vector<double>& base = which == 0 ? x : which == 1 ? gamma : beta;
    for (size_t i = 0; i < base.size(); i += 4) {
      std::vector<std::vector<double>> up = {x, gamma, beta}, down = up;
      up[which][i] += h;
      down[which][i] -= h;
      const double num = (loss(up[0], up[1], up[2]) - loss(down[0], down[1], down[2])) / (2 * h);
      EXPECT_NEAR(d[which].as_array().data<double>()[i], num, 1e-6) << which << " " << i;
    }
  }
}

TEST(LayerNorm, BitsDoNotDependOnTheThreadCount) {
  const int64_t rows = 3000, n = 20;  // several bands of rows
  std::vector<float> x(rows * n), g(x.size()), gamma(n), beta(n);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(std::sin(0.37 * i) * 4.0 + 1.0);
    g[i] = static_cast<float>(std::cos(0.11 * i));
  }
  for (int64_t c = 0; c < n; ++c) {
    gamma[c] = static_cast<float>(1.0 + 0.1 * c);
    beta[c] = static_cast<float>(0.05 * c);
  }
  const int saved = num_threads();
  std::vector<Array> first;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    Value out = call("layer_norm", {f32(x, {rows, n}), f32(gamma, {n}), f32(beta, {n})});
    Value grads = call("layer_norm_grad", {f32(g, {rows, n}), f32(x, {rows, n}), f32(gamma, {n})});
    std::vector<Array> now = {out.as_array()};
    for (const Value& v : grads.as_list()) now.push_back(v.as_array());
    if (first.empty()) {
      first = now;
      continue;
    }
    for (size_t i = 0; i < now.size(); ++i) {
      for (int64_t j = 0; j < now[i].size(); ++j) {
        ASSERT_EQ(now[i].data<float>()[j], first[i].data<float>()[j]) << threads << " threads";
      }
    }
  }
  set_num_threads(saved);
}

TEST(LayerNorm, ErrorsNameTheOperation) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("layer_norm", {f64({1, 2, 3, 4}, {2, 2}), f64({1, 2, 3}, {3}),
                               f64({1, 2, 3}, {3})}); },
      "[layer_norm] gamma's shape must be x's last dimensions (the normalized ones), got x of "
      "shape (2, 2) and gamma of shape (3,)"));
}
