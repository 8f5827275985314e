// The global stream of random draws that give no seed (creation.cpp), for
// the scalar loop fast path (lang/fastloop.cpp), which draws np.random.random()
// itself and must be able to rewind the stream when it rolls turns back.
#pragma once

#include <cstdint>

#include "tessera/kernels/random.hpp"

namespace tessera {

// The key random_uniform uses for its next unseeded draw (advances the stream).
kernels::RandomKey next_uniform_key();

// The stream number of the unseeded uniform draw at position `position`
// (the op's tag in the top byte, as next_uniform_key gives it).
inline uint64_t uniform_stream_at(uint64_t position) {
  return (uint64_t{1} << 56) | (position & ((uint64_t{1} << 56) - 1));
}

// Reserves `count` consecutive positions of the stream for draws made
// elsewhere (native loops): returns the first, the seed in `seed`.
uint64_t reserve_random_stream(uint64_t count, uint64_t& seed);

// The stream position now.
uint64_t random_stream_position();

// Sets the position back to `to` if it is still `now` (no other draw came in
// between); false otherwise.
bool rewind_random_stream(uint64_t now, uint64_t to);

}  // namespace tessera
