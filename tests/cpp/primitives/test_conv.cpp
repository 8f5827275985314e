// Convolution and pooling: forward against direct-loop references written
// here, backward against central differences (float64) and against float64
// (float32), identical results for 1 and 2 threads, and every error.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "grad_check.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/conv.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

// Deterministic values in [-1, 1) (distinct enough that max pooling has no ties).
Array random_array(Shape shape, uint64_t seed, DType dt = DType::float64) {
  Array a(DType::float64, shape);
  uint64_t s = seed * 2654435761ULL + 12345;
  for (int64_t i = 0; i < a.size(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    a.data<double>()[i] = static_cast<double>(s >> 11) / static_cast<double>(1ULL << 52) - 1.0;
  }
  return a.astype(dt);
}

std::vector<double> values(const Array& a) {
  std::vector<double> v(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) v[i] = a.get_double(i);
  return v;
}

// Output length and left padding of one dimension, as Keras defines them.
void keras_dim(const std::string& padding, int64_t n, int64_t k_eff, int64_t stride,
               int64_t& out, int64_t& lo) {
  if (padding == "valid") {
    out = (n - k_eff) / stride + 1;
    lo = 0;
  } else if (padding == "same") {
    out = (n + stride - 1) / stride;
    lo = std::max<int64_t>((out - 1) * stride + k_eff - n, 0) / 2;
  } else {  // causal
    out = (n - 1) / stride + 1;
    lo = k_eff - 1;
  }
}

// Reference 2-d convolution in float64 of x (N, H, W, C) with w (KH, KW, C, F);
// a 1-d convolution is the 2-d one with H = KH = 1.
Array ref_conv(const Array& x, const Array& w, std::array<int64_t, 2> stride,
               std::array<int64_t, 2> dil, const std::string& padding) {
  const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), c = x.dim(3);
  const int64_t kh = w.dim(0), kw = w.dim(1), f = w.dim(3);
  int64_t oh, ow, ph, pw;
  keras_dim(h == 1 && kh == 1 ? "valid" : padding, h, dil[0] * (kh - 1) + 1, stride[0], oh, ph);
  keras_dim(padding, wd, dil[1] * (kw - 1) + 1, stride[1], ow, pw);
  Array y = Array::zeros(DType::float64, {n, oh, ow, f});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < f; ++o) {
          double s = 0;
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t e = 0; e < kw; ++e)
              for (int64_t ci = 0; ci < c; ++ci) {
                int64_t r = i * stride[0] - ph + a * dil[0], q = j * stride[1] - pw + e * dil[1];
                if (r < 0 || r >= h || q < 0 || q >= wd) continue;
                s += x.get_double(((b * h + r) * wd + q) * c + ci) *
                     w.get_double(((a * kw + e) * c + ci) * f + o);
              }
          y.data<double>()[((b * oh + i) * ow + j) * f + o] = s;
        }
  return y;
}

Array ref_conv1d(const Array& x, const Array& w, int64_t stride, int64_t dil,
                 const std::string& padding) {
  Array y = ref_conv(x.reshaped({x.dim(0), 1, x.dim(1), x.dim(2)}),
                     w.reshaped({1, w.dim(0), w.dim(1), w.dim(2)}), {1, stride}, {1, dil},
                     padding);
  return y.reshaped({y.dim(0), y.dim(2), y.dim(3)});
}

// Reference pooling of x (N, H, W, C): max or mean of the window's elements
// inside the input.
Array ref_pool(const Array& x, bool max, std::array<int64_t, 2> pool,
               std::array<int64_t, 2> stride, const std::string& padding) {
  const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), c = x.dim(3);
  int64_t oh, ow, ph, pw;
  keras_dim(padding, h, pool[0], stride[0], oh, ph);
  keras_dim(padding, wd, pool[1], stride[1], ow, pw);
  Array y(DType::float64, {n, oh, ow, c});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t ci = 0; ci < c; ++ci) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (int64_t a = 0; a < pool[0]; ++a)
            for (int64_t e = 0; e < pool[1]; ++e) {
              int64_t r = i * stride[0] - ph + a, q = j * stride[1] - pw + e;
              if (r < 0 || r >= h || q < 0 || q >= wd) continue;
              double v = x.get_double(((b * h + r) * wd + q) * c + ci);
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          y.data<double>()[((b * oh + i) * ow + j) * c + ci] = max ? best : sum / count;
        }
  return y;
}

Array arr(const Value& v) { return v.as_array(); }

Value pair(int64_t a, int64_t b) { return Value(List{Value(a), Value(b)}); }

Value shape_of(const Array& a) { return call("shape", {a}); }

bool bitwise_equal(const Array& a, const Array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

TEST(Conv, Conv1dHandComputed) {
  Array x = f64({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {1, 4, 3});
  Array w = Array::full(DType::float64, {2, 3, 2}, 1.0);
  // 'same' with kernel 2: no left padding, one on the right.
  EXPECT_TRUE(array_eq(call("conv1d", {x, w, 1, "same", 1}), DType::float64, {1, 4, 2},
                       {15, 15, 33, 33, 51, 51, 30, 30}));
  // 'causal': one on the left.
  EXPECT_TRUE(array_eq(call("conv1d", {x, w, 1, "causal", 1}), DType::float64, {1, 4, 2},
                       {3, 3, 15, 15, 33, 33, 51, 51}));
  EXPECT_TRUE(array_eq(call("conv1d", {x, w, 2, "valid", 1}), DType::float64, {1, 2, 2},
                       {15, 15, 51, 51}));
  EXPECT_TRUE(array_eq(call("conv1d", {x, w, 1, "valid", 3}), DType::float64, {1, 1, 2},
                       {33, 33}));
}

TEST(Conv, Conv1dForwardMatchesReference) {
  for (std::string padding : {"valid", "same", "causal"})
    for (int64_t stride : {1, 2})
      for (int64_t dil : {1, 2})
        for (int64_t k : {2, 3})
          for (auto [ci, co] : {std::pair<int64_t, int64_t>{1, 1}, {3, 4}})
            for (DType dt : {DType::float64, DType::float32}) {
              SCOPED_TRACE(padding + " stride " + std::to_string(stride) + " dilation " +
                           std::to_string(dil) + " kernel " + std::to_string(k) + " channels " +
                           std::to_string(ci) + " " + std::string(dtype_name(dt)));
              Array x = random_array({2, 9, ci}, 1, dt), w = random_array({k, ci, co}, 2, dt);
              Array ref = ref_conv1d(x.astype(DType::float64), w.astype(DType::float64), stride,
                                     dil, padding);
              Value y = call("conv1d", {x, w, stride, Value(padding), dil});
              EXPECT_TRUE(array_eq(y, dt, ref.shape(), values(ref), 1e-5, 1e-5));
            }
}

TEST(Conv, Conv2dForwardMatchesReference) {
  for (std::string padding : {"valid", "same"})
    for (auto [sh, sw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 2}, {2, 1}})
      for (int64_t dil : {1, 2})
        for (auto [ci, co] : {std::pair<int64_t, int64_t>{1, 1}, {3, 4}})
          for (DType dt : {DType::float64, DType::float32}) {
            SCOPED_TRACE(padding + " strides " + std::to_string(sh) + "," + std::to_string(sw) +
                         " dilation " + std::to_string(dil) + " channels " + std::to_string(ci) +
                         " " + std::string(dtype_name(dt)));
            Array x = random_array({2, 7, 6, ci}, 3, dt), w = random_array({3, 2, ci, co}, 4, dt);
            Array ref = ref_conv(x.astype(DType::float64), w.astype(DType::float64), {sh, sw},
                                 {dil, dil}, padding);
            Value y = call("conv2d", {x, w, pair(sh, sw), Value(padding), dil});
            EXPECT_TRUE(array_eq(y, dt, ref.shape(), values(ref), 1e-5, 1e-5));
          }
  // A dilation per dimension.
  Array x = random_array({1, 8, 8, 2}, 5), w = random_array({2, 2, 2, 3}, 6);
  Array ref = ref_conv(x, w, {1, 1}, {3, 1}, "valid");
  EXPECT_TRUE(array_eq(call("conv2d", {x, w, 1, "valid", pair(3, 1)}), DType::float64,
                       ref.shape(), values(ref), 1e-9, 1e-12));
}

TEST(Conv, DtypeRules) {
  Array x32 = random_array({1, 5, 2}, 7, DType::float32);
  Array w32 = random_array({2, 2, 3}, 8, DType::float32);
  EXPECT_EQ(arr(call("conv1d", {x32, w32})).dtype(), DType::float32);
  EXPECT_EQ(arr(call("conv1d", {x32, w32.astype(DType::float64)})).dtype(), DType::float64);
  Array xi = i64({1, 2, 3, 4}, {1, 4, 1});
  Array wi = i64({1, 1}, {2, 1, 1});
  EXPECT_TRUE(array_eq(call("conv1d", {xi, wi}), DType::float64, {1, 3, 1}, {3, 5, 7}));
  EXPECT_TRUE(array_eq(call("max_pool1d", {xi}), DType::float64, {1, 2, 1}, {2, 4}));
  EXPECT_EQ(arr(call("avg_pool2d", {random_array({1, 4, 4, 1}, 9, DType::float32)})).dtype(),
            DType::float32);
}

TEST(Conv, Conv1dGradientsMatchFiniteDifferences) {
  for (std::string padding : {"valid", "same", "causal"})
    for (int64_t stride : {1, 2})
      for (int64_t dil : {1, 2}) {
        SCOPED_TRACE(padding + " stride " + std::to_string(stride) + " dilation " +
                     std::to_string(dil));
        Array x = random_array({2, 8, 3}, 10), w = random_array({3, 3, 2}, 11);
        Value pad(padding);
        Array y = arr(call("conv1d", {x, w, stride, pad, dil}));
        Array g = random_array(y.shape(), 12);
        Array dx = arr(call("conv1d_grad_input", {g, w, shape_of(x), stride, pad, dil}));
        Array dw = arr(call("conv1d_grad_weight", {g, x, shape_of(w), stride, pad, dil}));
        Array nx = numeric_vjp(
            [&](const Array& v) { return arr(call("conv1d", {v, w, stride, pad, dil})); }, x, g);
        Array nw = numeric_vjp(
            [&](const Array& v) { return arr(call("conv1d", {x, v, stride, pad, dil})); }, w, g);
        EXPECT_TRUE(grads_close(dx, nx));
        EXPECT_TRUE(grads_close(dw, nw));
        // float32 (oneDNN) against the float64 result.
        auto f32_of = [](const Array& a) { return a.astype(DType::float32); };
        Array dx32 = arr(call("conv1d_grad_input",
                              {f32_of(g), f32_of(w), shape_of(x), stride, pad, dil}));
        Array dw32 = arr(call("conv1d_grad_weight",
                              {f32_of(g), f32_of(x), shape_of(w), stride, pad, dil}));
        EXPECT_EQ(dx32.dtype(), DType::float32);
        EXPECT_TRUE(grads_close(dx32, dx, 1e-4, 1e-4));
        EXPECT_TRUE(grads_close(dw32, dw, 1e-4, 1e-4));
      }
}

TEST(Conv, Conv2dGradientsMatchFiniteDifferences) {
  for (std::string padding : {"valid", "same"})
    for (auto [sh, sw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}})
      for (int64_t dil : {1, 2}) {
        SCOPED_TRACE(padding + " strides " + std::to_string(sh) + "," + std::to_string(sw) +
                     " dilation " + std::to_string(dil));
        Array x = random_array({2, 6, 5, 2}, 13), w = random_array({2, 3, 2, 3}, 14);
        Value pad(padding), st = pair(sh, sw);
        Array y = arr(call("conv2d", {x, w, st, pad, dil}));
        Array g = random_array(y.shape(), 15);
        Array dx = arr(call("conv2d_grad_input", {g, w, shape_of(x), st, pad, dil}));
        Array dw = arr(call("conv2d_grad_weight", {g, x, shape_of(w), st, pad, dil}));
        Array nx = numeric_vjp(
            [&](const Array& v) { return arr(call("conv2d", {v, w, st, pad, dil})); }, x, g);
        Array nw = numeric_vjp(
            [&](const Array& v) { return arr(call("conv2d", {x, v, st, pad, dil})); }, w, g);
        EXPECT_TRUE(grads_close(dx, nx));
        EXPECT_TRUE(grads_close(dw, nw));
        auto f32_of = [](const Array& a) { return a.astype(DType::float32); };
        Array dx32 =
            arr(call("conv2d_grad_input", {f32_of(g), f32_of(w), shape_of(x), st, pad, dil}));
        Array dw32 =
            arr(call("conv2d_grad_weight", {f32_of(g), f32_of(x), shape_of(w), st, pad, dil}));
        EXPECT_TRUE(grads_close(dx32, dx, 1e-4, 1e-4));
        EXPECT_TRUE(grads_close(dw32, dw, 1e-4, 1e-4));
      }
}

// A convolution of the gradient tests: 1 or 2 spatial axes, shapes, groups,
// padding and stride.
struct GradCase {
  int spatial;
  Shape x, w;
  int64_t groups;
  std::string padding;
  int64_t stride;
};

// Winograd's shape in float32 (`batch` samples), a strided (direct) one,
// groups, 1-d causal, and an empty batch.
std::vector<GradCase> grad_cases(int64_t batch) {
  return {
      {2, {batch, 9, 9, 32}, {3, 3, 32, 32}, 1, "same", 1},
      {2, {7, 10, 9, 8}, {3, 3, 8, 16}, 1, "same", 2},
      {2, {3, 6, 6, 6}, {2, 2, 2, 9}, 3, "valid", 1},
      {1, {6, 11, 4}, {3, 4, 5}, 1, "causal", 1},
      {2, {0, 4, 4, 3}, {3, 3, 3, 2}, 1, "same", 1},
  };
}

// conv*_grads gives both gradients in one pass: equal to conv*_grad_input
// and conv*_grad_weight (bit for bit in float64, whose loops do not depend on
// the chunks; within rounding in float32, oneDNN's implementation may differ
// with the chunk size), with groups, strides and Winograd's shapes.
TEST(Conv, BothGradientsInOnePassEqualTheSeparateOnes) {
  for (const auto& c : grad_cases(5)) {
    const std::string conv = c.spatial == 1 ? "conv1d" : "conv2d";
    SCOPED_TRACE(conv + " x " + shape_str(c.x) + " groups " + std::to_string(c.groups));
    for (DType dt : {DType::float64, DType::float32}) {
      Array x = random_array(c.x, 21, dt), w = random_array(c.w, 22, dt);
      Value pad(c.padding), st(c.stride), dil(int64_t{1}), groups(c.groups);
      Array y = arr(call(conv.c_str(), {x, w, st, pad, dil, groups}));
      Array g = random_array(y.shape(), 23, dt);
      Value both = call((conv + "_grads").c_str(), {g, x, w, st, pad, dil, groups});
      ASSERT_TRUE(both.is_list());
      ASSERT_EQ(both.as_list().size(), 2u);
      Array dx = arr(both.as_list()[0]), dw = arr(both.as_list()[1]);
      Array rx =
          arr(call((conv + "_grad_input").c_str(), {g, w, shape_of(x), st, pad, dil, groups}));
      Array rw =
          arr(call((conv + "_grad_weight").c_str(), {g, x, shape_of(w), st, pad, dil, groups}));
      ASSERT_EQ(dx.dtype(), dt);
      ASSERT_EQ(dx.shape(), x.shape());
      ASSERT_EQ(dw.shape(), w.shape());
      if (dt == DType::float64) {
        EXPECT_EQ(values(dx), values(rx));
        EXPECT_EQ(values(dw), values(rw));
      } else {
        EXPECT_TRUE(grads_close(dx, rx, 1e-5, 1e-5));
        EXPECT_TRUE(grads_close(dw, rw, 1e-5, 1e-5));
      }
    }
  }
  // A g of the wrong shape is named like the separate primitives name it.
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] {
        call("conv1d_grads", {random_array({2, 5, 4}, 1), random_array({2, 6, 3}, 1),
                              random_array({3, 3, 4}, 1)});
      },
      "[conv1d_grads] dy has shape (2, 5, 4) but the forward result has shape (2, 4, 4)"));
}

// conv*_grads_bn (autodiff's backward of a convolution read by a batch norm)
// gives exactly what batch_norm_grad followed by conv*_grads gives: the same
// per-element arithmetic, a chunk at a time.
TEST(Conv, GradsOfABatchNormAfterTheConvolutionEqualTheUnfused) {
  for (const auto& c : grad_cases(37)) {  // 37 samples: 4 or more chunks of Winograd
    const std::string conv = c.spatial == 1 ? "conv1d" : "conv2d";
    for (DType dt : {DType::float64, DType::float32}) {
      Array x = random_array(c.x, 31, dt), w = random_array(c.w, 32, dt);
      Value pad(c.padding), st(c.stride), dil(int64_t{1}), groups(c.groups);
      Array y = arr(call(conv.c_str(), {x, w, st, pad, dil, groups}));
      const int64_t f = y.shape().back();
      Array gamma = random_array({f}, 33, dt), beta = random_array({f}, 34, dt);
      Array mm = random_array({f}, 35, dt), mv = arr(call("add", {random_array({f}, 36), 1.5}));
      Array g = random_array(y.shape(), 37, dt);
      for (bool training : {true, false}) {
        if (training && c.x[0] == 0) continue;  // no batch statistics of nothing
        for (bool relu : {false, true}) {
          for (bool given_sums : {false, true}) {
            SCOPED_TRACE(conv + " x " + shape_str(c.x) + " " + std::string(dtype_name(dt)) +
                         (training ? " training" : " inference") + (relu ? " relu" : "") +
                         (given_sums ? " sums" : ""));
            Value stats = training ? call("batch_norm_stats", {y}) : Value();
            Value out = relu ? call("batch_norm_relu", {y, gamma, beta, mm, mv, 1e-3, training,
                                                        stats})
                             : Value();
            Value sums = given_sums ? call("batch_norm_grad_sums",
                                           {g, y, mm, mv, 1e-3, training, stats, out})
                                    : Value();
            List bn{g, y, gamma, mm, mv, 1e-3, training, stats, sums, out};
            Value fused = call((conv + "_grads_bn").c_str(), {Value(bn), x, w, st, pad, dil, groups});
            Value dy = call("batch_norm_grad", std::vector<Value>(bn.begin(), bn.end()));
            Value unfused = call((conv + "_grads").c_str(), {dy, x, w, st, pad, dil, groups});
            ASSERT_TRUE(fused.is_list());
            ASSERT_EQ(fused.as_list().size(), 2u);
            for (size_t k = 0; k < 2; ++k) {
              Array a = arr(fused.as_list()[k]), b = arr(unfused.as_list()[k]);
              ASSERT_EQ(a.dtype(), b.dtype());
              ASSERT_EQ(a.shape(), b.shape());
              EXPECT_EQ(values(a), values(b)) << "result " << k;
            }
          }
        }
      }
    }
  }
  {
    // The batch norm in float32, the kernel in float64: its cotangent made
    // whole, then converted, as conv2d_grads converts dy.
    Array x = random_array({6, 5, 5, 3}, 51, DType::float32), w = random_array({3, 3, 3, 4}, 52);
    Array y = arr(call("conv2d", {x, w.astype(DType::float32), 1, "same"}));
    Array g = random_array(y.shape(), 53, DType::float32);
    List bn{g, y, Value(), Value(), Value(), 1e-3, true, Value(), Value(), Value()};
    Value fused = call("conv2d_grads_bn", {Value(bn), x, w, 1, "same"});
    Value dy = call("batch_norm_grad", std::vector<Value>(bn.begin(), bn.end()));
    Value unfused = call("conv2d_grads", {dy, x, w, 1, "same"});
    for (size_t k = 0; k < 2; ++k) {
      Array a = arr(fused.as_list()[k]), b = arr(unfused.as_list()[k]);
      EXPECT_EQ(a.dtype(), DType::float64);
      EXPECT_EQ(values(a), values(b)) << "result " << k;
    }
  }
  // What it reads is checked and named.
  Array x = random_array({2, 5, 5, 3}, 1), w = random_array({3, 3, 3, 4}, 2);
  Array y = arr(call("conv2d", {x, w, 1, "same"}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv2d_grads_bn", {y, x, w, 1, "same"}); },
      "[conv2d_grads_bn] bn must be the list of batch_norm_grad's 10 arguments"));
  List wrong{random_array({2, 4, 4, 4}, 3), random_array({2, 4, 4, 4}, 4), Value(), Value(),
             Value(), 1e-3, true, Value(), Value(), Value()};
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv2d_grads_bn", {Value(wrong), x, w, 1, "same"}); },
      "[conv2d_grads_bn] the batch norm's input has shape (2, 4, 4, 4) but the convolution's "
      "output has shape (2, 5, 5, 4)"));
  List bad_g{random_array({2, 5, 4, 4}, 3), y, Value(), Value(), Value(), 1e-3, true, Value(),
             Value(), Value()};
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("conv2d_grads_bn", {Value(bad_g), x, w, 1, "same"}); }, "[batch_norm_grad]"));
}

TEST(Conv, Float32RunsThroughOneDNN) {
  Array x = random_array({4, 32, 9}, 16, DType::float32);
  Array w = random_array({3, 9, 16}, 17, DType::float32);
  uint64_t before = kernels::onednn_calls();
  Array y = arr(call("conv1d", {x, w}));
  call("conv1d_grad_input", {y, w, shape_of(x)});
  call("conv1d_grad_weight", {y, x, shape_of(w)});
  call("max_pool1d", {x});
  call("max_pool1d_grad", {random_array({4, 16, 9}, 18, DType::float32), x});
  EXPECT_GE(kernels::onednn_calls() - before, 5u);
  // float64 never reaches oneDNN.
  before = kernels::onednn_calls();
  call("conv1d", {x.astype(DType::float64), w});
  EXPECT_EQ(kernels::onednn_calls(), before);
}

// Grouped convolution (values against NumPy in tests/python/test_conv_groups.py):
// float32 takes oneDNN's grouped path, and agrees with the float64 loops.
TEST(Conv, GroupsRunThroughOneDNN) {
  Array x = random_array({2, 7, 6, 6}, 19), w = random_array({3, 2, 2, 9}, 20);
  Value st = pair(2, 1);
  Array y = arr(call("conv2d", {x, w, st, "same", 1, 3}));
  Array g = random_array(y.shape(), 21);
  Array dx = arr(call("conv2d_grad_input", {g, w, shape_of(x), st, "same", 1, 3}));
  Array dw = arr(call("conv2d_grad_weight", {g, x, shape_of(w), st, "same", 1, 3}));
  auto f32_of = [](const Array& a) { return a.astype(DType::float32); };
  uint64_t before = kernels::onednn_calls();
  Array y32 = arr(call("conv2d", {f32_of(x), f32_of(w), st, "same", 1, 3}));
  Array dx32 =
      arr(call("conv2d_grad_input", {f32_of(g), f32_of(w), shape_of(x), st, "same", 1, 3}));
  Array dw32 =
      arr(call("conv2d_grad_weight", {f32_of(g), f32_of(x), shape_of(w), st, "same", 1, 3}));
  EXPECT_EQ(kernels::onednn_calls() - before, 3u);
  EXPECT_EQ(y32.dtype(), DType::float32);
  EXPECT_TRUE(grads_close(y32, y, 1e-4, 1e-4));
  EXPECT_TRUE(grads_close(dx32, dx, 1e-4, 1e-4));
  EXPECT_TRUE(grads_close(dw32, dw, 1e-4, 1e-4));
  // Depthwise (groups = channels) and 1-d.
  Array xd = random_array({2, 9, 4}, 22, DType::float32), wd = random_array({3, 1, 8}, 23);
  before = kernels::onednn_calls();
  Array yd = arr(call("conv1d", {xd, wd.astype(DType::float32), 1, "causal", 2, 4}));
  EXPECT_EQ(kernels::onednn_calls() - before, 1u);
  EXPECT_TRUE(grads_close(
      yd, arr(call("conv1d", {xd.astype(DType::float64), wd, 1, "causal", 2, 4})), 1e-4, 1e-4));
}

TEST(Conv, GroupsErrors) {
  using IA = std::invalid_argument;
  Array x2 = random_array({1, 5, 5, 6}, 44);
  EXPECT_TRUE(throws_with<IA>(
      [&] { call("conv2d", {x2, random_array({2, 2, 2, 9}, 1), 1, "valid", 1, 4}); },
      "[conv2d] input channels (6) must be divisible by groups (4); input "
      "shape (1, 5, 5, 6)"));
  EXPECT_TRUE(throws_with<IA>(
      [&] { call("conv2d", {x2, random_array({2, 2, 2, 8}, 1), 1, "valid", 1, 3}); },
      "[conv2d] filters (8, the kernel's last dimension) must be divisible "
      "by groups (3); kernel shape (2, 2, 2, 8)"));
  EXPECT_TRUE(throws_with<IA>(
      [&] { call("conv2d", {x2, random_array({2, 2, 3, 9}, 1), 1, "valid", 1, 3}); },
      "[conv2d] input has 6 channels in 3 groups of 2, so the kernel's "
      "in_channels dimension must be 2, got 3"));
  EXPECT_TRUE(throws_with<IA>(
      [&] { call("conv2d", {x2, random_array({2, 2, 6, 6}, 1), 1, "valid", 1, 0}); },
      "[conv2d] argument 'groups' must be a positive integer, got 0"));
  EXPECT_TRUE(throws_with<TypeError>(
      [&] {
        call("conv1d",
             {random_array({1, 5, 2}, 1), random_array({2, 1, 2}, 1), 1, "valid", 1, "two"});
      },
      "[conv1d] argument 'groups'"));
  EXPECT_TRUE(throws_with<IA>(
      [&] {
        call("conv1d_grad_weight", {random_array({1, 4, 4}, 1), random_array({1, 5, 4}, 1),
                                    Value(List{2, 2, 4}), 1, "valid", 1, 3});
      },
      "[conv1d_grad_weight] input channels (4) must be divisible by groups (3)"));
  EXPECT_TRUE(throws_with<IA>(
      [&] {
        call("conv2d_grad_input", {random_array({1, 4, 4, 4}, 1), random_array({2, 2, 1, 4}, 1),
                                   Value(List{1, 5, 5, 3}), 1, "valid", 1, 3});
      },
      "[conv2d_grad_input] filters (4, the kernel's last dimension) must be divisible by groups "
      "(3)"));
}

TEST(Pool, ForwardMatchesReference) {
  for (bool max : {true, false})
    for (std::string padding : {"valid", "same"})
      for (int64_t pool : {2, 3})
        for (Value strides : {Value(), Value(int64_t{1}), Value(int64_t{2})})
          for (DType dt : {DType::float64, DType::float32}) {
            std::string kind = max ? "max" : "avg";
            SCOPED_TRACE(kind + " " + padding + " pool " + std::to_string(pool) + " strides " +
                         strides.str() + " " + std::string(dtype_name(dt)));
            int64_t st = strides.is_nil() ? pool : strides.as_int();
            // 1-d
            Array x1 = random_array({2, 7, 3}, 20, dt);
            Array r1 = ref_pool(x1.astype(DType::float64).reshaped({2, 1, 7, 3}), max, {1, pool},
                                {1, st}, padding);
            Value y1 = call((kind + "_pool1d").c_str(), {x1, pool, strides, Value(padding)});
            EXPECT_TRUE(array_eq(y1, dt, {2, r1.dim(2), 3}, values(r1), 1e-6, 1e-6));
            // 2-d
            Array x2 = random_array({2, 5, 7, 2}, 21, dt);
            Array r2 = ref_pool(x2.astype(DType::float64), max, {pool, pool}, {st, st}, padding);
            Value y2 = call((kind + "_pool2d").c_str(), {x2, pool, strides, Value(padding)});
            EXPECT_TRUE(array_eq(y2, dt, r2.shape(), values(r2), 1e-6, 1e-6));
          }
  // Separate pool sizes and strides per dimension.
  Array x = random_array({1, 6, 7, 2}, 22);
  Array r = ref_pool(x, true, {2, 3}, {1, 2}, "valid");
  EXPECT_TRUE(array_eq(call("max_pool2d", {x, pair(2, 3), pair(1, 2)}), DType::float64, r.shape(),
                       values(r)));
}

TEST(Pool, AverageSameExcludesPadding) {
  Array x = f64({1, 2, 3}, {1, 3, 1});
  EXPECT_TRUE(array_eq(call("avg_pool1d", {x, 2, 1, "same"}), DType::float64, {1, 3, 1},
                       {1.5, 2.5, 3}));
  EXPECT_TRUE(array_eq(call("avg_pool1d", {x.astype(DType::float32), 2, 1, "same"}),
                       DType::float32, {1, 3, 1}, {1.5, 2.5, 3}));
  // Max pooling never takes the padding, even for negative inputs.
  Array neg = f64({-3, -2, -1}, {1, 3, 1});
  EXPECT_TRUE(array_eq(call("max_pool1d", {neg, 2, 1, "same"}), DType::float64, {1, 3, 1},
                       {-2, -1, -1}));
}

TEST(Pool, GradientsMatchFiniteDifferences) {
  for (bool max : {true, false})
    for (std::string padding : {"valid", "same"})
      for (auto [pool, strides] : {std::pair<int64_t, Value>{2, Value()}, {3, Value(int64_t{1})},
                                   {3, Value(int64_t{2})}}) {
        std::string kind = max ? "max" : "avg";
        SCOPED_TRACE(kind + " " + padding + " pool " + std::to_string(pool) + " strides " +
                     strides.str());
        Value pad(padding);
        for (int spatial : {1, 2}) {
          std::string fwd = kind + "_pool" + std::to_string(spatial) + "d";
          Array x = spatial == 1 ? random_array({2, 7, 3}, 23) : random_array({2, 5, 6, 2}, 24);
          Array y = arr(call(fwd.c_str(), {x, pool, strides, pad}));
          Array g = random_array(y.shape(), 25);
          Array dx = arr(call((fwd + "_grad").c_str(), {g, x, pool, strides, pad}));
          Array nx = numeric_vjp(
              [&](const Array& v) { return arr(call(fwd.c_str(), {v, pool, strides, pad})); }, x,
              g);
          EXPECT_TRUE(grads_close(dx, nx)) << fwd;
          auto f32_of = [](const Array& a) { return a.astype(DType::float32); };
          Array dx32 =
              arr(call((fwd + "_grad").c_str(), {f32_of(g), f32_of(x), pool, strides, pad}));
          EXPECT_EQ(dx32.dtype(), DType::float32);
          EXPECT_TRUE(grads_close(dx32, dx, 1e-5, 1e-6)) << fwd;
        }
      }
}

TEST(Pool, MaxGradientGoesToTheFirstMaximum) {
  for (DType dt : {DType::float64, DType::float32}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Array x = Array::full(dt, {1, 4, 1}, 2.0);
    Array g = Array::full(dt, {1, 2, 1}, 1.0);
    EXPECT_TRUE(array_eq(call("max_pool1d_grad", {g, x}), dt, {1, 4, 1}, {1, 0, 1, 0}));
    // Overlapping windows: each window's first maximum gets its g.
    Array x2 = f64({1, 5, 5, 0}, {1, 4, 1}).astype(dt);
    Array g2 = f64({1, 10, 100}, {1, 3, 1}).astype(dt);
    EXPECT_TRUE(array_eq(call("max_pool1d_grad", {g2, x2, 2, 1}), dt, {1, 4, 1}, {0, 11, 100, 0}));
    Array x3 = Array::full(dt, {1, 2, 2, 1}, 1.0);
    Array g3 = Array::full(dt, {1, 1, 1, 1}, 3.0);
    EXPECT_TRUE(array_eq(call("max_pool2d_grad", {g3, x3}), dt, {1, 2, 2, 1}, {3, 0, 0, 0}));
  }
}

TEST(Conv, ResultsIdenticalForOneAndTwoThreads) {
  // Large enough for several chunks (and several weight-gradient partials).
  Array x = random_array({300, 64, 9}, 30, DType::float32);
  Array w = random_array({3, 9, 32}, 31, DType::float32);
  Array x2 = random_array({64, 12, 12, 3}, 32, DType::float32);
  Array w2 = random_array({3, 3, 3, 16}, 33, DType::float32);
  std::vector<Array> results[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto& r = results[threads - 1];
    for (DType dt : {DType::float32, DType::float64}) {
      Array xd = x.astype(dt), wd = w.astype(dt), x2d = x2.astype(dt), w2d = w2.astype(dt);
      Array y = arr(call("conv1d", {xd, wd, 1, "same", 1}));
      r.push_back(y);
      r.push_back(arr(call("conv1d_grad_input", {y, wd, shape_of(xd), 1, "same", 1})));
      r.push_back(arr(call("conv1d_grad_weight", {y, xd, shape_of(wd), 1, "same", 1})));
      Array y2 = arr(call("conv2d", {x2d, w2d, 1, "same"}));
      r.push_back(y2);
      r.push_back(arr(call("conv2d_grad_weight", {y2, x2d, shape_of(w2d), 1, "same"})));
      Array p = arr(call("max_pool1d", {y}));
      r.push_back(p);
      r.push_back(arr(call("max_pool1d_grad", {p, y})));
      r.push_back(arr(call("avg_pool2d_grad", {arr(call("avg_pool2d", {y2, 3, 2, "same"})), y2, 3,
                                               2, "same"})));
    }
  }
  set_num_threads(2);
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_TRUE(bitwise_equal(results[0][i], results[1][i])) << "result " << i;
  }
  // And the tiled float32 result agrees with float64.
  EXPECT_TRUE(grads_close(results[0][2], results[0][10], 1e-4, 1e-3));
}

// The largest difference from `ref`, as a fraction of ref's largest magnitude.
double scaled_error(const Array& a, const Array& ref) {
  double err = 0, scale = 0;
  for (int64_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(a.get_double(i) - ref.get_double(i)));
    scale = std::max(scale, std::fabs(ref.get_double(i)));
  }
  return err / scale;
}

// Winograd (3x3, stride 1, channels multiples of 16) and the direct algorithm
// against the float64 loops. 42 samples of 32 channels at 28x28 are at least
// four chunks (11, 11, 11, 9: at most a quarter of the batch each; more where
// L2 is smaller, preferred_chunk_samples): the weight gradient adds partials,
// and the last chunk has a batch of its own. Stated tolerance: 1e-5 of the largest magnitude
// for Winograd (measured 1.4e-6 here), 5e-6 for direct (measured 0.7e-6 for the output and the
// input gradient, 2.6e-6 for the weight gradient, a float32 sum of 32,928 products per element
// since its product reads the operands in place in BLAS's own blocking; float32's bound for such
// a sum is about sqrt(32,928) x 6e-8 = 1.1e-5).
TEST(Conv, WinogradAndDirectAgreeWithTheLoops) {
  kernels::ConvShape probe;
  probe.spatial = 2;
  probe.batch = 1;
  probe.channels_in = 32;
  probe.channels_out = 16;
  probe.in = probe.out = {28, 28};
  probe.kernel = {3, 3};
  probe.pad_lo = probe.pad_hi = {1, 1};
  const bool was_on = kernels::conv_winograd();
  kernels::set_conv_winograd(true);
  const bool available = kernels::uses_winograd(DType::float32, probe);
  Array x = random_array({42, 28, 28, 32}, 80), w = random_array({3, 3, 32, 16}, 81);
  auto f32_of = [](const Array& a) { return a.astype(DType::float32); };
  for (std::string padding : {"same", "valid"}) {
    Value pad(padding);
    Array y = arr(call("conv2d", {x, w, 1, pad}));
    Array g = random_array(y.shape(), 82);
    Array dx = arr(call("conv2d_grad_input", {g, w, shape_of(x), 1, pad}));
    Array dw = arr(call("conv2d_grad_weight", {g, x, shape_of(w), 1, pad}));
    for (bool winograd : {true, false}) {
      SCOPED_TRACE(padding + (winograd ? " winograd" : " direct"));
      kernels::set_conv_winograd(winograd);
      std::vector<Array> results[2];
      const uint64_t before = kernels::winograd_calls();
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        results[threads - 1] = {
            arr(call("conv2d", {f32_of(x), f32_of(w), 1, pad})),
            arr(call("conv2d_grad_input", {f32_of(g), f32_of(w), shape_of(x), 1, pad})),
            arr(call("conv2d_grad_weight", {f32_of(g), f32_of(x), shape_of(w), 1, pad}))};
      }
      const uint64_t ran = kernels::winograd_calls() - before;
      if (!winograd) {
        EXPECT_EQ(ran, 0u);
      } else if (available && padding == "same") {
        const int64_t per =
            std::min<int64_t>(kernels::preferred_chunk_samples(DType::float32, probe), 11);
        const uint64_t chunks = static_cast<uint64_t>((42 + per - 1) / per);
        EXPECT_GE(chunks, 4u);
        EXPECT_EQ(ran, chunks * 3 * 2);  // chunks x 3 passes x 2 thread counts
      }
      const double tol = winograd ? 1e-5 : 5e-6;
      const Array* ref[3] = {&y, &dx, &dw};
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(results[0][k].dtype(), DType::float32);
        EXPECT_LT(scaled_error(results[0][k], *ref[k]), tol) << "result " << k;
        EXPECT_TRUE(bitwise_equal(results[0][k], results[1][k])) << "result " << k;
      }
    }
  }
  kernels::set_conv_winograd(was_on);
  set_num_threads(2);
}

// The kernel is laid out for oneDNN per evaluation: a kernel changed in place
// (an optimizer's update) is read again.
TEST(Conv, KernelChangedInPlaceIsReadAgain) {
  Array x = random_array({4, 8, 8, 16}, 90, DType::float32);
  Array w = random_array({3, 3, 16, 16}, 91, DType::float32);
  Array g = random_array({4, 8, 8, 16}, 92, DType::float32);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    Array y = arr(call("conv2d", {x, w, 1, "same"}));
    Array dx = arr(call("conv2d_grad_input", {g, w, shape_of(x), 1, "same"}));
    Array ry = ref_conv(x.astype(DType::float64), w.astype(DType::float64), {1, 1}, {1, 1}, "same");
    Array rdx = arr(call("conv2d_grad_input", {g.astype(DType::float64), w.astype(DType::float64),
                                               shape_of(x), 1, "same"}));
    EXPECT_LT(scaled_error(y, ry), 1e-5);
    EXPECT_LT(scaled_error(dx, rdx), 1e-5);
    float* wp = w.data<float>();
    for (int64_t i = 0; i < w.size(); ++i) wp[i] = 0.5f - wp[i];
  }
}

TEST(Conv, GradientRulesNameTheBackwardPrimitives) {
  // Both gradients come from conv1d_grads (the shared expression, when both
  // are wanted), one alone from its own backward primitive.
  const PrimitiveSpec* c1 = find_primitive("conv1d");
  ASSERT_NE(c1, nullptr);
  ASSERT_EQ(c1->grads.size(), 6u);
  EXPECT_EQ(c1->grads[0],
            "if(is_nil(common), conv1d_grad_input(g, w, shape(x), stride, padding, dilation, "
            "groups), common[0])");
  EXPECT_EQ(c1->grads[1],
            "if(is_nil(common), conv1d_grad_weight(g, x, shape(w), stride, padding, dilation, "
            "groups), common[1])");
  EXPECT_EQ(c1->grad_common, "conv1d_grads(g, x, w, stride, padding, dilation, groups)");
  EXPECT_EQ(c1->grad_common_users, 2);
  // The transposed convolution (conv*_grad_input) is differentiable too.
  const PrimitiveSpec* t2 = find_primitive("conv2d_grad_input");
  ASSERT_NE(t2, nullptr);
  ASSERT_EQ(t2->grads.size(), 7u);
  EXPECT_EQ(t2->grads[0], "conv2d(g, w, strides, padding, dilation, groups)");
  EXPECT_EQ(t2->grads[1],
            "conv2d_grad_weight(dy, g, shape(w), strides, padding, dilation, groups)");
  for (const char* name : {"max_pool1d", "avg_pool1d", "max_pool2d", "avg_pool2d"}) {
    const PrimitiveSpec* p = find_primitive(name);
    ASSERT_NE(p, nullptr) << name;
    ASSERT_FALSE(p->grads.empty()) << name;
    EXPECT_NE(find_primitive(p->grads[0].substr(0, p->grads[0].find('('))), nullptr) << name;
  }
}

TEST(Conv, Errors) {
  Array x = random_array({2, 6, 3}, 40), w = random_array({3, 3, 4}, 41);
  Array x2 = random_array({1, 5, 5, 2}, 42), w2 = random_array({2, 2, 2, 3}, 43);
  using IA = std::invalid_argument;
  EXPECT_TRUE(
      throws_with<IA>([&] { call("conv1d", {random_array({2, 3}, 1), w}); },
                      "[conv1d] input must be 3-d (batch, steps, channels), got shape (2, 3)"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv2d", {x, w2}); },
                              "[conv2d] input must be 4-d (batch, height, width, channels), got "
                              "shape (2, 6, 3)"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, random_array({3, 3}, 1)}); },
                              "[conv1d] kernel must be 3-d (kernel_size, in_channels, filters), "
                              "got shape (3, 3)"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv2d", {x2, w}); }, "[conv2d] kernel must be 4-d"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, random_array({3, 2, 4}, 1)}); },
                              "[conv1d] input has 3 channels but the kernel expects 2"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, random_array({0, 3, 4}, 1)}); },
                              "[conv1d] kernel dimensions must be positive"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, random_array({7, 3, 4}, 1)}); },
                              "[conv1d] kernel of effective size 7 (size 7, dilation 1) is larger "
                              "than the input (6 steps) with padding 'valid'"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, w, 1, "valid", 3}); },
                              "kernel of effective size 7 (size 3, dilation 3)"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv2d", {x2, random_array({6, 1, 2, 1}, 1)}); },
                              "larger than the input (5 rows)"));
  // 'same' and 'causal' accept a kernel longer than the input.
  EXPECT_EQ(arr(call("conv1d", {x, random_array({7, 3, 4}, 1), 1, "same"})).shape(),
            (Shape{2, 6, 4}));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, w, 1, "full"}); },
                              "[conv1d] padding must be 'valid', 'same' or 'causal', got 'full'"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv2d", {x2, w2, 1, "causal"}); },
                              "[conv2d] padding must be 'valid' or 'same', got 'causal'"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("conv1d", {x, w, 1, 3}); }, "[conv1d]"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, w, 0}); },
                              "[conv1d] argument 'stride' must be a positive integer, got 0"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv1d", {x, w, 1, "valid", -1}); },
                              "[conv1d] argument 'dilation' must be a positive integer"));
  EXPECT_TRUE(
      throws_with<IA>([&] { call("conv2d", {x2, w2, pair(1, 0)}); },
                      "[conv2d] argument 'strides' must be a positive integer, got [1, 0]"));
  EXPECT_TRUE(throws_with<IA>([&] { call("conv2d", {x2, w2, Value(List{1, 1, 1})}); },
                              "[conv2d] argument 'strides' must be an integer or a list of 2"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("conv2d", {x2, w2, "two"}); },
                                     "[conv2d] argument 'strides'"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("conv1d", {"x", w}); }, "[conv1d]"));
  // Backward primitives check g against the forward result's shape.
  EXPECT_TRUE(throws_with<IA>(
      [&] { call("conv1d_grad_input", {random_array({2, 5, 4}, 1), w, shape_of(x)}); },
      "[conv1d_grad_input] dy has shape (2, 5, 4) but the forward result has shape (2, 4, 4)"));
  EXPECT_TRUE(throws_with<IA>(
      [&] { call("conv1d_grad_weight", {random_array({2, 4, 5}, 1), x, shape_of(w)}); },
      "[conv1d_grad_weight] dy has shape (2, 4, 5) but the forward result has shape (2, 4, 4)"));
  EXPECT_TRUE(throws_with<IA>(
      [&] { call("conv1d_grad_input", {random_array({2, 4, 4}, 1), w, Value(List{2, 6})}); },
      "[conv1d_grad_input] x_shape must be 3-d"));
  EXPECT_TRUE(throws_with<IA>(
      [&] {
        call("conv2d_grad_input", {random_array({1, 4, 4, 3}, 1), w2, Value(List{1, 5, -5, 2})});
      },
      "[conv2d_grad_input] x_shape has a negative extent"));
}

TEST(Pool, Errors) {
  Array x = random_array({2, 4, 3}, 50), x2 = random_array({1, 2, 5, 2}, 51);
  using IA = std::invalid_argument;
  EXPECT_TRUE(throws_with<IA>([&] { call("max_pool1d", {x2}); },
                              "[max_pool1d] input must be 3-d (batch, steps, channels), got shape "
                              "(1, 2, 5, 2)"));
  EXPECT_TRUE(throws_with<IA>([&] { call("avg_pool2d", {x}); },
                              "[avg_pool2d] input must be 4-d (batch, height, width, channels)"));
  EXPECT_TRUE(
      throws_with<IA>([&] { call("max_pool1d", {x, 0}); },
                      "[max_pool1d] argument 'pool_size' must be a positive integer, got 0"));
  EXPECT_TRUE(throws_with<IA>([&] { call("avg_pool1d", {x, 2, 0}); },
                              "[avg_pool1d] argument 'strides' must be a positive integer, got 0"));
  EXPECT_TRUE(throws_with<IA>([&] { call("max_pool1d", {x, 5}); },
                              "[max_pool1d] pool_size 5 is larger than the input 4 with padding "
                              "'valid'"));
  EXPECT_TRUE(throws_with<IA>([&] { call("max_pool2d", {x2, 3}); },
                              "[max_pool2d] pool_size (3, 3) is larger than the input (2, 5) with "
                              "padding 'valid'"));
  EXPECT_EQ(arr(call("max_pool2d", {x2, 3, Value(), "same"})).shape(), (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(throws_with<IA>([&] { call("max_pool1d", {x, 2, Value(), "causal"}); },
                              "[max_pool1d] padding must be 'valid' or 'same', got 'causal'"));
  EXPECT_TRUE(throws_with<IA>([&] { call("max_pool1d_grad", {random_array({2, 3, 3}, 1), x}); },
                              "[max_pool1d_grad] g has shape (2, 3, 3) but the forward result has "
                              "shape (2, 2, 3)"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("avg_pool1d", {x, "2"}); },
                                     "[avg_pool1d] argument 'pool_size'"));
}

TEST(Conv, EmptyBatch) {
  Array x(DType::float32, {0, 6, 3});
  Array w = random_array({3, 3, 4}, 60, DType::float32);
  EXPECT_EQ(arr(call("conv1d", {x, w})).shape(), (Shape{0, 4, 4}));
  Array g(DType::float32, {0, 4, 4});
  EXPECT_TRUE(array_eq(call("conv1d_grad_weight", {g, x, shape_of(w)}), DType::float32, {3, 3, 4},
                       std::vector<double>(36, 0.0)));
  EXPECT_EQ(arr(call("max_pool1d", {x})).shape(), (Shape{0, 3, 3}));
}

// End to end: grad() in the language differentiates through the gradient rules.
TEST(Conv, GradThroughTheLanguage) {
  Array x = random_array({2, 9, 3}, 70), w = random_array({3, 3, 4}, 71);
  Array y = arr(call("conv1d", {x, w, 1, "causal", 2}));
  Array p = arr(call("max_pool1d", {y, 2, Value(), "same"}));
  Array c = random_array(p.shape(), 72);
  Value r = eval_string(
      "define(f, x, w, c, sum(max_pool1d(conv1d(x, w, padding=\"causal\", dilation=2), 2, "
      "padding=\"same\") * c))\n"
      "grad(f, argnums=[0, 1])",
      {x, w, c});
  ASSERT_TRUE(r.is_list());
  ASSERT_EQ(r.as_list().size(), 2u);
  auto f = [&](const Array& xv, const Array& wv) {
    Array yv = arr(call("conv1d", {xv, wv, 1, "causal", 2}));
    return arr(call("max_pool1d", {yv, 2, Value(), "same"}));
  };
  EXPECT_TRUE(grads_close(arr(r.as_list()[0]),
                          numeric_vjp([&](const Array& v) { return f(v, w); }, x, c)));
  EXPECT_TRUE(grads_close(arr(r.as_list()[1]),
                          numeric_vjp([&](const Array& v) { return f(x, v); }, w, c)));

  Array x2 = random_array({2, 6, 6, 2}, 73), w2 = random_array({3, 3, 2, 3}, 74);
  Array p2 = arr(call("avg_pool2d", {arr(call("conv2d", {x2, w2, 1, "same"})), 2}));
  Array c2 = random_array(p2.shape(), 75);
  Value r2 = eval_string(
      "define(f, x, w, c, sum(avg_pool2d(conv2d(x, w, padding=\"same\"), 2) * c))\n"
      "grad(f, argnums=1)",
      {x2, w2, c2});
  EXPECT_TRUE(grads_close(
      arr(r2), numeric_vjp(
                   [&](const Array& v) {
                     return arr(call("avg_pool2d", {arr(call("conv2d", {x2, v, 1, "same"})), 2}));
                   },
                   w2, c2)));
}

// conv*_bias and conv*_bias_relu: the composition's values (the same arithmetic
// in the same order: equal bits) and their gradients against central differences.
TEST(Conv, BiasAndReluFusedIntoTheConvolution) {
  struct Case {
    int spatial;
    Shape x, w;
    Value stride;
    const char* padding;
  };
  const Case cases[] = {{1, {3, 11, 4}, {3, 4, 5}, Value(int64_t{2}), "same"},
                        {2, {2, 7, 6, 3}, {3, 2, 3, 4}, Value(int64_t{1}), "valid"}};
  uint64_t seed = 80;
  for (const Case& c : cases) {
    const std::string conv = c.spatial == 1 ? "conv1d" : "conv2d";
    for (bool relu : {false, true}) {
      const std::string op = conv + (relu ? "_bias_relu" : "_bias");
      SCOPED_TRACE(op);
      for (DType dt : {DType::float64, DType::float32}) {
        Array x = random_array(c.x, seed++, dt), w = random_array(c.w, seed++, dt);
        Array b = random_array({c.w.back()}, seed++, dt);
        Array fused = arr(call(op.c_str(), {x, w, b, c.stride, c.padding}));
        Array plain = arr(call("bias_add", {arr(call(conv.c_str(), {x, w, c.stride, c.padding})), b}));
        if (relu) plain = arr(call("relu", {plain}));
        ASSERT_EQ(fused.shape(), plain.shape());
        ASSERT_EQ(fused.dtype(), dt);
        for (int64_t i = 0; i < fused.size(); ++i) {
          ASSERT_EQ(fused.get_double(i), plain.get_double(i)) << "element " << i;
        }
      }
      Array x = random_array(c.x, seed++), w = random_array(c.w, seed++);
      Array b = random_array({c.w.back()}, seed++);
      auto f = [&](const Array& xv, const Array& wv, const Array& bv) {
        return arr(call(op.c_str(), {xv, wv, bv, c.stride, c.padding}));
      };
      Array cot = random_array(f(x, w, b).shape(), seed++);
      const std::string s = c.spatial == 1 ? "stride" : "strides";
      Value r = eval_string("define(f, x, w, b, c, sum(" + op + "(x, w, b, " + s + "=" +
                                std::to_string(c.stride.as_int()) + ", padding=\"" + c.padding +
                                "\") * c))\ngrad(f, argnums=[0, 1, 2])",
                            {x, w, b, cot});
      ASSERT_TRUE(r.is_list());
      EXPECT_TRUE(grads_close(arr(r.as_list()[0]),
                              numeric_vjp([&](const Array& v) { return f(v, w, b); }, x, cot)));
      EXPECT_TRUE(grads_close(arr(r.as_list()[1]),
                              numeric_vjp([&](const Array& v) { return f(x, v, b); }, w, cot)));
      EXPECT_TRUE(grads_close(arr(r.as_list()[2]),
                              numeric_vjp([&](const Array& v) { return f(x, w, v); }, b, cot)));
    }
  }
  try {
    call("conv1d_bias_relu", {random_array({1, 5, 2}, 1), random_array({3, 2, 4}, 2),
                              random_array({3}, 3)});
    ADD_FAILURE() << "a bias of the wrong length was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[conv1d_bias_relu] bias has shape (3,) but the kernel "
                                         "has 4 filters"),
              std::string::npos)
        << e.what();
  }
}
