// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11).
//
// Element i of a draw is a pure function of (seed, stream, i): tiles can be
// generated in any order on any number of threads and give the same bits.
#pragma once

#include <array>
#include <cstdint>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// The key of one draw: a seed and a stream number (which call of which op).
struct RandomKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
};

// Four 32-bit random words for counter value `counter` under `key`.
std::array<uint32_t, 4> philox4x32(const RandomKey& key, uint64_t counter);

// The words of `count` consecutive counters from `first` (4 * count words,
// counter by counter): exactly philox4x32 of each, computed several counters
// at a time (the key mixed once; 16 or 8 counters per vector where the CPU
// has AVX-512F or AVX2, chosen at run time).
void philox4x32_many(const RandomKey& key, uint64_t first, int64_t count, uint32_t* out);
// The same with the vector paths limited to `isa` (2: AVX-512F, 1: AVX2,
// 0: portable) and to what the CPU has: for tests of each path.
void philox4x32_many_isa(int isa, const RandomKey& key, uint64_t first, int64_t count, uint32_t* out);

// Uniform doubles in [0, 1) with 53 random bits, from two 32-bit words.
inline double unit_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>((static_cast<uint64_t>(hi) << 21) ^ (lo >> 11)) *
         (1.0 / 9007199254740992.0);
}

// Fills elements [begin, end) of `out` (float32 or float64) with uniform
// values in [low, high). Element i takes counter i + counter_offset (a tile of
// a larger draw, as random_d makes, passes the tile's offset in the whole).
void uniform_fill_range(Array& out, const RandomKey& key, double low, double high, int64_t begin,
                        int64_t end, int64_t counter_offset = 0);

// Fills elements [begin, end) of `out` (float32 or float64) with normal values
// (Box-Muller; each element uses its own counter, so no pairing across tiles).
void normal_fill_range(Array& out, const RandomKey& key, double mean, double std, int64_t begin,
                       int64_t end, int64_t counter_offset = 0);

// Fills elements [begin, end) of the int64 `out` with integers uniform in
// [low, high) (high > low), without modulo bias.
void integers_fill_range(Array& out, const RandomKey& key, int64_t low, int64_t high,
                         int64_t begin, int64_t end, int64_t counter_offset = 0);

// A uniformly random permutation of 0..n-1 (Fisher-Yates driven by the
// counter stream; sequential, since each swap depends on the previous ones).
std::vector<int64_t> random_permutation(int64_t n, const RandomKey& key);

}  // namespace tessera::kernels
