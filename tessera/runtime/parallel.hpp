// parallel_for over tiles whose number comes from a cost model.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>

namespace tessera {

// The cost model: how many tiles to cut `n` items into when each costs about
// `ns_per_item` nanoseconds. Work below kMinTaskNs stays one tile; above, tiles
// of at least kMinTaskNs each, at most 4 per worker thread.
int64_t tile_count(int64_t n, double ns_per_item);

// Minimum work worth a task of its own (see bench/bench_runtime for the
// measurement behind it: spawning costs well under a microsecond, so 20 us of
// work per task keeps the overhead near 1%).
inline constexpr double kMinTaskNs = 20000.0;

// Runs body(begin, end) over [0, n) in tiles; tiles run in parallel on the
// arena's workers, the caller participates (fork-join, no blocking on futures).
// Tiles are disjoint, so bodies may write disjoint parts of one output.
void parallel_for(int64_t n, double ns_per_item, const std::function<void(int64_t, int64_t)>& body);

void check_interrupt();  // runtime/interrupt.hpp

// The same for any callable. Work of one tile runs here, without a
// std::function: a kernel's lambda captures more than std::function holds in
// place, and its heap copy (an allocation and a free per call) showed in the
// cost of one operation on 1,000 elements. Larger work goes to the scheduler
// through a std::function that refers to `body` (no copy).
template <class Body>
  requires(!std::is_same_v<std::remove_cvref_t<Body>, std::function<void(int64_t, int64_t)>>)
inline void parallel_for(int64_t n, double ns_per_item, Body&& body) {
  // The condition of tile_count's single tile, so the tiles are the same.
  if (n > 0 && static_cast<double>(n) * std::max(ns_per_item, 0.0) < 2 * kMinTaskNs) {
    check_interrupt();
    body(int64_t{0}, n);
    return;
  }
  const std::function<void(int64_t, int64_t)> ref = std::ref(body);
  parallel_for(n, ns_per_item, ref);
}

// Shares `work` with up to `helpers` other threads while the caller runs it
// too (the fork of a fork-join whose join the caller does itself: `work`
// claims items until none is left, and the caller waits for the items it
// did not run). A helper that finished its share lingers for a moment
// (TESSERA_LINGER_US, 200 us by default; 0: never) watching for the next
// offer, so a loop of 50-100 us operations keeps its helper instead of
// waking a sleeping worker for each (a wake-up took longer than the
// operation, and the loop then ran on one thread). The destructor withdraws
// the offer and returns once no helper is inside `work`; after it no thread
// runs `work`, so `work` may refer to the caller's stack. A lingering helper
// leaves as soon as another task is spawned, and when it was descheduled
// (other processes want the cores: lingering then stops for 200 ms); on the
// CPU of the thread it helps it moves to another CPU, or leaves.
class HelperOffer {
 public:
  HelperOffer(int64_t helpers, std::function<void()> work);
  ~HelperOffer();
  HelperOffer(const HelperOffer&) = delete;
  HelperOffer& operator=(const HelperOffer&) = delete;

 private:
  void withdraw();
  int slot_ = -1;
  struct HelperTicket {
    std::atomic<bool> closed{false};
    std::atomic<int> holders{0};
  };
  std::shared_ptr<HelperTicket> ticket_;
};

// Called by a worker after each task (scheduler.cpp): when no other task is
// in flight, it lingers as a helper does, so a jitted loop that spawns a task
// between its parallel operations keeps its helper too.
void linger_after_task();

// The lingering time in nanoseconds (0: helpers never linger).
int64_t helper_linger_ns();
void set_helper_linger_ns(int64_t ns);

// True when parallel_for ran tiles in parallel on this thread since the last
// call (which clears it): the execution tree's note that a node's work is
// parallel by itself.
bool take_tiled_flag();

// Deterministic tiling: tile counts computed as if there were
// kDeterministicThreads workers, and one worker runs the same tiles in turn,
// so kernels whose result depends on their tiles (a BLAS call on a block of
// rows) give the same bits with any number of threads. Off by default (tiles
// then follow the thread count); TESSERA_DETERMINISTIC=1 turns it on at start,
// and Sequential.fit(deterministic=True) while it trains.
inline constexpr int kDeterministicThreads = 16;
void set_deterministic_tiling(bool on);
bool deterministic_tiling();

}  // namespace tessera
