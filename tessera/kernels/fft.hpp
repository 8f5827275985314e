// Discrete Fourier transforms (complex128): an iterative self-sorting
// (Stockham) mixed-radix FFT with radices 4, 2, 3, 5 and small odd primes,
// and Bluestein's chirp-z algorithm for lengths with a large prime factor.
// The primitives (primitives/fft.cpp) run one transform per line of an axis.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/kernels/shape.hpp"

namespace tessera::kernels {

using cdouble = std::complex<double>;

// The precomputed factors and twiddles of complex DFTs of one length n >= 1.
class FftPlan {
 public:
  explicit FftPlan(int64_t n);
  int64_t size() const { return n_; }
  // Elements of scratch space that run() needs.
  int64_t scratch_size() const;
  // x[k] <- sum_j x[j] exp(-+2 pi i j k / n) (the sign -: forward; +:
  // inverse, unnormalized). `scratch` holds scratch_size() elements.
  void run(cdouble* x, bool inverse, cdouble* scratch) const;

 private:
  struct Stage {
    int radix;
    int64_t sub;  // length of the sub-transforms this stage combines
    std::vector<cdouble> twiddles;  // (radix - 1) per k < sub
    std::vector<cdouble> roots;     // exp(-2 pi i t / radix), generic radices
  };
  void stockham(cdouble* x, cdouble* scratch) const;
  void bluestein(cdouble* x, cdouble* scratch) const;

  int64_t n_;
  std::vector<Stage> stages_;
  // Bluestein: the chirp exp(-i pi j^2 / n), the convolution's plan (length
  // m, a power of two) and the transformed, 1/m-scaled conjugate chirp.
  std::vector<cdouble> chirp_;
  std::shared_ptr<const FftPlan> conv_plan_;
  std::vector<cdouble> conv_kernel_;
};

// The plan for length n, shared (plans are cached by length).
std::shared_ptr<const FftPlan> fft_plan(int64_t n);

// What fft_lines computes on each line of the axis.
enum class FftKind : uint8_t {
  complex_to_complex,  // length n (input truncated or zero-padded)
  real_to_complex,     // the first n / 2 + 1 outputs of the complex DFT
  complex_to_real,     // Hermitian input of n / 2 + 1 values, real output of n
};

// The DFT along `axis` of x (C-contiguous; complex128, float64 for
// real_to_complex), of length n, each output multiplied by `scale`. The
// result is complex128 (float64 for complex_to_real). Real transforms of even
// length run as complex ones of n / 2 points. `run` splits the lines into
// tiles; each line is computed alone, so the result does not depend on them.
Array fft_lines(const Array& x, int axis, int64_t n, FftKind kind, bool inverse, double scale,
                ForRange run = serial_for);

}  // namespace tessera::kernels
