// The global stream of random draws that give no seed (creation.cpp), for
// the scalar loop fast path (lang/fastloop.cpp), which draws np.random.random()
// itself and must be able to rewind the stream when it rolls turns back.
#pragma once

#include <cstdint>

#include "tessera/kernels/random.hpp"

namespace tessera {

// The key random_uniform uses for its next unseeded draw (advances the stream).
kernels::RandomKey next_uniform_key();

// The stream position now.
uint64_t random_stream_position();

// Sets the position back to `to` if it is still `now` (no other draw came in
// between); false otherwise.
bool rewind_random_stream(uint64_t now, uint64_t to);

}  // namespace tessera
