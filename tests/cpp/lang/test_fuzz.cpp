// Robustness: every primitive called with many kinds of odd arguments must
// either return a value or raise a tessera error with an op-tagged message.
// A crash, an abort or a foreign exception fails the test.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"

using namespace tessera;

namespace {

// Argument expressions: scalars, strings, arrays of every dtype and rank
// (0-d, empty, broadcastable), lists, nil, functions, slices.
const std::vector<std::string> kArgs = {
    "0", "1", "-1", "2", "3", "-7", "2.5", "-0.5", "0.0", "nan", "inf", "true", "false", "nil",
    "\"abc\"", "\"float32\"", "\"int64\"", "\"bool\"", "\"...\"", "[1, 2, 3]", "[1.5, -2.0]",
    "[[1, 2], [3, 4]]", "[[1.0], [2.0], [3.0]]", "[true, false, true]", "arange(6)",
    "reshape(arange(24), [2, 3, 4])", "zeros([0, 3])", "zeros([0])", "ones([2, 1, 3], dtype=\"float32\")",
    "array(5)", "array(2.5)", "array(true)", "list(1, 2)", "list()", "list(\"a\", [1, 2])",
    "dict(\"a\", 1)", "slice(1, nil, nil)", "slice(nil, nil, -1)", "lambda(x, x)", "exp",
    "[-1, 0, 1]", "[[0.5, nan], [inf, -inf]]", "astype([1, 2, 3], \"float32\")", "[0, 0, 0]",
    "[100, 200]", "ones([3, 3])", "eye(3)", "[[[1]]]", "\"\"", "[\"a\", \"b\"]",
};

// Primitives that touch the outside world or print.
const std::set<std::string> kSkipFamilies = {"io"};
const std::set<std::string> kSkipNames = {"print", "set_seed"};

}  // namespace

TEST(LangFuzz, EveryPrimitiveSurvivesOddArguments) {
  std::mt19937 rng(12345);
  int calls = 0, errors = 0;
  for (const PrimitiveSpec* spec : all_primitives()) {
    if (kSkipFamilies.count(spec->family) || kSkipNames.count(spec->name)) continue;
    for (int trial = 0; trial < 60; ++trial) {
      size_t max_args = spec->params.size() + (spec->variadic ? 2 : 0);
      size_t n = std::uniform_int_distribution<size_t>(0, std::min<size_t>(max_args, 4))(rng);
      std::string text = spec->name + "(";
      for (size_t i = 0; i < n; ++i) {
        if (i) text += ", ";
        text += kArgs[std::uniform_int_distribution<size_t>(0, kArgs.size() - 1)(rng)];
      }
      text += ")";
      ++calls;
      try {
        eval_string(text);
      } catch (const std::exception& e) {
        ++errors;
        std::string msg = e.what();
        EXPECT_FALSE(msg.empty()) << text;
        EXPECT_EQ(msg[0], '[') << "error without an op tag for " << text << ": " << msg;
      } catch (...) {
        ADD_FAILURE() << "foreign exception from " << text;
      }
    }
  }
  EXPECT_GT(calls, 5000);
  // Most odd calls are errors, but not all: the generator must reach real work.
  EXPECT_LT(errors, calls);
}

TEST(LangFuzz, MutatedProgramsParseOrFailCleanly) {
  const std::string base =
      "define(f, a, b=2, block(define(c, a * b), if(c > 3, c[0:2], list(c, \"s\"))))\n"
      "define(g, lambda(x, sum(x ** 2, axis=0)))\n"
      "g(f([1.5, 2.5, 3.5]))\n";
  const std::string alphabet = "()[],=:+-*/%@!<>&|\"'. 0123456789abcxyz\n";
  std::mt19937 rng(777);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = base;
    int edits = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int e = 0; e < edits; ++e) {
      size_t pos = std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng);
      char c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      switch (rng() % 3) {
        case 0: text[pos] = c; break;
        case 1: text.insert(text.begin() + pos, c); break;
        default: text.erase(pos, 1); break;
      }
    }
    // No loops in the base program, so every mutant terminates.
    try {
      eval_string(text, {}, "m.tsl");
    } catch (const std::exception& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg[0], '[') << text << "\n" << msg;
    } catch (...) {
      ADD_FAILURE() << "foreign exception from:\n" << text;
    }
  }
}
