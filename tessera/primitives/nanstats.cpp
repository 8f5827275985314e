// Quantiles and the NaN-ignoring reductions: percentile, quantile,
// nanpercentile, nanquantile, nanmedian, nanprod, nanvar, nanstd, nanmin,
// nanmax, nanargmin, nanargmax, nancumsum.
//
// Each works on lanes: the reduced axes are gathered into one contiguous row
// per output element (in C order of the reduced axes, so a full reduction's
// lane position is the flat index), and the rows are processed in parallel.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// x's elements as float64 rows: one row per combination of the kept axes,
// each row the reduced axes in C order.
struct Lanes {
  std::vector<double> data;
  int64_t outer = 1;  // number of rows
  int64_t inner = 1;  // row length
  Shape out_shape;    // the kept axes (1 in reduced positions when keepdims)
};

Lanes gather_lanes(const Array& x, const std::vector<int>& axes, bool keepdims) {
  Lanes l;
  const int nd = x.ndim();
  std::vector<bool> reduced(nd, false);
  for (int ax : axes) reduced[ax] = true;
  std::vector<int> order;
  for (int d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      order.push_back(d);
      l.outer *= x.dim(d);
      l.out_shape.push_back(x.dim(d));
    } else if (keepdims) {
      l.out_shape.push_back(1);
    }
  }
  for (int d : axes) {
    order.push_back(d);
    l.inner *= x.dim(d);
  }
  std::vector<int64_t> stride(nd, 1);
  for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * x.dim(d + 1);
  l.data.resize(static_cast<size_t>(x.size()));
  Array xd = x.astype(DType::float64);
  const double* src = xd.data<double>();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    l.data[i] = src[off];
    for (int k = nd - 1; k >= 0; --k) {
      int d = order[k];
      off += stride[d];
      if (++idx[d] < x.dim(d)) break;
      off -= stride[d] * x.dim(d);
      idx[d] = 0;
    }
  }
  return l;
}

// The float dtype NumPy gives these functions: float32 stays, the rest float64.
DType float_result(DType dt) { return dt == DType::float32 ? DType::float32 : DType::float64; }

void reject_bool(const Args& a, const Array& x) {
  if (x.dtype() == DType::bool_) {
    throw TypeError(error_message("[", a.op(), "] bool arrays are not supported (booleans "
                                  "cannot be subtracted): got ",
                                  Value(x).describe()));
  }
}

// One value per row, written into an array of `dtype` with the kept shape.
Array reduce_rows(const Lanes& l, DType dtype, double ns,
                  const std::function<double(const double*, int64_t)>& fn) {
  Array out(dtype, l.out_shape);
  std::vector<double> res(static_cast<size_t>(l.outer));
  parallel_for(l.outer, ns * static_cast<double>(std::max<int64_t>(l.inner, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) res[r] = fn(l.data.data() + r * l.inner, l.inner);
               });
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (int64_t r = 0; r < l.outer; ++r) p[r] = static_cast<T>(res[r]);
  });
  return out;
}

// NumPy's 'linear' quantile of sorted values v[0..n): the virtual index
// q * (n - 1) interpolated between its neighbours, with NumPy's two-sided
// lerp (from below for t < 0.5, from above otherwise).
double linear_quantile(const double* v, int64_t n, double q) {
  double virt = q * static_cast<double>(n - 1);
  double lo_f = std::floor(virt);
  int64_t lo = std::clamp<int64_t>(static_cast<int64_t>(lo_f), 0, n - 1);
  int64_t hi = std::min<int64_t>(lo + 1, n - 1);
  double t = virt - lo_f;
  double a = v[lo], b = v[hi];
  double diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

// percentile / quantile and their nan versions: (x, q, axis, keepdims).
Value eval_quantile(Args& a, double scale, bool skip_nan) {
  Array x = a.array(0);
  reject_bool(a, x);
  Array q = a.array(1).astype(DType::float64);
  std::vector<double> qs(static_cast<size_t>(q.size()));
  for (int64_t i = 0; i < q.size(); ++i) {
    double v = q.data<double>()[i];
    if (!(v >= 0.0 && v <= scale)) {
      throw std::invalid_argument(error_message(
          "[", a.op(), "] ", scale == 100.0 ? "percentiles" : "quantiles",
          " must be in the range [0, ", scale == 100.0 ? "100" : "1", "]: got ", a[1].str()));
    }
    qs[i] = scale == 100.0 ? v / 100.0 : v;
  }
  auto axes = reduction_axes(a, 2, x.ndim());
  Lanes l = gather_lanes(x, axes, a.boolean(3));
  if (l.inner == 0 && l.outer > 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] cannot take a quantile of an "
                                              "empty lane: shape ",
                                              shape_str(x.shape())));
  }
  // Each row sorted once, NaNs last (they are either the answer or skipped).
  parallel_for(l.outer, 10.0 * static_cast<double>(std::max<int64_t>(l.inner, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   double* row = l.data.data() + r * l.inner;
                   std::stable_partition(row, row + l.inner,
                                         [](double v) { return !std::isnan(v); });
                   int64_t n = std::count_if(row, row + l.inner,
                                             [](double v) { return !std::isnan(v); });
                   std::sort(row, row + n);
                 }
               });
  // NumPy's promotion: a Python number q keeps float32, an array q (float64
  // or int) promotes it.
  DType out_dtype = float_result(x.dtype());
  if (!a[1].is_scalar() && a.array(1).dtype() != DType::float32) out_dtype = DType::float64;
  Shape shape = q.shape();
  shape.insert(shape.end(), l.out_shape.begin(), l.out_shape.end());
  Array out(out_dtype, shape);
  const int64_t nq = static_cast<int64_t>(qs.size());
  dispatch(out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (int64_t r = 0; r < l.outer; ++r) {
      const double* row = l.data.data() + r * l.inner;
      int64_t n = l.inner;
      bool has_nan = n > 0 && std::isnan(row[n - 1]);
      if (has_nan) n = std::count_if(row, row + l.inner, [](double v) { return !std::isnan(v); });
      for (int64_t k = 0; k < nq; ++k) {
        double v;
        if ((has_nan && !skip_nan) || n == 0) {
          v = kNan;
        } else {
          v = linear_quantile(row, n, qs[k]);
        }
        p[k * l.outer + r] = static_cast<T>(v);
      }
    }
  });
  return out;
}

bool is_float(const Array& x) { return is_floating(x.dtype()); }

// The plain reduction for non-float arrays (which hold no NaN).
Value plain(Args& a, const char* name, size_t n_params) {
  std::vector<Value> args;
  for (size_t i = 0; i < n_params; ++i) args.push_back(a[i]);
  return call_primitive(name, std::move(args));
}

// nanprod(x, axis, keepdims, dtype)
Value eval_nanprod(Args& a) {
  Array x = a.array(0);
  if (!is_float(x)) return plain(a, "prod", 4);
  auto axes = reduction_axes(a, 1, x.ndim());
  Lanes l = gather_lanes(x, axes, a.boolean(2));
  return reduce_rows(l, a.dtype(3, x.dtype()), 1.0, [](const double* v, int64_t n) {
    double p = 1.0;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isnan(v[i])) p *= v[i];
    }
    return p;
  });
}

// nanvar / nanstd (x, axis, ddof, keepdims, dtype): over the non-NaN values;
// fewer than ddof + 1 of them give NaN (NumPy warns and gives NaN).
Value eval_nanvar(Args& a, bool take_sqrt) {
  Array x = a.array(0);
  reject_bool(a, x);
  auto axes = reduction_axes(a, 1, x.ndim());
  double ddof = a.number(2);
  Lanes l = gather_lanes(x, axes, a.boolean(3));
  DType out = a.dtype(4, float_result(x.dtype()));
  return reduce_rows(l, out, 3.0, [ddof, take_sqrt](const double* v, int64_t n) {
    double s = 0.0;
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isnan(v[i])) s += v[i], ++c;
    }
    if (static_cast<double>(c) - ddof <= 0.0) return kNan;
    double m = s / static_cast<double>(c), ss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isnan(v[i])) ss += (v[i] - m) * (v[i] - m);
    }
    double var = ss / (static_cast<double>(c) - ddof);
    return take_sqrt ? std::sqrt(var) : var;
  });
}

void check_lanes_nonempty(const Args& a, const Array& x, const Lanes& l) {
  if (l.inner == 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] zero-size array to reduction "
                                              "operation which has no identity: shape ",
                                              shape_str(x.shape())));
  }
}

// nanmin / nanmax (x, axis, keepdims): an all-NaN lane gives NaN.
Value eval_nanextreme(Args& a, bool is_max) {
  Array x = a.array(0);
  if (!is_float(x)) return plain(a, is_max ? "max" : "min", 3);
  auto axes = reduction_axes(a, 1, x.ndim());
  Lanes l = gather_lanes(x, axes, a.boolean(2));
  check_lanes_nonempty(a, x, l);
  return reduce_rows(l, x.dtype(), 0.5, [is_max](const double* v, int64_t n) {
    double best = kNan;
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(v[i])) continue;
      if (std::isnan(best) || (is_max ? v[i] > best : v[i] < best)) best = v[i];
    }
    return best;
  });
}

// nanargmin / nanargmax (x, axis, keepdims): axis nil gives the flat index;
// an all-NaN lane is a ValueError, as in NumPy.
Value eval_nanarg(Args& a, bool is_max) {
  Array x = a.array(0);
  if (!is_float(x)) return plain(a, is_max ? "argmax" : "argmin", 3);
  std::vector<int> axes;
  if (auto ax = a.opt_integer(1)) {
    axes.push_back(normalize_axis(*ax, x.ndim(), a.op()));
  } else {
    for (int d = 0; d < x.ndim(); ++d) axes.push_back(d);
  }
  Lanes l = gather_lanes(x, axes, a.boolean(2));
  if (l.inner == 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] attempt to get ", a.op(),
                                              " of an empty sequence: shape ",
                                              shape_str(x.shape())));
  }
  std::atomic<bool> all_nan{false};
  Array out = reduce_rows(l, DType::int64, 0.5, [&all_nan, is_max](const double* v, int64_t n) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(v[i])) continue;
      if (best < 0 || (is_max ? v[i] > v[best] : v[i] < v[best])) best = i;
    }
    if (best < 0) all_nan = true;
    return static_cast<double>(best);
  });
  if (all_nan) {
    throw std::invalid_argument(error_message("[", a.op(), "] All-NaN slice encountered: ",
                                              Value(x).describe()));
  }
  return out;
}

// nancumsum (x, axis, dtype): NaNs count as zero.
Value eval_nancumsum(Args& a) {
  Array x = a.array(0);
  Value src = a[0];
  if (is_float(x)) {
    Array z = x.copy();
    dispatch(z.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>) {
        T* p = z.data<T>();
        for (int64_t i = 0; i < z.size(); ++i) {
          if (std::isnan(p[i])) p[i] = T(0);
        }
      }
    });
    src = z;
  }
  return call_primitive("cumsum", std::vector<CallArg>{{"", src}, {"axis", a[1]}, {"dtype", a[2]}});
}

std::vector<Param> q_params() {
  return {{"x"}, {"q"}, opt("axis", Value()), opt("keepdims", false)};
}

std::vector<Param> axis_keepdims() { return {{"x"}, opt("axis", Value()), opt("keepdims", false)}; }

const char* kQuantileHelp =
    " with NumPy's default method 'linear' (the virtual index q * (n - 1) interpolated "
    "between its neighbours). q is a number or an array of them; the result has q's shape "
    "followed by the reduced shape. Ints give float64, float32 stays float32.";

const bool registered_nanstats = register_primitives({
    {.name = "percentile",
     .family = "statistics",
     .params = q_params(),
     .help = std::string("The q-th percentiles (q in [0, 100]) over the axes, like "
                         "numpy.percentile,") + kQuantileHelp + " A NaN in a lane gives NaN.",
     .eval = [](Args& a) -> Value { return eval_quantile(a, 100.0, false); },
     .ns_per_element = 10.0},
    {.name = "quantile",
     .family = "statistics",
     .params = q_params(),
     .help = std::string("The q-th quantiles (q in [0, 1]) over the axes, like "
                         "numpy.quantile,") + kQuantileHelp + " A NaN in a lane gives NaN.",
     .eval = [](Args& a) -> Value { return eval_quantile(a, 1.0, false); },
     .ns_per_element = 10.0},
    {.name = "nanpercentile",
     .family = "statistics",
     .params = q_params(),
     .help = std::string("percentile ignoring NaNs, like numpy.nanpercentile,") +
             kQuantileHelp + " An all-NaN lane gives NaN.",
     .eval = [](Args& a) -> Value { return eval_quantile(a, 100.0, true); },
     .ns_per_element = 10.0},
    {.name = "nanquantile",
     .family = "statistics",
     .params = q_params(),
     .help = std::string("quantile ignoring NaNs, like numpy.nanquantile,") + kQuantileHelp +
             " An all-NaN lane gives NaN.",
     .eval = [](Args& a) -> Value { return eval_quantile(a, 1.0, true); },
     .ns_per_element = 10.0},
    {.name = "nanmedian",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Median ignoring NaNs, like numpy.nanmedian (an all-NaN lane gives NaN).",
     .eval = [](Args& a) -> Value {
       Value q = 0.5;
       Args b(*find_primitive("nanquantile"), {a[0], q, a[1], a[2]});
       return eval_quantile(b, 1.0, true);
     },
     .ns_per_element = 10.0},
    {.name = "nanprod",
     .family = "statistics",
     .params = {{"x"}, opt("axis", Value()), opt("keepdims", false), opt("dtype", Value())},
     .help = "Product treating NaN as one, like numpy.nanprod (ints: numpy.prod).",
     .eval = eval_nanprod,
     .ns_per_element = 1.0},
    {.name = "nanvar",
     .family = "statistics",
     .params = {{"x"}, opt("axis", Value()), opt("ddof", 0), opt("keepdims", false),
                opt("dtype", Value())},
     .help = "Variance of the non-NaN values, like numpy.nanvar; a lane with ddof or fewer "
             "of them gives NaN.",
     .eval = [](Args& a) -> Value { return eval_nanvar(a, false); },
     .ns_per_element = 3.0},
    {.name = "nanstd",
     .family = "statistics",
     .params = {{"x"}, opt("axis", Value()), opt("ddof", 0), opt("keepdims", false),
                opt("dtype", Value())},
     .help = "Standard deviation of the non-NaN values, like numpy.nanstd.",
     .eval = [](Args& a) -> Value { return eval_nanvar(a, true); },
     .ns_per_element = 3.0},
    {.name = "nanmin",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Minimum ignoring NaNs, like numpy.nanmin; an all-NaN lane gives NaN, an empty "
             "one is a ValueError.",
     .eval = [](Args& a) -> Value { return eval_nanextreme(a, false); },
     .ns_per_element = 0.5},
    {.name = "nanmax",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Maximum ignoring NaNs, like numpy.nanmax; an all-NaN lane gives NaN, an empty "
             "one is a ValueError.",
     .eval = [](Args& a) -> Value { return eval_nanextreme(a, true); },
     .ns_per_element = 0.5},
    {.name = "nanargmin",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Index of the first minimum ignoring NaNs along one axis (nil = flat index), "
             "like numpy.nanargmin; an all-NaN lane is a ValueError.",
     .eval = [](Args& a) -> Value { return eval_nanarg(a, false); },
     .ns_per_element = 0.5,
     .grads = {"", "", ""}},
    {.name = "nanargmax",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Index of the first maximum ignoring NaNs along one axis (nil = flat index), "
             "like numpy.nanargmax; an all-NaN lane is a ValueError.",
     .eval = [](Args& a) -> Value { return eval_nanarg(a, true); },
     .ns_per_element = 0.5,
     .grads = {"", "", ""}},
    {.name = "nancumsum",
     .family = "statistics",
     .params = {{"x"}, opt("axis", Value()), opt("dtype", Value())},
     .help = "Cumulative sum treating NaN as zero, like numpy.nancumsum.",
     .eval = eval_nancumsum,
     .ns_per_element = 1.0},
});

}  // namespace

}  // namespace tessera
