// The single-threaded float32 products tessera's matmul primitives call per
// tile, raced: serial BLIS (cblas_sgemm) against oneDNN's dnnl_sgemm with one
// OpenMP thread (as the kernels call it: one scheduler owns the cores). The
// shapes are the tiles logged from the fair race's transformer and convnet and
// from the char GPT (bench_keras_race.py, bench_char_gpt.py) at 2 threads:
// m x k x n, transposes and leading dimensions as the primitives pass them,
// and matrix-vector products (BLIS's gemv, as the kernels call it).
// Median of 7 runs, each repeating the call for about 20 ms.
//
//   build/bench/bench_gemm_tiles
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "machine.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Tile {
  const char* where;
  char ta, tb;
  int m, k, n, lda, ldb;
};

// Seconds per call: median of 7 runs of `reps` calls.
template <class F>
double per_call(F&& f) {
  f();
  int reps = 1;
  for (;;) {
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) f();
    if (std::chrono::duration<double>(Clock::now() - t0).count() > 0.02) break;
    reps *= 2;
  }
  std::vector<double> t;
  for (int run = 0; run < 7; ++run) {
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one;
}

}  // namespace

int main() {
  omp_set_num_threads(1);
  const std::vector<Tile> tiles = {
      {"transformer dense", 'N', 'N', 3200, 32, 64, 32, 64},
      {"transformer dense", 'N', 'N', 3200, 32, 32, 32, 32},
      {"transformer dense grad_x", 'N', 'T', 3200, 64, 32, 64, 64},
      {"transformer dense grad_y", 'T', 'N', 32, 2133, 64, 32, 64},
      {"transformer scores", 'N', 'T', 200, 32, 200, 64, 64},
      {"transformer attn @ v", 'N', 'N', 200, 200, 32, 200, 64},
      {"transformer scores grad", 'T', 'N', 200, 200, 32, 200, 32},
      {"transformer attn grad", 'N', 'T', 200, 200, 32, 200, 200},
      {"convnet dense", 'N', 'N', 64, 1600, 10, 1600, 10},
      {"convnet dense grad_x", 'N', 'T', 64, 10, 1600, 10, 10},
      {"convnet dense grad_y", 'T', 'N', 800, 128, 10, 1600, 10},
      {"gpt attention", 'N', 'T', 128, 64, 128, 256, 256},
      {"gpt attention", 'N', 'N', 128, 128, 64, 128, 256},
      {"gpt qkv/proj", 'N', 'N', 2048, 256, 256, 256, 256},
      {"gpt proj grad_x", 'N', 'T', 2048, 256, 256, 256, 256},
      {"gpt proj grad_y", 'T', 'N', 256, 2048, 256, 256, 256},
      {"gpt mlp up", 'N', 'N', 2048, 256, 1024, 256, 1024},
      {"gpt mlp down", 'N', 'N', 2048, 1024, 256, 1024, 256},
      {"gpt mlp grad_y", 'T', 'N', 1024, 2048, 256, 1024, 256},
      {"gpt head", 'N', 'N', 2048, 256, 73, 256, 73},
      {"vector @ matrix", 'N', 'N', 1, 256, 1024, 256, 1024},
      {"matrix @ vector", 'N', 'N', 2048, 256, 1, 256, 1},
      {"vector @ matrix.T", 'N', 'T', 1, 512, 512, 512, 512},
  };
  std::printf("bench_gemm_tiles: float32 tile products, serial BLIS vs dnnl_sgemm"
              " (1 OpenMP thread)\n");
  std::printf("%s; load average %s; one thread each\n", tessera::bench::machine_line().c_str(),
              load_average().c_str());
  std::printf("%-26s %2s %5s %5s %5s %11s %11s %7s %10s\n", "tile", "op", "m", "k", "n",
              "BLIS GF/s", "oneDNN GF/s", "ratio", "max |diff|");
  double blis_total = 0, dnnl_total = 0;
  for (const Tile& t : tiles) {
    const int rows_a = t.ta == 'T' ? t.k : t.m, rows_b = t.tb == 'T' ? t.n : t.k;
    std::vector<float> a(static_cast<size_t>(rows_a) * t.lda);
    std::vector<float> b(static_cast<size_t>(rows_b) * t.ldb);
    uint64_t s = 1;
    for (float* v : {a.data(), b.data()}) {
      const size_t len = v == a.data() ? a.size() : b.size();
      for (size_t i = 0; i < len; ++i) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = static_cast<float>(static_cast<double>(s >> 40) / double(1 << 24) - 0.5);
      }
    }
    std::vector<float> c1(static_cast<size_t>(t.m) * t.n), c2(c1.size());
    // tessera's BLIS path calls gemv for one row or one column.
    auto blis = [&] {
      if (t.n == 1 && t.ta == 'N' && t.tb == 'N') {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, t.m, t.k, 1.0f, a.data(), t.lda, b.data(), t.ldb,
                    0.0f, c1.data(), 1);
        return;
      }
      if (t.m == 1 && t.ta == 'N') {
        if (t.tb == 'N') {
          cblas_sgemv(CblasRowMajor, CblasTrans, t.k, t.n, 1.0f, b.data(), t.ldb, a.data(), 1,
                      0.0f, c1.data(), 1);
        } else {
          cblas_sgemv(CblasRowMajor, CblasNoTrans, t.n, t.k, 1.0f, b.data(), t.ldb, a.data(), 1,
                      0.0f, c1.data(), 1);
        }
        return;
      }
      cblas_sgemm(CblasRowMajor, t.ta == 'T' ? CblasTrans : CblasNoTrans,
                  t.tb == 'T' ? CblasTrans : CblasNoTrans, t.m, t.n, t.k, 1.0f, a.data(), t.lda,
                  b.data(), t.ldb, 0.0f, c1.data(), t.n);
    };
    auto dnnl = [&] {
      dnnl_sgemm(t.ta, t.tb, t.m, t.n, t.k, 1.0f, a.data(), t.lda, b.data(), t.ldb, 0.0f,
                 c2.data(), t.n);
    };
    const double sb = per_call(blis), sd = per_call(dnnl);
    float diff = 0;
    for (size_t i = 0; i < c1.size(); ++i) diff = std::max(diff, std::abs(c1[i] - c2[i]));
    const double flops = 2.0 * t.m * t.k * t.n;
    blis_total += sb;
    dnnl_total += sd;
    std::printf("%-26s %c%c %5d %5d %5d %11.1f %11.1f %6.2fx %10.2g\n", t.where, t.ta, t.tb, t.m,
                t.k, t.n, flops / sb / 1e9, flops / sd / 1e9, sb / sd, diff);
  }
  std::printf("one call of each tile: BLIS %.3f ms, oneDNN %.3f ms (%.2fx)\n", blis_total * 1e3,
              dnnl_total * 1e3, blis_total / dnnl_total);
  return 0;
}
