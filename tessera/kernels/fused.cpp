#include "tessera/kernels/fused.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/simd.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera::kernels {

bool fusable(BinaryOp op) {
  return with_float_binary(op, [](auto) {});
}

bool fusable(UnaryOp op) {
  return op == UnaryOp::negative || op == UnaryOp::positive || with_float_fn(op, [](auto) {});
}

FusedPlan::FusedPlan(std::vector<FusedStep> steps, std::vector<FusedLeaf> leaves, Array& out)
    : FusedPlan(std::move(steps), std::move(leaves), out.shape(), out.dtype(), &out) {}

FusedPlan::FusedPlan(std::vector<FusedStep> steps, std::vector<FusedLeaf> leaves,
                     const Shape& shape, DType dtype)
    : FusedPlan(std::move(steps), std::move(leaves), shape, dtype, nullptr) {}

FusedPlan::FusedPlan(std::vector<FusedStep> steps, std::vector<FusedLeaf> leaves,
                     const Shape& out_shape, DType dtype, Array* out)
    : steps_(std::move(steps)), n_in_(leaves.size()), dtype_(dtype), size_(shape_size(out_shape)) {
  if (dtype_ != DType::float32 && dtype_ != DType::float64) {
    throw std::logic_error("[fused] internal error: not a float dtype");
  }
  if (steps_.empty()) throw std::logic_error("[fused] internal error: no steps");
  const int nd = static_cast<int>(out_shape.size());
  // Slots 0 .. n_in-1 are the leaves, slot n_in the output (written
  // through its strides, like the leaves are read through theirs).
  const size_t slots = n_in_ + 1;
  origin_.assign(slots, nullptr);
  scalar_.assign(n_in_, 0.0);
  stride_row_ = static_cast<size_t>(nd);
  strides_.assign(slots * stride_row_, 0);
  // Each array's element strides along the output's dimensions (0 where it
  // is broadcast), from its own strides: views are read in place. One flat
  // table (slot k's row at k * nd): a call on small arrays allocates little.
  std::vector<int64_t> full(slots * stride_row_, 0);
  for (size_t k = 0; k < slots; ++k) {
    const Array* a = k < n_in_ ? leaves[k].array : out;
    if (!a) {
      // A scalar leaf, or no output array (run_values: the values' place is given).
      if (k < n_in_) scalar_[k] = leaves[k].scalar;
      continue;
    }
    if (a->dtype() != dtype_) throw std::logic_error("[fused] internal error: leaf dtype");
    origin_[k] = a->origin_raw();
    const int off = nd - a->ndim();
    if (off < 0) throw std::logic_error("[fused] internal error: leaf rank");
    int64_t* row = full.data() + k * stride_row_;
    if (a->is_contiguous()) {
      int64_t step = 1;
      for (int d = a->ndim() - 1; d >= 0; --d) {
        if (a->dim(d) != 1) row[d + off] = step;
        step *= a->dim(d);
      }
    } else {
      const std::vector<int64_t> st = a->strides();
      for (int d = 0; d < a->ndim(); ++d) {
        if (a->dim(d) != 1) row[d + off] = st[d];
      }
    }
    for (int d = 0; d < a->ndim(); ++d) {
      if (a->dim(d) != 1 && a->dim(d) != out_shape[d + off]) {
        throw std::logic_error("[fused] internal error: leaf shape");
      }
    }
  }
  // Extent-1 dimensions carry nothing; a dimension merges into the one
  // before it when every array steps through both as through one.
  for (int d = 0; d < nd; ++d) {
    const int64_t extent = out_shape[d];
    if (extent == 1) continue;
    bool merge = !dims_.empty();
    const size_t last = dims_.empty() ? 0 : dims_.size() - 1;
    for (size_t k = 0; k < slots && merge; ++k) {
      if (origin_[k]) merge = strides_[k * stride_row_ + last] == full[k * stride_row_ + d] * extent;
    }
    if (merge) {
      dims_.back() *= extent;
      for (size_t k = 0; k < slots; ++k) {
        if (origin_[k]) strides_[k * stride_row_ + last] = full[k * stride_row_ + d];
      }
    } else {
      dims_.push_back(extent);
      const size_t at = dims_.size() - 1;
      for (size_t k = 0; k < slots; ++k) {
        if (origin_[k]) strides_[k * stride_row_ + at] = full[k * stride_row_ + d];
      }
    }
  }
}

namespace {

// An operand over one chunk: `p` points at its values, or is null when the
// operand is the value `v` throughout the chunk.
template <class T>
struct Operand {
  const T* p = nullptr;
  T v = T(0);
};

template <class T, class F>
struct FusedBinaryLoop {
  [[gnu::always_inline]] static inline void run(const T* x, const T* y, T sx, T sy, T* dst,
                                                int64_t n, F f) {
    if (x && y) {
      for (int64_t i = 0; i < n; ++i) dst[i] = f(x[i], y[i]);
    } else if (x) {
      for (int64_t i = 0; i < n; ++i) dst[i] = f(x[i], sy);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = f(sx, y[i]);
    }
  }
};

template <class T, class F>
struct FusedUnaryLoop {
  [[gnu::always_inline]] static inline void run(const T* x, T* dst, int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i) dst[i] = f(x[i]);
  }
};

template <class T, class F>
Operand<T> apply_binary(const Operand<T>& x, const Operand<T>& y, T* dst, int64_t n, F f) {
  if (!x.p && !y.p) return Operand<T>{nullptr, f(x.v, y.v)};
  simd_call<FusedBinaryLoop<T, F>>(x.p, y.p, x.v, y.v, dst, n, f);
  return Operand<T>{dst, T(0)};
}

template <class T, class F>
Operand<T> apply_unary(const Operand<T>& x, T* dst, int64_t n, F f) {
  if (!x.p) return Operand<T>{nullptr, f(x.v)};
  simd_call<FusedUnaryLoop<T, F>>(x.p, dst, n, f);
  return Operand<T>{dst, T(0)};
}

template <class T>
Operand<T> apply_step(const FusedStep& st, const Operand<T>& x, const Operand<T>& y, T* dst,
                      int64_t n) {
  Operand<T> r;
  if (st.binary) {
    switch (st.pow) {
      case PowShortcut::square:
        return apply_unary(x, dst, n, [](T v) { return v * v; });
      case PowShortcut::cube:
        return apply_unary(x, dst, n, [](T v) { return v * v * v; });
      case PowShortcut::sqrt:
        return apply_unary(x, dst, n, [](T v) { return std::sqrt(v); });
      case PowShortcut::identity:
        return apply_unary(x, dst, n, [](T v) { return v; });
      case PowShortcut::reciprocal:
        return apply_unary(x, dst, n, [](T v) { return T(1) / v; });
      case PowShortcut::none:
        break;
    }
    with_float_binary(st.bop, [&](auto c) {
      r = apply_binary(x, y, dst, n,
                       [](T a, T b) { return float_binary<decltype(c)::value>(a, b); });
    });
    return r;
  }
  if (st.uop == UnaryOp::negative) return apply_unary(x, dst, n, [](T v) { return -v; });
  if (st.uop == UnaryOp::positive) return apply_unary(x, dst, n, [](T v) { return v; });
  if constexpr (std::is_same_v<T, float>) {
    if (VecFn f; vector_fn_of(st.uop, f)) {
      if (!x.p) {
        T v = x.v;
        vmath(f, &v, &v, 1);
        return Operand<T>{nullptr, v};
      }
      vmath(f, x.p, dst, n);
      return Operand<T>{dst, T(0)};
    }
  }
  with_float_fn(st.uop, [&](auto c) {
    r = apply_unary(x, dst, n, [](T v) { return float_fn<decltype(c)::value>(v); });
  });
  return r;
}

}  // namespace

template <class T>
void FusedPlan::run_typed(int64_t begin, int64_t end, T* values) const {
  if (begin >= end) return;
  // Elements per chunk: the scratch of a dozen steps stays within L2.
  constexpr int64_t kChunk = 512;
  // Scratch buffers a multiple of 4 KiB apart would make every load of one
  // step alias the store of the next in the CPU's store-to-load check (4K
  // aliasing: a 9-slice stencil ran 2x slower); a 3-cache-line pad staggers them.
  // A range smaller than a chunk is one chunk of its own size.
  const int64_t chunk = std::min(kChunk, end - begin);
  const int64_t pitch = chunk + 192 / static_cast<int64_t>(sizeof(T));
  const size_t nl = n_in_, ns = steps_.size(), slots = nl + 1;
  const int nd = static_cast<int>(dims_.size());
  // The scratch and the bookkeeping are the thread's, kept between calls
  // (a fused expression on small arrays paid a malloc of the scratch, 20 KB
  // for three leaves, and four vectors per call). A range never runs inside
  // another on one thread: the steps only compute. The scratch is not
  // zeroed: every element is written before it is read.
  struct Buffers {
    std::vector<T> scratch;
    std::vector<Operand<T>> ops;
    std::vector<int64_t> idx, off, inner;
  };
  static thread_local Buffers bufs;
  const size_t scratch_size = (nl + ns) * static_cast<size_t>(pitch);
  if (bufs.scratch.size() < scratch_size) bufs.scratch.resize(scratch_size);
  T* const scratch_data = bufs.scratch.data();
  std::vector<Operand<T>>& ops = bufs.ops;
  ops.assign(nl + ns, Operand<T>{});
  std::vector<int64_t>&idx = bufs.idx, &off = bufs.off, &inner = bufs.inner;
  idx.assign(static_cast<size_t>(nd), 0);
  off.assign(slots, 0);
  inner.assign(slots, 0);
  for (size_t k = 0; k < nl; ++k) {
    if (!origin_[k]) ops[k] = Operand<T>{nullptr, static_cast<T>(scalar_[k])};
  }
  T* const out = static_cast<T*>(origin_[nl]);
  // Elements of [begin, end) done before the current run (where run_values
  // puts the run's values).
  int64_t done = 0;
  // The run of output elements [pos, pos + len) along the last merged
  // dimension: slot k's elements at off[k] + i * inner[k].
  auto run_chunks = [&](int64_t len) {
    for (int64_t c0 = 0; c0 < len; c0 += chunk) {
      const int64_t n = std::min(chunk, len - c0);
      for (size_t k = 0; k < nl; ++k) {
        if (!origin_[k]) continue;
        const T* base = static_cast<const T*>(origin_[k]) + off[k] + c0 * inner[k];
        if (inner[k] == 0) {
          ops[k] = Operand<T>{nullptr, *base};
        } else if (inner[k] == 1) {
          ops[k] = Operand<T>{base, T(0)};
        } else {
          T* buf = scratch_data + k * pitch;
          const int64_t s = inner[k];
          for (int64_t i = 0; i < n; ++i) buf[i] = base[i * s];
          ops[k] = Operand<T>{buf, T(0)};
        }
      }
      T* const dst_out = values ? values + done + c0 : out + off[nl] + c0 * inner[nl];
      const bool direct = values || inner[nl] == 1;
      for (size_t s = 0; s < ns; ++s) {
        const FusedStep& st = steps_[s];
        const bool last = s + 1 == ns;
        T* dst = last && direct ? dst_out : scratch_data + (nl + s) * pitch;
        Operand<T> r = apply_step<T>(st, ops[st.a], st.binary ? ops[st.b] : ops[st.a], dst, n);
        ops[nl + s] = r;
        if (!last) continue;
        if (direct) {
          if (!r.p) std::fill(dst, dst + n, r.v);
        } else {
          // A strided destination (x[1:-1, 1:-1] += ...): scattered from the chunk.
          const int64_t so = inner[nl];
          for (int64_t i = 0; i < n; ++i) dst_out[i * so] = r.p ? r.p[i] : r.v;
        }
      }
    }
    done += len;
  };
  if (nd == 0) {
    run_chunks(end - begin);
    return;
  }
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % dims_[d];
    rem /= dims_[d];
    for (size_t k = 0; k < slots; ++k) {
      if (origin_[k]) off[k] += idx[d] * strides_[k * stride_row_ + d];
    }
  }
  for (size_t k = 0; k < slots; ++k) {
    if (origin_[k]) inner[k] = strides_[k * stride_row_ + nd - 1];
  }
  const int64_t last_extent = dims_[nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    const int64_t len = std::min(last_extent - idx[nd - 1], end - pos);
    run_chunks(len);
    pos += len;
    idx[nd - 1] += len;
    for (size_t k = 0; k < slots; ++k) off[k] += len * inner[k];
    for (int d = nd - 1; d > 0 && idx[d] == dims_[d]; --d) {
      for (size_t k = 0; k < slots; ++k) {
        if (origin_[k]) off[k] += strides_[k * stride_row_ + d - 1] - idx[d] * strides_[k * stride_row_ + d];
      }
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

void FusedPlan::run(int64_t begin, int64_t end) const {
  if (!origin_[n_in_]) throw std::logic_error("[fused] internal error: a plan of values only");
  if (dtype_ == DType::float64) {
    run_typed<double>(begin, end, nullptr);
  } else {
    run_typed<float>(begin, end, nullptr);
  }
}

void FusedPlan::run_values(int64_t begin, int64_t end, void* dst) const {
  if (dtype_ == DType::float64) {
    run_typed<double>(begin, end, static_cast<double*>(dst));
  } else {
    run_typed<float>(begin, end, static_cast<float*>(dst));
  }
}

namespace {

// x op y into a 1-D `out` when each operand is 1-D or one element and the
// range is too small to split over workers (a loop's `s * Q[:, i]` or
// `v -= t` on 1,000 elements): the steps FusedPlan::run takes for one
// binary step (a strided operand gathered 512 elements at a time, the same
// per-element loop, a strided result scattered), without the plan's tables,
// its thread's buffers and parallel_for's std::function, which cost more
// than the arithmetic at this size. The same loops, so the same bits.
template <class T>
bool strided_binary_1d(BinaryOp op, const Array& x, const Array& y, Array& out) {
  const int64_t n = out.size();
  if (out.ndim() != 1 || tile_count(n, cost_ns(op)) > 1) return false;
  auto stride_of = [n](const Array& a, int64_t& s) {
    if (a.size() == 1) {
      s = 0;
      return true;
    }
    if (a.ndim() != 1 || a.dim(0) != n) return false;
    s = a.is_contiguous() ? 1 : a.strides()[0];
    return true;
  };
  int64_t sx, sy;
  if (!stride_of(x, sx) || !stride_of(y, sy)) return false;
  const int64_t so = out.is_contiguous() ? 1 : out.strides()[0];
  const T* const px = x.origin<T>();
  const T* const py = y.origin<T>();
  T* const po = out.origin<T>();
  constexpr int64_t kChunk = 512;
  alignas(64) T bx[kChunk], by[kChunk], bo[kChunk];
  with_float_binary(op, [&](auto c) {
    auto f = [](T a, T b) { return float_binary<decltype(c)::value>(a, b); };
    for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
      const int64_t m = std::min(kChunk, n - c0);
      auto operand = [&](const T* p, int64_t s, T* buf) {
        if (s == 0) return Operand<T>{nullptr, *p};
        if (s == 1) return Operand<T>{p + c0, T(0)};
        for (int64_t i = 0; i < m; ++i) buf[i] = p[(c0 + i) * s];
        return Operand<T>{buf, T(0)};
      };
      const Operand<T> a = operand(px, sx, bx), b = operand(py, sy, by);
      T* dst = so == 1 ? po + c0 : bo;
      const Operand<T> r = apply_binary(a, b, dst, m, f);
      if (so == 1) {
        if (!r.p) std::fill(dst, dst + m, r.v);
      } else {
        for (int64_t i = 0; i < m; ++i) po[(c0 + i) * so] = r.p ? r.p[i] : r.v;
      }
    }
  });
  return true;
}

// x = x OUTER (a INNER b) for a 1-D float x too small to split over workers
// (Gram-Schmidt's v -= dot(q, a) * q on 1,000 elements): per chunk of 512,
// a INNER b into a buffer (strided operands gathered), then x OUTER it
// written back into x, by the loops strided_binary_1d runs for each of the
// two operations, so the same bits as the two in turn, without the
// temporary array between them. An operand that is x itself is read at the
// element being written; any other overlap with x, a shape that is not
// x's, or a large x: false, nothing done.
template <class T>
bool update_1d(BinaryOp outer, BinaryOp inner, Array& x, const FusedLeaf& la,
               const FusedLeaf& lb) {
  const int64_t n = x.size();
  if (x.ndim() != 1 || tile_count(n, cost_ns(outer) + cost_ns(inner)) > 1) return false;
  struct Source {
    const T* p = nullptr;  // null: the value v throughout
    int64_t s = 0;
    T v = T(0);
  };
  auto source_of = [&](const FusedLeaf& l, Source& src) {
    if (!l.array) {
      src.v = static_cast<T>(l.scalar);
      return true;
    }
    const Array& a = *l.array;
    if (a.dtype() != x.dtype() || a.ndim() > 1) return false;
    if (a.size() == 1) {  // read once, before any write (as NumPy's temporary holds it)
      src.v = *a.origin<T>();
      return true;
    }
    if (a.dim(0) != n) return false;
    if (a.may_overlap(x) && !(a.offset() == x.offset() && a.strides() == x.strides())) {
      return false;
    }
    src.p = a.origin<T>();
    src.s = a.is_contiguous() ? 1 : a.strides()[0];
    return true;
  };
  Source sa, sb;
  if (!source_of(la, sa) || !source_of(lb, sb) || (!sa.p && !sb.p)) return false;
  const int64_t sx = x.is_contiguous() ? 1 : x.strides()[0];
  T* const px = x.origin<T>();
  constexpr int64_t kChunk = 512;
  alignas(64) T ba[kChunk], bb[kChunk], bt[kChunk], bx[kChunk];
  bool done = with_float_binary(inner, [&](auto ci) {
    auto fi = [](T u, T w) { return float_binary<decltype(ci)::value>(u, w); };
    with_float_binary(outer, [&](auto co) {
      auto fo = [](T u, T w) { return float_binary<decltype(co)::value>(u, w); };
      for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
        const int64_t m = std::min(kChunk, n - c0);
        auto operand = [&](const Source& src, T* buf) {
          if (!src.p) return Operand<T>{nullptr, src.v};
          if (src.s == 1) return Operand<T>{src.p + c0, T(0)};
          for (int64_t i = 0; i < m; ++i) buf[i] = src.p[(c0 + i) * src.s];
          return Operand<T>{buf, T(0)};
        };
        const Operand<T> t = apply_binary(operand(sa, ba), operand(sb, bb), bt, m, fi);
        const Operand<T> xo = operand(Source{px, sx, T(0)}, bx);
        T* dst = sx == 1 ? px + c0 : bx;
        apply_binary(xo, t, dst, m, fo);
        if (sx != 1) {
          for (int64_t i = 0; i < m; ++i) px[(c0 + i) * sx] = bx[i];
        }
      }
    });
  });
  return done;
}

}  // namespace

bool strided_binary(BinaryOp op, const Array& x, const Array& y, Array& out) {
  const DType dt = out.dtype();
  if (!fusable(op) || x.dtype() != dt || y.dtype() != dt ||
      (dt != DType::float32 && dt != DType::float64)) {
    return false;
  }
  // x ** scalar takes FusedPlan's shortcuts (x * x for x ** 2, ...).
  if (op != BinaryOp::power &&
      (dt == DType::float64 ? strided_binary_1d<double>(op, x, y, out)
                            : strided_binary_1d<float>(op, x, y, out))) {
    return true;
  }
  FusedStep st;
  st.bop = op;
  st.a = 0;
  st.b = 1;
  if (op == BinaryOp::power && y.size() == 1) {
    st.pow =
        dt == DType::float32 ? pow_shortcut(*y.origin<float>()) : pow_shortcut(*y.origin<double>());
  }
  FusedPlan plan({st}, {FusedLeaf{&x}, FusedLeaf{&y}}, out);
  parallel_for(plan.size(), cost_ns(op), [&](int64_t b, int64_t e) { plan.run(b, e); });
  return true;
}

bool strided_unary(UnaryOp op, const Array& x, Array& out) {
  const DType dt = out.dtype();
  if (!fusable(op) || x.dtype() != dt || (dt != DType::float32 && dt != DType::float64)) {
    return false;
  }
  FusedStep st;
  st.binary = false;
  st.uop = op;
  FusedPlan plan({st}, {FusedLeaf{&x}}, out);
  parallel_for(plan.size(), cost_ns(op), [&](int64_t b, int64_t e) { plan.run(b, e); });
  return true;
}

}  // namespace tessera::kernels

namespace tessera::kernels {

bool update_in_place_1d(BinaryOp outer, BinaryOp inner, Array& x, const FusedLeaf& a,
                        const FusedLeaf& b) {
  // No power: FusedPlan's shortcuts for it (x ** 2 as x * x) are not here.
  if (!fusable(outer) || !fusable(inner) || outer == BinaryOp::power ||
      inner == BinaryOp::power || !x.writable()) {
    return false;
  }
  if (x.dtype() == DType::float64) return update_1d<double>(outer, inner, x, a, b);
  if (x.dtype() == DType::float32) return update_1d<float>(outer, inner, x, a, b);
  return false;
}

}  // namespace tessera::kernels
