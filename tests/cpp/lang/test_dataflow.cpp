// Blocks as dataflow: a define whose value is still computing (here a
// test primitive whose future the test completes by hand, standing in for a
// collective in flight) does not hold up the statements after it; readers of
// its variable wait for it; the block ends when everything in it is done;
// effects stay in program order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "tessera/core/error.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/lang/tree.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "test_util.hpp"

using namespace tessera;

namespace {

// test_gate(x, id): x, once the test opens gate id (a pending future until
// then). A gate the test has not armed passes x at once, so other tests that
// call every primitive (the fuzzer) never wait on it.
// test_note(x, id): x, and records that it ran.
struct Gates {
  std::mutex mutex;
  std::condition_variable cv;
  std::map<int64_t, Promise<Value>> armed;
  std::map<int64_t, Value> values;
  std::map<int64_t, int> notes;
};

Gates& gates() {
  static Gates g;
  return g;
}

Future<Value> gate_eval(Args& a) {
  Value x = a[0];
  int64_t id = a.integer(1);
  Gates& g = gates();
  std::lock_guard lock(g.mutex);
  auto it = g.armed.find(id);
  if (it == g.armed.end()) return Future<Value>::ready(x);
  g.values[id] = x;
  return it->second.get_future();
}

void register_test_primitives() {
  static const bool once = [] {
    std::vector<PrimitiveSpec> specs;
    specs.push_back(async_spec({.name = "test_gate", .family = "test", .params = {{"x"}, {"id"}},
                                .help = "x, once the test opens gate id (tests only).", .eval = nullptr},
                               gate_eval));
    specs.push_back({.name = "test_note",
                     .family = "test",
                     .params = {{"x"}, {"id"}},
                     .help = "x, recording that it ran (tests only).",
                     .eval = [](Args& a) -> Value {
                       Gates& g = gates();
                       {
                         std::lock_guard lock(g.mutex);
                         ++g.notes[a.integer(1)];
                       }
                       g.cv.notify_all();
                       return a[0];
                     },
                     .eval_async = nullptr});
    return register_primitives(std::move(specs));
  }();
  (void)once;
}

void arm(int64_t id) {
  std::lock_guard lock(gates().mutex);
  gates().armed[id] = Promise<Value>();
  gates().notes.erase(id);
}

// Completes gate id with the value it was given (or an error).
void open(int64_t id, bool fail = false) {
  Gates& g = gates();
  Promise<Value> p;
  Value v;
  {
    std::lock_guard lock(g.mutex);
    p = g.armed.at(id);
    v = g.values[id];
    g.armed.erase(id);
  }
  if (fail) {
    p.set_error(std::make_exception_ptr(std::invalid_argument("[test_gate] gate " + std::to_string(id) + " failed")));
  } else {
    p.set_value(v);
  }
}

// True once note id has run, waiting up to `seconds`.
bool noted(int64_t id, double seconds) {
  Gates& g = gates();
  std::unique_lock lock(g.mutex);
  return g.cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return g.notes[id] > 0; });
}

// True once gate id has been reached (its future handed out), up to `seconds`.
bool reached(int64_t id, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    {
      std::lock_guard lock(gates().mutex);
      if (gates().values.count(id)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Runs `text` on another thread (the boundary waits there).
struct Running {
  std::thread thread;
  Value result;
  std::exception_ptr error;
  explicit Running(const std::string& text) {
    thread = std::thread([this, text] {
      try {
        result = eval_string(text, {}, "df.tsl");
      } catch (...) {
        error = std::current_exception();
      }
    });
  }
  void join() { thread.join(); }
};

// Runs `text`, whose gate `id` the test opens once the program has reached it
// (and had a moment to go on past it), and gives the program's result.
Value result_after_gate(const std::string& text, int64_t id) {
  arm(id);
  Running r(text);
  bool got_there = reached(id, 10.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  open(id);
  r.join();
  EXPECT_TRUE(got_there) << text;
  if (r.error) std::rethrow_exception(r.error);
  return r.result;
}

// Runs `text`, which passes gate `id` and then note `id`: whether the note
// ran (given `seconds`) before the test opened the gate. `result` gets the
// program's result.
bool note_ran_before_gate(const std::string& text, int64_t id, Value& result, double seconds) {
  arm(id);
  Running r(text);
  EXPECT_TRUE(reached(id, 10.0)) << text;
  bool overtaken = noted(id, seconds);
  open(id);
  r.join();
  if (r.error) std::rethrow_exception(r.error);
  result = r.result;
  return overtaken;
}

class Dataflow : public ::testing::Test {
 protected:
  void SetUp() override {
    register_test_primitives();
    std::lock_guard lock(gates().mutex);
    gates().values.clear();
  }
};

}  // namespace

TEST_F(Dataflow, APendingDefineDoesNotHoldUpTheNextStatements) {
  // b runs while a's gate is still closed; with a sequential block it could not.
  Value v;
  EXPECT_TRUE(note_ran_before_gate("block(define(a, test_gate(40, 1)), define(b, test_note(2, 1)), a + b)", 1, v,
                                   10.0));
  EXPECT_EQ(v.as_int(), 42);
}

TEST_F(Dataflow, ReadersWaitForThePendingValue) {
  EXPECT_EQ(result_after_gate("block(define(a, test_gate(5, 2)), define(c, a * 2), define(d, c + 1), d)", 2)
                .as_int(),
            11);
}

TEST_F(Dataflow, AnyPrimitiveReadingAPendingVariableWaitsForIt) {
  // Operands a primitive reads at once (Node::eval_now) skip a variable
  // whose define is pending, even one that held a value before.
  EXPECT_EQ(result_after_gate("block(define(a, 1), define(a, test_gate(-5, 12)), define(c, append(list(), abs(a))), c)",
                              12)
                .str(),
            "[5]");
}

TEST_F(Dataflow, TheBlockEndsOnlyWhenEveryDefineIsDone) {
  // a is never read, yet its failure is the block's error, with its position.
  arm(3);
  Running r("block(\n  define(a, test_gate(1, 3)),\n  define(b, 7),\n  b)");
  ASSERT_TRUE(reached(3, 10.0));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  open(3, /*fail=*/true);
  r.join();
  ASSERT_TRUE(r.error);
  try {
    std::rethrow_exception(r.error);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gate 3 failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("df.tsl:2"), std::string::npos) << e.what();
  }
}

TEST_F(Dataflow, ALaterAssignmentWinsOverALateCompletion) {
  arm(4);
  Running r("block(define(a, test_gate(1, 4)), store(a, 7), define(b, a + 1), b)");
  ASSERT_TRUE(reached(4, 10.0));
  open(4);
  r.join();
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.result.as_int(), 8);
}

TEST_F(Dataflow, EffectsStayInProgramOrder) {
  // print makes the define wait: the note after it must not run before the gate opens.
  Value v;
  EXPECT_FALSE(
      note_ran_before_gate("block(define(a, print(test_gate(1, 5))), define(b, test_note(2, 5)), b)", 5, v, 0.2));
  EXPECT_EQ(v.as_int(), 2);
}

TEST_F(Dataflow, ErrorsOfEarlierStatementsComeFirst) {
  // Statement 1 (pending) fails first; statement 2 waits on gate 7, then fails
  // too: the block reports statement 1's error, as a sequential run would.
  arm(6);
  arm(7);
  Running r("block(\n  define(a, test_gate(1, 6)),\n  define(b, test_gate([1, 2], 7) + [1, 2, 3]),\n  b)");
  ASSERT_TRUE(reached(6, 10.0));
  ASSERT_TRUE(reached(7, 10.0));
  open(6, /*fail=*/true);
  open(7);
  r.join();
  ASSERT_TRUE(r.error);
  try {
    std::rethrow_exception(r.error);
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("gate 6 failed"), std::string::npos) << e.what();
  }
}

TEST_F(Dataflow, AFailingStatementDoesNotWaitForPendingDefines) {
  // Statement 2 fails while statement 1 is still pending (and would never
  // finish, like a gradient bucket whose last member statement 2 was to
  // compute): the block fails at once with statement 2's error.
  arm(8);
  Running r("block(\n  define(a, test_gate(1, 8)),\n  define(b, [1, 2] + [1, 2, 3]),\n  b)");
  ASSERT_TRUE(reached(8, 10.0));
  r.join();  // before the gate opens
  open(8);
  ASSERT_TRUE(r.error);
  try {
    std::rethrow_exception(r.error);
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("df.tsl:3"), std::string::npos) << e.what();
  }
}

TEST_F(Dataflow, LoopsWaitForEachIterationsDefines) {
  // Gates that were never armed pass at once; every iteration's pending
  // define (spawned primitives at 2 threads) is done before the next.
  set_num_threads(2);
  set_spawn_threshold_ns(0.0);
  Value v = eval_string(
      "block(define(s, 0), define(i, 0),\n"
      "  while(i < 50, block(define(t, test_gate(i * 2, 99)), define(u, sum(ones(t + 1))), store(s, s + u),"
      " store(i, i + 1))),\n"
      "  s)",
      {}, "df.tsl");
  set_spawn_threshold_ns(kSpawnThresholdNs);
  int64_t expect = 0;
  for (int i = 0; i < 50; ++i) expect += 2 * i + 1;
  EXPECT_DOUBLE_EQ(v.as_array().item(), static_cast<double>(expect));
}

TEST_F(Dataflow, AsynchronousLoopTurnsBreakAndContinue) {
  // Every primitive spawned (2 threads): each turn of while and for_each
  // finishes asynchronously; the loop goes on from its completion (one
  // promise for the whole loop, no chain of futures per turn), and break and
  // continue from such a turn still work.
  set_num_threads(2);
  set_spawn_threshold_ns(0.0);
  Value w = eval_string(
      "block(define(s, 0), define(i, 0),\n"
      "  while(true, block(store(i, i + 1), if(i > 3000, break()), if(i % 2 == 0, continue()),\n"
      "                    store(s, s + sum(ones(i))))),\n"
      "  s)",
      {}, "df.tsl");
  Value f = eval_string(
      "block(define(s, 0),\n"
      "  for_each(lambda(k, block(if(k == 2000, break()), if(k % 3 == 0, continue()),"
      " store(s, s + sum(ones(k))))), 5000),\n"
      "  s)",
      {}, "df.tsl");
  set_spawn_threshold_ns(kSpawnThresholdNs);
  double want_w = 0, want_f = 0;
  for (int i = 1; i <= 3000; ++i) want_w += i % 2 ? i : 0;
  for (int k = 0; k < 2000; ++k) want_f += k % 3 ? k : 0;
  EXPECT_DOUBLE_EQ(w.as_array().item(), want_w);
  EXPECT_DOUBLE_EQ(f.as_array().item(), want_f);
}

TEST_F(Dataflow, ALaterAssignmentWaitsForAPendingDefineThatReadsTheVariable) {
  // The if's condition is pending, so its branch reads y only when the gate
  // opens; define(y, 100) after it must not change what the branch reads.
  Value v = result_after_gate(
      "block(define(y, 1), define(a, if(test_gate(true, 20), y * 10, 0)), define(y, 100), a + y)", 20);
  EXPECT_EQ(v.as_int(), 110);
}

TEST_F(Dataflow, ALaterAssignmentFromTheDefinesOwnResultDoesNotDeadlock) {
  // y's new value is computed from a, which reads y: had the branch read the
  // new (pending) y it would wait for itself (until the stuck-wait check
  // failed it, docs/runtime.md). The training step of deterministic mode
  // has this shape: parameters read by a chunk's pending `if`, then updated
  // from its gradients.
  Value v = result_after_gate(
      "block(define(y, 2), define(a, if(test_gate(true, 21), y * 10, 0)), define(y, a + 1), y)", 21);
  EXPECT_EQ(v.as_int(), 21);
}

TEST_F(Dataflow, ALaterAssignmentInsideAFunctionWaitsToo) {
  // store() from inside a function defined before, called after the if,
  // assigns the block's variable.
  Value v = result_after_gate(
      "block(define(y, 3), define(set, lambda(v, store(y, v))),\n"
      "  define(a, if(test_gate(true, 22), y + 1, 0)), set(50), a * 100 + y)",
      22);
  EXPECT_EQ(v.as_int(), 450);
}

TEST_F(Dataflow, AValueReleasedAfterItsLastUseWaitsForAPendingBranch) {
  // Inside a function the variables are let go after their last read
  // (compiler.cpp, release_at_last_use): y and z after the if, whose
  // condition is pending, so its branch reads them only when the gate opens;
  // and a, pending itself, after the define of b that reads it. Every read
  // still sees its value.
  arm(25);
  arm(26);
  Running r(
      "define(f, y, block(define(z, y + 1), define(a, test_gate(y * 3, 26)), define(b, a + 1),\n"
      "  define(c, if(test_gate(true, 25), y * 10 + z, 0)), define(w, 7), list(b, c, w)))\n"
      "f(2)");
  EXPECT_TRUE(reached(26, 10.0));
  EXPECT_TRUE(reached(25, 10.0));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  open(25);
  open(26);
  r.join();
  if (r.error) std::rethrow_exception(r.error);
  EXPECT_EQ(r.result.str(), "[7, 23, 7]");
}

TEST_F(Dataflow, AConditionThatIsThereReadsNothingLate) {
  // The define is pending for its own value (the gate), not its if: the
  // statement after it that assigns x need not wait (it runs before the gate
  // opens). Gradient buckets rely on this: a member's define waits for the
  // other members, which statements after it compute.
  Value v;
  EXPECT_TRUE(note_ran_before_gate("block(define(x, 1), define(a, test_gate(if(x > 0, x, 0), 24)),\n"
                                   "  define(x, test_note(5, 24)), a + x)",
                                   24, v, 10.0));
  EXPECT_EQ(v.as_int(), 6);
}

TEST_F(Dataflow, ADefineThatAssignsVariablesIsNotDeferred) {
  // The branch defines z: the statement after it must see z, so the block
  // waits for the define (the note must not run before the gate opens).
  Value v;
  EXPECT_FALSE(note_ran_before_gate("block(define(a, if(test_gate(true, 23), block(define(z, 5), z), 0)),\n"
                                    "  define(b, test_note(z, 23)), a + b)",
                                    23, v, 0.2));
  EXPECT_EQ(v.as_int(), 10);
}

// Writes into arrays (docs/runtime.md, "Views and writes"): a define still
// computing reads the array as it was at its turn, so a later write waits
// for it; reads after the write see it.
TEST_F(Dataflow, AWriteWaitsForAPendingDefineThatReadsTheArray) {
  // Without the ordering the write would run while the gate is closed and
  // the sum, reading x when the gate opens, would see 5s (15).
  Value v = result_after_gate(
      "block(define(x, zeros(3)), define(s, sum(test_gate(x, 30))), setitem(x, 5.0, \"...\"),\n"
      "  s * 100 + sum(x))",
      30);
  EXPECT_DOUBLE_EQ(v.as_array().item(), 15.0);
}

TEST_F(Dataflow, AWriteThroughAViewWaitsToo) {
  Value v = result_after_gate(
      "block(define(x, zeros(4)), define(s, sum(test_gate(x, 31))), define(v, getitem(x, slice(1, 3))),\n"
      "  iadd(v, 1.0), s * 100 + sum(x))",
      31);
  EXPECT_DOUBLE_EQ(v.as_array().item(), 2.0);
}

TEST_F(Dataflow, ACallThatMayWriteWaitsInAProgramThatWrites) {
  Value v = result_after_gate(
      "block(define(x, zeros(3)), define(f, lambda(a, setitem(a, 7.0, 0))),\n"
      "  define(s, sum(test_gate(x, 32))), f(x), s * 100 + sum(x))",
      32);
  EXPECT_DOUBLE_EQ(v.as_array().item(), 7.0);
}

TEST_F(Dataflow, AWriteInALoopWaitsForADefineBeforeTheLoop) {
  Value v = result_after_gate(
      "block(define(x, zeros(3)), define(s, sum(test_gate(x, 33))), define(i, 0),\n"
      "  while(i < 3, block(setitem(x, 1.0, i), store(i, i + 1))), s * 100 + sum(x))",
      33);
  EXPECT_DOUBLE_EQ(v.as_array().item(), 3.0);
}

TEST_F(Dataflow, AnOperandThatMayWriteStartsAfterTheOperandsBeforeIt) {
  // Python reads x.sum() before h(x) writes: the call operand waits for the
  // pending sum (as a primitive's operand and as a function's argument).
  Value v = result_after_gate(
      "block(define(x, zeros(3)), define(h, lambda(a, block(setitem(a, 7.0, 0), 1.0))),\n"
      "  add(sum(test_gate(x, 35)), h(x)))",
      35);
  EXPECT_DOUBLE_EQ(v.as_array().item(), 1.0);
  Value w = result_after_gate(
      "block(define(x, zeros(3)), define(h, lambda(a, block(setitem(a, 7.0, 0), 1.0))),\n"
      "  define(g, lambda(p, q, p + q)), g(sum(test_gate(x, 36)), h(x)))",
      36);
  EXPECT_DOUBLE_EQ(w.as_array().item(), 1.0);
}

// after(x, token): what reads the result waits for token, an order the
// dataflow would not give (a pipeline's next forward held back until a
// backward is done). Without after, the note runs while the gate is closed.
TEST_F(Dataflow, AfterHoldsBackWhatReadsItUntilTheToken) {
  Value v;
  EXPECT_TRUE(note_ran_before_gate(
      "block(define(t, test_gate(1, 81)), define(y, test_note(2, 81)), list(t, y))", 81, v, 10.0));
  EXPECT_FALSE(note_ran_before_gate(
      "block(define(t, test_gate(1, 82)), define(y, test_note(after(2, t), 82)), list(t, y))", 82,
      v, 0.3));
  EXPECT_EQ(v.str(), "[1, 2]");
  // A list of tokens: after every one of them.
  arm(83);
  arm(84);
  Running r(
      "block(define(a, test_gate(1, 83)), define(b, test_gate(2, 84)),\n"
      "  define(y, test_note(after(3, list(a, b)), 85)), list(a, b, y))");
  ASSERT_TRUE(reached(83, 10.0) && reached(84, 10.0));
  open(83);
  EXPECT_FALSE(noted(85, 0.3));
  open(84);
  r.join();
  ASSERT_FALSE(r.error);
  EXPECT_TRUE(noted(85, 0.0));
  EXPECT_EQ(r.result.str(), "[1, 2, 3]");
}

// The spawn rule's cost of a node: the cheapest evaluation of the latest
// window, so one slow evaluation (cold pages, a preempted thread) does not
// make a cheap node a task for many calls, while a node whose work grows
// is seen as costly within a window.
TEST(NodeCost, OneSlowEvaluationDoesNotMakeANodeCostly) {
  NodeCounters c;
  EXPECT_EQ(c.cost_ns(), 0.0);
  c.record(5'000'000);  // the first, cold evaluation (5 ms) is left out
  EXPECT_EQ(c.cost_ns(), 0.0);
  c.record(400'000);  // one slow
  EXPECT_EQ(c.cost_ns(), 400'000.0);
  c.record(17'000);  // then 17 us each
  EXPECT_EQ(c.cost_ns(), 17'000.0);
  EXPECT_GT(c.mean_ns(), 10 * kSpawnThresholdNs);  // the mean still says costly
  EXPECT_LT(c.cost_ns(), 10 * kSpawnThresholdNs);
  c.record(900'000);  // a preempted one among cheap ones
  EXPECT_EQ(c.cost_ns(), 17'000.0);
}

TEST(NodeCost, GrowingWorkIsSeenWithinAWindow) {
  NodeCounters c;
  for (int i = 0; i < 8; ++i) c.record(1'000);
  EXPECT_EQ(c.cost_ns(), 1'000.0);
  // The work grows to 1 ms an evaluation: within one window of
  // evaluations the cost follows.
  for (uint64_t i = 0; i < NodeCounters::kCostWindow; ++i) c.record(1'000'000);
  EXPECT_EQ(c.cost_ns(), 1'000'000.0);
  c.reset();
  EXPECT_EQ(c.cost_ns(), 0.0);
  EXPECT_EQ(c.evaluations.load(), 0u);
}
