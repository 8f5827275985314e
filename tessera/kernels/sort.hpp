// Sorting and searching kernels: stable sort and argsort along an axis (NaN
// last, as NumPy orders it), unique, searchsorted, nonzero and bincount.
//
// An axis is viewed as (outer, n, inner): lane l of the outer*inner lanes
// starts at (l / inner) * n * inner + l % inner and steps by inner.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// NumPy's sort order: the usual order with every NaN after every number.
template <class T>
inline bool sort_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a < b || (std::isnan(b) && !std::isnan(a));
  } else {
    return a < b;
  }
}

// Stable sort of lanes [begin, end) of `in` into `out` (same dtype and shape).
void sort_lanes(const Array& in, Array& out, int64_t n, int64_t inner, int64_t begin,
                int64_t end);

// Stable argsort of lanes [begin, end): `out` is int64 with in's shape and
// receives, along the axis, the positions that sort each lane.
void argsort_lanes(const Array& in, Array& out, int64_t n, int64_t inner, int64_t begin,
                   int64_t end);

// The outputs of unique; the ones not requested are left empty (0-d).
struct UniqueResult {
  Array values;   // sorted distinct elements (1-d); NaNs collapse into one
  Array index;    // position of the first occurrence of each value
  Array inverse;  // for each input element the position of its value (input's shape)
  Array counts;   // occurrences of each value
};

// Distinct elements of the flattened input, sorted.
UniqueResult unique(const Array& in, bool want_index, bool want_inverse, bool want_counts);

// For elements [begin, end) of `v`, the insertion positions into the sorted
// 1-d `sorted` (same dtype as v): before equal elements (left) or after them
// (right). `out` is int64 with v's shape.
void searchsorted_range(const Array& sorted, const Array& v, bool right, Array& out,
                        int64_t begin, int64_t end);

// Number of nonzero elements.
int64_t count_nonzero(const Array& in);

// One int64 array of indices per dimension of the nonzero elements (ndim >= 1).
std::vector<Array> nonzero(const Array& in);

// Indices of nonzero elements as an (count, ndim) int64 array.
Array argwhere(const Array& in);

// Flat indices of nonzero elements (1-d int64).
Array flatnonzero(const Array& in);

// Occurrences of each value of the non-negative 1-d int64 `x` in an array of
// `length` bins (int64), or the sums of `weights` (float64, x's size) per bin.
Array bincount(const Array& x, const Array* weights, int64_t length);

}  // namespace tessera::kernels
