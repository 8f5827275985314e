// NumPy's Generator API (np.random.default_rng) on tessera's counter-based
// random numbers: default_rng makes a generator, rng_random, rng_normal,
// rng_uniform, rng_integers, rng_standard_normal, rng_choice and
// rng_permutation draw from it (the translator maps rng.random(...) etc.).
//
// A generator is an int64 array [seed, draws]: like a NumPy Generator it is
// shared by reference, and each draw takes the seed mixed with the draw count
// and then counts itself, so the draws of a program are reproducible for a
// given seed and independent of the thread count. The values differ from
// NumPy's PCG64 stream; shapes, dtypes and ranges are NumPy's.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

// call_primitive with named arguments (brace lists of CallArg).
Value named_call(const char* name, std::vector<CallArg> args) {
  return call_primitive(name, std::move(args));
}

Array& generator_state(Args& a) {
  Value& v = a.at(0);
  if (!v.is_array() || v.as_array().dtype() != DType::int64 || v.as_array().ndim() != 1 ||
      v.as_array().size() != 2) {
    a.type_error(0, "a generator made by np.random.default_rng");
  }
  return v.as_array();
}

// The seed of the generator's next draw (non-negative, 63 bits); counts the draw.
int64_t next_seed(Args& a) {
  Array& st = generator_state(a);
  int64_t* p = st.data<int64_t>();
  uint64_t z = static_cast<uint64_t>(p[0]) + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(++p[1]);
  // splitmix64's finalizer: nearby (seed, draw) pairs give unrelated seeds.
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<int64_t>(z >> 1);
}

// NumPy's size: nil (one value), an int or a list of ints.
Value size_shape(const Args& a, size_t i) {
  List l;
  if (!a.is_nil(i)) {
    for (int64_t d : a.int_list(i)) l.push_back(Value(d));
  }
  return Value(std::move(l));
}

// size nil and array parameters: the draw has their broadcast shape.
Value draw_shape(const Args& a, size_t size_index, std::vector<size_t> params) {
  if (!a.is_nil(size_index)) return size_shape(a, size_index);
  std::vector<Shape> shapes{Shape{}};
  for (size_t i : params) {
    if (a[i].is_array()) shapes.push_back(a[i].as_array().shape());
  }
  List l;
  for (int64_t d : kernels::broadcast_shapes(shapes, a.op())) l.push_back(Value(d));
  return Value(std::move(l));
}

// Scalars come back as Python floats/ints (size=None), as NumPy does.
Value scalar_if_0d(Value v) {
  if (v.is_array() && v.as_array().ndim() == 0) {
    const Array& x = v.as_array();
    if (x.dtype() == DType::int64) return Value(x.get_int(0));
    if (x.dtype() == DType::float64) return Value(x.get_double(0));
  }
  return v;
}

Value default_rng(Args& a) {
  int64_t seed;
  if (a.is_nil(0)) {
    // No seed: the next draw of the global stream (set_seed) picks one.
    Value v = named_call("random_integers", {{"", Value(int64_t{0})},
                                       {"", Value(int64_t{1} << 62)}});
    seed = to_array(v, a.op()).get_int(0);
  } else {
    seed = a.integer(0);
    if (seed < 0) a.value_error(0, error_message("must be non-negative, got ", seed));
  }
  return Array::from_vector<int64_t>({seed, 0}, {2});
}

Value rng_random(Args& a) {
  int64_t seed = next_seed(a);
  DType dt = a.dtype(2, DType::float64);
  if (!is_floating(dt)) a.value_error(2, "must be 'float32' or 'float64'");
  return scalar_if_0d(named_call("random_uniform", {{"", size_shape(a, 1)}, {"seed", Value(seed)},
                                              {"dtype", a[2].is_nil() ? Value("float64") : a[2]}}));
}

Value rng_standard_normal(Args& a) {
  int64_t seed = next_seed(a);
  DType dt = a.dtype(2, DType::float64);
  if (!is_floating(dt)) a.value_error(2, "must be 'float32' or 'float64'");
  return scalar_if_0d(named_call("random_normal", {{"", size_shape(a, 1)}, {"seed", Value(seed)},
                                             {"dtype", a[2].is_nil() ? Value("float64") : a[2]}}));
}

// rng_normal(rng, loc, scale, size): loc + scale * z, broadcasting.
Value rng_normal(Args& a) {
  int64_t seed = next_seed(a);
  Array scale = a.array(2);
  for (int64_t i = 0; i < scale.size(); ++i) {
    if (scale.get_double(i) < 0) a.value_error(2, "must be non-negative (scale < 0)");
  }
  Value z = named_call("random_normal", {{"", draw_shape(a, 3, {1, 2})}, {"seed", Value(seed)}});
  Value r = named_call("add", {{"", a[1]}, {"", named_call("multiply", {{"", a[2]}, {"", z}})}});
  return scalar_if_0d(named_call("astype", {{"", r}, {"", Value("float64")}}));
}

// rng_uniform(rng, low, high, size): low + (high - low) * u.
Value rng_uniform(Args& a) {
  int64_t seed = next_seed(a);
  Value u = named_call("random_uniform", {{"", draw_shape(a, 3, {1, 2})}, {"seed", Value(seed)}});
  Value width = named_call("subtract", {{"", a[2]}, {"", a[1]}});
  Value r = named_call("add", {{"", a[1]}, {"", named_call("multiply", {{"", width}, {"", u}})}});
  return scalar_if_0d(named_call("astype", {{"", r}, {"", Value("float64")}}));
}

// rng_integers(rng, low, high, size, dtype, endpoint): [low, high) or
// [0, low) when high is nil; endpoint includes high.
Value rng_integers(Args& a) {
  int64_t seed = next_seed(a);
  int64_t low = a.integer(1), high;
  if (a.is_nil(2)) {
    high = low;
    low = 0;
  } else {
    high = a.integer(2);
  }
  if (a.boolean(5)) ++high;
  if (high <= low) {
    throw std::invalid_argument(error_message("[", a.op(), "] high <= low: low=", low, ", high=",
                                              a.boolean(5) ? high - 1 : high));
  }
  DType dt = a.dtype(4, DType::int64);
  if (dt != DType::int64) a.value_error(4, "must be 'int64' (tessera's integer dtype)");
  return scalar_if_0d(named_call("random_integers", {{"", Value(low)}, {"", Value(high)},
                                               {"shape", size_shape(a, 3)},
                                               {"seed", Value(seed)}}));
}

Value rng_permutation(Args& a) {
  int64_t seed = next_seed(a);
  return named_call("permutation", {{"", a[1]}, {"seed", Value(seed)}});
}

// rng_choice(rng, a, size, replace, p, axis, shuffle): samples of arange(a)
// (an int) or of a's rows along axis 0.
Value rng_choice(Args& a) {
  int64_t seed = next_seed(a);
  Value pool = a[1];
  int64_t n;
  if (pool.is_int() || pool.is_bool()) {
    n = a.integer(1);
    if (n <= 0) a.value_error(1, error_message("must be greater than 0 (a > 0), got ", n));
    pool = Value();
  } else {
    Array x = a.array(1);
    if (x.ndim() == 0) a.value_error(1, "must be 1-dimensional or an integer");
    if (a.integer(5) != 0) a.value_error(5, "must be 0 (other axes are not supported yet)");
    n = x.dim(0);
    if (n == 0) a.value_error(1, "cannot be empty unless no samples are taken");
  }
  Value shape = size_shape(a, 2);
  int64_t k = 1;
  for (const Value& d : shape.as_list()) k *= d.as_int();
  bool replace = a.boolean(3);
  Value idx;
  if (!a.is_nil(4)) {
    Array p = a.array(4).astype(DType::float64);
    if (p.ndim() != 1 || p.dim(0) != n) {
      a.value_error(4, error_message("must be 1-dimensional with the length of a (", n,
                                     "): got shape ", shape_str(p.shape())));
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double v = p.get_double(i);
      if (!(v >= 0.0)) a.value_error(4, "probabilities are not non-negative");
      total += v;
    }
    if (std::abs(total - 1.0) > 1e-8) a.value_error(4, "probabilities do not sum to 1");
    if (!replace) {
      // One weighted draw at a time from what is left (the chosen weight is
      // zeroed), each by walking the remaining cumulative weights.
      int64_t nonzero = 0;
      for (int64_t i = 0; i < n; ++i) nonzero += p.get_double(i) > 0.0;
      if (k > nonzero) {
        throw std::invalid_argument(error_message("[", a.op(), "] Fewer non-zero entries in p "
                                                  "than size: ", nonzero, " for ", k));
      }
      std::vector<double> w(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) w[i] = p.get_double(i);
      Array u = to_array(named_call("random_uniform", {{"", Value(int64_t{k})}, {"seed", Value(seed)}}),
                         a.op());
      Array picked(DType::int64, {k});
      for (int64_t j = 0; j < k; ++j) {
        double total = 0.0;
        for (double v : w) total += v;
        double target = u.get_double(j) * total, acc = 0.0;
        int64_t choice = -1;
        for (int64_t i = 0; i < n; ++i) {
          if (w[i] <= 0.0) continue;
          choice = i;  // the last positive weight catches rounding at the top
          acc += w[i];
          if (target < acc) break;
        }
        picked.data<int64_t>()[j] = choice;
        w[choice] = 0.0;
      }
      idx = named_call("reshape", {{"", picked}, {"", shape}});
      if (pool.is_nil()) return scalar_if_0d(idx);
      return named_call("getitem", {{"", pool}, {"", idx}});
    }
    // Inverse CDF: the first bin whose cumulative probability exceeds u.
    Value cdf = named_call("cumsum", {{"", p}});
    Value u = named_call("random_uniform", {{"", shape}, {"seed", Value(seed)}});
    idx = named_call("searchsorted", {{"", cdf}, {"", u}, {"side", Value("right")}});
    idx = named_call("minimum", {{"", idx}, {"", Value(n - 1)}});
  } else if (replace) {
    idx = named_call("random_integers", {{"", Value(int64_t{0})}, {"", Value(n)}, {"shape", shape},
                                   {"seed", Value(seed)}});
  } else {
    if (k > n) {
      throw std::invalid_argument(error_message("[", a.op(), "] cannot take a larger sample "
                                                "than population when replace is False: ",
                                                k, " from ", n));
    }
    Value perm = named_call("permutation", {{"", Value(n)}, {"seed", Value(seed)}});
    Value first = named_call("getitem", {{"", perm}, {"", Value(Slice{0, k, std::nullopt})}});
    idx = named_call("reshape", {{"", first}, {"", shape}});
  }
  if (pool.is_nil()) return scalar_if_0d(idx);
  return named_call("getitem", {{"", pool}, {"", idx}});
}

const bool registered_generator = register_primitives({
    {.name = "default_rng", .family = "random", .params = {opt("seed", Value())},
     .help = "A random generator, like numpy.random.default_rng(seed): draw from it with "
             "rng_random, rng_normal, ... (rng.random(...) in jit code). A generator is "
             "shared by reference; each draw mixes the seed with its draw count, so a "
             "seeded program is reproducible for any thread count. The values differ from "
             "NumPy's PCG64 stream; shapes, dtypes and ranges match. nil takes a seed from "
             "the global stream (set_seed).",
     .eval = default_rng,
     .ns_per_element = 10.0,
     .grads = {""}},
    {.name = "rng_random", .family = "random",
     .params = {{"rng"}, opt("size", Value()), opt("dtype", Value())},
     .help = "Uniform floats in [0, 1) from a generator, like Generator.random(size, dtype); "
             "size nil gives one float.",
     .eval = rng_random, .ns_per_element = 6.0},
    {.name = "rng_standard_normal", .family = "random",
     .params = {{"rng"}, opt("size", Value()), opt("dtype", Value())},
     .help = "Standard normal floats from a generator, like Generator.standard_normal.",
     .eval = rng_standard_normal, .ns_per_element = 25.0},
    {.name = "rng_normal", .family = "random",
     .params = {{"rng"}, opt("loc", 0.0), opt("scale", 1.0), opt("size", Value())},
     .help = "Normal floats loc + scale * z from a generator, like Generator.normal (loc and "
             "scale broadcast; size nil with scalar parameters gives one float). A negative "
             "scale is a ValueError.",
     .eval = rng_normal, .ns_per_element = 25.0},
    {.name = "rng_uniform", .family = "random",
     .params = {{"rng"}, opt("low", 0.0), opt("high", 1.0), opt("size", Value())},
     .help = "Uniform floats in [low, high) from a generator, like Generator.uniform.",
     .eval = rng_uniform, .ns_per_element = 6.0},
    {.name = "rng_integers", .family = "random",
     .params = {{"rng"}, {"low"}, opt("high", Value()), opt("size", Value()),
                opt("dtype", Value()), opt("endpoint", false)},
     .help = "int64 integers in [low, high) ([0, low) when high is nil; endpoint=true "
             "includes high) from a generator, like Generator.integers. high <= low is a "
             "ValueError.",
     .eval = rng_integers, .ns_per_element = 8.0},
    {.name = "rng_choice", .family = "random",
     .params = {{"rng"}, {"a"}, opt("size", Value()), opt("replace", true), opt("p", Value()),
                opt("axis", int64_t{0}), opt("shuffle", true)},
     .help = "Random samples of arange(a) (an int) or of a's first axis from a generator, "
             "like Generator.choice: with replacement, without (replace=false; a larger "
             "sample than the population is a ValueError), with probabilities p (which "
             "must be non-negative and sum to 1; without replacement each draw renormalizes what "
             "is left).",
     .eval = rng_choice, .ns_per_element = 10.0},
    {.name = "rng_permutation", .family = "random", .params = {{"rng"}, {"x"}},
     .help = "A random permutation of arange(x) (an int) or a copy of x with its first axis "
             "shuffled, from a generator, like Generator.permutation.",
     .eval = rng_permutation, .ns_per_element = 10.0},
});

}  // namespace

}  // namespace tessera
