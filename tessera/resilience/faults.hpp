// The fault injector: makes the function calls run under replay and
// replicate (resilience.cpp) fail, or return silently corrupted results,
// with given probabilities, so that tests and demos can show that the
// primitives recover from faults and catch corruption.
//
// Faults are injected only there: into the result of each attempt of
// replay and each copy of replicate, before validation and voting. Every
// other primitive and function call is untouched. Draws are keyed by (seed,
// the replay/replicate call's serial number, the attempt or copy index), not
// by a shared stream, so a seeded run injects the same faults whatever the
// timing of the copies' tasks.
//
// Set from the environment, TESSERA_INJECT_FAULTS="throw=0.1,bitflip=0.01,
// seed=7,only=NAME" (read at the first replay or replicate), or from code
// with set_fault_injection (Python: tessera.resilience.inject_faults).
// Off, the injector costs one relaxed atomic load per attempt.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/value.hpp"

namespace tessera {

struct FaultConfig {
  // Probability that an attempt fails with an injected error instead of
  // returning its result.
  double throw_probability = 0.0;
  // Probability that one random bit of the result (of one of its arrays or
  // numbers) is flipped: silent data corruption.
  double bitflip_probability = 0.0;
  uint64_t seed = 0;
  // Only calls of the function of this name are faulted (empty: every one).
  std::string only;

  // "throw=0.1,bitflip=0.01,seed=7,only=f" (the parts that are set).
  std::string str() const;
};

// Parses "throw=P,bitflip=P,seed=S,only=NAME" (any subset, in any order;
// probabilities in [0, 1]). Throws ValueError naming `source` (the variable
// or function it came from), the item and the text.
FaultConfig parse_fault_config(std::string_view text, std::string_view source);

// Turns injection on with `config` (and restarts the call serial numbers, so
// the same program injects the same faults again), or off.
void set_fault_injection(const FaultConfig& config);
void clear_fault_injection();
// The configuration in force (nullopt: off).
std::optional<FaultConfig> fault_injection();

namespace detail {
extern std::atomic<bool> g_fault_injection_on;
}  // namespace detail

// True while injection is on: the one branch paid when it is off.
// TESSERA_INJECT_FAULTS is read when the library loads.
inline bool fault_injection_on() {
  return detail::g_fault_injection_on.load(std::memory_order_relaxed);
}

// Throws the ValueError of a malformed TESSERA_INJECT_FAULTS (which turns
// injection on, so that the mistake is reported rather than ignored), naming
// `op`; nothing otherwise. Called by replay and replicate when injection is on.
void check_fault_environment(const char* op);

// Faults injected since injection was last set.
struct FaultCounts {
  uint64_t calls = 0;     // results that went through the injector
  uint64_t throws = 0;    // attempts failed on purpose
  uint64_t bitflips = 0;  // results with a bit flipped
};
FaultCounts fault_counts();

// A serial number for one call of replay or replicate (keys its draws).
uint64_t next_fault_call();

// The injector applied to `result`, the value of attempt (or copy) `index`
// of a call of function `fn` made by the call `call` of `op` (replay,
// replicate) at `where` ("file:line:col"): throws a RuntimeError
// "[inject_faults] ..." or returns `result` with one bit flipped (in a
// copy: the arrays the function returned are left as they were), or as is.
Value inject_fault(Value result, uint64_t call, int index, const std::string& fn, const char* op,
                   const std::string& where);

}  // namespace tessera
