// The tiled overloads (registry.hpp) through which the ordinary primitives
// take tiled arrays, so that user code is the same as single-process code:
//
// - elementwise families (arithmetic, comparison, the nn activations,
//   bias_add, zeros_like and the other *_like): the local kernel on each
//   tile, no communication; operands must share one tiling, or be scalars,
//   plain arrays or replicated tiled arrays, which are broadcast against the
//   whole;
// - allclose, array_equal: the local answer and'ed over the localities;
// - sum, mean, max, min, amax, amin, argmax, argmin: along untiled axes the
//   result stays tiled (no communication); along a tiled axis (or all axes)
//   each locality reduces its tile and one collective combines the partials
//   into a plain array every locality holds;
// - matmul, dot and matmul_tn (as dot_d), transpose (as transpose_d), shape,
//   ndim, size.
// The gradient helpers' overloads are in tiled_grads.cpp; softmax, the
// losses and accuracy in tiled_losses.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/tiled.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/distributed/tiled_ops.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/reduce.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {
namespace {

using namespace detail;

// ---------------------------------------------------------------- elementwise overload

// The operands of an elementwise call seen locally: tiles for the tiled
// operands, this locality's part of the broadcast plain ones, and the
// layout of the result.
struct LocalCall {
  std::vector<Value> values;
  Shape shape;
  std::vector<Span> spans;
  std::string tiling;
  int group = 0;
  int rank = 0;  // this locality's rank in the group
};

LocalCall localize(Args& a) {
  const char* op = a.op();
  // Nested lists are array operands ([1, 2] broadcast like an array).
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_list()) a.at(i) = Value(a.array(i));
  }
  // The tiling is set by the first tiled operand that is not replicated (or
  // the first tiled one, when all are replicated).
  int ref = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_tiled()) continue;
    if (ref < 0 || (acts_replicated(a[ref].as_tiled()) && !acts_replicated(a[i].as_tiled()))) {
      ref = static_cast<int>(i);
    }
  }
  const TiledArray& t = a[ref].as_tiled();
  std::vector<bool> local_tile(a.size(), false);
  std::vector<Shape> shapes = {t.shape};
  for (size_t i = 0; i < a.size(); ++i) {
    if (static_cast<int>(i) == ref) {
      local_tile[i] = true;
      continue;
    }
    if (a[i].is_tiled()) {
      const TiledArray& o = a[i].as_tiled();
      if (o.group != t.group && !acts_replicated(o)) check_same_group(a, ref, i);
      if (same_layout(o, t)) {
        local_tile[i] = true;
      } else if (!acts_replicated(o)) {
        throw std::invalid_argument(error_message(
            "[", op, "] the tiled operands have different tilings: '", a.param_name(ref), "' is ", t.describe(),
            " with spans ", spans_str(t.spans), "; '", a.param_name(i), "' is ", o.describe(), " with spans ",
            spans_str(o.spans), ". Tile one like the other first: retile_d(", a.param_name(i), ", ",
            a.param_name(ref), ")"));
      } else {
        shapes.push_back(o.shape);
      }
    } else if (a[i].is_array()) {
      shapes.push_back(a[i].as_array().shape());
    }
  }
  LocalCall c;
  c.group = t.group;
  c.rank = t.locality;
  c.shape = kernels::broadcast_shapes(shapes, op);
  const int off = static_cast<int>(c.shape.size()) - t.ndim();
  c.tiling = off == 0 ? t.tiling : "user";
  for (const Span& s : t.spans) {
    Span r = full_span(c.shape);
    for (int d = 0; d < t.ndim(); ++d) {
      if (t.shape[d] == c.shape[d + off]) {
        r.start[d + off] = s.start[d];
        r.stop[d + off] = s.stop[d];
      } else if (s.extent(d) == 0) {
        r.start[d + off] = r.stop[d + off] = 0;
      }
    }
    c.spans.push_back(std::move(r));
  }
  const Span& mine = c.spans[t.locality];
  for (size_t i = 0; i < a.size(); ++i) {
    if (local_tile[i]) {
      c.values.push_back(Value(a[i].as_tiled().tile));
    } else if (a[i].is_tiled() || a[i].is_array()) {
      const Array& p = a[i].is_tiled() ? a[i].as_tiled().tile : a[i].as_array();
      const int po = static_cast<int>(c.shape.size()) - p.ndim();
      Span whole = full_span(p.shape()), box = whole;
      for (int d = 0; d < p.ndim(); ++d) {
        if (p.dim(d) != 1) {
          box.start[d] = mine.start[d + po];
          box.stop[d] = mine.stop[d + po];
        }
      }
      c.values.push_back(Value(extract(p, whole, box)));
    } else {
      c.values.push_back(a[i]);
    }
  }
  return c;
}

Future<Value> elementwise_overload(const PrimitiveSpec& spec, Args& a) {
  LocalCall c = localize(a);
  Args local(spec, std::move(c.values));
  Value r = spec.eval(local);
  Array tile = r.is_array() ? r.as_array().contiguous() : to_array(r, a.op());
  const Span& mine = c.spans[c.rank];
  if (tile.shape() != mine.shape()) {
    throw std::invalid_argument(error_message("[", a.op(), "] does not work on tiled arrays tile by tile: the tile ",
                                              mine.str(), " gave a result of shape ", shape_str(tile.shape())));
  }
  return Future<Value>::ready(Value(make_tiled(tile, c.shape, c.spans, c.tiling, c.group)));
}

// allclose and array_equal: the local answer on every tile, and'ed over the
// localities with one all_reduce.
Future<Value> all_true_overload(const PrimitiveSpec& spec, Args& a) {
  if (spec.name == "array_equal") {
    auto global_shape = [&](size_t i) { return a[i].is_tiled() ? a[i].as_tiled().shape : a.array(i).shape(); };
    if (global_shape(0) != global_shape(1)) return Future<Value>::ready(Value(false));
  }
  LocalCall c = localize(a);
  Args local(spec, std::move(c.values));
  bool mine = spec.eval(local).truthy(a.op());
  if (c.spans.size() == 1) return Future<Value>::ready(Value(mine));
  return detail::all_reduce(Array::scalar_int(mine ? 1 : 0), ReduceOp::min, a.site(), c.group).then([](const Value& v) {
    return Value(v.as_array().get_int(0) != 0);
  });
}

// ---------------------------------------------------------------- reductions

enum class Reduction { sum, mean, max, min, argmax, argmin };

Reduction reduction_of(const std::string& name) {
  if (name == "sum") return Reduction::sum;
  if (name == "mean") return Reduction::mean;
  if (name == "max" || name == "amax") return Reduction::max;
  if (name == "min" || name == "amin") return Reduction::min;
  if (name == "argmax") return Reduction::argmax;
  return Reduction::argmin;
}

// The reduced axes of a reduction call (sorted; all axes for nil).
std::vector<int> reduced_axes(Args& a, Reduction kind, int nd) {
  std::vector<int> axes;
  if (kind == Reduction::argmax || kind == Reduction::argmin) {
    if (auto ax = a.opt_integer(1)) {
      axes.push_back(normalize_axis(*ax, nd, a.op()));
      return axes;
    }
  } else if (auto given = a.axes(1)) {
    for (int64_t ax : *given) axes.push_back(normalize_axis(ax, nd, a.op()));
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
      throw std::invalid_argument(error_message("[", a.op(), "] duplicate value in 'axis': ", a[1].str()));
    }
    return axes;
  }
  for (int d = 0; d < nd; ++d) axes.push_back(d);
  return axes;
}

// `s` with the reduced axes made [0, 1] (the keepdims layout).
Span kept(Span s, const std::vector<int>& axes) {
  for (int ax : axes) {
    s.start[ax] = 0;
    s.stop[ax] = 1;
  }
  return s;
}

Shape without_axes(const Shape& s, const std::vector<int>& axes) {
  Shape out;
  for (int d = 0; d < static_cast<int>(s.size()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(s[d]);
  }
  return out;
}

Span span_without(const Span& s, const std::vector<int>& axes) {
  Span out;
  for (int d = 0; d < s.ndim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) continue;
    out.start.push_back(s.start[d]);
    out.stop.push_back(s.stop[d]);
  }
  return out;
}

int64_t extent_over(const Shape& s, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int ax : axes) n *= s[ax];
  return n;
}

List axes_list(const std::vector<int>& axes) {
  List l;
  for (int ax : axes) l.push_back(Value(int64_t{ax}));
  return l;
}

// The reduction of the whole, kept dims, as the local primitive with keepdims
// would give it, finished: dims dropped unless keepdims.
Value finish_reduction(Array kept_result, const Shape& shape, const std::vector<int>& axes, bool keepdims) {
  if (keepdims) return Value(kept_result);
  return Value(kept_result.reshaped(without_axes(shape, axes)));
}

// sum and mean across localities: partial sums placed in the kept layout,
// summed by one all_reduce; mean divides by the count.
Future<Value> reduce_sum(Args& a, const TiledArray& x, const std::vector<int>& axes, bool keepdims, bool mean) {
  DType dt = a.dtype(3, kernels::reduce_result_dtype(mean ? kernels::ReduceKind::mean : kernels::ReduceKind::sum,
                                                     x.dtype()));
  Array part = call_primitive("sum", std::vector<CallArg>{{"", Value(x.tile)},
                                                          {"axis", Value(axes_list(axes))},
                                                          {"keepdims", Value(true)},
                                                          {"dtype", Value(std::string(dtype_name(dt)))}})
                   .as_array();
  Shape kshape = kept(full_span(x.shape), axes).shape();
  Array whole = Array::zeros(dt, kshape);
  Span box = kept(x.span(), axes);
  copy_box(part, box.start, whole, std::vector<int64_t>(kshape.size(), 0), box);
  int64_t count = extent_over(x.shape, axes);
  Shape shape = x.shape;
  auto done = [mean, count, dt, shape, axes, keepdims](const Value& v) {
    Array r = v.as_array();
    if (mean) {
      r = call_primitive("divide", std::vector<Value>{Value(r), Value(count)}).as_array();
      if (r.dtype() != dt) r = r.astype(dt);
    }
    return finish_reduction(r, shape, axes, keepdims);
  };
  if (x.num_localities() == 1) return Future<Value>::ready(done(Value(whole)));
  return detail::all_reduce(whole, ReduceOp::sum, a.site(), x.group).then(done);
}

// An array of `shape` filled with the identity of max (lowest value) or min.
Array identity_filled(DType dt, const Shape& shape, bool is_max) {
  Array out(dt, shape);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (std::is_same_v<T, bool>) {
      v = !is_max;
    } else if constexpr (std::is_floating_point_v<T>) {
      v = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    } else {
      v = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
    std::fill_n(out.data<T>(), out.size(), v);
  });
  return out;
}

// Whether locality r's tile has elements along every reduced axis (an empty
// lane contributes nothing to max, min, argmax or argmin).
bool contributes(const Span& s, const std::vector<int>& axes) {
  return s.size() > 0 && extent_over(s.shape(), axes) > 0;
}

void check_not_empty(Args& a, const TiledArray& x, const std::vector<int>& axes, Reduction kind) {
  if (extent_over(x.shape, axes) != 0) return;
  std::string op = a.op();
  if (kind == Reduction::argmax || kind == Reduction::argmin) {
    throw std::invalid_argument(error_message("[", op, "] attempt to get ", op, " of an empty sequence: shape ",
                                              shape_str(x.shape)));
  }
  throw std::invalid_argument(error_message("[", op, "] zero-size array to reduction operation ", op,
                                            " which has no identity: shape ", shape_str(x.shape)));
}

// max and min across localities: every locality's partial (kept layout,
// flattened) gathered by one all_gather and combined in locality order with
// maximum/minimum, which propagate NaN as numpy.max does.
Future<Value> reduce_extreme(Args& a, const TiledArray& x, const std::vector<int>& axes, bool keepdims,
                             bool is_max) {
  Array part(x.dtype(), {0});
  if (contributes(x.span(), axes)) {
    part = call_primitive(is_max ? "max" : "min", std::vector<CallArg>{{"", Value(x.tile)},
                                                                        {"axis", Value(axes_list(axes))},
                                                                        {"keepdims", Value(true)}})
               .as_array();
    part = part.reshaped({part.size()});
  }
  TiledArray xc = x;
  auto combine = [xc, axes, keepdims, is_max](const Value& parts) {
    const List& l = parts.as_list();
    Shape kshape = kept(full_span(xc.shape), axes).shape();
    Array whole = identity_filled(xc.dtype(), kshape, is_max);
    std::vector<int64_t> origin(kshape.size(), 0);
    for (size_t r = 0; r < l.size(); ++r) {
      if (!contributes(xc.spans[r], axes)) continue;
      Span box = kept(xc.spans[r], axes);
      Array p = l[r].as_array().reshaped(box.shape());
      Array current = extract(whole, full_span(kshape), box);
      Array best = call_primitive(is_max ? "maximum" : "minimum", std::vector<Value>{Value(current), Value(p)})
                       .as_array();
      copy_box(best, box.start, whole, origin, box);
    }
    return finish_reduction(whole, xc.shape, axes, keepdims);
  };
  if (x.num_localities() == 1) return Future<Value>::ready(combine(Value(List{Value(part)})));
  return detail::all_gather(part, 0, a.site(), x.group).then(combine);
}

// The bits of value i of `v` as int64 (floats widened to double), for
// sending values of any dtype with their int64 indices in one message.
int64_t value_bits(const Array& v, int64_t i) {
  if (is_floating(v.dtype())) {
    double d = v.get_double(i);
    int64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
  }
  return v.get_int(i);
}

// argmax and argmin across localities: each locality's best value per lane
// with its global index, gathered by one all_gather; the best value wins,
// ties go to the smallest global index and the first NaN wins (numpy).
Future<Value> reduce_arg(Args& a, const TiledArray& x, const std::vector<int>& axes, bool keepdims, bool is_max,
                         bool flat) {
  const char* name = is_max ? "argmax" : "argmin";
  std::vector<int64_t> buf;
  if (contributes(x.span(), axes)) {
    const Span& s = x.span();
    if (flat) {
      int64_t local = call_primitive(name, std::vector<Value>{Value(x.tile)}).as_array().get_int(0);
      // Local flat index to global flat index.
      Shape ts = s.shape();
      int64_t rest = local, global = 0, stride = 1;
      for (int d = x.ndim() - 1; d >= 0; --d) {
        int64_t i = rest % ts[d];
        rest /= ts[d];
        global += (s.start[d] + i) * stride;
        stride *= x.shape[d];
      }
      buf = {value_bits(x.tile, local), global};
    } else {
      int ax = axes[0];
      Array idx = call_primitive(name, std::vector<CallArg>{{"", Value(x.tile)},
                                                             {"axis", Value(int64_t{ax})},
                                                             {"keepdims", Value(true)}})
                      .as_array();
      Array vals = call_primitive("take_along_axis",
                                  std::vector<Value>{Value(x.tile), Value(idx), Value(int64_t{ax})})
                       .as_array();
      buf.resize(static_cast<size_t>(2 * idx.size()));
      for (int64_t i = 0; i < idx.size(); ++i) {
        buf[i] = value_bits(vals, i);
        buf[idx.size() + i] = idx.get_int(i) + s.start[ax];
      }
    }
  }
  Array part = Array::from_vector(buf, {static_cast<int64_t>(buf.size())});
  TiledArray xc = x;
  auto combine = [xc, axes, keepdims, is_max](const Value& parts) {
    const List& l = parts.as_list();
    Shape kshape = kept(full_span(xc.shape), axes).shape();
    std::vector<int64_t> kstrides = contiguous_strides(kshape);
    const int64_t total = shape_size(kshape);
    std::vector<int64_t> best_bits(total, 0), best_index(total, -1);
    const bool floating = is_floating(xc.dtype());
    auto as_double = [](int64_t b) {
      double d;
      std::memcpy(&d, &b, sizeof d);
      return d;
    };
    // True when (value v, index i) beats the current (V, I) as numpy would pick.
    auto better = [&](int64_t v, int64_t i, int64_t V, int64_t I) {
      if (floating) {
        double dv = as_double(v), dV = as_double(V);
        if (std::isnan(dV)) return std::isnan(dv) && i < I;
        if (std::isnan(dv)) return true;
        if (dv == dV) return i < I;
        return is_max ? dv > dV : dv < dV;
      }
      if (v == V) return i < I;
      return is_max ? v > V : v < V;
    };
    for (size_t r = 0; r < l.size(); ++r) {
      if (!contributes(xc.spans[r], axes)) continue;
      Span box = kept(xc.spans[r], axes);
      const Array& p = l[r].as_array();
      const int64_t m = box.size();
      const int64_t* data = p.data<int64_t>();
      // Walk the box in C order; k is the element's position in the box.
      std::vector<int64_t> at = box.start;
      for (int64_t k = 0; k < m; ++k) {
        int64_t pos = 0;
        for (size_t d = 0; d < at.size(); ++d) pos += at[d] * kstrides[d];
        int64_t v = data[k], i = data[m + k];
        if (best_index[pos] < 0 || better(v, i, best_bits[pos], best_index[pos])) {
          best_bits[pos] = v;
          best_index[pos] = i;
        }
        for (int d = static_cast<int>(at.size()) - 1; d >= 0; --d) {
          if (++at[d] < box.stop[d]) break;
          at[d] = box.start[d];
        }
      }
    }
    Array out = Array::from_vector(best_index, kshape);
    return finish_reduction(out, xc.shape, axes, keepdims);
  };
  if (x.num_localities() == 1) return Future<Value>::ready(combine(Value(List{Value(part)})));
  return detail::all_gather(part, 0, a.site(), x.group).then(combine);
}

Future<Value> reduction_overload(const PrimitiveSpec& spec, Args& a) {
  if (!a[0].is_tiled()) {
    throw TypeError(error_message("[", a.op(), "] takes a tiled array only as argument 'x'"));
  }
  const TiledArray& x = a[0].as_tiled();
  Reduction kind = reduction_of(spec.name);
  std::vector<int> axes = reduced_axes(a, kind, x.ndim());
  bool keepdims = a.boolean(2);
  std::vector<int> tiled = tiled_axes(x);
  bool crosses = false;
  for (int ax : axes) crosses = crosses || std::find(tiled.begin(), tiled.end(), ax) != tiled.end();
  if (!crosses) {
    // Every lane lies in one tile: reduce locally; the result keeps the
    // tiling of the axes that remain.
    std::vector<Value> values;
    for (size_t i = 0; i < a.size(); ++i) values.push_back(a[i]);
    values[0] = Value(x.tile);
    Args local(spec, std::move(values));
    Value r = spec.eval(local);
    if (static_cast<int>(axes.size()) == x.ndim() || !r.is_array()) return Future<Value>::ready(r);
    std::vector<Span> spans;
    for (const Span& s : x.spans) spans.push_back(keepdims ? kept(s, axes) : span_without(s, axes));
    Shape shape = keepdims ? kept(full_span(x.shape), axes).shape() : without_axes(x.shape, axes);
    std::string name = x.tiling;
    std::vector<int> along = tiled_axes(x);
    if (!keepdims && along.size() == 1) {
      int before = 0;
      for (int ax : axes) before += ax < along[0] ? 1 : 0;
      name = moved_name(name, along[0] - before, static_cast<int>(shape.size()));
    }
    return Future<Value>::ready(Value(make_tiled(r.as_array(), shape, spans, name, x.group)));
  }
  if (!is_partition(x.spans)) {
    throw std::invalid_argument(error_message("[", a.op(), "] cannot reduce along a tiled axis of ", x.describe(),
                                              ": its spans overlap (", first_overlap(x.spans),
                                              "); retile_d(x, \"rows\") makes a tiling without overlap"));
  }
  switch (kind) {
    case Reduction::sum: return reduce_sum(a, x, axes, keepdims, false);
    case Reduction::mean: return reduce_sum(a, x, axes, keepdims, true);
    case Reduction::max:
    case Reduction::min:
      check_not_empty(a, x, axes, kind);
      return reduce_extreme(a, x, axes, keepdims, kind == Reduction::max);
    default:
      check_not_empty(a, x, axes, kind);
      return reduce_arg(a, x, axes, keepdims, kind == Reduction::argmax, a.is_nil(1));
  }
}

// ---------------------------------------------------------------- other overloads

Future<Value> matmul_overload(const PrimitiveSpec&, Args& a) { return dot_tiled(a, a.op()); }

// matmul_tn(x, y), which the compiler makes of transpose(x) @ y: x transposed
// (a tiled x without communication), then as matmul.
Future<Value> matmul_tn_overload(const PrimitiveSpec&, Args& a) {
  if (a[0].is_tiled()) {
    const TiledArray& x = a[0].as_tiled();
    a.at(0) = permuted(x, reversed_axes(x.ndim()));
  } else {
    a.at(0) = call_primitive("transpose", std::vector<Value>{a[0]});
  }
  return dot_tiled(a, "matmul");
}

Future<Value> transpose_overload(const PrimitiveSpec&, Args& a) {
  const TiledArray& x = tiled_arg(a, 0);
  std::vector<int> perm = reversed_axes(x.ndim());
  if (!a.is_nil(1)) {
    std::vector<int64_t> given = a.int_list(1);
    if (static_cast<int>(given.size()) != x.ndim()) {
      throw std::invalid_argument(error_message("[", a.op(), "] axes ", a[1].str(), " don't match an array of ",
                                                x.ndim(), " dimensions"));
    }
    std::vector<bool> seen(x.ndim(), false);
    for (size_t i = 0; i < given.size(); ++i) {
      perm[i] = normalize_axis(given[i], x.ndim(), a.op());
      if (seen[perm[i]]) {
        throw std::invalid_argument(error_message("[", a.op(), "] repeated axis in transpose: ", a[1].str()));
      }
      seen[perm[i]] = true;
    }
  }
  return Future<Value>::ready(permuted(x, perm));
}

Future<Value> shape_overload(const PrimitiveSpec& spec, Args& a) {
  const TiledArray& x = tiled_arg(a, 0);
  if (spec.name == "ndim") return Future<Value>::ready(Value(int64_t{x.ndim()}));
  if (spec.name == "size") return Future<Value>::ready(Value(shape_size(x.shape)));
  List out;
  for (int64_t d : x.shape) out.push_back(Value(d));
  return Future<Value>::ready(Value::tuple(std::move(out)));
}

const bool tiled_overloads_registered = [] {
  for (const char* family : {"family:arithmetic", "family:comparison"}) {
    register_tiled_overload(family, elementwise_overload);
  }
  // The elementwise activations and their gradient rules.
  for (const char* name : {"relu", "relu_grad", "sigmoid", "sigmoid_grad", "softplus", "softplus_grad", "elu",
                           "elu_grad", "gelu", "gelu_grad", "leaky_relu", "leaky_relu_grad", "tanh_grad"}) {
    register_tiled_overload(name, elementwise_overload);
  }
  // bias_add (b broadcast along the last axis), and the arrays made like x,
  // which gradients need (zeros_like for a parameter that gets no cotangent).
  for (const char* name : {"bias_add", "zeros_like", "ones_like", "full_like", "empty_like"}) {
    register_tiled_overload(name, elementwise_overload);
  }
  for (const char* name : {"allclose", "array_equal"}) register_tiled_overload(name, all_true_overload);
  for (const char* name : {"sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin"}) {
    register_tiled_overload(name, reduction_overload);
  }
  for (const char* name : {"matmul", "dot"}) register_tiled_overload(name, matmul_overload);
  register_tiled_overload("matmul_tn", matmul_tn_overload);
  register_tiled_overload("transpose", transpose_overload);
  for (const char* name : {"shape", "ndim", "size"}) register_tiled_overload(name, shape_overload);
  return true;
}();

}  // namespace
}  // namespace tessera::distributed
