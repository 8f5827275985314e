// dtype.hpp: names, NumPy 2 promotion, casting rules and the 16-bit floats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tessera/core/array.hpp"
#include "tessera/core/dtype.hpp"
#include "tessera/core/error.hpp"

namespace tessera {
namespace {

TEST(DType, NamesRoundTripAndAliases) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dt = static_cast<DType>(i);
    EXPECT_EQ(dtype_from_name(dtype_name(dt)), dt) << dtype_name(dt);
  }
  EXPECT_EQ(dtype_from_name("u1"), DType::uint8);
  EXPECT_EQ(dtype_from_name("<i4"), DType::int32);
  EXPECT_EQ(dtype_from_name("half"), DType::float16);
  EXPECT_EQ(dtype_from_name("complex"), DType::complex128);
  EXPECT_EQ(dtype_from_name("c8"), DType::complex64);
  EXPECT_THROW(dtype_from_name("quaternion"), TypeError);
}

TEST(DType, PromotionFollowsNumPy2) {
  // Values from numpy.result_type (NumPy 2.4).
  struct Case {
    DType a, b, want;
  };
  const Case cases[] = {
      {DType::int8, DType::uint8, DType::int16},
      {DType::int16, DType::uint16, DType::int32},
      {DType::int32, DType::uint32, DType::int64},
      {DType::int64, DType::uint64, DType::float64},
      {DType::int8, DType::uint64, DType::float64},
      {DType::uint8, DType::int64, DType::int64},
      {DType::uint8, DType::uint32, DType::uint32},
      {DType::int8, DType::float16, DType::float16},
      {DType::int16, DType::float16, DType::float32},
      {DType::int32, DType::float32, DType::float64},
      {DType::int64, DType::float32, DType::float64},
      {DType::uint16, DType::float32, DType::float32},
      {DType::float16, DType::float64, DType::float64},
      {DType::complex64, DType::float64, DType::complex128},
      {DType::complex64, DType::int32, DType::complex128},
      {DType::complex64, DType::int16, DType::complex64},
      {DType::complex64, DType::float32, DType::complex64},
      {DType::bool_, DType::int8, DType::int8},
      {DType::bool_, DType::float16, DType::float16},
      {DType::float16, DType::bfloat16, DType::float32},
      {DType::int8, DType::bfloat16, DType::bfloat16},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(promote(c.a, c.b), c.want) << dtype_name(c.a) << " + " << dtype_name(c.b);
    EXPECT_EQ(promote(c.b, c.a), c.want) << dtype_name(c.b) << " + " << dtype_name(c.a);
  }
}

TEST(DType, SameKindCasting) {
  EXPECT_FALSE(can_cast_same_kind(DType::int64, DType::uint8));  // signed to unsigned
  EXPECT_TRUE(can_cast_same_kind(DType::uint64, DType::int8));
  EXPECT_TRUE(can_cast_same_kind(DType::float64, DType::float16));
  EXPECT_FALSE(can_cast_same_kind(DType::complex128, DType::float64));
  EXPECT_FALSE(can_cast_same_kind(DType::float32, DType::int64));
  EXPECT_TRUE(can_cast_same_kind(DType::int64, DType::float16));
  EXPECT_TRUE(can_cast_safe(DType::uint8, DType::float16));
  EXPECT_FALSE(can_cast_safe(DType::int16, DType::float16));
}

TEST(DType, HalfBitsRoundTripForEveryPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    auto bits = static_cast<uint16_t>(b);
    float f = half_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(float_to_half(f), bits) << std::hex << b;
  }
}

TEST(DType, HalfRoundsToNearestEven) {
  // 2049 lies halfway between the float16 neighbours 2048 and 2050: even wins.
  EXPECT_EQ(half_to_float(double_to_half(2049.0)), 2048.0f);
  EXPECT_EQ(half_to_float(double_to_half(2051.0)), 2052.0f);
  EXPECT_EQ(half_to_float(double_to_half(65504.0)), 65504.0f);
  EXPECT_TRUE(std::isinf(half_to_float(double_to_half(65520.0))));
  EXPECT_EQ(half_to_float(double_to_half(1e-8)), 0.0f);  // below half the least subnormal
  EXPECT_EQ(half_to_float(double_to_half(6e-8)), std::ldexp(1.0f, -24));
}

TEST(DType, BFloat16KeepsTheTopBitsRounded) {
  EXPECT_EQ(bfloat_to_float(float_to_bfloat(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: rounds to the even 1.
  EXPECT_EQ(bfloat_to_float(float_to_bfloat(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bfloat_to_float(float_to_bfloat(3.0f)), 3.0f);
  EXPECT_TRUE(std::isnan(bfloat_to_float(float_to_bfloat(NAN))));
}

TEST(DType, ElementCastWrapsAndTruncatesAsNumPy) {
  EXPECT_EQ(element_cast<int8_t>(int64_t{300}), 44);
  EXPECT_EQ(element_cast<uint8_t>(int64_t{-1}), 255);
  EXPECT_EQ(element_cast<int8_t>(300.7), 44);  // truncate, then wrap
  EXPECT_EQ(element_cast<uint8_t>(-1.5), 255);
  EXPECT_EQ(element_cast<uint64_t>(1.8e19), uint64_t(18000000000000000000ull));
  EXPECT_EQ(element_cast<double>(std::complex<double>(2, 3)), 2.0);
  EXPECT_TRUE(element_cast<bool>(std::complex<float>(0, 1)));
  EXPECT_EQ(element_cast<std::complex<float>>(int8_t{-3}), std::complex<float>(-3, 0));
}

TEST(DType, ArraysOfEveryDtypeConvertAndPrint) {
  Array a = Array::full(DType::int16, {3}, 7.0);
  Array h = a.astype(DType::float16);
  EXPECT_EQ(h.dtype(), DType::float16);
  EXPECT_EQ(h.get_double(2), 7.0);
  EXPECT_EQ(Array::full(DType::float16, {2}, 0.1).str(), "[0.1 0.1]");
  EXPECT_EQ(Array::full(DType::uint64, {1}, 1.8e19).str(), "[18000000000000000000]");
  Array z = Array::full(DType::complex128, {2}, 1.5);
  EXPECT_EQ(z.str(), "[1.5+0.j 1.5+0.j]");
}

}  // namespace
}  // namespace tessera
