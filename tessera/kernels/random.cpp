#include "tessera/kernels/random.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tessera::kernels {

namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

// SplitMix64 finalizer: spreads a 64-bit value so nearby seeds and streams
// give unrelated keys.
uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform 64-bit value below `range` (range > 0) for element `i`, by
// Lemire's multiply-and-reject; rejections move on to further counters of a
// sub-stream of element i, so the result still depends on i alone.
uint64_t bounded(const RandomKey& key, uint64_t i, uint64_t range) {
  RandomKey k = key;
  for (uint64_t attempt = 0;; ++attempt) {
    auto w = attempt == 0 ? philox4x32(key, i) : philox4x32(k, i);
    for (int h = 0; h < 2; ++h) {
      uint64_t x = (static_cast<uint64_t>(w[2 * h]) << 32) | w[2 * h + 1];
      unsigned __int128 m = static_cast<unsigned __int128>(x) * range;
      uint64_t lo = static_cast<uint64_t>(m);
      if (lo >= range || lo >= (0 - range) % range) return static_cast<uint64_t>(m >> 64);
    }
    k.stream = mix64(key.stream ^ (attempt + 1) * 0xA24BAED4963EE407ull);
  }
}

}  // namespace

std::array<uint32_t, 4> philox4x32(const RandomKey& key, uint64_t counter) {
  uint64_t mixed = mix64(key.seed ^ mix64(key.stream));
  uint32_t k0 = static_cast<uint32_t>(mixed), k1 = static_cast<uint32_t>(mixed >> 32);
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = static_cast<uint32_t>(key.stream), c3 = static_cast<uint32_t>(key.stream >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

namespace {

// philox4x32 of `count` consecutive counters from `first`, eight at a time
// in arrays the compiler may vectorise (the portable path, and the tail).
void philox_many_portable(uint32_t key0, uint32_t key1, uint32_t s0, uint32_t s1, uint64_t first,
                          int64_t count, uint32_t* out) {
  constexpr int kLanes = 8;
  for (int64_t b = 0; b < count; b += kLanes) {
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t counter = first + static_cast<uint64_t>(b + l);
      c0[l] = static_cast<uint32_t>(counter);
      c1[l] = static_cast<uint32_t>(counter >> 32);
      c2[l] = s0;
      c3[l] = s1;
    }
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      for (int l = 0; l < kLanes; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0[l];
        const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = static_cast<uint32_t>(p1);
        c3[l] = static_cast<uint32_t>(p0);
        c0[l] = n0;
        c2[l] = n2;
      }
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const int n = static_cast<int>(std::min<int64_t>(kLanes, count - b));
    for (int l = 0; l < n; ++l) {
      uint32_t* w = out + 4 * (b + l);
      w[0] = c0[l];
      w[1] = c1[l];
      w[2] = c2[l];
      w[3] = c3[l];
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)

// The explicit vector paths: one counter per 32-bit lane. A round needs the
// full 64-bit products of 32-bit lanes: _mm*_mul_epu32 multiplies the even
// lanes, so the odd lanes are shifted down and multiplied separately, and
// the high and low halves are blended back into lanes. The words are then
// transposed from lane-per-counter to counter-by-counter order. Whole blocks
// of lanes only; the caller does the rest portably.

// GCC 12's AVX-512 headers warn that their own _mm512_undefined_* values may
// be used uninitialised (a false positive in the set1/mask intrinsics).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) int64_t philox_many_avx512(uint32_t key0, uint32_t key1,
                                                              uint32_t s0, uint32_t s1,
                                                              uint64_t first, int64_t count,
                                                              uint32_t* out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i mul0 = _mm512_set1_epi32(static_cast<int>(kMul0));
  const __m512i mul1 = _mm512_set1_epi32(static_cast<int>(kMul1));
  const __m512i one = _mm512_set1_epi32(1);
  const __mmask16 odd = 0xAAAA;
  int64_t b = 0;
  for (; b + 16 <= count; b += 16) {
    const uint64_t base = first + static_cast<uint64_t>(b);
    const __m512i base_lo = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base)));
    __m512i c0 = _mm512_add_epi32(base_lo, lane);
    __m512i c1 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base >> 32)));
    c1 = _mm512_mask_add_epi32(c1, _mm512_cmplt_epu32_mask(c0, base_lo), c1, one);  // carries
    __m512i c2 = _mm512_set1_epi32(static_cast<int>(s0));
    __m512i c3 = _mm512_set1_epi32(static_cast<int>(s1));
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      const __m512i e0 = _mm512_mul_epu32(c0, mul0),
                    o0 = _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), mul0);
      const __m512i e1 = _mm512_mul_epu32(c2, mul1),
                    o1 = _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), mul1);
      const __m512i lo0 = _mm512_mask_blend_epi32(odd, e0, _mm512_slli_epi64(o0, 32));
      const __m512i hi0 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(e0, 32), o0);
      const __m512i lo1 = _mm512_mask_blend_epi32(odd, e1, _mm512_slli_epi64(o1, 32));
      const __m512i hi1 = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(e1, 32), o1);
      // 0x96: a ^ b ^ c.
      c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32(static_cast<int>(k0)), 0x96);
      c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32(static_cast<int>(k1)), 0x96);
      c1 = lo1;
      c3 = lo0;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    // Per 128-bit lane k, u_j holds the four words of counter 4k + j.
    const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const __m512i a = _mm512_shuffle_i32x4(u0, u1, 0x44), c = _mm512_shuffle_i32x4(u0, u1, 0xEE);
    const __m512i d = _mm512_shuffle_i32x4(u2, u3, 0x44), e = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    uint32_t* w = out + 4 * b;
    _mm512_storeu_si512(w, _mm512_shuffle_i32x4(a, d, 0x88));
    _mm512_storeu_si512(w + 16, _mm512_shuffle_i32x4(a, d, 0xDD));
    _mm512_storeu_si512(w + 32, _mm512_shuffle_i32x4(c, e, 0x88));
    _mm512_storeu_si512(w + 48, _mm512_shuffle_i32x4(c, e, 0xDD));
  }
  return b;
}
#pragma GCC diagnostic pop

__attribute__((target("avx2"))) int64_t philox_many_avx2(uint32_t key0, uint32_t key1, uint32_t s0,
                                                         uint32_t s1, uint64_t first, int64_t count,
                                                         uint32_t* out) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mul0 = _mm256_set1_epi32(static_cast<int>(kMul0));
  const __m256i mul1 = _mm256_set1_epi32(static_cast<int>(kMul1));
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  int64_t b = 0;
  for (; b + 8 <= count; b += 8) {
    const uint64_t base = first + static_cast<uint64_t>(b);
    const __m256i base_lo = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(base)));
    __m256i c0 = _mm256_add_epi32(base_lo, lane);
    // A carry where the low word wrapped (c0 < base, unsigned: compared with
    // the sign bits flipped); the mask is -1 there, so subtracting adds one.
    const __m256i carry =
        _mm256_cmpgt_epi32(_mm256_xor_si256(base_lo, sign), _mm256_xor_si256(c0, sign));
    __m256i c1 = _mm256_sub_epi32(
        _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(base >> 32))), carry);
    __m256i c2 = _mm256_set1_epi32(static_cast<int>(s0));
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(s1));
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      const __m256i e0 = _mm256_mul_epu32(c0, mul0),
                    o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), mul0);
      const __m256i e1 = _mm256_mul_epu32(c2, mul1),
                    o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), mul1);
      const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c1 = lo1;
      c3 = lo0;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    // Per 128-bit lane k, u_j holds the four words of counter 4k + j.
    const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    uint32_t* w = out + 4 * b;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w), _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 8), _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 16),
                        _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + 24),
                        _mm256_permute2x128_si256(u2, u3, 0x31));
  }
  return b;
}

// 2: AVX-512F, 1: AVX2, 0: neither (asked once).
int philox_isa() {
  static const int isa = __builtin_cpu_supports("avx512f") ? 2
                         : __builtin_cpu_supports("avx2")  ? 1
                                                           : 0;
  return isa;
}

#else

int philox_isa() { return 0; }

#endif

}  // namespace

void philox4x32_many(const RandomKey& key, uint64_t first, int64_t count, uint32_t* out) {
  philox4x32_many_isa(philox_isa(), key, first, count, out);
}

void philox4x32_many_isa(int isa, const RandomKey& key, uint64_t first, int64_t count,
                         uint32_t* out) {
  const uint64_t mixed = mix64(key.seed ^ mix64(key.stream));
  const uint32_t key0 = static_cast<uint32_t>(mixed), key1 = static_cast<uint32_t>(mixed >> 32);
  const uint32_t s0 = static_cast<uint32_t>(key.stream),
                 s1 = static_cast<uint32_t>(key.stream >> 32);
  int64_t done = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  isa = std::min(isa, philox_isa());
  if (isa >= 2) done = philox_many_avx512(key0, key1, s0, s1, first, count, out);
  if (isa >= 1)
    done += philox_many_avx2(key0, key1, s0, s1, first + done, count - done, out + 4 * done);
#else
  (void)isa;
#endif
  philox_many_portable(key0, key1, s0, s1, first + done, count - done, out + 4 * done);
}

namespace {

// Counters per block of philox4x32_many's words: 4 KB of words on the stack,
// a whole number of AVX-512 vectors.
constexpr int64_t kRandomBlock = 256;

// Calls body(i, w) for each element i of [begin, end) with the four words of
// its counter i + counter_offset, the words made a block at a time by
// philox4x32_many (the same words as philox4x32, several counters per vector).
template <typename Body>
void for_each_counter_words(const RandomKey& key, int64_t begin, int64_t end,
                            int64_t counter_offset, Body&& body) {
  alignas(64) uint32_t words[4 * kRandomBlock];
  for (int64_t b = begin; b < end; b += kRandomBlock) {
    const int64_t n = std::min(kRandomBlock, end - b);
    philox4x32_many(key, static_cast<uint64_t>(b + counter_offset), n, words);
    for (int64_t j = 0; j < n; ++j) body(b + j, words + 4 * j);
  }
}

}  // namespace

void uniform_fill_range(Array& out, const RandomKey& key, double low, double high, int64_t begin,
                        int64_t end, int64_t counter_offset) {
  const double span = high - low;
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* p = out.data<T>();
      for_each_counter_words(key, begin, end, counter_offset, [&](int64_t i, const uint32_t* w) {
        T v = static_cast<T>(low + span * unit_double(w[0], w[1]));
        // Rounding to float32 (or a huge span) can land on `high`; keep the
        // interval half-open.
        if (v >= static_cast<T>(high) && high > low)
          v = std::nextafter(static_cast<T>(high), T(low));
        p[i] = v;
      });
    }
  });
}

void normal_fill_range(Array& out, const RandomKey& key, double mean, double std, int64_t begin,
                       int64_t end, int64_t counter_offset) {
  constexpr double kTwoPi = 6.283185307179586476925;
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* p = out.data<T>();
      for_each_counter_words(key, begin, end, counter_offset, [&](int64_t i, const uint32_t* w) {
        double u1 = 1.0 - unit_double(w[0], w[1]);  // (0, 1]: log stays finite
        double u2 = unit_double(w[2], w[3]);
        double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
        p[i] = static_cast<T>(mean + std * z);
      });
    }
  });
}

void integers_fill_range(Array& out, const RandomKey& key, int64_t low, int64_t high, int64_t begin,
                         int64_t end, int64_t counter_offset) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  int64_t* p = out.data<int64_t>();
  // bounded()'s first attempt on the words made a block at a time (the same
  // words as its philox4x32 of the counter); the rare element both halves of
  // reject goes through bounded() itself, which repeats that attempt and
  // moves on: the same value either way.
  for_each_counter_words(key, begin, end, counter_offset, [&](int64_t i, const uint32_t* w) {
    for (int h = 0; h < 2; ++h) {
      const uint64_t x = (static_cast<uint64_t>(w[2 * h]) << 32) | w[2 * h + 1];
      const unsigned __int128 m = static_cast<unsigned __int128>(x) * range;
      const auto lo = static_cast<uint64_t>(m);
      if (lo >= range || lo >= (0 - range) % range) {
        p[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + static_cast<uint64_t>(m >> 64));
        return;
      }
    }
    const uint64_t r = bounded(key, static_cast<uint64_t>(i + counter_offset), range);
    p[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + r);
  });
}

std::vector<int64_t> random_permutation(int64_t n, const RandomKey& key) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j =
        static_cast<int64_t>(bounded(key, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace tessera::kernels
