// Creation primitives (zeros, arange, eye, array, ...) and seeded random
// numbers. Random draws are keyed by (seed, stream) and element index, so the
// same program gives the same numbers for any number of threads.
#include "tessera/kernels/creation.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/random.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/primitives/random_key.hpp"
#include "tessera/primitives/random_stream.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

// Allocates an array with errors that name the op: ValueError for negative
// extents, MemoryError for shapes too big to hold.
Array allocate(DType dt, const Shape& shape, const char* op) {
  shape_size(shape, op);
  try {
    return Array(dt, shape);
  } catch (const MemoryError&) {
    throw MemoryError(error_message("[", op, "] cannot allocate an array of shape ",
                                    shape_str(shape), " and dtype ", dtype_name(dt)));
  }
}

Array filled(DType dt, const Shape& shape, double value, const char* op) {
  Array out = allocate(dt, shape, op);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    const T v = element_cast<T>(value);
    // In tiles: a large fill is a pass over memory like any other.
    parallel_for(out.size(), 0.2, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
  });
  return out;
}

Shape shape_arg(const Args& a, size_t i) {
  Shape s = a.int_list(i);
  shape_size(s, a.op());
  return s;
}

// The dtype NumPy gives a fill value: its own for arrays, the natural one for
// Python scalars.
DType value_dtype(const Value& v) { return v.is_array() ? v.as_array().dtype() : scalar_dtype(v); }

// full/full_like: `value` broadcast to `shape`, cast to `dt`.
Array full_of(const Args& a, size_t value_index, DType dt, const Shape& shape) {
  const Value& v = a[value_index];
  if (!v.is_numeric()) a.type_error(value_index, "a number or an array");
  Array fill = a.array(value_index).astype(dt);
  Shape common;
  if (!kernels::broadcast_shape_pair(fill.shape(), shape, common) || common != shape) {
    throw std::invalid_argument(error_message("[", a.op(), "] fill value of shape ",
                                              shape_str(fill.shape()),
                                              " cannot be broadcast to shape ", shape_str(shape)));
  }
  shape_size(shape, a.op());
  if (fill.size() == 1) return filled(dt, shape, fill.get_double(0), a.op());
  return kernels::gather_view(fill, kernels::broadcast_layout(fill, shape), &parallel_for);
}

bool is_integral_scalar(const Value& v) {
  if (v.is_int() || v.is_bool()) return true;
  return v.is_array() && v.as_array().size() == 1 && !is_floating(v.as_array().dtype());
}

Value arange(Args& a) {
  const char* op = a.op();
  Value start_v = a[0], stop_v = a[1];
  if (stop_v.is_nil()) {
    stop_v = start_v;
    start_v = Value(int64_t{0});
  }
  auto dt = a.opt_dtype(3);
  bool all_int = is_integral_scalar(start_v) && is_integral_scalar(stop_v) && is_integral_scalar(a[2]);
  // Validate every argument as a number, with the parameter's name in errors.
  double start = a[1].is_nil() ? 0.0 : a.number(0);
  double stop = a[1].is_nil() ? a.number(0) : a.number(1);
  double step = a.number(2);
  if (step == 0) throw std::invalid_argument(error_message("[", op, "] step must not be zero"));
  if (all_int && (!dt || *dt == DType::int64)) {
    int64_t s0 = a[1].is_nil() ? 0 : a.integer(0);
    int64_t s1 = a[1].is_nil() ? a.integer(0) : a.integer(1);
    int64_t st = a.integer(2);
    __int128 d = static_cast<__int128>(s1) - s0;
    __int128 n = 0;
    if (st > 0 && d > 0) n = (d + st - 1) / st;
    if (st < 0 && d < 0) n = (-d + (-static_cast<__int128>(st)) - 1) / -static_cast<__int128>(st);
    Array out = allocate(DType::int64, {static_cast<int64_t>(n)}, op);
    kernels::arange_int_fill(out, s0, st);
    return out;
  }
  double len = std::ceil((stop - start) / step);
  if (!std::isfinite(len)) {
    throw std::invalid_argument(error_message("[", op, "] cannot compute the length of arange(",
                                              start, ", ", stop, ", ", step,
                                              "): values must be finite"));
  }
  if (len > 1e18) {
    throw MemoryError(error_message("[", op, "] array is too big: ", len, " elements"));
  }
  int64_t n = len > 0 ? static_cast<int64_t>(len) : 0;
  Array out = allocate(dt.value_or(DType::float64), {n}, op);
  parallel_for(n, 1.0,
               [&](int64_t b, int64_t e) { kernels::arange_fill_range(out, start, step, b, e); });
  return out;
}

Value linspace(Args& a) {
  double start = a.number(0), stop = a.number(1);
  int64_t num = a.integer(2);
  if (num < 0) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] number of samples must be non-negative, got ", num));
  }
  Array out = allocate(a.dtype(4, DType::float64), {num}, a.op());
  kernels::linspace_fill(out, start, stop, a.boolean(3));
  return out;
}

// Keeps a diagonal offset within [-rows, cols]: beyond that no element is
// selected either way, and the kernels' index arithmetic cannot overflow.
int64_t clamp_offset(int64_t k, int64_t rows, int64_t cols) {
  return std::clamp<int64_t>(k, -rows - 1, cols + 1);
}

Value eye(Args& a) {
  int64_t n = a.integer(0);
  int64_t m = a.is_nil(1) ? n : a.integer(1);
  DType dt = a.dtype(3, DType::float64);
  shape_size({n, m}, a.op());
  Array out = allocate(dt, {n, m}, a.op());
  return kernels::eye_array(n, m, clamp_offset(a.integer(2), n, m), dt);
}

Value array_of(Args& a) {
  const Value& v = a[0];
  if (!v.is_numeric() && !v.is_list()) a.type_error(0, "a number, an array or a nested list");
  Array arr = a.array(0);
  auto dt = a.opt_dtype(1);
  if (dt && *dt != arr.dtype()) return arr.astype(*dt);
  return v.is_array() ? arr.copy() : arr;
}

Value diag(Args& a) {
  Array v = a.array(0);
  int64_t k = a.integer(1);
  if (v.ndim() == 1) {
    if (k > (int64_t{1} << 40) || k < -(int64_t{1} << 40)) {
      throw MemoryError(error_message("[", a.op(), "] array is too big: diagonal offset ", k));
    }
    int64_t n = v.size() + (k < 0 ? -k : k);
    allocate(v.dtype(), {n, n}, a.op());
    return kernels::diag_from_vector(v, k);
  }
  if (v.ndim() == 2) return kernels::diag_of_matrix(v, clamp_offset(k, v.dim(0), v.dim(1)));
  throw std::invalid_argument(
      error_message("[", a.op(), "] input must be 1-d or 2-d, got shape ", shape_str(v.shape())));
}

Value triangle(Args& a, bool lower) {
  Array m = a.array(0);
  if (m.ndim() == 0) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] input must be at least 1-d, got a 0-d array"));
  }
  if (m.ndim() == 1) {
    Shape sq{m.dim(0), m.dim(0)};
    m = kernels::gather_view(m, kernels::broadcast_layout(m, sq), &parallel_for);
  }
  int nd = m.ndim();
  return kernels::triangle_array(m, clamp_offset(a.integer(1), m.dim(nd - 2), m.dim(nd - 1)),
                                 lower);
}

Value tri(Args& a) {
  int64_t n = a.integer(0);
  int64_t m = a.is_nil(1) ? n : a.integer(1);
  DType dt = a.dtype(3, DType::float64);
  Array ones = filled(dt, {n, m}, 1.0, a.op());
  return kernels::triangle_array(ones, clamp_offset(a.integer(2), n, m), true);
}

Value meshgrid(Args& a) {
  const std::string& indexing = a.string(1);
  if (indexing != "xy" && indexing != "ij") {
    a.value_error(1, error_message("must be 'xy' or 'ij', got '", indexing, "'"));
  }
  std::vector<Array> xs;
  if (a[0].is_list()) {
    for (const Value& v : a.list(0)) {
      if (!v.is_numeric()) a.type_error(0, "a list of arrays");
      xs.push_back(to_array(v, a.op(), "argument 'xs'"));
    }
  } else {
    xs.push_back(a.array(0));
  }
  const size_t n = xs.size();
  Shape shape;
  for (const Array& x : xs) shape.push_back(x.size());
  bool swap = indexing == "xy" && n >= 2;
  if (swap) std::swap(shape[0], shape[1]);
  shape_size(shape, a.op());
  List out;
  for (size_t i = 0; i < n; ++i) {
    size_t pos = swap && i < 2 ? 1 - i : i;
    kernels::StridedLayout l{shape, std::vector<int64_t>(n, 0), 0};
    l.strides[pos] = 1;
    out.push_back(kernels::gather_view(xs[i], l, &parallel_for));
  }
  return Value::tuple(std::move(out));
}

// Global seed and stream counter of the draws that give no seed: a program
// run twice from the same set_seed makes the same sequence of draws.
std::atomic<uint64_t> g_seed{0};
std::atomic<uint64_t> g_stream{0};

// Stream numbers carry the op in their top byte, so random_uniform and
// random_normal with one explicit seed are still independent.
enum RandomOp : uint64_t { kUniform = 1, kNormal = 2, kIntegers = 3, kPermutation = 4 };

kernels::RandomKey random_key(const Args& a, size_t seed_index, RandomOp op) {
  uint64_t tag = static_cast<uint64_t>(op) << 56;
  if (!a.is_nil(seed_index)) {
    int64_t seed = a.integer(seed_index);
    if (seed < 0) a.value_error(seed_index, error_message("must be non-negative, got ", seed));
    return {static_cast<uint64_t>(seed), tag};
  }
  uint64_t stream = g_stream.fetch_add(1) & ((uint64_t{1} << 56) - 1);
  return {g_seed.load(), tag | stream};
}

}  // namespace

static_assert(kUniform == 1, "uniform_stream_at (random_stream.hpp) tags draws with 1");

kernels::RandomKey next_uniform_key() {
  return {g_seed.load(), uniform_stream_at(g_stream.fetch_add(1))};
}

uint64_t reserve_random_stream(uint64_t count, uint64_t& seed) {
  const uint64_t first = g_stream.fetch_add(count);
  seed = g_seed.load();
  return first;
}

uint64_t random_stream_position() { return g_stream.load(); }

bool rewind_random_stream(uint64_t now, uint64_t to) {
  return g_stream.compare_exchange_strong(now, to);
}

namespace {

DType float_dtype(const Args& a, size_t i) {
  DType dt = a.dtype(i, DType::float64);
  if (!is_floating(dt)) {
    a.value_error(i, error_message("must be 'float32' or 'float64', got '", dtype_name(dt), "'"));
  }
  return dt;
}

Value random_uniform(Args& a) {
  Shape shape = shape_arg(a, 0);
  double low = a.number(1), high = a.number(2);
  if (!std::isfinite(low) || !std::isfinite(high)) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] low and high must be finite, got ", low, " and ", high));
  }
  DType dt = float_dtype(a, 4);
  kernels::RandomKey key = random_key(a, 3, kUniform);
  Array out = allocate(dt, shape, a.op());
  parallel_for(out.size(), 6.0, [&](int64_t b, int64_t e) {
    kernels::uniform_fill_range(out, key, low, high, b, e);
  });
  return out;
}

Value random_normal(Args& a) {
  Shape shape = shape_arg(a, 0);
  double mean = a.number(1), std = a.number(2);
  if (!(std >= 0)) a.value_error(2, error_message("must be non-negative, got ", std));
  DType dt = float_dtype(a, 4);
  kernels::RandomKey key = random_key(a, 3, kNormal);
  Array out = allocate(dt, shape, a.op());
  parallel_for(out.size(), 25.0, [&](int64_t b, int64_t e) {
    kernels::normal_fill_range(out, key, mean, std, b, e);
  });
  return out;
}

Value random_integers(Args& a) {
  int64_t low = a.integer(0), high = a.integer(1);
  if (high <= low) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] high must be greater than low: low=", low, ", high=", high));
  }
  Shape shape = a.is_nil(2) ? Shape{} : shape_arg(a, 2);
  kernels::RandomKey key = random_key(a, 3, kIntegers);
  Array out = allocate(DType::int64, shape, a.op());
  parallel_for(out.size(), 8.0, [&](int64_t b, int64_t e) {
    kernels::integers_fill_range(out, key, low, high, b, e);
  });
  return out;
}

// Rows of `x` (along axis 0) in the order `perm`.
Array permute_rows(const Array& x, const std::vector<int64_t>& perm) {
  const int64_t row = x.dim(0) == 0 ? 0 : x.size() / x.dim(0);
  const size_t bytes = static_cast<size_t>(row) * dtype_size(x.dtype());
  Array out(x.dtype(), x.shape());
  for (size_t i = 0; i < perm.size(); ++i) {
    std::memcpy(static_cast<char*>(out.raw()) + i * bytes,
                static_cast<const char*>(x.raw()) + perm[i] * bytes, bytes);
  }
  return out;
}

Value permutation(Args& a, bool allow_int) {
  if (allow_int && (a[0].is_int() || a[0].is_bool())) {
    int64_t n = a.integer(0);
    if (n < 0) a.value_error(0, error_message("must be non-negative, got ", n));
    Array out = allocate(DType::int64, {n}, a.op());
    std::vector<int64_t> perm = kernels::random_permutation(n, random_key(a, 1, kPermutation));
    std::copy(perm.begin(), perm.end(), out.data<int64_t>());
    return out;
  }
  Array x = a.array(0);
  if (x.ndim() == 0) {
    a.value_error(0, allow_int ? "must be an integer or an array of at least 1 dimension"
                               : "must be an array of at least 1 dimension, got a 0-d array");
  }
  return permute_rows(x, kernels::random_permutation(x.dim(0), random_key(a, 1, kPermutation)));
}

const bool registered_creation = register_primitives({
    {.name = "zeros",
     .family = "creation",
     .params = {{"shape"}, opt("dtype", "float64")},
     .help = "An array of the given shape filled with zeros, like numpy.zeros. The shape is an "
             "int or a list of ints.",
     .eval = [](Args& a) -> Value {
       return filled(a.dtype(1, DType::float64), shape_arg(a, 0), 0.0, a.op());
     },
     .ns_per_element = 0.2,
     .grads = {"", ""}},
    {.name = "ones",
     .family = "creation",
     .params = {{"shape"}, opt("dtype", "float64")},
     .help = "An array of the given shape filled with ones, like numpy.ones.",
     .eval = [](Args& a) -> Value {
       return filled(a.dtype(1, DType::float64), shape_arg(a, 0), 1.0, a.op());
     },
     .ns_per_element = 0.2,
     .grads = {"", ""}},
    {.name = "empty",
     .family = "creation",
     .params = {{"shape"}, opt("dtype", "float64")},
     .help = "An array of the given shape, like numpy.empty, except that it is zero-filled so "
             "no stale memory is ever visible.",
     .eval = [](Args& a) -> Value {
       return filled(a.dtype(1, DType::float64), shape_arg(a, 0), 0.0, a.op());
     },
     .ns_per_element = 0.2,
     .grads = {"", ""}},
    {.name = "full",
     .family = "creation",
     .params = {{"shape"}, {"fill_value"}, opt("dtype", Value())},
     .help = "An array of the given shape filled with fill_value (broadcast), like numpy.full. "
             "The dtype defaults to fill_value's (int64 for ints, float64 for floats).",
     .eval = [](Args& a) -> Value {
       Shape shape = shape_arg(a, 0);
       return full_of(a, 1, a.dtype(2, value_dtype(a[1])), shape);
     },
     .ns_per_element = 0.2,
     .grads = {"", "", ""}},
    {.name = "zeros_like",
     .family = "creation",
     .params = {{"x"}, opt("dtype", Value())},
     .help = "Zeros with the shape and dtype of x (dtype may be overridden), like "
             "numpy.zeros_like.",
     .eval = [](Args& a) -> Value {
       const Array x = a.view(0);  // its shape and dtype: a view is not packed for them
       return filled(a.dtype(1, x.dtype()), x.shape(), 0.0, a.op());
     },
     .ns_per_element = 0.2,
     .grads = {"", ""},
     .strided = true},
    {.name = "ones_like",
     .family = "creation",
     .params = {{"x"}, opt("dtype", Value())},
     .help = "Ones with the shape and dtype of x, like numpy.ones_like.",
     .eval = [](Args& a) -> Value {
       Array x = a.array(0);
       return filled(a.dtype(1, x.dtype()), x.shape(), 1.0, a.op());
     },
     .ns_per_element = 0.2,
     .grads = {"", ""}},
    {.name = "empty_like",
     .family = "creation",
     .params = {{"x"}, opt("dtype", Value())},
     .help = "A zero-filled array with the shape and dtype of x, like numpy.empty_like.",
     .eval = [](Args& a) -> Value {
       const Array x = a.view(0);  // its shape and dtype: a view is not packed for them
       return filled(a.dtype(1, x.dtype()), x.shape(), 0.0, a.op());
     },
     .ns_per_element = 0.2,
     .grads = {"", ""},
     .strided = true},
    {.name = "full_like",
     .family = "creation",
     .params = {{"x"}, {"fill_value"}, opt("dtype", Value())},
     .help = "An array with the shape and dtype of x filled with fill_value, like "
             "numpy.full_like.",
     .eval = [](Args& a) -> Value {
       Array x = a.array(0);
       return full_of(a, 1, a.dtype(2, x.dtype()), x.shape());
     },
     .ns_per_element = 0.2,
     .grads = {"", "", ""}},
    {.name = "arange",
     .family = "creation",
     .params = {{"start"}, opt("stop", Value()), opt("step", int64_t{1}), opt("dtype", Value())},
     .help = "Evenly spaced values in [start, stop) by step, like numpy.arange; arange(n) counts "
             "from 0. Integer arguments give int64, otherwise float64; step 0 is an error.",
     .eval = arange,
     .ns_per_element = 1.0,
     .grads = {"", "", "", ""}},
    {.name = "linspace",
     .family = "creation",
     .params = {{"start"},
                {"stop"},
                opt("num", int64_t{50}),
                opt("endpoint", true),
                opt("dtype", Value())},
     .help = "num evenly spaced samples from start to stop (stop included when endpoint), like "
             "numpy.linspace.",
     .eval = linspace,
     .ns_per_element = 1.0,
     .grads = {"", "", "", "", ""}},
    {.name = "eye",
     .family = "creation",
     .params = {{"n"}, opt("m", Value()), opt("k", int64_t{0}), opt("dtype", "float64")},
     .help = "An n x m matrix with ones on diagonal k and zeros elsewhere, like numpy.eye.",
     .eval = eye,
     .ns_per_element = 0.3,
     .grads = {"", "", "", ""}},
    {.name = "identity",
     .family = "creation",
     .params = {{"n"}, opt("dtype", "float64")},
     .help = "The n x n identity matrix, like numpy.identity.",
     .eval = [](Args& a) -> Value {
       int64_t n = a.integer(0);
       DType dt = a.dtype(1, DType::float64);
       allocate(dt, {n, n}, a.op());
       return kernels::eye_array(n, n, 0, dt);
     },
     .ns_per_element = 0.3,
     .grads = {"", ""}},
    {.name = "array",
     .family = "creation",
     .params = {{"object"}, opt("dtype", Value())},
     .help = "An array from a number, an array (copied) or a nested list, like numpy.array. "
             "Ragged nested lists are an error.",
     .eval = array_of,
     .ns_per_element = 1.0,
     .grads = {"g", ""}},
    {.name = "asarray",
     .family = "creation",
     .params = {{"object"}, opt("dtype", Value())},
     .help = "x itself when it is an array of the dtype asked for (nil: any), as numpy.asarray "
             "gives it (writes through the result reach x); otherwise array(object, dtype).",
     .eval = [](Args& a) -> Value {
       if (a[0].is_array() &&
           (a.is_nil(1) || a.dtype(1, a[0].as_array().dtype()) == a[0].as_array().dtype())) {
         return a[0];
       }
       return array_of(a);
     },
     .ns_per_element = 1.0,
     .grads = {"g", ""},
     .views = true},
    {.name = "ascontiguousarray",
     .family = "creation",
     .params = {{"object"}, opt("dtype", Value())},
     .help = "Like asarray, but a strided view comes back as a C-contiguous copy, as "
             "numpy.ascontiguousarray gives it.",
     .eval = [](Args& a) -> Value {
       if (a[0].is_array() && a[0].as_array().is_contiguous() &&
           (a.is_nil(1) || a.dtype(1, a[0].as_array().dtype()) == a[0].as_array().dtype())) {
         return a[0];
       }
       if (a[0].is_array() && a.is_nil(1)) return a[0].as_array().copy();
       return array_of(a);
     },
     .ns_per_element = 1.0,
     .grads = {"g", ""},
     .views = true},
    {.name = "copy",
     .family = "creation",
     .params = {{"x"}},
     .help = "A copy of x with its own buffer, like numpy.copy.",
     .eval = [](Args& a) -> Value { return a.array(0).copy(); },
     .ns_per_element = 0.3,
     .grads = {"g"}},
    {.name = "stop_gradient",
     .family = "creation",
     .params = {{"x"}},
     .help = "x unchanged in value, but no gradient flows through it (its cotangent is "
             "dropped), like keras.ops.stop_gradient and jax.lax.stop_gradient.",
     .eval = [](Args& a) -> Value { return a.array(0).copy(); },
     .ns_per_element = 0.3,
     .grads = {""}},
    {.name = "diag",
     .family = "creation",
     .params = {{"v"}, opt("k", int64_t{0})},
     .help = "For 1-d v a square matrix with v on diagonal k; for 2-d v a copy of its diagonal "
             "k, like numpy.diag.",
     .eval = diag,
     .ns_per_element = 0.5},
    {.name = "tri",
     .family = "creation",
     .params = {{"n"}, opt("m", Value()), opt("k", int64_t{0}), opt("dtype", "float64")},
     .help = "An n x m matrix with ones at and below diagonal k, like numpy.tri.",
     .eval = tri,
     .ns_per_element = 0.5,
     .grads = {"", "", "", ""}},
    {.name = "tril",
     .family = "creation",
     .params = {{"m"}, opt("k", int64_t{0})},
     .help = "A copy of m with elements above diagonal k of the last two axes zeroed, like "
             "numpy.tril.",
     .eval = [](Args& a) -> Value { return triangle(a, true); },
     .ns_per_element = 0.5,
     .grads = {"tril(g, k)", ""}},
    {.name = "triu",
     .family = "creation",
     .params = {{"m"}, opt("k", int64_t{0})},
     .help = "A copy of m with elements below diagonal k of the last two axes zeroed, like "
             "numpy.triu.",
     .eval = [](Args& a) -> Value { return triangle(a, false); },
     .ns_per_element = 0.5,
     .grads = {"triu(g, k)", ""}},
    {.name = "meshgrid",
     .family = "creation",
     .params = {{"xs"}, opt("indexing", "xy")},
     .help = "Coordinate matrices from a list of 1-d coordinate arrays, like "
             "numpy.meshgrid(*xs, indexing=...). Returns a tuple of arrays.",
     .eval = meshgrid,
     .ns_per_element = 0.5},
    {.name = "set_seed",
     .family = "random",
     .params = {{"seed"}},
     .help = "Sets the global seed of draws made without a seed and restarts their stream "
             "counter, so what follows is reproducible. Returns nil.",
     .eval = [](Args& a) -> Value {
       int64_t seed = a.integer(0);
       if (seed < 0) a.value_error(0, error_message("must be non-negative, got ", seed));
       g_seed.store(static_cast<uint64_t>(seed));
       g_stream.store(0);
       return Value();
     },
     .ns_per_element = 1.0,
     .grads = {""}},
    {.name = "random_uniform",
     .family = "random",
     .params = {{"shape"},
                opt("low", 0.0),
                opt("high", 1.0),
                opt("seed", Value()),
                opt("dtype", "float64")},
     .help = "Uniform samples in [low, high), like numpy's Generator.uniform. A given seed "
             "makes the draw reproducible; element i never depends on the thread count.",
     .eval = random_uniform,
     .ns_per_element = 6.0,
     .grads = {"", "", "", "", ""}},
    {.name = "random_normal",
     .family = "random",
     .params = {{"shape"},
                opt("mean", 0.0),
                opt("std", 1.0),
                opt("seed", Value()),
                opt("dtype", "float64")},
     .help = "Normal samples with the given mean and standard deviation, like numpy's "
             "Generator.normal (Box-Muller on a counter-based stream).",
     .eval = random_normal,
     .ns_per_element = 25.0,
     .grads = {"", "", "", "", ""}},
    {.name = "random_integers",
     .family = "random",
     .params = {{"low"}, {"high"}, opt("shape", Value()), opt("seed", Value())},
     .help = "Uniform int64 samples in [low, high), like numpy's Generator.integers; "
             "shape nil gives a 0-d array.",
     .eval = random_integers,
     .ns_per_element = 8.0,
     .grads = {"", "", "", ""}},
    {.name = "permutation",
     .family = "random",
     .params = {{"x"}, opt("seed", Value())},
     .help = "A random permutation of arange(x) for an int x, or a copy of array x with its "
             "first axis shuffled, like numpy's Generator.permutation.",
     .eval = [](Args& a) -> Value { return permutation(a, true); },
     .ns_per_element = 10.0,
     .grads = {"", ""}},
    {.name = "shuffle",
     .family = "random",
     .params = {{"x"}, opt("seed", Value())},
     .help = "A copy of x with its first axis shuffled (numpy's Generator.shuffle, but "
             "returning a new array instead of shuffling in place).",
     .eval = [](Args& a) -> Value { return permutation(a, false); },
     .ns_per_element = 10.0,
     .grads = {"", ""}},
});

}  // namespace

kernels::RandomKey random_draw_key(const Args& a, size_t seed_index, const char* distribution) {
  std::string d = distribution;
  RandomOp op = d == "normal" ? kNormal : d == "integers" ? kIntegers : kUniform;
  return random_key(a, seed_index, op);
}

}  // namespace tessera
