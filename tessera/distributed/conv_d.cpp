// conv1d_d: the 1-d convolution of a tiled array (family "distributed"), with its
// gradient, and the primitives around it: overlap_d (a time tiling widened by
// the halo a convolution reads), local_tile and with_tile (a tiled array's
// own tile, and back).
//
// x (batch, steps, channels) is tiled along the batch (data parallelism: every
// locality convolves its samples, no communication) or along time (spatial
// parallelism: a locality's outputs read up to (kernel_size - 1) * dilation
// steps of its neighbours, the halo, which they send it point to point before
// it convolves; geometry in conv_d.hpp). The kernel w is a plain array, the
// same on every locality.
//
// Gradients follow the collectives' convention: the loss of a distributed
// program is the sum of every locality's loss. The cotangent of a tiled array
// holds, in each tile, the derivative with respect to that locality's copy of
// its elements (for a partition, the whole array's gradient tiled like it);
// the halo part of a locality's input gradient goes back to the locality that
// owns those steps and is added there (the reverse exchange). The kernel is
// one shared parameter: its gradient is the sum of every locality's part (one
// all_reduce), the same on every locality.
//
// With one locality the tiling is the whole array and conv1d_d is conv1d.
#include "tessera/distributed/conv_d.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {

namespace detail {

std::string Steps::str() const { return error_message("[", start, ", ", stop, ")"); }

Steps intersect(Steps a, Steps b) {
  Steps s{std::max(a.start, b.start), std::min(a.stop, b.stop)};
  if (s.stop < s.start) s.stop = s.start;
  return s;
}

Steps ConvSteps::window(Steps outputs) const {
  return {outputs.start * stride - pad_lo, (outputs.stop - 1) * stride - pad_lo + effective};
}

std::string ConvSteps::settings() const {
  return error_message("kernel_size=", kernel_size, ", stride=", stride, ", padding='", padding, "', dilation=",
                       dilation);
}

ConvSteps conv_steps(int64_t steps, int64_t kernel_size, int64_t stride, const std::string& padding,
                     int64_t dilation, const char* op) {
  ConvSteps g;
  g.steps = steps;
  g.kernel_size = kernel_size;
  g.stride = stride;
  g.dilation = dilation;
  g.padding = padding;
  g.effective = dilation * (kernel_size - 1) + 1;
  // The same arithmetic as conv1d (tessera/primitives/conv.cpp), so that the
  // tiles gathered are the whole array's result.
  if (padding == "valid") {
    if (g.effective > steps) {
      throw std::invalid_argument(error_message("[", op, "] kernel of effective size ", g.effective, " (size ",
                                                kernel_size, ", dilation ", dilation, ") is larger than the input (",
                                                steps, " steps) with padding 'valid'"));
    }
    g.out = (steps - g.effective) / stride + 1;
  } else if (padding == "same") {
    g.out = (steps + stride - 1) / stride;
    g.pad_lo = std::max<int64_t>((g.out - 1) * stride + g.effective - steps, 0) / 2;
  } else if (padding == "causal") {
    g.pad_lo = g.effective - 1;
    g.out = (steps - 1) / stride + 1;
  } else {
    throw std::invalid_argument(
        error_message("[", op, "] padding must be 'valid', 'same' or 'causal', got '", padding, "'"));
  }
  return g;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

TimePlan plan_time(const std::vector<Steps>& tiles, const ConvSteps& g, const char* op) {
  const int64_t n = g.steps;
  const size_t m = tiles.size();
  std::vector<size_t> order;
  for (size_t r = 0; r < m; ++r) {
    if (!tiles[r].empty()) order.push_back(r);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (tiles[a].start != tiles[b].start) return tiles[a].start < tiles[b].start;
    if (tiles[a].stop != tiles[b].stop) return tiles[a].stop < tiles[b].stop;
    return a < b;
  });
  TimePlan plan;
  int64_t reach = 0;
  for (size_t r : order) {
    if (tiles[r].start > reach) {
      throw std::invalid_argument(error_message("[", op, "] the time spans of x do not cover its ", n,
                                                " steps: steps ", Steps{reach, tiles[r].start}.str(),
                                                " are in no locality's span"));
    }
    plan.overlapped = plan.overlapped || tiles[r].start < reach;
    reach = std::max(reach, tiles[r].stop);
  }
  if (reach < n) {
    throw std::invalid_argument(error_message("[", op, "] the time spans of x do not cover its ", n, " steps: steps ",
                                              Steps{reach, n}.str(), " are in no locality's span"));
  }

  // Owned parts: the spans themselves, or for an overlapped tiling the cuts
  // between neighbours: a span that starts inside the array starts with its
  // halo, so its part begins halo_before() later; one that starts at 0 may
  // have lost that halo at the edge, and then its predecessor's span ends
  // halo_after() past the cut (overlap_d makes spans that give back the parts
  // they were widened from). Between two spans that are both the whole array
  // nothing tells where the cut was: such cuts share the steps between the
  // nearest known cuts evenly, as array_split does.
  plan.owned.assign(m, Steps{});
  if (!plan.overlapped) {
    for (size_t r = 0; r < m; ++r) plan.owned[r] = tiles[r].empty() ? Steps{} : tiles[r];
  } else {
    const size_t parts = order.size();
    std::vector<int64_t> cut(parts + 1, 0);
    std::vector<bool> known(parts + 1, true);
    cut[parts] = n;
    for (size_t i = 1; i < parts; ++i) {
      const Steps prev = tiles[order[i - 1]], next = tiles[order[i]];
      if (next.start > 0) {
        cut[i] = next.start + g.halo_before();
      } else if (prev.stop < n) {
        cut[i] = prev.stop - g.halo_after();
      } else {
        known[i] = false;
      }
    }
    for (size_t i = 1; i < parts; ++i) {
      if (known[i]) continue;
      size_t lo = i - 1, hi = i + 1;
      while (!known[hi]) ++hi;
      const int64_t span = std::max<int64_t>(cut[hi] - cut[lo], 0), count = static_cast<int64_t>(hi - lo);
      for (size_t k = i; k < hi; ++k) {
        const int64_t before = static_cast<int64_t>(k - lo);
        cut[k] = cut[lo] + before * (span / count) + std::min(before, span % count);
      }
      i = hi - 1;
    }
    for (size_t i = 1; i <= parts; ++i) cut[i] = std::clamp(cut[i], cut[i - 1], n);
    for (size_t i = 0; i < parts; ++i) plan.owned[order[i]] = {cut[i], cut[i + 1]};
  }

  plan.outputs.assign(m, Steps{});
  plan.reads.assign(m, Steps{});
  plan.pad_before.assign(m, 0);
  plan.pad_after.assign(m, 0);
  for (size_t r = 0; r < m; ++r) {
    const Steps own = plan.owned[r];
    if (own.empty()) continue;
    // Output j is anchored at step j * stride (< n for every output).
    Steps out{std::min(ceil_div(own.start, g.stride), g.out), std::min(ceil_div(own.stop, g.stride), g.out)};
    if (out.empty()) continue;
    plan.outputs[r] = out;
    const Steps w = g.window(out);
    plan.reads[r] = intersect(w, Steps{0, n});
    plan.pad_before[r] = std::max<int64_t>(-w.start, 0);
    plan.pad_after[r] = std::max<int64_t>(w.stop - n, 0);
    if (plan.overlapped && (plan.reads[r].start < tiles[r].start || plan.reads[r].stop > tiles[r].stop)) {
      throw std::invalid_argument(error_message(
          "[", op, "] x has overlapping time spans, but they do not hold the halo this convolution (",
          g.settings(), ") needs: locality ", r, " holds steps ", tiles[r].str(), " and its outputs ", out.str(),
          " read steps ", plan.reads[r].str(), "; make the tiling with overlap_d(x, ", g.settings(),
          "), or give conv1d_d a tiling whose spans do not overlap (the halo is then exchanged)"));
    }
  }
  return plan;
}

std::vector<Steps> halo_steps(const std::vector<Steps>& owned, const ConvSteps& g) {
  std::vector<Steps> out = owned;
  for (Steps& s : out) {
    if (s.empty()) continue;
    s = {std::max<int64_t>(s.start - g.halo_before(), 0), std::min(s.stop + g.halo_after(), g.steps)};
  }
  return out;
}

}  // namespace detail

namespace {

using detail::ConvSteps;
using detail::Steps;
using detail::TimePlan;

// Float dtype of a convolution's result, as conv1d: float32 only if every
// operand is float32.
DType float_result(DType a, DType b) {
  return a == DType::float32 && b == DType::float32 ? DType::float32 : DType::float64;
}

// ---- Steps of (batch, steps, channels) arrays.

char* bytes(Array& a) { return static_cast<char*>(a.raw()); }
const char* bytes(const Array& a) { return static_cast<const char*>(a.raw()); }

// Copies steps [from, from + len) of src into steps [at, at + len) of dst (same dtype).
void copy_steps(Array& dst, int64_t at, const Array& src, int64_t from, int64_t len) {
  const int64_t batch = dst.dim(0), dst_steps = dst.dim(1), src_steps = src.dim(1);
  const size_t row = static_cast<size_t>(dst.dim(2)) * dtype_size(dst.dtype());
  if (row == 0 || len == 0) return;
  for (int64_t b = 0; b < batch; ++b) {
    std::memcpy(bytes(dst) + (b * dst_steps + at) * row, bytes(src) + (b * src_steps + from) * row,
                static_cast<size_t>(len) * row);
  }
}

// Sets steps [at, at + len) of dst to zero.
void zero_steps(Array& dst, int64_t at, int64_t len) {
  const int64_t batch = dst.dim(0), steps = dst.dim(1);
  const size_t row = static_cast<size_t>(dst.dim(2)) * dtype_size(dst.dtype());
  if (row == 0 || len == 0) return;
  for (int64_t b = 0; b < batch; ++b) {
    std::memset(bytes(dst) + (b * steps + at) * row, 0, static_cast<size_t>(len) * row);
  }
}

// Steps [from, from + len) of a.
Array slice_steps(const Array& a, int64_t from, int64_t len) {
  Array out(a.dtype(), {a.dim(0), len, a.dim(2)});
  copy_steps(out, 0, a, from, len);
  return out;
}

template <class T>
void add_steps_as(Array& dst, int64_t at, const Array& src, int64_t from, int64_t len) {
  const int64_t batch = dst.dim(0), dst_steps = dst.dim(1), src_steps = src.dim(1), channels = dst.dim(2);
  T* d = dst.data<T>();
  const T* s = src.data<T>();
  for (int64_t b = 0; b < batch; ++b) {
    T* to = d + (b * dst_steps + at) * channels;
    const T* add = s + (b * src_steps + from) * channels;
    for (int64_t i = 0; i < len * channels; ++i) to[i] += add[i];
  }
}

// Adds steps [from, from + len) of src to steps [at, at + len) of dst (a float dtype).
void add_steps(Array& dst, int64_t at, const Array& src, int64_t from, int64_t len) {
  if (len == 0) return;
  if (dst.dtype() == DType::float32) {
    add_steps_as<float>(dst, at, src.astype(DType::float32), from, len);
  } else {
    add_steps_as<double>(dst, at, src.astype(DType::float64), from, len);
  }
}

// Steps [from, from + len) of a with `before` zero steps in front and `after` behind.
Array padded_steps(const Array& a, int64_t from, int64_t len, int64_t before, int64_t after) {
  if (before == 0 && after == 0 && from == 0 && len == a.dim(1)) return a;
  Array out(a.dtype(), {a.dim(0), before + len + after, a.dim(2)});
  zero_steps(out, 0, before);
  copy_steps(out, before, a, from, len);
  zero_steps(out, before + len, after);
  return out;
}

// ---- Halo exchanges.

// The tag of the messages of one primitive at one call site: different for
// each call site and for the forward and backward exchanges of one call, so
// that exchanges in flight together are never confused.
int message_tag(const char* op, const std::string& site) { return detail::internal_tag(op, site); }

// Locality `me`'s steps want[me] (with zero steps around them) of the array
// whose steps owned[q] locality q holds in its tile: its own part is copied,
// the rest is received from the owners, and every locality is sent the steps
// of `tile` it wants. All localities call it with the same owned and want.
Future<Array> gather_steps(const Array& tile, const std::vector<Steps>& owned, const std::vector<Steps>& want,
                           int64_t pad_before, int64_t pad_after, int me, int tag, const std::string& site,
                           const char* op, int group) {
  const GroupInfo members = group_info(group, op);  // steps by group rank, messages by world rank
  const Steps mine = owned[me], target = want[me];
  const int n = static_cast<int>(owned.size());
  std::vector<Future<Value>> pending;
  for (int q = 0; q < n; ++q) {
    const Steps give = intersect(mine, want[q]);
    if (q == me || give.empty()) continue;
    pending.push_back(
        detail::send(slice_steps(tile, give.start - mine.start, give.size()), members.world_rank(q), tag, site));
  }
  std::vector<std::pair<int, Steps>> incoming;
  for (int q = 0; q < n; ++q) {
    const Steps take = intersect(owned[q], target);
    if (q == me || take.empty()) continue;
    incoming.emplace_back(q, take);
    pending.push_back(detail::recv(members.world_rank(q), tag, site));
  }
  const size_t sends = pending.size() - incoming.size();
  Shape shape{tile.dim(0), pad_before + target.size() + pad_after, tile.dim(2)};
  return when_all(std::move(pending)).then([=](const std::vector<Value>& got) {
    // The pieces (own and received) cover the target: only the padding is zeroed.
    Array out(tile.dtype(), shape);
    zero_steps(out, 0, pad_before);
    zero_steps(out, pad_before + target.size(), pad_after);
    const Steps own = intersect(mine, target);
    copy_steps(out, pad_before + own.start - target.start, tile, own.start - mine.start, own.size());
    for (size_t i = 0; i < incoming.size(); ++i) {
      const auto& [q, take] = incoming[i];
      const Value& v = got[sends + i];
      const Shape expected{shape[0], take.size(), shape[2]};
      if (!v.is_array() || v.as_array().shape() != expected || v.as_array().dtype() != tile.dtype()) {
        throw std::runtime_error(error_message("[", op, "] locality ", me, " expected steps ", take.str(),
                                               " from locality ", q, " as a ", dtype_name(tile.dtype()),
                                               " array of shape ", shape_str(expected), ", got ", v.describe(),
                                               " (do all localities run the same program?)"));
      }
      copy_steps(out, pad_before + take.start - target.start, v.as_array(), 0, take.size());
    }
    return out;
  });
}

// The reverse of gather_steps for gradients: `grad` holds the cotangent of
// steps want[me]; each part goes back to the locality owning those steps,
// and the result is the cotangent of owned[me] (of shape `shape`, dtype
// `dt`): the contributions of every locality added in locality order.
Future<Array> scatter_add_steps(const Array& grad, const std::vector<Steps>& owned, const std::vector<Steps>& want,
                                const Shape& shape, DType dt, int me, int tag, const std::string& site,
                                const char* op, int group) {
  const GroupInfo members = group_info(group, op);  // steps by group rank, messages by world rank
  const Steps mine = owned[me], source = want[me];
  const int n = static_cast<int>(owned.size());
  std::vector<Future<Value>> pending;
  for (int q = 0; q < n; ++q) {
    const Steps give = intersect(owned[q], source);
    if (q == me || give.empty()) continue;
    pending.push_back(
        detail::send(slice_steps(grad, give.start - source.start, give.size()), members.world_rank(q), tag, site));
  }
  std::vector<std::pair<int, Steps>> incoming;
  for (int q = 0; q < n; ++q) {
    const Steps take = intersect(mine, want[q]);
    if (q == me || take.empty()) continue;
    incoming.emplace_back(q, take);
    pending.push_back(detail::recv(members.world_rank(q), tag, site));
  }
  const size_t sends = pending.size() - incoming.size();
  return when_all(std::move(pending)).then([=](const std::vector<Value>& got) {
    Array out = Array::zeros(dt, shape);
    size_t next = 0;
    for (int q = 0; q < n; ++q) {
      if (q == me) {
        const Steps own = intersect(mine, source);
        add_steps(out, own.start - mine.start, grad, own.start - source.start, own.size());
        continue;
      }
      if (next == incoming.size() || incoming[next].first != q) continue;
      const Steps take = incoming[next].second;
      const Value& v = got[sends + next];
      ++next;
      const Shape expected{shape[0], take.size(), shape[2]};
      if (!v.is_array() || v.as_array().shape() != expected) {
        throw std::runtime_error(error_message("[", op, "] locality ", me, " expected the gradient of steps ",
                                               take.str(), " from locality ", q, " as an array of shape ",
                                               shape_str(expected), ", got ", v.describe(),
                                               " (do all localities run the same program?)"));
      }
      add_steps(out, take.start - mine.start, v.as_array(), 0, take.size());
    }
    return out;
  });
}

// ---- Arguments.

const TiledArray& tiled_arg(Args& a, size_t i, const char* hint) {
  const Value& v = a[i];
  if (!v.is_tiled()) {
    throw TypeError(error_message("[", a.op(), "] argument '", a.param_name(i), "' must be a tiled array", hint,
                                  ", got ", v.describe()));
  }
  const TiledArray& x = v.as_tiled();
  const GroupInfo members = group_info(x.group, a.op());
  if (x.num_localities() != members.size || x.locality != members.rank) {
    throw std::invalid_argument(error_message("[", a.op(), "] argument '", a.param_name(i),
                                              "' is tiled for locality ", x.locality, " of ", x.num_localities(),
                                              ", but this is locality ", members.rank, " of ", members.size, " (",
                                              members.name, ")"));
  }
  return x;
}

int64_t positive_arg(Args& a, size_t i) {
  int64_t v = a.integer(i);
  if (v < 1) a.value_error(i, error_message("must be a positive integer, got ", v));
  return v;
}

// Everything a conv1d_d call (or its gradient) works out from x's tiling and
// the settings, the same on every locality.
struct ConvCall {
  std::shared_ptr<const TiledArray> x;
  ConvSteps g;
  bool along_time = false;
  TimePlan plan;
  int me = 0;
  int64_t batch = 0, channels = 0, filters = 0;
  // The result's shape, spans and tiling name.
  Shape out_shape;
  std::vector<Span> out_spans;
  std::string out_tiling;
  std::string site;

  // The result (or a tiled cotangent like it) with this locality's tile.
  Value result(Array tile) const {
    TiledArray t;
    t.tile = std::move(tile);
    t.shape = out_shape;
    t.spans = out_spans;
    t.locality = me;
    t.group = x->group;
    t.group_name = x->group_name;
    t.tiling = out_tiling;
    return Value(std::move(t));
  }
  // A tiled array like x with this locality's tile.
  Value like_x(Array tile) const {
    TiledArray t = *x;
    t.tile = std::move(tile);
    return Value(std::move(t));
  }
  Steps span_steps() const { return {x->span().start[1], x->span().stop[1]}; }
};

// Whether x (batch, steps, channels) is tiled along time (else along the
// batch, or replicated): every non-empty span must cover all channels, and
// all of them all steps (batch tiles) or all samples (time tiles).
bool tiled_along_time(const TiledArray& x, const char* op) {
  const Shape& s = x.shape;
  int cut_batch = -1, cut_time = -1;
  for (int r = 0; r < x.num_localities(); ++r) {
    const Span& sp = x.spans[r];
    if (sp.empty()) continue;
    if (sp.start[2] != 0 || sp.stop[2] != s[2]) {
      throw std::invalid_argument(error_message("[", op, "] x must not be tiled along its channels (axis 2): locality ",
                                                r, " holds ", sp.str(), " of shape ", shape_str(s),
                                                "; retile it along the batch or time"));
    }
    if (sp.start[0] != 0 || sp.stop[0] != s[0]) cut_batch = r;
    if (sp.start[1] != 0 || sp.stop[1] != s[1]) cut_time = r;
  }
  // overlap_d's tiles may all be the whole array (halos longer than the
  // steps); they are still time tiles, each computing its part of the result.
  if (cut_time < 0) return x.tiling == "overlapped" && cut_batch < 0;
  if (cut_batch < 0) return true;
  throw std::invalid_argument(error_message(
      "[", op, "] x must be tiled along one axis, the batch (axis 0) or time (axis 1), not both: locality ", cut_batch,
      " holds ", x.spans[cut_batch].str(), " and locality ", cut_time, " holds ", x.spans[cut_time].str(),
      " of shape ", shape_str(s), "; retile it along one axis"));
}

ConvCall conv_call(Args& a, const TiledArray& x, size_t x_i, const Shape& w_shape, size_t stride_i, size_t padding_i,
                   size_t dilation_i) {
  const char* op = a.op();
  if (x.ndim() != 3) {
    throw std::invalid_argument(error_message("[", op, "] x must be 3-d (batch, steps, channels), got ",
                                              x.describe()));
  }
  if (w_shape.size() != 3) {
    throw std::invalid_argument(error_message("[", op, "] kernel must be 3-d (kernel_size, in_channels, filters), "
                                              "got shape ", shape_str(w_shape)));
  }
  for (int64_t d : w_shape) {
    if (d < 1) {
      throw std::invalid_argument(
          error_message("[", op, "] kernel dimensions must be positive, got shape ", shape_str(w_shape)));
    }
  }
  if (x.shape[2] != w_shape[1]) {
    throw std::invalid_argument(error_message("[", op, "] x has ", x.shape[2], " channels but the kernel expects ",
                                              w_shape[1], " (x shape ", shape_str(x.shape), ", kernel shape ",
                                              shape_str(w_shape), ")"));
  }
  ConvCall c;
  c.x = a[x_i].tiled_ptr();
  c.me = x.locality;
  c.batch = x.shape[0];
  c.channels = x.shape[2];
  c.filters = w_shape[2];
  c.site = a.site();
  c.g = detail::conv_steps(x.shape[1], w_shape[0], positive_arg(a, stride_i), a.string(padding_i),
                           positive_arg(a, dilation_i), op);
  c.along_time = tiled_along_time(x, op);
  c.out_shape = {c.batch, c.g.out, c.filters};
  c.out_tiling = x.tiling == "overlapped" ? "user" : x.tiling;
  const int n = x.num_localities();
  if (!c.along_time) {
    for (const Span& sp : x.spans) {
      const int64_t b1 = sp.empty() ? sp.start[0] : sp.stop[0];
      c.out_spans.push_back(Span{{sp.start[0], 0, 0}, {b1, c.g.out, c.filters}});
    }
    return c;
  }
  std::vector<Steps> tiles;
  for (const Span& sp : x.spans) tiles.push_back(sp.empty() ? Steps{} : Steps{sp.start[1], sp.stop[1]});
  c.plan = detail::plan_time(tiles, c.g, op);
  for (int r = 0; r < n; ++r) {
    const Steps o = c.plan.outputs[r];
    c.out_spans.push_back(Span{{0, o.start, 0}, {c.batch, o.stop, c.filters}});
  }
  return c;
}

std::string spans_str(const std::vector<Span>& spans) {
  std::string s;
  for (const Span& sp : spans) s += (s.empty() ? "" : ", ") + sp.str();
  return s;
}

// What a tiled cotangent g was expected to look like and what it is.
[[noreturn]] void wrong_cotangent(Args& a, const Value& g, const char* forward, const Shape& shape,
                                  const std::vector<Span>& spans) {
  throw std::invalid_argument(error_message(
      "[", a.op(), "] g must be tiled like the result of ", forward, ": shape ", shape_str(shape), " with spans ",
      spans_str(spans), "; got ", g.describe(), g.is_tiled() ? " with spans " + spans_str(g.as_tiled().spans) : ""));
}

// g, the cotangent of a conv1d_d result: tiled like it.
Array cotangent_tile(Args& a, size_t i, const ConvCall& c) {
  const Value& v = a[i];
  if (!v.is_tiled() || v.as_tiled().shape != c.out_shape || v.as_tiled().spans != c.out_spans) {
    wrong_cotangent(a, v, "conv1d_d", c.out_shape, c.out_spans);
  }
  return v.as_tiled().tile;
}

Value shape_value(const Shape& s) {
  List l;
  for (int64_t d : s) l.emplace_back(d);
  return Value(std::move(l));
}

Array plain_kernel(Args& a, size_t i) {
  if (a[i].is_tiled()) {
    throw TypeError(error_message("[", a.op(), "] argument '", a.param_name(i),
                                  "' must be a plain array (the same on every locality), got ", a[i].describe()));
  }
  return a.array(i);
}

Array call_array(const char* name, std::vector<Value> args) {
  return call_primitive(name, std::move(args)).as_array();
}

// This locality's padded input for its outputs (time tiles), without
// communication: an overlapped tile holds it.
Array local_window(const ConvCall& c) {
  const TimePlan& p = c.plan;
  const int me = c.me;
  return padded_steps(c.x->tile, p.reads[me].start - c.span_steps().start, p.reads[me].size(), p.pad_before[me],
                      p.pad_after[me]);
}

// This locality's padded input for its outputs (time tiles): from its own
// tile when overlapped, else with the halo received from its neighbours.
Future<Array> window_of(const ConvCall& c, const char* op) {
  if (c.plan.overlapped) return Future<Array>::ready(local_window(c));
  const int me = c.me;
  return gather_steps(c.x->tile, c.plan.owned, c.plan.reads, c.plan.pad_before[me], c.plan.pad_after[me], me,
                      message_tag(op, c.site), c.site, op, c.x->group);
}

Value valid_str() { return Value(std::string("valid")); }

// ---- conv1d_d(x, w, stride, padding, dilation)

Future<Value> conv1d_d_async(Args& a) {
  const TiledArray& x = tiled_arg(a, 0, " (for a plain array use conv1d)");
  Array w = plain_kernel(a, 1);
  ConvCall c = conv_call(a, x, 0, w.shape(), 2, 3, 4);
  const DType dt = float_result(x.dtype(), w.dtype());
  const Value stride(c.g.stride), dilation(c.g.dilation);
  if (!c.along_time) {
    const Shape shape = c.out_spans[c.me].shape();
    Array y = x.span().empty() ? Array::zeros(dt, shape)
                               : call_array("conv1d", {Value(x.tile), Value(w), stride, a[3], dilation});
    return Future<Value>::ready(c.result(std::move(y)));
  }
  auto convolve = [c, w, dt, stride, dilation](const Array& window) {
    if (c.plan.outputs[c.me].empty()) return c.result(Array::zeros(dt, c.out_spans[c.me].shape()));
    return c.result(call_array("conv1d", {Value(window), Value(w), stride, valid_str(), dilation}));
  };
  return window_of(c, a.op()).then(convolve);
}

// conv1d_d_grad_input(g, w, x, stride, padding, dilation): the cotangent of x.
Future<Value> conv1d_d_grad_input_async(Args& a) {
  Array w = plain_kernel(a, 1);
  const TiledArray& x = tiled_arg(a, 2, "");
  ConvCall c = conv_call(a, x, 2, w.shape(), 3, 4, 5);
  Array g = cotangent_tile(a, 0, c);
  const DType dt = float_result(g.dtype(), w.dtype());
  const Value stride(c.g.stride), dilation(c.g.dilation);
  if (!c.along_time) {
    Array dx = x.span().empty()
                   ? Array::zeros(dt, x.tile.shape())
                   : call_array("conv1d_grad_input",
                                {Value(g), Value(w), shape_value(x.tile.shape()), stride, a[4], dilation});
    return Future<Value>::ready(c.like_x(std::move(dx)));
  }
  // The cotangent of the steps this locality's outputs read, padding cut off.
  const int me = c.me;
  const TimePlan& p = c.plan;
  Array read_grad = Array::zeros(dt, {c.batch, 0, c.channels});
  if (!p.outputs[me].empty()) {
    Shape window{c.batch, p.pad_before[me] + p.reads[me].size() + p.pad_after[me], c.channels};
    Array full =
        call_array("conv1d_grad_input", {Value(g), Value(w), shape_value(window), stride, valid_str(), dilation});
    read_grad = slice_steps(full, p.pad_before[me], p.reads[me].size());
  }
  if (p.overlapped) {
    Array dx = Array::zeros(dt, x.tile.shape());
    add_steps(dx, p.reads[me].start - c.span_steps().start, read_grad, 0, read_grad.dim(1));
    return Future<Value>::ready(c.like_x(std::move(dx)));
  }
  return scatter_add_steps(read_grad, p.owned, p.reads, x.tile.shape(), dt, me, message_tag(a.op(), c.site), c.site,
                           a.op(), x.group)
      .then([c](const Array& dx) { return c.like_x(dx); });
}

// The sum over localities of the kernel gradients (one all_reduce).
Future<Value> summed(const Array& dw, const std::string& site, int group) {
  if (group_info(group, "conv1d_d_grad_weight").size == 1) return Future<Value>::ready(Value(dw));
  return detail::all_reduce(dw, ReduceOp::sum, site, group);
}

// conv1d_d_grad_weight(g, x, w_shape, stride, padding, dilation): the
// cotangent of w, summed over localities.
Future<Value> conv1d_d_grad_weight_async(Args& a) {
  const TiledArray& x = tiled_arg(a, 1, "");
  Shape w_shape = a.int_list(2);
  ConvCall c = conv_call(a, x, 1, w_shape, 3, 4, 5);
  Array g = cotangent_tile(a, 0, c);
  const DType dt = float_result(g.dtype(), x.dtype());
  const Value stride(c.g.stride), dilation(c.g.dilation), w_shape_v(shape_value(w_shape));
  const std::string site = c.site;
  if (!c.along_time) {
    Array dw = x.span().empty() ? Array::zeros(dt, w_shape)
                                : call_array("conv1d_grad_weight", {Value(g), Value(x.tile), w_shape_v, stride, a[4],
                                                                    dilation});
    return summed(dw, site, x.group);
  }
  auto local = [c, g, dt, w_shape, w_shape_v, stride, dilation](const Array& window) {
    if (c.plan.outputs[c.me].empty()) return Array::zeros(dt, w_shape);
    return call_array("conv1d_grad_weight", {Value(g), Value(window), w_shape_v, stride, valid_str(), dilation});
  };
  const int group = x.group;
  return window_of(c, a.op()).then(local).then([site, group](const Array& dw) { return summed(dw, site, group); });
}

// ---- overlap_d(x, kernel_size, stride, padding, dilation)

// The partition x's time spans form and the widened spans overlap_d gives.
struct Overlap {
  bool along_time = false;
  std::vector<Steps> owned, widened;
  std::vector<Span> spans;
};

// The settings (kernel_size, stride, padding, dilation) are arguments
// first..first + 3 of the call.
Overlap overlap_of(Args& a, const TiledArray& x, size_t first) {
  const char* op = a.op();
  if (x.ndim() != 3) {
    throw std::invalid_argument(error_message("[", op, "] x must be 3-d (batch, steps, channels), got ",
                                              x.describe()));
  }
  ConvSteps g = detail::conv_steps(x.shape[1], positive_arg(a, first), positive_arg(a, first + 1),
                                   a.string(first + 2), positive_arg(a, first + 3), op);
  Overlap o;
  o.along_time = tiled_along_time(x, op);
  o.spans = x.spans;
  if (!o.along_time) return o;
  std::vector<Steps> tiles;
  for (const Span& sp : x.spans) tiles.push_back(sp.empty() ? Steps{} : Steps{sp.start[1], sp.stop[1]});
  TimePlan plan = detail::plan_time(tiles, g, op);
  if (plan.overlapped) {
    throw std::invalid_argument(error_message("[", op, "] x's time spans overlap already (", x.describe(),
                                              "); overlap_d widens spans that partition the steps"));
  }
  o.owned = plan.owned;
  o.widened = detail::halo_steps(o.owned, g);
  for (size_t r = 0; r < o.spans.size(); ++r) {
    if (o.owned[r].empty()) continue;
    o.spans[r].start[1] = o.widened[r].start;
    o.spans[r].stop[1] = o.widened[r].stop;
  }
  return o;
}

Future<Value> overlap_d_async(Args& a) {
  const TiledArray& x = tiled_arg(a, 0, "");
  Overlap o = overlap_of(a, x, 1);
  if (!o.along_time) return Future<Value>::ready(a[0]);
  auto made = [x = a[0].tiled_ptr(), spans = o.spans](const Array& tile) {
    TiledArray t = *x;
    t.tile = tile;
    t.spans = spans;
    t.tiling = "overlapped";
    return Value(std::move(t));
  };
  return gather_steps(x.tile, o.owned, o.widened, 0, 0, x.locality, message_tag(a.op(), a.site()), a.site(), a.op(),
                      x.group)
      .then(made);
}

// overlap_d_grad(g, x, kernel_size, stride, padding, dilation): the cotangent
// of x: each halo's cotangent added to the locality owning those steps.
Future<Value> overlap_d_grad_async(Args& a) {
  const TiledArray& x = tiled_arg(a, 1, "");
  Overlap o = overlap_of(a, x, 2);
  const Value& gv = a[0];
  if (!gv.is_tiled() || gv.as_tiled().shape != x.shape || gv.as_tiled().spans != o.spans) {
    wrong_cotangent(a, gv, "overlap_d", x.shape, o.spans);
  }
  const Array& g = gv.as_tiled().tile;
  if (!o.along_time) return Future<Value>::ready(gv);
  const DType dt = g.dtype() == DType::float32 ? DType::float32 : DType::float64;
  auto like_x = [x = a[1].tiled_ptr()](const Array& tile) {
    TiledArray t = *x;
    t.tile = tile;
    return Value(std::move(t));
  };
  return scatter_add_steps(g, o.owned, o.widened, x.tile.shape(), dt, x.locality, message_tag(a.op(), a.site()),
                           a.site(), a.op(), x.group)
      .then(like_x);
}

// ---- local_tile(x), with_tile(x, tile)

Value local_tile(Args& a) { return Value(tiled_arg(a, 0, "").tile); }

Value with_tile(Args& a) {
  const TiledArray& x = tiled_arg(a, 0, "");
  if (a[1].is_tiled()) a.type_error(1, "a plain array");
  Array tile = a.array(1);
  if (tile.shape() != x.tile.shape()) {
    throw std::invalid_argument(error_message("[", a.op(), "] tile has shape ", shape_str(tile.shape()),
                                              " but this locality's tile of x (span ", x.span().str(),
                                              ") has shape ", shape_str(x.tile.shape())));
  }
  TiledArray t = x;
  t.tile = std::move(tile);
  return Value(std::move(t));
}

Value str(const char* s) { return Value(std::string(s)); }

std::vector<Param> conv_settings() {
  return {opt("stride", Value(int64_t{1})), opt("padding", str("valid")), opt("dilation", Value(int64_t{1}))};
}

std::vector<Param> params(std::vector<Param> head) {
  for (Param& p : conv_settings()) head.push_back(std::move(p));
  return head;
}

const bool registered_conv_d = register_primitives({
    async_spec({.name = "conv1d_d",
                .family = "distributed",
                .params = params({{"x"}, {"w"}}),
                .help = "conv1d of a tiled x (batch, steps, channels) with a plain kernel w, tiled like x: batch "
                        "tiles convolve locally, time tiles first receive from their neighbours the "
                        "(kernel_size - 1) * dilation steps their windows read (nothing when the tiles overlap by "
                        "that much, see overlap_d).",
                .eval = nullptr,
                .ns_per_element = 20.0,
                .grads = {"conv1d_d_grad_input(g, w, x, stride, padding, dilation)",
                          "conv1d_d_grad_weight(g, x, shape(w), stride, padding, dilation)", "", "", ""}},
               conv1d_d_async),
    async_spec({.name = "conv1d_d_grad_input",
                .family = "distributed",
                .params = params({{"g"}, {"w"}, {"x"}}),
                .help = "The gradient rule of conv1d_d for x: tiled like x, each halo's part sent back to the "
                        "locality owning those steps and added there.",
                .eval = nullptr,
                .ns_per_element = 20.0},
               conv1d_d_grad_input_async),
    async_spec({.name = "conv1d_d_grad_weight",
                .family = "distributed",
                .params = params({{"g"}, {"x"}, {"w_shape"}}),
                .help = "The gradient rule of conv1d_d for the kernel: every locality's part summed with one "
                        "all_reduce, the same on every locality.",
                .eval = nullptr,
                .ns_per_element = 20.0},
               conv1d_d_grad_weight_async),
    async_spec({.name = "overlap_d",
                .family = "distributed",
                .params = params({{"x"}, {"kernel_size"}}),
                .help = "x tiled along time with every span widened by the halo a conv1d_d with these settings "
                        "reads (tiling 'overlapped'; the steps come from the neighbours), so that conv1d_d of "
                        "the result exchanges nothing; x tiled along the batch is returned as it is.",
                .eval = nullptr,
                .grads = {"overlap_d_grad(g, x, kernel_size, stride, padding, dilation)", "", "", "", ""}},
               overlap_d_async),
    async_spec({.name = "overlap_d_grad",
                .family = "distributed",
                .params = params({{"g"}, {"x"}, {"kernel_size"}}),
                .help = "The gradient rule of overlap_d: each halo's cotangent added to the locality owning "
                        "those steps; tiled like x.",
                .eval = nullptr},
               overlap_d_grad_async),
    {.name = "local_tile",
     .family = "distributed",
     .params = {{"x"}},
     .help = "This locality's tile of the tiled array x, as a plain array.",
     .eval = local_tile,
     .grads = {"with_tile(x, g)"}},
    {.name = "with_tile",
     .family = "distributed",
     .params = {{"x"}, {"tile"}},
     .help = "The tiled array x with this locality's tile replaced by tile (a plain array of the same shape).",
     .eval = with_tile,
     .grads = {"", "local_tile(g)"}},
});

}  // namespace
}  // namespace tessera::distributed
