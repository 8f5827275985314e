// Values nested to any depth (a list built by x = [x] in a loop): freeing,
// equality and hashing work on a 1 MB stack; printing and conversions, which
// recurse, stop at kMaxNestingDepth with a ValueError naming the op.
#include <gtest/gtest.h>

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

TEST(DictIndex, EqualNumbersHashAlike) {
  EXPECT_EQ(hash_key(Value(int64_t{3})), hash_key(Value(3.0)));
  EXPECT_EQ(hash_key(Value(true)), hash_key(Value(int64_t{1})));
  EXPECT_EQ(hash_key(Value(false)), hash_key(Value(-0.0)));
  EXPECT_EQ(hash_key(Value::tuple(List{Value(2), Value(true)})),
            hash_key(Value::tuple(List{Value(2.0), Value(int64_t{1})})));
  const int64_t far = (int64_t{1} << 60) + 3;
  EXPECT_EQ(hash_key(Value(far)), hash_key(Value(static_cast<double>(far))));
}
