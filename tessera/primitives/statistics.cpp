// Reductions and statistics: sum, prod, mean, var, std, min, max, argmin,
// argmax, all, any, cumsum, cumprod, logsumexp, ptp, median, count_nonzero,
// nansum, nanmean, average.
//
// Large reductions run in parallel over output elements, and a long lane has
// the leaves of its fixed reduction tree computed in parallel, so results are
// bitwise identical for any number of threads.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/reduce.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"
#include "tessera/runtime/scheduler.hpp"

namespace tessera {

namespace {

using kernels::ReduceKind;
using kernels::ReduceOptions;

// Rough cost of one input element of a reduction, in nanoseconds.
constexpr double kReduceNs = 0.5;

// Evaluates the leaves of a long lane in parallel through the runtime.
const kernels::LeafRunner kParallelLeaves = [](int64_t count,
                                               const std::function<void(int64_t, int64_t)>& body) {
  parallel_for(count, kReduceNs * static_cast<double>(kernels::kLeafSize), body);
};

// Runs a reduction of x over `axes` into an array of `out_dtype`.
Array run_reduce(ReduceKind kind, const Array& x, const std::vector<int>& axes, bool keepdims,
                 DType out_dtype, const ReduceOptions& opts = {}, double ns = kReduceNs) {
  kernels::ReducePlan plan = kernels::make_reduce_plan(x.shape(), axes, keepdims);
  Array out(out_dtype, plan.out_shape);
  if (plan.outer == 0) return out;
  double lane_ns = ns * static_cast<double>(std::max<int64_t>(plan.inner, 1));
  parallel_for(plan.outer, lane_ns, [&](int64_t b, int64_t e) {
    kernels::reduce_range(kind, x, plan, out, b, e, opts, &kParallelLeaves);
  });
  return out;
}

// Reductions without an identity refuse empty lanes, with NumPy's message.
void check_nonempty(const Args& a, const Array& x, const std::vector<int>& axes) {
  int64_t inner = 1;
  for (int ax : axes) inner *= x.dim(ax);
  if (inner != 0) return;
  std::string op = a.op();
  if (op == "argmin" || op == "argmax") {
    throw std::invalid_argument(error_message(
        "[", op, "] attempt to get ", op, " of an empty sequence: shape ", shape_str(x.shape())));
  }
  throw std::invalid_argument(error_message("[", op, "] zero-size array to reduction operation ",
                                            op, " which has no identity: shape ",
                                            shape_str(x.shape())));
}

// sum, prod, nansum: (x, axis, keepdims, dtype).
Value eval_sum_like(Args& a, ReduceKind kind) {
  Array x = a.array(0);
  auto axes = reduction_axes(a, 1, x.ndim());
  DType out = a.dtype(3, kernels::reduce_result_dtype(kind, x.dtype()));
  return run_reduce(kind, x, axes, a.boolean(2), out);
}

// mean, nanmean: (x, axis, keepdims, dtype).
Value eval_mean_like(Args& a, ReduceKind kind) {
  Array x = a.array(0);
  auto axes = reduction_axes(a, 1, x.ndim());
  DType out = a.dtype(3, kernels::reduce_result_dtype(kind, x.dtype()));
  return run_reduce(kind, x, axes, a.boolean(2), out);
}

// var, std: (x, axis, ddof, keepdims, dtype); a float dtype converts x first,
// so the arithmetic happens in it as in NumPy.
Value eval_var(Args& a, bool sqrt) {
  Array x = a.array(0);
  if (auto dt = a.opt_dtype(4)) {
    if (!is_floating(*dt)) a.type_error(4, "a float dtype ('float32' or 'float64') or nil");
    x = x.astype(*dt);
  }
  auto axes = reduction_axes(a, 1, x.ndim());
  ReduceOptions opts{a.number(2), sqrt};
  return run_reduce(ReduceKind::var, x, axes, a.boolean(3),
                    kernels::reduce_result_dtype(ReduceKind::var, x.dtype()), opts, 2 * kReduceNs);
}

// Reductions taking (x, axis, keepdims) with the default result dtype.
Value eval_plain(Args& a, ReduceKind kind, bool needs_elements, double ns = kReduceNs) {
  Array x = a.array(0);
  auto axes = reduction_axes(a, 1, x.ndim());
  if (needs_elements) check_nonempty(a, x, axes);
  return run_reduce(kind, x, axes, a.boolean(2), kernels::reduce_result_dtype(kind, x.dtype()), {},
                    ns);
}

// argmin, argmax: (x, axis, keepdims); axis is nil (flat index) or one int.
Value eval_arg(Args& a, ReduceKind kind) {
  Array x = a.array(0);
  std::vector<int> axes;
  if (auto ax = a.opt_integer(1)) {
    axes.push_back(normalize_axis(*ax, x.ndim(), a.op()));
  } else {
    // A full reduction walks the whole array as one C-order lane, so the
    // lane position is the flat index.
    for (int d = 0; d < x.ndim(); ++d) axes.push_back(d);
  }
  check_nonempty(a, x, axes);
  return run_reduce(kind, x, axes, a.boolean(2), DType::int64);
}

// cumsum, cumprod: (x, axis, dtype); axis nil scans the flattened array.
Value eval_scan(Args& a, bool product) {
  Array x = a.array(0);
  DType def = is_floating(x.dtype()) ? x.dtype() : DType::int64;
  DType out_dtype = a.dtype(2, def);
  int axis = 0;
  if (a.is_nil(1)) {
    x = x.reshaped({x.size()});
  } else {
    axis = normalize_axis(a.integer(1), x.ndim(), a.op());
  }
  Array src = x.astype(out_dtype);
  Array out(out_dtype, x.shape());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int d = axis + 1; d < x.ndim(); ++d) inner *= x.dim(d);
  const int64_t n = x.dim(axis);
  if (out.size() == 0) return out;
  if (outer < 4 * static_cast<int64_t>(num_threads()) && inner >= 1024) {
    // Few outer blocks (cumsum(x, axis=0) of a matrix): the positions along
    // the inner axes are independent, so they are split instead.
    parallel_for(outer * inner, static_cast<double>(n), [&](int64_t b, int64_t e) {
      for (int64_t ob = b / inner; ob * inner < e; ++ob) {
        const int64_t j0 = std::max(b, ob * inner) - ob * inner;
        const int64_t j1 = std::min(e, (ob + 1) * inner) - ob * inner;
        kernels::scan_columns(product, src, out, n, inner, ob, j0, j1);
      }
    });
    return out;
  }
  parallel_for(outer, static_cast<double>(n * inner), [&](int64_t b, int64_t e) {
    kernels::scan_range(product, src, out, n, inner, b, e);
  });
  return out;
}

Value eval_ptp(Args& a) {
  Array x = a.array(0);
  if (x.dtype() == DType::bool_) {
    throw TypeError(
        error_message("[ptp] bool arrays are not supported (booleans cannot be "
                      "subtracted): got ",
                      Value(x).describe()));
  }
  return eval_plain(a, ReduceKind::ptp, true);
}

// Broadcasts weights for average: same shape as x, or 1-d along a single axis.
Array expand_weights(const Args& a, const Array& x, const Array& w) {
  if (w.shape() == x.shape()) return w;
  if (a.is_nil(1)) {
    throw TypeError(error_message(
        "[average] axis must be specified when shapes of x and weights differ: shapes ",
        shape_str(x.shape()), " and ", shape_str(w.shape())));
  }
  auto given = a.axes(1);
  if (given->size() != 1 || w.ndim() != 1) {
    throw TypeError(error_message(
        "[average] 1-d weights along one axis expected when shapes of x and weights differ: "
        "shapes ",
        shape_str(x.shape()), " and ", shape_str(w.shape()), " with axis ", a[1].str()));
  }
  int axis = normalize_axis((*given)[0], x.ndim(), "average");
  if (w.dim(0) != x.dim(axis)) {
    throw std::invalid_argument(error_message(
        "[average] length of weights not compatible with the axis: weights of shape ",
        shape_str(w.shape()), " for axis ", axis, " of shape ", shape_str(x.shape())));
  }
  int64_t inner = 1;
  for (int d = axis + 1; d < x.ndim(); ++d) inner *= x.dim(d);
  Array full(w.dtype(), x.shape());
  const int64_t n = x.dim(axis);
  dispatch(w.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = w.data<T>();
    T* dst = full.data<T>();
    for (int64_t i = 0; i < full.size(); ++i) dst[i] = src[(i / inner) % n];
  });
  return full;
}

// average(x, axis, weights, keepdims): sum(x * w) / sum(w) over the axes.
Value eval_average(Args& a) {
  Array x = a.array(0);
  auto axes = reduction_axes(a, 1, x.ndim());
  bool keepdims = a.boolean(3);
  if (a.is_nil(2)) {
    return run_reduce(ReduceKind::mean, x, axes, keepdims,
                      kernels::reduce_result_dtype(ReduceKind::mean, x.dtype()));
  }
  Array w = a.array(2);
  DType dt = promote(x.dtype(), w.dtype());
  if (!is_floating(dt)) dt = DType::float64;
  Array wf = expand_weights(a, x, w).astype(dt);
  Array xf = x.astype(dt);
  Array prod(dt, x.shape());
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* px = xf.data<T>();
      const T* pw = wf.data<T>();
      T* dst = prod.data<T>();
      for (int64_t i = 0; i < prod.size(); ++i) dst[i] = px[i] * pw[i];
    }
  });
  Array num = run_reduce(ReduceKind::sum, prod, axes, keepdims, dt);
  Array den = run_reduce(ReduceKind::sum, wf, axes, keepdims, dt);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* pn = num.data<T>();
      const T* pd = den.data<T>();
      for (int64_t i = 0; i < num.size(); ++i) {
        if (pd[i] == T(0)) {
          throw std::invalid_argument(
              "[average] weights sum to zero, can't be normalized: weights of shape " +
              shape_str(w.shape()));
        }
        pn[i] /= pd[i];
      }
    }
  });
  return num;
}

std::vector<Param> axis_keepdims() { return {{"x"}, opt("axis", Value()), opt("keepdims", false)}; }

std::vector<Param> axis_keepdims_dtype() {
  return {{"x"}, opt("axis", Value()), opt("keepdims", false), opt("dtype", Value())};
}

std::vector<Param> var_params() {
  return {
      {"x"}, opt("axis", Value()), opt("ddof", 0), opt("keepdims", false), opt("dtype", Value())};
}

// The cotangent of max/min: shared equally by the elements that tie for the
// extreme (as PyTorch's amax/amin share it), so the cotangents of a lane add
// up to g; a single extreme takes all of g.
constexpr const char* kExtremeGrad =
    "reduce_grad(g, x, axis, keepdims) * (x == reduce_grad(out, x, axis, keepdims)) / "
    "reduce_grad(sum(x == reduce_grad(out, x, axis, keepdims), axis=axis, keepdims=keepdims), "
    "x, axis, keepdims)";

PrimitiveSpec extreme_spec(const char* name, bool is_max, const char* numpy) {
  ReduceKind kind = is_max ? ReduceKind::max : ReduceKind::min;
  return {.name = name,
          .family = "statistics",
          .params = axis_keepdims(),
          .help = std::string(is_max ? "Maximum" : "Minimum") +
                  " over the given axes (nil = all), like " + numpy +
                  "; NaN propagates. An empty reduction is a ValueError.",
          .eval = [kind](Args& a) -> Value { return eval_plain(a, kind, true); },
          .ns_per_element = kReduceNs};
}

const bool registered_statistics = register_primitives({
    {.name = "sum",
     .family = "statistics",
     .params = axis_keepdims_dtype(),
     .help = "Sum over the given axes (nil = all), like numpy.sum, with pairwise summation. "
             "Bool and int sum to int64; float32 stays float32 unless dtype is given.",
     .eval = [](Args& a) -> Value { return eval_sum_like(a, ReduceKind::sum); },
     .ns_per_element = kReduceNs,
     .grads = {"reduce_grad(g, x, axis, keepdims)", "", "", ""}},
    {.name = "prod",
     .family = "statistics",
     .params = axis_keepdims_dtype(),
     .help = "Product over the given axes (nil = all), like numpy.prod. Bool and int "
             "multiply in int64 (wrapping on overflow).",
     .eval = [](Args& a) -> Value { return eval_sum_like(a, ReduceKind::prod); },
     .ns_per_element = kReduceNs,
     .grads = {"prod_grad(g, x, axis, keepdims)", "", "", ""}},
    {.name = "nansum",
     .family = "statistics",
     .params = axis_keepdims_dtype(),
     .help = "Sum treating NaN as zero, like numpy.nansum.",
     .eval = [](Args& a) -> Value { return eval_sum_like(a, ReduceKind::nansum); },
     .ns_per_element = kReduceNs},
    {.name = "mean",
     .family = "statistics",
     .params = axis_keepdims_dtype(),
     .help = "Arithmetic mean over the given axes, like numpy.mean. Bool and int give "
             "float64; the mean of an empty reduction is NaN.",
     .eval = [](Args& a) -> Value { return eval_mean_like(a, ReduceKind::mean); },
     .ns_per_element = kReduceNs,
     .grads = {"reduce_grad(g, x, axis, keepdims) * (size(out) / size(x))", "", "", ""}},
    {.name = "nanmean",
     .family = "statistics",
     .params = axis_keepdims_dtype(),
     .help = "Mean ignoring NaNs, like numpy.nanmean; all-NaN slices give NaN.",
     .eval = [](Args& a) -> Value { return eval_mean_like(a, ReduceKind::nanmean); },
     .ns_per_element = 2 * kReduceNs},
    {.name = "var",
     .family = "statistics",
     .params = var_params(),
     .help = "Variance mean(|x - mean(x)|^2) * n / (n - ddof), like numpy.var (two passes); a "
             "float dtype is the dtype of the arithmetic and the result.",
     .eval = [](Args& a) -> Value { return eval_var(a, false); },
     .ns_per_element = 2 * kReduceNs,
     .grads = {"reduce_grad(g, x, axis, keepdims) * 2.0 * (x - mean(x, axis=axis, keepdims=true)) "
               "/ (size(x) / size(out) - ddof)",
               "", "", "", ""}},
    {.name = "std",
     .family = "statistics",
     .params = var_params(),
     .help = "Standard deviation, the square root of var, like numpy.std (dtype as for var).",
     .eval = [](Args& a) -> Value { return eval_var(a, true); },
     .ns_per_element = 2 * kReduceNs,
     .grads = {"reduce_grad(g / out, x, axis, keepdims) * (x - mean(x, axis=axis, keepdims=true)) "
               "/ (size(x) / size(out) - ddof)",
               "", "", "", ""}},
    with_grads(extreme_spec("min", false, "numpy.min"), {kExtremeGrad, "", ""}),
    with_grads(extreme_spec("amin", false, "numpy.amin"), {kExtremeGrad, "", ""}),
    with_grads(extreme_spec("max", true, "numpy.max"), {kExtremeGrad, "", ""}),
    with_grads(extreme_spec("amax", true, "numpy.amax"), {kExtremeGrad, "", ""}),
    {.name = "ptp",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Peak to peak (max - min) over the given axes, like numpy.ptp. Bool arrays are "
             "a TypeError, empty reductions a ValueError.",
     .eval = [](Args& a) -> Value { return eval_ptp(a); },
     .ns_per_element = 2 * kReduceNs},
    {.name = "argmin",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Index of the first minimum along one axis (nil = flat index), like "
             "numpy.argmin; the first NaN wins.",
     .eval = [](Args& a) -> Value { return eval_arg(a, ReduceKind::argmin); },
     .ns_per_element = kReduceNs,
     .grads = {"", "", ""}},
    {.name = "argmax",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Index of the first maximum along one axis (nil = flat index), like "
             "numpy.argmax; the first NaN wins.",
     .eval = [](Args& a) -> Value { return eval_arg(a, ReduceKind::argmax); },
     .ns_per_element = kReduceNs,
     .grads = {"", "", ""}},
    {.name = "all",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "True where every element over the axes is nonzero, like numpy.all (true "
             "for empty).",
     .eval = [](Args& a) -> Value { return eval_plain(a, ReduceKind::all, false); },
     .ns_per_element = kReduceNs,
     .grads = {"", "", ""}},
    {.name = "any",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "True where some element over the axes is nonzero, like numpy.any (false "
             "for empty).",
     .eval = [](Args& a) -> Value { return eval_plain(a, ReduceKind::any, false); },
     .ns_per_element = kReduceNs,
     .grads = {"", "", ""}},
    {.name = "count_nonzero",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Number of nonzero elements over the axes as int64, like numpy.count_nonzero.",
     .eval = [](Args& a) -> Value { return eval_plain(a, ReduceKind::count_nonzero, false); },
     .ns_per_element = kReduceNs,
     .grads = {"", "", ""}},
    {.name = "logsumexp",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "log(sum(exp(x))) over the axes computed stably (shifted by the maximum), like "
             "scipy.special.logsumexp. Ints give float64.",
     .eval = [](Args& a) -> Value { return eval_plain(a, ReduceKind::logsumexp, false, 10.0); },
     .ns_per_element = 10.0,
     .grads = {"reduce_grad(g, x, axis, keepdims) * exp(x - reduce_grad(out, x, axis, keepdims))",
               "", ""}},
    {.name = "median",
     .family = "statistics",
     .params = axis_keepdims(),
     .help = "Median over the axes, like numpy.median: mean of the two middle values for "
             "even counts, NaN if any NaN or empty.",
     .eval = [](Args& a) -> Value { return eval_plain(a, ReduceKind::median, false, 10.0); },
     .ns_per_element = 10.0},
    {.name = "cumsum",
     .family = "statistics",
     .params = {{"x"}, opt("axis", Value()), opt("dtype", Value())},
     .help = "Cumulative sum along an axis (nil = the flattened array), like numpy.cumsum. "
             "Bool and int accumulate in int64.",
     .eval = [](Args& a) -> Value { return eval_scan(a, false); },
     .ns_per_element = 1.0,
     .grads = {"cumsum_grad(g, x, axis)", "", ""}},
    {.name = "cumprod",
     .family = "statistics",
     .params = {{"x"}, opt("axis", Value()), opt("dtype", Value())},
     .help = "Cumulative product along an axis (nil = the flattened array), like "
             "numpy.cumprod.",
     .eval = [](Args& a) -> Value { return eval_scan(a, true); },
     .ns_per_element = 1.0,
     .grads = {"cumprod_grad(g, x, axis)", "", ""}},
    {.name = "average",
     .family = "statistics",
     .params = {{"x"}, opt("axis", Value()), opt("weights", Value()), opt("keepdims", false)},
     .help = "Weighted average sum(x * w) / sum(w) over the axes, like numpy.average; "
             "weights have x's shape or are 1-d along a single axis.",
     .eval = [](Args& a) -> Value { return eval_average(a); },
     .ns_per_element = 2.0},
});

}  // namespace

}  // namespace tessera
