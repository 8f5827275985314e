// End-to-end tests of the `tessera` command and of the example programs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util.hpp"

namespace {

using Result = tessera::test::CommandResult;  // stdout and stderr together

Result run_cli(const std::string& args) {
  return tessera::test::run_command(std::string(TESSERA_CLI) + " " + args + " 2>&1");
}

std::string example(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/examples/" + name;
}

}  // namespace

TEST(Cli, EvalExpressionPrintsValue) {
  Result r = run_cli("eval -e '1 + 2 * 3'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "7\n");
}

TEST(Cli, ArgumentsReachTheProgram) {
  Result r = run_cli("eval -e 'define(main, a, b, a * b) main' 6 7");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "42\n");
}

TEST(Cli, ErrorsExitWithOneAndNamePosition) {
  Result r = run_cli("eval -e 'define(x, 1)\n  x + foo'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("SyntaxError: [compile] unknown name 'foo' (at <expr>:2:7)"), std::string::npos)
      << r.out;
  Result m = run_cli("eval /nonexistent/file.tsl");
  EXPECT_EQ(m.status, 1);
  EXPECT_NE(m.out.find("cannot open '/nonexistent/file.tsl'"), std::string::npos) << m.out;
  Result p = run_cli("eval -e 'f(1,'");
  EXPECT_EQ(p.status, 1);
  EXPECT_NE(p.out.find("SyntaxError: [parse]"), std::string::npos) << p.out;
  Result o = run_cli("eval --bogus x.tsl");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.out.find("unknown option '--bogus'"), std::string::npos) << o.out;
  Result t = run_cli("eval --threads 0 -e 1");
  EXPECT_EQ(t.status, 1);
  EXPECT_NE(t.out.find("--threads must be a positive integer"), std::string::npos) << t.out;
}

TEST(Cli, DumpTreeAndCounters) {
  std::string dir = ::testing::TempDir();
  Result r = run_cli("eval --dump-tree=" + dir + "/t.dot --counters=" + dir +
                     "/c.csv --quiet -e 'define(x, 2) x * 3'");
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream dot(dir + "/t.dot"), csv(dir + "/c.csv");
  std::string dot_text((std::istreambuf_iterator<char>(dot)), {});
  std::string csv_text((std::istreambuf_iterator<char>(csv)), {});
  EXPECT_NE(dot_text.find("digraph tessera"), std::string::npos);
  EXPECT_NE(dot_text.find("multiply"), std::string::npos);
  EXPECT_NE(csv_text.find("multiply,<expr>:1:16,1,"), std::string::npos) << csv_text;
}

TEST(Cli, TimeOptionReportsThreads) {
  Result r = run_cli("eval --threads 2 --time -e '1'");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("(2 threads)"), std::string::npos) << r.out;
}

TEST(Cli, OpsListsAndShowsPrimitives) {
  Result all = run_cli("ops");
  EXPECT_EQ(all.status, 0);
  EXPECT_NE(all.out.find("len(x)"), std::string::npos);
  EXPECT_NE(all.out.find("define(name, value)"), std::string::npos);
  // Every listed primitive shows the first sentence of its help.
  std::istringstream lines(all.out);
  std::string line;
  int listed = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("  ", 0) != 0 || line.find('(') == std::string::npos) continue;
    ++listed;
    EXPECT_GT(line.size(), 47u) << "no help text: " << line;
  }
  EXPECT_GT(listed, 200);
  Result one = run_cli("ops range");
  EXPECT_EQ(one.status, 0);
  EXPECT_NE(one.out.find("range(start, stop=nil, step=1)"), std::string::npos) << one.out;
  Result bad = run_cli("ops lenn");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("did you mean len"), std::string::npos) << bad.out;
}

TEST(Examples, Factorial) {
  Result r = run_cli("eval --quiet " + example("factorial.tsl") + " 20");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "factorial(20) = 2432902008176640000\n");
}

// The process ends while its loops' -O3 code is compiled in the background:
// with an empty cache each run compiles, and its exit must wait for that
// compile (a target machine first made on the compile thread was destroyed
// under it: a segfault at exit in about one run in thirteen).
TEST(Examples, EndsCleanlyWhileItsLoopsCompile) {
  for (int run = 0; run < 12; ++run) {
    char dir[] = "/tmp/tessera-cli-cache-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    Result r = tessera::test::run_command("TESSERA_CACHE_DIR=" + std::string(dir) + " " +
                                   std::string(TESSERA_CLI) + " eval --quiet " +
                                   example("factorial.tsl") + " 20 2>&1");
    EXPECT_EQ(r.status, 0) << "run " << run << ": " << r.out;
    EXPECT_EQ(r.out, "factorial(20) = 2432902008176640000\n");
    tessera::test::run_command("rm -rf " + std::string(dir));
  }
}

TEST(Examples, Fibonacci) {
  Result r = run_cli("eval --quiet " + example("fibonacci.tsl") + " 22");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "fib(22) = 17711\n");
}

TEST(Examples, LogisticRegressionLearns) {
  Result r = run_cli("eval " + example("logistic_regression.tsl") + " 4000 10 100");
  ASSERT_EQ(r.status, 0) << r.out;
  auto pos = r.out.find("training accuracy: ");
  ASSERT_NE(pos, std::string::npos) << r.out;
  double acc = std::stod(r.out.substr(pos + 19));
  EXPECT_GT(acc, 0.95) << r.out;
  EXPECT_LE(acc, 1.0);
}

TEST(Examples, KMeansFindsTheBlobCenters) {
  Result r = run_cli("eval --quiet " + example("kmeans.tsl") + " 300 10");
  ASSERT_EQ(r.status, 0) << r.out;
  // Centroids sorted by x: (-6, 6), (0, 0), (6, 6), each within 0.3.
  double c[6];
  const char* s = r.out.c_str();
  int k = 0;
  for (const char* p = s; *p && k < 6;) {
    char* end;
    if ((*p >= '0' && *p <= '9') || *p == '-' || *p == '.') {
      double v = std::strtod(p, &end);
      if (end != p) {
        c[k++] = v;
        p = end;
        continue;
      }
    }
    ++p;
  }
  ASSERT_EQ(k, 6) << r.out;
  const double expected[6] = {-6, 6, 0, 0, 6, 6};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(c[i], expected[i], 0.3) << r.out;
}
