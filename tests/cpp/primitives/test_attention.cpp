// The fused attention primitive without Python: values against a direct
// evaluation of softmax(scale * q k^T) v (causal too), the backward against
// central differences, bits that do not depend on the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

// q (tq, d), k (tk, d), v (tk, dv), one block, row-major.
std::vector<double> direct_attention(const std::vector<double>& q, const std::vector<double>& k,
                                     const std::vector<double>& v, int64_t tq, int64_t tk,
                                     int64_t d, int64_t dv, double scale, bool causal) {
  std::vector<double> out(static_cast<size_t>(tq * dv), 0.0);
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t n = causal ? std::min(tk, i + 1) : tk;
    std::vector<double> s(static_cast<size_t>(n));
    double m = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0.0;
      for (int64_t c = 0; c < d; ++c) dot += q[i * d + c] * k[j * d + c];
      s[j] = scale * dot;
      m = std::max(m, s[j]);
    }
    for (int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - m));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t c = 0; c < dv; ++c) out[i * dv + c] += s[j] / sum * v[j * dv + c];
    }
  }
  return out;
}

std::vector<double> ramp(size_t n, double a, double b) {
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(a * static_cast<double>(i) + b);
  return x;
}

}  // namespace

TEST(Attention, MatchesADirectEvaluation) {
  const int64_t tq = 6, tk = 5, d = 3, dv = 2;
  const auto q = ramp(tq * d, 0.7, 0.1), k = ramp(tk * d, 1.3, 0.4), v = ramp(tk * dv, 0.9, 1.0);
  for (bool causal : {false, true}) {
    Value got = named("attention", {{"", f64(q, {1, tq, d})},
                                    {"", f64(k, {1, tk, d})},
                                    {"", f64(v, {1, tk, dv})},
                                    {"scale", Value(0.6)},
                                    {"causal", Value(causal)}});
    EXPECT_TRUE(array_eq(got, DType::float64, {1, tq, dv},
                         direct_attention(q, k, v, tq, tk, d, dv, 0.6, causal), 1e-12, 1e-14));
  }
}

TEST(Attention, GradientMatchesCentralDifferences) {
  const int64_t tq = 4, tk = 5, d = 3, dv = 2;
  const auto q = ramp(tq * d, 0.7, 0.1), k = ramp(tk * d, 1.3, 0.4), v = ramp(tk * dv, 0.9, 1.0);
  const auto g = ramp(tq * dv, 0.5, 0.3);
  Value grads = named("attention_grad", {{"", f64(g, {tq, dv})},
                                         {"", f64(q, {tq, d})},
                                         {"", f64(k, {tk, d})},
                                         {"", f64(v, {tk, dv})},
                                         {"scale", Value(0.8)},
                                         {"causal", Value(true)}});
  const List& l = grads.as_list();
  ASSERT_EQ(l.size(), 3u);
  const std::vector<double>* args[] = {&q, &k, &v};
  const double eps = 1e-6;
  for (int a = 0; a < 3; ++a) {
    for (size_t i = 0; i < args[a]->size(); ++i) {
      std::vector<double> up[3] = {q, k, v}, down[3] = {q, k, v};
      up[a][i] += eps;
      down[a][i] -= eps;
      auto loss = [&](std::vector<double>* x) {
        const auto o = direct_attention(x[0], x[1], x[2], tq, tk, d, dv, 0.8, true);
        double s = 0.0;
        for (size_t j = 0; j < o.size(); ++j) s += o[j] * g[j];
        return s;
      };
      const double numeric = (loss(up) - loss(down)) / (2 * eps);
      EXPECT_NEAR(l[a].as_array().get_double(static_cast<int64_t>(i)), numeric, 1e-7)
          << "argument " << a << " element " << i;
    }
  }
}

TEST(Attention, BitsDoNotDependOnTheThreadCount) {
  const int64_t b = 12, t = 70, d = 8;
  std::vector<float> q(b * t * d), k(q.size()), v(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<float>(std::sin(0.37 * i));
    k[i] = static_cast<float>(std::cos(0.11 * i));
    v[i] = static_cast<float>(std::sin(0.05 * i + 1.0));
  }
  const int saved = num_threads();
  std::vector<Array> first;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    Value out = call("attention", {f32(q, {b, t, d}), f32(k, {b, t, d}), f32(v, {b, t, d})});
    Value grads = call("attention_grad", {out, f32(q, {b, t, d}), f32(k, {b, t, d}),
                                          f32(v, {b, t, d})});
    std::vector<Array> now = {out.as_array()};
    for (const Value& x : grads.as_list()) now.push_back(x.as_array());
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

TEST(Attention, ErrorsNameTheOperation) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { call("attention", {f64({1, 2, 3, 4}, {2, 2}), f64({1, 2}, {1, 2}),
                              f64({1, 2}, {2, 1})}); },
      "[attention] k and v must have as many tokens (axis -2), got shapes (1, 2) and (2, 1)"));
}
