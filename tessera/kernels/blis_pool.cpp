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

#include "tessera/core/array.hpp"
#include "tessera/core/error.hpp"

namespace tessera::kernels {

namespace {

// BLIS calls now inside BLIS (each holds one block of each pool it uses).
std::atomic<int64_t> blis_calls_inside{0};

// Bytes malloc must still give for `calls` calls at once: a block (plus its
// alignment) of each pool that holds fewer blocks than that. The pools only
// grow while the library is initialised, so a stale read asks for more, never less.
size_t bytes_to_grow(int64_t calls) {
  pba_t* pba = bli_pba_query();
  size_t need = 0;
  // gemm packs A's blocks and B's panels (the C pool is for other operations)
  for (const packbuf_t which : {BLIS_BUFFER_FOR_A_BLOCK, BLIS_BUFFER_FOR_B_PANEL}) {
    const pool_t& pool = pba->pools[bli_packbuf_index(which)];
    if (static_cast<int64_t>(pool.num_blocks) < calls) {
      need += static_cast<size_t>(calls - static_cast<int64_t>(pool.num_blocks)) *
              (pool.block_size + pool.align_size + pool.offset_size);
    }
  }
  return need;
}

bool malloc_can_give(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p == nullptr) return false;
  std::free(p);
  return true;
}

}  // namespace

BlisCall::BlisCall(const char* op) {
  static std::once_flag initialised;
  std::call_once(initialised, [] { bli_init(); });  // the pools exist, sized
  const int64_t calls = blis_calls_inside.fetch_add(1, std::memory_order_acq_rel) + 1;
  const size_t need = bytes_to_grow(calls);
  if (need == 0) return;
  if (malloc_can_give(need)) return;
  release_cached_blocks();
  if (malloc_can_give(need)) return;
  blis_calls_inside.fetch_sub(1, std::memory_order_acq_rel);
  throw MemoryError(error_message("[", op, "] out of memory: the matrix product needs ", need,
                                  " more bytes of packing buffers (BLIS's, one set per product "
                                  "running at once) and malloc cannot give them (is the "
                                  "process under a memory limit, RLIMIT_DATA?)"));
}

BlisCall::~BlisCall() { blis_calls_inside.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace tessera::kernels
