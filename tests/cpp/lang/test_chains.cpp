// Long flat chains of binary operators (`x + x + ... + x`): one level of
// nesting however long, evaluated left to right as ((a + b) + c) + d, and
// no pass recurses once per term (each test runs on a small stack, where a
// recursion per term of 40,000 would overflow it: 1 MB is 26 bytes a term,
// less than any frame of a recursive pass).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/lang/parser.hpp"
#include "tessera/lang/program.hpp"
#include "test_util.hpp"

using namespace tessera;

namespace {

constexpr int kTerms = 40000;

std::string number(double v) {
  std::ostringstream s;
  s.precision(17);
  s << std::showpoint << v;
  return s.str();
}

// Runs `fn` on a small stack (test_util.hpp).
void small_stack(const std::function<void()>& fn) { test::on_stack(test::kSmallStack, fn); }

// Evaluates `text` with every pass that walks the tree: compile, run, the
// tree dump, the counters, the AST's printing, and the destructors.
Value run_all_passes(const std::string& text) {
  Value v;
  {
    Program p(text, "chain.tsl");
    v = p.run();
    EXPECT_FALSE(p.tree_dot().empty());
    EXPECT_FALSE(p.counters_csv().empty());
  }
  EXPECT_FALSE(parse_program(text, "chain.tsl").back()->str().empty());
  return v;
}

}  // namespace

TEST(LangChains, SumsOfManyTermsAddLeftToRight) {
  // Values of very different sizes: any other order of the additions (a
  // balanced tree, pairs) gives a different double.
  std::mt19937_64 rng(27);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int n : {kTerms, 2 * kTerms}) {
    std::vector<double> xs(static_cast<size_t>(n));
    for (auto& x : xs) x = u(rng) * std::pow(10.0, static_cast<int>(u(rng) * 12));
    std::string text = number(xs[0]);
    double expected = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) {
      bool minus = i % 3 == 0;
      text += (minus ? " - " : " + ") + number(std::fabs(xs[i]));
      expected = minus ? expected - std::fabs(xs[i]) : expected + std::fabs(xs[i]);
    }
    small_stack([&] {
      Value v = run_all_passes(text);
      ASSERT_TRUE(v.is_float()) << v.str();
      EXPECT_EQ(v.as_float(), expected) << n << " terms";
    });
  }
}

TEST(LangChains, ProductsQuotientsAndMixedPrecedenceFoldLeftToRight) {
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  std::string product = "1.0", mixed = "0.0";
  double p = 1.0, m = 0.0;
  for (int i = 1; i < kTerms; ++i) {
    double a = u(rng), b = u(rng);
    if (i % 2) {
      product += " * " + number(a);
      p *= a;
    } else {
      product += " / " + number(a);
      p /= a;
    }
    // Terms of a higher precedence inside the chain: a * b nests one level.
    mixed += " + " + number(a) + " * " + number(b) + " - " + number(b);
    m = m + a * b - b;
  }
  small_stack([&] {
    EXPECT_EQ(run_all_passes(product).as_float(), p);
    EXPECT_EQ(eval_string(mixed).as_float(), m);
  });
}

TEST(LangChains, ComparisonAndLogicalChainsKeepTheirMeaning) {
  std::string cmp = "1 < 2";
  for (int i = 0; i < kTerms; ++i) cmp += i % 2 ? " == true" : " != false";
  std::string all = "true";
  for (int i = 1; i < kTerms; ++i) all += i == kTerms / 2 ? " && 1 > 2" : " && 1 < 2";
  // && stops at the first false operand: the term after it would fail.
  std::string shortcut = all + " && getitem([1], 5) == 1";
  std::string any = "false";
  for (int i = 1; i < kTerms / 10; ++i) any += i == kTerms / 10 - 2 ? " || 2 > 1" : " || 1 > 2";
  small_stack([&] {
    EXPECT_TRUE(run_all_passes(cmp).as_bool());
    EXPECT_FALSE(eval_string(shortcut).as_bool());
    EXPECT_TRUE(eval_string(any).as_bool());
  });
}

TEST(LangChains, ArrayChainsMatchALoopAndErrorsNameTheOperator) {
  std::string text = "define(a, [1.5, -2.0, 3.25])\ndefine(b, [0.125, 4.0, -1.0])\na";
  std::vector<double> want{1.5, -2.0, 3.25};
  const double bv[] = {0.125, 4.0, -1.0};
  for (int i = 1; i < kTerms; ++i) {
    text += i % 2 ? " + b * 0.5" : " - a";
    for (size_t k = 0; k < 3; ++k) {
      want[k] = i % 2 ? want[k] + bv[k] * 0.5 : want[k] - (k == 0 ? 1.5 : k == 1 ? -2.0 : 3.25);
    }
  }
  small_stack([&] {
    Value v = run_all_passes(text);
    ASSERT_TRUE(v.is_array());
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(v.as_array().get_double(static_cast<int64_t>(k)), want[k]);
    }
  });
  // A failing step names its own operator's position, deep in the chain.
  std::string bad = "1";
  for (int i = 1; i < kTerms; ++i) bad += i == kTerms * 7 / 10 ? " +\n\"s\"" : " + 1";
  small_stack([&] {
    EXPECT_TRUE(test::throws_with<TypeError>([&] { Program(bad, "bad.tsl").run(); },
                                                  "(at bad.tsl:1:"));
  });
}

TEST(LangChains, GradientsOfLongChains) {
  // 10,000 terms: a recursion per term would need several MB of stack. (The
  // gradient program has a few statements per term: 100,000 terms take
  // seconds and GB to compile, proportionally.)
  constexpr int kGradTerms = 10000;
  std::string sum = "x", product = "x";
  for (int i = 1; i < kGradTerms; ++i) {
    sum += i % 4 == 3 ? " - x" : " + x * 0.5";
    product += " * 1.0";
  }
  // d/dx: 1 + (0.5 per '+' term) - (1 per '-' term).
  double want = 1.0;
  for (int i = 1; i < kGradTerms; ++i) want += i % 4 == 3 ? -1.0 : 0.5;
  small_stack([&] {
    Value g = run_all_passes("define(f, x, " + sum + ")\ngrad(f)(3.0)");
    EXPECT_EQ(g.as_float(), want);
    Value h = eval_string("define(f, x, " + product + " * x)\ngrad(f)(3.0)");
    EXPECT_EQ(h.as_float(), 6.0);
  });
}

TEST(LangChains, ChainsInFunctionsLoopsAndRecursion) {
  // A long chain keeps its running value in a variable of the function it
  // is in: every activation has its own (recursion, loop turns, parallel
  // statements), and no program can name it.
  auto terms = [](const std::string& t, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += " + " + t;
    return out;
  };
  small_stack([&] {
    EXPECT_EQ(eval_string("define(f, n, if(n == 0, 0, f(n - 1)" + terms("1", 20) + "))\nf(10)")
                  .as_int(),
              200);
    EXPECT_EQ(eval_string("define(s, 0)\ndefine(i, 0)\n"
                          "while(i < 100, block(store(s, s + i" +
                          terms("1", 10) + "), store(i, i + 1)))\ns")
                  .as_int(),
              4950 + 1000);
    Value pb = eval_string("parallel_block(define(a, 0" + terms("1", 30) + "), define(b, 0" +
                           terms("2", 30) + "))\nlist(a, b)");
    EXPECT_EQ(pb.str(), "[30, 60]");
    Value fe = eval_string("define(xs, list())\nfor_each(lambda(i, store(xs, append(xs, i" +
                           terms("i", 12) + "))), 4)\nxs");
    EXPECT_EQ(fe.str(), "[0, 13, 26, 39]");
    EXPECT_EQ(eval_string("define(chain, 5)\nchain" + terms("chain", 20)).as_int(), 105);
  });
}

TEST(LangChains, LongChainsAroundDeepNesting) {
  // At the limit, each level a chain of 49 terms with the deeper levels in
  // its middle: (1-1-...-1-(...)-1-...-1). The steps shorten and the
  // deepest terms get steps of their own (parser.cpp, chain()), and each
  // level still computes -46 - inner, left to right.
  std::string text = "1";
  int64_t want = 1;
  for (int level = 1; level < kMaxExpressionDepth; ++level) {
    std::string side;
    for (int i = 0; i < 24; ++i) side += "1-";
    text = "(" + side + text;
    for (int i = 0; i < 24; ++i) text += "-1";
    text += ")";
    want = -46 - want;
  }
  small_stack([&] { EXPECT_EQ(run_all_passes(text).as_int(), want); });
}

TEST(LangChains, TesseraEvalOfAGeneratedFile) {
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/chain-" + std::to_string(getpid()) + ".tsl";
  {
    std::ofstream f(path);
    f << "// generated: 1 + 2 + ... + " << kTerms << "\n1";
    for (int i = 2; i <= kTerms; ++i) f << (i % 10 ? " + " : "\n + ") << i;
    f << "\n";
  }
  std::string cmd = std::string(TESSERA_CLI) + " eval " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  std::filesystem::remove(path);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_EQ(out, std::to_string(int64_t{kTerms} * (kTerms + 1) / 2) + "\n");
}

TEST(LangUnicode, NamesOfVariablesFunctionsAndParameters) {
  EXPECT_EQ(
      eval_string("define(größe, 3)\ndefine(doppelt, α, α * 2)\ndoppelt(größe)").as_int(), 6);
  EXPECT_EQ(eval_string("define(関数, 名前, 名前 + 1)\n関数(41)").as_int(), 42);
  // Errors show the name as written, with columns in characters.
  EXPECT_TRUE(test::throws_with<SyntaxError>([] { Program p("größe + λ", "u.tsl"); },
                                             "unknown name 'größe' (at u.tsl:1:1)"));
  EXPECT_TRUE(test::throws_with<SyntaxError>(
      [] { Program p("define(größe, 1)\ngröße + λ", "u.tsl"); },
      "unknown name 'λ' (at u.tsl:2:9)"));
  // A long name is cut at a character, not inside one.
  std::string name;
  for (int i = 0; i < 100; ++i) name += "é";
  EXPECT_TRUE(test::throws_with<SyntaxError>([&] { Program p(name, "u.tsl"); },
                                             "unknown name '" + name.substr(0, 60) +
                                                 "... (100 characters)'"));
}
