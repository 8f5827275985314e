#include "tessera/kernels/conv.hpp"
#include "tessera/kernels/one_omp_thread.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace tessera::kernels {

// oneDNN's layout of a kernel and a buffer holding the kernel in it.
struct ConvWeights::Packed {
  dnnl::memory::desc md;
  std::shared_ptr<void> data;
};

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

std::atomic<uint64_t> g_onednn_calls{0}, g_winograd_calls{0};

// ---------------------------------------------------------------------------
// Direct loops (float64, and float32 where oneDNN declines). A 1-d or 2-d
// shape is the 3-d one with depth (and height) 1.

// ci and co count all channels; cg = ci / groups and fg = co / groups are
// the input and output channels of one group.
struct Geom3 {
  int64_t n, ci, co, d, h, w, kd, kh, kw, od, oh, ow, sd, sh, sw, dd, dh, dw, pd, ph, pw, groups,
      cg, fg;
};

Geom3 as_3d(const ConvShape& s) {
  // Entry i of the 3-d geometry is entry i - (3 - spatial) of s, or 1 (0
  // for padding) for the leading dimensions s does not have.
  const int skip = 3 - s.spatial;
  auto at = [&](const ConvShape::Extents& v, int i, int64_t absent) {
    return i < skip ? absent : v[static_cast<size_t>(i - skip)];
  };
  return Geom3{s.batch,
               s.channels_in,
               s.channels_out,
               at(s.in, 0, 1),
               at(s.in, 1, 1),
               at(s.in, 2, 1),
               at(s.kernel, 0, 1),
               at(s.kernel, 1, 1),
               at(s.kernel, 2, 1),
               at(s.out, 0, 1),
               at(s.out, 1, 1),
               at(s.out, 2, 1),
               at(s.stride, 0, 1),
               at(s.stride, 1, 1),
               at(s.stride, 2, 1),
               at(s.dilation, 0, 1),
               at(s.dilation, 1, 1),
               at(s.dilation, 2, 1),
               at(s.pad_lo, 0, 0),
               at(s.pad_lo, 1, 0),
               at(s.pad_lo, 2, 0),
               s.groups,
               s.channels_in / s.groups,
               s.channels_out / s.groups};
}

// Calls visit(n, output_position, input_position, kernel_position) for each
// sample, output position and kernel tap inside the input (positions count
// spatial points in row-major order), taps in row-major order.
template <class F>
void for_taps(const Geom3& g, F&& visit) {
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t od = 0; od < g.od; ++od) {
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const int64_t out_pos = ((n * g.od + od) * g.oh + oh) * g.ow + ow;
          for (int64_t kd = 0; kd < g.kd; ++kd) {
            const int64_t id = od * g.sd - g.pd + kd * g.dd;
            if (id < 0 || id >= g.d) continue;
            for (int64_t kh = 0; kh < g.kh; ++kh) {
              const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
              if (ih < 0 || ih >= g.h) continue;
              for (int64_t kw = 0; kw < g.kw; ++kw) {
                const int64_t iw = ow * g.sw - g.pw + kw * g.dw;
                if (iw < 0 || iw >= g.w) continue;
                visit(out_pos, ((n * g.d + id) * g.h + ih) * g.w + iw,
                      (kd * g.kh + kh) * g.kw + kw);
              }
            }
          }
        }
      }
    }
  }
}

template <class T>
void conv_forward_loops(const Geom3& g, const T* x, const T* w, T* y) {
  std::fill(y, y + g.n * g.od * g.oh * g.ow * g.co, T(0));
  for_taps(g, [&](int64_t out_pos, int64_t in_pos, int64_t tap) {
    T* yp = y + out_pos * g.co;
    const T* xp = x + in_pos * g.ci;
    const T* wp = w + tap * g.cg * g.co;
    for (int64_t gr = 0; gr < g.groups; ++gr) {
      T* yo = yp + gr * g.fg;
      for (int64_t c = 0; c < g.cg; ++c) {
        const T xv = xp[gr * g.cg + c];
        const T* wr = wp + c * g.co + gr * g.fg;
        for (int64_t o = 0; o < g.fg; ++o) yo[o] += xv * wr[o];
      }
    }
  });
}

template <class T>
void conv_backward_data_loops(const Geom3& g, const T* gy, const T* w, T* dx) {
  std::fill(dx, dx + g.n * g.d * g.h * g.w * g.ci, T(0));
  for_taps(g, [&](int64_t out_pos, int64_t in_pos, int64_t tap) {
    const T* gp = gy + out_pos * g.co;
    T* dp = dx + in_pos * g.ci;
    const T* wp = w + tap * g.cg * g.co;
    for (int64_t gr = 0; gr < g.groups; ++gr) {
      const T* go = gp + gr * g.fg;
      for (int64_t c = 0; c < g.cg; ++c) {
        const T* wr = wp + c * g.co + gr * g.fg;
        T sum = 0;
        for (int64_t o = 0; o < g.fg; ++o) sum += go[o] * wr[o];
        dp[gr * g.cg + c] += sum;
      }
    }
  });
}

template <class T>
void conv_backward_weights_loops(const Geom3& g, const T* x, const T* gy, T* dw) {
  std::fill(dw, dw + g.kd * g.kh * g.kw * g.cg * g.co, T(0));
  for_taps(g, [&](int64_t out_pos, int64_t in_pos, int64_t tap) {
    const T* gp = gy + out_pos * g.co;
    const T* xp = x + in_pos * g.ci;
    T* wp = dw + tap * g.cg * g.co;
    for (int64_t gr = 0; gr < g.groups; ++gr) {
      const T* go = gp + gr * g.fg;
      for (int64_t c = 0; c < g.cg; ++c) {
        const T xv = xp[gr * g.cg + c];
        T* wr = wp + c * g.co + gr * g.fg;
        for (int64_t o = 0; o < g.fg; ++o) wr[o] += xv * go[o];
      }
    }
  });
}

// Calls visit(position) for the window positions of output (od, oh, ow) of
// one sample inside the input (spatial points of the sample, row-major),
// in row-major order.
template <class F>
void for_window(const Geom3& g, int64_t od, int64_t oh, int64_t ow, F&& visit) {
  for (int64_t kd = 0; kd < g.kd; ++kd) {
    const int64_t id = od * g.sd - g.pd + kd;
    if (id < 0 || id >= g.d) continue;
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const int64_t ih = oh * g.sh - g.ph + kh;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const int64_t iw = ow * g.sw - g.pw + kw;
        if (iw < 0 || iw >= g.w) continue;
        visit((id * g.h + ih) * g.w + iw);
      }
    }
  }
}

// Calls body(n, od, oh, ow, output_position) for every output point.
template <class F>
void for_outputs(const Geom3& g, F&& body) {
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t od = 0; od < g.od; ++od) {
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          body(n, od, oh, ow, ((n * g.od + od) * g.oh + oh) * g.ow + ow);
        }
      }
    }
  }
}

template <class T>
void pool_forward_loops(PoolKind kind, const Geom3& g, const T* x, T* y) {
  const int64_t c = g.ci, sample = g.d * g.h * g.w * c;
  std::vector<T> acc(static_cast<size_t>(c));
  for_outputs(g, [&](int64_t n, int64_t od, int64_t oh, int64_t ow, int64_t out_pos) {
    const T init = kind == PoolKind::max ? -std::numeric_limits<T>::infinity() : T(0);
    std::fill(acc.begin(), acc.end(), init);
    int64_t count = 0;
    for_window(g, od, oh, ow, [&](int64_t pos) {
      const T* xp = x + n * sample + pos * c;
      ++count;
      if (kind == PoolKind::max) {
        for (int64_t k = 0; k < c; ++k) acc[k] = xp[k] > acc[k] ? xp[k] : acc[k];
      } else {
        for (int64_t k = 0; k < c; ++k) acc[k] += xp[k];
      }
    });
    T* yp = y + out_pos * c;
    if (kind == PoolKind::max) {
      std::copy(acc.begin(), acc.end(), yp);
    } else {
      const T inv = count > 0 ? T(1) / static_cast<T>(count) : T(0);
      for (int64_t k = 0; k < c; ++k) yp[k] = acc[k] * inv;
    }
  });
}

template <class T>
void pool_backward_loops(PoolKind kind, const Geom3& g, const T* x, const T* gy, T* dx) {
  const int64_t c = g.ci, sample = g.d * g.h * g.w * c;
  std::fill(dx, dx + g.n * sample, T(0));
  std::vector<T> best(static_cast<size_t>(c));
  std::vector<int64_t> where(static_cast<size_t>(c));
  for_outputs(g, [&](int64_t n, int64_t od, int64_t oh, int64_t ow, int64_t out_pos) {
    T* dn = dx + n * sample;
    const T* gp = gy + out_pos * c;
    if (kind == PoolKind::max) {
      std::fill(where.begin(), where.end(), int64_t{-1});
      for_window(g, od, oh, ow, [&](int64_t pos) {
        const T* xp = x + n * sample + pos * c;
        for (int64_t k = 0; k < c; ++k) {
          // The first maximum wins.
          if (where[k] < 0 || xp[k] > best[k]) {
            best[k] = xp[k];
            where[k] = pos * c + k;
          }
        }
      });
      for (int64_t k = 0; k < c; ++k) {
        if (where[k] >= 0) dn[where[k]] += gp[k];
      }
    } else {
      int64_t count = 0;
      for_window(g, od, oh, ow, [&](int64_t) { ++count; });
      if (count == 0) return;
      const T inv = T(1) / static_cast<T>(count);
      for_window(g, od, oh, ow, [&](int64_t pos) {
        T* dp = dn + pos * c;
        for (int64_t k = 0; k < c; ++k) dp[k] += gp[k] * inv;
      });
    }
  });
}

template <class T>
void max_pool_select_loops(const Geom3& g, const T* x, const T* cx, T* y) {
  const int64_t c = g.ci, sample = g.d * g.h * g.w * c;
  std::vector<T> best(static_cast<size_t>(c));
  std::vector<int64_t> where(static_cast<size_t>(c));
  for_outputs(g, [&](int64_t n, int64_t od, int64_t oh, int64_t ow, int64_t out_pos) {
    std::fill(where.begin(), where.end(), int64_t{-1});
    for_window(g, od, oh, ow, [&](int64_t pos) {
      const T* xp = x + n * sample + pos * c;
      for (int64_t k = 0; k < c; ++k) {
        // The first maximum wins, as in pool_backward_loops.
        if (where[k] < 0 || xp[k] > best[k]) {
          best[k] = xp[k];
          where[k] = pos * c + k;
        }
      }
    });
    T* yp = y + out_pos * c;
    for (int64_t k = 0; k < c; ++k) yp[k] = where[k] >= 0 ? cx[n * sample + where[k]] : T(0);
  });
}

// ---------------------------------------------------------------------------
// oneDNN (float32).

using dnnl::memory;
using tag = dnnl::memory::format_tag;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::dims data_dims(const ConvShape& s, int64_t channels, const ConvShape::Extents& sp) {
  memory::dims d{s.batch, channels};
  for (int i = 0; i < s.spatial; ++i) d.push_back(sp[i]);
  return d;
}

memory::dims spatial_dims(const ConvShape& s, const ConvShape::Extents& v,
                         int64_t minus = 0) {
  memory::dims d;
  for (int i = 0; i < s.spatial; ++i) d.push_back(v[i] - minus);
  return d;
}

// Channels-last data of 1, 2 or 3 spatial dimensions.
tag data_tag(const ConvShape& s) {
  return s.spatial == 1 ? tag::nwc : s.spatial == 2 ? tag::nhwc : tag::ndhwc;
}

memory::desc src_md(const ConvShape& s) {
  return memory::desc(data_dims(s, s.channels_in, s.in), memory::data_type::f32, data_tag(s));
}

memory::desc dst_md(const ConvShape& s) {
  return memory::desc(data_dims(s, s.channels_out, s.out), memory::data_type::f32, data_tag(s));
}

// Grouped weights are (groups, out / groups, in / groups, kernel...) to
// oneDNN; the user's (kernel..., in / groups, out) buffer, whose out index is
// group * (out / groups) + o, is exactly its wigo / hwigo / dhwigo layout.
memory::dims weight_dims(const ConvShape& s) {
  memory::dims d{s.channels_out, s.channels_in};
  if (s.groups > 1) d = {s.groups, s.channels_out / s.groups, s.channels_in / s.groups};
  for (int i = 0; i < s.spatial; ++i) d.push_back(s.kernel[i]);
  return d;
}

memory::desc user_weights_md(const ConvShape& s) {
  const tag grouped[] = {tag::wigo, tag::hwigo, tag::dhwigo};
  const tag plain[] = {tag::wio, tag::hwio, tag::dhwio};
  const tag t = (s.groups > 1 ? grouped : plain)[s.spatial - 1];
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
// (the scratchpad and reordered operands of one call at a time).
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

// Buffers: 0 scratchpad, 1 kernel, 2 first input, 3 second input or output,
// 4 the cotangent shared by both backward passes (ConvWeightGradient).
void* scratch(size_t bytes, int which) {
  thread_local ThreadBuffer buffers[5];
  return buffers[which].get(std::max<size_t>(bytes, 64));
}

// A 64-byte-aligned heap buffer (kernels laid out for oneDNN, partial weight
// gradients).
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<void, FreeDeleter>;

AlignedBuffer aligned_buffer(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 64) + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  return AlignedBuffer(p);
}

std::atomic<bool>& winograd_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("TESSERA_CONV_WINOGRAD");
    return !(v && std::strcmp(v, "0") == 0);
  }()};
  return on;
}

// Whether this CPU has oneDNN's Winograd (AVX-512 only), tried once.
bool winograd_supported() {
  static const bool ok = [] {
    const OneOpenMPThread omp;
    try {
      const memory::desc data({1, 16, 8, 8}, memory::data_type::f32, tag::any);
      const memory::desc w({16, 16, 3, 3}, memory::data_type::f32, tag::any);
      dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::convolution_winograd, data, w, data,
                                          {1, 1}, {0, 0}, {1, 1}, {1, 1}),
          cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

// The primitives of one (operation, shape, parameters) key, built once. An
// entry whose construction failed (oneDNN declined the case) is kept with
// ok = false so the loops run without trying again.
struct Entry {
  bool ok = false;
  bool winograd = false;
  dnnl::primitive main, helper;     // helper: forward pass of max pooling backward
  // Forward and backward data: the user's kernel to weights_md; backward
  // weights: weights_md (the gradient's layout) to the user's.
  dnnl::reorder weights_reorder;
  bool reorder_weights = false;
  memory::desc weights_md, scratch_md, helper_scratch_md, workspace_md, helper_dst_md;
  // Layouts of the call's inputs a, b and output when the implementation
  // wants other than the user's channels-last ones (Winograd's blocked
  // layouts), and the reorders into and out of them.
  memory::desc a_md, b_md, out_md;
  dnnl::reorder a_in, b_in, out_back;
  bool reorder_a = false, reorder_b = false, reorder_out = false;
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
    k.insert(k.end(), a->begin(), a->end());
  }
  return k;
}

Entry build_pool_entry(Op op, const ConvShape& s, PoolKind kind) {
  const auto& eng = cpu_engine();
  const auto attr = user_scratchpad();
  const auto strides = spatial_dims(s, s.stride);
  const auto pad_l = spatial_dims(s, s.pad_lo), pad_r = spatial_dims(s, s.pad_hi);
  Entry e;
  const auto alg = kind == PoolKind::max ? dnnl::algorithm::pooling_max
                                         : dnnl::algorithm::pooling_avg_exclude_padding;
  const auto kernel = spatial_dims(s, s.kernel);
  const auto prop = op == Op::pool_fwd ? dnnl::prop_kind::forward_inference
                                       : dnnl::prop_kind::forward_training;
  dnnl::pooling_forward::primitive_desc fwd(
      dnnl::pooling_forward::desc(prop, alg, src_md(s), dst_md(s), strides, kernel, pad_l, pad_r),
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

// A reorder from `from` to `to` in `r` when they differ.
bool reorder_if_needed(const memory::desc& from, const memory::desc& to, dnnl::reorder& r) {
  if (from == to) return false;
  r = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
  return true;
}

Entry build_conv_entry(Op op, const ConvShape& s, bool winograd) {
  const auto& eng = cpu_engine();
  const auto attr = user_scratchpad();
  const auto strides = spatial_dims(s, s.stride);
  const auto pad_l = spatial_dims(s, s.pad_lo), pad_r = spatial_dims(s, s.pad_hi);
  const auto dilates = spatial_dims(s, s.dilation, 1);  // oneDNN counts 0 as "no dilation"
  const auto alg = winograd ? dnnl::algorithm::convolution_winograd
                            : dnnl::algorithm::convolution_direct;
  // Winograd runs on channel-blocked data only; direct reads the user's.
  const memory::desc src = winograd ? memory::desc(src_md(s).dims(), memory::data_type::f32,
                                                   tag::any)
                                    : src_md(s);
  const memory::desc dst = winograd ? memory::desc(dst_md(s).dims(), memory::data_type::f32,
                                                   tag::any)
                                    : dst_md(s);
  const auto user_w = user_weights_md(s);
  auto fwd_desc = [&](dnnl::prop_kind prop) {
    return dnnl::convolution_forward::desc(prop, alg, src, any_weights_md(s), dst, strides,
                                           dilates, pad_l, pad_r);
  };
  Entry e;
  e.winograd = winograd;
  memory::desc user_a, user_b, user_out;
  if (op == Op::conv_fwd) {
    // Winograd for inference takes its kernel pre-transformed, and oneDNN's
    // reorder into that layout is slow (milliseconds per evaluation); the
    // training variant transforms the kernel itself, in far less time.
    const auto prop =
        winograd ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    dnnl::convolution_forward::primitive_desc pd(fwd_desc(prop), attr, eng);
    e.main = dnnl::convolution_forward(pd);
    e.weights_md = pd.weights_desc();
    e.scratch_md = pd.scratchpad_desc();
    e.a_md = pd.src_desc();
    e.out_md = pd.dst_desc();
    user_a = src_md(s);
    user_out = dst_md(s);
  } else {
    dnnl::convolution_forward::primitive_desc hint(fwd_desc(dnnl::prop_kind::forward_training),
                                                   eng);
    if (op == Op::conv_bwd_data) {
      dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(alg, src, any_weights_md(s), dst, strides,
                                                dilates, pad_l, pad_r),
          attr, eng, hint);
      e.main = dnnl::convolution_backward_data(pd);
      e.weights_md = pd.weights_desc();
      e.scratch_md = pd.scratchpad_desc();
      e.a_md = pd.diff_dst_desc();
      e.out_md = pd.diff_src_desc();
      user_a = dst_md(s);
      user_out = src_md(s);
    } else {
      dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(alg, src, any_weights_md(s), dst, strides,
                                                   dilates, pad_l, pad_r),
          attr, eng, hint);
      e.main = dnnl::convolution_backward_weights(pd);
      e.weights_md = pd.diff_weights_desc();
      e.scratch_md = pd.scratchpad_desc();
      e.a_md = pd.src_desc();
      e.b_md = pd.diff_dst_desc();
      user_a = src_md(s);
      user_b = dst_md(s);
    }
  }
  if (op == Op::conv_bwd_weights) {
    e.reorder_weights = reorder_if_needed(e.weights_md, user_w, e.weights_reorder);
    e.reorder_b = reorder_if_needed(user_b, e.b_md, e.b_in);
  } else {
    e.reorder_weights = reorder_if_needed(user_w, e.weights_md, e.weights_reorder);
    e.reorder_out = reorder_if_needed(e.out_md, user_out, e.out_back);
  }
  e.reorder_a = reorder_if_needed(user_a, e.a_md, e.a_in);
  e.ok = true;
  return e;
}

Entry build_entry(Op op, const ConvShape& s, int64_t extra) {
  if (op == Op::pool_fwd || op == Op::pool_bwd) {
    return build_pool_entry(op, s, static_cast<PoolKind>(extra));
  }
  if (extra != 0) {
    try {
      return build_conv_entry(op, s, true);
    } catch (const dnnl::error&) {
      // Winograd declined this case (padding, say): the direct algorithm takes it.
    }
  }
  return build_conv_entry(op, s, false);
}

// The cached primitives for a key; nullptr when oneDNN declines the case. A
// full cache (a program sweeping many shapes) serves new keys uncached.
// `extra`: the pooling kind, or for convolutions whether to try Winograd.
std::shared_ptr<const Entry> lookup(Op op, const ConvShape& s, int64_t extra) {
  const OneOpenMPThread omp;  // primitive creation
  static std::mutex mutex;
  static std::unordered_map<std::vector<int64_t>, std::shared_ptr<const Entry>, KeyHash> cache;
  constexpr size_t kMaxEntries = 512;
  auto key = make_key(op, s, extra);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second->ok ? it->second : nullptr;
  }
  auto entry = std::make_shared<Entry>();
  try {
    *entry = build_entry(op, s, extra);
  } catch (const dnnl::error&) {
    entry->ok = false;  // an unsupported case: the loops take it
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() < kMaxEntries) cache.emplace(std::move(key), entry);
  }
  return entry->ok ? entry : nullptr;
}

std::shared_ptr<const Entry> conv_lookup(Op op, const ConvShape& s) {
  return lookup(op, s, uses_winograd(DType::float32, s) ? 1 : 0);
}

memory mem(const memory::desc& md, const void* p) {
  return memory(md, cpu_engine(), const_cast<void*>(p));
}

using ArgMap = std::unordered_map<int, memory>;

// Adds the user scratchpad (thread buffer `which`) when the primitive needs one.
void add_scratchpad(ArgMap& args, const memory::desc& md, int which) {
  if (md.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, mem(md, scratch(md.get_size(), which)));
}

// The user's buffer p as memory of layout `user`, reordered into thread
// buffer `which` when the implementation wants layout `impl`.
memory input_memory(dnnl::stream& stream, const memory::desc& user, const void* p, bool reorder,
                    const dnnl::reorder& r, const memory::desc& impl, int which) {
  memory m = mem(user, p);
  if (!reorder) return m;
  memory t = mem(impl, scratch(impl.get_size(), which));
  r.execute(stream, m, t);
  return t;
}

void count_call(const Entry& e) {
  g_onednn_calls.fetch_add(1, std::memory_order_relaxed);
  if (e.winograd) g_winograd_calls.fetch_add(1, std::memory_order_relaxed);
}

// Runs a forward (a = x, out = y) or backward data (a = g, out = dx) entry on
// `a`, already in the layout the entry reads (e.a_md, or the user's).
void run_conv(const Entry& e, const ConvShape& s, bool fwd, dnnl::stream& stream, memory a,
              const ConvWeights& w, void* out) {
  ArgMap args;
  add_scratchpad(args, e.scratch_md, 0);
  const ConvWeights::Packed* packed = w.packed();
  if (packed != nullptr && packed->md == e.weights_md) {
    args.emplace(DNNL_ARG_WEIGHTS, mem(packed->md, packed->data.get()));
  } else {
    args.emplace(DNNL_ARG_WEIGHTS,
                 input_memory(stream, user_weights_md(s), w.user(), e.reorder_weights,
                              e.weights_reorder, e.weights_md, 1));
  }
  args.emplace(fwd ? DNNL_ARG_SRC : DNNL_ARG_DIFF_DST, a);
  memory user_out = mem(fwd ? dst_md(s) : src_md(s), out);
  memory o = e.reorder_out ? mem(e.out_md, scratch(e.out_md.get_size(), 3)) : user_out;
  args.emplace(fwd ? DNNL_ARG_DST : DNNL_ARG_DIFF_SRC, o);
  e.main.execute(stream, args);
  if (e.reorder_out) e.out_back.execute(stream, o, user_out);
  stream.wait();
  count_call(e);
}

// Forward (a = x, out = y) or backward data (a = g, out = dx) through oneDNN;
// false when oneDNN declines the case.
bool conv_onednn(Op op, const ConvShape& s, const void* a, const ConvWeights& w, void* out) {
  const OneOpenMPThread omp;
  std::shared_ptr<const Entry> e = conv_lookup(op, s);
  if (e == nullptr) return false;
  dnnl::stream stream(cpu_engine());
  const bool fwd = op == Op::conv_fwd;
  run_conv(*e, s, fwd, stream,
           input_memory(stream, fwd ? src_md(s) : dst_md(s), a, e->reorder_a, e->a_in, e->a_md,
                        2),
           w, out);
  return true;
}

bool pool_onednn(Op op, PoolKind kind, const ConvShape& s, const void* x, const void* g,
                 void* out) {
  const OneOpenMPThread omp;
  std::shared_ptr<const Entry> e = lookup(op, s, static_cast<int64_t>(kind));
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
  count_call(*e);
  return true;
}

// out[i] += in[i] for i < n.
template <class T>
void add_into(T* __restrict out, const T* __restrict in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += in[i];
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

void set_conv_winograd(bool on) { winograd_flag() = on; }

bool conv_winograd() { return winograd_flag(); }

bool uses_winograd(DType dt, const ConvShape& s) {
  return dt == DType::float32 && s.spatial == 2 && s.groups == 1 && s.kernel[0] == 3 &&
         s.kernel[1] == 3 && s.stride[0] == 1 && s.stride[1] == 1 && s.dilation[0] == 1 &&
         s.dilation[1] == 1 && s.channels_in % 16 == 0 && s.channels_out % 16 == 0 &&
         s.channels_in > 0 && s.channels_out > 0 && conv_winograd() && winograd_supported();
}

// The bytes of input or output per Winograd call: 0.8 of a core's L2, so that
// a chunk and its blocked copy stream through L2 without evicting each other.
// Measured best at 1.6 MB where L2 holds 2 MB (16 samples of 32 channels
// 28x28, 32 of 64 at 14x14, 64 of 128 at 7x7; twice that slower by up to
// half), and at 0.8 MB where it holds 1 MB (the ResNet step of
// bench/bench_resnet.py on 2 threads: 72.0 ms against 74.1 at 1.6 MB, 78.1 at
// 3.2 MB; 1 thread no slower). The size depends on the machine, never on the
// thread count.
double winograd_chunk_bytes() {
  static const double bytes = [] {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 <= 0) {
      // Where glibc does not know, the kernel's description of cpu0's caches.
      if (FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index2/size", "r")) {
        long kib = 0;
        if (std::fscanf(f, "%ldK", &kib) == 1 && kib > 0) l2 = kib * 1024;
        std::fclose(f);
      }
    }
    if (l2 <= 0) l2 = 1L << 20;
    return 0.8 * static_cast<double>(std::clamp(l2, 256L << 10, 8L << 20));
  }();
  return bytes;
}

int64_t preferred_chunk_samples(DType dt, const ConvShape& s) {
  if (!uses_winograd(dt, s)) return 0;
  const double per_sample = 4.0 * static_cast<double>(std::max(s.in_size(), s.out_size()));
  return std::max<int64_t>(1, std::llround(winograd_chunk_bytes() / per_sample));
}

ConvWeights::ConvWeights(DType dt, ConvPass pass, const ConvShape& chunk, const void* w)
    : user_(w) {
  if (dt != DType::float32 || chunk.batch == 0 || chunk.in_size() == 0 ||
      chunk.out_size() == 0 || chunk.weight_size() == 0) {
    return;
  }
  std::shared_ptr<const Entry> e =
      conv_lookup(pass == ConvPass::backward_data ? Op::conv_bwd_data : Op::conv_fwd, chunk);
  if (e == nullptr || !e->reorder_weights) return;
  const OneOpenMPThread omp;
  auto packed = std::make_shared<Packed>();
  packed->md = e->weights_md;
  packed->data = std::shared_ptr<void>(aligned_buffer(e->weights_md.get_size()));
  dnnl::stream stream(cpu_engine());
  memory from = mem(user_weights_md(chunk), w), to = mem(packed->md, packed->data.get());
  e->weights_reorder.execute(stream, from, to);
  stream.wait();
  packed_ = std::move(packed);
}

void conv_forward(DType dt, const ConvShape& s, const void* x, const ConvWeights& w, void* y) {
  if (s.batch == 0 || s.out_size() == 0) return;
  if (dt == DType::float32 && s.in_size() > 0 && conv_onednn(Op::conv_fwd, s, x, w, y)) return;
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    conv_forward_loops(as_3d(s), static_cast<const T*>(x), static_cast<const T*>(w.user()),
                       static_cast<T*>(y));
  });
}

void conv_backward_data(DType dt, const ConvShape& s, const void* g, const ConvWeights& w,
                        void* dx) {
  if (s.batch == 0 || s.in_size() == 0) return;
  if (dt == DType::float32 && s.out_size() > 0 &&
      conv_onednn(Op::conv_bwd_data, s, g, w, dx)) {
    return;
  }
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    conv_backward_data_loops(as_3d(s), static_cast<const T*>(g),
                             static_cast<const T*>(w.user()), static_cast<T*>(dx));
  });
}

// One chunk's weight gradient: in oneDNN's layout `md` (converted by
// to_user), or in the user's layout.
struct ConvWeightGradient::Partial {
  bool user_layout = true;
  memory::desc md;
  dnnl::reorder to_user;
  AlignedBuffer data;
  size_t bytes = 0;
};

ConvWeightGradient::ConvWeightGradient(DType dt, const ConvShape& s, int64_t chunks)
    : dt_(dt), shape_(s), partials_(static_cast<size_t>(std::max<int64_t>(chunks, 0))) {}

ConvWeightGradient::~ConvWeightGradient() = default;

void ConvWeightGradient::add_chunk(int64_t index, const ConvShape& part, const void* x,
                                   const void* g) {
  add_chunk_and_data(index, part, x, g, nullptr, nullptr);
}

void ConvWeightGradient::add_chunk_and_data(int64_t index, const ConvShape& part, const void* x,
                                            const void* g, const ConvWeights* w, void* dx) {
  const OneOpenMPThread omp;
  auto p = std::make_unique<Partial>();
  const bool sized =
      part.batch > 0 && part.in_size() > 0 && part.out_size() > 0 && part.weight_size() > 0;
  if (dt_ == DType::float32 && sized) {
    std::shared_ptr<const Entry> e = conv_lookup(Op::conv_bwd_weights, part);
    std::shared_ptr<const Entry> ed = w ? conv_lookup(Op::conv_bwd_data, part) : nullptr;
    if (e != nullptr && (w == nullptr || ed != nullptr)) {
      dnnl::stream stream(cpu_engine());
      // g in the layout each pass reads: reordered once when both want the
      // same one (Winograd's blocked layout), while it is in cache.
      memory g_weights;
      if (ed != nullptr) {
        memory g_data;
        if (ed->reorder_a && e->reorder_b && ed->a_md == e->b_md) {
          g_data = g_weights = input_memory(stream, dst_md(part), g, true, ed->a_in, ed->a_md, 4);
        } else {
          g_data = input_memory(stream, dst_md(part), g, ed->reorder_a, ed->a_in, ed->a_md, 4);
        }
        run_conv(*ed, part, false, stream, g_data, *w, dx);
      }
      if (!g_weights) {
        g_weights = input_memory(stream, dst_md(part), g, e->reorder_b, e->b_in, e->b_md, 3);
      }
      p->user_layout = !e->reorder_weights;
      p->md = e->weights_md;
      p->to_user = e->weights_reorder;
      p->bytes = e->weights_md.get_size();
      p->data = aligned_buffer(p->bytes);
      ArgMap args;
      add_scratchpad(args, e->scratch_md, 0);
      args.emplace(DNNL_ARG_SRC,
                   input_memory(stream, src_md(part), x, e->reorder_a, e->a_in, e->a_md, 2));
      args.emplace(DNNL_ARG_DIFF_DST, g_weights);
      args.emplace(DNNL_ARG_DIFF_WEIGHTS, mem(p->md, p->data.get()));
      e->main.execute(stream, args);
      stream.wait();
      count_call(*e);
      partials_[static_cast<size_t>(index)] = std::move(p);
      return;
    }
  }
  if (w != nullptr) conv_backward_data(dt_, part, g, *w, dx);
  p->bytes = static_cast<size_t>(part.weight_size()) * dtype_size(dt_);
  p->data = aligned_buffer(p->bytes);
  by_dtype(dt_, [&](auto t) {
    using T = typename decltype(t)::type;
    conv_backward_weights_loops(as_3d(part), static_cast<const T*>(x), static_cast<const T*>(g),
                                static_cast<T*>(p->data.get()));
  });
  partials_[static_cast<size_t>(index)] = std::move(p);
}

void ConvWeightGradient::finish(void* dw, const Ranges& ranges) {
  const OneOpenMPThread omp;
  const size_t bytes = static_cast<size_t>(shape_.weight_size()) * dtype_size(dt_);
  if (bytes == 0) return;
  if (partials_.empty()) {
    std::memset(dw, 0, bytes);
    return;
  }
  for (const auto& p : partials_) {
    if (p == nullptr) throw std::logic_error("[conv_grad_weight] a chunk was not computed");
  }
  const memory::desc user_md = user_weights_md(shape_);
  auto to_user = [&](const Partial& p, void* out) {
    dnnl::stream stream(cpu_engine());
    memory from = mem(p.md, p.data.get()), to = mem(user_md, out);
    p.to_user.execute(stream, from, to);
    stream.wait();
  };
  const Partial& first = *partials_[0];
  const bool uniform = std::all_of(partials_.begin(), partials_.end(), [&](const auto& p) {
    return p->user_layout == first.user_layout && (p->user_layout || p->md == first.md);
  });
  if (!uniform) {
    // Chunks of different sizes chose different layouts: add in the user's.
    for (auto& p : partials_) {
      if (p->user_layout) continue;
      AlignedBuffer user = aligned_buffer(bytes);
      to_user(*p, user.get());
      p->data = std::move(user);
      p->bytes = bytes;
      p->user_layout = true;
    }
  }
  by_dtype(dt_, [&](auto t) {
    using T = typename decltype(t)::type;
    T* sum = static_cast<T*>(first.data.get());
    const int64_t n = static_cast<int64_t>(first.bytes / sizeof(T));
    auto add_range = [&](int64_t begin, int64_t end) {
      for (size_t i = 1; i < partials_.size(); ++i) {
        add_into(sum + begin, static_cast<const T*>(partials_[i]->data.get()) + begin,
                 end - begin);
      }
    };
    if (ranges && partials_.size() > 1) {
      ranges(n, add_range);
    } else {
      add_range(0, n);
    }
  });
  if (first.user_layout) {
    std::memcpy(dw, first.data.get(), bytes);
  } else {
    to_user(first, dw);
  }
}

void pool_forward(DType dt, PoolKind kind, const ConvShape& s, const void* x, void* y) {
  if (s.batch == 0 || s.out_size() == 0) return;
  if (dt == DType::float32 && s.in_size() > 0 &&
      pool_onednn(Op::pool_fwd, kind, s, x, nullptr, y)) {
    return;
  }
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    pool_forward_loops(kind, as_3d(s), static_cast<const T*>(x), static_cast<T*>(y));
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
    pool_backward_loops(kind, as_3d(s), static_cast<const T*>(x), static_cast<const T*>(g),
                        static_cast<T*>(dx));
  });
}

void max_pool_select(DType dt, const ConvShape& s, const void* x, const void* c, void* y) {
  if (s.batch == 0 || s.out_size() == 0) return;
  by_dtype(dt, [&](auto t) {
    using T = typename decltype(t)::type;
    max_pool_select_loops(as_3d(s), static_cast<const T*>(x), static_cast<const T*>(c),
                          static_cast<T*>(y));
  });
}

uint64_t onednn_calls() { return g_onednn_calls.load(std::memory_order_relaxed); }

uint64_t winograd_calls() { return g_winograd_calls.load(std::memory_order_relaxed); }

}  // namespace tessera::kernels
