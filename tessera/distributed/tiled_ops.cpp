// Tiled arrays across localities (family "distributed"): the primitives that make
// them (annotate_d, constant_d, random_d), move them (retile_d, all_gather_d,
// transpose_d) and multiply them (dot_d). The ordinary primitives take tiled
// arrays through the overloads of tiled_overloads.cpp.
//
// Every locality computes the same metadata (spans) from the same inputs, so
// checks that fail, fail on every locality with the same message. Values a
// locality alone knows (its tile's shape, the span it claims) are exchanged
// first, with one all_gather, and checked together. With one locality no MPI
// call is made.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/tiled.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/distributed/tiled_ops.hpp"
#include "tessera/kernels/random.hpp"
#include "tessera/primitives/random_key.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera::distributed::detail {
namespace {

// The tilings by name: the axis split across localities (numpy.array_split
// sizes) and the dimensions an array needs for it.
struct NamedTiling {
  const char* name;
  int axis;       // -1: replicated
  int min_ndim;
};

constexpr NamedTiling kNamedTilings[] = {
    {"rows", 0, 1}, {"columns", 1, 2}, {"pages", 0, 3}, {"replicated", -1, 0}};

const NamedTiling* find_named(const std::string& name) {
  for (const auto& t : kNamedTilings) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

// Axes along which some locality holds less than the whole extent.
std::vector<int> spans_axes(const TiledArray& t) {
  std::vector<int> out;
  for (int d = 0; d < t.ndim(); ++d) {
    for (const Span& s : t.spans) {
      if (s.start[d] != 0 || s.stop[d] != t.shape[d]) {
        out.push_back(d);
        break;
      }
    }
  }
  return out;
}

}  // namespace

Span intersect(const Span& a, const Span& b) {
  Span s = a;
  for (int d = 0; d < a.ndim(); ++d) {
    s.start[d] = std::max(a.start[d], b.start[d]);
    s.stop[d] = std::max(s.start[d], std::min(a.stop[d], b.stop[d]));
  }
  return s;
}

// True when every element of `inner` lies in `outer` (an empty inner always does).
bool contains(const Span& outer, const Span& inner) {
  if (inner.empty()) return true;
  for (int d = 0; d < outer.ndim(); ++d) {
    if (inner.start[d] < outer.start[d] || inner.stop[d] > outer.stop[d]) return false;
  }
  return true;
}

// "locality 0 [0:4, 0:3], locality 1 [4:7, 0:3]"
std::string spans_str(const std::vector<Span>& spans) {
  std::string s;
  for (size_t r = 0; r < spans.size(); ++r) s += error_message(r ? ", " : "", "locality ", r, " ", spans[r].str());
  return s;
}

// Copies the elements of `box` (global coordinates) from `src`, whose first
// element sits at global position `src_origin`, into `dst`, whose first
// element sits at `dst_origin`. Both have one dtype; runs along the last axis
// are copied whole.
void copy_box(const Array& src, const std::vector<int64_t>& src_origin, Array& dst,
              const std::vector<int64_t>& dst_origin, const Span& box) {
  if (box.empty()) return;
  const size_t es = dtype_size(src.dtype());
  const char* sp = static_cast<const char*>(src.raw());
  char* dp = static_cast<char*>(dst.raw());
  const int nd = box.ndim();
  if (nd == 0) {
    std::memcpy(dp, sp, es);
    return;
  }
  std::vector<int64_t> ss = contiguous_strides(src.shape()), ds = contiguous_strides(dst.shape());
  const size_t run = static_cast<size_t>(box.extent(nd - 1)) * es;
  std::vector<int64_t> at = box.start;
  for (;;) {
    int64_t so = 0, doff = 0;
    for (int d = 0; d < nd; ++d) {
      so += (at[d] - src_origin[d]) * ss[d];
      doff += (at[d] - dst_origin[d]) * ds[d];
    }
    std::memcpy(dp + doff * static_cast<int64_t>(es), sp + so * static_cast<int64_t>(es), run);
    int d = nd - 2;
    while (d >= 0 && ++at[d] == box.stop[d]) {
      at[d] = box.start[d];
      --d;
    }
    if (d < 0) return;
  }
}

// The part `box` of `tile` (which holds `tile_span`), as an array of its own.
Array extract(const Array& tile, const Span& tile_span, const Span& box) {
  if (box == tile_span) return tile;
  Array out(tile.dtype(), box.shape());
  copy_box(tile, tile_span.start, out, box.start, box);
  return out;
}

TiledArray make_tiled(Array tile, Shape shape, Spans spans, std::string tiling, int group) {
  GroupInfo g = group_info(group, "tiled");
  if (static_cast<int>(spans.size()) != g.size) {
    throw std::runtime_error(error_message("[tiled] internal error: ", spans.size(), " spans for a group of ",
                                           g.size, " localities (", g.name, ")"));
  }
  TiledArray t;
  t.locality = g.rank;
  t.group = group;
  t.group_name = g.name;
  t.tile = std::move(tile);
  t.shape = std::move(shape);
  t.spans = std::move(spans);
  t.tiling = std::move(tiling);
  if (t.tile.shape() != t.span().shape()) {
    throw std::runtime_error(error_message("[tiled] internal error: the tile of locality ", t.locality, " has shape ",
                                         shape_str(t.tile.shape()), " but its span ", t.span().str(), " has shape ",
                                         shape_str(t.span().shape())));
  }
  return t;
}

// True when no element lies in two localities' spans.
bool is_partition(const Spans& spans) { return spans.disjoint(); }

GroupInfo group_of(const TiledArray& t) { return group_info(t.group, "tiled"); }

void check_same_group(Args& a, size_t i, size_t j) {
  const TiledArray &x = a[i].as_tiled(), &y = a[j].as_tiled();
  if (x.group == y.group) return;
  throw std::invalid_argument(error_message(
      "[", a.op(), "] the tiled operands are tiled over different groups: '", a.param_name(i), "' is ",
      x.describe(), "; '", a.param_name(j), "' is ", y.describe(),
      ". Tile both over the same group (annotate_d(..., group=g)), or gather one first (all_gather_d)"));
}

const TiledArray& tiled_arg(Args& a, size_t i) {
  if (!a[i].is_tiled()) a.type_error(i, "a tiled array (made by annotate_d, constant_d or random_d)");
  return a[i].as_tiled();
}

// The axes a tiled array is tiled along: the axis of a named tiling (even
// when one locality holds it all, so that results have the same kind for any
// number of localities), else those along which some span is not whole.
std::vector<int> tiled_axes(const TiledArray& t) {
  const NamedTiling* named = find_named(t.tiling);
  if (!named) return spans_axes(t);
  if (named->axis < 0 || named->axis >= t.ndim()) return {};
  return {named->axis};
}

// True when every locality holds the whole array by intent: tiling
// 'replicated', or spans that are all whole (not a named tiling by one axis).
bool acts_replicated(const TiledArray& t) {
  const NamedTiling* named = find_named(t.tiling);
  if (named) return named->axis < 0;
  return t.replicated();
}

// The name of a tiling by one axis after that axis moved to `axis` of an
// array of `ndim` dimensions (by a transpose, a reduction, a product):
// spans-given tilings keep their name.
std::string moved_name(const std::string& name, int axis, int ndim) {
  const NamedTiling* named = find_named(name);
  if (!named || named->axis < 0) return name;
  if (name == "pages" && axis == 0 && ndim >= 3) return name;
  if (axis == 0) return "rows";
  if (axis == 1) return "columns";
  return "user";
}

// True when the two are tiled alike: the same spans, and the same tiling
// name unless one is given by spans.
bool same_layout(const TiledArray& a, const TiledArray& b) {
  if (!a.same_tiling(b)) return false;
  return a.tiling == b.tiling || !find_named(a.tiling) || !find_named(b.tiling);
}

// The overlap of two localities' spans, or "" when the spans are disjoint:
// the first pair in rank order where that is cheap to find, else the pair
// the sweep found (find_overlap).
std::string first_overlap(const Spans& spans) {
  std::optional<std::pair<size_t, size_t>> pair = find_overlap(spans);
  if (!pair) return "";
  auto [r, q] = *pair;
  if (spans.size() <= 1024) {
    for (size_t a = 0, found = 0; a < spans.size() && !found; ++a) {
      for (size_t b = a + 1; b < spans.size(); ++b) {
        if (!intersect(spans[a], spans[b]).empty()) {
          r = a, q = b, found = 1;
          break;
        }
      }
    }
  }
  return error_message("the spans of locality ", r, ", ", spans[r].str(), ", and locality ", q, ", ",
                       spans[q].str(), ", overlap in ", intersect(spans[r], spans[q]).str());
}

// x with its axes permuted by `perm` (spans permuted alike); no communication.
Value permuted(const TiledArray& x, const std::vector<int>& perm) {
  Shape shape;
  List axes;
  for (int p : perm) {
    shape.push_back(x.shape[p]);
    axes.push_back(Value(int64_t{p}));
  }
  std::vector<Span> spans;
  for (const Span& s : x.spans) {
    Span t;
    for (int p : perm) {
      t.start.push_back(s.start[p]);
      t.stop.push_back(s.stop[p]);
    }
    spans.push_back(std::move(t));
  }
  // A tiling by one axis follows its axis (rows become columns).
  std::string name = x.tiling;
  if (const NamedTiling* named = find_named(name); named && named->axis >= 0) {
    int moved = static_cast<int>(std::find(perm.begin(), perm.end(), named->axis) - perm.begin());
    name = moved_name(name, moved, x.ndim());
  }
  Array tile = call_primitive("transpose", std::vector<Value>{Value(x.tile), Value(axes)}).as_array().contiguous();
  return Value(make_tiled(tile, shape, spans, name, x.group));
}

std::vector<int> reversed_axes(int nd) {
  std::vector<int> perm;
  for (int d = nd - 1; d >= 0; --d) perm.push_back(d);
  return perm;
}

namespace {

// A tiled operand or a plain one (a replicated tiled array counts as plain).
struct Operand {
  const TiledArray* tiled = nullptr;
  Array plain;
  Shape shape;
};

Operand operand(Args& a, size_t i) {
  Operand o;
  if (a[i].is_tiled() && !acts_replicated(a[i].as_tiled())) {
    o.tiled = &a[i].as_tiled();
    o.shape = o.tiled->shape;
  } else {
    o.plain = a[i].is_tiled() ? a[i].as_tiled().tile : a.array(i);
    o.shape = o.plain.shape();
  }
  return o;
}

// True when `t` is tiled along no axis but `axis` (whole along the others).
bool only_along(const TiledArray& t, int axis) {
  for (int d : tiled_axes(t)) {
    if (d != axis) return false;
  }
  return true;
}

std::string operand_str(const Operand& o) {
  if (o.tiled) return o.tiled->describe() + " with spans " + spans_str(o.tiled->spans);
  return error_message("a plain ", dtype_name(o.plain.dtype()), " array of shape ", shape_str(o.shape));
}

Array local_dot(const Array& x, const Array& y) {
  return to_array(call_primitive("dot", std::vector<Value>{Value(x), Value(y)}), "dot_d");
}

}  // namespace

// numpy.dot of 1-d and 2-d operands where one or both are tiled.
Future<Value> dot_tiled(Args& a, const char* op) {
  Operand x = operand(a, 0), y = operand(a, 1);
  for (const Operand* o : {&x, &y}) {
    if (o->shape.size() < 1 || o->shape.size() > 2) {
      throw std::invalid_argument(error_message("[", op, "] tiled operands must be 1-d or 2-d, got ",
                                                operand_str(*o)));
    }
  }
  const int xn = static_cast<int>(x.shape.size()), yn = static_cast<int>(y.shape.size());
  const int64_t kx = x.shape[xn - 1], ky = y.shape[0];
  if (kx != ky) {
    throw std::invalid_argument(error_message("[", op, "] shapes ", shape_str(x.shape), " and ", shape_str(y.shape),
                                              " are not aligned: ", kx, " (dim ", xn - 1, ") != ", ky, " (dim 0)"));
  }
  Shape out_shape;
  if (xn == 2) out_shape.push_back(x.shape[0]);
  if (yn == 2) out_shape.push_back(y.shape[1]);
  const std::string xs = a.param_name(0), ys = a.param_name(1);
  if (a[0].is_tiled() && a[1].is_tiled()) check_same_group(a, 0, 1);
  // The group of the result: that of the tiled operands (every locality for two plain ones).
  const int group = a[0].is_tiled()   ? a[0].as_tiled().group
                    : a[1].is_tiled() ? a[1].as_tiled().group
                                      : 0;
  const GroupInfo members = group_info(group, op);
  auto unsupported = [&](const std::string& hint) -> Future<Value> {
    throw std::invalid_argument(error_message(
        "[", op, "] these tilings do not multiply without moving data: ", xs, " is ", operand_str(x), "; ", ys,
        " is ", operand_str(y), ". Supported: ", xs, " tiled by rows times a plain or replicated ", ys,
        "; a plain or replicated ", xs, " times ", ys, " tiled by columns; ", xs, " tiled along its last axis times ",
        ys, " tiled along its first axis with the same spans. ", hint));
  };
  if (!x.tiled && !y.tiled) {
    // Both replicated: every locality computes the whole.
    Array out = local_dot(x.plain, y.plain);
    return Future<Value>::ready(Value(make_tiled(out, out.shape(), std::vector<Span>(members.size, full_span(out.shape())),
                                                 "replicated", group)));
  }
  // Rows of x (2-d, whole along its last axis) times a replicated y.
  if (x.tiled && !y.tiled && xn == 2 && only_along(*x.tiled, 0)) {
    Array out = local_dot(x.tiled->tile, y.plain);
    std::vector<Span> spans;
    for (const Span& s : x.tiled->spans) {
      Span t = full_span(out_shape);
      t.start[0] = s.start[0];
      t.stop[0] = s.stop[0];
      spans.push_back(std::move(t));
    }
    return Future<Value>::ready(Value(make_tiled(out, out_shape, spans, x.tiled->tiling, group)));
  }
  // A replicated x times columns of y (2-d, whole along its first axis).
  if (!x.tiled && y.tiled && yn == 2 && only_along(*y.tiled, 1)) {
    Array out = local_dot(x.plain, y.tiled->tile);
    std::vector<Span> spans;
    for (const Span& s : y.tiled->spans) {
      Span t = full_span(out_shape);
      t.start[out_shape.size() - 1] = s.start[1];
      t.stop[out_shape.size() - 1] = s.stop[1];
      spans.push_back(std::move(t));
    }
    int axis = static_cast<int>(out_shape.size()) - 1;
    return Future<Value>::ready(
        Value(make_tiled(out, out_shape, spans, moved_name(y.tiled->tiling, axis, axis + 1), group)));
  }
  // The contracted axis tiled alike on both sides: partial products summed.
  if (x.tiled && y.tiled) {
    const TiledArray &tx = *x.tiled, &ty = *y.tiled;
    bool x_ok = only_along(tx, xn - 1);
    bool y_ok = only_along(ty, 0);
    bool same = true;
    for (size_t r = 0; r < tx.spans.size(); ++r) {
      same = same && tx.spans[r].start[xn - 1] == ty.spans[r].start[0] &&
             tx.spans[r].stop[xn - 1] == ty.spans[r].stop[0];
    }
    if (x_ok && y_ok && same) {
      if (!is_partition(tx.spans)) {
        return unsupported(error_message("The contracted axis is tiled with overlapping spans; retile_d ", xs,
                                         " and ", ys, " to a partition first."));
      }
      Array part = local_dot(tx.tile, ty.tile);
      DType dt = part.dtype();
      if (dt == DType::bool_) part = part.astype(DType::int64);
      if (members.size == 1) return Future<Value>::ready(Value(dt == DType::bool_ ? part.astype(dt) : part));
      return detail::all_reduce(part, ReduceOp::sum, a.site(), group).then([dt](const Value& v) {
        return dt == DType::bool_ ? Value(v.as_array().astype(dt)) : v;
      });
    }
    if (x_ok && y_ok) {
      return unsupported(error_message("They are tiled along the contracted axis with different spans: retile ",
                                       ys, " so that its rows are split like the columns of ", xs,
                                       " (retile_d with spans)."));
    }
  }
  return unsupported(error_message("Retile one first, e.g. retile_d(", ys, ", \"replicated\") when ", xs,
                                   " is tiled by rows."));
}

}  // namespace tessera::distributed::detail

namespace tessera::distributed {
namespace {

using namespace detail;

// ---------------------------------------------------------------- layouts

// `name`, or "replicated" when every span is the whole array.
std::string tiling_name_for(const std::string& name, const std::vector<Span>& spans, const Shape& shape) {
  for (const Span& s : spans) {
    if (!(s == full_span(shape))) return name;
  }
  return "replicated";
}

std::string unknown_tiling(const std::string& name) {
  return error_message("unknown tiling '", name,
                       "': expected 'rows', 'columns', 'pages', 'replicated' or spans (a [start, stop] pair "
                       "per dimension for this locality)");
}

// The spans of a named tiling of `shape` over every locality (numpy.array_split
// sizes along the tiled axis; some may be empty).
std::vector<Span> named_spans(const NamedTiling& t, const Shape& shape, const char* op, int group) {
  int n = group_info(group, op).size;
  if (t.axis < 0) return std::vector<Span>(n, full_span(shape));
  if (static_cast<int>(shape.size()) < t.min_ndim) {
    throw std::invalid_argument(error_message("[", op, "] tiling '", t.name, "' needs an array of at least ",
                                              t.min_ndim, " dimension", t.min_ndim == 1 ? "" : "s",
                                              ", got shape ", shape_str(shape)));
  }
  return split_spans(shape, t.axis, n);
}

// ---------------------------------------------------------------- claims

// What a locality alone knows and tells the others before tiles are put
// together: its tile's dtype and shape, the span it claims, the tiling it
// asked for, and a problem its own arguments have (checked by everyone
// together, so that a locality with bad arguments does not leave the others
// waiting in a collective).
struct Claim {
  int64_t dtype = 0;
  Shape tile_shape;
  std::optional<Span> span;
  std::string tiling;
  std::string problem;
};

void push_string(std::vector<int64_t>& v, const std::string& s) {
  v.push_back(static_cast<int64_t>(s.size()));
  for (unsigned char c : s) v.push_back(c);
}

std::string pop_string(const int64_t* p, size_t& i) {
  size_t n = static_cast<size_t>(p[i++]);
  std::string s;
  for (size_t k = 0; k < n; ++k) s += static_cast<char>(p[i++]);
  return s;
}

Array encode(const Claim& c) {
  std::vector<int64_t> v = {c.dtype, static_cast<int64_t>(c.tile_shape.size())};
  v.insert(v.end(), c.tile_shape.begin(), c.tile_shape.end());
  if (c.span) {
    v.push_back(c.span->ndim());
    v.insert(v.end(), c.span->start.begin(), c.span->start.end());
    v.insert(v.end(), c.span->stop.begin(), c.span->stop.end());
  } else {
    v.push_back(-1);
  }
  push_string(v, c.tiling);
  push_string(v, c.problem);
  return Array::from_vector(v, {static_cast<int64_t>(v.size())});
}

Claim decode(const Array& a) {
  const int64_t* p = a.data<int64_t>();
  size_t i = 0;
  Claim c;
  c.dtype = p[i++];
  int64_t nd = p[i++];
  c.tile_shape.assign(p + i, p + i + nd);
  i += static_cast<size_t>(nd);
  int64_t sd = p[i++];
  if (sd >= 0) {
    Span s;
    s.start.assign(p + i, p + i + sd);
    i += static_cast<size_t>(sd);
    s.stop.assign(p + i, p + i + sd);
    i += static_cast<size_t>(sd);
    c.span = std::move(s);
  }
  c.tiling = pop_string(p, i);
  c.problem = pop_string(p, i);
  return c;
}

// Every locality's claim, in locality order (one all_gather).
Future<std::vector<Claim>> exchange(Claim mine, const std::string& site, int group) {
  if (group_info(group, "tiled").size == 1) return Future<std::vector<Claim>>::ready({std::move(mine)});
  return detail::all_gather(encode(mine), 0, site, group).then([](const Value& parts) {
    std::vector<Claim> out;
    for (const Value& p : parts.as_list()) out.push_back(decode(p.as_array()));
    return out;
  });
}

// Throws the problems localities reported, naming them.
void raise_problems(const std::vector<Claim>& claims, const char* op) {
  std::string msg;
  for (size_t r = 0; r < claims.size(); ++r) {
    if (claims[r].problem.empty()) continue;
    if (!msg.empty()) msg += "; ";
    msg += claims.size() == 1 ? claims[r].problem : error_message("on locality ", r, ": ", claims[r].problem);
  }
  if (!msg.empty()) throw std::invalid_argument(error_message("[", op, "] ", msg));
}

// Reads one locality's span from spans given as a list of [start, stop]
// pairs (or an int array of shape (ndim, 2); one pair for a 1-d array may be
// given flat). Returns nullopt and sets `problem` when it is malformed.
std::optional<Span> parse_span(const Value& v, std::string& problem) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  auto bad = [&]() -> std::optional<Span> {
    problem = error_message("spans must be a list with a [start, stop] pair of ints per dimension, got ",
                            v.describe(), v.is_list() || v.is_array() ? " " + v.str() : "");
    return std::nullopt;
  };
  auto integral = [](const Value& e, int64_t& out) {
    if (e.is_int()) {
      out = e.as_int();
      return true;
    }
    if (e.is_array() && e.as_array().size() == 1 && e.as_array().dtype() == DType::int64) {
      out = e.as_array().get_int(0);
      return true;
    }
    return false;
  };
  if (v.is_array()) {
    const Array& x = v.as_array();
    if (x.dtype() != DType::int64) return bad();
    if (x.ndim() == 1 && x.dim(0) == 2) {
      pairs.push_back({x.get_int(0), x.get_int(1)});
    } else if (x.ndim() == 2 && x.dim(1) == 2) {
      for (int64_t d = 0; d < x.dim(0); ++d) pairs.push_back({x.get_int(2 * d), x.get_int(2 * d + 1)});
    } else {
      return bad();
    }
  } else if (v.is_list()) {
    const List& l = v.as_list();
    int64_t s0 = 0, s1 = 0;
    if (l.size() == 2 && integral(l[0], s0) && integral(l[1], s1)) {
      pairs.push_back({s0, s1});
    } else {
      for (const Value& e : l) {
        if (e.is_list() && e.as_list().size() == 2 && integral(e.as_list()[0], s0) &&
            integral(e.as_list()[1], s1)) {
          pairs.push_back({s0, s1});
        } else if (e.is_array() && e.as_array().dtype() == DType::int64 && e.as_array().size() == 2 &&
                   e.as_array().ndim() == 1) {
          pairs.push_back({e.as_array().get_int(0), e.as_array().get_int(1)});
        } else {
          return bad();
        }
      }
    }
  } else {
    return bad();
  }
  Span s;
  for (auto [b, e] : pairs) {
    if (b < 0 || e < b) {
      problem = error_message("span ", v.str(), " has a pair [", b, ", ", e, "] with start < 0 or stop < start");
      return std::nullopt;
    }
    s.start.push_back(b);
    s.stop.push_back(e);
  }
  return s;
}

// Checks that spans tile `shape` (each inside, together covering every
// element); the message lists every locality's span.
void check_cover(const Shape& shape, const std::vector<Span>& spans, const char* op) {
  try {
    check_spans(shape, spans, true, op);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(error_message(e.what(), "; the spans are: ", spans_str(spans)));
  }
}

// A target layout: the tiling name and, for named tilings, the spans (known
// at once); for spans given by each locality, the claim to exchange.
struct Layout {
  std::string name;
  std::vector<Span> spans;  // empty until known
  std::optional<Span> mine;
  std::string problem;
};

// Reads a tiling argument (a name or this locality's spans) for an array of
// `shape`. Name errors throw at once (the text is the same on every locality);
// span errors go into the problem, for the exchange.
Layout read_layout(const Value& v, const Shape& shape, const char* op, int group) {
  Layout l;
  if (v.is_string()) {
    const NamedTiling* t = find_named(v.as_string());
    if (!t) throw std::invalid_argument(error_message("[", op, "] ", unknown_tiling(v.as_string())));
    l.name = t->name;
    l.spans = named_spans(*t, shape, op, group);
    return l;
  }
  l.name = "user";
  l.mine = parse_span(v, l.problem);
  if (l.mine && l.mine->ndim() != static_cast<int>(shape.size())) {
    l.problem = error_message("its span ", l.mine->str(), " has ", l.mine->ndim(), " dimension",
                              l.mine->ndim() == 1 ? "" : "s", " but the array has shape ", shape_str(shape));
    l.mine.reset();
  }
  if (!l.mine) l.mine = Span{};
  return l;
}

// Completes a layout of spans given by each locality: exchanges them, checks
// that they cover `shape`, and names the tiling ("user", or "overlapped" when
// spans share elements).
Future<Layout> complete_layout(Layout l, const Shape& shape, const char* op, const std::string& site, int group) {
  if (!l.spans.empty()) return Future<Layout>::ready(std::move(l));
  Claim c;
  c.span = l.mine;
  c.problem = l.problem;
  std::string opname = op;
  return exchange(c, site, group).then([l, shape, opname](const std::vector<Claim>& claims) {
    raise_problems(claims, opname.c_str());
    Layout out = l;
    for (const Claim& c : claims) out.spans.push_back(*c.span);
    check_cover(shape, out.spans, opname.c_str());
    out.name = tiling_name_for(is_partition(out.spans) ? "user" : "overlapped", out.spans, shape);
    return out;
  });
}

// ---------------------------------------------------------------- annotate_d

std::string tile_word(const Shape& s) { return error_message(s.size(), "-d tile ", shape_str(s)); }

// The tiled array made of every locality's tile, checked together.
Value annotate(const Array& x, const std::vector<Claim>& claims, const std::string& tiling,
               const std::optional<Shape>& given_shape, int group) {
  const char* op = "annotate_d";
  raise_problems(claims, op);
  const int n = static_cast<int>(claims.size());
  for (int r = 1; r < n; ++r) {
    if (claims[r].tiling != claims[0].tiling) {
      throw std::invalid_argument(error_message("[", op, "] the localities disagree on the tiling: locality 0 has '",
                                                claims[0].tiling, "', locality ", r, " has '", claims[r].tiling,
                                                "'"));
    }
    if (claims[r].dtype != claims[0].dtype) {
      throw std::invalid_argument(error_message(
          "[", op, "] the tiles disagree on the dtype: locality 0 has ",
          dtype_name(static_cast<DType>(claims[0].dtype)), ", locality ", r, " has ",
          dtype_name(static_cast<DType>(claims[r].dtype))));
    }
    if (claims[r].tile_shape.size() != claims[0].tile_shape.size()) {
      throw std::invalid_argument(error_message("[", op, "] the tiles disagree on the number of dimensions: "
                                                "locality 0 has a ",
                                                tile_word(claims[0].tile_shape), ", locality ", r, " a ",
                                                tile_word(claims[r].tile_shape)));
    }
  }
  const int nd = static_cast<int>(claims[0].tile_shape.size());
  Shape shape;
  std::vector<Span> spans;
  std::string name = tiling;
  if (const NamedTiling* t = find_named(tiling)) {
    if (nd < t->min_ndim) {
      throw std::invalid_argument(error_message("[", op, "] tiling '", t->name, "' needs tiles of at least ",
                                                t->min_ndim, " dimension", t->min_ndim == 1 ? "" : "s",
                                                ", got a ", tile_word(claims[0].tile_shape)));
    }
    shape = claims[0].tile_shape;
    for (int r = 1; r < n; ++r) {
      for (int d = 0; d < nd; ++d) {
        if (d != t->axis && claims[r].tile_shape[d] != shape[d]) {
          throw std::invalid_argument(error_message(
              "[", op, "] tiles tiled by ", t->name, " must agree on every extent",
              t->axis < 0 ? "" : error_message(" but axis ", t->axis), ": locality 0 has a tile of shape ",
              shape_str(claims[0].tile_shape), ", locality ", r, " has ", shape_str(claims[r].tile_shape)));
        }
      }
    }
    if (t->axis >= 0) {
      int64_t at = 0;
      for (int r = 0; r < n; ++r) {
        Span s = full_span(claims[r].tile_shape);
        s.start[t->axis] = at;
        s.stop[t->axis] = at + claims[r].tile_shape[t->axis];
        at = s.stop[t->axis];
        spans.push_back(std::move(s));
      }
      shape[t->axis] = at;
      for (Span& s : spans) {
        for (int d = 0; d < nd; ++d) {
          if (d != t->axis) s.stop[d] = shape[d];
        }
      }
    } else {
      spans.assign(n, full_span(shape));
    }
    if (given_shape && *given_shape != shape) {
      throw std::invalid_argument(error_message("[", op, "] the tiling does not cover the array: the tiles by ",
                                                t->name, " make an array of shape ", shape_str(shape),
                                                " but shape is ", shape_str(*given_shape), "; the spans are: ",
                                                spans_str(spans)));
    }
  } else {
    for (int r = 0; r < n; ++r) {
      const Span& s = *claims[r].span;
      if (s.shape() != claims[r].tile_shape) {
        throw std::invalid_argument(error_message("[", op, "] on locality ", r, ": its tile has shape ",
                                                  shape_str(claims[r].tile_shape), " but its span ", s.str(),
                                                  " has shape ", shape_str(s.shape())));
      }
      spans.push_back(s);
    }
    if (given_shape) {
      shape = *given_shape;
    } else {
      shape.assign(nd, 0);
      for (const Span& s : spans) {
        for (int d = 0; d < nd; ++d) shape[d] = std::max(shape[d], s.stop[d]);
      }
    }
    check_cover(shape, spans, op);
    std::string overlap = first_overlap(spans);
    if (tiling == "user" && !overlap.empty()) {
      throw std::invalid_argument(error_message("[", op, "] ", overlap,
                                                "; pass tiling='overlapped' if tiles are meant to share elements "
                                                "(a halo)"));
    }
    name = tiling_name_for(tiling, spans, shape);
  }
  return Value(make_tiled(x, std::move(shape), std::move(spans), std::move(name), group));
}

Future<Value> annotate_d_async(Args& a) {
  if (a[0].is_tiled()) {
    throw TypeError(error_message("[annotate_d] argument 'x' is already a tiled array (",
                                  a[0].as_tiled().describe(), "); use retile_d to tile it differently"));
  }
  // A locality whose x is not an array says so in its claim: raising here
  // would leave the others waiting in the exchange.
  Claim c;
  Array x;
  std::string x_problem;
  if (a[0].is_numeric() || a[0].is_list()) {
    x = a.array(0);
  } else {
    x_problem = error_message("argument 'x' must be a number or an array, got ", a[0].describe());
  }
  c.dtype = static_cast<int64_t>(x.dtype());
  c.tile_shape = x.shape();
  const Value& tiling_arg = a[1];
  bool spans_given = !a.is_nil(2);
  if (tiling_arg.is_string()) {
    c.tiling = tiling_arg.as_string();
    bool span_tiling = c.tiling == "user" || c.tiling == "overlapped";
    if (spans_given) {
      // The default tiling 'rows' with spans reads as spans of one's own.
      if (c.tiling == "rows") c.tiling = "user";
      if (c.tiling != "user" && c.tiling != "overlapped") {
        c.problem = error_message("give either a tiling name or spans, got tiling '", c.tiling, "' and spans ",
                                  a[2].str());
      } else {
        c.span = parse_span(a[2], c.problem);
      }
    } else if (span_tiling) {
      c.problem = error_message("tiling '", c.tiling, "' needs spans (a [start, stop] pair per dimension)");
    } else if (!find_named(c.tiling)) {
      c.problem = unknown_tiling(c.tiling);
    }
  } else if (tiling_arg.is_list() || tiling_arg.is_array()) {
    c.tiling = "user";
    if (spans_given) {
      c.problem = "spans given twice (as 'tiling' and as 'spans')";
    } else {
      c.span = parse_span(tiling_arg, c.problem);
    }
  } else {
    a.type_error(1, "a tiling name ('rows', 'columns', 'pages', 'replicated', 'overlapped') or spans");
  }
  if (c.span && c.span->ndim() != x.ndim()) {
    c.problem = error_message("its span ", c.span->str(), " has ", c.span->ndim(), " dimension",
                              c.span->ndim() == 1 ? "" : "s", " but its tile has shape ", shape_str(x.shape()));
  }
  if (!x_problem.empty()) c.problem = x_problem;
  if (!c.problem.empty()) c.span.reset();
  if ((c.tiling == "user" || c.tiling == "overlapped") && !c.span) c.span = Span{};
  std::optional<Shape> given_shape;
  if (!a.is_nil(3)) given_shape = a.int_list(3);
  std::string tiling = c.tiling;
  const int group = group_of_value(a[4], a.op()).id;
  return exchange(c, a.site(), group).then([x, tiling, given_shape, group](const std::vector<Claim>& claims) {
    return annotate(x, claims, tiling, given_shape, group);
  });
}

// ---------------------------------------------------------------- constant_d, random_d

// Calls fill(tile, span) for this locality once its layout of `shape` is known.
template <class Fill>
Future<Value> construct(Args& a, const Shape& shape, size_t tiling_index, size_t group_index, Fill fill) {
  const GroupInfo g = group_of_value(a[group_index], a.op());
  Layout l = read_layout(a[tiling_index], shape, a.op(), g.id);
  return complete_layout(std::move(l), shape, a.op(), a.site(), g.id).then([shape, fill, g](const Layout& l) {
    const Span& mine = l.spans[g.rank];
    return Value(make_tiled(fill(mine), shape, l.spans, l.name, g.id));
  });
}

Shape shape_param(Args& a, size_t i) {
  Shape s = a.int_list(i);
  shape_size(s, a.op());
  return s;
}

Future<Value> constant_d_async(Args& a) {
  Shape shape = shape_param(a, 1);
  const Value& v = a[0];
  if (!v.is_scalar() && !(v.is_array() && v.as_array().size() == 1)) {
    a.type_error(0, "a number (one value for every element)");
  }
  Value value = v, dtype = a[3];
  return construct(a, shape, 2, 4, [value, dtype](const Span& mine) {
    List tile_shape;
    for (int64_t e : mine.shape()) tile_shape.push_back(Value(e));
    return call_primitive("full", std::vector<CallArg>{{"", Value(tile_shape)}, {"", value}, {"dtype", dtype}})
        .as_array();
  });
}

// Fills `tile`, the part `span` of a draw of the whole `shape`: each run along
// the last axis takes the counters of its elements' flat indices in the whole.
template <class FillRange>
void fill_tile(Array& tile, const Span& span, const Shape& shape, double ns_per_element, FillRange fill_range) {
  if (tile.size() == 0) return;
  const int nd = static_cast<int>(shape.size());
  if (nd == 0) {
    fill_range(tile, 0, 1, 0);
    return;
  }
  const int64_t run = span.extent(nd - 1);
  const int64_t runs = tile.size() / run;
  std::vector<int64_t> gs = contiguous_strides(shape);
  Shape outer = span.shape();
  outer.pop_back();
  parallel_for(runs, ns_per_element * static_cast<double>(run), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t rest = k, global = span.start[nd - 1] * gs[nd - 1];
      for (int d = nd - 2; d >= 0; --d) {
        int64_t i = rest % outer[d];
        rest /= outer[d];
        global += (span.start[d] + i) * gs[d];
      }
      int64_t local = k * run;
      fill_range(tile, local, local + run, global - local);
    }
  });
}

Future<Value> random_d_async(Args& a) {
  // Params: shape, tiling, distribution, seed, low, high, mean, std, dtype.
  Shape shape = shape_param(a, 0);
  const std::string& dist = a.string(2);
  if (dist != "uniform" && dist != "normal" && dist != "integers") {
    a.value_error(2, error_message("must be 'uniform', 'normal' or 'integers', got '", dist, "'"));
  }
  DType dt = DType::int64;
  if (dist != "integers") {
    dt = a.dtype(8, DType::float64);
    if (!is_floating(dt)) a.value_error(8, error_message("must be 'float32' or 'float64', got '", dtype_name(dt), "'"));
  }
  double low = 0, high = 0, mean = 0, std = 0;
  int64_t ilow = 0, ihigh = 0;
  if (dist == "uniform") {
    low = a.number(4);
    high = a.number(5);
    if (!std::isfinite(low) || !std::isfinite(high)) {
      throw std::invalid_argument(error_message("[random_d] low and high must be finite, got ", low, " and ", high));
    }
  } else if (dist == "normal") {
    mean = a.number(6);
    std = a.number(7);
    if (!(std >= 0)) a.value_error(7, error_message("must be non-negative, got ", std));
  } else {
    ilow = a.integer(4);
    ihigh = a.integer(5);
    if (ihigh <= ilow) {
      throw std::invalid_argument(
          error_message("[random_d] high must be greater than low: low=", ilow, ", high=", ihigh));
    }
  }
  // The key is taken now, in program order, as the local primitives take theirs.
  kernels::RandomKey key = random_draw_key(a, 3, dist.c_str());
  return construct(a, shape, 1, 9, [=](const Span& mine) {
    Array tile(dt, mine.shape());
    if (dist == "uniform") {
      fill_tile(tile, mine, shape, 6.0, [&](Array& t, int64_t b, int64_t e, int64_t off) {
        kernels::uniform_fill_range(t, key, low, high, b, e, off);
      });
    } else if (dist == "normal") {
      fill_tile(tile, mine, shape, 25.0, [&](Array& t, int64_t b, int64_t e, int64_t off) {
        kernels::normal_fill_range(t, key, mean, std, b, e, off);
      });
    } else {
      fill_tile(tile, mine, shape, 8.0, [&](Array& t, int64_t b, int64_t e, int64_t off) {
        kernels::integers_fill_range(t, key, ilow, ihigh, b, e, off);
      });
    }
    return tile;
  });
}

// ---------------------------------------------------------------- all_gather_d, transpose_d, retile_d

Future<Value> gather_whole(const TiledArray& x, const std::string& site) {
  if (x.replicated()) return Future<Value>::ready(Value(x.tile));
  Array flat = x.tile.reshaped({x.tile.size()});
  return detail::all_gather(flat, 0, site, x.group).then([x](const Value& parts) {
    Array out(x.dtype(), x.shape);
    std::vector<int64_t> origin(x.shape.size(), 0);
    const List& l = parts.as_list();
    for (size_t r = 0; r < l.size(); ++r) {
      Array part = l[r].as_array().reshaped(x.spans[r].shape());
      copy_box(part, x.spans[r].start, out, origin, x.spans[r]);
    }
    return Value(out);
  });
}

Future<Value> all_gather_d_async(Args& a) {
  if (a[0].is_array()) return Future<Value>::ready(a[0]);
  return gather_whole(tiled_arg(a, 0), a.site());
}

Future<Value> transpose_d_async(Args& a) {
  const TiledArray& x = tiled_arg(a, 0);
  return Future<Value>::ready(permuted(x, reversed_axes(x.ndim())));
}

// Point-to-point tags of retile_d (detail::internal_tag): a call site's n-th
// call gets the same tag on every locality (SPMD), and concurrent retiles
// from different sites almost surely get different tags.
int retile_tag(const std::string& site) {
  static std::mutex mu;
  static std::map<std::string, uint64_t> calls;
  uint64_t seq;
  {
    std::lock_guard lock(mu);
    seq = calls[site]++;
  }
  return detail::internal_tag("retile_d", site, seq);
}

// x moved to the spans `target`: locality r sends locality q the part of its
// tile inside q's target span, unless q already holds its whole target span
// itself; only those overlaps travel, point to point.
Future<Value> move_tiles(const TiledArray& x, const std::vector<Span>& target, const std::string& name, int tag,
                         const std::string& site) {
  const int n = x.num_localities(), me = x.locality;
  const GroupInfo g = group_of(x);  // spans by group rank, messages by world rank
  const std::vector<Span>& src = x.spans;
  auto sends_to = [&](int r, int q) {
    return r != q && !contains(src[q], target[q]) && !intersect(src[r], target[q]).empty();
  };
  std::vector<Future<Value>> pending;
  for (int q = 0; q < n; ++q) {
    if (sends_to(me, q)) {
      pending.push_back(detail::send(extract(x.tile, src[me], intersect(src[me], target[q])), g.world_rank(q), tag,
                                     site));
    }
  }
  size_t first_recv = pending.size();
  std::vector<int> from;
  for (int r = 0; r < n; ++r) {
    if (sends_to(r, me)) {
      pending.push_back(detail::recv(g.world_rank(r), tag, site));
      from.push_back(r);
    }
  }
  auto assemble = [x, target, name, from, first_recv](const std::vector<Value>& got) -> Value {
    const int me = x.locality;
    const Span& mine = target[me];
    Array out(x.dtype(), mine.shape());
    for (size_t i = 0; i < from.size(); ++i) {
      Span box = intersect(x.spans[from[i]], mine);
      const Array& part = got[first_recv + i].as_array();
      if (part.shape() != box.shape() || part.dtype() != x.dtype()) {
        throw std::runtime_error(error_message("[retile_d] locality ", me, " received a ", dtype_name(part.dtype()),
                                               " part of shape ", shape_str(part.shape()), " from locality ", from[i],
                                               " where it expected ", dtype_name(x.dtype()), " ",
                                               shape_str(box.shape())));
      }
      copy_box(part, box.start, out, mine.start, box);
    }
    // Its own part last: where tiles overlap, a locality keeps its own values.
    copy_box(x.tile, x.spans[me].start, out, mine.start, intersect(x.spans[me], mine));
    return Value(make_tiled(out, x.shape, target, name, x.group));
  };
  if (pending.empty()) return Future<Value>::ready(assemble({}));
  return when_all(std::move(pending)).then(assemble);
}

Future<Value> retile_d_async(Args& a) {
  const TiledArray& x = tiled_arg(a, 0);
  int tag = retile_tag(a.site());
  std::string site = a.site();
  if (a[1].is_tiled()) {
    const TiledArray& like = a[1].as_tiled();
    check_same_group(a, 0, 1);
    if (like.shape != x.shape) {
      throw std::invalid_argument(error_message("[retile_d] argument 'tiling' is a tiled array of shape ",
                                                shape_str(like.shape), " but x has shape ", shape_str(x.shape),
                                                "; a tiled array as tiling lends its spans to x, so the shapes "
                                                "must be equal"));
    }
    if (like.spans == x.spans) {
      TiledArray same = x;
      same.tiling = like.tiling;
      return Future<Value>::ready(Value(std::move(same)));
    }
    return move_tiles(x, like.spans, like.tiling, tag, site);
  }
  if (!a[1].is_string() && !a[1].is_list() && !a[1].is_array()) {
    a.type_error(1, "a tiling name ('rows', 'columns', 'pages', 'replicated'), spans or a tiled array");
  }
  Layout l = read_layout(a[1], x.shape, a.op(), x.group);
  TiledArray xc = x;
  return complete_layout(std::move(l), x.shape, a.op(), site, x.group).then([xc, tag, site](const Layout& l) {
    if (l.spans == xc.spans) {
      TiledArray same = xc;
      same.tiling = l.name;
      return Future<Value>::ready(Value(std::move(same)));
    }
    return move_tiles(xc, l.spans, l.name, tag, site);
  });
}

// ---------------------------------------------------------------- dot_d

Future<Value> dot_d_async(Args& a) { return dot_tiled(a, a.op()); }

// ---------------------------------------------------------------- registration

const bool registered_tiled_ops = register_primitives({
    async_spec({.name = "annotate_d",
                .family = "distributed",
                .params = {{"x"}, opt("tiling", Value("rows")), opt("spans", Value()), opt("shape", Value()),
                           opt("group", Value())},
                .help = "Makes x, this locality's tile, part of a tiled array: by 'rows' (axis 0), 'columns' (axis "
                        "1), 'pages' (axis 0 of a 3-d or higher batch) or 'replicated', the tiles joined in "
                        "locality order, or placed by spans (a [start, stop] pair per dimension for this locality; "
                        "tiling 'overlapped' lets spans share elements), checked by all localities together. With "
                        "group=g (mesh.group(axis)) the array is tiled over the group's members only (one tile "
                        "each, in group rank order), and every operation on it runs among them.",
                .eval = nullptr,
                .grads = {}},
               annotate_d_async),
    async_spec({.name = "constant_d",
                .family = "distributed",
                .params = {{"value"}, {"shape"}, opt("tiling", Value("rows")), opt("dtype", Value()),
                           opt("group", Value())},
                .help = "A tiled array of the given global shape filled with value, tiled by a tiling name "
                        "('rows', 'columns', 'pages', 'replicated'; numpy.array_split sizes) or by this "
                        "locality's spans; over every locality or, with group=g, over the group's members.",
                .eval = nullptr,
                .grads = {}},
               constant_d_async),
    async_spec({.name = "random_d",
                .family = "distributed",
                .params = {{"shape"}, opt("tiling", Value("rows")), opt("distribution", Value("uniform")),
                           opt("seed", Value()), opt("low", Value(0.0)), opt("high", Value(1.0)),
                           opt("mean", Value(0.0)), opt("std", Value(1.0)), opt("dtype", Value("float64")),
                           opt("group", Value())},
                .help = "A tiled random array whose tiles together equal random_uniform(shape, low, high, seed, "
                        "dtype), random_normal(shape, mean, std, seed, dtype) or random_integers(low, high, shape, "
                        "seed) (distribution 'uniform', 'normal', 'integers'), each locality drawing only its tile; over "
                        "every locality or, with group=g, over the group's members.",
                .eval = nullptr,
                .grads = {}},
               random_d_async),
    async_spec({.name = "all_gather_d",
                .family = "distributed",
                .params = {{"x"}},
                .help = "The whole of the tiled array x as a plain array on every locality (one all_gather; a "
                        "plain x is returned as it is).",
                .eval = nullptr,
                // The result is a plain value made from a tiled array: by the convention of tiled_grads.cpp
                // one value that every locality holds, like sum(x), whose cotangent g every locality holds
                // whole and alike. So each tile's cotangent is its own span of g, already at hand: nothing
                // travels. (all_gather, whose copies are every locality's own values, adds the localities'
                // cotangents instead; all_gather(local_tile(x)) keeps that convention.)
                .grads = {"retile_d_grad(g, x)"}},
               all_gather_d_async),
    async_spec({.name = "transpose_d",
                .family = "distributed",
                .params = {{"x"}},
                .help = "The tiled array x with its axes reversed: each tile transposed and the spans with it "
                        "(rows become columns), without communication; transpose(x) does the same.",
                .eval = nullptr,
                .grads = {"transpose_d(g)"}},
               transpose_d_async),
    async_spec({.name = "retile_d",
                .family = "distributed",
                .params = {{"x"}, {"tiling"}},
                .help = "The tiled array x tiled anew: by a tiling name, by this locality's spans, or like another "
                        "tiled array of the same shape; only the overlaps of old and new tiles travel, point to "
                        "point.",
                .eval = nullptr,
                .grads = {"retile_d_grad(g, x)", ""}},
               retile_d_async),
    async_spec({.name = "dot_d",
                .family = "distributed",
                .params = {{"a"}, {"b"}},
                .help = "numpy.dot of 1-d and 2-d tiled arrays: rows-tiled a times a replicated b stays tiled by "
                        "rows; a times columns-tiled b stays tiled by columns; a tiled along its last axis times b "
                        "tiled along its first with the same spans gives the replicated sum of local products (one "
                        "all_reduce); matmul and dot on tiled arrays do the same.",
                .eval = nullptr,
                .grads = {"matmul_grad_x(g, a, b)", "matmul_grad_y(g, a, b)"}},
               dot_d_async),
});

}  // namespace
}  // namespace tessera::distributed
