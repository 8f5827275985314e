#include <gtest/gtest.h>

#include <thread>

#include "tessera/core/recursion_error.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"
#include "test_util.hpp"

using namespace tessera;
using tessera::test::array_eq;
using tessera::test::throws_with;

namespace {

Value run(const std::string& text, std::vector<Value> args = {}) {
  return eval_string(text, std::move(args), "t.tsl");
}

// Sweeps thread counts, and runs each case once with the measured
// direct-execution rule and once with every primitive spawned as a task.
class LangThreads : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    set_num_threads(std::get<0>(GetParam()));
    if (std::get<1>(GetParam())) set_spawn_threshold_ns(0.0);
  }
  void TearDown() override {
    set_num_threads(2);
    set_spawn_threshold_ns(kSpawnThresholdNs);
  }
};

}  // namespace

TEST_P(LangThreads, ArithmeticAndVariables) {
  EXPECT_EQ(run("1 + 2 * 3").as_int(), 7);
  EXPECT_DOUBLE_EQ(run("7 / 2").as_float(), 3.5);
  EXPECT_EQ(run("define(x, 4) define(y, x * x) y - 1").as_int(), 15);
  EXPECT_EQ(run("block(define(x, 1), store(x, x + 41), x)").as_int(), 42);
}

TEST_P(LangThreads, FunctionsClosuresRecursionDefaults) {
  EXPECT_EQ(run("define(fact, n, if(n <= 1, 1, n * fact(n - 1))) fact(10)").as_int(), 3628800);
  EXPECT_EQ(run("define(fib, n, if(n < 2, n, fib(n - 1) + fib(n - 2))) fib(20)").as_int(), 6765);
  EXPECT_EQ(run("define(adder, n, lambda(x, x + n)) define(add5, adder(5)) add5(10)").as_int(), 15);
  EXPECT_EQ(run("define(f, a, b=10, a * b) f(2) + f(2, 3) + f(b=1, a=7)").as_int(), 20 + 6 + 7);
  EXPECT_EQ(run("define(apply, f, x, f(x)) apply(lambda(v, v * 3), 4)").as_int(), 12);
}

TEST_P(LangThreads, WhileLoopsAndForEach) {
  EXPECT_EQ(run("define(i, 0) define(s, 0) while(i < 100, block(store(s, s + i), store(i, i + 1))) s")
                .as_int(),
            4950);
  // parallel_while (tessera.prange): its turns in chunks when it has native
  // code, the same value as while either way (a sum of ints is exact).
  EXPECT_EQ(run("define(k, 0) define(e, 5000) define(s, 0) parallel_while(k < e, "
                "block(define(i, k), define(k, k + 1), define(s, s + i * i))) s")
                .as_int(),
            41654167500);
  EXPECT_EQ(run("define(k, 10) define(e, 0) define(s, 0) parallel_while(k > e, "
                "block(define(i, k), define(k, k + -2), define(s, s + i))) list(s, i, k)")
                .as_list()[0]
                .as_int(),
            30);
  EXPECT_EQ(run("define(s, 0) for_each(lambda(v, store(s, s + v)), range(5)) s").as_int(), 10);
  EXPECT_EQ(run("define(s, 0) for_each(lambda(v, store(s, s + v)), list(1, 2, 3)) s").as_int(), 6);
  // The rows of an array are views of it, as NumPy iterates them.
  Value x = run("define(x, transpose(reshape(arange(6.0), [2, 3])))\n"
                "for_each(lambda(row, setitem(row, -1.0, 0)), x) x");
  EXPECT_EQ(x.str(), "[[-1.  3.]\n [-1.  4.]\n [-1.  5.]]");
}

TEST_P(LangThreads, ViewsArePrintedAndTestedAsTheirElements) {
  // A program's value may be a strided view: printing walks its strides.
  EXPECT_EQ(run("transpose(reshape(arange(6), [2, 3]))").str(), "[[0 3]\n [1 4]\n [2 5]]");
  EXPECT_EQ(run("getitem(reshape(arange(6) > 2, [2, 3]), slice(nil, nil, -1), 2)").str(), "[ True False]");
  EXPECT_EQ(run("reshape(arange(4), getitem(array([2, 9, 2]), slice(nil, nil, 2)))").str(), "[[0 1]\n [2 3]]");
}

TEST_P(LangThreads, ListsDictsAndArrays) {
  Value a = run("[[1, 2], [3, 4]]");
  EXPECT_TRUE(array_eq(a, DType::int64, {2, 2}, {1, 2, 3, 4}));
  Value b = run("[1.5, 2] * 2");
  EXPECT_TRUE(array_eq(b, DType::float64, {2}, {3.0, 4.0}));
  Value l = run("list(1, \"two\", 3.0)");
  ASSERT_TRUE(l.is_list());
  EXPECT_EQ(l.str(), "[1, 'two', 3.0]");
  Value d = run("dict(\"a\", 1, b=2)");
  ASSERT_TRUE(d.is_dict());
  EXPECT_EQ(d.str(), "{'a': 1, 'b': 2}");
  EXPECT_EQ(run("len(list(1, 2, 3))").as_int(), 3);
}

TEST_P(LangThreads, ParallelBlockRunsEveryChild) {
  Value v = run("define(a, 0) define(b, 0) parallel_block(store(a, 1), store(b, 2)) a * 10 + b");
  EXPECT_EQ(v.as_int(), 12);
}

TEST_P(LangThreads, ShortCircuitLogic) {
  EXPECT_EQ(run("false && assert(false, \"evaluated\")").as_bool(), false);
  EXPECT_EQ(run("true || assert(false, \"evaluated\")").as_bool(), true);
  EXPECT_THROW(run("true && assert(false, \"evaluated\")"), std::runtime_error);
  EXPECT_EQ(run("1 < 2 && 2 < 3").as_bool(), true);
}

TEST_P(LangThreads, ProgramValueFunctionIsCalledWithArguments) {
  Value v = run("define(main, a, b, a * b) main", {Value(int64_t{6}), Value(int64_t{7})});
  EXPECT_EQ(v.as_int(), 42);
  EXPECT_EQ(run("len(argv)", {Value(1.0), Value("x")}).as_int(), 2);
}

INSTANTIATE_TEST_SUITE_P(Threads, LangThreads,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()));

TEST(LangErrors, UnknownNamesSuggestAlternatives) {
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("1 + undefined_thing"); },
                                       "[compile] unknown name 'undefined_thing' (at t.tsl:1:5)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("sine(1)"); },
                                       "unknown function 'sine'"));
}

TEST(LangErrors, ArityErrorsAtCompileTime) {
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("\n  len(1, 2)"); },
                                                 "[len] takes at most 1 argument but 2 were given"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("\n  len(1, 2)"); }, "(at t.tsl:2:3)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("range()"); }, "missing argument 'start'"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("len(y=1)"); },
                                                 "unexpected named argument 'y'"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("if(1)"); }, "[if] expects"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("store(zz, 1)"); }, "unknown variable 'zz'"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("define(1, 2)"); }, "must be a name"));
}

TEST(LangErrors, RuntimeErrorsCarryTheirPosition) {
  EXPECT_TRUE(throws_with<TypeError>([] { run("define(f, x, x + 1)\nf(\"s\")"); }, "(at t.tsl:1:16)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("define(f, a, a) f(1, 2)"); },
                                                 "[f] takes 1 argument but 2 were given"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("block(x, define(x, 1))"); },
                                                 "variable 'x' is used before it is defined"));
  EXPECT_TRUE(throws_with<TypeError>([] { run("define(x, 3) x(1)"); }, "int 3 is not a function"));
  EXPECT_TRUE(throws_with<std::invalid_argument>([] { run("if([1, 2] > 0, 1, 2)"); },
                                                 "truth value of an array with more than one element"));
  EXPECT_TRUE(throws_with<std::runtime_error>([] { run("assert(1 > 2, \"math\")"); },
                                              "[assert] assertion failed: math"));
}

TEST(LangErrors, RunawayRecursionIsAnErrorNotACrash) {
  // Python's RecursionError (a runtime_error, as Python's is a RuntimeError).
  EXPECT_TRUE(throws_with<RecursionError>([] { run("define(f, n, f(n + 1)) f(0)"); },
                                          "maximum call depth"));
  // Deep but bounded recursion works.
  EXPECT_EQ(run("define(f, n, if(n == 0, 0, 1 + f(n - 1))) f(3000)").as_int(), 3000);
}

TEST(LangTree, CountersAndDotDescribeEveryPrimitiveNode) {
  Program p("define(x, 2)\nx * 3 + 1", "c.tsl");
  EXPECT_EQ(p.run().as_int(), 7);
  std::string csv = p.counters_csv();
  EXPECT_NE(csv.find("name,position,evaluations,total_ns,mean_ns,execution"), std::string::npos);
  EXPECT_NE(csv.find("multiply,c.tsl:2:3,1,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("add,c.tsl:2:7,1,"), std::string::npos) << csv;
  std::string dot = p.tree_dot();
  EXPECT_EQ(dot.rfind("digraph tessera {", 0), 0u);
  EXPECT_NE(dot.find("multiply\\nc.tsl:2:3"), std::string::npos) << dot;
  EXPECT_NE(dot.find("->"), std::string::npos);
}

TEST_P(LangThreads, BreakContinueReturn) {
  // Sum of odd numbers below 10, stopping at 7: 1 + 3 + 5 = 9.
  EXPECT_EQ(run("define(i, 0) define(s, 0)\n"
                "while(true, block(store(i, i + 1), if(i >= 7, break()),\n"
                "                  if(i % 2 == 0, continue()), store(s, s + i)))\n"
                "s")
                .as_int(),
            9);
  EXPECT_EQ(run("define(s, 0)\n"
                "for_each(lambda(v, block(if(v == 3, continue()), if(v == 6, break()),\n"
                "                         store(s, s + v))), range(10))\n"
                "s")
                .as_int(),
            0 + 1 + 2 + 4 + 5);
  EXPECT_EQ(run("define(find, xs, target, block(\n"
                "  define(i, 0),\n"
                "  while(i < len(xs), block(if(xs[i] == target, return(i)), store(i, i + 1))),\n"
                "  -1))\n"
                "list(find(list(5, 7, 9), 9), find(list(5, 7, 9), 4))")
                .str(),
            "[2, -1]");
  EXPECT_TRUE(run("define(f, lambda(return())) f()").is_nil());
  // return() leaves only the innermost function.
  EXPECT_EQ(run("define(outer, lambda(block(define(g, lambda(return(1))), g() + 10))) outer()").as_int(), 11);
}

TEST(LangErrors, ControlFlowOutsideItsConstruct) {
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("break()"); }, "[break] outside a loop"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("define(f, continue()) f()"); },
                                       "[continue] outside a loop"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("return(1)"); }, "[return] outside a function"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("while(true, lambda(break()))"); },
                                       "[break] outside a loop"));
}

TEST(LangErrors, LineDirectivesPointAtTheGeneratingSource) {
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { run("#line 41 \"model.py\"\ndefine(a, [1, 2, 3])\n#line 42\na + [1, 2]"); },
      "(at model.py:42)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("#line 7 \"m.py\"\n1 + nope"); },
                                       "unknown name 'nope' (at m.py:7)"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { run("#line x\n1"); }, "#line needs a positive line number"));
}

TEST(LangNames, OperatorsMeanTheirPrimitivesWhateverTheProgramDefines) {
  // A function of the program's own named add, negative, getitem or slice
  // is what calls by that name get; +, unary -, x[i] and a:b stay the
  // primitives.
  EXPECT_EQ(run("define(f, x, block(define(add, lambda(y, x + y)), add(1) + add(2))) f", {Value(int64_t{10})})
                .as_int(),
            23);
  EXPECT_EQ(run("block(define(negative, lambda(y, 0)), list(-(3 + 1), negative(5)))").str(), "[-4, 0]");
  EXPECT_EQ(run("block(define(getitem, lambda(v, i, 0)), define(slice, lambda(a, b, c, 0)),\n"
                "  define(v, [5, 6, 7]), list(v[1], v[1:], getitem(v, 1)))")
                .str(),
            "[6, [6 7], 0]");
}

namespace {

// A function whose run makes closures referring to their own scope, one of
// them stored in an outer scope while referring to an inner one, and
// recursion; its value is 4 * (7 + 3 + 1) for a = ones(4).
const char* kClosuresMain =
    "define(main, a, block(\n"
    "  define(keep, lambda(x, a + x)),\n"
    "  define(adder, n, lambda(x, x + n + a)),\n"
    "  define(add5, adder(5)),\n"
    "  define(rec, n, if(n == 0, a, rec(n - 1))),\n"
    "  sum(add5(1) + keep(2) + rec(3))))\n";

}  // namespace

TEST(LangMemory, FramesAndClosuresAreFreedAfterARun) {
  // After the run nothing may keep `a` alive.
  Array a = Array::full(DType::float64, {4}, 1.0);
  {
    Program p(std::string(kClosuresMain) + "define(outer_keep, main)\nmain", "m.tsl");
    Value r = p.run({Value(a)});
    EXPECT_DOUBLE_EQ(r.as_array().item(), 4 * (7 + 3 + 1));
  }
  EXPECT_TRUE(a.unique()) << "a frame holding the argument was not freed";
}

TEST_P(LangThreads, EscapingClosuresKeepTheirScope) {
  // Returned: f still sees helper after make() returned.
  EXPECT_EQ(run("define(make, lambda(block(define(helper, lambda(x, x + 1)),\n"
                "                          define(f, lambda(x, helper(x) * 2)), f)))\n"
                "define(g, make()) g(3)")
                .as_int(),
            8);
  // Stored into an outer variable.
  EXPECT_EQ(run("define(holder, nil)\n"
                "define(setup, lambda(block(define(h, lambda(x, x * 3)),\n"
                "                           store(holder, lambda(x, h(x))), 0)))\n"
                "setup() holder(2)")
                .as_int(),
            6);
  // Stored inside a list kept outside.
  EXPECT_EQ(run("define(fs, list())\n"
                "define(setup, lambda(block(define(h, lambda(x, x + 10)),\n"
                "                           store(fs, append(fs, lambda(y, h(y)))), 0)))\n"
                "setup() fs[0](1)")
                .as_int(),
            11);
}

TEST(LangOptimizer, TransposedProductIsFused) {
  Program p("define(x, reshape(arange(6.0), [3, 2])) transpose(x) @ [1.0, 2.0, 3.0]", "o.tsl");
  Value r = p.run();
  EXPECT_TRUE(tessera::test::array_eq(r, DType::float64, {2}, {0 + 2 * 2 + 4 * 3, 1 + 3 * 2 + 5 * 3}));
  EXPECT_NE(p.counters_csv().find("matmul_tn,"), std::string::npos) << p.counters_csv();
  EXPECT_EQ(p.counters_csv().find("transpose,"), std::string::npos) << p.counters_csv();
}

TEST(LangResident, ProgramsOfFunctionsKeepTheirTopLevelFrame) {
  // The form the Python front end generates: functions, then one of them.
  EXPECT_TRUE(Program("define(g, x, x + 2)\ndefine(f, x, y, g(x * y) + 1)\nf").resident());
  EXPECT_TRUE(Program("define(fact, n, if(n <= 1, 1, n * fact(n - 1))) fact").resident());
  EXPECT_TRUE(Program("define(f, x, k = 3, x * k) f").resident());
  // Not of that form: the top level reads argv, computes, assigns, or a
  // function reads argv, assigns a top-level variable or has a default
  // computed at the top level.
  EXPECT_FALSE(Program("define(f, x, x) f(1)").resident());
  EXPECT_FALSE(Program("define(n, 2) define(f, x, x * n) f").resident());
  EXPECT_FALSE(Program("define(f, x, len(argv) + x) f").resident());
  EXPECT_FALSE(Program("define(g, x, x) define(f, x, block(store(g, lambda(y, y)), g(x))) f").resident());
  EXPECT_FALSE(Program("define(f, x, k = 1 + 2, x * k) f").resident());
  EXPECT_FALSE(Program("define(f, x, x) define(h, f) h").resident());
  EXPECT_FALSE(Program("argv").resident());
}

TEST(LangResident, RunsGiveTheResultsOfTheGeneralPath) {
  // Each case once as a resident program and once with a statement in front
  // that makes it run the general way (a fresh top-level frame per run).
  struct Case {
    std::string text;
    std::vector<Value> args;
  };
  std::vector<Case> cases = {
      {"define(fact, n, if(n <= 1, 1, n * fact(n - 1))) fact", {Value(int64_t{10})}},
      {"define(even, n, if(n == 0, true, odd(n - 1))) define(odd, n, if(n == 0, false, even(n - 1))) even",
       {Value(int64_t{7})}},
      {"define(g, x, x + 1) define(g, x, x * 10) define(f, x, g(x)) f", {Value(int64_t{4})}},
      {"define(f, x, k = 3, x * k) f", {Value(int64_t{5})}},
      {"define(f, x, block(define(add, lambda(y, x + y)), add(1) + add(2))) f", {Value(int64_t{10})}},
  };
  for (const Case& c : cases) {
    Program resident(c.text, "r.tsl"), general("define(unused, 0)\n" + c.text, "g.tsl");
    ASSERT_TRUE(resident.resident()) << c.text;
    ASSERT_FALSE(general.resident()) << c.text;
    for (int run = 0; run < 3; ++run) {
      EXPECT_EQ(resident.run(c.args).str(), general.run(c.args).str()) << c.text;
    }
  }
  // Too few arguments: the same error, naming the function.
  Program p("define(f, x, y, x + y) f", "r.tsl");
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { p.run({Value(int64_t{1})}); }, "[f] missing argument 'y'"));
}

TEST(LangResident, ArgumentsAndClosuresAreFreedAfterEachRun) {
  // The resident frame lives with the program; nothing of a run may stay
  // in it (here: closures over the run's frame and recursion).
  Array a = Array::full(DType::float64, {4}, 1.0);
  Program p(std::string(kClosuresMain) + "main", "m.tsl");
  ASSERT_TRUE(p.resident());
  for (int run = 0; run < 2; ++run) {
    Value r = p.run({Value(a)});
    EXPECT_DOUBLE_EQ(r.as_array().item(), 4 * (7 + 3 + 1));
    EXPECT_TRUE(a.unique()) << "run " << run << " left the argument referenced";
  }
}

TEST(LangResident, ConcurrentRunsOfOneProgram) {
  Program p("define(fib, n, if(n < 2, n, fib(n - 1) + fib(n - 2))) fib", "r.tsl");
  ASSERT_TRUE(p.resident());
  std::vector<std::thread> threads;
  std::vector<int64_t> got(4, -1);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { got[t] = p.run({Value(int64_t{12 + t})}).as_int(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, (std::vector<int64_t>{144, 233, 377, 610}));
}

TEST(LangNow, OperandsReadAtOnceKeepTheirMeaning) {
  // Constants, variables and scalar operations reach a primitive without
  // futures (Node::eval_now); values, closures and errors are unchanged.
  EXPECT_EQ(eval_string("block(define(i, 2), define(x, [1, 2, 3]), list(i, x, i * 3, 4 - i))").str(),
            eval_string("list(2, [1, 2, 3], 6, 2)").str());
  // A function over the frame it is defined in, read into a list and
  // called after its run has ended: the list holds a strong reference.
  Program p("define(f, n, block(define(k, lambda(x, x + n)), append(list(), k))) f", "k.tsl");
  Value fns = p.run({Value(int64_t{10})});
  ASSERT_TRUE(fns.is_list());
  EXPECT_EQ(invoke(fns.as_list()[0], std::vector<Value>{Value(int64_t{5})}, SourceLoc{}).wait().as_int(), 15);
  // A variable read before it is defined, and an integer division by zero
  // in a loop's condition: the errors name their positions.
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { eval_string("block(define(j, i + 1), define(i, 0), j)", {}, "u.tsl"); }, "(at u.tsl:1:"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { eval_string("block(define(i, 3), while(floor_divide(1, i - 3) > 0, store(i, i + 1)), i)", {}, "z.tsl"); },
      "z.tsl:1:"));
  // A loop's condition and stores read at once, to the end.
  EXPECT_EQ(eval_string("block(define(i, 0), define(s, 0), while(i < 100, block(store(s, s + i), store(i, i + 1))), s)")
                .as_int(),
            4950);
}

TEST(LangScalars, ScalarOperandsTakeTheDirectPathWithTheSameResultsAndErrors) {
  // Two scalar operands of an elementwise binary primitive are computed
  // without binding arguments (PrimitiveSpec::scalar_binary); while a trace
  // records, every call takes the general path. Both must agree.
  const std::vector<std::string> ops = {"add",   "subtract", "multiply",   "divide",      "floor_divide",
                                        "mod",   "power",    "maximum",    "minimum",     "equal",
                                        "less",  "greater_equal", "logical_and", "logical_xor", "arctan2"};
  const std::vector<std::string> operands = {"7, 2", "-7, 2", "7, -2.5", "true, true", "2, -1", "0.5, 3", "3, 0.25"};
  std::string text = "define(f, list(";
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t j = 0; j < operands.size(); ++j) {
      text += std::string(i || j ? ", " : "") + ops[i] + "(" + operands[j] + ")";
    }
  }
  text += ")) f";
  Program p(text, "s.tsl");
  std::string direct = p.run().str();
  trace::start();
  std::string general = p.run().str();
  trace::stop();
  EXPECT_EQ(direct, general);
  // Errors carry the operator's position either way.
  Program overflow("define(f, n, block(define(i, n), i + 1)) f", "o.tsl");
  EXPECT_TRUE(throws_with<std::overflow_error>([&] { overflow.run({Value(int64_t{9223372036854775807})}); },
                                               "(at o.tsl:1:36)"));
  // And are counted.
  Program loop("define(f, n, block(define(i, 0), while(i < n, store(i, i + 1)), i)) f", "l.tsl");
  EXPECT_EQ(loop.run({Value(int64_t{5})}).as_int(), 5);
  EXPECT_NE(loop.counters_csv().find("less,l.tsl:1:42,6,"), std::string::npos) << loop.counters_csv();
}
