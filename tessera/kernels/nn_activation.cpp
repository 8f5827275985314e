// Activation, softmax and dropout kernels (see nn.hpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tessera/kernels/nn.hpp"
#include "tessera/kernels/random.hpp"
#include "tessera/kernels/vmath.hpp"

namespace tessera::kernels {

namespace {

// The stream of dropout draws, apart from the streams of the random family.
constexpr uint64_t kDropoutStream = 0x64726f706f7574ull;  // "dropout"

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

// The element functions below are branch-free where the sign of x decides
// (random signs would mispredict every other branch, and a branch stops the
// vectorizer): they compute both sides and select, or blend.
//
// select(c, a, b) is c ? a : b as bit operations. GCC turns `g * (c ? 1 : k)`
// back into a branch around the multiply (it will not speculate a floating
// multiply under -ftrapping-math); a bitwise select it keeps as it is.
template <class T>
T select(bool c, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U mask = U(0) - static_cast<U>(c);
  return std::bit_cast<T>((std::bit_cast<U>(a) & mask) | (std::bit_cast<U>(b) & ~mask));
}

template <class T>
T sigmoid(T x) {
  const T e = std::exp(-std::fabs(x));
  return select(x >= T(0), T(1), e) / (T(1) + e);
}

template <Activation F, class T>
T forward(T x, T alpha) {
  if constexpr (F == Activation::relu) {
    return std::max(x, T(0));
  } else if constexpr (F == Activation::leaky_relu) {
    return x * select(x > T(0), T(1), alpha);
  } else if constexpr (F == Activation::elu) {
    // x for x > 0 (expm1(0) = 0), alpha * expm1(x) otherwise.
    return std::max(x, T(0)) + alpha * std::expm1(std::min(x, T(0)));
  } else if constexpr (F == Activation::gelu) {
    return T(0.5) * x * (T(1) + std::erf(x * T(kSqrtHalf)));
  } else if constexpr (F == Activation::gelu_tanh) {
    const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(u));
  } else if constexpr (F == Activation::sigmoid) {
    return sigmoid(x);
  } else if constexpr (F == Activation::tanh) {
    return std::tanh(x);
  } else {
    return std::max(x, T(0)) + std::log1p(std::exp(-std::fabs(x)));
  }
}

// The derivative at v (the input, or the output for sigmoid and tanh). relu'(0)
// is 0 and leaky_relu'(0) is alpha, as in TensorFlow.
template <Activation F, class T>
T derivative(T v, T alpha) {
  if constexpr (F == Activation::relu) {
    return select(v > T(0), T(1), T(0));
  } else if constexpr (F == Activation::leaky_relu) {
    return select(v > T(0), T(1), alpha);
  } else if constexpr (F == Activation::elu) {
    const T positive = select(v > T(0), T(1), T(0));
    return positive + (T(1) - positive) * alpha * std::exp(std::min(v, T(0)));
  } else if constexpr (F == Activation::gelu) {
    return T(0.5) * (T(1) + std::erf(v * T(kSqrtHalf))) +
           v * T(kInvSqrt2Pi) * std::exp(T(-0.5) * v * v);
  } else if constexpr (F == Activation::gelu_tanh) {
    const T u = T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v);
    const T t = std::tanh(u);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * v * v);
    return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du;
  } else if constexpr (F == Activation::sigmoid) {
    return v * (T(1) - v);
  } else if constexpr (F == Activation::tanh) {
    return T(1) - v * v;
  } else {
    return sigmoid(v);
  }
}

// Activations whose transcendental functions run (in float32; float64 keeps
// the scalar std:: functions, see elementwise.hpp) through vmath.hpp a block
// at a time (the argument computed into a buffer, the vector function applied,
// the result combined), rather than std::erf / std::tanh / std::exp per
// element, which do not vectorise. sigmoid's and tanh's derivatives take the
// output and need none.
template <Activation F>
constexpr bool kVectorMath = F == Activation::gelu || F == Activation::gelu_tanh ||
                             F == Activation::sigmoid || F == Activation::tanh;
constexpr int64_t kMathBlock = 256;

// The buffers below are written for j < n before vmath reads them; GCC takes
// passing them as const pointers for reads of uninitialised memory.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// y = f(x) for n <= kMathBlock elements (y may be x).
template <Activation F, class T>
void forward_block(const T* x, T* y, int64_t n) {
  T t[kMathBlock];
  if constexpr (F == Activation::gelu) {
    for (int64_t j = 0; j < n; ++j) t[j] = x[j] * T(kSqrtHalf);
    verf(t, t, n);
    for (int64_t j = 0; j < n; ++j) y[j] = T(0.5) * x[j] * (T(1) + t[j]);
  } else if constexpr (F == Activation::gelu_tanh) {
    for (int64_t j = 0; j < n; ++j) {
      t[j] = T(kSqrt2OverPi) * (x[j] + T(kGeluCubic) * x[j] * x[j] * x[j]);
    }
    vtanh(t, t, n);
    for (int64_t j = 0; j < n; ++j) y[j] = T(0.5) * x[j] * (T(1) + t[j]);
  } else if constexpr (F == Activation::sigmoid) {
    for (int64_t j = 0; j < n; ++j) t[j] = -std::fabs(x[j]);
    vexp(t, t, n);
    for (int64_t j = 0; j < n; ++j) y[j] = select(x[j] >= T(0), T(1), t[j]) / (T(1) + t[j]);
  } else {
    static_assert(F == Activation::tanh);
    vtanh(x, y, n);
  }
}

// dx = g * f'(v) for n <= kMathBlock elements of gelu and gelu_tanh (dx may be
// g or v).
template <Activation F, class T>
void grad_block(const T* g, const T* v, T* dx, int64_t n) {
  T t[kMathBlock];
  if constexpr (F == Activation::gelu) {
    T e[kMathBlock];
    for (int64_t j = 0; j < n; ++j) {
      t[j] = v[j] * T(kSqrtHalf);
      e[j] = T(-0.5) * v[j] * v[j];
    }
    verf(t, t, n);
    vexp(e, e, n);
    for (int64_t j = 0; j < n; ++j) {
      dx[j] = g[j] * (T(0.5) * (T(1) + t[j]) + v[j] * T(kInvSqrt2Pi) * e[j]);
    }
  } else {
    static_assert(F == Activation::gelu_tanh);
    for (int64_t j = 0; j < n; ++j) {
      t[j] = T(kSqrt2OverPi) * (v[j] + T(kGeluCubic) * v[j] * v[j] * v[j]);
    }
    vtanh(t, t, n);
    for (int64_t j = 0; j < n; ++j) {
      const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * v[j] * v[j]);
      dx[j] = g[j] * (T(0.5) * (T(1) + t[j]) + T(0.5) * v[j] * (T(1) - t[j] * t[j]) * du);
    }
  }
}

#pragma GCC diagnostic pop

// Calls fn(std::integral_constant<Activation, f>{}), so each loop is compiled
// for one activation.
template <class Fn>
void dispatch_activation(Activation f, Fn&& fn) {
  using A = Activation;
  switch (f) {
    case A::relu: return fn(std::integral_constant<A, A::relu>{});
    case A::leaky_relu: return fn(std::integral_constant<A, A::leaky_relu>{});
    case A::elu: return fn(std::integral_constant<A, A::elu>{});
    case A::gelu: return fn(std::integral_constant<A, A::gelu>{});
    case A::gelu_tanh: return fn(std::integral_constant<A, A::gelu_tanh>{});
    case A::sigmoid: return fn(std::integral_constant<A, A::sigmoid>{});
    case A::tanh: return fn(std::integral_constant<A, A::tanh>{});
    case A::softplus: return fn(std::integral_constant<A, A::softplus>{});
  }
}

// out[i] = op(a[i], b[i]) over [begin, end). Writing in place (out == a or
// out == b) gets a loop of its own that reads and writes through one pointer:
// the vectorizer's overlap check would otherwise send it to the scalar loop.
template <class T, class Op>
void map2(const T* a, const T* b, T* out, int64_t begin, int64_t end, Op op) {
  if (out == a) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(out[i], b[i]);
  } else if (out == b) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(a[i], out[i]);
  } else {
    for (int64_t i = begin; i < end; ++i) out[i] = op(a[i], b[i]);
  }
}

}  // namespace

double activation_cost_ns(Activation f) {
  switch (f) {
    case Activation::relu:
    case Activation::leaky_relu: return 0.3;
    case Activation::sigmoid:
    case Activation::tanh: return 1.0;  // vmath: 0.5-0.6 ns forward
    case Activation::elu: return 4.0;
    case Activation::softplus: return 8.0;
    case Activation::gelu:
    case Activation::gelu_tanh: return 1.5;  // vmath: 0.5-0.8 ns forward, 1-2 ns backward
  }
  return 1.0;
}

void activation_range(Activation f, double alpha, const Array& x, Array& out, int64_t begin,
                      int64_t end) {
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_activation(f, [&](auto kind) {
      constexpr Activation K = decltype(kind)::value;
      const T* px = x.data<T>();
      T* po = out.data<T>();
      const T a = static_cast<T>(alpha);
      if constexpr (kVectorMath<K> && std::is_same_v<T, float>) {
        for (int64_t i = begin; i < end; i += kMathBlock) {
          forward_block<K>(px + i, po + i, std::min(kMathBlock, end - i));
        }
        return;
      }
      auto op = [a](T v) { return forward<K>(v, a); };
      if (po == px) {
        for (int64_t i = begin; i < end; ++i) po[i] = op(po[i]);
      } else {
        for (int64_t i = begin; i < end; ++i) po[i] = op(px[i]);
      }
    });
  });
}

void activation_grad_range(Activation f, double alpha, const Array& g, const Array& v, Array& dx,
                           int64_t begin, int64_t end) {
  dispatch_float(g.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_activation(f, [&](auto kind) {
      constexpr Activation K = decltype(kind)::value;
      const T a = static_cast<T>(alpha);
      if constexpr (kVectorMath<K> && K != Activation::sigmoid && K != Activation::tanh &&
                    std::is_same_v<T, float>) {
        const T* pg = g.data<T>();
        const T* pv = v.data<T>();
        T* pd = dx.data<T>();
        for (int64_t i = begin; i < end; i += kMathBlock) {
          grad_block<K>(pg + i, pv + i, pd + i, std::min(kMathBlock, end - i));
        }
        return;
      }
      map2(g.data<T>(), v.data<T>(), dx.data<T>(), begin, end,
           [a](T gi, T vi) { return gi * derivative<K>(vi, a); });
    });
  });
}

AxisLanes axis_lanes(const Shape& shape, int axis) {
  AxisLanes l;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < axis) l.outer *= shape[d];
    if (d > axis) l.inner *= shape[d];
  }
  l.n = shape[axis];
  return l;
}

namespace {

// Softmax lanes are short (a row of attention scores, a row of logits), so
// each pass over one keeps kPartials partial results in an array, which the
// compiler turns into vector registers: the maximum, the sums and the scaling
// vectorise, and float32's exp goes through vmath.hpp. The partials are
// combined in a fixed order, so a lane's bits depend on its values alone.
constexpr int64_t kPartials = 16;

template <class T>
T combine_partials(T* part, bool max) {
  for (int64_t w = kPartials / 2; w > 0; w /= 2) {
    for (int64_t l = 0; l < w; ++l) {
      part[l] = max ? std::max(part[l], part[l + w]) : part[l] + part[l + w];
    }
  }
  return part[0];
}

// The largest of x[0..n), NaNs passed over (as std::max(m, x) does).
template <class T>
T lane_max(const T* x, int64_t n) {
  T part[kPartials];
  std::fill(part, part + kPartials, -std::numeric_limits<T>::infinity());
  int64_t i = 0;
  for (; i + kPartials <= n; i += kPartials) {
    for (int64_t l = 0; l < kPartials; ++l) part[l] = std::max(part[l], x[i + l]);
  }
  for (int64_t l = 0; i + l < n; ++l) part[l] = std::max(part[l], x[i + l]);
  return combine_partials(part, true);
}

template <class T>
T lane_sum(const T* x, int64_t n) {
  T part[kPartials] = {};
  int64_t i = 0;
  for (; i + kPartials <= n; i += kPartials) {
    for (int64_t l = 0; l < kPartials; ++l) part[l] += x[i + l];
  }
  for (int64_t l = 0; i + l < n; ++l) part[l] += x[i + l];
  return combine_partials(part, false);
}

template <class T>
T lane_dot(const T* x, const T* y, int64_t n) {
  T part[kPartials] = {};
  int64_t i = 0;
  for (; i + kPartials <= n; i += kPartials) {
    for (int64_t l = 0; l < kPartials; ++l) part[l] += x[i + l] * y[i + l];
  }
  for (int64_t l = 0; i + l < n; ++l) part[l] += x[i + l] * y[i + l];
  return combine_partials(part, false);
}

// y = exp(x) for n values (y may be x): float32 through vmath, float64 by
// std::exp (see elementwise.hpp).
inline void lane_exp(const float* x, float* y, int64_t n) { vexp(x, y, n); }
inline void lane_exp(const double* x, double* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = std::exp(x[j]);
}

// The shift of a lane: its maximum, or 0 when that is not finite: a lane of
// -inf (or with +inf) has no finite shift, and shifting by 0 gives NumPy's
// nan.
template <class T>
T lane_shift(const T* x, int64_t n) {
  const T m = lane_max(x, n);
  return std::isfinite(m) ? m : T(0);
}

// Scratch of the passes below, in elements (on the stack).
constexpr int64_t kLaneBlock = 256;

// softmax (or log_softmax) of the contiguous lane x[0..n) into y (y may be x).
template <class T>
void softmax_lane(const T* x, T* y, int64_t n, bool log) {
  const T m = lane_shift(x, n);
  if (!log) {
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] - m;
    lane_exp(y, y, n);
    const T inv = T(1) / lane_sum(y, n);
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
    return;
  }
  // x is read again at the end, so the exponentials go to scratch.
  T t[kLaneBlock];
  T sum = 0;
  for (int64_t b = 0; b < n; b += kLaneBlock) {
    const int64_t len = std::min(kLaneBlock, n - b);
    for (int64_t j = 0; j < len; ++j) t[j] = x[b + j] - m;
    lane_exp(t, t, len);
    sum += lane_sum(t, len);
  }
  const T lse = m + std::log(sum);
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] - lse;
}

// The backward of a contiguous lane (dx may be g).
template <class T>
void softmax_grad_lane(const T* g, const T* out, T* dx, int64_t n, bool log) {
  if (!log) {
    const T t = lane_dot(g, out, n);
    for (int64_t j = 0; j < n; ++j) dx[j] = out[j] * (g[j] - t);
    return;
  }
  const T t = lane_sum(g, n);
  T e[kLaneBlock];
  for (int64_t b = 0; b < n; b += kLaneBlock) {
    const int64_t len = std::min(kLaneBlock, n - b);
    lane_exp(out + b, e, len);
    for (int64_t j = 0; j < len; ++j) dx[b + j] = g[b + j] - e[j] * t;
  }
}

// A block of cols <= kLaneBlock neighbouring lanes along a non-last axis:
// element j of every lane is contiguous at x + j * stride, so the passes run
// along these rows, one partial result per lane (y may be x).
template <class T>
void softmax_columns(const T* x, T* y, int64_t n, int64_t stride, int64_t cols, bool log) {
  T m[kLaneBlock], sum[kLaneBlock], t[kLaneBlock];
  std::fill(m, m + cols, -std::numeric_limits<T>::infinity());
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < cols; ++c) m[c] = std::max(m[c], x[j * stride + c]);
  }
  for (int64_t c = 0; c < cols; ++c) m[c] = std::isfinite(m[c]) ? m[c] : T(0);
  std::fill(sum, sum + cols, T(0));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < cols; ++c) t[c] = x[j * stride + c] - m[c];
    lane_exp(t, t, cols);
    for (int64_t c = 0; c < cols; ++c) sum[c] += t[c];
    if (!log) std::copy(t, t + cols, y + j * stride);
  }
  for (int64_t c = 0; c < cols; ++c) sum[c] = log ? m[c] + std::log(sum[c]) : T(1) / sum[c];
  for (int64_t j = 0; j < n; ++j) {
    T* yj = y + j * stride;
    const T* xj = x + j * stride;
    if (log) {
      for (int64_t c = 0; c < cols; ++c) yj[c] = xj[c] - sum[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) yj[c] *= sum[c];
    }
  }
}

template <class T>
void softmax_grad_columns(const T* g, const T* out, T* dx, int64_t n, int64_t stride,
                          int64_t cols, bool log) {
  T part[kLaneBlock], e[kLaneBlock];
  std::fill(part, part + cols, T(0));
  for (int64_t j = 0; j < n; ++j) {
    const T* gj = g + j * stride;
    const T* oj = out + j * stride;
    if (log) {
      for (int64_t c = 0; c < cols; ++c) part[c] += gj[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) part[c] += gj[c] * oj[c];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* gj = g + j * stride;
    const T* oj = out + j * stride;
    T* dj = dx + j * stride;
    if (log) {
      lane_exp(oj, e, cols);
      for (int64_t c = 0; c < cols; ++c) dj[c] = gj[c] - e[c] * part[c];
    } else {
      for (int64_t c = 0; c < cols; ++c) dj[c] = oj[c] * (gj[c] - part[c]);
    }
  }
}

// Calls fn(o, c0, c1) for each run of lanes [begin, end) that shares outer
// index o: inner indices c0..c1.
template <class Fn>
void for_lane_runs(const AxisLanes& lanes, int64_t begin, int64_t end, Fn&& fn) {
  const int64_t s = lanes.inner;
  for (int64_t l = begin; l < end;) {
    const int64_t o = l / s, c0 = l % s;
    const int64_t c1 = std::min(s, c0 + (end - l));
    fn(o, c0, c1);
    l += c1 - c0;
  }
}

// The passes above, compiled for AVX2 as well (chosen at load time; the same
// bits: each partial result takes the same additions in the same order).
// flatten inlines them into each clone, which compiles them for its target.
// (Clang does not combine the two; its build, the fuzz build, takes the
// default code.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_CLONES __attribute__((target_clones("avx2", "default"), flatten))
#else
#define TESSERA_CLONES
#endif

template <class T>
void softmax_lanes(const AxisLanes& lanes, bool log, const T* x, T* y, int64_t begin,
                   int64_t end) {
  const int64_t n = lanes.n, s = lanes.inner;
  if (s == 1) {
    for (int64_t l = begin; l < end; ++l) softmax_lane(x + l * n, y + l * n, n, log);
    return;
  }
  for_lane_runs(lanes, begin, end, [&](int64_t o, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c += kLaneBlock) {
      const int64_t base = o * n * s + c;
      softmax_columns(x + base, y + base, n, s, std::min(kLaneBlock, c1 - c), log);
    }
  });
}

template <class T>
void softmax_grad_lanes(const AxisLanes& lanes, bool log, const T* g, const T* out, T* dx,
                        int64_t begin, int64_t end) {
  const int64_t n = lanes.n, s = lanes.inner;
  if (s == 1) {
    for (int64_t l = begin; l < end; ++l) {
      softmax_grad_lane(g + l * n, out + l * n, dx + l * n, n, log);
    }
    return;
  }
  for_lane_runs(lanes, begin, end, [&](int64_t o, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c += kLaneBlock) {
      const int64_t base = o * n * s + c;
      softmax_grad_columns(g + base, out + base, dx + base, n, s, std::min(kLaneBlock, c1 - c),
                           log);
    }
  });
}

TESSERA_CLONES void softmax_lanes_f32(const AxisLanes& lanes, bool log, const float* x, float* y,
                                      int64_t begin, int64_t end) {
  softmax_lanes(lanes, log, x, y, begin, end);
}

TESSERA_CLONES void softmax_lanes_f64(const AxisLanes& lanes, bool log, const double* x,
                                      double* y, int64_t begin, int64_t end) {
  softmax_lanes(lanes, log, x, y, begin, end);
}

TESSERA_CLONES void softmax_grad_lanes_f32(const AxisLanes& lanes, bool log, const float* g,
                                           const float* out, float* dx, int64_t begin,
                                           int64_t end) {
  softmax_grad_lanes(lanes, log, g, out, dx, begin, end);
}

TESSERA_CLONES void softmax_grad_lanes_f64(const AxisLanes& lanes, bool log, const double* g,
                                           const double* out, double* dx, int64_t begin,
                                           int64_t end) {
  softmax_grad_lanes(lanes, log, g, out, dx, begin, end);
}

#undef TESSERA_CLONES

}  // namespace

void softmax_range(const AxisLanes& lanes, bool log, const Array& x, Array& out, int64_t begin,
                   int64_t end) {
  if (x.dtype() == DType::float32) {
    softmax_lanes_f32(lanes, log, x.data<float>(), out.data<float>(), begin, end);
  } else {
    softmax_lanes_f64(lanes, log, x.data<double>(), out.data<double>(), begin, end);
  }
}

void softmax_grad_range(const AxisLanes& lanes, bool log, const Array& g, const Array& out,
                        Array& dx, int64_t begin, int64_t end) {
  if (g.dtype() == DType::float32) {
    softmax_grad_lanes_f32(lanes, log, g.data<float>(), out.data<float>(), dx.data<float>(),
                           begin, end);
  } else {
    softmax_grad_lanes_f64(lanes, log, g.data<double>(), out.data<double>(), dx.data<double>(),
                           begin, end);
  }
}

uint64_t dropout_threshold(double rate) {
  return static_cast<uint64_t>(std::llround(rate * 4294967296.0));
}

bool dropout_keeps(uint64_t seed, uint64_t threshold, int64_t i) {
  auto w = philox4x32(RandomKey{seed, kDropoutStream}, static_cast<uint64_t>(i) >> 2);
  return w[i & 3] >= threshold;
}

namespace {

// po[j] = px[j] * (words[j] >= t ? k : 0) for j < n: the multiplier is
// selected, not branched on (half the elements are dropped), and x * 0 keeps
// the sign of x, as everywhere, so the bits do not depend on the path.
// Compiled for AVX2 as well (chosen at load time; the same bits).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void apply_dropout_mask(const float* px, float* po, const uint32_t* words, uint32_t t, float k,
                        int64_t n) {
  for (int64_t j = 0; j < n; ++j) po[j] = px[j] * (words[j] >= t ? k : 0.0f);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void apply_dropout_mask(const double* px, double* po, const uint32_t* words, uint32_t t, double k,
                        int64_t n) {
  for (int64_t j = 0; j < n; ++j) po[j] = px[j] * (words[j] >= t ? k : 0.0);
}

}  // namespace

void dropout_range(const Array& x, Array& out, uint64_t seed, uint64_t threshold, double scale,
                   int64_t begin, int64_t end) {
  const RandomKey key{seed, kDropoutStream};
  // A threshold of 2^32 (rate 1) keeps nothing: every word passes 0, times 0.
  const bool none_kept = threshold > 0xFFFFFFFFull;
  const uint32_t t = none_kept ? 0u : static_cast<uint32_t>(threshold);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T k = none_kept ? T(0) : static_cast<T>(scale);
    // Element e takes word e % 4 of Philox at counter e / 4: the words of up
    // to 64 counters at a time (vectorised), from the counter of the block's
    // first element, whatever the alignment of begin.
    constexpr int64_t kCounters = 64;
    uint32_t words[4 * kCounters];
    for (int64_t i = begin; i < end;) {
      const int64_t c0 = i >> 2;
      const int64_t stop = std::min(end, 4 * (c0 + kCounters));
      const int64_t c1 = (stop + 3) >> 2;
      philox4x32_many(key, static_cast<uint64_t>(c0), c1 - c0, words);
      apply_dropout_mask(px + i, po + i, words + (i - 4 * c0), t, k, stop - i);
      i = stop;
    }
  });
}

}  // namespace tessera::kernels
