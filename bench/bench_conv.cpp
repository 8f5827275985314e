// Convolution throughput on the HAR CNN's shapes (minibatch 8000, 128 steps,
// 9 channels; two Conv1D(64, 3) layers), float32 through oneDNN, with 1 and 2
// runtime threads: forward of each layer and the two backward passes of the
// second. Median of 3 timed runs after one warm-up, in seconds and GFLOP/s
// (2 flops per multiply-add).
//
//   build-*/bench/bench_conv
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "machine.hpp"
#include "tessera/core/array.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;

namespace {

using Clock = std::chrono::steady_clock;

Array random_array(Shape shape, uint64_t seed) {
  Array a(DType::float32, shape);
  uint64_t s = seed;
  for (int64_t i = 0; i < a.size(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    double v = static_cast<double>(s >> 11) / 9007199254740992.0 - 0.5;
    a.data<float>()[i] = static_cast<float>(v);
  }
  return a;
}

double median_seconds(const std::function<void()>& fn) {
  fn();
  std::vector<double> times;
  for (int r = 0; r < 3; ++r) {
    auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[1];
}

}  // namespace

int main() {
  std::printf("%s\n", bench::machine_line().c_str());
  const int64_t batch = 8000, steps = 128, filters = 64, k = 3;
  Array x = random_array({batch, steps, 9}, 1);
  Array w1 = random_array({k, 9, filters}, 2);
  Array w2 = random_array({k, filters, filters}, 3);
  Array h1 = call_primitive("conv1d", std::vector<Value>{x, w1}).as_array();
  Array h2 = call_primitive("conv1d", std::vector<Value>{h1, w2}).as_array();
  Value h1_shape = call_primitive("shape", std::vector<Value>{h1});
  Value w2_shape = call_primitive("shape", std::vector<Value>{w2});
  const double macs1 = double(batch) * (steps - 2) * k * 9 * filters;
  const double macs2 = double(batch) * (steps - 4) * k * filters * filters;
  struct Case {
    const char* name;
    double flops;
    std::function<void()> run;
  };
  std::vector<Case> cases = {
      {"conv1d 9->64 forward", 2 * macs1,
       [&] { call_primitive("conv1d", std::vector<Value>{x, w1}); }},
      {"conv1d 64->64 forward", 2 * macs2,
       [&] { call_primitive("conv1d", std::vector<Value>{h1, w2}); }},
      {"conv1d 64->64 grad input", 2 * macs2,
       [&] { call_primitive("conv1d_grad_input", std::vector<Value>{h2, w2, h1_shape}); }},
      {"conv1d 64->64 grad weight", 2 * macs2,
       [&] { call_primitive("conv1d_grad_weight", std::vector<Value>{h2, h1, w2_shape}); }},
      {"max_pool1d 124x64", 0, [&] { call_primitive("max_pool1d", std::vector<Value>{h2}); }},
  };
  std::printf("minibatch %lld x %lld steps x 9 channels, float32\n", (long long)batch,
              (long long)steps);
  std::printf("%-28s %8s %12s %12s\n", "case", "threads", "seconds", "GFLOP/s");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : cases) {
      double s = median_seconds(c.run);
      if (c.flops > 0) {
        std::printf("%-28s %8d %12.4f %12.1f\n", c.name, threads, s, c.flops / s * 1e-9);
      } else {
        std::printf("%-28s %8d %12.4f %12s\n", c.name, threads, s, "-");
      }
    }
  }
  return 0;
}
