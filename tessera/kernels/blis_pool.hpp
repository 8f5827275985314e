// BLIS's packing buffers and the process's memory limit.
//
// A BLIS level-3 call (gemm) takes one block from each of BLIS's packing pools
// (the A blocks and the B panels, some MiB each) and returns them at its end.
// When a pool has no free block, BLIS allocates one with malloc, and when that
// fails (under RLIMIT_DATA, or a container's limit) BLIS aborts the process.
// Each pool holds as many blocks as products ever ran at once, so a new block is
// only needed when more products run at once than before.
#pragma once

namespace tessera::kernels {

// Held around each BLIS level-3 call. When more calls are inside BLIS than its
// pools hold blocks for, it allocates the missing blocks first (releasing
// tessera's cached array blocks if malloc fails), which the pools then take
// when they grow (their malloc is replaced at start-up), and throws MemoryError
// naming `op` when malloc cannot give them, instead of letting BLIS abort.
class BlisCall {
 public:
  explicit BlisCall(const char* op);
  ~BlisCall();
  BlisCall(const BlisCall&) = delete;
  BlisCall& operator=(const BlisCall&) = delete;
};

}  // namespace tessera::kernels
