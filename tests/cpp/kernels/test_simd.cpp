// The elementwise kernels at every SIMD level this CPU runs give the bits of
// the baseline (SSE2) level: binary and unary operations on float64, float32
// and int64, contiguous, scalar-operand and broadcast layouts, lengths that
// leave every vector remainder, NaNs of both signs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/simd.hpp"

namespace {

using tessera::Array;
using tessera::BinaryOp;
using tessera::DType;
using tessera::Shape;
using tessera::SimdLevel;
using tessera::UnaryOp;
using namespace tessera::kernels;

std::vector<SimdLevel> levels() {
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::sse2, SimdLevel::avx2, SimdLevel::avx512}) {
    if (l <= tessera::simd_best()) out.push_back(l);
  }
  return out;
}

template <class T>
Array values(int64_t n, unsigned seed, DType dt) {
  Array a(dt, Shape{n});
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, 100.0);
  const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1e-310, 2.5};
  for (int64_t i = 0; i < n; ++i) {
    const double v = rng() % 5 == 0 ? special[rng() % 8] : d(rng);
    if constexpr (std::is_same_v<T, int64_t>) {
      a.data<T>()[i] = std::isfinite(v) ? static_cast<int64_t>(v) : 7;
    } else {
      a.data<T>()[i] = static_cast<T>(v);
    }
  }
  return a;
}

std::vector<unsigned char> bytes(const Array& a) {
  const auto* p = static_cast<const unsigned char*>(a.origin_raw());
  return std::vector<unsigned char>(p, p + a.size() * tessera::dtype_size(a.dtype()));
}

struct RestoreLevel {
  SimdLevel before = tessera::simd_level();
  ~RestoreLevel() { tessera::set_simd_level(before); }
};

template <class T>
void check_dtype(DType dt) {
  RestoreLevel restore;
  const BinaryOp bops[] = {BinaryOp::add,     BinaryOp::subtract, BinaryOp::multiply,
                           BinaryOp::maximum, BinaryOp::minimum,  BinaryOp::fmax,
                           BinaryOp::less,    BinaryOp::equal};
  for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 1000, 1003}) {
    Array x = values<T>(n, static_cast<unsigned>(n), dt);
    Array y = values<T>(n, static_cast<unsigned>(n) + 1, dt);
    Array s = values<T>(1, 5, dt).reshaped(Shape{});
    for (BinaryOp op : bops) {
      for (const Array* b : {&y, &s}) {
        auto layout = make_broadcast<2>({&x.shape(), &b->shape()}, "test");
        std::vector<unsigned char> base;
        for (SimdLevel level : levels()) {
          tessera::set_simd_level(level);
          Array out(binary_out_dtype(op, dt), layout.out_shape);
          binary_range(op, layout, x, *b, out, 0, layout.size, "test");
          if (level == SimdLevel::sse2) {
            base = bytes(out);
          } else {
            EXPECT_EQ(bytes(out), base) << tessera::op_name(op) << " n=" << n << " at "
                                        << tessera::simd_name(level);
          }
        }
      }
    }
    if constexpr (std::is_floating_point_v<T>) {
      for (UnaryOp op : {UnaryOp::sqrt, UnaryOp::abs, UnaryOp::negative, UnaryOp::floor,
                         UnaryOp::rint, UnaryOp::square}) {
        std::vector<unsigned char> base;
        for (SimdLevel level : levels()) {
          tessera::set_simd_level(level);
          Array out(dt, x.shape());
          unary_range(op, x, out, 0, n);
          if (level == SimdLevel::sse2) {
            base = bytes(out);
          } else {
            EXPECT_EQ(bytes(out), base) << tessera::op_name(op) << " n=" << n;
          }
        }
      }
    }
  }
}

TEST(Simd, EveryLevelGivesTheBaselineBitsFloat64) { check_dtype<double>(DType::float64); }
TEST(Simd, EveryLevelGivesTheBaselineBitsFloat32) { check_dtype<float>(DType::float32); }
TEST(Simd, EveryLevelGivesTheBaselineBitsInt64) { check_dtype<int64_t>(DType::int64); }

TEST(Simd, NanPlusNanIsTheFirstOperand) {
  RestoreLevel restore;
  const double neg_nan = -std::numeric_limits<double>::quiet_NaN();
  Array x(DType::float64, Shape{40}), y(DType::float64, Shape{40});
  for (int i = 0; i < 40; ++i) {
    x.data<double>()[i] = i % 2 ? neg_nan : NAN;
    y.data<double>()[i] = i % 2 ? NAN : neg_nan;
  }
  auto layout = make_broadcast<2>({&x.shape(), &y.shape()}, "test");
  for (SimdLevel level : levels()) {
    tessera::set_simd_level(level);
    for (BinaryOp op : {BinaryOp::add, BinaryOp::multiply}) {
      Array out(DType::float64, layout.out_shape);
      binary_range(op, layout, x, y, out, 0, 40, "test");
      for (int i = 0; i < 40; ++i) {
        EXPECT_EQ(std::signbit(out.data<double>()[i]), std::signbit(x.data<double>()[i]))
            << tessera::op_name(op) << " at " << tessera::simd_name(level);
      }
    }
  }
}

TEST(Simd, LevelNamesAndErrors) {
  EXPECT_EQ(tessera::simd_level_of("avx2", "test"), SimdLevel::avx2);
  EXPECT_STREQ(tessera::simd_name(SimdLevel::avx512), "avx512");
  try {
    tessera::simd_level_of("avx9", "TESSERA_SIMD");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[TESSERA_SIMD] unknown SIMD level 'avx9'"),
              std::string::npos);
  }
  if (tessera::simd_best() != SimdLevel::avx512) {
    EXPECT_THROW(tessera::set_simd_level(SimdLevel::avx512), std::invalid_argument);
  }
}

}  // namespace
