#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tessera/runtime/future.hpp"
#include "tessera/runtime/parallel.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/spinlock.hpp"

using namespace tessera;

namespace {

// Runs a test body under 1, 2, 3 and 4 worker threads.
class RuntimeThreads : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { set_num_threads(GetParam()); }
  void TearDown() override { set_num_threads(2); }
};

}  // namespace

TEST_P(RuntimeThreads, ReadyFutureRunsContinuationInline) {
  auto f = Future<int>::ready(20).then([](int v) { return v + 1; });
  ASSERT_TRUE(f.is_ready());
  EXPECT_EQ(f.get(), 21);
}

TEST_P(RuntimeThreads, AsyncValueArrivesThroughContinuations) {
  auto f = async([] { return 6; }).then([](int v) { return v * 7; });
  EXPECT_EQ(f.wait(), 42);
}

TEST_P(RuntimeThreads, ErrorsTravelThroughFutures) {
  auto f = async([]() -> int { throw std::invalid_argument("[op] bad input"); })
               .then([](int v) { return v + 1; });
  EXPECT_THROW(f.wait(), std::invalid_argument);
  try {
    f.wait();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "[op] bad input");
  }
}

TEST_P(RuntimeThreads, ChainCanRecoverFromErrors) {
  auto f = async([]() -> int { throw std::runtime_error("boom"); })
               .chain([](const Future<int>& r) {
                 return Future<int>::ready(r.error() ? -1 : r.get());
               });
  EXPECT_EQ(f.wait(), -1);
}

TEST_P(RuntimeThreads, WhenAllKeepsOrderAndWaitsForEveryInput) {
  std::vector<Future<int>> fs;
  for (int i = 0; i < 100; ++i) fs.push_back(async([i] { return i * i; }));
  auto all = when_all(std::move(fs));
  const auto& v = all.wait();
  ASSERT_EQ(v.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(v[i], i * i);
}

TEST_P(RuntimeThreads, WhenAllReportsFirstErrorByPosition) {
  std::vector<Future<int>> fs;
  fs.push_back(async([] { return 1; }));
  fs.push_back(async([]() -> int { throw std::invalid_argument("second"); }));
  fs.push_back(async([]() -> int { throw std::out_of_range("third"); }));
  auto all = when_all(std::move(fs));
  EXPECT_THROW(all.wait(), std::invalid_argument);
}

TEST_P(RuntimeThreads, WhenAllOfNothingIsReady) {
  auto all = when_all(std::vector<Future<int>>{});
  ASSERT_TRUE(all.is_ready());
  EXPECT_TRUE(all.get().empty());
}

TEST_P(RuntimeThreads, LongContinuationChainsDoNotOverflowTheStack) {
  Promise<int> start;
  Future<int> f = start.get_future();
  for (int i = 0; i < 100000; ++i) f = f.then([](int v) { return v + 1; });
  start.set_value(0);
  EXPECT_EQ(f.wait(), 100000);
}

TEST_P(RuntimeThreads, ParallelForCoversEveryItemOnce) {
  const int64_t n = 1000003;
  std::vector<std::atomic<int>> hits(n);
  parallel_for(n, 50.0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

TEST_P(RuntimeThreads, ParallelForPropagatesExceptions) {
  EXPECT_THROW(parallel_for(1000000, 100.0,
                            [&](int64_t, int64_t e) {
                              if (e == 1000000) throw std::invalid_argument("tile failed");
                            }),
               std::invalid_argument);
}

// Back-to-back parallel loops, as a jitted loop of 100 us operations makes
// them: a helper lingering after one loop takes its share of the next (the
// offer); every item is still run exactly once, with helpers lingering or
// not, from two threads outside the arena at once.
TEST_P(RuntimeThreads, BackToBackLoopsWithLingeringHelpersCoverEveryItemOnce) {
  for (int64_t linger_us : {0, 200, 5000}) {
    set_helper_linger_ns(linger_us * 1000);
    auto caller = [](int seed, bool* ok) {
      std::vector<int> hits(20011);
      for (int round = 0; round < 400; ++round) {
        std::fill(hits.begin(), hits.end(), 0);
        const int64_t n = 20011 - (round * 7 + seed) % 97;
        parallel_for(n, 5.0, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i] += 1;  // disjoint tiles: no race
        });
        for (int64_t i = 0; i < n; ++i) {
          if (hits[i] != 1) *ok = false;
        }
      }
    };
    bool ok_a = true, ok_b = true;
    std::thread other(caller, 1, &ok_b);
    caller(0, &ok_a);
    other.join();
    EXPECT_TRUE(ok_a) << "linger " << linger_us << " us";
    EXPECT_TRUE(ok_b) << "linger " << linger_us << " us";
    EXPECT_THROW(parallel_for(1000000, 100.0,
                              [&](int64_t, int64_t e) {
                                if (e == 1000000) throw std::invalid_argument("tile failed");
                              }),
                 std::invalid_argument);
  }
  set_helper_linger_ns(200000);
}

// An offer's work may refer to the caller's stack: once the offer is gone,
// no helper runs it, lingering or spawned (the destructor waits for those
// inside, and a helper starting later finds the offer closed).
TEST_P(RuntimeThreads, NoHelperRunsAnOfferAfterItIsWithdrawn) {
  set_helper_linger_ns(5000000);
  auto late = std::make_shared<std::atomic<int>>(0);
  for (int round = 0; round < 300; ++round) {
    auto gone = std::make_shared<std::atomic<bool>>(false);
    {
      std::atomic<int> items{0};
      HelperOffer offer(num_threads() - 1, [&items, gone, late] {
        if (gone->load()) late->fetch_add(1);
        while (items.fetch_add(1) < 64) {
        }
      });
      while (items.fetch_add(1) < 64) {
      }
      if (round % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    gone->store(true);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(late->load(), 0);
  set_helper_linger_ns(200000);
}

INSTANTIATE_TEST_SUITE_P(Threads, RuntimeThreads, ::testing::Values(1, 2, 3, 4));

TEST(RuntimeCostModel, SmallWorkIsOneTileLargeWorkUsesEveryThread) {
  set_num_threads(2);
  EXPECT_EQ(tile_count(1000, 1.0), 1);
  EXPECT_EQ(tile_count(0, 1.0), 0);
  EXPECT_GE(tile_count(10000000, 1.0), 2);
  EXPECT_LE(tile_count(10000000, 1.0), 8);
  EXPECT_EQ(tile_count(3, 1e9), 3);  // never more tiles than items
}

TEST(RuntimeCostModel, DeterministicTilingIgnoresTheThreadCount) {
  // The tiles parallel_for hands out, sorted, under 1 to 4 threads.
  auto tiles = [](int threads) {
    set_num_threads(threads);
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> out;
    parallel_for(1000003, 50.0, [&](int64_t b, int64_t e) {
      std::lock_guard lock(mu);
      out.emplace_back(b, e);
    });
    std::sort(out.begin(), out.end());
    return out;
  };
  set_deterministic_tiling(true);
  auto one = tiles(1);
  EXPECT_EQ(static_cast<int64_t>(one.size()), 4 * kDeterministicThreads);
  for (int t = 2; t <= 4; ++t) EXPECT_EQ(tiles(t), one) << t << " threads";
  set_deterministic_tiling(false);
  EXPECT_EQ(tiles(1).size(), 1u);  // normally one thread runs one tile
  EXPECT_NE(tiles(2), tiles(4));
  set_num_threads(2);
}

TEST(RuntimeScheduler, ThreadCountIsConfigurable) {
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  std::atomic<int> ran{0};
  std::vector<Future<int>> fs;
  for (int i = 0; i < 10; ++i) fs.push_back(async([&] { return ++ran; }));
  when_all(std::move(fs)).wait();
  EXPECT_EQ(ran.load(), 10);
  set_num_threads(2);
}

TEST(RuntimePromise, SetIfUnobservedOnlyWithoutContinuations) {
  Promise<int> quiet;
  int v = 5;
  ASSERT_TRUE(quiet.set_if_unobserved(v, nullptr));
  EXPECT_EQ(quiet.get_future().wait(), 5);

  Promise<int> failing;
  int unused = 0;
  ASSERT_TRUE(failing.set_if_unobserved(unused, std::make_exception_ptr(std::runtime_error("[op] lost"))));
  EXPECT_THROW(failing.get_future().wait(), std::runtime_error);

  // With a continuation attached it must not run here: the promise stays
  // pending and the caller completes it where continuations belong.
  Promise<int> observed;
  Future<int> next = observed.get_future().then([](int x) { return x + 1; });
  int w = 7;
  EXPECT_FALSE(observed.set_if_unobserved(w, nullptr));
  EXPECT_FALSE(next.is_ready());
  observed.set_value(w);
  EXPECT_EQ(next.wait(), 8);
}

namespace {

// An ErrorDecorator that prefixes the message with the context's string.
std::exception_ptr prefix_error(std::exception_ptr e, const void* context) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& err) {
    return std::make_exception_ptr(
        std::runtime_error(*static_cast<const std::string*>(context) + ": " + err.what()));
  }
}

std::string message_of(const Future<int>& f) {
  try {
    f.get();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(RuntimePromise, DecoratedErrorsWhereverTheyAreSet) {
  auto where = std::make_shared<const std::string>("at f.tsl:3");
  // Pending, then failed by set_error, set_if_unobserved or set_from: each
  // applies the decorator; a value passes untouched.
  Promise<int> p1, p2, p3, p4;
  Future<int> f1 = p1.get_future().decorate_errors(&prefix_error, where);
  Future<int> f2 = p2.get_future().decorate_errors(&prefix_error, where);
  Future<int> f3 = p3.get_future().decorate_errors(&prefix_error, where);
  Future<int> f4 = p4.get_future().decorate_errors(&prefix_error, where);
  p1.set_error(std::make_exception_ptr(std::runtime_error("lost")));
  int unused = 0;
  ASSERT_TRUE(p2.set_if_unobserved(unused, std::make_exception_ptr(std::runtime_error("lost"))));
  p3.set_from(Future<int>::failed(std::make_exception_ptr(std::runtime_error("lost"))));
  p4.set_value(4);
  EXPECT_EQ(message_of(f1), "at f.tsl:3: lost");
  EXPECT_EQ(message_of(f2), "at f.tsl:3: lost");
  EXPECT_EQ(message_of(f3), "at f.tsl:3: lost");
  EXPECT_EQ(f4.wait(), 4);

  // Already failed, or already decorated: decorated once by a continuation.
  Future<int> ready = Future<int>::failed(std::make_exception_ptr(std::runtime_error("now")))
                          .decorate_errors(&prefix_error, where);
  EXPECT_EQ(message_of(ready), "at f.tsl:3: now");
  auto outer = std::make_shared<const std::string>("in g");
  Promise<int> p5;
  Future<int> twice =
      p5.get_future().decorate_errors(&prefix_error, where).decorate_errors(&prefix_error, outer);
  p5.set_error(std::make_exception_ptr(std::runtime_error("late")));
  EXPECT_EQ(message_of(twice), "in g: at f.tsl:3: late");
  EXPECT_EQ(Future<int>::ready(1).decorate_errors(&prefix_error, where).wait(), 1);
}

namespace {

// A wait helper that always has work in flight, so that Future::wait polls
// it and then blocks at the boundary (where work can be handed over).
int busy_helper(detail::HelpCall call) {
  return call == detail::HelpCall::poll ? detail::kHelpBusy : detail::kHelpIdle;
}

}  // namespace

namespace {

// A wait helper whose polls give the core up themselves (as MPI's progress
// does when ranks outnumber cores), counting them.
std::atomic<int> yielded_polls{0};
int yielding_helper(detail::HelpCall call) {
  if (call != detail::HelpCall::poll) return detail::kHelpIdle;
  yielded_polls.fetch_add(1);
  return detail::kHelpBusyYielded;
}

}  // namespace

// In yield mode a poll that yielded inside the helper is not followed by a
// yield of the waiter's own, but the wait still ends: when the future is
// ready, or after its polling time when it is not (then the waiter blocks).
TEST(RuntimeWaitYield, PollsThatYieldedInsideTheHelperStillEnd) {
  detail::set_wait_mode(detail::WaitMode::yield);
  detail::wait_helper().store(yielding_helper);
  yielded_polls = 0;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(detail::help_while_pending([] { return false; }, 1e-3));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(yielded_polls.load(), 0);
  EXPECT_LT(took, 5.0);  // 25 ms of polling on a quiet machine; not forever
  yielded_polls = 0;
  EXPECT_TRUE(detail::help_while_pending([] { return yielded_polls.load() >= 5; }, 1e-3));
  EXPECT_EQ(yielded_polls.load(), 5);
  detail::wait_helper().store(nullptr);
  detail::set_wait_mode(detail::WaitMode::spin);
}

TEST(RuntimeBoundary, WorkHandedToABlockedWaiterRunsOnThatThread) {
  EXPECT_FALSE(detail::hand_to_boundary([] {}));  // nobody blocked: the caller keeps it
  detail::wait_helper().store(busy_helper);
  Promise<int> p;
  std::atomic<bool> waited{false};
  std::thread::id waiter_id, ran_on;
  std::thread waiter([&] {
    waiter_id = std::this_thread::get_id();
    EXPECT_EQ(p.get_future().wait(), 3);
    waited = true;
  });
  // The waiter polls for 2 ms before it blocks; hand the completion over
  // once it does (the program then runs on from it on that thread).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool handed = false;
  while (!handed && std::chrono::steady_clock::now() < deadline) {
    handed = detail::hand_to_boundary([&] {
      ran_on = std::this_thread::get_id();
      p.set_value(3);
    });
    if (!handed) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (!handed) p.set_value(3);  // fail below rather than leave the waiter blocked
  waiter.join();
  detail::wait_helper().store(nullptr);
  ASSERT_TRUE(handed);
  EXPECT_TRUE(waited.load());
  EXPECT_EQ(ran_on, waiter_id);
}

TEST(RuntimeSpinLock, ExcludesOtherThreadsMoreThreadsThanCores) {
  // 8 threads on (at most) a few cores: a preempted holder must get the
  // core back (the lock yields), and no increment may be lost.
  SpinLock lock;
  int64_t counter = 0;  // not atomic: only the lock protects it
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        std::lock_guard g(lock);
        counter += 1;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, 8 * 20000);
  EXPECT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
}

TEST(RuntimeParking, EveryBlockedWaiterWakesWhenItsFutureCompletes) {
  // 200 futures over the 64 parking places: threads blocked on different
  // states share places, and each must wake for its own, completed in an
  // order unrelated to the waits (before, during and after they block).
  // A lost wake-up does not hang (a blocked waiter looks again every
  // kStuckCheckSeconds, 0.25 s) but shows as that delay: the median delay
  // from completion to wake-up would be ~0.12 s, against microseconds.
  using Clock = std::chrono::steady_clock;
  constexpr int kN = 200;
  std::vector<Promise<int>> ps(kN);
  std::vector<int> got(kN, -1);
  std::vector<Clock::time_point> set_at(kN), woke_at(kN);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kN; ++i) {
    waiters.emplace_back([&, i] {
      got[i] = ps[i].get_future().wait();
      woke_at[i] = Clock::now();
    });
  }
  std::vector<int> order(kN);
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.end());
  for (int k = 0; k < kN; ++k) {
    if (k % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    set_at[order[k]] = Clock::now();
    ps[order[k]].set_value(order[k] * 3);
  }
  for (auto& t : waiters) t.join();
  std::vector<double> delay;
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got[i], i * 3);
    delay.push_back(std::chrono::duration<double>(woke_at[i] - set_at[i]).count());
  }
  std::nth_element(delay.begin(), delay.begin() + kN / 2, delay.end());
  EXPECT_LT(delay[kN / 2], 0.05) << "waiters woke only at their periodic check: wake-ups were lost";
}

TEST(RuntimeParking, AWaiterWakesForAValueSetWithoutContinuations) {
  // set_if_unobserved completes a state without running continuations; a
  // thread blocked on it wakes all the same.
  using Clock = std::chrono::steady_clock;
  std::vector<double> delay;
  for (int round = 0; round < 5; ++round) {
    Promise<int> p;
    Clock::time_point woke;
    std::thread waiter([&] {
      EXPECT_EQ(p.get_future().wait(), 7);
      woke = Clock::now();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // blocked by now
    int v = 7;
    auto set = Clock::now();
    EXPECT_TRUE(p.set_if_unobserved(v, nullptr));
    waiter.join();
    delay.push_back(std::chrono::duration<double>(woke - set).count());
  }
  // Woken, not found at the periodic check 0.25 s apart (see above).
  std::sort(delay.begin(), delay.end());
  EXPECT_LT(delay[2], 0.05) << "the waiter woke only at its periodic check: the wake-up was lost";
}

TEST(RuntimeStuckWait, AWaitThatNothingCanEndFailsInsteadOfHanging) {
  // A promise nobody keeps, no task queued or running, no engine: the wait
  // gives up after the stuck limit with an error saying so.
  double limit = detail::stuck_seconds();
  detail::set_stuck_seconds(0.5);
  Promise<int> never;
  auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    never.get_future().wait();
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  detail::set_stuck_seconds(limit);
  EXPECT_NE(what.find("waits for a value that nothing is computing"), std::string::npos) << what;
  EXPECT_GE(took, 0.5);
  EXPECT_LT(took, 5.0);
}

TEST(RuntimeStuckWait, ATaskStillRunningIsNotStuck) {
  // A task computing longer than the limit: the wait goes on until it is done.
  double limit = detail::stuck_seconds();
  detail::set_stuck_seconds(0.3);
  Future<int> slow = async([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    return 7;
  });
  int got = -1;
  EXPECT_NO_THROW(got = slow.wait());
  detail::set_stuck_seconds(limit);
  EXPECT_EQ(got, 7);
}

TEST(RuntimeOwnTasks, AWaiterRunsItsQueuedTaskWhenTheWorkersAreBusy) {
  // Two threads: one worker, busy for 1.5 s. A task the caller spawns then
  // waits for is run by the caller itself, not after the busy one; the
  // worker later finds it taken and runs it no second time.
  set_num_threads(2);
  std::atomic<bool> started{false};
  Future<int> busy = async([&] {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return 1;
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<int> runs{0};
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  const auto t0 = std::chrono::steady_clock::now();
  Future<int> quick = async([&] {
    ran_on = std::this_thread::get_id();
    return ++runs;
  });
  EXPECT_EQ(quick.wait(), 1);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 1.0);
  EXPECT_EQ(ran_on, caller);
  EXPECT_EQ(busy.wait(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the worker's turn at it
  EXPECT_EQ(runs.load(), 1);
}
