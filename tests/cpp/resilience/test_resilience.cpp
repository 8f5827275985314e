// replay and replicate (tessera/resilience) against plain calls, with and
// without the fault injector, under 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/lang/tree.hpp"
#include "tessera/resilience/faults.hpp"
#include "tessera/resilience/resilience.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;
using tessera::test::array_eq;
using tessera::test::throws_with;

namespace {

Value run(const std::string& text, std::vector<Value> args = {}) {
  return eval_string(text, std::move(args), "t.tsl");
}

FaultConfig faults(const char* text) { return parse_fault_config(text, "test"); }

// Injection on for one test, off again after it.
class Injecting {
 public:
  explicit Injecting(const char* config) { set_fault_injection(faults(config)); }
  ~Injecting() { clear_fault_injection(); }
};

bool bitwise_equal(const Array& a, const Array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().origin_raw(), b.contiguous().origin_raw(), a.nbytes()) == 0;
}

// A function of some work on a 256-element array (its bits are what a
// fault flips) and its plain result.
const char* kWork = "define(work, x, sin(x) * 2.0 + cos(x))\n";

// Sweeps thread counts, once with the measured direct-execution rule (cheap
// copies of replicate run on the calling thread) and once with every copy
// spawned as a task.
class Resilience : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    set_num_threads(std::get<0>(GetParam()));
    if (std::get<1>(GetParam())) set_spawn_threshold_ns(0.0);
    clear_fault_injection();
  }
  void TearDown() override {
    set_num_threads(2);
    set_spawn_threshold_ns(kSpawnThresholdNs);
    clear_fault_injection();
  }
};

}  // namespace

TEST_P(Resilience, WithoutFaultsTheyEqualAPlainCall) {
  Value plain = run(std::string(kWork) + "work(linspace(0.0, 1.0, 256))");
  for (const char* call :
       {"replay(3, work, linspace(0.0, 1.0, 256))", "replicate(3, work, linspace(0.0, 1.0, 256))",
        "replay(1, work, linspace(0.0, 1.0, 256), validate=lambda(r, true))",
        "replicate(2, work, linspace(0.0, 1.0, 256))"}) {
    SCOPED_TRACE(call);
    Value r = run(std::string(kWork) + call);
    EXPECT_TRUE(bitwise_equal(r.as_array(), plain.as_array()));
  }
  EXPECT_EQ(run("replay(2, add, 40, 2)").as_int(), 42);  // a primitive as f
  EXPECT_EQ(run("replicate(4, lambda(a, b=1, a * b), 6, 7)").as_int(), 42);
}

TEST_P(Resilience, ReplaySucceedsAfterFailures) {
  // f fails its first two calls: a third attempt is needed and enough.
  const char* prog =
      "define(calls, 0)\n"
      "define(f, x, block(store(calls, calls + 1), assert(calls > 2, \"transient\"), x * 2))\n"
      "list(replay(N, f, 21), calls)";
  auto with_n = [&](int n) {
    std::string p = prog;
    p.replace(p.find('N'), 1, std::to_string(n));
    return run(p);
  };
  Value r = with_n(3);
  EXPECT_EQ(r.as_list()[0].as_int(), 42);
  EXPECT_EQ(r.as_list()[1].as_int(), 3);
  EXPECT_EQ(with_n(5).as_list()[1].as_int(), 3);  // no attempt after a success
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { with_n(2); },
      "[replay] f failed all 2 attempts (at t.tsl:3:6); the last error: [assert] assertion "
      "failed: transient (at t.tsl:2:"));
}

TEST_P(Resilience, ReplayKeepsTheKindOfTheLastError) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { run("replay(2, reshape, arange(6), [4])"); },
      "[replay] reshape failed all 2 attempts (at t.tsl:1:1); the last error: [reshape]"));
}

TEST_P(Resilience, ReplayValidates) {
  // The first two results are negative: validate rejects them.
  const char* prog =
      "define(calls, 0)\n"
      "define(f, k=0, block(store(calls, calls + 1), calls - 3))\n"
      "define(positive, r, r > 0)\n";
  Value r = run(std::string(prog) + "list(replay(5, f, validate=positive), calls)");
  EXPECT_EQ(r.as_list()[0].as_int(), 1);
  EXPECT_EQ(r.as_list()[1].as_int(), 4);
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { run(std::string(prog) + "replay(3, f, validate=positive)"); },
      "[replay] f failed all 3 attempts (at t.tsl:4:1); the last error: validate rejected the "
      "result of attempt 3: positive(result) returned bool false"));
}

TEST_P(Resilience, InjectedThrowsAreReplayed) {
  Value plain = run(std::string(kWork) + "work(linspace(0.0, 1.0, 256))");
  {
    Injecting on("throw=0.5,seed=3");
    for (int i = 0; i < 20; ++i) {
      Value r = run(std::string(kWork) + "replay(30, work, linspace(0.0, 1.0, 256))");
      EXPECT_TRUE(bitwise_equal(r.as_array(), plain.as_array()));
    }
    EXPECT_GT(fault_counts().throws, 5u);
    EXPECT_GT(fault_counts().calls, fault_counts().throws);
  }
  Injecting always("throw=1");
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [] { run(std::string(kWork) + "replay(4, work, 1.0)"); },
      "[replay] work failed all 4 attempts (at t.tsl:2:1); the last error: [inject_faults] "
      "injected fault in attempt 4 of work (replay call 0) (at t.tsl:2:1)"));
}

TEST_P(Resilience, ReplicateOutvotesBitFlips) {
  Value plain = run(std::string(kWork) + "work(linspace(0.0, 1.0, 256))");
  Injecting on("bitflip=0.1,seed=11");
  int corrupted_replays = 0;
  for (int i = 0; i < 20; ++i) {
    Value r = run(std::string(kWork) + "replicate(5, work, linspace(0.0, 1.0, 256))");
    EXPECT_TRUE(bitwise_equal(r.as_array(), plain.as_array())) << "call " << i;
    // Without a vote the same faults pass unnoticed: silent corruption.
    Value s = run(std::string(kWork) + "replay(1, work, linspace(0.0, 1.0, 256))");
    corrupted_replays += !bitwise_equal(s.as_array(), plain.as_array());
  }
  EXPECT_GT(fault_counts().bitflips, 5u);
  EXPECT_GT(corrupted_replays, 0);
}

TEST_P(Resilience, ReplicateWithoutMajorityFails) {
  Injecting on("bitflip=1,seed=5");  // every copy differs from every other
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [] { run(std::string(kWork) + "replicate(3, work, linspace(0.0, 1.0, 256))"); },
      "[replicate] no majority among the results of 3 copies of work: 3 different checksums, "
      "copies agreeing: [1], [2], [3] (at t.tsl:2:1)"));
}

TEST_P(Resilience, ReplicateValidateAndVote) {
  // validate: the first valid copy (by copy number) wins.
  EXPECT_EQ(run("replicate(3, lambda(x, x + 1), 41, validate=lambda(r, r == 42))").as_int(), 42);
  // vote receives the list of results.
  EXPECT_EQ(
      run("replicate(4, lambda(x, x * 2), 3, vote=lambda(rs, len(rs) * 100 + rs[0]))").as_int(),
      406);
  EXPECT_EQ(run("replicate(3, abs, -5, vote=lambda(rs, rs[0] + rs[1] + rs[2]))").as_int(), 15);
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [] { run("replicate(3, lambda(x, x), 1, validate=lambda(r, r > 1))"); },
      "[replicate] all 3 copies of lambda failed (at t.tsl:1:1); the last error: validate "
      "rejected the result of copy 3"));
  // With bit flips, an exact validation drops every corrupted copy; a
  // tolerance lets flips of low mantissa bits through.
  Injecting on("bitflip=0.5,seed=2");
  int near_misses = 0;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(run("replicate(8, lambda(x, x * 0.5), 3.0, validate=lambda(r, r == 1.5))").as_float(),
              1.5);
    double loose =
        run("replicate(8, lambda(x, x * 0.5), 3.0, validate=lambda(r, abs(r - 1.5) < 1e-9))")
            .as_float();
    EXPECT_NEAR(loose, 1.5, 1e-9);
    near_misses += loose != 1.5;
  }
  EXPECT_GT(near_misses, 0);
}

TEST_P(Resilience, ReplicateAllCopiesFail) {
  EXPECT_TRUE(throws_with<std::out_of_range>(
      [] { run("replicate(2, lambda(x, x[5]), arange(3))"); },
      "[replicate] all 2 copies of lambda failed (at t.tsl:1:1); the last error: [getitem]"));
  // A majority among the copies that returned: two agree, one threw.
  Injecting on("throw=0.4,seed=1");
  for (int i = 0; i < 10; ++i) {
    try {
      EXPECT_EQ(run("replicate(3, lambda(x, x + 1), 1)").as_int(), 2);
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("all 3 copies of lambda failed"), std::string::npos)
          << e.what();
    }
  }
}

TEST_P(Resilience, InjectorIsDeterministicForASeed) {
  auto outcome = [](const char* config) {
    Injecting on(config);
    std::string log;
    for (int i = 0; i < 30; ++i) {
      try {
        Value r = run("replicate(3, lambda(x, x * 1.0), 1.0, vote=lambda(rs, rs))");
        for (const Value& v : r.as_list()) log += v.str() + " ";
      } catch (const std::exception& e) {
        log += "error ";
      }
      log += "| ";
    }
    FaultCounts c = fault_counts();
    return log + std::to_string(c.throws) + " " + std::to_string(c.bitflips);
  };
  std::string a = outcome("throw=0.2,bitflip=0.3,seed=9");
  EXPECT_EQ(a, outcome("throw=0.2,bitflip=0.3,seed=9"));
  EXPECT_NE(a, outcome("throw=0.2,bitflip=0.3,seed=10"));
}

TEST_P(Resilience, OnlyNamesTheFunctionFaulted) {
  Injecting on("throw=1,only=g");
  EXPECT_EQ(run("define(f, x, x) replay(1, f, 7)").as_int(), 7);
  EXPECT_TRUE(throws_with<std::runtime_error>([] { run("define(g, x, x) replay(1, g, 7)"); },
                                              "injected fault in attempt 1 of g"));
}

INSTANTIATE_TEST_SUITE_P(Threads, Resilience,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

TEST(Resilience, CopiesAreTasksUnlessCheaperThanASpawn) {
  Program p("define(f, x, x + 1.0) define(main, x, replicate(3, f, x)) main", "t.tsl");
  Value x = Value(test::f64({1, 2, 3}));
  set_spawn_threshold_ns(0.0);  // every copy is worth a task
  uint64_t before = tasks_spawned();
  p.run({x});
  EXPECT_GE(tasks_spawned() - before, 2u);  // copies 2 and 3; copy 1 runs on this thread
  set_spawn_threshold_ns(kSpawnThresholdNs);
  // Measures copy 1 at this site: far cheaper than a spawn. The least of
  // the last three measurements decides, so one copy preempted on a
  // loaded machine does not make the next call spawn.
  for (int i = 0; i < 3; ++i) p.run({x});
  before = tasks_spawned();
  EXPECT_TRUE(array_eq(p.run({x}), DType::float64, {3}, {2, 3, 4}));
  EXPECT_EQ(tasks_spawned() - before, 0u);
}

TEST(Resilience, ArgumentErrors) {
  EXPECT_TRUE(
      throws_with<std::invalid_argument>([] { run("replay(0, abs, 1)"); },
                                         "[replay] argument 'n' must be a number of attempts from "
                                         "1 to 1048576, got 0 (at t.tsl:1:1)"));
  EXPECT_TRUE(throws_with<TypeError>([] { run("replicate(2, 5, 1)"); },
                                     "[replicate] argument 'f' must be a function, got int 5"));
  EXPECT_TRUE(throws_with<TypeError>([] { run("replay(2, abs, 1, validate=3)"); },
                                     "[replay] argument 'validate' must be a function or nil"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("replay(2, lambda(x, x), 1, 2)"); },
                                                 "[lambda] takes 1 argument but 2 were given"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { run("replicate(2, abs, 1, vote=nil, bogus=1)"); },
      "[replicate] unexpected named argument 'bogus': replicate(n, f, *args, validate=nil, "
      "vote=nil)"));
}

TEST(Resilience, KeywordOnlySettingsBindByNameOnly) {
  const PrimitiveSpec* spec = find_primitive("replay");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->signature(), "replay(n, f, *args, validate=nil)");
  // The third positional argument is one of f's, not validate.
  EXPECT_EQ(bind_arguments(*spec, {"", "", "", ""}), (std::vector<int>{0, 1, 3, 3}));
  EXPECT_EQ(bind_arguments(*spec, {"", "", "", "validate"}), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_TRUE(spec->calls_functions);
  EXPECT_TRUE(has_effects(*spec));
}

TEST(Resilience, NotDifferentiableButGradientsCanBeReplayed) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { run("define(f, x, sum(x * x)) define(g, x, replay(2, f, x)) grad(g)([1.0, 2.0])"); },
      "'replay' has no gradient rule, and its argument depends on a differentiated parameter "
      "(differentiate the function it calls, and replay the gradient: replay(n, grad(f), x)) (at "
      "t.tsl:1:"));
  EXPECT_TRUE(array_eq(run("define(f, x, sum(x * x)) replicate(3, grad(f), [1.0, 2.0])"),
                       DType::float64, {2}, {2.0, 4.0}));
}

TEST(Resilience, FaultConfigParsing) {
  FaultConfig c = faults(" throw=0.1, bitflip=0.01 ,seed=7,only=step");
  EXPECT_DOUBLE_EQ(c.throw_probability, 0.1);
  EXPECT_DOUBLE_EQ(c.bitflip_probability, 0.01);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.only, "step");
  EXPECT_EQ(c.str(), "throw=0.1,bitflip=0.01,seed=7,only=step");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { faults("throw=1.5"); },
      "[inject_faults] test: throw must be a probability in [0, 1], got '1.5' in 'throw=1.5'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { faults("flip=0.1"); },
                                                 "unknown key 'flip' in 'flip=0.1'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { faults("seed=-2"); },
                                                 "seed must be a non-negative integer"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { faults("throw"); }, "expected key=value"));
}

TEST(Resilience, InjectorOffChangesNothing) {
  clear_fault_injection();
  EXPECT_FALSE(fault_injection_on());
  EXPECT_FALSE(fault_injection().has_value());
  Value v = Value(test::f64({1, 2, 3}));
  Value same = inject_fault(v, 0, 0, "f", "replay", "");
  EXPECT_EQ(same.as_array().origin_raw(), v.as_array().origin_raw());
}

TEST(Resilience, BitFlipCopiesTheArray) {
  Injecting on("bitflip=1,seed=4");
  Array x = test::f64({1, 2, 3, 4});
  Array before = x.copy();
  Value r = inject_fault(Value(x), 0, 0, "f", "replicate", "");
  EXPECT_TRUE(bitwise_equal(x, before));  // the function's own array is untouched
  EXPECT_FALSE(bitwise_equal(r.as_array(), before));
  int differing_bits = 0;
  for (int64_t i = 0; i < 4; ++i) {
    uint64_t a, b;
    std::memcpy(&a, &r.as_array().data<double>()[i], 8);
    std::memcpy(&b, &before.data<double>()[i], 8);
    differing_bits += __builtin_popcountll(a ^ b);
  }
  EXPECT_EQ(differing_bits, 1);
}

TEST(Resilience, ChecksumsAreBitwise) {
  EXPECT_EQ(value_checksum(Value(test::f64({1, 2}))), value_checksum(Value(test::f64({1, 2}))));
  EXPECT_NE(value_checksum(Value(0.0)), value_checksum(Value(-0.0)));
  EXPECT_NE(value_checksum(Value(test::f64({1, 2}))), value_checksum(Value(test::f32({1, 2}))));
  EXPECT_NE(value_checksum(Value(test::f64({1, 2}, {2}))),
            value_checksum(Value(test::f64({1, 2}, {1, 2}))));
  EXPECT_NE(value_checksum(Value(List{Value(1)})), value_checksum(Value::tuple(List{Value(1)})));
  // A strided view sums as its elements in C order.
  Value t = run("transpose(reshape(arange(6.0), [2, 3]))");
  Value c = run("array([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])");
  EXPECT_EQ(value_checksum(t), value_checksum(c));
}
