// Native code for calls of jit functions (docs/runtime.md, "Calls and
// recursion"): a function whose arguments are Python numbers and arrays and
// whose body is scalar code (arithmetic, comparisons, if, return, element
// reads and writes, calls of itself and of other such functions) is compiled
// with LLVM into one native function per (function, kinds of its arguments),
// recursion a plain call. No LLVM
// header is included here: they stay in native_calls.cpp and
// native_calls_gen.cpp (the code generator).
#pragma once

#include <cstddef>
#include <cstdint>
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

// A native loop's call of a recursive jit function on numbers (fastloop's
// Op::NativeCall, native_gen_calls.cpp): `kinds` are the arguments' register
// kinds (Reg::Kind of Python's and NumPy's numbers, at most 8). True when
// the function compiles for them, with its result's register kind in `ret`.
bool native_call_prepare(const Closure& closure, const std::vector<uint8_t>& kinds, uint8_t& ret);

// Runs the code native_call_prepare made on the registers' payloads
// (`words`: an int, a float's bits, a bool 0 or 1) and sets `result` (the
// result register's payload) and `ret` (its kind); false when it is to run
// on the general path (the code bailed, or the functions it calls are
// others now). Numbers only: the code writes nothing. A `ret` other than
// Reg::Undef is the kind the caller's code was made for: a function whose
// result has another kind gives false.
bool native_call_words(const Closure& closure, const uint8_t* kinds, size_t n,
                       const int64_t* words, int64_t& result, uint8_t& ret);

// The entry of the code native_call_prepare made, for a loop's code to call
// directly (`int32_t entry(const int64_t* words, int64_t* result, int32_t*
// ctx)`, ctx an NcContext: numbers only, so its log stays empty), after the
// checks native_call_words makes (the functions the code calls are still
// those it was compiled for, its result of kind `ret`); null when the call
// is the general path's. The guards hold while no frame changes: for the
// rest of one native call of the loop, whose assignments reach the frames
// when it returns.
void* native_call_entry(const Closure& closure, const uint8_t* kinds, size_t n, uint8_t ret);

}  // namespace tessera
