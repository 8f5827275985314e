// The nn family: activations (relu, leaky_relu, elu, gelu, sigmoid, softplus),
// softmax and log_softmax, bias_add, batch_flatten, dropout, batch normalization,
// one_hot and accuracy, each with its gradient rule and backward primitive
// (<op>_grad; tanh_grad serves the arithmetic family's tanh).
//
// Inputs compute in their float dtype (float32 stays float32; ints and bools go
// to float64). Elementwise work is cut into tiles over elements, softmax over
// lanes, batch normalization over rows; per-channel sums use fixed chunks of
// rows combined in order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/nn.hpp"
#include "tessera/primitives/batch_norm_grad.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/gradient_expansions.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace kn = kernels;
using kn::Activation;

// Moves an array argument out of the call (a uniquely held buffer stays unique
// and may be reused for the result); numbers and lists are converted.
Array take_array(Args& a, size_t i) {
  // a strided view (dropout and the activations take views: they may hand x back) is packed
  if (a[i].is_array() && a[i].as_array().is_contiguous()) {
    Value v = a.take(i);
    return std::move(v.as_array());
  }
  return a.array(i);
}

// x in its float dtype (a new, uniquely held array when a cast is needed).
Array as_float(const Array& x) { return cast_array(x, kn::float_dtype(x.dtype())); }

// The buffer for an elementwise result of x's dtype and shape: x's own when no
// one else holds it (the kernels read element i before writing it).
Array output_for(const Array& x) { return x.unique() ? x : Array(x.dtype(), x.shape()); }

// The cotangent argument `gi` of a backward primitive as an array of `shape`
// and dtype `dt`: it must have that shape (the shape of argument `like`), or be
// a single number, which is broadcast.
Array cotangent(Args& a, size_t gi, size_t like, const Shape& shape, DType dt) {
  if (a[gi].is_scalar()) return Array::full(dt, shape, a.number(gi));
  Array g = take_array(a, gi);
  if (g.shape() != shape) {
    if (g.size() == 1 && static_cast<size_t>(g.ndim()) <= shape.size()) {
      return Array::full(dt, shape, g.get_double(0));
    }
    throw std::invalid_argument(error_message("[", a.op(), "] g has shape ", shape_str(g.shape()),
                                              " but ", a.param_name(like), " has shape ",
                                              shape_str(shape)));
  }
  return cast_array(g, dt);
}

// The compute dtype of a backward from its cotangent and the saved array.
DType grad_dtype(const Args& a, size_t gi, const Array& saved) {
  DType dt = kn::float_dtype(saved.dtype());
  if (!a[gi].is_scalar()) dt = promote(dt, kn::float_dtype(a.array(gi).dtype()));
  return dt;
}

// ---- activations ----

Value eval_activation(Args& a, Activation f, double alpha) {
  Array x = as_float(take_array(a, 0));
  Array out = output_for(x);
  parallel_for(x.size(), kn::activation_cost_ns(f),
               [&](int64_t b, int64_t e) { kn::activation_range(f, alpha, x, out, b, e); });
  return out;
}

// (g, v, ...): v is the input x, or the output for sigmoid and tanh.
Value eval_activation_grad(Args& a, Activation f, double alpha) {
  Array v = a.array(1);
  const DType dt = grad_dtype(a, 0, v);
  Array g = cotangent(a, 0, 1, v.shape(), dt);
  v = cast_array(v, dt);
  Array dx = output_for(g);
  parallel_for(v.size(), kn::activation_cost_ns(f),
               [&](int64_t b, int64_t e) { kn::activation_grad_range(f, alpha, g, v, dx, b, e); });
  return dx;
}

Activation gelu_kind(const Args& a, size_t i) {
  return a.boolean(i) ? Activation::gelu_tanh : Activation::gelu;
}

PrimitiveSpec activation_spec(std::string name, Activation f, std::string help,
                              std::string grad_rule) {
  return PrimitiveSpec{.name = std::move(name),
                       .family = "nn",
                       .params = {{"x"}},
                       .help = std::move(help),
                       .eval = [f](Args& a) -> Value { return eval_activation(a, f, 0.0); },
                       .ns_per_element = kn::activation_cost_ns(f),
                       .grads = {std::move(grad_rule)}};
}

// `grads`: its own rules (second derivatives; `adjoint` is the cotangent of
// its result, as its parameter g shadows the usual name).
PrimitiveSpec activation_grad_spec(std::string name, Activation f, std::string saved,
                                   std::string help, std::vector<std::string> grads) {
  return PrimitiveSpec{.name = std::move(name),
                       .family = "nn",
                       .params = {{"g"}, {std::move(saved)}},
                       .help = std::move(help),
                       .eval = [f](Args& a) -> Value { return eval_activation_grad(a, f, 0.0); },
                       .ns_per_element = kn::activation_cost_ns(f),
                       .grads = std::move(grads)};
}

// ---- softmax ----

Value eval_softmax(Args& a, bool log) {
  Array x = as_float(take_array(a, 0));
  const int axis = normalize_axis(a.integer(1), x.ndim(), a.op());
  const kn::AxisLanes lanes = kn::axis_lanes(x.shape(), axis);
  Array out = output_for(x);
  if (x.size() == 0) return out;
  parallel_for(lanes.count(), 6.0 * static_cast<double>(lanes.n),
               [&](int64_t b, int64_t e) { kn::softmax_range(lanes, log, x, out, b, e); });
  return out;
}

// (g, out, axis)
Value eval_softmax_grad(Args& a, bool log) {
  Array out = a.array(1);
  const DType dt = grad_dtype(a, 0, out);
  const int axis = normalize_axis(a.integer(2), out.ndim(), a.op());
  Array g = cotangent(a, 0, 1, out.shape(), dt);
  out = cast_array(out, dt);
  const kn::AxisLanes lanes = kn::axis_lanes(out.shape(), axis);
  Array dx = output_for(g);
  if (out.size() == 0) return dx;
  parallel_for(lanes.count(), 5.0 * static_cast<double>(lanes.n),
               [&](int64_t b, int64_t e) { kn::softmax_grad_range(lanes, log, g, out, dx, b, e); });
  return dx;
}

// ---- channels-last helpers (bias_add, batch normalization) ----

// Elements per chunk of a per-channel reduction: the chunks depend on the
// shape alone, so sums are identical for any number of threads.
constexpr int64_t kChannelChunkElements = 16384;

// An array seen as (rows, channels), channels last.
struct Rows {
  int64_t rows = 0, channels = 0;
};

Rows channels_last(const Array& x, const Args& a, size_t i) {
  if (x.ndim() < 1) {
    throw std::invalid_argument(error_message("[", a.op(), "] ", a.param_name(i),
                                              " must have at least 1 dimension (channels last), "
                                              "got a 0-d array"));
  }
  Rows r;
  r.channels = x.shape().back();
  r.rows = r.channels ? x.size() / r.channels : 0;
  return r;
}

// Per-channel sums of `count` quantities (kernel(row_begin, row_end, sums) adds
// into count blocks of `channels` doubles), over fixed chunks of rows whose
// partial sums are combined in chunk order.
std::vector<double> channel_reduce(
    const Rows& r, int count, double ns_per_element,
    const std::function<void(int64_t, int64_t, double*)>& kernel) {
  const int64_t width = count * r.channels;
  std::vector<double> total(static_cast<size_t>(width), 0.0);
  if (r.rows == 0 || r.channels == 0) return total;
  const int64_t chunk = std::max<int64_t>(1, kChannelChunkElements / r.channels);
  const int64_t chunks = (r.rows + chunk - 1) / chunk;
  std::vector<double> partial(static_cast<size_t>(chunks * width), 0.0);
  parallel_for(chunks, ns_per_element * static_cast<double>(chunk * r.channels),
               [&](int64_t cb, int64_t ce) {
                 for (int64_t k = cb; k < ce; ++k) {
                   kernel(k * chunk, std::min(r.rows, (k + 1) * chunk), &partial[k * width]);
                 }
               });
  for (int64_t k = 0; k < chunks; ++k) {
    for (int64_t j = 0; j < width; ++j) total[j] += partial[k * width + j];
  }
  return total;
}

// out = a[c] * u' + p[c] * v + q[c] over rows, in tiles, u' being u masked
// where `mask` is not positive, then max(out, 0) when relu (kernels/nn.hpp).
void apply_channel_affine(const Array& u, const Array* mask, const Array* v, const Rows& r,
                          const std::vector<double>& ca, const std::vector<double>& cp,
                          const std::vector<double>& cq, bool relu, Array& out) {
  const double ns = 0.3 + (mask ? 0.2 : 0.0) + (v ? 0.2 : 0.0);
  parallel_for(r.rows, ns * static_cast<double>(r.channels), [&](int64_t b, int64_t e) {
    kn::channel_affine(u, mask, v, r.channels, ca.data(), cp.data(), cq.data(), relu, out, b, e);
  });
}

Array channel_array(const std::vector<double>& v, DType dt) {
  Array out(DType::float64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), out.data<double>());
  return out.astype(dt);
}

// ---- bias_add, batch_flatten ----

Value eval_bias_add(Args& a) {
  Array b = a.array(1);
  Array x = take_array(a, 0);
  const Rows r = channels_last(x, a, 0);
  if (b.ndim() != 1 || b.dim(0) != r.channels) {
    throw std::invalid_argument(error_message(
        "[bias_add] b must be 1-d with one value per channel (the last axis of x, ",
        r.channels, "), got shape ", shape_str(b.shape()), " for x of shape ",
        shape_str(x.shape())));
  }
  const DType dt = promote(kn::float_dtype(x.dtype()), kn::float_dtype(b.dtype()));
  x = cast_array(x, dt);
  b = b.astype(DType::float64);
  std::vector<double> ones(r.channels, 1.0), zeros(r.channels, 0.0);
  std::vector<double> bias(b.data<double>(), b.data<double>() + r.channels);
  Array out = output_for(x);
  apply_channel_affine(x, nullptr, nullptr, r, ones, zeros, bias, false, out);
  return out;
}

Value eval_bias_add_grad(Args& a) {
  Array g = as_float(a.array(0));
  const Rows r = channels_last(g, a, 0);
  auto sums = channel_reduce(r, 1, 0.2, [&](int64_t b, int64_t e, double* s) {
    kn::channel_sum(g, r.channels, b, e, s);
  });
  return channel_array(sums, g.dtype());
}

Value eval_batch_flatten(Args& a) {
  Array x = a.array(0);
  if (x.ndim() < 1) {
    throw std::invalid_argument(
        "[batch_flatten] x must have at least 1 dimension (the batch), got a 0-d array");
  }
  Shape rest(x.shape().begin() + 1, x.shape().end());
  return x.reshaped({x.dim(0), shape_size(rest, "batch_flatten")});
}

// ---- dropout ----

Value eval_dropout(Args& a) {
  if (!a[0].is_numeric() && !a[0].is_list()) a.type_error(0, "a number or an array");
  const double rate = a.number(1);
  if (!(rate >= 0.0 && rate < 1.0)) {
    a.value_error(1, error_message("must be in [0, 1), got ", rate));
  }
  const int64_t seed = a.integer(2);
  if (!a.boolean(3) || rate == 0.0) return a[0].is_list() ? Value(a.array(0)) : a[0];
  Array x = as_float(take_array(a, 0));
  Array out = output_for(x);
  const uint64_t threshold = kn::dropout_threshold(rate);
  const double scale = 1.0 / (1.0 - rate);
  parallel_for(x.size(), 2.5, [&](int64_t b, int64_t e) {
    kn::dropout_range(x, out, static_cast<uint64_t>(seed), threshold, scale, b, e);
  });
  return out;
}

// ---- batch normalization ----

// The per-channel parameter `i` (gamma, beta, mean or var) as doubles, `fill`
// when nil; its float dtype joins `dt`.
std::vector<double> channel_param(const Args& a, size_t i, const Rows& r, double fill, DType& dt) {
  if (a.is_nil(i)) return std::vector<double>(r.channels, fill);
  Array p = a.array(i);
  if (p.ndim() != 1 || p.dim(0) != r.channels) {
    throw std::invalid_argument(error_message("[", a.op(), "] argument '", a.param_name(i),
                                              "' must have shape (", r.channels,
                                              ",) (one value per channel), got shape ",
                                              shape_str(p.shape())));
  }
  dt = promote(dt, kn::float_dtype(p.dtype()));
  Array d = p.astype(DType::float64);
  return std::vector<double>(d.data<double>(), d.data<double>() + r.channels);
}

double epsilon_arg(const Args& a, size_t i) {
  const double eps = a.number(i);
  if (!(eps >= 0.0)) a.value_error(i, error_message("must be non-negative, got ", eps));
  return eps;
}

struct Moments {
  std::vector<double> mean, var;
};

// Batch mean and (biased) variance per channel in one pass: sums of x - k and
// of (x - k)^2 in double over fixed chunks of rows, k being x's first row (a
// value of each channel, so the sums do not cancel when |mean| >> std).
Moments batch_moments(const Array& x, const Rows& r) {
  std::vector<double> shift(r.channels);
  for (int64_t c = 0; c < r.channels; ++c) shift[c] = x.get_double(c);
  auto sums = channel_reduce(r, 2, 0.3, [&](int64_t b, int64_t e, double* s) {
    kn::channel_shifted_sums(x, r.channels, shift.data(), b, e, s, s + r.channels);
  });
  const double n = static_cast<double>(r.rows);
  Moments m{std::vector<double>(r.channels), std::vector<double>(r.channels)};
  for (int64_t c = 0; c < r.channels; ++c) {
    const double d = sums[c] / n;
    m.mean[c] = shift[c] + d;
    m.var[c] = std::max(0.0, sums[r.channels + c] / n - d * d);
  }
  return m;
}

void require_batch(const Args& a, const Array& x, const Rows& r) {
  if (r.rows == 0 && r.channels > 0) {
    throw std::invalid_argument(error_message("[", a.op(),
                                              "] batch statistics need a non-empty batch, got "
                                              "x of shape ",
                                              shape_str(x.shape())));
  }
}

// The moving mean and variance of an inference call (training=false), read
// before x is cast since they join the dtype; empty in training, which
// normalizes with the batch's own (see batch_moments).
Moments given_moments(const Args& a, const Rows& r, bool training, size_t mean_i, size_t var_i,
                      DType& dt) {
  if (training) return Moments{};
  if (a.is_nil(mean_i) || a.is_nil(var_i)) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] inference (training=false) needs the moving 'mean' and 'var', got ",
        a[mean_i].describe(), " and ", a[var_i].describe()));
  }
  Moments m;
  m.mean = channel_param(a, mean_i, r, 0.0, dt);
  m.var = channel_param(a, var_i, r, 1.0, dt);
  return m;
}

// Whether optional argument `i` is given (primitives sharing an evaluation
// may have fewer parameters).
bool has_arg(const Args& a, size_t i) { return i < a.size() && !a.is_nil(i); }

// The batch statistics passed as argument `i` (list(mean, var), as
// batch_norm_stats(x) gives them, so that they are computed once for the
// normalization, its backward and the moving averages), or x's own when nil.
Moments batch_stats_arg(const Args& a, size_t i, const Array& x, const Rows& r) {
  if (!has_arg(a, i)) {
    require_batch(a, x, r);
    return batch_moments(x, r);
  }
  if (!a[i].is_list() || a[i].as_list().size() != 2) {
    a.type_error(i, "nil or list(mean, var) as batch_norm_stats(x) gives");
  }
  Moments m;
  for (int k = 0; k < 2; ++k) {
    Array p = to_array(a[i].as_list()[k], a.op(), "stats");
    if (p.ndim() != 1 || p.dim(0) != r.channels) {
      throw std::invalid_argument(error_message(
          "[", a.op(), "] argument '", a.param_name(i), "' must hold two arrays of shape (",
          r.channels, ",) (mean and var per channel), got shape ", shape_str(p.shape()),
          k ? " for var" : " for mean"));
    }
    Array d = p.astype(DType::float64);
    (k ? m.var : m.mean).assign(d.data<double>(), d.data<double>() + r.channels);
  }
  return m;
}

// The moments x is normalized with: the given ones, or the batch's own
// (argument `stats_i`, or computed).
Moments normalizing_moments(const Args& a, const Array& x, const Rows& r, bool training,
                            Moments given, size_t stats_i) {
  if (!training) return given;
  return batch_stats_arg(a, stats_i, x, r);
}

std::vector<double> inverse_std(const Moments& m, double eps) {
  std::vector<double> inv(m.var.size());
  for (size_t c = 0; c < inv.size(); ++c) inv[c] = 1.0 / std::sqrt(m.var[c] + eps);
  return inv;
}

// The output `y` of a batch_norm_relu (argument `i`) whose relu the backward
// undoes: g passes where y > 0. Empty when nil.
Array relu_mask(const Args& a, size_t i, const Array& x, DType dt) {
  if (!has_arg(a, i)) return Array();
  Array y = a.array(i);
  if (y.shape() != x.shape()) {
    throw std::invalid_argument(error_message("[", a.op(), "] ", a.param_name(i), " has shape ",
                                              shape_str(y.shape()), " but x has shape ",
                                              shape_str(x.shape())));
  }
  return cast_array(y, dt);
}

// Per channel: sum(g') and sum(g' * (x - mean)), g' = g masked by `mask`;
// with masked_g (and a mask), g' is also written there.
std::vector<double> grad_sums(const Array& g, const Array& x, const Array* pm, const Rows& r,
                              const Moments& m, Array* masked_g = nullptr) {
  const double ns = masked_g ? 0.6 : (pm ? 0.5 : 0.4);
  return channel_reduce(r, 2, ns, [&](int64_t b, int64_t e, double* s) {
    kn::channel_grad_sums(g, x, pm, r.channels, m.mean.data(), b, e, s, s + r.channels,
                          masked_g);
  });
}

// batch_norm(x, gamma, beta, mean, var, epsilon, training, stats);
// batch_norm_relu: the same followed by relu, in the same pass; and (residual)
// batch_norm_add_relu(x, residual, gamma, ...): relu(batch_norm(x, ...) +
// residual), in the same pass.
Value eval_batch_norm(Args& a, bool relu, bool residual = false) {
  const size_t k = residual ? 1 : 0;  // the residual (argument 1) moves the others by one
  Array x = a.array(0);
  const Rows r = channels_last(x, a, 0);
  DType dt = kn::float_dtype(x.dtype());
  const double eps = epsilon_arg(a, 5 + k);
  const bool training = a.boolean(6 + k);
  auto gamma = channel_param(a, 1 + k, r, 1.0, dt);
  auto beta = channel_param(a, 2 + k, r, 0.0, dt);
  Moments given = given_moments(a, r, training, 3 + k, 4 + k, dt);
  Array res;
  if (residual) {
    res = a.array(1);
    if (res.shape() != x.shape()) {
      throw std::invalid_argument(error_message("[", a.op(), "] residual has shape ",
                                                shape_str(res.shape()), " but x has shape ",
                                                shape_str(x.shape()), ": they must be equal"));
    }
    dt = promote(dt, kn::float_dtype(res.dtype()));
    res = cast_array(res, dt);
  }
  x = cast_array(x, dt);
  if (x.size() == 0) return Array(dt, x.shape());
  Moments m = normalizing_moments(a, x, r, training, std::move(given), 7 + k);
  auto inv = inverse_std(m, eps);
  std::vector<double> scale(r.channels), ones(r.channels, 1.0), zero(r.channels, 0.0),
      shift(r.channels);
  for (int64_t c = 0; c < r.channels; ++c) {
    scale[c] = gamma[c] * inv[c];
    shift[c] = beta[c] - m.mean[c] * scale[c];
  }
  Array out(dt, x.shape());
  if (residual) {
    apply_channel_affine(x, nullptr, &res, r, scale, ones, shift, relu, out);
  } else {
    apply_channel_affine(x, nullptr, nullptr, r, scale, zero, shift, relu, out);
  }
  return out;
}

Value eval_batch_norm_stats(Args& a) {
  Array x = as_float(a.array(0));
  const Rows r = channels_last(x, a, 0);
  require_batch(a, x, r);
  Moments m = batch_moments(x, r);
  return Value(List{channel_array(m.mean, x.dtype()), channel_array(m.var, x.dtype())});
}

// batch_norm_grad_sums(g, x, mean, var, epsilon, training, stats, y): the
// (2, channels) array [sum(g'), sum(g' * xhat)] = the cotangents of beta and
// gamma, g' being g, or g where y > 0 (batch_norm_relu's output y).
Value eval_batch_norm_grad_sums(Args& a, bool masked_out = false) {
  Array x = a.array(1);
  const Rows r = channels_last(x, a, 1);
  DType dt = grad_dtype(a, 0, x);
  const double eps = epsilon_arg(a, 4);
  const bool training = a.boolean(5);
  Moments given = given_moments(a, r, training, 2, 3, dt);
  Array g = cotangent(a, 0, 1, x.shape(), dt);
  x = cast_array(x, dt);
  // batch_norm_gamma_grad shares this evaluation, without stats and y.
  Array mask = relu_mask(a, 7, x, dt);
  if (masked_out && !has_arg(a, 7)) {
    throw std::invalid_argument(error_message("[", a.op(), "] y is required (the output of "
                                              "the relu whose backward masks g), got nil"));
  }
  Array gm;
  if (masked_out) gm = Array(dt, x.shape());
  if (x.size() == 0) {
    Array sums = Array::zeros(dt, {2, r.channels});
    return masked_out ? Value(List{Value(gm), Value(sums)}) : Value(sums);
  }
  Moments m = normalizing_moments(a, x, r, training, std::move(given), 6);
  auto inv = inverse_std(m, eps);
  auto sums = grad_sums(g, x, has_arg(a, 7) ? &mask : nullptr, r, m, masked_out ? &gm : nullptr);
  for (int64_t c = 0; c < r.channels; ++c) sums[r.channels + c] *= inv[c];
  Array out = channel_array(sums, dt).reshaped({2, r.channels});
  return masked_out ? Value(List{Value(std::move(gm)), Value(std::move(out))}) : Value(out);
}

// batch_norm_grad(g, x, gamma, mean, var, epsilon, training, stats, sums, y):
// the cotangent of x. Training: x -> (x - mean(x)) / std(x) * gamma + beta
// with the batch's own statistics, so dx = gamma/std * (g' - mean(g') - xhat *
// mean(g' * xhat)), from `sums` (batch_norm_grad_sums) when given.
Value eval_batch_norm_grad(Args& a) {
  BatchNormGradRows plan = batch_norm_grad_rows(a);
  if (plan.rows * plan.channels == 0) return Array(plan.dtype, plan.shape);
  Array dx = output_for(plan.g);  // g's own buffer when nothing else holds it
  batch_norm_grad_all_rows(plan, dx.raw());
  return dx;
}

// batch_norm_gamma_grad(g, x, mean, var, epsilon, training): sum(g * xhat)
// per channel, row 1 of batch_norm_grad_sums.
Value eval_batch_norm_gamma_grad(Args& a) {
  Array sums = eval_batch_norm_grad_sums(a).as_array();
  const int64_t c = sums.dim(1);
  Array d = sums.astype(DType::float64);
  return channel_array(std::vector<double>(d.data<double>() + c, d.data<double>() + 2 * c),
                       sums.dtype());
}

// ---- one_hot, accuracy ----

Value eval_one_hot(Args& a) {
  Array labels = a.array(0);
  const int64_t depth = a.integer(1);
  if (depth < 1) a.value_error(1, error_message("must be positive, got ", depth));
  const DType dt = a.dtype(2, DType::float32);
  Array idx = kn::class_indices(labels, depth, a.op());
  Shape shape = labels.shape();
  shape.push_back(depth);
  shape_size(shape, a.op());
  Array out = Array::zeros(dt, shape);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* po = out.data<T>();
    const int64_t* pi = idx.data<int64_t>();
    for (int64_t i = 0; i < idx.size(); ++i) po[i * depth + pi[i]] = T(1);
  });
  return out;
}

// accuracy(y_true, y_pred): the fraction of rows whose predicted class matches.
Value eval_accuracy(Args& a) {
  Array yt = a.array(0), yp = a.array(1);
  if (yp.ndim() < 1) {
    throw std::invalid_argument(error_message(
        "[accuracy] y_pred must have at least 1 dimension (classes last), got shape ",
        shape_str(yp.shape())));
  }
  const int64_t classes = yp.shape().back();
  Shape rows_shape(yp.shape().begin(), yp.shape().end() - 1);
  const int64_t rows = shape_size(rows_shape);
  enum class Mode { binary, one_hot, indices } mode;
  if (classes == 1 && kernels::same_but_trailing_one(yt.shape(), yp.shape())) {
    mode = Mode::binary;
  } else if (yt.shape() == yp.shape()) {
    mode = Mode::one_hot;
  } else if (kernels::same_but_trailing_one(yt.shape(), rows_shape) && yt.shape() != yp.shape()) {
    mode = Mode::indices;
  } else {
    throw std::invalid_argument(error_message(
        "[accuracy] y_true has shape ", shape_str(yt.shape()), " but y_pred has shape ",
        shape_str(yp.shape()), ": expected class indices of shape ", shape_str(rows_shape),
        " or one-hot rows of shape ", shape_str(yp.shape())));
  }
  if (rows == 0 || classes == 0) {
    throw std::invalid_argument(
        error_message("[accuracy] y_pred is empty: shape ", shape_str(yp.shape())));
  }
  Array labels;
  if (mode == Mode::indices) labels = kn::class_indices(yt, classes, a.op());
  std::vector<int64_t> hits(static_cast<size_t>(rows));
  parallel_for(rows, 1.0 * static_cast<double>(classes), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      bool hit;
      if (mode == Mode::binary) {
        hit = (yp.get_double(r) > 0.5) == (yt.get_double(r) > 0.5);
      } else if (mode == Mode::one_hot) {
        hit = kn::argmax_row(yp, r * classes, classes) == kn::argmax_row(yt, r * classes, classes);
      } else {
        hit = kn::argmax_row(yp, r * classes, classes) == labels.data<int64_t>()[r];
      }
      hits[r] = hit;
    }
  });
  int64_t count = 0;
  for (int64_t h : hits) count += h;
  return Array::scalar(static_cast<double>(count) / static_cast<double>(rows));
}

// The batch norm's parameters after `head` (x, and batch_norm_add_relu's
// residual).
std::vector<Param> batch_norm_params(std::vector<Param> head) {
  for (Param p : {opt("gamma", Value()), opt("beta", Value()), opt("mean", Value()),
                  opt("var", Value()), opt("epsilon", Value(1e-3)), opt("training", Value(true)),
                  opt("stats", Value())}) {
    head.push_back(std::move(p));
  }
  return head;
}

// The parameters of batch_norm_grad_sums and batch_norm_grad_sums_masked.
std::vector<Param> grad_sums_params() {
  return {{"g"},
          {"x"},
          opt("mean", Value()),
          opt("var", Value()),
          opt("epsilon", Value(1e-3)),
          opt("training", Value(true)),
          opt("stats", Value()),
          opt("y", Value())};
}

// batch_norm and batch_norm_relu: the sums of the backward (for beta, gamma and
// x in training) are computed once, in training only; inference computes
// them for gamma and beta alone, and frozen layers (only x differentiated)
// skip them.
PrimitiveSpec batch_norm_spec(std::string name, bool relu, std::string help) {
  const std::string y = relu ? ", out" : "";
  const std::string sums = "batch_norm_grad_sums(g, x, mean, var, epsilon, training, stats" + y;
  return PrimitiveSpec{
      .name = std::move(name),
      .family = "nn",
      .params = batch_norm_params({{"x"}}),
      .help = std::move(help),
      .eval = [relu](Args& a) -> Value { return eval_batch_norm(a, relu); },
      .ns_per_element = 0.6,
      .grads = {"batch_norm_grad(g, x, gamma, mean, var, epsilon, training, stats, common" +
                    (relu ? std::string(", out") : std::string(", nil")) + ")",
                "if(is_nil(common), " + sums + ")[1], common[1])",
                "if(is_nil(common), " + sums + ")[0], common[0])", "", "", "", "", ""},
      .grad_common = "if(training, " + sums + "), nil)"};
}

const bool registered_nn = register_primitives({
    activation_spec("relu", Activation::relu,
                    "Rectified linear unit max(x, 0) elementwise, like keras.activations.relu. "
                    "Floats keep their dtype; ints and bools give float64.",
                    // out > 0 exactly where x > 0: the rule keeps relu's result
                    // (which the next layer keeps anyway) instead of its input.
                    "relu_grad(g, out)"),
    activation_grad_spec("relu_grad", Activation::relu, "x",
                         "Backward of relu: g where x > 0, else 0.",
                         {"relu_grad(adjoint, x)", ""}),
    {.name = "leaky_relu",
     .family = "nn",
     .params = {{"x"}, opt("alpha", Value(0.3))},
     .help = "Leaky rectifier: x where x > 0, else alpha * x (Keras' default alpha 0.3), like "
             "keras.layers.LeakyReLU.",
     .eval = [](Args& a) -> Value {
       return eval_activation(a, Activation::leaky_relu, a.number(1));
     },
     .ns_per_element = kn::activation_cost_ns(Activation::leaky_relu),
     .grads = {"leaky_relu_grad(g, x, alpha)", ""}},
    {.name = "leaky_relu_grad",
     .family = "nn",
     .params = {{"g"}, {"x"}, opt("alpha", Value(0.3))},
     .help = "Backward of leaky_relu: g where x > 0, else alpha * g.",
     .eval = [](Args& a) -> Value {
       return eval_activation_grad(a, Activation::leaky_relu, a.number(2));
     },
     .ns_per_element = kn::activation_cost_ns(Activation::leaky_relu),
     .grads = {"leaky_relu_grad(adjoint, x, alpha)", "", ""}},
    {.name = "elu",
     .family = "nn",
     .params = {{"x"}, opt("alpha", Value(1.0))},
     .help = "Exponential linear unit: x where x > 0, else alpha * (exp(x) - 1), like "
             "keras.activations.elu.",
     .eval = [](Args& a) -> Value { return eval_activation(a, Activation::elu, a.number(1)); },
     .ns_per_element = kn::activation_cost_ns(Activation::elu),
     .grads = {"elu_grad(g, x, alpha)", ""}},
    {.name = "elu_grad",
     .family = "nn",
     .params = {{"g"}, {"x"}, opt("alpha", Value(1.0))},
     .help = "Backward of elu: g where x > 0, else g * alpha * exp(x).",
     .eval = [](Args& a) -> Value { return eval_activation_grad(a, Activation::elu, a.number(2)); },
     .ns_per_element = kn::activation_cost_ns(Activation::elu),
     .grads = {"elu_grad(adjoint, x, alpha)", "adjoint * g * where(x > 0, 0.0, alpha * exp(x))",
               ""}},
    {.name = "gelu",
     .family = "nn",
     .params = {{"x"}, opt("approximate", Value(false))},
     .help = "Gaussian error linear unit x * Phi(x) with the exact erf form, or the tanh "
             "approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) when approximate, "
             "like keras.activations.gelu.",
     .eval = [](Args& a) -> Value { return eval_activation(a, gelu_kind(a, 1), 0.0); },
     .ns_per_element = kn::activation_cost_ns(Activation::gelu),
     .grads = {"gelu_grad(g, x, approximate)", ""}},
    {.name = "gelu_grad",
     .family = "nn",
     .params = {{"g"}, {"x"}, opt("approximate", Value(false))},
     .help = "Backward of gelu (exact or tanh form): g * d gelu / dx.",
     .eval = [](Args& a) -> Value { return eval_activation_grad(a, gelu_kind(a, 2), 0.0); },
     .ns_per_element = kn::activation_cost_ns(Activation::gelu),
     // In x, gelu'': phi(x) (2 - x^2) for the erf form; for the tanh form, with
     // t = tanh(u), u = c (x + 0.044715 x^3): (1 - t^2) (u' - x t u'^2 + x u'' / 2).
     .grads = {"gelu_grad(adjoint, x, approximate)",
               "adjoint * g * if(approximate, "
               "(1.0 - square(tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))) * "
               "(0.7978845608028654 * (1.0 + 0.134145 * x * x) - x * "
               "tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)) * "
               "square(0.7978845608028654 * (1.0 + 0.134145 * x * x)) + "
               "0.5 * x * 0.7978845608028654 * 0.26829 * x), "
               "0.3989422804014327 * exp(-0.5 * x * x) * (2.0 - x * x))",
               ""}},
    activation_spec("sigmoid", Activation::sigmoid,
                    "Logistic function 1 / (1 + exp(-x)) elementwise, computed without "
                    "overflow, like keras.activations.sigmoid.",
                    "sigmoid_grad(g, out)"),
    activation_grad_spec("sigmoid_grad", Activation::sigmoid, "out",
                         "Backward of sigmoid from its output: g * out * (1 - out).",
                         {"sigmoid_grad(adjoint, out)", "adjoint * g * (1.0 - 2.0 * out)"}),
    activation_grad_spec("tanh_grad", Activation::tanh, "out",
                         "Backward of tanh from its output: g * (1 - out^2).",
                         {"tanh_grad(adjoint, out)", "-2.0 * adjoint * g * out"}),
    activation_spec("softplus", Activation::softplus,
                    "log(1 + exp(x)) elementwise, computed without overflow, like "
                    "keras.activations.softplus.",
                    "softplus_grad(g, x)"),
    activation_grad_spec("softplus_grad", Activation::softplus, "x",
                         "Backward of softplus: g * sigmoid(x).",
                         {"softplus_grad(adjoint, x)",
                          "adjoint * g * sigmoid(x) * (1.0 - sigmoid(x))"}),

    {.name = "softmax",
     .family = "nn",
     .params = {{"x"}, opt("axis", Value(int64_t{-1}))},
     .help = "exp(x) / sum(exp(x)) along one axis (shifted by the maximum, so large inputs do "
             "not overflow), like keras.activations.softmax.",
     .eval = [](Args& a) -> Value { return eval_softmax(a, false); },
     .ns_per_element = 6.0,
     .grads = {"softmax_grad(g, out, axis)", ""}},
    {.name = "softmax_grad",
     .family = "nn",
     .params = {{"g"}, {"out"}, opt("axis", Value(int64_t{-1}))},
     .help = "Backward of softmax from its output: out * (g - sum(g * out, axis)).",
     .eval = [](Args& a) -> Value { return eval_softmax_grad(a, false); },
     .ns_per_element = 5.0,
     // Symmetric in g (its Jacobian is); in out, by the product rule.
     .grads = {"softmax_grad(adjoint, out, axis)",
               "adjoint * (g - sum(g * out, axis=axis, keepdims=true)) - "
               "g * sum(adjoint * out, axis=axis, keepdims=true)",
               ""}},
    {.name = "log_softmax",
     .family = "nn",
     .params = {{"x"}, opt("axis", Value(int64_t{-1}))},
     .help = "x - logsumexp(x) along one axis, computed stably, like "
             "keras.activations.log_softmax.",
     .eval = [](Args& a) -> Value { return eval_softmax(a, true); },
     .ns_per_element = 6.0,
     .grads = {"log_softmax_grad(g, out, axis)", ""}},
    {.name = "log_softmax_grad",
     .family = "nn",
     .params = {{"g"}, {"out"}, opt("axis", Value(int64_t{-1}))},
     .help = "Backward of log_softmax from its output: g - exp(out) * sum(g, axis).",
     .eval = [](Args& a) -> Value { return eval_softmax_grad(a, true); },
     .ns_per_element = 5.0,
     .grads = {"adjoint - sum(adjoint * exp(out), axis=axis, keepdims=true)",
               "-adjoint * exp(out) * sum(g, axis=axis, keepdims=true)", ""}},

    {.name = "bias_add",
     .family = "nn",
     .params = {{"x"}, {"b"}},
     .help = "x + b with the 1-d b added along the last axis (channels last), like "
             "tf.nn.bias_add.",
     .eval = [](Args& a) -> Value { return eval_bias_add(a); },
     .ns_per_element = 1.0,
     .grads = {"g", "bias_add_grad(g)"}},
    {.name = "bias_add_grad",
     .family = "nn",
     .params = {{"g"}},
     .help = "Backward of bias_add for b: g summed over every axis but the last.",
     .eval = [](Args& a) -> Value { return eval_bias_add_grad(a); },
     .ns_per_element = 0.5,
     .grads = {"broadcast_to(adjoint, shape(g))"}},
    {.name = "batch_flatten",
     .family = "nn",
     .params = {{"x"}},
     .help = "Keeps axis 0 (the batch) and flattens the rest: (N, ...) -> (N, prod(...)), "
             "like keras.layers.Flatten and keras.backend.batch_flatten; (N,) gives (N, 1). "
             "A view of x when x is contiguous. (flatten, of the shape family, gives a 1-d copy.)",
     .eval = [](Args& a) -> Value { return eval_batch_flatten(a); },
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))"},
     .views = true},

    {.name = "dropout",
     .family = "nn",
     .params = {{"x"}, {"rate"}, {"seed"}, opt("training", Value(true))},
     .help = "Inverted dropout: in training, each element is zeroed with probability rate "
             "and the kept ones scaled by 1 / (1 - rate); otherwise (or rate 0) x unchanged. "
             "The mask depends only on (seed, element index), so the same call on the "
             "cotangent reproduces it; vary the seed per step for fresh masks.",
     .eval = [](Args& a) -> Value { return eval_dropout(a); },
     .ns_per_element = 2.5,
     .grads = {"dropout(g, rate, seed, training)", "", "", ""},
     .views = true},

    batch_norm_spec("batch_norm", false,
                    "Batch normalization over every axis but the last (channels last): "
                    "gamma * (x - mean) / sqrt(var + epsilon) + beta, like "
                    "keras.layers.BatchNormalization. Training uses the batch's own mean and "
                    "(biased) variance: `stats` when given (list(mean, var) from "
                    "batch_norm_stats(x), which then also feeds the moving averages), else "
                    "computed; inference uses the given mean and var. Nil gamma is 1, nil beta "
                    "is 0."),
    batch_norm_spec("batch_norm_relu", true,
                    "relu(batch_norm(x, ...)) in one pass, with the same arguments; its "
                    "backward passes the cotangent where the output is positive."),
    {.name = "batch_norm_add_relu",
     .family = "nn",
     .params = batch_norm_params({{"x"}, {"residual"}}),
     .help = "relu(batch_norm(x, gamma, beta, mean, var, epsilon, training, stats) + residual) "
             "in one pass (the end of a residual block: BatchNormalization, Add, ReLU; "
             "tessera.nn's models use it); residual has x's shape. Its backward masks the "
             "cotangent and sums it for gamma and beta in one pass "
             "(batch_norm_grad_sums_masked).",
     .eval = [](Args& a) -> Value { return eval_batch_norm(a, true, true); },
     .ns_per_element = 0.8,
     .grads = {"batch_norm_grad(common[0], x, gamma, mean, var, epsilon, training, stats, "
               "common[1], nil)",
               "common[0]", "common[1][1]", "common[1][0]", "", "", "", "", ""},
     .grad_common =
         "batch_norm_grad_sums_masked(g, x, mean, var, epsilon, training, stats, out)"},
    {.name = "batch_norm_stats",
     .family = "nn",
     .params = {{"x"}},
     .help = "list(mean, var): the per-channel batch mean and biased variance over every axis "
             "but the last, as batch_norm uses them in training (one pass, shifted sums in "
             "float64). Not differentiated (a constant to autodiff).",
     .eval = [](Args& a) -> Value { return eval_batch_norm_stats(a); },
     .ns_per_element = 0.4,
     // Feeds the moving averages, not the loss: differentiation stops here
     // (batch_norm's own rule accounts for the batch statistics).
     .grads = {""}},
    {.name = "batch_norm_grad",
     .family = "nn",
     .params = {{"g"},
                {"x"},
                opt("gamma", Value()),
                opt("mean", Value()),
                opt("var", Value()),
                opt("epsilon", Value(1e-3)),
                opt("training", Value(true)),
                opt("stats", Value()),
                opt("sums", Value()),
                opt("y", Value())},
     .help = "Backward of batch_norm for x. Training accounts for the batch statistics "
             "(`stats`, or computed): gamma / std * (g - mean(g) - xhat * mean(g * xhat)), "
             "the sums from `sums` (batch_norm_grad_sums) when given; inference: g * gamma / "
             "sqrt(var + epsilon). With y (batch_norm_relu's output), g counts only where y > 0.",
     .eval = [](Args& a) -> Value { return eval_batch_norm_grad(a); },
     .ns_per_element = 1.0},
    {.name = "batch_norm_grad_sums",
     .family = "nn",
     .params = grad_sums_params(),
     .help = "The (2, channels) array [sum(g), sum(g * xhat)] over every axis but the last: the "
             "backward of batch_norm for beta and gamma, in one pass. xhat is normalized as "
             "batch_norm does; with y (batch_norm_relu's output), g counts only where y > 0.",
     .eval = [](Args& a) -> Value { return eval_batch_norm_grad_sums(a); },
     .ns_per_element = 0.5},
    {.name = "batch_norm_grad_sums_masked",
     .family = "nn",
     .params = grad_sums_params(),
     .help = "list(g', sums) in one pass: g' = g where y > 0, else 0 (the backward of the relu "
             "whose output is y), and sums = batch_norm_grad_sums(g', x, ...). y is required.",
     .eval = [](Args& a) -> Value { return eval_batch_norm_grad_sums(a, true); },
     .ns_per_element = 0.6},
    {.name = "batch_norm_gamma_grad",
     .family = "nn",
     .params = {{"g"},
                {"x"},
                opt("mean", Value()),
                opt("var", Value()),
                opt("epsilon", Value(1e-3)),
                opt("training", Value(true))},
     .help = "Backward of batch_norm for gamma: sum(g * xhat) over every axis but the last, "
             "xhat normalized with the batch statistics (training) or the given mean and var "
             "(row 1 of batch_norm_grad_sums).",
     .eval = [](Args& a) -> Value { return eval_batch_norm_gamma_grad(a); },
     .ns_per_element = 0.5},

    {.name = "one_hot",
     .family = "nn",
     .params = {{"labels"}, {"depth"}, opt("dtype", Value("float32"))},
     .help = "One-hot rows: labels of shape S give shape S + (depth,), with 1 at each label, "
             "like keras.utils.to_categorical. Labels must be whole numbers in [0, depth).",
     .eval = [](Args& a) -> Value { return eval_one_hot(a); },
     .ns_per_element = 0.5,
     .grads = {"", "", ""}},
    {.name = "accuracy",
     .family = "nn",
     .params = {{"y_true"}, {"y_pred"}},
     .help = "Fraction of rows whose argmax of y_pred (probabilities or logits, classes last) "
             "matches y_true, given as class indices or one-hot rows, as a float64 0-d array. "
             "A last axis of 1 is binary: y_pred > 0.5 against y_true > 0.5. A constant to "
             "autodiff.",
     .eval = [](Args& a) -> Value { return eval_accuracy(a); },
     .ns_per_element = 1.0,
     .grads = {"", ""}},
});

// batch_norm_grad and batch_norm_grad_sums as expressions (second-order
// gradients), over x flattened to (rows, channels): the batch statistics
// recomputed from x in training (those `stats` and `sums` hold), with
// xhat = (x - mean) * rstd; g counts only where y > 0 when y is given.
const bool expanded_nn = register_gradient_expansions({
    {"batch_norm_grad",
     "block(define(gm, if(is_nil(y), g, where(y > 0, g, 0.0))),"
    "      define(c, shape(x)[-1]),"
    "      define(x2, reshape(x, list(-1, c))),"
    "      define(g2, reshape(gm, list(-1, c))),"
    "      define(xc, if(training, x2 - mean(x2, axis=0, keepdims=true), x2 - mean)),"
    "      define(rstd, 1.0 / sqrt(if(training, mean(xc * xc, axis=0, keepdims=true), var)"
    "                              + epsilon)),"
    "      define(xhat, xc * rstd),"
     "      define(gam, if(is_nil(gamma), 1.0, gamma)),"
     "      if(training,"
     "         reshape(gam * rstd * (g2 - mean(g2, axis=0, keepdims=true)"
     "                               - xhat * mean(g2 * xhat, axis=0, keepdims=true)), shape(x)),"
     "         reshape(g2 * gam * rstd, shape(x))))"},
    {"batch_norm_grad_sums",
     "block(define(gm, if(is_nil(y), g, where(y > 0, g, 0.0))),"
    "      define(c, shape(x)[-1]),"
    "      define(x2, reshape(x, list(-1, c))),"
    "      define(g2, reshape(gm, list(-1, c))),"
    "      define(xc, if(training, x2 - mean(x2, axis=0, keepdims=true), x2 - mean)),"
    "      define(rstd, 1.0 / sqrt(if(training, mean(xc * xc, axis=0, keepdims=true), var)"
    "                              + epsilon)),"
    "      define(xhat, xc * rstd),"
     "      stack(list(sum(g2, axis=0), sum(g2 * xhat, axis=0))))"},
});

}  // namespace

}  // namespace tessera

namespace tessera {

BatchNormGradRows batch_norm_grad_rows(Args& a) {
  Array x = a.array(1);
  const Rows r = channels_last(x, a, 1);
  DType dt = grad_dtype(a, 0, x);
  const double eps = epsilon_arg(a, 5);
  const bool training = a.boolean(6);
  auto gamma = channel_param(a, 2, r, 1.0, dt);
  Moments given = given_moments(a, r, training, 3, 4, dt);
  BatchNormGradRows plan;
  plan.g = cotangent(a, 0, 1, x.shape(), dt);
  plan.dtype = dt;
  plan.shape = x.shape();
  plan.rows = r.rows;
  plan.channels = r.channels;
  x = cast_array(x, dt);
  Array mask = relu_mask(a, 9, x, dt);
  const bool masked = !a.is_nil(9);
  Array given_sums;
  const bool has_sums = training && !a.is_nil(8);
  if (has_sums) {
    given_sums = a.array(8).astype(DType::float64);
    if (given_sums.shape() != Shape{2, r.channels}) {
      throw std::invalid_argument(error_message(
          "[", a.op(), "] argument 'sums' must have shape (2, ", r.channels,
          ") as batch_norm_grad_sums gives, got shape ", shape_str(given_sums.shape())));
    }
  }
  if (x.size() == 0) return plan;
  Moments m = normalizing_moments(a, x, r, training, std::move(given), 7);
  auto inv = inverse_std(m, eps);
  std::vector<double> ca(r.channels), cp(r.channels, 0.0), cq(r.channels, 0.0);
  for (int64_t c = 0; c < r.channels; ++c) ca[c] = gamma[c] * inv[c];
  if (training) {
    // Per channel: sum(g') and sum(g' * xhat).
    std::vector<double> sums;
    if (has_sums) {
      const double* p = given_sums.data<double>();
      sums.assign(p, p + 2 * r.channels);
    } else {
      sums = grad_sums(plan.g, x, masked ? &mask : nullptr, r, m);
      for (int64_t c = 0; c < r.channels; ++c) sums[r.channels + c] *= inv[c];
    }
    const double n = static_cast<double>(r.rows);
    for (int64_t c = 0; c < r.channels; ++c) {
      const double mean_g = sums[c] / n;
      const double mean_gxhat = sums[r.channels + c] / n;
      // dx = a g' - a mean_g - a inv (x - mu) mean_gxhat = a g' + p x + q
      cp[c] = -ca[c] * inv[c] * mean_gxhat;
      cq[c] = -ca[c] * mean_g + ca[c] * inv[c] * m.mean[c] * mean_gxhat;
    }
  }
  // Inference: dx = a g' (the statistics are constants).
  plan.compute = [x = training ? x : Array(), mask, masked, training, channels = r.channels,
                  ca = std::move(ca), cp = std::move(cp),
                  cq = std::move(cq)](const Array& g, int64_t b, int64_t e, void* out) {
    kn::channel_affine_to(g, masked ? &mask : nullptr, training ? &x : nullptr, channels,
                          ca.data(), cp.data(), cq.data(), false, out, b, e);
  };
  return plan;
}

void batch_norm_grad_all_rows(const BatchNormGradRows& plan, void* out) {
  const int64_t row_bytes = plan.channels * static_cast<int64_t>(dtype_size(plan.dtype));
  parallel_for(plan.rows, 0.7 * static_cast<double>(plan.channels), [&](int64_t b, int64_t e) {
    plan.compute(plan.g, b, e, static_cast<char*>(out) + b * row_bytes);
  });
}

}  // namespace tessera
