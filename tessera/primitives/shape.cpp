// Shape primitives: reshape, transpose, concatenate, split, tile, pad, ...
// As in NumPy, transposes, reshapes of contiguous arrays, expand_dims,
// squeeze, atleast_Nd and broadcast_to are views of their input (they share
// its buffer; a write through one is seen by the other); the others gather a
// strided view of the input into a new contiguous array (kernels/shape.hpp).
#include <algorithm>
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/kernels/indexing.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

using kernels::StridedLayout;

std::string axes_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// Normalized, duplicate-free axes.
std::vector<int> unique_axes(const std::vector<int64_t>& axes, int ndim, const char* op) {
  std::vector<int> out;
  std::vector<bool> seen(ndim, false);
  for (int64_t ax : axes) {
    int a = normalize_axis(ax, ndim, op);
    if (seen[a]) {
      throw std::invalid_argument(error_message("[", op, "] repeated axis: ", axes_str(axes)));
    }
    seen[a] = true;
    out.push_back(a);
  }
  return out;
}

StridedLayout layout_of(const Array& a) { return kernels::contiguous_layout(a.shape()); }

Array gather(const Array& a, const StridedLayout& l) {
  return kernels::gather_view(a, l, &parallel_for);
}

// A list argument of arrays (scalars become 0-d arrays).
std::vector<Array> array_list(const Args& a, size_t i) {
  const Value& v = a[i];
  std::vector<Array> out;
  if (v.is_list()) {
    for (const Value& e : v.as_list()) {
      if (!e.is_numeric() && !e.is_list()) a.type_error(i, "a list of arrays");
      out.push_back(to_array(e, a.op(), "array in the list"));
    }
  } else if (v.is_array()) {
    out.push_back(v.as_array());
  } else {
    a.type_error(i, "a list of arrays");
  }
  return out;
}

// Variadic stacking ops accept both hstack(a, b) and hstack([a, b]).
std::vector<Array> variadic_arrays(const Args& a, size_t i) {
  const List& l = a.list(i);
  if (l.size() == 1 && l[0].is_list()) {
    List inner = l[0].as_list();
    Args sub(a.spec(), {Value(inner)});
    return array_list(sub, 0);
  }
  return array_list(a, i);
}

Array reshape(const Array& x, const std::vector<int64_t>& req, const char* op) {
  Shape shape = req;
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (unknown >= 0) {
        throw std::invalid_argument(
            error_message("[", op, "] can only specify one unknown dimension: shape ", axes_str(req)));
      }
      unknown = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument(error_message(
          "[", op, "] negative dimensions are not allowed: shape ", axes_str(req)));
    } else if (shape[i] != 0 && known > (int64_t{1} << 62) / shape[i]) {
      known = -1;  // larger than any array: cannot match
      break;
    } else {
      known *= shape[i];
    }
  }
  bool ok = unknown >= 0 ? known > 0 && x.size() % known == 0 : known == x.size();
  if (!ok) {
    throw std::invalid_argument(error_message("[", op, "] cannot reshape array of size ", x.size(),
                                              " into shape ", axes_str(req)));
  }
  if (unknown >= 0) shape[unknown] = x.size() / known;
  return x.reshaped(shape);
}

// The view of x with axes permuted: out.shape[i] = x.shape[perm[i]].
Array transpose(const Array& x, const std::vector<int>& perm) {
  const std::vector<int64_t> st = x.strides();
  Shape shape;
  std::vector<int64_t> strides;
  for (int p : perm) {
    shape.push_back(x.dim(p));
    strides.push_back(st[p]);
  }
  return Array::view(x, std::move(shape), std::move(strides), x.offset());
}

// The view of x with the given shape, which differs from x's only by axes
// of extent 1 inserted (`is_new`) or dropped (`drop`).
Array with_unit_axes(const Array& x, const std::vector<bool>& is_new, const std::vector<bool>& drop) {
  const std::vector<int64_t> st = x.strides();
  Shape shape;
  std::vector<int64_t> strides;
  int k = 0;
  for (size_t i = 0; i < is_new.size(); ++i) {
    if (is_new[i]) {
      shape.push_back(1);
      strides.push_back(0);
      continue;
    }
    if (!drop[k]) {
      shape.push_back(x.dim(k));
      strides.push_back(st[k]);
    }
    ++k;
  }
  return Array::view(x, std::move(shape), std::move(strides), x.offset());
}

Value transpose_op(Args& a) {
  Array x = a.view(0);
  std::vector<int> perm;
  if (a.is_nil(1)) {
    for (int i = x.ndim() - 1; i >= 0; --i) perm.push_back(i);
  } else {
    std::vector<int64_t> axes = a.int_list(1);
    if (static_cast<int>(axes.size()) != x.ndim()) {
      throw std::invalid_argument(error_message("[", a.op(), "] axes don't match array: got ",
                                                axes.size(), " axes for an array of dimension ",
                                                x.ndim()));
    }
    perm = unique_axes(axes, x.ndim(), a.op());
  }
  return transpose(x, perm);
}

Value moveaxis(Args& a) {
  Array x = a.view(0);
  std::vector<int> src = unique_axes(a.int_list(1), x.ndim(), a.op());
  std::vector<int> dst = unique_axes(a.int_list(2), x.ndim(), a.op());
  if (src.size() != dst.size()) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] source and destination must have the same number of elements, got ",
        src.size(), " and ", dst.size()));
  }
  std::vector<int> perm(x.ndim(), -1), rest;
  std::vector<bool> moved(x.ndim(), false);
  for (size_t i = 0; i < src.size(); ++i) {
    perm[dst[i]] = src[i];
    moved[src[i]] = true;
  }
  for (int i = 0; i < x.ndim(); ++i) {
    if (!moved[i]) rest.push_back(i);
  }
  size_t r = 0;
  for (int i = 0; i < x.ndim(); ++i) {
    if (perm[i] < 0) perm[i] = rest[r++];
  }
  return transpose(x, perm);
}

Value expand_dims(Args& a) {
  Array x = a.view(0);
  std::vector<int64_t> axes = a.int_list(1);
  int nd = x.ndim() + static_cast<int>(axes.size());
  std::vector<int> ax = unique_axes(axes, nd, a.op());
  std::vector<bool> is_new(nd, false);
  for (int i : ax) is_new[i] = true;
  std::vector<bool> is_new_all(nd, false), keep(x.ndim(), false);
  for (int i = 0; i < nd; ++i) is_new_all[i] = is_new[i];
  return with_unit_axes(x, is_new_all, keep);
}

Value squeeze(Args& a) {
  Array x = a.view(0);
  std::vector<bool> drop(x.ndim(), false);
  if (a.is_nil(1)) {
    for (int i = 0; i < x.ndim(); ++i) drop[i] = x.dim(i) == 1;
  } else {
    for (int i : unique_axes(a.int_list(1), x.ndim(), a.op())) {
      if (x.dim(i) != 1) {
        throw std::invalid_argument(error_message(
            "[", a.op(), "] cannot select an axis to squeeze out which has size not equal to one: "
            "axis ", i, " has size ", x.dim(i)));
      }
      drop[i] = true;
    }
  }
  std::vector<bool> is_new(x.ndim(), false);
  return with_unit_axes(x, is_new, drop);
}

Array concatenate(std::vector<Array> parts, std::optional<int64_t> axis_opt, const char* op) {
  if (parts.empty()) {
    throw std::invalid_argument(error_message("[", op, "] need at least one array to concatenate"));
  }
  if (!axis_opt) {
    for (Array& p : parts) p = p.reshaped({p.size()});
    axis_opt = 0;
  }
  const Array& first = parts[0];
  if (first.ndim() == 0) {
    throw std::invalid_argument(
        error_message("[", op, "] zero-dimensional arrays cannot be concatenated"));
  }
  int axis = normalize_axis(*axis_opt, first.ndim(), op);
  DType dt = first.dtype();
  for (size_t i = 1; i < parts.size(); ++i) {
    const Array& p = parts[i];
    if (p.ndim() != first.ndim()) {
      throw std::invalid_argument(error_message(
          "[", op, "] all the input arrays must have the same number of dimensions, but the array "
          "at index 0 has ", first.ndim(), " dimension(s) and the array at index ", i, " has ",
          p.ndim(), " dimension(s)"));
    }
    for (int d = 0; d < p.ndim(); ++d) {
      if (d != axis && p.dim(d) != first.dim(d)) {
        throw std::invalid_argument(error_message(
            "[", op, "] all the input array dimensions except for the concatenation axis must "
            "match exactly, but along dimension ", d, ", the array at index 0 has size ",
            first.dim(d), " and the array at index ", i, " has size ", p.dim(d)));
      }
    }
    dt = promote(dt, p.dtype());
  }
  int64_t total = 0;
  for (const Array& p : parts) total += p.dim(axis);
  Shape shape = first.shape();
  shape[axis] = total;
  shape_size(shape, op);
  return kernels::concatenate_arrays(parts, axis, dt, &parallel_for);
}

// Arrays of at least `n` dimensions, NumPy's atleast_1d/2d/3d placement:
// (N,) -> (1, N) -> (1, N, 1); (M, N) -> (M, N, 1).
Array at_least(const Array& x, int n) {
  if (x.ndim() >= n) return x;
  // Where NumPy puts the new axes: (N,) -> (1, N) and (1, N, 1); (M, N) -> (M, N, 1).
  std::vector<bool> is_new;
  if (n == 1) is_new = {true};
  if (n == 2) is_new = x.ndim() == 0 ? std::vector<bool>{true, true} : std::vector<bool>{true, false};
  if (n == 3) {
    is_new = x.ndim() == 0   ? std::vector<bool>{true, true, true}
             : x.ndim() == 1 ? std::vector<bool>{true, false, true}
                             : std::vector<bool>{false, false, true};
  }
  return with_unit_axes(x, is_new, std::vector<bool>(x.ndim(), false));
}

Value stack(Args& a) {
  std::vector<Array> parts = array_list(a, 0);
  if (parts.empty()) {
    throw std::invalid_argument(error_message("[", a.op(), "] need at least one array to stack"));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].shape() != parts[0].shape()) {
      throw std::invalid_argument(error_message(
          "[", a.op(), "] all input arrays must have the same shape, but the array at index 0 "
          "has shape ", shape_str(parts[0].shape()), " and the array at index ", i, " has shape ",
          shape_str(parts[i].shape())));
    }
  }
  int axis = normalize_axis(a.integer(1), parts[0].ndim() + 1, a.op());
  for (Array& p : parts) {
    Shape s = p.shape();
    s.insert(s.begin() + axis, 1);
    p = p.reshaped(s);
  }
  return concatenate(std::move(parts), axis, a.op());
}

Value split(Args& a) {
  Array x = a.array(0);
  if (x.ndim() == 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] cannot split a 0-d array"));
  }
  int axis = normalize_axis(a.integer(2), x.ndim(), a.op());
  const int64_t n = x.dim(axis);
  std::vector<int64_t> bounds{0};
  if (a[1].is_int() || a[1].is_bool() || (a[1].is_array() && a[1].as_array().ndim() == 0)) {
    int64_t sections = a.integer(1);
    if (sections <= 0) a.value_error(1, error_message("must be a positive number of sections, got ", sections));
    if (n % sections != 0) {
      throw std::invalid_argument(error_message(
          "[", a.op(), "] array split does not result in an equal division: ", n,
          " elements into ", sections, " sections"));
    }
    for (int64_t i = 1; i <= sections; ++i) bounds.push_back(i * (n / sections));
  } else {
    for (int64_t i : a.int_list(1)) {
      if (i < 0) i = std::max<int64_t>(0, i + n);
      bounds.push_back(std::min(i, n));
    }
    bounds.push_back(n);
  }
  std::vector<int64_t> st = contiguous_strides(x.shape());
  List out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    int64_t b = bounds[i], e = std::max(bounds[i], bounds[i + 1]);
    StridedLayout l{x.shape(), st, b * st[axis]};
    l.shape[axis] = e - b;
    out.push_back(gather(x, l));
  }
  return out;
}

Value flip(Args& a) {
  Array x = a.array(0);
  StridedLayout l = layout_of(x);
  std::vector<int> axes;
  if (a.is_nil(1)) {
    for (int i = 0; i < x.ndim(); ++i) axes.push_back(i);
  } else {
    axes = unique_axes(a.int_list(1), x.ndim(), a.op());
  }
  for (int ax : axes) {
    if (l.shape[ax] > 0) l.offset += (l.shape[ax] - 1) * l.strides[ax];
    l.strides[ax] = -l.strides[ax];
  }
  return gather(x, l);
}

Value roll(Args& a) {
  Array x = a.array(0);
  const bool flat = a.is_nil(2);
  Array src = flat ? x.reshaped({x.size()}) : x;
  std::vector<int64_t> shifts = a.int_list(1);
  std::vector<int64_t> axes = flat ? std::vector<int64_t>{0} : a.int_list(2);
  if (shifts.size() != axes.size()) {
    if (shifts.size() == 1) {
      shifts.assign(axes.size(), shifts[0]);
    } else if (axes.size() == 1) {
      axes.assign(shifts.size(), axes[0]);
    } else {
      throw std::invalid_argument(error_message("[", a.op(), "] shift and axis must have the "
                                                "same length, got ", shifts.size(), " and ",
                                                axes.size()));
    }
  }
  std::vector<int64_t> total(src.ndim(), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int ax = normalize_axis(axes[i], src.ndim(), a.op());
    int64_t n = src.dim(ax);
    if (n > 0) total[ax] = ((total[ax] + shifts[i] % n) % n + n) % n;
  }
  std::vector<int64_t> st = contiguous_strides(src.shape());
  kernels::OffsetLayout l;
  for (int k = 0; k < src.ndim(); ++k) {
    const int64_t n = src.dim(k);
    std::vector<int64_t> t(n);
    for (int64_t i = 0; i < n; ++i) t[i] = ((i - total[k] + n) % n) * st[k];
    l.tables.push_back(std::move(t));
  }
  return kernels::gather_offsets(src, l, src.shape(), &parallel_for).reshaped(x.shape());
}

Value tile(Args& a) {
  Array x = a.array(0);
  std::vector<int64_t> reps = a.int_list(1);
  for (int64_t r : reps) {
    if (r < 0) a.value_error(1, error_message("must be non-negative, got ", axes_str(reps)));
  }
  const size_t nd = std::max<size_t>(x.ndim(), reps.size());
  Shape xs = x.shape();
  xs.insert(xs.begin(), nd - xs.size(), 1);
  reps.insert(reps.begin(), nd - reps.size(), 1);
  std::vector<int64_t> st = contiguous_strides(xs);
  StridedLayout l;
  Shape out_shape;
  for (size_t k = 0; k < nd; ++k) {
    l.shape.push_back(reps[k]);
    l.strides.push_back(0);
    l.shape.push_back(xs[k]);
    l.strides.push_back(st[k]);
    out_shape.push_back(reps[k] * xs[k]);
  }
  shape_size(l.shape, a.op());
  return gather(x, l).reshaped(out_shape);
}

Value repeat(Args& a) {
  Array x = a.array(0);
  const bool flat = a.is_nil(2);
  Array src = flat ? x.reshaped({x.size()}) : x;
  if (src.ndim() == 0) src = src.reshaped({1});
  int axis = flat ? 0 : normalize_axis(a.integer(2), src.ndim(), a.op());
  const int64_t n = src.dim(axis);
  std::vector<int64_t> reps = a.int_list(1);
  if (reps.size() == 1) reps.assign(n, reps[0]);
  if (static_cast<int64_t>(reps.size()) != n) {
    throw std::invalid_argument(error_message("[", a.op(), "] repeats of length ", reps.size(),
                                              " do not match axis ", axis, " of size ", n));
  }
  int64_t total = 0;
  for (int64_t r : reps) {
    if (r < 0) a.value_error(1, "may not contain negative values");
    if (r > (int64_t{1} << 50) || total > (int64_t{1} << 50)) {
      throw MemoryError(error_message("[", a.op(), "] array is too big: repeats too large"));
    }
    total += r;
  }
  Shape shape = src.shape();
  shape[axis] = total;
  shape_size(shape, a.op());
  std::vector<int64_t> st = contiguous_strides(src.shape());
  kernels::OffsetLayout l;
  for (int k = 0; k < src.ndim(); ++k) {
    std::vector<int64_t> t;
    if (k == axis) {
      for (int64_t i = 0; i < n; ++i) t.insert(t.end(), reps[i], i * st[k]);
    } else {
      for (int64_t i = 0; i < src.dim(k); ++i) t.push_back(i * st[k]);
    }
    l.tables.push_back(std::move(t));
  }
  return kernels::gather_offsets(src, l, shape, &parallel_for);
}

Value pad(Args& a) {
  Array x = a.array(0);
  const int nd = x.ndim();
  // pad_width: n, [b, a], [[b, a]] or one [b, a] per axis.
  std::vector<std::pair<int64_t, int64_t>> widths;
  const Value& pw = a[1];
  auto bad = [&]() { a.value_error(1, error_message("must be an int, a pair or one pair per axis (",
                                                    nd, " axes), got ", pw.str())); };
  if (pw.is_list() && !pw.as_list().empty() && pw.as_list()[0].is_list()) {
    for (const Value& p : pw.as_list()) {
      Args sub(a.spec(), {a[0], p});
      std::vector<int64_t> v = sub.int_list(1);
      if (v.size() == 1) v.push_back(v[0]);
      if (v.size() != 2) bad();
      widths.emplace_back(v[0], v[1]);
    }
  } else {
    std::vector<int64_t> v = a.int_list(1);
    if (v.size() == 1) v.push_back(v[0]);
    if (v.size() != 2) bad();
    widths.emplace_back(v[0], v[1]);
  }
  if (widths.size() == 1) widths.assign(nd, widths[0]);
  if (static_cast<int>(widths.size()) != nd) bad();
  for (auto [b, e] : widths) {
    if (b < 0 || e < 0) a.value_error(1, error_message("can't contain negative values, got ", pw.str()));
    if (b > (int64_t{1} << 50) || e > (int64_t{1} << 50)) {
      throw MemoryError(error_message("[", a.op(), "] array is too big: pad width ", pw.str()));
    }
  }
  const std::string& mode = a.string(2);
  kernels::PadMode m;
  if (mode == "constant") {
    m = kernels::PadMode::constant;
  } else if (mode == "edge") {
    m = kernels::PadMode::edge;
  } else if (mode == "reflect") {
    m = kernels::PadMode::reflect;
  } else {
    a.value_error(2, error_message("must be 'constant', 'edge' or 'reflect', got '", mode, "'"));
  }
  Shape shape = x.shape();
  for (int k = 0; k < nd; ++k) {
    shape[k] += widths[k].first + widths[k].second;
    if (m != kernels::PadMode::constant && x.dim(k) == 0 && shape[k] > 0) {
      throw std::invalid_argument(error_message("[", a.op(), "] can't extend empty axis ", k,
                                                " using mode '", mode, "'"));
    }
  }
  shape_size(shape, a.op());
  return kernels::pad_array(x, widths, m, a.number(3), &parallel_for);
}

Value broadcast_to(Args& a) {
  Array x = a.view(0);
  Shape shape = a.int_list(1);
  shape_size(shape, a.op());
  bool ok = x.ndim() <= static_cast<int>(shape.size());
  for (int k = 0; ok && k < x.ndim(); ++k) {
    int64_t t = shape[shape.size() - x.ndim() + k];
    ok = x.dim(k) == t || x.dim(k) == 1;
  }
  if (!ok) {
    throw std::invalid_argument(error_message("[", a.op(), "] cannot broadcast array of shape ",
                                              shape_str(x.shape()), " to shape ",
                                              shape_str(shape)));
  }
  // A read-only view with stride 0 along the stretched axes, as NumPy's.
  const std::vector<int64_t> st = x.strides();
  std::vector<int64_t> strides(shape.size(), 0);
  const size_t lead = shape.size() - x.ndim();
  for (int k = 0; k < x.ndim(); ++k) strides[lead + k] = x.dim(k) == 1 ? 0 : st[k];
  return Array::view(x, shape, strides, x.offset(), /*readonly=*/true);
}

// window_view(x, axis, w): every window of w consecutive elements along
// `axis`, the window's axis appended last (one axis of NumPy's
// sliding_window_view): a read-only view, x's stride along `axis` repeated.
Value window_view(Args& a) {
  Array x = a.view(0);
  const int axis = normalize_axis(a.integer(1), x.ndim(), a.op());
  const int64_t w = a.integer(2);
  if (w < 0) a.value_error(2, error_message("(the window) cannot be negative, got ", w));
  if (w > x.dim(axis)) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] window shape cannot be larger than input array shape: a window of ", w,
        " along axis ", axis, " of length ", x.dim(axis)));
  }
  Shape shape = x.shape();
  std::vector<int64_t> strides = x.strides();
  shape[axis] -= w - 1;
  shape.push_back(w);
  strides.push_back(strides[axis]);
  return Array::view(x, shape, strides, x.offset(), /*readonly=*/true);
}

// The cotangent of x in window_view(x, axis, w): each window's g added back
// at the elements it covered (windows overlap: x[i + j] gets g[i, j] for all i, j).
Value window_view_grad(Args& a) {
  Array g = a.view(0);
  const Shape xs = a.view(1).shape();
  const int nd = static_cast<int>(xs.size());
  const int axis = normalize_axis(a.integer(2), nd, a.op());
  const int64_t w = a.integer(3);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= xs[d];
  for (int d = axis + 1; d < nd; ++d) inner *= xs[d];
  const int64_t n = xs[axis], m = n - w + 1;
  Shape gs = xs;
  gs[axis] = m;
  gs.push_back(w);
  if (m < 0 || g.shape() != gs) {
    throw std::invalid_argument(error_message("[", a.op(), "] g of shape ", shape_str(g.shape()),
                                              " is not the windows' shape ", shape_str(gs)));
  }
  const DType dt = is_floating(g.dtype()) ? g.dtype() : DType::float64;
  g = g.astype(dt).contiguous();  // (a copy only when not float or not contiguous)
  Array dx = Array::zeros(dt, xs);
  auto add = [&](auto* d, const auto* s) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t c = 0; c < inner; ++c) {
          const auto* win = s + ((o * m + i) * inner + c) * w;
          auto* col = d + (o * n + i) * inner + c;
          for (int64_t j = 0; j < w; ++j) col[j * inner] += win[j];
        }
      }
    }
  };
  if (dt == DType::float32) {
    add(dx.data<float>(), g.data<float>());
  } else if (dt == DType::float64) {
    add(dx.data<double>(), g.data<double>());
  } else {
    throw TypeError(error_message("[", a.op(), "] g must be a real float array, got ",
                                  dtype_name(dt)));
  }
  return Value(dx);
}

Value stack_with(Args& a, int min_dims, int axis) {
  std::vector<Array> parts = variadic_arrays(a, 0);
  for (Array& p : parts) p = at_least(p, min_dims);
  if (min_dims == 1 && !parts.empty() && parts[0].ndim() == 1) axis = 0;
  return concatenate(std::move(parts), axis, a.op());
}

const bool registered_shape = register_primitives({
    {.name = "reshape", .family = "shape", .params = {{"x"}, {"shape"}},
     .help = "x with a new shape of the same size, like numpy.reshape; one extent may be -1 "
             "(inferred). A view of x when x is contiguous, else a copy.",
     .eval = [](Args& a) -> Value { return reshape(a.array(0), a.int_list(1), a.op()); },
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))", ""},
     .views = true},
    {.name = "ravel", .family = "shape", .params = {{"x"}},
     .help = "x as a 1-d array (C order), like numpy.ravel: a view when x is contiguous, "
             "else a copy.",
     .eval = [](Args& a) -> Value { Array x = a.array(0); return x.reshaped({x.size()}); },
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))"},
     .views = true},
    {.name = "flatten", .family = "shape", .params = {{"x"}},
     .help = "A copy of x as a 1-d array (C order), like ndarray.flatten.",
     .eval = [](Args& a) -> Value { Array x = a.array(0); return x.copy().reshaped({x.size()}); },
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))"}},
    {.name = "transpose", .family = "shape", .params = {{"x"}, opt("axes", Value())},
     .help = "x with its axes permuted (reversed when axes is nil), like numpy.transpose: a "
             "view of x.",
     .eval = transpose_op,
     .ns_per_element = 1.0,
     .grads = {"if(is_nil(axes), transpose(g), transpose(g, argsort(axes)))", ""},
     .views = true},
    {.name = "swapaxes", .family = "shape", .params = {{"x"}, {"axis1"}, {"axis2"}},
     .help = "x with two axes interchanged, like numpy.swapaxes (a view).",
     .eval = [](Args& a) -> Value {
       Array x = a.view(0);
       int a1 = normalize_axis(a.integer(1), x.ndim(), a.op());
       int a2 = normalize_axis(a.integer(2), x.ndim(), a.op());
       std::vector<int> perm(x.ndim());
       std::iota(perm.begin(), perm.end(), 0);
       std::swap(perm[a1], perm[a2]);
       return transpose(x, perm);
     },
     .ns_per_element = 1.0,
     .grads = {"swapaxes(g, axis1, axis2)", "", ""},
     .views = true},
    {.name = "moveaxis", .family = "shape", .params = {{"x"}, {"source"}, {"destination"}},
     .help = "x with axes moved from source to destination positions (ints or lists), the "
             "others keeping their order, like numpy.moveaxis (a view).",
     .eval = moveaxis,
     .ns_per_element = 1.0,
     .grads = {"moveaxis(g, destination, source)", "", ""},
     .views = true},
    {.name = "expand_dims", .family = "shape", .params = {{"x"}, {"axis"}},
     .help = "x with extents of 1 inserted at the given axes (int or list), like "
             "numpy.expand_dims (a view).",
     .eval = expand_dims,
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))", ""},
     .views = true},
    {.name = "squeeze", .family = "shape", .params = {{"x"}, opt("axis", Value())},
     .help = "x without extents of 1 (all, or the given axes, which must have size 1), like "
             "numpy.squeeze (a view).",
     .eval = squeeze,
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))", ""},
     .views = true},
    {.name = "concatenate", .family = "shape", .params = {{"arrays"}, opt("axis", int64_t{0})},
     .help = "Joins a list of arrays along an existing axis (nil: flattened first), promoting "
             "dtypes, like numpy.concatenate.",
     .eval = [](Args& a) -> Value {
       return concatenate(array_list(a, 0), a.opt_integer(1), a.op());
     },
     .ns_per_element = 0.5,
     .grads = {"concatenate_grad(g, arrays, axis)", ""}},
    {.name = "stack", .family = "shape", .params = {{"arrays"}, opt("axis", int64_t{0})},
     .help = "Joins a list of equally shaped arrays along a new axis, like numpy.stack.",
     .eval = stack,
     .ns_per_element = 0.5,
     .grads = {"stack_grad(g, arrays, axis)", ""}},
    {.name = "hstack", .family = "shape", .params = {{"arrays"}}, .variadic = true,
     .help = "Concatenates arrays along axis 1 (axis 0 for 1-d arrays), like numpy.hstack; "
             "takes arrays or one list.",
     .eval = [](Args& a) -> Value { return stack_with(a, 1, 1); },
     .ns_per_element = 0.5,
     .grads = {"stacked_grad(g, arrays, 1, 1)"}},
    {.name = "vstack", .family = "shape", .params = {{"arrays"}}, .variadic = true,
     .help = "Concatenates arrays along axis 0 after making them at least 2-d, like "
             "numpy.vstack; takes arrays or one list.",
     .eval = [](Args& a) -> Value { return stack_with(a, 2, 0); },
     .ns_per_element = 0.5,
     .grads = {"stacked_grad(g, arrays, 2, 0)"}},
    {.name = "dstack", .family = "shape", .params = {{"arrays"}}, .variadic = true,
     .help = "Concatenates arrays along axis 2 after making them at least 3-d, like "
             "numpy.dstack; takes arrays or one list.",
     .eval = [](Args& a) -> Value { return stack_with(a, 3, 2); },
     .ns_per_element = 0.5,
     .grads = {"stacked_grad(g, arrays, 3, 2)"}},
    {.name = "split", .family = "shape",
     .params = {{"x"}, {"indices_or_sections"}, opt("axis", int64_t{0})},
     .help = "A list of sub-arrays: an int splits into equal sections (an error if it does not "
             "divide), a list gives split points, like numpy.split.",
     .eval = split,
     .ns_per_element = 0.5,
     .grads = {"split_grad(g, x, indices_or_sections, axis)", "", ""}},
    {.name = "flip", .family = "shape", .params = {{"x"}, opt("axis", Value())},
     .help = "x with the order of elements reversed along the given axes (all when nil), like "
             "numpy.flip.",
     .eval = flip,
     .ns_per_element = 0.5,
     .grads = {"flip(g, axis)", ""}},
    {.name = "roll", .family = "shape", .params = {{"x"}, {"shift"}, opt("axis", Value())},
     .help = "x with elements shifted cyclically along axes (the flattened array when nil), "
             "like numpy.roll.",
     .eval = roll,
     .ns_per_element = 1.0,
     .grads = {"roll_grad(g, x, shift, axis)", "", ""}},
    {.name = "tile", .family = "shape", .params = {{"x"}, {"reps"}},
     .help = "x repeated reps times along each axis, like numpy.tile.",
     .eval = tile,
     .ns_per_element = 0.5,
     .grads = {"tile_grad(g, x, reps)", ""}},
    {.name = "repeat", .family = "shape",
     .params = {{"x"}, {"repeats"}, opt("axis", Value())},
     .help = "Each element repeated (an int, or one count per element) along axis (the "
             "flattened array when nil), like numpy.repeat.",
     .eval = repeat,
     .ns_per_element = 1.0,
     .grads = {"repeat_grad(g, x, repeats, axis)", "", ""}},
    {.name = "pad", .family = "shape",
     .params = {{"x"}, {"pad_width"}, opt("mode", "constant"), opt("constant_values", int64_t{0})},
     .help = "x padded by pad_width (an int, a [before, after] pair, or one pair per axis), "
             "like numpy.pad; modes 'constant', 'edge' and 'reflect'.",
     .eval = pad,
     .ns_per_element = 1.0,
     .grads = {"pad_grad(g, x, pad_width, mode)", "", "", ""}},
    {.name = "broadcast_to", .family = "shape", .params = {{"x"}, {"shape"}},
     .help = "x broadcast to a shape, like numpy.broadcast_to: a read-only view (stride 0 "
             "along stretched axes).",
     .eval = broadcast_to,
     .ns_per_element = 0.5,
     .grads = {"g", ""},
     .views = true},
    {.name = "window_view", .family = "shape", .params = {{"x"}, {"axis"}, {"w"}},
     .help = "Every window of w consecutive elements of x along `axis`, the window's axis "
             "appended last (numpy.lib.stride_tricks.sliding_window_view along one axis): a "
             "read-only view, no copy.",
     .eval = window_view,
     .ns_per_element = 0.5,
     .grads = {"window_view_grad(g, x, axis, w)", "", ""},
     .views = true},
    {.name = "window_view_grad", .family = "shape", .params = {{"g"}, {"x"}, {"axis"}, {"w"}},
     .help = "The cotangent of x in window_view(x, axis, w): each window's g added back at "
             "the elements it covers.",
     .eval = window_view_grad,
     .ns_per_element = 1.0,
     .grads = {"window_view(adjoint, axis, w)", "", "", ""}},
    {.name = "shape", .family = "shape", .params = {{"x"}},
     .help = "The shape of x as a tuple of ints (numpy.shape); () for scalars.",
     .eval = [](Args& a) -> Value {
       Array x = a.view(0);
       List out;
       for (int64_t d : x.shape()) out.push_back(Value(d));
       return Value::tuple(std::move(out));
     },
     .ns_per_element = 0.0,
     .grads = {""},
     .views = true},
    {.name = "ndim", .family = "shape", .params = {{"x"}},
     .help = "The number of dimensions of x (numpy.ndim).",
     .eval = [](Args& a) -> Value { return Value(int64_t{a.view(0).ndim()}); },
     .ns_per_element = 0.0,
     .grads = {""},
     .views = true},
    {.name = "size", .family = "shape", .params = {{"x"}},
     .help = "The number of elements of x (numpy.size).",
     .eval = [](Args& a) -> Value { return Value(a.view(0).size()); },
     .ns_per_element = 0.0,
     .grads = {""},
     .views = true},
    {.name = "atleast_1d", .family = "shape", .params = {{"x"}},
     .help = "x viewed with at least 1 dimension, like numpy.atleast_1d.",
     .eval = [](Args& a) -> Value { return at_least(a.view(0), 1); },
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))"},
     .views = true},
    {.name = "atleast_2d", .family = "shape", .params = {{"x"}},
     .help = "x viewed with at least 2 dimensions ((N,) becomes (1, N)), like "
             "numpy.atleast_2d.",
     .eval = [](Args& a) -> Value { return at_least(a.view(0), 2); },
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))"},
     .views = true},
    {.name = "atleast_3d", .family = "shape", .params = {{"x"}},
     .help = "x viewed with at least 3 dimensions ((N,) becomes (1, N, 1), (M, N) becomes "
             "(M, N, 1)), like numpy.atleast_3d.",
     .eval = [](Args& a) -> Value { return at_least(a.view(0), 3); },
     .ns_per_element = 0.0,
     .grads = {"reshape(g, shape(x))"},
     .views = true},
});

}  // namespace

}  // namespace tessera
