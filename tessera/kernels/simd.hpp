// The host's widest SIMD, chosen at run time: the hot elementwise and fused
// loops are compiled three times (baseline x86-64 SSE2, AVX2, AVX-512) and
// simd_call runs the variant of the active level. The variants give the same
// bits: the kernels are built with -ffp-contract=off (no fused multiply-add
// from the AVX-512/FMA instruction sets) and no loop reorders a reduction.
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera {

enum class SimdLevel : uint8_t { sse2, avx2, avx512 };

// "sse2", "avx2", "avx512".
const char* simd_name(SimdLevel level);
// The widest level this CPU (and its operating system) runs.
SimdLevel simd_best();
// The level the kernels use: TESSERA_SIMD=sse2|avx2|avx512 when set (read
// once; an unknown name or a level the CPU lacks throws ValueError naming the
// variable, the value and the levels available), else simd_best().
SimdLevel simd_level();
// Chooses the level for the kernels (tests, benchmarks); a level the CPU
// lacks throws ValueError.
void set_simd_level(SimdLevel level);
// The level of a name ("sse2", "avx2", "avx512"); ValueError otherwise, naming `what`.
SimdLevel simd_level_of(const char* name, const char* what);

namespace detail {
extern std::atomic<int> g_simd_level;  // -1: not chosen yet
SimdLevel resolve_simd_level();
}  // namespace detail

inline SimdLevel active_simd() {
  const int l = detail::g_simd_level.load(std::memory_order_relaxed);
  return l >= 0 ? static_cast<SimdLevel>(l) : detail::resolve_simd_level();
}

}  // namespace tessera

namespace tessera::kernels {

namespace detail {

// Each variant is a function of its own, compiled for its instruction set; the
// loop (Loop::run, always inlined) is compiled into it. Functions the loop
// calls that are not inlined keep the baseline code, so nothing compiled for
// AVX2/AVX-512 runs on a CPU without them.
template <class Loop, class... A>
[[gnu::noinline]] __attribute__((target("avx2"))) void simd_avx2(A... a) {
  Loop::run(a...);
}

template <class Loop, class... A>
[[gnu::noinline]] __attribute__((target("avx2,avx512f,avx512vl,avx512bw,avx512dq")))
void simd_avx512(A... a) {
  Loop::run(a...);
}

}  // namespace detail

// Runs Loop::run(a...) compiled for the active SIMD level. Loop::run is a
// static [[gnu::always_inline]] function; its arguments are passed by value.
template <class Loop, class... A>
inline void simd_call(A... a) {
  switch (active_simd()) {
    case SimdLevel::avx512: return detail::simd_avx512<Loop>(a...);
    case SimdLevel::avx2: return detail::simd_avx2<Loop>(a...);
    case SimdLevel::sse2: break;
  }
  Loop::run(a...);
}

}  // namespace tessera::kernels
