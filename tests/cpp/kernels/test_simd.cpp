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
#include <type_traits>
#include <utility>
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

// NaNs of many payloads (quiet and signalling, both signs) against numbers,
// infinities and each other: x + y and x * y give float_binary's bits (x's
// NaN, quieted, when both are NaN) at every level, for both operands arrays
// or one a 0-d array, over lengths that leave every remainder of the
// unrolled vector loops.
template <class T, class Bits>
void check_nan_payloads(DType dt) {
  RestoreLevel restore;
  std::mt19937 rng(17);
  constexpr bool wide = std::is_same_v<T, double>;
  const Bits exp_mask = wide ? Bits(0x7ff0000000000000ull) : Bits(0x7f800000u);
  const Bits mantissa = (Bits(1) << (wide ? 52 : 23)) - 1;
  const Bits sign = Bits(1) << (sizeof(Bits) * 8 - 1);
  const T inf = std::numeric_limits<T>::infinity();
  auto pick = [&]() {
    const unsigned kind = rng() % 6;
    if (kind < 3) {
      // A NaN: payload from the generator, quiet or signalling, either sign.
      const Bits r = static_cast<Bits>((uint64_t(rng()) << 32) | rng());
      Bits b = exp_mask | (r & mantissa) | Bits(1);
      if (rng() % 2) b |= sign;
      T v;
      std::memcpy(&v, &b, sizeof v);
      return v;
    }
    if (kind == 3) return rng() % 2 ? inf : -inf;
    return static_cast<T>(static_cast<int>(rng() % 2001) - 1000) / T(8);
  };
  auto same_bits = [](T a, T b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 70; ++n) lengths.push_back(n);
  lengths.push_back(1000);
  for (int64_t n : lengths) {
    Array x(dt, Shape{n}), y(dt, Shape{n}), s(dt, Shape{});
    for (int64_t i = 0; i < n; ++i) {
      x.data<T>()[i] = pick();
      y.data<T>()[i] = pick();
    }
    s.data<T>()[0] = pick();
    const std::pair<const Array*, const Array*> cases[] = {{&x, &y}, {&s, &y}, {&x, &s}};
    for (const auto& [pa, pb] : cases) {
      const Array& a = *pa;
      const Array& b = *pb;
      auto layout = make_broadcast<2>({&a.shape(), &b.shape()}, "test");
      for (SimdLevel level : levels()) {
        tessera::set_simd_level(level);
        for (BinaryOp op : {BinaryOp::add, BinaryOp::multiply}) {
          Array out(dt, layout.out_shape);
          binary_range(op, layout, a, b, out, 0, n, "test");
          for (int64_t i = 0; i < n; ++i) {
            const T u = a.data<T>()[a.size() == 1 ? 0 : i];
            const T v = b.data<T>()[b.size() == 1 ? 0 : i];
            const T want = op == BinaryOp::add ? float_binary<BinaryOp::add>(u, v)
                                               : float_binary<BinaryOp::multiply>(u, v);
            ASSERT_TRUE(same_bits(out.data<T>()[i], want))
                << tessera::op_name(op) << " at " << tessera::simd_name(level) << " n=" << n
                << " i=" << i << " x=" << u << " y=" << v;
          }
        }
      }
    }
  }
}

TEST(Simd, AddAndMultiplyKeepTheFirstOperandsNanPayload) {
  check_nan_payloads<double, uint64_t>(DType::float64);
  check_nan_payloads<float, uint32_t>(DType::float32);
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
