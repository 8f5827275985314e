// The losses family: categorical, sparse categorical and binary cross-entropy
// and mean squared error, each the mean over the batch as a 0-d array of
// y_pred's float dtype, with its gradient wrt y_pred (y_true is not
// differentiable).
//
// Per-row (or per-element) losses are summed in fixed chunks combined in
// order, so the value does not depend on the number of threads.
#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/nn.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/gradient_expansions.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace kn = kernels;

// Items (rows or elements) per chunk of a loss sum: fixed by the shape, never
// by the thread count.
constexpr int64_t kLossChunkElements = 8192;

// sum(f(begin, end)) over [0, n) in chunks of `chunk` items, combined in order.
double chunked_sum(int64_t n, int64_t chunk, double ns_per_item,
                   const std::function<double(int64_t, int64_t)>& f) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, ns_per_item * static_cast<double>(chunk), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) partial[k] = f(k * chunk, std::min(n, (k + 1) * chunk));
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

// The cotangent of the scalar loss: a number or a size-1 array.
double loss_cotangent(const Args& a) {
  const Value& g = a[0];
  if (g.is_scalar() || (g.is_array() && g.as_array().size() == 1)) return a.number(0);
  std::string msg = error_message("[", a.op(),
                                  "] g must be a single number (the cotangent of the scalar "
                                  "loss), got ",
                                  g.describe());
  if (!g.is_array()) throw TypeError(msg);
  throw std::invalid_argument(msg);
}

void require_classes_last(const Args& a, const Array& y_pred) {
  if (y_pred.ndim() < 1) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] y_pred must have at least 1 dimension (classes last), got shape ",
        shape_str(y_pred.shape())));
  }
}

void require_nonempty(const Args& a, const Array& y_pred) {
  if (y_pred.size() == 0) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] y_pred is empty: shape ", shape_str(y_pred.shape())));
  }
}

// y_true and y_pred of a loss that pairs them element by element, both in
// y_pred's float dtype; `strict` demands equal shapes (categorical), otherwise
// a trailing axis of 1 may differ ((N,) labels against (N, 1) outputs).
struct Pair {
  Array y_true, y_pred;
};

Pair paired(const Args& a, size_t ti, size_t pi, bool strict, bool classes_last) {
  Array yt = a.array(ti), yp = a.array(pi);
  if (classes_last) require_classes_last(a, yp);
  const bool ok = strict ? yt.shape() == yp.shape() : kernels::same_but_trailing_one(yt.shape(), yp.shape());
  if (!ok) {
    throw std::invalid_argument(error_message("[", a.op(),
                                              "] y_true and y_pred must have the same shape "
                                              "(the same batch size and classes), got ",
                                              shape_str(yt.shape()), " and ",
                                              shape_str(yp.shape())));
  }
  require_nonempty(a, yp);
  const DType dt = kn::float_dtype(yp.dtype());
  return Pair{cast_array(yt, dt), cast_array(yp, dt)};
}

// The labels of a sparse loss: one class index per row of y_pred (shape
// y_pred.shape[:-1], or that with a trailing 1), checked against the classes.
Array sparse_labels(const Args& a, const Array& yt, const Array& yp) {
  Shape rows(yp.shape().begin(), yp.shape().end() - 1);
  Shape rows1 = rows;
  rows1.push_back(1);
  if (yt.shape() != rows && yt.shape() != rows1) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] y_true has shape ", shape_str(yt.shape()), " but y_pred has shape ",
        shape_str(yp.shape()), ": expected one class index per row, shape ", shape_str(rows)));
  }
  return kn::class_indices(yt, yp.shape().back(), a.op());
}

Value loss_value(double total, int64_t count, DType dt) {
  return Array::scalar(total / static_cast<double>(count), dt);
}

// ---- categorical ----

Value eval_categorical(Args& a) {
  Pair p = paired(a, 0, 1, true, true);
  const bool logits = a.boolean(2);
  const int64_t classes = p.y_pred.shape().back();
  const int64_t rows = p.y_pred.size() / classes;
  double total = chunked_sum(rows, std::max<int64_t>(1, kLossChunkElements / classes),
                             5.0 * static_cast<double>(classes), [&](int64_t b, int64_t e) {
                               return kn::categorical_ce_sum(p.y_true, p.y_pred, classes, logits,
                                                             b, e);
                             });
  return loss_value(total, rows, p.y_pred.dtype());
}

// (g, y_true, y_pred, from_logits)
Value eval_categorical_grad(Args& a) {
  const double g = loss_cotangent(a);
  Pair p = paired(a, 1, 2, true, true);
  const bool logits = a.boolean(3);
  const int64_t classes = p.y_pred.shape().back();
  const int64_t rows = p.y_pred.size() / classes;
  Array dp(p.y_pred.dtype(), p.y_pred.shape());
  const double scale = g / static_cast<double>(rows);
  parallel_for(rows, 6.0 * static_cast<double>(classes), [&](int64_t b, int64_t e) {
    kn::categorical_ce_grad(p.y_true, p.y_pred, classes, logits, scale, dp, b, e);
  });
  return dp;
}

// ---- sparse categorical ----

struct Sparse {
  Array labels, y_pred;
  int64_t classes = 0, rows = 0;
};

Sparse sparse_inputs(const Args& a, size_t ti, size_t pi) {
  Array yt = a.array(ti), yp = a.array(pi);
  require_classes_last(a, yp);
  Sparse s;
  s.labels = sparse_labels(a, yt, yp);
  require_nonempty(a, yp);
  s.y_pred = cast_array(yp, kn::float_dtype(yp.dtype()));
  s.classes = yp.shape().back();
  s.rows = yp.size() / s.classes;
  return s;
}

Value eval_sparse(Args& a) {
  Sparse s = sparse_inputs(a, 0, 1);
  const bool logits = a.boolean(2);
  double total = chunked_sum(s.rows, std::max<int64_t>(1, kLossChunkElements / s.classes),
                             3.0 * static_cast<double>(s.classes), [&](int64_t b, int64_t e) {
                               return kn::sparse_ce_sum(s.labels.data<int64_t>(), s.y_pred,
                                                        s.classes, logits, b, e);
                             });
  return loss_value(total, s.rows, s.y_pred.dtype());
}

Value eval_sparse_grad(Args& a) {
  const double g = loss_cotangent(a);
  Sparse s = sparse_inputs(a, 1, 2);
  const bool logits = a.boolean(3);
  Array dp(s.y_pred.dtype(), s.y_pred.shape());
  const double scale = g / static_cast<double>(s.rows);
  parallel_for(s.rows, 6.0 * static_cast<double>(s.classes), [&](int64_t b, int64_t e) {
    kn::sparse_ce_grad(s.labels.data<int64_t>(), s.y_pred, s.classes, logits, scale, dp, b, e);
  });
  return dp;
}

// ---- binary cross-entropy, mean squared error ----

Value eval_binary(Args& a) {
  Pair p = paired(a, 0, 1, false, false);
  const bool logits = a.boolean(2);
  const int64_t n = p.y_pred.size();
  double total = chunked_sum(n, kLossChunkElements, 20.0, [&](int64_t b, int64_t e) {
    return kn::binary_ce_sum(p.y_true, p.y_pred, logits, b, e);
  });
  return loss_value(total, n, p.y_pred.dtype());
}

Value eval_binary_grad(Args& a) {
  const double g = loss_cotangent(a);
  Pair p = paired(a, 1, 2, false, false);
  const bool logits = a.boolean(3);
  const int64_t n = p.y_pred.size();
  Array dp(p.y_pred.dtype(), p.y_pred.shape());
  const double scale = g / static_cast<double>(n);
  parallel_for(n, 10.0, [&](int64_t b, int64_t e) {
    kn::binary_ce_grad(p.y_true, p.y_pred, logits, scale, dp, b, e);
  });
  return dp;
}

Value eval_mse(Args& a) {
  Pair p = paired(a, 0, 1, false, false);
  const int64_t n = p.y_pred.size();
  double total = chunked_sum(n, kLossChunkElements, 0.5, [&](int64_t b, int64_t e) {
    return kn::squared_error_sum(p.y_true, p.y_pred, b, e);
  });
  return loss_value(total, n, p.y_pred.dtype());
}

Value eval_mse_grad(Args& a) {
  const double g = loss_cotangent(a);
  Pair p = paired(a, 1, 2, false, false);
  const int64_t n = p.y_pred.size();
  Array dp(p.y_pred.dtype(), p.y_pred.shape());
  const double scale = g / static_cast<double>(n);
  parallel_for(n, 0.5, [&](int64_t b, int64_t e) {
    kn::squared_error_grad(p.y_true, p.y_pred, scale, dp, b, e);
  });
  return dp;
}

const bool registered_losses = register_primitives({
    {.name = "categorical_crossentropy",
     .family = "losses",
     .params = {{"y_true"}, {"y_pred"}, opt("from_logits", Value(false))},
     .help = "Mean over the batch of -sum(y_true * log(y_pred)) along the last axis, like "
             "keras.losses.categorical_crossentropy: y_true holds one-hot (or soft) rows of "
             "y_pred's shape; probabilities are rescaled to sum to 1 and clipped to "
             "[1e-7, 1 - 1e-7]; from_logits applies log_softmax instead.",
     .eval = [](Args& a) -> Value { return eval_categorical(a); },
     .ns_per_element = 5.0,
     .grads = {"", "categorical_crossentropy_grad(g, y_true, y_pred, from_logits)", ""}},
    {.name = "categorical_crossentropy_grad",
     .family = "losses",
     .params = {{"g"}, {"y_true"}, {"y_pred"}, opt("from_logits", Value(false))},
     .help = "Backward of categorical_crossentropy wrt y_pred, scaled by the scalar g "
             "(from_logits: g * (softmax(y_pred) * sum(y_true) - y_true) / batch).",
     .eval = [](Args& a) -> Value { return eval_categorical_grad(a); },
     .ns_per_element = 6.0},
    {.name = "sparse_categorical_crossentropy",
     .family = "losses",
     .params = {{"y_true"}, {"y_pred"}, opt("from_logits", Value(false))},
     .help = "Mean over the batch of -log(y_pred[label]), like "
             "keras.losses.sparse_categorical_crossentropy: y_true holds one class index per "
             "row of y_pred (shape y_pred.shape[:-1], or with a trailing 1); probabilities are "
             "rescaled and clipped as in categorical_crossentropy; from_logits applies "
             "log_softmax. Labels outside [0, classes) raise ValueError.",
     .eval = [](Args& a) -> Value { return eval_sparse(a); },
     .ns_per_element = 3.0,
     .grads = {"", "sparse_categorical_crossentropy_grad(g, y_true, y_pred, from_logits)", ""}},
    {.name = "sparse_categorical_crossentropy_grad",
     .family = "losses",
     .params = {{"g"}, {"y_true"}, {"y_pred"}, opt("from_logits", Value(false))},
     .help = "Backward of sparse_categorical_crossentropy wrt y_pred, scaled by the scalar g "
             "(from_logits: g * (softmax(y_pred) - one_hot(y_true)) / batch).",
     .eval = [](Args& a) -> Value { return eval_sparse_grad(a); },
     .ns_per_element = 6.0},
    {.name = "binary_crossentropy",
     .family = "losses",
     .params = {{"y_true"}, {"y_pred"}, opt("from_logits", Value(false))},
     .help = "Mean of -(y_true * log(y_pred) + (1 - y_true) * log(1 - y_pred)) over every "
             "element, like keras.losses.binary_crossentropy (y_pred clipped to "
             "[1e-7, 1 - 1e-7]; from_logits works on log-sigmoid, stably). Shapes must match "
             "up to a trailing axis of 1.",
     .eval = [](Args& a) -> Value { return eval_binary(a); },
     .ns_per_element = 20.0,
     .grads = {"", "binary_crossentropy_grad(g, y_true, y_pred, from_logits)", ""}},
    {.name = "binary_crossentropy_grad",
     .family = "losses",
     .params = {{"g"}, {"y_true"}, {"y_pred"}, opt("from_logits", Value(false))},
     .help = "Backward of binary_crossentropy wrt y_pred, scaled by the scalar g "
             "(from_logits: g * (sigmoid(y_pred) - y_true) / size).",
     .eval = [](Args& a) -> Value { return eval_binary_grad(a); },
     .ns_per_element = 10.0},
    {.name = "mean_squared_error",
     .family = "losses",
     .params = {{"y_true"}, {"y_pred"}},
     .help = "Mean of (y_pred - y_true)^2 over every element, like "
             "keras.losses.mean_squared_error averaged over the batch. Shapes must match up "
             "to a trailing axis of 1.",
     .eval = [](Args& a) -> Value { return eval_mse(a); },
     .ns_per_element = 0.5,
     .grads = {"", "mean_squared_error_grad(g, y_true, y_pred)"}},
    {.name = "mean_squared_error_grad",
     .family = "losses",
     .params = {{"g"}, {"y_true"}, {"y_pred"}},
     .help = "Backward of mean_squared_error wrt y_pred: g * 2 * (y_pred - y_true) / size.",
     .eval = [](Args& a) -> Value { return eval_mse_grad(a); },
     .ns_per_element = 0.5},
});

// The backwards as expressions (second-order gradients), as the kernels
// compute them (nn_loss.cpp): g / rows * (softmax(z) sum(y) - y) from
// logits; through q = p / sum(p) clipped to [1e-7, 1 - 1e-7] (no derivative
// outside) from probabilities. q is 1 under the division where it is outside,
// so that no division by zero reaches the second derivative.
const bool expanded_losses = register_gradient_expansions({
    {"categorical_crossentropy_grad",
     "block(define(rows, size(y_pred) / shape(y_pred)[-1]),"
     "      define(t, reshape(y_true, shape(y_pred))),"
     "      if(from_logits, g / rows * (softmax(y_pred, axis=-1) * sum(t, axis=-1, keepdims=true) - t),"
     "         block(define(s, sum(y_pred, axis=-1, keepdims=true)),"
     "               define(q, y_pred / s),"
     "               define(inside, logical_and(q >= 1e-7, q <= 1.0 - 1e-7)),"
     "               define(dq, where(inside, -t / where(inside, q, 1.0), 0.0)),"
     "               define(dot, sum(where(inside, -t, 0.0), axis=-1, keepdims=true)),"
     "               g / rows * (dq - dot) / s)))"},
    {"sparse_categorical_crossentropy_grad",
     "block(define(rows, size(y_pred) / shape(y_pred)[-1]),"
     "      define(t, reshape(one_hot(reshape(y_true, -1), shape(y_pred)[-1]), shape(y_pred))),"
     "      if(from_logits, g / rows * (softmax(y_pred, axis=-1) * sum(t, axis=-1, keepdims=true) - t),"
     "         block(define(s, sum(y_pred, axis=-1, keepdims=true)),"
     "               define(q, y_pred / s),"
     "               define(inside, logical_and(q >= 1e-7, q <= 1.0 - 1e-7)),"
     "               define(dq, where(inside, -t / where(inside, q, 1.0), 0.0)),"
     "               define(dot, sum(where(inside, -t, 0.0), axis=-1, keepdims=true)),"
     "               g / rows * (dq - dot) / s)))"},
    {"binary_crossentropy_grad",
     "block(define(t, reshape(y_true, shape(y_pred))),"
     "      if(from_logits, g / size(y_pred) * (sigmoid(y_pred) - t),"
     "         block(define(inside, logical_and(y_pred >= 1e-7, y_pred <= 1.0 - 1e-7)),"
     "               define(p, where(inside, y_pred, 0.5)),"
     "               g / size(y_pred) * where(inside, -t / p + (1.0 - t) / (1.0 - p), 0.0))))"},
    {"mean_squared_error_grad",
     "g * 2.0 / size(y_pred) * (y_pred - reshape(y_true, shape(y_pred)))"},
});

}  // namespace

}  // namespace tessera
