#include "tessera/kernels/creation.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::kernels {

void arange_fill_range(Array& out, double start, double step, int64_t begin, int64_t end) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (int64_t i = begin; i < end; ++i) {
      p[i] = element_cast<T>(start + static_cast<double>(i) * step);
    }
  });
}

void arange_int_fill(Array& out, int64_t start, int64_t step) {
  int64_t* p = out.data<int64_t>();
  // Unsigned arithmetic: the caller checked that the last value fits.
  uint64_t v = static_cast<uint64_t>(start);
  for (int64_t i = 0; i < out.size(); ++i, v += static_cast<uint64_t>(step)) {
    p[i] = static_cast<int64_t>(v);
  }
}

void linspace_fill(Array& out, double start, double stop, bool endpoint) {
  const int64_t num = out.size();
  const int64_t div = endpoint ? num - 1 : num;
  const double delta = stop - start;
  const double step = div > 0 ? delta / static_cast<double>(div) : 0.0;
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (int64_t i = 0; i < num; ++i) {
      double v = div > 0 ? start + static_cast<double>(i) * step : start;
      if (endpoint && num > 1 && i == num - 1) v = stop;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) v = std::floor(v);
      p[i] = element_cast<T>(v);
    }
  });
}

Array eye_array(int64_t n, int64_t m, int64_t k, DType dt) {
  Array out = Array::zeros(dt, {n, m});
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (int64_t i = std::max<int64_t>(0, -k); i < n; ++i) {
      int64_t j = i + k;
      if (j >= m) break;
      p[i * m + j] = T(1);
    }
  });
  return out;
}

Array triangle_array(const Array& a, int64_t k, bool lower) {
  Array out = a.copy();
  const int nd = a.ndim();
  const int64_t rows = a.dim(nd - 2), cols = a.dim(nd - 1);
  const int64_t mats = rows * cols == 0 ? 0 : a.size() / (rows * cols);
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (int64_t b = 0; b < mats; ++b) {
      T* mp = p + b * rows * cols;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          bool keep = lower ? j - i <= k : j - i >= k;
          if (!keep) mp[i * cols + j] = T(0);
        }
      }
    }
  });
  return out;
}

Array diag_from_vector(const Array& v, int64_t k) {
  const int64_t n = v.size() + (k < 0 ? -k : k);
  Array out = Array::zeros(v.dtype(), {n, n});
  dispatch(v.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = v.data<T>();
    T* p = out.data<T>();
    for (int64_t i = 0; i < v.size(); ++i) {
      int64_t r = k >= 0 ? i : i - k, c = k >= 0 ? i + k : i;
      p[r * n + c] = s[i];
    }
  });
  return out;
}

Array diag_of_matrix(const Array& a, int64_t k) {
  const int64_t rows = a.dim(0), cols = a.dim(1);
  int64_t r0 = k >= 0 ? 0 : -k, c0 = k >= 0 ? k : 0;
  int64_t len = std::max<int64_t>(0, std::min(rows - r0, cols - c0));
  Array out(a.dtype(), {len});
  dispatch(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = a.data<T>();
    T* p = out.data<T>();
    for (int64_t i = 0; i < len; ++i) p[i] = s[(r0 + i) * cols + c0 + i];
  });
  return out;
}

}  // namespace tessera::kernels
