// Reduction and scan kernels: the iteration plan over kept and reduced axes,
// NumPy-style pairwise summation, and a fixed reduction tree that lets one
// long lane be split into leaves without changing a single bit of the result.
//
// Kernels are single-threaded. A caller that wants parallelism runs disjoint
// ranges of output elements on different threads, or hands reduce_lane a
// LeafRunner that evaluates the (fixed) leaves of one lane in parallel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// How an n-d reduction walks its input: output element o reduces `inner`
// elements, found from the kept dims (outer walk) and the reduced dims (inner
// walk). Adjacent dims of the same kind are merged and size-1 dims dropped, so
// a full reduction of a contiguous array is one stride-1 lane.
struct ReducePlan {
  Shape out_shape;
  int64_t outer = 1;
  int64_t inner = 1;
  std::vector<int64_t> outer_dims, outer_strides;
  std::vector<int64_t> inner_dims, inner_strides;

  // True when every lane is a contiguous run of memory (no gathering needed).
  bool contiguous_lanes() const {
    return inner_dims.empty() || (inner_dims.size() == 1 && inner_strides[0] == 1);
  }
};

// Builds the plan; `axes` must be normalized (0 <= axis < ndim), sorted and unique.
ReducePlan make_reduce_plan(const Shape& shape, const std::vector<int>& axes, bool keepdims);

// Flat offset of the first input element reduced into output element o.
int64_t lane_offset(const ReducePlan& plan, int64_t o);

// Scratch memory for one lane, reused across lanes (std::vector<bool> would
// not give a bool*).
template <class T>
class LaneBuffer {
 public:
  // Room for at least n elements; earlier contents are not kept.
  T* get(int64_t n) {
    if (n > size_) {
      data_.reset(new T[static_cast<size_t>(n)]);
      size_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  int64_t size_ = 0;
};

// The elements reduced into output element o as a contiguous span: a pointer
// into `in` when lanes are contiguous, otherwise a copy gathered into `scratch`.
template <class T>
const T* lane_span(const ReducePlan& plan, const T* in, int64_t o, LaneBuffer<T>& scratch) {
  const T* base = in + lane_offset(plan, o);
  if (plan.contiguous_lanes()) return base;
  T* buf = scratch.get(plan.inner);
  size_t nd = plan.inner_dims.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  const int64_t last_dim = plan.inner_dims[nd - 1], last_stride = plan.inner_strides[nd - 1];
  for (int64_t k = 0; k < plan.inner;) {
    for (int64_t j = 0; j < last_dim; ++j) buf[k++] = base[off + j * last_stride];
    // Odometer over the outer inner-dims.
    for (size_t d = nd - 1; d-- > 0;) {
      off += plan.inner_strides[d];
      if (++idx[d] < plan.inner_dims[d]) break;
      off -= plan.inner_strides[d] * plan.inner_dims[d];
      idx[d] = 0;
    }
  }
  return buf;
}

// Most elements gathered at once when several strided lanes are copied together.
inline constexpr int64_t kGatherBlock = int64_t{1} << 15;

// How many lanes, starting at output element o and ending before `end`, are
// gathered by one lane_block call: neighbours along a stride-1 kept dim are
// gathered together so that memory is read in runs instead of one element per
// cache line (reducing axis 0 of a matrix).
inline int64_t lane_block_size(const ReducePlan& plan, int64_t o, int64_t end) {
  if (plan.contiguous_lanes() || plan.outer_dims.empty() || plan.outer_strides.back() != 1) {
    return 1;
  }
  int64_t row = plan.outer_dims.back();
  int64_t count = std::min(end - o, row - o % row);
  return std::max<int64_t>(1, std::min(count, kGatherBlock / std::max<int64_t>(plan.inner, 1)));
}

// Gathers the lanes of output elements [o, o + count) (count from
// lane_block_size) into `scratch`, lane j at j * plan.inner.
template <class T>
const T* lane_block(const ReducePlan& plan, const T* in, int64_t o, int64_t count,
                    LaneBuffer<T>& scratch) {
  if (count == 1) return lane_span(plan, in, o, scratch);
  const T* base = in + lane_offset(plan, o);
  const int64_t n = plan.inner;
  T* buf = scratch.get(n * count);
  size_t nd = plan.inner_dims.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    const T* src = base + off;
    for (int64_t j = 0; j < count; ++j) buf[j * n + k] = src[j];
    for (size_t d = nd; d-- > 0;) {
      off += plan.inner_strides[d];
      if (++idx[d] < plan.inner_dims[d]) break;
      off -= plan.inner_strides[d] * plan.inner_dims[d];
      idx[d] = 0;
    }
  }
  return buf;
}

// The accumulator type used for an output element type: integers and bools
// accumulate in uint64_t so that overflow wraps (as NumPy's int64 does)
// instead of being undefined behaviour.
template <class Out>
using AccOf = std::conditional_t<std::is_floating_point_v<Out>, Out, uint64_t>;

// NumPy's pairwise summation of map(p[i]) for i in [0, n): blocks of up to 128
// elements are summed with 8 partial sums, larger runs split in two halves
// (the first a multiple of 8 long). Error grows like O(log n), not O(n).
template <class Acc, class T, class Map>
Acc pairwise_sum(const T* p, int64_t n, const Map& map) {
  if (n < 8) {
    Acc s = Acc(0);
    for (int64_t i = 0; i < n; ++i) s += map(p[i]);
    return s;
  }
  if (n <= 128) {
    Acc r[8];
    for (int j = 0; j < 8; ++j) r[j] = map(p[j]);
    int64_t i = 8;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += map(p[i + j]);
    }
    Acc s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += map(p[i]);
    return s;
  }
  int64_t m = n / 2;
  m -= m % 8;
  return pairwise_sum<Acc>(p, m, map) + pairwise_sum<Acc>(p + m, n - m, map);
}

// Longest run reduced as one leaf of the reduction tree. A constant, so that
// the tree (and every rounding in it) is the same for any number of threads.
inline constexpr int64_t kLeafSize = int64_t{1} << 14;

// Where the reduction tree splits a run of n > kLeafSize elements: the same
// split pairwise_sum uses, so a tree of pairwise leaves equals pairwise_sum.
inline int64_t tree_split(int64_t n) {
  int64_t m = n / 2;
  return m - m % 8;
}

// The leaves [begin, end) of the reduction tree of a lane of n elements, in order.
std::vector<std::pair<int64_t, int64_t>> tree_leaves(int64_t n);

// Runs body(begin, end) over leaf indices [0, count); possibly in parallel.
using LeafRunner = std::function<void(int64_t count, const std::function<void(int64_t, int64_t)>&)>;

// A reducer R provides `using Acc`, `Acc leaf(const T* lane, int64_t begin,
// int64_t end) const` and `Acc combine(const Acc& left, const Acc& right) const`.
// reduce_lane evaluates the fixed tree over a lane of n elements; with a
// runner, long lanes have their leaves computed in parallel, with the same result.
template <class R, class T>
typename R::Acc reduce_tree(const R& r, const T* p, int64_t begin, int64_t n) {
  if (n <= kLeafSize) return r.leaf(p, begin, begin + n);
  int64_t m = tree_split(n);
  auto left = reduce_tree(r, p, begin, m);
  return r.combine(left, reduce_tree(r, p, begin + m, n - m));
}

template <class R>
typename R::Acc combine_tree(const R& r, const std::vector<typename R::Acc>& parts, int64_t n,
                             size_t& next) {
  if (n <= kLeafSize) return parts[next++];
  int64_t m = tree_split(n);
  auto left = combine_tree(r, parts, m, next);
  return r.combine(left, combine_tree(r, parts, n - m, next));
}

template <class R, class T>
typename R::Acc reduce_lane(const R& r, const T* p, int64_t n, const LeafRunner* run = nullptr) {
  if (run == nullptr || n <= 4 * kLeafSize) return reduce_tree(r, p, 0, n);
  auto leaves = tree_leaves(n);
  std::vector<typename R::Acc> parts(leaves.size());
  (*run)(static_cast<int64_t>(leaves.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) parts[i] = r.leaf(p, leaves[i].first, leaves[i].second);
  });
  size_t next = 0;
  return combine_tree(r, parts, n, next);
}

// NaN test that compiles (to false) for integer and bool types.
template <class T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Which elementwise reductions the kernels know.
enum class ReduceKind {
  sum,
  prod,
  min,
  max,
  all,
  any,
  count_nonzero,
  nansum,
  mean,
  nanmean,
  var,
  logsumexp,
  median,
  ptp,
  argmin,
  argmax
};

// Options of a reduction: degrees of freedom for var/std, sqrt for std.
struct ReduceOptions {
  double ddof = 0;
  bool sqrt = false;
};

// The result dtype of `kind` on input dtype `in` (NumPy's rules: sum/prod of
// bool/int -> int64, mean/var/median of bool/int -> float64, argmin -> int64).
DType reduce_result_dtype(ReduceKind kind, DType in);

// Reduces output elements [begin, end) of `in` into `out` (allocated with
// plan.out_shape and the result dtype, or `out_dtype` for sum/prod/mean when
// a dtype was requested). Lanes must be non-empty for min/max/ptp/argmin/argmax.
// `run`, when given, may compute the leaves of each lane in parallel.
void reduce_range(ReduceKind kind, const Array& in, const ReducePlan& plan, Array& out,
                  int64_t begin, int64_t end, const ReduceOptions& opts = {},
                  const LeafRunner* run = nullptr);

// Writes elements [begin, end) (C order) of an array that is never
// materialised -- a fused expression's values -- into dst, of its dtype.
using ValueProducer = std::function<void(int64_t begin, int64_t end, void* dst)>;

// sum, prod, mean, min or max of each lane of such an array, lane o being its
// elements [o * n, (o + 1) * n) (a reduction over trailing axes, n > 0), for
// output elements [begin, end) of `out` (float32 or float64: the values'
// dtype). The values are produced a block at a time into the thread's buffer
// and go through the same tree, leaves and roundings as reduce_range over the
// materialised array, so the result has the same bits.
void reduce_produced(ReduceKind kind, const ValueProducer& produce, int64_t n, Array& out,
                     int64_t begin, int64_t end, const LeafRunner* run = nullptr);

// Cumulative sum or product along an axis, viewed as (outer, n, inner):
// processes the outer blocks [begin, end). `out` has in's shape and the
// accumulation dtype; `in` must already have that dtype.
void scan_range(bool product, const Array& in, Array& out, int64_t n, int64_t inner, int64_t begin,
                int64_t end);
// The same for outer block `ob`, inner positions [j0, j1) only (each
// position's accumulation is the same as scan_range's).
void scan_columns(bool product, const Array& in, Array& out, int64_t n, int64_t inner, int64_t ob,
                  int64_t j0, int64_t j1);

}  // namespace tessera::kernels
