// Native code for calls of jit functions (docs/runtime.md, "Calls and
// recursion"): a function whose arguments are Python numbers and arrays and
// whose body is scalar code (arithmetic, comparisons, if, return, element
// reads and writes, calls of itself and of other such functions) is compiled
// with LLVM into one native function per (function, kinds of its arguments),
// recursion a plain call. No LLVM
// header is included here: they stay in native_calls.cpp.
#pragma once

#include <vector>

#include "tessera/core/value.hpp"

namespace tessera {

class Closure;

// Runs `closure(args...)` as native code: true with `out` set when the code
// ran to its end; false when the call is to run on the general path (not
// compilable, said once under TESSERA_NATIVE=debug; or the code bailed: an
// error to report, an overflow of Python's int, recursion too deep; its
// writes to arrays are undone then). Throws MemoryError when the code bailed
// and its writes could not be undone (no memory for their log).
bool native_call(const Closure& closure, const std::vector<Value>& args, Value& out);

}  // namespace tessera
