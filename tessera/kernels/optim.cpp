#include "tessera/kernels/optim.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tessera/kernels/simd.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TESSERA_ADAM_STREAM 1
#endif

namespace tessera::kernels {

namespace {

// Calls f(T{}) with T float or double for a floating dtype.
template <class F>
void floating_dispatch(DType dt, F&& f) {
  if (dt == DType::float32) {
    f(float{});
  } else {
    f(double{});
  }
}

template <class T>
double pairwise_squares(const T* p, int64_t n) {
  if (n <= 128) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]) * static_cast<double>(p[i]);
    return s;
  }
  int64_t half = n / 2;
  return pairwise_squares(p, half) + pairwise_squares(p + half, n - half);
}

template <class T>
struct AdamArgs {
  const T* w;
  const T* g;
  const T* m;
  const T* v;
  T* w_out;
  T* m_out;
  T* v_out;
  T b1, b2, one_b1, one_b2, step_size, inv_sqrt_c2, eps, coupled, shrink;
};

// d = g (+ coupled * w: without weight decay the weight is not read into d,
// as in torch.optim.Adam and Keras, so an infinite weight does not make its
// moments NaN); the moments and the step as torch.optim.Adam.
template <class T, bool kCoupled>
struct AdamLoop {
  [[gnu::always_inline]] static void run(AdamArgs<T> a, int64_t begin, int64_t end) {
    // The outputs are the inputs (in place) or disjoint from them, and element
    // i reads only index i before writing it: no dependence between elements.
    // Without this GCC's overlap check sends the in-place case to its scalar
    // loop (6x slower on the keras-io LSTM's 2.56 M-value embedding).
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const T d = kCoupled ? a.g[i] + a.coupled * a.w[i] : a.g[i];
      const T mi = a.b1 * a.m[i] + a.one_b1 * d;
      const T vi = a.b2 * a.v[i] + a.one_b2 * d * d;
      a.m_out[i] = mi;
      a.v_out[i] = vi;
      a.w_out[i] = a.w[i] * a.shrink - a.step_size * mi / (std::sqrt(vi) * a.inv_sqrt_c2 + a.eps);
    }
  }
};

#ifdef TESSERA_ADAM_STREAM
// Outputs at least this long (in elements) and apart from the inputs are
// written with streaming stores: a large array's new values go straight to
// memory instead of each line being read in first (the keras-io LSTM's
// 2.56 M-value embedding: three 10 MB arrays written a step, out of place
// while fit keeps the previous weights for nan_policy='stop'). Below it the
// new values stay in the cache for whoever reads them next.
constexpr int64_t kAdamStreamMin = int64_t{1} << 16;

// AdamLoop<float, kCoupled> over [begin, end) with the outputs' 64-byte
// aligned middle stored by streaming stores: the same operations in the same
// order (this file compiles without FMA contraction), so the same bits.
// (GCC 12's unmasked AVX-512 intrinsics pass an undefined merge operand,
// which -Wmaybe-uninitialized reports.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <bool kCoupled>
__attribute__((target("avx512f"))) void adam_streaming_avx512(const AdamArgs<float>& a,
                                                              int64_t begin, int64_t end) {
  // The outputs share their offset from 64 bytes (tessera's buffers are
  // 64-byte aligned); the head and the tail run the ordinary loop.
  int64_t i = begin;
  while (i < end && (reinterpret_cast<uintptr_t>(a.w_out + i) % 64 != 0 ||
                     reinterpret_cast<uintptr_t>(a.m_out + i) % 64 != 0 ||
                     reinterpret_cast<uintptr_t>(a.v_out + i) % 64 != 0)) {
    ++i;
    if (i - begin >= 16) {  // never aligned together: no streaming
      simd_call<AdamLoop<float, kCoupled>>(a, begin, end);
      return;
    }
  }
  simd_call<AdamLoop<float, kCoupled>>(a, begin, i);
  const __m512 b1 = _mm512_set1_ps(a.b1), b2 = _mm512_set1_ps(a.b2);
  const __m512 one_b1 = _mm512_set1_ps(a.one_b1), one_b2 = _mm512_set1_ps(a.one_b2);
  const __m512 step_size = _mm512_set1_ps(a.step_size), inv = _mm512_set1_ps(a.inv_sqrt_c2);
  const __m512 eps = _mm512_set1_ps(a.eps), coupled = _mm512_set1_ps(a.coupled);
  const __m512 shrink = _mm512_set1_ps(a.shrink);
  for (; i + 16 <= end; i += 16) {
    const __m512 w = _mm512_loadu_ps(a.w + i);
    __m512 d = _mm512_loadu_ps(a.g + i);
    if constexpr (kCoupled) d = _mm512_add_ps(d, _mm512_mul_ps(coupled, w));
    const __m512 mi =
        _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(a.m + i)), _mm512_mul_ps(one_b1, d));
    const __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(a.v + i)),
                                    _mm512_mul_ps(_mm512_mul_ps(one_b2, d), d));
    const __m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), inv), eps);
    const __m512 wn = _mm512_sub_ps(_mm512_mul_ps(w, shrink),
                                    _mm512_div_ps(_mm512_mul_ps(step_size, mi), den));
    _mm512_stream_ps(a.m_out + i, mi);
    _mm512_stream_ps(a.v_out + i, vi);
    _mm512_stream_ps(a.w_out + i, wn);
  }
  _mm_sfence();  // the streamed values visible before anyone reads them
  simd_call<AdamLoop<float, kCoupled>>(a, i, end);
}
#pragma GCC diagnostic pop
#endif

// Whether [p, p + n) and [q, q + n) share no element.
template <class T>
bool disjoint(const T* p, const T* q, int64_t n) {
  return p + n <= q || q + n <= p;
}

}  // namespace

void sgd_update_range(const SgdSettings& s, const Array& w, const Array& g, const Array* v,
                      Array& w_out, Array* v_out, int64_t begin, int64_t end) {
  floating_dispatch(w.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pw = w.data<T>();
    const T* pg = g.data<T>();
    T* po = w_out.data<T>();
    const T lr = static_cast<T>(s.lr), mu = static_cast<T>(s.momentum),
            wd = static_cast<T>(s.weight_decay);
    // In place or disjoint, element by element (see AdamLoop).
    if (!v_out) {
#pragma GCC ivdep
      for (int64_t i = begin; i < end; ++i) po[i] = pw[i] - lr * (pg[i] + wd * pw[i]);
      return;
    }
    const T* pv = v ? v->data<T>() : nullptr;
    T* pvo = v_out->data<T>();
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      T d = pg[i] + wd * pw[i];
      T vel = pv ? mu * pv[i] + d : d;
      T step = s.nesterov ? d + mu * vel : vel;
      pvo[i] = vel;
      po[i] = pw[i] - lr * step;
    }
  });
}

void adam_update_range(const AdamSettings& s, const Array& w, const Array& g, const Array& m,
                       const Array& v, Array& w_out, Array& m_out, Array& v_out, int64_t begin,
                       int64_t end) {
  const double t = static_cast<double>(s.step);
  const double correction1 = 1.0 - std::pow(s.beta1, t);
  const double correction2 = 1.0 - std::pow(s.beta2, t);
  floating_dispatch(w.dtype(), [&](auto zero) {
    using T = decltype(zero);
    AdamArgs<T> a{.w = w.data<T>(),
                  .g = g.data<T>(),
                  .m = m.data<T>(),
                  .v = v.data<T>(),
                  .w_out = w_out.data<T>(),
                  .m_out = m_out.data<T>(),
                  .v_out = v_out.data<T>(),
                  .b1 = static_cast<T>(s.beta1),
                  .b2 = static_cast<T>(s.beta2),
                  .one_b1 = static_cast<T>(1.0 - s.beta1),
                  .one_b2 = static_cast<T>(1.0 - s.beta2),
                  .step_size = static_cast<T>(s.lr / correction1),
                  .inv_sqrt_c2 = static_cast<T>(1.0 / std::sqrt(correction2)),
                  .eps = static_cast<T>(s.epsilon),
                  .coupled = static_cast<T>(s.decoupled ? 0.0 : s.weight_decay),
                  .shrink = static_cast<T>(s.decoupled ? 1.0 - s.lr * s.weight_decay : 1.0)};
#ifdef TESSERA_ADAM_STREAM
    if constexpr (std::is_same_v<T, float>) {
      const int64_t n = w.size();
      const T* ins[4] = {a.w, a.g, a.m, a.v};
      bool apart = n >= kAdamStreamMin && active_simd() == SimdLevel::avx512;
      for (const T* out : {a.w_out, a.m_out, a.v_out}) {
        for (const T* in : ins) apart = apart && disjoint(out, in, n);
      }
      if (apart) {
        if (a.coupled == T(0)) {
          adam_streaming_avx512<false>(a, begin, end);
        } else {
          adam_streaming_avx512<true>(a, begin, end);
        }
        return;
      }
    }
#endif
    if (a.coupled == T(0)) {
      simd_call<AdamLoop<T, false>>(a, begin, end);
    } else {
      simd_call<AdamLoop<T, true>>(a, begin, end);
    }
  });
}

double sum_squares_range(const Array& x, int64_t begin, int64_t end) {
  double s = 0.0;
  floating_dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    s = pairwise_squares(x.data<T>() + begin, end - begin);
  });
  return s;
}

void scale_range(const Array& x, double factor, Array& out, int64_t begin, int64_t end) {
  floating_dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T f = static_cast<T>(factor);
    for (int64_t i = begin; i < end; ++i) po[i] = px[i] * f;
  });
}

}  // namespace tessera::kernels
