// The python family: Python's semantics for lists, tuples, strings, dicts and
// None (see python_values.hpp), and the primitives the Python front end
// writes for `in`, `not`, unpacking, for loops and the list and dict methods.
// Lists are values: the methods return new lists, which the front end binds
// back to the variable (xs.append(v) is define(xs, append(xs, v))).
#include "tessera/primitives/python_values.hpp"

#include <algorithm>
#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/primitives/text.hpp"

namespace tessera {

namespace {

bool is_array_like(const Value& v) { return v.is_array() || v.is_tiled(); }

const char* symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "+";
    case BinaryOp::multiply: return "*";
    case BinaryOp::equal: return "==";
    case BinaryOp::not_equal: return "!=";
    case BinaryOp::less: return "<";
    case BinaryOp::less_equal: return "<=";
    case BinaryOp::greater: return ">";
    case BinaryOp::greater_equal: return ">=";
    default: return op_name(op);
  }
}

[[noreturn]] void unsupported_operands(const char* op, const char* sym, const Value& a,
                                       const Value& b) {
  throw TypeError(error_message("[", op, "] unsupported operand type(s) for ", sym, ": '",
                                python_type_name(a), "' and '", python_type_name(b), "'"));
}

// A sequence of the same kind as `like` (list, tuple) holding `items`.
Value same_kind(const Value& like, List items) {
  return like.is_tuple() ? Value::tuple(std::move(items)) : Value(std::move(items));
}

// An index into a sequence: an int, a bool or an integral 0-d array, as
// Python accepts NumPy integers.
std::optional<int64_t> as_index(const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_array() && v.as_array().ndim() == 0 && is_integer(v.as_array().dtype()) &&
      !(v.as_array().dtype() == DType::uint64 && v.as_array().get_double(0) > 9.2e18)) {
    return v.as_array().get_int(0);
  }
  return std::nullopt;
}

// Python's slice.indices(n): start, step and the number of elements.
void slice_range(const Slice& s, int64_t n, int64_t& start, int64_t& step, int64_t& len,
                 const char* op) {
  step = s.step.value_or(1);
  if (step == 0) throw std::invalid_argument(error_message("[", op, "] slice step cannot be zero"));
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    return *v < 0 ? std::max(*v + n, lower) : std::min(*v, upper);
  };
  start = adjust(s.start, step > 0 ? lower : upper);
  const int64_t stop = adjust(s.stop, step > 0 ? upper : lower);
  if (step > 0) {
    len = stop > start ? (stop - start - 1) / step + 1 : 0;
  } else {
    len = start > stop ? (start - stop - 1) / (-step) + 1 : 0;
  }
}

void check_hashable(const Value& key, const char* op) {
  // Tuples nested to any depth: an explicit stack, no recursion.
  std::vector<const Value*> pending{&key};
  while (!pending.empty()) {
    const Value& k = *pending.back();
    pending.pop_back();
    if ((k.is_list() && !k.is_tuple()) || k.is_dict() || k.is_array()) {
      throw TypeError(error_message("[", op, "] unhashable type: '", python_type_name(k), "'"));
    }
    if (k.is_tuple()) {
      for (const Value& item : k.as_list()) pending.push_back(&item);
    }
  }
}

// A NumPy scalar (a 0-d bool, integer or float array, as x[i] gives) as a
// dict key is the Python number it equals: Python's np.int64(1) and 1 are the
// same key (equal, with one hash).
Value pv_scalar_key(const Value& k) {
  if (!k.is_array()) return k;
  const Array& a = k.as_array();
  if (a.ndim() != 0 || is_complex(a.dtype())) return k;
  if (a.dtype() == DType::bool_) return Value(a.get_double(0) != 0.0);
  if (is_integer(a.dtype())) {
    if (a.dtype() == DType::uint64 && a.get_double(0) > 9.2e18) return k;
    return Value(a.get_int(0));
  }
  return Value(a.get_double(0));
}

Value pv_dict_key(const Value& key, const char* op) {
  if (key.is_tuple()) {
    const List& items = key.as_list();
    if (std::any_of(items.begin(), items.end(), [](const Value& v) { return v.is_array(); })) {
      List out;
      out.reserve(items.size());
      for (const Value& v : items) out.push_back(pv_dict_key(v, op));
      Value t = Value::tuple(std::move(out));
      check_hashable(t, op);
      return t;
    }
  }
  Value k = pv_scalar_key(key);
  check_hashable(k, op);
  return k;
}

// Row i of an array along its first axis (a 0-d array for 1-d arrays), as a
// copy of its own.
Array row_of(const Array& view, int64_t i) {
  const Array a = view.is_contiguous() ? view : view.contiguous();
  Shape sub(a.shape().begin() + 1, a.shape().end());
  Array row(a.dtype(), sub);
  const size_t bytes = row.nbytes();
  if (bytes) std::memcpy(row.raw(), static_cast<const char*>(a.raw()) + i * bytes, bytes);
  return row;
}

int64_t length_of(const Value& items) {
  return items.is_array() ? items.as_array().dim(0) : static_cast<int64_t>(items.as_list().size());
}

Value item_at(const Value& items, int64_t i) {
  return items.is_array() ? Value(row_of(items.as_array(), i)) : items.as_list()[i];
}

bool ordering(BinaryOp op, const Value& a, const Value& b, const char* opname) {
  if (a.is_scalar() && b.is_scalar()) return binary_op(op, a, b, opname).truthy(opname);
  if (is_array_like(a) || is_array_like(b)) return binary_op(op, a, b, opname).truthy(opname);
  auto holds = [op](int c) {
    switch (op) {
      case BinaryOp::less: return c < 0;
      case BinaryOp::less_equal: return c <= 0;
      case BinaryOp::greater: return c > 0;
      default: return c >= 0;
    }
  };
  if (a.is_string() && b.is_string()) return holds(a.as_string().compare(b.as_string()));
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    NestingLevel level(opname, a);
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!python_equal(x[i], y[i], opname)) return ordering(op, x[i], y[i], opname);
    }
    return holds(x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0);
  }
  throw TypeError(error_message("[", opname, "] '", symbol(op),
                                "' not supported between instances of '", python_type_name(a),
                                "' and '", python_type_name(b), "'"));
}

}  // namespace

bool python_operands(const Value& a, const Value& b) {
  if (is_array_like(a) || is_array_like(b)) return false;
  return !(a.is_scalar() && b.is_scalar());
}

namespace {

// The kind a list's items could be held unboxed as (NumberList): a list
// held so, or a list of Python numbers of one kind (NumPy scalars stay
// Values here: a 0-d array may be a view another array writes through).
bool numbers_kind(const Value& list, NumberKind& kind) {
  if (!list.is_list() || list.is_tuple()) return false;
  if (const NumberList* n = list.number_items()) {
    kind = n->kind;
    return true;
  }
  const List& items = list.as_list();
  if (items.empty() || !NumberList::python_kind(items[0], kind)) return false;
  uint64_t bits;
  for (const Value& v : items)
    if (!NumberList::bits_of(v, kind, bits)) return false;
  return true;
}

// Appends the items of `list` (of kind `kind`: numbers_kind) as bits.
void append_bits(const Value& list, NumberKind kind, std::vector<uint64_t>& out) {
  if (const NumberList* n = list.number_items()) {
    out.insert(out.end(), n->bits.begin(), n->bits.end());
    return;
  }
  uint64_t bits = 0;
  for (const Value& v : list.as_list()) {
    NumberList::bits_of(v, kind, bits);
    out.push_back(bits);
  }
}

// Small lists of Values stay Values: only a list held unboxed already, or
// a repeat this long, is made a NumberList.
constexpr size_t kNumberListFrom = 64;

}  // namespace

bool repeat_numbers(const Value& seq, int64_t n, Value& out) {
  NumberKind kind;
  if (!numbers_kind(seq, kind)) return false;
  const size_t size = seq.list_size();
  const size_t total = size * static_cast<size_t>(n);
  if (total < kNumberListFrom && seq.number_items() == nullptr) return false;
  std::vector<uint64_t> one;
  append_bits(seq, kind, one);
  std::vector<uint64_t> bits;
  // Room for a few more: `[1] + [0] * n` then puts its 1 in front in place.
  bits.reserve(total + 16);
  if (size == 1) {
    bits.assign(total, one[0]);
  } else {
    for (int64_t i = 0; i < n; ++i) bits.insert(bits.end(), one.begin(), one.end());
  }
  out = Value::number_list(kind, std::move(bits));
  return true;
}

bool join_numbers(const Value& a, const Value& b, Value& out) {
  if (a.number_items() == nullptr && b.number_items() == nullptr) return false;
  NumberKind ka, kb;
  if (!numbers_kind(a, ka) || !numbers_kind(b, kb) || ka != kb) return false;
  std::vector<uint64_t> bits;
  bits.reserve(a.list_size() + b.list_size());
  append_bits(a, ka, bits);
  append_bits(b, kb, bits);
  out = Value::number_list(ka, std::move(bits));
  return true;
}

bool join_numbers_into_temporary(Value& a, Value& b, bool take_a, Value& out) {
  Value& held = take_a ? a : b;
  const Value& other = take_a ? b : a;
  NumberList* n = held.number_items();
  if (n == nullptr || held.list_ptr().use_count() != 1 || &held == &other) return false;
  NumberKind kind;
  if (!numbers_kind(other, kind) || kind != n->kind) return false;
  std::vector<uint64_t> more;
  append_bits(other, kind, more);
  if (n->bits.capacity() - n->bits.size() < more.size()) return false;
  n->bits.insert(take_a ? n->bits.end() : n->bits.begin(), more.begin(), more.end());
  out = std::move(held);
  return true;
}

Value sequence_add(const Value& a, const Value& b, const char* op) {
  if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    if (Value joined; join_numbers(a, b, joined)) return joined;
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return same_kind(a, std::move(out));
  }
  if (a.is_string() || a.is_list()) {
    const std::string name = python_type_name(a);
    throw TypeError(error_message("[", op, "] can only concatenate ", name, " (not \"",
                                  python_type_name(b), "\") to ", name));
  }
  unsupported_operands(op, "+", a, b);
}

Value sequence_inplace_add(const Value& a, const Value& b, const char* op) {
  if (!a.is_list() || a.is_tuple()) return sequence_add(a, b, op);
  Value more = iteration_items(b, op);
  List out = a.as_list();
  for (int64_t i = 0; i < length_of(more); ++i) out.push_back(item_at(more, i));
  return Value(std::move(out));
}

Value sequence_multiply(const Value& a, const Value& b, const char* op) {
  const bool a_seq = a.is_string() || a.is_list();
  const Value& seq = a_seq ? a : b;
  const Value& count = a_seq ? b : a;
  if (!(seq.is_string() || seq.is_list())) unsupported_operands(op, "*", a, b);
  if (!count.is_int() && !count.is_bool()) {
    throw TypeError(error_message("[", op, "] can't multiply sequence by non-int of type '",
                                  python_type_name(count), "'"));
  }
  const int64_t n = std::max<int64_t>(count.is_int() ? count.as_int() : count.as_bool(), 0);
  const size_t size = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
  if (size && n > static_cast<int64_t>((size_t{1} << 34) / size)) {
    throw MemoryError(error_message("[", op, "] repeating a ", python_type_name(seq),
                                    " of length ", size, " ", n, " times is too large"));
  }
  if (seq.is_string()) {
    std::string out;
    out.reserve(size * n);
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  if (Value numbers; repeat_numbers(seq, n, numbers)) return numbers;
  List out;
  // A long list gets room for a few more items: `[1] + [0] * n` then puts
  // its 1 in front in place (arithmetic.cpp, join_into_temporary) instead
  // of copying n items into a fresh block (page faults and all).
  const size_t total = size * static_cast<size_t>(n);
  out.reserve(total + (total >= 1024 ? 16 : 0));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return same_kind(seq, std::move(out));
}

namespace {

// Python's == of a and b but for the items of lists and dicts, whose pairs
// are pushed to `pending` (nesting of any depth without recursion).
bool python_equal_here(const Value& a, const Value& b, const char* op,
                       std::vector<std::pair<const Value*, const Value*>>& pending) {
  if (is_array_like(a) || is_array_like(b)) {
    return binary_op(BinaryOp::equal, a, b, op).truthy(op);
  }
  if (a.is_scalar() && b.is_scalar()) return a.equals(b);
  if (a.kind() != b.kind() || a.is_tuple() != b.is_tuple()) return false;
  if (a.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    // In reverse: the caller takes pairs from the back, so items are
    // compared in order (an array item that cannot be compared raises the
    // error of the first such pair, as Python would).
    for (size_t i = x.size(); i-- > 0;) pending.emplace_back(&x[i], &y[i]);
    return true;
  }
  if (a.is_dict()) {
    const Dict &x = a.as_dict(), &y = b.as_dict();
    if (x.items.size() != y.items.size()) return false;
    const size_t first = pending.size();
    for (const auto& [k, v] : x.items) {
      const Value* w = y.find(k);
      if (!w) return false;
      pending.emplace_back(&v, w);
    }
    std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first), pending.end());
    return true;
  }
  return a.equals(b);
}

}  // namespace

bool python_equal(const Value& a, const Value& b, const char* op) {
  std::vector<std::pair<const Value*, const Value*>> pending;
  if (!python_equal_here(a, b, op, pending)) return false;
  while (!pending.empty()) {
    auto [x, y] = pending.back();
    pending.pop_back();
    if (!python_equal_here(*x, *y, op, pending)) return false;
  }
  return true;
}

Value python_compare(BinaryOp op, const Value& a, const Value& b, const char* opname) {
  switch (op) {
    case BinaryOp::equal: return python_equal(a, b, opname);
    case BinaryOp::not_equal: return !python_equal(a, b, opname);
    default: return ordering(op, a, b, opname);
  }
}

bool python_contains(const Value& container, const Value& item, const char* op) {
  switch (container.kind()) {
    case ValueKind::dict:
      return container.as_dict().position(pv_dict_key(item, op)) >= 0;
    case ValueKind::string:
      if (!item.is_string()) {
        throw TypeError(error_message("[", op,
                                      "] 'in <string>' requires string as left operand, not ",
                                      python_type_name(item)));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case ValueKind::list:
      for (const Value& v : container.as_list()) {
        if (python_equal(v, item, op)) return true;
      }
      return false;
    case ValueKind::array: {
      // NumPy's ndarray.__contains__: (container == item).any().
      Value eq = binary_op(BinaryOp::equal, container, item, op);
      if (!eq.is_array()) return eq.truthy(op);
      const Array& e = eq.as_array();
      for (int64_t i = 0; i < e.size(); ++i) {
        if (e.get_bool(i)) return true;
      }
      return false;
    }
    default:
      throw TypeError(error_message("[", op, "] argument of type '", python_type_name(container),
                                    "' is not iterable"));
  }
}

Value iteration_items(const Value& v, const char* op) {
  switch (v.kind()) {
    case ValueKind::list: return v;
    case ValueKind::array:
      if (v.as_array().ndim() == 0) {
        throw TypeError(error_message("[", op, "] iteration over a 0-d array"));
      }
      return v;
    case ValueKind::string: {
      List chars;
      for (std::string& c : utf8_chars(v.as_string())) chars.emplace_back(std::move(c));
      return Value(std::move(chars));
    }
    case ValueKind::dict: {
      List keys;
      for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
      return Value(std::move(keys));
    }
    default:
      throw TypeError(
          error_message("[", op, "] '", python_type_name(v), "' object is not iterable"));
  }
}

Value python_dict_key(const Value& key, const char* op) { return pv_dict_key(key, op); }

Value sequence_getitem(const Value& container, const List& indices, const char* op) {
  if (container.is_dict()) {
    const Value key = pv_dict_key(indices.size() == 1 ? indices[0] : Value::tuple(indices), op);
    const Value* found = container.as_dict().find(key);
    if (!found) {
      throw KeyError(error_message("[", op, "] key ", python_repr(key), " is not in the dict"));
    }
    return *found;
  }
  const std::string name = python_type_name(container);
  const bool is_str = container.is_string();
  if (indices.size() != 1 || !(as_index(indices[0]) || indices[0].is_slice())) {
    const std::string got =
        indices.size() != 1 ? std::string("tuple") : python_type_name(indices[0]);
    throw TypeError(error_message("[", op, "] ", name, " indices must be integers",
                                  is_str ? "" : " or slices", ", not ", got));
  }
  if (is_str && as_index(indices[0])) {
    // s[i] of an ASCII string: its byte, without splitting the whole string
    // into characters at every read (a loop over s[i] was quadratic).
    const std::string& text = container.as_string();
    if (std::all_of(text.begin(), text.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
      const int64_t n = static_cast<int64_t>(text.size());
      const int64_t i = *as_index(indices[0]);
      if (i < -n || i >= n) {
        throw std::out_of_range(error_message("[", op, "] ", name, " index ", i,
                                              " out of range (length ", n, ")"));
      }
      return Value(std::string(1, text[static_cast<size_t>(i < 0 ? i + n : i)]));
    }
  }
  if (!is_str && container.number_items() != nullptr && as_index(indices[0])) {
    // An item of a list held unboxed, without writing the list out as Values.
    const auto n = static_cast<int64_t>(container.list_size());
    const int64_t i = *as_index(indices[0]);
    if (i < -n || i >= n) {
      throw std::out_of_range(error_message("[", op, "] ", name, " index ", i,
                                            " out of range (length ", n, ")"));
    }
    return container.list_item(static_cast<size_t>(i < 0 ? i + n : i));
  }
  std::vector<std::string> chars;
  if (is_str) chars = utf8_chars(container.as_string());
  const List* items = is_str ? nullptr : &container.as_list();
  const int64_t n = static_cast<int64_t>(is_str ? chars.size() : items->size());
  if (auto i = as_index(indices[0])) {
    if (*i < -n || *i >= n) {
      throw std::out_of_range(error_message("[", op, "] ", name, " index ", *i,
                                            " out of range (length ", n, ")"));
    }
    const int64_t k = *i < 0 ? *i + n : *i;
    return is_str ? Value(chars[k]) : (*items)[k];
  }
  int64_t start, step, len;
  slice_range(indices[0].as_slice(), n, start, step, len, op);
  if (is_str) {
    std::string out;
    for (int64_t i = 0; i < len; ++i) out += chars[start + i * step];
    return Value(std::move(out));
  }
  List out;
  out.reserve(len);
  for (int64_t i = 0; i < len; ++i) out.push_back((*items)[start + i * step]);
  return same_kind(container, std::move(out));
}

Value sequence_setitem(const Value& container, const Value& value, const List& indices,
                       const char* op) {
  if (container.is_dict()) {
    Value key = pv_dict_key(indices.size() == 1 ? indices[0] : Value::tuple(indices), op);
    Dict d = container.as_dict();
    d.set(std::move(key), value);
    return Value(std::move(d));
  }
  if (!container.is_list() || container.is_tuple()) {
    throw TypeError(error_message("[", op, "] '", python_type_name(container),
                                  "' object does not support item assignment"));
  }
  List items = container.as_list();
  const int64_t n = static_cast<int64_t>(items.size());
  if (indices.size() == 1) {
    if (auto i = as_index(indices[0])) {
      if (*i < -n || *i >= n) {
        throw std::out_of_range(error_message("[", op, "] list assignment index ", *i,
                                              " out of range (length ", n, ")"));
      }
      items[*i < 0 ? *i + n : *i] = value;
      return Value(std::move(items));
    }
    if (indices[0].is_slice()) {
      int64_t start, step, len;
      slice_range(indices[0].as_slice(), n, start, step, len, op);
      Value src = iteration_items(value, op);
      List repl;
      for (int64_t i = 0; i < length_of(src); ++i) repl.push_back(item_at(src, i));
      if (step == 1) {
        items.erase(items.begin() + start, items.begin() + start + len);
        items.insert(items.begin() + start, repl.begin(), repl.end());
        return Value(std::move(items));
      }
      if (static_cast<int64_t>(repl.size()) != len) {
        throw std::invalid_argument(error_message(
            "[", op, "] attempt to assign sequence of size ", repl.size(),
            " to extended slice of size ", len));
      }
      for (int64_t i = 0; i < len; ++i) items[start + i * step] = repl[i];
      return Value(std::move(items));
    }
  }
  const std::string got = indices.size() != 1 ? std::string("tuple") : python_type_name(indices[0]);
  throw TypeError(error_message("[", op, "] list indices must be integers or slices, not ", got));
}

namespace {

Value unpack(Args& a) {
  Value items = iteration_items(a[0], "unpack");
  const int64_t want = a.integer(1), got = length_of(items);
  if (got > want) {
    throw std::invalid_argument(
        error_message("[unpack] too many values to unpack (expected ", want, ")"));
  }
  if (got < want) {
    throw std::invalid_argument(error_message("[unpack] not enough values to unpack (expected ",
                                              want, ", got ", got, ")"));
  }
  return items;
}

Value to_sequence(Args& a, bool tuple) {
  Value items = iteration_items(a[0], a.op());
  List out;
  const int64_t n = length_of(items);
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) out.push_back(item_at(items, i));
  return tuple ? Value::tuple(std::move(out)) : Value(std::move(out));
}

const List& list_arg(Args& a, size_t i) {
  if (!a[i].is_list() || a[i].is_tuple()) a.type_error(i, "a list");
  return a[i].as_list();
}

const Dict& dict_arg(Args& a, size_t i) {
  if (!a[i].is_dict()) a.type_error(i, "a dict");
  return a[i].as_dict();
}

Value pop(Args& a) {
  if (a[0].is_dict()) {
    if (a.is_nil(1) && !a.boolean(3)) {
      throw TypeError(error_message("[pop] dict.pop expected at least 1 argument, got 0"));
    }
    const Value key = pv_dict_key(a[1], a.op());
    Dict d = a[0].as_dict();
    auto it = std::find_if(d.items.begin(), d.items.end(),
                           [&](const auto& kv) { return kv.first.equals(key); });
    if (it == d.items.end()) {
      if (a.boolean(3)) return Value::tuple(List{a[0], a[2]});
      throw KeyError(error_message("[pop] key ", python_repr(a[1]), " is not in the dict"));
    }
    Value v = it->second;
    d.erase_at(size_t(it - d.items.begin()));
    return Value::tuple(List{Value(std::move(d)), std::move(v)});
  }
  List items = list_arg(a, 0);
  const int64_t n = static_cast<int64_t>(items.size());
  if (n == 0) throw std::out_of_range("[pop] pop from empty list");
  int64_t i = a.is_nil(1) ? -1 : a.integer(1);
  if (i < -n || i >= n) {
    throw std::out_of_range(error_message("[pop] pop index ", i, " out of range (length ", n, ")"));
  }
  if (i < 0) i += n;
  Value v = items[i];
  items.erase(items.begin() + i);
  return Value::tuple(List{Value(std::move(items)), std::move(v)});
}

Value insert(Args& a) {
  List items = list_arg(a, 0);
  const int64_t n = static_cast<int64_t>(items.size());
  int64_t i = a.integer(1);
  if (i < 0) i = std::max<int64_t>(i + n, 0);
  i = std::min(i, n);
  items.insert(items.begin() + i, a[2]);
  return Value(std::move(items));
}

Value index_of(Args& a) {
  const Value& seq = a[0];
  if (seq.is_string()) {
    if (!a[1].is_string()) a.type_error(1, "a string");
    const std::vector<std::string> chars = utf8_chars(seq.as_string());
    const int64_t n = static_cast<int64_t>(chars.size());
    int64_t start = a.integer(2), stop = a.is_nil(3) ? n : a.integer(3);
    if (start < 0) start = std::max<int64_t>(start + n, 0);
    if (stop < 0) stop = std::max<int64_t>(stop + n, 0);
    start = std::min(start, n);
    stop = std::min(stop, n);
    std::string hay;
    std::vector<int64_t> at;  // byte offset -> character index
    for (int64_t i = start; i < stop; ++i) {
      for (size_t b = 0; b < chars[i].size(); ++b) at.push_back(i);
      hay += chars[i];
    }
    size_t found = hay.find(a[1].as_string());
    if (found == std::string::npos) throw std::invalid_argument("[index] substring not found");
    return Value(found < at.size() ? at[found] : stop);
  }
  if (!seq.is_list()) a.type_error(0, "a list, tuple or string");
  const List& items = seq.as_list();
  const int64_t n = static_cast<int64_t>(items.size());
  int64_t start = a.integer(2), stop = a.is_nil(3) ? n : a.integer(3);
  if (start < 0) start = std::max<int64_t>(start + n, 0);
  if (stop < 0) stop = std::max<int64_t>(stop + n, 0);
  for (int64_t i = start; i < std::min(stop, n); ++i) {
    if (python_equal(items[i], a[1], a.op())) return Value(i);
  }
  if (seq.is_tuple()) throw std::invalid_argument("[index] tuple.index(x): x not in tuple");
  throw std::invalid_argument(error_message("[index] ", python_repr(a[1]), " is not in list"));
}

Value count(Args& a) {
  const Value& seq = a[0];
  if (seq.is_string()) {
    if (!a[1].is_string()) a.type_error(1, "a string");
    const std::string &s = seq.as_string(), &sub = a[1].as_string();
    if (sub.empty()) return Value(utf8_length(s) + 1);
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  if (!seq.is_list()) a.type_error(0, "a list, tuple or string");
  int64_t n = 0;
  for (const Value& v : seq.as_list()) n += python_equal(v, a[1], a.op());
  return Value(n);
}

Value update(Args& a) {
  Dict d = dict_arg(a, 0);
  if (a[1].is_dict()) {
    for (const auto& [k, v] : a[1].as_dict().items) d.set(k, v);
    return Value(std::move(d));
  }
  Value pairs = iteration_items(a[1], a.op());
  for (int64_t i = 0; i < length_of(pairs); ++i) {
    Value p = item_at(pairs, i);
    if (!p.is_list() || p.as_list().size() != 2) {
      throw std::invalid_argument(error_message(
          "[update] dictionary update sequence element #", i, " is not a (key, value) pair: got ",
          p.describe()));
    }
    d.set(pv_dict_key(p.as_list()[0], a.op()), p.as_list()[1]);
  }
  return Value(std::move(d));
}

// `views`: the primitive hands back its array argument itself (a loop over
// an array's rows must see the array, not a copy; see PrimitiveSpec::views).
PrimitiveSpec python_spec(const char* name, std::vector<Param> params, std::string help,
                          std::function<Value(Args&)> eval, bool views = false) {
  PrimitiveSpec spec{.name = name,
                     .family = "python",
                     .params = std::move(params),
                     .help = std::move(help),
                     .eval = std::move(eval),
                     .views = views};
  spec.grads.assign(spec.params.size(), "");
  return spec;
}

const bool registered_python_values = register_primitives({
    python_spec("contains", {{"container"}, {"item"}},
                "Python's `item in container`: a key of a dict, a substring of a string, an "
                "element of a list or tuple (compared with ==); for an array NumPy's "
                "(container == item).any().",
                [](Args& a) -> Value { return python_contains(a[0], a[1], a.op()); }),
    python_spec("not_", {{"x"}},
                "Python's `not x`: true for None, False, zero, empty strings, lists and dicts; an "
                "array must have exactly one element (ValueError otherwise).",
                [](Args& a) -> Value { return !a[0].truthy("not"); }),
    // x itself for lists, tuples and arrays, so its cotangent is g (a, b =
    // split(x, 2) differentiates through the items' getitem).
    with_grads(python_spec("unpack", {{"x"}, {"count"}},
                           "x checked for Python's `a, b = x` with `count` targets: x's items (a "
                           "dict's keys, a string's characters; lists, tuples and arrays (first "
                           "axis) themselves). ValueError 'too many values to unpack (expected "
                           "N)' or 'not enough values to unpack (expected N, got M)' otherwise.",
                           unpack, /*views=*/true),
               {"g", ""}),
    python_spec("iterate", {{"x"}},
                "What a Python for loop over x visits, indexable by 0..len-1: lists, tuples and "
                "arrays themselves, a dict's keys, a string's characters. TypeError for values "
                "that are not iterable.",
                [](Args& a) -> Value { return iteration_items(a[0], a.op()); }, /*views=*/true),
    python_spec("to_list", {{"x"}},
                "Python's list(x): the items of x as a list (an array's rows or elements, a dict's "
                "keys, a string's characters).",
                [](Args& a) -> Value { return to_sequence(a, false); }),
    python_spec("to_tuple", {{"x"}}, "Python's tuple(x): the items of x as a tuple.",
                [](Args& a) -> Value { return to_sequence(a, true); }),
    python_spec("pop", {{"x"}, opt("key", Value()), opt("default", Value()),
                        opt("has_default", Value(false))},
                "Python's x.pop(key) as a value: tuple(new x, popped item). For a list `key` is "
                "the index (the last when nil; IndexError when out of range); for a dict the key "
                "(KeyError when missing, unless has_default, which gives `default`).",
                pop),
    python_spec("insert", {{"list"}, {"index"}, {"item"}},
                "Python's list.insert as a value: a new list with item before index (clamped "
                "to the list, negative from the end).",
                insert),
    python_spec("index", {{"x"}, {"item"}, opt("start", Value(int64_t{0})), opt("stop", Value())},
                "Python's x.index(item[, start[, stop]]) for lists, tuples (first equal element) "
                "and strings (first substring); ValueError when absent.",
                index_of),
    python_spec("count", {{"x"}, {"item"}},
                "Python's x.count(item): equal elements of a list or tuple, non-overlapping "
                "occurrences of a substring in a string.",
                count),
    python_spec("reverse", {{"list"}}, "Python's list.reverse as a value: the reversed list.",
                [](Args& a) -> Value {
                  List items = list_arg(a, 0);
                  std::reverse(items.begin(), items.end());
                  return Value(std::move(items));
                }),
    python_spec("extend", {{"list"}, {"items"}},
                "Python's list.extend as a value: a new list with the items of `items` (any "
                "iterable: list, tuple, array rows, dict keys, string characters) appended.",
                [](Args& a) -> Value {
                  List items = list_arg(a, 0);
                  Value more = iteration_items(a[1], a.op());
                  for (int64_t i = 0; i < length_of(more); ++i) items.push_back(item_at(more, i));
                  return Value(std::move(items));
                }),
    python_spec("remove", {{"list"}, {"item"}},
                "Python's list.remove as a value: the list without its first element equal to "
                "item; ValueError when there is none.",
                [](Args& a) -> Value {
                  List items = list_arg(a, 0);
                  for (size_t i = 0; i < items.size(); ++i) {
                    if (python_equal(items[i], a[1], a.op())) {
                      items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
                      return Value(std::move(items));
                    }
                  }
                  throw std::invalid_argument("[remove] list.remove(x): x not in list");
                }),
    python_spec("clear", {{"x"}}, "Python's list.clear / dict.clear as a value: an empty one.",
                [](Args& a) -> Value {
                  if (a[0].is_dict()) return Value(Dict{});
                  list_arg(a, 0);
                  return Value(List{});
                }),
    with_grads(python_spec("copy_value", {{"x"}},
                "Python's x.copy(): an array gets its own buffer (as the copy primitive); lists, "
                "tuples, dicts and strings are values, so the copy is the value itself.",
                [](Args& a) -> Value {
                  if (a[0].is_array()) return call_primitive("copy", std::vector<Value>{a[0]});
                  return a[0];
                }), {"g"}),
    python_spec("get", {{"dict"}, {"key"}, opt("default", Value())},
                "Python's d.get(key, default): the value of key in the dict, or default (nil).",
                [](Args& a) -> Value {
                  const Value* v = dict_arg(a, 0).find(pv_dict_key(a[1], a.op()));
                  return v ? *v : a[2];
                }),
    python_spec("keys", {{"dict"}}, "Python's d.keys() as a list, in insertion order.",
                [](Args& a) -> Value {
                  List out;
                  for (const auto& kv : dict_arg(a, 0).items) out.push_back(kv.first);
                  return Value(std::move(out));
                }),
    python_spec("values", {{"dict"}}, "Python's d.values() as a list, in insertion order.",
                [](Args& a) -> Value {
                  List out;
                  for (const auto& kv : dict_arg(a, 0).items) out.push_back(kv.second);
                  return Value(std::move(out));
                }),
    python_spec("items", {{"dict"}},
                "Python's d.items() as a list of (key, value) tuples, in insertion order.",
                [](Args& a) -> Value {
                  List out;
                  for (const auto& kv : dict_arg(a, 0).items) {
                    out.push_back(Value::tuple(List{kv.first, kv.second}));
                  }
                  return Value(std::move(out));
                }),
    python_spec("update", {{"dict"}, {"other"}},
                "Python's d.update(other) as a value: a new dict with the entries of other (a "
                "dict or a list of (key, value) pairs) set.",
                update),
});

}  // namespace

}  // namespace tessera
