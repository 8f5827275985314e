// Convolution kernels where chunks of one evaluation disagree on oneDNN's
// layouts: a kernel laid out for one algorithm and read by a chunk running
// the other (the chunk reorders for itself), and weight-gradient partials of
// chunks that ran different algorithms, batch sizes and layouts, all against
// the float64 loops.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tessera/kernels/conv.hpp"

namespace {

using tessera::DType;
using namespace tessera::kernels;

// A 3x3 'same' convolution with stride 1: Winograd's case.
ConvShape same_3x3(int64_t batch, int64_t channels, int64_t filters, int64_t size) {
  ConvShape s;
  s.spatial = 2;
  s.batch = batch;
  s.channels_in = channels;
  s.channels_out = filters;
  s.in = s.out = {size, size};
  s.kernel = {3, 3};
  s.pad_lo = s.pad_hi = {1, 1};
  return s;
}

std::vector<float> random_floats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The largest difference from `ref`, as a fraction of ref's largest magnitude.
double scaled_error(const std::vector<float>& a, const std::vector<double>& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(a[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return err / scale;
}

// Restores the Winograd setting a test changes.
struct WinogradSetting {
  bool was = conv_winograd();
  ~WinogradSetting() { set_conv_winograd(was); }
};

TEST(ConvKernels, KernelLaidOutForOneAlgorithmServesTheOther) {
  WinogradSetting restore;
  const ConvShape s = same_3x3(4, 32, 32, 12);
  const auto x = random_floats(s.batch * s.in_size(), 1), w = random_floats(s.weight_size(), 2);
  const auto g = random_floats(s.batch * s.out_size(), 3);
  const auto x64 = widened(x), w64 = widened(w), g64 = widened(g);
  std::vector<double> y64(g.size()), dx64(x.size());
  const ConvWeights forward64(DType::float64, ConvPass::forward, s, w64.data());
  const ConvWeights backward64(DType::float64, ConvPass::backward_data, s, w64.data());
  conv_forward(DType::float64, s, x64.data(), forward64, y64.data());
  conv_backward_data(DType::float64, s, g64.data(), backward64, dx64.data());
  for (bool packed_for_winograd : {true, false}) {
    SCOPED_TRACE(packed_for_winograd ? "laid out for Winograd" : "laid out for direct");
    set_conv_winograd(packed_for_winograd);
    const ConvWeights forward(DType::float32, ConvPass::forward, s, w.data());
    const ConvWeights backward(DType::float32, ConvPass::backward_data, s, w.data());
    set_conv_winograd(!packed_for_winograd);
    std::vector<float> y(g.size()), dx(x.size());
    conv_forward(DType::float32, s, x.data(), forward, y.data());
    conv_backward_data(DType::float32, s, g.data(), backward, dx.data());
    EXPECT_LT(scaled_error(y, y64), 1e-5);
    EXPECT_LT(scaled_error(dx, dx64), 1e-5);
  }
}

TEST(ConvKernels, WeightGradientAddsChunksThatRanDifferently) {
  WinogradSetting restore;
  const ConvShape s = same_3x3(12, 16, 32, 10);
  const auto x = random_floats(s.batch * s.in_size(), 4);
  const auto g = random_floats(s.batch * s.out_size(), 5);
  const auto x64 = widened(x), g64 = widened(g);
  std::vector<double> dw64(static_cast<size_t>(s.weight_size()));
  ConvWeightGradient whole(DType::float64, s, 1);
  whole.add_chunk(0, s, x64.data(), g64.data());
  whole.finish(dw64.data());
  // Chunks of 8, 3, 0 and 1 samples: Winograd, direct, the loops (whose
  // partial is in the caller's layout, so the sum converts the others to it)
  // and Winograd.
  const int64_t sizes[] = {8, 3, 0, 1};
  ConvWeightGradient sum(DType::float32, s, 4);
  int64_t first = 0;
  for (int64_t c = 0; c < 4; ++c) {
    set_conv_winograd(c != 1);
    ConvShape part = s;
    part.batch = sizes[c];
    sum.add_chunk(c, part, x.data() + first * s.in_size(), g.data() + first * s.out_size());
    first += sizes[c];
  }
  std::vector<float> dw(dw64.size());
  sum.finish(dw.data());
  EXPECT_LT(scaled_error(dw, dw64), 1e-5);
}

}  // namespace

namespace {

int process_threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

}  // namespace

// oneDNN runs on OpenMP: called from a thread whose OpenMP thread count another
// library set (PyTorch sets the main thread's), it must still run on that one
// thread (no OpenMP team beside tessera's workers), and leave the count as it
// found it (the other library's parallel regions read it).
TEST(ConvKernels, OneOpenMPThreadAndTheCallersCountKept) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  const int threads = process_threads();
  const ConvShape s = same_3x3(4, 16, 16, 12);
  std::vector<float> x = random_floats(s.batch * s.in_size(), 1);
  std::vector<float> w = random_floats(s.weight_size(), 2);
  std::vector<float> y(static_cast<size_t>(s.batch * s.out_size()));
  const uint64_t calls = onednn_calls();
  const ConvWeights packed(DType::float32, ConvPass::forward, s, w.data());
  conv_forward(DType::float32, s, x.data(), packed, y.data());
  EXPECT_GT(onednn_calls(), calls);
  EXPECT_EQ(process_threads(), threads);  // no OpenMP team was started
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(before);
}
