#include "tessera/kernels/blis_pool.hpp"

// blis.h defines many macros: only this file includes it (kernels are not
// batched into unity units, see CMakeLists.txt).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#include <blis.h>
#pragma GCC diagnostic pop

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/core/error.hpp"

namespace tessera::kernels {

namespace {

// BLIS calls now inside BLIS (each holds one block of each pool it uses).
std::atomic<int64_t> blis_calls_inside{0};

// Blocks malloc gave for BLIS's pools before BLIS asked for them: a pool that
// grows takes one from here (pool_malloc) instead of calling malloc, which may
// fail by then and make BLIS abort. Each entry: (block, its size in bytes).
struct Reserve {
  std::mutex mutex;
  std::vector<std::pair<void*, size_t>> blocks;
};

Reserve& reserve() {
  static Reserve* r = new Reserve;  // never destroyed: BLIS may grow a pool at exit
  return *r;
}

// The size BLIS asks of a pool's malloc for one block (bli_fmalloc_align: the
// block, its offset and alignment, and the pointer it keeps before it), with room.
size_t request_of(const pool_t& pool) {
  return pool.block_size + pool.offset_size + pool.align_size + 64;
}

// The pools' malloc: the smallest reserved block that is large enough, else malloc.
void* pool_malloc(size_t size) {
  {
    Reserve& r = reserve();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto best = r.blocks.end();
    for (auto it = r.blocks.begin(); it != r.blocks.end(); ++it) {
      if (it->second >= size && (best == r.blocks.end() || it->second < best->second)) best = it;
    }
    if (best != r.blocks.end()) {
      void* p = best->first;
      r.blocks.erase(best);
      return p;
    }
  }
  return std::malloc(size);
}

// gemm packs A's blocks and B's panels (the C pool is for other operations).
constexpr packbuf_t kPools[] = {BLIS_BUFFER_FOR_A_BLOCK, BLIS_BUFFER_FOR_B_PANEL};

void initialise_blis() {
  static std::once_flag initialised;
  std::call_once(initialised, [] {
    bli_init();  // the pools exist, sized, empty
    pba_t* pba = bli_pba_query();
    for (const packbuf_t which : kPools) {
      pba->pools[bli_packbuf_index(which)].malloc_fp = pool_malloc;
    }
  });
}

// Reserves the blocks `calls` calls at once need beyond what the pools hold and
// the reserve already has; false when malloc cannot give one.
bool reserve_blocks(int64_t calls) {
  pba_t* pba = bli_pba_query();
  Reserve& r = reserve();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const packbuf_t which : kPools) {
    // (pools only grow, so a stale count reserves more, never less)
    const pool_t& pool = pba->pools[bli_packbuf_index(which)];
    const size_t size = request_of(pool);
    int64_t have = static_cast<int64_t>(pool.num_blocks);
    for (const auto& b : r.blocks) have += b.second == size ? 1 : 0;
    for (; have < calls; ++have) {
      void* p = std::malloc(size);
      if (p == nullptr) return false;
      r.blocks.emplace_back(p, size);
    }
  }
  return true;
}

}  // namespace

BlisCall::BlisCall(const char* op) {
  initialise_blis();
  const int64_t calls = blis_calls_inside.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (reserve_blocks(calls)) return;
  release_cached_blocks();
  if (reserve_blocks(calls)) return;
  blis_calls_inside.fetch_sub(1, std::memory_order_acq_rel);
  throw MemoryError(error_message("[", op, "] out of memory: the matrix product needs "
                                  "another set of packing buffers (BLIS's, one per product "
                                  "running at once, ",
                                  request_of(bli_pba_query()->pools[bli_packbuf_index(
                                      BLIS_BUFFER_FOR_B_PANEL)]) >> 20,
                                  " MiB and more) and malloc cannot give them (is the process "
                                  "under a memory limit, RLIMIT_DATA?)"));
}

BlisCall::~BlisCall() { blis_calls_inside.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace tessera::kernels
