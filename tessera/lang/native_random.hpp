// np.random.random() in native loops: the draws of the global unseeded
// stream (primitives/creation.cpp) computed a batch at a time.
#pragma once

#include <cstdint>

namespace tessera {

// A native call's buffer of draws. Positions [first, first + len) of the
// global stream are reserved for it; buf[pos..len) are not used yet.
struct NativeDraws {
  static constexpr int kMax = 512;
  uint64_t first = 0;  // the stream position of buf[0]
  int64_t pos = 0;
  int64_t len = 0;
  int64_t next_batch = 8;  // grows to kMax: a call that draws little computes little
  double buf[kMax];
};

// Reserves the next batch of stream positions and computes their draws: the
// numbers next_uniform_key() and philox4x32(key, 0) would give one by one.
void native_draws_refill(NativeDraws& d);

// Gives the positions reserved but not drawn back to the stream, so that the
// next draw of anyone is the one after the last drawn (when no other thread
// drew meanwhile; if one did, those positions are skipped).
void native_draws_settle(NativeDraws& d);

// The uniform doubles of the unseeded draws at stream positions
// [first, first + count) under `seed` (exactly unit_double of philox4x32's
// first two words of each draw's key at counter 0). For tests and the refill.
void uniform_draws_at(uint64_t seed, uint64_t first, int64_t count, double* out);

}  // namespace tessera
