// Sorting and searching: sort, argsort, unique, searchsorted, nonzero,
// argwhere, flatnonzero, bincount.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/sort.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

// Rough cost per element of a sort, in nanoseconds.
constexpr double kSortNs = 30.0;

// The array to sort and the (outer, n, inner) view of its axis: axis nil
// sorts the flattened array, as NumPy does.
struct SortView {
  Array x;
  int64_t lanes = 0, n = 0, inner = 1;
};

SortView sort_view(const Args& a) {
  SortView v;
  v.x = a.array(0);
  int axis = 0;
  if (a.is_nil(1)) {
    v.x = v.x.reshaped({v.x.size()});
  } else {
    axis = normalize_axis(a.integer(1), v.x.ndim(), a.op());
  }
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= v.x.dim(d);
  for (int d = axis + 1; d < v.x.ndim(); ++d) v.inner *= v.x.dim(d);
  v.n = v.x.dim(axis);
  v.lanes = outer * v.inner;
  return v;
}

Value eval_sort(Args& a, bool arg) {
  SortView v = sort_view(a);
  Array out(arg ? DType::int64 : v.x.dtype(), v.x.shape());
  if (out.size() == 0) return out;
  double lane_ns = kSortNs * static_cast<double>(v.n);
  parallel_for(v.lanes, lane_ns, [&](int64_t b, int64_t e) {
    if (arg) {
      kernels::argsort_lanes(v.x, out, v.n, v.inner, b, e);
    } else {
      kernels::sort_lanes(v.x, out, v.n, v.inner, b, e);
    }
  });
  return out;
}

Value eval_unique(Args& a) {
  Array x = a.array(0);
  bool want_index = a.boolean(1), want_inverse = a.boolean(2), want_counts = a.boolean(3);
  kernels::UniqueResult r = kernels::unique(x, want_index, want_inverse, want_counts);
  if (!want_index && !want_inverse && !want_counts) return r.values;
  List out{Value(r.values)};
  if (want_index) out.push_back(r.index);
  if (want_inverse) out.push_back(r.inverse);
  if (want_counts) out.push_back(r.counts);
  return Value::tuple(std::move(out));
}

Value eval_searchsorted(Args& a) {
  Array sorted = a.array(0);
  Array v = a.array(1);
  if (sorted.ndim() != 1) {
    throw std::invalid_argument(error_message("[searchsorted] argument 'a' must be 1-d: got shape ",
                                              shape_str(sorted.shape())));
  }
  const std::string& side = a.string(2);
  if (side != "left" && side != "right") {
    a.value_error(2, "must be 'left' or 'right': got '" + side + "'");
  }
  // Compare in the common type, as numpy.searchsorted: the value is made an
  // array first, so a Python number counts as its own dtype (not weakly, as
  // in arithmetic): a float32 array searched for 0.1 compares in float64.
  DType dt = promote(sorted.dtype(), v.dtype());
  sorted = sorted.astype(dt);
  v = v.astype(dt);
  Array out(DType::int64, v.shape());
  double ns = 5.0 * std::log2(static_cast<double>(sorted.size()) + 2.0);
  parallel_for(v.size(), ns, [&](int64_t b, int64_t e) {
    kernels::searchsorted_range(sorted, v, side == "right", out, b, e);
  });
  return out;
}

Value eval_nonzero(Args& a) {
  Array x = a.array(0);
  if (x.ndim() == 0) {
    throw std::invalid_argument(
        "[nonzero] nonzero of a 0-d array is not allowed (reshape it to 1-d first): got " +
        Value(x).describe());
  }
  List out;
  for (Array& idx : kernels::nonzero(x)) out.push_back(idx);
  // A tuple, as NumPy's: x[nonzero(m)] is a multi-dimensional index.
  return Value::tuple(std::move(out));
}

Value eval_bincount(Args& a) {
  Array x = a.array(0);
  if (x.ndim() != 1) {
    throw std::invalid_argument(error_message("[bincount] argument 'x' must be 1-d: got shape ",
                                              shape_str(x.shape())));
  }
  if (is_floating(x.dtype())) {
    a.type_error(0, "an array of non-negative integers");
  }
  x = x.astype(DType::int64);
  int64_t minlength = a.integer(2);
  if (minlength < 0) {
    a.value_error(2, error_message("must not be negative: got ", minlength));
  }
  // The smallest and largest in one pass (a loop the compiler vectorises);
  // the first negative element is looked for only when there is one.
  const int64_t* px = x.data<int64_t>();
  const int64_t n = x.size();
  int64_t top = -1, low = 0;
  for (int64_t i = 0; i < n; ++i) {
    top = std::max(top, px[i]);
    low = std::min(low, px[i]);
  }
  if (low < 0) {
    for (int64_t i = 0; i < n; ++i) {
      if (px[i] < 0) {
        a.value_error(0, error_message("must have no negative elements: got ", px[i],
                                       " at index ", i));
      }
    }
  }
  if (top == std::numeric_limits<int64_t>::max()) {
    throw MemoryError(error_message("[bincount] too many bins: largest value ", top));
  }
  int64_t length = std::max(top + 1, minlength);
  if (a.is_nil(1)) return kernels::bincount(x, nullptr, length);
  Array w = a.array(1);
  if (w.shape() != x.shape()) {
    throw std::invalid_argument(error_message(
        "[bincount] weights and x must have the same length: shapes ", shape_str(w.shape()),
        " and ", shape_str(x.shape())));
  }
  w = w.astype(DType::float64);
  return kernels::bincount(x, &w, length);
}


// isin(element, test_elements, invert): membership by binary search in the
// sorted test values; ints compare exactly, anything with a float as float64.
Value eval_isin(Args& a) {
  Array x = a.array(0);
  Array t = a.array(1);
  bool invert = a.boolean(3);
  Array out(DType::bool_, x.shape());
  bool* po = out.data<bool>();
  auto run = [&](auto zero) {
    using T = decltype(zero);
    DType dt = std::is_same_v<T, double> ? DType::float64 : DType::int64;
    Array xs = x.astype(dt), ts = t.astype(dt);
    std::vector<T> sorted;
    for (int64_t i = 0; i < ts.size(); ++i) {
      T v = ts.data<T>()[i];
      if constexpr (std::is_same_v<T, double>) {
        if (std::isnan(v)) continue;  // NaN equals nothing
      }
      sorted.push_back(v);
    }
    std::sort(sorted.begin(), sorted.end());
    const T* px = xs.data<T>();
    for (int64_t i = 0; i < xs.size(); ++i) {
      bool found = std::binary_search(sorted.begin(), sorted.end(), px[i]);
      if constexpr (std::is_same_v<T, double>) found = found && !std::isnan(px[i]);
      po[i] = found != invert;
    }
  };
  if (is_floating(x.dtype()) || is_floating(t.dtype())) {
    run(0.0);
  } else {
    run(int64_t{0});
  }
  return out;
}

const bool registered_sorting = register_primitives({
    {.name = "isin",
     .family = "sorting",
     .params = {{"element"}, {"test_elements"}, opt("assume_unique", false), opt("invert", false)},
     .help = "True where an element of `element` is in `test_elements` (any shape), like "
             "numpy.isin; invert=true gives the complement. The result has element's shape; "
             "NaN is in nothing.",
     .eval = eval_isin,
     .ns_per_element = 20.0,
     .grads = {"", "", "", ""}},
    {.name = "sort",
     .family = "sorting",
     .params = {{"x"}, opt("axis", -1)},
     .help = "Sorted copy along an axis (nil = flattened), like numpy.sort(kind='stable'); "
             "NaNs sort last.",
     .eval = [](Args& a) -> Value { return eval_sort(a, false); },
     .ns_per_element = kSortNs,
     .grads = {"sort_grad(g, x, axis)", ""}},
    {.name = "argsort",
     .family = "sorting",
     .params = {{"x"}, opt("axis", -1)},
     .help = "Indices that sort x along an axis (nil = flattened), like "
             "numpy.argsort(kind='stable'): equal elements keep their order, NaNs go last.",
     .eval = [](Args& a) -> Value { return eval_sort(a, true); },
     .ns_per_element = kSortNs,
     .grads = {"", ""}},
    {.name = "unique",
     .family = "sorting",
     .params = {{"x"},
                opt("return_index", false),
                opt("return_inverse", false),
                opt("return_counts", false)},
     .help = "Sorted distinct elements of the flattened x, like numpy.unique (NaNs count as "
             "one value). With return_* flags the result is the tuple (values, index, "
             "inverse, counts) holding the requested parts.",
     .eval = [](Args& a) -> Value { return eval_unique(a); },
     .ns_per_element = kSortNs,
     .grads = {"", "", "", ""}},
    {.name = "searchsorted",
     .family = "sorting",
     .params = {{"a"}, {"v"}, opt("side", "left")},
     .help = "Positions where the elements of v would be inserted into the sorted 1-d a to "
             "keep it sorted, like numpy.searchsorted; side 'left' goes before equal "
             "elements, 'right' after.",
     .eval = [](Args& a) -> Value { return eval_searchsorted(a); },
     .ns_per_element = 50.0,
     .grads = {"", "", ""}},
    {.name = "nonzero",
     .family = "sorting",
     .params = {{"x"}},
     .help = "Indices of the nonzero elements as a tuple of int64 arrays, one per dimension, "
             "like numpy.nonzero. 0-d input is a ValueError.",
     .eval = [](Args& a) -> Value { return eval_nonzero(a); },
     .ns_per_element = 2.0,
     .grads = {""}},
    {.name = "argwhere",
     .family = "sorting",
     .params = {{"x"}},
     .help = "Indices of the nonzero elements as an (N, ndim) int64 array, like "
             "numpy.argwhere.",
     .eval = [](Args& a) -> Value { return kernels::argwhere(a.array(0)); },
     .ns_per_element = 2.0,
     .grads = {""}},
    {.name = "flatnonzero",
     .family = "sorting",
     .params = {{"x"}},
     .help = "Flat indices of the nonzero elements (1-d int64), like numpy.flatnonzero.",
     .eval = [](Args& a) -> Value { return kernels::flatnonzero(a.array(0)); },
     .ns_per_element = 2.0,
     .grads = {""}},
    {.name = "bincount",
     .family = "sorting",
     .params = {{"x"}, opt("weights", Value()), opt("minlength", 0)},
     .help = "Occurrences of each value of a 1-d array of non-negative ints (or the sums of "
             "weights per value, float64), like numpy.bincount; at least minlength bins.",
     .eval = [](Args& a) -> Value { return eval_bincount(a); },
     .ns_per_element = 2.0,
     .grads = {"", "", ""}},
});

}  // namespace

}  // namespace tessera
