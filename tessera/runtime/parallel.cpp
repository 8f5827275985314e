#include "tessera/runtime/parallel.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "tessera/runtime/interrupt.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

namespace {

std::atomic<bool>& deterministic_flag() {
  static std::atomic<bool> on = [] {
    const char* s = std::getenv("TESSERA_DETERMINISTIC");
    return s != nullptr && std::strcmp(s, "1") == 0;
  }();
  return on;
}

thread_local bool tl_tiled = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

bool take_tiled_flag() {
  const bool was = tl_tiled;
  tl_tiled = false;
  return was;
}

void set_deterministic_tiling(bool on) { deterministic_flag() = on; }
bool deterministic_tiling() { return deterministic_flag(); }

int64_t tile_count(int64_t n, double ns_per_item) {
  if (n <= 0) return 0;
  double work = static_cast<double>(n) * std::max(ns_per_item, 0.0);
  if (work < 2 * kMinTaskNs) return 1;
  int64_t by_work = static_cast<int64_t>(work / kMinTaskNs);
  int threads = deterministic_tiling() ? kDeterministicThreads : num_threads();
  int64_t cap = 4 * static_cast<int64_t>(threads);
  return std::clamp<int64_t>(std::min(by_work, cap), 1, n);
}

void parallel_for(int64_t n, double ns_per_item,
                  const std::function<void(int64_t, int64_t)>& body) {
  check_interrupt();  // a long run of kernels stops at the next one
  int64_t tiles = tile_count(n, ns_per_item);
  if (tiles <= 1 || num_threads() == 1) {
    if (tiles > 1 && deterministic_tiling()) {
      for (int64_t t = 0; t < tiles; ++t) body(n * t / tiles, n * (t + 1) / tiles);
    } else if (n > 0) {
      body(0, n);
    }
    return;
  }
  tl_tiled = true;
  const void* node = trace::current_node();
  auto run = [&] {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<int64_t>(0, tiles, 1),
        [&](const oneapi::tbb::blocked_range<int64_t>& r) {
          for (int64_t t = r.begin(); t != r.end(); ++t) {
            int64_t b = n * t / tiles, e = n * (t + 1) / tiles;
            check_interrupt();
            trace::TileScope traced(node);
            if (b < e) body(b, e);
          }
        },
        oneapi::tbb::simple_partitioner());
  };
  if (in_worker()) {
    run();
    return;
  }
  // From outside the arena (the thread that runs a program): this thread
  // takes tiles itself while helper tasks take the others as workers come
  // to them. Handing all tiles over and sleeping until they were done put a
  // wake-up of this thread (10-20 us) on every call's critical path, which a
  // 30-100 us operation in a loop did not repay. Tiles are claimed one at a
  // time, so nobody waits for a helper that has not started; at the end this
  // thread waits only for tiles a helper is running.
  struct Shared {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex mutex;
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  auto work = [n, tiles, node, &body](Shared& sh) {
    for (;;) {
      const int64_t t = sh.next.fetch_add(1, std::memory_order_relaxed);
      if (t >= tiles) return;
      try {
        check_interrupt();
        trace::TileScope traced(node);
        const int64_t b = n * t / tiles, e = n * (t + 1) / tiles;
        if (b < e) body(b, e);
      } catch (...) {
        std::lock_guard lock(sh.mutex);
        if (!sh.error) sh.error = std::current_exception();
      }
      sh.done.fetch_add(1, std::memory_order_release);
    }
  };
  const int64_t helpers = std::min<int64_t>(tiles - 1, num_threads() - 1);
  for (int64_t h = 0; h < helpers; ++h) {
    // The helper holds the shared state; it touches `body` only for a tile
    // it claimed, and this thread returns only when every tile is done.
    spawn([shared, work] { work(*shared); });
  }
  work(*shared);
  for (int spins = 0; shared->done.load(std::memory_order_acquire) < tiles; ++spins) {
    if (spins < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  if (shared->error) std::rethrow_exception(shared->error);
}

}  // namespace tessera
