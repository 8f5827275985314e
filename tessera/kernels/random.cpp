#include "tessera/kernels/random.hpp"

#include <cmath>
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

void philox4x32_many(const RandomKey& key, uint64_t first, int64_t count, uint32_t* out) {
  const uint64_t mixed = mix64(key.seed ^ mix64(key.stream));
  const uint32_t key0 = static_cast<uint32_t>(mixed), key1 = static_cast<uint32_t>(mixed >> 32);
  const uint32_t s0 = static_cast<uint32_t>(key.stream), s1 = static_cast<uint32_t>(key.stream >> 32);
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

void uniform_fill_range(Array& out, const RandomKey& key, double low, double high, int64_t begin,
                        int64_t end, int64_t counter_offset) {
  const double span = high - low;
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* p = out.data<T>();
      for (int64_t i = begin; i < end; ++i) {
        auto w = philox4x32(key, static_cast<uint64_t>(i + counter_offset));
        T v = static_cast<T>(low + span * unit_double(w[0], w[1]));
        // Rounding to float32 (or a huge span) can land on `high`; keep the
        // interval half-open.
        if (v >= static_cast<T>(high) && high > low) v = std::nextafter(static_cast<T>(high), T(low));
        p[i] = v;
      }
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
      for (int64_t i = begin; i < end; ++i) {
        auto w = philox4x32(key, static_cast<uint64_t>(i + counter_offset));
        double u1 = 1.0 - unit_double(w[0], w[1]);  // (0, 1]: log stays finite
        double u2 = unit_double(w[2], w[3]);
        double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
        p[i] = static_cast<T>(mean + std * z);
      }
    }
  });
}

void integers_fill_range(Array& out, const RandomKey& key, int64_t low, int64_t high,
                         int64_t begin, int64_t end, int64_t counter_offset) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  int64_t* p = out.data<int64_t>();
  for (int64_t i = begin; i < end; ++i) {
    uint64_t r = bounded(key, static_cast<uint64_t>(i + counter_offset), range);
    p[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + r);
  }
}

std::vector<int64_t> random_permutation(int64_t n, const RandomKey& key) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(bounded(key, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace tessera::kernels
