#include "tessera/core/value.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

thread_local int tl_nesting = 0;

}  // namespace

NestingLevel::NestingLevel(const char* op, const Value& v) {
  if (tl_nesting >= kMaxNestingDepth) {
    throw std::invalid_argument(
        error_message("[", op, "] a ", v.kind_name(), " nested more than ", kMaxNestingDepth,
                      " levels deep (in lists or dicts): ", op, " follows at most ",
                      kMaxNestingDepth, " levels; index into it to reach the inner values"));
  }
  ++tl_nesting;
}

NestingLevel::~NestingLevel() { --tl_nesting; }

void Value::take_nested(std::vector<Value>& out) {
  if (!(is_list() || is_dict()) || !owns_nested()) return;
  // Alone in holding it (use_count 1): whoever held it before has let go,
  // and the fence orders their last reads before the moves below.
  std::atomic_thread_fence(std::memory_order_acquire);
  auto take = [&out](Value& item) {
    if ((item.is_list() || item.is_dict()) && item.owns_nested()) out.push_back(std::move(item));
  };
  // The rest (leaves, and lists others hold too) go now, one level deep.
  if (is_list()) {
    auto& items = const_cast<List&>(*list_ptr());
    for (Value& item : items) take(item);
    items.clear();
  } else {
    auto& items = const_cast<Dict&>(*std::get<std::shared_ptr<const Dict>>(v_)).items;
    for (auto& [k, item] : items) {
      take(k);
      take(item);
    }
    items.clear();
  }
}

namespace {

std::mutex& number_list_spill_mutex() {
  static std::mutex m;
  return m;
}

std::atomic<uint64_t> g_number_lists_made{0};
std::atomic<uint64_t> g_number_lists_written_out{0};

double number_double(uint64_t bits) {
  double f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint64_t double_bits(double f) {
  uint64_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// The dtype of a NumPy scalar kind, and the kind of a 0-d array's dtype.
DType number_dtype(NumberKind k) {
  switch (k) {
    case NumberKind::py_bool:
    case NumberKind::np_bool: return DType::bool_;
    case NumberKind::py_int:
    case NumberKind::np_int64: return DType::int64;
    case NumberKind::np_float32: return DType::float32;
    case NumberKind::np_int32: return DType::int32;
    default: return DType::float64;
  }
}

}  // namespace

Value NumberList::item(size_t i) const {
  const uint64_t b = bits[i];
  switch (kind) {
    case NumberKind::py_bool: return Value(b != 0);
    case NumberKind::py_int: return Value(static_cast<int64_t>(b));
    case NumberKind::py_float: return Value(number_double(b));
    case NumberKind::np_bool: return Value(Array::scalar_bool(b != 0));
    case NumberKind::np_int64: return Value(Array::scalar_int(static_cast<int64_t>(b)));
    case NumberKind::np_float64: return Value(Array::scalar(number_double(b)));
    case NumberKind::np_float32: return Value(Array::scalar(number_double(b), DType::float32));
    case NumberKind::np_int32:
      return Value(Array::scalar(static_cast<double>(static_cast<int64_t>(b)), DType::int32));
  }
  return Value();
}

bool NumberList::python_kind(const Value& v, NumberKind& out) {
  switch (v.kind()) {
    case ValueKind::boolean: out = NumberKind::py_bool; return true;
    case ValueKind::integer: out = NumberKind::py_int; return true;
    case ValueKind::floating: out = NumberKind::py_float; return true;
    default: return false;
  }
}

bool NumberList::bits_of(const Value& v, NumberKind k, uint64_t& out) {
  switch (k) {
    case NumberKind::py_bool:
      if (!v.is_bool()) return false;
      out = v.as_bool() ? 1 : 0;
      return true;
    case NumberKind::py_int:
      if (!v.is_int()) return false;
      out = static_cast<uint64_t>(v.as_int());
      return true;
    case NumberKind::py_float:
      if (!v.is_float()) return false;
      out = double_bits(v.as_float());
      return true;
    default:
      // NumPy scalars come in as bits from native loops' registers only: a
      // 0-d array Value may be a view another array writes through.
      return false;
  }
}

bool NumberList::scalar_bits_of(const Value& v, NumberKind k, uint64_t& out) {
  if (k == NumberKind::py_bool || k == NumberKind::py_int || k == NumberKind::py_float)
    return bits_of(v, k, out);
  if (!v.is_array()) return false;
  const Array& a = v.as_array();
  if (a.ndim() != 0 || a.weak() || a.dtype() != number_dtype(k)) return false;
  switch (k) {
    case NumberKind::np_bool: out = a.get_bool(0) ? 1 : 0; return true;
    case NumberKind::np_int64:
    case NumberKind::np_int32: out = static_cast<uint64_t>(a.get_int(0)); return true;
    default: out = double_bits(a.get_double(0)); return true;
  }
}

void NumberList::spill(List& into) const {
  std::lock_guard<std::mutex> lock(number_list_spill_mutex());
  if (spilled_.load(std::memory_order_relaxed)) return;
  // The bits stay as they are: another thread may be reading them.
  into.reserve(bits.capacity());
  for (size_t i = 0; i < bits.size(); ++i) into.push_back(item(i));
  spilled_.store(true, std::memory_order_release);
  g_number_lists_written_out.fetch_add(1, std::memory_order_relaxed);
}

NumberListStats number_list_stats() {
  return {g_number_lists_made.load(std::memory_order_relaxed),
          g_number_lists_written_out.load(std::memory_order_relaxed)};
}

Value Value::number_list(NumberKind kind, std::vector<uint64_t> bits) {
  auto* box = new NumberListBox(kind, std::move(bits));
  g_number_lists_made.fetch_add(1, std::memory_order_relaxed);
  return Value(std::shared_ptr<const List>(&box->items, NumberListMark{box}));
}

void Value::release_nested() noexcept {
  std::vector<Value> pending;
  take_nested(pending);
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    v.take_nested(pending);  // v is left empty, and goes without recursing
  }
}

namespace {

uint64_t mix_key_bits(uint64_t x) {  // a 64-bit finaliser (splitmix's)
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Numbers that compare equal hash alike: an int beyond 2**53 compares as
// the double it rounds to (Value::equals), so it hashes as that double does.
// An integral number hashes to itself (Python's choice): a run of close keys
// fills neighbouring slots of the index instead of one cache line each.
uint64_t hash_number(double d) {
  if (d == std::floor(d) && std::fabs(d) < 9.2e18) return uint64_t(int64_t(d));
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return mix_key_bits(bits);
}

constexpr int64_t kDictExactInt = int64_t{1} << 53;

uint64_t hash_int(int64_t i) {
  if (i >= -kDictExactInt && i <= kDictExactInt) return uint64_t(i);
  return hash_number(double(i));
}

// Whether `key` is an integral number within +-2**53: such a key equals
// every other with its hash (an int, a bool, a float of that value) and no
// other key, so a slot marked so needs no comparison.
bool dict_exact_integral(const Value& key) {
  switch (key.kind()) {
    case ValueKind::boolean: return true;
    case ValueKind::integer: return key.as_int() >= -kDictExactInt && key.as_int() <= kDictExactInt;
    case ValueKind::floating: {
      const double d = key.as_float();
      return d == std::floor(d) && std::fabs(d) <= double(kDictExactInt);
    }
    default: return false;
  }
}

// A slot of the index is two words: the key's hash, then position + 1 (0:
// empty) with kDictIntegralMark for an exact integral number key.
constexpr uint64_t kDictIntegralMark = uint64_t{1} << 63;
constexpr uint64_t kDictPositionBits = 0xffffffffULL;

// Python's probe sequence: the hash's own slot, then i * 5 + 1 plus the
// hash's higher bits shifted in, five at a time; once they are spent it
// reaches every slot. Lookups stop at an empty slot, so a key's probe passes
// only slots filled before it: emptying the newest keys' slots first
// (truncate) never cuts an older key's way.
struct DictProbe {
  DictProbe(uint64_t hash, size_t mask) : mask(mask), slot(size_t(hash) & mask), perturb(hash) {}
  void next() {
    perturb >>= 5;
    slot = (slot * 5 + size_t(perturb) + 1) & mask;
  }
  size_t mask;
  size_t slot;
  uint64_t perturb;
};

}  // namespace

uint64_t hash_key(const Value& key) {
  switch (key.kind()) {
    case ValueKind::boolean: return hash_int(key.as_bool() ? 1 : 0);
    case ValueKind::integer: return hash_int(key.as_int());
    case ValueKind::floating: return hash_number(key.as_float());
    case ValueKind::string: return mix_key_bits(std::hash<std::string>{}(key.as_string()));
    case ValueKind::list: {
      uint64_t h = key.is_tuple() ? 0x7475706cULL : 0x6c697374ULL;
      for (const Value& item : key.as_list()) {
        // Nested containers (rare as keys) share one hash per kind: deep keys
        // cost no recursion, and equals still decides.
        const uint64_t ih = item.is_list() || item.is_dict() ? uint64_t(item.kind()) : hash_key(item);
        h = mix_key_bits(h ^ (ih + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
      }
      return h;
    }
    default: return mix_key_bits(uint64_t(key.kind()) + 0x51ed27ULL);
  }
}

namespace {

// Kinds of a compact item's key (bits 0-1) and value (bits 2-3).
constexpr uint8_t kDictNumBool = 0, kDictNumInt = 1, kDictNumFloat = 2;
constexpr uint8_t kDictValNil = 0, kDictValBool = 1, kDictValInt = 2, kDictValFloat = 3;

// A key's bits and kind for the compact form: false unless a bool, int or float.
bool dict_key_bits(const Value& v, uint64_t& bits, uint8_t& kind) {
  switch (v.kind()) {
    case ValueKind::boolean: bits = v.as_bool() ? 1 : 0; kind = kDictNumBool; return true;
    case ValueKind::integer: bits = uint64_t(v.as_int()); kind = kDictNumInt; return true;
    case ValueKind::floating: {
      const double d = v.as_float();
      std::memcpy(&bits, &d, sizeof bits);
      kind = kDictNumFloat;
      return true;
    }
    default: return false;
  }
}

// A value's bits and kind for the compact form: false unless nil, a bool, int or float.
bool dict_value_bits(const Value& v, uint64_t& bits, uint8_t& kind) {
  if (v.is_nil()) {
    bits = 0;
    kind = kDictValNil;
    return true;
  }
  uint8_t k;
  if (!dict_key_bits(v, bits, k)) return false;
  kind = uint8_t(k + 1);
  return true;
}

Value dict_key_of(uint64_t bits, uint8_t kind) {
  switch (kind & 3) {
    case kDictNumBool: return Value(bits != 0);
    case kDictNumInt: return Value(int64_t(bits));
    default: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return Value(d);
    }
  }
}

Value dict_value_of(uint64_t bits, uint8_t kind) {
  switch ((kind >> 2) & 3) {
    case kDictValNil: return Value();
    case kDictValBool: return Value(bits != 0);
    case kDictValInt: return Value(int64_t(bits));
    default: {
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return Value(d);
    }
  }
}

// Const reads of compact dicts on several threads write their pairs out one at a time.
std::mutex& dict_spill_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

DictItems::DictItems(const DictItems& other) {
  if (other.compact()) {
    numbers_ = other.numbers_;
    kinds_ = other.kinds_;
  } else {
    general_ = other.general_;
    compact_.store(false, std::memory_order_relaxed);
  }
}

DictItems::DictItems(DictItems&& other) noexcept
    : general_(std::move(other.general_)),
      numbers_(std::move(other.numbers_)),
      kinds_(std::move(other.kinds_)),
      compact_(other.compact()) {
  other.clear();
}

DictItems& DictItems::operator=(const DictItems& other) {
  if (this != &other) {
    DictItems copy(other);
    *this = std::move(copy);
  }
  return *this;
}

DictItems& DictItems::operator=(DictItems&& other) noexcept {
  if (this != &other) {
    general_ = std::move(other.general_);
    numbers_ = std::move(other.numbers_);
    kinds_ = std::move(other.kinds_);
    compact_.store(other.compact(), std::memory_order_release);
    other.clear();
  }
  return *this;
}

DictItems::~DictItems() = default;

void DictItems::spill() const {
  std::lock_guard<std::mutex> lock(dict_spill_mutex());
  if (!compact_.load(std::memory_order_relaxed)) return;
  // The compact form stays as it is: another thread may be reading it.
  general_.clear();
  general_.reserve(numbers_.capacity());  // what reserve() promised holds on
  for (size_t p = 0; p < numbers_.size(); ++p)
    general_.emplace_back(dict_key_of(numbers_[p].key, kinds_[p]),
                          dict_value_of(numbers_[p].value, kinds_[p]));
  compact_.store(false, std::memory_order_release);
}

std::vector<DictItems::Item>& DictItems::edit() {
  if (compact()) spill();
  if (!numbers_.empty() || numbers_.capacity() != 0) {
    std::vector<DictNumber>().swap(numbers_);
    std::vector<uint8_t>().swap(kinds_);
  }
  return general_;
}

void DictItems::reserve(size_t n) {
  if (compact()) {
    numbers_.reserve(n);
    kinds_.reserve(n);
  } else {
    general_.reserve(n);
  }
}

void DictItems::clear() {
  general_.clear();
  numbers_.clear();
  kinds_.clear();
  compact_.store(true, std::memory_order_release);
}

bool Dict::key_equals_at(size_t position, const Value& key) const {
  if (items.compact())
    return dict_key_of(items.numbers_[position].key, items.kinds_[position]).equals(key);
  return items.general_[position].first.equals(key);
}

uint64_t Dict::hash_at(size_t position, bool& integral) const {
  if (items.compact()) {
    // Ints within +-2**53 and bools hash to themselves (hash_int): no Value made.
    const uint64_t bits = items.numbers_[position].key;
    const uint8_t kind = items.kinds_[position] & 3;
    const bool exact_int =
        kind == kDictNumInt && int64_t(bits) >= -kDictExactInt && int64_t(bits) <= kDictExactInt;
    if (kind == kDictNumBool || exact_int) {
      integral = true;
      return bits;
    }
    const Value key = dict_key_of(items.numbers_[position].key, items.kinds_[position]);
    integral = dict_exact_integral(key);
    return hash_key(key);
  }
  const Value& key = items.general_[position].first;
  integral = dict_exact_integral(key);
  return hash_key(key);
}

Value Dict::key_at(size_t position) const {
  if (items.compact())
    return dict_key_of(items.numbers_[position].key, items.kinds_[position]);
  return items.general_[position].first;
}

Value Dict::value_at(size_t position) const {
  if (items.compact())
    return dict_value_of(items.numbers_[position].value, items.kinds_[position]);
  return items.general_[position].second;
}

void Dict::set_value_at(size_t position, Value value) {
  if (items.compact()) {
    uint64_t bits;
    uint8_t kind;
    if (dict_value_bits(value, bits, kind)) {
      items.numbers_[position].value = bits;
      items.kinds_[position] = uint8_t((items.kinds_[position] & 3) | (kind << 2));
      return;
    }
  }
  items.edit()[position].second = std::move(value);
}

// Adds an item (not there yet) in the form the items are in, going general
// for a key or value the compact form cannot hold.
void Dict::append(Value key, Value value) {
  if (items.compact()) {
    uint64_t kb, vb;
    uint8_t kk, vk;
    if (dict_key_bits(key, kb, kk) && dict_value_bits(value, vb, vk)) {
      items.numbers_.push_back(DictNumber{kb, vb});
      items.kinds_.push_back(uint8_t(kk | (vk << 2)));
      return;
    }
  }
  items.edit().emplace_back(std::move(key), std::move(value));
}

std::ptrdiff_t Dict::position_of(const Value& key, uint64_t hash) const {
  for (DictProbe probe(hash, slots_.size() / 2 - 1);; probe.next()) {
    const uint64_t w = slots_[2 * probe.slot + 1];
    if (w == 0) return -1;
    if (slots_[2 * probe.slot] == hash) {
      const size_t pos = size_t(w & kDictPositionBits) - 1;
      if (key_equals_at(pos, key)) return std::ptrdiff_t(pos);
    }
  }
}

std::ptrdiff_t Dict::position_of_int(int64_t key) const {
  const uint64_t hash = uint64_t(key);  // hash_int of a key within +-2**53
  for (DictProbe probe(hash, slots_.size() / 2 - 1);; probe.next()) {
    const uint64_t w = slots_[2 * probe.slot + 1];
    if (w == 0) return -1;
    if (slots_[2 * probe.slot] == hash && (w & kDictIntegralMark) != 0)
      return std::ptrdiff_t(w & kDictPositionBits) - 1;
  }
}

std::ptrdiff_t Dict::walk_to(const Value& key) const {
  const size_t n = items.size();
  for (size_t p = 0; p < n; ++p)
    if (key_equals_at(p, key)) return std::ptrdiff_t(p);
  return -1;
}

namespace {
// Whether an index of `words` words (two a slot) is too full for n + 1
// items: more than two thirds of its slots taken, as CPython's dicts.
bool dict_index_full(size_t words, size_t n) { return 3 * (n + 1) > words; }
}  // namespace

void Dict::index_item(size_t position, uint64_t hash, bool integral) {
  DictProbe probe(hash, slots_.size() / 2 - 1);
  while (slots_[2 * probe.slot + 1] != 0) probe.next();
  slots_[2 * probe.slot] = hash;
  slots_[2 * probe.slot + 1] = uint64_t(position + 1) | (integral ? kDictIntegralMark : 0);
}

void Dict::rebuild_index(size_t room) {
  size_t capacity = 16;
  // At most a third full once built (CPython's dicts: used * 3), so that the
  // index grows fourfold each time and a dict of n keys rebuilds it about
  // log4(n) times.
  while (capacity < 3 * (std::max(room, items.size()) + 1)) capacity *= 2;
  slots_.assign(2 * capacity, 0);
  for (size_t p = 0; p < items.size(); ++p) {
    bool integral;
    const uint64_t h = hash_at(p, integral);
    index_item(p, h, integral);
  }
  indexed_ = items.size();
}

void Dict::reserve(size_t n) {
  items.reserve(n);
  if (n >= kDictIndexFrom && dict_index_full(slots_.size(), n)) rebuild_index(n);
}

std::ptrdiff_t Dict::position(const Value& key) const {
  if (indexed_ == items.size() && !slots_.empty()) return position_of(key, hash_key(key));
  return walk_to(key);
}

std::ptrdiff_t Dict::position_int(int64_t key) const {
  if (key < -kDictExactInt || key > kDictExactInt || indexed_ != items.size() || slots_.empty())
    return position(Value(key));
  return position_of_int(key);
}

const Value* Dict::find(const Value& key) const {
  const std::ptrdiff_t p = position(key);
  return p < 0 ? nullptr : &items.view()[size_t(p)].second;
}

const Value* Dict::find_int(int64_t key) const {
  const std::ptrdiff_t p = position_int(key);
  return p < 0 ? nullptr : &items.view()[size_t(p)].second;
}

bool Dict::contains_int(int64_t key) const { return position_int(key) >= 0; }

void Dict::set(Value key, Value value) {
  if (items.size() + 1 < kDictIndexFrom && slots_.empty()) {
    if (const std::ptrdiff_t p = walk_to(key); p >= 0) {
      set_value_at(size_t(p), std::move(value));
      return;
    }
    append(std::move(key), std::move(value));
    return;
  }
  if (indexed_ != items.size() || slots_.empty()) rebuild_index(items.size());
  const uint64_t h = hash_key(key);
  const std::ptrdiff_t p = position_of(key, h);
  if (p >= 0) {
    set_value_at(size_t(p), std::move(value));
    return;
  }
  if (items.size() >= 0xfffffffeULL) {
    throw std::length_error("[dict] a dict holds at most 4,294,967,294 items");
  }
  const bool integral = dict_exact_integral(key);
  append(std::move(key), std::move(value));
  if (dict_index_full(slots_.size(), items.size())) {
    rebuild_index(items.size());
  } else {
    index_item(items.size() - 1, h, integral);
    indexed_ = items.size();
  }
}

void Dict::set_int(int64_t key, Value value) {
  if (uint64_t vb; items.compact()) {
    if (uint8_t vk; dict_value_bits(value, vb, vk)) {
      set_int_number(key, vb, DictValueKind(vk));
      return;
    }
  }
  if (key < -kDictExactInt || key > kDictExactInt ||
      (items.size() + 1 < kDictIndexFrom && slots_.empty())) {
    set(Value(key), std::move(value));
    return;
  }
  if (indexed_ != items.size() || slots_.empty()) rebuild_index(items.size());
  // One probe finds the key or the empty slot a new key takes (position_of_int's walk).
  const uint64_t hash = uint64_t(key);
  size_t empty_slot = 0;
  for (DictProbe probe(hash, slots_.size() / 2 - 1);; probe.next()) {
    const uint64_t w = slots_[2 * probe.slot + 1];
    if (w == 0) {
      empty_slot = probe.slot;
      break;
    }
    if (slots_[2 * probe.slot] == hash && (w & kDictIntegralMark) != 0) {
      set_value_at(size_t(w & kDictPositionBits) - 1, std::move(value));
      return;
    }
  }
  if (items.size() >= 0xfffffffeULL) {
    throw std::length_error("[dict] a dict holds at most 4,294,967,294 items");
  }
  uint64_t vb;
  uint8_t vk;
  if (items.compact() && dict_value_bits(value, vb, vk)) {
    items.numbers_.push_back(DictNumber{uint64_t(key), vb});
    items.kinds_.push_back(uint8_t(kDictNumInt | (vk << 2)));
  } else {
    items.edit().emplace_back(Value(key), std::move(value));
  }
  if (dict_index_full(slots_.size(), items.size())) {
    rebuild_index(items.size());
  } else {
    slots_[2 * empty_slot] = hash;
    slots_[2 * empty_slot + 1] = uint64_t(items.size()) | kDictIntegralMark;
    indexed_ = items.size();
  }
}

std::ptrdiff_t Dict::find_int_number(int64_t key, uint64_t& bits, DictValueKind& kind) const {
  if (!items.compact()) return -2;
  std::ptrdiff_t p = -1;
  if (key < -kDictExactInt || key > kDictExactInt) {
    p = position(Value(key));
  } else if (indexed_ == items.size() && !slots_.empty()) {
    p = position_of_int(key);
  } else {
    // A dict too small for an index: its keys compared as numbers (an int
    // within +-2**53 is exactly the double it equals), no Value made.
    const double as_double = double(key);
    for (size_t at = 0; at < items.numbers_.size(); ++at) {
      const uint64_t kb = items.numbers_[at].key;
      const uint8_t kk = items.kinds_[at] & 3;
      double d;
      std::memcpy(&d, &kb, sizeof d);
      if (kk == kDictNumFloat ? d == as_double : int64_t(kb) == key) {
        p = std::ptrdiff_t(at);
        break;
      }
    }
  }
  if (p >= 0) {
    bits = items.numbers_[size_t(p)].value;
    kind = DictValueKind((items.kinds_[size_t(p)] >> 2) & 3);
  }
  return p;
}

void Dict::set_int_number(int64_t key, uint64_t bits, DictValueKind kind) {
  const auto vk = uint8_t(kind);
  if (!items.compact()) {
    set_int(key, dict_value_of(bits, uint8_t(vk << 2)));
    return;
  }
  if (key < -kDictExactInt || key > kDictExactInt ||
      (items.size() + 1 < kDictIndexFrom && slots_.empty())) {
    set(Value(key), dict_value_of(bits, uint8_t(vk << 2)));
    return;
  }
  if (indexed_ != items.size() || slots_.empty()) rebuild_index(items.size());
  // One probe finds the key or the empty slot a new key takes (position_of_int's walk).
  const uint64_t hash = uint64_t(key);
  size_t empty_slot = 0;
  for (DictProbe probe(hash, slots_.size() / 2 - 1);; probe.next()) {
    const uint64_t w = slots_[2 * probe.slot + 1];
    if (w == 0) {
      empty_slot = probe.slot;
      break;
    }
    if (slots_[2 * probe.slot] == hash && (w & kDictIntegralMark) != 0) {
      const size_t at = size_t(w & kDictPositionBits) - 1;
      items.numbers_[at].value = bits;
      items.kinds_[at] = uint8_t((items.kinds_[at] & 3) | (vk << 2));
      return;
    }
  }
  if (items.size() >= 0xfffffffeULL) {
    throw std::length_error("[dict] a dict holds at most 4,294,967,294 items");
  }
  items.numbers_.push_back(DictNumber{uint64_t(key), bits});
  items.kinds_.push_back(uint8_t(kDictNumInt | (vk << 2)));
  if (dict_index_full(slots_.size(), items.size())) {
    rebuild_index(items.size());
  } else {
    slots_[2 * empty_slot] = hash;
    slots_[2 * empty_slot + 1] = uint64_t(items.size()) | kDictIntegralMark;
    indexed_ = items.size();
  }
}

Dict::IntProbe Dict::int_probe() const {
  IntProbe p;
  if (!items.compact() || slots_.empty() || indexed_ != items.size()) return p;
  p.valid = true;
  p.slots = slots_.data();
  p.mask = slots_.size() / 2 - 1;
  p.numbers = items.numbers_.data();
  p.kinds = items.kinds_.data();
  p.size = items.size();
  return p;
}

void Dict::truncate(size_t n) {
  if (n >= items.size()) return;
  if (indexed_ != items.size()) {  // items pushed directly: no index until the next set()
    slots_.clear();
    indexed_ = 0;
  }
  if (!slots_.empty()) {
    // The newest keys' slots are emptied newest first (DictProbe: no older
    // key's probe passes them).
    for (size_t p = items.size(); p-- > n;) {
      bool integral;
      DictProbe probe(hash_at(p, integral), slots_.size() / 2 - 1);
      while (slots_[2 * probe.slot + 1] != 0 &&
             (slots_[2 * probe.slot + 1] & kDictPositionBits) != p + 1)
        probe.next();
      if (slots_[2 * probe.slot + 1] == 0) {  // not where it should be: walked until the next set()
        slots_.clear();
        indexed_ = 0;
        break;
      }
      slots_[2 * probe.slot] = 0;
      slots_[2 * probe.slot + 1] = 0;
    }
  }
  if (items.compact()) {
    items.numbers_.resize(n);
    items.kinds_.resize(n);
  } else {
    auto& general = items.edit();
    general.erase(general.begin() + std::ptrdiff_t(n), general.end());
  }
  if (!slots_.empty()) indexed_ = items.size();
}

void Dict::erase_at(size_t position) {
  if (items.compact()) {
    items.numbers_.erase(items.numbers_.begin() + std::ptrdiff_t(position));
    items.kinds_.erase(items.kinds_.begin() + std::ptrdiff_t(position));
  } else {
    auto& general = items.edit();
    general.erase(general.begin() + std::ptrdiff_t(position));
  }
  // The positions after it moved: a dict small again walks, a big one re-indexes.
  slots_.clear();
  indexed_ = 0;
  if (items.size() >= kDictIndexFrom) rebuild_index(items.size());
}

bool Value::truthy(const char* op) const {
  switch (kind()) {
    case ValueKind::nil: return false;
    case ValueKind::boolean: return as_bool();
    case ValueKind::integer: return as_int() != 0;
    case ValueKind::floating: return as_float() != 0.0;
    case ValueKind::string: return !as_string().empty();
    case ValueKind::array: {
      const Array& a = as_array();
      if (a.size() != 1) {
        throw std::invalid_argument(error_message(
            "[", op, "] the truth value of an array with more than one element is ambiguous: got ",
            describe(), "; use all() or any()"));
      }
      return a.get_bool(0);
    }
    case ValueKind::list: return !as_list().empty();
    case ValueKind::dict: return !as_dict().items.empty();
    case ValueKind::function: return true;
    case ValueKind::slice: return true;
    case ValueKind::tiled:
      throw std::invalid_argument(error_message("[", op, "] the truth value of a ", describe(),
                                                " is ambiguous; reduce it first (e.g. all_gather_d, sum)"));
  }
  return false;
}

std::string Value::kind_name() const {
  static const char* names[] = {"nil",   "bool", "int",  "float",   "string",
                                "array", "list", "dict", "function", "slice", "tiled array"};
  if (is_tuple()) return "tuple";
  return names[static_cast<int>(kind())];
}

std::string Value::str() const {
  switch (kind()) {
    case ValueKind::nil: return "nil";
    case ValueKind::boolean: return as_bool() ? "true" : "false";
    case ValueKind::integer: return std::to_string(as_int());
    case ValueKind::floating: return float_repr(as_float());
    case ValueKind::string: return as_string();
    case ValueKind::array: return as_array().str();
    case ValueKind::list: {
      NestingLevel level("str", *this);
      std::string s = is_tuple() ? "(" : "[";
      const List& l = as_list();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) s += ", ";
        s += l[i].is_string() ? "'" + l[i].as_string() + "'" : l[i].str();
      }
      if (is_tuple()) return s + (l.size() == 1 ? ",)" : ")");
      return s + "]";
    }
    case ValueKind::dict: {
      NestingLevel level("str", *this);
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items) {
        if (!first) s += ", ";
        first = false;
        s += (k.is_string() ? "'" + k.as_string() + "'" : k.str()) + ": " +
             (v.is_string() ? "'" + v.as_string() + "'" : v.str());
      }
      return s + "}";
    }
    case ValueKind::function: return "<function " + as_function()->name() + ">";
    case ValueKind::slice: {
      auto part = [](const std::optional<int64_t>& p) { return p ? std::to_string(*p) : "nil"; };
      const Slice& s = as_slice();
      return "slice(" + part(s.start) + ", " + part(s.stop) + ", " + part(s.step) + ")";
    }
    case ValueKind::tiled: return as_tiled().str();
  }
  return "?";
}

std::string Value::describe() const {
  switch (kind()) {
    case ValueKind::nil: return "nil";
    case ValueKind::boolean: return std::string("bool ") + (as_bool() ? "true" : "false");
    case ValueKind::integer: return "int " + std::to_string(as_int());
    case ValueKind::floating: return "float " + float_repr(as_float());
    case ValueKind::string: {
      std::string s = as_string();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return "string '" + s + "'";
    }
    case ValueKind::array: {
      const Array& a = as_array();
      std::string s = std::string(dtype_name(a.dtype())) + " array of shape " + shape_str(a.shape());
      return s;
    }
    case ValueKind::list:
      return kind_name() + " of length " + std::to_string(as_list().size());
    case ValueKind::dict: return "dict of size " + std::to_string(as_dict().items.size());
    case ValueKind::function: return "function " + as_function()->name();
    case ValueKind::slice: return str();
    case ValueKind::tiled: return as_tiled().describe();
  }
  return "?";
}

namespace {

// Equality of a and b but for the items of lists and dicts: their pairs are
// pushed to `pending` for the caller's loop (nesting of any depth is
// compared without recursion).
bool equal_here(const Value& a, const Value& b,
                std::vector<std::pair<const Value*, const Value*>>& pending) {
  if (a.is_scalar() && b.is_scalar()) {
    if (a.is_float() || b.is_float()) {
      auto d = [](const Value& v) {
        return v.is_float() ? v.as_float() : v.is_int() ? double(v.as_int()) : double(v.as_bool());
      };
      return d(a) == d(b);
    }
    auto i = [](const Value& v) { return v.is_int() ? v.as_int() : int64_t(v.as_bool()); };
    return i(a) == i(b);
  }
  if (a.kind() != b.kind() || a.is_tuple() != b.is_tuple()) return false;
  switch (a.kind()) {
    case ValueKind::nil: return true;
    case ValueKind::string:
      return a.as_string() == b.as_string();
    case ValueKind::array: {
      const Array &x = a.as_array(), &y = b.as_array();
      if (x.dtype() != y.dtype() || x.shape() != y.shape()) return false;
      return x.nbytes() == 0 ||
             std::memcmp(x.contiguous().raw(), y.contiguous().raw(), x.nbytes()) == 0;
    }
    case ValueKind::list: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i].is_list() || x[i].is_dict()) {
          pending.emplace_back(&x[i], &y[i]);
        } else if (!equal_here(x[i], y[i], pending)) {
          return false;
        }
      }
      return true;
    }
    case ValueKind::dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w) return false;
        pending.emplace_back(&v, w);
      }
      return true;
    }
    case ValueKind::function:
      return a.as_function() == b.as_function();
    case ValueKind::slice:
      return a.as_slice() == b.as_slice();
    case ValueKind::tiled: {
      const TiledArray &x = a.as_tiled(), &y = b.as_tiled();
      return x.same_tiling(y) && x.locality == y.locality && Value(x.tile).equals(Value(y.tile));
    }
    default: return false;
  }
}

}  // namespace

bool Value::equals(const Value& other) const {
  std::vector<std::pair<const Value*, const Value*>> pending;
  if (!equal_here(*this, other, pending)) return false;
  while (!pending.empty()) {
    auto [a, b] = pending.back();
    pending.pop_back();
    if (!equal_here(*a, *b, pending)) return false;
  }
  return true;
}

DType scalar_dtype(const Value& v) {
  if (v.is_bool()) return DType::bool_;
  if (v.is_int()) return DType::int64;
  return DType::float64;
}

namespace {

// A list of numbers only (the common np.array(list) of a loop's appends:
// Python numbers, or NumPy scalars, 0-d arrays here, of the usual dtypes):
// one pass for the dtype as the general path promotes the items' dtypes, one
// to write them, no array per item. Empty for any other item.
template <class T>
T zero_d_item(const Array& a) {
  switch (a.dtype()) {
    case DType::float64: return static_cast<T>(*a.data<double>());
    case DType::float32: return static_cast<T>(*a.data<float>());
    case DType::int64: return static_cast<T>(*a.data<int64_t>());
    case DType::int32: return static_cast<T>(*a.data<int32_t>());
    default: return static_cast<T>(*a.data<bool>());
  }
}

std::optional<Array> scalars_to_array(const List& l) {
  DType dt = DType::bool_;
  bool first = true;
  for (const Value& e : l) {
    DType d;
    if (e.is_array()) {
      const Array& a = e.as_array();
      d = a.dtype();
      if (a.ndim() != 0 || (d != DType::float64 && d != DType::float32 && d != DType::int64 &&
                            d != DType::int32 && d != DType::bool_)) {
        return std::nullopt;
      }
    } else if (e.is_float() || e.is_int() || e.is_bool()) {
      d = scalar_dtype(e);
    } else {
      return std::nullopt;
    }
    dt = first ? d : promote(dt, d);
    first = false;
  }
  if (dt != DType::float64 && dt != DType::float32 && dt != DType::int64 &&
      dt != DType::int32 && dt != DType::bool_) {
    return std::nullopt;
  }
  Array out(dt, {static_cast<int64_t>(l.size())});
  auto fill = [&](auto* dst) {
    using T = std::remove_pointer_t<decltype(dst)>;
    for (const Value& e : l) {
      *dst++ = e.is_array()  ? zero_d_item<T>(e.as_array())
               : e.is_float() ? static_cast<T>(e.as_float())
               : e.is_int()   ? static_cast<T>(e.as_int())
                              : static_cast<T>(e.as_bool());
    }
  };
  switch (dt) {
    case DType::float64: fill(out.data<double>()); break;
    case DType::float32: fill(out.data<float>()); break;
    case DType::int64: fill(out.data<int64_t>()); break;
    case DType::int32: fill(out.data<int32_t>()); break;
    default: fill(out.data<bool>()); break;
  }
  return out;
}

}  // namespace

Array to_array(const Value& v, const char* op, const char* what) {
  switch (v.kind()) {
    case ValueKind::array: return v.as_array().contiguous();
    case ValueKind::boolean: return Array::scalar_bool(v.as_bool());
    case ValueKind::integer: return Array::scalar_int(v.as_int());
    case ValueKind::floating: return Array::scalar(v.as_float());
    case ValueKind::list: {
      // Nested lists of numbers become arrays, as np.array does.
      NestingLevel level(op, v);
      if (const NumberList* n = v.number_items(); n != nullptr && !n->bits.empty()) {
        // np.array of a list held unboxed: the bits copied, no Value made.
        const DType dt = number_dtype(n->kind);
        const auto len = static_cast<int64_t>(n->bits.size());
        Array out(dt, {len});
        const uint64_t* src = n->bits.data();
        switch (dt) {
          case DType::float64: std::memcpy(out.data<double>(), src, len * sizeof(double)); break;
          case DType::int64: std::memcpy(out.data<int64_t>(), src, len * sizeof(int64_t)); break;
          case DType::float32:
            for (int64_t i = 0; i < len; ++i)
              out.data<float>()[i] = static_cast<float>(number_double(src[i]));
            break;
          case DType::int32:
            for (int64_t i = 0; i < len; ++i)
              out.data<int32_t>()[i] = static_cast<int32_t>(static_cast<int64_t>(src[i]));
            break;
          default:
            for (int64_t i = 0; i < len; ++i) out.data<bool>()[i] = src[i] != 0;
            break;
        }
        return out;
      }
      const List& l = v.as_list();
      if (l.empty()) return Array(DType::float64, {0});
      if (std::optional<Array> flat = scalars_to_array(l)) return std::move(*flat);
      std::vector<Array> rows;
      rows.reserve(l.size());
      for (const Value& e : l) rows.push_back(to_array(e, op, what));
      DType dt = rows[0].dtype();
      for (const Array& r : rows) {
        if (r.shape() != rows[0].shape()) {
          throw std::invalid_argument(error_message(
              "[", op, "] ", what, " is a ragged nested list: elements of shapes ",
              shape_str(rows[0].shape()), " and ", shape_str(r.shape())));
        }
        dt = promote(dt, r.dtype());
      }
      Shape shape = rows[0].shape();
      shape.insert(shape.begin(), static_cast<int64_t>(rows.size()));
      Array out(dt, shape);
      int64_t inner = rows[0].size();
      dispatch(dt, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* dst = out.data<T>();
        for (size_t r = 0; r < rows.size(); ++r) {
          Array c = rows[r].astype(dt).contiguous();
          const T* src = c.data<T>();
          std::copy(src, src + inner, dst + r * inner);
        }
      });
      return out;
    }
    default:
      throw TypeError(
          error_message("[", op, "] ", what, " must be a number or an array, got ", v.describe()));
  }
}

}  // namespace tessera

namespace tessera {

DType result_type(const Value& a, const Value& b) {
  bool wa = a.is_scalar(), wb = b.is_scalar();
  DType da = wa ? scalar_dtype(a) : a.as_array().dtype();
  DType db = wb ? scalar_dtype(b) : b.as_array().dtype();
  if (wa == wb) return promote(da, db);
  // One weak scalar against one array: the array's dtype wins unless the
  // scalar is of a higher kind (int over bool, float over integers).
  DType arr = wa ? db : da, weak = wa ? da : db;
  if (weak == DType::float64 && !is_floating(arr)) return DType::float64;
  if (weak == DType::int64 && arr == DType::bool_) return DType::int64;
  return arr;
}

}  // namespace tessera
