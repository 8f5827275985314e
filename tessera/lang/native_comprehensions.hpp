// Lists built by comprehensions and concatenation in native loops
// (docs/runtime.md, "Comprehensions and list concatenation in native
// code"): the helpers the generated code calls for `a + b` of two lists.
// Called through NativeCtx::helpers only.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// a + b of the lists at object indices `a` and `b` (lists, not tuples or
// strings): a new list of a's items then b's, placed in the interpreter's
// objects as its own `+` places it (released by its sweep between turns);
// its object index, or -1 for anything else (the interpreter's, which
// gives what Python gives or raises).
extern "C" int64_t native_list_concat(NativeCtx* c, int64_t a, int64_t b);

}  // namespace tessera
