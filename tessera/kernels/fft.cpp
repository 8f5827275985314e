// Complex DFTs: Stockham mixed radix and Bluestein (fft.hpp).
//
// Stage s of the self-sorting FFT combines radix p sub-transforms of length
// `sub` (the product of the earlier radices) into transforms of length
// L = sub * p. Before it, the DFT of length sub of the decimated sequence j
// (x[j], x[j + S], x[j + 2S], ..., S = n / sub) is stored at k * S + j; the
// Cooley-Tukey step
//   Z_j'[k + sub * t] = sum_q exp(-2 pi i q k / L) Y_{j' + r q}[k] exp(-2 pi i q t / p)
// (r = n / L) writes its result at (k + sub * t) * r + j', the same layout for
// the next stage, so that after the last (sub * p = n, r = 1) the DFT is in
// natural order without a bit-reversal pass. Reads and writes run over j' at
// unit stride.
#include "tessera/kernels/fft.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace tessera::kernels {

namespace {

constexpr double kPi = 3.141592653589793238462643383279502884;
// The largest prime factor done by a generic butterfly; lengths with a larger
// one go through Bluestein's algorithm.
constexpr int kMaxGenericRadix = 31;

// Plain complex product: std::complex's operator* checks for NaN and
// infinities through a library call on every product.
inline cdouble mul(cdouble a, cdouble b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}
// -i * z
inline cdouble minus_i(cdouble z) { return {z.imag(), -z.real()}; }

// exp(-2 pi i num / den) with num reduced modulo den first, so that large
// arguments lose no accuracy.
cdouble unit_root(int64_t num, int64_t den) {
  num %= den;
  if (num < 0) num += den;
  const double angle = 2.0 * kPi * static_cast<double>(num) / static_cast<double>(den);
  return {std::cos(angle), -std::sin(angle)};
}

void conjugate(cdouble* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::conj(x[i]);
}

}  // namespace

FftPlan::FftPlan(int64_t n) : n_(n) {
  std::vector<int> radices;
  int64_t rest = n;
  while (rest % 4 == 0) radices.push_back(4), rest /= 4;
  while (rest % 2 == 0) radices.push_back(2), rest /= 2;
  for (int p = 3; p <= kMaxGenericRadix && rest > 1; p += 2) {
    while (rest % p == 0) radices.push_back(p), rest /= p;
  }
  if (rest > 1) {
    // Bluestein: x[j] exp(-i pi j^2 / n) convolved with the conjugate chirp,
    // cyclically over m >= 2n - 1 points.
    int64_t m = 1;
    while (m < 2 * n - 1) m *= 2;
    chirp_.resize(n);
    for (int64_t j = 0; j < n; ++j) {
      const auto j2 = static_cast<unsigned __int128>(j) * static_cast<unsigned __int128>(j);
      chirp_[j] = unit_root(static_cast<int64_t>(j2 % static_cast<unsigned __int128>(2 * n)), 2 * n);
    }
    conv_plan_ = fft_plan(m);
    conv_kernel_.assign(m, cdouble(0.0, 0.0));
    conv_kernel_[0] = std::conj(chirp_[0]);
    for (int64_t j = 1; j < n; ++j) conv_kernel_[j] = conv_kernel_[m - j] = std::conj(chirp_[j]);
    std::vector<cdouble> scratch(conv_plan_->scratch_size());
    conv_plan_->run(conv_kernel_.data(), false, scratch.data());
    const double inv_m = 1.0 / static_cast<double>(m);
    for (auto& v : conv_kernel_) v *= inv_m;
    return;
  }
  int64_t sub = 1;
  for (int p : radices) {
    Stage st{p, sub, {}, {}};
    const int64_t len = sub * p;
    st.twiddles.resize(static_cast<size_t>(sub) * (p - 1));
    for (int64_t k = 0; k < sub; ++k) {
      for (int q = 1; q < p; ++q) st.twiddles[k * (p - 1) + q - 1] = unit_root(q * k, len);
    }
    if (p > 5) {
      st.roots.resize(p);
      for (int t = 0; t < p; ++t) st.roots[t] = unit_root(t, p);
    }
    stages_.push_back(std::move(st));
    sub = len;
  }
}

int64_t FftPlan::scratch_size() const {
  return conv_plan_ ? 2 * conv_plan_->size() : n_;
}

void FftPlan::run(cdouble* x, bool inverse, cdouble* scratch) const {
  if (n_ <= 1) return;
  // The inverse transform is conj(DFT(conj(x))).
  if (inverse) conjugate(x, n_);
  if (conv_plan_) {
    bluestein(x, scratch);
  } else {
    stockham(x, scratch);
  }
  if (inverse) conjugate(x, n_);
}

namespace {

// One radix-P butterfly: inputs in[q * r] (q < P), multiplied by the
// twiddles w[q - 1] unless Twiddled is false (k = 0, where they are 1), and
// outputs out[t * os] = sum_q a_q exp(-2 pi i q t / P).
template <int P, bool Twiddled>
inline void butterfly(const cdouble* in, int64_t r, const cdouble* w, cdouble* out, int64_t os) {
  cdouble a[P];
  a[0] = in[0];
  for (int q = 1; q < P; ++q) a[q] = Twiddled ? mul(in[q * r], w[q - 1]) : in[q * r];
  if constexpr (P == 2) {
    out[0] = a[0] + a[1];
    out[os] = a[0] - a[1];
  } else if constexpr (P == 3) {
    constexpr double s3 = 0.86602540378443864676372317075293618;  // sqrt(3) / 2
    const cdouble sum = a[1] + a[2], t = a[0] - 0.5 * sum, d = minus_i(a[1] - a[2]) * s3;
    out[0] = a[0] + sum;
    out[os] = t + d;
    out[2 * os] = t - d;
  } else if constexpr (P == 4) {
    const cdouble s02 = a[0] + a[2], d02 = a[0] - a[2], s13 = a[1] + a[3];
    const cdouble d13 = minus_i(a[1] - a[3]);
    out[0] = s02 + s13;
    out[os] = d02 + d13;
    out[2 * os] = s02 - s13;
    out[3 * os] = d02 - d13;
  } else {
    static_assert(P == 5);
    // cos and sin of 2 pi / 5 and 4 pi / 5.
    constexpr double c1 = 0.30901699437494742410229341718281906;
    constexpr double c2 = -0.80901699437494742410229341718281906;
    constexpr double s1 = 0.95105651629515357211643933337938214;
    constexpr double s2 = 0.58778525229247312916870595463907277;
    const cdouble b1 = a[1] + a[4], b2 = a[2] + a[3], d1 = a[1] - a[4], d2 = a[2] - a[3];
    const cdouble e1 = a[0] + c1 * b1 + c2 * b2, f1 = minus_i(s1 * d1 + s2 * d2);
    const cdouble e2 = a[0] + c2 * b1 + c1 * b2, f2 = minus_i(s2 * d1 - s1 * d2);
    out[0] = a[0] + b1 + b2;
    out[os] = e1 + f1;
    out[4 * os] = e1 - f1;
    out[2 * os] = e2 + f2;
    out[3 * os] = e2 - f2;
  }
}

// One stage of a fixed radix: the sub * r butterflies, the twiddle-free
// k = 0 apart; the longer of the two loops (over j when r is large, over k
// in the last stages, where r is small) innermost.
template <int P>
void radix_stage(const cdouble* src, cdouble* dst, const cdouble* tw, int64_t sub, int64_t r) {
  const int64_t in_stride = r * P, out_stride = sub * r;
  for (int64_t j = 0; j < r; ++j) butterfly<P, false>(src + j, r, nullptr, dst + j, out_stride);
  if (r >= sub) {
    for (int64_t k = 1; k < sub; ++k) {
      const cdouble* w = tw + k * (P - 1);
      for (int64_t j = 0; j < r; ++j) {
        butterfly<P, true>(src + k * in_stride + j, r, w, dst + k * r + j, out_stride);
      }
    }
  } else {
    for (int64_t j = 0; j < r; ++j) {
      for (int64_t k = 1; k < sub; ++k) {
        butterfly<P, true>(src + k * in_stride + j, r, tw + k * (P - 1), dst + k * r + j,
                           out_stride);
      }
    }
  }
}

}  // namespace

void FftPlan::stockham(cdouble* x, cdouble* scratch) const {
  cdouble* src = x;
  cdouble* dst = scratch;
  for (const Stage& st : stages_) {
    const int p = st.radix;
    const int64_t sub = st.sub, r = n_ / (sub * p);
    const cdouble* tw = st.twiddles.data();
    switch (p) {
      case 2:
        radix_stage<2>(src, dst, tw, sub, r);
        break;
      case 3:
        radix_stage<3>(src, dst, tw, sub, r);
        break;
      case 4:
        radix_stage<4>(src, dst, tw, sub, r);
        break;
      case 5:
        radix_stage<5>(src, dst, tw, sub, r);
        break;
      default: {
        // Odd primes 7 .. 31: the DFT of the P values by their roots.
        const int64_t in_stride = r * p, out_stride = sub * r;
        cdouble a[kMaxGenericRadix];
        for (int64_t k = 0; k < sub; ++k) {
          const cdouble* w = tw + k * (p - 1);
          for (int64_t j = 0; j < r; ++j) {
            const cdouble* in = src + k * in_stride + j;
            cdouble* out = dst + k * r + j;
            a[0] = in[0];
            for (int q = 1; q < p; ++q) a[q] = mul(in[q * r], w[q - 1]);
            for (int t = 0; t < p; ++t) {
              cdouble y = a[0];
              for (int q = 1, qt = t; q < p; ++q, qt = (qt + t) % p) y += mul(a[q], st.roots[qt]);
              out[t * out_stride] = y;
            }
          }
        }
      }
    }
    std::swap(src, dst);
  }
  if (src != x) std::copy(src, src + n_, x);
}

void FftPlan::bluestein(cdouble* x, cdouble* scratch) const {
  const int64_t m = conv_plan_->size();
  cdouble* a = scratch;
  for (int64_t j = 0; j < n_; ++j) a[j] = mul(x[j], chirp_[j]);
  std::fill(a + n_, a + m, cdouble(0.0, 0.0));
  conv_plan_->run(a, false, scratch + m);
  for (int64_t j = 0; j < m; ++j) a[j] = mul(a[j], conv_kernel_[j]);
  conv_plan_->run(a, true, scratch + m);
  for (int64_t k = 0; k < n_; ++k) x[k] = mul(a[k], chirp_[k]);
}

namespace {

// A cache of immutable objects by length, bounded so that a program that
// transforms many lengths keeps memory bounded.
template <class T>
std::shared_ptr<const T> cached(int64_t n) {
  static std::mutex mutex;
  static std::unordered_map<int64_t, std::shared_ptr<const T>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(n);
    if (it != cache.end()) return it->second;
  }
  // Built outside the lock: a Bluestein plan asks for its convolution's plan.
  auto made = std::make_shared<const T>(n);
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() >= 64) cache.clear();
  return cache.emplace(n, std::move(made)).first->second;
}

// A real DFT of even length n as a complex DFT of n / 2 points: z[j] =
// x[2j] + i x[2j + 1] has the DFT Z = E + i O, E and O the DFTs of the even
// and odd samples; since these are real, E[k] = (Z[k] + conj Z[m - k]) / 2 and
// O[k] = (Z[k] - conj Z[m - k]) / 2i, and X[k] = E[k] + exp(-2 pi i k / n) O[k].
struct RealPlan {
  explicit RealPlan(int64_t n) : half(fft_plan(n / 2)), twiddles(n / 2 + 1) {
    for (int64_t k = 0; k <= n / 2; ++k) twiddles[k] = unit_root(k, n);
  }
  std::shared_ptr<const FftPlan> half;
  std::vector<cdouble> twiddles;  // exp(-2 pi i k / n), k <= n / 2
};

}  // namespace

std::shared_ptr<const FftPlan> fft_plan(int64_t n) { return cached<FftPlan>(n); }

namespace {

// One line's transform: `take` input values at src[k * in_stride] (double
// for real_to_complex, else cdouble), the outputs at dst[k * out_stride].
struct LineTransform {
  int64_t n;
  FftKind kind;
  bool inverse;
  double scale;
  const FftPlan* plan;        // of n points, or of n / 2 when real_plan is set
  const RealPlan* real_plan;  // real transforms of even length

  void operator()(const void* src_raw, int64_t take, int64_t in_stride, void* dst_raw,
                  int64_t out_stride, cdouble* buf) const {
    cdouble* scratch = buf + n;
    const int64_t m = plan->size();
    if (kind == FftKind::real_to_complex) {
      const auto* src = static_cast<const double*>(src_raw);
      auto* dst = static_cast<cdouble*>(dst_raw);
      auto sample = [&](int64_t j) { return j < take ? src[j * in_stride] : 0.0; };
      if (real_plan) {
        for (int64_t j = 0; j < m; ++j) buf[j] = cdouble(sample(2 * j), sample(2 * j + 1));
        plan->run(buf, false, scratch);
        const cdouble* w = real_plan->twiddles.data();
        for (int64_t k = 0; k <= m; ++k) {
          const cdouble zk = buf[k % m], zc = std::conj(buf[(m - k) % m]);
          const cdouble even = 0.5 * (zk + zc), odd = minus_i(0.5 * (zk - zc));
          dst[k * out_stride] = (even + mul(w[k], odd)) * scale;
        }
      } else {
        for (int64_t j = 0; j < n; ++j) buf[j] = cdouble(sample(j), 0.0);
        plan->run(buf, false, scratch);
        for (int64_t k = 0; k <= n / 2; ++k) dst[k * out_stride] = buf[k] * scale;
      }
      return;
    }
    const auto* src = static_cast<const cdouble*>(src_raw);
    if (kind == FftKind::complex_to_complex) {
      auto* dst = static_cast<cdouble*>(dst_raw);
      for (int64_t k = 0; k < take; ++k) buf[k] = src[k * in_stride];
      std::fill(buf + take, buf + n, cdouble(0.0, 0.0));
      plan->run(buf, inverse, scratch);
      for (int64_t k = 0; k < n; ++k) dst[k * out_stride] = buf[k] * scale;
      return;
    }
    // Complex to real: the input is the half k <= n / 2 of a Hermitian
    // spectrum; the imaginary parts of X[0] (and X[n / 2], n even) do not
    // count, as in NumPy.
    auto* dst = static_cast<double*>(dst_raw);
    auto coef = [&](int64_t k) { return k < take ? src[k * in_stride] : cdouble(0.0, 0.0); };
    if (real_plan) {
      const cdouble* w = real_plan->twiddles.data();
      for (int64_t k = 0; k < m; ++k) {
        cdouble xk = coef(k), xc = std::conj(coef(m - k));
        if (k == 0) xk = cdouble(xk.real(), 0.0), xc = cdouble(xc.real(), 0.0);
        const cdouble even = 0.5 * (xk + xc), odd = 0.5 * mul(xk - xc, std::conj(w[k]));
        buf[k] = even + cdouble(-odd.imag(), odd.real());
      }
      plan->run(buf, true, scratch);
      const double twice = 2.0 * scale;
      for (int64_t j = 0; j < m; ++j) {
        dst[(2 * j) * out_stride] = buf[j].real() * twice;
        dst[(2 * j + 1) * out_stride] = buf[j].imag() * twice;
      }
    } else {
      const int64_t half = n / 2 + 1;
      for (int64_t k = 0; k < half; ++k) buf[k] = coef(k);
      buf[0] = cdouble(buf[0].real(), 0.0);
      for (int64_t k = half; k < n; ++k) buf[k] = std::conj(buf[n - k]);
      plan->run(buf, true, scratch);
      for (int64_t k = 0; k < n; ++k) dst[k * out_stride] = buf[k].real() * scale;
    }
  }
};

// Two real lines of odd length in one complex transform: z = x1 + i x2 has
// the DFT Z = X1 + i X2, and X1, X2 are Hermitian, so X1[k] = (Z[k] +
// conj Z[n - k]) / 2 and X2[k] = (Z[k] - conj Z[n - k]) / 2i; the inverse of
// X1 + i X2 is x1 + i x2. (Even lengths take the half-length path.)
struct LinePair {
  const LineTransform& one;

  bool applies() const { return one.kind != FftKind::complex_to_complex && !one.real_plan; }

  void operator()(const void* src1_raw, const void* src2_raw, int64_t take, int64_t in_stride,
                  void* dst1_raw, void* dst2_raw, int64_t out_stride, cdouble* buf) const {
    const int64_t n = one.n;
    cdouble* scratch = buf + n;
    if (one.kind == FftKind::real_to_complex) {
      const auto* a = static_cast<const double*>(src1_raw);
      const auto* b = static_cast<const double*>(src2_raw);
      for (int64_t j = 0; j < take; ++j) buf[j] = cdouble(a[j * in_stride], b[j * in_stride]);
      std::fill(buf + take, buf + n, cdouble(0.0, 0.0));
      one.plan->run(buf, false, scratch);
      auto* d1 = static_cast<cdouble*>(dst1_raw);
      auto* d2 = static_cast<cdouble*>(dst2_raw);
      const double half_scale = 0.5 * one.scale;
      for (int64_t k = 0; k <= n / 2; ++k) {
        const cdouble zk = buf[k], zc = std::conj(buf[(n - k) % n]);
        d1[k * out_stride] = (zk + zc) * half_scale;
        d2[k * out_stride] = minus_i(zk - zc) * half_scale;
      }
      return;
    }
    const auto* a = static_cast<const cdouble*>(src1_raw);
    const auto* b = static_cast<const cdouble*>(src2_raw);
    const int64_t half = n / 2 + 1;
    for (int64_t k = 0; k < half; ++k) {
      cdouble x1 = k < take ? a[k * in_stride] : cdouble(0.0, 0.0);
      cdouble x2 = k < take ? b[k * in_stride] : cdouble(0.0, 0.0);
      if (k == 0) x1 = cdouble(x1.real(), 0.0), x2 = cdouble(x2.real(), 0.0);
      buf[k] = x1 + cdouble(-x2.imag(), x2.real());
      // X[n - k] = conj X[k] for each line, so that entry is conj x1 + i conj x2.
      if (k > 0 && n - k >= half) buf[n - k] = std::conj(x1) + cdouble(x2.imag(), x2.real());
    }
    one.plan->run(buf, true, scratch);
    auto* d1 = static_cast<double*>(dst1_raw);
    auto* d2 = static_cast<double*>(dst2_raw);
    for (int64_t k = 0; k < n; ++k) {
      d1[k * out_stride] = buf[k].real() * one.scale;
      d2[k * out_stride] = buf[k].imag() * one.scale;
    }
  }
};

// Lines along an inner axis are `inner` elements apart: they are gathered a
// block of kBlock neighbours at a time (contiguous runs of memory), each
// transformed from the block, and the block's results written back as runs.
constexpr int64_t kBlock = 8;

}  // namespace

Array fft_lines(const Array& x, int axis, int64_t n, FftKind kind, bool inverse, double scale,
                ForRange run) {
  const Shape& shape = x.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < x.ndim(); ++d) inner *= shape[d];
  const int64_t len = shape[axis];
  const int64_t out_len = kind == FftKind::real_to_complex ? n / 2 + 1 : n;
  Shape out_shape = shape;
  out_shape[axis] = out_len;
  Array out(kind == FftKind::complex_to_real ? DType::float64 : DType::complex128, out_shape);
  if (out.size() == 0) return out;
  // Real transforms of even length go through a complex one of n / 2 points.
  const bool halved = kind != FftKind::complex_to_complex && n % 2 == 0;
  const std::shared_ptr<const RealPlan> real_plan = halved ? cached<RealPlan>(n) : nullptr;
  const std::shared_ptr<const FftPlan> plan = halved ? real_plan->half : fft_plan(n);
  const LineTransform transform{n, kind, inverse, scale, plan.get(), real_plan.get()};
  const LinePair pair{transform};
  const size_t in_size = kind == FftKind::real_to_complex ? sizeof(double) : sizeof(cdouble);
  const size_t out_size = kind == FftKind::complex_to_real ? sizeof(double) : sizeof(cdouble);
  const int64_t take = std::min(len, kind == FftKind::complex_to_real ? n / 2 + 1 : n);
  const auto* in = static_cast<const char*>(x.raw());
  auto* dst_all = static_cast<char*>(out.raw());
  const int64_t m = plan->size();
  const double line_ns = 6.0 * static_cast<double>(m) * std::log2(static_cast<double>(m) + 1.0);
  const int64_t block = std::min(inner, kBlock);
  const int64_t blocks_per_outer = (inner + block - 1) / block;
  if (block == 1 && pair.applies() && outer > 1) {
    // Rows 2p and 2p + 1 always go together (whatever the tiles), so the
    // bits do not depend on the thread count.
    run((outer + 1) / 2, 2.0 * line_ns, [&](int64_t begin, int64_t end) {
      std::vector<cdouble> buf(n + plan->scratch_size());
      for (int64_t p = begin; p < end; ++p) {
        const char* src = in + 2 * p * len * in_size;
        char* dst = dst_all + 2 * p * out_len * out_size;
        if (2 * p + 1 < outer) {
          pair(src, src + len * in_size, take, 1, dst, dst + out_len * out_size, 1, buf.data());
        } else {
          transform(src, take, 1, dst, 1, buf.data());
        }
      }
    });
    return out;
  }
  run(outer * blocks_per_outer, line_ns * static_cast<double>(block), [&](int64_t begin,
                                                                         int64_t end) {
    std::vector<cdouble> buf(n + plan->scratch_size());
    std::vector<cdouble> in_block, out_block;
    if (block > 1) {
      in_block.resize(static_cast<size_t>(take * block));
      out_block.resize(static_cast<size_t>(out_len * block));
    }
    for (int64_t bl = begin; bl < end; ++bl) {
      const int64_t o = bl / blocks_per_outer, i0 = (bl % blocks_per_outer) * block;
      const int64_t width = std::min(block, inner - i0);
      const char* src = in + (o * len * inner + i0) * in_size;
      char* dst = dst_all + (o * out_len * inner + i0) * out_size;
      if (block == 1) {
        transform(src, take, 1, dst, 1, buf.data());
        continue;
      }
      auto* ib = reinterpret_cast<char*>(in_block.data());
      auto* ob = reinterpret_cast<char*>(out_block.data());
      for (int64_t k = 0; k < take; ++k) {
        std::memcpy(ib + k * block * in_size, src + k * inner * in_size, width * in_size);
      }
      for (int64_t b = 0; b < width; ++b) {
        if (pair.applies() && b + 1 < width) {
          pair(ib + b * in_size, ib + (b + 1) * in_size, take, block, ob + b * out_size,
               ob + (b + 1) * out_size, block, buf.data());
          ++b;
        } else {
          transform(ib + b * in_size, take, block, ob + b * out_size, block, buf.data());
        }
      }
      for (int64_t k = 0; k < out_len; ++k) {
        std::memcpy(dst + k * inner * out_size, ob + k * block * out_size, width * out_size);
      }
    }
  });
  return out;
}

}  // namespace tessera::kernels
