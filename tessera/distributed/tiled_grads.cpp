// Gradients through tiled arrays: the tiled overloads (registry.hpp) of the
// helpers that gradient programs are made of (grad_seed, unbroadcast,
// reduce_grad, bias_add_grad, matmul_grad_x, matmul_grad_y,
// matmul_tn_grad_x; tessera/primitives/autodiff.cpp has their single-process
// forms), and retile_d_grad, the rule of retile_d and all_gather_d, so that
// grad of a program on tiled arrays is the single-process gradient of the
// same computation on the whole arrays.
//
// The convention: a plain value computed from tiled arrays (sum(t), a loss)
// is one value that every locality holds, and its cotangent is the cotangent
// of that one value, the same on every locality (not the sum of N copies).
// The cotangent of a tiled array is tiled like it; the cotangent of a plain
// (or replicated) parameter is the whole gradient on every locality. So where
// a plain value meets a tiled one (y = t + b with a plain b broadcast against
// the whole), each locality sums its tile of the cotangent back to its part of
// b, and one all_reduce adds the parts. These are the only communications the
// rules add; they are asynchronous (the overloads return futures), so no
// worker waits. A replicated tiled array acts as a plain value: every
// locality holds the whole, and its contribution, so nothing is added up.
//
// This agrees with conv1d_d's rules (conv_d.cpp): the cotangent of a tiling
// that partitions the array is the whole-array gradient tiled like it. The
// explicit collectives keep their own convention, the sum of every
// locality's loss (docs/distributed.md, "Gradients of tiled programs").
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/tiled.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/distributed/tiled_ops.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {
namespace {

using namespace detail;

Value shape_value(const Shape& s) {
  List l;
  for (int64_t d : s) l.push_back(Value(d));
  return Value(std::move(l));
}

// True when the tiles of t are separate parts of the whole, whose
// contributions to a plain parameter add up: a partition, or an overlapped
// tiling (each copy of a shared element is an input of its own). False when
// every locality holds the whole by intent (replicated).
bool tiles_are_parts(const TiledArray& t) { return t.tiling == "overlapped" || !acts_replicated(t); }

bool is_parts(const Value& v) { return v.is_tiled() && tiles_are_parts(v.as_tiled()); }

// This locality's contribution to the cotangent of a plain x of shape xs
// broadcast against the whole of g: its tile of g summed over the broadcast
// axes, placed where its span lies in x, zeros elsewhere.
Array local_part(const TiledArray& g, const Shape& xs, const char* op) {
  const int off = g.ndim() - static_cast<int>(xs.size());
  bool fits = off >= 0;
  for (int e = 0; fits && e < static_cast<int>(xs.size()); ++e) fits = xs[e] == 1 || xs[e] == g.shape[e + off];
  if (!fits) {
    throw std::invalid_argument(error_message("[", op, "] the cotangent ", g.describe(),
                                              " cannot be summed back to shape ", shape_str(xs),
                                              ": the shapes do not broadcast"));
  }
  Array tile = is_floating(g.dtype()) ? g.tile : g.tile.astype(DType::float64);
  const Span& mine = g.span();
  Span box = full_span(xs);
  List axes;
  for (int d = 0; d < g.ndim(); ++d) {
    const int e = d - off;
    if (e >= 0 && xs[e] == g.shape[d]) {
      box.start[e] = mine.start[d];
      box.stop[e] = mine.stop[d];
    } else {
      axes.push_back(Value(int64_t{d}));
    }
  }
  Array out = Array::zeros(tile.dtype(), xs);
  if (mine.empty()) return out;
  Array summed = tile;
  if (!axes.empty()) {
    summed = call_primitive("sum", std::vector<CallArg>{{"", Value(tile)},
                                                        {"axis", Value(std::move(axes))},
                                                        {"keepdims", Value(true)}})
                 .as_array();
  }
  copy_box(summed.reshaped(box.shape()), box.start, out, std::vector<int64_t>(xs.size(), 0), box);
  return out;
}

// `part` added over the localities when g's tiles are parts (one all_reduce).
Future<Value> added_up(Array part, const TiledArray& g, const std::string& site) {
  if (!tiles_are_parts(g) || g.num_localities() == 1) return Future<Value>::ready(Value(std::move(part)));
  return detail::all_reduce(part, ReduceOp::sum, site, g.group);
}

// A plain cotangent `v` held by every locality, as the cotangent of a
// replicated tiled x: tiled like it.
Value replicated_like(const TiledArray& x, const Value& v, const char* op) {
  Array whole = to_array(v, op);
  if (whole.shape() != x.tile.shape()) {
    throw std::invalid_argument(error_message("[", op, "] the cotangent of ", x.describe(), " has shape ",
                                              shape_str(whole.shape())));
  }
  TiledArray t = x;
  t.tile = std::move(whole);
  return Value(std::move(t));
}

// The cotangent of a plain x (an array, or a Python-like number) from the
// tiled g it was broadcast into: every locality's part added up; cast to x's
// float dtype as unbroadcast does.
Future<Value> plain_cotangent(const TiledArray& g, const Value& x, Args& a) {
  if (!x.is_numeric()) a.type_error(1, "a number, an array or a tiled array");
  const bool number = !x.is_array();
  Shape xs = number ? Shape{} : x.as_array().shape();
  std::optional<DType> cast;
  if (!number && is_floating(x.as_array().dtype())) cast = x.as_array().dtype();
  return added_up(local_part(g, xs, a.op()), g, a.site()).then([number, cast](const Value& v) {
    const Array& r = v.as_array();
    if (number) return Value(r.get_double(0));
    return Value(cast && r.dtype() != *cast ? r.astype(*cast) : r);
  });
}

// grad_seed(out) for a tiled value of one element (the product of two
// replicated vectors, say): ones tiled like it.
Future<Value> grad_seed_overload(const PrimitiveSpec&, Args& a) {
  const TiledArray& out = tiled_arg(a, 0);
  if (shape_size(out.shape) != 1) {
    throw std::invalid_argument(error_message("[grad] the differentiated function must return a single number, got ",
                                              out.describe()));
  }
  TiledArray seed = out;
  seed.tile = Array::full(is_floating(out.dtype()) ? out.dtype() : DType::float64, out.tile.shape(), 1.0);
  return Future<Value>::ready(Value(std::move(seed)));
}

// unbroadcast(g, x) when g or x is tiled.
Future<Value> unbroadcast_overload(const PrimitiveSpec& spec, Args& a) {
  const Value& g = a[0];
  const Value& x = a[1];
  if (g.is_nil()) return Future<Value>::ready(g);
  if (!x.is_tiled()) return plain_cotangent(g.as_tiled(), x, a);
  const TiledArray& xt = x.as_tiled();
  const bool replicated = acts_replicated(xt) && xt.tiling != "overlapped";
  if (!replicated || (g.is_tiled() && g.as_tiled().same_tiling(xt))) {
    // The single-process form checks that g is tiled like x and casts it.
    return Future<Value>::ready(spec.eval(a));
  }
  // A replicated x is a plain value every locality holds.
  auto wrap = [xp = x.tiled_ptr()](const Value& v) { return replicated_like(*xp, v, "unbroadcast"); };
  if (g.is_tiled()) return plain_cotangent(g.as_tiled(), Value(xt.tile), a).then(wrap);
  Value plain = call_primitive("unbroadcast", std::vector<Value>{g, Value(xt.tile)});
  return Future<Value>::ready(wrap(plain));
}

// The reduced axes of reduce_grad's `axis` (argument 2) for an x of nd
// dimensions, sorted and unique; all of them for nil.
std::vector<int> reduced_axes(Args& a, int nd) {
  std::vector<int> axes;
  if (a.is_nil(2)) {
    for (int d = 0; d < nd; ++d) axes.push_back(d);
    return axes;
  }
  for (int64_t ax : a.int_list(2)) axes.push_back(normalize_axis(ax, nd, a.op()));
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

// reduce_grad(g, x, axis, keepdims) for a tiled x: this locality's part of g
// broadcast over its tile, tiled like x. g is tiled when the reduction kept
// x's tiling (along untiled axes) and plain when it crossed tiles; either way
// no communication.
Future<Value> reduce_grad_overload(const PrimitiveSpec&, Args& a) {
  if (!a[1].is_tiled()) {
    throw TypeError(error_message("[", a.op(), "] the cotangent ", a[0].describe(), " of a reduction of ",
                                  a[1].describe(), " cannot be tiled"));
  }
  const TiledArray& x = a[1].as_tiled();
  std::vector<int> axes = reduced_axes(a, x.ndim());
  const bool keepdims = a.boolean(3);
  Shape kept_shape = x.shape, reduced;
  Span box = x.span();
  for (int d = 0; d < x.ndim(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      reduced.push_back(x.shape[d]);
    } else {
      kept_shape[d] = 1;
      box.start[d] = 0;
      box.stop[d] = 1;
    }
  }
  const Shape& expected = keepdims ? kept_shape : reduced;
  Array part;
  if (a[0].is_tiled()) {
    const TiledArray& g = a[0].as_tiled();
    if (g.shape != expected || g.tile.size() != box.size()) {
      throw std::invalid_argument(error_message("[", a.op(), "] the cotangent ", g.describe(), " with spans ",
                                                spans_str(g.spans), " does not match the reduction of ",
                                                x.describe(), " with spans ", spans_str(x.spans), " (expected shape ",
                                                shape_str(expected), ", tiled like x)"));
    }
    part = g.tile.reshaped(box.shape());
  } else {
    if (!a[0].is_numeric()) a.type_error(0, "a number, an array or a tiled array");
    Array g = a.array(0);
    if (g.shape() != expected) {
      throw std::invalid_argument(error_message("[", a.op(), "] cotangent of shape ", shape_str(g.shape()),
                                                " does not match the reduction of ", x.describe(), " (expected ",
                                                shape_str(expected), ")"));
    }
    part = extract(g.reshaped(kept_shape), full_span(kept_shape), box);
  }
  Array tile =
      call_primitive("broadcast_to", std::vector<Value>{Value(part), shape_value(x.tile.shape())}).as_array();
  TiledArray t = x;
  t.tile = std::move(tile);
  return Future<Value>::ready(Value(std::move(t)));
}

// bias_add_grad(g) for a tiled g: g summed over every axis but the last,
// every locality's part added up: a plain array, the same everywhere.
Future<Value> bias_add_grad_overload(const PrimitiveSpec&, Args& a) {
  const TiledArray& g = tiled_arg(a, 0);
  if (g.ndim() == 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] g must have a channel axis, got ", g.describe()));
  }
  return added_up(local_part(g, Shape{g.shape.back()}, a.op()), g, a.site());
}

// matmul_grad_x(g, x, y), matmul_grad_y(g, x, y) and matmul_tn_grad_x(g, x,
// y) for the products dot_d makes (tessera/distributed/tiled_ops.cpp, dot_tiled;
// matmul_tn's other rule is a matmul): the single-process rule on
// the local operands (tiles, plain arrays), which gives a tiled operand's
// cotangent tile; a plain operand multiplied with a tiled one gets every
// locality's part added up (one all_reduce).
Future<Value> matmul_grad_overload(const PrimitiveSpec& spec, Args& a) {
  const bool for_x = spec.name != "matmul_grad_y";
  auto local = [](const Value& v) { return v.is_tiled() ? Value(v.as_tiled().tile) : v; };
  Value r = call_primitive(spec.name, std::vector<Value>{local(a[0]), local(a[1]), local(a[2])});
  const Value& target = a[for_x ? 1 : 2];
  const Value& other = a[for_x ? 2 : 1];
  if (is_parts(target)) {
    const TiledArray& t = target.as_tiled();
    Array tile = to_array(r, a.op());
    if (tile.shape() != t.tile.shape()) {
      throw std::invalid_argument(error_message("[", a.op(), "] the cotangent tile of ", t.describe(),
                                                " has shape ", shape_str(tile.shape()), " but its tile has shape ",
                                                shape_str(t.tile.shape()), "; the tilings of g, x and y do not "
                                                "belong to one product"));
    }
    TiledArray out = t;
    out.tile = std::move(tile);
    return Future<Value>::ready(Value(std::move(out)));
  }
  Future<Value> plain = is_parts(other) ? added_up(to_array(r, a.op()), other.as_tiled(), a.site())
                                        : Future<Value>::ready(r);
  if (!target.is_tiled()) return plain;
  return plain.then([tp = target.tiled_ptr(), op = spec.name](const Value& v) {
    return replicated_like(*tp, v, op.c_str());
  });
}

// ---------------------------------------------------------------- retile_d_grad
//
// y = retile_d(x, tiling) copies elements: locality q's tile of y holds, for
// each element of its new span, its own copy when x's tile at q holds the
// element, else the copy of the highest locality r holding it (move_tiles in
// tiled_ops.cpp writes the received parts in locality order, then its own).
// The cotangent of each copy of x is the sum of the cotangents of the
// elements of y read from it: for tilings that partition the array this is
// g moved back to x's spans, a retile_d of g; where tiles overlap, only the
// copy that was read gets a cotangent, and an element of y held by several
// localities (an overlapped y) adds the cotangents of its copies.
//
// A replicated y (and all_gather_d's plain result) is one whole value that
// every locality holds with its whole cotangent (tiled_grads.cpp's
// convention, as for sum(t)): each locality takes its own span of g, and
// nothing travels. A replicated x is one value too: every locality adds its
// tile of g where it lies in x, one all_reduce sums the parts, and every
// locality holds the whole cotangent.

// Point-to-point tags of retile_d_grad: a call site's n-th call gets the same
// tag on every locality, different from retile_d's own at that site.
int retile_grad_tag(const std::string& site) {
  static std::mutex mu;
  static std::map<std::string, uint64_t> calls;
  uint64_t seq;
  {
    std::lock_guard lock(mu);
    seq = calls[site]++;
  }
  return detail::internal_tag("retile_d_grad", site, seq);
}

bool holds(const Span& s, const std::vector<int64_t>& at) {
  for (int d = 0; d < s.ndim(); ++d) {
    if (at[d] < s.start[d] || at[d] >= s.stop[d]) return false;
  }
  return true;
}

// out (the tile of out_span) += part (the elements of `box`), except the
// elements whose global index `skip` rejects; part and out share a float dtype.
template <class Skip>
void add_box(const Array& part, const Span& box, Array& out, const Span& out_span, Skip skip) {
  if (box.empty()) return;
  const int nd = box.ndim();
  std::vector<int64_t> ps = contiguous_strides(part.shape()), os = contiguous_strides(out.shape());
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* p = part.data<T>();
      T* o = out.data<T>();
      std::vector<int64_t> at = box.start;
      for (;;) {
        int64_t po = 0, oo = 0;
        for (int d = 0; d < nd; ++d) {
          po += (at[d] - box.start[d]) * ps[d];
          oo += (at[d] - out_span.start[d]) * os[d];
        }
        if (!skip(at)) o[oo] += p[po];
        int d = nd - 1;
        while (d >= 0 && ++at[d] == box.stop[d]) {
          at[d] = box.start[d];
          --d;
        }
        if (d < 0) return;
      }
    }
  });
}

// retile_d_grad's g as a tiled array of a float dtype: a plain g (the
// cotangent of all_gather_d's result) is the whole cotangent, held by every
// locality.
TiledArray tiled_cotangent(Args& a, const TiledArray& x) {
  TiledArray g;
  if (a[0].is_tiled()) {
    g = a[0].as_tiled();
  } else {
    if (!a[0].is_numeric()) a.type_error(0, "a number, an array or a tiled array");
    Array whole = a.array(0);
    g = make_tiled(whole, whole.shape(), std::vector<Span>(x.num_localities(), full_span(whole.shape())),
                   "replicated", x.group);
  }
  if (g.shape != x.shape || g.group != x.group) {
    throw std::invalid_argument(error_message("[", a.op(), "] the cotangent ", g.describe(), " does not match ",
                                              x.describe(), g.shape != x.shape ? ": the shapes differ"
                                                                                : ": the groups differ"));
  }
  if (!is_floating(g.dtype())) g.tile = g.tile.astype(DType::float64);
  return g;
}

Future<Value> retile_d_grad_async(Args& a) {
  // all_gather_d returns a plain x as it is.
  if (!a[1].is_tiled()) return Future<Value>::ready(a[0]);
  const TiledArray& x = a[1].as_tiled();
  TiledArray g = tiled_cotangent(a, x);
  const int n = x.num_localities(), me = x.locality;
  const std::vector<Span>& src = x.spans;
  const DType dt = g.dtype();
  auto like_x = [xp = a[1].tiled_ptr()](Array tile) {
    TiledArray t = *xp;
    t.tile = std::move(tile);
    return Value(std::move(t));
  };
  // True when some locality above r (other than `except`) holds the element:
  // its copy, not r's, is the one read.
  const bool overlapped = !is_partition(x.spans);
  auto read_elsewhere = [src, overlapped](int r, int except) {
    return [src, overlapped, r, except](const std::vector<int64_t>& at) {
      if (!overlapped) return false;
      if (except >= 0 && holds(src[except], at)) return true;
      for (int q = r + 1; q < static_cast<int>(src.size()); ++q) {
        if (q != except && holds(src[q], at)) return true;
      }
      return false;
    };
  };
  if (!tiles_are_parts(g)) {
    if (!tiles_are_parts(x)) return Future<Value>::ready(like_x(g.tile));
    Array tile = Array::zeros(dt, src[me].shape());
    add_box(extract(g.tile, g.span(), src[me]), src[me], tile, src[me], read_elsewhere(me, -1));
    return Future<Value>::ready(like_x(std::move(tile)));
  }
  if (!tiles_are_parts(x)) {
    Array whole = Array::zeros(dt, x.shape);
    add_box(g.tile, g.span(), whole, full_span(x.shape), [](const std::vector<int64_t>&) { return false; });
    if (n == 1) return Future<Value>::ready(like_x(std::move(whole)));
    return detail::all_reduce(whole, ReduceOp::sum, a.site(), x.group).then([like_x](const Value& v) {
      return like_x(v.as_array());
    });
  }
  // Both are parts: the exchange of retile_d reversed. Locality q read from r
  // (r != q) the overlap of r's old span with q's new one, unless q held its
  // whole new span itself; q sends g's part over that overlap back to r.
  const std::vector<Span>& dst = g.spans;
  auto read = [&](int r, int q) {
    return r != q && !contains(src[q], dst[q]) && !intersect(src[r], dst[q]).empty();
  };
  const int tag = retile_grad_tag(a.site());
  const GroupInfo members = group_of(x);  // spans by group rank, messages by world rank
  const std::string site = a.site();
  std::vector<Future<Value>> pending;
  for (int r = 0; r < n; ++r) {
    if (read(r, me)) {
      pending.push_back(detail::send(extract(g.tile, dst[me], intersect(src[r], dst[me])), members.world_rank(r), tag,
                                     site));
    }
  }
  const size_t first_recv = pending.size();
  std::vector<int> from;
  for (int q = 0; q < n; ++q) {
    if (read(me, q)) {
      pending.push_back(detail::recv(members.world_rank(q), tag, site));
      from.push_back(q);
    }
  }
  auto assemble = [g, src, dst, me, dt, from, first_recv, like_x, read_elsewhere](const std::vector<Value>& got) {
    Array out = Array::zeros(dt, src[me].shape());
    // The elements of y a locality holds in its own x tile were read from it.
    Span own = intersect(src[me], dst[me]);
    add_box(extract(g.tile, dst[me], own), own, out, src[me], [](const std::vector<int64_t>&) { return false; });
    for (size_t i = 0; i < from.size(); ++i) {
      Span box = intersect(src[me], dst[from[i]]);
      const Array& part = got[first_recv + i].as_array();
      if (part.shape() != box.shape() || part.dtype() != dt) {
        throw std::runtime_error(error_message("[retile_d_grad] locality ", me, " received a ",
                                               dtype_name(part.dtype()), " part of shape ", shape_str(part.shape()),
                                               " from locality ", from[i], " where it expected ", dtype_name(dt), " ",
                                               shape_str(box.shape())));
      }
      add_box(part, box, out, src[me], read_elsewhere(me, from[i]));
    }
    return like_x(std::move(out));
  };
  if (pending.empty()) return Future<Value>::ready(assemble({}));
  return when_all(std::move(pending)).then(assemble);
}

const bool primitives_registered = register_primitives({
    async_spec({.name = "retile_d_grad",
                .family = "distributed",
                .params = {{"g"}, {"x"}},
                .help = "The cotangent of the tiled x in retile_d(x, tiling) or all_gather_d(x) given the cotangent "
                        "g of the result: g moved back to x's tiles, each copy of an overlapped tile getting the "
                        "part that was read from it.",
                .eval = nullptr,
                .grads = {}},
               retile_d_grad_async),
});

const bool tiled_grads_registered = [] {
  register_tiled_overload("grad_seed", grad_seed_overload);
  register_tiled_overload("unbroadcast", unbroadcast_overload);
  register_tiled_overload("reduce_grad", reduce_grad_overload);
  register_tiled_overload("bias_add_grad", bias_add_grad_overload);
  for (const char* name : {"matmul_grad_x", "matmul_grad_y", "matmul_tn_grad_x"}) {
    register_tiled_overload(name, matmul_grad_overload);
  }
  return true;
}();

}  // namespace
}  // namespace tessera::distributed
