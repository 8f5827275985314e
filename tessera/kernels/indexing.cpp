#include "tessera/kernels/indexing.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace tessera::kernels {

namespace {

constexpr double kGatherNs = 1.0;

// Walks the selection in C order from `begin`, calling f(i, offset, n) for
// each run of n elements i.. whose offsets are offset.. (consecutive): n > 1
// only when the last table steps by one element (a row of an embedding, a
// contiguous slice), so such runs copy as blocks instead of one element at a
// time through the table.
template <class F>
void walk_runs(const OffsetLayout& l, int64_t begin, int64_t end, F&& f) {
  // An empty range may have an empty table (x[[]]), which has no first entry.
  if (begin >= end) return;
  const int nd = static_cast<int>(l.tables.size());
  if (nd == 0) {
    if (begin < end) f(begin, l.base, int64_t{1});
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  int64_t rem = begin;
  for (int k = nd - 1; k >= 0; --k) {
    int64_t n = static_cast<int64_t>(l.tables[k].size());
    idx[k] = rem % n;
    rem /= n;
  }
  int64_t outer = l.base;
  for (int k = 0; k < nd - 1; ++k) outer += l.tables[k][idx[k]];
  const std::vector<int64_t>& last = l.tables[nd - 1];
  const int64_t n_last = static_cast<int64_t>(last.size());
  bool unit = true;
  for (int64_t j = 1; j < n_last && unit; ++j) unit = last[j] == last[0] + j;
  int64_t i = begin;
  while (i < end) {
    int64_t stop = std::min(end - i, n_last - idx[nd - 1]) + idx[nd - 1];
    if (unit) {
      const int64_t j0 = idx[nd - 1];
      f(i, outer + last[j0], stop - j0);
      i += stop - j0;
    } else {
      for (int64_t j = idx[nd - 1]; j < stop; ++j) f(i++, outer + last[j], int64_t{1});
    }
    idx[nd - 1] = 0;
    for (int k = nd - 2; k >= 0; --k) {
      outer -= l.tables[k][idx[k]];
      if (++idx[k] < static_cast<int64_t>(l.tables[k].size())) {
        outer += l.tables[k][idx[k]];
        break;
      }
      idx[k] = 0;
      outer += l.tables[k][0];
    }
  }
}

template <class U>
void gather_typed(const void* src, const OffsetLayout& l, void* dst, int64_t begin, int64_t end) {
  const U* s = static_cast<const U*>(src);
  U* d = static_cast<U*>(dst);
  walk_runs(l, begin, end, [&](int64_t i, int64_t off, int64_t n) {
    if (n == 1) {
      d[i] = s[off];
    } else {
      std::memcpy(d + i, s + off, sizeof(U) * static_cast<size_t>(n));
    }
  });
}

template <class U>
void scatter_typed(const void* src, void* dst, const OffsetLayout& l, int64_t begin, int64_t end) {
  const U* s = static_cast<const U*>(src);
  U* d = static_cast<U*>(dst);
  // element by element, in order, as the selection is walked (src may be a
  // view of dst's buffer)
  walk_runs(l, begin, end, [&](int64_t i, int64_t off, int64_t n) {
    for (int64_t k = 0; k < n; ++k) d[off + k] = s[i + k];
  });
}

}  // namespace

int64_t OffsetLayout::count() const {
  int64_t n = 1;
  for (const auto& t : tables) n *= static_cast<int64_t>(t.size());
  return n;
}

OffsetLayout offsets_of(const StridedLayout& layout) {
  OffsetLayout l;
  l.base = layout.offset;
  for (size_t k = 0; k < layout.shape.size(); ++k) {
    std::vector<int64_t> t(layout.shape[k]);
    for (int64_t i = 0; i < layout.shape[k]; ++i) t[i] = i * layout.strides[k];
    l.tables.push_back(std::move(t));
  }
  return l;
}

void gather_offsets_range(const void* src, const OffsetLayout& layout, void* dst, size_t elem_size,
                          int64_t begin, int64_t end) {
  if (begin >= end) return;
  switch (elem_size) {
    case 1:
      gather_typed<uint8_t>(src, layout, dst, begin, end);
      break;
    case 2:
      gather_typed<uint16_t>(src, layout, dst, begin, end);
      break;
    case 4:
      gather_typed<uint32_t>(src, layout, dst, begin, end);
      break;
    case 8:
      gather_typed<uint64_t>(src, layout, dst, begin, end);
      break;
    default:
      gather_typed<Bytes16>(src, layout, dst, begin, end);
      break;  // complex128
  }
}

void scatter_offsets_range(const void* src, void* dst, const OffsetLayout& layout, size_t elem_size,
                           int64_t begin, int64_t end) {
  if (begin >= end) return;
  switch (elem_size) {
    case 1:
      scatter_typed<uint8_t>(src, dst, layout, begin, end);
      break;
    case 2:
      scatter_typed<uint16_t>(src, dst, layout, begin, end);
      break;
    case 4:
      scatter_typed<uint32_t>(src, dst, layout, begin, end);
      break;
    case 8:
      scatter_typed<uint64_t>(src, dst, layout, begin, end);
      break;
    default:
      scatter_typed<Bytes16>(src, dst, layout, begin, end);
      break;  // complex128
  }
}

Array gather_offsets(const Array& src, const OffsetLayout& layout, Shape shape, ForRange run) {
  Array out(src.dtype(), std::move(shape));
  const size_t es = dtype_size(src.dtype());
  const void* sp = src.origin_raw();
  void* dp = out.raw();
  run(out.size(), kGatherNs,
      [&](int64_t b, int64_t e) { gather_offsets_range(sp, layout, dp, es, b, e); });
  return out;
}

void scatter_offsets(const Array& src, Array& dst, const OffsetLayout& layout) {
  scatter_offsets_range(src.raw(), dst.origin_raw(), layout, dtype_size(dst.dtype()), 0,
                        layout.count());
}

void scatter_add_offsets(const Array& src, Array& dst, const OffsetLayout& layout) {
  dispatch(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = src.data<T>();
    T* d = dst.origin<T>();
    walk_runs(layout, 0, layout.count(), [&](int64_t i, int64_t off, int64_t n) {
      T* dr = d + off;
      const T* sr = s + i;
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (std::is_same_v<T, bool>) {
          dr[k] = dr[k] || sr[k];
        } else {
          dr[k] = dr[k] + sr[k];
        }
      }
    });
  });
}

const int64_t* block_indices_in_place(const Array& indices, int64_t n) {
  if (indices.dtype() != DType::int64 || !indices.is_contiguous()) return nullptr;
  const int64_t* p = indices.data<int64_t>();
  int64_t lo = 0, hi = 0;
  for (int64_t j = 0; j < indices.size(); ++j) {  // (branch-free: vectorises)
    lo = std::min(lo, p[j]);
    hi = std::max(hi, p[j]);
  }
  return lo >= 0 && hi < n ? p : nullptr;
}

bool block_indices(const Array& indices, int64_t n, std::vector<int64_t>& out) {
  const DType dt = indices.dtype();
  if (dt == DType::uint64 || !is_integer(dt)) return false;
  const Array idx = indices.contiguous().astype(DType::int64);
  const int64_t* given = idx.data<int64_t>();
  out.resize(static_cast<size_t>(idx.size()));
  for (size_t j = 0; j < out.size(); ++j) {
    if (given[j] < -n || given[j] >= n) return false;
    out[j] = given[j] < 0 ? given[j] + n : given[j];
  }
  return true;
}

void take_blocks(const Array& x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                 int64_t count, Array& out, ForRange run) {
  const size_t bytes = static_cast<size_t>(inner) * dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
  if (count == 0) return;
  // Block b of the output is index j = b % count of outer row o = b / count,
  // stepped without a division per block; blocks of a few words (a lookup
  // table's rows) copied by fixed-size moves instead of a memcpy call each.
  auto blocks = [&](int64_t begin, int64_t end, auto size) {
    const size_t sz = decltype(size)::value == 0 ? bytes : decltype(size)::value;
    int64_t o = begin / count, j = begin % count;
    for (int64_t b = begin; b < end; ++b) {
      std::memcpy(dst + static_cast<size_t>(b) * sz, src + static_cast<size_t>(o * n + idx[j]) * sz,
                  sz);
      if (++j == count) {
        j = 0;
        ++o;
      }
    }
  };
  run(outer * count, kGatherNs * static_cast<double>(inner), [&](int64_t begin, int64_t end) {
    switch (bytes) {
      case 4: blocks(begin, end, std::integral_constant<size_t, 4>{}); break;
      case 8: blocks(begin, end, std::integral_constant<size_t, 8>{}); break;
      case 16: blocks(begin, end, std::integral_constant<size_t, 16>{}); break;
      case 32: blocks(begin, end, std::integral_constant<size_t, 32>{}); break;
      default: blocks(begin, end, std::integral_constant<size_t, 0>{}); break;
    }
  });
}

void add_blocks(const Array& src, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                int64_t count, Array& dst, bool zero_first, ForRange run) {
  // dst's blocks [b, e) of the (outer * n) in C order: zeroed if asked, then
  // each src block whose destination falls in the range added in index order.
  auto add = [&](auto* d, const auto* s, int64_t b, int64_t e) {
    using T = std::remove_pointer_t<decltype(d)>;
    if (zero_first) std::fill(d + b * inner, d + e * inner, T(0));
    for (int64_t o = b / n; o <= (e - 1) / n && o < outer; ++o) {
      const int64_t lo = std::max(b - o * n, int64_t{0}), hi = std::min(e - o * n, n);
      const auto* so = s + o * count * inner;
      for (int64_t j = 0; j < count; ++j) {
        if (idx[j] < lo || idx[j] >= hi) continue;
        const auto* sj = so + j * inner;
        auto* row = d + (o * n + idx[j]) * inner;
        for (int64_t c = 0; c < inner; ++c) row[c] += sj[c];
      }
    }
  };
  const int64_t blocks = outer * n;
  if (blocks == 0) return;
  // Per block: its zero fill and a scan of the indices (cheap against the
  // block's `inner` elements only when blocks are few per index).
  const double ns = 0.05 * static_cast<double>(inner) +
                    0.5 * static_cast<double>(count) / static_cast<double>(n);
  run(blocks, ns, [&](int64_t b, int64_t e) {
    if (dst.dtype() == DType::float64) {
      add(dst.data<double>(), src.data<double>(), b, e);
    } else {
      add(dst.data<float>(), src.data<float>(), b, e);
    }
  });
}

Array take_along_axis_array(const Array& x, const Array& idx, int axis, const Shape& out_shape,
                            ForRange run) {
  Array out(x.dtype(), out_shape);
  StridedLayout xl = broadcast_layout(x, out_shape);
  StridedLayout il = broadcast_layout(idx, out_shape);
  // The index array is read along `axis` too; x's own stride there is the
  // step between selected elements, never a broadcast one.
  xl.strides[axis] = contiguous_strides(x.shape())[axis];
  const size_t es = dtype_size(x.dtype());
  const int nd = static_cast<int>(out_shape.size());
  const int64_t* ip = idx.data<int64_t>();
  run(out.size(), kGatherNs, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> pos(nd);
    for (int64_t i = begin; i < end; ++i) {
      int64_t rem = i, xo = 0, io = 0;
      for (int k = nd - 1; k >= 0; --k) {
        pos[k] = rem % out_shape[k];
        rem /= out_shape[k];
        io += pos[k] * il.strides[k];
        if (k != axis) xo += pos[k] * xl.strides[k];
      }
      xo += ip[io] * xl.strides[axis];
      std::memcpy(static_cast<char*>(out.raw()) + i * es,
                  static_cast<const char*>(x.raw()) + xo * es, es);
    }
  });
  return out;
}

}  // namespace tessera::kernels
