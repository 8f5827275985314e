// Class labels and the loss kernels (see nn.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/nn.hpp"

namespace tessera::kernels {

namespace {

constexpr double kClipLow = kLossEpsilon, kClipHigh = 1.0 - kLossEpsilon;

double clip_prob(double q) { return std::min(std::max(q, kClipLow), kClipHigh); }
bool inside_clip(double q) { return q >= kClipLow && q <= kClipHigh; }

// log(sum(exp(z))) of one row, shifted by its maximum.
template <class T>
double row_logsumexp(const T* z, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(z[j]));
  if (!std::isfinite(m)) m = std::isnan(m) ? m : 0.0;
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += std::exp(z[j] - m);
  return m + std::log(s);
}

template <class T>
double row_sum(const T* p, int64_t n) {
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += p[j];
  return s;
}

}  // namespace

Array class_indices(const Array& labels, int64_t depth, const char* op) {
  Array out(DType::int64, labels.shape());
  int64_t* po = out.data<int64_t>();
  dispatch(labels.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pl = labels.data<T>();
    for (int64_t i = 0; i < labels.size(); ++i) {
      int64_t k;
      if constexpr (std::is_floating_point_v<T>) {
        double v = pl[i];
        if (!(std::trunc(v) == v) || std::fabs(v) > 9.0e18) {
          throw std::invalid_argument(error_message("[", op, "] label ", v, " at flat index ", i,
                                                    " is not a whole number (class labels are "
                                                    "integers in [0, ",
                                                    depth, "))"));
        }
        k = static_cast<int64_t>(v);
      } else {
        k = static_cast<int64_t>(pl[i]);
      }
      if (k < 0 || k >= depth) {
        throw std::invalid_argument(error_message("[", op, "] label ", k, " at flat index ", i,
                                                  " is out of range for depth ", depth,
                                                  " (valid labels are 0 to ", depth - 1, ")"));
      }
      po[i] = k;
    }
  });
  return out;
}

int64_t argmax_row(const Array& x, int64_t offset, int64_t n) {
  return dispatch(x.dtype(), [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    const T* p = x.data<T>() + offset;
    int64_t best = 0;
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(p[j])) return j;  // NumPy: the first NaN is the maximum
      }
      if (p[j] > p[best]) best = j;
    }
    return best;
  });
}

double categorical_ce_sum(const Array& y_true, const Array& y_pred, int64_t classes,
                          bool from_logits, int64_t row_begin, int64_t row_end) {
  double total = 0.0;
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const T* y = y_true.data<T>() + r * classes;
      const T* p = y_pred.data<T>() + r * classes;
      double loss = 0.0;
      if (from_logits) {
        const double lse = row_logsumexp(p, classes);
        for (int64_t c = 0; c < classes; ++c) loss += y[c] * (lse - p[c]);
      } else {
        const double s = row_sum(p, classes);
        for (int64_t c = 0; c < classes; ++c) loss -= y[c] * std::log(clip_prob(p[c] / s));
      }
      total += loss;
    }
  });
  return total;
}

void categorical_ce_grad(const Array& y_true, const Array& y_pred, int64_t classes,
                         bool from_logits, double scale, Array& dp, int64_t row_begin,
                         int64_t row_end) {
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const T* y = y_true.data<T>() + r * classes;
      const T* p = y_pred.data<T>() + r * classes;
      T* d = dp.data<T>() + r * classes;
      if (from_logits) {
        // d/dz of sum(y) * lse - sum(y z): softmax(z) * sum(y) - y.
        const double lse = row_logsumexp(p, classes);
        const double sy = row_sum(y, classes);
        for (int64_t c = 0; c < classes; ++c) {
          d[c] = static_cast<T>(scale * (std::exp(p[c] - lse) * sy - y[c]));
        }
      } else {
        // Through q = p / sum(p): dL/dp_k = (dL/dq_k - sum_c dL/dq_c q_c) / sum(p),
        // with dL/dq_c = -y_c / q_c inside the clip range and 0 outside.
        const double s = row_sum(p, classes);
        double dot = 0.0;
        for (int64_t c = 0; c < classes; ++c) {
          const double q = p[c] / s;
          if (inside_clip(q)) dot -= y[c];  // (-y_c / q_c) * q_c
        }
        for (int64_t c = 0; c < classes; ++c) {
          const double q = p[c] / s;
          const double dq = inside_clip(q) ? -y[c] / q : 0.0;
          d[c] = static_cast<T>(scale * (dq - dot) / s);
        }
      }
    }
  });
}

double sparse_ce_sum(const int64_t* labels, const Array& y_pred, int64_t classes,
                     bool from_logits, int64_t row_begin, int64_t row_end) {
  double total = 0.0;
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const T* p = y_pred.data<T>() + r * classes;
      const int64_t k = labels[r];
      if (from_logits) {
        total += row_logsumexp(p, classes) - p[k];
      } else {
        total -= std::log(clip_prob(p[k] / row_sum(p, classes)));
      }
    }
  });
  return total;
}

void sparse_ce_grad(const int64_t* labels, const Array& y_pred, int64_t classes, bool from_logits,
                    double scale, Array& dp, int64_t row_begin, int64_t row_end) {
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const T* p = y_pred.data<T>() + r * classes;
      T* d = dp.data<T>() + r * classes;
      const int64_t k = labels[r];
      if (from_logits) {
        const double lse = row_logsumexp(p, classes);
        for (int64_t c = 0; c < classes; ++c) {
          d[c] = static_cast<T>(scale * (std::exp(p[c] - lse) - (c == k ? 1.0 : 0.0)));
        }
      } else {
        // As categorical with a one-hot y: only q_k carries a derivative.
        const double s = row_sum(p, classes);
        const double q = p[k] / s;
        const double dot = inside_clip(q) ? -1.0 : 0.0;
        for (int64_t c = 0; c < classes; ++c) {
          const double dq = c == k && inside_clip(q) ? -1.0 / q : 0.0;
          d[c] = static_cast<T>(scale * (dq - dot) / s);
        }
      }
    }
  });
}

double binary_ce_sum(const Array& y_true, const Array& y_pred, bool from_logits, int64_t begin,
                     int64_t end) {
  double total = 0.0;
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* y = y_true.data<T>();
    const T* p = y_pred.data<T>();
    for (int64_t i = begin; i < end; ++i) {
      const double z = p[i], t = y[i];
      if (from_logits) {
        total += std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::fabs(z)));
      } else {
        const double q = clip_prob(z);
        total -= t * std::log(q) + (1.0 - t) * std::log(1.0 - q);
      }
    }
  });
  return total;
}

void binary_ce_grad(const Array& y_true, const Array& y_pred, bool from_logits, double scale,
                    Array& dp, int64_t begin, int64_t end) {
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* y = y_true.data<T>();
    const T* p = y_pred.data<T>();
    T* d = dp.data<T>();
    for (int64_t i = begin; i < end; ++i) {
      const double z = p[i], t = y[i];
      double v;
      if (from_logits) {
        const double s = z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
        v = s - t;
      } else {
        v = inside_clip(z) ? -t / z + (1.0 - t) / (1.0 - z) : 0.0;
      }
      d[i] = static_cast<T>(scale * v);
    }
  });
}

double squared_error_sum(const Array& y_true, const Array& y_pred, int64_t begin, int64_t end) {
  double total = 0.0;
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* y = y_true.data<T>();
    const T* p = y_pred.data<T>();
    for (int64_t i = begin; i < end; ++i) {
      const double e = static_cast<double>(p[i]) - y[i];
      total += e * e;
    }
  });
  return total;
}

void squared_error_grad(const Array& y_true, const Array& y_pred, double scale, Array& dp,
                        int64_t begin, int64_t end) {
  dispatch_float(y_pred.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* y = y_true.data<T>();
    const T* p = y_pred.data<T>();
    T* d = dp.data<T>();
    const double k = 2.0 * scale;
    for (int64_t i = begin; i < end; ++i) {
      d[i] = static_cast<T>(k * (static_cast<double>(p[i]) - y[i]));
    }
  });
}

}  // namespace tessera::kernels
