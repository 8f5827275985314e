// The float32 matrix-product kernels (oneDNN's sgemm per tile, BLIS's gemv for
// vectors): concurrent calls from several threads give each call's serial
// bits, a tile's bits do not depend on its operands' alignment, the products
// match a double-precision loop, and the caller's OpenMP thread count is
// restored.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "tessera/kernels/linalg.hpp"

namespace {

using tessera::DType;
namespace kn = tessera::kernels;

std::vector<float> noise(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<float>(static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53) - 0.5);
  }
  return v;
}

// One product: A (m, k) read with strides (ars, acs), B (k, n) with (brs, bcs).
struct GemmCase {
  int64_t m, k, n;
  bool ta, tb;  // stored transposed
  int64_t row0, row1;
};

struct Operands {
  std::vector<float> a, b;
  kn::BlasMatrix ma, mb;
};

Operands make_operands(const GemmCase& c, uint64_t seed, size_t pad = 0) {
  Operands o;
  o.a = noise(static_cast<size_t>(c.m * c.k) + pad, seed);
  o.b = noise(static_cast<size_t>(c.k * c.n) + pad, seed + 1);
  o.ma = {o.a.data() + pad, c.ta ? 1 : c.k, c.ta ? c.m : 1};
  o.mb = {o.b.data() + pad, c.tb ? 1 : c.n, c.tb ? c.k : 1};
  return o;
}

std::vector<float> product(const GemmCase& c, const Operands& o) {
  std::vector<float> out(static_cast<size_t>(c.m * c.n), -7.0f);
  kn::matmul_rows_strided(DType::float32, o.ma, o.mb, out.data(), c.k, c.n, c.row0, c.row1);
  return out;
}

const std::vector<GemmCase>& gemm_cases() {
  static const std::vector<GemmCase> all = {
      {200, 32, 200, false, true, 0, 200},   {200, 200, 32, false, false, 17, 181},
      {3200, 32, 64, false, false, 0, 1600}, {64, 1600, 10, false, false, 0, 64},
      {17, 64, 33, false, true, 0, 17},      {33, 129, 65, true, false, 3, 30},
      {128, 64, 128, true, true, 0, 128},    {1, 256, 300, false, false, 0, 1},
      {300, 256, 1, false, true, 0, 300},    {9, 0, 5, false, false, 0, 9},
  };
  return all;
}

TEST(LinalgKernels, Float32ProductsMatchADoubleLoop) {
  for (const GemmCase& c : gemm_cases()) {
    Operands o = make_operands(c, 11);
    std::vector<float> got = product(c, o);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const float g = got[static_cast<size_t>(i * c.n + j)];
        if (i < c.row0 || i >= c.row1) {
          ASSERT_EQ(g, -7.0f) << "row " << i << " outside the tile was written";
          continue;
        }
        double want = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const float* a = static_cast<const float*>(o.ma.data);
          const float* b = static_cast<const float*>(o.mb.data);
          want += double(a[i * o.ma.row_stride + p * o.ma.col_stride]) *
                  double(b[p * o.mb.row_stride + j * o.mb.col_stride]);
        }
        ASSERT_NEAR(g, want, 1e-5 * (1 + std::sqrt(double(c.k))))
            << c.m << "x" << c.k << "x" << c.n << " at " << i << "," << j;
      }
    }
  }
}

TEST(LinalgKernels, ConcurrentCallsGiveTheSerialBits) {
  // Four threads call the kernels at once on every case, many times, and each
  // result must be the serial one, bit for bit (a kernel with shared buffers
  // corrupts some of them).
  std::vector<Operands> ops;
  std::vector<std::vector<float>> serial;
  for (const GemmCase& c : gemm_cases()) {
    ops.push_back(make_operands(c, 21));
    serial.push_back(product(c, ops.back()));
  }
  std::atomic<int> wrong{0}, omp_changed{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      omp_set_num_threads(3);  // a caller with its own OpenMP setting keeps it
      for (int round = 0; round < 40; ++round) {
        for (size_t i = 0; i < gemm_cases().size(); ++i) {
          const size_t ci = (i + static_cast<size_t>(t + round)) % gemm_cases().size();
          std::vector<float> got = product(gemm_cases()[ci], ops[ci]);
          const size_t bytes = got.size() * sizeof(float);
          if (std::memcmp(got.data(), serial[ci].data(), bytes) != 0) ++wrong;
        }
      }
      if (omp_get_max_threads() != 3) ++omp_changed;
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(omp_changed.load(), 0);
}

TEST(LinalgKernels, BitsDoNotDependOnAlignment) {
  // The same operands where the allocator put them and one float further.
  for (const GemmCase& c : gemm_cases()) {
    Operands aligned = make_operands(c, 31), shifted = make_operands(c, 31, 1);
    std::memcpy(shifted.a.data() + 1, aligned.a.data(), aligned.a.size() * sizeof(float));
    std::memcpy(shifted.b.data() + 1, aligned.b.data(), aligned.b.size() * sizeof(float));
    std::vector<float> x = product(c, aligned), y = product(c, shifted);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0)
        << c.m << "x" << c.k << "x" << c.n;
  }
}

TEST(LinalgKernels, TransposedProductTilesMatchTheWholeProduct) {
  // matmul_tn_rows: rows of A^T B; a tile of the rows equals those rows of
  // the product computed by another tiling, within float32 rounding.
  const int64_t k = 700, p = 45, n = 37;
  std::vector<float> a = noise(static_cast<size_t>(k * p), 41);
  std::vector<float> b = noise(static_cast<size_t>(k * n), 42);
  std::vector<float> whole(static_cast<size_t>(p * n)), tiled(whole.size());
  kn::matmul_tn_rows(DType::float32, a.data(), b.data(), whole.data(), k, p, n, 0, p);
  for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 13}, {13, 30}, {30, p}}) {
    kn::matmul_tn_rows(DType::float32, a.data(), b.data(), tiled.data(), k, p, n, r0, r1);
  }
  for (int64_t i = 0; i < p; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t q = 0; q < k; ++q) want += double(a[q * p + i]) * double(b[q * n + j]);
      ASSERT_NEAR(whole[i * n + j], want, 1e-4) << i << "," << j;
      ASSERT_NEAR(tiled[i * n + j], want, 1e-4) << i << "," << j;
    }
  }
}

}  // namespace
