// Values freed at their last use (compiler.cpp, release_at_last_use): a
// function's parameters and defines are let go right after the last
// statement of its body that reads them, so a chain of large arrays holds
// two at a time instead of all of them; closures, loops and branches still
// see every value they read, and results do not change.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/core/array.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/lang/tree.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;

namespace {

constexpr size_t kMb8 = size_t{8} << 20;  // one float64 array of 2^20 elements

Array ramp() {
  Array x(DType::float64, {1 << 20});
  for (int64_t i = 0; i < x.size(); ++i) x.data<double>()[i] = 1e-6 * static_cast<double>(i);
  return x;
}

// The most array bytes live at once while `p` runs on `args`, above what
// was live before (the arguments, held by the caller, are not counted).
size_t peak_during(const Program& p, const std::vector<Value>& args, Value& result) {
  const size_t before = memory_stats().live;
  reset_peak_memory();
  result = p.run(args);
  return memory_stats().peak_live - before;
}

}  // namespace

// Four 8 MB intermediates in a row: each is read once, by the next one, so
// at most two live at once (the one read and the one made); before, all
// four lived until the function returned.
TEST(Liveness, AChainHoldsTwoIntermediatesNotAll) {
  Array x = ramp();
  Program p(
      "define(f, x, block(define(a, x * 2.0), define(b, a + 1.0), define(c, exp(b)),\n"
      "  define(d, c * 3.0), sum(d)))\nf",
      "chain.tsl");
  Value r;
  size_t peak = peak_during(p, {Value(x)}, r);
  EXPECT_LE(peak, 2 * kMb8 + kMb8 / 2) << peak;
  EXPECT_GE(peak, 2 * kMb8) << peak;
  double want = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    want += 3.0 * std::exp(2e-6 * static_cast<double>(i) + 1.0);
  }
  double got = r.is_array() ? r.as_array().get_double(0) : r.as_float();
  EXPECT_NEAR(got, want, 1e-9 * want);
}

// A parameter the caller hands over is let go after its last read too: the
// frame does not keep the weights it was given next to the ones it makes.
TEST(Liveness, AParameterIsReleasedAfterItsLastRead) {
  Program p(
      "define(step, w, block(define(w2, w - 0.5), define(w3, w2 * 2.0), define(w4, w3 + 1.0),\n"
      "  w4))\nstep",
      "param.tsl");
  const size_t before = memory_stats().live;
  reset_peak_memory();
  Value r;
  {
    std::vector<Value> args{Value(ramp())};
    // Only the program holds the argument now (Program::run takes it).
    r = p.run(std::move(args));
  }
  size_t peak = memory_stats().peak_live - before;
  // w and w2 together, then w2 and w3, then w3 and w4: never three.
  EXPECT_LE(peak, 2 * kMb8 + kMb8 / 2) << peak;
  EXPECT_NEAR(r.as_array().get_double(10), (1e-5 - 0.5) * 2.0 + 1.0, 1e-12);
}

// Closures keep what they read: y is read by g after the statement that
// made g, and by a for_each body; both see it.
TEST(Liveness, ClosuresStillSeeTheirValues) {
  Value r = eval_string(
      "define(f, x, block(define(y, x * 2.0), define(g, lambda(z, y + z)), define(t, g(1.0)),\n"
      "  define(acc, list()), for_each(lambda(v, store(acc, append(acc, v * y))), [1, 2]),\n"
      "  define(u, g(2.0)), list(t, u, acc)))\nf(3.0)",
      {}, "closure.tsl");
  EXPECT_EQ(r.str(), "[7.0, 8.0, [6.0, 12.0]]");
  // A function defined in the block reading a parameter.
  Value r2 = eval_string(
      "define(f, x, n, block(define(h, k, x * k), define(a, h(2)), define(b, h(n)), a + b))\n"
      "f(5, 3)",
      {}, "closure.tsl");
  EXPECT_EQ(r2.as_int(), 25);
}

// Loops and branches: a while loop re-reads its variables on every turn
// (they are released after the loop statement, not inside it); the branch
// of an if sees the values of its turn; a variable defined again after its
// release reads the new value.
TEST(Liveness, LoopsIfsAndRedefinitionsSeeTheirValues) {
  Value r = eval_string(
      "define(f, n, c, block(define(s, 0), define(i, 0), define(k, 2),\n"
      "  while(i < n, block(store(s, s + i * k), store(i, i + 1))),\n"
      "  define(y, s + 1), define(z, if(c, y * 2, y * 3)), define(a, z), define(b, a + 1),\n"
      "  define(a, b * 10), list(s, z, a, b)))\n"
      "list(f(4, true), f(4, false))",
      {}, "loops.tsl");
  EXPECT_EQ(r.str(), "[[12, 26, 270, 27], [12, 39, 400, 40]]");
}

// Gradients are unchanged (the generated gradient function is a function
// too, and its parameters are now released after their last read).
TEST(Liveness, GradientsAreUnchanged) {
  Value r = eval_string(
      "define(f, w, x, block(define(h, tanh(x @ w)), define(o, h * h), sum(o)))\n"
      "define(g, grad(f, [0, 1])([[1.0, 2.0], [0.5, -1.0]], [[0.3, 0.1]]))\n"
      "g",
      {}, "grad.tsl");
  // d/dw sum(tanh(xw)^2) = x^T (2 t (1 - t^2)), d/dx = (2 t (1 - t^2)) w^T.
  double t0 = std::tanh(0.3 * 1.0 + 0.1 * 0.5), t1 = std::tanh(0.3 * 2.0 + 0.1 * -1.0);
  double g0 = 2 * t0 * (1 - t0 * t0), g1 = 2 * t1 * (1 - t1 * t1);
  const List& l = r.as_list();
  EXPECT_NEAR(l[0].as_array().get_double(0), 0.3 * g0, 1e-12);
  EXPECT_NEAR(l[0].as_array().get_double(3), 0.1 * g1, 1e-12);
  EXPECT_NEAR(l[1].as_array().get_double(0), g0 * 1.0 + g1 * 2.0, 1e-12);
  EXPECT_NEAR(l[1].as_array().get_double(1), g0 * 0.5 + g1 * -1.0, 1e-12);
}

// A parallel_block's tasks read the variables when they run, which may be
// after the statement has moved on (a define of it goes on computing): what
// it reads is kept. With every node spawned as a task, many times over.
TEST(Liveness, AParallelBlockStillSeesItsValues) {
  set_spawn_threshold_ns(0);
  for (int i = 0; i < 50; ++i) {
    Value r = eval_string(
        "define(f, x, block(define(y, parallel_block(x * 2.0, x * 3.0)), define(w, 1.0),\n"
        "  y + w))\nf(2.0)",
        {}, "parallel.tsl");
    ASSERT_EQ(r.str(), "7.0");
  }
  set_spawn_threshold_ns(kSpawnThresholdNs);
}

// A define still computing when its block gets to it (a product running as
// a task, a collective in flight) is waited for at the block's end; the
// block kept its future, and with it the value, until then, so a chain of
// such defines held every product although each is freed at its last read
// (ZeRO-3's gathered buckets: the whole model). Eight 1 MiB products, each
// started after the sum of the one before: at most a few at once.
TEST(Liveness, APendingDefineIsFreedAtItsLastReadToo) {
  Array x(DType::float64, {256, 512}), w(DType::float64, {512, 512});
  for (int64_t i = 0; i < x.size(); ++i) x.data<double>()[i] = std::sin(0.01 * i);
  for (int64_t i = 0; i < w.size(); ++i) w.data<double>()[i] = std::cos(0.02 * i) * 1e-3;
  std::string body = "define(a0, x @ w), define(s0, sum(a0))";
  std::string total = "s0";
  for (int k = 1; k < 8; ++k) {
    const std::string p = std::to_string(k - 1), n = std::to_string(k);
    body += ",\n  define(a" + n + ", x @ after(w, s" + p + ")), define(s" + n + ", sum(a" + n +
            "))";
    total += " + s" + n;
  }
  Program p("define(f, x, w, block(" + body + ",\n  " + total + "))\nf", "pending.tsl");
  // Every primitive a task (after its first run), on 2 threads: each
  // product is a pending define.
  set_num_threads(2);
  set_spawn_threshold_ns(0.0);
  Value r;
  p.run({Value(x), Value(w)});
  const size_t product = 256 * 512 * sizeof(double);
  size_t peak = peak_during(p, {Value(x), Value(w)}, r);
  set_spawn_threshold_ns(kSpawnThresholdNs);
  EXPECT_LE(peak, 4 * product) << peak;
  Program q("define(f, x, w, 8.0 * sum(x @ w))\nf", "one.tsl");
  Value want = q.run({Value(x), Value(w)});
  const double got = r.is_array() ? r.as_array().get_double(0) : r.as_float();
  const double ref = want.is_array() ? want.as_array().get_double(0) : want.as_float();
  EXPECT_NEAR(got, ref, 1e-9 * std::abs(ref));
}
