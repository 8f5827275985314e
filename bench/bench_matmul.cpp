// Matrix-product throughput of the matmul primitive for float32 and float64,
// with 1 and 2 runtime threads, against this machine's theoretical peak
// (2 FMA units x SIMD lanes (AVX2: 8 float32, 4 float64) x 2 flops x clock,
// per core). Median of 5 timed runs after one warm-up; sizes that would push
// the whole run past about a minute are skipped.
//
//   build-*/bench/bench_matmul
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;

namespace {

using Clock = std::chrono::steady_clock;

struct Machine {
  std::string model = "unknown";
  double mhz = 0;
  unsigned cores = std::thread::hardware_concurrency();
  bool avx512 = false;
};

Machine describe_machine() {
  Machine m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  auto value = [](const std::string& l) {
    auto colon = l.find(':');
    return colon == std::string::npos ? std::string() : l.substr(colon + 2);
  };
  while (std::getline(cpuinfo, line)) {
    if (m.model == "unknown" && line.rfind("model name", 0) == 0) m.model = value(line);
    if (m.mhz == 0 && line.rfind("cpu MHz", 0) == 0) m.mhz = std::stod(value(line));
    if (line.rfind("flags", 0) == 0 && line.find(" avx512f") != std::string::npos) m.avx512 = true;
  }
  // Prefer the rated maximum where cpufreq exposes it; "cpu MHz" is the current clock.
  std::ifstream maxf("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (maxf >> khz && khz > 0) m.mhz = khz / 1000.0;
  return m;
}

Array random_matrix(DType dt, int64_t n, uint64_t seed) {
  Array a(dt, {n, n});
  uint64_t s = seed;
  for (int64_t i = 0; i < a.size(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    double v = static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53) - 0.5;
    if (dt == DType::float32) {
      a.data<float>()[i] = static_cast<float>(v);
    } else {
      a.data<double>()[i] = v;
    }
  }
  return a;
}

// Median seconds of `runs` products after one warm-up.
double median_seconds(const Array& a, const Array& b, int runs) {
  call_primitive("matmul", std::vector<Value>{a, b});
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    auto t0 = Clock::now();
    Value c = call_primitive("matmul", std::vector<Value>{a, b});
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  const Machine m = describe_machine();
  const double ghz = m.mhz / 1000.0;
  std::printf("bench_matmul: matmul primitive under the runtime (float32 tiles on oneDNN's sgemm,"
              " float64 on serial BLIS)\n");
  std::printf("machine: %s, %u logical cores, clock %.0f MHz\n", m.model.c_str(), m.cores, m.mhz);
  std::printf("peak per core: float32 %.1f GFLOP/s, float64 %.1f GFLOP/s (2 FMA x AVX2 lanes)\n",
              32 * ghz, 16 * ghz);
  if (m.avx512) {
    // BLIS and oneDNN then use 512-bit kernels, so the AVX2 ratio can pass 100%.
    std::printf("note: this CPU has AVX-512; its peak is twice the AVX2 peak used below\n");
  }
  std::printf("%-8s %6s %7s %10s %9s %8s\n", "dtype", "n", "threads", "median ms", "GFLOP/s",
              "of peak");
  const int runs = 5;
  const double budget_s = 50.0;
  const auto start = Clock::now();
  const int max_threads = static_cast<int>(std::max(1u, std::min(m.cores, 2u)));
  for (DType dt : {DType::float32, DType::float64}) {
    const double lanes = dt == DType::float32 ? 8 : 4;
    double last_total = 0;
    for (int64_t n : {256, 512, 1024, 2048}) {
      double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      // A size 2x larger costs about 8x; leave room for the other dtype too.
      if (last_total * 8 > (budget_s - elapsed) / (dt == DType::float32 ? 2 : 1)) {
        std::printf("%-8s %6lld   skipped (time budget)\n",
                    std::string(dtype_name(dt)).c_str(), static_cast<long long>(n));
        break;
      }
      Array a = random_matrix(dt, n, 1), b = random_matrix(dt, n, 2);
      const double flops = 2.0 * double(n) * double(n) * double(n);
      auto t0 = Clock::now();
      for (int threads = 1; threads <= max_threads; ++threads) {
        set_num_threads(threads);
        double s = median_seconds(a, b, runs);
        double gflops = flops / s / 1e9;
        double peak = 2 * lanes * 2 * ghz * threads;
        std::printf("%-8s %6lld %7d %10.2f %9.1f %7.0f%%\n", std::string(dtype_name(dt)).c_str(),
                    static_cast<long long>(n), threads, s * 1e3, gflops,
                    peak > 0 ? 100.0 * gflops / peak : 0.0);
      }
      last_total = std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }
  std::printf("total %.1f s\n", std::chrono::duration<double>(Clock::now() - start).count());
  return 0;
}
