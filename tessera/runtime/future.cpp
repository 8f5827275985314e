#include "tessera/runtime/future.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include "tessera/core/error.hpp"

namespace tessera::detail {

int& continuation_depth() {
  thread_local int depth = 0;
  return depth;
}

void run_continuation(std::function<void()> fn) {
  int& depth = continuation_depth();
  if (depth >= kMaxInlineContinuationDepth) {
    spawn(std::move(fn));
    return;
  }
  ++depth;
  struct Restore {
    int& d;
    ~Restore() { --d; }
  } restore{depth};
  fn();
}

Parking& parking_for(const void* state) {
  // A power of two of places, each on its own cache lines; never destroyed
  // (a thread may still wait or notify during static destruction).
  constexpr size_t kPlaces = 64;
  struct alignas(64) Place {
    Parking p;
  };
  static Place* places = new Place[kPlaces];
  auto a = reinterpret_cast<uintptr_t>(state);
  return places[(a >> 6 ^ a >> 12) & (kPlaces - 1)].p;
}

std::atomic<WaitHelper>& wait_helper() {
  static std::atomic<WaitHelper> helper{nullptr};
  return helper;
}

namespace {

// WaitMode::yield (help_while_pending): a waiter polls this many times in a
// row without progress before it gives its core up (a message that lands
// meanwhile is taken without a context switch), and polls this many times
// longer than a spinning waiter (a time slice of an oversubscribed core is
// milliseconds: a round's step may wait several for its peer).
constexpr unsigned kIdlePollsBeforeYield = 1;
constexpr double kYieldWaitFactor = 25;

std::atomic<WaitMode>& wait_mode_flag() {
  static std::atomic<WaitMode> mode{WaitMode::spin};
  return mode;
}

}  // namespace

void set_wait_mode(WaitMode m) { wait_mode_flag().store(m, std::memory_order_relaxed); }
WaitMode wait_mode() { return wait_mode_flag().load(std::memory_order_relaxed); }

bool help_while_pending(const std::function<bool()>& ready, double seconds) {
  WaitHelper help = wait_helper().load(std::memory_order_acquire);
  if (!help) return ready();
  if (ready()) return true;  // no poll, and no registration as a poller
  using Clock = std::chrono::steady_clock;
  auto span = [](double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  if (wait_mode() == WaitMode::yield) {
    // Ranks outnumber cores: a waiter that spun would hold a core that the
    // ranks it waits for need, and one that blocked would cost a hand-off
    // per operation (the progress thread completes it, then wakes this
    // thread: two context switches more per call than MPI's own blocking
    // call). So it polls, as MPI does when oversubscribed, giving its core
    // up after kIdlePollsBeforeYield polls in a row that found nothing, for
    // kYieldWaitFactor times `seconds` without progress on a wait's first
    // look (a wait for computation, with nothing in flight, blocks at once).
    help(HelpCall::enter);
    struct Leave {
      WaitHelper help;
      ~Leave() { help(HelpCall::leave); }
    } leave{help};
    // Only the first look of a wait polls that long: the rechecks of a
    // thread parked through a long wait (a pipeline stage in its bubble)
    // poll for their own short `seconds`, or the thread would take half a
    // core yielding (a yielding thread is always runnable) from the ranks
    // computing beside it.
    auto until = Clock::now() + span(seconds >= kWaitHelpSeconds ? seconds * kYieldWaitFactor
                                                                  : seconds);
    for (unsigned idle = 0; !ready();) {
      int r = help(HelpCall::poll);
      if (r == kHelpIdle) return false;
      if (r == kHelpProgressed) {
        idle = 0;
        until = std::max(until, Clock::now() + span(kWaitHelpSeconds * kYieldWaitFactor));
      } else if (r == kHelpBusyYielded || ++idle % kIdlePollsBeforeYield == 0) {
        // A poll that gave the core up inside MPI is not followed by a
        // yield of its own: two per poll halve how often a step's message
        // is looked for when the core comes back (an 8-byte all-reduce at
        // 16 ranks on 2 cores: 3.8-8.9x MPI_Allreduce with both, 1.7-2.1x
        // without, docs/scaling.md).
        if (r != kHelpBusyYielded) sched_yield();
        if (Clock::now() >= until) return false;
      }
    }
    return true;
  }
  // A loop of collectives completes one every few microseconds: helping on
  // after each completion keeps it on this thread. Computation between them
  // longer than the short extension lets the thread block.
  help(HelpCall::enter);
  struct Leave {
    WaitHelper help;
    ~Leave() { help(HelpCall::leave); }
  } leave{help};
  auto until = Clock::now() + span(seconds);
  // The clock is read after progress and every 16th busy poll only (a poll
  // that finds nothing new is far cheaper than reading it).
  for (unsigned busy = 0; !ready();) {
    int r = help(HelpCall::poll);
    if (r == kHelpIdle) return false;
    if (r == kHelpProgressed) {
      until = std::max(until, Clock::now() + span(kWaitHelpAfterProgressSeconds));
    } else if (++busy % 16 == 0 && Clock::now() >= until) {
      return false;
    }
  }
  return true;
}

namespace {

struct Boundary {
  std::mutex mutex;
  std::vector<BlockedWaiter> blocked;
  std::vector<std::function<void()>> handed;
  std::atomic<bool> waiting{false};
};

Boundary& boundary() {
  static Boundary* b = new Boundary();  // never destroyed: the engine's thread may outlive main
  return *b;
}

}  // namespace

void block_at_boundary(BlockedWaiter w) {
  Boundary& b = boundary();
  std::lock_guard lock(b.mutex);
  b.blocked.push_back(w);
}

bool unblock_at_boundary(BlockedWaiter w) {
  Boundary& b = boundary();
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lock(b.mutex);
    auto it = std::find_if(b.blocked.begin(), b.blocked.end(), [&](const BlockedWaiter& x) { return x.cv == w.cv; });
    if (it != b.blocked.end()) b.blocked.erase(it);
    work.swap(b.handed);
    b.waiting.store(false, std::memory_order_release);
  }
  for (auto& fn : work) fn();
  return !work.empty();
}

bool hand_to_boundary(std::function<void()> fn) {
  Boundary& b = boundary();
  std::lock_guard lock(b.mutex);
  if (b.blocked.empty()) return false;
  b.handed.push_back(std::move(fn));
  b.waiting.store(true, std::memory_order_release);
  // The waiter checks `waiting` under its own mutex: taking it here means
  // the notification cannot fall between its check and its sleep.
  BlockedWaiter w = b.blocked.front();
  { std::lock_guard wl(*w.mutex); }
  w.cv->notify_all();
  return true;
}

bool handed_work_waiting() { return boundary().waiting.load(std::memory_order_acquire); }

namespace {

std::atomic<double>& stuck_limit() {
  static std::atomic<double> limit = [] {
    const char* env = std::getenv("TESSERA_STUCK_SECONDS");
    if (!env || !*env) return 10.0;
    char* end = nullptr;
    double v = std::strtod(env, &end);
    return (*end == '\0' && v >= 0) ? v : 10.0;
  }();
  return limit;
}

}  // namespace

double stuck_seconds() { return stuck_limit().load(std::memory_order_relaxed); }
void set_stuck_seconds(double s) { stuck_limit().store(s, std::memory_order_relaxed); }

void check_stuck(StuckWatch& w) {
  double limit = stuck_seconds();
  uint64_t spawned = tasks_spawned(), outstanding = tasks_outstanding();
  // Idle: nothing queued or running now, at the last look, nor spawned in
  // between; this thread's own evaluation the only one; no engine.
  bool idle = limit > 0 && outstanding == 0 && w.outstanding == 0 && spawned == w.spawned &&
              evaluations_in_progress() <= 1 && !wait_helper().load(std::memory_order_acquire);
  w.idle = idle ? w.idle + kStuckCheckSeconds : 0;
  w.spawned = spawned;
  w.outstanding = outstanding;
  if (idle && w.idle >= limit) {
    throw std::runtime_error(error_message(
        "[evaluation] internal error: the evaluation waits for a value that nothing is computing "
        "(no task queued or running for ", w.idle, " s, no communication): a dependency cycle in "
        "tessera's dataflow. Please report it with the program; TESSERA_STUCK_SECONDS sets how long "
        "to wait before this error (0: forever)"));
  }
}

}  // namespace tessera::detail
