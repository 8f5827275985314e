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
