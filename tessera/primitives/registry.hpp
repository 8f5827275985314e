// The primitive registry: every primitive of the language with its parameters,
// help text and evaluation function.
//
// A family file (arithmetic.cpp, statistics.cpp, ...) defines its primitives
// and registers them next to their definitions:
//
//   const bool registered_<file> = register_primitives({
//       {.name = "add", .family = "arithmetic", .params = {{"x"}, {"y"}},
//        .help = "Elementwise x + y with NumPy broadcasting.",
//        .eval = [](Args& a) -> Value { return binary(BinaryOp::add, a[0], a[1], a.op()); }},
//   });
//
// The compiler binds positional and named arguments to `params` (filling
// defaults) before `eval` runs, so eval sees exactly params.size() values.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/value.hpp"
#include "tessera/runtime/future.hpp"

namespace tessera {

class Args;

// One parameter: a name and, when optional, its default value.
struct Param {
  std::string name;
  std::optional<Value> default_value = std::nullopt;
  // Given by name only: positional arguments skip it (a setting after the
  // variadic arguments, as Python's `def f(*args, validate=None)`).
  bool keyword_only = false;
};

// Optional settings a primitive may declare (all named, with defaults).
inline Param opt(std::string name, Value def) { return Param{std::move(name), std::move(def)}; }
// A setting that can only be given by name (see Param::keyword_only).
inline Param keyword(std::string name, Value def) {
  return Param{std::move(name), std::move(def), true};
}

// How a primitive's result dtype follows storage dtypes (dtype.hpp; the
// arguments are converted to the compute type of the promoted dtype S of the
// data parameters, with Python scalars weak as in NumPy 2):
//   keep        the result as the kernel gives it (argmax, linalg, shapes);
//   same        a ufunc or data movement: a result in S's compute type is
//               stored in S (int8 + int8 -> int8, wrapping); a float result
//               of one integer operand in float_for(S) (sqrt(int8) -> float16);
//   accumulate  sum/prod/cumsum: small integers widen to int64/uint64, float16
//               and complex64 stay;
//   mean        mean/var/median: a result in S's compute type is stored in S;
//   raw         no conversion: the primitive handles every dtype (astype,
//               print, str, file writers).
enum class DTypeRule : uint8_t { keep, same, accumulate, mean, raw };

struct PrimitiveSpec {
  std::string name;
  std::string family;
  std::vector<Param> params;
  // When true the last parameter collects all remaining positional arguments
  // as a list (e.g. hstack(a, b, c) or concatenate([a, b])).
  bool variadic = false;
  std::string help;
  std::function<Value(Args&)> eval;
  // Optional asynchronous evaluation (collectives): returns a future that
  // completes later, without any worker waiting. When set, the execution tree
  // uses it and `eval` is only the synchronous fallback of call_primitive,
  // which runs at the outermost boundary and may wait on the future.
  std::function<Future<Value>(Args&)> eval_async = nullptr;
  // Estimated nanoseconds of work per output element, used by the runtime's
  // cost model to decide inline execution versus spawning a task.
  double ns_per_element = 1.0;
  // Gradient rule (reverse mode), one entry per parameter: an expression of
  // the language giving the cotangent of that parameter from the parameters
  // (by name), `out` (this primitive's result) and `g` (the cotangent of
  // `out`); "" where the primitive is not differentiable in that parameter.
  // E.g. multiply: {"g * y", "g * x"}. Autodiff sums each cotangent back to its
  // parameter's shape (broadcasting). Empty: not differentiable at all.
  std::vector<std::string> grads = {};
  // An expression the rules share, computed once per differentiated call
  // when an active parameter's rule names it as `common` (batch_norm: the
  // per-channel sums that the gradients of x, gamma and beta all need).
  std::string grad_common = {};
  // How many active parameters' rules must name `common` for it to be
  // computed; with fewer, the rules see `common` as nil and use their own
  // expressions (a convolution's shared pass pays off only for both
  // gradients).
  int grad_common_users = 1;
  // The backward fused with the backward of the primitive that feeds it: when
  // the cotangent of this primitive's result is exactly one call of
  // `grad_fusion_producer` (the backward of the one primitive that reads the
  // result: batch_norm_grad, for a convolution followed by a batch norm) and
  // `common` is computed, autodiff binds that cotangent to the list of the
  // producer's arguments instead (nothing computed) and computes
  // `grad_fusion_common` (reading g as that list) in place of grad_common:
  // the producer's result is made a chunk at a time, each chunk consumed in
  // cache, instead of written out whole and read back.
  std::string grad_fusion_producer = {};
  std::string grad_fusion_common = {};
  // Elementwise binary primitives: the result for two Python-like scalars
  // (bool, int, float), which the execution tree computes directly, without
  // binding arguments or timing the call (a loop's `i < n`, `i + 1`); the
  // name is the primitive's, for errors. Null for other primitives.
  Value (*scalar_binary)(const PrimitiveSpec& spec, const Value& x, const Value& y) = nullptr;
  // True for primitives that work on strided views themselves (indexing,
  // transpose, reshape, writes, ...): they see their array arguments as
  // given, and a result may be a view of one. Every other primitive sees
  // views packed into C-contiguous copies (Args), and a result that shares
  // an argument's buffer is copied (PrimitiveCallNode), so only these
  // primitives ever return an alias, as in NumPy.
  bool views = false;
  // True for primitives that read strided views themselves (elementwise
  // arithmetic, dot) but are otherwise ordinary: their arguments are not
  // packed, while dtypes convert and results are new arrays as for any other.
  bool strided = false;
  // True for primitives that may return an (packed) argument itself, or a
  // view of one, rather than a copy: autodiff's cotangent plumbing
  // (unbroadcast, grad_accumulate, reduce_grad's broadcast of g),
  // whose values are never written in place and never user-visible except
  // through grad's outputs, each the result of an `if` (nil or not), which
  // copies a returned argument, so they stay distinct arrays. A 130 MB
  // cotangent passed through was copied on every step (a fifth of a
  // training step).
  bool passes_through = false;
  // True for primitives that write into their first argument's buffer
  // (setitem, augmented assignment, copyto, fill, ...). The execution tree
  // orders them against the statements around them (docs/runtime.md,
  // "Views and writes").
  bool writes = false;
  // True for primitives that call function values among their arguments
  // (replay, replicate): the execution tree treats a call of one as a call
  // of a function, which may have effects, write into arrays and assign
  // variables (has_effects is true for them).
  bool calls_functions = false;
  // Storage dtypes (dtype.hpp): how the result dtype follows the arguments'
  // dtypes, which parameters are data (promoted together, like a ufunc's
  // operands; the others, such as indices, are converted on their own), and
  // whether complex arguments are accepted. Set from a table at registration
  // (storage.cpp); specs need not set them.
  DTypeRule dtype_rule = DTypeRule::keep;
  uint32_t data_params = ~0u;
  bool complex = false;
  // True for primitives whose results are exact for uint64 values of 2**63
  // and more when computed on their int64 bits (add, sum, concatenate, ...).
  bool modular = false;
  // The index of the parameter named "dtype" (-1: none), and whether the
  // primitive is an elementwise arithmetic ufunc (bool arrays alone follow
  // NumPy's int8/float16 results): found once, not at every call.
  int dtype_param = -1;
  bool bool_ufunc = false;
  // Elementwise float operations that may be part of a fused expression
  // (primitives/fused.hpp): the BinaryOp or UnaryOp this primitive
  // computes, -1 for none.
  int fuse_binary = -1;
  int fuse_unary = -1;

  // "add(x, y)", "sum(x, axis=nil, keepdims=false)".
  std::string signature() const;
};

// Sets dtype_rule, data_params, complex and modular of a spec from the table
// in storage.cpp (by name and family); called by register_primitives.
void apply_dtype_rules(PrimitiveSpec& spec);

// `spec` with its gradient rule set (for table-built specs).
inline PrimitiveSpec with_grads(PrimitiveSpec spec, std::vector<std::string> grads) {
  spec.grads = std::move(grads);
  return spec;
}

// `specs` marked as passing no gradient (comparisons, arg-reductions, shapes,
// creation from shapes): their results are constant with respect to their
// arguments, so differentiation stops there instead of failing.
inline std::vector<PrimitiveSpec> without_gradient(std::vector<PrimitiveSpec> specs) {
  for (auto& s : specs) s.grads.assign(s.params.size(), "");
  return specs;
}

// Registers primitives. Returns true so it can initialize a namespace-scope
// constant. Programming errors (a duplicate name, a missing help text) are
// recorded, not thrown, and listed by registry_problems() for the tests.
bool register_primitives(std::vector<PrimitiveSpec> specs);
std::vector<std::string> registry_problems();

// An asynchronous primitive (one that communicates): `fn` is its eval_async;
// its synchronous eval, used by call_primitive at the outermost boundary,
// waits for fn's future.
PrimitiveSpec async_spec(PrimitiveSpec spec, Future<Value> (*fn)(Args&));

// True for primitives whose order of execution is visible: draws from the
// global random state, files, printing, assertions, point-to-point messages
// and barriers. A define whose value calls one of them is never left
// running while its block goes on (see BlockNode), so they happen in
// program order.
bool has_effects(const PrimitiveSpec& spec);

// Looks up a primitive; nullptr if unknown.
const PrimitiveSpec* find_primitive(std::string_view name);

// All primitives sorted by name.
std::vector<const PrimitiveSpec*> all_primitives();

// Names close to `name` (for "did you mean" hints).
std::vector<std::string> similar_primitive_names(std::string_view name);

// An argument as written at a call site: optional name and value.
struct CallArg {
  std::string name;  // empty for positional arguments
  Value value;
};

// Binds call-site arguments to a primitive's parameters, in parameter order,
// filling defaults. Throws ValueError/TypeError describing arity problems.
// `arg_names` is the binding used by the compiler: the result maps each
// call-site argument to its parameter index (variadic ones to the last).
std::vector<int> bind_arguments(const PrimitiveSpec& spec, const std::vector<std::string>& names);

// Runs spec.eval on bound arguments; a result sharing an argument's buffer
// is copied unless the primitive works on views (PrimitiveSpec::views).
Value run_primitive(const PrimitiveSpec& spec, Args& args);

// NumPy 2's OverflowError for a Python int `v` written into (or combined with)
// an integer array of dtype `dt` that cannot hold it.
void check_python_int(const Value& v, DType dt, const char* op);

// NumPy 2's OverflowError for a number stored into an integer array that
// cannot hold it (x[i] = v, x[a:b] = v): a Python int, a Python float
// (truncated), and, where `numpy_scalars` (basic indexing; NumPy's fancy
// indexing casts them), a NumPy scalar of another dtype into a signed
// integer array (truncated; NumPy casts them into unsigned arrays, wrapping).
void check_scalar_store(const Value& v, DType dt, bool numpy_scalars, const char* op);

// Evaluates a primitive linear (or bilinear) in its data on complex
// arguments by evaluating it on their real and imaginary parts (storage.cpp).
Value run_complex(const PrimitiveSpec& spec, Args& args);

// Calls a primitive directly with values (used by tests and the Python front).
Value call_primitive(std::string_view name, std::vector<CallArg> args);
Value call_primitive(std::string_view name, std::vector<Value> positional);

// x[..., start:stop, ...] along `axis` of a rank-`ndim` x, the other axes whole
// (getitem's view; differences.cpp).
Value slice_along(const Value& x, int ndim, int axis, std::optional<int64_t> start,
                  std::optional<int64_t> stop);

// The family files' shorthand for call_primitive (one definition for all of
// them, so a unity build can put several family files in one unit).
inline Value prim(const char* name, std::vector<Value> args) {
  return call_primitive(name, std::move(args));
}
inline Value prim(const char* name, std::vector<CallArg> args) {
  return call_primitive(name, std::move(args));
}

// Tiled arrays (tessera/distributed/tiled_ops.cpp): a call whose arguments include a
// tiled array runs the primitive's tiled overload instead of its eval, when
// it has one, so that user code stays the same as single-process code. The
// overload may communicate, so it returns a future, as eval_async does.
using TiledOverload = std::function<Future<Value>(const PrimitiveSpec&, Args&)>;
// `key` is a primitive name, or "family:NAME" for every primitive of a family
// that has no overload of its own. Returns true (for namespace-scope constants).
bool register_tiled_overload(const std::string& key, TiledOverload fn);
// The overload for a call of `spec` with these arguments (top-level values
// only): nullptr when none is a tiled array or there is no overload.
const TiledOverload* find_tiled_overload(const PrimitiveSpec& spec, const std::vector<Value>& values);

// The arguments of one primitive call, with typed accessors whose errors name
// the primitive and the parameter.
class Args {
 public:
  Args(const PrimitiveSpec& spec, std::vector<Value> values)
      : spec_(&spec), values_(std::move(values)) {
    if (!spec.views && !spec.strided) pack_views();
    convert_storage();
  }

  const char* op() const { return spec_->name.c_str(); }
  const PrimitiveSpec& spec() const { return *spec_; }
  size_t size() const { return values_.size(); }
  const Value& operator[](size_t i) const { return values_[i]; }
  Value& at(size_t i) { return values_[i]; }
  // Moves an argument out (lets an op reuse a uniquely held buffer).
  Value take(size_t i) { return std::move(values_[i]); }
  bool is_nil(size_t i) const { return values_[i].is_nil(); }
  const std::string& param_name(size_t i) const { return spec_->params[i].name; }
  // The call's source position ("file:line:col"), when known: the execution
  // tree sets it for asynchronous primitives (collective fingerprints).
  const std::string& site() const { return site_ ? *site_ : no_site(); }
  // `site` must outlive the call (the node's own string; not copied).
  void set_site(const std::string& site) { site_ = &site; }
  // The call's source position as a SourceLoc (invalid when unknown), set
  // with the site: primitives that call functions pass it to their calls.
  const SourceLoc& loc() const { return loc_ ? *loc_ : no_loc(); }
  void set_loc(const SourceLoc& loc) { loc_ = &loc; }

  // Numeric value as a C-contiguous Array (scalars become 0-d arrays, views
  // are packed).
  Array array(size_t i) const;
  // The same, but an array argument as given, strided view or not (for the
  // primitives that work on views, PrimitiveSpec::views).
  Array view(size_t i) const;
  // A number (scalar or size-1 array) as double.
  double number(size_t i) const;
  // An integer (int, bool or integral size-1 array).
  int64_t integer(size_t i) const;
  std::optional<int64_t> opt_integer(size_t i) const;
  bool boolean(size_t i) const;
  const std::string& string(size_t i) const;
  const List& list(size_t i) const;
  // A shape: an int, a list of ints or a 1-d integer array.
  std::vector<int64_t> int_list(size_t i) const;
  // An axis argument: nil -> nullopt, int -> {axis}, list/tuple -> axes.
  std::optional<std::vector<int64_t>> axes(size_t i) const;
  // A dtype given by name (string) or nil -> `def`.
  DType dtype(size_t i, DType def) const;
  std::optional<DType> opt_dtype(size_t i) const;

  // Throws TypeError: "[op] argument 'p' must be EXPECTED, got DESCRIPTION".
  [[noreturn]] void type_error(size_t i, std::string_view expected) const;
  // Throws ValueError: "[op] argument 'p' WHAT".
  [[noreturn]] void value_error(size_t i, std::string_view what) const;

  // Replaces strided views among the arguments (and in list arguments) by
  // C-contiguous copies: done before eval for primitives without `views`;
  // one with `views` that reads some views itself calls it for the others.
  void pack_views();

 private:
  // Converts arguments of storage dtypes to compute dtypes (dtype.hpp) and
  // records how to store the result (store_result).
  void convert_storage();
  // How many numbers and arrays stand at data parameters (one: a unary ufunc).
  int data_operands() const;

 public:
  // True when convert_storage converted something: run_primitive then passes
  // the result through store_result.
  bool converted() const { return storage_.active; }
  // 1: a complex argument to a primitive linear in its data, 2: bilinear
  // (matmul, dot, ...): run_primitive evaluates it on real parts.
  int complex_kind() const { return storage_.complex_kind; }
  Value store_result(Value result) const;

 private:
  struct StorageState {
    bool active = false;
    DTypeRule rule = DTypeRule::keep;
    DType result = DType::float64;  // S
    bool one_operand = false;
    bool has_overflow_check = false;
    int64_t python_int = 0;  // a Python int among the data arguments
    int complex_kind = 0;
    bool force = false;  // every result array is stored as `result`
    bool weak_result = false;  // Python numbers in, a Python complex out
  };
  StorageState storage_;

  const PrimitiveSpec* spec_;
  std::vector<Value> values_;
  const std::string* site_ = nullptr;
  const SourceLoc* loc_ = nullptr;
  static const std::string& no_site() {
    static const std::string empty;
    return empty;
  }
  static const SourceLoc& no_loc() {
    static const SourceLoc none;
    return none;
  }
};

// Normalizes an axis against ndim (negative axes count from the end); throws
// IndexError "[op] axis 3 is out of bounds for array of dimension 2".
int normalize_axis(int64_t axis, int ndim, const char* op);

// The axes a reduction's argument i names, normalized and sorted (nil: all
// of 0..ndim-1); a repeated axis is a ValueError as in NumPy.
std::vector<int> reduction_axes(const Args& a, size_t i, int ndim);

}  // namespace tessera
