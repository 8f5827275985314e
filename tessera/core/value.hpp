// Value: what flows through the execution tree.
//
// A Value is nil, a bool, an int, a float, a string, an Array, a list (or a
// tuple: a list marked as one), a dict, a function, a slice or a tiled array
// (tiled.hpp). Python-like scalars (bool, int, float) are kept apart from
// 0-d arrays because they promote "weakly", as NumPy's Python scalars do:
// float32 array + 1.5 stays float32, while float32 array + float64 array is
// float64.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/core/tiled.hpp"

namespace tessera {

class Value;
struct Nil {
  bool operator==(const Nil&) const = default;
};

using List = std::vector<Value>;

// The deleter of a tuple's items (Value::tuple): what tells a tuple from a list.
struct TupleMark {
  void operator()(const List* items) const;  // defined after Value, once it is complete
};

// An ordered dictionary with scalar or string keys (insertion order kept).
//
// Lookups hash: once a dict has kDictIndexFrom items, set() keeps an index of
// the items' positions by their keys' hashes (open addressing, Python's
// probe sequence), so `in`, reads and writes take constant time instead of a
// walk over the items. The index is built only by the writers (set, set_int,
// reserve, erase_at, truncate), never by a lookup, so a dict shared between
// threads is only read. Items pushed onto `items` directly are found by a walk
// until the next set() rebuilds the index; anything that removes or reorders
// items must go through erase_at or truncate.
//
// An integral number key (an int, a bool, a float such as 2.0) within
// +-2**53 hashes to itself, as Python's do: consecutive keys take
// consecutive slots, and its slot records that it is one, so find_int and
// contains_int decide from the index alone, without a Value or the items.
struct Dict {
  static constexpr size_t kDictIndexFrom = 8;

  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  // find(Value(key)) without making the key (native loops' int keys).
  const Value* find_int(int64_t key) const;
  // `key in d` for an int key: reads only the index once there is one.
  bool contains_int(int64_t key) const;
  void set(Value key, Value value);
  // set(Value(key), value): one probe, no Value made for the lookup.
  void set_int(int64_t key, Value value);
  // Room for n items and their index: growing to n moves and re-indexes nothing.
  void reserve(size_t n);
  void erase_at(size_t position);  // removes items[position], keeping the index true
  // Keeps the first n items (a roll-back of the keys added since): the
  // newest go first, so the index stays true without a rebuild.
  void truncate(size_t n);

 private:
  std::ptrdiff_t position_of(const Value& key, uint64_t hash) const;
  std::ptrdiff_t position_of_int(int64_t key) const;
  void index_item(size_t position, uint64_t hash, bool integral);
  void rebuild_index(size_t room);
  // Two words a slot (layout in value.cpp): the key's hash, then position + 1
  // with a mark for integral number keys (0: empty). Valid while
  // indexed_ == items.size().
  std::vector<uint64_t> slots_;
  size_t indexed_ = 0;
};
// A hash of a dict key consistent with Value::equals: numbers equal across
// bool, int and float hash alike (1, 1.0 and True), tuples by their items.
uint64_t hash_key(const Value& key);

// A Python-style slice start:stop:step; absent parts are nullopt.
struct Slice {
  std::optional<int64_t> start, stop, step;
  bool operator==(const Slice&) const = default;
};

// Something that can be called: a compiled function or a primitive. The
// language layer defines the implementations; core only names them.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string name() const = 0;
};

// How deep lists and dicts may nest for the walks that recurse once per level
// (printing, conversion to Python or to an array, ordering): deeper is a
// ValueError naming the op. Freeing, equality and hashing take any depth.
inline constexpr int kMaxNestingDepth = 256;

// The kinds a Value can hold, in variant order.
enum class ValueKind { nil, boolean, integer, floating, string, array, list, dict, function, slice, tiled };

class Value {
 public:
  Value() = default;
  Value(Nil) {}
  Value(bool b) : v_(b) {}
  Value(int v) : v_(static_cast<int64_t>(v)) {}
  Value(int64_t v) : v_(v) {}
  Value(double v) : v_(v) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(List l) : v_(std::make_shared<const List>(std::move(l))) {}
  Value(std::shared_ptr<const List> l) : v_(std::move(l)) {}
  // A tuple: a list that Python code sees as a tuple (indexing, printing,
  // equality, results returned to Python). Every list operation accepts it.
  // The mark travels with the items' storage (made with the TupleMark
  // deleter), so a Value keeps its size and layout.
  static Value tuple(List items) {
    return Value(std::shared_ptr<const List>(new List(std::move(items)), TupleMark{}));
  }
  Value(Dict d) : v_(std::make_shared<const Dict>(std::move(d))) {}
  Value(std::shared_ptr<const Dict> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<const Callable> f) : v_(std::move(f)) {}
  Value(Slice s) : v_(s) {}
  // A tiled array's tile is always C-contiguous (the distributed kernels
  // work on it directly): a view is packed here.
  Value(TiledArray t) : v_(make_tiled(std::move(t))) {}
  Value(std::shared_ptr<const TiledArray> t) : v_(std::move(t)) {}

  Value(const Value&) = default;
  Value(Value&&) = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) = default;
  // Lists and dicts nested to any depth are freed with an explicit stack:
  // the default destructor would recurse once per level (a list built by
  // x = [x] in a loop would overflow the stack).
  ~Value() {
    if ((is_list() || is_dict()) && owns_nested()) release_nested();
  }

  ValueKind kind() const { return static_cast<ValueKind>(v_.index()); }
  bool is_nil() const { return kind() == ValueKind::nil; }
  bool is_bool() const { return kind() == ValueKind::boolean; }
  bool is_int() const { return kind() == ValueKind::integer; }
  bool is_float() const { return kind() == ValueKind::floating; }
  // A Python-like scalar: bool, int or float.
  bool is_scalar() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == ValueKind::string; }
  bool is_array() const { return kind() == ValueKind::array; }
  // True for lists and tuples alike (both are sequences of Values).
  bool is_list() const { return kind() == ValueKind::list; }
  bool is_tuple() const {
    return is_list() && std::get_deleter<TupleMark>(list_ptr()) != nullptr;
  }
  bool is_dict() const { return kind() == ValueKind::dict; }
  bool is_function() const { return kind() == ValueKind::function; }
  bool is_slice() const { return kind() == ValueKind::slice; }
  bool is_tiled() const { return kind() == ValueKind::tiled; }
  // Scalars and arrays: anything arithmetic accepts.
  bool is_numeric() const { return is_scalar() || is_array(); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const Array& as_array() const { return std::get<Array>(v_); }
  Array& as_array() { return std::get<Array>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const std::shared_ptr<const List>& list_ptr() const {
    return std::get<std::shared_ptr<const List>>(v_);
  }
  // The items of a list (not a tuple) that this Value alone holds, to extend
  // in place (xs.append(x) in a loop without copying xs each time); null
  // when the list is shared (lists are values: others must not see it).
  List* unique_list() {
    if (!is_list() || is_tuple()) return nullptr;
    auto& p = std::get<std::shared_ptr<const List>>(v_);
    return p.use_count() == 1 ? const_cast<List*>(p.get()) : nullptr;
  }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
  // The dict this Value alone holds, to change in place (`d[k] = v` in a
  // loop without copying d each time); null when it is shared or no dict.
  Dict* unique_dict() {
    if (!is_dict()) return nullptr;
    auto& p = std::get<std::shared_ptr<const Dict>>(v_);
    return p.use_count() == 1 ? const_cast<Dict*>(p.get()) : nullptr;
  }
  const std::shared_ptr<const Callable>& as_function() const {
    return std::get<std::shared_ptr<const Callable>>(v_);
  }
  const Slice& as_slice() const { return std::get<Slice>(v_); }
  const TiledArray& as_tiled() const { return *std::get<std::shared_ptr<const TiledArray>>(v_); }
  const std::shared_ptr<const TiledArray>& tiled_ptr() const {
    return std::get<std::shared_ptr<const TiledArray>>(v_);
  }

  // Truth value as in Python/NumPy; arrays must have exactly one element.
  // Throws ValueError naming `op` otherwise.
  bool truthy(const char* op = "if") const;

  // Name of the kind for messages: "nil", "bool", "int", "float", "string",
  // "array", "list", "tuple", "dict", "function", "slice", "tiled array".
  std::string kind_name() const;
  // Printed form: arrays as NumPy prints them, lists as [a, b], strings bare.
  std::string str() const;
  // Short description for error messages: "int 3", "string 'abc'",
  // "float64 array of shape (2, 3)".
  std::string describe() const;

  // Structural equality (used for dict keys and tests); arrays compare dtype,
  // shape and elements; a tuple never equals a list, as in Python.
  bool equals(const Value& other) const;

 private:
  // True when this Value alone holds a non-empty list or dict.
  bool owns_nested() const {
    if (is_list()) {
      const auto& p = std::get<std::shared_ptr<const List>>(v_);
      return p && p.use_count() == 1 && !p->empty();
    }
    const auto& p = std::get<std::shared_ptr<const Dict>>(v_);
    return p && p.use_count() == 1 && !p->items.empty();
  }
  // Moves the items of a list or dict this Value alone holds that are
  // themselves such lists or dicts into `out` (the rest stay to be freed
  // with their list).
  void take_nested(std::vector<Value>& out);
  void release_nested() noexcept;
  static std::shared_ptr<const TiledArray> make_tiled(TiledArray t) {
    if (!t.tile.is_contiguous()) t.tile = t.tile.contiguous();
    return std::make_shared<const TiledArray>(std::move(t));
  }
  std::variant<Nil, bool, int64_t, double, std::string, Array, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<const Callable>, Slice,
               std::shared_ptr<const TiledArray>>
      v_;
};

inline void TupleMark::operator()(const List* items) const { delete items; }

// One level of a walk over nested lists and dicts that recurses (see
// kMaxNestingDepth), counted per thread: the constructor throws ValueError
// "[op] ..." naming `v` when the walk is kMaxNestingDepth levels deep.
class NestingLevel {
 public:
  NestingLevel(const char* op, const Value& v);
  ~NestingLevel();
  NestingLevel(const NestingLevel&) = delete;
  NestingLevel& operator=(const NestingLevel&) = delete;
};

// Converts a numeric Value (scalar or array) to an Array; scalars become 0-d
// arrays of their natural dtype (bool, int64, float64). Throws TypeError
// naming `op` and `what` for non-numeric values.
Array to_array(const Value& v, const char* op, const char* what = "argument");

// The dtype a scalar Value converts to by default.
DType scalar_dtype(const Value& v);

}  // namespace tessera

namespace tessera {

// NumPy 2 (NEP 50) result dtype of a binary operation: arrays are "strong",
// Python scalars are "weak" (float32 array + 1.5 -> float32; int64 array + 1.5
// -> float64; bool array + 1 -> int64). Both operands must be numeric.
DType result_type(const Value& a, const Value& b);

}  // namespace tessera
