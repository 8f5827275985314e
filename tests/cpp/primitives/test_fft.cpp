// Tests of the FFT kernel (kernels/fft.cpp) against a naive DFT in long
// double, and of the fft primitives (primitives/fft.cpp): lengths, kinds,
// scaling, dtypes, errors and thread counts.
#include <cmath>
#include <complex>
#include <random>

#include "tessera/core/error.hpp"
#include "tessera/kernels/fft.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using namespace tessera::test;
using kernels::cdouble;

namespace {

using cld = std::complex<long double>;

// sum_j x[j] exp(-+2 pi i j k / n), in long double with exactly reduced angles.
std::vector<cdouble> naive_dft(const std::vector<cdouble>& x, bool inverse) {
  const auto n = static_cast<int64_t>(x.size());
  const long double pi = 3.141592653589793238462643383279502884L;
  std::vector<cld> roots(n);
  for (int64_t m = 0; m < n; ++m) {
    const long double angle = 2 * pi * static_cast<long double>(m) / n;
    roots[m] = cld(std::cos(angle), inverse ? std::sin(angle) : -std::sin(angle));
  }
  std::vector<cdouble> out(n);
  for (int64_t k = 0; k < n; ++k) {
    cld sum = 0;
    for (int64_t j = 0, jk = 0; j < n; ++j, jk = (jk + k) % n) {
      const cld w = roots[jk];
      // The product written out: std::complex's operator* checks for
      // infinities through a library call.
      sum += cld(x[j].real() * w.real() - x[j].imag() * w.imag(),
                 x[j].real() * w.imag() + x[j].imag() * w.real());
    }
    out[k] = cdouble(static_cast<double>(sum.real()), static_cast<double>(sum.imag()));
  }
  return out;
}

std::vector<cdouble> random_line(int64_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist;
  std::vector<cdouble> x(n);
  for (auto& v : x) v = cdouble(dist(gen), dist(gen));
  return x;
}

// max |a - b| / max |b|
double relative_error(const cdouble* a, const std::vector<cdouble>& b) {
  double err = 0, scale = 1e-300;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

Array complex_array(const std::vector<cdouble>& v, Shape shape) {
  Array a(DType::complex128, std::move(shape));
  std::copy(v.begin(), v.end(), a.data<cdouble>());
  return a;
}

}  // namespace

TEST(FftKernel, EveryLengthMatchesNaiveDft) {
  // Powers of 2, 3, 5, their products, the generic odd radices (7 .. 31)
  // and Bluestein's lengths (37, 41, ..., 1009, 4093).
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 160; ++n) lengths.push_back(n);
  for (int64_t n : {243, 256, 625, 961, 1000, 1009, 2048, 3003, 4093, 4096}) lengths.push_back(n);
  for (int64_t n : lengths) {
    const auto plan = kernels::fft_plan(n);
    ASSERT_EQ(plan->size(), n);
    std::vector<cdouble> scratch(plan->scratch_size());
    for (bool inverse : {false, true}) {
      const std::vector<cdouble> x = random_line(n, static_cast<unsigned>(n));
      std::vector<cdouble> y = x;
      plan->run(y.data(), inverse, scratch.data());
      EXPECT_LT(relative_error(y.data(), naive_dft(x, inverse)), 1e-14)
          << "n = " << n << (inverse ? " (inverse)" : "");
    }
  }
}

TEST(FftKernel, PlansAreSharedByLength) {
  EXPECT_EQ(kernels::fft_plan(360).get(), kernels::fft_plan(360).get());
  EXPECT_NE(kernels::fft_plan(360).get(), kernels::fft_plan(361).get());
}

TEST(FftKernel, LinesAlongAnAxisWithPaddingAndKinds) {
  // A (3, 5, 2) array transformed along axis 1, zero-padded to 7 and
  // truncated to 4, each line against the naive DFT of the line.
  const std::vector<cdouble> v = random_line(30, 7);
  const Array x = complex_array(v, {3, 5, 2});
  for (int64_t n : {7, 4, 5}) {
    const Array y = kernels::fft_lines(x, 1, n, kernels::FftKind::complex_to_complex, false, 0.5);
    ASSERT_EQ(y.shape(), (Shape{3, n, 2}));
    for (int o = 0; o < 3; ++o) {
      for (int i = 0; i < 2; ++i) {
        std::vector<cdouble> line(n, cdouble(0, 0)), got(n);
        for (int64_t k = 0; k < std::min<int64_t>(n, 5); ++k) line[k] = v[(o * 5 + k) * 2 + i];
        std::vector<cdouble> expected = naive_dft(line, false);
        for (auto& e : expected) e *= 0.5;
        for (int64_t k = 0; k < n; ++k) got[k] = y.data<cdouble>()[(o * n + k) * 2 + i];
        EXPECT_LT(relative_error(got.data(), expected), 1e-14) << n;
      }
    }
  }
}

TEST(FftKernel, RealTransformsOddAndEven) {
  // Real to complex keeps n / 2 + 1 (even n through a complex DFT of n / 2
  // points); complex to real of that gives x back, and ignores the imaginary
  // parts of X[0] and X[n / 2].
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<cdouble> r = random_line(n, static_cast<unsigned>(3 * n));
    Array real(DType::float64, {n});
    for (int64_t j = 0; j < n; ++j) r[j] = cdouble(r[j].real(), 0.0), real.data<double>()[j] = r[j].real();
    const int64_t h = n / 2 + 1;
    const Array half = kernels::fft_lines(real, 0, n, kernels::FftKind::real_to_complex, false, 1.0);
    ASSERT_EQ(half.shape(), (Shape{h}));
    const std::vector<cdouble> full = naive_dft(r, false);
    EXPECT_LT(relative_error(half.data<cdouble>(), std::vector<cdouble>(full.begin(), full.begin() + h)),
              1e-14) << n;
    Array spectrum = half.copy();
    spectrum.data<cdouble>()[0] += cdouble(0.0, 5.0);
    if (n % 2 == 0) spectrum.data<cdouble>()[h - 1] += cdouble(0.0, -3.0);
    const Array back = kernels::fft_lines(spectrum, 0, n, kernels::FftKind::complex_to_real, true,
                                          1.0 / static_cast<double>(n));
    ASSERT_EQ(back.dtype(), DType::float64);
    for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(back.data<double>()[j], r[j].real(), 1e-14) << n;
  }
}

TEST(FftPrimitive, DtypesAndNorms) {
  const Value y32 = call("fft", {f32({1, 2, 3, 4})});
  ASSERT_TRUE(y32.is_array());
  EXPECT_EQ(y32.as_array().dtype(), DType::complex64);
  const Value y = call("fft", {i64({1, 2, 3, 4})});
  EXPECT_EQ(y.as_array().dtype(), DType::complex128);
  EXPECT_EQ(y.as_array().get_complex(0), cdouble(10, 0));
  EXPECT_EQ(y.as_array().get_complex(1), cdouble(-2, 2));
  const Value ortho = named("fft", i64({1, 2, 3, 4}), {{"norm", Value(std::string("ortho"))}});
  EXPECT_NEAR(ortho.as_array().get_complex(0).real(), 5.0, 1e-15);
  // irfft of rfft([1, 2, 3, 4]) = [10, -2 + 2j, -2].
  const Array spectrum = complex_array({{10, 0}, {-2, 2}, {-2, 0}}, {3});
  const Value inv = named("irfft", Value(spectrum), {{"n", Value(int64_t{4})}});
  EXPECT_TRUE(array_eq(inv, DType::float64, {4}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(named("fftfreq", Value(int64_t{5}), {{"d", Value(0.5)}}), DType::float64,
                       {5}, {0, 0.4, 0.8, -0.8, -0.4}));
  EXPECT_TRUE(array_eq(call("fftshift", {i64({0, 1, 2, 3, 4})}), DType::int64, {5},
                       {3, 4, 0, 1, 2}));
  EXPECT_TRUE(array_eq(call("ifftshift", {i64({3, 4, 0, 1, 2})}), DType::int64, {5},
                       {0, 1, 2, 3, 4}));
}

TEST(FftPrimitive, Errors) {
  EXPECT_THROW(named("fft", f64({1, 2}), {{"n", Value(int64_t{0})}}), std::invalid_argument);
  EXPECT_THROW(named("fft", f64({1, 2}), {{"norm", Value(std::string("bad"))}}),
               std::invalid_argument);
  EXPECT_THROW(named("fft", f64({1, 2}), {{"axis", Value(int64_t{1})}}), std::out_of_range);
  EXPECT_THROW(named("fft", f64({1, 2}), {{"n", Value(2.0)}}), TypeError);
  EXPECT_THROW(call("rfft", {call("fft", {f64({1, 2})})}), TypeError);
  EXPECT_THROW(call("irfft", {f64({1}, {1})}), std::invalid_argument);
  try {
    named("ifft", f64({1, 2}), {{"n", Value(int64_t{-3})}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "[ifft] Invalid number of FFT data points (-3) specified.");
  }
}

class FftThreads : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { set_num_threads(GetParam()); }
  void TearDown() override { set_num_threads(2); }
};

TEST_P(FftThreads, SameBitsForAnyThreadCount) {
  // Many lines (tiled across workers): the bits of one thread's result.
  const std::vector<cdouble> v = random_line(200 * 96, 11);
  const Array x = complex_array(v, {200, 96});
  const Array serial = kernels::fft_lines(x, 1, 96, kernels::FftKind::complex_to_complex, false,
                                          1.0);
  const Value got = named("fft2", Value(x), {});
  // Odd real lengths go two lines at a time: the same pairs for any tiling.
  const Array real = call("real", {Value(x)}).as_array().contiguous();
  const Array odd = named("rfft", Value(real), {{"n", Value(int64_t{95})}}).as_array();
  const Array odd_serial = kernels::fft_lines(real, 1, 95, kernels::FftKind::real_to_complex,
                                              false, 1.0);
  for (int64_t i = 0; i < odd.size(); ++i) {
    ASSERT_EQ(odd.data<cdouble>()[i], odd_serial.data<cdouble>()[i]) << i;
  }
  const Array rows = call("fft", {Value(x)}).as_array();
  ASSERT_EQ(rows.shape(), serial.shape());
  for (int64_t i = 0; i < serial.size(); ++i) {
    ASSERT_EQ(rows.data<cdouble>()[i], serial.data<cdouble>()[i]) << i;
  }
  const Array cols = kernels::fft_lines(serial, 0, 200, kernels::FftKind::complex_to_complex,
                                        false, 1.0);
  for (int64_t i = 0; i < cols.size(); ++i) {
    ASSERT_EQ(got.as_array().data<cdouble>()[i], cols.data<cdouble>()[i]) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, FftThreads, ::testing::Values(1, 2, 4));

TEST(FftKernel, OddRealLinesInPairsMatchSingleLines) {
  // Odd real lengths transform two lines in one complex DFT: rows and
  // columns (odd and even line counts) against each line transformed alone.
  for (int64_t n : {1, 3, 7, 37}) {
    for (int64_t count : {1, 2, 5, 10}) {
      std::vector<cdouble> v = random_line(n * count, static_cast<unsigned>(n + count));
      Array rows(DType::float64, {count, n}), cols(DType::float64, {n, count});
      for (int64_t l = 0; l < count; ++l) {
        for (int64_t j = 0; j < n; ++j) {
          rows.data<double>()[l * n + j] = cols.data<double>()[j * count + l] = v[l * n + j].real();
        }
      }
      using kernels::FftKind;
      const int64_t h = n / 2 + 1;
      const Array fr = kernels::fft_lines(rows, 1, n, FftKind::real_to_complex, false, 1.0);
      const Array fc = kernels::fft_lines(cols, 0, n, FftKind::real_to_complex, false, 1.0);
      const Array br = kernels::fft_lines(fr, 1, n, FftKind::complex_to_real, true, 1.0 / n);
      const Array bc = kernels::fft_lines(fc, 0, n, FftKind::complex_to_real, true, 1.0 / n);
      for (int64_t l = 0; l < count; ++l) {
        std::vector<cdouble> line(n);
        for (int64_t j = 0; j < n; ++j) line[j] = cdouble(v[l * n + j].real(), 0.0);
        const std::vector<cdouble> full = naive_dft(line, false);
        for (int64_t k = 0; k < h; ++k) {
          EXPECT_LT(std::abs(fr.data<cdouble>()[l * h + k] - full[k]), 1e-13) << n << " " << l;
          EXPECT_LT(std::abs(fc.data<cdouble>()[k * count + l] - full[k]), 1e-13) << n << " " << l;
        }
        for (int64_t j = 0; j < n; ++j) {
          EXPECT_NEAR(br.data<double>()[l * n + j], line[j].real(), 1e-13);
          EXPECT_NEAR(bc.data<double>()[j * count + l], line[j].real(), 1e-13);
        }
      }
    }
  }
}
