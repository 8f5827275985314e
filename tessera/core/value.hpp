// Value: what flows through the execution tree.
//
// A Value is nil, a bool, an int, a float, a string, an Array, a list (or a
// tuple: a list marked as one), a dict, a function, a slice or a tiled array
// (tiled.hpp). Python-like scalars (bool, int, float) are kept apart from
// 0-d arrays because they promote "weakly", as NumPy's Python scalars do:
// float32 array + 1.5 stays float32, while float32 array + float64 array is
// float64.
#pragma once

#include <atomic>
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

// How the items of a list held unboxed (NumberList) read back: Python's
// bool, int or float, or a NumPy scalar of a dtype (a 0-d array, as
// Value holds NumPy's scalars).
enum class NumberKind : uint8_t {
  py_bool,
  py_int,
  py_float,
  np_bool,
  np_int64,
  np_float64,
  np_float32,
  np_int32
};

// The items of a list of numbers of one kind, 8 bytes an item (an int64, a
// bool as 0 or 1, or a double's bits; a float32 or int32 scalar widened
// exactly), instead of a 96-byte Value each: `[0] * n`, and lists native
// loops append numbers to (Value::number_list). It lives beside the list's
// (empty) vector of Values, in the same block. While `live()`, the bits
// are the items; the first access to the list as Values (Value::as_list,
// unique_list) writes them out as Values once, under a lock (readers on
// several threads may ask at once), and the Values are the items from then
// on, for good: code that changes a list through as_list() or unique_list()
// changes the Values, and nothing reads the bits after that.
class NumberList {
 public:
  NumberList(NumberKind kind, std::vector<uint64_t> bits) : kind(kind), bits(std::move(bits)) {}
  bool live() const { return !spilled_.load(std::memory_order_acquire); }
  // Item i as the Value it stands for.
  Value item(size_t i) const;
  // The bits of `v` if it is a number of kind `k`.
  static bool bits_of(const Value& v, NumberKind k, uint64_t& out);
  // The bits of `v` if it is a number of kind `k`, a NumPy scalar (a 0-d
  // array of the kind's dtype) too: its value now, as a register holds it
  // (append of the general path, extending a list native loops made).
  static bool scalar_bits_of(const Value& v, NumberKind k, uint64_t& out);
  // The kind a Python number (bool, int, float) is held as; false otherwise.
  static bool python_kind(const Value& v, NumberKind& out);

  const NumberKind kind;
  // Changed only by the list's one holder (a unique Value), while live().
  std::vector<uint64_t> bits;

 private:
  friend class Value;
  void spill(List& into) const;
  mutable std::atomic<bool> spilled_{false};
};

// How many lists were made NumberLists, and how many of those written out
// as Values since the process started (tests check that a loop kept its
// list unboxed: tessera._core._number_list_stats).
struct NumberListStats {
  uint64_t made = 0;
  uint64_t written_out = 0;
};
NumberListStats number_list_stats();

// The deleter of a list held as a NumberList (what tells one apart, as
// TupleMark does a tuple): it frees the block of both.
struct NumberListBox;
struct NumberListMark {
  NumberListBox* box;
  void operator()(const List* items) const;  // defined after Value
};

// A number item of a compact dict (DictItems): the bits of its key and of its
// value (an int64 or a double's bits; DictItems::kinds_ says which).
struct DictNumber {
  uint64_t key;
  uint64_t value;
};

// The kind of a compact dict's value (DictItems::kinds_, bits 2-3): its bits
// are 0 (nil), 0 or 1 (a bool), an int64's or a double's.
enum class DictValueKind : uint8_t { nil = 0, boolean = 1, integer = 2, floating = 3 };

// The items of a Dict, in insertion order, held in one of two forms. While
// every key is a bool, int or float and every value one of those or nil,
// they are compact: 16 bytes an item plus a byte of kinds (native loops'
// sets and counters touch that, not two 96-byte Values an item). The first
// key or value of another kind turns them into pairs of Values for good.
// Code outside Dict sees pairs of Values: a const read of a compact dict
// writes the pairs out once (under a lock, as readers on several threads
// may ask at once) and keeps both; a non-const access goes general for
// good. size() and empty() answer from either form.
class DictItems {
 public:
  using Item = std::pair<Value, Value>;
  using iterator = std::vector<Item>::iterator;
  using const_iterator = std::vector<Item>::const_iterator;

  DictItems() = default;
  DictItems(std::vector<Item> items);
  DictItems(const DictItems& other);
  DictItems(DictItems&& other) noexcept;
  DictItems& operator=(const DictItems& other);
  DictItems& operator=(DictItems&& other) noexcept;
  ~DictItems();

  bool compact() const { return compact_.load(std::memory_order_acquire); }
  size_t size() const;
  bool empty() const { return size() == 0; }
  // The items as pairs of Values (a compact form written out, and kept).
  const std::vector<Item>& view() const;
  // The items as pairs of Values to change: the general form from now on.
  std::vector<Item>& edit();

  // What std::vector offers, on view() (const) or edit().
  const Item& operator[](size_t i) const;
  Item& operator[](size_t i);
  const Item& front() const;
  Item& front();
  const Item& back() const;
  Item& back();
  const Item* data() const;
  Item* data();
  const_iterator begin() const;
  const_iterator end() const;
  iterator begin();
  iterator end();
  template <class... Args>
  Item& emplace_back(Args&&... args);
  void push_back(Item item);
  iterator erase(const_iterator first, const_iterator last);
  // Room for n items in the form they are in.
  void reserve(size_t n);
  // No items, compact again.
  void clear();

 private:
  friend struct Dict;
  void spill() const;
  mutable std::vector<Item> general_;
  std::vector<DictNumber> numbers_;
  // Per item: the key's kind (bits 0-1: 0 bool, 1 int, 2 float), the
  // value's (bits 2-3: 0 nil, 1 bool, 2 int, 3 float).
  std::vector<uint8_t> kinds_;
  mutable std::atomic<bool> compact_{true};
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
//
// A dict of numbers only keeps its items compact (DictItems): position,
// position_int, key_at, value_at, set, set_int, set_value_at, truncate and
// contains_int work on that form without writing out Values (native loops
// use these); find and find_int return a Value's address, so they write
// the items out.
struct Dict {
  static constexpr size_t kDictIndexFrom = 8;

  DictItems items;
  size_t size() const { return items.size(); }
  const Value* find(const Value& key) const;
  // find(Value(key)) without making the key (native loops' int keys).
  const Value* find_int(int64_t key) const;
  // The position of `key` among the items, or -1 (either form, nothing written out).
  std::ptrdiff_t position(const Value& key) const;
  std::ptrdiff_t position_int(int64_t key) const;
  // Copies of the key and the value at a position (either form).
  Value key_at(size_t position) const;
  Value value_at(size_t position) const;
  // `key in d` for an int key: reads only the index once there is one.
  bool contains_int(int64_t key) const;
  void set(Value key, Value value);
  // set(Value(key), value): one probe, no Value made for the lookup.
  void set_int(int64_t key, Value value);
  // Replaces the value at a position (a roll-back's), keeping a compact form
  // compact for a number.
  void set_value_at(size_t position, Value value);
  // Native loops' int-key paths, a number given as its bits and kind (no
  // Value made while the items are compact). find_int_number: the position
  // of `key` (-1: not there) and the value's bits and kind there; -2 when
  // the items are not compact (position_int and value_at answer then).
  std::ptrdiff_t find_int_number(int64_t key, uint64_t& bits, DictValueKind& kind) const;
  // set_int(key, the number of these bits and kind).
  void set_int_number(int64_t key, uint64_t bits, DictValueKind kind);
  // What generated code needs to probe a compact dict's int keys itself
  // (the slots' layout and probe order: value.cpp): valid only while the
  // items are compact and indexed; good until the dict changes.
  struct IntProbe {
    bool valid = false;
    const uint64_t* slots = nullptr;  // two words a slot
    uint64_t mask = 0;                // slots - 1
    const DictNumber* numbers = nullptr;
    const uint8_t* kinds = nullptr;
    uint64_t size = 0;
  };
  IntProbe int_probe() const;
  // Room for n items and their index: growing to n moves and re-indexes nothing.
  void reserve(size_t n);
  void erase_at(size_t position);  // removes items[position], keeping the index true
  // Keeps the first n items (a roll-back of the keys added since): the
  // newest go first, so the index stays true without a rebuild.
  void truncate(size_t n);

 private:
  std::ptrdiff_t position_of(const Value& key, uint64_t hash) const;
  std::ptrdiff_t position_of_int(int64_t key) const;
  std::ptrdiff_t walk_to(const Value& key) const;
  bool key_equals_at(size_t position, const Value& key) const;
  uint64_t hash_at(size_t position, bool& integral) const;
  void append(Value key, Value value);
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
  // A list of numbers of one kind held unboxed (NumberList).
  static Value number_list(NumberKind kind, std::vector<uint64_t> bits);
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
  // The items as Values (a NumberList's written out, for good).
  const List& as_list() const {
    const auto& p = std::get<std::shared_ptr<const List>>(v_);
    if (const NumberListMark* m = std::get_deleter<NumberListMark>(p)) spill_numbers(*m);
    return *p;
  }
  const std::shared_ptr<const List>& list_ptr() const {
    return std::get<std::shared_ptr<const List>>(v_);
  }
  // The unboxed items of a list still held so (NumberList), or null. Only
  // a Value that alone holds the list may change them.
  NumberList* number_items() const;
  // len() and a copy of item i (0 <= i < len) of a list, without writing
  // out a NumberList's Values.
  size_t list_size() const;
  Value list_item(size_t i) const;
  // The items of a list (not a tuple) that this Value alone holds, to extend
  // in place (xs.append(x) in a loop without copying xs each time); null
  // when the list is shared (lists are values: others must not see it).
  List* unique_list() {
    if (!is_list() || is_tuple()) return nullptr;
    auto& p = std::get<std::shared_ptr<const List>>(v_);
    if (p.use_count() != 1) return nullptr;
    as_list();  // a NumberList's items written out: the Values change from now on
    return const_cast<List*>(p.get());
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
    // A compact dict holds numbers only: nothing nested to take apart.
    const auto& p = std::get<std::shared_ptr<const Dict>>(v_);
    return p && p.use_count() == 1 && !p->items.compact() && !p->items.empty();
  }
  // Moves the items of a list or dict this Value alone holds that are
  // themselves such lists or dicts into `out` (the rest stay to be freed
  // with their list).
  void take_nested(std::vector<Value>& out);
  static void spill_numbers(const NumberListMark& mark);
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

// A NumberList and the list's vector of Values (empty until written out),
// in one block.
struct NumberListBox {
  NumberListBox(NumberKind kind, std::vector<uint64_t> bits) : numbers(kind, std::move(bits)) {}
  List items;
  NumberList numbers;
};

inline void NumberListMark::operator()(const List*) const { delete box; }

inline void Value::spill_numbers(const NumberListMark& mark) {
  if (mark.box->numbers.live()) mark.box->numbers.spill(mark.box->items);
}

inline NumberList* Value::number_items() const {
  if (!is_list()) return nullptr;
  const NumberListMark* m = std::get_deleter<NumberListMark>(list_ptr());
  return m != nullptr && m->box->numbers.live() ? &m->box->numbers : nullptr;
}

inline size_t Value::list_size() const {
  if (const NumberList* n = number_items()) return n->bits.size();
  return list_ptr()->size();
}

inline Value Value::list_item(size_t i) const {
  if (const NumberList* n = number_items()) return n->item(i);
  return (*list_ptr())[i];
}

inline DictItems::DictItems(std::vector<Item> items)
    : general_(std::move(items)), compact_(false) {}
inline size_t DictItems::size() const { return compact() ? numbers_.size() : general_.size(); }
inline const std::vector<DictItems::Item>& DictItems::view() const {
  if (compact()) spill();
  return general_;
}
inline const DictItems::Item& DictItems::operator[](size_t i) const { return view()[i]; }
inline DictItems::Item& DictItems::operator[](size_t i) { return edit()[i]; }
inline const DictItems::Item& DictItems::front() const { return view().front(); }
inline DictItems::Item& DictItems::front() { return edit().front(); }
inline const DictItems::Item& DictItems::back() const { return view().back(); }
inline DictItems::Item& DictItems::back() { return edit().back(); }
inline const DictItems::Item* DictItems::data() const { return view().data(); }
inline DictItems::Item* DictItems::data() { return edit().data(); }
inline DictItems::const_iterator DictItems::begin() const { return view().begin(); }
inline DictItems::const_iterator DictItems::end() const { return view().end(); }
inline DictItems::iterator DictItems::begin() { return edit().begin(); }
inline DictItems::iterator DictItems::end() { return edit().end(); }
template <class... Args>
DictItems::Item& DictItems::emplace_back(Args&&... args) {
  return edit().emplace_back(std::forward<Args>(args)...);
}
inline void DictItems::push_back(Item item) { edit().push_back(std::move(item)); }
inline DictItems::iterator DictItems::erase(const_iterator first, const_iterator last) {
  return edit().erase(first, last);
}

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
