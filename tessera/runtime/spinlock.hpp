// A lock for critical sections of a few dozen instructions: a future's
// shared state, a frame's variables. Taking it is one atomic exchange and
// releasing it a plain store, with no call into the C library (a
// std::mutex costs two atomic read-modify-writes and two calls; a program's
// loop of collectives takes such locks some twenty times per turn). A
// thread that finds it held spins briefly, then yields, so a holder that
// was preempted (more threads than cores) gets the core back. Never hold
// one across anything that may block or take long: free large memory,
// wait, call user code.
#pragma once

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera {

class SpinLock {
 public:
  void lock() noexcept {
    unsigned spins = 0;
    while (flag_.exchange(true, std::memory_order_acquire)) {
      // Wait reading only (no cache line ping-pong), then try again.
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !flag_.load(std::memory_order_relaxed) && !flag_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpinsBeforeYield = 64;
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  std::atomic<bool> flag_{false};
};

}  // namespace tessera
