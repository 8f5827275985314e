// Programs of any shape and length either run or fail with a SyntaxError:
// nesting deeper than kMaxExpressionDepth is refused by the parser (the
// passes after it recurse once per level), and up to that depth every pass
// (parse, compile, autodiff, evaluation, printing, the tree dump, freeing
// the tree) fits in a 1 MB stack, also when every level holds a chain of
// kChainSegment terms (the most a chain adds to the tree's height).
// Long flat chains themselves: test_chains.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>

#include "tessera/lang/autodiff.hpp"
#include "tessera/lang/parser.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"
#include "test_util.hpp"

using namespace tessera;

namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Expressions nested `n` levels deep in each way the syntax nests.
std::vector<std::pair<std::string, std::string>> shapes(int n) {
  return {
      // Each level a chain of kChainSegment terms: (((1+1+...)+1+...)+1+...).
      {"chains in parentheses",
       repeat("(", n - 1) + "1" + repeat(repeat("+1", kChainSegment - 1) + ")", n - 1)},
      // Each level a long chain (lowered to a sequence) with the deeper
      // levels in its middle.
      {"long chains around the nesting",
       repeat("(" + repeat("1+", 3 * kChainSegment), n - 1) + "1" +
           repeat(repeat("+1", 3 * kChainSegment) + ")", n - 1)},
      {"long chains after the nesting",
       repeat("(", n - 1) + "1" + repeat(repeat("*1", 3 * kChainSegment) + ")", n - 1)},
      {"index chain", "x" + repeat("[0]", n - 1)},
      {"call chain", "f" + repeat("(0)", n - 1)},
      {"power chain", repeat("2**", n - 1) + "1"},
      {"parentheses", repeat("(", n - 1) + "1" + repeat("+1)", n - 1)},
      {"nested calls", repeat("abs(", n - 1) + "1" + repeat(")", n - 1)},
      {"nested lists", repeat("[", n - 1) + "1" + repeat("]", n - 1)},
      {"unary minus", repeat("-", n - 1) + "x"},
      // x[1:e] is getitem(x, slice(1, e, nil)): two levels.
      {"slices", repeat("x[1:", (n - 1) / 2) + "1" + repeat("]", (n - 1) / 2)},
  };
}

}  // namespace

TEST(LangLimits, DeepNestingIsASyntaxErrorNamingTheDepthAndTheLimit) {
  for (const auto& [what, text] : shapes(10000)) {
    auto t0 = std::chrono::steady_clock::now();
    try {
      test::on_stack(test::kSmallStack, [&] { Program p(text, "deep.tsl"); });
      ADD_FAILURE() << what << ": no error";
    } catch (const SyntaxError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("[parse] expression nested "), std::string::npos) << what << ": " << msg;
      EXPECT_NE(msg.find("the limit is " + std::to_string(kMaxExpressionDepth)), std::string::npos)
          << what << ": " << msg;
      EXPECT_NE(msg.find("(at deep.tsl:1:"), std::string::npos) << what << ": " << msg;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 2.0) << what;
  }
  // A chain built by a loop (no recursion in the parser) says how deep it is.
  EXPECT_TRUE(test::throws_with<SyntaxError>(
      [] { Program p("x" + repeat("[0]", 9999), "deep.tsl"); },
      "expression nested 10000 levels deep: the limit is 256"));
  // Very long chains too, in time and memory proportional to their length.
  EXPECT_THROW(Program("y" + repeat("[0]", 500000)), SyntaxError);
  // The limit holds in each top-level expression, in a function body, in
  // a grad rule's program.
  EXPECT_THROW(Program("define(f, x, " + repeat("-", 300) + "x)\nf(1)"), SyntaxError);
  EXPECT_THROW(Program("1\n2\n" + repeat("-", 400) + "x"), SyntaxError);
}

TEST(LangLimits, AtTheLimitEveryPassFitsInASmallStack) {
  const int n = kMaxExpressionDepth;
  for (const auto& [what, text] : shapes(n)) {
    std::string program =
        "define(x, reshape(arange(4.0), [1, 1, 1, 1, 4]))\n"
        "define(f, a, abs),\n" +
        text;
    test::on_stack(test::kSmallStack, [&, what = what] {
      try {
        Program p(program, "limit.tsl");
        EXPECT_FALSE(p.tree_dot().empty());
        EXPECT_FALSE(p.counters_csv().empty());
        EXPECT_FALSE(parse_program(program, "limit.tsl").back()->str().empty());
        try {
          p.run();
        } catch (const std::exception& e) {
          // Some shapes index past their value at run time: an error, not a crash.
          EXPECT_EQ(std::string(e.what())[0], '[') << what << ": " << e.what();
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << " at depth " << n << ": " << e.what();
      }
    });
  }
  // One level more is refused.
  for (const auto& [what, text] : shapes(n + 1)) {
    EXPECT_THROW(Program(text, "limit.tsl"), SyntaxError) << what;
  }
}

TEST(LangLimits, GradientsAndLoopsOfDeepExpressionsFitInASmallStack) {
  const int n = kMaxExpressionDepth - 8;
  std::string product = "x" + repeat(" * sin(x)", n / 2);
  std::string sum = "x" + repeat(" + x * 0.5", n / 2);
  test::on_stack(test::kSmallStack, [&] {
    Value g = eval_string("define(f, x, " + product + ")\ngrad(f)(0.5)");
    EXPECT_TRUE(g.is_float() || g.is_array());
    Value v = eval_string("define(f, x, sum(" + sum + "))\nvalue_and_grad(f)([1.0, 2.0])");
    EXPECT_TRUE(v.is_list());
    // A loop with a deep body (the scalar loops of fastloop.cpp).
    Value s = eval_string("define(s, 0.0)\ndefine(i, 0)\nwhile(i < 50, block(store(s, " +
                          repeat("(", n / 4) + "s" + repeat(" + 1)", n / 4) +
                          "), store(i, i + 1)))\ns");
    EXPECT_DOUBLE_EQ(s.as_float(), 50.0 * (n / 4));
  });
}

TEST(LangLimits, UnknownNamesOfAnyLengthFailAtOnce) {
  std::string name(1 << 20, 'a');
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(test::throws_with<SyntaxError>([&] { Program p(name + "(1)", "long.tsl"); },
                                             "unknown function 'aaaaaaaaaa"));
  EXPECT_TRUE(test::throws_with<SyntaxError>([&] { Program p(name, "long.tsl"); },
                                             "... (1048576 characters)' (at long.tsl:1:1)"));
  // A name as long as a primitive's plus two thirds: compared, not matched.
  EXPECT_TRUE(
      test::throws_with<SyntaxError>([&] { Program p(std::string(200, 'x')); }, "unknown name"));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.0);
  // Suggestions still come for near misses.
  EXPECT_TRUE(
      test::throws_with<SyntaxError>([] { Program p("sumn([1, 2])"); }, "did you mean sum?"));
  EXPECT_TRUE(similar_primitive_names(std::string(5000, 's')).empty());
}

TEST(LangLimits, LineNumbersStopAtTheLargestInt) {
  EXPECT_TRUE(test::throws_with<SyntaxError>(
      [] { Program p("#line 2147483647 \"big.py\"\n\n\nnope"); }, "(at big.py:2147483647)"));
}

TEST(LangLimits, GradientsThatExpandExponentiallyAreRefusedQuickly) {
  // f1 calls f0 four times, f2 calls f1 four times...: grad(f12) would expand
  // 4^12 calls (minutes and gigabytes before the limit).
  std::string text = "define(f0, x, x * x)\n";
  for (int i = 1; i <= 12; ++i) {
    std::string inner = "f" + std::to_string(i - 1);
    text += "define(f" + std::to_string(i) + ", x, " + repeat(inner + "(", 4) + "x)))))\n";
  }
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(test::throws_with<SyntaxError>(
      [&] { Program p(text + "define(g, grad(f12))\n1\n", "expand.tsl"); },
      "[grad] differentiating 'f12' expands more than " + std::to_string(kMaxGradientExpressions) +
          " expressions (in 'f"));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 20.0);
  // Below the limit the same functions differentiate.
  EXPECT_NO_THROW(Program(text + "define(g, grad(f3))\ng(0.5)\n", "expand.tsl").run());
}
