// The control family: printing, sizes, ranges and other helpers that work
// on any value rather than on arrays.
#include <cstdio>
#include <iostream>
#include <mutex>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/primitives/text.hpp"

namespace tessera {

namespace {

std::mutex& output_mutex() {
  static std::mutex m;
  return m;
}

Value print_values(Args& a) {
  const List& items = a.list(0);
  std::string line;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) line += " ";
    line += python_str(items[i]);
  }
  line += "\n";
  std::lock_guard lock(output_mutex());
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
  return Value();
}

Value length(Args& a) {
  const Value& v = a[0];
  if (v.is_list()) return Value(static_cast<int64_t>(v.list_size()));
  if (v.is_string()) return Value(utf8_length(v.as_string()));
  if (v.is_dict()) return Value(static_cast<int64_t>(v.as_dict().items.size()));
  if (v.is_array()) {
    if (v.as_array().ndim() == 0) a.type_error(0, "a sized value (len() of a 0-d array)");
    return Value(v.as_array().dim(0));
  }
  a.type_error(0, "a list, array, string or dict");
}

Value range_list(Args& a) {
  int64_t start = a.integer(0), stop, step = a.integer(2);
  if (a.is_nil(1)) {
    stop = start;
    start = 0;
  } else {
    stop = a.integer(1);
  }
  if (step == 0) a.value_error(2, "must not be zero");
  int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                       : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (n > (int64_t{1} << 31)) {
    throw MemoryError(error_message("[range] range of ", n, " elements is too long for a list; use arange"));
  }
  List out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
  return Value(std::move(out));
}

Value append(Args& a) {
  if (!a[0].is_list()) a.list(0);  // a TypeError for anything but a list (or a tuple)
  if (a[0].is_tuple())
    throw AttributeError("[append] 'tuple' object has no attribute 'append' (tuples cannot grow: "
                         "make it a list, or build a new tuple with t + (v,))");
  Value list = a.take(0);
  if (NumberList* n = list.number_items(); n && list.list_ptr().use_count() == 1) {
    // Unboxed numbers (a list a native loop appended to) stay so.
    if (uint64_t bits; NumberList::scalar_bits_of(a[1], n->kind, bits)) {
      n->bits.push_back(bits);
      return list;
    }
  }
  if (List* items = list.unique_list()) {  // held by nobody else: extended in place
    items->push_back(a[1]);
    return list;
  }
  List out = list.as_list();
  out.push_back(a[1]);
  return Value(std::move(out));
}

Value assert_true(Args& a) {
  if (!a[0].truthy("assert")) {
    std::string msg = a.is_nil(1) ? "assertion failed" : "assertion failed: " + python_str(a[1]);
    throw std::runtime_error("[assert] " + msg);
  }
  return Value();
}

Value type_name(Args& a) {
  if (a[0].is_array()) return Value(std::string(dtype_name(a[0].as_array().dtype())) + " array");
  return Value(a[0].kind_name());
}

Value to_string(Args& a) { return Value(python_str(a[0])); }

Value concat(Args& a) {
  std::string s;
  for (const Value& v : a.list(0)) s += python_str(v);
  return Value(std::move(s));
}

Value is_nil(Args& a) { return Value(a[0].is_nil()); }

// range's and prange's bounds: Python's int or bool, or a NumPy integer scalar
// (a 0-d integer array: it has __index__), passed through; anything else is
// Python's TypeError. One primitive (native loop code passes a number through),
// where the check was a dozen operations on the value's type name.
Value ctl_range_index(Args& a) {
  const Value& v = a[0];
  if (v.is_int() || v.is_bool()) return v;
  if (v.is_array() && v.as_array().ndim() == 0 && is_integer(v.as_array().dtype())) return v;
  const std::string label = a.size() > 1 && a[1].is_string() ? a[1].as_string() : "range";
  const std::string kind =
      v.is_array() ? std::string(dtype_name(v.as_array().dtype())) + " array" : v.kind_name();
  throw TypeError(error_message("[", label, "] '", kind,
                                "' object cannot be interpreted as an integer: ", python_str(v)));
}

const bool registered_control = register_primitives({
    {.name = "after",
     .family = "control",
     .params = {{"x"}, {"token"}},
     .help = "x itself, once token is ready (any value: a pending define, a list of them): an "
             "order the dataflow would not impose. What reads the result starts only after "
             "token, so after(input, token) holds back the computation on input (a pipeline's "
             "next forward until a backward is done); x itself may be computed before. The "
             "gradient is x's cotangent; token gets none.",
     .eval = [](Args& a) -> Value { return a[0]; },
     .ns_per_element = 0.0,
     .grads = {"g", ""},
     .views = true},
    {.name = "print",
     .family = "control",
     .params = {{"values"}},
     .variadic = true,
     .help = "Prints the values separated by spaces, then a newline, as Python's print: "
             "str() of each (None, True, 0.1, (1, 2)); arrays as NumPy prints them. Returns nil.",
     .eval = print_values,
     .grads = {""}},
    {.name = "len",
     .family = "control",
     .params = {{"x"}},
     .help = "Length of a list, tuple, string (in characters) or dict, or the first dimension "
             "of an array.",
     .eval = length,
     .grads = {""}},
    {.name = "range",
     .family = "control",
     .params = {{"start"}, opt("stop", Value()), opt("step", Value(int64_t{1}))},
     .help = "A list of ints like Python's range: range(n) is 0..n-1, range(a, b, step). "
             "For arrays use arange.",
     .eval = range_list,
     .grads = {"", "", ""}},
    {.name = "append",
     .family = "control",
     .params = {{"list"}, {"item"}},
     .help = "A new list: `list` with `item` added at the end (lists are values; the original "
             "is unchanged).",
     .eval = append},
    {.name = "assert",
     .family = "control",
     .params = {{"condition"}, opt("message", Value())},
     .help = "Raises a RuntimeError with the message when the condition is false; returns nil.",
     .eval = assert_true,
     .grads = {"", ""}},
    {.name = "type",
     .family = "control",
     .params = {{"x"}},
     .help = "The kind of a value as a string: nil, bool, int, float, string, list, dict, "
             "function, slice, or '<dtype> array'.",
     .eval = type_name,
     .grads = {""}},
    {.name = "is_mutable_container",
     .family = "control",
     .params = {{"x"}},
     .help = "True when x is a list (not a tuple) or a dict: a value the jit front end must not "
             "change in place where Python would change an object it shares (an element taken "
             "out of another list).",
     .eval = [](Args& a) -> Value { return Value((a[0].is_list() && !a[0].is_tuple()) ||
                                                 a[0].is_dict()); },
     .grads = {""}},
    {.name = "range_index",
     .family = "control",
     .params = {{"x"}, {"label", Value(std::string("range"))}},
     .help = "x itself when it can bound a range (Python's int or bool, a NumPy integer "
             "scalar); TypeError '[label] <kind> object cannot be interpreted as an integer' "
             "otherwise.",
     .eval = ctl_range_index,
     .grads = {"", ""}},
    {.name = "str",
     .family = "control",
     .params = {{"x"}},
     .help = "Python's str(x): the printed form of a value as a string (None, True, 0.1, "
             "'a' inside lists, (1,) for tuples, arrays as NumPy prints them).",
     .eval = to_string,
     .grads = {""}},
    {.name = "concat",
     .family = "control",
     .params = {{"values"}},
     .variadic = true,
     .help = "A string joining str() of the values: concat(\"n = \", 3) is \"n = 3\".",
     .eval = concat,
     .grads = {""}},
    {.name = "is_nil",
     .family = "control",
     .params = {{"x"}},
     .help = "True if x is nil.",
     .eval = is_nil,
     .grads = {""}},
});

}  // namespace

}  // namespace tessera
