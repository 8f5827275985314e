// The optim family: fused optimizer steps (sgd_update, adam_update) and
// gradient clipping by global norm (global_norm, clip_by_global_norm).
//
// The update rules are PyTorch's (torch.optim.SGD, Adam, AdamW). A parameter
// or state array moved in and held nowhere else is updated in place; otherwise
// the result is a new array. Integer parameters are promoted to float64, and
// gradients and state are converted to the parameter's dtype. Norms are
// accumulated in float64 over fixed-size pieces combined in order, so they do
// not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/optim.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace kn = kernels;

constexpr double kSgdNs = 1.0;
constexpr double kAdamNs = 3.0;
constexpr double kScaleNs = 0.5;
// Elements per piece of a norm: fixed, so the sum's order never depends on tiling.
constexpr int64_t kNormPiece = int64_t{1} << 15;

// Argument i as a float array (integers and bools become float64), moved out
// of the arguments so that a buffer held nowhere else can be reused.
Array take_float_array(Args& a, size_t i) {
  if (!a[i].is_numeric() && !a[i].is_list()) a.type_error(i, "a float array");
  Array x;
  if (a[i].is_array() && a[i].as_array().is_contiguous()) {
    x = std::move(a.take(i).as_array());
  } else {
    x = a.array(i);
  }
  return is_floating(x.dtype()) ? x : cast_array(x, DType::float64);
}

// Argument i (gradient or state) as an array of w's dtype and shape.
Array like_param(Args& a, size_t i, const Array& w) {
  if (!a[i].is_numeric() && !a[i].is_list()) a.type_error(i, "an array");
  Array x;
  if (a[i].is_array() && a[i].as_array().is_contiguous()) {
    x = std::move(a.take(i).as_array());
  } else {
    x = a.array(i);
  }
  if (x.shape() != w.shape()) {
    throw std::invalid_argument(error_message("[", a.op(), "] argument '", a.param_name(i),
                                              "' must have the shape of w ", shape_str(w.shape()),
                                              ", got ", shape_str(x.shape())));
  }
  return cast_array(x, w.dtype());
}

// A buffer for the new value of `x`: x itself when no one else holds it.
Array output_for(Array& x) { return x.unique() ? x : Array(x.dtype(), x.shape()); }

double non_negative(Args& a, size_t i) {
  double v = a.number(i);
  if (!(v >= 0.0) || std::isinf(v)) {
    a.value_error(i, error_message("must be a finite number >= 0, got ", v));
  }
  return v;
}

double fraction(Args& a, size_t i) {
  double v = a.number(i);
  if (!(v >= 0.0 && v < 1.0)) a.value_error(i, error_message("must be in [0, 1), got ", v));
  return v;
}

Value sgd_update(Args& a) {
  kn::SgdSettings s;
  s.lr = non_negative(a, 2);
  s.momentum = non_negative(a, 3);
  s.nesterov = a.boolean(5);
  s.weight_decay = non_negative(a, 6);
  if (s.nesterov && s.momentum == 0.0) {
    a.value_error(5, "requires a momentum > 0 (Nesterov momentum without momentum)");
  }
  if (!a.is_nil(4) && s.momentum == 0.0) {
    a.value_error(4, "must be nil when momentum is 0 (plain SGD keeps no velocity)");
  }
  Array w = take_float_array(a, 0);
  Array g = like_param(a, 1, w);
  const bool has_velocity = !a.is_nil(4);
  Array v = has_velocity ? like_param(a, 4, w) : Array();
  Array w_out = output_for(w);
  if (s.momentum == 0.0) {
    parallel_for(w.size(), kSgdNs, [&](int64_t b, int64_t e) {
      kn::sgd_update_range(s, w, g, nullptr, w_out, nullptr, b, e);
    });
    return Value(List{Value(w_out), Value()});
  }
  // Without a velocity yet, g's buffer may hold the new velocity (v' = d).
  Array v_out = has_velocity ? output_for(v) : output_for(g);
  parallel_for(w.size(), kSgdNs, [&](int64_t b, int64_t e) {
    kn::sgd_update_range(s, w, g, has_velocity ? &v : nullptr, w_out, &v_out, b, e);
  });
  return Value(List{Value(w_out), Value(v_out)});
}

Value adam_update(Args& a) {
  kn::AdamSettings s;
  double step = a.number(4);
  if (!(step >= 1.0) || step != std::floor(step) || step > 9.0e15) {
    a.value_error(4, error_message("must be an integer >= 1 (the 1-based count of updates), got ",
                                   step));
  }
  s.step = static_cast<int64_t>(step);
  s.lr = non_negative(a, 5);
  s.beta1 = fraction(a, 6);
  s.beta2 = fraction(a, 7);
  s.epsilon = non_negative(a, 8);
  s.weight_decay = non_negative(a, 9);
  s.decoupled = a.boolean(10);
  Array w = take_float_array(a, 0);
  Array g = like_param(a, 1, w);
  Array m = a.is_nil(2) ? Array::zeros(w.dtype(), w.shape()) : like_param(a, 2, w);
  Array v = a.is_nil(3) ? Array::zeros(w.dtype(), w.shape()) : like_param(a, 3, w);
  Array w_out = output_for(w), m_out = output_for(m), v_out = output_for(v);
  parallel_for(w.size(), kAdamNs, [&](int64_t b, int64_t e) {
    kn::adam_update_range(s, w, g, m, v, w_out, m_out, v_out, b, e);
  });
  return Value(List{Value(w_out), Value(m_out), Value(v_out)});
}

// The gradients of a list (nil entries stay nil) as float arrays.
std::vector<Value> gradient_list(Args& a) {
  std::vector<Value> out;
  if (a[0].is_array()) {
    out.push_back(Value(take_float_array(a, 0)));
    return out;
  }
  if (!a[0].is_list()) a.type_error(0, "a list of arrays");
  const List& items = a.list(0);
  for (size_t k = 0; k < items.size(); ++k) {
    const Value& item = items[k];
    if (item.is_nil()) {
      out.push_back(item);
      continue;
    }
    if (!item.is_numeric() && !item.is_list()) {
      throw TypeError(error_message("[", a.op(), "] argument '", a.param_name(0), "' item ", k,
                                    " must be an array or nil, got ", item.describe()));
    }
    Array x = to_array(item, a.op(), "a gradient");
    out.push_back(Value(is_floating(x.dtype()) ? x : cast_array(x, DType::float64)));
  }
  return out;
}

double squares(const Array& x) {
  int64_t pieces = (x.size() + kNormPiece - 1) / kNormPiece;
  std::vector<double> partial(static_cast<size_t>(pieces), 0.0);
  parallel_for(pieces, kScaleNs * static_cast<double>(kNormPiece), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      int64_t end = std::min(x.size(), (p + 1) * kNormPiece);
      partial[p] = kn::sum_squares_range(x, p * kNormPiece, end);
    }
  });
  double s = 0.0;
  for (double v : partial) s += v;
  return s;
}

double norm_of(const std::vector<Value>& grads) {
  double s = 0.0;
  for (const Value& g : grads) {
    if (g.is_array()) s += squares(g.as_array());
  }
  return std::sqrt(s);
}

Value clip_by_global_norm(Args& a) {
  double max_norm = a.number(1);
  if (!(max_norm > 0.0)) a.value_error(1, error_message("must be > 0, got ", max_norm));
  std::vector<Value> grads = gradient_list(a);
  double norm = norm_of(grads);
  if (norm <= max_norm) return Value(List(std::move(grads)));
  // A non-finite norm gives NaN gradients (as TensorFlow's clip_by_global_norm),
  // so the loss check of the training loop reports the step.
  double factor = std::isfinite(norm) ? max_norm / norm : std::nan("");
  List out;
  for (Value& g : grads) {
    if (!g.is_array()) {
      out.push_back(g);
      continue;
    }
    Array x = std::move(g.as_array());
    Array y = output_for(x);
    parallel_for(x.size(), kScaleNs,
                 [&](int64_t b, int64_t e) { kn::scale_range(x, factor, y, b, e); });
    out.push_back(Value(y));
  }
  return Value(std::move(out));
}

const bool registered_optim = register_primitives({
    {.name = "sgd_update",
     .family = "optim",
     .params = {{"w"}, {"g"}, {"lr"}, opt("momentum", Value(0.0)), opt("velocity", Value()),
                opt("nesterov", Value(false)), opt("weight_decay", Value(0.0))},
     .help = "One SGD step as torch.optim.SGD: d = g + weight_decay * w; with momentum, "
             "velocity' = momentum * velocity + d (just d when velocity is nil, the first step) "
             "and the step is velocity' (d + momentum * velocity' with nesterov); "
             "w' = w - lr * step. Returns list(w', velocity'); velocity' is nil when momentum "
             "is 0. g and velocity must have w's shape and are converted to w's dtype (integer "
             "w becomes float64); w and velocity are updated in place when no one else holds "
             "them.",
     .eval = sgd_update,
     .ns_per_element = kSgdNs},
    {.name = "adam_update",
     .family = "optim",
     .params = {{"w"}, {"g"}, {"m"}, {"v"}, {"step"}, {"lr"}, opt("beta1", Value(0.9)),
                opt("beta2", Value(0.999)), opt("epsilon", Value(1e-7)),
                opt("weight_decay", Value(0.0)), opt("decoupled", Value(false))},
     .help = "One Adam step as torch.optim.Adam (AdamW with decoupled=true) at the 1-based step "
             "count `step`: d = g + weight_decay * w (decoupled: w is first multiplied by "
             "1 - lr * weight_decay instead); m' = beta1 m + (1 - beta1) d; "
             "v' = beta2 v + (1 - beta2) d^2; w' = w - lr * (m' / (1 - beta1^step)) / "
             "(sqrt(v' / (1 - beta2^step)) + epsilon). m and v nil start at zeros. Returns "
             "list(w', m', v'), updating buffers in place when no one else holds them.",
     .eval = adam_update,
     .ns_per_element = kAdamNs},
    {.name = "global_norm",
     .family = "optim",
     .params = {{"grads"}},
     .help = "The L2 norm of all elements of a list of arrays taken together (nil entries "
             "skipped), sqrt(sum of sum(g**2)), as a float accumulated in float64.",
     .eval = [](Args& a) -> Value { return Value(norm_of(gradient_list(a))); },
     .ns_per_element = kScaleNs},
    {.name = "clip_by_global_norm",
     .family = "optim",
     .params = {{"grads"}, {"max_norm"}},
     .help = "Scales a list of gradient arrays so that their global_norm is at most max_norm "
             "(tf.clip_by_global_norm, torch.nn.utils.clip_grad_norm_ without its epsilon): "
             "each g becomes g * max_norm / max(norm, max_norm). Returns the list (nil entries "
             "stay nil); a non-finite norm makes every gradient NaN.",
     .eval = clip_by_global_norm,
     .ns_per_element = kScaleNs},
});

}  // namespace

}  // namespace tessera
