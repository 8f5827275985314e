// Values nested to any depth (a list built by x = [x] in a loop): freeing,
// equality and hashing work on a 1 MB stack; printing and conversions, which
// recurse, stop at kMaxNestingDepth with a ValueError naming the op.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include <string>

#include "tessera/core/error.hpp"
#include "tessera/core/value.hpp"
#include "tessera/lang/program.hpp"
#include "test_util.hpp"

using namespace tessera;

namespace {

constexpr int kDeep = 1000000;

// A list (or tuple, or dict under key "k") nested `depth` levels around `leaf`.
Value nested(int depth, Value leaf, ValueKind kind = ValueKind::list, bool tuple = false) {
  Value v = std::move(leaf);
  for (int i = 0; i < depth; ++i) {
    if (kind == ValueKind::dict) {
      Dict d;
      d.set(Value("k"), std::move(v));
      v = Value(std::move(d));
    } else {
      v = tuple ? Value::tuple(List{std::move(v)}) : Value(List{std::move(v), Value(i)});
    }
  }
  return v;
}

}  // namespace

TEST(ValueDepth, DeepListsTuplesAndDictsAreFreedOnASmallStack) {
  test::on_stack(test::kSmallStack, [] {
    {
      Value v = nested(kDeep, Value(1));
    }
    {
      Value v = nested(kDeep, Value(1), ValueKind::list, true);
    }
    {
      Value v = nested(kDeep, Value(1), ValueKind::dict);
    }
    // Assignment over a deep value frees it too.
    Value v = nested(kDeep, Value(1));
    v = Value(2);
    EXPECT_TRUE(v.equals(Value(2)));
  });
}

TEST(ValueDepth, SharedInnerListsSurviveTheOuterOnesBeingFreed) {
  Value inner = nested(1000, Value("leaf"));
  {
    Value outer = nested(kDeep, inner);
    Value again = outer;  // shared: freeing one copy frees nothing
  }
  Value v = inner;
  for (int i = 0; i < 1000; ++i) v = v.as_list()[0];
  EXPECT_EQ(v.as_string(), "leaf");
}

TEST(ValueDepth, EqualityOfDeepValuesOnASmallStack) {
  test::on_stack(test::kSmallStack, [] {
    Value a = nested(kDeep, Value(1)), b = nested(kDeep, Value(1)), c = nested(kDeep, Value(2));
    EXPECT_TRUE(a.equals(b));
    EXPECT_FALSE(a.equals(c));
    EXPECT_FALSE(a.equals(nested(kDeep - 1, Value(1))));
    Value d = nested(kDeep, Value(1), ValueKind::dict),
          e = nested(kDeep, Value(1), ValueKind::dict);
    EXPECT_TRUE(d.equals(e));
    EXPECT_FALSE(d.equals(a));
    // Scalars still compare across kinds, and a tuple never equals a list.
    EXPECT_TRUE(Value(List{Value(1), Value(2.0)}).equals(Value(List{Value(true), Value(2)})));
    EXPECT_FALSE(Value::tuple(List{Value(1)}).equals(Value(List{Value(1)})));
  });
}

TEST(ValueDepth, PrintingAndConversionStopAtTheLimitWithAValueError) {
  test::on_stack(test::kSmallStack, [] {
    Value ok = nested(kMaxNestingDepth - 1, Value(7));
    EXPECT_NE(ok.str().find("7"), std::string::npos);
    EXPECT_TRUE(
        test::throws_with<std::invalid_argument>([] { (void)nested(kDeep, Value(7)).str(); },
                                                 "[str] a list nested more than 256 levels deep"));
    EXPECT_TRUE(test::throws_with<std::invalid_argument>(
        [] { (void)nested(kDeep, Value(7), ValueKind::dict).str(); },
        "[str] a dict nested more than 256 levels deep"));
    EXPECT_TRUE(test::throws_with<std::invalid_argument>(
        [] { (void)to_array(nested(kDeep, Value(7)), "array"); },
        "[array] a list nested more than 256 levels deep"));
  });
  // The count of levels is unwound by the error: the next walk starts at 0.
  EXPECT_NE(nested(kMaxNestingDepth - 1, Value(7)).str().find("7"), std::string::npos);
}

TEST(ValueDepth, ProgramsBuildingDeepListsInALoopEndCleanly) {
  const std::string build =
      "define(x, list()) define(t, tuple()) define(i, 0)\n"
      "while(i < 200000, block(store(x, list(x)), store(t, tuple(t, i)), store(i, i + 1)))\n";
  test::on_stack(test::kSmallStack, [&] {
    EXPECT_TRUE(eval_string(build + "len(x)").equals(Value(1)));
    // Equality, membership and hashing (a deep tuple as a dict key).
    EXPECT_TRUE(eval_string(build + "x == x").equals(Value(true)));
    EXPECT_TRUE(eval_string(build + "t != tuple(t)").equals(Value(true)));
    EXPECT_TRUE(eval_string(build + "get(update(dict(), list(list(t, 1))), t)").equals(Value(1)));
    // The deep list is the program's value, freed here.
    Value x = eval_string(build + "x");
    EXPECT_TRUE(x.is_list());
    // What recurses says so, at the program's line.
    EXPECT_TRUE(test::throws_with<std::invalid_argument>(
        [&] { eval_string(build + "str(x)", {}, "deep.tsl"); },
        "nested more than 256 levels deep"));
    EXPECT_TRUE(test::throws_with<std::invalid_argument>(
        [&] { eval_string(build + "sum(x)", {}, "deep.tsl"); }, "(at deep.tsl:3:"));
  });
}

// Dicts past kDictIndexFrom items find keys through their hash index: every
// key found, numbers equal across kinds one key (1, 1.0, true; an int past
// 2**53 and the double it rounds to, as Value::equals says), items removed by
// erase_at no longer found and the others still, insertion order kept.
TEST(DictIndex, FindsWhatAWalkFinds) {
  Dict d;
  for (int64_t i = 0; i < 5000; ++i) d.set(Value(i * 7), Value(i));
  ASSERT_EQ(d.items.size(), 5000u);
  for (int64_t i = 0; i < 5000; ++i) {
    const Value* v = d.find(Value(i * 7));
    ASSERT_NE(v, nullptr) << i;
    EXPECT_TRUE(v->equals(Value(i)));
    EXPECT_EQ(d.find(Value(i * 7 + 1)), nullptr);
  }
  // Equal numbers of other kinds are the same key.
  d.set(Value(14.0), Value("fourteen"));
  EXPECT_EQ(d.items.size(), 5000u);
  EXPECT_TRUE(d.find(Value(int64_t{14}))->equals(Value("fourteen")));
  d.set(Value(true), Value(-1));
  EXPECT_TRUE(d.find(Value(1.0))->equals(Value(-1)));
  EXPECT_EQ(d.items.size(), 5001u);  // 1 was not a key (7's multiples)
  EXPECT_EQ(d.find(Value(0.5)), nullptr);
  const int64_t big = (int64_t{1} << 53) + 1;
  d.set(Value(big), Value(1));
  EXPECT_EQ(d.find(Value(big)), d.find(Value(static_cast<double>(big))));
  // Tuples and strings.
  d.set(Value::tuple(List{Value(1), Value("a")}), Value(2));
  EXPECT_TRUE(d.find(Value::tuple(List{Value(1.0), Value("a")}))->equals(Value(2)));
  EXPECT_EQ(d.find(Value(List{Value(1), Value("a")})), nullptr);  // a list is not the tuple
  // Removal: the others are still found, in their order.
  for (size_t p = 0; p < 100; ++p) d.erase_at(0);
  EXPECT_EQ(d.find(Value(int64_t{0})), nullptr);
  EXPECT_TRUE(d.find(Value(int64_t{7 * 100}))->equals(Value(100)));
  EXPECT_TRUE(d.items.front().first.equals(Value(int64_t{700})));
  // Items pushed directly are found by a walk, and indexed by the next set().
  d.items.emplace_back(Value("late"), Value(3));
  EXPECT_TRUE(d.find(Value("late"))->equals(Value(3)));
  d.set(Value("later"), Value(4));
  EXPECT_TRUE(d.find(Value("late"))->equals(Value(3)));
  EXPECT_TRUE(d.find(Value("later"))->equals(Value(4)));
  // A copy keeps its own index.
  Dict copy = d;
  copy.set(Value("only in the copy"), Value(5));
  EXPECT_EQ(d.find(Value("only in the copy")), nullptr);
  EXPECT_TRUE(copy.find(Value(int64_t{7 * 4999}))->equals(Value(4999)));
}

// A roll-back's cut: the newest keys go, the others are still found by the
// index, and keys set afterwards are found too; a cut after items pushed
// directly (no index then) walks until the next set().
TEST(DictIndex, TruncateKeepsTheOlderKeys) {
  Dict d;
  for (int64_t i = 0; i < 3000; ++i) d.set(Value(i * 3), Value(i));
  d.truncate(2000);
  ASSERT_EQ(d.items.size(), 2000u);
  for (int64_t i = 0; i < 3000; ++i) {
    const Value* v = d.find(Value(i * 3));
    if (i < 2000) {
      ASSERT_NE(v, nullptr) << i;
      EXPECT_TRUE(v->equals(Value(i)));
    } else {
      EXPECT_EQ(v, nullptr) << i;
    }
  }
  for (int64_t i = 2000; i < 2500; ++i) d.set(Value(i * 3 + 1), Value(-i));
  EXPECT_TRUE(d.find(Value(int64_t{2400 * 3 + 1}))->equals(Value(int64_t{-2400})));
  EXPECT_TRUE(d.find(Value(int64_t{1999 * 3}))->equals(Value(int64_t{1999})));
  d.items.emplace_back(Value("pushed"), Value(1));
  d.items.emplace_back(Value("pushed too"), Value(2));
  d.truncate(2100);
  EXPECT_EQ(d.find(Value("pushed")), nullptr);
  EXPECT_TRUE(d.find(Value(int64_t{2050 * 3 + 1}))->equals(Value(int64_t{-2050})));
  EXPECT_EQ(d.find(Value(int64_t{2200 * 3 + 1})), nullptr);
  d.set(Value("again"), Value(3));
  EXPECT_TRUE(d.find(Value("again"))->equals(Value(3)));
  EXPECT_TRUE(d.find(Value(int64_t{7}))  == nullptr);
}

namespace {

// The oracle for the index: a walk over the items with Value::equals.
const Value* dict_test_walk(const Dict& d, const Value& key) {
  for (const auto& [k, v] : d.items)
    if (k.equals(key)) return &v;
  return nullptr;
}

// Every probe in `probes` found by find_int, contains_int and find exactly
// where the walk finds it.
void dict_test_agree(const Dict& d, const std::vector<int64_t>& probes) {
  for (int64_t k : probes) {
    const Value* walked = dict_test_walk(d, Value(k));
    ASSERT_EQ(d.find_int(k), walked) << k;
    ASSERT_EQ(d.contains_int(k), walked != nullptr) << k;
    ASSERT_EQ(d.find(Value(k)), walked) << k;
  }
}

}  // namespace

// find_int and set_int against the walk, for keys that crowd the index:
// runs of consecutive ints, multiples of large powers of two (one home slot
// for all), negatives, both sides of 2**53 (where an int past it equals no
// other int but shares a hash), and bools and floats that are the same keys.
TEST(DictIndex, IntPathsAgreeWithTheWalk) {
  const int64_t exact = int64_t{1} << 53;
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < 300; ++i) keys.push_back(i);
  for (int64_t i = 1; i < 200; ++i) keys.push_back(i << 20);
  for (int64_t i = 1; i < 200; ++i) keys.push_back(i << 40);
  for (int64_t i = 1; i < 200; ++i) keys.push_back(-i * 1024);
  for (int64_t delta : {3, 2, 1, 0, -1, -2}) {  // 2**53 + 1 (hash 2**53) before 2**53
    keys.push_back(exact + delta);
    keys.push_back(-exact - delta);
  }
  keys.push_back(std::numeric_limits<int64_t>::max());
  keys.push_back(std::numeric_limits<int64_t>::min());
  std::vector<int64_t> probes = keys;
  for (int64_t k : keys) {
    probes.push_back(k + 1);
    probes.push_back(k - 1);
  }
  Dict by_int, by_value;
  for (size_t n = 0; n < keys.size(); ++n) {
    by_int.set_int(keys[n], Value(int64_t(n)));
    by_value.set(Value(keys[n]), Value(int64_t(n)));
    if (n == 3 || n == 9 || n == 40) dict_test_agree(by_int, probes);  // walked, then indexed
  }
  dict_test_agree(by_int, probes);
  dict_test_agree(by_value, probes);
  ASSERT_EQ(by_int.items.size(), by_value.items.size());
  for (size_t n = 0; n < keys.size(); ++n) {
    EXPECT_TRUE(by_int.items[n].first.equals(by_value.items[n].first)) << n;
    EXPECT_TRUE(by_int.items[n].first.is_int()) << n;
  }
  // An int past 2**53 and the double it rounds to are one key; two such
  // ints are two keys even though their hashes agree.
  EXPECT_EQ(by_int.find(Value(static_cast<double>(exact + 2))), by_int.find_int(exact + 2));
  EXPECT_NE(by_int.find_int(exact + 1), by_int.find_int(exact));
  // A float or a bool stored is the int key of its value.
  by_int.set(Value(2.5), Value("half"));
  by_int.set(Value(-7.0), Value("float"));
  by_int.set(Value(true), Value("one"));  // 1 is a key: it keeps its int, takes the value
  EXPECT_TRUE(by_int.find_int(-7)->equals(Value("float")));
  EXPECT_TRUE(by_int.find_int(1)->equals(Value("one")));
  EXPECT_TRUE(by_int.items[1].first.is_int());
  EXPECT_EQ(by_int.find_int(2), dict_test_walk(by_int, Value(int64_t{2})));
  by_int.set_int(-7, Value("int"));  // the float key stays, its value changes
  EXPECT_TRUE(by_int.find(Value(-7.0))->equals(Value("int")));
  EXPECT_TRUE(dict_test_walk(by_int, Value(-7.0)) == by_int.find_int(-7));
}

// Small dicts (walked, no index) keep Python's rules on the int paths too:
// d[True] = a; d[1] = b leaves the key True with the value b.
TEST(DictIndex, IntPathsOnASmallDict) {
  Dict d;
  d.set(Value(true), Value("a"));
  d.set_int(1, Value("b"));
  d.set(Value(0.0), Value("zero"));
  ASSERT_EQ(d.items.size(), 2u);
  EXPECT_TRUE(d.items[0].first.is_bool());
  EXPECT_TRUE(d.find_int(1)->equals(Value("b")));
  EXPECT_TRUE(d.find_int(0)->equals(Value("zero")));
  EXPECT_FALSE(d.contains_int(2));
  // Growing past kDictIndexFrom keeps the bool key and the float key.
  for (int64_t i = 2; i < 40; ++i) d.set_int(i, Value(i));
  EXPECT_TRUE(d.items[0].first.is_bool());
  EXPECT_TRUE(d.items[1].first.is_float());
  EXPECT_TRUE(d.find_int(1)->equals(Value("b")));
  EXPECT_TRUE(d.find(Value(false))->equals(Value("zero")));
  EXPECT_TRUE(d.find_int(39)->equals(Value(int64_t{39})));
}

// A roll-back's cut of keys that collide (one home slot for all, so their
// probes pass each other's slots) leaves every older key found.
TEST(DictIndex, TruncateCollidingIntKeys) {
  Dict d;
  std::vector<int64_t> probes;
  for (int64_t i = 0; i < 1500; ++i) {
    const int64_t k = (i % 3 == 0) ? (i << 32) : (i % 3 == 1) ? i : -(i << 12);
    d.set_int(k, Value(i));
    probes.push_back(k);
  }
  d.set(Value("text"), Value(1));
  for (size_t cut : {1400u, 900u, 500u, 20u, 9u}) {
    d.truncate(cut);
    ASSERT_EQ(d.items.size(), cut);
    dict_test_agree(d, probes);
    for (int64_t i = 0; i < 50; ++i) d.set_int((i + 3000) << 32, Value(i));  // after the cut
    dict_test_agree(d, probes);
    d.truncate(cut);
  }
}

// reserve(n): growing to n items moves none of them.
TEST(DictIndex, ReserveKeepsTheItemsInPlace) {
  Dict d;
  d.reserve(5000);
  d.set_int(0, Value(int64_t{0}));
  const auto* first = d.items.data();
  for (int64_t i = 1; i < 5000; ++i) d.set_int(i * 11, Value(i));
  EXPECT_EQ(d.items.data(), first);
  std::vector<int64_t> probes;
  for (int64_t i = 0; i < 1200; ++i) probes.push_back(i * 55 + (i % 2));
  dict_test_agree(d, probes);
}

TEST(DictIndex, EqualNumbersHashAlike) {
  EXPECT_EQ(hash_key(Value(int64_t{3})), hash_key(Value(3.0)));
  EXPECT_EQ(hash_key(Value(true)), hash_key(Value(int64_t{1})));
  EXPECT_EQ(hash_key(Value(false)), hash_key(Value(-0.0)));
  EXPECT_EQ(hash_key(Value::tuple(List{Value(2), Value(true)})),
            hash_key(Value::tuple(List{Value(2.0), Value(int64_t{1})})));
  const int64_t far = (int64_t{1} << 60) + 3;
  EXPECT_EQ(hash_key(Value(far)), hash_key(Value(static_cast<double>(far))));
}
