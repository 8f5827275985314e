#include "tessera/kernels/conv.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace tessera::kernels {

int64_t ConvShape::in_size() const {
  int64_t n = channels_in;
  for (int d = 0; d < spatial; ++d) n *= in[d];
  return n;
}

int64_t ConvShape::out_size() const {
  int64_t n = channels_out;
  for (int d = 0; d < spatial; ++d) n *= out[d];
  return n;
}

int64_t ConvShape::weight_size() const {
  int64_t n = channels_in / groups * channels_out;
  for (int d = 0; d < spatial; ++d) n *= kernel[d];
  return n;
}

namespace {

std::atomic<uint64_t> g_onednn_calls{0};

// ---------------------------------------------------------------------------
// Direct loops (float64, and float32 where oneDNN declines). A 1-d shape is
// the 2-d one with height 1.

// ci and co count all channels; cg = ci / groups and fg = co / groups are
// the input and output channels of one group.
struct Geom2 {
  int64_t n, ci, co, h, w, kh, kw, oh, ow, sh, sw, dh, dw, ph, pw, groups, cg, fg;
};

Geom2 as_2d(const ConvShape& s) {
  const bool two = s.spatial == 2;
  const int x = two ? 1 : 0;  // index of the width dimension
  return Geom2{s.batch,
               s.channels_in,
               s.channels_out,
               two ? s.in[0] : 1,
               s.in[x],
               two ? s.kernel[0] : 1,
               s.kernel[x],
               two ? s.out[0] : 1,
               s.out[x],
               two ? s.stride[0] : 1,
               s.stride[x],
               two ? s.dilation[0] : 1,
               s.dilation[x],
               two ? s.pad_lo[0] : 0,
               s.pad_lo[x],
               s.groups,
               s.channels_in / s.groups,
               s.channels_out / s.groups};
}

template <class T>
void conv_forward_loops(const Geom2& g, const T* x, const T* w, T* y) {
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        T* yp = y + ((n * g.oh + oh) * g.ow + ow) * g.co;
        std::fill(yp, yp + g.co, T(0));
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            int64_t iw = ow * g.sw - g.pw + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const T* xp = x + ((n * g.h + ih) * g.w + iw) * g.ci;
            const T* wp = w + (kh * g.kw + kw) * g.cg * g.co;
            for (int64_t gr = 0; gr < g.groups; ++gr) {
              T* yo = yp + gr * g.fg;
              for (int64_t c = 0; c < g.cg; ++c) {
                const T xv = xp[gr * g.cg + c];
                const T* wr = wp + c * g.co + gr * g.fg;
                for (int64_t o = 0; o < g.fg; ++o) yo[o] += xv * wr[o];
              }
            }
          }
        }
      }
    }
  }
}

template <class T>
void conv_backward_data_loops(const Geom2& g, const T* gy, const T* w, T* dx) {
  std::fill(dx, dx + g.n * g.h * g.w * g.ci, T(0));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const T* gp = gy + ((n * g.oh + oh) * g.ow + ow) * g.co;
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            int64_t iw = ow * g.sw - g.pw + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            T* dp = dx + ((n * g.h + ih) * g.w + iw) * g.ci;
            const T* wp = w + (kh * g.kw + kw) * g.cg * g.co;
            for (int64_t gr = 0; gr < g.groups; ++gr) {
              const T* go = gp + gr * g.fg;
              for (int64_t c = 0; c < g.cg; ++c) {
                const T* wr = wp + c * g.co + gr * g.fg;
                T sum = 0;
                for (int64_t o = 0; o < g.fg; ++o) sum += go[o] * wr[o];
                dp[gr * g.cg + c] += sum;
              }
            }
          }
        }
      }
    }
  }
}

template <class T>
void conv_backward_weights_loops(const Geom2& g, const T* x, const T* gy, T* dw) {
  std::fill(dw, dw + g.kh * g.kw * g.cg * g.co, T(0));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const T* gp = gy + ((n * g.oh + oh) * g.ow + ow) * g.co;
        for (int64_t kh = 0; kh < g.kh; ++kh) {
          int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            int64_t iw = ow * g.sw - g.pw + kw * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const T* xp = x + ((n * g.h + ih) * g.w + iw) * g.ci;
            T* wp = dw + (kh * g.kw + kw) * g.cg * g.co;
            for (int64_t gr = 0; gr < g.groups; ++gr) {
              const T* go = gp + gr * g.fg;
              for (int64_t c = 0; c < g.cg; ++c) {
                const T xv = xp[gr * g.cg + c];
                T* wr = wp + c * g.co + gr * g.fg;
                for (int64_t o = 0; o < g.fg; ++o) wr[o] += xv * go[o];
              }
            }
          }
        }
      }
    }
  }
}

// Calls visit(ih, iw) for the window positions of output (oh, ow) inside the
// input, in row-major order.
template <class F>
void for_window(const Geom2& g, int64_t oh, int64_t ow, F&& visit) {
  for (int64_t kh = 0; kh < g.kh; ++kh) {
    int64_t ih = oh * g.sh - g.ph + kh;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t kw = 0; kw < g.kw; ++kw) {
      int64_t iw = ow * g.sw - g.pw + kw;
      if (iw < 0 || iw >= g.w) continue;
      visit(ih, iw);
    }
  }
}

template <class T>
void pool_forward_loops(PoolKind kind, const Geom2& g, const T* x, T* y) {
  const int64_t c = g.ci;
  std::vector<T> acc(static_cast<size_t>(c));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const T init = kind == PoolKind::max ? -std::numeric_limits<T>::infinity() : T(0);
        std::fill(acc.begin(), acc.end(), init);
        int64_t count = 0;
        for_window(g, oh, ow, [&](int64_t ih, int64_t iw) {
          const T* xp = x + ((n * g.h + ih) * g.w + iw) * c;
          ++count;
          if (kind == PoolKind::max) {
            for (int64_t k = 0; k < c; ++k) acc[k] = xp[k] > acc[k] ? xp[k] : acc[k];
          } else {
            for (int64_t k = 0; k < c; ++k) acc[k] += xp[k];
          }
        });
        T* yp = y + ((n * g.oh + oh) * g.ow + ow) * c;
        if (kind == PoolKind::max) {
          std::copy(acc.begin(), acc.end(), yp);
        } else {
          const T inv = count > 0 ? T(1) / static_cast<T>(count) : T(0);
          for (int64_t k = 0; k < c; ++k) yp[k] = acc[k] * inv;
        }
      }
    }
  }
}

template <class T>
void pool_backward_loops(PoolKind kind, const Geom2& g, const T* x, const T* gy, T* dx) {
  const int64_t c = g.ci;
  std::fill(dx, dx + g.n * g.h * g.w * c, T(0));
  std::vector<T> best(static_cast<size_t>(c));
  std::vector<int64_t> where(static_cast<size_t>(c));
  for (int64_t n = 0; n < g.n; ++n) {
    T* dn = dx + n * g.h * g.w * c;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const T* gp = gy + ((n * g.oh + oh) * g.ow + ow) * c;
        if (kind == PoolKind::max) {
          std::fill(where.begin(), where.end(), int64_t{-1});
          for_window(g, oh, ow, [&](int64_t ih, int64_t iw) {
            const int64_t pos = (ih * g.w + iw) * c;
            const T* xp = x + n * g.h * g.w * c + pos;
            for (int64_t k = 0; k < c; ++k) {
              // The first maximum wins.
              if (where[k] < 0 || xp[k] > best[k]) {
                best[k] = xp[k];
                where[k] = pos + k;
              }
            }
          });
          for (int64_t k = 0; k < c; ++k) {
            if (where[k] >= 0) dn[where[k]] += gp[k];
          }
        } else {
          int64_t count = 0;
          for_window(g, oh, ow, [&](int64_t, int64_t) { ++count; });
          if (count == 0) continue;
          const T inv = T(1) / static_cast<T>(count);
          for_window(g, oh, ow, [&](int64_t ih, int64_t iw) {
            T* dp = dn + (ih * g.w + iw) * c;
            for (int64_t k = 0; k < c; ++k) dp[k] += gp[k] * inv;
          });
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// oneDNN (float32).

using dnnl::memory;
using tag = dnnl::memory::format_tag;

// oneDNN on OpenMP sizes its parallel regions by omp_get_max_threads() of the
// calling thread; one thread per worker keeps all parallelism in the runtime.
void one_openmp_thread() {
  thread_local bool done = false;
  if (!done) {
    omp_set_num_threads(1);
    done = true;
  }
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::dims data_dims(const ConvShape& s, int64_t channels, const std::array<int64_t, 2>& sp) {
  memory::dims d{s.batch, channels};
  for (int i = 0; i < s.spatial; ++i) d.push_back(sp[i]);
  return d;
}

memory::dims spatial_dims(const ConvShape& s, const std::array<int64_t, 2>& v, int64_t minus = 0) {
  memory::dims d;
  for (int i = 0; i < s.spatial; ++i) d.push_back(v[i] - minus);
  return d;
}

memory::desc src_md(const ConvShape& s) {
  return memory::desc(data_dims(s, s.channels_in, s.in), memory::data_type::f32,
                      s.spatial == 1 ? tag::nwc : tag::nhwc);
}

memory::desc dst_md(const ConvShape& s) {
  return memory::desc(data_dims(s, s.channels_out, s.out), memory::data_type::f32,
                      s.spatial == 1 ? tag::nwc : tag::nhwc);
}

// Grouped weights are (groups, out / groups, in / groups, kernel...) to
// oneDNN; the user's (kernel..., in / groups, out) buffer, whose out index is
// group * (out / groups) + o, is exactly its wigo / hwigo layout.
memory::dims weight_dims(const ConvShape& s) {
  memory::dims d{s.channels_out, s.channels_in};
  if (s.groups > 1) d = {s.groups, s.channels_out / s.groups, s.channels_in / s.groups};
  for (int i = 0; i < s.spatial; ++i) d.push_back(s.kernel[i]);
  return d;
}

memory::desc user_weights_md(const ConvShape& s) {
  const tag t = s.groups > 1 ? (s.spatial == 1 ? tag::wigo : tag::hwigo)
                             : (s.spatial == 1 ? tag::wio : tag::hwio);
  return memory::desc(weight_dims(s), memory::data_type::f32, t);
}

memory::desc any_weights_md(const ConvShape& s) {
  return memory::desc(weight_dims(s), memory::data_type::f32, tag::any);
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A 64-byte-aligned buffer owned by the calling thread, grown on demand
// (scratchpads and reordered weights of one call at a time).
class ThreadBuffer {
 public:
  void* get(size_t bytes) {
    if (bytes > size_) {
      std::free(data_);
      size_ = (bytes + 63) / 64 * 64;
      data_ = std::aligned_alloc(64, size_);
      if (data_ == nullptr) {
        size_ = 0;
        throw std::bad_alloc();
      }
    }
    return data_;
  }
  ~ThreadBuffer() { std::free(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

void* scratch(size_t bytes, int which) {
  thread_local ThreadBuffer buffers[4];
  return buffers[which].get(std::max<size_t>(bytes, 64));
}

// The primitives of one (operation, shape, parameters) key, built once. An
// entry whose construction failed (oneDNN declined the case) is kept with
// ok = false so the loops run without trying again.
struct Entry {
  bool ok = false;
  dnnl::primitive main, helper;     // helper: forward pass of max pooling backward
  dnnl::reorder weights_reorder;    // user <-> implementation weight format
  bool reorder_weights = false;
  memory::desc weights_md, scratch_md, helper_scratch_md, workspace_md, helper_dst_md;
};

enum class Op : int64_t { conv_fwd, conv_bwd_data, conv_bwd_weights, pool_fwd, pool_bwd };

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
    return static_cast<size_t>(h);
  }
};

std::vector<int64_t> make_key(Op op, const ConvShape& s, int64_t extra) {
  std::vector<int64_t> k{static_cast<int64_t>(op), extra, s.spatial, s.batch, s.channels_in,
                         s.channels_out};
  k.push_back(s.groups);
  for (const auto* a : {&s.in, &s.kernel, &s.out, &s.stride, &s.dilation, &s.pad_lo, &s.pad_hi}) {
    k.push_back((*a)[0]);
    k.push_back((*a)[1]);
  }
  return k;
}

Entry build_entry(Op op, const ConvShape& s, PoolKind kind) {
  const auto& eng = cpu_engine();
  const auto attr = user_scratchpad();
  const auto strides = spatial_dims(s, s.stride);
  const auto pad_l = spatial_dims(s, s.pad_lo), pad_r = spatial_dims(s, s.pad_hi);
  Entry e;
  if (op == Op::pool_fwd || op == Op::pool_bwd) {
    const auto alg = kind == PoolKind::max ? dnnl::algorithm::pooling_max
                                           : dnnl::algorithm::pooling_avg_exclude_padding;
    const auto kernel = spatial_dims(s, s.kernel);
    const auto prop = op == Op::pool_fwd ? dnnl::prop_kind::forward_inference
                                         : dnnl::prop_kind::forward_training;
    dnnl::pooling_forward::primitive_desc fwd(
        dnnl::pooling_forward::desc(prop, alg, src_md(s), dst_md(s), strides, kernel, pad_l,
                                    pad_r),
        attr, eng);
    if (op == Op::pool_fwd) {
      e.main = dnnl::pooling_forward(fwd);
      e.scratch_md = fwd.scratchpad_desc();
    } else {
      dnnl::pooling_backward::primitive_desc bwd(
          dnnl::pooling_backward::desc(alg, src_md(s), dst_md(s), strides, kernel, pad_l, pad_r),
          attr, eng, fwd);
      e.main = dnnl::pooling_backward(bwd);
      e.scratch_md = bwd.scratchpad_desc();
      e.helper = dnnl::pooling_forward(fwd);
      e.helper_scratch_md = fwd.scratchpad_desc();
      e.workspace_md = fwd.workspace_desc();
      e.helper_dst_md = fwd.dst_desc();
    }
    e.ok = true;
    return e;
  }
  const auto dilates = spatial_dims(s, s.dilation, 1);  // oneDNN counts 0 as "no dilation"
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto user_w = user_weights_md(s);
  auto fwd_desc = [&](dnnl::prop_kind prop) {
    return dnnl::convolution_forward::desc(prop, alg, src_md(s), any_weights_md(s), dst_md(s),
                                           strides, dilates, pad_l, pad_r);
  };
  if (op == Op::conv_fwd) {
    dnnl::convolution_forward::primitive_desc pd(fwd_desc(dnnl::prop_kind::forward_inference),
                                                 attr, eng);
    e.main = dnnl::convolution_forward(pd);
    e.weights_md = pd.weights_desc();
    e.scratch_md = pd.scratchpad_desc();
  } else {
    dnnl::convolution_forward::primitive_desc hint(fwd_desc(dnnl::prop_kind::forward_training),
                                                   eng);
    if (op == Op::conv_bwd_data) {
      dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(alg, src_md(s), any_weights_md(s), dst_md(s),
                                                strides, dilates, pad_l, pad_r),
          attr, eng, hint);
      e.main = dnnl::convolution_backward_data(pd);
      e.weights_md = pd.weights_desc();
      e.scratch_md = pd.scratchpad_desc();
    } else {
      dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(alg, src_md(s), any_weights_md(s), dst_md(s),
                                                   strides, dilates, pad_l, pad_r),
          attr, eng, hint);
      e.main = dnnl::convolution_backward_weights(pd);
      e.weights_md = pd.diff_weights_desc();
      e.scratch_md = pd.scratchpad_desc();
    }
  }
  if (e.weights_md != user_w) {
    e.reorder_weights = true;
    // Backward weights produces the implementation's format: reorder it back.
    const bool to_user = op == Op::conv_bwd_weights;
    e.weights_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        eng, to_user ? e.weights_md : user_w, eng, to_user ? user_w : e.weights_md));
  }
  e.ok = true;
  return e;
}

// The cached primitives for a key; nullptr when oneDNN declines the case. A
// full cache (a program sweeping many shapes) serves new keys uncached.
std::shared_ptr<const Entry> lookup(Op op, const ConvShape& s, PoolKind kind = PoolKind::max) {
  one_openmp_thread();
  static std::mutex mutex;
  static std::unordered_map<std::vector<int64_t>, std::shared_ptr<const Entry>, KeyHash> cache;
  constexpr size_t kMaxEntries = 512;
  auto key = make_key(op, s, static_cast<int64_t>(kind));
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second->ok ? it->second : nullptr;
  }
  auto entry = std::make_shared<Entry>();
  try {
    *entry = build_entry(op, s, kind);
  } catch (const dnnl::error&) {
    entry->ok = false;  // an unsupported case: the loops take it
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() < kMaxEntries) cache.emplace(std::move(key), entry);
  }
  return entry->ok ? entry : nullptr;
}

memory mem(const memory::desc& md, const void* p) {
  return memory(md, cpu_engine(), const_cast<void*>(p));
}

using ArgMap = std::unordered_map<int, memory>;

// Adds the user scratchpad (thread buffer `which`) when the primitive needs one.
void add_scratchpad(ArgMap& args, const memory::desc& md, int which) {
  if (md.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, mem(md, scratch(md.get_size(), which)));
}

bool conv_onednn(Op op, const ConvShape& s, const void* a, const void* b, void* out) {
  std::shared_ptr<const Entry> e = lookup(op, s);
  if (e == nullptr) return false;
  dnnl::stream stream(cpu_engine());
  const auto user_w = user_weights_md(s);
  ArgMap args;
  add_scratchpad(args, e->scratch_md, 0);
  if (op == Op::conv_bwd_weights) {
    // a = x, b = g, out = dw
    memory dw = e->reorder_weights ? mem(e->weights_md, scratch(e->weights_md.get_size(), 1))
                                   : mem(user_w, out);
    args.emplace(DNNL_ARG_SRC, mem(src_md(s), a));
    args.emplace(DNNL_ARG_DIFF_DST, mem(dst_md(s), b));
    args.emplace(DNNL_ARG_DIFF_WEIGHTS, dw);
    e->main.execute(stream, args);
    if (e->reorder_weights) {
      memory user = mem(user_w, out);
      e->weights_reorder.execute(stream, dw, user);
    }
  } else {
    // forward: a = x, b = w, out = y; backward data: a = g, b = w, out = dx
    memory w = mem(user_w, b);
    if (e->reorder_weights) {
      memory wr = mem(e->weights_md, scratch(e->weights_md.get_size(), 1));
      e->weights_reorder.execute(stream, w, wr);
      w = wr;
    }
    args.emplace(DNNL_ARG_WEIGHTS, w);
    if (op == Op::conv_fwd) {
      args.emplace(DNNL_ARG_SRC, mem(src_md(s), a));
      args.emplace(DNNL_ARG_DST, mem(dst_md(s), out));
    } else {
      args.emplace(DNNL_ARG_DIFF_DST, mem(dst_md(s), a));
      args.emplace(DNNL_ARG_DIFF_SRC, mem(src_md(s), out));
    }
    e->main.execute(stream, args);
  }
  stream.wait();
  g_onednn_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool pool_onednn(Op op, PoolKind kind, const ConvShape& s, const void* x, const void* g,
                 void* out) {
  std::shared_ptr<const Entry> e = lookup(op, s, kind);
  if (e == nullptr) return false;
  dnnl::stream stream(cpu_engine());
  ArgMap args;
  add_scratchpad(args, e->scratch_md, 0);
  if (op == Op::pool_fwd) {
    args.emplace(DNNL_ARG_SRC, mem(src_md(s), x));
    args.emplace(DNNL_ARG_DST, mem(dst_md(s), out));
  } else {
    args.emplace(DNNL_ARG_DIFF_DST, mem(dst_md(s), g));
    args.emplace(DNNL_ARG_DIFF_SRC, mem(src_md(s), out));
    if (kind == PoolKind::max) {
      // Max pooling's backward needs the arg-max workspace of a forward pass.
      memory ws = mem(e->workspace_md, scratch(e->workspace_md.get_size(), 1));
      ArgMap fwd{{DNNL_ARG_SRC, mem(src_md(s), x)},
                 {DNNL_ARG_DST, mem(e->helper_dst_md, scratch(e->helper_dst_md.get_size(), 2))},
                 {DNNL_ARG_WORKSPACE, ws}};
      add_scratchpad(fwd, e->helper_scratch_md, 3);
      e->helper.execute(stream, fwd);
      args.emplace(DNNL_ARG_WORKSPACE, ws);
    }
  }
  e->main.execute(stream, args);
  stream.wait();
  g_onednn_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

template <class F>
void by_dtype(DType dt, F&& f) {
  if (dt == DType::float32) {
    f(TypeTag<float>{});
  } else {
    f(TypeTag<double>{});
  }
}

}  // namespace

void conv_forward(DType dt, const ConvShape& s, const void* x, const void* w, void* y) {
  if (s.batch == 0 || s.out_size() == 0) return;
  if (dt == DType::float32 && s.in_size() > 0 && conv_onednn(Op::conv_fwd, s, x, w, y)) return;
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    conv_forward_loops(as_2d(s), static_cast<const T*>(x), static_cast<const T*>(w),
                       static_cast<T*>(y));
  });
}

void conv_backward_data(DType dt, const ConvShape& s, const void* g, const void* w, void* dx) {
  if (s.batch == 0 || s.in_size() == 0) return;
  if (dt == DType::float32 && s.out_size() > 0 &&
      conv_onednn(Op::conv_bwd_data, s, g, w, dx)) {
    return;
  }
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    conv_backward_data_loops(as_2d(s), static_cast<const T*>(g), static_cast<const T*>(w),
                             static_cast<T*>(dx));
  });
}

void conv_backward_weights(DType dt, const ConvShape& s, const void* x, const void* g,
                           void* dw) {
  if (s.weight_size() == 0) return;
  if (dt == DType::float32 && s.batch > 0 && s.in_size() > 0 && s.out_size() > 0 &&
      conv_onednn(Op::conv_bwd_weights, s, x, g, dw)) {
    return;
  }
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    conv_backward_weights_loops(as_2d(s), static_cast<const T*>(x), static_cast<const T*>(g),
                                static_cast<T*>(dw));
  });
}

void pool_forward(DType dt, PoolKind kind, const ConvShape& s, const void* x, void* y) {
  if (s.batch == 0 || s.out_size() == 0) return;
  if (dt == DType::float32 && s.in_size() > 0 &&
      pool_onednn(Op::pool_fwd, kind, s, x, nullptr, y)) {
    return;
  }
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    pool_forward_loops(kind, as_2d(s), static_cast<const T*>(x), static_cast<T*>(y));
  });
}

void pool_backward(DType dt, PoolKind kind, const ConvShape& s, const void* x, const void* g,
                   void* dx) {
  if (s.batch == 0 || s.in_size() == 0) return;
  if (dt == DType::float32 && s.out_size() > 0 &&
      pool_onednn(Op::pool_bwd, kind, s, x, g, dx)) {
    return;
  }
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    pool_backward_loops(kind, as_2d(s), static_cast<const T*>(x), static_cast<const T*>(g),
                        static_cast<T*>(dx));
  });
}

uint64_t onednn_calls() { return g_onednn_calls.load(std::memory_order_relaxed); }

}  // namespace tessera::kernels
