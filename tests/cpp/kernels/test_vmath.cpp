// vmath: libmvec's vector functions against the scalar std:: functions
// (within a few ulp, special values the same), for every tail length, in
// place, and with an element's bits independent of its position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tessera/kernels/vmath.hpp"

namespace {

using tessera::kernels::VecFn;
using tessera::kernels::vmath;

struct VmathCase {
  VecFn f;
  double (*ref)(double);
  double lo, hi;  // the range of the random arguments
  const char* name;
};

const VmathCase kVmathCases[] = {
    {VecFn::exp, [](double v) { return std::exp(v); }, -80, 80, "exp"},
    {VecFn::exp2, [](double v) { return std::exp2(v); }, -120, 120, "exp2"},
    {VecFn::expm1, [](double v) { return std::expm1(v); }, -5, 5, "expm1"},
    {VecFn::log, [](double v) { return std::log(v); }, 1e-30, 1e30, "log"},
    {VecFn::log2, [](double v) { return std::log2(v); }, 1e-30, 1e30, "log2"},
    {VecFn::log10, [](double v) { return std::log10(v); }, 1e-30, 1e30, "log10"},
    {VecFn::log1p, [](double v) { return std::log1p(v); }, -0.9, 10, "log1p"},
    {VecFn::sin, [](double v) { return std::sin(v); }, -100, 100, "sin"},
    {VecFn::cos, [](double v) { return std::cos(v); }, -100, 100, "cos"},
    {VecFn::tan, [](double v) { return std::tan(v); }, -1.5, 1.5, "tan"},
    {VecFn::asin, [](double v) { return std::asin(v); }, -1, 1, "asin"},
    {VecFn::acos, [](double v) { return std::acos(v); }, -1, 1, "acos"},
    {VecFn::atan, [](double v) { return std::atan(v); }, -50, 50, "atan"},
    {VecFn::sinh, [](double v) { return std::sinh(v); }, -20, 20, "sinh"},
    {VecFn::cosh, [](double v) { return std::cosh(v); }, -20, 20, "cosh"},
    {VecFn::tanh, [](double v) { return std::tanh(v); }, -10, 10, "tanh"},
    {VecFn::asinh, [](double v) { return std::asinh(v); }, -50, 50, "asinh"},
    {VecFn::acosh, [](double v) { return std::acosh(v); }, 1, 50, "acosh"},
    {VecFn::atanh, [](double v) { return std::atanh(v); }, -0.99, 0.99, "atanh"},
    {VecFn::erf, [](double v) { return std::erf(v); }, -4, 4, "erf"},
};

// Distance in units of the last place of T between a and the reference r.
template <class T>
double ulps(T a, double r) {
  if (std::isnan(r)) return std::isnan(a) ? 0 : 1e9;
  if (std::isinf(r)) return a == static_cast<T>(r) ? 0 : 1e9;
  const T rt = static_cast<T>(r);
  const double ulp = std::max(
      static_cast<double>(std::nextafter(std::fabs(rt), std::numeric_limits<T>::infinity()) -
                          std::fabs(rt)),
      static_cast<double>(std::numeric_limits<T>::denorm_min()));
  return std::fabs(static_cast<double>(a) - r) / ulp;
}

template <class T>
void vmath_check_accuracy(const VmathCase& c) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(c.lo, c.hi);
  std::vector<T> x(1000);
  for (auto& v : x)
    v = static_cast<T>(c.lo > 0 ? std::exp(std::uniform_real_distribution<double>(
                                      std::log(c.lo), std::log(c.hi))(rng))
                                : u(rng));
  std::vector<T> y(x.size());
  vmath(c.f, x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, ulps<T>(y[i], c.ref(static_cast<double>(x[i]))));
  EXPECT_LE(worst, 4.0) << c.name << (sizeof(T) == 4 ? " float32" : " float64");
}

TEST(Vmath, WithinFourUlpOfTheCorrectResult) {
  for (const VmathCase& c : kVmathCases) {
    vmath_check_accuracy<float>(c);
    vmath_check_accuracy<double>(c);
  }
}

template <class T>
void vmath_check_special(const VmathCase& c) {
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> x = {T(0), -T(0), inf, -inf, std::numeric_limits<T>::quiet_NaN(),
                            T(1), T(-1), T(2)};
  std::vector<T> y(x.size());
  vmath(c.f, x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const T want = static_cast<T>(c.ref(static_cast<double>(x[i])));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << c.name << "(" << x[i] << ") = " << y[i];
    } else if (std::isinf(want) || want == 0) {
      EXPECT_EQ(y[i], want) << c.name << "(" << x[i] << ")";
      EXPECT_EQ(std::signbit(y[i]), std::signbit(want)) << c.name << "(" << x[i] << ")";
    } else {
      EXPECT_LE(ulps<T>(y[i], c.ref(static_cast<double>(x[i]))), 4.0)
          << c.name << "(" << x[i] << ")";
    }
  }
}

TEST(Vmath, SpecialValuesAsTheScalarFunctions) {
  for (const VmathCase& c : kVmathCases) {
    vmath_check_special<float>(c);
    vmath_check_special<double>(c);
  }
}

// exp of arguments far below its range (masked attention scores, -1e9) is
// exactly +0, as std::exp gives; subnormal results stay within 4 ulp; and the
// ordinary arguments sharing a vector with them keep their bits.
template <class T>
void check_exp_underflow() {
  const T inf = std::numeric_limits<T>::infinity();
  const bool f32 = sizeof(T) == 4;
  const std::vector<T> low = {T(-1e9), -inf, T(f32 ? -104.0 : -746.0),
                              T(f32 ? -104.5 : -746.5), T(f32 ? -103.9 : -745.1),
                              T(f32 ? -95.0 : -740.0), T(f32 ? -88.0 : -709.0)};
  std::vector<T> x, ordinary;
  for (size_t i = 0; i < 40; ++i) {
    const T v = T(0.37) * static_cast<T>(i) - T(7);
    ordinary.push_back(v);
    x.push_back(v);
    x.push_back(low[i % low.size()]);
  }
  std::vector<T> y(x.size()), alone(ordinary.size());
  vmath(VecFn::exp, x.data(), y.data(), static_cast<int64_t>(x.size()));
  vmath(VecFn::exp, ordinary.data(), alone.data(), static_cast<int64_t>(ordinary.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    if (i % 2 == 0) {
      EXPECT_EQ(y[i], alone[i / 2]) << "exp(" << x[i] << ") next to a low argument";
    } else if (static_cast<T>(want) == T(0)) {
      EXPECT_EQ(y[i], T(0)) << "exp(" << x[i] << ")";
      EXPECT_FALSE(std::signbit(y[i])) << "exp(" << x[i] << ")";
    } else {
      EXPECT_LE(ulps<T>(y[i], want), 4.0) << "exp(" << x[i] << ")";
    }
  }
}

TEST(Vmath, ExpOfFarNegativeArgumentsIsZero) {
  check_exp_underflow<float>();
  check_exp_underflow<double>();
}

// Any length (the last partial vector padded), in place, and the same bits
// for an element wherever it lies and however many come with it.
TEST(Vmath, TailsInPlaceAndPositionIndependentBits) {
  std::vector<float> x(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i) - 7.0f;
  std::vector<float> whole(x.size());
  vmath(VecFn::tanh, x.data(), whole.data(), static_cast<int64_t>(x.size()));
  for (int64_t start = 0; start < 9; ++start) {
    for (int64_t n = 0; start + n <= 40; ++n) {
      std::vector<float> part(x.begin() + start, x.begin() + start + n);
      vmath(VecFn::tanh, part.data(), part.data(), n);  // in place
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(part[i], whole[start + i]) << start << " " << n << " " << i;
    }
  }
}

}  // namespace
