// parallel_for over tiles whose number comes from a cost model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
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
