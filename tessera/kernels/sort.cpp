#include "tessera/kernels/sort.hpp"

#include "tessera/kernels/reduce.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

namespace tessera::kernels {

namespace {

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a == b || (std::isnan(a) && std::isnan(b));
  } else {
    return a == b;
  }
}

int64_t lane_start(int64_t l, int64_t n, int64_t inner) { return (l / inner) * n * inner + l % inner; }

}  // namespace

void sort_lanes(const Array& in, Array& out, int64_t n, int64_t inner, int64_t begin,
                int64_t end) {
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    LaneBuffer<T> scratch;
    T* buf = scratch.get(n);
    for (int64_t l = begin; l < end; ++l) {
      int64_t s = lane_start(l, n, inner);
      if (inner == 1) {
        std::copy(src + s, src + s + n, dst + s);
        std::stable_sort(dst + s, dst + s + n, sort_less<T>);
        continue;
      }
      for (int64_t i = 0; i < n; ++i) buf[i] = src[s + i * inner];
      std::stable_sort(buf, buf + n, sort_less<T>);
      for (int64_t i = 0; i < n; ++i) dst[s + i * inner] = buf[i];
    }
  });
}

void argsort_lanes(const Array& in, Array& out, int64_t n, int64_t inner, int64_t begin,
                   int64_t end) {
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    int64_t* dst = out.data<int64_t>();
    LaneBuffer<T> scratch;
    T* keys = scratch.get(n);
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t l = begin; l < end; ++l) {
      int64_t s = lane_start(l, n, inner);
      for (int64_t i = 0; i < n; ++i) keys[i] = src[s + i * inner];
      std::iota(perm.begin(), perm.end(), int64_t{0});
      std::stable_sort(perm.begin(), perm.end(),
                       [&](int64_t a, int64_t b) { return sort_less(keys[a], keys[b]); });
      for (int64_t i = 0; i < n; ++i) dst[s + i * inner] = perm[i];
    }
  });
}

UniqueResult unique(const Array& in, bool want_index, bool want_inverse, bool want_counts) {
  UniqueResult r;
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    const int64_t n = in.size();
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), int64_t{0});
    // Stable, so the first of a run of equal values is its first occurrence.
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t a, int64_t b) { return sort_less(src[a], src[b]); });
    std::vector<int64_t> starts;
    for (int64_t k = 0; k < n; ++k) {
      if (k == 0 || !same_value(src[perm[k]], src[perm[k - 1]])) starts.push_back(k);
    }
    const int64_t m = static_cast<int64_t>(starts.size());
    r.values = Array(in.dtype(), {m});
    for (int64_t g = 0; g < m; ++g) r.values.data<T>()[g] = src[perm[starts[g]]];
    if (want_index) {
      r.index = Array(DType::int64, {m});
      for (int64_t g = 0; g < m; ++g) r.index.data<int64_t>()[g] = perm[starts[g]];
    }
    if (want_counts) {
      r.counts = Array(DType::int64, {m});
      for (int64_t g = 0; g < m; ++g) {
        int64_t stop = g + 1 < m ? starts[g + 1] : n;
        r.counts.data<int64_t>()[g] = stop - starts[g];
      }
    }
    if (want_inverse) {
      r.inverse = Array(DType::int64, in.shape());
      int64_t* inv = r.inverse.data<int64_t>();
      int64_t g = -1;
      for (int64_t k = 0; k < n; ++k) {
        if (g + 1 < m && starts[g + 1] == k) ++g;
        inv[perm[k]] = g;
      }
    }
  });
  return r;
}

void searchsorted_range(const Array& sorted, const Array& v, bool right, Array& out,
                        int64_t begin, int64_t end) {
  dispatch(v.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* a = sorted.data<T>();
    const T* a_end = a + sorted.size();
    const T* x = v.data<T>();
    int64_t* dst = out.data<int64_t>();
    for (int64_t i = begin; i < end; ++i) {
      const T* pos = right ? std::upper_bound(a, a_end, x[i], sort_less<T>)
                           : std::lower_bound(a, a_end, x[i], sort_less<T>);
      dst[i] = pos - a;
    }
  });
}

int64_t count_nonzero(const Array& in) {
  if (in.dtype() == DType::bool_) {
    // Bools are the bytes 0 and 1: summed as bytes, which vectorises (a
    // comparison per element did not).
    const uint8_t* p = reinterpret_cast<const uint8_t*>(in.data<bool>());
    int64_t c = 0;
    for (int64_t i = 0; i < in.size(); ++i) c += p[i];
    return c;
  }
  return dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = in.data<T>();
    int64_t c = 0;
    for (int64_t i = 0; i < in.size(); ++i) c += p[i] != T(0);
    return c;
  });
}

namespace {

// The flat indices of the nonzero elements, in C order, into dst (room for
// `count` of them, the count_nonzero): each index is stored and the
// position advanced by the test, no branch to mispredict (a sieve's primes
// are 7% of its flags, scattered); it stops at the count, so the store
// after the last nonzero element is never out of bounds.
template <class T>
void nonzero_flat(const T* p, int64_t n, int64_t count, int64_t* dst) {
  int64_t k = 0;
  for (int64_t i = 0; i < n && k < count; ++i) {
    dst[k] = i;
    k += p[i] != T(0);
  }
}

void nonzero_flat(const Array& in, int64_t count, int64_t* dst) {
  if (in.dtype() == DType::bool_) {
    nonzero_flat(reinterpret_cast<const uint8_t*>(in.data<bool>()), in.size(), count, dst);
    return;
  }
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    nonzero_flat(in.data<T>(), in.size(), count, dst);
  });
}

// Writes the multi-index of each nonzero element: coordinate d of the k-th
// one goes to dst[k * row_stride + d * col_stride]. The coordinates are
// taken from the flat indices by counting through the shape (the k-th flat
// index only grows), not by a division per axis and element.
void write_coords(const Array& in, int64_t count, int64_t* dst, int64_t row_stride,
                  int64_t col_stride) {
  const int nd = in.ndim();
  std::vector<int64_t> flat(static_cast<size_t>(count));
  nonzero_flat(in, count, flat.data());
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  int64_t at = 0;  // the flat index idx stands for
  for (int64_t k = 0; k < count; ++k) {
    const int64_t target = flat[k];
    // Whole rows of the last axis at once, then the rest one by one.
    const int64_t last = nd > 0 ? in.dim(nd - 1) : 1;
    while (at + (last - idx[nd - 1]) <= target) {
      at += last - idx[nd - 1];
      idx[nd - 1] = 0;
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < in.dim(d)) break;
        idx[d] = 0;
      }
    }
    idx[nd - 1] += target - at;
    at = target;
    for (int d = 0; d < nd; ++d) dst[k * row_stride + d * col_stride] = idx[d];
  }
}

}  // namespace

std::vector<Array> nonzero(const Array& in) {
  const int64_t count = count_nonzero(in);
  const int nd = in.ndim();
  std::vector<Array> out;
  if (nd == 1) {  // the indices themselves, written into the result
    Array a(DType::int64, {count});
    nonzero_flat(in, count, a.data<int64_t>());
    out.push_back(a);
    return out;
  }
  Array coords(DType::int64, {nd, count});
  write_coords(in, count, coords.data<int64_t>(), 1, count);
  for (int d = 0; d < nd; ++d) {
    Array a(DType::int64, {count});
    std::copy(coords.data<int64_t>() + d * count, coords.data<int64_t>() + (d + 1) * count,
              a.data<int64_t>());
    out.push_back(a);
  }
  return out;
}

Array argwhere(const Array& in) {
  const int64_t count = count_nonzero(in);
  Array out(DType::int64, {count, in.ndim()});
  if (in.ndim() > 0) write_coords(in, count, out.data<int64_t>(), in.ndim(), 1);
  return out;
}

Array flatnonzero(const Array& in) {
  const int64_t count = count_nonzero(in);
  Array out(DType::int64, {count});
  nonzero_flat(in, count, out.data<int64_t>());
  return out;
}

Array bincount(const Array& x, const Array* weights, int64_t length) {
  const int64_t* idx = x.data<int64_t>();
  if (weights == nullptr) {
    Array out = Array::zeros(DType::int64, {length});
    int64_t* dst = out.data<int64_t>();
    const int64_t n = x.size();
    constexpr int64_t kSplitBins = 1024;
    if (length > kSplitBins || n < 4 * length) {
      for (int64_t i = 0; i < n; ++i) ++dst[idx[i]];
      return out;
    }
    // Few bins: four counters per bin, so that runs of one value (a peak of
    // the histogram) do not wait on their own increments; integer sums, so
    // the counts are exact in any order.
    std::vector<int64_t> part(static_cast<size_t>(4 * length), 0);
    int64_t* p0 = part.data();
    int64_t* p1 = p0 + length;
    int64_t* p2 = p1 + length;
    int64_t* p3 = p2 + length;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      ++p0[idx[i]];
      ++p1[idx[i + 1]];
      ++p2[idx[i + 2]];
      ++p3[idx[i + 3]];
    }
    for (; i < n; ++i) ++p0[idx[i]];
    for (int64_t b = 0; b < length; ++b) dst[b] = p0[b] + p1[b] + p2[b] + p3[b];
    return out;
  }
  Array out = Array::zeros(DType::float64, {length});
  double* dst = out.data<double>();
  const double* w = weights->data<double>();
  for (int64_t i = 0; i < x.size(); ++i) dst[idx[i]] += w[i];
  return out;
}

}  // namespace tessera::kernels
