#include "tessera/lang/native_random.hpp"

#include <algorithm>

#include "tessera/primitives/random_stream.hpp"

namespace tessera {

namespace {

// Philox-4x32-10's constants and the key's SplitMix64 mixing, as
// kernels/random.cpp computes philox4x32 (tests/python/test_native_random.py
// compares every draw with the interpreter's, which calls philox4x32).
constexpr uint32_t kDrawMul0 = 0xD2511F53u, kDrawMul1 = 0xCD9E8D57u;
constexpr uint32_t kDrawWeyl0 = 0x9E3779B9u, kDrawWeyl1 = 0xBB67AE85u;

[[gnu::always_inline]] inline uint64_t draw_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The draws at positions [first, first + L): one key per draw (each draw is
// its own stream, counter 0), so the lanes differ in key as well as in data;
// written lane by lane for the vectoriser.
template <int L>
[[gnu::always_inline]] inline void draw_block(uint64_t seed, uint64_t first, double* out) {
  uint32_t k0[L], k1[L], c0[L], c1[L], c2[L], c3[L];
  for (int l = 0; l < L; ++l) {
    const uint64_t stream = uniform_stream_at(first + static_cast<uint64_t>(l));
    const uint64_t mixed = draw_mix64(seed ^ draw_mix64(stream));
    k0[l] = static_cast<uint32_t>(mixed);
    k1[l] = static_cast<uint32_t>(mixed >> 32);
    c0[l] = 0;
    c1[l] = 0;
    c2[l] = static_cast<uint32_t>(stream);
    c3[l] = static_cast<uint32_t>(stream >> 32);
  }
  for (int round = 0; round < 10; ++round) {
    for (int l = 0; l < L; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(kDrawMul0) * c0[l];
      const uint64_t p1 = static_cast<uint64_t>(kDrawMul1) * c2[l];
      const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
      const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
      c0[l] = hi1 ^ c1[l] ^ k0[l];
      c1[l] = lo1;
      c2[l] = hi0 ^ c3[l] ^ k1[l];
      c3[l] = lo0;
      k0[l] += kDrawWeyl0;
      k1[l] += kDrawWeyl1;
    }
  }
  for (int l = 0; l < L; ++l) {
    // kernels::unit_double; the 53-bit value converts exactly as a signed int.
    const uint64_t bits = (static_cast<uint64_t>(c0[l]) << 21) ^ (c1[l] >> 11);
    out[l] = static_cast<double>(static_cast<int64_t>(bits)) * (1.0 / 9007199254740992.0);
  }
}

template <int L>
[[gnu::always_inline]] inline void draw_blocks(uint64_t seed, uint64_t first, int64_t count,
                                               double* out) {
  int64_t i = 0;
  for (; i + L <= count; i += L) draw_block<L>(seed, first + static_cast<uint64_t>(i), out + i);
  if (i < count) {
    double tail[L];
    draw_block<L>(seed, first + static_cast<uint64_t>(i), tail);
    std::copy(tail, tail + (count - i), out + i);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq,avx512vl"))) void draws_avx512(uint64_t seed,
                                                                       uint64_t first,
                                                                       int64_t count,
                                                                       double* out) {
  draw_blocks<16>(seed, first, count, out);
}
__attribute__((target("avx2"))) void draws_avx2(uint64_t seed, uint64_t first, int64_t count,
                                                double* out) {
  draw_blocks<8>(seed, first, count, out);
}
#endif

void draws_portable(uint64_t seed, uint64_t first, int64_t count, double* out) {
  draw_blocks<8>(seed, first, count, out);
}

}  // namespace

void uniform_draws_at(uint64_t seed, uint64_t first, int64_t count, double* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const int isa =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512vl")
          ? 2
      : __builtin_cpu_supports("avx2") ? 1
                                       : 0;
  if (isa == 2) return draws_avx512(seed, first, count, out);
  if (isa == 1) return draws_avx2(seed, first, count, out);
#endif
  draws_portable(seed, first, count, out);
}

void native_draws_refill(NativeDraws& d) {
  const int64_t n = d.next_batch;
  uint64_t seed = 0;
  d.first = reserve_random_stream(static_cast<uint64_t>(n), seed);
  uniform_draws_at(seed, d.first, n, d.buf);
  d.pos = 0;
  d.len = n;
  d.next_batch = std::min<int64_t>(2 * n, NativeDraws::kMax);
}

void native_draws_settle(NativeDraws& d) {
  if (d.len > d.pos) {
    rewind_random_stream(d.first + static_cast<uint64_t>(d.len),
                         d.first + static_cast<uint64_t>(d.pos));
  }
  d.pos = d.len = 0;
}

}  // namespace tessera
