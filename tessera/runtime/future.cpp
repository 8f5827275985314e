#include "tessera/runtime/future.hpp"

#include <chrono>

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

std::atomic<WaitHelper>& wait_helper() {
  static std::atomic<WaitHelper> helper{nullptr};
  return helper;
}

bool help_while_pending(const std::function<bool()>& ready, double seconds) {
  WaitHelper help = wait_helper().load(std::memory_order_acquire);
  if (!help) return ready();
  using Clock = std::chrono::steady_clock;
  auto span = [](double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  // A loop of collectives completes one every few microseconds: helping on
  // after each completion keeps it on this thread. Computation between them
  // longer than the short extension lets the thread block.
  auto until = Clock::now() + span(seconds);
  while (!ready()) {
    int r = help();
    if (r == kHelpIdle) return false;
    auto now = Clock::now();
    if (r == kHelpProgressed) {
      until = std::max(until, now + span(kWaitHelpAfterProgressSeconds));
    } else if (now >= until) {
      return false;
    }
  }
  return true;
}

}  // namespace tessera::detail
