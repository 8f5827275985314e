#include "tessera/kernels/shape.hpp"

#include <algorithm>
#include <cstring>

#include "tessera/kernels/indexing.hpp"

namespace tessera::kernels {

namespace {

// Side length of the square blocks of a transposing copy: 32 x 32 elements of
// 8 bytes is 8 KiB per side, comfortably inside L1.
constexpr int64_t kBlock = 32;

// Merges dimensions that are contiguous with their successor in both
// layouts and drops extents of 1, so most copies become one long inner loop.
void coalesce(const StridedLayout& s, const StridedLayout& d, Shape& shape,
              std::vector<int64_t>& ss, std::vector<int64_t>& ds) {
  shape.clear();
  ss.clear();
  ds.clear();
  for (size_t k = 0; k < s.shape.size(); ++k) {
    if (s.shape[k] == 1) continue;
    if (!shape.empty() && ss.back() == s.strides[k] * s.shape[k] &&
        ds.back() == d.strides[k] * s.shape[k]) {
      shape.back() *= s.shape[k];
      ss.back() = s.strides[k];
      ds.back() = d.strides[k];
      continue;
    }
    shape.push_back(s.shape[k]);
    ss.push_back(s.strides[k]);
    ds.push_back(d.strides[k]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    ss.push_back(0);
    ds.push_back(0);
  }
}

template <class U>
void copy_generic(const U* src, int64_t so, const std::vector<int64_t>& ss, U* dst, int64_t dof,
                  const std::vector<int64_t>& ds, const Shape& shape, int64_t begin,
                  int64_t end) {
  const int nd = static_cast<int>(shape.size());
  std::vector<int64_t> idx(nd, 0);
  int64_t rem = begin;
  for (int k = nd - 1; k >= 0; --k) {
    idx[k] = rem % shape[k];
    rem /= shape[k];
    so += idx[k] * ss[k];
    dof += idx[k] * ds[k];
  }
  const int64_t n_last = shape[nd - 1], s_last = ss[nd - 1], d_last = ds[nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t run = std::min(end - pos, n_last - idx[nd - 1]);
    if (s_last == 1 && d_last == 1) {
      std::memcpy(dst + dof, src + so, static_cast<size_t>(run) * sizeof(U));
    } else {
      const U* sp = src + so;
      U* dp = dst + dof;
      for (int64_t i = 0; i < run; ++i) dp[i * d_last] = sp[i * s_last];
    }
    pos += run;
    so += run * s_last;
    dof += run * d_last;
    idx[nd - 1] += run;
    // Carry into outer dimensions, undoing the finished inner extents.
    for (int k = nd - 1; k > 0 && idx[k] == shape[k]; --k) {
      so -= shape[k] * ss[k];
      dof -= shape[k] * ds[k];
      idx[k] = 0;
      ++idx[k - 1];
      so += ss[k - 1];
      dof += ds[k - 1];
    }
  }
}

// Full rows [r0, r1) of a 2-d copy whose source walks across its inner
// stride: square blocks keep both the reads and the writes cache-resident.
template <class U>
void copy_blocked(const U* src, int64_t so, const std::vector<int64_t>& ss, U* dst, int64_t dof,
                  const std::vector<int64_t>& ds, const Shape& shape, int64_t r0, int64_t r1) {
  const int64_t cols = shape[1];
  for (int64_t rb = r0; rb < r1; rb += kBlock) {
    int64_t re = std::min(rb + kBlock, r1);
    for (int64_t cb = 0; cb < cols; cb += kBlock) {
      int64_t ce = std::min(cb + kBlock, cols);
      for (int64_t r = rb; r < re; ++r) {
        const U* sp = src + so + r * ss[0];
        U* dp = dst + dof + r * ds[0];
        for (int64_t c = cb; c < ce; ++c) dp[c * ds[1]] = sp[c * ss[1]];
      }
    }
  }
}

template <class U>
void copy_typed(const void* src_v, const StridedLayout& sl, void* dst_v, const StridedLayout& dl,
                int64_t begin, int64_t end) {
  const U* src = static_cast<const U*>(src_v);
  U* dst = static_cast<U*>(dst_v);
  Shape shape;
  std::vector<int64_t> ss, ds;
  coalesce(sl, dl, shape, ss, ds);
  if (shape.size() == 2 && ss[1] != 1 && shape[0] > 1 && shape[1] >= kBlock) {
    const int64_t cols = shape[1];
    int64_t rb = (begin + cols - 1) / cols, re = end / cols;
    if (rb < re) {
      copy_generic(src, sl.offset, ss, dst, dl.offset, ds, shape, begin, rb * cols);
      copy_blocked(src, sl.offset, ss, dst, dl.offset, ds, shape, rb, re);
      copy_generic(src, sl.offset, ss, dst, dl.offset, ds, shape, re * cols, end);
      return;
    }
  }
  copy_generic(src, sl.offset, ss, dst, dl.offset, ds, shape, begin, end);
}

// Rough cost of moving one element through a strided copy.
constexpr double kCopyNs = 0.5;

}  // namespace

StridedLayout contiguous_layout(const Shape& shape) {
  return StridedLayout{shape, contiguous_strides(shape), 0};
}

void serial_for(int64_t n, double, const std::function<void(int64_t, int64_t)>& body) {
  if (n > 0) body(0, n);
}

void strided_copy_range(const void* src, const StridedLayout& src_layout, void* dst,
                        const StridedLayout& dst_layout, size_t elem_size, int64_t begin,
                        int64_t end) {
  if (begin >= end) return;
  switch (elem_size) {
    case 1: copy_typed<uint8_t>(src, src_layout, dst, dst_layout, begin, end); break;
    case 2: copy_typed<uint16_t>(src, src_layout, dst, dst_layout, begin, end); break;
    case 4: copy_typed<uint32_t>(src, src_layout, dst, dst_layout, begin, end); break;
    case 8: copy_typed<uint64_t>(src, src_layout, dst, dst_layout, begin, end); break;
    default: copy_typed<Bytes16>(src, src_layout, dst, dst_layout, begin, end); break;
  }
}

Array gather_view(const Array& src, const StridedLayout& layout, ForRange run) {
  Array out(src.dtype(), layout.shape);
  StridedLayout dl = contiguous_layout(layout.shape);
  const size_t es = dtype_size(src.dtype());
  const void* sp = src.origin_raw();
  void* dp = out.raw();
  run(out.size(), kCopyNs, [&](int64_t b, int64_t e) {
    strided_copy_range(sp, layout, dp, dl, es, b, e);
  });
  return out;
}

void scatter_view(const Array& src, const StridedLayout& src_layout, Array& dst,
                  const StridedLayout& dst_layout, ForRange run) {
  const size_t es = dtype_size(dst.dtype());
  const void* sp = src.origin_raw();
  void* dp = dst.origin_raw();
  int64_t n = 1;
  for (int64_t d : dst_layout.shape) n *= d;
  run(n, kCopyNs, [&](int64_t b, int64_t e) {
    strided_copy_range(sp, src_layout, dp, dst_layout, es, b, e);
  });
}

StridedLayout broadcast_layout(const Array& a, const Shape& shape) {
  StridedLayout l{shape, std::vector<int64_t>(shape.size(), 0), 0};
  std::vector<int64_t> st = contiguous_strides(a.shape());
  const int off = static_cast<int>(shape.size()) - a.ndim();
  for (int k = 0; k < a.ndim(); ++k) {
    l.strides[off + k] = a.dim(k) == 1 ? 0 : st[k];
  }
  return l;
}

bool broadcast_shape_pair(const Shape& a, const Shape& b, Shape& out) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    r[i] = da == 1 ? db : da;
  }
  out = std::move(r);
  return true;
}

Array transpose_array(const Array& a, const std::vector<int>& perm, ForRange run) {
  std::vector<int64_t> st = contiguous_strides(a.shape());
  StridedLayout l;
  for (int p : perm) {
    l.shape.push_back(a.dim(p));
    l.strides.push_back(st[p]);
  }
  return gather_view(a, l, run);
}

Array concatenate_arrays(const std::vector<Array>& parts, int axis, DType dt, ForRange run) {
  Shape shape = parts.at(0).shape();
  shape[axis] = 0;
  for (const Array& p : parts) shape[axis] += p.dim(axis);
  Array out(dt, shape);
  StridedLayout dl = contiguous_layout(shape);
  int64_t along = 0;
  for (const Array& p0 : parts) {
    Array p = p0.astype(dt);
    StridedLayout pl = contiguous_layout(p.shape());
    StridedLayout part_dl{p.shape(), dl.strides, along * dl.strides[axis]};
    scatter_view(p, pl, out, part_dl, run);
    along += p.dim(axis);
  }
  return out;
}

Array pad_array(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& widths,
                PadMode mode, double constant, ForRange run) {
  Shape shape = a.shape();
  for (int k = 0; k < a.ndim(); ++k) shape[k] += widths[k].first + widths[k].second;
  if (mode == PadMode::constant) {
    Array out = Array::full(a.dtype(), shape, constant);
    StridedLayout dl = contiguous_layout(shape);
    for (int k = 0; k < a.ndim(); ++k) dl.offset += widths[k].first * dl.strides[k];
    dl.shape = a.shape();
    scatter_view(a, contiguous_layout(a.shape()), out, dl, run);
    return out;
  }
  // Edge and reflect: output index i along axis k reads source index map(i).
  std::vector<int64_t> st = contiguous_strides(a.shape());
  OffsetLayout l;
  for (int k = 0; k < a.ndim(); ++k) {
    const int64_t n = a.dim(k), before = widths[k].first;
    std::vector<int64_t> t(shape[k]);
    for (int64_t i = 0; i < shape[k]; ++i) {
      int64_t j = i - before;
      if (mode == PadMode::edge || n == 1) {
        j = std::clamp<int64_t>(j, 0, n - 1);
      } else {
        const int64_t period = 2 * (n - 1);
        j %= period;
        if (j < 0) j += period;
        if (j >= n) j = period - j;
      }
      t[i] = j * st[k];
    }
    l.tables.push_back(std::move(t));
  }
  return gather_offsets(a, l, shape, run);
}

}  // namespace tessera::kernels
