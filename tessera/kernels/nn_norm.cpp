// Per-channel statistics and the affine map of batch normalization (see nn.hpp).
//
// Each loop runs over rows with the channels innermost, so it vectorizes
// across channels; the loops are compiled for AVX-512 and AVX2 as well,
// chosen at load time (the arithmetic, and so the bits, are the same).
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tessera/kernels/nn.hpp"

namespace tessera::kernels {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_NORM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_NORM_CLONES
#endif

template <class T>
[[gnu::always_inline]] inline void sum_rows(const T* __restrict px, int64_t channels, int64_t rows,
                                            double* __restrict s) {
  for (int64_t r = 0; r < rows; ++r, px += channels) {
    for (int64_t c = 0; c < channels; ++c) s[c] += static_cast<double>(px[c]);
  }
}

TESSERA_NORM_CLONES void sum_rows_of(const float* px, int64_t channels, int64_t rows, double* s) {
  sum_rows(px, channels, rows, s);
}
TESSERA_NORM_CLONES void sum_rows_of(const double* px, int64_t channels, int64_t rows, double* s) {
  sum_rows(px, channels, rows, s);
}

template <class T>
[[gnu::always_inline]] inline void shifted_rows(const T* __restrict px, int64_t channels,
                                                int64_t rows, const double* __restrict k,
                                                double* __restrict s1, double* __restrict s2) {
  for (int64_t r = 0; r < rows; ++r, px += channels) {
    for (int64_t c = 0; c < channels; ++c) {
      const double d = static_cast<double>(px[c]) - k[c];
      s1[c] += d;
      s2[c] += d * d;
    }
  }
}

TESSERA_NORM_CLONES void shifted_rows_of(const float* px, int64_t channels, int64_t rows,
                                         const double* k, double* s1, double* s2) {
  shifted_rows(px, channels, rows, k, s1, s2);
}
TESSERA_NORM_CLONES void shifted_rows_of(const double* px, int64_t channels, int64_t rows,
                                         const double* k, double* s1, double* s2) {
  shifted_rows(px, channels, rows, k, s1, s2);
}

// g' = g * (mask > 0 ? 1 : 0), as relu_grad multiplies (so a NaN or an
// infinity of g where the mask is off gives NaN there too).
//
// The 1 or 0 is picked with bit operations, as nn_activation.cpp's select:
// GCC turns `g * (c ? 1 : 0)` into a branch around the multiply (it does not
// speculate a floating multiply under -ftrapping-math), which stops the
// vectorizer.
template <class T>
[[gnu::always_inline]] inline T masked(T g, T mask) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U on = U(0) - static_cast<U>(mask > T(0));
  return g * std::bit_cast<T>(std::bit_cast<U>(T(1)) & on);
}

// With po (and pm), g' is also written out.
template <class T>
[[gnu::always_inline]] inline void grad_rows(const T* __restrict pg, const T* __restrict px,
                                             const T* __restrict pm, int64_t channels,
                                             int64_t rows, const double* __restrict mean,
                                             double* __restrict sg, double* __restrict sgd,
                                             T* __restrict po) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = r * channels;
    if (pm && po) {
      for (int64_t c = 0; c < channels; ++c) {
        const T gm = masked(pg[off + c], pm[off + c]);
        po[off + c] = gm;
        const double g = gm;
        sg[c] += g;
        sgd[c] += g * (static_cast<double>(px[off + c]) - mean[c]);
      }
    } else if (pm) {
      for (int64_t c = 0; c < channels; ++c) {
        const double g = masked(pg[off + c], pm[off + c]);
        sg[c] += g;
        sgd[c] += g * (static_cast<double>(px[off + c]) - mean[c]);
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) {
        const double g = pg[off + c];
        sg[c] += g;
        sgd[c] += g * (static_cast<double>(px[off + c]) - mean[c]);
      }
    }
  }
}

TESSERA_NORM_CLONES void grad_rows_of(const float* pg, const float* px, const float* pm,
                                      int64_t channels, int64_t rows, const double* mean,
                                      double* sg, double* sgd, float* po) {
  grad_rows(pg, px, pm, channels, rows, mean, sg, sgd, po);
}
TESSERA_NORM_CLONES void grad_rows_of(const double* pg, const double* px, const double* pm,
                                      int64_t channels, int64_t rows, const double* mean,
                                      double* sg, double* sgd, double* po) {
  grad_rows(pg, px, pm, channels, rows, mean, sg, sgd, po);
}

// out = a u' + p v + q (v null: a u' + q), then max(out, 0) when relu. `out`
// may be `u` (written in place), so neither is restrict.
template <class T>
[[gnu::always_inline]] inline void affine_rows(const T* pu, const T* __restrict pm,
                                               const T* __restrict pv, int64_t channels,
                                               int64_t rows, const T* __restrict a,
                                               const T* __restrict p, const T* __restrict q,
                                               bool relu, T* po) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t off = r * channels;
    // One loop per case, without branches inside (the vectorizer needs that).
    if (pv && pm) {
      for (int64_t c = 0; c < channels; ++c) {
        po[off + c] = a[c] * masked(pu[off + c], pm[off + c]) + p[c] * pv[off + c] + q[c];
      }
    } else if (pv && relu) {
      for (int64_t c = 0; c < channels; ++c) {
        const T y = a[c] * pu[off + c] + p[c] * pv[off + c] + q[c];
        po[off + c] = y < T(0) ? T(0) : y;
      }
    } else if (pv) {
      for (int64_t c = 0; c < channels; ++c) {
        po[off + c] = a[c] * pu[off + c] + p[c] * pv[off + c] + q[c];
      }
    } else if (pm) {
      for (int64_t c = 0; c < channels; ++c) {
        po[off + c] = a[c] * masked(pu[off + c], pm[off + c]) + q[c];
      }
    } else if (relu) {
      for (int64_t c = 0; c < channels; ++c) {
        const T y = a[c] * pu[off + c] + q[c];
        po[off + c] = y < T(0) ? T(0) : y;  // std::max(y, 0), as relu (NaN stays)
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) po[off + c] = a[c] * pu[off + c] + q[c];
    }
  }
}

TESSERA_NORM_CLONES void affine_rows_of(const float* pu, const float* pm, const float* pv,
                                        int64_t channels, int64_t rows, const float* a,
                                        const float* p, const float* q, bool relu, float* po) {
  affine_rows(pu, pm, pv, channels, rows, a, p, q, relu, po);
}
TESSERA_NORM_CLONES void affine_rows_of(const double* pu, const double* pm, const double* pv,
                                        int64_t channels, int64_t rows, const double* a,
                                        const double* p, const double* q, bool relu, double* po) {
  affine_rows(pu, pm, pv, channels, rows, a, p, q, relu, po);
}

}  // namespace

void channel_sum(const Array& x, int64_t channels, int64_t row_begin, int64_t row_end,
                 double* sums) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_rows_of(x.data<T>() + row_begin * channels, channels, row_end - row_begin, sums);
  });
}

void channel_shifted_sums(const Array& x, int64_t channels, const double* shift,
                          int64_t row_begin, int64_t row_end, double* s1, double* s2) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    shifted_rows_of(x.data<T>() + row_begin * channels, channels, row_end - row_begin, shift, s1,
                    s2);
  });
}

void channel_grad_sums(const Array& g, const Array& x, const Array* mask, int64_t channels,
                       const double* mean, int64_t row_begin, int64_t row_end, double* sum_g,
                       double* sum_g_dev, Array* masked_g) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t off = row_begin * channels;
    grad_rows_of(g.data<T>() + off, x.data<T>() + off, mask ? mask->data<T>() + off : nullptr,
                 channels, row_end - row_begin, mean, sum_g, sum_g_dev,
                 mask && masked_g ? masked_g->data<T>() + off : nullptr);
  });
}

void channel_affine_to(const Array& u, const Array* mask, const Array* v, int64_t channels,
                       const double* a, const double* p, const double* q, bool relu, void* out,
                       int64_t row_begin, int64_t row_end) {
  dispatch_float(u.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Coefficients in T, so float32 rows stay in float32 arithmetic.
    std::vector<T> ta(a, a + channels), tp(p, p + channels), tq(q, q + channels);
    const int64_t off = row_begin * channels;
    affine_rows_of(u.data<T>() + off, mask ? mask->data<T>() + off : nullptr,
                   v ? v->data<T>() + off : nullptr, channels, row_end - row_begin, ta.data(),
                   tp.data(), tq.data(), relu, static_cast<T*>(out));
  });
}

void channel_affine(const Array& u, const Array* mask, const Array* v, int64_t channels,
                    const double* a, const double* p, const double* q, bool relu, Array& out,
                    int64_t row_begin, int64_t row_end) {
  channel_affine_to(u, mask, v, channels, a, p, q, relu,
                    static_cast<char*>(out.raw()) +
                        row_begin * channels * static_cast<int64_t>(dtype_size(out.dtype())),
                    row_begin, row_end);
}

}  // namespace tessera::kernels
