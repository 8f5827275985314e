// Storage dtypes: how primitives written for the compute types (bool, int64,
// float32, float64, complex128) serve int8 ... uint64, float16, bfloat16 and
// complex64 arrays (dtype.hpp). Args converts the arguments to the compute
// type of NumPy's result dtype, the kernel runs, and run_primitive stores the
// result back in that dtype by the primitive's DTypeRule (registry.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/kernels/complex.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

using Names = std::set<std::string, std::less<>>;

// The tables are function-local statics: primitives register while other
// files' statics initialise, in no defined order.
// Results in the dtype of the operands (ufuncs, data movement).
const Names& kSame() {
  static const Names names = {"max",          "min",
                              "amax",         "amin",
                              "ptp",          "nanmax",
                              "nanmin",       "concatenate",
                              "dstack",       "hstack",
                              "vstack",       "stack",
                              "tile",         "repeat",
                              "flip",         "roll",
                              "pad",          "split",
                              "sort",         "unique",
                              "take",         "take_along_axis",
                              "index_update", "index_add", "copy",
                              "zeros_like",   "ones_like",
                              "full_like",    "empty_like",
                              "diag",         "tril",
                              "triu",         "array",
                              "dot",          "matmul",
                              "inner",        "outer",
                              "tensordot",    "kron",
                              "vdot",         "einsum",
                              "cross",        "permutation",
                              "rng_choice",   "rng_permutation",
                              "relu",         "sigmoid",
                              "softmax",      "log_softmax",
                              "attention",    "layer_norm",
                              "gelu",         "elu",
                              "leaky_relu",   "softplus",
                              "where",        "nan_to_num",
                              "clip",         "flatten",
                              "diff",         "matmul_tn",
                              "full"};
  return names;
}
const Names& kAccumulate() {
  static const Names names = {"sum",    "prod",    "cumsum",    "cumprod",
                              "nansum", "nanprod", "nancumsum", "trace"};
  return names;
}
const Names& kMean() {
  static const Names names = {"mean",          "average",  "std",         "var",       "nanmean",
                              "nanstd",        "nanvar",   "median",      "nanmedian", "percentile",
                              "nanpercentile", "quantile", "nanquantile", "logsumexp", "norm"};
  return names;
}
const Names& kRaw() {
  // copy_value (x.copy()) forwards arrays to the copy primitive, which
  // converts and stores back itself; getitem_grad likewise to zeros_like and
  // index_add.
  static const Names names = {
      "astype", "dtype_name", "itemsize", "iscomplexobj", "isrealobj", "item", "real", "imag",
      "print", "str", "repr", "format", "type", "len", "file_write_npy", "save", "shape", "ndim",
      "size", "copy_value", "getitem_grad",
      // ufunc.accumulate/reduce: the ops select elements or are logical, in
      // every dtype itself (ufunc_scan.cpp).
      "accumulate", "reduce_op", "at_op", "reduceat",
      // Python values only held or moved: a list keeps
      // its elements' dtypes (uint64 2**64 - 1 too).
      "append", "extend", "insert", "concat", "to_list", "to_tuple", "unpack", "get", "keys",
      "values", "items", "update", "pop", "reverse", "clear", "iterate"};
  return names;
}
// Exact on the int64 bits of uint64 values >= 2**63 (modular arithmetic and
// data movement).
const Names& kModular() {
  static const Names names = {
      "add",           "subtract",    "multiply",    "negative",    "positive",
      "bitwise_and",   "bitwise_or",  "bitwise_xor", "bitwise_not", "invert",
      "left_shift",    "equal",       "not_equal",   "sum",         "cumsum",
      "prod",          "cumprod",     "concatenate", "dstack",      "hstack",
      "vstack",        "stack",       "tile",        "repeat",      "flip",
      "roll",          "pad",         "split",       "take",        "take_along_axis",
      "index_update",  "index_add",   "copy",        "zeros_like",  "ones_like",   "full_like",
      "empty_like",    "diag",        "tril",        "triu",        "array",
      "where",         "flatten",     "permutation", "rng_choice",  "rng_permutation",
      "square",        "shape",       "ndim",        "size",        "len",
      "count_nonzero", "nonzero",     "flatnonzero", "argwhere",    "any",
      "all",           "logical_not", "logical_and", "logical_or",  "logical_xor",
      "trace"};
  return names;
}
// Primitives computing complex128 (the rest refuse complex arguments).
const Names& kComplex() {
  static const Names names = {
      "add",         "subtract",      "multiply",   "divide",       "negative",   "positive",
      "power",       "square",        "reciprocal", "abs",          "absolute",   "sqrt",
      "exp",         "log",           "sin",        "cos",          "tanh",       "equal",
      "not_equal",   "isfinite",      "isnan",      "isinf",        "sum",        "mean",
      "prod",        "cumsum",        "matmul",     "dot",          "vdot",       "inner",
      "outer",       "conj",          "conjugate",  "real",         "imag",       "angle",
      "concatenate", "stack",         "hstack",     "vstack",       "where",      "copy",
      "array",       "zeros_like",    "ones_like",  "full_like",    "empty_like", "flip",
      "tile",        "repeat",        "take",       "index_update", "index_add", "allclose",   "isclose",
      "array_equal", "trace",         "sign",       "diag",         "tril",       "triu",
      "roll",        "pad",           "flatten",    "split",        "einsum",     "tensordot",
      "kron",        "count_nonzero", "nonzero",    "any",          "all"};
  return names;
}

// Linear in their data arguments: run on the real and imaginary parts.
const Names& kLinear() {
  static const Names names = {
      "sum",   "mean",  "cumsum",      "trace",      "flip",         "tile",   "repeat",
      "roll",  "pad",   "diag",        "tril",       "triu",         "take",   "take_along_axis",
      "copy",  "array", "concatenate", "stack",      "hstack",       "vstack", "dstack",
      "where", "split", "flatten",     "zeros_like", "index_update", "index_add", "average"};
  return names;
}
// Bilinear in their two arguments: four real products.
const Names& kBilinear() {
  static const Names names = {"matmul", "dot", "inner", "outer", "tensordot", "kron", "vdot"};
  return names;
}

// Parameters that are data (promoted together); primitives absent here have
// all parameters as data.
uint32_t data_mask(std::string_view name) {
  if (name == "where") return 0b110;  // cond is not promoted
  if (name == "full") return 0b10;    // the fill value, not the shape
  // (Function-local tables: registration runs during static initialisation.)
  static const Names first_only = {
      "take", "take_along_axis", "index_update", "index_add", "tile", "repeat", "roll", "pad", "split", "sort",
      "unique", "permutation", "rng_choice", "rng_permutation", "diag", "tril", "triu", "flip",
      "cumsum", "cumprod", "nancumsum", "sum", "prod", "nansum", "nanprod", "mean", "average",
      "std", "var", "nanmean", "nanstd", "nanvar", "median", "nanmedian", "percentile",
      "nanpercentile", "quantile", "nanquantile", "max", "min", "amax", "amin", "ptp", "nanmax",
      "nanmin", "norm", "trace", "logsumexp", "diff", "flatten", "copy", "array", "zeros_like",
      "ones_like", "full_like", "empty_like", "argmax", "argmin", "nanargmax", "nanargmin",
      "argsort", "searchsorted",
      // The arrays joined are the first argument; axis is not data (its
      // imaginary part is not 0.0 when complex arrays are joined).
      "concatenate", "stack"};
  if (first_only.count(name)) return 0b1;
  return ~0u;
}

bool real_compute(DType dt) {
  return dt == DType::bool_ || dt == DType::int64 || dt == DType::float32 || dt == DType::float64;
}

void int_range(DType dt, int64_t& lo, uint64_t& hi) {
  switch (dt) {
    case DType::int8:
      lo = -128, hi = 127;
      break;
    case DType::int16:
      lo = -32768, hi = 32767;
      break;
    case DType::int32:
      lo = std::numeric_limits<int32_t>::min(), hi = 2147483647;
      break;
    case DType::uint8:
      lo = 0, hi = 255;
      break;
    case DType::uint16:
      lo = 0, hi = 65535;
      break;
    case DType::uint32:
      lo = 0, hi = 4294967295u;
      break;
    case DType::uint64:
      lo = 0, hi = std::numeric_limits<uint64_t>::max();
      break;
    default:
      lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  }
}

bool fits(int64_t v, DType dt) {
  int64_t lo;
  uint64_t hi;
  int_range(dt, lo, hi);
  return v >= lo && (v < 0 || static_cast<uint64_t>(v) <= hi);
}

// The compute-type array a storage-type argument becomes (a uint64 array
// with values of 2**63 and more is refused where its bits would be misread).
Array to_compute(const Array& x, DType target, const PrimitiveSpec& spec, size_t param) {
  if (x.dtype() == target) return x;
  if (x.dtype() == DType::uint64 && !spec.modular && target == DType::int64) {
    const Array c = x.contiguous();
    const uint64_t* p = c.data<uint64_t>();
    for (int64_t i = 0; i < c.size(); ++i) {
      if (p[i] >> 63) {
        throw TypeError(error_message(
            "[", spec.name, "] argument '",
            spec.params[std::min(param, spec.params.size() - 1)].name, "' holds the uint64 value ",
            std::to_string(p[i]),
            ", and tessera computes this operation on uint64 only for values below 2**63"));
      }
    }
  }
  return cast_array(x, target);
}

}  // namespace

void check_python_int(const Value& v, DType dt, const char* op) {
  if (v.is_int() && is_integer(dt) && !fits(v.as_int(), dt)) {
    throw std::overflow_error(error_message("[", op, "] Python integer ",
                                            std::to_string(v.as_int()), " out of bounds for ",
                                            dtype_name(dt)));
  }
}

void check_scalar_store(const Value& v, DType dt, bool numpy_scalars, const char* op) {
  check_python_int(v, dt, op);
  if (!is_integer(dt)) return;
  // The integer a float truncates to (NaN and infinity: the caller's error).
  auto out_of_bounds = [&](const std::string& value) {
    throw std::overflow_error(error_message("[", op, "] Python integer ", value,
                                            " out of bounds for ", dtype_name(dt)));
  };
  auto check_float = [&](double f) {
    if (!std::isfinite(f)) return;
    const double t = std::trunc(f);
    int64_t lo;
    uint64_t hi;
    int_range(dt, lo, hi);
    if (t < static_cast<double>(lo) || t >= static_cast<double>(hi) + 1.0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f", t);
      out_of_bounds(buf);
    }
  };
  if (v.is_float()) {
    check_float(v.as_float());
    return;
  }
  if (!numpy_scalars || !v.is_array() || !is_signed_integer(dt)) return;
  const Array& a = v.as_array();
  if (a.ndim() != 0 || a.weak() || a.dtype() == dt || a.dtype() == DType::bool_) return;
  if (is_floating(a.dtype())) {
    check_float(a.get_double(0));
  } else if (a.dtype() == DType::uint64) {
    const uint64_t u = a.origin<uint64_t>()[0];
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        !fits(static_cast<int64_t>(u), dt))
      out_of_bounds(std::to_string(u));
  } else if (is_integer(a.dtype())) {
    const int64_t i = a.get_int(0);
    if (!fits(i, dt)) out_of_bounds(std::to_string(i));
  }
}

namespace {

void check_python_ints_in(const Value& list, DType dt, const char* op) {
  // Nested to any depth: an explicit stack (in reverse, so that the first
  // int out of bounds is the one named).
  std::vector<const Value*> pending{&list};
  while (!pending.empty()) {
    const Value& v = *pending.back();
    pending.pop_back();
    if (!v.is_list()) {
      check_python_int(v, dt, op);
      continue;
    }
    const List& items = v.as_list();
    for (size_t i = items.size(); i-- > 0;) pending.push_back(&items[i]);
  }
}

}  // namespace

void apply_dtype_rules(PrimitiveSpec& spec) {
  const std::string& n = spec.name;
  if (spec.family == "arithmetic" || spec.family == "bitwise" || spec.family == "comparison") {
    spec.dtype_rule = n == "astype" ? DTypeRule::raw : DTypeRule::same;
  }
  if (kSame().count(n)) spec.dtype_rule = DTypeRule::same;
  if (kAccumulate().count(n)) spec.dtype_rule = DTypeRule::accumulate;
  if (kMean().count(n)) spec.dtype_rule = DTypeRule::mean;
  // x OP= y runs the OP primitive, which converts and stores back itself: y
  // converted here would reach it as int64 (uint8 -= uint8 computed in int64
  // and refused by same_kind).
  if (kRaw().count(n) || spec.family == "text" || spec.family == "inplace") {
    spec.dtype_rule = DTypeRule::raw;
  }
  spec.data_params = data_mask(n);
  spec.complex = kComplex().count(n) != 0 || kLinear().count(n) != 0 || kBilinear().count(n) != 0 ||
                 spec.views || spec.dtype_rule == DTypeRule::raw || spec.family == "python" ||
                 spec.family == "control";
  spec.modular = kModular().count(n) != 0 || spec.views;
  for (size_t i = 0; i < spec.params.size(); ++i) {
    if (spec.params[i].name == "dtype") spec.dtype_param = static_cast<int>(i);
  }
  spec.bool_ufunc = spec.dtype_rule == DTypeRule::same && spec.family == "arithmetic" &&
                    (spec.scalar_binary != nullptr || spec.params.size() == 1);
}

namespace {

// Calls f(array) for every array in v, in lists nested to any depth (a
// variadic primitive called with one list, np.hstack([x, y]), packs a list
// in a list).
template <class F>
void for_each_array(const Value& v, F&& f) {
  if (v.is_array()) {
    f(v.as_array());
    return;
  }
  if (!v.is_list()) return;
  if (const NumberList* n = v.number_items()) {
    // Numbers held unboxed, of one kind: a NumPy scalar's dtype seen once,
    // the list not written out as Values.
    if (!n->bits.empty()) {
      const Value first = n->item(0);
      if (first.is_array()) f(first.as_array());
    }
    return;
  }
  // A flat list (an index such as [:, j], a list of arrays): its items, with
  // no stack to allocate (this runs for every primitive call).
  const List& top = v.as_list();
  bool nested = false;
  for (const Value& e : top) nested = nested || e.is_list();
  if (!nested) {
    for (const Value& e : top) {
      if (e.is_array()) f(e.as_array());
    }
    return;
  }
  // Nested to any depth (== of two lists built by x = [x]): an explicit
  // stack, in reverse so that arrays are seen in order.
  std::vector<const Value*> pending{&v};
  while (!pending.empty()) {
    const Value& e = *pending.back();
    pending.pop_back();
    if (e.is_array()) {
      f(e.as_array());
    } else if (e.is_list()) {
      const List& items = e.as_list();
      for (size_t i = items.size(); i-- > 0;) pending.push_back(&items[i]);
    }
  }
}

// v with every array a (in nested lists too) replaced by f(a).
template <class F>
Value map_arrays(const Value& v, const char* op, F&& f) {
  if (v.is_array()) return Value(f(v.as_array()));
  if (!v.is_list()) return v;
  NestingLevel level(op, v);
  List l = v.as_list();
  for (Value& e : l) e = map_arrays(e, op, f);
  return v.is_tuple() ? Value::tuple(std::move(l)) : Value(std::move(l));
}

// A parameter that counts or positions elements (np.zeros(300, dtype=np.int8)'s
// shape): its Python ints are no values of the result dtype.
bool is_count(const PrimitiveSpec& spec, size_t i) {
  static const Names names = {"shape", "n", "m", "k", "num", "reps", "repeats", "axis"};
  return i < spec.params.size() && names.count(spec.params[i].name) != 0;
}

}  // namespace

int Args::data_operands() const {
  int operands = 0;
  for (size_t i = 0; i < values_.size() && i < 32; ++i) {
    if (((spec_->data_params >> i) & 1u) && values_[i].is_numeric()) ++operands;
  }
  return operands;
}

void Args::convert_storage() {
  const PrimitiveSpec& s = *spec_;
  // raw primitives see every dtype as it is (and lists are not scanned: an
  // append to a long list stays O(1)).
  if (s.dtype_rule == DTypeRule::raw) return;
  // An item or a slice of a list is its items as they are: the list is not
  // scanned (a loop reading xs[i] of a long list was quadratic).
  if (!values_.empty() && values_[0].is_list() && s.name == "getitem") return;
  bool any = false;
  for (const Value& v : values_) {
    for_each_array(v, [&](const Array& x) { any = any || !real_compute(x.dtype()); });
  }
  // A storage dtype requested by name: the kernel makes the compute type.
  std::optional<DType> requested;
  const size_t dtype_param = s.dtype_param < 0 ? s.params.size() : static_cast<size_t>(s.dtype_param);
  if (dtype_param < values_.size() && values_[dtype_param].is_string()) {
    requested = dtype_from_name(values_[dtype_param].as_string(), s.name);
    if (!real_compute(*requested)) any = true;
  }
  if (!any && s.bool_ufunc) {
    // Bool arrays only (no Python numbers): NumPy computes b // b, b % b,
    // b ** 2 in int8 and sqrt(b) in float16; the kernels give int64 and
    // float64, stored back by the same rule as the storage dtypes'.
    bool bools = false, others = false;
    for (size_t i = 0; i < values_.size() && i < 32; ++i) {
      if (!((s.data_params >> i) & 1u)) continue;
      const Value& v = values_[i];
      if (v.is_array()) {
        (v.as_array().dtype() == DType::bool_ ? bools : others) = true;
      } else if (v.is_int() || v.is_float() || v.is_list()) {
        others = true;
      }
    }
    if (bools && !others) {
      storage_.active = true;
      storage_.rule = DTypeRule::same;
      storage_.result = DType::bool_;
      storage_.one_operand = data_operands() == 1;
    }
    return;
  }
  if (!any) return;

  auto refuse_complex = [&](const Array& x, size_t i) {
    if (is_complex(x.dtype()) && !s.complex) {
      throw TypeError(error_message("[", s.name, "] argument '",
                                    s.params[std::min(i, s.params.size() - 1)].name, "' has dtype ",
                                    dtype_name(x.dtype()),
                                    ": this operation does not support complex numbers"));
    }
  };
  // S: the data parameters' dtypes promoted, Python scalars weak (NumPy 2).
  bool have = false, weak_int = false, weak_float = false;
  DType S = DType::bool_;
  // The smallest and largest Python ints among the data (-5 fits int8 but
  // not uint8: keeping only one that does not fit int8 missed it).
  int64_t python_lo = 0, python_hi = 0;
  bool have_python_int = false;
  bool weak_complex = false;
  auto join = [&](const Array& x, size_t i) {
    refuse_complex(x, i);
    if (x.weak()) {
      weak_complex = true;  // a Python complex: weak, as Python's ints and floats
      return;
    }
    S = have ? promote(S, x.dtype()) : x.dtype();
    have = true;
  };
  for (size_t i = 0; i < values_.size(); ++i) {
    const Value& v = values_[i];
    bool data = i < 32 && ((s.data_params >> i) & 1u) && i != dtype_param;
    if (v.is_array()) {
      if (data) {
        join(v.as_array(), i);
      } else {
        refuse_complex(v.as_array(), i);
      }
    } else if (v.is_list()) {
      for_each_array(v, [&](const Array& x) {
        if (data) {
          join(x, i);
        } else {
          refuse_complex(x, i);
        }
      });
    } else if (data && v.is_int() && !is_count(s, i)) {
      weak_int = true;
      python_lo = have_python_int ? std::min(python_lo, v.as_int()) : v.as_int();
      python_hi = have_python_int ? std::max(python_hi, v.as_int()) : v.as_int();
      have_python_int = true;
    } else if (data && v.is_float()) {
      weak_float = true;
    }
  }
  if (have) {
    if (weak_float && !is_inexact(S)) S = DType::float64;
    if (weak_int && S == DType::bool_) S = DType::int64;
    if (weak_complex && !is_complex(S)) S = complex_for(is_inexact(S) ? S : DType::float64);
  } else if (weak_complex) {
    // Only Python numbers (one of them complex): the result is a Python
    // complex number too, weak as well.
    S = DType::complex128;
    have = true;
    storage_.weak_result = true;
  }
  storage_.active = true;
  storage_.rule = s.dtype_rule;
  storage_.result = S;
  storage_.one_operand = data_operands() == 1;
  if (requested) {
    // dtype="int8": the kernel computes in the compute type, stored as asked.
    storage_.rule = DTypeRule::same;
    storage_.result = *requested;
    storage_.one_operand = false;
    values_[dtype_param] = Value(std::string(dtype_name(compute_dtype(*requested))));
    if (is_complex(*requested) && !s.complex) {
      // np.zeros(n, dtype=complex), x.sum(dtype=complex): the kernel makes
      // real values (imaginary parts zero), stored as complex.
      values_[dtype_param] = Value(std::string("float64"));
      storage_.force = true;
    }
    S = *requested;
    have = true;
    if (is_integer(S) && (s.name == "array" || s.name == "asarray")) {
      // np.array([300, 1], dtype=np.int8): NumPy 2 refuses a Python int the
      // dtype cannot hold (a nested list's too).
      for (size_t i = 0; i < values_.size(); ++i) {
        if (values_[i].is_list()) check_python_ints_in(values_[i], S, s.name.c_str());
      }
    }
  } else if (!have) {
    storage_.active = false;
  }
  storage_.has_overflow_check =
      have_python_int && is_integer(S) && (!fits(python_lo, S) || !fits(python_hi, S));
  storage_.python_int = fits(python_lo, S) ? python_hi : python_lo;

  if (is_complex(S) && !s.views) {
    storage_.complex_kind = kBilinear().count(s.name) ? 2 : kLinear().count(s.name) ? 1 : 0;
  }
  const DType C = compute_dtype(have ? S : DType::float64);
  for (size_t i = 0; i < values_.size(); ++i) {
    Value& v = values_[i];
    if (s.views && i == 0) continue;  // view primitives work on the array's own bytes
    // Data arguments meet in S's compute type only for primitives whose
    // operands are promoted together (ufuncs, joins, reductions); any other
    // (full's shape and fill value, reshape's shape) keeps its own kind.
    const bool promoted = storage_.rule == DTypeRule::same ||
                          storage_.rule == DTypeRule::accumulate ||
                          storage_.rule == DTypeRule::mean;
    bool data = i < 32 && ((s.data_params >> i) & 1u) && have && !s.views && promoted && !requested;
    auto convert = [&](const Array& x) {
      DType target = data && !requested ? C : compute_dtype(x.dtype());
      if (data && requested && !real_compute(x.dtype())) target = compute_dtype(x.dtype());
      return to_compute(x, target, s, i);
    };
    if (v.is_array()) {
      if (!real_compute(v.as_array().dtype()) || (data && v.as_array().dtype() != C)) {
        v = Value(convert(v.as_array()));
      }
    } else if (v.is_list()) {
      bool need = false;
      for_each_array(v, [&](const Array& x) {
        need = need || !real_compute(x.dtype()) || (data && x.dtype() != C);
      });
      if (need) v = map_arrays(v, s.name.c_str(), convert);
    }
  }
}

namespace {

Array store_one(const Array& r, DTypeRule rule, DType S, bool one_operand, const char* op) {
  const DType R = r.dtype();
  const DType C = compute_dtype(S);
  DType target = R;
  switch (rule) {
    case DTypeRule::keep:
    case DTypeRule::raw:
      break;
    case DTypeRule::same:
      if (R == C) {
        target = S;
      } else if (S == DType::bool_ && R == DType::int64) {
        target = DType::int8;  // b // b, b ** 2, np.square(b): NumPy's int8
      } else if (is_floating(R) && !is_inexact(S) && one_operand) {
        target = float_for(S);  // sqrt(int8) -> float16
        if (float_for(S) == DType::float64) target = R;
      } else if (is_floating(R) && is_complex(S)) {
        target = S == DType::complex64 ? DType::float32 : DType::float64;  // abs(complex64)
      }
      break;
    case DTypeRule::accumulate:
      if (is_unsigned(S) && R == DType::int64) {
        target = DType::uint64;
      } else if (is_integer(S) || S == DType::bool_) {
        target = R;
      } else if (R == C) {
        target = S;
      }
      break;
    case DTypeRule::mean:
      if (R == C) {
        target = S;
      } else if (is_floating(R) && is_complex(S)) {
        target = S == DType::complex64 ? DType::float32 : DType::float64;
      }
      break;
  }
  (void)op;
  return target == R ? r : r.astype(target);
}

}  // namespace

namespace {

// The real (part 0) or imaginary (part 1) part of a data argument; other
// arguments as they are (a real data argument's imaginary part is zero).
Value part_of(const Value& v, int part, bool data, const char* op) {
  if (v.is_array() && is_complex(v.as_array().dtype())) {
    return Value(kernels::complex_part(v.as_array(), part));
  }
  if (!data || part == 0) return v;
  if (v.is_array()) return Value(Array::zeros(DType::float64, v.as_array().shape()));
  if (v.is_numeric()) return Value(0.0);
  if (v.is_list()) {
    NestingLevel level(op, v);
    List l = v.as_list();
    for (Value& e : l) e = part_of(e, part, data, op);
    return Value(std::move(l));
  }
  return v;
}

Value split_part(const Value& v, int part, bool data, const char* op) {
  if (v.is_list() && !v.is_tuple()) {
    NestingLevel level(op, v);
    List l = v.as_list();
    for (Value& e : l) {
      if (e.is_list()) {
        e = split_part(e, part, data, op);  // np.hstack([x, z]): the list in the variadic list
      } else if (e.is_array() && is_complex(e.as_array().dtype())) {
        e = Value(kernels::complex_part(e.as_array(), part));
      } else if (data && part == 1 && e.is_array()) {
        e = Value(Array::zeros(DType::float64, e.as_array().shape()));
      } else if (data && part == 1 && e.is_numeric()) {
        e = Value(0.0);
      }
    }
    return Value(std::move(l));
  }
  return part_of(v, part, data, op);
}

Value combine(const Value& re, const Value& im, const char* op) {
  if (re.is_list() && im.is_list()) {
    NestingLevel level(op, re);
    List l;
    for (size_t i = 0; i < re.as_list().size(); ++i) {
      l.push_back(combine(re.as_list()[i], im.as_list()[i], op));
    }
    return re.is_tuple() ? Value::tuple(std::move(l)) : Value(std::move(l));
  }
  return Value(kernels::make_complex(to_array(re, op, "result"), to_array(im, op, "result")));
}

Value add_values(const Value& a, const Value& b, double sign, const char* op) {
  Array x = to_array(a, op, "result"), y = to_array(b, op, "result");
  return Value(binary_array(sign > 0 ? BinaryOp::add : BinaryOp::subtract, x, y, op));
}

}  // namespace

Value run_complex(const PrimitiveSpec& spec, Args& args) {
  const uint32_t mask = spec.name == "index_update" || spec.name == "index_add" ? 0b101u : spec.data_params;
  auto parts = [&](int part, bool conj_first) {
    std::vector<Value> values;
    for (size_t i = 0; i < args.size(); ++i) {
      bool data = i < 32 && ((mask >> i) & 1u);
      Value v = split_part(args[i], part, data, spec.name.c_str());
      if (conj_first && i == 0 && part == 1 && v.is_array()) {
        v = Value(unary_array(UnaryOp::negative, v.as_array()));
      }
      values.push_back(std::move(v));
    }
    return values;
  };
  auto eval = [&](std::vector<Value> values) {
    Args a(spec, std::move(values));
    return spec.eval(a);
  };
  if (args.complex_kind() == 1) {
    return combine(eval(parts(0, false)), eval(parts(1, false)), spec.name.c_str());
  }
  // Bilinear f(a, b): (ar + i ai)(br + i bi) = f(ar,br) - f(ai,bi) + i (f(ar,bi) + f(ai,br)).
  const bool conj_first = spec.name == "vdot";
  std::vector<Value> re = parts(0, conj_first), im = parts(1, conj_first);
  auto with = [&](const Value& a, const Value& b) {
    std::vector<Value> v = re;
    v[0] = a;
    v[1] = b;
    return eval(std::move(v));
  };
  const char* op = spec.name.c_str();
  Value rr = with(re[0], re[1]), ii = with(im[0], im[1]);
  Value ri = with(re[0], im[1]), ir = with(im[0], re[1]);
  return combine(add_values(rr, ii, -1, op), add_values(ri, ir, +1, op), op);
}

Value Args::store_result(Value result) const {
  const StorageState& st = storage_;
  auto one = [&](const Array& r) {
    Array out =
        st.force ? r.astype(st.result) : store_one(r, st.rule, st.result, st.one_operand, op());
    if (st.weak_result && out.ndim() == 0 && out.dtype() == DType::complex128) {
      out = Array::weak_complex(out.get_complex(0));
    }
    if (st.has_overflow_check && out.dtype() == st.result &&
        r.dtype() == compute_dtype(st.result)) {
      throw std::overflow_error(error_message("[", op(), "] Python integer ",
                                              std::to_string(st.python_int), " out of bounds for ",
                                              dtype_name(st.result)));
    }
    return out;
  };
  if (result.is_array()) return Value(one(result.as_array()));
  if (result.is_scalar() && st.rule != DTypeRule::keep) {
    // A reduction's Python-like scalar: a 0-d array when its NumPy dtype is
    // a storage type (np.uint8 from max of uint8, float16 from a sum).
    Array r = to_array(result, op(), "result");
    Array out = one(r);
    if (out.dtype() != r.dtype()) return Value(out);
  }
  if (result.is_list()) {
    // split gives pieces of the argument; other list results (unique's
    // values and counts) follow the dtype rule in their first element only.
    bool all = spec_->name == "split";
    List l = result.as_list();
    for (size_t i = 0; i < l.size(); ++i) {
      if ((all || i == 0) && l[i].is_array()) l[i] = Value(one(l[i].as_array()));
    }
    Value out(std::move(l));
    if (result.is_tuple()) return Value::tuple(out.as_list());
    return out;
  }
  return result;
}

}  // namespace tessera
