// Indexing kernels: gathers and scatters through per-dimension offset tables.
//
// Any combination of integer, slice and (broadcast) integer-array indices
// selects elements at base + sum_k table_k[i_k]: a slice's table is
// start + i * step * stride, a block of broadcast advanced indices is one
// table over its flattened shape. Pad's edge/reflect modes and roll use the
// same tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/kernels/shape.hpp"

namespace tessera::kernels {

// Element (i0, ..., in) of the selection lives at base + sum_k tables[k][i_k]
// (in elements of the indexed buffer); the selection iterates in C order.
struct OffsetLayout {
  int64_t base = 0;
  std::vector<std::vector<int64_t>> tables;
  // Number of selected elements (product of the table sizes).
  int64_t count() const;
};

// The tables of a strided view (table k holds i * strides[k]).
OffsetLayout offsets_of(const StridedLayout& layout);

// Copies selected elements [begin, end) of `src` into the contiguous `dst`
// (dst[i] = src[offset(i)]).
void gather_offsets_range(const void* src, const OffsetLayout& layout, void* dst, size_t elem_size,
                          int64_t begin, int64_t end);

// Writes the contiguous `src` into the selected elements [begin, end) of `dst`.
// Repeated offsets are written in order (the last write wins).
void scatter_offsets_range(const void* src, void* dst, const OffsetLayout& layout, size_t elem_size,
                           int64_t begin, int64_t end);

// A new array of shape `shape` (whose size equals layout.count()) holding the
// selected elements of `src`.
Array gather_offsets(const Array& src, const OffsetLayout& layout, Shape shape,
                     ForRange run = serial_for);

// Writes `src` (contiguous, layout.count() elements, dtype of dst) into the
// selected elements of `dst`. Serial, so repeated offsets resolve in order.
void scatter_offsets(const Array& src, Array& dst, const OffsetLayout& layout);

// Adds `src` (contiguous, layout.count() elements, dtype of dst) into the
// selected elements of `dst`; repeated offsets accumulate (numpy.add.at).
// dst must hold a compute dtype (bool, int64, float32, float64).
void scatter_add_offsets(const Array& src, Array& dst, const OffsetLayout& layout);

// The indices of a take along an axis of length n, each in [-n, n),
// normalized to [0, n) into `out`. False (out unspecified) for a non-integer
// or uint64 array (values past int64's would wrap into range) or an index out
// of range: the general selection then handles them and names the error.
bool block_indices(const Array& indices, int64_t n, std::vector<int64_t>& out);

// The indices' own int64 data when they are contiguous int64 already in
// [0, n) (nothing to normalize, no copy); nullptr otherwise (block_indices
// then).
const int64_t* block_indices_in_place(const Array& indices, int64_t n);

// numpy.take along one axis of a C-contiguous x seen as (outer, n, inner),
// with `count` indices `idx` (each in [0, n)): out (outer, count, inner) gets
// whole blocks of `inner` elements (an embedding's rows), no per-element
// offsets. Pure copies, split across `run` by (outer, index) blocks.
void take_blocks(const Array& x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                 int64_t count, Array& out, ForRange run = serial_for);

// The cotangent of take_blocks: dst (outer, n, inner), float32 or float64,
// gets src (outer, count, inner, dst's dtype) added block by block, in index
// order (repeated indices accumulate in that order whatever the threads).
// zero_first: dst's contents are ignored and each block of dst starts at zero
// (an embedding's gradient: the zero fill and the sums in one pass). `run`
// splits dst's blocks: each tile zeroes and sums its own blocks, reading the
// indices in order, so the result is the serial one.
void add_blocks(const Array& src, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                int64_t count, Array& dst, bool zero_first = false, ForRange run = serial_for);

// np.take_along_axis: out[..., i, ...] = x[..., idx[..., i, ...], ...] along
// `axis`, where `idx` (int64, already normalized to [0, x.dim(axis))) and x
// are broadcast against each other in every other dimension to `out_shape`.
Array take_along_axis_array(const Array& x, const Array& idx, int axis, const Shape& out_shape,
                            ForRange run = serial_for);

}  // namespace tessera::kernels
