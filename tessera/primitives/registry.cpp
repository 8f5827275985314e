#include "tessera/primitives/registry.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include "tessera/core/error.hpp"
#include "tessera/primitives/gradient_expansions.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<PrimitiveSpec>, std::less<>> by_name;
  std::vector<std::string> problems;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string default_str(const Value& v) {
  if (v.is_string()) return "'" + v.as_string() + "'";
  return v.str();
}

// Edit distance counting an adjacent transposition as one edit ("rnage" is
// one edit from "range"), for suggestions.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string PrimitiveSpec::signature() const {
  // Keyword-only settings come last, after the variadic parameter, as in
  // Python: replay(n, f, *args, validate=nil).
  std::string s = name + "(";
  bool first = true;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].keyword_only != (pass == 1)) continue;
      if (!first) s += ", ";
      first = false;
      if (variadic && i + 1 == params.size()) s += "*";
      s += params[i].name;
      if (params[i].default_value) s += "=" + default_str(*params[i].default_value);
    }
  }
  return s + ")";
}

PrimitiveSpec async_spec(PrimitiveSpec spec, Future<Value> (*fn)(Args&)) {
  spec.eval_async = fn;
  spec.eval = [fn](Args& a) -> Value { return fn(a).wait(); };
  return spec;
}

namespace {

struct GradientExpansions {
  std::mutex mutex;
  std::map<std::string, std::string, std::less<>> by_name;
};

GradientExpansions& gradient_expansions() {
  static GradientExpansions e;
  return e;
}

}  // namespace

bool register_gradient_expansions(std::vector<std::pair<std::string, std::string>> items) {
  GradientExpansions& e = gradient_expansions();
  std::lock_guard lock(e.mutex);
  for (auto& [name, expr] : items) e.by_name.emplace(std::move(name), std::move(expr));
  return true;
}

const std::string* gradient_expansion(const std::string& name) {
  GradientExpansions& e = gradient_expansions();
  std::lock_guard lock(e.mutex);
  auto it = e.by_name.find(name);
  // Entries are never erased: the pointer stays valid.
  return it == e.by_name.end() ? nullptr : &it->second;
}

bool register_primitives(std::vector<PrimitiveSpec> specs) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& spec : specs) {
    apply_dtype_rules(spec);
    // Registration runs while the library loads, where throwing would abort
    // the process: problems are recorded for the registry's test instead.
    if (r.by_name.count(spec.name)) {
      r.problems.push_back("primitive registered twice: " + spec.name);
      continue;
    }
    if (!spec.grads.empty() && spec.grads.size() != spec.params.size()) {
      r.problems.push_back("primitive " + spec.name + ": grads has " +
                           std::to_string(spec.grads.size()) + " entries for " +
                           std::to_string(spec.params.size()) + " parameters");
    }
    if (!spec.eval || spec.help.empty() || spec.family.empty()) {
      r.problems.push_back("primitive without eval, help or family: " + spec.name);
    }
    for (size_t i = 0; i < spec.params.size(); ++i) {
      bool variadic_slot = spec.variadic && i + 1 == spec.params.size();
      if (i > 0 && spec.params[i - 1].default_value && !spec.params[i].default_value &&
          !variadic_slot) {
        r.problems.push_back("primitive " + spec.name + ": required parameter '" +
                             spec.params[i].name + "' follows an optional one");
      }
    }
    std::string name = spec.name;
    r.by_name.emplace(std::move(name), std::make_unique<PrimitiveSpec>(std::move(spec)));
  }
  return true;
}

std::vector<std::string> registry_problems() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.problems;
}

bool has_effects(const PrimitiveSpec& spec) {
  if (spec.writes || spec.calls_functions) return true;
  if (spec.family == "random" || spec.family == "io") return true;
  static const std::set<std::string, std::less<>> names = {"print", "assert", "send", "recv",
                                                           "barrier"};
  return names.count(spec.name) != 0;
}

const PrimitiveSpec* find_primitive(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second.get();
}

std::vector<const PrimitiveSpec*> all_primitives() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<const PrimitiveSpec*> out;
  for (auto& [n, s] : r.by_name) out.push_back(s.get());
  return out;
}

std::vector<std::string> similar_primitive_names(std::string_view name) {
  std::vector<std::pair<size_t, std::string>> scored;
  // Primitive names are short: a long name resembles none (and the distance
  // costs the product of the lengths, per primitive).
  constexpr size_t kLongestCompared = 64;
  if (name.size() > kLongestCompared) return {};
  const size_t within = std::max<size_t>(1, name.size() / 3);
  for (const PrimitiveSpec* s : all_primitives()) {
    // The distance is at least the difference in length.
    size_t gap = std::max(name.size(), s->name.size()) - std::min(name.size(), s->name.size());
    if (gap > within) continue;
    size_t d = edit_distance(name, s->name);
    if (d <= within) scored.emplace_back(d, s->name);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

std::vector<int> bind_arguments(const PrimitiveSpec& spec, const std::vector<std::string>& names) {
  const auto& params = spec.params;
  std::vector<int> slot(names.size(), -1);
  std::vector<bool> filled(params.size(), false);
  size_t n_fixed = spec.variadic ? params.size() - 1 : params.size();
  size_t next_positional = 0;
  bool seen_named = false;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      if (seen_named) {
        throw SyntaxError(
            error_message("[", spec.name, "] positional argument follows a named argument"));
      }
      while (next_positional < n_fixed && params[next_positional].keyword_only) ++next_positional;
      if (next_positional < n_fixed) {
        slot[i] = static_cast<int>(next_positional);
        filled[next_positional++] = true;
      } else if (spec.variadic) {
        slot[i] = static_cast<int>(params.size() - 1);
        filled[params.size() - 1] = true;
      } else {
        throw std::invalid_argument(error_message("[", spec.name, "] takes at most ", params.size(),
                                                  " argument", params.size() == 1 ? "" : "s",
                                                  " but ", names.size(),
                                                  " were given: ", spec.signature()));
      }
    } else {
      seen_named = true;
      auto it = std::find_if(params.begin(), params.end(),
                             [&](const Param& p) { return p.name == names[i]; });
      if (it == params.end()) {
        throw std::invalid_argument(error_message("[", spec.name, "] unexpected named argument '",
                                                  names[i], "': ", spec.signature()));
      }
      size_t k = static_cast<size_t>(it - params.begin());
      if (filled[k]) {
        throw std::invalid_argument(
            error_message("[", spec.name, "] argument '", names[i], "' given more than once"));
      }
      slot[i] = static_cast<int>(k);
      filled[k] = true;
    }
  }
  for (size_t k = 0; k < params.size(); ++k) {
    bool variadic_slot = spec.variadic && k + 1 == params.size();
    if (!filled[k] && !params[k].default_value && !variadic_slot) {
      throw std::invalid_argument(error_message("[", spec.name, "] missing argument '",
                                                params[k].name, "': ", spec.signature()));
    }
  }
  return slot;
}

Value call_primitive(std::string_view name, std::vector<CallArg> args) {
  const PrimitiveSpec* spec = find_primitive(name);
  if (!spec) throw SyntaxError(error_message("unknown primitive '", name, "'"));
  std::vector<std::string> names;
  for (auto& a : args) names.push_back(a.name);
  std::vector<int> slot = bind_arguments(*spec, names);
  std::vector<Value> values(spec->params.size());
  std::vector<bool> filled(spec->params.size(), false);
  List rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (spec->variadic && static_cast<size_t>(slot[i]) + 1 == spec->params.size() &&
        args[i].name.empty()) {
      rest.push_back(std::move(args[i].value));
    } else {
      values[slot[i]] = std::move(args[i].value);
    }
    filled[slot[i]] = true;
  }
  for (size_t k = 0; k < spec->params.size(); ++k) {
    bool variadic_slot = spec->variadic && k + 1 == spec->params.size();
    if (variadic_slot) {
      if (!rest.empty() || !filled[k]) values[k] = Value(std::move(rest));
    } else if (!filled[k]) {
      values[k] = *spec->params[k].default_value;
    }
  }
  if (const TiledOverload* tiled = find_tiled_overload(*spec, values)) {
    Args a(*spec, std::move(values));
    a.pack_views();  // tiled overloads read plain operands as contiguous arrays
    return (*tiled)(*spec, a).wait();
  }
  Args a(*spec, std::move(values));
  return run_primitive(*spec, a);
}

Value run_primitive(const PrimitiveSpec& spec, Args& args) {
  Value result;
  try {
    if (args.complex_kind()) {
      if (spec.views || spec.strided) args.pack_views();  // the parts are computed on packed copies
      result = run_complex(spec, args);
    } else {
      result = spec.eval(args);
    }
  } catch (const TypeError& e) {
    // A kernel without a loop for a dtype (dtype.hpp, dispatch): name the
    // primitive.
    static const std::string kernel = "[this kernel]";
    const std::string what = e.what();
    if (what.compare(0, kernel.size(), kernel) != 0) throw;
    throw TypeError("[" + spec.name + "]" + what.substr(kernel.size()));
  }
  if (args.converted()) result = args.store_result(std::move(result));
  if (spec.views || spec.passes_through || !result.is_array()) return result;
  // Only view primitives may hand back an argument's buffer: anything else
  // (astype to the same dtype, a no-op reshape inside a kernel) is a new
  // array in NumPy, which a later write must not reach the argument through.
  const Array& r = result.as_array();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_array() && args[i].as_array().shares_storage(r)) return Value(r.copy());
  }
  return result;
}

namespace {

struct TiledOverloads {
  std::mutex mutex;
  // std::map: pointers to entries stay valid as others are added.
  std::map<std::string, TiledOverload, std::less<>> by_key;
};

TiledOverloads& tiled_overloads() {
  static TiledOverloads t;
  return t;
}

}  // namespace

bool register_tiled_overload(const std::string& key, TiledOverload fn) {
  TiledOverloads& t = tiled_overloads();
  std::lock_guard lock(t.mutex);
  t.by_key[key] = std::move(fn);
  return true;
}

const TiledOverload* find_tiled_overload(const PrimitiveSpec& spec,
                                         const std::vector<Value>& values) {
  bool any = false;
  for (const Value& v : values) any = any || v.is_tiled();
  if (!any) return nullptr;
  TiledOverloads& t = tiled_overloads();
  std::lock_guard lock(t.mutex);
  auto it = t.by_key.find(spec.name);
  if (it == t.by_key.end()) it = t.by_key.find("family:" + spec.family);
  return it == t.by_key.end() ? nullptr : &it->second;
}

Value call_primitive(std::string_view name, std::vector<Value> positional) {
  std::vector<CallArg> args;
  for (auto& v : positional) args.push_back({"", std::move(v)});
  return call_primitive(name, std::move(args));
}

namespace {

Array packed(const Array& a) {
  return kernels::gather_view(a, kernels::StridedLayout{a.shape(), a.strides(), 0}, &parallel_for);
}

}  // namespace

void Args::pack_views() {
  for (Value& v : values_) {
    if (v.is_array()) {
      if (!v.as_array().is_contiguous()) v = Value(packed(v.as_array()));
    } else if (v.is_list() && v.number_items() == nullptr && spec_->dtype_rule != DTypeRule::raw) {
      // (A list held unboxed holds no array view: nothing to pack.)
      // (raw primitives, which hold list items as they are (append, extend,
      // to_tuple...), do not scan them: an append stays O(1).)
      const List& l = v.as_list();
      bool any = false;
      for (const Value& e : l) any = any || (e.is_array() && !e.as_array().is_contiguous());
      if (!any) continue;
      List copy = l;
      for (Value& e : copy) {
        if (e.is_array() && !e.as_array().is_contiguous()) e = Value(packed(e.as_array()));
      }
      v = Value(std::move(copy));
    }
  }
}

Array Args::array(size_t i) const {
  Array x = view(i);
  return x.is_contiguous() ? x : packed(x);
}

Array Args::view(size_t i) const {
  const Value& v = values_[i];
  if (v.is_array()) return v.as_array();
  if (v.is_numeric() || v.is_list()) {
    return to_array(v, op(), ("argument '" + param_name(i) + "'").c_str());
  }
  type_error(i, "a number or an array");
}

double Args::number(size_t i) const {
  const Value& v = values_[i];
  if (v.is_float()) return v.as_float();
  if (v.is_int()) return static_cast<double>(v.as_int());
  if (v.is_bool()) return v.as_bool() ? 1.0 : 0.0;
  if (v.is_array() && v.as_array().size() == 1) return v.as_array().get_double(0);
  type_error(i, "a number");
}

int64_t Args::integer(size_t i) const {
  const Value& v = values_[i];
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_array() && v.as_array().size() == 1 && !is_floating(v.as_array().dtype())) {
    return v.as_array().get_int(0);
  }
  type_error(i, "an integer");
}

std::optional<int64_t> Args::opt_integer(size_t i) const {
  if (values_[i].is_nil()) return std::nullopt;
  return integer(i);
}

bool Args::boolean(size_t i) const {
  const Value& v = values_[i];
  if (v.is_bool()) return v.as_bool();
  if (v.is_int()) return v.as_int() != 0;
  if (v.is_array() && v.as_array().size() == 1) return v.as_array().get_bool(0);
  type_error(i, "a bool");
}

const std::string& Args::string(size_t i) const {
  if (!values_[i].is_string()) type_error(i, "a string");
  return values_[i].as_string();
}

const List& Args::list(size_t i) const {
  if (!values_[i].is_list()) type_error(i, "a list");
  return values_[i].as_list();
}

std::vector<int64_t> Args::int_list(size_t i) const {
  const Value& v = values_[i];
  if (v.is_int() || v.is_bool()) return {integer(i)};
  if (v.is_list()) {
    std::vector<int64_t> out;
    for (const Value& e : v.as_list()) {
      if (e.is_int()) {
        out.push_back(e.as_int());
      } else if (e.is_array() && e.as_array().size() == 1 && e.as_array().dtype() == DType::int64) {
        out.push_back(e.as_array().get_int(0));
      } else {
        type_error(i, "an int or a list of ints");
      }
    }
    return out;
  }
  if (v.is_array() && v.as_array().dtype() == DType::int64 && v.as_array().ndim() <= 1) {
    const Array& a = v.as_array();
    std::vector<int64_t> out(a.size());
    for (int64_t k = 0; k < a.size(); ++k) out[k] = a.get_int(k);  // a view too
    return out;
  }
  type_error(i, "an int or a list of ints");
}

std::optional<std::vector<int64_t>> Args::axes(size_t i) const {
  if (values_[i].is_nil()) return std::nullopt;
  return int_list(i);
}

DType Args::dtype(size_t i, DType def) const {
  auto d = opt_dtype(i);
  return d ? *d : def;
}

std::optional<DType> Args::opt_dtype(size_t i) const {
  if (values_[i].is_nil()) return std::nullopt;
  if (!values_[i].is_string()) type_error(i, "a dtype name such as 'float32'");
  return dtype_from_name(values_[i].as_string(), op());
}

void Args::type_error(size_t i, std::string_view expected) const {
  throw TypeError(error_message("[", op(), "] argument '", param_name(i), "' must be ", expected,
                                ", got ", values_[i].describe()));
}

void Args::value_error(size_t i, std::string_view what) const {
  throw std::invalid_argument(error_message("[", op(), "] argument '", param_name(i), "' ", what));
}

int normalize_axis(int64_t axis, int ndim, const char* op) {
  if (axis < -ndim || axis >= ndim) {
    throw std::out_of_range(
        error_message("[", op, "] axis ", axis, " is out of bounds for array of dimension ", ndim));
  }
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

std::vector<int> reduction_axes(const Args& a, size_t i, int ndim) {
  std::vector<int> axes;
  auto given = a.axes(i);
  if (!given) {
    for (int d = 0; d < ndim; ++d) axes.push_back(d);
    return axes;
  }
  for (int64_t ax : *given) axes.push_back(normalize_axis(ax, ndim, a.op()));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] duplicate value in 'axis': ", a[i].str()));
  }
  return axes;
}

}  // namespace tessera
