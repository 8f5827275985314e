// The tiled overloads (registry.hpp) of the row-wise nn primitives, so that
// a classifier's forward pass and loss run on a batch tiled by rows:
//
// - softmax, log_softmax and their gradient rules along an axis the array is
//   not tiled along: the local kernel on each tile, no communication;
// - the losses (categorical_crossentropy, sparse_categorical_crossentropy,
//   binary_crossentropy, mean_squared_error) and accuracy of predictions
//   tiled by rows (any axes but the classes; binary cross-entropy and mean
//   squared error, which average elements, by any axes), with targets tiled
//   alike or plain (every locality takes its part): the loss of the whole
//   batch. Each locality sums its rows' losses; one all_gather brings every
//   locality's sum, and any problem its tile had (a label out of range), so
//   that a bad tile fails every locality with the same message instead of
//   leaving the others waiting; every locality adds the sums in locality
//   order and divides by the global count: the same value everywhere, the
//   single-process value up to rounding.
// - the losses' gradient rules: the single-process gradient tiled like the
//   predictions (tiled_grads.cpp's convention), each locality's rows scaled
//   by the global count, without communication.
#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/tiled.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/distributed/tiled_ops.hpp"
#include "tessera/kernels/nn.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {
namespace {

using namespace detail;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "tiled float64 array of shape (7, 5), rows over 2 localities with spans
// locality 0 [0:4, 0:5], locality 1 [4:7, 0:5]", or "a plain float64 array
// of shape (7,)".
std::string layout_str(const Value& v) {
  if (v.is_tiled()) return v.as_tiled().describe() + " with spans " + spans_str(v.as_tiled().spans);
  if (v.is_array()) {
    return error_message("a plain ", dtype_name(v.as_array().dtype()), " array of shape ",
                         shape_str(v.as_array().shape()));
  }
  return v.describe();
}

// True for a plain value, or a replicated tiled array, which counts as plain:
// every locality holds the whole.
bool holds_whole(const Value& v) {
  return !v.is_tiled() || (acts_replicated(v.as_tiled()) && v.as_tiled().tiling != "overlapped");
}

Value tiled_like(const TiledArray& t, Array tile) {
  TiledArray out = t;
  out.tile = std::move(tile);
  return Value(std::move(out));
}

// ---------------------------------------------------------------- softmax

// softmax(x, axis), log_softmax(x, axis) and their rules softmax_grad(g,
// out, axis), log_softmax_grad(g, out, axis): every lane along `axis` must
// lie in one tile.
Future<Value> softmax_overload(const PrimitiveSpec& spec, Args& a) {
  const bool grad = ends_with(spec.name, "_grad");
  const size_t xi = grad ? 1 : 0, axis_i = grad ? 2 : 1;
  if (!a[xi].is_tiled()) {
    // Only the axis could be the tiled argument of softmax itself.
    if (!grad) a.type_error(axis_i, "an integer");
    throw std::invalid_argument(error_message("[", a.op(), "] '", a.param_name(0), "' is ", layout_str(a[0]),
                                              " but '", a.param_name(xi), "' is ", layout_str(a[xi]),
                                              ": tile them alike"));
  }
  const TiledArray& x = a[xi].as_tiled();
  const int axis = normalize_axis(a.integer(axis_i), x.ndim(), a.op());
  std::vector<int> along = tiled_axes(x);
  if (std::find(along.begin(), along.end(), axis) != along.end()) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] '", a.param_name(xi), "' is tiled along axis ", axis, ", the axis of the ", a.op(), ": ",
        layout_str(a[xi]), "; each locality needs whole lanes along it: retile_d along another axis first ",
        "(retile_d(", a.param_name(xi), ", \"rows\") keeps whole rows)"));
  }
  std::vector<Value> values;
  for (size_t i = 0; i < a.size(); ++i) values.push_back(a[i]);
  values[xi] = Value(x.tile);
  if (grad) {
    // The cotangent of a tiled result is tiled like it.
    if (!a[0].is_tiled() || !a[0].as_tiled().same_tiling(x)) {
      throw std::invalid_argument(error_message("[", a.op(), "] the cotangent g must be tiled like out: g is ",
                                                layout_str(a[0]), "; out is ", layout_str(a[xi])));
    }
    values[0] = Value(a[0].as_tiled().tile);
  }
  Args local(spec, std::move(values));
  return Future<Value>::ready(tiled_like(x, to_array(spec.eval(local), a.op())));
}

// ---------------------------------------------------------------- losses and accuracy

enum class Loss { categorical, sparse, binary, squared, accuracy };

Loss loss_of(std::string name) {
  if (ends_with(name, "_grad")) name.resize(name.size() - 5);
  if (name == "categorical_crossentropy") return Loss::categorical;
  if (name == "sparse_categorical_crossentropy") return Loss::sparse;
  if (name == "binary_crossentropy") return Loss::binary;
  if (name == "mean_squared_error") return Loss::squared;
  return Loss::accuracy;
}

// Losses of whole rows (the classes along the last axis) rather than of
// elements.
bool by_rows(Loss k) { return k == Loss::categorical || k == Loss::sparse || k == Loss::accuracy; }

// The single-process checks of the global shapes, with the local
// primitives' messages (a tile alone cannot tell).
void check_shapes(const char* op, Loss kind, const Shape& yt, const Shape& yp) {
  if (by_rows(kind) && yp.empty()) {
    throw std::invalid_argument(error_message("[", op, "] y_pred must have at least 1 dimension (classes last), ",
                                              "got shape ", shape_str(yp)));
  }
  bool ok = true;
  std::string expected;
  if (kind == Loss::categorical) {
    ok = yt == yp;
  } else if (kind == Loss::binary || kind == Loss::squared) {
    ok = kernels::same_but_trailing_one(yt, yp);
  } else {
    Shape rows(yp.begin(), yp.end() - 1);
    if (kind == Loss::sparse) {
      Shape rows1 = rows;
      rows1.push_back(1);
      ok = yt == rows || yt == rows1;
      expected = error_message(": expected one class index per row, shape ", shape_str(rows));
    } else {
      ok = (yp.back() == 1 && kernels::same_but_trailing_one(yt, yp)) || yt == yp ||
           kernels::same_but_trailing_one(yt, rows);
      expected = error_message(": expected class indices of shape ", shape_str(rows), " or one-hot rows of shape ",
                               shape_str(yp));
    }
  }
  if (!ok) {
    if (expected.empty()) {
      throw std::invalid_argument(error_message("[", op, "] y_true and y_pred must have the same shape (the same ",
                                                "batch size and classes), got ", shape_str(yt), " and ",
                                                shape_str(yp)));
    }
    throw std::invalid_argument(error_message("[", op, "] y_true has shape ", shape_str(yt), " but y_pred has shape ",
                                              shape_str(yp), expected));
  }
  if (shape_size(yp) == 0) {
    throw std::invalid_argument(error_message("[", op, "] y_pred is empty: shape ", shape_str(yp)));
  }
}

// The part of y_true (shape yt) that goes with the span s of y_pred (shape
// yp): the same indices along the axes they share; whole along an axis of
// y_true that y_pred lacks or has with another extent (a trailing 1, the
// class indices of a sparse loss), which y_pred holds whole. Empty when s is.
Span matching_span(const Span& s, const Shape& yp, const Shape& yt) {
  Span out = full_span(yt);
  for (size_t k = 0; k < yt.size(); ++k) {
    if (k < yp.size() && yt[k] == yp[k]) {
      out.start[k] = s.start[k];
      out.stop[k] = s.stop[k];
    }
  }
  if (s.empty() && !out.empty()) out.stop[0] = out.start[0];
  return out;
}

bool same_parts(const Span& a, const Span& b) { return a == b || (a.empty() && b.empty()); }

// What this locality computes of a loss: its tile of the predictions, its
// part of the targets, and the counts that scale them.
struct LossCall {
  bool whole = false;  // the predictions are plain or replicated: the local primitive on the whole
  const TiledArray* pred = nullptr;
  Array y_pred, y_true;
  int64_t local_count = 0, global_count = 0;
};

// Reads y_true (argument ti) and y_pred (pi) of a loss or accuracy call.
LossCall read_loss_call(Args& a, size_t ti, size_t pi, Loss kind) {
  const char* op = a.op();
  const Value& yt = a[ti];
  const Value& yp = a[pi];
  LossCall c;
  if (holds_whole(yp)) {
    if (!holds_whole(yt)) {
      throw std::invalid_argument(error_message(
          "[", op, "] y_true is ", layout_str(yt), " but y_pred is ", layout_str(yp),
          ": tile y_pred like y_true (retile_d) or gather y_true (all_gather_d)"));
    }
    c.whole = true;
    c.y_pred = yp.is_tiled() ? yp.as_tiled().tile : a.array(pi);
    c.y_true = yt.is_tiled() ? yt.as_tiled().tile : a.array(ti);
    return c;
  }
  const TiledArray& p = yp.as_tiled();
  if (!is_partition(p.spans)) {
    throw std::invalid_argument(error_message("[", op, "] y_pred is ", layout_str(yp), ": ", first_overlap(p.spans),
                                              ", so their rows would count twice; retile_d(y_pred, \"rows\") makes "
                                              "a tiling without overlap"));
  }
  Array yt_whole;
  if (!yt.is_tiled()) {
    if (!yt.is_numeric() && !yt.is_list()) a.type_error(ti, "a number, an array or a tiled array");
    yt_whole = a.array(ti);
  }
  const Shape yt_shape = yt.is_tiled() ? yt.as_tiled().shape : yt_whole.shape();
  check_shapes(op, kind, yt_shape, p.shape);
  if (by_rows(kind)) {
    std::vector<int> along = tiled_axes(p);
    if (std::find(along.begin(), along.end(), p.ndim() - 1) != along.end()) {
      throw std::invalid_argument(error_message("[", op, "] y_pred is tiled along its last axis, the classes: ",
                                                layout_str(yp), "; each locality needs whole rows: "
                                                "retile_d(y_pred, \"rows\")"));
    }
  }
  std::vector<Span> expected;
  for (const Span& s : p.spans) expected.push_back(matching_span(s, p.shape, yt_shape));
  if (yt.is_tiled() && !holds_whole(yt)) {
    const TiledArray& t = yt.as_tiled();
    bool same = t.spans.size() == expected.size();
    for (size_t r = 0; same && r < expected.size(); ++r) same = same_parts(t.spans[r], expected[r]);
    if (!same) {
      throw std::invalid_argument(error_message(
          "[", op, "] y_true and y_pred are tiled differently: y_true is ", layout_str(yt), "; y_pred is ",
          layout_str(yp), "; y_true's spans must cover the same rows (", spans_str(expected),
          "): tile both by \"rows\", or retile_d(y_true, spans)"));
    }
    c.y_true = t.tile;
  } else {
    if (yt.is_tiled()) yt_whole = yt.as_tiled().tile;
    c.y_true = extract(yt_whole, full_span(yt_shape), expected[p.locality]);
  }
  c.pred = &p;
  c.y_pred = p.tile;
  const int64_t per = by_rows(kind) ? p.shape.back() : 1;
  c.local_count = p.tile.size() / per;
  c.global_count = shape_size(p.shape) / per;
  return c;
}

// The call's arguments with y_true and y_pred replaced by this locality's.
std::vector<Value> local_values(Args& a, size_t ti, size_t pi, const LossCall& c) {
  std::vector<Value> values;
  for (size_t i = 0; i < a.size(); ++i) values.push_back(a[i]);
  values[ti] = Value(c.y_true);
  values[pi] = Value(c.y_pred);
  return values;
}

// What a locality tells the others: its sum, and a problem its tile had, as
// one float64 array: [sum, characters of the problem...].
Array encode_partial(double sum, const std::string& problem) {
  std::vector<double> v = {sum};
  for (unsigned char ch : problem) v.push_back(ch);
  return Array::from_vector(v, {static_cast<int64_t>(v.size())});
}

// "[op] what" -> "what".
std::string without_op(const std::string& msg, const std::string& op) {
  const std::string prefix = "[" + op + "] ";
  return msg.compare(0, prefix.size(), prefix) == 0 ? msg.substr(prefix.size()) : msg;
}

// loss(y_true, y_pred, ...) and accuracy(y_true, y_pred) of tiled predictions.
Future<Value> loss_overload(const PrimitiveSpec& spec, Args& a) {
  const Loss kind = loss_of(spec.name);
  LossCall c = read_loss_call(a, 0, 1, kind);
  if (c.whole) {
    Args local(spec, local_values(a, 0, 1, c));
    return Future<Value>::ready(spec.eval(local));
  }
  double sum = 0;
  std::string problem;
  if (c.local_count > 0) {
    Args local(spec, local_values(a, 0, 1, c));
    try {
      const double mean = to_array(spec.eval(local), a.op()).get_double(0);
      // accuracy's hits are whole numbers; a loss's mean times its count is its sum.
      sum = kind == Loss::accuracy ? std::round(mean * static_cast<double>(c.local_count))
                                   : mean * static_cast<double>(c.local_count);
    } catch (const std::exception& e) {
      if (c.pred->num_localities() == 1) throw;
      problem = without_op(e.what(), spec.name);
    }
  }
  const DType dt = kind == Loss::accuracy ? DType::float64 : kernels::float_dtype(c.pred->dtype());
  const double count = static_cast<double>(c.global_count);
  std::string op = spec.name;
  auto combine = [dt, count, op](const Value& parts) {
    double total = 0;
    std::string problems;
    const List& l = parts.as_list();
    for (size_t r = 0; r < l.size(); ++r) {
      const Array& p = l[r].as_array();
      total += p.get_double(0);
      if (p.size() == 1) continue;
      std::string msg;
      for (int64_t i = 1; i < p.size(); ++i) msg += static_cast<char>(p.get_double(i));
      problems += error_message(problems.empty() ? "" : "; ", "on locality ", r, ": ", msg);
    }
    if (!problems.empty()) throw std::invalid_argument(error_message("[", op, "] ", problems));
    return Value(Array::scalar(total / count, dt));
  };
  if (c.pred->num_localities() == 1) {
    return Future<Value>::ready(combine(Value(List{Value(encode_partial(sum, ""))})));
  }
  return detail::all_gather(encode_partial(sum, problem), 0, a.site(), c.pred->group).then(combine);
}

// loss_grad(g, y_true, y_pred, ...) of tiled predictions: each locality's
// rows get g / (the global count) each, the local rule scaled so.
Future<Value> loss_grad_overload(const PrimitiveSpec& spec, Args& a) {
  const Loss kind = loss_of(spec.name);
  if (a[0].is_tiled()) {
    if (!holds_whole(a[0])) a.type_error(0, "a number (the cotangent of the loss)");
    a.at(0) = Value(a[0].as_tiled().tile);
  }
  LossCall c = read_loss_call(a, 1, 2, kind);
  std::vector<Value> values = local_values(a, 1, 2, c);
  if (c.whole) {
    Args local(spec, std::move(values));
    Array dp = to_array(spec.eval(local), a.op());
    if (a[2].is_tiled()) return Future<Value>::ready(tiled_like(a[2].as_tiled(), std::move(dp)));
    return Future<Value>::ready(Value(std::move(dp)));
  }
  const TiledArray& p = *c.pred;
  if (c.local_count == 0) {
    return Future<Value>::ready(tiled_like(p, Array::zeros(kernels::float_dtype(p.dtype()), p.tile.shape())));
  }
  values[0] = Value(a.number(0) * static_cast<double>(c.local_count) / static_cast<double>(c.global_count));
  Args local(spec, std::move(values));
  return Future<Value>::ready(tiled_like(p, to_array(spec.eval(local), a.op())));
}

const bool tiled_losses_registered = [] {
  for (const char* name : {"softmax", "log_softmax", "softmax_grad", "log_softmax_grad"}) {
    register_tiled_overload(name, softmax_overload);
  }
  for (const char* name : {"categorical_crossentropy", "sparse_categorical_crossentropy", "binary_crossentropy",
                           "mean_squared_error", "accuracy"}) {
    register_tiled_overload(name, loss_overload);
    if (std::string(name) != "accuracy") register_tiled_overload(std::string(name) + "_grad", loss_grad_overload);
  }
  return true;
}();

}  // namespace
}  // namespace tessera::distributed
