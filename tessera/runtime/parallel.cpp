#include "tessera/runtime/parallel.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "tessera/runtime/future.hpp"
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

}  // namespace

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
  // From outside the arena the tiles go to a worker as a task and this
  // thread sleeps until they are done: a hand-over and a wake-up (10-20 us
  // here) that work of less than kMinOutsideNs does not repay.
  if (tiles > 1 && !in_worker() && !deterministic_tiling() &&
      static_cast<double>(n) * ns_per_item < kMinOutsideNs) {
    tiles = 1;
  }
  if (tiles <= 1 || num_threads() == 1) {
    if (tiles > 1 && deterministic_tiling()) {
      for (int64_t t = 0; t < tiles; ++t) body(n * t / tiles, n * (t + 1) / tiles);
    } else if (n > 0) {
      body(0, n);
    }
    return;
  }
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
  // From outside the arena (a caller at the API boundary, which may wait):
  // the work goes to a worker as a task, whose tiles the other workers steal.
  // (Joining the arena through execute() left the tiles on one thread.)
  Promise<int> done;
  spawn([&] {
    if (node) trace::set_task_node(node);
    try {
      run();
      done.set_value(0);
    } catch (...) {
      done.set_error(std::current_exception());
    }
  });
  done.get_future().wait();
}

}  // namespace tessera
