// Indexing primitives: slice, getitem, setitem, take, take_along_axis.
//
// The Python front end translates x[i, 1:3, None, ..., idx, mask] into
// getitem(x, i, slice(1, 3), nil, "...", idx, mask). Every index resolves
// into per-dimension offset tables (kernels/indexing.hpp); basic and advanced
// indexing follow NumPy, including where the broadcast advanced dimensions
// go: in place when the advanced indices are adjacent, first otherwise.
#include "tessera/kernels/indexing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

// target[...] = v for a basic selection: Array::assign, split along the first
// axis across the workers when large (a 1M-element slice write is memory
// bound; one thread does not saturate the memory bus).
void assign_parallel(Array& target, const Array& v0) {
  constexpr int64_t kParallelElements = 1 << 16;
  if (target.size() < kParallelElements || target.ndim() == 0 || target.dim(0) < 2) {
    target.assign(v0);
    return;
  }
  // NumPy reads the whole value before writing when the two overlap.
  const Array v = v0.may_overlap(target) ? v0.copy() : v0;
  // The value broadcast to the target's shape (stretched axes: stride 0).
  const int nd = target.ndim(), lead = nd - v.ndim();
  std::vector<int64_t> vst(nd, 0);
  const std::vector<int64_t> own = v.strides();
  for (int k = 0; k < v.ndim(); ++k) {
    if (v.dim(k) != 1) vst[lead + k] = own[k];
  }
  const std::vector<int64_t> tst = target.strides();
  Shape rest(target.shape().begin() + 1, target.shape().end());
  const int64_t row = std::max<int64_t>(1, target.size() / target.dim(0));
  parallel_for(target.dim(0), 0.3 * static_cast<double>(row), [&](int64_t b, int64_t e) {
    Shape shape = target.shape();
    shape[0] = e - b;
    Array t = Array::view(target, shape, tst, target.offset() + b * tst[0]);
    Array src = Array::view(v, shape, vst, v.offset() + b * vst[0], true);
    t.assign(src);
  });
}

enum class IndexKind { new_axis, ellipsis, integer, slice, advanced, mask };

struct Index {
  Index(IndexKind k, int64_t i = 0, Slice s = {}) : kind(k), integer(i), slice(s) {}
  Index(IndexKind k, Array a) : kind(k), integer(0), array(std::move(a)) {}
  IndexKind kind;
  int64_t integer;
  Slice slice;
  // int64 for advanced, bool for mask; absent for the others (an Array
  // always holds a buffer: each int or slice index allocated one).
  std::optional<Array> array;
};

// The elements an index expression selects: offsets into x and the shape of
// the result.
struct Selection {
  kernels::OffsetLayout layout;
  Shape shape;
  // Basic indexing only (ints, slices, newaxis, ellipsis): the selection is
  // the view of x at origin offset layout.base with these strides.
  bool basic = false;
  std::vector<int64_t> strides;
};

[[noreturn]] void invalid_index(const char* op, const Value& v) {
  throw std::out_of_range(error_message(
      "[", op,
      "] only integers, slices, nil (newaxis), '...' (ellipsis) and integer or boolean "
      "arrays are valid indices, got ",
      v.describe()));
}

Index classify(const Value& v, const char* op) {
  switch (v.kind()) {
    case ValueKind::nil:
      return Index(IndexKind::new_axis);
    case ValueKind::string:
      if (v.as_string() == "...") return Index(IndexKind::ellipsis);
      invalid_index(op, v);
    case ValueKind::integer:
      return Index(IndexKind::integer, v.as_int());
    case ValueKind::slice: {
      if (v.as_slice().step && *v.as_slice().step == 0) {
        throw std::invalid_argument(error_message("[", op, "] slice step cannot be zero"));
      }
      return Index(IndexKind::slice, 0, v.as_slice());
    }
    case ValueKind::boolean:
      throw std::invalid_argument(error_message(
          "[", op, "] boolean scalar indices are not supported; use a boolean array mask"));
    case ValueKind::list:
    case ValueKind::array: {
      Array a =
          v.is_list() && v.as_list().empty() ? Array(DType::int64, {0}) : to_array(v, op, "index");
      if (a.dtype() == DType::bool_) {
        if (a.ndim() == 0) {
          throw std::invalid_argument(error_message(
              "[", op, "] 0-d boolean indices are not supported; use a boolean array mask"));
        }
        return Index(IndexKind::mask, std::move(a));
      }
      if (a.dtype() != DType::int64) {
        throw std::out_of_range(error_message(
            "[", op, "] arrays used as indices must be of integer or boolean type, got ",
            dtype_name(a.dtype())));
      }
      if (a.ndim() == 0) return Index(IndexKind::integer, a.get_int(0));
      return Index(IndexKind::advanced, std::move(a));
    }
    default:
      invalid_index(op, v);
  }
}

// Python's slice.indices(n): the first index, the step and the length.
void slice_bounds(const Slice& s, int64_t n, int64_t& start, int64_t& step, int64_t& len) {
  step = s.step.value_or(1);
  if (step == std::numeric_limits<int64_t>::min()) step = -std::numeric_limits<int64_t>::max();
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    return *v < 0 ? std::max(*v + n, lower) : std::min(*v, upper);
  };
  start = adjust(s.start, step > 0 ? lower : upper);
  int64_t stop = adjust(s.stop, step > 0 ? upper : lower);
  if (step > 0) {
    len = stop > start ? (stop - start - 1) / step + 1 : 0;
  } else {
    len = start > stop ? (start - stop - 1) / (-step) + 1 : 0;
  }
}

int64_t normalize_index(int64_t i, int64_t n, int axis, const char* op) {
  if (i < -n || i >= n) {
    throw std::out_of_range(error_message("[", op, "] index ", i, " is out of bounds for axis ",
                                          axis, " with size ", n));
  }
  return i < 0 ? i + n : i;
}

std::vector<Array> mask_to_indices(const Array& mask) {
  std::vector<int64_t> strides = contiguous_strides(mask.shape());
  int64_t count = 0;
  const bool* m = mask.data<bool>();
  for (int64_t i = 0; i < mask.size(); ++i) count += m[i];
  std::vector<Array> out;
  for (int k = 0; k < mask.ndim(); ++k) out.emplace_back(DType::int64, Shape{count});
  int64_t j = 0;
  for (int64_t i = 0; i < mask.size(); ++i) {
    if (!m[i]) continue;
    int64_t rem = i;
    for (int k = 0; k < mask.ndim(); ++k) {
      out[k].data<int64_t>()[j] = rem / strides[k];
      rem %= strides[k];
    }
    ++j;
  }
  return out;
}

Selection select(const Array& x, const List& values, const char* op) {
  std::vector<Index> items;
  int consumed = 0, ellipses = 0;
  bool has_adv = false;
  for (const Value& v : values) {
    items.push_back(classify(v, op));
    switch (items.back().kind) {
      case IndexKind::integer:
      case IndexKind::slice:
        ++consumed;
        break;
      case IndexKind::advanced:
        ++consumed;
        has_adv = true;
        break;
      case IndexKind::mask:
        consumed += items.back().array->ndim();
        has_adv = true;
        break;
      case IndexKind::ellipsis:
        ++ellipses;
        break;
      case IndexKind::new_axis:
        break;
    }
  }
  if (ellipses > 1) {
    throw std::out_of_range(
        error_message("[", op, "] an index can only have a single ellipsis ('...')"));
  }
  if (consumed > x.ndim()) {
    throw std::out_of_range(error_message("[", op, "] too many indices for array: array is ",
                                          x.ndim(), "-dimensional, but ", consumed,
                                          " were indexed"));
  }
  // Expand the ellipsis (or an implicit one at the end) into full slices.
  std::vector<Index> expanded;
  bool expanded_ellipsis = false;
  for (Index& it : items) {
    if (it.kind == IndexKind::ellipsis) {
      for (int k = consumed; k < x.ndim(); ++k) expanded.push_back(Index(IndexKind::slice));
      expanded_ellipsis = true;
    } else {
      expanded.push_back(std::move(it));
    }
  }
  if (!expanded_ellipsis) {
    for (int k = consumed; k < x.ndim(); ++k) expanded.push_back(Index(IndexKind::slice));
  }

  const std::vector<int64_t> strides = x.strides();
  Selection sel;
  // Output dimensions in index order; advanced ones are collected apart and
  // marked by the position (in `dims`) where the broadcast block would go.
  struct Dim {
    int64_t size;
    std::vector<int64_t> table;
    int64_t stride;  // of the view, for basic indexing
  };
  std::vector<Dim> dims;
  struct Adv {
    Array idx;
    int axis;
  };
  std::vector<Adv> advs;
  std::vector<size_t> adv_items;  // item numbers of the advanced indices
  size_t adv_dim_pos = 0;
  int d = 0;
  for (size_t n = 0; n < expanded.size(); ++n) {
    Index& it = expanded[n];
    if (it.kind == IndexKind::new_axis) {
      dims.push_back({1, {0}, 0});
    } else if (it.kind == IndexKind::integer && !has_adv) {
      sel.layout.base += normalize_index(it.integer, x.dim(d), d, op) * strides[d];
      ++d;
    } else if (it.kind == IndexKind::slice) {
      int64_t start, step, len;
      slice_bounds(it.slice, x.dim(d), start, step, len);
      // Offset tables only for selections with advanced indices: a basic
      // one is a view (shape and strides), at no cost per element.
      std::vector<int64_t> t(has_adv ? len : 0);
      if (has_adv) {
        for (int64_t i = 0; i < len; ++i) t[i] = (start + i * step) * strides[d];
      }
      if (len > 0 && !has_adv) sel.layout.base += start * strides[d];
      dims.push_back({len, std::move(t), step * strides[d]});
      ++d;
    } else if (it.kind == IndexKind::mask) {
      const Array& m = *it.array;
      for (int k = 0; k < m.ndim(); ++k) {
        if (m.dim(k) != x.dim(d + k)) {
          throw std::out_of_range(
              error_message("[", op, "] boolean index did not match indexed array along axis ",
                            d + k, "; size of axis is ", x.dim(d + k),
                            " but size of corresponding boolean axis is ", m.dim(k)));
        }
      }
      if (advs.empty()) adv_dim_pos = dims.size();
      for (Array& idx : mask_to_indices(m)) advs.push_back({std::move(idx), d++});
      adv_items.push_back(n);
    } else {
      // An advanced index, or an integer alongside advanced indices (NumPy
      // then treats it as a 0-d index array, which affects placement).
      if (advs.empty()) adv_dim_pos = dims.size();
      Array idx = it.kind == IndexKind::integer ? Array::scalar_int(it.integer) : *it.array;
      advs.push_back({idx, d++});
      adv_items.push_back(n);
    }
  }
  if (advs.empty()) {
    // The tables count from the selection's first element (moved into base
    // above), so a view and the tables agree.
    sel.basic = true;
    for (Dim& dim : dims) {
      sel.shape.push_back(dim.size);
      sel.strides.push_back(dim.stride);
    }
    return sel;
  }
  // Broadcast the advanced indices together and fold them into one table.
  Shape block;
  for (const Adv& a : advs) {
    Shape next;
    if (!kernels::broadcast_shape_pair(block, a.idx.shape(), next)) {
      std::string shapes;
      for (const Adv& b : advs) shapes += (shapes.empty() ? "" : " ") + shape_str(b.idx.shape());
      throw std::out_of_range(
          error_message("[", op,
                        "] shape mismatch: indexing arrays could not be broadcast together with "
                        "shapes ",
                        shapes));
    }
    block = next;
  }
  const int64_t block_size = shape_size(block, op);
  std::vector<int64_t> table(block_size, 0);
  for (const Adv& a : advs) {
    const int64_t n = x.dim(a.axis);
    Array flat = kernels::gather_view(a.idx, kernels::broadcast_layout(a.idx, block));
    const int64_t* p = flat.data<int64_t>();
    for (int64_t j = 0; j < block_size; ++j) {
      table[j] += normalize_index(p[j], n, a.axis, op) * strides[a.axis];
    }
  }
  bool adjacent = true;
  for (size_t i = 1; i < adv_items.size(); ++i) adjacent &= adv_items[i] == adv_items[i - 1] + 1;
  size_t block_pos = adjacent ? adv_dim_pos : 0;
  for (size_t i = 0; i <= dims.size(); ++i) {
    if (i == block_pos) {
      sel.shape.insert(sel.shape.end(), block.begin(), block.end());
      sel.layout.tables.push_back(table);
    }
    if (i < dims.size()) {
      sel.shape.push_back(dims[i].size);
      sel.layout.tables.push_back(std::move(dims[i].table));
    }
  }
  return sel;
}

// The offset (in elements, from x's origin) of the element that one int
// per axis selects; false when `idx` is anything else. Errors as select's.
bool element_offset(const Array& x, const List& idx, const char* op, int64_t& offset) {
  if (static_cast<int>(idx.size()) != x.ndim() || idx.empty()) return false;
  for (const Value& v : idx) {
    if (!v.is_int()) return false;
  }
  const std::vector<int64_t> strides = x.strides();
  offset = 0;
  for (int d = 0; d < x.ndim(); ++d) {
    offset += normalize_index(idx[d].as_int(), x.dim(d), d, op) * strides[d];
  }
  return true;
}

// x[i, :, a:b:c] with ints and slices only (a loop's column, Q[:, i]): the
// view straight from x's shape and strides, as select() computes it but
// without its list of classified indices (each of which allocated). Any
// other index, or an int out of bounds, is left to select(), which raises
// the errors.
std::optional<Array> basic_view(const Array& x, const List& idx) {
  if (idx.empty() || static_cast<int>(idx.size()) > x.ndim()) return std::nullopt;
  for (const Value& v : idx) {
    if (v.is_int()) continue;
    if (!v.is_slice() || (v.as_slice().step && *v.as_slice().step == 0)) return std::nullopt;
  }
  // x's strides, without making the vector for a C-contiguous x (C order's,
  // from the innermost axis out).
  std::vector<int64_t> strides_of_view;
  if (!x.is_contiguous()) strides_of_view = x.strides();
  auto stride = [&](int d) {
    if (!x.is_contiguous()) return strides_of_view[d];
    int64_t s = 1;
    for (int k = x.ndim() - 1; k > d; --k) s *= x.dim(k);
    return s;
  };
  Shape shape;
  std::vector<int64_t> view_strides;
  shape.reserve(static_cast<size_t>(x.ndim()));
  view_strides.reserve(static_cast<size_t>(x.ndim()));
  int64_t base = 0;
  int d = 0;
  for (const Value& v : idx) {
    const int64_t n = x.dim(d);
    if (v.is_int()) {
      const int64_t i = v.as_int();
      if (i < -n || i >= n) return std::nullopt;
      base += (i < 0 ? i + n : i) * stride(d);
    } else {
      int64_t start, step, len;
      slice_bounds(v.as_slice(), n, start, step, len);
      if (len > 0) base += start * stride(d);
      shape.push_back(len);
      view_strides.push_back(step * stride(d));
    }
    ++d;
  }
  for (; d < x.ndim(); ++d) {
    shape.push_back(x.dim(d));
    view_strides.push_back(stride(d));
  }
  return Array::view(x, std::move(shape), std::move(view_strides), x.offset() + base);
}

// x[mask] with a boolean mask of x's own shape (the usual masked update,
// z[mask] = z[mask] ** 2 + c[mask]): the mask itself, else null. Such a
// selection is read and written in one pass over the mask, with no index
// arrays or offset tables.
const Array* whole_mask(const Array& x, const List& index) {
  if (index.size() != 1 || !index[0].is_array() || x.ndim() == 0) return nullptr;
  const Array& m = index[0].as_array();
  return m.dtype() == DType::bool_ && m.shape() == x.shape() ? &m : nullptr;
}

// Calls f(T{}) with T a plain type of `bytes` bytes (element copies by
// size, inlined instead of a memcpy call per element).
template <class F>
void by_element_size(size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    case 8:
      f(uint64_t{});
      break;
    default:
      f(kernels::Bytes16{});
      break;
  }
}

// Calls f(t, begin, end) for each of `tiles` tiles over [0, n), in parallel
// (each costing about ns_per_item per element).
template <class F>
void for_mask_tiles(int64_t n, int64_t tiles, double ns_per_item, F&& f) {
  parallel_for(tiles, ns_per_item * static_cast<double>(n) / static_cast<double>(tiles),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) f(t, n * t / tiles, n * (t + 1) / tiles);
               });
}

// The true elements of a mask in tiles: per tile t (of `tiles` over [0, n)),
// before[t] is the number of true elements before it, before[tiles] all of
// them. Counted in parallel, so that a masked read or write can place each
// tile's elements on its own.
std::vector<int64_t> mask_counts(const bool* pm, int64_t n, int64_t tiles) {
  std::vector<int64_t> before(static_cast<size_t>(tiles) + 1, 0);
  for_mask_tiles(n, tiles, 0.3, [&](int64_t t, int64_t b, int64_t e) {
    int64_t c = 0;
    for (int64_t i = b; i < e; ++i) c += pm[i];
    before[t + 1] = c;
  });
  for (int64_t t = 0; t < tiles; ++t) before[t + 1] += before[t];
  return before;
}

// Tiles for a masked read or write of n elements.
int64_t mask_tiles(int64_t n) { return std::max<int64_t>(1, tile_count(n, 0.8)); }

Array mask_gather(const Array& x0, const Array& m0) {
  const Array x = x0.contiguous(), m = m0.contiguous();
  const bool* pm = m.data<bool>();
  const int64_t n = m.size(), tiles = mask_tiles(n);
  const std::vector<int64_t> before = mask_counts(pm, n, tiles);
  Array out(x.dtype(), {before[tiles]});
  by_element_size(dtype_size(x.dtype()), [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw());
    T* const base = static_cast<T*>(out.raw());
    for_mask_tiles(n, tiles, 0.8, [&](int64_t t, int64_t b, int64_t e) {
      // Without a branch per element (masks are unpredictable): every element
      // is written at the next free place, which moves on only past a kept
      // one. The loop stops once the tile's last kept element is placed, so
      // it never writes into the next tile's part of the output.
      T* dst = base + before[t];
      T* const stop = base + before[t + 1];
      for (int64_t i = b; i < e && dst < stop; ++i) {
        *dst = src[i];
        dst += pm[i];
      }
    });
  });
  return out;
}

// x[mask] = v into a C-contiguous x; false (nothing written) when v is not
// one value or one per true element, which the general path reports.
bool mask_scatter(Array& x, const Array& m0, const Array& v0) {
  const Array m = m0.contiguous();
  const bool* pm = m.data<bool>();
  const int64_t n = m.size(), tiles = mask_tiles(n);
  const std::vector<int64_t> before = mask_counts(pm, n, tiles);
  const int64_t count = before[tiles];
  if (v0.size() != 1 && !(v0.ndim() == 1 && v0.dim(0) == count)) return false;
  const Array v = (v0.may_overlap(x) ? v0.copy() : v0).astype(x.dtype()).contiguous();
  by_element_size(dtype_size(x.dtype()), [&](auto tag) {
    using T = decltype(tag);
    const T* const values = static_cast<const T*>(v.raw());
    const int64_t step = v.size() == 1 ? 0 : 1;
    T* dst = static_cast<T*>(x.raw());
    for_mask_tiles(n, tiles, 0.8, [&](int64_t t, int64_t b, int64_t e) {
      const T* src = values + before[t] * step;
      for (int64_t i = b; i < e; ++i) {
        if (pm[i]) {
          dst[i] = *src;
          src += step;
        }
      }
    });
  });
  return true;
}

std::optional<Array> take_by_blocks(const Array& x, const Value& indices, int axis);

Value getitem(Args& a) {
  const List& idx = a.list(1);
  if (a[0].is_list() || a[0].is_dict() || a[0].is_string()) {
    return sequence_getitem(a[0], idx, a.op());
  }
  // A Python number indexed by an int (`rows[1][0]` after `rows[1] = 5`):
  // Python's TypeError, not the IndexError of a 0-d array it would become.
  // `x[...]`, `x[None]`, `x[()]` of a number keep a 0-d array's meaning
  // (tessera's programs index numbers so; NumPy's scalars are 0-d arrays).
  if (a[0].is_scalar() && !idx.empty() && idx[0].is_int()) {
    const char* type = a[0].is_bool() ? "bool" : a[0].is_int() ? "int" : "float";
    throw TypeError(error_message("[", a.op(), "] '", type, "' object is not subscriptable"));
  }
  // The operand itself when it is an array (a copy of an Array allocates its
  // shape and strides: x[:, i] in a loop paid for it on every call).
  Array converted;
  const Array& x = a[0].is_array() ? a[0].as_array() : (converted = a.view(0));
  // A tuple as the whole index is a multi-dimensional index (idx = i, j;
  // x[idx] is x[i, j]); a list stays an integer array index, as in NumPy.
  const bool tuple_index = idx.size() == 1 && idx[0].is_tuple();
  const List& index = tuple_index ? idx[0].as_list() : idx;
  int64_t offset;
  if (element_offset(x, index, a.op(), offset)) {  // x[i, j]: the loops' common case
    Array one(x.dtype(), {});
    const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
    std::memcpy(one.raw(), static_cast<const char*>(x.origin_raw()) + offset * es, es);
    return one;
  }
  if (std::optional<Array> v = basic_view(x, index)) return std::move(*v);
  if (const Array* m = whole_mask(x, index)) return mask_gather(x, *m);
  // x[idx] by one integer array: whole rows of x (a lookup table's), as take.
  // (A 0-d integer array, NumPy's integer scalar, is an integer index: a
  // view of a row, from select below.)
  if (index.size() == 1 && index[0].is_array() && index[0].as_array().ndim() > 0 &&
      index[0].as_array().dtype() != DType::bool_) {
    if (std::optional<Array> rows = take_by_blocks(x, index[0], 0)) return std::move(*rows);
  }
  Selection sel = select(x, index, a.op());
  // Basic indexing gives a view of x, as in NumPy (a single element, every
  // axis indexed by an int, was a value of its own above, as NumPy's
  // scalars are; x[0, ...] is a 0-d view).
  if (sel.basic) return Array::view(x, sel.shape, sel.strides, x.offset() + sel.layout.base);
  return kernels::gather_offsets(x, sel.layout, sel.shape, &parallel_for);
}

// x[indices...] = value, written into x's buffer (and so into every view
// of it), as NumPy does; x itself is the result.
Value setitem(Args& a) {
  const List& idx = a.list(2);
  // Lists and dicts are values: xs[i] = v gives the new list (Python's
  // rules for the index and the key, python_values.hpp).
  if (a[0].is_list() || a[0].is_dict()) return sequence_setitem(a[0], a[1], idx, a.op());
  if (!a[0].is_array()) {
    if (a[0].is_numeric()) {
      a.type_error(0, "an array or a list (a number does not support item assignment)");
    }
    a.type_error(0, "an array, a list or a dict");
  }
  Array x = a[0].as_array();
  if (!a[1].is_numeric() && !a[1].is_list()) a.type_error(1, "a number or an array");
  check_scalar_store(a[1], x.dtype(), false, a.op());
  if (a[1].is_array() && a[1].as_array().weak() && !is_complex(x.dtype()) &&
      x.dtype() != DType::bool_) {
    // NumPy: a Python complex number does not go into a real array (a NumPy
    // complex scalar is cast, dropping the imaginary part with a warning).
    throw TypeError(error_message("[", a.op(), "] cannot assign the complex value ",
                                  a[1].as_array().str(), " to an array of dtype ",
                                  dtype_name(x.dtype())));
  }
  if (!x.writable()) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] assignment destination is read-only"));
  }
  int64_t offset;
  if ((a[1].is_scalar() ||
       (a[1].is_array() && a[1].as_array().size() == 1 && a[1].as_array().ndim() == 0)) &&
      element_offset(x, idx, a.op(), offset)) {
    // x[i, j] = v: one element, cast as NumPy's assignment casts.
    check_scalar_store(a[1], x.dtype(), true, a.op());
    Array v = a.array(1);
    if (!is_floating(x.dtype()) && x.dtype() != DType::bool_ && is_floating(v.dtype()) &&
        !std::isfinite(v.get_double(0))) {
      throw std::invalid_argument(error_message("[", a.op(), "] cannot convert float ",
                                                std::isnan(v.get_double(0)) ? "NaN" : "infinity",
                                                " to integer"));
    }
    dispatch_all(x.dtype(), [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      dispatch_all(v.dtype(), [&](auto from_tag) {
        using From = typename decltype(from_tag)::type;
        x.origin<To>()[offset] = element_cast<To>(v.origin<From>()[0]);
      });
    });
    return x;
  }
  if (const Array* m = whole_mask(x, idx);
      m && x.is_contiguous() && (a[1].is_numeric() || a[1].is_list())) {
    if (mask_scatter(x, *m, a.view(1))) return x;
  }
  Selection sel = select(x, idx, a.op());
  Array v = a.view(1);
  // NumPy lets the value carry extra leading extents of 1.
  while (v.ndim() > static_cast<int>(sel.shape.size()) && v.dim(0) == 1) {
    const std::vector<int64_t> st = v.strides();
    v = Array::view(v, Shape(v.shape().begin() + 1, v.shape().end()),
                    std::vector<int64_t>(st.begin() + 1, st.end()), v.offset());
  }
  Shape common;
  if (!kernels::broadcast_shape_pair(v.shape(), sel.shape, common) || common != sel.shape) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] could not broadcast input array from shape ",
                      shape_str(v.shape()), " into shape ", shape_str(sel.shape)));
  }
  if (sel.basic) {
    if (v.ndim() == 0) check_scalar_store(a[1], x.dtype(), true, a.op());
    Array target = Array::view(x, sel.shape, sel.strides, x.offset() + sel.layout.base);
    assign_parallel(target, v);
    return x;
  }
  // Advanced indices: the value, broadcast and converted, is gathered first
  // (it may be a view of x itself), then scattered in order (repeated
  // indices: the last write wins, as in NumPy).
  Array conv(x.dtype(), v.shape());
  conv.assign(v);
  Array full =
      kernels::gather_view(conv, kernels::broadcast_layout(conv, sel.shape), &parallel_for);
  kernels::scatter_offsets(full, x, sel.layout);
  return x;
}

// A new array equal to x with x[indices...] = value (x unchanged): what
// gradients of indexing scatter into (autodiff), without a write.
Value index_update(Args& a) {
  Array x = a.array(0).copy();
  std::vector<Value> vals{Value(x), a[1], a[2]};
  Args inner(*find_primitive("setitem"), std::move(vals));
  return setitem(inner);
}

// index_add: a copy of x with value added at x[indices...], repeated
// indices accumulating (numpy.add.at on a copy): the cotangent of x[...].
// x's own buffer is added into when nothing else holds it (the zeros that
// take_grad and getitem_grad make: no copy of an embedding-sized array).
Value index_add(Args& a) {
  Array x;
  if (a[0].is_array() && a[0].as_array().unique() && a[0].as_array().is_contiguous()) {
    x = std::move(a.take(0).as_array());
  } else {
    x = a.array(0).copy();
  }
  const List& idx = a.list(2);
  const bool tuple_index = idx.size() == 1 && idx[0].is_tuple();
  const List& index = tuple_index ? idx[0].as_list() : idx;
  Selection sel = select(x, index, a.op());
  Array v = a.array(1);
  Shape common;
  if (!kernels::broadcast_shape_pair(v.shape(), sel.shape, common) || common != sel.shape) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] could not broadcast the value of shape ",
                      shape_str(v.shape()), " into shape ", shape_str(sel.shape)));
  }
  Array conv = v.astype(x.dtype());
  Array full =
      kernels::gather_view(conv, kernels::broadcast_layout(conv, sel.shape), &parallel_for);
  const kernels::OffsetLayout layout =
      sel.basic
          ? kernels::offsets_of(kernels::StridedLayout{sel.shape, sel.strides, sel.layout.base})
          : sel.layout;
  kernels::scatter_add_offsets(full, x, layout);
  return x;
}

// take of whole blocks along `axis` (an embedding's rows): x (contiguous)
// seen as (outer, n, inner), an integer index array in [-n, n). Empty when
// the indices are not such an array (a list, out of range: the general
// selection handles them and names the error).
std::optional<Array> take_by_blocks(const Array& x, const Value& indices, int axis) {
  if (!indices.is_array() || x.ndim() == 0 || !x.is_contiguous()) return std::nullopt;
  const Array& idx = indices.as_array();
  const int64_t n = x.dim(axis);
  std::vector<int64_t> normalized;
  const int64_t* ip = kernels::block_indices_in_place(idx, n);
  if (ip == nullptr) {
    if (!kernels::block_indices(idx, n, normalized)) return std::nullopt;
    ip = normalized.data();
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int d = axis + 1; d < x.ndim(); ++d) inner *= x.dim(d);
  Shape shape(x.shape().begin(), x.shape().begin() + axis);
  shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
  shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  Array out(x.dtype(), shape);
  kernels::take_blocks(x, outer, n, inner, ip, idx.size(), out, &parallel_for);
  return out;
}

Value take(Args& a) {
  Array x = a.array(0);
  int axis = 0;
  if (a.is_nil(2)) {
    x = x.reshaped({x.size()});
  } else {
    axis = normalize_axis(a.integer(2), x.ndim(), a.op());
  }
  Value indices = a[1];
  if (indices.is_bool()) indices = Value(int64_t{indices.as_bool()});
  if (indices.is_array() && indices.as_array().dtype() == DType::bool_) {
    indices = indices.as_array().astype(DType::int64);
  }
  if (!indices.is_int() && !indices.is_array() && !indices.is_list()) {
    a.type_error(1, "an int or an integer array");
  }
  if (std::optional<Array> rows = take_by_blocks(x, indices, axis)) return *rows;
  List items(axis, Value(Slice{}));
  items.push_back(indices);
  Selection sel = select(x, items, a.op());
  if (sel.basic) return Array::view(x, sel.shape, sel.strides, x.offset() + sel.layout.base).copy();
  return kernels::gather_offsets(x, sel.layout, sel.shape, &parallel_for);
}

Value take_along_axis(Args& a) {
  Array x = a.array(0);
  Array idx = a.array(1);
  if (idx.dtype() != DType::int64) {
    throw std::out_of_range(error_message("[", a.op(), "] indices must be an integer array, got ",
                                          dtype_name(idx.dtype())));
  }
  int axis = 0;
  if (a.is_nil(2)) {
    x = x.reshaped({x.size()});
    if (idx.ndim() != 1) {
      throw std::invalid_argument(
          error_message("[", a.op(), "] when axis is nil, indices must be 1-d, got shape ",
                        shape_str(idx.shape())));
    }
  } else {
    if (x.ndim() == 0) {
      throw std::invalid_argument(error_message("[", a.op(), "] x must be at least 1-d"));
    }
    axis = normalize_axis(a.integer(2), x.ndim(), a.op());
  }
  if (idx.ndim() != x.ndim()) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] indices and x must have the same number of dimensions, got ",
                      idx.ndim(), " and ", x.ndim()));
  }
  Shape shape(x.ndim());
  for (int k = 0; k < x.ndim(); ++k) {
    if (k == axis) {
      shape[k] = idx.dim(k);
    } else if (x.dim(k) == idx.dim(k) || x.dim(k) == 1 || idx.dim(k) == 1) {
      shape[k] = x.dim(k) == 1 ? idx.dim(k) : x.dim(k);
    } else {
      throw std::invalid_argument(error_message("[", a.op(), "] shape mismatch: x of shape ",
                                                shape_str(x.shape()), " and indices of shape ",
                                                shape_str(idx.shape()),
                                                " do not broadcast outside axis ", axis));
    }
  }
  shape_size(shape, a.op());
  Array norm(DType::int64, idx.shape());
  const int64_t n = x.dim(axis);
  for (int64_t i = 0; i < idx.size(); ++i) {
    norm.data<int64_t>()[i] = normalize_index(idx.data<int64_t>()[i], n, axis, a.op());
  }
  return kernels::take_along_axis_array(x, norm, axis, shape, &parallel_for);
}

const bool registered_indexing = register_primitives({
    {.name = "slice",
     .family = "indexing",
     .params = {opt("start", Value()), opt("stop", Value()), opt("step", Value())},
     .help = "A slice start:stop:step for getitem/setitem, like Python's slice; nil parts are "
             "open. A zero step is an error.",
     .eval = [](Args& a) -> Value {
       Slice s{a.opt_integer(0), a.opt_integer(1), a.opt_integer(2)};
       if (s.step && *s.step == 0) {
         throw std::invalid_argument(error_message("[", a.op(), "] slice step cannot be zero"));
       }
       return s;
     },
     .ns_per_element = 1.0,
     .grads = {"", "", ""}},
    {.name = "getitem",
     .family = "indexing",
     .params = {{"x"}, {"indices"}},
     .variadic = true,
     .help = "x[indices...] with NumPy semantics: ints, slices, nil (newaxis), '...', integer "
             "arrays (broadcast together) and boolean masks; a tuple as the only index is a "
             "multi-dimensional index. Basic indexing (ints, slices, nil, '...') gives a view of "
             "x, which sees later writes to x and writes into it; advanced indexing gives a "
             "copy. Also indexes lists, tuples and strings by int or slice, and dicts by key "
             "(KeyError when missing), as Python does.",
     .eval = getitem,
     .ns_per_element = 1.0,
     .views = true},
    {.name = "setitem",
     .family = "indexing",
     .params = {{"x"}, {"value"}, {"indices"}},
     .variadic = true,
     .help = "x[indices...] = value, written into x's buffer (so every view of x sees it), "
             "value broadcast to the selection and cast to x's dtype; gives x. A read-only x "
             "(a broadcast view, a read-only NumPy array) is a ValueError.",
     .eval = setitem,
     .ns_per_element = 1.0,
     .views = true,
     .writes = true},
    {.name = "index_update",
     .family = "indexing",
     .params = {{"x"}, {"value"}, {"indices"}},
     .variadic = true,
     .help = "A new array equal to x with x[indices...] = value (value broadcast to the "
             "selection and cast to x's dtype); x itself is unchanged.",
     .eval = index_update,
     .ns_per_element = 1.0},
    {.name = "index_add",
     .family = "indexing",
     .params = {{"x"}, {"value"}, {"indices"}},
     .variadic = true,
     .help = "A new array equal to x with value added at x[indices...] (value broadcast to the "
             "selection and cast to x's dtype); repeated indices accumulate, as numpy.add.at "
             "does. The cotangent of an indexing x[...] is index_add(zeros_like(x), g, ...).",
     .eval = index_add},
    {.name = "take",
     .family = "indexing",
     .params = {{"x"}, {"indices"}, opt("axis", Value())},
     .help = "Elements of x at integer indices along axis (the flattened array when nil), like "
             "numpy.take.",
     .eval = take,
     .ns_per_element = 1.0,
     .grads = {"take_grad(g, x, indices, axis)", "", ""}},
    {.name = "take_along_axis",
     .family = "indexing",
     .params = {{"x"}, {"indices"}, {"axis"}},
     .help = "Picks values of x at indices along axis, indices broadcast against x elsewhere, "
             "like numpy.take_along_axis (e.g. with argsort results).",
     .eval = take_along_axis,
     .grads = {"take_along_axis_grad(g, x, indices, axis)", "", ""}},
});

}  // namespace

}  // namespace tessera
