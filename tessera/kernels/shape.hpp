// Shape kernels: copies between strided layouts of one buffer and another.
//
// Transpose, flip, broadcast_to, tile, basic slicing, concatenation and pad
// are all "copy a strided view into a contiguous (or strided) destination";
// one kernel does that, working on raw bytes so it is instantiated once per
// element size rather than once per dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// A 16-byte element (complex128) for copies by element size.
struct Bytes16 {
  uint64_t lo, hi;
};

// Element (i0, ..., in) of a view lives at offset + sum(i_k * strides[k]),
// counted in elements of the underlying buffer. Strides may be 0 (broadcast)
// or negative (flip).
struct StridedLayout {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// The layout of a whole contiguous array of this shape.
StridedLayout contiguous_layout(const Shape& shape);

// A function that runs body(begin, end) over [0, n) in tiles; primitives pass
// tessera::parallel_for, kernels default to a plain serial call.
using ForRange = void (*)(int64_t n, double ns_per_item,
                          const std::function<void(int64_t, int64_t)>& body);
void serial_for(int64_t n, double ns_per_item, const std::function<void(int64_t, int64_t)>& body);

// Copies the elements [begin, end) (C order over the common shape) of the view
// `src_layout` of `src` to the view `dst_layout` of `dst`. Both layouts have
// the same shape; `elem_size` is 1, 4 or 8. Two-dimensional transposing
// copies go through cache-sized blocks.
void strided_copy_range(const void* src, const StridedLayout& src_layout, void* dst,
                        const StridedLayout& dst_layout, size_t elem_size, int64_t begin,
                        int64_t end);

// A new contiguous array holding the view `layout` of `src` (same dtype).
Array gather_view(const Array& src, const StridedLayout& layout, ForRange run = serial_for);

// Writes `src` (viewed through `src_layout`) into the view `dst_layout` of
// `dst`, which the caller owns exclusively.
void scatter_view(const Array& src, const StridedLayout& src_layout, Array& dst,
                  const StridedLayout& dst_layout, ForRange run = serial_for);

// The view of `a` broadcast to `shape` (NumPy rules, checked by the caller):
// stretched dimensions get stride 0.
StridedLayout broadcast_layout(const Array& a, const Shape& shape);

// NumPy's broadcast of two shapes, or nullopt-like failure reported by
// returning false.
bool broadcast_shape_pair(const Shape& a, const Shape& b, Shape& out);

// A copy of `a` with axes permuted: out.shape[i] = a.shape[perm[i]].
Array transpose_array(const Array& a, const std::vector<int>& perm, ForRange run = serial_for);

// Concatenates arrays (all of dtype `dt`, equal shapes except along `axis`)
// along `axis`.
Array concatenate_arrays(const std::vector<Array>& parts, int axis, DType dt,
                         ForRange run = serial_for);

// Pads `a` by before/after amounts per axis. mode: 0 constant, 1 edge,
// 2 reflect (mirror without repeating the edge, as NumPy's 'reflect').
enum class PadMode { constant, edge, reflect };
Array pad_array(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& widths,
                PadMode mode, double constant, ForRange run = serial_for);

}  // namespace tessera::kernels
