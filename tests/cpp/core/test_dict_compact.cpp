// Dicts of numbers held compact (DictItems): the same answers as the general
// form, conversions at the first non-number, a const read that writes the
// items out and keeps the compact form readable, copies, and roll-back cuts.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "tessera/core/value.hpp"

using namespace tessera;

namespace {

// A dict in the general form from its start (the oracle for the compact one).
Dict dcompact_general() {
  Dict d;
  d.items.edit();
  return d;
}

// The same Python number: kind and bits (0.0 is not -0.0, 1 is not True).
bool dcompact_same(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_nil()) return true;
  if (a.is_bool()) return a.as_bool() == b.as_bool();
  if (a.is_int()) return a.as_int() == b.as_int();
  if (a.is_float()) {
    const double x = a.as_float(), y = b.as_float();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return a.equals(b);
}

// Keys that crowd the index: runs of ints, multiples of large powers of two,
// negatives, both sides of 2**53, and floats and bools equal to some of them.
std::vector<Value> dcompact_keys() {
  const int64_t exact = int64_t{1} << 53;
  std::vector<Value> keys;
  for (int64_t i = 0; i < 200; ++i) keys.emplace_back(i);
  for (int64_t i = 1; i < 100; ++i) keys.emplace_back(i << 40);
  for (int64_t i = 1; i < 100; ++i) keys.emplace_back(-i * 4096);
  for (int64_t delta : {3, 2, 1, 0, -1, -2}) {
    keys.emplace_back(exact + delta);
    keys.emplace_back(-exact - delta);
  }
  keys.emplace_back(std::numeric_limits<int64_t>::max());
  keys.emplace_back(std::numeric_limits<int64_t>::min());
  for (int64_t i = 0; i < 60; ++i) keys.emplace_back(0.5 + double(i));  // not integral
  keys.emplace_back(static_cast<double>(exact + 2));  // the int 2**53 + 2
  keys.emplace_back(double(int64_t{7} << 40));        // an int key already
  keys.emplace_back(true);                            // 1
  keys.emplace_back(-0.0);                            // 0
  keys.emplace_back(1e300);
  keys.emplace_back(-1.5);
  return keys;
}

// Both dicts hold the same keys (the first kind set), values and order, and
// find every probe at the same position on every path.
void dcompact_agree(const Dict& compact, const Dict& general, const std::vector<Value>& probes) {
  ASSERT_EQ(compact.size(), general.size());
  for (size_t p = 0; p < compact.size(); ++p) {
    ASSERT_TRUE(dcompact_same(compact.key_at(p), general.key_at(p))) << p;
    ASSERT_TRUE(dcompact_same(compact.value_at(p), general.value_at(p))) << p;
  }
  for (const Value& k : probes) {
    ASSERT_EQ(compact.position(k), general.position(k)) << k.describe();
    if (k.is_int()) {
      ASSERT_EQ(compact.position_int(k.as_int()), general.position(k)) << k.describe();
      ASSERT_EQ(compact.contains_int(k.as_int()), general.position(k) >= 0) << k.describe();
    }
  }
}

std::vector<Value> dcompact_probes(const std::vector<Value>& keys) {
  std::vector<Value> probes = keys;
  for (const Value& k : keys) {
    if (k.is_int() && k.as_int() < std::numeric_limits<int64_t>::max()) {
      probes.emplace_back(k.as_int() + 1);
      probes.emplace_back(static_cast<double>(k.as_int()));
    }
  }
  probes.emplace_back(false);
  probes.emplace_back(0.25);
  probes.emplace_back("text");
  probes.emplace_back(Value::tuple(List{Value(1)}));
  return probes;
}

}  // namespace

// Set by set() and set_int() with values of every kind the compact form
// holds (nil, bool, int, float): compact throughout, and the same as the
// general form at every size (walked while small, then indexed).
TEST(DictCompact, AgreesWithTheGeneralForm) {
  const std::vector<Value> keys = dcompact_keys();
  const std::vector<Value> probes = dcompact_probes(keys);
  Dict compact, general = dcompact_general();
  ASSERT_TRUE(compact.items.compact());
  ASSERT_FALSE(general.items.compact());
  for (size_t n = 0; n < keys.size(); ++n) {
    const Value value = n % 4 == 0   ? Value()
                        : n % 4 == 1 ? Value(n % 3 == 0)
                        : n % 4 == 2 ? Value(int64_t(n) - 100)
                                     : Value(double(n) / 8);
    if (keys[n].is_int() && n % 2 == 0) {
      compact.set_int(keys[n].as_int(), value);
      general.set_int(keys[n].as_int(), value);
    } else {
      compact.set(keys[n], value);
      general.set(keys[n], value);
    }
    if (n == 3 || n == 9 || n == 40) dcompact_agree(compact, general, probes);
  }
  EXPECT_TRUE(compact.items.compact());
  dcompact_agree(compact, general, probes);
  // A key already there keeps its first kind and takes the new value: 1.0
  // and True find the int 1; the float 2**53 + 2 the int.
  compact.set(Value(1.0), Value(2.5));
  general.set(Value(1.0), Value(2.5));
  compact.set_value_at(5, Value(true));
  general.set_value_at(5, Value(true));
  dcompact_agree(compact, general, probes);
  EXPECT_TRUE(compact.key_at(1).is_int());
  EXPECT_TRUE(dcompact_same(compact.value_at(1), Value(2.5)));
  EXPECT_TRUE(compact.items.compact());
}

// The first key or value of another kind turns the items into Values, in
// order, each number of its own kind; later writes go to the general form.
TEST(DictCompact, ANonNumberConvertsOnce) {
  for (const Value& other : {Value("text"), Value(List{Value(1)}), Value::tuple(List{Value(2)})}) {
    Dict d, oracle = dcompact_general();
    for (int64_t i = 0; i < 50; ++i) {
      const Value key = i % 5 == 0 ? Value(double(i) + 0.5) : i % 7 == 0 ? Value(i == 0) : Value(i);
      d.set(key, Value(i * 3));
      oracle.set(key, Value(i * 3));
    }
    ASSERT_TRUE(d.items.compact());
    // A non-number value of an existing key, then a non-number key.
    d.set(Value(int64_t{3}), other);
    oracle.set(Value(int64_t{3}), other);
    EXPECT_FALSE(d.items.compact());
    d.set(other.is_list() && !other.is_tuple() ? Value("list") : other, Value(1));
    oracle.set(other.is_list() && !other.is_tuple() ? Value("list") : other, Value(1));
    d.set_int(1000, Value(-1));
    oracle.set_int(1000, Value(-1));
    ASSERT_EQ(d.items.size(), oracle.items.size());
    for (size_t p = 0; p < d.items.size(); ++p) {
      EXPECT_TRUE(dcompact_same(d.items[p].first, oracle.items[p].first)) << p;
      EXPECT_TRUE(dcompact_same(d.items[p].second, oracle.items[p].second)) << p;
    }
    EXPECT_TRUE(d.find_int(3)->equals(other));
    EXPECT_TRUE(d.find(Value(int64_t{1000}))->equals(Value(-1)));
  }
}

// A const read writes the items out and keeps them both ways: the Values
// read, the positions and copies, and the first write after it; a copy of a
// compact dict is compact and its own.
TEST(DictCompact, ConstReadsAndCopies) {
  Dict d;
  for (int64_t i = 0; i < 300; ++i) d.set_int(i * 5, Value(i % 2 == 0));
  const Dict copy = d;
  EXPECT_TRUE(copy.items.compact());
  const Dict& read = d;
  const Value* v = read.find_int(10);  // an address: the items are written out
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(dcompact_same(*v, Value(true)));
  EXPECT_FALSE(d.items.compact());
  EXPECT_EQ(read.items.view().size(), 300u);
  EXPECT_TRUE(read.items[7].first.is_int());
  EXPECT_EQ(read.position_int(35), 7);
  EXPECT_TRUE(dcompact_same(read.value_at(7), Value(false)));
  d.set_int(35, Value(int64_t{9}));
  d.set(Value(2.5), Value(1.5));
  EXPECT_TRUE(d.find_int(35)->equals(Value(int64_t{9})));
  EXPECT_EQ(d.size(), 301u);
  // The copy kept the items as they were.
  EXPECT_TRUE(copy.items.compact());
  EXPECT_EQ(copy.size(), 300u);
  EXPECT_TRUE(dcompact_same(copy.value_at(7), Value(false)));
  EXPECT_EQ(copy.position(Value(2.5)), -1);
  // Moved: the source is empty and compact again.
  Dict moved = std::move(d);
  EXPECT_EQ(moved.size(), 301u);
  Dict fresh;
  fresh = copy;
  EXPECT_TRUE(fresh.items.compact());
  EXPECT_EQ(fresh.position_int(1495), 299);
}

// Threads reading one compact dict at once (as tasks share a value): the
// items are written out once, and every reader sees all of them.
TEST(DictCompact, ReadersOnSeveralThreads) {
  for (int round = 0; round < 20; ++round) {
    Dict d;
    for (int64_t i = 0; i < 2000; ++i) d.set_int(i, Value(double(i)));
    const Dict& shared = d;
    std::vector<int64_t> sums(4, 0);
    std::vector<std::thread> readers;
    for (size_t t = 0; t < sums.size(); ++t) {
      readers.emplace_back([&shared, &sums, t] {
        for (size_t p = 0; p < shared.size(); ++p) {
          if (t % 2 == 0) {
            sums[t] += int64_t(shared.items[p].second.as_float());
          } else {
            sums[t] += int64_t(shared.value_at(p).as_float());
          }
        }
      });
    }
    for (std::thread& r : readers) r.join();
    for (int64_t s : sums) EXPECT_EQ(s, 1999 * 2000 / 2);
  }
}

// A roll-back's cuts of colliding keys in the compact form: every older key
// still found, newer ones not; erase_at keeps the order.
TEST(DictCompact, TruncateAndEraseColliding) {
  Dict d, oracle = dcompact_general();
  std::vector<Value> probes;
  for (int64_t i = 0; i < 1500; ++i) {
    const int64_t k = (i % 3 == 0) ? (i << 32) : (i % 3 == 1) ? i : -(i << 12);
    const Value key = i % 11 == 0 ? Value(double(k)) : Value(k);
    d.set(key, Value(i));
    oracle.set(key, Value(i));
    probes.push_back(key);
  }
  probes.emplace_back(0.75);
  for (size_t cut : {1400u, 900u, 500u, 20u, 9u, 3u}) {
    d.truncate(cut);
    oracle.truncate(cut);
    ASSERT_TRUE(d.items.compact());
    dcompact_agree(d, oracle, probes);
    for (int64_t i = 0; i < 50; ++i) {
      d.set_int((i + 3000) << 32, Value(i));
      oracle.set_int((i + 3000) << 32, Value(i));
    }
    dcompact_agree(d, oracle, probes);
    d.truncate(cut);
    oracle.truncate(cut);
  }
  for (int64_t i = 0; i < 40; ++i) {
    d.set_int(i * 7 + 1, Value(0.5));
    oracle.set_int(i * 7 + 1, Value(0.5));
  }
  d.erase_at(0);
  oracle.erase_at(0);
  d.erase_at(10);
  oracle.erase_at(10);
  EXPECT_TRUE(d.items.compact());
  dcompact_agree(d, oracle, probes);
}

namespace {

// A value's bits and kind as Dict::set_int_number takes them.
void dcompact_bits(const Value& v, uint64_t& bits, DictValueKind& kind) {
  bits = 0;
  kind = DictValueKind::nil;
  if (v.is_bool()) {
    bits = v.as_bool() ? 1 : 0;
    kind = DictValueKind::boolean;
  } else if (v.is_int()) {
    bits = uint64_t(v.as_int());
    kind = DictValueKind::integer;
  } else if (v.is_float()) {
    const double d = v.as_float();
    std::memcpy(&bits, &d, sizeof bits);
    kind = DictValueKind::floating;
  }
}

// An int key's position found the way generated code may probe the index
// itself (Dict::IntProbe; the layout and order of value.cpp): a slot is the
// key's hash and position + 1 with bit 63 marking an exact integral key.
std::ptrdiff_t dcompact_probe(const Dict::IntProbe& p, int64_t key) {
  const auto hash = uint64_t(key);
  uint64_t slot = hash & p.mask, perturb = hash;
  for (;;) {
    const uint64_t w = p.slots[2 * slot + 1];
    if (w == 0) return -1;
    if (p.slots[2 * slot] == hash && (w >> 63) != 0) return std::ptrdiff_t(w & 0xffffffffULL) - 1;
    perturb >>= 5;
    slot = (slot * 5 + perturb + 1) & p.mask;
  }
}

}  // namespace

// Native loops' paths with a number's bits (find_int_number, set_int_number)
// against set_int with Values on the general form, at every size, with keys
// of other kinds equal to ints already there; and the index as generated
// code would probe it (int_probe) finding the same items.
TEST(DictCompact, NumberBitsPathsAgreeWithValues) {
  const std::vector<Value> keys = dcompact_keys();
  const std::vector<Value> probes = dcompact_probes(keys);
  Dict compact, general = dcompact_general();
  const int64_t exact = int64_t{1} << 53;
  for (size_t n = 0; n < keys.size(); ++n) {
    const Value value = n % 4 == 0   ? Value()
                        : n % 4 == 1 ? Value(n % 3 == 0)
                        : n % 4 == 2 ? Value(int64_t(n) - 100)
                                     : Value(double(n) / 8);
    if (keys[n].is_int()) {
      uint64_t bits;
      DictValueKind kind;
      dcompact_bits(value, bits, kind);
      compact.set_int_number(keys[n].as_int(), bits, kind);
      general.set_int(keys[n].as_int(), value);
      // Again with another value: the key found, its value replaced.
      if (n % 5 == 0) {
        compact.set_int_number(keys[n].as_int(), uint64_t(n), DictValueKind::integer);
        general.set_int(keys[n].as_int(), Value(int64_t(n)));
      }
    } else {
      compact.set(keys[n], value);
      general.set(keys[n], value);
    }
    const Dict::IntProbe view = compact.int_probe();
    EXPECT_EQ(view.valid, compact.size() >= Dict::kDictIndexFrom) << n;
    if (n == 3 || n == 9 || n == 40 || n + 1 == keys.size()) {
      ASSERT_TRUE(compact.items.compact());
      dcompact_agree(compact, general, probes);
      for (const Value& k : probes) {
        if (!k.is_int()) continue;
        uint64_t bits = 0;
        DictValueKind kind = DictValueKind::nil;
        const std::ptrdiff_t at = compact.find_int_number(k.as_int(), bits, kind);
        ASSERT_EQ(at, general.position(k)) << k.describe();
        uint64_t gen_bits = 0;
        DictValueKind gen_kind = DictValueKind::nil;
        EXPECT_EQ(general.find_int_number(k.as_int(), gen_bits, gen_kind), -2);
        if (at < 0) continue;
        dcompact_bits(general.value_at(size_t(at)), gen_bits, gen_kind);
        EXPECT_EQ(bits, gen_bits) << k.describe();
        EXPECT_EQ(kind, gen_kind) << k.describe();
        if (view.valid && k.as_int() >= -exact && k.as_int() <= exact) {
          ASSERT_EQ(dcompact_probe(view, k.as_int()), at) << k.describe();
          EXPECT_EQ(view.numbers[at].value, bits);
          EXPECT_EQ(DictValueKind((view.kinds[at] >> 2) & 3), kind);
        }
      }
      if (view.valid) {
        EXPECT_EQ(view.size, compact.size());
        EXPECT_EQ(dcompact_probe(view, 12345678), -1);
      }
    }
  }
  // A value that is no number turns the items general: the number paths then
  // answer -2 (find) and write Values (set), and the probe is not offered.
  compact.set(Value(int64_t{5}), Value("text"));
  general.set(Value(int64_t{5}), Value("text"));
  EXPECT_FALSE(compact.items.compact());
  EXPECT_FALSE(compact.int_probe().valid);
  uint64_t bits;
  DictValueKind kind;
  EXPECT_EQ(compact.find_int_number(7, bits, kind), -2);
  compact.set_int_number(7, 1, DictValueKind::boolean);
  general.set_int(7, Value(true));
  compact.set_int_number(int64_t{1} << 60, 3, DictValueKind::integer);
  general.set_int(int64_t{1} << 60, Value(int64_t{3}));
  dcompact_agree(compact, general, probes);
}
