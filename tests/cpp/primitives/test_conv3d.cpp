// 3-d convolution and pooling (conv3d, max_pool3d, avg_pool3d and their
// backward primitives): forward against a direct-loop reference written here,
// backward against central differences (float64), float32 through oneDNN
// agreeing with the float64 loops, and the errors that name the 3-d shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <vector>

#include "grad_check.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/conv.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

using Triple = std::array<int64_t, 3>;

Array c3_random_array(Shape shape, uint64_t seed, DType dt = DType::float64) {
  Array a(DType::float64, shape);
  uint64_t s = seed * 2654435761ULL + 12345;
  for (int64_t i = 0; i < a.size(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    a.data<double>()[i] = static_cast<double>(s >> 11) / static_cast<double>(1ULL << 52) - 1.0;
  }
  return a.astype(dt);
}

Array c3_arr(const Value& v) { return v.as_array(); }

Value triple(const Triple& t) { return Value(List{Value(t[0]), Value(t[1]), Value(t[2])}); }

Value c3_shape_of(const Array& a) { return call("shape", {a}); }

// Output length and left padding of one dimension, as Keras defines them.
void c3_keras_dim(const std::string& padding, int64_t n, int64_t k_eff, int64_t stride,
               int64_t& out, int64_t& lo) {
  if (padding == "valid") {
    out = (n - k_eff) / stride + 1;
    lo = 0;
  } else {
    out = (n + stride - 1) / stride;
    lo = std::max<int64_t>((out - 1) * stride + k_eff - n, 0) / 2;
  }
}

// Reference grouped 3-d convolution in float64 of x (N, D, H, W, C) with w
// (KD, KH, KW, C / groups, F).
Array ref_conv3d(const Array& x, const Array& w, Triple stride, Triple dil,
                 const std::string& padding, int64_t groups) {
  const int64_t n = x.dim(0), c = x.dim(4), cg = w.dim(3), f = w.dim(4), fg = f / groups;
  Triple in{x.dim(1), x.dim(2), x.dim(3)}, k{w.dim(0), w.dim(1), w.dim(2)}, out{}, lo{};
  for (int d = 0; d < 3; ++d) {
    c3_keras_dim(padding, in[d], dil[d] * (k[d] - 1) + 1, stride[d], out[d], lo[d]);
  }
  Array y = Array::zeros(DType::float64, {n, out[0], out[1], out[2], f});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < out[0]; ++i)
      for (int64_t j = 0; j < out[1]; ++j)
        for (int64_t l = 0; l < out[2]; ++l)
          for (int64_t o = 0; o < f; ++o) {
            double s = 0;
            for (int64_t a = 0; a < k[0]; ++a)
              for (int64_t e = 0; e < k[1]; ++e)
                for (int64_t m = 0; m < k[2]; ++m) {
                  const int64_t p = i * stride[0] - lo[0] + a * dil[0],
                                q = j * stride[1] - lo[1] + e * dil[1],
                                r = l * stride[2] - lo[2] + m * dil[2];
                  if (p < 0 || p >= in[0] || q < 0 || q >= in[1] || r < 0 || r >= in[2]) continue;
                  for (int64_t ci = 0; ci < cg; ++ci) {
                    const int64_t xc = (o / fg) * cg + ci;
                    s += x.get_double((((b * in[0] + p) * in[1] + q) * in[2] + r) * c + xc) *
                         w.get_double((((a * k[1] + e) * k[2] + m) * cg + ci) * f + o);
                  }
                }
            y.data<double>()[(((b * out[0] + i) * out[1] + j) * out[2] + l) * f + o] = s;
          }
  return y;
}

// Reference 3-d pooling: max or mean of the window's elements inside the input.
Array ref_pool3d(const Array& x, bool max, Triple pool, Triple stride, const std::string& padding) {
  const int64_t n = x.dim(0), c = x.dim(4);
  Triple in{x.dim(1), x.dim(2), x.dim(3)}, out{}, lo{};
  for (int d = 0; d < 3; ++d) c3_keras_dim(padding, in[d], pool[d], stride[d], out[d], lo[d]);
  Array y(DType::float64, {n, out[0], out[1], out[2], c});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < out[0]; ++i)
      for (int64_t j = 0; j < out[1]; ++j)
        for (int64_t l = 0; l < out[2]; ++l)
          for (int64_t ci = 0; ci < c; ++ci) {
            double best = -std::numeric_limits<double>::infinity(), sum = 0;
            int count = 0;
            for (int64_t a = 0; a < pool[0]; ++a)
              for (int64_t e = 0; e < pool[1]; ++e)
                for (int64_t m = 0; m < pool[2]; ++m) {
                  const int64_t p = i * stride[0] - lo[0] + a, q = j * stride[1] - lo[1] + e,
                                r = l * stride[2] - lo[2] + m;
                  if (p < 0 || p >= in[0] || q < 0 || q >= in[1] || r < 0 || r >= in[2]) continue;
                  const double v =
                      x.get_double((((b * in[0] + p) * in[1] + q) * in[2] + r) * c + ci);
                  best = std::max(best, v);
                  sum += v;
                  ++count;
                }
            y.data<double>()[(((b * out[0] + i) * out[1] + j) * out[2] + l) * c + ci] =
                max ? best : sum / count;
          }
  return y;
}

struct Conv3dCase {
  Triple stride, dil;
  std::string padding;
  int64_t groups;
};

std::vector<Conv3dCase> conv3d_cases() {
  return {{{1, 1, 1}, {1, 1, 1}, "valid", 1},
          {{2, 1, 2}, {1, 1, 1}, "same", 1},
          {{1, 2, 1}, {2, 1, 1}, "same", 2},
          {{1, 1, 1}, {1, 2, 2}, "valid", 4}};
}

Array f32_of(const Array& a) { return a.astype(DType::float32); }

}  // namespace

TEST(Conv3d, ForwardMatchesReferenceAndOneDNNAgrees) {
  for (const Conv3dCase& c : conv3d_cases()) {
    SCOPED_TRACE(c.padding + " groups " + std::to_string(c.groups));
    Array x = c3_random_array({2, 5, 6, 7, 4}, 1), w = c3_random_array({3, 2, 3, 4 / c.groups, 8}, 2);
    const std::vector<Value> set{triple(c.stride), Value(c.padding), triple(c.dil),
                                 Value(c.groups)};
    std::vector<Value> args{x, w};
    args.insert(args.end(), set.begin(), set.end());
    Array y = c3_arr(call("conv3d", args));
    EXPECT_TRUE(grads_close(y, ref_conv3d(x, w, c.stride, c.dil, c.padding, c.groups), 1e-12,
                            1e-12));
    args[0] = f32_of(x);
    args[1] = f32_of(w);
    const uint64_t before = kernels::onednn_calls();
    Array y32 = c3_arr(call("conv3d", args));
    EXPECT_EQ(kernels::onednn_calls() - before, 1u);  // one chunk, through oneDNN
    EXPECT_EQ(y32.dtype(), DType::float32);
    EXPECT_TRUE(grads_close(y32, y, 1e-5, 1e-5));
  }
}

TEST(Conv3d, GradientsMatchFiniteDifferences) {
  for (const Conv3dCase& c : conv3d_cases()) {
    SCOPED_TRACE(c.padding + " groups " + std::to_string(c.groups));
    Array x = c3_random_array({2, 4, 5, 5, 4}, 3), w = c3_random_array({2, 3, 2, 4 / c.groups, 4}, 4);
    auto with = [&](std::vector<Value> head) {
      for (const Value& v : {triple(c.stride), Value(c.padding), triple(c.dil), Value(c.groups)})
        head.push_back(v);
      return head;
    };
    Array y = c3_arr(call("conv3d", with({x, w})));
    Array g = c3_random_array(y.shape(), 5);
    Array dx = c3_arr(call("conv3d_grad_input", with({g, w, c3_shape_of(x)})));
    Array dw = c3_arr(call("conv3d_grad_weight", with({g, x, c3_shape_of(w)})));
    EXPECT_TRUE(grads_close(
        dx, numeric_vjp([&](const Array& v) { return c3_arr(call("conv3d", with({v, w}))); }, x, g)));
    EXPECT_TRUE(grads_close(
        dw, numeric_vjp([&](const Array& v) { return c3_arr(call("conv3d", with({x, v}))); }, w, g)));
    // Both at once, and float32 through oneDNN, agree.
    List both = call("conv3d_grads", with({g, x, w})).as_list();
    EXPECT_TRUE(grads_close(c3_arr(both[0]), dx, 1e-12, 1e-12));
    EXPECT_TRUE(grads_close(c3_arr(both[1]), dw, 1e-12, 1e-12));
    const uint64_t before = kernels::onednn_calls();
    Array dx32 = c3_arr(call("conv3d_grad_input", with({f32_of(g), f32_of(w), c3_shape_of(x)})));
    Array dw32 = c3_arr(call("conv3d_grad_weight", with({f32_of(g), f32_of(x), c3_shape_of(w)})));
    EXPECT_GE(kernels::onednn_calls() - before, 2u);
    EXPECT_TRUE(grads_close(dx32, dx, 1e-5, 1e-5));
    EXPECT_TRUE(grads_close(dw32, dw, 1e-5, 1e-5));
  }
}

TEST(Conv3d, BiasAndReluFused) {
  Array x = c3_random_array({2, 4, 4, 4, 3}, 6), w = c3_random_array({2, 2, 2, 3, 5}, 7);
  Array b = c3_random_array({5}, 8);
  Array plain = c3_arr(call("conv3d", {x, w, 1, "same"}));
  Array biased = c3_arr(call("conv3d_bias", {x, w, b, 1, "same"}));
  Array relu = c3_arr(call("conv3d_bias_relu", {x, w, b, 1, "same"}));
  for (int64_t i = 0; i < plain.size(); ++i) {
    const double want = plain.get_double(i) + b.get_double(i % 5);
    EXPECT_NEAR(biased.get_double(i), want, 1e-12);
    EXPECT_NEAR(relu.get_double(i), std::max(want, 0.0), 1e-12);
  }
}

TEST(Pool3d, ForwardAndGradientsMatchReferences) {
  Array x = c3_random_array({2, 5, 6, 4, 3}, 9);
  for (bool max : {true, false})
    for (std::string padding : {"valid", "same"})
      for (auto [pool, stride] : {std::pair<Triple, Triple>{{2, 2, 2}, {2, 2, 2}},
                                  {{3, 2, 2}, {1, 2, 1}}}) {
        const std::string fwd = std::string(max ? "max" : "avg") + "_pool3d";
        SCOPED_TRACE(fwd + " " + padding);
        const std::vector<Value> set{triple(pool), triple(stride), Value(padding)};
        auto with = [&](std::vector<Value> head) {
          head.insert(head.end(), set.begin(), set.end());
          return head;
        };
        Array y = c3_arr(call(fwd.c_str(), with({x})));
        EXPECT_TRUE(grads_close(y, ref_pool3d(x, max, pool, stride, padding), 1e-12, 1e-12));
        const uint64_t before = kernels::onednn_calls();
        EXPECT_TRUE(grads_close(c3_arr(call(fwd.c_str(), with({f32_of(x)}))), y, 1e-6, 1e-6));
        EXPECT_EQ(kernels::onednn_calls() - before, 1u);
        Array g = c3_random_array(y.shape(), 10);
        Array dx = c3_arr(call((fwd + "_grad").c_str(), with({g, x})));
        EXPECT_TRUE(grads_close(
            dx, numeric_vjp([&](const Array& v) { return c3_arr(call(fwd.c_str(), with({v}))); }, x,
                            g)));
        EXPECT_TRUE(
            grads_close(c3_arr(call((fwd + "_grad").c_str(), with({f32_of(g), f32_of(x)}))), dx,
                        1e-5, 1e-6));
      }
  // The default strides are pool_size.
  EXPECT_EQ(c3_arr(call("max_pool3d", {x, 2})).shape(), (Shape{2, 2, 3, 2, 3}));
}

TEST(Conv3d, Errors) {
  Array x = c3_random_array({1, 4, 4, 4, 2}, 11), w = c3_random_array({2, 2, 2, 2, 3}, 12);
  using IA = std::invalid_argument;
  EXPECT_TRUE(throws_with<IA>([&] { call("conv3d", {c3_random_array({1, 4, 4, 2}, 1), w}); },
                              "[conv3d] input must be 5-d (batch, depth, height, width, "
                              "channels), got shape (1, 4, 4, 2)"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv3d", {x, c3_random_array({2, 2, 2, 3}, 1)}); },
                              "[conv3d] kernel must be 5-d (kernel_depth, kernel_height, "
                              "kernel_width, in_channels, filters), got shape (2, 2, 2, 3)"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv3d", {x, c3_random_array({5, 2, 2, 2, 3}, 1)}); },
                              "larger than the input (4 planes) with padding 'valid'"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv3d", {x, w, Value(List{Value(1), Value(2)})}); },
                              "must be an integer or a list of 3 integers"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv3d", {x, w, 1, "causal"}); },
                              "padding must be 'valid' or 'same', got 'causal'"));
  EXPECT_TRUE(throws_with<IA>([&] { call("max_pool3d", {x, 5}); },
                              "[max_pool3d] pool_size (5, 5, 5) is larger than the input (4, 4, "
                              "4) with padding 'valid'"));
}
