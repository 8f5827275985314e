#include "tessera/kernels/simd.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "tessera/core/error.hpp"

namespace tessera {

namespace detail {
std::atomic<int> g_simd_level{-1};
}  // namespace detail

const char* simd_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::sse2: return "sse2";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
  }
  return "?";
}

SimdLevel simd_best() {
#if defined(__x86_64__)
  static const SimdLevel best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
      return SimdLevel::avx512;
    }
    if (__builtin_cpu_supports("avx2")) return SimdLevel::avx2;
    return SimdLevel::sse2;
  }();
  return best;
#else
  return SimdLevel::sse2;
#endif
}

SimdLevel simd_level_of(const char* name, const char* what) {
  for (SimdLevel l : {SimdLevel::sse2, SimdLevel::avx2, SimdLevel::avx512}) {
    if (std::strcmp(name, simd_name(l)) == 0) return l;
  }
  throw std::invalid_argument(error_message("[", what, "] unknown SIMD level '", name,
                                            "': expected sse2, avx2 or avx512 (this CPU: up to ",
                                            simd_name(simd_best()), ")"));
}

namespace {

void check_available(SimdLevel level, const char* what) {
  if (level > simd_best()) {
    throw std::invalid_argument(error_message("[", what, "] this CPU does not run ",
                                              simd_name(level), ": its widest level is ",
                                              simd_name(simd_best())));
  }
}

std::mutex& level_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

SimdLevel detail::resolve_simd_level() {
  std::lock_guard<std::mutex> lock(level_mutex());
  if (const int l = g_simd_level.load(); l >= 0) return static_cast<SimdLevel>(l);
  SimdLevel level = simd_best();
  if (const char* env = std::getenv("TESSERA_SIMD"); env != nullptr && *env != '\0') {
    level = simd_level_of(env, "TESSERA_SIMD");
    check_available(level, "TESSERA_SIMD");
  }
  g_simd_level.store(static_cast<int>(level));
  return level;
}

SimdLevel simd_level() { return active_simd(); }

void set_simd_level(SimdLevel level) {
  check_available(level, "set_simd_level");
  std::lock_guard<std::mutex> lock(level_mutex());
  detail::g_simd_level.store(static_cast<int>(level));
}

}  // namespace tessera
