// Task resilience (HPX's resiliency module as primitives of the language):
// replay and replicate are registered in resilience.cpp, the fault injector
// is faults.hpp. See docs/resilience.md.
#pragma once

#include <cstdint>

#include "tessera/core/value.hpp"

namespace tessera {

// A 64-bit checksum of a value, bitwise: kind, dtype, shape and the bytes of
// every element in C order (so 0.0 and -0.0 differ, a NaN equals only the
// same NaN, and a strided view sums as its packed copy). replicate's
// consensus compares these.
uint64_t value_checksum(const Value& v);

}  // namespace tessera
