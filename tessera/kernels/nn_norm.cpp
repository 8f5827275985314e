// Per-channel statistics and the affine map of batch normalization (see nn.hpp).
#include <type_traits>
#include <vector>

#include "tessera/kernels/nn.hpp"

namespace tessera::kernels {

void channel_sum(const Array& x, int64_t channels, int64_t row_begin, int64_t row_end,
                 double* sums) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    for (int64_t r = row_begin; r < row_end; ++r) {
      const T* row = px + r * channels;
      for (int64_t c = 0; c < channels; ++c) sums[c] += row[c];
    }
  });
}

void channel_sq_dev_sum(const Array& x, int64_t channels, const double* mean, int64_t row_begin,
                        int64_t row_end, double* sums) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    for (int64_t r = row_begin; r < row_end; ++r) {
      const T* row = px + r * channels;
      for (int64_t c = 0; c < channels; ++c) {
        double d = row[c] - mean[c];
        sums[c] += d * d;
      }
    }
  });
}

void channel_grad_sums(const Array& g, const Array& x, int64_t channels, const double* mean,
                       int64_t row_begin, int64_t row_end, double* sum_g, double* sum_g_dev) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data<T>();
    const T* px = x.data<T>();
    for (int64_t r = row_begin; r < row_end; ++r) {
      const T* grow = pg + r * channels;
      const T* xrow = px + r * channels;
      for (int64_t c = 0; c < channels; ++c) {
        sum_g[c] += grow[c];
        sum_g_dev[c] += grow[c] * (xrow[c] - mean[c]);
      }
    }
  });
}

void channel_affine(const Array& u, const Array* v, int64_t channels, const double* a,
                    const double* p, const double* q, Array& out, int64_t row_begin,
                    int64_t row_end) {
  dispatch_float(u.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Coefficients in T, so float32 rows stay in float32 arithmetic.
    std::vector<T> ta(a, a + channels), tp(p, p + channels), tq(q, q + channels);
    const T* pu = u.data<T>();
    const T* pv = v ? v->data<T>() : nullptr;
    T* po = out.data<T>();
    for (int64_t r = row_begin; r < row_end; ++r) {
      const int64_t off = r * channels;
      if (pv) {
        for (int64_t c = 0; c < channels; ++c) {
          po[off + c] = ta[c] * pu[off + c] + tp[c] * pv[off + c] + tq[c];
        }
      } else {
        for (int64_t c = 0; c < channels; ++c) po[off + c] = ta[c] * pu[off + c] + tq[c];
      }
    }
  });
}

}  // namespace tessera::kernels
